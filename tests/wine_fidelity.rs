//! Where Wine's ReadDirectoryChangesW (the Windows tests run under Wine 8)
//! differs from Windows' own, shown with raw notify, without specwatch.
//! Each test asserts Wine's behaviour, under Wine only (elsewhere it says
//! it skips): the tests of specwatch that skip on Wine name one of these,
//! and when a Wine release behaves as Windows does, its test here fails,
//! which says the skips can go.
//!
//! Windows' own behaviour, for comparison, is documented for
//! ReadDirectoryChangesW with `bWatchSubtree` (every change below the
//! directory, whenever its subdirectories were made or moved in, named by
//! its path at the time) and for POSIX delete semantics (Windows 10 1903
//! and later on NTFS: a deleted directory's name goes at once, handles
//! open or not).
#![cfg(windows)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use common::{skip, wine};
use notify::{RecursiveMode, Watcher};

/// A recursive raw watch of `dir` and its events' paths.
fn watch(dir: &Path) -> (notify::RecommendedWatcher, Receiver<PathBuf>) {
    let (tx, rx) = channel();
    let mut w = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
        if let Ok(e) = e {
            for p in e.paths {
                let _ = tx.send(p);
            }
        }
    })
    .unwrap();
    w.watch(dir, RecursiveMode::Recursive).unwrap();
    (w, rx)
}

/// The paths named within half a second of quiet.
fn named(rx: &Receiver<PathBuf>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    while let Ok(p) = rx.recv_timeout(Duration::from_millis(500)) {
        out.push(p);
    }
    out
}

fn not_wine() -> bool {
    !wine() && skip("this documents Wine's behaviour, not Windows'")
}

/// A write in a subdirectory that existed before the watch, and that this
/// process has not opened since, is never reported.
#[test]
fn wine_reports_nothing_in_a_subdirectory_older_than_the_watch() {
    if not_wine() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("gen/other")).unwrap();
    let (_w, rx) = watch(d.path());
    let f = d.path().join("gen/other/b.txt");
    std::fs::write(&f, "b").unwrap();
    assert!(!named(&rx).contains(&f), "Wine reported {}", f.display());
}

/// A write below a directory renamed within the tree is reported under the
/// directory's old path.
#[test]
fn wine_names_a_renamed_directorys_contents_by_its_old_path() {
    if not_wine() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (_w, rx) = watch(d.path());
    std::fs::create_dir(d.path().join("old")).unwrap();
    named(&rx);
    std::fs::rename(d.path().join("old"), d.path().join("new")).unwrap();
    named(&rx);
    std::fs::write(d.path().join("new/f"), "f").unwrap();
    let got = named(&rx);
    assert!(got.contains(&d.path().join("old/f")), "{got:?}");
    assert!(!got.contains(&d.path().join("new/f")), "{got:?}");
}

/// A write below a directory moved in from outside the tree is never
/// reported.
#[test]
fn wine_reports_nothing_below_a_directory_moved_in() {
    if not_wine() {
        return;
    }
    let (d, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::create_dir_all(out.path().join("pkg/sub")).unwrap();
    let (_w, rx) = watch(d.path());
    std::fs::rename(out.path().join("pkg"), d.path().join("pkg")).unwrap();
    named(&rx);
    let f = d.path().join("pkg/sub/new");
    std::fs::write(&f, "n").unwrap();
    assert!(!named(&rx).contains(&f), "Wine reported {}", f.display());
}

/// A directory deleted while a handle is open on it (notify holds one on
/// each watched directory) stays until the handle closes.
#[test]
fn wine_deletes_an_open_directory_only_when_its_handle_closes() {
    if not_wine() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("watched");
    std::fs::create_dir(&dir).unwrap();
    let (w, _rx) = watch(&dir);
    std::fs::remove_dir(&dir).unwrap();
    assert!(dir.exists(), "deleted at once, as Windows does");
    drop(w);
    // notify closes its handle on its own thread after the drop.
    let deadline = std::time::Instant::now() + common::WAIT;
    while dir.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} still there after the watch was dropped",
            dir.display()
        );
        std::thread::yield_now();
    }
}
