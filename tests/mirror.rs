//! The core test: seeded random file operations against a watched tree while
//! a consumer rebuilds the tree from change batches. After every `sync` the
//! rebuilt tree equals a fresh listing of the disk, and every file written
//! since the previous checkpoint was reported.
//!
//! Environment: `SPECWATCH_SEED` (one seed; default: a few fixed ones),
//! `SPECWATCH_OPS` (operations per seed; default 2000). Odd seeds walk in
//! batches of 3 directories with a reader thread from the first read on (by
//! default only big trees do), so that the small trees here race the
//! reader thread too. The soak run:
//!
//! ```sh
//! SPECWATCH_SEED=7 SPECWATCH_OPS=200000 cargo test --release --test mirror -- --nocapture
//! ```

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::workload::*;
use common::*;
use specwatch::{Backend, ChangeKind, FileType, WatchSpec};

/// Paths named, each with whether it was a removal.
type Named = Vec<(PathBuf, bool)>;

/// Under Wine, what a raw notify watcher of the tree was told, so that a
/// mismatch can be laid at the right door. Wine's emulation of
/// ReadDirectoryChangesW loses events that Windows' own does not (a
/// directory's creation or removal in a burst, changes below a directory
/// renamed within the tree, reported under its old path): a path the
/// engine got wrong that no raw event ever named is a loss of the OS layer;
/// any other is specwatch's, and fails the test as everywhere.
///
/// Its limits: it watches through a handle of its own, whose queue Wine may
/// drop apart from the engine's (an error from it makes every mismatch
/// specwatch's); and a path missing below a directory the engine did
/// report, none of whose events Wine gave, is laid at Wine's door even if
/// the engine's walk of that directory was at fault. That walk is the
/// engine's, tested exactly on Linux and by the poll variants here.
struct Witness {
    /// Every path named since the last checkpoint, with whether it was a
    /// removal; `None` once the watcher reported an error (events lost).
    named: std::sync::Arc<std::sync::Mutex<Option<Named>>>,
    /// The watcher (it watches the tree's parent: its marker is outside
    /// the tree).
    _watcher: notify::RecommendedWatcher,
    dir: PathBuf,
}

