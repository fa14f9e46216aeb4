//! The restart cache (`--cache-dir DIR`): each package's entry as this
//! server read it, so that a restart reads only the packages that changed
//! while it was down.
//!
//! **What is kept.** For each package in the index that a read can vouch
//! for: its key (path below the storage directory), the [`Stamp`] of the
//! file version it was read from (size, mtime, ctime, inode, as `stat`
//! gives them, the same before and after the read) and when that read
//! began, its digest, its `created` time and its Chart.yaml's fields as
//! the index holds them. Packages that could not be read are not kept.
//!
//! **What a start does with it** ([`decide`]): a package found with the
//! stamp its entry was read from is taken from the cache, not opened; one
//! with another stamp, or not in the cache, is read as without a cache;
//! a cached package not found is dropped. One case more: a stamp cannot
//! tell two versions apart that were written within one tick of the file
//! system's clock (Linux takes ctime from a clock that moves every few
//! milliseconds; FAT's times move every 2 s), so an entry read less than
//! [`SETTLE`] after its file's last change (an upload the watch reported at
//! once, say) could describe a version that was replaced within the same
//! tick. Such an entry is not trusted by its stamp alone: the file is read
//! again and hashed, and its metadata is parsed again only if the digest
//! differs (git's "racily clean" entries, checked the same way). This
//! takes the storage's clock to be within [`SETTLE`] of this host's (NFS
//! sets times by the server's clock).
//!
//! **The file**, `DIR/chart_index.cache`: a header line (JSON: the format's
//! name and [`VERSION`], the [`Options`] it was written under, the number
//! of packages, and the length and sha256 of the body), then the body, one
//! JSON line per package. A file of another format or version, written
//! under other options, cut short or with any byte changed, is not used:
//! the start says why in one line (`chart_index: cache: ignored PATH:
//! REASON`) and reads every package. It is written whole to a temporary
//! file in `DIR`, fsynced and renamed over the last one (then `DIR` is
//! synced; a temporary file a killed run left is removed at the next
//! start), by a thread of its own ([`Writer`]): once the index has had no
//! new package change for a second (at most 10 s after the first unsaved
//! one), and at a graceful stop. A run killed between two saves leaves the
//! last one, which is still right entry for entry: an entry is only ever
//! used for the file version it was read from. One directory serves one
//! server: replicas sharing a storage directory each have their own.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::chart::{ChartMeta, ChartVersion, READER, Source, helm_version, sha256_hex};
use crate::snapshot::Published;
use crate::storage::{Stamp, Time, from_time, safe_name, sync_dir, to_time};

/// The cache's file in the cache directory.
pub const FILE_NAME: &str = "chart_index.cache";
/// What the header's `format` says.
const FORMAT: &str = "chart_index cache";
/// The version of the file's layout: bump it with any change to it.
pub const VERSION: u32 = 1;
/// How long after its file's last change (its stamp's newest time) a read
/// must have begun for its entry to be taken on its stamp alone.
pub const SETTLE: Duration = Duration::from_secs(2);
/// A save waits for the index to have had no package change for this long...
const QUIET: Duration = Duration::from_secs(1);
/// ... but not longer than this after the first unsaved change.
const MAX_DELAY: Duration = Duration::from_secs(10);

/// What decides a package's entry besides the package itself: a cache
/// written under other options is not used. The server's flags change
/// none (`--depth` and the others decide which routes serve an entry, and
/// URLs are relative), so: the storage directory, which the keys are
/// relative to, and the rules by which a package is read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Options {
    /// The storage directory, canonical.
    pub storage: String,
    /// [`READER`].
    pub reader: u32,
}

impl Options {
    /// This server's options over the canonical storage directory `root`
    /// (`None`: a path that is not UTF-8).
    pub fn new(root: &Path) -> Option<Options> {
        Some(Options {
            storage: root.to_str()?.to_owned(),
            reader: READER,
        })
    }
}

/// The file's first line.
#[derive(Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    options: Options,
    packages: usize,
    body_bytes: u64,
    body_sha256: String,
}

/// One package, as written.
#[derive(Serialize)]
struct EntryOut<'a> {
    key: &'a str,
    source: Source,
    digest: &'a str,
    created: Time,
    meta: &'a ChartMeta,
}

