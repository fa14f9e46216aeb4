//! The `chart_index` example, a Helm chart repository whose index follows
//! its storage directory through change batches only. Run against the built
//! example binary over HTTP (a minimal client on `TcpStream`). Nothing
//! sleeps: every wait has a deadline and says what it awaited, and waits
//! for the server's next stderr line between looks at `index.yaml` (the
//! server says `index: seq N: K changes` after applying each batch, and
//! its index changes at no other time).
#![cfg(unix)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use flate2::Compression;
use flate2::write::GzEncoder;
use sha2::{Digest, Sha256};
use yaml_rust2::YamlLoader;

/// How long any wait may take before the test fails.
const WAIT: Duration = Duration::from_secs(20);
/// What a server prints on stderr before each of its roots' backend.
const ROOT_LINE: &str = "chart_index: root: ";

/// The example binary cargo built beside this test.
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().unwrap().parent().unwrap();
    let bin = profile.join("examples").join("chart_index");
    assert!(
        bin.exists(),
        "the chart_index example is not built at {} (cargo test builds examples; \
         with --test chart_index alone, run cargo build --example chart_index first)",
        bin.display()
    );
    bin
}

// ---------------------------------------------------------------------------
// A running server

/// A server's stderr, every line kept, with a condition variable to wait
/// for the next one.
#[derive(Default)]
struct Log {
    state: Mutex<LogState>,
    grew: Condvar,
}

#[derive(Default)]
struct LogState {
    lines: Vec<String>,
    /// The server closed its stderr (it exited).
    closed: bool,
}

impl Log {
    fn push(&self, line: String) {
        self.state.lock().unwrap().lines.push(line);
        self.grew.notify_all();
    }

    fn close(&self) {
        self.state.lock().unwrap().closed = true;
        self.grew.notify_all();
    }

    fn len(&self) -> usize {
        self.state.lock().unwrap().lines.len()
    }

    /// Waits until there are more than `seen` lines, the stream closed or
    /// `deadline` passed; returns the lines from `seen` on and whether the
    /// stream is closed.
    fn wait_beyond(&self, seen: usize, deadline: Instant) -> (Vec<String>, bool) {
        let mut st = self.state.lock().unwrap();
        while st.lines.len() <= seen && !st.closed {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            st = self.grew.wait_timeout(st, deadline - now).unwrap().0;
        }
        (st.lines[seen.min(st.lines.len())..].to_vec(), st.closed)
    }
}

