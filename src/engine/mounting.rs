//! A polled root's file system unmounted and mounted again: roots tracked
//! when decided polled, the looks that tell of a file system gone or back
//! checked, and the looks at and below a root whose file system is away
//! not applied (what was there is kept). What is tracked is `mounts.rs`'s.

use std::ffi::OsString;
use std::io;
use std::path::Path;

use super::Engine;
use super::mounts::{Seen, Verdict};
use super::trace;
use crate::fs::{self, Look};
use crate::index::SpecId;

/// The device of `root`, or of its nearest existing ancestor while it is
/// missing (`None`: nothing could be `stat`ed).
fn nearest_device(root: &Path) -> Option<u64> {
    root.ancestors().find_map(fs::device_of)
}

impl Engine {
    /// Root `root` of `sid` is attached: tracks which file system it is on
    /// (its device, and the nearest one above it: what its path shows once
    /// that file system is unmounted). A root missing now is tracked once
    /// it is there.
    pub(super) fn track_mount(&mut self, sid: SpecId, root: &Path) {
        if self.mounts.also(sid, root) {
            return;
        }
        let Some(dev) = fs::device_of(root) else {
            return;
        };
        let below = root
            .ancestors()
            .skip(1)
            .find_map(|a| fs::device_of(a).filter(|d| *d != dev));
        self.mounts.track(sid, root, dev, below);
    }

    /// Whether what a look at `path` found is to be held, not applied:
    /// `path` is at or below a polled root whose file system is away (just
    /// now, as this look tells, or since an earlier one). A look that found
    /// the device below a root, or nothing, has the root's device checked
    /// here; a look at the root while it is away tells whether it is back.
    pub(super) fn mount_holds(&mut self, path: &Path, look: &io::Result<Look>) -> bool {
        if self.mounts.is_empty() {
            return false;
        }
        let dev = match look {
            Ok(l) => l.dev,
            Err(e) if fs::gone(e) => None,
            // Possibly transient, and no news of the file system.
            Err(_) => return self.mounts.holds(path),
        };
        let root = match self.mounts.judge(path, dev) {
            Verdict::Apply => return self.root_gone_from(path, look),
            Verdict::Hold => return true,
            Verdict::Check(root) => root,
        };
        let found = match dev {
            Some(d) if path == root => Some(d),
            _ => nearest_device(&root),
        };
        let Some(found) = found else {
            return self.mounts.holds(path);
        };
        matches!(self.mount_seen(&root, found), Seen::Went | Seen::Away)
    }

    /// Whether directory `path`, which lost its OS watch or was found
    /// gone, is kept as it was: it is at or below a polled root, or holds
    /// one, whose file system went away (an unmount drops the watches on
    /// it, and shows the directory below it instead).
    pub(super) fn mount_keeps(&mut self, path: &Path) -> bool {
        if self.mounts.is_empty() {
            return false;
        }
        let mut roots = self.mounts.roots_in(path);
        roots.extend(self.mounts.root_of(path));
        roots.into_iter().any(|root| {
            nearest_device(&root).is_some_and(|found| {
                matches!(self.mount_seen(&root, found), Seen::Went | Seen::Away)
            })
        })
    }

    /// Whether entry `path`, about to be looked at for an event or a
    /// barrier, is left as it is: it is at or below a polled root whose
    /// file system is away, or it is such a root and its file system went
    /// away just now.
    pub(super) fn mount_keeps_entry(&mut self, path: &Path) -> bool {
        !self.mounts.is_empty()
            && (self.mounts.holds(path) || (self.mounts.is_root(path) && self.mount_keeps(path)))
    }

    /// Whether a look at directory `dir` misses a polled root it holds
    /// whose file system went away (the root below a mount point, which is
    /// unmounted): then nothing it found is applied.
    fn root_gone_from(&mut self, dir: &Path, look: &io::Result<Look>) -> bool {
        let Ok(look) = look else {
            return false;
        };
        for root in self.mounts.roots_in(dir) {
            let listed = root
                .file_name()
                .is_some_and(|n| look.picture.get(n).is_some());
            if !listed
                && let Some(found) = nearest_device(&root)
                && matches!(self.mount_seen(&root, found), Seen::Went | Seen::Away)
            {
                return true;
            }
        }
        false
    }

