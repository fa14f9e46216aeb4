//! The portable backend: `notify`'s recommended watcher.
//!
//! One watcher per manager. Its event handler runs on notify's own thread and
//! only hands events to the engine's unbounded inbox, so it never blocks
//! (`watch()`/`unwatch()` wait for that same thread). Roots are watched
//! recursively; the parents of roots non-recursively.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use crossbeam_channel::Sender;
use notify::{Config, RecommendedWatcher, RecursiveMode, Watcher};

use crate::engine::Msg;

pub(crate) struct Portable {
    watcher: RecommendedWatcher,
    /// Path -> recursive?
    watched: BTreeMap<PathBuf, bool>,
    /// New directories watched recursively on their own, to close the gap
    /// before notify adds its watch (see `watch_new_dir`).
    extra: BTreeSet<PathBuf>,
}

impl Portable {
    pub(crate) fn start(inbox: Sender<Msg>) -> notify::Result<Portable> {
        let watcher = RecommendedWatcher::new(
            move |res| {
                let _ = inbox.send(Msg::Notify(res));
            },
            Config::default().with_follow_symlinks(false),
        )?;
        Ok(Portable {
            watcher,
            watched: BTreeMap::new(),
            extra: BTreeSet::new(),
        })
    }

    /// Drops the watch on `path` (and, as notify does, every watch below a
    /// recursive one).
    pub(crate) fn unwatch(&mut self, path: &Path) {
        if let Some(recursive) = self.watched.remove(path) {
            let _ = self.watcher.unwatch(path);
            if recursive {
                self.extra.retain(|e| !e.starts_with(path));
            }
        }
    }

    /// Called before reading a directory that just appeared below a
    /// recursive root. notify adds its own watch for it only after it has
    /// handed the creation event over, so a read done at once could miss
    /// files created in between. `watch()` is served by notify's thread after
    /// that, so once it returns the new directory and all below it are
    /// watched.
    ///
    /// On failure: the error and the directory it is about, as
    /// [`ensure_watch`](Self::ensure_watch) gives them.
    pub(crate) fn watch_new_dir(&mut self, dir: &Path) -> Result<(), (io::Error, PathBuf)> {
        if self.watched.contains_key(dir) || self.extra.contains(dir) {
            return Ok(());
        }
        self.watcher
            .watch(dir, RecursiveMode::Recursive)
            .map_err(|e| watch_error(e, dir))?;
        self.extra.insert(dir.to_path_buf());
        Ok(())
    }

    /// Watches `path` unless a recursive watch above it already covers it;
    /// upgrades a non-recursive watch to a recursive one when asked.
    ///
    /// On failure: the error and the directory it is about. A recursive
    /// watch stops at the first directory below `path` that cannot be
    /// watched (notify walks the tree and gives up there); that directory is
    /// named, and `path` is not recorded as watched, so that the directories
    /// below it get watch calls of their own.
    pub(crate) fn ensure_watch(
        &mut self,
        path: &Path,
        recursive: bool,
    ) -> Result<(), (io::Error, PathBuf)> {
        if self.covers(path) {
            return Ok(());
        }
        // An upgrade from non-recursive is a plain recursive watch call:
        // notify merges it into the existing watch, leaving no gap.
        if let Some(&r) = self.watched.get(path)
            && (r || !recursive)
        {
            return Ok(());
        }
        let mode = if recursive {
            RecursiveMode::Recursive
        } else {
            RecursiveMode::NonRecursive
        };
        self.watcher
            .watch(path, mode)
            .map_err(|e| watch_error(e, path))?;
        self.watched.insert(path.to_path_buf(), recursive);
        Ok(())
    }

    /// Whether `path` has the watch [`ensure_watch`](Self::ensure_watch)
    /// would give it.
    pub(crate) fn has_watch(&self, path: &Path, recursive: bool) -> bool {
        self.covers(path) || self.watched.get(path).is_some_and(|&r| r || !recursive)
    }

    /// Whether a recursive watch strictly above `path` covers it.
    pub(crate) fn covers(&self, path: &Path) -> bool {
        path.ancestors()
            .skip(1)
            .any(|a| self.watched.get(a) == Some(&true) || self.extra.contains(a))
    }

    /// A directory left the index: drop a watch of our own on it. Returns
    /// whether one was dropped.
    pub(crate) fn forget_dir(&mut self, dir: &Path) -> bool {
        if self.extra.remove(dir) {
            let _ = self.watcher.unwatch(dir);
            self.extra.retain(|e| !e.starts_with(dir));
            true
        } else {
            false
        }
    }

    /// The paths watched (for recomputing what is still needed).
    pub(crate) fn watched(&self) -> &BTreeMap<PathBuf, bool> {
        &self.watched
    }

    pub(crate) fn count(&self) -> usize {
        self.watched.len() + self.extra.len()
    }
}

/// The error notify reports at the OS's watch limit (`MaxFilesWatch`), as
/// [`ensure_watch`](Portable::ensure_watch) returns it (test hook).
pub(crate) fn limit_error(path: &Path) -> (io::Error, PathBuf) {
    watch_error(
        notify::Error::new(notify::ErrorKind::MaxFilesWatch).add_path(path.to_path_buf()),
        path,
    )
}

/// A notify error as an I/O error (so that the engine classifies it like the
/// native backend's), with the path it is about (`fallback` if it names
/// none).
fn watch_error(e: notify::Error, fallback: &Path) -> (io::Error, PathBuf) {
    let at = e
        .paths
        .first()
        .cloned()
        .unwrap_or_else(|| fallback.to_path_buf());
    let message = e.to_string();
    let io = match e.kind {
        notify::ErrorKind::Io(io) => io,
        notify::ErrorKind::PathNotFound => io::Error::new(io::ErrorKind::NotFound, message),
        notify::ErrorKind::MaxFilesWatch => io::Error::new(
            io::ErrorKind::QuotaExceeded,
            "the OS refuses more watches (inotify max_user_watches)",
        ),
        _ => io::Error::other(message),
    };
    (io, at)
}
