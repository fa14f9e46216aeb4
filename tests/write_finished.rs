//! `WatchOptions::write_finished`: a file written in chunks, with pauses
//! longer than the quiet window, is reported once, after its writer is
//! done, with its final size; a spec without the option (the control,
//! on the same tree) reports it while half-written. A file still being
//! written when the batch's maximum delay is up moves to a later batch,
//! and the rest of that batch is not held for it. A 200 MB file copied
//! in slowly is reported once, complete.
//!
//! The pauses between writes are the stimulus (a slow copy); what is
//! asserted is waited for as a condition, with a deadline.

mod common;

use std::fs;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use specwatch::{Backend, Change, ChangeKind, WatchSpec};

both_backends!(
    a_slow_write_is_reported_once_complete,
    a_write_longer_than_max_delay_moves_to_a_later_batch,
    a_200_mb_slow_copy_is_reported_once_complete
);

/// The stability interval: longer than the writers' pauses here.
const INTERVAL: Duration = Duration::from_millis(500);

/// The writers' pause between two chunks: longer than the quiet window
/// (10 ms), shorter than the interval.
const PAUSE: Duration = Duration::from_millis(100);

/// Writes `chunks` chunks of `size` bytes into `path` through one open
/// handle, pausing `pause` after each but the last; closes it. Returns
/// the file's final size.
fn slow_write(path: &Path, chunks: usize, size: usize, pause: Duration) -> u64 {
    let mut f = fs::File::create(path).unwrap();
    let chunk = vec![b'x'; size];
    for i in 0..chunks {
        f.write_all(&chunk).unwrap();
        f.flush().unwrap();
        if i + 1 < chunks {
            std::thread::sleep(pause);
        }
    }
    drop(f);
    (chunks * size) as u64
}

/// The changes `spec` reported of `path`.
fn of(c: &Collector, spec: &str, path: &Path) -> Vec<Change> {
    c.changes(spec)
        .into_iter()
        .filter(|ch| ch.path == path)
        .collect()
}

fn size(ch: &Change) -> Option<u64> {
    ch.meta.as_ref().map(|m| m.size)
}

/// A spec on `root` that waits for writers, with metadata.
fn held(root: &Path) -> WatchSpec {
    spec(&[root])
        .write_finished(INTERVAL)
        .metadata(true)
        .max_delay(Duration::from_secs(10))
}

fn a_slow_write_is_reported_once_complete(b: Backend) {
    let d = tmp();
    let root = d.path();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "held", held(root));
    start(&m, "plain", spec(&[root]).metadata(true));

    let file = root.join("big.bin");
    let total = slow_write(&file, 8, 64 * 1024, PAUSE);

    c.wait("the held spec to report big.bin at its final size", |c| {
        of(c, "held", &file)
            .iter()
            .any(|ch| size(ch) == Some(total))
    });
    // Everything queued before the marker is in: nothing more of it.
    c.barrier("held", root);
    let held = of(&c, "held", &file);
    assert_eq!(
        held.iter()
            .map(|ch| (ch.kind, size(ch)))
            .collect::<Vec<_>>(),
        [(ChangeKind::Created, Some(total))],
        "reported once, complete"
    );
    // The control: the same writes, reported as they came.
    c.wait("the plain spec to report big.bin at its final size", |c| {
        of(c, "plain", &file)
            .iter()
            .any(|ch| size(ch) == Some(total))
    });
    let plain = of(&c, "plain", &file);
    assert!(
        plain.len() > 1 && size(&plain[0]) < Some(total),
        "without the option the file is reported half-written: {:?}",
        plain
            .iter()
            .map(|ch| (ch.kind, size(ch)))
            .collect::<Vec<_>>()
    );
}

fn a_write_longer_than_max_delay_moves_to_a_later_batch(b: Backend) {
    let d = tmp();
    let root = d.path();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    let max_delay = Duration::from_millis(200);
    start(&m, "held", held(root).max_delay(max_delay));

    let other = root.join("other.txt");
    fs::write(&other, "done at once").unwrap();
    let file = root.join("slow.bin");
    let started = Instant::now();
    // 1.4 s of writing: longer than the maximum delay and the interval.
    let total = slow_write(&file, 15, 4096, PAUSE);
    let took = started.elapsed();

    c.wait("slow.bin at its final size", |c| {
        of(c, "held", &file)
            .iter()
            .any(|ch| size(ch) == Some(total))
    });
    c.barrier("held", root);
    let batches = c.batches["held"].clone();
    let with = |p: &Path| {
        batches
            .iter()
            .position(|b| b.changes.iter().any(|ch| ch.path == p))
    };
    let (o, s) = (with(&other).unwrap(), with(&file).unwrap());
    assert!(
        o < s,
        "other.txt (batch {o}) is not held for slow.bin (batch {s}), written for {took:?}"
    );
    let slow = of(&c, "held", &file);
    assert_eq!(
        slow.iter()
            .map(|ch| (ch.kind, size(ch)))
            .collect::<Vec<_>>(),
        [(ChangeKind::Created, Some(total))],
        "reported once, complete, though written longer than max_delay ({took:?})"
    );
}

/// 200 MB, copied in 50 chunks of 4 MB with a pause after each: a few
/// seconds. The spec's maximum delay is the default (1 s): the file's
/// change moves from batch to batch until its writer is done.
fn a_200_mb_slow_copy_is_reported_once_complete(b: Backend) {
    let d = tmp();
    let root = d.path();
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(
        &m,
        "held",
        spec(&[root]).write_finished(INTERVAL).metadata(true),
    );
    let file = root.join("copy.bin");
    let started = Instant::now();
    let total = slow_write(&file, 50, 4 << 20, Duration::from_millis(40));
    let wrote = started.elapsed();
    assert_eq!(total, 200 << 20);
    c.wait("copy.bin at 200 MB", |c| {
        of(c, "held", &file)
            .iter()
            .any(|ch| size(ch) == Some(total))
    });
    let reported = started.elapsed();
    c.barrier("held", root);
    let copies = of(&c, "held", &file);
    assert_eq!(
        copies
            .iter()
            .map(|ch| (ch.kind, size(ch)))
            .collect::<Vec<_>>(),
        [(ChangeKind::Created, Some(total))],
        "reported once, complete"
    );
    note(&format!(
        "200 MB slow copy on {b:?}: written in {wrote:?}, reported at {reported:?}"
    ));
}
