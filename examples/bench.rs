//! End-to-end benchmark: specwatch (native and portable backends) beside raw
//! notify 8.2 (`RecommendedWatcher`, recursive) on the same freshly generated
//! trees, in the same run.
//!
//! ```sh
//! cargo run --release --example bench            # all scenarios
//! cargo run --release --example bench -- quick   # smaller trees
//! # profile native start-up (10 runs on 10,000 x 10):
//! perf record -g target/release/examples/bench profile-startup
//! ```
//!
//! Prints one table; every figure is measured in this run. What is not
//! measured yet (see the performance issue): memory per file of a compact
//! index, the 10,000-rewrite scenario, `node_modules` leaks.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crossbeam_channel::unbounded;
use notify::{RecursiveMode, Watcher};
use specwatch::{Backend, ChangeKind, Event, Manager, WatchSpec};

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

fn cpu_ms() -> f64 {
    // SAFETY: getrusage fills the struct we pass.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        let t = |tv: libc::timeval| tv.tv_sec as f64 * 1000.0 + tv.tv_usec as f64 / 1000.0;
        t(u.ru_utime) + t(u.ru_stime)
    }
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
        eprintln!("{backend:?}: fdinfo {watches}, stats {:?}", m.stats());
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
        _ => memory_notify(empty, root, entries),
    };
    println!("{per:.1}");
}

