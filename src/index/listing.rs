//! One directory's entries, compact, and the diff between an indexed
//! listing and a fresh read.
//!
//! Pure: no I/O.

use std::ffi::{OsStr, OsString};

use crate::batch::change::FileType;

/// Most entries a [`Listing`] keeps outside its sorted table before merging
/// them in: lookups scan this many at worst, and a merge (linear in the
/// directory's size) happens once per this many insertions.
const TAIL: usize = 64;

/// Names shorter than this keep their length in the record's header byte;
/// this value there says a LEB128 length follows.
const LONG: u8 = 50;
/// A header byte is `state * STRIDE + length field` (at most 254).
const STRIDE: u8 = LONG + 1;
/// Record state of a removed entry whose bytes are not reclaimed yet (the
/// four [`FileType`]s are states 0 to 3).
const DEAD: u8 = 4;

/// Header fields, each one table word wide, in this order.
const N_OFFS: usize = 0;
const REC_BYTES: usize = 1;
const SORTED: usize = 2;
const LIVE: usize = 3;
const DEAD_BYTES: usize = 4;
const FIELDS: usize = 5;

/// One directory's entries, compact: one allocation holding every name once,
/// back to back, each beside its type, and a table of offsets sorted by
/// name to find them. 3 bytes plus the name per entry in a directory of
/// under 64 KiB (2 under 256 bytes, 5 beyond; names of 50 bytes or more
/// add their length's LEB128), 16 bytes inline, and nothing allocated
/// before the first entry; a `BTreeMap<OsString, _>` costs an allocation
/// per name and some 40 bytes of tree per entry.
///
/// The allocation is a header (the counts), the records, free space, and
/// the offset table, which ends the allocation and grows down towards the
/// records: entry `k` of the table is the `k`-th word from the end. Header
/// fields and offsets are words of one width, chosen by the allocation's
/// size: 1 byte up to 255 bytes, 2 up to 64 KiB - 1, else 4. Offsets count
/// from the first record, so they survive a change of width.
///
/// A record is a header byte, `state * STRIDE + n` (state: the type, or
/// [`DEAD`]; `n`: the name's length if under [`LONG`], else [`LONG`] and
/// the length follows as LEB128), then the name's bytes. A removed entry is
/// marked dead in place; its name keeps sorting the table until the records
/// are compacted (when dead bytes outweigh live ones), and re-adding it
/// revives the record. New names go to an unsorted tail of at most [`TAIL`]
/// offsets that is merged into the sorted part when full. Iteration follows
/// the records: insertion order, sorted after a compaction. A directory
/// holds at most 4 GiB of records.
#[derive(Clone, Default)]
pub(crate) struct Listing {
    /// Header, records, free space, offset table (`table[..sorted]` sorted
    /// by name, the rest in insertion order). Empty: no entries.
    data: Box<[u8]>,
}

fn name_bytes(name: &OsStr) -> &[u8] {
    name.as_encoded_bytes()
}

fn os_str(bytes: &[u8]) -> &OsStr {
    // SAFETY: every stored name was taken whole from an `OsStr` by
    // `as_encoded_bytes` and is handed back whole.
    unsafe { OsStr::from_encoded_bytes_unchecked(bytes) }
}

fn type_state(t: FileType) -> u8 {
    match t {
        FileType::File => 0,
        FileType::Dir => 1,
        FileType::Symlink => 2,
        FileType::Other => 3,
    }
}

/// The type a record header byte says, `None` for a dead record.
fn byte_type(b: u8) -> Option<FileType> {
    match b / STRIDE {
        0 => Some(FileType::File),
        1 => Some(FileType::Dir),
        2 => Some(FileType::Symlink),
        3 => Some(FileType::Other),
        _ => None,
    }
}

/// Header byte `b` with its state set to `state`, its length kept.
fn with_state(b: u8, state: u8) -> u8 {
    state * STRIDE + b % STRIDE
}

