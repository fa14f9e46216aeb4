//! The engine: one thread that owns all mutable watch state.
//!
//! Everything it learns (a command from the manager, a batch of OS events,
//! the scanner's looks at polled and rescanned directories) arrives in one inbox, in
//! order. OS events are hints: for each one the
//! engine looks at the file system (`lstat` of the name, or a read of a
//! directory) and diffs against its index; only that diff becomes changes,
//! which are routed to the specs that cover the path and netted per path by
//! each spec's coalescer.
//!
//! This file is the loop: receive, dispatch, end the pass. Each fact has
//! one owner, in its own file, that alone writes it:
//!
//! | file | owns (the only writer of) |
//! |---|---|
//! | [`crate::index`] | directory nodes: entries, covering specs, root registrations |
//! | `specs.rs` | applied specs by id and name, their matchers and open batches |
//! | `holds.rs` | every hold on a spec's batch (a VCS lock, files being written, holds programs declare), and whether a due batch closes |
//! | `watches.rs` | the OS watch table (watch id ↔ directory, both ways) and the backend |
//! | `poll.rs` | the poll set: which directories are polled, why, their pictures, the scanner's looks under way, when next |
//! | `progress.rs` | start-up progress of a spec's first walk, and whether a heap trim is due after a big one |
//! | `rescan.rs` | rescans (`rescan_every`): when next, pictures, the scanner's rescan looks under way, what the OS missed |
//! | `ignore_files.rs` | ignore files waiting to be read again (their rules live in each spec's matcher) |
//! | `recovery.rs` | retries with back-off, read times for overflow margins, recovery counters |
//! | `problems.rs` | per-spec errors (directories not watched or read) |
//! | `links.rs` | followed symlinks and where they led |
//! | `mounts.rs` | which file system each polled root is on, and the roots whose file system went away |
//! | `roots.rs` | roots waiting to be attached again |
//! | `sync.rs` | sync barriers, the cookies seen, the scanner's looks a parked barrier waits for |
//! | `publish.rs` | batches' sequence numbers, subscribers, and every `WatchStatus` |
//!
//! `trace.rs` holds the macros through which the owners emit `tracing`
//! events (cargo feature `tracing`; nothing at all without it).
//!
//! The steps own no state: they ask the owners to change. `walk.rs`
//! (covering a tree: watch, then read; a first walk's progress),
//! `tree.rs` (entries added and removed, with what is below them),
//! `events.rs` (what a hint leads to), `modes.rs` (how each root is
//! watched, and what that asks of each directory), `polling.rs` (polls,
//! on the scanner or here), `rescanning.rs` (`rescan_every`'s rescans),
//! `applying.rs` (specs created, replaced, deleted), `batching.rs`
//! (changes routed into batches, batches closed), `hashing.rs` (content
//! hashes read on the scanner's lanes, batches waiting for them),
//! `holding.rs` (holds a
//! program declares, taken and ended), `attaching.rs` (roots
//! attached, and again when their watching point changes),
//! `following.rs` (symlinks looked at again), `mounting.rs` (a polled
//! root's file system unmounted and mounted again), `ignoring.rs` (ignore files
//! read and their changes applied), `publishing.rs` (status facts
//! gathered), `retrying.rs` (retries with back-off), `rereading.rs`
//! (directories read again and diffed; everything after an overflow),
//! `syncing.rs` (sync barriers), `watching.rs` (OS watches asked for and
//! let go of), `forget.rs` (what the owners forget), `check.rs` (the
//! index's invariants, for tests) and this loop. Owners
//! never call steps: no owner's file holds an `impl Engine` or names a
//! step's module (`tests/layers.rs` checks it).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, unbounded};
use parking_lot::Mutex;

