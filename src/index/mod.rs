//! The directory index: every watched directory's entries (name and
//! type), which specs cover each directory, and which specs watch it for
//! one name only (the parents of roots).
//!
//! Pure data, no I/O: the engine reads the disk and tells the index what it
//! found. The index is the only writer of its nodes; everything else reads
//! them through accessors. It derives, as it goes, how many directories
//! each spec covers, and notes which specs' facts it changed (for status).
//!
//! # Memory layout
//!
//! What a watched tree costs (64-bit Linux; 50,000 directories x 20 files
//! measured at 18 bytes per entry, resident, over an empty watch):
//!
//! ```text
//! per directory                                      bytes
//!   DirNode, in the node table (see its test)           64
//!     path: Arc<Path>                                   16  -> heap: 16 + path
//!     entries: Listing, one Box<[u8]> (below)           16  -> one allocation
//!     full: Option<Arc<[SpecId]>>, interned: every      16  -> one allocation
//!       directory with the same specs shares it               per distinct set
//!     partial: Option<Box<Vec<Partial>>>                  8  (roots' parents)
//!     complete, first_read                                8
//!   path map: the node id (u32) per bucket, keyed by    ~7
//!     the hash of the node's own path (hashbrown's HashTable)
//!   watch table: wd -> u32 node, node -> wd            ~15
//! the Listing's allocation
//!   header: 5 counts, one word each                  5 x w
//!   per entry: header byte (type, short length),    1 + name
//!     the name; its offset in the sorted table           w
//!   w = 1 byte while the allocation is under 256 bytes, 2 under 64 KiB,
//!   else 4
//! ```
//!
//! A directory's first read is stored at its exact size; later entries go
//! to an unsorted tail merged in by 64s, and the allocation doubles. No
//! entry has an allocation of its own, and no path is stored for a file.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::hash::BuildHasher;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::change::FileType;

mod listing;
mod sets;

pub(crate) use listing::{EntryDiff, Listing, diff};
use sets::{SpecSet, SpecSets};

/// Internal identifier of an applied spec (one per generation; never
/// reused).
pub(crate) type SpecId = u32;
/// Index of a directory node (slots are reused once freed).
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

/// The specs covering a directory: one or two inline, no allocation.
pub(crate) type SpecList = smallvec::SmallVec<[SpecId; 2]>;

/// The partial registrations of a directory: none for almost every one,
/// so a null pointer (8 bytes) where an empty `Vec` takes 24.
#[derive(Debug, Default)]
#[allow(clippy::box_collection)] // the point: 8 bytes where a Vec takes 24
struct Partials(Option<Box<Vec<Partial>>>);

impl Partials {
    fn push(&mut self, p: Partial) {
        self.0.get_or_insert_with(Default::default).push(p);
    }

    fn retain(&mut self, f: impl FnMut(&Partial) -> bool) {
        if let Some(v) = &mut self.0 {
            v.retain(f);
            if v.is_empty() {
                self.0 = None;
            }
        }
    }

    #[cfg(test)]
    fn iter_mut(&mut self) -> std::slice::IterMut<'_, Partial> {
        match &mut self.0 {
            Some(v) => v.iter_mut(),
            None => [].iter_mut(),
        }
    }
}

impl std::ops::Deref for Partials {
    type Target = [Partial];

    fn deref(&self) -> &[Partial] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }
}

/// One indexed directory. Read-only outside this module.
#[derive(Debug)]
pub(crate) struct DirNode {
    /// The directory's path (the path map keeps only the node's id, hashed
    /// by this path).
    path: Arc<Path>,
    /// Entries by name. Complete when `complete`, else only the names that
    /// `partial` registrations want.
    entries: Listing,
    /// Specs that cover this directory and everything below it that they do
    /// not ignore.
    full: SpecSet,
    /// Specs that watch this directory for one name.
    partial: Partials,
    /// Whether the directory has been read in full.
    complete: bool,
    /// When its first full read began, in ms after the index's epoch
    /// (0: not read yet); fits beside `complete`, in what was padding.
    first_read: u32,
}

