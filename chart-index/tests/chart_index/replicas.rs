//! Two replicas on one storage directory, one of them possibly through a
//! FUSE mount (bindfs): each learns of the other's writes, and of direct
//! ones, through its watch; how long each took is printed.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::charts::{Listing, chart, nv, sha256};
use crate::server::Server;

use testkit::fuse::bind_mount;

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

/// Issue 22, item 3: the storage of a replica on a FUSE mount is unmounted
/// under it, changed meanwhile (by another host, directly in the storage
/// directory), and mounted again. While it is away the replica keeps
/// serving the last good index (no batch applied, nothing removed),
/// `/ready` says why (not ready; `/health` stays alive), and writes are
/// refused (they would land below the
/// mount); once it is back, the index converges on the storage.
#[test]
fn a_replica_keeps_its_index_while_its_storage_is_unmounted() {
    let d = tempfile::tempdir().unwrap();
    let base = d.path().canonicalize().unwrap();
    let dir = base.join("charts");
    let mnt = base.join("mnt");
    std::fs::create_dir_all(dir.join("org")).unwrap();
    std::fs::create_dir(&mnt).unwrap();
    let (keep, gone, new) = (
        chart("keep", "1.0.0"),
        chart("gone", "1.0.0"),
        chart("new", "1.0.0"),
    );
    std::fs::write(dir.join("org/keep-1.0.0.tgz"), &keep).unwrap();
    std::fs::write(dir.join("org/gone-1.0.0.tgz"), &gone).unwrap();
    let Some(mut mount) = bind_mount(&dir, &mnt) else {
        return;
    };
    let every = 50;
    let b = Server::start(
        "b",
        &mnt,
        &["--backend", "auto", "--poll-interval", &every.to_string()],
    );
    let (_, before) = b.index("org");
    let before = before.unwrap();
    let names = |l: &Listing| -> Vec<String> { l.keys().map(|(n, _)| n.clone()).collect() };
    assert_eq!(names(&before), ["gone", "keep"], "listed at LISTENING");

    mount.unmount();
    let log = b.wait_log("the watch saying the storage went", |l| {
        l.contains("watch degraded: storage gone")
    });
    eprintln!("b: {log}");
    let r = b.wait_status("/ready", 503, "not ready while the storage is away");
    assert!(r.text().contains("storage gone"), "{}", r.text());
    assert_eq!(r.json()["cause"], "storage_gone", "{}", r.text());
    let r = b.get("/health");
    assert_eq!(r.status, 200, "alive all the same: {}", r.text());
    // Another host changes the storage meanwhile.
    std::fs::write(dir.join("org/new-1.0.0.tgz"), &new).unwrap();
    std::fs::remove_file(dir.join("org/gone-1.0.0.tgz")).unwrap();
    let r = b.post("/api/org/charts", &chart("late", "1.0.0"));
    assert_eq!(r.status, 503, "a write while away: {}", r.text());
    assert!(r.text().contains("not mounted"), "{}", r.text());
    assert!(
        !mnt.join("org").exists(),
        "nothing written below the mount point"
    );
    // The index is served as it was, through many polls (20 intervals:
    // each would have applied a batch, and printed a line, before).
    let lines = b.output().len();
    // The index's lines (`index: + KEY`, `index: seq N: ...`): not the
    // access lines, nor the readiness said.
    let index_lines = |out: &[String]| -> Vec<String> {
        out.iter()
            .filter(|l| l.starts_with("index: "))
            .cloned()
            .collect()
    };
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(20 * every) {
        let (r, l) = b.index("org");
        let l = l.unwrap_or_else(|e| panic!("{e}: {}", r.text()));
        assert_eq!(l, before, "the last good index, while the storage is away");
    }
    assert_eq!(
        index_lines(&b.output()[lines..]),
        Vec::<String>::new(),
        "no batch applied while the storage is away"
    );

    mount.mount_again();
    let l = b.wait_index("org", "the index converged once the storage is back", |l| {
        names(l) == ["keep", "new"]
    });
    assert_eq!(l[&nv("new", "1.0.0")].digest, sha256(&new));
    assert_eq!(l[&nv("keep", "1.0.0")], before[&nv("keep", "1.0.0")]);
    b.wait_status("/ready", 200, "ready again");
    let r = b.post("/api/org/charts", &chart("late", "1.0.0"));
    assert_eq!(r.status, 201, "a write once it is back: {}", r.text());
}
