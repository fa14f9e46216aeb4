//! A directory's picture, and what changed since the last one: the one
//! read-and-stat and the one comparison that every kind of polling uses
//! (the directories the engine polls, on the scanner's lanes or its own,
//! a manager that polls everything included, and `rescan_every`'s safety
//! net).
//!
//! A look reads the directory and `stat`s every entry ([`scan_dir`]), then
//! compares each entry's signature with the previous picture's: one that
//! [changed](Sig::changed) was written, or [replaced](Sig::replaced). With
//! content hashing on, a file whose signature did not move but that was
//! racy at the previous look (written within [`COARSE_TIME`] of it:
//! coarse timestamps could hide a rewrite) is hashed again and compared;
//! racy files' hashes are kept for the next look. Names that came or went
//! are not listed as modified: the picture's names say so.
//!
//! [`scan_dir`]: super::scan_dir
//! [`COARSE_TIME`]: super::sig::COARSE_TIME

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::Path;
use std::time::SystemTime;

use super::packed::{self, Packed};
use super::{Sig, content_hash, racy, scan_dir};
use crate::batch::change::FileType;
use crate::batch::content::ContentHash;

/// Every entry of a directory with its signature, sorted by name (bytes),
/// and the content hashes of the files that were racy when it was taken.
///
/// The entries are packed in one allocation ([`Packed`]): some 10 bytes
/// beside each name. Entries set one at a time since (an event's look at
/// one name, a rescan's names kept as the engine saw them) wait beside it,
/// sorted, and are packed in with the rest once there are more than a few
/// (a sixteenth of the picture).
#[derive(Clone, Debug, Default)]
pub(crate) struct Picture {
    packed: Packed,
    /// Set entries and content hashes, when there are any.
    extra: Option<Box<Extra>>,
}

#[derive(Clone, Debug, Default)]
struct Extra {
    /// Entries set since the picture was packed (`None`: removed), sorted
    /// by name: they stand over the packed ones.
    set: Vec<(OsString, Option<Sig>)>,
    hashes: BTreeMap<OsString, ContentHash>,
}

/// What one look saw.
#[derive(Debug)]
pub(crate) struct Look {
    /// The picture it took (for the next look to compare with).
    pub picture: Picture,
    /// Entries written (`false`) or replaced (`true`) since the previous
    /// picture, sorted by name.
    pub modified: Vec<(OsString, bool)>,
    /// The device of the directory looked at (Windows: its volume's
    /// serial number), if known: another one than before tells that a file
    /// system was mounted or unmounted there.
    pub dev: Option<u64>,
    /// The file systems the look touched, as one key: the device of the
    /// directory (Windows: its volume's serial number) from the handle it
    /// was read through; on Linux mixed with the devices of its entries
    /// that are mount points of other file systems (their `stat` crossed
    /// into them, and hangs with them). The scanner's lane for the next
    /// look (`scanner.rs`).
    pub fs_key: Option<u64>,
}

fn by_name(a: &OsStr, b: &OsStr) -> std::cmp::Ordering {
    a.as_encoded_bytes().cmp(b.as_encoded_bytes())
}

/// Entries set beside a packed picture of `n` entries before they are
/// packed in with it.
fn set_max(n: usize) -> usize {
    16 + n / 16
}

impl PartialEq for Picture {
    fn eq(&self, other: &Picture) -> bool {
        let (a, b) = (self.extra.as_deref(), other.extra.as_deref());
        if a.is_none_or(|e| e.set.is_empty()) && b.is_none_or(|e| e.set.is_empty()) {
            if self.packed != other.packed {
                return false;
            }
        } else if !self.iter().eq(other.iter()) {
            return false;
        }
        a.map(|e| &e.hashes).filter(|h| !h.is_empty())
            == b.map(|e| &e.hashes).filter(|h| !h.is_empty())
    }
}

impl Eq for Picture {}

