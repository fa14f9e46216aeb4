//! Authentication: Basic credentials (the password from the environment)
//! and Bearer tokens from a file guard every route but `/health`; right,
//! wrong, missing and malformed `Authorization` headers; anonymous reads
//! on and off; writes closed when no credentials are configured unless
//! `--allow-anonymous-write`; refused flag combinations. No credential
//! ever shows in what the server prints.

use std::path::Path;

use base64::Engine as _;
use serde_json::json;

use crate::charts::{chart, snapshot};
use crate::client::Resp;
use testkit::process;

use crate::server;
use crate::server::Server;

const USER: &str = "ci-user-Q7";
const PASSWORD: &str = "pw-Secret-789";
const TOKENS: [&str; 2] = ["tok-Alpha-123", "tok-Beta-456"];

pub(crate) fn basic(user_pass: &str) -> String {
    format!(
        "Authorization: Basic {}",
        base64::engine::general_purpose::STANDARD.encode(user_pass)
    )
}

fn token_file(dir: &Path) -> String {
    let file = dir.join("tokens");
    std::fs::write(
        &file,
        format!("# CI tokens\n{}\n\n  {}  \n", TOKENS[0], TOKENS[1]),
    )
    .unwrap();
    file.to_str().unwrap().to_owned()
}

/// A 401 with both challenges, saying `says`.
fn unauthorized(r: &Resp, what: &str, says: &str) {
    assert_eq!(r.status, 401, "{what}: {}", r.text());
    assert_eq!(
        r.headers_named("WWW-Authenticate"),
        [
            "Basic realm=\"chart_index\"",
            "Bearer realm=\"chart_index\""
        ],
        "{what}"
    );
    let error = r.json()["error"].as_str().unwrap_or("").to_owned();
    assert!(error.contains(says), "{what}: {error:?} says {says:?}");
}

#[test]
fn basic_and_bearer_credentials_guard_every_route_but_health() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    let tokens = token_file(d.path());
    let s = Server::start_with(
        "auth",
        &storage,
        &["--basic-auth-user", USER, "--auth-token-file", &tokens],
        &[("BASIC_AUTH_PASS", PASSWORD)],
    );
    let right_basic = basic(&format!("{USER}:{PASSWORD}"));
    let right_bearer = format!("Authorization: Bearer {}", TOKENS[1]);
    assert_eq!(s.get("/health").status, 200, "/health stays open");

    // Missing, wrong and malformed credentials: 401 on reads and writes,
    // nothing stored.
    let pkg = chart("guarded", "1.0.0");
    let before = snapshot(&storage);
    let wrong_user = basic(&format!("other:{PASSWORD}"));
    let wrong_password = basic(&format!("{USER}:{PASSWORD}x"));
    let real_password_bare = format!("Authorization: {PASSWORD}");
    let real_token_as_basic = format!("Authorization: Basic {}", TOKENS[0]);
    let cases: [(&[&str], &str); 11] = [
        (&[], "credentials required"),
        (&[&wrong_user], "wrong user or password"),
        (&[&wrong_password], "wrong user or password"),
        (&["Authorization: Basic %%%not-base64%%%"], "not base64"),
        (&[&basic(&format!("{USER}{PASSWORD}"))], "no ':'"),
        (&[&real_token_as_basic], "not base64"),
        (&["Authorization: Bearer tok-Gamma-000"], "unknown token"),
        (&["Authorization: Bearer "], "empty Bearer token"),
        (&["Authorization: Token tok-Alpha-123"], "unknown scheme"),
        (&[&real_password_bare], "unknown scheme"),
        (&["Authorization: bearer"], "empty Bearer token"),
    ];
    for (headers, says) in cases {
        for (method, target, body) in [
            ("GET", "/index.yaml", &b""[..]),
            ("HEAD", "/api/charts", b""),
            ("GET", "/charts/guarded-1.0.0.tgz", b""),
            ("POST", "/api/org/charts", &pkg),
            ("DELETE", "/api/org/charts/guarded/1.0.0", b""),
        ] {
            let r = s.send(method, target, headers, body);
            let what = format!("{method} {target} with {headers:?}");
            if method == "HEAD" {
                assert_eq!(r.status, 401, "{what}");
            } else {
                unauthorized(&r, &what, says);
            }
        }
    }
    assert_eq!(snapshot(&storage), before, "nothing stored");

    // Right credentials, either scheme, scheme names in any case.
    let r = s.send("POST", "/api/org/charts", &[&right_basic], &pkg);
    assert_eq!(r.status, 201, "{}", r.text());
    let r = s.send("GET", "/org/index.yaml", &[&right_bearer], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    let r = s.send(
        "GET",
        "/api/org/charts/guarded",
        &[&format!("Authorization: BEARER {}", TOKENS[0])],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let r = s.send("GET", "/org/charts/guarded-1.0.0.tgz", &[&right_basic], b"");
    assert!(r.status == 200 && r.body == pkg, "{}", r.status);
    let r = s.send(
        "DELETE",
        "/api/org/charts/guarded/1.0.0",
        &[&right_bearer],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["deleted"], json!(true));

    // Nothing the server printed holds a credential, nor the base64 of one.
    let encoded = right_basic
        .trim_start_matches("Authorization: Basic ")
        .to_owned();
    let secrets = [USER, PASSWORD, TOKENS[0], TOKENS[1], &encoded];
    // Each line is printed before its answer is sent: once the delete's
    // line is read, so are those of every request before it.
    s.wait_log("the delete's line", |l| {
        l.starts_with("delete: /org guarded 1.0.0 ")
    });
    let out = s.output();
    assert!(
        out.iter()
            .any(|l| l.starts_with("auth: refused POST /api/org/charts: ")),
        "refusals are logged: {out:#?}"
    );
    assert!(
        out.iter()
            .any(|l| l == "chart_index: auth: Basic, Bearer (2 tokens); writes need credentials, reads need them"),
        "the auth line: {out:#?}"
    );
    // Every request has its access line, with its request id.
    let served = out.iter().filter(|l| l.starts_with("served ")).count();
    assert!(served >= 20, "{served} access lines: {out:#?}");
    assert!(
        out.iter()
            .filter(|l| l.starts_with("served "))
            .all(|l| l.contains(" request_id=") && l.contains(" status=")),
        "{out:#?}"
    );
    for line in &s.raw_output() {
        for secret in secrets {
            assert!(!line.contains(secret), "{secret:?} printed: {line:?}");
        }
        let lower = line.to_ascii_lowercase();
        assert!(
            !lower.contains("authorization:") && !lower.contains("authorization="),
            "a header printed: {line:?}"
        );
    }
}

#[test]
fn anonymous_get_opens_reads_and_only_reads() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    let tokens = token_file(d.path());
    let s = Server::start_with(
        "anonymous get",
        &storage,
        &["--auth-token-file", &tokens, "--auth-anonymous-get"],
        &[],
    );
    let pkg = chart("open", "1.0.0");
    let r = s.post("/api/charts", &pkg);
    assert_eq!(r.status, 401, "{}", r.text());
    assert_eq!(
        r.headers_named("WWW-Authenticate"),
        ["Bearer realm=\"chart_index\""]
    );
    assert_eq!(s.delete("/api/charts/open/1.0.0").status, 401);
    let auth = format!("Authorization: Bearer {}", TOKENS[0]);
    let r = s.send("POST", "/api/charts", &[&auth], &pkg);
    assert_eq!(r.status, 201, "{}", r.text());
    for target in [
        "/index.yaml",
        "/charts/open-1.0.0.tgz",
        "/api/charts/open/latest",
    ] {
        let r = s.get(target);
        assert_eq!(r.status, 200, "GET {target} anonymously: {}", r.text());
    }
    assert_eq!(s.send("HEAD", "/api/charts/open", &[], b"").status, 200);
    // Basic credentials are not what this server takes.
    let r = s.send("POST", "/api/charts", &[&basic("a:b")], &pkg);
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(r.text().contains("no Basic"), "{}", r.text());
}

