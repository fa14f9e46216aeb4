//! The server: its arguments, the watch over the storage directory (and
//! over the TLS certificate's directories), the thread that applies its
//! batches to the index, and the HTTP listener with its layers (access
//! log, metrics, context path).

use std::fs;
use std::io::{self, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, select};
use specwatch::{
    Backend, ChangeBatch, Event, IgnoreRule, Manager, Phase, RootStatus, Seq, WatchSpec,
    WatchStatus,
};
use specwatch_feed::{FeedEvent, FeedOptions, Replica, ResyncReason, Role};
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::api::{self, Ops, Repo};
use crate::cache::{self, Loaded, Notify, Options, Writer};
use crate::config::{self, Config, Feed, Parsed};
use crate::feed::{self, Putter};
use crate::http;
use crate::index::{self, Index, Reads, apply_batch};
use crate::metrics::{self, Metrics, Sources};
use crate::proxy::Links;
use crate::rules_file;
use crate::snapshot::{Published, Snapshot};
use crate::storage::UPLOAD_PREFIX;
use crate::tls::{self, Certs};
use crate::{logging, proxy};

/// The name of the one watch spec, over the storage directory.
pub(crate) const SPEC: &str = "storage";
/// How long starting to watch (and the initial scan) may take.
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// The watch manager: the OS backend the spec names (`native`,
/// `portable`), else the default one (`Auto` and `Poll` are the spec's
/// business); `poll_interval` paces what the manager polls on its own
/// account (roots `Auto` finds on shared storage).
pub(crate) fn watch_manager(
    backend: Backend,
    poll_interval: Duration,
) -> specwatch::Result<Manager> {
    let builder = Manager::builder().poll_interval(poll_interval);
    match backend {
        Backend::Native | Backend::Portable => builder.backend(backend),
        _ => builder,
    }
    .build()
}

/// The one watch: the whole storage directory, temporary uploads left out,
/// watched as `backend` says, its existing entries reported first.
pub(crate) fn storage_spec(root: &Path, backend: Backend) -> WatchSpec {
    WatchSpec::new([root])
        .ignore(IgnoreRule::new(root, [format!("{UPLOAD_PREFIX}*")]))
        .backend(backend)
        .initial_scan(true)
}

