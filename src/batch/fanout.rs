//! The delivery of [`Event`]s to subscribers without ever waiting for a
//! subscriber.
//!
//! Each subscriber has a bounded channel. When it is full, events go to the
//! subscriber's backlog instead, where change batches of the same spec and
//! generation are merged per path (so the backlog is bounded by the number
//! of distinct changed paths, not by the number of events) and only the
//! latest status snapshot of each spec is kept. The engine moves the backlog
//! into the channel as room appears.
//!
//! With the `stream` feature a subscriber may carry a `Wake`: the link to
//! an async reader (`stream.rs`). The engine wakes the reader's task after
//! every delivery into the channel (a send or a flush of the backlog) and
//! when it lets go of the subscriber, and stops sending once the reader is
//! gone, even while the channel is full.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use crossbeam_channel::{Sender, TrySendError};
#[cfg(feature = "stream")]
use std::sync::atomic::{AtomicBool, Ordering};
#[cfg(feature = "stream")]
use std::task::Waker;

use crate::batch::change::{Change, ChangeBatch};
use crate::batch::event::Event;

/// Combines two net changes of one path (`first` older) into one; `None`
/// when they cancel out (created, then removed). The metadata is the
/// newer's: what the path is after both.
pub(crate) fn merge(first: &Change, then: &Change) -> Option<Change> {
    let (before, _) = crate::batch::change::ends(first.kind, first.file_type);
    let (_, after) = crate::batch::change::ends(then.kind, then.file_type);
    let (kind, file_type) = crate::batch::change::net(before, after)?;
    Some(Change {
        path: then.path.clone(),
        kind,
        file_type,
        meta: then.meta.clone(),
        // (The content after both: the later one's.)
        hash: then.hash.filter(|_| kind.exists_after()),
        // (Where the later one's entry came from; the caller has made it
        // relative to the older batch: `from_before`.)
        from: then.from.clone().filter(|_| kind.exists_after()),
    })
}

/// Where an entry that a newer batch says came `from` was before an older
/// batch whose changes are `older`: `from` itself, unless that batch
/// created it or renamed something over it (then where that one came
/// from, if it says).
fn from_before(
    from: &std::path::Path,
    older: &HashMap<PathBuf, Change>,
) -> Option<Box<std::path::Path>> {
    match older.get(from) {
        Some(c) if c.kind == crate::batch::change::ChangeKind::Created || c.from.is_some() => {
            c.from.clone()
        }
        _ => Some(from.into()),
    }
}

/// Merged batches of one spec generation.
#[derive(Debug)]
struct Pending {
    template: Arc<ChangeBatch>,
    changes: HashMap<PathBuf, Change>,
}

impl Pending {
    fn from_batch(batch: Arc<ChangeBatch>) -> Pending {
        let changes = batch
            .changes
            .iter()
            .map(|c| (c.path.clone(), c.clone()))
            .collect();
        Pending {
            template: batch,
            changes,
        }
    }
}

#[derive(Debug)]
enum Entry {
    Changes(Pending),
    Status(Event),
    Deleted(String),
}

/// What a subscriber has not been able to take yet. Pure: no channel.
#[derive(Debug, Default)]
pub(crate) struct Backlog {
    entries: VecDeque<Entry>,
}

impl Backlog {
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Distinct paths held.
    pub(crate) fn paths(&self) -> usize {
        self.entries
            .iter()
            .map(|e| match e {
                Entry::Changes(p) => p.changes.len(),
                _ => 0,
            })
            .sum()
    }

    pub(crate) fn push(&mut self, event: Event) {
        match event {
            Event::Changes(batch) => self.push_batch(batch),
            Event::Status(s) => {
                let name = s.name.clone();
                // Only the latest snapshot matters; keep it after the changes
                // it describes.
                self.entries
                    .retain(|e| !matches!(e, Entry::Status(Event::Status(o)) if o.name == name));
                self.entries.push_back(Entry::Status(Event::Status(s)));
            }
            Event::Deleted(name) => self.entries.push_back(Entry::Deleted(name)),
        }
    }