/// A `chart_index` process; killed when dropped, so a failing test leaves
/// no server behind.
struct Server {
    child: Child,
    label: String,
    /// `127.0.0.1:PORT`.
    addr: String,
    /// The server's stderr, line by line (also echoed to the test's).
    log: Arc<Log>,
    /// Lines before this one were matched (or passed over) by `wait_log`.
    cursor: AtomicUsize,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts a server over `storage` on a free port and waits for its
    /// `LISTENING` line.
    fn start(label: &str, storage: &Path, args: &[&str]) -> Server {
        let mut child = Command::new(example())
            .arg("--storage")
            .arg(storage)
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the chart_index example");
        let log = Arc::new(Log::default());
        let err = BufReader::new(child.stderr.take().unwrap());
        {
            let label = label.to_owned();
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for line in err.lines() {
                    let Ok(line) = line else { break };
                    eprintln!("[{label}] {line}");
                    log.push(line);
                }
                log.close();
            });
        }
        let (tx, first) = crossbeam_channel::bounded(1);
        let mut out = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = out.read_line(&mut line);
            let _ = tx.send(line);
            // Keep reading so the server never blocks on a full pipe.
            let _ = std::io::copy(&mut out, &mut std::io::sink());
        });
        let mut server = Server {
            child,
            label: label.to_owned(),
            addr: String::new(),
            log,
            cursor: AtomicUsize::new(0),
        };
        let line = first
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("{label}: no LISTENING line within {WAIT:?}"));
        let addr = line
            .trim_end()
            .strip_prefix("LISTENING http://")
            .unwrap_or_else(|| panic!("{label}: first stdout line is not LISTENING: {line:?}"));
        server.addr = addr.to_owned();
        server
    }

    fn get(&self, target: &str) -> Resp {
        http(&self.addr, "GET", target.as_bytes(), Body::None)
    }

    fn post(&self, target: &str, body: &[u8]) -> Resp {
        http(&self.addr, "POST", target.as_bytes(), Body::Length(body))
    }

    fn delete(&self, target: &str) -> Resp {
        http(&self.addr, "DELETE", target.as_bytes(), Body::None)
    }

    /// The index of `tenant` (`""` for the root) as it is now.
    fn index(&self, tenant: &str) -> (Resp, Result<Listing, String>) {
        let r = self.get(&index_path(tenant));
        let listing = if r.status == 200 {
            parse_index(&r.text())
        } else {
            Err(format!("status {}", r.status))
        };
        (r, listing)
    }

    /// Asks `GET target` until `done` accepts the answer: again after each
    /// line the server prints (it prints one after applying each batch,
    /// and its index changes at no other time). Panics at the deadline, or
    /// when the server exits, saying what was awaited and what it last
    /// answered.
    fn wait_until(&self, target: &str, what: &str, done: impl Fn(&Resp) -> bool) -> Resp {
        let deadline = Instant::now() + WAIT;
        loop {
            // Counted before asking: a line printed meanwhile wakes the wait.
            let seen = self.log.len();
            let r = self.get(target);
            if done(&r) {
                return r;
            }
            let (_, closed) = self.log.wait_beyond(seen, deadline);
            if closed || Instant::now() >= deadline {
                panic!(
                    "{}: {} for {what} (GET {target} on {}); last answer: {} {}",
                    self.label,
                    if closed {
                        "the server exited while waiting".to_owned()
                    } else {
                        format!("waited {WAIT:?}")
                    },
                    self.addr,
                    r.status,
                    r.text()
                );
            }
        }
    }

    /// Waits until `tenant`'s index satisfies `cond`, and returns it.
    fn wait_index(&self, tenant: &str, what: &str, cond: impl Fn(&Listing) -> bool) -> Listing {
        let r = self.wait_until(&index_path(tenant), what, |r| {
            r.status == 200 && parse_index(&r.text()).is_ok_and(|l| cond(&l))
        });
        parse_index(&r.text()).unwrap()
    }

    /// Waits until `GET target` answers `status`.
    fn wait_status(&self, target: &str, status: u16, what: &str) -> Resp {
        self.wait_until(target, what, |r| r.status == status)
    }

    /// Waits for a stderr line that `pred` accepts, after those matched
    /// by earlier calls.
    fn wait_log(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        let mut from = self.cursor.load(Ordering::SeqCst);
        let mut seen = Vec::new();
        loop {
            let (lines, closed) = self.log.wait_beyond(from, deadline);
            for (i, l) in lines.iter().enumerate() {
                if pred(l) {
                    self.cursor.store(from + i + 1, Ordering::SeqCst);
                    return l.clone();
                }
            }
            from += lines.len();
            seen.extend(lines);
            if closed || Instant::now() >= deadline {
                panic!(
                    "{}: {} for a log line {what}; saw {seen:#?}",
                    self.label,
                    if closed {
                        "the server exited while waiting".to_owned()
                    } else {
                        format!("waited {WAIT:?}")
                    },
                );
            }
        }
    }

    /// The line saying how the storage root is watched (`chart_index:
    /// root: ...`), without its prefix.
    fn root_line(&self) -> String {
        self.wait_log("saying how the root is watched", |l| {
            l.starts_with(ROOT_LINE)
        })[ROOT_LINE.len()..]
            .to_owned()
    }
}

fn index_path(tenant: &str) -> String {
    if tenant.is_empty() {
        "/index.yaml".into()
    } else {
        format!("/{tenant}/index.yaml")
    }
}

// ---------------------------------------------------------------------------
// A minimal HTTP/1.1 client

struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn seq(&self) -> u64 {
        self.header("X-Index-Seq")
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no X-Index-Seq in {:?}", self.headers))
    }
}

