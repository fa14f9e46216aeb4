//! Prometheus metrics: `GET /metrics` on a server started with
//! `--enable-metrics` (`ENABLE_METRICS`; off by default, as in
//! chartmuseum, whose metrics are open to anyone like the probes: they
//! name the tenants). OpenMetrics text, through the Prometheus project's
//! own client (`prometheus-client`).
//!
//! chartmuseum's names, where it has the metric:
//!
//! - `chartmuseum_requests_total{code,method,url}`: requests answered.
//!   `url` is the route's template (`/api/:repo/charts/:name`,
//!   `unmatched` for a path no route takes), as chartmuseum maps it.
//!   chartmuseum's `host` label (the client's `Host` header: a series per
//!   value a client sends) and `handler` (a Go function's name) are left
//!   out; `method` is one of the methods the server knows, else `other`.
//! - `chartmuseum_request_duration_seconds{code,method,url}`: a histogram
//!   of the time from the request's arrival to its answer's head
//!   (chartmuseum's buckets, the Prometheus client's defaults).
//! - `chartmuseum_charts_served_total{repo}` and
//!   `chartmuseum_chart_versions_served_total{repo}`: gauges of the charts
//!   (distinct names) and chart versions (packages) in each tenant's index
//!   (`repo`: the tenant, `""` for the root), read at each scrape.
//!   (chartmuseum's request and response size summaries are not kept:
//!   the client has no summary type, and a histogram of sizes nobody
//!   asked for is not worth its series.)
//!
//! What this design adds (`chart_index_`):
//!
//! - `chart_index_watch_phase{phase}`: 1 for the storage watch's phase
//!   (`starting`, `watching`, `degraded`, `failed`), 0 for the others;
//!   `chart_index_storage_unmounted` (1 while the storage's file system
//!   is unmounted), `chart_index_watch_polled_dirs` (directories polled
//!   for want of OS watches), and the counters
//!   `chart_index_watch_retries_total`,
//!   `chart_index_watch_overflow_recoveries_total`,
//!   `chart_index_watch_missed_by_os_total` (the `WatchStatus`'s, for the
//!   watch's current generation), read at each scrape.
//! - `chart_index_index_seq`: the last change batch the index applied.
//! - `chart_index_batch_apply_seconds`: per batch, from its close (the
//!   `ChangeBatch`'s time) to the index having applied it: the index's
//!   own part of the lag (reading the packages).
//! - `chart_index_change_to_index_seconds`: per package read, from its
//!   last change on the storage (the newest of its file's mtime and
//!   ctime, as the file system stamps them: another host's clock on NFS)
//!   to the index showing it: the whole lag a client sees, polling
//!   included. A package moved into place with its directory keeps its
//!   times, and counts as old. Not observed for the start's batches.
//! - `chart_index_sync_timeouts_total`: uploads and deletes answered
//!   before the index showed them (`"indexed":false`: the read-your-writes
//!   wait gave up, see `--sync-timeout`).
//! - `chart_index_packages_skipped_total`: packages left out of the index
//!   because they could not be read (half written, corrupt, not a chart
//!   Helm accepts).
//! - `chart_index_tls_reloads_total{result}`: reloads of the TLS
//!   certificate (`ok`, `error`: the old one is kept).
//! - `chart_index_build_info{version}`: 1.
//!
//! The duration of the watch's polls is not there: the library does not
//! report it (a `WatchStatus` has no poll timing).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::extract::Request;
use axum::http::{Method, header};
use axum::middleware::{self, Next};
use axum::response::IntoResponse;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use specwatch::{Manager, Phase};
use tokio::sync::watch;

use crate::http::{Reply, error, segments};
use crate::routes::{RouteTemplate, Rules, route};
use crate::server::SPEC;
use crate::snapshot::{Published, Snapshot};

/// The content type of the OpenMetrics text format.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The Prometheus client's default buckets (chartmuseum's, through Go's
/// client), in seconds.
const HTTP_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Buckets of the index's lags, in seconds: from a millisecond to five
/// minutes (a poll interval, a slow NFS server).
const LAG_BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0, 300.0,
];

/// The labels of chartmuseum's request metrics (less `host`, `handler`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    code: u16,
    method: &'static str,
    url: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

fn http_histogram() -> Histogram {
    Histogram::new(HTTP_BUCKETS)
}

/// What is read at each scrape: the index's tenants and the watch's
/// status.
pub struct Sources {
    /// The index's snapshots.
    pub index: Arc<Published>,
    pub manager: Arc<Manager>,
    /// The `seq` of the last batch applied.
    pub applied: watch::Receiver<u64>,
}