impl Picture {
    /// A picture of these entries (any order), without hashes.
    pub(crate) fn of(mut entries: Vec<(OsString, Sig)>) -> Picture {
        entries.sort_unstable_by(|a, b| by_name(&a.0, &b.0));
        Picture::sorted(&entries)
    }

    /// A picture of these entries, sorted by name, without hashes.
    fn sorted(entries: &[(OsString, Sig)]) -> Picture {
        Picture {
            packed: Packed::of(entries.iter().map(|(n, s)| (n.as_os_str(), *s))),
            extra: None,
        }
    }

    /// Every entry with its signature, sorted by name.
    pub(crate) fn iter(&self) -> Iter<'_> {
        Iter {
            packed: self.packed.iter().peekable(),
            set: self.extra.as_ref().map_or(&[][..], |e| &e.set[..]),
        }
    }

    /// Every entry with its type, sorted by name (a listing).
    pub(crate) fn listing(&self) -> Vec<(OsString, FileType)> {
        self.iter()
            .map(|(n, s)| (n.to_os_string(), s.kind))
            .collect()
    }

    /// The signature of entry `name`.
    pub(crate) fn get(&self, name: &OsStr) -> Option<Sig> {
        if let Some(e) = &self.extra
            && let Ok(i) = e.set.binary_search_by(|(n, _)| by_name(n, name))
        {
            return e.set[i].1;
        }
        self.packed.get(name)
    }

    fn hashes(&self) -> Option<&BTreeMap<OsString, ContentHash>> {
        self.extra.as_ref().map(|e| &e.hashes)
    }

    fn hash(&self, name: &OsStr) -> Option<ContentHash> {
        self.hashes()?.get(name).copied()
    }

    /// Entry `name` is `sig` now (`None`: gone), as a look at that one
    /// name found; its content hash, if any, is dropped (an event told of
    /// a write, or the name is new).
    pub(crate) fn set(&mut self, name: &OsStr, sig: Option<Sig>) {
        if let Some(e) = &mut self.extra {
            e.hashes.remove(name);
        }
        if self.get(name) == sig {
            return;
        }
        let e = self.extra.get_or_insert_default();
        match e.set.binary_search_by(|(n, _)| by_name(n, name)) {
            Ok(i) => e.set[i].1 = sig,
            Err(i) => e.set.insert(i, (name.to_os_string(), sig)),
        }
        if e.set.len() > set_max(self.packed.len()) {
            self.pack();
        }
    }

    /// Packs the entries set one at a time in with the rest.
    fn pack(&mut self) {
        self.packed = Packed::of(self.iter());
        if let Some(e) = &mut self.extra {
            e.set = Vec::new();
            if e.hashes.is_empty() {
                self.extra = None;
            }
        }
    }

    /// Leaves out entries by name (the picture then holds what it had
    /// before for them: `keep` gives that, or nothing).
    pub(crate) fn revert(&mut self, name: &OsStr, keep: Option<Sig>) {
        let hash = self.hash(name);
        self.set(name, keep);
        if let (Some(h), Some(_)) = (hash, keep) {
            self.extra
                .get_or_insert_default()
                .hashes
                .insert(name.to_os_string(), h);
        }
    }

    /// Leaves out the entries whose names `out` says.
    fn retain_names(&mut self, out: impl Fn(&OsStr) -> bool) {
        self.packed = Packed::of(self.iter().filter(|(n, _)| !out(n)));
        if let Some(e) = &mut self.extra {
            e.set = Vec::new();
            e.hashes.retain(|n, _| !out(n));
            if e.hashes.is_empty() {
                self.extra = None;
            }
        }
    }
}

