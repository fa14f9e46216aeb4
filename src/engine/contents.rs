//! Content hashes: the only writer of what each file held when it was
//! last reported, for the specs that compare contents
//! ([`WatchOptions::skip_same_content`](crate::WatchOptions::skip_same_content)),
//! and of the rule that leaves out a `Modified` file whose content did not
//! change. Reading the files is the caller's (a function handed in, so that
//! the rule is tested without a file system); the steps that start a
//! spec's hashes and filter its batches are `batching.rs`'s.

use std::path::{Path, PathBuf};

use crate::change::{Change, ChangeKind, FileType};
use crate::content::ContentHash;
use crate::fasthash::FastMap;
use crate::fs;
use crate::index::SpecId;

/// The hashes of every spec that compares contents.
#[derive(Debug, Default)]
pub(super) struct Contents {
    specs: FastMap<SpecId, FastMap<PathBuf, ContentHash>>,
}

/// Hashes of `paths` (`None`: unreadable, or too large), read on several
/// threads.
pub(super) fn read_all(
    paths: &[PathBuf],
    hash: &(impl Fn(&Path) -> Option<ContentHash> + Sync),
) -> Vec<(usize, Option<ContentHash>)> {
    let items: Vec<(usize, &PathBuf)> = paths.iter().enumerate().collect();
    fs::in_parallel(&items, fs::workers(items.len(), || ()), |(), (i, p)| {
        (*i, hash(p))
    })
}

impl Contents {
    /// Spec `sid` compares contents from now on; `files`: what its files
    /// hold now (those that could be read).
    pub(super) fn start(
        &mut self,
        sid: SpecId,
        files: impl IntoIterator<Item = (PathBuf, ContentHash)>,
    ) {
        self.specs.insert(sid, files.into_iter().collect());
    }

    /// Whether spec `sid` compares contents.
    pub(super) fn compares(&self, sid: SpecId) -> bool {
        self.specs.contains_key(&sid)
    }

    /// Spec `sid` is gone (or compares contents no more).
    pub(super) fn forget(&mut self, sid: SpecId) {
        self.specs.remove(&sid);
    }

    /// The changes of spec `sid` were kept from its subscribers: what the
    /// files of `changes` hold is no longer known as reported (their next
    /// change is reported, whatever it holds).
    pub(super) fn forget_paths(&mut self, sid: SpecId, changes: &[Change]) {
        if let Some(kept) = self.specs.get_mut(&sid) {
            for c in changes {
                kept.remove(&c.path);
            }
        }
    }

    /// How many files' hashes spec `sid` keeps.
    #[cfg(test)]
    pub(super) fn len(&self, sid: SpecId) -> usize {
        self.specs.get(&sid).map_or(0, FastMap::len)
    }

    /// The batch of spec `sid` as it is reported: every `Created` or
    /// `Modified` regular file gets the hash of what it holds now, and a
    /// `Modified` one whose hash is the one kept for it is left out;
    /// the hashes kept follow (a removed file's goes). `first`: the spec's
    /// first batch after a restore, whose `Modified` files were compared
    /// with the saved state, not with what was read at start (kept all,
    /// with the hashes read then). A file that cannot be read now (gone,
    /// or too large) is reported, without a hash, and its hash is dropped.
    pub(super) fn filter(
        &mut self,
        sid: SpecId,
        mut changes: Vec<Change>,
        first: bool,
        hash: &(impl Fn(&Path) -> Option<ContentHash> + Sync),
    ) -> Vec<Change> {
        let Some(kept) = self.specs.get_mut(&sid) else {
            return changes;
        };
        let wanted: Vec<usize> = changes
            .iter()
            .enumerate()
            .filter(|(_, c)| c.file_type == FileType::File && c.kind.exists_after())
            .filter(|(_, c)| !(first && kept.contains_key(&c.path)))
            .map(|(i, _)| i)
            .collect();
        let paths: Vec<PathBuf> = wanted.iter().map(|&i| changes[i].path.clone()).collect();
        let mut read: Vec<Option<Option<ContentHash>>> = vec![None; changes.len()];
        for (k, h) in read_all(&paths, hash) {
            read[wanted[k]] = Some(h);
        }
        let mut same = vec![false; changes.len()];
        for (i, c) in changes.iter_mut().enumerate() {
            match (c.kind, read[i]) {
                (ChangeKind::Removed, _) => {
                    kept.remove(&c.path);
                }
                (_, None) if c.file_type == FileType::File => {
                    // The first batch's file read at start.
                    c.hash = kept.get(&c.path).copied();
                }
                (_, None) => {
                    // A directory, link or other: no content of its own.
                    kept.remove(&c.path);
                }
                (kind, Some(now)) => {
                    let before = match now {
                        Some(h) => kept.insert(c.path.clone(), h),
                        None => kept.remove(&c.path),
                    };
                    same[i] =
                        kind == ChangeKind::Modified && !first && now.is_some() && before == now;
                    c.hash = now;
                }
            }
        }
        let mut i = 0;
        changes.retain(|_| {
            i += 1;
            !same[i - 1]
        });
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ChangeKind::{Created, Modified, Removed};
    use std::collections::HashMap;

    /// Files as a map: a path's content, or absent.
    fn disk(files: &[(&str, &str)]) -> HashMap<PathBuf, String> {
        files
            .iter()
            .map(|(p, c)| (PathBuf::from(p), (*c).to_owned()))
            .collect()
    }

    fn hasher(d: &HashMap<PathBuf, String>) -> impl Fn(&Path) -> Option<ContentHash> + Sync + '_ {
        |p| d.get(p).map(|c| ContentHash::of(c.as_bytes()))
    }

