//! The probes: `GET /health` (liveness) and `GET /ready` (readiness), as
//! Kubernetes reads them. A failing liveness probe restarts the pod; a
//! failing readiness probe takes it out of the Service's endpoints (no
//! new requests) until it passes again. So liveness fails only for what
//! a restart mends, and readiness only for what makes *this* replica
//! answer worse than another could.
//!
//! **Liveness** ([`liveness`]): 200 unless the watch has `Failed` (the
//! engine stopped for good: nothing will be reported again), the storage
//! is no longer watched at all, or the thread that applies change
//! batches to the index has stopped (the index would never change
//! again). The storage's own trouble never fails it: every replica on
//! the shared storage would fail together and be restarted together,
//! which mends nothing.
//!
//! **Readiness** ([`readiness`]), the index is built (this server answers
//! nothing before its first index is built: `LISTENING` comes after) and
//! the storage answers. Per state of the storage watch
//! ([`specwatch::Phase`], [`specwatch::WatchStatus`]) and of the server:
//!
//! | state | ready | why that is right for a load balancer |
//! |---|---|---|
//! | `Watching` | yes | |
//! | `Degraded`: directories polled for want of OS watches (`polled_dirs`; inotify's limit) | yes | every request is answered rightly; changes show up to a poll interval later. Every replica on the same tree hits the same limit: failing would empty the Service |
//! | `Degraded`: directories at or below followed symlinks polled | yes | the same |
//! | `Degraded`: a directory below the root cannot be read or watched (permissions, an I/O error there) | yes | the rest is served rightly, that tenant as last known, and it is retried with back-off; another replica reads the same storage and fares no better |
//! | `Degraded`: the storage is unmounted ("storage gone", [`specwatch::RootStatus::unmounted_since`]) | **no** | this replica's mount went (an NFS client on one node): its writes are refused (503) and its index is frozen; a replica on another node may still have it |
//! | `Degraded`: "storage not answering" (a poll under way past the storage deadline) | **no** | downloads and writes would hang on it; requests pile up here |
//! | `Degraded`: the event backend stopped (its reader failed; being restarted) | **no** | nothing is reported until it restarts: the index goes stale and read-your-writes waits time out; it is this process's own trouble, another replica is unaffected |
//! | the root cannot be read: removed, `EIO`, `ESTALE`, permission (this server's own look, below) | **no** | nothing can be served from it, nor stored |
//! | a look at the root under way for more than [`LOOK_WAIT`] | **no** | the storage hangs (a stopped NFS server): requests would hang |
//! | `Starting` (a root walked again after it came back) | **no** | the index is being rebuilt |
//! | `Failed`, not watched, the batch-applying thread stopped | **no** | (and not live: a restart mends it) |
//!
//! Each unready state of the storage's makes every replica on a storage
//! that is really down unready together, and that is what readiness is
//! for: the Service has no endpoint rather than endpoints that hang or
//! serve a frozen index, and no pod is restarted (liveness holds).
//!
//! **The look at the root.** The watch reports a hung or failing poll of
//! a *polled* root; a root the OS watches is never looked at on its own
//! schedule. So each `/ready` looks itself: it reads the first entry of
//! the root directory on a thread of its own ([`RootLook`]), waiting at
//! most [`LOOK_WAIT`] for it (a probe's default timeout is 1 s). One look
//! at a time: requests that come while one is under way wait for that
//! one (a look that hangs on a dead mount holds one thread, never more,
//! and a flood of probes costs one look at a time).
//!
//! The state names in the JSON (`"cause"`) and the reason (`"reason"`,
//! the watch's own words) say which row applies.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use specwatch::{Manager, Phase, WatchStatus};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::http::{Reply, json};
use crate::server::SPEC;

/// How long `/ready` waits for a look at the root before it says the
/// storage is not answering.
pub const LOOK_WAIT: Duration = Duration::from_millis(500);

/// What the index follows.
///
/// Issue 33 (replicas following another replica's feed) adds a variant
/// here, and with it a rule in [`readiness`]: a replica that follows a
/// feed is ready when it has caught up with the feed, or, while the feed
/// is down, when it watches the storage itself and the storage rules
/// below say ready. Until then every replica follows its own watch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Follows {
    /// The storage watch, through this replica's own change batches.
    #[default]
    Storage,
}

/// Why a replica is not live or not ready: the `"cause"` of the probes'
/// JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The thread that applies batches to the index has stopped.
    FollowerStopped,
    /// The storage is not watched (its spec is gone, the engine stopped).
    NotWatched,
    /// The watch `Failed`.
    Failed,
    /// The watch is (re)starting: its index is being built.
    Starting,
    /// The storage's file system is unmounted.
    StorageGone,
    /// The storage does not answer (a poll or a look hangs).
    StorageNotAnswering,
    /// The root cannot be read.
    StorageFailing,
    /// The event backend stopped and is being restarted.
    BackendStopped,
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::FollowerStopped => "follower_stopped",
            Cause::NotWatched => "not_watched",
            Cause::Failed => "failed",
            Cause::Starting => "starting",
            Cause::StorageGone => "storage_gone",
            Cause::StorageNotAnswering => "storage_not_answering",
            Cause::StorageFailing => "storage_failing",
            Cause::BackendStopped => "backend_stopped",
        }
    }
}

