//! The architecture's rules, checked on the source (ARCHITECTURE.md):
//! no import cycle between the crate's top-level modules, the pure core
//! imports nothing that does I/O, OS vocabulary stays in `backend/`, only
//! the I/O layer touches the OS, and inside the engine owners never reach
//! steps.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source of `p` without its `#[cfg(test)] mod tests` (tests may
/// reach anywhere).
fn code(p: &Path) -> String {
    let s = std::fs::read_to_string(p).unwrap();
    match s.find("#[cfg(test)]\nmod tests") {
        Some(i) => s[..i].to_owned(),
        None => s,
    }
}

/// The folders that group one concept's modules (`src/ignore/`,
/// `src/batch/`, ...): each of their files is a unit of the layering of
/// its own (`batch::coalesce`; the folder's `mod.rs` is `batch`), so that
/// the rules below hold file by file inside them. Every other top-level
/// module (`engine/`, `backend/`, `fs/`, `index/`, `manager/`) is one unit.
const CONCEPTS: [&str; 5] = ["batch", "hold", "ignore", "spec", "state"];

/// The unit a file of `src/` belongs to (its path relative to `src/`).
fn unit(rel: &Path) -> String {
    let parts: Vec<String> = rel
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_owned()
        })
        .collect();
    match parts.as_slice() {
        [top, file] if CONCEPTS.contains(&top.as_str()) && file != "mod" => {
            format!("{top}::{file}")
        }
        [top, ..] => top.clone(),
        [] => unreachable!("a file has a name"),
    }
}

/// Unit -> the units its code names (`crate::x`, or `crate::x::y` for a
/// concept folder's module `y`).
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let top = unit(rel);
        // Test-only files are not part of the layering.
        if top == "lib"
            || top == "docs"
            || rel.ends_with("tests.rs")
            || rel.to_string_lossy().ends_with("_tests.rs")
            || rel.ends_with("fake.rs")
        {
            continue;
        }
        let text = code(&f);
        let deps = g.entry(top.clone()).or_default();
        for (i, _) in text.match_indices("crate::") {
            let word = |at: usize| -> String {
                text[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect()
            };
            let mut name = word(i + 7);
            if CONCEPTS.contains(&name.as_str()) && text[i + 7 + name.len()..].starts_with("::") {
                let child = word(i + 7 + name.len() + 2);
                if !child.is_empty() && src.join(&name).join(format!("{child}.rs")).exists() {
                    name = format!("{name}::{child}");
                }
            }
            if !name.is_empty() && name != top {
                deps.insert(name);
            }
        }
    }
    g
}

#[test]
fn top_level_modules_import_without_cycles() {
    let g = graph();
    // Depth-first search for a back edge.
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if done.contains(n) {
            return;
        }
        if let Some(i) = path.iter().position(|p| p == n) {
            panic!("import cycle: {} -> {n}", path[i..].join(" -> "));
        }
        path.push(n.to_owned());
        for m in g.get(n).into_iter().flatten() {
            visit(m, g, path, done);
        }
        path.pop();
        done.insert(n.to_owned());
    }
    let mut done = BTreeSet::new();
    for n in g.keys() {
        visit(n, &g, &mut Vec::new(), &mut done);
    }
    assert!(g.len() > 10, "the scan found the modules: {g:?}");
}

#[test]
fn the_pure_core_imports_nothing_with_io() {
    let g = graph();
    let io = [
        "backend", "fs", "engine", "manager", "hooks", "reads", "scanner",
    ];
    for pure in [
        "index",
        "ignore",
        "ignore::files",
        "ignore::git_pattern",
        "ignore::docker",
        "ignore::kinds",
        "batch",
        "batch::change",
        "batch::coalesce",
        "batch::content",
        "batch::event",
        "batch::fanout",
        "batch::journal",
        "hold",
        "hold::settle",
        "hold::write",
        "reconcile",
        "spec",
        "spec::options",
        "spec::choice",
        "spec::defaults",
        "spec::duration",
        "state::snapshot",
        "state::restore",
        "status",
        "stats",
        "ids",
        "error",
        "clock",
    ] {
        let deps = g.get(pure).unwrap_or_else(|| panic!("no module {pure}"));
        for d in io {
            assert!(!deps.contains(d), "{pure} imports {d}");
        }
    }
}

