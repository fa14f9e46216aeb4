//! The chart repository's routes, for a tenant path of any depth (`org`,
//! `org/team`, or none for the storage root; exactly `--depth N`
//! segments when the server runs with it):
//!
//! - `GET /health` (liveness) and `GET /ready` (readiness): see the
//!   `probes` module; `GET /metrics` (with `--enable-metrics`): see the
//!   `metrics` module; always open;
//! - `GET /<tenant>/index.yaml`: the index (header `X-Index-Seq`);
//! - `GET /<tenant>/charts/<file>.tgz`: a package the index lists, and
//!   `<file>.tgz.prov`, its provenance file, if one was uploaded;
//! - `GET /api/<tenant>/charts` (`?offset=N&limit=M`: a page of the
//!   names), `.../charts/<name>`, `.../charts/<name>/<version>`
//!   (`latest`: the newest that is not a pre-release): chartmuseum's JSON
//!   of the index (see the `listing` module); `HEAD`: 200 or 404, no body;
//! - `POST /api/<tenant>/charts`: stores a package, sent as the body or
//!   as helm-push's multipart form (fields `chart` and `prov`, either or
//!   both) (201, 409, 400, 413); `?force` replaces an existing version on
//!   a server started with `--allow-overwrite` (409 otherwise);
//! - `POST /api/<tenant>/prov`: stores a provenance file alone (its chart
//!   need not exist yet, as in chartmuseum; it is served once its package
//!   is listed);
//! - `DELETE /api/<tenant>/charts/<name>/<version>`: removes it and its
//!   provenance file (200, 404; 404 with `--disable-delete`, as
//!   chartmuseum answers).
//!
//! The router is axum's, with one handler ([`dispatch`]) for every path:
//! a tenant is any number of segments before a fixed ending, which route
//! patterns cannot express, and a `%2F` inside a segment must stay
//! refused rather than become a `/`. So the path is split into segments
//! percent-decoded exactly once ([`segments`]) and matched by the
//! `routes` module (which also says how a path that fits two routes is
//! read). Then the `auth` module says whether the request may go on
//! (401, 403), before any body is read.
//!
//! Uploads and deletes only write to the storage directory: the index
//! learns of them from the watch, like any other writer's. They answer
//! once this replica's index shows the change (read-your-writes, see
//! [`Repo::barrier`]).

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::response::IntoResponse;
use serde_json::json;
use specwatch::{ChangesSince, Manager, Seq};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::auth::{Access, Auth, Denied};
use crate::chart::parse_chart_file;
use crate::download;
use crate::form::{MAX_FORM_OVERHEAD, MAX_PROV_BYTES, is_form, read_form};
use crate::http::{
    Reply, Sink, check_head, drain, error, json, query_value, read_body, segments, stream_body,
    with_header,
};
use crate::listing::page;
use crate::metrics::Metrics;
use crate::probes::Probes;
use crate::provenance::prov_chart;
use crate::routes::{Miss, Route, Rules, route};
use crate::server::SPEC;
use crate::snapshot::{Published, Rendered, Tenant, accepts_gzip};
use crate::storage::{FsError, create_new, fill, rel, resolve_dir, safe_name, sync_dir};
use crate::upload::{Spool, Spooled, temp_name};

/// What the routes share: the storage root, its index, the watch.
pub struct Repo {
    /// The storage directory, canonical.
    pub root: PathBuf,
    /// The index's snapshots, published by the thread that applies the
    /// watch's batches.
    pub index: Arc<Published>,
    /// The watch of `root` (spec [`SPEC`]): its phase for `/health`, its
    /// sync barrier for read-your-writes.
    manager: Arc<Manager>,
    /// The `seq` of the last batch the index has applied (0 before any),
    /// sent by the thread that applies them.
    applied: watch::Receiver<u64>,
    /// The largest package accepted, in bytes.
    max_upload: u64,
    /// How long an upload or delete waits for the index to show it.
    sync_timeout: Duration,
    /// Uploads so far (names temporary files uniquely).
    uploads: AtomicU64,
    /// Who may do what, and how paths are read.
    policy: Policy,
    /// `/health` and `/ready`.
    probes: Probes,
    /// Metrics: see [`Repo::with_ops`].
    ops: Ops,
}

