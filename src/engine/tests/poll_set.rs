//! The poll set on a manual clock: schedules, looks under way, hung
//! looks, the memory a polled directory costs.

use super::*;
use std::ffi::{OsStr, OsString};

const I: Duration = Duration::from_millis(100);
const MS: Duration = Duration::from_millis(1);

/// A look to apply whole.
const APPLY: Finding = Finding::Apply(BTreeSet::new());

#[test]
fn schedule_arms_when_added_then_runs_every_interval() {
    let t0 = Instant::now();
    let mut p = PollSet::new(Some(I));
    assert!(p.due(t0).1.is_empty(), "nothing polled");
    assert_eq!(p.next_deadline(), None);
    p.add(1, Why::Limit, t0);
    assert_eq!(p.next_deadline(), Some(t0 + I), "added: scheduled");
    assert!(p.due(t0 + I - MS).0.is_empty());
    let (ids, due) = p.due(t0 + I);
    assert_eq!((ids, due.clone()), (vec![1], vec![I]));
    p.rearm(&due, t0 + I + 5 * MS);
    assert_eq!(p.next_deadline(), Some(t0 + 2 * I + 5 * MS));
    p.remove(1);
    p.rearm(&[], t0 + 3 * I);
    assert_eq!(p.next_deadline(), None, "empty: no timer");
    assert!(p.due(t0 + 10 * I).0.is_empty());
}

#[test]
fn each_interval_keeps_its_own_schedule() {
    let t0 = Instant::now();
    let mut p = PollSet::new(Some(I));
    assert!(p.choose(1, 10 * MS, t0), "newly polled");
    assert!(!p.choose(1, 10 * MS, t0), "already");
    p.add(2, Why::Limit, t0);
    p.choose(3, 30 * MS, t0);
    let (ids, due) = p.due(t0 + 10 * MS);
    assert_eq!((ids, due.clone()), (vec![1], vec![10 * MS]));
    p.rearm(&due, t0 + 10 * MS);
    assert_eq!(p.next_deadline(), Some(t0 + 20 * MS));
    let (ids, due) = p.due(t0 + 30 * MS);
    assert_eq!(ids, vec![1, 3], "both short intervals are due");
    p.rearm(&due, t0 + 30 * MS);
    assert_eq!(p.due(t0 + I).0, vec![1, 2, 3]);
    // Polled both ways: the shorter interval.
    p.choose(2, 10 * MS, t0);
    assert_eq!(p.dirs[&2].every(I), 10 * MS);
    // An interval nobody uses any more is dropped at the next rearm.
    p.unchoose(3);
    p.rearm(&[], t0 + I);
    assert!(!p.next.contains_key(&(30 * MS)));
}

#[test]
fn interval_has_a_floor() {
    assert_eq!(PollSet::new(Some(Duration::ZERO)).interval(), MS);
    assert_eq!(PollSet::new(None).interval(), DEFAULT_POLL_INTERVAL);
}

#[test]
fn link_polling_wins_and_is_not_moved_back() {
    let t0 = Instant::now();
    let mut p = PollSet::new(Some(I));
    p.add(1, Why::Limit, t0);
    p.add(2, Why::Link, t0);
    p.add(1, Why::Link, t0);
    p.add(3, Why::Limit, t0);
    p.add(2, Why::Limit, t0);
    assert_eq!(p.limit_ids(), vec![3]);
    assert_eq!(p.count(|_| true), (3, 2));
    assert_eq!(p.count(|id| id == 3), (1, 0));
}

#[test]
fn chosen_polling_is_not_counted_as_degraded_and_outlives_a_watch() {
    let t0 = Instant::now();
    let mut p = PollSet::new(Some(I));
    p.choose(1, I, t0);
    assert_eq!(p.count(|_| true), (0, 0), "polled by choice: not instead");
    p.add(1, Why::Limit, t0);
    assert_eq!(p.count(|_| true), (1, 0));
    p.watched(1);
    assert!(
        p.contains(1) && p.dirs[&1].chosen.is_some(),
        "still polled by choice"
    );
    assert_eq!(p.count(|_| true), (0, 0));
    p.unchoose(1);
    assert!(!p.contains(1), "nothing keeps it polled");
    // And the other way round.
    p.add(2, Why::Limit, t0);
    p.choose(2, I, t0);
    p.unchoose(2);
    assert!(p.contains(2), "still polled for want of a watch");
    p.watched(2);
    assert!(!p.contains(2));
}