/// The entries of a [`Picture`], sorted by name.
#[derive(Clone)]
pub(crate) struct Iter<'a> {
    packed: std::iter::Peekable<packed::Iter<'a>>,
    set: &'a [(OsString, Option<Sig>)],
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a OsStr, Sig);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let Some((name, one)) = self.set.first() else {
                return self.packed.next();
            };
            match self.packed.peek() {
                Some((p, _)) if by_name(p, name).is_lt() => return self.packed.next(),
                Some((p, _)) if by_name(p, name).is_eq() => {
                    self.packed.next();
                }
                _ => {}
            }
            self.set = &self.set[1..];
            if let Some(s) = one {
                return Some((name.as_os_str(), *s));
            }
        }
    }
}

/// The entries of `new` written (`false`) or replaced (`true`) since
/// `old`, by signature; with `hash`, racy files of `old` whose signature did
/// not move are hashed again (`dir`: where they are). Fills `new`'s hashes
/// of files racy at `wall`.
fn compare(
    dir: &Path,
    old: &Picture,
    new: &mut Picture,
    hash: bool,
    wall: SystemTime,
) -> Vec<(OsString, bool)> {
    let mut modified = Vec::new();
    let mut hashes = BTreeMap::new();
    let mut olds = old.iter().peekable();
    for (name, now) in new.iter() {
        while olds.next_if(|(n, _)| by_name(n, name).is_lt()).is_some() {}
        let before = olds.next_if(|(n, _)| *n == name).map(|e| e.1);
        let mut now_hash = None;
        if let Some(before) = before
            && before.changed(&now)
        {
            modified.push((name.to_os_string(), before.replaced(&now)));
        } else if hash
            && now.kind == FileType::File
            && let Some(h0) = old.hash(name)
        {
            // Racy at the last look, and its signature did not move: only
            // its content can tell.
            // (One that cannot be read now keeps the hash it had: a
            // failing read is not a write.)
            now_hash = Some(content_hash(&dir.join(name)).unwrap_or(h0));
            if now_hash != Some(h0) {
                modified.push((name.to_os_string(), false));
            }
        }
        if hash
            && now.kind == FileType::File
            && racy(now.mtime, wall)
            && let Some(h) = now_hash.or_else(|| content_hash(&dir.join(name)))
        {
            hashes.insert(name.to_os_string(), h);
        }
    }
    let e = new.extra.get_or_insert_default();
    e.hashes = hashes;
    if e.set.is_empty() && e.hashes.is_empty() {
        new.extra = None;
    }
    modified
}

/// Looks at directory `dir` (`follow`: it may be a symlink to one; its
/// entries are never followed) and compares with `before` (`None`: a first
/// look, nothing modified). `hash`: compare racy files' contents, and keep
/// the hashes of those racy at `wall` (the time of the look).
///
/// An entry listed but not `stat`able now (`EIO`, `ESTALE`: storage that
/// fails) tells nothing of what it is: it keeps the signature `before`
/// had for it (unless its listing gives another type: then it was
/// replaced), so that a failing `stat` is neither a write nor a
/// replacement (a directory "replaced" is covered again: everything below
/// it reported removed), and once it can be `stat`ed again it is compared
/// with what it was.
///
/// # Errors
///
/// Those of reading the directory (an entry that vanishes between the read
/// and its `stat` is left out).
pub(crate) fn look(
    dir: &Path,
    follow: bool,
    before: Option<&Picture>,
    hash: bool,
    wall: SystemTime,
) -> io::Result<Look> {
    let scan = scan_dir(dir, follow)?;
    let dev = scan.dev;
    let fs_key = scan.fs_key;
    let mut picture = Picture {
        packed: Packed::of(
            scan.iter()
                .map(|(n, now)| (n, known(now, before.and_then(|b| b.get(n))))),
        ),
        extra: None,
    };
    drop(scan);
    let empty = Picture::default();
    let mut modified = compare(dir, before.unwrap_or(&empty), &mut picture, hash, wall);
    if before.is_none() {
        modified.clear();
    }
    Ok(Look {
        picture,
        modified,
        dev,
        fs_key,
    })
}

