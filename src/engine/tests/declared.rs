//! Engine tests of holds a program declares (`Manager::hold`, here as
//! the messages the manager sends): the barrier that takes one (what came
//! before is delivered), the held batch deferred or dropped once the
//! guard is gone (after the release's barrier), the bound, and a scope
//! that names a spec applied later or updated meanwhile. The manual clock
//! moves every timer; the test plays the OS for the cookies.

use super::*;
use crate::batch::journal::ChangesSince;
use crate::hold::{DuringHolds, HoldScope};
use crate::status::{HoldReason, HoldStatus};

impl Harness {
    /// The OS reports every cookie the engine's barriers wait for in the
    /// root, then a pass ends.
    fn cookies_come_back(&mut self) {
        let root = self.root.clone();
        let cookies: Vec<std::ffi::OsString> = std::fs::read_dir(&root)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .filter(|n| crate::fs::is_cookie(n))
            .collect();
        assert!(!cookies.is_empty(), "a barrier's cookie in the root");
        for c in cookies {
            self.event(&root, c.to_str().unwrap(), Hint::Created);
        }
        self.engine.end_pass();
    }

    /// Takes hold `id` on `scope`: returns what the caller of `hold`
    /// waits on.
    fn hold(&mut self, id: u64, scope: HoldScope) -> Receiver<()> {
        let (reply, taken) = bounded(1);
        self.engine.handle(Msg::Hold {
            id,
            scope,
            label: format!("hold {id}"),
            reply,
        });
        self.engine.end_pass();
        taken
    }

    /// Drops the guard of hold `id`.
    fn unhold(&mut self, id: u64) {
        self.engine.handle(Msg::Unhold { id, reply: None });
        self.engine.end_pass();
    }

    fn declared(&self, name: &str) -> Vec<HoldStatus> {
        self.status(name)
            .holds
            .into_iter()
            .filter(|h| matches!(h.reason, HoldReason::Declared { .. }))
            .collect()
    }
}

/// The paths of `batches`' changes, each with its kind, by file name.
fn names(batches: &[Arc<ChangeBatch>]) -> Vec<(String, ChangeKind)> {
    batches
        .iter()
        .flat_map(|b| b.changes.iter())
        .map(|c| (c.path.file_name().unwrap().to_string_lossy().into(), c.kind))
        .collect()
}

fn created(names: &[&str]) -> Vec<(String, ChangeKind)> {
    names
        .iter()
        .map(|n| ((*n).to_owned(), ChangeKind::Created))
        .collect()
}

/// `Defer`: what was written before the hold is delivered as it takes
/// effect (its barrier); what is written while it lives waits, however
/// long past the batch's windows; once the guard is dropped, and the
/// release's barrier passed (a write made just before the drop, whose
/// event comes with it, included), it is one batch. The status lists the
/// hold meanwhile, with its bound.
#[test]
fn a_deferring_hold_delivers_what_it_held_as_one_batch_once_released() {
    let mut h = harness(Config::default());
    h.apply("s", h.spec().quiet_window(10 * MS).max_delay(100 * MS));
    h.write("before");
    let taken = h.hold(1, "s".into());
    assert!(taken.try_recv().is_err(), "not before its barrier passed");
    assert!(h.batches().is_empty());
    h.cookies_come_back();
    assert_eq!(taken.try_recv(), Ok(()), "in effect");
    assert_eq!(
        names(&h.batches()),
        created(&["before"]),
        "what came before"
    );
    let since = h.clock.wall();
    assert_eq!(
        h.declared("s"),
        [HoldStatus {
            reason: HoldReason::Declared {
                label: "hold 1".into()
            },
            since,
            until: Some(since + crate::spec::defaults::DEFAULT_HOLD_BOUND),
            overdue: false,
        }]
    );
    for (i, n) in ["a", "b", "a"].iter().enumerate() {
        if i == 2 {
            std::fs::write(h.root.join(n), "again").unwrap();
            let root = h.root.clone();
            h.event(&root, n, Hint::Modified);
        } else {
            h.write(n);
        }
        h.after(500 * MS);
        assert!(h.batches().is_empty(), "held past its windows");
        // Never a deadline in the past (the engine would spin).
        assert!(h.engine.next_deadline().is_none_or(|d| d > h.clock.now()));
    }
    h.unhold(1);
    h.write("c"); // before the drop; its event comes with the cookie's
    assert!(h.batches().is_empty(), "the release's barrier first");
    h.cookies_come_back();
    let b = h.batches();
    assert_eq!(b.len(), 1, "one batch: {b:?}");
    assert_eq!(names(&b), created(&["a", "b", "c"]), "netted per path");
    assert!(h.declared("s").is_empty());
    // Then batches flow as usual.
    h.write("d");
    h.after(10 * MS);
    assert_eq!(names(&h.batches()), created(&["d"]));
}

