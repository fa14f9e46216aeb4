//! The engine driven by hand: a manual clock, a backend without an OS
//! (tests inject the events it would have sent), and a real directory on
//! disk (the engine reads the tree, that is its job). No thread, no sleep:
//! every timer (quiet window, maximum delay, retry back-off, poll
//! schedule, sync deadline) moves only when the test advances the clock.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::{Receiver, bounded, unbounded};

use super::{Config, Engine, Msg, Publisher, Shared, WatchTable};
use crate::backend::fake::{Fake, FakeControl};
use crate::backend::{Fault, Hint, Os, OsEvent, OsMsg};
use crate::batch::change::{ChangeBatch, ChangeKind};
use crate::batch::event::Event;
use crate::batch::fanout::Subscriber;
use crate::clock::Clock;
use crate::ids::Generation;
use crate::spec::{Backend, WatchSpec};
use crate::status::{Phase, WatchStatus};

const MS: Duration = Duration::from_millis(1);

struct Harness {
    engine: Engine,
    clock: Clock,
    fake: FakeControl,
    shared: Arc<Shared>,
    events: Receiver<Event>,
    _dir: tempfile::TempDir,
    root: PathBuf,
}

fn harness(config: Config) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let (_tx, inbox) = unbounded();
    let (join_tx, join_rx) = unbounded();
    let (events_tx, events) = bounded(10_000);
    join_tx.send(Subscriber::new(events_tx)).unwrap();
    let fake = FakeControl::default();
    let watches = WatchTable::new(Os::Dirs(Box::new(Fake(fake.clone()))), config.max_watches);
    let clock = Clock::manual();
    let shared = Arc::new(Shared::new());
    let engine = Engine::new(
        inbox,
        clock.clone(),
        watches,
        Publisher::new(shared.clone(), join_rx),
        &config,
    );
    Harness {
        engine,
        clock,
        fake,
        shared,
        events,
        _dir: dir,
        root,
    }
}

impl Harness {
    /// Hands the engine generation `generation` of spec `name`.
    fn upsert(&mut self, name: &str, generation: Generation, spec: WatchSpec) {
        let spec = spec.normalized(name).unwrap();
        let matcher = spec.matcher(name).unwrap();
        self.engine.handle(Msg::Upsert {
            name: name.into(),
            generation,
            spec: Box::new(spec),
            matcher: Box::new(matcher),
            state: None,
        });
    }

    /// Applies spec `name` (generation 1) as the OS would see it through:
    /// its guard's cookies come back.
    fn apply(&mut self, name: &str, spec: WatchSpec) {
        self.upsert(name, Generation(1), spec);
        // The OS reports the cookies of the apply's guard, as it would.
        for c in self.engine.syncs.guard_cookies_waiting() {
            let (dir, name) = (c.parent().unwrap(), c.file_name().unwrap());
            self.event(dir, name.to_str().unwrap(), Hint::Created);
        }
        self.engine.end_pass();
    }

    /// What the OS would say about `dir/name`, handled as a read of its own.
    fn event(&mut self, dir: &Path, name: &str, hint: Hint) {
        let watch = self
            .fake
            .id_of(dir)
            .unwrap_or_else(|| panic!("{} has no watch", dir.display()));
        self.os(vec![OsEvent::Entry {
            watch,
            name: name.into(),
            hint,
        }]);
    }

    fn os(&mut self, events: Vec<OsEvent>) {
        let (read_at, mono) = (self.clock.wall(), self.clock.now());
        self.engine
            .handle(Msg::Os(OsMsg::events_at(events, 1, read_at, mono)));
    }

    fn write(&mut self, name: &str) -> PathBuf {
        let p = self.root.join(name);
        std::fs::write(&p, name).unwrap();
        let root = self.root.clone();
        self.event(&root, name, Hint::Created);
        p
    }

