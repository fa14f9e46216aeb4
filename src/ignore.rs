//! Ignore matching: gitignore-style rules with the "deepest match decides"
//! rule, built-in editor-temp ignores, and the pruning question ("could a `!`
//! pattern match anything below this ignored directory?").
//!
//! Pure: no I/O. The caller says whether a path is a directory.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use ::ignore::Match;
use ::ignore::gitignore::{Gitignore, GitignoreBuilder};
use globset::{GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};

use crate::error::{Error, Result};
use crate::ignore_files::{IgnoreFile, IgnoreFiles};

/// Gitignore-style patterns relative to a base directory.
///
/// Semantics (those of `.gitignore`, with one deliberate difference):
///
/// - a pattern with no `/` except a trailing one (`*.o`, `target/`) matches a
///   name at any depth below `base`;
/// - a pattern with a leading or inner `/` (`/build`, `doc/gen`) is anchored to
///   `base`;
/// - a trailing `/` matches directories only;
/// - `*`, `?`, `[...]` and `**` are globs; `*` does not cross `/`;
/// - `!pattern` re-includes what an earlier pattern ignored; among the
///   patterns that match a path, the **last one wins**;
/// - for a path, the **deepest** of the path itself and its ancestors that some
///   pattern matches decides. Unlike git, a `!` pattern can therefore
///   re-include something below an ignored directory: `gen/` + `!gen/keep/`
///   keeps `gen/keep/` watched (as Docker and Tilt do).
///
/// An ignored directory gets no OS watch at all unless some `!` pattern could
/// match below it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
#[non_exhaustive]
pub struct IgnoreRule {
    /// The directory the patterns are relative to.
    pub base: PathBuf,
    /// The patterns, in order.
    pub patterns: Vec<String>,
}

impl IgnoreRule {
    /// A rule with `patterns` relative to `base`.
    pub fn new<P, I, S>(base: P, patterns: I) -> Self
    where
        P: Into<PathBuf>,
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        IgnoreRule {
            base: base.into(),
            patterns: patterns.into_iter().map(Into::into).collect(),
        }
    }
}

/// Name patterns of editors' temporary and backup files (Tilt's list and
/// JetBrains' safe-write files).
const EDITOR_TEMP: &[&str] = &[
    "*.swp",
    "*.swx",
    "*.swo",
    "*.swn",
    "4913",
    "#*#",
    ".#*",
    "*~",
    "*___jb_tmp___",
    "*___jb_old___",
    ".idea",
    "flymake_*",
    "*.kate-swp",
    "*-go-tmp-umask",
    ".DS_Store",
];

/// Version-control metadata directories.
const VCS_DIRS: &[&str] = &[".git", ".hg", ".svn", ".bzr", "_darcs", ".jj", ".pijul"];

/// The compiled ignore rules of one (normalised) spec.
#[derive(Debug)]
pub(crate) struct Matcher {
    editor: Option<GlobSet>,
    rules: Vec<CompiledRule>,
    /// The spec's roots: built-in ignores apply strictly below them.
    roots: Vec<PathBuf>,
    /// Verdicts of directories already asked about (a path's verdict is its
    /// own patterns' or else its parent directory's, so siblings share the
    /// work above them). Pure memo of a pure function; emptied when full.
    dirs: RefCell<HashMap<PathBuf, bool>>,
    /// The built-in VCS ignores are on.
    vcs: bool,
    /// Rules from ignore files under the roots (`ignore_files` option).
    files: IgnoreFiles,
}

impl Clone for Matcher {
    /// A copy with an empty memo.
    fn clone(&self) -> Matcher {
        Matcher {
            editor: self.editor.clone(),
            rules: self.rules.clone(),
            roots: self.roots.clone(),
            dirs: RefCell::new(HashMap::new()),
            vcs: self.vcs,
            files: self.files.clone(),
        }
    }
}

/// Most directory verdicts a [`Matcher`] remembers.
const DIR_CACHE_MAX: usize = 1 << 16;

/// `path` relative to `base` if it lies strictly below it. Both are clean
/// (normalised specs, and paths joined from them), so a byte prefix ending
/// at a separator is a component prefix.
fn strictly_below<'a>(path: &'a Path, base: &Path) -> Option<&'a Path> {
    let p = path.as_os_str().as_encoded_bytes();
    let b = base.as_os_str().as_encoded_bytes();
    if p.len() <= b.len() || !p.starts_with(b) {
        return None;
    }
    let rest = if b
        .last()
        .is_some_and(|c| std::path::is_separator(*c as char))
    {
        &p[b.len()..]
    } else if std::path::is_separator(p[b.len()] as char) {
        &p[b.len() + 1..]
    } else {
        return None;
    };
    if rest.is_empty() {
        return None;
    }
    // SAFETY: `rest` is a suffix of `path`'s encoded bytes that starts right
    // after an ASCII separator (or after the whole of `base`, which ends in
    // one), so it is itself valid encoded `OsStr` bytes.
    Some(Path::new(unsafe {
        OsStr::from_encoded_bytes_unchecked(rest)
    }))
}

