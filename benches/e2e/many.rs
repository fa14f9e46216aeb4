//! `bench many`: many specs over one tree (issue 12, item 2), native
//! backend, beside raw notify's single recursive watch as the floor.
//!
//! ```sh
//! cargo bench --bench e2e -- many         # 2,000 x 20, then 50,000 x 20
//! cargo bench --bench e2e -- many small   # 2,000 x 20 only
//! cargo bench --bench e2e -- many big     # 50,000 x 20 only (1,000,000 files)
//! cargo bench --bench e2e -- many 900     # 900 x 20 (for development)
//! ```
//!
//! `bench scale` runs the same rows on each of its trees.
//!
//! The 1,000 specs, on a [`make_tree`] tree (`t0..t49/dK`), quiet window 0:
//! 50 on the top directories `tJ/`, 850 on second-level directories `tJ/dK/`
//! (spread over the tree, `d0` among them), 100 on the whole tree: one
//! plain, the other 99 each with its own rule (ignore `f{k}.txt`; ignore a
//! `tJ/` subtree, never `t0/`; `only` `fJ.*` and `lat.*`; ignore a `dJ/`
//! subtree, never `d0/`, and `*.log`). Roots overlap, so one directory is
//! covered by up to 102 specs. Measured, in one child process per tree
//! (managers one after another, so at most one tree's worth of watches is
//! held at a time):
//!
//! - apply + `wait_watching` of the plain whole-tree spec alone, on a fresh
//!   manager; then the 999 others applied on top of it; then, on fresh
//!   managers, all 1,000 by `apply` and all 1,000 by one `reconcile`;
//! - inotify watches held (`/proc/self/fdinfo`) after each: one per
//!   directory means the same figure with 1 spec and with 1,000;
//! - VmRSS growth per spec: after the 999 were added, minus after the
//!   single spec, divided by 999 (same process; peak heap use counts);
//! - latency p50/p99 of 200 writes to `t0/d0/lat.txt` (the bench's latency
//!   method: quiet window 0, trailing events drained) with the single spec
//!   and with all 1,000: until the first batch naming it, and until every
//!   spec covering it has sent one.

use super::*;

/// The two trees: directories, files per directory.
const MANY_TREES: [(usize, usize); 2] = [(2_000, 20), (50_000, 20)];
/// Specs on top directories, on second-level directories, on the tree.
const TOPS: usize = 50;
const SECONDS: usize = 850;
const WHOLES: usize = 100;
/// Writes per latency measurement (as `latency_specwatch`).
const WRITES: usize = 200;
/// The rows: the child's figure (`t_`: a time; `s`, `m`, `a`, `r`: a
/// latency), raw notify's floor beside it (`T`: its start-up, `L`: its
/// latency, `W`: its watches, `-`: none), the label.
const ROWS: [&str; 11] = [
    "t_single T 1 whole-tree spec: apply + Watching, ms",
    "t_apply T 1,000 specs: apply each + wait_watching each, ms",
    "t_rec T 1,000 specs: one reconcile + wait_watching each, ms",
    "t_add - 999 specs added to the watched tree (+ Watching), ms",
    "t_del - 999 specs deleted by one reconcile (+ sync), ms",
    "w W OS watches: 1 spec / 1,000 specs",
    "rss - RSS growth per spec, KiB: (1,000 specs - 1 spec) / 999",
    "s L latency ms p50 / p99 (quiet window 0): 1 spec",
    "m L   1,000 specs, first batch",
    "a L   1,000 specs, batches of every covering spec",
    "r L   1 spec again, after the 999 were deleted",
];
/// The wait for any one thing on the big tree.
const LONG: Duration = Duration::from_secs(900);

