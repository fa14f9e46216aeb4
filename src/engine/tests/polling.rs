//! Engine tests of polling: chosen per spec, by a whole manager
//! (`Backend::Poll`), at the watch cap, with rescans and content hashes,
//! and the switches between polling and events.

use super::*;

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
    /// Delivers the events of the sync cookies the engine created in the
    /// root and has not removed yet (the fake backend has no OS to tell
    /// it; a barrier still parked keeps its cookie).
    fn deliver_cookie(&mut self) {
        let _ = self.root_cookie(); // (one at least)
        let root = self.root.clone();
        let cookies: Vec<String> = std::fs::read_dir(&root)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| crate::fs::is_cookie(std::ffi::OsStr::new(n)))
            .collect();
        for c in cookies {
            self.event(&root, &c, Hint::Created);
        }
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

impl Harness {
    /// Makes the looks the held scanner kept (as its thread would, now),
    /// and returns what they found, not handed to the engine yet.
    fn look_held(&mut self) -> Vec<crate::scanner::Finding> {
        crate::scanner::run(self.engine.scanner.take_held())
    }

    /// A caller's `sync` of spec `name` (10 s), started in a pass of its
    /// own: its answer, when there is one.
    fn sync(&mut self, name: &str) -> Receiver<bool> {
        let (reply, answer) = bounded(1);
        self.engine.handle(Msg::Sync {
            name: name.into(),
            deadline: self.clock.now() + Duration::from_secs(10),
            reply,
        });
        self.engine.end_pass();
        answer
    }

    /// Hands the scanner's findings to the engine, and ends the pass.
    fn looked(&mut self, found: Vec<crate::scanner::Finding>) {
        self.engine.handle(Msg::Looked(found));
        self.engine.end_pass();
    }

    /// Every change reported since the last look (name below the root,
    /// kind), sorted.
    fn changes(&self) -> Vec<(String, ChangeKind)> {
        self.names_of(&self.batches())
    }

    /// The changes of `batches` (name below the root, joined with `/` on
    /// every OS, kind), sorted.
    fn names_of(&self, batches: &[Arc<ChangeBatch>]) -> Vec<(String, ChangeKind)> {
        let mut v: Vec<(String, ChangeKind)> = batches
            .iter()
            .flat_map(|b| b.changes.iter())
            .map(|c| {
                let rel = c.path.strip_prefix(&self.root).unwrap();
                let names: Vec<_> = rel.iter().map(|n| n.to_string_lossy()).collect();
                (names.join("/"), c.kind)
            })
            .collect();
        v.sort();
        v
    }

    /// The root's names as the index holds them, and as the disk does.
    fn root_names(&self) -> (Vec<String>, Vec<String>) {
        let id = self.engine.index.lookup(&self.root).unwrap();
        let mut index: Vec<String> = self
            .engine
            .index
            .get(id)
            .unwrap()
            .entries()
            .iter()
            .map(|(n, _)| n.to_string_lossy().into_owned())
            .collect();
        let mut disk: Vec<String> = std::fs::read_dir(&self.root)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !crate::fs::is_cookie(std::ffi::OsStr::new(n)))
            .collect();
        index.sort();
        disk.sort();
        (index, disk)
    }
}

/// A rescan's look is made on the scanner while the directory's events
/// go on: a name the engine looks at meanwhile (removed, created,
/// written) keeps what its event found, whatever the look saw, and is
/// reported once; what no event told of is delivered and counted; the
/// index ends equal to the disk, and the next rescan finds nothing.
#[test]
fn events_during_a_rescan_look_are_neither_lost_nor_reported_twice() {
    let mut h = harness(Config::default());
    for n in ["kept", "gone", "late", "early"] {
        std::fs::write(h.root.join(n), "1").unwrap();
    }
    h.engine.scanner = crate::scanner::Scanner::held();
    let every = Duration::from_secs(60);
    h.apply("s", h.spec().quiet_window(10 * MS).rescan_every(every));
    // The first rescan: a baseline, made on the scanner.
    h.after(every);
    h.deliver_cookie();
    let found = h.look_held();
    assert_eq!(found.len(), 1, "the root looked at on the scanner");
    h.looked(found);
    h.after(10 * MS);
    assert!(h.batches().is_empty());
    assert_eq!(h.status("s").missed_by_os, 0);

    // What no event tells of.
    std::fs::write(h.root.join("untold"), "1").unwrap();
    std::fs::write(h.root.join("kept"), "a longer content").unwrap();
    // Written before the look; its event is handled while the look is
    // under way.
    std::fs::write(h.root.join("early"), "written before the look").unwrap();
    h.after(every);
    h.deliver_cookie();
    // The look is made now; it comes back later.
    let found = h.look_held();
    assert_eq!(found.len(), 1);
    // Meanwhile, events: a removal, a creation, writes before and after
    // the look.
    let root = h.root.clone();
    std::fs::remove_file(h.root.join("gone")).unwrap();
    h.event(&root, "gone", Hint::Removed);
    h.write("born");
    std::fs::write(h.root.join("late"), "written after the look").unwrap();
    h.event(&root, "late", Hint::Modified);
    h.event(&root, "early", Hint::Modified);
    h.engine.end_pass();
    h.looked(found);
    h.after(10 * MS);
    assert_eq!(
        h.changes(),
        vec![
            ("born".into(), ChangeKind::Created),
            ("early".into(), ChangeKind::Modified),
            ("gone".into(), ChangeKind::Removed),
            ("kept".into(), ChangeKind::Modified),
            ("late".into(), ChangeKind::Modified),
            ("untold".into(), ChangeKind::Created),
        ],
        "each once: the events' own, and what no event told of"
    );
    assert_eq!(
        h.status("s").missed_by_os,
        2,
        "only kept and untold were missed by the OS"
    );
    let (index, disk) = h.root_names();
    assert_eq!(index, disk, "the index is the disk");
    assert!(h.engine.check_invariants().is_empty());
    // The next rescan: nothing left to find (the events' signatures kept).
    h.after(every);
    h.deliver_cookie();
    let found = h.look_held();
    h.looked(found);
    h.after(10 * MS);
    assert_eq!(h.changes(), vec![], "nothing reported again");
    assert_eq!(h.status("s").missed_by_os, 2);
}

