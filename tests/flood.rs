//! A flood of OS events while the engine is busy: the backend-to-engine
//! inbox holds at most `max_queued_events`, what does not fit is dropped,
//! and the engine recovers as from a kernel queue overflow: the tree
//! rebuilt from the batches is the disk.

#![cfg(feature = "test-hooks")]

mod common;

use std::fs;

use common::*;
use specwatch::{Backend, Manager};

/// The bound the test sets: small, so that a flood of a few tens of
/// thousands of events overflows it many times.
const BOUND: usize = 2_000;

/// A knob from the environment (to run the flood bigger by hand: see
/// benches/RESULTS.md, "An inbox flood", for millions of events).
fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// This process's resident memory in MiB (Linux; 0 elsewhere).
fn rss_mib() -> u64 {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

/// What one message can hold: an inotify read of 64 KiB (16 bytes an
/// event at least) is admitted whole when nothing else is queued.
const ONE_READ: usize = 64 * 1024 / 16;

#[cfg(target_os = "linux")]
#[test]
fn native() {
    a_flood_is_bounded_and_loses_nothing(Backend::Native);
}

#[test]
fn portable() {
    a_flood_is_bounded_and_loses_nothing(Backend::Portable);
}

fn a_flood_is_bounded_and_loses_nothing(b: Backend) {
    let d = tmp();
    let root = d.path();
    let bound = knob("SPECWATCH_FLOOD_BOUND", BOUND);
    let m = Manager::builder()
        .backend(b)
        .max_queued_events(bound)
        .git_excludes_file(None)
        .build()
        .unwrap();
    let mut c = Collector::new(m.subscribe());
    // Made after the watch started (Wine reports nothing in a directory
    // older than its watch).
    start(&m, "s", spec(&[root]));
    fs::create_dir(root.join("sub")).unwrap();
    fs::write(root.join("sub/kept"), "k").unwrap();
    m.sync("s", WAIT).unwrap();
    c.drain();
    let mut mirror = Mirror::default();
    for ch in c.changes("s") {
        mirror.apply(&ch);
    }
    c.clear();
    assert_eq!(mirror, Mirror::of_disk(root), "before the flood");
    let files = knob("SPECWATCH_FLOOD_FILES", 2_000);
    let rss_before = rss_mib();
    let hold = m.hold_engine().unwrap();
    // Some 16,000 events while the engine takes none: creations, writes,
    // removals, a directory made and filled.
    for i in 0..files {
        fs::write(root.join(format!("f{i}")), "0").unwrap();
    }
    for round in 1..=5 {
        for i in 0..files {
            fs::write(root.join(format!("f{i}")), format!("{round}")).unwrap();
        }
    }
    for i in (0..files).step_by(2) {
        fs::remove_file(root.join(format!("f{i}"))).unwrap();
    }
    fs::create_dir(root.join("sub/new")).unwrap();
    for i in 0..100 {
        fs::write(root.join(format!("sub/new/g{i}")), "g").unwrap();
    }
    fs::remove_file(root.join("sub/kept")).unwrap();
    let rss_held = rss_mib();
    drop(hold);
    m.sync("s", WAIT).unwrap();
    c.drain();
    for ch in c.changes("s") {
        mirror.apply(&ch);
    }
    assert_eq!(mirror, Mirror::of_disk(root), "after the flood");
    let stats = m.stats().unwrap();
    note(&format!(
        "{b:?}: {files} files, bound {bound}: RSS {rss_before} MiB before, {rss_held} MiB \
         after the flood (engine held), {} MiB after; {stats:?}",
        rss_mib()
    ));
    assert!(
        stats.dropped_os_events > 0,
        "the flood never filled the inbox: {stats:?}"
    );
    assert!(
        stats.queued_os_events_peak <= bound.max(ONE_READ),
        "the inbox held more than its bound: {stats:?}"
    );
    let status = m.status("s").unwrap();
    assert!(
        status.overflow_recoveries > 0,
        "a drop is recovered as an overflow: {status:?}"
    );
}
