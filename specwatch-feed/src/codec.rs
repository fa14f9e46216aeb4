//! How a batch travels through Redis: its changes with paths relative to
//! the spec's root, as bytes (each host mounts the storage elsewhere), and
//! the belief's entries (a path's type and metadata). Pure: no I/O.
//!
//! A version byte first, then per change: kind, type, flags, the path,
//! and what the flags say follows (metadata, `from`, content hash).
//! Numbers are LEB128 varints; a signed one (seconds before 1970) is
//! zigzagged first.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use specwatch::{Change, ChangeKind, ContentHash, FileType, Meta};

const VERSION: u8 = 1;

const HAS_META: u8 = 1;
const HAS_FROM: u8 = 2;
const HAS_HASH: u8 = 4;
const HAS_MTIME: u8 = 1;
const HAS_INODE: u8 = 2;

/// A change as the feed carries it: its path relative to the root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RelChange {
    pub path: Vec<u8>,
    pub kind: ChangeKind,
    pub file_type: FileType,
    pub meta: Option<Meta>,
    pub from: Option<Vec<u8>>,
    pub hash: Option<ContentHash>,
}

/// What the feed believes is at a path: its type and, for what is not a
/// directory, its metadata as published.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub file_type: FileType,
    pub meta: Option<Meta>,
}

/// Why bytes read from Redis are not a batch of this feed.
#[derive(Debug, thiserror::Error)]
#[error("undecodable feed data: {0}")]
pub(crate) struct Undecodable(pub &'static str);

/// `path` relative to `root`, as the bytes the feed carries (`/`
/// between names; on Unix the names' raw bytes). `None` outside `root`,
/// or (off Unix) for a name that is not Unicode.
pub(crate) fn relative(root: &Path, path: &Path) -> Option<Vec<u8>> {
    let rel = path.strip_prefix(root).ok()?;
    let mut out = Vec::new();
    for (i, c) in rel.components().enumerate() {
        if i > 0 {
            out.push(b'/');
        }
        #[cfg(unix)]
        out.extend_from_slice(std::os::unix::ffi::OsStrExt::as_bytes(c.as_os_str()));
        #[cfg(not(unix))]
        out.extend_from_slice(c.as_os_str().to_str()?.as_bytes());
    }
    Some(out)
}

/// The path the feed's relative `rel` names below `root`.
pub(crate) fn join(root: &Path, rel: &[u8]) -> PathBuf {
    if rel.is_empty() {
        return root.to_path_buf();
    }
    #[cfg(unix)]
    {
        root.join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(rel))
    }
    #[cfg(not(unix))]
    {
        let mut p = root.to_path_buf();
        for name in String::from_utf8_lossy(rel).split('/') {
            p.push(name);
        }
        p
    }
}

impl RelChange {
    /// `c` relative to `root` (`None`: outside it).
    pub(crate) fn of(root: &Path, c: &Change) -> Option<RelChange> {
        Some(RelChange {
            path: relative(root, &c.path)?,
            kind: c.kind,
            file_type: c.file_type,
            meta: c.meta.as_deref().copied(),
            from: c.from.as_deref().and_then(|f| relative(root, f)),
            hash: c.hash,
        })
    }

    /// The change below `root`.
    pub(crate) fn to_change(&self, root: &Path) -> Change {
        let mut c = Change::new(join(root, &self.path), self.kind, self.file_type);
        if let Some(m) = self.meta {
            c = c.with_meta(m);
        }
        if let Some(f) = &self.from {
            c = c.with_from(join(root, f));
        }
        c.hash = self.hash;
        c
    }

