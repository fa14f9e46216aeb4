//! A small Helm chart repository server (like chartmuseum) whose index
//! follows the storage directory through specwatch change batches.
//!
//! ```text
//! cargo run --release --example chart_index -- --storage DIR
//!     [--listen 127.0.0.1:8080] [--backend auto|native|portable|poll]
//!     [--poll-interval MS] [--max-upload-mb 16] [--sync-timeout MS]
//!     [--depth N] [--allow-overwrite] [--disable-delete]
//!     [--basic-auth-user USER --basic-auth-pass PASSWORD]
//!     [--auth-token-file FILE] [--auth-anonymous-get]
//!     [--allow-anonymous-write] [--cache-dir DIR]
//! ```
//!
//! Prints `LISTENING http://ADDR` on stdout (ADDR is the bound address, so
//! `--listen 127.0.0.1:0` works) once the first index is built. Routes, for
//! a tenant path of any depth (`org`, `org/team`, or none for `DIR`
//! itself; exactly N segments with `--depth N`, as chartmuseum's
//! `--depth`; without it, a path that could name two routes is read as
//! the `routes` module says):
//!
//! - `GET /health`: 200 `{"healthy":true}` while the watch's phase is
//!   Watching; otherwise 503 `{"healthy":false,"phase":...}` with the
//!   Degraded phase's `"reason"` or the Failed phase's `"error"`. Never
//!   needs credentials.
//! - `GET /<tenant>/index.yaml`: the Helm repository index of the packages
//!   (`*.tgz`) directly in `DIR/<tenant>/`: every field of each Chart.yaml
//!   that `helm repo index` writes, and chartmuseum's `serverInfo`, as
//!   JSON (which Helm reads first; see the `index` module), rendered
//!   once after each change of the tenant and served as rendered until
//!   the next (`generated` is the rendering's time). Header
//!   `X-Index-Seq`: the `seq` of the last change batch applied (0 before
//!   any).
//! - `GET /<tenant>/charts/<file>.tgz`: a package listed in that index;
//!   `<file>.tgz.prov`: its provenance file, if one was uploaded.
//! - `GET /api/<tenant>/charts` (`{name: [version, ...]}`; `?offset=N`,
//!   `?limit=M`: a page of the sorted names), `GET
//!   /api/<tenant>/charts/<name>` (`[version, ...]`, newest first), `GET
//!   /api/<tenant>/charts/<name>/<version>` (one; `latest`: the newest
//!   that is not a pre-release): each version as Helm's ChartVersion JSON,
//!   the entry `index.yaml` lists of it, as chartmuseum answers; 404
//!   `{"error":...}` naming what is missing. `HEAD` of each: 200 or 404.
//! - `POST /api/<tenant>/charts`, a package as the body, or helm-push's
//!   multipart form (`helm cm-push`: the package in field `chart`, its
//!   provenance file in `prov`; either alone will do): stored as
//!   `DIR/<tenant>/<name>-<version>.tgz` (and `.tgz.prov`) (201
//!   `{"saved":true,"indexed":true}`, 409 when it exists, 400 when the body
//!   is not a chart or not one Helm accepts, saying why (a version that
//!   is not SemVer as Helm reads it, say), or the provenance file is for
//!   another version; 413 above `--max-upload-mb`). Written to a `.upload-*` file in the same
//!   directory, fsynced, then hard-linked to its name (which fails if the
//!   name exists, so no upload replaces a package by accident; renamed
//!   where the file system has no hard links). `?force` replaces an
//!   existing version (renamed over it), only on a server started with
//!   `--allow-overwrite`; otherwise it is a 409 that says so.
//! - `POST /api/<tenant>/prov`, a provenance file as the body: stored as
//!   `DIR/<tenant>/<name>-<version>.tgz.prov` for the chart version its
//!   signed text names (which need not be there yet; 409 when the file
//!   exists, `?force` as above; 400 when it is no provenance file).
//! - `DELETE /api/<tenant>/charts/<name>/<version>`: removes the package,
//!   then its provenance file: 200 `{"deleted":true,"indexed":true}` or
//!   404. With `--disable-delete`: 404, as chartmuseum answers.
//! - While the storage's file system is unmounted (a polled `DIR` on NFS
//!   or FUSE whose mount went away: [`RootStatus::unmounted_since`]),
//!   every write is refused with 503 `{"error":...}` saying so (it would
//!   land in the directory below the mount), `/health` answers 503 with
//!   the watch's reason ("storage gone"), and the index keeps serving what
//!   it had: the watch reports nothing meanwhile, and once the storage is
//!   mounted again it reports the changes made there meanwhile, which the
//!   index applies as any.
//!
//! **Authentication** (the `auth` module). `--basic-auth-user` and
//! `--basic-auth-pass` (or `BASIC_AUTH_USER` and `BASIC_AUTH_PASS` in the
//! environment, which keeps the password off the command line; a flag
//! wins over its variable) set one Basic user; `--auth-token-file FILE`
//! (repeatable) takes Bearer tokens, one per line (`#` comments and blank
//! lines skipped). With either, every route but `/health` needs
//! credentials (401 with `WWW-Authenticate: Basic realm="chart_index"`
//! and/or `Bearer realm="chart_index"`), except reads (GET, HEAD) with
//! `--auth-anonymous-get`. With neither, reads are open and writes are
//! refused (403) unless `--allow-anonymous-write` says otherwise (which
//! cannot go with credentials). Credentials are compared in constant time
//! and never printed. Stderr says `chart_index: auth: ...` (the schemes and
//! what is open) before `LISTENING`, and `auth: refused METHOD PATH:
//! REASON` for each refusal.
//!
//! **Read-your-writes.** An upload or a delete answers once this server's
//! own index shows it: it passes a [`Manager::sync`] barrier and waits for
//! the batch it delivered to be applied, for at most `--sync-timeout`
//! milliseconds (default 10000; 0 answers at once). If that time passes,
//! the change is stored all the same and the answer says so:
//! `"indexed":false` and a `"warning"` saying why. Every answer to a write
//! carries `X-Index-Seq`, the batch the index had applied by then.
//!
//! **The index is built and kept from change batches alone.** The watch
//! asks for an initial scan ([`WatchOptions::initial_scan`]): its first
//! batches report every existing entry as created, and are applied like any
//! later batch. At start the server subscribes, applies the spec, waits for
//! it to be watched, passes a [`Manager::sync`] barrier (after which the
//! scan's batches have been delivered), applies what it has received, and
//! only then prints `LISTENING`; a thread applies the batches that follow.
//! An upload or a delete writes to the file system and the index learns of
//! it from the watch, like any write of another replica sharing `DIR` (or
//! of a person with a shell): each change of a `*.tgz` directly in a tenant
//! directory re-reads just that package. There is no walk of `DIR`, no
//! timer, no rebuild. Each applied batch says `index: seq N: K changes` on
//! stderr. A package that cannot be read (half written, corrupt) is left
//! out with a line `skip PATH: REASON` on stderr, and read again at its next
//! change.
//!
//! `--backend` chooses how the watch learns of changes (the spec's
//! [`WatchSpec::backend`]): `auto` (the default) uses the OS's events,
//! except on a network or FUSE file system (NFS, SMB, sshfs, s3fs, ...:
//! found with `statfs`, where another host's writes make no event here),
//! which it polls every `--poll-interval` milliseconds (default 1000);
//! `poll` polls at that interval whatever the file system; `native` and
//! `portable` name the OS backend (`--poll-interval` then only paces the
//! polling of directories the OS refuses to watch). Before `LISTENING`,
//! one line per root on stderr says what it got and why, e.g.
//! `chart_index: root: poll every 1s: fuse (0x65735546) at /mnt/charts`
//! (again whenever that changes). Trouble is said as it comes
//! (`chart_index: watch degraded: REASON`, `... watch failed: ERROR`) and
//! as it goes (`chart_index: watching again`).
//!
//! **Restarts** (`--cache-dir DIR`, the `cache` module). Without it, a
//! start reads every package. With it, the server keeps each package's
//! entry, digest and file stamp (size, mtime, ctime, inode) in
//! `DIR/chart_index.cache`, saved atomically a second after the index's
//! packages change and at a graceful stop; the next start takes from it
//! every package whose file still has the stamp it was read from, and
//! reads only the others (a cached package no longer there is dropped).
//! `DIR` must not be inside the storage directory (it is created if
//! missing). A cache that cannot be used (another layout, written under
//! other options, corrupt or cut short) is ignored, saying why
//! (`chart_index: cache: ignored PATH: REASON`). Each start says before
//! `LISTENING` how it got its packages: `chart_index: start: N packages
//! indexed: C from the cache, R read (V of them only hashed), U
//! unreadable; D cached packages gone`.
//!
//! `load.sh` (one replica), `restart-bench.sh` (the time to `LISTENING`
//! cold, warm and after changes, with and without the cache) and
//! `replicas-load.sh` (two replicas over one
//! storage directory, one through a bindfs mount, while charts are
//! uploaded and deleted) beside this file measure it under load (oha; see
//! the README).
//!
//! Nothing outside `DIR` is read or written (see the `storage` module) but
//! the `--cache-dir` directory, and temporary upload files are named
//! `.upload-*` and ignored by the watch.
//!
//! HTTP is axum over hyper's HTTP/1.1 on tokio: keep-alive, a bounded head
//! (64 KiB, 100 headers: 431 past them), bounded bodies (413 without
//! storing anything), read and write timeouts, at most 1024 connections at
//! once (see the `http` module). SIGTERM or Ctrl-C (SIGINT, SIGHUP; on
//! Windows Ctrl-Break and the console closing) stops it gracefully: no
//! new connection is accepted, the requests in flight are answered (for
//! at most 30 s), then the watch is stopped and the process exits 0,
//! saying `chart_index: stopping (SIGTERM): N connections open` and
//! `chart_index: stopped` on stderr.
//!
//! Modules: `http` (connections, limits, bodies, path segments), `routes`
//! (which route a path names), `auth` (credentials), `api` (the routes'
//! handlers), `listing` (the API's JSON of the index), `chart` (reading
//! packages), `provenance` (reading provenance files), `index` (the index
//! and its YAML), `cache` (the restart cache), `storage` (path safety,
//! durable writes, file stamps).
//!
//! [`WatchOptions::initial_scan`]: specwatch::WatchOptions::initial_scan
//! [`WatchSpec::backend`]: specwatch::WatchSpec::backend
//! [`Manager::sync`]: specwatch::Manager::sync