/// The last look at the root, as `/ready` uses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Look {
    /// The root could be read.
    Ok,
    /// It could not, saying why.
    Failed(String),
    /// A look has been under way this long (at least [`LOOK_WAIT`]).
    Hanging(Duration),
}

/// What a probe sees: the storage watch's status (`None`: not watched),
/// whether the batch-applying thread lives, and the last look at the
/// root (for readiness).
#[derive(Clone, Copy, Debug)]
pub struct Facts<'a> {
    pub follows: Follows,
    pub status: Option<&'a WatchStatus>,
    pub follower_alive: bool,
    pub look: &'a Look,
}

/// A probe's verdict: whether it passes, and if not why (a cause and
/// words).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub pass: bool,
    pub cause: Option<(Cause, String)>,
}

impl Verdict {
    fn pass() -> Verdict {
        Verdict {
            pass: true,
            cause: None,
        }
    }

    fn fail(cause: Cause, why: impl Into<String>) -> Verdict {
        Verdict {
            pass: false,
            cause: Some((cause, why.into())),
        }
    }
}

/// `phase` as the probes' JSON names it.
fn phase_name(status: Option<&WatchStatus>) -> &'static str {
    match status.map(|s| &s.phase) {
        None => "none",
        Some(Phase::Starting) => "starting",
        Some(Phase::Watching) => "watching",
        Some(Phase::Degraded { .. }) => "degraded",
        Some(Phase::Failed { .. }) => "failed",
        Some(_) => "unknown",
    }
}

/// The watch's own words for its phase: a `Degraded` phase's reason, a
/// `Failed` one's error.
fn phase_reason(status: Option<&WatchStatus>) -> Option<&str> {
    match status.map(|s| &s.phase) {
        Some(Phase::Degraded { reason }) => Some(reason),
        Some(Phase::Failed { error }) => Some(error),
        _ => None,
    }
}

/// Liveness: fails only for what a restart mends (see the module's docs).
pub fn liveness(f: &Facts<'_>) -> Verdict {
    if !f.follower_alive {
        return Verdict::fail(
            Cause::FollowerStopped,
            "the thread that applies change batches to the index has stopped",
        );
    }
    match f.status.map(|s| &s.phase) {
        None => Verdict::fail(Cause::NotWatched, "the storage directory is not watched"),
        Some(Phase::Failed { error }) => {
            Verdict::fail(Cause::Failed, format!("the watch failed: {error}"))
        }
        _ => Verdict::pass(),
    }
}

/// The parts of a `Degraded` reason that make a replica unready, in the
/// library's words (it joins its parts with `; `, the hung storage's
/// first): "storage not answering: ..." and "the event backend stopped
/// (...)". The other facts come from the status's fields.
fn degraded_cause(reason: &str) -> Option<Cause> {
    if reason.starts_with("storage not answering") {
        Some(Cause::StorageNotAnswering)
    } else if reason.starts_with("the event backend stopped")
        || reason.contains("; the event backend stopped (")
    {
        Some(Cause::BackendStopped)
    } else {
        None
    }
}

/// Readiness: the table of the module's docs, in its order.
pub fn readiness(f: &Facts<'_>) -> Verdict {
    let live = liveness(f);
    if !live.pass {
        return live;
    }
    match f.follows {
        Follows::Storage => storage_readiness(f),
    }
}

/// Readiness while following the storage watch.
fn storage_readiness(f: &Facts<'_>) -> Verdict {
    let Some(status) = f.status else {
        return Verdict::fail(Cause::NotWatched, "the storage directory is not watched");
    };
    if let Some(root) = status.roots.iter().find(|r| r.unmounted_since.is_some()) {
        return Verdict::fail(
            Cause::StorageGone,
            format!(
                "the storage {} is not mounted: writes are refused and the index is as it \
                 was",
                root.path.display()
            ),
        );
    }
    match &status.phase {
        Phase::Starting => {
            return Verdict::fail(Cause::Starting, "the storage watch is (re)starting");
        }
        Phase::Degraded { reason } => {
            if let Some(cause) = degraded_cause(reason) {
                return Verdict::fail(cause, reason.clone());
            }
        }
        _ => {}
    }
    match f.look {
        Look::Ok => Verdict::pass(),
        Look::Failed(why) => Verdict::fail(
            Cause::StorageFailing,
            format!("the storage directory cannot be read: {why}"),
        ),
        Look::Hanging(d) => Verdict::fail(
            Cause::StorageNotAnswering,
            format!("a look at the storage directory has been under way for {d:?}"),
        ),
    }
}

/// Looks at the root directory on a thread of its own, one look at a
/// time: see the module's docs.
pub struct RootLook {
    root: PathBuf,
    state: Mutex<LookState>,
    /// Counts the looks done (wakes the requests waiting for one).
    done: watch::Sender<u64>,
}

