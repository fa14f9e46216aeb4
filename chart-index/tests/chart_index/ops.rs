//! What an operator sees and sets: the access log and its request ids
//! (human-readable and `--log-json`, never a credential), Prometheus
//! `/metrics` (chartmuseum's names and this design's), `--context-path`
//! and `--chart-url` behind a proxy, and TLS with the certificate
//! reloaded when its files change.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use testkit::WAIT;

use crate::charts::{chart, nv, parse_index, sha256};
use crate::client::{Resp, parse_response};
use crate::server::Server;

/// The JSON log lines a server printed on stderr (each line must be one).
fn json_lines(s: &Server) -> Vec<Value> {
    s.raw_output()
        .iter()
        .filter(|l| !l.starts_with("LISTENING "))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect()
}

#[test]
fn access_log_in_json_with_request_ids_and_no_credential() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    let password = "pass-W0rd-not-to-be-seen";
    let s = Server::start_with(
        "json log",
        &storage,
        &["--log-json"],
        &[("BASIC_AUTH_USER", "ci"), ("BASIC_AUTH_PASS", password)],
    );
    let basic = "Authorization: Basic Y2k6cGFzcy1XMHJkLW5vdC10by1iZS1zZWVu";
    // The probes are not logged (no --log-health).
    assert_eq!(s.get("/health").status, 200);
    assert_eq!(s.get("/ready").status, 200);
    // A request id from the client (or a proxy) is kept and sent back.
    let r = s.send(
        "POST",
        "/api/org/charts",
        &[basic, "X-Request-Id: client-id-42"],
        &chart("logged", "1.0.0"),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.header("x-request-id"), Some("client-id-42"));
    // Without one, a UUID is made and sent back.
    let r = s.send("GET", "/org/index.yaml", &[basic], b"");
    assert_eq!(r.status, 200);
    let made = r
        .header("x-request-id")
        .expect("an x-request-id")
        .to_owned();
    assert_eq!(made.len(), 36, "a UUID: {made}");
    // A refusal.
    let r = s.send(
        "GET",
        "/org/index.yaml",
        &["Authorization: Basic d3Jvbmc6d3Jvbmc="],
        b"",
    );
    assert_eq!(r.status, 401);
    let last = s.wait_log("the refusal's access line", |l| {
        l.starts_with("{") && l.contains("\"status\":401")
    });
    let last: Value = serde_json::from_str(&last).unwrap();
    assert_eq!(last["fields"]["message"], "served", "{last}");

    let lines = json_lines(&s);
    let served: Vec<&Value> = lines
        .iter()
        .filter(|l| l["fields"]["message"] == "served")
        .collect();
    let paths: Vec<&str> = served
        .iter()
        .map(|l| l["span"]["path"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        paths,
        ["/api/org/charts", "/org/index.yaml", "/org/index.yaml"],
        "one access line per request, the probes left out: {served:#?}"
    );
    let upload = served[0];
    assert_eq!(upload["level"], "INFO");
    assert_eq!(upload["fields"]["status"], 201);
    assert_eq!(upload["fields"]["route"], "/api/:repo/charts");
    assert!(upload["fields"]["ms"].as_f64().is_some(), "{upload}");
    assert_eq!(upload["span"]["method"], "POST");
    assert_eq!(upload["span"]["request_id"], "client-id-42");
    assert!(
        upload["span"]["client"]
            .as_str()
            .is_some_and(|c| c.starts_with("127.0.0.1:")),
        "{upload}"
    );
    assert_eq!(served[1]["span"]["request_id"], json!(made));
    // The upload's own line carries its request's span.
    let stored = lines
        .iter()
        .find(|l| {
            l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("upload: /org/logged-1.0.0.tgz"))
        })
        .unwrap_or_else(|| panic!("no upload line: {lines:#?}"));
    assert_eq!(stored["span"]["request_id"], "client-id-42", "{stored}");
    // The index's own lines: the stable messages.
    assert!(
        lines.iter().any(|l| l["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("index: + org/logged-1.0.0.tgz (logged 1.0.0)"))),
        "{lines:#?}"
    );
    for line in s.raw_output() {
        for secret in [password, "Y2k6cGFzcy1XMHJk", "d3Jvbmc6d3Jvbmc="] {
            assert!(!line.contains(secret), "{secret:?} printed: {line}");
        }
    }

    // With --log-health, the probes are logged too (human-readable).
    let s = Server::start("log health", &storage, &["--log-health"]);
    assert_eq!(s.get("/ready").status, 200);
    let line = s.wait_log("the probe's access line", |l| l.starts_with("served "));
    assert!(line.contains(" path=/ready "), "{line}");
    assert!(line.contains(" status=200 "), "{line}");
    let raw = s
        .raw_output()
        .into_iter()
        .find(|l| l.contains("served status=200"))
        .unwrap();
    assert!(
        raw.contains("Z  INFO request: served status=200 route=/ready ms="),
        "time, level, span, message: {raw}"
    );
}

/// The value of the sample `series` (`name{labels}`, as the text has it)
/// in a metrics text.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.split(' ').next())
            .and_then(|v| v.parse().ok())
    })
}

