//! Linux: inotify driven directly.
//!
//! One inotify instance per manager. A reader thread waits on the inotify
//! descriptor (and an eventfd that stops it), reads events as they come, and
//! hands them to the engine over its inbox, so the kernel queue is drained
//! even while the engine is busy reading directories. The engine adds and
//! removes watches itself, through a [`Watches`] handle of the same instance.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::SystemTime;

use inotify::{EventMask, Inotify, WatchMask, Watches};

#[cfg(any(test, feature = "test-hooks"))]
use super::Fault;
use super::{DirWatcher, Faults, Hint, OsEvent, OsMsg, ReaderPause, Sink, WatchError, WatchId};

/// The mask every directory gets: no `IN_OPEN`/`IN_ACCESS`/
/// `IN_CLOSE_NOWRITE` (the engine's own reads would come back as events);
/// `IN_CLOSE_WRITE` (a writer is done: `write_finished`), no following of
/// symlinks (unless `follow`: the ancestors of roots may be symlinks),
/// directories only.
pub(crate) fn mask(follow: bool) -> WatchMask {
    let base = WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MODIFY
        | WatchMask::ATTRIB
        | WatchMask::CLOSE_WRITE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::EXCL_UNLINK
        | WatchMask::ONLYDIR;
    if follow {
        base
    } else {
        base | WatchMask::DONT_FOLLOW
    }
}

/// One inotify event in our vocabulary; `None` for noise (a directory's
/// own modify/attrib events).
fn decode(wd: i32, mask: EventMask, name: Option<&OsStr>) -> Option<OsEvent> {
    let watch = WatchId(wd);
    if mask.contains(EventMask::Q_OVERFLOW) {
        // Events of this read up to the marker arrived; what the queue
        // dropped came after the previous read.
        return Some(OsEvent::Overflow);
    }
    if mask.contains(EventMask::IGNORED) {
        return Some(OsEvent::Dropped { watch });
    }
    match name {
        None => {
            if mask.contains(EventMask::MOVE_SELF) {
                Some(OsEvent::DirSelf { watch, moved: true })
            } else if mask.contains(EventMask::DELETE_SELF) {
                Some(OsEvent::DirSelf {
                    watch,
                    moved: false,
                })
            } else {
                None
            }
        }
        Some(name) => {
            let hint = if mask.intersects(EventMask::MOVED_FROM | EventMask::MOVED_TO) {
                Hint::Moved
            } else if mask.contains(EventMask::DELETE) {
                Hint::Removed
            } else if mask.contains(EventMask::CREATE) {
                Hint::Created
            } else if mask.intersects(EventMask::MODIFY | EventMask::ATTRIB) {
                Hint::Modified
            } else if mask.contains(EventMask::CLOSE_WRITE) {
                Hint::Closed
            } else {
                Hint::Moved
            };
            Some(OsEvent::Entry {
                watch,
                name: name.to_os_string(),
                hint,
            })
        }
    }
}

/// Pairs an `IN_MOVED_FROM` with the `IN_MOVED_TO` of the same cookie: a
/// rename between two directories of one inotify instance queues the two
/// one after the other (maybe in two reads). Its
/// [`Renamed`](OsEvent::Renamed) follows the two ends' own hints.
#[derive(Default)]
struct Pairing {
    /// The last `IN_MOVED_FROM` not paired yet: cookie, watch, name.
    from: Option<(u32, WatchId, std::ffi::OsString)>,
}

impl Pairing {
    /// Sees one event; the pair it completes, if it does.
    fn see(
        &mut self,
        wd: i32,
        mask: EventMask,
        cookie: u32,
        name: Option<&OsStr>,
    ) -> Option<OsEvent> {
        if mask.contains(EventMask::Q_OVERFLOW) {
            self.from = None;
            return None;
        }
        let name = name?;
        if mask.contains(EventMask::MOVED_FROM) {
            self.from = Some((cookie, WatchId(wd), name.to_os_string()));
            return None;
        }
        if !mask.contains(EventMask::MOVED_TO) {
            return None;
        }
        match self.from.take() {
            Some((c, watch, from)) if c == cookie => Some(OsEvent::Renamed {
                from: (watch, from),
                to: (WatchId(wd), name.to_os_string()),
            }),
            other => {
                self.from = other;
                None
            }
        }
    }
}

fn stop_requested(stop: RawFd) -> bool {
    let mut fds = [libc::pollfd {
        fd: stop,
        events: libc::POLLIN,
        revents: 0,
    }];
    // SAFETY: one valid pollfd, zero timeout.
    unsafe { libc::poll(fds.as_mut_ptr(), 1, 0) > 0 }
}

