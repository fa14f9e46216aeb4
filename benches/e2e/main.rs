//! End-to-end benchmark: specwatch (native and portable backends) beside raw
//! notify 9 (`RecommendedWatcher`, recursive) on the same freshly generated
//! trees, in the same run.
//!
//! ```sh
//! cargo bench --bench e2e            # all scenarios
//! cargo bench --bench e2e -- quick   # smaller trees
//! cargo bench --bench e2e -- poll    # the polling rows only
//! cargo bench --bench e2e -- scale   # 2,000 x 20 and 50,000 x 20
//! cargo bench --bench e2e -- many    # 1,000 specs on those trees (many.rs)
//! cargo bench --bench e2e -- overflow DIR DIRS  # recovery alone, on a scale tree
//! cargo bench --bench e2e -- restart # snapshots beside @parcel/watcher's (restart.rs)
//! cargo bench --bench e2e -- vcs SRC FROM TO  # a git checkout, vcs_settle off and on (vcs.rs)
//! cargo bench --bench e2e -- tree-burst [DIRS FILES] [hold] [native|auto]  # beside raw notify (tree_burst.rs)
//! # profile native start-up (10 runs on 10,000 x 10, or on DIR; each timed),
//! # with the binary whose path `cargo bench --bench e2e --no-run` prints:
//! perf record -g target/release/deps/e2e-HASH profile-startup [DIR [portable]]
//! ```
//!
//! Prints one table; every figure is measured in this run.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod hash;
mod many;
mod restart;
mod scale;
mod scenarios;
mod tree_burst;
mod vcs;

use scenarios::*;

use crossbeam_channel::unbounded;
use notify::{RecursiveMode, Watcher};
use specwatch::{Backend, ChangeKind, Event, IgnoreRule, Manager, WatchSpec};

fn make_tree(root: &Path, dirs: usize, files: usize) {
    // Two levels: 50-ish top directories holding the rest.
    for d in 0..dirs {
        let dir = root.join(format!("t{}", d % 50)).join(format!("d{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..files {
            std::fs::write(dir.join(format!("f{f}.txt")), b"x").unwrap();
        }
    }
}

/// A fresh tree of `dirs` x `files` and an empty directory beside it, in
/// a temporary directory (kept alive by the first value), and how many
/// entries the tree holds: files, leaf directories and the top
/// directories below the root.
fn tree(dirs: usize, files: usize) -> (tempfile::TempDir, PathBuf, PathBuf, usize) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("tree");
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    make_tree(&root, dirs, files);
    let entries = dirs * files + dirs + dirs.min(50);
    (tmp, root, empty, entries)
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// inotify descriptors open now.
fn inotify_fds() -> HashSet<std::ffi::OsString> {
    let mut out = HashSet::new();
    if let Ok(rd) = std::fs::read_dir("/proc/self/fdinfo") {
        for e in rd.flatten() {
            if std::fs::read(e.path()).is_ok_and(|b| b.windows(11).any(|w| w == b"inotify wd:"))
                || std::fs::read_link(format!("/proc/self/fd/{}", e.file_name().to_string_lossy()))
                    .is_ok_and(|l| l.to_string_lossy().contains("inotify"))
            {
                out.insert(e.file_name());
            }
        }
    }
    out
}

/// inotify watches held by descriptors not in `before` (a watcher dropped
/// earlier may still be closing its descriptor on its own thread).
fn new_inotify_watches(before: &HashSet<std::ffi::OsString>) -> usize {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir("/proc/self/fdinfo") {
        for e in rd.flatten() {
            if before.contains(&e.file_name()) {
                continue;
            }
            if let Ok(b) = std::fs::read(e.path()) {
                n += b
                    .split(|c| *c == b'\n')
                    .filter(|l| l.starts_with(b"inotify wd:"))
                    .count();
            }
        }
    }
    n
}

/// CPU time of this process so far (user + system), in ms.
#[cfg(unix)]
fn cpu_ms() -> f64 {
    // SAFETY: getrusage fills the struct we pass.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        let t = |tv: libc::timeval| tv.tv_sec as f64 * 1000.0 + tv.tv_usec as f64 / 1000.0;
        t(u.ru_utime) + t(u.ru_stime)
    }
}

/// No `getrusage` elsewhere: the idle-CPU rows show NaN.
#[cfg(not(unix))]
fn cpu_ms() -> f64 {
    f64::NAN
}