/// What operators configure and watch beside the routes.
#[derive(Default)]
pub struct Ops {
    /// The server's metrics (counted whether served or not).
    pub metrics: Arc<Metrics>,
    /// Whether `/metrics` is served (`--enable-metrics`).
    pub serve_metrics: bool,
}

/// What the server's flags allow.
pub struct Policy {
    pub auth: Auth,
    /// `--depth`, `--disable-delete`.
    pub rules: Rules,
    /// `--allow-overwrite`: `?force` replaces an existing version.
    pub allow_overwrite: bool,
}

impl Repo {
    pub fn new(
        root: PathBuf,
        index: Arc<Published>,
        manager: Arc<Manager>,
        applied: watch::Receiver<u64>,
        max_upload: u64,
        sync_timeout: Duration,
        policy: Policy,
    ) -> Repo {
        Repo {
            probes: Probes::new(root.clone(), Arc::clone(&manager), applied.clone()),
            root,
            index,
            manager,
            applied,
            max_upload,
            sync_timeout,
            uploads: AtomicU64::new(0),
            policy,
            ops: Ops::default(),
        }
    }

    /// The same, with `ops`' metrics.
    pub fn with_ops(mut self, ops: Ops) -> Repo {
        self.ops = ops;
        self
    }

    /// A new temporary file's name (the `upload` module's `temp_name`).
    fn temp_name(&self) -> String {
        temp_name(self.uploads.fetch_add(1, Ordering::Relaxed))
    }

    /// Read-your-writes: waits until the index shows every change made to
    /// the storage directory before the call, and returns the `seq` it has
    /// applied; or says why not within the sync timeout.
    ///
    /// [`Manager::sync`] (a cookie barrier, blocking: run on tokio's
    /// blocking pool) returns once every earlier change has been delivered
    /// to subscribers; the newest batch of the watch is then the journal's
    /// ([`Manager::changes_since`] says through which seq it goes), and the
    /// index shows the change once the thread that applies batches has
    /// applied that one. The index itself still changes only from batches.
    async fn barrier(self: &Arc<Self>) -> Result<u64, String> {
        let timeout = self.sync_timeout;
        if timeout.is_zero() {
            // Answering at once, as asked: whether the index shows the
            // change by now is a race, so it is not claimed.
            return Err("--sync-timeout 0: not waited for".into());
        }
        let deadline = Instant::now() + timeout;
        let repo = Arc::clone(self);
        let synced = tokio::time::timeout_at(
            deadline,
            tokio::task::spawn_blocking(move || repo.manager.sync(SPEC, timeout)),
        )
        .await;
        match synced {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => return Err(format!("sync barrier: {e}")),
            Ok(Err(e)) => return Err(format!("sync barrier: {e}")),
            Err(_) => return Err(format!("sync barrier: not passed within {timeout:?}")),
        }
        let through = match self.manager.changes_since(SPEC, Seq::default()) {
            Ok(ChangesSince::Changes { through, .. } | ChangesSince::Resync { through, .. }) => {
                through.number()
            }
            Ok(_) => return Err("the journal gave no seq".into()),
            Err(e) => return Err(e.to_string()),
        };
        let mut applied = self.applied.clone();
        match tokio::time::timeout_at(deadline, applied.wait_for(|s| *s >= through)).await {
            Ok(Ok(seq)) => Ok(*seq),
            Ok(Err(_)) => Err("the index stopped following the watch".into()),
            Err(_) => Err(format!(
                "the index had not applied batch {through} within {timeout:?}"
            )),
        }
    }

    /// The answer to a write (`fields` and `"indexed"`), once the index
    /// shows it or the barrier gave up (then `"indexed":false` and a
    /// `"warning"` saying why). Header `X-Index-Seq`: the batch the index
    /// had applied when answering.
    async fn answer_write(self: &Arc<Self>, status: u16, mut fields: serde_json::Value) -> Reply {
        let barrier = self.barrier().await;
        fields["indexed"] = json!(barrier.is_ok());
        if let Err(why) = &barrier {
            warn!("chart_index: answering before the index shows the change: {why}");
            self.ops.metrics.sync_timeout();
            fields["warning"] = json!(format!(
                "stored, but this replica's index may not show it yet: {why}"
            ));
        }
        let seq = *self.applied.borrow();
        with_header(json(status, &fields), "X-Index-Seq", &seq.to_string())
    }
}

