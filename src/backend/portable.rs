//! The portable backend: `notify`'s recommended watcher.
//!
//! One watcher per manager. Its event handler runs on notify's own thread and
//! only hands events to the engine's unbounded inbox, so it never blocks
//! (`watch()`/`unwatch()` wait for that same thread). Roots are watched
//! recursively; the parents of roots non-recursively.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use notify::event::{ModifyKind, RenameMode};
use notify::{Config, EventKind, RecommendedWatcher, RecursiveMode, WatchPathConfig, Watcher};

use super::marks::Marks;
#[cfg(any(test, feature = "test-hooks"))]
use super::{Fault, ReaderPause};
use super::{Faults, Hint, Inner, OsEvent, OsMsg, PathWatcher, Read, Sink, WatchError};
use crate::batch::change::FileType;

/// Whether notify's recursive watch leaves a new directory unwatched until
/// notify's thread adds a watch for it (inotify, kqueue: one OS watch per
/// directory), rather than the OS covering it (ReadDirectoryChangesW's
/// subtree on Windows, FSEvents on macOS).
const RECURSIVE_WATCH_HAS_A_GAP: bool = cfg!(not(any(windows, target_os = "macos")));

pub(crate) struct Portable {
    watcher: RecommendedWatcher,
    /// When each watch call's events were last read (shared with the
    /// handler on notify's thread).
    reads: Arc<Reads>,
    /// The number of the watch call each path watched was made with.
    tags: std::collections::HashMap<PathBuf, u64>,
    /// The number the next watch call gets.
    next_tag: u64,
    /// Where notify's thread has read up to (see [`Marks`]); `None` where
    /// it cannot be told (off Linux, or no private directory to be had).
    marks: Option<Arc<Marks>>,
    /// Path -> recursive?
    watched: BTreeMap<PathBuf, bool>,
    /// New directories watched recursively on their own, to close the gap
    /// before notify adds its watch (see `watch_new_dir`).
    extra: BTreeSet<PathBuf>,
    faults: Faults,
    /// Test hook: holds the events back (notify's thread goes on).
    #[cfg(any(test, feature = "test-hooks"))]
    pause: Arc<ReaderPause>,
    /// Test hook: where a killed reader says it stopped.
    #[cfg(any(test, feature = "test-hooks"))]
    sink: Sink,
    /// Test hook: runs right after a new directory's watch call returns.
    #[cfg(test)]
    after_call: Option<Box<dyn FnMut() + Send>>,
    /// The last new directory found a directory of its own where no watch
    /// call is made (see [`own_path_walked`](Portable::own_path_walked)),
    /// and when.
    last_own: Option<(PathBuf, std::time::Instant)>,
}

/// How long the directories above the last new directory found a
/// directory of its own are taken as such without looking again (see
/// [`Portable::own_path_walked`]).
const OWN_PATH_FRESH: std::time::Duration = std::time::Duration::from_secs(1);

/// How many times a watch call is made again in a row (see
/// [`Portable::settle`]) before giving up on a quiet moment.
const MAX_REWATCH: u32 = 4;

/// A notify event as notify's thread handed it over, with when.
#[derive(Debug)]
pub(crate) struct Undecoded {
    res: notify::Result<notify::Event>,
    read_at: SystemTime,
    read_mono: std::time::Instant,
    /// For a rescan of one watch's own (see [`Reads`]): what it lost came
    /// after this.
    lost_after: Option<SystemTime>,
}

impl Undecoded {
    /// When it was handed over.
    pub(super) fn read_at(&self) -> SystemTime {
        self.read_at
    }

    /// Decodes it (on the engine's thread).
    pub(super) fn decode(self) -> Read {
        Read::Events {
            raw: u64::from(self.res.is_ok()),
            events: decode(self.res, self.lost_after),
            read_at: self.read_at,
            read_mono: self.read_mono,
        }
    }
}