/// A directory one spec polls and another watches is polled on the
/// scanner, its events going on meanwhile: the names they look at keep
/// what the events found (each reported once), what no event told of is
/// applied from the look, and the index ends equal to the disk.
#[test]
fn events_during_a_poll_of_a_watched_directory_keep_their_view() {
    let mut h = harness(Config::default());
    for n in ["gone", "late"] {
        std::fs::write(h.root.join(n), "1").unwrap();
    }
    h.engine.scanner = crate::scanner::Scanner::held();
    let every = 30 * MS;
    h.apply(
        "p",
        h.spec()
            .backend(Backend::Poll { interval: every })
            .quiet_window(10 * MS),
    );
    h.apply("n", h.spec().quiet_window(10 * MS));
    let id = h.engine.index.lookup(&h.root).unwrap();
    assert!(h.fake.id_of(&h.root).is_some() && h.engine.polls.contains(id));
    h.look_held(); // (the first polls', if any)
    std::fs::write(h.root.join("untold"), "1").unwrap();
    h.after(every);
    let found = h.look_held();
    assert_eq!(found.len(), 1, "the root, looked at on the scanner");
    let root = h.root.clone();
    std::fs::remove_file(h.root.join("gone")).unwrap();
    h.event(&root, "gone", Hint::Removed);
    h.write("born");
    std::fs::write(h.root.join("late"), "written after the look").unwrap();
    h.event(&root, "late", Hint::Modified);
    h.engine.end_pass();
    h.looked(found);
    h.after(10 * MS);
    let batches = h.batches();
    for spec in ["n", "p"] {
        let of: Vec<_> = batches.iter().filter(|b| b.name == spec).cloned().collect();
        assert_eq!(
            h.names_of(&of),
            vec![
                ("born".into(), ChangeKind::Created),
                ("gone".into(), ChangeKind::Removed),
                ("late".into(), ChangeKind::Modified),
                ("untold".into(), ChangeKind::Created),
            ],
            "{spec}: each once, the events' own and what no event told of"
        );
    }
    let (index, disk) = h.root_names();
    assert_eq!(index, disk, "the index is the disk");
    assert!(h.engine.check_invariants().is_empty());
}

