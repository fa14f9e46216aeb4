//! Never lose a change: sync barrier, overflow recovery, missing and vanished
//! roots, awkward names.

mod common;

use std::collections::HashSet;
use std::fs;
use std::path::PathBuf;

use common::*;
use specwatch::{Backend, ChangeKind, Phase};

both_backends!(
    sync_delivers_everything_before_it,
    sync_on_file_root_and_missing_root,
    mkdir_p_of_missing_root,
    root_renamed_away_counts_as_deleted,
    deep_trees_and_long_names,
    a_chain_far_past_max_path_is_reported_and_watching_goes_on,
    // Fault injection: test hooks.
    #[cfg(feature = "test-hooks")]
    injected_overflow_is_recovered_precisely,
    slow_consumer_gets_every_path_with_bounded_backlog,
    // Unix only: permission bits. Windows has ACLs instead, and Wine, where
    // the Windows tests run, does not enforce them.
    #[cfg(unix)]
    unreadable_subdirectory_is_named_and_recovers,
    #[cfg(unix)]
    sync_on_unwritable_root_falls_back_to_a_rescan,
    #[cfg(feature = "test-hooks")]
    os_watch_limit_falls_back_to_polling_and_back,
);

fn sync_delivers_everything_before_it(b: Backend) {
    let d = tmp();
    let root = d.path();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    // A long quiet window: without sync's flush these would still be pending.
    start(
        &m,
        "s",
        specwatch::WatchSpec::new([root])
            .quiet_window(std::time::Duration::from_secs(5))
            .max_delay(std::time::Duration::from_secs(5)),
    );
    let mut want = Vec::new();
    for i in 0..200 {
        let p = root.join(format!("f{i}"));
        fs::write(&p, "x").unwrap();
        want.push(p);
    }
    m.sync("s", WAIT).expect("sync");
    c.drain(); // no waiting: sync promised delivery
    for p in &want {
        assert!(
            c.has("s", p, ChangeKind::Created),
            "{} not delivered by sync",
            p.display()
        );
    }
    // Cookies are never reported and are cleaned up.
    let all = c.changes("s");
    assert!(
        all.iter()
            .all(|x| !x.path.to_string_lossy().contains("specwatch-cookie")),
        "cookie reported: {all:?}"
    );
    let left: Vec<_> = fs::read_dir(root)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("specwatch-cookie"))
        .collect();
    assert!(left.is_empty(), "cookie left on disk");
    // Repeated syncs with nothing in between work too.
    for _ in 0..20 {
        m.sync("s", WAIT).expect("sync");
    }
    c.drain();
    assert_eq!(
        c.changes("s").len(),
        all.len(),
        "syncs alone produced changes"
    );
    assert!(matches!(
        m.sync("nope", WAIT),
        Err(specwatch::Error::NotFound { .. })
    ));
}

fn sync_on_file_root_and_missing_root(b: Backend) {
    let d = tmp();
    let f = d.path().join("file.txt");
    fs::write(&f, "1").unwrap();
    let missing = d.path().join("not/yet");
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[&f, &missing]));
    fs::write(&f, "2").unwrap();
    m.sync("s", WAIT).expect("sync");
    c.drain();
    assert!(c.has("s", &f, ChangeKind::Modified));
}

fn mkdir_p_of_missing_root(b: Backend) {
    let d = tmp();
    let base = d.path();
    let root = base.join("a/b/c");
    fs::create_dir(base.join("sibling")).unwrap();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    let st = start(&m, "s", spec(&[&root]));
    assert!(matches!(st.phase, Phase::Degraded { .. }), "{:?}", st.phase);
    if b == Backend::Native {
        // Only the nearest existing ancestor is watched, not its other
        // subdirectories.
        assert_eq!(m.stats().unwrap().os_watches, 1);
    }
    fs::create_dir_all(&root).unwrap();
    fs::write(root.join("f"), "x").unwrap();
    c.wait("the new root and its file", |c| {
        c.has("s", &root, ChangeKind::Created) && c.has("s", &root.join("f"), ChangeKind::Created)
    });
    m.sync("s", WAIT).unwrap();
    c.drain();
    // Nothing outside the root is reported.
    let outside: Vec<_> = c
        .changes("s")
        .into_iter()
        .filter(|x| !x.path.starts_with(&root))
        .collect();
    assert!(outside.is_empty(), "{outside:?}");
    c.wait("status watching", |_| {
        m.status("s").is_some_and(|s| s.phase == Phase::Watching)
    });
    fs::write(root.join("g"), "y").unwrap();
    c.wait("later file", |c| {
        c.has("s", &root.join("g"), ChangeKind::Created)
    });
}

