//! Per-spec problems: the directories a spec could not watch or read, the
//! ignore files with lines that are not patterns, and its last runtime
//! error. The only writer of both; status derives its
//! `Degraded` reason and `last_error` from here. An error that stands
//! (a directory whose every poll fails) is recorded once, with the time
//! it was first seen: statuses change when problems do, not at each
//! attempt.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::index::SpecId;

/// What went wrong at a directory.
#[derive(Debug)]
pub(super) struct DirProblem {
    pub msg: String,
    /// When it was first seen so (the same error again changes nothing:
    /// a failing poll is not a new status every interval).
    since: SystemTime,
    /// Its place among the problems recorded (the last error is the
    /// newest's).
    order: u64,
}

#[derive(Debug, Default)]
struct SpecProblems {
    /// Directory -> what went wrong there. The newest is the spec's last
    /// error while there is any.
    dirs: BTreeMap<PathBuf, DirProblem>,
    /// Why the last save of its state file failed, and when; goes with
    /// the next save that succeeds.
    state: Option<(String, SystemTime)>,
    /// Ignore files with lines that are not valid patterns: what is
    /// wrong, and when it was read so; goes when the file is fixed.
    files: BTreeMap<PathBuf, (String, SystemTime)>,
}

#[derive(Debug, Default)]
pub(super) struct Problems {
    by_spec: HashMap<SpecId, SpecProblems>,
    touched: Vec<SpecId>,
    /// Problems recorded so far (each one's `order`).
    recorded: u64,
}

impl Problems {
    /// `path` could not be watched or read, for `specs`, at `wall`.
    /// Whether that is news for any of them (the same error at the same
    /// path again is not).
    pub(super) fn record(
        &mut self,
        specs: &[SpecId],
        path: &Path,
        msg: &str,
        wall: SystemTime,
    ) -> bool {
        let mut news = false;
        for &s in specs {
            let p = self.by_spec.entry(s).or_default();
            if p.dirs.get(path).is_some_and(|d| d.msg == msg) {
                continue;
            }
            self.recorded += 1;
            let problem = DirProblem {
                msg: msg.to_owned(),
                since: wall,
                order: self.recorded,
            };
            p.dirs.insert(path.to_path_buf(), problem);
            self.touched.push(s);
            news = true;
        }
        news
    }

    /// `path` is fine again, for `specs`.
    pub(super) fn clear(&mut self, specs: &[SpecId], path: &Path) {
        for &s in specs {
            if let Some(p) = self.by_spec.get_mut(&s)
                && p.dirs.remove(path).is_some()
            {
                self.touched.push(s);
            }
        }
    }

    /// The directories of `sid` with a problem, by path.
    pub(super) fn dirs(&self, sid: SpecId) -> Option<&BTreeMap<PathBuf, DirProblem>> {
        self.by_spec.get(&sid).map(|p| &p.dirs)
    }

    /// The last save of `sid`'s state file failed with `error` (`None`:
    /// it succeeded), at `wall`.
    pub(super) fn state_saved(&mut self, sid: SpecId, error: Option<String>, wall: SystemTime) {
        let p = self.by_spec.entry(sid).or_default();
        let now = error.map(|e| (e, wall));
        if p.state.as_ref().map(|s| &s.0) != now.as_ref().map(|s| &s.0) {
            p.state = now;
            self.touched.push(sid);
        }
    }

    /// Ignore file `file` of `sid` was read with `bad` lines (skipped;
    /// none: it is fine), at `wall`.
    pub(super) fn ignore_file(
        &mut self,
        sid: SpecId,
        file: &Path,
        bad: &[String],
        wall: SystemTime,
    ) {
        let p = self.by_spec.entry(sid).or_default();
        let changed = if bad.is_empty() {
            p.files.remove(file).is_some()
        } else {
            let msg = format!(
                "ignore file {}: {} (skipped)",
                file.display(),
                bad.join("; ")
            );
            let same = p.files.get(file).is_some_and(|(m, _)| *m == msg);
            if !same {
                p.files.insert(file.to_path_buf(), (msg, wall));
            }
            !same
        };
        if changed {
            self.touched.push(sid);
        }
    }

    /// The last error of `sid` while it has any (the newest of its
    /// directories', naming the path, else an ignore file's, else its
    /// state file's), and when it was seen.
    pub(super) fn last(&self, sid: SpecId) -> Option<(String, SystemTime)> {
        let p = self.by_spec.get(&sid)?;
        p.dirs
            .iter()
            .max_by_key(|(_, d)| d.order)
            .map(|(path, d)| (format!("{}: {}", path.display(), d.msg), d.since))
            .or_else(|| p.files.values().max_by_key(|(_, t)| *t).cloned())
            .or_else(|| p.state.clone())
    }