/// Bytes of LEB128 for `n`.
fn leb_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        len += 1;
        n >>= 7;
    }
    len
}

/// Bytes of the record of a name `n` bytes long.
fn record_len(n: usize) -> usize {
    1 + if n < LONG as usize { 0 } else { leb_len(n) } + n
}

/// Decodes the record at `off` in `recs`: its name and its length in bytes.
fn record_in(recs: &[u8], off: usize) -> (&[u8], usize) {
    let short = recs[off] % STRIDE;
    if short < LONG {
        let n = short as usize;
        return (&recs[off + 1..off + 1 + n], 1 + n);
    }
    let mut len = 0usize;
    let mut shift = 0;
    let mut i = off + 1;
    loop {
        let b = recs[i];
        i += 1;
        len |= ((b & 0x7f) as usize) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    (&recs[i..i + len], i + len - off)
}

/// Writes the record of `name` in state `state` at `d[at..]`; returns its
/// length.
fn write_record(d: &mut [u8], at: usize, name: &[u8], state: u8) -> usize {
    let n = name.len();
    let mut i = at + 1;
    if n < LONG as usize {
        d[at] = state * STRIDE + n as u8;
    } else {
        d[at] = state * STRIDE + LONG;
        let mut len = n;
        loop {
            let b = (len & 0x7f) as u8;
            len >>= 7;
            if len == 0 {
                d[i] = b;
                i += 1;
                break;
            }
            d[i] = b | 0x80;
            i += 1;
        }
    }
    d[i..i + n].copy_from_slice(name);
    i + n - at
}

/// Record bytes `used + add`, within the limit.
fn checked_room(used: usize, add: usize) -> usize {
    used.checked_add(add)
        .filter(|e| u32::try_from(*e).is_ok())
        .expect("a directory listing holds at most 4 GiB of names")
}

/// Largest allocation whose words are `w` bytes wide.
fn width_max(w: usize) -> usize {
    match w {
        1 => 0xff,
        2 => 0xffff,
        _ => usize::MAX,
    }
}

/// Word width of an allocation of `len` bytes.
fn width(len: usize) -> usize {
    if len <= width_max(1) {
        1
    } else if len <= width_max(2) {
        2
    } else {
        4
    }
}

/// Size of an allocation holding `recs` record bytes and `n` offsets, no
/// free space, in the narrowest width that fits.
fn exact_len(recs: usize, n: usize) -> usize {
    // A width is skipped only when the size it gives is too big for it,
    // so the size found is too big for narrower words too: its own width.
    [1, 2, 4]
        .into_iter()
        .map(|w| FIELDS * w + recs + n * w)
        .zip([1, 2, 4])
        .find(|&(len, w)| len <= width_max(w))
        .map(|(len, _)| len)
        .expect("4-byte words fit any size")
}

fn get_word(d: &[u8], at: usize, w: usize) -> usize {
    match w {
        1 => d[at] as usize,
        2 => u16::from_le_bytes([d[at], d[at + 1]]) as usize,
        _ => u32::from_le_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]]) as usize,
    }
}

fn put_word(d: &mut [u8], at: usize, w: usize, v: usize) {
    debug_assert!(v <= width_max(w).min(u32::MAX as usize), "{v} in {w} bytes");
    d[at..at + w].copy_from_slice(&(v as u32).to_le_bytes()[..w]);
}

/// Offset `k` of the table that ends `d`.
fn off_at(d: &[u8], k: usize, w: usize) -> usize {
    get_word(d, d.len() - (k + 1) * w, w)
}

fn set_off_at(d: &mut [u8], k: usize, w: usize, v: usize) {
    let at = d.len() - (k + 1) * w;
    put_word(d, at, w, v);
}

