//! The probes' verdicts: each row of the module's table, from statuses
//! written out (pure), and from the states the library really reaches
//! under its fault injection (`test-hooks`) and on a FUSE mount, so that
//! the words the verdicts read are the library's own.

use std::path::Path;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use serde_json::{Value, json};
use specwatch::{Backend, Event, Manager, Phase, WatchStatus};
use testkit::WAIT;

use super::{Cause, Facts, Follows, Look, RootLook, Verdict, liveness, readiness};
use crate::server::{SPEC, storage_spec, watch_manager};

/// A status of the storage watch: a `Watching` one, with `changes` (JSON
/// fields of `WatchStatus`) over it.
fn status(changes: Value) -> WatchStatus {
    let mut s = json!({
        "name": SPEC,
        "observed_generation": 1,
        "phase": "watching",
        "monitor_start_time": { "secs_since_epoch": 1_700_000_000, "nanos_since_epoch": 0 },
        "last_event_time": null,
        "recent_batches": [],
        "watched_dirs": 3,
        "progress": null,
        "roots": [{
            "path": "/srv/charts",
            "backend": "native",
            "reason": { "local": { "file_system": "ext4", "magic": 61267 } },
            "unmounted_since": null
        }],
        "polled_dirs": 0,
        "watch_retries": 0,
        "overflow_recoveries": 0,
        "missed_by_os": 0,
        "last_error": null,
        "last_error_time": null,
        "vcs_lock": null
    });
    for (k, v) in changes.as_object().expect("an object of changes") {
        s[k] = v.clone();
    }
    serde_json::from_value(s).expect("a WatchStatus")
}

fn degraded(reason: &str) -> Value {
    json!({ "phase": { "degraded": { "reason": reason } } })
}

/// (liveness, readiness) of `status` with the follower alive or not and
/// the root's look.
fn verdicts(status: Option<&WatchStatus>, alive: bool, look: &Look) -> (Verdict, Verdict) {
    let f = Facts {
        follows: Follows::Storage,
        status,
        follower_alive: alive,
        look,
    };
    (liveness(&f), readiness(&f))
}

fn cause(v: &Verdict) -> Option<Cause> {
    v.cause.as_ref().map(|(c, _)| *c)
}

/// What, the status, whether the follower lives, the root's look, then
/// whether live and readiness's cause (`None`: ready).
type Row = (
    &'static str,
    Option<WatchStatus>,
    bool,
    Look,
    bool,
    Option<Cause>,
);

