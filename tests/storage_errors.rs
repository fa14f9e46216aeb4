//! Storage that answers with errors (issue 22): a spec polling a FUSE
//! mount whose operations fail with `EIO` or `ESTALE` on demand
//! (`testkit/faultfs.py`) says so in its status, naming the error and
//! the directory, reports nothing it did not see (a look that failed is
//! not "everything removed"), leaves the other specs served, and once the
//! storage answers again reports exactly the net changes made meanwhile.
//! Linux only (FUSE, through Debian's `python3-fusepy`; `.ci/run`
//! installs it and sets `SPECWATCH_REQUIRE_FAULTFS`, so the tests fail
//! there rather than skip).
#![cfg(target_os = "linux")]

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::faultfs::{Errno, FaultFs, fault_mount};
use common::*;
use specwatch::{Backend, ChangeKind, Manager, Phase};

/// How often `Auto` polls the mount.
const EVERY: Duration = Duration::from_millis(20);

/// A manager whose `Auto` polls FUSE every [`EVERY`].
fn polling_manager() -> Manager {
    Manager::builder()
        .poll_interval(EVERY)
        .git_excludes_file(None)
        .build()
        .expect("manager starts")
}

/// Whether `name`'s last status is `Degraded` with a reason that names
/// `path` and the error `errno`.
fn degraded_naming(c: &Collector, name: &str, path: &Path, errno: Errno) -> bool {
    matches!(phase(c, name), Some(Phase::Degraded { reason })
        if reason.contains(&*path.to_string_lossy()) && reason.contains(errno.says()))
}

/// Every change `name` reported, per path, in order.
fn changes_by_path(c: &Collector, name: &str) -> BTreeMap<PathBuf, Vec<ChangeKind>> {
    let mut by = BTreeMap::<PathBuf, Vec<ChangeKind>>::new();
    for ch in c.changes(name) {
        by.entry(ch.path).or_default().push(ch.kind);
    }
    by
}

/// Writes the files of `names` (relative, with their directories) below
/// `root`, each holding its own name.
fn make(root: &Path, names: &[&str]) {
    for n in names {
        let p = root.join(n);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, n).unwrap();
    }
}

/// The tree both cases start with, in the source of the mount.
const BEFORE: &[&str] = &[
    "keep", "edit", "gone", "sub/deep", "sub/old", "sub/edit", "olddir/x",
];

/// A fault mount whose source holds [`BEFORE`], a manager, and its spec
/// `shared` on the mount (polled: `Auto` on FUSE), started and synced,
/// with a collector that has taken nothing yet of what follows; `None`
/// (said loudly) where the mount cannot be made.
fn on_a_fault_mount() -> Option<(FaultFs, Manager, Collector)> {
    let fs = fault_mount()?;
    make(fs.src(), BEFORE);
    let m = polling_manager();
    let mut c = Collector::new(m.subscribe());
    let s = start(&m, "shared", spec(&[fs.mnt()]));
    assert_eq!(s.roots[0].backend, Backend::Poll { interval: EVERY });
    m.sync("shared", WAIT).unwrap();
    c.drain();
    c.clear();
    Some((fs, m, c))
}

/// Lets the mount answer again, then checks that spec `shared` goes
/// `Watching`, with no last error, and has reported exactly `want`
/// (paths in the mount, each once) since the collector was cleared.
/// Returns how long after the mount answered it was `Watching`, and
/// synced.
fn heal_then_expect(
    fs: &mut FaultFs,
    m: &Manager,
    c: &mut Collector,
    want: &[(&str, ChangeKind)],
) -> (Duration, Duration) {
    let healing = Instant::now();
    fs.heal();
    c.wait("the shared spec Watching again", |c| {
        phase(c, "shared") == Some(Phase::Watching)
    });
    let to_watching = healing.elapsed();
    m.sync("shared", WAIT).unwrap();
    c.drain();
    let to_synced = healing.elapsed();
    let want: BTreeMap<PathBuf, Vec<ChangeKind>> = want
        .iter()
        .map(|(n, k)| (fs.mnt().join(n), vec![*k]))
        .collect();
    assert_eq!(
        changes_by_path(c, "shared"),
        want,
        "the net changes made while it failed"
    );
    let st = m.status("shared").unwrap();
    assert_eq!(
        (st.last_error, st.last_error_time),
        (None, None),
        "healthy again"
    );
    assert!(index_problems(m).is_empty(), "{:?}", index_problems(m));
    (to_watching, to_synced)
}

