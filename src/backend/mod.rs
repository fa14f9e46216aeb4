//! OS watching backends, behind one small contract.
//!
//! # The contract
//!
//! A backend watches what the engine asks it to, turns its OS's
//! notifications into [`OsEvent`]s and hands them to the engine through the
//! [`Sink`] it was started with. That is all it does: it never reads a
//! directory for the engine, never decides what changed and never touches
//! the index.
//!
//! 1. **Events are hints.** An [`OsEvent`] says "something happened to this
//!    name in this directory" (or to this path, or "events were lost"). The
//!    engine then looks at the file system itself and diffs against its
//!    index, so a backend must be *complete*, not precise: a spurious hint
//!    costs one `lstat`, a missing one loses a change.
//! 2. **OS vocabulary stays here.** inotify masks, notify `EventKind`s and
//!    errno values are decoded in this directory and nowhere else: into
//!    [`Hint`]s, [`OsEvent`]s and [`WatchError`]s (which say whether the OS
//!    is out of watches, or the directory is gone).
//! 3. **Never block the OS's queue.** Events are handed over with
//!    [`Sink::send`], which never waits. A backend with its own thread
//!    (native's reader, notify's event loop) must not block it on anything
//!    the engine holds. Where that thread also serves watch calls
//!    (notify's), it does nothing but hand over: its [`OsMsg`] is decoded
//!    by the backend's own code in [`OsMsg::read`], on the engine's thread.
//! 4. **Order.** Events of one backend reach the sink in the order the OS
//!    produced them: sync cookies rely on it.
//! 5. **Lost events are said so** ([`OsEvent::Overflow`]), never dropped
//!    silently; a reader that dies says so ([`Read::Failed`]).
//! 6. **Two shapes.** A [`DirWatcher`] watches one directory per call and
//!    names each watch by a [`WatchId`] (the same directory reached by two
//!    paths gets the same id: the engine shares it). A [`PathWatcher`]
//!    watches recursively by path and names events by absolute path. The
//!    engine's watch table speaks both; a new backend implements one of
//!    the two traits in a new file here and gets an arm in [`start`].
//!    Polling is not a backend: the engine polls (`engine/polling.rs`,
//!    on the scanner's lanes), and a manager that polls everything runs
//!    [`poll::Poll`], which holds no watch.
//!
//! Test hooks (`Fault`) make the next watch calls fail as the OS would,
//! through the same error mapping as real failures.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use parking_lot::{Condvar, Mutex};

use crate::spec::choice::Backend;

#[cfg(test)]
pub(crate) mod fake;
mod marks;
#[cfg(target_os = "linux")]
pub(crate) mod native;
pub(crate) mod poll;
pub(crate) mod portable;
mod statfs;

pub(crate) use statfs::{FileSystem, file_system};

/// What a hint says happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Hint {
    /// The name was created (or a hard link to it).
    Created,
    /// The name was written or its metadata changed.
    Modified,
    /// The name was removed.
    Removed,
    /// The name was renamed away or renamed over (or the OS did not say).
    Moved,
    /// The name's writer closed it (after opening it for writing): what
    /// it wrote is complete. Sent by the native backend only; the engine
    /// diffs as for `Created` (no change of its own for a file that was
    /// there) and tells specs that wait for writers (`write_finished`).
    #[cfg_attr(
        not(target_os = "linux"),
        expect(dead_code, reason = "sent only by inotify (Linux)")
    )]
    Closed,
    /// Nothing is known: the engine is re-checking (after lost events).
    /// Does not by itself mean the entry was written or replaced. Never
    /// sent by a backend.
    Rescan,
}

/// The number the OS gives one directory watch of a [`DirWatcher`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct WatchId(pub(crate) i32);