/// Resident memory growth from watching `root`, over a watch of an empty
/// directory by the same watcher, per file and directory in the tree.
fn memory_specwatch(backend: Backend, empty: &Path, root: &Path, entries: usize) -> f64 {
    let m = Manager::builder().backend(backend).build().unwrap();
    m.apply("e", WatchSpec::new([empty])).unwrap();
    m.wait_watching("e", Duration::from_secs(30)).unwrap();
    let rss0 = rss_kib();
    m.apply("b", WatchSpec::new([root])).unwrap();
    m.wait_watching("b", Duration::from_secs(120)).unwrap();
    let grown = rss_kib().saturating_sub(rss0);
    let indexed = m.stats().indexed_entries;
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
        loop {
            match rx
                .recv_timeout(Duration::from_secs(5))
                .expect("latency event")
            {
                Event::Changes(b) if b.changes.iter().any(|c| c.path == f) => break,
                _ => {}
            }
        }
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

fn burst_files(root: &Path) -> Vec<PathBuf> {
    let mut all = Vec::new();
    for i in 0..100 {
        let dir = root.join(format!("b{i}")).join("inner");
        std::fs::create_dir_all(&dir).unwrap();
        for j in 0..50 {
            let f = dir.join(format!("f{j}"));
            std::fs::write(&f, "x").unwrap();
            all.push(f);
        }
    }
    all
}

/// Reported paths out of 5,000 and ms from the last write to the last
/// report (waiting until 1 s passes without news).
/// Writes the burst, then counts the burst files among the paths each
/// received item yields, until all are seen or 1 s passes without news.
fn count_burst<T>(
    root: &Path,
    rx: &crossbeam_channel::Receiver<T>,
    paths: impl Fn(T) -> Vec<PathBuf>,
) -> (usize, f64) {
    let want: HashSet<PathBuf> = burst_files(root).into_iter().collect();
    let done = Instant::now();
    let mut seen = HashSet::new();
    let mut last = done;
    while let Ok(item) = rx.recv_timeout(Duration::from_secs(1)) {
        for p in paths(item) {
            if want.contains(&p) && seen.insert(p) {
                last = Instant::now();
            }
        }
        if seen.len() == want.len() {
            break;
        }
    }
    (seen.len(), last.duration_since(done).as_secs_f64() * 1000.0)
}

fn burst_specwatch(backend: Backend, root: &Path) -> (usize, f64) {
    let m = Manager::builder().backend(backend).build().unwrap();
    let rx = m.subscribe();
    m.apply("b", WatchSpec::new([root])).unwrap();
    m.wait_watching("b", Duration::from_secs(30)).unwrap();
    count_burst(root, &rx, |ev| match ev {
        Event::Changes(b) => b
            .changes
            .iter()
            .filter(|c| c.kind == ChangeKind::Created)
            .map(|c| c.path.clone())
            .collect(),
        _ => Vec::new(),
    })
}

fn burst_notify(root: &Path) -> (usize, f64) {
    let (tx, rx) = unbounded();
    let mut w = notify::recommended_watcher(move |r: notify::Result<notify::Event>| {
        let _ = tx.send(r);
    })
    .unwrap();
    w.watch(root, RecursiveMode::Recursive).unwrap();
    count_burst(root, &rx, |ev| ev.map(|e| e.paths).unwrap_or_default())
}

fn idle_cpu_ms(f: impl FnOnce() -> Box<dyn std::any::Any>) -> f64 {
    let keep = f();
    std::thread::sleep(Duration::from_millis(300));
    let c0 = cpu_ms();
    std::thread::sleep(Duration::from_secs(5));
    let used = cpu_ms() - c0;
    drop(keep);
    used
}

/// Runs per start-up measurement (the median is shown).
const RUNS: usize = 5;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("mem") {
        return memory_child(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("profile-startup") {
        // For `perf record`: native start-ups only, on one tree.
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("tree");
        make_tree(&root, 10_000, 10);
        for _ in 0..10 {
            drop(startup_specwatch(Backend::Native, &root));
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
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("tree");
        let empty = tmp.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        make_tree(&root, dirs, files);
        // Files, leaf directories and the top directories below the root.
        let entries = dirs * files + dirs + dirs.min(50);
        let floor = median((0..RUNS).map(|_| find_floor(&root)).collect());
        let (mut tn, mut ts, mut tp) = (Vec::new(), Vec::new(), Vec::new());
        let (mut wn, mut ws, mut wp) = (0, 0, 0);
        for _ in 0..RUNS {
            let (t, w, wnot) = startup_notify(&root);
            drop(wnot);
            tn.push(t);
            wn = w;
            let (t, w, m) = startup_specwatch(Backend::Native, &root);
            drop(m);
            ts.push(t);
            ws = w;
            let (t, w, m) = startup_specwatch(Backend::Portable, &root);
            drop(m);
            tp.push(t);
            wp = w;
        }
        let (tn, ts, tp) = (median(tn), median(ts), median(tp));
        let mem_n = memory_in_child("notify", &empty, &root, entries);
        let mem_s = memory_in_child("native", &empty, &root, entries);
        let mem_p = memory_in_child("portable", &empty, &root, entries);
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        rows.push(Row {
            what: format!(
                "start-up ms, median of {RUNS}, {dirs} x {files} (find: {:.1})",
                ms(floor)
            ),
            notify: format!("{:.1}", ms(tn)),
            native: format!("{:.1} ({})", ms(ts), ratio(ms(ts), ms(tn))),
            portable: format!("{:.1} ({})", ms(tp), ratio(ms(tp), ms(tn))),
        });
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
    let b = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let (bn, bnt) = burst_notify(b.0.path());
    let (bs, bst) = burst_specwatch(Backend::Native, b.1.path());
    let (bp, bpt) = burst_specwatch(Backend::Portable, b.2.path());
    rows.push(Row {
        what: "burst 100 dirs x 50 files: reported / 5000, ms after last write".into(),
        notify: format!("{bn} / {bnt:.0}"),
        native: format!("{bs} / {bst:.0}"),
        portable: format!("{bp} / {bpt:.0}"),
    });
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
    println!(
        "| {:<62} | {:>16} | {:>20} | {:>20} |",
        "measure", "raw notify", "specwatch native (x)", "specwatch portable (x)"
    );
    println!("|{:-<64}|{:->18}|{:->22}|{:->22}|", "", "", "", "");
    for r in rows {
        println!(
            "| {:<62} | {:>16} | {:>20} | {:>20} |",
            r.what, r.notify, r.native, r.portable
        );
    }
}