/// What an entry is as far as a look can tell: `now`, what its `stat`
/// said; or, where that failed (`now` is [unread](Sig::unread)) and the
/// listing gives no other type than it had, what it was `before`.
fn known(now: Sig, before: Option<Sig>) -> Sig {
    match before {
        Some(b)
            if now.unread()
                && !b.unread()
                && (now.kind == b.kind || now.kind == FileType::Other) =>
        {
            b
        }
        _ => now,
    }
}

impl Look {
    /// Takes the sync cookies out of the look (entries and modified) and
    /// returns their paths (`dir`: the directory looked at).
    pub(crate) fn take_cookies(&mut self, dir: &Path) -> Vec<std::path::PathBuf> {
        let cookies: Vec<std::path::PathBuf> = self
            .picture
            .iter()
            .filter(|(n, _)| super::is_cookie(n))
            .map(|(n, _)| dir.join(n))
            .collect();
        if !cookies.is_empty() {
            self.picture.retain_names(super::is_cookie);
            self.modified.retain(|(n, _)| !super::is_cookie(n));
        }
        cookies
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn sig(ino: u64, size: u64) -> Sig {
        Sig {
            kind: FileType::File,
            size,
            mtime: (1, 0),
            ctime: (1, 0),
            ino,
        }
    }

    fn n(s: &str) -> OsString {
        OsString::from(s)
    }

    /// An entry listed that cannot be `stat`ed now (`EIO`, `ESTALE`) is
    /// what it was: neither written nor replaced (a directory "replaced"
    /// is covered again, everything below it reported removed), and it is
    /// compared with what it was once it can be `stat`ed again. One whose
    /// listing gives another type was replaced.
    #[test]
    fn an_entry_that_cannot_be_stated_is_what_it_was() {
        let unread = |kind| Sig {
            kind,
            ..Sig::UNKNOWN
        };
        let dir = Sig {
            kind: FileType::Dir,
            ..sig(7, 4096)
        };
        let file = sig(8, 3);
        assert!(unread(FileType::Dir).unread() && !dir.unread());
        assert_eq!(known(unread(FileType::Dir), Some(dir)), dir);
        assert_eq!(
            known(unread(FileType::Other), Some(file)),
            file,
            "no type in the listing (d_type unknown)"
        );
        assert_eq!(
            known(unread(FileType::File), Some(dir)),
            unread(FileType::File),
            "another type: replaced"
        );
        assert_eq!(known(unread(FileType::Dir), None), unread(FileType::Dir));
        assert_eq!(
            known(unread(FileType::Dir), Some(Sig::UNKNOWN)),
            unread(FileType::Dir),
            "nothing known before either"
        );
        assert_eq!(known(file, Some(sig(8, 9))), file, "a stat is the truth");
        // Compared with the picture before: nothing written or replaced.
        let old = Picture::of(vec![(n("d"), dir), (n("f"), file)]);
        let mut now = Picture::of(vec![
            (n("d"), known(unread(FileType::Dir), Some(dir))),
            (n("f"), known(unread(FileType::File), Some(file))),
        ]);
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        assert!(compare(Path::new("/nowhere"), &old, &mut now, false, wall).is_empty());
    }

    #[test]
    fn signatures_tell_written_and_replaced_entries() {
        let old = Picture::of(vec![
            (n("e"), sig(5, 1)),
            (n("a"), sig(1, 1)),
            (n("b"), sig(2, 1)),
            (n("c"), sig(3, 1)),
        ]);
        let mut new = Picture::of(vec![
            (n("a"), sig(1, 1)),
            (n("b"), sig(2, 9)),
            (n("c"), sig(33, 1)),
            (n("d"), sig(4, 1)),
        ]);
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let m = compare(Path::new("/nowhere"), &old, &mut new, false, wall);
        assert_eq!(
            m,
            vec![(n("b"), false), (n("c"), true)],
            "added and removed names are the listing's business"
        );
        let mut same = new.clone();
        assert!(compare(Path::new("/nowhere"), &new, &mut same, false, wall).is_empty());
    }

    #[test]
    fn set_and_revert_keep_the_picture_sorted() {
        let mut p = Picture::of(vec![(n("b"), sig(2, 1))]);
        p.set(OsStr::new("c"), Some(sig(3, 1)));
        p.set(OsStr::new("a"), Some(sig(1, 1)));
        let names: Vec<_> = p.iter().map(|(n, _)| n.to_os_string()).collect();
        assert_eq!(names, vec![n("a"), n("b"), n("c")]);
        p.set(OsStr::new("b"), None);
        assert_eq!(p.get(OsStr::new("b")), None);
        p.revert(OsStr::new("c"), Some(sig(9, 9)));
        assert_eq!(p.get(OsStr::new("c")), Some(sig(9, 9)));
        p.revert(OsStr::new("c"), None);
        assert_eq!(p.iter().count(), 1);
    }

    /// Entries set one at a time (set, reverted, removed) read back as a
    /// map of them would, before and after they are packed in.
    #[test]
    fn set_entries_read_as_a_map_would() {
        let mut model: BTreeMap<OsString, Sig> = (0..40u64)
            .map(|i| (n(&format!("e{i:02}")), sig(i, i)))
            .collect();
        let mut p = Picture::of(model.iter().map(|(k, v)| (k.clone(), *v)).collect());
        let mut x = 7u64;
        for round in 0..2000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let name = n(&format!("e{:02}", (x >> 33) % 60));
            let value = (!(x >> 20).is_multiple_of(4)).then(|| sig(round, x % 9));
            if round % 3 == 0 {
                p.revert(&name, value);
            } else {
                p.set(&name, value);
            }
            match value {
                Some(s) => model.insert(name.clone(), s),
                None => model.remove(&name),
            };
            assert_eq!(p.get(&name), value);
            if round.is_multiple_of(97) {
                let seen: Vec<(OsString, Sig)> =
                    p.iter().map(|(k, v)| (k.to_os_string(), v)).collect();
                let want: Vec<(OsString, Sig)> =
                    model.iter().map(|(k, v)| (k.clone(), *v)).collect();
                assert_eq!(seen, want, "round {round}");
                assert_eq!(p, Picture::of(want), "equal to the same entries packed");
            }
        }
    }