    /// Advances the clock, then ends a pass (the engine's timers fire).
    fn after(&mut self, by: Duration) {
        self.clock.advance(by);
        self.engine.end_pass();
    }

    fn batches(&self) -> Vec<Arc<ChangeBatch>> {
        self.events
            .try_iter()
            .filter_map(|e| match e {
                Event::Changes(b) => Some(b),
                _ => None,
            })
            .collect()
    }

    /// The kinds reported for `path` in the batches delivered since the
    /// last look (which takes them).
    fn kinds_of(&self, path: &Path) -> Vec<ChangeKind> {
        kinds(&self.batches(), path)
    }

    fn status(&self, name: &str) -> WatchStatus {
        WatchStatus::clone(&self.shared.status(name).expect("a published status"))
    }

    fn spec(&self) -> WatchSpec {
        WatchSpec::new([&self.root])
    }

    /// The name of the sync cookie the engine created in the root.
    fn root_cookie(&self) -> std::ffi::OsString {
        std::fs::read_dir(&self.root)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .find(|n| crate::fs::is_cookie(n))
            .expect("the engine created a cookie in the root")
    }
}

/// The kinds `batches` report for `path`, in order.
fn kinds(batches: &[Arc<ChangeBatch>], path: &Path) -> Vec<ChangeKind> {
    batches
        .iter()
        .flat_map(|b| b.changes.iter())
        .filter(|c| c.path == path)
        .map(|c| c.kind)
        .collect()
}

#[test]
fn a_batch_closes_after_its_quiet_window_on_the_engine_clock() {
    let mut h = harness(Config::default());
    let spec = h.spec().quiet_window(50 * MS).max_delay(200 * MS);
    h.apply("s", spec);
    let a = h.write("a");
    h.engine.end_pass();
    assert_eq!(h.engine.next_deadline(), Some(h.clock.now() + 50 * MS));
    h.after(49 * MS);
    assert!(h.batches().is_empty(), "closed before the quiet window");
    h.after(MS);
    let b = h.batches();
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].changes[0].path, a);
    assert_eq!(b[0].changes[0].kind, ChangeKind::Created);
    assert_eq!(h.engine.next_deadline(), None, "idle: no timer at all");
}

#[test]
fn constant_churn_closes_a_batch_at_the_maximum_delay() {
    let mut h = harness(Config::default());
    h.apply("s", h.spec().quiet_window(50 * MS).max_delay(200 * MS));
    // A change every 40 ms never leaves a quiet window.
    for i in 0..4 {
        h.write(&format!("f{i}"));
        h.after(40 * MS);
        assert!(
            h.batches().is_empty(),
            "closed early, after {} ms",
            40 * (i + 1)
        );
    }
    h.write("f4"); // at 160 ms
    h.after(39 * MS);
    assert!(h.batches().is_empty(), "closed before the maximum delay");
    h.after(MS); // 200 ms after the first change
    let b = h.batches();
    assert_eq!(b.len(), 1, "closed by the maximum delay");
    assert_eq!(b[0].changes.len(), 5);
}

#[test]
fn a_failed_watch_is_retried_after_a_doubling_back_off() {
    let mut h = harness(Config::default());
    // The root's parent is watched first, then the root: both fail once,
    // then the root once more.
    h.engine.watches.inject(Fault::Fail(3));
    h.apply("s", h.spec());
    let st = h.status("s");
    assert_eq!(st.watch_retries, 2, "{st:?}");
    assert!(matches!(st.phase, Phase::Degraded { .. }), "{:?}", st.phase);
    let t0 = h.clock.now();
    assert_eq!(h.engine.next_deadline(), Some(t0 + 50 * MS));
    let calls = h.fake.calls();
    h.after(49 * MS);
    assert_eq!(h.fake.calls(), calls, "no attempt before the back-off");
    h.after(MS);
    // The parent's retry failed again (3rd fault): next in 100 ms. The
    // root got its watch and was read.
    assert_eq!(h.status("s").watch_retries, 3);
    assert_eq!(h.engine.next_deadline(), Some(t0 + 150 * MS));
    h.after(99 * MS);
    assert!(matches!(h.status("s").phase, Phase::Degraded { .. }));
    h.after(MS);
    let st = h.status("s");
    assert_eq!(st.phase, Phase::Watching, "{st:?}");
    assert_eq!(st.watch_retries, 3);
    assert_eq!(h.fake.live(), 2, "parent and root");
    assert!(h.engine.check_invariants().is_empty());
}

