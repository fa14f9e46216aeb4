//! Access rules per tenant (`--auth-rules-file`): credentials scoped to
//! tenant prefixes by whole path segments, read or write; 403 for a known
//! credential outside its rights (existing tenant or not), 401 for an
//! unknown one; the global credentials beside the rules; the file reloaded
//! when it is replaced (a rename, a Kubernetes Secret's `..data` swap), a
//! broken file keeping the rules in force; `hash-credential`'s digests
//! taken by the server. No secret ever shows in what the server prints.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::auth::{basic, refused_to_start};
use crate::charts::{chart, snapshot};
use crate::client::Resp;
use crate::server::{self, Server};

/// `chart-index hash-credential SCHEME` with `input` on stdin.
fn hash_credential(scheme: &str, input: &str) -> Output {
    let mut child = server::command()
        .args(["hash-credential", scheme])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// The server's digest field of a secret, as `chart-index
/// hash-credential SCHEME` prints it for the secret on stdin.
fn hashed(scheme: &str, secret: &str) -> String {
    // As `echo` gives it: with a newline, which is not part of the secret.
    let out = hash_credential(scheme, &format!("{secret}\n"));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "hash-credential {scheme}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let field = stdout.trim_end().to_owned();
    assert!(
        field.starts_with(&format!("{scheme}:sha256:")) && field.len() == scheme.len() + 8 + 64,
        "{field:?}"
    );
    assert!(!field.contains(secret));
    field
}

fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}")
}

/// Writes `text` to `file` as an editor's atomic save does: a temporary
/// file beside it, renamed over it.
fn replace(file: &Path, text: &str) {
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, file).unwrap();
}

/// A rules file `rules` in a directory of its own under `dir`.
fn rules_file(dir: &Path, text: &str) -> PathBuf {
    let rules_dir = dir.join("rules.d");
    std::fs::create_dir_all(&rules_dir).unwrap();
    let file = rules_dir.join("rules");
    std::fs::write(&file, text).unwrap();
    file
}

/// Each (method, target, status) as `who` with the header line `header`
/// (none if empty); the body of a POST is a chart never sent before.
fn expect(s: &Server, who: &str, header: &str, cases: &[(&str, &str, u16)]) -> Vec<Resp> {
    static CHARTS: AtomicUsize = AtomicUsize::new(0);
    cases
        .iter()
        .map(|(method, target, status)| {
            let body = if *method == "POST" {
                chart(
                    &format!("c{}", CHARTS.fetch_add(1, Ordering::Relaxed)),
                    "1.0.0",
                )
            } else {
                Vec::new()
            };
            let headers: &[&str] = if header.is_empty() { &[] } else { &[header] };
            let r = s.send(method, target, headers, &body);
            assert_eq!(
                r.status,
                *status,
                "{method} {target} as {who}: {}",
                r.text()
            );
            r
        })
        .collect()
}

const TOK_ORG: &str = "tok-Org-writer-1";
const TOK_TEAM: &str = "tok-Team-reader-2";
const TOK_MIRROR: &str = "tok-Mirror-3";
const BOB: &str = "bob:pw-Bob-4";

