//! `rewrite`'s unit tests: what it writes, and what the `ignore` crate's
//! matcher then says, against what `git check-ignore --no-index` said.
use super::*;

use ::ignore::Match;
use ::ignore::gitignore::GitignoreBuilder;
use std::path::Path;

fn lines(line: &str) -> Vec<String> {
    match rewrite(line) {
        Line::Lines(l) => l,
        other => panic!("{line:?}: {other:?}"),
    }
}

/// Whether `line`, rewritten, ignores `path` (relative; `dir`: a
/// directory) in the crate's matcher, as the only line of a file.
fn ignores(line: &str, path: &str, dir: bool) -> bool {
    let mut b = GitignoreBuilder::new("/r");
    if let Line::Lines(ls) = rewrite(line) {
        for l in &ls {
            b.add_line(None, l)
                .unwrap_or_else(|e| panic!("{line:?} -> {l:?}: {e}"));
        }
    }
    let g = b.build().expect("builds");
    matches!(
        g.matched_path_or_any_parents(Path::new("/r").join(path), dir),
        Match::Ignore(_)
    )
}

/// Observed with git 2.47.3: a `.gitignore` holding `pattern` alone, the
/// paths created (`/` at the end: a directory), then `git check-ignore
/// --no-index -v -n PATH` for each (`true`: a pattern ignores it).
const GIT: &[(&str, &[(&str, bool)])] = &[
    (
        "***/b",
        &[("b", true), ("a/b", true), ("a/c/b", true), ("ab", false)],
    ),
    ("*\\/", &[("a/", false)]),
    (
        "[[.\\.!]",
        &[("\\", false), ("!", true), ("[", true), ("a", false)],
    ),
    (
        "b**/*",
        &[
            ("b", true),
            ("bx", true),
            ("bx/y", true),
            ("b/y", true),
            ("c", false),
            ("ab", false),
        ],
    ),
    ("/**//", &[("baa/", false), ("a/b/", false)]),
    ("{a,b}", &[("a", false), ("{a,b}", true)]),
    (
        "a/b**",
        &[
            ("a/b", true),
            ("a/bc", true),
            ("a/bc/d", true),
            ("b", false),
        ],
    ),
    (
        "b**//x",
        &[
            ("b/x", true),
            ("bq/x", false),
            ("bq/r/x", false),
            ("bx", false),
        ],
    ),
    (
        "a/**\\/b",
        &[("a/b", false), ("a/x/b", true), ("a/x/y/b", true)],
    ),
    ("**\\/b", &[("b", false), ("x/b", true), ("x/y/b", true)]),
    (
        "b**\\/x",
        &[
            ("b/x", true),
            ("bq/x", true),
            ("bq/r/x", true),
            ("bx", false),
        ],
    ),
    ("b**", &[("b", true), ("bx", true), ("a/bx", true)]),
    ("[z-a]", &[("z", true), ("a", false), ("-", false)]),
    ("[!z-a]", &[("z", false), ("a", true), ("-", true)]),
    ("a[/]b", &[("ab", false)]),
    ("a[!/]b", &[("axb", true)]),
    (
        "[[:alpha:]]x",
        &[("ax", true), ("1x", false), ("[x", false)],
    ),
    ("[[:]x", &[("d/[x", true), ("d/:x", true), ("d/x", false)]),
    ("a[[:b:]x", &[("a[x", false), ("a:x", false)]),
    ("[]-]", &[("]", true), ("-", true), ("a", false)]),
    ("[!!^]", &[("!", false), ("^", false), ("a", true)]),
    ("[!^]", &[("!", true), ("^", false), ("a", true)]),
    ("a\\\\/", &[("a\\/", true)]),
    ("\\/a", &[("a", false)]),
    ("a/\\/b", &[("a/b", false)]),
    ("a\\", &[("a", false), ("a\\", false)]),
    ("x\\ ", &[("x ", true), ("x", false)]),
    ("x  ", &[("x", true), ("x ", false)]),
    (
        "**/b**/c",
        &[("b/c", true), ("a/bx/c", true), ("bx/y/c", false)],
    ),
    ("a***b", &[("ab", true), ("axb", true), ("a/b", false)]),
    // Found by `ignore_vs_git` (a 600 s run): after a literal prefix,
    // `**/` may stand for nothing, so a pattern ending in `//` can match.
    ("/-**//", &[("-/", true), ("x-/", false)]),
    (
        "b**//",
        &[("b/", true), ("bx/", false), ("c/b/", false), ("b", false)],
    ),
    (
        "/b**/**/c",
        &[
            ("b/c", true),
            ("bx/y/c", true),
            ("b/y/z/c", true),
            ("bc", true),
        ],
    ),
];

