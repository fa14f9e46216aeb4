//! `WatchOptions::ignore_files`: `.gitignore`, `.ignore`,
//! `.git/info/exclude` and git's global excludes file honoured with git's
//! semantics, `.dockerignore` and `.tiltignore` with Docker's, pruning OS
//! watches, and followed when they change.

mod common;

use std::fs;
use std::path::Path;

use common::*;
use specwatch::{Backend, ChangeKind, IgnoreFiles, Manager, WatchSpec};
use std::path::PathBuf;

both_backends!(
    nested_gitignore_files_decide_nearest_first,
    a_changed_gitignore_hides_and_shows_what_it_names,
    a_dockerignore_at_the_root_decides_and_is_followed,
    a_tiltignore_above_the_root_applies_and_is_followed,
    git_global_excludes_file_applies_and_is_followed,
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
    // sub/ is older than the watch.
    if skip_old_subdirs_on_wine(b) {
        return;
    }
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
    wait_created(&mut c, "s", &[&keep]);
    // Every change made before is delivered once a sync returns (a marker
    // file is not enough under Wine, whose events of different
    // directories may come out of order).
    m.sync("s", WAIT).unwrap();
    c.drain();
    let marker = Path::new("");
    let got = paths_besides(&c, "s", marker);
    assert_eq!(got, vec![keep], "only what no ignore file ignores");
    if b == Backend::Native {
        // The root's parent, the root and sub: build/ is pruned.
        assert_eq!(m.stats().unwrap().os_watches, 3, "{:?}", m.stats().unwrap());
    }
}

fn a_changed_gitignore_hides_and_shows_what_it_names(b: Backend) {
    // gen/inner/ is older than the watch.
    if skip_old_subdirs_on_wine(b) {
        return;
    }
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
    // Every change made before is delivered once a sync returns (a marker
    // file is not enough under Wine, whose events of different
    // directories may come out of order).
    m.sync("s", WAIT).unwrap();
    c.drain();
    let marker = Path::new("");
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
    let m = manager(Backend::Auto);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec_with_files(&src));
    fs::write(src.join("a.tmp"), "x").unwrap();
    fs::write(src.join("b.excl"), "x").unwrap();
    let kept = src.join("c.rs");
    fs::write(&kept, "x").unwrap();
    wait_created(&mut c, "s", &[&kept]);
    // Every change made before is delivered once a sync returns (a marker
    // file is not enough under Wine, whose events of different
    // directories may come out of order).
    m.sync("s", WAIT).unwrap();
    c.drain();
    let marker = Path::new("");
    let got = paths_besides(&c, "s", marker);
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
    let m = manager(Backend::Auto);
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
    let m = manager(Backend::Auto);
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
    let m = manager(Backend::Auto);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec_with_files(root));
    fs::remove_dir_all(root.join("sub")).unwrap();
    c.barrier("s", root);
    // On Windows the name goes when a poller's handle on it closes.
    retry_while_handles_open("create directory sub over a removed one", || {
        fs::create_dir(root.join("sub"))
    });
    let log = root.join("sub/a.log");
    fs::write(&log, "x").unwrap();
    c.wait("sub/a.log created: nothing on disk ignores it", |c| {
        c.has("s", &log, ChangeKind::Created)
    });
}

/// Waits until `spec` reported each of `paths` created (the events of
/// several directories may come in any order: under Wine even a sync
/// returned before one of them came).
fn wait_created(c: &mut Collector, spec: &str, paths: &[&Path]) {
    c.wait(&format!("{paths:?} created in spec {spec}"), |c| {
        paths.iter().all(|p| c.has(spec, p, ChangeKind::Created))
    });
}

/// What `spec` reported (but the barrier's `marker`), sorted.
fn sorted_besides(c: &Collector, spec: &str, marker: &Path) -> Vec<PathBuf> {
    let mut got = paths_besides(c, spec, marker);
    got.sort();
    got
}