impl Witness {
    fn start(dir: &Path) -> Witness {
        use notify::Watcher;
        let named = std::sync::Arc::new(std::sync::Mutex::new(Some(Vec::new())));
        let to = named.clone();
        let mut watcher = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
            let mut to = to.lock().unwrap();
            match (e, to.as_mut()) {
                (Ok(e), Some(to)) if !e.need_rescan() => {
                    let removal = matches!(e.kind, notify::EventKind::Remove(_));
                    to.extend(e.paths.into_iter().map(|p| (p, removal)));
                }
                _ => *to = None,
            }
        })
        .expect("the witness's watcher starts");
        watcher
            .watch(dir, notify::RecursiveMode::Recursive)
            .expect("the witness watches");
        Witness {
            named,
            _watcher: watcher,
            dir: dir.to_path_buf(),
        }
    }

    fn clear(&self) {
        if let Some(named) = self.named.lock().unwrap().as_mut() {
            named.clear();
        }
    }

    /// Waits until the witness has been told of everything done before:
    /// a marker beside the tree (one watch, one ordered stream of events).
    fn catch_up(&self) {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let marker = self.dir.join(format!("witness-{n}"));
        fs::write(&marker, "w").unwrap();
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            match self.named.lock().unwrap().as_ref() {
                None => return,
                Some(named) if named.iter().any(|(p, _)| *p == marker) => return,
                Some(_) => {}
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the witness never saw its marker {}",
                marker.display()
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Whether a raw event named `p` itself (or the witness lost events:
    /// then it can excuse nothing).
    fn named(&self, p: &Path) -> bool {
        self.catch_up();
        match self.named.lock().unwrap().as_ref() {
            Some(named) => named.iter().any(|(q, _)| q == p),
            None => true,
        }
    }

    /// The wrong paths of `mirror` against `disk`, if a raw event never
    /// named any of them (for one missing from the mirror: neither it nor
    /// anything created or written below it, which would have led the
    /// engine there); `None` if one was named: specwatch's to explain.
    fn explains(&self, mirror: &Mirror, disk: &Mirror) -> Option<Vec<PathBuf>> {
        self.catch_up();
        let named = self.named.lock().unwrap();
        let named = named.as_ref()?;
        let mut wrong = Vec::new();
        for (p, t) in &disk.0 {
            match mirror.0.get(p) {
                Some(m) if m == t => continue,
                // Another type: only an event naming it says so.
                Some(_) if named.iter().any(|(q, _)| q == p) => return None,
                None if named
                    .iter()
                    .any(|(q, removal)| q.starts_with(p) && !removal) =>
                {
                    return None;
                }
                _ => wrong.push(p.clone()),
            }
        }
        for p in mirror.0.keys().filter(|p| !disk.0.contains_key(*p)) {
            if named.iter().any(|(q, _)| q == p) {
                return None;
            }
            wrong.push(p.clone());
        }
        Some(wrong)
    }
}

fn seeds() -> Vec<u64> {
    match std::env::var("SPECWATCH_SEED") {
        Ok(s) => vec![s.parse().expect("SPECWATCH_SEED is a number")],
        Err(_) => vec![1, 2, 3],
    }
}

fn ops() -> usize {
    std::env::var("SPECWATCH_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000)
}

fn run(backend: Backend, seed: u64, n: usize) {
    run_with(backend, seed, n, None, false)
}

fn run_with(backend: Backend, seed: u64, n: usize, cap: Option<usize>, follow: bool) {
    run_spec(backend, None, seed, n, cap, follow, None)
}

/// `cap`: the manager's OS watch cap, so that part of the tree is polled.
/// `follow`: the spec follows symlinks, and the mirror is compared with a
/// listing that follows them the same way.
/// `spec_backend`: the spec's own choice (polling by the engine in a
/// manager that watches natively, say).
/// `rescan`: the spec's `rescan_every`.
fn run_spec(
    backend: Backend,
    spec_backend: Option<Backend>,
    seed: u64,
    n: usize,
    cap: Option<usize>,
    follow: bool,
    rescan: Option<Duration>,
) {
    let d = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let root = d.path().join("tree");
    fs::create_dir(&root).unwrap();
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut builder = specwatch::Manager::builder().backend(backend);
    if let Some(cap) = cap {
        builder = builder
            .max_os_watches(cap)
            .poll_interval(Duration::from_millis(10));
    }
    let m = builder.build().unwrap();
    // Small batches for the walk, on odd seeds (a test hook).
    #[cfg(feature = "test-hooks")]
    if seed % 2 == 1 {
        m.walk_in_batches(3, 0).unwrap();
    }
    let mut c = Collector::new(m.subscribe());
    let quiet = Duration::from_millis(rng.below(20) as u64);
    let mut spec = WatchSpec::new([&root]);
    if let Some(b) = spec_backend {
        spec = spec.backend(b);
    }
    if let Some(every) = rescan {
        spec = spec.rescan_every(every);
    }
    let spec = spec
        .quiet_window(quiet)
        .max_delay(quiet.max(Duration::from_millis(100)))
        .editor_ignores(false)
        .follow_symlinks(follow);
    start(&m, "s", spec);
    let mut mirror = listing(&root, follow);
    let mut written: BTreeSet<PathBuf> = BTreeSet::new();
    let mut serial = 0;
    let mut done = 0;
    let mut checkpoints = 0;
    let mut log: Vec<String> = Vec::new();
    // Wine's recursive ReadDirectoryChangesW reports what happens in a
    // directory renamed within the tree under its old path, and nothing
    // below a directory moved in from outside (Windows' own does both
    // right): on the portable backend under Wine, no such moves.
    let wine_events = wine() && backend == Backend::Portable && spec_backend.is_none();
    let skip_ops: &[usize] = if wine_events {
        note(
            "*** on Wine: no directory renamed within the tree or moved in \
             (Wine reports changes below them under stale paths, or not at all)",
        );
        &[6, 7]
    } else {
        &[]
    };
    // Under Wine, a raw notify watcher beside the engine: the witness of
    // what Wine's ReadDirectoryChangesW said at all (see `Witness`).
    let witness = wine_events.then(|| Witness::start(d.path()));
    // Most paths seen through followed links at one checkpoint.
    let mut through_links = 0;
    let mut wine_losses = 0;
    while done < n {
        log.clear();
        if let Some(w) = &witness {
            w.clear();
        }
        let burst = 1 + rng.below(150);
        for _ in 0..burst.min(n - done) {
            written.extend(step(
                &mut rng,
                &root,
                out.path(),
                &mut serial,
                &mut log,
                follow,
                skip_ops,
            ));
            done += 1;
        }
        m.sync("s", WAIT).unwrap_or_else(|e| {
            panic!("seed {seed} ({backend:?}): sync failed after {done} ops: {e}")
        });
        c.drain();
        let batches = c.batches.remove("s").unwrap_or_default();
        let mut reported: BTreeSet<PathBuf> = BTreeSet::new();
        for b in &batches {
            for x in &b.changes {
                mirror.apply(x);
                if x.kind != ChangeKind::Removed {
                    reported.insert(x.path.clone());
                }
            }
        }
        let disk = listing(&root, follow);
        through_links = through_links.max(
            disk.0
                .keys()
                .filter(|p| {
                    p.ancestors()
                        .skip(1)
                        .any(|a| disk.0.get(a) == Some(&FileType::Symlink))
                })
                .count(),
        );
        let broken = index_problems(&m);
        let trail = || {
            let changes: Vec<String> = batches
                .iter()
                .flat_map(|b| b.changes.iter())
                .map(|c| format!("{:?} {:?} {}", c.kind, c.file_type, c.path.display()))
                .collect();
            format!("\n operations of this interval: {log:?}\n changes reported in it: {changes:?}")
        };
        assert!(
            broken.is_empty(),
            "seed {seed} ({backend:?}): index inconsistent after {done} ops: {broken:?}{}",
            trail()
        );
        if mirror != disk
            && let Some(w) = &witness
            && let Some(paths) = w.explains(&mirror, &disk)
        {
            note(&format!(
                "*** on Wine, seed {seed}, checkpoint {checkpoints}: {} paths wrong that Wine's \
                 ReadDirectoryChangesW never named (raw notify, watching beside): {paths:?}",
                paths.len()
            ));
            wine_losses += paths.len();
            written.retain(|p| !paths.contains(p));
            mirror = disk.clone();
        }
        if mirror != disk {
            let missing: Vec<_> = disk
                .0
                .iter()
                .filter(|(k, v)| mirror.0.get(*k) != Some(v))
                .collect();
            let extra: Vec<_> = mirror
                .0
                .iter()
                .filter(|(k, v)| disk.0.get(*k) != Some(v))
                .collect();
            panic!(
                "seed {seed} ({backend:?}, quiet {quiet:?}, follow {follow}): mirror differs from disk after {done} ops \
                 (checkpoint {checkpoints}).\n on disk, not mirrored: {missing:?}\n mirrored, not on disk: {extra:?}\n \
                 rerun: SPECWATCH_SEED={seed} SPECWATCH_OPS={} (this test runs {n} of them){}",
                ops(),
                trail()
            );
        }
        for p in &written {
            if disk.0.get(p) == Some(&FileType::File) && !reported.contains(p) {
                if let Some(w) = &witness
                    && !w.named(p)
                {
                    note(&format!(
                        "*** on Wine, seed {seed}, checkpoint {checkpoints}: {} written, \
                         never named by Wine's ReadDirectoryChangesW",
                        p.display()
                    ));
                    wine_losses += 1;
                    continue;
                }
                assert!(
                    reported.contains(p),
                    "seed {seed} ({backend:?}): {} was written and not reported (after {done} ops); \
                     rerun: SPECWATCH_SEED={seed} SPECWATCH_OPS={} (this test runs {n} of them){}",
                    p.display(),
                    ops(),
                    trail()
                );
            }
        }
        written.clear();
        checkpoints += 1;
    }
    let links = if follow {
        format!("; at most {through_links} paths through followed links")
    } else {
        String::new()
    };
    let wine = if witness.is_some() {
        format!(
            "; {wine_losses} paths lost by Wine's ReadDirectoryChangesW (never named), none by specwatch"
        )
    } else {
        String::new()
    };
    let summary = format!(
        "seed {seed} ({backend:?}, follow {follow}): {n} operations, {checkpoints} checkpoints, \
         mirror equal{links}{wine}"
    );
    if witness.is_some() {
        note(&summary);
    } else {
        eprintln!("{summary}");
    }
    if follow && n >= 500 {
        assert!(
            through_links > 0,
            "seed {seed}: no link was ever followed; the run tested nothing of follow_symlinks"
        );
    }
}

#[cfg(target_os = "linux")]
#[test]
fn mirror_native() {
    for seed in seeds() {
        run(Backend::Native, seed, ops());
    }
}

#[test]
fn mirror_portable() {
    for seed in seeds() {
        run(Backend::Portable, seed, ops());
    }
}

/// Native with a cap of 6 OS watches: most of the tree is polled, and
/// directories move between polling and watches as the tree changes.
///
/// It was `#[ignore]`d while a bug in the polling fallback lost, now and
/// then under load, the new contents of a directory replaced while polled
/// (3-4 failures per 120 runs of 10,000 operations, three runs in parallel
/// on 2 cores). After the fix: 183 such runs (seeds 500-560, 600-660,
/// 700-760), no failure; `check_index` now also flags any directory left
/// with neither watch nor polling.
#[cfg(target_os = "linux")]
#[test]
fn mirror_native_watch_capped() {
    for seed in seeds() {
        run_with(Backend::Native, seed, ops() / 2, Some(6), false);
    }
}

/// With `follow_symlinks`: links to siblings and to any directory (loops
/// included), so that directories have several paths, and operations go
/// through links.
#[cfg(target_os = "linux")]
#[test]
fn mirror_native_follow() {
    for seed in seeds() {
        run_with(Backend::Native, seed, ops() / 2, None, true);
    }
}

/// (Unix: symlinks on Windows need a privilege a test cannot count on.)
#[cfg(unix)]
#[test]
fn mirror_portable_follow() {
    for seed in seeds() {
        run_with(Backend::Portable, seed, ops() / 2, None, true);
    }
}

/// Followed links with a cap of 6 OS watches: aliases and polling mixed.
#[cfg(target_os = "linux")]
#[test]
fn mirror_native_follow_watch_capped() {
    for seed in seeds() {
        run_with(Backend::Native, seed, ops() / 2, Some(6), true);
    }
}

/// Native with `rescan_every` at 5 ms: the rescans' looks, on the scanner,
/// run all the time beside the events of the directories they look at
/// (a name the engine looks at meanwhile keeps what its event found):
/// whatever a rescan applies, the mirror built from the changes must still
/// equal the disk at every checkpoint.
#[cfg(target_os = "linux")]
#[test]
fn mirror_native_rescan() {
    for seed in seeds() {
        let every = Some(Duration::from_millis(5));
        run_spec(Backend::Native, None, seed, ops() / 2, None, false, every);
    }
}

/// A manager that polls: no OS event at all, every change found by the
/// engine's polls (each `sync` makes it look at once).
#[test]
fn mirror_poll() {
    for seed in seeds() {
        run(POLL_BACKEND, seed, ops() / 2);
    }
}

/// A manager that polls, through followed links (one directory under
/// several paths, looked at through each). Unix only, as symlinks are.
#[cfg(unix)]
#[test]
fn mirror_poll_follow() {
    for seed in seeds() {
        run_with(POLL_BACKEND, seed, ops() / 2, None, true);
    }
}

/// A spec that polls (the engine polls it) in a manager that watches
/// natively: the per-spec backend, with the same index diff.
#[test]
fn mirror_spec_poll() {
    run_spec_poll(false);
}

/// The same through followed links (Unix only, as symlinks are).
#[cfg(unix)]
#[test]
fn mirror_spec_poll_follow() {
    run_spec_poll(true);
}

/// A spec that polls in a manager that watches natively, every seed.
fn run_spec_poll(follow: bool) {
    for seed in seeds() {
        run_spec(
            EVENTS,
            Some(POLL_BACKEND),
            seed,
            ops() / 2,
            None,
            follow,
            None,
        );
    }
}

/// The restart test (issue 20): the mirror is kept from batches while the
/// manager runs, its state is saved (now and then explicitly, always when
/// the manager is dropped), random operations are made while no manager
/// runs (the mirror test's, and same-size rewrites that put the old
/// modification time back), and a new manager restored from the state
/// must bring the mirror to the disk with its first batch alone, and
/// report every file written meanwhile. Rounds of that, every seed.
fn run_restart(backend: Backend, seed: u64, n: usize) {
    let d = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let st = tempfile::tempdir().unwrap();
    let root = d.path().join("tree");
    let state = st.path().join("tree.state");
    fs::create_dir(&root).unwrap();
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let spec = WatchSpec::new([&root])
        .quiet_window(Duration::from_millis(5))
        .editor_ignores(false)
        .state(&state);
    // Live operations on Wine's ReadDirectoryChangesW: as in `run_spec`.
    let live_skip: &[usize] = if wine() && backend == Backend::Portable {
        &[6, 7]
    } else {
        &[]
    };
    let mut mirror = Mirror::of_disk(&root);
    let (mut serial, mut done, mut rounds) = (0, 0, 0);
    let mut log: Vec<String> = Vec::new();
    let mut written: BTreeSet<PathBuf> = BTreeSet::new();
    while done < n {
        rounds += 1;
        let m = specwatch::Manager::builder()
            .backend(backend)
            .build()
            .unwrap();
        let mut c = Collector::new(m.subscribe());
        start(&m, "s", spec.clone());
        c.wait("the first batch", |c| {
            c.batches.get("s").is_some_and(|b| !b.is_empty())
        });
        let first = c.batches["s"][0].clone();
        let restored = matches!(first.restore, Some(specwatch::Restore::Restored { .. }));
        assert!(
            restored || rounds == 1,
            "seed {seed} ({backend:?}) round {rounds}: not restored: {:?}",
            first.restore
        );
        for x in &first.changes {
            mirror.apply(x);
        }
        let disk = listing(&root, false);
        let reported: BTreeSet<&PathBuf> = first.changes.iter().map(|c| &c.path).collect();
        let unreported: Vec<&PathBuf> = written
            .iter()
            .filter(|p| disk.0.get(*p) == Some(&FileType::File) && !reported.contains(p))
            .collect();
        let trail = |log: &[String]| {
            let changes: Vec<String> = first
                .changes
                .iter()
                .map(|c| format!("{:?} {:?} {}", c.kind, c.file_type, c.path.display()))
                .collect();
            format!("\n operations while stopped: {log:?}\n first batch: {changes:?}")
        };
        assert!(
            mirror == disk && unreported.is_empty(),
            "seed {seed} ({backend:?}) round {rounds}: after the restart the mirror differs \
             from the disk, or files written while stopped were not reported: {unreported:?}\n \
             on disk, not mirrored: {:?}\n mirrored, not on disk: {:?}{}",
            disk.0
                .iter()
                .filter(|(k, v)| mirror.0.get(*k) != Some(v))
                .collect::<Vec<_>>(),
            mirror
                .0
                .iter()
                .filter(|(k, v)| disk.0.get(*k) != Some(v))
                .collect::<Vec<_>>(),
            trail(&log)
        );
        written.clear();
        // Live: a burst, the mirror kept from batches; saved explicitly
        // now and then (the drop saves the rest).
        log.clear();
        let mut live = |rng: &mut Rng, count: usize, log: &mut Vec<String>| {
            for _ in 0..count.min(n - done) {
                step(rng, &root, out.path(), &mut serial, log, false, live_skip);
                done += 1;
            }
        };
        let count = 1 + rng.below(40);
        live(&mut rng, count, &mut log);
        if rng.chance(50) {
            m.save("s").unwrap();
        }
        let count = rng.below(10);
        live(&mut rng, count, &mut log);
        m.sync("s", WAIT).unwrap();
        c.drain();
        for b in &c.batches["s"][1..] {
            for x in &b.changes {
                mirror.apply(x);
            }
        }
        assert!(
            mirror == listing(&root, false),
            "seed {seed} ({backend:?}) round {rounds}: the live mirror differs: {log:?}"
        );
        drop(m);
        // Stopped: anything, and rewrites a signature's mtime alone would
        // miss.
        log.clear();
        for _ in 0..(1 + rng.below(40)).min(n - done) {
            if rng.chance(15) {
                let (_, files) = entries(&root, false);
                let files: Vec<&PathBuf> = files
                    .iter()
                    .filter(|p| fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
                    .collect();
                if !files.is_empty() {
                    let p = files[rng.below(files.len())];
                    let old = fs::read(p).unwrap();
                    let mtime = fs::metadata(p).unwrap().modified().unwrap();
                    let new: Vec<u8> = old.iter().map(|b| b.wrapping_add(1)).collect();
                    fs::write(p, &new).unwrap();
                    fs::File::options()
                        .write(true)
                        .open(p)
                        .unwrap()
                        .set_modified(mtime)
                        .unwrap();
                    log.push(format!("  same size, old mtime: {}", p.display()));
                    written.insert(p.clone());
                }
            } else {
                written.extend(step(
                    &mut rng,
                    &root,
                    out.path(),
                    &mut serial,
                    &mut log,
                    false,
                    &[],
                ));
            }
            done += 1;
        }
    }
    eprintln!(
        "seed {seed} ({backend:?}): {n} operations, {rounds} restarts, mirror equal after each"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn mirror_restart_native() {
    for seed in seeds() {
        run_restart(Backend::Native, seed, ops() / 4);
    }
}

#[test]
fn mirror_restart_portable() {
    for seed in seeds() {
        run_restart(Backend::Portable, seed, ops() / 4);
    }
}

#[test]
fn mirror_restart_poll() {
    for seed in seeds() {
        run_restart(POLL_BACKEND, seed, ops() / 4);
    }
}