#[test]
fn each_state_live_and_ready_or_not() {
    use Cause::*;
    let ok = Look::Ok;
    let gone = status(json!({
        "phase": { "degraded": { "reason": "storage gone: the file system holding /srv/charts \
            is no longer mounted" } },
        "roots": [{
            "path": "/srv/charts",
            "backend": "poll:1s",
            "reason": { "shared": { "file_system": "nfs", "magic": 26985 } },
            "unmounted_since": { "secs_since_epoch": 1_700_000_100, "nanos_since_epoch": 0 }
        }]
    }));
    let rows: Vec<Row> = vec![
        (
            "watching",
            Some(status(json!({}))),
            true,
            ok.clone(),
            true,
            None,
        ),
        (
            "polled for want of OS watches",
            Some(status(json!({
                "polled_dirs": 12,
                "phase": { "degraded": { "reason": "12 directories polled every 1s for want \
                    of OS watches (inotify's max_user_watches)" } }
            }))),
            true,
            ok.clone(),
            true,
            None,
        ),
        (
            "below a followed symlink, polled",
            Some(status(degraded(
                "2 directories at or below followed symlinks polled every 1s (the portable \
                 backend does not watch through links)",
            ))),
            true,
            ok.clone(),
            true,
            None,
        ),
        (
            "a subdirectory not readable",
            Some(status(degraded(
                "1 directories not watched: /srv/charts/org: Permission denied (os error 13)",
            ))),
            true,
            ok.clone(),
            true,
            None,
        ),
        (
            "storage gone",
            Some(gone),
            true,
            ok.clone(),
            true,
            Some(StorageGone),
        ),
        (
            "storage not answering",
            Some(status(degraded(
                "storage not answering: a poll of /srv/charts under way for more than 10s; \
                 1 directories not watched: /srv/charts/x: Input/output error",
            ))),
            true,
            ok.clone(),
            true,
            Some(StorageNotAnswering),
        ),
        (
            "the event backend stopped, after another part",
            Some(status(degraded(
                "storage gone: ...; the event backend stopped (read failed): nothing is \
                 reported until it is restarted (3 restarts tried so far)",
            ))),
            true,
            ok.clone(),
            true,
            Some(BackendStopped),
        ),
        (
            "the event backend stopped",
            Some(status(degraded(
                "the event backend stopped (read failed): nothing is reported until it is \
                 restarted (0 restarts tried so far)",
            ))),
            true,
            ok.clone(),
            true,
            Some(BackendStopped),
        ),
        (
            "the root removed (the watch waits for it; the look fails)",
            Some(status(degraded("waiting for /srv/charts to exist"))),
            true,
            Look::Failed("/srv/charts: No such file or directory (os error 2)".into()),
            true,
            Some(StorageFailing),
        ),
        (
            "the root's look fails though the watch is content",
            Some(status(json!({}))),
            true,
            Look::Failed("/srv/charts: Input/output error (os error 5)".into()),
            true,
            Some(StorageFailing),
        ),
        (
            "the root's look hangs",
            Some(status(json!({}))),
            true,
            Look::Hanging(Duration::from_millis(700)),
            true,
            Some(StorageNotAnswering),
        ),
        (
            "starting again",
            Some(status(json!({ "phase": "starting" }))),
            true,
            ok.clone(),
            true,
            Some(Starting),
        ),
        (
            "failed",
            Some(status(
                json!({ "phase": { "failed": { "error": "the engine panicked" } } }),
            )),
            true,
            ok.clone(),
            false,
            Some(Failed),
        ),
        (
            "not watched",
            None,
            true,
            ok.clone(),
            false,
            Some(NotWatched),
        ),
        (
            "the follower stopped",
            Some(status(json!({}))),
            false,
            ok.clone(),
            false,
            Some(FollowerStopped),
        ),
    ];
    for (what, st, alive, look, live, ready_cause) in rows {
        let (l, r) = verdicts(st.as_ref(), alive, &look);
        assert_eq!(l.pass, live, "{what}: live? {l:?}");
        assert_eq!(r.pass, ready_cause.is_none(), "{what}: ready? {r:?}");
        assert_eq!(cause(&r), ready_cause, "{what}: {r:?}");
        if !live {
            assert_eq!(cause(&l), ready_cause, "{what}: the same cause");
        }
    }
}

/// Waits (on the manager's events) until the storage watch's status
/// satisfies `want`, and returns it.
fn wait_status(
    m: &Manager,
    events: &Receiver<Event>,
    what: &str,
    want: impl Fn(&WatchStatus) -> bool,
) -> WatchStatus {
    if let Some(s) = m.status(SPEC).filter(|s| want(s)) {
        return s;
    }
    let deadline = Instant::now() + WAIT;
    loop {
        match events.recv_deadline(deadline) {
            Ok(Event::Status(s)) if s.name == SPEC && want(&s) => return (*s).clone(),
            Ok(_) => {}
            Err(_) => panic!(
                "waited {WAIT:?} for the watch to say {what}; its status: {:#?}",
                m.status(SPEC)
            ),
        }
    }
}

/// A manager watching `root` as the server does, with `backend`, and its
/// events.
fn watching(root: &Path, backend: Backend) -> (Manager, Receiver<Event>) {
    let m = watch_manager(backend, Duration::from_millis(50)).unwrap();
    let events = m.subscribe();
    m.apply(SPEC, storage_spec(root, backend)).unwrap();
    m.wait_watching(SPEC, WAIT).unwrap();
    (m, events)
}

fn reason(s: &WatchStatus) -> &str {
    match &s.phase {
        Phase::Degraded { reason } => reason,
        _ => "",
    }
}

/// The verdicts on what the library really reports.
fn on(s: &WatchStatus) -> (Verdict, Verdict) {
    verdicts(Some(s), true, &Look::Ok)
}

#[test]
fn the_watch_limit_leaves_a_replica_ready() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().canonicalize().unwrap();
    let (m, events) = watching(&root, Backend::Native);
    m.inject_watch_limit(1).unwrap();
    std::fs::create_dir(root.join("org")).unwrap();
    let s = wait_status(&m, &events, "a directory polled for want of watches", |s| {
        s.polled_dirs > 0
    });
    assert!(
        reason(&s).contains("for want of OS watches"),
        "{:?}",
        s.phase
    );
    let (live, ready) = on(&s);
    assert!(live.pass && ready.pass, "{live:?} {ready:?}");
}