#[test]
fn directories_beyond_the_cap_are_polled_on_schedule() {
    let mut h = harness(Config {
        max_watches: Some(1), // the root's parent only
        poll_interval: Some(100 * MS),
        ..Config::default()
    });
    std::fs::create_dir(h.root.join("sub")).unwrap();
    h.apply("s", h.spec().quiet_window(10 * MS));
    let st = h.status("s");
    assert_eq!(st.polled_dirs, 2, "root and sub: {st:?}");
    match &st.phase {
        Phase::Degraded { reason } => assert!(
            reason.contains("2 directories polled every 100ms")
                && reason.contains("cap of 1 OS watches"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
    let f = h.root.join("sub/new");
    std::fs::write(&f, "x").unwrap();
    let t0 = h.clock.now();
    // The poll was scheduled when the first directory was polled.
    assert_eq!(h.engine.next_deadline(), Some(t0 + 100 * MS));
    h.after(99 * MS);
    assert_eq!(
        h.engine.next_deadline(),
        Some(t0 + 100 * MS),
        "not polled before its interval (no batch open)"
    );
    h.after(MS);
    assert_eq!(
        h.engine.next_deadline(),
        Some(t0 + 110 * MS),
        "polled: a batch is open for its quiet window"
    );
    h.after(10 * MS);
    let b = h.batches();
    assert_eq!(b.len(), 1, "found by the poll");
    assert_eq!(b[0].changes[0].path, f);
    // A modification without any event: the signature tells.
    std::fs::write(&f, "longer now").unwrap();
    h.after(100 * MS);
    h.after(10 * MS);
    let b = h.batches();
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].changes[0].kind, ChangeKind::Modified);
}

#[test]
fn an_overflow_rescans_precisely_and_uses_the_margin() {
    let mut h = harness(Config {
        overflow_margin: Some(100 * MS),
        ..Config::default()
    });
    for n in ["keep", "gone"] {
        std::fs::write(h.root.join(n), n).unwrap();
    }
    h.apply("s", h.spec().quiet_window(10 * MS));
    // Events lost: one file created, one removed, nothing said.
    std::fs::write(h.root.join("new"), "n").unwrap();
    std::fs::remove_file(h.root.join("gone")).unwrap();
    // The last complete read started well after every ctime on disk: only
    // what the rescan finds created or removed is reported.
    let later = SystemTime::now() + Duration::from_secs(60);
    h.engine.handle(Msg::Os(OsMsg::events(vec![], 1, later)));
    h.os(vec![OsEvent::Overflow]);
    h.after(10 * MS);
    let mut got: Vec<(String, ChangeKind)> = h
        .batches()
        .iter()
        .flat_map(|b| b.changes.iter())
        .map(|c| (c.path.file_name().unwrap().to_string_lossy().into(), c.kind))
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("gone".into(), ChangeKind::Removed),
            ("new".into(), ChangeKind::Created)
        ]
    );
    assert_eq!(h.status("s").overflow_recoveries, 1);
    // Now the last complete read is older than the files: within the
    // margin, an untouched file may have been written: reported modified.
    let earlier = SystemTime::now() - Duration::from_secs(60);
    h.engine.handle(Msg::Os(OsMsg::events(vec![], 1, earlier)));
    h.os(vec![OsEvent::Overflow]);
    h.after(10 * MS);
    let got = h.kinds_of(&h.root.join("keep"));
    assert_eq!(got, vec![ChangeKind::Modified]);
    assert_eq!(h.status("s").overflow_recoveries, 2);
}