use crate::backend::{self, OsMsg, Read, Sink};
use crate::batch::fanout::Subscriber;
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::ids::Generation;
use crate::ignore::Matcher;
use crate::index::Index;
use crate::spec::{Backend, WatchSpec};
use crate::state::restore::StateRefused;
use crate::state::snapshot::Snapshot;
use crate::stats::Stats;

mod applying;
mod attaching;
mod batching;
#[cfg(any(test, feature = "test-hooks"))]
mod check;
mod contents;
mod events;
mod following;
mod forget;
mod hashing;
mod holding;
mod holds;
mod ignore_files;
mod ignoring;
mod inbox;
mod links;
mod modes;
mod mounting;
mod mounts;
mod poll;
mod polling;
mod problems;
mod progress;
mod publish;
mod publishing;
mod recovery;
mod rereading;
mod rescan;
mod rescanning;
mod restarting;
mod restoring;
mod retrying;
mod roots;
mod specs;
mod sync;
mod syncing;
#[cfg(test)]
mod tests;
pub(crate) mod trace;
mod tree;
mod walk;
mod watches;
mod watching;
mod writing;

pub(crate) use ignore_files::Excludes;
pub(crate) use publish::Shared;
pub(crate) use restoring::Export;

use links::Links;
use modes::Backends;
use poll::PollSet;
use problems::Problems;
use publish::Publisher;
use recovery::Recovery;
use rescan::Rescans;
use roots::Roots;
use specs::SpecTable;
use sync::Syncs;
use watches::WatchTable;

/// What the engine's inbox carries.
pub(crate) enum Msg {
    /// Create or replace the named spec.
    Upsert {
        name: String,
        generation: Generation,
        spec: Box<WatchSpec>,
        matcher: Box<Matcher>,
        /// For a spec that keeps its state: the snapshot read, or why it
        /// is not used.
        state: Option<Box<Result<Snapshot, StateRefused>>>,
    },
    /// What a save of the named spec needs (`None`: no such spec).
    Export {
        name: String,
        reply: Sender<Option<Export>>,
    },
    /// The last save of the named spec's state file failed with `error`
    /// (`None`: it succeeded), for its status.
    StateSaved { name: String, error: Option<String> },
    /// Delete the named spec.
    Delete { name: String },
    /// A program declares hold `id` on `scope` (`label`): reply once it
    /// is in effect.
    Hold {
        id: u64,
        scope: crate::hold::HoldScope,
        label: String,
        reply: Sender<()>,
    },
    /// The guard of hold `id` was dropped; `reply` (a caller of
    /// `HoldGuard::release`) once what it held is closed.
    Unhold { id: u64, reply: Option<Sender<()>> },
    /// A sync barrier: reply `true` once every change made before has been
    /// delivered (`false`: no such spec). Given up at `deadline`.
    Sync {
        name: String,
        deadline: Instant,
        reply: Sender<bool>,
    },
    /// Look at `paths` of the named spec now, as OS events about them
    /// would make the engine look (a polled directory holding one: a poll
    /// of that directory), then close the spec's batch: reply `true` once
    /// what the look found is delivered (`false`: no such spec). Given up
    /// at `deadline`.
    Look {
        name: String,
        paths: Vec<std::path::PathBuf>,
        deadline: Instant,
        reply: Sender<bool>,
    },
    /// Answer with the counters once this pass has settled.
    Stats { reply: Sender<Stats> },
    /// What the backend read.
    Os(OsMsg),
    /// What the scanner found in polled and rescanned directories.
    Looked(Vec<crate::scanner::Finding>),
    /// What the scanner read of files (hashes, ignore files).
    Read(Vec<crate::scanner::FileFound>),
    /// Test hooks.
    #[cfg(feature = "test-hooks")]
    Hook(Hook),
    /// Stop the engine.
    Shutdown,
}

