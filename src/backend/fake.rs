//! A per-directory backend without an OS, for the engine's unit tests: it
//! hands out watch ids by directory identity (device and inode, as inotify
//! does), honours injected faults, and reports nothing by itself: tests
//! inject the events they want.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use super::{DirWatcher, Fault, Faults, ReaderPause, WatchError, WatchId};

/// A change on disk a test stages between two steps of the engine.
type Staged = Box<dyn FnOnce(&Path) + Send>;

#[derive(Default)]
struct State {
    ids: HashMap<(u64, u64), i32>,
    next: i32,
    live: BTreeSet<i32>,
    /// What happens on disk just after a coming successful watch call (a
    /// race the test stages), and how many such calls are left until then.
    after_watch: Option<(u32, Staged)>,
    faults: Faults,
    calls: u32,
}

/// The test's handle on a [`Fake`]: shared state.
#[derive(Clone, Default)]
pub(crate) struct FakeControl(Arc<Mutex<State>>);

/// The backend half.
pub(crate) struct Fake(pub(crate) FakeControl);

impl State {
    fn add(&mut self, dir: &Path, follow: bool) -> io::Result<WatchId> {
        let ident = crate::fs::identity(dir, follow)?;
        let next = &mut self.next;
        let id = *self.ids.entry(ident).or_insert_with(|| {
            *next += 1;
            *next
        });
        self.live.insert(id);
        Ok(WatchId(id))
    }
}

impl FakeControl {
    /// The live watch of directory `dir`, if it has one.
    pub(crate) fn id_of(&self, dir: &Path) -> Option<WatchId> {
        let s = self.0.lock();
        let id = *s.ids.get(&crate::fs::identity(dir, true).ok()?)?;
        s.live.contains(&id).then_some(WatchId(id))
    }

    /// The OS drops watch `w` (its directory went): the event the backend
    /// would send. A new watch on the same inode gets a new id, as with
    /// inotify.
    pub(crate) fn drop_watch(&self, w: WatchId) -> super::OsEvent {
        let mut s = self.0.lock();
        s.live.remove(&w.0);
        s.ids.retain(|_, id| *id != w.0);
        super::OsEvent::Dropped { watch: w }
    }

    /// Runs `f` with the watched path just after the next successful watch
    /// call, before the engine reads the directory: what another process
    /// does in between.
    pub(crate) fn after_next_watch(&self, f: impl FnOnce(&Path) + Send + 'static) {
        self.after_watch_call(1, f);
    }

    /// The same after the `n`th successful watch call from now (1: the
    /// next). `f` runs with the fake's state locked: it may change the disk
    /// but not call this control.
    pub(crate) fn after_watch_call(&self, n: u32, f: impl FnOnce(&Path) + Send + 'static) {
        self.0.lock().after_watch = Some((n, Box::new(f)));
    }

    /// Watch calls made so far (faults included).
    pub(crate) fn calls(&self) -> u32 {
        self.0.lock().calls
    }

    /// Live watches.
    pub(crate) fn live(&self) -> usize {
        self.0.lock().live.len()
    }
}

impl DirWatcher for Fake {
    fn watch(&mut self, dir: &Path, follow: bool) -> Result<WatchId, WatchError> {
        let mut s = self.0.0.lock();
        s.calls += 1;
        let r = if s.faults.take_fail() {
            Err(io::Error::other("injected watch failure"))
        } else if s.faults.take_limit() {
            Err(io::Error::from_raw_os_error(super::errno::ENOSPC))
        } else {
            s.add(dir, follow)
        };
        if r.is_ok() {
            match s.after_watch.take() {
                Some((n, f)) if n > 1 => s.after_watch = Some((n - 1, f)),
                Some((_, f)) => f(dir),
                None => {}
            }
        }
        r.map_err(|e| WatchError::new(e, dir))
    }

    fn identify(&mut self, dir: &Path, follow: bool) -> Option<WatchId> {
        self.0.0.lock().add(dir, follow).ok()
    }

    fn unwatch(&mut self, id: WatchId) {
        self.0.0.lock().live.remove(&id.0);
    }

    fn inject(&mut self, fault: Fault) {
        self.0.0.lock().faults.set(fault);
    }

    fn os_watches(&self) -> Option<Vec<WatchId>> {
        Some(self.0.0.lock().live.iter().map(|i| WatchId(*i)).collect())
    }

    fn pause(&self) -> Option<Arc<ReaderPause>> {
        None
    }
}
