//! The holds' unit tests (`engine/holds.rs`), with the spec table whose
//! batches they hold and the step that asks them (`batching.rs`'s
//! `take_due`): each spec's own windows, the VCS hold, files being
//! written. No file system: the lock is what a probe says, the clock is
//! the test's.

use super::*;
use crate::batch::change::{ChangeKind, FileType};
use crate::engine::batching::{self, Due};
use crate::engine::specs::SpecTable;
use crate::engine::specs::tests::state;
use crate::ids::Generation;
use crate::ignore::Matcher;
use crate::spec::WatchSpec;
use std::time::Duration;

/// The spec table and its holds, as the engine keeps them, with the
/// steps that join them.
#[derive(Default)]
struct Table {
    specs: SpecTable,
    holds: Holds,
}

impl Table {
    /// Spec `spec` (with its matcher `m`), generation 1 of `name`.
    fn insert(&mut self, name: &str, (spec, m): (WatchSpec, Matcher)) -> SpecId {
        let (sid, _) = self.specs.insert(name.into(), Generation(1), spec, m);
        self.holds
            .add(sid, name, self.specs.get(sid).unwrap().options());
        sid
    }

    fn record_root(&mut self, sid: SpecId, now: Instant, root: &Path, k: ChangeKind, t: FileType) {
        self.specs.record_root(sid, now, root, k, t);
    }

    fn record_for(&mut self, sid: SpecId, now: Instant, p: PathBuf, k: ChangeKind, t: FileType) {
        self.specs.record_for(sid, now, p, k, t);
    }

    fn take_due(
        &mut self,
        now: Instant,
        wall: SystemTime,
        lock: impl FnMut(&[PathBuf]) -> Option<PathBuf>,
    ) -> Due {
        batching::take_due(&mut self.specs, &mut self.holds, (now, wall), lock)
    }

    fn next_deadline(&self) -> Option<Instant> {
        batching::next_deadline(&self.specs, &self.holds)
    }

    /// A sync's close: the whole batch.
    fn take(&mut self, sid: SpecId) -> Vec<Change> {
        self.holds.closed(sid);
        self.specs.take(sid)
    }

    fn take_touched(&mut self) -> Vec<SpecId> {
        self.holds.take_touched()
    }

    fn vcs_lock(&self, sid: SpecId) -> Option<VcsLock> {
        self.holds.vcs_lock(sid)
    }

    fn write_looks_due(&self, now: Instant) -> Vec<(SpecId, PathBuf)> {
        self.holds.write_looks_due(now, self.specs.open_ids())
    }
}

#[test]
fn batches_close_by_each_specs_own_window() {
    let mut t = Table::default();
    let a = t.insert("a", state(&["/a"], 10));
    let b = t.insert("b", state(&["/b"], 100));
    let t0 = Instant::now();
    t.record_root(a, t0, Path::new("/a"), ChangeKind::Created, FileType::Dir);
    t.record_root(b, t0, Path::new("/b"), ChangeKind::Created, FileType::Dir);
    assert_eq!(t.next_deadline(), Some(t0 + Duration::from_millis(10)));
    let early = t.take_due(
        t0 + Duration::from_millis(9),
        SystemTime::UNIX_EPOCH,
        no_lock,
    );
    assert!(early.closed.is_empty());
    let due = t.take_due(
        t0 + Duration::from_millis(10),
        SystemTime::UNIX_EPOCH,
        no_lock,
    );
    assert_eq!(due.closed.len(), 1);
    assert_eq!(due.closed[0].0, a);
    assert_eq!(t.next_deadline(), Some(t0 + Duration::from_millis(100)));
    assert_eq!(t.take(b).len(), 1, "a sync closes it early");
    assert_eq!(t.next_deadline(), None);
}

fn no_lock(_: &[PathBuf]) -> Option<PathBuf> {
    None
}

/// A spec with `vcs_settle` (quiet 10 ms, max delay 100 ms, `bound`)
/// and the time, for the tests of holds: the lock is what their probe
/// says, no file system involved.
fn settling(bound: Duration) -> (Table, SpecId, Instant) {
    let (t, sid) = held(|s| s.vcs_settle(bound));
    (t, sid, Instant::now())
}

/// A table with one spec `t` of `/r` (quiet 10 ms, max delay 100 ms),
/// with the options `with` sets.
fn held(with: impl FnOnce(WatchSpec) -> WatchSpec) -> (Table, SpecId) {
    let mut t = Table::default();
    let spec = WatchSpec::new([crate::test_paths::abs("/r")])
        .quiet_window(Duration::from_millis(10))
        .max_delay(Duration::from_millis(100));
    let spec = with(spec).normalized("t").unwrap();
    let m = spec.matcher("t").unwrap();
    let sid = t.insert("t", (spec, m));
    (t, sid)
}

fn at(t0: Instant, ms: u64) -> Instant {
    t0 + Duration::from_millis(ms)
}

