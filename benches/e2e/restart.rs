//! `bench restart`: changes made while stopped (issue 20, item 4). A
//! snapshot of the tree is saved, the tree is changed while nothing
//! watches it, and a restart from the snapshot must report the net
//! changes: specwatch's snapshots beside @parcel/watcher's `writeSnapshot`
//! and `getEventsSince`, on the same tree in the same run, beside the
//! floor of any such restart (a stat of every entry).
//!
//! ```sh
//! cargo bench --bench e2e -- restart        # 50,000 x 20 (1,000,000 files)
//! cargo bench --bench e2e -- restart 2000   # 2,000 x 20 (for development)
//! ```
//!
//! The peer runs in node (`benches/e2e/parcel/snapshot.js`), with
//! @parcel/watcher at the version that `benches/e2e/parcel/package.json`
//! pins (and its dependencies as `package-lock.json` locks them),
//! installed under target/ (never committed; the package's prebuilt
//! binary for the platform comes as one of its optional dependencies):
//!
//! ```sh
//! mkdir -p target/parcel-bench
//! cp benches/e2e/parcel/package.json benches/e2e/parcel/package-lock.json target/parcel-bench/
//! npm ci --prefix target/parcel-bench --no-audit --no-fund
//! ```
//!
//! (node and npm: Debian's `nodejs` and `npm` where the machine lacks
//! them.) Without node or the package the parcel rows say SKIPPED, loudly,
//! and the rest still runs. `SPECWATCH_PARCEL_PREFIX` names another
//! install prefix.
//!
//! The run, on one [`make_tree`] tree:
//!
//! 1. the floor, [`RUNS_RESTART`] times alternating with the saves: a
//!    `symlink_metadata` of every entry from a Rust walk, and `find
//!    -printf '%T@ %s %i'` (the poll rows' floor);
//! 2. the saves: parcel's `writeSnapshot` with its `inotify` backend
//!    (Linux's default when watchman is not installed) and its
//!    `brute-force` one, each in a node process of its own, and
//!    specwatch's save ([`specwatch_save`]);
//! 3. [`change_while_stopped`]: 1,000 net changes, exactly known;
//! 4. the restarts, as many times, alternating with the floor again:
//!    parcel's `getEventsSince` with each backend, and specwatch's
//!    ([`specwatch_since`]); each result checked against the workload's
//!    net changes: missing and extra paths.
//!
//! On Linux both parcel backends take snapshots the same way (the inotify
//! backend inherits the brute-force one's `writeSnapshot` and
//! `getEventsSince`): a crawl with an `fstatat` of every entry, written as
//! one text line per entry, and compared by mtime alone, files only. A
//! same-size rewrite whose old mtime was put back is therefore invisible
//! to it: the table shows those as missing, as they are.

use std::collections::HashMap;
use std::process::Command;

use super::*;

/// The tree of `bench restart`: directories, files per directory.
const RESTART_TREE: (usize, usize) = (50_000, 20);
/// Runs of each save, restart and floor (the median is shown).
const RUNS_RESTART: usize = 3;

/// The workload: new files; same-size rewrites (the mtime moves); same-size
/// rewrites with the old mtime put back; removed files; renamed
/// directories (each counts its own path and every entry below it, once
/// removed at the old path and once created at the new one).
const CREATES: usize = 200;
const REWRITES: usize = 200;
const REWRITES_MTIME_KEPT: usize = 190;
const REMOVALS: usize = 200;
const DIR_RENAMES: usize = 5;
/// One directory of the tree per operation.
const OPERATIONS: usize = CREATES + REWRITES + REWRITES_MTIME_KEPT + REMOVALS + DIR_RENAMES;

/// Net changes: what happened to each path between a snapshot and now.
pub(super) type NetChanges = HashMap<PathBuf, ChangeKind>;

// ---------------------------------------------------------------------
// specwatch's half: a spec of the whole tree with a state file.
// ---------------------------------------------------------------------

