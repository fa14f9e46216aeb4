//! One replica: its public handle ([`Replica`]) and the thread that
//! drives it through its roles (follow the feed, take the lease and
//! watch, or watch alone while Redis is away).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::{Receiver, Sender, select, unbounded};
use specwatch::{ChangeBatch, Event, Generation, Manager, Seq};

use crate::belief::{self, Belief};
use crate::codec::{self, RelChange};
use crate::error::{Error, Result};
use crate::event::{FeedEvent, FeedStatus, ResyncReason, Role};
use crate::options::FeedOptions;
use crate::store::{LookRequest, Store, Trouble};

/// How long the driver waits at most before looking at its stop flag.
const STEP: Duration = Duration::from_millis(200);

/// The longest a local replica waits to try again a feed it could not
/// read.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// How many batches one read of the stream takes at most.
const READ_COUNT: usize = 512;

/// A replica of a server over a shared storage, in a feed: it follows the
/// batches the watcher publishes, becomes the watcher when the lease is
/// free, and watches the storage itself while Redis is away. See the
/// crate's documentation.
///
/// Dropping it stops it; a watcher lets go of the lease, so that another
/// replica takes over within a third of the lease's expiry.
pub struct Replica {
    opts: FeedOptions,
    shared: Arc<Shared>,
    requests: Sender<Request>,
    driver: Option<JoinHandle<()>>,
    /// Connections for looks and snapshots, made on demand, kept.
    pool: Mutex<Vec<Store>>,
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replica")
            .field("options", &self.opts)
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

/// What the driver shares with the handle.
struct Shared {
    status: Mutex<FeedStatus>,
    changed: Condvar,
    stop: AtomicBool,
    /// Let go of the lease when stopping (false: as a killed process).
    release: AtomicBool,
    stopped: Mutex<Option<String>>,
}

impl Shared {
    fn update(&self, f: impl FnOnce(&mut FeedStatus)) {
        f(&mut self.status.lock().unwrap());
        self.changed.notify_all();
    }

    /// Waits until `done` holds of the status, or `deadline`.
    fn wait(&self, deadline: Instant, done: impl Fn(&FeedStatus) -> bool) -> bool {
        let mut s = self.status.lock().unwrap();
        loop {
            if done(&s) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline || self.stop.load(Ordering::SeqCst) {
                return false;
            }
            s = self.changed.wait_timeout(s, deadline - now).unwrap().0;
        }
    }
}

/// A look asked of this replica's own watch (it is the watcher, or
/// local).
struct Request {
    paths: Vec<Vec<u8>>,
    deadline: Instant,
    reply: Sender<std::result::Result<Seq, LookRefused>>,
}

enum LookRefused {
    /// Not the role to answer it (any more): ask again.
    Role,
    /// The look failed.
    Failed(String),
}

/// A random u64 (an instance id, an epoch): std's randomly keyed hasher
/// fed the clock and the process id.
fn random() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.write_u32(std::process::id());
    h.finish().max(1)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "?".into())
}

impl Replica {
    /// Starts a replica, and returns it with the receiver of its events.
    /// It never fails for Redis: with Redis out of reach it watches the
    /// storage itself ([`Role::Local`]) and joins the feed once Redis
    /// answers.
    ///
    /// The first events are a [`FeedEvent::Resync`] with the whole tree
    /// (or, with [`FeedOptions::resume_from`] and the feed still holding
    /// what followed, the batches after that seq) and a
    /// [`FeedEvent::Role`].
    ///
    /// # Errors
    ///
    /// [`Error::Stopped`] if its thread cannot be started.
    pub fn start(opts: FeedOptions) -> Result<(Replica, Receiver<FeedEvent>)> {
        let me = format!("{:016x}@{}:{}", random(), hostname(), std::process::id());
        let shared = Arc::new(Shared {
            status: Mutex::new(FeedStatus {
                role: Role::Starting,
                feed_up: false,
                whole: false,
                seq: None,
                last_error: None,
                instance: me.clone(),
            }),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
            release: AtomicBool::new(true),
            stopped: Mutex::new(None),
        });
        let (out, events) = unbounded();
        let (requests, inbox) = unbounded();
        let driver = Driver {
            at: opts.resume_from.map(|s| (s.instance(), s.number())),
            opts: opts.clone(),
            me,
            out,
            shared: shared.clone(),
            requests: inbox,
            reason: ResyncReason::Start,
            run_id: None,
            announced: Role::Starting,
            target: 0,
            backoff: Duration::ZERO,
        };
        let handle = std::thread::Builder::new()
            .name("specwatch-feed".into())
            .spawn(move || driver.run())
            .map_err(|e| Error::Stopped {
                reason: format!("cannot start the feed's thread: {e}"),
            })?;
        Ok((
            Replica {
                opts,
                shared,
                requests,
                driver: Some(handle),
                pool: Mutex::new(Vec::new()),
            },
            events,
        ))
    }

