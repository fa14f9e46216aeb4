//! Restarting the event backend: its reader stopped (a failed read, an
//! error of the OS), so every spec is `Degraded` while a new backend is
//! started after a back-off that doubles per failed attempt; the new one
//! gets every watch the index needs, then every directory is read again
//! and the net changes since the last complete read are reported, as
//! after a kernel queue overflow. The schedule is `recovery.rs`'s; the
//! backend itself, `watches.rs`'s.

use super::Engine;
use super::trace;
use crate::backend;

impl Engine {
    /// The backend's reader stopped for good, saying `error`. A manager
    /// that can start another (the engine's own tests cannot) restarts
    /// it; else every spec fails.
    pub(super) fn backend_failed(&mut self, error: &str) {
        if self.respawn.is_none() {
            self.out.fail(error, self.clock.wall());
            return;
        }
        trace::event!(WARN, error, "the event backend stopped: restarting it");
        let all = self.specs.ids();
        self.recovery
            .backend_down(error.to_owned(), self.clock.now(), &all);
    }

    /// Starts a new backend if one is due: on success every watch is
    /// asked for again and everything read again; on failure the next
    /// try waits longer.
    pub(super) fn restart_due(&mut self) {
        let Some(down) = self.recovery.restart_due(self.clock.now()) else {
            return;
        };
        let Some((choice, sink)) = &self.respawn else {
            return;
        };
        let all = self.specs.ids();
        let started = match self.recovery.take_injected_restart_failure() {
            true => Err(format!("cannot start {choice}: injected failure")),
            false => backend::start(*choice, sink.clone())
                .map_err(|e| format!("cannot start {}: {}", e.what, e.error)),
        };
        let os = match started {
            Ok(os) => os,
            Err(error) => {
                trace::event!(WARN, error = %error, attempt = down.attempts, "restart failed");
                self.recovery.backend_down(error, self.clock.now(), &all);
                return;
            }
        };
        trace::event!(INFO, attempts = down.attempts, "event backend restarted");
        drop(self.watches.replace_backend(os));
        let dirs = self.index.ids();
        self.watch_again(dirs);
        self.recovery.backend_up(&all);
        // Nothing was read since the last complete read: what changed
        // since is found as after lost events.
        self.lost_after(down.complete_read);
    }
}
