//! The server's own Helm chart (`deploy/helm/chart-index`), linted and
//! rendered by Helm's own code (helm-python-sdk, as in the Helm client
//! test: `helm lint --strict`, and `Chart.load(...).render(...)` as `helm
//! template` renders, each manifest read back by Helm's YAML reader), and
//! what Kubernetes would be given checked field by field: the probes, the
//! port, the security context against the image's user, the Secret's
//! wiring, the storage claim, the settings.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::{Value, json};

use crate::helm::Helm;

/// The chart's directory.
fn chart_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/helm/chart-index")
}

/// What the chart renders for some values: each template's manifests.
struct Rendered {
    values: Value,
    templates: Value,
}

impl Rendered {
    fn new(helm: &Helm, values: Value) -> Rendered {
        let templates = helm.ok(&["render", chart_dir().to_str().unwrap(), &values.to_string()]);
        Rendered { values, templates }
    }

    /// Every manifest of `kind`.
    fn all(&self, kind: &str) -> Vec<&Value> {
        self.templates
            .as_object()
            .unwrap()
            .values()
            .filter_map(Value::as_array)
            .flatten()
            .filter(|m| m["kind"] == kind)
            .collect()
    }

    /// The one manifest of `kind`.
    fn one(&self, kind: &str) -> &Value {
        let all = self.all(kind);
        assert_eq!(all.len(), 1, "{}: one {kind}: {all:?}", self.values);
        all[0]
    }

    /// The Deployment's pod spec.
    fn pod(&self) -> &Value {
        &self.one("Deployment")["spec"]["template"]["spec"]
    }