    /// The replica's status now.
    #[must_use]
    pub fn status(&self) -> FeedStatus {
        self.shared.status.lock().unwrap().clone()
    }

    /// Waits until the consumer has been given the whole tree (see
    /// [`FeedStatus::whole`]) and returns the status then.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`].
    pub fn wait_whole(&self, timeout: Duration) -> Result<FeedStatus> {
        if self.shared.wait(Instant::now() + timeout, |s| {
            s.whole && s.role != Role::Starting
        }) {
            Ok(self.status())
        } else {
            self.check_running()?;
            Err(Error::Timeout {
                waited_for: "the whole tree to be delivered",
                timeout,
            })
        }
    }

    /// Read-your-writes: after this replica wrote (or removed) `paths` on
    /// the storage, has the watcher look at them now, and returns the seq
    /// of a batch holding what it found (or the last seq, if nothing
    /// changed), once that batch has been delivered to this replica's
    /// consumer: when the consumer has applied the batches up to it,
    /// every replica whose consumer has too answers with the write.
    ///
    /// On a follower the request goes through Redis (the `looks` stream)
    /// to the watcher, which runs [`Manager::look`] (a polled directory
    /// holding a path is polled now) and answers once the batch is
    /// published; on the watcher, and on a replica watching alone, its
    /// own manager looks.
    ///
    /// # Errors
    ///
    /// [`Error::OutsideRoot`] for a path not below the root;
    /// [`Error::Timeout`] when no answer came in time (no watcher at the
    /// moment: a takeover under way); [`Error::Redis`];
    /// [`Error::Watch`] when the watch failed to look.
    pub fn look<I, P>(&self, paths: I, timeout: Duration) -> Result<Seq>
    where
        I: IntoIterator<Item = P>,
        P: AsRef<Path>,
    {
        let deadline = Instant::now() + timeout;
        let mut rel = Vec::new();
        for p in paths {
            let p = p.as_ref();
            rel.push(
                codec::relative(&self.opts.root, p).ok_or_else(|| Error::OutsideRoot {
                    path: p.to_path_buf(),
                    root: self.opts.root.clone(),
                })?,
            );
        }
        let timed_out = || Error::Timeout {
            waited_for: "the watcher's look",
            timeout,
        };
        loop {
            self.check_running()?;
            let role = self.status().role;
            match role {
                Role::Watching | Role::Local => {
                    let (reply, answer) = crossbeam_channel::bounded(1);
                    let _ = self.requests.send(Request {
                        paths: rel.clone(),
                        deadline,
                        reply,
                    });
                    match answer.recv_deadline(deadline) {
                        Ok(Ok(seq)) => return Ok(seq),
                        Ok(Err(LookRefused::Failed(message))) => {
                            return Err(Error::Watch(specwatch::Error::Failed {
                                spec: self.opts.name.clone(),
                                message,
                            }));
                        }
                        Ok(Err(LookRefused::Role)) => {
                            self.shared
                                .wait(deadline.min(Instant::now() + STEP), |s| s.role != role);
                        }
                        Err(_) => return Err(timed_out()),
                    }
                }
                Role::Following => return self.look_remote(&rel, deadline, timeout),
                _ => {
                    self.shared.wait(deadline, |s| s.role != role);
                }
            }
            if Instant::now() >= deadline {
                return Err(timed_out());
            }
        }
    }

    /// A follower's look, through Redis.
    fn look_remote(&self, rel: &[Vec<u8>], deadline: Instant, timeout: Duration) -> Result<Seq> {
        let mut store = self.connection()?;
        let key = store.keys.reply(&format!("{:016x}", random()));
        let deadline_ms =
            codec::millis(SystemTime::now() + deadline.saturating_duration_since(Instant::now()));
        let asked = store
            .ask_look(rel, &key, deadline_ms)
            .and_then(|()| {
                store.wait_answer(&key, deadline.saturating_duration_since(Instant::now()))
            })
            .map_err(|e| self.opts.redis_error(e))?;
        self.pool.lock().unwrap().push(store);
        let Some((epoch, n)) = asked else {
            return Err(Error::Timeout {
                waited_for: "the watcher's answer to a look",
                timeout,
            });
        };
        let delivered = self.shared.wait(deadline, |s| {
            s.seq
                .is_some_and(|d| d.instance() == epoch && d.number() >= n)
        });
        if delivered {
            Ok(Seq::new(epoch, n))
        } else {
            self.check_running()?;
            Err(Error::Timeout {
                waited_for: "the batch holding the look to be delivered here",
                timeout,
            })
        }
    }

