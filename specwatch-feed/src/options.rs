//! How a replica is set up: [`FeedOptions`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use specwatch::{Manager, Seq, WatchSpec};

use crate::error::{Error, Result};
use crate::store::{Keys, Store};

/// The default lease expiry: a watcher killed without a word is replaced
/// within it (plus a third of it, the followers' attempts' period).
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(3);

/// The default length the stream is trimmed to (about: `MAXLEN ~`).
pub const DEFAULT_MAX_LEN: usize = 100_000;

/// The default time a new watcher (or a replica watching alone) may take
/// to watch and scan the storage.
pub const DEFAULT_SCAN_TIMEOUT: Duration = Duration::from_secs(600);

/// Makes the [`Manager`] a replica watches the storage with.
pub(crate) type MakeManager = Arc<dyn Fn() -> specwatch::Result<Manager> + Send + Sync>;

/// What a [`Replica`](crate::Replica) follows: Redis, the feed's name, the
/// spec it watches the storage with when it must, and a few knobs.
#[derive(Clone)]
pub struct FeedOptions {
    pub(crate) redis_url: String,
    pub(crate) name: String,
    pub(crate) spec: WatchSpec,
    pub(crate) root: PathBuf,
    pub(crate) lease_ttl: Duration,
    pub(crate) max_len: usize,
    pub(crate) scan_timeout: Duration,
    pub(crate) resume_from: Option<Seq>,
    pub(crate) manager: MakeManager,
}

impl std::fmt::Debug for FeedOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FeedOptions")
            .field("redis", &redacted(&self.redis_url))
            .field("name", &self.name)
            .field("spec", &self.spec)
            .field("lease_ttl", &self.lease_ttl)
            .field("max_len", &self.max_len)
            .field("resume_from", &self.resume_from)
            .finish_non_exhaustive()
    }
}

/// The URL without its credentials (for messages).
pub(crate) fn redacted(url: &str) -> String {
    match (url.split_once("://"), url.rfind('@')) {
        (Some((scheme, _)), Some(at)) => format!("{scheme}://…@{}", &url[at + 1..]),
        _ => url.to_owned(),
    }
}

impl FeedOptions {
    /// The feed `name` in the Redis at `redis_url`
    /// (`redis://[:PASSWORD@]HOST:PORT[/DB]`), over the storage that
    /// `spec` watches on this host. The name says which feed, not where
    /// the storage is mounted: every replica of one storage gives the
    /// same name, each with its own mount path in its spec.
    ///
    /// The spec has exactly one path, the storage's root; its ignore
    /// rules and batching options are the watcher's (every replica
    /// should give the same). The feed turns on
    /// [`metadata`](specwatch::WatchOptions::metadata) and
    /// [`initial_scan`](specwatch::WatchOptions::initial_scan) (the belief
    /// is built from them).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOption`] for a spec with another number of paths,
    /// with [`state`](specwatch::WatchOptions::state) (the feed is the
    /// state) or [`collapse_moves`](specwatch::WatchOptions::collapse_moves)
    /// (followers need every path's change), for an empty name or one
    /// with a brace, and a URL the Redis client cannot read; the spec's own
    /// errors ([`Error::Watch`]).
    pub fn new(
        redis_url: impl Into<String>,
        name: impl Into<String>,
        spec: WatchSpec,
    ) -> Result<FeedOptions> {
        let (redis_url, name) = (redis_url.into(), name.into());
        if name.is_empty() || name.contains(['{', '}']) {
            return Err(Error::InvalidOption {
                option: "name",
                reason: format!("{name:?}: a feed's name is not empty and has no brace"),
            });
        }
        redis::Client::open(redis_url.as_str()).map_err(|e| Error::InvalidOption {
            option: "redis_url",
            reason: format!("{}: {e}", redacted(&redis_url)),
        })?;
        let spec = spec.normalized(&name)?;
        let [root] = spec.paths.as_slice() else {
            return Err(Error::InvalidOption {
                option: "spec",
                reason: format!(
                    "a feed watches one root, the storage's; this spec has {} paths",
                    spec.paths.len()
                ),
            });
        };
        if spec.options.state.is_some() {
            return Err(Error::InvalidOption {
                option: "spec",
                reason: "a feed's spec keeps no state file: the feed is its state".into(),
            });
        }
        if spec.options.collapse_moves {
            return Err(Error::InvalidOption {
                option: "spec",
                reason: "collapse_moves leaves out changes the followers need".into(),
            });
        }
        let root = root.clone();
        let spec = spec.metadata(true).initial_scan(true);
        Ok(FeedOptions {
            redis_url,
            name,
            spec,
            root,
            lease_ttl: DEFAULT_LEASE_TTL,
            max_len: DEFAULT_MAX_LEN,
            scan_timeout: DEFAULT_SCAN_TIMEOUT,
            resume_from: None,
            manager: Arc::new(Manager::new),
        })
    }

