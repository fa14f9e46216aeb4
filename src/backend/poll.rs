//! The event backend of a manager that polls everything
//! (`Backend::Poll { interval }` as the manager's backend): none. It holds
//! no OS watch and reads nothing by itself.
//!
//! Such a manager polls every root of every spec at its interval, as if
//! each spec had chosen `Poll` (`engine/modes.rs`), and the engine polls
//! each directory the way it polls any directory without an OS watch: on
//! the scanner's lanes (`scanner.rs`), one look ([`fs::look`]: a read,
//! a `stat` of every entry, the comparison with the previous picture) per
//! directory, applied as a listing. What that polling guarantees:
//!
//! - A directory's first picture is taken by its first read (the read
//!   *is* the look), so whatever changes after it, the next poll sees.
//! - A directory that cannot be read for a possibly transient reason
//!   (`EIO`, `ESTALE`, `EACCES`) keeps its last picture and is read again
//!   at the next poll; one that is gone leaves the index (what it held is
//!   reported removed, and a root is watched for again); one replaced by
//!   another directory is covered again from the new one's entries.
//! - A sync barrier polls every directory of the spec after its cookies
//!   exist, and passes once those looks are applied: every change made
//!   before the call is delivered.
//! - Statuses say each root is polled, at which interval, and why.
//! - `content_hash` compares racy files' contents.
//!
//! One directory reached by two paths (followed links) is looked at
//! through each path: each node compares with its own picture.
//!
//! [`fs::look`]: crate::fs::look

use std::io;
use std::path::Path;
#[cfg(any(test, feature = "test-hooks"))]
use std::sync::Arc;

use super::{DirWatcher, WatchError, WatchId};
#[cfg(any(test, feature = "test-hooks"))]
use super::{Fault, ReaderPause};

/// The backend of a manager that polls: it holds no watch. The engine
/// never asks it for one (every directory is polled); were it asked, it
/// refuses, and says why.
pub(crate) struct Poll;

impl DirWatcher for Poll {
    fn watch(&mut self, dir: &Path, _follow: bool) -> Result<WatchId, WatchError> {
        Err(WatchError::new(
            io::Error::new(
                io::ErrorKind::Unsupported,
                "a manager that polls holds no OS watches",
            ),
            dir,
        ))
    }

    fn identify(&mut self, _dir: &Path, _follow: bool) -> Option<WatchId> {
        None
    }

    fn unwatch(&mut self, _id: WatchId) {}

    fn holds_os_watches(&self) -> bool {
        false
    }

    /// No watch call is ever made: there is nothing to fail.
    #[cfg(any(test, feature = "test-hooks"))]
    fn inject(&mut self, _fault: Fault) {}

    #[cfg(any(test, feature = "test-hooks"))]
    fn os_watches(&self) -> Option<Vec<WatchId>> {
        Some(Vec::new())
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn pause(&self) -> Option<Arc<ReaderPause>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_holds_and_gives_no_watch() {
        let d = tempfile::tempdir().unwrap();
        let mut p = Poll;
        let e = p.watch(d.path(), false).unwrap_err();
        assert!(!e.at_limit() && !e.gone(), "{e:?}");
        assert_eq!(p.identify(d.path(), false), None);
        assert!(!p.holds_os_watches());
        assert_eq!(p.os_watches(), Some(Vec::new()));
    }
}
