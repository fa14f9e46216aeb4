//! The chart server's request parsing, without a network: the path's
//! segments (`http::segments`, checked against a strict percent-decoder
//! written here), the route they name (`routes::route`, under every
//! `--depth` and `--disable-delete`), the query's values, the
//! `Authorization` header (`auth::Auth::check`, with Basic and Bearer
//! credentials configured), the body-length and `Expect` headers, and a
//! provenance file's body (`provenance::prov_chart`). Never a panic; a
//! path that is accepted never names a parent or an empty segment, and a
//! route's names are the path's.
#![no_main]

use std::path::Path;
use std::sync::{Arc, OnceLock};

use arbitrary::Arbitrary;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;

use chart_index::{access, auth, http, provenance, routes, rules_file, storage};

#[derive(Arbitrary, Debug)]
struct Request {
    method: Method,
    path: String,
    query: Option<String>,
    headers: Vec<(Header, Vec<u8>)>,
    body: Vec<u8>,
    depth: Option<u8>,
    delete: bool,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Method {
    Get,
    Head,
    Post,
    Delete,
    Put,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Header {
    Authorization,
    ContentLength,
    ContentType,
    Expect,
}

/// A strict percent-decoder (RFC 3986: `%` and two hex digits).
fn strict_decode(raw: &str) -> Option<Vec<u8>> {
    let b = raw.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3)?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

fn credentials() -> &'static [auth::Auth; 4] {
    static AUTH: OnceLock<[auth::Auth; 4]> = OnceLock::new();
    AUTH.get_or_init(|| {
        let mut basic = auth::Auth::default();
        basic.set_basic("user", "pass");
        let mut tokens = auth::Auth::default();
        tokens
            .add_tokens(Path::new("tokens"), "# tokens\n t0k3n \n\nother\n")
            .expect("valid tokens");
        tokens.anonymous_get = true;
        let mut open = auth::Auth::default();
        open.anonymous_write = true;
        [basic, tokens, open, rules()]
    })
}

/// Access rules per tenant beside a global user: `t0k3n` writes `org`,
/// `user:pass` (the global user's) reads `org/team` by rule too,
/// `public` is read by anyone.
fn rules() -> auth::Auth {
    let token = access::credential_field(access::Scheme::Bearer, b"t0k3n");
    let basic = access::credential_field(access::Scheme::Basic, b"user:pass");
    let text = format!("org write {token}\norg/team read {basic}\npublic read anonymous\n");
    let file = rules_file::RulesFile::new("/rules".into(), &text).expect("valid rules");
    let mut a = auth::Auth::default();
    a.set_basic("admin", "pass");
    a.set_rules(Arc::new(file));
    a
}

fuzz_target!(|req: Request| {
    let method = match req.method {
        Method::Get => "GET",
        Method::Head => "HEAD",
        Method::Post => "POST",
        Method::Delete => "DELETE",
        Method::Put => "PUT",
    };
    // The path: accepted segments are what a strict decoder reads, and
    // never a parent, the current directory, empty, or holding a separator.
    let segs = http::segments(&req.path);
    // The route's tenant, for the access checks below.
    let mut tenant = None;
    if let Ok(segs) = &segs {
        let raw: Vec<&str> = req.path[1..].split('/').collect();
        if !req.path[1..].is_empty() {
            assert_eq!(raw.len(), segs.len());
            for (r, s) in raw.iter().zip(segs) {
                let strict = strict_decode(r);
                assert_eq!(
                    strict.as_deref(),
                    Some(s.as_bytes()),
                    "segment {r:?} read as {s:?}"
                );
            }
        }
        for s in segs {
            assert!(!s.is_empty() && s != "." && s != "..", "{s:?}");
            assert!(!s.contains(['/', '\\', '\0']), "{s:?}");
        }
        let rules = routes::Rules {
            depth: req.depth.map(usize::from),
            delete: req.delete,
        };
        if let Ok(route) = routes::route(method, segs, rules) {
            tenant = route.tenant().map(<[String]>::to_vec);
            let names: Vec<&String> = match &route {
                routes::Route::Health => vec![],
                routes::Route::Index { tenant }
                | routes::Route::Charts { tenant }
                | routes::Route::Prov { tenant } => tenant.iter().collect(),
                routes::Route::Package { tenant, file } => tenant.iter().chain([file]).collect(),
                routes::Route::Chart { tenant, name } => tenant.iter().chain([name]).collect(),
                routes::Route::Version {
                    tenant,
                    name,
                    version,
                } => tenant.iter().chain([name, version]).collect(),
            };
            for n in names {
                assert!(segs.contains(n), "{n:?} is one of the path's segments");
            }
            if let (Some(d), Some(t)) = (rules.depth, tenant_len(&route)) {
                assert_eq!(d, t, "--depth {d}: {route:?}");
            }
        }
    }
    for key in ["force", "offset", "limit"] {
        let _ = http::query_value(req.query.as_deref(), key);
    }
    let mut headers = HeaderMap::new();
    for (h, v) in req.headers.iter().take(8) {
        let name = match h {
            Header::Authorization => HeaderName::from_static("authorization"),
            Header::ContentLength => HeaderName::from_static("content-length"),
            Header::ContentType => HeaderName::from_static("content-type"),
            Header::Expect => HeaderName::from_static("expect"),
        };
        if let Ok(v) = HeaderValue::from_bytes(v) {
            headers.append(name, v);
        }
    }
    let _ = http::declared_length(&headers);
    let _ = http::expects_continue(&headers);
    let authorization = headers.get("authorization").map(HeaderValue::as_bytes);
    let tenant = tenant.as_deref();
    for a in credentials() {
        for access in [auth::Access::Read, auth::Access::Write] {
            let _ = a.check(access, tenant, authorization);
        }
    }
    // Access rules: nothing writes without a credential; what may write
    // may read; a refusal of a known credential is a 403, else a 401.
    let ruled = &credentials()[3];
    assert!(ruled.check(auth::Access::Write, tenant, None).is_err());
    let write = ruled.check(auth::Access::Write, tenant, authorization);
    let read = ruled.check(auth::Access::Read, tenant, authorization);
    if write.is_ok() {
        assert_eq!(read, Ok(()), "{tenant:?}: may write, not read");
    }
    for denied in [write, read].into_iter().filter_map(Result::err) {
        assert!(matches!(denied.status, 401 | 403), "{denied:?}");
        assert_eq!(denied.challenges.is_empty(), denied.status == 403);
    }
    if let Ok((name, version)) = provenance::prov_chart(&req.body) {
        assert!(storage::safe_name(&name) && storage::safe_name(&version));
    }
});

fn tenant_len(route: &routes::Route) -> Option<usize> {
    match route {
        routes::Route::Health => None,
        routes::Route::Index { tenant }
        | routes::Route::Charts { tenant }
        | routes::Route::Prov { tenant }
        | routes::Route::Package { tenant, .. }
        | routes::Route::Chart { tenant, .. }
        | routes::Route::Version { tenant, .. } => Some(tenant.len()),
    }
}