    fn push_batch(&mut self, batch: Arc<ChangeBatch>) {
        // Merge into the latest pending batch of the same spec generation,
        // unless the spec was deleted after it.
        for e in self.entries.iter_mut().rev() {
            match e {
                Entry::Deleted(n) if *n == batch.name => break,
                Entry::Changes(p)
                    if p.template.name == batch.name
                        && p.template.generation == batch.generation =>
                {
                    // Renames of the newer batch, relative to the older one.
                    let froms: Vec<Option<Box<std::path::Path>>> = batch
                        .changes
                        .iter()
                        .map(|c| c.from.as_deref().and_then(|f| from_before(f, &p.changes)))
                        .collect();
                    for (c, from) in batch.changes.iter().zip(froms) {
                        let relative;
                        let c = if c.from.as_deref() == from.as_deref() {
                            c
                        } else {
                            relative = Change { from, ..c.clone() };
                            &relative
                        };
                        match p.changes.get(&c.path) {
                            Some(old) => match merge(old, c) {
                                Some(m) => {
                                    p.changes.insert(c.path.clone(), m);
                                }
                                None => {
                                    p.changes.remove(&c.path);
                                }
                            },
                            None => {
                                p.changes.insert(c.path.clone(), c.clone());
                            }
                        }
                    }
                    p.template = batch;
                    return;
                }
                _ => {}
            }
        }
        self.entries
            .push_back(Entry::Changes(Pending::from_batch(batch)));
    }

    /// Takes the oldest entry as an event (merged batches: the newest
    /// batch's seq and time, changes sorted by path; an empty merge is
    /// skipped).
    pub(crate) fn pop(&mut self) -> Option<Event> {
        loop {
            let e = self.entries.pop_front()?;
            return Some(match e {
                Entry::Changes(p) => {
                    if p.changes.is_empty() {
                        continue;
                    }
                    let t = &p.template;
                    Event::Changes(Arc::new(ChangeBatch::new(
                        t.name.clone(),
                        t.generation,
                        t.seq,
                        t.time,
                        p.changes.into_values(),
                    )))
                }
                Entry::Status(ev) => ev,
                Entry::Deleted(n) => Event::Deleted(n),
            });
        }
    }

    /// Puts an event that could not be sent back at the front.
    pub(crate) fn unpop(&mut self, event: Event) {
        match event {
            Event::Changes(b) => self
                .entries
                .push_front(Entry::Changes(Pending::from_batch(b))),
            Event::Deleted(n) => self.entries.push_front(Entry::Deleted(n)),
            other => self.entries.push_front(Entry::Status(other)),
        }
    }
}

/// Where an async reader of a subscriber's channel leaves its waker, and
/// whether either side has gone. Shared by the reader (`stream.rs`) and the
/// engine's [`Subscriber`]; a lock held for a few instructions only.
#[cfg(feature = "stream")]
#[derive(Debug, Default)]
pub(crate) struct Wake {
    waker: parking_lot::Mutex<Option<Waker>>,
    /// The reader was dropped: the engine should let go of the subscriber
    /// (its channel may be full, so a send would not tell).
    reader_gone: AtomicBool,
    /// The engine let go of the subscriber: nothing more will be sent.
    sender_gone: AtomicBool,
}

#[cfg(feature = "stream")]
impl Wake {
    /// The reader's side: wake `waker` at the next delivery. The reader
    /// must look at the channel again after this (a delivery just before
    /// found no waker to wake).
    pub(crate) fn register(&self, waker: &Waker) {
        let mut slot = self.waker.lock();
        match &*slot {
            Some(w) if w.will_wake(waker) => {}
            _ => *slot = Some(waker.clone()),
        }
    }

    /// The engine's side: something was delivered (or the subscriber is
    /// gone).
    fn wake(&self) {
        let waker = self.waker.lock().take();
        if let Some(w) = waker {
            w.wake();
        }
    }

    pub(crate) fn set_reader_gone(&self) {
        self.reader_gone.store(true, Ordering::SeqCst);
    }

    /// Whether the engine has let go: once it has, what is in the channel
    /// is all there will be.
    pub(crate) fn sender_gone(&self) -> bool {
        self.sender_gone.load(Ordering::SeqCst)
    }
}

/// One subscriber: a bounded channel and its backlog.
pub(crate) struct Subscriber {
    tx: Sender<Event>,
    backlog: Backlog,
    /// The async reader's link, for a stream.
    #[cfg(feature = "stream")]
    wake: Option<std::sync::Arc<Wake>>,
}

impl Subscriber {
    pub(crate) fn new(tx: Sender<Event>) -> Subscriber {
        Subscriber {
            tx,
            backlog: Backlog::default(),
            #[cfg(feature = "stream")]
            wake: None,
        }
    }

    /// A subscriber read by an async task, woken through `wake`.
    #[cfg(feature = "stream")]
    pub(crate) fn with_wake(tx: Sender<Event>, wake: Arc<Wake>) -> Subscriber {
        Subscriber {
            tx,
            backlog: Backlog::default(),
            wake: Some(wake),
        }
    }

