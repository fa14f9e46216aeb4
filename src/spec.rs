//! Watch specs: the desired state of one named watch.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

// The engine's modules name `Backend` through here.
pub(crate) use crate::choice::Backend;
use crate::error::{Error, Result};
use crate::ignore::{IgnoreRule, Matcher};
use crate::ignore_kinds::IgnoreFiles;

use crate::defaults::{DEFAULT_MAX_DELAY, DEFAULT_QUIET_WINDOW, DEFAULT_SAVE_EVERY};

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

/// How changes are batched and which built-in filters apply.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
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
    #[cfg_attr(
        feature = "serde",
        serde(
            serialize_with = "crate::duration::duration::serialize",
            deserialize_with = "crate::duration::field::quiet_window"
        )
    )]
    pub quiet_window: Duration,
    /// Under constant churn a batch closes at the latest this long after its
    /// first change. Default: 1 s ([`DEFAULT_MAX_DELAY`]). Must not be smaller
    /// than `quiet_window`.
    #[cfg_attr(
        feature = "serde",
        serde(
            serialize_with = "crate::duration::duration::serialize",
            deserialize_with = "crate::duration::field::max_delay"
        )
    )]
    pub max_delay: Duration,
    /// Ignore the temporary and backup files of common editors (vim `.swp`,
    /// `.swx`, `.swo`, `.swn`, `4913`; emacs `#x#`, `.#x`, `flymake_*`; `~`
    /// backups; JetBrains `___jb_tmp___` / `___jb_old___` and `.idea/`; Kate
    /// `.kate-swp`; `*-go-tmp-umask`; macOS `.DS_Store`), as Tilt does. On by
    /// default. A user `!` pattern can still re-include any of them.
    pub editor_ignores: bool,
    /// Ignore version-control metadata directories (`.git/`, `.hg/`,
    /// `.svn/`, `.bzr/`, `_darcs/`, `.jj/`, `.pijul/`) below the roots, as
    /// watchexec does: a `git status` rewrites files there that no build
    /// depends on, and a large repository's `.git/objects` would cost
    /// thousands of OS watches. On by default; a root that is itself such
    /// a directory is still watched.
    pub vcs_ignores: bool,
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
    /// How this spec learns of changes (see [`Backend`]). `None`, the
    /// default, takes the manager's
    /// [`ManagerBuilder::backend`](crate::ManagerBuilder::backend). Each
    /// root's choice, and why, is in
    /// [`WatchStatus::roots`](crate::WatchStatus::roots).
    ///
    /// A directory covered by several specs is watched the way each of them
    /// asks (an OS watch for one, polling for another): the changes are
    /// found once and routed to every spec, each batching them its own way.
    #[cfg_attr(
        feature = "serde",
        serde(deserialize_with = "crate::choice::backend_field")
    )]
    pub backend: Option<Backend>,
    /// Report every entry that exists when watching starts as `Created`
    /// (in the spec's first batches), so that a consumer can build its
    /// cache from change batches alone. Off by default. Also on every
    /// update of the spec (a new generation starts from scratch); an entry
    /// created during the scan is reported once. Ignore rules apply as to
    /// any change.
    pub initial_scan: bool,
    /// Re-verify the spec's natively watched directories against the disk
    /// every this long: a safety net for storage that may not deliver
    /// every change as an event. Each rescan first passes a sync barrier,
    /// then reads every directory the spec watches with OS events and
    /// `stat`s its entries; what no event reported is delivered as changes
    /// and counted in
    /// [`WatchStatus::missed_by_os`](crate::WatchStatus::missed_by_os), so
    /// a deployment can measure whether its storage delivers events.
    /// Contents are compared with the previous rescan (the first one only
    /// finds entries created or removed). Costs one read of every
    /// directory and one `stat` of every entry per interval, and a
    /// signature (about 60 bytes and the name) per entry. Directories
    /// that are polled are not rescanned: polling already is this. `None`
    /// (the default): no rescans.
    #[cfg_attr(
        feature = "serde",
        serde(
            serialize_with = "crate::duration::opt_duration::serialize",
            deserialize_with = "crate::duration::field::rescan_every"
        )
    )]
    pub rescan_every: Option<Duration>,
    /// When polling, also compare the content of files whose timestamps
    /// are too recent to be trusted: for file systems with coarse
    /// timestamps (FAT's 2 s, ext3's and many NFS servers' 1 s), where a
    /// file rewritten with the same size within one tick keeps its
    /// signature. A file whose mtime is within 2 s of a poll is hashed
    /// then, and hashed again at the next poll if its signature did not
    /// move; older files are never read (a write would move their mtime).
    /// Files over 64 MiB are not hashed. Off by default; applies to every
    /// directory polled (a spec's `Poll`, `Auto`'s detected roots, the
    /// watch-limit fallback, a manager built with `Backend::Poll`) and to
    /// [`rescan_every`](Self::rescan_every)'s rescans.
    pub content_hash: bool,
    /// Leave out a `Modified` regular file whose content is the same as
    /// when it was last reported (or when watching started): a save that
    /// wrote the same bytes, a `touch`, a `chmod`, a checkout that rewrote
    /// a file unchanged. Every `Created` or `Modified` file the spec
    /// reports then carries its [`hash`](crate::Change::hash). Directories,
    /// links and removals are reported as always.
    ///
    /// Costs: the engine reads every file the spec sees when the spec
    /// starts (on up to four threads; `Watching` comes after), and every
    /// `Created` or `Modified` file when its batch closes; it keeps a hash
    /// (with the path) per file. Files over 64 MiB are compared by their
    /// type alone (always reported). Off by default. The content counted as
    /// "before" is the one read at start: a write made while the spec
    /// started and before its file was read is not seen (as a write before
    /// a directory's watch landed is not). Watchman offers the same through
    /// its `content.sha1hex` field; a consumer keying a cache on contents
    /// can use [`ContentHash`](crate::ContentHash) the same way.
    pub skip_same_content: bool,
    /// Give each change that leaves its entry in place what the entry is
    /// now: [`Change::meta`](crate::Change::meta) (size, modification
    /// time, inode), so that a consumer needs no `stat` of its own. Off by
    /// default: every change's `meta` is `None`, as before the field.
    ///
    /// Most of it is free: an OS event already makes the engine `lstat`
    /// the name, and a poll or a rescan `stat`s every entry it looks at.
    /// What costs is an entry found by reading a directory alone (the
    /// contents of a new directory, an overflow's re-read, an
    /// [`initial_scan`](Self::initial_scan), a restore): one `lstat` per
    /// such changed path when its batch closes, on the engine's thread
    /// (a directory polled without an OS watch is not `stat`ed there: its
    /// polls' own `stat`s are used). Measured on a shared 2-core VM: an
    /// initial scan of 42,000 entries delivered in 549 ms rather than 428
    /// (3 µs per `lstat`). Memory: a boxed 40 bytes per
    /// change that carries it, in batches, backlogs and the
    /// changes-since journal; nothing in the index.
    pub metadata: bool,
    /// Which ignore files to honour ([`IgnoreFiles`]: combine kinds with
    /// `|`; `true` is [`IgnoreFiles::GIT`]). None by default.
    ///
    /// - [`GIT`](IgnoreFiles::GIT): `.gitignore` and `.ignore` in any
    ///   directory, `.git/info/exclude` at a repository's top, the
    ///   `.gitignore`/`.ignore` files of the directories above a root up
    ///   to its repository's top, and git's global excludes file
    ///   (`core.excludesFile` of git's global configuration, else
    ///   `$XDG_CONFIG_HOME/git/ignore` or `~/.config/git/ignore`, as the
    ///   `ignore` crate finds it; applied from the repository's top, or
    ///   the root outside a repository; see
    ///   [`ManagerBuilder::git_excludes_file`](crate::ManagerBuilder::git_excludes_file)).
    ///   Git's semantics, through the `ignore` crate's gitignore matcher:
    ///   the nearest file decides first, `.ignore` before `.gitignore`,
    ///   the global file last, and nothing below an ignored directory
    ///   comes back (so it is pruned: no OS watch, no reading).
    /// - [`DOCKER`](IgnoreFiles::DOCKER): the `.dockerignore` in each root
    ///   (the root is the build context; Docker reads no other), with
    ///   Docker's semantics: patterns anchored at the root (`foo` is
    ///   `<root>/foo` and all below it, never a deeper `foo`), `*`, `?`,
    ///   `[...]`, `**` for any number of directories, `!` exceptions,
    ///   which re-include below an excluded directory (so it is read and
    ///   watched while an exception could reach below it). A
    ///   `.dockerignore` deeper down is an ordinary file.
    /// - [`TILT`](IgnoreFiles::TILT): `.tiltignore`, Docker's semantics
    ///   too, anchored at its directory: the one in each root and those
    ///   of the directories above a root up to its repository's top
    ///   (Tilt reads the one beside the Tiltfile).
    ///
    /// Where several apply to a path, the nearest directory's files decide
    /// first, and at one directory a file that ignores the path beats one
    /// that re-includes it. The spec's own [`ignores`](WatchSpec::ignores)
    /// are applied after, and win. A line that is not a valid pattern is
    /// skipped, and named (file, line, reason) in the spec's
    /// [`last_error`](crate::WatchStatus::last_error) until the file is
    /// fixed.
    ///
    /// Files under the roots are read again when they change: entries that
    /// become ignored are reported `Removed` (and their directories' OS
    /// watches dropped), entries that stop being ignored are reported
    /// `Created` with what is inside them. Files no OS watch covers (those
    /// above a root, the global excludes file, and `info/exclude` in the
    /// pruned `.git`) are compared by their stat signature once a second
    /// and at each [`Manager::sync`](crate::Manager::sync), so their
    /// changes take up to a second (a few `stat` calls a second while such
    /// a spec exists).
    pub ignore_files: IgnoreFiles,
    /// Keep the spec's state in this file, so that a later manager (the
    /// next run of the program) learns what changed while nobody watched.
    /// `None` (the default): nothing is saved.
    ///
    /// When the spec is created (not on an update), the file is read: if
    /// it is this spec's, intact, and its roots are on the file systems
    /// they were on, the spec's first batch is the exact net difference
    /// between the saved state and the disk, marked
    /// [`Restore::Restored`](crate::Restore::Restored) (delivered even
    /// when empty: nothing changed). Otherwise (no file yet, another spec's,
    /// another format, truncated, corrupt, another file system) the first
    /// batch is marked [`Restore::Refused`](crate::Restore::Refused) with
    /// the reason, and holds what [`initial_scan`](Self::initial_scan)
    /// reports if it is on (else nothing): rebuild from scratch. Never a
    /// wrong answer.
    ///
    /// While watching, the file is rewritten atomically (a temporary file
    /// beside it, flushed to disk, renamed over it) at most every
    /// [`save_every`](Self::save_every) while something changed, and when
    /// the manager is dropped; [`Manager::save`](crate::Manager::save)
    /// writes it now. A relative path is resolved against
    /// [`base_dir`](WatchSpec::base_dir). Keep it outside the roots (a
    /// file inside is just another watched file, ignored or not).
    ///
    /// What a stat cannot see is not seen: a file rewritten with the same
    /// size, modification and change times and inode (possible only by
    /// setting the clock back, or writing to the disk beneath the file
    /// system). Change time and inode are part of what is compared, so
    /// `touch -r`, `cp -p` and editors that restore times are seen.
    pub state: Option<PathBuf>,
    /// How often [`state`](Self::state) is rewritten at most while the
    /// spec's changes come (default: 10 s,
    /// [`DEFAULT_SAVE_EVERY`](crate::DEFAULT_SAVE_EVERY)). Each save
    /// `stat`s every entry the spec sees, off the engine's thread.
    #[cfg_attr(
        feature = "serde",
        serde(
            serialize_with = "crate::duration::duration::serialize",
            deserialize_with = "crate::duration::field::save_every"
        )
    )]
    pub save_every: Duration,
    /// Hold the spec's batches while the version-control system of the
    /// repository holding a root is at work, at most this long: a `git
    /// checkout`, `merge` or `rebase` step that rewrites thousands of
    /// files then arrives as one batch (one rebuild), not as one per
    /// [`max_delay`](Self::max_delay). `None` (the default): no holding.
    ///
    /// When a batch is due, the lock of the repository holding each root
    /// is looked at (a `stat`): `.git/index.lock` (in the directory a
    /// `.git` file names, for a worktree or a submodule) for the nearest
    /// `.git` at or above the root, `.hg/wlock` and `.hg/store/lock` for
    /// Mercurial. While one exists the batch stays open and keeps
    /// gathering (one net change per path, nothing dropped), and the lock
    /// is looked at again every quiet window (10 to 100 ms). Once it is
    /// gone the engine passes a sync barrier (as
    /// [`Manager::sync`](crate::Manager::sync) does: the writes made
    /// before the lock went are all in), and the batch closes. Its
    /// [`WatchStatus::vcs_lock`](crate::WatchStatus::vcs_lock) says what
    /// it is held for.
    ///
    /// The bound: a batch is held at most this long after it was first
    /// held. A lock that outlives it (a crashed `git` leaves
    /// `index.lock` behind) is marked `overdue` in the status and batches
    /// flow as if there were none, until it is seen gone. A `sync` closes
    /// a held batch (everything before it is delivered). Nested
    /// repositories below a root are not looked at, nor locks that are
    /// not held through the whole operation (a rebase takes
    /// `index.lock` per commit: each step is a batch).
    ///
    /// Watchman does the same for its subscriptions and triggers
    /// (`defer_vcs`, on by default there): it defers them while
    /// `.hg/wlock` or `.git/index.lock` exists under the watched root, with
    /// no bound. Here it is off by default: a server watching a storage
    /// directory has no use for it, and a lock left behind would delay its
    /// next batch by the bound. Build tools turn it on;
    /// [`DEFAULT_VCS_SETTLE`](crate::DEFAULT_VCS_SETTLE) (10 s) is a
    /// sensible bound.
    #[cfg_attr(
        feature = "serde",
        serde(
            serialize_with = "crate::duration::opt_duration::serialize",
            deserialize_with = "crate::duration::field::vcs_settle"
        )
    )]
    pub vcs_settle: Option<Duration>,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            quiet_window: DEFAULT_QUIET_WINDOW,
            max_delay: DEFAULT_MAX_DELAY,
            editor_ignores: true,
            vcs_ignores: true,
            follow_symlinks: false,
            backend: None,
            initial_scan: false,
            rescan_every: None,
            content_hash: false,
            skip_same_content: false,
            metadata: false,
            ignore_files: IgnoreFiles::NONE,
            state: None,
            save_every: DEFAULT_SAVE_EVERY,
            vcs_settle: None,
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
#[path = "spec_tests.rs"]
mod tests;
