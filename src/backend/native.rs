//! Linux: inotify driven directly.
//!
//! One inotify instance per manager. A reader thread waits on the inotify
//! descriptor (and an eventfd that stops it), reads events as they come, and
//! hands them to the engine over its inbox, so the kernel queue is drained
//! even while the engine is busy reading directories. The engine adds and
//! removes watches itself, through a [`Watches`] handle of the same instance.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::SystemTime;

use parking_lot::{Condvar, Mutex};

use crossbeam_channel::Sender;
use inotify::{EventMask, Inotify, WatchMask, Watches};

use super::RawEvent;
use crate::engine::Msg;

/// The mask every directory gets: no `IN_OPEN`/`IN_ACCESS`/`IN_CLOSE_*`
/// (the engine's own reads would come back as events), no following of
/// symlinks (unless `follow`: the ancestors of roots may be symlinks),
/// directories only.
pub(crate) fn mask(follow: bool) -> WatchMask {
    let base = WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MODIFY
        | WatchMask::ATTRIB
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

pub(crate) const IN_Q_OVERFLOW: u32 = EventMask::Q_OVERFLOW.bits();
pub(crate) const IN_IGNORED: u32 = EventMask::IGNORED.bits();
pub(crate) const IN_CREATE: u32 = EventMask::CREATE.bits();
pub(crate) const IN_DELETE: u32 = EventMask::DELETE.bits();
pub(crate) const IN_MODIFY: u32 = EventMask::MODIFY.bits();
pub(crate) const IN_ATTRIB: u32 = EventMask::ATTRIB.bits();
pub(crate) const IN_MOVED_FROM: u32 = EventMask::MOVED_FROM.bits();
pub(crate) const IN_MOVED_TO: u32 = EventMask::MOVED_TO.bits();
pub(crate) const IN_DELETE_SELF: u32 = EventMask::DELETE_SELF.bits();
pub(crate) const IN_MOVE_SELF: u32 = EventMask::MOVE_SELF.bits();

/// A switch that makes the reader stop reading (test hook: lets the kernel
/// queue overflow for real without touching machine-wide settings).
#[derive(Default)]
pub(crate) struct ReaderPause {
    paused: Mutex<bool>,
    resumed: Condvar,
}

impl ReaderPause {
    pub(crate) fn set(&self, paused: bool) {
        *self.paused.lock() = paused;
        self.resumed.notify_all();
    }

    fn wait_while_paused(&self, stop: RawFd) {
        let mut p = self.paused.lock();
        while *p {
            if stop_requested(stop) {
                return;
            }
            self.resumed
                .wait_for(&mut p, std::time::Duration::from_millis(50));
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
    pub(crate) pause: Arc<ReaderPause>,
    /// Adds watches; holds the inotify descriptor open (the reader thread
    /// holds the other reference).
    watches: Watches,
    /// The inotify descriptor, for removing watches by number: no map from
    /// number to `WatchDescriptor` is kept (the engine has the numbers).
    fd: RawFd,
    stop: OwnedFd,
    reader: Option<JoinHandle<()>>,
}

impl Native {
    pub(crate) fn start(inbox: Sender<Msg>) -> io::Result<Native> {
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
            .spawn(move || read_loop(inotify, stop_fd, inbox, &p))?;
        Ok(Native {
            pause,
            watches,
            fd,
            stop,
            reader: Some(reader),
        })
    }

    /// Adds (or re-adds: the kernel returns the same descriptor for the same
    /// inode) a watch on a directory.
    pub(crate) fn add(&mut self, dir: &Path, follow: bool) -> io::Result<i32> {
        Ok(self
            .watches
            .add(dir, mask(follow))?
            .get_watch_descriptor_id())
    }

    /// The watch numbers the kernel holds for our descriptor, from
    /// `/proc/self/fdinfo` (for the index checks of tests); `None` where
    /// that cannot be read.
    pub(crate) fn kernel_watches(&self) -> Option<Vec<i32>> {
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", self.fd)).ok()?;
        Some(
            info.lines()
                .filter_map(|l| l.strip_prefix("inotify wd:"))
                .filter_map(|rest| rest.split_whitespace().next())
                .filter_map(|hex| i32::from_str_radix(hex, 16).ok())
                .collect(),
        )
    }

    /// Removes a watch. One the kernel already dropped gives `EINVAL`,
    /// which is fine: the kernel hands out watch numbers cyclically, so a
    /// dropped number is not reused before the counter wraps.
    pub(crate) fn remove(&mut self, id: i32) {
        // SAFETY: `fd` is our inotify descriptor, kept open by `watches`.
        unsafe {
            libc::inotify_rm_watch(self.fd, id);
        }
    }
}

impl Drop for Native {
    fn drop(&mut self) {
        self.pause.set(false);
        let one: u64 = 1;
        // SAFETY: writing 8 bytes from a valid u64 to our eventfd.
        unsafe {
            libc::write(
                self.stop.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            );
        }
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        // The reader thread owned the Inotify; `watches` holds the last
        // reference to the descriptor, which closes now.
    }
}

fn read_loop(mut inotify: Inotify, stop: RawFd, inbox: Sender<Msg>, pause: &ReaderPause) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        pause.wait_while_paused(stop);
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
            let _ = inbox.send(Msg::BackendError(format!("inotify poll failed: {e}")));
            return;
        }
        if fds[1].revents != 0 {
            return;
        }
        loop {
            // Taken before the read: every event still queued after this
            // read was queued after this moment (used to bound what an
            // overflow may have hidden).
            let read_at = SystemTime::now();
            match inotify.read_events(&mut buf) {
                Ok(events) => {
                    let batch: Vec<RawEvent> = events
                        .map(|e| RawEvent {
                            wd: e.wd.get_watch_descriptor_id(),
                            mask: e.mask.bits(),
                            name: e.name.map(|n| n.to_os_string()),
                        })
                        .collect();
                    if inbox.send(Msg::Inotify(batch, read_at)).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let _ = inbox.send(Msg::BackendError(format!("inotify read failed: {e}")));
                    return;
                }
            }
        }
    }
}
