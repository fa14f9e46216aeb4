//! Polling: a per-directory backend without OS events, for file systems
//! where the kernel cannot see what other machines write (network and FUSE
//! mounts), and for anyone who asks for it.
//!
//! A scanner thread reads every watched directory once per interval
//! (`getdents64` and `fstatat` relative to the directory, as `find` does),
//! compares each entry's signature (type, size, modification and change
//! times to the nanosecond, inode; with `content_hash`, racy files'
//! contents) with the previous scan (`fs::look`, as every kind of polling), and hands the
//! engine each directory's listing with the entries found written or
//! replaced ([`OsEvent::Listing`]). The engine diffs the listing against
//! its index as it diffs its own reads, so a poll reports what inotify
//! would have, and the index never drifts from what the poller saw.
//!
//! - A directory's first picture is taken in [`watch`](DirWatcher::watch),
//!   before the engine reads it: whatever changes after that, the next scan
//!   sees.
//! - No lock is held across a scan: the scanner copies the list of watched
//!   directories, scans, then takes the lock again to publish.
//! - A directory that cannot be read for a possibly transient reason (`EIO`,
//!   `ESTALE`, `EACCES`) keeps its last picture and is read again at the
//!   next scan; one that is gone, or replaced by another directory at its
//!   path, loses its watch ([`OsEvent::Dropped`]), as an inotify watch does.
//! - [`look_now`](DirWatcher::look_now) (a sync barrier) starts a scan at
//!   once. A barrier's cookies are reported only by a scan that began after
//!   the barrier [did](DirWatcher::barrier): one that began before could
//!   find a cookie in a directory it reads late, having read others before
//!   the changes the barrier must cover. Other barriers' cookies are not
//!   held back, so steady syncing never starves one.
//! - The same directory reached by two paths is one watch (by device and
//!   inode, as inotify's), scanned through the path it was last watched
//!   through (a renamed directory watched again at its new path is looked
//!   at there; [`repoint`](DirWatcher::repoint) moves it to the path that
//!   keeps it when another goes).

use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use parking_lot::{Condvar, Mutex};

use super::{DirWatcher, Faults, OsEvent, OsMsg, Sink, WatchError, WatchId};
#[cfg(any(test, feature = "test-hooks"))]
use super::{Fault, ReaderPause};
use crate::fs::{self, Picture};

type Ident = (u64, u64);

/// One directory to scan.
struct Job {
    id: i32,
    path: PathBuf,
    ident: Ident,
    /// Its path may be a link.
    follow: bool,
    /// Compare racy files' contents.
    hash: bool,
    /// Its first picture, if it was just watched.
    first: Option<Picture>,
}

struct Watched {
    path: PathBuf,
    ident: Ident,
    follow: bool,
    /// The picture taken when the watch was added, for the scanner to start
    /// from.
    first: Option<Picture>,
    /// Compare racy files' contents ([`DirWatcher::hash_contents`]).
    hash: bool,
}

#[derive(Default)]
struct Table {
    dirs: HashMap<i32, Watched>,
    by_ident: HashMap<Ident, i32>,
    /// Ids are never reused: a late hint for an unwatched id is ignored.
    next: i32,
    /// Scan at once (a sync barrier waits).
    poke: bool,
    /// Sync barriers begun so far.
    barriers: u64,
    /// The cookies of barriers that began during the scan in progress (or
    /// after it), by file name, with the barrier's number: that scan must
    /// not report them.
    late_cookies: HashMap<OsString, u64>,
    stop: bool,
}

impl Table {
    /// The cookies a scan that began when `barriers` had begun must leave
    /// out: those of later barriers.
    fn late_cookies_for(&self, barriers: u64) -> Vec<OsString> {
        self.late_cookies
            .iter()
            .filter(|(_, n)| **n > barriers)
            .map(|(c, _)| c.clone())
            .collect()
    }
}

struct Shared {
    table: Mutex<Table>,
    wake: Condvar,
}

