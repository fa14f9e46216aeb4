//! The restart cache (`--cache-dir`): a restart takes from it the packages
//! that did not change while the server was down and reads the others; a
//! package changed meanwhile is served with its new digest, one removed is
//! gone; a cache that is corrupt, cut short or written under other options
//! is ignored, saying why. Each start says how it got its packages in one
//! line (`chart_index: start: ...`), which the tests read.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::charts::{Listing, chart, nv, package, sha256};
use testkit::process;

use crate::server;
use crate::server::Server;

/// How a start got its packages: its `chart_index: start:` line's counts.
#[derive(Debug, PartialEq)]
struct Start {
    indexed: usize,
    cached: usize,
    read: usize,
    hashed: usize,
    unreadable: usize,
    gone: usize,
}

/// The number just before `label` in `line`.
fn count_before(line: &str, label: &str) -> usize {
    let at = line
        .find(label)
        .unwrap_or_else(|| panic!("no {label:?} in {line:?}"));
    let digits: String = line[..at]
        .trim_end()
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.chars().rev().collect::<String>().parse().unwrap()
}

/// The server's start line, read.
fn start_of(s: &Server) -> Start {
    let line = s.wait_log("its start line", |l| l.starts_with("chart_index: start: "));
    Start {
        indexed: count_before(&line, " packages indexed"),
        cached: count_before(&line, " from the cache"),
        read: count_before(&line, " read ("),
        hashed: count_before(&line, " of them only hashed"),
        unreadable: count_before(&line, " unreadable"),
        gone: count_before(&line, " cached packages gone"),
    }
}

fn start(indexed: usize, cached: usize, read: usize, gone: usize) -> Start {
    Start {
        indexed,
        cached,
        read,
        hashed: 0,
        unreadable: 0,
        gone,
    }
}

/// Starts a server over `storage` with its cache in `cache`.
fn cached_server(label: &str, storage: &Path, cache: &Path) -> Server {
    Server::start(label, storage, &["--cache-dir", cache.to_str().unwrap()])
}

/// Stops `s` gracefully (which saves its cache) and checks it exited 0.
fn stop(mut s: Server) {
    s.ask_stop();
    let status = s.wait_exit();
    assert_eq!(status.code(), Some(0), "{}: {status:?}", s.label);
}

/// Writes `bytes` to `storage/rel`, making its directory.
fn put(storage: &Path, rel: &str, bytes: &[u8]) {
    let p = storage.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, bytes).unwrap();
}

/// Waits until the clock is more than 2 s past the last change of each of
/// `files` (its ctime and mtime): a package read from then on is taken
/// from the cache on its stamp alone at the next start (one read sooner
/// is hashed again then, since a write within the same tick of the file
/// system's clock would leave the stamp as it was). A wait for a known
/// time, not for something to happen.
fn wait_settled(files: &[&Path]) {
    let newest = files
        .iter()
        .map(|f| {
            let m = fs::symlink_metadata(f).unwrap();
            let ctime = UNIX_EPOCH + Duration::new(m.ctime() as u64, m.ctime_nsec() as u32);
            ctime.max(m.modified().unwrap())
        })
        .max()
        .unwrap();
    let after = newest + Duration::from_millis(2_050);
    if let Ok(left) = after.duration_since(SystemTime::now()) {
        std::thread::sleep(left);
    }
}

/// `path`'s whole answer, which two servers over the same packages give
/// alike (each version's entry: every Chart.yaml field, created, digest,
/// URL).
fn api(s: &Server, path: &str) -> serde_json::Value {
    let r = s.get(path);
    assert_eq!(r.status, 200, "{}: GET {path}: {}", s.label, r.text());
    r.json()
}

