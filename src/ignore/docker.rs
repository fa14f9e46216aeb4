//! `.dockerignore` patterns (and `.tiltignore`'s, which Tilt reads the
//! same way): Docker's semantics, from moby's `patternmatcher` (its
//! `ignorefile.ReadAll` and `MatchesOrParentMatches`), written here.
//!
//! Pure: no I/O. A path is given relative to the directory holding the
//! file (the build context), as `/`-separated components.
//!
//! - Reading: a UTF-8 BOM is dropped; a line starting with `#` is a
//!   comment; each other line is trimmed, empty ones skipped; `!` marks an
//!   exception; the pattern is cleaned as Go's `filepath.Clean` does
//!   (`a//b/./c/../d` is `a/b/d`, a trailing `/` goes: `foo/` also names
//!   a file `foo`) and one leading `/` is dropped (`/foo` is `foo`).
//! - Patterns are always anchored at the file's directory: `foo` is
//!   `<dir>/foo` only (never a `foo` deeper down), and everything below
//!   it. `*` and `?` never cross `/`; `[...]` is a class (`[^...]`
//!   negates); `\` escapes (Unix); `**` is any number of directories
//!   (`a/**/b`, `**/*.go`), and at the end anything (`a/**` is all below
//!   `a`). As in moby, a leading `**` followed by plain characters is a
//!   suffix (`**.txt` is any path ending `.txt`).
//! - A path is excluded when, going through the patterns in order, the
//!   last one that names it or one of its parent directories is not an
//!   exception. So `!` re-includes below an excluded directory:
//!   `build` + `!build/keep` keeps `build/keep` and what is in it.
//!
//! A malformed line (an unclosed `[`, a lone `!`, a trailing `\`) is
//! skipped and named (line and reason), where `docker build` would refuse
//! the whole file: a watch keeps going with the other lines.

/// One token of a compiled pattern.
#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Lit(char),
    /// `?`: one character but `/`.
    Quest,
    /// `*`: any run of characters without `/`.
    Star,
    /// `[...]`: one character in (or, negated, not in) the ranges.
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    /// `**` before more pattern: nothing, or anything ending in `/`.
    AnyDirs,
    /// `**` at the end (or a leading one before a plain suffix): anything.
    Any,
}

#[derive(Clone, Debug)]
struct Pattern {
    exception: bool,
    toks: Vec<Tok>,
}

/// The patterns of one `.dockerignore` (or `.tiltignore`).
#[derive(Clone, Debug, Default)]
pub(crate) struct DockerIgnore {
    patterns: Vec<Pattern>,
}

/// A line that is not a valid pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BadLine {
    /// From 1.
    pub(crate) line: usize,
    /// The line, trimmed.
    pub(crate) text: String,
    pub(crate) reason: String,
}

impl std::fmt::Display for BadLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {:?}: {}", self.line, self.text, self.reason)
    }
}

/// Go's `filepath.Clean` (`/` separators): one separator between
/// names, no `.`, `..` folded (kept at the start of a relative path,
/// dropped at the root), no trailing separator; `.` when nothing is left.
fn go_clean(p: &str) -> String {
    let rooted = p.starts_with('/');
    let mut out: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => match out.last() {
                Some(&l) if l != ".." => {
                    out.pop();
                }
                _ if rooted => {}
                _ => out.push(".."),
            },
            s => out.push(s),
        }
    }
    let joined = out.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

/// Whether `\` escapes the next character (as in Go's `filepath.Match`:
/// not on Windows, where it is the separator).
const ESCAPES: bool = !cfg!(windows);

/// One character of a class, escapes undone; an error where Go's
/// `filepath.Match` finds the class malformed.
fn class_char(chars: &[char], i: &mut usize) -> Result<char, String> {
    let bad = || Err("malformed character class".to_string());
    match chars.get(*i) {
        None | Some('-') | Some(']') => return bad(),
        Some('\\') if ESCAPES => *i += 1,
        _ => {}
    }
    let Some(&c) = chars.get(*i) else {
        return bad();
    };
    *i += 1;
    if *i >= chars.len() {
        return bad(); // unclosed
    }
    Ok(c)
}

fn class(chars: &[char], i: &mut usize) -> Result<Tok, String> {
    let negated = chars.get(*i) == Some(&'^');
    if negated {
        *i += 1;
    }
    let mut ranges = Vec::new();
    loop {
        if chars.get(*i) == Some(&']') && !ranges.is_empty() {
            *i += 1;
            return Ok(Tok::Class { negated, ranges });
        }
        let lo = class_char(chars, i)?;
        let hi = if chars.get(*i) == Some(&'-') {
            *i += 1;
            class_char(chars, i)?
        } else {
            lo
        };
        if lo > hi {
            // moby accepts it, then fails at the first match.
            return Err(format!("character range {lo}-{hi} is out of order"));
        }
        ranges.push((lo, hi));
    }
}

