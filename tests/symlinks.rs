//! Symlinks: not followed by default; with `follow_symlinks`, followed to
//! directories, safe against loops, and looked at again when they change.
//!
//! Every check waits on `sync` (a cookie barrier), never on a sleep: after
//! it, the tree rebuilt from the change batches must equal a fresh listing
//! of the disk that follows links the same way.
#![cfg(unix)]

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use common::*;
use specwatch::{Backend, ChangeKind, FileType, Manager, Phase, WatchSpec};

both_backends!(
    links_are_entries_by_default,
    followed_links_report_what_they_lead_to,
    link_loops_are_not_followed,
    retargeted_removed_and_dangling_links,
    root_that_is_a_link_is_followed,
    // Holds the OS's events back: a test hook.
    #[cfg(feature = "test-hooks")]
    directory_replaced_by_a_link_while_its_events_wait,
);

fn follow(root: &Path) -> WatchSpec {
    spec(&[root]).follow_symlinks(true).editor_ignores(false)
}

/// Syncs, applies what was reported to `mirror`, and checks it against the
/// disk and the index against itself.
fn check(m: &Manager, c: &mut Collector, mirror: &mut Mirror, root: &Path, step: &str) {
    expect(m, c, mirror, root, step, &[]);
}

/// [`check`], and that each of `wanted` (a path below `root`, a kind) was
/// reported.
fn expect(
    m: &Manager,
    c: &mut Collector,
    mirror: &mut Mirror,
    root: &Path,
    step: &str,
    wanted: &[(&str, ChangeKind)],
) {
    m.sync("s", WAIT)
        .unwrap_or_else(|e| panic!("{step}: sync failed: {e}"));
    c.drain();
    for (p, kind) in wanted {
        assert!(
            c.has("s", &root.join(p), *kind),
            "{step}: {p} not reported as {kind:?}: {:?}",
            c.changes("s")
        );
    }
    for x in c.changes("s") {
        mirror.apply(&x);
    }
    let reported: Vec<String> = c
        .changes("s")
        .iter()
        .map(|x| format!("{:?} {:?} {}", x.kind, x.file_type, x.path.display()))
        .collect();
    c.clear();
    let disk = Mirror::of_disk_following(root);
    assert_eq!(
        *mirror, disk,
        "{step}: the tree rebuilt from changes differs from the disk; reported: {reported:?}"
    );
    let broken = index_problems(m);
    assert!(broken.is_empty(), "{step}: index inconsistent: {broken:?}");
}

fn links_are_entries_by_default(b: Backend) {
    let d = tmp();
    let root = d.path().join("root");
    let out = d.path().join("out");
    fs::create_dir_all(&root).unwrap();
    fs::create_dir_all(&out).unwrap();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[&root]).editor_ignores(false));
    symlink(&out, root.join("l")).unwrap();
    fs::write(out.join("f"), "x").unwrap();
    m.sync("s", WAIT).unwrap();
    c.drain();
    let changes = c.changes("s");
    assert!(
        changes.iter().any(|x| x.path == root.join("l")
            && x.kind == ChangeKind::Created
            && x.file_type == FileType::Symlink),
        "the link was not reported as a Symlink entry: {changes:?}"
    );
    assert!(
        changes
            .iter()
            .all(|x| x.path == root.join("l") || !x.path.starts_with(root.join("l"))),
        "a link was followed without follow_symlinks: {changes:?}"
    );
    assert_eq!(
        m.stats().unwrap().indexed_dirs,
        2,
        "root and its parent only"
    );
}

