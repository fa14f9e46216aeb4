//! The engine: one thread that owns the directory index, the OS watches and
//! every status write.
//!
//! Everything it learns (a command from the manager, an inotify event, a
//! notify event) arrives in one inbox, in order. OS events are hints: for
//! each one the engine looks at the file system (`lstat` of the name, or a
//! read of a directory) and diffs against its index; only that diff becomes
//! changes, which are routed to the specs that cover the path and netted per
//! path by each spec's [`Coalescer`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use parking_lot::{Condvar, Mutex};

use crate::backend::Hint;
#[cfg(target_os = "linux")]
use crate::backend::RawEvent;
#[cfg(target_os = "linux")]
use crate::backend::native::{self, Native};
use crate::backend::portable::Portable;
use crate::coalesce::Coalescer;
use crate::event::{ChangeBatch, ChangeKind, Event, FileType, Seq};
use crate::fanout::Subscriber;
use crate::ignore::Matcher;
use crate::index::{DirId, DirNode, EntryDiff, Index, Partial, Sig, SpecId, diff};
use crate::spec::WatchSpec;
use crate::status::{Generation, Phase, RECENT_BATCHES, WatchStatus};

/// What the engine's inbox carries.
pub(crate) enum Msg {
    /// Create or replace the named spec.
    Upsert {
        name: String,
        generation: Generation,
        spec: WatchSpec,
        matcher: Box<Matcher>,
    },
    /// Delete the named spec.
    Delete { name: String },
    /// Stop the engine.
    Shutdown,
    /// Events read from the native inotify instance, and when the read
    /// started.
    #[cfg(target_os = "linux")]
    Inotify(Vec<RawEvent>, SystemTime),
    /// Register a sync barrier: reply once every cookie has been seen.
    Sync {
        id: u64,
        name: String,
        cookies: Vec<PathBuf>,
        reply: Sender<()>,
    },
    /// A cookie could not be written: rescan `root` instead, then count the
    /// cookie as seen.
    SyncRescan {
        id: u64,
        cookie: PathBuf,
        root: PathBuf,
    },
    /// The caller stopped waiting.
    SyncCancel { id: u64 },
    /// Test hook: behave as if the kernel queue had overflowed.
    Overflow,
    /// Answer with the counters once this pass has settled.
    Stats {
        reply: Sender<crate::manager::Stats>,
    },
    /// Test hook: make the next native watch calls fail.
    FailWatches(u32),
    /// Test hook: make the next watch calls (either backend) fail as the
    /// OS's watch limit does.
    FailWatchesAtLimit(u32),
    /// Test hook: check the index's invariants; reply with violations.
    Check { reply: Sender<Vec<String>> },
    /// An event from the portable backend.
    Notify(notify::Result<notify::Event>),
    /// The backend's reader stopped.
    BackendError(String),
}

/// State shared between the engine (the only writer of statuses) and the
/// manager (reader).
pub(crate) struct Shared {
    pub statuses: Mutex<HashMap<String, Arc<WatchStatus>>>,
    pub changed: Condvar,
    pub subscribers: Mutex<Vec<Subscriber>>,
    /// Whether some subscriber has a backlog (the engine then retries).
    pub behind: std::sync::atomic::AtomicBool,

    /// Set when the engine stopped for good, with the reason.
    pub dead: Mutex<Option<String>>,
}

impl Shared {
    pub(crate) fn new() -> Shared {
        Shared {
            statuses: Mutex::new(HashMap::new()),
            changed: Condvar::new(),
            subscribers: Mutex::new(Vec::new()),
            behind: std::sync::atomic::AtomicBool::new(false),

            dead: Mutex::new(None),
        }
    }

    fn send(&self, event: Event) {
        let mut subs = self.subscribers.lock();
        subs.retain_mut(|s| s.send(event.clone()));
        self.note_backlog(&subs);
    }

    /// Moves backlogs into channels where room appeared.
    fn flush(&self) {
        if !self.behind.load(Ordering::Relaxed) {
            return;
        }
        let mut subs = self.subscribers.lock();
        subs.retain_mut(|s| s.flush());
        self.note_backlog(&subs);
    }

    fn note_backlog(&self, subs: &[Subscriber]) {
        self.behind
            .store(subs.iter().any(|s| s.behind()), Ordering::Relaxed);
    }

    fn backlog_paths(&self) -> usize {
        self.subscribers
            .lock()
            .iter()
            .map(|s| s.backlog_paths())
            .sum()
    }
}

/// The OS side.
pub(crate) enum Os {
    #[cfg(target_os = "linux")]
    Native(Native),
    Portable(Portable),
}

struct SpecState {
    name: String,
    generation: Generation,
    spec: WatchSpec,
    matcher: Matcher,
    coalescer: Coalescer,
    status: WatchStatus,
    dirty: bool,
    /// Roots that do not exist (watched for from an ancestor).
    missing: BTreeSet<PathBuf>,
    /// Directories that could not be watched or read.
    errors: BTreeMap<PathBuf, String>,
    /// Directories this spec covers.
    dirs: usize,
    /// Where each root's partial registration lives.
    partial_at: HashMap<PathBuf, DirId>,
}

pub(crate) struct Engine {
    inbox: Receiver<Msg>,
    os: Os,
    index: Index,
    wds: HashMap<i32, DirId>,
    specs: HashMap<SpecId, SpecState>,
    by_name: HashMap<String, SpecId>,
    next_sid: SpecId,
    next_seq: u64,
    shared: Arc<Shared>,
    now: Instant,
    reattach: Vec<(SpecId, PathBuf)>,
    portable_dirty: bool,
    syncs: Vec<SyncWait>,
    /// Cookies found by directory reads, to be counted as seen.
    cookies_found: Vec<PathBuf>,
    /// Native: when the read before the latest one started. Portable: when
    /// the event before the latest one was handled.
    prev_read_at: SystemTime,
    last_read_at: SystemTime,
    overflow_margin: Duration,
    /// Directories polled because the OS refused a watch.
    /// Each with a stat signature per entry, to tell a modification
    /// without OS events.
    polled: BTreeMap<DirId, BTreeMap<OsString, Sig>>,
    poll_interval: Duration,
    next_poll: Option<Instant>,
    /// The manager's cap on native watches.
    max_watches: Option<usize>,
    /// Why the last watch was refused for lack of watches.
    limit_reason: Option<String>,
    /// Directories whose watch failed for another reason: attempts so far
    /// and when to try again.
    retries: BTreeMap<DirId, (u32, Instant, SystemTime)>,
    /// Test hook: how many coming watch calls fail.
    inject_failures: u32,
    /// Test hook: how many coming watch calls hit a simulated watch limit.
    inject_limit: u32,
    /// Callers of `Manager::stats` waiting for the end of this pass.
    stats_waiters: Vec<Sender<crate::manager::Stats>>,
    /// A native watch was released since the last pass (polled directories
    /// may move back).
    freed: bool,
    /// OS events handled so far.
    os_events: u64,
    /// Nodes that are followed symlinks (`follow_symlinks`), with the
    /// identity of the directory the link led to when it was followed.
    links: HashMap<DirId, DirIdent>,
    /// Native: nodes sharing a watch descriptor with the node `wds` maps it
    /// to (one directory reached through several paths by followed links).
    aliases: HashMap<i32, Vec<DirId>>,
    /// Portable: directories at or below a followed link, polled (see
    /// [`watch_node`](Self::watch_node)); a subset of `polled`.
    link_polled: BTreeSet<DirId>,
}

/// Test hooks: uses up one of `n` injected failures, if any are left.
fn take_one(n: &mut u32) -> bool {
    let left = *n > 0;
    if left {
        *n -= 1;
    }
    left
}

/// What tells two directories apart: device and inode.
#[cfg(unix)]
type DirIdent = (u64, u64);
/// What tells two directories apart: the canonical path.
#[cfg(not(unix))]
type DirIdent = PathBuf;

/// The identity of the directory at `path`, following symlinks.
fn dir_ident(path: &Path) -> Option<DirIdent> {
    let m = std::fs::metadata(path).ok()?;
    if !m.is_dir() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        std::fs::canonicalize(path).ok()
    }
}

/// Where the symlink at `path` leads, if it is to be followed: a directory
/// that is neither the link's own directory nor one of its ancestors (as
/// resolved now), which would make a loop. `None` for a link to anything
/// else, a dangling link, a chain of links that loops on itself (`ELOOP`),
/// and a loop.
///
/// Every directory on the way down from a root through followed links is
/// an ancestor of the next link's path, so along any such path each
/// directory is entered at most once: the walk ends.
fn link_target(path: &Path) -> Option<DirIdent> {
    let target = dir_ident(path)?;
    if path
        .ancestors()
        .skip(1)
        .any(|a| dir_ident(a).as_ref() == Some(&target))
    {
        return None;
    }
    Some(target)
}

fn file_type_of(ft: std::fs::FileType) -> FileType {
    if ft.is_dir() {
        FileType::Dir
    } else if ft.is_file() {
        FileType::File
    } else if ft.is_symlink() {
        FileType::Symlink
    } else {
        FileType::Other
    }
}

