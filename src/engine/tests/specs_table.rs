//! The spec table's unit tests (`engine/specs.rs`): batches, guards,
//! the VCS hold, without a file system.

use super::*;
use std::time::Duration;

fn state(paths: &[&str], quiet_ms: u64) -> (WatchSpec, Matcher) {
    let spec = WatchSpec::new(paths.iter().map(|p| crate::test_paths::abs(p)))
        .quiet_window(Duration::from_millis(quiet_ms))
        .normalized("t")
        .unwrap();
    let m = spec.matcher("t").unwrap();
    (spec, m)
}

#[test]
fn ids_are_never_reused_and_names_follow_the_newest_generation() {
    let mut t = SpecTable::default();
    let (s, m) = state(&["/a"], 50);
    let (a1, old) = t.insert("a".into(), Generation(1), s, m);
    assert_eq!(old, None);
    let (s, m) = state(&["/b"], 50);
    let (a2, old) = t.insert("a".into(), Generation(2), s, m);
    assert_eq!(old, Some(a1));
    assert_ne!(a1, a2);
    assert_eq!(t.id_of("a"), Some(a2));
    t.remove(a1); // the old generation: the name stays with a2
    assert_eq!(t.id_of("a"), Some(a2));
    t.remove(a2);
    assert_eq!(t.id_of("a"), None);
    let (s, m) = state(&["/a"], 50);
    let (a3, _) = t.insert("a".into(), Generation(1), s, m);
    assert!(a3 > a2, "a fresh id");
}

#[test]
fn batches_close_by_each_specs_own_window() {
    let mut t = SpecTable::default();
    let (s, m) = state(&["/a"], 10);
    let (a, _) = t.insert("a".into(), Generation(1), s, m);
    let (s, m) = state(&["/b"], 100);
    let (b, _) = t.insert("b".into(), Generation(1), s, m);
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
fn settling(bound: Duration) -> (SpecTable, SpecId, Instant) {
    let mut t = SpecTable::default();
    let spec = WatchSpec::new([crate::test_paths::abs("/r")])
        .quiet_window(Duration::from_millis(10))
        .max_delay(Duration::from_millis(100))
        .vcs_settle(bound)
        .normalized("t")
        .unwrap();
    let m = spec.matcher("t").unwrap();
    let (sid, _) = t.insert("t".into(), Generation(1), spec, m);
    (t, sid, Instant::now())
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
            let st = t.get(sid).unwrap().vcs_lock().unwrap();
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
    assert!(t.get(sid).unwrap().vcs_lock().is_none());
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
    assert!(t.get(sid).unwrap().vcs_lock().unwrap().overdue);
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
    let mut t = SpecTable::default();
    let spec = WatchSpec::new([crate::test_paths::abs("/r")])
        .quiet_window(Duration::from_millis(10))
        .max_delay(Duration::from_millis(100))
        .write_finished(Duration::from_millis(50))
        .normalized("t")
        .unwrap();
    let m = spec.matcher("t").unwrap();
    let (sid, _) = t.insert("t".into(), Generation(1), spec, m);
    assert!(t.any_write_holds());
    let t0 = Instant::now();
    let w = SystemTime::UNIX_EPOCH;
    let root = crate::test_paths::abs("/r");
    let (a, d) = (root.join("a"), root.join("d"));
    let size = |n| Meta {
        size: n,
        mtime: None,
        inode: None,
    };
    let wrote = |t: &mut SpecTable, at: Instant, n: u64| {
        let st = t.states.get_mut(&sid).unwrap();
        st.writes
            .as_mut()
            .unwrap()
            .wrote(at, &a, Some(&size(n)), None);
    };
    t.record_for(sid, t0, a.clone(), ChangeKind::Created, FileType::File);
    wrote(&mut t, t0, 1);
    // The quiet window is up, the file's look is not.
    assert!(t.take_due(at(t0, 10), w, no_lock).closed.is_empty());
    assert_eq!(t.next_deadline(), Some(at(t0, 50)));
    assert_eq!(t.write_looks_due(at(t0, 49)), []);
    assert_eq!(t.write_looks_due(at(t0, 50)), [(sid, a.clone())]);
    // It grew: another interval, past the maximum delay.
    t.write_looked(sid, (at(t0, 50), w), &a, Some(&size(2)));
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
    t.write_finished(&a);
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
