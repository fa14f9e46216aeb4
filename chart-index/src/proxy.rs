//! Behind a reverse proxy: `--context-path` (everything served under a
//! path prefix) and `--chart-url` (absolute URLs in the index's entries),
//! as chartmuseum's flags of those names.
//!
//! - **`--context-path /charts`**: every route, the probes and `/metrics`
//!   included, is served under `/charts` (`/charts/org/index.yaml`,
//!   `/charts/api/org/charts`, `/charts/health`); any other path is a
//!   404. The prefix is compared with the request's path as sent, at a
//!   segment boundary (`/chartsx/...` is not under `/charts`), and taken
//!   off before the routes see the path ([`strip_context`]). The index
//!   says it in chartmuseum's `serverInfo.contextPath`.
//! - **`--chart-url https://charts.example.com`**: each entry's `urls` is
//!   `CHART-URL[CONTEXT-PATH][/TENANT]/charts/FILE`, as chartmuseum writes
//!   it; without it, `charts/FILE`, relative to the index's own URL (which
//!   Helm resolves against the URL it fetched the index from, so a
//!   relative URL works behind a proxy that keeps the path).

use axum::Router;
use axum::extract::Request;
use axum::http::Uri;
use axum::http::uri::PathAndQuery;
use axum::middleware::{self, Next};
use axum::response::Response;

use crate::http::error;
use crate::storage::safe_name;

/// How the index's links are written: `--chart-url` and
/// `--context-path`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Links {
    /// `--chart-url`, without a trailing `/`.
    pub chart_url: Option<String>,
    /// `--context-path`, `/` and segments, without a trailing `/`.
    pub context_path: Option<String>,
}

impl Links {
    /// What the URL of a package of tenant `key` (`""`: the root) starts
    /// with, before `charts/FILE`: empty (relative to the index) without
    /// `--chart-url`.
    pub fn base(&self, key: &str) -> String {
        let Some(url) = &self.chart_url else {
            return String::new();
        };
        let context = self.context_path.as_deref().unwrap_or("");
        if key.is_empty() {
            format!("{url}{context}/")
        } else {
            format!("{url}{context}/{key}/")
        }
    }
}

/// `--chart-url`'s value, checked: an absolute `http` or `https` URL
/// with a host, no query or fragment; its trailing `/` dropped.
pub fn chart_url(value: &str) -> Result<String, String> {
    let trimmed = value.trim_end_matches('/');
    let uri: Uri = trimmed
        .parse()
        .map_err(|e| format!("{value:?} is not a URL: {e}"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.authority().is_none() {
        return Err(format!(
            "{value:?} is not an absolute http:// or https:// URL with a host"
        ));
    }
    if uri.query().is_some() || trimmed.contains('#') {
        return Err(format!("{value:?} has a query or a fragment"));
    }
    Ok(trimmed.to_owned())
}

/// `--context-path`'s value, checked: `/` then plain names (letters,
/// digits, `.`, `_`, `-`, `+`) separated by `/`; a trailing `/` dropped;
/// `None` for `/` alone.
pub fn context_path(value: &str) -> Result<Option<String>, String> {
    let Some(rest) = value.strip_prefix('/') else {
        return Err(format!("{value:?} does not start with /"));
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() {
        return Ok(None);
    }
    if let Some(bad) = rest.split('/').find(|s| !safe_name(s)) {
        return Err(format!(
            "{value:?}: {bad:?} is not a plain name (letters, digits, `.`, `_`, `-`, `+`; \
             not starting with `.`)"
        ));
    }
    Ok(Some(format!("/{rest}")))
}

/// The path under `context` (`/charts`) that `path` names (`/charts` is
/// `/`, `/charts/x` is `/x`), or `None` when it is not under it.
fn under<'a>(context: &str, path: &'a str) -> Option<&'a str> {
    match path.strip_prefix(context)? {
        "" => Some("/"),
        rest if rest.starts_with('/') => Some(rest),
        _ => None,
    }
}

/// Serves `router` under `context` (`/charts`): a request whose path is
/// under it reaches the router with the prefix taken off; any other is a
/// 404 that says where the server is.
pub fn strip_context(router: Router, context: String) -> Router {
    router.layer(middleware::from_fn(move |mut req: Request, next: Next| {
        let context = context.clone();
        async move {
            let uri = req.uri();
            let Some(path) = under(&context, uri.path()) else {
                return not_under(&context);
            };
            let pq = match uri.query() {
                Some(q) => format!("{path}?{q}"),
                None => path.to_owned(),
            };
            let mut parts = uri.clone().into_parts();
            parts.path_and_query = PathAndQuery::try_from(pq).ok();
            match Uri::from_parts(parts) {
                Ok(stripped) => *req.uri_mut() = stripped,
                Err(_) => return not_under(&context),
            }
            next.run(req).await
        }
    }))
}

fn not_under(context: &str) -> Response {
    error(
        404,
        &format!("no such route: this server serves everything under {context}/"),
    )
}

#[cfg(test)]
mod tests {
    use super::{Links, chart_url, context_path, under};

    #[test]
    fn paths_under_the_context_at_a_segment_boundary() {
        assert_eq!(under("/charts", "/charts"), Some("/"));
        assert_eq!(under("/charts", "/charts/"), Some("/"));
        assert_eq!(
            under("/charts", "/charts/org/index.yaml"),
            Some("/org/index.yaml")
        );
        assert_eq!(under("/a/b", "/a/b/health"), Some("/health"));
        assert_eq!(under("/charts", "/chartsx/index.yaml"), None);
        assert_eq!(under("/charts", "/health"), None);
        assert_eq!(under("/charts", "/"), None);
    }

    #[test]
    fn flag_values_are_checked() {
        assert_eq!(context_path("/charts/"), Ok(Some("/charts".into())));
        assert_eq!(context_path("/a/b"), Ok(Some("/a/b".into())));
        assert_eq!(context_path("/"), Ok(None));
        for bad in ["charts", "/a//b", "/../x", "/a/.hidden", "/a%2fb", "/a?b"] {
            assert!(context_path(bad).is_err(), "{bad}");
        }
        assert_eq!(
            chart_url("https://charts.example.com/"),
            Ok("https://charts.example.com".into())
        );
        assert_eq!(
            chart_url("http://10.0.0.1:8080/base"),
            Ok("http://10.0.0.1:8080/base".into())
        );
        for bad in [
            "charts.example.com",
            "/charts",
            "ftp://x/",
            "https://x/?a=1",
            "https://x/#f",
            "https://",
        ] {
            assert!(chart_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn package_urls_as_chartmuseum_writes_them() {
        let relative = Links::default();
        assert_eq!(relative.base("org"), "");
        let both = Links {
            chart_url: Some("https://c.example".into()),
            context_path: Some("/charts".into()),
        };
        assert_eq!(both.base("org/team"), "https://c.example/charts/org/team/");
        assert_eq!(both.base(""), "https://c.example/charts/");
        let url_only = Links {
            chart_url: Some("https://c.example".into()),
            context_path: None,
        };
        assert_eq!(url_only.base("org"), "https://c.example/org/");
    }
}
