//! Test helpers: a collector that waits on conditions with deadlines (never
//! a fixed sleep), a mirror that rebuilds a tree from change batches, and
//! the example binaries run as processes (`example`); what does not know
//! specwatch (processes, FUSE mounts, skips) is the workspace's `testkit`,
//! re-exported here.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use specwatch::{
    Backend, Change, ChangeBatch, ChangeKind, Event, FileType, Manager, Phase, WatchSpec,
    WatchStatus,
};

pub mod example;
// Each test binary uses some of these.
#[cfg(unix)]
#[allow(unused_imports)]
pub use testkit::faultfs;
#[allow(unused_imports)]
pub use testkit::fuse;
#[allow(unused_imports)]
pub use testkit::{WAIT, note, retry_while_handles_open, skip, skip_on_wine, wine};
pub mod procstat;
pub mod workload;

/// The phase `name` was last published with, as `c` collected it.
pub fn phase(c: &Collector, name: &str) -> Option<Phase> {
    c.statuses
        .get(name)
        .and_then(|v| v.last())
        .map(|s| s.phase.clone())
}

/// Runs each named test body (`fn(Backend)`) once per backend, as tests
/// in modules `native` (Linux only: inotify), `portable` and `poll` (the
/// poller looks every [`POLL`]). A name may carry attributes
/// (`#[cfg(unix)] name`), given to each of its tests.
#[macro_export]
macro_rules! both_backends {
    ($($(#[$m:meta])* $name:ident),* $(,)?) => {
        #[cfg(target_os = "linux")]
        mod native {
            $($(#[$m])* #[test] fn $name() { super::$name(specwatch::Backend::Native) })*
        }
        mod portable {
            $($(#[$m])* #[test] fn $name() { super::$name(specwatch::Backend::Portable) })*
        }
        mod poll {
            $($(#[$m])* #[test] fn $name() { super::$name($crate::common::POLL_BACKEND) })*
        }
    };
}

/// How often the poll backend looks in tests.
pub const POLL: Duration = Duration::from_millis(20);

/// The poll backend as tests use it.
pub const POLL_BACKEND: Backend = Backend::Poll { interval: POLL };

/// The backend that hears the OS's events here: `Native` (inotify) on
/// Linux, `Portable` (notify: ReadDirectoryChangesW, FSEvents, kqueue)
/// elsewhere. Tests about events in general use it; tests of inotify
/// itself name `Native` and are Linux only.
pub const EVENTS: Backend = if cfg!(target_os = "linux") {
    Backend::Native
} else {
    Backend::Portable
};

/// The event backend a manager running [`EVENTS`] does not run.
pub const OTHER_EVENTS: Backend = if cfg!(target_os = "linux") {
    Backend::Portable
} else {
    Backend::Native
};

/// Skips (true) a test of backend `b` that writes into subdirectories
/// that existed before its watch, where Wine's portable backend reports
/// nothing (tests/wine_fidelity.rs).
pub fn skip_old_subdirs_on_wine(b: Backend) -> bool {
    b == Backend::Portable
        && skip_on_wine(
            "Wine reports nothing in a subdirectory older than the watch (tests/wine_fidelity.rs)",
        )
}

/// What is broken in the engine's index (`Manager::check_index`, a test
/// hook): empty when every invariant holds. Without the `test-hooks`
/// feature (the library as users build it, which .ci/run tests too) there
/// is nothing to ask: empty.
pub fn index_problems(m: &Manager) -> Vec<String> {
    #[cfg(feature = "test-hooks")]
    return m.check_index().expect("check_index");
    #[cfg(not(feature = "test-hooks"))]
    {
        let _ = m;
        Vec::new()
    }
}

pub fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

pub fn backends() -> Vec<Backend> {
    vec![Backend::Native, Backend::Portable, POLL_BACKEND]
}

/// A manager on `backend` (git's global excludes file: none, so that no
/// test reads its user's home).
pub fn manager(backend: Backend) -> Manager {
    Manager::builder()
        .backend(backend)
        .git_excludes_file(None)
        .build()
        .expect("manager starts")
}

/// A spec with a short quiet window, so tests are quick.
pub fn spec(paths: &[&Path]) -> WatchSpec {
    WatchSpec::new(paths.iter().map(|p| p.to_path_buf())).quiet_window(Duration::from_millis(10))
}

pub fn start(m: &Manager, name: &str, spec: WatchSpec) -> WatchStatus {
    m.apply(name, spec).expect("apply");
    m.wait_watching(name, WAIT)
        .unwrap_or_else(|e| panic!("spec {name} never became watched: {e}"))
}

/// Everything received, per spec.
pub struct Collector {
    rx: Receiver<Event>,
    pub batches: HashMap<String, Vec<Arc<ChangeBatch>>>,
    pub statuses: HashMap<String, Vec<Arc<WatchStatus>>>,
    pub deleted: Vec<String>,
}

impl Collector {
    pub fn new(rx: Receiver<Event>) -> Collector {
        Collector {
            rx,
            batches: HashMap::new(),
            statuses: HashMap::new(),
            deleted: Vec::new(),
        }
    }

    fn take(&mut self, ev: Event) {
        match ev {
            Event::Changes(b) => self.batches.entry(b.name.clone()).or_default().push(b),
            Event::Status(s) => self.statuses.entry(s.name.clone()).or_default().push(s),
            Event::Deleted(n) => self.deleted.push(n),
            _ => {}
        }
    }

    /// Receives until `done` holds; panics naming `what` at the deadline.
    pub fn wait(&mut self, what: &str, done: impl FnMut(&Collector) -> bool) {
        self.wait_within(what, WAIT, done);
    }

    /// [`wait`](Self::wait) with a deadline of `limit` (for what takes
    /// longer by nature: a whole tree read again under Wine).
    pub fn wait_within(
        &mut self,
        what: &str,
        limit: std::time::Duration,
        mut done: impl FnMut(&Collector) -> bool,
    ) {
        let deadline = Instant::now() + limit;
        loop {
            if done(self) {
                return;
            }
            match self.rx.recv_deadline(deadline) {
                Ok(ev) => self.take(ev),
                Err(_) => {
                    let summary: Vec<String> = self
                        .batches
                        .iter()
                        .map(|(n, b)| {
                            let all: Vec<String> = b
                                .iter()
                                .flat_map(|b| b.changes.iter())
                                .take(30)
                                .map(|c| format!("{:?} {}", c.kind, c.path.display()))
                                .collect();
                            format!("{n}: {all:?}")
                        })
                        .collect();
                    panic!(
                        "timed out after {limit:?} waiting for {what}; received so far: {summary:?}"
                    );
                }
            }
        }
    }

    /// Takes whatever is already queued, without waiting.
    pub fn drain(&mut self) {
        while let Ok(ev) = self.rx.try_recv() {
            self.take(ev);
        }
    }

    pub fn changes(&self, spec: &str) -> Vec<Change> {
        self.batches
            .get(spec)
            .map(|b| b.iter().flat_map(|b| b.changes.iter().cloned()).collect())
            .unwrap_or_default()
    }

    pub fn kinds(&self, spec: &str, path: &Path) -> Vec<ChangeKind> {
        self.changes(spec)
            .into_iter()
            .filter(|c| c.path == path)
            .map(|c| c.kind)
            .collect()
    }

    pub fn has(&self, spec: &str, path: &Path, kind: ChangeKind) -> bool {
        self.batches.get(spec).is_some_and(|bs| {
            bs.iter()
                .any(|b| b.changes.iter().any(|c| c.path == path && c.kind == kind))
        })
    }

    pub fn clear(&mut self) {
        self.batches.clear();
        self.statuses.clear();
    }

    /// Writes a fresh marker file in `dir` and waits until `spec` reports
    /// it: every event the OS queued before it has been handled and batched
    /// by then. Returns the marker's path.
    pub fn barrier(&mut self, spec: &str, dir: &Path) -> PathBuf {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = dir.join(format!("barrier-{}-{n}", std::process::id()));
        std::fs::write(&p, b"b").unwrap();
        self.wait(&format!("barrier {} in spec {spec}", p.display()), |c| {
            c.has(spec, &p, ChangeKind::Created)
        });
        p
    }
}

/// A tree rebuilt from change batches.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Mirror(pub BTreeMap<PathBuf, FileType>);

impl Mirror {
    /// The tree below `root` as on disk now (symlinks not followed),
    /// `root` itself excluded.
    pub fn of_disk(root: &Path) -> Mirror {
        Self::walk(root, false)
    }

    /// The tree below `root` as on disk now, following symlinks to
    /// directories the way `follow_symlinks` does: a link is listed as
    /// `Symlink` and, unless it leads to its own directory or an ancestor,
    /// what its target holds is listed below it.
    pub fn of_disk_following(root: &Path) -> Mirror {
        Self::walk(root, true)
    }

    fn walk(root: &Path, follow: bool) -> Mirror {
        let ident = |p: &Path| {
            let m = std::fs::metadata(p).ok().filter(|m| m.is_dir())?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::MetadataExt;
                Some((m.dev(), m.ino()))
            }
            #[cfg(not(unix))]
            {
                let _ = m;
                std::fs::canonicalize(p).ok()
            }
        };
        let mut m = BTreeMap::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in rd.flatten() {
                let ft = e.file_type().unwrap();
                let p = e.path();
                let t = if ft.is_dir() {
                    stack.push(p.clone());
                    FileType::Dir
                } else if ft.is_file() {
                    FileType::File
                } else if ft.is_symlink() {
                    if follow
                        && let Some(target) = ident(&p)
                        && !p
                            .ancestors()
                            .skip(1)
                            .any(|a| ident(a).as_ref() == Some(&target))
                    {
                        stack.push(p.clone());
                    }
                    FileType::Symlink
                } else {
                    FileType::Other
                };
                m.insert(p, t);
            }
        }
        Mirror(m)
    }

    pub fn apply(&mut self, c: &Change) {
        match c.kind {
            ChangeKind::Created | ChangeKind::Modified => {
                // What a followed link leads to is reported on its own.
                if !matches!(c.file_type, FileType::Dir | FileType::Symlink) {
                    self.remove_below(&c.path);
                }
                self.0.insert(c.path.clone(), c.file_type);
            }
            ChangeKind::Removed => {
                self.0.remove(&c.path);
                self.remove_below(&c.path);
            }
        }
    }

    fn remove_below(&mut self, p: &Path) {
        let below: Vec<PathBuf> = self
            .0
            .range(p.to_path_buf()..)
            .map(|(k, _)| k.clone())
            .take_while(|k| k.starts_with(p))
            .filter(|k| k != p)
            .collect();
        for k in below {
            self.0.remove(&k);
        }
    }

    pub fn without(mut self, pred: impl Fn(&Path) -> bool) -> Mirror {
        self.0.retain(|k, _| !pred(k));
        self
    }
}

/// Permission bits, made to apply in tests run as root. Unix only: Windows
/// has no mode bits (its ACLs would be another test).
#[cfg(unix)]
mod caps {
    /// Linux: capabilities are per thread, so root can drop the two that
    /// override permission bits for the calling thread alone.
    #[cfg(target_os = "linux")]
    mod linux {
        #[repr(C)]
        struct CapHeader {
            version: u32,
            pid: i32,
        }

        #[repr(C)]
        #[derive(Clone, Copy, Default)]
        pub struct CapData {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }

        const CAP_VERSION_3: u32 = 0x2008_0522;

        /// `capset` for the calling thread.
        pub fn capset(d: &[CapData; 2]) -> i64 {
            let mut h = CapHeader {
                version: CAP_VERSION_3,
                pid: 0,
            };
            // SAFETY: a valid header and two data structs, as capset(2) wants.
            unsafe { libc::syscall(libc::SYS_capset, &mut h, d.as_ptr()) }
        }

        /// Drops `CAP_DAC_OVERRIDE` and `CAP_DAC_READ_SEARCH` from the
        /// calling thread's effective set; returns what to restore.
        pub fn drop_dac() -> [CapData; 2] {
            const DAC_BITS: u32 = (1 << 1) | (1 << 2);
            let mut h = CapHeader {
                version: CAP_VERSION_3,
                pid: 0,
            };
            let mut d = [CapData::default(); 2];
            // SAFETY: a valid header and room for two data structs.
            let rc = unsafe { libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()) };
            assert_eq!(rc, 0, "capget: {}", std::io::Error::last_os_error());
            let mut lowered = d;
            lowered[0].effective &= !DAC_BITS;
            let rc = capset(&lowered);
            assert_eq!(rc, 0, "capset: {}", std::io::Error::last_os_error());
            d
        }
    }

    #[cfg(target_os = "linux")]
    type Saved = [linux::CapData; 2];
    #[cfg(not(target_os = "linux"))]
    type Saved = ();

    /// Makes permission bits apply to the calling thread and the threads it
    /// spawns from now on (a manager built afterwards: its engine and reader
    /// threads), until the guard is dropped.
    ///
    /// As root on Linux, this drops `CAP_DAC_OVERRIDE` and
    /// `CAP_DAC_READ_SEARCH` from the thread's effective capability set
    /// (capabilities are per thread on Linux; the permitted set is kept, so
    /// the drop restores them). Nothing machine-wide changes. Elsewhere it
    /// changes nothing. Panics, naming what failed, if permission bits
    /// still do not deny a read afterwards (root on another Unix): a
    /// permission test must not pass vacuously.
    pub fn permissions_apply() -> CapsGuard {
        #[cfg(target_os = "linux")]
        // SAFETY: geteuid has no preconditions.
        let saved = (unsafe { libc::geteuid() } == 0).then(linux::drop_dac);
        #[cfg(not(target_os = "linux"))]
        let saved: Option<Saved> = None;
        let guard = CapsGuard(saved);
        // Prove it: a directory of mode 000 must now refuse to be read.
        use std::os::unix::fs::PermissionsExt;
        let probe = tempfile::tempdir().expect("tempdir");
        let locked = probe.path().join("locked");
        std::fs::create_dir(&locked).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        let denied = std::fs::read_dir(&locked).is_err();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(
            denied,
            "permission bits still do not deny reads to this thread (euid {}); \
             the permission test cannot run here",
            // SAFETY: geteuid has no preconditions.
            unsafe { libc::geteuid() }
        );
        guard
    }

    /// Restores the thread's capabilities on drop (see [`permissions_apply`]).
    pub struct CapsGuard(Option<Saved>);

    impl Drop for CapsGuard {
        fn drop(&mut self) {
            #[cfg(target_os = "linux")]
            if let Some(d) = &self.0 {
                linux::capset(d);
            }
        }
    }
}
#[cfg(unix)]
#[allow(unused_imports, reason = "each test binary uses only some helpers")]
pub use caps::{CapsGuard, permissions_apply};