pub(crate) struct Native {
    pause: Arc<ReaderPause>,
    /// Adds watches; holds the inotify descriptor open (the reader thread
    /// holds the other reference).
    watches: Watches,
    /// The inotify descriptor, for removing watches by number: no map from
    /// number to `WatchDescriptor` is kept (the engine has the numbers).
    fd: RawFd,
    stop: OwnedFd,
    reader: Option<JoinHandle<()>>,
    faults: Faults,
}

impl Native {
    pub(crate) fn start(sink: Sink) -> io::Result<Native> {
        let inotify = Inotify::init()?;
        let watches = inotify.watches();
        let fd = inotify.as_raw_fd();
        // SAFETY: eventfd returns a new descriptor or -1.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: efd is a fresh descriptor we own.
        let stop = unsafe { OwnedFd::from_raw_fd(efd) };
        let stop_fd = stop.as_raw_fd();
        let pause = Arc::new(ReaderPause::default());
        let p = pause.clone();
        let reader = std::thread::Builder::new()
            .name("specwatch-inotify".into())
            .spawn(move || read_loop(inotify, stop_fd, sink, &p))?;
        Ok(Native {
            pause,
            watches,
            fd,
            stop,
            reader: Some(reader),
            faults: Faults::default(),
        })
    }

    /// Adds (or re-adds: the kernel returns the same descriptor for the same
    /// inode) a watch on a directory.
    fn add(&mut self, dir: &Path, follow: bool) -> io::Result<WatchId> {
        Ok(WatchId(
            self.watches
                .add(dir, mask(follow))?
                .get_watch_descriptor_id(),
        ))
    }
}

impl DirWatcher for Native {
    fn watch(&mut self, dir: &Path, follow: bool) -> Result<WatchId, WatchError> {
        let result = if self.faults.take_fail() {
            Err(io::Error::other("injected watch failure"))
        } else if self.faults.take_limit() {
            // What inotify_add_watch says at max_user_watches.
            Err(io::Error::from_raw_os_error(libc::ENOSPC))
        } else {
            self.add(dir, follow)
        };
        result.map_err(|e| WatchError::new(e, dir))
    }

    fn identify(&mut self, dir: &Path, follow: bool) -> Option<WatchId> {
        self.add(dir, follow).ok()
    }