/// The spec both halves apply: the whole tree, default options, its state
/// in `state`.
fn state_spec(root: &Path, state: &Path) -> WatchSpec {
    WatchSpec::new([root]).state(state)
}

/// Watches `root` (a spec of the whole tree, default options), saves the
/// spec's state to `snapshot` (a file outside `root`, which may already
/// exist: replace it) and stops, all watchers dropped. Returns the time
/// of the save alone (not the start-up before it). Called before the
/// workload, [`RUNS_RESTART`] times; the last snapshot is the one used.
fn specwatch_save(root: &Path, snapshot: &Path) -> Option<Duration> {
    let _ = std::fs::remove_file(snapshot);
    let m = Manager::new().unwrap();
    m.apply("tree", state_spec(root, snapshot)).unwrap();
    m.wait_watching("tree", Duration::from_secs(600)).unwrap();
    let t = Instant::now();
    m.save("tree").expect("save");
    let took = t.elapsed();
    // Nothing changed since: the drop saves nothing more.
    drop(m);
    Some(took)
}

/// Starts from `snapshot` (saved by [`specwatch_save`] for `root`; the
/// tree changed since, while nothing watched it) and returns the time
/// until the net changes since the snapshot were known (from `apply` to
/// the first batch, marked restored: the walk and its watches included),
/// and those changes. The state is restored from a copy, which the
/// manager's last save rewrites, so each call starts from the same one.
fn specwatch_since(root: &Path, snapshot: &Path) -> Option<(Duration, NetChanges)> {
    let copy = snapshot.with_extension("copy");
    std::fs::copy(snapshot, &copy).unwrap();
    let m = Manager::new().unwrap();
    let events = m.subscribe();
    let t = Instant::now();
    m.apply("tree", state_spec(root, &copy)).unwrap();
    let first = loop {
        match events.recv_timeout(Duration::from_secs(600)) {
            Ok(Event::Changes(b)) => break b,
            Ok(_) => {}
            Err(e) => panic!("restart: no first batch: {e}"),
        }
    };
    let took = t.elapsed();
    assert!(
        matches!(first.restore, Some(specwatch::Restore::Restored { .. })),
        "restart: the state was not restored: {:?}",
        first.restore
    );
    let net = first
        .changes
        .iter()
        .map(|c| (c.path.clone(), c.kind))
        .collect();
    drop(m);
    let _ = std::fs::remove_file(&copy);
    Some((took, net))
}

// ---------------------------------------------------------------------

/// The directory of operation `i` of [`OPERATIONS`], spread over the
/// `dirs` directories of a [`make_tree`] tree.
fn op_dir(root: &Path, dirs: usize, i: usize) -> PathBuf {
    let d = i * dirs / OPERATIONS;
    root.join(format!("t{}", d % 50)).join(format!("d{d}"))
}

/// What [`change_while_stopped`] did.
pub(super) struct Workload {
    /// Every net change, exactly.
    pub(super) want: NetChanges,
    /// The rewritten files whose old mtime was put back (all in `want` as
    /// modified).
    pub(super) mtime_kept: Vec<PathBuf>,
}