mod api;
mod auth;
mod cache;
mod chart;
mod form;
mod http;
mod index;
mod listing;
mod provenance;
mod routes;
mod storage;

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use specwatch::{Backend, Event, IgnoreRule, Manager, Phase, RootStatus, WatchSpec, WatchStatus};
use tokio::sync::watch;

use crate::api::{Policy, Repo};
use crate::auth::Auth;
use crate::cache::{Loaded, Notify, Options, Writer};
use crate::index::{Index, Reads, apply_batch};
use crate::routes::Rules;
use crate::storage::UPLOAD_PREFIX;

const USAGE: &str = "usage: chart_index --storage DIR [--listen ADDR] \
     [--backend auto|native|portable|poll] [--poll-interval MS] [--max-upload-mb N] \
     [--sync-timeout MS] [--depth N] [--allow-overwrite] [--disable-delete] \
     [--basic-auth-user USER --basic-auth-pass PASSWORD] [--auth-token-file FILE] \
     [--auth-anonymous-get] [--allow-anonymous-write] [--cache-dir DIR]
  (BASIC_AUTH_USER and BASIC_AUTH_PASS in the environment stand for the --basic-auth flags)";

/// The name of the one watch spec, over the storage directory.
const SPEC: &str = "storage";
/// The poll interval when `--poll-interval` gives none.
const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(1000);
/// How long starting to watch (and the initial scan) may take.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// How long an upload or delete waits for the index to show it, when
/// `--sync-timeout` gives no time.
const DEFAULT_SYNC_TIMEOUT: Duration = Duration::from_secs(10);