#[derive(Default)]
struct LookState {
    /// What the last look found.
    last: Option<Result<(), String>>,
    /// When the look under way began.
    running: Option<Instant>,
}

impl RootLook {
    pub fn new(root: PathBuf) -> Arc<RootLook> {
        Arc::new(RootLook {
            root,
            state: Mutex::new(LookState::default()),
            done: watch::Sender::new(0),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LookState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What a look made now finds (or the one under way, if one is),
    /// waited for at most [`LOOK_WAIT`].
    pub async fn look(self: &Arc<Self>) -> Look {
        // Subscribed first: a look that ends from now on wakes this.
        let mut done = self.done.subscribe();
        let start = {
            let mut s = self.state();
            let start = s.running.is_none();
            if start {
                s.running = Some(Instant::now());
            }
            start
        };
        if start {
            let me = Arc::clone(self);
            let spawned = std::thread::Builder::new()
                .name("root-look".into())
                .spawn(move || me.run());
            if let Err(e) = spawned {
                self.state().running = None;
                return Look::Failed(format!("cannot start a thread to look at it: {e}"));
            }
        }
        let ended = matches!(
            tokio::time::timeout(LOOK_WAIT, done.changed()).await,
            Ok(Ok(()))
        );
        let s = self.state();
        match (ended, s.running, &s.last) {
            (false, Some(since), _) => Look::Hanging(since.elapsed()),
            (_, _, Some(Ok(()))) => Look::Ok,
            (_, _, Some(Err(e))) => Look::Failed(e.clone()),
            (_, _, None) => Look::Hanging(LOOK_WAIT),
        }
    }

    /// One look (on its own thread).
    fn run(&self) {
        let result = look_at(&self.root);
        {
            let mut s = self.state();
            s.running = None;
            s.last = Some(result);
        }
        self.done.send_modify(|n| *n += 1);
    }
}

/// Opens `root` and reads its first entry.
fn look_at(root: &Path) -> Result<(), String> {
    let mut entries = fs::read_dir(root).map_err(|e| format!("{}: {e}", root.display()))?;
    match entries.next() {
        Some(Err(e)) => Err(format!("{}: {e}", root.display())),
        _ => Ok(()),
    }
}

/// The probes of one server: the watch, the thread that applies its
/// batches (alive while `applied` has a sender), the root's look.
pub struct Probes {
    manager: Arc<Manager>,
    applied: watch::Receiver<u64>,
    look: Arc<RootLook>,
    follows: Follows,
    /// The last readiness said, to log its changes.
    was_ready: AtomicBool,
}

impl Probes {
    pub fn new(root: PathBuf, manager: Arc<Manager>, applied: watch::Receiver<u64>) -> Probes {
        Probes {
            manager,
            applied,
            look: RootLook::new(root),
            follows: Follows::Storage,
            was_ready: AtomicBool::new(true),
        }
    }

    fn follower_alive(&self) -> bool {
        self.applied.has_changed().is_ok()
    }

    /// `GET /health`: 200 `{"healthy":true}` (with the phase and the
    /// watch's reason when it is not `Watching`), or 503 with the cause.
    pub fn health(&self) -> Reply {
        let status = self.manager.status(SPEC);
        let facts = Facts {
            follows: self.follows,
            status: status.as_ref(),
            follower_alive: self.follower_alive(),
            look: &Look::Ok,
        };
        let v = liveness(&facts);
        let mut body = json!({ "healthy": v.pass });
        describe(&mut body, status.as_ref(), &v);
        json(if v.pass { 200 } else { 503 }, &body)
    }

    /// `GET /ready`: 200 `{"ready":true,...}` or 503 with the cause; the
    /// phase, the watch's reason and the index's `seq` in both. Logs each
    /// change of readiness.
    pub async fn ready(&self) -> Reply {
        let look = self.look.look().await;
        let status = self.manager.status(SPEC);
        let facts = Facts {
            follows: self.follows,
            status: status.as_ref(),
            follower_alive: self.follower_alive(),
            look: &look,
        };
        let v = readiness(&facts);
        let mut body = json!({ "ready": v.pass, "seq": *self.applied.borrow() });
        describe(&mut body, status.as_ref(), &v);
        if self.was_ready.swap(v.pass, Ordering::Relaxed) != v.pass {
            match &v.cause {
                Some((cause, why)) => warn!("not ready ({}): {why}", cause.as_str()),
                None => info!("ready again"),
            }
        }
        json(if v.pass { 200 } else { 503 }, &body)
    }
}

/// Adds the phase (unless `Watching`, for a verdict that passes), the
/// watch's reason, and a failing verdict's cause and words to `body`.
fn describe(body: &mut Value, status: Option<&WatchStatus>, v: &Verdict) {
    let phase = phase_name(status);
    if !(v.pass && phase == "watching") {
        body["phase"] = json!(phase);
    }
    if let Some(reason) = phase_reason(status) {
        body["reason"] = json!(reason);
    }
    if let Some((cause, why)) = &v.cause {
        body["cause"] = json!(cause.as_str());
        body["why"] = json!(why);
    }
}

#[cfg(test)]
mod tests;
