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

use crate::batch::change::FileType;

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
mod tests;

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