fn root_renamed_away_counts_as_deleted(b: Backend) {
    let d = tmp();
    let root = d.path().join("r");
    fs::create_dir_all(root.join("x")).unwrap();
    fs::write(root.join("x/f"), "").unwrap();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[&root]));
    fs::rename(&root, d.path().join("elsewhere")).unwrap();
    c.wait("root and contents removed", |c| {
        c.has("s", &root, ChangeKind::Removed) && c.has("s", &root.join("x/f"), ChangeKind::Removed)
    });
    c.wait("status degraded", |_| {
        m.status("s").is_some_and(
            |s| matches!(s.phase, Phase::Degraded { ref reason } if reason.contains(&*root.to_string_lossy())),
        )
    });
    // Changes in the moved tree are not reported under the old path.
    c.clear();
    fs::write(d.path().join("elsewhere/x/g"), "").unwrap();
    fs::create_dir(&root).unwrap();
    m.sync("s", WAIT).unwrap();
    c.drain();
    assert!(!c.has("s", &root.join("x/g"), ChangeKind::Created));
    assert!(c.has("s", &root, ChangeKind::Created));
}

/// A watched temporary directory, with a chain of new directories named
/// `names` made in it at once: the manager, its collector, and the
/// deepest directory.
fn watched_chain(
    b: Backend,
    names: impl Iterator<Item = String>,
) -> (tempfile::TempDir, specwatch::Manager, Collector, PathBuf) {
    let d = tmp();
    let m = manager(b);
    let c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[d.path()]));
    let mut deep = d.path().to_path_buf();
    deep.extend(names);
    fs::create_dir_all(&deep).unwrap();
    (d, m, c, deep)
}

fn deep_trees_and_long_names(b: Backend) {
    let (d, _m, mut c, deep) = watched_chain(b, (0..200).map(|_| "d".into()));
    let root = d.path();
    let long = "n".repeat(255);
    let f = deep.join(&long);
    fs::write(&f, "x").unwrap();
    let g = root.join(&long);
    fs::write(&g, "x").unwrap();
    c.wait("deep file with a 255-byte name", |c| {
        c.has("s", &f, ChangeKind::Created) && c.has("s", &g, ChangeKind::Created)
    });
    fs::remove_dir_all(root.join("d")).unwrap();
    c.wait("deep tree removed", |c| c.has("s", &f, ChangeKind::Removed));
}

/// A file at the bottom of 150 new directories, far past Windows' 260
/// characters (`MAX_PATH`; about 2,000 here), is reported, and so is a
/// file written after it, each within the usual deadline. Under Wine a
/// look at a path that long costs 10-30 ms, and the portable backend
/// looked at every directory above each new one: the chain took minutes,
/// and nothing else was reported meanwhile.
fn a_chain_far_past_max_path_is_reported_and_watching_goes_on(b: Backend) {
    let (d, _m, mut c, deep) = watched_chain(b, (0..150).map(|i| format!("directory{i:03}")));
    let root = d.path();
    let f = deep.join("bottom.txt");
    fs::write(&f, "x").unwrap();
    assert!(f.as_os_str().len() > 1800, "{} is long", f.display());
    c.wait("the file at the bottom of the chain", |c| {
        c.has("s", &f, ChangeKind::Created)
    });
    let after = root.join("after.txt");
    fs::write(&after, "a").unwrap();
    c.wait("a file written after the chain", |c| {
        c.has("s", &after, ChangeKind::Created)
    });
}

