//! chartmuseum's API beside Helm's routes: the JSON listing of charts and
//! versions (`GET`/`HEAD /api/<tenant>/charts[/<name>[/<version>]]`),
//! provenance files alone (`POST /api/<tenant>/prov`), `?force` with and
//! without `--allow-overwrite`, `--disable-delete`, and `--depth`. Uploads
//! and deletes answer once the index shows them (read-your-writes), so
//! what follows them reads it at once.

use std::path::Path;

use serde_json::{Value, json};
use testkit::process;

use crate::charts::{chart, nv, package, prov, sha256};
use crate::client::Resp;
use crate::server::{self, Server};

fn created(r: &Resp) {
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["indexed"], json!(true), "{}", r.text());
}

/// The versions (`"version"`) of a JSON array of chart versions.
fn versions(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|c| c["version"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn charts_and_versions_as_helm_chart_version_json() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    let s = Server::start("api", &storage, &[]);
    assert_eq!(s.get("/api/charts").json(), json!({}), "the root, empty");
    let r = s.get("/api/nope/charts");
    assert_eq!(r.status, 404, "{}", r.text());
    assert!(r.json()["error"].as_str().unwrap().contains("/nope"));

    let a1 = chart("a", "1.0.0");
    for pkg in [
        &a1,
        &chart("a", "1.10.0"),
        &chart("a", "2.0.0-rc.1"),
        &package(
            "b",
            "apiVersion: v2\nname: b\nversion: 0.1.0\nappVersion: \"3.2\"\ntype: library\n",
        ),
    ] {
        created(&s.post("/api/org/team/charts", pkg));
    }

    // Every chart, each version as Helm's ChartVersion JSON: what the
    // index lists of it, the same digest, urls and created.
    let all = s.get("/api/org/team/charts");
    assert_eq!(all.status, 200, "{}", all.text());
    let all = all.json();
    let names: Vec<&String> = all.as_object().unwrap().keys().collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(versions(&all["a"]), ["2.0.0-rc.1", "1.10.0", "1.0.0"]);
    let (_, index) = s.index("org/team");
    let index = index.unwrap();
    for c in all
        .as_object()
        .unwrap()
        .values()
        .flat_map(|v| v.as_array().unwrap())
    {
        let key = nv(c["name"].as_str().unwrap(), c["version"].as_str().unwrap());
        let listed = &index[&key];
        assert_eq!(c["digest"], json!(listed.digest), "{key:?}");
        assert_eq!(c["urls"], json!(listed.urls), "{key:?}");
        assert_eq!(c["created"], json!(listed.created), "{key:?}");
    }
    let b = &all["b"][0];
    assert_eq!(
        (
            b["apiVersion"].clone(),
            b["appVersion"].clone(),
            b["type"].clone()
        ),
        (json!("v2"), json!("3.2"), json!("library"))
    );
    assert!(
        b.get("description").is_none(),
        "absent fields left out: {b}"
    );
    let a = s.get("/api/org/team/charts/a/1.0.0").json();
    assert_eq!(
        a,
        json!({
            "name": "a",
            "version": "1.0.0",
            "description": "chart a",
            "apiVersion": "v2",
            "urls": ["charts/a-1.0.0.tgz"],
            "created": index[&nv("a", "1.0.0")].created,
            "digest": sha256(&a1),
        })
    );

    // Pages of names, as chartmuseum's offset and limit.
    let page = s.get("/api/org/team/charts?offset=1&limit=1").json();
    assert_eq!(page.as_object().unwrap().keys().collect::<Vec<_>>(), ["b"]);
    assert_eq!(s.get("/api/org/team/charts?offset=5").json(), json!({}));
    for bad in ["offset=-1", "limit=0", "limit=x"] {
        let r = s.get(&format!("/api/org/team/charts?{bad}"));
        assert_eq!(r.status, 400, "{bad}: {}", r.text());
    }

    // One chart, one version, `latest` (no pre-release), and misses.
    let r = s.get("/api/org/team/charts/a");
    assert_eq!(versions(&r.json()), ["2.0.0-rc.1", "1.10.0", "1.0.0"]);
    assert_eq!(r.header("X-Index-Seq").map(str::is_empty), Some(false));
    let latest = s.get("/api/org/team/charts/a/latest").json();
    assert_eq!(latest["version"], json!("1.10.0"));
    for (target, says) in [
        (
            "/api/org/team/charts/a/9.9.9",
            "no version \"9.9.9\" of chart \"a\" in /org/team",
        ),
        ("/api/org/team/charts/zz", "no chart \"zz\" in /org/team"),
        ("/api/org/team/charts/zz/1.0.0", "no chart \"zz\""),
        ("/api/org/team/x/charts/a", "no tenant /org/team/x"),
        ("/api/org/charts/a", "no chart \"a\" in /org"),
    ] {
        let r = s.get(target);
        assert_eq!(r.status, 404, "{target}: {}", r.text());
        let error = r.json()["error"].as_str().unwrap().to_owned();
        assert!(error.contains(says), "{target}: {error:?} says {says:?}");
    }
    // HEAD: 200 or 404, no body.
    for (target, status) in [
        ("/api/org/team/charts", 200),
        ("/api/org/team/charts/a", 200),
        ("/api/org/team/charts/a/1.10.0", 200),
        ("/api/org/team/charts/a/latest", 200),
        ("/api/org/team/charts/zz", 404),
        ("/api/org/team/charts/a/9.9.9", 404),
    ] {
        let r = s.send("HEAD", target, &[], b"");
        assert_eq!(r.status, status, "HEAD {target}");
        assert!(r.body.is_empty(), "HEAD {target}: no body");
    }

    // A tenant whose last directory is named `charts`: its list, read as
    // chartmuseum's --depth-dynamic reads it.
    created(&s.post("/api/org/charts/charts", &chart("c", "1.0.0")));
    assert!(storage.join("org/charts/c-1.0.0.tgz").exists());
    let r = s.get("/api/org/charts/charts");
    assert_eq!(versions(&r.json()["c"]), ["1.0.0"], "{}", r.text());
}

/// `--depth 1`: a tenant is one segment, so `/api/org/charts/charts` is
/// chart `charts` of `org`; another server over the same directory,
/// without `--depth`, reads it as the list of tenant `org/charts`.
#[test]
fn depth_makes_tenants_one_length_and_paths_unambiguous() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    let fixed = Server::start("depth 1", &storage, &["--depth", "1"]);
    created(&fixed.post("/api/org/charts", &chart("charts", "1.0.0")));
    let r = fixed.get("/api/org/charts/charts");
    assert_eq!(versions(&r.json()), ["1.0.0"], "{}", r.text());
    for (method, target) in [
        ("GET", "/index.yaml"),
        ("GET", "/api/charts"),
        ("GET", "/org/team/index.yaml"),
        ("POST", "/api/org/team/charts"),
    ] {
        let r = fixed.send(method, target, &[], b"");
        assert_eq!(
            r.status,
            404,
            "{method} {target} with --depth 1: {}",
            r.text()
        );
    }
    assert_eq!(fixed.get("/org/index.yaml").status, 200);
    let r = fixed.get("/api/org/charts/charts/1.0.0");
    assert_eq!(r.json()["name"], json!("charts"), "{}", r.text());

    let any = Server::start("any depth", &storage, &[]);
    let r = any.get("/api/org/charts/charts");
    assert_eq!(r.status, 404, "{}", r.text());
    assert!(r.text().contains("no tenant /org/charts"), "{}", r.text());
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn provenance_files_force_and_overwrite() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    let org = storage.join("org");
    let s = Server::start("overwrite", &storage, &["--allow-overwrite"]);

    // A provenance file alone, before its chart (as chartmuseum allows):
    // stored, and served once the chart is listed.
    let p1 = prov("p", "1.0.0");
    created(&s.post("/api/org/prov", &p1));
    assert_eq!(read(&org.join("p-1.0.0.tgz.prov")), p1);
    assert_eq!(s.get("/org/charts/p-1.0.0.tgz.prov").status, 404);
    let pkg = chart("p", "1.0.0");
    created(&s.post("/api/org/charts", &pkg));
    let r = s.get("/org/charts/p-1.0.0.tgz.prov");
    assert!(r.status == 200 && r.body == p1, "{} {}", r.status, r.text());

    // Again: 409 saying how to replace it; with ?force, replaced.
    let r = s.post("/api/org/prov", &p1);
    assert_eq!(r.status, 409, "{}", r.text());
    assert!(r.text().contains("?force"), "{}", r.text());
    let mut p2 = p1.clone();
    p2.extend_from_slice(b"\n");
    created(&s.post("/api/org/prov?force", &p2));
    assert_eq!(read(&org.join("p-1.0.0.tgz.prov")), p2);
    let r = s.post("/api/org/prov", b"not a provenance file");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("provenance"), "{}", r.text());

    // The package: 409 without ?force (or with ?force=false), replaced
    // with it; the index shows the new one as soon as the answer comes.
    let newer = package(
        "p",
        "apiVersion: v2\nname: p\nversion: 1.0.0\ndescription: rebuilt\n",
    );
    for target in ["/api/org/charts", "/api/org/charts?force=false"] {
        let r = s.post(target, &newer);
        assert_eq!(r.status, 409, "{target}: {}", r.text());
    }
    created(&s.post("/api/org/charts?force", &newer));
    assert_eq!(read(&org.join("p-1.0.0.tgz")), newer);
    let v = s.get("/api/org/charts/p/1.0.0").json();
    assert_eq!(v["digest"], json!(sha256(&newer)));
    assert_eq!(v["description"], json!("rebuilt"));
    // The form, forced: both replaced.
    let p3 = prov("p", "1.0.0");
    let r = s.post_form(
        "/api/org/charts?force",
        &[("chart", "p.tgz", &pkg), ("prov", "p.tgz.prov", &p3)],
    );
    created(&r);
    assert_eq!(read(&org.join("p-1.0.0.tgz")), pkg);
    assert_eq!(read(&org.join("p-1.0.0.tgz.prov")), p3);
    // A form with the provenance file alone.
    let q = prov("q", "2.0.0");
    created(&s.post_form("/api/org/charts", &[("prov", "q.prov", &q)]));
    assert_eq!(read(&org.join("q-2.0.0.tgz.prov")), q);

    // A delete takes the package, then its provenance file; a version
    // that is not there touches no provenance file.
    let r = s.delete("/api/org/charts/p/1.0.0");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(!org.join("p-1.0.0.tgz").exists() && !org.join("p-1.0.0.tgz.prov").exists());
    let r = s.delete("/api/org/charts/q/2.0.0");
    assert_eq!(r.status, 404, "{}", r.text());
    assert!(
        org.join("q-2.0.0.tgz.prov").exists(),
        "kept: no such version"
    );
}