    /// Keeps the consumer's snapshot `data` (say, its index serialised) of
    /// the tree as of `seq` in Redis, for a cold replica to start from
    /// ([`FeedOptions::read_snapshot`], then
    /// [`FeedOptions::resume_from`]). Only the watcher keeps one, of a seq
    /// of the feed's current history it has published.
    ///
    /// # Errors
    ///
    /// [`Error::NotWatching`] on a replica that is not the watcher (or no
    /// longer is, or for a seq of another history); [`Error::Redis`].
    pub fn put_snapshot(&self, seq: Seq, data: &[u8]) -> Result<()> {
        let role = self.status().role;
        if role != Role::Watching {
            return Err(Error::NotWatching { role });
        }
        let mut store = self.connection()?;
        let me = self.status().instance;
        match store.put_snapshot(&me, seq.instance(), seq.number(), data) {
            Ok(()) => {
                self.pool.lock().unwrap().push(store);
                Ok(())
            }
            Err(Trouble::Fenced(_)) => {
                self.pool.lock().unwrap().push(store);
                Err(Error::NotWatching {
                    role: self.status().role,
                })
            }
            Err(e) => Err(self.opts.redis_error(e)),
        }
    }

    /// Test hook (feature `test-hooks`): stops the replica as a killed
    /// process would: the lease (if it holds it) is not let go of, and
    /// expires. For tests of a failover.
    #[cfg(feature = "test-hooks")]
    pub fn abandon(self) {
        self.shared.release.store(false, Ordering::SeqCst);
        drop(self);
    }

    fn connection(&self) -> Result<Store> {
        if let Some(s) = self.pool.lock().unwrap().pop() {
            return Ok(s);
        }
        self.opts.store()
    }

    fn check_running(&self) -> Result<()> {
        match self.shared.stopped.lock().unwrap().clone() {
            Some(reason) => Err(Error::Stopped { reason }),
            None => Ok(()),
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.changed.notify_all();
        if let Some(h) = self.driver.take() {
            let _ = h.join();
        }
    }
}

/// What the driver does next.
enum Next {
    Follow,
    /// The lease was taken with this connection.
    Watch(Box<Store>),
    /// Redis is out of reach (why).
    Local(String),
    Stop,
}

/// What a follower's step came to.
enum Step {
    Stay,
    /// The lease is ours.
    Leased,
}

/// The thread behind a [`Replica`].
struct Driver {
    opts: FeedOptions,
    me: String,
    out: Sender<FeedEvent>,
    shared: Arc<Shared>,
    requests: Receiver<Request>,
    /// Where the consumer is in the feed: (epoch, number); `None`: not in
    /// it (a start without a seq, a resync due, or after `Local`).
    at: Option<(u64, u64)>,
    /// Why the next picture is delivered.
    reason: ResyncReason,
    /// The Redis server's run id when last connected.
    run_id: Option<String>,
    /// The role last announced to the consumer.
    announced: Role,
    /// The last seq the feed had when last asked (a follower that
    /// reached it is caught up).
    target: u64,
    /// How long a local replica waits before it tries the feed again
    /// after the feed could not be read (zero: a third of the lease).
    backoff: Duration,
}

impl Driver {
    fn run(mut self) {
        let mut next = Next::Follow;
        loop {
            if self.stopping() {
                break;
            }
            next = match next {
                Next::Follow => self.follow(),
                Next::Watch(store) => self.watch(*store),
                Next::Local(why) => self.local(why),
                Next::Stop => break,
            };
        }
        *self.shared.stopped.lock().unwrap() = Some("the replica was dropped".into());
        self.shared.changed.notify_all();
    }

    fn stopping(&self) -> bool {
        self.shared.stop.load(Ordering::SeqCst)
    }

    fn tick(&self) -> Duration {
        self.opts.lease_ttl / 3
    }

    fn connect(&mut self) -> std::result::Result<Store, String> {
        let mut store = self.opts.store().map_err(|e| e.to_string())?;
        let id = store.run_id().map_err(|e| e.to_string())?;
        if self.run_id.as_ref().is_some_and(|r| *r != id) && self.at.is_some() {
            self.at = None;
            self.reason = ResyncReason::RedisRestarted;
        }
        self.run_id = Some(id);
        self.shared.update(|s| s.feed_up = true);
        Ok(store)
    }

    fn set_role(&self, role: Role) {
        self.shared.update(|s| {
            if s.role != role {
                s.role = role;
                s.last_error = None;
            }
        });
    }

    fn set_error(&self, e: impl std::fmt::Display) {
        let e = e.to_string();
        self.shared.update(|s| s.last_error = Some(e));
    }

