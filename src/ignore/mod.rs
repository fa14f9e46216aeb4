//! Ignore matching: gitignore-style rules with the "deepest match decides"
//! rule, built-in editor-temp ignores, and the pruning question ("could a `!`
//! pattern match anything below this ignored directory?").
//!
//! Pure: no I/O. The caller says whether a path is a directory.
//!
//! The folder holds every part of the ignore rules, each pure: this file
//! (a spec's rules and its [`Matcher`]), `files` (the rules read from a
//! tree's ignore files, per directory), `kinds` (which ignore files a spec
//! follows: [`IgnoreFiles`](crate::IgnoreFiles)), `git_pattern` (a pattern
//! line read as git reads it) and `docker` (`.dockerignore`'s reading).

pub(crate) mod docker;
pub(crate) mod files;
pub(crate) mod git_pattern;
pub(crate) mod kinds;

use std::cell::{Cell, RefCell};

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use ::ignore::Match;
use ::ignore::gitignore::{Gitignore, GitignoreBuilder};
use globset::{GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};

use crate::error::{Error, Result};
use crate::fasthash::FastMap;
use crate::ignore::files::{FileRules, IgnoreFile, Set};
use crate::ignore::git_pattern::{Line, Why, rewrite};

/// Gitignore-style patterns relative to a base directory.
///
/// Semantics (those of `.gitignore`, with one deliberate difference):
///
/// - a pattern with no `/` except a trailing one (`*.o`, `target/`) matches a
///   name at any depth below `base`;
/// - a pattern with a leading or inner `/` (`/build`, `doc/gen`) is anchored to
///   `base`;
/// - a trailing `/` matches directories only;
/// - `*`, `?`, `[...]` and `**` are globs; `*` does not cross `/`; a `[`
///   that no `]` closes is refused (git's pattern would match nothing; `\[`
///   is the character itself);
/// - `!pattern` re-includes what an earlier pattern ignored; among the
///   patterns that match a path, the **last one wins**;
/// - for a path, the **deepest** of the path itself and its ancestors that some
///   pattern matches decides. Unlike git, a `!` pattern can therefore
///   re-include something below an ignored directory: `gen/` + `!gen/keep/`
///   keeps `gen/keep/` watched (as Docker and Tilt do).
///
/// An ignored directory gets no OS watch at all unless some `!` pattern could
/// match below it.
///
/// Patterns are read as git reads them, edge cases included (a run of
/// three or more `*`, `**` after a literal prefix, `\` inside `[...]`,
/// `{` and `}` as themselves); a pattern git matches nothing with (a `[`
/// that no `]` closes, one ending in `\/` or `//`) is refused.
///
/// The fuzz target `ignore_vs_git` (`fuzz/`) compares these rules with
/// `git check-ignore` on generated trees and patterns: the re-include
/// below an ignored directory is the only difference it lets pass by
/// design.
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

/// The built-in patterns (editor files, VCS directories, or both),
/// compiled once per process and shared by every spec: some 57 KiB each,
/// and one copy stays warm in the cache when an event is checked against
/// a hundred specs.
fn builtins(editor_ignores: bool, vcs_ignores: bool) -> Option<Arc<GlobSet>> {
    static SETS: [OnceLock<Arc<GlobSet>>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let slot = match (editor_ignores, vcs_ignores) {
        (false, false) => return None,
        (true, false) => 0,
        (false, true) => 1,
        (true, true) => 2,
    };
    let set = SETS[slot].get_or_init(|| {
        let mut b = GlobSetBuilder::new();
        let patterns = EDITOR_TEMP
            .iter()
            .filter(|_| editor_ignores)
            .chain(VCS_DIRS.iter().filter(|_| vcs_ignores));
        for p in patterns {
            b.add(
                GlobBuilder::new(p)
                    .literal_separator(true)
                    .build()
                    .expect("built-in patterns are valid"),
            );
        }
        Arc::new(b.build().expect("built-in patterns are valid"))
    });
    Some(set.clone())
}

/// The compiled ignore rules of one (normalised) spec.
#[derive(Debug)]
pub(crate) struct Matcher {
    /// The built-in patterns, shared (see [`builtins`]).
    editor: Option<Arc<GlobSet>>,
    rules: Vec<CompiledRule>,
    /// The spec's roots: built-in ignores apply strictly below them.
    roots: Vec<PathBuf>,
    /// Verdicts of directories already asked about (a path's verdict is its
    /// own patterns' or else its parent directory's, so siblings share the
    /// work above them). Pure memo of a pure function; emptied when full.
    dirs: RefCell<FastMap<PathBuf, bool>>,
    /// The built-in VCS ignores are on.
    vcs: bool,
    /// Rules from ignore files under the roots (`ignore_files` option).
    files: FileRules,
}

impl Clone for Matcher {
    /// A copy with an empty memo.
    fn clone(&self) -> Matcher {
        Matcher {
            editor: self.editor.clone(),
            rules: self.rules.clone(),
            roots: self.roots.clone(),
            dirs: RefCell::new(FastMap::default()),
            vcs: self.vcs,
            files: self.files.clone(),
        }
    }
}

/// One entry `name` of directory `parent` (at `path`), asked about by
/// many matchers in a row: its name and parent are split off once, and
/// the verdict of each shared built-in pattern set on its name is
/// computed once.
pub(crate) struct Entry<'a> {
    path: &'a Path,
    parent: &'a Path,
    name: &'a OsStr,
    /// (set address, verdict) of the built-in sets asked so far.
    builtin: [Cell<(usize, bool)>; 3],
}