/// Each line of code (comments aside: docs may name what the OS does)
/// outside the files `exempt` names (paths relative to `src/`), that
/// contains one of `words`: "file:line: word". With `tests_too`, the files'
/// `#[cfg(test)] mod tests` are searched as well. Also returns how many
/// files were searched.
fn lines_naming(
    words: &[&str],
    exempt: impl Fn(&Path) -> bool,
    tests_too: bool,
) -> (Vec<String>, usize) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut found = Vec::new();
    let mut searched = 0;
    for f in files {
        if exempt(f.strip_prefix(&src).unwrap()) {
            continue;
        }
        searched += 1;
        let text = if tests_too {
            std::fs::read_to_string(&f).unwrap()
        } else {
            code(&f)
        };
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for w in words {
                if line.contains(w) {
                    found.push(format!("{}:{}: `{w}`", f.display(), n + 1));
                }
            }
        }
    }
    (found, searched)
}

#[test]
fn os_vocabulary_stays_in_the_backend() {
    let words = [
        "notify::",
        "inotify::",
        "EventMask",
        "WatchMask",
        "EventKind",
        "IN_CREATE",
        "IN_MODIFY",
        "IN_IGNORED",
        "IN_Q_OVERFLOW",
        "IN_MOVE",
        "IN_DELETE",
    ];
    let (found, searched) = lines_naming(&words, |f| f.starts_with("backend"), true);
    assert!(
        found.is_empty(),
        "outside src/backend/:\n{}",
        found.join("\n")
    );
    assert!(searched > 20, "the scan found the sources ({searched})");
}

/// Only the I/O layer (`src/backend/`, `src/fs/`) touches the OS: the
/// engine and everything above it reach the file system and the C
/// library through `fs`'s functions (ARCHITECTURE.md, "Layers").
#[test]
fn only_the_io_layer_touches_the_os() {
    let words = [
        "std::fs",
        "libc::",
        "OpenOptions",
        "File::open",
        "File::create",
        "read_dir(",
        "symlink_metadata(",
        ".metadata(",
        ".is_dir()",
        ".is_file()",
        ".exists()",
        "canonicalize(",
        "read_link(",
        "windows_sys::",
    ];
    // Test code may make the trees it watches.
    let exempt = |f: &Path| {
        f.starts_with("backend")
            || f.starts_with("fs")
            || f.starts_with("engine/tests")
            || f.ends_with("tests.rs")
    };
    let (found, searched) = lines_naming(&words, exempt, false);
    assert!(
        found.is_empty(),
        "outside the I/O layer (src/backend/, src/fs/): add a function to src/fs/ and call it\n{}",
        found.join("\n")
    );
    assert!(searched > 20, "the scan found the sources ({searched})");
}

/// The engine's files by role (ARCHITECTURE.md, "Who owns what"): owners
/// hold a fact and the methods on it; steps (`impl Engine`) read or change
/// several owners. Every file of `src/engine/` is one or the other, or
/// one of `ENGINE_OTHERS`.
const ENGINE_OWNERS: [&str; 16] = [
    "specs",
    "holds",
    "inbox",
    "contents",
    "watches",
    "poll",
    "rescan",
    "ignore_files",
    "publish",
    "recovery",
    "problems",
    "links",
    "mounts",
    "roots",
    "sync",
    "progress",
];
const ENGINE_STEPS: [&str; 24] = [
    "walk",
    "hashing",
    "holding",
    "restarting",
    "tree",
    "events",
    "modes",
    "polling",
    "rescanning",
    "restoring",
    "applying",
    "batching",
    "attaching",
    "following",
    "mounting",
    "ignoring",
    "publishing",
    "retrying",
    "rereading",
    "syncing",
    "watching",
    "forget",
    "check",
    "writing",
];
/// The loop (`mod.rs`, which owners reach only for `trace`), the tracing
/// macros, and the engine's tests.
const ENGINE_OTHERS: [&str; 3] = ["mod", "trace", "tests"];

/// The identifiers named right after `prefix` (`super::`, `engine::`) in
/// `text`, each with its byte offset: `super::walk::x` names `walk`,
/// `super::{walk, tree::Y}` names `walk` and `tree`, `super::*` names `*`.
fn named_after(text: &str, prefix: &str) -> Vec<(usize, String)> {
    let ident = |from: usize| -> String {
        text[from..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '*')
            .collect()
    };
    let mut out = Vec::new();
    for (i, _) in text.match_indices(prefix) {
        let after = i + prefix.len();
        if !text[after..].starts_with('{') {
            out.push((after, ident(after)));
            continue;
        }
        // A group: the first segment of each item at its top level.
        let mut depth = 0;
        let mut item_start = true;
        for (j, c) in text[after..].char_indices() {
            let at = after + j;
            match c {
                '{' => {
                    depth += 1;
                    item_start = depth == 1;
                }
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                ',' if depth == 1 => item_start = true,
                c if c.is_whitespace() => {}
                _ if item_start && depth == 1 => {
                    out.push((at, ident(at)));
                    item_start = false;
                }
                _ => {}
            }
        }
    }
    out
}

