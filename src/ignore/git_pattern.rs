//! A gitignore line as git reads it, rewritten into lines that the
//! `ignore` crate's gitignore matcher reads the same way.
//!
//! The crate's matcher (globset underneath) differs from git's
//! (`dir.c`'s `match_basename` / `match_pathname` and `wildmatch.c`) on
//! edge patterns; the `ignore_vs_git` fuzz target found them. Git:
//!
//! - reads any run of two or more `*` as `**`: a recursive wildcard when
//!   it stands alone between `/`s (or the pattern's ends), else as `*`
//!   (`***/b` ignores `b`);
//! - compares a pattern's literal prefix (up to its first `*`, `?`, `[`
//!   or `\`) first and matches the rest apart, so a `**` right after that
//!   prefix counts as standing at the start (`b**/*` ignores `b`);
//! - takes `\` inside `[...]` as an escape (`[[.\.!]` is `[`, `.`, `!`),
//!   knows `[:alpha:]` and its kin, reads a reversed range as empty, and
//!   never lets a class match `/`;
//! - strips one trailing `/` whatever precedes it, so `*\/` ends in a `\`
//!   that escapes nothing and `/**//` in a `/` that no path ends in: both
//!   match nothing;
//! - takes `{`, `}` and `,` literally (globset: alternatives).
//!
//! [`rewrite`] parses a line as git does and writes each of its meanings
//! in a form with one reading in the crate: escapes for every character
//! the crate could take otherwise, runs of `*` as `*` or a `**` between
//! `/`s, classes as plain member lists, and a `**` after a literal prefix
//! as two patterns (the prefix followed by the rest, and by a directory).
//! A line git matches nothing with is returned as such, with why.
//!
//! Limits: git matches bytes, the crate characters: `?` and a negated
//! class match one byte of a non-ASCII name in git, a whole character in
//! the crate. A class with a non-ASCII member is left to the crate as
//! written.

/// What a gitignore line becomes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// Nothing to add: empty, a comment, or nothing left after `!` and
    /// `/` (git adds a pattern that matches nothing).
    Skip,
    /// The lines to add in its place, in the crate's syntax (one, or two
    /// for a `**` after a literal prefix), each with its `!` and `/`.
    Lines(Vec<String>),
    /// A pattern git matches no path with.
    Nothing(Why),
}

/// Why git matches nothing with a pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Why {
    /// A `[` that no `]` closes.
    UnclosedClass,
    /// A `\` at its end that escapes nothing (`*\/`: git strips the `/`).
    DanglingEscape,
    /// Its last character (after the trailing `/` git strips) is a `/`
    /// (`/**//`): no path ends in `/`.
    EndsInSlash,
    /// It asks for an empty name: `//`, or a `/` at its start besides
    /// the one that anchors it.
    EmptyName,
    /// A class that matches no character (`[/]`: no class matches `/`;
    /// a reversed range such as `z-a` adds nothing, but its `z` counts).
    EmptyClass,
    /// A `[:name:]` that git does not know.
    UnknownClass,
}

impl Why {
    /// Says why, for a user.
    pub(crate) fn text(self) -> &'static str {
        match self {
            Why::UnclosedClass => "a `[` that no `]` closes",
            Why::DanglingEscape => {
                "it ends in a `\\` that escapes nothing (git strips a trailing `/` even after `\\`)"
            }
            Why::EndsInSlash => "it ends in `//`, and no path ends in `/`",
            Why::EmptyName => "it asks for an empty name (`//`, or a second `/` at its start)",
            Why::EmptyClass => "a `[...]` of it matches no character (and none matches `/`)",
            Why::UnknownClass => "a `[:name:]` of it names no class git knows",
        }
    }
}

/// One element of a pattern as git reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    Lit(char),
    /// `/`, or `\/` (`escaped`).
    Slash {
        escaped: bool,
    },
    /// One `*`.
    Star,
    /// A run of two or more `*`.
    Stars,
    /// `?`.
    Any,
    /// `[...]`: its members (ASCII, `/` left out).
    Class {
        negated: bool,
        set: u128,
    },
}

/// One element of a rewritten pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Item {
    Lit(char),
    Slash,
    /// `*`: any name part, no `/`.
    Star,
    /// `**` between `/`s or at an end: any number of names.
    Rec,
    Any,
    Class {
        negated: bool,
        set: u128,
    },
}