/// The server's routes over `repo`.
pub fn router(repo: Arc<Repo>) -> Router {
    // The multipart extractor reads at most this much of a form in all.
    let form_limit = repo.max_upload + MAX_PROV_BYTES + MAX_FORM_OVERHEAD;
    Router::new()
        .fallback(dispatch)
        .layer(DefaultBodyLimit::max(
            usize::try_from(form_limit).unwrap_or(usize::MAX),
        ))
        .with_state(repo)
}

impl FsError {
    /// The answer to a request that met this error on `what`.
    fn reply(self, what: &str) -> Reply {
        match self {
            FsError::Missing => error(404, &format!("no such {what}")),
            FsError::Refused(why) => error(400, &why),
            FsError::Io(e) => error(500, &e.to_string()),
        }
    }
}

/// Tenant names from URL segments: each must be a plain name.
fn tenant_of(segs: &[String]) -> Result<Vec<String>, Reply> {
    segs.iter()
        .map(|s| {
            if safe_name(s) {
                Ok(s.clone())
            } else {
                Err(error(400, &format!("{s:?} is not a valid tenant name")))
            }
        })
        .collect()
}

fn strs(names: &[String]) -> Vec<&str> {
    names.iter().map(String::as_str).collect()
}

/// Runs blocking file system work on tokio's blocking pool, in the
/// request's span (its log lines carry the request's id).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Reply> + Send + 'static,
) -> Result<T, Reply> {
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || span.in_scope(f))
        .await
        .unwrap_or_else(|e| Err(error(500, &format!("the request's worker failed: {e}"))))
}

/// Answers every request: its route, then whether it may go on, then the
/// route's handler.
async fn dispatch(State(repo): State<Arc<Repo>>, req: Request) -> Reply {
    if let Some(refused) = check_head(&req) {
        return refused;
    }
    let segs = match segments(req.uri().path()) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let method = req.method().clone();
    let route = match route(method.as_str(), &segs, repo.policy.rules) {
        Ok(r) => r,
        Err(miss) => return refuse(req, missed(miss, &method)),
    };
    if !route.is_open() {
        let access = match method {
            Method::GET | Method::HEAD => Access::Read,
            _ => Access::Write,
        };
        let authorization = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(HeaderValue::as_bytes);
        if let Err(denied) = repo
            .policy
            .auth
            .check(access, route.tenant(), authorization)
        {
            warn!(
                "auth: refused {method} {}: {}",
                req.uri().path(),
                denied.reason
            );
            return refuse(req, unauthorized(denied));
        }
    }
    if !matches!(method, Method::GET | Method::HEAD)
        && !route.is_open()
        && let Some(why) = unmounted(&repo)
    {
        return refuse(req, error(503, &why));
    }
    let query = req.uri().query();
    let force = query_value(query, "force").is_some_and(|v| !matches!(v, "false" | "0"));
    let result = match route {
        Route::Health => Ok(repo.probes.health()),
        Route::Ready => Ok(repo.probes.ready().await),
        Route::Metrics if repo.ops.serve_metrics => Ok(repo.ops.metrics.reply()),
        Route::Metrics => Err(error(
            404,
            "metrics are not served here (start the server with --enable-metrics)",
        )),
        Route::Index { tenant } => get_index(&repo, &tenant, req.headers()),
        Route::Package { tenant, file } => get_package(&repo, &tenant, &file, req).await,
        Route::Charts { tenant } if method == Method::POST => {
            upload(&repo, &tenant, req, force, false).await
        }
        Route::Charts { tenant } => {
            match page(query_value(query, "offset"), query_value(query, "limit")) {
                Ok((0, None)) => all_charts(&repo, &tenant, req.headers()),
                Ok((offset, limit)) => {
                    read_api(&repo, &tenant, |l| Ok(l.listing.all_charts(offset, limit)))
                }
                Err(e) => Err(error(400, &e)),
            }
        }
        Route::Chart { tenant, name } => read_api(&repo, &tenant, |t| t.listing.one_chart(&name)),
        Route::Version {
            tenant,
            name,
            version,
        } if method == Method::DELETE => {
            let r = Arc::clone(&repo);
            match blocking(move || delete(&r, &tenant, &name, &version)).await {
                Ok(fields) => Ok(repo.answer_write(200, fields).await),
                Err(e) => Err(e),
            }
        }
        Route::Version {
            tenant,
            name,
            version,
        } => read_api(&repo, &tenant, |t| t.listing.one_version(&name, &version)),
        Route::Prov { tenant } => upload(&repo, &tenant, req, force, true).await,
    };
    result.unwrap_or_else(|r| r)
}