impl fmt::Debug for Sources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sources")
    }
}

/// The server's metrics: the registry, and the handles of what is counted
/// as it happens.
pub struct Metrics {
    registry: Registry,
    requests: Family<HttpLabels, Counter>,
    durations: Family<HttpLabels, Histogram, fn() -> Histogram>,
    batch_apply: Histogram,
    change_to_index: Histogram,
    sync_timeouts: Counter,
    skipped: Counter,
    tls_reloads: Family<ResultLabel, Counter>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    /// Metrics that count what happens, and read nothing at a scrape.
    fn default() -> Metrics {
        Metrics::bare()
    }
}

impl Metrics {
    /// The metrics of a server whose index and watch are `sources`.
    pub fn new(sources: Sources) -> Metrics {
        let mut m = Metrics::bare();
        m.registry.register_collector(Box::new(sources));
        m
    }

    fn bare() -> Metrics {
        let mut registry = Registry::default();
        let requests = Family::<HttpLabels, Counter>::default();
        registry.register(
            "chartmuseum_requests",
            "How many HTTP requests processed, partitioned by status code, method and route",
            requests.clone(),
        );
        let durations = Family::<HttpLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            http_histogram,
        );
        registry.register(
            "chartmuseum_request_duration_seconds",
            "The HTTP request latencies in seconds (to the answer's head)",
            durations.clone(),
        );
        let batch_apply = Histogram::new(LAG_BUCKETS);
        registry.register(
            "chart_index_batch_apply_seconds",
            "Per change batch, from its close to the index having applied it",
            batch_apply.clone(),
        );
        let change_to_index = Histogram::new(LAG_BUCKETS);
        registry.register(
            "chart_index_change_to_index_seconds",
            "Per package read, from its last change on the storage (its file's newest time) \
             to the index showing it",
            change_to_index.clone(),
        );
        let sync_timeouts = Counter::default();
        registry.register(
            "chart_index_sync_timeouts",
            "Uploads and deletes answered before the index showed them (read-your-writes \
             wait given up)",
            sync_timeouts.clone(),
        );
        let skipped = Counter::default();
        registry.register(
            "chart_index_packages_skipped",
            "Packages left out of the index because they could not be read",
            skipped.clone(),
        );
        let tls_reloads = Family::<ResultLabel, Counter>::default();
        registry.register(
            "chart_index_tls_reloads",
            "Reloads of the TLS certificate and key, by result",
            tls_reloads.clone(),
        );
        registry.register(
            "chart_index_build",
            "The server's version",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        Metrics {
            registry,
            requests,
            durations,
            batch_apply,
            change_to_index,
            sync_timeouts,
            skipped,
            tls_reloads,
        }
    }

    /// A request answered.
    fn request(&self, method: &Method, code: u16, url: &'static str, took: Duration) {
        let labels = HttpLabels {
            code,
            method: method_label(method),
            url,
        };
        self.requests.get_or_create(&labels).inc();
        self.durations
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// A batch that closed at `closed` is applied now, having read
    /// packages last changed at `changed_at`.
    pub fn batch_applied(&self, closed: SystemTime, changed_at: &[SystemTime]) {
        let now = SystemTime::now();
        let since = |t: SystemTime| now.duration_since(t).unwrap_or_default().as_secs_f64();
        self.batch_apply.observe(since(closed));
        for t in changed_at {
            self.change_to_index.observe(since(*t));
        }
    }

    /// `n` more packages could not be read.
    pub fn skipped(&self, n: u64) {
        if n > 0 {
            self.skipped.inc_by(n);
        }
    }

    /// A write was answered before the index showed it.
    pub fn sync_timeout(&self) {
        self.sync_timeouts.inc();
    }

    /// The TLS certificate was reloaded (or not).
    pub fn tls_reload(&self, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.tls_reloads
            .get_or_create(&ResultLabel { result })
            .inc();
    }

    /// The OpenMetrics text of every metric.
    pub fn text(&self) -> Result<String, fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }

    /// `GET /metrics`.
    pub fn reply(&self) -> Reply {
        match self.text() {
            Ok(text) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
            Err(e) => error(500, &format!("encoding the metrics: {e}")),
        }
    }
}