fn metrics(s: &Server) -> String {
    let r = s.get("/metrics");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    let text = r.text();
    assert!(text.ends_with("# EOF\n"), "{text}");
    text
}

#[test]
fn metrics_with_chartmuseums_names_and_the_watchs() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().canonicalize().unwrap().join("charts");
    let plain = Server::start("no metrics", &storage, &[]);
    let r = plain.get("/metrics");
    assert_eq!(r.status, 404, "{}", r.text());
    assert!(r.text().contains("--enable-metrics"), "{}", r.text());
    drop(plain);

    let s = Server::start("metrics", &storage, &["--enable-metrics"]);
    // A package that cannot be read: skipped, and counted (by the time
    // the writes below are answered: they wait for later batches).
    std::fs::create_dir_all(storage.join("org")).unwrap();
    let garbage = storage.join("org/garbage.tgz");
    std::fs::write(&garbage, b"not a chart").unwrap();
    s.wait_log("the skip", |l| {
        l.starts_with(&format!("skip {}: ", garbage.display()))
    });
    for (tenant, name, version) in [
        ("org", "a", "1.0.0"),
        ("org", "a", "1.1.0"),
        ("org", "b", "0.1.0"),
        ("", "root", "2.0.0"),
    ] {
        let target = if tenant.is_empty() {
            "/api/charts".to_owned()
        } else {
            format!("/api/{tenant}/charts")
        };
        let r = s.post(&target, &chart(name, version));
        assert_eq!(r.status, 201, "{}", r.text());
    }
    assert_eq!(s.get("/org/index.yaml").status, 200);
    assert_eq!(s.get("/api/org/charts/nope").status, 404);
    assert_eq!(s.get("/no/such/route").status, 404);

    let text = metrics(&s);
    let at =
        |series: &str| sample(&text, series).unwrap_or_else(|| panic!("no {series} in:\n{text}"));
    // chartmuseum's.
    assert_eq!(at("chartmuseum_charts_served_total{repo=\"org\"}"), 2.0);
    assert_eq!(
        at("chartmuseum_chart_versions_served_total{repo=\"org\"}"),
        3.0
    );
    assert_eq!(at("chartmuseum_charts_served_total{repo=\"\"}"), 1.0);
    assert_eq!(
        at("chartmuseum_requests_total{code=\"201\",method=\"POST\",url=\"/api/:repo/charts\"}"),
        4.0
    );
    assert_eq!(
        at("chartmuseum_requests_total{code=\"200\",method=\"GET\",url=\"/:repo/index.yaml\"}"),
        1.0
    );
    assert_eq!(
        at(
            "chartmuseum_requests_total{code=\"404\",method=\"GET\",url=\"/api/:repo/charts/:name\"}"
        ),
        1.0
    );
    assert_eq!(
        at("chartmuseum_requests_total{code=\"404\",method=\"GET\",url=\"unmatched\"}"),
        1.0
    );
    assert_eq!(
        at(
            "chartmuseum_request_duration_seconds_count{code=\"201\",method=\"POST\",url=\"/api/:repo/charts\"}"
        ),
        4.0
    );
    assert_eq!(
        at(
            "chartmuseum_request_duration_seconds_bucket{le=\"+Inf\",code=\"201\",method=\"POST\",url=\"/api/:repo/charts\"}"
        ),
        4.0
    );
    // This design's.
    assert_eq!(at("chart_index_watch_phase{phase=\"watching\"}"), 1.0);
    assert_eq!(at("chart_index_watch_phase{phase=\"degraded\"}"), 0.0);
    assert_eq!(at("chart_index_storage_unmounted"), 0.0);
    assert_eq!(at("chart_index_watch_polled_dirs"), 0.0);
    assert_eq!(at("chart_index_packages_skipped_total"), 1.0);
    assert_eq!(at("chart_index_sync_timeouts_total"), 0.0);
    assert!(at("chart_index_index_seq") >= 4.0, "{text}");
    assert!(at("chart_index_batch_apply_seconds_count") >= 4.0, "{text}");
    assert!(
        at("chart_index_change_to_index_seconds_count") >= 4.0,
        "{text}"
    );
    assert_eq!(at("chart_index_build_info{version=\"0.1.0\"}"), 1.0);
    assert!(
        text.contains("# TYPE chartmuseum_requests counter"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE chartmuseum_charts_served_total gauge"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE chartmuseum_request_duration_seconds histogram"),
        "{text}"
    );

    // A write answered before the index shows it is counted.
    let quick = Server::start(
        "sync 0",
        &storage,
        &["--enable-metrics", "--sync-timeout", "0"],
    );
    let r = quick.post("/api/org/charts", &chart("quick", "1.0.0"));
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["indexed"], json!(false));
    assert_eq!(
        sample(&metrics(&quick), "chart_index_sync_timeouts_total"),
        Some(1.0)
    );
}