/// One notify event (or error) in our vocabulary. Access events (notify
/// always asks inotify for `IN_OPEN`, so the engine's own reads come back
/// as such) decode to nothing. Every path is a hint of its own. A rescan
/// is an overflow: since `lost_after` where one watch's own buffer
/// overflowed (see [`Reads`]), else since the read before (a queue's
/// marker: inotify's).
fn decode(res: notify::Result<notify::Event>, lost_after: Option<SystemTime>) -> Vec<OsEvent> {
    let event = match res {
        Ok(e) => e,
        Err(e) => {
            return vec![OsEvent::Error {
                path: e.paths.first().cloned().unwrap_or_default(),
                message: e.to_string(),
                lost_after,
            }];
        }
    };
    let mut out = Vec::new();
    if event.need_rescan() {
        out.push(match lost_after {
            Some(t) => OsEvent::LostAfter(t),
            None => OsEvent::Overflow,
        });
    }
    if let (EventKind::Modify(ModifyKind::Name(RenameMode::Both)), [from, to]) =
        (event.kind, event.paths.as_slice())
    {
        // Both halves came before it, each as a hint of its own.
        out.push(OsEvent::PathRenamed {
            from: from.clone(),
            to: to.clone(),
        });
        return out;
    }
    let hint = match event.kind {
        EventKind::Access(_) => return out,
        EventKind::Create(_) => Hint::Created,
        EventKind::Remove(_) => Hint::Removed,
        EventKind::Modify(ModifyKind::Name(_)) => Hint::Moved,
        EventKind::Modify(_) => Hint::Modified,
        EventKind::Any | EventKind::Other => Hint::Moved,
    };
    out.extend(
        event
            .paths
            .into_iter()
            .map(|path| OsEvent::Path { path, hint }),
    );
    out
}

/// Pairs the two halves of a rename that notify hands over apart, with no
/// tracker: Windows' `ReadDirectoryChangesW` gives the old name and then,
/// next in the same buffer, the new one. (notify's inotify backend pairs
/// them itself, by cookie, into a `Both` event after the two halves;
/// FSEvents and kqueue do not pair.) Runs on notify's thread: one
/// comparison per event, and a path kept from a rename's first half.
#[derive(Default)]
struct Renames {
    from: Option<PathBuf>,
}

impl Renames {
    /// Sees one event; a `Both` event for the rename it completes, to be
    /// handed over after it.
    fn see(&mut self, res: &notify::Result<notify::Event>) -> Option<notify::Event> {
        let from = self.from.take();
        let Ok(e) = res else {
            return None;
        };
        if e.attrs.tracker().is_some() || e.paths.len() != 1 {
            return None;
        }
        match e.kind {
            EventKind::Modify(ModifyKind::Name(RenameMode::From)) => {
                self.from = e.paths.first().cloned();
                None
            }
            EventKind::Modify(ModifyKind::Name(RenameMode::To)) => {
                let mut both =
                    notify::Event::new(EventKind::Modify(ModifyKind::Name(RenameMode::Both)));
                both.paths = vec![from?, e.paths[0].clone()];
                Some(both)
            }
            _ => None,
        }
    }
}

/// When each watch call's events were last read, by the number given to
/// the call (notify's `user_data`), so that a rescan of one of them can
/// say since when it lost events. Windows' ReadDirectoryChangesW gives
/// each watch a buffer of its own: when it overflows, what it lost came
/// after that watch's previous read, which may be long before the last
/// event of another watch (the bound the engine takes for a queue's
/// overflow). A rescan without a number (inotify's, for the whole
/// queue) keeps that bound.
#[derive(Default)]
struct Reads(parking_lot::Mutex<std::collections::HashMap<u64, SystemTime>>);

impl Reads {
    /// Watch call `tag` is made now (nothing of it was read before).
    fn start(&self, tag: u64) {
        self.0.lock().insert(tag, SystemTime::now());
    }

    /// An event of watch call `tag` read at `at`: for a rescan, since
    /// when its events were lost.
    fn read(&self, tag: u64, at: SystemTime, rescan: bool) -> Option<SystemTime> {
        let mut reads = self.0.lock();
        let before = reads.insert(tag, at);
        if rescan {
            Some(before.unwrap_or(at))
        } else {
            None
        }
    }

    /// Watch call `tag` is over.
    fn end(&self, tag: u64) {
        self.0.lock().remove(&tag);
    }
}

