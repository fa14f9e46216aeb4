//! Specs' state across managers (`WatchOptions::state`): the first batch
//! after a restart is the exact net difference between the saved state and
//! the disk, marked `Restored`; a state that cannot be used is `Refused`
//! with its reason, never a wrong answer.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use common::*;
use specwatch::{Backend, ChangeBatch, ChangeKind, ChangesSince, Restore, StateRefused, WatchSpec};

both_backends!(
    a_restore_into_directories_another_spec_indexed_is_exact,
    a_save_that_fails_is_an_error_and_the_specs_last_error,
    a_restart_reports_exactly_what_changed_meanwhile,
    a_state_that_cannot_be_used_is_refused_with_its_reason,
    nothing_changed_is_an_empty_restored_batch
);

/// The spec's first batch (waits for it).
fn first_batch(c: &mut Collector, name: &str) -> Arc<ChangeBatch> {
    c.wait(&format!("the first batch of {name}"), |c| {
        c.batches.get(name).is_some_and(|b| !b.is_empty())
    });
    c.batches[name][0].clone()
}

fn net(batch: &ChangeBatch) -> BTreeMap<PathBuf, ChangeKind> {
    batch
        .changes
        .iter()
        .map(|c| (c.path.clone(), c.kind))
        .collect()
}

fn expect(root: &Path, v: &[(&str, ChangeKind)]) -> BTreeMap<PathBuf, ChangeKind> {
    v.iter().map(|(p, k)| (root.join(p), *k)).collect()
}

/// A same-size rewrite that puts the old modification time back: only
/// the change time (and content) tell.
fn rewrite_keeping_mtime(path: &Path, content: &str) {
    let before = fs::metadata(path).unwrap().modified().unwrap();
    fs::write(path, content).unwrap();
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(before)
        .unwrap();
    assert_eq!(fs::metadata(path).unwrap().modified().unwrap(), before);
}

fn a_restart_reports_exactly_what_changed_meanwhile(b: Backend) {
    let (d, st) = (tmp(), tmp());
    let root = d.path();
    let state = st.path().join("s.state");
    fs::create_dir_all(root.join("d")).unwrap();
    fs::create_dir_all(root.join("e")).unwrap();
    for f in ["a.txt", "b.txt", "gone.txt", "d/x", "d/y", "touched"] {
        fs::write(root.join(f), "1234").unwrap();
    }
    let spec = || spec(&[root]).state(&state);
    let saved = {
        let m = manager(b);
        let mut c = Collector::new(m.subscribe());
        start(&m, "s", spec());
        let first = first_batch(&mut c, "s");
        assert_eq!(
            first.restore,
            Some(Restore::Refused {
                reason: StateRefused::Missing
            })
        );
        assert!(first.changes.is_empty(), "{:?}", first.changes);
        m.save("s").expect("save")
    };
    assert!(state.exists(), "saved to {}", state.display());
    // While nobody watches.
    rewrite_keeping_mtime(&root.join("a.txt"), "5678");
    fs::write(root.join("new.txt"), "n").unwrap();
    fs::remove_file(root.join("gone.txt")).unwrap();
    fs::rename(root.join("d"), root.join("d2")).unwrap();
    fs::write(root.join("e/inner"), "i").unwrap();
    // A touch: times only.
    fs::File::options()
        .write(true)
        .open(root.join("touched"))
        .unwrap()
        .set_modified(SystemTime::now())
        .unwrap();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec());
    let first = first_batch(&mut c, "s");
    assert_eq!(first.restore, Some(Restore::Restored { from: saved }));
    use ChangeKind::*;
    let want = expect(
        root,
        &[
            ("a.txt", Modified),
            ("d", Removed),
            ("d/x", Removed),
            ("d/y", Removed),
            ("d2", Created),
            ("d2/x", Created),
            ("d2/y", Created),
            ("e/inner", Created),
            ("gone.txt", Removed),
            ("new.txt", Created),
            ("touched", Modified),
        ],
    );
    assert_eq!(net(&first), want, "the first batch after the restart");
    // The seq saved with the state is answered by the restored manager.
    match m.changes_since("s", saved).unwrap() {
        ChangesSince::Changes { changes, through } => {
            let got: BTreeMap<PathBuf, ChangeKind> =
                changes.into_iter().map(|c| (c.path, c.kind)).collect();
            assert_eq!(got, want);
            assert_eq!(through, first.seq);
        }
        other => panic!("changes since the saved seq: {other:?}"),
    }
    // And changes flow as usual afterwards.
    let later = root.join("later");
    fs::write(&later, "l").unwrap();
    c.wait("later created", |c| c.has("s", &later, Created));
    assert!(
        c.batches["s"][1..].iter().all(|b| b.restore.is_none()),
        "only the first batch is marked"
    );
}

fn nothing_changed_is_an_empty_restored_batch(b: Backend) {
    let (d, st) = (tmp(), tmp());
    let root = d.path();
    let state = st.path().join("s.state");
    fs::create_dir_all(root.join("sub")).unwrap();
    fs::write(root.join("sub/f"), "f").unwrap();
    let spec = || spec(&[root]).state(&state);
    // Saved by the drop alone (never saved before: the drop saves).
    drop({
        let m = manager(b);
        start(&m, "s", spec());
        m
    });
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec());
    let first = first_batch(&mut c, "s");
    assert!(
        matches!(first.restore, Some(Restore::Restored { .. })),
        "{:?}",
        first.restore
    );
    assert!(first.changes.is_empty(), "{:?}", first.changes);
}