/// One hint from a backend.
#[derive(Debug)]
pub(crate) enum OsEvent {
    /// Something happened to the entry `name` of the directory watched as
    /// `watch`.
    #[cfg_attr(
        not(any(target_os = "linux", test)),
        expect(
            dead_code,
            reason = "sent only by a backend that listens per directory: inotify (Linux) and the tests' fake"
        )
    )]
    Entry {
        watch: WatchId,
        name: OsString,
        hint: Hint,
    },
    /// The directory watched as `watch` was itself moved (`moved`) or
    /// deleted.
    #[cfg_attr(
        not(target_os = "linux"),
        expect(
            dead_code,
            reason = "sent only by a backend that listens per directory: inotify (Linux)"
        )
    )]
    DirSelf { watch: WatchId, moved: bool },
    /// The OS dropped the watch `watch` (its directory is gone, or it was
    /// removed): no event will carry this id any more.
    #[cfg_attr(
        not(any(target_os = "linux", test)),
        expect(
            dead_code,
            reason = "sent only by a backend that listens per directory: inotify (Linux) and the tests' fake"
        )
    )]
    Dropped { watch: WatchId },
    /// The OS paired a rename: entry `from.1` of the directory watched as
    /// `from.0` is now entry `to.1` of the one watched as `to.0`. Sent
    /// right after the [`Entry`](OsEvent::Entry) hints of both ends
    /// (each `Moved`), which say all the engine must know: a consumer
    /// that dropped this event would lose nothing but the pairing.
    #[cfg_attr(
        not(target_os = "linux"),
        expect(
            dead_code,
            reason = "sent only by a backend that listens per directory: inotify (Linux)"
        )
    )]
    Renamed {
        from: (WatchId, OsString),
        to: (WatchId, OsString),
    },
    /// Something happened at `path` ([`PathWatcher`]s).
    Path { path: PathBuf, hint: Hint },
    /// The OS paired a rename of `from` to `to` ([`PathWatcher`]s): sent
    /// after the [`Path`](OsEvent::Path) hints of both ends, as
    /// [`Renamed`](OsEvent::Renamed) is.
    PathRenamed { from: PathBuf, to: PathBuf },
    /// The OS lost events: anything below every watch may have changed
    /// since the read before this one.
    Overflow,
    /// The OS lost events of one watch with a buffer of its own
    /// (ReadDirectoryChangesW's), that came after the given moment (its
    /// previous read, which may be older than the read before this one).
    LostAfter(SystemTime),
    /// A watch went wrong at `path` (it may now be incomplete, or gone:
    /// notify 9 drops a watch whose read fails for good, and says so with
    /// an error naming the path watched).
    /// `lost_after`: where the OS says which watch it is, that watch's
    /// previous read (what it may have lost came after).
    Error {
        path: PathBuf,
        message: String,
        lost_after: Option<SystemTime>,
    },
}

/// What a backend hands the engine: opaque until [`read`](OsMsg::read).
#[derive(Debug)]
pub(crate) struct OsMsg(Inner);

#[derive(Debug)]
enum Inner {
    Decoded(Read),
    /// Handed over as the OS gave it: decoded by [`OsMsg::read`], on the
    /// engine's thread, so that the backend's own thread only hands over
    /// (notify's thread also serves every watch call: a slower handler
    /// there slowed the engine's first walk of a tree by 13%).
    Portable(portable::Undecoded),
}

/// What an [`OsMsg`] says.
#[derive(Debug)]
pub(crate) enum Read {
    /// Events read in one go. `raw`: how many OS events the read held
    /// (noise included), for the counters. `read_at`: when the read
    /// started, so every event still queued after it was queued after this
    /// moment (what bounds what a later overflow may have hidden).
    /// `read_mono`: the same on the monotonic clock, or a moment after it
    /// (what an overflow compares with the engine's reads: the wall clock
    /// can be stepped back).
    Events {
        events: Vec<OsEvent>,
        raw: u64,
        read_at: SystemTime,
        read_mono: Instant,
    },
    /// The backend's reader stopped for good; nothing more will come.
    Failed(String),
}

