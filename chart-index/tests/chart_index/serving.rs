//! The HTTP stack: keep-alive, bounded heads, helm-push's multipart
//! form, read-your-writes, `/health`, graceful shutdown on SIGTERM,
//! renderings of the index kept and gzip'd.

use std::net::TcpStream;

use serde_json::{Value, json};

use crate::charts::{chart, nv, padded_chart, parse_index, prov, sha256, snapshot};
use crate::client::{Conn, Field, Resp, ask, gunzip, header, request};
use crate::server::Server;

/// The answer's body as JSON.
fn body_json(r: &Resp) -> Value {
    r.json()
}

#[test]
fn health_says_whether_the_watch_is_watching() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().canonicalize().unwrap().join("charts");
    let s = Server::start("health", &storage, &[]);
    let r = s.get("/health");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(body_json(&r), json!({ "healthy": true }));
    let mut c = Conn::open(&s.addr, "health");
    c.send(&request("HEAD", "/health", &[], b""));
    let r = c.answer("HEAD /health", true);
    assert_eq!(r.status, 200);
    c.send(&request("POST", "/health", &[], b"{}"));
    let r = c.answer("POST /health", false);
    assert_eq!(r.status, 405, "{}", r.text());
    assert_eq!(r.header("allow"), Some("GET, HEAD"));

    let r = s.get("/ready");
    assert_eq!(r.status, 200, "{}", r.text());
    let j = body_json(&r);
    assert_eq!(j["ready"], json!(true), "{j}");
    assert!(j["seq"].is_u64(), "{j}");
    assert_eq!(j.get("phase"), None, "watching: no phase said: {j}");

    // The storage directory goes: the watch waits for it (Degraded) and
    // the root cannot be read: not ready, but alive (a restart would not
    // bring it back).
    std::fs::remove_dir_all(&storage).unwrap();
    let r = s.wait_status("/ready", 503, "the storage directory removed");
    let j = body_json(&r);
    assert_eq!(j["ready"], json!(false), "{j}");
    assert_eq!(j["cause"], json!("storage_failing"), "{j}");
    let why = j["why"].as_str().unwrap_or_else(|| panic!("no why: {j}"));
    assert!(
        why.contains(&storage.display().to_string()) && why.contains("No such file"),
        "it names the directory: {why}"
    );
    let r = s.wait_status("/health", 200, "alive while the storage is away");
    let j = body_json(&r);
    assert_eq!(j["healthy"], json!(true), "{j}");
    s.wait_log("the readiness change logged", |l| {
        l.starts_with("not ready (storage_failing): ")
    });
    std::fs::create_dir(&storage).unwrap();
    let r = s.wait_status("/ready", 200, "the storage directory back");
    assert_eq!(body_json(&r)["ready"], json!(true));
    s.wait_until("/health", "watching again", |r| {
        r.status == 200 && body_json(r) == json!({ "healthy": true })
    });
}