    /// What the belief holds for its path after it (`None`: removed).
    pub(crate) fn entry(&self) -> Option<Entry> {
        (self.kind != ChangeKind::Removed).then_some(Entry {
            file_type: self.file_type,
            meta: self.meta,
        })
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn kind_byte(k: ChangeKind) -> u8 {
    match k {
        ChangeKind::Created => 0,
        ChangeKind::Modified => 1,
        _ => 2,
    }
}

fn type_byte(t: FileType) -> u8 {
    match t {
        FileType::File => 0,
        FileType::Dir => 1,
        FileType::Symlink => 2,
        _ => 3,
    }
}

fn put_meta(out: &mut Vec<u8>, m: &Meta) {
    put_varint(out, m.size);
    let mtime = m.mtime.map(|t| match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
        Err(e) => {
            // Before 1970: whole seconds down, nanoseconds up.
            let d = e.duration();
            let (s, n) = (d.as_secs() as i64, d.subsec_nanos());
            if n == 0 {
                (-s, 0)
            } else {
                (-s - 1, 1_000_000_000 - n)
            }
        }
    });
    let flags =
        if mtime.is_some() { HAS_MTIME } else { 0 } | if m.inode.is_some() { HAS_INODE } else { 0 };
    out.push(flags);
    if let Some((s, n)) = mtime {
        put_varint(out, ((s << 1) ^ (s >> 63)) as u64);
        put_varint(out, u64::from(n));
    }
    if let Some(i) = m.inode {
        put_varint(out, i);
    }
}

/// The bytes of `changes` (the stream entry's `changes` field).
pub(crate) fn encode_changes(changes: &[RelChange]) -> Vec<u8> {
    let mut out = vec![VERSION];
    put_varint(&mut out, changes.len() as u64);
    for c in changes {
        out.push(kind_byte(c.kind));
        out.push(type_byte(c.file_type));
        let flags = if c.meta.is_some() { HAS_META } else { 0 }
            | if c.from.is_some() { HAS_FROM } else { 0 }
            | if c.hash.is_some() { HAS_HASH } else { 0 };
        out.push(flags);
        put_bytes(&mut out, &c.path);
        if let Some(m) = &c.meta {
            put_meta(&mut out, m);
        }
        if let Some(f) = &c.from {
            put_bytes(&mut out, f);
        }
        if let Some(h) = c.hash {
            out.extend_from_slice(&h.to_u128().to_le_bytes());
        }
    }
    out
}

/// The bytes of a belief's entry (a value of the `belief` hash).
pub(crate) fn encode_entry(e: &Entry) -> Vec<u8> {
    let mut out = vec![VERSION, type_byte(e.file_type)];
    match &e.meta {
        Some(m) => {
            out.push(1);
            put_meta(&mut out, m);
        }
        None => out.push(0),
    }
    out
}

/// A list of relative paths (a look request's).
pub(crate) fn encode_paths(paths: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![VERSION];
    put_varint(&mut out, paths.len() as u64);
    for p in paths {
        put_bytes(&mut out, p);
    }
    out
}

/// Reads what the `encode_*` functions wrote.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Result<Reader<'a>, Undecodable> {
        let mut r = Reader { bytes };
        if r.byte()? != VERSION {
            return Err(Undecodable("another version of the feed's format"));
        }
        Ok(r)
    }

    fn byte(&mut self) -> Result<u8, Undecodable> {
        let (&b, rest) = self.bytes.split_first().ok_or(Undecodable("truncated"))?;
        self.bytes = rest;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, Undecodable> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Undecodable("a number too long"))
    }

    fn bytes(&mut self) -> Result<Vec<u8>, Undecodable> {
        let n = usize::try_from(self.varint()?).map_err(|_| Undecodable("a length too long"))?;
        if n > self.bytes.len() {
            return Err(Undecodable("truncated"));
        }
        let (b, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(b.to_vec())
    }

    fn kind(&mut self) -> Result<ChangeKind, Undecodable> {
        Ok(match self.byte()? {
            0 => ChangeKind::Created,
            1 => ChangeKind::Modified,
            2 => ChangeKind::Removed,
            _ => return Err(Undecodable("a change kind")),
        })
    }

    fn file_type(&mut self) -> Result<FileType, Undecodable> {
        Ok(match self.byte()? {
            0 => FileType::File,
            1 => FileType::Dir,
            2 => FileType::Symlink,
            3 => FileType::Other,
            _ => return Err(Undecodable("a file type")),
        })
    }

    fn meta(&mut self) -> Result<Meta, Undecodable> {
        let size = self.varint()?;
        let flags = self.byte()?;
        let mtime = if flags & HAS_MTIME != 0 {
            let z = self.varint()?;
            let s = ((z >> 1) as i64) ^ -((z & 1) as i64);
            let n = u32::try_from(self.varint()?).map_err(|_| Undecodable("nanoseconds"))?;
            let t = if s >= 0 {
                UNIX_EPOCH.checked_add(Duration::new(s as u64, n))
            } else {
                UNIX_EPOCH
                    .checked_sub(Duration::from_secs(s.unsigned_abs()))
                    .and_then(|t| t.checked_add(Duration::from_nanos(u64::from(n))))
            };
            Some(t.ok_or(Undecodable("a time out of range"))?)
        } else {
            None
        };
        let inode = if flags & HAS_INODE != 0 {
            Some(self.varint()?)
        } else {
            None
        };
        Ok(Meta::new(size, mtime, inode))
    }

    fn end(&self) -> Result<(), Undecodable> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(Undecodable("bytes left over"))
        }
    }
}

/// The changes `encode_changes` wrote.
pub(crate) fn decode_changes(bytes: &[u8]) -> Result<Vec<RelChange>, Undecodable> {
    let mut r = Reader::new(bytes)?;
    let n = r.varint()?;
    let mut out = Vec::with_capacity(n.min(4096) as usize);
    for _ in 0..n {
        let kind = r.kind()?;
        let file_type = r.file_type()?;
        let flags = r.byte()?;
        let path = r.bytes()?;
        let meta = if flags & HAS_META != 0 {
            Some(r.meta()?)
        } else {
            None
        };
        let from = if flags & HAS_FROM != 0 {
            Some(r.bytes()?)
        } else {
            None
        };
        let hash = if flags & HAS_HASH != 0 {
            let mut b = [0u8; 16];
            for x in &mut b {
                *x = r.byte()?;
            }
            Some(ContentHash::from_u128(u128::from_le_bytes(b)))
        } else {
            None
        };
        out.push(RelChange {
            path,
            kind,
            file_type,
            meta,
            from,
            hash,
        });
    }
    r.end()?;
    Ok(out)
}

