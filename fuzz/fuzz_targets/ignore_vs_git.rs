//! Differential: our ignore rules against `git check-ignore` on the same
//! tree and patterns.
//!
//! The input is read as text over a small alphabet (`a b * ? ! / [ ] \ .
//! - : ^ { } ,`, space and newlines, plus a separator: enough for ranges,
//! `[:...:]`, braces and trailing spaces): pattern lines, then paths (a
//! trailing `/` makes a directory). The paths are created in a temporary
//! git repository (made once per process), the patterns written to its
//! `.gitignore`, and git's verdict on every path and each of its parents
//! (one `git check-ignore --no-index -v -n -z --stdin`) is compared with
//! the crate's, two ways:
//!
//! - as a `.gitignore` read by the `ignore_files` option, which promises
//!   git's semantics: a path is left out when it is ignored or a
//!   directory above it is pruned. Every disagreement is a bug.
//! - as an `IgnoreRule` with the same patterns: the same, except the one
//!   documented difference (`IgnoreRule`'s docs): the deepest match
//!   decides, so a `!` pattern re-includes below an ignored directory
//!   where git would not. That class is skipped; any other disagreement
//!   is a bug. A pattern the crate refuses (a typed error, e.g. `..` or
//!   an unclosed `[`) skips this half.
#![no_main]

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use specwatch::bench_api::Matcher;
use specwatch::{IgnoreRule, WatchSpec};

/// The alphabet; the byte after it (index 18) separates patterns from paths.
const ALPHABET: &[u8; 18] = b"ab*?!/[]\\.\n-:^{}, ";
const MAX_PATTERNS: usize = 8;
const MAX_PATTERN_LEN: usize = 16;
const MAX_PATHS: usize = 8;
const MAX_DEPTH: usize = 4;
const MAX_NAME: usize = 4;

struct Case {
    patterns: Vec<String>,
    /// Every node of the tree (paths and their parents), relative, with
    /// whether it is a directory; parents sort before their children.
    nodes: BTreeMap<String, bool>,
}

fn decode(data: &[u8]) -> Case {
    let text: Vec<Option<u8>> = data
        .iter()
        .map(|b| {
            ALPHABET
                .get(usize::from(*b) % (ALPHABET.len() + 1))
                .copied()
        })
        .collect();
    let split = text.iter().position(Option::is_none).unwrap_or(text.len());
    let to_string =
        |s: &[Option<u8>]| -> String { s.iter().flatten().map(|&b| b as char).collect() };
    let patterns: Vec<String> = to_string(&text[..split])
        .split('\n')
        .take(MAX_PATTERNS)
        .map(|l| l.chars().take(MAX_PATTERN_LEN).collect())
        .collect();
    let rest = if split < text.len() {
        to_string(&text[split + 1..])
    } else {
        String::new()
    };
    let mut nodes: BTreeMap<String, bool> = BTreeMap::new();
    'paths: for line in rest.split('\n').take(MAX_PATHS) {
        let leaf_dir = line.ends_with('/');
        let names: Vec<String> = line
            .split('/')
            .filter(|n| !n.is_empty())
            .take(MAX_DEPTH)
            .map(|n| n.chars().take(MAX_NAME).collect())
            .collect();
        // A path starting with `:` is pathspec magic to git (which
        // check-ignore cannot be told to read literally): left out.
        if names.is_empty()
            || names.iter().any(|n| n == "." || n == "..")
            || names[0].starts_with(':')
        {
            continue;
        }
        let mut rel = String::new();
        for (i, n) in names.iter().enumerate() {
            if !rel.is_empty() {
                rel.push('/');
            }
            rel.push_str(n);
            let is_dir = i + 1 < names.len() || leaf_dir;
            match nodes.get(&rel) {
                // A file cannot hold entries: leave this path out (its
                // parents added so far are kept, as directories).
                Some(false) if is_dir => continue 'paths,
                Some(_) => {}
                None => {
                    nodes.insert(rel.clone(), is_dir);
                }
            }
        }
    }
    Case { patterns, nodes }
}

fn git(root: &Path) -> Command {
    let mut c = Command::new("git");
    c.arg("-C")
        .arg(root)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// The repository, made once per process.
fn repo() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("specwatch-fuzz-git-")
            .tempdir()
            .expect("a temporary directory")
            .keep();
        let root = dir.canonicalize().expect("canonical");
        let out = git(&root).args(["init", "-q"]).output().expect("git runs");
        assert!(out.status.success(), "git init: {out:?}");
        root
    })
}

