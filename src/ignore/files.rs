//! Rules read from ignore files under a spec's roots: `.gitignore` and
//! `.ignore` in any directory, `.git/info/exclude` at a repository's
//! top and git's global excludes file, with git's semantics through the
//! `ignore` crate's gitignore matcher (each line first rewritten into the
//! form the crate reads as git does, `git_pattern.rs`); and
//! `.dockerignore` / `.tiltignore`, with Docker's (`docker.rs`).
//!
//! Pure: the engine reads the files and hands their contents in. For a
//! path, the files of its nearest directory decide first (`.ignore`, then
//! `.gitignore`, `info/exclude` and the global file, among git's; an
//! ignore by any kind beats a re-include by another), then those of the
//! directories above it. As in git, a directory that git's files ignore
//! is not descended into: a `!` pattern cannot re-include anything below
//! it, so such a directory is pruned (no OS watch). Docker's exceptions
//! do re-include below an excluded directory, which is then kept.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ::ignore::Match;
use ::ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::ignore::docker::DockerIgnore;
use crate::ignore::git_pattern::{Line, rewrite};
use crate::ignore::kinds::IgnoreFiles;

/// Which ignore file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum IgnoreFile {
    /// `.ignore` (ripgrep's and the `ignore` crate's; beats `.gitignore`).
    Ignore,
    /// `.gitignore`.
    Gitignore,
    /// `.git/info/exclude`, applying from the directory holding `.git`.
    Exclude,
    /// Git's global excludes file (`core.excludesFile`), applying from a
    /// repository's top (or a root outside one); it lives elsewhere.
    Global,
    /// `.dockerignore`, at a root.
    Docker,
    /// `.tiltignore`, at a root or above it.
    Tilt,
}

impl IgnoreFile {
    /// The files a directory under a root may hold, in order of
    /// precedence (the global file is not in a directory it applies in).
    pub(crate) const IN_DIRS: [IgnoreFile; 5] = [
        IgnoreFile::Ignore,
        IgnoreFile::Gitignore,
        IgnoreFile::Exclude,
        IgnoreFile::Docker,
        IgnoreFile::Tilt,
    ];

    /// Where the file is, relative to the directory it applies in (the
    /// global file: its name, as a stand-in).
    pub(crate) fn rel_path(self) -> &'static str {
        match self {
            IgnoreFile::Ignore => ".ignore",
            IgnoreFile::Gitignore => ".gitignore",
            IgnoreFile::Exclude => ".git/info/exclude",
            IgnoreFile::Global => "core.excludesFile",
            IgnoreFile::Docker => ".dockerignore",
            IgnoreFile::Tilt => ".tiltignore",
        }
    }

    /// The file named `name` in a directory, if it is one of them.
    pub(crate) fn named(name: &std::ffi::OsStr) -> Option<IgnoreFile> {
        match name.to_str()? {
            ".ignore" => Some(IgnoreFile::Ignore),
            ".gitignore" => Some(IgnoreFile::Gitignore),
            ".dockerignore" => Some(IgnoreFile::Docker),
            ".tiltignore" => Some(IgnoreFile::Tilt),
            _ => None,
        }
    }

    /// The kind a spec chooses to honour this file.
    pub(crate) fn kind(self) -> IgnoreFiles {
        match self {
            IgnoreFile::Docker => IgnoreFiles::DOCKER,
            IgnoreFile::Tilt => IgnoreFiles::TILT,
            _ => IgnoreFiles::GIT,
        }
    }
}

/// One file's rules.
#[derive(Clone, Debug)]
enum Rules {
    Git(Gitignore),
    Docker(DockerIgnore),
}

/// What setting a file did: whether anything changed, and its lines that
/// are not valid patterns ("line N: "text": reason"), skipped.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Set {
    pub(crate) changed: bool,
    pub(crate) bad: Vec<String>,
}

/// The ignore files loaded, by the directory they apply in.
#[derive(Clone, Debug, Default)]
pub(crate) struct FileRules {
    dirs: BTreeMap<PathBuf, BTreeMap<IgnoreFile, Rules>>,
}

/// `p`'s components below `dir` (it is strictly below), as text.
fn rel_components<'a>(p: &'a Path, dir: &Path) -> Vec<Cow<'a, str>> {
    p.strip_prefix(dir)
        .map(|r| r.iter().map(|c| c.to_string_lossy()).collect())
        .unwrap_or_default()
}

fn parse(dir: &Path, which: IgnoreFile, text: &str) -> (Rules, Vec<String>) {
    if matches!(which, IgnoreFile::Docker | IgnoreFile::Tilt) {
        let (d, bad) = DockerIgnore::parse(text);
        return (
            Rules::Docker(d),
            bad.iter().map(|b| b.to_string()).collect(),
        );
    }
    let mut b = GitignoreBuilder::new(dir);
    let mut bad = Vec::new();
    // Git drops a UTF-8 byte order mark at the start of the file.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (n, line) in text.lines().enumerate() {
        // Each line as git reads it, in the crate's syntax (`git_pattern`).
        let lines = match rewrite(line) {
            Line::Skip => continue,
            Line::Lines(lines) => lines,
            Line::Nothing(why) => {
                bad.push(format!(
                    "line {}: {:?}: {} (git matches nothing with it)",
                    n + 1,
                    line.trim(),
                    why.text()
                ));
                continue;
            }
        };
        for l in &lines {
            if let Err(e) = b.add_line(None, l) {
                bad.push(format!("line {}: {:?}: {e}", n + 1, line.trim()));
                break;
            }
        }
    }
    // Each line was checked on its own: the set builds.
    let g = b.build().unwrap_or_else(|_| Gitignore::empty());
    (Rules::Git(g), bad)
}