    pub(super) fn forget(&mut self, sid: SpecId) {
        self.by_spec.remove(&sid);
    }

    /// Specs whose problems changed since the last call.
    pub(super) fn take_touched(&mut self) -> Vec<SpecId> {
        std::mem::take(&mut self.touched)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_file_error_is_the_last_error_until_a_save_succeeds() {
        let mut p = Problems::default();
        let t = SystemTime::UNIX_EPOCH;
        p.state_saved(1, Some("state file /s: disk full".into()), t);
        assert_eq!(p.last(1).unwrap().0, "state file /s: disk full");
        assert!(p.dirs(1).unwrap().is_empty(), "not a directory's problem");
        assert_eq!(p.take_touched(), vec![1]);
        p.state_saved(1, Some("state file /s: disk full".into()), t);
        assert!(
            p.take_touched().is_empty(),
            "the same error again changes nothing"
        );
        p.record(&[1], Path::new("/a"), "cannot read: EIO", t);
        assert_eq!(
            p.last(1).unwrap().0,
            "/a: cannot read: EIO",
            "a directory's first"
        );
        p.clear(&[1], Path::new("/a"));
        assert_eq!(p.last(1).unwrap().0, "state file /s: disk full");
        p.state_saved(1, None, t);
        assert_eq!(p.last(1), None);
    }

    #[test]
    fn a_bad_ignore_file_is_the_last_error_until_fixed() {
        let mut p = Problems::default();
        let t = SystemTime::UNIX_EPOCH;
        let f = Path::new("/r/.dockerignore");
        p.ignore_file(1, f, &["line 2: \"[\": malformed".into()], t);
        assert_eq!(
            p.last(1).unwrap().0,
            "ignore file /r/.dockerignore: line 2: \"[\": malformed (skipped)"
        );
        assert_eq!(p.take_touched(), vec![1]);
        p.ignore_file(1, f, &["line 2: \"[\": malformed".into()], t);
        assert!(
            p.take_touched().is_empty(),
            "the same again changes nothing"
        );
        p.ignore_file(1, f, &[], t);
        assert_eq!(p.last(1), None);
        assert_eq!(p.take_touched(), vec![1]);
    }

    #[test]
    fn problems_are_per_spec_and_the_last_error_goes_once_healthy() {
        let mut p = Problems::default();
        let t = SystemTime::UNIX_EPOCH;
        p.record(&[1, 2], Path::new("/a"), "cannot read: EIO", t);
        p.record(&[1], Path::new("/b"), "cannot watch: EACCES", t);
        assert_eq!(p.dirs(1).unwrap().len(), 2);
        assert_eq!(p.dirs(2).unwrap().len(), 1);
        assert_eq!(p.last(1).unwrap().0, "/b: cannot watch: EACCES");
        p.take_touched();
        p.clear(&[1, 2], Path::new("/a"));
        p.clear(&[1], Path::new("/nothing"));
        let mut t = p.take_touched();
        t.sort();
        assert_eq!(t, vec![1, 2], "only real changes touch");
        assert!(p.dirs(2).unwrap().is_empty());
        assert_eq!(p.last(2), None, "spec 2 is healthy again");
        assert_eq!(
            p.last(1).unwrap().0,
            "/b: cannot watch: EACCES",
            "spec 1 still has /b"
        );
        p.forget(1);
        assert!(p.dirs(1).is_none() && p.last(1).is_none());
    }

    #[test]
    fn the_same_error_again_is_no_news_and_the_last_error_is_one_that_stands() {
        let mut p = Problems::default();
        let t0 = SystemTime::UNIX_EPOCH;
        let t1 = t0 + std::time::Duration::from_secs(1);
        assert!(p.record(&[1], Path::new("/a"), "cannot read: EIO", t0));
        assert!(p.record(&[1], Path::new("/b"), "cannot read: EIO", t0));
        p.take_touched();
        // A failing poll, every interval: nothing new to publish.
        assert!(!p.record(&[1], Path::new("/a"), "cannot read: EIO", t1));
        assert!(p.take_touched().is_empty(), "no news, no status");
        assert_eq!(
            p.last(1),
            Some(("/b: cannot read: EIO".to_owned(), t0)),
            "the newest problem, since when it stands"
        );
        // /b heals: the last error is /a's, which still stands.
        p.clear(&[1], Path::new("/b"));
        assert_eq!(p.last(1), Some(("/a: cannot read: EIO".to_owned(), t0)));
        // Another error at /a is news.
        assert!(p.record(&[1], Path::new("/a"), "cannot read: ESTALE", t1));
        assert_eq!(p.last(1), Some(("/a: cannot read: ESTALE".to_owned(), t1)));
    }
}