struct Args {
    storage: PathBuf,
    listen: String,
    /// What the spec asks for: `Auto`, `Native`, `Portable` or `Poll`.
    backend: Backend,
    /// `Poll`'s interval, and the manager's for what it polls otherwise
    /// (roots `Auto` finds shared; directories the OS will not watch).
    poll_interval: Duration,
    max_upload: u64,
    /// How long an upload or delete waits for the index to show it.
    sync_timeout: Duration,
    /// Credentials, what is open, how paths are read.
    policy: Policy,
    /// Where the restart cache is kept (`None`: no cache).
    cache_dir: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut storage = None;
    let mut listen = "127.0.0.1:8080".to_owned();
    let mut backend = Backend::Auto;
    let mut poll = false;
    let mut poll_interval = DEFAULT_POLL_INTERVAL;
    let mut max_upload_mb: u64 = 16;
    let mut sync_timeout = DEFAULT_SYNC_TIMEOUT;
    let mut rules = Rules {
        depth: None,
        delete: true,
    };
    let mut allow_overwrite = false;
    let mut auth = Auth::default();
    let (mut user, mut password) = (None, None);
    let mut token_files = Vec::new();
    let mut cache_dir = None;
    let mut it = std::env::args_os().skip(1);
    fn value(
        flag: &str,
        it: &mut impl Iterator<Item = std::ffi::OsString>,
    ) -> Result<String, String> {
        it.next()
            .and_then(|v| v.into_string().ok())
            .ok_or_else(|| format!("{flag} needs a value (UTF-8)\n{USAGE}"))
    }
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("--storage") => {
                storage = Some(PathBuf::from(
                    it.next()
                        .ok_or(format!("--storage needs a directory\n{USAGE}"))?,
                ));
            }
            Some("--listen") => listen = value("--listen", &mut it)?,
            Some("--backend") => {
                let v = value("--backend", &mut it)?;
                poll = v == "poll";
                backend = match v.as_str() {
                    "auto" | "poll" => Backend::Auto,
                    "native" => Backend::Native,
                    "portable" => Backend::Portable,
                    _ => return Err(format!("--backend: unknown backend {v:?}\n{USAGE}")),
                };
            }
            Some("--poll-interval") => {
                let v = value("--poll-interval", &mut it)?;
                let ms: u64 = v.parse().ok().filter(|ms| *ms > 0).ok_or_else(|| {
                    format!("--poll-interval: not a positive number of milliseconds: {v:?}")
                })?;
                poll_interval = Duration::from_millis(ms);
            }
            Some("--max-upload-mb") => {
                let v = value("--max-upload-mb", &mut it)?;
                max_upload_mb = v
                    .parse()
                    .ok()
                    .filter(|mb| (1..=1 << 20).contains(mb))
                    .ok_or_else(|| format!("--max-upload-mb: not a positive number: {v:?}"))?;
            }
            Some("--sync-timeout") => {
                let v = value("--sync-timeout", &mut it)?;
                let ms: u64 = v
                    .parse()
                    .ok()
                    .filter(|ms| *ms <= 3_600_000)
                    .ok_or_else(|| {
                        format!("--sync-timeout: not a number of milliseconds up to an hour: {v:?}")
                    })?;
                sync_timeout = Duration::from_millis(ms);
            }
            Some("--depth") => {
                let v = value("--depth", &mut it)?;
                let depth = v.parse().ok().filter(|d| *d <= 64).ok_or_else(|| {
                    format!("--depth: not a number of path segments up to 64: {v:?}")
                })?;
                rules.depth = Some(depth);
            }
            Some("--allow-overwrite") => allow_overwrite = true,
            Some("--disable-delete") => rules.delete = false,
            Some("--basic-auth-user") => user = Some(value("--basic-auth-user", &mut it)?),
            Some("--basic-auth-pass") => password = Some(value("--basic-auth-pass", &mut it)?),
            Some("--auth-token-file") => {
                token_files.push(PathBuf::from(
                    it.next()
                        .ok_or(format!("--auth-token-file needs a file\n{USAGE}"))?,
                ));
            }
            Some("--cache-dir") => {
                cache_dir = Some(PathBuf::from(
                    it.next()
                        .ok_or(format!("--cache-dir needs a directory\n{USAGE}"))?,
                ));
            }
            Some("--auth-anonymous-get") => auth.anonymous_get = true,
            Some("--allow-anonymous-write") => auth.anonymous_write = true,
            Some("-h" | "--help") => return Err(USAGE.into()),
            _ => return Err(format!("unknown argument {a:?}\n{USAGE}")),
        }
    }
    if poll {
        backend = Backend::Poll {
            interval: poll_interval,
        };
    }
    let env = |name: &str| match std::env::var(name) {
        Ok(v) if !v.is_empty() => Ok(Some(v)),
        Ok(_) | Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!("{name} is not UTF-8")),
    };
    let user = user.map_or_else(|| env("BASIC_AUTH_USER"), |u| Ok(Some(u)))?;
    let password = password.map_or_else(|| env("BASIC_AUTH_PASS"), |p| Ok(Some(p)))?;
    match (
        user.filter(|u| !u.is_empty()),
        password.filter(|p| !p.is_empty()),
    ) {
        (Some(u), Some(p)) => auth.set_basic(&u, &p),
        (None, None) => {}
        (Some(_), None) => {
            return Err(
                "--basic-auth-user needs a password: --basic-auth-pass or BASIC_AUTH_PASS \
                        (not empty)"
                    .into(),
            );
        }
        (None, Some(_)) => {
            return Err(
                "--basic-auth-pass needs a user: --basic-auth-user or BASIC_AUTH_USER \
                        (not empty)"
                    .into(),
            );
        }
    }
    for file in &token_files {
        let text = fs::read_to_string(file)
            .map_err(|e| format!("--auth-token-file: {}: {e}", file.display()))?;
        auth.add_tokens(file, &text)
            .map_err(|e| format!("--auth-token-file: {e}"))?;
    }
    if auth.anonymous_write && auth.has_credentials() {
        return Err(
            "--allow-anonymous-write opens writes to anyone: it cannot go with \
                    credentials (--basic-auth-*, BASIC_AUTH_*, --auth-token-file)"
                .into(),
        );
    }
    Ok(Args {
        storage: storage.ok_or(format!("--storage is required\n{USAGE}"))?,
        listen,
        backend,
        poll_interval,
        max_upload: max_upload_mb << 20,
        sync_timeout,
        policy: Policy {
            auth,
            rules,
            allow_overwrite,
        },
        cache_dir,
    })
}