/// One watch's own buffer overflowed (ReadDirectoryChangesW's): what it
/// lost came after that watch's previous read, which the backend names,
/// however much later the read before the rescan is (another watch's).
/// A file written in between, past the margin before that later read, is
/// reported modified.
#[test]
fn a_watch_that_lost_events_is_rescanned_from_its_own_previous_read() {
    let mut h = harness(Config {
        overflow_margin: Some(100 * MS),
        ..Config::default()
    });
    std::fs::write(h.root.join("keep"), "k").unwrap();
    h.apply("s", h.spec().quiet_window(10 * MS));
    let written = SystemTime::now();
    // Another watch's read, a minute after the write.
    let later = written + Duration::from_secs(60);
    h.engine.handle(Msg::Os(OsMsg::events(vec![], 1, later)));
    h.engine.handle(Msg::Os(OsMsg::events(vec![], 1, later)));
    // The watch of the tree last read a minute before the write.
    h.os(vec![OsEvent::LostAfter(written - Duration::from_secs(60))]);
    h.after(10 * MS);
    assert_eq!(h.kinds_of(&h.root.join("keep")), vec![ChangeKind::Modified]);
    assert_eq!(h.status("s").overflow_recoveries, 1);
}

/// A file renamed over one the index holds, told as Wine's
/// ReadDirectoryChangesW tells it when the rename's two halves fall into
/// two reads: the old name removed, the new one added (not renamed). The
/// file was replaced: `Modified` (an atomic save), and at once, not with
/// the next save.
#[test]
fn a_creation_of_a_name_the_index_holds_is_a_modification() {
    let mut h = harness(Config::default());
    std::fs::write(h.root.join("config.json"), "0").unwrap();
    h.apply("s", h.spec().quiet_window(10 * MS));
    h.after(10 * MS);
    h.batches();
    std::fs::write(h.root.join("config.json.tmp"), "1").unwrap();
    std::fs::rename(h.root.join("config.json.tmp"), h.root.join("config.json")).unwrap();
    let root = h.root.clone();
    h.event(&root, "config.json.tmp", Hint::Created);
    h.event(&root, "config.json.tmp", Hint::Removed);
    h.event(&root, "config.json", Hint::Created);
    h.after(10 * MS);
    assert_eq!(
        h.kinds_of(&root.join("config.json")),
        vec![ChangeKind::Modified]
    );
}

#[test]
fn sync_answers_once_its_cookie_is_seen_and_closes_the_batch() {
    let mut h = harness(Config::default());
    let long = Duration::from_secs(5);
    h.apply("s", h.spec().quiet_window(long).max_delay(long));
    h.write("a");
    let (reply, answer) = bounded(1);
    let deadline = h.clock.now() + Duration::from_secs(10);
    h.engine.handle(Msg::Sync {
        name: "s".into(),
        deadline,
        reply,
    });
    let cookie = h.root_cookie();
    h.engine.end_pass();
    assert!(answer.try_recv().is_err(), "not before its cookie is seen");
    let root = h.root.clone();
    h.event(&root, cookie.to_str().unwrap(), Hint::Created);
    h.engine.end_pass();
    assert_eq!(answer.try_recv(), Ok(true));
    assert_eq!(h.batches().len(), 1, "closed despite a 5 s quiet window");
    assert!(
        !root.join(&cookie).exists(),
        "cookie removed before the answer"
    );
    // A barrier whose caller gave up: dropped at its deadline, cookie gone.
    let (reply, answer) = bounded(1);
    h.engine.handle(Msg::Sync {
        name: "s".into(),
        deadline: h.clock.now() + 100 * MS,
        reply,
    });
    h.engine.end_pass();
    assert_eq!(h.engine.next_deadline(), Some(h.clock.now() + 100 * MS));
    h.after(100 * MS);
    assert!(answer.try_recv().is_err());
    let left = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .filter(|e| crate::fs::is_cookie(&e.file_name()))
        .count();
    assert_eq!(left, 0, "an expired barrier's cookie is removed");
    // Unknown spec: answered at once.
    let (reply, answer) = bounded(1);
    h.engine.handle(Msg::Sync {
        name: "nope".into(),
        deadline: Instant::now(),
        reply,
    });
    assert_eq!(answer.try_recv(), Ok(false));
}

