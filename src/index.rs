//! The directory index: every watched directory's entries (name and type),
//! which specs cover each directory, and the listing diff.
//!
//! The index and [`diff`] are pure data structures: the engine does the I/O.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::event::FileType;

/// Internal identifier of an applied spec (one per generation).
pub(crate) type SpecId = u32;
/// Index of a directory node.
pub(crate) type DirId = usize;

/// A spec that watches a directory for one name only: the parent of a root,
/// or the nearest existing ancestor of a root that does not exist yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Partial {
    pub spec: SpecId,
    /// The entry name the spec waits for.
    pub name: OsString,
    /// Whether `dir/name` is the spec's root itself (then its changes are
    /// reported) or only a step towards it.
    pub is_root: bool,
    /// The root this registration serves.
    pub root: PathBuf,
}

/// One indexed directory.
#[derive(Debug)]
pub(crate) struct DirNode {
    pub path: PathBuf,
    /// Entries by name. Complete when `complete`, else only the names that
    /// `partial` registrations want.
    pub entries: BTreeMap<OsString, FileType>,
    /// Specs that cover this directory and everything below it that they do
    /// not ignore.
    pub full: Vec<SpecId>,
    /// Specs that watch this directory for one name.
    pub partial: Vec<Partial>,
    /// The native watch descriptor, if the directory has its own OS watch.
    pub wd: Option<i32>,
    /// Whether the directory has been read in full.
    pub complete: bool,
    /// Whether the OS refused a watch and the directory is polled instead.
    pub polled: bool,
    /// Polled directories only: a stat signature per entry, to tell a
    /// modification without OS events.
    pub sigs: HashMap<OsString, Sig>,
}

/// What a poll compares to tell that an entry changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sig {
    pub size: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
    pub ino: u64,
}

impl DirNode {
    pub(crate) fn new(path: PathBuf) -> DirNode {
        DirNode {
            path,
            entries: BTreeMap::new(),
            full: Vec::new(),
            partial: Vec::new(),
            wd: None,
            complete: false,
            polled: false,
            sigs: HashMap::new(),
        }
    }

    /// No spec needs this directory any more.
    pub(crate) fn is_unused(&self) -> bool {
        self.full.is_empty() && self.partial.is_empty()
    }

    /// Whether an event for `name` in this directory matters.
    pub(crate) fn tracks(&self, name: &OsStr) -> bool {
        self.complete || self.partial.iter().any(|p| p.name == name)
    }
}

/// All indexed directories.
#[derive(Debug, Default)]
pub(crate) struct Index {
    nodes: Vec<Option<DirNode>>,
    free: Vec<DirId>,
    by_path: HashMap<PathBuf, DirId>,
}

impl Index {
    pub(crate) fn lookup(&self, path: &Path) -> Option<DirId> {
        self.by_path.get(path).copied()
    }

    pub(crate) fn get(&self, id: DirId) -> Option<&DirNode> {
        self.nodes.get(id).and_then(Option::as_ref)
    }

    pub(crate) fn get_mut(&mut self, id: DirId) -> Option<&mut DirNode> {
        self.nodes.get_mut(id).and_then(Option::as_mut)
    }

    /// The node for `path`, created empty if absent; `true` if created.
    pub(crate) fn ensure(&mut self, path: &Path) -> (DirId, bool) {
        if let Some(id) = self.lookup(path) {
            return (id, false);
        }
        let node = DirNode::new(path.to_path_buf());
        let id = match self.free.pop() {
            Some(id) => {
                self.nodes[id] = Some(node);
                id
            }
            None => {
                self.nodes.push(Some(node));
                self.nodes.len() - 1
            }
        };
        self.by_path.insert(path.to_path_buf(), id);
        (id, true)
    }

    pub(crate) fn remove(&mut self, id: DirId) -> Option<DirNode> {
        let node = self.nodes.get_mut(id)?.take()?;
        self.by_path.remove(&node.path);
        self.free.push(id);
        Some(node)
    }

    pub(crate) fn len(&self) -> usize {
        self.by_path.len()
    }

    pub(crate) fn ids(&self) -> Vec<DirId> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.as_ref().map(|_| i))
            .collect()
    }

    /// Total number of indexed entries.
    pub(crate) fn entry_count(&self) -> usize {
        self.nodes.iter().flatten().map(|n| n.entries.len()).sum()
    }
}

/// One difference between an indexed listing and a fresh one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum EntryDiff {
    /// In the fresh listing only.
    Added(OsString, FileType),
    /// In the index only.
    Removed(OsString, FileType),
    /// In both, with another type.
    Retyped(OsString, FileType, FileType),
}

