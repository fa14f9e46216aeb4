//! Replicas through Redis (`--feed`, issue 33): servers as processes,
//! each on its own bindfs mount of one storage directory (as hosts on NFS:
//! no replica hears another's writes), and a `redis-server` of the test's
//! own on a free loopback port, stopped and started again (empty) by the
//! test. Without `redis-server` the tests say they skip
//! (`SPECWATCH_REQUIRE_REDIS=1`, set by CI, makes that a failure).
//!
//! What is compared at the end of each is what an operator would check:
//! every replica's index of each tenant equals the index a fresh server
//! without a feed builds from the storage, and each replica applied its
//! batches with strictly increasing seqs (none twice) between resyncs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use testkit::WAIT;
use testkit::fuse::SharedStorage;
use testkit::redis::{Redis, redis_or_skip};

use crate::charts::{Listing, chart, nv};
use crate::server::Server;

/// The feed's name in every test.
const NAME: &str = "charts";

/// Redis and the storage: its directory, and a mount of it per replica
/// (or the directory itself for all, without FUSE).
struct Cluster {
    redis: Redis,
    storage: SharedStorage,
    src: PathBuf,
}

impl Cluster {
    fn new() -> Option<Cluster> {
        let redis = redis_or_skip()?;
        let storage = SharedStorage::new();
        let src = storage.src.clone();
        Some(Cluster {
            redis,
            storage,
            src,
        })
    }

    /// A new mount of the storage (the storage itself without FUSE).
    fn mount(&mut self) -> PathBuf {
        self.storage.mount()
    }

    /// A replica in the feed, on a mount of its own, with `args` more.
    fn replica(&mut self, label: &str, args: &[&str]) -> Server {
        let mnt = self.mount();
        let url = self.redis.url();
        let mut all = vec!["--feed", &url, "--feed-name", NAME, "--enable-metrics"];
        all.extend_from_slice(args);
        Server::start(label, &mnt, &all)
    }