/// A new allocation holding the records of `entries` (names in order, each
/// with its state) and their offsets, sorted as given: `n` of them, `recs`
/// bytes of records.
fn build<'a>(entries: impl Iterator<Item = (&'a [u8], u8)>, n: usize, recs: usize) -> Box<[u8]> {
    if n == 0 {
        return Box::default();
    }
    let len = exact_len(recs, n);
    let w = width(len);
    // Sized exactly: `into_boxed_slice` keeps the allocation.
    let mut d = vec![0u8; len];
    let start = FIELDS * w;
    let mut at = 0;
    let mut k = 0;
    for (name, state) in entries {
        set_off_at(&mut d, k, w, at);
        at += write_record(&mut d, start + at, name, state);
        k += 1;
    }
    assert_eq!((k, at), (n, recs), "entries as counted");
    for (f, v) in [(N_OFFS, n), (REC_BYTES, recs), (SORTED, n), (LIVE, n)] {
        put_word(&mut d, f * w, w, v);
    }
    d.into_boxed_slice()
}

impl Listing {
    fn w(&self) -> usize {
        width(self.data.len())
    }

    fn field(&self, f: usize) -> usize {
        if self.data.is_empty() {
            return 0;
        }
        let w = self.w();
        get_word(&self.data, f * w, w)
    }

    fn set_field(&mut self, f: usize, v: usize) {
        let w = self.w();
        put_word(&mut self.data, f * w, w, v);
    }

    /// The records.
    fn recs(&self) -> &[u8] {
        let start = FIELDS * self.w();
        &self.data[start.min(self.data.len())..][..self.field(REC_BYTES)]
    }

    fn off(&self, k: usize) -> usize {
        off_at(&self.data, k, self.w())
    }

    #[cfg(test)]
    fn name_at(&self, off: usize) -> &[u8] {
        record_in(self.recs(), off).0
    }

    /// The header byte of the record at `off`.
    fn head(&self, off: usize) -> u8 {
        self.recs()[off]
    }

    fn set_head(&mut self, off: usize, b: u8) {
        let at = FIELDS * self.w() + off;
        self.data[at] = b;
    }

