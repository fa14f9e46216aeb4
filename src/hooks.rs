//! Test hooks (cargo feature `test-hooks`, off by default): fault
//! injection and invariant checks for the project's own tests. Not part of
//! the stable API: without the feature none of this exists.

use crate::backend::Fault;
use crate::engine::{Hook, Msg};
use crate::error::{Error, Result};
use crate::manager::Manager;

impl Manager {
    /// Makes the engine behave as if the OS had dropped events (inotify
    /// `IN_Q_OVERFLOW`).
    pub fn inject_overflow(&self) -> Result<()> {
        self.send(Msg::Hook(Hook::Overflow))
    }

    /// The next `n` watch calls of a per-directory backend (native) fail
    /// with an I/O error (to test the retry with backoff).
    pub fn inject_watch_failures(&self, n: u32) -> Result<()> {
        self.send(Msg::Hook(Hook::Fault(Fault::Fail(n))))
    }

    /// The next `n` watch calls, on either backend, fail as they do at the
    /// OS's watch limit (`ENOSPC` from inotify; notify's `MaxFilesWatch` on
    /// the portable backend), through the same error mapping, to test the
    /// polling fallback where the manager's watch cap does not apply.
    pub fn inject_watch_limit(&self, n: u32) -> Result<()> {
        self.send(Msg::Hook(Hook::Fault(Fault::Limit(n))))
    }

    /// Walks from now on cover `size` directories at a time, and read them
    /// on a thread of their own once a walk has covered at least
    /// `reader_after` (by default 64 and 4,096: small trees never start
    /// the thread), so that small test trees take the big trees' path.
    /// Directories watched by a per-directory backend only (native): a
    /// polled directory's first read is its first look, made one at a
    /// time.
    pub fn walk_in_batches(&self, size: usize, reader_after: usize) -> Result<()> {
        self.send(Msg::Hook(Hook::Batches(size, reader_after)))
    }

    /// Holds the engine: it handles nothing (events, calls, polls) until
    /// the returned guard is dropped, while the backend goes on handing
    /// events over (to fill its inbox: `max_queued_events`).
    pub fn hold_engine(&self) -> Result<EngineHold> {
        let (release, held) = crossbeam_channel::bounded(0);
        self.send(Msg::Hook(Hook::Hold(held)))?;
        Ok(EngineHold { _release: release })
    }

    /// Stops the event backend's reader for good, as a failed read does
    /// (native: the inotify reader thread; portable: notify's events are
    /// no longer handed over). The engine restarts the backend
    /// ([`ManagerBuilder::backend_restart`](crate::ManagerBuilder::backend_restart)).
    pub fn inject_reader_failure(&self) -> Result<()> {
        self.send(Msg::Hook(Hook::Fault(Fault::Die)))
    }

    /// The portable backend's OS watches are dropped now, each with an
    /// error naming its path: what notify 9 does when a watch's read
    /// fails for good (on Windows, a ReadDirectoryChangesW that fails).
    /// The engine asks for them again and rescans. Nothing on other
    /// backends.
    pub fn inject_watch_loss(&self) -> Result<()> {
        self.send(Msg::Hook(Hook::Fault(Fault::DropWatches)))
    }

    /// The next `n` restarts of the event backend fail (to test the
    /// back-off).
    pub fn inject_restart_failures(&self, n: u32) -> Result<()> {
        self.send(Msg::Hook(Hook::FailRestarts(n)))
    }

    /// The engine's index invariant violations (empty when consistent).
    pub fn check_index(&self) -> Result<Vec<String>> {
        let (reply, rx) = crossbeam_channel::bounded(1);
        self.send(Msg::Hook(Hook::Check(reply)))?;
        rx.recv().map_err(|_| Error::Engine {
            message: "the engine thread has stopped".into(),
            source: None,
        })
    }

    /// Stops (true) or resumes (false) reading the backend's event queue,
    /// so that a real kernel queue overflow can be provoked. On the
    /// portable backend notify's thread goes on reading (it also serves
    /// the watch calls), and its events are held back from the engine
    /// until the resume hands them over, in order.
    pub fn pause_os_reader(&self, paused: bool) {
        if let Some(p) = &self.engine.pause {
            p.set(paused);
        }
    }

    /// Holds (true) or lets go (false) the event backend's thread, so that
    /// the OS's own buffer overflows for real under a burst: inotify's
    /// reader stops reading (as paused); notify's thread (portable) stops
    /// at its next event, once it has asked the OS for more (notify asks
    /// before handing a read's events over), so that the OS fills that
    /// request's buffer (ReadDirectoryChangesW's 64 KiB; inotify's queue).
    /// Notify's thread also serves the watch calls: while it is held, no
    /// `apply` or `delete` (their calls would wait for it). It lets go by
    /// itself after a minute.
    pub fn hold_os_thread(&self, held: bool) {
        if let Some(p) = &self.engine.pause {
            p.hold(held);
        }
    }
}

/// The engine held by [`Manager::hold_engine`], until this is dropped.
#[must_use = "the engine is held until this is dropped"]
#[derive(Debug)]
pub struct EngineHold {
    _release: crossbeam_channel::Sender<()>,
}
