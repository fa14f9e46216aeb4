//! The index with `--feed` (issue 33): what the server does with the
//! change feed of `specwatch-feed` besides applying its batches.
//!
//! - **A resync keeps what it can** ([`carry`]): a
//!   [`FeedEvent::Resync`](specwatch_feed::FeedEvent::Resync) hands the
//!   whole tree as a picture (each entry with the size, mtime and inode
//!   the watcher saw); the index is built again from it, taking each
//!   package the index already held from a file with that size, mtime and
//!   inode as it is (if its read had settled, else reading it again and
//!   hashing it, as the restart cache does), and reading the others.
//! - **The watcher's snapshot** ([`encode`], [`decode`], [`Putter`]): the
//!   replica holding the lease puts the index (its tenants, and each
//!   package's entry in the restart cache's form) in Redis with the seq
//!   it reflects, a second after the index's packages last changed (at
//!   most 10 s after the first change not put) and when it becomes the
//!   watcher; a replica that starts with `--feed` loads it and follows the
//!   feed from that seq, instead of reading every package.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use specwatch::{ChangeBatch, ChangeKind, FileType, Seq};
use specwatch_feed::{Replica, Role};
use tracing::{debug, info, warn};

use crate::cache::{self, Options, Verdicts, settled};
use crate::chart::{ChartVersion, READER};
use crate::index::{Charts, Index, key_of};
use crate::snapshot::Snapshot;
use crate::storage::from_time;

/// What a snapshot's first line says it is.
const FORMAT: &str = "chart_index feed snapshot";
/// A snapshot is put once the index's packages have not changed for this
/// long...
const QUIET: Duration = Duration::from_secs(1);
/// ... but not later than this after the first change not put.
const MAX_DELAY: Duration = Duration::from_secs(10);

/// The verdicts for building the index again from `picture` (every entry
/// of the storage, as of a resync): a package of `held` (what the index
/// held, keyed by path below the root) whose file has, in the picture, the
/// size, mtime and inode it was read from is taken as it is if that read
/// had settled (see the `cache` module), else read again and hashed;
/// every other package is read. Pure: no I/O.
pub fn carry(held: HashMap<String, ChartVersion>, root: &Path, picture: &ChangeBatch) -> Verdicts {
    let mut held = held;
    let mut v = Verdicts::default();
    for c in &picture.changes {
        if c.kind == ChangeKind::Removed || c.file_type != FileType::File {
            continue;
        }
        let Some(key) = key_of(root, &c.path).filter(|k| k.ends_with(".tgz")) else {
            continue;
        };
        let entry = held.remove(&key);
        let same = |e: &ChartVersion| {
            let Some(m) = c.meta.as_deref() else {
                return false;
            };
            e.source.is_some_and(|s| {
                s.stamp.size == m.size
                    && Some(from_time(s.stamp.mtime)) == m.mtime
                    && s.stamp.ino == m.inode
            })
        };
        match entry {
            Some(e) if same(&e) => {
                if e.source.as_ref().is_some_and(settled) {
                    v.reuse.insert(key, e);
                } else {
                    v.verify.insert(key, e);
                }
            }
            _ => v.read += 1,
        }
    }
    v.dropped = held.len();
    v
}

/// The options a feed's snapshot is written under: its keys are relative
/// to the storage's root, which is mounted elsewhere on each host, so the
/// feed's name stands for it.
fn options(feed: &str) -> Options {
    Options {
        storage: format!("feed:{feed}"),
        reader: READER,
    }
}

/// A snapshot's first line.
#[derive(Serialize, Deserialize)]
struct Head {
    format: String,
    /// Every tenant, packages or not.
    tenants: Vec<String>,
}

/// The snapshot of `index` for feed `feed`: a line naming its tenants,
/// then the restart cache's file of its packages. `None` while a package
/// has no settled read to describe (a file that changed while it was
/// read: its next batch reads it again; the snapshot waits for that).
pub fn encode(feed: &str, index: &Snapshot) -> Option<Vec<u8>> {
    let head = Head {
        format: FORMAT.into(),
        tenants: index.each_tenant().map(|(k, _)| k.to_owned()).collect(),
    };
    let packages: Vec<(String, &ChartVersion)> = index.packages().collect();
    let (body, n) = cache::encode(
        &options(feed),
        packages.iter().map(|(k, c)| (k.as_str(), *c)),
    );
    if n != packages.len() {
        return None;
    }
    let mut out = serde_json::to_vec(&head).ok()?;
    out.push(b'\n');
    out.extend_from_slice(&body);
    Some(out)
}

