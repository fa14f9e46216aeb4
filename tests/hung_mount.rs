//! A mount whose server stopped answering holds up the looks of its own
//! file system only (the scanner's lanes, issue 22): beside it, another
//! polled mount's changes are reported with their usual latency (measured
//! here, before and while the first one hangs), and once the server
//! answers again the hung spec reports exactly what changed meanwhile.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::fuse::{BindMount, bind_mount};
use common::*;
use specwatch::{Backend, ChangeKind, ContentHash, HoldReason, Manager, Phase};

/// A storage directory and a FUSE (`bindfs`) mount of it, in a directory
/// `name` of its own below `d`. (The directory holding a polled root is
/// polled too, for the root's registration, and its look `stat`s the
/// mount point, which crosses into the mount: two mount points in one
/// directory would share that look, and a hang of either holds it up,
/// and says so for both specs.)
fn storage(d: &Path, name: &str) -> Option<(PathBuf, PathBuf, BindMount)> {
    let src = d.join(name).join("storage");
    let mnt = d.join(name).join("mount");
    fs::create_dir_all(&src).unwrap();
    fs::create_dir(&mnt).unwrap();
    let mount = bind_mount(&src, &mnt)?;
    Some((src, mnt, mount))
}

/// A manager whose `Auto` polls every `every`, and whose looks under way
/// for 500 ms say their storage is not answering; its events collected.
fn polling_manager(every: Duration) -> (Manager, Collector) {
    let m = Manager::builder()
        .poll_interval(every)
        .storage_deadline(Duration::from_millis(500))
        .git_excludes_file(None)
        .build()
        .unwrap();
    let c = Collector::new(m.subscribe());
    (m, c)
}

/// Writes `n` files (named `prefix` and a number) in `src`, each once the
/// one before it was reported by spec `name` through `mnt`: how long each
/// took to be reported, sorted.
fn latencies(
    c: &mut Collector,
    name: &str,
    (src, mnt): (&Path, &Path),
    prefix: &str,
    n: usize,
) -> Vec<Duration> {
    let mut took = Vec::with_capacity(n);
    for i in 0..n {
        let file = format!("{prefix}{i}");
        let seen = mnt.join(&file);
        let wrote = Instant::now();
        fs::write(src.join(&file), "x").unwrap();
        c.wait(&format!("{} reported by {name}", seen.display()), |c| {
            c.has(name, &seen, ChangeKind::Created)
        });
        took.push(wrote.elapsed());
    }
    took.sort();
    took
}

/// Runs `f` while `mount`'s server is stopped; if it panics, the server
/// is let go first (a manager whose looks hang would hang its drop).
fn resumed_on_panic<T>(mount: &mut BindMount, f: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(t) => t,
        Err(e) => {
            mount.resume();
            std::panic::resume_unwind(e);
        }
    }
}

fn median_max(l: &[Duration]) -> (Duration, Duration) {
    (l[l.len() / 2], l[l.len() - 1])
}