/// Why a line is not rewritten.
#[derive(Clone, Copy)]
enum Parse {
    Nothing(Why),
    NonAscii,
}

/// Rewrites one gitignore line (see the module's docs).
pub(crate) fn rewrite(line: &str) -> Line {
    if line.is_empty() || line.starts_with('#') {
        return Line::Skip;
    }
    let line = trim_trailing_spaces(line);
    let (negated, body) = match line.strip_prefix('!') {
        Some(rest) => (true, rest),
        None => (false, line),
    };
    let (dir_only, body) = match body.strip_suffix('/') {
        Some(rest) => (true, rest),
        None => (false, body),
    };
    if body.is_empty() {
        return Line::Skip;
    }
    let toks = match tokens(body) {
        Ok(t) => t,
        Err(Parse::Nothing(why)) => return Line::Nothing(why),
        Err(Parse::NonAscii) => return Line::Lines(vec![line.to_owned()]),
    };
    let head = if negated { "!" } else { "" };
    let tail = if dir_only { "/" } else { "" };
    if !body.contains('/') {
        // Matched against a name: a run of `*` is one `*` (no `/` to cross).
        let items: Vec<Item> = toks.iter().map(|&t| item(t)).collect();
        return match render(&items, false) {
            Some(s) => Line::Lines(vec![format!("{head}{s}{tail}")]),
            None => Line::Nothing(Why::EmptyClass),
        };
    }
    let ends_in_slash = matches!(toks.last(), Some(Tok::Slash { .. }));
    // Anchored: one leading `/` says so; git's literal prefix is what
    // comes before the first `*`, `?`, `[` or `\`.
    let (body, toks) = match body.strip_prefix('/') {
        Some(rest) => (rest, &toks[1..]),
        None => (body, &toks[..]),
    };
    let prefix = body
        .find(['*', '?', '[', '\\'])
        .map_or(toks.len(), |i| body[..i].chars().count());
    let mut alternatives = Vec::new();
    walk(Vec::new(), toks, prefix, &mut alternatives);
    let mut lines = Vec::new();
    // A meaning that ends in `/` matches nothing; `P**/` (nothing after
    // the `/`) still has P itself: `/-**//` ignores the directory `-`.
    let mut why = if ends_in_slash {
        Why::EndsInSlash
    } else {
        Why::EmptyName
    };
    for a in alternatives {
        let empty_name = a.is_empty()
            || matches!(a.first(), Some(Item::Slash))
            || matches!(a.last(), Some(Item::Slash))
            || a.windows(2).any(|w| w == [Item::Slash, Item::Slash]);
        if empty_name {
            continue;
        }
        match render(&a, true) {
            Some(s) => lines.push(format!("{head}{s}{tail}")),
            None => why = Why::EmptyClass,
        }
    }
    if lines.is_empty() {
        Line::Nothing(why)
    } else {
        Line::Lines(lines)
    }
}

fn item(t: Tok) -> Item {
    match t {
        Tok::Lit(c) => Item::Lit(c),
        Tok::Slash { .. } => Item::Slash,
        Tok::Star | Tok::Stars => Item::Star,
        Tok::Any => Item::Any,
        Tok::Class { negated, set } => Item::Class { negated, set },
    }
}

/// The meanings of anchored `t` after `cur`, pushed to `out`: `t[start]`
/// is where git's matching starts (a `**` there counts as after a `/`).
fn walk(mut cur: Vec<Item>, t: &[Tok], start: usize, out: &mut Vec<Vec<Item>>) {
    let mut i = 0;
    while i < t.len() {
        if t[i] != Tok::Stars {
            cur.push(item(t[i]));
            i += 1;
            continue;
        }
        let after_slash = matches!(cur.last(), None | Some(Item::Slash));
        let next = t.get(i + 1).copied();
        let before_slash = matches!(next, None | Some(Tok::Slash { .. }));
        if !before_slash || !(after_slash || i == start) {
            // Not alone between `/`s: git reads it as `*`.
            cur.push(Item::Star);
        } else if after_slash {
            match next {
                // `**\/`: no shortcut to zero directories; at least one
                // name (the text here starts a name).
                Some(Tok::Slash { escaped: true }) => {
                    cur.extend([Item::Star, Item::Slash, Item::Rec]);
                }
                _ => cur.push(Item::Rec),
            }
        } else {
            // Right after a literal prefix that ends inside a name:
            // `P**` is P then anything; `P**/X` is P then X, or P, any
            // text, `/`, X (`P*/**/X`); `P**\/X` only the latter.
            if next.is_none() {
                let mut all = cur.clone();
                all.extend([Item::Star, Item::Slash, Item::Rec]);
                out.push(all);
                cur.push(Item::Star);
            } else {
                if next == Some(Tok::Slash { escaped: false }) {
                    walk(cur.clone(), &t[i + 2..], 0, out);
                }
                cur.extend([Item::Star, Item::Slash, Item::Rec]);
            }
        }
        i += 1;
    }
    out.push(cur);
}