    /// Leaves out of `modified` (what a look at directory `dir` found
    /// written or replaced) the polled roots whose file system went away
    /// or came back: a mount point shows another directory then, which is
    /// no replacement of the root (its own polls tell what changed in it).
    pub(super) fn keep_mount_points(&mut self, dir: &Path, modified: &mut Vec<(OsString, bool)>) {
        if self.mounts.is_empty() || !modified.iter().any(|(_, replaced)| *replaced) {
            return;
        }
        let mut kept = Vec::with_capacity(modified.len());
        for (name, replaced) in std::mem::take(modified) {
            let path = dir.join(&name);
            let mounted = replaced
                && self.mounts.is_root(&path)
                && nearest_device(&path).is_some_and(|found| {
                    matches!(
                        self.mount_seen(&path, found),
                        Seen::Went | Seen::Away | Seen::Back(_)
                    )
                });
            if !mounted {
                kept.push((name, replaced));
            }
        }
        *modified = kept;
    }

    /// Device `found` is at `root` now: what that tells (said; a root's
    /// file system back has its backend decided again, and one that
    /// nothing polls is watched and read again).
    fn mount_seen(&mut self, root: &Path, found: u64) -> Seen {
        let seen = self.mounts.seen(root, found, self.clock.wall());
        match seen {
            Seen::Went => {
                trace::event!(
                    WARN,
                    root = %root.display(),
                    device = found,
                    "file system of a root went away: its last known contents are kept"
                );
                if !self.root_polled(root) {
                    // Its watches went with it: nothing tells when it is
                    // back but a look.
                    let at = self.clock.now() + self.backends.poll_interval;
                    self.mounts.arm(at);
                }
            }
            Seen::Back(since) => {
                trace::event!(
                    INFO,
                    root = %root.display(),
                    device = found,
                    "file system of a root is back: what changed meanwhile follows"
                );
                self.redecide(root);
                if !self.root_polled(root) {
                    // (With the margin of a lost event's: file times are
                    // coarser than the clock.)
                    let since = self.recovery.since(since);
                    self.rewatch_under(root, since);
                }
            }
            Seen::Here | Seen::Away | Seen::Other => {}
        }
        seen
    }

    /// Whether a spec with root `root` polls it (its own polls tell when
    /// its file system is back).
    fn root_polled(&self, root: &Path) -> bool {
        self.mounts
            .specs_of(root)
            .iter()
            .any(|s| self.specs.poll_of_root(*s, root).flatten().is_some())
    }

    /// Looks again, when due, at the roots away that nothing polls: one
    /// whose file system is back is watched and read again.
    pub(super) fn mounts_due(&mut self) {
        let roots = self.mounts.due(self.clock.now());
        let mut still = false;
        for root in roots {
            if self.root_polled(&root) {
                continue;
            }
            let back = nearest_device(&root)
                .is_some_and(|found| matches!(self.mount_seen(&root, found), Seen::Back(_)));
            still |= !back;
        }
        if still {
            let at = self.clock.now() + self.backends.poll_interval;
            self.mounts.arm(at);
        }
    }

    /// Root `root`'s file system, which an event backend watched, is back
    /// after being away since `since`: every directory below it is watched
    /// again (the unmount took their watches), then read again, what
    /// changed reported (a file there before and after whose times moved
    /// since `since`, modified).
    fn rewatch_under(&mut self, root: &Path, since: std::time::SystemTime) {
        let below = self.index.ids_where(|_, n| n.path().starts_with(root));
        self.watch_again(below);
        self.rescan_under(root, Some(since));
    }

    /// A root's file system is back: how each of its specs watches it is
    /// decided again (`statfs` of what is mounted there now).
    fn redecide(&mut self, root: &Path) {
        for sid in self.mounts.specs_of(root) {
            self.decide_root(sid, root, root);
        }
    }
}