#[test]
fn status_is_published_only_when_something_a_reader_sees_changed() {
    let mut h = harness(Config::default());
    h.apply("s", h.spec().quiet_window(10 * MS));
    let count = |h: &Harness| {
        h.events
            .try_iter()
            .filter(|e| matches!(e, Event::Status(_)))
            .count()
    };
    assert_eq!(count(&h), 1, "the first status");
    h.after(Duration::ZERO);
    assert_eq!(count(&h), 0, "an empty pass publishes nothing");
    // A hint that changes nothing on disk: no batch, no status.
    let root = h.root.clone();
    h.event(&root, "never-there", Hint::Removed);
    h.after(10 * MS);
    assert_eq!(count(&h), 0);
    // A batch changes what a reader sees (recent batches, event time).
    h.write("a");
    h.after(10 * MS);
    assert_eq!(count(&h), 1);
    // A new directory changes the watched count.
    std::fs::create_dir(root.join("d")).unwrap();
    h.event(&root, "d", Hint::Created);
    h.after(Duration::ZERO);
    assert_eq!(h.status("s").watched_dirs, 2);
    assert_eq!(count(&h), 1);
}

#[test]
fn a_top_directory_replaced_before_its_lost_watch_is_handled_is_watched_again() {
    let mut h = harness(Config::default());
    // The root is build/out: build is watched for the name out.
    let build = h.root.join("build");
    let out = build.join("out");
    std::fs::create_dir_all(&out).unwrap();
    h.apply("s", WatchSpec::new([&out]).quiet_window(10 * MS));
    let (old_build, old_out) = (h.fake.id_of(&build).unwrap(), h.fake.id_of(&out).unwrap());
    // rm -rf build && mkdir -p build/out, then the lost watches arrive.
    std::fs::remove_dir_all(&build).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let lost = vec![h.fake.drop_watch(old_out), h.fake.drop_watch(old_build)];
    h.os(lost);
    h.after(Duration::ZERO);
    let node = h.engine.index.lookup(&build).expect("build indexed");
    assert!(
        h.engine.watches.watch_of(node).is_some() && h.fake.id_of(&build).is_some(),
        "the new build directory has no watch: nothing would tell its out going"
    );
    assert!(h.fake.id_of(&out).is_some(), "the new root is watched");
    assert!(h.engine.check_invariants().is_empty());
    assert_eq!(h.status("s").phase, Phase::Watching);
    // And it works: out goes, then comes back.
    std::fs::remove_dir(&out).unwrap();
    h.event(&build, "out", Hint::Removed);
    h.after(10 * MS);
    assert!(h.batches().iter().any(|b| {
        b.changes
            .iter()
            .any(|c| c.path == out && c.kind == ChangeKind::Removed)
    }));
}