    fn announce(&mut self, role: Role) {
        if role != Role::Local {
            self.backoff = Duration::ZERO;
        }
        self.set_role(role);
        self.shared.update(|s| s.whole = true);
        if self.announced != role {
            self.announced = role;
            let _ = self.out.send(FeedEvent::Role(role));
        }
    }

    fn batch(&self, seq: Seq, time: SystemTime, changes: &[RelChange]) -> Arc<ChangeBatch> {
        let root = &self.opts.root;
        Arc::new(ChangeBatch::new(
            self.opts.name.clone(),
            Generation(1),
            seq,
            time,
            changes.iter().map(|c| c.to_change(root)),
        ))
    }

    fn deliver(&self, ev: FeedEvent) {
        let seq = match &ev {
            FeedEvent::Changes(b) => Some(b.seq),
            FeedEvent::Resync { picture, .. } => Some(picture.seq),
            _ => None,
        };
        if matches!(ev, FeedEvent::Resync { .. }) {
            self.shared.update(|s| s.whole = false);
        }
        // A consumer that dropped its receiver is not waited for.
        let _ = self.out.send(ev);
        if let Some(seq) = seq {
            self.shared.update(|s| s.seq = Some(seq));
        }
    }

    /// Delivers the picture `view` as of `seq`, after a resync.
    fn resync(&mut self, seq: Seq, view: &Belief) {
        let picture = self.batch(seq, SystemTime::now(), &belief::picture(view));
        let reason = std::mem::replace(&mut self.reason, ResyncReason::Start);
        self.deliver(FeedEvent::Resync { reason, picture });
    }

    /// Answers every look asked of this replica's own watch: it has none.
    fn refuse_requests(&self) {
        for r in self.requests.try_iter() {
            let _ = r.reply.send(Err(LookRefused::Role));
        }
    }

    /// Waits until `until`, answering looks (refused) and watching the
    /// stop flag.
    fn pause(&self, until: Instant) {
        while Instant::now() < until && !self.stopping() {
            let step = until.saturating_duration_since(Instant::now()).min(STEP);
            if let Ok(r) = self.requests.recv_timeout(step) {
                let _ = r.reply.send(Err(LookRefused::Role));
            }
        }
    }

    // ----- following -----

    fn follow(&mut self) -> Next {
        let mut store = match self.connect() {
            Ok(s) => s,
            Err(e) => return Next::Local(e),
        };
        self.set_role(if self.at.is_some() {
            Role::Following
        } else {
            Role::Starting
        });
        let mut next_try = Instant::now();
        loop {
            if self.stopping() {
                return Next::Stop;
            }
            self.refuse_requests();
            match self.follow_step(&mut store, &mut next_try) {
                Ok(Step::Stay) => {}
                Ok(Step::Leased) => return Next::Watch(Box::new(store)),
                Err(Trouble::Redis(e)) => {
                    // Once more at once (a dropped connection); then local.
                    self.set_error(format!("redis: {e}"));
                    match self.connect() {
                        Ok(s) => store = s,
                        Err(e) => return Next::Local(e),
                    }
                }
                Err(e) => {
                    // Redis holds what this replica cannot read (another
                    // format): watch alone, and try the feed again later
                    // and later (each try costs a scan and a resync).
                    self.backoff = (self.backoff * 2).clamp(self.tick(), MAX_BACKOFF);
                    return Next::Local(e.to_string());
                }
            }
        }
    }

    /// One step of a follower: the lease tried (and the feed's epoch and
    /// seq checked) when due, then a resync or a read of the stream.
    fn follow_step(
        &mut self,
        store: &mut Store,
        next_try: &mut Instant,
    ) -> std::result::Result<Step, Trouble> {
        let ttl = self.opts.lease_ttl;
        if Instant::now() >= *next_try {
            *next_try = Instant::now() + self.tick();
            let seen = store.try_lease(&self.me, ttl)?;
            if seen.got_lease {
                return Ok(Step::Leased);
            }
            self.target = seen.seq;
            if let Some((e, n)) = self.at
                && (seen.epoch != Some(e) || seen.seq < n)
            {
                // Another history, or this one from before what was
                // read (a server that lost its last writes).
                self.at = None;
                self.reason = if seen.epoch == Some(e) {
                    ResyncReason::RedisRestarted
                } else if self.announced == Role::Starting {
                    ResyncReason::Start
                } else {
                    ResyncReason::OtherEpoch
                };
            }
        }
        let Some((e, n)) = self.at else {
            match store.belief()? {
                Some(held) => {
                    self.resync(Seq::new(held.epoch, held.seq), &held.belief);
                    self.at = Some((held.epoch, held.seq));
                    self.target = held.seq;
                    self.announce(Role::Following);
                }
                // No feed yet: a watcher is about to publish its first
                // batch (or the lease is to be tried again).
                None => self.pause(*next_try),
            }
            return Ok(Step::Stay);
        };
        if n >= self.target {
            self.announce(Role::Following);
        }
        let block = next_try
            .saturating_duration_since(Instant::now())
            .clamp(Duration::from_millis(1), STEP);
        let mut now_at = n;
        for p in store.read_after(n, READ_COUNT, Some(block))? {
            if p.epoch != e {
                self.at = None;
                self.reason = ResyncReason::OtherEpoch;
                return Ok(Step::Stay);
            }
            if p.n != now_at + 1 {
                self.at = None;
                self.reason = ResyncReason::Trimmed;
                return Ok(Step::Stay);
            }
            self.deliver(FeedEvent::Changes(self.batch(
                Seq::new(e, p.n),
                p.time,
                &p.changes,
            )));
            now_at = p.n;
            self.at = Some((e, now_at));
        }
        self.target = self.target.max(now_at);
        if now_at >= self.target {
            self.announce(Role::Following);
        }
        Ok(Step::Stay)
    }

