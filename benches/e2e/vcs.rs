//! `bench vcs`: a real `git checkout` between two commits of a real
//! repository, watched with `vcs_settle` off and on (issue 21, item 2):
//! how many batches (rebuilds) one checkout gives, and whether their
//! changes add up to `git diff --name-status`.
//!
//! ```sh
//! cargo bench --bench e2e -- vcs SRC FROM TO [native|portable|poll]
//! # e.g. a local clone of Watchman, v4.9.0 against its newest tag
//! cargo bench --bench e2e -- vcs /path/to/watchman.git v4.9.0 v2026.08.17.00
//! ```
//!
//! SRC is cloned (locally, `--no-hardlinks`) into a temporary directory
//! at FROM; each round checks out TO then FROM again (two checkouts),
//! with the spec's defaults (quiet window 50 ms, max delay 1 s) and the
//! hold off, then on (`DEFAULT_VCS_SETTLE`). `SPECWATCH_VCS_DELAY_MS`
//! slows each of three files of the checkout by that long (a smudge
//! filter that sleeps, as `tests/vcs_settle.rs` does) to see a checkout
//! that takes longer than max delay on a fast machine.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use specwatch::{Backend, ChangeKind, DEFAULT_VCS_SETTLE, Event, FileType, Manager, WatchSpec};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What one checkout did and how it was reported.
struct Round {
    took: Duration,
    files: usize,
    batches: usize,
    /// Whether the net of every batch equals the diff.
    exact: bool,
}

fn checkout(
    m: &Manager,
    rx: &crossbeam_channel::Receiver<Event>,
    repo: &Path,
    from: &str,
    to: &str,
) -> Round {
    let want: BTreeMap<PathBuf, ChangeKind> =
        git(repo, &["diff", "--no-renames", "--name-status", from, to])
            .lines()
            .filter_map(|l| {
                let (s, p) = l.split_once('\t')?;
                let k = match s {
                    "A" => ChangeKind::Created,
                    "D" => ChangeKind::Removed,
                    _ => ChangeKind::Modified,
                };
                Some((repo.join(p), k))
            })
            .collect();
    let began = Instant::now();
    git(repo, &["checkout", "-q", to]);
    let took = began.elapsed();
    // The hold (if on) releases through a barrier; a sync after the lock
    // is gone delivers whatever is left.
    m.sync("vcs", Duration::from_secs(120)).expect("sync");
    let mut batches = 0;
    // Per path: the first and the last kind reported over every batch.
    let mut seen: BTreeMap<PathBuf, (ChangeKind, ChangeKind)> = BTreeMap::new();
    let mut swapped = std::collections::BTreeSet::new();
    for ev in rx.try_iter() {
        if let Event::Changes(b) = ev {
            batches += 1;
            for c in &b.changes {
                if c.file_type == FileType::Dir {
                    // Git lists no directory, but a file that became
                    // one (or the reverse) is a `D` (or `A`) there.
                    if c.kind == ChangeKind::Modified {
                        swapped.insert(c.path.clone());
                    }
                    continue;
                }
                seen.entry(c.path.clone()).or_insert((c.kind, c.kind)).1 = c.kind;
            }
        }
    }
    let got: BTreeMap<PathBuf, ChangeKind> = seen
        .into_iter()
        .filter_map(|(p, (first, last))| {
            let k = match (first != ChangeKind::Created, last != ChangeKind::Removed) {
                (false, false) => return None,
                (false, true) => ChangeKind::Created,
                (true, false) => ChangeKind::Removed,
                (true, true) => ChangeKind::Modified,
            };
            Some((p, k))
        })
        .collect();
    let odd: Vec<String> = want
        .iter()
        .filter(|(p, k)| {
            // A directory that became a file is `Modified` here, `A` there.
            let swap = swapped.contains(*p)
                || (got.get(*p) == Some(&ChangeKind::Modified)
                    && want.keys().any(|q| q != *p && q.starts_with(p)));
            got.get(*p) != Some(k) && !swap
        })
        .map(|(p, k)| format!("{} {k:?}, reported {:?}", p.display(), got.get(p)))
        .chain(
            got.iter()
                .filter(|(p, _)| !want.contains_key(*p))
                .map(|(p, k)| format!("{} {k:?} reported, not in the diff", p.display())),
        )
        .take(5)
        .collect();
    for o in &odd {
        eprintln!("  differs: {o}");
    }
    Round {
        took,
        files: want.len(),
        batches,
        exact: odd.is_empty(),
    }
}

pub(super) fn vcs(args: &[String]) {
    let [src, from, to, rest @ ..] = args else {
        eprintln!("usage: vcs SRC FROM TO [native|portable|poll]");
        std::process::exit(2);
    };
    let backend = match rest.first().map(String::as_str) {
        None | Some("native") => Backend::Native,
        Some("portable") => Backend::Portable,
        Some("poll") => Backend::Poll {
            interval: Duration::from_millis(100),
        },
        Some(other) => panic!("unknown backend {other}"),
    };
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let out = Command::new("git")
        .args(["clone", "-q", "--no-hardlinks", "--no-checkout", src])
        .arg(&repo)
        .status()
        .expect("git clone");
    assert!(out.success());
    git(&repo, &["checkout", "-q", from]);
    if let Some(ms) = std::env::var("SPECWATCH_VCS_DELAY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        let changed = git(
            &repo,
            &[
                "diff",
                "--no-renames",
                "--name-only",
                "--diff-filter=M",
                from,
                to,
            ],
        );
        let lines: Vec<&str> = changed.lines().collect();
        let picks: Vec<&str> = [lines.len() / 4, lines.len() / 2, 3 * lines.len() / 4]
            .iter()
            .filter_map(|&i| lines.get(i).copied())
            .collect();
        let attrs: String = picks
            .iter()
            .map(|p| format!("/{p} filter=slow\n"))
            .collect();
        std::fs::write(repo.join(".git/info/attributes"), attrs).unwrap();
        let sleep = format!("sleep {}; cat", ms as f64 / 1000.0);
        git(&repo, &["config", "filter.slow.smudge", &sleep]);
        git(&repo, &["config", "filter.slow.clean", "cat"]);
    }
    println!("vcs: {src} {from} <-> {to}, backend {backend}, quiet 50 ms, max delay 1 s");
    println!("| hold | checkout | files | took | batches | exact |");
    println!("|---|---|---|---|---|---|");
    for hold in [false, true] {
        let m = Manager::builder().backend(backend).build().unwrap();
        let rx = m.subscribe();
        let mut spec = WatchSpec::new([&repo]);
        if hold {
            spec = spec.vcs_settle(DEFAULT_VCS_SETTLE);
        }
        m.apply("vcs", spec).unwrap();
        m.wait_watching("vcs", Duration::from_secs(120)).unwrap();
        m.sync("vcs", Duration::from_secs(120)).unwrap();
        rx.try_iter().for_each(drop);
        for (a, b) in [(from, to), (to, from)] {
            let r = checkout(&m, &rx, &repo, a, b);
            println!(
                "| {} | {a} -> {b} | {} | {:.0} ms | {} | {} |",
                if hold { "on" } else { "off" },
                r.files,
                r.took.as_secs_f64() * 1000.0,
                r.batches,
                if r.exact { "yes" } else { "no" }
            );
        }
    }
}