/// A pattern in the crate's syntax; `None` when a class matches nothing.
fn render(items: &[Item], anchored: bool) -> Option<String> {
    let mut s = String::new();
    if anchored {
        s.push('/');
    }
    for it in items {
        match *it {
            Item::Lit(c) => literal(&mut s, c),
            Item::Slash => s.push('/'),
            Item::Star => s.push('*'),
            Item::Rec => s.push_str("**"),
            Item::Any => s.push('?'),
            Item::Class { negated, set } => class(&mut s, negated, set)?,
        }
    }
    Some(s)
}

/// `c` for the crate: escaped unless plain; `\` as a class (an escaped
/// `\` before a trailing `/` would lose its escape to the crate).
fn literal(s: &mut String, c: char) {
    match c {
        '\\' => s.push_str("[\\]"),
        '*' | '?' | '[' | ']' | '{' | '}' | ',' | '!' | '#' | ' ' => {
            s.push('\\');
            s.push(c);
        }
        _ => s.push(c),
    }
}

/// A class for the crate: `]` first, `[` and `-` last, never `!` or `^`
/// first; one member as a literal.
fn class(s: &mut String, negated: bool, set: u128) -> Option<()> {
    let has = |c: u8| set & (1u128 << c) != 0;
    let count = set.count_ones();
    if !negated && count == 0 {
        return None;
    }
    if negated && count == 0 {
        s.push('?');
        return Some(());
    }
    if !negated && count == 1 {
        literal(s, char::from(set.trailing_zeros() as u8));
        return Some(());
    }
    let special = |c: u8| matches!(c, b']' | b'!' | b'^' | b'[' | b'-');
    let mut members: Vec<u8> = Vec::new();
    if has(b']') {
        members.push(b']');
    }
    members.extend((1u8..128).filter(|&c| has(c) && !special(c)));
    for c in [b'!', b'^'] {
        if has(c) {
            members.push(c);
        }
    }
    let ends: Vec<u8> = [b'[', b'-'].into_iter().filter(|&c| has(c)).collect();
    if !negated && matches!(members.first(), Some(b'!' | b'^')) {
        match ends.first() {
            // `[` or `-` first is a member; `!` or `^` after it too.
            Some(&e) => {
                members.insert(0, e);
                members.extend(ends.iter().skip(1));
            }
            // Only `!` and `^`.
            None => {
                s.push_str("{\\!,\\^}");
                return Some(());
            }
        }
    } else {
        members.extend(ends);
    }
    s.push('[');
    if negated {
        s.push('!');
    }
    s.extend(members.iter().map(|&c| char::from(c)));
    s.push(']');
    Some(())
}

/// Git's `trim_trailing_spaces`: trailing spaces go unless escaped.
fn trim_trailing_spaces(line: &str) -> &str {
    let b = line.as_bytes();
    let mut last_space = None;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b' ' => {
                last_space.get_or_insert(i);
            }
            b'\\' => {
                i += 1;
                if i >= b.len() {
                    return line;
                }
                last_space = None;
            }
            _ => last_space = None,
        }
        i += 1;
    }
    &line[..last_space.unwrap_or(b.len())]
}

