//! Replicas as processes (the `feed` example), each on its own bindfs
//! mount of one storage, as hosts on NFS would be: they print the same
//! changes; the watcher killed with SIGKILL is replaced and nothing is
//! lost or printed twice; and only the watcher touches the storage
//! (`strace -c` of each process, per poll round, at 1 and 4 replicas).
#![cfg(target_os = "linux")]

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use specwatch::Seq;
use testkit::process::{Line, Process};

const POLL_MS: u64 = 100;

/// The replicas' lease expiry: 1 s, or `SPECWATCH_FEED_TTL_MS` (to
/// measure the failover at another, the default 3 s say).
fn ttl_ms() -> u64 {
    std::env::var("SPECWATCH_FEED_TTL_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

/// The `feed` example, built beside this test (a plain `cargo test`
/// builds the examples).
fn feed(redis: &Redis, root: &Path) -> Command {
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/feed");
    assert!(
        bin.exists(),
        "the feed example is not built at {} (cargo build -p specwatch-feed --examples)",
        bin.display()
    );
    let mut c = Command::new(bin);
    c.args([
        "--redis",
        &redis.url(),
        "--name",
        "procs",
        "--seqs",
        "--initial-scan",
    ])
    .args(["--poll-interval", &POLL_MS.to_string()])
    .args(["--lease-ttl", &ttl_ms().to_string()])
    .arg(root);
    c
}

/// What a replica printed, replayed: the tree (paths below its root), its
/// batches, and what broke a promise.
#[derive(Default)]
struct Replay {
    tree: BTreeSet<PathBuf>,
    batches: Vec<(Seq, Vec<(String, PathBuf)>)>,
    roles: Vec<String>,
    violations: Vec<String>,
}

fn replay(lines: &[Line], root: &Path) -> Replay {
    let mut r = Replay::default();
    let mut last: Option<Seq> = None;
    for l in lines
        .iter()
        .filter(|l| l.stream == testkit::process::Stream::Stdout)
    {
        let text = l.text();
        let fields: Vec<&str> = text.split('\t').collect();
        match fields.as_slice() {
            ["resync", _, seq] => {
                r.tree.clear();
                last = Some(seq.parse().unwrap());
            }
            ["batch", seq] => {
                let seq: Seq = seq.parse().unwrap();
                match last {
                    Some(l) if l.instance() == seq.instance() && l.number() < seq.number() => {}
                    _ => r.violations.push(format!("batch {seq} after {last:?}")),
                }
                last = Some(seq);
                r.batches.push((seq, Vec::new()));
            }
            ["role", role] => r.roles.push((*role).to_owned()),
            [kind, path] => {
                let rel = Path::new(path).strip_prefix(root).unwrap().to_path_buf();
                if *kind == "removed" {
                    r.tree.retain(|p| !p.starts_with(&rel));
                } else {
                    r.tree.insert(rel.clone());
                }
                if let Some(b) = r.batches.last_mut()
                    && last == Some(b.0)
                {
                    b.1.push(((*kind).to_owned(), rel));
                }
            }
            _ => {}
        }
    }
    r
}

/// Waits until `done` holds of the replays of `ps` (re-read as they
/// print), naming `what` at the deadline.
fn wait_until(ps: &[(Process, PathBuf)], what: &str, done: impl Fn(&[Replay]) -> bool) {
    let deadline = Instant::now() + WAIT;
    loop {
        let seen: Vec<usize> = ps.iter().map(|(p, _)| p.len()).collect();
        let replays: Vec<Replay> = ps
            .iter()
            .map(|(p, root)| replay(&p.lines(), root))
            .collect();
        if done(&replays) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {WAIT:?} waiting for {what}; roles {:?}",
            replays.iter().map(|r| r.roles.clone()).collect::<Vec<_>>()
        );
        // Until one of them prints more (or 50 ms: another's line).
        ps[0]
            .0
            .wait_beyond(seen[0], Instant::now() + Duration::from_millis(50));
    }
}

fn disk(storage: &Storage) -> BTreeSet<PathBuf> {
    storage.tree().into_keys().collect()
}

fn watching(r: &Replay) -> bool {
    r.roles.last().is_some_and(|x| x == "watching")
}

#[test]
fn processes_print_the_same_and_survive_a_sigkill_of_the_watcher() {
    let Some(redis) = redis_or_skip() else { return };
    let mut storage = Storage::new();
    for i in 0..5 {
        storage.write(&format!("t/c-{i}.tgz"), "c");
    }
    let mut ps: Vec<(Process, PathBuf)> = (0..3)
        .map(|i| {
            let root = storage.mount();
            (
                Process::start(&format!("replica {i}"), feed(&redis, &root)),
                root,
            )
        })
        .collect();
    for (p, _) in &ps {
        p.expect("READY");
    }
    wait_until(&ps, "one watcher", |rs| {
        rs.iter().filter(|r| watching(r)).count() == 1
    });
    storage.write("t/d.tgz", "d");
    storage.remove("t/c-4.tgz");
    let want = disk(&storage);
    wait_until(&ps, "every replica's tree equal to the disk", |rs| {
        rs.iter().all(|r| r.tree == want)
    });

    let rs: Vec<Replay> = ps
        .iter()
        .map(|(p, root)| replay(&p.lines(), root))
        .collect();
    let w = rs.iter().position(watching).unwrap();
    let mut dead = ps.remove(w);
    let before: Vec<usize> = rs
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != w)
        .map(|(_, r)| r.batches.len())
        .collect();
    dead.0.kill();
    let killed = Instant::now();
    storage.write("t/new.tgz", "n");
    storage.write("t/c-0.tgz", "written while nobody watched");
    storage.remove("t/c-1.tgz");
    wait_until(&ps, "a new watcher's first batch", |rs| {
        rs.iter()
            .zip(&before)
            .any(|(r, b)| watching(r) && r.batches.len() > *b)
    });
    let failover = killed.elapsed();
    note(&format!(
        "failover (processes, lease ttl {} ms): {failover:?} from SIGKILL to the new watcher's first batch",
        ttl_ms()
    ));
    let want = disk(&storage);
    wait_until(
        &ps,
        "every tree equal to the disk after the failover",
        |rs| rs.iter().all(|r| r.tree == want),
    );
    for ((p, root), b) in ps.iter().zip(&before) {
        let r = replay(&p.lines(), root);
        assert!(r.violations.is_empty(), "{:?}", r.violations);
        let after: Vec<(String, PathBuf)> = r.batches[*b..]
            .iter()
            .flat_map(|(_, c)| c.clone())
            .collect();
        assert_eq!(
            after,
            vec![
                ("modified".into(), "t/c-0.tgz".into()),
                ("removed".into(), "t/c-1.tgz".into()),
                ("created".into(), "t/new.tgz".into()),
            ],
            "the changes made while nobody watched, once each"
        );
    }
    // The lease's expiry, a follower's attempt (a third of it), the new
    // watcher's scan: within twice the expiry and a second.
    let bound = Duration::from_millis(2 * ttl_ms() + 1000);
    assert!(failover < bound, "{failover:?}, more than {bound:?}");
}