    /// Whether the reader is known to be gone without trying to send (an
    /// async reader says so when dropped).
    fn reader_gone(&self) -> bool {
        #[cfg(feature = "stream")]
        if let Some(w) = &self.wake {
            return w.reader_gone.load(Ordering::SeqCst);
        }
        false
    }

    /// Wakes an async reader after a delivery.
    fn delivered(&self) {
        #[cfg(feature = "stream")]
        if let Some(w) = &self.wake {
            w.wake();
        }
    }

    /// Delivers or backlogs `event`; false once the receiver is gone.
    pub(crate) fn send(&mut self, event: Event) -> bool {
        if !self.flush() {
            return false;
        }
        if !self.backlog.is_empty() {
            self.backlog.push(event);
            return true;
        }
        match self.tx.try_send(event) {
            Ok(()) => {
                self.delivered();
                true
            }
            Err(TrySendError::Full(ev)) => {
                self.backlog.push(ev);
                true
            }
            Err(TrySendError::Disconnected(_)) => false,
        }
    }

    /// Moves as much of the backlog into the channel as fits; false once
    /// the receiver is gone.
    pub(crate) fn flush(&mut self) -> bool {
        if self.reader_gone() {
            return false;
        }
        let mut sent = false;
        // Merged batches are only materialised when there is room for them.
        let alive = loop {
            if self.backlog.is_empty() || self.tx.is_full() {
                break true;
            }
            let Some(ev) = self.backlog.pop() else {
                break true;
            };
            match self.tx.try_send(ev) {
                Ok(()) => sent = true,
                Err(TrySendError::Full(ev)) => {
                    self.backlog.unpop(ev);
                    break true;
                }
                Err(TrySendError::Disconnected(_)) => break false,
            }
        };
        if sent {
            self.delivered();
        }
        alive
    }

    pub(crate) fn behind(&self) -> bool {
        !self.backlog.is_empty()
    }

    pub(crate) fn backlog_paths(&self) -> usize {
        self.backlog.paths()
    }
}