/// The server's `main`: reads the arguments, sets up the log, runs the
/// server until it is asked to stop, and says how it ended.
pub fn main() -> ExitCode {
    let args = match config::parse(std::env::args_os()) {
        Parsed::Run(c) => *c,
        Parsed::Info(text) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Parsed::Refused(e) => {
            // Before the log is set up: as clap says it.
            eprintln!("{}", e.trim_end());
            return ExitCode::from(2);
        }
        Parsed::HashCredential(scheme) => return rules_file::hash_credential(scheme),
    };
    if let Err(e) = logging::init(args.log) {
        eprintln!("chart_index: {e}");
        return ExitCode::from(1);
    }
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("chart_index: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(args: Config) -> Result<(), String> {
    info!("chart_index: auth: {}", args.policy.auth.describe());
    fs::create_dir_all(&args.storage)
        .map_err(|e| format!("cannot create {}: {e}", args.storage.display()))?;
    // Changes are reported under the path as watched: watch the canonical
    // one (a root that is itself a link would be watched as a link).
    let root = args
        .storage
        .canonicalize()
        .map_err(|e| format!("{}: {e}", args.storage.display()))?;
    // Bound first, so that a bad address fails before a long scan;
    // connections wait in the backlog until the index is built.
    let listener =
        TcpListener::bind(&args.listen).map_err(|e| format!("listen on {}: {e}", args.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let cache = match &args.cache_dir {
        Some(dir) => Some(cache_dir(dir, &root)?),
        None => None,
    };
    // Read before the watch starts; a cache that cannot be used is said
    // here, once.
    let loaded = cache.as_ref().map(|(dir, options)| {
        let path = dir.join(cache::FILE_NAME);
        match cache::load(dir, options) {
            Loaded::Missing => {
                info!(
                    "chart_index: cache: none at {} yet: every package is read",
                    path.display()
                );
                None
            }
            Loaded::Ignored(why) => {
                warn!(
                    "chart_index: cache: ignored {}: {why}; every package is read",
                    path.display()
                );
                None
            }
            Loaded::Entries(entries) => Some(entries),
        }
    });

    let manager =
        Arc::new(watch_manager(args.backend, args.poll_interval).map_err(|e| e.to_string())?);
    // Subscribed before the spec is applied: the initial scan's batches
    // come through here, as every later one does.
    let events = manager.subscribe();
    // With --feed, the storage is watched by the feed's replica (when it
    // is the watcher, or Redis is away), not by this manager.
    let feed = match &args.feed {
        Some(f) => Some(start_feed(f, &root, &args)?),
        None => None,
    };
    let status = match &feed {
        Some(_) => None,
        None => {
            manager
                .apply(SPEC, storage_spec(&root, args.backend))
                .map_err(|e| e.to_string())?;
            Some(
                manager
                    .wait_watching(SPEC, START_TIMEOUT)
                    .map_err(|e| e.to_string())?,
            )
        }
    };
    let (applied_tx, applied) = watch::channel(Seq::default());
    // What requests (and the metrics, and the restart cache's writer)
    // read: the index's snapshots, published by the follower's thread.
    let published = Arc::new(Published::new(Snapshot::empty()));
    let metrics = Arc::new(Metrics::new(Sources {
        index: Arc::clone(&published),
        manager: Arc::clone(&manager),
        applied: applied.clone(),
        feed: feed.as_ref().map(|f| Arc::downgrade(&f.replica)),
    }));
    let mut follower = Follower::new(
        root.clone(),
        Arc::clone(&published),
        applied_tx,
        Arc::clone(&metrics),
    );
    follower.links = args.links.clone();
    if let Some(status) = &status {
        follower.status(status);
    }
    // Once the barrier is passed, every batch of the initial scan (and of
    // any change made since the spec was applied) has been delivered:
    // apply what has come, then answer requests.
    if feed.is_none() {
        manager
            .sync(SPEC, START_TIMEOUT)
            .map_err(|e| e.to_string())?;
    }
    let start: Vec<Event> = events.try_iter().collect();
    // Which packages to read: those the cache cannot vouch for (with
    // --feed: at the first resync, if the feed's snapshot gave none).
    let loaded = loaded.flatten();
    let verdicts = match (&feed, loaded) {
        (Some(_), cached) => {
            follower.cached = cached;
            None
        }
        (None, cached) => cached.map(|cached| {
            let batches = start.iter().filter_map(|ev| match ev {
                Event::Changes(b) if b.name == SPEC => Some(&**b),
                _ => None,
            });
            cache::decide(cached, index::found(&root, batches))
        }),
    };
    let dropped = verdicts.as_ref().map_or(0, |v| v.dropped);
    let writer = match cache {
        Some((dir, options)) => Some(
            Writer::spawn(dir, options, Arc::clone(&published))
                .map_err(|e| format!("starting the cache's thread: {e}"))?,
        ),
        None => None,
    };
    let notify = writer.as_ref().map(Writer::notify);
    // The certificate, watched from now on: its batches come through the
    // same subscription, to the follower (after the start's).
    let certs = match &args.tls {
        Some(files) => {
            let certs = Certs::new(files.clone())?;
            manager
                .apply(tls::SPEC, certs.watch_spec())
                .map_err(|e| format!("watching the TLS files: {e}"))?;
            follower.certs = Some(Arc::clone(&certs));
            Some(certs)
        }
        None => None,
    };
    // One thread applies every batch, the start's too, and renders every
    // snapshot: what it renders replaces what it rendered, in its own
    // allocator arena (renderings made on this thread and replaced from
    // another left the first arena's memory held: 3 KiB more per chart
    // after a few hundred uploads). It says when the start's batches are
    // applied and published; then it follows the watch. It holds the
    // index, not the manager: once the manager is dropped, the events end
    // and so does the thread.
    let (started_tx, started) = std::sync::mpsc::channel();
    let replica = match feed {
        Some(StartedFeed {
            replica,
            events: feed_events,
            index,
            name,
        }) => {
            if let Some(index) = index {
                follower.seq = index.1;
                follower.index = index.0;
            }
            follower.putter = Some(
                Putter::spawn(Arc::downgrade(&replica), name)
                    .map_err(|e| format!("starting the feed's snapshot thread: {e}"))?,
            );
            std::thread::Builder::new()
                .name("follow".into())
                .spawn(move || {
                    for ev in start {
                        follower.handle(ev);
                    }
                    follower.follow_feed(&feed_events, &events, started_tx, notify);
                })
                .map_err(|e| e.to_string())?;
            Some(replica)
        }
        None => {
            std::thread::Builder::new()
                .name("follow".into())
                .spawn(move || {
                    follower.reads.verdicts = verdicts;
                    for ev in start {
                        follower.handle(ev);
                    }
                    follower.reads.verdicts = None;
                    follower.started(dropped, notify);
                    let _ = started_tx.send(());
                    for ev in &events {
                        follower.handle(ev);
                    }
                })
                .map_err(|e| e.to_string())?;
            None
        }
    };
    // With --feed, the replica may take long (a scan of a large storage;
    // a storage it cannot watch, tried again): said every so often.
    loop {
        match started.recv_timeout(Duration::from_secs(10)) {
            Ok(()) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if let Some(r) = &replica {
                    let s = r.status();
                    info!(
                        "chart_index: feed: starting: {} (redis {}), last trouble: {}",
                        s.role,
                        if s.feed_up {
                            "answers"
                        } else {
                            "does not answer"
                        },
                        s.last_error.as_deref().unwrap_or("none")
                    );
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(
                    "the thread that applies the watch's batches ended at the start".into(),
                );
            }
        }
    }
    rules_file::watch(&manager, &args.policy.auth)?;
    let rules = args.policy.rules;
    let mut repo = Repo::new(
        root,
        published,
        Arc::clone(&manager),
        applied,
        args.max_upload,
        args.sync_timeout,
        args.policy,
    )
    .with_ops(Ops {
        metrics: Arc::clone(&metrics),
        serve_metrics: args.metrics,
    });
    if let Some(r) = &replica {
        repo = repo.with_feed(Arc::downgrade(r));
    }
    let repo = Arc::new(repo);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the async runtime: {e}"))?;
    // Inside out: the routes, counted (metrics), under the context path,
    // with the access log and request ids outermost.
    let context = args.links.context_path.clone().unwrap_or_default();
    let mut app = metrics::layer(api::router(repo), metrics, rules);
    if !context.is_empty() {
        app = proxy::strip_context(app, context.clone());
    }
    let app = logging::access_log(app, args.log, &context);
    let (scheme, acceptor) = match &certs {
        Some(c) => ("https", Some(c.acceptor()?)),
        None => ("http", None),
    };
    runtime.block_on(async {
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| e.to_string())?;
        let stop = stop_signal().map_err(|e| format!("listening for signals: {e}"))?;
        {
            let mut out = io::stdout().lock();
            writeln!(out, "LISTENING {scheme}://{addr}")
                .and_then(|()| out.flush())
                .map_err(|e| e.to_string())?;
        }
        http::serve(listener, app, stop, acceptor).await;
        Ok::<(), String>(())
    })?;
    // Blocking work still under way (a sync barrier whose client left)
    // may hold the manager a little longer; it stops once the last holder
    // lets go.
    runtime.shutdown_timeout(Duration::from_secs(5));
    // The feed's replica lets go of the lease (another takes over within a
    // third of its expiry); then its events end, and so does the follower.
    drop(replica);
    drop(manager);
    if let Some(w) = writer {
        w.stop();
    }
    Ok(())
}

/// The feed's replica, started, with its events, and the index the
/// feed's snapshot gave (with its seq) if there was one.
struct StartedFeed {
    replica: Arc<Replica>,
    events: Receiver<FeedEvent>,
    index: Option<(Index, Seq)>,
    name: String,
}

/// Starts the replica of `feed` over the storage `root`: it watches the
/// storage as this server would (the same spec and manager), when it is
/// the watcher or Redis is away. A snapshot of the index the watcher put
/// in Redis is loaded first, and the replica follows from its seq.
fn start_feed(feed: &Feed, root: &Path, args: &Config) -> Result<StartedFeed, String> {
    let (backend, interval) = (args.backend, args.poll_interval);
    let mut opts = FeedOptions::new(
        feed.url.as_str(),
        feed.name.as_str(),
        storage_spec(root, backend),
    )
    .map_err(|e| format!("--feed: {e}"))?
    .manager(move || watch_manager(backend, interval));
    let t = std::time::Instant::now();
    let index = match opts.read_snapshot() {
        Ok(Some((seq, bytes))) => match feed::decode(&feed.name, &bytes, seq.number()) {
            Ok(index) => {
                info!(
                    "chart_index: feed: snapshot at seq {seq}: {} packages, {} bytes, loaded in \
                     {} ms",
                    index.len(),
                    bytes.len(),
                    t.elapsed().as_millis()
                );
                opts = opts.resume_from(seq);
                Some((index, seq))
            }
            Err(why) => {
                warn!("chart_index: feed: snapshot at seq {seq} not used: {why}");
                None
            }
        },
        Ok(None) => {
            info!("chart_index: feed: no snapshot yet: the index is built from the whole tree");
            None
        }
        Err(e) => {
            warn!("chart_index: feed: no snapshot: {e}");
            None
        }
    };
    let (replica, events) = Replica::start(opts).map_err(|e| format!("--feed: {e}"))?;
    info!(
        "chart_index: feed: {} as {}",
        feed.name,
        replica.status().instance
    );
    Ok(StartedFeed {
        replica: Arc::new(replica),
        events,
        index,
        name: feed.name.clone(),
    })
}

/// The cache directory `dir`, canonical, which must not be inside the
/// storage directory `root` (checked before it is created, if missing);
/// and the options the cache is written under.
fn cache_dir(dir: &Path, root: &Path) -> Result<(PathBuf, Options), String> {
    let err = |e: &dyn std::fmt::Display| format!("--cache-dir {}: {e}", dir.display());
    // Where it would be: its nearest existing ancestor, canonical, and the
    // names below that.
    let abs = std::path::absolute(dir).map_err(|e| err(&e))?;
    let (base, rest) = abs
        .ancestors()
        .find(|a| fs::symlink_metadata(a).is_ok())
        .map(|a| (a, abs.strip_prefix(a).unwrap_or(Path::new(""))))
        .ok_or_else(|| err(&"no part of it exists"))?;
    let mut target = base.canonicalize().map_err(|e| err(&e))?;
    for c in rest.components() {
        match c {
            std::path::Component::Normal(name) => target.push(name),
            _ => return Err(err(&"`.` or `..` in a part that does not exist yet")),
        }
    }
    let inside = |p: &Path| {
        if p.starts_with(root) {
            Err(format!(
                "--cache-dir {} is inside the storage directory {}: the cache is this \
                 server's own, and the storage is shared",
                p.display(),
                root.display()
            ))
        } else {
            Ok(())
        }
    };
    inside(&target)?;
    fs::create_dir_all(&target).map_err(|e| err(&e))?;
    let target = target.canonicalize().map_err(|e| err(&e))?;
    inside(&target)?;
    let options = Options::new(root).ok_or_else(|| {
        format!(
            "--cache-dir: the storage directory's path is not UTF-8: {}",
            root.display()
        )
    })?;
    Ok((target, options))
}

/// What stops the server: SIGTERM, SIGINT (Ctrl-C) or SIGHUP; on Windows
/// Ctrl-C, Ctrl-Break or the console closing. Set up before `LISTENING`
/// (so that a signal sent once it is printed is never missed); the future
/// gives the signal's name.
#[cfg(unix)]
fn stop_signal() -> io::Result<impl std::future::Future<Output = String>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
            _ = hup.recv() => "SIGHUP",
        }
        .to_owned()
    })
}