/// Test hooks that go through the inbox (in order with everything else).
#[cfg(feature = "test-hooks")]
pub(crate) enum Hook {
    /// Behave as if the OS had lost events.
    Overflow,
    /// Make the next watch calls fail.
    Fault(backend::Fault),
    /// Check the index's invariants; reply with violations.
    Check(Sender<Vec<String>>),
    /// Walk in batches of this many directories, with a thread for the
    /// reads once a walk has covered at least this many.
    Batches(usize, usize),
    /// Handle nothing until this channel says so (or is dropped).
    Hold(Receiver<()>),
    /// The next restarts of the event backend fail.
    FailRestarts(u32),
}

/// The manager's knobs, handed to the engine at start.
#[derive(Clone, Debug, Default)]
pub(crate) struct Config {
    pub backend: Backend,
    pub overflow_margin: Option<Duration>,
    pub poll_interval: Option<Duration>,
    pub max_watches: Option<usize>,
    pub journal_paths: Option<usize>,
    pub git_excludes: ignore_files::Excludes,
    pub max_queued_events: Option<usize>,
    pub restart_backoff: Option<recovery::RestartBackoff>,
    pub storage_deadline: Option<Duration>,
}

/// The manager's side of a running engine.
pub(crate) struct Handle {
    /// The event backend the engine runs.
    pub running: Backend,
    tx: Sender<Msg>,
    /// New subscribers, handed over to the engine (which owns the list).
    joining: Sender<Subscriber>,
    pub shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    #[cfg(feature = "test-hooks")]
    pub pause: Option<Arc<backend::ReaderPause>>,
}

impl Handle {
    /// A sender into the engine's inbox, for what must tell the engine
    /// without a manager at hand (a hold's guard, when dropped).
    pub(crate) fn sender(&self) -> Sender<Msg> {
        self.tx.clone()
    }

    /// Sends a message; an error once the engine thread has stopped.
    pub(crate) fn send(&self, msg: Msg) -> Result<()> {
        self.tx.send(msg).map_err(|_| stopped())
    }

    /// Adds a subscriber: every event published after this returns reaches
    /// it (the engine takes new subscribers before each send).
    pub(crate) fn subscribe(&self, s: Subscriber) {
        let _ = self.joining.send(s);
    }

    /// Stops the engine and joins its thread (and through it the
    /// backend's).
    /// A sync barrier of spec `name`: `Ok` once every change made before
    /// the call is published; `Ok(false)` if the spec was deleted
    /// meanwhile, `Err(())` at `deadline`.
    pub(crate) fn barrier(
        &self,
        name: &str,
        deadline: Instant,
    ) -> Result<std::result::Result<bool, ()>> {
        let (reply, done) = crossbeam_channel::bounded(1);
        self.send(Msg::Sync {
            name: name.to_owned(),
            deadline,
            reply,
        })?;
        Ok(done.recv_deadline(deadline).map_err(|_| ()))
    }

    /// A look at `paths` of spec `name` (see [`Msg::Look`]): `Ok(true)`
    /// once what it found is published; `Ok(false)` if there is no such
    /// spec, `Err(())` at `deadline`.
    pub(crate) fn look(
        &self,
        name: &str,
        paths: Vec<std::path::PathBuf>,
        deadline: Instant,
    ) -> Result<std::result::Result<bool, ()>> {
        let (reply, done) = crossbeam_channel::bounded(1);
        self.send(Msg::Look {
            name: name.to_owned(),
            paths,
            deadline,
            reply,
        })?;
        Ok(done.recv_deadline(deadline).map_err(|_| ()))
    }

    pub(crate) fn stop(&self) {
        let _ = self.tx.send(Msg::Shutdown);
        if let Some(h) = self.thread.lock().take() {
            let _ = h.join();
        }
    }
}

fn stopped() -> Error {
    Error::Engine {
        message: "the engine thread has stopped".into(),
        source: None,
    }
}

