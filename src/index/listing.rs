//! One directory's entries, compact, and the diff between an indexed
//! listing and a fresh read.
//!
//! Pure: no I/O.

use std::ffi::{OsStr, OsString};

use crate::change::FileType;

/// Most entries a [`Listing`] keeps outside its sorted table before merging
/// them in: lookups scan this many at worst, and a merge (linear in the
/// directory's size) happens once per this many insertions.
const TAIL: usize = 64;

/// Record type byte of a removed entry whose bytes are not reclaimed yet.
const DEAD: u8 = 0xff;

/// One directory's entries, compact: each name is stored once, back to back
/// in one byte buffer, next to its type; a table of `u32` offsets, sorted
/// by name, finds them. About 6 bytes plus the name per entry, and two
/// allocations per directory, where a `BTreeMap<OsString, _>` costs an
/// allocation per name and some 40 bytes of tree per entry.
///
/// A record is a type byte, the name's length as LEB128, then the name's
/// bytes. A removed entry is marked dead in place; its name keeps sorting
/// the table until the buffer is compacted (when dead bytes outweigh live
/// ones), and re-adding it revives the record. New names go to an unsorted
/// tail of at most [`TAIL`] offsets that is merged into the sorted part
/// when full. Iteration follows the buffer: insertion order, sorted after a
/// compaction. The buffer is limited to 4 GiB of names per directory.
#[derive(Clone, Default)]
pub(crate) struct Listing {
    buf: Vec<u8>,
    /// `offs[..sorted]` sorted by name, the rest in insertion order.
    offs: Vec<u32>,
    sorted: u32,
    live: u32,
    dead_bytes: u32,
}

fn name_bytes(name: &OsStr) -> &[u8] {
    name.as_encoded_bytes()
}

fn os_str(bytes: &[u8]) -> &OsStr {
    // SAFETY: every stored name was taken whole from an `OsStr` by
    // `as_encoded_bytes` and is handed back whole.
    unsafe { OsStr::from_encoded_bytes_unchecked(bytes) }
}

fn type_byte(t: FileType) -> u8 {
    match t {
        FileType::File => 0,
        FileType::Dir => 1,
        FileType::Symlink => 2,
        FileType::Other => 3,
    }
}

fn byte_type(b: u8) -> Option<FileType> {
    match b {
        0 => Some(FileType::File),
        1 => Some(FileType::Dir),
        2 => Some(FileType::Symlink),
        3 => Some(FileType::Other),
        _ => None,
    }
}

/// Bytes of the record of a name `n` bytes long: type, LEB128 length, name.
fn record_len(n: usize) -> usize {
    let mut len_bytes = 1;
    let mut rest = n >> 7;
    while rest > 0 {
        len_bytes += 1;
        rest >>= 7;
    }
    1 + len_bytes + n
}

