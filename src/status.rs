//! Per-watch status, written by the engine alone.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use crate::batch::change::ChangeBatch;
use crate::ids::Generation;
use crate::spec::choice::Backend;

/// How many recent batches a [`WatchStatus`] keeps.
pub const RECENT_BATCHES: usize = 20;

/// Where a watch is in its life.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Phase {
    /// The spec was accepted and the engine has not set up its watching yet.
    Starting,
    /// Every path of the spec is being watched.
    Watching,
    /// Watching is established but incomplete; `reason` says what is missing
    /// (a path that does not exist yet, a directory that could not be read or
    /// watched). Changes are still delivered for the rest.
    Degraded {
        /// Human-readable, names the paths involved.
        reason: String,
    },
    /// Nothing could be watched; `error` says why.
    Failed {
        /// Human-readable, names the path involved.
        error: String,
    },
}

impl fmt::Display for Phase {
    /// `starting`, `watching`, `degraded: REASON` or `failed: ERROR`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Phase::Starting => f.write_str("starting"),
            Phase::Watching => f.write_str("watching"),
            Phase::Degraded { reason } => write!(f, "degraded: {reason}"),
            Phase::Failed { error } => write!(f, "failed: {error}"),
        }
    }
}

/// How far the first walk of a spec's tree has got: what
/// [`WatchStatus::progress`] says while the phase is `Starting`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Progress {
    /// Directories watched and read so far.
    pub dirs: usize,
    /// Entries (files, directories, links) read so far.
    pub entries: usize,
}

/// How one root of a spec is watched, and why: one entry of
/// [`WatchStatus::roots`].
///
/// Its `Display` is one line, for logs: `poll every 1s: fuse (0x65735546)
/// at /mnt/charts`, `native: ext4 (0xef53) at /src`, `poll every 100ms:
/// chosen at /srv/data`; on macOS `poll every 1s: smbfs at
/// /Volumes/charts`, on Windows `poll every 1s: NTFS on a network drive at
/// \\\\srv\\charts`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct RootStatus {
    /// The root (normalised, as in the spec).
    pub path: PathBuf,
    /// What watches it: `Native`, `Portable` or `Poll { interval }`
    /// (never `Auto`).
    pub backend: Backend,
    /// Why.
    pub reason: BackendReason,
    /// Since when the file system the root is on has been unmounted: its
    /// path leads to the file system below the mount. Known for polled
    /// roots (`Poll`, or `Auto` on a shared file system). Meanwhile the
    /// spec is `Degraded`, nothing below the root is reported, and what
    /// was known of it is kept; once a file system is mounted there again,
    /// the changes made meanwhile are reported and this is `None` again.
    #[cfg_attr(feature = "serde", serde(default))]
    pub unmounted_since: Option<SystemTime>,
}

/// Why a root is watched the way [`RootStatus::backend`] says.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum BackendReason {
    /// The spec, or the manager's default for specs that do not say, named
    /// this backend.
    Chosen,
    /// [`Backend::Auto`] found a file system whose kernel reports its
    /// changes (the root, or its nearest existing ancestor, is on it).
    Local {
        /// Its name, where known (`ext4`, `tmpfs` on Linux, from
        /// specwatch's table; `apfs`, `ufs` on macOS and FreeBSD, `NTFS`
        /// on Windows, as the OS names it).
        file_system: Option<String>,
        /// Linux's `statfs` `f_type`; `None` on platforms that name file
        /// systems by name only (macOS, FreeBSD, Windows).
        magic: Option<u64>,
    },
    /// [`Backend::Auto`] found a file system whose changes make no event
    /// here: network, cluster or FUSE (writes made elsewhere), or a pseudo
    /// file system such as `/proc` or `/sys` (the kernel's own): polled.
    Shared {
        /// Its name (`nfs`, `fuse`, `cifs` on Linux; `smbfs`, `macfuse`,
        /// `fusefs.sshfs` on macOS and FreeBSD; `NTFS on a network drive`
        /// on Windows).
        file_system: String,
        /// Linux's `statfs` `f_type`; `None` on platforms that name file
        /// systems by name only (macOS, FreeBSD, Windows).
        magic: Option<u64>,
    },
    /// [`Backend::Auto`] could not tell (no `statfs` on this platform, or
    /// it failed, the message says why): the event backend.
    Unknown {
        /// Why.
        error: String,
    },
}

impl fmt::Display for RootStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.backend)?;
        match &self.reason {
            BackendReason::Chosen => f.write_str("chosen")?,
            BackendReason::Local { file_system, magic } => FsName(
                file_system.as_deref().unwrap_or("local file system"),
                *magic,
            )
            .fmt(f)?,
            BackendReason::Shared { file_system, magic } => FsName(file_system, *magic).fmt(f)?,
            BackendReason::Unknown { error } => write!(f, "file system unknown ({error})")?,
        }
        write!(f, " at {}", self.path.display())
    }
}