/// A refusal before the route's handler: a body the client may still be
/// sending is read and dropped (so that it reads the answer).
fn refuse(req: Request, reply: Reply) -> Reply {
    let (parts, body) = req.into_parts();
    drain(body, &parts.headers);
    reply
}

/// The answer to a path no route takes with this method.
fn missed(miss: Miss, method: &Method) -> Reply {
    match miss {
        Miss::NotFound => error(404, "no such route"),
        Miss::Method { allow } => with_header(
            error(405, &format!("{method} is not allowed here")),
            "Allow",
            &allow,
        ),
        Miss::DeleteDisabled => error(
            404,
            "deleting chart versions is disabled on this server (--disable-delete)",
        ),
    }
}

/// 401 (with a `WWW-Authenticate` challenge per scheme) or 403.
fn unauthorized(denied: Denied) -> Reply {
    let what = if denied.status == 401 {
        "unauthorized"
    } else {
        "forbidden"
    };
    let mut reply = error(denied.status, &format!("{what}: {}", denied.reason));
    for challenge in &denied.challenges {
        if let Ok(v) = HeaderValue::from_str(challenge) {
            reply.headers_mut().append(header::WWW_AUTHENTICATE, v);
        }
    }
    reply
}

/// Why a write is refused now: the storage's file system is unmounted
/// (a write would land in the directory below the mount, and be hidden
/// once it is mounted again); the index stays as it was meanwhile.
fn unmounted(repo: &Repo) -> Option<String> {
    let status = repo.manager.status(SPEC)?;
    let root = status.roots.iter().find(|r| r.unmounted_since.is_some())?;
    Some(format!(
        "the storage {} is not mounted: writes are refused until it is back \
         (the index keeps what it had)",
        root.path.display()
    ))
}

/// Tenant `tenant` in the index's current snapshot (404 if there is no
/// such tenant), its key, and the `seq` of that snapshot. Loaded, never
/// locked.
fn tenant_now(repo: &Repo, tenant: &[String]) -> Result<(String, Arc<Tenant>, u64), Reply> {
    let key = tenant_of(tenant)?.join("/");
    let snapshot = repo.index.load();
    let found = snapshot.tenant(&key).cloned();
    let t = found.ok_or_else(|| no_tenant(&key))?;
    Ok((key, t, snapshot.seq))
}

fn no_tenant(key: &str) -> Reply {
    error(404, &format!("no tenant /{key}"))
}

/// An answer carrying `X-Index-Seq`.
fn with_seq(reply: Reply, seq: u64) -> Reply {
    with_header(reply, "X-Index-Seq", &seq.to_string())
}