#[test]
fn a_batch_is_held_while_the_lock_exists_and_released_as_one() {
    let (mut t, sid, t0) = settling(Duration::from_secs(10));
    let root = crate::test_paths::abs("/r");
    let lock = root.join(".git/index.lock");
    let locked = std::cell::Cell::new(true);
    let probe = |roots: &[PathBuf]| {
        assert_eq!(roots, std::slice::from_ref(&root));
        locked.get().then(|| lock.clone())
    };
    let w = SystemTime::UNIX_EPOCH;
    let (a, b, c) = (root.join("a"), root.join("b"), root.join("c"));
    // A checkout: a change every 5 ms for 2 s, far past max_delay.
    let mut ms = 0;
    while ms < 2000 {
        let (path, kind) = match (ms / 5) % 4 {
            0 => (&a, ChangeKind::Modified),
            1 => (&b, ChangeKind::Created),
            2 => (&b, ChangeKind::Removed),
            _ => (&c, ChangeKind::Created),
        };
        t.record_for(sid, at(t0, ms), path.clone(), kind, FileType::File);
        let due = t.take_due(at(t0, ms), w, probe);
        assert!(
            due.closed.is_empty() && due.released.is_empty(),
            "at {ms} ms"
        );
        if ms == 100 {
            assert_eq!(t.take_touched(), [sid], "the hold shows in status");
            let st = t.vcs_lock(sid).unwrap();
            assert_eq!((st.path.clone(), st.overdue), (lock.clone(), false));
        }
        // Never a deadline in the past (the engine would spin).
        assert!(t.next_deadline().unwrap() > at(t0, ms), "at {ms} ms");
        ms += 5;
    }
    locked.set(false);
    let due = t.take_due(at(t0, 2010), w, probe);
    assert!(due.closed.is_empty());
    assert_eq!(due.released, [sid], "a barrier closes it");
    assert_eq!(t.take_touched(), [sid]);
    assert!(t.vcs_lock(sid).is_none());
    // The barrier passed: one batch, net per path.
    let batch = t.take(sid);
    let net: Vec<(PathBuf, ChangeKind)> = batch.into_iter().map(|c| (c.path, c.kind)).collect();
    assert_eq!(
        net,
        [
            (a.clone(), ChangeKind::Modified),
            (c.clone(), ChangeKind::Created)
        ]
    );
    assert_eq!(t.next_deadline(), None);
    // The next batch flows as usual.
    t.record_for(
        sid,
        at(t0, 3000),
        a.clone(),
        ChangeKind::Modified,
        FileType::File,
    );
    let due = t.take_due(at(t0, 3010), w, probe);
    assert_eq!(due.closed.len(), 1);
}

#[test]
fn a_lock_that_stays_past_the_bound_lets_the_batch_go() {
    let (mut t, sid, t0) = settling(Duration::from_secs(1));
    let lock = crate::test_paths::abs("/r/.git/index.lock");
    let probe = |_: &[PathBuf]| Some(lock.clone());
    let w = SystemTime::UNIX_EPOCH;
    let a = crate::test_paths::abs("/r/a");
    t.record_for(sid, t0, a.clone(), ChangeKind::Modified, FileType::File);
    let mut now = at(t0, 10);
    let mut closed = Vec::new();
    while now < at(t0, 1500) {
        closed.extend(t.take_due(now, w, probe).closed);
        if !closed.is_empty() {
            break;
        }
        now = t.next_deadline().expect("a look to come");
    }
    assert_eq!(now, at(t0, 1010), "held 1 s from the first hold");
    assert_eq!(closed.len(), 1);
    assert!(t.vcs_lock(sid).unwrap().overdue);
    // Overdue: the next batch flows at its own time.
    t.record_for(sid, at(t0, 1100), a, ChangeKind::Modified, FileType::File);
    let due = t.take_due(at(t0, 1110), w, probe);
    assert_eq!(due.closed.len(), 1);
}

