//! Settling around version control (`WatchOptions::vcs_settle`): a real
//! `git checkout` between two branches that differ by thousands of files,
//! slower than the spec's `max_delay`, arrives as one batch equal to
//! `git diff --name-status`; a lock left behind holds one batch to the
//! bound, and the status says so. Unix: the checkout is slowed by a
//! smudge filter run through `sh`.
#![cfg(unix)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use specwatch::{Backend, ChangeKind, HoldReason, HoldStatus, WatchSpec};

both_backends!(
    a_checkout_slower_than_max_delay_is_one_batch,
    a_lock_left_behind_holds_one_batch_to_the_bound_and_says_so
);

/// The spec's maximum delay: the checkout lasts several times longer.
const MAX_DELAY: Duration = Duration::from_millis(100);

/// `git -C dir args...`, which must succeed; its standard output.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=specwatch",
            "-c",
            "user.email=specwatch@example.com",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "core.autocrlf=false",
        ])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn have_git() -> bool {
    Command::new("git").arg("--version").output().is_ok()
}

/// A repository on branch `main` with 30 directories of 100 files, and a
/// branch `other` where a third of them are modified, a third removed,
/// and 1,020 files added (no directory comes or goes). Three files named
/// `slow` differ too: checking them out takes 150 ms each (a smudge
/// filter that sleeps), in the middle of the checkout, which git does in
/// path order while it holds `.git/index.lock`.
fn two_branches(repo: &Path) {
    std::fs::create_dir_all(repo).unwrap();
    git(repo, &["init", "-q", "-b", "main"]);
    let file = |d: usize, f: &str| repo.join(format!("d{d:02}")).join(f);
    for d in 0..30 {
        std::fs::create_dir_all(repo.join(format!("d{d:02}"))).unwrap();
        for f in 0..100 {
            std::fs::write(file(d, &format!("f{f:03}")), format!("{d} {f} main\n")).unwrap();
        }
    }
    for d in [5, 15, 25] {
        std::fs::write(file(d, "slow"), "main\n").unwrap();
    }
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-q", "-m", "main"]);
    git(repo, &["checkout", "-q", "-b", "other"]);
    for d in 0..30 {
        for f in 0..34 {
            std::fs::write(file(d, &format!("f{f:03}")), format!("{d} {f} other\n")).unwrap();
            std::fs::write(file(d, &format!("n{f:03}")), "new\n").unwrap();
        }
        for f in 34..67 {
            std::fs::remove_file(file(d, &format!("f{f:03}"))).unwrap();
        }
    }
    for d in [5, 15, 25] {
        std::fs::write(file(d, "slow"), "other\n").unwrap();
    }
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-q", "-m", "other"]);
    git(repo, &["checkout", "-q", "main"]);
    std::fs::write(repo.join(".git/info/attributes"), "slow filter=slow\n").unwrap();
    git(repo, &["config", "filter.slow.smudge", "sleep 0.15; cat"]);
    git(repo, &["config", "filter.slow.clean", "cat"]);
}

/// What checking out `to` from `from` changes, as `git diff` says.
fn diff(repo: &Path, from: &str, to: &str) -> BTreeMap<PathBuf, ChangeKind> {
    git(repo, &["diff", "--no-renames", "--name-status", from, to])
        .lines()
        .map(|l| {
            let (status, path) = l.split_once('\t').expect("status TAB path");
            let kind = match status {
                "M" => ChangeKind::Modified,
                "A" => ChangeKind::Created,
                "D" => ChangeKind::Removed,
                other => panic!("unexpected status {other} in {l}"),
            };
            (repo.join(path), kind)
        })
        .collect()
}