#[cfg(feature = "test-hooks")]
fn injected_overflow_is_recovered_precisely(b: Backend) {
    let d = tmp();
    let root = d.path();
    fs::create_dir(root.join("sub")).unwrap();
    for i in 0..50 {
        fs::write(root.join(format!("sub/old{i}")), "o").unwrap();
    }
    // Age the old files past the overflow margin: not a wait for an event,
    // just time passing so their ctime is provably older.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let m = specwatch::Manager::builder()
        .backend(b)
        .overflow_margin(std::time::Duration::from_millis(100))
        .build()
        .unwrap();
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[root]));
    c.barrier("s", root);
    // Hide the events from the engine (native: stop reading the queue).
    m.pause_os_reader(true);
    for i in 0..20 {
        fs::write(root.join(format!("new{i}")), "n").unwrap();
    }
    fs::write(root.join("sub/old3"), "changed").unwrap();
    fs::remove_file(root.join("sub/old4")).unwrap();
    fs::create_dir_all(root.join("fresh/deeper")).unwrap();
    fs::write(root.join("fresh/deeper/x"), "x").unwrap();
    m.inject_overflow().unwrap();
    c.wait("changes found by the rescan", |c| {
        (0..20).all(|i| c.has("s", &root.join(format!("new{i}")), ChangeKind::Created))
            && c.has("s", &root.join("sub/old3"), ChangeKind::Modified)
            && c.has("s", &root.join("sub/old4"), ChangeKind::Removed)
            && c.has("s", &root.join("fresh/deeper/x"), ChangeKind::Created)
    });
    if b == Backend::Native {
        // Found by the rescan alone: the reader is still paused.
        let st = m.status("s").unwrap();
        assert_eq!(st.overflow_recoveries, 1);
    }
    m.pause_os_reader(false);
    m.sync("s", WAIT).unwrap();
    c.drain();
    // Precise, not "everything changed": the untouched old files are not
    // reported (they are older than the margin before the last read).
    let vague: Vec<_> = c
        .changes("s")
        .into_iter()
        .filter(|x| x.path.starts_with(root.join("sub")))
        .filter(|x| x.path != root.join("sub/old3") && x.path != root.join("sub/old4"))
        .collect();
    assert!(vague.is_empty(), "untouched files reported: {vague:?}");
}

/// A real kernel queue overflow: the reader stops reading while far more
/// than `max_queued_events` (16,384 by default) events happen. (inotify:
/// Linux only.)
#[cfg(all(target_os = "linux", feature = "test-hooks"))]
#[test]
fn real_queue_overflow_is_recovered() {
    // Each file: IN_CREATE + IN_MODIFY.
    let n = inotify_queue() / 2 + 4000;
    overflowed_burst(Backend::Native, n, |m, held| m.pause_os_reader(held));
}

/// A burst far past what the OS keeps while nobody reads: notify's thread
/// is held (a test hook) while files are written, so that its OS buffer
/// overflows for real: ReadDirectoryChangesW's 64 KiB on Windows (each
/// file two records of about 40 bytes), inotify's queue on Linux. notify
/// says so with a rescan (notify 8.2 on Windows dropped the watch without
/// a word: nothing more was reported), and the engine finds every file,
/// the rewrite of an old one and a removal, and goes on watching.
#[cfg(all(feature = "test-hooks", any(windows, target_os = "linux")))]
#[test]
fn portable_burst_past_the_os_buffer_is_recovered() {
    let n = if cfg!(windows) {
        4000
    } else {
        inotify_queue() / 2 + 4000
    };
    overflowed_burst(Backend::Portable, n, |m, held| m.hold_os_thread(held));
}

/// inotify's queue (`max_queued_events`), on Linux.
#[cfg(all(feature = "test-hooks", any(windows, target_os = "linux")))]
fn inotify_queue() -> usize {
    fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(16384)
}

