//! A spec's saved state ([`WatchOptions::state`](crate::WatchOptions::state)):
//! the file format, and why a file is refused. Pure: bytes in, bytes out.
//!
//! A snapshot holds, for every entry the spec saw, its stat signature
//! (type, size, modification and change times to the nanosecond, inode),
//! grouped by directory, with the seq it reflects and what makes it
//! belong to one spec on one file system: the spec's fingerprint and each
//! root's device. An entry whose state at that seq is not known for sure
//! (it changed while the snapshot was being taken) is saved as
//! *uncertain*: only whether it existed, and its type, so that a restore
//! reports it again rather than miss a change.
//!
//! Why a file is refused is [`StateRefused`] (`restore.rs`, with the mark
//! a restored batch carries).
//!
//! ```text
//! magic "specwatch-state\n" (16 bytes), format (u32 LE), writer: the
//! crate version (u8 length, bytes), body length (u64 LE)
//! body:
//!   spec fingerprint (u64 LE), lineage (u64 LE), seq number (u64 LE)
//!   roots: count, then each: path, device (u64 LE; 0: missing)
//!   directories, sorted by path: count, then each: path, entry count,
//!     byte length of its entries, entries sorted by name:
//!       name, tag (u8: type in the low bits, 0x80: uncertain), and unless
//!       uncertain: size, mtime seconds (zigzag), nanoseconds, ctime
//!       seconds (zigzag), nanoseconds, inode
//! checksum: FNV-1a 64 of every byte before it (u64 LE)
//! ```
//!
//! Counts, lengths and the stamp's numbers are LEB128 varints; a path or
//! name is its length and its bytes (Unix: the OS's bytes; Windows: its
//! UTF-16 units, little-endian).

use std::ffi::{OsStr, OsString};
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::batch::change::FileType;
use crate::ids::Seq;
use crate::spec::WatchSpec;
use crate::state::restore::{FORMAT, StateRefused};

const MAGIC: &[u8; 16] = b"specwatch-state\n";
const UNCERTAIN: u8 = 0x80;

/// What a stat says of an entry: what a restore compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub kind: FileType,
    pub size: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
    pub ino: u64,
}

/// An entry as saved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Saved {
    /// Its stamp at the snapshot's seq.
    Known(Stamp),
    /// It existed, with this type, but changed while the snapshot was
    /// taken: report it again.
    Uncertain(FileType),
}

impl Saved {
    pub(crate) fn kind(&self) -> FileType {
        match self {
            Saved::Known(s) => s.kind,
            Saved::Uncertain(k) => *k,
        }
    }
}

/// One directory's entries, sorted by name.
#[cfg(test)]
pub(crate) type SavedDir = (PathBuf, Vec<(OsString, Saved)>);

/// What identifies a snapshot's spec, lineage and file systems.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub fingerprint: u64,
    pub seq: Seq,
    /// Each root and its device (0: missing when saved).
    pub roots: Vec<(PathBuf, u64)>,
}

/// One directory's entries, encoded as the file holds them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Block {
    count: usize,
    bytes: Vec<u8>,
}

impl Block {
    /// The block of `entries` (sorted by name, each once).
    pub(crate) fn of(entries: &[(OsString, Saved)]) -> Block {
        let mut bytes = Vec::with_capacity(entries.len() * 32);
        for (name, saved) in entries {
            put_bytes(&mut bytes, &os_bytes(name));
            match saved {
                Saved::Uncertain(k) => bytes.push(kind_tag(*k) | UNCERTAIN),
                Saved::Known(s) => {
                    bytes.push(kind_tag(s.kind));
                    varint(&mut bytes, s.size);
                    varint(&mut bytes, zigzag(s.mtime.0));
                    varint(&mut bytes, s.mtime.1 as u64);
                    varint(&mut bytes, zigzag(s.ctime.0));
                    varint(&mut bytes, s.ctime.1 as u64);
                    varint(&mut bytes, s.ino);
                }
            }
        }
        Block {
            count: entries.len(),
            bytes,
        }
    }

