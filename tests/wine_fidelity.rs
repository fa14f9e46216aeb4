//! Where Wine's ReadDirectoryChangesW (the Windows tests run under Wine 8)
//! differs from Windows' own, shown with raw notify, without specwatch.
//! Each test asserts Wine's behaviour, under Wine only (elsewhere it says
//! it skips): the tests of specwatch that skip on Wine name one of these,
//! and when a Wine release behaves as Windows does, its test here fails,
//! which says the skips can go.
//!
//! The last test is not about a difference: it shows, with raw notify 9,
//! that a burst past ReadDirectoryChangesW's buffer is told as a rescan
//! (with notify 8.2 the Windows build lost the watch there; the guide's
//! "Platforms", src/docs/platforms.md).
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

/// Wine 8's CreateSymbolicLinkW says it made the link and makes nothing
/// (Windows makes one, given the privilege or developer mode): nothing is
/// at the link's path, and no event names it. A random mix of operations
/// with symlinks differs from Linux's there, whatever the watcher.
#[test]
fn wine_makes_no_symlink_though_it_says_it_did() {
    if not_wine() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("target"), "t").unwrap();
    std::fs::create_dir(d.path().join("tdir")).unwrap();
    let (_w, rx) = watch(d.path());
    let (file, dir) = (d.path().join("file-link"), d.path().join("dir-link"));
    std::os::windows::fs::symlink_file("target", &file).expect("Wine says it made the link");
    std::os::windows::fs::symlink_dir("tdir", &dir).expect("Wine says it made the link");
    for link in [&file, &dir] {
        assert!(
            std::fs::symlink_metadata(link).is_err(),
            "{} exists: Wine made the link",
            link.display()
        );
    }
    let got = named(&rx);
    assert!(!got.contains(&file) && !got.contains(&dir), "{got:?}");
}

/// Not a difference: a burst while notify's thread is busy overflows the
/// buffer of its ReadDirectoryChangesW call (64 KiB), and notify 9 says so
/// with a rescan event, and goes on (notify 8.2 dropped the watch without
/// a word: the Windows build then reported nothing more). Wine keeps the
/// changes in the server until the next read, which then fails as too
/// big for the buffer: the same result.
#[test]
fn a_burst_while_notify_is_busy_is_told_as_a_rescan() {
    use std::sync::mpsc::sync_channel;
    let d = tempfile::tempdir().unwrap();
    let (busy_tx, busy) = sync_channel::<()>(1);
    let (release, released) = sync_channel::<()>(1);
    let (tx, rx) = channel();
    let mut first = true;
    let mut w = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
        if std::mem::take(&mut first) {
            // notify's thread, busy with the first event of the burst.
            let _ = busy_tx.send(());
            let _ = released.recv_timeout(common::WAIT);
        }
        let _ = tx.send(e.map(|e| (e.need_rescan(), e.paths)));
    })
    .unwrap();
    w.watch(d.path(), RecursiveMode::Recursive).unwrap();
    std::fs::write(d.path().join("first"), "f").unwrap();
    busy.recv_timeout(common::WAIT)
        .expect("notify's thread took the first event");
    for i in 0..4000 {
        std::fs::write(d.path().join(format!("file-of-the-burst-{i:05}.txt")), "x").unwrap();
    }
    release.send(()).unwrap();
    // Told to rescan; then a write made after it is named: the watch goes
    // on. (A write made at once may fall into the read that overflowed,
    // and be lost with it: that is what the rescan says.)
    let rx_named = |what: &str, done: &mut dyn FnMut(bool, &[PathBuf]) -> bool| {
        let deadline = std::time::Instant::now() + common::WAIT;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(Ok((rescan, paths))) => {
                    if done(rescan, &paths) {
                        return;
                    }
                }
                Ok(Err(e)) => panic!("notify reported an error: {e}"),
                Err(_) => panic!("within {:?}: no {what}", common::WAIT),
            }
        }
    };
    rx_named("rescan after the burst", &mut |rescan, _| rescan);
    let last = d.path().join("after");
    std::fs::write(&last, "a").unwrap();
    rx_named(
        "event naming the write after the rescan",
        &mut |_, paths| paths.contains(&last),
    );
}