/// One package, as read back.
#[derive(Deserialize)]
struct EntryIn {
    key: String,
    source: Source,
    digest: String,
    created: Time,
    meta: ChartMeta,
}

/// The cache file's bytes for `packages` (each keyed by its path below the
/// root); those without a [`Source`] are left out. Also says how many
/// were written.
pub fn encode<'a>(
    options: &Options,
    packages: impl IntoIterator<Item = (&'a str, &'a ChartVersion)>,
) -> (Vec<u8>, usize) {
    let mut body = Vec::new();
    let mut n = 0;
    for (key, c) in packages {
        let Some(source) = c.source else { continue };
        let entry = EntryOut {
            key,
            source,
            digest: &c.digest,
            created: to_time(c.created),
            meta: &c.meta,
        };
        // Writing to a Vec fails only on a serializer error, which these
        // types do not have.
        if serde_json::to_writer(&mut body, &entry).is_ok() {
            body.push(b'\n');
            n += 1;
        }
    }
    let header = Header {
        format: FORMAT.into(),
        version: VERSION,
        options: options.clone(),
        packages: n,
        body_bytes: body.len() as u64,
        body_sha256: sha256_hex(&body),
    };
    let mut out = serde_json::to_vec(&header).unwrap_or_default();
    out.push(b'\n');
    out.extend_from_slice(&body);
    (out, n)
}

/// The entries of a cache file's `bytes`, keyed by path below the root,
/// if it is a whole cache of this layout written under `options`; else
/// why not.
pub fn decode(bytes: &[u8], options: &Options) -> Result<HashMap<String, ChartVersion>, String> {
    let newline = bytes.iter().position(|b| *b == b'\n');
    let header: Header = newline
        .and_then(|i| serde_json::from_slice(&bytes[..i]).ok())
        .filter(|h: &Header| h.format == FORMAT)
        .ok_or("not a chart_index cache (no header line)")?;
    if header.version != VERSION {
        return Err(format!(
            "layout version {}, this server reads version {VERSION}",
            header.version
        ));
    }
    if header.options != *options {
        let o = &header.options;
        return Err(format!(
            "written under other options: storage {:?}, reader {} (this server: storage {:?}, \
             reader {})",
            o.storage, o.reader, options.storage, options.reader
        ));
    }
    let body = &bytes[newline.map_or(0, |i| i + 1)..];
    if body.len() as u64 != header.body_bytes {
        return Err(format!(
            "{} bytes of body where the header says {}: cut short or added to",
            body.len(),
            header.body_bytes
        ));
    }
    if sha256_hex(body) != header.body_sha256 {
        return Err("the body's sha256 is not the header's: corrupt".into());
    }
    let mut out = HashMap::with_capacity(header.packages);
    for line in body.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let e: EntryIn =
            serde_json::from_slice(line).map_err(|e| format!("an entry does not read: {e}"))?;
        if !e.key.ends_with(".tgz") || !e.key.split('/').all(safe_name) {
            return Err(format!("entry {:?} is not a package's path", e.key));
        }
        let semver =
            helm_version(&e.meta.version).map_err(|why| format!("entry {}: {why}", e.key))?;
        let c = ChartVersion {
            meta: e.meta,
            semver,
            digest: e.digest,
            created: from_time(e.created),
            source: Some(e.source),
        };
        out.insert(e.key, c);
    }
    if out.len() != header.packages {
        return Err(format!(
            "{} entries where the header says {}",
            out.len(),
            header.packages
        ));
    }
    Ok(out)
}

/// What a start finds in the cache directory.
pub enum Loaded {
    /// No cache file yet.
    Missing,
    /// A cache file that is not used, and why.
    Ignored(String),
    /// The cache's entries, keyed by path below the root.
    Entries(HashMap<String, ChartVersion>),
}

