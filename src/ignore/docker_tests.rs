//! Docker's semantics, table-driven. `docker` is not installed where these
//! were written, so the cases are those of moby's own tests, reproduced:
//! `patternmatcher_test.go` (`TestMatches`'s single- and multi-pattern
//! tables, run there through `MatchesOrParentMatches`; `matchTests`, Go's
//! `filepath.Match` cases, malformed ones included) and
//! `ignorefile/ignorefile_test.go` (`TestReadAll`), at
//! github.com/moby/patternmatcher. Their texts that end in `/` or are `/`
//! (a path with an empty name) are left out: a watched path never is one.

use super::*;

/// Docker's answer for `path` (relative, `/`-separated): the verdict of
/// the deepest of the path and its parents that a pattern names, as the
/// matcher that holds the file asks it.
fn excluded(d: &DockerIgnore, path: &str) -> bool {
    let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    (1..=comps.len())
        .rev()
        .find_map(|k| d.verdict(&comps[..k]))
        .unwrap_or(false)
}

fn file(lines: &[&str]) -> DockerIgnore {
    let (d, bad) = DockerIgnore::parse(&lines.join("\n"));
    assert!(bad.is_empty(), "{lines:?}: {bad:?}");
    d
}

/// moby `TestMatches`, `tests` (one pattern each).
const ONE: &[(&str, &str, bool)] = &[
    ("**", "file", true),
    ("**/", "file", true),
    ("**", "dir/file", true),
    ("**/", "dir/file", true),
    ("**", "dir/file/", true),
    ("**/**", "dir/file", true),
    ("dir/**", "dir/file", true),
    ("dir/**", "dir/dir2/file", true),
    ("**/dir", "dir", true),
    ("**/dir", "dir/file", true),
    ("**/dir2/*", "dir/dir2/file", true),
    ("**/dir2/**", "dir/dir2/dir3/file", true),
    ("**file", "file", true),
    ("**file", "dir/file", true),
    ("**/file", "dir/file", true),
    ("**file", "dir/dir/file", true),
    ("**/file", "dir/dir/file", true),
    ("**/file*", "dir/dir/file", true),
    ("**/file*", "dir/dir/file.txt", true),
    ("**/file*txt", "dir/dir/file.txt", true),
    ("**/file*.txt", "dir/dir/file.txt", true),
    ("**/file*.txt*", "dir/dir/file.txt", true),
    ("**/**/*.txt", "dir/dir/file.txt", true),
    ("**/**/*.txt2", "dir/dir/file.txt", false),
    ("**/*.txt", "file.txt", true),
    ("**/**/*.txt", "file.txt", true),
    ("a**/*.txt", "a/file.txt", true),
    ("a**/*.txt", "a/dir/file.txt", true),
    ("a**/*.txt", "a/dir/dir/file.txt", true),
    ("a/*.txt", "a/dir/file.txt", false),
    ("a/*.txt", "a/file.txt", true),
    ("a/*.txt**", "a/file.txt", true),
    ("a[b-d]e", "ae", false),
    ("a[b-d]e", "ace", true),
    ("a[b-d]e", "aae", false),
    ("a[^b-d]e", "aze", true),
    (".*", ".foo", true),
    (".*", "foo", false),
    ("abc.def", "abcdef", false),
    ("abc.def", "abc.def", true),
    ("abc.def", "abcZdef", false),
    ("abc?def", "abcZdef", true),
    ("abc?def", "abcdef", false),
    ("**/foo/bar", "foo/bar", true),
    ("**/foo/bar", "dir/foo/bar", true),
    ("**/foo/bar", "dir/dir2/foo/bar", true),
    ("abc/**", "abc", false),
    ("abc/**", "abc/def", true),
    ("abc/**", "abc/def/ghi", true),
    ("**/.foo", ".foo", true),
    ("**/.foo", "bar.foo", false),
    ("a(b)c/def", "a(b)c/def", true),
    ("a(b)c/def", "a(b)c/xyz", false),
    ("a.|)$(}+{bc", "a.|)$(}+{bc", true),
    (
        "dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl",
        "dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl",
        true,
    ),
    (
        "dist/*.whl",
        "dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl",
        true,
    ),
    // Go's `filepath.Match` cases (moby's `matchTests`), valid ones.
    ("abc", "abc", true),
    ("*", "abc", true),
    ("*c", "abc", true),
    ("a*", "a", true),
    ("a*", "abc", true),
    ("a*", "ab/c", true),
    ("a*/b", "abc/b", true),
    ("a*/b", "a/c/b", false),
    ("a*b*c*d*e*/f", "axbxcxdxe/f", true),
    ("a*b*c*d*e*/f", "axbxcxdxexxx/f", true),
    ("a*b*c*d*e*/f", "axbxcxdxe/xxx/f", false),
    ("a*b*c*d*e*/f", "axbxcxdxexxx/fff", false),
    ("a*b?c*x", "abxbbxdbxebxczzx", true),
    ("a*b?c*x", "abxbbxdbxebxczzy", false),
    ("ab[c]", "abc", true),
    ("ab[b-d]", "abc", true),
    ("ab[e-g]", "abc", false),
    ("ab[^c]", "abc", false),
    ("ab[^b-d]", "abc", false),
    ("ab[^e-g]", "abc", true),
    ("a?b", "a☺b", true),
    ("a[^a]b", "a☺b", true),
    ("a???b", "a☺b", false),
    ("a[^a][^a][^a]b", "a☺b", false),
    ("[a-ζ]*", "α", true),
    ("*[a-ζ]", "A", false),
    ("a?b", "a/b", false),
    ("a*b", "a/b", false),
    ("*x", "xxx", true),
];