/// A directory reached by two paths (a followed link) has one watch; when
/// the path that last shared it goes, the other keeps it. (Unix: symlinks
/// on Windows need a privilege a test cannot count on.)
#[cfg(unix)]
#[test]
fn a_shared_watch_stays_with_the_path_that_keeps_it() {
    let mut h = harness(Config::default());
    let (d, l) = (h.root.join("d"), h.root.join("l"));
    std::fs::create_dir(&d).unwrap();
    h.apply("s", h.spec().follow_symlinks(true));
    let w = h.fake.id_of(&d).unwrap();
    // A link to d: the same directory, the same watch.
    std::os::unix::fs::symlink(&d, &l).unwrap();
    let root = h.root.clone();
    h.event(&root, "l", Hint::Created);
    assert_eq!(h.fake.id_of(&l), Some(w), "one watch for both paths");
    // The link goes: its node let go of a watch it shared, not held.
    std::fs::remove_file(&l).unwrap();
    h.event(&root, "l", Hint::Removed);
    let node = h.engine.index.lookup(&d).expect("d indexed");
    assert_eq!(
        h.engine.watches.watch_of(node),
        Some(w),
        "d keeps its watch"
    );
    assert_eq!(h.fake.id_of(&d), Some(w), "and the OS still holds it");
    assert!(h.engine.check_invariants().is_empty());
}

/// A directory replaced by a file between its watch call and its first
/// read: the node is dropped with its entry, not kept unread with a watch
/// (nothing would read it later, and what a directory made there holds
/// would never be reported). The parent's next event adds whatever is
/// there then.
#[test]
fn a_directory_gone_before_its_first_read_leaves_no_unread_node() {
    let mut h = harness(Config::default());
    h.apply("s", h.spec().quiet_window(10 * MS));
    let c = h.root.join("c");
    std::fs::create_dir(&c).unwrap();
    h.fake.after_next_watch(|dir| {
        std::fs::remove_dir(dir).unwrap();
        std::fs::write(dir, "now a file").unwrap();
    });
    let root = h.root.clone();
    h.event(&root, "c", Hint::Created);
    let broken = h.engine.check_invariants();
    assert!(broken.is_empty(), "{broken:?}");
    assert!(
        h.engine.index.lookup(&c).is_none(),
        "a node for a directory that is not there"
    );
    // The OS's next events about c: it became a file, then a directory
    // with something in it.
    h.event(&root, "c", Hint::Created);
    std::fs::remove_file(&c).unwrap();
    std::fs::create_dir(&c).unwrap();
    std::fs::write(c.join("inside"), "x").unwrap();
    h.event(&root, "c", Hint::Created);
    h.after(10 * MS);
    assert!(
        h.kinds_of(&c.join("inside")).contains(&ChangeKind::Created),
        "what the new directory holds is reported"
    );
    assert!(h.engine.check_invariants().is_empty());
}

/// A directory whose first read failed (unreadable) and whose retry then
/// met the watch limit: polled from then on, and read all the same (a
/// poll compares with what was read, and it never was, so what it held
/// was never reported).
#[test]
fn a_directory_never_read_is_read_when_its_retry_ends_in_polling() {
    let mut h = harness(Config::default());
    h.apply("s", h.spec().quiet_window(10 * MS));
    let n = h.root.join("n");
    std::fs::create_dir(&n).unwrap();
    std::fs::write(n.join("inside"), "x").unwrap();
    // Its watch call fails, so does its read.
    h.engine.watches.inject(Fault::Fail(1));
    crate::fs::fail_next_read(&n);
    let root = h.root.clone();
    h.event(&root, "n", Hint::Created);
    let id = h.engine.index.lookup(&n).expect("a node for n");
    assert!(h.engine.recovery.retrying(id), "a retry for n");
    // The retry's watch call meets the watch limit.
    h.engine.watches.inject(Fault::Limit(1));
    h.after(100 * MS);
    assert!(h.engine.polls.contains(id), "n polled at the limit");
    h.after(10 * MS);
    assert!(
        h.kinds_of(&n.join("inside")).contains(&ChangeKind::Created),
        "what n holds is reported: {:?}",
        h.batches()
    );
    let broken = h.engine.check_invariants();
    assert!(broken.is_empty(), "{broken:?}");
}