    // ----- watching the storage (the watcher's, and local) -----

    /// A manager watching the storage, with what it saw there: its
    /// subscription, the tree (from its initial scan), and the newest seq
    /// it delivered.
    fn scan(&self) -> std::result::Result<(Manager, Receiver<Event>, Belief, Seq), String> {
        let timeout = self.opts.scan_timeout;
        let deadline = Instant::now() + timeout;
        let name = self.opts.name.as_str();
        let m = (self.opts.manager)().map_err(|e| format!("cannot start a manager: {e}"))?;
        let rx = m.subscribe();
        let watch = |e: specwatch::Error| format!("watching {}: {e}", self.opts.root.display());
        m.apply(name, self.opts.spec.clone()).map_err(watch)?;
        m.wait_watching(name, timeout).map_err(watch)?;
        // The initial scan delivered; then the seq of its last batch.
        m.sync(name, timeout).map_err(watch)?;
        let newest = m
            .look(name, Vec::<PathBuf>::new(), timeout)
            .map_err(watch)?;
        let mut disk = Belief::new();
        let mut last = Seq::new(newest.instance(), 0);
        while last.number() < newest.number() {
            match rx.recv_deadline(deadline) {
                Ok(Event::Changes(b)) => {
                    let rel: Vec<RelChange> = b
                        .changes
                        .iter()
                        .filter_map(|c| RelChange::of(&self.opts.root, c))
                        .collect();
                    belief::apply(&mut disk, &rel);
                    last = b.seq;
                }
                Ok(_) => {}
                Err(_) => return Err("the manager's initial scan was not delivered".into()),
            }
        }
        Ok((m, rx, disk, newest))
    }

    fn relative(&self, b: &ChangeBatch) -> Vec<RelChange> {
        b.changes
            .iter()
            .filter_map(|c| RelChange::of(&self.opts.root, c))
            .collect()
    }

    /// The lease is ours: take over, then publish until it is not.
    fn watch(&mut self, store: Store) -> Next {
        self.set_role(Role::Starting);
        let keeper = Keeper::start(&self.opts, &self.me);
        let looks_stop = Arc::new(AtomicBool::new(false));
        let next = match Lead::take_over(self, store, &keeper, &looks_stop) {
            Ok(mut lead) => lead.run(self, &keeper),
            Err(next) => next,
        };
        looks_stop.store(true, Ordering::SeqCst);
        keeper.stop(self.shared.release.load(Ordering::SeqCst));
        next
    }

