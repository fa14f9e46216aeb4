//! Renames the OS pairs (`Change::from`): inotify by cookie, Windows by
//! its old and new names; polling never pairs. A tree rebuilt from the
//! batches, moving what it held for `from` instead of reading the new
//! path, is the tree on disk.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use specwatch::{Backend, Change, ChangeBatch, ChangeKind, FileType, WatchSpec};

both_backends!(
    a_rename_says_where_from,
    a_moved_directory_carries_its_entries,
    a_tree_is_rebuilt_from_moves
);

/// Whether `b` pairs renames here: the OS's events do (inotify, and
/// `ReadDirectoryChangesW` through notify); FSEvents and kqueue do not,
/// nor does polling.
fn pairs(b: Backend) -> bool {
    b == Backend::Native || (b == Backend::Portable && cfg!(any(target_os = "linux", windows)))
}

/// A spec whose batches stay open long enough that the two ends of a
/// rename, handed over one after the other, always fall in one (the
/// pairing is what these tests are about, not the quiet window).
fn roomy(root: &Path) -> WatchSpec {
    spec(&[root])
        .quiet_window(Duration::from_millis(300))
        .max_delay(Duration::from_secs(10))
}

/// Renames `from` to `to` (on Windows, tried again while a poller's
/// handle on it is open).
fn rename(from: &Path, to: &Path) {
    retry_while_handles_open(&format!("rename {from:?} to {to:?}"), || {
        fs::rename(from, to)
    });
}

/// Where the change of `path` says its entry came from (the last batch's
/// that names it); panics when no change names it.
fn from_of(changes: &[Change], path: &Path) -> Option<PathBuf> {
    changes
        .iter()
        .rev()
        .find(|c| c.path == path)
        .unwrap_or_else(|| panic!("no change of {path:?} in {changes:#?}"))
        .from
        .as_deref()
        .map(Path::to_path_buf)
}

