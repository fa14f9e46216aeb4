//! Which route a request names: its path's segments (percent-decoded
//! once, see `http::segments`) and its method, matched by hand, because a
//! tenant is any number of segments before a fixed ending, which route
//! patterns cannot express.
//!
//! The shapes, for a tenant `T` of any depth (none: the storage root):
//!
//! | path | methods | route |
//! |---|---|---|
//! | `/health` | GET, HEAD | [`Route::Health`] |
//! | `/ready` | GET, HEAD | [`Route::Ready`] |
//! | `/metrics` | GET, HEAD | [`Route::Metrics`] |
//! | `/T/index.yaml` | GET, HEAD | [`Route::Index`] |
//! | `/T/charts/F` (`F` ends `.tgz` or `.tgz.prov`) | GET, HEAD | [`Route::Package`] |
//! | `/api/T/charts` | GET, HEAD, POST | [`Route::Charts`] |
//! | `/api/T/prov` | POST | [`Route::Prov`] |
//! | `/api/T/charts/N` | GET, HEAD | [`Route::Chart`] |
//! | `/api/T/charts/N/V` | GET, HEAD, DELETE | [`Route::Version`] |
//!
//! **Ambiguity.** A path can fit several shapes when a tenant's directory
//! or a chart is itself named `charts` (or `api`, `prov`, `index.yaml`):
//! `/api/a/charts/charts` is the list of tenant `a/charts`, or chart
//! `charts` of tenant `a`. The shapes are tried in the order of the
//! table, and the first that fits the path *and* allows the method wins:
//! the list of `a/charts` here, as chartmuseum's `--depth-dynamic` reads
//! it (a path ending in `.yaml`, `.tgz` or `.prov` is never an API route,
//! as in chartmuseum). Reaching chart `charts` of tenant `a` then takes
//! `--depth 1`: with `--depth N`, a tenant is exactly `N` segments (as
//! chartmuseum's `--depth`), no path fits two shapes, and tenants at
//! other depths are not served. A method no fitting shape allows is a 405
//! with `Allow`; no shape at all, a 404.

/// A route, with the segments it names (not yet checked as plain names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// Liveness (the `probes` module).
    Health,
    /// Readiness (the `probes` module).
    Ready,
    /// Prometheus metrics (the `metrics` module).
    Metrics,
    /// `GET /T/index.yaml`.
    Index { tenant: Vec<String> },
    /// `GET /T/charts/<file>`: a package or its provenance file.
    Package { tenant: Vec<String>, file: String },
    /// `GET /api/T/charts` (every chart) and `POST` (an upload).
    Charts { tenant: Vec<String> },
    /// `POST /api/T/prov`: a provenance file alone.
    Prov { tenant: Vec<String> },
    /// `GET /api/T/charts/<name>`: the versions of one chart.
    Chart { tenant: Vec<String>, name: String },
    /// `GET /api/T/charts/<name>/<version>`, and `DELETE`.
    Version {
        tenant: Vec<String>,
        name: String,
        version: String,
    },
}

impl Route {
    /// The tenant's segments, for a route of a tenant.
    pub fn tenant(&self) -> Option<&[String]> {
        match self {
            Route::Health | Route::Ready | Route::Metrics => None,
            Route::Index { tenant }
            | Route::Package { tenant, .. }
            | Route::Charts { tenant }
            | Route::Prov { tenant }
            | Route::Chart { tenant, .. }
            | Route::Version { tenant, .. } => Some(tenant),
        }
    }

    /// Whether the route is open to anyone, credentials or not: the
    /// probes (Kubernetes' kubelet sends none) and `/metrics` (served only
    /// with `--enable-metrics`, open as chartmuseum's).
    pub fn is_open(&self) -> bool {
        matches!(self, Route::Health | Route::Ready | Route::Metrics)
    }

    /// The route as a template (chartmuseum's `url` label of its request
    /// metrics): `/api/:repo/charts/:name`, one value per shape whatever
    /// the tenant, chart or version.
    pub fn template(&self) -> &'static str {
        match self {
            Route::Health => "/health",
            Route::Ready => "/ready",
            Route::Metrics => "/metrics",
            Route::Index { .. } => "/:repo/index.yaml",
            Route::Package { .. } => "/:repo/charts/:filename",
            Route::Charts { .. } => "/api/:repo/charts",
            Route::Prov { .. } => "/api/:repo/prov",
            Route::Chart { .. } => "/api/:repo/charts/:name",
            Route::Version { .. } => "/api/:repo/charts/:name/:version",
        }
    }

    /// The methods this route answers.
    fn methods(&self, delete: bool) -> &'static [&'static str] {
        match self {
            Route::Charts { .. } => &["GET", "HEAD", "POST"],
            Route::Prov { .. } => &["POST"],
            Route::Version { .. } if delete => &["GET", "HEAD", "DELETE"],
            _ => &["GET", "HEAD"],
        }
    }
}

