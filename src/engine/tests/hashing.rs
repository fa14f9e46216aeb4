//! Engine tests of content hashes read off the engine's thread
//! (`skip_same_content`): the scanner holds the reads until the test
//! runs them, so that a batch waits for its hashes (a hold, in the
//! status) while the engine goes on, is delivered once they are in, and
//! without one that did not come by the storage deadline (after the last
//! that came); a spec is `Starting` until its start's hashes are in; a
//! sync is answered once its batch is out.

use super::*;
use crate::batch::content::ContentHash;
use crate::scanner::{Scanner, read_files};
use crate::status::HoldReason;

const DEADLINE: Duration = Duration::from_secs(2);

/// A harness whose scanner holds every read, and a spec `s` comparing
/// contents of the root, which holds `a` ("a").
fn hashing() -> Harness {
    let mut h = harness(Config {
        storage_deadline: Some(DEADLINE),
        ..Config::default()
    });
    std::fs::write(h.root.join("a"), "a").unwrap();
    h.engine.scanner = Scanner::held();
    h.apply("s", h.spec().quiet_window(10 * MS).skip_same_content(true));
    h
}

impl Harness {
    /// Runs the reads the scanner holds and hands back what they read.
    fn read_held(&mut self) -> usize {
        let jobs = self.engine.scanner.take_held_files();
        let n = jobs.len();
        self.engine.handle(Msg::Read(read_files(jobs)));
        self.engine.end_pass();
        n
    }

    fn hashing_hold(&self) -> Option<usize> {
        self.status("s").holds.iter().find_map(|h| match h.reason {
            HoldReason::Hashing { files } => Some(files),
            _ => None,
        })
    }
}

/// The start's reads: `Starting` until they are in; then a write of the
/// same bytes is no change, and new bytes are, once their hash is read.
#[test]
fn a_batch_waits_for_its_hashes_not_the_engine() {
    let mut h = hashing();
    assert_eq!(h.status("s").phase, Phase::Starting, "its start's hashes");
    assert_eq!(h.read_held(), 1);
    assert_eq!(h.status("s").phase, Phase::Watching);

    std::fs::write(h.root.join("a"), "a").unwrap();
    let root = h.root.clone();
    h.event(&root, "a", Hint::Modified);
    h.write("b");
    h.after(10 * MS);
    assert!(h.batches().is_empty(), "waiting for its hashes");
    assert_eq!(h.hashing_hold(), Some(2), "a hold, in the status");
    // The engine goes on: another spec's batch flows meanwhile.
    let other = h.root.join("sub");
    std::fs::create_dir(&other).unwrap();
    h.upsert(
        "t",
        Generation(1),
        WatchSpec::new([&other]).quiet_window(10 * MS),
    );
    h.engine.end_pass();
    std::fs::write(other.join("x"), "x").unwrap();
    h.event(&other, "x", Hint::Created);
    h.after(10 * MS);
    let b = h.batches();
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].name, "t");
    // The spec's next batch waits behind the one reading.
    h.write("c");
    h.after(10 * MS);
    assert!(h.batches().is_empty());
    assert_eq!(h.read_held(), 2);
    h.after(MS);
    let b = h.batches();
    assert_eq!(b.len(), 1, "its next batch waits for its own hashes: {b:?}");
    let got: Vec<(String, Option<ContentHash>)> = b[0]
        .changes
        .iter()
        .map(|c| (c.path.file_name().unwrap().to_string_lossy().into(), c.hash))
        .collect();
    assert_eq!(
        got,
        [("b".into(), Some(ContentHash::of(b"b")))],
        "a: the same bytes, left out; b with its hash"
    );
    assert_eq!(h.read_held(), 1, "c's");
    h.after(MS);
    assert_eq!(
        kinds(&h.batches(), &h.root.join("c")),
        [ChangeKind::Created]
    );
    assert_eq!(h.hashing_hold(), None);
}

/// A hash that does not come (a hung mount): the batch goes at the
/// storage deadline after the last hash that came, that file without a
/// hash (reported, never lost).
#[test]
fn a_hash_that_does_not_come_is_a_change_reported_without_one() {
    let mut h = hashing();
    h.read_held();
    let (a, b) = (h.write("x1"), h.write("x2"));
    h.after(10 * MS);
    let jobs = h.engine.scanner.take_held_files();
    assert_eq!(jobs.len(), 2);
    let t0 = h.clock.now();
    assert_eq!(h.engine.next_deadline(), Some(t0 + DEADLINE));
    // One comes after a second: the deadline moves with it.
    h.after(Duration::from_secs(1));
    let first: Vec<_> = read_files(jobs)
        .into_iter()
        .filter(|f| f.path == a)
        .collect();
    h.engine.handle(Msg::Read(first));
    h.engine.end_pass();
    assert!(h.batches().is_empty());
    assert_eq!(
        h.engine.next_deadline(),
        Some(h.clock.now() + DEADLINE),
        "a storage deadline after the last hash that came"
    );
    h.after(DEADLINE - MS);
    assert!(h.batches().is_empty());
    h.after(MS);
    let got = h.batches();
    assert_eq!(got.len(), 1, "given up at the deadline");
    let hashes: Vec<(PathBuf, Option<ContentHash>)> = got[0]
        .changes
        .iter()
        .map(|c| (c.path.clone(), c.hash))
        .collect();
    assert_eq!(
        hashes,
        [(a, Some(ContentHash::of(b"x1"))), (b, None)],
        "x2 reported without a hash"
    );
    assert_eq!(h.hashing_hold(), None);
}

/// A sync of a spec whose batch waits for its hashes is answered once the
/// batch is out.
#[test]
fn a_sync_is_answered_once_its_batch_is_out() {
    let mut h = hashing();
    h.read_held();
    h.write("n");
    let (reply, answer) = bounded(1);
    h.engine.handle(Msg::Sync {
        name: "s".into(),
        deadline: h.clock.now() + Duration::from_secs(10),
        reply,
    });
    let cookie = h.root_cookie();
    let root = h.root.clone();
    h.event(&root, cookie.to_str().unwrap(), Hint::Created);
    h.engine.end_pass();
    assert!(answer.try_recv().is_err(), "its batch reads its hashes");
    assert!(h.batches().is_empty());
    h.read_held();
    assert_eq!(answer.try_recv(), Ok(true));
    assert_eq!(
        kinds(&h.batches(), &h.root.join("n")),
        [ChangeKind::Created]
    );
}