/// `Drop`: what was written while the hold lived is in no batch, but in
/// the journal (`changes_since` describes the disk), and counted.
#[test]
fn a_dropping_hold_delivers_nothing_of_what_it_held_but_journals_it() {
    let mut h = harness(Config::default());
    let spec = h
        .spec()
        .quiet_window(10 * MS)
        .during_holds(DuringHolds::Drop);
    h.apply("s", spec);
    h.write("before");
    h.after(10 * MS);
    let seq = h.batches()[0].seq;
    let taken = h.hold(7, HoldScope::All);
    h.cookies_come_back();
    assert_eq!(taken.try_recv(), Ok(()));
    for n in ["gen1", "gen2"] {
        h.write(n);
    }
    h.after(2 * 100 * MS);
    h.unhold(7);
    h.write("gen3");
    h.cookies_come_back();
    h.after(10 * MS);
    assert!(h.batches().is_empty(), "dropped");
    let st = h.status("s");
    assert_eq!(st.dropped_by_holds, 3);
    assert!(st.holds.is_empty());
    match h.shared.changes_since("s", seq) {
        Some(ChangesSince::Changes { changes, .. }) => {
            let got: Vec<&str> = changes
                .iter()
                .map(|c| c.path.file_name().unwrap().to_str().unwrap())
                .collect();
            assert_eq!(got, ["gen1", "gen2", "gen3"]);
        }
        other => panic!("{other:?}"),
    }
    // After the hold: delivered again.
    h.write("after");
    h.after(10 * MS);
    assert_eq!(names(&h.batches()), created(&["after"]));
}

/// A guard kept past the spec's bound: what it held goes at the bound,
/// the status says it is overdue, and batches flow at their own pace
/// until it is dropped (which then releases nothing).
#[test]
fn a_hold_past_its_bound_lets_batches_flow_and_says_so() {
    let mut h = harness(Config::default());
    let spec = h
        .spec()
        .quiet_window(10 * MS)
        .hold_bound(Duration::from_secs(1));
    h.apply("s", spec);
    let _ = h.hold(1, "s".into());
    h.cookies_come_back();
    h.write("a");
    h.after(999 * MS);
    assert!(h.batches().is_empty());
    assert!(!h.declared("s")[0].overdue);
    h.after(MS);
    assert_eq!(names(&h.batches()), created(&["a"]), "at the bound");
    assert!(h.declared("s")[0].overdue, "overdue");
    h.write("b");
    h.after(10 * MS);
    assert_eq!(names(&h.batches()), created(&["b"]), "flowing");
    h.unhold(1);
    assert!(h.declared("s").is_empty());
    h.write("c");
    h.after(10 * MS);
    assert_eq!(names(&h.batches()), created(&["c"]), "no release barrier");
}

/// A hold on a name no spec has yet is in effect at once, and holds the
/// spec applied under that name from its start; an update while held
/// delivers the old generation's batch and holds the new one.
#[test]
fn a_hold_on_a_name_holds_the_spec_applied_later_and_its_next_generation() {
    let mut h = harness(Config::default());
    let taken = h.hold(3, "s".into());
    assert_eq!(taken.try_recv(), Ok(()), "no spec: in effect at once");
    h.apply("s", h.spec().quiet_window(10 * MS));
    assert_eq!(h.declared("s").len(), 1, "held from its start");
    h.write("a");
    h.after(100 * MS);
    assert!(h.batches().is_empty());
    h.upsert("s", Generation(2), h.spec().quiet_window(20 * MS));
    h.engine.end_pass();
    let b = h.batches();
    assert_eq!(names(&b), created(&["a"]), "the old generation's last");
    assert_eq!(b[0].generation, Generation(1));
    assert_eq!(h.declared("s").len(), 1, "the new generation is held");
    h.write("b");
    h.after(100 * MS);
    assert!(h.batches().is_empty());
    h.unhold(3);
    h.cookies_come_back();
    let b = h.batches();
    assert_eq!(names(&b), created(&["b"]));
    assert_eq!(b[0].generation, Generation(2));
}

/// A caller's sync closes a held batch (delivered under `Defer`); the
/// hold goes on.
#[test]
fn a_sync_closes_the_held_batch_and_the_hold_goes_on() {
    let mut h = harness(Config::default());
    h.apply("s", h.spec().quiet_window(10 * MS));
    let _ = h.hold(1, "s".into());
    h.cookies_come_back();
    h.write("a");
    let (reply, answer) = bounded(1);
    h.engine.handle(Msg::Sync {
        name: "s".into(),
        deadline: h.clock.now() + Duration::from_secs(10),
        reply,
    });
    h.cookies_come_back();
    assert_eq!(answer.try_recv(), Ok(true));
    assert_eq!(names(&h.batches()), created(&["a"]));
    h.write("b");
    h.after(100 * MS);
    assert!(h.batches().is_empty(), "still held");
    assert_eq!(h.declared("s").len(), 1);
}

/// `HoldGuard::release`: its caller is told once the release's barrier
/// passed and the held batch is out (at once where the hold held
/// nothing).
#[test]
fn a_release_is_answered_once_the_held_batch_is_out() {
    let mut h = harness(Config::default());
    h.apply("s", h.spec().quiet_window(10 * MS));
    let _ = h.hold(1, "s".into());
    h.cookies_come_back();
    h.write("a");
    let (reply, released) = bounded(1);
    h.engine.handle(Msg::Unhold {
        id: 1,
        reply: Some(reply),
    });
    h.engine.end_pass();
    assert!(released.try_recv().is_err(), "not before its barrier");
    h.cookies_come_back();
    assert_eq!(released.try_recv(), Ok(()));
    assert_eq!(names(&h.batches()), created(&["a"]), "out by then");
    // A hold on no spec: answered at once.
    let _ = h.hold(2, "nothing".into());
    let (reply, released) = bounded(1);
    h.engine.handle(Msg::Unhold {
        id: 2,
        reply: Some(reply),
    });
    assert_eq!(released.try_recv(), Ok(()));
}