impl OsMsg {
    /// Events already in our vocabulary, read from `read_at` on (the
    /// monotonic time is taken now, after the read: later, so safe).
    #[cfg_attr(
        not(any(target_os = "linux", test, feature = "test-hooks")),
        expect(
            dead_code,
            reason = "made only by a backend that decodes on its own thread: inotify's reader (Linux), the tests' and the test hooks'"
        )
    )]
    pub(crate) fn events(events: Vec<OsEvent>, raw: u64, read_at: SystemTime) -> OsMsg {
        OsMsg::events_at(events, raw, read_at, Instant::now())
    }

    /// [`events`](Self::events), with the monotonic time given.
    pub(crate) fn events_at(
        events: Vec<OsEvent>,
        raw: u64,
        read_at: SystemTime,
        read_mono: Instant,
    ) -> OsMsg {
        OsMsg(Inner::Decoded(Read::Events {
            events,
            raw,
            read_at,
            read_mono,
        }))
    }

    /// The backend's reader stopped for good.
    #[cfg_attr(
        not(any(target_os = "linux", test, feature = "test-hooks")),
        expect(
            dead_code,
            reason = "only inotify's reader (Linux) can die apart from its watcher (and the test hooks kill notify's)"
        )
    )]
    pub(crate) fn failed(why: String) -> OsMsg {
        OsMsg(Inner::Decoded(Read::Failed(why)))
    }

    /// How many OS events it holds, as the engine's inbox counts them:
    /// what a read decoded (at least 1), one notify event, none for a
    /// reader's failure (never held back).
    pub(crate) fn weight(&self) -> usize {
        match &self.0 {
            Inner::Decoded(Read::Events { events, .. }) => events.len().max(1),
            Inner::Decoded(Read::Failed(_)) => 0,
            Inner::Portable(_) => 1,
        }
    }

    /// When the read that brought it began (none for a failure).
    pub(crate) fn read_at(&self) -> Option<SystemTime> {
        match &self.0 {
            Inner::Decoded(Read::Events { read_at, .. }) => Some(*read_at),
            Inner::Decoded(Read::Failed(_)) => None,
            Inner::Portable(u) => Some(u.read_at()),
        }
    }

    /// What the message says, decoded by the backend that sent it (on the
    /// caller's thread).
    pub(crate) fn read(self) -> Read {
        match self.0 {
            Inner::Decoded(r) => r,
            Inner::Portable(u) => u.decode(),
        }
    }
}

/// Where a backend sends what it reads. Never blocks: the engine's sink
/// drops a message its bounded inbox has no room for, and the engine is
/// told (`engine/inbox.rs`), as of an [`OsEvent::Overflow`].
#[derive(Clone)]
pub(crate) struct Sink(Arc<dyn Fn(OsMsg) -> bool + Send + Sync>);

impl Sink {
    /// A sink that hands each message to `f` (which must not block, and
    /// returns false once nobody listens any more).
    pub(crate) fn new(f: impl Fn(OsMsg) -> bool + Send + Sync + 'static) -> Sink {
        Sink(Arc::new(f))
    }

    /// Hands `msg` over; false once the engine is gone.
    pub(crate) fn send(&self, msg: OsMsg) -> bool {
        (self.0)(msg)
    }
}

/// A watch call that failed: the error, classified, and the directory it
/// is about (for a recursive watch, possibly one below the path asked for).
#[derive(Debug)]
pub(crate) struct WatchError {
    pub error: io::Error,
    pub at: PathBuf,
}

mod errno {
    pub(super) const ENOSPC: i32 = 28;
    pub(super) const EMFILE: i32 = 24;
}

impl WatchError {
    pub(crate) fn new(error: io::Error, at: &Path) -> WatchError {
        WatchError {
            error,
            at: at.to_path_buf(),
        }
    }

    /// "No more watches to be had": the OS's limit (`ENOSPC` from inotify's
    /// `max_user_watches`, `EMFILE`), or a cap of our own.
    pub(crate) fn at_limit(&self) -> bool {
        matches!(
            self.error.raw_os_error(),
            Some(errno::ENOSPC) | Some(errno::EMFILE)
        ) || self.error.kind() == io::ErrorKind::QuotaExceeded
    }

    /// "No directory is there (any more)": no point trying again.
    pub(crate) fn gone(&self) -> bool {
        crate::fs::gone(&self.error)
    }
}

/// Test hook: make watch calls fail as the OS would.
#[cfg(any(test, feature = "test-hooks"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The next `n` watch calls fail with an I/O error (per-directory
    /// backends only).
    Fail(u32),
    /// The next `n` watch calls fail as they do at the OS's watch limit
    /// (`ENOSPC` from inotify, notify's `MaxFilesWatch`).
    Limit(u32),
    /// The backend's reader stops for good now, as a read that fails
    /// does: it says so ([`Read::Failed`]) and hands nothing more over.
    Die,
    /// The OS drops every watch of a path backend now, saying so with an
    /// error naming each one's path: what notify 9 does when a watch's
    /// read fails for good (ReadDirectoryChangesW's). Path backends only.
    DropWatches,
}