#[test]
fn a_restart_reads_only_the_packages_changed_while_it_was_down() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    let cache = d.path().join("cache");
    let files = [
        ("a-1.0.0.tgz", chart("a", "1.0.0")),
        ("org/b-1.0.0.tgz", chart("b", "1.0.0")),
        ("org/c-1.0.0.tgz", chart("c", "1.0.0")),
        ("org/team/d-1.0.0.tgz", chart("d", "1.0.0")),
    ];
    for (rel, bytes) in &files {
        put(&storage, rel, bytes);
    }
    let paths: Vec<_> = files.iter().map(|(rel, _)| storage.join(rel)).collect();
    wait_settled(&paths.iter().map(|p| p.as_path()).collect::<Vec<_>>());

    // A first start: no cache yet, every package read.
    let s = cached_server("first", &storage, &cache);
    s.wait_log("no cache yet", |l| {
        l.starts_with("chart_index: cache: none at ") && l.ends_with(" yet: every package is read")
    });
    assert_eq!(start_of(&s), start(4, 0, 4, 0));
    let answers = |s: &Server| {
        [
            "/api/charts",
            "/api/charts/a/1.0.0",
            "/api/org/charts/b/1.0.0",
            "/api/org/charts/c/1.0.0",
            "/api/org/team/charts/d/1.0.0",
        ]
        .map(|p| api(s, p))
    };
    let first = answers(&s);
    stop(s);
    assert!(
        cache.join("chart_index.cache").is_file(),
        "saved at the latest at the stop"
    );

    // Nothing changed: every package from the cache, served alike.
    let s = cached_server("unchanged", &storage, &cache);
    assert_eq!(start_of(&s), start(4, 4, 0, 0));
    assert_eq!(answers(&s), first, "the cache's entries are what was read");
    stop(s);

    // While it is down: b rewritten in place (same inode, new bytes), c
    // removed, e added.
    let b2 = package(
        "b",
        "apiVersion: v2\nname: b\nversion: 1.0.0\ndescription: b, second edition\n",
    );
    put(&storage, "org/b-1.0.0.tgz", &b2);
    fs::remove_file(storage.join("org/c-1.0.0.tgz")).unwrap();
    let e = chart("e", "1.0.0");
    put(&storage, "e-1.0.0.tgz", &e);

    let s = cached_server("changed", &storage, &cache);
    assert_eq!(
        start_of(&s),
        start(4, 2, 2, 1),
        "a and d from the cache; b and e read; c gone"
    );
    let (_, org) = s.index("org");
    let org: Listing = org.unwrap();
    assert_eq!(org.len(), 1, "{org:?}");
    assert_eq!(org[&nv("b", "1.0.0")].digest, sha256(&b2), "b's new digest");
    assert_eq!(
        api(&s, "/api/org/charts/b/1.0.0")["description"],
        "b, second edition"
    );
    assert_eq!(s.get("/api/org/charts/c/1.0.0").status, 404, "c is gone");
    let (_, root) = s.index("");
    let root = root.unwrap();
    assert_eq!(root[&nv("e", "1.0.0")].digest, sha256(&e));
    assert_eq!(root[&nv("a", "1.0.0")].digest, sha256(&files[0].1));
    assert_eq!(
        api(&s, "/api/org/team/charts/d/1.0.0"),
        first[4],
        "d as it was"
    );
    stop(s);
}

