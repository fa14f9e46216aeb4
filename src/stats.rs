//! Manager-wide counters.

/// Counters of the whole manager (all specs together).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// OS watches held. Native backend: one per watched directory, shared by
    /// all specs covering it and by all paths leading to it (followed
    /// symlinks), plus one on the parent of each root (to see the root
    /// itself vanish and reappear). Portable backend: the watch calls
    /// made on notify (one per root; notify holds one inotify watch per
    /// directory below it). A manager that polls: 0 (it holds none).
    pub os_watches: usize,
    /// Directories in the index.
    pub indexed_dirs: usize,
    /// Entries (files, directories, links) in the index.
    pub indexed_entries: usize,
    /// Distinct paths waiting in the backlogs of subscribers that are
    /// behind (0 when every subscriber keeps up).
    pub backlog_paths: usize,
    /// OS events handled since the manager started (native: inotify
    /// events, overflow markers included; portable: notify events). Only
    /// events the kernel delivered count: a pruned directory has no watch
    /// and costs none.
    pub os_events: u64,
    /// OS events the backend has handed over and the engine has not
    /// taken yet (at most [`ManagerBuilder::max_queued_events`], but for
    /// one read bigger than that alone).
    ///
    /// [`ManagerBuilder::max_queued_events`]: crate::ManagerBuilder::max_queued_events
    pub queued_os_events: usize,
    /// The most ever queued so: what the inbox's memory was at its peak
    /// (an event is about a hundred bytes with its name).
    pub queued_os_events_peak: usize,
    /// OS events dropped because the inbox was full (each drop is
    /// recovered as a kernel queue overflow is: a precise rescan, counted
    /// in each spec's `WatchStatus::overflows`).
    pub dropped_os_events: u64,
}