/// The polling backend: the handle the engine calls; the scanner runs on
/// its own thread.
pub(crate) struct Poll {
    shared: Arc<Shared>,
    scanner: Option<JoinHandle<()>>,
    faults: Faults,
}

impl Poll {
    /// Starts the scanner, scanning every `interval` (at least 1 ms).
    pub(crate) fn start(sink: Sink, interval: Duration) -> io::Result<Poll> {
        let shared = Arc::new(Shared {
            table: Mutex::new(Table::default()),
            wake: Condvar::new(),
        });
        let s = shared.clone();
        let interval = interval.max(Duration::from_millis(1));
        let scanner = std::thread::Builder::new()
            .name("specwatch-poll".into())
            .spawn(move || scan_loop(&s, &sink, interval))?;
        Ok(Poll {
            shared,
            scanner: Some(scanner),
            faults: Faults::default(),
        })
    }
}

impl Drop for Poll {
    fn drop(&mut self) {
        self.shared.table.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.scanner.take() {
            let _ = t.join();
        }
    }
}

impl DirWatcher for Poll {
    fn watch(&mut self, dir: &Path, follow: bool) -> Result<WatchId, WatchError> {
        if self.faults.take_fail() {
            return Err(WatchError::new(
                io::Error::other("injected watch failure"),
                dir,
            ));
        }
        if self.faults.take_limit() {
            return Err(WatchError::new(
                io::Error::from_raw_os_error(super::errno::ENOSPC),
                dir,
            ));
        }
        let scan = fs::scan_dir(dir, follow).map_err(|e| WatchError::new(e, dir))?;
        let mut t = self.shared.table.lock();
        if let Some(&id) = t.by_ident.get(&scan.ident) {
            // The directory is watched already, perhaps under a path it has
            // left (a rename): look at it where it was asked for.
            if let Some(w) = t.dirs.get_mut(&id) {
                w.path = dir.to_path_buf();
                w.follow = follow;
            }
            return Ok(WatchId(id));
        }
        t.next += 1;
        let id = t.next;
        t.by_ident.insert(scan.ident, id);
        t.dirs.insert(
            id,
            Watched {
                path: dir.to_path_buf(),
                ident: scan.ident,
                follow,
                first: Some(Picture::of(scan.entries)),
                hash: false,
            },
        );
        Ok(WatchId(id))
    }

    /// The watch of the directory at `dir`, or a fresh id that nothing
    /// holds (the directory there is not watched).
    fn identify(&mut self, dir: &Path, follow: bool) -> Option<WatchId> {
        let ident = fs::identity(dir, follow).ok()?;
        let mut t = self.shared.table.lock();
        match t.by_ident.get(&ident) {
            Some(&id) => Some(WatchId(id)),
            None => {
                t.next += 1;
                Some(WatchId(t.next))
            }
        }
    }

    fn unwatch(&mut self, id: WatchId) {
        let mut t = self.shared.table.lock();
        if let Some(w) = t.dirs.remove(&id.0) {
            t.by_ident.remove(&w.ident);
        }
    }

    fn repoint(&mut self, id: WatchId, dir: &Path, follow: bool) {
        if let Some(w) = self.shared.table.lock().dirs.get_mut(&id.0) {
            w.path = dir.to_path_buf();
            w.follow = follow;
        }
    }

    fn hash_contents(&mut self, id: WatchId, on: bool) {
        if let Some(w) = self.shared.table.lock().dirs.get_mut(&id.0) {
            w.hash = on;
        }
    }

    fn barrier(&mut self, cookies: &[PathBuf]) {
        let mut t = self.shared.table.lock();
        t.barriers += 1;
        let n = t.barriers;
        for c in cookies {
            if let Some(name) = c.file_name() {
                t.late_cookies.insert(name.to_os_string(), n);
            }
        }
    }

    fn look_now(&mut self) {
        self.shared.table.lock().poke = true;
        self.shared.wake.notify_all();
    }