#[test]
fn force_needs_allow_overwrite_and_delete_can_be_disabled() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    let s = Server::start("strict", &storage, &["--disable-delete"]);
    let pkg = chart("x", "1.0.0");
    created(&s.post("/api/org/charts?force", &pkg));
    let other = package("x", "apiVersion: v2\nname: x\nversion: 1.0.0\n");
    created(&s.post("/api/org/prov", &prov("x", "1.0.0")));
    for (target, body) in [
        ("/api/org/charts?force", other),
        ("/api/org/prov?force", prov("x", "1.0.0")),
    ] {
        let r = s.post(target, &body);
        assert_eq!(r.status, 409, "{target}: {}", r.text());
        assert!(r.text().contains("--allow-overwrite"), "{}", r.text());
    }
    assert_eq!(read(&storage.join("org/x-1.0.0.tgz")), pkg, "not replaced");

    let r = s.delete("/api/org/charts/x/1.0.0");
    assert_eq!(r.status, 404, "{}", r.text());
    assert!(r.text().contains("--disable-delete"), "{}", r.text());
    assert!(storage.join("org/x-1.0.0.tgz").exists());
    assert_eq!(s.get("/api/org/charts/x/1.0.0").status, 200);
}

/// The settings of the last test, from a config file and from
/// chartmuseum's environment variables instead of flags (a flag wins
/// over its variable, which wins over the file); bad values refused,
/// naming the variable or the file's line.
#[test]
fn settings_from_a_config_file_and_the_environment() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    let config = d.path().join("chart-index.yaml");
    std::fs::write(
        &config,
        "# as an operator would write it\ndisable-delete: true\ndepth: 2\n",
    )
    .unwrap();
    let config_arg = config.to_str().unwrap();
    // DEPTH=1 from the environment wins over the file's 2.
    let s = Server::start_with(
        "configured",
        &storage,
        &["--config", config_arg],
        &[("DEPTH", "1"), ("ALLOW_ANONYMOUS_WRITE", "true")],
    );
    created(&s.post("/api/org/charts", &chart("x", "1.0.0")));
    assert_eq!(
        s.send("POST", "/api/org/team/charts", &[], b"").status,
        404,
        "a tenant of two segments with DEPTH=1"
    );
    let r = s.delete("/api/org/charts/x/1.0.0");
    assert_eq!(r.status, 404, "disable-delete from the file: {}", r.text());
    assert!(storage.join("org/x-1.0.0.tgz").exists());
    drop(s);

    // The flag wins over the file.
    let s = Server::start_with(
        "flag over file",
        &storage,
        &[
            "--config",
            config_arg,
            "--disable-delete=false",
            "--depth",
            "1",
        ],
        &[("ALLOW_ANONYMOUS_WRITE", "1")],
    );
    let r = s.delete("/api/org/charts/x/1.0.0");
    assert_eq!(r.status, 200, "--disable-delete=false: {}", r.text());
    drop(s);

    // Refused, exit 2, naming where the value came from.
    let bad = d.path().join("bad.yaml");
    std::fs::write(&bad, "depth: 1\npoll-interval: soon\n").unwrap();
    let unknown = d.path().join("unknown.yaml");
    std::fs::write(&unknown, "prot: 8080\n").unwrap();
    /// Arguments, environment, and what the refusal says.
    type Refused<'a> = (Vec<String>, Vec<(&'a str, &'a str)>, Vec<String>);
    let cases: [Refused<'_>; 4] = [
        (
            vec![],
            vec![("PORT", "http")],
            vec!["PORT".into(), "--port".into()],
        ),
        (
            vec![],
            vec![("DISABLE_DELETE", "maybe")],
            vec!["DISABLE_DELETE".into()],
        ),
        (
            vec!["--config".into(), bad.display().to_string()],
            vec![],
            vec![
                bad.display().to_string(),
                "line 2".into(),
                "poll-interval".into(),
            ],
        ),
        (
            vec!["--config".into(), unknown.display().to_string()],
            vec![],
            vec!["unknown field `prot`".into(), "line 1".into()],
        ),
    ];
    for (args, env, says) in cases {
        let mut cmd = server::command();
        cmd.arg("--storage")
            .arg(d.path().join("refused"))
            .args(["--listen", "256.0.0.1:1"])
            .args(&args)
            .envs(env.iter().copied());
        let out = process::output("chart-index", cmd);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {err}");
        for s in says {
            assert!(err.contains(&s), "{args:?} {env:?} says {s:?}: {err}");
        }
    }

    // --help names each setting's variable.
    let mut cmd = server::command();
    cmd.arg("--help");
    let out = process::output("chart-index --help", cmd);
    let help = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{help}");
    for var in chart_index::config::env_vars() {
        assert!(
            help.contains(&format!("[env: {var}")),
            "--help names {var}: {help}"
        );
    }
}