#[test]
fn rules_scope_each_credential_to_its_tenants_by_path_segments() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    for tenant in ["org", "org/team", "orgx", "other", "public"] {
        let dir = storage.join(tenant);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("seed-1.0.0.tgz"), chart("seed", "1.0.0")).unwrap();
    }
    let text = format!(
        "# tenants and who may do what\n\
         org        write  {}\n\
         org/team   read   {}   # the team's CI reads\n\
         other      write  {}\n\
         /          read   {}\n\
         public     read   anonymous\n",
        hashed("bearer", TOK_ORG),
        hashed("bearer", TOK_TEAM),
        hashed("basic", BOB),
        hashed("bearer", TOK_MIRROR),
    );
    let rules = rules_file(d.path(), &text);
    let s = Server::start_with(
        "rules",
        &storage,
        &["--auth-rules-file", rules.to_str().unwrap()],
        &[],
    );
    assert_eq!(s.get("/health").status, 200, "/health stays open");

    // A write credential: its prefix and below, reads included; never a
    // tenant whose name merely starts the same (`orgx`), nor the root's.
    // Outside its rights a tenant is a 403 whether it exists or not:
    // the answer says nothing of which tenants exist.
    let org = bearer(TOK_ORG);
    let before_orgx = snapshot(&storage.join("orgx"));
    expect(
        &s,
        "org writer",
        &org,
        &[
            ("POST", "/api/org/charts", 201),
            ("POST", "/api/org/team/charts", 201),
            ("POST", "/api/org/new/deep/charts", 201),
            ("GET", "/org/index.yaml", 200),
            ("GET", "/org/team/charts/seed-1.0.0.tgz", 200),
            ("HEAD", "/api/org/charts/seed", 200),
            ("GET", "/org/nope/index.yaml", 404),
            ("DELETE", "/api/org/charts/seed/1.0.0", 200),
            ("POST", "/api/orgx/charts", 403),
            ("DELETE", "/api/orgx/charts/seed/1.0.0", 403),
            ("GET", "/orgx/index.yaml", 403),
            ("GET", "/orgx/charts/seed-1.0.0.tgz", 403),
            ("GET", "/other/index.yaml", 403),
            ("GET", "/nope/index.yaml", 403),
            ("GET", "/index.yaml", 403),
            ("GET", "/public/index.yaml", 200),
            ("POST", "/api/public/charts", 403),
        ],
    );
    assert_eq!(
        snapshot(&storage.join("orgx")),
        before_orgx,
        "orgx untouched"
    );
    let r = s.send("POST", "/api/orgx/charts", &[&org], &chart("x", "1.0.0"));
    assert_eq!(
        r.json()["error"],
        "forbidden: this credential may not write to this tenant"
    );
    assert!(
        r.headers_named("WWW-Authenticate").is_empty(),
        "a 403 has no challenge"
    );

    // A read credential of a nested tenant: reads there and below, never
    // above nor beside; its writes are 403s and store nothing.
    let before = snapshot(&storage);
    let team = bearer(TOK_TEAM);
    expect(
        &s,
        "team reader",
        &team,
        &[
            ("GET", "/org/team/index.yaml", 200),
            ("GET", "/api/org/team/charts", 200),
            ("GET", "/org/team/charts/seed-1.0.0.tgz", 200),
            ("POST", "/api/org/team/charts", 403),
            ("POST", "/api/org/team/prov", 403),
            ("DELETE", "/api/org/team/charts/seed/1.0.0", 403),
            ("GET", "/org/index.yaml", 403),
            ("GET", "/org/teamx/index.yaml", 403),
        ],
    );
    let r = s.send(
        "POST",
        "/api/org/team/charts",
        &[&team],
        &chart("y", "1.0.0"),
    );
    assert_eq!(
        r.json()["error"],
        "forbidden: this credential may not write to this tenant"
    );
    assert_eq!(snapshot(&storage), before, "nothing stored by a reader");

    // Basic credentials, as `USER:PASSWORD`'s digest.
    expect(
        &s,
        "bob",
        &basic(BOB),
        &[
            ("POST", "/api/other/charts", 201),
            ("GET", "/api/other/charts", 200),
            ("GET", "/api/org/charts", 403),
            ("POST", "/api/org/charts", 403),
        ],
    );
    // Every tenant's reader (`/`): the root's tenant too; no write.
    expect(
        &s,
        "mirror",
        &bearer(TOK_MIRROR),
        &[
            ("GET", "/index.yaml", 200),
            ("GET", "/orgx/index.yaml", 200),
            ("GET", "/org/team/index.yaml", 200),
            ("POST", "/api/org/charts", 403),
            ("DELETE", "/api/orgx/charts/seed/1.0.0", 403),
        ],
    );
    // Anonymous: `public` only, and only reads.
    expect(
        &s,
        "anonymous",
        "",
        &[
            ("GET", "/public/index.yaml", 200),
            ("GET", "/public/charts/seed-1.0.0.tgz", 200),
            ("POST", "/api/public/charts", 401),
            ("GET", "/org/index.yaml", 401),
        ],
    );
    // Unknown credentials are 401s with both challenges, whatever the
    // tenant (a token of one tenant is no key to guess another's with).
    for header in [
        bearer("tok-Org-writer-"),
        bearer("tok-Org-writer-1x"),
        basic("bob:pw-Bob-"),
        basic(TOK_ORG),
        basic(&format!("x:{TOK_ORG}")),
    ] {
        for target in [
            "/org/index.yaml",
            "/public/x/index.yaml",
            "/nope/index.yaml",
        ] {
            let r = s.send("GET", target, &[&header], b"");
            let expected = if target.starts_with("/public") {
                404
            } else {
                401
            };
            assert_eq!(
                r.status,
                expected,
                "GET {target} with {header}: {}",
                r.text()
            );
            if expected == 401 {
                assert_eq!(
                    r.headers_named("WWW-Authenticate"),
                    [
                        "Basic realm=\"chart_index\"",
                        "Bearer realm=\"chart_index\""
                    ]
                );
            }
        }
    }

    // Nothing printed holds a secret; the start says what the rules are.
    // Each line is printed before its answer is sent: once the last
    // request's is read, so are those of every request before it.
    expect(
        &s,
        "last",
        &bearer("tok-Last"),
        &[("GET", "/last/index.yaml", 401)],
    );
    // The line goes on with the request's fields (`method=... request_id=...`).
    s.wait_log("the last refusal's line", |l| {
        l.starts_with("auth: refused GET /last/index.yaml: unknown token")
    });
    let out = s.output();
    let said = format!(
        "chart_index: auth: rules of {} (5 rules: 1 Basic credential, 3 tokens, 1 anonymous \
         read); writes need credentials, reads need them",
        rules.display()
    );
    assert!(out.contains(&said), "{said:?} in {out:#?}");
    for line in &s.raw_output() {
        for secret in [TOK_ORG, TOK_TEAM, TOK_MIRROR, BOB, "pw-Bob-4"] {
            assert!(!line.contains(secret), "{secret:?} printed: {line:?}");
        }
    }
}

