//! The scenarios of the full run beside raw notify: a burst of new
//! directories, every file rewritten, a huge ignored `node_modules/`, idle
//! CPU.

use super::*;

/// Writes `files` files with `content` into each of `dirs` directories
/// (`dir(i)` below `root`), creating them; returns the files' paths.
pub(super) fn write_files(
    root: &Path,
    dirs: usize,
    dir: impl Fn(usize) -> PathBuf,
    files: usize,
    content: &str,
) -> Vec<PathBuf> {
    let mut all = Vec::new();
    for i in 0..dirs {
        let d = root.join(dir(i));
        std::fs::create_dir_all(&d).unwrap();
        for j in 0..files {
            let f = d.join(format!("f{j}.rs"));
            std::fs::write(&f, content).unwrap();
            all.push(f);
        }
    }
    all
}

pub(super) fn burst_files(root: &Path) -> Vec<PathBuf> {
    write_files(
        root,
        100,
        |i| Path::new(&format!("b{i}")).join("inner"),
        50,
        "x",
    )
}

/// Reported paths out of 5,000 and ms from the last write to the last
/// report (waiting until 1 s passes without news).
/// Writes the burst, then counts the burst files among the paths each
/// received item yields, until all are seen or 1 s passes without news.
pub(super) fn count_burst<T>(
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

pub(super) fn burst_specwatch(backend: Backend, root: &Path) -> (usize, f64) {
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

pub(super) fn burst_notify(root: &Path) -> (usize, f64) {
    let (tx, rx) = unbounded();
    let mut w = notify::recommended_watcher(move |r: notify::Result<notify::Event>| {
        let _ = tx.send(r);
    })
    .unwrap();
    w.watch(root, RecursiveMode::Recursive).unwrap();
    count_burst(root, &rx, |ev| ev.map(|e| e.paths).unwrap_or_default())
}

/// 100 directories of 100 files each, for the rewrite scenario.
pub(super) fn rewrite_tree(root: &Path) -> Vec<PathBuf> {
    write_files(
        root,
        100,
        |i| PathBuf::from(format!("r{i}")),
        100,
        "fn main() {}\n",
    )
}

/// Changes (or events) counted per rewritten file: distinct files seen and
/// the mean count per file seen.
pub(super) fn per_file(counts: &std::collections::HashMap<PathBuf, usize>) -> (usize, f64) {
    let total: usize = counts.values().sum();
    (counts.len(), total as f64 / counts.len().max(1) as f64)
}

/// Every file rewritten once, as fast as the loop goes, at the default
/// quiet window; `sync` then guarantees every change was delivered.
pub(super) fn rewrite_specwatch(backend: Backend, root: &Path) -> (usize, f64) {
    let files = rewrite_tree(root);
    let want: HashSet<&PathBuf> = files.iter().collect();
    let m = Manager::builder().backend(backend).build().unwrap();
    let rx = m.subscribe();
    m.apply("r", WatchSpec::new([root])).unwrap();
    m.wait_watching("r", Duration::from_secs(30)).unwrap();
    for f in &files {
        std::fs::write(f, "fn main() { println!(); }\n").unwrap();
    }
    m.sync("r", Duration::from_secs(60)).unwrap();
    let mut counts = std::collections::HashMap::new();
    while let Ok(ev) = rx.recv_timeout(Duration::from_millis(200)) {
        if let Event::Changes(b) = ev {
            for c in &b.changes {
                if want.contains(&c.path) {
                    *counts.entry(c.path.clone()).or_insert(0) += 1;
                }
            }
        }
    }
    per_file(&counts)
}

/// The same with raw notify: events (access events left out) per file,
/// until a marker written last has been seen and 200 ms passed quietly.
pub(super) fn rewrite_notify(root: &Path) -> (usize, f64) {
    let files = rewrite_tree(root);
    let want: HashSet<&PathBuf> = files.iter().collect();
    let (tx, rx) = unbounded();
    let mut w = notify::recommended_watcher(move |r: notify::Result<notify::Event>| {
        let _ = tx.send(r);
    })
    .unwrap();
    w.watch(root, RecursiveMode::Recursive).unwrap();
    for f in &files {
        std::fs::write(f, "fn main() { println!(); }\n").unwrap();
    }
    let mut counts = std::collections::HashMap::new();
    notify_until_marker(&rx, &root.join("marker"), |ev| {
        for p in &ev.paths {
            if want.contains(p) {
                *counts.entry(p.clone()).or_insert(0) += 1;
            }
        }
    });
    per_file(&counts)
}

/// A project with a small `src/` and a big `node_modules/` (5,000
/// directories x 10 files) that the spec ignores.
pub(super) fn node_modules_tree(root: &Path) {
    make_tree(&root.join("src"), 200, 10);
    make_tree(&root.join("node_modules"), 5_000, 10);
}

/// What the writes inside `node_modules/` cost: 1,000 rewrites, a new
/// package directory with 50 files.
pub(super) fn write_node_modules(root: &Path) {
    let nm = root.join("node_modules");
    for d in 0..1_000 {
        std::fs::write(
            nm.join(format!("t{}", d % 50))
                .join(format!("d{d}"))
                .join("f0.txt"),
            "y",
        )
        .unwrap();
    }
    let new = nm.join("new-package/lib");
    std::fs::create_dir_all(&new).unwrap();
    for f in 0..50 {
        std::fs::write(new.join(format!("m{f}.js")), "").unwrap();
    }
}

pub(super) struct NodeModules {
    pub startup: Duration,
    pub watches: usize,
    /// OS events the writes in `node_modules/` added.
    pub os_events: u64,
    /// Changes reported below `node_modules/`.
    pub leaked: usize,
}

/// Writes `src/<name>` and waits until the change arrives; returns the OS
/// events counted then (200 ms later, for the file's trailing events).
pub(super) fn src_write_events(
    m: &Manager,
    rx: &crossbeam_channel::Receiver<Event>,
    f: &Path,
) -> u64 {
    std::fs::write(f, "x").unwrap();
    await_change(rx, f, Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(200));
    m.stats().unwrap().os_events
}

pub(super) fn node_modules_specwatch(backend: Backend, root: &Path) -> NodeModules {
    let w0 = inotify_fds();
    let t = Instant::now();
    let m = Manager::builder().backend(backend).build().unwrap();
    let rx = m.subscribe();
    let spec = WatchSpec::new([root]).ignore(IgnoreRule::new(root, ["node_modules/"]));
    m.apply("n", spec).unwrap();
    m.wait_watching("n", Duration::from_secs(120)).unwrap();
    let startup = t.elapsed();
    let watches = new_inotify_watches(&w0);
    let src = root.join("src");
    // A src write alone, then the node_modules writes and the same src
    // write: the difference is what node_modules cost.
    let e0 = m.stats().unwrap().os_events;
    let e1 = src_write_events(&m, &rx, &src.join("a.txt"));
    write_node_modules(root);
    let e2 = src_write_events(&m, &rx, &src.join("b.txt"));
    m.sync("n", Duration::from_secs(30)).unwrap();
    let nm = root.join("node_modules");
    let mut leaked = 0;
    while let Ok(ev) = rx.recv_timeout(Duration::from_millis(200)) {
        if let Event::Changes(b) = ev {
            leaked += b.changes.iter().filter(|c| c.path.starts_with(&nm)).count();
        }
    }
    NodeModules {
        startup,
        watches,
        os_events: (e2 - e1).saturating_sub(e1 - e0),
        leaked,
    }
}

pub(super) fn node_modules_notify(root: &Path) -> NodeModules {
    let w0 = inotify_fds();
    let (tx, rx) = unbounded();
    let t = Instant::now();
    let mut w = notify::recommended_watcher(move |r: notify::Result<notify::Event>| {
        let _ = tx.send(r);
    })
    .unwrap();
    w.watch(root, RecursiveMode::Recursive).unwrap();
    let startup = t.elapsed();
    let watches = new_inotify_watches(&w0);
    write_node_modules(root);
    let nm = root.join("node_modules");
    let mut events = 0u64;
    notify_until_marker(&rx, &root.join("src/marker"), |ev| {
        if ev.paths.iter().any(|p| p.starts_with(&nm)) {
            events += 1;
        }
    });
    // notify has no ignore rules: every event below node_modules reaches
    // the handler, and every one is a leak.
    NodeModules {
        startup,
        watches,
        os_events: events,
        leaked: events as usize,
    }
}

pub(super) fn idle_cpu_ms(f: impl FnOnce() -> Box<dyn std::any::Any>) -> f64 {
    let keep = f();
    std::thread::sleep(Duration::from_millis(300));
    let c0 = cpu_ms();
    std::thread::sleep(Duration::from_secs(5));
    let used = cpu_ms() - c0;
    drop(keep);
    used
}

/// Runs a scenario with raw notify, then specwatch native and portable,
/// each in a fresh temporary directory.
pub(super) fn three_ways<T>(
    notify: impl FnOnce(&Path) -> T,
    specwatch: impl Fn(Backend, &Path) -> T,
) -> [T; 3] {
    let dirs = [(); 3].map(|_| tempfile::tempdir().unwrap());
    [
        notify(dirs[0].path()),
        specwatch(Backend::Native, dirs[1].path()),
        specwatch(Backend::Portable, dirs[2].path()),
    ]
}

/// Feeds `f` every non-access notify event until `marker` (written after
/// the scenario's writes) has shown up and 200 ms passed without events.
pub(super) fn notify_until_marker(
    rx: &crossbeam_channel::Receiver<notify::Result<notify::Event>>,
    marker: &Path,
    mut f: impl FnMut(&notify::Event),
) {
    std::fs::write(marker, "").unwrap();
    let mut marked = false;
    loop {
        let wait = Duration::from_millis(if marked { 200 } else { 30_000 });
        let ev = match rx.recv_timeout(wait) {
            Ok(Ok(ev)) => ev,
            Ok(Err(_)) => continue,
            Err(_) => break,
        };
        if ev.kind.is_access() {
            continue;
        }
        marked |= ev.paths.iter().any(|p| p == marker);
        f(&ev);
    }
}