/// Injected failures left to hand out.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    fail: u32,
    limit: u32,
}

impl Faults {
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) fn set(&mut self, fault: Fault) {
        match fault {
            Fault::Fail(n) => self.fail = n,
            Fault::Limit(n) => self.limit = n,
            Fault::Die | Fault::DropWatches => {}
        }
    }

    /// Uses up one injected I/O failure, if any is left.
    #[cfg_attr(
        not(any(target_os = "linux", test)),
        expect(
            dead_code,
            reason = "only per-directory backends fail so: inotify (Linux) and the tests' fake"
        )
    )]
    pub(crate) fn take_fail(&mut self) -> bool {
        take_one(&mut self.fail)
    }

    /// Uses up one injected watch-limit failure, if any is left.
    pub(crate) fn take_limit(&mut self) -> bool {
        take_one(&mut self.limit)
    }
}

fn take_one(n: &mut u32) -> bool {
    let left = *n > 0;
    if left {
        *n -= 1;
    }
    left
}

/// Whether a reader is paused, held, both or neither.
#[derive(Default)]
struct Switch {
    /// Asked to stop reading (a reader that must not wait: to hold back
    /// what it reads).
    paused: bool,
    /// Asked to stop its thread at its next event, even a reader that
    /// must not wait (test hook, see [`ReaderPause::hold_point`]).
    held: bool,
}

/// A switch that makes a backend's reader stop reading (test hook: lets
/// the OS's queue overflow for real without touching machine-wide
/// settings), or, for a reader that must not wait, hold back what it
/// reads.
#[derive(Default)]
pub(crate) struct ReaderPause {
    /// The reader was made to stop (`Fault::Die`): nothing more is
    /// handed over.
    #[cfg(any(test, feature = "test-hooks"))]
    dead: std::sync::atomic::AtomicBool,
    paused: Mutex<Switch>,
    resumed: Condvar,
    /// What `hand_over` (test hooks) held back while paused, and
    /// where it goes on resume. Locked before `paused`.
    held: Mutex<(Vec<OsMsg>, Option<Sink>)>,
}

impl ReaderPause {
    #[cfg_attr(
        not(any(test, feature = "test-hooks", target_os = "linux")),
        expect(
            dead_code,
            reason = "only the test hooks pause a reader off Linux (inotify's reader checks the switch itself)"
        )
    )]
    pub(crate) fn set(&self, paused: bool) {
        let mut held = self.held.lock();
        self.paused.lock().paused = paused;
        if !paused && let (msgs, Some(sink)) = &mut *held {
            for m in msgs.drain(..) {
                sink.send(m);
            }
        }
        self.resumed.notify_all();
    }

    /// For a reader that must not wait (notify's thread also serves watch
    /// calls): hands `msg` to `sink`, or, while paused, holds it until the
    /// resume hands everything held over, in order. False once the engine
    /// is gone.
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) fn hand_over(&self, sink: &Sink, msg: OsMsg) -> bool {
        if self.is_dead() {
            return true;
        }
        let mut held = self.held.lock();
        if self.paused.lock().paused {
            held.0.push(msg);
            held.1.get_or_insert_with(|| sink.clone());
            true
        } else {
            sink.send(msg)
        }
    }

    /// Makes the reader stop for good (`Fault::Die`).
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) fn kill(&self) {
        self.dead.store(true, std::sync::atomic::Ordering::SeqCst);
        self.resumed.notify_all();
    }

    /// Whether the reader was made to stop.
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Holds (true) or lets go (false) the reader's thread itself: a
    /// reader that may wait (inotify's) stops reading, as paused; one that
    /// must not (notify's thread) stops at its next event, in
    /// [`hold_point`](Self::hold_point).
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) fn hold(&self, held: bool) {
        self.paused.lock().held = held;
        self.resumed.notify_all();
    }

    /// Where notify's thread stops while [held](Self::hold): it reads
    /// nothing more from the OS meanwhile, so the OS's own buffer fills
    /// (ReadDirectoryChangesW's, inotify's queue). At most a minute, so
    /// that a test that never lets go cannot hang a drop (which waits for
    /// that thread).
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) fn hold_point(&self) {
        let until = Instant::now() + std::time::Duration::from_secs(60);
        let mut p = self.paused.lock();
        while p.held && !self.is_dead() {
            if self.resumed.wait_until(&mut p, until).timed_out() {
                return;
            }
        }
    }

    /// Whether the reader is asked to stop reading.
    #[cfg_attr(
        not(target_os = "linux"),
        expect(dead_code, reason = "inotify's reader (Linux) asks")
    )]
    pub(crate) fn is_paused(&self) -> bool {
        let p = self.paused.lock();
        p.paused || p.held
    }

    /// Waits while paused (or held), checking `stop` every 50 ms.
    #[cfg_attr(
        not(target_os = "linux"),
        expect(dead_code, reason = "inotify's reader (Linux) waits")
    )]
    pub(crate) fn wait_while_paused(&self, stop: impl Fn() -> bool) {
        let mut p = self.paused.lock();
        while p.paused || p.held {
            if stop() {
                return;
            }
            self.resumed
                .wait_for(&mut p, std::time::Duration::from_millis(50));
        }
    }
}

