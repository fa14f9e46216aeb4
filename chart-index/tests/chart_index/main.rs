//! The `chart_index` example, a Helm chart repository whose index follows
//! its storage directory through change batches only. Run against the built
//! example binary over HTTP (a minimal client on `TcpStream`). Nothing
//! sleeps: every wait has a deadline and says what it awaited, and waits
//! for the server's next log line (not an access line) between looks at
//! `index.yaml` (the server says `index: seq N: K changes` after applying
//! each batch, and its index changes at no other time).
//!
//! This target holds the tests of the HTTP routes, tenants, direct writes
//! to the storage directory, traversal safety and the backend flags;
//! `serving` those of the HTTP stack (keep-alive, head limits, helm-push's
//! form, read-your-writes, the probes, graceful shutdown), `api` those of
//! chartmuseum's API (listings, provenance files, `?force`,
//! `--disable-delete`, `--depth`), `auth` those of authentication,
//! `downloads` those of what is served from files (ranges, conditional
//! requests) and of streamed uploads' limit,
//! `replicas` two servers on one storage directory, `restart` the restart
//! cache (`--cache-dir`), `ops` what operators see and set (the access
//! log, `/metrics`, readiness on failing storage, `--context-path` and
//! `--chart-url`, TLS and its reload), and `helm` Helm's own
//! client against the server (helm-python-sdk; skipped, saying so, where
//! it is not installed); `helm_chart` the server's own Helm chart
//! (`deploy/helm`, linted and rendered by Helm's code) and `container` its
//! container image run by podman (skipped, saying so, where no image was
//! built); the helpers live beside them:
//! `server` (the process and its log), `client` (HTTP) and `charts`
//! (packages and indexes).
#![cfg(unix)]

mod access;
mod api;
mod auth;
mod charts;
mod client;
mod container;
mod downloads;
mod helm;
mod helm_chart;
mod ops;
mod replicas;
mod restart;
mod server;
mod serving;

use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;

use crate::charts::{
    chart, contains, nv, package, padded_chart, parse_index, sha256, snapshot, tgz,
};
use crate::client::{Body, Resp, http};
use testkit::process;

use crate::server::Server;

