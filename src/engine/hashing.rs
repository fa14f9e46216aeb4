//! Content hashes off the engine's thread (`skip_same_content`): the
//! steps that have the scanner's lanes read what a spec's files hold when
//! it starts, and what a closing batch's files hold; that take what the
//! lanes read back; and that deliver a batch once its hashes are in (or
//! given up), filtered by `contents.rs`'s rule. The batch waiting is a
//! hold (`holds.rs`); what each file held when last reported, and the
//! start's reads, are `contents.rs`'s. No state of its own.
//!
//! A file is read on the lane of its directory's file system: a polled
//! directory's key (its last look's), else the device of the spec's root
//! above it, found when the root was attached. So a hash that hangs (a
//! hung mount) holds up that file system's lane and the batch waiting
//! for it, never the engine nor another file system's reads; past the
//! storage deadline after the last hash came, the batch goes without it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::Engine;
use super::holds::Hashed;
use crate::batch::change::{Change, FileType};
use crate::index::SpecId;
use crate::scanner::{FileFound, FileJob, FileRead, FileResult, Purpose};
use crate::state::restore::Restore;

impl Engine {
    /// Spec `sid` compares contents: what the files it sees hold now is
    /// read on the lanes (its status is `Starting` until that is done, or
    /// given up), but for a spec whose `initial_scan` reports them all
    /// (their hashes are read as that batch closes).
    pub(super) fn start_contents(&mut self, sid: SpecId) {
        let Some(st) = self.specs.get(sid) else {
            return;
        };
        if !st.skips_same_content() {
            return;
        }
        let mut paths = Vec::new();
        if !st.initial_scan() {
            let matcher = st.matcher();
            for d in self.spec_dirs(sid) {
                paths.extend(
                    d.visible(matcher)
                        .into_iter()
                        .filter(|(_, t)| *t == FileType::File)
                        .map(|(name, _)| d.path.join(name)),
                );
            }
        }
        let token = self.now_token();
        let until = self.hash_deadline();
        self.contents.begin(sid, &paths, token, until);
        self.read_files(Purpose::Start, sid, token, paths);
    }

    /// The closing batch `changes` of spec `sid` (`mark`: a first
    /// batch's), which compares contents: its created and modified
    /// files' hashes are read on the lanes, and it waits for them (a
    /// hold), behind any of its batches waiting already; delivered now if
    /// there is nothing to wait for.
    pub(super) fn hash_then_deliver(
        &mut self,
        sid: SpecId,
        changes: Vec<Change>,
        mark: Option<Restore>,
    ) {
        let paths: Vec<PathBuf> = changes
            .iter()
            .filter(|c| c.file_type == FileType::File && c.kind.exists_after())
            .map(|c| c.path.clone())
            .collect();
        if paths.is_empty() && self.holds.hashing(sid).is_none() {
            let changes = self
                .contents
                .filter(sid, changes, mark.is_some(), &|_: &Path| None);
            self.deliver(sid, changes, mark);
            return;
        }
        let (wall, until) = (self.clock.wall(), self.hash_deadline());
        let token = self
            .holds
            .hash_wait(sid, (changes, mark), paths.len(), wall, until);
        self.read_files(Purpose::Hash, sid, token, paths);
        // Read at once (the engine's tests' inline scanner): out now.
        self.deliver_hashed();
    }

    /// What the lanes read: the hashes a batch or a start waits for, an
    /// ignore file outside the tree.
    pub(super) fn files_read(&mut self, found: Vec<FileFound>) {
        self.scanner.returned_files(&found);
        let until = self.hash_deadline();
        let mut outside = Vec::new();
        for f in found {
            let sid = SpecId::try_from(f.owner).unwrap_or(SpecId::MAX);
            match (f.purpose, f.found) {
                (Purpose::Hash, FileResult::Hash(h)) => {
                    self.holds.hashed(sid, f.token, f.path, h, until);
                }
                (Purpose::Start, FileResult::Hash(h)) => {
                    self.contents.started(sid, f.token, &f.path, h, until);
                }
                (Purpose::Outside, FileResult::Text { sig, text }) => {
                    outside.push((f.owner, f.token, sig, text));
                }
                _ => {}
            }
        }
        if !outside.is_empty() {
            self.outside_read(outside);
        }
    }

    /// Delivers the batches whose hashes are in, or given up (a file not
    /// read in time is reported without a hash), and gives up the starts
    /// whose reads are late.
    pub(super) fn deliver_hashed(&mut self) {
        let now = self.clock.now();
        self.contents.give_up(now);
        for b in self.holds.take_hashed(now) {
            self.deliver_read(b);
        }
    }

    /// Delivers batch `b`, filtered by what was read of its files.
    pub(super) fn deliver_read(&mut self, b: Hashed) {
        let Hashed {
            sid,
            changes,
            mark,
            read,
        } = b;
        let changes = self
            .contents
            .filter(sid, changes, mark.is_some(), &|p: &Path| {
                read.get(p).copied().flatten()
            });
        self.deliver(sid, changes, mark);
    }

    /// Has the lanes read `paths` for `purpose` (spec `sid`, read
    /// `token`); what they read at once (inline) is taken now.
    fn read_files(&mut self, purpose: Purpose, sid: SpecId, token: u64, paths: Vec<PathBuf>) {
        let jobs: Vec<FileJob> = paths
            .into_iter()
            .map(|path| FileJob {
                purpose,
                owner: u64::from(sid),
                token,
                fs_key: self.file_lane(sid, &path),
                path,
                read: FileRead::Hash,
            })
            .collect();
        if let Some(found) = self.scanner.submit(jobs) {
            self.files_read(found);
        }
    }

    /// The lane file `path` of spec `sid` is read on: its directory's
    /// file system, as its polls found it, else as its root's attach did.
    fn file_lane(&self, sid: SpecId, path: &Path) -> Option<u64> {
        let polled = path
            .parent()
            .and_then(|d| self.index.lookup(d))
            .and_then(|id| self.polls.fs_key(id));
        polled.or_else(|| self.specs.get(sid)?.device_below(path))
    }

    /// When a read that comes now is given up (the storage deadline).
    fn hash_deadline(&self) -> Instant {
        self.clock.now() + self.polls.deadline()
    }

    /// A fresh token for a start's reads.
    fn now_token(&mut self) -> u64 {
        self.holds.next_token()
    }
}