/// The template of the route a request took ([`Route::template`], or
/// `unmatched`), in its answer's extensions: for the access log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouteTemplate(pub &'static str);

/// How paths are read: the server's `--depth` and `--disable-delete`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rules {
    /// A tenant is exactly this many segments; `None`: any number.
    pub depth: Option<usize>,
    /// Whether `DELETE` is served (not with `--disable-delete`).
    pub delete: bool,
}

/// Why no route answers.
#[derive(Debug, PartialEq, Eq)]
pub enum Miss {
    /// No shape fits the path (404).
    NotFound,
    /// Shapes fit, but none allows the method (405): what they allow.
    Method { allow: String },
    /// `DELETE` of a chart version on a server started with
    /// `--disable-delete`: 404, as chartmuseum answers.
    DeleteDisabled,
}

/// The shapes `segs` fits, in the order they are tried.
fn shapes(segs: &[String]) -> Vec<Route> {
    let n = segs.len();
    let owned = |s: &[String]| s.to_vec();
    let mut out = Vec::new();
    if n == 1 {
        match segs[0].as_str() {
            "health" => out.push(Route::Health),
            "ready" => out.push(Route::Ready),
            "metrics" => out.push(Route::Metrics),
            _ => {}
        }
    }
    let Some(last) = segs.last() else {
        return out;
    };
    if last == "index.yaml" {
        out.push(Route::Index {
            tenant: owned(&segs[..n - 1]),
        });
    }
    if n >= 2 && segs[n - 2] == "charts" && (last.ends_with(".tgz") || last.ends_with(".tgz.prov"))
    {
        out.push(Route::Package {
            tenant: owned(&segs[..n - 2]),
            file: last.clone(),
        });
    }
    // chartmuseum: a path ending so is never an API route.
    let api = segs[0] == "api"
        && ![".yaml", ".tgz", ".prov"]
            .iter()
            .any(|end| last.ends_with(end));
    if !api {
        return out;
    }
    let rest = &segs[1..];
    let m = rest.len();
    let at = |i: usize, s: &str| m > i && rest[m - 1 - i] == s;
    if at(0, "charts") {
        out.push(Route::Charts {
            tenant: owned(&rest[..m - 1]),
        });
    }
    if at(0, "prov") {
        out.push(Route::Prov {
            tenant: owned(&rest[..m - 1]),
        });
    }
    if at(1, "charts") {
        out.push(Route::Chart {
            tenant: owned(&rest[..m - 2]),
            name: rest[m - 1].clone(),
        });
    }
    if at(2, "charts") {
        out.push(Route::Version {
            tenant: owned(&rest[..m - 3]),
            name: rest[m - 2].clone(),
            version: rest[m - 1].clone(),
        });
    }
    out
}

