//! Ignore files ([`WatchOptions::ignore_files`](crate::WatchOptions::ignore_files)):
//! the steps that read them as directories are indexed (and above each
//! root, up to its repository's top), read again those that changed (or,
//! outside the watched tree, whose signature did), and apply what a
//! change of rules shows or hides. Which are waiting to be read again is
//! `ignore_files.rs`'s; the rules live in each spec's matcher
//! (`specs.rs`).
//!
//! When one changes, its directory's subtree is compared under the old
//! and the new rules, for each spec that honours it: entries that become
//! ignored are reported `Removed` (directories with all they showed, and
//! their nodes let go of), entries that stop being ignored are reported
//! `Created` (directories covered and read, with all they hold).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::Engine;
use crate::batch::change::{ChangeKind, FileType};
use crate::fs;
use crate::ignore::Matcher;
use crate::ignore::files::IgnoreFile;
use crate::ignore::kinds::IgnoreFiles;
use crate::index::{DirId, SpecId};
use crate::scanner::{FileJob, FileRead, Purpose};

/// Largest ignore file read (larger ones are treated as absent).
const MAX_IGNORE_FILE: u64 = 1 << 20;

/// The scanner's lane of the ignore files outside the watched tree (a key
/// no file system's look has: see `fs::Look::fs_key`).
const OUTSIDE_LANE: u64 = u64::MAX - 0x1a;

/// How far above a root ignore files are looked for (a repository's top).
const MAX_LEVELS_ABOVE: usize = 64;

fn read(file: &Path) -> Option<String> {
    fs::read_small(file, MAX_IGNORE_FILE)
}

impl Engine {
    /// Reads the ignore files of indexed directory `id` for those of
    /// `specs` that honour them.
    pub(super) fn load_ignore_files(&mut self, id: DirId, specs: &[SpecId]) {
        if !self.specs.any_ignore_files() {
            return; // the walk's hot path: nothing to look up
        }
        let honour: Vec<SpecId> = specs
            .iter()
            .copied()
            .filter(|s| self.specs.honours_ignore_files(*s))
            .collect();
        if honour.is_empty() {
            return;
        }
        let Some(node) = self.index.get(id) else {
            return;
        };
        let dir = node.path().clone();
        let present: Vec<(IgnoreFile, bool)> = IgnoreFile::IN_DIRS
            .into_iter()
            .map(|w| {
                let here = match w {
                    IgnoreFile::Exclude => {
                        node.entries().get(OsStr::new(".git")) == Some(FileType::Dir)
                    }
                    w => node
                        .entries()
                        .get(OsStr::new(w.rel_path()))
                        .is_some_and(|t| t != FileType::Dir),
                };
                (w, here)
            })
            .collect();
        for (which, here) in present {
            let takers: Vec<SpecId> = honour
                .iter()
                .copied()
                .filter(|s| self.specs.takes_ignore_file(*s, which, &dir))
                .collect();
            if takers.is_empty() {
                continue;
            }
            let file = dir.join(which.rel_path());
            // An absent file clears what an earlier one there had set.
            let text = if here { read(&file) } else { None };
            for s in takers {
                self.set_ignore_file(s, &dir, which, &file, text.as_deref());
                if which == IgnoreFile::Exclude && here {
                    // In `.git`, which is pruned: no watch sees it change.
                    self.reloads.follow(s, &dir, which, &file, self.now);
                }
            }
        }
    }

    /// Reads the ignore files of the directories above `root` up to its
    /// repository's top (the first with a `.git`), and git's global
    /// excludes file, for `sid`.
    pub(super) fn load_ignore_files_above(&mut self, sid: SpecId, root: &Path) {
        let Some(kinds) = self.specs.get(sid).map(|st| st.ignore_file_kinds()) else {
            return;
        };
        let mut above = Vec::new();
        if kinds.contains(IgnoreFiles::GIT) {
            above.extend([IgnoreFile::Ignore, IgnoreFile::Gitignore]);
        }
        if kinds.contains(IgnoreFiles::TILT) {
            above.push(IgnoreFile::Tilt);
        }
        if above.is_empty() {
            return;
        }
        let mut top = None;
        let mut dir = root.parent();
        let mut levels = 0;
        while let Some(d) = dir
            && levels < MAX_LEVELS_ABOVE
        {
            levels += 1;
            // Followed whether present or not: one may be written later.
            for &which in &above {
                self.follow_outside(sid, d, which, &d.join(which.rel_path()));
            }
            if fs::is_dir_following(&d.join(".git")) {
                if kinds.contains(IgnoreFiles::GIT) {
                    let file = d.join(IgnoreFile::Exclude.rel_path());
                    self.follow_outside(sid, d, IgnoreFile::Exclude, &file);
                }
                top = Some(d);
                break;
            }
            dir = d.parent();
        }
        if kinds.contains(IgnoreFiles::GIT)
            && let Some(file) = self.reloads.excludes_file()
        {
            // From the repository's top; outside one, from the root.
            let base = top.unwrap_or(root);
            self.follow_outside(sid, base, IgnoreFile::Global, &file);
        }
    }