/// A directory removed while it waits for a retry takes its retry with it:
/// its id may soon name another directory, which must not inherit it.
#[test]
fn a_directory_removed_while_waiting_for_a_retry_leaves_no_retry() {
    let mut h = harness(Config::default());
    h.apply("s", h.spec());
    let n = h.root.join("n");
    std::fs::create_dir(&n).unwrap();
    h.engine.watches.inject(Fault::Fail(4));
    let root = h.root.clone();
    h.event(&root, "n", Hint::Created);
    let id = h.engine.index.lookup(&n).expect("a node for n");
    assert!(h.engine.recovery.retrying(id), "a retry for n");
    std::fs::remove_dir(&n).unwrap();
    h.event(&root, "n", Hint::Removed);
    assert!(h.engine.index.lookup(&n).is_none(), "n's node removed");
    let broken = h.engine.check_invariants();
    assert!(broken.is_empty(), "{broken:?}");
}

/// What an overflow lost was lost before the read that brought its marker:
/// a directory whose first full read began after that shows it all and is
/// not read again (a start-up on the portable backend overflows while
/// notify walks, before the engine's first reads).
#[test]
fn an_overflow_before_a_first_read_leaves_the_directory_alone() {
    let mut h = harness(Config::default());
    std::fs::write(h.root.join("keep"), "k").unwrap();
    h.apply("s", h.spec().quiet_window(10 * MS));
    let before = h.clock.wall() - Duration::from_secs(60);
    let mono = h.clock.now().checked_sub(10 * MS).unwrap();
    // Marked before the first read (on the monotonic clock; the wall
    // clock's minute before only widens the margin): the rescan would
    // report the recent `keep` as modified; it is skipped.
    let os = |events, mono| Msg::Os(OsMsg::events_at(events, 1, before, mono));
    h.engine.handle(os(vec![], mono));
    h.engine.handle(os(vec![OsEvent::Overflow], mono));
    h.after(10 * MS);
    assert!(h.batches().is_empty(), "nothing read again");
    assert_eq!(h.status("s").overflow_recoveries, 1, "still counted");
    // Marked after it: read again.
    h.after(Duration::from_secs(1));
    h.engine.handle(os(vec![], h.clock.now()));
    h.os(vec![OsEvent::Overflow]);
    h.after(10 * MS);
    let got = h.kinds_of(&h.root.join("keep"));
    assert_eq!(got, [ChangeKind::Modified]);
}

/// A path backend names a path below directories it never reported (an OS
/// that coalesced or lost their creation): the engine looks at the first
/// unknown one below what it knows and walks it, so everything in it is
/// reported. Below a directory every spec prunes, it looks at nothing.
#[test]
fn a_path_below_unknown_directories_is_looked_at_from_the_nearest_known_one() {
    let mut h = harness(Config::default());
    h.apply(
        "s",
        h.spec().quiet_window(10 * MS).ignore_patterns(["target/"]),
    );
    let deep = h.root.join("a/b/c");
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("f"), "f").unwrap();
    std::fs::create_dir_all(h.root.join("target/x")).unwrap();
    h.os(vec![
        OsEvent::Path {
            path: h.root.join("target/x/y"),
            hint: Hint::Created,
        },
        OsEvent::Path {
            path: deep.join("f"),
            hint: Hint::Modified,
        },
    ]);
    h.after(10 * MS);
    let batches = h.batches();
    for p in ["a", "a/b", "a/b/c", "a/b/c/f"] {
        let got = kinds(&batches, &h.root.join(p));
        assert_eq!(got, [ChangeKind::Created], "{p}");
    }
    assert!(
        h.engine.index.lookup(&h.root.join("target/x")).is_none(),
        "nothing below a pruned directory is read"
    );
    let root = h.engine.index.lookup(&h.root).unwrap();
    assert_eq!(
        h.engine
            .index
            .get(root)
            .unwrap()
            .entries()
            .get(std::ffi::OsStr::new("target")),
        None,
        "target/ (made with no event) was not even looked at"
    );
    assert!(h.engine.check_invariants().is_empty());
}

mod declared;
mod hashing;
mod polling;
mod storage_errors;
mod updates;
mod walks;
