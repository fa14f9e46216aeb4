//! The one list of what the owners forget when a directory leaves the
//! index or a spec generation is retired. Each list names every field of
//! the engine: a new owner does not compile until it is placed here,
//! either with its clean-up or with the reason it keeps nothing per
//! directory (or per spec).

use super::Engine;
use crate::index::{DirId, DirNode, SpecId};

impl Engine {
    /// Directory `id` (`node`, already out of the index) left the index:
    /// what other owners keep about it goes, its OS watch with it.
    pub(super) fn forget_dir(&mut self, id: DirId, node: &DirNode) {
        let Engine {
            links,
            polls,
            recovery,
            rescans,
            // Below: their clean-up needs the engine's steps.
            reloads: _,  // the ignore files read in it: `forget_ignore_files`
            watches: _,  // its OS watch: `drop_watch`
            specs: _,    // the rules of its ignore files live in matchers (above)
            holds: _,    // by spec and path: a file held goes with its `Removed`
            problems: _, // per spec and path: cleared by `remove_tree`
            roots: _,    // by path: `remove_tree` queues the roots that lived there
            mounts: _,   // by root and spec: goes with the spec (`forget_spec`)
            // By path: the files that went were reported `Removed`, which
            // drops their hashes.
            contents: _,
            // Nothing per directory:
            index: _,
            inbox: _,
            clock: _,
            now: _,
            scanner: _, // a look under way is dropped by its token (`polls`, `rescans`)
            backends: _,
            progress: _,
            batches: _,
            #[cfg(test)]
                walk_threads: _,
            // A parked barrier names looks by directory id and token: a
            // directory polled (or rescanned) again under this id starts
            // with every older token done (`PollSet`, `Rescans`), so none
            // waits for it.
            syncs: _,
            out: _,
            os_events: _,
            queue: _,
            respawn: _,
            stats_waiters: _,
        } = self;
        links.remove(id);
        polls.remove(id);
        recovery.forget_dir(id);
        rescans.forget_dir(id);
        if self.specs.any_ignore_files() {
            self.forget_ignore_files(node.path(), node.full());
        }
        self.drop_watch(id, node.path());
    }

    /// Spec generation `sid` is retired (its directories already freed):
    /// the facts other owners keep about it go.
    pub(super) fn forget_spec(&mut self, sid: SpecId) {
        let Engine {
            specs,
            holds,
            problems,
            recovery,
            reloads,
            rescans,
            contents,
            mounts,
            out,
            // Keep nothing per spec, or let go of it by themselves:
            links: _,    // per directory (its directories are freed)
            polls: _,    // per directory (likewise)
            roots: _,    // by spec: one whose spec is gone is dropped when settled
            syncs: _,    // by name: a barrier of a gone spec ends with its cookies, or expires
            progress: _, // a walk's progress names the spec it counts for
            index: _,
            watches: _,
            inbox: _,
            clock: _,
            now: _,
            scanner: _,
            backends: _,
            batches: _,
            #[cfg(test)]
                walk_threads: _,
            os_events: _,
            queue: _,
            respawn: _,
            stats_waiters: _,
        } = self;
        specs.remove(sid);
        holds.forget(sid);
        problems.forget(sid);
        recovery.forget(sid);
        reloads.unfollow(sid, None);
        rescans.forget(sid);
        contents.forget(sid);
        mounts.untrack(sid);
        out.forget(sid);
    }
}