#[test]
fn under_a_context_path_with_absolute_chart_urls() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    let s = Server::start(
        "proxy",
        &storage,
        &[
            "--context-path",
            "/charts/",
            "--chart-url",
            "https://charts.example.com/",
        ],
    );
    let pkg = chart("proxied", "1.0.0");
    let r = s.post("/charts/api/org/team/charts", &pkg);
    assert_eq!(r.status, 201, "{}", r.text());
    let r = s.get("/charts/org/team/index.yaml");
    assert_eq!(r.status, 200, "{}", r.text());
    let index: Value = serde_json::from_str(&r.text()).unwrap();
    assert_eq!(index["serverInfo"], json!({ "contextPath": "/charts" }));
    let url = "https://charts.example.com/charts/org/team/charts/proxied-1.0.0.tgz";
    let listing = parse_index(&r.text()).unwrap();
    assert_eq!(listing[&nv("proxied", "1.0.0")].urls, [url]);
    assert_eq!(listing[&nv("proxied", "1.0.0")].digest, sha256(&pkg));
    let r = s.get("/charts/api/org/team/charts/proxied/1.0.0");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["urls"], json!([url]));
    let r = s.get("/charts/org/team/charts/proxied-1.0.0.tgz");
    assert!(r.status == 200 && r.body == pkg, "{}", r.status);
    assert_eq!(s.get("/charts/health").status, 200);
    assert_eq!(s.get("/charts/ready").status, 200);
    // The root tenant, and what is not under the prefix.
    let r = s.get("/charts/index.yaml");
    assert_eq!(r.status, 200, "{}", r.text());
    for outside in [
        "/org/team/index.yaml",
        "/health",
        "/chartsx/health",
        "/api/org/team/charts",
    ] {
        let r = s.get(outside);
        assert_eq!(r.status, 404, "{outside}: {}", r.text());
        assert!(r.text().contains("under /charts/"), "{}", r.text());
    }
    // A query survives the prefix's removal.
    let r = s.get("/charts/api/org/team/charts?offset=0&limit=1");
    assert_eq!(r.status, 200, "{}", r.text());

    // --chart-url alone: URL/TENANT/charts/FILE.
    let s = Server::start(
        "chart url",
        &storage,
        &["--chart-url", "http://cdn.example.com/helm"],
    );
    let (_, l) = s.index("org/team");
    assert_eq!(
        l.unwrap()[&nv("proxied", "1.0.0")].urls,
        ["http://cdn.example.com/helm/org/team/charts/proxied-1.0.0.tgz"]
    );
}

// ---------------------------------------------------------------------------
// TLS