/// Runs `body`, and on a panic heals the mount first: a manager whose
/// scanner is stuck on a failing look would be slow to drop, and the
/// panic's message is what matters.
fn healing_on_panic(fs: &mut FaultFs, body: impl FnOnce(&mut FaultFs)) {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(fs)));
    if let Err(e) = r {
        fs.heal();
        std::panic::resume_unwind(e);
    }
}

/// The whole mount fails with `errno`: the spec on it goes `Degraded`
/// naming the error and the mount, reports nothing while it fails (in
/// particular no removal, its `sync` included: it times out), another spec
/// is served meanwhile; once the mount answers again the spec is
/// `Watching` and reports exactly the net changes made in the source
/// meanwhile.
fn the_whole_mount_fails_then_answers(errno: Errno) {
    let Some((mut fs, m, mut c)) = on_a_fault_mount() else {
        return;
    };
    let (src, mnt) = (fs.src().to_path_buf(), fs.mnt().to_path_buf());
    let local = tmp();
    start(&m, "local", spec(&[local.path()]));

    let failing = Instant::now();
    fs.fail(errno, "/");
    healing_on_panic(&mut fs, |fs| {
        c.wait(
            &format!("the shared spec Degraded, naming {errno:?} and the mount"),
            |c| degraded_naming(c, "shared", &mnt, errno),
        );
        let to_degraded = failing.elapsed();
        let st = m.status("shared").unwrap();
        note(&format!(
            "{errno:?} on the whole mount: Degraded {to_degraded:?} after the switch (polls every \
             {EVERY:?}): {:?}; last error: {:?}",
            st.phase, st.last_error
        ));
        assert_eq!(
            m.status("local").map(|s| s.phase),
            Some(Phase::Watching),
            "the local spec"
        );

        // Meanwhile, in the source: created, written, removed.
        make(&src, &["new", "sub/new", "newdir/inner"]);
        fs::write(src.join("edit"), "edited, longer").unwrap();
        fs::write(src.join("sub/edit"), "edited, longer").unwrap();
        fs::remove_file(src.join("gone")).unwrap();
        fs::remove_file(src.join("sub/old")).unwrap();
        fs::remove_dir_all(src.join("olddir")).unwrap();
        // A barrier of the failing spec cannot pass (nothing can be said
        // of what changed there): it times out, as for a mount that hangs.
        let r = m.sync("shared", Duration::from_millis(300));
        assert!(
            matches!(r, Err(specwatch::Error::Timeout { .. })),
            "a sync of the failing spec: {r:?}"
        );
        // Polls fail after those changes (two failed operations on the
        // mount's root: the look of the second began after the changes),
        // and the local spec is served throughout: its writes reported,
        // its barriers passing.
        let mark = fs.failures().len();
        let began = Instant::now();
        let mut n = 0;
        while n < 3 || fs.failed_since(mark, "/") < 2 {
            assert!(
                began.elapsed() < WAIT,
                "timed out after {WAIT:?} waiting for two failed polls of the mount's root \
                 (failures: {:?})",
                fs.failures()
            );
            let f = local.path().join(format!("f{n}"));
            fs::write(&f, "x").unwrap();
            m.sync("local", WAIT)
                .unwrap_or_else(|e| panic!("the local spec's barrier, mount failing: {e}"));
            c.drain();
            assert!(c.has("local", &f, ChangeKind::Created), "local write {n}");
            n += 1;
        }
        c.drain();
        assert!(
            c.changes("shared").is_empty(),
            "the failing mount's spec reported changes it could not see: {:?}",
            c.changes("shared")
        );
        assert!(
            degraded_naming(&c, "shared", &mnt, errno),
            "still Degraded while failing: {:?}",
            phase(&c, "shared")
        );
    });

    use ChangeKind::*;
    let (to_watching, to_synced) = heal_then_expect(
        &mut fs,
        &m,
        &mut c,
        &[
            ("new", Created),
            ("sub/new", Created),
            ("newdir", Created),
            ("newdir/inner", Created),
            ("edit", Modified),
            ("sub/edit", Modified),
            ("gone", Removed),
            ("sub/old", Removed),
            ("olddir", Removed),
            ("olddir/x", Removed),
        ],
    );
    note(&format!(
        "{errno:?}: Watching {to_watching:?} after the mount answered again, every change \
         delivered (sync) {to_synced:?} after"
    ));
}