fn find_floor(root: &Path) -> Duration {
    let t = Instant::now();
    let out = std::process::Command::new("find")
        .arg(root)
        .output()
        .expect("find");
    assert!(out.status.success());
    t.elapsed()
}

/// The kernel's share of a native start-up: the same walk with one
/// `inotify_add_watch` per directory (the native backend's mask) before
/// reading it, and no index, no threads, nothing kept.
#[cfg(target_os = "linux")]
fn watch_floor(root: &Path) -> Duration {
    use inotify::{Inotify, WatchMask};
    fn walk(dir: &Path, ino: &Inotify) {
        let mask = WatchMask::from_bits_truncate(specwatch::bench_api::native_watch_mask());
        ino.watches().add(dir, mask).expect("inotify_add_watch");
        for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&e.path(), ino);
            }
        }
    }
    let ino = Inotify::init().expect("inotify_init");
    let t = Instant::now();
    walk(root, &ino);
    t.elapsed()
}

/// No inotify elsewhere: the floor row shows 0.
#[cfg(not(target_os = "linux"))]
fn watch_floor(_root: &Path) -> Duration {
    Duration::ZERO
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * p).round() as usize]
}

struct Row {
    what: String,
    notify: String,
    native: String,
    portable: String,
}

/// Prints `rows` as one table, the first column as wide as its longest
/// label.
fn print_table(rows: &[Row]) {
    let w = rows.iter().map(|r| r.what.len()).max().unwrap_or(0).max(62);
    println!(
        "| {:<w$} | {:>16} | {:>20} | {:>22} |",
        "measure", "raw notify", "specwatch native (x)", "specwatch portable (x)"
    );
    println!(
        "|{:-<w2$}|{:->18}|{:->22}|{:->24}|",
        "",
        "",
        "",
        "",
        w2 = w + 2
    );
    for r in rows {
        println!(
            "| {:<w$} | {:>16} | {:>20} | {:>22} |",
            r.what, r.notify, r.native, r.portable
        );
    }
}

/// Milliseconds, for the tables.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The start-up row of `size` (a tree's `dirs x files`): raw notify's
/// median, and specwatch's native and portable ones beside it.
fn startup_row(
    runs: usize,
    size: &str,
    floor: Duration,
    kernel: Duration,
    t: [Duration; 3],
) -> Row {
    let [tn, ts, tp] = t.map(ms);
    Row {
        what: format!(
            "start-up ms, median of {runs}, {size} (find: {:.1}; walk + watches: {:.1})",
            ms(floor),
            ms(kernel)
        ),
        notify: format!("{tn:.1}"),
        native: format!("{ts:.1} ({})", ratio(ts, tn)),
        portable: format!("{tp:.1} ({})", ratio(tp, tn)),
    }
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}", a / b)
    } else {
        "-".into()
    }
}

fn startup_specwatch(backend: Backend, root: &Path) -> (Duration, usize, Manager) {
    let w0 = inotify_fds();
    let t = Instant::now();
    let m = Manager::builder().backend(backend).build().unwrap();
    m.apply("b", WatchSpec::new([root])).unwrap();
    m.wait_watching("b", Duration::from_secs(120)).unwrap();
    let took = t.elapsed();
    let watches = new_inotify_watches(&w0);
    if std::env::var_os("BENCH_DEBUG").is_some() {
        eprintln!(
            "{backend:?}: fdinfo {watches}, stats {:?}",
            m.stats().unwrap()
        );
    }
    (took, watches, m)
}

fn startup_notify(root: &Path) -> (Duration, usize, notify::RecommendedWatcher) {
    let w0 = inotify_fds();
    let t = Instant::now();
    let mut w = notify::recommended_watcher(|_res: notify::Result<notify::Event>| {}).unwrap();
    w.watch(root, RecursiveMode::Recursive).unwrap();
    let took = t.elapsed();
    let watches = new_inotify_watches(&w0);
    (took, watches, w)
}

/// Start-ups of raw notify, native and portable on `root`, alternated
/// `runs` times: their medians, and the OS watches each held.
fn startups(root: &Path, runs: usize) -> ([Duration; 3], [usize; 3]) {
    let mut times: [Vec<Duration>; 3] = Default::default();
    let mut watches = [0; 3];
    for _ in 0..runs {
        let (t, w, wnot) = startup_notify(root);
        drop(wnot);
        times[0].push(t);
        watches[0] = w;
        for (i, b) in [(1, Backend::Native), (2, Backend::Portable)] {
            let (t, w, m) = startup_specwatch(b, root);
            drop(m);
            times[i].push(t);
            watches[i] = w;
        }
    }
    (times.map(median), watches)
}