impl Portable {
    pub(crate) fn start(sink: Sink) -> io::Result<Portable> {
        #[cfg(any(test, feature = "test-hooks"))]
        let told = sink.clone();
        #[cfg(any(test, feature = "test-hooks"))]
        let (pause, held) = {
            let p = Arc::new(ReaderPause::default());
            (p.clone(), p)
        };
        let marks = Marks::new().map(Arc::new);
        let noted = marks.clone();
        let mut renames = Renames::default();
        let reads = Arc::new(Reads::default());
        let seen = reads.clone();
        let mut watcher = RecommendedWatcher::new(
            // Runs on notify's thread: hand over and return, never block
            // (`watch()` and `unwatch()` wait for this same thread).
            move |res: notify::Result<notify::Event>| {
                let (read_at, read_mono) = (SystemTime::now(), std::time::Instant::now());
                // Test hook: notify's thread stops here while held.
                #[cfg(any(test, feature = "test-hooks"))]
                held.hold_point();
                // What a rescan, or an error (notify 9 drops a watch
                // whose read fails), of one watch may have lost.
                let lost_after = match &res {
                    Ok(e) => e
                        .user_data()
                        .and_then(|tag| seen.read(tag, read_at, e.need_rescan())),
                    Err(e) => e.user_data().and_then(|tag| seen.read(tag, read_at, true)),
                };
                if let Some(m) = &noted {
                    m.note(&res);
                }
                // notify always asks for `IN_OPEN`: one per directory its
                // own walk opens, two per directory the engine reads. They
                // decode to nothing; dropped here, they never queue (on a
                // 1,000,000-entry tree, 216,000 of them held 68 MB).
                if let Ok(e) = &res
                    && matches!(e.kind, EventKind::Access(_))
                    && !e.need_rescan()
                {
                    return;
                }
                let pair = renames.see(&res);
                for res in std::iter::once(res).chain(pair.map(Ok)) {
                    let msg = OsMsg(Inner::Portable(Undecoded {
                        res,
                        read_at,
                        read_mono,
                        lost_after,
                    }));
                    #[cfg(any(test, feature = "test-hooks"))]
                    held.hand_over(&sink, msg);
                    #[cfg(not(any(test, feature = "test-hooks")))]
                    sink.send(msg);
                }
            },
            Config::default().with_follow_symlinks(false),
        )
        .map_err(|e| watch_error(e, Path::new("")).error)?;
        let marks = marks.filter(|m| {
            let watched = watcher.watch(&m.dir, RecursiveMode::NonRecursive).is_ok();
            if !watched {
                let _ = std::fs::remove_dir(&m.dir);
            }
            watched
        });
        Ok(Portable {
            watcher,
            reads,
            tags: std::collections::HashMap::new(),
            next_tag: 0,
            marks,
            watched: BTreeMap::new(),
            extra: BTreeSet::new(),
            faults: Faults::default(),
            #[cfg(any(test, feature = "test-hooks"))]
            pause,
            #[cfg(any(test, feature = "test-hooks"))]
            sink: told,
            #[cfg(test)]
            after_call: None,
            last_own: None,
        })
    }

    /// Asks notify to watch `path` (again: notify then replaces the
    /// watch), numbered so that its rescans say since when they lost
    /// events (see [`Reads`]).
    fn call_watch(&mut self, path: &Path, mode: RecursiveMode) -> notify::Result<()> {
        let tag = self.next_tag;
        self.next_tag += 1;
        self.reads.start(tag);
        let res = self
            .watcher
            .watch_with(path, WatchPathConfig::new(mode).with_user_data(tag));
        let old = match res {
            Ok(()) => self.tags.insert(path.to_path_buf(), tag),
            Err(_) => Some(tag),
        };
        if let Some(old) = old {
            self.reads.end(old);
        }
        res
    }

    /// Asks notify to stop watching `path`.
    fn call_unwatch(&mut self, path: &Path) {
        let _ = self.watcher.unwatch(path);
        if let Some(tag) = self.tags.remove(path) {
            self.reads.end(tag);
        }
    }

    /// Drops the new directories' watches of our own at and below `dir`.
    fn drop_extra_below(&mut self, dir: &Path) {
        let below: Vec<PathBuf> = self
            .extra
            .iter()
            .filter(|e| e.starts_with(dir))
            .cloned()
            .collect();
        for e in below.iter().rev() {
            self.extra.remove(e);
            self.call_unwatch(e);
        }
    }

    /// Lets go of the marks' directory.
    fn drop_marks(&mut self) {
        if let Some(m) = self.marks.take() {
            self.call_unwatch(&m.dir);
            let _ = std::fs::remove_dir(&m.dir);
        }
    }

    /// Removals notify's thread has handed over so far (0 without marks).
    fn removals(&self) -> u64 {
        self.marks.as_ref().map_or(0, |m| m.removals())
    }