/// `body` as git's `wildmatch` reads it.
fn tokens(body: &str) -> Result<Vec<Tok>, Parse> {
    let c: Vec<char> = body.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        match c[i] {
            '\\' => {
                i += 1;
                match c.get(i) {
                    None => return Err(Parse::Nothing(Why::DanglingEscape)),
                    Some('/') => out.push(Tok::Slash { escaped: true }),
                    Some(&e) => out.push(Tok::Lit(e)),
                }
            }
            '*' => {
                let run = c[i..].iter().take_while(|&&x| x == '*').count();
                out.push(if run == 1 { Tok::Star } else { Tok::Stars });
                i += run - 1;
            }
            '?' => out.push(Tok::Any),
            '/' => out.push(Tok::Slash { escaped: false }),
            '[' => {
                let (t, end) = class_at(&c, i)?;
                out.push(t);
                i = end;
            }
            other => out.push(Tok::Lit(other)),
        }
        i += 1;
    }
    Ok(out)
}

/// The class opening at `c[open]`, as `wildmatch` reads it, and the
/// index of its closing `]`.
fn class_at(c: &[char], open: usize) -> Result<(Tok, usize), Parse> {
    const UNCLOSED: Parse = Parse::Nothing(Why::UnclosedClass);
    let ascii = |ch: char| -> Result<u8, Parse> {
        u8::try_from(ch)
            .ok()
            .filter(u8::is_ascii)
            .ok_or(Parse::NonAscii)
    };
    let mut p = open + 1;
    let negated = matches!(c.get(p), Some('!' | '^'));
    if negated {
        p += 1;
    }
    let mut set: u128 = 0;
    let mut prev: Option<u8> = None;
    loop {
        let Some(&ch) = c.get(p) else {
            return Err(UNCLOSED);
        };
        let mut this = None;
        if ch == '\\' {
            p += 1;
            let e = ascii(*c.get(p).ok_or(UNCLOSED)?)?;
            set |= 1 << e;
            this = Some(e);
        } else if ch == '-' && prev.is_some() && c.get(p + 1).is_some_and(|&n| n != ']') {
            p += 1;
            let mut hi = *c.get(p).ok_or(UNCLOSED)?;
            if hi == '\\' {
                p += 1;
                hi = *c.get(p).ok_or(UNCLOSED)?;
            }
            let (lo, hi) = (prev.unwrap_or(0), ascii(hi)?);
            for m in lo..=hi {
                set |= 1 << m;
            }
        } else if ch == '[' && c.get(p + 1) == Some(&':') {
            let s = p + 2;
            let Some(len) = c[s..].iter().position(|&x| x == ']') else {
                return Err(UNCLOSED);
            };
            let end = s + len;
            if len == 0 || c[end - 1] != ':' {
                // Not `[:name:]`: the `[` is a member, `:` comes next.
                set |= 1 << b'[';
                this = Some(b'[');
            } else {
                let name: String = c[s..end - 1].iter().collect();
                set |= posix_class(&name).ok_or(Parse::Nothing(Why::UnknownClass))?;
                p = end;
            }
        } else {
            let m = ascii(ch)?;
            set |= 1 << m;
            this = Some(m);
        }
        prev = this;
        p += 1;
        if c.get(p) == Some(&']') {
            break;
        }
    }
    set &= !(1u128 << b'/' | 1);
    Ok((Tok::Class { negated, set }, p))
}

/// The ASCII members of `[:name:]` (git's character classes).
fn posix_class(name: &str) -> Option<u128> {
    let test: fn(u8) -> bool = match name {
        "alnum" => |b| b.is_ascii_alphanumeric(),
        "alpha" => |b| b.is_ascii_alphabetic(),
        "blank" => |b| b == b' ' || b == b'\t',
        "cntrl" => |b| b.is_ascii_control(),
        "digit" => |b| b.is_ascii_digit(),
        "graph" => |b| b.is_ascii_graphic(),
        "lower" => |b| b.is_ascii_lowercase(),
        "print" => |b| b.is_ascii_graphic() || b == b' ',
        "punct" => |b| b.is_ascii_punctuation(),
        // Git's own `isspace`: no vertical tab, no form feed.
        "space" => |b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'),
        "upper" => |b| b.is_ascii_uppercase(),
        "xdigit" => |b| b.is_ascii_hexdigit(),
        _ => return None,
    };
    Some((0u8..128).filter(|&b| test(b)).fold(0, |s, b| s | 1 << b))
}

#[cfg(test)]
#[path = "git_pattern_tests.rs"]
mod tests;
