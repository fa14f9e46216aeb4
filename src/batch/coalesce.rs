//! Batching: raw per-path changes in, one net change per path out, after a
//! quiet window or a maximum delay; renames the OS paired, told by the
//! engine after both ends were pushed ([`Coalescer::moved`]), come out
//! as the destination's [`Change::from`].
//!
//! Pure: the caller passes the time in.

use std::collections::hash_map::Entry;

use crate::fasthash::{FastMap, FastSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::batch::change::{Change, ChangeKind, FileType, Meta};

#[derive(Clone, Debug)]
struct Net {
    /// The type before the batch, if the path existed then.
    before: Option<FileType>,
    /// The type now, if the path exists now.
    now: Option<FileType>,
    /// What the newest raw change's look saw of it, if it exists now and
    /// that look `stat`ed it.
    meta: Option<Box<Meta>>,
    /// Raw changes pushed for the path in this batch (saturating): what
    /// tells whether it changed again after a move.
    pushes: u32,
}

/// A rename into a path, as [`Coalescer::moved`] recorded it.
#[derive(Clone, Debug)]
struct MovedIn {
    /// Where the entry was when the batch opened (a chain of moves within
    /// the batch followed back).
    source: PathBuf,
    /// The destination's raw changes when the move was recorded: any
    /// later one (a write, a removal) breaks the pairing.
    pushes: u32,
}

/// Collects raw changes of one spec and nets them per path.
#[derive(Debug)]
pub(crate) struct Coalescer {
    pending: FastMap<PathBuf, Net>,
    /// Renames into a path in this batch, by destination.
    moves: FastMap<PathBuf, MovedIn>,
    /// Whether the entries below a moved directory are left out.
    collapse: bool,
    first: Option<Instant>,
    last: Option<Instant>,
    quiet: Duration,
    max_delay: Duration,
}

impl Coalescer {
    pub(crate) fn new(quiet: Duration, max_delay: Duration) -> Coalescer {
        Coalescer {
            pending: FastMap::default(),
            moves: FastMap::default(),
            collapse: false,
            first: None,
            last: None,
            quiet,
            max_delay: max_delay.max(quiet),
        }
    }

    /// Leaves out the entries below a directory moved within the batch
    /// (`WatchOptions::collapse_moves`).
    pub(crate) fn collapse_moves(mut self, collapse: bool) -> Coalescer {
        self.collapse = collapse;
        self
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
        let (before, after) = crate::batch::change::ends(kind, ft);
        let meta = meta.filter(|_| after.is_some());
        match self.pending.entry(path) {
            Entry::Occupied(mut e) => {
                let net = e.get_mut();
                net.now = after;
                net.meta = meta;
                net.pushes = net.pushes.saturating_add(1);
            }
            Entry::Vacant(e) => {
                e.insert(Net {
                    before,
                    now: after,
                    meta,
                    pushes: 1,
                });
            }
        }
        opened
    }

    /// The OS paired a rename of `from` to `to`, and the raw changes of
    /// both ends (`from` gone, `to` there: with everything below a
    /// directory) were just pushed. Recorded if this spec saw both ends;
    /// whether it is reported is decided when the batch closes (both ends
    /// still as the move left them, the entry of the same type).
    pub(crate) fn moved(&mut self, from: &Path, to: &Path) {
        let (Some(f), Some(t)) = (self.pending.get(from), self.pending.get(to)) else {
            return;
        };
        if t.now.is_none() {
            return;
        }
        let pushes = t.pushes;
        // `from` got there by an earlier move, and nothing happened to it
        // since but this move's removal: the entry comes from further back.
        let source = match self.moves.remove(from) {
            Some(m) if f.pushes == m.pushes.saturating_add(1) => m.source,
            _ => from.to_path_buf(),
        };
        if source == to {
            // Back where it was when the batch opened.
            self.moves.remove(to);
            return;
        }
        self.moves
            .insert(to.to_path_buf(), MovedIn { source, pushes });
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
        let (mut froms, implied) = self.resolve_moves();
        self.moves.clear();
        let mut out: Vec<Change> = self
            .pending
            .drain()
            .filter(|(path, _)| !implied.contains(path))
            .filter_map(|(path, net)| {
                let (kind, file_type) = crate::batch::change::net(net.before, net.now)?;
                let from = froms.remove(&path).map(PathBuf::into_boxed_path);
                Some(Change {
                    path,
                    kind,
                    file_type,
                    meta: net.meta,
                    hash: None,
                    from,
                })
            })
            .collect();
        out.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        out
    }

    /// The renames to report, by destination, and (collapsing) the paths
    /// a directory's move implies. Nothing to do in a batch without one.
    fn resolve_moves(&self) -> (FastMap<PathBuf, PathBuf>, FastSet<PathBuf>) {
        let mut froms = FastMap::default();
        let mut implied = FastSet::default();
        if self.moves.is_empty() {
            return (froms, implied);
        }
        for (path, net) in &self.pending {
            let Some((source, inherited)) = self.source_of(path, net) else {
                continue;
            };
            if inherited && self.collapse {
                // Both ends go: the directory's change says it all (unless
                // something else now stands where the entry was).
                implied.insert(path.clone());
                if self.pending.get(&source).is_some_and(|n| n.now.is_none()) {
                    implied.insert(source);
                }
            } else {
                froms.insert(path.clone(), source);
            }
        }
        (froms, implied)
    }

    /// Where the entry now at `path` was when the batch opened, if it got
    /// there by a recorded move (`true`: as an entry below a moved
    /// directory) and nothing changed it since.
    fn source_of(&self, path: &Path, net: &Net) -> Option<(PathBuf, bool)> {
        let was = |p: &Path| self.pending.get(p).and_then(|n| n.before);
        net.now?;
        if let Some(m) = self.moves.get(path) {
            return (net.pushes == m.pushes && was(&m.source) == net.now)
                .then(|| (m.source.clone(), false));
        }
        // Below a moved directory: the nearest ancestor moved in, if its
        // move stands; the entry came with it (pushed once: created by the
        // directory's walk, nothing since).
        for dir in path.ancestors().skip(1) {
            let Some(m) = self.moves.get(dir) else {
                continue;
            };
            let d = self.pending.get(dir)?;
            let stands = d.pushes == m.pushes
                && d.now == Some(FileType::Dir)
                && was(&m.source) == Some(FileType::Dir);
            if !stands || net.pushes != 1 || net.before.is_some() {
                return None;
            }
            let source = m.source.join(path.strip_prefix(dir).ok()?);
            return (was(&source) == net.now).then_some((source, true));
        }
        None
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

    /// What a batch says: (path, kind, from) per change.
    fn said(c: &mut Coalescer) -> Vec<(String, ChangeKind, Option<String>)> {
        c.take()
            .into_iter()
            .map(|c| {
                // (Written with `/` whatever the platform joins with.)
                let s = |p: &Path| p.to_string_lossy().replace('\\', "/");
                (s(&c.path), c.kind, c.from.as_deref().map(s))
            })
            .collect()
    }

    /// `/`-separated `path` as the platform joins it (what an entry below
    /// a moved directory is named by: its old parent joined with its
    /// name).
    fn p(path: &str) -> PathBuf {
        path.split('/')
            .filter(|c| !c.is_empty())
            .fold(PathBuf::from("/"), |a, c| a.join(c))
    }

    fn moved(c: &mut Coalescer, t: Instant, from: &str, to: &str, ft: FileType, over: bool) {
        c.push(t, from.into(), Removed, ft, None);
        c.push(
            t,
            to.into(),
            if over { Modified } else { Created },
            ft,
            None,
        );
        c.moved(Path::new(from), Path::new(to));
    }

    fn s(p: &str) -> String {
        p.to_owned()
    }

    #[test]
    fn a_paired_rename_says_where_from() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(Q, M);
        moved(&mut c, t0, "/d/a", "/d/b", File, false);
        assert_eq!(
            said(&mut c),
            vec![
                (s("/d/a"), Removed, None),
                (s("/d/b"), Created, Some(s("/d/a")))
            ]
        );
        // Over an existing file: modified, from.
        moved(&mut c, t0, "/d/a", "/d/b", File, true);
        assert_eq!(
            said(&mut c),
            vec![
                (s("/d/a"), Removed, None),
                (s("/d/b"), Modified, Some(s("/d/a")))
            ]
        );
        // The moves do not outlive their batch.
        c.push(t0, "/d/b".into(), Modified, File, None);
        assert_eq!(said(&mut c), vec![(s("/d/b"), Modified, None)]);
    }

    /// An atomic save (a temporary file renamed over the target) is the
    /// target modified: the temporary file did not exist before the batch.
    #[test]
    fn a_rename_from_a_new_file_says_nothing() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(Q, M);
        c.push(t0, "/d/.f.tmp".into(), Created, File, None);
        moved(&mut c, t0, "/d/.f.tmp", "/d/f", File, true);
        assert_eq!(said(&mut c), vec![(s("/d/f"), Modified, None)]);
    }

    /// A path changed after its move (written, replaced) is reported as
    /// before the pairing: the entry there is not just the moved one.
    #[test]
    fn a_change_after_the_move_breaks_the_pair() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(Q, M);
        moved(&mut c, t0, "/d/a", "/d/b", File, false);
        c.push(t0, "/d/b".into(), Modified, File, None);
        assert_eq!(
            said(&mut c),
            vec![(s("/d/a"), Removed, None), (s("/d/b"), Created, None)]
        );
        // Another type now at the destination.
        moved(&mut c, t0, "/d/a", "/d/b", File, false);
        c.push(t0, "/d/b".into(), Removed, File, None);
        c.push(t0, "/d/b".into(), Created, Dir, None);
        assert_eq!(
            said(&mut c),
            vec![(s("/d/a"), Removed, None), (s("/d/b"), Created, None)]
        );
    }

    /// Moves chained within one batch name where the entry was when it
    /// opened; a swap through a temporary name is two modifications, each
    /// from the other; moved back is no move.
    #[test]
    fn chains_of_moves_are_followed_back() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(Q, M);
        moved(&mut c, t0, "/d/a", "/d/t", File, false);
        moved(&mut c, t0, "/d/t", "/d/c", File, false);
        assert_eq!(
            said(&mut c),
            vec![
                (s("/d/a"), Removed, None),
                (s("/d/c"), Created, Some(s("/d/a")))
            ]
        );
        moved(&mut c, t0, "/d/a", "/d/t", File, false);
        moved(&mut c, t0, "/d/b", "/d/a", File, false);
        moved(&mut c, t0, "/d/t", "/d/b", File, false);
        assert_eq!(
            said(&mut c),
            vec![
                (s("/d/a"), Modified, Some(s("/d/b"))),
                (s("/d/b"), Modified, Some(s("/d/a")))
            ]
        );
        moved(&mut c, t0, "/d/a", "/d/b", File, false);
        moved(&mut c, t0, "/d/b", "/d/a", File, false);
        assert_eq!(said(&mut c), vec![(s("/d/a"), Modified, None)]);
    }

    /// A moved directory: each entry below says where it was; collapsed,
    /// only the directory's own changes are left, but for an entry that
    /// changed otherwise.
    #[test]
    fn a_moved_directory_carries_its_entries() {
        let t0 = Instant::now();
        let tree = |c: &mut Coalescer| {
            c.push(t0, p("/a"), Removed, Dir, None);
            c.push(t0, p("/a/x"), Removed, File, None);
            c.push(t0, p("/a/s"), Removed, Dir, None);
            c.push(t0, p("/a/s/y"), Removed, File, None);
            c.push(t0, p("/b"), Created, Dir, None);
            c.push(t0, p("/b/x"), Created, File, None);
            c.push(t0, p("/b/s"), Created, Dir, None);
            c.push(t0, p("/b/s/y"), Created, File, None);
            c.moved(Path::new("/a"), Path::new("/b"));
        };
        let mut c = Coalescer::new(Q, M);
        tree(&mut c);
        assert_eq!(
            said(&mut c),
            vec![
                (s("/a"), Removed, None),
                (s("/a/s"), Removed, None),
                (s("/a/s/y"), Removed, None),
                (s("/a/x"), Removed, None),
                (s("/b"), Created, Some(s("/a"))),
                (s("/b/s"), Created, Some(s("/a/s"))),
                (s("/b/s/y"), Created, Some(s("/a/s/y"))),
                (s("/b/x"), Created, Some(s("/a/x"))),
            ]
        );
        let mut c = Coalescer::new(Q, M).collapse_moves(true);
        tree(&mut c);
        c.push(t0, p("/b/x"), Modified, File, None);
        c.push(t0, p("/b/new"), Created, File, None);
        assert_eq!(
            said(&mut c),
            vec![
                (s("/a"), Removed, None),
                (s("/a/x"), Removed, None),
                (s("/b"), Created, Some(s("/a"))),
                (s("/b/new"), Created, None),
                (s("/b/x"), Created, None),
            ]
        );
    }

    /// A spec that saw one end only (the other outside its roots, or
    /// ignored) reports no pairing.
    #[test]
    fn one_end_seen_is_no_move() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(Q, M);
        c.push(t0, "/in/b".into(), Created, File, None);
        c.moved(Path::new("/out/a"), Path::new("/in/b"));
        assert_eq!(said(&mut c), vec![(s("/in/b"), Created, None)]);
        c.push(t0, "/in/a".into(), Removed, File, None);
        c.moved(Path::new("/in/a"), Path::new("/out/b"));
        assert_eq!(said(&mut c), vec![(s("/in/a"), Removed, None)]);
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