    /// After the watch call for the new directory `dir` (asked when
    /// `removals` were [`removals`](Self::removals)): waits until notify's
    /// thread has read every event queued before the call returned, and,
    /// if a removal came among them, makes the call again (see [`Marks`]),
    /// until one is followed by none, while `dir` is still a directory of
    /// its own (see [`own_path`](Self::own_path)).
    ///
    /// Only new directories: a root's first walk meets directories notify
    /// did not watch before (a rename it reads late is put right by its
    /// `IN_MOVED_TO`, which comes through a watch that walk made), and
    /// walking a whole tree again on every removal meanwhile would cost
    /// more than the race.
    fn settle(&mut self, dir: &Path, mut removals: u64) {
        for _ in 0..MAX_REWATCH {
            let Some(marks) = self.marks.clone() else {
                return;
            };
            match marks.removed_since(removals) {
                Some(false) => return,
                Some(true) => {}
                None => {
                    // No mark read in time: do without (as before marks).
                    self.drop_marks();
                    return;
                }
            }
            if !self.extra.contains(dir) || !self.own_path(dir) {
                return;
            }
            removals = marks.removals();
            // notify still lists `dir`: the call adds to its watch, and the
            // kernel makes a new one where the old one went.
            if self.call_watch(dir, RecursiveMode::Recursive).is_err() {
                return;
            }
        }
    }

    /// Whether `dir` is a directory reached through directories only, from
    /// the nearest path watched as asked (a root or an ancestor of one)
    /// down: no symlink on the way, none at the end.
    ///
    /// notify keys its watches by path, the kernel by inode, and a watch
    /// call through a symlink lands on the directory the link leads to.
    /// When that directory is watched already, the kernel hands back its
    /// watch and notify files it under the new path: the directory's
    /// events arrive under the link's path from then on (for nodes the
    /// index does not have, so they are dropped), and unwatching the
    /// link's path removes the directory's only watch. The engine asks for
    /// such a path when it looks at a name in a directory that was
    /// replaced by a link after the event it handles (`d/g` moved away, `d`
    /// then replaced by a link to its sibling `f`: the event for `d/g`
    /// finds a directory there, `f/g`).
    ///
    /// The look comes before the call, so a link made in between (within
    /// the round trip to notify's thread) is not seen.
    fn own_path(&self, dir: &Path) -> bool {
        self.own_path_below(dir, None)
    }

    /// [`own_path`](Self::own_path) where no watch call is made (Windows,
    /// macOS: the OS's recursive watch covers new directories): what it
    /// guards there is a read through a link, which the link's own events
    /// undo. The directories above the last new directory found so, less
    /// than [`OWN_PATH_FRESH`] ago, are not looked at again: a walk down a
    /// chain of new directories looks at each one once, not at all those
    /// above it for each (under Wine, a look at a path 1,600 characters
    /// long costs 10-30 ms: a chain of 120 new directories took the engine
    /// 63 s, and nothing else was reported meanwhile).
    fn own_path_walked(&mut self, dir: &Path) -> bool {
        let fresh = self
            .last_own
            .as_ref()
            .filter(|(_, at)| at.elapsed() < OWN_PATH_FRESH)
            .map(|(p, _)| p.clone());
        let own = self.own_path_below(dir, fresh.as_deref());
        if own {
            self.last_own = Some((dir.to_path_buf(), std::time::Instant::now()));
        }
        own
    }

    /// [`own_path`](Self::own_path), taking `known` and the directories
    /// above it as directories of their own without looking.
    fn own_path_below(&self, dir: &Path, known: Option<&Path>) -> bool {
        // Paths above the nearest one watched as asked are the user's, and
        // may go through links. With none above (a recursive watch that
        // failed part of the way), those above the outermost new directory.
        let outer = dir
            .ancestors()
            .skip(1)
            .find(|a| self.watched.contains_key(*a))
            .or_else(|| {
                dir.ancestors()
                    .filter(|a| self.extra.contains(*a))
                    .last()
                    .and_then(Path::parent)
            })
            .or(dir.parent());
        dir.ancestors()
            .take_while(|a| Some(*a) != outer && !known.is_some_and(|k| k.starts_with(a)))
            .all(|a| matches!(crate::fs::lstat_type(a), Ok(Some(FileType::Dir))))
    }
}

impl Drop for Portable {
    fn drop(&mut self) {
        self.drop_marks();
    }
}