impl DirNode {
    fn new(path: Arc<Path>) -> DirNode {
        DirNode {
            path,
            entries: Listing::default(),
            full: None,
            partial: Partials::default(),
            complete: false,
            first_read: 0,
        }
    }

    pub(crate) fn path(&self) -> &Arc<Path> {
        &self.path
    }

    pub(crate) fn entries(&self) -> &Listing {
        &self.entries
    }

    /// Specs covering the directory.
    pub(crate) fn full(&self) -> &[SpecId] {
        sets::slice(&self.full)
    }

    /// Specs watching the directory for one name.
    pub(crate) fn partial(&self) -> &[Partial] {
        &self.partial
    }

    /// Whether it has been read in full.
    pub(crate) fn complete(&self) -> bool {
        self.complete
    }

    /// Whether spec `sid` covers it.
    pub(crate) fn covers(&self, sid: SpecId) -> bool {
        self.full().binary_search(&sid).is_ok()
    }

    /// No spec needs this directory any more.
    pub(crate) fn is_unused(&self) -> bool {
        self.full.is_none() && self.partial.is_empty()
    }

    /// Whether an event for `name` in this directory matters.
    pub(crate) fn tracks(&self, name: &OsStr) -> bool {
        self.complete || self.partial.iter().any(|p| p.name == name)
    }

    /// The specs a change at `name` here concerns: those covering the
    /// directory, and those whose root is exactly `name` (each once, no
    /// allocation).
    pub(crate) fn concerned<'a>(&'a self, name: &'a OsStr) -> impl Iterator<Item = SpecId> + 'a {
        self.full().iter().copied().chain(
            self.partial
                .iter()
                .filter(move |p| p.is_root && p.name == name && !self.covers(p.spec))
                .map(|p| p.spec),
        )
    }

    /// Specs with a root registration for `name` here.
    fn root_specs<'a>(&'a self, name: &'a OsStr) -> impl Iterator<Item = SpecId> + 'a {
        self.partial
            .iter()
            .filter(move |p| p.is_root && p.name == name)
            .map(|p| p.spec)
    }
}

/// All indexed directories.
#[derive(Default)]
pub(crate) struct Index {
    nodes: Vec<Option<DirNode>>,
    free: Vec<DirId>,
    /// Node ids by the hash of their path (the path is the node's own).
    by_path: hashbrown::HashTable<u32>,
    hasher: foldhash::fast::RandomState,
    /// Directories each spec covers (derived: kept with `full`).
    covered: HashMap<SpecId, usize>,
    /// Specs whose coverage or root presence changed since the last
    /// [`take_touched`](Index::take_touched).
    touched: Vec<SpecId>,
    /// What [`DirNode::first_read`] counts from (set at the first fill;
    /// monotonic clock).
    epoch: Option<Instant>,
    /// The covering sets the nodes share.
    sets: SpecSets,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("dirs", &self.by_path.len())
            .field("free", &self.free.len())
            .finish_non_exhaustive()
    }
}

impl Index {
    pub(crate) fn lookup(&self, path: &Path) -> Option<DirId> {
        self.lookup_hashed(self.hasher.hash_one(path), path)
    }

    /// [`lookup`](Self::lookup) with the path's hash already made.
    fn lookup_hashed(&self, hash: u64, path: &Path) -> Option<DirId> {
        let nodes = &self.nodes;
        self.by_path
            .find(hash, |&id| {
                nodes[id as usize]
                    .as_ref()
                    .is_some_and(|n| *n.path == *path)
            })
            .map(|&id| id as DirId)
    }

    pub(crate) fn get(&self, id: DirId) -> Option<&DirNode> {
        self.nodes.get(id).and_then(Option::as_ref)
    }

    fn node_mut(&mut self, id: DirId) -> Option<&mut DirNode> {
        self.nodes.get_mut(id).and_then(Option::as_mut)
    }