enum Body<'a> {
    None,
    Length(&'a [u8]),
    Chunked(&'a [u8]),
}

/// One request on a new connection (`Connection: close`). The target is
/// sent as given, byte for byte. The body is written from another thread
/// while the answer is read, so a server that answers before reading it
/// (413) is seen as it answers.
fn http(addr: &str, method: &str, target: &[u8], body: Body<'_>) -> Resp {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(WAIT)).unwrap();
    let mut out = Vec::new();
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(target);
    write!(out, " HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n").unwrap();
    match body {
        Body::None => out.extend_from_slice(b"\r\n"),
        Body::Length(b) => {
            write!(out, "Content-Length: {}\r\n\r\n", b.len()).unwrap();
            out.extend_from_slice(b);
        }
        Body::Chunked(b) => {
            out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
            for c in b.chunks(64 << 10) {
                write!(out, "{:x}\r\n", c.len()).unwrap();
                out.extend_from_slice(c);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
        }
    }
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        // A server that refuses a body may close before reading it all.
        let _ = w.write_all(&out);
    });
    let mut raw = Vec::new();
    if let Err(e) = s.read_to_end(&mut raw) {
        assert!(
            !raw.is_empty(),
            "{method} {}: no answer: {e}",
            String::from_utf8_lossy(target)
        );
    }
    let _ = writer.join();
    parse_response(&raw, method == "HEAD").unwrap_or_else(|e| {
        panic!(
            "{method} {}: bad answer ({e}): {:?}",
            String::from_utf8_lossy(target),
            String::from_utf8_lossy(&raw)
        )
    })
}

fn parse_response(raw: &[u8], head_only: bool) -> Result<Resp, String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of head")?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|e| e.to_string())?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().ok_or("empty")?;
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or("bad status line")?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    let chunked = headers.iter().any(|(n, v)| {
        n.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    if chunked {
        let mut plain = Vec::new();
        let mut rest = &body[..];
        loop {
            let eol = rest
                .windows(2)
                .position(|w| w == b"\r\n")
                .ok_or("bad chunk")?;
            let size = usize::from_str_radix(std::str::from_utf8(&rest[..eol]).unwrap_or(""), 16)
                .map_err(|e| e.to_string())?;
            rest = &rest[eol + 2..];
            if size == 0 {
                break;
            }
            plain.extend_from_slice(&rest[..size]);
            rest = &rest[size + 2..];
        }
        body = plain;
    } else if let Some((_, len)) = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
    {
        let len: usize = len.parse().map_err(|_| "bad content-length")?;
        if body.len() != len && !head_only {
            return Err(format!(
                "body of {} bytes, content-length {len}",
                body.len()
            ));
        }
    }
    Ok(Resp {
        status,
        headers,
        body,
    })
}

// ---------------------------------------------------------------------------
// Charts and indexes

/// A gzip'd tar archive of `files`.
fn tgz(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut b = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    for (path, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(1_700_000_000);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, path, &data[..]).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

/// A package whose Chart.yaml is `chart_yaml`, under `dir/`.
fn package(dir: &str, chart_yaml: &str) -> Vec<u8> {
    tgz(&[
        (format!("{dir}/Chart.yaml"), chart_yaml.as_bytes().to_vec()),
        (format!("{dir}/values.yaml"), b"replicas: 1\n".to_vec()),
        (
            format!("{dir}/templates/configmap.yaml"),
            b"kind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n".to_vec(),
        ),
    ])
}

/// A valid chart package.
fn chart(name: &str, version: &str) -> Vec<u8> {
    package(
        name,
        &format!("apiVersion: v2\nname: {name}\nversion: {version}\ndescription: chart {name}\n"),
    )
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// One listed version.
#[derive(Clone, Debug, PartialEq)]
struct Listed {
    digest: String,
    urls: Vec<String>,
    created: String,
}

/// An index: (name, version) -> what it lists.
type Listing = BTreeMap<(String, String), Listed>;

fn nv(name: &str, version: &str) -> (String, String) {
    (name.to_owned(), version.to_owned())
}

/// Parses a Helm index.yaml, checking its shape.
fn parse_index(text: &str) -> Result<Listing, String> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| e.to_string())?;
    let doc = docs.first().ok_or("empty document")?;
    if doc["apiVersion"].as_str() != Some("v1") {
        return Err("apiVersion is not v1".into());
    }
    doc["generated"].as_str().ok_or("no generated")?;
    let entries = doc["entries"].as_hash().ok_or("entries is not a mapping")?;
    let mut listing = Listing::new();
    for (name, versions) in entries {
        let name = name.as_str().ok_or("chart name is not a string")?;
        for v in versions.as_vec().ok_or("versions are not a list")? {
            let field = |k: &str| {
                v[k].as_str()
                    .map(str::to_owned)
                    .ok_or(format!("{name}: no {k}"))
            };
            if field("name")? != name {
                return Err(format!("{name}: entry named {:?}", field("name")));
            }
            let urls = v["urls"]
                .as_vec()
                .ok_or(format!("{name}: no urls"))?
                .iter()
                .map(|u| u.as_str().map(str::to_owned).ok_or("url is not a string"))
                .collect::<Result<Vec<_>, _>>()?;
            let listed = Listed {
                digest: field("digest")?,
                urls,
                created: field("created")?,
            };
            listing.insert(nv(name, &field("version")?), listed);
        }
    }
    Ok(listing)
}

/// Every path below `dir` (links not followed) with its content (files),
/// link target (links) or nothing (directories).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let v = if m.file_type().is_symlink() {
                std::fs::read_link(&p)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes()
            } else if m.is_dir() {
                todo.push(p.clone());
                b"<dir>".to_vec()
            } else {
                std::fs::read(&p).unwrap()
            };
            out.insert(p, v);
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

