//! Batching: raw per-path changes in, one net change per path out, after a
//! quiet window or a maximum delay.
//!
//! Pure: the caller passes the time in.

use std::collections::hash_map::Entry;

use crate::fasthash::FastMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::change::{Change, ChangeKind, FileType, Meta};

#[derive(Clone, Debug)]
struct Net {
    /// The type before the batch, if the path existed then.
    before: Option<FileType>,
    /// The type now, if the path exists now.
    now: Option<FileType>,
    /// What the newest raw change's look saw of it, if it exists now and
    /// that look `stat`ed it.
    meta: Option<Box<Meta>>,
}

/// Collects raw changes of one spec and nets them per path.
#[derive(Debug)]
pub(crate) struct Coalescer {
    pending: FastMap<PathBuf, Net>,
    first: Option<Instant>,
    last: Option<Instant>,
    quiet: Duration,
    max_delay: Duration,
}

impl Coalescer {
    pub(crate) fn new(quiet: Duration, max_delay: Duration) -> Coalescer {
        Coalescer {
            pending: FastMap::default(),
            first: None,
            last: None,
            quiet,
            max_delay: max_delay.max(quiet),
        }
    }

    /// Records one raw change seen at `now`.
    ///
    /// `Created` means "exists now, did not a moment ago", `Removed` the
    /// reverse, `Modified` "exists, was written or replaced". `meta`: what
    /// the look that found it saw, if it `stat`ed the entry; the newest
    /// raw change's stands (none for a `Removed`), even when it has none:
    /// an older one may no longer be true.
    /// Returns whether it opened the batch.
    pub(crate) fn push(
        &mut self,
        now: Instant,
        path: PathBuf,
        kind: ChangeKind,
        ft: FileType,
        meta: Option<Box<Meta>>,
    ) -> bool {
        let opened = self.first.is_none();
        self.first.get_or_insert(now);
        self.last = Some(now);
        let (before, after) = crate::change::ends(kind, ft);
        let meta = meta.filter(|_| after.is_some());
        match self.pending.entry(path) {
            Entry::Occupied(mut e) => {
                let net = e.get_mut();
                net.now = after;
                net.meta = meta;
            }
            Entry::Vacant(e) => {
                e.insert(Net {
                    before,
                    now: after,
                    meta,
                });
            }
        }
        opened
    }

