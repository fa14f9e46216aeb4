//! Content hashes: the only writer of what each file held when it was
//! last reported, for the specs that compare contents
//! ([`WatchOptions::skip_same_content`](crate::WatchOptions::skip_same_content)),
//! of the files whose hash at the spec's start is still being read, and
//! of the rule that leaves out a `Modified` file whose content did not
//! change. Reading the files is the scanner's lanes' (the rule is handed
//! what they read, so that it is tested without a file system); the steps
//! that start a spec's hashes and filter its batches are `hashing.rs`'s.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::batch::change::{Change, ChangeKind, FileType};
use crate::batch::content::ContentHash;
use crate::fasthash::{FastMap, FastSet};
use crate::index::SpecId;

/// The hashes of every spec that compares contents.
#[derive(Debug, Default)]
pub(super) struct Contents {
    specs: FastMap<SpecId, FastMap<PathBuf, ContentHash>>,
    /// Specs whose files' hashes at start are being read: the files not
    /// read yet, the read's token, and when it is given up (the storage
    /// deadline after the last hash came).
    starting: FastMap<SpecId, Starting>,
    /// Specs whose start's reads ended (their status leaves `Starting`).
    touched: Vec<SpecId>,
}

#[derive(Debug)]
struct Starting {
    pending: FastSet<PathBuf>,
    token: u64,
    until: Instant,
}

impl Contents {
    /// Spec `sid` compares contents from now on; `files`: what its files
    /// hold now (those that could be read).
    #[cfg(test)]
    pub(super) fn start(
        &mut self,
        sid: SpecId,
        files: impl IntoIterator<Item = (PathBuf, ContentHash)>,
    ) {
        self.specs.insert(sid, files.into_iter().collect());
    }

    /// Spec `sid` compares contents from now on; what its files `paths`
    /// hold is being read (read `token`), given up at `until` unless a
    /// hash comes (then the deadline moves: [`started`](Self::started)).
    pub(super) fn begin(&mut self, sid: SpecId, paths: &[PathBuf], token: u64, until: Instant) {
        self.specs.insert(sid, FastMap::default());
        if !paths.is_empty() {
            let pending = paths.iter().cloned().collect();
            self.starting.insert(
                sid,
                Starting {
                    pending,
                    token,
                    until,
                },
            );
        }
    }

    /// What file `path` of spec `sid` held at start came (read `token`;
    /// `None`: unreadable); the start's deadline is now `until`. A file
    /// reported meanwhile keeps what its batch read.
    pub(super) fn started(
        &mut self,
        sid: SpecId,
        token: u64,
        path: &Path,
        hash: Option<ContentHash>,
        until: Instant,
    ) {
        let Some(st) = self.starting.get_mut(&sid).filter(|st| st.token == token) else {
            return;
        };
        if !st.pending.remove(path) {
            return;
        }
        st.until = until;
        if let Some(h) = hash
            && let Some(kept) = self.specs.get_mut(&sid)
        {
            kept.insert(path.to_path_buf(), h);
        }
        if st.pending.is_empty() {
            self.starting.remove(&sid);
            self.touched.push(sid);
        }
    }

    /// Whether spec `sid`'s files' hashes at start are being read.
    pub(super) fn starting(&self, sid: SpecId) -> bool {
        self.starting.contains_key(&sid)
    }

    /// When a start's reads are given up next.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.starting.values().map(|st| st.until).min()
    }

    /// Gives up the starts whose reads are late at `now`: their files not
    /// read are compared from their next report on (reported, whatever
    /// they hold).
    pub(super) fn give_up(&mut self, now: Instant) {
        let late: Vec<SpecId> = self
            .starting
            .iter()
            .filter(|(_, st)| st.until <= now)
            .map(|(&sid, _)| sid)
            .collect();
        for sid in late {
            self.starting.remove(&sid);
            self.touched.push(sid);
        }
    }

    /// Specs whose start's reads ended since the last call.
    pub(super) fn take_touched(&mut self) -> Vec<SpecId> {
        std::mem::take(&mut self.touched)
    }

    /// Whether spec `sid` compares contents.
    pub(super) fn compares(&self, sid: SpecId) -> bool {
        self.specs.contains_key(&sid)
    }

    /// Spec `sid` is gone (or compares contents no more).
    pub(super) fn forget(&mut self, sid: SpecId) {
        self.specs.remove(&sid);
        self.starting.remove(&sid);
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
        self.reported(sid, changes);
    }

    /// `changes` of spec `sid` were reported (or dropped): what their
    /// files held at start is no longer what counts.
    fn reported(&mut self, sid: SpecId, changes: &[Change]) {
        if let Some(st) = self.starting.get_mut(&sid) {
            for c in changes {
                st.pending.remove(&c.path);
            }
        }
    }

    /// How many files' hashes spec `sid` keeps.
    #[cfg(test)]
    pub(super) fn len(&self, sid: SpecId) -> usize {
        self.specs.get(&sid).map_or(0, FastMap::len)
    }

    /// The batch of spec `sid` as it is reported: every `Created` or
    /// `Modified` regular file gets the hash of what it holds now
    /// (`hash`: what the lanes read as the batch closed), and a
    /// `Modified` one whose hash is the one kept for it is left out;
    /// the hashes kept follow (a removed file's goes). `first`: the spec's
    /// first batch after a restore, whose `Modified` files were compared
    /// with the saved state, not with what was read at start (kept all,
    /// with the hashes read then). A file that could not be read (gone,
    /// too large, or not read in time) is reported, without a hash, and
    /// its hash is dropped.
    pub(super) fn filter(
        &mut self,
        sid: SpecId,
        mut changes: Vec<Change>,
        first: bool,
        hash: &impl Fn(&Path) -> Option<ContentHash>,
    ) -> Vec<Change> {
        self.reported(sid, &changes);
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
        let mut read: Vec<Option<Option<ContentHash>>> = vec![None; changes.len()];
        for i in wanted {
            read[i] = Some(hash(&changes[i].path));
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
