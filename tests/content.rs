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

/// Saves `bytes` to `path` as an editor does: a temporary file in `aux`
/// renamed over it (the content changes at once).
fn save(aux: &Path, path: &Path, bytes: &[u8]) {
    let tmp = aux.join("save.tmp");
    fs::write(&tmp, bytes).unwrap();
    fs::rename(&tmp, path).unwrap();
}

fn hash_of(c: &Collector, spec: &str, path: &Path) -> Vec<Option<ContentHash>> {
    c.changes(spec)
        .into_iter()
        .filter(|ch| ch.path == path)
        .map(|ch| ch.hash)
        .collect()
}

fn same_bytes_are_no_change_new_bytes_come_with_their_hash(b: Backend) {
    let (d, aux) = (tmp(), tmp());
    let (root, aux) = (d.path(), aux.path());
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

    // New bytes: reported, with their hash; a new file too.
    save(aux, &root.join("a.rs"), b"fn a() { changed() }");
    save(aux, &root.join("d/new.rs"), b"new");
    let (a, new) = (root.join("a.rs"), root.join("d/new.rs"));
    c.wait("a.rs modified and d/new.rs created, in spec same", |c| {
        c.has("same", &a, ChangeKind::Modified) && c.has("same", &new, ChangeKind::Created)
    });
    assert_eq!(
        hash_of(&c, "same", &a),
        vec![Some(ContentHash::of(b"fn a() { changed() }"))]
    );
    assert_eq!(
        hash_of(&c, "same", &new),
        vec![Some(ContentHash::of(b"new"))]
    );
    assert!(
        c.changes("all").iter().all(|ch| ch.hash.is_none()),
        "no hashes for a spec that does not compare contents"
    );
    // And back to the old bytes: a change from what was last reported.
    save(aux, &root.join("a.rs"), b"fn a() {}");
    c.wait("a.rs modified back, in spec same", |c| {
        hash_of(c, "same", &a).len() == 2
    });
    assert_eq!(
        hash_of(&c, "same", &a)[1],
        Some(ContentHash::of(b"fn a() {}"))
    );
    // Removed: reported, no hash.
    fs::remove_file(&new).unwrap();
    c.wait("d/new.rs removed, in spec same", |c| {
        c.has("same", &new, ChangeKind::Removed)
    });
    assert_eq!(hash_of(&c, "same", &new)[1], None);
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
        fs::rename(&tmp, root.join(n)).unwrap();
    }
    c.barrier("s", root);
    let modified: Vec<String> = c
        .changes("s")
        .into_iter()
        .filter(|ch| ch.kind == ChangeKind::Modified)
        .map(|ch| ch.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let want: Vec<String> = names.iter().step_by(10).cloned().collect();
    assert_eq!(modified, want, "only the files whose bytes changed");
}
