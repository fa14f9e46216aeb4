//! Every default a user can change, in one place: each is a public
//! constant (re-exported at the crate root) that the option's docs name,
//! and the one value the code falls back to.

use std::time::Duration;

/// Default quiet window: see [`WatchOptions::quiet_window`](crate::WatchOptions::quiet_window).
pub const DEFAULT_QUIET_WINDOW: Duration = Duration::from_millis(50);

/// Default maximum batch delay: see [`WatchOptions::max_delay`](crate::WatchOptions::max_delay).
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_millis(1000);

/// Default capacity of a subscriber's channel, in events: see
/// [`ManagerBuilder::subscriber_capacity`](crate::ManagerBuilder::subscriber_capacity).
pub const DEFAULT_SUBSCRIBER_CAPACITY: usize = 1024;

/// How long a poll's look at a directory may be under way before the
/// specs covering it say its storage is not answering: see
/// [`ManagerBuilder::storage_deadline`](crate::ManagerBuilder::storage_deadline).
pub const DEFAULT_STORAGE_DEADLINE: Duration = Duration::from_secs(10);

/// How long the engine waits before its first restart of an event
/// backend whose reader stopped: see
/// [`ManagerBuilder::backend_restart`](crate::ManagerBuilder::backend_restart).
pub const DEFAULT_RESTART_FIRST: Duration = Duration::from_secs(1);

/// The longest wait between two restarts of an event backend (the wait
/// doubles per failed restart up to it; Tilt's watcher does the same).
pub const DEFAULT_RESTART_MAX: Duration = Duration::from_secs(300);

/// Default bound on the OS events the backend has handed the engine and
/// it has not taken yet: see
/// [`ManagerBuilder::max_queued_events`](crate::ManagerBuilder::max_queued_events).
/// 262,144 events: some 25 MB at a hundred bytes an event, sixteen times
/// inotify's own default queue (`max_queued_events`, 16,384).
pub const DEFAULT_MAX_QUEUED_EVENTS: usize = 262_144;

/// Default number of distinct paths a spec's journal holds: see
/// [`ManagerBuilder::journal_paths`](crate::ManagerBuilder::journal_paths).
pub const DEFAULT_JOURNAL_PATHS: usize = 4096;

/// Default interval of the manager's polling (directories without an OS
/// watch, roots `Auto` finds on shared storage): see
/// [`ManagerBuilder::poll_interval`](crate::ManagerBuilder::poll_interval).
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(1000);

/// Default of how far before the last complete read an overflow may have
/// hidden changes (file systems' timestamps are coarser than the wall
/// clock): see [`ManagerBuilder::overflow_margin`](crate::ManagerBuilder::overflow_margin).
pub const DEFAULT_OVERFLOW_MARGIN: Duration = Duration::from_secs(2);

/// How often a spec's [`state`](crate::WatchOptions::state) file is
/// rewritten at most while changes come: 10 s. A save `stat`s every entry
/// of the spec (about a second for a million entries, off the engine's
/// thread); a crash loses at most this much of the saved state's
/// freshness (a restore then reports again what changed since the last
/// save: more changes, never fewer).
pub const DEFAULT_SAVE_EVERY: Duration = Duration::from_secs(10);

/// A bound for [`WatchOptions::vcs_settle`](crate::WatchOptions::vcs_settle),
/// which is off by default: 10 s. A `git checkout` of tens of thousands of
/// files on a local disk takes a few seconds; a lock left behind by a
/// crashed `git` then delays one batch by 10 s, not forever.
pub const DEFAULT_VCS_SETTLE: Duration = Duration::from_secs(10);

/// Default bound of a hold a program declares: see
/// [`WatchOptions::hold_bound`](crate::WatchOptions::hold_bound). 10 s,
/// as [`DEFAULT_VCS_SETTLE`]: a build step or a code generator that holds
/// its spec for longer has probably forgotten its guard.
pub const DEFAULT_HOLD_BOUND: Duration = Duration::from_secs(10);

/// An interval for [`WatchOptions::write_finished`](crate::WatchOptions::write_finished),
/// which is off by default: 500 ms. A file whose size and mtime stayed
/// the same that long is taken as finished where the OS does not report
/// its writer's close. chokidar's `awaitWriteFinish` waits 2 s by default;
/// 500 ms keeps a build tool's saves on such backends prompt, and a
/// writer that pauses longer (a slow network copy) wants a longer one.
pub const DEFAULT_WRITE_FINISHED: Duration = Duration::from_millis(500);
