//! Waiting for writers to finish ([`WatchOptions::write_finished`]):
//! which files of a spec's open batch are still being written, until
//! when its batch waits for them, and which of its changes move to the
//! next batch when the batch's maximum delay is up.
//!
//! One hold per spec generation, owned by the holds' owner
//! (`engine/holds.rs`), as `settle.rs`'s VCS hold is. A file is *written* when a change of it (a regular file,
//! `Created` or `Modified`) is routed into the batch, with what the look
//! that found it saw (size, mtime). It is *finished* when:
//!
//! - its writer closed it (inotify's `IN_CLOSE_WRITE`), or a rename put
//!   it there (what was renamed was written under another name):
//!   [`WriteHold::finished`];
//! - or it is *stable*: a look at least the interval after its last
//!   change sees the size and mtime of that change
//!   ([`WriteHold::looks_due`], [`WriteHold::looked`]), chokidar's
//!   `awaitWriteFinish`; in a directory polled without an OS watch, no
//!   poll reported it for twice the poll interval (the polls are the
//!   looks: the engine does not `stat` there on its own thread).
//!
//! The batch waits past its quiet window while a file is being written,
//! never past its maximum delay: then it closes with everything else,
//! and the changes of the files still being written move to the next
//! batch ([`WriteHold::carry`]), so that such a file is reported once,
//! when finished, however long it takes.
//!
//! Pure: the caller passes the time and what its looks saw.
//!
//! [`WatchOptions::write_finished`]: crate::WatchOptions::write_finished

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::batch::change::{Change, Meta};
use crate::fasthash::FastMap;

/// What a look saw of a file: its size and modification time.
type Stamp = (u64, Option<SystemTime>);

fn stamp(meta: Option<&Meta>) -> Option<Stamp> {
    meta.map(|m| (m.size, m.mtime))
}

/// One file written in the open batch.
#[derive(Clone, Debug, PartialEq, Eq)]
struct File {
    /// When its last change was routed.
    last: Instant,
    /// How long it must stay as `seen` to be stable.
    wait: Duration,
    /// What the look of its last change saw, if it `stat`ed it.
    seen: Option<Stamp>,
    /// Whether the engine looks at it (else the polls do).
    look: bool,
    /// Closed by its writer, renamed into place, or seen stable.
    done: bool,
}

impl File {
    /// Whether it is still being written at `now`.
    fn writing(&self, now: Instant) -> bool {
        !self.done && (self.look || now < self.last + self.wait)
    }
}

/// A spec's hold: the files of its open batch being written.
#[derive(Debug)]
pub(crate) struct WriteHold {
    interval: Duration,
    files: FastMap<PathBuf, File>,
}

impl WriteHold {
    /// A hold that takes a file as finished once it has stayed the same
    /// for `interval` (where its writer's close is not reported).
    pub(crate) fn new(interval: Duration) -> WriteHold {
        WriteHold {
            interval,
            files: FastMap::default(),
        }
    }

    /// File `path` was written (a `Created` or `Modified` change routed
    /// into the batch) at `now`; `meta`: what the look that found it saw.
    /// `polled`: the directory's poll interval, if only polls look at it.
    pub(crate) fn wrote(
        &mut self,
        now: Instant,
        path: &Path,
        meta: Option<&Meta>,
        polled: Option<Duration>,
    ) {
        let file = File {
            last: now,
            wait: polled.map_or(self.interval, |p| self.interval.max(2 * p)),
            seen: stamp(meta),
            look: polled.is_none(),
            done: false,
        };
        self.files.insert(path.to_path_buf(), file);
    }

    /// File `path` was removed: nothing to wait for.
    pub(crate) fn removed(&mut self, path: &Path) {
        self.files.remove(path);
    }

    /// The writer of `path` closed it, or a rename put it there.
    pub(crate) fn finished(&mut self, path: &Path) {
        if let Some(f) = self.files.get_mut(path) {
            f.done = true;
        }
    }

    /// The files the engine is to look at now (their interval is up).
    pub(crate) fn looks_due(&self, now: Instant) -> Vec<PathBuf> {
        self.files
            .iter()
            .filter(|(_, f)| f.look && !f.done && now >= f.last + f.wait)
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// A look at `path` at `now` (wall clock: `wall`) saw `meta` (`None`:
    /// gone, or not a file): the same as at its last change, or last
    /// modified at least an interval ago (a file found by reading a
    /// directory, not `stat`ed then: a new directory's contents), it is
    /// finished; else it was written since, and waits another interval.
    pub(crate) fn looked(
        &mut self,
        now: Instant,
        wall: SystemTime,
        path: &Path,
        meta: Option<&Meta>,
    ) {
        let Some(f) = self.files.get_mut(path) else {
            return;
        };
        let now_seen = stamp(meta);
        let old = now_seen
            .and_then(|(_, mtime)| mtime)
            .is_some_and(|m| m + f.wait <= wall);
        if now_seen.is_none() || now_seen == f.seen || old {
            f.done = true;
        } else {
            f.seen = now_seen;
            f.last = now;
        }
    }

    /// How many files are being written at `now`.
    pub(crate) fn writing_count(&self, now: Instant) -> usize {
        self.files.values().filter(|f| f.writing(now)).count()
    }

    /// Whether a file is being written at `now`.
    #[cfg(test)]
    pub(crate) fn busy(&self, now: Instant) -> bool {
        self.files.values().any(|f| f.writing(now))
    }

    /// When the batch, due at `due` by its quiet window and at `latest`
    /// by its maximum delay, is due with this hold: past `due` while a
    /// file is being written, until the next look at one (or the time
    /// the polls' silence makes it stable), never past `latest`. A file
    /// waiting for its writer's close or for a look keeps it to `latest`
    /// unless that comes (the engine is woken by the close, or looks when
    /// the look is due).
    pub(crate) fn deadline(&self, due: Instant, latest: Instant) -> Instant {
        let pending = self.files.values().filter(|f| !f.done);
        match pending.map(|f| f.last + f.wait).min() {
            None => due,
            Some(next) => due.max(next).min(latest),
        }
    }

    /// The batch closes at `now` with `changes`: those of files still
    /// being written are taken out (they move to the next batch, and
    /// stay held); the hold forgets every other file.
    pub(crate) fn carry(
        &mut self,
        now: Instant,
        changes: Vec<Change>,
    ) -> (Vec<Change>, Vec<Change>) {
        let (carried, out): (Vec<Change>, Vec<Change>) = changes
            .into_iter()
            .partition(|c| self.files.get(&c.path).is_some_and(|f| f.writing(now)));
        let kept: std::collections::HashSet<&Path> =
            carried.iter().map(|c| c.path.as_path()).collect();
        self.files
            .retain(|p, f| f.writing(now) && kept.contains(p.as_path()));
        (out, carried)
    }

    /// The batch closed with everything (a sync): nothing is held.
    pub(crate) fn clear(&mut self) {
        self.files.clear();
    }
}

#[cfg(test)]
#[path = "write_tests.rs"]
mod tests;