#[test]
fn upload_list_download_delete() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    let s = Server::start("one", &storage, &[]);
    // An empty storage directory: the root's index, empty, and no batch.
    let (r, l) = s.index("");
    assert!(l.unwrap().is_empty(), "{}", r.text());
    assert_eq!(r.seq(), 0, "no change batch yet");
    let pkg = chart("mychart", "1.0.0");

    let r = s.post("/api/org/charts", &pkg);
    assert_eq!(r.status, 201, "upload: {}", r.text());
    let listing = s.wait_index("org", "mychart 1.0.0", |l| {
        l.contains_key(&nv("mychart", "1.0.0"))
    });
    let listed = &listing[&nv("mychart", "1.0.0")];
    assert_eq!(listed.digest, sha256(&pkg));
    assert_eq!(listed.urls, ["charts/mychart-1.0.0.tgz"]);
    assert!(listed.created.ends_with('Z') && listed.created.len() >= 20);
    assert_eq!(listing.len(), 1);
    let (r, _) = s.index("org");
    assert!(r.seq() >= 1, "X-Index-Seq after a batch: {}", r.seq());
    assert_eq!(
        std::fs::read(storage.join("org/mychart-1.0.0.tgz")).unwrap(),
        pkg,
        "stored as <tenant>/<name>-<version>.tgz"
    );

    let r = s.get("/org/charts/mychart-1.0.0.tgz");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.body == pkg, "the package comes back byte for byte");
    let r = http(
        &s.addr,
        "HEAD",
        b"/org/charts/mychart-1.0.0.tgz",
        Body::None,
    );
    assert_eq!(r.status, 200);
    assert!(r.body.is_empty());

    let r = s.post("/api/org/charts", &pkg);
    assert_eq!(r.status, 409, "re-upload: {}", r.text());
    let r = s.post("/api/org/charts", &chart("mychart", "1.0.0"));
    assert_eq!(r.status, 409, "same version, other bytes: {}", r.text());

    // Wrong methods and unknown routes.
    for (method, target, status) in [
        ("PUT", "/org/index.yaml", 405),
        ("POST", "/org/index.yaml", 405),
        ("PUT", "/api/org/charts", 405),
        ("GET", "/api/org/prov", 405),
        ("POST", "/api/org/charts/mychart", 405),
        ("PATCH", "/api/org/charts/mychart/1.0.0", 405),
        ("GET", "/org/nothing-here", 404),
        ("GET", "/", 404),
        ("DELETE", "/org/charts/mychart-1.0.0.tgz", 405),
    ] {
        let r = http(&s.addr, method, target.as_bytes(), Body::None);
        assert_eq!(r.status, status, "{method} {target}: {}", r.text());
    }

    let r = s.delete("/api/org/charts/mychart/1.0.0");
    assert_eq!(r.status, 200, "delete: {}", r.text());
    let listing = s.wait_index("org", "mychart 1.0.0 to go", |l| l.is_empty());
    assert!(listing.is_empty());
    assert!(!storage.join("org/mychart-1.0.0.tgz").exists());
    assert_eq!(s.get("/org/charts/mychart-1.0.0.tgz").status, 404);
    let r = s.delete("/api/org/charts/mychart/1.0.0");
    assert_eq!(r.status, 404, "delete again: {}", r.text());

    // Nothing temporary is left behind.
    let left: Vec<_> = snapshot(&storage)
        .into_keys()
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn tenants_at_any_depth_see_only_their_own_charts() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    let s = Server::start("tenants", &storage, &[]);
    let tenants = [
        ("org", "orgchart"),
        ("org/team", "teamchart"),
        ("a/b/c/d", "deepchart"),
        ("", "rootchart"),
    ];
    for (tenant, name) in tenants {
        let target = if tenant.is_empty() {
            "/api/charts".to_owned()
        } else {
            format!("/api/{tenant}/charts")
        };
        let r = s.post(&target, &chart(name, "0.1.0"));
        assert_eq!(r.status, 201, "upload {name} to /{tenant}: {}", r.text());
    }
    for (tenant, name) in tenants {
        let pkg = chart(name, "0.1.0");
        let l = s.wait_index(tenant, &format!("{name} 0.1.0"), |l| {
            l.contains_key(&nv(name, "0.1.0"))
        });
        assert_eq!(
            l.keys().collect::<Vec<_>>(),
            [&nv(name, "0.1.0")],
            "/{tenant} lists its own chart only (not its subdirectories')"
        );
        assert_eq!(l[&nv(name, "0.1.0")].digest, sha256(&pkg));
        let prefix = if tenant.is_empty() {
            String::new()
        } else {
            format!("/{tenant}")
        };
        let r = s.get(&format!("{prefix}/charts/{name}-0.1.0.tgz"));
        assert_eq!(r.status, 200, "{prefix}: {}", r.text());
        assert!(r.body == pkg);
    }
    // A directory between tenants is a tenant too, with no charts.
    let l = s.wait_index("a/b", "the empty index of a/b", |_| true);
    assert!(l.is_empty());

    for missing in [
        "/nope/index.yaml",
        "/org/nope/index.yaml",
        "/a/b/c/d/e/index.yaml",
    ] {
        let r = s.get(missing);
        assert_eq!(r.status, 404, "{missing}: {}", r.text());
    }
    let r = s.get("/nope/charts/orgchart-0.1.0.tgz");
    assert_eq!(r.status, 404);
    let r = s.get("/org/team/charts/orgchart-0.1.0.tgz");
    assert_eq!(r.status, 404, "a tenant's packages are not its subtenants'");

    std::fs::create_dir(storage.join("empty")).unwrap();
    let r = s.wait_status("/empty/index.yaml", 200, "a new empty tenant directory");
    assert!(
        r.text().contains("\"entries\": {}"),
        "empty index: {}",
        r.text()
    );
    assert!(parse_index(&r.text()).unwrap().is_empty());
}

