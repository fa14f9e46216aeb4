//! The server's container image (`deploy/Containerfile`, built by
//! `deploy/build-image.sh`), run as an operator runs it: podman with runc,
//! the host's network, a storage directory as the volume, settings and
//! credentials from the environment, the root file system read-only and
//! every capability dropped (as the Helm chart runs it). A chart on the
//! storage before the start is listed; one uploaded is listed (index.yaml
//! and /api), pulled byte for byte and stored by the image's user, not
//! root; `podman stop` (the image's stop signal) ends it gracefully with
//! status 0; a new container over the same storage lists both.
//!
//! The image is `SPECWATCH_CONTAINER_IMAGE` (an ID or a name: what
//! build-image.sh prints). Without it, or without podman, the tests say
//! loudly that they skip; where `SPECWATCH_REQUIRE_CONTAINER` is set
//! (`.ci/run` sets it once it has built the image) they fail instead.
//! podman reads `CONTAINERS_CONF`, else `deploy/containers.conf` (no
//! ulimits of its own: a sandbox such as CI's refuses them).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::Value;

use crate::auth::basic;
use crate::charts::{chart, nv, sha256};
use crate::server::Server;
use testkit::process::{self, Process};
use testkit::skip;

const USER: &str = "ci-deployer";
const PASSWORD: &str = "pw-Container-42";

/// A podman command: runc, and the containers.conf that sets no ulimits
/// unless `CONTAINERS_CONF` names another.
fn podman(args: &[&str]) -> Command {
    let mut cmd = Command::new("podman");
    if std::env::var_os("CONTAINERS_CONF").is_none() {
        cmd.env(
            "CONTAINERS_CONF",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/containers.conf"),
        );
    }
    cmd.args(["--runtime", "runc"]).args(args);
    cmd
}