/// The index a snapshot of feed `feed` holds, as of `seq` (its number);
/// or why it cannot be used.
pub fn decode(feed: &str, bytes: &[u8], seq: u64) -> Result<Index, String> {
    let newline = bytes
        .iter()
        .position(|b| *b == b'\n')
        .ok_or("not a chart_index feed snapshot (no first line)")?;
    let head: Head = serde_json::from_slice(&bytes[..newline])
        .ok()
        .filter(|h: &Head| h.format == FORMAT)
        .ok_or("not a chart_index feed snapshot")?;
    let packages = cache::decode(&bytes[newline + 1..], &options(feed))?;
    let mut tenants: BTreeMap<String, Charts> = head
        .tenants
        .into_iter()
        .map(|t| (t, Charts::new()))
        .collect();
    for (key, c) in packages {
        let (tenant, file) = key.rsplit_once('/').unwrap_or(("", &key));
        let charts = tenants
            .get_mut(tenant)
            .ok_or_else(|| format!("package {key} of a tenant the snapshot does not list"))?;
        charts.insert(file.to_owned(), c);
    }
    Ok(Index::from_tenants(
        seq,
        tenants.into_iter().map(|(k, c)| (k, Arc::new(c))).collect(),
    ))
}

/// The thread that puts the watcher's snapshots in Redis (see the
/// module's docs); [`Putter::offer`] hands it each snapshot published.
pub struct Putter {
    tx: mpsc::Sender<(Seq, Arc<Snapshot>)>,
}

impl Putter {
    /// Starts the thread; it ends when the `Putter` is dropped.
    pub fn spawn(replica: Weak<Replica>, feed: String) -> std::io::Result<Putter> {
        let (tx, rx) = mpsc::channel::<(Seq, Arc<Snapshot>)>();
        std::thread::Builder::new()
            .name("feed-snapshot".into())
            .spawn(move || {
                while let Ok(mut latest) = rx.recv() {
                    let first = Instant::now();
                    loop {
                        let left = MAX_DELAY.saturating_sub(first.elapsed());
                        match rx.recv_timeout(QUIET.min(left)) {
                            Ok(next) => latest = next,
                            Err(RecvTimeoutError::Timeout) => break,
                            Err(RecvTimeoutError::Disconnected) => return,
                        }
                        if left.is_zero() {
                            break;
                        }
                    }
                    match replica.upgrade() {
                        Some(r) => put(&r, &feed, latest.0, &latest.1),
                        None => return,
                    }
                }
            })?;
        Ok(Putter { tx })
    }

    /// The index as of `seq` is `snapshot`: put it, if this replica still
    /// watches by then.
    pub fn offer(&self, seq: Seq, snapshot: Arc<Snapshot>) {
        let _ = self.tx.send((seq, snapshot));
    }
}