    /// Its entries, sorted by name.
    pub(crate) fn entries(&self) -> Vec<(OsString, Saved)> {
        read_block(&self.bytes, self.count)
    }
}

/// The entries of an encoded block of `count` (checked before).
fn read_block(bytes: &[u8], count: usize) -> Vec<(OsString, Saved)> {
    let mut r = Reader { buf: bytes, at: 0 };
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let (Some(name), Some(saved)) = (r.bytes().and_then(os_from), r.saved()) else {
            break;
        };
        out.push((name, saved));
    }
    out
}

/// The bytes of a snapshot of `dirs` (each directory once; sorted here).
pub(crate) fn encode(header: &Header, dirs: &mut [(PathBuf, Block)]) -> Vec<u8> {
    dirs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let size: usize = dirs
        .iter()
        .map(|(p, b)| b.bytes.len() + p.as_os_str().len() + 24)
        .sum();
    let mut out = Vec::with_capacity(size + 256);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    let writer = env!("CARGO_PKG_VERSION").as_bytes();
    out.push(writer.len() as u8);
    out.extend_from_slice(writer);
    // The body's length, known at its end.
    let len_at = out.len();
    out.extend_from_slice(&[0; 8]);
    let body_at = out.len();
    out.extend_from_slice(&header.fingerprint.to_le_bytes());
    out.extend_from_slice(&header.seq.instance().to_le_bytes());
    out.extend_from_slice(&header.seq.number().to_le_bytes());
    varint(&mut out, header.roots.len() as u64);
    for (root, dev) in &header.roots {
        put_bytes(&mut out, &os_bytes(root.as_os_str()));
        out.extend_from_slice(&dev.to_le_bytes());
    }
    varint(&mut out, dirs.len() as u64);
    for (path, block) in dirs.iter() {
        put_bytes(&mut out, &os_bytes(path.as_os_str()));
        varint(&mut out, block.count as u64);
        put_bytes(&mut out, &block.bytes);
    }
    let body_len = (out.len() - body_at) as u64;
    out[len_at..body_at].copy_from_slice(&body_len.to_le_bytes());
    let sum = fnv1a(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// A snapshot read back: its header, and its directories, whose entries
/// are decoded when asked for (the file's bytes are kept, not a tree).
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub header: Header,
    /// The whole file (the directories' ranges are in it).
    file: Vec<u8>,
    /// Each directory's path, entry count and entries' bytes, sorted by
    /// path.
    dirs: Vec<(PathBuf, usize, Range<usize>)>,
}

impl Snapshot {
    /// Reads a snapshot: every byte is checked (magic, format, length,
    /// checksum, and every entry parsed) before any is used.
    pub(crate) fn decode(file: Vec<u8>) -> Result<Snapshot, StateRefused> {
        let corrupt = |what: &str| StateRefused::Corrupt {
            what: what.to_owned(),
        };
        if file.len() < MAGIC.len() || &file[..MAGIC.len()] != MAGIC {
            return Err(corrupt("not a specwatch state file"));
        }
        let mut r = Reader {
            buf: &file,
            at: MAGIC.len(),
        };
        let truncated = || corrupt("truncated");
        let format = u32::from_le_bytes(r.array().ok_or_else(truncated)?);
        let wlen = usize::from(r.byte().ok_or_else(truncated)?);
        let writer = r.take(wlen).ok_or_else(truncated)?;
        let writer = String::from_utf8_lossy(writer).into_owned();
        if format > FORMAT {
            return Err(StateRefused::Newer { writer });
        }
        if format < FORMAT {
            return Err(StateRefused::Format { found: format });
        }
        let len = u64::from_le_bytes(r.array().ok_or_else(truncated)?);
        let len = usize::try_from(len).map_err(|_| truncated())?;
        let body_at = r.at;
        r.take(len).ok_or_else(truncated)?;
        let summed = r.at;
        let sum = u64::from_le_bytes(r.array().ok_or_else(truncated)?);
        if r.at != file.len() {
            return Err(corrupt("bytes after the checksum"));
        }
        if fnv1a(&file[..summed]) != sum {
            return Err(corrupt("checksum mismatch"));
        }
        Snapshot::parse(file, body_at..summed).ok_or_else(|| corrupt("malformed body"))
    }

    fn parse(file: Vec<u8>, body: Range<usize>) -> Option<Snapshot> {
        let mut r = Reader {
            buf: &file[..body.end],
            at: body.start,
        };
        let fingerprint = u64::from_le_bytes(r.array()?);
        let instance = u64::from_le_bytes(r.array()?);
        let number = u64::from_le_bytes(r.array()?);
        let nroots = r.count()?;
        let mut roots = Vec::with_capacity(nroots.min(1024));
        for _ in 0..nroots {
            let path = PathBuf::from(os_from(r.bytes()?)?);
            roots.push((path, u64::from_le_bytes(r.array()?)));
        }
        let ndirs = r.count()?;
        let mut dirs = Vec::with_capacity(ndirs.min(1 << 20));
        for _ in 0..ndirs {
            let path = PathBuf::from(os_from(r.bytes()?)?);
            let n = r.count()?;
            let len = r.count()?;
            let start = r.at;
            let block = r.take(len)?;
            let mut e = Reader { buf: block, at: 0 };
            let mut last: Option<&[u8]> = None;
            for _ in 0..n {
                let name = e.bytes()?;
                if last.is_some_and(|l| l >= name) || os_from(name).is_none() {
                    return None; // unsorted, repeated or not a name
                }
                last = Some(name);
                e.saved()?;
            }
            if e.at != block.len() {
                return None;
            }
            if dirs
                .last()
                .is_some_and(|(p, _, _): &(PathBuf, usize, Range<usize>)| *p >= path)
            {
                return None;
            }
            dirs.push((path, n, start..start + len));
        }
        if r.at != body.end {
            return None;
        }
        Some(Snapshot {
            header: Header {
                fingerprint,
                seq: Seq::new(instance, number),
                roots,
            },
            file,
            dirs,
        })
    }

    /// The directories it holds, sorted by path.
    pub(crate) fn dirs(&self) -> impl Iterator<Item = &Path> {
        self.dirs.iter().map(|(p, _, _)| p.as_path())
    }

    /// How many entries it holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.dirs.iter().map(|(_, n, _)| n).sum()
    }

    /// The entries saved for directory `dir`, sorted by name (none if it
    /// was not saved).
    pub(crate) fn entries(&self, dir: &Path) -> Vec<(OsString, Saved)> {
        let Ok(i) = self.dirs.binary_search_by(|(p, _, _)| p.as_path().cmp(dir)) else {
            return Vec::new();
        };
        let (_, n, range) = &self.dirs[i];
        read_block(&self.file[range.clone()], *n)
    }
}