/// Runs `podman ARGS` to its end: its stdout, or what it said.
fn run(args: &[&str]) -> Result<String, String> {
    let out = process::output(&format!("podman {}", args.join(" ")), podman(args));
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "podman {}: {}: {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The image under test, described by `podman image inspect`; `None`
/// once it has said why `test` skips (a panic instead where
/// `SPECWATCH_REQUIRE_CONTAINER` is set).
fn image(test: &str) -> Option<(String, Value)> {
    let why = match std::env::var("SPECWATCH_CONTAINER_IMAGE") {
        Err(_) => "SPECWATCH_CONTAINER_IMAGE names no image (chart-index/deploy/build-image.sh \
                   builds one and prints its ID)"
            .to_owned(),
        // Spawned directly: `process::output` panics where podman is not
        // installed.
        Ok(image) => match podman(&["image", "inspect", &image]).output() {
            Err(e) => format!("no podman ({e}; Debian: apt-get install podman runc)"),
            Ok(out) if !out.status.success() => format!(
                "podman image inspect {image}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Ok(out) => {
                let mut described: Value = serde_json::from_slice(&out.stdout)
                    .unwrap_or_else(|e| panic!("podman image inspect {image}: not JSON: {e}"));
                return Some((image, described[0].take()));
            }
        },
    };
    if std::env::var_os("SPECWATCH_REQUIRE_CONTAINER").is_some() {
        panic!("{test}: the image is required here (SPECWATCH_REQUIRE_CONTAINER): {why}");
    }
    skip(&format!(
        "{test}: {why} (set SPECWATCH_REQUIRE_CONTAINER=1 to make this a failure)"
    ));
    None
}

/// The image's user and group: numeric (so that Kubernetes'
/// `runAsNonRoot` can check them), and not root.
fn user_ids(described: &Value) -> (u32, u32) {
    let user = described["Config"]["User"].as_str().unwrap_or_default();
    let (uid, gid) = user
        .split_once(':')
        .and_then(|(u, g)| Some((u.parse::<u32>().ok()?, g.parse::<u32>().ok()?)))
        .unwrap_or_else(|| panic!("USER {user:?}: not UID:GID, numeric"));
    assert_ne!(uid, 0, "the image's user is root");
    assert_ne!(gid, 0, "the image's group is root's");
    (uid, gid)
}

#[test]
fn the_image_is_described_for_its_runtime() {
    let Some((image, described)) = image("the image test") else {
        return;
    };
    let config = &described["Config"];
    eprintln!("image {image}: {} bytes, {config}", described["Size"]);
    user_ids(&described);
    assert!(
        config["ExposedPorts"]["8080/tcp"].is_object(),
        "EXPOSE 8080: {config}"
    );
    assert_eq!(config["StopSignal"], "SIGTERM");
    assert_eq!(
        config["Entrypoint"],
        serde_json::json!(["/usr/local/bin/chart-index"])
    );
    assert!(config["Volumes"]["/charts"].is_object(), "{config}");
    assert!(
        config["Env"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e == "STORAGE_LOCAL_ROOTDIR=/charts"),
        "{config}"
    );
    let version = env!("CARGO_PKG_VERSION");
    for (what, map) in [
        ("label", &described["Labels"]),
        ("annotation", &described["Annotations"]),
    ] {
        assert_eq!(
            map["org.opencontainers.image.version"], version,
            "the {what} version: {map}"
        );
        for key in [
            "org.opencontainers.image.source",
            "org.opencontainers.image.revision",
        ] {
            assert!(
                map[key].as_str().is_some_and(|s| !s.is_empty()),
                "the {what} {key}: {map}"
            );
        }
    }
    // The binary without its debug information (with it, 56 MB).
    let size = described["Size"].as_u64().unwrap();
    assert!(size < 24 << 20, "{size} bytes");
}

/// A container of `image` over `storage`, attached (its output is the
/// server's): a [`Server`] once it has said `LISTENING`. Removed when
/// dropped.
struct Container {
    name: String,
    server: Option<Server>,
}

impl Container {
    fn start(image: &str, name: &str, storage: &Path) -> Container {
        let volume = format!("{}:/charts", storage.display());
        let cmd = podman(&[
            "run",
            "--rm",
            "--name",
            name,
            "--pull=never",
            "--network",
            "host",
            // As the Helm chart runs it.
            "--read-only",
            "--read-only-tmpfs=false",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--volume",
            &volume,
            // Any free port (the host's network is shared): the server
            // says which. Its address is the image's default, 0.0.0.0.
            "--env",
            "PORT=0",
            "--env",
            &format!("BASIC_AUTH_USER={USER}"),
            "--env",
            &format!("BASIC_AUTH_PASS={PASSWORD}"),
            "--env",
            "AUTH_ANONYMOUS_GET=true",
            image,
        ]);
        // Removed on drop, even if it never said LISTENING.
        let mut container = Container {
            name: name.to_owned(),
            server: None,
        };
        let mut server = Server::from_process(name, Process::start(name, cmd));
        let port = server
            .addr
            .strip_prefix("0.0.0.0:")
            .unwrap_or_else(|| panic!("{name}: listening on {}, not 0.0.0.0", server.addr))
            .to_owned();
        server.addr = format!("127.0.0.1:{port}");
        container.server = Some(server);
        container
    }

    fn server(&self) -> &Server {
        self.server.as_ref().unwrap()
    }

    /// The main process's `/proc/PID/status` lines `Name:\t...`.
    fn status(&self) -> Vec<String> {
        let pid = run(&["inspect", "--format", "{{.State.Pid}}", &self.name]).unwrap();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_else(|e| panic!("{}: /proc/{pid}/status: {e}", self.name));
        status.lines().map(str::to_owned).collect()
    }

    /// `podman stop`: the image's stop signal; the server must stop by
    /// itself (SIGKILL comes 10 s later: status 137) with status 0.
    fn stop(mut self) {
        let started = Instant::now();
        run(&["stop", "--time", "10", &self.name]).unwrap();
        let mut server = self.server.take().unwrap();
        server.wait_log("chart_index: stopped", |l| l == "chart_index: stopped");
        let status = server.wait_exit();
        eprintln!(
            "{}: stopped in {:?}: {status}",
            self.name,
            started.elapsed()
        );
        assert_eq!(status.code(), Some(0), "{}: a graceful stop", self.name);
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        // The attached podman first (SIGTERM, which it passes on), then
        // the container, if a failure left it.
        drop(self.server.take());
        let _ = podman(&["rm", "--force", "--time", "0", &self.name]).output();
    }
}

/// `dir` (and what is in it) owned by `uid`:`gid`.
fn chown_all(dir: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::chown(dir, Some(uid), Some(gid))
        .unwrap_or_else(|e| panic!("chown {}: {e}", dir.display()));
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            chown_all(&path, uid, gid);
        } else {
            std::os::unix::fs::chown(&path, Some(uid), Some(gid)).unwrap();
        }
    }
}