/// The entry `encode_entry` wrote.
pub(crate) fn decode_entry(bytes: &[u8]) -> Result<Entry, Undecodable> {
    let mut r = Reader::new(bytes)?;
    let file_type = r.file_type()?;
    let meta = match r.byte()? {
        0 => None,
        1 => Some(r.meta()?),
        _ => return Err(Undecodable("an entry's metadata flag")),
    };
    r.end()?;
    Ok(Entry { file_type, meta })
}

/// The paths `encode_paths` wrote.
pub(crate) fn decode_paths(bytes: &[u8]) -> Result<Vec<Vec<u8>>, Undecodable> {
    let mut r = Reader::new(bytes)?;
    let n = r.varint()?;
    let mut out = Vec::with_capacity(n.min(4096) as usize);
    for _ in 0..n {
        out.push(r.bytes()?);
    }
    r.end()?;
    Ok(out)
}

/// Milliseconds since 1970 (a stream entry's `time`).
pub(crate) fn millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(size: u64, secs: i64, nanos: u32, inode: Option<u64>) -> Meta {
        let t = if secs >= 0 {
            UNIX_EPOCH + Duration::new(secs as u64, nanos)
        } else {
            UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
                + Duration::from_nanos(nanos.into())
        };
        Meta::new(size, Some(t), inode)
    }

    #[test]
    fn changes_round_trip() {
        let changes = vec![
            RelChange {
                path: b"".to_vec(),
                kind: ChangeKind::Modified,
                file_type: FileType::Dir,
                meta: None,
                from: None,
                hash: None,
            },
            RelChange {
                path: b"t/a/\xffapp-1.0.tgz".to_vec(),
                kind: ChangeKind::Created,
                file_type: FileType::File,
                meta: Some(meta(u64::MAX, 1_700_000_000, 999_999_999, Some(42))),
                from: Some(b"t/a/old.tgz".to_vec()),
                hash: Some(ContentHash::from_u128(u128::MAX - 7)),
            },
            RelChange {
                path: b"before-1970".to_vec(),
                kind: ChangeKind::Modified,
                file_type: FileType::Symlink,
                meta: Some(meta(3, -5, 250, None)),
                from: None,
                hash: None,
            },
            RelChange {
                path: b"x".to_vec(),
                kind: ChangeKind::Removed,
                file_type: FileType::Other,
                meta: Some(Meta::new(0, None, None)),
                from: None,
                hash: None,
            },
        ];
        let bytes = encode_changes(&changes);
        assert_eq!(decode_changes(&bytes).unwrap(), changes);
        assert_eq!(decode_changes(&encode_changes(&[])).unwrap(), vec![]);
        // Every truncation is refused, never misread.
        for n in 0..bytes.len() {
            assert!(decode_changes(&bytes[..n]).is_err(), "truncated at {n}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_changes(&longer).is_err());
        let mut other = bytes;
        other[0] = 2;
        assert!(decode_changes(&other).is_err(), "another version");
    }

    #[test]
    fn entries_and_paths_round_trip() {
        for e in [
            Entry {
                file_type: FileType::File,
                meta: Some(meta(10, 1, 0, Some(1))),
            },
            Entry {
                file_type: FileType::Dir,
                meta: None,
            },
        ] {
            assert_eq!(decode_entry(&encode_entry(&e)).unwrap(), e);
        }
        let paths = vec![b"a/b".to_vec(), Vec::new(), b"\x00\xfe".to_vec()];
        assert_eq!(decode_paths(&encode_paths(&paths)).unwrap(), paths);
    }

    #[test]
    fn paths_are_relative_to_the_root_and_joined_back() {
        let root = Path::new("/mnt/charts");
        assert_eq!(
            relative(root, Path::new("/mnt/charts/t/a.tgz")).unwrap(),
            b"t/a.tgz"
        );
        assert_eq!(relative(root, root).unwrap(), b"");
        assert_eq!(relative(root, Path::new("/mnt/other/a")), None);
        let other = Path::new("/srv/storage");
        assert_eq!(join(other, b"t/a.tgz"), Path::new("/srv/storage/t/a.tgz"));
        assert_eq!(join(other, b""), other);
        let c = Change::new("/mnt/charts/t/b.tgz", ChangeKind::Created, FileType::File)
            .with_from("/mnt/charts/t/a.tgz")
            .with_meta(Meta::new(5, None, Some(9)));
        let rel = RelChange::of(root, &c).unwrap();
        let there = rel.to_change(other);
        assert_eq!(there.path, Path::new("/srv/storage/t/b.tgz"));
        assert_eq!(
            there.from.as_deref(),
            Some(Path::new("/srv/storage/t/a.tgz"))
        );
        assert_eq!(there.meta, c.meta);
    }
}