/// A self-signed certificate for `localhost` and 127.0.0.1: (its PEM, its
/// key's PEM, its DER).
fn certificate() -> (String, String, Vec<u8>) {
    let c = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .expect("a certificate");
    (
        c.cert.pem(),
        c.signing_key.serialize_pem(),
        c.cert.der().to_vec(),
    )
}

/// Replaces `path` with `text` at once (beside it, then renamed over).
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A client that trusts `der` alone.
fn client(der: &[u8]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(der.to_vec()))
        .unwrap();
    #[allow(deprecated)] // ring, as the server (see the `tls` module)
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// `GET target` over TLS trusting `der`: the answer and the certificate
/// the server presented; or the handshake's error.
fn https_get(addr: &str, der: &[u8], target: &str) -> Result<(Resp, Vec<u8>), String> {
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(client(der), name).unwrap();
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(WAIT)).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    write!(
        tls,
        "GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    if let Err(e) = tls.read_to_end(&mut raw)
        && raw.is_empty()
    {
        return Err(e.to_string());
    }
    let peer = tls
        .conn
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.to_vec())
        .unwrap_or_default();
    Ok((parse_response(&raw, false)?, peer))
}

/// HTTPS with a certificate made here; replaced on disk, the new one is
/// served without a restart; a broken replacement keeps the one in use.
#[test]
fn tls_end_to_end_and_reloaded_when_the_files_change() {
    let d = tempfile::tempdir().unwrap();
    let base = d.path().canonicalize().unwrap();
    let storage = base.join("charts");
    let tls = base.join("tls");
    std::fs::create_dir(&tls).unwrap();
    let (cert_file, key_file) = (tls.join("tls.crt"), tls.join("tls.key"));
    let (pem1, key1, der1) = certificate();
    std::fs::write(&cert_file, &pem1).unwrap();
    std::fs::write(&key_file, &key1).unwrap();
    let (cert, key) = (
        cert_file.display().to_string(),
        key_file.display().to_string(),
    );
    let s = Server::start_with(
        "tls",
        &storage,
        &["--allow-anonymous-write", "--enable-metrics"],
        &[("TLS_CERT", &cert), ("TLS_KEY", &key)],
    );
    assert_eq!(s.scheme, "https", "LISTENING https://...");
    let (r, peer) = https_get(&s.addr, &der1, "/health").unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(peer, der1, "the certificate made here is served");
    // Plain HTTP gets no answer from a TLS port.
    let mut plain = TcpStream::connect(&s.addr).unwrap();
    plain.set_read_timeout(Some(WAIT)).unwrap();
    plain
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let _ = plain.read_to_end(&mut got);
    assert!(!got.starts_with(b"HTTP/1.1 200"), "{got:?}");

    // A new certificate and key, each file replaced at once (the key
    // first: for a moment the pair does not match, which keeps the old).
    let (pem2, key2, der2) = certificate();
    replace(&key_file, &key2);
    replace(&cert_file, &pem2);
    s.wait_log("the certificate reloaded", |l| {
        l == "chart_index: tls: certificate reloaded"
    });
    let (r, peer) = https_get(&s.addr, &der2, "/ready").unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(peer, der2, "the new certificate is served, no restart");
    let old = https_get(&s.addr, &der1, "/health");
    assert!(
        old.is_err(),
        "a client trusting the old one alone is refused"
    );

    // Other files written beside them (a log, say): nothing reloaded,
    // nothing said (a log there would otherwise feed itself).
    for i in 0..5 {
        std::fs::write(tls.join("beside.log"), format!("line {i}\n")).unwrap();
    }
    // A broken certificate file: the one in use stays. Its line comes
    // after those of the writes above (batches are applied in order).
    replace(&cert_file, "-----BEGIN CERTIFICATE-----\nbroken\n");
    // (A refusal naming the key too would be the moment above when the
    // key was new and the certificate not yet.)
    let line = s.wait_log("the broken certificate's reload refused", |l| {
        l.starts_with("chart_index: tls: certificate not reloaded, the old one stays: ")
            && l.contains(&cert)
            && !l.contains(&key)
    });
    assert!(line.contains(&cert), "{line}");
    let reloads = s
        .output()
        .iter()
        .filter(|l| *l == "chart_index: tls: certificate reloaded")
        .count();
    assert_eq!(
        reloads,
        1,
        "one reload, none for beside.log: {:#?}",
        s.output()
    );
    let (r, peer) = https_get(&s.addr, &der2, "/metrics").unwrap();
    assert_eq!(peer, der2);
    let text = r.text();
    assert!(
        sample(&text, "chart_index_tls_reloads_total{result=\"ok\"}").is_some_and(|n| n >= 1.0),
        "{text}"
    );
    assert!(
        sample(&text, "chart_index_tls_reloads_total{result=\"error\"}").is_some_and(|n| n >= 1.0),
        "{text}"
    );
}