/// The 1,000 specs over `root` (a `make_tree` tree of `dirs` directories),
/// the plain whole-tree spec first.
fn many_specs(root: &Path, dirs: usize) -> Vec<(String, WatchSpec)> {
    let spec = |p: PathBuf| WatchSpec::new([p]).quiet_window(Duration::ZERO);
    let mut out = vec![("whole-000".to_string(), spec(root.to_path_buf()))];
    for k in 1..WHOLES {
        let s = spec(root.to_path_buf());
        let s = match k % 4 {
            0 => s.ignore_patterns([format!("f{k}.txt")]),
            1 => s.ignore(IgnoreRule::new(root, [format!("t{}/", 1 + k % 49)])),
            2 => s.only([format!("f{}.*", k % 20), "lat.*".into()]),
            _ => s.ignore_patterns([format!("d{}/", 1 + k * 37 % (dirs - 1)), "*.log".into()]),
        };
        out.push((format!("whole-{k:03}"), s));
    }
    for t in 0..TOPS {
        out.push((format!("top-t{t}"), spec(root.join(format!("t{t}")))));
    }
    for i in 0..SECONDS {
        let d = i * dirs / SECONDS;
        let p = root.join(format!("t{}", d % 50)).join(format!("d{d}"));
        out.push((format!("second-d{d}"), spec(p)));
    }
    out
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Waits (up to 30 s) until this process holds no inotify watch: a dropped
/// watcher may close its descriptor on its own thread, and two trees' worth
/// of watches must never be held at once.
fn await_no_watches() {
    let t = Instant::now();
    while new_inotify_watches(&HashSet::new()) > 0 && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until every spec of `specs` is watching; then the ms since `t`
/// and the inotify watches this process holds.
fn wait_all(m: &Manager, specs: &[(String, WatchSpec)], t: Instant) -> (f64, f64) {
    for (name, _) in specs {
        m.wait_watching(name, LONG).unwrap();
    }
    (ms(t.elapsed()), new_inotify_watches(&HashSet::new()) as f64)
}

/// Writes `f` [`WRITES`] times; p50 and p99 of the ms until the first
/// batch naming it, and until `want` distinct specs' batches have.
fn latencies(rx: &crossbeam_channel::Receiver<Event>, f: &Path, want: usize) -> [f64; 4] {
    let (mut first, mut all) = (Vec::new(), Vec::new());
    for i in 0..WRITES {
        let t = Instant::now();
        std::fs::write(f, i.to_string()).unwrap();
        let mut names = HashSet::new();
        while names.len() < want {
            match rx.recv_timeout(Duration::from_secs(10)) {
                Ok(Event::Changes(b)) if b.changes.iter().any(|c| c.path == f) => {
                    if names.is_empty() {
                        first.push(ms(t.elapsed()));
                    }
                    names.insert(b.name.clone());
                }
                Ok(_) => {}
                Err(_) => panic!("write {i}: {} of {want} specs reported", names.len()),
            }
        }
        all.push(ms(t.elapsed()));
        // The trailing events of this write must not answer the next.
        while rx.recv_timeout(Duration::from_millis(2)).is_ok() {}
    }
    let (f50, a50) = (pct(&mut first, 0.5), pct(&mut all, 0.5));
    [f50, pct(&mut first, 0.99), a50, pct(&mut all, 0.99)]
}

/// How many specs report a write to `f` (one write, then 300 quiet ms).
fn covering(rx: &crossbeam_channel::Receiver<Event>, f: &Path) -> usize {
    std::fs::write(f, "warm-up").unwrap();
    let mut names = HashSet::new();
    while let Ok(ev) = rx.recv_timeout(Duration::from_millis(300)) {
        if let Event::Changes(b) = ev
            && b.changes.iter().any(|c| c.path == f)
        {
            names.insert(b.name.clone());
        }
    }
    names.len()
}

/// The child's side (`bench many-child ROOT DIRS`): every specwatch figure
/// of one tree, printed as `key value` lines.
pub(super) fn child(args: &[String]) {
    let [root, dirs] = args else {
        panic!("usage: bench many-child ROOT DIRS");
    };
    let root = Path::new(root);
    let specs = many_specs(root, dirs.parse().unwrap());
    let (one, rest) = specs.split_at(1);
    let f = root.join("t0/d0/lat.txt");
    let native = || Manager::builder().backend(Backend::Native).build().unwrap();
    let apply = |m: &Manager, s: &[(String, WatchSpec)]| {
        for (name, spec) in s {
            m.apply(name.as_str(), spec.clone()).unwrap();
        }
    };
    eprintln!("many: 1 spec, then {} more", rest.len());
    let t = Instant::now();
    let m = native();
    apply(&m, one);
    let (t1, w1) = wait_all(&m, one, t);
    let rss1 = rss_kib();
    let rx = m.subscribe();
    let [s50, s99, ..] = latencies(&rx, &f, 1);
    drop(rx);
    let t = Instant::now();
    apply(&m, rest);
    let (t_add, w_add) = wait_all(&m, &specs, t);
    let kib = rss_kib().saturating_sub(rss1) as f64 / rest.len() as f64;
    println!("rss_kib {kib}\nt_single {t1}\nw_single {w1}\ns50 {s50}\ns99 {s99}");
    println!("t_add {t_add}\nw_add {w_add}");
    eprintln!("many: latency with {}", specs.len());
    let rx = m.subscribe();
    let n = covering(&rx, &f);
    let [m50, m99, a50, a99] = latencies(&rx, &f, n);
    println!("covering {n}\nm50 {m50}\nm99 {m99}\na50 {a50}\na99 {a99}");
    eprintln!("many: {} deleted, latency with 1 again", rest.len());
    let t = Instant::now();
    m.reconcile(one.iter().cloned()).unwrap();
    m.sync(&one[0].0, LONG).unwrap(); // handled after the deletions
    let (t_del, w_del) = wait_all(&m, one, t);
    while rx.try_recv().is_ok() {}
    let [r50, r99, ..] = latencies(&rx, &f, 1);
    println!("t_del {t_del}\nw_del {w_del}\nr50 {r50}\nr99 {r99}");
    drop((rx, m));
    eprintln!("many: fresh managers: apply x 1,000, reconcile of 1,000");
    let fresh = |give: &dyn Fn(&Manager)| {
        await_no_watches();
        let t = Instant::now();
        let m = native();
        give(&m);
        wait_all(&m, &specs, t)
    };
    let (t_apply, w_apply) = fresh(&|m| apply(m, &specs));
    println!("t_apply {t_apply}\nw_apply {w_apply}");
    let (t_rec, w_rec) = fresh(&|m| drop(m.reconcile(specs.iter().cloned()).unwrap()));
    println!("t_rec {t_rec}\nw_rec {w_rec}");
    std::fs::remove_file(&f).unwrap();
}

/// Runs [`child`] for `root` in a fresh process; its figures by key.
fn in_child(root: &Path, dirs: usize) -> std::collections::HashMap<String, f64> {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .arg("many-child")
        .arg(root)
        .arg(dirs.to_string())
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("run the many-specs child");
    assert!(out.status.success(), "many-specs child failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// The many-specs rows of one tree (`root`: `dirs` x `files`, generated by
/// [`make_tree`]; its watches must fit), and notes on what they measured.
pub(super) fn many_rows(
    root: &Path,
    (dirs, files): (usize, usize),
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) {
    let size = format!("{dirs} x {files}");
    eprintln!("many: {size}: raw notify");
    await_no_watches();
    let (tn, wn, w) = startup_notify(root);
    drop(w);
    await_no_watches();
    let (n50, n99) = latency_notify(root);
    std::fs::remove_file(root.join("lat.txt")).unwrap();
    await_no_watches();
    let c = in_child(root, dirs);
    let g = |k: &str| c[k];
    let (tn, n, kib) = (ms(tn), g("covering"), g("rss_kib"));
    for (i, r) in ROWS.iter().enumerate() {
        let [key, floor, what] = [0, 1, 2].map(|i| r.splitn(3, ' ').nth(i).unwrap());
        let notify = match floor {
            "T" => format!("{tn:.1}"),
            "L" => format!("{n50:.3} / {n99:.3}"),
            "W" => wn.to_string(),
            _ => "-".into(),
        };
        let native = match key {
            "w" => format!("{} / {}", g("w_single"), g("w_apply")),
            "rss" => format!("{kib:.1} ({:.0} MiB)", kib * 999.0 / 1024.0),
            k if k.starts_with("t_") && floor == "T" => {
                format!("{:.1} ({})", g(k), ratio(g(k), tn))
            }
            k if k.starts_with("t_") => format!("{:.1}", g(k)),
            k => format!("{:.3} / {:.3}", g(&format!("{k}50")), g(&format!("{k}99"))),
        };
        let head = if i == 0 {
            format!("many specs, {size}: ")
        } else {
            "  ".into()
        };
        let (what, portable) = (head + what, "-".into());
        rows.push(Row {
            what,
            notify,
            native,
            portable,
        });
    }
    let w1 = g("w_single");
    let same = ["w_add", "w_del", "w_apply", "w_rec"].map(|k| g(k) == w1);
    let x = g("m50") / g("s50");
    notes.extend([
        format!(
            "many {size}: 1,000 specs = {TOPS} on tJ/, {SECONDS} on tJ/dK/, {WHOLES} on the \
             tree (1 plain, 99 each with its own ignore / only rule), quiet window 0, native \
             backend, in one child process; raw notify: one recursive watch of the tree (its \
             latency: a file at the tree's root)"
        ),
        format!(
            "many {size}: OS watches with 1,000 specs: added {}, applied {}, reconciled {}; \
             after deleting 999: {}; equal to the single spec's {w1}: {}",
            g("w_add"),
            g("w_apply"),
            g("w_rec"),
            g("w_del"),
            if same.iter().all(|s| *s) { "yes" } else { "NO" }
        ),
        format!(
            "many {size}: latency: {WRITES} writes to t0/d0/lat.txt, which {n} specs report; \
             first-batch p50 with 1,000 specs is {x:.2} x the 1-spec p50 ({:.2} x the one after \
             deleting; target <= 1.5: {})",
            g("m50") / g("r50"),
            if x <= 1.5 { "met" } else { "MISSED" }
        ),
    ]);
}

/// `bench many [small | big | DIRS]`: generates each tree, checks that its
/// watches fit, prints the rows.
pub(super) fn many(args: &[String]) {
    let trees = match args.first().map(String::as_str) {
        None => MANY_TREES.to_vec(),
        Some("small") => vec![MANY_TREES[0]],
        Some("big") => vec![MANY_TREES[1]],
        Some(n) => vec![(n.parse().expect("small, big or a number of dirs"), 20)],
    };
    let limit = scale::max_user_watches();
    let (mut rows, mut notes) = (Vec::new(), Vec::new());
    for (dirs, files) in trees {
        assert!(
            dirs >= SECONDS,
            "{SECONDS} second-level specs: too few dirs"
        );
        let need = dirs + dirs.min(50) + 2; // as bench scale reckons
        if limit.is_none_or(|l| l < need + need / 10 + 1_000) {
            notes.push(format!("{dirs} x {files}: SKIPPED: watch limit {limit:?}"));
            continue;
        }
        eprintln!("many: generating {dirs} x {files}");
        let t = Instant::now();
        let (tmp, root, _empty, entries) = tree(dirs, files);
        let took = t.elapsed().as_secs_f64();
        notes.push(format!(
            "{dirs} x {files}: {entries} entries, made in {took:.1} s"
        ));
        many_rows(&root, (dirs, files), &mut rows, &mut notes);
        drop(tmp);
    }
    for n in notes {
        println!("{n}");
    }
    println!();
    print_table(&rows);
}