    fn touch(&mut self, sid: SpecId) {
        if self.touched.last() != Some(&sid) {
            self.touched.push(sid);
        }
    }

    /// Specs whose coverage count or root presence may have changed since
    /// the last call, sorted, each once.
    pub(crate) fn take_touched(&mut self) -> Vec<SpecId> {
        let mut t = std::mem::take(&mut self.touched);
        t.sort_unstable();
        t.dedup();
        t
    }

    /// The node for `path`, created empty if absent; `true` if created.
    pub(crate) fn ensure(&mut self, path: &Path) -> (DirId, bool) {
        let hash = self.hasher.hash_one(path);
        if let Some(id) = self.lookup_hashed(hash, path) {
            return (id, false);
        }
        let node = DirNode::new(Arc::from(path));
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
        let (nodes, hasher) = (&self.nodes, &self.hasher);
        let slot = u32::try_from(id).expect("fewer than 2^32 directories");
        self.by_path.insert_unique(hash, slot, |&i| {
            // Every id in the table is a live node's.
            nodes[i as usize]
                .as_ref()
                .map_or(0, |n| hasher.hash_one(&*n.path))
        });
        (id, true)
    }

    /// Removes a node (not what is below it) and returns it.
    pub(crate) fn remove(&mut self, id: DirId) -> Option<DirNode> {
        let node = self.nodes.get_mut(id)?.take()?;
        if let Ok(e) = self
            .by_path
            .find_entry(self.hasher.hash_one(&*node.path), |&i| i as DirId == id)
        {
            e.remove();
        }
        self.free.push(id);
        for &s in node.full() {
            if let Some(n) = self.covered.get_mut(&s) {
                *n = n.saturating_sub(1);
            }
            self.touch(s);
        }
        for p in node.partial.iter() {
            self.touch(p.spec);
        }
        Some(node)
    }

    /// Spec `sid` covers directory `id` from now on; false if it did.
    pub(crate) fn cover(&mut self, id: DirId, sid: SpecId) -> bool {
        let Some(node) = self.nodes.get_mut(id).and_then(Option::as_mut) else {
            return false;
        };
        if node.covers(sid) {
            return false;
        }
        node.full = self.sets.with(&node.full, sid);
        *self.covered.entry(sid).or_default() += 1;
        self.touch(sid);
        true
    }

    /// Spec `sid` no longer covers directory `id`; whether no spec needs
    /// it any more (still indexed: the caller frees it).
    pub(crate) fn uncover(&mut self, id: DirId, sid: SpecId) -> bool {
        let Some(node) = self.nodes.get_mut(id).and_then(Option::as_mut) else {
            return false;
        };
        let removed = node.covers(sid);
        if removed {
            node.full = self.sets.without(&node.full, sid);
        }
        let unused = node.is_unused();
        if removed {
            if let Some(c) = self.covered.get_mut(&sid) {
                *c = c.saturating_sub(1);
            }
            self.touch(sid);
        }
        unused
    }

    /// Removes every registration of `sid`; returns the directories no spec
    /// needs any more (still indexed: the caller frees them).
    pub(crate) fn detach(&mut self, sid: SpecId) -> Vec<DirId> {
        let mut unused = Vec::new();
        for (id, slot) in self.nodes.iter_mut().enumerate() {
            if let Some(node) = slot {
                if node.covers(sid) {
                    node.full = self.sets.without(&node.full, sid);
                }
                node.partial.retain(|p| p.spec != sid);
                if node.is_unused() {
                    unused.push(id);
                }
            }
        }
        self.covered.remove(&sid);
        self.touch(sid);
        unused
    }

    /// Registers a spec's interest in one name of directory `id`.
    pub(crate) fn add_partial(&mut self, id: DirId, p: Partial) {
        let sid = p.spec;
        if let Some(node) = self.node_mut(id) {
            node.partial.push(p);
            self.touch(sid);
        }
    }

