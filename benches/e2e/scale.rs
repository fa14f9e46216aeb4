//! `bench scale`: the scale mode of the end-to-end bench (issue 12's
//! measurements): start-up beside the `find` floor and raw notify, OS
//! watches, memory, latency, idle CPU and overflow recovery on the
//! 2,000 x 20 tree and on 50,000 x 20 (1,000,000 files), then 1,000
//! specs on each (`many.rs`).

use super::*;

/// The trees of the scale mode: directories, files per directory, runs per
/// start-up measurement (fewer on the big tree).
const SCALE_TREES: [(usize, usize, usize); 2] = [(2_000, 20, RUNS), (50_000, 20, 3)];

/// Changes made while the OS reader is paused, before the overflow.
const HIDDEN_CHANGES: usize = 1_000;

/// Latency p50/p99 (ms) of `inotifywait -m -r` on `dir`: the kernel's own
/// floor through a pipe (write to `lat.txt` until its line is read), the
/// same 200 writes as [`latency_notify`]. `None` when inotifywait is not
/// installed (Debian: `inotify-tools`).
fn latency_inotifywait(dir: &Path) -> Option<(f64, f64)> {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let mut child = Command::new("inotifywait")
        .args([
            "-m",
            "-r",
            "-e",
            "modify,close_write,create",
            "--format",
            "%w%f",
        ])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    // It says on stderr when its watches are in place.
    let mut err = std::io::BufReader::new(child.stderr.take()?);
    let mut line = String::new();
    while err.read_line(&mut line).ok()? > 0 && !line.contains("Watches established") {
        line.clear();
    }
    let (tx, rx) = unbounded();
    let out = std::io::BufReader::new(child.stdout.take()?);
    std::thread::spawn(move || {
        for l in out.lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let f = dir.join("lat.txt");
    let want = f.to_string_lossy().into_owned();
    let mut v = Vec::new();
    for i in 0..200 {
        let t = Instant::now();
        std::fs::write(&f, i.to_string()).unwrap();
        while rx.recv_timeout(Duration::from_secs(5)).ok()? != want {}
        v.push(t.elapsed().as_secs_f64() * 1000.0);
        while rx.recv_timeout(Duration::from_millis(2)).is_ok() {}
    }
    let _ = child.kill();
    let _ = child.wait();
    Some((pct(&mut v.clone(), 0.5), pct(&mut v, 0.99)))
}

/// The machine's inotify watch limit per user (read, never changed).
pub(super) fn max_user_watches() -> Option<usize> {
    std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Overflow recovery on `root` (a [`make_tree`] tree of `dirs` directories),
/// native backend: after a `sync`, the OS reader is paused, and
/// [`HIDDEN_CHANGES`] files spread over the tree are created, rewritten
/// (longer) or removed, a third each; then an overflow. Returns the time
/// from the overflow until `sync` has returned and its batches are read,
/// how many of the expected net changes were not delivered, and how many
/// other net changes were (including any that come up to 500 ms later).
///
/// Net over every batch delivered from the pause on, in order (created
/// then modified is created): the reader may still be blocked in `poll`
/// when the pause is asked for, and read the first change's first events
/// before it stops, which then come in a batch of their own.
fn overflow_recovery(root: &Path, dirs: usize) -> (Duration, usize, usize) {
    assert!(dirs >= HIDDEN_CHANGES, "one change per directory");
    let m = Manager::builder().backend(Backend::Native).build().unwrap();
    let rx = m.subscribe();
    m.apply("o", WatchSpec::new([root])).unwrap();
    m.wait_watching("o", Duration::from_secs(120)).unwrap();
    m.sync("o", Duration::from_secs(120)).unwrap();
    while rx.try_recv().is_ok() {}
    m.pause_os_reader(true);
    let mut want = std::collections::HashMap::new();
    for i in 0..HIDDEN_CHANGES {
        let d = i * dirs / HIDDEN_CHANGES;
        let dir = root.join(format!("t{}", d % 50)).join(format!("d{d}"));
        let (p, kind) = match i % 3 {
            0 => {
                let p = dir.join("new.txt");
                std::fs::write(&p, "n").unwrap();
                (p, ChangeKind::Created)
            }
            1 => {
                let p = dir.join("f1.txt");
                std::fs::write(&p, "changed, longer").unwrap();
                (p, ChangeKind::Modified)
            }
            _ => {
                let p = dir.join("f2.txt");
                std::fs::remove_file(&p).unwrap();
                (p, ChangeKind::Removed)
            }
        };
        want.insert(p, kind);
    }
    // Per path: whether it existed before its first reported change, and
    // after its last.
    let mut net: std::collections::HashMap<PathBuf, (bool, bool)> = Default::default();
    let mut take = |ev: Event| {
        if let Event::Changes(b) = ev {
            for c in &b.changes {
                let e = net
                    .entry(c.path.clone())
                    .or_insert((c.kind != ChangeKind::Created, false));
                e.1 = c.kind != ChangeKind::Removed;
                if want.get(&c.path) != Some(&c.kind) {
                    eprintln!(
                        "overflow recovery: batch {} reports {} {}",
                        b.seq.number(),
                        c.kind,
                        c.path.display()
                    );
                }
            }
        }
    };
    let t = Instant::now();
    m.inject_overflow().unwrap();
    m.pause_os_reader(false);
    m.sync("o", Duration::from_secs(300)).unwrap();
    while let Ok(ev) = rx.try_recv() {
        take(ev); // no waiting: sync promised delivery
    }
    let took = t.elapsed();
    while let Ok(ev) = rx.recv_timeout(Duration::from_millis(500)) {
        take(ev);
    }
    let recoveries = m.status("o").map_or(0, |s| s.overflow_recoveries);
    assert!(recoveries >= 1, "no overflow recovered: measures nothing");
    let got: std::collections::HashMap<&PathBuf, Option<ChangeKind>> = net
        .iter()
        .map(|(p, &existed)| {
            let kind = match existed {
                (false, true) => Some(ChangeKind::Created),
                (true, true) => Some(ChangeKind::Modified),
                (true, false) => Some(ChangeKind::Removed),
                (false, false) => None,
            };
            (p, kind)
        })
        .collect();
    let missing: Vec<_> = want
        .iter()
        .filter(|(p, k)| got.get(p) != Some(&Some(**k)))
        .collect();
    // A wrong kind is missing and extra; an expected path whose changes
    // cancel out is missing only.
    let extra: Vec<_> = got
        .iter()
        .filter(|(p, k)| match (want.get(**p), k) {
            (w, Some(k)) => w != Some(k),
            (w, None) => w.is_none(),
        })
        .collect();
    for (p, k) in missing.iter().take(10) {
        eprintln!("overflow recovery: missing: {k} {}", p.display());
    }
    for (p, k) in extra.iter().take(10) {
        eprintln!("overflow recovery: extra: {k:?} {}", p.display());
    }
    (took, missing.len(), extra.len())
}

/// One tree of the scale mode: every row for it, with notes (generation
/// time, the watch limit) printed before the table.
fn scale_rows(
    (dirs, files, runs): (usize, usize, usize),
    limit: Option<usize>,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) {
    let size = format!("{dirs} x {files}");
    eprintln!("scale: generating {size}");
    let t = Instant::now();
    let (tmp, root, empty, entries) = tree(dirs, files);
    notes.push(format!(
        "{size}: {entries} entries, generated in {:.1} s",
        t.elapsed().as_secs_f64()
    ));
    eprintln!("scale: {size}: find floor");
    let floor = median((0..runs).map(|_| find_floor(&root)).collect());
    // Watches: every directory below the root, the root and (native) its
    // parent; the margin leaves room for the rest of the machine.
    let need = dirs + dirs.min(50) + 2;
    let margin = need / 10 + 1_000;
    let fits = limit.is_some_and(|l| l >= need + margin);
    notes.push(match limit {
        Some(l) if fits => format!(
            "{size}: max_user_watches {l} allows the tree ({need} directories + {margin} margin)"
        ),
        Some(l) => format!(
            "{size}: SKIPPED native, portable and raw notify rows: max_user_watches {l} < \
             {need} directories + {margin} margin (one inotify watch per directory; not changed here)"
        ),
        None => format!(
            "{size}: SKIPPED native, portable and raw notify rows: \
             /proc/sys/fs/inotify/max_user_watches unreadable"
        ),
    });
    if !fits {
        rows.push(Row {
            what: format!("start-up ms, {size} (find: {:.1})", ms(floor)),
            notify: "skipped".into(),
            native: "skipped".into(),
            portable: "skipped".into(),
        });
        eprintln!("scale: {size}: deleting");
        drop(tmp);
        return;
    }
    let kernel = median((0..runs).map(|_| watch_floor(&root)).collect());
    eprintln!("scale: {size}: start-ups");
    let ([tn, ts, tp], [wn, ws, wp]) = startups(&root, runs);
    rows.push(startup_row(
        runs,
        &size.to_string(),
        floor,
        kernel,
        [tn, ts, tp],
    ));
    rows.push(Row {
        what: format!("  x the find floor, {size}"),
        notify: format!("{:.2}", ms(tn) / ms(floor)),
        native: format!("{:.2}", ms(ts) / ms(floor)),
        portable: format!("{:.2}", ms(tp) / ms(floor)),
    });
    rows.push(files_row(&root, &size, floor, runs));
    rows.push(Row {
        what: format!("OS watches, {size}"),
        notify: wn.to_string(),
        native: ws.to_string(),
        portable: wp.to_string(),
    });
    eprintln!("scale: {size}: memory");
    let mem = ["notify", "native", "portable"].map(|w| memory_in_child(w, &empty, &root, entries));
    let mem_cell = |per: f64| {
        format!(
            "{:.1} MiB / {per:.0} B",
            per * entries as f64 / (1024.0 * 1024.0)
        )
    };
    rows.push(Row {
        what: format!("RSS growth over an empty watch, total / per entry, {size}"),
        notify: mem_cell(mem[0]),
        native: mem_cell(mem[1]),
        portable: mem_cell(mem[2]),
    });
    eprintln!("scale: {size}: latency");
    let floor = latency_inotifywait(&root);
    let (n50, n99) = latency_notify(&root);
    let (s50, s99) = latency_specwatch(Backend::Native, &root);
    let (p50, p99) = latency_specwatch(Backend::Portable, &root);
    // Back to the tree as generated.
    std::fs::remove_file(root.join("lat.txt")).unwrap();
    let last_write = Instant::now();
    rows.push(Row {
        what: format!("  inotifywait -m -r: the floor through a pipe, {size}"),
        notify: floor.map_or("not installed".into(), |(a, b)| format!("{a:.3} / {b:.3}")),
        native: floor.map_or("-".into(), |(a, _)| format!("{:+.3} ms p50", s50 - a)),
        portable: floor.map_or("-".into(), |(a, _)| format!("{:+.3} ms p50", p50 - a)),
    });
    rows.push(Row {
        what: format!("latency ms p50 / p99 (quiet window 0), {size} watched"),
        notify: format!("{n50:.3} / {n99:.3}"),
        native: format!("{s50:.3} / {s99:.3}"),
        portable: format!("{p50:.3} / {p99:.3}"),
    });
    eprintln!("scale: {size}: idle CPU");
    let i_n = idle_cpu_ms(|| Box::new(startup_notify(&root).2));
    let i_s = idle_cpu_ms(|| Box::new(startup_specwatch(Backend::Native, &root).2));
    let i_p = idle_cpu_ms(|| Box::new(startup_specwatch(Backend::Portable, &root).2));
    rows.push(Row {
        what: format!("CPU ms over 5 idle s, {size} watched"),
        notify: format!("{i_n:.1}"),
        native: format!("{i_s:.1}"),
        portable: format!("{i_p:.1}"),
    });
    // Files untouched for longer than the default overflow margin (2 s)
    // before the last complete read: only the hidden changes are recent.
    if let Some(wait) = Duration::from_secs(3).checked_sub(last_write.elapsed()) {
        std::thread::sleep(wait);
    }
    eprintln!("scale: {size}: overflow recovery");
    let (took, missing, extra) = overflow_recovery(&root, dirs);
    rows.push(Row {
        what: format!(
            "overflow after {HIDDEN_CHANGES} hidden changes: ms until sync delivered, {size}"
        ),
        notify: "-".into(),
        native: format!("{:.1}", ms(took)),
        portable: "-".into(),
    });
    rows.push(Row {
        what: format!("  of the {HIDDEN_CHANGES} net changes: missing / extra, {size}"),
        notify: "-".into(),
        native: format!("{missing} / {extra}"),
        portable: "-".into(),
    });
    many::many_rows(&root, (dirs, files), rows, notes);
    eprintln!("scale: {size}: deleting");
    let t = Instant::now();
    drop(tmp);
    notes.push(format!(
        "{size}: deleted in {:.1} s",
        t.elapsed().as_secs_f64()
    ));
}

/// `bench overflow DIR DIRS`: the overflow recovery alone, five times, on
/// an existing tree of `DIRS` directories made as the scale trees are
/// (`t<d % 50>/d<d>/f<i>.txt`, at least 20 files each); the tree is put
/// back after each run (a run that fails leaves it changed). Prints each
/// recovery's time and each whole run's (start-up included), for profiles
/// and A/B runs.
pub(crate) fn overflow_only(root: &Path, dirs: usize) {
    for _ in 0..5 {
        let t = Instant::now();
        let (took, missing, extra) = overflow_recovery(root, dirs);
        println!(
            "overflow: {:.1} ms until delivered; missing {missing}, extra {extra} (run {:.1} s)",
            took.as_secs_f64() * 1000.0,
            t.elapsed().as_secs_f64()
        );
        for i in 0..HIDDEN_CHANGES {
            let d = i * dirs / HIDDEN_CHANGES;
            let dir = root.join(format!("t{}", d % 50)).join(format!("d{d}"));
            match i % 3 {
                0 => std::fs::remove_file(dir.join("new.txt")).unwrap(),
                1 => std::fs::write(dir.join("f1.txt"), "x").unwrap(),
                _ => std::fs::write(dir.join("f2.txt"), "x").unwrap(),
            }
        }
    }
}

/// `Manager::files` (what a spec sees, from the index: the engine's copy,
/// the rules, the paths built and sorted), median of `runs`, on a
/// manager that watches `root` already, beside the `find` floor.
fn files_row(root: &Path, size: &str, floor: Duration, runs: usize) -> Row {
    let cell = |backend| {
        let (_, _, m) = startup_specwatch(backend, root);
        let mut n = 0;
        let t = median(
            (0..runs)
                .map(|_| {
                    let t = Instant::now();
                    n = m.files("b", None).unwrap().len();
                    t.elapsed()
                })
                .collect(),
        );
        format!("{:.1} ({n} entries)", ms(t))
    };
    Row {
        what: format!("Manager::files ms, {size} (find: {:.1})", ms(floor)),
        notify: "-".into(),
        native: cell(Backend::Native),
        portable: cell(Backend::Portable),
    }
}

/// `bench files DIRS FILES`: `Manager::files`'s row alone, on a tree
/// generated for it (native and portable, 3 runs each).
pub(crate) fn files_only(dirs: usize, files: usize) {
    let (_tmp, root, _, entries) = tree(dirs, files);
    let floor = median((0..3).map(|_| find_floor(&root)).collect());
    println!("{dirs} x {files}: {entries} entries");
    print_table(&[files_row(&root, &format!("{dirs} x {files}"), floor, 3)]);
}

/// `bench scale`: the 2,000 x 20 tree and 50,000 x 20 (1,000,000 files),
/// each generated once and measured every way in turn, then deleted.
pub(crate) fn scale() {
    let started = Instant::now();
    let limit = max_user_watches();
    let (mut rows, mut notes) = (Vec::new(), Vec::new());
    for t in SCALE_TREES {
        scale_rows(t, limit, &mut rows, &mut notes);
    }
    for n in &notes {
        println!("{n}");
    }
    println!();
    print_table(&rows);
    println!();
    println!("scale run: {:.0} s in all", started.elapsed().as_secs_f64());
}