    fn holds_os_watches(&self) -> bool {
        false
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn inject(&mut self, fault: Fault) {
        self.faults.set(fault);
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn os_watches(&self) -> Option<Vec<WatchId>> {
        let t = self.shared.table.lock();
        Some(t.dirs.keys().map(|id| WatchId(*id)).collect())
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn pause(&self) -> Option<Arc<ReaderPause>> {
        None
    }
}

fn scan_loop(shared: &Shared, sink: &Sink, interval: Duration) {
    let mut pictures: HashMap<i32, Picture> = HashMap::new();
    loop {
        let (barriers, jobs): (u64, Vec<Job>) = {
            let mut t = shared.table.lock();
            if !t.poke && !t.stop {
                shared.wake.wait_for(&mut t, interval);
            }
            if t.stop {
                return;
            }
            t.poke = false;
            let jobs = t
                .dirs
                .iter_mut()
                .map(|(id, w)| Job {
                    id: *id,
                    path: w.path.clone(),
                    ident: w.ident,
                    follow: w.follow,
                    hash: w.hash,
                    first: w.first.take(),
                })
                .collect();
            (t.barriers, jobs)
        };
        let read_at = SystemTime::now();
        let mut dropped = Vec::new();
        let mut scans: Vec<(i32, fs::Look)> = Vec::new();
        for job in jobs {
            if let Some(f) = job.first {
                pictures.insert(job.id, f);
            }
            let before = pictures.get(&job.id);
            match fs::look(&job.path, job.follow, before, job.hash, SystemTime::now()) {
                Ok(look) if look.ident == job.ident => scans.push((job.id, look)),
                // Another directory at the path: the watched one is gone.
                Ok(_) => dropped.push(job.id),
                Err(e) if fs::gone(&e) => dropped.push(job.id),
                // Possibly transient: keep the picture, read again next time.
                Err(_) => {}
            }
        }
        let late: Vec<OsString> = {
            // What was unwatched during the scan says nothing any more.
            let mut t = shared.table.lock();
            scans.retain(|(id, _)| t.dirs.contains_key(id));
            dropped.retain(|id| t.dirs.contains_key(id));
            for id in &dropped {
                if let Some(w) = t.dirs.remove(id) {
                    t.by_ident.remove(&w.ident);
                }
            }
            pictures.retain(|id, _| t.dirs.contains_key(id));
            let late = t.late_cookies_for(barriers);
            // Scans from now on began after every barrier up to here.
            t.late_cookies.retain(|_, n| *n > barriers);
            late
        };
        let mut events = Vec::new();
        for (id, mut look) in scans {
            // A scan reads one directory after another: one during which a
            // sync barrier began may find that barrier's cookie in a
            // directory read late, having read others before the changes
            // the barrier must cover. It leaves those cookies out (the next
            // scan reports them); other barriers' cookies it reports.
            for c in &late {
                look.picture.set(c, None);
                look.modified.retain(|(n, _)| n != c);
            }
            events.push(OsEvent::Listing {
                watch: WatchId(id),
                entries: look.picture.listing(),
                modified: look.modified,
            });
            pictures.insert(id, look.picture);
        }
        if dropped.is_empty() && events.is_empty() {
            continue;
        }
        // Listings first, lost watches last: a lost watch makes the engine
        // look at the disk now, and a listing read earlier in this scan
        // must not undo what that look found (a directory removed after
        // its parent was read would come back).
        let mut all = events;
        all.extend(
            dropped
                .into_iter()
                .map(|id| OsEvent::Dropped { watch: WatchId(id) }),
        );
        let raw = all.len() as u64;
        if !sink.send(OsMsg::events(all, raw, read_at)) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::{Receiver, unbounded};

    fn start(interval: Duration) -> (Poll, Receiver<OsMsg>) {
        let (tx, rx) = unbounded();
        let sink = Sink::new(move |m| tx.send(m).is_ok());
        (Poll::start(sink, interval).unwrap(), rx)
    }

    /// What the next message says: per directory, its listing's names and
    /// its modified names (`!` after a replaced one); a dropped watch as
    /// `<dropped>`.
    fn next(rx: &Receiver<OsMsg>) -> Vec<String> {
        let m = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("a scan's message within 10 s");
        match m.read() {
            super::super::Read::Events { events, .. } => events
                .into_iter()
                .map(|e| match e {
                    OsEvent::Listing {
                        entries, modified, ..
                    } => {
                        let names: Vec<String> = entries
                            .iter()
                            .map(|(n, _)| n.to_string_lossy().into_owned())
                            .collect();
                        let m: Vec<String> = modified
                            .iter()
                            .map(|(n, r)| {
                                format!("{}{}", n.to_string_lossy(), if *r { "!" } else { "" })
                            })
                            .collect();
                        format!("[{}] modified [{}]", names.join(" "), m.join(" "))
                    }
                    OsEvent::Dropped { .. } => "<dropped>".into(),
                    other => panic!("{other:?}"),
                })
                .collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_scan_reports_what_changed_since_the_watch_and_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("old"), "1").unwrap();
        std::fs::write(d.path().join("gone"), "1").unwrap();
        let (mut p, rx) = start(Duration::from_secs(3600));
        let w = p.watch(d.path(), false).unwrap();
        assert_eq!(
            p.watch(d.path(), false).unwrap(),
            w,
            "one watch per directory"
        );
        std::fs::write(d.path().join("new"), "n").unwrap();
        std::fs::write(d.path().join("old"), "longer").unwrap();
        std::fs::remove_file(d.path().join("gone")).unwrap();
        p.look_now();
        assert_eq!(next(&rx), vec!["[new old] modified [old]"]);
        // Every look sends the listing; only what changed is modified.
        p.look_now();
        assert_eq!(next(&rx), vec!["[new old] modified []"]);
        assert_eq!(p.identify(d.path(), false), Some(w));
        assert!(!p.holds_os_watches());
    }

    #[test]
    fn a_directory_gone_or_replaced_loses_its_watch() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        std::fs::create_dir(&a).unwrap();
        let (mut p, rx) = start(Duration::from_secs(3600));
        let w = p.watch(&a, false).unwrap();
        // Another directory at the path (the old one kept elsewhere, so
        // that its inode is not reused at once).
        std::fs::rename(&a, d.path().join("a.old")).unwrap();
        std::fs::create_dir(&a).unwrap();
        p.look_now();
        assert_eq!(next(&rx), vec!["<dropped>"]);
        assert_ne!(
            p.identify(&a, false),
            Some(w),
            "the new directory is not watched"
        );
        let w2 = p.watch(&a, false).unwrap();
        assert_ne!(w2, w, "ids are never reused");
        std::fs::remove_dir(&a).unwrap();
        p.look_now();
        assert_eq!(next(&rx), vec!["<dropped>"]);
        assert!(p.os_watches().unwrap().is_empty());
    }

    #[test]
    fn the_scanner_runs_on_its_interval_without_being_asked() {
        let d = tempfile::tempdir().unwrap();
        let (mut p, rx) = start(Duration::from_millis(10));
        p.watch(d.path(), false).unwrap();
        std::fs::write(d.path().join("f"), "x").unwrap();
        // Scans come by themselves, every 10 ms; one soon sees f.
        while next(&rx) != vec!["[f] modified []"] {}
        let w = p.identify(d.path(), false).unwrap();
        p.unwatch(w);
        std::fs::write(d.path().join("g"), "x").unwrap();
        // A scan that began before the unwatch may still say what it saw
        // then; none after it sees g.
        let deadline = std::time::Instant::now() + Duration::from_millis(100);
        while let Ok(m) = rx.recv_deadline(deadline) {
            if let super::super::Read::Events { events, .. } = m.read() {
                assert!(
                    !format!("{events:?}").contains("\"g\""),
                    "an unwatched directory is not scanned: {events:?}"
                );
            }
        }
        drop(p); // joins the scanner
    }

    #[test]
    fn faults_fail_watch_calls_as_the_os_would() {
        let d = tempfile::tempdir().unwrap();
        let (mut p, _rx) = start(Duration::from_secs(3600));
        p.inject(Fault::Limit(1));
        assert!(p.watch(d.path(), false).unwrap_err().at_limit());
        p.inject(Fault::Fail(1));
        let e = p.watch(d.path(), false).unwrap_err();
        assert!(!e.at_limit() && !e.gone());
        assert!(p.watch(d.path(), false).is_ok());
        assert!(p.watch(&d.path().join("nope"), false).unwrap_err().gone());
    }

    /// A path through which a directory was watched that now leads to a
    /// loop of links has no directory: the watch is lost, not kept as if
    /// the error might pass.
    #[cfg(target_os = "linux")] // `ELOOP` is mapped on Linux only (`fs::open_dir`)
    #[test]
    fn a_watch_whose_path_now_loops_is_lost() {
        let d = tempfile::tempdir().unwrap();
        let (dir, l) = (d.path().join("d"), d.path().join("l"));
        std::fs::create_dir(&dir).unwrap();
        std::os::unix::fs::symlink(&dir, &l).unwrap();
        let (mut p, rx) = start(Duration::from_secs(3600));
        p.watch(&l, true).unwrap();
        std::fs::remove_file(&l).unwrap();
        std::os::unix::fs::symlink("l", &l).unwrap();
        p.look_now();
        assert_eq!(next(&rx), vec!["<dropped>"]);
    }

    #[test]
    fn lost_watches_come_after_the_listings_of_the_same_scan() {
        let d = tempfile::tempdir().unwrap();
        let sub = d.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let (mut p, rx) = start(Duration::from_secs(3600));
        p.watch(d.path(), false).unwrap();
        p.watch(&sub, false).unwrap();
        std::fs::remove_dir(&sub).unwrap();
        p.look_now();
        let got = next(&rx);
        assert_eq!(got.last().map(String::as_str), Some("<dropped>"), "{got:?}");
        assert_eq!(got.len(), 2, "{got:?}");
    }

    #[test]
    fn a_directory_watched_again_at_a_new_path_is_looked_at_there() {
        let d = tempfile::tempdir().unwrap();
        let (z, a) = (d.path().join("z"), d.path().join("a"));
        std::fs::create_dir(&z).unwrap();
        let (mut p, rx) = start(Duration::from_secs(3600));
        let w = p.watch(&z, false).unwrap();
        std::fs::rename(&z, &a).unwrap();
        assert_eq!(p.watch(&a, false).unwrap(), w, "the same directory");
        std::fs::write(a.join("f"), "x").unwrap();
        p.look_now();
        assert_eq!(
            next(&rx),
            vec!["[f] modified []"],
            "looked at through a, not lost"
        );
        // Moved on again: the engine repoints the watch to the path that
        // keeps it.
        let b = d.path().join("b");
        std::fs::rename(&a, &b).unwrap();
        p.repoint(w, &b, false);
        std::fs::write(b.join("g"), "x").unwrap();
        p.look_now();
        assert_eq!(next(&rx), vec!["[f g] modified []"]);
    }

    #[test]
    fn only_cookies_of_barriers_begun_after_a_scan_are_held_back() {
        let mut t = Table::default();
        let c = |s: &str| PathBuf::from(format!("/r/.specwatch-cookie-{s}"));
        let (mut poll, _rx) = start(Duration::from_secs(3600));
        // Through the trait, on a real poller's table...
        poll.barrier(&[c("1")]);
        assert_eq!(poll.shared.table.lock().barriers, 1);
        // ... and the decision itself, on a table of our own.
        t.barriers = 1;
        t.late_cookies.insert(".specwatch-cookie-1".into(), 1);
        t.late_cookies.insert(".specwatch-cookie-2".into(), 2);
        // A scan that began after barrier 1, during barrier 2.
        assert_eq!(
            t.late_cookies_for(1),
            vec![OsString::from(".specwatch-cookie-2")]
        );
        // One that began before both holds both back.
        let mut both = t.late_cookies_for(0);
        both.sort();
        assert_eq!(both.len(), 2);
        // One that began after both holds none back: no starvation.
        assert!(t.late_cookies_for(2).is_empty());
    }
}