/// A stable hash of what a spec sees: its roots, ignore rules and the
/// options that change which entries it reports (not its timing, backend
/// or state options). A snapshot saved under another fingerprint is
/// refused. Hashes the `Debug` rendering of the normalised spec: a newer
/// version that renders it differently refuses older snapshots (a resync,
/// never a wrong answer).
pub(crate) fn fingerprint(spec: &WatchSpec) -> u64 {
    let mut s = spec.clone();
    let o = &mut s.options;
    let d = crate::spec::options::WatchOptions::default();
    o.quiet_window = d.quiet_window;
    o.max_delay = d.max_delay;
    o.backend = None;
    o.initial_scan = false;
    o.rescan_every = None;
    o.content_hash = false;
    o.skip_same_content = false;
    o.collapse_moves = false;
    o.metadata = false;
    o.state = None;
    o.save_every = d.save_every;
    o.vcs_settle = None;
    o.write_finished = None;
    fnv1a(format!("{s:?}").as_bytes())
}

fn kind_tag(k: FileType) -> u8 {
    match k {
        FileType::File => 0,
        FileType::Dir => 1,
        FileType::Symlink => 2,
        FileType::Other => 3,
    }
}

fn tag_kind(t: u8) -> Option<FileType> {
    Some(match t {
        0 => FileType::File,
        1 => FileType::Dir,
        2 => FileType::Symlink,
        3 => FileType::Other,
        _ => return None,
    })
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// FNV-1a, 64 bits: stable forever (the checksum of every file written).
fn fnv1a(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= u64::from(x);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(unix)]
fn os_bytes(s: &OsStr) -> std::borrow::Cow<'_, [u8]> {
    use std::os::unix::ffi::OsStrExt;
    std::borrow::Cow::Borrowed(s.as_bytes())
}

