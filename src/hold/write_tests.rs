//! `WriteHold` on a manual clock: what is held, until when, what moves
//! to the next batch. No file system: the looks are given.

use super::*;
use crate::batch::change::{ChangeKind, FileType};

const I: Duration = Duration::from_millis(100);

fn ms(t0: Instant, n: u64) -> Instant {
    t0 + Duration::from_millis(n)
}

fn meta(size: u64, secs: u64) -> Meta {
    Meta {
        size,
        mtime: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs)),
        inode: Some(1),
    }
}

fn change(path: &str, kind: ChangeKind) -> Change {
    Change::new(path, kind, FileType::File)
}

fn paths(changes: &[Change]) -> Vec<&str> {
    changes.iter().map(|c| c.path.to_str().unwrap()).collect()
}

#[test]
fn nothing_written_nothing_held() {
    let t0 = Instant::now();
    let h = WriteHold::new(I);
    assert!(!h.busy(t0));
    assert_eq!(h.deadline(ms(t0, 50), ms(t0, 1000)), ms(t0, 50));
    assert!(h.looks_due(ms(t0, 500)).is_empty());
}

#[test]
fn a_closed_file_is_finished_at_once() {
    let t0 = Instant::now();
    let mut h = WriteHold::new(I);
    h.wrote(t0, Path::new("/a"), Some(&meta(10, 1)), None);
    assert!(h.busy(t0));
    // Quiet window up at 50: the batch waits for the look at 100.
    assert_eq!(h.deadline(ms(t0, 50), ms(t0, 1000)), ms(t0, 100));
    h.finished(Path::new("/a"));
    assert!(!h.busy(ms(t0, 1)));
    assert_eq!(h.deadline(ms(t0, 50), ms(t0, 1000)), ms(t0, 50));
}

#[test]
fn a_file_is_stable_once_a_look_sees_its_last_change() {
    let t0 = Instant::now();
    let mut h = WriteHold::new(I);
    let a = Path::new("/a");
    h.wrote(t0, a, Some(&meta(10, 1)), None);
    assert!(h.looks_due(ms(t0, 99)).is_empty());
    assert_eq!(h.looks_due(ms(t0, 100)), vec![PathBuf::from("/a")]);
    // Written since: it grew. Another interval.
    h.looked(ms(t0, 100), wall(1), a, Some(&meta(20, 2)));
    assert!(h.busy(ms(t0, 100)));
    assert!(h.looks_due(ms(t0, 150)).is_empty());
    assert_eq!(h.deadline(ms(t0, 50), ms(t0, 1000)), ms(t0, 200));
    // The same: finished.
    h.looked(ms(t0, 200), wall(2), a, Some(&meta(20, 2)));
    assert!(!h.busy(ms(t0, 200)));
    assert!(h.looks_due(ms(t0, 300)).is_empty());
}

/// The wall clock at `secs` seconds after the epoch (plus a little: a
/// file modified at `secs` was modified a moment ago).
fn wall(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(10)
}

/// A file found by reading a directory (no `stat` then) is finished at
/// its first look if it was last modified an interval ago or more; one
/// modified since is waited for.
#[test]
fn a_file_not_stated_at_its_change_is_judged_by_its_mtime() {
    let t0 = Instant::now();
    let mut h = WriteHold::new(I);
    let a = Path::new("/a");
    h.wrote(t0, a, None, None);
    h.looked(ms(t0, 100), wall(1), a, Some(&meta(20, 1)));
    assert!(h.busy(ms(t0, 100)), "modified 10 ms before the look");
    h.looked(ms(t0, 200), wall(4), a, Some(&meta(30, 4)));
    assert!(h.busy(ms(t0, 200)), "written since: another interval");
    h.wrote(t0, a, None, None);
    h.looked(ms(t0, 100), wall(5), a, Some(&meta(20, 1)));
    assert!(!h.busy(ms(t0, 100)), "modified 4 s before the look");
}

#[test]
fn a_file_gone_at_its_look_is_not_waited_for() {
    let t0 = Instant::now();
    let mut h = WriteHold::new(I);
    h.wrote(t0, Path::new("/a"), Some(&meta(10, 1)), None);
    h.looked(ms(t0, 100), wall(1), Path::new("/a"), None);
    assert!(!h.busy(ms(t0, 100)));
}

