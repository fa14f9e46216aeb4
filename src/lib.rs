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
//! # The guide
//!
//! OS events are hints; the tree is the truth: each event makes the engine
//! look at the file system and diff what it finds against its index of
//! every watched directory, so duplicates vanish, an atomic save is one
//! `Modified`, and the native, portable and poll backends report the same
//! changes. How to use it, topic by topic, is in [`docs`]:
//!
//! - [`docs::specs`]: specs, `apply` and `reconcile`, generations, roots,
//!   symbolic links, subscribing, specs from a configuration file;
//! - [`docs::batches`]: what a batch is, netting, quiet window and maximum
//!   delay, renames, content hashes and metadata, slow subscribers;
//! - [`docs::ignores`]: ignore rules and ignore files, pruning;
//! - [`docs::backends`]: native, portable, poll and `Auto`; shared storage,
//!   polling's cost, storage that fails or goes away, replicas;
//! - [`docs::holds`]: one batch per `git checkout`, files being written;
//! - [`docs::state`]: changes since the last run, seqs;
//! - [`docs::sync_and_status`]: the `sync` barrier, status, and how no
//!   change is lost;
//! - [`docs::platforms`]: what is and is not tested where;
//! - [`docs::performance`]: costs, threads, the OS's limits.
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
//!   phase stays as it is. See [`docs::state`].
//! - **Portable backend under heavy directory renames**: notify keys its
//!   recursive watches by path (the kernel by inode) and re-adds them
//!   lazily after renames. specwatch works around it, and the randomized
//!   mirror test runs on it, but a directory above a new one that is
//!   replaced by a link within the round trip of a watch call to notify's
//!   thread can still slip through: on Linux, prefer the native backend.
//!   The workarounds (one of which opens a private directory,
//!   `.specwatch-marks-<pid>-<n>`, in the temporary directory) are in
//!   [`docs::backends`](docs::backends#the-portable-backends-own-limits).
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
//! - **A root's file system unmounted** under a live watch is noticed, and
//!   the net changes reported once it is back, for polled roots and native
//!   watches, not on the portable backend (notify drops its watches
//!   without an event: the spec sees nothing of that tree until it is
//!   applied again). Another file system mounted over a root an event
//!   backend watches is not noticed, nor is the unmount of a bind mount
//!   within one file system. The checks `stat` the root on the engine's
//!   thread when a look or an event suggests its file system went (a look
//!   that found the device below it, or nothing; a directory's lost
//!   watch): on a mount that hangs at that very moment, that `stat` hangs
//!   the engine. See
//!   [`docs::backends`](docs::backends#storage-that-hangs-fails-or-goes-away).
//! - **A hung mount** holds up only its own file system's polls (the
//!   scanner has a lane per file system, at most 16), and its specs go
//!   `Degraded` after [`ManagerBuilder::storage_deadline`]; but the
//!   directory holding a polled root's mount point hangs with the mount
//!   (two mount points side by side in one directory both say "storage not
//!   answering"), and the first look at a directory whose file system is
//!   not known yet waits on one lane for all such looks.
//! - A poll compares each entry's type, size, mtime and ctime (to the
//!   nanosecond) and inode: a file rewritten with the same size within the
//!   file system's timestamp granularity and put back under the same inode
//!   (or a file created and removed within one interval) is not seen
//!   ([`WatchOptions::content_hash`] helps with coarse timestamps).
//! - The portable backend watches ignored directories too (notify recurses
//!   into them); their events are dropped, but they cost OS watches. The
//!   manager's watch cap (`ManagerBuilder::max_os_watches`) applies to the
//!   native backend only; on both, the OS's own limit leads to polling.
//! - Sync cookies are files named `.specwatch-cookie-*`; entries with that
//!   prefix are never indexed or reported. Besides `sync`, an update of a
//!   spec creates and at once removes one in each root (its barrier, see
//!   [`Manager::apply`]): that changes the root directory's mtime, which
//!   other watchers of it see. On Linux each cookie leaves a negative
//!   dentry that later watch calls on that directory walk: after 20,000
//!   syncs or updates of one root, watching it again costs about 0.5 ms
//!   (3 µs fresh).
//! - **inotify limits** (Linux): watches count against
//!   `fs.inotify.max_user_watches` (at the limit the rest is polled and the
//!   status says so), managers against `max_user_instances`, and a full
//!   queue costs a rescan. specwatch never changes them; how to raise them
//!   is in [`docs::performance`](docs::performance#the-oss-limits-linux).
//! - **Platforms**: Linux is tested on every backend (and FUSE); Windows
//!   runs the test suite under Wine (less the tests of Linux-only
//!   facilities, and those that need what Wine's emulation of
//!   ReadDirectoryChangesW lacks, which say so); macOS and FreeBSD are
//!   built and linted, not run. Off Linux the event backend is notify's
//!   recursive watch per root: no pruning of ignored directories (their
//!   events arrive and are dropped). On Windows, a burst that overflows a
//!   watch's ReadDirectoryChangesW buffer (notify's 64 KiB) costs a rescan
//!   of the tree, as an inotify overflow does; a watch the OS drops after
//!   an error is asked for again (or the backend restarted, `Degraded`
//!   meanwhile). Wine's emulation differs from Windows in ways the guide
//!   lists, each shown with raw notify. On FreeBSD, kqueue holds a
//!   descriptor per entry. See [`docs::platforms`].
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
// `state`'s loading and saving, `stream`, `serde_impl`, `hooks`,
// `bench_api`; `docs`, the guide, holds no code) -> `engine` -> the pure
// core (`index`, `ignore/`, `batch`'s `coalesce`, `fanout` and `journal`,
// `hold`'s rules, `state`'s format, `reconcile`) and the I/O leaves
// (`backend`, `fs`, and the threads that only read through it: `reads`,
// `scanner`) -> plain data (`spec/`, `batch`'s `change`, `content` and
// `event`, `status`, `stats`, `ids`, `error`, `clock`, `fasthash`). A
// folder per concept: `ignore/`, `batch/`, `state/`, `spec/`, `hold/`.
// ARCHITECTURE.md draws it; tests/layers.rs checks it.
/// The README's examples, compiled as doc tests so that they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod backend;
mod batch;
#[cfg(feature = "bench")]
pub mod bench_api;
mod clock;
pub mod docs;
mod engine;
mod error;
mod fasthash;
mod fs;
mod hold;
#[cfg(feature = "test-hooks")]
mod hooks;
mod ids;
mod ignore;
mod index;
mod manager;
mod reads;
mod reconcile;
mod scanner;
#[cfg(feature = "serde")]
mod serde_impl;
mod spec;
mod state;
mod stats;
mod status;
#[cfg(feature = "stream")]
mod stream;
#[cfg(test)]
mod test_paths;