#[derive(Clone, Debug)]
struct CompiledRule {
    base: PathBuf,
    gitignore: Gitignore,
    whitelist: Vec<Reinclude>,
    /// No patterns: the base and everything below it are ignored.
    all: bool,
}

/// What a `!` pattern could match, for pruning.
#[derive(Clone, Debug)]
enum Reinclude {
    /// Unanchored: a name at any depth.
    Anywhere,
    /// Anchored to the base: one matcher per path segment.
    Anchored(Vec<Segment>),
}

#[derive(Clone, Debug)]
enum Segment {
    /// `**`: any number of segments.
    Any,
    /// A glob (or literal) for exactly one segment; `None` when it could not be
    /// compiled on its own (then it is assumed to match).
    Glob(Option<GlobMatcher>),
}

fn compile_rule(rule: &IgnoreRule) -> std::result::Result<CompiledRule, (String, String)> {
    let mut builder = GitignoreBuilder::new(&rule.base);
    let mut whitelist = Vec::new();
    for pattern in &rule.patterns {
        if climbs_out(pattern) {
            return Err((
                pattern.clone(),
                "it climbs out of its base directory (`..`); patterns match below their \
                 rule's base: give the rule a base higher up"
                    .into(),
            ));
        }
        builder
            .add_line(None, pattern)
            .map_err(|e| (pattern.clone(), e.to_string()))?;
        if let Some(r) = reinclude_of(pattern) {
            whitelist.push(r);
        }
    }
    let gitignore = builder
        .build()
        .map_err(|e| (rule.patterns.join(" "), e.to_string()))?;
    Ok(CompiledRule {
        base: rule.base.clone(),
        gitignore,
        whitelist,
        all: rule.patterns.is_empty(),
    })
}

/// Whether a pattern names `..` (it could only mean something above its
/// base, where gitignore patterns never reach).
fn climbs_out(pattern: &str) -> bool {
    let p = pattern.trim_end_matches([' ', '\t']);
    let p = p.strip_prefix('!').unwrap_or(p);
    p.split('/').any(|seg| seg == "..")
}

/// Parses a gitignore line far enough to know what a `!` pattern could match.
fn reinclude_of(line: &str) -> Option<Reinclude> {
    let line = line.trim_end_matches([' ', '\t']);
    let pat = line.strip_prefix('!')?;
    let pat = pat.strip_suffix('/').unwrap_or(pat);
    if pat.is_empty() {
        return None;
    }
    let anchored = pat.contains('/');
    if !anchored {
        return Some(Reinclude::Anywhere);
    }
    let pat = pat.strip_prefix('/').unwrap_or(pat);
    let segments = pat
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            if s == "**" {
                Segment::Any
            } else {
                Segment::Glob(
                    GlobBuilder::new(s)
                        .literal_separator(true)
                        .backslash_escape(true)
                        .allow_unclosed_class(true)
                        .build()
                        .ok()
                        .map(|g| g.compile_matcher()),
                )
            }
        })
        .collect();
    Some(Reinclude::Anchored(segments))
}

impl Reinclude {
    /// Could this pattern match a path strictly below `dir` (given relative to
    /// the rule's base, as segments)?
    fn could_match_below(&self, dir: &[&OsStr]) -> bool {
        let segs = match self {
            Reinclude::Anywhere => return true,
            Reinclude::Anchored(segs) => segs,
        };
        for (i, d) in dir.iter().enumerate() {
            match segs.get(i) {
                None => return false,
                Some(Segment::Any) => return true,
                Some(Segment::Glob(None)) => {}
                Some(Segment::Glob(Some(g))) => {
                    if !g.is_match(d) {
                        return false;
                    }
                }
            }
        }
        segs.len() > dir.len()
    }
}

