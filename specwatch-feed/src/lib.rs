//! One watcher per shared storage: [specwatch]'s change batches published
//! through Redis, followed by every other replica.
//!
//! Several replicas of a server that caches what a storage holds (a chart
//! repository's index, say) share that storage, often over NFS or FUSE,
//! where no replica hears another host's writes: each would have to poll
//! it, and the storage would pay once per replica. With a feed, exactly
//! one replica (the holder of a lease in Redis: the *watcher*) watches
//! the storage with a [`specwatch::Manager`] and publishes each batch to
//! a Redis stream; the others (*followers*) never look at the storage for
//! changes: they read the stream and hand their consumer the same
//! [`ChangeBatch`](specwatch::ChangeBatch)es a `Manager` subscription
//! gives, with paths below their own mount of the storage.
//!
//! Redis is a dependency, never a single point of failure: while it is
//! out of reach every replica watches the storage itself
//! ([`Role::Local`], what it would do without a feed), and joins the feed
//! again once it answers. At every moment a consumer holds a tree that
//! was on the storage: after a [`FeedEvent::Resync`] it is handed the
//! whole tree again, never a partial one.
//!
//! ```no_run
//! use specwatch::WatchSpec;
//! use specwatch_feed::{FeedEvent, FeedOptions, Replica};
//! use std::collections::BTreeMap;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Every replica: the same Redis and feed name, its own mount path.
//! let opts = FeedOptions::new("redis://127.0.0.1:6379/", "charts", WatchSpec::new(["/mnt/charts"]))?;
//! let (replica, events) = Replica::start(opts)?;
//! let mut tree = BTreeMap::new();
//! for event in events {
//!     match event {
//!         FeedEvent::Resync { picture, .. } => {
//!             tree.clear();
//!             for c in &picture.changes {
//!                 tree.insert(c.path.clone(), c.meta.clone());
//!             }
//!         }
//!         FeedEvent::Changes(batch) => {
//!             for c in &batch.changes {
//!                 match c.kind {
//!                     specwatch::ChangeKind::Removed => {
//!                         tree.remove(&c.path);
//!                     }
//!                     _ => {
//!                         tree.insert(c.path.clone(), c.meta.clone());
//!                     }
//!                 }
//!             }
//!         }
//!         FeedEvent::Role(role) => eprintln!("now {role}; {} entries", tree.len()),
//!         _ => {}
//!     }
//! }
//! # drop(replica);
//! # Ok(()) }
//! ```
//!
//! # What each replica does
//!
//! - **Following**: `XREAD BLOCK` on the stream from the last batch it
//!   delivered; each entry becomes a batch with seq
//!   `Seq::new(epoch, n)`, strictly increasing, never one twice. Every
//!   third of the lease's expiry it tries to take the lease (`SET NX PX`)
//!   and reads the feed's epoch and last seq in the same round trip.
//! - **Watching** (the lease is its own, renewed every third of its
//!   expiry by a compare-and-`PEXPIRE`): it first brings its consumer to
//!   the last published seq `T`, then starts a `Manager` with an initial
//!   scan, and publishes as `T+1` the difference between the *belief*
//!   (what the feed has told its followers is on the storage: path, type
//!   and metadata as published, kept in Redis with each batch) and the
//!   disk: changes made while nobody watched are published once, and
//!   nothing that was published is published again. Then each batch of
//!   its manager, as the next seq. Every publish is one Lua script that
//!   checks that the lease is still its own and the epoch unchanged, and
//!   that the seq is the next: a watcher whose lease expired (paused,
//!   partitioned) can never publish.
//! - **Local** (Redis out of reach): its own `Manager`, a
//!   [`FeedEvent::Resync`] with the tree it scanned, then its batches
//!   (the manager's own seqs). Once Redis answers, a `Resync` again, and
//!   it follows (or takes the lease).
//!
//! A replica resyncs its consumer (the whole tree as a picture) when it
//! cannot go on from where the consumer is: at a start without a seq to
//! resume from, when the batches after its seq were trimmed
//! ([`FeedOptions::max_len`]), when the feed's history is another one (a
//! new epoch: Redis restarted empty, or holds another feed), when the
//! Redis server restarted (its run id changed: it may hold less than was
//! read from it), and around `Local`. See [`ResyncReason`].
//!
//! # Read your writes
//!
//! A replica that wrote a file to the storage (an upload) calls
//! [`Replica::look`]: the watcher looks at those paths at once
//! ([`specwatch::Manager::look`]: the directory holding them is polled
//! now, not at the next interval), publishes the batch, and answers with
//! its seq through Redis; `look` returns once this replica has delivered
//! that batch to its consumer.
//!
//! # Cold starts
//!
//! The watcher may keep an opaque snapshot of its consumer's state with
//! the seq it reflects ([`Replica::put_snapshot`]); a new replica reads
//! it ([`FeedOptions::read_snapshot`]), loads it, and starts with
//! [`FeedOptions::resume_from`] that seq: it is handed the batches after
//! it rather than the whole tree.
//!
//! # Redis keys
//!
//! All under `specwatch-feed:{NAME}:` (the braces make one Redis Cluster
//! slot of a feed):
//! `lease` (the watcher's instance id, expiring), `epoch` (the history's
//! id), `seq` (the last batch's number), `stream` (the batches, entry id
//! `N-1`; fields `epoch`, `instance`, `time`, `changes`), `belief` (a
//! hash: relative path -> type and metadata), `snapshot` (a hash:
//! `epoch`, `seq`, `data`), `looks` (a stream of look requests) and
//! `reply:ID` (a look's answer, expiring).
//!
//! # Known problems
//!
//! - **A change that keeps size, mtime and inode is not seen across a
//!   failover**: the new watcher compares the disk with the belief by
//!   those, as a restart with a state file does (without its ctime). A
//!   directory's own metadata is not compared (its entries' changes say
//!   what changed in it).
//! - **A failover takes up to the lease's expiry and a third** (3 s and
//!   1 s by default) for a watcher that died without letting go, plus the
//!   new watcher's scan of the storage (its `Manager`'s walk, a `sync`,
//!   and the difference); a replica dropped cleanly lets go, and another
//!   takes over within a third of the expiry. Changes made meanwhile are
//!   published by the new watcher, late but once.
//! - **Every replica scans the storage while Redis is away**, as without
//!   a feed; and every replica resyncs when Redis restarts, whatever it
//!   kept (a server that restarts from an older snapshot may have lost
//!   the last batches, which would otherwise be published again under the
//!   same numbers with other contents).
//! - A replica that becomes the watcher, or watches alone, passes a
//!   [`sync`](specwatch::Manager::sync) barrier after its scan: one
//!   cookie file (`.specwatch-cookie-*`) is created and removed in the
//!   storage's root, which other hosts listing it may see.
//! - **A follower's `look` needs a watcher**: during a takeover it waits
//!   (and times out if the takeover takes longer than its timeout).
//! - A consumer that does not read its events makes them queue without
//!   bound (a follower reads the stream as fast as it is published).
//! - Paths travel as bytes relative to the root, `/` between names: a
//!   replica on Windows reads names that are not Unicode lossily.
//! - The stream and the belief live in Redis's memory: about a hundred
//!   bytes per file for the belief, and up to
//!   [`max_len`](FeedOptions::max_len) batches.
#![deny(missing_docs)]
#![warn(unreachable_pub, rust_2018_idioms)]

/// The README's example, compiled as a doc test so that it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod belief;
mod codec;
mod error;
mod event;
mod options;
mod replica;
mod store;

pub use error::{Error, Result};
pub use event::{FeedEvent, FeedStatus, ResyncReason, Role};
pub use options::{DEFAULT_LEASE_TTL, DEFAULT_MAX_LEN, DEFAULT_SCAN_TIMEOUT, FeedOptions};
pub use replica::Replica;
/// The specwatch this feed is built on (its batches, seqs, specs).
pub use specwatch;