    /// When the open batch is due, if one is open.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        let first = self.first?;
        let last = self.last.unwrap_or(first);
        Some((last + self.quiet).min(first + self.max_delay))
    }

    /// When the open batch closes at the latest (its maximum delay after
    /// its first change), if one is open.
    pub(crate) fn latest(&self) -> Option<Instant> {
        Some(self.first? + self.max_delay)
    }

    /// Whether raw changes are waiting (even ones that net to nothing).
    #[cfg(test)]
    pub(crate) fn is_open(&self) -> bool {
        self.first.is_some()
    }

    /// Closes the batch if it is due at `now`; returns its net changes
    /// sorted by path (possibly empty when everything netted out).
    #[cfg(test)]
    pub(crate) fn take_due(&mut self, now: Instant) -> Option<Vec<Change>> {
        match self.deadline() {
            Some(d) if d <= now => Some(self.take()),
            _ => None,
        }
    }

    /// Closes the batch now, whether due or not.
    pub(crate) fn take(&mut self) -> Vec<Change> {
        self.first = None;
        self.last = None;
        let mut out: Vec<Change> = self
            .pending
            .drain()
            .filter_map(|(path, net)| {
                let (kind, file_type) = crate::change::net(net.before, net.now)?;
                Some(Change {
                    path,
                    kind,
                    file_type,
                    meta: net.meta,
                    hash: None,
                })
            })
            .collect();
        out.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ChangeKind::*;
    use FileType::*;

    const Q: Duration = Duration::from_millis(50);
    const M: Duration = Duration::from_millis(1000);

    fn ms(t0: Instant, n: u64) -> Instant {
        t0 + Duration::from_millis(n)
    }

    fn net(seq: &[(ChangeKind, FileType)]) -> Vec<(ChangeKind, FileType)> {
        let t0 = Instant::now();
        let mut c = Coalescer::new(Q, M);
        for (i, (k, t)) in seq.iter().enumerate() {
            c.push(ms(t0, i as u64), PathBuf::from("/p"), *k, *t, None);
        }
        c.take()
            .into_iter()
            .map(|c| (c.kind, c.file_type))
            .collect()
    }

    #[test]
    fn netting_rules() {
        assert_eq!(net(&[(Created, File)]), vec![(Created, File)]);
        assert_eq!(
            net(&[(Created, File), (Modified, File)]),
            vec![(Created, File)]
        );
        assert_eq!(net(&[(Created, File), (Removed, File)]), vec![]);
        assert_eq!(
            net(&[(Modified, File), (Modified, File)]),
            vec![(Modified, File)]
        );
        assert_eq!(
            net(&[(Modified, File), (Removed, File)]),
            vec![(Removed, File)]
        );
        assert_eq!(
            net(&[(Removed, File), (Created, File)]),
            vec![(Modified, File)]
        );
        assert_eq!(net(&[(Removed, File)]), vec![(Removed, File)]);
        // A file replaced by a directory: modified, now a directory.
        assert_eq!(
            net(&[(Removed, File), (Created, Dir)]),
            vec![(Modified, Dir)]
        );
        // Removed reports the type the path had before.
        assert_eq!(
            net(&[(Modified, Dir), (Removed, Dir)]),
            vec![(Removed, Dir)]
        );
        assert_eq!(
            net(&[(Created, File), (Removed, File), (Created, Symlink)]),
            vec![(Created, Symlink)]
        );
        assert_eq!(
            net(&[(Removed, File), (Created, File), (Removed, File)]),
            vec![(Removed, File)]
        );
    }

    /// Every sequence of up to 4 raw changes over two types, checked against
    /// the definition: compare existence/type before the first and after the
    /// last change.
    #[test]
    fn netting_exhaustive_against_definition() {
        let alphabet = [
            (Created, File),
            (Created, Dir),
            (Modified, File),
            (Removed, File),
            (Removed, Dir),
        ];
        for len in 1..=4usize {
            let total = alphabet.len().pow(len as u32);
            for mut code in 0..total {
                let mut seq = Vec::new();
                for _ in 0..len {
                    seq.push(alphabet[code % alphabet.len()]);
                    code /= alphabet.len();
                }
                let before = match seq[0] {
                    (Created, _) => None,
                    (_, t) => Some(t),
                };
                let after = match seq[len - 1] {
                    (Removed, _) => None,
                    (_, t) => Some(t),
                };
                let expect = match (before, after) {
                    (None, None) => vec![],
                    (None, Some(t)) => vec![(Created, t)],
                    (Some(t), None) => vec![(Removed, t)],
                    (Some(_), Some(t)) => vec![(Modified, t)],
                };
                assert_eq!(net(&seq), expect, "sequence {seq:?}");
            }
        }
    }

    fn meta(size: u64) -> Option<Box<Meta>> {
        Some(Box::new(Meta::new(size, None, Some(size + 1000))))
    }

    /// What one path's raw changes net to, with the metadata each look
    /// brought.
    fn net_meta(seq: &[(ChangeKind, FileType, Option<u64>)]) -> Vec<(ChangeKind, Option<u64>)> {
        let t0 = Instant::now();
        let mut c = Coalescer::new(Q, M);
        for (i, (k, t, m)) in seq.iter().enumerate() {
            c.push(ms(t0, i as u64), "/p".into(), *k, *t, m.and_then(meta));
        }
        c.take()
            .into_iter()
            .map(|c| (c.kind, c.meta.map(|m| m.size)))
            .collect()
    }

    /// The net change carries what the newest look saw: the "after" state.
    #[test]
    fn metadata_is_the_newest_looks() {
        // Created empty, then written: created, with the written size.
        assert_eq!(
            net_meta(&[(Created, File, Some(0)), (Modified, File, Some(100))]),
            vec![(Created, Some(100))]
        );
        // Replaced (removed, created again): modified, the new file's.
        assert_eq!(
            net_meta(&[(Removed, File, None), (Created, File, Some(7))]),
            vec![(Modified, Some(7))]
        );
        // Removed: none, whatever came before.
        assert_eq!(
            net_meta(&[(Modified, File, Some(5)), (Removed, File, None)]),
            vec![(Removed, None)]
        );
        // A removal's metadata (there is none to have) is dropped.
        assert_eq!(net_meta(&[(Removed, File, Some(5))]), vec![(Removed, None)]);
        // The newest look did not `stat` (a re-read): an older look's
        // metadata may no longer be true, so none (the engine fills it in
        // when the batch closes).
        assert_eq!(
            net_meta(&[(Created, File, Some(3)), (Modified, File, None)]),
            vec![(Created, None)]
        );
        // A file replaced by a directory: the directory's.
        assert_eq!(
            net_meta(&[
                (Modified, File, Some(3)),
                (Removed, File, None),
                (Created, Dir, Some(4096))
            ]),
            vec![(Modified, Some(4096))]
        );
    }

    /// Every sequence of up to 4 raw changes, each with or without a look's
    /// metadata: the net change (when there is one and the path exists
    /// after it) carries the last raw change's, else none. Kinds and types
    /// are as without metadata.
    #[test]
    fn metadata_exhaustive_against_definition() {
        let alphabet = [
            (Created, File, Some(1)),
            (Created, Dir, None),
            (Modified, File, Some(2)),
            (Modified, File, None),
            (Removed, File, None),
        ];
        for len in 1..=4usize {
            for mut code in 0..alphabet.len().pow(len as u32) {
                let mut seq = Vec::new();
                for _ in 0..len {
                    seq.push(alphabet[code % alphabet.len()]);
                    code /= alphabet.len();
                }
                let got = net_meta(&seq);
                let plain: Vec<_> = seq.iter().map(|(k, t, _)| (*k, *t)).collect();
                let kinds: Vec<ChangeKind> = net(&plain).into_iter().map(|(k, _)| k).collect();
                let last = seq[len - 1];
                let want_meta = if last.0 == Removed { None } else { last.2 };
                let want: Vec<_> = kinds.into_iter().map(|k| (k, want_meta)).collect();
                assert_eq!(got, want, "sequence {seq:?}");
            }
        }
    }

    #[test]
    fn quiet_window_closes_batch() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(Q, M);
        assert_eq!(c.deadline(), None);
        assert!(c.take_due(t0).is_none());
        c.push(t0, "/a".into(), Created, File, None);
        assert_eq!(c.deadline(), Some(ms(t0, 50)));
        assert!(c.take_due(ms(t0, 49)).is_none());
        c.push(ms(t0, 40), "/b".into(), Created, File, None);
        assert_eq!(c.deadline(), Some(ms(t0, 90)));
        assert!(c.take_due(ms(t0, 89)).is_none());
        let b = c.take_due(ms(t0, 90)).unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].path, PathBuf::from("/a"));
        assert!(!c.is_open());
        assert_eq!(c.deadline(), None);
    }

    #[test]
    fn max_delay_closes_under_churn() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(Q, Duration::from_millis(200));
        let mut closed = Vec::new();
        for i in 0..100u64 {
            let now = ms(t0, i * 10);
            if let Some(b) = c.take_due(now) {
                closed.push((i * 10, b));
            }
            c.push(now, format!("/f{}", i % 7).into(), Modified, File, None);
        }
        // A change every 10 ms never leaves a 50 ms gap: batches close by the
        // 200 ms cap only.
        assert!(!closed.is_empty());
        for (at, b) in &closed {
            assert_eq!(at % 200, 0, "closed at {at}");
            assert!(b.len() <= 7);
        }
    }

    #[test]
    fn zero_quiet_window_is_due_immediately() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(Duration::ZERO, Duration::ZERO);
        c.push(t0, "/a".into(), Modified, File, None);
        assert_eq!(c.take_due(t0).unwrap().len(), 1);
    }

    #[test]
    fn everything_netted_out_gives_empty_batch() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(Q, M);
        c.push(t0, "/tmp1".into(), Created, File, None);
        c.push(t0, "/tmp1".into(), Removed, File, None);
        assert!(c.is_open());
        assert_eq!(c.take_due(ms(t0, 50)), Some(vec![]));
    }

    #[test]
    fn output_sorted_parents_first() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(Q, M);
        for p in ["/d/b/c", "/d", "/d/b", "/c"] {
            c.push(t0, p.into(), Created, Dir, None);
        }
        let paths: Vec<_> = c.take().into_iter().map(|c| c.path).collect();
        let want: Vec<PathBuf> = ["/c", "/d", "/d/b", "/d/b/c"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(paths, want);
    }

    #[test]
    fn atomic_save_is_one_modified() {
        // temp written, renamed over the target: the engine reports the temp
        // created then removed and the target replaced.
        let t0 = Instant::now();
        let mut c = Coalescer::new(Q, M);
        c.push(t0, "/d/.f.tmp".into(), Created, File, None);
        c.push(t0, "/d/.f.tmp".into(), Modified, File, None);
        c.push(t0, "/d/.f.tmp".into(), Removed, File, None);
        c.push(t0, "/d/f".into(), Modified, File, None);
        let b = c.take();
        assert_eq!(b, vec![Change::new("/d/f", Modified, File)]);
    }
}
