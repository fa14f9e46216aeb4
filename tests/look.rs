//! `Manager::look`: paths looked at now (a polled directory polled now,
//! alone), the spec's batch closed, the seq of what was delivered.

mod common;

use std::fs;
use std::time::Duration;

use common::*;
use specwatch::{Backend, ChangeKind, Error, Manager, WatchSpec};

/// A poller that would not look again within any test's time: only a
/// look (or the first walk) finds anything.
fn idle_poller() -> Manager {
    Manager::builder()
        .backend(Backend::Poll {
            interval: Duration::from_secs(3600),
        })
        .git_excludes_file(None)
        .build()
        .unwrap()
}

/// A spec whose batches would stay open for a minute but for the look.
fn slow_spec(root: &std::path::Path) -> WatchSpec {
    WatchSpec::new([root])
        .quiet_window(Duration::from_secs(60))
        .max_delay(Duration::from_secs(60))
}

/// The highest seq number among the batches `c` has received, once drained.
fn newest_received(c: &mut Collector) -> u64 {
    c.drain();
    c.batches
        .get("s")
        .and_then(|b| b.last())
        .map_or(0, |b| b.seq.number())
}

/// On a polled tree a look finds what was created, written in place and
/// removed in the looked-at path's directory, delivered before it returns
/// (the batch closed at once, despite a minute's quiet window), and only
/// there: a file written meanwhile in another directory waits for the
/// poll (an hour here).
#[test]
fn a_look_polls_the_directory_of_its_paths_alone() {
    let d = tmp();
    let root = d.path();
    fs::create_dir_all(root.join("a")).unwrap();
    fs::create_dir_all(root.join("b")).unwrap();
    fs::write(root.join("a/kept"), "1").unwrap();
    let m = idle_poller();
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", slow_spec(root).metadata(true));

    let new = root.join("a/new.tgz");
    fs::write(&new, "new").unwrap();
    fs::write(root.join("b/elsewhere"), "x").unwrap();
    let seq = m.look("s", [&new], WAIT).unwrap();
    c.drain();
    assert_eq!(
        c.kinds("s", &new),
        vec![ChangeKind::Created],
        "delivered before look returned"
    );
    assert!(
        seq.number() >= newest_received(&mut c),
        "{seq} covers the batch"
    );
    let created = c.changes("s").into_iter().find(|x| x.path == new).unwrap();
    assert_eq!(created.meta.map(|m| m.size), Some(3), "with its metadata");
    assert!(
        c.kinds("s", &root.join("b/elsewhere")).is_empty(),
        "the look polled a/ alone"
    );

    // Written in place, same name: a poll of a/ tells (an `lstat` alone
    // would not, for a name it already holds).
    c.clear();
    fs::write(root.join("a/kept"), "22").unwrap();
    m.look("s", [root.join("a/kept")], WAIT).unwrap();
    c.drain();
    assert_eq!(
        c.kinds("s", &root.join("a/kept")),
        vec![ChangeKind::Modified]
    );

    // Removed.
    c.clear();
    fs::remove_file(&new).unwrap();
    m.look("s", [&new], WAIT).unwrap();
    c.drain();
    assert_eq!(c.kinds("s", &new), vec![ChangeKind::Removed]);
}

/// A path below a directory that is new: the nearest directory the index
/// holds is polled, finds the new one, which is read whole.
#[test]
fn a_look_below_a_new_directory_finds_it_whole() {
    let d = tmp();
    let root = d.path();
    let m = idle_poller();
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", slow_spec(root));
    fs::create_dir_all(root.join("t/u")).unwrap();
    fs::write(root.join("t/u/app.tgz"), "x").unwrap();
    m.look("s", [root.join("t/u/app.tgz")], WAIT).unwrap();
    c.drain();
    for p in ["t", "t/u", "t/u/app.tgz"] {
        assert_eq!(
            c.kinds("s", &root.join(p)),
            vec![ChangeKind::Created],
            "{p}"
        );
    }
}

/// With OS events, a look `lstat`s the name: a file created just before is
/// in a batch delivered before the look returns, however long the quiet
/// window (the events of its write may still come after, as a
/// `Modified`). An unchanged path gives no batch; the seq is the newest.
#[test]
fn a_look_closes_the_batch_on_an_event_backend() {
    let d = tmp();
    let root = d.path();
    let m = manager(EVENTS);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", slow_spec(root));
    let f = root.join("f");
    fs::write(&f, "x").unwrap();
    let seq = m.look("s", [&f], WAIT).unwrap();
    c.drain();
    assert_eq!(c.kinds("s", &f), vec![ChangeKind::Created]);
    assert!(seq.number() >= newest_received(&mut c));

    // (The write's own events may come after the look, as a `Modified`:
    // let them, then look at a path that did not change.)
    m.sync("s", WAIT).unwrap();
    let n = newest_received(&mut c);
    let again = m.look("s", [&f], WAIT).unwrap();
    assert_eq!(newest_received(&mut c), n, "nothing changed: no batch");
    assert_eq!(again.number(), n.max(seq.number()), "the newest seq");
}

#[test]
fn a_look_names_what_is_wrong() {
    let d = tmp();
    let m = idle_poller();
    start(&m, "s", slow_spec(d.path()));
    assert!(matches!(
        m.look("nope", [d.path().join("x")], WAIT),
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        m.look("s", ["relative/x"], WAIT),
        Err(Error::RelativePath { .. })
    ));
    // Outside the spec: nothing looked at, the newest seq answered.
    let outside = tmp();
    fs::write(outside.path().join("x"), "x").unwrap();
    m.look("s", [outside.path().join("x")], WAIT).unwrap();
}
