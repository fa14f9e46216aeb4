//! A spec's options ([`WatchOptions`]): how its changes are batched,
//! which built-in filters apply, how it is watched, and what it keeps
//! across runs. The spec itself and its builder are `mod.rs`'s.

use std::path::PathBuf;
use std::time::Duration;

use crate::hold::DuringHolds;
use crate::ignore::kinds::IgnoreFiles;
use crate::spec::choice::Backend;
use crate::spec::defaults::{
    DEFAULT_HOLD_BOUND, DEFAULT_MAX_DELAY, DEFAULT_QUIET_WINDOW, DEFAULT_SAVE_EVERY,
};

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
            serialize_with = "crate::spec::duration::duration::serialize",
            deserialize_with = "crate::spec::duration::field::quiet_window"
        )
    )]
    pub quiet_window: Duration,
    /// Under constant churn a batch closes at the latest this long after its
    /// first change. Default: 1 s ([`DEFAULT_MAX_DELAY`]). Must not be smaller
    /// than `quiet_window`.
    #[cfg_attr(
        feature = "serde",
        serde(
            serialize_with = "crate::spec::duration::duration::serialize",
            deserialize_with = "crate::spec::duration::field::max_delay"
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
        serde(deserialize_with = "crate::spec::choice::backend_field")
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
            serialize_with = "crate::spec::duration::opt_duration::serialize",
            deserialize_with = "crate::spec::duration::field::rescan_every"
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
    /// Costs: every file the spec sees is read when the spec starts
    /// (`Watching` comes after), and every `Created` or `Modified` file
    /// when its batch closes; a hash (with the path) is kept per file.
    /// The reads are the scanner's (a thread per file system, as polls'
    /// looks), never the engine's: a closing batch waits for its files'
    /// hashes (listed in [`WatchStatus::holds`](crate::WatchStatus::holds)
    /// meanwhile, the spec's next batches behind it) while other specs go
    /// on; a hash that does not come within
    /// [`ManagerBuilder::storage_deadline`](crate::ManagerBuilder::storage_deadline)
    /// of the last one (a mount that stopped answering) is given up, and
    /// its file reported without one (never left out). Likewise a start's
    /// reads. Files over 64 MiB are compared by their type alone (always
    /// reported). Off by default. The content counted as "before" is the
    /// one read at start: a write made while the spec started and before
    /// its file was read is not seen (as a write before a directory's
    /// watch landed is not). Watchman offers the same through its
    /// `content.sha1hex` field; a consumer keying a cache on contents can
    /// use [`ContentHash`](crate::ContentHash) the same way.
    pub skip_same_content: bool,
    /// Report a directory renamed within what the spec sees (a move the
    /// OS paired: see [`Change::from`](crate::Change::from)) as one
    /// change, the directory's own, with the entries below it implied:
    /// neither their `Removed` at the old place nor their `Created` at the
    /// new one is in the batch. An entry below it that changed otherwise
    /// in the same batch (written, replaced, new) is still reported. Off
    /// by default: every entry below a moved directory has its own change
    /// (each with its `from`), as a consumer that ignores `from` needs.
    pub collapse_moves: bool,
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
    /// that re-includes it. The spec's own [`ignores`](crate::WatchSpec::ignores)
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
    /// [`base_dir`](crate::WatchSpec::base_dir). Keep it outside the roots (a
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
            serialize_with = "crate::spec::duration::duration::serialize",
            deserialize_with = "crate::spec::duration::field::save_every"
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
            serialize_with = "crate::spec::duration::opt_duration::serialize",
            deserialize_with = "crate::spec::duration::field::vcs_settle"
        )
    )]
    pub vcs_settle: Option<Duration>,
    /// Hold a file's change while it is being written, so that a file
    /// copied in slowly is reported once, complete, not half-written.
    /// The duration is the stability interval: where the OS does not
    /// report that the writer closed the file, a file counts as finished
    /// once its size and mtime have stayed the same this long. `None`
    /// (the default): no holding, changes are reported as they are seen.
    /// [`DEFAULT_WRITE_FINISHED`](crate::DEFAULT_WRITE_FINISHED) (500 ms)
    /// suits a build tool.
    ///
    /// A regular file is being written from a change of it (`Created` or
    /// `Modified`) until:
    ///
    /// - **Linux, native backend**: its writer closes it (`IN_CLOSE_WRITE`;
    ///   a `cp`, an editor saving in place, a compiler's output), or a
    ///   rename puts it there (an atomic save: the temporary file was
    ///   written under another name), so saves are not delayed. A file
    ///   kept open without a write for the interval (a log, a database)
    ///   counts as finished too, as does one changed with no write (a
    ///   `chmod`) once the interval is up.
    /// - **Elsewhere** (the portable backend, polling): its size and mtime
    ///   stay the same for the interval (a `stat` then, as chokidar's
    ///   `awaitWriteFinish` does); a rename putting it in place ends it at
    ///   once. Every change of a file is delayed by the interval. In a
    ///   directory polled without an OS watch, the polls are the looks:
    ///   no poll saw it change for twice the poll interval (at least the
    ///   interval).
    ///
    /// Bounded by the batch's [`max_delay`](Self::max_delay): a batch
    /// waits past its quiet window while one of its files is being
    /// written, never past its maximum delay. Then it closes with every
    /// other change, and the changes of the files still being written
    /// **move to the next batch** (nothing is reported half-written, and
    /// a slow copy is reported once however long it takes; a file that is
    /// written without a pause longer than the interval forever, on a
    /// backend without closes, is never reported). A
    /// [`Manager::sync`](crate::Manager::sync) closes the batch with
    /// everything, files being written included (they are reported again
    /// if written after). Removals, directories and links are never held.
    /// While a due batch waits for files being written,
    /// [`WatchStatus::holds`](crate::WatchStatus::holds) says so (how
    /// many, since when, until when).
    ///
    /// Costs: on Linux's native backend every watched directory reports
    /// closes after a write (`IN_CLOSE_WRITE`, one more event per written
    /// file), dropped at once while no spec asks for this; one `lstat` per
    /// held file once its interval is up. Without the option a consumer
    /// sees exactly what it saw before it existed.
    #[cfg_attr(
        feature = "serde",
        serde(
            serialize_with = "crate::spec::duration::opt_duration::serialize",
            deserialize_with = "crate::spec::duration::field::write_finished"
        )
    )]
    pub write_finished: Option<Duration>,
    /// What the spec does with the changes made while a hold a program
    /// declared ([`Manager::hold`](crate::Manager::hold)) is on it:
    /// [`DuringHolds::Defer`] (the default) delivers them in one batch
    /// once the hold ends; [`DuringHolds::Drop`] delivers them to no one
    /// (they are still journaled: [`changes_since`](crate::Manager::changes_since)
    /// and the [`state`](Self::state) file describe the disk, and
    /// [`WatchStatus::dropped_by_holds`](crate::WatchStatus::dropped_by_holds)
    /// counts them).
    ///
    /// What is held: every change made after `hold` returns and before
    /// the guard is dropped, by anyone (the OS does not say who wrote a
    /// file); a change made before `hold` was called is delivered as
    /// usual (`hold` passes a barrier first, as
    /// [`Manager::sync`](crate::Manager::sync) does). When the guard is
    /// dropped the engine passes another barrier (the writes made before
    /// the drop are all in), then delivers (`Defer`) or drops (`Drop`)
    /// the held batch at once. A [`Manager::sync`](crate::Manager::sync)
    /// during a hold closes the held batch as the hold's end would
    /// (delivered, or dropped). Bounded by [`hold_bound`](Self::hold_bound).
    pub during_holds: DuringHolds,
    /// How long a hold a program declared holds the spec's batches at
    /// most (from when it began): a guard kept longer (forgotten, or a
    /// step that hangs) is marked `overdue` in
    /// [`WatchStatus::holds`](crate::WatchStatus::holds), and what it
    /// held is delivered (`Defer`) or dropped (`Drop`); then batches flow
    /// as if there were no hold, until it ends. Default: 10 s
    /// ([`DEFAULT_HOLD_BOUND`](crate::DEFAULT_HOLD_BOUND)), as
    /// [`vcs_settle`](Self::vcs_settle)'s suggested bound.
    #[cfg_attr(
        feature = "serde",
        serde(
            serialize_with = "crate::spec::duration::duration::serialize",
            deserialize_with = "crate::spec::duration::field::hold_bound"
        )
    )]
    pub hold_bound: Duration,
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
            collapse_moves: false,
            metadata: false,
            ignore_files: IgnoreFiles::NONE,
            state: None,
            save_every: DEFAULT_SAVE_EVERY,
            vcs_settle: None,
            write_finished: None,
            during_holds: DuringHolds::Defer,
            hold_bound: DEFAULT_HOLD_BOUND,
        }
    }
}