/// The watch manager: the OS backend the spec names (`native`,
/// `portable`), else the default one (`Auto` and `Poll` are the spec's
/// business); `poll_interval` paces what the manager polls on its own
/// account (roots `Auto` finds on shared storage).
fn watch_manager(backend: Backend, poll_interval: Duration) -> specwatch::Result<Manager> {
    let builder = Manager::builder().poll_interval(poll_interval);
    match backend {
        Backend::Native | Backend::Portable => builder.backend(backend),
        _ => builder,
    }
    .build()
}

/// The one watch: the whole storage directory, temporary uploads left out,
/// watched as `backend` says, its existing entries reported first.
fn storage_spec(root: &Path, backend: Backend) -> WatchSpec {
    WatchSpec::new([root])
        .ignore(IgnoreRule::new(root, [format!("{UPLOAD_PREFIX}*")]))
        .backend(backend)
        .initial_scan(true)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chart_index: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(args: Args) -> Result<(), String> {
    eprintln!("chart_index: auth: {}", args.policy.auth.describe());
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
                eprintln!(
                    "chart_index: cache: none at {} yet: every package is read",
                    path.display()
                );
                None
            }
            Loaded::Ignored(why) => {
                eprintln!(
                    "chart_index: cache: ignored {}: {why}; every package is read",
                    path.display()
                );
                None
            }
            Loaded::Entries(entries) => Some(entries),
        }
    });

    let manager = watch_manager(args.backend, args.poll_interval).map_err(|e| e.to_string())?;
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
    let mut follower = Follower::new(root.clone(), applied_tx);
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
    follower.reads.verdicts = verdicts;
    for ev in start {
        follower.handle(ev);
    }
    follower.reads.verdicts = None;
    let writer = match cache {
        Some((dir, options)) => Some(
            Writer::spawn(dir, options, Arc::clone(&follower.index))
                .map_err(|e| format!("starting the cache's thread: {e}"))?,
        ),
        None => None,
    };
    follower.started(dropped, writer.as_ref().map(Writer::notify));
    let manager = Arc::new(manager);
    let repo = Arc::new(Repo::new(
        root,
        Arc::clone(&follower.index),
        Arc::clone(&manager),
        applied,
        args.max_upload,
        args.sync_timeout,
        args.policy,
    ));
    // The follower holds the index, not the manager: once the manager is
    // dropped, the events end and so does the thread.
    std::thread::Builder::new()
        .name("follow".into())
        .spawn(move || {
            for ev in &events {
                follower.handle(ev);
            }
        })
        .map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the async runtime: {e}"))?;
    runtime.block_on(async {
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| e.to_string())?;
        let stop = stop_signal().map_err(|e| format!("listening for signals: {e}"))?;
        {
            let mut out = io::stdout().lock();
            writeln!(out, "LISTENING http://{addr}")
                .and_then(|()| out.flush())
                .map_err(|e| e.to_string())?;
        }
        http::serve(listener, api::router(repo), stop).await;
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

/// Applies the watch's events, in order: change batches to the index
/// (then says through `applied` which batch it has applied), statuses to
/// stderr (each root's backend, trouble) when they change.
struct Follower {
    /// The storage directory, canonical.
    root: PathBuf,
    index: Arc<RwLock<Index>>,
    applied: watch::Sender<u64>,
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
    fn new(root: PathBuf, applied: watch::Sender<u64>) -> Follower {
        Follower {
            root,
            index: Arc::new(RwLock::new(Index::new())),
            applied,
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
        let r = &self.reads;
        let indexed: usize = {
            let index = self
                .index
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            index.tenants.values().map(BTreeMap::len).sum()
        };
        eprintln!(
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
    }

    fn handle(&mut self, ev: Event) {
        match ev {
            Event::Changes(batch) if batch.name == SPEC => {
                let changed = apply_batch(&self.index, &self.root, &batch, &mut self.reads);
                self.applied.send_replace(batch.seq.number());
                if changed && let Some(cache) = &self.cache {
                    cache.changed();
                }
            }
            Event::Status(s) if s.name == SPEC => self.status(&s),
            _ => {}
        }
    }

    fn status(&mut self, s: &WatchStatus) {
        if !s.roots.is_empty() && s.roots != self.roots {
            for r in &s.roots {
                eprintln!("chart_index: root: {r}");
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
                Some(t) => eprintln!("chart_index: {t}"),
                None => eprintln!("chart_index: watching again"),
            }
            self.trouble = trouble;
        }
    }
}
