//! `WatchOptions::metadata`: each change that leaves its entry in place
//! carries what `lstat` says of it (size, modification time, inode),
//! whichever way the engine found it (an OS event, a poll, a read of a new
//! directory, an initial scan); `Removed` carries none, and a spec without
//! the option sees none at all.

mod common;

use std::fs;
use std::path::Path;

use common::*;
use specwatch::{Backend, Change, ChangeKind, ChangesSince, FileType, Meta, Seq};

both_backends!(
    created_and_modified_carry_what_lstat_says,
    a_moved_in_directorys_entries_carry_theirs,
    an_initial_scan_carries_every_entrys,
    changes_since_carries_the_newest,
    #[cfg(unix)]
    a_replaced_file_carries_the_new_inode,
    without_the_option_there_is_none
);

/// What `lstat` says of `p` now, as a change reports it.
fn disk(p: &Path) -> Meta {
    let m = fs::symlink_metadata(p).unwrap_or_else(|e| panic!("lstat {}: {e}", p.display()));
    #[cfg(unix)]
    let inode = Some(std::os::unix::fs::MetadataExt::ino(&m));
    #[cfg(not(unix))]
    let inode = None;
    Meta::new(m.len(), m.modified().ok(), inode)
}

/// Writes `p` whole in one step (a file beside it renamed over it), so
/// that no batch sees it half written.
fn put(p: &Path, bytes: impl AsRef<[u8]>) {
    let part = p.with_extension("part");
    fs::write(&part, bytes).unwrap();
    fs::rename(&part, p).unwrap();
}

/// A manager running `b` and spec `s` over `root`, with metadata.
fn watching(b: Backend, root: &Path) -> (specwatch::Manager, Collector) {
    let m = manager(b);
    let c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[root]).metadata(true));
    (m, c)
}

/// The newest change of `p` the collector holds for `spec`.
fn last(c: &Collector, spec: &str, p: &Path) -> Option<Change> {
    c.changes(spec).into_iter().rfind(|x| x.path == p)
}

/// Waits until the newest change of `p` is of `kind` and carries what
/// `lstat` says of `p` now (the engine's newest look at it; nothing
/// writes it meanwhile), and checks its type.
fn wait_meta(c: &mut Collector, spec: &str, p: &Path, kind: ChangeKind, ft: FileType) {
    let want = disk(p);
    c.wait(
        &format!(
            "a {kind} {} carrying {want:?} (newest so far: {:?})",
            p.display(),
            last(c, spec, p)
        ),
        |c| last(c, spec, p).is_some_and(|x| x.kind == kind && x.meta.as_deref() == Some(&want)),
    );
    assert_eq!(last(c, spec, p).unwrap().file_type, ft);
}

fn created_and_modified_carry_what_lstat_says(b: Backend) {
    let d = tmp();
    let root = d.path();
    let (_m, mut c) = watching(b, root);
    let f = root.join("a.bin");
    put(&f, vec![7u8; 100]);
    wait_meta(&mut c, "s", &f, ChangeKind::Created, FileType::File);
    assert_eq!(last(&c, "s", &f).unwrap().meta.unwrap().size, 100);

    fs::write(&f, vec![7u8; 2_500]).unwrap();
    wait_meta(&mut c, "s", &f, ChangeKind::Modified, FileType::File);
    assert_eq!(last(&c, "s", &f).unwrap().meta.unwrap().size, 2_500);

    let sub = root.join("sub");
    fs::create_dir(&sub).unwrap();
    wait_meta(&mut c, "s", &sub, ChangeKind::Created, FileType::Dir);

    fs::remove_file(&f).unwrap();
    c.wait("a.bin removed", |c| c.has("s", &f, ChangeKind::Removed));
    let gone = last(&c, "s", &f).unwrap();
    assert_eq!(gone.kind, ChangeKind::Removed);
    assert_eq!(gone.meta, None, "a removed entry has none");
}