impl PathWatcher for Portable {
    /// Drops the watch on `path` and, for a recursive one, the new
    /// directories' watches of our own below it (notify 9 keeps every
    /// watch asked for until it is asked to drop it).
    fn unwatch(&mut self, path: &Path) {
        if let Some(recursive) = self.watched.remove(path) {
            if recursive {
                self.drop_extra_below(path);
            }
            self.call_unwatch(path);
        }
    }

    fn watch_again(&mut self, path: &Path) -> Option<Result<(), WatchError>> {
        let mode = match self.watched.get(path) {
            Some(true) => RecursiveMode::Recursive,
            Some(false) => RecursiveMode::NonRecursive,
            None if self.extra.contains(path) => RecursiveMode::Recursive,
            None => return None,
        };
        Some(
            self.call_watch(path, mode)
                .map_err(|e| watch_error(e, path)),
        )
    }

    /// Called before reading a directory that just appeared below a
    /// recursive root. notify adds its own watch for it only after it has
    /// handed the creation event over, so a read done at once could miss
    /// files created in between. `watch()` is served by notify's thread after
    /// that, so once it returns the new directory and all below it are
    /// watched.
    ///
    /// Before it returns, notify's thread has also read every event queued
    /// before the call, and a watch the call left to a removal read meanwhile
    /// has been asked for again (see [`settle`](Portable::settle)).
    ///
    /// False, watching nothing, when `dir` is not a directory of its own
    /// (see [`own_path`](Portable::own_path)). On failure: the error and
    /// the directory it is about, as [`watch`](PathWatcher::watch) gives
    /// them.
    ///
    /// On Windows and macOS the OS's recursive watch (ReadDirectoryChangesW
    /// with its subtree, FSEvents) covers a new directory from the moment
    /// it exists: there is no gap, and no watch call is made. A handle of
    /// our own on each new directory would there cost a buffer and report
    /// every change twice, and on Windows it would stop the directory's
    /// parents from being renamed or deleted while it is open.
    fn watch_new_dir(&mut self, dir: &Path) -> Result<bool, WatchError> {
        if self.watched.contains_key(dir) || self.extra.contains(dir) {
            return Ok(true);
        }
        if !RECURSIVE_WATCH_HAS_A_GAP {
            return Ok(self.own_path_walked(dir));
        }
        if self.faults.take_limit() {
            return Err(limit_error(dir));
        }
        if !self.own_path(dir) {
            return Ok(false);
        }
        let removals = self.removals();
        self.call_watch(dir, RecursiveMode::Recursive)
            .map_err(|e| watch_error(e, dir))?;
        self.extra.insert(dir.to_path_buf());
        #[cfg(test)]
        if let Some(f) = &mut self.after_call {
            f();
        }
        self.settle(dir, removals);
        Ok(true)
    }

    /// Watches `path` unless a recursive watch above it already covers it;
    /// upgrades a non-recursive watch to a recursive one when asked.
    ///
    /// On failure: the error and the directory it is about. A recursive
    /// watch stops at the first directory below `path` that cannot be
    /// watched (notify walks the tree and gives up there); that directory is
    /// named, and `path` is not recorded as watched, so that the directories
    /// below it get watch calls of their own.
    fn watch(&mut self, path: &Path, recursive: bool) -> Result<(), WatchError> {
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
        if self.faults.take_limit() {
            return Err(limit_error(path));
        }
        let mode = if recursive {
            RecursiveMode::Recursive
        } else {
            RecursiveMode::NonRecursive
        };
        self.call_watch(path, mode)
            .map_err(|e| watch_error(e, path))?;
        self.watched.insert(path.to_path_buf(), recursive);
        Ok(())
    }

    /// Whether `path` has the watch [`watch`](PathWatcher::watch)
    /// would give it.
    fn has_watch(&self, path: &Path, recursive: bool) -> bool {
        self.covers(path) || self.watched.get(path).is_some_and(|&r| r || !recursive)
    }

    /// Whether a recursive watch strictly above `path` covers it.
    fn covers(&self, path: &Path) -> bool {
        path.ancestors()
            .skip(1)
            .any(|a| self.watched.get(a) == Some(&true) || self.extra.contains(a))
    }

    /// A directory left the index: drop a watch of our own on it. Returns
    /// whether one was dropped.
    fn forget_dir(&mut self, dir: &Path) -> bool {
        if self.extra.contains(dir) {
            self.drop_extra_below(dir);
            true
        } else {
            false
        }
    }

    /// The paths watched (for recomputing what is still needed).
    fn watched(&self) -> &BTreeMap<PathBuf, bool> {
        &self.watched
    }

