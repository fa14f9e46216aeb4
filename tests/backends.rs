//! Backends per spec: `Poll` chosen by a spec, `Auto` polling a FUSE mount
//! (the shared-storage case), and what status says of each root.

mod common;

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use common::fuse::{BindMount, bind_mount};
use common::*;
use specwatch::{Backend, BackendReason, ChangeKind, Error, Manager, Phase, WatchSpec};

const SPEC_POLL: Backend = Backend::Poll {
    interval: Duration::from_millis(30),
};

#[test]
fn a_spec_can_poll_in_a_manager_that_watches_natively() {
    let d = tmp();
    let root = d.path();
    fs::create_dir(root.join("sub")).unwrap();
    let m = manager(EVENTS);
    let mut c = Collector::new(m.subscribe());
    let st = start(&m, "p", spec(&[root]).backend(SPEC_POLL));
    assert_eq!(st.phase, Phase::Watching, "{st:?}");
    assert_eq!(st.roots.len(), 1);
    assert_eq!(st.roots[0].backend, SPEC_POLL);
    assert_eq!(st.roots[0].reason, BackendReason::Chosen);
    assert_eq!(
        m.stats().unwrap().os_watches,
        0,
        "a spec that polls holds no watch"
    );
    let f = root.join("sub/a");
    fs::write(&f, "1").unwrap();
    m.sync("p", WAIT).unwrap();
    c.drain();
    assert!(c.has("p", &f, ChangeKind::Created), "{:?}", c.changes("p"));
    fs::write(&f, "22").unwrap();
    c.wait("sub/a modified, found by polling", |c| {
        c.has("p", &f, ChangeKind::Modified)
    });
    // A second spec over the same tree with the event backend: watched,
    // and both specs hear of changes.
    start(&m, "n", spec(&[root]));
    assert!(
        m.stats().unwrap().os_watches >= 2,
        "{:?}",
        m.stats().unwrap()
    );
    let g = root.join("sub/b");
    fs::write(&g, "1").unwrap();
    c.wait("sub/b created, in both specs", |c| {
        c.has("p", &g, ChangeKind::Created) && c.has("n", &g, ChangeKind::Created)
    });
}

#[test]
fn a_spec_naming_the_event_backend_the_manager_does_not_run_is_refused() {
    let d = tmp();
    let m = manager(EVENTS);
    let err = m
        .apply("web", spec(&[d.path()]).backend(OTHER_EVENTS))
        .unwrap_err();
    match &err {
        Error::BackendUnavailable {
            spec,
            wanted,
            running,
        } => {
            assert_eq!(spec, "web");
            assert_eq!((*wanted, *running), (OTHER_EVENTS, EVENTS));
        }
        other => panic!("expected BackendUnavailable, got {other:?}"),
    }
    assert!(err.to_string().contains("\"web\""), "{err}");
    assert!(m.names().is_empty(), "nothing applied");
    let err = m
        .reconcile([("a", spec(&[d.path()]).backend(OTHER_EVENTS))])
        .unwrap_err();
    assert!(matches!(err, Error::BackendUnavailable { .. }), "{err:?}");
    // The one it runs, and polling, are fine.
    m.apply("n", spec(&[d.path()]).backend(EVENTS)).unwrap();
    m.apply("p", spec(&[d.path()]).backend(SPEC_POLL)).unwrap();
}

#[test]
fn auto_on_a_local_directory_uses_the_event_backend_and_names_the_file_system() {
    let d = tmp();
    let m = Manager::new().unwrap();
    let st = start(&m, "s", spec(&[d.path()]));
    let r = &st.roots[0];
    eprintln!("Auto on the temporary directory: {r}");
    assert_eq!(r.path, d.path());
    assert_ne!(r.backend, Backend::Auto);
    assert!(
        matches!(r.reason, BackendReason::Local { .. }),
        "a temporary directory taken for shared storage: {r}"
    );
    assert!(m.stats().unwrap().os_watches > 0);
}

