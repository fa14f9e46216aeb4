//! Rules read from ignore files under a spec's roots: `.gitignore` and
//! `.ignore` in any directory, and `.git/info/exclude` at a repository's
//! top, with git's semantics through the `ignore` crate's gitignore
//! matcher (never a parser of our own).
//!
//! Pure: the engine reads the files and hands their contents in. For a
//! path, the files of its nearest directory decide first (`.ignore`, then
//! `.gitignore`, then `info/exclude`), then those of the directories
//! above it. As in git, a directory that is ignored is not descended into:
//! a `!` pattern cannot re-include anything below it, so such a
//! directory is pruned (no OS watch).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ::ignore::Match;
use ::ignore::gitignore::{Gitignore, GitignoreBuilder};

/// Which ignore file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum IgnoreFile {
    /// `.ignore` (ripgrep's and the `ignore` crate's; beats `.gitignore`).
    Ignore,
    /// `.gitignore`.
    Gitignore,
    /// `.git/info/exclude`, applying from the directory holding `.git`.
    Exclude,
}

impl IgnoreFile {
    /// The files a directory may hold, in order of precedence.
    pub(crate) const ALL: [IgnoreFile; 3] = [
        IgnoreFile::Ignore,
        IgnoreFile::Gitignore,
        IgnoreFile::Exclude,
    ];

    /// Where the file is, relative to the directory it applies in.
    pub(crate) fn rel_path(self) -> &'static str {
        match self {
            IgnoreFile::Ignore => ".ignore",
            IgnoreFile::Gitignore => ".gitignore",
            IgnoreFile::Exclude => ".git/info/exclude",
        }
    }

    /// The file named `name` in a directory, if it is one of them.
    pub(crate) fn named(name: &std::ffi::OsStr) -> Option<IgnoreFile> {
        match name.to_str()? {
            ".ignore" => Some(IgnoreFile::Ignore),
            ".gitignore" => Some(IgnoreFile::Gitignore),
            _ => None,
        }
    }
}

/// The ignore files loaded, by the directory they apply in.
#[derive(Clone, Debug, Default)]
pub(crate) struct IgnoreFiles {
    dirs: BTreeMap<PathBuf, BTreeMap<IgnoreFile, Gitignore>>,
}

impl IgnoreFiles {
    pub(crate) fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }

    /// Sets (or, with `None`, removes) file `which` applying in `dir`;
    /// whether anything changed. Lines that are not valid patterns are
    /// skipped, as git skips them.
    pub(crate) fn set(&mut self, dir: &Path, which: IgnoreFile, contents: Option<&str>) -> bool {
        match contents {
            None => {
                let Some(files) = self.dirs.get_mut(dir) else {
                    return false;
                };
                let had = files.remove(&which).is_some();
                if files.is_empty() {
                    self.dirs.remove(dir);
                }
                had
            }
            Some(text) => {
                let mut b = GitignoreBuilder::new(dir);
                for line in text.lines() {
                    let _ = b.add_line(None, line);
                }
                let Ok(g) = b.build() else {
                    return false;
                };
                self.dirs
                    .entry(dir.to_path_buf())
                    .or_default()
                    .insert(which, g);
                true
            }
        }
    }

    /// Whether some file applies strictly above `p`'s own level (in one of
    /// its ancestors).
    pub(crate) fn reaches(&self, p: &Path) -> bool {
        !self.dirs.is_empty() && p.ancestors().skip(1).any(|a| self.dirs.contains_key(a))
    }

    /// The verdict of the files on `p`: `Some(true)` ignored, `Some(false)`
    /// re-included by a `!` pattern, `None` no pattern matches `p` itself.
    pub(crate) fn verdict(&self, p: &Path, is_dir: bool) -> Option<bool> {
        if self.dirs.is_empty() {
            return None;
        }
        for a in p.ancestors().skip(1) {
            let Some(files) = self.dirs.get(a) else {
                continue;
            };
            for g in files.values() {
                match g.matched(p, is_dir) {
                    Match::None => {}
                    Match::Ignore(_) => return Some(true),
                    Match::Whitelist(_) => return Some(false),
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, IgnoreFile, &str)]) -> IgnoreFiles {
        let mut f = IgnoreFiles::default();
        for (dir, which, text) in list {
            assert!(f.set(Path::new(dir), *which, Some(text)));
        }
        f
    }

    fn v(f: &IgnoreFiles, p: &str, dir: bool) -> Option<bool> {
        f.verdict(Path::new(p), dir)
    }

    #[test]
    fn nearer_files_decide_first() {
        let f = files(&[
            ("/r", IgnoreFile::Gitignore, "*.log\nbuild/\n"),
            ("/r/sub", IgnoreFile::Gitignore, "!keep.log\n"),
        ]);
        assert_eq!(v(&f, "/r/a.log", false), Some(true));
        assert_eq!(v(&f, "/r/sub/x.log", false), Some(true), "from above");
        assert_eq!(v(&f, "/r/sub/keep.log", false), Some(false), "nearer wins");
        assert_eq!(v(&f, "/r/build", true), Some(true));
        assert_eq!(v(&f, "/r/build", false), None, "build/ is for directories");
        assert_eq!(v(&f, "/r/src/a.rs", false), None);
        assert_eq!(v(&f, "/elsewhere/a.log", false), None);
    }

    #[test]
    fn dot_ignore_beats_gitignore_in_one_directory() {
        let f = files(&[
            ("/r", IgnoreFile::Gitignore, "*.gen\n"),
            ("/r", IgnoreFile::Ignore, "!*.gen\n"),
        ]);
        assert_eq!(v(&f, "/r/a.gen", false), Some(false));
    }

    #[test]
    fn anchored_patterns_are_relative_to_their_file() {
        let f = files(&[("/r/sub", IgnoreFile::Gitignore, "/top.txt\n")]);
        assert_eq!(v(&f, "/r/sub/top.txt", false), Some(true));
        assert_eq!(v(&f, "/r/sub/deeper/top.txt", false), None);
        assert_eq!(v(&f, "/r/top.txt", false), None);
    }

    #[test]
    fn files_come_and_go_and_bad_lines_are_skipped() {
        let mut f = files(&[("/r", IgnoreFile::Gitignore, "[z-a\n*.tmp\n")]);
        assert_eq!(v(&f, "/r/a.tmp", false), Some(true), "the good line counts");
        assert!(f.reaches(Path::new("/r/x/y")) && !f.reaches(Path::new("/r")));
        assert!(f.set(Path::new("/r"), IgnoreFile::Gitignore, None));
        assert!(
            !f.set(Path::new("/r"), IgnoreFile::Gitignore, None),
            "gone already"
        );
        assert!(f.is_empty());
        assert_eq!(v(&f, "/r/a.tmp", false), None);
    }

    #[test]
    fn names_are_recognised() {
        use std::ffi::OsStr;
        assert_eq!(
            IgnoreFile::named(OsStr::new(".gitignore")),
            Some(IgnoreFile::Gitignore)
        );
        assert_eq!(
            IgnoreFile::named(OsStr::new(".ignore")),
            Some(IgnoreFile::Ignore)
        );
        assert_eq!(IgnoreFile::named(OsStr::new("gitignore")), None);
    }
}
