//! Declarative file watching.
//!
//! A program hands specwatch **named watch specs** ([`WatchSpec`]: paths,
//! gitignore-style [`IgnoreRule`]s, batching options). The [`Manager`] keeps
//! the last applied spec per name: applying an equal spec again is a no-op
//! ([`Applied::Unchanged`]), a changed one an update with a new
//! [`Generation`]; [`Manager::reconcile`] takes the whole desired set and
//! creates, updates and deletes to match. An engine thread runs the OS
//! watchers and publishes typed [`ChangeBatch`]es and [`WatchStatus`]
//! snapshots to every [`Manager::subscribe`]r.
//!
//! ```
//! use specwatch::{Event, IgnoreRule, Manager, WatchSpec};
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let manager = Manager::new()?;
//! let events = manager.subscribe();
//! let spec = WatchSpec::new([dir.path()])
//!     .ignore(IgnoreRule::new(dir.path(), ["target/", "*.log"]))
//!     .quiet_window(Duration::from_millis(10));
//! manager.apply("src", spec)?;
//! manager.wait_watching("src", Duration::from_secs(10))?;
//!
//! std::fs::write(dir.path().join("main.rs"), "fn main() {}")?;
//! std::fs::write(dir.path().join("build.log"), "ignored")?;
//!
//! let deadline = std::time::Instant::now() + Duration::from_secs(10);
//! loop {
//!     match events.recv_deadline(deadline)? {
//!         Event::Changes(batch) => {
//!             let c = &batch.changes[0];
//!             assert!(c.path.ends_with("main.rs"));
//!             println!("{:?} {}", c.kind, c.path.display());
//!             break;
//!         }
//!         _ => continue, // status snapshots
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # How it watches
//!
//! OS events are hints; the tree is the truth. The engine keeps an index of
//! every watched directory's entries (name and type). Each event makes it
//! look at the file system (`lstat` of the name, or a read of a new
//! directory) and diff against the index; only the diff becomes
//! [`Change`]s. So duplicates vanish, an atomic save (temporary file renamed
//! over the target) is one `Modified` of the target, and files written into
//! a new directory before its watch landed are still reported: a new
//! directory is watched first, then read.
//!
//! On Linux the [`Backend::Native`] backend drives inotify directly: one
//! instance per manager, one watch per directory shared by every spec that
//! covers it, none for directories that every covering spec ignores (unless
//! a `!` pattern could re-include something below), and a mask without
//! `IN_OPEN`. [`Backend::Portable`] uses `notify`'s recommended watcher with
//! one recursive watch per root; it is the default elsewhere and can be
//! chosen on Linux. [`Backend::Poll`] asks the OS nothing: it reads every
//! watched directory and `stat`s its entries once per interval (and at once
//! for a [`Manager::sync`]), for network and FUSE mounts where the kernel
//! does not see other machines' writes; what it finds goes through the same
//! index diff, so it reports what the OS backends report.
//!
//! The backend is chosen per spec ([`WatchSpec::backend`]; the manager's
//! is the default). [`Backend::Auto`], the default, checks each root's
//! file system with `statfs` and polls those on NFS, SMB, FUSE and other
//! shared file systems; [`WatchStatus::roots`] says what each root got and
//! why. For servers that share storage between replicas,
//! [`WatchOptions::initial_scan`] builds a cache from batches alone,
//! [`Manager::changes_since`] catches a consumer up after a short absence
//! (or tells it to rebuild), and [`WatchOptions::rescan_every`] checks
//! natively watched roots against the disk and counts what the OS missed.
//!
//! # Never losing a change
//!
//! - [`Manager::sync`] is a barrier (cookie files, as Watchman does): when it
//!   returns, every change made before the call has been delivered.
//! - A kernel queue overflow makes the engine re-read every indexed
//!   directory and diff it: created and removed entries are exact, and files
//!   whose ctime is newer than the last complete read (minus
//!   [`ManagerBuilder::overflow_margin`]) are reported modified. Directories
//!   first read after the loss are not read again; the others are read (and
//!   their files `stat`ed) on worker threads, applied by the engine in
//!   order.
//! - When the OS refuses more watches (`ENOSPC`, `EMFILE`, or
//!   [`ManagerBuilder::max_os_watches`]) the directories left over are
//!   polled; [`WatchStatus::polled_dirs`] counts them and the phase is
//!   `Degraded`. They get OS watches again once watches are released.
//! - A directory that cannot be watched or read for another reason
//!   (permission denied, an I/O error) leaves the rest watched; the phase is
//!   `Degraded` and names it, and it is tried again with backoff (at once
//!   when an event says it changed, such as a `chmod`). Once it can be read,
//!   its contents are reported as created.
//! - A root that does not exist yet is watched from its nearest existing
//!   ancestor (only the name leading to it); a deleted root is reported
//!   removed and watched again when it reappears.
//! - A subscriber that does not read never blocks the engine: its pending
//!   batches are merged per path, so its backlog is bounded by the number of
//!   distinct changed paths.
//!
//! # One batch per `git checkout`
//!
//! A checkout that rewrites thousands of files can take longer than a
//! batch's [`max_delay`](WatchOptions::max_delay) and arrive in several
//! batches (several rebuilds, the first of a half-written tree). With
//! [`WatchOptions::vcs_settle`] a spec's batch is held while the lock of
//! the repository holding its roots exists (`.git/index.lock`,
//! `.hg/wlock`: git holds its lock for the whole checkout), and delivered
//! as one once it is gone, as Watchman defers its subscriptions. Bounded:
//! past the bound batches flow, and [`WatchStatus::vcs_lock`] says the lock
//! is overdue (a lock left behind by a crashed `git`). Off by default.
//!
//! ```no_run
//! use specwatch::{DEFAULT_VCS_SETTLE, Manager, WatchSpec};
//! # fn main() -> Result<(), specwatch::Error> {
//! let m = Manager::new()?;
//! m.apply("app", WatchSpec::new(["/src/app"]).vcs_settle(DEFAULT_VCS_SETTLE))?;
//! # Ok(()) }
//! ```
//!
//! # Changes since the last run
//!
//! A spec with [`WatchOptions::state`] keeps what it saw in a file: saved
//! atomically at most every [`WatchOptions::save_every`] while it changes,
//! when the manager is dropped, and by [`Manager::save`] (which returns the
//! [`Seq`] it reflects). The next manager to create the spec (the next run)
//! reads it, and the spec's first batch is the exact net difference between
//! the saved state and the disk, marked [`Restore::Restored`] (even when
//! empty); a file that cannot be used (missing, truncated, corrupt, another
//! spec's or format's, a root on another file system) gives
//! [`Restore::Refused`] with the reason instead: rebuild from scratch. A
//! [`Seq`] carries the instance that issued it, so a seq from an earlier run
//! is never taken for one of this run's, and the seq saved with a state is
//! answered by [`Manager::changes_since`] in the run that restored it. This
//! is @parcel/watcher's `writeSnapshot`/`getEventsSince` and Watchman's
//! clocks and `is_fresh_instance` (see [`Restore`]).
//!
//! ```no_run
//! use specwatch::{Event, Manager, Restore, WatchSpec};
//! # fn main() -> Result<(), specwatch::Error> {
//! let m = Manager::new()?;
//! let events = m.subscribe();
//! m.apply("src", WatchSpec::new(["/app/src"]).state("/app/.cache/src.state"))?;
//! if let Ok(Event::Changes(first)) = events.recv() {
//!     match &first.restore {
//!         Some(Restore::Restored { .. }) if first.changes.is_empty() => { /* up to date */ }
//!         Some(Restore::Restored { .. }) => { /* rebuild what changed */ }
//!         _ => { /* rebuild everything */ }
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! # What a build tool needs to hear
//!
//! A spec with [`WatchOptions::skip_same_content`] compares contents: a
//! save that wrote the same bytes, a `touch` or a `chmod` is no change,
//! and every `Created` or `Modified` file comes with its
//! [`Change::hash`] (a [`ContentHash`], to key a cache on).
//!
//! A rename the OS pairs (inotify; Windows) whose two ends fall in one
//! batch stays one change per path, and the destination's change says
//! where the entry was: [`Change::from`] (`mv a.rs b.rs` is `a.rs`
//! `Removed` and `b.rs` `Created` from `a.rs`). With
//! [`WatchOptions::collapse_moves`] a moved directory is the directory's
//! change alone, the entries below it implied. FSEvents, kqueue and
//! polling do not pair: their renames stay a removal and a creation.
//!
//! A spec with [`WatchOptions::write_finished`] holds a file's change while
//! it is being written (on Linux, until its writer closes it; elsewhere,
//! until its size and mtime stay put for an interval), bounded by the
//! batch's maximum delay: a large file copied in slowly is reported once,
//! complete, not half-written.
//!
//! A program that writes into a tree it watches (a code generator, a
//! build whose outputs land there) holds its spec while it does:
//! [`Manager::hold`] returns a guard, and what is written while it lives
//! is deferred into one batch delivered once it is dropped, or, with
//! [`WatchOptions::during_holds`]`(`[`DuringHolds::Drop`]`)`, delivered to
//! no one (Watchman's `state-enter`/`state-leave`). The OS does not say
//! who wrote a file: a hold covers everyone's writes meanwhile.
//! [`WatchStatus::holds`] lists every hold on a spec's batches (a
//! version-control lock, files being written, a program's), each bounded.
//!
//! # What a file is now
//!
//! A spec with [`WatchOptions::metadata`] (`WatchSpec::metadata(true)`)
//! gets, on every change that leaves its entry in place, what the entry is
//! after it: [`Change::meta`], a [`Meta`] with its size, modification time
//! and inode (none on Windows), as `lstat` says. It costs nothing where the
//! engine looked already (an OS event makes it `lstat` the name; a poll
//! `stat`s every entry); an entry found by reading a directory (a new
//! directory's contents, an initial scan, an overflow's re-read) costs one
//! `lstat` when its batch closes. Still one net change per path per batch:
//! the metadata is the newest look's, and `Removed` has none. Without the
//! option every `meta` is `None`.
//!
//! ```no_run
//! use specwatch::{ChangeKind, Event, Manager, WatchSpec};
//! # fn main() -> Result<(), specwatch::Error> {
//! let m = Manager::new()?;
//! let events = m.subscribe();
//! m.apply("charts", WatchSpec::new(["/srv/charts"]).metadata(true))?;
//! for event in events {
//!     if let Event::Changes(batch) = event {
//!         for c in &batch.changes {
//!             if let (ChangeKind::Created | ChangeKind::Modified, Some(meta)) = (c.kind, &c.meta) {
//!                 println!("{} is {} bytes", c.path.display(), meta.size);
//!             }
//!         }
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! # Known problems
//!
//! - **State files** ([`WatchOptions::state`]): a restore `stat`s every
//!   entry of the spec on the engine's thread, after its walk (as long
//!   again as the walk's reads, about); a save `stat`s every entry too,
//!   off the engine's thread. A change made while a state was being saved
//!   is saved as uncertain and reported again (`Modified`) by the restore.
//!   What a stat signature cannot see is not seen (a rewrite keeping size,
//!   both times and inode: only by setting the clock back). A save that
//!   fails in the background is the spec's
//!   [`last_error`](WatchStatus::last_error) until one succeeds; the
//!   phase stays as it is.
//! - **Portable backend under heavy directory renames**: notify keys its
//!   recursive watches by path (the kernel by inode) and re-adds them
//!   lazily after rename events. specwatch works around that (it never
//!   unwatches a recursive root while anything below is needed, makes its
//!   own watch call for every new directory before reading it where notify
//!   leaves a gap (inotify, kqueue; not on Windows and macOS, whose OS
//!   watch covers new directories at once), and first checks that no
//!   symlink is on the way, since a watch by path through a link
//!   re-labels the watch of the directory it leads to; on Linux it then
//!   waits until notify's thread has read the events queued before that
//!   call, and asks again if a rename read late took the watch away: the
//!   mark is an open of a private directory in the temporary directory,
//!   `.specwatch-marks-<pid>-<n>`, removed with the backend, or by the
//!   next one started once its process is gone), and the
//!   randomized mirror test runs on it. A directory above a new one that is
//!   replaced by a link within the round trip of that watch call to
//!   notify's thread can still slip through: on Linux, prefer the native
//!   backend.
//! - **Symlinks are not followed by default**, roots included: a root that
//!   is itself a symlink is watched as a link entry. With
//!   [`WatchOptions::follow_symlinks`] links to directories are followed
//!   (never into a loop), but what a link leads to can change without an
//!   event (a parent of its target renamed, the target of a dangling link
//!   created outside the tree): that is noticed at the next `sync` or
//!   rescan only. The portable backend polls what is below followed links.
//! - A queue overflow costs a full re-read and a `stat` of every indexed
//!   file; files touched within the overflow margin before the loss are
//!   reported modified even when they were not.
//! - Writes through a shared `mmap` produce no inotify events and are not
//!   seen by the OS backends; nor are changes made on another machine to a
//!   network file system. [`Backend::Poll`] sees both, up to an interval
//!   late; [`Backend::Auto`] chooses it for a root on a network or FUSE
//!   file system, judged by the root's own file system when it is
//!   attached: another mount further below a root is not detected (give
//!   it a spec of its own, or choose `Poll`).
//! - A root's file system unmounted under a live watch is told by the
//!   device its path then shows (the one below the mount): the spec is
//!   `Degraded` ("storage gone", [`RootStatus::unmounted_since`]), keeps
//!   what it knew, and reports the net changes once a file system is
//!   mounted there again (a polled root's polls tell; for the native
//!   backend, whose watches go with the unmount, the root is looked at
//!   every poll interval, then watched and read again). The portable
//!   backend is not told of the unmount (notify drops its watches without
//!   an event): a spec on it sees nothing of that tree until it is applied
//!   again. Another file system mounted over a root that an event backend
//!   watches is not noticed either, nor is the unmount of a mount on the
//!   device of the directory below it (a bind mount within one file
//!   system). The checks `stat` the root on the engine's thread when a
//!   look or an event suggests its file system went (a look that found
//!   the device below it, or nothing; a directory's lost watch): on a
//!   mount that hangs at that very moment, that `stat` hangs the engine.
//! - Polling (chosen per spec, by `Auto`, or for everything by
//!   [`ManagerBuilder::backend`]`(Backend::Poll { .. })`) looks at
//!   directories on the scanner's lanes, one thread per file system: a
//!   network mount that hangs holds up neither the engine (events,
//!   statuses, the barriers of specs that poll nothing there go on) nor
//!   the polls of other file systems; the specs covering its directories
//!   go `Degraded` ("storage not answering") after
//!   [`ManagerBuilder::storage_deadline`], and a `sync` that needs its
//!   looks times out. The directory holding a polled root's mount point
//!   (polled for the root's registration when nothing watches it) hangs
//!   with the mount, since its look `stat`s the mount point: two mount
//!   points side by side in one directory share that look, and a hang of
//!   either says so for both specs (their own polls go on). At most 16
//!   lanes run at once; past that, file systems share them. The first
//!   look at a directory whose file system the engine does not know yet
//!   (a rescan's first, a polled directory whose first read failed) waits
//!   on the lane of those, which a hang there holds up.
//! - A poll compares each entry's type, size, mtime and ctime (to the
//!   nanosecond) and inode: a file rewritten with the same size within the
//!   file system's timestamp granularity and put back under the same inode
//!   (or a file created and removed within one interval) is not seen.
//! - The portable backend watches ignored directories too (notify recurses
//!   into them); their events are dropped, but they cost OS watches. The
//!   manager's watch cap (`ManagerBuilder::max_os_watches`) applies to the
//!   native backend only; on both, the OS's own limit leads to polling.
//! - Sync cookies are files named `.specwatch-cookie-*`; entries with that
//!   prefix are never indexed or reported. Besides `sync`, an update of a
//!   spec creates and at once removes one in each root (its barrier, see
//!   [`Manager::apply`]): that changes the root directory's mtime, which
//!   other watchers of it see. Each cookie's name is new, and on Linux
//!   each leaves a negative entry in the kernel's dentry cache of its
//!   directory, which the kernel reclaims only under memory pressure and
//!   walks whenever a watch is added on that directory: after 20,000
//!   syncs or updates of one root, watching it again costs about 0.5 ms
//!   (3 µs fresh).
//! - **inotify limits** (Linux): one watch per watched directory counts
//!   against `fs.inotify.max_user_watches` (often 8,192 on older systems,
//!   about a million on newer ones), one instance per manager against
//!   `max_user_instances` (often 128), and a full queue
//!   (`max_queued_events`, 16,384) costs a rescan. At the watch limit the
//!   rest is polled and the status says so (`Degraded`, `polled_dirs`).
//!   Ignore rules prune ignored directories, which is the cheapest fix;
//!   else raise the limit as root, e.g. `sysctl fs.inotify.max_user_watches=524288`
//!   (and in `/etc/sysctl.d/` to keep it). specwatch never changes it.
//! - **Platforms**: Linux is tested on every backend (and FUSE); Windows
//!   runs the test suite under Wine (less the tests of Linux-only
//!   facilities, and those that need what Wine's emulation of
//!   ReadDirectoryChangesW lacks, which say so); macOS and FreeBSD are
//!   built and linted, not run. Off Linux the event backend is notify's
//!   recursive watch per root: no pruning of ignored directories (their
//!   events arrive and are dropped). On Windows, notify 8.2 drops a watch,
//!   or a batch of events, without a word when ReadDirectoryChangesW's
//!   buffer overflows under a burst (notify-rs/notify#963):
//!   [`WatchOptions::rescan_every`] or [`Backend::Poll`] for such trees.
//!   On FreeBSD, kqueue holds a descriptor per entry. See the README's
//!   "Platforms" table.
//! - **Network file systems**: see the README's section "Several replicas
//!   over shared storage" for what is polled, its cost, and how to size
//!   the interval.
//! - Paths are cleaned lexically (`a/b/../c` is `a/c`) without resolving
//!   symlinks, so that paths that do not exist yet can be accepted.
//! - The sync barrier's cookies are created by the engine thread: a `sync`
//!   issued while the engine is busy (walking a huge new tree, or blocked
//!   on a hung network file system) waits for it, up to its timeout. A
//!   barrier (a `sync`, a hold's start or end) of a spec whose root is on
//!   a mount that hangs creates its cookie there, and that hangs the
//!   engine; so do the other reads the engine's thread still makes,
//!   which `ARCHITECTURE.md` lists ("What the engine's thread reads"):
//!   the `lstat` of a name an event named, the walk, a file held for its
//!   writer, a change's metadata as its batch closes, a root's mount
//!   check.
//!
//! # Architecture
//!
//! One engine thread owns all mutable watch state; each fact (the index,
//! the OS watch table, the poll set, retries, sync barriers, every
//! [`WatchStatus`]) has one owner module that alone writes it, and status
//! is derived from the owners at the end of each pass. Backends sit behind
//! one small contract and only hint. `ARCHITECTURE.md` in the repository
//! draws the modules, says which state each owns, and walks one change
//! from the kernel to a subscriber. The other threads only read the disk:
//! polled directories are looked at on the scanner's lanes, a thread per
//! file system (`specwatch-scan`, started when first needed, at most 16),
//! which also read the files whose content hashes a spec compares and the
//! ignore files outside the watched tree (the engine waits for none of
//! them: a batch waits for its hashes);
//! a walk past 4,096
//! directories (native backend) reads on a thread of its own
//! (`specwatch-walk`) while the engine places the watches, and an
//! overflow's rescan on short-lived `specwatch-read` threads.
//!
//! # Cargo features
//!
//! None is on by default, and the default build has no optional
//! dependency.
//!
//! - `test-hooks`: fault injection (lost events, failed watches, the OS's
//!   watch limit, a paused reader) and index invariant checks, as methods
//!   of `Manager`, for the crate's own tests. Not part of the stable API.
//! - `bench`: a module of entry points into internal pure code, for the
//!   crate's benchmarks. Not part of the stable API.
//! - `stream`: `Manager::stream`, a subscription as a `futures_core::Stream`
//!   (`EventStream`; `.changes()` and `.statuses()` narrow it to change
//!   batches or status snapshots), so that an async program can
//!   `while let Some(batch) = stream.next().await` without a thread per
//!   subscriber. The engine wakes the stream's task when it delivers; the
//!   order, the merging of a slow reader's batches (nothing is lost) and
//!   the engine never waiting are those of `Manager::subscribe`; dropping
//!   the stream unsubscribes. Adds the `futures-core` dependency.
//! - `serde`: `Serialize`/`Deserialize` for specs, rules, options,
//!   backends (`"poll:250ms"`), events, batches and statuses; durations as
//!   `"200ms"` (or a number of milliseconds). `WatchSpecs` reads a
//!   configuration file's named specs, naming the spec and the field in
//!   errors, and hands them to [`Manager::reconcile`]. Adds the `serde`
//!   dependency.
//! - `tracing`: structured events and spans through `tracing`, target
//!   `specwatch`, each spec named in the field `spec`. At `info`: a spec
//!   applied (`generation`, `outcome`) or deleted, watching started, the
//!   backend chosen for each root (`path`, `backend`, `reason`, and
//!   `status`: the [`RootStatus`] line), a root that vanished or appeared
//!   again, recoveries done; at `warn`: the watch limit reached (polling
//!   instead), lost OS events (a queue overflow, with the rescan's count
//!   at `info`), directories that cannot be watched or read, changes a
//!   rescan found that the OS did not report; at `debug`: each batch
//!   published (`seq`, `changes`, and `paths`: the first five paths with
//!   their kinds), so that `RUST_LOG=specwatch=debug` answers "which file
//!   caused that rebuild?". The engine's handling of an applied spec runs
//!   in an `apply` span. Adds the `tracing` dependency; without the
//!   feature nothing of it is compiled.
#![warn(unreachable_pub)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(rust_2018_idioms)]