/// Two FUSE mounts, both polled (`Auto`), one spec each. The server of
/// one stops (SIGSTOP): its spec goes `Degraded` ("storage not
/// answering") while every write to the other mount is still reported,
/// about as fast as before (its looks are on a lane of their own), and the
/// healthy spec stays `Watching`. Once the server answers again the hung
/// spec reports exactly the net changes made meanwhile. (Before the
/// lanes, one scanner thread looked at both mounts, and the hung look held
/// up every look of the healthy one: none of its writes was reported.)
#[test]
fn a_hung_mount_holds_up_only_itself_beside_another_polled_mount() {
    let d = tmp();
    let Some((hung_src, hung_mnt, mut hung)) = storage(d.path(), "hung") else {
        return;
    };
    let Some((ok_src, ok_mnt, _ok)) = storage(d.path(), "healthy") else {
        return;
    };
    fs::write(hung_src.join("pre"), "1").unwrap();
    fs::write(hung_src.join("gone"), "1").unwrap();
    let every = Duration::from_millis(20);
    let (m, mut c) = polling_manager(every);
    for (name, mnt) in [("hung", &hung_mnt), ("healthy", &ok_mnt)] {
        let s = start(&m, name, spec(&[mnt]));
        assert_eq!(s.roots[0].backend, Backend::Poll { interval: every });
    }
    let before = latencies(&mut c, "healthy", (&ok_src, &ok_mnt), "before", 15);
    // (Resumed after 60 s whatever happens to this process.)
    hung.pause(Duration::from_secs(60));
    let statuses_at_pause = c.statuses.get("healthy").map_or(0, Vec::len);
    // On failure the server is let go first: a manager whose looks hang
    // would hang its drop.
    let during = resumed_on_panic(&mut hung, || {
        // A look at the hung mount is under way and does not come back.
        c.wait("the hung spec Degraded: storage not answering", |c| {
            matches!(phase(c, "hung"), Some(Phase::Degraded { reason })
                if reason.contains("storage not answering") && reason.contains("hung"))
        });
        // What changes meanwhile: one file written, one removed, one
        // created, one created and removed again (no net change).
        fs::write(hung_src.join("pre"), "22").unwrap();
        fs::remove_file(hung_src.join("gone")).unwrap();
        fs::write(hung_src.join("new"), "x").unwrap();
        fs::write(hung_src.join("brief"), "x").unwrap();
        fs::remove_file(hung_src.join("brief")).unwrap();
        let during = latencies(&mut c, "healthy", (&ok_src, &ok_mnt), "during", 30);
        c.drain();
        assert!(
            matches!(phase(&c, "hung"), Some(Phase::Degraded { .. })),
            "still hung: {:?}",
            phase(&c, "hung")
        );
        during
    });
    let healthy_since: Vec<Phase> = c.statuses.get("healthy").map_or(Vec::new(), |v| {
        v[statuses_at_pause..]
            .iter()
            .map(|s| s.phase.clone())
            .collect()
    });
    let reported_before = c.changes("hung").len();
    hung.resume();
    let ((bm, bx), (dm, dx)) = (median_max(&before), median_max(&during));
    note(&format!(
        "healthy mount's writes reported (poll interval 20 ms, quiet window 10 ms): \
         before the other hung: median {bm:?}, max {bx:?} ({} writes); \
         while it hung: median {dm:?}, max {dx:?} ({} writes)",
        before.len(),
        during.len()
    ));
    assert!(
        healthy_since.iter().all(|p| *p == Phase::Watching),
        "the healthy spec stays Watching: {healthy_since:?}"
    );
    assert!(
        dm <= bm * 5 + Duration::from_millis(250),
        "the healthy mount's latency kept its pace: median {dm:?} while the other hung, \
         {bm:?} before"
    );
    // The hung spec catches up: exactly the net changes.
    let at = |n: &str| hung_mnt.join(n);
    let want: BTreeSet<(PathBuf, ChangeKind)> = [
        (at("pre"), ChangeKind::Modified),
        (at("gone"), ChangeKind::Removed),
        (at("new"), ChangeKind::Created),
    ]
    .into();
    c.wait("the hung spec's changes, once its server answers", |c| {
        want.iter().all(|(p, k)| c.has("hung", p, *k))
    });
    m.sync("hung", WAIT).unwrap();
    c.wait("the hung spec Watching again", |c| {
        phase(c, "hung") == Some(Phase::Watching)
    });
    c.drain();
    let got: BTreeSet<(PathBuf, ChangeKind)> = c.changes("hung")[reported_before..]
        .iter()
        .map(|c| (c.path.clone(), c.kind))
        .collect();
    assert_eq!(got, want, "exactly the net changes made while it hung");
    assert_eq!(
        c.changes("hung").len() - reported_before,
        want.len(),
        "each once: {:?}",
        &c.changes("hung")[reported_before..]
    );
}

/// A directory on a mount that one spec polls (`Auto`) and another
/// watches with the event backend (`Native`): its polls ran on the
/// engine's thread (its events and the look cross), so a hang of the
/// mount stalled the engine. They run on the scanner now, the names its
/// events look at meanwhile keeping the engine's view: while the mount
/// hangs, the polled spec says so, and a local spec's writes are
/// reported and its barriers pass; once the server answers again, the
/// polled spec reports what changed meanwhile.
#[test]
fn a_hung_mount_watched_and_polled_holds_up_its_polls_not_the_engine() {
    let d = tmp();
    let Some((src, mnt, mut mount)) = storage(d.path(), "shared") else {
        return;
    };
    let local = d.path().join("local");
    fs::create_dir(&local).unwrap();
    let every = Duration::from_millis(20);
    let (m, mut c) = polling_manager(every);
    let s = start(&m, "polled", spec(&[&mnt]));
    assert_eq!(s.roots[0].backend, Backend::Poll { interval: every });
    let s = start(&m, "watched", spec(&[&mnt]).backend(Backend::Native));
    assert_eq!(s.roots[0].backend, Backend::Native);
    start(&m, "local", spec(&[&local]));
    let before = latencies(&mut c, "local", (&local, &local), "before", 10);
    // (Resumed after 60 s whatever happens to this process.)
    mount.pause(Duration::from_secs(60));
    let during = resumed_on_panic(&mut mount, || {
        c.wait("the polled spec Degraded: storage not answering", |c| {
            matches!(phase(c, "polled"), Some(Phase::Degraded { reason })
                if reason.contains("storage not answering"))
        });
        fs::write(src.join("late"), "x").unwrap();
        let during = latencies(&mut c, "local", (&local, &local), "during", 20);
        m.sync("local", Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("the local spec's barrier with the mount hung: {e}"));
        during
    });
    mount.resume();
    let ((bm, bx), (dm, dx)) = (median_max(&before), median_max(&during));
    note(&format!(
        "local writes reported beside a watched and polled mount (quiet window 10 ms): \
         before it hung: median {bm:?}, max {bx:?}; while it hung: median {dm:?}, max {dx:?}"
    ));
    let late = mnt.join("late");
    c.wait("the write below the mount, once it answers again", |c| {
        c.has("polled", &late, ChangeKind::Created)
    });
    m.sync("polled", WAIT).unwrap();
    c.wait("the polled spec Watching again", |c| {
        phase(c, "polled") == Some(Phase::Watching)
    });
}

