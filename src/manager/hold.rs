//! Holds a program declares: [`Manager::hold`] and its guard,
//! [`HoldGuard`]. What a hold does is the engine's (`engine/holds.rs`);
//! the scope and what a spec does under one are `hold.rs`'s.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_channel::{RecvTimeoutError, Sender};

use super::Manager;
use crate::engine::Msg;
use crate::error::{Error, Result};
use crate::hold::HoldScope;

/// Hold ids, unique in the process.
static NEXT_HOLD: AtomicU64 = AtomicU64::new(1);

/// How long [`Manager::hold`] waits for the hold to take effect at most
/// (the engine's barriers give up after 5 s: this is only ever reached
/// by an engine busy with something else).
const HOLD_WAIT: Duration = Duration::from_secs(30);

/// A hold a program declared ([`Manager::hold`]): while it lives, the
/// specs it is on hold their batches. Dropping it ends the hold; that
/// never waits on the engine (it sends a message and returns).
///
/// `Send` and `Sync`: it may be dropped on any thread. A guard that
/// outlives its manager ends nothing (the engine is gone).
#[must_use = "the hold ends when the guard is dropped"]
pub struct HoldGuard {
    id: u64,
    /// The engine's inbox (taken by `release`).
    engine: Option<Sender<Msg>>,
}

impl std::fmt::Debug for HoldGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HoldGuard").field("id", &self.id).finish()
    }
}

impl HoldGuard {
    /// Ends the hold, as dropping the guard does, and waits until what it
    /// held has been closed, delivered or dropped (for a spec that
    /// compares contents, its files' hashes may still be being read):
    /// every change made after this returns is out of the hold. (A dropped guard ends it without
    /// waiting: a change made within the moment the engine takes to hear
    /// of the drop, usually well under a millisecond, may still count as
    /// held.) Returns within the time the release's barriers take, at
    /// most the specs' `hold_bound`.
    ///
    /// # Errors
    ///
    /// [`Error::EngineBusy`] if the engine did not answer within 30 s;
    /// [`Error::Engine`] if it has stopped (the hold is over either way).
    pub fn release(mut self) -> Result<()> {
        let (reply, done) = crossbeam_channel::bounded(1);
        // The one message the guard sends: its drop sends none after.
        let sent = self.engine.take().is_some_and(|e| {
            e.send(Msg::Unhold {
                id: self.id,
                reply: Some(reply),
            })
            .is_ok()
        });
        if !sent {
            return Err(stopped());
        }
        match done.recv_timeout(HOLD_WAIT) {
            Ok(()) => Ok(()),
            Err(RecvTimeoutError::Timeout) => Err(Error::EngineBusy {
                waited_for: "the hold's release",
                timeout: HOLD_WAIT,
            }),
            Err(RecvTimeoutError::Disconnected) => Err(stopped()),
        }
    }
}

fn stopped() -> Error {
    Error::Engine {
        message: "the engine thread has stopped".into(),
        source: None,
    }
}

impl Drop for HoldGuard {
    fn drop(&mut self) {
        // An unbounded channel: never waits.
        if let Some(e) = self.engine.take() {
            let _ = e.send(Msg::Unhold {
                id: self.id,
                reply: None,
            });
        }
    }
}

impl Manager {
    /// Declares a hold on `scope` (a spec's name, or [`HoldScope::All`]),
    /// called `label` in the status, for as long as the returned guard
    /// lives: the spec's changes are held as its
    /// [`during_holds`](crate::WatchOptions::during_holds) says, deferred
    /// into one batch delivered once the guard is dropped (the default),
    /// or dropped. As Watchman's `state-enter` and `state-leave`, for a
    /// program that writes into a tree it watches (a code generator, a
    /// formatter, a build whose outputs land there) and must not react to
    /// its own writes, or wants them as one batch.
    ///
    /// - **What is held**: every change made after this returns and
    ///   before the guard is dropped, whoever made it (the OS does not say
    ///   who wrote a file). A change made before the call is not: the
    ///   call first passes a barrier of each spec it is on (as
    ///   [`sync`](Manager::sync) does), delivering what came before. Once
    ///   the guard is dropped another barrier passes (every change made
    ///   before the drop is in), then the held batch is delivered, or
    ///   dropped, at once.
    /// - **Bounded**: a guard kept longer than a spec's
    ///   [`hold_bound`](crate::WatchOptions::hold_bound) is `overdue` in
    ///   its [`WatchStatus::holds`](crate::WatchStatus::holds); what it
    ///   held goes (delivered or dropped), and batches flow as if it were
    ///   not there, until it is dropped.
    /// - **Scope**: a name is a name. A hold on a name no spec has (yet)
    ///   holds nothing until a spec of that name is applied, which is
    ///   held from its start; a spec updated while held is held in its
    ///   new generation too (the old generation's last batch is delivered,
    ///   or dropped, as the hold's end would); a spec deleted while held
    ///   loses its pending changes as any deletion does, and one applied
    ///   again under that name is held.
    /// - A [`sync`](Manager::sync) of a held spec closes its held batch as
    ///   the hold's end would (delivered, or dropped); the hold goes on.
    ///   Several holds may be on a spec: it is held while one of them
    ///   (not overdue) lives.
    ///
    /// Returns once the hold is in effect: within the time its barriers
    /// take (a cookie file's round trip; a poll of the spec's polled
    /// directories), 5 s at most for a spec whose storage does not answer
    /// (then it is in effect anyway).
    ///
    /// ```
    /// use specwatch::{DuringHolds, Manager, WatchSpec};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let m = Manager::new()?;
    /// m.apply("src", WatchSpec::new([dir.path()]).during_holds(DuringHolds::Drop))?;
    /// let guard = m.hold("src", "codegen")?;
    /// std::fs::write(dir.path().join("generated.rs"), "// generated")?;
    /// drop(guard); // what was written meanwhile is in no batch
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Engine`] if the engine has stopped;
    /// [`Error::EngineBusy`] if it did not take the hold within 30 s (it
    /// is then let go as soon as it is taken).
    pub fn hold(&self, scope: impl Into<HoldScope>, label: impl Into<String>) -> Result<HoldGuard> {
        self.check_alive()?;
        let id = NEXT_HOLD.fetch_add(1, Ordering::Relaxed);
        let (reply, taken) = crossbeam_channel::bounded(1);
        self.send(Msg::Hold {
            id,
            scope: scope.into(),
            label: label.into(),
            reply,
        })?;
        // Made now: dropped on failure, it ends the hold once taken.
        let guard = HoldGuard {
            id,
            engine: Some(self.engine.sender()),
        };
        match taken.recv_timeout(HOLD_WAIT) {
            Ok(()) => Ok(guard),
            Err(RecvTimeoutError::Timeout) => Err(Error::EngineBusy {
                waited_for: "the hold to take effect",
                timeout: HOLD_WAIT,
            }),
            Err(RecvTimeoutError::Disconnected) => {
                self.check_alive()?;
                Err(Error::Engine {
                    message: "the engine thread stopped before taking the hold".into(),
                    source: None,
                })
            }
        }
    }
}
