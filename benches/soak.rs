//! Soak: the mirror workload (`tests/mirror.rs`'s random operations:
//! files and directories created, written, renamed within the tree, moved
//! in and out, removed, replaced by the other type, symlinks) at a steady
//! rate for a given time, under one spec, with a subscriber that is slow on
//! purpose (it sleeps after each batch, so that its channel fills and the
//! engine merges its backlog, `batch/fanout.rs`). The subscriber rebuilds the
//! tree from the batches it receives; at every checkpoint the operations
//! pause, a marker file is created in a second root of the spec, `sync`
//! passes, and once the subscriber has applied the marker's batch (so
//! everything before it) its tree must equal the disk. File descriptors,
//! threads and resident memory are printed at the start, every few
//! minutes and at the end, and after the manager is dropped; with them,
//! the index's entries and the backlog's paths (`Manager::stats`), and
//! how many distinct paths the subscriber has been told of so far (what
//! the spec's changes-since journal fills with, up to its bound: a lower
//! bound of what it was given, as a merged backlog drops a path created
//! and removed before it was taken; counted as 64-bit hashes in a set
//! made for 65,536 at the start, 1,152 KiB of the bench's own, resident
//! as it fills). Resident memory is printed with the heap in use (glibc):
//! what grows in the second and not the first is the allocator's, not
//! held.
//!
//! ```sh
//! cargo bench --bench soak -- --minutes 60 DIR
//! cargo bench --bench soak -- --minutes 1 --rate 50 --slow-ms 100 --backend portable
//! ```
//!
//! Options (defaults): `--minutes 60`, `--rate 20` (operations per
//! second), `--slow-ms 150` (the subscriber's sleep per batch),
//! `--capacity 2` (the subscriber's channel), `--checkpoint-s 30`,
//! `--report-min 5`, `--backend auto` (as `Backend`'s `FromStr`:
//! `native`, `portable`, `poll:250ms`), `--seed 1`, `--journal-paths
//! 4096` (`ManagerBuilder::journal_paths`: the distinct paths the spec's
//! changes-since journal holds, `DEFAULT_JOURNAL_PATHS`); DIR (default: a
//! temporary directory) gets a fresh `soak-PID` directory, removed at the
//! end. Exits with 1, saying why, if the tree differs from the disk, the
//! index breaks, or descriptors or threads are not back where they were.

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::procstat::{self, Usage};
use common::workload::{Rng, listing, step};
use common::{Mirror, index_problems};
use specwatch::crossbeam_channel::{self as channel, RecvTimeoutError};
use specwatch::{Backend, ChangeKind, DEFAULT_JOURNAL_PATHS, Event, Manager, WatchSpec};

struct Args {
    minutes: f64,
    rate: f64,
    slow: Duration,
    capacity: usize,
    checkpoint: Duration,
    report: Duration,
    backend: Backend,
    seed: u64,
    journal_paths: usize,
    dir: Option<PathBuf>,
}

fn args() -> Args {
    let mut a = Args {
        minutes: 60.0,
        rate: 20.0,
        slow: Duration::from_millis(150),
        capacity: 2,
        checkpoint: Duration::from_secs(30),
        report: Duration::from_secs(300),
        backend: Backend::Auto,
        seed: 1,
        journal_paths: DEFAULT_JOURNAL_PATHS,
        dir: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |what: &str| {
            it.next()
                .unwrap_or_else(|| panic!("{arg} needs a value ({what})"))
        };
        let num = |s: String| -> f64 { s.parse().unwrap_or_else(|_| panic!("not a number: {s}")) };
        match arg.as_str() {
            // (What `cargo bench` passes to a harness-less bench.)
            "--bench" => {}
            "--minutes" => a.minutes = num(value("minutes")),
            "--rate" => a.rate = num(value("operations per second")).max(0.1),
            "--slow-ms" => a.slow = Duration::from_millis(num(value("ms")) as u64),
            "--capacity" => a.capacity = num(value("events")) as usize,
            "--checkpoint-s" => a.checkpoint = Duration::from_secs_f64(num(value("seconds"))),
            "--report-min" => a.report = Duration::from_secs_f64(60.0 * num(value("minutes"))),
            "--seed" => a.seed = num(value("seed")) as u64,
            "--journal-paths" => a.journal_paths = num(value("paths")) as usize,
            "--backend" => {
                let b = value("backend");
                a.backend = b.parse().unwrap_or_else(|e| panic!("--backend {b}: {e}"));
            }
            s if !s.starts_with("--") && a.dir.is_none() => a.dir = Some(PathBuf::from(s)),
            s => panic!("unknown argument {s} (see benches/soak.rs)"),
        }
    }
    a
}