/// A storage directory and a FUSE mount of it (`storage`, `replica`),
/// or `None` (said loudly) where FUSE cannot be mounted.
fn shared_storage() -> Option<(tempfile::TempDir, PathBuf, PathBuf, BindMount)> {
    let d = tmp();
    let src = d.path().join("storage");
    let mnt = d.path().join("replica");
    fs::create_dir(&src).unwrap();
    fs::create_dir(&mnt).unwrap();
    let mount = bind_mount(&src, &mnt)?;
    Some((d, src, mnt, mount))
}

#[test]
fn on_a_fuse_mount_native_misses_another_hosts_write_and_auto_polls_it() {
    let Some((_d, src, mnt, _mount)) = shared_storage() else {
        return;
    };
    let every = Duration::from_millis(50);
    // Two managers: in one, a directory polled for one spec would report
    // what it finds to every spec covering it.
    let native = Manager::builder().backend(Backend::Native).build().unwrap();
    let auto = Manager::builder().poll_interval(every).build().unwrap();
    let mut cn = Collector::new(native.subscribe());
    let mut ca = Collector::new(auto.subscribe());
    let sn = start(&native, "charts", spec(&[&mnt]));
    let sa = start(&auto, "charts", spec(&[&mnt]));
    eprintln!("Native: {}", sn.roots[0]);
    eprintln!("Auto:   {}", sa.roots[0]);
    assert_eq!(sn.roots[0].backend, Backend::Native);
    assert_eq!(sa.roots[0].backend, Backend::Poll { interval: every });
    assert_eq!(
        sa.roots[0].reason,
        BackendReason::Shared {
            file_system: "fuse".into(),
            magic: Some(0x6573_5546)
        }
    );
    assert_eq!(
        sa.roots[0].to_string(),
        format!("poll every 50ms: fuse (0x65735546) at {}", mnt.display())
    );
    assert_eq!(sa.phase, Phase::Watching, "polled by detection: {sa:?}");

    // Another host writes: through the storage itself, not the mount.
    fs::create_dir(src.join("org")).unwrap();
    fs::write(src.join("org/app-1.0.0.tgz"), "chart").unwrap();
    let seen = mnt.join("org/app-1.0.0.tgz");
    auto.sync("charts", WAIT).unwrap();
    ca.drain();
    assert!(
        ca.has("charts", &seen, ChangeKind::Created),
        "Auto: the write below the mount was not reported: {:?}",
        ca.changes("charts")
    );
    native.sync("charts", WAIT).unwrap();
    cn.drain();
    assert!(
        cn.changes("charts").is_empty(),
        "Native saw a write made beside the mount: the premise of this test \
         does not hold here: {:?}",
        cn.changes("charts")
    );
    // A write through the mount itself: both see it.
    let local = mnt.join("local.tgz");
    fs::write(&local, "x").unwrap();
    cn.wait("Native: a write through the mount", |c| {
        c.has("charts", &local, ChangeKind::Created)
    });
    ca.wait("Auto: a write through the mount", |c| {
        c.has("charts", &local, ChangeKind::Created)
    });
    // And a removal made elsewhere, found by polling within its interval.
    fs::remove_file(src.join("org/app-1.0.0.tgz")).unwrap();
    ca.wait("Auto: the removal below the mount", |c| {
        c.has("charts", &seen, ChangeKind::Removed)
    });
}

#[test]
fn a_spec_may_choose_what_its_manager_defaults_to() {
    let d = tmp();
    let m = Manager::builder()
        .backend(SPEC_POLL)
        .build()
        .expect("a polling manager");
    let st = start(&m, "s", WatchSpec::new([d.path()]));
    assert_eq!(st.roots[0].backend, SPEC_POLL);
    assert_eq!(st.roots[0].reason, BackendReason::Chosen);
}

