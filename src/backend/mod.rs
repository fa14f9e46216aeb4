//! OS watching backends. Both only *hint*: they say "something happened to
//! this name in this directory", and the engine looks at the file system.

use std::ffi::OsString;

#[cfg(target_os = "linux")]
pub(crate) mod native;
pub(crate) mod portable;

/// Which OS watching a [`Manager`](crate::Manager) uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// `Native` on Linux, `Portable` elsewhere.
    #[default]
    Auto,
    /// Linux only: inotify driven directly, one watch per directory,
    /// pruned and shared across specs.
    Native,
    /// `notify`'s recommended watcher (inotify, FSEvents,
    /// ReadDirectoryChangesW, kqueue), one recursive watch per root. Ignored
    /// directories below a root are still watched by the OS (not pruned),
    /// though their events are dropped.
    Portable,
}

/// What a hint says happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hint {
    /// The name was created (or a hard link to it).
    Created,
    /// The name was written or its metadata changed.
    Modified,
    /// The name was removed.
    Removed,
    /// The name was renamed away or renamed over.
    Moved,
    /// Nothing is known: the engine is re-checking (after lost events).
    /// Does not by itself mean the entry was written or replaced.
    Rescan,
}

/// One raw inotify event, owned (read by the reader thread).
#[derive(Debug)]
pub(crate) struct RawEvent {
    pub wd: i32,
    pub mask: u32,
    pub name: Option<OsString>,
}
