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

use specwatch::{Backend, Event, IgnoreRule, Manager, Phase, RootStatus, WatchSpec, WatchStatus};
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::api::{self, Ops, Repo};
use crate::cache::{self, Loaded, Notify, Options, Writer};
use crate::config::{self, Config, Parsed};
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
    manager
        .apply(SPEC, storage_spec(&root, args.backend))
        .map_err(|e| e.to_string())?;
    let status = manager
        .wait_watching(SPEC, START_TIMEOUT)
        .map_err(|e| e.to_string())?;
    let (applied_tx, applied) = watch::channel(0);
    // What requests (and the metrics, and the restart cache's writer)
    // read: the index's snapshots, published by the follower's thread.
    let published = Arc::new(Published::new(Snapshot::empty()));
    let metrics = Arc::new(Metrics::new(Sources {
        index: Arc::clone(&published),
        manager: Arc::clone(&manager),
        applied: applied.clone(),
    }));
    let mut follower = Follower::new(
        root.clone(),
        Arc::clone(&published),
        applied_tx,
        Arc::clone(&metrics),
    );
    follower.links = args.links.clone();
    follower.status(&status);
    // Once the barrier is passed, every batch of the initial scan (and of
    // any change made since the spec was applied) has been delivered:
    // apply what has come, then answer requests.
    manager
        .sync(SPEC, START_TIMEOUT)
        .map_err(|e| e.to_string())?;
    let start: Vec<Event> = events.try_iter().collect();
    // Which packages to read: those the cache cannot vouch for.
    let verdicts = loaded.flatten().map(|cached| {
        let batches = start.iter().filter_map(|ev| match ev {
            Event::Changes(b) if b.name == SPEC => Some(&**b),
            _ => None,
        });
        cache::decide(cached, index::found(&root, batches))
    });
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
    started
        .recv()
        .map_err(|_| "the thread that applies the watch's batches ended at the start".to_owned())?;
    rules_file::watch(&manager, &args.policy.auth)?;
    let rules = args.policy.rules;
    let repo = Arc::new(
        Repo::new(
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
        }),
    );
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
    drop(manager);
    if let Some(w) = writer {
        w.stop();
    }
    Ok(())
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
    applied: watch::Sender<u64>,
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
}

impl Follower {
    fn new(
        root: PathBuf,
        published: Arc<Published>,
        applied: watch::Sender<u64>,
        metrics: Arc<Metrics>,
    ) -> Follower {
        Follower {
            root,
            index: Index::new(),
            last: Arc::new(Snapshot::empty()),
            published,
            links: Links::default(),
            applied,
            metrics,
            skipped: 0,
            live: false,
            certs: None,
            roots: Vec::new(),
            trouble: None,
            reads: Reads::default(),
            cache: None,
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
            Event::Changes(batch) if batch.name == SPEC => {
                let changed = apply_batch(&mut self.index, &self.root, &batch, &mut self.reads);
                if self.live {
                    // Counted before the batch is said applied: a write
                    // that waited for it finds the metrics up to date.
                    self.metrics
                        .batch_applied(batch.time, &self.reads.changed_at);
                    self.count_skipped();
                    self.publish();
                }
                self.reads.changed_at.clear();
                // Once requests see it (during the start, once applied).
                info!(
                    "index: seq {}: {} changes",
                    batch.seq.number(),
                    batch.changes.len()
                );
                if changed && let Some(cache) = &self.cache {
                    cache.changed();
                }
            }
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
        self.applied.send_replace(self.index.seq);
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