    /// The lease's expiry ([`DEFAULT_LEASE_TTL`]): a watcher that dies
    /// without letting go is replaced within it; a replica that lets go
    /// (dropped) is replaced within a third of it. Commands to Redis that
    /// take longer than it count as Redis being out of reach. At least
    /// 300 ms.
    #[must_use]
    pub fn lease_ttl(mut self, ttl: Duration) -> FeedOptions {
        self.lease_ttl = ttl.max(Duration::from_millis(300));
        self
    }

    /// About how many batches the stream keeps ([`DEFAULT_MAX_LEN`]): a
    /// follower further behind resyncs. At least 10.
    #[must_use]
    pub fn max_len(mut self, n: usize) -> FeedOptions {
        self.max_len = n.max(10);
        self
    }

    /// How long a replica may take to watch and scan the storage when it
    /// becomes the watcher or watches alone ([`DEFAULT_SCAN_TIMEOUT`]).
    #[must_use]
    pub fn scan_timeout(mut self, t: Duration) -> FeedOptions {
        self.scan_timeout = t;
        self
    }

    /// The consumer holds the tree as of `seq` (from a
    /// [`snapshot`](FeedOptions::read_snapshot), or kept by itself): the
    /// replica goes on from there if the feed still holds the batches
    /// after it, else starts with a [`Resync`](crate::FeedEvent::Resync).
    #[must_use]
    pub fn resume_from(mut self, seq: Seq) -> FeedOptions {
        self.resume_from = Some(seq);
        self
    }

    /// How the replica makes the [`Manager`] it watches the storage with
    /// (when it is the watcher, or Redis is away): `Manager::new` by
    /// default; give a builder's settings here (a poll interval, a
    /// backend).
    #[must_use]
    pub fn manager(
        mut self,
        make: impl Fn() -> specwatch::Result<Manager> + Send + Sync + 'static,
    ) -> FeedOptions {
        self.manager = Arc::new(make);
        self
    }

    /// The storage's root on this host.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The feed's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The consumer's latest snapshot in this feed
    /// ([`Replica::put_snapshot`](crate::Replica::put_snapshot)), if there
    /// is one of the feed's current history: its seq and bytes. A cold
    /// replica loads it, then starts with
    /// [`resume_from`](FeedOptions::resume_from) its seq.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`] when Redis cannot be asked.
    pub fn read_snapshot(&self) -> Result<Option<(Seq, Vec<u8>)>> {
        let mut store = self.store()?;
        let snap = store.snapshot().map_err(|e| self.redis_error(e))?;
        Ok(snap.map(|(e, n, data)| (Seq::new(e, n), data)))
    }

    pub(crate) fn keys(&self) -> Keys {
        Keys::new(&self.name)
    }

    pub(crate) fn client(&self) -> redis::Client {
        redis::Client::open(self.redis_url.as_str()).expect("checked by FeedOptions::new")
    }

    pub(crate) fn store(&self) -> Result<Store> {
        Store::connect(&self.client(), &self.keys(), self.lease_ttl)
            .map_err(|e| self.redis_error(e))
    }

    pub(crate) fn redis_error(&self, e: crate::store::Trouble) -> Error {
        Error::Redis {
            at: redacted(&self.redis_url),
            message: e.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_stay_out_of_messages() {
        assert_eq!(redacted("redis://:s3cret@db:6379/2"), "redis://…@db:6379/2");
        assert_eq!(redacted("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        let o = FeedOptions::new(
            "redis://:s3cret@db:6379/2",
            "charts",
            WatchSpec::new(["/srv"]),
        )
        .unwrap();
        assert!(!format!("{o:?}").contains("s3cret"));
    }

    #[test]
    fn a_feed_watches_one_root_and_keeps_no_state_file() {
        let url = "redis://127.0.0.1:1";
        let bad = |r: Result<FeedOptions>, what: &str| match r {
            Err(Error::InvalidOption { .. }) => {}
            other => panic!("{what}: {other:?}"),
        };
        bad(
            FeedOptions::new(url, "", WatchSpec::new(["/a"])),
            "empty name",
        );
        bad(
            FeedOptions::new(url, "a{b}", WatchSpec::new(["/a"])),
            "brace",
        );
        bad(
            FeedOptions::new(url, "n", WatchSpec::new(["/a", "/b"])),
            "two roots",
        );
        bad(
            FeedOptions::new(url, "n", WatchSpec::new(["/a"]).state("/s")),
            "state",
        );
        bad(
            FeedOptions::new(url, "n", WatchSpec::new(["/a"]).collapse_moves(true)),
            "collapse_moves",
        );
        bad(
            FeedOptions::new("http://x", "n", WatchSpec::new(["/a"])),
            "url",
        );
        let o = FeedOptions::new(url, "n", WatchSpec::new(["/a/./b"])).unwrap();
        assert_eq!(o.root(), Path::new("/a/b"));
        assert!(o.spec.options.metadata && o.spec.options.initial_scan);
    }
}