    /// Drops the registration of root `root` of `sid` at `id`; whether
    /// there was one.
    pub(crate) fn remove_partial(&mut self, id: DirId, sid: SpecId, root: &Path) -> bool {
        let Some(node) = self.node_mut(id) else {
            return false;
        };
        let before = node.partial.len();
        node.partial.retain(|p| !(p.spec == sid && p.root == root));
        let removed = node.partial.len() != before;
        if removed {
            self.touch(sid);
        }
        removed
    }

    /// Where root `root` of `sid` is registered: at the nearest ancestor
    /// holding its registration.
    pub(crate) fn find_partial(&self, sid: SpecId, root: &Path) -> Option<DirId> {
        root.ancestors().skip(1).find_map(|a| {
            let id = self.lookup(a)?;
            self.get(id)?
                .partial
                .iter()
                .any(|p| p.spec == sid && p.root == root)
                .then_some(id)
        })
    }

    /// Whether root `root` of `sid` exists as far as the index knows: its
    /// parent is indexed with a root registration, and lists it.
    pub(crate) fn root_present(&self, sid: SpecId, root: &Path) -> bool {
        let Some(name) = root.file_name() else {
            return true; // the file system root
        };
        let Some(node) = self.find_partial(sid, root).and_then(|id| self.get(id)) else {
            return false;
        };
        node.partial
            .iter()
            .any(|p| p.spec == sid && p.root == root && p.is_root)
            && node.entries.get(name).is_some()
    }

    /// Sets entry `name` of directory `id`; returns the type it had.
    pub(crate) fn set_entry(&mut self, id: DirId, name: &OsStr, t: FileType) -> Option<FileType> {
        let node = self.node_mut(id)?;
        let old = node.entries.insert(name, t);
        self.touch_roots(id, name);
        old
    }

    /// Removes entry `name` of directory `id`; returns the type it had.
    pub(crate) fn remove_entry(&mut self, id: DirId, name: &OsStr) -> Option<FileType> {
        let old = self.node_mut(id)?.entries.remove(name)?;
        self.touch_roots(id, name);
        Some(old)
    }

    fn touch_roots(&mut self, id: DirId, name: &OsStr) {
        let Some(node) = self.nodes.get(id).and_then(Option::as_ref) else {
            return;
        };
        if node.partial.is_empty() {
            return;
        }
        let specs: SpecList = node.root_specs(name).collect();
        for s in specs {
            self.touch(s);
        }
    }

    /// `t` in ms after the epoch, rounded down, at least 1 (the epoch is
    /// set to just before the first `t` asked for).
    fn ms_of(&mut self, t: Instant) -> u32 {
        let epoch = *self
            .epoch
            .get_or_insert_with(|| t.checked_sub(Duration::from_millis(1)).unwrap_or(t));
        let ms = t.saturating_duration_since(epoch).as_millis();
        u32::try_from(ms).unwrap_or(u32::MAX).max(1)
    }

    /// Directory `id` was read in full, in a read that began at `read_at`:
    /// adds what is new of `list` and returns it (in name order), marks
    /// the node complete.
    pub(crate) fn fill(
        &mut self,
        id: DirId,
        list: Vec<(OsString, FileType)>,
        read_at: Instant,
    ) -> Vec<(OsString, FileType)> {
        self.read_in_full(id, read_at, |entries| {
            let added = entries.extend_new(list);
            entries.shrink_to_fit();
            added
        })
        .unwrap_or_default()
    }

    /// What every full read of directory `id` (begun at `read_at`) does:
    /// `f` puts what was read into its entries; the node is complete, its
    /// first read dated (when it held no entry yet: a fill adds and never
    /// removes, so names a partial node held may be stale), and the specs
    /// waiting in it told. `None`: no such node.
    fn read_in_full<R>(
        &mut self,
        id: DirId,
        read_at: Instant,
        f: impl FnOnce(&mut Listing) -> R,
    ) -> Option<R> {
        let ms = self.ms_of(read_at);
        let node = self.node_mut(id)?;
        if !node.complete && node.entries.len() == 0 {
            node.first_read = ms;
        }
        node.complete = true;
        let out = f(&mut node.entries);
        let specs: SpecList = node.partial.iter().map(|p| p.spec).collect();
        for s in specs {
            self.touch(s);
        }
        Some(out)
    }

