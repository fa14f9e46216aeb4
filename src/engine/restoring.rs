//! A spec's saved state ([`WatchOptions::state`](crate::WatchOptions::state)):
//! the first batch of a spec restored from a snapshot (the net difference
//! between the entries saved and those the walk just indexed, compared by
//! stat signature), and what a save needs from the index (`export`: the
//! entries the spec sees now, with the seq every batch before them is
//! published under). The snapshot's format is `snapshot.rs`'s; reading,
//! checking and writing the file is the manager's (`state.rs`).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use super::Engine;
use crate::batch::change::{ChangeKind, FileType};
use crate::fs::{self, Sig};
use crate::ignore::Matcher;
use crate::index::{Listing, SpecId};
use crate::state::restore::{Restore, StateRefused};
use crate::state::snapshot::{Saved, Snapshot, Stamp};

/// What a save of a spec needs from the engine.
#[derive(Debug)]
pub(crate) struct Export {
    /// Every batch numbered up to this is published; later changes come
    /// with greater numbers.
    pub through: u64,
    /// The instance of the spec's seqs (its lineage).
    pub instance: u64,
    /// The spec's directories, as indexed.
    pub dirs: Vec<SpecDir>,
    /// The spec's ignore rules (its ignore files' included), to tell
    /// which entries it sees.
    pub matcher: Matcher,
}

/// A directory of a spec, as indexed: copied out of the index (a listing
/// is one allocation) so that what the spec sees there is worked out off
/// the engine's thread, or on several.
#[derive(Debug)]
pub(crate) struct SpecDir {
    pub path: PathBuf,
    /// A directory the spec covers: all its entries (ignored ones too:
    /// [`SpecDir::visible`] leaves them out).
    pub listing: Option<Listing>,
    /// The parent of roots that are not directories: those roots' names,
    /// each with its type if it exists (only these are the spec's here).
    pub roots: Vec<(OsString, Option<FileType>)>,
}

impl SpecDir {
    /// The entries of this directory the spec sees (not ignored by
    /// `matcher`, no sync cookie), sorted by name.
    pub(crate) fn visible(&self, matcher: &Matcher) -> Vec<(OsString, FileType)> {
        let mut out: Vec<(OsString, FileType)> = match &self.listing {
            Some(listing) => listing
                .iter()
                .filter(|(name, t)| {
                    !fs::is_cookie(name)
                        && !matcher.is_ignored(&self.path.join(name), *t == FileType::Dir)
                })
                .map(|(name, t)| (name.to_os_string(), t))
                .collect(),
            None => self
                .roots
                .iter()
                .filter_map(|(name, t)| Some((name.clone(), (*t)?)))
                .collect(),
        };
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Whether the spec's entry `name` of this directory is one it may
    /// have saved here: any in a directory it covers, only a root's name
    /// in a root's parent.
    fn holds(&self, name: &OsString) -> bool {
        self.listing.is_some() || self.roots.iter().any(|(n, _)| n == name)
    }
}

impl Engine {
    /// The directories of spec `sid`, as indexed now (what its initial
    /// scan, a restore and a save go through): every directory it
    /// covers below its roots (followed links included), and the parents
    /// of its roots that are not directories. Sorted by path, each once.
    pub(super) fn spec_dirs(&self, sid: SpecId) -> Vec<SpecDir> {
        let mut dirs: BTreeMap<PathBuf, SpecDir> = BTreeMap::new();
        let Some(st) = self.specs.get(sid) else {
            return Vec::new();
        };
        for root in st.roots() {
            let Some(id) = self
                .index
                .lookup(root)
                .filter(|id| self.index.get(*id).is_some_and(|n| n.covers(sid)))
            else {
                // A file, a link, or nothing: its parent's entry says.
                let (Some(parent), Some(name)) = (root.parent(), root.file_name()) else {
                    continue;
                };
                let t = self
                    .index
                    .lookup(parent)
                    .and_then(|p| self.index.get(p)?.entries().get(name));
                dirs.entry(parent.to_path_buf())
                    .or_insert_with(|| SpecDir {
                        path: parent.to_path_buf(),
                        listing: None,
                        roots: Vec::new(),
                    })
                    .roots
                    .push((name.to_os_string(), t));
                continue;
            };
            let mut stack = vec![id];
            while let Some(id) = stack.pop() {
                let Some(node) = self.index.get(id) else {
                    continue;
                };
                for (name, t) in node.entries().iter() {
                    if matches!(t, FileType::Dir | FileType::Symlink)
                        && let Some(c) = self.index.lookup(&node.path().join(name))
                        && self.index.get(c).is_some_and(|n| n.covers(sid))
                    {
                        stack.push(c);
                    }
                }
                // A directory seen whole wins over a root's name in it.
                let path = node.path().to_path_buf();
                dirs.insert(
                    path.clone(),
                    SpecDir {
                        path,
                        listing: Some(node.entries().clone()),
                        roots: Vec::new(),
                    },
                );
            }
        }
        dirs.into_values().collect()
    }

