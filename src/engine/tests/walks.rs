//! Engine tests of walks in batches: directories watched a batch at a time,
//! their first reads done on a reader thread while the engine watches the
//! next batch and fills the last.

use super::*;
use crate::engine::walk::Batches;

/// `dirs` directories (three levels), each with two files, below `root`;
/// returns the directories.
fn tree(root: &Path, dirs: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for i in 0..dirs {
        let d = match i % 3 {
            0 => root.join(format!("a{i}")),
            1 => root.join(format!("a{}", i - 1)).join(format!("b{i}")),
            _ => root
                .join(format!("a{}", i - 2))
                .join(format!("b{}", i - 1))
                .join(format!("c{i}")),
        };
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("f1"), "1").unwrap();
        std::fs::write(d.join("f2"), "2").unwrap();
        out.push(d);
    }
    out
}

/// Every one of `dirs` is indexed and read (its two files at least), with
/// one OS watch each (besides the root's and its parent's), and the index
/// is consistent.
fn assert_all_read(h: &Harness, dirs: &[PathBuf]) {
    for d in dirs {
        assert!(
            h.engine
                .index
                .lookup(d)
                .and_then(|id| h.engine.index.get(id))
                .is_some_and(|n| n.complete() && n.entries().len() >= 2),
            "{} indexed and read",
            d.display()
        );
    }
    assert_eq!(
        h.fake.live(),
        dirs.len() + 2,
        "one watch per directory, root and its parent"
    );
    let broken = h.engine.check_invariants();
    assert!(broken.is_empty(), "{broken:?}");
}

/// A first walk in batches of 4 with the reader thread: every directory
/// watched once, read completely, nothing reported (a first walk reports
/// nothing); a subtree created later is walked the same way and all of it
/// reported.
#[test]
fn a_walk_in_batches_covers_and_reads_every_directory() {
    let mut h = harness(Config::default());
    h.engine.batches = Batches {
        size: 4,
        reader_after: 0,
    };
    let dirs = tree(&h.root, 30);
    h.apply("s", h.spec().quiet_window(10 * MS));
    assert_all_read(&h, &dirs);
    h.after(10 * MS);
    assert!(h.batches().is_empty(), "a first walk reports nothing");

    let new = h.root.join("new");
    std::fs::create_dir(&new).unwrap();
    let below = tree(&new, 12);
    let root = h.root.clone();
    h.event(&root, "new", Hint::Created);
    h.after(10 * MS);
    let batches = h.batches();
    for d in &below {
        for f in ["f1", "f2"] {
            assert!(
                kinds(&batches, &d.join(f)).contains(&ChangeKind::Created),
                "{} reported",
                d.join(f).display()
            );
        }
    }
    let broken = h.engine.check_invariants();
    assert!(broken.is_empty(), "{broken:?}");
}

/// A walk that starts one directory at a time and switches to batches
/// with the thread part way through covers everything once.
#[test]
fn a_walk_switches_to_batches_part_way() {
    let mut h = harness(Config::default());
    h.engine.batches = Batches {
        size: 4,
        reader_after: 5,
    };
    let dirs = tree(&h.root, 30);
    h.apply("s", h.spec().quiet_window(10 * MS));
    assert_eq!(h.engine.walk_threads, 1, "the walk's thread started once");
    assert_all_read(&h, &dirs);
}

/// A directory replaced by a file after its watch call and before its read
/// on the reader thread: dropped with its entry (the parent's next event
/// adds what is there then), the rest of the batch read as usual.
#[test]
fn a_directory_gone_between_its_watch_and_its_batched_read_is_dropped() {
    let mut h = harness(Config::default());
    h.apply("s", h.spec().quiet_window(10 * MS));
    h.engine.batches = Batches {
        size: 4,
        reader_after: 0,
    };
    let top = h.root.join("top");
    std::fs::create_dir(&top).unwrap();
    for name in ["a", "b", "c"] {
        std::fs::create_dir(top.join(name)).unwrap();
        std::fs::write(top.join(name).join("f"), name).unwrap();
    }
    // The top directory is watched (and read) first, then a, b, c in one
    // batch: the first of them to be watched goes.
    let calls = h.fake.calls();
    h.fake.after_watch_call(2, |dir| {
        std::fs::remove_dir_all(dir).unwrap();
        std::fs::write(dir, "now a file").unwrap();
    });
    let root = h.root.clone();
    h.event(&root, "top", Hint::Created);
    let watched = h.fake.calls() - calls;
    assert_eq!(watched, 4, "top, a, b and c watched");
    assert_eq!(h.engine.walk_threads, 1, "read on the walk's thread");
    let gone: Vec<&str> = ["a", "b", "c"]
        .into_iter()
        .filter(|n| top.join(n).is_file())
        .collect();
    assert_eq!(gone.len(), 1, "one of them replaced");
    let gone = top.join(gone[0]);
    assert!(
        h.engine.index.lookup(&gone).is_none(),
        "no node for {}",
        gone.display()
    );
    h.after(10 * MS);
    let batches = h.batches();
    for name in ["a", "b", "c"] {
        let f = top.join(name).join("f");
        if top.join(name) != gone {
            assert!(
                kinds(&batches, &f).contains(&ChangeKind::Created),
                "{} reported",
                f.display()
            );
        }
    }
    let broken = h.engine.check_invariants();
    assert!(broken.is_empty(), "{broken:?}");
}
