//! The matcher's table of cases and unit tests (kept apart from
//! `mod.rs` only for its length).
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
        IgnoreRule::new("/r/sub", ["ok", "a[z-a", "b"]),
    ];
    match Matcher::new("s", &rules, &["/r".into()], true, true) {
        Err(Error::InvalidPattern {
            pattern,
            spec,
            rule,
            base,
            ..
        }) => {
            assert_eq!(pattern, "a[z-a");
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
    let sb = |p: &str, b: &str| strictly_below(Path::new(p), Path::new(b)).map(Path::to_path_buf);
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
    assert!(
        m.set_file(
            Path::new("/r"),
            IgnoreFile::Gitignore,
            Some("*.log\ntarget/\n")
        )
        .changed
    );
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
    assert!(
        m.set_file(Path::new("/r"), IgnoreFile::Gitignore, None)
            .changed
    );
    assert!(!ig(&m, "/r/target/debug/x", false));
    let copy = m.clone();
    assert!(!ig(&copy, "/r/a.log", false));
}

#[test]
fn a_dockerignore_is_anchored_and_its_exceptions_keep_directories() {
    let mut m = rules(&[]);
    let set = m.set_file(
        Path::new("/r"),
        IgnoreFile::Docker,
        Some("build\n!build/keep\n*.log\n[oops\n"),
    );
    assert_eq!(set.bad, ["line 4: \"[oops\": malformed character class"]);
    assert!(ig(&m, "/r/build", true) && ig(&m, "/r/build/x/y", false));
    assert!(!ig(&m, "/r/build/keep", true) && !ig(&m, "/r/build/keep/f", false));
    assert!(ig(&m, "/r/a.log", false));
    assert!(!ig(&m, "/r/sub/a.log", false), "anchored: not a deeper one");
    assert!(!ig(&m, "/r/sub/build", true));
    assert!(!m.prunes(Path::new("/r/build")), "build/keep is below");
    assert!(m.prunes(Path::new("/r/build/other")));
    // With git's rules beside it: at one directory an ignore beats a
    // re-include, whichever file says it.
    m.set_file(Path::new("/r"), IgnoreFile::Gitignore, Some("keep\n"));
    assert!(ig(&m, "/r/build/keep", true));
    assert!(ig(&m, "/r/sub/keep", false), "git's pattern, at any depth");
}

#[test]
fn only_some_files_and_never_vcs_directories() {
    // Paths absolute on every platform: a spec refuses relative ones.
    use crate::test_paths::abs;
    let ig = |m: &Matcher, p: &str, dir| m.is_ignored(&abs(p), dir);
    let spec = crate::WatchSpec::new([abs("/r")])
        .only(["*.tgz"])
        .normalized("c")
        .unwrap();
    let m = spec.matcher("c").unwrap();
    assert!(!ig(&m, "/r/org/app-1.0.tgz", false));
    assert!(ig(&m, "/r/org/README.md", false));
    assert!(ig(&m, "/r/org", true), "directories are not reported");
    assert!(!m.prunes(&abs("/r/org")), "but watched: a match may appear");
    assert!(m.prunes(&abs("/r/.git")), "not .git/");
    // A rule naming .git/ itself brings it back.
    let m = rules(&[IgnoreRule::new("/r", ["*", "!*.tgz", "!.git/"])]);
    assert!(!m.prunes(Path::new("/r/.git")));
}

/// Asking about an entry (split once, built-in verdicts shared between
/// matchers) answers as asking about its path, for every kind of matcher.
#[test]
fn an_entry_is_judged_as_its_path() {
    let matchers = [
        Matcher::new("a", &[], &["/r".into()], true, true).unwrap(),
        Matcher::new("b", &[], &["/r".into()], false, false).unwrap(),
        Matcher::new("c", &[], &["/r".into()], false, true).unwrap(),
        matcher(&["*.log", "gen/", "!gen/keep/", "/top.txt"]),
        rules(&[
            IgnoreRule::new("/r/sub", ["*"]),
            IgnoreRule::new("/r/sub", ["!*.rs"]),
        ]),
    ];
    let paths = [
        "/r/a.txt",
        "/r/a.swp",
        "/r/.git",
        "/r/x/.git",
        "/r/b.log",
        "/r/gen/x",
        "/r/gen/keep/y",
        "/r/top.txt",
        "/r/x/top.txt",
        "/r/sub/m.rs",
        "/r/sub/m.c",
        "/r",
        "/other/a.swp",
        "/r/4913",
    ];
    for p in paths {
        let path = Path::new(p);
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            continue;
        };
        // One entry asked of every matcher in turn, as routing does.
        let entry = Entry::new(path, parent, name);
        for (i, m) in matchers.iter().enumerate() {
            for dir in [false, true] {
                assert_eq!(
                    m.is_entry_ignored(&entry, dir),
                    m.is_ignored(path, dir),
                    "matcher {i}, {p}, dir {dir}"
                );
            }
        }
    }
}

/// Found by the `ignore_vs_git` fuzz target: git's matcher matches nothing
/// with a pattern whose `[` no `]` closes (`**[`), where the `ignore`
/// crate took the `[` literally (and ignored a file named `baa[`). A rule
/// refuses such a pattern, saying why; a closed or escaped one is kept.
#[test]
fn a_pattern_with_an_unclosed_class_is_refused_as_git_matches_nothing_with_it() {
    for p in ["**[", "a[b", "[!", "[]", "[!]", "[[:alpha:]", "x\\[[a"] {
        let e = Matcher::new(
            "t",
            &[IgnoreRule::new("/r", [p])],
            &["/r".into()],
            false,
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("no `]` closes"), "{p}: {e}");
    }
    for p in ["a\\[", "[]]", "[!]]", "[[:alpha:]]", "[a]b", "\\[", "[\\]]"] {
        assert_ne!(
            rewrite(p),
            Line::Nothing(Why::UnclosedClass),
            "{p} is closed"
        );
    }
    let m = matcher(&["[]]", "a\\["]);
    assert!(ig(&m, "/r/]", false) && ig(&m, "/r/a[", false));
}
