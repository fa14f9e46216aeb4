//! Tests of the file-system layer's own functions (Linux).

use super::*;

/// `changed_among` answers as `changed_since` does, name by name:
/// newer inodes only, missing names and impossible names not.
#[test]
fn changed_among_finds_the_newer_inodes() {
    let d = tempfile::tempdir().unwrap();
    let ctime = |p: &Path| ctime_of(&std::fs::symlink_metadata(p).unwrap());
    std::fs::write(d.path().join("old"), "o").unwrap();
    let old = ctime(&d.path().join("old"));
    // Wait (bounded) for the file system's clock to move on.
    let marker = d.path().join("marker");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let since = loop {
        std::fs::write(&marker, "m").unwrap();
        let t = ctime(&marker);
        if t > old {
            break t;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "ctime never moved past {old:?}"
        );
    };
    std::fs::write(d.path().join("new"), "n").unwrap();
    let names: Vec<OsString> = ["old", "new", "missing", "nul\0name", "marker"]
        .into_iter()
        .map(OsString::from)
        .collect();
    let got = changed_among(d.path(), names.iter().map(OsString::as_os_str), since);
    assert_eq!(got, [OsString::from("new"), OsString::from("marker")]);
    let one_by_one: Vec<OsString> = names
        .into_iter()
        .filter(|n| changed_since(&d.path().join(n), since))
        .collect();
    assert_eq!(got, one_by_one);
    assert!(changed_among(&d.path().join("gone"), [OsStr::new("x")], since).is_empty());
}
use std::os::unix::ffi::OsStrExt;

/// The raw `getdents64` reader sees exactly what `std::fs::read_dir`
/// sees, across many buffer refills, with 255-byte and non-UTF-8 names,
/// and leaves sync cookies out.
#[test]
fn read_listing_equals_std_read_dir() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    for i in 0..3000 {
        std::fs::write(root.join(format!("file-{i:05}")), "x").unwrap();
    }
    for i in 0..40 {
        let mut name = vec![b'n'; 250];
        name.extend_from_slice(format!("{i:05}").as_bytes());
        std::fs::create_dir(root.join(OsStr::from_bytes(&name))).unwrap();
    }
    std::fs::write(root.join(OsStr::from_bytes(b"odd\xff\xfe")), "x").unwrap();
    std::os::unix::fs::symlink("nowhere", root.join("link")).unwrap();
    std::fs::write(root.join(format!("{COOKIE_PREFIX}1")), "c").unwrap();
    let mut cookies = Vec::new();
    let mut got = read_listing(root, &mut cookies).unwrap();
    got.sort();
    let mut want: Vec<(OsString, FileType)> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name(), file_type_of(e.file_type().unwrap()))
        })
        .filter(|(n, _)| !is_cookie(n))
        .collect();
    want.sort();
    assert_eq!(got.len(), 3000 + 40 + 2);
    assert_eq!(got, want);
    assert_eq!(cookies, vec![root.join(format!("{COOKIE_PREFIX}1"))]);
    // Errors keep their kinds: the engine tells "gone" from the rest.
    let e = read_listing(&root.join("missing"), &mut cookies).unwrap_err();
    assert!(gone(&e), "{e:?}");
    let e = read_listing(&root.join("file-00001"), &mut cookies).unwrap_err();
    assert!(gone(&e), "{e:?}");
}

/// A scan sees what `read_dir` and `symlink_metadata` see, cookies
/// included, sorted; a link where a directory was expected is "not a
/// directory" unless followed.
#[test]
fn scan_dir_stats_every_entry() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    for i in 0..500 {
        std::fs::write(root.join(format!("f{i:03}")), "x".repeat(i)).unwrap();
    }
    std::fs::create_dir(root.join("sub")).unwrap();
    std::os::unix::fs::symlink("sub", root.join("link")).unwrap();
    std::fs::write(root.join(OsStr::from_bytes(b"odd\xff")), "x").unwrap();
    std::fs::write(root.join(format!("{COOKIE_PREFIX}9")), "c").unwrap();
    let scan = scan_dir(root, false).unwrap();
    assert_eq!(scan.len(), 500 + 4);
    let names: Vec<&OsStr> = scan.iter().map(|(n, _)| n).collect();
    assert!(
        names
            .windows(2)
            .all(|w| w[0].as_encoded_bytes() < w[1].as_encoded_bytes()),
        "sorted by name"
    );
    for (name, sig) in scan.iter() {
        assert_eq!(Some(sig), sig_of(&root.join(name)), "{name:?}");
    }
    let link = scan.iter().find(|(n, _)| *n == "link").unwrap();
    assert_eq!(link.1.kind, FileType::Symlink, "entries are not followed");
    let e = scan_dir(&root.join("link"), false).unwrap_err();
    assert!(gone(&e), "{e:?}");
    assert_eq!(scan_dir(&root.join("link"), true).unwrap().len(), 0);
    assert!(gone(&scan_dir(&root.join("nope"), true).unwrap_err()));
}

#[test]
fn signatures_tell_writes_from_replacements() {
    let f = |kind, size, ino| Sig {
        kind,
        size,
        mtime: (1, 0),
        ctime: (1, 0),
        ino,
    };
    let file = f(FileType::File, 1, 7);
    assert!(!file.changed(&file));
    assert!(file.changed(&f(FileType::File, 2, 7)) && !file.replaced(&f(FileType::File, 2, 7)));
    assert!(file.changed(&f(FileType::File, 1, 8)) && file.replaced(&f(FileType::File, 1, 8)));
    let mut dir = f(FileType::Dir, 4096, 9);
    let mut touched = dir;
    touched.mtime = (2, 0);
    assert!(
        !dir.changed(&touched),
        "a directory's times are its own poll's business"
    );
    dir.ino = 10;
    assert!(touched.changed(&dir) && touched.replaced(&dir));
}

#[test]
fn a_file_written_within_the_coarse_window_is_racy() {
    let look = SystemTime::UNIX_EPOCH + std::time::Duration::new(1_000, 0);
    assert!(racy((999, 0), look), "1 s before the look");
    assert!(racy((998, 0), look), "exactly 2 s before");
    assert!(
        !racy((997, 999_999_999), look),
        "older: its mtime would move"
    );
    assert!(racy((1_001, 0), look), "after the look");
}

#[test]
fn content_hashes_tell_contents_apart() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("f");
    std::fs::write(&f, "aaaa").unwrap();
    let a = content_hash(&f).unwrap();
    assert_eq!(content_hash(&f), Some(a), "stable");
    std::fs::write(&f, "bbbb").unwrap();
    assert_ne!(content_hash(&f), Some(a));
    assert_eq!(content_hash(&d.path().join("missing")), None);
}

#[test]
fn cookies_go_in_the_nearest_existing_directory() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    assert_eq!(cookie_dir(root), root);
    std::fs::write(root.join("f"), "x").unwrap();
    assert_eq!(cookie_dir(&root.join("f")), root, "a file root: its parent");
    assert_eq!(
        cookie_dir(&root.join("a/b/c")),
        root,
        "a missing root: the nearest ancestor"
    );
}