/// Median of `runs` measurements.
fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Runs one memory measurement in a fresh process (this one's heap keeps
/// what earlier runs freed) and returns bytes per entry.
fn memory_in_child(which: &str, empty: &Path, root: &Path, entries: usize) -> f64 {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["mem", which])
        .arg(empty)
        .arg(root)
        .arg(entries.to_string())
        .output()
        .expect("run the memory child");
    assert!(
        out.status.success(),
        "memory child {which}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("the child prints one number")
}

/// The child's side of [`memory_in_child`].
fn memory_child(args: &[String]) {
    let [which, empty, root, entries] = args else {
        panic!("usage: bench mem native|portable|notify EMPTY ROOT ENTRIES");
    };
    let (empty, root) = (Path::new(empty), Path::new(root));
    let entries: usize = entries.parse().unwrap();
    let per = match which.as_str() {
        "native" => memory_specwatch(Backend::Native, empty, root, entries),
        "portable" => memory_specwatch(Backend::Portable, empty, root, entries),
        "poll" => memory_specwatch(POLL_IDLE, empty, root, entries),
        _ => memory_notify(empty, root, entries),
    };
    println!("{per:.1}");
}

/// Resident memory growth from watching `root`, over a watch of an empty
/// directory by the same watcher, per file and directory in the tree; once
/// a `sync` has returned (the engine has handled what start-up queued).
fn memory_specwatch(backend: Backend, empty: &Path, root: &Path, entries: usize) -> f64 {
    let m = Manager::builder().backend(backend).build().unwrap();
    m.apply("e", WatchSpec::new([empty])).unwrap();
    m.wait_watching("e", Duration::from_secs(30)).unwrap();
    m.sync("e", Duration::from_secs(30)).unwrap();
    let rss0 = rss_kib();
    m.apply("b", WatchSpec::new([root])).unwrap();
    m.wait_watching("b", Duration::from_secs(120)).unwrap();
    m.sync("b", Duration::from_secs(120)).unwrap();
    let grown = rss_kib().saturating_sub(rss0);
    let indexed = m.stats().unwrap().indexed_entries;
    assert!(indexed >= entries, "indexed {indexed} of {entries}");
    (grown * 1024) as f64 / entries as f64
}

fn memory_notify(empty: &Path, root: &Path, entries: usize) -> f64 {
    let mut w = notify::recommended_watcher(|_res: notify::Result<notify::Event>| {}).unwrap();
    w.watch(empty, RecursiveMode::Recursive).unwrap();
    let rss0 = rss_kib();
    w.watch(root, RecursiveMode::Recursive).unwrap();
    let grown = rss_kib().saturating_sub(rss0);
    drop(w);
    (grown * 1024) as f64 / entries as f64
}

/// Receives until a batch names `f`; panics after `timeout` without one.
fn await_change(rx: &crossbeam_channel::Receiver<Event>, f: &Path, timeout: Duration) {
    loop {
        match rx.recv_timeout(timeout) {
            Ok(Event::Changes(b)) if b.changes.iter().any(|c| c.path == f) => return,
            Ok(_) => {}
            Err(_) => panic!("no change of {} within {timeout:?}", f.display()),
        }
    }
}

fn latency_specwatch(backend: Backend, dir: &Path) -> (f64, f64) {
    let m = Manager::builder().backend(backend).build().unwrap();
    let rx = m.subscribe();
    m.apply("l", WatchSpec::new([dir]).quiet_window(Duration::ZERO))
        .unwrap();
    m.wait_watching("l", Duration::from_secs(30)).unwrap();
    let f = dir.join("lat.txt");
    let mut v = Vec::new();
    for i in 0..200 {
        let t = Instant::now();
        std::fs::write(&f, i.to_string()).unwrap();
        await_change(&rx, &f, Duration::from_secs(5));
        v.push(t.elapsed().as_secs_f64() * 1000.0);
        // Let the trailing events of this write (close, attrib) settle so
        // they do not answer the next write.
        while rx.recv_timeout(Duration::from_millis(2)).is_ok() {}
    }
    (pct(&mut v.clone(), 0.5), pct(&mut v, 0.99))
}

fn latency_notify(dir: &Path) -> (f64, f64) {
    let (tx, rx) = unbounded();
    let mut w = notify::recommended_watcher(move |r: notify::Result<notify::Event>| {
        let _ = tx.send(r);
    })
    .unwrap();
    w.watch(dir, RecursiveMode::Recursive).unwrap();
    let f = dir.join("lat.txt");
    let mut v = Vec::new();
    for i in 0..200 {
        let t = Instant::now();
        std::fs::write(&f, i.to_string()).unwrap();
        loop {
            let ev = rx
                .recv_timeout(Duration::from_secs(5))
                .expect("notify event")
                .unwrap();
            if ev.paths.contains(&f) && !ev.kind.is_access() {
                break;
            }
        }
        v.push(t.elapsed().as_secs_f64() * 1000.0);
        while rx.recv_timeout(Duration::from_millis(2)).is_ok() {}
    }
    (pct(&mut v.clone(), 0.5), pct(&mut v, 0.99))
}

/// Runs per start-up measurement (the median is shown).
const RUNS: usize = 5;

/// The poll backend as measured here: it looks only when a `sync` asks.
const POLL_IDLE: Backend = Backend::Poll {
    interval: Duration::from_secs(3600),
};

/// The floor of one poll: `find` printing what a poll compares (mtime,
/// size, inode) for every entry, output discarded.
fn find_printf_floor(root: &Path) -> Duration {
    let t = Instant::now();
    let out = std::process::Command::new("find")
        .arg(root)
        .args(["-printf", "%T@ %s %i\n"])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("find");
    assert!(out.success());
    t.elapsed()
}

/// One full poll of `root` by the poll backend, end to end: a `sync`
/// makes it look at every directory at once, and returns once that look
/// has been handled (cookie created, found, removed). Median of `RUNS`.
fn full_poll(m: &Manager) -> Duration {
    median(
        (0..RUNS)
            .map(|_| {
                let t = Instant::now();
                m.sync("b", Duration::from_secs(120)).unwrap();
                t.elapsed()
            })
            .collect(),
    )
}

/// The poll backend's rows: start-up, one full poll beside `find`'s
/// floor, the cost per 10,000 files, memory, idle CPU at a 1 s interval.
fn poll_rows(sizes: &[(usize, usize)]) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    for &(dirs, files) in sizes {
        let (_tmp, root, empty, entries) = tree(dirs, files);
        let (mut tn, mut tp) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            let (t, _, w) = startup_notify(&root);
            drop(w);
            tn.push(t);
            let (t, _, m) = startup_specwatch(POLL_IDLE, &root);
            drop(m);
            tp.push(t);
        }
        let (tn, tp) = (median(tn), median(tp));
        rows.push((
            format!(
                "start-up ms, median of {RUNS}, {dirs} x {files} (raw notify: {:.1})",
                ms(tn)
            ),
            format!("{:.1} ({})", ms(tp), ratio(ms(tp), ms(tn))),
        ));
        // Floor and polls alternate, so that all see the same cache state.
        // Two managers, one poller (the engine, through its scanner): one
        // that polls everything (`Backend::Poll`), and one that watches
        // natively with a spec that chose `Poll`.
        let (_, _, m) = startup_specwatch(POLL_IDLE, &root);
        let spec_poll = Manager::builder().backend(Backend::Native).build().unwrap();
        spec_poll
            .apply("b", WatchSpec::new([&root]).backend(POLL_IDLE))
            .unwrap();
        spec_poll
            .wait_watching("b", Duration::from_secs(120))
            .unwrap();
        let mut floors = Vec::new();
        let mut polls = Vec::new();
        let mut spec_polls = Vec::new();
        for _ in 0..3 {
            floors.push(median(
                (0..RUNS).map(|_| find_printf_floor(&root)).collect(),
            ));
            polls.push(full_poll(&m));
            spec_polls.push(full_poll(&spec_poll));
        }
        let (floor, poll, sp) = (median(floors), median(polls), median(spec_polls));
        drop(m);
        drop(spec_poll);
        rows.push((
            format!(
                "one full poll ms, {dirs} x {files} (find -printf '%T@ %s %i': {:.1})",
                ms(floor)
            ),
            format!("{:.1} ({})", ms(poll), ratio(ms(poll), ms(floor))),
        ));
        rows.push((
            format!("  per 10,000 entries, ms ({entries} entries)"),
            format!("{:.1}", ms(poll) * 10_000.0 / entries as f64),
        ));
        rows.push((
            format!("  a spec's Poll in a native manager (engine polls), {dirs} x {files}"),
            format!("{:.1} ({})", ms(sp), ratio(ms(sp), ms(floor))),
        ));
        let mem = memory_in_child("poll", &empty, &root, entries);
        rows.push((
            format!("RSS growth per entry over an empty watch, B, {dirs} x {files}"),
            format!("{mem:.0}"),
        ));
    }
    let idle = tempfile::tempdir().unwrap();
    make_tree(idle.path(), 200, 5);
    let ip = idle.path().to_path_buf();
    let cpu = idle_cpu_ms(move || {
        let m = Manager::builder()
            .backend(Backend::Poll {
                interval: Duration::from_secs(1),
            })
            .build()
            .unwrap();
        m.apply("i", WatchSpec::new([ip])).unwrap();
        m.wait_watching("i", Duration::from_secs(30)).unwrap();
        Box::new(m)
    });
    rows.push((
        "CPU ms over 5 idle s, 200 x 5, polled every 1 s".into(),
        format!("{cpu:.1}"),
    ));
    rows
}

