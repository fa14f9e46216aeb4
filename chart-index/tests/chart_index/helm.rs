//! Helm's own client against the server: charts made and packaged by
//! Helm, uploaded (raw and as helm-push's form), listed by Helm's index
//! loader, pulled, used as dependencies by `helm dependency update`, and
//! deleted; and the served index beside the one `helm repo index` makes of
//! the same packages.
//!
//! Helm runs through helm-python-sdk (`helm_python`: Helm's Go SDK behind
//! a C ABI, no helm binary), one action per run of `helm.py` beside this
//! file. Its Python is `SPECWATCH_HELM_PYTHON`, else
//! `target/helm-venv/bin/python` (`.ci/run` installs it there). Where it
//! is not installed the test says loudly that it skips; where
//! `SPECWATCH_REQUIRE_HELM` is set (`.ci/run` sets it once installed) it
//! fails instead.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::charts::{package, sha256};
use crate::client::Resp;
use crate::server::Server;
use testkit::{process, skip};

/// Helm's client: a Python with `helm_python`, and Helm's own directories
/// (cache, configuration, data) kept in the test's temporary directory.
pub(crate) struct Helm {
    python: PathBuf,
    home: PathBuf,
}

impl Helm {
    /// Helm's client, or `None` once it has said why `test` skips (a
    /// panic instead where `SPECWATCH_REQUIRE_HELM` is set).
    pub(crate) fn find(home: &Path, test: &str) -> Option<Helm> {
        let python = std::env::var_os("SPECWATCH_HELM_PYTHON").map_or_else(
            || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/helm-venv/bin/python"),
            PathBuf::from,
        );
        let helm = Helm {
            python,
            home: home.to_path_buf(),
        };
        let why = if helm.python.exists() {
            match helm.run(&["version"]) {
                Ok(v) => {
                    eprintln!("Helm's client: helm-python-sdk, Helm SDK {}", v["sdk"]);
                    return Some(helm);
                }
                Err(e) => format!("{} cannot run Helm's client: {e}", helm.python.display()),
            }
        } else {
            format!(
                "no {} (`.ci/run` installs helm-python-sdk there; or set SPECWATCH_HELM_PYTHON)",
                helm.python.display()
            )
        };
        if std::env::var_os("SPECWATCH_REQUIRE_HELM").is_some() {
            panic!("Helm's client is required here (SPECWATCH_REQUIRE_HELM): {why}");
        }
        skip(&format!(
            "{test} needs helm-python-sdk: {why} \
             (set SPECWATCH_REQUIRE_HELM=1 to make this a failure)"
        ));
        None
    }