/// A rescan's barrier waits, parked, for the rescan's looks on the
/// scanner: what they find is delivered in the pass that applies the
/// last of them (the batch closed then, not at its quiet window), and
/// not before.
#[test]
fn a_rescan_barrier_waits_for_its_looks_on_the_scanner() {
    let mut h = harness(Config::default());
    std::fs::create_dir(h.root.join("sub")).unwrap();
    h.engine.scanner = crate::scanner::Scanner::held();
    // (Within the engine's 30 s deadline for its own barriers.)
    let every = Duration::from_secs(20);
    let long = Duration::from_secs(5);
    h.apply(
        "s",
        h.spec()
            .quiet_window(long)
            .max_delay(long)
            .rescan_every(every),
    );
    h.after(every);
    h.deliver_cookie();
    let found = h.look_held();
    assert_eq!(found.len(), 2, "root and sub");
    h.looked(found);
    // Missed by the OS, below both directories.
    std::fs::write(h.root.join("a"), "1").unwrap();
    std::fs::write(h.root.join("sub/b"), "1").unwrap();
    h.after(every);
    h.deliver_cookie();
    let jobs = h.engine.scanner.take_held();
    assert_eq!(jobs.len(), 2, "a look at each directory, under way");
    assert!(!h.engine.syncs.waiting(), "the barrier is parked");
    let (first, second): (Vec<_>, Vec<_>) = jobs.into_iter().partition(|j| j.path == h.root);
    for _ in 0..3 {
        h.after(10 * MS);
    }
    assert!(h.batches().is_empty(), "nothing before the looks come back");
    // One look back: the barrier still waits for the other.
    h.looked(crate::scanner::run(first));
    assert!(
        h.batches().is_empty(),
        "the barrier waits for its last look"
    );
    assert_eq!(h.status("s").missed_by_os, 1, "counted as it comes");
    h.looked(crate::scanner::run(second));
    assert_eq!(
        h.changes(),
        vec![
            ("a".into(), ChangeKind::Created),
            ("sub/b".into(), ChangeKind::Created),
        ],
        "delivered when the barrier passes, before the quiet window"
    );
    assert_eq!(h.status("s").missed_by_os, 2);
    // A look asked for while one is under way follows it: the barrier of
    // a rescan due meanwhile waits for that one.
    std::fs::write(h.root.join("c"), "1").unwrap();
    h.after(every);
    h.deliver_cookie();
    let under_way = h.engine.scanner.take_held();
    h.after(every);
    h.deliver_cookie();
    assert!(
        h.engine.scanner.take_held().is_empty(),
        "one look at a time per directory"
    );
    h.looked(crate::scanner::run(under_way));
    let follow = h.engine.scanner.take_held();
    assert_eq!(follow.len(), 2, "the looks that followed, handed over");
    assert_eq!(h.changes(), vec![("c".into(), ChangeKind::Created)]);
    h.looked(crate::scanner::run(follow));
    assert!(h.batches().is_empty(), "found once");
    assert_eq!(h.status("s").missed_by_os, 3);
    assert!(h.engine.check_invariants().is_empty());
}