#[test]
fn a_corrupt_or_cut_cache_is_ignored_saying_why() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    let cache = d.path().join("cache");
    let file = cache.join("chart_index.cache");
    put(&storage, "a-1.0.0.tgz", &chart("a", "1.0.0"));
    put(&storage, "org/b-1.0.0.tgz", &chart("b", "1.0.0"));
    let s = cached_server("saves", &storage, &cache);
    assert_eq!(start_of(&s), start(2, 0, 2, 0));
    stop(s);
    let good = fs::read(&file).unwrap();

    let mut flipped = good.clone();
    let at = good.len() - 10;
    flipped[at] ^= 0x01;
    let cases: [(&str, Vec<u8>, &str); 3] = [
        (
            "a bit changed",
            flipped,
            "the body's sha256 is not the header's: corrupt",
        ),
        (
            "cut short",
            good[..good.len() * 2 / 3].to_vec(),
            "cut short",
        ),
        (
            "not a cache",
            b"hello\n".to_vec(),
            "not a chart_index cache",
        ),
    ];
    // What a run killed while saving leaves.
    let leftover = cache.join("chart_index.cache.tmp-4242");
    for (what, bytes, says) in cases {
        fs::write(&file, bytes).unwrap();
        fs::write(&leftover, &good[..good.len() / 2]).unwrap();
        let s = cached_server(what, &storage, &cache);
        assert!(
            !leftover.exists(),
            "{what}: a leftover temporary file is removed"
        );
        let line = s.wait_log("the cache ignored", |l| {
            l.starts_with("chart_index: cache: ignored ")
        });
        assert!(
            line.contains(&*file.to_string_lossy()) && line.contains(says),
            "{what}: {line:?} should name the file and say {says:?}"
        );
        assert!(line.ends_with("; every package is read"), "{line}");
        assert_eq!(start_of(&s), start(2, 0, 2, 0), "{what}");
        let (_, org) = s.index("org");
        assert_eq!(
            org.unwrap()[&nv("b", "1.0.0")].digest,
            sha256(&chart_bytes(&storage, "org/b-1.0.0.tgz"))
        );
        let ignored = s
            .output()
            .iter()
            .filter(|l| l.starts_with("chart_index: cache: ignored"))
            .count();
        assert_eq!(ignored, 1, "{what}: one line says why");
        stop(s);
        // The stop saved a whole cache again.
        assert!(
            fs::read(&file)
                .unwrap()
                .starts_with(b"{\"format\":\"chart_index cache\""),
            "{what}: saved anew"
        );
    }
}

fn chart_bytes(storage: &Path, rel: &str) -> Vec<u8> {
    fs::read(storage.join(rel)).unwrap()
}

#[test]
fn a_cache_written_under_other_options_is_ignored() {
    let d = tempfile::tempdir().unwrap();
    let (one, two) = (d.path().join("one"), d.path().join("two"));
    let cache = d.path().join("cache");
    // The same key in both, other packages.
    let (a1, a2) = (
        chart("a", "1.0.0"),
        package(
            "a",
            "apiVersion: v2\nname: a\nversion: 1.0.0\ndescription: the other a\n",
        ),
    );
    put(&one, "a-1.0.0.tgz", &a1);
    put(&two, "a-1.0.0.tgz", &a2);
    let s = cached_server("one", &one, &cache);
    assert_eq!(start_of(&s), start(1, 0, 1, 0));
    stop(s);

    let s = cached_server("two", &two, &cache);
    let line = s.wait_log("the cache ignored", |l| {
        l.starts_with("chart_index: cache: ignored ")
    });
    let one_c = one.canonicalize().unwrap();
    assert!(
        line.contains("written under other options")
            && line.contains(&format!("storage {:?}", one_c.to_str().unwrap())),
        "{line}"
    );
    assert_eq!(start_of(&s), start(1, 0, 1, 0));
    let (_, root) = s.index("");
    assert_eq!(root.unwrap()[&nv("a", "1.0.0")].digest, sha256(&a2));
    stop(s);
}

#[test]
fn the_cache_may_not_be_inside_the_storage() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    fs::create_dir_all(&storage).unwrap();
    let mut cmd = server::command();
    cmd.arg("--storage")
        .arg(&storage)
        .args(["--listen", "127.0.0.1:0", "--cache-dir"])
        .arg(storage.join("org/.cache"));
    let out = process::output("cache inside", cmd);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("is inside the storage directory"), "{err}");
    assert!(out.stdout.is_empty(), "never listening");
    assert!(
        !storage.join("org").exists(),
        "nothing made in the storage directory"
    );
}