#[test]
fn rescan_every_catches_what_a_fuse_mount_never_reports_and_counts_it() {
    let Some((_d, src, mnt, _mount)) = shared_storage() else {
        return;
    };
    let m = Manager::builder().backend(Backend::Native).build().unwrap();
    let mut c = Collector::new(m.subscribe());
    start(
        &m,
        "charts",
        spec(&[&mnt]).rescan_every(Duration::from_millis(50)),
    );
    // Through the mount: an event, nothing missed.
    let local = mnt.join("local.tgz");
    fs::write(&local, "x").unwrap();
    c.wait("the write through the mount", |c| {
        c.has("charts", &local, ChangeKind::Created)
    });
    // Beside it: no event; the rescan finds it.
    fs::write(src.join("remote.tgz"), "y").unwrap();
    let remote = mnt.join("remote.tgz");
    c.wait(
        "the rescan to deliver the write made beside the mount",
        |c| c.has("charts", &remote, ChangeKind::Created),
    );
    c.wait("missed_by_os to count it", |c| {
        c.statuses
            .get("charts")
            .and_then(|s| s.last())
            .is_some_and(|s| s.missed_by_os >= 1)
    });
    let st = m.status("charts").unwrap();
    eprintln!(
        "Native with rescans on FUSE: missed_by_os = {}",
        st.missed_by_os
    );
    assert_eq!(st.missed_by_os, 1, "the local write was not missed: {st:?}");
}

/// A pseudo file system (`/proc`) makes no events: `Auto` polls it, and
/// says why.
#[cfg(target_os = "linux")]
#[test]
fn auto_polls_a_pseudo_file_system_and_says_why() {
    let m = Manager::builder()
        .poll_interval(Duration::from_millis(500))
        .build()
        .unwrap();
    let st = start(&m, "proc", WatchSpec::new(["/proc/sys/kernel"]));
    let r = &st.roots[0];
    assert_eq!(
        r.to_string(),
        "poll every 500ms: proc (0x9fa0) at /proc/sys/kernel"
    );
    assert_eq!(
        m.stats().unwrap().os_watches,
        0,
        "no inotify watch on /proc"
    );
}

/// A polled file root: its first write after watching starts is seen by
/// the next poll (its signature was taken when the root was attached).
#[test]
fn the_first_write_to_a_polled_file_root_is_reported() {
    let d = tmp();
    let f = d.path().join("cfg.yaml");
    fs::write(&f, "a: 1\n").unwrap();
    let m = manager(EVENTS);
    let mut c = Collector::new(m.subscribe());
    start(
        &m,
        "s",
        spec(&[&f]).backend(Backend::Poll {
            interval: Duration::from_secs(3600),
        }),
    );
    fs::write(&f, "a: 2, longer\n").unwrap();
    m.sync("s", WAIT).unwrap();
    c.drain();
    assert_eq!(c.kinds("s", &f), vec![ChangeKind::Modified]);
}

/// The portable backend lets go of its recursive watch when the spec
/// switches to polling.
#[test]
fn switching_to_poll_releases_the_portable_backends_watches() {
    let d = tmp();
    let root = d.path().join("r");
    fs::create_dir_all(root.join("a/b")).unwrap();
    let m = manager(Backend::Portable);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[&root]));
    assert!(m.stats().unwrap().os_watches > 0);
    m.apply("s", spec(&[&root]).backend(SPEC_POLL)).unwrap();
    m.wait_watching("s", WAIT).unwrap();
    c.wait("the portable backend's watches released", |_| {
        m.sync("s", WAIT).unwrap();
        m.stats().unwrap().os_watches == 0
    });
}