/// Reads the cache in `dir`.
pub fn load(dir: &Path, options: &Options) -> Loaded {
    match fs::read(dir.join(FILE_NAME)) {
        Ok(bytes) => match decode(&bytes, options) {
            Ok(entries) => Loaded::Entries(entries),
            Err(why) => Loaded::Ignored(why),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => Loaded::Missing,
        Err(e) => Loaded::Ignored(format!("cannot read it: {e}")),
    }
}

/// What a start does with each package it finds: see [`decide`]. A
/// package found that is in neither map is read.
#[derive(Default)]
pub struct Verdicts {
    /// Entries taken as they are.
    pub reuse: HashMap<String, ChartVersion>,
    /// Entries whose file has their stamp but changed too soon before the
    /// read: the file is read and hashed, and parsed only if its digest
    /// is another.
    pub verify: HashMap<String, ChartVersion>,
    /// Packages found that are to be read: not in the cache, or found
    /// with another stamp (or none: no longer a regular file).
    pub read: usize,
    /// Cached packages not found, forgotten.
    pub dropped: usize,
}

/// Whether an entry read from `source` may be taken on its stamp alone:
/// its file's last change came more than [`SETTLE`] before the read
/// began, so any later write (even within one tick of the file system's
/// clock) gave the file another stamp.
pub fn settled(source: &Source) -> bool {
    let nanos = |(s, n): Time| i128::from(s) * 1_000_000_000 + i128::from(n);
    nanos(source.read_at) - nanos(source.stamp.newest()) > SETTLE.as_nanos() as i128
}

/// The restart decision: which packages a start reads. `cached` is what
/// the last run read (as [`load`]ed); `found` is each package the start
/// learned is in the storage directory, with its [`Stamp`] now (`None`:
/// not a regular file any more). An entry is reused only if its file has
/// exactly the stamp it was read from, and that stamp had [`settled`];
/// verified if the stamp is the same but had not settled; anything else
/// is read. A cached package that is not found is dropped.
///
/// Today `found` is every package the watch's initial scan reports (see
/// [`crate::index::found`]), so "not found" means "gone". No I/O happens
/// here: a source of "what changed since the last run" (a snapshot of the
/// watch, once the library has one) can feed it the packages it names,
/// with the rest of the cache then taken as unchanged.
pub fn decide(
    mut cached: HashMap<String, ChartVersion>,
    found: impl IntoIterator<Item = (String, Option<Stamp>)>,
) -> Verdicts {
    let mut v = Verdicts::default();
    for (key, stamp) in found {
        let entry = cached.remove(&key);
        match (entry, stamp) {
            (Some(c), Some(now)) if c.source.is_some_and(|s| s.stamp == now) => {
                if c.source.as_ref().is_some_and(settled) {
                    v.reuse.insert(key, c);
                } else {
                    v.verify.insert(key, c);
                }
            }
            _ => v.read += 1,
        }
    }
    v.dropped = cached.len();
    v
}

/// Writes the cache of the index's current snapshot to `dir` (a
/// temporary file, fsynced, then renamed over the last one); returns how
/// many packages it holds and its size. The snapshot is loaded, not
/// locked: the index goes on meanwhile.
pub fn save(dir: &Path, options: &Options, index: &Published) -> io::Result<(usize, usize)> {
    let (bytes, n) = {
        let snapshot = index.load();
        let packages: Vec<(String, &ChartVersion)> = snapshot.packages().collect();
        encode(options, packages.iter().map(|(k, c)| (k.as_str(), *c)))
    };
    let path = dir.join(FILE_NAME);
    let tmp = dir.join(format!("{FILE_NAME}.tmp-{}", std::process::id()));
    let write = || -> io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, &path)?;
        sync_dir(dir);
        Ok(())
    };
    write().inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })?;
    Ok((n, bytes.len()))
}

enum Msg {
    /// The index's packages changed.
    Changed,
    /// Save what is unsaved and end.
    Stop,
}

/// Tells the [`Writer`] that the index's packages changed.
#[derive(Clone)]
pub struct Notify(mpsc::Sender<Msg>);

impl Notify {
    pub fn changed(&self) {
        let _ = self.0.send(Msg::Changed);
    }
}

/// The thread that saves the cache: once the index has had no package
/// change for [`QUIET`] (at most [`MAX_DELAY`] after the first unsaved
/// one), and at [`Writer::stop`]. Says on stderr `chart_index: cache:
/// saved N packages ...` after each save, or why it could not.
pub struct Writer {
    tx: mpsc::Sender<Msg>,
    thread: JoinHandle<()>,
}

impl Writer {
    /// Starts the thread, after removing the temporary files that a run
    /// killed while saving left in `dir`.
    pub fn spawn(dir: PathBuf, options: Options, index: Arc<Published>) -> io::Result<Writer> {
        let tmp = format!("{FILE_NAME}.tmp-");
        for e in fs::read_dir(&dir)?.flatten() {
            if e.file_name().to_str().is_some_and(|n| n.starts_with(&tmp)) {
                let _ = fs::remove_file(e.path());
            }
        }
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("cache".into())
            .spawn(move || write_loop(&dir, &options, &index, &rx))?;
        Ok(Writer { tx, thread })
    }