/// The changes made while stopped (1,000 net changes with 20 files a
/// directory), on a [`make_tree`] tree of `dirs` directories of `files`
/// files (at least [`OPERATIONS`] and 4), one directory per operation,
/// none touched twice. Returns the net changes, computed from what was
/// done.
pub(super) fn change_while_stopped(root: &Path, dirs: usize, files: usize) -> Workload {
    assert!(
        dirs >= OPERATIONS && files >= 4,
        "restart: the workload needs {OPERATIONS} dirs of 4 files"
    );
    let mut want = NetChanges::new();
    let mut mtime_kept = Vec::new();
    let mtime = |p: &Path| std::fs::symlink_metadata(p).unwrap().modified().unwrap();
    let mut i = 0..OPERATIONS;
    for _ in 0..CREATES {
        let p = op_dir(root, dirs, i.next().unwrap()).join("new.txt");
        std::fs::write(&p, "n").unwrap();
        want.insert(p, ChangeKind::Created);
    }
    // The tree holds `x` in every file: `y` and `z` are the same size.
    for _ in 0..REWRITES {
        let p = op_dir(root, dirs, i.next().unwrap()).join("f1.txt");
        let before = mtime(&p);
        std::fs::write(&p, "y").unwrap();
        assert_ne!(mtime(&p), before, "{}: the clock did not move", p.display());
        want.insert(p, ChangeKind::Modified);
    }
    for _ in 0..REWRITES_MTIME_KEPT {
        let p = op_dir(root, dirs, i.next().unwrap()).join("f3.txt");
        let before = mtime(&p);
        let mut f = std::fs::File::create(&p).unwrap();
        std::io::Write::write_all(&mut f, b"z").unwrap();
        f.set_modified(before).unwrap();
        drop(f);
        assert_eq!(mtime(&p), before, "{}: mtime not restored", p.display());
        want.insert(p.clone(), ChangeKind::Modified);
        mtime_kept.push(p);
    }
    for _ in 0..REMOVALS {
        let p = op_dir(root, dirs, i.next().unwrap()).join("f2.txt");
        std::fs::remove_file(&p).unwrap();
        want.insert(p, ChangeKind::Removed);
    }
    // Into the next top directory, under a new name.
    for _ in 0..DIR_RENAMES {
        let from = op_dir(root, dirs, i.next().unwrap());
        let top = from
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy();
        let next: usize = top[1..].parse::<usize>().unwrap() + 1;
        let to = root.join(format!("t{}", next % 50)).join(format!(
            "moved-{}",
            from.file_name().unwrap().to_string_lossy()
        ));
        let below = walk_paths(&from);
        std::fs::rename(&from, &to).unwrap();
        for p in below {
            let rel = p.strip_prefix(&from).unwrap();
            want.insert(to.join(rel), ChangeKind::Created);
            want.insert(p, ChangeKind::Removed);
        }
    }
    assert_eq!(i.next(), None);
    Workload { want, mtime_kept }
}

/// `dir` and every path below it.
fn walk_paths(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        if std::fs::symlink_metadata(&out[i]).unwrap().is_dir() {
            let entries: Vec<_> = std::fs::read_dir(&out[i])
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            out.extend(entries);
        }
        i += 1;
    }
    out
}

/// The floor of a restart from a snapshot: a `symlink_metadata` of every
/// entry below `root` (and of `root`), found by `read_dir`, in one thread.
/// Returns the time and the entries below `root`.
fn stat_walk_floor(root: &Path) -> (Duration, usize) {
    fn walk(dir: &Path, n: &mut usize) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let md = std::fs::symlink_metadata(&p).unwrap();
            *n += 1;
            if md.is_dir() {
                walk(&p, n);
            }
        }
    }
    let t = Instant::now();
    std::fs::symlink_metadata(root).unwrap();
    let mut n = 0;
    walk(root, &mut n);
    (t.elapsed(), n)
}

/// Missing and extra paths of `got` against `want` (a path with the
/// wrong kind is both).
fn compare(want: &NetChanges, got: &NetChanges) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut missing: Vec<_> = want
        .iter()
        .filter(|(p, k)| got.get(*p) != Some(k))
        .map(|(p, _)| p.clone())
        .collect();
    let mut extra: Vec<_> = got
        .iter()
        .filter(|(p, k)| want.get(*p) != Some(k))
        .map(|(p, _)| p.clone())
        .collect();
    missing.sort();
    extra.sort();
    (missing, extra)
}

/// The parcel script, run by node.
struct Parcel {
    script: PathBuf,
    version: String,
}

/// The package version that benches/e2e/parcel/package.json pins.
fn pinned_parcel_version() -> Option<String> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/e2e/parcel/package.json");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(p).ok()?).ok()?;
    Some(v["dependencies"]["@parcel/watcher"].as_str()?.to_string())
}