/// A version-control lock that holds a spec's batches: what
/// [`WatchStatus::vcs_lock`] says (see
/// [`WatchOptions::vcs_settle`](crate::WatchOptions::vcs_settle)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct VcsLock {
    /// The lock file (`/src/app/.git/index.lock`, `/src/app/.hg/wlock`).
    pub path: PathBuf,
    /// When a batch was first held for it (wall clock).
    pub since: SystemTime,
    /// It outlived the bound (`vcs_settle`), as a lock left behind by a
    /// crashed `git` does: batches are delivered without waiting for it
    /// until it is seen gone. `false`: the spec's batch is held.
    pub overdue: bool,
}

/// One hold on a spec's batches: an entry of [`WatchStatus::holds`].
///
/// A hold keeps a spec's batch open past the time it would close, so
/// that it is delivered whole (a `git checkout`, a file being written, a
/// program at work: see [`HoldReason`]), or lets batches go without it
/// once it has lasted too long (`overdue`). Its `Display` is one line,
/// for logs: `vcs lock /src/.git/index.lock (overdue)`, `2 files being
/// written`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct HoldStatus {
    /// Why the batch is held.
    pub reason: HoldReason,
    /// Since when (wall clock).
    pub since: SystemTime,
    /// Until when at most (wall clock): past it the batch is delivered
    /// whatever the hold says (and `overdue` says so where the hold
    /// stays). `None`: no bound of its own.
    pub until: Option<SystemTime>,
    /// It outlived its bound: batches are delivered without waiting for
    /// it, until it ends. `false`: the spec's batch is held.
    pub overdue: bool,
}

/// Why a batch is held: the kind of a [`HoldStatus`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum HoldReason {
    /// A version-control lock exists
    /// ([`WatchOptions::vcs_settle`](crate::WatchOptions::vcs_settle)):
    /// a `git checkout` under way. Bounded by `vcs_settle`.
    VcsLock {
        /// The lock file (`/src/app/.git/index.lock`).
        path: PathBuf,
    },
    /// Files of the batch are being written
    /// ([`WatchOptions::write_finished`](crate::WatchOptions::write_finished)):
    /// the batch, due by its quiet window, waits for them, to its
    /// maximum delay at most (then they move to the next batch).
    Writing {
        /// How many files are being written.
        files: usize,
    },
    /// A program declared a hold ([`Manager::hold`](crate::Manager::hold))
    /// and holds its guard: the batch is deferred or dropped
    /// ([`WatchOptions::during_holds`](crate::WatchOptions::during_holds)).
    /// Bounded by [`WatchOptions::hold_bound`](crate::WatchOptions::hold_bound).
    Declared {
        /// The label the program gave it.
        label: String,
    },
    /// A closed batch waits for its files' hashes
    /// ([`WatchOptions::skip_same_content`](crate::WatchOptions::skip_same_content)),
    /// read off the engine's thread (the spec's later batches wait
    /// behind it). A hash that does not come within
    /// [`ManagerBuilder::storage_deadline`](crate::ManagerBuilder::storage_deadline)
    /// of the last one is given up: its file is reported without one.
    /// `until` is `None`: the bound moves with each hash that comes.
    Hashing {
        /// How many files' hashes the waiting batches asked for.
        files: usize,
    },
}

impl fmt::Display for HoldStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            HoldReason::VcsLock { path } => write!(f, "vcs lock {}", path.display())?,
            HoldReason::Writing { files: 1 } => f.write_str("1 file being written")?,
            HoldReason::Writing { files } => write!(f, "{files} files being written")?,
            HoldReason::Declared { label } => write!(f, "held by {label:?}")?,
            HoldReason::Hashing { files } => write!(f, "reading the hashes of {files} files")?,
        }
        if self.overdue {
            f.write_str(" (overdue)")?;
        }
        Ok(())
    }
}

/// A file system's name, with its magic number where the platform has one:
/// `ext4 (0xef53)`, `apfs`.
pub(crate) struct FsName<'a>(pub &'a str, pub Option<u64>);

impl fmt::Display for FsName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            Some(magic) => write!(f, "{} ({magic:#x})", self.0),
            None => f.write_str(self.0),
        }
    }
}