/// Tells an async reader that nothing more will come (the engine dropped
/// the subscriber: its reader went away, or the engine stopped).
#[cfg(feature = "stream")]
impl Drop for Subscriber {
    fn drop(&mut self) {
        if let Some(w) = &self.wake {
            w.sender_gone.store(true, Ordering::SeqCst);
            w.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::change::ChangeKind::*;
    use crate::batch::change::FileType::*;
    use crate::batch::change::{ChangeKind, FileType};
    use crate::ids::{Generation, Seq};
    use crate::status::WatchStatus;
    use std::time::SystemTime;

    fn ch(p: &str, kind: ChangeKind, t: FileType) -> Change {
        Change::new(p, kind, t)
    }

    /// A change with metadata of `size` bytes (none for `Removed`, as the
    /// engine makes them).
    fn sized(p: &str, kind: ChangeKind, size: u64) -> Change {
        let c = ch(p, kind, File);
        if kind == Removed {
            c
        } else {
            c.with_meta(crate::batch::change::Meta::new(size, None, Some(1)))
        }
    }

    fn batch(name: &str, generation: u64, seq: u64, changes: Vec<Change>) -> Event {
        Event::Changes(Arc::new(ChangeBatch::new(
            name,
            Generation(generation),
            Seq::new(1, seq),
            SystemTime::UNIX_EPOCH,
            changes,
        )))
    }

    fn status(name: &str, dirs: usize) -> Event {
        let mut s = WatchStatus::starting(name, Generation(1));
        s.watched_dirs = dirs;
        Event::Status(Arc::new(s))
    }

    #[test]
    fn merge_rules() {
        let m = |a, b| merge(&ch("/p", a, File), &ch("/p", b, File)).map(|c| c.kind);
        assert_eq!(m(Created, Modified), Some(Created));
        assert_eq!(m(Created, Removed), None);
        assert_eq!(m(Modified, Modified), Some(Modified));
        assert_eq!(m(Modified, Removed), Some(Removed));
        assert_eq!(m(Removed, Created), Some(Modified));
        assert_eq!(m(Removed, Removed), Some(Removed));
        let r = merge(&ch("/p", Removed, Dir), &ch("/p", Created, File)).unwrap();
        assert_eq!((r.kind, r.file_type), (Modified, File));
        let r = merge(&ch("/p", Modified, Dir), &ch("/p", Removed, Dir)).unwrap();
        assert_eq!((r.kind, r.file_type), (Removed, Dir));
    }

    /// Renames in merged batches name where the entry was before the
    /// oldest of them: a rename of an entry the older batch moved (or
    /// created) follows it back; a removal keeps none.
    #[test]
    fn merged_renames_name_where_the_entry_was_first() {
        let mut b = Backlog::default();
        let mv = |from: &str, to: &str, kind| {
            [ch(from, Removed, File), ch(to, kind, File).with_from(from)]
        };
        // a -> b; then b -> c, x -> a (over nothing), new file n -> m.
        b.push(batch("s", 1, 1, mv("/a", "/b", Created).into()));
        let mut second: Vec<Change> = mv("/b", "/c", Created).into();
        second.extend(mv("/x", "/a", Created));
        b.push(batch("s", 1, 2, second));
        b.push(batch("s", 1, 3, vec![ch("/n", Created, File)]));
        b.push(batch("s", 1, 4, mv("/n", "/m", Created).into()));
        b.push(batch("s", 1, 5, vec![ch("/a", Removed, File)]));
        let Some(Event::Changes(merged)) = b.pop() else {
            panic!("no merged batch");
        };
        let said: Vec<(&str, ChangeKind, Option<&str>)> = merged
            .changes
            .iter()
            .map(|c| {
                fn s(p: &std::path::Path) -> &str {
                    p.to_str().unwrap()
                }
                (s(&c.path), c.kind, c.from.as_deref().map(s))
            })
            .collect();
        assert_eq!(
            said,
            [
                ("/a", Removed, None),
                ("/c", Created, Some("/a")),
                ("/m", Created, None),
                ("/x", Removed, None),
            ]
        );
    }

    /// A slow subscriber's merged backlog says what each path is after
    /// the newest batch, as the batches it merges would have.
    #[test]
    fn merged_metadata_is_the_newest() {
        let size = |a: Change, b: Change| merge(&a, &b).map(|c| (c.kind, c.meta.map(|m| m.size)));
        let rows = [
            (
                sized("/p", Created, 0),
                sized("/p", Modified, 9),
                Some((Created, Some(9))),
            ),
            (
                sized("/p", Modified, 1),
                sized("/p", Modified, 2),
                Some((Modified, Some(2))),
            ),
            (
                sized("/p", Modified, 1),
                sized("/p", Removed, 0),
                Some((Removed, None)),
            ),
            (
                sized("/p", Removed, 0),
                sized("/p", Created, 3),
                Some((Modified, Some(3))),
            ),
            (sized("/p", Created, 1), sized("/p", Removed, 0), None),
            // A batch whose change has none (it could not be told): none,
            // not the older batch's, which may no longer be true.
            (
                sized("/p", Created, 1),
                ch("/p", Modified, File),
                Some((Created, None)),
            ),
        ];
        for (a, b, want) in rows {
            assert_eq!(size(a.clone(), b.clone()), want, "{a:?} then {b:?}");
        }
        let mut b = Backlog::default();
        b.push(batch(
            "s",
            1,
            1,
            vec![sized("/a", Created, 1), sized("/b", Modified, 1)],
        ));
        b.push(batch(
            "s",
            1,
            2,
            vec![sized("/a", Modified, 5), sized("/b", Removed, 0)],
        ));
        match b.pop().unwrap() {
            Event::Changes(batch) => assert_eq!(
                batch.changes,
                vec![sized("/a", Created, 5), sized("/b", Removed, 0)]
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn backlog_is_bounded_by_distinct_paths() {
        let mut b = Backlog::default();
        for i in 0..10_000u64 {
            let p = format!("/f{}", i % 100);
            b.push(batch("s", 1, i + 1, vec![ch(&p, Modified, File)]));
            b.push(status("s", i as usize));
        }
        assert_eq!(b.paths(), 100);
        assert_eq!(b.entries.len(), 2, "one merged batch and one status");
        match b.pop().unwrap() {
            Event::Changes(batch) => {
                assert_eq!(batch.changes.len(), 100);
                assert_eq!(batch.seq, Seq::new(1, 10_000), "newest seq");
                assert!(batch.changes.windows(2).all(|w| w[0].path < w[1].path));
            }
            other => panic!("{other:?}"),
        }
        match b.pop().unwrap() {
            Event::Status(s) => assert_eq!(s.watched_dirs, 9_999, "latest status kept"),
            other => panic!("{other:?}"),
        }
        assert!(b.pop().is_none());
    }

    #[test]
    fn generations_and_deletions_are_not_merged_across() {
        let mut b = Backlog::default();
        b.push(batch("s", 1, 1, vec![ch("/a", Created, File)]));
        b.push(Event::Deleted("s".into()));
        b.push(batch("s", 1, 2, vec![ch("/a", Removed, File)]));
        b.push(batch("s", 2, 3, vec![ch("/b", Created, File)]));
        b.push(batch("t", 1, 4, vec![ch("/c", Created, File)]));
        b.push(batch("s", 2, 5, vec![ch("/b", Removed, File)]));
        let mut kinds = Vec::new();
        while let Some(e) = b.pop() {
            kinds.push(match e {
                Event::Changes(b) => format!("{}{}:{}", b.name, b.generation.0, b.changes.len()),
                Event::Deleted(n) => format!("deleted {n}"),
                Event::Status(_) => "status".into(),
            });
        }
        // s gen 2's created-then-removed /b cancelled out: skipped.
        assert_eq!(kinds, vec!["s1:1", "deleted s", "s1:1", "t1:1"]);
    }

    #[test]
    fn subscriber_never_blocks_and_loses_nothing() {
        let (tx, rx) = crossbeam_channel::bounded(2);
        let mut s = Subscriber::new(tx);
        for i in 0..1000u64 {
            assert!(s.send(batch(
                "s",
                1,
                i + 1,
                vec![ch(&format!("/f{}", i % 10), Modified, File)]
            )));
        }
        assert!(s.behind());
        assert!(s.backlog_paths() <= 10);
        let mut seen = std::collections::BTreeSet::new();
        let mut last_seq = 0;
        loop {
            while let Ok(Event::Changes(b)) = rx.try_recv() {
                assert!(b.seq.number() > last_seq, "seq must increase");
                last_seq = b.seq.number();
                seen.extend(b.changes.iter().map(|c| c.path.clone()));
            }
            if !s.behind() {
                break;
            }
            assert!(s.flush());
        }
        assert_eq!(seen.len(), 10);
        assert_eq!(last_seq, 1000);
        drop(rx);
        assert!(!s.send(status("s", 1)));
    }

    /// Counts its wakes.
    #[cfg(feature = "stream")]
    struct CountWakes(std::sync::atomic::AtomicUsize);

    #[cfg(feature = "stream")]
    impl std::task::Wake for CountWakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[cfg(feature = "stream")]
    #[test]
    fn a_stream_is_woken_by_sends_and_flushes_and_when_dropped() {
        let wakes = Arc::new(CountWakes(Default::default()));
        let waker = Waker::from(wakes.clone());
        let count = || wakes.0.load(Ordering::SeqCst);
        let (tx, rx) = crossbeam_channel::bounded(1);
        let wake = Arc::new(Wake::default());
        let mut s = Subscriber::with_wake(tx, wake.clone());
        // Nothing registered: nothing to wake.
        assert!(s.send(status("s", 1)));
        assert_eq!(count(), 0);
        rx.try_recv().unwrap();
        wake.register(&waker);
        assert!(s.send(status("s", 2)));
        assert_eq!(count(), 1, "a send wakes the registered reader");
        // The reader did not register again: a full channel, a backlog.
        assert!(s.send(batch("s", 1, 1, vec![ch("/a", Created, File)])));
        assert!(s.behind());
        wake.register(&waker);
        assert!(s.flush(), "still alive");
        assert_eq!(count(), 1, "no room: nothing delivered, no wake");
        rx.try_recv().unwrap();
        assert!(s.flush());
        assert!(!s.behind());
        assert_eq!(count(), 2, "a flush into the channel wakes");
        // The engine lets go: the reader is woken and told.
        wake.register(&waker);
        assert!(!wake.sender_gone());
        drop(s);
        assert!(wake.sender_gone());
        assert_eq!(count(), 3);
        assert!(matches!(rx.try_recv(), Ok(Event::Changes(_))));
    }

    #[cfg(feature = "stream")]
    #[test]
    fn a_dropped_stream_is_let_go_of_even_with_a_full_channel() {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let wake = Arc::new(Wake::default());
        let mut s = Subscriber::with_wake(tx, wake.clone());
        for i in 0..3u64 {
            assert!(s.send(batch("s", 1, i + 1, vec![ch("/a", Modified, File)])));
        }
        assert!(s.behind());
        // What the stream does when dropped.
        wake.set_reader_gone();
        drop(rx);
        assert!(!s.flush());
        assert!(!s.send(status("s", 1)));
    }
}