/// Content hashes off the engine's thread: a spec that compares contents
/// (`skip_same_content`) watches a FUSE mount natively (writes through
/// the mount make events), beside a local spec that compares contents
/// too. The mount's server stops (SIGSTOP) while the mount's spec has a
/// batch open: as it closes, the hash of its file hangs on the mount's
/// lane, and the batch waits (a hold, in the status), not the engine:
/// the local spec's writes are reported, hashed, at their usual latency
/// (measured before and while the mount hangs), and the mount's batch is
/// delivered at the storage deadline with its file, without a hash
/// (reported, not lost). Once the server answers, a change through the
/// mount comes with its hash again. (Before, the engine hashed a closing
/// batch's files itself, and waited: a hash on a hung mount stalled
/// every spec.)
#[test]
fn a_hash_on_a_hung_mount_holds_up_its_batch_not_the_engine() {
    let d = tmp();
    let Some((_src, mnt, mut mount)) = storage(d.path(), "hashed") else {
        return;
    };
    let local = d.path().join("local");
    fs::create_dir(&local).unwrap();
    let (m, mut c) = polling_manager(Duration::from_millis(20));
    start(&m, "local", spec(&[&local]).skip_same_content(true));
    // The mount's batches close a second after their last change: time
    // for the test to stop the server while one is open.
    let quiet = Duration::from_secs(1);
    let s = start(
        &m,
        "mount",
        spec(&[&mnt])
            .backend(Backend::Native)
            .skip_same_content(true)
            .quiet_window(quiet),
    );
    assert_eq!(s.roots[0].backend, Backend::Native);
    let before = latencies(&mut c, "local", (&local, &local), "before", 15);
    let hung = mnt.join("hung.txt");
    fs::write(&hung, "through the mount").unwrap();
    let written = Instant::now();
    // One inotify queue, in order: once the local spec's barrier passes,
    // the write through the mount is in the mount spec's open batch.
    m.sync("local", WAIT).unwrap();
    // (Resumed after 60 s whatever happens to this process.)
    mount.pause(Duration::from_secs(60));
    let paused = written.elapsed();
    let during = resumed_on_panic(&mut mount, || {
        c.drain();
        assert!(
            c.changes("mount").is_empty() && paused < quiet,
            "the mount's batch was to be open when its server stopped ({paused:?} after \
             the write, quiet window {quiet:?})"
        );
        c.wait("the mount's batch waiting for its hash (a hold)", |c| {
            c.statuses["mount"].last().is_some_and(|s| {
                s.holds
                    .iter()
                    .any(|h| matches!(h.reason, HoldReason::Hashing { files: 1 }))
            })
        });
        let during = latencies(&mut c, "local", (&local, &local), "during", 30);
        c.wait(
            "the mount's batch, at the storage deadline, without a hash",
            |c| {
                c.changes("mount").iter().any(|ch| {
                    ch.path == hung && ch.kind == ChangeKind::Created && ch.hash.is_none()
                })
            },
        );
        let hashed = c
            .changes("local")
            .iter()
            .filter(|ch| ch.kind == ChangeKind::Created)
            .all(|ch| ch.hash == Some(ContentHash::of(b"x")));
        assert!(hashed, "the local spec's files come with their hashes");
        during
    });
    mount.resume();
    let ((bm, bx), (dm, dx)) = (median_max(&before), median_max(&during));
    note(&format!(
        "local writes reported, hashed (skip_same_content), beside a spec hashing on a hung \
         mount (quiet window 10 ms): before it hung: median {bm:?}, max {bx:?} ({} writes); \
         while its hash hung: median {dm:?}, max {dx:?} ({} writes)",
        before.len(),
        during.len()
    ));
    assert!(
        dm <= bm * 5 + Duration::from_millis(250),
        "the local spec's latency kept its pace: median {dm:?} while the mount's hash hung, \
         {bm:?} before"
    );
    // The server answers again: a change through the mount, hashed.
    let after = mnt.join("after.txt");
    fs::write(&after, "after").unwrap();
    c.wait("a change through the mount with its hash", |c| {
        c.changes("mount")
            .iter()
            .any(|ch| ch.path == after && ch.hash == Some(ContentHash::of(b"after")))
    });
}