/// A rescan's look may see a sync cookie whose event (and the events
/// queued before it) the engine has not read yet: the barrier does not
/// pass on that sighting, only on the cookie's event.
#[test]
fn a_cookie_a_rescan_look_sees_does_not_pass_a_barrier() {
    let mut h = harness(Config::default());
    h.engine.scanner = crate::scanner::Scanner::held();
    let every = Duration::from_secs(20);
    h.apply("s", h.spec().quiet_window(10 * MS).rescan_every(every));
    h.after(every);
    h.deliver_cookie();
    let look = h.engine.scanner.take_held();
    assert_eq!(look.len(), 1, "the rescan's look, under way");
    let answer = h.sync("s");
    // The look is made now: it sees the caller's cookie.
    let found = crate::scanner::run(look);
    let seen = found[0].look.as_ref().unwrap().picture.iter();
    assert!(seen.filter(|(n, _)| crate::fs::is_cookie(n)).count() >= 1);
    h.looked(found);
    assert!(
        answer.try_recv().is_err(),
        "not passed on the look's sighting"
    );
    // Its event comes: it passes.
    h.deliver_cookie();
    assert_eq!(answer.try_recv(), Ok(true));
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
        let mut picture = h.engine.polls.picture(id).unwrap().clone();
        // (`revert` keeps the content hash the first look took.)
        picture.revert(std::ffi::OsStr::new("f"), crate::fs::sig_of(&f));
        h.engine.polls.set_picture(id, picture);
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
    let now = h.engine.clock.now();
    h.engine.progress.begin(sid, now);
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
        spec: Box::new(spec),
        matcher: Box::new(matcher),
        state: None,
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

/// A manager that polls everything (`Backend::Poll` as its backend): what
/// the poll backend of its own thread guaranteed, the engine's polls do.
mod a_polling_manager {
    use super::*;

    const EVERY: Duration = Duration::from_millis(30);

    fn polling() -> Harness {
        harness(Config {
            backend: Backend::Poll { interval: EVERY },
            ..Config::default()
        })
    }

    /// Every directory is polled at the manager's interval, none holds a
    /// watch, the status says so; a poll reports what changed since the
    /// first read and nothing else, and polls come by themselves.
    #[test]
    fn every_directory_is_polled_and_a_poll_reports_what_changed_since_the_first_read() {
        let mut h = polling();
        std::fs::create_dir(h.root.join("sub")).unwrap();
        std::fs::write(h.root.join("old"), "1").unwrap();
        std::fs::write(h.root.join("gone"), "1").unwrap();
        h.apply("s", h.spec().quiet_window(10 * MS));
        assert_eq!(h.fake.calls(), 0, "no watch asked for");
        let root_id = h.engine.index.lookup(&h.root).unwrap();
        let sub_id = h.engine.index.lookup(&h.root.join("sub")).unwrap();
        assert!(h.engine.polls.contains(root_id) && h.engine.polls.contains(sub_id));
        let st = h.status("s");
        assert_eq!(st.phase, Phase::Watching, "polled by choice: {st:?}");
        assert_eq!((st.polled_dirs, st.watched_dirs), (0, 2), "{st:?}");
        assert_eq!(
            st.roots.iter().map(ToString::to_string).collect::<Vec<_>>(),
            vec![format!("poll every 30ms: chosen at {}", h.root.display())]
        );
        std::fs::write(h.root.join("new"), "n").unwrap();
        std::fs::write(h.root.join("old"), "longer").unwrap();
        std::fs::remove_file(h.root.join("gone")).unwrap();
        std::fs::write(h.root.join("sub/f"), "f").unwrap();
        assert_eq!(h.engine.next_deadline(), Some(h.clock.now() + EVERY));
        h.after(EVERY - MS);
        h.after(10 * MS);
        assert!(h.batches().is_empty(), "nothing before the interval");
        h.after(EVERY);
        h.after(10 * MS);
        let b = h.batches();
        assert_eq!(
            h.names_of(&b),
            vec![
                ("gone".into(), ChangeKind::Removed),
                ("new".into(), ChangeKind::Created),
                ("old".into(), ChangeKind::Modified),
                ("sub/f".into(), ChangeKind::Created),
            ]
        );
        // The next polls find nothing new.
        h.after(EVERY);
        h.after(EVERY);
        assert!(h.batches().is_empty(), "reported once");
        assert_eq!(h.fake.calls(), 0);
        assert!(h.engine.check_invariants().is_empty());
    }

    /// A directory replaced by another at its path is covered again from
    /// the new one; one that is gone leaves the index, and what it held is
    /// reported removed, once. A directory renamed within the tree is
    /// looked at at its new path.
    #[test]
    fn a_directory_replaced_gone_or_renamed_is_followed() {
        let mut h = polling();
        let out = h.root.parent().unwrap().join("out");
        let (sub, z) = (h.root.join("sub"), h.root.join("z"));
        std::fs::create_dir(&sub).unwrap();
        std::fs::create_dir(&z).unwrap();
        std::fs::write(sub.join("f"), "f").unwrap();
        h.apply("s", h.spec().quiet_window(10 * MS));
        // Replaced: the old one kept elsewhere (its inode not reused).
        std::fs::rename(&sub, &out).unwrap();
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("g"), "g").unwrap();
        // Renamed within the tree, and written at its new path.
        let a = h.root.join("a");
        std::fs::rename(&z, &a).unwrap();
        std::fs::write(a.join("h"), "h").unwrap();
        h.after(EVERY);
        h.after(10 * MS);
        let got = h.changes();
        for want in [
            ("sub/f", ChangeKind::Removed),
            ("sub/g", ChangeKind::Created),
            ("z", ChangeKind::Removed),
            ("a", ChangeKind::Created),
            ("a/h", ChangeKind::Created),
        ] {
            assert!(
                got.contains(&(want.0.into(), want.1)),
                "{want:?} in {got:?}"
            );
        }
        // What happens in the old directory, now outside, is not reported.
        std::fs::write(out.join("late"), "x").unwrap();
        // Gone.
        std::fs::remove_dir_all(&sub).unwrap();
        h.after(EVERY);
        h.after(10 * MS);
        let got = h.changes();
        assert_eq!(
            got,
            vec![
                ("sub".into(), ChangeKind::Removed),
                ("sub/g".into(), ChangeKind::Removed),
            ]
        );
        assert!(h.engine.index.lookup(&sub).is_none());
        h.after(EVERY);
        assert!(h.batches().is_empty(), "reported once");
        assert!(h.engine.check_invariants().is_empty());
    }

    /// A sync barrier polls every directory of the spec after its cookie
    /// exists: a change made just before it is delivered when it passes,
    /// without waiting for the interval.
    #[test]
    fn a_sync_sees_every_change_made_before_it() {
        let mut h = polling();
        std::fs::create_dir(h.root.join("sub")).unwrap();
        let long = Duration::from_secs(5);
        h.apply("s", h.spec().quiet_window(long).max_delay(long));
        let f = h.root.join("sub/f");
        std::fs::write(&f, "x").unwrap();
        let answer = h.sync("s");
        assert_eq!(answer.try_recv(), Ok(true), "passed, before any interval");
        assert_eq!(h.kinds_of(&f), vec![ChangeKind::Created]);
        let left = std::fs::read_dir(&h.root)
            .unwrap()
            .flatten()
            .filter(|e| crate::fs::is_cookie(&e.file_name()))
            .count();
        assert_eq!(left, 0, "its cookie is removed, and never reported");
    }
}