#[cfg(windows)]
fn stop_signal() -> io::Result<impl std::future::Future<Output = String>> {
    use tokio::signal::windows::{ctrl_break, ctrl_c, ctrl_close};
    let mut c = ctrl_c()?;
    let mut brk = ctrl_break()?;
    let mut close = ctrl_close()?;
    Ok(async move {
        tokio::select! {
            _ = c.recv() => "Ctrl-C",
            _ = brk.recv() => "Ctrl-Break",
            _ = close.recv() => "console closed",
        }
        .to_owned()
    })
}

/// Applies the watch's events, in order: change batches to the index,
/// then publishes its snapshot and says through `applied` which batch it
/// has applied; statuses to the log (each root's backend, trouble) when
/// they change; and reloads the TLS certificate when its files change.
struct Follower {
    /// The storage directory, canonical.
    root: PathBuf,
    /// The index: this thread's alone.
    index: Index,
    /// Where requests find the snapshot of it last published.
    published: Arc<Published>,
    /// That snapshot.
    last: Arc<Snapshot>,
    /// How package URLs are made (`--chart-url`).
    links: Links,
    applied: watch::Sender<Seq>,
    /// The seq of the last batch applied (the feed's, or the watch's).
    seq: Seq,
    metrics: Arc<Metrics>,
    /// The packages that could not be read, as counted in the metrics.
    skipped: usize,
    /// Whether the start's batches are applied: from then on each batch is
    /// published as it is applied (the start's are published once,
    /// together), and lags are measured.
    live: bool,
    /// The TLS certificate, reloaded on each batch of its spec.
    certs: Option<Arc<Certs>>,
    /// The roots last printed.
    roots: Vec<RootStatus>,
    /// The trouble (degraded, failed) last printed; `None` while all is well.
    trouble: Option<String>,
    /// How packages were read (and the cache's verdicts during the start).
    reads: Reads,
    /// Told of each batch that changes the index's packages, once started
    /// (`None`: no cache).
    cache: Option<Notify>,
    /// With `--feed` and `--cache-dir`: the restart cache's entries, for
    /// the first resync (if the feed's snapshot gave no index).
    cached: Option<std::collections::HashMap<String, crate::chart::ChartVersion>>,
    /// With `--feed`: puts the index's snapshots in Redis while this
    /// replica is the watcher.
    putter: Option<Putter>,
}

