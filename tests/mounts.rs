//! Shared storage unmounted and mounted again under a live watch (issue
//! 22, item 3): a polled or natively watched root's spec says its file
//! system went, keeps what it knew, and once it is back reports exactly
//! the net changes made while it was away: no "everything removed", then
//! "everything created".
//! The mounts are `bindfs` (FUSE) bind mounts, as in `tests/backends.rs`.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::fuse::bind_mount;
use common::*;
use specwatch::{Backend, ChangeKind, Manager, Phase};

/// Each path's kinds reported for `name` in the batches collected so far.
fn reported(c: &Collector, name: &str) -> BTreeMap<PathBuf, Vec<ChangeKind>> {
    let mut out: BTreeMap<PathBuf, Vec<ChangeKind>> = BTreeMap::new();
    for ch in c.changes(name) {
        out.entry(ch.path.to_path_buf()).or_default().push(ch.kind);
    }
    out
}

/// Unmounts the storage under a spec whose root is `root` (the mount
/// point, or a directory below it), writes to the storage itself meanwhile
/// (as another host would), mounts it again: the spec says the storage
/// went, reports nothing while it is away, and then exactly the net
/// changes.
fn unmounted_and_mounted_again(backend: Option<Backend>, below: bool) {
    let d = tmp();
    let src = d.path().join("storage");
    let mnt = d.path().join("replica");
    fs::create_dir_all(src.join("charts/old")).unwrap();
    fs::create_dir(&mnt).unwrap();
    for f in ["charts/a.tgz", "charts/b.tgz", "charts/old/c.tgz"] {
        fs::write(src.join(f), "v1").unwrap();
    }
    let Some(mut mount) = bind_mount(&src, &mnt) else {
        return;
    };
    let root = if below {
        mnt.join("charts")
    } else {
        mnt.clone()
    };
    let charts = mnt.join("charts");
    let every = Duration::from_millis(20);
    let mut b = Manager::builder().poll_interval(every);
    if let Some(backend) = backend {
        b = b.backend(backend);
    }
    let m = b.build().unwrap();
    let mut c = Collector::new(m.subscribe());
    let s = start(&m, "charts", spec(&[&root]));
    let want_backend = match backend {
        Some(Backend::Native) => Backend::Native,
        _ => Backend::Poll { interval: every },
    };
    assert_eq!(s.roots[0].backend, want_backend, "{}", s.roots[0]);

    assert_eq!(s.roots[0].unmounted_since, None);
    let before = std::time::SystemTime::now();
    mount.unmount();
    let unmounted = std::time::Instant::now();
    c.wait("the spec Degraded: storage gone", |c| {
        matches!(phase(c, "charts"), Some(Phase::Degraded { reason })
            if reason.contains("storage gone") && reason.contains(&*root.to_string_lossy()))
    });
    let told_gone = unmounted.elapsed();
    let since = m.status("charts").unwrap().roots[0].unmounted_since;
    assert!(
        since.is_some_and(|t| t >= before),
        "the root says since when it is unmounted: {since:?}"
    );
    // Another host writes to the storage while this one has it unmounted.
    fs::write(src.join("charts/new.tgz"), "v1").unwrap();
    fs::remove_file(src.join("charts/a.tgz")).unwrap();
    fs::write(src.join("charts/b.tgz"), "v2, longer").unwrap();
    fs::remove_file(src.join("charts/old/c.tgz")).unwrap();
    fs::write(src.join("charts/old/d.tgz"), "v1").unwrap();
    // Polls go on while it is away (a barrier's included): none reports.
    m.sync("charts", WAIT).unwrap();
    c.drain();
    assert_eq!(
        reported(&c, "charts"),
        BTreeMap::new(),
        "nothing is reported while the storage is away"
    );
    assert!(
        matches!(phase(&c, "charts"), Some(Phase::Degraded { .. })),
        "still away: {:?}",
        phase(&c, "charts")
    );

    mount.mount_again();
    let mounted = std::time::Instant::now();
    c.wait("the spec Watching again once the storage is back", |c| {
        phase(c, "charts") == Some(Phase::Watching)
    });
    assert_eq!(m.status("charts").unwrap().roots[0].unmounted_since, None);
    let want: BTreeMap<PathBuf, Vec<ChangeKind>> = [
        (charts.join("new.tgz"), ChangeKind::Created),
        (charts.join("a.tgz"), ChangeKind::Removed),
        (charts.join("b.tgz"), ChangeKind::Modified),
        (charts.join("old/c.tgz"), ChangeKind::Removed),
        (charts.join("old/d.tgz"), ChangeKind::Created),
    ]
    .into_iter()
    .map(|(p, k)| (p, vec![k]))
    .collect();
    // (The directories the files are in may be reported modified too, as
    // any poll reports a directory whose entries changed.)
    let files = |c: &Collector| -> BTreeMap<PathBuf, Vec<ChangeKind>> {
        reported(c, "charts")
            .into_iter()
            .filter(|(p, _)| p.extension().is_some_and(|e| e == "tgz"))
            .collect()
    };
    c.wait("the net changes made while the storage was away", |c| {
        files(c) == want
    });
    note(&format!(
        "{} root {}, polls every {every:?}: said gone {told_gone:?} after the unmount; \
         the net changes reported {:?} after it was mounted again",
        s.roots[0].backend,
        if below {
            "below the mount point"
        } else {
            "at the mount point"
        },
        mounted.elapsed()
    ));
    m.sync("charts", WAIT).unwrap();
    c.drain();
    assert_eq!(files(&c), want, "exactly the net changes, once each");
    let others: Vec<_> = reported(&c, "charts")
        .into_iter()
        .filter(|(p, k)| {
            let dir_touched = p.is_dir() && k.iter().all(|k| *k == ChangeKind::Modified);
            !want.contains_key(p) && !dir_touched
        })
        .collect();
    assert!(others.is_empty(), "nothing else reported: {others:?}");
}