/// `--tls-cert` without `--tls-key`, or files that are no certificate:
/// refused at the start, naming the flag and the file.
#[test]
fn tls_settings_are_checked_at_the_start() {
    let d = tempfile::tempdir().unwrap();
    let (pem, _, _) = certificate();
    let cert = d.path().join("tls.crt");
    std::fs::write(&cert, pem).unwrap();
    let cert = cert.display().to_string();
    let other_key = d.path().join("other.key");
    std::fs::write(&other_key, certificate().1).unwrap();
    let other_key = other_key.display().to_string();
    for (args, says) in [
        (vec!["--tls-cert", &cert], "--tls-cert needs --tls-key"),
        (
            vec!["--tls-cert", &cert, "--tls-key", &cert],
            "no private key",
        ),
        (
            vec!["--tls-cert", &cert, "--tls-key", &other_key],
            "--tls-cert / --tls-key",
        ),
    ] {
        let mut cmd = crate::server::command();
        cmd.arg("--storage")
            .arg(d.path().join("refused"))
            .args(["--listen", "127.0.0.1:0"])
            .args(&args);
        let out = testkit::process::output("chart-index tls", cmd);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?} says {says:?}: {err}");
    }
}

/// Readiness on storage that fails (a FUSE file system whose operations
/// fail on demand): a subdirectory that cannot be read leaves a replica
/// ready (the rest is served); a root that cannot be read makes it
/// unready; neither makes it dead; healed, it is ready again.
#[test]
fn readiness_follows_the_storage_failing_and_healing() {
    let Some(mut fs) = testkit::faultfs::fault_mount() else {
        return;
    };
    std::fs::create_dir_all(fs.src().join("org")).unwrap();
    std::fs::write(fs.src().join("org/kept-1.0.0.tgz"), chart("kept", "1.0.0")).unwrap();
    let mnt = fs.mnt().to_path_buf();
    let s = Server::start("faultfs", &mnt, &["--poll-interval", "50"]);
    let root = s.root_line();
    assert!(root.starts_with("poll every 50ms: fuse"), "{root}");
    let r = s.get("/ready");
    assert_eq!(r.status, 200, "{}", r.text());

    fs.fail(testkit::faultfs::Errno::Eio, "/org");
    let line = s.wait_log("the watch degraded", |l| {
        l.starts_with("chart_index: watch degraded: ") && l.contains("not watched")
    });
    assert!(line.contains("Input/output error"), "{line}");
    let r = s.get("/ready");
    assert_eq!(r.status, 200, "a subdirectory failing: {}", r.text());
    let j = r.json();
    assert_eq!(j["phase"], "degraded", "{j}");
    assert!(j["reason"].as_str().unwrap_or("").contains("/org"), "{j}");
    let (_, l) = s.index("org");
    assert!(
        l.unwrap().contains_key(&nv("kept", "1.0.0")),
        "served as known"
    );

    fs.fail(testkit::faultfs::Errno::Eio, "/");
    let r = s.wait_status("/ready", 503, "the root failing");
    let j = r.json();
    assert_eq!(j["cause"], "storage_failing", "{j}");
    assert!(
        j["why"]
            .as_str()
            .unwrap_or("")
            .contains("Input/output error"),
        "{j}"
    );
    let r = s.get("/health");
    assert_eq!(r.status, 200, "alive all the same: {}", r.text());

    fs.heal();
    let r = s.wait_status("/ready", 200, "the storage healed");
    assert_eq!(r.json()["ready"], true);
}