/// `n` new files, an old one rewritten and one removed while `stop(m,
/// true)` keeps the backend from reading; then `stop(m, false)`: every
/// change is reported, an overflow was recovered, and a file written after
/// is reported.
#[cfg(all(feature = "test-hooks", any(windows, target_os = "linux")))]
fn overflowed_burst(b: Backend, n: usize, stop: impl Fn(&specwatch::Manager, bool)) {
    let d = tmp();
    let root = d.path();
    fs::create_dir(root.join("bulk")).unwrap();
    fs::write(root.join("keep"), "1").unwrap();
    fs::write(root.join("gone"), "1").unwrap();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[root]));
    c.barrier("s", root);
    stop(&m, true);
    let mut missing: HashSet<PathBuf> = HashSet::new();
    for i in 0..n {
        let p = root.join(format!("bulk/file-of-the-burst-{i:05}.txt"));
        fs::write(&p, "x").unwrap();
        missing.insert(p);
    }
    fs::write(root.join("keep"), "2").unwrap();
    fs::remove_file(root.join("gone")).unwrap();
    stop(&m, false);
    // The recovery reads the whole tree again: under Wine, with other
    // tests beside, 4,000 files' looks took more than 20 s (they came,
    // all at once). A loss would never come: the deadline only bounds a
    // hang.
    let released = std::time::Instant::now();
    c.wait_within("every file of the overflowed burst", 6 * WAIT, |c| {
        if let Some(bs) = c.batches.get("s") {
            for b in bs {
                for x in &b.changes {
                    if x.kind == ChangeKind::Created {
                        missing.remove(&x.path);
                    }
                }
            }
        }
        missing.is_empty()
    });
    if released.elapsed() > WAIT {
        note(&format!(
            "{n} files of an overflowed burst reported {:.0?} after the release",
            released.elapsed()
        ));
    }
    m.sync("s", WAIT).unwrap();
    c.drain();
    assert!(c.has("s", &root.join("keep"), ChangeKind::Modified));
    assert!(c.has("s", &root.join("gone"), ChangeKind::Removed));
    let st = m.status("s").unwrap();
    assert!(
        st.overflow_recoveries >= 1,
        "the OS's buffer did not overflow ({n} files): test proves nothing"
    );
    let after = root.join("after");
    fs::write(&after, "a").unwrap();
    c.wait("a file written after the recovery", |c| {
        c.has("s", &after, ChangeKind::Created)
    });
}

/// notify 9 drops a watch whose read fails for good (on Windows, a
/// ReadDirectoryChangesW that fails), and says so with an error naming
/// it. Injected: the engine asks for the watch again and rescans, so that
/// what was written while it was gone, and after, is reported, and the
/// recovery is counted in the status.
#[cfg(feature = "test-hooks")]
#[test]
fn portable_watch_dropped_by_the_os_is_asked_for_again() {
    let d = tmp();
    let root = d.path();
    fs::create_dir(root.join("sub")).unwrap();
    let m = manager(Backend::Portable);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[root]));
    c.barrier("s", root);
    m.inject_watch_loss().unwrap();
    let during = root.join("sub/during");
    fs::write(&during, "d").unwrap();
    c.wait("a file written as the watch was lost", |c| {
        c.has("s", &during, ChangeKind::Created)
    });
    // The injection is the engine's to act on, in its own time: the file
    // may be seen by the old watch before it is dropped.
    c.wait("the lost watches' recovery counted in the status", |_| {
        m.status("s").is_some_and(|s| s.overflow_recoveries >= 1)
    });
    let after = root.join("sub/after");
    fs::write(&after, "a").unwrap();
    c.wait("a file written after the recovery", |c| {
        c.has("s", &after, ChangeKind::Created)
    });
}

fn slow_consumer_gets_every_path_with_bounded_backlog(b: Backend) {
    if b == Backend::Portable
        && skip_on_wine(
            "100,000 writes are about 180,000 events, each a look that costs Wine \
             a millisecond or more: the engine reached the sync 157 s after the last \
             write (the deadline is 20 s), with nothing lost",
        )
    {
        return;
    }
    let d = tmp();
    let root = d.path();
    let files: Vec<PathBuf> = (0..1000).map(|i| root.join(format!("f{i}"))).collect();
    for f in &files {
        fs::write(f, "0").unwrap();
    }
    let m = specwatch::Manager::builder()
        .backend(b)
        .subscriber_capacity(8)
        .build()
        .unwrap();
    // Subscribed, then not read at all while 100,000 changes happen.
    let slow = m.subscribe();
    start(
        &m,
        "s",
        specwatch::WatchSpec::new([root]).quiet_window(std::time::Duration::ZERO),
    );
    for round in 0..100 {
        for f in &files {
            fs::write(f, round.to_string()).unwrap();
        }
    }
    // The engine is not blocked by the full channel: sync still completes.
    m.sync("s", WAIT)
        .expect("engine blocked by a slow subscriber");
    let backlog = m.stats().unwrap().backlog_paths;
    assert!(
        backlog <= files.len(),
        "backlog must be bounded by distinct paths: {backlog} > {}",
        files.len()
    );
    // Now read: every file is there, coalesced.
    let mut c = Collector::new(slow);
    let mut missing: HashSet<PathBuf> = files.iter().cloned().collect();
    c.wait("every changed path after the backlog drains", |c| {
        if let Some(bs) = c.batches.get("s") {
            for b in bs {
                for x in &b.changes {
                    missing.remove(&x.path);
                }
            }
        }
        missing.is_empty()
    });
    let total: usize = c.batches["s"].iter().map(|b| b.changes.len()).sum();
    assert!(
        total < 100_000,
        "changes were not coalesced for the slow subscriber ({total} lines)"
    );
    let seqs: Vec<u64> = c.batches["s"].iter().map(|b| b.seq.number()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "seq must increase");
}