impl FileRules {
    pub(crate) fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }

    /// Sets (or, with `None`, removes) file `which` applying in `dir`.
    /// Lines that are not valid patterns are skipped (as git skips them)
    /// and returned.
    pub(crate) fn set(&mut self, dir: &Path, which: IgnoreFile, contents: Option<&str>) -> Set {
        match contents {
            None => {
                let Some(files) = self.dirs.get_mut(dir) else {
                    return Set::default();
                };
                let had = files.remove(&which).is_some();
                if files.is_empty() {
                    self.dirs.remove(dir);
                }
                Set {
                    changed: had,
                    bad: Vec::new(),
                }
            }
            Some(text) => {
                let (rules, bad) = parse(dir, which, text);
                self.dirs
                    .entry(dir.to_path_buf())
                    .or_default()
                    .insert(which, rules);
                Set { changed: true, bad }
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
            // Git's files: the first that matches decides.
            let mut git = None;
            let mut docker = None;
            for rules in files.values() {
                match rules {
                    Rules::Git(g) if git.is_none() => match g.matched(p, is_dir) {
                        Match::None => {}
                        Match::Ignore(_) => git = Some(true),
                        Match::Whitelist(_) => git = Some(false),
                    },
                    Rules::Git(_) => {}
                    Rules::Docker(d) => {
                        let rel = rel_components(p, a);
                        let rel: Vec<&str> = rel.iter().map(|c| c.as_ref()).collect();
                        if let Some(v) = d.verdict(&rel) {
                            docker = Some(docker.unwrap_or(false) || v);
                        }
                    }
                }
            }
            match (git, docker) {
                (Some(true), _) | (_, Some(true)) => return Some(true),
                (Some(false), _) | (_, Some(false)) => return Some(false),
                (None, None) => {}
            }
        }
        None
    }

    /// Whether a Docker exception of some file could re-include a path
    /// strictly below directory `dir`.
    pub(crate) fn could_reinclude_below(&self, dir: &Path) -> bool {
        dir.ancestors().any(|a| {
            self.dirs.get(a).is_some_and(|files| {
                files.values().any(|r| match r {
                    Rules::Docker(d) => {
                        let rel = rel_components(dir, a);
                        let rel: Vec<&str> = rel.iter().map(|c| c.as_ref()).collect();
                        d.could_reinclude_below(&rel)
                    }
                    Rules::Git(_) => false,
                })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, IgnoreFile, &str)]) -> FileRules {
        let mut f = FileRules::default();
        for (dir, which, text) in list {
            assert!(f.set(Path::new(dir), *which, Some(text)).changed);
        }
        f
    }

    fn v(f: &FileRules, p: &str, dir: bool) -> Option<bool> {
        f.verdict(Path::new(p), dir)
    }

    /// Found by the `ignore_vs_git` fuzz target: a line whose `[` no `]`
    /// closes matches nothing in git; the `ignore` crate took the `[`
    /// literally. Such a line is skipped (git skips it in effect) and
    /// reported as the other bad lines are.
    #[test]
    fn a_line_with_an_unclosed_class_matches_nothing_as_in_git() {
        let mut f = FileRules::default();
        let set = f.set(Path::new("/r"), IgnoreFile::Gitignore, Some("**[\n*.log\n"));
        assert_eq!(set.bad.len(), 1, "{set:?}");
        assert!(set.bad[0].contains("no `]` closes"), "{set:?}");
        assert_eq!(v(&f, "/r/baa[", false), None);
        assert_eq!(v(&f, "/r/[", true), None);
        assert_eq!(
            v(&f, "/r/a.log", false),
            Some(true),
            "the other lines apply"
        );
    }

    /// Found by the `ignore_vs_git` fuzz target: git's wildmatch reads
    /// any run of two or more `*` as `**`, so `***/b` ignores `b` at the
    /// top; the `ignore` crate's matcher did not. Observed with `git
    /// check-ignore --no-index` (2.47.3): `b`, `a/b` and `a/c/b`
    /// ignored by `.gitignore:1:***/b`, `ab` not. Held by `git_pattern`'s
    /// rewrite (`/**/b`).
    #[test]
    fn three_stars_read_as_two_as_in_git() {
        let f = files(&[("/r", IgnoreFile::Gitignore, "***/b\n")]);
        assert_eq!(v(&f, "/r/b", false), Some(true));
        assert_eq!(v(&f, "/r/a/b", false), Some(true));
        assert_eq!(v(&f, "/r/a/c/b", false), Some(true));
        assert_eq!(v(&f, "/r/ab", false), None);
    }

    /// Found by the `ignore_vs_git` fuzz target: git strips a pattern's
    /// trailing `/` whatever precedes it, and matches nothing with the
    /// `\` then left at its end; the `ignore` crate ignored every
    /// directory with `*\/`. Observed with `git check-ignore --no-index`
    /// (2.47.3): directory `a` not ignored (`::`). The line is now
    /// skipped and reported, as git matches nothing with it.
    #[test]
    fn a_pattern_ending_in_an_escaped_slash_matches_nothing_as_in_git() {
        let mut f = FileRules::default();
        let set = f.set(Path::new("/r"), IgnoreFile::Gitignore, Some("*\\/\n"));
        assert_eq!(v(&f, "/r/a", true), None);
        assert_eq!(v(&f, "/r/a", false), None);
        assert_eq!(set.bad.len(), 1, "{set:?}");
        assert!(set.bad[0].contains("git matches nothing"), "{set:?}");
    }

    /// Found by the `ignore_vs_git` fuzz target: inside a `[...]` class
    /// git reads `\` as an escape, the `ignore` crate as a member:
    /// `[[.\.!]` (the members `[`, `.`, `!`) ignored `\`. Observed with
    /// `git check-ignore --no-index` (2.47.3): `!` and `[` ignored by
    /// `.gitignore:1:[[.\.!]`, `\` and `a` not.
    #[test]
    fn a_backslash_in_a_class_escapes_as_in_git() {
        let f = files(&[("/r", IgnoreFile::Gitignore, "[[.\\.!]\n")]);
        assert_eq!(v(&f, "/r/\\", false), None);
        assert_eq!(v(&f, "/r/!", false), Some(true));
        assert_eq!(v(&f, "/r/[", false), Some(true));
        assert_eq!(v(&f, "/r/a", false), None);
    }

    /// Found by the `ignore_vs_git` fuzz target: git matches a pattern's
    /// literal prefix first and the rest apart, so the `**` of `b**/*`
    /// is at a boundary there; the `ignore` crate read `b**` as `b*`.
    /// Observed with `git check-ignore --no-index` (2.47.3): `b`, `bx`,
    /// `bx/y` and `b/y` ignored by `.gitignore:1:b**/*`, `c` and `ab`
    /// not. Rewritten as `/b*` and `/b*/**/*`.
    #[test]
    fn a_double_star_after_a_prefix_reads_as_in_git() {
        let f = files(&[("/r", IgnoreFile::Gitignore, "b**/*\n")]);
        assert_eq!(v(&f, "/r/b", false), Some(true));
        assert_eq!(v(&f, "/r/bx", false), Some(true));
        assert_eq!(v(&f, "/r/bx/y", false), Some(true));
        assert_eq!(v(&f, "/r/b/y", false), Some(true));
        assert_eq!(v(&f, "/r/ab", false), None);
        assert_eq!(v(&f, "/r/c", false), None);
    }

    /// Found by the `ignore_vs_git` fuzz target: git ignores nothing with
    /// `/**//` (a pattern ending in `//`: its trailing `/` stripped, the
    /// `/` then left at its end matches no name); the `ignore` crate
    /// ignored every directory with it. Observed with `git check-ignore
    /// --no-index` (2.47.3): directories `baa` and `a/b` not ignored
    /// (`::`). The line is skipped and reported.
    #[test]
    fn a_pattern_ending_in_two_slashes_matches_nothing_as_in_git() {
        let mut f = FileRules::default();
        let set = f.set(Path::new("/r"), IgnoreFile::Gitignore, Some("/**//\n"));
        assert_eq!(v(&f, "/r/baa", true), None);
        assert_eq!(v(&f, "/r/a/b", true), None);
        assert_eq!(set.bad.len(), 1, "{set:?}");
    }

    /// Git drops a UTF-8 byte order mark at the start of an ignore file
    /// (`dir.c`'s `skip_utf8_bom`): a `.gitignore` of `\u{feff}a` ignores
    /// `a` (`git check-ignore --no-index -v a`, git 2.47.3:
    /// `.gitignore:1:a`); the first line here had kept it.
    #[test]
    fn a_byte_order_mark_is_dropped_as_in_git() {
        let f = files(&[("/r", IgnoreFile::Gitignore, "\u{feff}a\n")]);
        assert_eq!(v(&f, "/r/a", false), Some(true));
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
        let mut f = FileRules::default();
        let set = f.set(
            Path::new("/r"),
            IgnoreFile::Gitignore,
            Some("[z-a\n*.tmp\n"),
        );
        assert_eq!(set.bad.len(), 1, "{set:?}");
        assert!(set.bad[0].starts_with("line 1: \"[z-a\": "), "{set:?}");
        assert_eq!(v(&f, "/r/a.tmp", false), Some(true), "the good line counts");
        assert!(f.reaches(Path::new("/r/x/y")) && !f.reaches(Path::new("/r")));
        assert!(f.set(Path::new("/r"), IgnoreFile::Gitignore, None).changed);
        assert!(
            !f.set(Path::new("/r"), IgnoreFile::Gitignore, None).changed,
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