#[test]
fn uploads_and_deletes_answer_once_the_index_shows_them() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().canonicalize().unwrap().join("charts");
    let s = Server::start("read-your-writes", &storage, &["--max-upload-mb", "1"]);
    // Each answer comes once the index shows the change: no waiting here.
    for i in 0..5 {
        let version = format!("1.0.{i}");
        let pkg = chart("ryw", &version);
        let r = s.post("/api/org/charts", &pkg);
        assert_eq!(r.status, 201, "upload {version}: {}", r.text());
        assert_eq!(
            body_json(&r),
            json!({ "saved": true, "indexed": true }),
            "upload {version}"
        );
        let (ir, l) = s.index("org");
        let l = l.unwrap_or_else(|e| panic!("{e}: {}", ir.text()));
        assert_eq!(
            l.get(&nv("ryw", &version)).map(|c| c.digest.as_str()),
            Some(sha256(&pkg).as_str()),
            "listed as soon as the upload of {version} answered"
        );
        assert!(ir.seq() >= r.seq(), "X-Index-Seq moves on");
    }
    let r = s.delete("/api/org/charts/ryw/1.0.0");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(body_json(&r), json!({ "deleted": true, "indexed": true }));
    let (_, l) = s.index("org");
    assert!(
        !l.unwrap().contains_key(&nv("ryw", "1.0.0")),
        "gone as soon as the delete answered"
    );

    // helm-push's form: the package in `chart`, its provenance file in
    // `prov`; stored side by side, served, deleted together.
    let pushed = chart("pushed", "0.2.0");
    let prov = prov("pushed", "0.2.0");
    let r = s.post_form(
        "/api/org/team/charts",
        &[
            ("chart", "pushed-0.2.0.tgz", &pushed),
            ("prov", "pushed-0.2.0.tgz.prov", &prov),
        ],
    );
    assert_eq!(r.status, 201, "form upload: {}", r.text());
    assert_eq!(body_json(&r), json!({ "saved": true, "indexed": true }));
    let (_, l) = s.index("org/team");
    assert_eq!(
        l.unwrap()[&nv("pushed", "0.2.0")].digest,
        sha256(&pushed),
        "listed as soon as the form upload answered"
    );
    let team = storage.join("org/team");
    assert_eq!(
        std::fs::read(team.join("pushed-0.2.0.tgz")).unwrap(),
        pushed
    );
    assert_eq!(
        std::fs::read(team.join("pushed-0.2.0.tgz.prov")).unwrap(),
        prov
    );
    let r = s.get("/org/team/charts/pushed-0.2.0.tgz");
    assert!(r.status == 200 && r.body == pushed, "{}", r.status);
    let r = s.get("/org/team/charts/pushed-0.2.0.tgz.prov");
    assert!(
        r.status == 200 && r.body == prov,
        "{} {}",
        r.status,
        r.text()
    );
    // A form with the package alone, and other fields (ignored).
    let alone = chart("alone", "1.0.0");
    let r = s.post_form(
        "/api/org/charts",
        &[("force", "", b"true"), ("chart", "alone-1.0.0.tgz", &alone)],
    );
    assert_eq!(r.status, 201, "form without prov: {}", r.text());
    assert_eq!(
        s.get("/org/charts/alone-1.0.0.tgz.prov").status,
        404,
        "no provenance file uploaded"
    );
    let r = s.post_form("/api/org/team/charts", &[("chart", "p.tgz", &pushed)]);
    assert_eq!(r.status, 409, "the same version again: {}", r.text());

    // Forms refused, saying why; nothing stored.
    let before = snapshot(&storage);
    let big = padded_chart("big", "1.0.0", 1 << 20);
    let big_prov = vec![b'x'; (1 << 20) + 1];
    let small = chart("small", "1.0.0");
    let not_prov = b"-----BEGIN PGP SIGNED MESSAGE-----\nname: x\n".to_vec();
    let other_prov = crate::charts::prov("small", "9.9.9");
    let cases: [(&str, &[Field<'_>], u16, &str); 8] = [
        (
            "no chart nor prov field",
            &[("other", "p.prov", &prov)],
            400,
            "\"chart\"",
        ),
        (
            "a prov field alone that is no provenance file",
            &[("prov", "p.prov", &not_prov)],
            400,
            "provenance",
        ),
        (
            "a provenance file for another version",
            &[
                ("chart", "small.tgz", &small),
                ("prov", "p.prov", &other_prov),
            ],
            400,
            "small 9.9.9",
        ),
        ("not a chart", &[("chart", "x.tgz", b"hello")], 400, "gzip"),
        (
            "two prov fields",
            &[("prov", "a.prov", &prov), ("prov", "b.prov", &prov)],
            400,
            "two",
        ),
        (
            "two chart fields",
            &[("chart", "a.tgz", &small), ("chart", "b.tgz", &small)],
            400,
            "two",
        ),
        (
            "package too large",
            &[("chart", "big.tgz", &big)],
            413,
            "package",
        ),
        (
            "provenance too large",
            &[
                ("chart", "small.tgz", &small),
                ("prov", "p.prov", &big_prov),
            ],
            413,
            "provenance",
        ),
    ];
    for (what, fields, status, says) in cases {
        let r = s.post_form("/api/fresh/charts", fields);
        assert_eq!(r.status, status, "{what}: {}", r.text());
        let error = body_json(&r)["error"].as_str().unwrap_or("").to_owned();
        assert!(error.contains(says), "{what} says {says:?}: {error}");
    }
    assert_eq!(snapshot(&storage), before, "nothing stored");

    let r = s.delete("/api/org/team/charts/pushed/0.2.0");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(!team.join("pushed-0.2.0.tgz").exists());
    assert!(
        !team.join("pushed-0.2.0.tgz.prov").exists(),
        "the provenance file goes with its package"
    );
    assert_eq!(s.get("/org/team/charts/pushed-0.2.0.tgz.prov").status, 404);
}

/// `--sync-timeout 0`: writes answer at once, and say that the index may
/// not show them yet.
#[test]
fn a_write_that_outruns_the_index_says_so() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().canonicalize().unwrap().join("charts");
    let s = Server::start("no-wait", &storage, &["--sync-timeout", "0"]);
    let r = s.post("/api/org/charts", &chart("quick", "1.0.0"));
    assert_eq!(r.status, 201, "{}", r.text());
    let j = body_json(&r);
    assert_eq!(j["saved"], json!(true), "{j}");
    assert_eq!(j["indexed"], json!(false), "{j}");
    assert!(
        j["warning"]
            .as_str()
            .is_some_and(|w| w.contains("may not show it yet")),
        "{j}"
    );
    s.wait_index("org", "quick 1.0.0, in its own time", |l| {
        l.contains_key(&nv("quick", "1.0.0"))
    });
}

