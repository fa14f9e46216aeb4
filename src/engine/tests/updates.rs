//! Engine tests of spec updates: the guard that holds back the OS hints
//! queued before an update for the paths it adds.

use super::*;

/// An update holds back `Modified` hints queued before it for paths the
/// old generation did not show, until its cookie comes back; hints for
/// paths it showed, and everything after the cookie, go through.
#[test]
fn an_update_holds_back_older_hints_for_paths_it_adds() {
    let mut h = harness(Config::default());
    let (log, txt) = (h.root.join("a.log"), h.root.join("b.txt"));
    std::fs::write(&log, "1").unwrap();
    std::fs::write(&txt, "1").unwrap();
    let quiet = |s: WatchSpec| s.quiet_window(Duration::ZERO);
    h.apply("s", quiet(h.spec().ignore_patterns(["*.log"])));
    let _ = h.batches();
    h.upsert("s", Generation(2), quiet(h.spec()));
    h.engine.end_pass();
    let b = h.batches();
    assert_eq!(kinds(&b, &log), [ChangeKind::Created], "the update's own");
    let cookies = h.engine.syncs.guard_cookies_waiting();
    assert_eq!(cookies.len(), 1, "one cookie, in the root");
    let root = h.root.clone();
    h.event(&root, "a.log", Hint::Modified);
    h.event(&root, "b.txt", Hint::Modified);
    h.engine.end_pass();
    let b = h.batches();
    assert_eq!(kinds(&b, &log), [], "written before the update");
    assert_eq!(kinds(&b, &txt), [ChangeKind::Modified], "shown before");
    let name = cookies[0].file_name().unwrap().to_str().unwrap().to_owned();
    h.event(&root, &name, Hint::Created);
    h.event(&root, "a.log", Hint::Modified);
    h.engine.end_pass();
    let b = h.batches();
    assert_eq!(kinds(&b, &log), [ChangeKind::Modified], "after the cookie");
    assert!(h.engine.syncs.guard_cookies_waiting().is_empty());
}

/// A poll's finding is no OS hint queued before an update: an update's
/// guard, still waiting for its cookie, does not hold it back (from a
/// review; the watch cap leaves `sub` polled).
#[test]
fn an_update_guard_does_not_hold_back_what_a_poll_finds() {
    let mut h = harness(Config {
        max_watches: Some(2), // the root's parent and the root
        poll_interval: Some(100 * MS),
        ..Config::default()
    });
    std::fs::create_dir(h.root.join("sub")).unwrap();
    let f = h.root.join("sub/f");
    std::fs::write(&f, "x").unwrap();
    // `sub` is shown by the update only, and polled (the cap).
    h.apply(
        "s",
        h.spec().quiet_window(10 * MS).ignore_patterns(["sub/"]),
    );
    h.upsert("s", Generation(2), h.spec().quiet_window(10 * MS));
    h.engine.end_pass();
    assert_eq!(h.status("s").polled_dirs, 1, "{:?}", h.status("s"));
    assert_eq!(h.engine.syncs.guard_cookies_waiting().len(), 1, "guard on");
    h.after(20 * MS);
    assert_eq!(h.kinds_of(&f), [ChangeKind::Created], "the update's own");
    // Written after the update, while its cookie is still out.
    h.clock.advance(30 * MS);
    std::fs::write(&f, "longer now").unwrap();
    h.after(60 * MS);
    h.after(30 * MS);
    assert_eq!(h.kinds_of(&f), [ChangeKind::Modified], "the poll's finding");
}