    /// Writes a package straight into the storage (no replica told).
    fn put(&self, rel: &str, bytes: &[u8]) {
        let p = self.src.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
}

/// `/ready` of `s`: its status and JSON.
fn ready(s: &Server) -> (u16, Value) {
    let r = s.get("/ready");
    let v = serde_json::from_slice(&r.body)
        .unwrap_or_else(|e| panic!("{}: /ready is not JSON ({e}): {}", s.label, r.text()));
    (r.status, v)
}

/// Waits until `done` holds of every replica's `/ready` (status, JSON)
/// taken together; returns them. Asks again every 20 ms (the roles change
/// on the replicas' own threads, which print a line, but not always on
/// each replica waited for), until the deadline.
fn wait_ready(
    servers: &[&Server],
    what: &str,
    done: impl Fn(&[(u16, Value)]) -> bool,
) -> Vec<(u16, Value)> {
    let deadline = Instant::now() + WAIT;
    loop {
        let now: Vec<(u16, Value)> = servers.iter().map(|s| ready(s)).collect();
        if done(&now) {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "waited {WAIT:?} for {what}; /ready says: {:?}",
            servers
                .iter()
                .zip(&now)
                .map(|(s, r)| format!("{}: {} {}", s.label, r.0, r.1))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn role(r: &(u16, Value)) -> &str {
    r.1["role"].as_str().unwrap_or("?")
}

/// Waits until exactly one of `servers` watches and the others follow,
/// every one ready; returns the watcher's position.
fn one_watcher(servers: &[&Server]) -> usize {
    let now = wait_ready(
        servers,
        "one replica watching, the others following",
        |rs| {
            rs.iter().all(|r| r.0 == 200)
                && rs.iter().filter(|r| role(r) == "watching").count() == 1
                && rs.iter().filter(|r| role(r) == "following").count() == rs.len() - 1
        },
    );
    now.iter().position(|r| role(r) == "watching").unwrap()
}

/// The index of `tenant` that a fresh server without a feed builds from
/// the storage `src` now: what every replica must come to.
fn truth(src: &Path, tenants: &[&str]) -> Vec<Listing> {
    let fresh = Server::start("fresh", src, &[]);
    tenants
        .iter()
        .map(|t| {
            let (r, l) = fresh.index(t);
            l.unwrap_or_else(|e| panic!("fresh: /{t}: {e}: {}", r.text()))
        })
        .collect()
}

/// Waits until every one of `servers` lists exactly `want` for each of
/// `tenants`.
fn converge(servers: &[&Server], tenants: &[&str], want: &[Listing], what: &str) {
    for s in servers {
        for (t, w) in tenants.iter().zip(want) {
            s.wait_index(t, &format!("{what}: /{t} as the storage holds it"), |l| {
                l == w
            });
        }
    }
}

/// The seqs `s` said it applied (`index: seq N: K changes`), in order,
/// in runs separated by its resyncs (after which a new history's seqs
/// may start again from 1).
fn seq_runs(s: &Server) -> Vec<Vec<u64>> {
    let mut runs = vec![Vec::new()];
    for line in s.output() {
        if line.starts_with("chart_index: feed: resync") {
            runs.push(Vec::new());
        } else if let Some(rest) = line.strip_prefix("index: seq ") {
            let n = rest.split(':').next().unwrap().parse().unwrap();
            runs.last_mut().unwrap().push(n);
        }
    }
    runs
}

/// Every run of `s`'s seqs is strictly increasing: no batch applied twice,
/// none out of order.
fn assert_seqs_increase(s: &Server) {
    for run in seq_runs(s) {
        assert!(
            run.windows(2).all(|w| w[0] < w[1]),
            "{}: seqs applied not strictly increasing: {run:?}",
            s.label
        );
    }
}

/// The number in `/metrics` of the line starting `series`.
fn metric(s: &Server, series: &str) -> Option<f64> {
    let text = s.get("/metrics").text();
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Read-your-writes across replicas: with polls a minute apart, an
/// upload (or a delete) through any replica is listed by every other one
/// at once: the writer's answer came after the watcher looked at the
/// path and published the batch, which the others read from the stream.
#[test]
fn a_write_through_one_replica_is_listed_by_every_other_without_a_poll() {
    let Some(mut c) = Cluster::new() else { return };
    c.put("org/pre-1.0.0.tgz", &chart("pre", "1.0.0"));
    let slow = ["--poll-interval", "60000"];
    let reps: Vec<Server> = (0..3).map(|i| c.replica(&format!("r{i}"), &slow)).collect();
    let all: Vec<&Server> = reps.iter().collect();
    let w = one_watcher(&all);
    for s in &reps {
        assert!(
            s.index("org").1.unwrap().contains_key(&nv("pre", "1.0.0")),
            "{}: listed at LISTENING",
            s.label
        );
    }
    let follower = (w + 1) % reps.len();
    for (k, writer) in [follower, w, follower].into_iter().enumerate() {
        let name = format!("up{k}");
        let r = reps[writer].post("/api/org/charts", &chart(&name, "1.0.0"));
        assert_eq!(r.status, 201, "{}: {}", reps[writer].label, r.text());
        assert!(
            r.text().contains("\"indexed\":true"),
            "{}: answered before its index showed it: {}",
            reps[writer].label,
            r.text()
        );
        let t = Instant::now();
        // The writer's own index shows it already.
        assert!(
            reps[writer]
                .index("org")
                .1
                .unwrap()
                .contains_key(&nv(&name, "1.0.0")),
            "{}: its own upload is not listed when it answers",
            reps[writer].label
        );
        for s in &reps {
            s.wait_index(
                "org",
                &format!("{name}, uploaded through {}", reps[writer].label),
                |l| l.contains_key(&nv(&name, "1.0.0")),
            );
            eprintln!(
                "feed: {name} through {} listed on {} {:.1} ms after the answer",
                reps[writer].label,
                s.label,
                ms(t.elapsed())
            );
        }
    }
    // A delete through a follower, the same way.
    let r = reps[follower].delete("/api/org/charts/up1/1.0.0");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("\"indexed\":true"), "{}", r.text());
    for s in &reps {
        s.wait_index("org", "up1 deleted through a follower", |l| {
            !l.contains_key(&nv("up1", "1.0.0"))
        });
    }
    // Polls a minute apart, and nothing waited that long: the feed
    // carried every change.
    let want = truth(&c.src, &["org"]);
    converge(&all, &["org"], &want, "after the writes");
    for s in &reps {
        assert_seqs_increase(s);
        assert_eq!(metric(s, "chart_index_feed_up"), Some(1.0), "{}", s.label);
    }
    assert_eq!(
        metric(&reps[w], "chart_index_feed_role{role=\"watching\"}"),
        Some(1.0)
    );
}

/// The watcher killed (SIGKILL: its lease expires): another takes over,
/// publishes what changed while nobody watched, once, and an upload made
/// meanwhile through a follower is answered once the new watcher has
/// looked. Every replica's index then equals the storage's.
#[test]
fn a_killed_watcher_is_replaced_and_every_index_equals_the_storage() {
    let Some(mut c) = Cluster::new() else { return };
    for i in 0..5 {
        c.put(
            &format!("org/a{i}-1.0.0.tgz"),
            &chart(&format!("a{i}"), "1.0.0"),
        );
    }
    c.put("team/b-1.0.0.tgz", &chart("b", "1.0.0"));
    let args = ["--poll-interval", "200"];
    let mut reps: Vec<Server> = (0..3).map(|i| c.replica(&format!("r{i}"), &args)).collect();
    let w = one_watcher(&reps.iter().collect::<Vec<_>>());
    let r = reps[(w + 1) % 3].post("/api/org/charts", &chart("before", "1.0.0"));
    assert_eq!(r.status, 201, "{}", r.text());

    let mut dead = reps.remove(w);
    let killed = Instant::now();
    dead.kill();
    // While nobody watches: straight to the storage, and an upload
    // through a survivor (its answer waits for the next watcher).
    c.put("org/direct-1.0.0.tgz", &chart("direct", "1.0.0"));
    std::fs::remove_file(c.src.join("org/a0-1.0.0.tgz")).unwrap();
    std::fs::remove_dir_all(c.src.join("team")).unwrap();
    let r = reps[0].post("/api/org/charts", &chart("during", "1.0.0"));
    assert_eq!(r.status, 201, "{}", r.text());
    assert!(
        r.text().contains("\"indexed\":true"),
        "an upload during the takeover was answered before it was listed: {}",
        r.text()
    );
    let survivors: Vec<&Server> = reps.iter().collect();
    let nw = one_watcher(&survivors);
    eprintln!(
        "feed: {} killed; {} watching {:.0} ms later",
        dead.label,
        reps[nw].label,
        ms(killed.elapsed())
    );
    let want = truth(&c.src, &["org"]);
    assert!(want[0].contains_key(&nv("direct", "1.0.0")));
    assert!(!want[0].contains_key(&nv("a0", "1.0.0")));
    converge(&survivors, &["org"], &want, "after the failover");
    for s in &reps {
        s.wait_status("/team/index.yaml", 404, "the removed tenant gone");
        assert_seqs_increase(s);
        // The followers followed: no resync of theirs after the start.
        assert_eq!(seq_runs(s).len(), 2, "{}: resynced again", s.label);
    }
}

/// Redis stopped: every replica watches the storage itself and stays
/// ready, saying the feed is down; writes are seen by the others through
/// their own polls. Redis started again, empty: each replica resyncs once
/// and follows (one watches) again; every index equals the storage's.
#[test]
fn replicas_watch_alone_while_redis_is_down_and_resync_once_when_it_is_back_empty() {
    let Some(mut c) = Cluster::new() else { return };
    c.put("org/pre-1.0.0.tgz", &chart("pre", "1.0.0"));
    let args = ["--poll-interval", "200"];
    let reps: Vec<Server> = (0..2).map(|i| c.replica(&format!("r{i}"), &args)).collect();
    let all: Vec<&Server> = reps.iter().collect();
    one_watcher(&all);

    c.redis.stop();
    for s in &reps {
        // Said once the index holds the tree it scanned (after its resync).
        s.wait_log("watching the storage itself with Redis stopped", |l| {
            l.starts_with("chart_index: feed: local at seq")
        });
    }
    wait_ready(
        &all,
        "every replica local and ready with Redis stopped",
        |rs| {
            rs.iter()
                .all(|r| r.0 == 200 && role(r) == "local" && r.1["feed_up"] == false)
        },
    );
    for s in &reps {
        assert_eq!(metric(s, "chart_index_feed_up"), Some(0.0), "{}", s.label);
    }
    let r = reps[0].post("/api/org/charts", &chart("down", "1.0.0"));
    assert_eq!(r.status, 201, "{}", r.text());
    assert!(r.text().contains("\"indexed\":true"), "{}", r.text());
    reps[1].wait_index(
        "org",
        "an upload to r0 while Redis is down (r1's own poll)",
        |l| l.contains_key(&nv("down", "1.0.0")),
    );
    let resyncs: Vec<usize> = reps.iter().map(|s| seq_runs(s).len()).collect();

    c.redis.start_again();
    one_watcher(&all);
    for s in &reps {
        s.wait_log("following or watching once Redis was back", |l| {
            l.starts_with("chart_index: feed: following at seq")
                || l.starts_with("chart_index: feed: watching at seq")
        });
    }
    for (s, before) in reps.iter().zip(&resyncs) {
        assert_eq!(
            seq_runs(s).len(),
            before + 1,
            "{}: not exactly one resync once Redis was back: {:?}",
            s.label,
            s.output()
                .iter()
                .filter(|l| l.starts_with("chart_index: feed:"))
                .collect::<Vec<_>>()
        );
    }
    let r = reps[1].post("/api/org/charts", &chart("back", "1.0.0"));
    assert_eq!(r.status, 201, "{}", r.text());
    assert!(r.text().contains("\"indexed\":true"), "{}", r.text());
    let want = truth(&c.src, &["org"]);
    assert!(want[0].contains_key(&nv("back", "1.0.0")));
    converge(&all, &["org"], &want, "after Redis came back empty");
    for s in &reps {
        assert_seqs_increase(s);
        assert_eq!(metric(s, "chart_index_feed_up"), Some(1.0), "{}", s.label);
    }
}

/// A replica started while the feed has a snapshot loads it and follows
/// from its seq: it reads no package (the start says 0 read), and lists
/// what the others do, changes after the snapshot included.
#[test]
fn a_cold_replica_starts_from_the_watchers_snapshot() {
    let Some(mut c) = Cluster::new() else { return };
    for i in 0..20 {
        c.put(
            &format!("org/c{i}-1.0.0.tgz"),
            &chart(&format!("c{i}"), "1.0.0"),
        );
    }
    std::fs::create_dir_all(c.src.join("empty")).unwrap();
    let first = c.replica("r0", &[]);
    one_watcher(&[&first]);
    first.wait_log("the watcher's snapshot put", |l| {
        l.starts_with("feed: snapshot put at seq")
    });
    // A change, then its snapshot.
    let r = first.post("/api/org/charts", &chart("after", "1.0.0"));
    assert_eq!(r.status, 201, "{}", r.text());
    first.wait_log("the watcher's snapshot after an upload", |l| {
        l.starts_with("feed: snapshot put at seq")
    });
    let cold = c.replica("r1", &[]);
    let loaded = cold.wait_log("the snapshot loaded", |l| {
        l.starts_with("chart_index: feed: snapshot at seq")
    });
    let start = cold.wait_log("the start's summary", |l| {
        l.starts_with("chart_index: start:")
    });
    assert!(
        start.contains(" 0 read "),
        "the cold replica read packages instead of taking the snapshot's ({loaded}): {start}"
    );
    let want = truth(&c.src, &["org", "empty"]);
    assert!(want[0].contains_key(&nv("after", "1.0.0")));
    converge(
        &[&first, &cold],
        &["org", "empty"],
        &want,
        "the cold replica",
    );
    assert_seqs_increase(&cold);
}