#[test]
fn one_connection_serves_request_after_request() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().canonicalize().unwrap().join("charts");
    let s = Server::start("keep-alive", &storage, &[]);
    let pkg = chart("ka", "1.0.0");
    let mut c = Conn::open(&s.addr, "keep-alive");
    c.send(&request("POST", "/api/org/charts", &[], &pkg));
    let r = c.answer("the upload", false);
    assert_eq!(r.status, 201, "{}", r.text());
    c.send(&request("GET", "/org/index.yaml", &[], b""));
    let r = c.answer("the index", false);
    assert!(
        r.status == 200 && r.text().contains("ka-1.0.0.tgz"),
        "{}",
        r.text()
    );
    c.send(&request("HEAD", "/org/charts/ka-1.0.0.tgz", &[], b""));
    let r = c.answer("HEAD of the package", true);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-length"),
        Some(pkg.len().to_string().as_str())
    );
    c.send(&request("GET", "/org/charts/ka-1.0.0.tgz", &[], b""));
    let r = c.answer("the package", false);
    assert!(r.status == 200 && r.body == pkg, "{}", r.status);
    // Pipelined: two requests at once, answered in order.
    let mut two = request("GET", "/health", &[], b"");
    two.extend(request("GET", "/nope/index.yaml", &[], b""));
    c.send(&two);
    assert_eq!(c.answer("the first of two", false).status, 200);
    assert_eq!(c.answer("the second of two", false).status, 404);
    // A refused request keeps the connection.
    c.send(&request("GET", "/%2e%2e/outside/index.yaml", &[], b""));
    assert_eq!(c.answer("a refused path", false).status, 400);
    // `Connection: close` is honoured.
    c.send(&request("GET", "/health", &["Connection: close"], b""));
    assert_eq!(c.answer("the last request", false).status, 200);
    assert!(c.wait_closed().is_empty(), "closed after the answer");
}

/// At most 64 KiB of request line and headers, and at most 100 headers:
/// past either the answer is 431 and the connection closes (hyper's
/// answer, or the server's own for a head that hyper read whole in fewer
/// reads than filled its 64 KiB buffer).
#[test]
fn heads_past_the_limits_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().canonicalize().unwrap().join("charts");
    let s = Server::start("heads", &storage, &[]);
    let within = format!("X-Big: {}", "a".repeat(32 << 10));
    let ninety: Vec<String> = (0..90).map(|i| format!("X-H{i}: v")).collect();
    let ninety: Vec<&str> = ninety.iter().map(String::as_str).collect();
    for (what, headers) in [
        ("a 32 KiB header", vec![within.as_str()]),
        ("90 headers", ninety),
    ] {
        let mut c = Conn::open(&s.addr, what);
        c.send(&request("GET", "/health", &headers, b""));
        assert_eq!(c.answer(what, false).status, 200, "{what}");
    }
    let past = format!("X-Big: {}", "a".repeat(100 << 10));
    let far_past = format!("X-Big: {}", "a".repeat(300 << 10));
    let split: Vec<String> = (0..3)
        .map(|i| format!("X-Part{i}: {}", "b".repeat(22 << 10)))
        .collect();
    let split: Vec<&str> = split.iter().map(String::as_str).collect();
    let many: Vec<String> = (0..101).map(|i| format!("X-H{i}: v")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let long_target = format!("/{}/index.yaml", "t".repeat(100 << 10));
    // A request line past the buffer is hyper's 414 (URI Too Long) when it
    // has read the line whole, its 431 when the buffer filled first.
    for (what, target, headers, status) in [
        (
            "a 100 KiB header",
            "/health",
            vec![past.as_str()],
            &[431][..],
        ),
        (
            "a 300 KiB header",
            "/health",
            vec![far_past.as_str()],
            &[431],
        ),
        ("66 KiB in three headers", "/health", split, &[431]),
        ("101 headers", "/health", many, &[431]),
        (
            "a 100 KiB request line",
            long_target.as_str(),
            vec![],
            &[414, 431],
        ),
    ] {
        let mut c = Conn::open(&s.addr, what);
        c.send(&request("GET", target, &headers, b""));
        let r = c.answer(what, false);
        assert!(
            status.contains(&r.status),
            "{what}: {} {}",
            r.status,
            r.text()
        );
        c.wait_closed();
    }
    // The server is still there.
    assert_eq!(s.get("/health").status, 200);
}