/// Inside the engine, steps call owners and owners never call steps
/// (ARCHITECTURE.md, "Who owns what"): an owner's file holds its state and
/// the methods on it, and no `impl Engine` (a method there could call any
/// step); nor does it name the engine or a step file's module (`super::walk`,
/// `crate::engine::polling`, `super::{events, ..}`, or `super::*`, which
/// names them all), so an owner cannot reach a step at all. Its tests may.
#[test]
fn engine_owners_hold_no_steps() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/engine");
    // Every file has its role: a new one must be placed above.
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let p = e.path();
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        assert!(
            ENGINE_OWNERS.contains(&name.as_str())
                || ENGINE_STEPS.contains(&name.as_str())
                || ENGINE_OTHERS.contains(&name.as_str()),
            "src/engine/{}: neither an owner nor a step: add it to ENGINE_OWNERS or \
             ENGINE_STEPS in tests/layers.rs",
            p.file_name().unwrap().to_string_lossy()
        );
    }
    let mut found = Vec::new();
    for owner in ENGINE_OWNERS {
        let f = dir.join(format!("{owner}.rs"));
        let shown = format!("src/engine/{owner}.rs");
        // Comment lines blanked (docs may name steps), lines kept in place.
        let text: String = code(&f)
            .lines()
            .map(|l| {
                if l.trim_start().starts_with("//") {
                    ""
                } else {
                    l
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let line_of = |at: usize| text[..at].matches('\n').count() + 1;
        for (n, line) in text.lines().enumerate() {
            if line.starts_with("impl Engine") {
                found.push(format!(
                    "{}:{}: `impl Engine` in an owner's file: its methods are steps \
                     (they may call any other step); move them to a step file, or make \
                     them methods of the owner taking what they need",
                    shown,
                    n + 1
                ));
            } else if line
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|w| w == "Engine")
            {
                found.push(format!(
                    "{}:{}: an owner names `Engine`, through which it could call \
                     any step: `{}`",
                    shown,
                    n + 1,
                    line.trim()
                ));
            }
        }
        for prefix in ["super::", "engine::"] {
            for (at, name) in named_after(&text, prefix) {
                if ENGINE_STEPS.contains(&name.as_str()) || name == "*" {
                    found.push(format!(
                        "{}:{}: an owner names the step module `{name}` (`{prefix}{name}`): \
                         owners never call steps; the step calls the owner instead",
                        shown,
                        line_of(at)
                    ));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "owners reach steps (ARCHITECTURE.md, \"Who owns what\"):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_owner_check_reads_imports() {
    let text = "use super::walk::Batches;\nuse super::{trace, events::X};\nuse super::*;\n\
                let x = crate::engine::polling::f();\nuse super::{\n    poll::Why,\n    tree,\n};";
    let mut names: Vec<String> = named_after(text, "super::")
        .into_iter()
        .chain(named_after(text, "engine::"))
        .map(|(_, n)| n)
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["*", "events", "poll", "polling", "trace", "tree", "walk"]
    );
}

/// What may still read or `stat` on the engine's thread, by file and
/// function (ARCHITECTURE.md, "What the engine's thread reads"): every
/// other call of an `fs::` function that touches the disk in
/// `src/engine/` is a file system the engine would wait on. The engine's
/// file-system work goes to the scanner's lanes instead (looks, content
/// hashes, ignore files outside the tree).
const ENGINE_READS: &[(&str, &str, &str)] = &[
    ("events.rs", "handle_name", "a hinted name's lstat"),
    ("events.rs", "check_top", "a watched directory's own event"),
    ("walk.rs", "list_dir", "the walk"),
    ("walk.rs", "push_children", "the walk (a link's target)"),
    ("attaching.rs", "attach_root", "the walk: a root attached"),
    (
        "attaching.rs",
        "reattach_partial_only",
        "the walk: a root attached",
    ),
    (
        "ignoring.rs",
        "read",
        "the walk: an ignore file it reaches (again on its event)",
    ),
    (
        "ignoring.rs",
        "load_ignore_files_above",
        "the walk: above a root",
    ),
    (
        "ignore_files.rs",
        "excludes_file",
        "the walk: git's excludes file",
    ),
    (
        "polling.rs",
        "sign",
        "the walk: a polled directory's first picture",
    ),
    (
        "polling.rs",
        "first_look",
        "the walk: a polled directory's first read",
    ),
    (
        "polling.rs",
        "poll_node",
        "a directory's last poll, back to its watch",
    ),
    (
        "following.rs",
        "revalidate_link",
        "a followed link looked at again",
    ),
    ("writing.rs", "note_write", "a held file"),
    ("writing.rs", "look_at_writes", "a held file"),
    ("batching.rs", "flush_batches", "a held batch's VCS lock"),
    (
        "batching.rs",
        "fill_meta",
        "a change's metadata at batch close",
    ),
    ("modes.rs", "decide_root", "a root's device, attached"),
    ("mounting.rs", "nearest_device", "a root's mount check"),
    ("mounting.rs", "track_mount", "a root's mount check"),
    (
        "publishing.rs",
        "facts",
        "a missing root's ancestors, for its status",
    ),
    ("rereading.rs", "report_if_changed", "an overflow's re-read"),
    ("rereading.rs", "rescan_node_with", "an overflow's re-read"),
    ("restoring.rs", "restore", "a restore's first batch"),
    ("restoring.rs", "compare_dir", "a restore's first batch"),
    ("syncing.rs", "start_barrier", "a barrier's cookies"),
    ("syncing.rs", "guard_cookies", "a barrier's cookies"),
    ("sync.rs", "remove_cookies", "a barrier's cookies"),
    ("sync.rs", "cookies_for", "a barrier's cookies"),
];

/// `fs::` functions that touch no disk (an error's kind, a name's shape,
/// giving memory back).
const FS_PURE: &[&str] = &["gone", "failing", "is_cookie", "trim_heap", "racy"];

/// The calls of `fs::` functions that touch the disk in `text` (a file's
/// code, comments and tests aside): line, enclosing function, function
/// called.
fn fs_calls(text: &str) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    let mut function = String::new();
    for (n, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with("//") {
            continue;
        }
        if let Some(at) = t.find("fn ")
            && t[..at]
                .split_whitespace()
                .all(|w| w == "pub" || w.starts_with("pub(") || w == "const")
        {
            function = t[at + 3..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
        }
        for (i, _) in line.match_indices("fs::") {
            let before = &line[..i];
            if before.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                || before.ends_with("std::")
            {
                continue; // another name, or `std::fs` (another test's)
            }
            let call: String = line[i + 4..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            if !call.is_empty() && !FS_PURE.contains(&call.as_str()) {
                out.push((n + 1, function.clone(), call));
            }
        }
    }
    out
}

/// The engine's thread never waits on a file system it need not: each
/// call of an `fs::` function that reads or `stat`s, in `src/engine/`
/// (tests aside), is in a function [`ENGINE_READS`] lists, and each entry
/// there still has one (the list stays the truth).
#[test]
fn the_engine_reads_the_disk_only_where_listed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/engine");
    let mut found = Vec::new();
    let mut used = BTreeSet::new();
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs") && !p.ends_with("tests.rs"))
        .collect();
    names.sort();
    assert!(names.len() > 30, "the scan found the engine's files");
    for f in names {
        let file = f.file_name().unwrap().to_string_lossy().into_owned();
        for (line, function, call) in fs_calls(&code(&f)) {
            match ENGINE_READS
                .iter()
                .find(|(f, func, _)| *f == file && *func == function)
            {
                Some(entry) => {
                    used.insert(*entry);
                }
                None => found.push(format!(
                    "src/engine/{file}:{line}: `fs::{call}` in `{function}`: a read or `stat` on \
                     the engine's thread that ARCHITECTURE.md does not list (hand it to the \
                     scanner's lanes, or list it there and in ENGINE_READS with why it is safe)"
                )),
            }
        }
    }
    for entry in ENGINE_READS {
        if !used.contains(entry) {
            found.push(format!(
                "ENGINE_READS lists src/engine/{} `{}` ({}), which reads nothing now: \
                 take it out (and out of ARCHITECTURE.md)",
                entry.0, entry.1, entry.2
            ));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_read_check_names_each_call_with_its_function_and_line() {
    let text = "impl Engine {\n    fn handle_name(&self) {\n        fs::lstat(p);\n    }\n\
                // fs::sig_of(p) in a comment\n    pub(super) fn other(&self) {\n        \
                let _ = crate::fs::sig_of(p);\n        std::fs::read(p);\n        \
                fs::gone(&e);\n    }\n}\n";
    assert_eq!(
        fs_calls(text),
        [
            (3, "handle_name".into(), "lstat".into()),
            (7, "other".into(), "sig_of".into())
        ]
    );
}