/// What the subscriber has done, shared with the main thread.
#[derive(Default)]
struct Seen {
    /// The tree rebuilt from batches (below the tree's root only).
    mirror: Mirror,
    batches: u64,
    changes: u64,
    /// The newest seq number received.
    newest: u64,
    /// Hashes of the distinct paths received (both roots).
    paths: HashSet<u64>,
}

/// Distinct paths counted before the set grows (its growth would show in
/// the memory the soak is there to watch).
const COUNTED_PATHS: usize = 1 << 16;

fn line(start: Instant, what: &str, u: Usage, extra: &str) {
    let t = start.elapsed().as_secs_f64() / 60.0;
    println!("[{t:6.1} min] {what:<8} {u}{extra}");
}

fn main() {
    let a = args();
    let t0 = Instant::now();
    let start = Usage::now();
    line(t0, "start", start, " (before the manager)");

    let tmp;
    let base = match &a.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir().expect("a temporary directory");
            tmp.path().to_path_buf()
        }
    };
    let work = base.join(format!("soak-{}", std::process::id()));
    let (tree, marks, outside) = (work.join("tree"), work.join("marks"), work.join("outside"));
    for d in [&tree, &marks, &outside] {
        std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    }
    let failed = run(&a, t0, start, &tree, &marks, &outside);
    std::fs::remove_dir_all(&work).ok();
    if let Err(why) = failed {
        println!("FAILED: {why}");
        std::process::exit(1);
    }
    println!("ok");
}