/// A directory renamed in with its files: no event names them, a read of
/// the new directory finds them (a poll `stat`s them; otherwise the engine
/// `lstat`s them when their batch closes).
fn a_moved_in_directorys_entries_carry_theirs(b: Backend) {
    let (d, outside) = (tmp(), tmp());
    let root = d.path();
    let staged = outside.path().join("pkg");
    fs::create_dir_all(staged.join("inner")).unwrap();
    fs::write(staged.join("one"), vec![1u8; 11]).unwrap();
    fs::write(staged.join("inner/two"), vec![2u8; 2_222]).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink("one", staged.join("link")).unwrap();
    let (_m, mut c) = watching(b, root);
    let pkg = root.join("pkg");
    fs::rename(&staged, &pkg).unwrap();
    wait_meta(&mut c, "s", &pkg, ChangeKind::Created, FileType::Dir);
    wait_meta(
        &mut c,
        "s",
        &pkg.join("one"),
        ChangeKind::Created,
        FileType::File,
    );
    let two = pkg.join("inner/two");
    wait_meta(&mut c, "s", &two, ChangeKind::Created, FileType::File);
    assert_eq!(last(&c, "s", &two).unwrap().meta.unwrap().size, 2_222);
    #[cfg(unix)]
    {
        let link = pkg.join("link");
        wait_meta(&mut c, "s", &link, ChangeKind::Created, FileType::Symlink);
        let size = last(&c, "s", &link).unwrap().meta.unwrap().size;
        assert_eq!(size, 3, "a link's own size: its target's path");
    }
}

fn an_initial_scan_carries_every_entrys(b: Backend) {
    let d = tmp();
    let root = d.path();
    fs::create_dir_all(root.join("a/b")).unwrap();
    fs::write(root.join("top.txt"), "12345").unwrap();
    fs::write(root.join("a/b/deep.txt"), vec![0u8; 4_321]).unwrap();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[root]).metadata(true).initial_scan(true));
    for (p, ft) in [
        ("a", FileType::Dir),
        ("a/b", FileType::Dir),
        ("a/b/deep.txt", FileType::File),
        ("top.txt", FileType::File),
    ] {
        wait_meta(&mut c, "s", &root.join(p), ChangeKind::Created, ft);
    }
}

/// `changes_since` answers with what each path is after the newest batch.
fn changes_since_carries_the_newest(b: Backend) {
    let d = tmp();
    let root = d.path();
    let (m, mut c) = watching(b, root);
    let (f, g) = (root.join("f"), root.join("g"));
    put(&g, "gone soon");
    wait_meta(&mut c, "s", &g, ChangeKind::Created, FileType::File);
    let from: Seq = c.batches["s"].last().unwrap().seq;
    put(&f, "x");
    wait_meta(&mut c, "s", &f, ChangeKind::Created, FileType::File);
    fs::write(&f, "longer now").unwrap();
    wait_meta(&mut c, "s", &f, ChangeKind::Modified, FileType::File);
    fs::remove_file(&g).unwrap();
    c.wait("g removed", |c| c.has("s", &g, ChangeKind::Removed));
    match m.changes_since("s", from).unwrap() {
        ChangesSince::Changes { changes, .. } => {
            let want = vec![
                Change::new(&f, ChangeKind::Created, FileType::File).with_meta(disk(&f)),
                Change::new(&g, ChangeKind::Removed, FileType::File),
            ];
            assert_eq!(changes, want);
        }
        other => panic!("changes since {from}: {other:?}"),
    }
}

/// An atomic save (a new file renamed over the old): `Modified`, with the
/// new file's inode.
#[cfg(unix)]
fn a_replaced_file_carries_the_new_inode(b: Backend) {
    let d = tmp();
    let root = d.path();
    let f = root.join("conf");
    fs::write(&f, "old").unwrap();
    let old = disk(&f).inode;
    let (_m, mut c) = watching(b, root);
    put(&f, "new contents");
    wait_meta(&mut c, "s", &f, ChangeKind::Modified, FileType::File);
    let now = last(&c, "s", &f).unwrap().meta.unwrap();
    assert_ne!(now.inode, old, "a new file");
    assert_eq!(now.size, 12);
}

/// A spec without the option: no change carries any, whatever the
/// engine looked at (as before the field existed), while one that asks,
/// over the same directory, gets it.
fn without_the_option_there_is_none(b: Backend) {
    let d = tmp();
    let root = d.path();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "plain", spec(&[root]));
    start(&m, "meta", spec(&[root]).metadata(true));
    let f = root.join("f");
    fs::create_dir(root.join("d")).unwrap();
    fs::write(root.join("d/x"), "2").unwrap();
    put(&f, "12");
    wait_meta(&mut c, "meta", &f, ChangeKind::Created, FileType::File);
    let marker = c.barrier("plain", root);
    c.wait("the marker in meta", |c| {
        c.has("meta", &marker, ChangeKind::Created)
    });
    let plain = c.changes("plain");
    assert!(plain.len() >= 4, "{plain:?}");
    assert!(plain.iter().all(|x| x.meta.is_none()), "{plain:?}");
}
