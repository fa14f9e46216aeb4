//! The feed's test helpers: a `redis-server` of the test's own on a free
//! loopback port (stopped and started again as the test says), replicas
//! each on its own bindfs mount of one storage, and a consumer that
//! rebuilds the tree from a replica's events and checks its seqs.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use specwatch::crossbeam_channel::Receiver;
use specwatch::{ChangeBatch, ChangeKind, FileType, Manager, Meta, Seq, WatchSpec};
use specwatch_feed::{FeedEvent, FeedOptions, Replica, ResyncReason, Role};

use testkit::fuse::SharedStorage;
pub use testkit::{WAIT, note};

/// A `redis-server` of the test's own (testkit's), and a connection
/// for the test's own commands.
pub use testkit::redis::{Redis, redis_or_skip};

/// A connection to the test's `redis-server`, for its own commands.
pub trait Con {
    fn con(&self) -> redis::Connection;
}

impl Con for Redis {
    fn con(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap()
    }
}

/// The storage, and each replica's view of it (testkit's
/// [`SharedStorage`]: a bindfs mount per replica, or without FUSE the
/// storage itself for all).
pub struct Storage(SharedStorage);

impl std::ops::Deref for Storage {
    type Target = SharedStorage;
    fn deref(&self) -> &SharedStorage {
        &self.0
    }
}

impl Storage {
    pub fn new() -> Storage {
        Storage(SharedStorage::new())
    }

    /// A new mount of the storage for one replica.
    pub fn mount(&mut self) -> PathBuf {
        self.0.mount()
    }

    pub fn write(&self, rel: &str, content: &str) {
        let p = self.src.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    pub fn remove(&self, rel: &str) {
        let p = self.src.join(rel);
        if p.is_dir() {
            std::fs::remove_dir_all(p).unwrap();
        } else {
            std::fs::remove_file(p).unwrap();
        }
    }

    /// The tree on disk now (relative paths).
    pub fn tree(&self) -> Tree {
        tree_of(&self.src)
    }
}

/// What a test compares of an entry: its type, and a file's size, mtime
/// and inode.
pub type Seen = (
    FileType,
    Option<(u64, Option<std::time::SystemTime>, Option<u64>)>,
);

/// Relative path -> what is there.
pub type Tree = BTreeMap<PathBuf, Seen>;

fn key(ft: FileType, meta: Option<&Meta>) -> Seen {
    (
        ft,
        meta.filter(|_| ft == FileType::File)
            .map(|m| (m.size, m.mtime, m.inode)),
    )
}

pub fn tree_of(root: &Path) -> Tree {
    use std::os::unix::fs::MetadataExt;
    let mut out = Tree::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            // A replica's sync cookie (its scan's barrier): never reported,
            // and gone at once.
            if e.file_name()
                .to_string_lossy()
                .starts_with(".specwatch-cookie-")
            {
                continue;
            }
            let m = std::fs::symlink_metadata(&p).unwrap();
            let ft = if m.is_dir() {
                stack.push(p.clone());
                FileType::Dir
            } else if m.is_file() {
                FileType::File
            } else if m.file_type().is_symlink() {
                FileType::Symlink
            } else {
                FileType::Other
            };
            let meta = Meta::new(m.len(), m.modified().ok(), Some(m.ino()));
            out.insert(
                p.strip_prefix(root).unwrap().to_path_buf(),
                key(ft, Some(&meta)),
            );
        }
    }
    out
}

/// Manager settings of the tests' replicas: shared storage (bindfs, a
/// FUSE file system) is polled every `poll`.
pub fn options(redis: &Redis, name: &str, root: &Path, poll: Duration) -> FeedOptions {
    FeedOptions::new(
        redis.url(),
        name,
        WatchSpec::new([root]).quiet_window(Duration::from_millis(20)),
    )
    .unwrap()
    .lease_ttl(Duration::from_secs(1))
    .manager(move || {
        Manager::builder()
            .poll_interval(poll)
            .git_excludes_file(None)
            .build()
    })
}

/// A replica and what its consumer rebuilt from its events.
pub struct Consumer {
    pub replica: Option<Replica>,
    rx: Receiver<FeedEvent>,
    pub root: PathBuf,
    pub tree: Tree,
    pub resyncs: Vec<ResyncReason>,
    pub roles: Vec<Role>,
    /// Every batch (not pictures), in order, with when it arrived.
    pub batches: Vec<(Instant, Arc<ChangeBatch>)>,
    pub last: Option<Seq>,
    /// What broke a promise: a seq not above the last, another instance
    /// without a resync.
    pub violations: Vec<String>,
}

