//! Watch specs: the desired state of one named watch.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::ignore::{IgnoreRule, Matcher};

/// Default quiet window: see [`WatchOptions::quiet_window`].
pub const DEFAULT_QUIET_WINDOW: Duration = Duration::from_millis(50);
/// Default maximum batch delay: see [`WatchOptions::max_delay`].
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_millis(1000);

/// Which OS watching a [`Manager`](crate::Manager) uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// `Native` on Linux, `Portable` elsewhere.
    #[default]
    Auto,
    /// Linux only: inotify driven directly, one watch per directory,
    /// pruned and shared across specs.
    Native,
    /// `notify`'s recommended watcher (inotify, FSEvents,
    /// ReadDirectoryChangesW, kqueue), one recursive watch per root. Ignored
    /// directories below a root are still watched by the OS (not pruned),
    /// though their events are dropped.
    Portable,
    /// No OS events: every watched directory is read, and its entries
    /// `stat`ed, once per `interval` (and at once for a
    /// [`Manager::sync`](crate::Manager::sync)); what changed since the
    /// previous look is reported exactly as the OS backends report it.
    /// For file systems where the kernel does not see other machines'
    /// writes (NFS, SMB, FUSE mounts such as sshfs or s3fs). Pruned by
    /// ignore rules like native watching; holds no OS watch. A change is
    /// seen up to `interval` late, and one undone within an interval (a
    /// file created and removed) is not seen at all.
    Poll {
        /// Time between the end of one look and the start of the next.
        interval: std::time::Duration,
    },
}

/// The desired state of one watch: what to watch, what to leave out, and how
/// to batch what is seen.
///
/// A spec is plain data. Two specs that express the same intent compare equal
/// once [normalised](WatchSpec::normalized): paths are made absolute
/// (against [`base_dir`](WatchSpec::base_dir)), cleaned lexically
/// (`.` removed, `..` folded), de-duplicated and sorted. The
/// [`Manager`](crate::Manager) compares normalised specs, so applying an equal
/// spec twice is a no-op.
///
/// ```
/// use specwatch::{IgnoreRule, WatchSpec};
/// use std::time::Duration;
///
/// let spec = WatchSpec::new(["/srv/app/src", "/srv/app/Cargo.toml"])
///     .ignore(IgnoreRule::new("/srv/app", ["target/", "*.log", "!keep.log"]))
///     .quiet_window(Duration::from_millis(20));
/// assert_eq!(spec.paths.len(), 2);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct WatchSpec {
    /// Files or directories to watch. Directories are watched recursively. A
    /// path that does not exist yet is watched for from its parent directory.
    pub paths: Vec<PathBuf>,
    /// Ignore rules, applied in order (a later rule's match beats an earlier
    /// one's at the same path).
    pub ignores: Vec<IgnoreRule>,
    /// Directory that relative paths in `paths` and in the ignore rules'
    /// bases are resolved against. Must be absolute when given.
    pub base_dir: Option<PathBuf>,
    /// Batching and filtering options.
    pub options: WatchOptions,
}

