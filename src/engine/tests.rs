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
use crate::change::{ChangeBatch, ChangeKind};
use crate::clock::Clock;
use crate::fanout::{Event, Subscriber};
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
            spec,
            matcher: Box::new(matcher),
        });
    }

    /// Applies spec `name` (generation 1) as the OS would see it through:
    /// its guard's cookies come back.
    fn apply(&mut self, name: &str, spec: WatchSpec) {
        self.upsert(name, Generation(1), spec);
        // The OS reports the cookies of the apply's guard, as it would.
        for c in self.engine.guard_cookies_waiting() {
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

    fn status(&self, name: &str) -> WatchStatus {
        WatchStatus::clone(&self.shared.statuses.lock()[name])
    }

    fn spec(&self) -> WatchSpec {
        WatchSpec::new([&self.root])
    }
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
    let got: Vec<ChangeKind> = h
        .batches()
        .iter()
        .flat_map(|b| b.changes.iter())
        .filter(|c| c.path.ends_with("keep"))
        .map(|c| c.kind)
        .collect();
    assert_eq!(got, vec![ChangeKind::Modified]);
    assert_eq!(h.status("s").overflow_recoveries, 2);
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
    let cookie = std::fs::read_dir(&h.root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .find(|n| crate::fs::is_cookie(n))
        .expect("the engine created a cookie in the root");
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

#[test]
fn a_spec_that_polls_holds_no_watch_and_is_polled_at_its_own_interval() {
    let mut h = harness(Config {
        poll_interval: Some(1000 * MS),
        ..Config::default()
    });
    std::fs::create_dir(h.root.join("sub")).unwrap();
    let polled = |h: &Harness| {
        h.spec()
            .backend(Backend::Poll { interval: 30 * MS })
            .quiet_window(10 * MS)
    };
    h.apply("p", polled(&h));
    assert_eq!(h.fake.live(), 0, "no OS watch for a spec that polls");
    let st = h.status("p");
    assert_eq!(st.phase, Phase::Watching, "polled by choice: {st:?}");
    assert_eq!((st.polled_dirs, st.watched_dirs), (0, 2), "{st:?}");
    assert_eq!(
        st.roots.iter().map(ToString::to_string).collect::<Vec<_>>(),
        vec![format!("poll every 30ms: chosen at {}", h.root.display())]
    );
    let f = h.root.join("sub/new");
    std::fs::write(&f, "x").unwrap();
    let t0 = h.clock.now();
    assert_eq!(
        h.engine.next_deadline(),
        Some(t0 + 30 * MS),
        "its own interval"
    );
    h.after(29 * MS);
    h.after(MS);
    h.after(10 * MS);
    let b = h.batches();
    assert_eq!(b.len(), 1, "found by the poll at 30 ms");
    assert_eq!(b[0].changes[0].path, f);

    // A spec with the event backend on the same tree: OS watches for it,
    // the poll goes on for the other.
    h.apply("n", h.spec().quiet_window(10 * MS));
    assert_eq!(h.fake.live(), 3, "root's parent, root, sub");
    assert!(h.engine.next_deadline().is_some(), "still polled");
    // The polling spec goes: so does the polling; the watches stay.
    h.engine.handle(Msg::Delete { name: "p".into() });
    h.engine.end_pass();
    assert!(h.engine.polls.is_empty(), "nothing polled");
    assert_eq!(h.engine.next_deadline(), None);
    assert_eq!(h.fake.live(), 3);
    // The other one switches to polling: its watches go, polling starts.
    h.apply("n", polled(&h));
    assert_eq!(h.fake.live(), 0, "watches released");
    assert_eq!(h.engine.polls.ids().len(), 3, "parent, root, sub polled");
    std::fs::remove_file(&f).unwrap();
    h.after(30 * MS);
    h.after(10 * MS);
    let b = h.batches();
    assert_eq!(b.len(), 1, "the removal found by polling");
    assert_eq!(b[0].changes[0].kind, ChangeKind::Removed);
    // And back: watched again, nothing polled.
    h.apply("n", h.spec().quiet_window(10 * MS));
    assert_eq!(h.fake.live(), 3);
    assert!(h.engine.polls.is_empty());
    assert!(h.engine.check_invariants().is_empty());
}

impl Harness {
    /// Delivers the event of the sync cookie the engine just created in
    /// the root (the fake backend has no OS to tell it).
    fn deliver_cookie(&mut self) {
        let cookie = std::fs::read_dir(&self.root)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .find(|n| crate::fs::is_cookie(n))
            .expect("the engine created a cookie in the root");
        let root = self.root.clone();
        self.event(&root, cookie.to_str().unwrap(), Hint::Created);
        self.engine.end_pass();
    }
}

#[test]
fn a_rescan_delivers_and_counts_what_no_event_reported() {
    let mut h = harness(Config::default());
    std::fs::write(h.root.join("kept"), "1").unwrap();
    let every = Duration::from_secs(60);
    h.apply("s", h.spec().quiet_window(10 * MS).rescan_every(every));
    // The first rescan: a baseline, with nothing missed.
    h.after(every);
    h.deliver_cookie();
    h.after(10 * MS);
    assert!(h.batches().is_empty());
    assert_eq!(h.status("s").missed_by_os, 0);
    // Writes the OS reports (an event) and writes it does not.
    h.write("told");
    std::fs::write(h.root.join("untold"), "1").unwrap();
    std::fs::write(h.root.join("kept"), "a longer content").unwrap();
    h.after(10 * MS);
    let b = h.batches();
    assert_eq!(b.len(), 1);
    assert_eq!(
        b[0].changes.len(),
        1,
        "only the reported one: {:?}",
        b[0].changes
    );
    h.after(every - 10 * MS);
    assert!(h.batches().is_empty(), "the rescan waits for its barrier");
    h.deliver_cookie();
    h.after(10 * MS);
    let b = h.batches();
    assert_eq!(b.len(), 1);
    let got: Vec<(String, ChangeKind)> = b[0]
        .changes
        .iter()
        .map(|c| {
            (
                c.path.file_name().unwrap().to_string_lossy().into_owned(),
                c.kind,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("kept".into(), ChangeKind::Modified),
            ("untold".into(), ChangeKind::Created)
        ],
        "what the OS did not report, and nothing it did"
    );
    assert_eq!(h.status("s").missed_by_os, 2);
    // An event after the rescan keeps the signature: no double report.
    std::fs::write(h.root.join("told"), "changed").unwrap();
    let root = h.root.clone();
    h.event(&root, "told", Hint::Modified);
    h.after(10 * MS);
    assert_eq!(h.batches().len(), 1);
    h.after(every);
    h.deliver_cookie();
    h.after(10 * MS);
    assert!(h.batches().is_empty(), "nothing left to find");
    assert_eq!(h.status("s").missed_by_os, 2);
}

#[test]
fn content_hash_finds_a_rewrite_that_the_signature_hides() {
    for hash in [false, true] {
        let mut h = harness(Config::default());
        let f = h.root.join("f");
        std::fs::write(&f, "aaaa").unwrap();
        let spec = h
            .spec()
            .backend(Backend::Poll { interval: 30 * MS })
            .quiet_window(10 * MS)
            .content_hash(hash);
        h.apply("p", spec);
        // Rewritten with the same size; the stored signature is made to
        // match, as on a file system whose timestamps did not move.
        std::fs::write(&f, "bbbb").unwrap();
        let id = h.engine.index.lookup(&h.root).unwrap();
        let mut sigs = h.engine.polls.sigs(id).unwrap().clone();
        sigs.insert("f".into(), crate::fs::sig_of(&f).unwrap());
        h.engine.polls.set_sigs(id, sigs);
        h.after(30 * MS);
        h.after(10 * MS);
        let b = h.batches();
        if hash {
            assert_eq!(b.len(), 1, "the content tells");
            assert_eq!(
                (b[0].changes[0].path.clone(), b[0].changes[0].kind),
                (f.clone(), ChangeKind::Modified)
            );
            // Hashed again at that poll: an unchanged file stays quiet.
            h.after(30 * MS);
            h.after(10 * MS);
            assert!(h.batches().is_empty(), "no change, no report");
        } else {
            assert!(b.is_empty(), "control: the signature alone cannot see it");
        }
    }
}

#[test]
fn a_watch_the_os_drops_frees_its_slot_for_a_polled_directory() {
    let mut h = harness(Config {
        max_watches: Some(3), // the root's parent, the root, one directory
        poll_interval: Some(100 * MS),
        ..Config::default()
    });
    std::fs::create_dir(h.root.join("a")).unwrap();
    std::fs::create_dir(h.root.join("b")).unwrap();
    h.apply("s", h.spec().quiet_window(10 * MS));
    assert_eq!(h.status("s").polled_dirs, 1, "one of a and b is polled");
    let watched = ["a", "b"]
        .into_iter()
        .find(|n| h.fake.id_of(&h.root.join(n)).is_some())
        .unwrap();
    let w = h.fake.id_of(&h.root.join(watched)).unwrap();
    // The watched directory is deleted: the OS drops its watch first, then
    // the parent's event says it went.
    std::fs::remove_dir(h.root.join(watched)).unwrap();
    let dropped = h.fake.drop_watch(w);
    h.os(vec![dropped]);
    let root = h.root.clone();
    h.event(&root, watched, Hint::Removed);
    h.engine.end_pass();
    let st = h.status("s");
    assert_eq!(
        st.polled_dirs, 0,
        "the other directory took the slot: {st:?}"
    );
    assert_eq!(st.phase, Phase::Watching);
    assert!(h.engine.check_invariants().is_empty());
}

#[test]
fn a_long_first_walk_publishes_its_progress_as_starting() {
    let mut h = harness(Config::default());
    h.apply("s", h.spec());
    assert_eq!(h.status("s").phase, Phase::Watching);
    let sid = h.engine.specs.id_of("s").unwrap();
    // As the walk of a big tree would: directories read one after another
    // while the clock moves on.
    h.engine.walk_begins(sid);
    for _ in 0..200 {
        h.clock.advance(MS);
        h.engine.walked(10);
    }
    let st = h.status("s");
    assert_eq!(st.phase, Phase::Starting, "mid-walk: {st:?}");
    let p = st.progress.expect("progress during a walk over 100 ms");
    assert!(p.dirs >= 64 && p.entries == p.dirs * 10, "{p:?}");
    h.engine.walk_ends();
    h.engine.end_pass();
    let st = h.status("s");
    assert_eq!((st.phase.clone(), st.progress), (Phase::Watching, None));
}

#[test]
fn an_update_from_poll_to_events_loses_nothing_since_the_last_poll() {
    let mut h = harness(Config {
        poll_interval: Some(1000 * MS),
        ..Config::default()
    });
    let polled = h
        .spec()
        .backend(Backend::Poll { interval: 100 * MS })
        .quiet_window(10 * MS);
    h.apply("s", polled);
    assert_eq!(h.fake.live(), 0);
    // Written 50 ms after the last poll, before the next one.
    h.after(100 * MS);
    h.after(50 * MS);
    let f = h.root.join("written-while-polled");
    std::fs::write(&f, "x").unwrap();
    // The spec switches to the event backend.
    h.upsert("s", Generation(2), h.spec().quiet_window(10 * MS));
    h.engine.end_pass();
    for _ in 0..50 {
        h.after(100 * MS);
    }
    let seen: Vec<_> = h
        .batches()
        .iter()
        .flat_map(|b| b.changes.clone())
        .map(|c| c.path)
        .collect();
    assert!(h.engine.polls.is_empty());
    assert!(seen.contains(&f), "lost: {seen:?}");
}

#[test]
fn a_limit_polled_directory_switched_to_chosen_polling_does_not_block_unpoll() {
    let mut h = harness(Config {
        max_watches: Some(3),
        poll_interval: Some(100 * MS),
        ..Config::default()
    });
    for d in ["p", "p/q1", "p/q2", "n", "n/x"] {
        std::fs::create_dir(h.root.join(d)).unwrap();
    }
    let p = h.root.join("p");
    let n = h.root.join("n");
    h.apply("p", WatchSpec::new([&p]).quiet_window(10 * MS));
    assert_eq!(h.status("p").polled_dirs, 1, "{:?}", h.status("p"));
    h.apply("n", WatchSpec::new([&n]).quiet_window(10 * MS));
    assert_eq!(h.status("n").polled_dirs, 2, "{:?}", h.status("n"));
    // "p" switches to polling by choice: its two watches are released.
    let spec = WatchSpec::new([&p])
        .quiet_window(10 * MS)
        .backend(Backend::Poll { interval: 100 * MS })
        .normalized("p")
        .unwrap();
    let matcher = spec.matcher("p").unwrap();
    h.engine.handle(Msg::Upsert {
        name: "p".into(),
        generation: Generation(2),
        spec,
        matcher: Box::new(matcher),
    });
    h.engine.end_pass();
    for _ in 0..20 {
        h.after(100 * MS);
    }
    assert_eq!(
        h.status("p").polled_dirs,
        0,
        "p polls by choice only: {:?}",
        h.status("p")
    );
    assert_eq!(
        h.status("n").polled_dirs,
        0,
        "n got its watches back: {:?}",
        h.status("n")
    );
}

/// An update holds back `Modified` hints queued before it for paths the
/// old generation did not show, until its cookie comes back; hints for
/// paths it showed, and everything after the cookie, go through.
#[test]
fn an_update_holds_back_older_hints_for_paths_it_adds() {
    let mut h = harness(Config::default());
    let (log, txt) = (h.root.join("a.log"), h.root.join("b.txt"));
    std::fs::write(&log, "1").unwrap();
    std::fs::write(&txt, "1").unwrap();
    let quiet = |s: WatchSpec| s.quiet_window(Duration::ZERO);
    h.apply("s", quiet(h.spec().ignore_patterns(["*.log"])));
    let _ = h.batches();
    h.upsert("s", Generation(2), quiet(h.spec()));
    h.engine.end_pass();
    let kinds = |b: &[Arc<ChangeBatch>], p: &Path| -> Vec<ChangeKind> {
        b.iter()
            .flat_map(|b| b.changes.iter())
            .filter(|c| c.path == p)
            .map(|c| c.kind)
            .collect()
    };
    let b = h.batches();
    assert_eq!(kinds(&b, &log), [ChangeKind::Created], "the update's own");
    let cookies = h.engine.guard_cookies_waiting();
    assert_eq!(cookies.len(), 1, "one cookie, in the root");
    let root = h.root.clone();
    h.event(&root, "a.log", Hint::Modified);
    h.event(&root, "b.txt", Hint::Modified);
    h.engine.end_pass();
    let b = h.batches();
    assert_eq!(kinds(&b, &log), [], "written before the update");
    assert_eq!(kinds(&b, &txt), [ChangeKind::Modified], "shown before");
    let name = cookies[0].file_name().unwrap().to_str().unwrap().to_owned();
    h.event(&root, &name, Hint::Created);
    h.event(&root, "a.log", Hint::Modified);
    h.engine.end_pass();
    let b = h.batches();
    assert_eq!(kinds(&b, &log), [ChangeKind::Modified], "after the cookie");
    assert!(h.engine.guard_cookies_waiting().is_empty());
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
    let got: Vec<ChangeKind> = h
        .batches()
        .iter()
        .flat_map(|b| b.changes.iter())
        .filter(|c| c.path.ends_with("keep"))
        .map(|c| c.kind)
        .collect();
    assert_eq!(got, [ChangeKind::Modified]);
}

/// A poll's finding is no OS hint queued before an update: an update's
/// guard, still waiting for its cookie, does not hold it back (from a
/// review; the watch cap leaves `sub` polled).
#[test]
fn an_update_guard_does_not_hold_back_what_a_poll_finds() {
    let mut h = harness(Config {
        max_watches: Some(2), // the root's parent and the root
        poll_interval: Some(100 * MS),
        ..Config::default()
    });
    std::fs::create_dir(h.root.join("sub")).unwrap();
    let f = h.root.join("sub/f");
    std::fs::write(&f, "x").unwrap();
    // `sub` is shown by the update only, and polled (the cap).
    h.apply(
        "s",
        h.spec().quiet_window(10 * MS).ignore_patterns(["sub/"]),
    );
    h.upsert("s", Generation(2), h.spec().quiet_window(10 * MS));
    h.engine.end_pass();
    assert_eq!(h.status("s").polled_dirs, 1, "{:?}", h.status("s"));
    assert_eq!(h.engine.guard_cookies_waiting().len(), 1, "guard on");
    let kinds_of_f = |h: &Harness| -> Vec<ChangeKind> {
        h.batches()
            .iter()
            .flat_map(|b| b.changes.iter())
            .filter(|c| c.path == f)
            .map(|c| c.kind)
            .collect()
    };
    h.after(20 * MS);
    assert_eq!(kinds_of_f(&h), [ChangeKind::Created], "the update's own");
    // Written after the update, while its cookie is still out.
    h.clock.advance(30 * MS);
    std::fs::write(&f, "longer now").unwrap();
    h.after(60 * MS);
    h.after(30 * MS);
    assert_eq!(kinds_of_f(&h), [ChangeKind::Modified], "the poll's finding");
}
