//! Marks: how the portable backend tells when notify's thread has read
//! every inotify event queued before a moment (Linux), and whether one on
//! which notify drops a watch was among them (see [`Marks`]).

#[cfg(target_os = "linux")]
use std::io;
#[cfg(target_os = "linux")]
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use notify::EventKind;
use notify::event::{AccessKind, ModifyKind, RemoveKind, RenameMode};
use parking_lot::{Condvar, Mutex};

/// How long to wait for notify's thread to read a mark before doing
/// without marks.
const MARK_TIMEOUT: Duration = Duration::from_secs(5);

/// Tells the engine's thread when notify's thread has read every inotify
/// event queued before a moment, and whether a removal was among them.
///
/// notify keys its inotify watches by path and by watch descriptor, and the
/// kernel gives a directory one descriptor however it is reached. A
/// directory renamed from `h` to `d/g` keeps its descriptor; until notify
/// reads the `IN_MOVED_FROM` for `h` its map still says `h`. A watch call
/// for `d` (or `d/g`) served in between walks `d/g`, gets that same
/// descriptor back, and notify files it under `d/g`, leaving `h` pointing
/// at it too. When notify then reads the move it drops the watch of `h`:
/// the descriptor `d/g` now depends on. notify puts it back itself when the
/// `IN_MOVED_TO` for `d/g` comes through a watch it still has, but not when
/// that event went with a watch removed meanwhile (the engine lets go of
/// `d` and watches it again when a `Moved` hint names a directory), and
/// then nothing below `d/g` is reported any more while notify believes it
/// watches it.
///
/// So after the watch call for a new directory the engine's thread opens a
/// private directory that notify watches (the *mark*); notify's thread
/// reads that open after
/// every event queued before it, and counts the removals it hands over on
/// the way (events on which notify drops watches by path: a rename's
/// source, a directory deleted). A call followed by no removal before its
/// mark lost nothing; after one, the call is made again (notify's thread
/// serves it once it has dropped what it drops), which puts a lost watch
/// back.
pub(super) struct Marks {
    /// A private, empty directory (mode 0700) that only this watcher
    /// opens, removed when the backend goes (or, left by a process that
    /// exited without dropping it, when the next backend starts).
    pub(super) dir: PathBuf,
    /// Marks made (opens of `dir`), by the engine's thread.
    made: AtomicU64,
    /// Removals handed over so far, by notify's thread.
    removals: AtomicU64,
    /// Marks read by notify's thread, and `removals` when it read the last.
    seen: Mutex<(u64, u64)>,
    read: Condvar,
}

impl Marks {
    /// A private directory for the marks (Linux: notify's inotify thread
    /// reports opens; elsewhere, `None`).
    pub(super) fn new() -> Option<Marks> {
        let dir = private_dir()?;
        Some(Marks {
            dir,
            made: AtomicU64::new(0),
            removals: AtomicU64::new(0),
            seen: Mutex::new((0, 0)),
            read: Condvar::new(),
        })
    }

    /// On notify's thread, for every event it hands over, in order.
    pub(super) fn note(&self, res: &notify::Result<notify::Event>) {
        let Ok(e) = res else {
            return;
        };
        if e.need_rescan() {
            // The queue overflowed: marks made so far may be lost. What was
            // dropped notify never acts on, so nothing more is counted; the
            // marks are counted as read (a late one is then capped below).
            let mut seen = self.seen.lock();
            *seen = (
                self.made.load(Ordering::SeqCst),
                self.removals.load(Ordering::SeqCst),
            );
            self.read.notify_all();
            return;
        }
        match e.kind {
            EventKind::Access(AccessKind::Open(_)) if e.paths.first() == Some(&self.dir) => {
                let mut seen = self.seen.lock();
                let made = self.made.load(Ordering::SeqCst);
                *seen = ((seen.0 + 1).min(made), self.removals.load(Ordering::SeqCst));
                self.read.notify_all();
            }
            EventKind::Modify(ModifyKind::Name(RenameMode::From))
            | EventKind::Remove(RemoveKind::Folder | RemoveKind::Any | RemoveKind::Other) => {
                self.removals.fetch_add(1, Ordering::SeqCst);
            }
            _ => {}
        }
    }

    /// Removals handed over so far.
    pub(super) fn removals(&self) -> u64 {
        self.removals.load(Ordering::SeqCst)
    }

    /// Makes a mark and waits until notify's thread has read it: then every
    /// event queued before this call has been read. Whether a removal was
    /// handed over after `before` (and by the mark); `None` when the mark
    /// could not be made or was not read in time (marks are then of no
    /// use).
    pub(super) fn removed_since(&self, before: u64) -> Option<bool> {
        let n = self.made.fetch_add(1, Ordering::SeqCst) + 1;
        // The open is what notify's thread reads (IN_OPEN); the directory
        // is closed at once.
        std::fs::File::open(&self.dir).ok()?;
        let deadline = Instant::now() + MARK_TIMEOUT;
        let mut seen = self.seen.lock();
        while seen.0 < n {
            if self.read.wait_until(&mut seen, deadline).timed_out() {
                return None;
            }
        }
        Some(seen.1 > before)
    }
}

/// A new private directory in the temporary directory (Linux).
#[cfg(target_os = "linux")]
fn private_dir() -> Option<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    use std::sync::atomic::AtomicU32;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let tmp = std::env::temp_dir();
    if !tmp.is_absolute() {
        return None;
    }
    remove_stale_marks(&tmp);
    for _ in 0..16 {
        let dir = tmp.join(format!(
            ".specwatch-marks-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Some(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(_) => return None,
        }
    }
    None
}

/// Removes the (empty) marks' directories of processes that are gone: a
/// program that exits without dropping its manager leaves its own behind.
#[cfg(target_os = "linux")]
fn remove_stale_marks(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(".specwatch-marks-"))
            .and_then(|rest| rest.split('-').next())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

/// Elsewhere notify's backends report no opens (and Windows' and macOS's
/// watch subtrees, not directories by descriptor): no marks.
#[cfg(not(target_os = "linux"))]
fn private_dir() -> Option<PathBuf> {
    None
}