fn followed_links_report_what_they_lead_to(b: Backend) {
    let d = tmp();
    let root = d.path().join("root");
    let out = d.path().join("out");
    fs::create_dir_all(root.join("real/sub")).unwrap();
    fs::create_dir_all(out.join("deep")).unwrap();
    fs::write(root.join("real/sub/a"), "a").unwrap();
    fs::write(out.join("deep/b"), "b").unwrap();
    // A link to a sibling (relative) and one to a tree outside the root.
    symlink("real", root.join("twin")).unwrap();
    symlink(&out, root.join("ext")).unwrap();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", follow(&root));
    let mut mirror = Mirror::of_disk_following(&root);
    assert!(
        mirror.0.contains_key(&root.join("twin/sub/a"))
            && mirror.0.contains_key(&root.join("ext/deep/b")),
        "test setup: the following listing should see through both links"
    );
    check(&m, &mut c, &mut mirror, &root, "start");
    // The portable backend polls what is below the links, and says so.
    let status = m.status("s").expect("status");
    match (b, &status.phase) {
        (Backend::Native, Phase::Watching) => assert_eq!(status.polled_dirs, 0),
        // The poll backend polls by choice: watching, nothing degraded.
        (Backend::Poll { .. }, Phase::Watching) => assert_eq!(status.polled_dirs, 0),
        (Backend::Portable, Phase::Degraded { reason }) => {
            assert!(
                reason.contains("followed symlinks") && status.polled_dirs == 4,
                "portable: {} polled, reason {reason:?}",
                status.polled_dirs
            )
        }
        (b, p) => panic!("{b:?}: unexpected phase {p:?}"),
    }

    // A change in the shared directory is reported under both paths.
    fs::write(root.join("real/sub/new"), "n").unwrap();
    fs::write(out.join("deep/b"), "bb").unwrap();
    fs::create_dir(out.join("deep/made")).unwrap();
    fs::write(out.join("deep/made/c"), "c").unwrap();
    expect(
        &m,
        &mut c,
        &mut mirror,
        &root,
        "writes through links",
        &[
            ("real/sub/new", ChangeKind::Created),
            ("twin/sub/new", ChangeKind::Created),
            ("ext/deep/made/c", ChangeKind::Created),
            ("ext/deep/b", ChangeKind::Modified),
        ],
    );

    // Writing through the link path is seen under the real path too.
    fs::write(root.join("twin/sub/via"), "v").unwrap();
    fs::remove_file(root.join("real/sub/a")).unwrap();
    check(&m, &mut c, &mut mirror, &root, "writes via the link path");

    // One directory reached through two paths costs one OS watch (the
    // portable backend counts watch calls instead).
    let stats = m.stats().unwrap();
    assert!(
        b == Backend::Portable || stats.os_watches < stats.indexed_dirs,
        "aliases should share watches: {stats:?}"
    );
}

fn link_loops_are_not_followed(b: Backend) {
    let d = tmp();
    let root = d.path().join("root");
    fs::create_dir_all(root.join("a/b")).unwrap();
    fs::create_dir_all(root.join("x")).unwrap();
    fs::create_dir_all(root.join("y")).unwrap();
    symlink("..", root.join("a/up")).unwrap();
    symlink("../..", root.join("a/b/top")).unwrap();
    symlink(".", root.join("self")).unwrap();
    symlink("/", root.join("slash")).unwrap();
    symlink("knot", root.join("knot")).unwrap(); // ELOOP
    // Mutual links: x/l -> y and y/l -> x; only one level is followed
    // on each side before the walk comes back to a directory it is in.
    symlink("../y", root.join("x/l")).unwrap();
    symlink("../x", root.join("y/l")).unwrap();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", follow(&root));
    let mut mirror = Mirror::of_disk_following(&root);
    check(&m, &mut c, &mut mirror, &root, "start");
    // root's parent, root, a, a/b, x, y, x/l (= y), y/l (= x).
    let dirs = m.stats().unwrap().indexed_dirs;
    assert_eq!(dirs, 8, "directories indexed with loops present");
    for p in ["a/up", "a/b/top", "self", "slash", "knot", "x/l", "y/l"] {
        assert_eq!(
            mirror.0.get(&root.join(p)),
            Some(&FileType::Symlink),
            "{p} should be listed as a link"
        );
    }
    // Changes still arrive, under every path that is followed.
    fs::write(root.join("x/f"), "f").unwrap();
    fs::write(root.join("a/g"), "g").unwrap();
    let created = ChangeKind::Created;
    expect(
        &m,
        &mut c,
        &mut mirror,
        &root,
        "writes next to loops",
        &[("x/f", created), ("y/l/f", created), ("a/g", created)],
    );
    // A new loop made while watching is not followed either.
    symlink("../..", root.join("a/b/again")).unwrap();
    check(&m, &mut c, &mut mirror, &root, "new loop");
    assert_eq!(m.stats().unwrap().indexed_dirs, dirs);
}

