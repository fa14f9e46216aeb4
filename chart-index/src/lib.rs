//! A small Helm chart repository server (like chartmuseum) whose index
//! follows the storage directory through specwatch change batches.
//!
//! ```text
//! chart-index --storage DIR [--listen HOST:PORT | --listen-host HOST --port PORT]
//!     [--config FILE] [--backend auto|native|portable|poll] [--poll-interval MS]
//!     [--max-upload-mb MIB | --max-upload-size BYTES] [--sync-timeout MS]
//!     [--depth N] [--allow-overwrite] [--disable-delete]
//!     [--basic-auth-user USER --basic-auth-pass PASSWORD]
//!     [--auth-token-file FILE] [--auth-rules-file FILE] [--auth-anonymous-get]
//!     [--allow-anonymous-write] [--cache-dir DIR]
//!     [--log-json] [--debug] [--log-health] [--enable-metrics]
//!     [--chart-url URL] [--context-path PATH]
//!     [--tls-cert FILE --tls-key FILE]
//! printf '%s' SECRET | chart-index hash-credential bearer|basic
//! ```
//!
//! Every flag is also read from an environment variable (chartmuseum's
//! names where it has the setting: `STORAGE_LOCAL_ROOTDIR`, `PORT`,
//! `DEPTH`, `BASIC_AUTH_USER`, `ALLOW_OVERWRITE`, `DISABLE_DELETE`,
//! `AUTH_ANONYMOUS_GET`, `LOG_JSON`, `ENABLE_METRICS`, `CHART_URL`,
//! `CONTEXT_PATH`, `TLS_CERT`, ...) and from the YAML file `--config` names
//! (keys are the flags' names): a flag wins over its variable, which wins
//! over the file. `chart-index --help` lists them all; the [`config`]
//! module says how each is read. It listens on `0.0.0.0:8080` unless told
//! otherwise.
//!
//! Prints `LISTENING http://ADDR` on stdout (ADDR is the bound address, so
//! `--listen 127.0.0.1:0` works; `https://` with `--tls-cert`) once the
//! first index is built. Routes (under `--context-path`, if given), for
//! a tenant path of any depth (`org`, `org/team`, or none for `DIR`
//! itself; exactly N segments with `--depth N`, as chartmuseum's
//! `--depth`; without it, a path that could name two routes is read as
//! the `routes` module says):
//!
//! - `GET /health` (liveness: 200 unless the watch has failed or the index
//!   stopped following it) and `GET /ready` (readiness: the storage
//!   answers; 503 with a `"cause"` otherwise): the [`probes`] module says
//!   which state of the watch makes a replica unready, and why. Never need
//!   credentials.
//! - `GET /metrics` (with `--enable-metrics`): Prometheus metrics,
//!   chartmuseum's names and the watch's (the [`metrics`] module). Never
//!   needs credentials.
//! - `GET /<tenant>/index.yaml`: the Helm repository index of the packages
//!   (`*.tgz`) directly in `DIR/<tenant>/`: every field of each Chart.yaml
//!   that `helm repo index` writes, and chartmuseum's `serverInfo`, as
//!   JSON (which Helm reads first; see the `index` module), rendered
//!   once after each change of the tenant and served as rendered until
//!   the next (`generated` is the rendering's time); gzip'd once too, and
//!   served so (`Content-Encoding: gzip`) to a client whose
//!   `Accept-Encoding` takes gzip, as Helm's does (`Vary:
//!   Accept-Encoding` either way). Header `X-Index-Seq`: the `seq` of the
//!   last change batch applied (0 before any).
//! - `GET /<tenant>/charts/<file>.tgz`: a package listed in that index;
//!   `<file>.tgz.prov`: its provenance file, if one was uploaded. Streamed
//!   from the file, never read whole (the `download` module: tower-http's
//!   `ServeDir` over the file the server opened): `Range` (206, 416),
//!   `ETag` and `Last-Modified`, `If-None-Match`, `If-Modified-Since`
//!   (304), `If-Match`, `If-Unmodified-Since` (412), `If-Range`; `HEAD`
//!   from the file's metadata.
//! - `GET /api/<tenant>/charts` (`{name: [version, ...]}`; `?offset=N`,
//!   `?limit=M`: a page of the sorted names), `GET
//!   /api/<tenant>/charts/<name>` (`[version, ...]`, newest first), `GET
//!   /api/<tenant>/charts/<name>/<version>` (one; `latest`: the newest
//!   that is not a pre-release): each version as Helm's ChartVersion JSON,
//!   the entry `index.yaml` lists of it, as chartmuseum answers; 404
//!   `{"error":...}` naming what is missing. `HEAD` of each: 200 or 404.
//!   Rendered once per change of the tenant, as `index.yaml` is (the whole
//!   list gzip'd too, as above).
//! - `POST /api/<tenant>/charts`, a package as the body, or helm-push's
//!   multipart form (`helm cm-push`: the package in field `chart`, its
//!   provenance file in `prov`; either alone will do): stored as
//!   `DIR/<tenant>/<name>-<version>.tgz` (and `.tgz.prov`) (201
//!   `{"saved":true,"indexed":true}`, 409 when it exists, 400 when the body
//!   is not a chart or not one Helm accepts, saying why (a version that
//!   is not SemVer as Helm reads it, say), or the provenance file is for
//!   another version; 413 above `--max-upload-mb`, as soon as that many
//!   bytes have come). Written to a `.upload-*` file (in the tenant's
//!   directory, or the storage root for a new tenant) as it arrives, and
//!   hashed on the way (the `upload` module), never held whole; then
//!   read back from there, fsynced, and hard-linked to its name (which
//!   fails if the name exists, so no upload replaces a package by
//!   accident; renamed where the file system has no hard links). `?force` replaces an
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
//!   land in the directory below the mount), `/ready` answers 503 with the
//!   watch's reason ("storage gone"; `/health` stays 200), and the index
//!   keeps serving what
//!   it had: the watch reports nothing meanwhile, and once the storage is
//!   mounted again it reports the changes made there meanwhile, which the
//!   index applies as any.
//!
//! **Authentication** (the `auth` module). `--basic-auth-user` and
//! `--basic-auth-pass` (or `BASIC_AUTH_USER` and `BASIC_AUTH_PASS` in the
//! environment, which keeps the password off the command line; a flag
//! wins over its variable) set one Basic user; `--auth-token-file FILE`
//! (repeatable) takes Bearer tokens, one per line (`#` comments and blank
//! lines skipped). With either, every route but the probes and
//! `/metrics` needs credentials (401 with `WWW-Authenticate: Basic realm="chart_index"`
//! and/or `Bearer realm="chart_index"`), except reads (GET, HEAD) with
//! `--auth-anonymous-get`. With neither, reads are open and writes are
//! refused (403) unless `--allow-anonymous-write` says otherwise (which
//! cannot go with credentials). Credentials are compared in constant time
//! and never printed. The log says `chart_index: auth: ...` (the schemes
//! and what is open) before `LISTENING`, and `auth: refused METHOD PATH:
//! REASON` for each refusal.
//!
//! **Access rules per tenant** (`--auth-rules-file FILE`, `AUTH_RULES_FILE`;
//! the [`access`] module gives the format, [`rules_file`] the reloads).
//! Lines `PREFIX read|write CREDENTIAL`: a tenant prefix matched by whole
//! path segments (`org` covers `org` and `org/team`, never `orgx`; `/` or
//! `*` every tenant), `write` including `read`, and a credential as its
//! digest: `bearer:sha256:HEX` (a token's), `basic:sha256:HEX` (of
//! `USER:PASSWORD`), or `anonymous` (reads only). `chart-index
//! hash-credential bearer|basic` prints the field for a secret on stdin.
//! The global credentials (`--basic-auth-*`, `--auth-token-file`) stay,
//! and may read and write every tenant (rules of prefix `/`);
//! `--auth-anonymous-get` still opens every read; `--allow-anonymous-write`
//! cannot go with a rules file. A known credential asking for more than
//! its rules give is a 403 (`forbidden: this credential may not write to
//! this tenant`), the same whether the tenant exists or not; an unknown
//! one a 401. The file's directory is watched (a spec of the server's
//! manager): a save, a rename over it or a Kubernetes Secret's `..data`
//! swap puts new rules in force without a restart (`chart_index: auth:
//! rules reloaded from FILE: N rules: ...`); a file that does not parse
//! or cannot be read keeps the rules in force (`chart_index: auth: rules
//! not reloaded: FILE: line N: WHAT; ...`) and leaves `/health` alone.
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
//! timer, no rebuild. Each applied batch logs `index: seq N: K changes`
//! (after `index: + KEY (NAME VERSION)` and `index: - KEY` per package). A
//! package that cannot be read (half written, corrupt) is left out with a
//! line `skip PATH: REASON`, and read again at its next change.
//!
//! `--backend` chooses how the watch learns of changes (the spec's
//! [`WatchSpec::backend`]): `auto` (the default) uses the OS's events,
//! except on a network or FUSE file system (NFS, SMB, sshfs, s3fs, ...:
//! found with `statfs`, where another host's writes make no event here),
//! which it polls every `--poll-interval` milliseconds (default 1000);
//! `poll` polls at that interval whatever the file system; `native` and
//! `portable` name the OS backend (`--poll-interval` then only paces the
//! polling of directories the OS refuses to watch). Before `LISTENING`,
//! one line per root in the log says what it got and why, e.g.
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
//! `scripts/load.sh` (one replica), `scripts/restart-bench.sh` (the time to `LISTENING`
//! cold, warm and after changes, with and without the cache) and
//! `scripts/replicas-load.sh` (two replicas over one
//! storage directory, one through a bindfs mount, while charts are
//! uploaded and deleted) measure it under load (oha; see
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
//! `chart_index: stopped`.
//!
//! **Logs** (the [`logging`] module) go to stderr through `tracing`,
//! specwatch's own events included: human-readable (`TIME LEVEL
//! MESSAGE FIELDS`; the messages quoted here are what follows the level),
//! or JSON with `--log-json`; one access line per request (`served
//! status=... route=... ms=...` with the request's `method`, `path`,
//! `client` and `request_id`: `x-request-id`, kept from the client or
//! made, and sent back); never a credential.
//!
//! **Behind a proxy and on TLS** (the [`proxy`] and [`tls`] modules):
//! `--context-path` serves everything under a path prefix, `--chart-url`
//! makes the index's package URLs absolute (both as chartmuseum's);
//! `--tls-cert` and `--tls-key` serve HTTPS with rustls (ring), the
//! certificate reloaded when its files change.
//!
//! Modules: `http` (connections, limits, bodies, path segments, TLS
//! handshakes), `routes` (which route a path names), `auth`
//! (credentials), `access` (the rules per tenant: format and matching),
//! `rules_file` (the rules file, watched and reloaded), `api` (the
//! routes' handlers), `listing` (the API's JSON
//! of the index), `chart` (reading packages), `provenance` (reading
//! provenance files), `index` (the index and its YAML), `download`
//! (packages streamed from their files), `upload` (uploads streamed to a
//! file), `snapshot` (what requests read: the index's immutable
//! snapshots, rendered and swapped in atomically by the thread that
//! applies batches, so that no request waits on a lock), `cache` (the
//! restart cache), `storage` (path safety, durable writes, file stamps),
//! `probes` (liveness and readiness), `metrics` (Prometheus), `logging`
//! (the log and the access log), `proxy` (`--context-path`,
//! `--chart-url`), `tls` (certificates and their reload).
//!
//! [`RootStatus::unmounted_since`]: specwatch::RootStatus::unmounted_since
//! [`WatchOptions::initial_scan`]: specwatch::WatchOptions::initial_scan
//! [`WatchSpec::backend`]: specwatch::WatchSpec::backend
//! [`Manager::sync`]: specwatch::Manager::sync

#![forbid(unsafe_code)]

pub mod access;
mod api;
pub mod auth;
mod cache;
pub mod chart;
pub mod config;
mod download;
pub mod form;
pub mod http;
mod index;
mod listing;
pub mod logging;
pub mod metrics;
pub mod probes;
pub mod provenance;
pub mod proxy;
pub mod routes;
pub mod rules_file;
mod server;
mod snapshot;
pub mod storage;
pub mod tls;
mod upload;

#[cfg(test)]
mod chart_tests;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod ustar;

pub use server::main;
