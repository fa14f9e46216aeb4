//! An event backend whose reader stops (a failed read) is restarted with
//! back-off: its specs are `Degraded` meanwhile, saying why, then
//! `Watching` again with the net changes made while it was down.

#![cfg(feature = "test-hooks")]

mod common;

use std::fs;
use std::time::Duration;

use common::*;
use specwatch::{Backend, Manager, Phase};

#[cfg(target_os = "linux")]
#[test]
fn native() {
    a_dead_reader_is_restarted_and_nothing_is_lost(Backend::Native);
}

#[test]
fn portable() {
    a_dead_reader_is_restarted_and_nothing_is_lost(Backend::Portable);
}

/// Whether the last status `s` published says the backend is down,
/// with at least `tried` restarts tried.
fn down(c: &Collector, tried: u32) -> bool {
    let Some(last) = c.statuses.get("s").and_then(|v| v.last()) else {
        return false;
    };
    matches!(&last.phase, Phase::Degraded { reason }
        if reason.contains("the event backend stopped")
            && reason.contains(&format!("({tried} restarts tried so far)")))
}

fn watching(c: &Collector) -> bool {
    c.statuses
        .get("s")
        .and_then(|v| v.last())
        .is_some_and(|s| s.phase == Phase::Watching)
}

fn a_dead_reader_is_restarted_and_nothing_is_lost(b: Backend) {
    let d = tmp();
    let root = d.path();
    let m = Manager::builder()
        .backend(b)
        .backend_restart(Duration::from_millis(50), Duration::from_millis(400))
        .git_excludes_file(None)
        .build()
        .unwrap();
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[root]));
    // Made after the watch started (Wine reports nothing in a directory
    // older than its watch).
    fs::create_dir(root.join("sub")).unwrap();
    fs::write(root.join("sub/a"), "a").unwrap();
    fs::write(root.join("top"), "t").unwrap();
    m.sync("s", WAIT).unwrap();
    let mut mirror = Mirror::default();
    let mut applied = 0;
    let mut catch_up = |c: &mut Collector, mirror: &mut Mirror| {
        c.drain();
        let all = c.changes("s");
        for ch in &all[applied..] {
            mirror.apply(ch);
        }
        applied = all.len();
    };
    catch_up(&mut c, &mut mirror);
    assert_eq!(mirror, Mirror::of_disk(root), "before the failure");

    // Down, and two restarts fail before one works: the back-off grows.
    m.inject_restart_failures(2).unwrap();
    m.inject_reader_failure().unwrap();
    c.wait("Degraded: the event backend stopped", |c| down(c, 0));
    // Changes while nothing reads events.
    fs::write(root.join("sub/b"), "b").unwrap();
    fs::remove_file(root.join("top")).unwrap();
    fs::create_dir(root.join("sub/new")).unwrap();
    fs::write(root.join("sub/new/c"), "c").unwrap();
    c.wait("Degraded after two failed restarts", |c| down(c, 2));
    c.wait("Watching again once a restart worked", watching);
    m.sync("s", WAIT).unwrap();
    catch_up(&mut c, &mut mirror);
    assert_eq!(mirror, Mirror::of_disk(root), "after the restart");
    let status = m.status("s").unwrap();
    assert!(status.overflow_recoveries > 0, "{status:?}");

    // Events flow from the new backend; and it can die and come back too.
    fs::write(root.join("sub/new/d"), "d").unwrap();
    let p = root.join("sub/new/d");
    c.wait("a change seen by the new backend", |c| {
        c.has("s", &p, specwatch::ChangeKind::Created)
    });
    c.statuses.clear();
    m.inject_reader_failure().unwrap();
    c.wait("Degraded again", |c| down(c, 0));
    fs::remove_dir_all(root.join("sub/new")).unwrap();
    c.wait("Watching again", watching);
    m.sync("s", WAIT).unwrap();
    catch_up(&mut c, &mut mirror);
    assert_eq!(mirror, Mirror::of_disk(root), "after the second restart");
}