/// SIGTERM: the listener closes, idle connections are closed, a request
/// in flight (an upload whose body is half sent) is still answered, then
/// the process exits 0.
#[test]
fn sigterm_lets_requests_in_flight_finish() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().canonicalize().unwrap().join("charts");
    let mut s = Server::start("graceful", &storage, &[]);
    let mut idle = Conn::open(&s.addr, "idle connection");
    idle.send(&request("GET", "/health", &[], b""));
    assert_eq!(idle.answer("GET /health", false).status, 200);

    // In flight: the head sent; the server asks for the body (100
    // Continue), and gets half of it.
    let pkg = chart("inflight", "1.0.0");
    let mut busy = Conn::open(&s.addr, "request in flight");
    busy.send(
        format!(
            "POST /api/org/charts HTTP/1.1\r\nHost: chart-index.test\r\n\
             Content-Length: {}\r\nExpect: 100-continue\r\n\r\n",
            pkg.len()
        )
        .as_bytes(),
    );
    let r = busy.answer("100 Continue", false);
    assert_eq!(r.status, 100, "{}", r.text());
    busy.send(&pkg[..pkg.len() / 2]);

    s.ask_stop();
    let line = s.wait_log("saying it stops", |l| {
        l.starts_with("chart_index: stopping (SIGTERM)")
    });
    assert!(line.ends_with(": 2 connections open"), "{line}");
    assert!(
        TcpStream::connect(&s.addr).is_err(),
        "a new connection is refused once stopping"
    );
    assert!(
        idle.wait_closed().is_empty(),
        "the idle connection is closed"
    );

    busy.send(&pkg[pkg.len() / 2..]);
    let r = busy.answer("the upload's answer", false);
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(body_json(&r), json!({ "saved": true, "indexed": true }));
    assert!(busy.wait_closed().is_empty(), "closed after its answer");
    s.wait_log("saying it stopped", |l| l == "chart_index: stopped");
    let status = s.wait_exit();
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert_eq!(
        std::fs::read(storage.join("org/inflight-1.0.0.tgz")).unwrap(),
        pkg
    );
}

/// `index.yaml` is rendered once per change of its tenant and served
/// again until a batch changes that tenant: the same bytes (its
/// `generated` time too) while nothing changes there, whatever changes
/// elsewhere; a new rendering after an upload, a delete, or the tenant's
/// directory removed and made again.
#[test]
fn index_yaml_is_rendered_again_only_when_its_tenant_changes() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().canonicalize().unwrap().join("charts");
    for t in ["a", "b"] {
        std::fs::create_dir_all(storage.join(t)).unwrap();
        std::fs::write(storage.join(t).join("x-1.0.0.tgz"), chart("x", "1.0.0")).unwrap();
    }
    let s = Server::start("rendered", &storage, &[]);
    let body = |tenant: &str| {
        let (r, l) = s.index(tenant);
        let l = l.unwrap_or_else(|e| panic!("{tenant}: {e}: {}", r.text()));
        (r.body, l)
    };
    let (a1, l) = body("a");
    let fetched = std::time::SystemTime::now();
    assert!(l.contains_key(&nv("x", "1.0.0")));
    // RFC 3339 with nanoseconds: a rendering once the clock has moved past
    // the first one's answer would differ (waited on, not slept for).
    while std::time::SystemTime::now() <= fetched {
        std::hint::spin_loop();
    }
    assert!(body("a").0 == a1, "nothing changed: the same bytes");

    let r = s.post("/api/b/charts", &chart("y", "1.0.0"));
    assert_eq!(r.status, 201, "{}", r.text());
    let (_, lb) = body("b");
    assert!(
        lb.contains_key(&nv("y", "1.0.0")),
        "b's index shows b's upload"
    );
    assert!(
        body("a").0 == a1,
        "a change in b leaves a's index as it was"
    );

    let r = s.post("/api/a/charts", &chart("y", "1.0.0"));
    assert_eq!(r.status, 201, "{}", r.text());
    let (a2, l) = body("a");
    assert!(a2 != a1);
    assert!(
        l.contains_key(&nv("y", "1.0.0")),
        "a's index shows a's upload"
    );
    assert!(body("a").0 == a2, "then kept again");

    let r = s.delete("/api/a/charts/x/1.0.0");
    assert_eq!(r.status, 200, "{}", r.text());
    let (a3, l) = body("a");
    assert!(
        !l.contains_key(&nv("x", "1.0.0")),
        "a's index shows the delete"
    );
    assert!(a3 != a2);

    // The tenant's directory goes and comes back with other packages
    // (written directly): its old rendering is not served again.
    std::fs::remove_dir_all(storage.join("a")).unwrap();
    s.wait_status("/a/index.yaml", 404, "tenant a removed");
    std::fs::create_dir_all(storage.join("a")).unwrap();
    std::fs::write(storage.join("a/z-1.0.0.tgz"), chart("z", "1.0.0")).unwrap();
    let l = s.wait_index("a", "tenant a made again with z", |l| {
        l.contains_key(&nv("z", "1.0.0"))
    });
    assert_eq!(l.len(), 1, "only z: {l:?}");
}