    fn count(&self) -> usize {
        self.watched.len() + self.extra.len()
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn inject(&mut self, fault: Fault) {
        match fault {
            // Only the watch limit applies here (see `Fault::Fail`).
            Fault::Limit(_) => self.faults.set(fault),
            // notify's thread hands nothing more over, and says why.
            Fault::Die => {
                self.pause.kill();
                self.sink.send(OsMsg::failed(
                    "notify's event thread was stopped (injected)".into(),
                ));
            }
            // notify drops the watches behind our back, and says so.
            Fault::DropWatches => {
                let paths: Vec<PathBuf> = self
                    .watched
                    .keys()
                    .chain(self.extra.iter())
                    .cloned()
                    .collect();
                let mut events = Vec::new();
                for path in paths {
                    let _ = self.watcher.unwatch(&path);
                    events.push(OsEvent::Error {
                        message: format!("{}: the watch failed (injected)", path.display()),
                        path,
                        lost_after: None,
                    });
                }
                self.sink.send(OsMsg::events(events, 1, SystemTime::now()));
            }
            Fault::Fail(_) => {}
        }
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn pause(&self) -> Arc<ReaderPause> {
        self.pause.clone()
    }
}

/// The error notify reports at the OS's watch limit (`MaxFilesWatch`), as
/// a watch call returns it (test hook).
fn limit_error(path: &Path) -> WatchError {
    watch_error(
        notify::Error::new(notify::ErrorKind::MaxFilesWatch).add_path(path.to_path_buf()),
        path,
    )
}

/// A notify error as an I/O error (so that the engine classifies it like the
/// native backend's), with the path it is about (`fallback` if it names
/// none).
fn watch_error(e: notify::Error, fallback: &Path) -> WatchError {
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
    WatchError { error: io, at }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{AccessKind, CreateKind, Flag, RemoveKind, RenameMode};

    fn hints(kind: EventKind) -> Vec<(PathBuf, Hint)> {
        let e = notify::Event::new(kind)
            .add_path("/r/a".into())
            .add_path("/r/b".into());
        decode(Ok(e), None)
            .into_iter()
            .map(|e| match e {
                OsEvent::Path { path, hint } => (path, hint),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn event_kinds_decode_to_hints_per_path() {
        let both = |h| vec![(PathBuf::from("/r/a"), h), (PathBuf::from("/r/b"), h)];
        assert_eq!(
            hints(EventKind::Create(CreateKind::File)),
            both(Hint::Created)
        );
        assert_eq!(
            hints(EventKind::Remove(RemoveKind::Any)),
            both(Hint::Removed)
        );
        assert_eq!(
            hints(EventKind::Modify(ModifyKind::Name(RenameMode::Any))),
            both(Hint::Moved)
        );
        assert_eq!(
            hints(EventKind::Modify(ModifyKind::Any)),
            both(Hint::Modified)
        );
        assert_eq!(hints(EventKind::Other), both(Hint::Moved));
        // The engine's own reads come back as opens: noise.
        assert!(hints(EventKind::Access(AccessKind::Any)).is_empty());
    }

    /// A rename notify paired (`Both`, after its two halves) is a pair,
    /// and no hint: the halves were hints of their own.
    #[test]
    fn a_paired_rename_decodes_to_its_pair() {
        let e = notify::Event::new(EventKind::Modify(ModifyKind::Name(RenameMode::Both)))
            .add_path("/r/a".into())
            .add_path("/r/b".into());
        match decode(Ok(e), None).as_slice() {
            [OsEvent::PathRenamed { from, to }] => {
                assert_eq!(
                    (from.as_path(), to.as_path()),
                    (Path::new("/r/a"), Path::new("/r/b"))
                );
            }
            other => panic!("{other:?}"),
        }
    }

    /// Windows' halves (no tracker) are paired when the new name comes
    /// right after the old one; anything between them, or a tracker
    /// (notify's inotify pairs those itself), and they are not.
    #[test]
    fn halves_without_a_tracker_are_paired_when_adjacent() {
        let name = |mode, p: &str| {
            Ok(notify::Event::new(EventKind::Modify(ModifyKind::Name(mode))).add_path(p.into()))
        };
        let mut r = Renames::default();
        assert!(r.see(&name(RenameMode::From, "/r/a")).is_none());
        let both = r.see(&name(RenameMode::To, "/r/b")).expect("paired");
        assert_eq!(
            both.kind,
            EventKind::Modify(ModifyKind::Name(RenameMode::Both))
        );
        assert_eq!(both.paths, [PathBuf::from("/r/a"), PathBuf::from("/r/b")]);
        // The pair is used once.
        assert!(r.see(&name(RenameMode::To, "/r/c")).is_none());
        // Something between the halves.
        assert!(r.see(&name(RenameMode::From, "/r/a")).is_none());
        let create =
            Ok(notify::Event::new(EventKind::Create(CreateKind::File)).add_path("/r/x".into()));
        assert!(r.see(&create).is_none());
        assert!(r.see(&name(RenameMode::To, "/r/b")).is_none());
        // Halves with a tracker.
        let tracked = |mode, p: &str| {
            Ok(
                notify::Event::new(EventKind::Modify(ModifyKind::Name(mode)))
                    .add_path(p.into())
                    .set_tracker(7),
            )
        };
        assert!(r.see(&tracked(RenameMode::From, "/r/a")).is_none());
        assert!(r.see(&tracked(RenameMode::To, "/r/b")).is_none());
    }

    #[test]
    fn rescan_flag_is_an_overflow_and_errors_name_their_path() {
        let e = notify::Event::new(EventKind::Other).set_flag(Flag::Rescan);
        assert!(matches!(
            decode(Ok(e), None).as_slice(),
            [OsEvent::Overflow]
        ));
        let err = notify::Error::generic("boom").add_path("/r/x".into());
        match decode(Err(err), None).as_slice() {
            [OsEvent::Error { path, message, .. }] => {
                assert_eq!(path, Path::new("/r/x"));
                assert!(message.contains("boom"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    /// Waits (at most 10 s) for the first event at a path among `paths`.
    #[cfg(unix)]
    fn first_event_among(rx: &crossbeam_channel::Receiver<OsMsg>, paths: &[PathBuf]) -> PathBuf {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let msg = rx
                .recv_deadline(deadline)
                .unwrap_or_else(|_| panic!("no event at any of {paths:?} within 10 s"));
            if let Read::Events { events, .. } = msg.read() {
                for e in events {
                    if let OsEvent::Path { path, .. } = e
                        && paths.contains(&path)
                    {
                        return path;
                    }
                }
            }
        }
    }

    /// `r/d` replaced by a link to its sibling `r/f`: a new-directory
    /// watch asked for `r/d/g` (the engine looking at an event for `d/g`
    /// after the replacement) would reach the watched `r/f/g`, and notify
    /// would file `f/g`'s watch under `d/g`. It is refused, and `f/g`
    /// keeps its watch and its path, also once `d/g` is forgotten.
    #[cfg(unix)]
    #[test]
    fn a_new_directory_is_never_watched_through_a_link() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path().join("r");
        std::fs::create_dir_all(r.join("f/g")).unwrap();
        std::os::unix::fs::symlink("f", r.join("d")).unwrap();
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut p = Portable::start(Sink::new(move |m| tx.send(m).is_ok())).unwrap();
        p.watch(&r, true).unwrap();

        assert!(!p.watch_new_dir(&r.join("d/g")).unwrap(), "refused");
        assert_eq!(p.count(), 1, "nothing recorded for d/g");

        let write_and_see = |name: &str| {
            std::fs::write(r.join("f/g").join(name), "x").unwrap();
            first_event_among(&rx, &[r.join("f/g").join(name), r.join("d/g").join(name)])
        };
        assert_eq!(write_and_see("one"), r.join("f/g/one"), "f/g's own path");
        // What the engine does when the stale node goes.
        p.forget_dir(&r.join("d/g"));
        assert_eq!(write_and_see("two"), r.join("f/g/two"), "still watched");

        // A real new directory is watched; a gone one, or a link, refused.
        std::fs::create_dir(r.join("f/g/new")).unwrap();
        // (On macOS the OS's watch of r covers it: no watch of its own.)
        let own = if RECURSIVE_WATCH_HAS_A_GAP { 2 } else { 1 };
        assert!(p.watch_new_dir(&r.join("f/g/new")).unwrap());
        assert_eq!(p.count(), own, "f/g/new watched on its own where needed");
        assert!(!p.watch_new_dir(&r.join("f/none")).unwrap());
        assert!(!p.watch_new_dir(&r.join("d")).unwrap());
        assert_eq!(p.count(), own);
    }

    /// Drops the kernel's inotify watch on `dir`, behind notify's back, in
    /// the inotify instance that also watches `root` (found by inodes in
    /// `/proc/self/fdinfo`): what notify does when it reads a rename's
    /// source whose descriptor it has since filed under `dir`.
    #[cfg(target_os = "linux")]
    fn drop_kernel_watch(root: &Path, dir: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        let (root_ino, dir_ino) = (ino(root), ino(dir));
        for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
            if std::fs::read_link(entry.path()).ok() != Some("anon_inode:inotify".into()) {
                continue;
            }
            let Some(fd) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            let Ok(info) = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")) else {
                continue;
            };
            // "inotify wd:3 ino:1a2b sdev:800001 mask:..." (hex numbers)
            let watches: Vec<(i32, u64)> = info
                .lines()
                .filter_map(|l| l.strip_prefix("inotify wd:"))
                .filter_map(|rest| {
                    let mut it = rest.split_whitespace();
                    let wd = i32::from_str_radix(it.next()?, 16).ok()?;
                    let ino = u64::from_str_radix(it.next()?.strip_prefix("ino:")?, 16).ok()?;
                    Some((wd, ino))
                })
                .collect();
            if !watches.iter().any(|(_, i)| *i == root_ino) {
                continue;
            }
            if let Some((wd, _)) = watches.iter().find(|(_, i)| *i == dir_ino) {
                // SAFETY: removes a watch from an inotify descriptor this
                // process holds; no memory is passed.
                return unsafe { libc::inotify_rm_watch(fd, *wd) } == 0;
            }
        }
        false
    }

    /// Seed 2011's loss, staged: `h` is renamed to `d/g` and notify has
    /// not read the move yet when a watch call walks `d/g` (the kernel
    /// hands back `h`'s descriptor, notify files it under `d/g`); notify
    /// then reads the move, drops the watch of `h`, the descriptor `d/g`
    /// depends on, and, the `IN_MOVED_TO` gone with a watch removed
    /// meanwhile, never adds it back. Here the call is made, then the
    /// kernel's watch of the new directory is dropped, and a removal
    /// (`rmdir gone`) is queued before the backend's mark: the call is
    /// made again, and the directory's events come.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_watch_dropped_by_a_removal_read_after_the_call_is_made_again() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path().join("r");
        // Both there before the root's watch: no creation event of theirs
        // that notify could act on later.
        std::fs::create_dir_all(r.join("gone")).unwrap();
        std::fs::create_dir_all(r.join("d/g")).unwrap();
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut p = Portable::start(Sink::new(move |m| tx.send(m).is_ok())).unwrap();
        p.watch(&r, true).unwrap();
        let (root, g) = (r.clone(), r.join("d/g"));
        p.after_call = Some(Box::new(move || {
            assert!(drop_kernel_watch(&root, &g), "d/g's watch found");
            std::fs::remove_dir(root.join("gone")).unwrap();
        }));
        assert!(p.watch_new_dir(&r.join("d/g")).unwrap());
        p.after_call = None;

        std::fs::write(r.join("d/g/f"), "x").unwrap();
        assert_eq!(
            first_event_among(&rx, &[r.join("d/g/f")]),
            r.join("d/g/f"),
            "d/g watched again"
        );
        let marks = p.marks.as_ref().expect("marks on Linux").dir.clone();
        assert!(marks.is_dir());
        drop(p);
        assert!(
            !marks.exists(),
            "the marks' directory goes with the backend"
        );
        // One left by a process that is gone (no pid is this high) goes
        // when the next backend starts.
        let stale = std::env::temp_dir().join(".specwatch-marks-4294967295-0");
        let _ = std::fs::create_dir(&stale);
        drop(Portable::start(Sink::new(|_| true)).unwrap());
        assert!(!stale.exists(), "a gone process's marks removed");
    }

    #[test]
    fn notify_errors_map_to_classified_watch_errors() {
        let limit = limit_error(Path::new("/r/d"));
        assert!(limit.at_limit(), "{limit:?}");
        assert_eq!(limit.at, Path::new("/r/d"));
        let gone = watch_error(
            notify::Error::path_not_found().add_path("/r/e".into()),
            Path::new("/r"),
        );
        assert!(gone.gone() && !gone.at_limit());
        assert_eq!(gone.at, Path::new("/r/e"), "the path notify named");
        let other = watch_error(notify::Error::generic("x"), Path::new("/r"));
        assert_eq!(other.at, Path::new("/r"), "the fallback path");
    }
}