fn retargeted_removed_and_dangling_links(b: Backend) {
    let d = tmp();
    let root = d.path().join("root");
    fs::create_dir_all(root.join("d1")).unwrap();
    fs::create_dir_all(root.join("d2/in")).unwrap();
    fs::write(root.join("d1/one"), "1").unwrap();
    fs::write(root.join("d2/in/two"), "2").unwrap();
    symlink("d1", root.join("l")).unwrap();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", follow(&root));
    let mut mirror = Mirror::of_disk_following(&root);
    check(&m, &mut c, &mut mirror, &root, "start");

    // Retarget atomically (ln -sfn): a new link renamed over the old one.
    symlink("d2", root.join("l.tmp")).unwrap();
    fs::rename(root.join("l.tmp"), root.join("l")).unwrap();
    check(&m, &mut c, &mut mirror, &root, "retarget");
    assert!(mirror.0.contains_key(&root.join("l/in/two")));

    // The target moves away: the link dangles, what it showed is gone.
    fs::rename(root.join("d2"), root.join("d3")).unwrap();
    check(&m, &mut c, &mut mirror, &root, "target moved away");
    assert!(!mirror.0.contains_key(&root.join("l/in")));

    // The dangling link's target appears again.
    fs::create_dir(root.join("d2")).unwrap();
    fs::write(root.join("d2/back"), "b").unwrap();
    check(&m, &mut c, &mut mirror, &root, "target recreated");
    assert!(mirror.0.contains_key(&root.join("l/back")));

    // The target is deleted, then the link is.
    fs::remove_dir_all(root.join("d2")).unwrap();
    check(&m, &mut c, &mut mirror, &root, "target deleted");
    fs::remove_file(root.join("l")).unwrap();
    symlink("d3", root.join("l2")).unwrap();
    check(&m, &mut c, &mut mirror, &root, "link removed, another made");
    fs::remove_file(root.join("l2")).unwrap();
    check(&m, &mut c, &mut mirror, &root, "last link removed");
    // root's parent, root, d1, d3, d3/in: nothing left of the links.
    assert_eq!(m.stats().unwrap().indexed_dirs, 5);
}

fn root_that_is_a_link_is_followed(b: Backend) {
    let d = tmp();
    let real = d.path().join("real");
    let root = d.path().join("root");
    fs::create_dir_all(real.join("sub")).unwrap();
    fs::write(real.join("sub/f"), "f").unwrap();
    symlink(&real, &root).unwrap();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", follow(&root));
    let mut mirror = Mirror::of_disk_following(&root);
    check(&m, &mut c, &mut mirror, &root, "start");
    fs::write(real.join("sub/g"), "g").unwrap();
    expect(
        &m,
        &mut c,
        &mut mirror,
        &root,
        "write below the root link",
        &[("sub/g", ChangeKind::Created)],
    );
    // Without follow_symlinks the same root is a plain link entry.
    m.apply("s", spec(&[&root])).unwrap();
    m.sync("s", WAIT).unwrap();
    assert_eq!(m.stats().unwrap().indexed_dirs, 1, "only the root's parent");
}

/// `d/g` moved away and `d` replaced by a link to its sibling `f`, all
/// before the engine sees the first event: when it looks at `d/g` for the
/// move, the path leads through the new link to `f/g`. Links are not
/// followed: nothing may be indexed or watched under `d/g`, and `f/g` keeps
/// its changes. (The portable backend asked notify to watch `d/g`; notify,
/// keyed by path, filed `f/g`'s watch under `d/g`, and dropped it when `d`
/// was found to be a link: `f/g`'s changes were lost from then on.)
#[cfg(feature = "test-hooks")]
fn directory_replaced_by_a_link_while_its_events_wait(b: Backend) {
    let d = tmp();
    let root = d.path().join("root");
    let out = d.path().join("out");
    fs::create_dir_all(root.join("d/g")).unwrap();
    fs::create_dir_all(root.join("f/g")).unwrap();
    fs::create_dir_all(&out).unwrap();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[&root]).editor_ignores(false));
    let mut mirror = Mirror::of_disk(&root);
    let mut settle = |c: &mut Collector, step: &str| {
        m.sync("s", WAIT)
            .unwrap_or_else(|e| panic!("{step}: sync failed: {e}"));
        c.drain();
        for x in c.changes("s") {
            mirror.apply(&x);
        }
        assert_eq!(
            mirror,
            Mirror::of_disk(&root),
            "{step}: the tree rebuilt from changes differs from the disk; reported: {:?}",
            c.changes("s")
        );
        let broken = index_problems(&m);
        assert!(broken.is_empty(), "{step}: index inconsistent: {broken:?}");
    };
    // The engine sees the events once the disk has its final shape.
    m.pause_os_reader(true);
    fs::rename(root.join("d/g"), out.join("g")).unwrap();
    fs::rename(root.join("d"), out.join("d")).unwrap();
    symlink("f", root.join("d")).unwrap();
    m.pause_os_reader(false);
    settle(&mut c, "d replaced by a link to f");
    c.clear();
    fs::write(root.join("f/g/x"), "x").unwrap();
    fs::create_dir(root.join("f/g/sub")).unwrap();
    fs::write(root.join("f/g/sub/y"), "y").unwrap();
    settle(&mut c, "writes in f/g");
    for p in ["f/g/x", "f/g/sub/y"] {
        assert!(
            c.has("s", &root.join(p), ChangeKind::Created),
            "{p} not reported: {:?}",
            c.changes("s")
        );
    }
}