/// How changes are batched and which built-in filters apply.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct WatchOptions {
    /// A batch closes once no change has been seen for this long.
    ///
    /// Default: 50 ms ([`DEFAULT_QUIET_WINDOW`]). Editors finish an atomic save
    /// (write a temporary file, rename it over the target) within a few
    /// milliseconds, and a `git checkout` or a compiler writing its outputs
    /// produces events in bursts with gaps well under 50 ms, so 50 ms gives
    /// one batch per save and usually one per checkout, while staying far
    /// below what a person notices. Watchman uses 20 ms (it serves tools that
    /// add their own settling), @parcel/watcher 50 ms, Tilt 200 ms (it starts
    /// container builds, where an extra rebuild costs seconds). Zero closes a
    /// batch as soon as the engine has handled all events it has read.
    pub quiet_window: Duration,
    /// Under constant churn a batch closes at the latest this long after its
    /// first change. Default: 1 s ([`DEFAULT_MAX_DELAY`]). Must not be smaller
    /// than `quiet_window`.
    pub max_delay: Duration,
    /// Ignore the temporary and backup files of common editors (vim `.swp`,
    /// `.swx`, `4913`; emacs `#x#`, `.#x`; `~` backups; JetBrains
    /// `___jb_tmp___` / `___jb_old___`). On by default. A user `!` pattern can
    /// still re-include any of them.
    pub editor_ignores: bool,
    /// Follow symbolic links to directories. Off by default: a link is an
    /// entry of its own (reported with [`FileType::Symlink`](crate::FileType)
    /// when it is created, removed or replaced) and what it points to is not
    /// watched.
    ///
    /// When on, a link to a directory, at any depth below a root or as a root
    /// itself, is also watched as that directory: what is inside is reported
    /// under the link's path (`root/link/file`), and the link itself is still
    /// reported as a `Symlink` entry. A directory reachable through several
    /// paths (a link to a sibling, two links to one target) is reported
    /// under every one of them, and costs one OS watch.
    ///
    /// Loops are safe: a link whose target is the directory holding the link
    /// or one of its ancestors (`a/up -> ..`, `self -> .`, `x -> /`) is not
    /// followed; it stays a plain link entry. Links that do not resolve
    /// (dangling, or a chain that loops on itself) are plain entries too.
    ///
    /// A link is looked at again whenever an event concerns the link itself
    /// or the directory it leads to (that directory moved or deleted), on
    /// every [`Manager::sync`](crate::Manager::sync) and on every rescan.
    /// What a link leads to can also change without either (a parent of the
    /// target renamed, the target of a dangling link created outside the
    /// watched tree): such a change is noticed at the next `sync` or rescan,
    /// not before. Ignore rules apply to the paths through the link.
    ///
    /// Backends: the native backend watches through links (a directory
    /// reached by several paths shares one inotify watch and its events are
    /// reported under each path). The portable backend **polls** what is at
    /// or below a followed link, every
    /// [`ManagerBuilder::poll_interval`](crate::ManagerBuilder::poll_interval)
    /// and at each `sync` (status: `Degraded`, saying so): notify keys its
    /// watches by path while the kernel keys them by inode, and it drops a
    /// watch two paths share when either path goes, leaving the other blind.
    pub follow_symlinks: bool,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            quiet_window: DEFAULT_QUIET_WINDOW,
            max_delay: DEFAULT_MAX_DELAY,
            editor_ignores: true,
            follow_symlinks: false,
        }
    }
}

impl WatchSpec {
    /// A spec watching `paths` with no ignore rules and default options.
    #[must_use]
    pub fn new<I, P>(paths: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<PathBuf>,
    {
        WatchSpec {
            paths: paths.into_iter().map(Into::into).collect(),
            ignores: Vec::new(),
            base_dir: None,
            options: WatchOptions::default(),
        }
    }

    /// Adds a path to watch.
    #[must_use]
    pub fn path(mut self, path: impl Into<PathBuf>) -> Self {
        self.paths.push(path.into());
        self
    }

    /// Adds an ignore rule (after the existing ones).
    #[must_use]
    pub fn ignore(mut self, rule: IgnoreRule) -> Self {
        self.ignores.push(rule);
        self
    }

    /// Sets the directory relative paths are resolved against.
    #[must_use]
    pub fn base_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.base_dir = Some(dir.into());
        self
    }

    /// Sets [`WatchOptions::quiet_window`].
    #[must_use]
    pub fn quiet_window(mut self, window: Duration) -> Self {
        self.options.quiet_window = window;
        self
    }

    /// Sets [`WatchOptions::max_delay`].
    #[must_use]
    pub fn max_delay(mut self, delay: Duration) -> Self {
        self.options.max_delay = delay;
        self
    }

    /// Sets [`WatchOptions::editor_ignores`].
    #[must_use]
    pub fn editor_ignores(mut self, on: bool) -> Self {
        self.options.editor_ignores = on;
        self
    }

    /// Sets [`WatchOptions::follow_symlinks`].
    #[must_use]
    pub fn follow_symlinks(mut self, on: bool) -> Self {
        self.options.follow_symlinks = on;
        self
    }

    /// Replaces all options.
    #[must_use]
    pub fn options(mut self, options: WatchOptions) -> Self {
        self.options = options;
        self
    }

    /// The spec as the manager stores it: paths and rule bases absolute and
    /// lexically clean, paths de-duplicated and sorted, `base_dir` folded in
    /// (and then cleared). Patterns are validated here too.
    ///
    /// `name` is only used to name the culprit in errors.
    pub fn normalized(&self, name: &str) -> Result<WatchSpec> {
        let n = self.normalize_paths(name)?;
        n.matcher(name)?;
        Ok(n)
    }

    /// Compiles the ignore rules of this (normalised) spec, named `name`.
    pub(crate) fn matcher(&self, name: &str) -> Result<Matcher> {
        Matcher::new(
            name,
            &self.ignores,
            &self.paths,
            self.options.editor_ignores,
        )
    }