fn a_dockerignore_at_the_root_decides_and_is_followed(b: Backend) {
    if skip_old_subdirs_on_wine(b) {
        return;
    }
    let d = tmp();
    let root = d.path();
    for dir in ["build/keep", "build/other", "sub"] {
        fs::create_dir_all(root.join(dir)).unwrap();
    }
    let dockerignore = root.join(".dockerignore");
    fs::write(&dockerignore, "# context\nbuild\n!build/keep\n*.log\n").unwrap();
    // Docker reads only the context's own file: this one is a plain file.
    fs::write(root.join("sub/.dockerignore"), "*\n").unwrap();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[root]).ignore_files(IgnoreFiles::DOCKER));
    for p in [
        "build/x",
        "build/other/o",
        "build/keep/k",
        "a.log",
        "sub/a.log",
        "sub/y",
    ] {
        fs::write(root.join(p), "x").unwrap();
    }
    wait_created(
        &mut c,
        "s",
        &[
            &root.join("build/keep/k"),
            &root.join("sub/a.log"),
            &root.join("sub/y"),
        ],
    );
    // Every change made before is delivered once a sync returns (a marker
    // file is not enough under Wine, whose events of different
    // directories may come out of order).
    m.sync("s", WAIT).unwrap();
    c.drain();
    let marker = Path::new("");
    let want: Vec<PathBuf> = ["build/keep/k", "sub/a.log", "sub/y"]
        .iter()
        .map(|p| root.join(p))
        .collect();
    assert_eq!(sorted_besides(&c, "s", marker), want, "Docker's verdicts");
    if b == Backend::Native {
        // The root's parent, the root, sub, build (an exception reaches
        // below it) and build/keep; build/other is pruned.
        assert_eq!(m.stats().unwrap().os_watches, 5, "{:?}", m.stats().unwrap());
    }
    // Edited while watching, with a line that is no pattern: the others
    // apply, and the status names the file and the line.
    c.clear();
    fs::write(&dockerignore, "sub\n[oops\n").unwrap();
    let (sub, x, log) = (root.join("sub"), root.join("build/x"), root.join("a.log"));
    c.wait("sub/ hidden, build/x and a.log shown", |c| {
        c.has("s", &sub, ChangeKind::Removed)
            && c.has("s", &root.join("sub/y"), ChangeKind::Removed)
            && c.has("s", &x, ChangeKind::Created)
            && c.has("s", &log, ChangeKind::Created)
    });
    // The status is published once the engine's pass ends, which may be
    // after its batch was delivered.
    c.wait("last_error naming .dockerignore, line 2 and [oops", |_| {
        m.status("s").is_some_and(|s| {
            s.last_error.as_deref().is_some_and(|err| {
                err.contains(".dockerignore") && err.contains("line 2") && err.contains("[oops")
            })
        })
    });
    fs::write(&dockerignore, "sub\n").unwrap();
    c.wait("the error gone once the file is fixed", |_| {
        m.status("s").is_some_and(|s| s.last_error.is_none())
    });
    fs::remove_file(&dockerignore).unwrap();
    c.wait("sub/ shown again with what it holds", |c| {
        c.has("s", &sub, ChangeKind::Created)
            && c.has("s", &root.join("sub/y"), ChangeKind::Created)
    });
    let broken = index_problems(&m);
    assert!(broken.is_empty(), "{broken:?}");
}

/// `.tiltignore` beside the Tiltfile, at the repository's top above the
/// root; git's files mean nothing to a spec that asks for Tilt's only.
fn a_tiltignore_above_the_root_applies_and_is_followed(b: Backend) {
    let d = tmp();
    let repo = d.path();
    fs::create_dir_all(repo.join(".git")).unwrap();
    let src = repo.join("src");
    fs::create_dir_all(src.join("gen")).unwrap();
    let tiltignore = repo.join(".tiltignore");
    fs::write(&tiltignore, "src/gen\n").unwrap();
    fs::write(repo.join(".gitignore"), "*.rs\n").unwrap();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[&src]).ignore_files(IgnoreFiles::TILT));
    let (gen_file, rs) = (src.join("gen/x"), src.join("a.rs"));
    fs::write(&gen_file, "x").unwrap();
    fs::write(&rs, "x").unwrap();
    wait_created(&mut c, "s", &[&rs]);
    // Every change made before is delivered once a sync returns (a marker
    // file is not enough under Wine, whose events of different
    // directories may come out of order).
    m.sync("s", WAIT).unwrap();
    c.drain();
    let marker = Path::new("");
    assert_eq!(
        sorted_besides(&c, "s", marker),
        vec![rs],
        "gen/ ignored, *.rs not"
    );
    // Outside the watched tree: looked at on `sync` (and every second).
    c.clear();
    fs::write(&tiltignore, "").unwrap();
    m.sync("s", WAIT).unwrap();
    c.wait("src/gen and gen/x shown", |c| {
        c.has("s", &src.join("gen"), ChangeKind::Created)
            && c.has("s", &gen_file, ChangeKind::Created)
    });
}

/// Git's global excludes file, where the manager was told it is (never
/// the user's own in a test).
fn git_global_excludes_file_applies_and_is_followed(b: Backend) {
    if skip_old_subdirs_on_wine(b) {
        return;
    }
    let d = tmp();
    let root = d.path().join("repo");
    let home = d.path().join("home");
    fs::create_dir_all(root.join(".git")).unwrap();
    fs::create_dir_all(root.join("sub")).unwrap();
    fs::create_dir_all(&home).unwrap();
    let global = home.join("ignore");
    fs::write(&global, "*.glob\n/top.only\n").unwrap();
    let m = Manager::builder()
        .backend(b)
        .git_excludes_file(Some(global.clone()))
        .build()
        .unwrap();
    let mut c = Collector::new(m.subscribe());
    start(&m, "git", spec(&[&root]).ignore_files(true));
    start(
        &m,
        "docker",
        spec(&[&root]).ignore_files(IgnoreFiles::DOCKER),
    );
    let (glob, deep_glob) = (root.join("a.glob"), root.join("sub/b.glob"));
    let (top, deep_top) = (root.join("top.only"), root.join("sub/top.only"));
    for f in [&glob, &deep_glob, &top, &deep_top] {
        fs::write(f, "x").unwrap();
    }
    wait_created(&mut c, "git", &[&deep_top]);
    wait_created(&mut c, "docker", &[&glob, &deep_glob, &top, &deep_top]);
    for s in ["git", "docker"] {
        m.sync(s, WAIT).unwrap();
    }
    c.drain();
    let none = Path::new("");
    assert_eq!(
        sorted_besides(&c, "git", none),
        vec![deep_top.clone()],
        "*.glob anywhere, /top.only from the repository's top"
    );
    assert_eq!(
        sorted_besides(&c, "docker", none).len(),
        4,
        "a spec without git's rules sees all"
    );
    c.clear();
    fs::write(&global, "").unwrap();
    m.sync("git", WAIT).unwrap();
    c.wait("the files it named shown", |c| {
        [&glob, &deep_glob, &top]
            .iter()
            .all(|p| c.has("git", p, ChangeKind::Created))
    });
}