    /// What a save of spec `name` needs (`None`: no such spec).
    pub(super) fn export(&self, name: &str) -> Option<Export> {
        let sid = self.specs.id_of(name)?;
        Some(Export {
            through: self.out.newest(),
            instance: self.out.instance_of(name),
            dirs: self.spec_dirs(sid),
            matcher: self.specs.get(sid)?.matcher().clone(),
        })
    }

    /// The last save of spec `name`'s state failed with `error`, or
    /// succeeded (`None`): its status's `last_error` says so.
    pub(super) fn state_saved(&mut self, name: &str, error: Option<String>) {
        if let Some(sid) = self.specs.id_of(name) {
            self.problems.state_saved(sid, error, self.clock.wall());
        }
    }

    /// Records, for the new spec `sid`, the net difference between the
    /// snapshot and what its walk indexed: entries not saved are
    /// `Created`, saved entries gone `Removed`, and those whose stat
    /// signature differs (or that were saved as uncertain) `Modified`.
    pub(super) fn restore(&mut self, sid: SpecId, snap: &Snapshot) {
        let dirs = self.spec_dirs(sid);
        let Some(matcher) = self.specs.get(sid).map(|st| st.matcher()) else {
            return;
        };
        // The `stat`s and the comparisons, on a thread per core (each with
        // its own copy of the rules: their memo is not shared); the engine
        // waits for them, as for the walk it has just made.
        let matchers = fs::workers(dirs.len(), || matcher.clone());
        let mut diffs: Vec<Diff> = fs::in_parallel(&dirs, matchers, |matcher, dir| {
            compare_dir(dir, &dir.visible(matcher), snap)
        })
        .into_iter()
        .flatten()
        .collect();
        // Directories saved that the spec no longer sees: gone, replaced,
        // or ignored now (an ignore file changed meanwhile).
        for dir in snap.dirs() {
            if dirs.binary_search_by(|d| d.path.as_path().cmp(dir)).is_ok() {
                continue;
            }
            for (name, s) in snap.entries(dir) {
                diffs.push((dir.join(name), ChangeKind::Removed, s.kind()));
            }
        }
        let now = self.now;
        for (path, kind, t) in diffs {
            self.specs.record_unfiltered(sid, now, path, kind, t);
        }
        drop(dirs);
        // What the comparison allocated, given back.
        fs::trim_heap();
    }

    /// The first batch of a new spec `sid` that keeps its state: restored
    /// from the snapshot, or refused (with `initial_scan`'s changes if it
    /// asked for them).
    pub(super) fn first_batch(
        &mut self,
        sid: SpecId,
        state: Result<Snapshot, StateRefused>,
        initial_scan: bool,
    ) {
        match state {
            Ok(snap) => {
                self.restore(sid, &snap);
                let mark = Restore::Restored {
                    from: snap.header.seq,
                };
                self.emit(sid, None, Some(mark));
            }
            Err(reason) => {
                if initial_scan {
                    self.scan_initial(sid);
                }
                self.emit(sid, None, Some(Restore::Refused { reason }));
            }
        }
    }
}

/// A path's net change since the snapshot, and its type.
type Diff = (PathBuf, ChangeKind, FileType);

/// The differences between directory `dir` as the spec sees it now
/// (`entries`, sorted) and as saved.
fn compare_dir(dir: &SpecDir, entries: &[(OsString, FileType)], snap: &Snapshot) -> Vec<Diff> {
    let path = dir.path.as_path();
    let mut diffs = Vec::new();
    let mut saved = snap.entries(path);
    saved.retain(|(n, _)| dir.holds(n));
    let stamps = fs::sigs_of(path, entries);
    for (k, (name, t)) in entries.iter().enumerate() {
        let kind = match saved.binary_search_by(|(s, _)| s.cmp(name)) {
            Err(_) => Some(ChangeKind::Created),
            Ok(i) => match saved[i].1 {
                Saved::Uncertain(_) => Some(ChangeKind::Modified),
                Saved::Known(was) => {
                    let was = sig_of_stamp(was);
                    // Not `stat`able now: compared as changed.
                    let is = stamps[k].unwrap_or(Sig::UNKNOWN);
                    (was.changed(&is) || was.kind != *t).then_some(ChangeKind::Modified)
                }
            },
        };
        if let Some(kind) = kind {
            diffs.push((path.join(name), kind, *t));
        }
    }
    for (name, s) in &saved {
        if entries.binary_search_by(|(n, _)| n.cmp(name)).is_err() {
            diffs.push((path.join(name), ChangeKind::Removed, s.kind()));
        }
    }
    diffs
}

/// A saved stamp as the signature a poll compares.
fn sig_of_stamp(s: Stamp) -> Sig {
    Sig {
        kind: s.kind,
        size: s.size,
        mtime: s.mtime,
        ctime: s.ctime,
        ino: s.ino,
    }
}
