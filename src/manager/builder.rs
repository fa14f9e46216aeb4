//! [`ManagerBuilder`]: a manager's options, and the start of its engine.

use std::time::Duration;

use super::Manager;
use crate::engine;
use crate::error::Result;
use crate::spec::choice::Backend;
use crate::spec::defaults::DEFAULT_SUBSCRIBER_CAPACITY;

/// Builds a [`Manager`].
#[derive(Clone, Debug, Default)]
pub struct ManagerBuilder {
    backend: Backend,
    overflow_margin: Option<Duration>,
    subscriber_capacity: Option<usize>,
    poll_interval: Option<Duration>,
    max_os_watches: Option<usize>,
    journal_paths: Option<usize>,
    git_excludes: engine::Excludes,
    max_queued_events: Option<usize>,
    backend_restart: Option<(Duration, Duration)>,
    storage_deadline: Option<Duration>,
}

impl ManagerBuilder {
    /// Chooses the backend (default [`Backend::Auto`]): the event backend
    /// the manager runs, or [`Backend::Poll`] to poll every root at its
    /// interval; each spec may choose for itself (see [`Backend`]).
    #[must_use]
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// After the OS lost events (a queue overflow), every indexed file whose
    /// ctime is at most this long before the last read of events that was
    /// complete is reported modified. Default 2 s ([`DEFAULT_OVERFLOW_MARGIN`](crate::DEFAULT_OVERFLOW_MARGIN)), for file systems with
    /// coarse timestamps; on ext4, xfs, btrfs and tmpfs (nanoseconds, with a
    /// clock a few milliseconds coarse) 50 ms is plenty.
    #[must_use]
    pub fn overflow_margin(mut self, margin: Duration) -> Self {
        self.overflow_margin = Some(margin);
        self
    }

    /// How many events a subscriber's channel holds before the engine starts
    /// merging that subscriber's pending batches (default
    /// [`DEFAULT_SUBSCRIBER_CAPACITY`], at least 1).
    #[must_use]
    pub fn subscriber_capacity(mut self, events: usize) -> Self {
        self.subscriber_capacity = Some(events.max(1));
        self
    }