/// `index.yaml` and the API's list of charts are gzip'd once, when
/// rendered, and served so to a client that accepts gzip (Helm does):
/// the same rendering (the same snapshot), smaller.
#[test]
fn index_and_listing_are_gzipped_for_clients_that_accept_it() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    let s = Server::start("gzip", &storage, &[]);
    for (name, version) in [("a", "1.0.0"), ("a", "1.1.0"), ("b", "0.1.0")] {
        let r = s.post("/api/org/charts", &chart(name, version));
        assert_eq!(r.status, 201, "{}", r.text());
    }

    for (target, content_type) in [
        ("/org/index.yaml", "application/x-yaml"),
        ("/api/org/charts", "application/json"),
    ] {
        let plain = ask(&s, "GET", target, &[]);
        assert_eq!(plain.status, 200);
        assert_eq!(plain.header("Content-Encoding"), None, "{target}");
        assert_eq!(header(&plain, "Vary"), "Accept-Encoding", "{target}");
        let gz = ask(&s, "GET", target, &["Accept-Encoding: gzip"]);
        assert_eq!(gz.status, 200);
        assert_eq!(header(&gz, "Content-Encoding"), "gzip", "{target}");
        assert_eq!(header(&gz, "Vary"), "Accept-Encoding");
        assert_eq!(header(&gz, "Content-Type"), content_type);
        assert_eq!(gz.seq(), plain.seq(), "{target}: one snapshot");
        assert!(gz.body.len() < plain.body.len(), "{target}: smaller");
        assert!(
            gunzip(&gz.body) == plain.body,
            "{target}: the same rendering, gzip'd"
        );
        // As Helm (Go's net/http) asks, and as curl --compressed does.
        for accept in ["gzip, deflate", "deflate, gzip;q=0.5, br"] {
            let r = ask(&s, "GET", target, &[&format!("Accept-Encoding: {accept}")]);
            assert_eq!(header(&r, "Content-Encoding"), "gzip", "{accept}");
        }
        for refused in ["gzip;q=0", "identity", "br"] {
            let r = ask(&s, "GET", target, &[&format!("Accept-Encoding: {refused}")]);
            assert!(r.header("Content-Encoding").is_none(), "{refused}");
            assert!(r.body == plain.body, "{refused}");
        }
        let head = ask(&s, "HEAD", target, &["Accept-Encoding: gzip"]);
        assert_eq!(head.status, 200);
        assert_eq!(header(&head, "Content-Encoding"), "gzip");
        assert_eq!(header(&head, "Content-Length"), gz.body.len().to_string());
    }
    let l = parse_index(
        &String::from_utf8(gunzip(
            &ask(&s, "GET", "/org/index.yaml", &["Accept-Encoding: gzip"]).body,
        ))
        .unwrap(),
    )
    .unwrap();
    assert!(l.contains_key(&nv("a", "1.1.0")) && l.contains_key(&nv("b", "0.1.0")));

    // A page, one chart, one version: small, not compressed.
    for target in [
        "/api/org/charts?offset=1",
        "/api/org/charts/a",
        "/api/org/charts/a/1.0.0",
    ] {
        let r = ask(&s, "GET", target, &["Accept-Encoding: gzip"]);
        assert_eq!(r.status, 200, "{target}: {}", r.text());
        assert!(r.header("Content-Encoding").is_none(), "{target}");
        let _: Value = r.json();
    }
    // Misses are the same JSON errors as ever.
    let r = ask(&s, "GET", "/nope/index.yaml", &["Accept-Encoding: gzip"]);
    assert_eq!(r.status, 404);
    assert!(r.text().contains("no tenant /nope"), "{}", r.text());
}
