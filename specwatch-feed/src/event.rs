//! What a consumer of the feed receives, and the replica's status.

use std::sync::Arc;

use specwatch::{ChangeBatch, Seq};

/// One message to the consumer of a [`Replica`](crate::Replica).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum FeedEvent {
    /// Start again from `picture`: forget what this feed told you before
    /// and hold exactly this (every entry below the root as `Created`,
    /// with its metadata), which is the tree as of `picture.seq`; the
    /// batches that follow apply to it. A consumer may keep answering
    /// from what it held until it has built this one, and swap then.
    Resync {
        /// Why the replica could not go on from where the consumer was.
        reason: ResyncReason,
        /// The whole tree.
        picture: Arc<ChangeBatch>,
    },
    /// One batch, as a [`specwatch::Manager`] subscription delivers it:
    /// paths below this replica's root, seqs strictly increasing since
    /// the last `Resync` (of the feed's epoch while the replica is in the
    /// feed; of its own manager's instance while it is
    /// [`Local`](Role::Local)), never a batch twice.
    Changes(Arc<ChangeBatch>),
    /// The replica's role changed; what the consumer was given until now
    /// is the whole tree as of its last seq.
    Role(Role),
}

/// What a replica does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Role {
    /// Starting: nothing delivered yet.
    Starting,
    /// It holds the lease: it watches the storage and publishes.
    Watching,
    /// It follows the feed and does not look at the storage.
    Following,
    /// Redis is out of reach (or the feed cannot be read): it watches
    /// the storage itself, as if there were no feed.
    Local,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::Starting => "starting",
            Role::Watching => "watching",
            Role::Following => "following",
            Role::Local => "local",
        })
    }
}

/// Why a replica resynced its consumer ([`FeedEvent::Resync`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResyncReason {
    /// Nothing to go on from: a start without
    /// [`FeedOptions::resume_from`](crate::FeedOptions::resume_from), or
    /// the seq it gave is not this feed's (another epoch, or one it has
    /// not reached).
    Start,
    /// The batches after the consumer's seq were trimmed from the stream
    /// ([`FeedOptions::max_len`](crate::FeedOptions::max_len)).
    Trimmed,
    /// The feed's history is another one: Redis was emptied or restarted
    /// without its data, or holds another feed's history.
    OtherEpoch,
    /// The Redis server restarted (another run id): what it holds may be
    /// older than what was read from it before.
    RedisRestarted,
    /// Redis is out of reach: the replica watches the storage itself.
    FeedDown {
        /// What failed.
        error: String,
    },
    /// Redis is back after the replica watched the storage itself.
    FeedBack,
}

impl std::fmt::Display for ResyncReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResyncReason::Start => f.write_str("start"),
            ResyncReason::Trimmed => f.write_str("trimmed from the stream"),
            ResyncReason::OtherEpoch => f.write_str("another history (epoch)"),
            ResyncReason::RedisRestarted => f.write_str("redis restarted"),
            ResyncReason::FeedDown { error } => write!(f, "feed down: {error}"),
            ResyncReason::FeedBack => f.write_str("feed back"),
        }
    }
}

/// A replica's status ([`Replica::status`](crate::Replica::status)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FeedStatus {
    /// What it does now.
    pub role: Role,
    /// Whether Redis answers (false while [`Local`](Role::Local)).
    pub feed_up: bool,
    /// Whether the consumer has been given the whole tree (a picture, or
    /// the batches after the seq it resumed from) since the last
    /// `Resync`: a server is ready once this holds.
    pub whole: bool,
    /// The seq of the last batch delivered.
    pub seq: Option<Seq>,
    /// The last trouble met (Redis unreachable, a fenced write, a
    /// failed watch), if any since the role last changed.
    pub last_error: Option<String>,
    /// This replica's instance id (`RANDOM@HOST:PID`), as the lease shows
    /// it.
    pub instance: String,
}