#[test]
fn a_mount_failing_with_eio_degrades_its_spec_and_then_reports_what_changed() {
    the_whole_mount_fails_then_answers(Errno::Eio);
}

#[test]
fn a_mount_failing_with_estale_degrades_its_spec_and_then_reports_what_changed() {
    the_whole_mount_fails_then_answers(Errno::Estale);
}

/// One subdirectory fails (`EIO` for `sub` and below): the spec is
/// `Degraded` naming it, the rest of the tree keeps reporting, nothing
/// below `sub` is reported removed; once it answers again, its net changes
/// come.
#[test]
fn a_failing_subdirectory_leaves_the_rest_of_the_tree_reporting() {
    let Some((mut fs, m, mut c)) = on_a_fault_mount() else {
        return;
    };
    let (src, mnt) = (fs.src().to_path_buf(), fs.mnt().to_path_buf());
    let sub = mnt.join("sub");

    let failing = Instant::now();
    fs.fail(Errno::Eio, "/sub");
    healing_on_panic(&mut fs, |fs| {
        c.wait("the shared spec Degraded, naming EIO and sub", |c| {
            degraded_naming(c, "shared", &sub, Errno::Eio)
        });
        let st = m.status("shared").unwrap();
        note(&format!(
            "EIO below sub: Degraded {:?} after the switch: {:?}",
            failing.elapsed(),
            st.phase
        ));
        make(&src, &["sub/new"]);
        fs::write(src.join("sub/edit"), "edited, longer").unwrap();
        fs::remove_file(src.join("sub/old")).unwrap();
        // The rest of the tree: each change reported while sub fails.
        let mark = fs.failures().len();
        for n in 0..3 {
            let f = format!("top{n}");
            make(&src, &[&f]);
            let seen = mnt.join(&f);
            c.wait(&format!("{f}, beside the failing sub, reported"), |c| {
                c.has("shared", &seen, ChangeKind::Created)
            });
        }
        fs::write(src.join("edit"), "edited, longer").unwrap();
        let edit = mnt.join("edit");
        c.wait("edit, beside the failing sub, reported modified", |c| {
            c.has("shared", &edit, ChangeKind::Modified)
        });
        // (Two failed operations on sub after its changes: a look at it,
        // or the root's look's `stat` of it, began after them, and failed.)
        fs.wait_failed(mark, "/sub", 2, "two failed looks at sub");
        c.drain();
        let below: Vec<_> = c
            .changes("shared")
            .into_iter()
            .filter(|ch| ch.path.starts_with(&sub))
            .collect();
        assert!(
            below.is_empty(),
            "changes reported below the failing sub: {below:?}"
        );
        assert!(
            degraded_naming(&c, "shared", &sub, Errno::Eio),
            "still Degraded while sub fails: {:?}",
            phase(&c, "shared")
        );
    });

    use ChangeKind::*;
    let (to_watching, _) = heal_then_expect(
        &mut fs,
        &m,
        &mut c,
        &[
            ("top0", Created),
            ("top1", Created),
            ("top2", Created),
            ("edit", Modified),
            ("sub/new", Created),
            ("sub/edit", Modified),
            ("sub/old", Removed),
        ],
    );
    note(&format!(
        "EIO below sub: Watching {to_watching:?} after sub answered again"
    ));
}