    /// Redis is out of reach: watch the storage here until it answers.
    fn local(&mut self, why: String) -> Next {
        self.shared.update(|s| s.feed_up = false);
        self.set_role(Role::Starting);
        self.set_error(&why);
        self.at = None;
        let (m, rx, disk, newest) = match self.scan() {
            Ok(x) => x,
            Err(e) => {
                // Nothing to watch with either: try it all again later.
                self.set_error(&e);
                self.pause(Instant::now() + self.opts.lease_ttl);
                return if self.stopping() {
                    Next::Stop
                } else {
                    Next::Follow
                };
            }
        };
        self.reason = ResyncReason::FeedDown { error: why.clone() };
        self.resync(newest, &disk);
        self.reason = ResyncReason::FeedBack;
        self.announce(Role::Local);
        self.set_error(&why);
        let mut last = newest.number();
        let mut next_probe = Instant::now() + self.backoff.max(self.tick());
        loop {
            if self.stopping() {
                return Next::Stop;
            }
            let wait = next_probe
                .saturating_duration_since(Instant::now())
                .min(STEP);
            select! {
                recv(rx) -> ev => match ev {
                    Ok(Event::Changes(b)) => {
                        last = b.seq.number();
                        self.deliver(FeedEvent::Changes(b));
                    }
                    Ok(_) => {}
                    Err(_) => return Next::Local("the local manager stopped".into()),
                },
                recv(self.requests) -> r => {
                    if let Ok(r) = r {
                        let answer = local_look(&self.opts, &m, &rx, &r, &mut last, |b| {
                            self.deliver(FeedEvent::Changes(b));
                        });
                        let _ = r.reply.send(answer);
                    }
                }
                default(wait) => {}
            }
            if Instant::now() >= next_probe {
                next_probe = Instant::now() + self.tick();
                if let Ok(mut store) = self.connect() {
                    match store.try_lease(&self.me, self.opts.lease_ttl) {
                        Ok(seen) if seen.got_lease => return Next::Watch(Box::new(store)),
                        // The feed is there: follow it (from a resync).
                        Ok(seen) if seen.epoch.is_some() => return Next::Follow,
                        // No feed yet and another replica takes over:
                        // go on here until its first batch is out.
                        _ => self.shared.update(|s| s.feed_up = false),
                    }
                }
            }
        }
    }
}

/// A look by this replica's own manager (`last`: the newest manager seq
/// delivered, kept up by `deliver` for each batch it takes on the way).
fn local_look(
    opts: &FeedOptions,
    m: &Manager,
    rx: &Receiver<Event>,
    r: &Request,
    last: &mut u64,
    mut deliver: impl FnMut(Arc<ChangeBatch>),
) -> std::result::Result<Seq, LookRefused> {
    let paths: Vec<PathBuf> = r.paths.iter().map(|p| codec::join(&opts.root, p)).collect();
    let timeout = r.deadline.saturating_duration_since(Instant::now());
    let seq = m
        .look(&opts.name, paths, timeout)
        .map_err(|e| LookRefused::Failed(e.to_string()))?;
    while *last < seq.number() {
        match rx.recv_deadline(r.deadline) {
            Ok(Event::Changes(b)) => {
                *last = b.seq.number();
                deliver(b);
            }
            Ok(_) => {}
            Err(_) => return Err(LookRefused::Failed("the look's batch did not come".into())),
        }
    }
    Ok(seq)
}

/// The watcher's state while it holds the lease.
struct Lead {
    store: Store,
    manager: Manager,
    rx: Receiver<Event>,
    epoch: u64,
    /// The last seq published.
    n: u64,
    /// The newest manager seq handled.
    last_m: u64,
    looks: Receiver<LookRequest>,
}

impl Lead {
    /// Brings the consumer to the belief's seq, watches the storage, and
    /// publishes the difference between the belief and the disk.
    fn take_over(
        d: &mut Driver,
        mut store: Store,
        keeper: &Keeper,
        looks_stop: &Arc<AtomicBool>,
    ) -> std::result::Result<Lead, Next> {
        // Whatever went wrong, let go and follow: following finds out
        // whether Redis is there (else the replica goes local).
        let redis = |d: &mut Driver, e: Trouble| {
            d.set_error(format!("taking over: {e}"));
            Next::Follow
        };
        let held = store.belief().map_err(|e| redis(d, e))?;
        let (epoch, first, base, belief) = match held {
            Some(h) => (h.epoch, false, h.seq, h.belief),
            None => (random(), true, 0, Belief::new()),
        };
        // The consumer at the belief's seq, by the batches before it; or
        // why not.
        let mut in_sync = false;
        match d.at {
            None => {}
            Some((e, _)) if first || e != epoch => d.reason = ResyncReason::OtherEpoch,
            Some((_, n)) if n > base => d.reason = ResyncReason::RedisRestarted,
            Some((e, mut n)) => {
                in_sync = true;
                while n < base && in_sync {
                    let got = store
                        .read_after(n, READ_COUNT, None)
                        .map_err(|e| redis(d, e))?;
                    if got.is_empty() {
                        in_sync = false;
                    }
                    for p in got.into_iter().take_while(|p| p.n <= base) {
                        if p.epoch != e || p.n != n + 1 {
                            in_sync = false;
                            break;
                        }
                        d.deliver(FeedEvent::Changes(d.batch(
                            Seq::new(e, p.n),
                            p.time,
                            &p.changes,
                        )));
                        n = p.n;
                    }
                }
                d.at = Some((e, n));
                if !in_sync {
                    d.reason = ResyncReason::Trimmed;
                }
            }
        }
        let (manager, rx, disk, newest) = match d.scan() {
            Ok(x) => x,
            Err(e) => {
                d.set_error(&e);
                return Err(Next::Follow);
            }
        };
        if let Ok(why) = keeper.lost.try_recv() {
            d.set_error(&why);
            return Err(why.next());
        }
        let changes = belief::diff(&belief, &disk);
        let mut n = base;
        if first || !changes.is_empty() {
            n += 1;
            store
                .publish(
                    &d.me,
                    epoch,
                    first,
                    n,
                    SystemTime::now(),
                    &changes,
                    d.opts.max_len,
                )
                .map_err(|e| redis(d, e))?;
        }
        if in_sync {
            if n > base {
                d.deliver(FeedEvent::Changes(d.batch(
                    Seq::new(epoch, n),
                    SystemTime::now(),
                    &changes,
                )));
            }
        } else {
            d.resync(Seq::new(epoch, n), &disk);
        }
        d.at = Some((epoch, n));
        d.announce(Role::Watching);
        let looks = spawn_looks(&d.opts, looks_stop.clone());
        Ok(Lead {
            store,
            manager,
            rx,
            epoch,
            n,
            last_m: newest.number(),
            looks,
        })
    }