#[test]
fn writes_are_closed_without_credentials_unless_asked() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    let s = Server::start_with("closed", &storage, &[], &[]);
    let before = snapshot(&storage);
    for (method, target, body) in [
        ("POST", "/api/org/charts", chart("w", "1.0.0")),
        ("POST", "/api/org/prov", crate::charts::prov("w", "1.0.0")),
        ("DELETE", "/api/org/charts/w/1.0.0", Vec::new()),
    ] {
        let r = s.send(method, target, &[], &body);
        assert_eq!(r.status, 403, "{method} {target}: {}", r.text());
        assert!(
            r.text().contains("--allow-anonymous-write"),
            "{method} {target} says how to open writes: {}",
            r.text()
        );
        assert!(r.headers_named("WWW-Authenticate").is_empty());
    }
    assert_eq!(snapshot(&storage), before, "nothing stored");
    assert_eq!(s.get("/index.yaml").status, 200, "reads are open");
    assert_eq!(s.get("/api/charts").status, 200, "reads are open");

    // Flags that cannot go together, or credentials half given: exit 2,
    // saying why, quoting no secret.
    let tokens = token_file(d.path());
    let missing = d.path().join("no-such-file");
    let empty = d.path().join("empty");
    std::fs::write(&empty, "# nothing\n").unwrap();
    /// Arguments, environment, and what the refusal says.
    type Refused<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Refused<'_>; 6] = [
        (
            &["--auth-token-file", &tokens, "--allow-anonymous-write"],
            &[],
            "--allow-anonymous-write",
        ),
        (&["--basic-auth-user", USER], &[], "needs a password"),
        (&["--basic-auth-pass", PASSWORD], &[], "needs a user"),
        (&[], &[("BASIC_AUTH_PASS", PASSWORD)], "needs a user"),
        (
            &["--auth-token-file", missing.to_str().unwrap()],
            &[],
            "no-such-file",
        ),
        (
            &["--auth-token-file", empty.to_str().unwrap()],
            &[],
            "holds no token",
        ),
    ];
    for (args, env, says) in cases {
        refused_to_start(d.path(), args, env, says, PASSWORD);
    }
}

/// Starts the server with `args` and `env` (and a storage directory in
/// `dir`), and checks that it exits 2 saying `says`, without `secret`.
pub(crate) fn refused_to_start(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    says: &str,
    secret: &str,
) {
    let mut cmd = server::command();
    cmd.arg("--storage")
        .arg(dir.join("refused"))
        .args(["--listen", "256.0.0.1:1"])
        .args(args)
        .envs(env.iter().copied());
    let out = process::output("chart_index", cmd);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {err}");
    assert!(err.contains(says), "{args:?} {env:?} says {says:?}: {err}");
    assert!(!err.contains(secret), "{args:?}: a secret printed: {err}");
}
