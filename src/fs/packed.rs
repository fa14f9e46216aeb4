//! A picture's entries packed in one allocation: every name once, each
//! beside its signature in a few bytes, sorted by name, and a table of
//! offsets to find them. A polled entry costs its name, 2 or 4 bytes of
//! offset and some 8 to 12 bytes of signature in the common case (a
//! `Vec<(OsString, Sig)>` cost some 110 bytes and an allocation per name).
//!
//! The allocation is a header, the records, then the offset table (one word
//! per entry, 2 bytes wide when the header and records fit in 64 KiB, else
//! 4). The header is the entry count and the bases the records' fields are
//! counted from (the first entry's modification time in seconds and its
//! inode), as LEB128 varints. A record is the name's length (varint), the
//! name's bytes, a tag byte, then the signature's fields:
//!
//! - the tag: the type (bits 0-1); the change time equals the modification
//!   time (bit 2); how each time's nanoseconds are written (bits 3-4 for
//!   the modification time's, 5-6 for the change time's): not at all (0),
//!   4 bytes little-endian (`0..2^32`), or a zigzag varint (anything else);
//! - the size (varint);
//! - the modification time's seconds after the base (zigzag varint of the
//!   wrapping difference), and its nanoseconds as the tag says;
//! - unless equal to it, the change time: its seconds after the
//!   modification time's, and its nanoseconds;
//! - the inode after the base (zigzag varint of the wrapping difference).
//!
//! Every field round-trips exactly, whatever its value: a signature read
//! back equals the one written (equality of signatures decides "changed").

use std::ffi::OsStr;

use super::Sig;
use crate::batch::change::FileType;

/// Entries packed in one allocation (see the module's documentation).
/// Empty: nothing allocated.
#[derive(Clone, Default, PartialEq, Eq)]
pub(super) struct Packed {
    data: Box<[u8]>,
}

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

fn os_str(bytes: &[u8]) -> &OsStr {
    // SAFETY: every stored name was taken whole from an `OsStr` by
    // `as_encoded_bytes` and is handed back whole.
    unsafe { OsStr::from_encoded_bytes_unchecked(bytes) }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Reads a varint at `*at`, moving past it.
fn get_varint(d: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = d[*at];
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return v;
        }
        shift += 7;
    }
}

fn kind_bits(k: FileType) -> u8 {
    match k {
        FileType::File => 0,
        FileType::Dir => 1,
        FileType::Symlink => 2,
        FileType::Other => 3,
    }
}

fn bits_kind(b: u8) -> FileType {
    match b & 3 {
        0 => FileType::File,
        1 => FileType::Dir,
        2 => FileType::Symlink,
        _ => FileType::Other,
    }
}

const SAME_TIMES: u8 = 1 << 2;
const M_SHIFT: u8 = 3;
const C_SHIFT: u8 = 5;
/// How a time's nanoseconds are written (two bits of the tag).
const NS_ZERO: u8 = 0;
const NS_FIXED: u8 = 1;
const NS_VARINT: u8 = 2;

fn ns_mode(ns: i64) -> u8 {
    if ns == 0 {
        NS_ZERO
    } else if u32::try_from(ns).is_ok() {
        NS_FIXED
    } else {
        NS_VARINT
    }
}

fn put_ns(out: &mut Vec<u8>, ns: i64) {
    match ns_mode(ns) {
        NS_ZERO => {}
        NS_FIXED => out.extend_from_slice(&(ns as u32).to_le_bytes()),
        _ => put_varint(out, zigzag(ns)),
    }
}

fn get_ns(d: &[u8], at: &mut usize, mode: u8) -> i64 {
    match mode {
        NS_ZERO => 0,
        NS_FIXED => {
            let b: [u8; 4] = d[*at..*at + 4].try_into().expect("4 bytes");
            *at += 4;
            i64::from(u32::from_le_bytes(b))
        }
        _ => unzigzag(get_varint(d, at)),
    }
}