impl Matcher {
    /// Compiles the rules of spec `name` (normalised: bases and `roots`
    /// absolute and clean). This is where patterns are checked, once: the
    /// error names the spec, the rule (its index in `rules`) and the
    /// pattern. `editor_ignores`: add the built-in editor-temp ignores
    /// (strictly below the roots).
    pub(crate) fn new(
        name: &str,
        rules: &[IgnoreRule],
        roots: &[PathBuf],
        editor_ignores: bool,
        vcs_ignores: bool,
    ) -> Result<Matcher> {
        let builtins = EDITOR_TEMP
            .iter()
            .filter(|_| editor_ignores)
            .chain(VCS_DIRS.iter().filter(|_| vcs_ignores));
        let editor = if editor_ignores || vcs_ignores {
            let mut b = GlobSetBuilder::new();
            for p in builtins {
                b.add(
                    GlobBuilder::new(p)
                        .literal_separator(true)
                        .build()
                        .expect("built-in patterns are valid"),
                );
            }
            Some(b.build().expect("built-in patterns are valid"))
        } else {
            None
        };
        let mut compiled = Vec::with_capacity(rules.len());
        for (index, rule) in rules.iter().enumerate() {
            let reaches = roots
                .iter()
                .any(|r| r.starts_with(&rule.base) || rule.base.starts_with(r));
            if !reaches {
                return Err(Error::InertRule {
                    spec: name.to_owned(),
                    rule: index,
                    base: rule.base.clone(),
                });
            }
            compiled.push(compile_rule(rule).map_err(|(pattern, reason)| {
                Error::InvalidPattern {
                    spec: name.to_owned(),
                    rule: index,
                    pattern,
                    base: rule.base.clone(),
                    reason,
                }
            })?);
        }
        Ok(Matcher {
            editor,
            rules: compiled,
            roots: roots.to_vec(),
            dirs: RefCell::new(HashMap::new()),
            vcs: vcs_ignores,
            files: IgnoreFiles::default(),
        })
    }

    /// The verdict of the patterns that match `p` itself (not its
    /// ancestors): `Some(true)` ignored, `Some(false)` re-included, `None` no
    /// pattern matches (nor can any: `p` is at or above every base and root).
    fn verdict_at(&self, p: &Path, is_dir: bool) -> Option<bool> {
        let mut verdict = None;
        if let Some(editor) = &self.editor
            && self.roots.iter().any(|r| strictly_below(p, r).is_some())
            && let Some(name) = p.file_name()
            && editor.is_match(name)
        {
            verdict = Some(true);
        }
        if let Some(v) = self.files.verdict(p, is_dir) {
            verdict = Some(v);
        }
        for rule in &self.rules {
            if rule.all {
                if p.starts_with(&rule.base) {
                    verdict = Some(true);
                }
                continue;
            }
            let Some(rel) = strictly_below(p, &rule.base) else {
                continue;
            };
            match rule.gitignore.matched(rel, is_dir) {
                Match::None => {}
                Match::Ignore(_) => verdict = Some(true),
                Match::Whitelist(_) => verdict = Some(false),
            }
        }
        verdict
    }

    /// Whether `p` is strictly below some rule base or (with built-in
    /// ignores) some root: above all of them nothing can match.
    fn below_something(&self, p: &Path) -> bool {
        self.rules
            .iter()
            .any(|r| strictly_below(p, &r.base).is_some() || (r.all && p == r.base))
            || self.files.reaches(p)
            || (self.editor.is_some() && self.roots.iter().any(|r| strictly_below(p, r).is_some()))
    }

    /// Whether `path` is ignored: the deepest of the path and its ancestors
    /// that some pattern matches decides; among the patterns matching it, the
    /// last wins.
    pub(crate) fn is_ignored(&self, path: &Path, is_dir: bool) -> bool {
        if self.editor.is_none() && self.rules.is_empty() && self.files.is_empty() {
            return false;
        }
        if !self.below_something(path) {
            return false;
        }
        if let Some(v) = self.verdict_at(path, is_dir) {
            return v;
        }
        match path.parent() {
            Some(parent) => self.dir_ignored(parent),
            None => false,
        }
    }

    /// [`is_ignored`](Self::is_ignored) of a directory, remembered. Walks up
    /// to the first directory with a remembered or decisive verdict, then
    /// remembers it for every directory passed on the way.
    fn dir_ignored(&self, dir: &Path) -> bool {
        let mut pending: Vec<&Path> = Vec::new();
        let mut p = dir;
        let verdict = loop {
            if let Some(&v) = self.dirs.borrow().get(p) {
                break v;
            }
            if !self.below_something(p) {
                break false;
            }
            if let Some(v) = self.verdict_at(p, true) {
                pending.push(p);
                break v;
            }
            pending.push(p);
            match p.parent() {
                Some(parent) => p = parent,
                None => break false,
            }
        };
        let mut dirs = self.dirs.borrow_mut();
        if dirs.len() + pending.len() > DIR_CACHE_MAX {
            dirs.clear();
        }
        for d in pending {
            dirs.insert(d.to_path_buf(), verdict);
        }
        verdict
    }

    /// Whether some `!` pattern could match a path strictly below `dir`.
    pub(crate) fn could_reinclude_below(&self, dir: &Path) -> bool {
        for rule in &self.rules {
            if rule.whitelist.is_empty() {
                continue;
            }
            if let Ok(rel) = dir.strip_prefix(&rule.base) {
                let segs: Vec<&OsStr> = rel.iter().collect();
                if rule.whitelist.iter().any(|w| w.could_match_below(&segs)) {
                    return true;
                }
            } else if rule.base.starts_with(dir) {
                // The rule's base lies below `dir`: its `!` patterns apply there.
                return true;
            }
        }
        false
    }

