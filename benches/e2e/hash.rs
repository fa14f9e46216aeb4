//! `bench hash`: what `WatchOptions::skip_same_content` costs (issue 21,
//! item 3). A spec that compares contents reads every file it sees when
//! it starts (and each changed file as its batch closes): its start-up,
//! over the same spec's without the option, per file and per MB, beside
//! the floor of reading the same bytes (`std::fs::read` of every file, one
//! thread), on two trees: many small files, and a few large ones.
//!
//! ```sh
//! cargo bench --bench e2e -- hash
//! ```

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use specwatch::{Manager, WatchSpec};

use crate::{median, ms};

const RUNS: usize = 5;

/// `dirs` directories of `files` files of `size` bytes (distinct contents);
/// their paths.
fn tree(root: &Path, dirs: usize, files: usize, size: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut block = vec![0u8; size];
    for d in 0..dirs {
        let dir = root.join(format!("d{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..files {
            let p = dir.join(format!("f{f}.bin"));
            for (i, b) in block.iter_mut().enumerate() {
                *b = (i as u8)
                    .wrapping_mul(31)
                    .wrapping_add((d * files + f) as u8);
            }
            std::fs::write(&p, &block).unwrap();
            out.push(p);
        }
    }
    out
}

/// From `apply` to `Watching`, with or without comparing contents.
fn start(root: &Path, compare: bool) -> Duration {
    let m = Manager::new().unwrap();
    let t = Instant::now();
    m.apply("h", WatchSpec::new([root]).skip_same_content(compare))
        .unwrap();
    m.wait_watching("h", Duration::from_secs(300)).unwrap();
    t.elapsed()
}

/// Reads every byte of `files` (the floor: what hashing must read).
fn read_all(files: &[PathBuf]) -> Duration {
    let t = Instant::now();
    let mut n = 0usize;
    for f in files {
        n += std::fs::read(f).unwrap().len();
    }
    assert!(n > 0);
    t.elapsed()
}

pub fn hash() {
    println!(
        "| {:<44} | {:>10} | {:>10} | {:>12} | {:>12} | {:>12} |",
        "tree (files in the page cache)",
        "plain ms",
        "hashing ms",
        "extra / file",
        "extra / MB",
        "floor / MB"
    );
    println!(
        "|{:-<46}|{:->12}|{:->12}|{:->14}|{:->14}|{:->14}|",
        "", "", "", "", "", ""
    );
    for (dirs, files, size) in [(100, 100, 1024), (4, 5, 16 << 20)] {
        let d = tempfile::tempdir().unwrap();
        let paths = tree(d.path(), dirs, files, size);
        let n = paths.len();
        let mb = (n * size) as f64 / (1 << 20) as f64;
        read_all(&paths); // (into the page cache)
        let (mut plain, mut hashing, mut floor) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..RUNS {
            plain.push(start(d.path(), false));
            hashing.push(start(d.path(), true));
            floor.push(read_all(&paths));
        }
        let (p, h, f) = (median(plain), median(hashing), median(floor));
        let extra = ms(h).max(ms(p)) - ms(p);
        println!(
            "| {:<44} | {:>10.1} | {:>10.1} | {:>9.1} µs | {:>9.2} ms | {:>9.2} ms |",
            format!("{n} files of {} KiB ({mb:.0} MB)", size >> 10),
            ms(p),
            ms(h),
            extra * 1000.0 / n as f64,
            extra / mb,
            ms(f) / mb,
        );
    }
}