/// A spec with `write_finished` (quiet 10 ms, max delay 100 ms, interval
/// 50 ms): a file being written holds the batch past its quiet window,
/// never past its maximum delay; then the rest goes and the file's change
/// moves to the next batch, reported once its writer is done.
#[test]
fn a_file_being_written_holds_the_batch_to_its_maximum_delay_then_moves_on() {
    let (mut t, sid) = held(|s| s.write_finished(Duration::from_millis(50)));
    assert!(t.holds.any_write_holds());
    let t0 = Instant::now();
    let w = SystemTime::UNIX_EPOCH;
    let root = crate::test_paths::abs("/r");
    let (a, d) = (root.join("a"), root.join("d"));
    let size = |n| Meta {
        size: n,
        mtime: None,
        inode: None,
    };
    let wrote = |t: &mut Table, at: Instant, n: u64| {
        t.holds.wrote(sid, at, &a, Some(&size(n)), None);
    };
    t.record_for(sid, t0, a.clone(), ChangeKind::Created, FileType::File);
    wrote(&mut t, t0, 1);
    // The quiet window is up, the file's look is not.
    assert!(t.take_due(at(t0, 10), w, no_lock).closed.is_empty());
    assert_eq!(t.next_deadline(), Some(at(t0, 50)));
    assert_eq!(t.write_looks_due(at(t0, 49)), []);
    assert_eq!(t.write_looks_due(at(t0, 50)), [(sid, a.clone())]);
    // It grew: another interval, past the maximum delay.
    t.holds
        .write_looked(sid, (at(t0, 50), w), &a, Some(&size(2)));
    assert!(t.take_due(at(t0, 50), w, no_lock).closed.is_empty());
    t.record_for(
        sid,
        at(t0, 60),
        d.clone(),
        ChangeKind::Created,
        FileType::Dir,
    );
    assert_eq!(t.next_deadline(), Some(at(t0, 100)));
    // The maximum delay: the rest goes, the file waits.
    let due = t.take_due(at(t0, 100), w, no_lock);
    let closed: Vec<&Path> = due.closed[0].1.iter().map(|c| c.path.as_path()).collect();
    assert_eq!(closed, [d.as_path()]);
    assert!(
        t.next_deadline().unwrap() > at(t0, 100),
        "moved to the next batch"
    );
    // Its writer closes it: reported at the next quiet window's end.
    t.holds.write_finished(&a);
    assert_eq!(t.next_deadline(), Some(at(t0, 110)));
    let due = t.take_due(at(t0, 110), w, no_lock);
    let net: Vec<(PathBuf, ChangeKind)> = due.closed[0]
        .1
        .iter()
        .map(|c| (c.path.clone(), c.kind))
        .collect();
    assert_eq!(net, [(a.clone(), ChangeKind::Created)]);
    assert_eq!(t.next_deadline(), None);
}

/// What the status lists: a VCS lock held (since its first hold, until
/// the bound), then overdue; a batch held for a file being written (since
/// it was due, until its maximum delay), gone when the batch closes. Each
/// change of the list touches the spec, and only a change does.
#[test]
fn the_status_lists_each_hold_with_since_and_until() {
    let (mut t, sid) = held(|s| {
        s.vcs_settle(Duration::from_millis(500))
            .write_finished(Duration::from_millis(50))
    });
    let t0 = Instant::now();
    let w0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
    let wall = |ms: u64| w0 + Duration::from_millis(ms);
    let a = crate::test_paths::abs("/r/a");
    let lock = crate::test_paths::abs("/r/.git/index.lock");
    assert!(t.holds.status(sid).is_empty());

    // A file being written: the batch, due at 10 ms, waits for it.
    t.record_for(sid, t0, a.clone(), ChangeKind::Created, FileType::File);
    t.holds.wrote(sid, t0, &a, None, None);
    assert!(t.take_due(at(t0, 5), wall(5), no_lock).closed.is_empty());
    assert!(t.holds.status(sid).is_empty(), "not due yet: nothing held");
    assert!(t.take_touched().is_empty());
    assert!(t.take_due(at(t0, 10), wall(10), no_lock).closed.is_empty());
    let held = t.holds.status(sid);
    assert_eq!(
        held,
        [HoldStatus {
            reason: HoldReason::Writing { files: 1 },
            since: wall(10),
            until: Some(wall(100)),
            overdue: false,
        }]
    );
    assert_eq!(held[0].to_string(), "1 file being written");
    assert_eq!(t.take_touched(), [sid]);
    // Asked again, nothing new: no news (the clock moved on).
    assert!(t.take_due(at(t0, 20), wall(21), no_lock).closed.is_empty());
    assert_eq!(t.holds.status(sid), held, "as first taken");
    assert!(t.take_touched().is_empty());
    // Its writer closes it: the batch closes, the hold goes.
    t.holds.write_finished(&a);
    assert_eq!(t.take_due(at(t0, 30), wall(30), no_lock).closed.len(), 1);
    assert!(t.holds.status(sid).is_empty());
    assert_eq!(t.take_touched(), [sid]);

    // A lock: held since the first hold, until the bound; then overdue.
    let probe = |_: &[PathBuf]| Some(lock.clone());
    t.record_for(
        sid,
        at(t0, 100),
        a.clone(),
        ChangeKind::Modified,
        FileType::File,
    );
    assert!(t.take_due(at(t0, 110), wall(110), probe).closed.is_empty());
    let vcs = HoldStatus {
        reason: HoldReason::VcsLock { path: lock.clone() },
        since: wall(110),
        until: Some(wall(610)),
        overdue: false,
    };
    assert_eq!(t.holds.status(sid), std::slice::from_ref(&vcs));
    assert_eq!(t.take_touched(), [sid]);
    let mut now = at(t0, 110);
    while t.take_due(now, wall(0), probe).closed.is_empty() {
        now = t.next_deadline().expect("a look to come");
    }
    let overdue = HoldStatus {
        overdue: true,
        ..vcs
    };
    assert_eq!(t.holds.status(sid), std::slice::from_ref(&overdue));
    assert!(
        overdue.to_string().ends_with("index.lock (overdue)"),
        "{overdue}"
    );
}