fn main() {
    // (`cargo bench` adds `--bench`.)
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args.first().map(String::as_str) == Some("mem") {
        return memory_child(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("poll") {
        // The poll backend's rows only (`bench poll [quick]`).
        let sizes: &[(usize, usize)] = if args.iter().any(|a| a == "quick") {
            &[(500, 20)]
        } else {
            &[(2000, 20), (10000, 10)]
        };
        println!("| {:<78} | {:>22} |", "poll backend", "specwatch poll (x)");
        println!("|{:-<80}|{:->24}|", "", "");
        for (what, v) in poll_rows(sizes) {
            println!("| {what:<78} | {v:>22} |");
        }
        return;
    }
    if args.first().map(String::as_str) == Some("scale") {
        return scale::scale();
    }
    if args.first().map(String::as_str) == Some("files") {
        let (Some(dirs), Some(files)) = (
            args.get(1).and_then(|n| n.parse().ok()),
            args.get(2).and_then(|n| n.parse().ok()),
        ) else {
            eprintln!("usage: bench files DIRS FILES");
            std::process::exit(2);
        };
        return scale::files_only(dirs, files);
    }
    if args.first().map(String::as_str) == Some("overflow") {
        let (Some(dir), Some(dirs)) = (args.get(1), args.get(2).and_then(|n| n.parse().ok()))
        else {
            eprintln!("usage: bench overflow DIR DIRS");
            std::process::exit(2);
        };
        return scale::overflow_only(Path::new(dir), dirs);
    }
    if args.first().map(String::as_str) == Some("many") {
        return many::many(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("hash") {
        return hash::hash();
    }
    if args.first().map(String::as_str) == Some("vcs") {
        return vcs::vcs(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("tree-burst") {
        return tree_burst::tree_burst(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("restart") {
        return restart::restart(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("many-child") {
        return many::child(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("profile-startup") {
        // For `perf record`: native start-ups only, on one tree (a new
        // 10,000 x 10, or the directory given), each run's time printed.
        let tmp = tempfile::tempdir().unwrap();
        let root = match args.get(1) {
            Some(dir) => PathBuf::from(dir),
            None => {
                let root = tmp.path().join("tree");
                make_tree(&root, 10_000, 10);
                root
            }
        };
        let backend = match args.get(2).map(String::as_str) {
            Some("portable") => Backend::Portable,
            _ => Backend::Native,
        };
        for _ in 0..10 {
            let (took, _, m) = startup_specwatch(backend, &root);
            drop(m);
            println!(
                "start-up {backend:?}: {:.1} ms",
                took.as_secs_f64() * 1000.0
            );
        }
        return;
    }
    let quick = args.iter().any(|a| a == "quick");
    let sizes: &[(usize, usize)] = if quick {
        &[(500, 20)]
    } else {
        &[(2000, 20), (10000, 10)]
    };
    let mut rows = Vec::new();
    for &(dirs, files) in sizes {
        let (_tmp, root, empty, entries) = tree(dirs, files);
        let floor = median((0..RUNS).map(|_| find_floor(&root)).collect());
        let kernel = median((0..RUNS).map(|_| watch_floor(&root)).collect());
        let ([tn, ts, tp], [wn, ws, wp]) = startups(&root, RUNS);
        let mem_n = memory_in_child("notify", &empty, &root, entries);
        let mem_s = memory_in_child("native", &empty, &root, entries);
        let mem_p = memory_in_child("portable", &empty, &root, entries);
        rows.push(startup_row(
            RUNS,
            &format!("{dirs} x {files}"),
            floor,
            kernel,
            [tn, ts, tp],
        ));
        rows.push(Row {
            what: format!("OS watches, {dirs} x {files}"),
            notify: wn.to_string(),
            native: ws.to_string(),
            portable: wp.to_string(),
        });
        rows.push(Row {
            what: format!("RSS growth per entry over an empty watch, B, {dirs} x {files}"),
            notify: format!("{mem_n:.0}"),
            native: format!("{mem_s:.0}"),
            portable: format!("{mem_p:.0}"),
        });
    }
    let lat = tempfile::tempdir().unwrap();
    let (n50, n99) = latency_notify(lat.path());
    let (s50, s99) = latency_specwatch(Backend::Native, lat.path());
    let (p50, p99) = latency_specwatch(Backend::Portable, lat.path());
    rows.push(Row {
        what: "latency ms p50 / p99 (quiet window 0)".into(),
        notify: format!("{n50:.3} / {n99:.3}"),
        native: format!("{s50:.3} / {s99:.3}"),
        portable: format!("{p50:.3} / {p99:.3}"),
    });
    let [(bn, bnt), (bs, bst), (bp, bpt)] = three_ways(burst_notify, burst_specwatch);
    rows.push(Row {
        what: "burst 100 dirs x 50 files: reported / 5000, ms after last write".into(),
        notify: format!("{bn} / {bnt:.0}"),
        native: format!("{bs} / {bst:.0}"),
        portable: format!("{bp} / {bpt:.0}"),
    });
    let [(rn, rnc), (rs, rsc), (rp, rpc)] = three_ways(rewrite_notify, rewrite_specwatch);
    rows.push(Row {
        what: "10,000 files rewritten: distinct reported / changes per file".into(),
        notify: format!("{rn} / {rnc:.2}"),
        native: format!("{rs} / {rsc:.2}"),
        portable: format!("{rp} / {rpc:.2}"),
    });
    if !quick {
        let nm = tempfile::tempdir().unwrap();
        node_modules_tree(nm.path());
        let n = node_modules_notify(nm.path());
        let s = node_modules_specwatch(Backend::Native, nm.path());
        let p = node_modules_specwatch(Backend::Portable, nm.path());
        rows.push(Row {
            what: "ignored node_modules/ (5,000 x 10), src/ 200 x 10: start-up ms".into(),
            notify: format!("{:.1}", ms(n.startup)),
            native: format!(
                "{:.1} ({})",
                ms(s.startup),
                ratio(ms(s.startup), ms(n.startup))
            ),
            portable: format!(
                "{:.1} ({})",
                ms(p.startup),
                ratio(ms(p.startup), ms(n.startup))
            ),
        });
        rows.push(Row {
            what: "  OS watches held".into(),
            notify: n.watches.to_string(),
            native: s.watches.to_string(),
            portable: p.watches.to_string(),
        });
        rows.push(Row {
            what: "  writes in node_modules/: OS events / changes reported".into(),
            notify: format!("{} / {}", n.os_events, n.leaked),
            native: format!("{} / {}", s.os_events, s.leaked),
            portable: format!("{} / {}", p.os_events, p.leaked),
        });
    }
    let idle = tempfile::tempdir().unwrap();
    make_tree(idle.path(), 200, 5);
    let ip = idle.path().to_path_buf();
    let i_n = idle_cpu_ms(|| {
        let mut w = notify::recommended_watcher(|_r: notify::Result<notify::Event>| {}).unwrap();
        w.watch(&ip, RecursiveMode::Recursive).unwrap();
        Box::new(w)
    });
    let ip2 = idle.path().to_path_buf();
    let i_s = idle_cpu_ms(move || {
        let m = Manager::new().unwrap();
        m.apply("i", WatchSpec::new([ip2])).unwrap();
        m.wait_watching("i", Duration::from_secs(30)).unwrap();
        Box::new(m)
    });
    rows.push(Row {
        what: "CPU ms over 5 idle s".into(),
        notify: format!("{i_n:.1}"),
        native: format!("{i_s:.1}"),
        portable: "-".into(),
    });
    print_table(&rows);
    println!();
    println!("| {:<78} | {:>22} |", "poll backend", "specwatch poll (x)");
    println!("|{:-<80}|{:->24}|", "", "");
    for (what, v) in poll_rows(sizes) {
        println!("| {what:<78} | {v:>22} |");
    }
}
