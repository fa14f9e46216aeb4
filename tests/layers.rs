//! The architecture's rules, checked on the source (ARCHITECTURE.md):
//! no import cycle between the crate's top-level modules, the pure core
//! imports nothing that does I/O, and OS vocabulary stays in `backend/`.

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

/// Top-level module -> the top-level modules its code names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        // Test-only files are not part of the layering.
        if top == "lib" || rel.ends_with("tests.rs") || rel.ends_with("fake.rs") {
            continue;
        }
        let text = code(&f);
        let deps = g.entry(top.clone()).or_default();
        for (i, _) in text.match_indices("crate::") {
            let name: String = text[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
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
    let io = ["backend", "fs", "engine", "manager", "hooks"];
    for pure in [
        "index",
        "ignore",
        "coalesce",
        "reconcile",
        "fanout",
        "spec",
        "change",
        "event",
        "status",
        "stats",
        "ids",
        "error",
        "clock",
        "journal",
        "duration",
        "ignore_files",
        "choice",
    ] {
        let deps = g.get(pure).unwrap_or_else(|| panic!("no module {pure}"));
        for d in io {
            assert!(!deps.contains(d), "{pure} imports {d}");
        }
    }
}

#[test]
fn os_vocabulary_stays_in_the_backend() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
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
    for f in files {
        if f.starts_with(src.join("backend")) {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in text.lines().enumerate() {
            // Docs may name what the OS does; code may not.
            if line.trim_start().starts_with("//") {
                continue;
            }
            for w in words {
                assert!(
                    !line.contains(w),
                    "{}:{}: {w} outside src/backend/",
                    f.display(),
                    n + 1
                );
            }
        }
    }
}
