//! `Manager::files`: what a spec sees now, from the index, equals a walk
//! of the disk less what its rules ignore, on every backend.

mod common;

use std::fs;
use std::path::Path;

use common::*;
use specwatch::{Backend, Error, FileType};

both_backends!(the_files_a_spec_sees_are_the_disk_less_the_ignored);

fn the_files_a_spec_sees_are_the_disk_less_the_ignored(b: Backend) {
    let d = tmp();
    let root = d.path().join("root");
    for dir in ["src/deep", "target/debug", "docs"] {
        fs::create_dir_all(root.join(dir)).unwrap();
    }
    for f in [
        "src/a.rs",
        "src/deep/b.rs",
        "target/debug/x",
        "docs/a.md",
        "run.log",
    ] {
        fs::write(root.join(f), "x").unwrap();
    }
    let single = d.path().join("single.rs");
    fs::write(&single, "x").unwrap();
    let m = manager(b);
    start(
        &m,
        "s",
        spec(&[&root, &single]).ignore_patterns(["target/", "*.log"]),
    );
    // Changes made while watching: in the index once synced.
    fs::write(root.join("src/deep/c.rs"), "x").unwrap();
    fs::create_dir(root.join("new")).unwrap();
    fs::remove_file(root.join("docs/a.md")).unwrap();
    m.sync("s", WAIT).unwrap();
    let ignored =
        |p: &Path| p.starts_with(root.join("target")) || p.extension().is_some_and(|e| e == "log");
    let mut want: Vec<(std::path::PathBuf, FileType)> = Mirror::of_disk(&root)
        .without(ignored)
        .0
        .into_iter()
        .collect();
    want.push((single.clone(), FileType::File));
    want.sort();
    assert_eq!(m.files("s", None).unwrap(), want, "a walk less the ignored");
    let rs: Vec<_> = m
        .files("s", Some("**/*.rs"))
        .unwrap()
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    let want_rs: Vec<_> = ["src/a.rs", "src/deep/b.rs", "src/deep/c.rs"]
        .iter()
        .map(|f| root.join(f))
        .chain([single.clone()])
        .collect();
    assert_eq!(
        rs, want_rs,
        "relative to each root; a file root by its name"
    );
    let top: Vec<_> = m.files("s", Some("*")).unwrap();
    assert!(
        top.iter()
            .all(|(p, _)| p.parent() == Some(&root) || *p == single),
        "`*` stays within a name: {top:?}"
    );
    match m.files("s", Some("[oops")) {
        Err(Error::InvalidFilter { spec, pattern, .. }) => {
            assert_eq!((spec.as_str(), pattern.as_str()), ("s", "[oops"));
        }
        other => panic!("an invalid glob names the spec: {other:?}"),
    }
    assert!(matches!(m.files("nope", None), Err(Error::NotFound { spec }) if spec == "nope"));
}