/// Node and the installed package, or why not.
fn parcel() -> Result<Parcel, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/e2e/parcel/snapshot.js");
    let node = Command::new("node")
        .arg("--version")
        .output()
        .map_err(|e| format!("node not found ({e}); Debian: apt-get install nodejs npm"))?;
    let node = String::from_utf8_lossy(&node.stdout).trim().to_string();
    let out = Command::new("node")
        .arg(&script)
        .arg("version")
        .output()
        .map_err(|e| format!("node {}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{}; install it (npm: Debian's npm): mkdir -p target/parcel-bench && cp \
             benches/e2e/parcel/package.json benches/e2e/parcel/package-lock.json \
             target/parcel-bench/ && npm ci --prefix target/parcel-bench",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    let version = v["version"].as_str().unwrap_or("?").to_string();
    let pinned = pinned_parcel_version().unwrap_or_default();
    if version != pinned {
        return Err(format!(
            "@parcel/watcher {version} installed, package.json pins {pinned}: reinstall it"
        ));
    }
    Ok(Parcel {
        script,
        version: format!("{version} (node {node})"),
    })
}

/// One call of the parcel script: its JSON, the call's own time (as node
/// measured it) and the whole process's.
fn parcel_run(
    p: &Parcel,
    mode: &str,
    root: &Path,
    snapshot: &Path,
    backend: &str,
) -> (serde_json::Value, Duration, Duration) {
    let t = Instant::now();
    let out = Command::new("node")
        .arg(&p.script)
        .arg(mode)
        .arg(root)
        .arg(snapshot)
        .arg(backend)
        .output()
        .expect("run node");
    let process = t.elapsed();
    assert!(
        out.status.success(),
        "parcel {mode} {backend}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the script's JSON");
    let call = Duration::from_secs_f64(v["ms"].as_f64().expect("ms") / 1000.0);
    (v, call, process)
}

/// Parcel's events as net changes.
fn parcel_changes(v: &serde_json::Value) -> NetChanges {
    v["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| {
            let kind = match e["type"].as_str() {
                Some("create") => ChangeKind::Created,
                Some("update") => ChangeKind::Modified,
                Some("delete") => ChangeKind::Removed,
                t => panic!("parcel event type {t:?}"),
            };
            (PathBuf::from(e["path"].as_str().expect("path")), kind)
        })
        .collect()
}

/// One row of the table: the saves or the restarts of one peer.
#[derive(Default)]
struct Measured {
    /// Each call alone, and each whole process where there is one.
    calls: Vec<Duration>,
    processes: Vec<Duration>,
    /// After a save: the snapshot's size.
    bytes: Option<u64>,
    /// After a restart: the missing and extra paths.
    check: Option<(Vec<PathBuf>, Vec<PathBuf>)>,
    /// Why there is no figure (SKIPPED, TODO).
    none: Option<String>,
}

/// The parcel backends measured: Linux's default (watchman is tried first
/// when the backend is not named) and the crawl-only one.
const PARCEL_BACKENDS: [&str; 2] = ["inotify", "brute-force"];

/// Peer `i`: a parcel backend (`Some`), or specwatch (`None`); `Err` when
/// node or the package is missing.
fn parcel_backend(
    parcel: &Result<Parcel, String>,
    i: usize,
) -> Result<Option<(&Parcel, &'static str)>, String> {
    match parcel {
        Ok(p) if i < PARCEL_BACKENDS.len() => Ok(Some((p, PARCEL_BACKENDS[i]))),
        Err(_) if i < PARCEL_BACKENDS.len() => Err("SKIPPED".into()),
        _ => Ok(None),
    }
}