#[test]
fn auto_polled_mount_point_unmounted_and_mounted_again() {
    unmounted_and_mounted_again(None, false);
}

#[test]
fn auto_polled_root_below_a_mount_point_unmounted_and_mounted_again() {
    unmounted_and_mounted_again(None, true);
}

/// In a manager that polls everything, the directory holding the root is
/// polled too, and sees the mount point's directory change identity.
#[test]
fn a_manager_that_polls_everything_keeps_an_unmounted_root_too() {
    let every = Duration::from_millis(20);
    unmounted_and_mounted_again(Some(Backend::Poll { interval: every }), false);
    unmounted_and_mounted_again(Some(Backend::Poll { interval: every }), true);
}

/// The native backend on the mount (by choice: `Auto` polls it): the
/// unmount takes its watches, which tells that the file system went; a
/// look at the root every poll interval tells when it is back, and the
/// tree is then watched and read again.
#[test]
fn a_natively_watched_root_unmounted_and_mounted_again() {
    unmounted_and_mounted_again(Some(Backend::Native), false);
    unmounted_and_mounted_again(Some(Backend::Native), true);
}

/// A root that is simply deleted is no absent storage: its removal is
/// reported, as ever.
#[test]
fn a_root_deleted_on_a_mount_is_reported_removed() {
    let d = tmp();
    let src = d.path().join("storage");
    let mnt = d.path().join("replica");
    fs::create_dir_all(src.join("charts")).unwrap();
    fs::create_dir(&mnt).unwrap();
    fs::write(src.join("charts/a.tgz"), "v1").unwrap();
    let Some(_mount) = bind_mount(&src, &mnt) else {
        return;
    };
    let root = mnt.join("charts");
    let m = Manager::builder()
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    let mut c = Collector::new(m.subscribe());
    start(&m, "charts", spec(&[&root]));
    fs::remove_dir_all(src.join("charts")).unwrap();
    let a = root.join("a.tgz");
    c.wait("the deleted root's file reported removed", |c| {
        c.has("charts", &a, ChangeKind::Removed)
    });
    c.wait("the spec waiting for its root", |c| {
        matches!(phase(c, "charts"), Some(Phase::Degraded { reason })
            if reason.contains("waiting for") && !reason.contains("storage gone"))
    });
    assert!(Path::new(&mnt).exists());
}