/// The faults issue's case (22): one spec with a local root and a root on
/// a mount, in one directory, `watch --backend auto --poll-interval 100
/// LOCAL MNT`. The directory holding both roots has an OS watch (for the
/// local one) and was polled too (for the mount's), on the engine's
/// thread, which `stat`ed the mount point: while the mount hung, no local
/// change was reported. Now that directory's own events tell about the
/// mount point's entry, and a local write is reported while the mount
/// hangs (the latency of each is noted).
#[test]
fn a_hung_mount_beside_a_local_root_holds_up_only_itself() {
    let Some((d, src, mnt, mut mount)) = shared_storage() else {
        return;
    };
    let local = d.path().join("local");
    fs::create_dir(&local).unwrap();
    let every = Duration::from_millis(20);
    let m = Manager::builder().poll_interval(every).build().unwrap();
    let mut c = Collector::new(m.subscribe());
    let s = start(&m, "both", spec(&[&local, &mnt]));
    assert_eq!(s.roots[1].backend, Backend::Poll { interval: every });
    // (Resumed after 60 s whatever happens to this process.)
    mount.pause(Duration::from_secs(60));
    let mut latencies = Vec::new();
    let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let began = std::time::Instant::now();
        let mut n = 0;
        // (Two seconds: FUSE caches entries and attributes for one.)
        while began.elapsed() < Duration::from_secs(2) || n < 5 {
            let f = local.join(format!("f{n}"));
            let wrote = std::time::Instant::now();
            fs::write(&f, "x").unwrap();
            c.wait(
                &format!("local write {n} reported while the mount hangs"),
                |c| c.has("both", &f, ChangeKind::Created),
            );
            latencies.push(wrote.elapsed());
            n += 1;
        }
    }));
    if let Err(e) = served {
        mount.resume();
        std::panic::resume_unwind(e);
    }
    latencies.sort();
    note(&format!(
        "local writes reported while the mount hung: {} (quiet window 10 ms): median {:?}, max {:?}",
        latencies.len(),
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1]
    ));
    fs::write(src.join("late.tgz"), "x").unwrap();
    mount.resume();
    let late = mnt.join("late.tgz");
    c.wait("the write below the mount, once it answers again", |c| {
        c.has("both", &late, ChangeKind::Created)
    });
    m.sync("both", WAIT).unwrap();
}

/// A mount whose server stopped answering (bindfs stopped with SIGSTOP)
/// holds up the polls of the spec on it, not the engine: another spec's
/// changes are reported and its barriers pass while every look below the
/// mount hangs; once the server answers again, the hung spec catches up.
#[test]
fn a_hung_mount_holds_up_its_own_polls_not_the_engine() {
    let Some((_d, src, mnt, mut mount)) = shared_storage() else {
        return;
    };
    let every = Duration::from_millis(20);
    let m = Manager::builder()
        .poll_interval(every)
        .storage_deadline(Duration::from_millis(500))
        .build()
        .unwrap();
    let mut c = Collector::new(m.subscribe());
    let local = tmp();
    let s = start(&m, "shared", spec(&[&mnt]));
    assert_eq!(s.roots[0].backend, Backend::Poll { interval: every });
    start(&m, "local", spec(&[local.path()]));
    // (Resumed after 60 s whatever happens to this process.)
    mount.pause(Duration::from_secs(60));
    // While many poll intervals pass (a poll of the mount is due every
    // 20 ms, and hangs): the other spec is served. (On failure the server
    // is let go first: a manager whose engine hangs would hang its drop.)
    let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let began = std::time::Instant::now();
        let mut n = 0;
        // (Two seconds: FUSE caches entries and attributes for one, so
        // some looks are answered without the server for a while.)
        while began.elapsed() < Duration::from_secs(2) || n < 5 {
            let f = local.path().join(format!("f{n}"));
            fs::write(&f, "x").unwrap();
            m.sync("local", Duration::from_secs(5)).unwrap_or_else(|e| {
                panic!("the local spec's barrier, {n} writes in, with the mount hung: {e}")
            });
            c.drain();
            assert!(
                c.has("local", &f, ChangeKind::Created),
                "the local write {} was not reported while the mount hung",
                f.display()
            );
            n += 1;
        }
    }));
    if let Err(e) = served {
        mount.resume();
        std::panic::resume_unwind(e);
    }
    assert!(m.status("local").is_some(), "status answers");
    // The hung spec says so, the other does not.
    let said = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        c.wait("the shared spec Degraded: storage not answering", |c| {
            matches!(phase(c, "shared"), Some(Phase::Degraded { reason })
                if reason.contains("storage not answering") && reason.contains("replica"))
        });
        assert_eq!(phase(&c, "local"), Some(Phase::Watching));
    }));
    // The server answers again: the hung spec's polls go on.
    fs::write(src.join("late.tgz"), "x").unwrap();
    mount.resume();
    if let Err(e) = said {
        std::panic::resume_unwind(e);
    }
    let late = mnt.join("late.tgz");
    c.wait("the write below the mount, once it answers again", |c| {
        c.has("shared", &late, ChangeKind::Created)
    });
    c.wait("the shared spec Watching again", |c| {
        phase(c, "shared") == Some(Phase::Watching)
    });
    m.sync("shared", WAIT).unwrap();
}