/// Empties the tree (but `.git`), then writes `.gitignore` and the nodes.
fn build(root: &Path, case: &Case) {
    for e in std::fs::read_dir(root).expect("read root") {
        let e = e.expect("entry");
        if e.file_name() == ".git" {
            continue;
        }
        let p = e.path();
        if e.file_type().expect("type").is_dir() {
            std::fs::remove_dir_all(&p).expect("remove dir");
        } else {
            std::fs::remove_file(&p).expect("remove file");
        }
    }
    std::fs::write(root.join(".gitignore"), case.patterns.join("\n")).expect("write .gitignore");
    for (rel, &is_dir) in &case.nodes {
        let p = root.join(rel);
        if is_dir {
            std::fs::create_dir(&p).expect("create dir");
        } else {
            std::fs::write(&p, b"").expect("create file");
        }
    }
}

/// Git's verdict on every node: ignored or not.
fn git_verdicts(root: &Path, case: &Case) -> BTreeMap<String, (bool, String)> {
    let mut child = git(root)
        .args(["check-ignore", "--no-index", "-v", "-n", "-z", "--stdin"])
        .spawn()
        .expect("git check-ignore runs");
    let mut input = Vec::new();
    for rel in case.nodes.keys() {
        input.extend_from_slice(rel.as_bytes());
        input.push(0);
    }
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&input)
        .expect("write paths");
    let out = child.wait_with_output().expect("git check-ignore ends");
    assert!(
        out.status.code().is_some_and(|c| c == 0 || c == 1),
        "git check-ignore failed: {out:?}"
    );
    let fields: Vec<&[u8]> = out.stdout.split(|&b| b == 0).collect();
    let mut verdicts = BTreeMap::new();
    for f in fields.chunks_exact(4) {
        let pattern = String::from_utf8_lossy(f[2]).into_owned();
        let path = String::from_utf8_lossy(f[3]).into_owned();
        let ignored = !pattern.is_empty() && !pattern.starts_with('!');
        let source = format!(
            "{}:{}:{pattern}",
            String::from_utf8_lossy(f[0]),
            String::from_utf8_lossy(f[1])
        );
        verdicts.insert(path, (ignored, source));
    }
    assert_eq!(
        verdicts.len(),
        case.nodes.len(),
        "git answered every path: {out:?}"
    );
    verdicts
}

/// The directories strictly between `root` and `root/rel`.
fn parents<'a>(root: &'a Path, rel: &'a str) -> impl Iterator<Item = PathBuf> + 'a {
    let names: Vec<&str> = rel.split('/').collect();
    (1..names.len()).map(move |i| root.join(names[..i].join("/")))
}

fn spec(root: &Path) -> WatchSpec {
    WatchSpec::new([root])
        .editor_ignores(false)
        .vcs_ignores(false)
}

fuzz_target!(|data: &[u8]| {
    let case = decode(data);
    if case.nodes.is_empty() {
        return;
    }
    let root = repo();
    build(root, &case);
    let git = git_verdicts(root, &case);
    let report = |mode: &str, rel: &str, ours: bool| -> String {
        format!(
            "{mode}: {rel:?} (a {}): git says {} ({}), we say {}\npatterns: {:?}\ntree: {:?}",
            if case.nodes[rel] { "directory" } else { "file" },
            if git[rel].0 { "ignored" } else { "not ignored" },
            git[rel].1,
            if ours { "ignored" } else { "not ignored" },
            case.patterns,
            case.nodes,
        )
    };

    // `.gitignore` read by the `ignore_files` option: git's semantics.
    let mut files = Matcher::new(&spec(root)).expect("a spec without rules");
    files.set_gitignore(root, &case.patterns.join("\n"));
    for (rel, &is_dir) in &case.nodes {
        let p = root.join(rel);
        let ours = files.is_ignored(&p, is_dir) || parents(root, rel).any(|d| files.prunes(&d));
        assert_eq!(ours, git[rel].0, "{}", report("ignore file", rel, ours));
    }

    // `IgnoreRule`: the same but for the documented difference.
    let lines: Vec<String> = case.patterns.clone();
    if lines.iter().all(|l| l.is_empty()) {
        return; // no patterns: a rule without patterns ignores everything
    }
    let Ok(rule) = Matcher::new(&spec(root).ignore(IgnoreRule::new(root, lines))) else {
        return; // refused with a typed error (documented)
    };
    for (rel, &is_dir) in &case.nodes {
        let p = root.join(rel);
        let own = rule.is_ignored(&p, is_dir);
        let pruned = parents(root, rel).any(|d| rule.prunes(&d));
        // Pruning never hides a path that the rules keep.
        assert!(
            !pruned || own,
            "{}",
            report("rule (pruned above, kept)", rel, own)
        );
        if own == git[rel].0 {
            continue;
        }
        // The documented difference: re-included below a directory that
        // the rules ignore (git never looks below it).
        let reincluded =
            !own && git[rel].0 && parents(root, rel).any(|d| rule.is_ignored(&d, true));
        assert!(reincluded, "{}", report("rule", rel, own));
    }
});