/// Storage system calls of process `pid` (listings, `stat`s, opens) over
/// `window`, counted by `strace -c -f`.
fn storage_calls(pid: u32, window: Duration) -> u64 {
    let out = tempfile::NamedTempFile::new().unwrap();
    let mut st = Command::new("strace")
        .args(["-f", "-c", "-q", "-o"])
        .arg(out.path())
        .args([
            "-e",
            "trace=getdents64,newfstatat,statx,lstat,stat,fstat,openat,statfs,fstatfs,readlinkat",
            "-p",
            &pid.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("strace");
    // A measurement over a window of poll rounds, not a wait for a
    // condition: the window is the measure.
    std::thread::sleep(window);
    let _ = Command::new("kill")
        .args(["-INT", &st.id().to_string()])
        .status();
    let _ = st.wait();
    let text = std::fs::read_to_string(out.path()).unwrap();
    text.lines()
        .find(|l| l.trim_end().ends_with("total"))
        .and_then(|l| l.split_whitespace().nth(3))
        .map_or(0, |n| n.parse().unwrap())
}

fn strace_or_skip() -> bool {
    let ok = Command::new("strace")
        .arg("-V")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("SPECWATCH_REQUIRE_REDIS").is_none(),
            "strace is required with SPECWATCH_REQUIRE_REDIS (Debian: strace)"
        );
        note("*** SKIPPED: no strace");
    }
    ok
}