#[test]
fn global_credentials_reach_every_tenant_beside_the_rules() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    let text = format!(
        "org write {}\nnever/made write {}\n",
        hashed("bearer", TOK_ORG),
        hashed("bearer", TOK_TEAM)
    );
    let rules = rules_file(d.path(), &text);
    let tokens = d.path().join("tokens");
    std::fs::write(&tokens, "tok-Global-9\n").unwrap();
    let s = Server::start_with(
        "rules and globals",
        &storage,
        &[
            "--basic-auth-user",
            "ci",
            "--auth-token-file",
            tokens.to_str().unwrap(),
            "--auth-anonymous-get",
        ],
        &[
            ("BASIC_AUTH_PASS", "pw-Ci-5"),
            ("AUTH_RULES_FILE", rules.to_str().unwrap()),
        ],
    );
    for header in [basic("ci:pw-Ci-5"), bearer("tok-Global-9")] {
        expect(
            &s,
            "global",
            &header,
            &[
                ("POST", "/api/orgx/charts", 201),
                ("POST", "/api/charts", 201),
                ("POST", "/api/org/charts", 201),
            ],
        );
    }
    // --auth-anonymous-get: every read open; writes as the rules say.
    expect(
        &s,
        "org writer",
        &bearer(TOK_ORG),
        &[
            ("POST", "/api/org/charts", 201),
            ("POST", "/api/orgx/charts", 403),
            ("GET", "/orgx/index.yaml", 200),
        ],
    );
    expect(
        &s,
        "anonymous",
        "",
        &[
            ("GET", "/orgx/index.yaml", 200),
            ("POST", "/api/org/charts", 401),
        ],
    );
    // A rule for a tenant that does not exist yet: its writer makes it.
    expect(
        &s,
        "never/made's writer",
        &bearer(TOK_TEAM),
        &[
            ("POST", "/api/never/made/charts", 201),
            ("POST", "/api/never/charts", 403),
        ],
    );
    assert!(storage.join("never/made").is_dir());
}

#[test]
fn rules_files_that_cannot_be_used_are_refused_at_start() {
    let d = tempfile::tempdir().unwrap();
    let good = rules_file(d.path(), "org read anonymous\n");
    let bad = d.path().join("bad-rules");
    std::fs::write(&bad, "# rules\norg write s3cret-Raw-token\n").unwrap();
    let missing = d.path().join("no-such-rules");
    type Refused<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let (good, bad, missing) = (
        good.to_str().unwrap(),
        bad.to_str().unwrap(),
        missing.to_str().unwrap(),
    );
    let bad_line = format!("--auth-rules-file: {bad}: line 2: the credential is none of");
    let bad_env = format!("AUTH_RULES_FILE: {bad}: line 2: the credential is none of");
    let cases: [Refused<'_>; 4] = [
        (&["--auth-rules-file", bad], &[], &bad_line),
        (&[], &[("AUTH_RULES_FILE", bad)], &bad_env),
        (&["--auth-rules-file", missing], &[], "no-such-rules"),
        (
            &["--auth-rules-file", good, "--allow-anonymous-write"],
            &[],
            "--allow-anonymous-write opens writes to anyone",
        ),
    ];
    for (args, env, says) in cases {
        refused_to_start(d.path(), args, env, says, "s3cret");
    }
    // `hash-credential` refuses what no client can send.
    for (scheme, input) in [
        ("bearer", "two words\n"),
        ("bearer", ""),
        ("basic", "alice\n"),
    ] {
        let out = hash_credential(scheme, input);
        assert_eq!(out.status.code(), Some(2), "{scheme} {input:?}");
        assert!(out.stdout.is_empty());
    }
}

/// Waits for the line saying the rules were reloaded with `rules` rules.
fn reloaded(s: &Server, rules: &str) {
    s.wait_log(&format!("the rules reloaded: {rules}"), |l| {
        l.starts_with("chart_index: auth: rules reloaded from ")
            && l.contains(&format!(": {rules}:"))
    });
}