/// A backend that watches one directory per call (inotify).
pub(crate) trait DirWatcher: Send {
    /// Watches the entries of directory `dir`, not recursively. The same
    /// directory (by identity, not path) gives the same id. With `follow`,
    /// `dir` may be a symlink to a directory. Injected faults apply.
    fn watch(&mut self, dir: &Path, follow: bool) -> Result<WatchId, WatchError>;

    /// The id a watch on `dir` has or would get, asking the OS (exact where
    /// comparing stats would race with renames). May leave a new watch
    /// behind: the caller unwatches an id it does not keep. No faults.
    fn identify(&mut self, dir: &Path, follow: bool) -> Option<WatchId>;

    /// Stops a watch. An id the OS already dropped is fine.
    fn unwatch(&mut self, id: WatchId);

    /// Whether its watches are a limited OS resource (counted in
    /// `Stats::os_watches`, capped by `max_os_watches`). A poller holds
    /// none.
    fn holds_os_watches(&self) -> bool {
        true
    }

    /// Test hook: make the next watch calls fail.
    #[cfg(any(test, feature = "test-hooks"))]
    fn inject(&mut self, fault: Fault);

    /// The watches the OS holds for us, where it says (for the index
    /// checks of tests).
    #[cfg(any(test, feature = "test-hooks"))]
    fn os_watches(&self) -> Option<Vec<WatchId>>;

    /// Test hook: the switch that pauses the reader, if there is one.
    #[cfg(any(test, feature = "test-hooks"))]
    #[cfg_attr(
        not(feature = "test-hooks"),
        expect(dead_code, reason = "called by `pause_os_reader` (test-hooks) only")
    )]
    fn pause(&self) -> Option<Arc<ReaderPause>>;
}

/// A backend that watches recursively by path (notify).
pub(crate) trait PathWatcher: Send {
    /// Watches `path` (recursively or not) unless a watch already covers
    /// it; upgrades a non-recursive watch when asked. Injected faults
    /// apply. A recursive watch that stops at a directory below `path`
    /// names that directory in the error, and `path` is not recorded.
    fn watch(&mut self, path: &Path, recursive: bool) -> Result<(), WatchError>;

    /// A directory just appeared below a recursive watch: watch it on its
    /// own before it is read, to close the gap until the backend's own
    /// recursion reaches it. Injected faults apply. False, with nothing
    /// watched, when `dir` is not a directory reached through directories
    /// from the watch above (gone, or reached through a symlink that
    /// replaced a directory above it): a watch by path through a link
    /// would land on the directory it leads to.
    fn watch_new_dir(&mut self, dir: &Path) -> Result<bool, WatchError>;

    /// Whether `path` has the watch [`watch`](Self::watch) would give it.
    fn has_watch(&self, path: &Path, recursive: bool) -> bool;

    /// Whether a recursive watch strictly above `path` covers it.
    fn covers(&self, path: &Path) -> bool;

    /// A directory left the index: drop a watch of its own. Returns
    /// whether one was dropped.
    fn forget_dir(&mut self, dir: &Path) -> bool;

