//! `WatchOptions::skip_same_content`: a save that wrote the same bytes, or
//! a `touch`, is no change for a spec that compares contents; new bytes
//! are, with their hash; a spec without the option reports them all.

mod common;

use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

use common::*;
use specwatch::{Backend, ChangeKind, ContentHash};

both_backends!(
    same_bytes_are_no_change_new_bytes_come_with_their_hash,
    a_checkout_that_rewrote_files_unchanged_is_no_change
);

/// A `touch`: the modification time moves, the bytes stay.
fn touch(path: &Path) {
    let later = SystemTime::now() + Duration::from_secs(5);
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(later)
        .unwrap();
}

/// Writes `bytes` over the start of `path` without truncating it first:
/// a file of that length never holds anything else, at any moment (a
/// poll between a truncation and the write would see an empty file: a
/// real change, and reported).
fn write_in_place(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut f = fs::File::options().write(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

/// Renames `from` over `to`. Under Wine a rename over a file that the
/// engine is reading (to hash it) can fail for as long as it reads.
fn rename_over(from: &Path, to: &Path) {
    retry_while_handles_open(&format!("rename {from:?} over {to:?}"), || {
        fs::rename(from, to)
    });
}

/// The hash on the last change `spec` reported of `path` (`None`: none
/// reported).
fn last_hash(c: &Collector, spec: &str, path: &Path) -> Option<Option<ContentHash>> {
    hash_of(c, spec, path).last().copied()
}

fn hash_of(c: &Collector, spec: &str, path: &Path) -> Vec<Option<ContentHash>> {
    c.changes(spec)
        .into_iter()
        .filter(|ch| ch.path == path)
        .map(|ch| ch.hash)
        .collect()
}

fn same_bytes_are_no_change_new_bytes_come_with_their_hash(b: Backend) {
    let d = tmp();
    let root = d.path();
    fs::create_dir(root.join("d")).unwrap();
    for (f, c) in [
        ("a.rs", "fn a() {}"),
        ("b.rs", "fn b() {}"),
        ("d/c.rs", "c"),
    ] {
        fs::write(root.join(f), c).unwrap();
    }
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "same", spec(&[root]).skip_same_content(true));
    start(&m, "all", spec(&[root]));

    // The same bytes written again, a touch, and (on Unix) a chmod.
    write_in_place(&root.join("a.rs"), b"fn a() {}");
    touch(&root.join("b.rs"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(root.join("d/c.rs"), fs::Permissions::from_mode(0o600)).unwrap();
    }
    c.barrier("same", root);
    c.barrier("all", root);
    for f in ["a.rs", "b.rs"] {
        assert!(
            c.has("all", &root.join(f), ChangeKind::Modified),
            "{f}: the spec without the option reports it (the test's control)"
        );
        assert_eq!(
            c.kinds("same", &root.join(f)),
            vec![],
            "{f}: same bytes, no change for the spec that compares contents"
        );
    }
    assert_eq!(c.kinds("same", &root.join("d/c.rs")), vec![]);

    // New bytes: reported, with their hash; a new file too. (Written
    // through a truncation: a poll may see the file empty in between, a
    // real change of its own, so what counts is the last hash reported.)
    let (a, new) = (root.join("a.rs"), root.join("d/new.rs"));
    fs::write(&a, "fn a() { changed() }").unwrap();
    fs::write(&new, "new").unwrap();
    let (ha, hn) = (
        ContentHash::of(b"fn a() { changed() }"),
        ContentHash::of(b"new"),
    );
    c.wait(
        "a.rs and d/new.rs with their new hashes, in spec same",
        |c| {
            last_hash(c, "same", &a) == Some(Some(ha))
                && last_hash(c, "same", &new) == Some(Some(hn))
        },
    );
    assert!(
        c.changes("all").iter().all(|ch| ch.hash.is_none()),
        "no hashes for a spec that does not compare contents"
    );
    // And back to the old bytes: a change from what was last reported.
    fs::write(&a, "fn a() {}").unwrap();
    let old = ContentHash::of(b"fn a() {}");
    c.wait("a.rs back to its old bytes, in spec same", |c| {
        last_hash(c, "same", &a) == Some(Some(old))
    });
    // Removed: reported, no hash.
    fs::remove_file(&new).unwrap();
    c.wait("d/new.rs removed, in spec same", |c| {
        c.has("same", &new, ChangeKind::Removed)
    });
    assert_eq!(last_hash(&c, "same", &new), Some(None));
}

/// A checkout that wrote every file again, most of them with the bytes
/// they had (as `git checkout` of a branch that differs in a few does when
/// the index is stale): only the files whose bytes differ are reported.
fn a_checkout_that_rewrote_files_unchanged_is_no_change(b: Backend) {
    let d = tmp();
    let root = d.path();
    let names: Vec<String> = (0..200).map(|i| format!("f{i:03}.txt")).collect();
    for n in &names {
        fs::write(root.join(n), n).unwrap();
    }
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[root]).skip_same_content(true));
    for (i, n) in names.iter().enumerate() {
        // Rewritten through a temporary file renamed over it (an atomic
        // save), every tenth with new bytes.
        let tmp = root.join(format!(".{n}.tmp"));
        let content = if i % 10 == 0 {
            format!("{n} changed")
        } else {
            n.clone()
        };
        fs::write(&tmp, content).unwrap();
        rename_over(&tmp, &root.join(n));
    }
    c.barrier("s", root);
    // (Sorted: a poll's look is not one instant, so a file rewritten
    // later may be seen in an earlier batch than one rewritten before it.)
    let mut modified: Vec<String> = c
        .changes("s")
        .into_iter()
        .filter(|ch| ch.kind == ChangeKind::Modified)
        .map(|ch| ch.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    modified.sort();
    let want: Vec<String> = names.iter().step_by(10).cloned().collect();
    assert_eq!(modified, want, "only the files whose bytes changed");
}