fn put(replica: &Replica, feed: &str, seq: Seq, snapshot: &Snapshot) {
    if replica.status().role != Role::Watching {
        return;
    }
    let t = Instant::now();
    let Some(bytes) = encode(feed, snapshot) else {
        debug!("feed: snapshot at seq {seq} not put: a package's read had not settled");
        return;
    };
    match replica.put_snapshot(seq, &bytes) {
        Ok(()) => info!(
            "feed: snapshot put at seq {}: {} tenants, {} bytes, in {} ms",
            seq.number(),
            snapshot.each_tenant().count(),
            bytes.len(),
            t.elapsed().as_millis()
        ),
        Err(specwatch_feed::Error::NotWatching { .. }) => {}
        Err(e) => warn!("feed: snapshot at seq {} not put: {e}", seq.number()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::Source;
    use crate::proxy::Links;
    use crate::storage::{Stamp, to_time};
    use specwatch::{Change, Generation, Meta};
    use std::path::PathBuf;
    use std::time::SystemTime;

    fn version(name: &str, stamp: Stamp, read_at: SystemTime) -> ChartVersion {
        let meta = crate::chart::ChartMeta {
            name: name.into(),
            version: "1.0.0".into(),
            api_version: "v2".into(),
            ..Default::default()
        };
        ChartVersion {
            semver: crate::chart::helm_version("1.0.0").unwrap(),
            meta,
            digest: "ab".repeat(32),
            created: SystemTime::UNIX_EPOCH,
            source: Some(Source {
                stamp,
                read_at: to_time(read_at),
            }),
        }
    }

    fn stamp(size: u64, mtime: SystemTime, ino: u64) -> Stamp {
        Stamp {
            size,
            mtime: to_time(mtime),
            ctime: Some(to_time(mtime)),
            ino: Some(ino),
        }
    }

    fn picture(root: &Path, files: &[(&str, u64, SystemTime, u64)]) -> ChangeBatch {
        let changes = files.iter().map(|(p, size, mtime, ino)| {
            Change::new(root.join(p), ChangeKind::Created, FileType::File).with_meta(Meta::new(
                *size,
                Some(*mtime),
                Some(*ino),
            ))
        });
        ChangeBatch::new(
            "charts",
            Generation(1),
            Seq::new(7, 3),
            SystemTime::now(),
            changes,
        )
    }

    #[test]
    fn a_resync_takes_the_packages_whose_file_is_as_read() {
        let root = PathBuf::from("/srv/charts");
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let later = t0 + Duration::from_secs(60);
        let mut held = HashMap::new();
        held.insert(
            "a/x-1.0.0.tgz".into(),
            version("x", stamp(10, t0, 1), later),
        );
        held.insert(
            "a/y-1.0.0.tgz".into(),
            version("y", stamp(10, t0, 2), later),
        );
        // Read within the settling time of its change: verified.
        held.insert("z-1.0.0.tgz".into(), version("z", stamp(10, t0, 3), t0));
        held.insert(
            "gone-1.0.0.tgz".into(),
            version("g", stamp(1, t0, 4), later),
        );
        let p = picture(
            &root,
            &[
                ("a/x-1.0.0.tgz", 10, t0, 1),
                // Another size: read.
                ("a/y-1.0.0.tgz", 11, t0, 2),
                ("z-1.0.0.tgz", 10, t0, 3),
                // New: read.
                ("b/n-1.0.0.tgz", 5, t0, 9),
            ],
        );
        let v = carry(held, &root, &p);
        assert_eq!(
            v.reuse.keys().collect::<Vec<_>>(),
            ["a/x-1.0.0.tgz"],
            "reused"
        );
        assert_eq!(v.verify.keys().collect::<Vec<_>>(), ["z-1.0.0.tgz"]);
        assert_eq!((v.read, v.dropped), (2, 1));
        // Another inode (a file replaced by a rename): read.
        let mut held = HashMap::new();
        held.insert(
            "a/x-1.0.0.tgz".into(),
            version("x", stamp(10, t0, 1), later),
        );
        let v = carry(
            held,
            &root,
            &picture(&root, &[("a/x-1.0.0.tgz", 10, t0, 8)]),
        );
        assert_eq!((v.reuse.len(), v.read), (0, 1));
    }

    #[test]
    fn a_snapshot_gives_back_the_index_with_every_tenant() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let later = t0 + Duration::from_secs(60);
        let mut tenants = BTreeMap::new();
        tenants.insert(String::new(), Arc::new(Charts::new()));
        tenants.insert("empty".to_owned(), Arc::new(Charts::new()));
        let mut org = Charts::new();
        org.insert("x-1.0.0.tgz".into(), version("x", stamp(10, t0, 1), later));
        tenants.insert("org/team".to_owned(), Arc::new(org));
        let mut index = Index::from_tenants(5, tenants);
        let touched = index.take_touched();
        let snap = Snapshot::empty().next(&index, &touched, &Links::default());
        let bytes = encode("charts", &snap).expect("every package has a settled read");
        let back = decode("charts", &bytes, 5).unwrap();
        assert_eq!(back.seq, 5);
        assert_eq!(
            back.tenants.keys().collect::<Vec<_>>(),
            ["", "empty", "org/team"]
        );
        let x = &back.tenants["org/team"]["x-1.0.0.tgz"];
        assert_eq!(
            (x.meta.name.as_str(), x.digest.as_str()),
            ("x", &*"ab".repeat(32))
        );
        // Another feed's, or damaged: refused, saying why.
        let e = decode("other", &bytes, 5).err().unwrap();
        assert!(e.contains("other options"), "{e}");
        let mut cut = bytes.clone();
        cut.truncate(bytes.len() - 3);
        assert!(decode("charts", &cut, 5).is_err());
        assert!(decode("charts", b"{}\n", 5).is_err());
        // A package whose read had not settled: no snapshot.
        let mut unsettled = version("u", stamp(1, t0, 2), later);
        unsettled.source = None;
        let mut tenants = BTreeMap::new();
        tenants.insert(
            String::new(),
            Arc::new(Charts::from([("u-1.0.0.tgz".to_owned(), unsettled)])),
        );
        let mut index = Index::from_tenants(6, tenants);
        let touched = index.take_touched();
        let snap = Snapshot::empty().next(&index, &touched, &Links::default());
        assert!(encode("charts", &snap).is_none());
    }
}