impl Follower {
    fn new(
        root: PathBuf,
        published: Arc<Published>,
        applied: watch::Sender<Seq>,
        metrics: Arc<Metrics>,
    ) -> Follower {
        Follower {
            root,
            index: Index::new(),
            last: Arc::new(Snapshot::empty()),
            published,
            links: Links::default(),
            applied,
            seq: Seq::default(),
            metrics,
            skipped: 0,
            live: false,
            certs: None,
            roots: Vec::new(),
            trouble: None,
            reads: Reads::default(),
            cache: None,
            cached: None,
            putter: None,
        }
    }

    /// The start's batches are applied: says how the packages came, and
    /// from now on tells `cache` of changes (and now, if the index is
    /// not what the cache held: `dropped` cached packages were not found).
    fn started(&mut self, dropped: usize, cache: Option<Notify>) {
        self.publish();
        let r = &self.reads;
        let indexed = self.index.len();
        info!(
            "chart_index: start: {indexed} packages indexed: {} from the cache, {} read ({} of \
             them only hashed), {} unreadable; {dropped} cached packages gone",
            r.cached,
            r.parsed + r.verified,
            r.verified,
            r.unreadable
        );
        if let Some(n) = &cache
            && (r.parsed + r.verified + dropped > 0)
        {
            n.changed();
        }
        self.cache = cache;
        self.count_skipped();
        self.reads.changed_at.clear();
        self.live = true;
    }