impl<'a> Entry<'a> {
    pub(crate) fn new(path: &'a Path, parent: &'a Path, name: &'a OsStr) -> Entry<'a> {
        Entry {
            path,
            parent,
            name,
            builtin: [const { Cell::new((0, false)) }; 3],
        }
    }

    fn builtin(&self, set: &Arc<GlobSet>) -> bool {
        let key = Arc::as_ptr(set) as usize;
        for slot in &self.builtin {
            let (k, v) = slot.get();
            if k == key {
                return v;
            }
            if k == 0 {
                let v = set.is_match(self.name);
                slot.set((key, v));
                return v;
            }
        }
        set.is_match(self.name)
    }
}

/// Most directory verdicts a [`Matcher`] remembers.
const DIR_CACHE_MAX: usize = 1 << 12;

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
        // The pattern as git reads it, in the crate's syntax (`git_pattern`).
        let lines = match rewrite(pattern) {
            Line::Skip => continue,
            Line::Lines(lines) => lines,
            Line::Nothing(Why::UnclosedClass) => {
                return Err((
                    pattern.clone(),
                    "its `[` opens a character class that no `]` closes: git's pattern then \
                     matches nothing (write `\\[` for the character itself)"
                        .into(),
                ));
            }
            Line::Nothing(why) => {
                return Err((
                    pattern.clone(),
                    format!("{}: git's pattern matches nothing", why.text()),
                ));
            }
        };
        for line in &lines {
            builder
                .add_line(None, line)
                .map_err(|e| (pattern.clone(), e.to_string()))?;
            if let Some(r) = reinclude_of(line) {
                whitelist.push(r);
            }
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
        let editor = builtins(editor_ignores, vcs_ignores);
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
            dirs: RefCell::new(FastMap::default()),
            vcs: vcs_ignores,
            files: FileRules::default(),
        })
    }

    /// The verdict of the patterns that match `p` itself (not its
    /// ancestors): `Some(true)` ignored, `Some(false)` re-included, `None` no
    /// pattern matches (nor can any: `p` is at or above every base and root).
    fn verdict_at(&self, p: &Path, is_dir: bool, entry: Option<&Entry<'_>>) -> Option<bool> {
        let mut verdict = None;
        if let Some(editor) = &self.editor
            && self.roots.iter().any(|r| strictly_below(p, r).is_some())
            && match entry {
                Some(e) => e.builtin(editor),
                None => p.file_name().is_some_and(|name| editor.is_match(name)),
            }
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
        if let Some(v) = self.verdict_at(path, is_dir, None) {
            return v;
        }
        match path.parent() {
            Some(parent) => self.dir_ignored(parent),
            None => false,
        }
    }

    /// [`is_ignored`](Self::is_ignored) of `entry`, sharing what does not
    /// depend on the matcher with the other matchers asked about it.
    pub(crate) fn is_entry_ignored(&self, entry: &Entry<'_>, is_dir: bool) -> bool {
        if self.editor.is_none() && self.rules.is_empty() && self.files.is_empty() {
            return false;
        }
        if !self.below_something(entry.path) {
            return false;
        }
        if let Some(v) = self.verdict_at(entry.path, is_dir, Some(entry)) {
            return v;
        }
        self.dir_ignored(entry.parent)
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
            if let Some(v) = self.verdict_at(p, true, None) {
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
        if self.files.could_reinclude_below(dir) {
            return true;
        }
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
    /// `contents`: whether anything changed, and the lines skipped.
    /// Forgets remembered verdicts.
    pub(crate) fn set_file(
        &mut self,
        dir: &Path,
        which: IgnoreFile,
        contents: Option<&str>,
    ) -> Set {
        let set = self.files.set(dir, which, contents);
        if set.changed {
            self.dirs.borrow_mut().clear();
        }
        set
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
#[path = "tests.rs"]
mod tests;
