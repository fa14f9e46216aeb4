//! Batching: raw per-path changes in, one net change per path out, after a
//! quiet window or a maximum delay.
//!
//! Pure: the caller passes the time in.

use std::collections::hash_map::Entry;

use crate::fasthash::FastMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::change::{Change, ChangeKind, FileType};

#[derive(Clone, Copy, Debug)]
struct Net {
    /// The type before the batch, if the path existed then.
    before: Option<FileType>,
    /// The type now, if the path exists now.
    now: Option<FileType>,
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
    /// reverse, `Modified` "exists, was written or replaced".
    /// Returns whether it opened the batch.
    pub(crate) fn push(
        &mut self,
        now: Instant,
        path: PathBuf,
        kind: ChangeKind,
        ft: FileType,
    ) -> bool {
        let opened = self.first.is_none();
        self.first.get_or_insert(now);
        self.last = Some(now);
        match self.pending.entry(path) {
            Entry::Occupied(mut e) => e.get_mut().now = crate::change::ends(kind, ft).1,
            Entry::Vacant(e) => {
                let (before, now) = crate::change::ends(kind, ft);
                e.insert(Net { before, now });
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
            c.push(ms(t0, i as u64), PathBuf::from("/p"), *k, *t);
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

    #[test]
    fn quiet_window_closes_batch() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(Q, M);
        assert_eq!(c.deadline(), None);
        assert!(c.take_due(t0).is_none());
        c.push(t0, "/a".into(), Created, File);
        assert_eq!(c.deadline(), Some(ms(t0, 50)));
        assert!(c.take_due(ms(t0, 49)).is_none());
        c.push(ms(t0, 40), "/b".into(), Created, File);
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
            c.push(now, format!("/f{}", i % 7).into(), Modified, File);
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
        c.push(t0, "/a".into(), Modified, File);
        assert_eq!(c.take_due(t0).unwrap().len(), 1);
    }

    #[test]
    fn everything_netted_out_gives_empty_batch() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(Q, M);
        c.push(t0, "/tmp1".into(), Created, File);
        c.push(t0, "/tmp1".into(), Removed, File);
        assert!(c.is_open());
        assert_eq!(c.take_due(ms(t0, 50)), Some(vec![]));
    }

    #[test]
    fn output_sorted_parents_first() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(Q, M);
        for p in ["/d/b/c", "/d", "/d/b", "/c"] {
            c.push(t0, p.into(), Created, Dir);
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
        c.push(t0, "/d/.f.tmp".into(), Created, File);
        c.push(t0, "/d/.f.tmp".into(), Modified, File);
        c.push(t0, "/d/.f.tmp".into(), Removed, File);
        c.push(t0, "/d/f".into(), Modified, File);
        let b = c.take();
        assert_eq!(b, vec![Change::new("/d/f", Modified, File)]);
    }
}