/// Beyond the OS watch budget (simulated by the manager's own cap, never by
/// changing machine-wide limits), directories are polled, the status says
/// so, nothing is missed, and they move back to OS watches once another
/// spec releases its watches. (The manager's watch cap is the native
/// backend's: Linux only.)
#[cfg(target_os = "linux")]
#[test]
fn watch_limit_falls_back_to_polling_and_back() {
    let d = tmp();
    let a = d.path().join("a");
    let b = d.path().join("b");
    for i in 0..3 {
        fs::create_dir_all(a.join(format!("x{i}"))).unwrap();
    }
    for i in 0..6 {
        fs::create_dir_all(b.join(format!("y{i}"))).unwrap();
        fs::write(b.join(format!("y{i}/old")), "o").unwrap();
    }
    let m = specwatch::Manager::builder()
        .backend(Backend::Native)
        .max_os_watches(8)
        .poll_interval(std::time::Duration::from_millis(20))
        .build()
        .unwrap();
    let mut c = Collector::new(m.subscribe());
    // a: its parent, a, 3 subdirectories = 5 watches.
    let st = start(&m, "a", spec(&[&a]));
    assert_eq!(st.phase, Phase::Watching);
    assert_eq!(m.stats().unwrap().os_watches, 5);
    // b needs 7 more (its parent is shared): only 3 fit.
    let st = start(&m, "b", spec(&[&b]));
    assert_eq!(m.stats().unwrap().os_watches, 8, "the cap is respected");
    assert_eq!(st.polled_dirs, 4);
    match &st.phase {
        Phase::Degraded { reason } => assert!(reason.contains("4 directories polled"), "{reason}"),
        other => panic!("expected degraded, got {other:?}"),
    }
    // Changes in polled directories are still reported: creations,
    // modifications, removals.
    for i in 0..6 {
        fs::write(b.join(format!("y{i}/new")), "n").unwrap();
        fs::write(b.join(format!("y{i}/old")), "changed, longer").unwrap();
    }
    fs::remove_file(b.join("y5/new")).unwrap();
    fs::create_dir(b.join("y0/deeper")).unwrap();
    fs::write(b.join("y0/deeper/f"), "f").unwrap();
    c.wait("changes in polled and watched directories", |c| {
        (0..5).all(|i| c.has("b", &b.join(format!("y{i}/new")), ChangeKind::Created))
            && (0..6).all(|i| c.has("b", &b.join(format!("y{i}/old")), ChangeKind::Modified))
            && c.has("b", &b.join("y0/deeper/f"), ChangeKind::Created)
    });
    // Watches released (a's 4; the parent stays, b shares it): four of
    // b's five polled directories move back to OS watches, one stays polled
    // at the cap.
    m.delete("a").unwrap();
    c.wait("b mostly watched natively again", |_| {
        m.status("b").is_some_and(|s| s.polled_dirs == 1)
    });
    let g = b.join("after"); // b itself always had an OS watch
    fs::write(&g, "g").unwrap();
    m.sync("b", WAIT).unwrap();
    c.drain();
    assert!(c.has("b", &g, ChangeKind::Created));
    assert_eq!(m.stats().unwrap().os_watches, 8, "at the cap again");
}

