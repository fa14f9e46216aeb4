//! Watch specs: the desired state of one named watch.
//!
//! The folder is the spec as the user writes it, all plain data: this
//! file ([`WatchSpec`] and its checks), `options` (its batching and
//! watching options), `choice` (the backend it asks for), `defaults` (the
//! defaults' constants) and `duration` (durations as specs write them).

pub(crate) mod choice;
pub(crate) mod defaults;
pub(crate) mod duration;
pub(crate) mod options;

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

// The engine's modules name `Backend` through here.
use crate::error::{Error, Result};
use crate::hold::DuringHolds;
use crate::ignore::kinds::IgnoreFiles;
use crate::ignore::{IgnoreRule, Matcher};
pub(crate) use crate::spec::choice::Backend;
pub(crate) use crate::spec::options::WatchOptions;

use crate::spec::defaults::DEFAULT_MAX_DELAY;

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
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
#[non_exhaustive]
pub struct WatchSpec {
    /// Files or directories to watch. Directories are watched recursively. A
    /// path that does not exist yet is watched for from its parent directory.
    pub paths: Vec<PathBuf>,
    /// Ignore rules, applied in order (a later rule's match beats an earlier
    /// one's at the same path).
    #[cfg_attr(feature = "serde", serde(default))]
    pub ignores: Vec<IgnoreRule>,
    /// Directory that relative paths in `paths` and in the ignore rules'
    /// bases are resolved against. Must be absolute when given.
    #[cfg_attr(feature = "serde", serde(default))]
    pub base_dir: Option<PathBuf>,
    /// Patterns applied below every path of the spec (gitignore syntax, as
    /// in an [`IgnoreRule`] based at each path), before `ignores`: set by
    /// [`ignore_patterns`](WatchSpec::ignore_patterns) and
    /// [`only`](WatchSpec::only). Normalising folds them into `ignores`
    /// (one rule per path) and empties this list. With the `serde`
    /// feature the key is `ignore_patterns`; `root_patterns`, its name
    /// before 0.1, is read too.
    #[cfg_attr(feature = "serde", serde(default, alias = "root_patterns"))]
    pub ignore_patterns: Vec<String>,
    /// Batching and filtering options.
    #[cfg_attr(feature = "serde", serde(default))]
    pub options: WatchOptions,
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
            ignore_patterns: Vec::new(),
            options: WatchOptions::default(),
        }
    }

    /// Ignores `patterns` below every path of the spec, without repeating
    /// each path as a rule's base (`spec.ignore_patterns(["target/",
    /// "*.log"])`). Gitignore syntax; `!` re-includes.
    ///
    /// ```
    /// use specwatch::WatchSpec;
    /// # // Absolute on Windows too, which wants a drive.
    /// # let srv = std::path::Path::new(if cfg!(windows) { r"C:\srv" } else { "/srv" });
    ///
    /// let spec = WatchSpec::new([srv.join("a"), srv.join("b")])
    ///     .ignore_patterns(["node_modules/", "*.log"])
    ///     .normalized("web")
    ///     .unwrap();
    /// assert_eq!(spec.ignores.len(), 2, "one rule per path");
    /// assert_eq!(spec.ignores[1].base, srv.join("b"));
    /// ```
    #[must_use]
    pub fn ignore_patterns<I, S>(mut self, patterns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.ignore_patterns
            .extend(patterns.into_iter().map(Into::into));
        self
    }

    /// Reports only entries whose names match `patterns`, below every path
    /// of the spec: a cache of `*.tgz` packages writes `.only(["*.tgz"])`
    /// rather than `["*", "!*.tgz"]`. Directories themselves are not
    /// reported, but still watched and read (a match may appear in any of
    /// them), except the built-in ignores (VCS directories); combine with
    /// [`ignore_patterns`](WatchSpec::ignore_patterns) or rules to prune
    /// more.
    ///
    /// ```
    /// use specwatch::WatchSpec;
    ///
    /// # let charts = if cfg!(windows) { r"C:\charts" } else { "/charts" };
    /// let spec = WatchSpec::new([charts]).only(["*.tgz"]).normalized("c").unwrap();
    /// assert_eq!(spec.ignores[0].patterns, ["*", "!*.tgz"]);
    /// ```
    #[must_use]
    pub fn only<I, S>(mut self, patterns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.ignore_patterns.push("*".into());
        for p in patterns {
            let p: String = p.into();
            self.ignore_patterns.push(format!("!{p}"));
        }
        self
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

    /// Sets [`WatchOptions::vcs_ignores`].
    #[must_use]
    pub fn vcs_ignores(mut self, on: bool) -> Self {
        self.options.vcs_ignores = on;
        self
    }

    /// Sets [`WatchOptions::follow_symlinks`].
    #[must_use]
    pub fn follow_symlinks(mut self, on: bool) -> Self {
        self.options.follow_symlinks = on;
        self
    }

    /// Sets [`WatchOptions::backend`].
    ///
    /// ```
    /// use specwatch::{Backend, WatchSpec};
    /// use std::time::Duration;
    ///
    /// // A shared storage directory, polled every 2 s whatever it is on.
    /// let spec = WatchSpec::new(["/mnt/charts"])
    ///     .backend(Backend::Poll { interval: Duration::from_secs(2) });
    /// // Or let `Auto` decide per root (the default): NFS, SMB, FUSE are
    /// // polled, local disks get inotify.
    /// let auto = WatchSpec::new(["/mnt/charts"]).backend("auto".parse().unwrap());
    /// # let _ = (spec, auto);
    /// ```
    #[must_use]
    pub fn backend(mut self, backend: Backend) -> Self {
        self.options.backend = Some(backend);
        self
    }

    /// Sets [`WatchOptions::initial_scan`].
    ///
    /// ```no_run
    /// use specwatch::{Event, Manager, WatchSpec};
    /// use std::collections::BTreeSet;
    /// use std::time::Duration;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // A cache built from events alone: the first batches list what exists.
    /// let m = Manager::new()?;
    /// let events = m.subscribe();
    /// m.apply("cache", WatchSpec::new(["/srv/data"]).initial_scan(true))?;
    /// m.sync("cache", Duration::from_secs(60))?; // the scan is delivered
    /// let mut files = BTreeSet::new();
    /// for ev in events.try_iter() {
    ///     if let Event::Changes(b) = ev {
    ///         files.extend(b.changes.iter().map(|c| c.path.clone()));
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn initial_scan(mut self, on: bool) -> Self {
        self.options.initial_scan = on;
        self
    }

    /// Sets [`WatchOptions::rescan_every`].
    ///
    /// ```no_run
    /// use specwatch::{Manager, WatchSpec};
    /// use std::time::Duration;
    ///
    /// # fn main() -> Result<(), specwatch::Error> {
    /// let m = Manager::new()?;
    /// m.apply("data", WatchSpec::new(["/srv/data"]).rescan_every(Duration::from_secs(300)))?;
    /// // Later: did the storage deliver every change as an event?
    /// let missed = m.status("data").map_or(0, |s| s.missed_by_os);
    /// if missed > 0 {
    ///     eprintln!("{missed} changes came without an event: poll this storage");
    /// }
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn rescan_every(mut self, every: Duration) -> Self {
        self.options.rescan_every = Some(every);
        self
    }

    /// Sets [`WatchOptions::content_hash`].
    #[must_use]
    pub fn content_hash(mut self, on: bool) -> Self {
        self.options.content_hash = on;
        self
    }

    /// Sets [`WatchOptions::skip_same_content`].
    ///
    /// ```
    /// use specwatch::WatchSpec;
    ///
    /// // A build tool: no rebuild for a save that changed nothing.
    /// let spec = WatchSpec::new(["src"]).skip_same_content(true);
    /// assert!(spec.options.skip_same_content);
    /// ```
    #[must_use]
    pub fn skip_same_content(mut self, on: bool) -> Self {
        self.options.skip_same_content = on;
        self
    }

    /// Sets [`WatchOptions::collapse_moves`].
    ///
    /// ```
    /// use specwatch::WatchSpec;
    ///
    /// // `mv src/old src/new`: one change, `src/new` from `src/old`.
    /// let spec = WatchSpec::new(["src"]).collapse_moves(true);
    /// assert!(spec.options.collapse_moves);
    /// ```
    #[must_use]
    pub fn collapse_moves(mut self, on: bool) -> Self {
        self.options.collapse_moves = on;
        self
    }

    /// Sets [`WatchOptions::metadata`].
    ///
    /// ```
    /// use specwatch::WatchSpec;
    ///
    /// let spec = WatchSpec::new(["/srv/charts"]).metadata(true);
    /// assert!(spec.options.metadata);
    /// ```
    #[must_use]
    pub fn metadata(mut self, on: bool) -> Self {
        self.options.metadata = on;
        self
    }

    /// Sets [`WatchOptions::ignore_files`].
    ///
    /// ```
    /// use specwatch::WatchSpec;
    ///
    /// // A build tool: the repository's own .gitignore files decide, and
    /// // a rule of the spec's own comes last (and wins).
    /// let spec = WatchSpec::new(["/src/repo"])
    ///     .ignore_files(true)
    ///     .ignore_patterns(["*.tmp"]);
    /// # let _ = spec;
    /// ```
    #[must_use]
    pub fn ignore_files(mut self, which: impl Into<IgnoreFiles>) -> Self {
        self.options.ignore_files = which.into();
        self
    }

    /// Sets [`WatchOptions::state`]: keep the spec's state in `file`
    /// across runs.
    ///
    /// ```no_run
    /// use specwatch::{Event, Manager, Restore, WatchSpec};
    ///
    /// # fn main() -> Result<(), specwatch::Error> {
    /// let m = Manager::new()?;
    /// let events = m.subscribe();
    /// m.apply("src", WatchSpec::new(["/app/src"]).state("/app/.cache/src.state"))?;
    /// // The first batch: what changed since the last run, or why it
    /// // cannot be told.
    /// for event in events {
    ///     if let Event::Changes(batch) = event {
    ///         match &batch.restore {
    ///             Some(Restore::Restored { .. }) => println!("{} changed meanwhile", batch.changes.len()),
    ///             Some(Restore::Refused { reason }) => println!("full rebuild: {reason}"),
    ///             _ => println!("{} changed", batch.changes.len()),
    ///         }
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn state(mut self, file: impl Into<PathBuf>) -> Self {
        self.options.state = Some(file.into());
        self
    }

    /// Sets [`WatchOptions::save_every`].
    #[must_use]
    pub fn save_every(mut self, every: Duration) -> Self {
        self.options.save_every = every;
        self
    }

    /// Sets [`WatchOptions::vcs_settle`]: batches held while a `git` or
    /// `hg` operation is under way, at most `bound`.
    ///
    /// ```
    /// use specwatch::{DEFAULT_VCS_SETTLE, WatchSpec};
    ///
    /// // A build tool: one rebuild per `git checkout`.
    /// let spec = WatchSpec::new(["/src/app"]).vcs_settle(DEFAULT_VCS_SETTLE);
    /// # let _ = spec;
    /// ```
    #[must_use]
    pub fn vcs_settle(mut self, bound: Duration) -> Self {
        self.options.vcs_settle = Some(bound);
        self
    }

    /// Sets [`WatchOptions::write_finished`]: a file's change is held
    /// while it is being written; `interval` is how long its size and
    /// mtime must stay the same where the OS does not report its
    /// writer's close.
    ///
    /// ```
    /// use specwatch::{DEFAULT_WRITE_FINISHED, WatchSpec};
    ///
    /// // A build tool: a file copied in is reported once, complete.
    /// let spec = WatchSpec::new(["/src/app"]).write_finished(DEFAULT_WRITE_FINISHED);
    /// # let _ = spec;
    /// ```
    #[must_use]
    pub fn write_finished(mut self, interval: Duration) -> Self {
        self.options.write_finished = Some(interval);
        self
    }

    /// Sets [`WatchOptions::during_holds`]: what the spec does with the
    /// changes made while a hold a program declared is on it.
    ///
    /// ```
    /// use specwatch::{DuringHolds, WatchSpec};
    ///
    /// // A build tool whose outputs land in the watched tree.
    /// let spec = WatchSpec::new(["/src/app"]).during_holds(DuringHolds::Drop);
    /// # let _ = spec;
    /// ```
    #[must_use]
    pub fn during_holds(mut self, during: DuringHolds) -> Self {
        self.options.during_holds = during;
        self
    }

    /// Sets [`WatchOptions::hold_bound`]: how long a hold a program
    /// declared holds the spec's batches at most.
    #[must_use]
    pub fn hold_bound(mut self, bound: Duration) -> Self {
        self.options.hold_bound = bound;
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
            self.options.vcs_ignores,
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
                return Err(Error::InvalidOption {
                    spec: spec_err(),
                    option: "base_dir",
                    reason: format!("{b:?} is relative; it must be absolute"),
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
        let mut ignores = Vec::with_capacity(self.ignores.len() + paths.len());
        if !self.ignore_patterns.is_empty() {
            for p in &paths {
                ignores.push(IgnoreRule {
                    base: p.clone(),
                    patterns: self.ignore_patterns.clone(),
                });
            }
        }
        for rule in &self.ignores {
            ignores.push(IgnoreRule {
                base: resolve(&rule.base)?,
                patterns: rule.patterns.clone(),
            });
        }
        if self.options.max_delay < self.options.quiet_window {
            // Name what the user most likely set: a quiet window above the
            // default maximum delay, or a maximum delay below the window.
            let (option, reason) = if self.options.max_delay == DEFAULT_MAX_DELAY {
                (
                    "quiet_window",
                    format!(
                        "{:?} is larger than max_delay ({:?}, the default): raise max_delay with it",
                        self.options.quiet_window, self.options.max_delay
                    ),
                )
            } else {
                (
                    "max_delay",
                    format!(
                        "{:?} is smaller than quiet_window {:?}",
                        self.options.max_delay, self.options.quiet_window
                    ),
                )
            };
            return Err(Error::InvalidOption {
                spec: spec_err(),
                option,
                reason,
            });
        }
        let mut options = self.options.clone();
        options.state = options.state.as_deref().map(resolve).transpose()?;
        if options.vcs_settle.is_some_and(|b| b.is_zero()) {
            return Err(Error::InvalidOption {
                spec: spec_err(),
                option: "vcs_settle",
                reason: "must be more than zero (leave it unset for no holding)".into(),
            });
        }
        if options.write_finished.is_some_and(|i| i.is_zero()) {
            return Err(Error::InvalidOption {
                spec: spec_err(),
                option: "write_finished",
                reason: "must be more than zero (leave it unset for no holding)".into(),
            });
        }
        if options.hold_bound.is_zero() {
            return Err(Error::InvalidOption {
                spec: spec_err(),
                option: "hold_bound",
                reason: "must be more than zero".into(),
            });
        }
        if options.save_every.is_zero() {
            return Err(Error::InvalidOption {
                spec: spec_err(),
                option: "save_every",
                reason: "must be more than zero".into(),
            });
        }
        Ok(WatchSpec {
            paths,
            ignores,
            base_dir: None,
            ignore_patterns: Vec::new(),
            options,
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
#[path = "tests.rs"]
mod tests;