/// Compiles a cleaned pattern (no `!`).
fn compile(p: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = p.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        match c {
            '*' if chars.get(i) == Some(&'*') => {
                i += 1;
                if chars.get(i) == Some(&'/') {
                    i += 1;
                }
                toks.push(if i == chars.len() {
                    Tok::Any
                } else {
                    Tok::AnyDirs
                });
            }
            '*' => toks.push(Tok::Star),
            '?' => toks.push(Tok::Quest),
            '[' => toks.push(class(&chars, &mut i)?),
            '\\' if ESCAPES => match chars.get(i) {
                Some(&e) => {
                    i += 1;
                    toks.push(Tok::Lit(e));
                }
                None => return Err("trailing `\\`".into()),
            },
            c => toks.push(Tok::Lit(c)),
        }
    }
    // moby: a leading `**` followed by plain characters only is a suffix
    // test (`**/foo` is `foo` at any depth, `**foo` any path ending `foo`).
    let plain = |t: &[Tok]| t.iter().all(|t| matches!(t, Tok::Lit(_)));
    let bare = p.starts_with("**") && !p[2..].contains('\\') && plain(&toks[1..]);
    if bare && !p[2..].starts_with('/') && toks.len() > 1 {
        toks[0] = Tok::Any;
    }
    Ok(toks)
}

impl Tok {
    /// Whether this single-character token takes `c`.
    fn takes(&self, c: char) -> bool {
        match self {
            Tok::Lit(l) => *l == c,
            Tok::Quest => c != '/',
            Tok::Class { negated, ranges } => {
                ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c)) != *negated
            }
            _ => false,
        }
    }
}

/// Whether `toks` match all of `s` (or, with `prefix`, some string that
/// starts with `s`). Dynamic programming over (token, position): linear
/// in each, whatever the pattern (no backtracking blow-up).
fn run(toks: &[Tok], s: &[char], prefix: bool) -> bool {
    let n = s.len();
    // `next[j]`: toks[i + 1..] matches s[j..]; `cur[j]`: toks[i..] does.
    let mut next: Vec<bool> = (0..=n).map(|j| j == n).collect();
    let mut cur = vec![false; n + 1];
    for t in toks.iter().rev() {
        // `inside`: `**/` has begun and its `/` is still to come.
        let mut inside = false;
        for j in (0..=n).rev() {
            cur[j] = if j == n {
                // Input used up: the rest matches the empty string, or
                // (prefix) some continuation.
                prefix || (matches!(t, Tok::Star | Tok::Any | Tok::AnyDirs) && next[n])
            } else {
                match t {
                    Tok::Star => next[j] || (s[j] != '/' && cur[j + 1]),
                    Tok::Any => next[j] || cur[j + 1],
                    Tok::AnyDirs => {
                        inside = (s[j] == '/' && next[j + 1]) || inside;
                        next[j] || inside || prefix
                    }
                    t => t.takes(s[j]) && next[j + 1],
                }
            };
        }
        std::mem::swap(&mut cur, &mut next);
    }
    next[0]
}

impl DockerIgnore {
    /// Reads a file's text: its patterns, and the lines that are not
    /// valid ones (skipped).
    pub(crate) fn parse(text: &str) -> (DockerIgnore, Vec<BadLine>) {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut patterns = Vec::new();
        let mut bad = Vec::new();
        for (n, raw) in text.lines().enumerate() {
            if raw.starts_with('#') {
                continue;
            }
            let line = raw.trim();
            if line.is_empty() {
                continue;
            }
            let (exception, rest) = match line.strip_prefix('!') {
                Some(r) => (true, r.trim()),
                None => (false, line),
            };
            let fail = |reason: &str| BadLine {
                line: n + 1,
                text: line.to_owned(),
                reason: reason.to_owned(),
            };
            if rest.is_empty() {
                bad.push(fail("an exception (`!`) with no pattern"));
                continue;
            }
            let rest = if cfg!(windows) {
                rest.replace('\\', "/")
            } else {
                rest.to_owned()
            };
            let cleaned = go_clean(&rest);
            let cleaned = match cleaned.strip_prefix('/') {
                Some(r) if !r.is_empty() => r.to_owned(),
                _ => cleaned,
            };
            match compile(&cleaned) {
                Ok(toks) => patterns.push(Pattern { exception, toks }),
                Err(reason) => bad.push(fail(&reason)),
            }
        }
        (DockerIgnore { patterns }, bad)
    }

    /// Docker's verdict on `rel` (components, from the file's directory)
    /// if some pattern names `rel` itself; `None` if none does (then the
    /// verdict is its parent directory's: Docker's own rule).
    pub(crate) fn verdict(&self, rel: &[&str]) -> Option<bool> {
        if rel.is_empty() {
            return None; // the context itself is never excluded
        }
        let full: Vec<char> = rel.join("/").chars().collect();
        if !self.patterns.iter().any(|p| run(&p.toks, &full, false)) {
            return None;
        }
        // Where each parent directory's path ends in `full`.
        let mut ends = Vec::with_capacity(rel.len());
        let mut at = 0;
        for c in &rel[..rel.len() - 1] {
            at += c.chars().count();
            ends.push(at);
            at += 1;
        }
        let mut excluded = false;
        for p in &self.patterns {
            if p.exception != excluded {
                continue; // it could not change anything
            }
            let hit =
                run(&p.toks, &full, false) || ends.iter().any(|&e| run(&p.toks, &full[..e], false));
            if hit {
                excluded = !p.exception;
            }
        }
        Some(excluded)
    }

    /// Whether some exception could name a path strictly below directory
    /// `rel` (then an excluded `rel` must still be read).
    pub(crate) fn could_reinclude_below(&self, rel: &[&str]) -> bool {
        let mut dir: Vec<char> = rel.join("/").chars().collect();
        if !dir.is_empty() {
            dir.push('/');
        }
        self.patterns
            .iter()
            .any(|p| p.exception && run(&p.toks, &dir, true))
    }
}

#[cfg(test)]
#[path = "docker_tests.rs"]
mod tests;
