//! Directories read off the engine's thread: a big walk's first reads (on
//! its `specwatch-walk` thread, [`look`] without a time), and what an
//! overflow's rescan of a whole tree asks of the disk (a listing of each
//! directory and a `stat` of each file in it), on worker threads in
//! parallel ([`look_all`]). The engine alone applies the results to its
//! index, in order.
//!
//! Pure I/O: no index, no engine state.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use crate::batch::change::FileType;
use crate::fs;

/// What one look at a directory found.
#[derive(Debug)]
pub(crate) struct Look {
    /// Its entries (cookies left out), or why it could not be read.
    pub listing: io::Result<Vec<(OsString, FileType)>>,
    /// Sync cookies seen in it.
    pub cookies: Vec<PathBuf>,
    /// Its entries other than directories whose inode changed at or after
    /// the `since` asked for (none without one).
    pub changed: Vec<OsString>,
}

/// Reads directory `dir`, and with `since` asks which of its non-directory
/// entries changed since then.
pub(crate) fn look(dir: &Path, since: Option<SystemTime>) -> Look {
    let mut cookies = Vec::new();
    let listing = fs::read_listing(dir, &mut cookies);
    let changed = match (&listing, since) {
        (Ok(list), Some(since)) => {
            let files = list
                .iter()
                .filter(|(_, t)| *t != FileType::Dir)
                .map(|(n, _)| n.as_os_str());
            fs::changed_among(dir, files, since)
        }
        _ => Vec::new(),
    };
    Look {
        listing,
        cookies,
        changed,
    }
}

/// [`look`] at each of `dirs`, on up to `threads` threads (the calling one
/// among them); results in the order of `dirs`.
pub(crate) fn look_all(dirs: &[Arc<Path>], since: Option<SystemTime>, threads: usize) -> Vec<Look> {
    let threads = threads.clamp(1, dirs.len().max(1));
    if threads == 1 {
        return dirs.iter().map(|d| look(d, since)).collect();
    }
    let per = dirs.len().div_ceil(threads);
    let mut parts: Vec<Vec<Look>> = Vec::with_capacity(threads);
    std::thread::scope(|s| {
        let mut chunks = dirs.chunks(per);
        let first = chunks.next().unwrap_or_default();
        // A thread the OS refuses (a pids limit, say) or a worker that
        // panicked leaves its part empty: looked at here instead, below.
        let handles: Vec<_> = chunks
            .map(|c| {
                std::thread::Builder::new()
                    .name("specwatch-read".into())
                    .spawn_scoped(s, move || {
                        c.iter().map(|d| look(d, since)).collect::<Vec<Look>>()
                    })
                    .ok()
            })
            .collect();
        parts.push(first.iter().map(|d| look(d, since)).collect());
        for h in handles {
            parts.push(h.and_then(|h| h.join().ok()).unwrap_or_default());
        }
    });
    let mut out: Vec<Look> = parts.into_iter().flatten().collect();
    if out.len() < dirs.len() {
        // A part is missing: every directory is looked at here, in order.
        out = dirs.iter().map(|d| look(d, since)).collect();
    }
    out
}

/// How many threads a whole-tree rescan uses: the machine's parallelism,
/// at most 4 (the disk, not the CPU, is the limit beyond that).
pub(crate) fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Parallel looks give what sequential ones give, in order.
    #[test]
    fn looking_in_parallel_is_looking_one_by_one() {
        let d = tempfile::tempdir().unwrap();
        let mut dirs: Vec<Arc<Path>> = Vec::new();
        for i in 0..9 {
            let p = d.path().join(format!("d{i}"));
            std::fs::create_dir(&p).unwrap();
            for j in 0..i {
                std::fs::write(p.join(format!("f{j}")), "x").unwrap();
            }
            std::fs::create_dir(p.join("sub")).unwrap();
            dirs.push(Arc::from(p.as_path()));
        }
        dirs.push(Arc::from(d.path().join("missing").as_path()));
        let since = Some(SystemTime::now() - Duration::from_secs(3600));
        let seq = look_all(&dirs, since, 1);
        let par = look_all(&dirs, since, 3);
        assert_eq!(seq.len(), dirs.len());
        assert_eq!(par.len(), dirs.len());
        for (i, (a, b)) in seq.iter().zip(&par).enumerate() {
            let sorted = |l: &Look| {
                let mut v = l.listing.as_ref().ok().cloned().unwrap_or_default();
                v.sort();
                let mut c = l.changed.clone();
                c.sort();
                (v, c, l.listing.is_err())
            };
            assert_eq!(sorted(a), sorted(b), "directory {i}");
        }
        // d4: four files, all changed within the hour; `sub` never asked.
        let (list, changed) = (seq[4].listing.as_ref().unwrap(), &seq[4].changed);
        assert_eq!(list.len(), 5);
        assert_eq!(changed.len(), 4);
        assert!(seq[9].listing.is_err(), "a missing directory says so");
        assert!(look_all(&dirs[..0], None, 4).is_empty());
    }
}