/// The bases of a picture's fields.
#[derive(Clone, Copy)]
struct Bases {
    secs: i64,
    ino: u64,
}

fn put_sig(out: &mut Vec<u8>, s: &Sig, b: Bases) {
    let same = s.ctime == s.mtime;
    let mut tag = kind_bits(s.kind) | (ns_mode(s.mtime.1) << M_SHIFT);
    if same {
        tag |= SAME_TIMES;
    } else {
        tag |= ns_mode(s.ctime.1) << C_SHIFT;
    }
    out.push(tag);
    put_varint(out, s.size);
    put_varint(out, zigzag(s.mtime.0.wrapping_sub(b.secs)));
    put_ns(out, s.mtime.1);
    if !same {
        put_varint(out, zigzag(s.ctime.0.wrapping_sub(s.mtime.0)));
        put_ns(out, s.ctime.1);
    }
    put_varint(out, zigzag(s.ino.wrapping_sub(b.ino) as i64));
}

/// Bytes of the varint of `v`.
fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn ns_len(ns: i64) -> usize {
    match ns_mode(ns) {
        NS_ZERO => 0,
        NS_FIXED => 4,
        _ => varint_len(zigzag(ns)),
    }
}

/// Bytes of the record of `name` and `s` (as written by `Packed::of`).
fn record_len(name: &OsStr, s: &Sig, b: Bases) -> usize {
    let n = name.len();
    let mut len = varint_len(n as u64) + n + 1;
    len += varint_len(s.size);
    len += varint_len(zigzag(s.mtime.0.wrapping_sub(b.secs))) + ns_len(s.mtime.1);
    if s.ctime != s.mtime {
        len += varint_len(zigzag(s.ctime.0.wrapping_sub(s.mtime.0))) + ns_len(s.ctime.1);
    }
    len + varint_len(zigzag(s.ino.wrapping_sub(b.ino) as i64))
}

fn get_sig(d: &[u8], at: &mut usize, b: Bases) -> Sig {
    let tag = d[*at];
    *at += 1;
    let size = get_varint(d, at);
    let msecs = b.secs.wrapping_add(unzigzag(get_varint(d, at)));
    let mtime = (msecs, get_ns(d, at, (tag >> M_SHIFT) & 3));
    let ctime = if tag & SAME_TIMES != 0 {
        mtime
    } else {
        let csecs = msecs.wrapping_add(unzigzag(get_varint(d, at)));
        (csecs, get_ns(d, at, (tag >> C_SHIFT) & 3))
    };
    let ino = b.ino.wrapping_add(unzigzag(get_varint(d, at)) as u64);
    Sig {
        kind: bits_kind(tag),
        size,
        mtime,
        ctime,
        ino,
    }
}

/// A name's record from `*at`: its name, moving past it.
fn get_name<'a>(d: &'a [u8], at: &mut usize) -> &'a [u8] {
    let n = get_varint(d, at) as usize;
    let name = &d[*at..*at + n];
    *at += n;
    name
}

/// The header: the entry count and the bases; where the records begin.
struct Header {
    n: usize,
    bases: Bases,
    records: usize,
    /// Where the offset table begins, and its word width.
    table: usize,
    width: usize,
}