// Layers, imported downwards only: the front (this file, `manager`,
// `stream`, `serde_impl`, `hooks`, `bench_api`) -> `engine` -> the pure
// core (`index`, `ignore`, `ignore_files`, `git_pattern`, `docker_ignore`, `coalesce`, `reconcile`,
// `fanout`, `journal`) and the I/O leaves (`backend`, `fs`, and the
// threads that only read through it: `reads`, `scanner`) -> plain data
// (`spec`, `hold`, `choice`, `ignore_kinds`, `duration`, `change`, `event`, `status`, `stats`,
// `ids`, `error`, `clock`, `fasthash`). ARCHITECTURE.md draws it; tests/layers.rs
// checks it.
/// The README's examples, compiled as doc tests so that they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod backend;
#[cfg(feature = "bench")]
pub mod bench_api;
mod change;
mod choice;
mod clock;
mod coalesce;
mod content;
mod defaults;
mod docker_ignore;
mod duration;
mod engine;
mod error;
mod event;
mod fanout;
mod fasthash;
mod fs;
mod git_pattern;
mod hold;
#[cfg(feature = "test-hooks")]
mod hooks;
mod ids;
mod ignore;
mod ignore_files;
mod ignore_kinds;
mod index;
mod journal;
mod manager;
mod options;
mod reads;
mod reconcile;
mod restore;
mod scanner;
#[cfg(feature = "serde")]
mod serde_impl;
mod settle;
mod snapshot;
mod spec;
mod state;
mod stats;
mod status;
#[cfg(feature = "stream")]
mod stream;
#[cfg(test)]
mod test_paths;
mod write_hold;