/// `bench restart [DIRS]`.
pub(super) fn restart(args: &[String]) {
    let (dirs, files) = match args.first() {
        Some(n) => (n.parse().expect("restart [DIRS]"), RESTART_TREE.1),
        None => RESTART_TREE,
    };
    let size = format!("{dirs} x {files}");
    let mut notes = Vec::new();
    let parcel = parcel();
    match &parcel {
        Ok(p) => notes.push(format!("@parcel/watcher {}", p.version)),
        Err(why) => {
            let loud = format!("!!! restart: parcel rows SKIPPED: {why}");
            eprintln!("{loud}");
            notes.push(loud);
        }
    }
    eprintln!("restart: generating {size}");
    let t = Instant::now();
    let (tmp, root, _empty, entries) = tree(dirs, files);
    notes.push(format!(
        "{size}: {entries} entries, generated in {:.1} s",
        t.elapsed().as_secs_f64()
    ));
    let snap = |who: &str| tmp.path().join(format!("snapshot-{who}"));
    let peers: Vec<String> = PARCEL_BACKENDS
        .iter()
        .map(|b| format!("parcel {b}"))
        .chain(["specwatch".to_string()])
        .collect();
    let mut saves: Vec<Measured> = peers.iter().map(|_| Measured::default()).collect();
    let mut sinces: Vec<Measured> = peers.iter().map(|_| Measured::default()).collect();
    let (mut walks, mut finds) = (Vec::new(), Vec::new());
    // The floors, then each peer's save: RUNS_RESTART times.
    for _ in 0..RUNS_RESTART {
        eprintln!("restart: {size}: floor, then the saves");
        let (w, walked) = stat_walk_floor(&root);
        assert_eq!(walked, entries, "the floor walk's count");
        walks.push(w);
        finds.push(find_printf_floor(&root));
        for (i, m) in saves.iter_mut().enumerate() {
            if m.none.is_some() {
                continue;
            }
            match parcel_backend(&parcel, i) {
                Ok(Some((p, backend))) => {
                    let (v, call, process) = parcel_run(p, "write", &root, &snap(backend), backend);
                    m.calls.push(call);
                    m.processes.push(process);
                    m.bytes = v["bytes"].as_u64();
                }
                Ok(None) => match specwatch_save(&root, &snap("specwatch")) {
                    Some(took) => {
                        m.calls.push(took);
                        m.bytes = std::fs::metadata(snap("specwatch")).ok().map(|m| m.len());
                    }
                    None => m.none = Some("TODO".into()),
                },
                Err(why) => m.none = Some(why),
            }
        }
    }
    eprintln!("restart: {size}: {OPERATIONS} operations while stopped");
    let work = change_while_stopped(&root, dirs, files);
    notes.push(format!(
        "workload while stopped: {} net changes: {CREATES} files created, {REWRITES} rewritten \
         (same size, new mtime), {REWRITES_MTIME_KEPT} rewritten (same size, old mtime put \
         back), {REMOVALS} removed, {DIR_RENAMES} directories renamed into the next top \
         directory ({} paths removed and as many created)",
        work.want.len(),
        DIR_RENAMES * (files + 1),
    ));
    // The floors again (the tree as changed), then each peer's restart.
    for _ in 0..RUNS_RESTART {
        eprintln!("restart: {size}: floor, then the restarts");
        walks.push(stat_walk_floor(&root).0);
        finds.push(find_printf_floor(&root));
        for (i, m) in sinces.iter_mut().enumerate() {
            if m.none.is_some() {
                continue;
            }
            let got = match parcel_backend(&parcel, i) {
                Ok(Some((p, backend))) => {
                    let (v, call, process) = parcel_run(p, "since", &root, &snap(backend), backend);
                    m.calls.push(call);
                    m.processes.push(process);
                    parcel_changes(&v)
                }
                Ok(None) => match specwatch_since(&root, &snap("specwatch")) {
                    Some((took, got)) => {
                        m.calls.push(took);
                        got
                    }
                    None => {
                        m.none = Some("TODO".into());
                        continue;
                    }
                },
                Err(why) => {
                    m.none = Some(why);
                    continue;
                }
            };
            // Every run's result is checked; the last one is shown.
            let (missing, extra) = compare(&work.want, &got);
            if let Some((mi, ex)) = &m.check
                && (mi.len(), ex.len()) != (missing.len(), extra.len())
            {
                notes.push(format!(
                    "{}: runs differ: missing / extra {} / {} then {} / {}",
                    peers[i],
                    mi.len(),
                    ex.len(),
                    missing.len(),
                    extra.len()
                ));
            }
            m.check = Some((missing, extra));
        }
    }
    let floor = median(walks.clone());
    let find = median(finds);
    let mut table = vec![
        [
            "measure".to_string(),
            "ms, median".to_string(),
            "x stat walk".into(),
            "node process ms".into(),
            "snapshot B / entry".into(),
            format!("missing / extra of {}", work.want.len()),
        ],
        [
            format!("floor: symlink_metadata of every entry, Rust walk, {size}"),
            format!("{:.1}", ms(floor)),
            "1.00".into(),
            "-".into(),
            "-".into(),
            "-".into(),
        ],
        [
            format!("floor: find -printf '%T@ %s %i', {size}"),
            format!("{:.1}", ms(find)),
            ratio(ms(find), ms(floor)),
            "-".into(),
            "-".into(),
            "-".into(),
        ],
    ];
    for (phase, measured) in [("save", &saves), ("restart", &sinces)] {
        for (peer, m) in peers.iter().zip(measured) {
            let what = match (peer.as_str(), phase) {
                ("specwatch", "save") => "specwatch: save".to_string(),
                ("specwatch", _) => "specwatch: restart, net changes since".to_string(),
                (p, "save") => format!("{p}: writeSnapshot"),
                (p, _) => format!("{p}: getEventsSince"),
            };
            let row = match &m.none {
                Some(why) => [
                    what,
                    why.clone(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                ],
                None => {
                    let call = ms(median(m.calls.clone()));
                    [
                        what,
                        format!("{call:.1}"),
                        ratio(call, ms(floor)),
                        if m.processes.is_empty() {
                            "-".into()
                        } else {
                            format!("{:.1}", ms(median(m.processes.clone())))
                        },
                        m.bytes
                            .map_or("-".into(), |b| format!("{:.1}", b as f64 / entries as f64)),
                        m.check.as_ref().map_or("-".into(), |(mi, ex)| {
                            format!("{} / {}", mi.len(), ex.len())
                        }),
                    ]
                }
            };
            table.push(row);
        }
    }
    // What was missed, by cause.
    let kept: HashSet<&PathBuf> = work.mtime_kept.iter().collect();
    for (peer, m) in peers.iter().zip(&sinces) {
        let Some((missing, extra)) = &m.check else {
            continue;
        };
        let by_kept = missing.iter().filter(|p| kept.contains(p)).count();
        notes.push(format!(
            "{peer}: missing {} ({by_kept} of the {} rewrites with the old mtime put back, {} \
             other), extra {}",
            missing.len(),
            kept.len(),
            missing.len() - by_kept,
            extra.len()
        ));
        for p in missing.iter().filter(|p| !kept.contains(p)).take(5) {
            notes.push(format!(
                "  {peer}: missing {:?} {}",
                work.want[p],
                p.display()
            ));
        }
        for p in extra.iter().take(5) {
            notes.push(format!("  {peer}: extra {}", p.display()));
        }
    }
    for n in &notes {
        println!("{n}");
    }
    println!();
    print_columns(&table);
    if let Err(why) = &parcel {
        eprintln!("!!! restart: parcel rows SKIPPED: {why}");
    }
    eprintln!("restart: {size}: deleting");
    drop(tmp);
}

/// A table whose first row is its header, the first column as wide as its
/// longest cell, the others right-aligned.
fn print_columns<const N: usize>(rows: &[[String; N]]) {
    let w: Vec<usize> = (0..N)
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    for (i, r) in rows.iter().enumerate() {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, s)| {
                if c == 0 {
                    format!("{s:<w$}", w = w[c])
                } else {
                    format!("{s:>w$}", w = w[c])
                }
            })
            .collect();
        println!("| {} |", cells.join(" | "));
        if i == 0 {
            let dashes: Vec<String> = w.iter().map(|n| "-".repeat(n + 2)).collect();
            println!("|{}|", dashes.join("|"));
        }
    }
}