/// A body rendered once per change of its tenant: gzip'd for a client
/// whose `Accept-Encoding` takes it (`Content-Encoding: gzip`), as it is
/// otherwise; `Vary: Accept-Encoding` either way.
fn rendered(r: &Rendered, content_type: &'static str, headers: &HeaderMap) -> Reply {
    let (body, gzip) = r.body(accepts_gzip(headers));
    let mut reply = (
        [
            (header::CONTENT_TYPE, content_type),
            (header::VARY, "Accept-Encoding"),
        ],
        body,
    )
        .into_response();
    if gzip {
        reply
            .headers_mut()
            .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    reply
}

/// `tenant`'s `index.yaml`, as the snapshot holds it: rendered by the
/// thread that applies batches, once per change of the tenant (its
/// `generated` time is when), not per request. Rendering each request
/// anew cost most of the server's time under load (see the README).
fn get_index(repo: &Repo, tenant: &[String], headers: &HeaderMap) -> Result<Reply, Reply> {
    let (_, t, seq) = tenant_now(repo, tenant)?;
    Ok(with_seq(
        rendered(&t.index, "application/x-yaml", headers),
        seq,
    ))
}

/// `GET /api/<tenant>/charts` without a page: every chart, as rendered.
fn all_charts(repo: &Repo, tenant: &[String], headers: &HeaderMap) -> Result<Reply, Reply> {
    let (_, t, seq) = tenant_now(repo, tenant)?;
    Ok(with_seq(rendered(&t.all, "application/json", headers), seq))
}

/// chartmuseum's JSON of `tenant`'s index (`answer`: the JSON, from the
/// tenant's rendered listing, or why not: a 404).
fn read_api(
    repo: &Repo,
    tenant: &[String],
    answer: impl FnOnce(&Tenant) -> Result<Bytes, String>,
) -> Result<Reply, Reply> {
    let (key, t, seq) = tenant_now(repo, tenant)?;
    let body = answer(&t).map_err(|e| error(404, &format!("{e} in /{key}")))?;
    let reply = ([(header::CONTENT_TYPE, "application/json")], body).into_response();
    Ok(with_seq(reply, seq))
}

/// A package the index lists, or the provenance file beside one,
/// streamed from its file (the `download` module: `Range`, conditional
/// requests, `HEAD` from the file's metadata).
async fn get_package(
    repo: &Repo,
    tenant: &[String],
    file: &str,
    req: Request,
) -> Result<Reply, Reply> {
    let names = tenant_of(tenant)?;
    if !safe_name(file) {
        return Err(error(400, &format!("{file:?} is not a package name")));
    }
    let package = file.strip_suffix(".prov").unwrap_or(file);
    let key = names.join("/");
    let listed = repo
        .index
        .load()
        .tenant(&key)
        .is_some_and(|t| t.charts.contains_key(package));
    if !listed {
        return Err(error(404, &format!("no package {package} in /{key}")));
    }
    let (what, content_type) = if package == file {
        ("package", "application/gzip")
    } else {
        ("provenance file", "application/pgp-signature")
    };
    download::serve(&repo.root, &names, file, content_type, req)
        .await
        .map_err(|e| e.reply(what))
}

/// `POST /api/<tenant>/charts`: a package (raw body), or helm-push's form
/// (a package, its provenance file, or both); with `prov_route`, `POST
/// /api/<tenant>/prov`: a provenance file alone (raw body).
async fn upload(
    repo: &Arc<Repo>,
    tenant: &[String],
    req: Request,
    force: bool,
    prov_route: bool,
) -> Result<Reply, Reply> {
    let names = match tenant_of(tenant) {
        Ok(n) => n,
        Err(r) => return Err(refuse(req, r)),
    };
    // A package goes to a temporary file as it arrives (see the `upload`
    // module); a provenance file (at most `MAX_PROV_BYTES`) is kept.
    let spool = || Spool::new(repo.root.clone(), names.clone(), repo.temp_name());
    let (package, prov) = if prov_route {
        let (parts, body) = req.into_parts();
        let what = "the provenance file";
        let bytes = read_body(body, &parts.headers, what, MAX_PROV_BYTES).await?;
        (None, Some(bytes))
    } else if is_form(req.headers()) {
        read_form(req, repo.max_upload, spool).await?
    } else {
        let (parts, body) = req.into_parts();
        let mut package = spool();
        let max = repo.max_upload;
        if let Err(refused) =
            stream_body(body, &parts.headers, "the package", max, &mut package).await
        {
            package.discard().await;
            return Err(refused);
        }
        (Some(package), None)
    };
    let package = match package {
        Some(spool) => Some(spool.finish().await?),
        None => None,
    };
    let r = Arc::clone(repo);
    let fields = blocking(move || match (package, prov) {
        (Some(package), prov) => store(&r, &names, package, prov.as_deref(), force),
        (None, Some(prov)) => store_prov(&r, &names, &prov, force),
        (None, None) => Err(error(
            400,
            "the multipart form has neither a \"chart\" field (the package, as helm cm-push \
             sends it) nor a \"prov\" field (its provenance file)",
        )),
    })
    .await?;
    Ok(repo.answer_write(201, fields).await)
}

/// The files of `tenant` (a key) that hold `name` `version`: the one an
/// upload makes, and any other the index lists so (one copied in by hand).
fn files_of(repo: &Repo, key: &str, name: &str, version: &str) -> BTreeSet<String> {
    let mut files = BTreeSet::from([format!("{name}-{version}.tgz")]);
    if let Some(t) = repo.index.load().tenant(key) {
        files.extend(
            t.charts
                .iter()
                .filter(|(_, c)| c.meta.name == name && c.meta.version == version)
                .map(|(f, _)| f.clone()),
        );
    }
    files
}

/// Whether an existing `what` may be replaced: with `?force` on a server
/// started with `--allow-overwrite`; else the 409 that says how.
fn may_replace(repo: &Repo, force: bool, what: &str) -> Result<(), Reply> {
    match (force, repo.policy.allow_overwrite) {
        (true, true) => Ok(()),
        (false, _) => Err(error(
            409,
            &format!(
                "{what} already exists (?force replaces it, on a server started with \
                 --allow-overwrite)"
            ),
        )),
        (true, false) => Err(error(
            409,
            &format!(
                "{what} already exists, and this server replaces nothing (start it with \
                 --allow-overwrite to let ?force do so)"
            ),
        )),
    }
}

/// Stores a package (and its provenance file, which must be for the same
/// chart version) as `<tenant>/<name>-<version>.tgz` (`.tgz.prov`); an
/// existing version is replaced only as [`may_replace`] says (then other
/// files the index lists with that version go, and the provenance file
/// is replaced only by a new one). The fields of the 201.
fn store(
    repo: &Repo,
    names: &[String],
    package: Spooled,
    prov: Option<&[u8]>,
    force: bool,
) -> Result<serde_json::Value, Reply> {
    let (chart, _) = parse_chart_file(&package.file).map_err(|e| error(400, &e))?;
    if let Some(prov) = prov {
        let (name, version) = prov_chart(prov).map_err(|e| error(400, &e))?;
        if name != chart.name || version != chart.version {
            return Err(error(
                400,
                &format!(
                    "the provenance file is for {name} {version}, the package is {} {}",
                    chart.name, chart.version
                ),
            ));
        }
    }
    let key = names.join("/");
    let what = format!("{} {} in /{key}", chart.name, chart.version);
    let file = format!("{}-{}.tgz", chart.name, chart.version);
    let mut others = files_of(repo, &key, &chart.name, &chart.version);
    others.remove(&file);
    let exists = !others.is_empty()
        || resolve_dir(&repo.root, &strs(names), false)
            .is_ok_and(|dir| fs::symlink_metadata(dir.join(&file)).is_ok());
    if exists {
        may_replace(repo, force, &format!("a package of {what}"))?;
    }
    let dir = resolve_dir(&repo.root, &strs(names), true).map_err(|e| e.reply("tenant"))?;
    let target = dir.join(&file);
    // The provenance file first: once the package is listed, its
    // provenance file is there too.
    let prov_target = dir.join(format!("{file}.prov"));
    if let Some(prov) = prov {
        match put(repo, &dir, prov, &prov_target, exists) {
            Ok(true) => {}
            Ok(false) => return Err(error(409, &format!("a provenance file of {what} exists"))),
            Err(e) => return Err(error(500, &format!("storing the provenance file: {e}"))),
        }
    }
    let written = package
        .file
        .sync_all()
        .and_then(|()| place(&package.path, &target, exists));

    if !matches!(written, Ok(true)) && prov.is_some() && !exists {
        let _ = fs::remove_file(&prov_target);
    }
    if matches!(written, Ok(true)) {
        for other in &others {
            for f in [other.clone(), format!("{other}.prov")] {
                remove_file_in(&dir, &f)?;
            }
        }
    }
    sync_dir(&dir);
    match written {
        Ok(true) => {
            info!(
                "upload: {} ({} {}, {} bytes, sha256 {}{}{})",
                rel(&repo.root, &target),
                chart.name,
                chart.version,
                package.size,
                package.digest,
                if prov.is_some() { ", with .prov" } else { "" },
                if exists { ", replacing it" } else { "" }
            );
            Ok(json!({ "saved": true }))
        }
        Ok(false) => Err(error(409, &format!("a package of {what} already exists"))),
        Err(e) => Err(error(500, &format!("storing the package: {e}"))),
    }
}

/// Stores a provenance file alone as `<tenant>/<name>-<version>.tgz.prov`
/// (the chart version it names; that chart need not be there, as in
/// chartmuseum); an existing one is replaced only as [`may_replace`]
/// says. The fields of the 201.
fn store_prov(
    repo: &Repo,
    names: &[String],
    prov: &[u8],
    force: bool,
) -> Result<serde_json::Value, Reply> {
    let (name, version) = prov_chart(prov).map_err(|e| error(400, &e))?;
    let what = format!(
        "a provenance file of {name} {version} in /{}",
        names.join("/")
    );
    let dir = resolve_dir(&repo.root, &strs(names), true).map_err(|e| e.reply("tenant"))?;
    let target = dir.join(format!("{name}-{version}.tgz.prov"));
    let exists = fs::symlink_metadata(&target).is_ok();
    if exists {
        may_replace(repo, force, &what)?;
    }
    match put(repo, &dir, prov, &target, exists) {
        Ok(true) => {
            sync_dir(&dir);
            info!(
                "upload: {} (provenance of {name} {version}{})",
                rel(&repo.root, &target),
                if exists { ", replacing it" } else { "" }
            );
            Ok(json!({ "saved": true }))
        }
        Ok(false) => Err(error(409, &format!("{what} already exists"))),
        Err(e) => Err(error(500, &format!("storing the provenance file: {e}"))),
    }
}

/// Writes `bytes` to `target` in `dir`: through a temporary `.upload-*`
/// file, fsynced, then given its name ([`place`]). False when `target`
/// exists and is not to be replaced.
fn put(repo: &Repo, dir: &Path, bytes: &[u8], target: &Path, replace: bool) -> io::Result<bool> {
    let tmp = dir.join(repo.temp_name());
    let out = create_new(&tmp)?;
    let written = fill(out, bytes).and_then(|()| place(&tmp, target, replace));
    let _ = fs::remove_file(&tmp);
    written
}

/// Gives the written (and synced) file `tmp` the name `target`: renamed
/// over it when `replace` says so, else hard-linked to it (the link fails
/// if the name exists: nothing is replaced; renamed where the file system
/// has no hard links). False when `target` exists and is not to be
/// replaced. A hard-linked `tmp` is still there, for the caller to remove.
fn place(tmp: &Path, target: &Path, replace: bool) -> io::Result<bool> {
    if replace {
        return fs::rename(tmp, target).map(|()| true);
    }
    match fs::hard_link(tmp, target) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        // No hard links here (some FUSE file systems): rename.
        Err(_) if fs::symlink_metadata(target).is_ok() => Ok(false),
        Err(_) => fs::rename(tmp, target).map(|()| true),
    }
}

