//! Entry points for the benchmarks (cargo feature `bench`, off by
//! default): thin wrappers over internal pure code. Not part of the stable
//! API: without the feature none of this exists.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::{ChangeKind, FileType, ReconcileSummary, Result, WatchSpec};

/// The native backend's inotify mask for a covered directory (raw bits),
/// so that the benchmark's kernel floor asks for the same events.
#[cfg(target_os = "linux")]
pub fn native_watch_mask() -> u32 {
    crate::backend::native::mask(false).bits()
}

/// The spec differ.
pub fn plan(
    current: &HashMap<String, WatchSpec>,
    desired: &BTreeMap<String, WatchSpec>,
) -> ReconcileSummary {
    crate::reconcile::plan(current, desired)
}

/// A compiled ignore matcher.
pub struct Matcher(crate::ignore::Matcher);

impl Matcher {
    /// Compiles the rules of `spec` (normalised first).
    pub fn new(spec: &WatchSpec) -> Result<Matcher> {
        let n = spec.normalize_paths("bench")?;
        Ok(Matcher(n.matcher("bench")?))
    }
    /// Whether `path` is ignored.
    pub fn is_ignored(&self, path: &Path, is_dir: bool) -> bool {
        self.0.is_ignored(path, is_dir)
    }
    /// Whether the directory `dir` is pruned: ignored, and nothing below
    /// it can be re-included (no OS watch, never read).
    pub fn prunes(&self, dir: &Path) -> bool {
        self.0.prunes(dir)
    }
    /// Sets the `.gitignore` applying in `dir` to `contents`, as the
    /// engine does when it reads one (`ignore_files`); returns the lines
    /// skipped as invalid patterns.
    pub fn set_gitignore(&mut self, dir: &Path, contents: &str) -> Vec<String> {
        let which = crate::ignore::files::IgnoreFile::Gitignore;
        self.0.set_file(dir, which, Some(contents)).bad
    }
}

/// A directory's indexed entries.
pub struct Listing(crate::index::Listing);

impl Listing {
    /// A listing holding `entries`.
    pub fn new(entries: Vec<(OsString, FileType)>) -> Listing {
        let mut l = crate::index::Listing::default();
        l.extend_new(entries);
        Listing(l)
    }

    /// Inserts then removes every name of `names` one by one.
    pub fn churn(&mut self, names: &[OsString]) {
        for n in names {
            self.0.insert(n, FileType::File);
        }
        for n in names {
            self.0.remove(n);
        }
    }
}

/// The listing diff; returns the number of differences.
pub fn diff(old: &Listing, fresh: Vec<(OsString, FileType)>) -> usize {
    crate::index::diff(&old.0, fresh).len()
}

/// Coalesces raw changes into one batch; returns its length.
pub fn coalesce(raw: &[(PathBuf, ChangeKind, FileType)]) -> usize {
    let t = Instant::now();
    let mut c =
        crate::batch::coalesce::Coalescer::new(Duration::from_millis(50), Duration::from_secs(1));
    for (p, k, f) in raw {
        c.push(t, p.clone(), *k, *f, None);
    }
    c.take().len()
}
