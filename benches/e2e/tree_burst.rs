//! A burst and rewrites in a big watched tree, specwatch's portable backend
//! beside a raw notify watcher of the same tree in the same process: the
//! Windows build's figures under Wine (PLATFORMS.md; runs on Linux
//! too).
//!
//! ```sh
//! cargo bench --bench e2e -- tree-burst [DIRS FILES] [hold] [native|auto]
//! ```
//!
//! A tree of DIRS x FILES (default 2,000 x 20: 42,050 entries) is watched;
//! then 5,000 files are written into 100 new directories, and 10,000 of
//! the tree's files are rewritten, each step ended by a `sync`. With
//! `hold`, notify's thread of the manager is held (a test hook) while the
//! burst is written, so that its OS buffer overflows for real. With
//! `native` or `auto`, specwatch runs on that backend (the Linux build's
//! default is `auto`: inotify); the raw notify watcher is there either way.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use super::*;

/// A raw watcher's paths named and rescans told.
struct Raw {
    _watcher: notify::RecommendedWatcher,
    paths: Arc<Mutex<HashSet<PathBuf>>>,
    rescans: Arc<Mutex<usize>>,
}

impl Raw {
    fn start(root: &Path) -> Raw {
        let paths = Arc::new(Mutex::new(HashSet::new()));
        let rescans = Arc::new(Mutex::new(0));
        let (p, r) = (paths.clone(), rescans.clone());
        let mut w = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
            if let Ok(e) = e {
                *r.lock().unwrap() += usize::from(e.need_rescan());
                p.lock().unwrap().extend(e.paths);
            }
        })
        .unwrap();
        w.watch(root, RecursiveMode::Recursive).unwrap();
        Raw {
            _watcher: w,
            paths,
            rescans,
        }
    }

    /// How many of `want` it named since the last call (then forgets).
    fn named(&self, want: &HashSet<PathBuf>) -> usize {
        let mut p = self.paths.lock().unwrap();
        let n = want.iter().filter(|w| p.contains(*w)).count();
        p.clear();
        n
    }
}

/// Adds to `seen` the paths of `want` that `rx` reports (any kind),
/// until `want` is all seen, or nothing comes for `quiet`, or `until`.
fn reported(
    rx: &crossbeam_channel::Receiver<Event>,
    want: &HashSet<PathBuf>,
    seen: &mut HashSet<PathBuf>,
    quiet: Duration,
    until: Instant,
) {
    while seen.len() < want.len() {
        let wait = quiet.min(until.saturating_duration_since(Instant::now()));
        let Ok(ev) = rx.recv_timeout(wait) else {
            return;
        };
        if let Event::Changes(b) = ev {
            seen.extend(
                b.changes
                    .iter()
                    .filter(|c| want.contains(&c.path))
                    .map(|c| c.path.clone()),
            );
        }
    }
}

pub(super) fn tree_burst(args: &[String]) {
    let num = |i: usize, default| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (dirs, files) = (num(0, 2000), num(1, 20));
    let hold = args.iter().any(|a| a == "hold");
    let backend = if args.iter().any(|a| a == "native") {
        Backend::Native
    } else if args.iter().any(|a| a == "auto") {
        Backend::Auto
    } else {
        Backend::Portable
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("tree");
    make_tree(&root, dirs, files);
    let m = Manager::builder().backend(backend).build().unwrap();
    println!("specwatch on {backend:?}, a tree of {dirs} x {files}, hold: {hold}");
    let rx = m.subscribe();
    m.apply("b", WatchSpec::new([&root])).unwrap();
    m.wait_watching("b", Duration::from_secs(600)).unwrap();
    let raw = Raw::start(&root);
    m.sync("b", Duration::from_secs(60)).unwrap();
    while rx.try_recv().is_ok() {}
    raw.paths.lock().unwrap().clear();
    let step = |what: &str, write: &dyn Fn() -> Vec<PathBuf>| {
        let want: HashSet<PathBuf> = write().into_iter().collect();
        let written = Instant::now();
        let synced = m.sync("b", Duration::from_secs(120));
        let mut seen = HashSet::new();
        let quiet = Duration::from_millis(500);
        reported(&rx, &want, &mut seen, quiet, Instant::now() + quiet);
        let st = m.status("b").unwrap();
        println!(
            "{what}: specwatch {} / {} (sync {} after {:.1} s; overflow recoveries {}; \
             phase {:?}); raw notify named {} (rescans told so far {})",
            seen.len(),
            want.len(),
            if synced.is_ok() { "ok" } else { "timed out" },
            written.elapsed().as_secs_f64(),
            st.overflow_recoveries,
            st.phase,
            raw.named(&want),
            raw.rescans.lock().unwrap()
        );
        if seen.len() < want.len() {
            // Lost, or late: waits up to 10 minutes more.
            let at = Instant::now() + Duration::from_secs(600);
            reported(&rx, &want, &mut seen, Duration::from_secs(600), at);
            let st = m.status("b").unwrap();
            println!(
                "  then: {} / {} {:.1} s after the writes (overflow recoveries {}; phase {:?}; \
                 last error {:?}); {:?}",
                seen.len(),
                want.len(),
                written.elapsed().as_secs_f64(),
                st.overflow_recoveries,
                st.phase,
                st.last_error,
                m.stats()
            );
        }
    };
    step("burst of 100 new directories x 50 files", &|| {
        if hold {
            m.hold_os_thread(true);
        }
        let written = burst_files(&root);
        if hold {
            m.hold_os_thread(false);
        }
        written
    });
    step("10,000 files of the tree rewritten", &|| {
        let old: Vec<PathBuf> = (0..dirs)
            .flat_map(|d| {
                let dir = root.join(format!("t{}", d % 50)).join(format!("d{d}"));
                (0..files).map(move |f| dir.join(format!("f{f}.txt")))
            })
            .take(10_000)
            .collect();
        for f in &old {
            std::fs::write(f, "rewritten").unwrap();
        }
        old
    });
}