/// The escapes of the tables above (Unix only: on Windows `\` is the
/// separator, as moby skips them there).
#[cfg(not(windows))]
const ESCAPED: &[(&str, &str, bool)] = &[
    ("a\\\\", "a\\", true),
    ("a\\*b", "a*b", true),
    ("a\\*b", "ab", false),
    ("[\\]a]", "]", true),
    ("[\\-]", "-", true),
    ("[x\\-]", "x", true),
    ("[x\\-]", "-", true),
    ("[x\\-]", "z", false),
    ("[\\-x]", "x", true),
    ("[\\-x]", "-", true),
    ("[\\-x]", "a", false),
];

#[test]
fn moby_single_pattern_cases() {
    #[cfg(not(windows))]
    let cases = [ONE, ESCAPED].concat();
    #[cfg(windows)]
    let cases = ONE.to_vec();
    let wrong: Vec<String> = cases
        .iter()
        .filter(|(p, t, want)| excluded(&file(&[p]), t) != *want)
        .map(|(p, t, want)| format!("pattern {p:?} on {t:?}: want {want}"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// moby `TestMatches`, `multiPatternTests`, and the single-purpose tests
/// above them (`TestPatternMatchesFolderExclusions` and the like).
#[test]
fn moby_multi_pattern_cases() {
    let cases: &[(&[&str], &str, bool)] = &[
        (&["**", "!util/docker/web"], "util/docker/web/foo", false),
        (
            &["**", "!util/docker/web", "util/docker/web/foo"],
            "util/docker/web/foo",
            true,
        ),
        (
            &[
                "**",
                "!dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl",
            ],
            "dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl",
            false,
        ),
        (
            &["**", "!dist/*.whl"],
            "dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl",
            false,
        ),
        (&["*"], "fileutils.go", true),
        (&["*.go"], "fileutils.go", true),
        (&["!fileutils.go", "*.go"], "fileutils.go", true),
        (&["docs", "!docs/README.md"], "docs/README.md", false),
        (&["docs/", "!docs/README.md"], "docs/README.md", false),
        (&["docs/*", "!docs/README.md"], "docs/README.md", false),
        (&["*.go", "!fileutils.go"], "fileutils.go", false),
        (&[], "any/path/there", false),
    ];
    for (patterns, text, want) in cases {
        assert_eq!(
            excluded(&file(patterns), text),
            *want,
            "patterns {patterns:?} on {text:?}"
        );
    }
}

#[test]
fn malformed_lines_are_named_and_skipped() {
    // moby's `matchTests` with `ErrBadPattern`, `TestSingleExclamationError`,
    // and (its regression test for moby#52203) a range out of order,
    // which moby accepts at first and fails on at the first match.
    let mut bad = vec![
        "[]a]",
        "[-]",
        "[x-]",
        "[-x]",
        "[a-b-c]",
        "[",
        "[^",
        "[^bc",
        "a[",
        "!",
        "! ",
        "[Local-Only]/",
    ];
    if !cfg!(windows) {
        bad.push("\\");
    }
    for b in bad {
        let text = format!("ok\n{b}\n*.tmp");
        let (d, errs) = DockerIgnore::parse(&text);
        assert_eq!(errs.len(), 1, "{b:?}: {errs:?}");
        assert_eq!(errs[0].line, 2, "{b:?}");
        assert_eq!(errs[0].text, b.trim(), "{b:?}");
        assert!(
            excluded(&d, "ok") && excluded(&d, "a.tmp"),
            "{b:?}: the others stay"
        );
    }
    let (_, errs) = DockerIgnore::parse("x\n[z");
    assert_eq!(
        errs[0].to_string(),
        "line 2: \"[z\": malformed character class"
    );
}

/// moby `ignorefile` `TestReadAll`: comments, blank lines, a leading `/`
/// dropped (also after `!`), and Docker's cleaning.
#[test]
fn reading_a_file() {
    let content = "\u{feff}test1\n/test2\n/a/file/here\n\nlastfile\n# this is a comment\n! /inverted/abs/path\n  #not a comment\n./x/../y/\n";
    let (d, bad) = DockerIgnore::parse(content);
    assert!(bad.is_empty(), "{bad:?}");
    for (path, want) in [
        ("test1", true),
        ("test2", true),
        ("a/file/here", true),
        ("a/file/here/below", true),
        ("a/file", false),
        ("lastfile", true),
        ("# this is a comment", false),
        ("#not a comment", true),
        ("y", true),
        ("x", false),
        ("inverted/abs/path", false),
    ] {
        assert_eq!(excluded(&d, path), want, "{path}");
    }
}

/// What a path's own verdict is (`None`: its parent's), which the
/// matcher's "deepest match decides" walk relies on.
#[test]
fn a_verdict_is_given_only_where_a_pattern_names_the_path() {
    let d = file(&["build", "!build/keep"]);
    assert_eq!(d.verdict(&["build"]), Some(true));
    assert_eq!(d.verdict(&["build", "x"]), None, "build's own");
    assert_eq!(d.verdict(&["build", "keep"]), Some(false));
    assert_eq!(d.verdict(&["build", "keep", "x"]), None, "keep's own");
    assert_eq!(d.verdict(&["src"]), None);
    assert_eq!(d.verdict(&[]), None, "the context itself");
    // Anchored: `foo` is the top's only, never a deeper one.
    let d = file(&["foo", "*.log"]);
    assert!(excluded(&d, "foo/bar") && !excluded(&d, "sub/foo"));
    assert!(excluded(&d, "a.log") && !excluded(&d, "sub/a.log"));
}

#[test]
fn exceptions_keep_an_excluded_directory_read() {
    let d = file(&["build", "!build/keep/*.txt", "vendor", "!**/*.go", "tmp"]);
    let below = |dir: &str| {
        let comps: Vec<&str> = dir.split('/').collect();
        d.could_reinclude_below(&comps)
    };
    assert!(below("build"), "build/keep/*.txt");
    assert!(below("build/keep"));
    assert!(below("vendor"), "**/*.go reaches anywhere");
    let d = file(&["build", "!build/keep", "!*.md"]);
    let below = |dir: &str| {
        let comps: Vec<&str> = dir.split('/').collect();
        d.could_reinclude_below(&comps)
    };
    assert!(below("build"));
    assert!(!below("other"), "no exception reaches below other/");
    assert!(!below("build/other"), "nor below build/other/");
}

#[test]
fn go_clean_is_gos() {
    for (p, want) in [
        ("a//b/./c/../d/", "a/b/d"),
        ("/../a", "/a"),
        ("../a/..", ".."),
        ("./", "."),
        ("/", "/"),
        ("a/..", "."),
    ] {
        assert_eq!(go_clean(p), want, "{p}");
    }
}