/// The route `method` and `segs` name under `rules`.
pub fn route(method: &str, segs: &[String], rules: Rules) -> Result<Route, Miss> {
    let fitting: Vec<Route> = shapes(segs)
        .into_iter()
        .filter(|r| match (r.tenant(), rules.depth) {
            (Some(t), Some(depth)) => t.len() == depth,
            _ => true,
        })
        .collect();
    if let Some(r) = fitting
        .iter()
        .find(|r| r.methods(rules.delete).contains(&method))
    {
        return Ok(r.clone());
    }
    if method == "DELETE"
        && !rules.delete
        && fitting.iter().any(|r| matches!(r, Route::Version { .. }))
    {
        return Err(Miss::DeleteDisabled);
    }
    let mut allow: Vec<&str> = Vec::new();
    for m in fitting.iter().flat_map(|r| r.methods(rules.delete)) {
        if !allow.contains(m) {
            allow.push(m);
        }
    }
    if allow.is_empty() {
        Err(Miss::NotFound)
    } else {
        Err(Miss::Method {
            allow: allow.join(", "),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{Miss, Route, Rules, route};

    fn segs(path: &str) -> Vec<String> {
        path.split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }

    fn t(path: &str) -> Vec<String> {
        segs(path)
    }

    const ANY: Rules = Rules {
        depth: None,
        delete: true,
    };

    #[test]
    fn every_shape_at_any_depth() {
        let ok = |m: &str, p: &str| route(m, &segs(p), ANY).unwrap();
        assert_eq!(ok("GET", "/health"), Route::Health);
        assert_eq!(ok("HEAD", "/ready"), Route::Ready);
        assert_eq!(ok("GET", "/metrics"), Route::Metrics);
        assert_eq!(ok("GET", "/metrics").template(), "/metrics");
        assert_eq!(
            ok("DELETE", "/api/a/b/charts/x/1.0.0").template(),
            "/api/:repo/charts/:name/:version"
        );
        assert_eq!(ok("HEAD", "/index.yaml"), Route::Index { tenant: t("") });
        assert_eq!(
            ok("GET", "/org/team/index.yaml"),
            Route::Index {
                tenant: t("org/team")
            }
        );
        assert_eq!(
            ok("GET", "/org/charts/a-1.0.0.tgz.prov"),
            Route::Package {
                tenant: t("org"),
                file: "a-1.0.0.tgz.prov".into()
            }
        );
        assert_eq!(ok("POST", "/api/charts"), Route::Charts { tenant: t("") });
        assert_eq!(
            ok("GET", "/api/a/b/c/charts"),
            Route::Charts { tenant: t("a/b/c") }
        );
        assert_eq!(
            ok("POST", "/api/org/prov"),
            Route::Prov { tenant: t("org") }
        );
        assert_eq!(
            ok("HEAD", "/api/org/team/charts/x"),
            Route::Chart {
                tenant: t("org/team"),
                name: "x".into()
            }
        );
        assert_eq!(
            ok("DELETE", "/api/charts/x/1.0.0"),
            Route::Version {
                tenant: t(""),
                name: "x".into(),
                version: "1.0.0".into()
            }
        );
    }

    #[test]
    fn ambiguity_is_settled_by_order_and_method_or_by_depth() {
        // The list of tenant a/charts, not chart `charts` of tenant a.
        assert_eq!(
            route("GET", &segs("/api/a/charts/charts"), ANY),
            Ok(Route::Charts {
                tenant: t("a/charts")
            })
        );
        // The method decides where only one shape allows it.
        assert_eq!(
            route("POST", &segs("/api/a/charts/prov"), ANY),
            Ok(Route::Prov {
                tenant: t("a/charts")
            })
        );
        assert_eq!(
            route("DELETE", &segs("/api/a/charts/x/charts"), ANY),
            Ok(Route::Version {
                tenant: t("a"),
                name: "x".into(),
                version: "charts".into()
            })
        );
        // A package's path is never an API route.
        assert_eq!(
            route("GET", &segs("/api/org/charts/x-1.0.0.tgz"), ANY),
            Ok(Route::Package {
                tenant: t("api/org"),
                file: "x-1.0.0.tgz".into()
            })
        );
        // With --depth, a tenant is that many segments: no ambiguity.
        let depth1 = Rules {
            depth: Some(1),
            delete: true,
        };
        assert_eq!(
            route("GET", &segs("/api/a/charts/charts"), depth1),
            Ok(Route::Chart {
                tenant: t("a"),
                name: "charts".into()
            })
        );
        assert_eq!(
            route("GET", &segs("/org/team/index.yaml"), depth1),
            Err(Miss::NotFound)
        );
        let depth0 = Rules {
            depth: Some(0),
            delete: true,
        };
        assert_eq!(
            route("GET", &segs("/api/charts/charts"), depth0),
            Ok(Route::Chart {
                tenant: t(""),
                name: "charts".into()
            })
        );
    }

    #[test]
    fn misses_say_what_is_allowed() {
        let miss = |m: &str, p: &str, rules| route(m, &segs(p), rules).unwrap_err();
        assert_eq!(miss("GET", "/", ANY), Miss::NotFound);
        assert_eq!(miss("GET", "/org/nothing", ANY), Miss::NotFound);
        assert_eq!(miss("GET", "/api", ANY), Miss::NotFound);
        assert_eq!(
            miss("PUT", "/api/org/charts", ANY),
            Miss::Method {
                allow: "GET, HEAD, POST".into()
            }
        );
        assert_eq!(
            miss("GET", "/api/org/prov", ANY),
            Miss::Method {
                allow: "POST".into()
            }
        );
        assert_eq!(
            miss("POST", "/health", ANY),
            Miss::Method {
                allow: "GET, HEAD".into()
            }
        );
        let no_delete = Rules {
            depth: None,
            delete: false,
        };
        assert_eq!(
            miss("DELETE", "/api/org/charts/x/1.0.0", no_delete),
            Miss::DeleteDisabled
        );
        assert_eq!(
            miss("PATCH", "/api/org/charts/x/1.0.0", no_delete),
            Miss::Method {
                allow: "GET, HEAD".into()
            }
        );
    }
}