fn a_checkout_slower_than_max_delay_is_one_batch(b: Backend) {
    if !have_git() {
        skip("git is not installed");
        return;
    }
    let d = tmp();
    let repo = d.path().join("repo");
    two_branches(&repo);
    let want = diff(&repo, "main", "other");
    assert!(want.len() > 3000, "{} files differ", want.len());
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    let spec = WatchSpec::new([&repo])
        .quiet_window(Duration::from_millis(10))
        .max_delay(MAX_DELAY)
        .vcs_settle(Duration::from_secs(30));
    start(&m, "s", spec);
    m.sync("s", WAIT).expect("sync before");
    c.drain();
    c.clear();

    let began = Instant::now();
    git(&repo, &["checkout", "-q", "other"]);
    let took = began.elapsed();
    assert!(
        took > MAX_DELAY * 4,
        "the checkout must outlast max_delay several times to test anything: {took:?}"
    );
    c.wait("a batch after the checkout", |c| {
        c.batches.get("s").is_some_and(|b| !b.is_empty())
    });
    let first = c.batches["s"][0].clone();
    let got: BTreeMap<PathBuf, ChangeKind> = first
        .changes
        .iter()
        .map(|ch| (ch.path.clone(), ch.kind))
        .collect();
    if got != want {
        let missing: Vec<_> = want
            .iter()
            .filter(|(p, k)| got.get(*p) != Some(k))
            .take(5)
            .collect();
        let extra: Vec<_> = got
            .iter()
            .filter(|(p, k)| want.get(*p) != Some(k))
            .take(5)
            .collect();
        panic!(
            "the first batch after a {took:?} checkout is not the whole diff: {} changes, \
             {} expected; missing or different: {missing:?}; unexpected: {extra:?}",
            got.len(),
            want.len()
        );
    }
    m.sync("s", WAIT).expect("sync after");
    c.drain();
    assert_eq!(
        c.batches["s"].len(),
        1,
        "one batch for one checkout, then nothing: {:?}",
        c.batches["s"]
            .iter()
            .map(|b| b.changes.len())
            .collect::<Vec<_>>()
    );
    let held = c
        .statuses
        .get("s")
        .into_iter()
        .flatten()
        .find_map(|s| s.vcs_lock.clone());
    let held = held.expect("a status said the batch was held");
    assert_eq!(held.path, repo.join(".git/index.lock"));
    assert!(!held.overdue);
    assert_eq!(m.status("s").unwrap().vcs_lock, None, "the lock is gone");
}

fn a_lock_left_behind_holds_one_batch_to_the_bound_and_says_so(b: Backend) {
    let d = tmp();
    let repo = d.path().join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(repo.join("src")).unwrap();
    let lock = repo.join(".git/index.lock");
    std::fs::write(&lock, "").unwrap();
    let bound = Duration::from_millis(400);
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[&repo]).vcs_settle(bound));

    let a = repo.join("src/a");
    let written = Instant::now();
    std::fs::write(&a, "1").unwrap();
    c.wait("the batch held by the lock", |c| {
        c.has("s", &a, ChangeKind::Created)
    });
    let held_for = written.elapsed();
    assert!(held_for >= bound, "held {held_for:?}, bound {bound:?}");
    c.wait("a status saying the lock is overdue", |c| {
        c.statuses["s"].last().is_some_and(|s| {
            s.vcs_lock
                .as_ref()
                .is_some_and(|l| l.overdue && l.path == lock)
        })
    });
    // The same hold in the list of every hold, with its bound.
    let st = m.status("s").unwrap();
    let listed: Vec<&HoldStatus> = st
        .holds
        .iter()
        .filter(|h| matches!(&h.reason, HoldReason::VcsLock { path } if *path == lock))
        .collect();
    assert_eq!(listed.len(), 1, "{:?}", st.holds);
    assert!(listed[0].overdue);
    assert_eq!(listed[0].until, Some(listed[0].since + bound));
    // Overdue: the next change flows without waiting for the lock.
    let b2 = repo.join("src/b");
    let written = Instant::now();
    std::fs::write(&b2, "1").unwrap();
    c.wait("a change past an overdue lock", |c| {
        c.has("s", &b2, ChangeKind::Created)
    });
    assert!(
        written.elapsed() < bound,
        "not held again: {:?}",
        written.elapsed()
    );
    // Removed: the status says so at the next look (within a second).
    std::fs::remove_file(&lock).unwrap();
    c.wait("a status without the lock", |c| {
        c.statuses["s"].last().is_some_and(|s| s.vcs_lock.is_none())
    });
    assert_eq!(m.status("s").unwrap().holds, [], "nothing holds it");
}