    fn kinds(changes: &[Change]) -> Vec<(String, ChangeKind, Option<ContentHash>)> {
        changes
            .iter()
            .map(|c| (c.path.display().to_string(), c.kind, c.hash))
            .collect()
    }

    fn h(s: &str) -> Option<ContentHash> {
        Some(ContentHash::of(s.as_bytes()))
    }

    /// The whole rule: same bytes left out, new bytes reported with their
    /// hash, a removed file's hash forgotten (so the same bytes created
    /// again are reported), directories untouched, other specs untouched.
    #[test]
    fn a_modified_file_with_the_same_content_is_left_out() {
        let mut c = Contents::default();
        c.start(1, [(PathBuf::from("/r/a"), ContentHash::of(b"a"))]);
        assert!(c.compares(1) && !c.compares(2));
        let mut d = disk(&[("/r/a", "a"), ("/r/b", "b")]);
        let batch = vec![
            Change::new("/r/a", Modified, FileType::File),
            Change::new("/r/b", Created, FileType::File),
            Change::new("/r/d", Modified, FileType::Dir),
        ];
        let out = c.filter(1, batch.clone(), false, &hasher(&d));
        assert_eq!(
            kinds(&out),
            vec![
                ("/r/b".into(), Created, h("b")),
                ("/r/d".into(), Modified, None)
            ],
            "a: same bytes, left out"
        );
        assert_eq!(
            c.filter(2, batch.clone(), false, &hasher(&d)),
            batch,
            "spec 2 does not compare"
        );
        d.insert("/r/a".into(), "a2".into());
        let out = c.filter(
            1,
            vec![Change::new("/r/a", Modified, FileType::File)],
            false,
            &hasher(&d),
        );
        assert_eq!(kinds(&out), vec![("/r/a".into(), Modified, h("a2"))]);
        // Back to what it held at start: a change from what was reported.
        d.insert("/r/a".into(), "a".into());
        let out = c.filter(
            1,
            vec![Change::new("/r/a", Modified, FileType::File)],
            false,
            &hasher(&d),
        );
        assert_eq!(kinds(&out), vec![("/r/a".into(), Modified, h("a"))]);
        // Removed: reported, hash forgotten; the same bytes again: Created.
        d.remove(Path::new("/r/a"));
        let out = c.filter(
            1,
            vec![Change::new("/r/a", Removed, FileType::File)],
            false,
            &hasher(&d),
        );
        assert_eq!(kinds(&out), vec![("/r/a".into(), Removed, None)]);
        assert_eq!(c.len(1), 1, "only b's hash is kept");
        d.insert("/r/a".into(), "a".into());
        let out = c.filter(
            1,
            vec![Change::new("/r/a", Modified, FileType::File)],
            false,
            &hasher(&d),
        );
        assert_eq!(
            kinds(&out),
            vec![("/r/a".into(), Modified, h("a"))],
            "no hash kept: reported"
        );
        c.forget(1);
        assert!(!c.compares(1));
    }

    /// A file that cannot be read (gone by the time its batch closes, or
    /// too large) is reported without a hash, and compared no more until
    /// it can be read again.
    #[test]
    fn an_unreadable_file_is_reported_without_a_hash() {
        let mut c = Contents::default();
        c.start(1, [(PathBuf::from("/r/big"), ContentHash::of(b"x"))]);
        let d = disk(&[]);
        let out = c.filter(
            1,
            vec![Change::new("/r/big", Modified, FileType::File)],
            false,
            &hasher(&d),
        );
        assert_eq!(kinds(&out), vec![("/r/big".into(), Modified, None)]);
        assert_eq!(c.len(1), 0);
    }

    /// A restore's first batch: its `Modified` files differ from the saved
    /// state, not from what was read at start: all are reported, with the
    /// hashes read then (no second read).
    #[test]
    fn the_first_batch_after_a_restore_is_kept_whole() {
        let mut c = Contents::default();
        c.start(1, [(PathBuf::from("/r/a"), ContentHash::of(b"a"))]);
        let d = disk(&[("/r/a", "changed since"), ("/r/n", "n")]);
        let out = c.filter(
            1,
            vec![
                Change::new("/r/a", Modified, FileType::File),
                Change::new("/r/n", Created, FileType::File),
            ],
            true,
            &hasher(&d),
        );
        assert_eq!(
            kinds(&out),
            vec![
                ("/r/a".into(), Modified, h("a")),
                ("/r/n".into(), Created, h("n"))
            ],
            "a's hash is the one read at start; n, unknown then, is read"
        );
    }
}