/// The observed state of one named watch.
///
/// Written only by the engine; read it with
/// [`Manager::status`](crate::Manager::status) at any time (it never waits on
/// the engine) or receive it as [`Event::Status`](crate::Event::Status). It is
/// reset when the spec changes: `recent_batches` is emptied, the counters start
/// again, and `monitor_start_time` moves. A consumer that keeps its own
/// watermark can compare it against `max(last_event_time, monitor_start_time)`.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct WatchStatus {
    /// The spec's name.
    pub name: String,
    /// The generation this status describes.
    pub observed_generation: Generation,
    /// The phase.
    pub phase: Phase,
    /// When OS watching for this generation was (re)started: set when the spec
    /// is created or updated and whenever a root is watched again after it
    /// vanished.
    pub monitor_start_time: Option<SystemTime>,
    /// When the last batch of this generation closed.
    pub last_event_time: Option<SystemTime>,
    /// The most recent batches, oldest first, at most [`RECENT_BATCHES`].
    pub recent_batches: Vec<Arc<ChangeBatch>>,
    /// Directories of this spec that the engine reads and watches (shared
    /// directories count for every spec that covers them).
    pub watched_dirs: usize,
    /// While the phase is `Starting` on a large tree: how far the first
    /// walk has got. Published at most every 100 ms during the walk (none
    /// for a walk that takes less); `None` once watching.
    pub progress: Option<Progress>,
    /// How each root is watched and why (polled because `Auto` found a
    /// network or FUSE file system, say), in the order of the spec's
    /// normalised paths. Filled when the root is attached, and again
    /// whenever it is attached anew (it vanished and came back). A root
    /// polled by choice or by detection is `Watching`, not `Degraded`.
    pub roots: Vec<RootStatus>,
    /// Directories of this spec that are polled (every
    /// [`ManagerBuilder::poll_interval`](crate::ManagerBuilder::poll_interval))
    /// because the OS refused more watches (inotify's `max_user_watches`,
    /// `EMFILE`, or the manager's own cap). They move back to OS watches
    /// when watches are released. Non-zero makes the phase `Degraded`.
    /// Directories polled because their root's backend is `Poll` (chosen,
    /// or found by `Auto`) are not counted here: they are in
    /// `watched_dirs`.
    pub polled_dirs: usize,
    /// Attempts to watch or read a directory that failed for a reason other
    /// than the watch limit (an I/O error, permission denied), for this
    /// generation. Each such directory is tried again with backoff (50 ms,
    /// doubling, at most 30 s; at once when an event says it changed, such
    /// as the `chmod` that makes it readable again) and re-read once its
    /// watch lands; what it holds is then reported as created.
    pub watch_retries: u64,
    /// How many times lost OS events (a kernel queue overflow) were
    /// recovered from by rescanning, for this generation.
    pub overflow_recoveries: u64,
    /// Changes the OS did not report that a rescan
    /// ([`WatchOptions::rescan_every`](crate::WatchOptions::rescan_every))
    /// found and delivered, for this generation: entries created, removed
    /// or written before the rescan began with no event by then. Non-zero
    /// on a root whose file system does not deliver every change as an
    /// event (a network mount written from elsewhere): poll it instead.
    pub missed_by_os: u64,
    /// The most recent runtime error (a directory that could not be read or
    /// watched), naming the path, while the spec has any: it goes once
    /// every directory is watched and read again (and stays, with the
    /// phase `Failed`, if the engine failed). Else, for a spec with a
    /// [`state`](crate::WatchOptions::state) file whose last save failed,
    /// `state not saved: ...`, until a save succeeds.
    pub last_error: Option<String>,
    /// When `last_error` was first seen (wall clock), so that a consumer
    /// can tell a fresh error from an old one. An error that stands (a
    /// directory whose every poll or retry fails alike) keeps its time: it
    /// is not published again at each attempt.
    pub last_error_time: Option<SystemTime>,
    /// For a spec with
    /// [`vcs_settle`](crate::WatchOptions::vcs_settle): the
    /// version-control lock its batch is held for (a `git checkout`
    /// under way), or that outlived the bound (`overdue`: batches flow).
    /// `None` while no lock is seen. The phase is not changed by it.
    pub vcs_lock: Option<VcsLock>,
    /// Every hold on the spec's batches now, held or overdue (the VCS
    /// lock of [`vcs_lock`](Self::vcs_lock) among them): why, since when
    /// and until when at most. Empty while nothing holds them. The phase
    /// is not changed by them.
    #[cfg_attr(feature = "serde", serde(default))]
    pub holds: Vec<HoldStatus>,
    /// Changes that holds a program declared kept from every subscriber,
    /// for this generation (a spec with
    /// [`during_holds`](crate::WatchOptions::during_holds) `Drop`): each
    /// path of each batch dropped once. They are still in
    /// [`Manager::changes_since`](crate::Manager::changes_since)'s
    /// answers.
    #[cfg_attr(feature = "serde", serde(default))]
    pub dropped_by_holds: u64,
}

impl WatchStatus {
    /// A fresh status in phase `Starting`.
    #[cfg(test)]
    pub(crate) fn starting(name: &str, generation: Generation) -> WatchStatus {
        WatchStatus {
            name: name.to_owned(),
            observed_generation: generation,
            phase: Phase::Starting,
            monitor_start_time: None,
            last_event_time: None,
            recent_batches: Vec::new(),
            progress: None,
            roots: Vec::new(),
            watched_dirs: 0,
            polled_dirs: 0,
            watch_retries: 0,
            overflow_recoveries: 0,
            missed_by_os: 0,
            last_error: None,
            last_error_time: None,
            vcs_lock: None,
            holds: Vec::new(),
            dropped_by_holds: 0,
        }
    }
}
