//! `WatchOptions::ignore_files`: `.gitignore`, `.ignore` and
//! `.git/info/exclude` honoured with git's semantics, pruning OS watches,
//! and followed when they change.

mod common;

use std::fs;
use std::path::Path;

use common::*;
use specwatch::{Backend, ChangeKind, Manager, WatchSpec};

both_backends!(
    nested_gitignore_files_decide_nearest_first,
    a_changed_gitignore_hides_and_shows_what_it_names,
);

/// The paths `spec` reported, in order, but the barrier's `marker`.
fn paths_besides(c: &Collector, spec: &str, marker: &Path) -> Vec<std::path::PathBuf> {
    c.changes(spec)
        .into_iter()
        .map(|x| x.path)
        .filter(|p| p != marker)
        .collect()
}

fn spec_with_files(root: &Path) -> WatchSpec {
    spec(&[root]).ignore_files(true)
}

fn nested_gitignore_files_decide_nearest_first(b: Backend) {
    let d = tmp();
    let root = d.path();
    fs::create_dir_all(root.join("sub")).unwrap();
    fs::create_dir_all(root.join("build/deep")).unwrap();
    fs::write(root.join(".gitignore"), "*.log\nbuild/\n").unwrap();
    fs::write(root.join("sub/.gitignore"), "!keep.log\n").unwrap();
    fs::write(root.join(".ignore"), "*.gen\n").unwrap();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec_with_files(root));
    for p in ["a.log", "sub/b.log", "build/deep/x", "c.gen"] {
        fs::write(root.join(p), "x").unwrap();
    }
    let keep = root.join("sub/keep.log");
    fs::write(&keep, "x").unwrap();
    let marker = c.barrier("s", root);
    let got = paths_besides(&c, "s", &marker);
    assert_eq!(got, vec![keep], "only what no ignore file ignores");
    if b == Backend::Native {
        // The root's parent, the root and sub: build/ is pruned.
        assert_eq!(m.stats().unwrap().os_watches, 3, "{:?}", m.stats().unwrap());
    }
}

fn a_changed_gitignore_hides_and_shows_what_it_names(b: Backend) {
    let d = tmp();
    let root = d.path();
    fs::create_dir_all(root.join("gen/inner")).unwrap();
    fs::write(root.join("gen/inner/f"), "x").unwrap();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec_with_files(root));
    let gen_dir = root.join("gen");
    let f = root.join("gen/inner/f");
    // Ignored from now on: reported removed, with what it held.
    fs::write(root.join(".gitignore"), "gen/\n").unwrap();
    c.wait("gen/ and what it holds reported removed", |c| {
        c.has("s", &gen_dir, ChangeKind::Removed) && c.has("s", &f, ChangeKind::Removed)
    });
    if b == Backend::Native {
        c.wait("gen/'s watches dropped", |_| {
            m.stats().unwrap().os_watches == 2
        });
    }
    fs::write(root.join("gen/new"), "x").unwrap();
    c.clear();
    let marker = c.barrier("s", root);
    assert!(
        c.changes("s").iter().all(|x| x.path == marker),
        "nothing below an ignored directory: {:?}",
        c.changes("s")
    );
    // Not ignored any more: reported created, with what it holds now.
    fs::remove_file(root.join(".gitignore")).unwrap();
    let new = root.join("gen/new");
    c.wait("gen/ and what it holds reported created again", |c| {
        c.has("s", &gen_dir, ChangeKind::Created)
            && c.has("s", &f, ChangeKind::Created)
            && c.has("s", &new, ChangeKind::Created)
    });
    let later = root.join("gen/inner/later");
    fs::write(&later, "x").unwrap();
    c.wait("a write below it, watched again", |c| {
        c.has("s", &later, ChangeKind::Created)
    });
    let broken = index_problems(&m);
    assert!(broken.is_empty(), "{broken:?}");
}

