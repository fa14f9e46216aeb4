//! The index's invariants, checked on request (test hook): nothing here
//! writes.

use super::Engine;
use crate::batch::change::FileType;

impl Engine {
    /// Violations of the invariants (empty when consistent): every node with
    /// a tracked parent is listed there as a directory (or a followed
    /// link); every directory entry of a complete, covered node that a
    /// covering spec does not prune has a node; every covered node was
    /// read (or waits for a retry) and is watched, polled or waiting for a
    /// retry; the watch table agrees with
    /// itself and with the OS; the poll set and the link set name indexed
    /// directories only.
    pub(super) fn check_invariants(&self) -> Vec<String> {
        let mut out = Vec::new();
        for id in self.index.ids() {
            let n = self.index.get(id).expect("listed");
            let listed_as = if self.links.contains(id) {
                FileType::Symlink
            } else {
                FileType::Dir
            };
            if !n.full().is_empty()
                && let (Some(parent), Some(name)) = (n.path().parent(), n.path().file_name())
                && let Some(pid) = self.index.lookup(parent)
            {
                let p = self.index.get(pid).expect("live");
                if p.tracks(name) && p.entries().get(name) != Some(listed_as) {
                    out.push(format!(
                        "{}: node exists but its parent lists it as {:?}",
                        n.path().display(),
                        p.entries().get(name)
                    ));
                }
            }
            if n.complete() && !n.full().is_empty() {
                for (name, t) in n.entries().iter() {
                    if t != FileType::Dir {
                        continue;
                    }
                    let child = n.path().join(name);
                    let needed = n.full().iter().any(|s| self.specs.needs(*s, &child));
                    if needed && self.index.lookup(&child).is_none() {
                        out.push(format!(
                            "{}: directory entry without a node",
                            child.display()
                        ));
                    }
                }
            }
            if !n.full().is_empty() && !n.complete() && !self.recovery.retrying(id) {
                out.push(format!(
                    "{}: covered but never read, and no read is pending",
                    n.path().display()
                ));
            }
            if !n.full().is_empty() && self.unwatched(id) {
                out.push(format!(
                    "{}: neither watched nor polled nor waiting for a retry",
                    n.path().display()
                ));
            }
        }
        for id in self.recovery.waiting() {
            if self.index.get(id).is_none() {
                out.push(format!("a retry waits for the freed directory id {id}"));
            }
        }
        for id in self.polls.ids() {
            if self.index.get(id).is_none() {
                out.push(format!("polled set holds the freed directory id {id}"));
            }
        }
        for id in self.links.ids() {
            if self.index.get(id).is_none() {
                out.push(format!("followed link {id} is not indexed"));
            }
        }
        out.extend(self.watches.check(|id| self.index.get(id).is_some()));
        out
    }
}