    /// Runs `helm.py ARGS` (one Helm action, within the tests' deadline):
    /// its JSON result, or what Helm said.
    pub(crate) fn run(&self, args: &[&str]) -> Result<Value, String> {
        let mut cmd = Command::new(&self.python);
        cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/chart_index/helm.py"))
            .args(args);
        for (var, dir) in [
            ("HELM_CACHE_HOME", "cache"),
            ("HELM_CONFIG_HOME", "config"),
            ("HELM_DATA_HOME", "data"),
        ] {
            cmd.env(var, self.home.join(dir));
        }
        let out = process::output(&format!("helm.py {}", args.join(" ")), cmd);
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
        }
        serde_json::from_slice(&out.stdout).map_err(|e| {
            format!(
                "helm.py {args:?}: not JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    /// As [`Helm::run`], panicking with what Helm said.
    pub(crate) fn ok(&self, args: &[&str]) -> Value {
        self.run(args)
            .unwrap_or_else(|e| panic!("helm.py {}: {e}", args.join(" ")))
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The chart sources: `base` (most of Chart.yaml's fields, strings that a
/// YAML 1.1 reader would take for booleans or numbers), `lib` (a
/// deprecated library chart) and `rich` (depending on both through the
/// repository at `repo`).
fn chart_sources(dir: &Path, repo: &str) {
    write(
        &dir.join("base/Chart.yaml"),
        "apiVersion: v2\nname: base\nversion: 0.0.1\n\
         description: A base chart   that others depend on\n\
         appVersion: \"1.10\"\nhome: https://example.org/base\n\
         icon: https://example.org/base.png\nsources: [https://example.org/src/base]\n\
         keywords: [\"on\", \"y\", \"1_000\", \"null\", \"Ünïcødé ✓\", database]\n\
         maintainers:\n- {name: Ann, email: ann@example.org, url: https://example.org/ann}\n\
         - {name: Bob}\n\
         annotations:\n  category: \"on\"\n  artifacthub.io/license: Apache-2.0\n  \
         example.org/number: \"1.10\"\n\
         kubeVersion: \">=1.20.0-0\"\n",
    );
    write(
        &dir.join("base/values.yaml"),
        "exports:\n  data:\n    greeting: hello\n",
    );
    write(
        &dir.join("base/templates/configmap.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-base\n",
    );
    write(
        &dir.join("lib/Chart.yaml"),
        "apiVersion: v2\nname: lib\nversion: 2.0.0\ntype: library\ndeprecated: true\n\
         description: Helpers only\n",
    );
    write(
        &dir.join("lib/templates/_helpers.tpl"),
        "{{- define \"lib.name\" -}}{{ .Chart.Name }}{{- end -}}\n",
    );
    write(
        &dir.join("rich/Chart.yaml"),
        &format!(
            "apiVersion: v2\nname: rich\nversion: 0.3.0\ntype: application\n\
             description: Depends on charts of the repository\n\
             condition: rich.enabled\ntags: front,back\n\
             dependencies:\n\
             - name: base\n  version: ^1.0.0\n  repository: {repo}\n  alias: base-a\n  \
             condition: base-a.enabled\n  tags: [front]\n  enabled: true\n  \
             import-values:\n  - child: exports.data\n    parent: imported\n  - data\n\
             - name: base\n  version: ~0.9.0\n  repository: {repo}\n  alias: base-old\n\
             - name: lib\n  version: 2.0.0\n  repository: {repo}\n"
        ),
    );
    write(&dir.join("rich/values.yaml"), "imported: {}\n");
}

/// Uploads `package` (raw, or as helm-push's form), expecting it stored and
/// indexed.
fn upload(s: &Server, tenant: &str, package: &[u8], as_form: bool) {
    let target = format!("/api/{tenant}/charts");
    let r: Resp = if as_form {
        s.post_form(&target, &[("chart", "chart.tgz", package)])
    } else {
        s.post(&target, package)
    };
    assert_eq!(r.status, 201, "upload: {}", r.text());
    assert!(r.text().contains("\"indexed\":true"), "{}", r.text());
}

/// The versions of `name` in `index` (as Helm lists them, in its order).
fn versions(index: &Value, name: &str) -> Vec<String> {
    index["entries"][name]
        .as_array()
        .map(|vs| {
            vs.iter()
                .map(|v| v["version"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// An index's entries without their `created` (a time: the package's
/// for the server, the run's for `helm repo index`), each URL made
/// absolute against `base` (the index's own URL, without `index.yaml`).
fn comparable(index: &Value, base: &str) -> Value {
    let mut entries = index["entries"].clone();
    for versions in entries.as_object_mut().unwrap().values_mut() {
        for v in versions.as_array_mut().unwrap() {
            let v = v.as_object_mut().unwrap();
            assert!(
                v.remove("created").is_some(),
                "an entry without created: {v:?}"
            );
            for url in v["urls"].as_array_mut().unwrap() {
                let u = url.as_str().unwrap();
                if !u.starts_with("http") {
                    *url = json!(format!("{base}/{u}"));
                }
            }
        }
    }
    entries
}

#[test]
fn helm_uses_the_repository_end_to_end() {
    let d = tempfile::tempdir().unwrap();
    let Some(helm) = Helm::find(&d.path().join("helm-home"), "the Helm client test") else {
        return;
    };
    let storage = d.path().join("charts");
    let s = Server::start("helm", &storage, &[]);
    let tenant = "org/team";
    let repo = format!("http://{}/{tenant}", s.addr);
    let src = d.path().join("src");
    chart_sources(&src, &repo);
    let out = d.path().join("packaged");
    let path = |v: Value| PathBuf::from(v["path"].as_str().unwrap());

    // Made and packaged by Helm: base in four versions (one with Helm's
    // leading `v`, one pre-release), uploaded raw and as helm-push's form.
    let base_dir = src.join("base");
    let base_dir = base_dir.to_str().unwrap();
    let out_dir = out.to_str().unwrap();
    let mut base = Vec::new();
    for (version, as_form) in [
        ("0.9.0", false),
        ("1.0.0-rc.1", true),
        ("1.0.0", false),
        ("v1.1.0", true),
    ] {
        let file = path(helm.ok(&["package", base_dir, out_dir, version]));
        let bytes = std::fs::read(&file).unwrap();
        upload(&s, tenant, &bytes, as_form);
        base.push((version, file, bytes));
    }
    let lib = path(helm.ok(&["package", src.join("lib").to_str().unwrap(), out_dir]));
    upload(&s, tenant, &std::fs::read(&lib).unwrap(), false);

    // Listed by Helm's own index loader, newest first as Helm orders them;
    // digests are Helm's digest of each package.
    let index = helm.ok(&["index", &repo]);
    assert_eq!(
        versions(&index, "base"),
        ["v1.1.0", "1.0.0", "1.0.0-rc.1", "0.9.0"],
        "Helm lists every version, in its order: {index}"
    );
    for (version, file, bytes) in &base {
        let entry = index["entries"]["base"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["version"] == *version)
            .unwrap();
        let digest = helm.ok(&["digest", file.to_str().unwrap()]);
        assert_eq!(
            digest["digest"],
            format!("sha256:{}", entry["digest"].as_str().unwrap())
        );
        assert_eq!(entry["digest"], sha256(bytes));
        assert_eq!(
            entry["keywords"][0], "on",
            "a string stays a string: {entry}"
        );
    }
    assert_eq!(index["entries"]["lib"][0]["type"], "library");
    assert_eq!(index["entries"]["lib"][0]["deprecated"], true);

    // Pulled by Helm: the bytes uploaded.
    for (version, file, bytes) in &base {
        let dest = d.path().join("pulled").join(version);
        let pulled = helm.ok(&["pull", &repo, "base", version, dest.to_str().unwrap()]);
        let name = file.file_name().unwrap().to_str().unwrap();
        assert_eq!(pulled["files"], json!([name]), "{version}");
        assert!(
            std::fs::read(dest.join(name)).unwrap() == *bytes,
            "base {version} comes back byte for byte"
        );
    }

    // A dependency: `helm dependency update` resolves ^1.0.0 (to v1.1.0),
    // ~0.9.0 and lib 2.0.0 against the repository and downloads them.
    let rich_dir = src.join("rich");
    let charts = helm.ok(&["dependency-update", rich_dir.to_str().unwrap()]);
    assert_eq!(
        charts["charts"],
        json!(["base-0.9.0.tgz", "base-v1.1.0.tgz", "lib-2.0.0.tgz"]),
        "the versions Helm chose"
    );
    for (version, file, bytes) in &base {
        let name = file.file_name().unwrap();
        if let Ok(fetched) = std::fs::read(rich_dir.join("charts").join(name)) {
            assert!(
                fetched == *bytes,
                "the dependency base {version} as uploaded"
            );
        }
    }
    let lock = std::fs::read_to_string(rich_dir.join("Chart.lock")).unwrap();
    assert!(lock.contains("version: v1.1.0"), "{lock}");
    let rich = path(helm.ok(&["package", rich_dir.to_str().unwrap(), out_dir]));
    let rich_bytes = std::fs::read(&rich).unwrap();
    upload(&s, tenant, &rich_bytes, true);
    let index = helm.ok(&["index", &repo]);
    let deps = &index["entries"]["rich"][0]["dependencies"];
    assert_eq!(
        deps[0],
        json!({
            "name": "base", "version": "^1.0.0", "repository": repo, "alias": "base-a",
            "condition": "base-a.enabled", "tags": ["front"], "enabled": true,
            "import-values": [{"child": "exports.data", "parent": "imported"}, "data"],
        }),
        "{deps}"
    );

    // A package made by hand, not by Helm (whose packages hold the
    // Chart.yaml as Helm rewrote it): line breaks, tabs, a no-break space,
    // a zero-width space and a control character, which Helm's loader
    // turns into spaces or drops.
    let hand = out.join("hand-1.0.0.tgz");
    std::fs::write(
        &hand,
        package(
            "hand",
            "apiVersion: v2\nname: hand\nversion: 1.0.0\n\
             description: \"two\\nlines\\tand\\u00a0no-break\\u200bzero-width\"\n\
             keywords: [\"bell\\u0007\", \"ok\"]\nannotations: {kept: \"as\\tis\"}\n",
        ),
    )
    .unwrap();
    upload(&s, tenant, &std::fs::read(&hand).unwrap(), false);

    // The served index, and what Helm's loader makes of it, carry what
    // `helm repo index --url` writes for the same packages (created aside;
    // URLs made absolute).
    let generated_dir = d.path().join("generated");
    std::fs::create_dir(&generated_dir).unwrap();
    for file in [&rich, &lib, &hand]
        .into_iter()
        .chain(base.iter().map(|(_, f, _)| f))
    {
        std::fs::copy(file, generated_dir.join(file.file_name().unwrap())).unwrap();
    }
    let charts_url = format!("{repo}/charts");
    let generated = helm.ok(&["generate", generated_dir.to_str().unwrap(), &charts_url]);
    let served: Value = serde_json::from_slice(&s.get(&format!("/{tenant}/index.yaml")).body)
        .expect("the index is JSON");
    assert_eq!(served["apiVersion"], "v1");
    assert_eq!(
        served["entries"]["hand"][0]["description"],
        "two lines and no-breakzero-width"
    );
    assert_eq!(served["serverInfo"], json!({}));
    let expected = comparable(&generated, &charts_url);
    let loaded = helm.ok(&["index", &repo]);
    for (what, index) in [("served", &served), ("as Helm loads it", &loaded)] {
        let got = comparable(index, &repo);
        for (name, versions) in expected.as_object().unwrap() {
            assert_eq!(
                &got[name], versions,
                "{name}: the index {what} (left) and helm repo index's (right)"
            );
        }
        assert_eq!(got, expected, "the index {what}: the same charts");
    }

    // Deleted: Helm no longer lists it nor pulls it.
    let r = s.delete(&format!("/api/{tenant}/charts/base/0.9.0"));
    assert_eq!(r.status, 200, "delete: {}", r.text());
    let index = helm.ok(&["index", &repo]);
    assert_eq!(versions(&index, "base"), ["v1.1.0", "1.0.0", "1.0.0-rc.1"]);
    let dest = d.path().join("pulled-after-delete");
    let e = helm
        .run(&["pull", &repo, "base", "0.9.0", dest.to_str().unwrap()])
        .expect_err("a deleted version cannot be pulled");
    assert!(e.contains("0.9.0"), "Helm says which version: {e}");
}