    fn run(&mut self, d: &mut Driver, keeper: &Keeper) -> Next {
        loop {
            if d.stopping() {
                return Next::Stop;
            }
            let step = select! {
                recv(self.rx) -> ev => match ev {
                    Ok(Event::Changes(b)) => self.publish(d, &b),
                    Ok(_) => Ok(()),
                    Err(_) => {
                        d.set_error("the watcher's manager stopped");
                        Err(Next::Follow)
                    }
                },
                recv(d.requests) -> r => match r {
                    Ok(r) => {
                        let answer = self.look(d, &r.paths, r.deadline);
                        let _ = r.reply.send(answer.as_ref().map(|s| *s).map_err(|e| match e {
                            LookError::Watch(m) => LookRefused::Failed(m.clone()),
                            LookError::Next(_) => LookRefused::Role,
                        }));
                        answer.map(|_| ()).or_else(|e| match e {
                            LookError::Watch(_) => Ok(()),
                            LookError::Next(n) => Err(n),
                        })
                    }
                    Err(_) => Ok(()),
                },
                recv(self.looks) -> r => match r {
                    Ok(req) => self.answer(d, req),
                    Err(_) => Ok(()),
                },
                recv(keeper.lost) -> why => {
                    let why = why.unwrap_or(Lost::Taken);
                    d.set_error(&why);
                    Err(why.next())
                },
                default(STEP) => Ok(()),
            };
            if let Err(next) = step {
                return next;
            }
        }
    }

    /// Publishes manager batch `b` as the next seq, then delivers it here.
    fn publish(&mut self, d: &mut Driver, b: &ChangeBatch) -> std::result::Result<(), Next> {
        self.last_m = b.seq.number();
        let changes = d.relative(b);
        if changes.is_empty() {
            return Ok(());
        }
        let n = self.n + 1;
        match self.store.publish(
            &d.me,
            self.epoch,
            false,
            n,
            b.time,
            &changes,
            d.opts.max_len,
        ) {
            Ok(()) => {}
            Err(e) => {
                // Deposed (the lease expired, someone else took it), or
                // Redis failed (the batch may or may not be in): step
                // down and follow from the last seq delivered here. What
                // this batch held is in the stream, or is the next
                // watcher's to publish, from its difference with the disk.
                d.set_error(format!("stepped down: {e}"));
                return Err(Next::Follow);
            }
        }
        self.n = n;
        d.at = Some((self.epoch, n));
        d.deliver(FeedEvent::Changes(d.batch(
            Seq::new(self.epoch, n),
            b.time,
            &changes,
        )));
        Ok(())
    }

    /// A look by the watcher's manager: the seq of the batch holding what
    /// it found, once published.
    fn look(
        &mut self,
        d: &mut Driver,
        paths: &[Vec<u8>],
        deadline: Instant,
    ) -> std::result::Result<Seq, LookError> {
        let abs: Vec<PathBuf> = paths.iter().map(|p| codec::join(&d.opts.root, p)).collect();
        let timeout = deadline.saturating_duration_since(Instant::now());
        let m = self
            .manager
            .look(&d.opts.name, abs, timeout)
            .map_err(|e| LookError::Watch(e.to_string()))?;
        while self.last_m < m.number() {
            match self.rx.recv_deadline(deadline) {
                Ok(Event::Changes(b)) => self.publish(d, &b).map_err(LookError::Next)?,
                Ok(_) => {}
                Err(_) => return Err(LookError::Watch("the look's batch did not come".into())),
            }
        }
        Ok(Seq::new(self.epoch, self.n))
    }

