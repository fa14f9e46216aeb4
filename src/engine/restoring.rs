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
use crate::change::{ChangeKind, FileType};
use crate::fs::{self, Sig};
use crate::index::SpecId;
use crate::restore::{Restore, StateRefused};
use crate::snapshot::{Saved, Snapshot, Stamp};

/// What a save of a spec needs from the engine.
#[derive(Debug)]
pub(crate) struct Export {
    /// Every batch numbered up to this is published; later changes come
    /// with greater numbers.
    pub through: u64,
    /// The instance of the spec's seqs (its lineage).
    pub instance: u64,
    /// The entries the spec sees, by directory (see [`View`]).
    pub dirs: Vec<(PathBuf, Vec<(OsString, FileType)>)>,
}

/// The entries a spec sees, by directory: a directory it covers, with all
/// its entries it does not ignore (`None`), or the parent of a root that
/// is not a directory, with the root's name alone (`Some`: only those
/// names are the spec's there).
type View = BTreeMap<PathBuf, (Vec<(OsString, FileType)>, Option<Vec<OsString>>)>;

impl Engine {
    /// The entries spec `sid` sees now, from the index.
    fn view(&self, sid: SpecId) -> View {
        let mut view = View::new();
        let Some(st) = self.specs.get(sid) else {
            return view;
        };
        let matcher = st.matcher();
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
                let (entries, names) = view
                    .entry(parent.to_path_buf())
                    .or_insert_with(|| (Vec::new(), Some(Vec::new())));
                if let Some(names) = names {
                    names.push(name.to_os_string());
                    if let Some(t) = t {
                        entries.push((name.to_os_string(), t));
                    }
                }
                continue;
            };
            let mut stack = vec![id];
            while let Some(id) = stack.pop() {
                let Some(node) = self.index.get(id) else {
                    continue;
                };
                let mut entries = Vec::new();
                for (name, t) in node.entries().iter() {
                    if fs::is_cookie(name) {
                        continue;
                    }
                    let child = node.path().join(name);
                    if matcher.is_ignored(&child, t == FileType::Dir) {
                        continue;
                    }
                    if matches!(t, FileType::Dir | FileType::Symlink)
                        && let Some(c) = self.index.lookup(&child)
                        && self.index.get(c).is_some_and(|n| n.covers(sid))
                    {
                        stack.push(c);
                    }
                    entries.push((name.to_os_string(), t));
                }
                // A directory seen whole wins over a root's name in it.
                view.insert(node.path().to_path_buf(), (entries, None));
            }
        }
        view
    }

    /// What a save of spec `name` needs (`None`: no such spec).
    pub(super) fn export(&self, name: &str) -> Option<Export> {
        let sid = self.specs.id_of(name)?;
        let dirs = self
            .view(sid)
            .into_iter()
            .map(|(dir, (entries, _))| (dir, entries))
            .collect();
        Some(Export {
            through: self.out.newest(),
            instance: self.out.instance_of(name),
            dirs,
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
        let view: Vec<_> = self.view(sid).into_iter().collect();
        let now = self.now;
        // The `stat`s, on a thread per core: the engine waits for them
        // (its walk of the spec has just done the same).
        let mut diffs: Vec<Diff> = fs::in_parallel(&view, |(dir, (entries, names))| {
            compare_dir(dir, entries, names.as_deref(), snap)
        })
        .into_iter()
        .flatten()
        .collect();
        let seen: std::collections::HashSet<&std::path::Path> =
            view.iter().map(|(d, _)| d.as_path()).collect();
        // Directories saved that the spec no longer sees: gone, replaced,
        // or ignored now (an ignore file changed meanwhile).
        for dir in snap.dirs() {
            if seen.contains(dir) {
                continue;
            }
            for (name, s) in snap.entries(dir) {
                diffs.push((dir.join(name), ChangeKind::Removed, s.kind()));
            }
        }
        for (path, kind, t) in diffs {
            self.specs.record_unfiltered(sid, now, path, kind, t);
        }
    }

    /// The first batch of a new spec `sid` that keeps its state: restored
    /// from the snapshot, or refused (with `initial_scan`'s changes if it
    /// asked for them).
    pub(super) fn first_batch(
        &mut self,
        sid: SpecId,
        roots: &[PathBuf],
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
                    self.scan_initial(sid, roots);
                }
                self.emit(sid, None, Some(Restore::Refused { reason }));
            }
        }
    }
}

/// A path's net change since the snapshot, and its type.
type Diff = (PathBuf, ChangeKind, FileType);

/// The differences between directory `dir` as the spec sees it now
/// (`entries`; `names`: only these are the spec's there) and as saved.
fn compare_dir(
    dir: &std::path::Path,
    entries: &[(OsString, FileType)],
    names: Option<&[OsString]>,
    snap: &Snapshot,
) -> Vec<Diff> {
    let mut diffs = Vec::new();
    let mut saved = snap.entries(dir);
    if let Some(names) = names {
        saved.retain(|(n, _)| names.contains(n));
    }
    let stamps = match names {
        None => fs::scan_dir(dir, true).map_or_else(|_| Vec::new(), |s| s.entries),
        Some(_) => {
            let mut v: Vec<(OsString, Sig)> = entries
                .iter()
                .filter_map(|(n, _)| Some((n.clone(), fs::sig_of(&dir.join(n))?)))
                .collect();
            v.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            v
        }
    };
    let stamp_of = |n: &OsString| {
        stamps
            .binary_search_by(|(s, _)| s.cmp(n))
            .ok()
            .map(|i| stamps[i].1)
    };
    for (name, t) in entries {
        let kind = match saved.binary_search_by(|(s, _)| s.cmp(name)) {
            Err(_) => Some(ChangeKind::Created),
            Ok(i) => match saved[i].1 {
                Saved::Uncertain(_) => Some(ChangeKind::Modified),
                Saved::Known(was) => {
                    let was = sig_of_stamp(was);
                    // Not `stat`able now: compared as changed.
                    let is = stamp_of(name).unwrap_or(Sig::UNKNOWN);
                    (was.changed(&is) || was.kind != *t).then_some(ChangeKind::Modified)
                }
            },
        };
        if let Some(kind) = kind {
            diffs.push((dir.join(name), kind, *t));
        }
    }
    for (name, s) in &saved {
        if entries.binary_search_by(|(n, _)| n.cmp(name)).is_err() {
            diffs.push((dir.join(name), ChangeKind::Removed, s.kind()));
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