/// Diffs an indexed listing against a fresh one. `fresh` need not be sorted.
/// Output is in name order.
pub(crate) fn diff(
    indexed: &BTreeMap<OsString, FileType>,
    mut fresh: Vec<(OsString, FileType)>,
) -> Vec<EntryDiff> {
    fresh.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    fresh.dedup_by(|a, b| a.0 == b.0);
    let mut out = Vec::new();
    let mut old = indexed.iter().peekable();
    let mut new = fresh.into_iter().peekable();
    loop {
        match (old.peek(), new.peek()) {
            (None, None) => break,
            (Some(_), None) => {
                let (n, t) = old.next().unwrap();
                out.push(EntryDiff::Removed(n.clone(), *t));
            }
            (None, Some(_)) => {
                let (n, t) = new.next().unwrap();
                out.push(EntryDiff::Added(n, t));
            }
            (Some((on, _)), Some((nn, _))) => match (*on).cmp(nn) {
                Ordering::Less => {
                    let (n, t) = old.next().unwrap();
                    out.push(EntryDiff::Removed(n.clone(), *t));
                }
                Ordering::Greater => {
                    let (n, t) = new.next().unwrap();
                    out.push(EntryDiff::Added(n, t));
                }
                Ordering::Equal => {
                    let (n, ot) = old.next().unwrap();
                    let (_, nt) = new.next().unwrap();
                    if *ot != nt {
                        out.push(EntryDiff::Retyped(n.clone(), *ot, nt));
                    }
                }
            },
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use FileType::*;

    fn listing(items: &[(&str, FileType)]) -> BTreeMap<OsString, FileType> {
        items.iter().map(|(n, t)| (OsString::from(n), *t)).collect()
    }
    fn fresh(items: &[(&str, FileType)]) -> Vec<(OsString, FileType)> {
        items.iter().map(|(n, t)| (OsString::from(n), *t)).collect()
    }

    #[test]
    fn diff_basic() {
        let old = listing(&[("a", File), ("b", Dir), ("c", File), ("e", Symlink)]);
        let new = fresh(&[("e", Symlink), ("d", File), ("b", File), ("a", File)]);
        assert_eq!(
            diff(&old, new),
            vec![
                EntryDiff::Retyped("b".into(), Dir, File),
                EntryDiff::Removed("c".into(), File),
                EntryDiff::Added("d".into(), File),
            ]
        );
    }

    #[test]
    fn diff_empty_sides() {
        assert_eq!(diff(&listing(&[]), vec![]), vec![]);
        assert_eq!(
            diff(&listing(&[]), fresh(&[("x", Dir)])),
            vec![EntryDiff::Added("x".into(), Dir)]
        );
        assert_eq!(
            diff(&listing(&[("x", Dir)]), vec![]),
            vec![EntryDiff::Removed("x".into(), Dir)]
        );
    }

    #[test]
    fn diff_duplicates_in_fresh_listing_count_once() {
        let out = diff(&listing(&[]), fresh(&[("x", File), ("x", File)]));
        assert_eq!(out, vec![EntryDiff::Added("x".into(), File)]);
    }

    /// Random listings: applying the diff to the old listing gives the new.
    #[test]
    fn diff_applied_gives_fresh_listing() {
        let mut seed = 0x9e3779b97f4a7c15u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let types = [File, Dir, Symlink, Other];
        for _ in 0..500 {
            let mut old = BTreeMap::new();
            let mut new = Vec::new();
            for i in 0..(rnd() % 20) {
                if rnd() % 3 != 0 {
                    old.insert(OsString::from(format!("n{i}")), types[(rnd() % 4) as usize]);
                }
                if rnd() % 3 != 0 {
                    new.push((OsString::from(format!("n{i}")), types[(rnd() % 4) as usize]));
                }
            }
            let mut applied = old.clone();
            for d in diff(&old, new.clone()) {
                match d {
                    EntryDiff::Added(n, t) => assert!(applied.insert(n, t).is_none()),
                    EntryDiff::Removed(n, _) => assert!(applied.remove(&n).is_some()),
                    EntryDiff::Retyped(n, o, t) => {
                        assert_ne!(o, t);
                        assert_eq!(applied.insert(n, t), Some(o));
                    }
                }
            }
            let want: BTreeMap<_, _> = new.into_iter().collect();
            assert_eq!(applied, want);
        }
    }

    #[test]
    fn index_ensure_lookup_remove_reuse() {
        let mut ix = Index::default();
        let (a, created) = ix.ensure(Path::new("/a"));
        assert!(created);
        assert_eq!(ix.ensure(Path::new("/a")), (a, false));
        let (b, _) = ix.ensure(Path::new("/a/b"));
        assert_ne!(a, b);
        ix.get_mut(b).unwrap().entries.insert("f".into(), File);
        assert_eq!(ix.entry_count(), 1);
        assert_eq!(ix.len(), 2);
        let node = ix.remove(b).unwrap();
        assert_eq!(node.path, PathBuf::from("/a/b"));
        assert!(ix.lookup(Path::new("/a/b")).is_none());
        assert!(ix.get(b).is_none());
        let (c, _) = ix.ensure(Path::new("/c"));
        assert_eq!(c, b, "freed slot is reused");
        assert_eq!(ix.ids(), vec![a, c]);
    }

    #[test]
    fn tracks_names() {
        let mut n = DirNode::new("/p".into());
        assert!(!n.tracks(OsStr::new("x")));
        n.partial.push(Partial {
            spec: 1,
            name: "x".into(),
            is_root: true,
            root: "/p/x".into(),
        });
        assert!(n.tracks(OsStr::new("x")));
        assert!(!n.tracks(OsStr::new("y")));
        n.complete = true;
        assert!(n.tracks(OsStr::new("y")));
        assert!(!n.is_unused());
    }
}
