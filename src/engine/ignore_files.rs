//! Ignore files ([`WatchOptions::ignore_files`](crate::WatchOptions::ignore_files))
//! waiting to be read again: the only writer of those that changed (read
//! again at the end of the pass) and of those outside the watched tree,
//! followed by their signatures. The rules they hold live in each spec's
//! matcher (`specs.rs` writes it); the steps that read them and apply a
//! change of rules are `ignoring.rs`'s.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::clock::Clock;
use crate::fs;
use crate::ignore_files::IgnoreFile;
use crate::index::{DirId, SpecId};

/// How often ignore files outside the watched tree are looked at.
const OUTSIDE_EVERY: Duration = Duration::from_secs(1);

/// Ignore files that changed, to read again at the end of the pass, and
/// those outside the watched tree (above a root, git's global excludes
/// file, and `.git/info/exclude` in the pruned `.git`), which no watch
/// covers: their stat signatures are compared every [`OUTSIDE_EVERY`] and
/// at each sync. Also where git's global excludes file is.
#[derive(Debug, Default)]
pub(super) struct Reloads {
    pending: Vec<(DirId, OsString)>,
    outside: Vec<Outside>,
    next_look: Option<Instant>,
    /// Git's global excludes file: as the manager was told (`Some`), or
    /// git's own, found once when first asked (`None` until then).
    excludes: Option<Option<PathBuf>>,
}

/// Where git's global excludes file is, as a manager is told
/// ([`ManagerBuilder::git_excludes_file`](crate::ManagerBuilder::git_excludes_file)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum Excludes {
    /// Git's own, as the `ignore` crate finds it.
    #[default]
    Git,
    /// This file, or none.
    File(Option<PathBuf>),
}

/// An ignore file no OS watch covers, as last seen.
#[derive(Debug)]
struct Outside {
    sid: SpecId,
    /// The directory it applies in.
    dir: PathBuf,
    which: IgnoreFile,
    /// The file itself.
    file: PathBuf,
    sig: Option<fs::Sig>,
}

impl Reloads {
    pub(super) fn new(excludes: &Excludes) -> Reloads {
        Reloads {
            excludes: match excludes {
                Excludes::Git => None,
                Excludes::File(f) => Some(f.clone()),
            },
            ..Reloads::default()
        }
    }

    /// Git's global excludes file, if there is one (found the first time).
    pub(super) fn excludes_file(&mut self) -> Option<PathBuf> {
        self.excludes
            .get_or_insert_with(fs::git_excludes_file)
            .clone()
    }

    /// Follows `which` of `dir` (the file `file`) for `sid` from now on.
    pub(super) fn follow(
        &mut self,
        sid: SpecId,
        dir: &Path,
        which: IgnoreFile,
        file: &Path,
        now: Instant,
    ) {
        if self
            .outside
            .iter()
            .any(|o| o.sid == sid && o.dir == dir && o.which == which)
        {
            return;
        }
        let sig = fs::sig_of(file);
        self.outside.push(Outside {
            sid,
            dir: dir.to_path_buf(),
            which,
            file: file.to_path_buf(),
            sig,
        });
        self.next_look.get_or_insert(now + OUTSIDE_EVERY);
    }

    /// Stops following what `sid` followed in `dir` (`None`: anywhere).
    pub(super) fn unfollow(&mut self, sid: SpecId, dir: Option<&Path>) {
        self.outside
            .retain(|o| o.sid != sid || dir.is_some_and(|d| o.dir != d));
        if self.outside.is_empty() {
            self.next_look = None;
        }
    }

    /// When the files outside the tree are looked at next.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.next_look
    }

    /// Looks at the files outside the tree, if that is due (or `forced`,
    /// for a sync), and schedules the next look: those whose signature
    /// changed since the last one (spec, directory, which file, the file).
    pub(super) fn changed_outside(
        &mut self,
        forced: bool,
        clock: &Clock,
    ) -> Vec<(SpecId, PathBuf, IgnoreFile, PathBuf)> {
        let due = self.next_look.is_some_and(|t| forced || t <= clock.now());
        if !due {
            return Vec::new();
        }
        self.next_look = Some(clock.now() + OUTSIDE_EVERY);
        let mut changed = Vec::new();
        for o in &mut self.outside {
            let sig = fs::sig_of(&o.file);
            if sig != o.sig {
                o.sig = sig;
                changed.push((o.sid, o.dir.clone(), o.which, o.file.clone()));
            }
        }
        changed
    }

    /// Entry `name` of directory `id`, an ignore file, changed: it is read
    /// again at the end of the pass.
    pub(super) fn note(&mut self, id: DirId, name: OsString) {
        self.pending.push((id, name));
    }

    /// The ignore files that changed since the last call, sorted, each
    /// once.
    pub(super) fn take_pending(&mut self) -> Vec<(DirId, OsString)> {
        let mut todo = std::mem::take(&mut self.pending);
        todo.sort();
        todo.dedup();
        todo
    }
}