    /// Counts in the metrics the packages found unreadable since the
    /// last call.
    fn count_skipped(&mut self) {
        let n = self.reads.unreadable;
        self.metrics
            .skipped(u64::try_from(n - self.skipped).unwrap_or(0));
        self.skipped = n;
    }

    fn handle(&mut self, ev: Event) {
        match ev {
            Event::Changes(batch) if batch.name == SPEC => self.apply(&batch),
            Event::Status(s) if s.name == SPEC => self.status(&s),
            Event::Changes(b) if b.name == tls::SPEC => self.reload_tls(),
            Event::Status(s) if s.name == tls::SPEC => {
                if let Phase::Degraded { reason } | Phase::Failed { error: reason } = &s.phase {
                    warn!("chart_index: tls: the certificate's watch: {reason}");
                }
            }
            _ => {}
        }
    }

    /// Applies one batch of the storage watch or of the feed, then
    /// publishes the index (once started).
    fn apply(&mut self, batch: &ChangeBatch) {
        let changed = apply_batch(&mut self.index, &self.root, batch, &mut self.reads);
        self.seq = batch.seq;
        self.applied_now(batch.time, changed);
        // Once requests see it (during the start, once applied).
        info!(
            "index: seq {}: {} changes",
            batch.seq.number(),
            batch.changes.len()
        );
    }

    /// What follows a batch applied (closed at `time`; `changed`: the
    /// index's packages changed): published once started, the cache and
    /// the feed's snapshot told.
    fn applied_now(&mut self, time: std::time::SystemTime, changed: bool) {
        if self.live {
            // Counted before the batch is said applied: a write
            // that waited for it finds the metrics up to date.
            self.metrics.batch_applied(time, &self.reads.changed_at);
            self.count_skipped();
            self.publish();
        }
        self.reads.changed_at.clear();
        if changed && self.live {
            if let Some(cache) = &self.cache {
                cache.changed();
            }
            self.offer_snapshot();
        }
    }