    /// The position in the sorted part of the table of the record named
    /// `name`, dead or alive.
    fn find_sorted(&self, name: &[u8]) -> Option<usize> {
        let (recs, w) = (self.recs(), self.w());
        let (mut lo, mut hi) = (0, self.field(SORTED));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match record_in(recs, off_at(&self.data, mid, w)).0.cmp(name) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    /// The offset of the record named `name`, dead or alive.
    fn find(&self, name: &[u8]) -> Option<usize> {
        if let Some(i) = self.find_sorted(name) {
            return Some(self.off(i));
        }
        let (recs, w) = (self.recs(), self.w());
        (self.field(SORTED)..self.field(N_OFFS))
            .map(|k| off_at(&self.data, k, w))
            .find(|&o| record_in(recs, o).0 == name)
    }

    /// The type of the entry `name`, if present.
    pub(crate) fn get(&self, name: &OsStr) -> Option<FileType> {
        let off = self.find(name_bytes(name))?;
        byte_type(self.head(off))
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.field(LIVE)
    }

    /// Moves everything to a new allocation of `len` bytes (words as wide
    /// as that size needs).
    fn relayout(&mut self, len: usize) {
        let (n, recs) = (self.field(N_OFFS), self.recs());
        let w = width(len);
        assert!(FIELDS * w + recs.len() + n * w <= len, "room for all");
        let mut d = vec![0u8; len];
        d[FIELDS * w..][..recs.len()].copy_from_slice(recs);
        for k in 0..n {
            set_off_at(&mut d, k, w, self.off(k));
        }
        for f in 0..FIELDS {
            put_word(&mut d, f * w, w, self.field(f));
        }
        self.data = d.into_boxed_slice();
    }

    /// Makes room for one more record of `rec` bytes and its offset:
    /// doubles the allocation, or more if needed, kept within the narrowest
    /// width that fits.
    fn reserve_one(&mut self, rec: usize) {
        let (n, recs, len) = (self.field(N_OFFS), self.field(REC_BYTES), self.data.len());
        let need = |w: usize| FIELDS * w + recs + rec + (n + 1) * w;
        if !self.data.is_empty() && need(self.w()) <= len {
            return;
        }
        let new_len = [1, 2, 4]
            .into_iter()
            .find(|&w| need(w) <= width_max(w))
            .map(|w| (len * 2).max(need(w)).min(width_max(w)))
            .expect("4-byte words fit any size");
        self.relayout(new_len);
    }

    /// Appends a live record and its offset to the tail of the table.
    fn push(&mut self, name: &[u8], t: FileType) {
        let (n, recs) = (self.field(N_OFFS), self.field(REC_BYTES));
        let rec = record_len(name.len());
        let end = checked_room(recs, rec);
        self.reserve_one(rec);
        let w = self.w();
        write_record(&mut self.data, FIELDS * w + recs, name, type_state(t));
        set_off_at(&mut self.data, n, w, recs);
        self.set_field(N_OFFS, n + 1);
        self.set_field(REC_BYTES, end);
        self.set_field(LIVE, self.len() + 1);
    }

    /// Sets the type of the record at `off`; returns its old type.
    fn set_type(&mut self, off: usize, t: FileType) -> Option<FileType> {
        let b = self.head(off);
        let old = byte_type(b);
        if old.is_none() {
            self.set_field(LIVE, self.len() + 1);
            let dead = self.field(DEAD_BYTES) - record_in(self.recs(), off).1;
            self.set_field(DEAD_BYTES, dead);
        }
        self.set_head(off, with_state(b, type_state(t)));
        old
    }

    /// Sets `name`'s type; returns the type it had, if it was present.
    pub(crate) fn insert(&mut self, name: &OsStr, t: FileType) -> Option<FileType> {
        let bytes = name_bytes(name);
        if let Some(off) = self.find(bytes) {
            return self.set_type(off, t);
        }
        self.push(bytes, t);
        if self.field(N_OFFS) - self.field(SORTED) > TAIL {
            self.merge_tail();
        }
        None
    }

    /// Removes `name`; returns its type if it was present.
    pub(crate) fn remove(&mut self, name: &OsStr) -> Option<FileType> {
        let off = self.find(name_bytes(name))?;
        let b = self.head(off);
        let old = byte_type(b)?;
        self.set_head(off, with_state(b, DEAD));
        self.set_field(LIVE, self.len() - 1);
        let dead = self.field(DEAD_BYTES) + record_in(self.recs(), off).1;
        self.set_field(DEAD_BYTES, dead);
        let recs = self.field(REC_BYTES);
        if dead > recs / 2 && recs > 256 {
            self.compact();
        }
        Some(old)
    }

    /// Adds every name of `fresh` not present yet and returns those, in
    /// name order (a name given twice counts once, first type given). One
    /// sort for the lot, where [`Listing::insert`] would merge every
    /// [`TAIL`] names.
    pub(crate) fn extend_new(
        &mut self,
        mut fresh: Vec<(OsString, FileType)>,
    ) -> Vec<(OsString, FileType)> {
        self.merge_tail();
        fresh.sort_by(|a, b| name_bytes(&a.0).cmp(name_bytes(&b.0)));
        fresh.dedup_by(|a, b| a.0 == b.0);
        if self.field(N_OFFS) == 0 {
            // A first read: sized exactly, no growth (whose freed
            // remainders would stay in the heap), already sorted.
            let recs = fresh
                .iter()
                .fold(0, |r, (n, _)| checked_room(r, record_len(n.len())));
            self.data = build(
                fresh.iter().map(|(n, t)| (name_bytes(n), type_state(*t))),
                fresh.len(),
                recs,
            );
            return fresh;
        }
        let mut added = Vec::new();
        for (name, t) in fresh {
            let bytes = name_bytes(&name);
            match self.find_sorted(bytes) {
                Some(i) => {
                    let off = self.off(i);
                    if byte_type(self.head(off)).is_none() {
                        self.set_type(off, t);
                        added.push((name, t));
                    }
                }
                None => {
                    self.push(bytes, t);
                    added.push((name, t));
                }
            }
        }
        self.merge_tail();
        added
    }

    /// Sorts the tail and merges it into the sorted part (linear).
    fn merge_tail(&mut self) {
        let (n, s) = (self.field(N_OFFS), self.field(SORTED));
        if n == s {
            return;
        }
        let (w, len, start) = (self.w(), self.data.len(), FIELDS * self.w());
        let recs_end = start + self.field(REC_BYTES);
        let (head, table) = self.data.split_at_mut(len - n * w);
        let recs = &head[start..recs_end];
        let name = |o: usize| record_in(recs, o).0;
        let mut tail: Vec<usize> = (s..n).map(|k| off_at(table, k, w)).collect();
        tail.sort_unstable_by(|a, b| name(*a).cmp(name(*b)));
        // Merge from the back, in place.
        let mut out = n;
        let (mut i, mut j) = (s, tail.len());
        while j > 0 {
            out -= 1;
            let prev = (i > 0).then(|| off_at(table, i - 1, w));
            match prev {
                Some(p) if name(p) > name(tail[j - 1]) => {
                    set_off_at(table, out, w, p);
                    i -= 1;
                }
                _ => {
                    set_off_at(table, out, w, tail[j - 1]);
                    j -= 1;
                }
            }
        }
        self.set_field(SORTED, n);
    }

    /// Rewrites the allocation with live records only, in name order, at
    /// its exact size.
    fn compact(&mut self) {
        self.merge_tail();
        let recs = self.recs();
        let live = (0..self.field(N_OFFS))
            .map(|k| self.off(k))
            .filter_map(|o| byte_type(recs[o]).map(|t| (record_in(recs, o).0, type_state(t))));
        self.data = build(
            live,
            self.len(),
            self.field(REC_BYTES) - self.field(DEAD_BYTES),
        );
    }

    /// Gives back spare room (after a directory's first read); leaves the
    /// table all sorted.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.merge_tail();
        if self.field(DEAD_BYTES) > 0 {
            self.compact();
            return;
        }
        let n = self.field(N_OFFS);
        if n == 0 {
            self.data = Box::default();
            return;
        }
        let exact = exact_len(self.field(REC_BYTES), n);
        if self.data.len() != exact {
            self.relayout(exact);
        }
    }

    /// A directory's first read in this form: one exact-size allocation,
    /// built where the directory was read (on a walk's thread, `fresh`
    /// is freed there, so that a batch of reads leaves no holes between
    /// the index's allocations).
    pub(crate) fn of_read(fresh: Vec<(OsString, FileType)>) -> Listing {
        let mut l = Listing::default();
        l.extend_new(fresh);
        l
    }

    /// Whether it holds no record at all, live or dead.
    pub(crate) fn is_blank(&self) -> bool {
        self.data.is_empty()
    }

    /// Every entry, in record order.
    pub(crate) fn iter(&self) -> ListingIter<'_> {
        ListingIter {
            recs: self.recs(),
            at: 0,
        }
    }
}

/// Iterator over a [`Listing`]'s entries.
pub(crate) struct ListingIter<'a> {
    recs: &'a [u8],
    at: usize,
}

impl<'a> Iterator for ListingIter<'a> {
    type Item = (&'a OsStr, FileType);

    fn next(&mut self) -> Option<Self::Item> {
        while self.at < self.recs.len() {
            let t = self.recs[self.at];
            let (name, len) = record_in(self.recs, self.at);
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
#[path = "listing_tests.rs"]
mod tests;
