//! A directory's picture, and what changed since the last one: the one
//! read-and-stat and the one comparison that every kind of polling uses
//! (the directories the engine polls, on the scanner's thread or its own,
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

use super::{Sig, content_hash, racy, scan_dir};
use crate::change::FileType;

/// Every entry of a directory with its signature, sorted by name (bytes),
/// and the content hashes of the files that were racy when it was taken.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Picture {
    entries: Vec<(OsString, Sig)>,
    hashes: BTreeMap<OsString, u64>,
}

/// What one look saw.
#[derive(Debug)]
pub(crate) struct Look {
    /// The picture it took (for the next look to compare with).
    pub picture: Picture,
    /// Entries written (`false`) or replaced (`true`) since the previous
    /// picture, sorted by name.
    pub modified: Vec<(OsString, bool)>,
}

fn by_name(a: &OsStr, b: &OsStr) -> std::cmp::Ordering {
    a.as_encoded_bytes().cmp(b.as_encoded_bytes())
}

impl Picture {
    /// A picture of these entries (any order), without hashes.
    pub(crate) fn of(mut entries: Vec<(OsString, Sig)>) -> Picture {
        entries.sort_unstable_by(|a, b| by_name(&a.0, &b.0));
        Picture {
            entries,
            hashes: BTreeMap::new(),
        }
    }

    /// Every entry with its signature, sorted by name.
    pub(crate) fn entries(&self) -> &[(OsString, Sig)] {
        &self.entries
    }

    /// Every entry with its type, sorted by name (a listing).
    pub(crate) fn listing(&self) -> Vec<(OsString, FileType)> {
        self.entries
            .iter()
            .map(|(n, s)| (n.clone(), s.kind))
            .collect()
    }

    fn find(&self, name: &OsStr) -> Result<usize, usize> {
        self.entries.binary_search_by(|(n, _)| by_name(n, name))
    }

    /// The signature of entry `name`.
    pub(crate) fn get(&self, name: &OsStr) -> Option<&Sig> {
        self.find(name).ok().map(|i| &self.entries[i].1)
    }

    /// Entry `name` is `sig` now (`None`: gone), as a look at that one
    /// name found; its content hash, if any, is dropped (an event told of
    /// a write, or the name is new).
    pub(crate) fn set(&mut self, name: &OsStr, sig: Option<Sig>) {
        self.hashes.remove(name);
        match (self.find(name), sig) {
            (Ok(i), Some(s)) => self.entries[i].1 = s,
            (Ok(i), None) => {
                self.entries.remove(i);
            }
            (Err(i), Some(s)) => self.entries.insert(i, (name.to_os_string(), s)),
            (Err(_), None) => {}
        }
    }

    /// Leaves out entries by name (the picture then holds what it had
    /// before for them: `keep` gives that, or nothing).
    pub(crate) fn revert(&mut self, name: &OsStr, keep: Option<Sig>) {
        let hash = self.hashes.get(name).copied();
        self.set(name, keep);
        if let (Some(h), Some(_)) = (hash, keep) {
            self.hashes.insert(name.to_os_string(), h);
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
    let mut i = 0;
    for (name, now) in &new.entries {
        while i < old.entries.len() && by_name(&old.entries[i].0, name).is_lt() {
            i += 1;
        }
        let before = old.entries.get(i).filter(|(n, _)| n == name).map(|e| &e.1);
        let mut now_hash = None;
        if let Some(before) = before
            && before.changed(now)
        {
            modified.push((name.clone(), before.replaced(now)));
        } else if hash
            && now.kind == FileType::File
            && let Some(h0) = old.hashes.get(name)
        {
            // Racy at the last look, and its signature did not move: only
            // its content can tell.
            now_hash = content_hash(&dir.join(name));
            if now_hash != Some(*h0) {
                modified.push((name.clone(), false));
            }
        }
        if hash
            && now.kind == FileType::File
            && racy(now.mtime, wall)
            && let Some(h) = now_hash.or_else(|| content_hash(&dir.join(name)))
        {
            hashes.insert(name.clone(), h);
        }
    }
    new.hashes = hashes;
    modified
}

/// Looks at directory `dir` (`follow`: it may be a symlink to one; its
/// entries are never followed) and compares with `before` (`None`: a first
/// look, nothing modified). `hash`: compare racy files' contents, and keep
/// the hashes of those racy at `wall` (the time of the look).
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
    let mut picture = Picture::of(scan.entries);
    let empty = Picture::default();
    let mut modified = compare(dir, before.unwrap_or(&empty), &mut picture, hash, wall);
    if before.is_none() {
        modified.clear();
    }
    Ok(Look { picture, modified })
}

impl Look {
    /// Takes the sync cookies out of the look (entries and modified) and
    /// returns their paths (`dir`: the directory looked at).
    pub(crate) fn take_cookies(&mut self, dir: &Path) -> Vec<std::path::PathBuf> {
        let cookies: Vec<std::path::PathBuf> = self
            .picture
            .entries
            .iter()
            .filter(|(n, _)| super::is_cookie(n))
            .map(|(n, _)| dir.join(n))
            .collect();
        if !cookies.is_empty() {
            self.picture.entries.retain(|(n, _)| !super::is_cookie(n));
            self.picture.hashes.retain(|n, _| !super::is_cookie(n));
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
        let names: Vec<_> = p.entries().iter().map(|(n, _)| n.clone()).collect();
        assert_eq!(names, vec![n("a"), n("b"), n("c")]);
        p.set(OsStr::new("b"), None);
        assert_eq!(p.get(OsStr::new("b")), None);
        p.revert(OsStr::new("c"), Some(sig(9, 9)));
        assert_eq!(p.get(OsStr::new("c")), Some(&sig(9, 9)));
        p.revert(OsStr::new("c"), None);
        assert_eq!(p.entries().len(), 1);
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
            first.picture.hashes.contains_key(OsStr::new("f")),
            "racy: hashed"
        );
        std::fs::write(&f, "bbbb").unwrap();
        // The signature made to match, as on a file system whose
        // timestamps did not move.
        let mut before = first.picture.clone();
        let hashes = before.hashes.clone();
        before.set(OsStr::new("f"), super::super::sig_of(&f));
        before.hashes = hashes;
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
            old.picture.hashes.is_empty(),
            "settled files are not hashed"
        );
    }
}
