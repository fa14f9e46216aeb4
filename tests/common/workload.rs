//! The mirror workload: seeded random file operations on a tree (files
//! and directories created, written, appended to, renamed within, moved in
//! and out, removed, replaced by the other type; symlinks), shared by
//! `tests/mirror.rs` and the soak (`benches/soak.rs`).

use std::fs;
use std::path::{Path, PathBuf};

use specwatch::FileType;

use super::Mirror;

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

pub fn name(rng: &mut Rng) -> std::ffi::OsString {
    const NAMES: &[&str] = &["a", "b", "c", "d", "e", "f", "g", "h", "data.txt", "x.rs"];
    // A name that is not Unicode: bytes that are not UTF-8 on Unix, an
    // unpaired surrogate (not UTF-16) on Windows.
    #[cfg(unix)]
    if rng.chance(3) {
        use std::os::unix::ffi::OsStringExt;
        return std::ffi::OsString::from_vec(vec![b'n', 0xff, b'0' + rng.below(3) as u8]);
    }
    #[cfg(windows)]
    if rng.chance(3) {
        use std::os::windows::ffi::OsStringExt;
        let digit = u16::from(b'0') + rng.below(3) as u16;
        return std::ffi::OsString::from_wide(&[u16::from(b'n'), 0xD800, digit]);
    }
    NAMES[rng.below(NAMES.len())].into()
}

/// The tree as `follow_symlinks` on or off sees it, without the engine's
/// own sync cookies (a rescan's barrier may still have one in the root:
/// never reported, and no operation's to touch).
pub fn listing(root: &Path, follow: bool) -> Mirror {
    let mut m = if follow {
        Mirror::of_disk_following(root)
    } else {
        Mirror::of_disk(root)
    };
    m.0.retain(|p, _| {
        !p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(".specwatch-cookie-"))
    });
    m
}

/// Current entries below `root`, split by type (with `follow`, paths
/// through links too, so that operations also go through links).
pub fn entries(root: &Path, follow: bool) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let m = listing(root, follow);
    let mut dirs = vec![root.to_path_buf()];
    let mut files = Vec::new();
    for (p, t) in m.0 {
        match t {
            FileType::Dir => dirs.push(p),
            _ => files.push(p),
        }
    }
    (dirs, files)
}

/// Whether `a` and `b` are the same directory entry (one file under two
/// paths through links), not following a final symlink.
pub fn same_entry(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (fs::symlink_metadata(a), fs::symlink_metadata(b)) {
            (Ok(x), Ok(y)) => (x.dev(), x.ino()) == (y.dev(), y.ino()),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (a, b);
        false
    }
}