pub use batch::change::{Change, ChangeBatch, ChangeKind, FileType, Meta};
pub use batch::content::{ContentHash, ParseContentHashError};
pub use batch::event::Event;
pub use batch::journal::{ChangesSince, ResyncReason};
/// The channel crate whose [`Receiver`](crossbeam_channel::Receiver)
/// [`Manager::subscribe`] returns, re-exported so that its type can be
/// named without depending on a matching version.
pub use crossbeam_channel;
pub use error::{Error, Result};
pub use hold::{DuringHolds, HoldScope};
#[cfg(feature = "test-hooks")]
pub use hooks::EngineHold;
pub use ids::{Generation, ParseSeqError, Seq};
pub use ignore::IgnoreRule;
pub use ignore::kinds::IgnoreFiles;
pub use manager::{Applied, HoldGuard, Manager, ManagerBuilder};
pub use reconcile::ReconcileSummary;
#[cfg(feature = "serde")]
pub use serde_impl::WatchSpecs;
pub use spec::WatchSpec;
pub use spec::choice::{Backend, ParseBackendError};
pub use spec::defaults::{
    DEFAULT_HOLD_BOUND, DEFAULT_JOURNAL_PATHS, DEFAULT_MAX_DELAY, DEFAULT_MAX_QUEUED_EVENTS,
    DEFAULT_OVERFLOW_MARGIN, DEFAULT_POLL_INTERVAL, DEFAULT_QUIET_WINDOW, DEFAULT_RESTART_FIRST,
    DEFAULT_RESTART_MAX, DEFAULT_SAVE_EVERY, DEFAULT_STORAGE_DEADLINE, DEFAULT_SUBSCRIBER_CAPACITY,
    DEFAULT_VCS_SETTLE, DEFAULT_WRITE_FINISHED,
};
pub use spec::options::WatchOptions;
pub use state::restore::{Restore, StateRefused};
pub use stats::Stats;
pub use status::{
    BackendReason, HoldReason, HoldStatus, Phase, Progress, RECENT_BATCHES, RootStatus, VcsLock,
    WatchStatus,
};
#[cfg(feature = "stream")]
pub use stream::{ChangeStream, EventStream, StatusStream};