    /// [`fill`](Self::fill) with a first read already in the index's form
    /// ([`Listing::of_read`]): it becomes the node's entries when the node
    /// holds none yet (no copy), else its entries are added as `fill` adds
    /// them. Returns the entries added, in name order, when `added` asks.
    pub(crate) fn fill_listing(
        &mut self,
        id: DirId,
        listing: Listing,
        read_at: Instant,
        added: bool,
    ) -> Vec<(OsString, FileType)> {
        if !self.get(id).is_some_and(|n| n.entries.is_blank()) {
            let list = listing.iter().map(|(n, t)| (n.to_os_string(), t)).collect();
            return self.fill(id, list, read_at);
        }
        self.read_in_full(id, read_at, |entries| {
            *entries = listing;
            match added {
                true => entries.iter().map(|(n, t)| (n.to_os_string(), t)).collect(),
                false => Vec::new(),
            }
        })
        .unwrap_or_default()
    }

    /// Directories spec `sid` covers.
    pub(crate) fn covered_dirs(&self, sid: SpecId) -> usize {
        self.covered.get(&sid).copied().unwrap_or(0)
    }

    pub(crate) fn len(&self) -> usize {
        self.by_path.len()
    }

    /// Whether directory `id`'s first full read began after `t` (so it
    /// shows every change made before `t`). Judged in whole ms, erring
    /// towards `false`.
    pub(crate) fn first_read_after(&self, id: DirId, t: Instant) -> bool {
        let (Some(node), Some(epoch)) = (self.get(id), self.epoch) else {
            return false;
        };
        // A time before the epoch (just before the first fill) is before
        // every first read.
        let since = t.saturating_duration_since(epoch);
        let t_ms = u32::try_from(since.as_millis()).unwrap_or(u32::MAX);
        node.first_read > t_ms && node.first_read < u32::MAX
    }

    pub(crate) fn ids(&self) -> Vec<DirId> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.as_ref().map(|_| i))
            .collect()
    }

    /// Ids of the nodes for which `keep` holds.
    pub(crate) fn ids_where(&self, mut keep: impl FnMut(DirId, &DirNode) -> bool) -> Vec<DirId> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.as_ref().filter(|n| keep(i, n)).map(|_| i))
            .collect()
    }

    /// Total number of indexed entries.
    pub(crate) fn entry_count(&self) -> usize {
        self.nodes.iter().flatten().map(|n| n.entries.len()).sum()
    }
}