#[test]
fn pictures_survive_re_adding() {
    let t0 = Instant::now();
    let mut p = PollSet::new(Some(I));
    p.add(1, Why::Limit, t0);
    let sig = fs::Sig {
        kind: crate::batch::change::FileType::File,
        size: 1,
        mtime: (2, 3),
        ctime: (4, 5),
        ino: 6,
    };
    p.set_picture(1, Picture::of(vec![(OsString::from("f"), sig)]));
    p.add(1, Why::Limit, t0);
    p.choose(1, I, t0);
    assert_eq!(p.picture(1).unwrap().get(OsStr::new("f")), Some(sig));
    p.remove(1);
    assert!(p.picture(1).is_none());
    p.set_picture(1, Picture::default()); // not polled: ignored
    assert!(!p.contains(1));
}

#[test]
fn changes_are_noted_for_status() {
    let t0 = Instant::now();
    let mut p = PollSet::new(Some(I));
    assert!(!p.take_changed());
    p.add(1, Why::Limit, t0);
    assert!(p.take_changed());
    assert!(!p.take_changed());
    p.note_limit("ENOSPC".into());
    assert!(p.take_changed());
    p.note_limit("ENOSPC".into());
    assert!(!p.take_changed(), "same reason: no change");
    p.remove(7);
    assert!(!p.take_changed(), "removing nothing changes nothing");
    p.choose(2, I, t0);
    assert!(p.take_changed());
    p.choose(2, I, t0);
    assert!(!p.take_changed(), "same interval: no change");
}

/// The scanner's looks: one under way per directory, a barrier's look
/// following it, a look made again after the engine looked at a name,
/// the engine's own read overtaking them, and a directory polled
/// again under the same id not holding up an older barrier.
#[test]
fn looks_are_one_at_a_time_and_barriers_wait_for_the_right_one() {
    let t0 = Instant::now();
    let mut p = PollSet::new(Some(I));
    assert_eq!(p.issue(1), None, "not polled");
    p.add(1, Why::Limit, t0);
    let (a, now) = p.issue(1).unwrap();
    assert!(now && p.in_flight(1));
    // A barrier meanwhile: a follow-up, not a second look under way.
    let (b, now) = p.issue(1).unwrap();
    assert!(!now && b > a);
    assert_eq!(p.issue(1), Some((b, false)), "one follow-up at most");
    assert!(!p.done(1, a) && !p.done(1, b));
    assert_eq!(
        p.take_finding(1, b, false),
        Finding::Drop,
        "not the look under way"
    );
    assert_eq!(p.take_finding(1, a, false), APPLY);
    assert!(p.done(1, a) && !p.done(1, b));
    assert_eq!(p.follow_up(1), Some(b), "the barrier's look goes now");
    assert_eq!(p.follow_up(1), None);
    // The engine looks at a name while `b` is under way: made again.
    p.touched(1, OsStr::new("a"));
    let Finding::Again(c) = p.take_finding(1, b, false) else {
        panic!("a look older than the engine's own is made again");
    };
    assert!(c > b && p.in_flight(1) && !p.done(1, b));
    assert_eq!(p.take_finding(1, c, false), APPLY);
    assert!(p.done(1, b), "the look made again stands for the barrier's");
    // The engine's own read overtakes a look under way and one asked for.
    let (d, _) = p.issue(1).unwrap();
    let (e, _) = p.issue(1).unwrap();
    p.outdate(1);
    assert!(p.done(1, d) && p.done(1, e) && !p.in_flight(1));
    assert_eq!(
        p.take_finding(1, d, false),
        Finding::Drop,
        "older than the read"
    );
    // Gone, then polled again under the same id: older tokens are done.
    let (f, _) = p.issue(1).unwrap();
    p.remove(1);
    assert!(p.done(1, f), "not polled: nothing to wait for");
    p.add(1, Why::Limit, t0);
    assert!(
        p.done(1, f),
        "a new directory under the id holds up no older barrier"
    );
}

/// A directory with an OS watch too: its events go on while a look is
/// under way, and the look is applied but for the names they looked at
/// (never made again: a directory with steady events is still polled).
#[test]
fn a_look_at_a_watched_directory_is_applied_but_for_the_names_looked_at_meanwhile() {
    let t0 = Instant::now();
    let mut p = PollSet::new(Some(I));
    p.choose(1, I, t0);
    let (a, _) = p.issue(1).unwrap();
    p.touched(1, OsStr::new("x"));
    p.touched(1, OsStr::new("y"));
    p.touched(1, OsStr::new("x"));
    p.touched(2, OsStr::new("z")); // no look under way there
    let names: BTreeSet<OsString> = ["x", "y"].into_iter().map(OsString::from).collect();
    assert_eq!(p.take_finding(1, a, true), Finding::Apply(names));
    assert!(p.done(1, a) && !p.in_flight(1));
    // The next look starts with nothing looked at.
    let (b, _) = p.issue(1).unwrap();
    assert_eq!(p.take_finding(1, b, true), APPLY);
}