impl Consumer {
    pub fn start(opts: FeedOptions) -> Consumer {
        let root = opts.root().to_path_buf();
        let (replica, rx) = Replica::start(opts).unwrap();
        Consumer {
            replica: Some(replica),
            rx,
            root,
            tree: Tree::new(),
            resyncs: Vec::new(),
            roles: Vec::new(),
            batches: Vec::new(),
            last: None,
            violations: Vec::new(),
        }
    }

    pub fn replica(&self) -> &Replica {
        self.replica.as_ref().unwrap()
    }

    pub fn role(&self) -> Role {
        self.replica().status().role
    }

    fn rel(&self, p: &Path) -> PathBuf {
        p.strip_prefix(&self.root)
            .unwrap_or_else(|_| panic!("{} is not below {}", p.display(), self.root.display()))
            .to_path_buf()
    }

    fn take(&mut self, ev: FeedEvent) {
        match ev {
            FeedEvent::Resync { reason, picture } => {
                self.tree.clear();
                for c in &picture.changes {
                    assert_eq!(c.kind, ChangeKind::Created, "a picture holds creations");
                    let k = key(c.file_type, c.meta.as_deref());
                    self.tree.insert(self.rel(&c.path), k);
                }
                self.resyncs.push(reason);
                self.last = Some(picture.seq);
            }
            FeedEvent::Changes(b) => {
                match self.last {
                    Some(l) if l.instance() != b.seq.instance() => self.violations.push(format!(
                        "batch {} of another instance than {l} without a resync",
                        b.seq
                    )),
                    Some(l) if b.seq.number() <= l.number() => self
                        .violations
                        .push(format!("batch {} after {l}: not increasing", b.seq)),
                    None => self
                        .violations
                        .push(format!("batch {} before any picture", b.seq)),
                    _ => {}
                }
                self.last = Some(b.seq);
                for c in &b.changes {
                    let rel = self.rel(&c.path);
                    match c.kind {
                        ChangeKind::Removed => {
                            let below: Vec<PathBuf> = self
                                .tree
                                .keys()
                                .filter(|k| k.starts_with(&rel))
                                .cloned()
                                .collect();
                            for k in below {
                                self.tree.remove(&k);
                            }
                        }
                        _ => {
                            self.tree.insert(rel, key(c.file_type, c.meta.as_deref()));
                        }
                    }
                }
                self.batches.push((Instant::now(), b));
            }
            FeedEvent::Role(r) => self.roles.push(r),
            _ => {}
        }
    }

    /// Takes what is queued, without waiting.
    pub fn drain(&mut self) {
        while let Ok(ev) = self.rx.try_recv() {
            self.take(ev);
        }
    }

    /// Receives until `done` holds; panics naming `what` at the deadline.
    pub fn wait(&mut self, what: &str, mut done: impl FnMut(&Consumer) -> bool) {
        let deadline = Instant::now() + WAIT;
        loop {
            self.drain();
            if done(self) {
                return;
            }
            match self
                .rx
                .recv_deadline(deadline.min(Instant::now() + Duration::from_millis(50)))
            {
                Ok(ev) => self.take(ev),
                Err(_) if Instant::now() < deadline => {}
                Err(_) => panic!(
                    "{}: timed out after {WAIT:?} waiting for {what}; status {:?}, resyncs {:?}, roles {:?}, {} entries",
                    self.root.display(),
                    self.replica.as_ref().map(Replica::status),
                    self.resyncs,
                    self.roles,
                    self.tree.len()
                ),
            }
        }
    }

    pub fn no_violations(&self) {
        assert!(
            self.violations.is_empty(),
            "{}: {:?}",
            self.root.display(),
            self.violations
        );
    }
}

/// Waits until every consumer's tree equals the disk's and its replica
/// is in a settled role (watching, following or local, as `roles` allows).
pub fn wait_all_equal(cs: &mut [Consumer], storage: &Storage, what: &str) {
    for c in cs.iter_mut() {
        c.wait(&format!("{what}: the tree equal to the disk"), |c| {
            c.tree == storage.tree()
        });
        c.no_violations();
    }
}

/// Waits until exactly one of `cs` is watching and the others follow,
/// and returns the watcher's index.
pub fn one_watcher(cs: &mut [Consumer]) -> usize {
    let deadline = Instant::now() + WAIT;
    loop {
        for c in cs.iter_mut() {
            c.drain();
        }
        let roles: Vec<Role> = cs.iter().map(Consumer::role).collect();
        let watching: Vec<usize> = (0..cs.len())
            .filter(|&i| roles[i] == Role::Watching)
            .collect();
        if watching.len() == 1
            && roles
                .iter()
                .all(|r| matches!(r, Role::Watching | Role::Following))
            && cs.iter().all(|c| c.replica().status().whole)
        {
            return watching[0];
        }
        assert!(
            Instant::now() < deadline,
            "no single watcher within {WAIT:?}: roles {roles:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