#[test]
fn direct_file_system_writes_are_picked_up() {
    let d = tempfile::tempdir().unwrap();
    // Canonical, as the server logs paths.
    let storage = d.path().canonicalize().unwrap().join("charts");
    let org = storage.join("org");
    std::fs::create_dir_all(org.join("team")).unwrap();
    std::fs::create_dir_all(storage.join(".hidden")).unwrap();
    let pre = chart("pre", "0.1.0");
    std::fs::write(org.join("pre-0.1.0.tgz"), &pre).unwrap();
    std::fs::write(org.join("team/deep-1.0.0.tgz"), chart("deep", "1.0.0")).unwrap();
    std::fs::write(storage.join(".hidden/h-1.0.0.tgz"), chart("h", "1.0.0")).unwrap();
    std::fs::write(org.join("notes.txt"), "not a package").unwrap();

    let s = Server::start("fs", &storage, &["--backend", "native"]);
    // The first index is built (from the initial scan's batches) before
    // LISTENING: no waiting.
    let (r, l) = s.index("org");
    let l = l.unwrap_or_else(|e| panic!("{e}: {}", r.text()));
    assert_eq!(l.keys().collect::<Vec<_>>(), [&nv("pre", "0.1.0")]);
    assert_eq!(l[&nv("pre", "0.1.0")].digest, sha256(&pre));
    assert!(r.seq() > 0, "the initial scan's batch is applied");
    let (_, l) = s.index("org/team");
    assert!(l.unwrap().contains_key(&nv("deep", "1.0.0")));
    assert_eq!(s.get("/.hidden/index.yaml").status, 400);

    // A copy, an atomic save (temporary name renamed), a removal.
    let copied = chart("copied", "1.0.0");
    std::fs::write(org.join("copied.tgz"), &copied).unwrap();
    let saved = chart("saved", "2.0.0");
    std::fs::write(org.join(".saved.tmp"), &saved).unwrap();
    std::fs::rename(org.join(".saved.tmp"), org.join("saved-2.0.0.tgz")).unwrap();
    std::fs::remove_file(org.join("pre-0.1.0.tgz")).unwrap();
    let l = s.wait_index("org", "copied and saved in, pre out", |l| {
        l.contains_key(&nv("copied", "1.0.0"))
            && l.contains_key(&nv("saved", "2.0.0"))
            && !l.contains_key(&nv("pre", "0.1.0"))
    });
    assert_eq!(l.len(), 2, "{l:?}");
    assert_eq!(l[&nv("copied", "1.0.0")].digest, sha256(&copied));
    assert_eq!(l[&nv("copied", "1.0.0")].urls, ["charts/copied.tgz"]);
    assert_eq!(l[&nv("saved", "2.0.0")].digest, sha256(&saved));

    // A package rewritten in place is read again.
    let newer = chart("copied", "1.0.1");
    std::fs::write(org.join("copied.tgz"), &newer).unwrap();
    let l = s.wait_index("org", "copied.tgz re-read as 1.0.1", |l| {
        l.contains_key(&nv("copied", "1.0.1")) && !l.contains_key(&nv("copied", "1.0.0"))
    });
    assert_eq!(l[&nv("copied", "1.0.1")].digest, sha256(&newer));

    // Half written: skipped (with a reason), then picked up once whole.
    let half = chart("half", "1.0.0");
    let half_path = org.join("half-1.0.0.tgz");
    std::fs::write(&half_path, &half[..half.len() / 2]).unwrap();
    let skip = format!("skip {}: ", half_path.display());
    s.wait_log(&format!("starting {skip:?}"), |l| l.starts_with(&skip));
    let (_, l) = s.index("org");
    assert!(!l.unwrap().contains_key(&nv("half", "1.0.0")));
    std::fs::write(&half_path, &half).unwrap();
    let l = s.wait_index("org", "half 1.0.0 once complete", |l| {
        l.contains_key(&nv("half", "1.0.0"))
    });
    assert_eq!(l[&nv("half", "1.0.0")].digest, sha256(&half));

    // Cut short by a few bytes only (the gzip trailer): still refused.
    let cut = chart("cut", "1.0.0");
    let cut_path = org.join("cut-1.0.0.tgz");
    std::fs::write(&cut_path, &cut[..cut.len() - 4]).unwrap();
    let skip = format!("skip {}: ", cut_path.display());
    s.wait_log(&format!("starting {skip:?}"), |l| l.starts_with(&skip));
    // A version that Helm's index loader would drop: left out, saying why.
    let latest_path = org.join("latest.tgz");
    std::fs::write(&latest_path, chart("latest", "latest")).unwrap();
    let skip = format!(
        "skip {}: Chart.yaml: version \"latest\" is not a semantic version",
        latest_path.display()
    );
    s.wait_log(&format!("starting {skip:?}"), |l| l.starts_with(&skip));
    // Garbage, then a chart in its place.
    let garbage_path = org.join("garbage.tgz");
    std::fs::write(&garbage_path, b"\x1f\x8b but not really gzip").unwrap();
    let skip = format!("skip {}: ", garbage_path.display());
    s.wait_log(&format!("starting {skip:?}"), |l| l.starts_with(&skip));
    std::fs::write(&garbage_path, chart("garbage", "0.0.1")).unwrap();
    let l = s.wait_index("org", "garbage.tgz replaced by a chart", |l| {
        l.contains_key(&nv("garbage", "0.0.1"))
    });
    assert!(!l.contains_key(&nv("cut", "1.0.0")));

    // New directories with packages; then a whole tree removed.
    std::fs::create_dir_all(org.join("team/x/y")).unwrap();
    std::fs::write(org.join("team/x/y/y-1.0.0.tgz"), chart("y", "1.0.0")).unwrap();
    s.wait_index("org/team/x/y", "y 1.0.0 in a new directory", |l| {
        l.contains_key(&nv("y", "1.0.0"))
    });
    std::fs::remove_dir_all(org.join("team")).unwrap();
    s.wait_status("/org/team/x/y/index.yaml", 404, "org/team/x/y to go");
    s.wait_status("/org/team/index.yaml", 404, "org/team to go");
    let (_, l) = s.index("org");
    assert_eq!(l.unwrap().len(), 4, "org keeps its own packages");
    // The removed directory comes back empty.
    std::fs::create_dir(org.join("team")).unwrap();
    let l = s.wait_index("org/team", "org/team back, empty", |_| true);
    assert!(l.is_empty(), "{l:?}");
}