/// The OS's own watch limit, on both backends (simulated: the next watch
/// calls fail with the error each backend gets at the limit, `ENOSPC` from
/// inotify or notify's `MaxFilesWatch`, through the same error mapping):
/// the directories left over are polled, their changes reported, and they
/// move back to OS watches once another spec releases watches.
#[cfg(feature = "test-hooks")]
fn os_watch_limit_falls_back_to_polling_and_back(b: Backend) {
    let d = tmp();
    let a = d.path().join("a");
    let w = d.path().join("b");
    fs::create_dir_all(a.join("x")).unwrap();
    for i in 0..3 {
        fs::create_dir_all(w.join(format!("y{i}"))).unwrap();
        fs::write(w.join(format!("y{i}/old")), "o").unwrap();
    }
    let m = specwatch::Manager::builder()
        .backend(b)
        .poll_interval(std::time::Duration::from_millis(20))
        .build()
        .unwrap();
    let mut c = Collector::new(m.subscribe());
    assert_eq!(start(&m, "a", spec(&[&a])).phase, Phase::Watching);
    // The next two watch calls hit the limit: `b` itself and one of its
    // subdirectories (their shared parent is watched already).
    m.inject_watch_limit(2).unwrap();
    if matches!(b, Backend::Poll { .. }) {
        // A manager that polls makes no watch call: there is no limit to
        // reach, nothing is polled for want of watches, and the changes
        // are reported by its polls all the same.
        let st = start(&m, "b", spec(&[&w]));
        assert_eq!((st.polled_dirs, &st.phase), (0, &Phase::Watching), "{st:?}");
        for i in 0..3 {
            fs::write(w.join(format!("y{i}/new")), "n").unwrap();
            fs::write(w.join(format!("y{i}/old")), "changed, longer").unwrap();
        }
        c.wait("changes in polled directories", |c| {
            (0..3).all(|i| {
                c.has("b", &w.join(format!("y{i}/new")), ChangeKind::Created)
                    && c.has("b", &w.join(format!("y{i}/old")), ChangeKind::Modified)
            })
        });
        assert_eq!(m.stats().unwrap().os_watches, 0);
        assert!(m.check_index().unwrap().is_empty());
        return;
    }
    let st = start(&m, "b", spec(&[&w]));
    assert_eq!(st.polled_dirs, 2, "{b:?}: {st:?}");
    match &st.phase {
        Phase::Degraded { reason } => assert!(
            reason.contains("2 directories polled") && reason.contains("for want of OS watches"),
            "{reason}"
        ),
        other => panic!("{b:?}: expected degraded, got {other:?}"),
    }
    for i in 0..3 {
        fs::write(w.join(format!("y{i}/new")), "n").unwrap();
        fs::write(w.join(format!("y{i}/old")), "changed, longer").unwrap();
    }
    fs::write(w.join("top"), "t").unwrap();
    c.wait("changes in polled and watched directories", |c| {
        (0..3).all(|i| {
            c.has("b", &w.join(format!("y{i}/new")), ChangeKind::Created)
                && c.has("b", &w.join(format!("y{i}/old")), ChangeKind::Modified)
        }) && c.has("b", &w.join("top"), ChangeKind::Created)
    });
    // Watches released: the polled directories get OS watches again.
    m.delete("a").unwrap();
    c.wait("b watched by the OS again", |_| {
        m.status("b")
            .is_some_and(|s| s.polled_dirs == 0 && s.phase == Phase::Watching)
    });
    for i in 0..3 {
        fs::write(w.join(format!("y{i}/after")), "a").unwrap();
    }
    m.sync("b", WAIT).unwrap();
    c.drain();
    for i in 0..3 {
        let p = w.join(format!("y{i}/after"));
        assert!(
            c.has("b", &p, ChangeKind::Created),
            "{b:?}: {}",
            p.display()
        );
    }
    // A directory created at the limit is polled too (on the portable
    // backend its own recursive watch call is the one refused), and what
    // it holds is reported. On Windows and macOS the portable backend
    // makes no such call: the OS's recursive watch of the root covers a
    // new directory at once, so nothing is refused and nothing polled.
    let covered_by_the_root = b == Backend::Portable && cfg!(any(windows, target_os = "macos"));
    m.inject_watch_limit(1).unwrap();
    let late = w.join("late");
    fs::create_dir(&late).unwrap();
    fs::write(late.join("f"), "f").unwrap();
    m.sync("b", WAIT).unwrap();
    c.drain();
    assert!(c.has("b", &late.join("f"), ChangeKind::Created), "{b:?}");
    // (Status is published after the pass that answered the sync.)
    let polled = if covered_by_the_root { 0 } else { 1 };
    c.wait(&format!("late counted as polled ({polled})"), |_| {
        m.status("b").is_some_and(|s| s.polled_dirs == polled)
    });
    fs::write(late.join("g"), "g").unwrap();
    m.sync("b", WAIT).unwrap();
    c.drain();
    assert!(c.has("b", &late.join("g"), ChangeKind::Created), "{b:?}");
    assert!(m.check_index().unwrap().is_empty());
}