    /// Offers the feed's snapshot thread the index as last published.
    fn offer_snapshot(&self) {
        if let Some(p) = &self.putter {
            p.offer(self.seq, Arc::clone(&self.last));
        }
    }

    /// Follows the feed (`feed`) and the server's own watch (`own`: the
    /// TLS files', the rules file's), until the feed ends. Once the
    /// replica has handed over the whole tree (its first role), the index
    /// is published, `started` told, and the cache told of changes.
    fn follow_feed(
        &mut self,
        feed: &Receiver<FeedEvent>,
        own: &Receiver<Event>,
        started: std::sync::mpsc::Sender<()>,
        cache: Option<Notify>,
    ) {
        let mut start = Some((started, cache));
        loop {
            select! {
                recv(feed) -> ev => match ev {
                    Ok(FeedEvent::Changes(b)) => self.apply(&b),
                    Ok(FeedEvent::Resync { reason, picture }) => self.resync(&reason, &picture),
                    Ok(FeedEvent::Role(role)) => {
                        info!("chart_index: feed: {role} at seq {}", self.seq);
                        if role != Role::Starting && let Some((tx, cache)) = start.take() {
                            self.started(0, cache);
                            let _ = tx.send(());
                        }
                        if role == Role::Watching {
                            self.offer_snapshot();
                        }
                    }
                    Ok(_) => {}
                    Err(_) => return,
                },
                recv(own) -> ev => match ev {
                    Ok(ev) => self.handle(ev),
                    Err(_) => return,
                },
            }
        }
    }

    /// Builds the index again from the whole tree the feed handed over,
    /// keeping each package whose file is as it was read (see
    /// [`feed::carry`]), and publishes it once started.
    fn resync(&mut self, reason: &ResyncReason, picture: &ChangeBatch) {
        info!(
            "chart_index: feed: resync ({reason}): {} entries at seq {}",
            picture.changes.len(),
            picture.seq
        );
        let held = match self.cached.take() {
            Some(cached) if self.index.len() == 0 => cached,
            _ => self
                .index
                .tenants
                .iter()
                .flat_map(|(t, charts)| {
                    charts.iter().map(move |(f, c)| {
                        let key = if t.is_empty() {
                            f.clone()
                        } else {
                            format!("{t}/{f}")
                        };
                        (key, c.clone())
                    })
                })
                .collect(),
        };
        self.reads.verdicts = Some(feed::carry(held, &self.root, picture));
        let mut fresh = Index::new();
        apply_batch(&mut fresh, &self.root, picture, &mut self.reads);
        self.reads.verdicts = None;
        // Packages read again, not changed: no lag to observe.
        self.reads.changed_at.clear();
        self.index.replace_with(fresh);
        self.seq = picture.seq;
        self.metrics.feed_resync();
        self.applied_now(picture.time, true);
    }

    /// The certificate's files changed: read them again.
    fn reload_tls(&self) {
        let Some(certs) = &self.certs else { return };
        match certs.reload() {
            Ok(tls::Reload::Unchanged) => {}
            Ok(tls::Reload::Reloaded) => {
                self.metrics.tls_reload(true);
                info!("chart_index: tls: certificate reloaded");
            }
            Err(e) => {
                self.metrics.tls_reload(false);
                warn!("chart_index: tls: certificate not reloaded, the old one stays: {e}");
            }
        }
    }

    /// Publishes the index's snapshot (the tenants changed since the last
    /// one rendered again), then says which batch it shows.
    fn publish(&mut self) {
        let touched = self.index.take_touched();
        let next = Arc::new(self.last.next(&self.index, &touched, &self.links));
        self.published.publish(Arc::clone(&next));
        self.last = next;
        self.applied.send_replace(self.seq);
    }

    fn status(&mut self, s: &WatchStatus) {
        if !s.roots.is_empty() && s.roots != self.roots {
            for r in &s.roots {
                info!("chart_index: root: {r}");
            }
            self.roots = s.roots.clone();
        }
        let trouble = match &s.phase {
            Phase::Degraded { reason } => Some(format!("watch degraded: {reason}")),
            Phase::Failed { error } => Some(format!("watch failed: {error}")),
            Phase::Watching => None,
            _ => return,
        };
        if trouble != self.trouble {
            match &trouble {
                Some(t) => warn!("chart_index: {t}"),
                None => info!("chart_index: watching again"),
            }
            self.trouble = trouble;
        }
    }
}