    /// [`normalized`](WatchSpec::normalized) without checking patterns (the
    /// manager compiles them once, right after).
    pub(crate) fn normalize_paths(&self, name: &str) -> Result<WatchSpec> {
        if name.is_empty() {
            return Err(Error::EmptyName);
        }
        let spec_err = || name.to_owned();
        if self.paths.is_empty() {
            return Err(Error::NoPaths { spec: spec_err() });
        }
        let base = match &self.base_dir {
            Some(b) if b.is_absolute() => Some(clean(b)),
            Some(b) => {
                return Err(Error::RelativePath {
                    spec: spec_err(),
                    path: b.clone(),
                });
            }
            None => None,
        };
        let resolve = |p: &Path| -> Result<PathBuf> {
            if p.as_os_str().is_empty() {
                return Err(Error::RelativePath {
                    spec: spec_err(),
                    path: p.to_path_buf(),
                });
            }
            if p.is_absolute() {
                Ok(clean(p))
            } else if let Some(b) = &base {
                Ok(clean(&b.join(p)))
            } else {
                Err(Error::RelativePath {
                    spec: spec_err(),
                    path: p.to_path_buf(),
                })
            }
        };
        let mut paths = self
            .paths
            .iter()
            .map(|p| resolve(p))
            .collect::<Result<Vec<_>>>()?;
        paths.sort();
        paths.dedup();
        let mut ignores = Vec::with_capacity(self.ignores.len());
        for rule in &self.ignores {
            ignores.push(IgnoreRule {
                base: resolve(&rule.base)?,
                patterns: rule.patterns.clone(),
            });
        }
        if self.options.max_delay < self.options.quiet_window {
            return Err(Error::InvalidOption {
                spec: spec_err(),
                option: "max_delay",
                reason: format!(
                    "{:?} is smaller than quiet_window {:?}",
                    self.options.max_delay, self.options.quiet_window
                ),
            });
        }
        Ok(WatchSpec {
            paths,
            ignores,
            base_dir: None,
            options: self.options.clone(),
        })
    }
}

/// Lexical clean-up of an absolute path: drops `.`, folds `..` (never above
/// the root), drops trailing separators. Symlinks are not resolved, so
/// `a/link/..` becomes `a` even where the file system would disagree; this is
/// the price of accepting paths that do not exist yet.
pub(crate) fn clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if out.parent().is_some() {
                    out.pop();
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_paths() {
        let s = WatchSpec::new(["/b/./c/", "/a/x/../y", "/b/c", "rel"]).base_dir("/base");
        let n = s.normalized("s").unwrap();
        assert_eq!(
            n.paths,
            vec![
                PathBuf::from("/a/y"),
                PathBuf::from("/b/c"),
                PathBuf::from("/base/rel")
            ]
        );
        assert_eq!(n.base_dir, None);
        // Same intent, other spelling: equal.
        let s2 = WatchSpec::new(["/base/rel", "/b/c", "/a/y"]);
        assert_eq!(s2.normalized("s").unwrap(), n);
    }

    #[test]
    fn clean_never_goes_above_root() {
        assert_eq!(clean(Path::new("/../../a")), PathBuf::from("/a"));
        assert_eq!(clean(Path::new("/")), PathBuf::from("/"));
    }

    #[test]
    fn errors_name_the_culprit() {
        assert!(matches!(
            WatchSpec::new(["/a"]).normalized(""),
            Err(Error::EmptyName)
        ));
        match WatchSpec::new(Vec::<PathBuf>::new()).normalized("web") {
            Err(Error::NoPaths { spec }) => assert_eq!(spec, "web"),
            other => panic!("expected NoPaths, got {other:?}"),
        }
        match WatchSpec::new(["src"]).normalized("web") {
            Err(Error::RelativePath { spec, path }) => {
                assert_eq!(spec, "web");
                assert_eq!(path, PathBuf::from("src"));
            }
            other => panic!("expected RelativePath, got {other:?}"),
        }
        match WatchSpec::new(["/a"]).base_dir("rel").normalized("web") {
            Err(Error::RelativePath { path, .. }) => assert_eq!(path, PathBuf::from("rel")),
            other => panic!("expected RelativePath, got {other:?}"),
        }
        match WatchSpec::new(["/a"])
            .ignore(IgnoreRule::new("/a", ["ok", "bad[z-a]", "fine"]))
            .normalized("web")
        {
            Err(Error::InvalidPattern { spec, pattern, .. }) => {
                assert_eq!(spec, "web");
                assert_eq!(pattern, "bad[z-a]");
            }
            other => panic!("expected InvalidPattern, got {other:?}"),
        }
        match WatchSpec::new(["/a"])
            .quiet_window(Duration::from_secs(2))
            .normalized("web")
        {
            Err(Error::InvalidOption { option, .. }) => assert_eq!(option, "max_delay"),
            other => panic!("expected InvalidOption, got {other:?}"),
        }
        match WatchSpec::new([""]).normalized("web") {
            Err(Error::RelativePath { .. }) => {}
            other => panic!("expected RelativePath for an empty path, got {other:?}"),
        }
    }
}
