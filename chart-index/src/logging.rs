//! The server's log: `tracing` events (the server's own and specwatch's,
//! whose `tracing` feature is on: specs applied, backends chosen,
//! recoveries; each batch at debug) written on stderr by
//! `tracing-subscriber`, one line each, never while a lock is held.
//!
//! - **Human-readable** by default (tracing-subscriber's compact format,
//!   without colours or targets): `TIME LEVEL [SPAN: ]MESSAGE FIELDS
//!   SPAN-FIELDS`, e.g.
//!   `2026-12-07T10:00:00.123456Z  INFO index: seq 3: 1 changes`. The
//!   messages are the server's stable lines (`chart_index: start: ...`,
//!   `index: + KEY (NAME VERSION)`, `skip PATH: REASON`, ...), which
//!   scripts may read after the level.
//! - **JSON** with `--log-json` (`LOG_JSON`, chartmuseum's): one object
//!   per line, `timestamp`, `level`, `target`, the event's fields
//!   (`message` first) and its request's span (`span`: `method`, `path`,
//!   `client`, `request_id`).
//! - Level `info`; `--debug` (`DEBUG`, chartmuseum's) adds `debug`
//!   (specwatch's batches with their first paths, say).
//!
//! **The access log** ([`access_log`]): one line per request, when its
//! answer's head is sent: `served` with `status`, `route` (the route's
//! template), `ms`, inside the span `request` (`method`, `path` without
//! the query, `client`, `request_id`); every line logged while the
//! request is handled (an upload's, a refusal's) carries the same span.
//! The request id is the `x-request-id` the client or a proxy sent (at
//! most 128 characters are logged), else a new UUID; the answer carries
//! it back in `x-request-id`. The probes (`/health`, `/ready`) are left
//! out unless `--log-health` (`LOG_HEALTH`, chartmuseum's) says.
//!
//! **Never a credential**: no header is logged but `x-request-id`;
//! `Authorization`, `Proxy-Authorization` and `Cookie` are marked
//! sensitive as well, for any layer that would render headers; refusals
//! say why in words that quote nothing the client sent (the `auth`
//! module); the query string (where a misconfigured client might put
//! one) is not logged.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::http::header::{AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION};
use axum::response::Response;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer;
use tower_http::trace::TraceLayer;
use tracing::{Level, Span, info, info_span};

use crate::routes::RouteTemplate;

/// How the log is written: `--log-json`, `--debug`, `--log-health`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogSettings {
    pub json: bool,
    pub debug: bool,
    /// Access-log lines for the probes too.
    pub health: bool,
}

/// The longest request id logged, in characters.
const MAX_REQUEST_ID: usize = 128;

/// Sets the process's subscriber: on stderr, human-readable or JSON.
pub fn init(s: LogSettings) -> Result<(), String> {
    let level = if s.debug { Level::DEBUG } else { Level::INFO };
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(level);
    let set = if s.json {
        builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .try_init()
    } else {
        builder.compact().with_target(false).try_init()
    };
    set.map_err(|e| format!("setting up the log: {e}"))
}

/// The span of a request, and its access line's: see the module's docs.
fn request_span(req: &Request, probes: &[String; 2], log_probes: bool) -> Span {
    let path = req.uri().path();
    if !log_probes && probes.iter().any(|p| p == path) {
        return Span::none();
    }
    let id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.chars().take(MAX_REQUEST_ID).collect::<String>())
        .unwrap_or_default();
    let client = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.to_string())
        .unwrap_or_default();
    info_span!(
        "request",
        method = %req.method(),
        path = %path,
        client = %client,
        request_id = %id,
    )
}

/// The access line of a request's answer.
fn served(res: &Response, latency: Duration, span: &Span) {
    if span.is_none() {
        return;
    }
    let ms = latency.as_micros() as f64 / 1000.0;
    let route = res.extensions().get::<RouteTemplate>().map_or("", |r| r.0);
    info!(status = res.status().as_u16(), route = %route, ms, "served");
}

/// Adds the access log and request ids to `router` (whose probes are at
/// `context/health` and `context/ready`).
pub fn access_log(router: Router, s: LogSettings, context: &str) -> Router {
    let probes = [format!("{context}/health"), format!("{context}/ready")];
    let log_probes = s.health;
    router
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(move |req: &Request<Body>| request_span(req, &probes, log_probes))
                .on_request(())
                .on_response(served)
                .on_body_chunk(())
                .on_eos(())
                .on_failure(()),
        )
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .layer(SetSensitiveRequestHeadersLayer::new([
            AUTHORIZATION,
            PROXY_AUTHORIZATION,
            COOKIE,
        ]))
}