#[test]
fn files_above_the_root_and_info_exclude_apply() {
    let d = tmp();
    let repo = d.path();
    fs::create_dir_all(repo.join(".git/info")).unwrap();
    fs::write(repo.join(".git/info/exclude"), "*.excl\n").unwrap();
    fs::write(repo.join(".gitignore"), "*.tmp\n").unwrap();
    let src = repo.join("src");
    fs::create_dir(&src).unwrap();
    let m = Manager::new().unwrap();
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec_with_files(&src));
    fs::write(src.join("a.tmp"), "x").unwrap();
    fs::write(src.join("b.excl"), "x").unwrap();
    let kept = src.join("c.rs");
    fs::write(&kept, "x").unwrap();
    let marker = c.barrier("s", &src);
    let got = paths_besides(&c, "s", &marker);
    assert_eq!(got, vec![kept]);
}

/// Ignore files no OS watch covers (above a root; `.git/info/exclude`,
/// in the pruned `.git`) are followed too: looked at every second and at
/// each `sync`, which this test uses as its barrier.
#[test]
fn files_outside_the_watched_tree_are_followed() {
    let d = tmp();
    let repo = d.path();
    fs::create_dir_all(repo.join(".git/info")).unwrap();
    let exclude = repo.join(".git/info/exclude");
    fs::write(&exclude, "*.excl\n").unwrap();
    fs::write(repo.join(".gitignore"), "*.tmp\n").unwrap();
    let src = repo.join("src");
    fs::create_dir(&src).unwrap();
    let (tmp_file, excl, rs) = (src.join("a.tmp"), src.join("b.excl"), src.join("c.rs"));
    for f in [&tmp_file, &excl, &rs] {
        fs::write(f, "x").unwrap();
    }
    let m = Manager::new().unwrap();
    let mut c = Collector::new(m.subscribe());
    start(&m, "below", spec_with_files(&src));
    start(&m, "top", spec_with_files(repo));
    let synced = |c: &mut Collector| {
        for s in ["below", "top"] {
            m.sync(s, WAIT).unwrap();
        }
        c.drain();
    };
    synced(&mut c);
    c.clear();
    // Above `below`'s root, at `top`'s root.
    fs::write(repo.join(".gitignore"), "").unwrap();
    synced(&mut c);
    assert_eq!(
        c.kinds("below", &tmp_file),
        [ChangeKind::Created],
        ".gitignore above the root"
    );
    assert_eq!(
        c.kinds("top", &tmp_file),
        [ChangeKind::Created],
        ".gitignore at the root"
    );
    c.clear();
    fs::write(&exclude, "*.rs\n").unwrap();
    synced(&mut c);
    for s in ["below", "top"] {
        assert_eq!(
            c.kinds(s, &excl),
            [ChangeKind::Created],
            "{s}: no longer excluded"
        );
        assert_eq!(c.kinds(s, &rs), [ChangeKind::Removed], "{s}: excluded now");
    }
    // Without a sync: the once-a-second look finds it.
    c.clear();
    fs::remove_file(&exclude).unwrap();
    c.wait("c.rs shown again once exclude is gone", |c| {
        c.has("below", &rs, ChangeKind::Created) && c.has("top", &rs, ChangeKind::Created)
    });
}

#[test]
fn without_the_option_ignore_files_mean_nothing() {
    let d = tmp();
    let root = d.path();
    fs::write(root.join(".gitignore"), "*.log\n").unwrap();
    let m = Manager::new().unwrap();
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[root]));
    let log = root.join("a.log");
    fs::write(&log, "x").unwrap();
    c.wait("a.log reported", |c| c.has("s", &log, ChangeKind::Created));
}

/// The rules of a `.gitignore` go with its directory: one made again at
/// that path without it ignores nothing.
#[test]
fn the_rules_of_a_removed_directorys_gitignore_go_with_it() {
    let d = tmp();
    let root = d.path();
    fs::create_dir_all(root.join("sub")).unwrap();
    fs::write(root.join("sub/.gitignore"), "*.log\n").unwrap();
    let m = Manager::new().unwrap();
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec_with_files(root));
    fs::remove_dir_all(root.join("sub")).unwrap();
    c.barrier("s", root);
    fs::create_dir(root.join("sub")).unwrap();
    let log = root.join("sub/a.log");
    fs::write(&log, "x").unwrap();
    c.wait("sub/a.log created: nothing on disk ignores it", |c| {
        c.has("s", &log, ChangeKind::Created)
    });
}
