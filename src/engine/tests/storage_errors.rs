//! Engine tests of storage that fails (issue 22): a poll's look that fails
//! though its directory is there (`EIO`, `ESTALE`: a mount whose storage
//! fails) is not "everything removed".

use super::*;
use crate::scanner::{Finding, Scanner};

const EVERY: Duration = Duration::from_millis(30);

impl Harness {
    /// Ends a pass at the next poll (the held scanner keeps its looks) and
    /// hands the engine what each look found: the error `fail` makes, or,
    /// without one, a real look now.
    fn poll_held(&mut self, fail: Option<fn() -> std::io::Error>) {
        self.after(EVERY);
        let jobs = self.engine.scanner.take_held();
        assert!(!jobs.is_empty(), "a poll was due");
        let found = match fail {
            Some(error) => jobs
                .into_iter()
                .map(|j| Finding::failed(j, error()))
                .collect(),
            None => crate::scanner::run(jobs),
        };
        self.engine.handle(Msg::Looked(found));
        self.engine.end_pass();
    }
}

/// Every look at a polled tree fails: nothing is reported (no removal),
/// the index stays, the spec is `Degraded` naming the error and the
/// directory, and a failure that stands publishes no new status at each
/// poll. Once the looks succeed again, exactly what changed meanwhile is
/// reported and the spec is `Watching`.
#[test]
fn a_failing_look_reports_nothing_degrades_the_spec_and_recovers() {
    let mut h = harness(Config {
        backend: Backend::Poll { interval: EVERY },
        ..Config::default()
    });
    let root = h.root.clone();
    std::fs::create_dir(root.join("sub")).unwrap();
    for f in ["keep", "gone", "sub/f"] {
        std::fs::write(root.join(f), f).unwrap();
    }
    h.apply("s", h.spec().quiet_window(10 * MS));
    h.engine.scanner = Scanner::held();
    let entries = |h: &Harness| {
        h.engine
            .index
            .get(h.engine.index.lookup(&root).unwrap())
            .unwrap()
            .entries()
            .len()
    };
    let before = entries(&h);
    // Meanwhile, on the storage.
    std::fs::remove_file(root.join("gone")).unwrap();
    std::fs::write(root.join("new"), "n").unwrap();
    std::fs::write(root.join("sub/g"), "g").unwrap();

    let stale = || std::io::Error::from(std::io::ErrorKind::StaleNetworkFileHandle);
    let failed_at = h.clock.wall() + EVERY; // (at the poll)
    h.poll_held(Some(stale));
    h.after(10 * MS);
    assert!(h.batches().is_empty(), "a failed look is no change");
    assert_eq!(entries(&h), before, "the index stays as it was");
    let st = h.status("s");
    let said = stale().to_string();
    match &st.phase {
        Phase::Degraded { reason } => assert!(
            reason.contains(&format!("{}: cannot read: {said}", root.display())),
            "{reason}"
        ),
        other => panic!("not Degraded: {other:?}"),
    }
    assert_eq!(st.last_error_time, Some(failed_at), "{st:?}");
    // It stands, poll after poll: the status stays as it is (the error
    // with the time it was first seen).
    let count = |h: &Harness| {
        h.events
            .try_iter()
            .filter(|e| matches!(e, Event::Status(_)))
            .count()
    };
    count(&h);
    h.poll_held(Some(stale));
    h.poll_held(Some(|| std::io::Error::other("Input/output error")));
    h.poll_held(Some(|| std::io::Error::other("Input/output error")));
    assert_eq!(count(&h), 1, "one status for the other error, no more");
    assert!(h.batches().is_empty());

    // The storage answers again: what changed meanwhile, and only that.
    h.poll_held(None);
    h.after(10 * MS);
    let got: Vec<(PathBuf, ChangeKind)> = h
        .batches()
        .iter()
        .flat_map(|b| b.changes.iter().map(|c| (c.path.clone(), c.kind)))
        .collect();
    assert_eq!(
        got,
        vec![
            (root.join("gone"), ChangeKind::Removed),
            (root.join("new"), ChangeKind::Created),
            (root.join("sub/g"), ChangeKind::Created),
        ]
    );
    let st = h.status("s");
    assert_eq!(st.phase, Phase::Watching, "{st:?}");
    assert_eq!((st.last_error, st.last_error_time), (None, None));
    h.poll_held(None);
    assert!(h.batches().is_empty(), "reported once");
    assert!(h.engine.check_invariants().is_empty());
}