fn run(
    a: &Args,
    t0: Instant,
    start: Usage,
    tree: &Path,
    marks: &Path,
    outside: &Path,
) -> Result<(), String> {
    let m = Manager::builder()
        .backend(a.backend)
        .subscriber_capacity(a.capacity)
        .journal_paths(a.journal_paths)
        .build()
        .map_err(|e| e.to_string())?;
    let rx = m.subscribe();
    let seen = Arc::new(Mutex::new(Seen {
        paths: HashSet::with_capacity(COUNTED_PATHS),
        ..Seen::default()
    }));
    let (mark_tx, mark_rx) = channel::unbounded::<PathBuf>();
    let subscriber = {
        let (seen, tree, marks, slow) = (
            seen.clone(),
            tree.to_path_buf(),
            marks.to_path_buf(),
            a.slow,
        );
        std::thread::Builder::new()
            .name("soak-subscriber".into())
            .spawn(move || {
                let hasher = RandomState::new();
                for ev in rx {
                    let Event::Changes(b) = ev else { continue };
                    {
                        let mut s = seen.lock().unwrap();
                        s.batches += 1;
                        s.changes += b.changes.len() as u64;
                        s.newest = b.seq.number();
                        for c in &b.changes {
                            s.paths.insert(hasher.hash_one(&c.path));
                            if c.path.starts_with(&tree) {
                                s.mirror.apply(c);
                            } else if c.path.starts_with(&marks) && c.kind == ChangeKind::Created {
                                mark_tx.send(c.path.clone()).ok();
                            }
                        }
                    }
                    // Slow on purpose: the engine merges what waits.
                    std::thread::sleep(slow);
                }
            })
            .expect("the subscriber's thread")
    };
    let spec = WatchSpec::new([tree, marks])
        .quiet_window(Duration::from_millis(5))
        .max_delay(Duration::from_millis(100))
        .editor_ignores(false);
    m.apply("soak", spec).map_err(|e| e.to_string())?;
    m.wait_watching("soak", Duration::from_secs(60))
        .map_err(|e| e.to_string())?;
    let s = m.status("soak").expect("the spec's status");
    println!(
        "backend {:?} (roots: {:?}), rate {}/s, subscriber sleeps {:?} per batch, capacity {}, \
         journal {} paths, checkpoint every {:?}, {} min",
        a.backend,
        s.roots.iter().map(|r| r.backend).collect::<Vec<_>>(),
        a.rate,
        a.slow,
        a.capacity,
        a.journal_paths,
        a.checkpoint,
        a.minutes
    );

    let mut rng = Rng(a.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let end = t0 + Duration::from_secs_f64(a.minutes * 60.0);
    let (mut ops, mut checkpoints, mut serial) = (0u64, 0u64, 0u64);
    let mut log = Vec::new();
    let mut warm = None;
    let mut next_report = Instant::now() + a.report;
    let mut paced = Instant::now();
    let gap = Duration::from_secs_f64(1.0 / a.rate);
    loop {
        // Operations until the next checkpoint, one every `gap`.
        let until = (Instant::now() + a.checkpoint).min(end);
        while Instant::now() < until {
            log.clear();
            step(&mut rng, tree, outside, &mut serial, &mut log, false, &[]);
            ops += 1;
            paced += gap;
            match paced.checked_duration_since(Instant::now()) {
                Some(d) => std::thread::sleep(d),
                // Behind (a slow disk): no catching up in a flood.
                None => paced = Instant::now(),
            }
        }
        checkpoints += 1;
        let entries = checkpoint(&m, tree, marks, &seen, &mark_rx, checkpoints)?;
        // Moved out: gone from the tree; not kept.
        std::fs::remove_dir_all(outside).ok();
        std::fs::create_dir_all(outside).map_err(|e| e.to_string())?;
        let stats = |u: Usage| {
            let engine = m.stats().map_or_else(
                |e| format!("stats: {e}"),
                |st| {
                    format!(
                        "index {} entries, backlog {} paths",
                        st.indexed_entries, st.backlog_paths
                    )
                },
            );
            let s = seen.lock().unwrap();
            let extra = format!(
                "; {ops} ops, {checkpoints} checkpoints, tree {entries} entries, \
                 {} distinct paths received, {engine}, {} batches received of {} published \
                 ({} changes)",
                s.paths.len(),
                s.batches,
                s.newest,
                s.changes
            );
            (u, extra)
        };
        if warm.is_none() {
            let (u, extra) = stats(Usage::now());
            line(t0, "warm", u, &extra);
            warm = Some(u);
        }
        if Instant::now() >= end {
            break;
        }
        if Instant::now() >= next_report {
            next_report += a.report;
            let (u, extra) = stats(Usage::now());
            line(t0, "running", u, &extra);
        }
    }
    let warm = warm.expect("one checkpoint at least");
    let end_u = Usage::now();
    {
        let s = seen.lock().unwrap();
        let extra = format!(
            "; {ops} ops, {checkpoints} checkpoints, {} distinct paths received, {} batches \
             received of {} published ({} changes)",
            s.paths.len(),
            s.batches,
            s.newest,
            s.changes
        );
        line(t0, "end", end_u, &extra);
    }
    drop(m);
    subscriber.join().map_err(|_| "the subscriber panicked")?;
    // The engine's threads are joined by the drop; /proc can lag a moment.
    let after = procstat::wait_for(
        "descriptors and threads back to the start's after the drop",
        Duration::from_secs(10),
        |u| u.fds == start.fds && u.threads == start.threads,
    );
    line(
        t0,
        "dropped",
        after,
        " (the manager and the subscriber gone)",
    );
    let rss = |u: Usage| u.rss_kib.map_or(0, |k| k as i64);
    println!(
        "summary: start {start}; after the first checkpoint {warm}; end {end_u}; \
         after the drop {after}; RSS end - first checkpoint {:+} KiB",
        rss(end_u) - rss(warm)
    );
    if (end_u.fds, end_u.threads) != (warm.fds, warm.threads) {
        return Err(format!(
            "descriptors or threads moved while running: warm {warm}, end {end_u}"
        ));
    }
    Ok(())
}

/// With the operations paused: creates marker `n` (and removes the one
/// before), passes a sync, waits for the subscriber to apply the marker's
/// batch (so every batch before it), checks the index, and compares the
/// subscriber's tree with the disk. Returns the tree's entry count.
fn checkpoint(
    m: &Manager,
    tree: &Path,
    marks: &Path,
    seen: &Mutex<Seen>,
    mark_rx: &channel::Receiver<PathBuf>,
    n: u64,
) -> Result<usize, String> {
    let mark = marks.join(format!("m{n}"));
    std::fs::write(&mark, b"m").map_err(|e| e.to_string())?;
    if n > 1 {
        std::fs::remove_file(marks.join(format!("m{}", n - 1))).ok();
    }
    m.sync("soak", Duration::from_secs(60))
        .map_err(|e| format!("checkpoint {n}: sync: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match mark_rx.recv_deadline(deadline) {
            Ok(p) if p == mark => break,
            Ok(_) => continue,
            Err(RecvTimeoutError::Timeout) => {
                return Err(format!(
                    "checkpoint {n}: the subscriber never got marker {} (2 min)",
                    mark.display()
                ));
            }
            Err(RecvTimeoutError::Disconnected) => return Err("the subscriber is gone".into()),
        }
    }
    let disk = listing(tree, false);
    let broken = index_problems(m);
    if !broken.is_empty() {
        return Err(format!("checkpoint {n}: index inconsistent: {broken:?}"));
    }
    let s = seen.lock().unwrap();
    if s.mirror != disk {
        let missing: Vec<_> = disk
            .0
            .iter()
            .filter(|(k, v)| s.mirror.0.get(*k) != Some(v))
            .collect();
        let extra: Vec<_> = s
            .mirror
            .0
            .iter()
            .filter(|(k, v)| disk.0.get(*k) != Some(v))
            .collect();
        return Err(format!(
            "checkpoint {n}: the subscriber's tree differs from the disk.\n on disk, not \
             received: {missing:?}\n received, not on disk: {extra:?}"
        ));
    }
    Ok(disk.0.len())
}