#[cfg(unix)]
fn os_from(b: &[u8]) -> Option<OsString> {
    use std::os::unix::ffi::OsStrExt;
    Some(OsStr::from_bytes(b).to_os_string())
}

/// Windows: a name's UTF-16 as WTF-8 (UTF-8, with an unpaired surrogate
/// as the three bytes of its code point), whose bytes sort as the names
/// do (the order the file keeps).
#[cfg(windows)]
fn os_bytes(s: &OsStr) -> std::borrow::Cow<'_, [u8]> {
    use std::os::windows::ffi::OsStrExt;
    let mut out = Vec::with_capacity(s.len());
    for c in char::decode_utf16(s.encode_wide()) {
        let cp = match c {
            Ok(c) => c as u32,
            Err(e) => u32::from(e.unpaired_surrogate()),
        };
        match cp {
            0..0x80 => out.push(cp as u8),
            0x80..0x800 => out.extend([0xC0 | (cp >> 6) as u8, 0x80 | (cp & 0x3F) as u8]),
            0x800..0x10000 => out.extend([
                0xE0 | (cp >> 12) as u8,
                0x80 | ((cp >> 6) & 0x3F) as u8,
                0x80 | (cp & 0x3F) as u8,
            ]),
            _ => out.extend([
                0xF0 | (cp >> 18) as u8,
                0x80 | ((cp >> 12) & 0x3F) as u8,
                0x80 | ((cp >> 6) & 0x3F) as u8,
                0x80 | (cp & 0x3F) as u8,
            ]),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Windows: the name a WTF-8 text stands for (`None`: not WTF-8).
#[cfg(windows)]
fn os_from(b: &[u8]) -> Option<OsString> {
    use std::os::windows::ffi::OsStringExt;
    let mut units = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let lead = b[i];
        let (len, init) = match lead {
            0x00..0x80 => (1, u32::from(lead)),
            0xC2..0xE0 => (2, u32::from(lead & 0x1F)),
            0xE0..0xF0 => (3, u32::from(lead & 0x0F)),
            0xF0..0xF5 => (4, u32::from(lead & 0x07)),
            _ => return None,
        };
        let tail = b.get(i + 1..i + len)?;
        let mut cp = init;
        for &t in tail {
            if t & 0xC0 != 0x80 {
                return None;
            }
            cp = (cp << 6) | u32::from(t & 0x3F);
        }
        let min = [0, 0, 0x80, 0x800, 0x10000][len];
        if cp < min || cp > 0x10FFFF {
            return None;
        }
        if cp >= 0x10000 {
            let c = cp - 0x10000;
            units.push(0xD800 | (c >> 10) as u16);
            units.push(0xDC00 | (c & 0x3FF) as u16);
        } else {
            units.push(cp as u16);
        }
        i += len;
    }
    Some(OsString::from_wide(&units))
}

#[cfg(not(any(unix, windows)))]
fn os_bytes(s: &OsStr) -> std::borrow::Cow<'_, [u8]> {
    std::borrow::Cow::Borrowed(s.as_encoded_bytes())
}