impl Packed {
    /// Packs `entries`, which must be sorted by name (bytes), each name
    /// once: in one allocation of the exact size (the entries are gone
    /// through three times: to size, to write, and to write the offsets).
    pub(super) fn of<'a>(entries: impl Iterator<Item = (&'a OsStr, Sig)> + Clone) -> Packed {
        let Some((_, first)) = entries.clone().next() else {
            return Packed::default();
        };
        let bases = Bases {
            secs: first.mtime.0,
            ino: first.ino,
        };
        let (mut n, mut recs) = (0usize, 0usize);
        for (name, sig) in entries.clone() {
            n += 1;
            recs += record_len(name, &sig, bases);
        }
        let mut head = Vec::with_capacity(30);
        put_varint(&mut head, n as u64);
        put_varint(&mut head, zigzag(bases.secs));
        put_varint(&mut head, bases.ino);
        let hr = head.len() + recs;
        assert!(
            u32::try_from(hr).is_ok(),
            "a picture holds at most 4 GiB of records"
        );
        let width = if hr <= 0xffff { 2 } else { 4 };
        let mut data = Vec::with_capacity(hr + n * width);
        data.extend_from_slice(&head);
        for (name, sig) in entries.clone() {
            let name = name.as_encoded_bytes();
            put_varint(&mut data, name.len() as u64);
            data.extend_from_slice(name);
            put_sig(&mut data, &sig, bases);
        }
        debug_assert_eq!(data.len(), hr, "records sized as written");
        let mut at = head.len();
        for (name, sig) in entries {
            if width == 2 {
                data.extend_from_slice(&(at as u16).to_le_bytes());
            } else {
                data.extend_from_slice(&(at as u32).to_le_bytes());
            }
            at += record_len(name, &sig, bases);
        }
        debug_assert_eq!(data.len(), data.capacity());
        Packed {
            data: data.into_boxed_slice(),
        }
    }

    fn header(&self) -> Option<Header> {
        let d = &self.data;
        if d.is_empty() {
            return None;
        }
        let mut at = 0;
        let n = get_varint(d, &mut at) as usize;
        let secs = unzigzag(get_varint(d, &mut at));
        let ino = get_varint(d, &mut at);
        // 2-byte words if the header and records then fit in them.
        let width = if d.len() - 2 * n <= 0xffff { 2 } else { 4 };
        Some(Header {
            n,
            bases: Bases { secs, ino },
            records: at,
            table: d.len() - width * n,
            width,
        })
    }

    /// How many entries.
    pub(super) fn len(&self) -> usize {
        self.header().map_or(0, |h| h.n)
    }

    fn offset(&self, h: &Header, k: usize) -> usize {
        let at = h.table + k * h.width;
        if h.width == 2 {
            usize::from(u16::from_le_bytes([self.data[at], self.data[at + 1]]))
        } else {
            let b: [u8; 4] = self.data[at..at + 4].try_into().expect("4 bytes");
            u32::from_le_bytes(b) as usize
        }
    }

    /// The signature of entry `name`.
    pub(super) fn get(&self, name: &OsStr) -> Option<Sig> {
        let h = self.header()?;
        let want = name.as_encoded_bytes();
        let (mut lo, mut hi) = (0, h.n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let mut at = self.offset(&h, mid);
            let here = get_name(&self.data, &mut at);
            match here.cmp(want) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(get_sig(&self.data, &mut at, h.bases)),
            }
        }
        None
    }

    /// Every entry with its signature, sorted by name.
    pub(super) fn iter(&self) -> Iter<'_> {
        match self.header() {
            Some(h) => Iter {
                data: &self.data[..h.table],
                at: h.records,
                bases: h.bases,
            },
            None => Iter {
                data: &[],
                at: 0,
                bases: Bases { secs: 0, ino: 0 },
            },
        }
    }

    /// Bytes allocated.
    #[cfg(test)]
    pub(super) fn bytes(&self) -> usize {
        self.data.len()
    }
}