#[test]
fn nothing_outside_storage_is_read_or_written() {
    let d = tempfile::tempdir().unwrap();
    let base = d.path().canonicalize().unwrap();
    let storage = base.join("charts");
    let outside = base.join("outside");
    std::fs::create_dir_all(storage.join("org")).unwrap();
    std::fs::create_dir_all(outside.join("org")).unwrap();
    let secret = chart("secret", "6.6.6");
    std::fs::write(outside.join("secret-6.6.6.tgz"), &secret).unwrap();
    std::fs::write(outside.join("org/secret-6.6.6.tgz"), &secret).unwrap();
    // Links inside storage that lead out: a tenant, a package; and one
    // that stays inside (refused all the same).
    std::os::unix::fs::symlink(&outside, storage.join("evil")).unwrap();
    std::os::unix::fs::symlink(
        outside.join("secret-6.6.6.tgz"),
        storage.join("org/secret-6.6.6.tgz"),
    )
    .unwrap();
    std::os::unix::fs::symlink(storage.join("org"), storage.join("alias")).unwrap();
    let outside_before = snapshot(&outside);

    let s = Server::start("safety", &storage, &["--max-upload-mb", "1"]);
    let (r, l) = s.index("org");
    let l = l.unwrap_or_else(|e| panic!("{e}: {}", r.text()));
    assert!(l.is_empty(), "a linked package is not listed: {l:?}");

    let refused = |r: &Resp, what: &str| {
        assert!(
            matches!(r.status, 400 | 404),
            "{what}: refused expected, got {} {}",
            r.status,
            r.text()
        );
        assert!(!contains(&r.body, &secret), "{what}: served the secret");
    };
    let abs_index = format!("/{}/index.yaml", outside.display());
    let abs_pkg = format!("/{}/charts/secret-6.6.6.tgz", outside.display());
    let gets: Vec<&[u8]> = vec![
        b"/../outside/index.yaml",
        b"/org/../../outside/index.yaml",
        b"/../outside/charts/secret-6.6.6.tgz",
        b"/%2e%2e/outside/index.yaml",
        b"/%2E%2E/outside/charts/secret-6.6.6.tgz",
        b"/org/%2e%2e/%2e%2e/outside/index.yaml",
        b"/org%2f..%2f..%2foutside/index.yaml",
        b"/org%2F%2E%2E%2F%2E%2E%2Foutside/charts/secret-6.6.6.tgz",
        b"/org/charts/..%2f..%2foutside%2fsecret-6.6.6.tgz",
        b"/org/charts/%2e%2e%2f%2e%2e%2foutside%2fsecret-6.6.6.tgz",
        b"/%2e%2e%5coutside/index.yaml",
        b"/org/charts/..%5c..%5coutside%5csecret-6.6.6.tgz",
        b"/%252e%252e/outside/index.yaml",
        b"/org%00/index.yaml",
        b"/org/charts/secret-6.6.6.tgz%00.tgz",
        b"/org\0/index.yaml",
        b"//index.yaml",
        abs_index.as_bytes(),
        abs_pkg.as_bytes(),
        b"/%2f/index.yaml",
        b"http://localhost/../outside/index.yaml",
        b"/evil/index.yaml",
        b"/evil/org/index.yaml",
        b"/evil/charts/secret-6.6.6.tgz",
        b"/org/charts/secret-6.6.6.tgz",
        b"/alias/index.yaml",
        b"/./org/index.yaml",
        b"/.%2e/outside/index.yaml",
    ];
    for target in gets {
        let what = format!("GET {:?}", String::from_utf8_lossy(target));
        let r = http(&s.addr, "GET", target, Body::None);
        refused(&r, &what);
    }

    // Uploads and deletes that would land outside.
    let escape = chart("escape", "1.0.0");
    for target in [
        "/api/../outside/charts",
        "/api/%2e%2e/outside/charts",
        "/api/org%2f..%2f..%2foutside/charts",
        "/api/org/%2e%2e/%2e%2e/outside/charts",
        "/api/evil/charts",
        "/api/evil/org/charts",
        "/api/alias/charts",
        "/api//charts",
        "/api/%00/charts",
        "/api/%2ftmp/charts",
    ] {
        let r = s.post(target, &escape);
        refused(&r, &format!("POST {target}"));
    }
    for target in [
        "/api/evil/charts/secret/6.6.6",
        "/api/evil/org/charts/secret/6.6.6",
        "/api/%2e%2e/outside/charts/secret/6.6.6",
        "/api/org/charts/%2e%2e%2fsecret/6.6.6",
        "/api/org/charts/secret/6.6.6",
    ] {
        let r = s.delete(target);
        refused(&r, &format!("DELETE {target}"));
    }
    // Through the linked package's name: no write through the link.
    let r = s.post("/api/org/charts", &secret);
    assert_eq!(r.status, 409, "the name is taken (by a link): {}", r.text());
    assert_eq!(
        snapshot(&outside),
        outside_before,
        "the outside is untouched"
    );
    assert!(
        !snapshot(&base)
            .keys()
            .any(|p| p.to_string_lossy().contains("escape")),
        "no upload landed anywhere"
    );

    // A link made while running is no tenant either: once a later upload
    // is listed, its batch (and the link's) has been applied.
    std::os::unix::fs::symlink(&outside, storage.join("evil2")).unwrap();
    let r = s.post("/api/org/charts", &chart("marker", "1.0.0"));
    assert_eq!(r.status, 201, "{}", r.text());
    s.wait_index("org", "the marker upload", |l| {
        l.contains_key(&nv("marker", "1.0.0"))
    });
    refused(&s.get("/evil2/index.yaml"), "GET /evil2/index.yaml");
    refused(
        &s.get("/evil2/charts/secret-6.6.6.tgz"),
        "GET /evil2/charts/secret-6.6.6.tgz",
    );

    // Too large: refused by its declared length, and by counting when it
    // comes chunked; nothing is stored.
    let storage_before = snapshot(&storage);
    let big = padded_chart("big", "1.0.0", 2 << 20);
    assert!(big.len() > 2 << 20);
    let r = s.post("/api/org/charts", &big);
    assert_eq!(r.status, 413, "{}", r.text());
    let r = http(&s.addr, "POST", b"/api/org/charts", Body::Chunked(&big));
    assert_eq!(r.status, 413, "chunked: {}", r.text());
    assert_eq!(snapshot(&storage), storage_before, "nothing stored");

    // Bodies that are no chart: 400, saying why; nothing stored, not even
    // the tenant directory.
    let yaml = |y: &str| package("bad", y);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", Vec::new(), "gzip"),
        ("text", b"hello, not a chart".to_vec(), "gzip"),
        (
            "gzip of no tar",
            {
                let mut e = GzEncoder::new(Vec::new(), Compression::default());
                e.write_all(&b"hello ".repeat(300)).unwrap();
                e.finish().unwrap()
            },
            "archive",
        ),
        (
            "cut short",
            {
                let c = chart("cut", "1.0.0");
                c[..c.len() / 2].to_vec()
            },
            "archive",
        ),
        (
            "no Chart.yaml",
            tgz(&[("x/values.yaml".to_owned(), b"a: 1\n".to_vec())]),
            "Chart.yaml",
        ),
        (
            "Chart.yaml at the top",
            tgz(&[(
                "Chart.yaml".to_owned(),
                b"name: top\nversion: 1.0.0\n".to_vec(),
            )]),
            "Chart.yaml",
        ),
        (
            "no version",
            yaml("apiVersion: v2\nname: nover\n"),
            "version",
        ),
        ("no name", yaml("apiVersion: v2\nversion: 1.0.0\n"), "name"),
        (
            "version not SemVer",
            yaml("name: ok\nversion: 1.0.0.0\n"),
            "is not a semantic version as Helm reads it",
        ),
        (
            "type neither application nor library",
            yaml("name: ok\nversion: 1.0.0\ntype: app\n"),
            "application or library",
        ),
        (
            "keywords not a list",
            yaml("name: ok\nversion: 1.0.0\nkeywords: k\n"),
            "keywords: invalid type",
        ),
        (
            "name with ..",
            yaml("name: ../../outside/evil\nversion: 1.0.0\n"),
            "name",
        ),
        ("name with /", yaml("name: a/b\nversion: 1.0.0\n"), "name"),
        (
            "name with NUL",
            yaml("name: \"a\\0b\"\nversion: 1.0.0\n"),
            "name",
        ),
        ("hidden name", yaml("name: .x\nversion: 1.0.0\n"), "name"),
        (
            "version with /",
            yaml("name: ok\nversion: 1.0/../../x\n"),
            "version",
        ),
        (
            "version with ..",
            yaml("name: ok\nversion: 1..2\n"),
            "version",
        ),
        ("not a mapping", yaml("- name\n- version\n"), "mapping"),
        ("not YAML", yaml("name: [unclosed\n"), "Chart.yaml"),
        (
            "aliases",
            yaml("a: &a [x, x]\nb: &b [*a, *a]\nname: ok\nversion: 1.0.0\n"),
            "alias",
        ),
    ];
    for (what, body, says) in cases {
        let r = s.post("/api/fresh/charts", &body);
        assert_eq!(r.status, 400, "{what}: {}", r.text());
        assert!(
            r.text().contains(says),
            "{what}: {:?} says {says:?}",
            r.text()
        );
    }
    assert!(
        !storage.join("fresh").exists(),
        "no tenant made for bad bodies"
    );
    assert_eq!(snapshot(&storage), storage_before, "nothing stored");
    assert_eq!(
        snapshot(&outside),
        outside_before,
        "the outside is untouched"
    );
}