/// The storage's work does not grow with the replicas: per poll round,
/// the watcher lists and `stat`s the storage as a lone replica does, and
/// the followers touch it not at all. Beside it, the peer: the same four
/// replicas with Redis stopped, each watching the storage itself (as
/// without a feed), cost it four times.
#[test]
fn only_the_watcher_touches_the_storage() {
    let Some(mut redis) = redis_or_skip() else {
        return;
    };
    if !strace_or_skip() {
        return;
    }
    let mut storage = Storage::new();
    for d in 0..10 {
        for f in 0..10 {
            storage.write(&format!("t{d}/c-{f}.tgz"), "c");
        }
    }
    let window = Duration::from_millis(3000);
    let rounds = window.as_millis() as u64 / POLL_MS;
    let mut ps: Vec<(Process, PathBuf)> = Vec::new();
    let root = storage.mount();
    ps.push((Process::start("replica 0", feed(&redis, &root)), root));
    ps[0].0.expect("READY");
    let alone = storage_calls(ps[0].0.id(), window);
    for i in 1..4 {
        let root = storage.mount();
        ps.push((
            Process::start(&format!("replica {i}"), feed(&redis, &root)),
            root,
        ));
        ps[i].0.expect("READY");
    }
    wait_until(&ps, "one watcher, three followers", |rs| {
        rs.iter().filter(|r| watching(r)).count() == 1
            && rs
                .iter()
                .filter(|r| r.roles.last().is_some_and(|x| x == "following"))
                .count()
                == 3
    });
    let rs: Vec<Replay> = ps
        .iter()
        .map(|(p, root)| replay(&p.lines(), root))
        .collect();
    let w = rs.iter().position(watching).unwrap();
    let measure = |ps: &[(Process, PathBuf)]| -> Vec<u64> {
        std::thread::scope(|s| {
            let hs: Vec<_> = ps
                .iter()
                .map(|(p, _)| {
                    let pid = p.id();
                    s.spawn(move || storage_calls(pid, window))
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        })
    };
    let calls = measure(&ps);
    let followers: u64 = (0..4).filter(|&i| i != w).map(|i| calls[i]).sum();
    note(&format!(
        "storage calls per poll round ({POLL_MS} ms, 110 entries): 1 replica {}; 4 replicas {} (watcher {}, followers {})",
        alone / rounds,
        calls.iter().sum::<u64>() / rounds,
        calls[w] / rounds,
        followers / rounds
    ));
    assert_eq!(followers, 0, "followers made storage calls: {calls:?}");
    assert!(
        calls[w] <= alone * 2 && alone <= calls[w] * 2,
        "the watcher's work ({}) is a lone replica's ({alone})",
        calls[w]
    );
    assert!(
        alone >= rounds * 100,
        "the lone replica polled: {alone} calls in {rounds} rounds"
    );

    redis.stop();
    wait_until(&ps, "every replica local", |rs| {
        rs.iter()
            .all(|r| r.roles.last().is_some_and(|x| x == "local"))
    });
    let local = measure(&ps);
    note(&format!(
        "without the feed (redis stopped, every replica local): 4 replicas {} per round ({:?})",
        local.iter().sum::<u64>() / rounds,
        local.iter().map(|c| c / rounds).collect::<Vec<_>>()
    ));
    for (i, c) in local.iter().enumerate() {
        assert!(
            *c * 2 >= alone,
            "replica {i} watches the storage itself: {c} calls (alone: {alone})"
        );
    }
}