#[cfg(test)]
impl Index {
    /// Test helper: renames the waited-for name of a registration.
    fn partial_mut_name(&mut self, id: DirId, sid: SpecId, root: &Path, name: &str) {
        let node = self.node_mut(id).unwrap();
        for p in node.partial.iter_mut() {
            if p.spec == sid && p.root == root {
                p.name = name.into();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use FileType::*;

    #[test]
    fn index_ensure_lookup_remove_reuse() {
        let mut ix = Index::default();
        let (a, created) = ix.ensure(Path::new("/a"));
        assert!(created);
        assert_eq!(ix.ensure(Path::new("/a")), (a, false));
        let (b, _) = ix.ensure(Path::new("/a/b"));
        assert_ne!(a, b);
        ix.set_entry(b, OsStr::new("f"), File);
        assert_eq!(ix.entry_count(), 1);
        assert_eq!(ix.len(), 2);
        let node = ix.remove(b).unwrap();
        assert_eq!(&**node.path(), Path::new("/a/b"));
        assert!(ix.lookup(Path::new("/a/b")).is_none());
        assert!(ix.get(b).is_none());
        let (c, _) = ix.ensure(Path::new("/c"));
        assert_eq!(c, b, "freed slot is reused");
        assert_eq!(ix.ids(), vec![a, c]);
    }

    /// The path map keeps ids only and hashes the nodes' own paths: it must
    /// find every live path and none of the removed ones through growth,
    /// removals and reused slots.
    #[test]
    fn the_path_map_finds_every_live_path_through_growth_and_reuse() {
        let mut ix = Index::default();
        let p = |i: usize| PathBuf::from(format!("/r/{}/d{i}", i % 7));
        let ids: Vec<DirId> = (0..5_000).map(|i| ix.ensure(&p(i)).0).collect();
        for i in (0..5_000).step_by(2) {
            assert!(ix.remove(ids[i]).is_some());
        }
        // Reused slots under new paths.
        for i in 5_000..6_000 {
            ix.ensure(&p(i));
        }
        for i in 0..6_000 {
            let found = ix.lookup(&p(i));
            if i < 5_000 && i % 2 == 0 {
                assert_eq!(found, None, "{} was removed", p(i).display());
            } else {
                let id = found.unwrap_or_else(|| panic!("{} is lost", p(i).display()));
                assert_eq!(&**ix.get(id).unwrap().path(), p(i).as_path());
            }
        }
        assert_eq!(ix.len(), 3_500);
        // Equal paths spelled alike by components are one node.
        assert_eq!(ix.lookup(Path::new("/r/1/d1/")), ix.lookup(&p(1)));
    }

    #[test]
    fn tracks_names() {
        let mut ix = Index::default();
        let (p, _) = ix.ensure(Path::new("/p"));
        assert!(!ix.get(p).unwrap().tracks(OsStr::new("x")));
        ix.add_partial(p, partial(1, "/p/x", true));
        let n = ix.get(p).unwrap();
        assert!(n.tracks(OsStr::new("x")));
        assert!(!n.tracks(OsStr::new("y")));
        assert!(!n.is_unused());
        ix.fill(p, vec![], Instant::now());
        assert!(ix.get(p).unwrap().tracks(OsStr::new("y")));
    }

    /// A first read in the index's form fills a blank node as `fill` does
    /// (the same entries, what was added, completeness) and adds only what
    /// is new to a node that already holds a name.
    #[test]
    fn a_listing_built_where_it_was_read_fills_as_a_list_does() {
        let list = || {
            vec![
                (OsString::from("b"), FileType::File),
                (OsString::from("a"), FileType::Dir),
                (OsString::from("b"), FileType::File),
            ]
        };
        let t = Instant::now();
        let (mut x, mut y) = (Index::default(), Index::default());
        let (xa, _) = x.ensure(Path::new("/d"));
        let (ya, _) = y.ensure(Path::new("/d"));
        let by_list = x.fill(xa, list(), t);
        let by_listing = y.fill_listing(ya, Listing::of_read(list()), t, true);
        assert_eq!(by_list, by_listing);
        assert_eq!(by_listing.len(), 2, "a name twice counts once");
        let (nx, ny) = (x.get(xa).unwrap(), y.get(ya).unwrap());
        assert_eq!(nx.entries(), ny.entries());
        assert!(ny.complete());
        assert!(
            y.fill_listing(ya, Listing::of_read(list()), t, false)
                .is_empty(),
            "nothing asked for"
        );
        // A node holding a name already: only the new ones are added.
        let (p, _) = y.ensure(Path::new("/p"));
        y.add_partial(p, partial(1, "/p/a", true));
        y.set_entry(p, OsStr::new("a"), FileType::Dir);
        let added = y.fill_listing(p, Listing::of_read(list()), t, true);
        assert_eq!(added, vec![(OsString::from("b"), FileType::File)]);
        assert_eq!(y.get(p).unwrap().entries().len(), 2);
    }

    /// The layout the memory figures rest on (issue 12): a directory's
    /// node is 64 bytes, its entries and covering set outside it.
    #[test]
    fn a_directory_node_stays_small() {
        assert!(std::mem::size_of::<Option<DirNode>>() <= 64);
    }

    #[test]
    fn first_reads_are_dated_to_the_millisecond() {
        let mut ix = Index::default();
        let (a, _) = ix.ensure(Path::new("/a"));
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        assert!(!ix.first_read_after(a, t0), "not read yet");
        ix.fill(a, vec![], t0 + 10 * ms);
        assert!(ix.first_read_after(a, t0));
        assert!(ix.first_read_after(a, t0 + 9 * ms));
        assert!(!ix.first_read_after(a, t0 + 10 * ms), "same ms: not after");
        assert!(!ix.first_read_after(a, t0 + 20 * ms));
        // Later reads do not move it.
        ix.fill(a, vec![], t0 + 50 * ms);
        assert!(!ix.first_read_after(a, t0 + 20 * ms));
    }

    fn partial(spec: SpecId, root: &str, is_root: bool) -> Partial {
        let root = PathBuf::from(root);
        Partial {
            spec,
            name: root.file_name().unwrap().to_os_string(),
            is_root,
            root,
        }
    }

    /// Coverage counts follow every way a directory gains or loses a spec.
    #[test]
    fn covered_counts_are_kept_per_spec() {
        let mut ix = Index::default();
        let (a, _) = ix.ensure(Path::new("/a"));
        let (b, _) = ix.ensure(Path::new("/a/b"));
        assert!(ix.cover(a, 1));
        assert!(!ix.cover(a, 1), "once per directory");
        ix.cover(b, 1);
        ix.cover(b, 2);
        assert_eq!((ix.covered_dirs(1), ix.covered_dirs(2)), (2, 1));
        ix.remove(b);
        assert_eq!((ix.covered_dirs(1), ix.covered_dirs(2)), (1, 0));
        ix.cover(a, 2);
        assert_eq!(ix.detach(2), Vec::<DirId>::new(), "a is still covered by 1");
        assert_eq!(ix.covered_dirs(2), 0);
        assert_eq!(ix.detach(1), vec![a], "a is unused now");
        assert_eq!(ix.covered_dirs(1), 0);
    }

    /// A root is present when its parent lists it under a root
    /// registration; a registration at a farther ancestor means missing.
    #[test]
    fn root_presence_is_derived_from_registrations() {
        let mut ix = Index::default();
        let (base, _) = ix.ensure(Path::new("/base"));
        let root = Path::new("/base/a/b");
        // Waiting at the nearest existing ancestor: missing.
        ix.add_partial(base, partial(7, "/base/a/b", false));
        ix.partial_mut_name(base, 7, root, "a");
        assert_eq!(ix.find_partial(7, root), Some(base));
        assert!(!ix.root_present(7, root));
        ix.set_entry(base, OsStr::new("a"), Dir);
        assert!(!ix.root_present(7, root), "only a step towards it");
        // Registered at its parent: present while listed there.
        assert!(ix.remove_partial(base, 7, root));
        let (a, _) = ix.ensure(Path::new("/base/a"));
        ix.add_partial(a, partial(7, "/base/a/b", true));
        assert!(!ix.root_present(7, root));
        ix.take_touched();
        ix.set_entry(a, OsStr::new("b"), Dir);
        assert!(ix.root_present(7, root));
        assert_eq!(
            ix.take_touched(),
            vec![7],
            "a root's entry touches its spec"
        );
        ix.set_entry(a, OsStr::new("other"), File);
        assert_eq!(
            ix.take_touched(),
            Vec::<SpecId>::new(),
            "other names do not"
        );
        ix.remove_entry(a, OsStr::new("b"));
        assert!(!ix.root_present(7, root));
        assert!(
            ix.root_present(7, Path::new("/")),
            "the file system root is never missing"
        );
    }
}

#[cfg(all(test, target_pointer_width = "64"))]
mod size_tests {
    /// A directory's fixed cost: every byte here is paid once per indexed
    /// directory (10,000 of them in the benchmark's 10,000 x 10 tree).
    #[test]
    fn dir_node_stays_small() {
        let size = std::mem::size_of::<Option<super::DirNode>>();
        eprintln!("Option<DirNode>: {size} bytes");
        assert!(size <= 136, "Option<DirNode> grew to {size} bytes");
    }
}