/// Starts a backend and the engine thread.
pub(crate) fn start(config: Config) -> Result<Handle> {
    let (tx, inbox) = unbounded();
    let (joining, joiners) = unbounded();
    let to_engine = tx.clone();
    let queue = inbox::Inbox::new(
        config
            .max_queued_events
            .unwrap_or(crate::spec::defaults::DEFAULT_MAX_QUEUED_EVENTS),
    );
    let admits = queue.clone();
    // Never waits: a message the bound has no room for is dropped, and
    // the engine recovers as from a kernel queue overflow.
    let sink = Sink::new(move |m| {
        !admits.admit(m.weight(), m.read_at()) || to_engine.send(Msg::Os(m)).is_ok()
    });
    let respawn = (config.backend, sink.clone());
    let os = backend::start(config.backend, sink).map_err(|e| Error::Engine {
        message: format!("{}: {}", e.what, e.error),
        source: Some(e.error),
    })?;
    let shared = Arc::new(Shared::new());
    let clock = Clock::real();
    let mut out = Publisher::new(shared.clone(), joiners);
    // Seqs are of an instance drawn now: an earlier manager's (an earlier
    // run's) are told apart whatever their numbers.
    out.configure(1, crate::ids::random_instance(), config.journal_paths);
    let running = backend::resolve(config.backend);
    trace::event!(
        INFO,
        backend = %running,
        chosen = %config.backend,
        "engine started"
    );
    let watches = WatchTable::new(os, config.max_watches);
    #[cfg(feature = "test-hooks")]
    let pause = watches.pause();
    let mut engine = Engine::new(inbox, clock, watches, out, &config);
    engine.queue = queue;
    engine.respawn = Some(respawn);
    let to_engine = tx.clone();
    engine.scanner = crate::scanner::Scanner::threaded(move |looks, files| {
        (looks.is_empty() || to_engine.send(Msg::Looked(looks)).is_ok())
            && (files.is_empty() || to_engine.send(Msg::Read(files)).is_ok())
    });
    let thread = std::thread::Builder::new()
        .name("specwatch-engine".into())
        .spawn(move || engine.run_guarded())
        .map_err(|e| Error::Engine {
            message: format!("cannot start the engine thread: {e}"),
            source: Some(e),
        })?;
    Ok(Handle {
        running,
        tx,
        joining,
        shared,
        thread: Mutex::new(Some(thread)),
        #[cfg(feature = "test-hooks")]
        pause,
    })
}

pub(crate) struct Engine {
    inbox: Receiver<Msg>,
    clock: Clock,
    /// When the message being handled was taken: what raw changes are
    /// stamped with.
    now: Instant,
    index: Index,
    specs: SpecTable,
    /// Every hold on a spec's batch (a VCS lock, files being written).
    holds: holds::Holds,
    watches: WatchTable,
    polls: PollSet,
    /// Looks at the directories polled without an OS watch, and at those
    /// a rescan looks at (on its own thread, but in the engine's tests).
    scanner: crate::scanner::Scanner,
    backends: Backends,
    recovery: Recovery,
    rescans: Rescans,
    /// What the files of specs that compare contents held when reported.
    contents: contents::Contents,
    reloads: ignore_files::Reloads,
    /// How far the first walk under way has got; a heap trim due after a
    /// big one.
    progress: progress::WalkProgress,
    batches: walk::Batches,
    /// Walk threads started so far (for tests of the switch).
    #[cfg(test)]
    walk_threads: usize,
    problems: Problems,
    links: Links,
    mounts: mounts::Mounts,
    roots: Roots,
    syncs: Syncs,
    out: Publisher,
    /// OS events handled so far (for [`Stats::os_events`]).
    os_events: u64,
    /// The bound on the backend's events waiting in `inbox`.
    queue: inbox::Inbox,
    /// What a new backend is started as, and where it sends, when the
    /// running one's reader stops (none in the engine's own tests).
    respawn: Option<(Backend, Sink)>,
    /// Callers of `Manager::stats` waiting for the end of this pass.
    stats_waiters: Vec<Sender<Stats>>,
}