pub use change::{Change, ChangeBatch, ChangeKind, FileType, Meta};
pub use choice::{Backend, ParseBackendError};
pub use content::{ContentHash, ParseContentHashError};
/// The channel crate whose [`Receiver`](crossbeam_channel::Receiver)
/// [`Manager::subscribe`] returns, re-exported so that its type can be
/// named without depending on a matching version.
pub use crossbeam_channel;
pub use defaults::{
    DEFAULT_HOLD_BOUND, DEFAULT_JOURNAL_PATHS, DEFAULT_MAX_DELAY, DEFAULT_MAX_QUEUED_EVENTS,
    DEFAULT_OVERFLOW_MARGIN, DEFAULT_POLL_INTERVAL, DEFAULT_QUIET_WINDOW, DEFAULT_RESTART_FIRST,
    DEFAULT_RESTART_MAX, DEFAULT_SAVE_EVERY, DEFAULT_STORAGE_DEADLINE, DEFAULT_SUBSCRIBER_CAPACITY,
    DEFAULT_VCS_SETTLE, DEFAULT_WRITE_FINISHED,
};
pub use error::{Error, Result};
pub use event::Event;
pub use hold::{DuringHolds, HoldScope};
#[cfg(feature = "test-hooks")]
pub use hooks::EngineHold;
pub use ids::{Generation, ParseSeqError, Seq};
pub use ignore::IgnoreRule;
pub use ignore_kinds::IgnoreFiles;
pub use journal::{ChangesSince, ResyncReason};
pub use manager::{Applied, HoldGuard, Manager, ManagerBuilder};
pub use options::WatchOptions;
pub use reconcile::ReconcileSummary;
pub use restore::{Restore, StateRefused};
#[cfg(feature = "serde")]
pub use serde_impl::WatchSpecs;
pub use spec::WatchSpec;
pub use stats::Stats;
pub use status::{
    BackendReason, HoldReason, HoldStatus, Phase, Progress, RECENT_BATCHES, RootStatus, VcsLock,
    WatchStatus,
};
#[cfg(feature = "stream")]
pub use stream::{ChangeStream, EventStream, StatusStream};