    /// Drops the watch on `path` (and every watch below a recursive one).
    fn unwatch(&mut self, path: &Path);

    /// Asks the OS again for the watch on `path`, if it is one this
    /// backend was asked for (a root, a root's parent, a new directory's
    /// own): after an error on it, the OS may have dropped it. `None` for
    /// any other path.
    fn watch_again(&mut self, path: &Path) -> Option<Result<(), WatchError>>;

    /// The paths watched, and whether recursively.
    fn watched(&self) -> &BTreeMap<PathBuf, bool>;

    /// Watch calls held.
    fn count(&self) -> usize;

    /// Test hook: make the next watch calls fail.
    #[cfg(any(test, feature = "test-hooks"))]
    fn inject(&mut self, fault: Fault);

    /// Test hook: the switch that holds back the events read.
    #[cfg(any(test, feature = "test-hooks"))]
    #[cfg_attr(
        not(feature = "test-hooks"),
        expect(dead_code, reason = "called by `pause_os_reader` (test-hooks) only")
    )]
    fn pause(&self) -> Arc<ReaderPause>;
}

/// A started backend, by shape.
pub(crate) enum Os {
    /// One watch per directory.
    Dirs(Box<dyn DirWatcher>),
    /// Recursive watches by path.
    Paths(Box<dyn PathWatcher>),
}

/// A backend that could not start.
#[derive(Debug)]
pub(crate) struct StartError {
    /// What was being started.
    pub what: &'static str,
    pub error: io::Error,
}

/// Starts the backend `choice` (resolving [`Backend::Auto`] for this
/// platform), delivering to `sink`.
/// The backend [`start`] runs for `choice`: `Auto` resolved to this
/// platform's event backend.
pub(crate) fn resolve(choice: Backend) -> Backend {
    match choice {
        #[cfg(target_os = "linux")]
        Backend::Auto => Backend::Native,
        #[cfg(not(target_os = "linux"))]
        Backend::Auto => Backend::Portable,
        other => other,
    }
}

pub(crate) fn start(choice: Backend, sink: Sink) -> Result<Os, StartError> {
    match choice {
        #[cfg(target_os = "linux")]
        Backend::Auto | Backend::Native => native::Native::start(sink)
            .map(|n| Os::Dirs(Box::new(n)))
            .map_err(|error| StartError {
                what: "cannot create an inotify instance",
                error,
            }),
        #[cfg(not(target_os = "linux"))]
        Backend::Native => Err(StartError {
            what: "the native backend",
            error: io::Error::new(io::ErrorKind::Unsupported, "it exists on Linux only"),
        }),
        #[cfg(not(target_os = "linux"))]
        Backend::Auto => start_portable(sink),
        Backend::Portable => start_portable(sink),
        // The engine polls everything (`engine/modes.rs`): no watches.
        Backend::Poll { .. } => Ok(Os::Dirs(Box::new(poll::Poll))),
    }
}

fn start_portable(sink: Sink) -> Result<Os, StartError> {
    portable::Portable::start(sink)
        .map(|p| Os::Paths(Box::new(p)))
        .map_err(|error| StartError {
            what: "cannot start the notify watcher",
            error,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_errors_are_classified() {
        let at = Path::new("/x");
        let limit = WatchError::new(io::Error::from_raw_os_error(errno::ENOSPC), at);
        assert!(limit.at_limit() && !limit.gone());
        let fds = WatchError::new(io::Error::from_raw_os_error(errno::EMFILE), at);
        assert!(fds.at_limit());
        let cap = WatchError::new(io::Error::new(io::ErrorKind::QuotaExceeded, "cap"), at);
        assert!(cap.at_limit());
        let gone = WatchError::new(io::Error::from(io::ErrorKind::NotFound), at);
        assert!(gone.gone() && !gone.at_limit());
        let other = WatchError::new(io::Error::other("EIO"), at);
        assert!(!other.gone() && !other.at_limit());
    }

    #[test]
    fn faults_are_used_up_one_by_one() {
        let mut f = Faults::default();
        assert!(!f.take_fail() && !f.take_limit());
        f.set(Fault::Fail(2));
        f.set(Fault::Limit(1));
        assert!(f.take_fail() && f.take_fail() && !f.take_fail());
        assert!(f.take_limit() && !f.take_limit());
    }
}