    /// Reads ignore file `file` (`which`, applying in `dir`, which no
    /// watch of `sid` covers) for `sid`, and follows it from now on.
    fn follow_outside(&mut self, sid: SpecId, dir: &Path, which: IgnoreFile, file: &Path) {
        if let Some(text) = read(file) {
            self.set_ignore_file(sid, dir, which, file, Some(&text));
        }
        self.reloads.follow(sid, dir, which, file, self.now);
    }

    /// Sets `which` (the file `file`) in `dir` for `sid`, and notes the
    /// lines it skipped in `sid`'s problems; whether the rules changed.
    fn set_ignore_file(
        &mut self,
        sid: SpecId,
        dir: &Path,
        which: IgnoreFile,
        file: &Path,
        text: Option<&str>,
    ) -> bool {
        let set = self.specs.set_ignore_file(sid, dir, which, text);
        self.problems
            .ignore_file(sid, file, &set.bad, self.clock.wall());
        set.changed
    }

    /// Directory `node` (at `dir`) left the index: the rules of its ignore
    /// files go with it, for every spec that honours them (a directory
    /// made again at that path starts without them).
    pub(super) fn forget_ignore_files(&mut self, dir: &Path, specs: &[SpecId]) {
        for &s in specs {
            if self.specs.honours_ignore_files(s) {
                for which in IgnoreFile::IN_DIRS {
                    self.set_ignore_file(s, dir, which, &dir.join(which.rel_path()), None);
                }
                self.specs.set_ignore_file(s, dir, IgnoreFile::Global, None);
                self.reloads.unfollow(s, Some(dir));
            }
        }
    }

    /// Has the scanner's lanes look at the ignore files outside the
    /// watched tree (when due, or `now` for a sync: then returns the
    /// token of the round the sync waits for). What they read is applied
    /// by [`outside_read`](Self::outside_read).
    pub(super) fn look_outside(&mut self, now: bool) -> Option<u64> {
        let (round, wait_for) = self.reloads.look_round(now, self.clock.now());
        if let Some((token, files)) = round {
            let jobs = files
                .into_iter()
                .map(|(id, path)| FileJob {
                    purpose: Purpose::Outside,
                    owner: id,
                    token,
                    path,
                    // A lane of their own (above the roots, in a home).
                    fs_key: Some(OUTSIDE_LANE),
                    read: FileRead::Text {
                        max: MAX_IGNORE_FILE,
                    },
                })
                .collect();
            if let Some(found) = self.scanner.submit(jobs) {
                self.files_read(found);
            }
        }
        wait_for
    }

    /// What the lanes read of ignore files outside the watched tree
    /// (id, round, signature, text): those whose signature moved are
    /// applied.
    pub(super) fn outside_read(&mut self, read: Vec<(u64, u64, Option<fs::Sig>, Option<String>)>) {
        self.now = self.clock.now();
        let mut any = false;
        for (id, token, sig, text) in read {
            let Some((sid, dir, which, file)) =
                self.reloads.read_outside(token, id, sig, self.clock.now())
            else {
                continue;
            };
            let Some(old) = self.specs.get(sid).map(|st| st.matcher().clone()) else {
                continue;
            };
            if !self.set_ignore_file(sid, &dir, which, &file, text.as_deref()) {
                continue;
            }
            any = true;
            // Below `dir`: the spec's roots there, or `dir` itself.
            let roots = self.specs.get(sid).map(|st| st.roots().to_vec());
            let tops: Vec<DirId> = match self.index.lookup(&dir) {
                Some(id) if self.index.get(id).is_some_and(|n| n.covers(sid)) => vec![id],
                _ => roots
                    .unwrap_or_default()
                    .iter()
                    .filter(|r| r.starts_with(&dir))
                    .filter_map(|r| self.index.lookup(r))
                    .collect(),
            };
            for top in tops {
                self.apply_ignore_change(sid, top, &old);
            }
        }
        if any {
            self.watches.reconcile_soon();
        }
    }

    /// Entry `name` of directory `id` changed: if it is an ignore file,
    /// read it again at the end of the pass.
    pub(super) fn note_ignore_file(&mut self, id: DirId, name: &OsStr) {
        if IgnoreFile::named(name).is_some()
            && self
                .index
                .get(id)
                .is_some_and(|n| n.full().iter().any(|s| self.specs.honours_ignore_files(*s)))
        {
            self.reloads.note(id, name.to_os_string());
        }
    }