#[test]
fn rewritten_lines_match_what_git_said() {
    for (pattern, paths) in GIT {
        for (path, git) in *paths {
            if cfg!(windows) && path.contains('\\') {
                // A name with a backslash cannot be on Windows, where it
                // separates names.
                continue;
            }
            let dir = path.ends_with('/');
            let p = path.trim_end_matches('/');
            assert_eq!(
                ignores(pattern, p, dir),
                *git,
                "{pattern:?} on {path:?}: git says {git}; rewritten {:?}",
                rewrite(pattern)
            );
        }
    }
}

/// The five differences `ignore_vs_git` found, as rewritten.
#[test]
fn the_five_found_by_the_fuzzer_are_rewritten() {
    assert_eq!(lines("***/b"), ["/**/b"]);
    assert_eq!(rewrite("*\\/"), Line::Nothing(Why::DanglingEscape));
    assert_eq!(lines("[[.\\.!]"), ["[.![]"]);
    assert_eq!(lines("b**/*"), ["/b*", "/b*/**/*"]);
    assert_eq!(rewrite("/**//"), Line::Nothing(Why::EndsInSlash));
    assert_eq!(lines("/-**//"), ["/-/"], "but a prefix's own name");
}

#[test]
fn plain_lines_keep_their_meaning() {
    for (line, want) in [
        ("*.log", "*.log"),
        ("!keep.log", "!keep.log"),
        ("target/", "target/"),
        ("/build", "/build"),
        ("doc/gen/", "/doc/gen/"),
        ("a/**/b", "/a/**/b"),
        ("**/b", "/**/b"),
        ("a/**", "/a/**"),
        ("\\#x", "\\#x"),
        ("\\!x", "\\!x"),
        ("{a,b}", "\\{a\\,b\\}"),
    ] {
        assert_eq!(lines(line), [want], "{line:?}");
    }
    for skip in ["", "# comment", "!", "/", "   ", "!/"] {
        assert_eq!(rewrite(skip), Line::Skip, "{skip:?}");
    }
}

#[test]
fn lines_git_matches_nothing_with_say_why() {
    for (line, why) in [
        ("a[b", Why::UnclosedClass),
        ("[a\\", Why::UnclosedClass),
        ("a\\", Why::DanglingEscape),
        ("a\\//", Why::EndsInSlash),
        ("//", Why::EndsInSlash),
        ("\\/a", Why::EmptyName),
        ("a//b", Why::EmptyName),
        ("a[/]b", Why::EmptyClass),
        ("[[:b:]]", Why::UnknownClass),
    ] {
        assert_eq!(rewrite(line), Line::Nothing(why), "{line:?}");
        assert!(!why.text().is_empty());
    }
}

#[test]
fn classes_are_written_so_the_crate_reads_their_members() {
    for (line, want) in [
        ("[]-]", "[]-]"),
        ("[!]-]", "[!]-]"),
        ("[!-]", "[!-]"),
        ("[!^]", "[!^]"),
        ("[\\!^]", "{\\!,\\^}"),
        ("[\\!-]", "[-!]"),
        ("[\\![]", "[[!]"),
        ("[a]", "a"),
        ("[\\\\]/", "[\\]/"),
    ] {
        assert_eq!(lines(line), [want], "{line:?}");
    }
    assert_eq!(lines("[!/]"), ["/?"], "a `/` anywhere anchors");
    assert_eq!(lines("[a-c-e]"), ["[abce-]"]);
    for (pattern, yes, no) in [
        ("[\\!^]", "^", "a"),
        ("[\\!-]", "-", "a"),
        ("[\\![]", "[", "a"),
        ("[[:digit:][:upper:]]", "7", "a"),
        ("[[:space:]]", " ", "a"),
    ] {
        assert!(ignores(pattern, yes, false), "{pattern:?} on {yes:?}");
        assert!(!ignores(pattern, no, false), "{pattern:?} on {no:?}");
    }
}

#[test]
fn a_class_with_a_non_ascii_member_is_left_as_written() {
    assert_eq!(lines("[é]x"), ["[é]x"]);
    assert_eq!(lines("é**"), ["é*"], "outside a class, only a literal");
}

#[test]
fn trailing_spaces_go_as_in_git() {
    assert_eq!(trim_trailing_spaces("a  "), "a");
    assert_eq!(trim_trailing_spaces("a\\  "), "a\\ ");
    assert_eq!(trim_trailing_spaces("a \\"), "a \\");
    assert_eq!(trim_trailing_spaces("a b"), "a b");
}