#[test]
fn the_rules_file_is_reloaded_when_it_is_replaced_and_kept_when_broken() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    let (a, b) = ("tok-A-reloaded-6", "tok-B-reloaded-7");
    let (ha, hb) = (hashed("bearer", a), hashed("bearer", b));
    let rules = rules_file(d.path(), &format!("org read {ha}\n"));
    let s = Server::start_with(
        "reload",
        &storage,
        &["--auth-rules-file", rules.to_str().unwrap()],
        &[],
    );
    let (ta, tb) = (bearer(a), bearer(b));
    expect(&s, "a", &ta, &[("POST", "/api/org/charts", 403)]);

    // An atomic save (a temporary file renamed over it): the refused
    // write is accepted without a restart.
    replace(&rules, &format!("org read {ha}\norg write {ha}\n"));
    reloaded(&s, "2 rules");
    expect(&s, "a", &ta, &[("POST", "/api/org/charts", 201)]);

    // A broken file keeps the rules in force, says why (the line, not its
    // text), and leaves the server healthy.
    replace(&rules, &format!("org write {ha}\norg write {b}\n"));
    let said = s.wait_log("the broken file refused", |l| {
        l.starts_with("chart_index: auth: rules not reloaded: ")
    });
    assert!(
        said.contains(&format!(
            "{}: line 2: the credential is none of",
            rules.display()
        )) && said.ends_with("the rules in force stay until the file changes again"),
        "{said}"
    );
    assert!(!said.contains(b), "{said}");
    expect(
        &s,
        "a",
        &ta,
        &[("POST", "/api/org/charts", 201), ("GET", "/health", 200)],
    );
    expect(&s, "b", &tb, &[("GET", "/org/index.yaml", 401)]);
    // Removed: kept too.
    std::fs::remove_file(&rules).unwrap();
    s.wait_log("the missing file refused", |l| {
        l.starts_with("chart_index: auth: rules not reloaded: ") && l.contains("No such file")
    });
    expect(&s, "a", &ta, &[("POST", "/api/org/charts", 201)]);

    // Revoked: a's writes are refused again, b reads; written in place.
    std::fs::write(&rules, format!("org/team read {hb}\n")).unwrap();
    reloaded(&s, "1 rule");
    expect(
        &s,
        "a",
        &ta,
        &[
            ("POST", "/api/org/charts", 401),
            ("GET", "/org/index.yaml", 401),
        ],
    );
    expect(
        &s,
        "b",
        &tb,
        &[
            ("GET", "/org/team/index.yaml", 404),
            ("GET", "/org/index.yaml", 403),
        ],
    );
    // Emptied: nobody.
    replace(&rules, "# nobody for now\n");
    reloaded(&s, "0 rules");
    expect(&s, "b", &tb, &[("GET", "/org/team/index.yaml", 401)]);
    let out = s.output();
    for line in &out {
        assert!(!line.contains(a) && !line.contains(b), "printed: {line:?}");
    }
}

/// Kubernetes' update of a Secret mounted as a volume: the files are
/// links through `..data`, a link to a timestamped directory that the
/// kubelet replaces by renaming a new link over it (the file's own link
/// never changes).
#[test]
fn the_rules_follow_a_kubernetes_secret_update() {
    use std::os::unix::fs::symlink;
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    let secret = d.path().join("secret");
    let (old, new) = ("tok-Old-8", "tok-New-9");
    let write_version = |stamp: &str, token: &str| {
        let dir = secret.join(stamp);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("rules"),
            format!("org write {}\n", hashed("bearer", token)),
        )
        .unwrap();
    };
    write_version("..2026_01_01_00_00_00.1", old);
    symlink("..2026_01_01_00_00_00.1", secret.join("..data")).unwrap();
    symlink("..data/rules", secret.join("rules")).unwrap();
    let s = Server::start_with(
        "secret",
        &storage,
        &["--auth-rules-file", secret.join("rules").to_str().unwrap()],
        &[],
    );
    expect(&s, "old", &bearer(old), &[("POST", "/api/org/charts", 201)]);
    expect(&s, "new", &bearer(new), &[("POST", "/api/org/charts", 401)]);

    // The kubelet's steps: the new version, a new link, renamed over
    // `..data`, the old version removed.
    write_version("..2026_01_02_00_00_00.2", new);
    symlink("..2026_01_02_00_00_00.2", secret.join("..data_tmp")).unwrap();
    std::fs::rename(secret.join("..data_tmp"), secret.join("..data")).unwrap();
    std::fs::remove_dir_all(secret.join("..2026_01_01_00_00_00.1")).unwrap();
    reloaded(&s, "1 rule");
    expect(&s, "new", &bearer(new), &[("POST", "/api/org/charts", 201)]);
    expect(&s, "old", &bearer(old), &[("POST", "/api/org/charts", 401)]);
}