/// Decodes the record at `off` in `buf`: its name and its length in bytes.
fn record_in(buf: &[u8], off: u32) -> (&[u8], usize) {
    let o = off as usize;
    let mut len = 0usize;
    let mut shift = 0;
    let mut i = o + 1;
    loop {
        let b = buf[i];
        i += 1;
        len |= ((b & 0x7f) as usize) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    (&buf[i..i + len], i + len - o)
}

impl Listing {
    fn record(&self, off: u32) -> (&[u8], usize) {
        record_in(&self.buf, off)
    }

    fn name_at(&self, off: u32) -> &[u8] {
        self.record(off).0
    }

    /// The position in the sorted part of `offs` of the record named
    /// `name`, dead or alive.
    fn find_sorted(&self, name: &[u8]) -> Option<usize> {
        self.offs[..self.sorted as usize]
            .binary_search_by(|o| self.name_at(*o).cmp(name))
            .ok()
    }

    /// The position in `offs` of the record named `name`, dead or alive.
    fn find(&self, name: &[u8]) -> Option<usize> {
        if let Some(i) = self.find_sorted(name) {
            return Some(i);
        }
        self.offs[self.sorted as usize..]
            .iter()
            .position(|o| self.name_at(*o) == name)
            .map(|i| i + self.sorted as usize)
    }

    /// The type of the entry `name`, if present.
    pub(crate) fn get(&self, name: &OsStr) -> Option<FileType> {
        let i = self.find(name_bytes(name))?;
        byte_type(self.buf[self.offs[i] as usize])
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.live as usize
    }

    /// Appends a record; returns its offset.
    fn push_record(&mut self, name: &[u8], t: FileType) -> u32 {
        let off = u32::try_from(self.buf.len())
            .ok()
            .filter(|o| o.checked_add(name.len() as u32 + 6).is_some())
            .expect("a directory listing holds at most 4 GiB of names");
        self.buf.push(type_byte(t));
        let mut len = name.len();
        loop {
            let b = (len & 0x7f) as u8;
            len >>= 7;
            if len == 0 {
                self.buf.push(b);
                break;
            }
            self.buf.push(b | 0x80);
        }
        self.buf.extend_from_slice(name);
        off
    }

    /// Sets `name`'s type; returns the type it had, if it was present.
    pub(crate) fn insert(&mut self, name: &OsStr, t: FileType) -> Option<FileType> {
        let bytes = name_bytes(name);
        if let Some(i) = self.find(bytes) {
            let off = self.offs[i];
            let old = byte_type(self.buf[off as usize]);
            if old.is_none() {
                self.live += 1;
                self.dead_bytes -= self.record(off).1 as u32;
            }
            self.buf[off as usize] = type_byte(t);
            return old;
        }
        let off = self.push_record(bytes, t);
        self.offs.push(off);
        self.live += 1;
        if self.offs.len() - self.sorted as usize > TAIL {
            self.merge_tail();
        }
        None
    }

    /// Removes `name`; returns its type if it was present.
    pub(crate) fn remove(&mut self, name: &OsStr) -> Option<FileType> {
        let i = self.find(name_bytes(name))?;
        let off = self.offs[i] as usize;
        let old = byte_type(self.buf[off])?;
        self.buf[off] = DEAD;
        self.live -= 1;
        self.dead_bytes += self.record(off as u32).1 as u32;
        if self.dead_bytes as usize > self.buf.len() / 2 && self.buf.len() > 256 {
            self.compact();
        }
        Some(old)
    }

    /// Adds every name of `fresh` not present yet and returns those, in
    /// name order (a name given twice counts once, first type given). One sort for the lot,
    /// where [`Listing::insert`] would merge every [`TAIL`] names.
    pub(crate) fn extend_new(
        &mut self,
        mut fresh: Vec<(OsString, FileType)>,
    ) -> Vec<(OsString, FileType)> {
        self.merge_tail();
        fresh.sort_by(|a, b| name_bytes(&a.0).cmp(name_bytes(&b.0)));
        fresh.dedup_by(|a, b| a.0 == b.0);
        if self.offs.is_empty() && self.buf.is_empty() {
            // A first read: sized exactly, no growth (whose freed
            // remainders would stay in the heap), already sorted.
            let bytes: usize = fresh.iter().map(|(n, _)| record_len(n.len())).sum();
            self.buf.reserve_exact(bytes);
            self.offs.reserve_exact(fresh.len());
            for (name, t) in &fresh {
                let off = self.push_record(name_bytes(name), *t);
                self.offs.push(off);
            }
            self.live = fresh.len() as u32;
            self.sorted = self.live;
            return fresh;
        }
        let mut added = Vec::new();
        for (name, t) in fresh {
            let bytes = name_bytes(&name);
            match self.find_sorted(bytes) {
                Some(i) => {
                    let off = self.offs[i] as usize;
                    if self.buf[off] == DEAD {
                        self.buf[off] = type_byte(t);
                        self.live += 1;
                        self.dead_bytes -= self.record(off as u32).1 as u32;
                        added.push((name, t));
                    }
                }
                None => {
                    let off = self.push_record(bytes, t);
                    self.offs.push(off);
                    self.live += 1;
                    added.push((name, t));
                }
            }
        }
        self.merge_tail();
        added
    }

    /// Sorts the tail and merges it into the sorted part (linear).
    fn merge_tail(&mut self) {
        let n = self.sorted as usize;
        if self.offs.len() == n {
            return;
        }
        let mut tail = self.offs.split_off(n);
        let buf = &self.buf;
        let name = |o: &u32| record_in(buf, *o).0;
        tail.sort_unstable_by(|a, b| name(a).cmp(name(b)));
        // Merge from the back, in place.
        let mut out = self.offs.len() + tail.len();
        self.offs.resize(out, 0);
        let (mut i, mut j) = (n, tail.len());
        while j > 0 {
            out -= 1;
            if i > 0 && name(&self.offs[i - 1]) > name(&tail[j - 1]) {
                self.offs[out] = self.offs[i - 1];
                i -= 1;
            } else {
                self.offs[out] = tail[j - 1];
                j -= 1;
            }
        }
        self.sorted = self.offs.len() as u32;
    }

    /// Rewrites the buffer with live records only, in name order.
    fn compact(&mut self) {
        self.merge_tail();
        let mut next = Listing {
            buf: Vec::with_capacity(self.buf.len() - self.dead_bytes as usize),
            offs: Vec::with_capacity(self.live as usize),
            ..Listing::default()
        };
        for &off in &self.offs {
            let t = self.buf[off as usize];
            if let Some(t) = byte_type(t) {
                let o = next.push_record(self.name_at(off), t);
                next.offs.push(o);
            }
        }
        next.sorted = next.offs.len() as u32;
        next.live = next.offs.len() as u32;
        *self = next;
    }

    /// Gives back spare capacity (after a directory's first read).
    pub(crate) fn shrink_to_fit(&mut self) {
        if self.dead_bytes > 0 {
            self.compact();
        }
        self.buf.shrink_to_fit();
        self.offs.shrink_to_fit();
    }

    /// Every entry, in buffer order.
    pub(crate) fn iter(&self) -> ListingIter<'_> {
        ListingIter { l: self, at: 0 }
    }
}