    /// The server's container.
    fn container(&self) -> &Value {
        let containers = self.pod()["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 1, "{}", self.values);
        &containers[0]
    }

    /// The container's variable `name` (its entry: `value` or
    /// `valueFrom`), if it has it; panics if it has it twice.
    fn env(&self, name: &str) -> Option<&Value> {
        let env = self.container()["env"].as_array().unwrap();
        let named: Vec<&Value> = env.iter().filter(|e| e["name"] == name).collect();
        assert!(named.len() <= 1, "{name} set twice: {env:?}");
        named.first().copied()
    }

    /// The pod's volume mounted at `path` in the container.
    fn volume_at(&self, path: &str) -> &Value {
        let mount = self.container()["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["mountPath"] == path)
            .unwrap_or_else(|| panic!("{}: nothing mounted at {path}", self.values));
        self.pod()["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == mount["name"])
            .unwrap_or_else(|| panic!("no volume {}", mount["name"]))
    }

    fn notes(&self) -> &str {
        self.templates["chart-index/templates/NOTES.txt"]
            .as_str()
            .unwrap()
    }
}

/// What the tests here are called in a skip's message.
const TEST: &str = "the server's Helm chart test";

/// What the Containerfile says after `instruction ` (the image's `USER`,
/// `EXPOSE`, ...).
fn containerfile(instruction: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/Containerfile");
    let text = std::fs::read_to_string(&path).unwrap();
    let prefix = format!("{instruction} ");
    let lines: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .collect();
    assert_eq!(lines.len(), 1, "one {instruction} in {}", path.display());
    lines[0].trim().to_owned()
}

/// Value sets an operator would use, each linted and rendered.
fn value_sets() -> Vec<Value> {
    vec![
        json!({}),
        json!({"auth": {"basic": {"user": "ci", "password": "pw-1"}}}),
        json!({"auth": {"existingSecret": "creds", "tokenSecret": "tokens"}}),
        json!({"auth": {"basic": {"user": "admin", "password": "pw-2"},
                        "rulesSecret": "tenant-rules"}}),
        json!({"persistence": {"existingClaim": "shared"}, "replicaCount": 3}),
        json!({"persistence": {"accessModes": ["ReadWriteMany"], "storageClass": "-"},
               "replicaCount": 2}),
        json!({"persistence": {"enabled": false}, "cache": {"enabled": false}}),
        json!({"ingress": {"enabled": true, "className": "nginx",
                           "tls": [{"hosts": ["charts.example.org"], "secretName": "tls"}]},
               "settings": {"DEPTH": 1, "ALLOW_OVERWRITE": true, "WATCH_BACKEND": "poll"}}),
    ]
}

#[test]
fn the_servers_chart_lints_clean_and_renders() {
    let d = tempfile::tempdir().unwrap();
    let Some(helm) = Helm::find(d.path(), TEST) else {
        return;
    };
    let dir = chart_dir();
    for values in value_sets() {
        // `--strict`: a warning would be an error. (Infos, such as "icon
        // is recommended", are not.)
        let report = helm.ok(&["lint", dir.to_str().unwrap(), &values.to_string()]);
        assert_eq!(report["total_charts_linted"], 1, "{values}: {report}");
        assert_eq!(report["errors"], json!([]), "{values}: {report}");
        for m in report["messages"].as_array().unwrap() {
            assert!(
                m["severity"].as_u64().unwrap() < 2,
                "{values}: lint says {m}"
            );
        }
        let r = Rendered::new(&helm, values);
        r.one("Deployment");
        r.one("Service");
        // The server's version, the image's tag by default.
        let version = env!("CARGO_PKG_VERSION");
        assert_eq!(
            r.one("Deployment")["metadata"]["labels"]["app.kubernetes.io/version"],
            version,
            "the chart's appVersion is the server's"
        );
        assert_eq!(
            r.container()["image"],
            format!("chart-index:{version}"),
            "{}",
            r.values
        );
    }
}

#[test]
fn the_deployment_probes_listens_and_runs_confined() {
    let d = tempfile::tempdir().unwrap();
    let Some(helm) = Helm::find(d.path(), TEST) else {
        return;
    };
    let r = Rendered::new(&helm, json!({}));
    let c = r.container();

    // One port, the server's default and the image's EXPOSE, named http;
    // the probes and the Service address it by name.
    assert_eq!(containerfile("EXPOSE"), "8080");
    assert_eq!(
        c["ports"],
        json!([{"name": "http", "containerPort": 8080, "protocol": "TCP"}])
    );
    assert_eq!(r.env("PORT").unwrap()["value"], "8080");
    let probe = |name: &str| c[name]["httpGet"].clone();
    assert_eq!(
        probe("livenessProbe"),
        json!({"path": "/health", "port": "http"})
    );
    assert_eq!(
        probe("readinessProbe"),
        json!({"path": "/ready", "port": "http"})
    );
    assert_eq!(
        probe("startupProbe"),
        json!({"path": "/health", "port": "http"})
    );
    // The startup probe waits out a first scan of minutes; the others
    // act within seconds.
    let patience = |name: &str| {
        c[name]["periodSeconds"].as_u64().unwrap() * c[name]["failureThreshold"].as_u64().unwrap()
    };
    assert!(patience("startupProbe") >= 300, "{}", c["startupProbe"]);
    assert!(patience("livenessProbe") <= 60, "{}", c["livenessProbe"]);
    let service = r.one("Service");
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}])
    );
    let pod_labels = &r.one("Deployment")["spec"]["template"]["metadata"]["labels"];
    for (k, v) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&pod_labels[k], v, "the Service selects the pods by {k}");
    }
    assert_eq!(
        service["spec"]["selector"],
        r.one("Deployment")["spec"]["selector"]["matchLabels"]
    );

    // Confined: not root (the image's user), no capability, no privilege
    // escalation, the runtime's seccomp profile, a read-only root file
    // system with a volume wherever the server writes.
    let (uid, gid) = containerfile("USER")
        .split_once(':')
        .map(|(u, g)| (u.parse::<u64>().unwrap(), g.parse::<u64>().unwrap()))
        .unwrap();
    assert_ne!(uid, 0);
    let sc = &c["securityContext"];
    assert_eq!(sc["runAsNonRoot"], true);
    assert_eq!(sc["runAsUser"], uid, "the image's user");
    assert_eq!(sc["runAsGroup"], gid, "the image's group");
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["privileged"], false);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["capabilities"], json!({"drop": ["ALL"]}));
    assert_eq!(sc["seccompProfile"], json!({"type": "RuntimeDefault"}));
    let psc = &r.pod()["securityContext"];
    assert_eq!(psc["runAsNonRoot"], true);
    assert_eq!(
        psc["fsGroup"], gid,
        "the storage volume writable by the group"
    );
    assert_eq!(psc["seccompProfile"], json!({"type": "RuntimeDefault"}));
    assert_eq!(r.pod()["automountServiceAccountToken"], false);
    assert_eq!(r.env("STORAGE_LOCAL_ROOTDIR").unwrap()["value"], "/charts");
    assert!(r.volume_at("/charts")["persistentVolumeClaim"].is_object());
    let cache = r.env("CACHE_DIR").unwrap()["value"].as_str().unwrap();
    assert!(r.volume_at(cache)["emptyDir"].is_object());
    // Longer than the server's 30 s for the requests in flight.
    assert!(r.pod()["terminationGracePeriodSeconds"].as_u64().unwrap() > 30);
    assert!(c["resources"]["requests"]["memory"].is_string());
    assert!(c["resources"]["limits"]["memory"].is_string());

    // The settings, as the server's variables (strings); those the chart
    // sets itself are refused.
    let r = Rendered::new(
        &helm,
        json!({"settings": {"DEPTH": 1, "ALLOW_OVERWRITE": true, "POLL_INTERVAL": "250"}}),
    );
    assert_eq!(r.env("DEPTH").unwrap()["value"], "1");
    assert_eq!(r.env("ALLOW_OVERWRITE").unwrap()["value"], "true");
    assert_eq!(r.env("POLL_INTERVAL").unwrap()["value"], "250");
    let dir = chart_dir();
    for var in [
        "PORT",
        "STORAGE_LOCAL_ROOTDIR",
        "BASIC_AUTH_PASS",
        "AUTH_RULES_FILE",
    ] {
        let values = json!({"settings": {var: "x"}}).to_string();
        let e = helm
            .run(&["render", dir.to_str().unwrap(), &values])
            .expect_err(var);
        assert!(
            e.contains(&format!("settings.{var}: the chart sets")),
            "{var}: {e}"
        );
    }
}