    /// A rewrite that keeps size and times is seen only by its content,
    /// and only for a file racy at the previous look.
    #[test]
    fn content_tells_a_rewrite_the_signature_hides() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, "aaaa").unwrap();
        let now = SystemTime::now();
        let first = look(d.path(), false, None, true, now).unwrap();
        assert!(first.modified.is_empty(), "a first look modifies nothing");
        assert!(
            first.picture.hash(OsStr::new("f")).is_some(),
            "racy: hashed"
        );
        std::fs::write(&f, "bbbb").unwrap();
        // The signature made to match, as on a file system whose
        // timestamps did not move.
        let mut before = first.picture.clone();
        before.revert(OsStr::new("f"), super::super::sig_of(&f));
        let again = look(d.path(), false, Some(&before), true, now).unwrap();
        assert_eq!(again.modified, vec![(n("f"), false)], "the content tells");
        let blind = look(d.path(), false, Some(&before), false, now).unwrap();
        assert!(
            blind.modified.is_empty(),
            "control: without hashing, nothing"
        );
        let quiet = look(d.path(), false, Some(&again.picture), true, now).unwrap();
        assert!(quiet.modified.is_empty(), "unchanged since: quiet");
        // Long after (not racy any more): no hash is kept.
        let later = now + Duration::from_secs(3600);
        let old = look(d.path(), false, None, true, later).unwrap();
        assert!(
            old.picture.hashes().is_none(),
            "settled files are not hashed"
        );
    }
}
