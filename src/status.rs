//! Per-watch status, written by the engine alone.

use std::sync::Arc;
use std::time::SystemTime;

use crate::change::ChangeBatch;
use crate::ids::Generation;

/// How many recent batches a [`WatchStatus`] keeps.
pub const RECENT_BATCHES: usize = 20;

/// Where a watch is in its life.
#[derive(Clone, Debug, PartialEq, Eq)]
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

/// The observed state of one named watch.
///
/// Written only by the engine; read it with
/// [`Manager::status`](crate::Manager::status) at any time (it never waits on
/// the engine) or receive it as [`Event::Status`](crate::Event::Status). It is
/// reset when the spec changes: `recent_batches` is emptied, the counters start
/// again, and `monitor_start_time` moves. A consumer that keeps its own
/// watermark can compare it against `max(last_event_time, monitor_start_time)`.
#[derive(Clone, Debug, PartialEq)]
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
    /// Directories of this spec that are polled (every
    /// [`ManagerBuilder::poll_interval`](crate::ManagerBuilder::poll_interval))
    /// because the OS refused more watches (inotify's `max_user_watches`,
    /// `EMFILE`, or the manager's own cap). They move back to OS watches
    /// when watches are released. Non-zero makes the phase `Degraded`.
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
    /// The most recent runtime error (a directory that could not be read or
    /// watched), naming the path.
    pub last_error: Option<String>,
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
            watched_dirs: 0,
            polled_dirs: 0,
            watch_retries: 0,
            overflow_recoveries: 0,
            last_error: None,
        }
    }
}