/// How often a backlogged subscriber's channel is checked for room.
const BACKLOG_RETRY: Duration = Duration::from_millis(5);

impl Engine {
    fn new(
        inbox: Receiver<Msg>,
        clock: Clock,
        watches: WatchTable,
        out: Publisher,
        config: &Config,
    ) -> Engine {
        let now = clock.now();
        let wall = clock.wall();
        Engine {
            inbox,
            now,
            index: Index::default(),
            specs: SpecTable::default(),
            holds: holds::Holds::default(),
            watches,
            polls: {
                let mut p = PollSet::new(config.poll_interval);
                if let Some(d) = config.storage_deadline {
                    p.set_deadline(d);
                }
                p
            },
            scanner: crate::scanner::Scanner::inline(),
            backends: Backends {
                default: config.backend,
                running: backend::resolve(config.backend),
                poll_interval: config
                    .poll_interval
                    .unwrap_or(crate::spec::defaults::DEFAULT_POLL_INTERVAL)
                    .max(Duration::from_millis(1)),
            },
            recovery: Recovery::new(config.overflow_margin, config.restart_backoff, wall),
            rescans: Rescans::default(),
            contents: contents::Contents::default(),
            reloads: ignore_files::Reloads::new(&config.git_excludes),
            progress: progress::WalkProgress::default(),
            batches: walk::Batches::default(),
            #[cfg(test)]
            walk_threads: 0,
            problems: Problems::default(),
            links: Links::default(),
            mounts: mounts::Mounts::default(),
            roots: Roots::default(),
            syncs: Syncs::default(),
            out,
            os_events: 0,
            queue: inbox::Inbox::new(crate::spec::defaults::DEFAULT_MAX_QUEUED_EVENTS),
            respawn: None,
            stats_waiters: Vec::new(),
            clock,
        }
    }