#[test]
fn each_write_starts_the_interval_again_and_reopens_a_closed_file() {
    let t0 = Instant::now();
    let mut h = WriteHold::new(I);
    let a = Path::new("/a");
    h.wrote(t0, a, Some(&meta(10, 1)), None);
    h.finished(a);
    h.wrote(ms(t0, 80), a, Some(&meta(20, 2)), None);
    assert!(h.busy(ms(t0, 80)));
    assert!(h.looks_due(ms(t0, 150)).is_empty());
    assert_eq!(h.looks_due(ms(t0, 180)).len(), 1);
}

#[test]
fn a_removed_file_is_forgotten() {
    let t0 = Instant::now();
    let mut h = WriteHold::new(I);
    h.wrote(t0, Path::new("/a"), None, None);
    h.removed(Path::new("/a"));
    assert!(!h.busy(t0));
}

#[test]
fn polled_files_are_stable_after_two_poll_intervals_of_silence() {
    let t0 = Instant::now();
    let mut h = WriteHold::new(I);
    // Polled every 80 ms: 160 ms of silence (more than the interval).
    h.wrote(
        t0,
        Path::new("/p"),
        Some(&meta(1, 1)),
        Some(ms(t0, 80) - t0),
    );
    assert!(h.looks_due(ms(t0, 1000)).is_empty(), "the polls look");
    assert!(h.busy(ms(t0, 159)));
    assert!(!h.busy(ms(t0, 160)));
    assert_eq!(h.deadline(ms(t0, 50), ms(t0, 1000)), ms(t0, 160));
    // Polled every 10 ms: the interval decides.
    h.wrote(t0, Path::new("/q"), None, Some(Duration::from_millis(10)));
    assert!(h.busy(ms(t0, 99)));
}

#[test]
fn the_batch_waits_at_most_its_maximum_delay() {
    let t0 = Instant::now();
    let mut h = WriteHold::new(I);
    h.wrote(ms(t0, 950), Path::new("/a"), None, None);
    assert_eq!(h.deadline(ms(t0, 960), ms(t0, 1000)), ms(t0, 1000));
}

#[test]
fn files_still_written_at_the_close_move_to_the_next_batch() {
    let t0 = Instant::now();
    let mut h = WriteHold::new(I);
    let (a, b) = (Path::new("/a"), Path::new("/b"));
    h.wrote(t0, a, Some(&meta(1, 1)), None);
    h.wrote(t0, b, Some(&meta(1, 1)), None);
    h.finished(b);
    let batch = vec![
        change("/a", ChangeKind::Created),
        change("/b", ChangeKind::Modified),
        change("/c", ChangeKind::Removed),
    ];
    let (out, carried) = h.carry(ms(t0, 1000), batch);
    assert_eq!(paths(&out), ["/b", "/c"]);
    assert_eq!(paths(&carried), ["/a"]);
    assert_eq!(carried[0].kind, ChangeKind::Created);
    // `/a` is still held, `/b` forgotten.
    assert!(h.busy(ms(t0, 1000)));
    h.finished(a);
    assert!(!h.busy(ms(t0, 1000)));
    let (out, carried) = h.carry(ms(t0, 1100), vec![change("/a", ChangeKind::Created)]);
    assert_eq!((paths(&out), carried.len()), (vec!["/a"], 0));
    assert!(h.files.is_empty());
}

#[test]
fn a_file_written_outside_the_batch_is_not_kept() {
    let t0 = Instant::now();
    let mut h = WriteHold::new(I);
    h.wrote(t0, Path::new("/gone"), None, None);
    let (out, carried) = h.carry(ms(t0, 1000), vec![]);
    assert!(out.is_empty() && carried.is_empty());
    assert!(h.files.is_empty());
}

#[test]
fn clear_forgets_everything() {
    let t0 = Instant::now();
    let mut h = WriteHold::new(I);
    h.wrote(t0, Path::new("/a"), None, None);
    h.clear();
    assert!(!h.busy(t0));
}