    /// How often directories are polled in place of an OS watch they could
    /// not get (the watch limit, a followed link on the portable backend),
    /// and the roots [`Backend::Auto`] finds on a shared file system
    /// (default 1 s, [`DEFAULT_POLL_INTERVAL`](crate::DEFAULT_POLL_INTERVAL)). A `Backend::Poll { interval }`, the manager's or a
    /// spec's, polls at its own interval.
    #[must_use]
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = Some(interval);
        self
    }

    /// Caps the OS watches this manager may hold (native backend). Beyond
    /// the cap, directories are polled exactly as when the OS itself refuses
    /// (inotify `ENOSPC` from `max_user_watches`, or `EMFILE`), and the
    /// status of every spec concerned says so. Useful to leave watches to
    /// other programs, and to test the fallback.
    #[must_use]
    pub fn max_os_watches(mut self, max: usize) -> Self {
        self.max_os_watches = Some(max);
        self
    }

    /// How many distinct paths the journal of each spec keeps for
    /// [`Manager::changes_since`] (default [`DEFAULT_JOURNAL_PATHS`], at
    /// least 1). Memory is bounded by paths, not changes: a few hundred
    /// bytes each. A caller further behind than the journal reaches is told
    /// to resync, never given a partial list.
    ///
    /// [`DEFAULT_JOURNAL_PATHS`]: crate::DEFAULT_JOURNAL_PATHS
    #[must_use]
    pub fn journal_paths(mut self, paths: usize) -> Self {
        self.journal_paths = Some(paths.max(1));
        self
    }

    /// Bounds the OS events the backend has handed the engine and it has
    /// not taken yet (default [`DEFAULT_MAX_QUEUED_EVENTS`], at least 1):
    /// the memory a flood of events can take while the engine is busy
    /// (reading a big directory, a slow `stat` of a network mount).
    /// Beyond it the backend's events are dropped, never waited for, and
    /// the engine recovers as from a kernel queue overflow once it has
    /// taken what was queued: every directory read again, what changed
    /// since reported ([`Stats::dropped_os_events`] counts them, each
    /// spec's `overflows` the recoveries). One read of the kernel's queue
    /// bigger than the bound is let through when nothing else is queued.
    ///
    /// [`DEFAULT_MAX_QUEUED_EVENTS`]: crate::DEFAULT_MAX_QUEUED_EVENTS
    /// [`Stats::dropped_os_events`]: crate::Stats::dropped_os_events
    #[must_use]
    pub fn max_queued_events(mut self, events: usize) -> Self {
        self.max_queued_events = Some(events.max(1));
        self
    }

    /// How long to wait before restarting an event backend whose reader
    /// stopped (a read that failed): `first`, doubled per failed restart
    /// up to `max` (defaults [`DEFAULT_RESTART_FIRST`], 1 s, and
    /// [`DEFAULT_RESTART_MAX`], 5 min). Meanwhile every spec is
    /// `Degraded`, saying why; once a new backend is up, every directory
    /// is read again and the net changes made meanwhile are reported (as
    /// after a kernel queue overflow), and the specs are `Watching` again.
    ///
    /// [`DEFAULT_RESTART_FIRST`]: crate::DEFAULT_RESTART_FIRST
    /// [`DEFAULT_RESTART_MAX`]: crate::DEFAULT_RESTART_MAX
    #[must_use]
    pub fn backend_restart(mut self, first: Duration, max: Duration) -> Self {
        self.backend_restart = Some((first, max.max(first)));
        self
    }

    /// How long a poll's look at a directory may be under way before the
    /// specs covering it go `Degraded` ("storage not answering: …"; a
    /// network or FUSE mount whose server stopped answering), until the
    /// look comes back (default [`DEFAULT_STORAGE_DEADLINE`], 10 s). The
    /// engine goes on meanwhile: other specs' events, barriers and
    /// statuses are served. Also how long a batch of a spec that compares
    /// contents ([`WatchOptions::skip_same_content`](crate::WatchOptions::skip_same_content))
    /// waits for the next of its files' hashes, read off the engine's
    /// thread, before it goes without those not read (and a spec's start
    /// for the hashes of its files).
    ///
    /// [`DEFAULT_STORAGE_DEADLINE`]: crate::DEFAULT_STORAGE_DEADLINE
    #[must_use]
    pub fn storage_deadline(mut self, deadline: Duration) -> Self {
        self.storage_deadline = Some(deadline);
        self
    }

    /// Git's global excludes file, for the specs that honour git's ignore
    /// files ([`IgnoreFiles::GIT`](crate::IgnoreFiles::GIT)): `Some(file)`
    /// this file, `None` none. By default git's own: `core.excludesFile`
    /// of git's global configuration (`$GIT_CONFIG_GLOBAL`,
    /// `~/.gitconfig`, `$XDG_CONFIG_HOME/git/config`, `/etc/gitconfig`),
    /// else `$XDG_CONFIG_HOME/git/ignore` or `~/.config/git/ignore`,
    /// found once, when the first such spec is attached (through the
    /// `ignore` crate). A server that should not depend on its user's
    /// home, and tests, say which.
    ///
    /// ```
    /// let m = specwatch::Manager::builder().git_excludes_file(None);
    /// # let _ = m;
    /// ```
    #[must_use]
    pub fn git_excludes_file(mut self, file: Option<std::path::PathBuf>) -> Self {
        self.git_excludes = engine::Excludes::File(file);
        self
    }

    /// Starts the engine thread (and, for the native backend, the inotify
    /// instance and its reader thread; the scanner's threads that poll, one
    /// per file system, start when first needed).
    ///
    /// # Errors
    ///
    /// [`Error::Engine`](crate::Error::Engine) (with the OS error as its `source()`) when the
    /// backend cannot start: no inotify instance to be had (the per-user
    /// `max_user_instances` reached), `Native` asked for off Linux, or a
    /// thread that cannot be spawned.
    pub fn build(self) -> Result<Manager> {
        let engine = engine::start(engine::Config {
            backend: self.backend,
            overflow_margin: self.overflow_margin,
            poll_interval: self.poll_interval,
            max_watches: self.max_os_watches,
            journal_paths: self.journal_paths,
            git_excludes: self.git_excludes,
            max_queued_events: self.max_queued_events,
            restart_backoff: self.backend_restart,
            storage_deadline: self.storage_deadline,
        })?;
        Ok(Manager::with_engine(
            engine,
            self.subscriber_capacity
                .unwrap_or(DEFAULT_SUBSCRIBER_CAPACITY),
        ))
    }
}