    /// Reads again the ignore files that changed, and reports what that
    /// changed for each spec that honours them.
    pub(super) fn reload_ignore_files(&mut self) {
        let todo = self.reloads.take_pending();
        if todo.is_empty() {
            return;
        }
        self.now = self.clock.now();
        for (id, name) in todo {
            let (Some(node), Some(which)) = (self.index.get(id), IgnoreFile::named(&name)) else {
                continue;
            };
            let dir = node.path().clone();
            let specs: Vec<SpecId> = node
                .full()
                .iter()
                .copied()
                .filter(|s| self.specs.takes_ignore_file(*s, which, &dir))
                .collect();
            let file = dir.join(which.rel_path());
            let text = read(&file);
            for s in specs {
                let Some(old) = self.specs.get(s).map(|st| st.matcher().clone()) else {
                    continue;
                };
                if !self.set_ignore_file(s, &dir, which, &file, text.as_deref()) {
                    continue;
                }
                self.apply_ignore_change(s, id, &old);
            }
        }
        self.watches.reconcile_soon();
    }

    /// The entries of directory `id` (full paths and types), if `sid`
    /// covers it: what the walks below compare, taken out of the index so
    /// that they can change it.
    fn covered_entries(&self, id: DirId, sid: SpecId) -> Option<Vec<(PathBuf, FileType)>> {
        let node = self.index.get(id).filter(|n| n.covers(sid))?;
        Some(
            node.entries()
                .iter()
                .map(|(n, t)| (node.path().join(n), t))
                .collect(),
        )
    }

    /// Reports, for `sid`, what its rules' change (from `old`) made appear
    /// or vanish below directory `top`, and covers or lets go of
    /// directories to match.
    fn apply_ignore_change(&mut self, sid: SpecId, top: DirId, old: &Matcher) {
        let mut stack = vec![top];
        while let Some(id) = stack.pop() {
            let Some(entries) = self.covered_entries(id, sid) else {
                continue;
            };
            for (p, t) in entries {
                let is_dir = t == FileType::Dir;
                let was = old.is_ignored(&p, is_dir);
                let now = self
                    .specs
                    .get(sid)
                    .is_some_and(|st| st.matcher().is_ignored(&p, is_dir));
                let child = self.index.lookup(&p);
                match (was, now) {
                    (false, true) => {
                        self.specs.record_unfiltered(
                            sid,
                            self.now,
                            p.clone(),
                            ChangeKind::Removed,
                            t,
                        );
                        if let Some(c) = child {
                            self.hide_subtree(sid, c, old);
                        }
                    }
                    (true, false) => {
                        self.specs.record_unfiltered(
                            sid,
                            self.now,
                            p.clone(),
                            ChangeKind::Created,
                            t,
                        );
                        if is_dir && self.specs.needs(sid, &p) {
                            self.show_subtree(sid, p, old);
                        }
                    }
                    (false, false) => {
                        if let Some(c) = child {
                            stack.push(c);
                        }
                    }
                    (true, true) => {}
                }
            }
        }
    }

    /// Directory `top` became ignored for `sid`: what `sid` saw below it
    /// (under `old` rules) is reported removed, and `sid` lets go of it
    /// and its subtree (their OS watches go when no spec needs them).
    fn hide_subtree(&mut self, sid: SpecId, top: DirId, old: &Matcher) {
        let mut stack = vec![top];
        let mut nodes = Vec::new();
        while let Some(id) = stack.pop() {
            let Some(entries) = self.covered_entries(id, sid) else {
                continue;
            };
            nodes.push(id);
            for (p, t) in entries {
                if !old.is_ignored(&p, t == FileType::Dir) {
                    self.specs
                        .record_unfiltered(sid, self.now, p.clone(), ChangeKind::Removed, t);
                }
                if let Some(c) = self.index.lookup(&p) {
                    stack.push(c);
                }
            }
        }
        for id in nodes {
            if self.index.uncover(id, sid) {
                self.free_node(id);
            }
        }
    }

    /// Directory `dir` stopped being ignored for `sid`: cover it (watch,
    /// read) and report what it holds that the `old` rules hid, for `sid`
    /// alone.
    fn show_subtree(&mut self, sid: SpecId, dir: PathBuf, old: &Matcher) {
        self.add_full(vec![sid], dir.clone(), false);
        let Some(top) = self.index.lookup(&dir) else {
            return;
        };
        let mut stack = vec![top];
        while let Some(id) = stack.pop() {
            let Some(entries) = self.covered_entries(id, sid) else {
                continue;
            };
            for (p, t) in entries {
                if let Some(c) = self.index.lookup(&p) {
                    stack.push(c);
                }
                if old.is_ignored(&p, t == FileType::Dir) {
                    self.specs
                        .record_for(sid, self.now, p, ChangeKind::Created, t);
                }
            }
        }
    }
}