fn a_state_that_cannot_be_used_is_refused_with_its_reason(b: Backend) {
    let (d, st) = (tmp(), tmp());
    let root = d.path();
    let state = st.path().join("s.state");
    fs::create_dir_all(root.join("sub")).unwrap();
    fs::write(root.join("sub/f"), "f").unwrap();
    fs::write(root.join("g"), "g").unwrap();
    let spec = || spec(&[root]).state(&state).initial_scan(true);
    {
        let m = manager(b);
        start(&m, "s", spec());
        m.save("s").unwrap();
    }
    let good = fs::read(&state).unwrap();
    let everything = expect(
        root,
        &[
            ("g", ChangeKind::Created),
            ("sub", ChangeKind::Created),
            ("sub/f", ChangeKind::Created),
        ],
    );
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x10;
    let mut newer = good.clone();
    newer[16..20].copy_from_slice(&2u32.to_le_bytes());
    /// What is put in the file (`None`: no file), the spec applied, and
    /// the reason expected.
    type Case = (
        &'static str,
        Option<Vec<u8>>,
        WatchSpec,
        fn(&StateRefused) -> bool,
    );
    let cases: Vec<Case> = vec![
        (
            "truncated",
            Some(good[..good.len() / 2].to_vec()),
            spec(),
            |r| matches!(r, StateRefused::Corrupt { .. }),
        ),
        ("a flipped byte", Some(flipped), spec(), |r| {
            matches!(r, StateRefused::Corrupt { .. })
        }),
        ("not a state file", Some(b"hello".to_vec()), spec(), |r| {
            matches!(r, StateRefused::Corrupt { .. })
        }),
        ("a newer format", Some(newer), spec(), |r| {
            matches!(r, StateRefused::Newer { .. })
        }),
        (
            "another spec's",
            Some(good.clone()),
            spec().ignore_patterns(["*.o"]),
            |r| *r == StateRefused::OtherSpec,
        ),
        ("no file", None, spec(), |r| *r == StateRefused::Missing),
    ];
    for (what, bytes, spec, reason) in cases {
        match &bytes {
            Some(b) => fs::write(&state, b).unwrap(),
            None => fs::remove_file(&state).unwrap(),
        }
        let m = manager(b);
        let mut c = Collector::new(m.subscribe());
        start(&m, "s", spec.clone());
        let first = first_batch(&mut c, "s");
        match &first.restore {
            Some(Restore::Refused { reason: r }) if reason(r) => {}
            other => panic!("{what}: {other:?}"),
        }
        assert_eq!(net(&first), everything, "{what}: initial_scan's changes");
        // The next save replaces what could not be used.
        m.save("s").unwrap();
        drop(m);
        let m = manager(b);
        let mut c = Collector::new(m.subscribe());
        start(&m, "s", spec);
        let again = first_batch(&mut c, "s");
        assert!(
            matches!(again.restore, Some(Restore::Restored { .. })),
            "{what}, saved again: {:?}",
            again.restore
        );
    }
}

fn a_save_that_fails_is_an_error_and_the_specs_last_error(b: Backend) {
    let (d, st) = (tmp(), tmp());
    let root = d.path();
    // Its directory is a file: nothing can be written there.
    let blocker = st.path().join("not-a-dir");
    fs::write(&blocker, "x").unwrap();
    let state = blocker.join("s.state");
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[root]).state(&state));
    match m.save("s") {
        Err(specwatch::Error::State { spec, path, .. }) => {
            assert_eq!((spec.as_str(), path.as_path()), ("s", state.as_path()));
        }
        other => panic!("a save into a file's place: {other:?}"),
    }
    let said = |c: &Collector| {
        c.statuses
            .get("s")
            .and_then(|v| v.last())
            .and_then(|s| s.last_error.clone())
    };
    c.wait("the failed save in the status's last_error", |c| {
        said(c).is_some_and(|e| e.starts_with("state not saved: "))
    });
    assert_eq!(
        m.status("s").unwrap().phase,
        specwatch::Phase::Watching,
        "watching goes on"
    );
    fs::remove_file(&blocker).unwrap();
    m.save("s").expect("a save once the directory can be made");
    c.wait("last_error cleared by the save that succeeded", |c| {
        said(c).is_none()
    });
}

/// The restored spec's directories were indexed before it came, by
/// another spec, and changed live since (their listings hold entries in
/// the order they came, not sorted).
fn a_restore_into_directories_another_spec_indexed_is_exact(b: Backend) {
    let (d, st) = (tmp(), tmp());
    let root = d.path();
    let state = st.path().join("b.state");
    for f in ["m", "n", "o"] {
        fs::write(root.join(f), f).unwrap();
    }
    {
        let m = manager(b);
        start(&m, "b", spec(&[root]).state(&state));
        m.save("b").unwrap();
    }
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "a", spec(&[root]));
    for f in ["z", "y", "x", "a"] {
        let p = root.join(f);
        fs::write(&p, f).unwrap();
        c.wait(&format!("{f} created for a"), |c| {
            c.has("a", &p, ChangeKind::Created)
        });
    }
    fs::remove_file(root.join("n")).unwrap();
    m.sync("a", WAIT).unwrap();
    start(&m, "b", spec(&[root]).state(&state));
    let first = first_batch(&mut c, "b");
    use ChangeKind::*;
    assert_eq!(
        net(&first),
        expect(
            root,
            &[
                ("a", Created),
                ("n", Removed),
                ("x", Created),
                ("y", Created),
                ("z", Created)
            ]
        )
    );
}