#[test]
fn a_subdirectory_that_cannot_be_watched_leaves_a_replica_ready() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().canonicalize().unwrap();
    let (m, events) = watching(&root, Backend::Native);
    m.inject_watch_failures(1_000_000).unwrap();
    std::fs::create_dir(root.join("org")).unwrap();
    let s = wait_status(&m, &events, "a directory not watched", |s| {
        reason(s).contains("directories not watched")
    });
    let (live, ready) = on(&s);
    assert!(live.pass && ready.pass, "{:?}: {live:?} {ready:?}", s.phase);
}

#[test]
fn a_stopped_event_backend_makes_a_replica_unready_not_dead() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().canonicalize().unwrap();
    let (m, events) = watching(&root, Backend::Native);
    m.inject_restart_failures(1_000_000).unwrap();
    m.inject_reader_failure().unwrap();
    let s = wait_status(&m, &events, "the event backend stopped", |s| {
        reason(s).contains("event backend stopped")
    });
    let (live, ready) = on(&s);
    assert!(live.pass, "{live:?}");
    assert_eq!(cause(&ready), Some(Cause::BackendStopped), "{:?}", s.phase);
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

#[test]
fn the_root_look_reads_the_root() {
    let d = tempfile::tempdir().unwrap();
    let rt = runtime();
    let here = RootLook::new(d.path().to_path_buf());
    assert_eq!(rt.block_on(here.look()), Look::Ok);
    let missing = RootLook::new(d.path().join("missing"));
    match rt.block_on(missing.look()) {
        Look::Failed(why) => assert!(why.contains("No such file"), "{why}"),
        other => panic!("a missing root: {other:?}"),
    }
}

/// Polled storage on FUSE whose server stops answering (SIGSTOP): the
/// watch says "storage not answering" past its deadline, and the root's
/// look hangs; both make the replica unready, not dead; once it answers
/// again, it is ready. Then the storage is unmounted: unready again.
#[test]
fn hung_or_unmounted_storage_makes_a_replica_unready_not_dead() {
    let d = tempfile::tempdir().unwrap();
    let base = d.path().canonicalize().unwrap();
    let (src, mnt) = (base.join("src"), base.join("mnt"));
    std::fs::create_dir_all(src.join("org")).unwrap();
    std::fs::create_dir(&mnt).unwrap();
    let Some(mut mount) = testkit::fuse::bind_mount(&src, &mnt) else {
        return;
    };
    let poll = Backend::Poll {
        interval: Duration::from_millis(50),
    };
    let m = Manager::builder()
        .poll_interval(Duration::from_millis(50))
        .storage_deadline(Duration::from_millis(300))
        .build()
        .unwrap();
    let events = m.subscribe();
    m.apply(SPEC, storage_spec(&mnt, poll)).unwrap();
    m.wait_watching(SPEC, WAIT).unwrap();
    let look = RootLook::new(mnt.clone());
    let rt = runtime();

    mount.pause(Duration::from_secs(60));
    let s = wait_status(&m, &events, "storage not answering", |s| {
        reason(s).starts_with("storage not answering")
    });
    let (live, ready) = on(&s);
    assert!(live.pass, "{live:?}");
    assert_eq!(cause(&ready), Some(Cause::StorageNotAnswering), "{ready:?}");
    let t0 = Instant::now();
    let hung = rt.block_on(look.look());
    assert!(matches!(hung, Look::Hanging(_)), "{hung:?}");
    assert!(
        t0.elapsed() < super::LOOK_WAIT + Duration::from_secs(2),
        "the probe answered in {:?}",
        t0.elapsed()
    );

    mount.resume();
    let s = wait_status(&m, &events, "watching again", |s| {
        s.phase == Phase::Watching
    });
    assert!(on(&s).1.pass);
    let deadline = Instant::now() + WAIT;
    while rt.block_on(look.look()) != Look::Ok {
        assert!(Instant::now() < deadline, "the root's look never came back");
    }

    mount.unmount();
    let s = wait_status(&m, &events, "storage gone", |s| {
        s.roots.iter().any(|r| r.unmounted_since.is_some())
    });
    let (live, ready) = on(&s);
    assert!(live.pass, "{live:?}");
    assert_eq!(cause(&ready), Some(Cause::StorageGone), "{ready:?}");
}