/// Removes the regular file `dir/file` if it is there; true if it was.
fn remove_file_in(dir: &Path, file: &str) -> Result<bool, Reply> {
    let path = dir.join(file);
    match fs::symlink_metadata(&path) {
        Ok(m) if m.is_file() => match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(error(500, &format!("removing {file}: {e}"))),
        },
        _ => Ok(false),
    }
}

/// Removes a chart version, then its provenance file (none is touched
/// when there is no such version); the fields of the 200.
fn delete(
    repo: &Repo,
    tenant: &[String],
    name: &str,
    version: &str,
) -> Result<serde_json::Value, Reply> {
    let names = tenant_of(tenant)?;
    if !safe_name(name) || !safe_name(version) {
        return Err(error(400, "not a valid chart name or version"));
    }
    let dir = resolve_dir(&repo.root, &strs(&names), false).map_err(|e| e.reply("tenant"))?;
    let key = names.join("/");
    let mut removed = Vec::new();
    for file in files_of(repo, &key, name, version) {
        if remove_file_in(&dir, &file)? {
            removed.push(file);
        }
    }
    for file in &removed {
        remove_file_in(&dir, &format!("{file}.prov"))?;
    }
    sync_dir(&dir);
    if removed.is_empty() {
        return Err(error(404, &format!("no {name} {version} in /{key}")));
    }
    info!("delete: /{key} {name} {version}");
    Ok(json!({ "deleted": true }))
}
