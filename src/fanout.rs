//! What subscribers receive ([`Event`]), and its delivery without ever
//! waiting for a subscriber.
//!
//! Each subscriber has a bounded channel. When it is full, events go to the
//! subscriber's backlog instead, where change batches of the same spec and
//! generation are merged per path (so the backlog is bounded by the number
//! of distinct changed paths, not by the number of events) and only the
//! latest status snapshot of each spec is kept. The engine moves the backlog
//! into the channel as room appears.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use crossbeam_channel::{Sender, TrySendError};

use crate::change::{Change, ChangeBatch, ChangeKind, FileType};
use crate::status::WatchStatus;

/// One message to a subscriber.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Event {
    /// A batch of changes of one spec.
    Changes(Arc<ChangeBatch>),
    /// A new status snapshot of one spec (sent whenever its status changes).
    Status(Arc<WatchStatus>),
    /// The named spec was deleted; no more events will come for it (until it
    /// is applied again).
    Deleted(String),
}

/// Combines two net changes of one path (`first` older) into one; `None`
/// when they cancel out (created, then removed).
pub(crate) fn merge(first: &Change, then: &Change) -> Option<Change> {
    let before: Option<FileType> = match first.kind {
        ChangeKind::Created => None,
        ChangeKind::Modified | ChangeKind::Removed => Some(first.file_type),
    };
    let after: Option<FileType> = match then.kind {
        ChangeKind::Removed => None,
        ChangeKind::Created | ChangeKind::Modified => Some(then.file_type),
    };
    let (kind, file_type) = match (before, after) {
        (None, None) => return None,
        (None, Some(t)) => (ChangeKind::Created, t),
        (Some(t), None) => (ChangeKind::Removed, t),
        (Some(_), Some(t)) => (ChangeKind::Modified, t),
    };
    Some(Change {
        path: then.path.clone(),
        kind,
        file_type,
    })
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
                    for c in &batch.changes {
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
                    let mut changes: Vec<Change> = p.changes.into_values().collect();
                    changes.sort_unstable_by(|a, b| a.path.cmp(&b.path));
                    Event::Changes(Arc::new(ChangeBatch {
                        name: p.template.name.clone(),
                        generation: p.template.generation,
                        seq: p.template.seq,
                        time: p.template.time,
                        changes,
                    }))
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

/// One subscriber: a bounded channel and its backlog.
pub(crate) struct Subscriber {
    tx: Sender<Event>,
    backlog: Backlog,
}

impl Subscriber {
    pub(crate) fn new(tx: Sender<Event>) -> Subscriber {
        Subscriber {
            tx,
            backlog: Backlog::default(),
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
            Ok(()) => true,
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
        // Merged batches are only materialised when there is room for them.
        while !self.backlog.is_empty() && !self.tx.is_full() {
            let Some(ev) = self.backlog.pop() else {
                break;
            };
            match self.tx.try_send(ev) {
                Ok(()) => {}
                Err(TrySendError::Full(ev)) => {
                    self.backlog.unpop(ev);
                    return true;
                }
                Err(TrySendError::Disconnected(_)) => return false,
            }
        }
        true
    }

    pub(crate) fn behind(&self) -> bool {
        !self.backlog.is_empty()
    }

    pub(crate) fn backlog_paths(&self) -> usize {
        self.backlog.paths()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{Generation, Seq};
    use ChangeKind::*;
    use FileType::*;
    use std::time::SystemTime;

    fn ch(p: &str, kind: ChangeKind, t: FileType) -> Change {
        Change {
            path: p.into(),
            kind,
            file_type: t,
        }
    }

    fn batch(name: &str, generation: u64, seq: u64, changes: Vec<Change>) -> Event {
        Event::Changes(Arc::new(ChangeBatch {
            name: name.into(),
            generation: Generation(generation),
            seq: Seq(seq),
            time: SystemTime::UNIX_EPOCH,
            changes,
        }))
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
                assert_eq!(batch.seq, Seq(10_000), "newest seq");
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
                assert!(b.seq.0 > last_seq, "seq must increase");
                last_seq = b.seq.0;
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
}