#[test]
fn credentials_come_from_a_secret() {
    let d = tempfile::tempdir().unwrap();
    let Some(helm) = Helm::find(d.path(), TEST) else {
        return;
    };
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let secret_ref =
        |r: &Rendered, var: &str| r.env(var).unwrap()["valueFrom"]["secretKeyRef"].clone();

    // None: no Secret, no credentials in the environment; the notes say
    // what is open.
    let r = Rendered::new(&helm, json!({}));
    assert!(r.all("Secret").is_empty());
    assert!(r.env("BASIC_AUTH_USER").is_none() && r.env("BASIC_AUTH_PASS").is_none());
    assert!(
        r.notes().contains("No credentials are configured"),
        "{}",
        r.notes()
    );

    // The chart's own Secret: the variables from it, the password nowhere
    // else; a new password changes the pods (their annotation).
    let password = "pw-Secret-Q7";
    let values = |password: &str| json!({"auth": {"basic": {"user": "ci", "password": password}}});
    let r = Rendered::new(&helm, values(password));
    let secret = r.one("Secret");
    let name = secret["metadata"]["name"].as_str().unwrap();
    assert_eq!(
        secret["data"],
        json!({"BASIC_AUTH_USER": b64("ci"), "BASIC_AUTH_PASS": b64(password)})
    );
    assert_eq!(
        secret_ref(&r, "BASIC_AUTH_USER"),
        json!({"name": name, "key": "BASIC_AUTH_USER"})
    );
    assert_eq!(
        secret_ref(&r, "BASIC_AUTH_PASS"),
        json!({"name": name, "key": "BASIC_AUTH_PASS"})
    );
    let deployment = r.one("Deployment").to_string();
    assert!(
        !deployment.contains(password) && !deployment.contains(&b64(password)),
        "the password is in the Secret only"
    );
    let checksum = |r: &Rendered| {
        r.one("Deployment")["spec"]["template"]["metadata"]["annotations"]["checksum/secret"]
            .clone()
    };
    let before = checksum(&r);
    assert!(before.is_string());
    assert_ne!(checksum(&Rendered::new(&helm, values("another"))), before);
    assert!(!r.notes().contains("No credentials"));

    // An existing Secret, with keys of its own: no Secret made.
    let r = Rendered::new(
        &helm,
        json!({"auth": {"existingSecret": "creds", "existingSecretUserKey": "user",
                        "existingSecretPasswordKey": "password",
                        "basic": {"user": "ignored", "password": "ignored"}}}),
    );
    assert!(r.all("Secret").is_empty());
    assert_eq!(
        secret_ref(&r, "BASIC_AUTH_USER"),
        json!({"name": "creds", "key": "user"})
    );
    assert_eq!(
        secret_ref(&r, "BASIC_AUTH_PASS"),
        json!({"name": "creds", "key": "password"})
    );
    assert!(!r.one("Deployment").to_string().contains("ignored"));

    // Bearer tokens, and access rules: an existing Secret's key as the
    // file, the whole Secret mounted read-only (a subPath mount would
    // never see the Secret's updates, on which the server reloads the
    // rules).
    for (values, var, secret, key) in [
        (
            json!({"auth": {"tokenSecret": "tokens"}}),
            "AUTH_TOKEN_FILE",
            "tokens",
            "tokens",
        ),
        (
            json!({"auth": {"rulesSecret": "tenant-rules", "rulesSecretKey": "access"}}),
            "AUTH_RULES_FILE",
            "tenant-rules",
            "access",
        ),
    ] {
        let r = Rendered::new(&helm, values);
        let file = r.env(var).unwrap()["value"].as_str().unwrap();
        let (dir, file_key) = file.rsplit_once('/').unwrap();
        assert_eq!(file_key, key);
        assert_eq!(r.volume_at(dir)["secret"]["secretName"], secret);
        let mount = r.container()["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["mountPath"] == dir)
            .unwrap();
        assert_eq!(mount["readOnly"], true);
        assert!(mount.get("subPath").is_none(), "{mount}");
        assert!(
            !r.notes().contains("No credentials are configured"),
            "{var}"
        );
    }
    let r = Rendered::new(&helm, json!({}));
    assert!(r.env("AUTH_TOKEN_FILE").is_none() && r.env("AUTH_RULES_FILE").is_none());

    // Half a pair is refused, saying what is missing.
    let dir = chart_dir();
    for (values, says) in [
        (
            json!({"auth": {"basic": {"user": "ci"}}}),
            "auth.basic.user needs auth.basic.password",
        ),
        (
            json!({"auth": {"basic": {"password": "pw"}}}),
            "auth.basic.password needs auth.basic.user",
        ),
    ] {
        let e = helm
            .run(&["render", dir.to_str().unwrap(), &values.to_string()])
            .expect_err("half a pair");
        assert!(e.contains(says), "{values}: {e}");
    }
}

#[test]
fn storage_is_a_claim_of_the_charts_or_an_existing_one() {
    let d = tempfile::tempdir().unwrap();
    let Some(helm) = Helm::find(d.path(), TEST) else {
        return;
    };
    let strategy = |r: &Rendered| r.one("Deployment")["spec"]["strategy"].clone();
    let claim = |r: &Rendered| r.volume_at("/charts")["persistentVolumeClaim"]["claimName"].clone();

    // The chart's claim: ReadWriteOnce, so a pod replaced is stopped
    // before the next starts (which may be on another node).
    let r = Rendered::new(&helm, json!({}));
    let pvc = r.one("PersistentVolumeClaim");
    assert_eq!(claim(&r), pvc["metadata"]["name"]);
    assert_eq!(pvc["spec"]["accessModes"], json!(["ReadWriteOnce"]));
    assert_eq!(pvc["spec"]["resources"]["requests"]["storage"], "8Gi");
    assert!(
        pvc["spec"].get("storageClassName").is_none(),
        "the cluster's default class"
    );
    assert_eq!(strategy(&r), json!({"type": "Recreate"}));
    assert!(!r.notes().contains("WARNING"));

    // Replicas over it on one node only: said in the notes.
    let r = Rendered::new(&helm, json!({"replicaCount": 3}));
    assert_eq!(r.one("Deployment")["spec"]["replicas"], 3);
    assert!(
        r.notes()
            .contains("WARNING: 3 replicas share a ReadWriteOnce claim"),
        "{}",
        r.notes()
    );

    // ReadWriteMany, for replicas on several nodes: rolling updates.
    let r = Rendered::new(
        &helm,
        json!({"replicaCount": 2, "persistence": {"accessModes": ["ReadWriteMany"],
                                                  "storageClass": "-"}}),
    );
    let pvc = r.one("PersistentVolumeClaim");
    assert_eq!(pvc["spec"]["accessModes"], json!(["ReadWriteMany"]));
    assert_eq!(pvc["spec"]["storageClassName"], "", "\"-\": no class");
    assert_eq!(
        strategy(&r),
        Value::Null,
        "Kubernetes' default, RollingUpdate"
    );
    assert!(!r.notes().contains("WARNING"));

    // An existing claim: none made, that one mounted.
    let r = Rendered::new(
        &helm,
        json!({"replicaCount": 2, "persistence": {"existingClaim": "shared-charts"}}),
    );
    assert!(r.all("PersistentVolumeClaim").is_empty());
    assert_eq!(claim(&r), "shared-charts");
    assert_eq!(strategy(&r), Value::Null);
    assert!(
        r.notes().contains("on the claim shared-charts"),
        "{}",
        r.notes()
    );

    // No persistence: an emptyDir, said to be lost with the pod.
    let r = Rendered::new(&helm, json!({"persistence": {"enabled": false}}));
    assert!(r.all("PersistentVolumeClaim").is_empty());
    assert!(r.volume_at("/charts")["emptyDir"].is_object());
    assert!(r.notes().contains("lost with the pod"), "{}", r.notes());

    // A strategy given is kept.
    let r = Rendered::new(&helm, json!({"strategy": {"type": "RollingUpdate"}}));
    assert_eq!(strategy(&r), json!({"type": "RollingUpdate"}));
}