/// Creates `dirs` (and `files`, each holding its own name) after the
/// watch started, and waits until every spec of `specs` reported them
/// (Wine reports nothing in a subdirectory older than its watch), so
/// that their batches are closed before the moves.
fn populate(
    m: &specwatch::Manager,
    c: &mut Collector,
    specs: &[&str],
    root: &Path,
    (dirs, files): (&[&str], &[&str]),
) {
    for d in dirs {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    for f in files {
        fs::write(root.join(f), f.as_bytes()).unwrap();
    }
    for s in specs {
        m.sync(s, WAIT).unwrap();
        for p in dirs.iter().chain(files) {
            let p = root.join(p);
            c.wait(&format!("{p:?} reported to {s} before the moves"), |c| {
                c.has(s, &p, ChangeKind::Created)
            });
        }
    }
    c.clear();
}

fn a_rename_says_where_from(b: Backend) {
    let d = tmp();
    let outside = tmp();
    let root = d.path();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", roomy(root));
    populate(
        &m,
        &mut c,
        &["s"],
        root,
        (&["src", "lib"], &["a.rs", "src/m.rs", "out.rs"]),
    );
    fs::write(outside.path().join("in.rs"), "in").unwrap();
    rename(&root.join("a.rs"), &root.join("b.rs"));
    rename(&root.join("src/m.rs"), &root.join("lib/n.rs"));
    rename(&outside.path().join("in.rs"), &root.join("in.rs"));
    rename(&root.join("out.rs"), &outside.path().join("out.rs"));
    m.sync("s", WAIT).unwrap();
    c.drain();
    let ch = c.changes("s");
    let want = |p: &str| pairs(b).then(|| root.join(p));
    assert_eq!(from_of(&ch, &root.join("b.rs")), want("a.rs"), "{ch:#?}");
    assert_eq!(from_of(&ch, &root.join("lib/n.rs")), want("src/m.rs"));
    // The sources are removed, and say nothing of where they went.
    assert_eq!(c.kinds("s", &root.join("a.rs")), [ChangeKind::Removed]);
    assert_eq!(from_of(&ch, &root.join("a.rs")), None);
    // Across the edge of the tree: created, removed.
    assert_eq!(c.kinds("s", &root.join("in.rs")), [ChangeKind::Created]);
    assert_eq!(from_of(&ch, &root.join("in.rs")), None);
    assert_eq!(c.kinds("s", &root.join("out.rs")), [ChangeKind::Removed]);
}

/// A manager watching `root` with two specs, `s` and `whole` (which
/// collapses moves), once `tree` is made there and reported to both.
fn plain_and_collapsed(
    b: Backend,
    root: &Path,
    tree: (&[&str], &[&str]),
) -> (specwatch::Manager, Collector) {
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", roomy(root));
    start(&m, "whole", roomy(root).collapse_moves(true));
    populate(&m, &mut c, &["s", "whole"], root, tree);
    (m, c)
}

fn a_moved_directory_carries_its_entries(b: Backend) {
    let d = tmp();
    let root = d.path();
    let (m, mut c) = plain_and_collapsed(b, root, (&["d/s"], &["d/x", "d/s/y"]));
    rename(&root.join("d"), &root.join("e"));
    m.sync("s", WAIT).unwrap();
    m.sync("whole", WAIT).unwrap();
    c.drain();
    let said = |spec: &str| -> Vec<(PathBuf, ChangeKind, Option<PathBuf>)> {
        c.changes(spec)
            .into_iter()
            .map(|ch| {
                let rel = |p: &Path| p.strip_prefix(root).unwrap().to_path_buf();
                (rel(&ch.path), ch.kind, ch.from.as_deref().map(rel))
            })
            .collect()
    };
    let p = |x: &str| PathBuf::from(x);
    let from = |x: &str| pairs(b).then(|| PathBuf::from(x));
    let (removed, created) = (ChangeKind::Removed, ChangeKind::Created);
    assert_eq!(
        said("s"),
        [
            (p("d"), removed, None),
            (p("d/s"), removed, None),
            (p("d/s/y"), removed, None),
            (p("d/x"), removed, None),
            (p("e"), created, from("d")),
            (p("e/s"), created, from("d/s")),
            (p("e/s/y"), created, from("d/s/y")),
            (p("e/x"), created, from("d/x")),
        ]
    );
    // Collapsed: the directory's own changes say it all.
    let whole = said("whole");
    if pairs(b) {
        assert_eq!(
            whole,
            [(p("d"), removed, None), (p("e"), created, from("d"))]
        );
    } else {
        assert_eq!(whole, said("s"));
    }
}

/// Each path's type and, for a file, its bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Tree(BTreeMap<PathBuf, (FileType, Option<Vec<u8>>)>);

impl Tree {
    fn of_disk(root: &Path) -> Tree {
        let mut t = Tree::default();
        for (p, ft) in Mirror::of_disk(root).0 {
            let bytes = (ft == FileType::File).then(|| fs::read(&p).unwrap());
            t.0.insert(p, (ft, bytes));
        }
        t
    }

    fn remove_below(&mut self, p: &Path) {
        self.0.retain(|k, _| k == p || !k.starts_with(p));
    }

    /// Applies one batch against the tree before it: each change with
    /// `from` takes what `from` held (a directory of a spec that
    /// collapses moves: the tree below it too), without reading the
    /// disk; the others read what they name.
    fn apply(&mut self, batch: &ChangeBatch, collapsed: bool) -> usize {
        let before = self.clone();
        let mut moved = 0;
        for c in batch.changes.iter().filter(|c| c.from.is_some()) {
            let from = c.from.as_deref().unwrap();
            let entry = before.0.get(from).cloned();
            let entry = entry.unwrap_or_else(|| panic!("{c:?}: nothing was at {from:?}"));
            self.remove_below(&c.path);
            if collapsed && entry.0 == FileType::Dir {
                for (p, e) in before.0.range(from.to_path_buf()..) {
                    let Ok(rel) = p.strip_prefix(from) else {
                        break;
                    };
                    if !rel.as_os_str().is_empty() {
                        self.0.insert(c.path.join(rel), e.clone());
                    }
                }
            }
            self.0.insert(c.path.clone(), entry);
            moved += 1;
        }
        for c in batch.changes.iter().filter(|c| c.from.is_none()) {
            match c.kind {
                ChangeKind::Removed => {
                    self.0.remove(&c.path);
                    self.remove_below(&c.path);
                }
                _ => {
                    if c.file_type != FileType::Dir {
                        self.remove_below(&c.path);
                    }
                    let bytes = (c.file_type == FileType::File).then(|| fs::read(&c.path).unwrap());
                    self.0.insert(c.path.clone(), (c.file_type, bytes));
                }
            }
        }
        moved
    }
}

fn a_tree_is_rebuilt_from_moves(b: Backend) {
    let d = tmp();
    let outside = tmp();
    let root = d.path();
    let (m, mut c) = plain_and_collapsed(
        b,
        root,
        (
            &["a/b", "k", "x/y"],
            &[
                "a/b/f1", "a/b/f2", "a/g", "k/1", "k/2", "top", "swap1", "swap2", "w",
            ],
        ),
    );
    let mut plain = Tree::of_disk(root);
    let mut whole = plain.clone();
    let mv = |f: &str, t: &str| rename(&root.join(f), &root.join(t));
    mv("a/b", "a/c"); // a directory, within its parent
    mv("a/c", "k/c"); // and on, elsewhere
    mv("k/1", "k/one"); // a file
    mv("k/one", "uno"); // and on
    mv("swap1", "tmp"); // a swap through a third name
    mv("swap2", "swap1");
    mv("tmp", "swap2");
    mv("top", "k/2"); // over another file
    mv("w", "w2"); // then written
    fs::write(root.join("w2"), "written after its move").unwrap();
    if b == Backend::Portable && wine() {
        note(
            "*** SKIPPED part: a file new in a moved directory (Wine names a renamed directory's contents by its old path: tests/wine_fidelity.rs)",
        );
    } else {
        fs::write(root.join("k/c/f3"), "new in a moved directory").unwrap();
    }
    rename(&root.join("x/y"), &outside.path().join("y"));
    m.sync("s", WAIT).unwrap();
    m.sync("whole", WAIT).unwrap();
    c.drain();
    let disk = Tree::of_disk(root);
    let mut moves = Vec::new();
    for (spec, tree, collapsed) in [("s", &mut plain, false), ("whole", &mut whole, true)] {
        let mut n = 0;
        for batch in c.batches.get(spec).into_iter().flatten() {
            n += tree.apply(batch, collapsed);
        }
        assert_eq!(
            *tree, disk,
            "spec {spec}: the tree rebuilt from its batches"
        );
        moves.push(n);
    }
    if pairs(b) {
        assert!(moves[0] > 0 && moves[1] > 0, "no move reported: {moves:?}");
        // (A chain of moves is paired only where the engine looked at
        // each name before the next move: it may see the end state only.
        // The rebuilt tree is right either way.)
        let ch = c.changes("s");
        assert_eq!(from_of(&ch, &root.join("swap1")), Some(root.join("swap2")));
        assert_eq!(from_of(&ch, &root.join("k/2")), Some(root.join("top")));
        assert_eq!(
            from_of(&ch, &root.join("w2")),
            None,
            "written after its move"
        );
    } else {
        assert_eq!(moves, [0, 0], "{b:?} does not pair renames");
    }
}