/// Iterator over a [`Listing`]'s entries.
pub(crate) struct ListingIter<'a> {
    l: &'a Listing,
    at: usize,
}

impl<'a> Iterator for ListingIter<'a> {
    type Item = (&'a OsStr, FileType);

    fn next(&mut self) -> Option<Self::Item> {
        while self.at < self.l.buf.len() {
            let off = self.at as u32;
            let (name, len) = self.l.record(off);
            let t = self.l.buf[self.at];
            self.at += len;
            if let Some(t) = byte_type(t) {
                return Some((os_str(name), t));
            }
        }
        None
    }
}

impl std::fmt::Debug for Listing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl PartialEq for Listing {
    /// Same entries, whatever the layout.
    fn eq(&self, other: &Listing) -> bool {
        self.len() == other.len() && self.iter().all(|(n, t)| other.get(n) == Some(t))
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

impl EntryDiff {
    /// The entry's name.
    pub(crate) fn name(&self) -> &OsStr {
        match self {
            EntryDiff::Added(n, _) | EntryDiff::Removed(n, _) | EntryDiff::Retyped(n, _, _) => n,
        }
    }
}

/// Diffs an indexed listing against a fresh one. `fresh` need not be sorted;
/// a name in it twice counts once. Output is in name order.
pub(crate) fn diff(indexed: &Listing, mut fresh: Vec<(OsString, FileType)>) -> Vec<EntryDiff> {
    fresh.sort_by(|a, b| name_bytes(&a.0).cmp(name_bytes(&b.0)));
    fresh.dedup_by(|a, b| a.0 == b.0);
    let mut out = Vec::new();
    for (n, t) in &fresh {
        match indexed.get(n) {
            None => out.push(EntryDiff::Added(n.clone(), *t)),
            Some(o) if o != *t => out.push(EntryDiff::Retyped(n.clone(), o, *t)),
            Some(_) => {}
        }
    }
    for (n, t) in indexed.iter() {
        let bytes = name_bytes(n);
        if fresh
            .binary_search_by(|(f, _)| name_bytes(f).cmp(bytes))
            .is_err()
        {
            out.push(EntryDiff::Removed(n.to_os_string(), t));
        }
    }
    out.sort_by(|a, b| name_bytes(a.name()).cmp(name_bytes(b.name())));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use FileType::*;
    use std::collections::BTreeMap;

    fn listing(items: &[(&str, FileType)]) -> Listing {
        let mut l = Listing::default();
        for (n, t) in items {
            l.insert(OsStr::new(n), *t);
        }
        l
    }

    fn model(l: &Listing) -> BTreeMap<OsString, FileType> {
        l.iter().map(|(n, t)| (n.to_os_string(), t)).collect()
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

    const TYPES: [FileType; 4] = [File, Dir, Symlink, Other];

    /// A seeded xorshift generator.
    fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        }
    }

    /// Random listings: applying the diff to the old listing gives the new.
    #[test]
    fn diff_applied_gives_fresh_listing() {
        let mut rnd = xorshift(0x9e3779b97f4a7c15u64);
        for _ in 0..500 {
            let mut old = BTreeMap::new();
            let mut new = Vec::new();
            for i in 0..(rnd() % 20) {
                if !rnd().is_multiple_of(3) {
                    old.insert(OsString::from(format!("n{i}")), TYPES[(rnd() % 4) as usize]);
                }
                if !rnd().is_multiple_of(3) {
                    new.push((OsString::from(format!("n{i}")), TYPES[(rnd() % 4) as usize]));
                }
            }
            let mut applied = old.clone();
            let indexed = Listing::default().tap_extend(old.clone());
            for d in diff(&indexed, new.clone()) {
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

    impl Listing {
        fn tap_extend(mut self, m: BTreeMap<OsString, FileType>) -> Listing {
            self.extend_new(m.into_iter().collect());
            self
        }
    }

    /// A name of `len` bytes from a number; some are not UTF-8 (on Unix).
    fn name(i: u64, len: usize) -> OsString {
        let mut b = format!("n{i}").into_bytes();
        #[cfg(unix)]
        if i.is_multiple_of(7) {
            b.push(0xff);
        }
        while b.len() < len {
            b.push(b'a' + (i % 26) as u8);
        }
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStringExt;
            OsString::from_vec(b)
        }
        #[cfg(not(unix))]
        OsString::from(String::from_utf8(b).unwrap())
    }

    /// Random inserts, retypes and removes, with bulk extends between,
    /// against a `BTreeMap` model: every answer and the final contents
    /// agree, through tail merges, revivals and compactions.
    #[test]
    fn listing_matches_a_map_model() {
        let mut rnd = xorshift(0x2545f4914f6cdd1du64);
        for round in 0..24 {
            let mut l = Listing::default();
            let mut m: BTreeMap<OsString, FileType> = BTreeMap::new();
            // Small key spaces revive dead records; big ones merge tails.
            let space = [8u64, 100, 3000][round % 3];
            let ops = 3000;
            for _ in 0..ops {
                let n = name(rnd() % space, [1usize, 12, 130, 255][(rnd() % 4) as usize]);
                let t = TYPES[(rnd() % 4) as usize];
                match rnd() % 10 {
                    0..=4 => assert_eq!(l.insert(&n, t), m.insert(n.clone(), t)),
                    5..=7 => assert_eq!(l.remove(&n), m.remove(&n)),
                    8 => assert_eq!(l.get(&n), m.get(&n).copied()),
                    _ => {
                        let fresh: Vec<(OsString, FileType)> = (0..(rnd() % 200))
                            .map(|_| (name(rnd() % space, 12), TYPES[(rnd() % 4) as usize]))
                            .collect();
                        let mut want = Vec::new();
                        for (n, t) in &fresh {
                            if !m.contains_key(n) {
                                m.insert(n.clone(), *t);
                                want.push((n.clone(), *t));
                            }
                        }
                        let mut got = l.extend_new(fresh);
                        got.sort();
                        want.sort();
                        assert_eq!(got, want);
                    }
                }
                assert_eq!(l.len(), m.len());
            }
            assert_eq!(model(&l), m, "round {round}");
            for (n, t) in &m {
                assert_eq!(l.get(n), Some(*t));
            }
            l.shrink_to_fit();
            assert_eq!(model(&l), m, "after shrinking, round {round}");
            assert_eq!(l.dead_bytes, 0);
            assert_eq!(l.sorted as usize, l.offs.len());
        }
    }

    /// Removing everything from a big listing compacts it: dead bytes never
    /// outweigh live ones by more than the small-buffer allowance.
    #[test]
    fn listing_reclaims_removed_names() {
        let mut l = Listing::default();
        let names: Vec<OsString> = (0..10_000).map(|i| name(i, 20)).collect();
        for n in &names {
            l.insert(n, File);
        }
        let full = l.buf.len();
        for n in &names[..9_990] {
            assert_eq!(l.remove(n), Some(File));
            assert!(
                l.dead_bytes as usize <= l.buf.len() / 2 + 256,
                "dead {} of {}",
                l.dead_bytes,
                l.buf.len()
            );
        }
        assert_eq!(l.len(), 10);
        assert!(l.buf.len() < full / 100, "buffer {} of {full}", l.buf.len());
        assert_eq!(l.remove(&names[0]), None);
        assert_eq!(l.get(&names[9_995]), Some(File));
    }

    /// A first read is stored at its exact size (no growth slack), sorted,
    /// long names (two length bytes) included.
    #[test]
    fn a_first_fill_is_exactly_sized() {
        let mut l = Listing::default();
        let mut fresh: Vec<(OsString, FileType)> =
            (0..100).rev().map(|i| (name(i, 9), File)).collect();
        fresh.push((OsString::from("x".repeat(300)), Dir));
        fresh.push((name(7, 9), Dir)); // a duplicate: the first type wins
        let added = l.extend_new(fresh);
        assert_eq!(added.len(), 101);
        assert_eq!(l.buf.capacity(), l.buf.len());
        assert_eq!(l.offs.capacity(), l.offs.len());
        assert_eq!(l.buf.len(), 100 * (2 + 9) + (3 + 300));
        assert_eq!(l.sorted as usize, l.offs.len());
        assert_eq!(l.get(&name(7, 9)), Some(File));
        assert_eq!(l.get(OsStr::new(&"x".repeat(300))), Some(Dir));
        assert_eq!(l.extend_new(vec![(name(3, 9), Dir)]), []);
        assert_eq!(l.insert(&name(500, 9), File), None);
        assert_eq!(l.len(), 102);
    }

    /// A bulk extend keeps the table sorted, so lookups stay binary.
    #[test]
    fn listing_extend_sorts_once() {
        let mut l = Listing::default();
        let fresh: Vec<(OsString, FileType)> =
            (0..5_000).rev().map(|i| (name(i, 9), File)).collect();
        let added = l.extend_new(fresh.clone());
        assert_eq!(added.len(), 5_000);
        assert_eq!(l.sorted as usize, l.offs.len());
        assert!(
            l.extend_new(fresh).is_empty(),
            "nothing new the second time"
        );
        assert_eq!(l.len(), 5_000);
        assert!(
            l.offs.windows(2).all(|w| l.name_at(w[0]) < l.name_at(w[1])),
            "sorted table"
        );
    }
}
