//! Holds a program declares (`Manager::hold`): a program (here a thread
//! of the test) rewrites files in rounds further apart than the spec's
//! quiet window, under a hold. With `DuringHolds::Defer` it is exactly one
//! batch, delivered once the guard is dropped; with `DuringHolds::Drop`
//! it is in no batch, yet `changes_since` names the files and the status
//! counts them. On every backend.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use specwatch::{
    Backend, ChangeBatch, ChangeKind, ChangesSince, DuringHolds, HoldReason, HoldScope,
};

both_backends!(
    a_program_writing_under_a_deferring_hold_makes_one_batch_after_the_drop,
    a_program_writing_under_a_dropping_hold_makes_no_batch_but_is_journaled
);

/// The generated files.
const FILES: usize = 5;

fn generated(root: &Path) -> Vec<PathBuf> {
    (0..FILES)
        .map(|i| root.join(format!("gen{i}.rs")))
        .collect()
}

/// The program: writes every generated file, three rounds 40 ms apart
/// (past the 10 ms quiet window and the 20 ms poll interval: without a
/// hold, several batches), on a thread of its own; returns once it is
/// done.
fn generate(root: &Path) {
    let files = generated(root);
    std::thread::spawn(move || {
        for round in 0..3 {
            if round > 0 {
                std::thread::sleep(Duration::from_millis(40));
            }
            for f in &files {
                std::fs::write(f, format!("// round {round}\n")).unwrap();
            }
        }
    })
    .join()
    .unwrap();
}

/// The batches of spec `s` after the first `skip`.
fn batches_after(c: &Collector, skip: usize) -> Vec<Arc<ChangeBatch>> {
    c.batches
        .get("s")
        .map(|b| b[skip.min(b.len())..].to_vec())
        .unwrap_or_default()
}

fn batch_count(c: &Collector) -> usize {
    c.batches.get("s").map_or(0, Vec::len)
}

fn a_program_writing_under_a_deferring_hold_makes_one_batch_after_the_drop(b: Backend) {
    let d = tmp();
    let root = d.path();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[root]));
    c.barrier("s", root);
    let before = batch_count(&c);

    let guard = m.hold("s", "codegen").unwrap();
    c.wait("the status listing the hold", |c| {
        c.statuses["s"].last().is_some_and(|s| {
            s.holds.iter().any(|h| {
                matches!(&h.reason, HoldReason::Declared { label } if label == "codegen")
                    && !h.overdue
            })
        })
    });
    generate(root);
    c.drain();
    assert_eq!(
        batch_count(&c),
        before,
        "nothing delivered while held: {:?}",
        batches_after(&c, before)
    );
    drop(guard);
    c.wait("the held batch, once the guard is dropped", |c| {
        batch_count(c) > before
    });
    // Nothing else comes of it: the next batch is a marker's alone.
    let marker = c.barrier("s", root);
    let got = batches_after(&c, before);
    assert_eq!(got.len(), 2, "the held batch, then the marker's: {got:?}");
    let mut paths: Vec<(PathBuf, ChangeKind)> = got[0]
        .changes
        .iter()
        .map(|c| (c.path.clone(), c.kind))
        .collect();
    paths.sort();
    let want: Vec<(PathBuf, ChangeKind)> = generated(root)
        .into_iter()
        .map(|p| (p, ChangeKind::Created))
        .collect();
    assert_eq!(paths, want, "every file once, netted");
    assert_eq!(got[1].changes.len(), 1);
    assert_eq!(got[1].changes[0].path, marker);
    let st = m.status("s").unwrap();
    assert!(st.holds.is_empty(), "{:?}", st.holds);
    assert_eq!(st.dropped_by_holds, 0);
}

fn a_program_writing_under_a_dropping_hold_makes_no_batch_but_is_journaled(b: Backend) {
    let d = tmp();
    let root = d.path();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[root]).during_holds(DuringHolds::Drop));
    c.barrier("s", root);
    let before = batch_count(&c);
    let seq = c.batches["s"].last().unwrap().seq;

    let guard = m.hold(HoldScope::All, "build").unwrap();
    generate(root);
    drop(guard);
    c.wait("the status counting what the hold dropped", |c| {
        c.statuses["s"]
            .last()
            .is_some_and(|s| s.dropped_by_holds == FILES as u64 && s.holds.is_empty())
    });
    let marker = c.barrier("s", root);
    let got = batches_after(&c, before);
    assert_eq!(got.len(), 1, "the marker's batch alone: {got:?}");
    assert_eq!(got[0].changes.len(), 1);
    assert_eq!(got[0].changes[0].path, marker);
    match m.changes_since("s", seq).unwrap() {
        ChangesSince::Changes { changes, .. } => {
            let mut want = generated(root);
            want.push(marker);
            want.sort();
            let paths: Vec<PathBuf> = changes.iter().map(|c| c.path.clone()).collect();
            assert_eq!(paths, want, "the journal describes the disk");
        }
        other => panic!("changes since {seq}: {other:?}"),
    }
    assert_eq!(m.status("s").unwrap().dropped_by_holds, FILES as u64);
}

/// A guard is `Send`: dropped on another thread, it ends the hold.
#[test]
fn a_guard_dropped_on_another_thread_ends_the_hold() {
    fn send<T: Send + Sync>(_: &T) {}
    let d = tmp();
    let root = d.path();
    let m = manager(EVENTS);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[root]));
    let guard = m.hold("s", "elsewhere").unwrap();
    send(&guard);
    std::fs::write(root.join("a"), "a").unwrap();
    std::thread::spawn(move || drop(guard)).join().unwrap();
    c.wait("the held change, once the guard is gone", |c| {
        c.has("s", &root.join("a"), ChangeKind::Created)
    });
}