    /// Answers a follower's look through Redis.
    fn answer(&mut self, d: &mut Driver, req: LookRequest) -> std::result::Result<(), Next> {
        let now_ms = codec::millis(SystemTime::now());
        if req.reply.is_empty() || req.deadline_ms <= now_ms {
            return Ok(());
        }
        let deadline = Instant::now() + Duration::from_millis(req.deadline_ms - now_ms);
        match self.look(d, &req.paths, deadline) {
            Ok(seq) => match self.store.answer_look(&req.reply, self.epoch, seq.number()) {
                Ok(()) => Ok(()),
                Err(e) => {
                    d.set_error(format!("stepped down: answering a look: {e}"));
                    Err(Next::Follow)
                }
            },
            Err(LookError::Watch(e)) => {
                d.set_error(format!("a look failed: {e}"));
                Ok(())
            }
            Err(LookError::Next(n)) => Err(n),
        }
    }
}

enum LookError {
    Watch(String),
    Next(Next),
}

/// Reads the `looks` stream for the watcher, from shortly before it took
/// over (requests of the last moments may still be waited for), until
/// `stop`.
fn spawn_looks(opts: &FeedOptions, stop: Arc<AtomicBool>) -> Receiver<LookRequest> {
    let (tx, rx) = unbounded();
    let opts = opts.clone();
    let since = codec::millis(SystemTime::now()).saturating_sub(opts.lease_ttl.as_millis() as u64);
    let _ = std::thread::Builder::new()
        .name("specwatch-feed-looks".into())
        .spawn(move || {
            let mut after = format!("{since}-0");
            while !stop.load(Ordering::SeqCst) {
                let Ok(mut store) = opts.store() else {
                    std::thread::sleep(STEP);
                    continue;
                };
                while !stop.load(Ordering::SeqCst) {
                    match store.look_requests(&after, STEP) {
                        Ok(reqs) => {
                            for r in reqs {
                                after = r.id.clone();
                                if tx.send(r).is_err() {
                                    return;
                                }
                            }
                        }
                        Err(_) => break,
                    }
                }
            }
        });
    rx
}

/// Why the lease was lost.
#[derive(Debug)]
enum Lost {
    /// Another replica holds it (ours expired before it was renewed).
    Taken,
    /// Redis did not answer for a whole ttl.
    Redis(String),
}

impl Lost {
    fn next(self) -> Next {
        match self {
            Lost::Taken => Next::Follow,
            Lost::Redis(e) => Next::Local(e),
        }
    }
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lost::Taken => f.write_str("lost the lease: it expired before it was renewed"),
            Lost::Redis(e) => write!(f, "lost the lease: redis: {e}"),
        }
    }
}

/// Renews the lease every ttl/3 on a thread of its own (a takeover's
/// scan may take long), and says when it is lost.
struct Keeper {
    stop: Sender<bool>,
    lost: Receiver<Lost>,
    handle: Option<JoinHandle<()>>,
}

impl Keeper {
    fn start(opts: &FeedOptions, me: &str) -> Keeper {
        let (stop, stopped) = crossbeam_channel::bounded::<bool>(1);
        let (lost_tx, lost) = crossbeam_channel::bounded(1);
        let (opts, me) = (opts.clone(), me.to_owned());
        let handle = std::thread::Builder::new()
            .name("specwatch-feed-lease".into())
            .spawn(move || {
                let ttl = opts.lease_ttl;
                let mut store: Option<Store> = None;
                let mut renewed = Instant::now();
                loop {
                    match stopped.recv_timeout(ttl / 3) {
                        Ok(release) => {
                            if release {
                                let s = store.take().map(Ok).unwrap_or_else(|| opts.store());
                                if let Ok(mut s) = s {
                                    let _ = s.release(&me);
                                }
                            }
                            return;
                        }
                        Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
                        Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                    }
                    let attempt = match store.take() {
                        Some(s) => Ok(s),
                        None => opts.store().map_err(|e| e.to_string()),
                    }
                    .and_then(|mut s| match s.renew(&me, ttl) {
                        Ok(ours) => Ok((s, ours)),
                        Err(e) => Err(e.to_string()),
                    });
                    match attempt {
                        Ok((s, true)) => {
                            renewed = Instant::now();
                            store = Some(s);
                        }
                        Ok((_, false)) => {
                            let _ = lost_tx.send(Lost::Taken);
                            return;
                        }
                        Err(e) if renewed.elapsed() >= ttl => {
                            let _ = lost_tx.send(Lost::Redis(e));
                            return;
                        }
                        Err(_) => {}
                    }
                }
            })
            .ok();
        Keeper { stop, lost, handle }
    }

    /// Stops renewing; lets go of the lease if `release`.
    fn stop(mut self, release: bool) {
        let _ = self.stop.send(release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