    /// Sets (or removes) ignore file `which` applying in `dir`, with its
    /// `contents`; whether anything changed. Forgets remembered verdicts.
    pub(crate) fn set_file(
        &mut self,
        dir: &Path,
        which: IgnoreFile,
        contents: Option<&str>,
    ) -> bool {
        let changed = self.files.set(dir, which, contents);
        if changed {
            self.dirs.borrow_mut().clear();
        }
        changed
    }

    /// Whether the directory `dir` needs no OS watch and no reading: it is
    /// ignored and nothing below it can be re-included.
    pub(crate) fn prunes(&self, dir: &Path) -> bool {
        self.is_ignored(dir, true) && (!self.could_reinclude_below(dir) || self.vcs_pruned(dir))
    }

    /// Whether `dir` is a VCS directory the built-ins ignore and no rule
    /// re-includes by name: pruned even if some `!` pattern could match
    /// below it (`only(["*.tgz"])` does not mean "watch `.git/`").
    fn vcs_pruned(&self, dir: &Path) -> bool {
        self.vcs
            && dir
                .file_name()
                .is_some_and(|n| VCS_DIRS.iter().any(|v| OsStr::new(v) == n))
            && self.roots.iter().any(|r| strictly_below(dir, r).is_some())
            && !self.rules.iter().any(|rule| {
                strictly_below(dir, &rule.base).is_some_and(|rel| {
                    matches!(rule.gitignore.matched(rel, true), Match::Whitelist(_))
                })
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A matcher for root `/r` with one rule based there.
    /// (No patterns: no rule, only the built-ins; a rule without patterns
    /// ignores its whole base, see `an_empty_rule_ignores_its_whole_base`.)
    fn matcher(patterns: &[&str]) -> Matcher {
        if patterns.is_empty() {
            return rules(&[]);
        }
        rules(&[IgnoreRule::new("/r", patterns.iter().copied())])
    }

    /// A matcher for root `/r`, editor ignores on.
    fn rules(rules: &[IgnoreRule]) -> Matcher {
        Matcher::new("t", rules, &["/r".into()], true, true).unwrap()
    }

    fn ig(m: &Matcher, p: &str, dir: bool) -> bool {
        m.is_ignored(Path::new(p), dir)
    }

    // Table-driven cases, one test each (as `ignore::gitignore` tests its
    // matcher): `ignored!(name, [patterns of a rule based at /r], path)`,
    // `, dir` when the path is a directory; `not_ignored!` alike;
    // `pruned!` / `not_pruned!` for directories that need no watch.
    // Built-in editor ignores are on.
    macro_rules! case {
        ($name:ident, [$($p:expr),*], $path:expr, $dir:expr, ignored == $want:expr) => {
            #[test]
            fn $name() {
                let m = matcher(&[$($p),*]);
                assert_eq!(ig(&m, $path, $dir), $want, "{} ignored should be {}", $path, $want);
            }
        };
        ($name:ident, [$($p:expr),*], $path:expr, pruned == $want:expr) => {
            #[test]
            fn $name() {
                let m = matcher(&[$($p),*]);
                assert_eq!(m.prunes(Path::new($path)), $want, "{} pruned should be {}", $path, $want);
            }
        };
    }
    macro_rules! ignored {
        ($n:ident, [$($p:expr),* $(,)?], $path:expr) => { case!($n, [$($p),*], $path, false, ignored == true); };
        ($n:ident, [$($p:expr),* $(,)?], $path:expr, dir) => { case!($n, [$($p),*], $path, true, ignored == true); };
    }
    macro_rules! not_ignored {
        ($n:ident, [$($p:expr),* $(,)?], $path:expr) => { case!($n, [$($p),*], $path, false, ignored == false); };
        ($n:ident, [$($p:expr),* $(,)?], $path:expr, dir) => { case!($n, [$($p),*], $path, true, ignored == false); };
    }
    macro_rules! pruned {
        ($n:ident, [$($p:expr),* $(,)?], $path:expr) => { case!($n, [$($p),*], $path, pruned == true); };
    }
    macro_rules! not_pruned {
        ($n:ident, [$($p:expr),* $(,)?], $path:expr) => { case!($n, [$($p),*], $path, pruned == false); };
    }

    // Names at any depth; anchoring.
    ignored!(ig_name_top, ["*.o"], "/r/a.o");
    ignored!(ig_name_deep, ["*.o"], "/r/x/y/a.o");
    ignored!(ig_literal_dir, ["build"], "/r/build", dir);
    ignored!(ig_literal_file, ["build"], "/r/x/build");
    ignored!(ig_below_ignored_dir, ["build"], "/r/build/deep/f.c");
    ignored!(ig_anchored_leading_slash, ["/top"], "/r/top");
    not_ignored!(ni_anchored_leading_slash_deeper, ["/top"], "/r/x/top");
    ignored!(ig_anchored_inner_slash, ["doc/gen"], "/r/doc/gen", dir);
    not_ignored!(
        ni_anchored_inner_slash_deeper,
        ["doc/gen"],
        "/r/x/doc/gen",
        dir
    );
    not_ignored!(ni_other_extension, ["*.o"], "/r/a.c");
    not_ignored!(ni_root_itself, ["*"], "/r", dir);
    not_ignored!(ni_above_base, ["*"], "/elsewhere/f");
    // Globs.
    ignored!(ig_question_mark, ["a?c"], "/r/abc");
    not_ignored!(ni_question_mark_no_slash, ["a?c"], "/r/a/c");
    ignored!(ig_class, ["[ab].txt"], "/r/b.txt");
    not_ignored!(ni_class, ["[ab].txt"], "/r/c.txt");
    ignored!(ig_double_star_middle, ["a/**/z"], "/r/a/b/c/z");
    ignored!(ig_double_star_zero_dirs, ["a/**/z"], "/r/a/z");
    ignored!(ig_double_star_lead, ["**/z"], "/r/q/z");
    ignored!(ig_double_star_trail, ["a/**"], "/r/a/q/w");
    not_ignored!(ni_star_is_one_segment, ["a/*.txt"], "/r/a/b/c.txt");
    ignored!(ig_star_one_segment, ["a/*.txt"], "/r/a/c.txt");
    ignored!(ig_below_a_star_match, ["a/*"], "/r/a/b/c/d.txt");
    // Directories only.
    ignored!(ig_dir_only_dir, ["out/"], "/r/out", dir);
    not_ignored!(ni_dir_only_file, ["out/"], "/r/out");
    ignored!(ig_dir_only_inside, ["out/"], "/r/out/f");
    // Negation: the last matching pattern wins; the deepest match decides.
    ignored!(ig_last_wins_ignore, ["!keep.log", "*.log"], "/r/keep.log");
    not_ignored!(ni_last_wins_keep, ["*.log", "!keep.log"], "/r/keep.log");
    ignored!(ig_other_logs, ["*.log", "!keep.log"], "/r/a.log");
    not_ignored!(
        ni_reinclude_dir_below_ignored,
        ["gen/", "!gen/keep/"],
        "/r/gen/keep",
        dir
    );
    not_ignored!(
        ni_reinclude_file_below,
        ["gen/", "!gen/keep/"],
        "/r/gen/keep/a/b.txt"
    );
    ignored!(
        ig_sibling_of_reinclude,
        ["gen/", "!gen/keep/"],
        "/r/gen/other.txt"
    );
    ignored!(
        ig_deeper_ignore_beats_reinclude,
        ["!keep/", "*.tmp"],
        "/r/keep/x.tmp"
    );
    // Comments, blanks, escapes, trailing spaces.
    not_ignored!(ni_comment, ["# c"], "/r/# c");
    ignored!(ig_escaped_hash, ["\\#lit"], "/r/#lit");
    ignored!(ig_escaped_bang, ["\\!bang"], "/r/!bang");
    ignored!(ig_trailing_space_trimmed, ["a.txt   "], "/r/a.txt");
    // Built-in editor temporaries, and a user negation over them.
    ignored!(ig_vim_swap, [], "/r/.a.swp");
    ignored!(ig_vim_4913, [], "/r/x/4913");
    ignored!(ig_emacs_lock, [], "/r/.#a");
    ignored!(ig_emacs_autosave, [], "/r/#a#");
    ignored!(ig_backup, [], "/r/a~");
    ignored!(ig_jetbrains, [], "/r/a.rs___jb_tmp___");
    not_ignored!(
        ni_user_negation_beats_builtin,
        ["!important~"],
        "/r/important~"
    );
    not_ignored!(ni_plain_file, [], "/r/a.txt");
    ignored!(ig_newer_editor_files, [], "/r/a/flymake_x.go");
    ignored!(ig_kate, [], "/r/a.kate-swp");
    ignored!(ig_go_tmp, [], "/r/x-go-tmp-umask");
    ignored!(ig_ds_store, [], "/r/a/.DS_Store");
    ignored!(ig_idea, [], "/r/.idea", dir);
    ignored!(ig_vim_swn, [], "/r/.a.swn");
    // Version-control metadata, by default.
    ignored!(ig_git_dir, [], "/r/.git", dir);
    ignored!(ig_in_git_dir, [], "/r/sub/.git/HEAD");
    ignored!(ig_hg_dir, [], "/r/.hg", dir);
    pruned!(pr_git_dir, [], "/r/.git");
    not_ignored!(ni_gitignore_file, [], "/r/.gitignore");
    not_ignored!(ni_user_reinclude_git, ["!.git/"], "/r/.git", dir);

    // Pruning: only when no `!` pattern could match below.
    pruned!(pr_ignored_dir, ["node_modules/"], "/r/node_modules");
    pruned!(
        pr_ignored_dir_deep,
        ["node_modules/"],
        "/r/a/b/node_modules"
    );
    pruned!(pr_below_pruned, ["target"], "/r/target/debug");
    not_pruned!(np_not_ignored, ["target"], "/r/src");
    not_pruned!(
        np_unanchored_negation,
        ["node_modules/", "!*.keep"],
        "/r/node_modules"
    );
    pruned!(
        pr_anchored_negation_elsewhere,
        ["vendor/", "!src/keep/"],
        "/r/vendor"
    );
    not_pruned!(
        np_double_star_negation,
        ["vendor/", "!vendor/**/keep"],
        "/r/vendor/a/b"
    );
    not_pruned!(
        np_glob_segment_match,
        ["pkgs/", "!pkgs/lib-*/src/"],
        "/r/pkgs/lib-a"
    );
    pruned!(
        pr_glob_segment_mismatch,
        ["pkgs/", "!pkgs/lib-*/src/"],
        "/r/pkgs/app"
    );
    pruned!(
        pr_past_the_negation,
        ["pkgs/", "!pkgs/lib-*/src/"],
        "/r/pkgs/lib-a/test"
    );
    not_pruned!(np_the_reinclude_path, ["gen/", "!gen/keep/"], "/r/gen/keep");
    not_pruned!(np_parent_of_reinclude, ["gen/", "!gen/keep/"], "/r/gen");

    #[test]
    fn bare_name_matches_at_any_depth() {
        let m = matcher(&["*.o", "build"]);
        assert!(ig(&m, "/r/a.o", false));
        assert!(ig(&m, "/r/x/y/a.o", false));
        assert!(ig(&m, "/r/build", true));
        assert!(ig(&m, "/r/x/build", false));
        assert!(!ig(&m, "/r/a.c", false));
        // Everything below an ignored directory is ignored.
        assert!(ig(&m, "/r/x/build/deep/file.c", false));
    }

    #[test]
    fn anchored_patterns() {
        let m = matcher(&["/top", "doc/gen"]);
        assert!(ig(&m, "/r/top", false));
        assert!(!ig(&m, "/r/x/top", false));
        assert!(ig(&m, "/r/doc/gen", true));
        assert!(!ig(&m, "/r/x/doc/gen", true));
    }

    #[test]
    fn trailing_slash_means_directories_only() {
        let m = matcher(&["out/"]);
        assert!(ig(&m, "/r/out", true));
        assert!(!ig(&m, "/r/out", false));
        assert!(ig(&m, "/r/out/f", false));
    }

    #[test]
    fn last_match_wins() {
        let m = matcher(&["*.log", "!keep.log"]);
        assert!(ig(&m, "/r/a.log", false));
        assert!(!ig(&m, "/r/keep.log", false));
        let m = matcher(&["!keep.log", "*.log"]);
        assert!(ig(&m, "/r/keep.log", false));
    }

    #[test]
    fn deepest_match_decides_so_negation_reaches_into_ignored_dirs() {
        let m = matcher(&["gen/", "!gen/keep/"]);
        assert!(ig(&m, "/r/gen", true));
        assert!(ig(&m, "/r/gen/other.txt", false));
        assert!(!ig(&m, "/r/gen/keep", true));
        assert!(!ig(&m, "/r/gen/keep/a.txt", false));
        assert!(!ig(&m, "/r/gen/keep/sub/b.txt", false));
        // gen/ is ignored but must not be pruned; gen/other/ may be.
        assert!(!m.prunes(Path::new("/r/gen")));
        assert!(m.prunes(Path::new("/r/gen/other")));
        assert!(!m.prunes(Path::new("/r/gen/keep")));
    }

    #[test]
    fn pruning() {
        let m = matcher(&["node_modules/", "target"]);
        assert!(m.prunes(Path::new("/r/node_modules")));
        assert!(m.prunes(Path::new("/r/a/b/node_modules")));
        assert!(m.prunes(Path::new("/r/target")));
        assert!(!m.prunes(Path::new("/r/src")));
        // An unanchored negation could match anywhere: no pruning.
        let m = matcher(&["node_modules/", "!*.keep"]);
        assert!(m.is_ignored(Path::new("/r/node_modules"), true));
        assert!(!m.prunes(Path::new("/r/node_modules")));
        // An anchored negation elsewhere does not prevent pruning.
        let m = matcher(&["vendor/", "!src/keep/"]);
        assert!(m.prunes(Path::new("/r/vendor")));
        // `**` in a negation reaches anywhere below.
        let m = matcher(&["vendor/", "!vendor/**/keep"]);
        assert!(!m.prunes(Path::new("/r/vendor")));
        assert!(!m.prunes(Path::new("/r/vendor/a/b")));
        // Glob segments are matched segment by segment.
        let m = matcher(&["pkgs/", "!pkgs/lib-*/src/"]);
        assert!(!m.prunes(Path::new("/r/pkgs")));
        assert!(!m.prunes(Path::new("/r/pkgs/lib-a")));
        assert!(m.prunes(Path::new("/r/pkgs/app")));
        assert!(m.prunes(Path::new("/r/pkgs/lib-a/test")));
    }

    #[test]
    fn negation_for_the_directory_itself_does_not_block_pruning_below() {
        // `!gen/` matches gen itself: gen is kept; nothing re-includes below other/.
        let m = matcher(&["gen/", "!gen/"]);
        assert!(!ig(&m, "/r/gen", true));
        assert!(!m.prunes(Path::new("/r/gen")));
    }

    #[test]
    fn editor_temp_files() {
        let m = matcher(&[]);
        for p in [
            "/r/.a.swp",
            "/r/x/.a.swx",
            "/r/4913",
            "/r/#a#",
            "/r/.#a",
            "/r/a~",
            "/r/a.txt___jb_tmp___",
            "/r/a.txt___jb_old___",
        ] {
            assert!(ig(&m, p, false), "{p} should be ignored");
        }
        assert!(!ig(&m, "/r/a.txt", false));
        // The root itself is never ignored by the built-ins.
        let m2 = Matcher::new("t", &[], &["/r~".into()], true, true).unwrap();
        assert!(!m2.is_ignored(Path::new("/r~"), true));
        // Off switch.
        let m3 = Matcher::new("t", &[], &["/r".into()], false, false).unwrap();
        assert!(!m3.is_ignored(Path::new("/r/a~"), false));
        // A user negation beats a built-in.
        let m4 = matcher(&["!important~"]);
        assert!(!ig(&m4, "/r/important~", false));
        assert!(ig(&m4, "/r/other~", false));
    }

    #[test]
    fn rules_only_apply_below_their_base() {
        let m = rules(&[IgnoreRule::new("/r/sub", ["*.txt"])]);
        assert!(!m.is_ignored(Path::new("/r/a.txt"), false));
        assert!(m.is_ignored(Path::new("/r/sub/a.txt"), false));
        assert!(m.is_ignored(Path::new("/r/sub/x/a.txt"), false));
    }

    #[test]
    fn later_rules_beat_earlier_rules() {
        let m = rules(&[
            IgnoreRule::new("/r", ["*.txt"]),
            IgnoreRule::new("/r/sub", ["!keep.txt"]),
        ]);
        assert!(m.is_ignored(Path::new("/r/sub/a.txt"), false));
        assert!(!m.is_ignored(Path::new("/r/sub/keep.txt"), false));
        // A rule with a deeper base and a negation prevents pruning above it.
        assert!(m.could_reinclude_below(Path::new("/r")));
    }

    #[test]
    fn comments_blank_lines_and_escapes() {
        let m = matcher(&["# comment", "", "\\#lit", "\\!bang"]);
        assert!(ig(&m, "/r/#lit", false));
        assert!(ig(&m, "/r/!bang", false));
        assert!(!ig(&m, "/r/# comment", false));
    }

    #[test]
    fn invalid_pattern_is_named() {
        let rules = [
            IgnoreRule::new("/r", ["fine"]),
            IgnoreRule::new("/r/sub", ["ok", "a[z-a]", "b"]),
        ];
        match Matcher::new("s", &rules, &["/r".into()], true, true) {
            Err(Error::InvalidPattern {
                pattern,
                spec,
                rule,
                base,
                ..
            }) => {
                assert_eq!(pattern, "a[z-a]");
                assert_eq!(spec, "s");
                assert_eq!(rule, 1, "the second rule");
                assert_eq!(base, PathBuf::from("/r/sub"));
            }
            other => panic!("expected InvalidPattern, got {other:?}"),
        }
    }

    #[cfg(unix)]
    #[test]
    fn non_utf8_names() {
        use std::os::unix::ffi::OsStrExt;
        let m = matcher(&["*.o"]);
        let p = Path::new(OsStr::from_bytes(b"/r/\xff\xfe.o"));
        assert!(m.is_ignored(p, false));
        let p = Path::new(OsStr::from_bytes(b"/r/\xff\xfe.c"));
        assert!(!m.is_ignored(p, false));
    }

    #[test]
    fn an_empty_rule_ignores_its_whole_base() {
        let m = rules(&[IgnoreRule::new("/r/gen", Vec::<String>::new())]);
        assert!(ig(&m, "/r/gen", true), "the base itself");
        assert!(ig(&m, "/r/gen/x/y.rs", false));
        assert!(!ig(&m, "/r/genx", false) && !ig(&m, "/r/a.rs", false));
        assert!(m.prunes(Path::new("/r/gen")));
    }

    #[test]
    fn built_ins_can_be_turned_off_one_by_one() {
        let editor_only = Matcher::new("t", &[], &["/r".into()], true, false).unwrap();
        assert!(!ig(&editor_only, "/r/.git", true), "VCS off");
        assert!(ig(&editor_only, "/r/.a.swp", false));
        let vcs_only = Matcher::new("t", &[], &["/r".into()], false, true).unwrap();
        assert!(ig(&vcs_only, "/r/.git", true));
        assert!(!ig(&vcs_only, "/r/.a.swp", false), "editor off");
        // A root that is itself a VCS directory is watched.
        let m = Matcher::new("t", &[], &["/r/.git".into()], true, true).unwrap();
        assert!(!ig(&m, "/r/.git/HEAD", false));
    }

    #[test]
    fn strictly_below_is_a_component_prefix() {
        let sb =
            |p: &str, b: &str| strictly_below(Path::new(p), Path::new(b)).map(Path::to_path_buf);
        assert_eq!(sb("/r/a/b", "/r"), Some(PathBuf::from("a/b")));
        assert_eq!(sb("/r/a", "/"), Some(PathBuf::from("r/a")));
        assert_eq!(sb("/r", "/r"), None);
        assert_eq!(sb("/rx/a", "/r"), None);
        assert_eq!(sb("/r", "/r/a"), None);
        assert_eq!(sb("/", "/"), None);
    }

    /// The directory memo never changes an answer, whatever the order of
    /// the questions: every answer equals that of a fresh matcher.
    #[test]
    fn remembered_verdicts_equal_fresh_ones() {
        let pats = [
            "build/",
            "*.o",
            "!keep.o",
            "/top",
            "docs/gen/",
            "!docs/gen/keep/",
            "deep/**/x",
        ];
        let names = [
            "build", "keep.o", "a.o", "top", "docs", "gen", "keep", "deep", "x", "y",
        ];
        let mut paths = Vec::new();
        let mut rng = 0x9E37_79B9_7F4A_7C15_u64;
        for _ in 0..3000 {
            let mut p = PathBuf::from("/r");
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            for k in 0..(1 + rng % 6) {
                p.push(names[((rng >> (8 * k)) % names.len() as u64) as usize]);
            }
            paths.push((p, rng & 1 == 0));
        }
        let cached = matcher(&pats);
        let fresh = matcher(&pats);
        for (p, dir) in &paths {
            fresh.dirs.borrow_mut().clear();
            assert_eq!(
                cached.is_ignored(p, *dir),
                fresh.is_ignored(p, *dir),
                "{} (dir: {dir})",
                p.display()
            );
        }
        // A full memo is emptied, not grown without bound.
        assert!(cached.dirs.borrow().len() <= DIR_CACHE_MAX);
    }

    #[test]
    fn ignore_files_join_inline_rules_and_inline_rules_win() {
        let mut m = rules(&[IgnoreRule::new("/r", ["!keep.log"])]);
        assert!(m.set_file(
            Path::new("/r"),
            IgnoreFile::Gitignore,
            Some("*.log\ntarget/\n")
        ));
        assert!(ig(&m, "/r/a.log", false));
        assert!(ig(&m, "/r/sub/b.log", false));
        assert!(!ig(&m, "/r/keep.log", false), "the spec's own rule wins");
        assert!(
            ig(&m, "/r/target/debug/x", false),
            "below an ignored directory"
        );
        assert!(
            !m.prunes(Path::new("/r/target")),
            "the spec's `!keep.log` could re-include below it"
        );
        let mut only_files = rules(&[]);
        only_files.set_file(
            Path::new("/r"),
            IgnoreFile::Gitignore,
            Some("target/\n!target/keep\n"),
        );
        assert!(
            only_files.prunes(Path::new("/r/target")),
            "as git: nothing below an ignored directory comes back"
        );
        assert!(!ig(&m, "/r/src/a.rs", false));
        // The file goes: so does its verdict (the memo is forgotten).
        assert!(m.set_file(Path::new("/r"), IgnoreFile::Gitignore, None));
        assert!(!ig(&m, "/r/target/debug/x", false));
        let copy = m.clone();
        assert!(!ig(&copy, "/r/a.log", false));
    }

    #[test]
    fn only_some_files_and_never_vcs_directories() {
        let spec = crate::WatchSpec::new(["/r"])
            .only(["*.tgz"])
            .normalized("c")
            .unwrap();
        let m = spec.matcher("c").unwrap();
        assert!(!ig(&m, "/r/org/app-1.0.tgz", false));
        assert!(ig(&m, "/r/org/README.md", false));
        assert!(ig(&m, "/r/org", true), "directories are not reported");
        assert!(
            !m.prunes(Path::new("/r/org")),
            "but watched: a match may appear"
        );
        assert!(m.prunes(Path::new("/r/.git")), "not .git/");
        // A rule naming .git/ itself brings it back.
        let m = rules(&[IgnoreRule::new("/r", ["*", "!*.tgz", "!.git/"])]);
        assert!(!m.prunes(Path::new("/r/.git")));
    }
}