    /// One the kernel already dropped gives `EINVAL`, which is fine: the
    /// kernel hands out watch numbers cyclically, so a dropped number is
    /// not reused before the counter wraps.
    fn unwatch(&mut self, id: WatchId) {
        // SAFETY: `fd` is our inotify descriptor, kept open by `watches`.
        unsafe {
            libc::inotify_rm_watch(self.fd, id.0);
        }
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn inject(&mut self, fault: Fault) {
        if fault == Fault::Die {
            self.pause.kill();
            self.wake_reader();
        }
        self.faults.set(fault);
    }

    /// From `/proc/self/fdinfo`; `None` where that cannot be read.
    #[cfg(any(test, feature = "test-hooks"))]
    fn os_watches(&self) -> Option<Vec<WatchId>> {
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", self.fd)).ok()?;
        Some(
            info.lines()
                .filter_map(|l| l.strip_prefix("inotify wd:"))
                .filter_map(|rest| rest.split_whitespace().next())
                .filter_map(|hex| i32::from_str_radix(hex, 16).ok())
                .map(WatchId)
                .collect(),
        )
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn pause(&self) -> Option<Arc<ReaderPause>> {
        Some(self.pause.clone())
    }
}

impl Native {
    /// Wakes the reader from its `poll`: it stops (and, killed, says so).
    fn wake_reader(&self) {
        let one: u64 = 1;
        // SAFETY: writing 8 bytes from a valid u64 to our eventfd.
        unsafe {
            libc::write(
                self.stop.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            );
        }
    }
}

impl Drop for Native {
    fn drop(&mut self) {
        self.pause.set(false);
        self.wake_reader();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        // The reader thread owned the Inotify; `watches` holds the last
        // reference to the descriptor, which closes now.
    }
}

fn read_loop(mut inotify: Inotify, stop: RawFd, sink: Sink, pause: &ReaderPause) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut pairing = Pairing::default();
    loop {
        pause.wait_while_paused(|| stop_requested(stop));
        let mut fds = [
            libc::pollfd {
                fd: inotify.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: stop,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: fds is a valid array of two pollfd.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            sink.send(OsMsg::failed(format!("inotify poll failed: {e}")));
            return;
        }
        if fds[1].revents != 0 {
            #[cfg(any(test, feature = "test-hooks"))]
            if pause.is_dead() {
                sink.send(OsMsg::failed(
                    "the inotify reader was stopped (injected)".into(),
                ));
            }
            return;
        }
        // A pause asked for while blocked in `poll` holds from the next
        // read on (the test hook must not let a whole queue through).
        while !pause.is_paused() {
            // Taken before the read: every event still queued after this
            // read was queued after this moment (used to bound what an
            // overflow may have hidden).
            let read_at = SystemTime::now();
            match inotify.read_events(&mut buf) {
                Ok(read) => {
                    let mut raw = 0;
                    let mut events: Vec<OsEvent> = Vec::new();
                    for e in read {
                        raw += 1;
                        let wd = e.wd.get_watch_descriptor_id();
                        events.extend(decode(wd, e.mask, e.name));
                        events.extend(pairing.see(wd, e.mask, e.cookie, e.name));
                    }
                    if !sink.send(OsMsg::events(events, raw, read_at)) {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    sink.send(OsMsg::failed(format!("inotify read failed: {e}")));
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `IN_MOVED_FROM` and `IN_MOVED_TO` of one cookie make a pair, also
    /// across reads and with other events between; other cookies, an
    /// overflow between them, or a half alone do not.
    #[test]
    fn moves_pair_by_cookie() {
        let mut p = Pairing::default();
        let n = |s| Some(OsStr::new(s));
        assert!(p.see(1, EventMask::MOVED_FROM, 9, n("a")).is_none());
        assert!(p.see(1, EventMask::CREATE, 0, n("x")).is_none());
        match p.see(2, EventMask::MOVED_TO | EventMask::ISDIR, 9, n("b")) {
            Some(OsEvent::Renamed { from, to }) => {
                assert_eq!(from, (WatchId(1), "a".into()));
                assert_eq!(to, (WatchId(2), "b".into()));
            }
            other => panic!("{other:?}"),
        }
        // Used once.
        assert!(p.see(2, EventMask::MOVED_TO, 9, n("c")).is_none());
        assert!(p.see(1, EventMask::MOVED_FROM, 10, n("a")).is_none());
        assert!(p.see(1, EventMask::MOVED_TO, 11, n("b")).is_none());
        assert!(p.see(1, EventMask::Q_OVERFLOW, 0, None).is_none());
        assert!(p.see(1, EventMask::MOVED_TO, 10, n("b")).is_none());
    }

    fn entry(mask: EventMask) -> Hint {
        match decode(3, mask, Some(OsStr::new("n"))) {
            Some(OsEvent::Entry { watch, name, hint }) => {
                assert_eq!((watch, name.to_str()), (WatchId(3), Some("n")));
                hint
            }
            other => panic!("{mask:?}: {other:?}"),
        }
    }

    /// Every mask the native backend asks for decodes to the hint the
    /// engine expects; renames win over the rest.
    #[test]
    fn masks_decode_to_hints() {
        assert_eq!(entry(EventMask::CREATE), Hint::Created);
        assert_eq!(entry(EventMask::CREATE | EventMask::ISDIR), Hint::Created);
        assert_eq!(entry(EventMask::DELETE), Hint::Removed);
        assert_eq!(entry(EventMask::MODIFY), Hint::Modified);
        assert_eq!(entry(EventMask::ATTRIB), Hint::Modified);
        assert_eq!(entry(EventMask::MOVED_FROM), Hint::Moved);
        assert_eq!(entry(EventMask::MOVED_TO | EventMask::ISDIR), Hint::Moved);
        assert_eq!(entry(EventMask::CLOSE_WRITE), Hint::Closed);
        assert_eq!(entry(EventMask::ACCESS), Hint::Moved, "unknown: look");
        assert!(matches!(
            decode(-1, EventMask::Q_OVERFLOW, None),
            Some(OsEvent::Overflow)
        ));
        assert!(matches!(
            decode(4, EventMask::IGNORED, None),
            Some(OsEvent::Dropped { watch: WatchId(4) })
        ));
        assert!(matches!(
            decode(4, EventMask::MOVE_SELF, None),
            Some(OsEvent::DirSelf { moved: true, .. })
        ));
        assert!(matches!(
            decode(4, EventMask::DELETE_SELF, None),
            Some(OsEvent::DirSelf { moved: false, .. })
        ));
        // A directory's own modify/attrib events are noise.
        assert!(decode(4, EventMask::ATTRIB | EventMask::ISDIR, None).is_none());
        assert!(!mask(false).contains(WatchMask::OPEN), "never IN_OPEN");
        assert!(mask(false).contains(WatchMask::DONT_FOLLOW));
        assert!(!mask(true).contains(WatchMask::DONT_FOLLOW));
    }
}