// ---------------------------------------------------------------------------
// Tests

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
        ("GET", "/api/org/charts", 405),
        ("GET", "/api/org/charts/mychart/1.0.0", 405),
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
        r.text().contains("entries: {}"),
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
    let mut noise = Vec::with_capacity(2 << 20);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while noise.len() < 2 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        noise.extend_from_slice(&x.to_le_bytes());
    }
    let big = tgz(&[
        (
            "big/Chart.yaml".to_owned(),
            b"apiVersion: v2\nname: big\nversion: 1.0.0\n".to_vec(),
        ),
        ("big/blob.bin".to_owned(), noise),
    ]);
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

// ---------------------------------------------------------------------------
// Backends, and replicas sharing one storage directory

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
        (&["--backend"], "--backend needs a value"),
    ] {
        let out = Command::new(example())
            .arg("--storage")
            .arg(base.join("refused"))
            .args(["--listen", "256.0.0.1:1"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?} says {says:?}: {err}");
    }
}

/// A FUSE bind mount of a directory (`bindfs`): writes to the directory
/// itself are what another host's writes look like through a shared
/// mount (no event on the mount). Unmounted on drop. (As in
/// tests/backends.rs.)
struct BindMount {
    mnt: PathBuf,
}

impl BindMount {
    fn mount(src: &Path, mnt: &Path) -> Result<BindMount, String> {
        let out = Command::new("bindfs")
            .arg(src)
            .arg(mnt)
            .output()
            .map_err(|e| format!("cannot run bindfs ({e}); install it (Debian: bindfs)"))?;
        if !out.status.success() {
            return Err(format!(
                "bindfs {} {} failed: {}",
                src.display(),
                mnt.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(BindMount {
            mnt: mnt.to_path_buf(),
        })
    }
}

impl Drop for BindMount {
    fn drop(&mut self) {
        let _ = Command::new("fusermount")
            .args(["-u", "-z"])
            .arg(&self.mnt)
            .status();
    }
}

/// Mounts `src` on `mnt`, or says loudly why not: a failure when
/// `SPECWATCH_REQUIRE_FUSE` is set (CI installs bindfs and sets it), else
/// a skip.
fn bind_mount(src: &Path, mnt: &Path) -> Option<BindMount> {
    match BindMount::mount(src, mnt) {
        Ok(m) => Some(m),
        Err(why) if std::env::var_os("SPECWATCH_REQUIRE_FUSE").is_some() => {
            panic!("FUSE is required here (SPECWATCH_REQUIRE_FUSE) and cannot be mounted: {why}")
        }
        Err(why) => {
            eprintln!(
                "\n*** SKIPPED: the FUSE test cannot mount: {why}\n\
                 *** (set SPECWATCH_REQUIRE_FUSE=1 to make this a failure)\n"
            );
            None
        }
    }
}

/// How long each replica took to show a change, from the write.
#[derive(Default)]
struct Timings(Vec<(String, Duration)>);

impl Timings {
    /// Waits, on every server at once, until `tenant`'s index satisfies
    /// `cond`; records how long after `t0` each did, marking the replicas
    /// other than `writer` (the one that made the change, if one did).
    fn converge(
        &mut self,
        what: &str,
        writer: Option<&str>,
        t0: Instant,
        servers: &[&Server],
        tenant: &str,
        cond: impl Fn(&Listing) -> bool + Sync,
    ) -> Vec<Listing> {
        let results: Vec<(Listing, Duration)> = std::thread::scope(|scope| {
            let waits: Vec<_> = servers
                .iter()
                .map(|s| {
                    let cond = &cond;
                    scope.spawn(move || {
                        let l = s.wait_index(tenant, what, cond);
                        (l, t0.elapsed())
                    })
                })
                .collect();
            waits
                .into_iter()
                .map(|w| w.join().unwrap_or_else(|_| panic!("waiting for {what}")))
                .collect()
        });
        let mut listings = Vec::new();
        for (s, (l, took)) in servers.iter().zip(results) {
            let whose = match writer {
                Some(w) if w == s.label => "its own write",
                Some(_) => "the OTHER replica's write",
                None => "a write by neither",
            };
            let row = format!("{what} -> {}'s index ({whose})", s.label);
            eprintln!("convergence: {row}: {:.1} ms", ms(took));
            self.0.push((row, took));
            listings.push(l);
        }
        listings
    }

    fn print(&self, variant: &str) {
        eprintln!(
            "\n== two replicas ({variant}): time from each write to each index showing it \
             (uploads and deletes: from the HTTP answer)"
        );
        for (row, took) in &self.0 {
            eprintln!("   {:>7.1} ms  {row}", ms(*took));
        }
        eprintln!();
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Two servers on one storage directory learn of each other's writes (and
/// of direct ones) through their watches. `a` serves `dir` with the
/// default backend (`auto`: native on local storage); `b` serves
/// `b_storage` (`dir` itself, or a mount of it) with `b_args`, and its root
/// line must read `b_root`. Each of `writers` is a place to write into
/// directly, with a name for the report.
fn replicas_share_storage(
    variant: &str,
    dir: &Path,
    b_storage: &Path,
    b_args: &[&str],
    b_root: &str,
    writers: &[(&str, &Path)],
) {
    // There before either starts: both list it at once (initial scans).
    let pre = chart("pre", "1.0.0");
    std::fs::create_dir_all(dir.join("org/team")).unwrap();
    std::fs::write(dir.join("org/team/pre-1.0.0.tgz"), &pre).unwrap();

    let a = Server::start("a", dir, &[]);
    let b = Server::start("b", b_storage, b_args);
    let (a_root, b_line) = (a.root_line(), b.root_line());
    eprintln!("a: root: {a_root}\nb: root: {b_line}");
    assert!(
        a_root.starts_with("native: ") && !a_root.starts_with("native: chosen"),
        "a: auto on local storage should watch natively: {a_root}"
    );
    assert_eq!(b_line, b_root, "b: how its root is watched");
    for s in [&a, &b] {
        let (r, l) = s.index("org/team");
        let l = l.unwrap_or_else(|e| panic!("{}: {e}: {}", s.label, r.text()));
        assert_eq!(
            l.get(&nv("pre", "1.0.0")).map(|c| c.digest.as_str()),
            Some(sha256(&pre).as_str()),
            "{}: listed at LISTENING, from the initial scan",
            s.label
        );
    }
    let both = [&a, &b];
    let mut t = Timings::default();

    let one = chart("shared", "1.0.0");
    let r = a.post("/api/org/team/charts", &one);
    assert_eq!(r.status, 201, "{}", r.text());
    let t0 = Instant::now();
    for l in t.converge(
        "upload to a (shared 1.0.0)",
        Some("a"),
        t0,
        &both,
        "org/team",
        |l| l.contains_key(&nv("shared", "1.0.0")),
    ) {
        assert_eq!(l[&nv("shared", "1.0.0")].digest, sha256(&one));
    }
    let r = b.get("/org/team/charts/shared-1.0.0.tgz");
    assert_eq!(r.status, 200);
    assert!(r.body == one, "b serves a's upload byte for byte");
    let r = b.post("/api/org/team/charts", &one);
    assert_eq!(r.status, 409, "b: {}", r.text());

    let two = chart("other", "0.2.0");
    let r = b.post("/api/org/team/charts", &two);
    assert_eq!(r.status, 201, "{}", r.text());
    let t0 = Instant::now();
    t.converge(
        "upload to b (other 0.2.0)",
        Some("b"),
        t0,
        &both,
        "org/team",
        |l| l.contains_key(&nv("other", "0.2.0")),
    );

    let r = b.delete("/api/org/team/charts/shared/1.0.0");
    assert_eq!(r.status, 200, "{}", r.text());
    let t0 = Instant::now();
    t.converge(
        "delete via b (shared 1.0.0)",
        Some("b"),
        t0,
        &both,
        "org/team",
        |l| !l.contains_key(&nv("shared", "1.0.0")) && l.contains_key(&nv("other", "0.2.0")),
    );
    let r = a.delete("/api/org/team/charts/shared/1.0.0");
    assert_eq!(r.status, 404, "{}", r.text());

    for (i, (how, w)) in writers.iter().enumerate() {
        let name = format!("direct{i}");
        let pkg = chart(&name, "3.0.0");
        let path = w.join(format!("ops/{name}-3.0.0.tgz"));
        std::fs::create_dir_all(w.join("ops")).unwrap();
        std::fs::write(&path, &pkg).unwrap();
        let t0 = Instant::now();
        for l in t.converge(
            &format!("write {how} ({name} 3.0.0)"),
            None,
            t0,
            &both,
            "ops",
            |l| l.contains_key(&nv(&name, "3.0.0")),
        ) {
            assert_eq!(l[&nv(&name, "3.0.0")].digest, sha256(&pkg));
        }
        std::fs::remove_file(&path).unwrap();
        let t0 = Instant::now();
        t.converge(
            &format!("removal {how} ({name} 3.0.0)"),
            None,
            t0,
            &both,
            "ops",
            |l| !l.contains_key(&nv(&name, "3.0.0")),
        );
    }
    t.print(variant);
}

/// Replica `b` on a FUSE mount of the storage directory (bindfs), with the
/// default `auto` backend: it must find FUSE and poll, and see what is
/// written beside the mount, as a replica on NFS sees another host's
/// writes. Needs FUSE: skips loudly without it, fails when
/// `SPECWATCH_REQUIRE_FUSE` is set.
#[test]
fn two_replicas_one_through_fuse() {
    let d = tempfile::tempdir().unwrap();
    let base = d.path().canonicalize().unwrap();
    let dir = base.join("charts");
    let mnt = base.join("mnt");
    std::fs::create_dir(&dir).unwrap();
    std::fs::create_dir(&mnt).unwrap();
    let Some(_mount) = bind_mount(&dir, &mnt) else {
        return;
    };
    replicas_share_storage(
        "b through FUSE, auto",
        &dir,
        &mnt,
        &["--backend", "auto", "--poll-interval", "100"],
        &format!("poll every 100ms: fuse (0x65735546) at {}", mnt.display()),
        &[
            ("directly in DIR (as another host)", &dir),
            ("through the mount", &mnt),
        ],
    );
}

/// The same without FUSE, so that it runs everywhere: both replicas on
/// the storage directory, `b` polling by choice.
#[test]
fn two_replicas_share_one_storage_directory() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().canonicalize().unwrap().join("charts");
    std::fs::create_dir(&dir).unwrap();
    replicas_share_storage(
        "both on DIR, b polling",
        &dir,
        &dir,
        &["--backend", "poll", "--poll-interval", "100"],
        &format!("poll every 100ms: chosen at {}", dir.display()),
        &[("directly in DIR", &dir)],
    );
}