#[test]
fn the_image_serves_uploads_lists_and_pulls_then_stops_gracefully() {
    let Some((image, described)) = image("the container test") else {
        return;
    };
    let started = Instant::now();
    let (uid, gid) = user_ids(&described);

    // The storage: a tenant with a chart already there, owned by the
    // image's user (as a volume would be).
    let d = tempfile::tempdir().unwrap();
    let storage: PathBuf = d.path().join("charts");
    std::fs::create_dir_all(storage.join("org")).unwrap();
    let pre = chart("pre", "1.0.0");
    std::fs::write(storage.join("org/pre-1.0.0.tgz"), &pre).unwrap();
    chown_all(&storage, uid, gid);

    let name = format!("chart-index-test-{}", std::process::id());
    let c = Container::start(&image, &name, &storage);
    let s = c.server();

    // Not root, no capability, no privilege to gain.
    let status = c.status();
    for (field, want) in [
        ("Uid", format!("{uid}\t{uid}\t{uid}\t{uid}")),
        ("Gid", format!("{gid}\t{gid}\t{gid}\t{gid}")),
        ("CapEff", "0000000000000000".to_owned()),
        ("CapPrm", "0000000000000000".to_owned()),
        ("NoNewPrivs", "1".to_owned()),
    ] {
        let line = status
            .iter()
            .find(|l| l.starts_with(&format!("{field}:")))
            .unwrap_or_else(|| panic!("no {field} in {status:?}"));
        assert_eq!(line[field.len() + 1..].trim(), want, "{field}");
    }

    assert_eq!(s.get("/health").status, 200);
    let (r, l) = s.index("org");
    let l = l.unwrap_or_else(|e| panic!("{e}: {}", r.text()));
    assert_eq!(
        l.get(&nv("pre", "1.0.0")).map(|c| c.digest.as_str()),
        Some(sha256(&pre).as_str()),
        "the chart on the storage before the start is listed: {l:?}"
    );

    // Uploaded: refused without the credentials from the environment,
    // stored with them.
    let up = chart("up", "2.0.0");
    let r = s.post("/api/org/charts", &up);
    assert_eq!(r.status, 401, "{}", r.text());
    let credentials = basic(&format!("{USER}:{PASSWORD}"));
    let r = s.send("POST", "/api/org/charts", &[&credentials], &up);
    assert_eq!(r.status, 201, "{}", r.text());
    assert!(r.text().contains("\"indexed\":true"), "{}", r.text());

    // Listed: index.yaml and the API.
    let (r, l) = s.index("org");
    let l = l.unwrap_or_else(|e| panic!("{e}: {}", r.text()));
    let listed = &l[&nv("up", "2.0.0")];
    assert_eq!(listed.digest, sha256(&up));
    assert_eq!(listed.urls, ["charts/up-2.0.0.tgz"]);
    let r = s.get("/api/org/charts");
    assert_eq!(r.status, 200, "{}", r.text());
    let api = r.json();
    assert_eq!(api["up"][0]["version"], "2.0.0", "{api}");
    assert_eq!(api["up"][0]["digest"], sha256(&up), "{api}");
    assert_eq!(api["pre"][0]["version"], "1.0.0", "{api}");

    // Pulled byte for byte.
    let r = s.get("/org/charts/up-2.0.0.tgz");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.body == up, "the package comes back byte for byte");

    // On the storage, written by the image's user; no temporary file left.
    let stored = storage.join("org/up-2.0.0.tgz");
    assert!(std::fs::read(&stored).unwrap() == up);
    let meta = std::fs::metadata(&stored).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid()),
        (uid, gid),
        "stored by the image's user"
    );
    let names: Vec<String> = std::fs::read_dir(storage.join("org"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.starts_with(".upload-")),
        "{names:?}"
    );

    c.stop();

    // A new container over the same storage lists both.
    let c = Container::start(&image, &format!("{name}-again"), &storage);
    let (r, l) = c.server().index("org");
    let l = l.unwrap_or_else(|e| panic!("{e}: {}", r.text()));
    assert!(
        l.contains_key(&nv("pre", "1.0.0")) && l.contains_key(&nv("up", "2.0.0")),
        "{l:?}"
    );
    c.stop();
    eprintln!("the container test took {:?}", started.elapsed());
}