/// A method as a label: one of those HTTP defines, else `other` (a
/// client may send any token).
fn method_label(m: &Method) -> &'static str {
    match *m {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

/// Each tenant's charts (distinct names) and chart versions (packages).
fn tenant_counts(snapshot: &Snapshot) -> Vec<(String, i64, i64)> {
    snapshot
        .each_tenant()
        .map(|(key, tenant)| {
            (
                key.to_owned(),
                i64::try_from(tenant.listing.names()).unwrap_or(i64::MAX),
                i64::try_from(tenant.charts.len()).unwrap_or(i64::MAX),
            )
        })
        .collect()
}

fn gauge(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: i64,
) -> Result<(), fmt::Error> {
    let g = ConstGauge::new(value);
    g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)
}

fn counter(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), fmt::Error> {
    let c = ConstCounter::new(value);
    c.encode(encoder.encode_descriptor(name, help, None, c.metric_type())?)
}

impl Collector for Sources {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        // Counted from the current snapshot (no lock: see `snapshot`).
        let counts = tenant_counts(&self.index.load());
        for (name, help, pick) in [
            (
                "chartmuseum_charts_served_total",
                "Current number of charts served, per tenant",
                (|c: &(String, i64, i64)| c.1) as fn(&(String, i64, i64)) -> i64,
            ),
            (
                "chartmuseum_chart_versions_served_total",
                "Current number of chart versions served, per tenant",
                |c: &(String, i64, i64)| c.2,
            ),
        ] {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for c in &counts {
                ConstGauge::new(pick(c))
                    .encode(family.encode_family(&[("repo", c.0.as_str())])?)?;
            }
        }
        let status = self.manager.status(SPEC);
        let phase = match status.as_ref().map(|s| &s.phase) {
            Some(Phase::Starting) => "starting",
            Some(Phase::Watching) => "watching",
            Some(Phase::Degraded { .. }) => "degraded",
            Some(Phase::Failed { .. }) => "failed",
            _ => "none",
        };
        let mut family = encoder.encode_descriptor(
            "chart_index_watch_phase",
            "The storage watch's phase: 1 for the current one",
            None,
            MetricType::Gauge,
        )?;
        for p in ["starting", "watching", "degraded", "failed"] {
            ConstGauge::new(i64::from(p == phase))
                .encode(family.encode_family(&[("phase", p)])?)?;
        }
        if let Some(s) = &status {
            let unmounted = s.roots.iter().any(|r| r.unmounted_since.is_some());
            gauge(
                &mut encoder,
                "chart_index_storage_unmounted",
                "1 while the storage's file system is unmounted",
                i64::from(unmounted),
            )?;
            gauge(
                &mut encoder,
                "chart_index_watch_polled_dirs",
                "Directories polled for want of OS watches",
                i64::try_from(s.polled_dirs).unwrap_or(i64::MAX),
            )?;
            counter(
                &mut encoder,
                "chart_index_watch_retries",
                "Failed attempts to watch or read a directory (this watch generation)",
                s.watch_retries,
            )?;
            counter(
                &mut encoder,
                "chart_index_watch_overflow_recoveries",
                "Lost OS events recovered from by rescanning (this watch generation)",
                s.overflow_recoveries,
            )?;
            counter(
                &mut encoder,
                "chart_index_watch_missed_by_os",
                "Changes a rescan found that the OS did not report (this watch generation)",
                s.missed_by_os,
            )?;
        }
        let seq = *self.applied.borrow();
        gauge(
            &mut encoder,
            "chart_index_index_seq",
            "The last change batch the index applied",
            i64::try_from(seq).unwrap_or(i64::MAX),
        )
    }
}

/// Counts each request of `router` (the routes as `rules` read paths),
/// and puts the route's template in the answer's extensions.
pub fn layer(router: Router, metrics: Arc<Metrics>, rules: Rules) -> Router {
    router.layer(middleware::from_fn(move |req: Request, next: Next| {
        let metrics = Arc::clone(&metrics);
        async move {
            let start = Instant::now();
            let method = req.method().clone();
            let url = segments(req.uri().path())
                .ok()
                .and_then(|s| route(method.as_str(), &s, rules).ok())
                .map_or("unmatched", |r| r.template());
            let mut reply = next.run(req).await;
            metrics.request(&method, reply.status().as_u16(), url, start.elapsed());
            reply.extensions_mut().insert(RouteTemplate(url));
            reply
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::method_label;
    use axum::http::Method;

    #[test]
    fn methods_are_a_bounded_label() {
        assert_eq!(method_label(&Method::GET), "GET");
        assert_eq!(method_label(&Method::DELETE), "DELETE");
        assert_eq!(method_label(&Method::from_bytes(b"BREW").unwrap()), "other");
    }
}