/// Looks waiting for room at the scanner go in the order issued; one
/// overtaken meanwhile (the engine read the directory, or it is polled
/// no more) is left out; a directory with no look out keeps nothing.
/// A look under way longer than the deadline is hung (its storage
/// not answering) until it comes back; the set's changes change the
/// statuses; it is looked at a quarter of the deadline apart.
#[test]
fn looks_under_way_past_the_deadline_are_hung() {
    let t0 = Instant::now();
    let mut p = PollSet::new(Some(I));
    p.set_deadline(Duration::from_secs(8));
    let s = |n| t0 + Duration::from_secs(n);
    for id in 1..=2 {
        p.add(id, Why::Limit, t0);
    }
    let (a, _) = p.issue(1).unwrap();
    p.wait(1, a, s(0));
    let (b, _) = p.issue(2).unwrap();
    p.wait(2, b, s(5));
    p.check_hung(s(7));
    assert!(p.hung().0.is_empty());
    assert!(p.next_deadline().unwrap() <= s(9), "looked at again by 9 s");
    p.check_hung(s(8));
    assert!(p.hung().0.is_empty(), "checked less than 2 s ago");
    p.check_hung(s(9));
    assert_eq!(p.hung().0.iter().copied().collect::<Vec<_>>(), [1]);
    assert!(p.take_changed());
    assert_eq!(p.take_finding(1, a, false), APPLY);
    p.check_hung(s(13));
    assert_eq!(p.hung().0.iter().copied().collect::<Vec<_>>(), [2]);
    assert!(p.take_changed());
    assert_eq!(p.take_finding(2, b, false), APPLY);
    p.check_hung(s(15));
    assert!(p.hung().0.is_empty() && p.take_changed());
}

#[test]
fn looks_wait_for_the_scanner_in_order_and_overtaken_ones_drop_out() {
    assert!(
        size_of::<Polled>() <= 16,
        "a polled directory costs the set 16 bytes beside its picture"
    );
    #[cfg(target_os = "linux")]
    assert!(
        size_of::<Looking>() <= 72,
        "a look issued costs 72 bytes while it is out (a round of a million)"
    );
    let t0 = Instant::now();
    let mut p = PollSet::new(Some(I));
    for id in 1..=4 {
        p.add(id, Why::Limit, t0);
        let (t, now) = p.issue(id).unwrap();
        assert!(now);
        p.wait(id, t, t0);
    }
    p.outdate(2);
    p.remove(3);
    assert_eq!(p.waiting_file_systems(), vec![(0, None)], "not known yet");
    let (a, _) = p.next_waiting(0).unwrap();
    let (b, _) = p.next_waiting(0).unwrap();
    assert_eq!((a, b), (1, 4), "2 was read by the engine, 3 went");
    assert_eq!(p.next_waiting(0), None);
    assert!(p.waiting_file_systems().is_empty());
    assert!(p.looks.len() == 2 && p.in_flight(1) && p.in_flight(4));
    let (t1, t4) = (p.looks[&1].issued, p.looks[&4].issued);
    assert_eq!(p.take_finding(1, t1, false), APPLY);
    assert_eq!(p.take_finding(4, t4, false), APPLY);
    assert!(p.looks.is_empty(), "nothing kept once every look is done");
    assert!(p.done(1, t1) && p.done(4, t4));
}

/// Each file system's looks wait in a queue of their own (a full lane,
/// its file system hung, holds up no other's), named by the key of the
/// file systems the last look touched; one not looked at yet waits with
/// the unknown.
#[test]
fn looks_wait_per_file_system_as_the_last_look_found_it() {
    let t0 = Instant::now();
    let mut p = PollSet::new(Some(I));
    for id in 1..=3 {
        p.add(id, Why::Limit, t0);
    }
    p.seen_on(1, Some(70));
    p.seen_on(2, Some(80));
    p.seen_on(2, None);
    p.seen_on(9, Some(90)); // not polled: nothing kept
    assert_eq!(
        (p.fs_key(1), p.fs_key(2), p.fs_key(3)),
        (Some(70), Some(80), None)
    );
    for id in 1..=3 {
        let (t, _) = p.issue(id).unwrap();
        p.wait(id, t, t0);
    }
    assert_eq!(
        p.waiting_file_systems(),
        vec![(0, None), (1, Some(70)), (2, Some(80))]
    );
    assert_eq!(p.next_waiting(2).map(|w| w.0), Some(2));
    assert_eq!(p.next_waiting(2), None);
    assert_eq!(p.next_waiting(1).map(|w| w.0), Some(1));
    assert_eq!(p.next_waiting(0).map(|w| w.0), Some(3));
    assert!(p.waiting_file_systems().is_empty() || p.next_waiting(0).is_none());
    // A directory that moved to another file system (a mount over it).
    p.seen_on(1, Some(80));
    assert_eq!(p.fs_key(1), Some(80));
    assert_eq!(p.keys.len(), 2, "one number per key");
}