fn gone(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// The type of `path` without following a final symlink; `None` if absent.
fn lstat_type(path: &Path) -> io::Result<Option<FileType>> {
    match std::fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(file_type_of(m.file_type()))),
        Err(e) if gone(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads a directory's entries (types from `d_type` where the file system
/// gives them). Sync cookies are left out and their paths put in `cookies`.
///
/// Linux: `open` and `getdents64` straight into a stack buffer, one
/// allocation per entry (its name); `std::fs::read_dir` costs an `fstat`
/// and a heap buffer per directory and three allocations per entry, which
/// showed in start-up profiles.
#[cfg(target_os = "linux")]
fn read_listing(dir: &Path, cookies: &mut Vec<PathBuf>) -> io::Result<Vec<(OsString, FileType)>> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;

    #[repr(C, align(8))]
    struct Buf([u8; 16 * 1024]);

    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let raw = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` was just opened here and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut buf = Buf([0; 16 * 1024]);
    let mut out = Vec::new();
    loop {
        // SAFETY: the buffer is valid for writes of its length, and the
        // kernel writes at most that many bytes.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                fd.as_raw_fd(),
                buf.0.as_mut_ptr(),
                buf.0.len(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            break;
        }
        let filled = &buf.0[..n as usize];
        let mut off = 0;
        // struct linux_dirent64: d_ino u64, d_off i64, d_reclen u16,
        // d_type u8, then the NUL-terminated name.
        while off < filled.len() {
            let rec = &filled[off..];
            if rec.len() < 20 {
                return Err(io::Error::other("truncated getdents64 record"));
            }
            let reclen = u16::from_ne_bytes([rec[16], rec[17]]) as usize;
            if reclen < 20 || reclen > rec.len() {
                return Err(io::Error::other("malformed getdents64 record"));
            }
            off += reclen;
            let d_type = rec[18];
            let name = &rec[19..reclen];
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            if name == b"." || name == b".." {
                continue;
            }
            let name = OsStr::from_bytes(name);
            if is_cookie(name) {
                cookies.push(dir.join(name));
                continue;
            }
            let ft = match d_type {
                libc::DT_DIR => FileType::Dir,
                libc::DT_REG => FileType::File,
                libc::DT_LNK => FileType::Symlink,
                libc::DT_UNKNOWN => match lstat_type(&dir.join(name)) {
                    Ok(Some(t)) => t,
                    _ => continue,
                },
                _ => FileType::Other,
            };
            out.push((name.to_os_string(), ft));
        }
    }
    Ok(out)
}

/// Reads a directory's entries (types from `d_type` where the file system
/// gives them). Sync cookies are left out and their paths put in `cookies`.
#[cfg(not(target_os = "linux"))]
fn read_listing(dir: &Path, cookies: &mut Vec<PathBuf>) -> io::Result<Vec<(OsString, FileType)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = match entry {
            Ok(e) => e,
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(e),
        };
        if is_cookie(&entry.file_name()) {
            cookies.push(entry.path());
            continue;
        }
        let ft = match entry.file_type() {
            Ok(t) => file_type_of(t),
            Err(_) => match lstat_type(&entry.path()) {
                Ok(Some(t)) => t,
                _ => continue,
            },
        };
        out.push((entry.file_name(), ft));
    }
    Ok(out)
}

/// How often a backlogged subscriber's channel is checked for room.
const BACKLOG_RETRY: Duration = Duration::from_millis(5);

/// Name prefix of sync cookies. Entries with it are never indexed or
/// reported.
pub(crate) const COOKIE_PREFIX: &str = ".specwatch-cookie-";

fn is_cookie(name: &OsStr) -> bool {
    name.as_encoded_bytes()
        .starts_with(COOKIE_PREFIX.as_bytes())
}

/// Default of how far before the last complete read an overflow may have
/// hidden changes: file systems' timestamps are coarser than the wall clock.
pub(crate) const OVERFLOW_MARGIN: Duration = Duration::from_secs(2);

/// Whether the inode at `path` changed (content or metadata) at or after
/// `since`, by its ctime, which user code cannot set back.
fn changed_since(path: &Path, since: SystemTime) -> bool {
    match std::fs::symlink_metadata(path) {
        Ok(m) => ctime_of(&m) >= since,
        Err(_) => false,
    }
}

#[cfg(unix)]
fn ctime_of(m: &std::fs::Metadata) -> SystemTime {
    use std::os::unix::fs::MetadataExt;
    let secs = m.ctime();
    let nanos = m.ctime_nsec().clamp(0, 999_999_999) as u32;
    if secs >= 0 {
        SystemTime::UNIX_EPOCH + Duration::new(secs as u64, nanos)
    } else {
        SystemTime::UNIX_EPOCH
    }
}

#[cfg(not(unix))]
fn ctime_of(m: &std::fs::Metadata) -> SystemTime {
    m.modified().unwrap_or(SystemTime::UNIX_EPOCH)
}

/// The stat signature of an entry (polled directories only).
fn sig_of(path: &Path) -> Option<Sig> {
    let m = std::fs::symlink_metadata(path).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some(Sig {
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            ino: m.ino(),
        })
    }
    #[cfg(not(unix))]
    {
        let t = m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .unwrap_or_default();
        Some(Sig {
            size: m.len(),
            mtime: (t.as_secs() as i64, t.subsec_nanos() as i64),
            ctime: (0, 0),
            ino: 0,
        })
    }
}

/// Whether a watch error means "the OS will not give more watches".
fn is_watch_limit(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc_errno::ENOSPC) | Some(libc_errno::EMFILE)
    ) || e.kind() == io::ErrorKind::QuotaExceeded
}

mod libc_errno {
    pub const ENOSPC: i32 = 28;
    pub const EMFILE: i32 = 24;
}

/// First delay before a failed watch is tried again; it doubles per attempt.
const RETRY_FIRST: Duration = Duration::from_millis(50);
/// Longest delay between two attempts.
const RETRY_MAX: Duration = Duration::from_secs(30);

/// Default interval of polling for directories without an OS watch.
pub(crate) const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(1000);

struct SyncWait {
    id: u64,
    name: String,
    remaining: BTreeSet<PathBuf>,
    reply: Sender<()>,
}

fn is_dir_following(path: &Path) -> bool {
    std::fs::metadata(path).map(|m| m.is_dir()).unwrap_or(false)
}

/// The specs an event at `node/name` concerns: those covering the directory,
/// and those whose root is exactly `node/name` (each once, no allocation).
fn concerned<'a>(node: &'a DirNode, name: &'a OsStr) -> impl Iterator<Item = SpecId> + 'a {
    node.full.iter().copied().chain(
        node.partial
            .iter()
            .filter(move |p| p.is_root && p.name == name && !node.full.contains(&p.spec))
            .map(|p| p.spec),
    )
}

impl Engine {
    pub(crate) fn new(inbox: Receiver<Msg>, os: Os, shared: Arc<Shared>) -> Engine {
        Engine {
            inbox,
            os,
            index: Index::default(),
            wds: HashMap::new(),
            specs: HashMap::new(),
            by_name: HashMap::new(),
            next_sid: 1,
            next_seq: 1,
            shared,
            now: Instant::now(),
            reattach: Vec::new(),
            portable_dirty: false,
            syncs: Vec::new(),
            cookies_found: Vec::new(),
            prev_read_at: SystemTime::now(),
            last_read_at: SystemTime::now(),
            overflow_margin: OVERFLOW_MARGIN,
            polled: BTreeMap::new(),
            poll_interval: DEFAULT_POLL_INTERVAL,
            next_poll: None,
            max_watches: None,
            limit_reason: None,
            retries: BTreeMap::new(),
            inject_failures: 0,
            inject_limit: 0,
            stats_waiters: Vec::new(),
            freed: false,
            os_events: 0,
            links: HashMap::new(),
            aliases: HashMap::new(),
            link_polled: BTreeSet::new(),
        }
    }

    pub(crate) fn set_overflow_margin(&mut self, margin: Duration) {
        self.overflow_margin = margin;
    }

    pub(crate) fn set_poll_interval(&mut self, interval: Duration) {
        self.poll_interval = interval.max(Duration::from_millis(1));
    }

    pub(crate) fn set_max_watches(&mut self, max: usize) {
        self.max_watches = Some(max);
    }

    /// Runs until shutdown; a panic marks every spec failed instead of
    /// leaving a silently dead thread.
    pub(crate) fn run_guarded(mut self) {
        let result = catch_unwind(AssertUnwindSafe(|| self.run()));
        let reason = match result {
            Ok(()) => "the manager was shut down".to_owned(),
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                let error = format!("the watch engine panicked: {msg}");
                self.fail_all(&error);
                error
            }
        };
        *self.shared.dead.lock() = Some(reason);
        self.shared.changed.notify_all();
    }

    fn fail_all(&mut self, error: &str) {
        for st in self.specs.values_mut() {
            st.status.phase = Phase::Failed {
                error: error.to_owned(),
            };
            st.status.last_error = Some(error.to_owned());
            st.dirty = true;
        }
        self.publish();
    }

    fn run(&mut self) {
        loop {
            let msg = match self.next_deadline() {
                Some(d) => match self.inbox.recv_deadline(d) {
                    Ok(m) => Some(m),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return,
                },
                None => match self.inbox.recv() {
                    Ok(m) => Some(m),
                    Err(_) => return,
                },
            };
            if let Some(m) = msg {
                if !self.handle(m) {
                    return;
                }
                // Handle everything already waiting before closing batches.
                for _ in 0..100_000 {
                    match self.inbox.try_recv() {
                        Ok(m) => {
                            if !self.handle(m) {
                                return;
                            }
                        }
                        Err(_) => break,
                    }
                }
            }
            self.settle();
            self.poll_due(Instant::now());
            self.retry_due(Instant::now());
            self.complete_syncs();
            self.shared.flush();
            self.flush_due(Instant::now());
            self.publish();
            self.answer_stats();
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        let batches = self
            .specs
            .values()
            .filter_map(|s| s.coalescer.deadline())
            .min();
        let batches = match (batches, self.next_poll) {
            (Some(b), Some(p)) => Some(b.min(p)),
            (b, p) => b.or(p),
        };
        let retry = self.retries.values().map(|r| r.1).min();
        let batches = match (batches, retry) {
            (Some(b), Some(r)) => Some(b.min(r)),
            (b, r) => b.or(r),
        };
        if self.shared.behind.load(Ordering::Relaxed) {
            // A subscriber is behind: look for room again soon. This is the
            // only timer besides batch deadlines, and it only runs while some
            // subscriber has a backlog.
            let retry = Instant::now() + BACKLOG_RETRY;
            return Some(batches.map_or(retry, |b| b.min(retry)));
        }
        batches
    }

    /// Returns false on shutdown.
    fn handle(&mut self, msg: Msg) -> bool {
        self.now = Instant::now();
        match msg {
            Msg::Upsert {
                name,
                generation,
                spec,
                matcher,
            } => self.upsert(name, generation, spec, *matcher),
            Msg::Delete { name } => self.delete(&name),
            Msg::Shutdown => return false,
            #[cfg(target_os = "linux")]
            Msg::Inotify(events, read_at) => {
                self.prev_read_at = self.last_read_at;
                self.last_read_at = read_at;
                self.os_events += events.len() as u64;
                for e in events {
                    self.native_event(e);
                }
            }
            Msg::Notify(Ok(event)) => {
                self.prev_read_at = self.last_read_at;
                self.last_read_at = SystemTime::now();
                self.os_events += 1;
                self.notify_event(event)
            }
            Msg::Sync {
                id,
                name,
                cookies,
                reply,
            } => {
                self.syncs.push(SyncWait {
                    id,
                    name,
                    remaining: cookies.into_iter().collect(),
                    reply,
                });
                self.complete_syncs();
            }
            Msg::SyncRescan { id, cookie, root } => {
                let since = self.overflow_since();
                self.rescan_under(&root, Some(since));
                for s in self.syncs.iter_mut().filter(|s| s.id == id) {
                    s.remaining.remove(&cookie);
                }
                self.complete_syncs();
            }
            Msg::SyncCancel { id } => self.syncs.retain(|s| s.id != id),
            Msg::Overflow => self.overflow(self.last_read_at),
            Msg::FailWatches(n) => self.inject_watch_failures(n),
            Msg::FailWatchesAtLimit(n) => self.inject_limit = n,
            Msg::Stats { reply } => self.stats_waiters.push(reply),
            Msg::Check { reply } => {
                let _ = reply.send(self.check_invariants());
            }
            Msg::Notify(Err(e)) => {
                let msg = e.to_string();
                let path = e.paths.first().cloned().unwrap_or_default();
                let all: Vec<SpecId> = self.specs.keys().copied().collect();
                self.record_error(&all, &path, &msg);
            }
            Msg::BackendError(error) => {
                self.fail_all(&error);
            }
        }
        true
    }

    // ----- specs -------------------------------------------------------

    fn upsert(&mut self, name: String, generation: Generation, spec: WatchSpec, matcher: Matcher) {
        let sid = self.next_sid;
        self.next_sid += 1;
        let mut status = WatchStatus::starting(&name, generation);
        status.monitor_start_time = Some(SystemTime::now());
        let roots = spec.paths.clone();
        let state = SpecState {
            name: name.clone(),
            generation,
            coalescer: Coalescer::new(spec.options.quiet_window, spec.options.max_delay),
            spec,
            matcher,
            status,
            dirty: true,
            missing: BTreeSet::new(),
            errors: BTreeMap::new(),
            dirs: 0,
            partial_at: HashMap::new(),
        };
        // Close the old generation's open batch first: nothing seen is lost.
        let old = self.by_name.insert(name, sid);
        if let Some(old) = old
            && let Some(st) = self.specs.get_mut(&old)
        {
            let changes = st.coalescer.take();
            Self::emit(&self.shared, &mut self.next_seq, st, changes);
        }
        self.specs.insert(sid, state);
        for root in roots {
            self.attach_root(sid, &root, false);
        }
        if let Some(old) = old {
            self.detach(old);
            // Its last status is superseded by the new generation's.
            self.specs.remove(&old);
        }
        self.portable_dirty = true;
    }

    fn delete(&mut self, name: &str) {
        let Some(sid) = self.by_name.remove(name) else {
            return;
        };
        self.detach(sid);
        self.specs.remove(&sid);
        self.portable_dirty = true;
        self.shared.statuses.lock().remove(name);
        self.shared.send(Event::Deleted(name.to_owned()));
        self.shared.changed.notify_all();
    }

    /// Removes every registration of `sid` and frees unused directories.
    fn detach(&mut self, sid: SpecId) {
        for id in self.index.ids() {
            let node = self.index.get_mut(id).expect("listed id");
            node.full.retain(|s| *s != sid);
            node.partial.retain(|p| p.spec != sid);
            if node.is_unused() {
                self.free_node(id);
            }
        }
    }

    /// Drops a directory that no spec needs (its OS watch with it). Its
    /// entry in the parent's listing stays.
    fn free_node(&mut self, id: DirId) {
        if let Some(node) = self.index.remove(id) {
            self.drop_watch(id, &node);
        }
    }

    fn drop_watch(&mut self, id: DirId, node: &DirNode) {
        self.links.remove(&id);
        self.link_polled.remove(&id);
        if node.polled {
            self.polled.remove(&id);
        }
        match &mut self.os {
            #[cfg(target_os = "linux")]
            Os::Native(n) => {
                if let Some(wd) = node.wd {
                    if self.wds.get(&wd) == Some(&id) {
                        // Another path to the same directory keeps the watch.
                        match self.aliases.get_mut(&wd).and_then(Vec::pop) {
                            Some(next) => {
                                self.wds.insert(wd, next);
                            }
                            None => {
                                self.wds.remove(&wd);
                                n.remove(wd);
                                self.freed = true;
                            }
                        }
                    } else if let Some(a) = self.aliases.get_mut(&wd) {
                        a.retain(|x| *x != id);
                    }
                    if self.aliases.get(&wd).is_some_and(Vec::is_empty) {
                        self.aliases.remove(&wd);
                    }
                }
            }
            Os::Portable(p) => {
                if p.forget_dir(&node.path) {
                    self.freed = true;
                }
                self.portable_dirty = true;
            }
        }
    }

    // ----- attaching roots --------------------------------------------

    /// Watches `root` for `sid`: from its parent (to see it vanish and come
    /// back), or from its nearest existing ancestor while it does not exist;
    /// and recursively if it is a directory. With `report`, everything found
    /// is reported as created.
    fn attach_root(&mut self, sid: SpecId, root: &Path, report: bool) {
        let Some(parent) = root.parent() else {
            // The file system root: nothing above to watch.
            self.add_full(vec![sid], root.to_path_buf(), report);
            return;
        };
        let mut anc = parent.to_path_buf();
        let mut next: OsString = root.file_name().unwrap_or_default().to_os_string();
        while !is_dir_following(&anc) {
            match anc.parent() {
                Some(p) => {
                    next = anc.file_name().unwrap_or_default().to_os_string();
                    anc = p.to_path_buf();
                }
                None => break,
            }
        }
        let is_root = anc == parent;
        let (nid, created) = self.index.ensure(&anc);
        if created {
            self.watch_node(nid, true, &[sid]);
            if self.index.get(nid).is_none() {
                self.reattach.push((sid, root.to_path_buf()));
                return;
            }
        }
        let target = anc.join(&next);
        let ft = lstat_type(&target).unwrap_or(None);
        {
            let node = self.index.get_mut(nid).expect("just ensured");
            node.partial.push(Partial {
                spec: sid,
                name: next.clone(),
                is_root,
                root: root.to_path_buf(),
            });
            if !node.complete {
                match ft {
                    Some(t) => {
                        node.entries.insert(&next, t);
                    }
                    None => {
                        node.entries.remove(&next);
                    }
                }
            }
        }
        let Some(st) = self.specs.get_mut(&sid) else {
            return;
        };
        st.partial_at.insert(root.to_path_buf(), nid);
        if !is_root {
            st.missing.insert(root.to_path_buf());
            if ft == Some(FileType::Dir) {
                // It appeared while we looked: walk down again.
                self.reattach.push((sid, root.to_path_buf()));
            }
            return;
        }
        match ft {
            None => {
                st.missing.insert(root.to_path_buf());
            }
            Some(FileType::Dir) => {
                st.missing.remove(root);
                if report {
                    st.coalescer.push(
                        self.now,
                        root.to_path_buf(),
                        ChangeKind::Created,
                        FileType::Dir,
                    );
                }
                self.add_full(vec![sid], root.to_path_buf(), report);
            }
            Some(t) => {
                st.missing.remove(root);
                if report {
                    st.coalescer
                        .push(self.now, root.to_path_buf(), ChangeKind::Created, t);
                }
                if t == FileType::Symlink {
                    self.revalidate_link(nid, &next, report);
                }
            }
        }
    }

    /// Adds an OS watch for a node (native: its own; portable: unless a
    /// recursive watch above covers it). `follow`: the node's path may be a
    /// symlink (ancestors of roots), else it must be a real directory.
    fn watch_node(&mut self, id: DirId, follow: bool, specs: &[SpecId]) -> bool {
        if matches!(self.os, Os::Portable(_)) && self.below_link(id) {
            // notify keys its watches by path and the kernel by inode: a
            // second path to a watched directory would share its kernel
            // watch, and notify drops a shared watch with either path (when
            // one is unwatched, or when a directory on it goes), while the
            // other stays unwatched. So what is at or below a followed link
            // is polled on this backend.
            self.link_polled.insert(id);
            self.poll_instead(id, specs);
            return false;
        }
        let path = self.index.get(id).expect("live node").path.clone();
        // On failure: the error and the directory it is about (for the
        // portable backend, possibly one below `path` that stopped notify's
        // recursive walk).
        let result: std::result::Result<(), (io::Error, PathBuf)> = match &mut self.os {
            #[cfg(target_os = "linux")]
            Os::Native(n) => match self
                .max_watches
                .filter(|max| self.wds.len() >= *max)
                .map(|max| {
                    Err(io::Error::new(
                        io::ErrorKind::QuotaExceeded,
                        format!("the manager's cap of {max} OS watches is reached"),
                    ))
                })
                .unwrap_or_else(|| {
                    if take_one(&mut self.inject_failures) {
                        Err(io::Error::other("injected watch failure"))
                    } else if take_one(&mut self.inject_limit) {
                        // What inotify_add_watch says at max_user_watches.
                        Err(io::Error::from_raw_os_error(libc_errno::ENOSPC))
                    } else {
                        // A followed link's own path is a symlink.
                        n.add(&path, follow || self.links.contains_key(&id))
                    }
                }) {
                Ok(wd) => {
                    if let Some(&other) = self.wds.get(&wd)
                        && other != id
                        && !self.aliases.get(&wd).is_some_and(|a| a.contains(&id))
                        && !self.regroup(wd, id)
                    {
                        // Our node was below a stale one and went with it:
                        // the events for the names above re-add it.
                        if !self.wds.contains_key(&wd)
                            && let Os::Native(n) = &mut self.os
                        {
                            n.remove(wd);
                        }
                        return false;
                    }
                    match self.wds.get(&wd) {
                        Some(&p) if p != id => {
                            let a = self.aliases.entry(wd).or_default();
                            if !a.contains(&id) {
                                a.push(id);
                            }
                        }
                        Some(_) => {}
                        None => {
                            self.wds.insert(wd, id);
                        }
                    }
                    if let Some(node) = self.index.get_mut(id) {
                        node.wd = Some(wd);
                    }
                    Ok(())
                }
                Err(e) => Err((e, path.to_path_buf())),
            },
            Os::Portable(p) => {
                // Ancestors of roots (`follow`) are watched for their own
                // entries only; covered directories recursively.
                if !p.has_watch(&path, !follow) && take_one(&mut self.inject_limit) {
                    Err(crate::backend::portable::limit_error(&path))
                } else {
                    p.ensure_watch(&path, !follow)
                }
            }
        };
        match result {
            Ok(()) => {
                for s in specs {
                    if let Some(st) = self.specs.get_mut(s)
                        && st.errors.remove(&*path).is_some()
                    {
                        st.dirty = true;
                    }
                }
                true
            }
            Err((e, _)) if is_watch_limit(&e) => {
                // No watch to be had: poll this directory instead.
                self.limit_reason = Some(e.to_string());
                self.poll_instead(id, specs);
                false
            }
            Err((e, at)) => {
                if !gone(&e) {
                    // Possibly transient (EIO, EACCES that a chmod lifts,
                    // ...): try again later, backing off.
                    self.schedule_retry(id, specs);
                }
                self.record_error(specs, &at, &format!("cannot watch: {e}"));
                false
            }
        }
    }

    /// Polls directory `id` instead of watching it.
    fn poll_instead(&mut self, id: DirId, specs: &[SpecId]) {
        if let Some(node) = self.index.get_mut(id) {
            node.polled = true;
        }
        self.polled.entry(id).or_default();
        if self.next_poll.is_none() {
            self.next_poll = Some(Instant::now() + self.poll_interval);
        }
        for s in specs {
            if let Some(st) = self.specs.get_mut(s) {
                st.dirty = true;
            }
        }
    }

    /// Whether node `id` is a followed link or lies below one.
    fn below_link(&self, id: DirId) -> bool {
        if self.links.is_empty() {
            return false;
        }
        let Some(node) = self.index.get(id) else {
            return false;
        };
        node.path.ancestors().any(|a| {
            self.index
                .lookup(a)
                .is_some_and(|i| self.links.contains_key(&i))
        })
    }

    /// Native: a watch call for node `id` returned `wd`, which other nodes
    /// hold: the same directory under other paths. Those whose path still
    /// leads to it (through followed links) stay as its aliases; the others are
    /// stale (their directory moved to `id`'s path and the move away is not
    /// handled yet) and are dropped with their entry in the parent, so that
    /// the index keeps one node per directory entry; the events still queued
    /// for the old names re-read whatever is there now. Returns whether node
    /// `id` is still indexed (it may have gone with a stale node).
    #[cfg(target_os = "linux")]
    fn regroup(&mut self, wd: i32, id: DirId) -> bool {
        let members: Vec<DirId> = self
            .wds
            .remove(&wd)
            .into_iter()
            .chain(self.aliases.remove(&wd).unwrap_or_default())
            .collect();
        let mut kept = Vec::new();
        let mut stale = Vec::new();
        for m in members {
            // Ask the kernel whether the other path still leads to the
            // watched directory: the answer is exact, where comparing stats
            // races with renames. (Even without followed links it can: a
            // path through a directory just replaced by a link, whose
            // events are still queued.)
            let same = self.index.get(m).is_some_and(|n| {
                let follow = self.links.contains_key(&m);
                let Os::Native(native) = &mut self.os else {
                    return false;
                };
                match native.add(&n.path, follow) {
                    Ok(w) if w == wd => true,
                    Ok(w) => {
                        if !self.wds.contains_key(&w) {
                            native.remove(w); // a watch nothing records
                        }
                        false
                    }
                    Err(_) => false,
                }
            });
            if same {
                kept.push(m);
            } else {
                stale.push(m);
            }
        }
        if let Some((first, rest)) = kept.split_first() {
            self.wds.insert(wd, *first);
            if !rest.is_empty() {
                self.aliases.insert(wd, rest.to_vec());
            }
        }
        for m in &stale {
            if let Some(node) = self.index.get_mut(*m) {
                node.wd = None;
            }
        }
        for m in stale {
            self.drop_stale(m);
        }
        self.index.get(id).is_some()
    }

    /// Directory `id` could not be watched or read for a possibly transient
    /// reason: try again after a backoff that doubles per attempt.
    fn schedule_retry(&mut self, id: DirId, specs: &[SpecId]) {
        let (attempts, first) = self
            .retries
            .get(&id)
            .map_or((1, SystemTime::now()), |r| (r.0 + 1, r.2));
        let delay = RETRY_FIRST
            .saturating_mul(1 << (attempts - 1).min(16))
            .min(RETRY_MAX);
        self.retries
            .insert(id, (attempts, Instant::now() + delay, first));
        for s in specs {
            if let Some(st) = self.specs.get_mut(s) {
                st.status.watch_retries += 1;
                st.dirty = true;
            }
        }
    }

    /// Whether node `id` lacks its watch with nothing to make up for it (no
    /// polling, no retry pending), so that no event will tell about its
    /// directory.
    fn stranded(&self, id: DirId) -> bool {
        self.needs_watch(id) && !self.retries.contains_key(&id)
    }

    /// [`stranded`](Self::stranded), where it is known for sure: on the
    /// native backend, whose watches are per directory. (A portable node may
    /// lack a watch of its own under a partial recursive one.)
    fn unwatched(&self, id: DirId) -> bool {
        !matches!(self.os, Os::Portable(_)) && self.stranded(id)
    }

    /// Whether directory `id` still lacks the OS watch it needs.
    fn needs_watch(&self, id: DirId) -> bool {
        let Some(node) = self.index.get(id) else {
            return false;
        };
        if node.polled {
            return false;
        }
        match &self.os {
            #[cfg(target_os = "linux")]
            Os::Native(_) => node.wd.is_none(),
            Os::Portable(p) => !p.has_watch(&node.path, !node.full.is_empty()),
        }
    }

    fn record_error(&mut self, specs: &[SpecId], path: &Path, msg: &str) {
        for s in specs {
            if let Some(st) = self.specs.get_mut(s) {
                st.errors.insert(path.to_path_buf(), msg.to_owned());
                st.status.last_error = Some(format!("{}: {msg}", path.display()));
                st.dirty = true;
            }
        }
    }

    /// Covers `dir` and what is below it (minus what each spec prunes) for
    /// `specs`: watch first, then read, so nothing created in between is
    /// missed. With `report`, entries read are reported as created.
    fn add_full(&mut self, specs: Vec<SpecId>, dir: PathBuf, report: bool) {
        self.add_tree(specs, dir, report, None)
    }

    /// [`add_full`](Self::add_full), where `dir` may be a followed symlink
    /// (`link`: the identity of the directory it leads to). Links below it
    /// are followed for the specs that follow them.
    fn add_tree(&mut self, specs: Vec<SpecId>, dir: PathBuf, report: bool, link: Option<DirIdent>) {
        let mut stack = vec![(dir, specs, link)];
        while let Some((path, specs, link)) = stack.pop() {
            let (mut id, mut created) = self.index.ensure(&path);
            if let Some(target) = link {
                if !created && self.links.get(&id) != Some(&target) {
                    // The path was followed to another directory before, or
                    // held a directory that its events have not removed yet.
                    self.remove_tree(id, report);
                    (id, created) = self.index.ensure(&path);
                }
                self.links.insert(id, target);
            }
            {
                let node = self.index.get_mut(id).expect("just ensured");
                for s in &specs {
                    if !node.full.contains(s) {
                        node.full.push(*s);
                        if let Some(st) = self.specs.get_mut(s) {
                            st.dirs += 1;
                            st.dirty = true;
                        }
                    }
                }
            }
            let needs_watch = match &self.os {
                #[cfg(target_os = "linux")]
                Os::Native(_) => self.index.get(id).is_some_and(|n| n.wd.is_none()),
                Os::Portable(_) => created || !self.index.get(id).is_some_and(|n| n.complete),
            };
            let mut watched = true;
            if needs_watch {
                // Portable: every new directory gets its own watch call, even
                // below one just walked: a directory created after that walk
                // is only auto-watched by notify some time after its creation
                // event, and reading it before then could miss files.
                let below_link = self.below_link(id);
                let mut at_limit = false;
                if let (Os::Portable(p), true, false) = (&mut self.os, report, below_link)
                    && p.covers(&path)
                    && let Err((e, at)) = if take_one(&mut self.inject_limit) {
                        Err(crate::backend::portable::limit_error(&path))
                    } else {
                        p.watch_new_dir(&path)
                    }
                {
                    if is_watch_limit(&e) {
                        // Covered by the watch above only in name: poll it.
                        self.limit_reason = Some(e.to_string());
                        self.poll_instead(id, &specs);
                        at_limit = true;
                    } else {
                        self.record_error(&specs, &at, &format!("cannot watch: {e}"));
                    }
                }
                watched = !at_limit && self.watch_node(id, false, &specs);
            }
            if self.index.get(id).is_none() {
                continue; // removed as stale while watching
            }
            if !self.index.get(id).is_some_and(|n| n.complete) {
                let mut listing = read_listing(&path, &mut self.cookies_found);
                // The watch was refused because no directory was at the path
                // (gone: no retry is scheduled), yet one was read there just
                // after: it was replaced in between. Watch the one there now
                // and read it again, or it would have neither a watch nor
                // polling, and a polled parent would never notice.
                let mut tries = 0;
                while !watched && listing.is_ok() && tries < 3 && self.stranded(id) {
                    tries += 1;
                    watched = self.watch_node(id, false, &specs);
                    if watched {
                        listing = read_listing(&path, &mut self.cookies_found);
                    }
                }
                if self.index.get(id).is_none() {
                    continue;
                }
                if !watched && listing.is_ok() && self.stranded(id) {
                    self.schedule_retry(id, &specs);
                }
                match listing {
                    Ok(list) => {
                        let node = self.index.get_mut(id).expect("live node");
                        node.complete = true;
                        let added = node.entries.extend_new(list);
                        node.entries.shrink_to_fit();
                        if node.polled {
                            let sigs = node
                                .entries
                                .iter()
                                .filter_map(|(n, _)| {
                                    Some((n.to_os_string(), sig_of(&node.path.join(n))?))
                                })
                                .collect();
                            self.polled.insert(id, sigs);
                        }
                        if report {
                            for (name, ft) in added {
                                self.route(id, &name, ChangeKind::Created, ft);
                            }
                        }
                        for s in &specs {
                            if let Some(st) = self.specs.get_mut(s)
                                && st.errors.remove(&path).is_some()
                            {
                                st.dirty = true;
                            }
                        }
                    }
                    Err(e) if gone(&e) => {
                        // Vanished: the parent's event removes it.
                        continue;
                    }
                    Err(e) => {
                        self.schedule_retry(id, &specs);
                        self.record_error(&specs, &path, &format!("cannot read: {e}"));
                    }
                }
            }
            let follows = specs.iter().any(|s| self.follows(*s));
            let node = self.index.get(id).expect("live node");
            for (name, ft) in node.entries.iter() {
                let link = match ft {
                    FileType::Dir => false,
                    FileType::Symlink if follows => true,
                    _ => continue,
                };
                let child = path.join(name);
                let cs: Vec<SpecId> = specs
                    .iter()
                    .copied()
                    .filter(|s| {
                        self.specs.get(s).is_some_and(|st| {
                            (!link || st.spec.options.follow_symlinks) && !st.matcher.prunes(&child)
                        })
                    })
                    .collect();
                if cs.is_empty() {
                    continue;
                }
                if !link {
                    stack.push((child, cs, None));
                } else if let Some(target) = link_target(&child) {
                    stack.push((child, cs, Some(target)));
                }
            }
        }
    }

    /// Whether spec `sid` follows symlinks.
    fn follows(&self, sid: SpecId) -> bool {
        self.specs
            .get(&sid)
            .is_some_and(|st| st.spec.options.follow_symlinks)
    }

    /// The specs that cover the directory `id/name` (at `path`): those
    /// covering directory `id` that do not prune it, and those whose root
    /// it is. With `link` (the entry is a symlink), only those of them that
    /// follow links.
    fn child_specs(&self, id: DirId, name: &OsStr, path: &Path, link: bool) -> Vec<SpecId> {
        let Some(node) = self.index.get(id) else {
            return Vec::new();
        };
        let wanted = |s: SpecId| !link || self.follows(s);
        let mut out: Vec<SpecId> = node
            .full
            .iter()
            .copied()
            .filter(|s| wanted(*s) && self.specs.get(s).is_some_and(|st| !st.matcher.prunes(path)))
            .collect();
        for p in &node.partial {
            if p.is_root && p.name == name && wanted(p.spec) && !out.contains(&p.spec) {
                out.push(p.spec);
            }
        }
        out
    }

    /// Looks at the symlink entry `id/name` again: follows it if it leads to
    /// a directory (and no loop) for some spec that follows links, drops
    /// what was followed if it no longer does, and replaces what was
    /// followed if it now leads elsewhere. With `report`, what appears or
    /// goes below the link is reported. The link entry itself is not
    /// touched.
    fn revalidate_link(&mut self, id: DirId, name: &OsStr, report: bool) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        let path = node.path.join(name);
        let specs = if node.entries.get(name) == Some(FileType::Symlink) {
            self.child_specs(id, name, &path, true)
        } else {
            Vec::new()
        };
        let target = if specs.is_empty() {
            None
        } else {
            link_target(&path)
        };
        let current = self.index.lookup(&path);
        match (current, target) {
            (None, None) => {}
            (Some(c), None) => self.remove_tree(c, report),
            // (A node that lost its watch is replaced even when the
            // identity matches: a new directory may reuse a freed inode.)
            (Some(c), Some(t)) if self.links.get(&c) == Some(&t) && !self.unwatched(c) => {
                // The same directory: cover it for specs that arrived since.
                let node = self.index.get(c).expect("live node");
                if specs.iter().any(|s| !node.full.contains(s)) {
                    self.add_tree(specs, path, report, Some(t));
                }
            }
            (Some(c), Some(t)) => {
                self.remove_tree(c, report);
                self.add_tree(specs, path, report, Some(t));
            }
            (None, Some(t)) => self.add_tree(specs, path, report, Some(t)),
        }
    }

    /// [`revalidate_link`](Self::revalidate_link) for every symlink entry
    /// of directory `id`, when some spec covering it follows links.
    fn revalidate_links_in(&mut self, id: DirId) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        if !node.full.iter().any(|s| self.follows(*s)) {
            return;
        }
        let names: Vec<OsString> = node
            .entries
            .iter()
            .filter(|(_, t)| *t == FileType::Symlink)
            .map(|(n, _)| n.to_os_string())
            .collect();
        for n in names {
            self.revalidate_link(id, &n, true);
        }
    }

    /// Re-resolves every symlink that spec `sid` follows or could follow
    /// (sync: a link's target can change without an event on the link).
    fn revalidate_links_of(&mut self, sid: SpecId) {
        if !self.follows(sid) {
            return;
        }
        for id in self.index.ids() {
            let Some(node) = self.index.get(id) else {
                continue;
            };
            if node.full.contains(&sid) {
                self.revalidate_links_in(id);
                continue;
            }
            let roots: Vec<OsString> = node
                .partial
                .iter()
                .filter(|p| {
                    p.spec == sid
                        && p.is_root
                        && node.entries.get(&p.name) == Some(FileType::Symlink)
                })
                .map(|p| p.name.clone())
                .collect();
            for n in roots {
                self.revalidate_link(id, &n, true);
            }
        }
    }

    // ----- routing -----------------------------------------------------

    /// Hands a raw change at `node/name` to every spec it concerns.
    fn route(&mut self, id: DirId, name: &OsStr, kind: ChangeKind, ft: FileType) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        Self::route_in(&mut self.specs, self.now, node, name, kind, ft);
    }

    fn route_in(
        specs: &mut HashMap<SpecId, SpecState>,
        now: Instant,
        node: &DirNode,
        name: &OsStr,
        kind: ChangeKind,
        ft: FileType,
    ) {
        let mut targets = concerned(node, name).peekable();
        if targets.peek().is_none() {
            return;
        }
        let path = node.path.join(name);
        for s in targets {
            if let Some(st) = specs.get_mut(&s)
                && !st.matcher.is_ignored(&path, ft == FileType::Dir)
            {
                st.coalescer.push(now, path.clone(), kind, ft);
            }
        }
    }

    // ----- reacting to hints -------------------------------------------

    /// Something happened to `name` in directory `id`: look, diff, report.
    fn handle_name(&mut self, id: DirId, name: &OsStr, hint: Hint) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        if is_cookie(name) {
            if hint != Hint::Removed {
                let p = node.path.join(name);
                self.cookies_found.push(p);
                self.complete_syncs();
            }
            return;
        }
        if !node.tracks(name) {
            return;
        }
        let path = node.path.join(name);
        let old = node.entries.get(name);
        let new = lstat_type(&path).unwrap_or_default();
        self.wake_partials(id, name, old, new);
        match (old, new) {
            (None, None) => {}
            (None, Some(t)) => self.add_entry(id, name, t),
            (Some(_), None) => self.remove_entry(id, name, true),
            (Some(o), Some(t)) if o != t => {
                self.remove_entry(id, name, true);
                self.add_entry(id, name, t);
            }
            (Some(FileType::Dir), Some(FileType::Dir)) => {
                let child = self.index.lookup(&path);
                let suspect = match hint {
                    Hint::Removed | Hint::Moved => true,
                    // Only the native backend can tell cheaply.
                    Hint::Rescan => !matches!(self.os, Os::Portable(_)),
                    Hint::Created | Hint::Modified => false,
                } || child.is_some_and(|c| self.unwatched(c));
                if suspect && self.dir_replaced(id, name, &path) {
                    self.remove_entry(id, name, true);
                    self.add_entry(id, name, FileType::Dir);
                } else if child.is_some_and(|c| self.retries.contains_key(&c)) {
                    self.retry_all_now();
                }
            }
            (Some(_), Some(t)) => {
                if matches!(hint, Hint::Modified | Hint::Removed | Hint::Moved) {
                    self.route(id, name, ChangeKind::Modified, t);
                }
                if t == FileType::Symlink {
                    // Replaced by a link elsewhere, perhaps.
                    self.revalidate_link(id, name, true);
                }
            }
        }
    }

    /// Roots waiting below `id/name` (not yet existing) re-attach when that
    /// name changes.
    fn wake_partials(
        &mut self,
        id: DirId,
        name: &OsStr,
        old: Option<FileType>,
        new: Option<FileType>,
    ) {
        if old == new {
            return;
        }
        let Some(node) = self.index.get(id) else {
            return;
        };
        for p in &node.partial {
            if !p.is_root && p.name == name {
                self.reattach.push((p.spec, p.root.clone()));
            }
        }
    }

    /// Removes a node that no longer describes what is on disk at its path,
    /// together with its entry in its parent (reporting both).
    fn drop_stale(&mut self, id: DirId) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        let path = node.path.clone();
        if let (Some(parent), Some(name)) = (path.parent(), path.file_name())
            && let Some(pid) = self.index.lookup(parent)
            && pid != id
            && self
                .index
                .get(pid)
                .is_some_and(|p| p.entries.get(name) == Some(FileType::Dir))
        {
            self.remove_entry(pid, name, true);
        }
        if self.index.get(id).is_some() {
            self.remove_tree(id, true);
        }
    }

    /// Whether the directory indexed at `path` is no longer the one on disk.
    fn dir_replaced(&mut self, id: DirId, name: &OsStr, path: &Path) -> bool {
        let Some(cid) = self.index.lookup(path) else {
            // No node: right if every covering spec prunes it; otherwise the
            // index lost it, and re-adding it is the repair.
            return self.index.get(id).is_some_and(|n| {
                n.full
                    .iter()
                    .any(|s| self.specs.get(s).is_some_and(|st| !st.matcher.prunes(path)))
                    || n.partial.iter().any(|p| p.is_root && p.name == name)
            });
        };
        match &mut self.os {
            #[cfg(target_os = "linux")]
            Os::Native(n) => {
                let Some(wd) = self.index.get(cid).and_then(|c| c.wd) else {
                    return true;
                };
                // The kernel hands back the same descriptor for the same inode.
                match n.add(path, false) {
                    Ok(w) if w == wd => false,
                    Ok(w) => {
                        if !self.wds.contains_key(&w) {
                            // A watch on the new directory that nothing
                            // records yet: drop it, so that the cap and the
                            // index stay exact; covering the new directory
                            // watches it again (then reads it).
                            n.remove(w);
                        }
                        true
                    }
                    Err(_) => true,
                }
            }
            Os::Portable(_) => true,
        }
    }

    /// A new entry: index it, report it, and if it is a directory cover it
    /// (watch, read, report its contents).
    fn add_entry(&mut self, id: DirId, name: &OsStr, t: FileType) {
        let Some(node) = self.index.get_mut(id) else {
            return;
        };
        node.entries.insert(name, t);
        self.route(id, name, ChangeKind::Created, t);
        if t != FileType::Dir {
            self.root_appeared(id, name);
            if t == FileType::Symlink {
                self.revalidate_link(id, name, true);
            }
            return;
        }
        let child = self.index.get(id).expect("live node").path.join(name);
        let specs = self.child_specs(id, name, &child, false);
        self.root_appeared(id, name);
        if !specs.is_empty() {
            self.add_full(specs, child, true);
        }
    }

    /// Marks roots that are exactly `id/name` as present again.
    fn root_appeared(&mut self, id: DirId, name: &OsStr) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        for p in &node.partial {
            if p.is_root
                && p.name == name
                && let Some(st) = self.specs.get_mut(&p.spec)
                && st.missing.remove(&p.root)
            {
                st.status.monitor_start_time = Some(SystemTime::now());
                st.dirty = true;
            }
        }
    }

    /// An entry is gone: report it and everything indexed below it.
    fn remove_entry(&mut self, id: DirId, name: &OsStr, report: bool) {
        let Some(node) = self.index.get_mut(id) else {
            return;
        };
        let Some(t) = node.entries.remove(name) else {
            return;
        };
        let child = node.path.join(name);
        let node = self.index.get(id).expect("live node");
        if report {
            Self::route_in(
                &mut self.specs,
                self.now,
                node,
                name,
                ChangeKind::Removed,
                t,
            );
        }
        for p in &node.partial {
            if p.is_root
                && p.name == name
                && let Some(st) = self.specs.get_mut(&p.spec)
            {
                st.missing.insert(p.root.clone());
                st.dirty = true;
            }
        }
        if matches!(t, FileType::Dir | FileType::Symlink)
            && let Some(cid) = self.index.lookup(&child)
        {
            self.remove_tree(cid, report);
        }
    }

    /// Removes a directory node and all indexed below it, reporting every
    /// entry as removed; roots that lived there are re-attached later.
    fn remove_tree(&mut self, top: DirId, report: bool) {
        let mut stack = vec![top];
        while let Some(id) = stack.pop() {
            let Some(node) = self.index.remove(id) else {
                continue;
            };
            self.drop_watch(id, &node);
            for (name, t) in node.entries.iter() {
                if report {
                    Self::route_in(
                        &mut self.specs,
                        self.now,
                        &node,
                        name,
                        ChangeKind::Removed,
                        t,
                    );
                }
                if matches!(t, FileType::Dir | FileType::Symlink)
                    && let Some(cid) = self.index.lookup(&node.path.join(name))
                {
                    stack.push(cid);
                }
            }
            for s in &node.full {
                if let Some(st) = self.specs.get_mut(s) {
                    st.dirs = st.dirs.saturating_sub(1);
                    st.errors.remove(&*node.path);
                    st.dirty = true;
                    if st.spec.paths.iter().any(|p| **p == *node.path) {
                        st.missing.insert(node.path.to_path_buf());
                        self.reattach.push((*s, node.path.to_path_buf()));
                    }
                }
            }
            for p in &node.partial {
                self.reattach.push((p.spec, p.root.clone()));
            }
        }
        self.portable_dirty = true;
    }

    /// Re-attaches roots whose watching point changed, then frees what no
    /// spec needs and brings the portable backend's watches up to date.
    fn settle(&mut self) {
        let mut rounds = 0;
        while !self.reattach.is_empty() && rounds < 64 {
            rounds += 1;
            let mut todo = std::mem::take(&mut self.reattach);
            todo.sort();
            todo.dedup();
            for (sid, root) in todo {
                let Some(st) = self.specs.get_mut(&sid) else {
                    continue;
                };
                if !st.spec.paths.contains(&root) {
                    continue;
                }
                // Unregister first, free later: freeing at once would drop a
                // watch that the new attachment may need again.
                let old = st.partial_at.remove(&root);
                if let Some(old) = old
                    && let Some(node) = self.index.get_mut(old)
                {
                    node.partial.retain(|p| !(p.spec == sid && p.root == root));
                }
                // A root that is still indexed as a directory keeps its tree.
                let covered = self
                    .index
                    .lookup(&root)
                    .and_then(|id| self.index.get(id))
                    .is_some_and(|n| n.full.contains(&sid));
                if covered {
                    self.reattach_partial_only(sid, &root);
                } else {
                    self.attach_root(sid, &root, true);
                }
                if let Some(old) = old
                    && self.index.get(old).is_some_and(|n| n.is_unused())
                {
                    self.free_node(old);
                }
            }
        }
        if self.portable_dirty {
            self.portable_dirty = false;
            self.sync_portable();
        }
        self.unpoll();
    }

    /// Re-registers only the parent watch of a root whose tree is intact.
    fn reattach_partial_only(&mut self, sid: SpecId, root: &Path) {
        let Some(parent) = root.parent() else {
            return;
        };
        if !is_dir_following(parent) {
            return;
        }
        let (nid, created) = self.index.ensure(parent);
        if created {
            self.watch_node(nid, true, &[sid]);
        }
        let name = root.file_name().unwrap_or_default().to_os_string();
        let Some(node) = self.index.get_mut(nid) else {
            self.reattach.push((sid, root.to_path_buf()));
            return;
        };
        if !node.complete {
            // A directory, or a followed link to one.
            let t = lstat_type(root).ok().flatten().unwrap_or(FileType::Dir);
            node.entries.insert(&name, t);
        }
        node.partial.push(Partial {
            spec: sid,
            name,
            is_root: true,
            root: root.to_path_buf(),
        });
        if let Some(st) = self.specs.get_mut(&sid) {
            st.partial_at.insert(root.to_path_buf(), nid);
            st.missing.remove(root);
        }
    }

    /// Portable backend: unwatch what no node needs any more, watch what an
    /// uncovered node needs.
    fn sync_portable(&mut self) {
        let Os::Portable(p) = &self.os else {
            return;
        };
        let mut node_paths: BTreeSet<PathBuf> = BTreeSet::new();
        let mut full_paths: BTreeSet<PathBuf> = BTreeSet::new();
        let mut partial_only: Vec<PathBuf> = Vec::new();
        for id in self.index.ids() {
            let Some(n) = self.index.get(id) else {
                continue;
            };
            if n.is_unused() {
                continue;
            }
            node_paths.insert(n.path.to_path_buf());
            if n.full.is_empty() {
                partial_only.push(n.path.to_path_buf());
            } else {
                full_paths.insert(n.path.to_path_buf());
            }
        }
        // A watch goes only when nothing at or below it is needed: notify
        // drops every watch below a recursive one with it, and re-adding
        // them would leave a gap.
        let stale: Vec<PathBuf> = p
            .watched()
            .keys()
            .filter(|w| {
                !node_paths
                    .range((*w).clone()..)
                    .next()
                    .is_some_and(|n| n.starts_with(w))
            })
            .cloned()
            .collect();
        let mut wanted: Vec<(PathBuf, bool)> = Vec::new();
        {
            let kept_recursive: BTreeSet<&PathBuf> = p
                .watched()
                .iter()
                .filter(|(w, r)| **r && !stale.contains(w))
                .map(|(w, _)| w)
                .collect();
            let covered = |x: &Path| {
                x.ancestors()
                    .skip(1)
                    .any(|a| full_paths.contains(a) || kept_recursive.contains(&a.to_path_buf()))
                    || p.covers(x)
            };
            for f in &full_paths {
                if !covered(f) && p.watched().get(f) != Some(&true) {
                    wanted.push((f.clone(), true));
                }
            }
            for f in &partial_only {
                if !covered(f) && !p.watched().contains_key(f) {
                    wanted.push((f.clone(), false));
                }
            }
        }
        let Os::Portable(p) = &mut self.os else {
            return;
        };
        for w in &stale {
            p.unwatch(w);
        }
        if !stale.is_empty() {
            // Polled directories may get a watch now.
            self.freed = true;
        }
        for (path, recursive) in wanted {
            let Some(id) = self.index.lookup(&path) else {
                continue;
            };
            if self.retries.contains_key(&id) || self.link_polled.contains(&id) {
                continue; // its backoff says when; or it is polled for good
            }
            let Some(n) = self.index.get(id) else {
                continue;
            };
            let mut specs = n.full.to_vec();
            specs.extend(n.partial.iter().map(|p| p.spec));
            self.watch_node(id, !recursive, &specs);
        }
    }

    /// A directory with no tracked parent lost its watch or moved: if it is
    /// no longer there, drop it (reporting its contents) and re-attach.
    fn check_top(&mut self, id: DirId, moved: bool) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        let path = node.path.clone();
        if self.links.contains_key(&id) {
            // A followed link's directory moved or went: no event about the
            // link itself says so. Look where the link leads now.
            match (
                path.parent().and_then(|p| self.index.lookup(p)),
                path.file_name(),
            ) {
                (Some(pid), Some(name)) => {
                    let name = name.to_os_string();
                    self.revalidate_link(pid, &name, true);
                }
                _ => self.remove_tree(id, true),
            }
            return;
        }
        if let Some(parent) = path.parent()
            && let Some(pid) = self.index.lookup(parent)
        {
            let tracked = self
                .index
                .get(pid)
                .is_some_and(|p| p.tracks(path.file_name().unwrap_or_default()));
            if tracked {
                // The parent's own event handles it, unless the parent is
                // polled (no events): then drop the node with its entry, and
                // the parent's next poll finds whatever is there now.
                if self.index.get(pid).is_some_and(|p| p.polled) {
                    self.drop_stale(id);
                } else if self.unwatched(id) {
                    // It lost its watch (the directory was deleted or
                    // replaced) and the parent's events about the name may
                    // all have been handled already, while the old watch
                    // still stood: look at the name now.
                    let name = path.file_name().unwrap_or_default().to_os_string();
                    self.handle_name(pid, &name, Hint::Removed);
                }
                return;
            }
        }
        if moved || !is_dir_following(&path) {
            self.remove_tree(id, true);
        }
    }

    /// The earliest moment a change hidden by lost events can have
    /// happened.
    /// `complete_read`: the moment after which events may be missing (the
    /// start of the last read whose events all arrived).
    fn since_with_margin(&self, complete_read: SystemTime) -> SystemTime {
        complete_read
            .checked_sub(self.overflow_margin)
            .unwrap_or(SystemTime::UNIX_EPOCH)
    }

    fn overflow_since(&self) -> SystemTime {
        self.since_with_margin(self.last_read_at)
    }

    /// The kernel dropped events: re-read everything, diff, and report files
    /// changed since `complete_read` (minus the margin) as modified.
    fn overflow(&mut self, complete_read: SystemTime) {
        let since = self.since_with_margin(complete_read);
        for st in self.specs.values_mut() {
            st.status.overflow_recoveries += 1;
            st.dirty = true;
        }
        for id in self.index.ids() {
            self.rescan_node(id, Some(since));
        }
    }

    /// Rescans every indexed directory at or below `root` (or `root`'s
    /// entry in its parent when it is not a directory).
    fn rescan_under(&mut self, root: &Path, since: Option<SystemTime>) {
        if let Some(parent) = root.parent()
            && let (Some(pid), Some(name)) = (self.index.lookup(parent), root.file_name())
        {
            self.handle_name(pid, name, Hint::Rescan);
            if let Some(since) = since {
                self.report_if_changed(pid, name, since);
            }
        }
        let ids: Vec<DirId> = self
            .index
            .ids()
            .into_iter()
            .filter(|id| {
                self.index
                    .get(*id)
                    .is_some_and(|n| n.path.starts_with(root))
            })
            .collect();
        for id in ids {
            self.rescan_node(id, since);
        }
    }

    fn report_if_changed(&mut self, id: DirId, name: &OsStr, since: SystemTime) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        if let Some(t) = node.entries.get(name)
            && t != FileType::Dir
            && changed_since(&node.path.join(name), since)
        {
            self.route(id, name, ChangeKind::Modified, t);
        }
    }

    /// Re-reads one directory and applies the diff. With `since`, entries
    /// present before and after whose inode changed since then are reported
    /// modified.
    fn rescan_node(&mut self, id: DirId, since: Option<SystemTime>) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        let path = node.path.clone();
        if !node.complete {
            let names: Vec<OsString> = node.partial.iter().map(|p| p.name.clone()).collect();
            for n in names {
                self.handle_name(id, &n, Hint::Rescan);
                if let Some(since) = since {
                    self.report_if_changed(id, &n, since);
                }
            }
            return;
        }
        let Some(diffs) = self.reread(id, &path) else {
            return;
        };
        let changed: Vec<OsString> = match since {
            Some(_) => {
                let touched: BTreeSet<&OsStr> = diffs.iter().map(EntryDiff::name).collect();
                let node = self.index.get(id).expect("live node");
                node.entries
                    .iter()
                    .filter(|(n, _)| !touched.contains(n))
                    .map(|(n, _)| n.to_os_string())
                    .collect()
            }
            None => Vec::new(),
        };
        self.apply_diffs(id, diffs);
        if let Some(since) = since {
            for n in changed {
                self.report_if_changed(id, &n, since);
            }
        }
        self.revalidate_links_in(id);
    }

    /// Counts cookies seen; answers every sync whose cookies are all seen,
    /// after closing its spec's open batch so everything before the cookie
    /// has been delivered.
    fn complete_syncs(&mut self) {
        if self.syncs.is_empty() {
            self.cookies_found.clear();
            return;
        }
        for c in self.cookies_found.drain(..) {
            for s in &mut self.syncs {
                s.remaining.remove(&c);
            }
        }
        let mut i = 0;
        while i < self.syncs.len() {
            if !self.syncs[i].remaining.is_empty() {
                i += 1;
                continue;
            }
            let done = self.syncs.swap_remove(i);
            if let Some(sid) = self.by_name.get(&done.name).copied() {
                // Directories without an OS watch have no events to wait
                // for: poll them now, so the barrier covers them too.
                let polled: Vec<DirId> = self
                    .polled
                    .keys()
                    .copied()
                    .filter(|id| self.index.get(*id).is_some_and(|n| n.full.contains(&sid)))
                    .collect();
                for id in polled {
                    self.poll_node(id);
                }
                self.revalidate_links_of(sid);
                if !self.reattach.is_empty() {
                    self.settle();
                }
            }
            if let Some(sid) = self.by_name.get(&done.name).copied()
                && let Some(st) = self.specs.get_mut(&sid)
            {
                let changes = st.coalescer.take();
                Self::emit(&self.shared, &mut self.next_seq, st, changes);
            }
            let _ = done.reply.send(());
        }
    }

    /// Reads directory `id` again and diffs it against the index; `None`
    /// when it cannot be read (gone: dropped if nothing above tracks it).
    fn reread(&mut self, id: DirId, path: &Path) -> Option<Vec<EntryDiff>> {
        match read_listing(path, &mut self.cookies_found) {
            Ok(list) => Some(diff(&self.index.get(id)?.entries, list)),
            Err(e) if gone(&e) => {
                self.check_top(id, false);
                None
            }
            Err(_) => None,
        }
    }

    /// Applies a listing diff of directory `id`: new entries are covered and
    /// reported, gone ones reported with everything below them.
    fn apply_diffs(&mut self, id: DirId, diffs: Vec<EntryDiff>) {
        for d in diffs {
            match d {
                EntryDiff::Added(n, t) => self.add_entry(id, &n, t),
                EntryDiff::Removed(n, _) => self.remove_entry(id, &n, true),
                EntryDiff::Retyped(n, _, t) => {
                    self.remove_entry(id, &n, true);
                    self.add_entry(id, &n, t);
                }
            }
        }
    }

    /// Tries failed watches and reads again whose backoff is over; a
    /// directory that gets its watch is re-read (and files changed
    /// meanwhile, by ctime, reported), since no events came while it had
    /// none; one that could not be read is read and its contents reported.
    fn retry_due(&mut self, now: Instant) {
        let due: Vec<DirId> = self
            .retries
            .iter()
            .filter(|(_, r)| r.1 <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            let Some(node) = self.index.get(id) else {
                self.retries.remove(&id);
                continue;
            };
            let Some(&(attempts, _, first)) = self.retries.get(&id) else {
                continue;
            };
            let follow = node.full.is_empty();
            let mut specs = node.full.to_vec();
            specs.extend(node.partial.iter().map(|p| p.spec));
            if self.needs_watch(id) && !self.watch_node(id, follow, &specs) {
                if self.index.get(id).is_some_and(|n| n.polled) {
                    self.retries.remove(&id); // polling covers it now
                } else if self.retries.get(&id).is_some_and(|r| r.0 == attempts) {
                    // Refused as gone: keep backing off until the node goes.
                    self.schedule_retry(id, &specs);
                }
                continue;
            }
            // Changes since the first failure had no events.
            let since = self.since_with_margin(first);
            match self.index.get(id) {
                Some(n) if n.complete => self.rescan_node(id, Some(since)),
                Some(n) if !n.full.is_empty() => {
                    let path = n.path.to_path_buf();
                    let full = n.full.to_vec();
                    self.add_full(full, path, true);
                }
                _ => {}
            }
            // A failed read rescheduled it with one more attempt.
            if self.retries.get(&id).is_some_and(|r| r.0 == attempts) {
                self.retries.remove(&id);
            }
        }
    }

    /// Something happened to a directory waiting for a retry (a chmod, say):
    /// try every waiting directory again now rather than after its backoff
    /// (on the portable backend the watch that failed may be an ancestor's).
    fn retry_all_now(&mut self) {
        let now = Instant::now();
        for r in self.retries.values_mut() {
            r.1 = r.1.min(now);
        }
    }

    /// Test hook: the next `n` native watch calls fail with an I/O error.
    pub(crate) fn inject_watch_failures(&mut self, n: u32) {
        self.inject_failures = n;
    }

    /// Polls every polled directory when the poll interval is up.
    fn poll_due(&mut self, now: Instant) {
        if self.polled.is_empty() {
            self.next_poll = None;
            return;
        }
        match self.next_poll {
            Some(t) if t <= now => {}
            Some(_) => return,
            None => {
                self.next_poll = Some(now + self.poll_interval);
                return;
            }
        }
        self.now = Instant::now();
        let ids: Vec<DirId> = self.polled.keys().copied().collect();
        for id in ids {
            self.poll_node(id);
        }
        self.next_poll = if self.polled.is_empty() {
            None
        } else {
            Some(Instant::now() + self.poll_interval)
        };
    }

    /// One poll of a directory without an OS watch: read, diff names and
    /// types, compare stat signatures of the rest.
    fn poll_node(&mut self, id: DirId) {
        let Some(node) = self.index.get(id) else {
            self.polled.remove(&id);
            return;
        };
        let path = node.path.clone();
        let Some(diffs) = self.reread(id, &path) else {
            return;
        };
        self.apply_diffs(id, diffs);
        let Some(node) = self.index.get(id) else {
            return;
        };
        // A directory entry that lost its node, or whose node has neither
        // watch nor polling (it was replaced while this directory had no
        // events to tell), is covered again.
        let orphans: Vec<OsString> = node
            .entries
            .iter()
            .filter(|(n, t)| {
                *t == FileType::Dir
                    && self
                        .index
                        .lookup(&node.path.join(n))
                        .is_none_or(|c| self.unwatched(c))
                    && node.full.iter().any(|s| {
                        self.specs
                            .get(s)
                            .is_some_and(|st| !st.matcher.prunes(&node.path.join(n)))
                    })
            })
            .map(|(n, _)| n.to_os_string())
            .collect();
        for n in orphans {
            self.remove_entry(id, &n, true);
            self.add_entry(id, &n, FileType::Dir);
        }
        let Some(node) = self.index.get(id) else {
            return;
        };
        let mut modified = Vec::new();
        let mut sigs = BTreeMap::new();
        for (name, t) in node.entries.iter() {
            let Some(sig) = sig_of(&node.path.join(name)) else {
                continue;
            };
            if t != FileType::Dir
                && self
                    .polled
                    .get(&id)
                    .and_then(|old| old.get(name))
                    .is_some_and(|old| *old != sig)
            {
                modified.push((name.to_os_string(), t));
            }
            sigs.insert(name.to_os_string(), sig);
        }
        if let Some(old) = self.polled.get_mut(&id) {
            *old = sigs;
        }
        for (name, t) in modified {
            self.route(id, &name, ChangeKind::Modified, t);
        }
        self.revalidate_links_in(id);
    }

    /// Watches freed up: move polled directories back to OS watches. The
    /// watch is added first, then a last poll catches what happened since
    /// the previous one.
    fn unpoll(&mut self) {
        if !std::mem::take(&mut self.freed) || self.polled.is_empty() {
            return;
        }
        let ids: Vec<DirId> = self
            .polled
            .keys()
            .copied()
            .filter(|id| !self.link_polled.contains(id))
            .collect();
        for id in ids {
            let Some(node) = self.index.get(id) else {
                self.polled.remove(&id);
                continue;
            };
            let specs: Vec<SpecId> = node.full.to_vec();
            let sigs = self.polled.remove(&id).unwrap_or_default();
            if let Some(n) = self.index.get_mut(id) {
                n.polled = false;
            }
            if !self.watch_node(id, false, &specs) {
                // Still no room: it is polled again, with its signatures.
                if let Some(s) = self.polled.get_mut(&id) {
                    *s = sigs;
                }
                break;
            }
            // A last poll (as a polled directory, for its signatures).
            self.polled.insert(id, sigs);
            self.poll_node(id);
            if !self.index.get(id).is_some_and(|n| n.polled) {
                self.polled.remove(&id);
            }
            for s in &specs {
                if let Some(st) = self.specs.get_mut(s) {
                    st.dirty = true;
                }
            }
        }
        if self.polled.len() == self.link_polled.len() {
            self.limit_reason = None;
        }
    }

    /// The index's invariants, for tests: every node with a tracked parent
    /// is listed there as a directory; every directory entry of a complete,
    /// covered node that a covering spec does not prune has a node; native
    /// watch descriptors map back to their node.
    fn check_invariants(&self) -> Vec<String> {
        let mut out = Vec::new();
        for id in self.index.ids() {
            let n = self.index.get(id).expect("listed");
            if let Some(wd) = n.wd
                && self.wds.get(&wd) != Some(&id)
                && !self.aliases.get(&wd).is_some_and(|a| a.contains(&id))
            {
                out.push(format!("{}: wd {wd} does not map back", n.path.display()));
            }
            let listed_as = if self.links.contains_key(&id) {
                FileType::Symlink
            } else {
                FileType::Dir
            };
            if !n.full.is_empty()
                && let (Some(parent), Some(name)) = (n.path.parent(), n.path.file_name())
                && let Some(pid) = self.index.lookup(parent)
            {
                let p = self.index.get(pid).expect("live");
                if p.tracks(name) && p.entries.get(name) != Some(listed_as) {
                    out.push(format!(
                        "{}: node exists but its parent lists it as {:?}",
                        n.path.display(),
                        p.entries.get(name)
                    ));
                }
            }
            if n.complete && !n.full.is_empty() {
                for (name, t) in n.entries.iter() {
                    if t != FileType::Dir {
                        continue;
                    }
                    let child = n.path.join(name);
                    let needed = n.full.iter().any(|s| {
                        self.specs
                            .get(s)
                            .is_some_and(|st| !st.matcher.prunes(&child))
                    });
                    if needed && self.index.lookup(&child).is_none() {
                        out.push(format!(
                            "{}: directory entry without a node",
                            child.display()
                        ));
                    }
                }
            }
        }
        for id in self.index.ids() {
            let n = self.index.get(id).expect("listed");
            if n.polled != self.polled.contains_key(&id) {
                out.push(format!(
                    "{}: polled flag {} disagrees with the polled set",
                    n.path.display(),
                    n.polled
                ));
            }
            if !n.full.is_empty() && self.unwatched(id) {
                out.push(format!(
                    "{}: neither watched nor polled nor waiting for a retry",
                    n.path.display()
                ));
            }
        }
        for id in self.polled.keys() {
            if self.index.get(*id).is_none() {
                out.push(format!("polled set holds the freed directory id {id}"));
            }
        }
        #[cfg(target_os = "linux")]
        if let Os::Native(n) = &self.os
            && let Some(kernel) = n.kernel_watches()
        {
            // The kernel drops a watch before it queues its IN_IGNORED, and
            // ours go with inotify_rm_watch: every watch it holds is ours.
            // (And the reading works: after a sync, at least the watch that
            // carried the cookie is there.)
            if kernel.is_empty() && !self.wds.is_empty() {
                out.push(format!(
                    "/proc/self/fdinfo lists no inotify watch while the index holds {}",
                    self.wds.len()
                ));
            }
            for wd in kernel {
                if !self.wds.contains_key(&wd) {
                    out.push(format!("kernel watch {wd} is not in the index (leaked)"));
                }
            }
        }
        for (wd, id) in &self.wds {
            if self.index.get(*id).is_none_or(|n| n.wd != Some(*wd)) {
                out.push(format!("wd {wd} maps to a node without it"));
            }
        }
        for (wd, ids) in &self.aliases {
            if !self.wds.contains_key(wd) {
                out.push(format!("wd {wd} has aliases but no node"));
            }
            for id in ids {
                if self.index.get(*id).is_none_or(|n| n.wd != Some(*wd)) {
                    out.push(format!("wd {wd} has the alias {id} without it"));
                }
            }
        }
        for id in self.links.keys() {
            if self.index.get(*id).is_none() {
                out.push(format!("followed link {id} is not indexed"));
            }
        }
        out
    }

    // ----- backends ----------------------------------------------------

    #[cfg(target_os = "linux")]
    fn native_event(&mut self, e: RawEvent) {
        if e.mask & native::IN_Q_OVERFLOW != 0 {
            // Events of this read up to the marker arrived; what the queue
            // dropped came after the previous read.
            self.overflow(self.prev_read_at);
            return;
        }
        let Some(&id) = self.wds.get(&e.wd) else {
            return; // a watch we already dropped
        };
        if e.mask & native::IN_IGNORED != 0 {
            self.wds.remove(&e.wd);
            let ids: Vec<DirId> = std::iter::once(id)
                .chain(self.aliases.remove(&e.wd).unwrap_or_default())
                .collect();
            for i in &ids {
                if let Some(node) = self.index.get_mut(*i) {
                    node.wd = None;
                }
            }
            for i in ids {
                self.check_top(i, false);
            }
            return;
        }
        self.native_event_at(id, &e);
        // The same directory under other paths (followed links).
        if let Some(aliases) = self.aliases.get(&e.wd) {
            for i in aliases.clone() {
                if self.index.get(i).is_some_and(|n| n.wd == Some(e.wd)) {
                    self.native_event_at(i, &e);
                }
            }
        }
    }

    /// A native event about directory `id`.
    #[cfg(target_os = "linux")]
    fn native_event_at(&mut self, id: DirId, e: &RawEvent) {
        match &e.name {
            None => {
                if e.mask & native::IN_MOVE_SELF != 0 {
                    self.check_top(id, true);
                } else if e.mask & native::IN_DELETE_SELF != 0 {
                    self.check_top(id, false);
                }
                // A directory's own modify/attrib events are noise.
            }
            Some(name) => {
                let m = e.mask;
                let hint = if m & (native::IN_MOVED_FROM | native::IN_MOVED_TO) != 0 {
                    Hint::Moved
                } else if m & native::IN_DELETE != 0 {
                    Hint::Removed
                } else if m & native::IN_CREATE != 0 {
                    Hint::Created
                } else if m & (native::IN_MODIFY | native::IN_ATTRIB) != 0 {
                    Hint::Modified
                } else {
                    Hint::Moved
                };
                self.handle_name(id, name, hint);
            }
        }
    }

    fn notify_event(&mut self, event: notify::Event) {
        use notify::EventKind;
        use notify::event::ModifyKind;
        if event.need_rescan() {
            self.overflow(self.prev_read_at);
        }
        let hint = match event.kind {
            EventKind::Access(_) => return,
            EventKind::Create(_) => Hint::Created,
            EventKind::Remove(_) => Hint::Removed,
            EventKind::Modify(ModifyKind::Name(_)) => Hint::Moved,
            EventKind::Modify(_) => Hint::Modified,
            EventKind::Any | EventKind::Other => Hint::Moved,
        };
        for path in &event.paths {
            let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
                continue;
            };
            if let Some(pid) = self.index.lookup(parent) {
                self.handle_name(pid, name, hint);
            } else if let Some(id) = self.index.lookup(path)
                && matches!(hint, Hint::Removed | Hint::Moved)
            {
                self.check_top(id, hint == Hint::Moved);
            }
        }
    }

    // ----- output ------------------------------------------------------

    fn flush_due(&mut self, now: Instant) {
        for st in self.specs.values_mut() {
            if let Some(changes) = st.coalescer.take_due(now) {
                Self::emit(&self.shared, &mut self.next_seq, st, changes);
            }
        }
    }

    fn emit(
        shared: &Shared,
        next_seq: &mut u64,
        st: &mut SpecState,
        changes: Vec<crate::event::Change>,
    ) {
        if changes.is_empty() {
            return;
        }
        let time = SystemTime::now();
        let batch = Arc::new(ChangeBatch {
            name: st.name.clone(),
            generation: st.generation,
            seq: Seq(*next_seq),
            time,
            changes,
        });
        *next_seq += 1;
        let recent = &mut st.status.recent_batches;
        if recent.len() == RECENT_BATCHES {
            recent.remove(0);
        }
        recent.push(batch.clone());
        st.status.last_event_time = Some(time);
        st.dirty = true;
        shared.send(Event::Changes(batch));
    }

    /// Counters are computed on request only (the entry count walks the
    /// index), after the pass that received the request has settled.
    fn answer_stats(&mut self) {
        if self.stats_waiters.is_empty() {
            return;
        }
        let stats = crate::manager::Stats {
            os_watches: match &self.os {
                #[cfg(target_os = "linux")]
                Os::Native(_) => self.wds.len(),
                Os::Portable(p) => p.count(),
            },
            indexed_dirs: self.index.len(),
            indexed_entries: self.index.entry_count(),
            backlog_paths: self.shared.backlog_paths(),
            os_events: self.os_events,
        };
        for w in self.stats_waiters.drain(..) {
            let _ = w.send(stats);
        }
    }

    fn publish(&mut self) {
        let mut any = false;
        for (sid, st) in self.specs.iter_mut() {
            let covered = |id: &&DirId| self.index.get(**id).is_some_and(|n| n.full.contains(sid));
            let (polled, link_polled) = if self.polled.is_empty() {
                (0, 0)
            } else {
                (
                    self.polled.keys().filter(covered).count(),
                    self.link_polled.iter().filter(covered).count(),
                )
            };
            if st.status.polled_dirs != polled {
                st.status.polled_dirs = polled;
                st.dirty = true;
            }
            let phase = if matches!(st.status.phase, Phase::Failed { .. }) {
                st.status.phase.clone()
            } else if st.missing.is_empty() && st.errors.is_empty() && polled == 0 {
                Phase::Watching
            } else {
                let mut parts = Vec::new();
                if link_polled > 0 {
                    parts.push(format!(
                        "{link_polled} directories at or below followed symlinks polled every {:?} \
                         (the portable backend does not watch through links)",
                        self.poll_interval
                    ));
                }
                if polled > link_polled {
                    let polled = polled - link_polled;
                    parts.push(format!(
                        "{polled} directories polled every {:?} for want of OS watches ({})",
                        self.poll_interval,
                        self.limit_reason
                            .as_deref()
                            .unwrap_or("watch limit reached")
                    ));
                }
                if !st.missing.is_empty() {
                    let list: Vec<String> =
                        st.missing.iter().map(|p| p.display().to_string()).collect();
                    parts.push(format!("waiting for {} to exist", list.join(", ")));
                }
                if !st.errors.is_empty() {
                    let list: Vec<String> = st
                        .errors
                        .iter()
                        .take(5)
                        .map(|(p, e)| format!("{}: {e}", p.display()))
                        .collect();
                    let more = st.errors.len().saturating_sub(5);
                    let tail = if more > 0 {
                        format!(" (and {more} more)")
                    } else {
                        String::new()
                    };
                    parts.push(format!(
                        "{} directories not watched: {}{tail}",
                        st.errors.len(),
                        list.join("; ")
                    ));
                }
                Phase::Degraded {
                    reason: parts.join("; "),
                }
            };
            if st.status.phase != phase {
                st.status.phase = phase;
                st.dirty = true;
            }
            if st.status.watched_dirs != st.dirs {
                st.status.watched_dirs = st.dirs;
                st.dirty = true;
            }
            if !st.dirty {
                continue;
            }
            st.dirty = false;
            any = true;
            let snapshot = Arc::new(st.status.clone());
            self.shared
                .statuses
                .lock()
                .insert(st.name.clone(), snapshot.clone());
            self.shared.send(Event::Status(snapshot));
        }
        if any {
            self.shared.changed.notify_all();
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    /// The raw `getdents64` reader sees exactly what `std::fs::read_dir`
    /// sees, across many buffer refills, with 255-byte and non-UTF-8 names,
    /// and leaves sync cookies out.
    #[test]
    fn read_listing_equals_std_read_dir() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        for i in 0..3000 {
            std::fs::write(root.join(format!("file-{i:05}")), "x").unwrap();
        }
        for i in 0..40 {
            let mut name = vec![b'n'; 250];
            name.extend_from_slice(format!("{i:05}").as_bytes());
            std::fs::create_dir(root.join(OsStr::from_bytes(&name))).unwrap();
        }
        std::fs::write(root.join(OsStr::from_bytes(b"odd\xff\xfe")), "x").unwrap();
        std::os::unix::fs::symlink("nowhere", root.join("link")).unwrap();
        std::fs::write(root.join(format!("{COOKIE_PREFIX}1")), "c").unwrap();
        let mut cookies = Vec::new();
        let mut got = read_listing(root, &mut cookies).unwrap();
        got.sort();
        let mut want: Vec<(OsString, FileType)> = std::fs::read_dir(root)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.file_name(), file_type_of(e.file_type().unwrap()))
            })
            .filter(|(n, _)| !is_cookie(n))
            .collect();
        want.sort();
        assert_eq!(got.len(), 3000 + 40 + 2);
        assert_eq!(got, want);
        assert_eq!(cookies, vec![root.join(format!("{COOKIE_PREFIX}1"))]);
        // Errors keep their kinds: the engine tells "gone" from the rest.
        let e = read_listing(&root.join("missing"), &mut cookies).unwrap_err();
        assert!(gone(&e), "{e:?}");
        let e = read_listing(&root.join("file-00001"), &mut cookies).unwrap_err();
        assert!(gone(&e), "{e:?}");
    }
}
