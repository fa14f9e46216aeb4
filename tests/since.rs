//! `initial_scan` and `changes_since`: building a cache from events alone,
//! and catching up after a short absence (or being told to rebuild).

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use common::*;
use specwatch::{
    Backend, ChangeKind, ChangesSince, Error, Generation, IgnoreRule, Manager, ResyncReason, Seq,
};

both_backends!(
    initial_scan_reports_what_exists_once,
    changes_since_nets_changes_after_a_seq
);

fn initial_scan_reports_what_exists_once(b: Backend) {
    let d = tmp();
    let root = d.path();
    fs::create_dir_all(root.join("a/b")).unwrap();
    fs::create_dir_all(root.join("target/debug")).unwrap();
    fs::write(root.join("top.txt"), "1").unwrap();
    fs::write(root.join("a/b/deep.txt"), "2").unwrap();
    fs::write(root.join("target/debug/out"), "3").unwrap();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    let ignore = IgnoreRule::new(root, ["target/"]);
    start(
        &m,
        "scan",
        spec(&[root]).ignore(ignore.clone()).initial_scan(true),
    );
    start(&m, "plain", spec(&[root]).ignore(ignore));
    let want: Vec<PathBuf> = ["a", "a/b", "a/b/deep.txt", "top.txt"]
        .iter()
        .map(|p| root.join(p))
        .collect();
    m.sync("scan", WAIT).unwrap();
    m.sync("plain", WAIT).unwrap();
    c.drain();
    let mut got: BTreeMap<PathBuf, Vec<ChangeKind>> = BTreeMap::new();
    for ch in c.changes("scan") {
        got.entry(ch.path).or_default().push(ch.kind);
    }
    let expected: BTreeMap<PathBuf, Vec<ChangeKind>> = want
        .iter()
        .map(|p| (p.clone(), vec![ChangeKind::Created]))
        .collect();
    assert_eq!(got, expected, "each existing entry once, ignored ones not");
    assert!(c.changes("plain").is_empty(), "{:?}", c.changes("plain"));
}

fn last_seq(c: &Collector, spec: &str) -> Seq {
    c.batches[spec].last().expect("a batch").seq
}

fn changes_since_nets_changes_after_a_seq(b: Backend) {
    let d = tmp();
    let root = d.path();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[root]));
    let (a, bb, cc) = (root.join("a"), root.join("b"), root.join("c"));
    fs::write(&a, "1").unwrap();
    fs::write(&cc, "1").unwrap();
    c.wait("a and c created", |c| {
        c.has("s", &a, ChangeKind::Created) && c.has("s", &cc, ChangeKind::Created)
    });
    let seen = last_seq(&c, "s");
    // Away: a modified, b created then removed, c removed, d created.
    fs::write(&a, "22").unwrap();
    fs::write(&bb, "1").unwrap();
    m.sync("s", WAIT).unwrap();
    fs::remove_file(&bb).unwrap();
    fs::remove_file(&cc).unwrap();
    let dd = root.join("d");
    fs::write(&dd, "1").unwrap();
    m.sync("s", WAIT).unwrap();
    c.drain();
    let newest = last_seq(&c, "s");
    match m.changes_since("s", seen).unwrap() {
        ChangesSince::Changes { changes, through } => {
            let got: Vec<(PathBuf, ChangeKind)> =
                changes.into_iter().map(|c| (c.path, c.kind)).collect();
            assert_eq!(
                got,
                vec![
                    (a.clone(), ChangeKind::Modified),
                    (cc.clone(), ChangeKind::Removed),
                    (dd.clone(), ChangeKind::Created),
                ],
                "b came and went: not there"
            );
            assert_eq!(through, newest);
        }
        other => panic!("{other:?}"),
    }
    match m.changes_since("s", newest).unwrap() {
        ChangesSince::Changes { changes, .. } => assert!(changes.is_empty(), "{changes:?}"),
        other => panic!("{other:?}"),
    }
    // Seqs this manager never issued: ahead, or of another instance (an
    // earlier run) whatever its number.
    let ahead = Seq::new(newest.instance(), newest.number() + 1_000_000);
    assert!(matches!(
        m.changes_since("s", ahead).unwrap(),
        ChangesSince::Resync {
            reason: ResyncReason::Unknown,
            ..
        }
    ));
    for number in [0, seen.number(), newest.number()] {
        let other = Seq::new(newest.instance().wrapping_add(1), number);
        assert!(
            matches!(
                m.changes_since("s", other).unwrap(),
                ChangesSince::Resync {
                    reason: ResyncReason::OtherInstance,
                    ..
                }
            ),
            "{other} is another instance's"
        );
    }
    // A new generation: an old seq must resync.
    m.apply(
        "s",
        spec(&[root]).max_delay(std::time::Duration::from_secs(2)),
    )
    .unwrap();
    m.wait_watching("s", WAIT).unwrap();
    match m.changes_since("s", seen).unwrap() {
        ChangesSince::Resync {
            reason: ResyncReason::OtherGeneration { generation },
            through,
        } => {
            assert_eq!(generation, Generation(2));
            assert!(through >= newest);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        m.changes_since("nope", seen),
        Err(Error::NotFound { .. })
    ));
}

#[test]
fn a_small_journal_asks_for_a_resync_rather_than_answer_in_part() {
    let d = tmp();
    let root = d.path();
    let m = Manager::builder().journal_paths(3).build().unwrap();
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[root]));
    let first = root.join("first");
    fs::write(&first, "x").unwrap();
    c.wait("first created", |c| c.has("s", &first, ChangeKind::Created));
    let seen = last_seq(&c, "s");
    for i in 0..5 {
        fs::write(root.join(format!("f{i}")), "x").unwrap();
        m.sync("s", WAIT).unwrap();
    }
    c.drain();
    match m.changes_since("s", seen).unwrap() {
        ChangesSince::Resync {
            reason: ResyncReason::TooOld { oldest },
            through,
        } => {
            assert!(oldest > seen);
            assert_eq!(through, last_seq(&c, "s"));
            // From `oldest` on it answers: the last three files.
            match m.changes_since("s", oldest).unwrap() {
                ChangesSince::Changes { changes, .. } => assert_eq!(changes.len(), 3),
                other => panic!("{other:?}"),
            }
        }
        other => panic!("expected a resync, got {other:?}"),
    }
}

#[test]
fn a_seq_from_an_earlier_manager_must_resync() {
    let d = tmp();
    let root = d.path();
    let seen = {
        let m = Manager::new().unwrap();
        let mut c = Collector::new(m.subscribe());
        start(&m, "s", spec(&[root]));
        let f = root.join("f");
        fs::write(&f, "x").unwrap();
        c.wait("f created", |c| c.has("s", &f, ChangeKind::Created));
        last_seq(&c, "s")
    };
    let m = Manager::new().unwrap();
    start(&m, "s", spec(&[root]));
    assert!(
        matches!(
            m.changes_since("s", seen).unwrap(),
            ChangesSince::Resync {
                reason: ResyncReason::OtherInstance,
                ..
            }
        ),
        "a restarted process cannot be answered from its old seq, \
         though it numbers its batches from the same place"
    );
}
