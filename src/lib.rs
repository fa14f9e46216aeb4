//! Declarative file watching.
//!
//! A program hands specwatch **named watch specs** ([`WatchSpec`]: paths,
//! gitignore-style [`IgnoreRule`]s, batching options). The [`Manager`] keeps
//! the last applied spec per name: applying an equal spec again is a no-op
//! ([`Applied::Unchanged`]), a changed one an update with a new
//! [`Generation`]; [`Manager::reconcile`] takes the whole desired set and
//! creates, updates and deletes to match. An engine thread runs the OS
//! watchers and publishes typed [`ChangeBatch`]es and [`WatchStatus`]
//! snapshots to every [`Manager::subscribe`]r.
//!
//! ```
//! use specwatch::{Event, IgnoreRule, Manager, WatchSpec};
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let manager = Manager::new()?;
//! let events = manager.subscribe();
//! let spec = WatchSpec::new([dir.path()])
//!     .ignore(IgnoreRule::new(dir.path(), ["target/", "*.log"]))
//!     .quiet_window(Duration::from_millis(10));
//! manager.apply("src", spec)?;
//! manager.wait_watching("src", Duration::from_secs(10))?;
//!
//! std::fs::write(dir.path().join("main.rs"), "fn main() {}")?;
//! std::fs::write(dir.path().join("build.log"), "ignored")?;
//!
//! let deadline = std::time::Instant::now() + Duration::from_secs(10);
//! loop {
//!     match events.recv_deadline(deadline)? {
//!         Event::Changes(batch) => {
//!             let c = &batch.changes[0];
//!             assert!(c.path.ends_with("main.rs"));
//!             println!("{:?} {}", c.kind, c.path.display());
//!             break;
//!         }
//!         _ => continue, // status snapshots
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # How it watches
//!
//! OS events are hints; the tree is the truth. The engine keeps an index of
//! every watched directory's entries (name and type). Each event makes it
//! look at the file system (`lstat` of the name, or a read of a new
//! directory) and diff against the index; only the diff becomes
//! [`Change`]s. So duplicates vanish, an atomic save (temporary file renamed
//! over the target) is one `Modified` of the target, and files written into
//! a new directory before its watch landed are still reported: a new
//! directory is watched first, then read.
//!
//! On Linux the [`Backend::Native`] backend drives inotify directly: one
//! instance per manager, one watch per directory shared by every spec that
//! covers it, none for directories that every covering spec ignores (unless
//! a `!` pattern could re-include something below), and a mask without
//! `IN_OPEN`. [`Backend::Portable`] uses `notify`'s recommended watcher with
//! one recursive watch per root; it is the default elsewhere and can be
//! chosen on Linux.
//!
//! # Known problems
//!
//! - **Queue overflow** (`IN_Q_OVERFLOW`) triggers a re-read of every
//!   indexed directory, which finds every created and removed entry, but
//!   not files modified in place while events were lost.
//! - **No fallback yet when the OS refuses a watch** (inotify's
//!   `max_user_watches`): the directory's status names it and its changes
//!   are missed until it is watched again.
//! - **Symlinks are not followed**, roots included: a root that is itself a
//!   symlink is watched as a link entry. Pass the resolved path (for example
//!   from `std::fs::canonicalize`) to watch the target.
//! - Writes through a shared `mmap` produce no inotify events and are not
//!   seen; nor are changes made on another machine to a network file system.
//! - The portable backend watches ignored directories too (notify recurses
//!   into them); their events are dropped, but they cost OS watches.
//! - Paths are cleaned lexically (`a/b/../c` is `a/c`) without resolving
//!   symlinks, so that paths that do not exist yet can be accepted.
#![deny(missing_docs)]
#![warn(rust_2018_idioms)]

mod backend;
mod coalesce;
mod engine;
mod error;
mod event;
mod fanout;
mod ignore;
mod index;
mod manager;
mod reconcile;
mod spec;
mod status;

pub use backend::Backend;
pub use error::{Error, Result};
pub use event::{Change, ChangeBatch, ChangeKind, Event, FileType, Seq};
pub use manager::{Applied, DEFAULT_SUBSCRIBER_CAPACITY, Manager, ManagerBuilder, Stats};
pub use reconcile::ReconcileSummary;
pub use spec::{DEFAULT_MAX_DELAY, DEFAULT_QUIET_WINDOW, IgnoreRule, WatchOptions, WatchSpec};
pub use status::{Generation, Phase, RECENT_BATCHES, WatchStatus};
