//! What an operator sees and sets: the access log and its request ids
//! (human-readable and `--log-json`, never a credential).

use serde_json::{Value, json};

use crate::charts::chart;
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
    // The probe is not logged (no --log-health).
    assert_eq!(s.get("/health").status, 200);
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

    // With --log-health, the probe is logged too (human-readable).
    let s = Server::start("log health", &storage, &["--log-health"]);
    assert_eq!(s.get("/health").status, 200);
    let line = s.wait_log("the probe's access line", |l| l.starts_with("served "));
    assert!(line.contains(" path=/health "), "{line}");
    assert!(line.contains(" status=200 "), "{line}");
    let raw = s
        .raw_output()
        .into_iter()
        .find(|l| l.contains("served status=200"))
        .unwrap();
    assert!(
        raw.contains("Z  INFO request: served status=200 ms="),
        "time, level, span, message: {raw}"
    );
}