    pub fn notify(&self) -> Notify {
        Notify(self.tx.clone())
    }

    /// Saves what is unsaved, and waits for the thread to end.
    pub fn stop(self) {
        let _ = self.tx.send(Msg::Stop);
        let _ = self.thread.join();
    }
}

fn write_loop(dir: &Path, options: &Options, index: &Published, rx: &mpsc::Receiver<Msg>) {
    let save_logged = |when: &str| {
        let t = Instant::now();
        match save(dir, options, index) {
            Ok((n, bytes)) => tracing::info!(
                "chart_index: cache: saved {n} packages ({bytes} bytes) {when} in {} ms",
                t.elapsed().as_millis()
            ),
            Err(e) => tracing::warn!(
                "chart_index: cache: cannot save {}: {e}",
                dir.join(FILE_NAME).display()
            ),
        }
    };
    // The first and the last unsaved change.
    let mut dirty: Option<(Instant, Instant)> = None;
    loop {
        let msg = match dirty {
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some((first, last)) => {
                let due = (last + QUIET).min(first + MAX_DELAY);
                rx.recv_timeout(due.saturating_duration_since(Instant::now()))
            }
        };
        match msg {
            Ok(Msg::Changed) => {
                let now = Instant::now();
                dirty = Some((dirty.map_or(now, |(first, _)| first), now));
            }
            Err(RecvTimeoutError::Timeout) => {
                save_logged("after changes");
                dirty = None;
            }
            Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => {
                if dirty.is_some() {
                    save_logged("at stop");
                }
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};
    use std::time::{Duration, UNIX_EPOCH};

    use super::{Options, decide, decode, encode, settled};
    use crate::chart::{ChartMeta, ChartVersion, Maintainer, Source, helm_version};
    use crate::storage::Stamp;

    fn options() -> Options {
        Options {
            storage: "/srv/charts".into(),
            reader: 1,
        }
    }

    /// A stamp changed last at second `t`.
    fn stamp(t: i64) -> Stamp {
        Stamp {
            size: 1234,
            mtime: (t, 5),
            ctime: Some((t, 7)),
            ino: Some(42),
        }
    }

    /// An entry of `name` 1.0.0 read from `stamp` at second `read_at`.
    fn entry(name: &str, stamp: Stamp, read_at: i64) -> ChartVersion {
        let meta = ChartMeta {
            api_version: "v2".into(),
            name: name.into(),
            version: "1.0.0".into(),
            description: "two lines and more".into(),
            keywords: vec!["on".into(), "y".into()],
            annotations: BTreeMap::from([("a".into(), "on".into())]),
            maintainers: vec![Maintainer {
                name: "n".into(),
                ..Maintainer::default()
            }],
            ..ChartMeta::default()
        };
        ChartVersion {
            semver: helm_version(&meta.version).unwrap(),
            meta,
            digest: format!("{name:0>64}"),
            created: UNIX_EPOCH + Duration::new(1_700_000_000, 123),
            source: Some(Source {
                stamp,
                read_at: (read_at, 0),
            }),
        }
    }

    fn bytes_of(entries: &[(&str, ChartVersion)]) -> Vec<u8> {
        encode(&options(), entries.iter().map(|(k, c)| (*k, c))).0
    }

    #[test]
    fn entries_come_back_as_written() {
        let mut unsourced = entry("c", stamp(10), 100);
        unsourced.source = None;
        let entries = [
            ("a-1.0.0.tgz", entry("a", stamp(10), 100)),
            ("org/team/b-1.0.0.tgz", entry("b", stamp(20), 21)),
            ("c-1.0.0.tgz", unsourced),
        ];
        let (bytes, n) = encode(&options(), entries.iter().map(|(k, c)| (*k, c)));
        assert_eq!(n, 2, "an entry no read vouches for is left out");
        let back = decode(&bytes, &options()).unwrap();
        assert_eq!(back.len(), 2);
        for (key, c) in &entries[..2] {
            let b = &back[*key];
            assert_eq!(
                serde_json::to_value(&b.meta).unwrap(),
                serde_json::to_value(&c.meta).unwrap(),
                "{key}"
            );
            assert_eq!(
                (&b.digest, b.created, b.source),
                (&c.digest, c.created, c.source)
            );
            assert_eq!(b.semver, c.semver);
        }
    }

    #[test]
    fn a_cache_that_cannot_be_used_says_why() {
        let good = bytes_of(&[
            ("a-1.0.0.tgz", entry("a", stamp(10), 100)),
            ("b-1.0.0.tgz", entry("b", stamp(10), 100)),
        ]);
        assert!(decode(&good, &options()).is_ok());
        let first_line = good.iter().position(|b| *b == b'\n').unwrap();
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 0x20;
        let mut in_body = good.clone();
        in_body[first_line + 10] ^= 0x01;
        let other_version = String::from_utf8(good.clone()).unwrap().replacen(
            "\"version\":1,",
            "\"version\":2,",
            1,
        );
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            ("empty", Vec::new(), "not a chart_index cache"),
            (
                "text",
                b"hello\nworld\n".to_vec(),
                "not a chart_index cache",
            ),
            (
                "header only, cut",
                good[..first_line / 2].to_vec(),
                "not a chart_index cache",
            ),
            ("cut short", good[..good.len() - 5].to_vec(), "cut short"),
            ("added to", [&good[..], b"{}\n"].concat(), "added to"),
            ("a byte changed", flipped, "corrupt"),
            ("a bit changed", in_body, "corrupt"),
            (
                "other layout",
                other_version.into_bytes(),
                "layout version 2",
            ),
        ];
        for (what, bytes, says) in cases {
            let e = decode(&bytes, &options())
                .err()
                .unwrap_or_else(|| panic!("{what}: used"));
            assert!(e.contains(says), "{what}: {e:?} should say {says:?}");
        }
        for other in [
            Options {
                storage: "/srv/other".into(),
                ..options()
            },
            Options {
                reader: 2,
                ..options()
            },
        ] {
            let e = decode(&good, &other).expect_err("other options");
            assert!(e.contains("written under other options"), "{e}");
        }
    }

    #[test]
    fn only_the_same_settled_stamp_is_reused() {
        let s = stamp(10);
        let cached: HashMap<String, ChartVersion> = [
            ("same", entry("same", s, 100)),
            ("racy", entry("racy", s, 11)),
            ("size", entry("size", s, 100)),
            ("mtime", entry("mtime", s, 100)),
            ("ctime", entry("ctime", s, 100)),
            ("ino", entry("ino", s, 100)),
            ("no-stamp", entry("no-stamp", s, 100)),
            ("gone", entry("gone", s, 100)),
        ]
        .into_iter()
        .map(|(k, c)| (k.to_owned(), c))
        .collect();
        let found = [
            ("same", Some(s)),
            ("racy", Some(s)),
            ("size", Some(Stamp { size: 1235, ..s })),
            (
                "mtime",
                Some(Stamp {
                    mtime: (10, 6),
                    ..s
                }),
            ),
            (
                "ctime",
                Some(Stamp {
                    ctime: Some((10, 8)),
                    ..s
                }),
            ),
            ("ino", Some(Stamp { ino: Some(43), ..s })),
            ("no-stamp", None),
            ("new", Some(s)),
        ];
        let v = decide(cached, found.map(|(k, s)| (k.to_owned(), s)));
        assert_eq!(v.reuse.keys().collect::<Vec<_>>(), ["same"]);
        assert_eq!(v.verify.keys().collect::<Vec<_>>(), ["racy"]);
        assert_eq!(v.read, 6, "size, mtime, ctime, ino, no stamp, new");
        assert_eq!(v.dropped, 1, "gone");
    }

    #[test]
    fn settled_means_read_more_than_two_seconds_after_the_last_change() {
        let at = |read: (i64, u32), s: Stamp| {
            settled(&Source {
                stamp: s,
                read_at: read,
            })
        };
        assert!(at((12, 8), stamp(10)), "2 s and 1 ns after the ctime");
        assert!(!at((12, 7), stamp(10)), "exactly 2 s");
        assert!(!at((10, 0), stamp(10)), "before");
        let future_mtime = Stamp {
            mtime: (50, 0),
            ..stamp(10)
        };
        assert!(!at((30, 0), future_mtime), "the newest of mtime and ctime");
    }
}