    /// Runs until shutdown; a panic marks every spec failed instead of
    /// leaving a silently dead thread.
    fn run_guarded(mut self) {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.run()));
        let reason = match result {
            Ok(()) => "the manager was shut down".to_owned(),
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                let error = format!("the watch engine panicked: {msg}");
                // Only what is published is touched: the rest may be
                // inconsistent after a panic.
                let wall = self.clock.wall();
                self.out.fail_all(&error, wall);
                error
            }
        };
        self.out.stopped(reason);
    }

    fn run(&mut self) {
        loop {
            let msg = match self.next_deadline() {
                Some(d) => match self.inbox.recv_deadline(d) {
                    Ok(m) => Some(m),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return,
                },
                None => match self.inbox.recv() {
                    Ok(m) => Some(m),
                    Err(_) => return,
                },
            };
            if let Some(m) = msg {
                if !self.handle(m) {
                    return;
                }
                // Handle everything already waiting before closing batches.
                for _ in 0..100_000 {
                    match self.inbox.try_recv() {
                        Ok(m) => {
                            if !self.handle(m) {
                                return;
                            }
                        }
                        Err(_) => break,
                    }
                }
            }
            self.end_pass();
        }
    }

    /// The earliest timer: a batch due, a poll, a retry, a sync given up,
    /// or (while a subscriber is behind) a look for room in its channel.
    fn next_deadline(&self) -> Option<Instant> {
        let timers = [
            batching::next_deadline(&self.specs, &self.holds),
            self.polls.next_deadline(),
            self.recovery.next_deadline(),
            self.syncs.next_deadline(),
            self.rescans.next_deadline(),
            self.reloads.next_deadline(),
            self.mounts.next_deadline(),
            self.contents.next_deadline(),
        ];
        let next = timers.into_iter().flatten().min();
        if self.out.behind() {
            // The only timer that is not a deadline of some work, and it
            // only runs while some subscriber has a backlog.
            let retry = self.clock.now() + BACKLOG_RETRY;
            return Some(next.map_or(retry, |b| b.min(retry)));
        }
        next
    }

    /// Returns false on shutdown.
    fn handle(&mut self, msg: Msg) -> bool {
        self.now = self.clock.now();
        match msg {
            Msg::Upsert {
                name,
                generation,
                spec,
                matcher,
                state,
            } => self.upsert(name, generation, *spec, *matcher, state.map(|s| *s)),
            Msg::Export { name, reply } => {
                let _ = reply.send(self.export(&name));
            }
            Msg::StateSaved { name, error } => self.state_saved(&name, error),
            Msg::Delete { name } => self.delete(&name),
            Msg::Hold {
                id,
                scope,
                label,
                reply,
            } => self.hold(id, scope, label, reply),
            Msg::Unhold { id, reply } => self.unhold(id, reply),
            Msg::Shutdown => return false,
            Msg::Os(m) => {
                let lost = self.queue.taken(m.weight());
                match m.read() {
                    Read::Events {
                        events,
                        raw,
                        read_at,
                        read_mono,
                    } => {
                        if raw > 0 {
                            self.recovery.note_read(read_at, read_mono);
                            self.os_events += raw;
                        }
                        for e in events {
                            self.os_event(e);
                        }
                    }
                    Read::Failed(error) => self.backend_failed(&error),
                }
                // The inbox was full: what came after that read was
                // dropped.
                if let Some(complete_read) = lost {
                    self.lost_after(complete_read);
                }
            }
            Msg::Looked(findings) => self.looked(findings),
            Msg::Read(found) => self.files_read(found),
            Msg::Sync {
                name,
                deadline,
                reply,
            } => self.start_sync(name, deadline, reply),
            Msg::Look {
                name,
                paths,
                deadline,
                reply,
            } => self.start_look(name, &paths, deadline, reply),
            Msg::Stats { reply } => self.stats_waiters.push(reply),
            #[cfg(feature = "test-hooks")]
            Msg::Hook(hook) => match hook {
                Hook::Overflow => self.overflow(self.recovery.last_read()),
                Hook::Fault(f) => self.watches.inject(f),
                Hook::Check(reply) => {
                    let _ = reply.send(self.check_invariants());
                }
                Hook::FailRestarts(n) => self.recovery.fail_restarts(n),
                Hook::Hold(release) => {
                    let _ = release.recv();
                }
                Hook::Batches(size, reader_after) => {
                    self.batches = walk::Batches { size, reader_after };
                }
            },
        }
        true
    }

    /// After the inbox is drained: settle what the pass changed, run the
    /// timers that are due, answer barriers, deliver, publish.
    fn end_pass(&mut self) {
        self.settle();
        self.reload_ignore_files();
        self.look_outside(false);
        self.refresh_modes();
        self.poll_due();
        self.mounts_due();
        self.polls.check_hung(self.clock.now());
        self.restart_due();
        self.retry_due();
        self.rescan_due();
        let synced = self.syncs_ready();
        self.out.flush_backlogs();
        self.flush_batches(&syncing::passed(&synced));
        self.publish();
        // Before the answers: a caller of `sync` finds the engine settled.
        self.trim_if_idle();
        self.answer_syncs(synced);
        self.answer_stats();
    }

    /// Counters are computed on request only (the entry count walks the
    /// index), after the pass that received the request has settled.
    fn answer_stats(&mut self) {
        if self.stats_waiters.is_empty() {
            return;
        }
        let queue = self.queue.stats();
        let stats = Stats {
            os_watches: self.watches.count(),
            indexed_dirs: self.index.len(),
            indexed_entries: self.index.entry_count(),
            backlog_paths: self.out.backlog_paths(),
            os_events: self.os_events,
            queued_os_events: queue.queued,
            queued_os_events_peak: queue.peak,
            dropped_os_events: queue.dropped,
        };
        for w in self.stats_waiters.drain(..) {
            let _ = w.send(stats);
        }
    }
}