/// `--backend` and `--poll-interval` choose how the spec watches the root
/// (the stderr root line says what it got); with every choice the first
/// index comes from the initial scan and later writes are followed.
#[test]
fn backend_flags_choose_how_the_root_is_watched() {
    let d = tempfile::tempdir().unwrap();
    let base = d.path().canonicalize().unwrap();
    // What the root line must start with; `None`: Auto on a local
    // directory, the OS's events, naming the file system (`native: ext4
    // (0xef53) at ...`).
    let cases: [(&[&str], Option<&str>); 8] = [
        (&[], None),
        (&["--backend", "auto"], None),
        (&["--poll-interval", "250"], None),
        (&["--backend", "native"], Some("native: chosen")),
        (&["--backend", "portable"], Some("portable: chosen")),
        (&["--backend", "poll"], Some("poll every 1s: chosen")),
        (
            &["--backend", "poll", "--poll-interval", "250"],
            Some("poll every 250ms: chosen"),
        ),
        (
            &["--poll-interval", "250", "--backend", "poll"],
            Some("poll every 250ms: chosen"),
        ),
    ];
    for (i, (args, expected)) in cases.into_iter().enumerate() {
        let storage = base.join(format!("s{i}"));
        std::fs::create_dir_all(storage.join("org")).unwrap();
        let pre = chart("pre", "1.0.0");
        std::fs::write(storage.join("org/pre-1.0.0.tgz"), &pre).unwrap();
        let s = Server::start(&format!("flags {args:?}"), &storage, args);
        let line = s.root_line();
        let ok = match expected {
            Some(prefix) => line.starts_with(&format!("{prefix} at ")),
            None => line.starts_with("native: ") && !line.starts_with("native: chosen"),
        };
        assert!(
            ok && line.ends_with(&format!(" at {}", storage.display())),
            "{args:?}: root line {line:?}, expected {} at {}",
            expected.unwrap_or("native: <local file system>"),
            storage.display()
        );
        let (r, l) = s.index("org");
        let l = l.unwrap_or_else(|e| panic!("{args:?}: {e}: {}", r.text()));
        assert_eq!(
            l.get(&nv("pre", "1.0.0")).map(|c| c.digest.as_str()),
            Some(sha256(&pre).as_str()),
            "{args:?}: listed from the initial scan at LISTENING"
        );
        std::fs::write(storage.join("org/new-1.0.0.tgz"), chart("new", "1.0.0")).unwrap();
        s.wait_index(
            "org",
            &format!("{args:?}: new 1.0.0 (written directly)"),
            |l| l.contains_key(&nv("new", "1.0.0")),
        );
    }

    // Arguments refused: exit status 2, saying why. (`--listen` is such
    // that a server that started after all would exit at once.)
    for (args, says) in [
        (&["--backend", "nfs"][..], "unknown backend"),
        (&["--poll-interval", "0"], "--poll-interval"),
        (&["--poll-interval", "soon"], "--poll-interval"),
        (&["--backend"], "a value is required for '--backend"),
        (&["--sync-timeout", "soon"], "--sync-timeout"),
    ] {
        let mut cmd = server::command();
        cmd.arg("--storage")
            .arg(base.join("refused"))
            .args(["--listen", "256.0.0.1:1"])
            .args(args);
        let out = process::output("chart_index", cmd);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?} says {says:?}: {err}");
    }
}