/// The entries of a [`Packed`], in order.
#[derive(Clone)]
pub(super) struct Iter<'a> {
    data: &'a [u8],
    at: usize,
    bases: Bases,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a OsStr, Sig);

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.data.len() {
            return None;
        }
        let name = get_name(self.data, &mut self.at);
        let sig = get_sig(self.data, &mut self.at, self.bases);
        Some((os_str(name), sig))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn roundtrip(entries: &[(OsString, Sig)]) -> Packed {
        let p = Packed::of(entries.iter().map(|(n, s)| (n.as_os_str(), *s)));
        let back: Vec<(OsString, Sig)> = p.iter().map(|(n, s)| (n.to_os_string(), s)).collect();
        assert_eq!(back, entries, "read back as written");
        assert_eq!(p.len(), entries.len());
        for (n, s) in entries {
            assert_eq!(p.get(n), Some(*s), "{n:?}");
        }
        p
    }

    fn sig(kind: FileType, size: u64, mtime: (i64, i64), ctime: (i64, i64), ino: u64) -> Sig {
        Sig {
            kind,
            size,
            mtime,
            ctime,
            ino,
        }
    }

    #[test]
    fn every_field_round_trips_exactly() {
        let odd = [
            Sig::UNKNOWN,
            Sig {
                kind: FileType::Dir,
                ..Sig::UNKNOWN
            },
            sig(FileType::File, 0, (0, 0), (0, 0), 0),
            sig(
                FileType::Symlink,
                u64::MAX,
                (i64::MAX, i64::MAX),
                (i64::MIN, -1),
                u64::MAX,
            ),
            sig(FileType::Other, 1, (-5, 999_999_999), (7, 4_294_967_295), 1),
            sig(
                FileType::File,
                12345,
                (1_700_000_000, 123_456_789),
                (1_700_000_000, 123_456_790),
                9,
            ),
            sig(
                FileType::File,
                1 << 40,
                (1_700_000_000, 5),
                (1_700_000_001, 0),
                1 << 63,
            ),
            sig(
                FileType::Dir,
                4096,
                (i64::MIN, 1 << 40),
                (i64::MAX, -(1 << 40)),
                3,
            ),
        ];
        let entries: Vec<(OsString, Sig)> = odd
            .iter()
            .enumerate()
            .map(|(i, s)| (OsString::from(format!("n{i}")), *s))
            .collect();
        roundtrip(&entries);
        // Every one first (the bases), and alone.
        for (i, s) in odd.iter().enumerate() {
            let mut e = entries.clone();
            e[0].1 = *s;
            roundtrip(&e);
            roundtrip(&[(OsString::from(format!("x{i}")), *s)]);
        }
        assert!(roundtrip(&[]).iter().next().is_none());
        assert_eq!(Packed::default().get(OsStr::new("a")), None);
    }

    #[test]
    fn names_of_any_length_are_found_by_binary_search() {
        let long = "l".repeat(300);
        let mut entries: Vec<(OsString, Sig)> = (0..3000)
            .map(|i| {
                let name = if i % 7 == 0 {
                    format!("{long}{i:05}")
                } else {
                    format!("f{i:05}")
                };
                let s = sig(
                    FileType::File,
                    i,
                    (1_700_000_000 + i as i64, 1),
                    (1, 2),
                    1000 + i,
                );
                (OsString::from(name), s)
            })
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let p = roundtrip(&entries);
        assert!(p.bytes() > 0xffff, "4-byte offsets");
        assert_eq!(p.get(OsStr::new("f0000")), None);
        assert_eq!(p.get(OsStr::new("zz")), None);
        let small = roundtrip(&entries[..50]);
        assert!(small.bytes() <= 0xffff, "2-byte offsets");
    }

    /// What the bench's trees cost: a few bytes beyond the name.
    #[test]
    fn a_typical_entry_costs_its_name_and_some_ten_bytes() {
        let entries: Vec<(OsString, Sig)> = (0..20)
            .map(|i| {
                let t = (1_700_000_000, 100_000_000 + i * 1000);
                let s = sig(FileType::File, 1, t, t, 5_000_000 + i as u64);
                (OsString::from(format!("f{i}.txt")), s)
            })
            .collect();
        let mut sorted = entries.clone();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        let p = roundtrip(&sorted);
        let names: usize = sorted.iter().map(|(n, _)| n.len()).sum();
        assert!(
            p.bytes() - names <= 20 * 12,
            "{} bytes for {names} bytes of names",
            p.bytes()
        );
    }
}
