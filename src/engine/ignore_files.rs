//! Ignore files ([`WatchOptions::ignore_files`](crate::WatchOptions::ignore_files))
//! waiting to be read again: the only writer of those that changed (read
//! again at the end of the pass) and of those outside the watched tree,
//! followed by their signatures (looked at on the scanner's lanes, a
//! round at a time). The rules they hold live in each spec's matcher
//! (`specs.rs` writes it); the steps that read them and apply a change of
//! rules are `ignoring.rs`'s.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::fs;
use crate::ignore::files::IgnoreFile;
use crate::index::{DirId, SpecId};

/// How often ignore files outside the watched tree are looked at.
const OUTSIDE_EVERY: Duration = Duration::from_secs(1);

/// Ignore files that changed, to read again at the end of the pass, and
/// those outside the watched tree (above a root, git's global excludes
/// file, and `.git/info/exclude` in the pruned `.git`), which no watch
/// covers: their stat signatures are compared every [`OUTSIDE_EVERY`] and
/// at each sync, by a round of reads on the scanner's lanes (one at a
/// time). Also where git's global excludes file is.
#[derive(Debug, Default)]
pub(super) struct Reloads {
    pending: Vec<(DirId, OsString)>,
    outside: Vec<Outside>,
    next_look: Option<Instant>,
    /// Ids of the files outside, never reused.
    next_id: u64,
    /// The round of reads under way: its token, how many are still out.
    round: Option<(u64, usize)>,
    /// The last round's token, and the last one done.
    rounds: u64,
    done_round: u64,
    /// A round was asked for (a sync) while one was out: another follows.
    again: bool,
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

/// A round of reads of the ignore files outside the tree: its token, and
/// each file with its id.
pub(super) type Round = (u64, Vec<(u64, PathBuf)>);

/// An ignore file no OS watch covers, as last seen.
#[derive(Debug)]
struct Outside {
    id: u64,
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
        // Its signature is the first round's: one read there (the same
        // text as now) changes no rule.
        self.next_id += 1;
        self.outside.push(Outside {
            id: self.next_id,
            sid,
            dir: dir.to_path_buf(),
            which,
            file: file.to_path_buf(),
            sig: None,
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

    /// When the files outside the tree are looked at next (none while a
    /// round is out: what it reads wakes the engine).
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.next_look.filter(|_| self.round.is_none())
    }

    /// A round of reads of the files outside the tree, if one is due at
    /// `now` (or `forced`, for a sync), each file with its id: its token
    /// and the files. Also the token of the round a sync waits for (with
    /// `forced`; one out already is followed by another).
    pub(super) fn look_round(
        &mut self,
        forced: bool,
        now: Instant,
    ) -> (Option<Round>, Option<u64>) {
        if self.outside.is_empty() {
            return (None, None);
        }
        if self.round.is_some() {
            self.again |= forced;
            return (None, forced.then_some(self.rounds + 1));
        }
        if !(forced || self.next_look.is_some_and(|t| t <= now)) {
            return (None, None);
        }
        self.next_look = Some(now + OUTSIDE_EVERY);
        self.rounds += 1;
        self.round = Some((self.rounds, self.outside.len()));
        let files = self
            .outside
            .iter()
            .map(|o| (o.id, o.file.clone()))
            .collect();
        (Some((self.rounds, files)), Some(self.rounds))
    }

    /// A round's read of file `id` (round `token`) saw `sig`: if that
    /// moved, the file (spec, directory, which file, the file) to apply
    /// again with the text read. At `now`, the round may end (and one
    /// asked for meanwhile is due).
    pub(super) fn read_outside(
        &mut self,
        token: u64,
        id: u64,
        sig: Option<fs::Sig>,
        now: Instant,
    ) -> Option<(SpecId, PathBuf, IgnoreFile, PathBuf)> {
        if let Some((t, out)) = &mut self.round
            && *t == token
        {
            *out = out.saturating_sub(1);
            if *out == 0 {
                self.round = None;
                self.done_round = token;
                if std::mem::take(&mut self.again) {
                    self.next_look = Some(now);
                }
            }
        }
        let o = self.outside.iter_mut().find(|o| o.id == id)?;
        if sig == o.sig {
            return None;
        }
        o.sig = sig;
        Some((o.sid, o.dir.clone(), o.which, o.file.clone()))
    }

    /// Whether round `token` is done.
    pub(super) fn round_done(&self, token: u64) -> bool {
        self.done_round >= token || self.outside.is_empty()
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