/// One random operation. Returns paths whose content it wrote, and logs
/// what it did into `log`.
pub fn step(
    rng: &mut Rng,
    root: &Path,
    outside: &Path,
    serial: &mut u64,
    log: &mut Vec<String>,
    follow: bool,
    skip_ops: &[usize],
) -> Vec<PathBuf> {
    let (dirs, files) = entries(root, follow);
    let pick_dir = |rng: &mut Rng| dirs[rng.below(dirs.len())].clone();
    let mut written = Vec::new();
    let write = |p: &Path, rng: &mut Rng, written: &mut Vec<PathBuf>| {
        if fs::write(p, vec![b'x'; 1 + rng.below(64)]).is_ok() {
            written.push(p.to_path_buf());
        }
    };
    *serial += 1;
    let op = rng.below(15);
    if skip_ops.contains(&op) {
        return written;
    }
    log.push(format!(
        "op {op} (dirs {}, files {})",
        dirs.len(),
        files.len()
    ));
    match op {
        0 | 1 => {
            let p = pick_dir(rng).join(name(rng));
            if !p.exists() {
                write(&p, rng, &mut written);
            }
        }
        2 | 3 if !files.is_empty() => {
            let p = &files[rng.below(files.len())];
            if fs::symlink_metadata(p).is_ok_and(|m| m.is_file()) {
                write(p, rng, &mut written);
            }
        }
        4 if !files.is_empty() => {
            let p = &files[rng.below(files.len())];
            if fs::symlink_metadata(p).is_ok_and(|m| m.is_file())
                && let Ok(f) = fs::OpenOptions::new().append(true).open(p) {
                    use std::io::Write;
                    let mut f = f;
                    if f.write_all(b"more").is_ok() {
                        written.push(p.clone());
                    }
                }
        }
        5 if !files.is_empty() => {
            // Rename a file within the tree, possibly over another file (an
            // atomic save when the target exists).
            let from = &files[rng.below(files.len())];
            let to = pick_dir(rng).join(name(rng));
            // Through followed links both paths may name one entry: the
            // rename then does nothing (POSIX), and nothing was written.
            let same = same_entry(from, &to);
            if to != *from && !to.is_dir() && fs::rename(from, &to).is_ok() {
                log.push(format!("  renamed {} -> {}", from.display(), to.display()));
                if !same {
                    written.push(to);
                }
            }
        }
        6
            // Rename a directory within the tree (not into itself).
            if dirs.len() > 1 => {
                let from = &dirs[1 + rng.below(dirs.len() - 1)];
                let to = pick_dir(rng).join(name(rng));
                if !to.starts_with(from) && !to.exists() && fs::rename(from, &to).is_ok() {
                    log.push(format!("  dir renamed {} -> {}", from.display(), to.display()));
                }
            }
        7 => {
            // Move a small tree in from outside.
            let src = outside.join(format!("in{serial}"));
            fs::create_dir_all(src.join("sub")).unwrap();
            fs::write(src.join("f"), "f").unwrap();
            fs::write(src.join("sub/g"), "g").unwrap();
            let to = pick_dir(rng).join(name(rng));
            if !to.exists() && fs::rename(&src, &to).is_ok() {
                log.push(format!("  moved in {}", to.display()));
            }
        }
        8 => {
            // Move something out.
            let all: Vec<&PathBuf> = dirs.iter().skip(1).chain(files.iter()).collect();
            if !all.is_empty() {
                let from = all[rng.below(all.len())];
                if fs::rename(from, outside.join(format!("out{serial}"))).is_ok() {
                    log.push(format!("  moved out {}", from.display()));
                }
            }
        }
        9 => {
            let mut p = pick_dir(rng);
            for _ in 0..(2 + rng.below(5)) {
                p.push(name(rng));
            }
            if fs::create_dir_all(&p).is_ok() {
                log.push(format!("  mkdir -p {}", p.display()));
                write(&p.join("leaf"), rng, &mut written);
            }
        }
        10 if dirs.len() > 1 => {
            let d = &dirs[1 + rng.below(dirs.len() - 1)];
            if fs::remove_dir_all(d).is_ok() {
                log.push(format!("  rm -rf {}", d.display()));
            }
        }
        11 if !files.is_empty() => {
            let _ = fs::remove_file(&files[rng.below(files.len())]);
        }
        12 => {
            #[cfg(unix)]
            {
                let p = pick_dir(rng).join(name(rng));
                // Mostly a sibling's name; when links are followed, now and
                // then any directory (an ancestor makes a loop).
                let target = if follow && rng.chance(60) {
                    pick_dir(rng)
                } else {
                    PathBuf::from(name(rng))
                };
                if std::os::unix::fs::symlink(&target, &p).is_ok() {
                    log.push(format!("  symlink {} -> {}", p.display(), target.display()));
                }
            }
        }
        13 if !files.is_empty() => {
            // Replace a file by a directory.
            let p = &files[rng.below(files.len())];
            if fs::remove_file(p).is_ok() && fs::create_dir(p).is_ok() {
                log.push(format!("  file {} replaced by a directory", p.display()));
                write(&p.join("inside"), rng, &mut written);
            }
        }
        14 if dirs.len() > 1 => {
            // Replace a directory by a file.
            let d = &dirs[1 + rng.below(dirs.len() - 1)];
            if fs::remove_dir_all(d).is_ok() {
                log.push(format!("  directory {} replaced by a file", d.display()));
                write(d, rng, &mut written);
            }
        }
        _ => {}
    }
    written
}