#[cfg(not(any(unix, windows)))]
fn os_from(b: &[u8]) -> Option<OsString> {
    std::str::from_utf8(b).ok().map(OsString::from)
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.buf.get(self.at..end)?;
        self.at = end;
        Some(s)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn byte(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn varint(&mut self) -> Option<u64> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f).checked_shl(shift)?;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    /// A count or length, bounded by the bytes left (each counted thing
    /// takes at least one), so a corrupt one cannot ask for a huge
    /// allocation.
    fn count(&mut self) -> Option<usize> {
        let n = usize::try_from(self.varint()?).ok()?;
        (n <= self.buf.len() - self.at).then_some(n)
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.count()?;
        self.take(n)
    }

    fn saved(&mut self) -> Option<Saved> {
        let tag = self.byte()?;
        let kind = tag_kind(tag & !UNCERTAIN)?;
        if tag & UNCERTAIN != 0 {
            return Some(Saved::Uncertain(kind));
        }
        let size = self.varint()?;
        let ms = unzigzag(self.varint()?);
        let mn = i64::try_from(self.varint()?).ok()?;
        let cs = unzigzag(self.varint()?);
        let cn = i64::try_from(self.varint()?).ok()?;
        let ino = self.varint()?;
        Some(Saved::Known(Stamp {
            kind,
            size,
            mtime: (ms, mn),
            ctime: (cs, cn),
            ino,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(size: u64, t: i64) -> Saved {
        Saved::Known(Stamp {
            kind: FileType::File,
            size,
            mtime: (t, 999_999_999),
            ctime: (-t, 1),
            ino: u64::MAX - size,
        })
    }

    fn blocks(dirs: &[SavedDir]) -> Vec<(PathBuf, Block)> {
        dirs.iter()
            .map(|(p, e)| {
                let mut e = e.clone();
                e.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                (p.clone(), Block::of(&e))
            })
            .collect()
    }

    fn sample() -> (Header, Vec<SavedDir>) {
        let header = Header {
            fingerprint: 0xfeed,
            seq: Seq::new(0xabc, 77),
            roots: vec![(PathBuf::from("/r"), 2049), (PathBuf::from("/gone"), 0)],
        };
        let dirs = vec![
            (
                PathBuf::from("/r/sub"),
                vec![
                    (OsString::from("z"), stamp(1, 5)),
                    (OsString::from("a"), Saved::Uncertain(FileType::Dir)),
                ],
            ),
            (
                PathBuf::from("/r"),
                vec![
                    (OsString::from("sub"), Saved::Uncertain(FileType::Dir)),
                    (OsString::from("big"), stamp(u64::MAX, i64::MIN / 2)),
                ],
            ),
            (PathBuf::from("/r/empty"), vec![]),
        ];
        (header, dirs)
    }

    #[test]
    fn what_is_encoded_is_decoded_sorted() {
        let (header, dirs) = sample();
        let bytes = encode(&header, &mut blocks(&dirs));
        let s = Snapshot::decode(bytes.clone()).unwrap();
        assert_eq!(s.header, header);
        assert_eq!(
            s.dirs().collect::<Vec<_>>(),
            vec![Path::new("/r"), Path::new("/r/empty"), Path::new("/r/sub")]
        );
        assert_eq!(s.len(), 4);
        assert_eq!(
            s.entries(Path::new("/r/sub")),
            vec![
                (OsString::from("a"), Saved::Uncertain(FileType::Dir)),
                (OsString::from("z"), stamp(1, 5)),
            ]
        );
        assert_eq!(
            s.entries(Path::new("/r"))[0].1,
            stamp(u64::MAX, i64::MIN / 2)
        );
        assert!(s.entries(Path::new("/nope")).is_empty());
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_refused() {
        let (header, dirs) = sample();
        let bytes = encode(&header, &mut blocks(&dirs));
        for len in 0..bytes.len() {
            assert!(
                matches!(
                    Snapshot::decode(bytes[..len].to_vec()),
                    Err(StateRefused::Corrupt { .. })
                ),
                "truncated to {len} of {} bytes",
                bytes.len()
            );
        }
        for at in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[at] ^= 1 << bit;
                let got = Snapshot::decode(b.clone());
                assert!(got.is_err(), "bit {bit} of byte {at} flipped: {got:?}");
            }
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(
            Snapshot::decode(longer.clone()),
            Err(StateRefused::Corrupt { .. })
        ));
    }

    #[test]
    fn other_formats_are_refused_by_name() {
        let (header, dirs) = sample();
        let bytes = encode(&header, &mut blocks(&dirs));
        let mut newer = bytes.clone();
        newer[16..20].copy_from_slice(&(FORMAT + 1).to_le_bytes());
        assert_eq!(
            Snapshot::decode(newer.clone()).unwrap_err(),
            StateRefused::Newer {
                writer: env!("CARGO_PKG_VERSION").to_owned()
            }
        );
        let mut older = bytes;
        older[16..20].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(
            Snapshot::decode(older.clone()).unwrap_err(),
            StateRefused::Format { found: 0 }
        );
    }

    #[test]
    fn a_hostile_body_with_a_good_checksum_is_refused_not_a_panic() {
        // Counts far beyond the bytes, unsorted names: each with a valid
        // checksum, as a buggy writer could make.
        let bodies: Vec<Vec<u8>> = vec![
            {
                let mut b = vec![0; 24];
                varint(&mut b, u64::MAX);
                b
            },
            {
                let mut b = vec![0; 24];
                varint(&mut b, 0);
                varint(&mut b, 1);
                put_bytes(&mut b, b"/d");
                varint(&mut b, 2);
                let mut block = Vec::new();
                put_bytes(&mut block, b"b");
                block.push(UNCERTAIN);
                put_bytes(&mut block, b"a");
                block.push(UNCERTAIN);
                put_bytes(&mut b, &block);
                b
            },
        ];
        for body in bodies {
            let mut f = MAGIC.to_vec();
            f.extend_from_slice(&FORMAT.to_le_bytes());
            f.push(0);
            f.extend_from_slice(&(body.len() as u64).to_le_bytes());
            f.extend_from_slice(&body);
            let sum = fnv1a(&f);
            f.extend_from_slice(&sum.to_le_bytes());
            assert_eq!(
                Snapshot::decode(f.clone()).unwrap_err(),
                StateRefused::Corrupt {
                    what: "malformed body".into()
                }
            );
        }
    }

    #[test]
    fn the_fingerprint_ignores_timing_but_not_what_is_seen() {
        let base = WatchSpec::new(["/r"]);
        let f = fingerprint(&base);
        assert_eq!(
            f,
            fingerprint(
                &base
                    .clone()
                    .quiet_window(std::time::Duration::from_millis(7))
                    .initial_scan(true)
            )
        );
        assert_ne!(f, fingerprint(&WatchSpec::new(["/r", "/s"])));
        assert_ne!(f, fingerprint(&base.clone().ignore_patterns(["*.o"])));
        assert_ne!(f, fingerprint(&base.clone().follow_symlinks(true)));
    }

    #[test]
    fn a_block_decodes_to_its_entries() {
        let (_, dirs) = sample();
        let mut e = dirs[0].1.clone();
        e.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(Block::of(&e).entries(), e);
    }

    #[cfg(windows)]
    #[test]
    fn names_are_wtf8_so_bytes_sort_as_names_do() {
        use std::os::windows::ffi::OsStringExt;
        let mut names = vec![
            OsString::from("a"),
            OsString::from("\u{105}"),
            OsString::from_wide(&[u16::from(b'n'), 0xD800]),
            OsString::from("\u{1F600}"),
            OsString::from("z"),
        ];
        names.sort();
        let mut by_bytes = names.clone();
        by_bytes.sort_by(|a, b| os_bytes(a).cmp(&os_bytes(b)));
        assert_eq!(by_bytes, names);
        for n in names {
            assert_eq!(os_from(&os_bytes(&n)), Some(n));
        }
    }

    #[test]
    fn zigzag_and_varints_round_trip_extremes() {
        for v in [0, 1, -1, i64::MAX, i64::MIN, 1_700_000_000] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        for v in [0, 127, 128, u64::MAX] {
            let mut b = Vec::new();
            varint(&mut b, v);
            assert_eq!(Reader { buf: &b, at: 0 }.varint(), Some(v));
        }
    }
}
