//! The chart repository example's own unit tests (path segments, routes,
//! credentials, chart parsing, listings, provenance files), run by
//! `cargo test`: its modules, compiled here under the names they have in
//! the example, so that their `crate::` paths resolve.
//!
//! Not `test = true` on the example: cargo then builds it only as a test
//! harness, and `tests/chart_index/` needs the example's binary, which a
//! fresh `cargo test` must build too.
#![allow(
    dead_code,
    reason = "the server's main.rs and api.rs are not compiled here, so much of these modules is unused"
)]

#[path = "../examples/chart_index/auth.rs"]
mod auth;
#[path = "../examples/chart_index/cache.rs"]
mod cache;
#[path = "../examples/chart_index/chart.rs"]
mod chart;
#[path = "../examples/chart_index/form.rs"]
mod form;
#[path = "../examples/chart_index/http.rs"]
mod http;
#[path = "../examples/chart_index/index.rs"]
mod index;
#[path = "../examples/chart_index/listing.rs"]
mod listing;
#[path = "../examples/chart_index/provenance.rs"]
mod provenance;
#[path = "../examples/chart_index/routes.rs"]
mod routes;
#[path = "../examples/chart_index/storage.rs"]
mod storage;

#[path = "chart_index_units/archives.rs"]
mod archives;
#[path = "chart_index_units/ustar.rs"]
mod ustar;