/// A watch that fails for a transient reason (an injected I/O error) is
/// retried with backoff; the status shows the attempts; what changed while
/// the directory had no watch is reported once the watch lands. (One
/// watch per directory, as the native backend places them: Linux only.)
#[cfg(all(target_os = "linux", feature = "test-hooks"))]
#[test]
fn failed_watch_is_retried_with_backoff() {
    let d = tmp();
    let root = d.path().join("r");
    fs::create_dir_all(root.join("sub")).unwrap();
    fs::write(root.join("old"), "o").unwrap();
    let m = manager(Backend::Native);
    let mut c = Collector::new(m.subscribe());
    // The root's parent and the root itself fail twice each.
    m.inject_watch_failures(4).unwrap();
    m.apply("s", spec(&[&root])).unwrap();
    let st = m.wait_watching("s", WAIT).unwrap();
    assert!(st.watch_retries >= 1, "{st:?}");
    assert!(matches!(st.phase, Phase::Degraded { .. }), "{:?}", st.phase);
    // Changed while the root had no watch.
    fs::write(root.join("new"), "n").unwrap();
    fs::write(root.join("old"), "changed").unwrap();
    c.wait("changes found once the retried watch landed", |c| {
        c.has("s", &root.join("new"), ChangeKind::Created)
            && c.has("s", &root.join("old"), ChangeKind::Modified)
    });
    c.wait("watching, with the attempts counted", |_| {
        m.status("s")
            .is_some_and(|s| s.phase == Phase::Watching && s.watch_retries == 4)
    });
    // Watched for real now: events arrive (sync proves delivery).
    let f = root.join("after");
    fs::write(&f, "a").unwrap();
    m.sync("s", WAIT).unwrap();
    c.drain();
    assert!(c.has("s", &f, ChangeKind::Created));
}

/// A subdirectory that cannot be read (mode 000, with permission bits made
/// to apply even to root, see `permissions_apply`) leaves the rest watched;
/// the status names it; once it is readable again it is watched and its
/// contents are reported.
#[cfg(unix)]
fn unreadable_subdirectory_is_named_and_recovers(b: Backend) {
    use std::os::unix::fs::PermissionsExt;
    let d = tmp();
    let root = d.path().join("r");
    let locked = root.join("locked");
    fs::create_dir_all(root.join("ok")).unwrap();
    fs::create_dir_all(locked.join("inner")).unwrap();
    fs::write(locked.join("inner/f"), "f").unwrap();
    let _caps = permissions_apply();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    let st = start(&m, "s", spec(&[&root]));
    let named = |st: &specwatch::WatchStatus| match &st.phase {
        Phase::Degraded { reason } => reason.contains(&*locked.to_string_lossy()),
        _ => false,
    };
    assert!(
        named(&st),
        "status does not name {}: {st:?}",
        locked.display()
    );
    // The rest works.
    let g = root.join("ok/g");
    fs::write(&g, "g").unwrap();
    m.sync("s", WAIT).unwrap();
    c.drain();
    assert!(c.has("s", &g, ChangeKind::Created), "{:?}", c.changes("s"));
    let st = m.status("s").unwrap();
    assert!(named(&st), "still degraded while locked");
    assert!(
        st.last_error
            .as_deref()
            .is_some_and(|e| e.contains(&*locked.to_string_lossy()))
            && st.last_error_time.is_some(),
        "the last error names the directory, with a time: {st:?}"
    );
    // Readable again: watched, contents reported, phase back to Watching.
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
    c.wait("the unlocked directory's contents reported", |c| {
        c.has("s", &locked.join("inner"), ChangeKind::Created)
            && c.has("s", &locked.join("inner/f"), ChangeKind::Created)
    });
    c.wait("phase Watching again", |_| {
        m.status("s").is_some_and(|s| s.phase == Phase::Watching)
    });
    let st = m.status("s").unwrap();
    assert_eq!(
        (st.last_error, st.last_error_time),
        (None, None),
        "healthy again: no last error"
    );
    let h = locked.join("inner/h");
    fs::write(&h, "h").unwrap();
    m.sync("s", WAIT).unwrap();
    c.drain();
    assert!(c.has("s", &h, ChangeKind::Created), "{:?}", c.changes("s"));
}

/// A root where no cookie can be created (mode 555, with permission bits
/// made to apply even to root): `sync` still returns, by a rescan of the
/// root, and what was created, removed and written below it before the
/// call is delivered.
#[cfg(unix)]
fn sync_on_unwritable_root_falls_back_to_a_rescan(b: Backend) {
    use std::os::unix::fs::PermissionsExt;
    let d = tmp();
    let root = d.path().join("r");
    let sub = root.join("sub");
    fs::create_dir_all(&sub).unwrap();
    fs::write(sub.join("old"), "o").unwrap();
    let _caps = permissions_apply();
    fs::set_permissions(&root, fs::Permissions::from_mode(0o555)).unwrap();
    assert!(
        fs::write(root.join("probe"), "p").is_err(),
        "the root must refuse new files for this test"
    );
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    // A long quiet window: only sync's flush delivers in time.
    start(
        &m,
        "s",
        specwatch::WatchSpec::new([&root])
            .quiet_window(std::time::Duration::from_secs(30))
            .max_delay(std::time::Duration::from_secs(30)),
    );
    let new = sub.join("new");
    fs::write(&new, "n").unwrap();
    fs::remove_file(sub.join("old")).unwrap();
    m.sync("s", WAIT).expect("sync by rescan");
    c.drain(); // no waiting: sync promised delivery
    assert!(
        c.has("s", &new, ChangeKind::Created),
        "{:?}",
        c.changes("s")
    );
    assert!(
        c.has("s", &sub.join("old"), ChangeKind::Removed),
        "{:?}",
        c.changes("s")
    );
    fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
}

/// A directory replaced by another directory of the same name while its
/// parent is polled (no events from the parent): the old one's OS watch
/// follows it away, so a poll that compares only names and types would
/// never read the new one, and would report what happens in the old one
/// (now elsewhere) under the new one's path. (A watch per directory, the
/// native backend's: Linux only.)
#[cfg(all(target_os = "linux", feature = "test-hooks"))]
#[test]
fn directory_replaced_below_a_polled_parent_is_read_again() {
    let d = tmp();
    let root = d.path().join("r");
    let out = d.path().join("out");
    fs::create_dir(&root).unwrap();
    fs::create_dir(&out).unwrap();
    // Polled directories are polled only by syncs here.
    let m = specwatch::Manager::builder()
        .backend(Backend::Native)
        .poll_interval(std::time::Duration::from_secs(3600))
        .build()
        .unwrap();
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[&root]));
    m.inject_watch_limit(1).unwrap();
    fs::create_dir(root.join("p")).unwrap();
    m.sync("s", WAIT).unwrap();
    c.wait("p polled for want of a watch", |_| {
        m.status("s").is_some_and(|s| s.polled_dirs == 1)
    });
    fs::create_dir(root.join("p/c")).unwrap();
    m.sync("s", WAIT).unwrap(); // the sync's poll of p finds c, which gets a watch
    c.drain();
    assert!(c.has("s", &root.join("p/c"), ChangeKind::Created));
    // c leaves the tree (its watch goes with it), another c takes its place.
    fs::rename(root.join("p/c"), out.join("c")).unwrap();
    fs::create_dir(root.join("p/c")).unwrap();
    fs::write(root.join("p/c/new"), "n").unwrap();
    m.sync("s", WAIT).unwrap();
    c.drain();
    assert!(
        c.has("s", &root.join("p/c/new"), ChangeKind::Created),
        "the new p/c was not read: {:?}",
        c.changes("s")
    );
    // What happens in the old c, now outside, is not reported; the new c
    // is watched.
    fs::write(out.join("c/stray"), "x").unwrap();
    fs::write(root.join("p/c/after"), "a").unwrap();
    m.sync("s", WAIT).unwrap();
    c.drain();
    assert!(c.has("s", &root.join("p/c/after"), ChangeKind::Created));
    assert!(
        !c.changes("s").iter().any(|x| x.path.ends_with("stray")),
        "a change outside the tree was reported: {:?}",
        c.changes("s")
    );
    assert!(m.check_index().unwrap().is_empty());
}
