//! The walk: covering a directory and what is below it (watch first, then
//! read, so nothing created in between is missed), the first reads, and
//! the batches a big walk goes in; a first walk's progress published
//! while it goes, and the heap trimmed after a big one. No state of its
//! own but the batch sizes (an engine field, with defaults here, changed
//! only by a test hook); the progress is `progress.rs`'s.
//!
//! A walk goes one directory at a time, depth first, until it has covered
//! a few thousand; from then on a batch at a time: the engine watches (and
//! covers) each directory of a batch, and a thread of the walk's own does
//! their first reads while the engine watches the next batch and fills the
//! last, so that a big walk costs what the slower of the two does instead
//! of their sum. Every read still begins after its own directory's watch
//! call; a node removed (or made again at its path) in between is not
//! filled.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::Engine;
use crate::batch::change::{ChangeKind, FileType};
use crate::fs::{self, DirIdent};
use crate::index::{DirId, DirNode, Listing, SpecId};
use crate::reads;

/// How a walk batches its directories: at most `size` are watched before
/// their reads, and once the walk has covered `reader_after` directories a
/// thread of its own does the reads for the rest of it (per-directory
/// backends only: on a path backend notify's thread answers an `IN_OPEN`
/// for every read, and the thread gained nothing there). Small walks never
/// start the thread: its code, stack and heap arena stay resident (5 B
/// per entry on 2,000 x 20 with the thread from the first directory, 1.7 B
/// on 50,000 x 20), for a gain that shows only on big trees.
#[derive(Debug, Clone, Copy)]
pub(super) struct Batches {
    pub size: usize,
    pub reader_after: usize,
}

impl Default for Batches {
    fn default() -> Batches {
        Batches {
            size: 64,
            reader_after: 4096,
        }
    }
}

/// A directory a walk is to cover: its path, the specs that need it, and
/// what it leads to when it is a followed link.
type ToCover = (PathBuf, Vec<SpecId>, Option<DirIdent>);

/// The thread (`specwatch-walk`) that reads a big walk's batches, in
/// order, while the engine watches the next batch and fills the last.
struct Reader {
    dirs: crossbeam_channel::Sender<Vec<Arc<Path>>>,
    looks: crossbeam_channel::Receiver<Vec<FirstRead>>,
}

impl Reader {
    /// `None` when the OS refuses a thread: the walk reads on its own.
    fn spawn<'scope>(scope: &'scope std::thread::Scope<'scope, '_>) -> Option<Reader> {
        let (dirs, todo) = crossbeam_channel::unbounded::<Vec<Arc<Path>>>();
        let (done, looks) = crossbeam_channel::unbounded();
        std::thread::Builder::new()
            .name("specwatch-walk".into())
            .spawn_scoped(scope, move || {
                for batch in todo {
                    // A panic ends the reader, not the engine (the scope
                    // would re-raise it): the walk reads on its own then.
                    let Ok(looks) = std::panic::catch_unwind(|| read_all(&batch)) else {
                        break;
                    };
                    if done.send(looks).is_err() {
                        break;
                    }
                }
            })
            .ok()?;
        Some(Reader { dirs, looks })
    }

    /// Hands `dirs` over to be read (back when the reader is gone).
    fn read(&self, dirs: Vec<Arc<Path>>) -> Result<(), Vec<Arc<Path>>> {
        self.dirs.send(dirs).map_err(|e| e.0)
    }

    /// The reads of the oldest batch handed over (`None`: the reader is
    /// gone).
    fn take(&self) -> Option<Vec<FirstRead>> {
        self.looks.recv().ok()
    }
}

/// A directory's first read as a walk hands it over: its entries already
/// in the index's form, and the sync cookies seen in it.
struct FirstRead {
    listing: io::Result<Listing>,
    cookies: Vec<PathBuf>,
}

/// The first reads of `dirs`, in order, one directory after the other (the
/// transient listing of each freed before the next is read: a batch of
/// them alive at once would leave holes between the index's allocations).
fn read_all(dirs: &[Arc<Path>]) -> Vec<FirstRead> {
    dirs.iter()
        .map(|d| {
            let look = reads::look(d, None);
            FirstRead {
                listing: look.listing.map(Listing::of_read),
                cookies: look.cookies,
            }
        })
        .collect()
}

/// The paths of the directories of `batch` whose first reads go together.
fn batched_paths(batch: &[Covered]) -> Vec<Arc<Path>> {
    batch
        .iter()
        .filter(|c| c.batched)
        .map(|c| c.path.clone())
        .collect()
}

/// A directory of a walk, watched (or not: `watched`) and covered.
struct Covered {
    id: DirId,
    path: Arc<Path>,
    specs: Vec<SpecId>,
    watched: bool,
    /// Its first read is done with the batch's (watched, never read).
    batched: bool,
}

impl Engine {
    /// Reads directory `path`'s entries; the sync cookies among them go to
    /// the sync table, not into the listing.
    pub(super) fn list_dir(
        &mut self,
        path: &Path,
    ) -> io::Result<Vec<(std::ffi::OsString, FileType)>> {
        let mut cookies = Vec::new();
        let listing = fs::read_listing(path, &mut cookies);
        self.syncs.cookies_found(cookies);
        listing
    }

    /// Covers `dir` and what is below it (minus what each spec prunes) for
    /// `specs`: watch first, then read, so nothing created in between is
    /// missed. With `report`, entries read are reported as created.
    pub(super) fn add_full(&mut self, specs: Vec<SpecId>, dir: PathBuf, report: bool) {
        self.add_tree(specs, dir, report, None)
    }

    /// [`add_full`](Self::add_full), where `dir` may be a followed symlink
    /// (`link`: the identity of the directory it leads to). Links below it
    /// are followed for the specs that follow them.
    pub(super) fn add_tree(
        &mut self,
        specs: Vec<SpecId>,
        dir: PathBuf,
        report: bool,
        link: Option<DirIdent>,
    ) {
        let mut stack = vec![(dir, specs, link)];
        // Batches watched, their reads done or under way (at most two: the
        // engine watches and fills while a reader thread reads).
        let mut ahead: VecDeque<(Vec<Covered>, Instant, Option<Vec<FirstRead>>)> = VecDeque::new();
        std::thread::scope(|scope| {
            let mut reader: Option<Reader> = None;
            let mut covered = 0;
            loop {
                // Until the walk is big, one directory at a time, each
                // filled before the next is watched: depth first, as few
                // directories queued as can be (a batch of them pushes all
                // their subdirectories at once, whose paths, freed later,
                // leave holes between the index's allocations).
                loop {
                    let big = covered >= self.batches.reader_after && self.watches.per_directory();
                    let depth = if reader.is_some() { 2 } else { 1 };
                    if ahead.len() >= depth || stack.is_empty() {
                        break;
                    }
                    let size = if big { self.batches.size } else { 1 };
                    let batch = self.cover_batch(&mut stack, report, size);
                    covered += batch.len();
                    let dirs = batched_paths(&batch);
                    if reader.is_none() && big && !dirs.is_empty() {
                        reader = Reader::spawn(scope);
                        #[cfg(test)]
                        {
                            self.walk_threads += usize::from(reader.is_some());
                        }
                    }
                    // Each read begins after its directory's watch call.
                    let read_at = self.clock.now();
                    let looks = match &reader {
                        Some(r) => r.read(dirs),
                        None => Err(dirs),
                    };
                    let looks = looks.err().map(|dirs| read_all(&dirs));
                    ahead.push_back((batch, read_at, looks));
                }
                let Some((batch, read_at, looks)) = ahead.pop_front() else {
                    break;
                };
                let looks = match looks {
                    Some(looks) => looks,
                    None => reader.as_ref().and_then(Reader::take).unwrap_or_else(|| {
                        // The reader is gone (a panic): read them here.
                        read_all(&batched_paths(&batch))
                    }),
                };
                self.fill_batch(batch, looks, read_at, report, &mut stack);
            }
        });
    }

    /// Takes up to `size` directories off the walk's `stack`: each covered
    /// and watched.
    fn cover_batch(&mut self, stack: &mut Vec<ToCover>, report: bool, size: usize) -> Vec<Covered> {
        let mut batch = Vec::new();
        while batch.len() < size.max(1)
            && let Some((path, specs, link)) = stack.pop()
        {
            batch.extend(self.cover_dir(path, specs, link, report));
        }
        batch
    }

    /// Fills the directories of `batch` from the reads of those batched
    /// (`looks`, in order, begun at `read_at`), reads the others here, and
    /// queues their subdirectories on the walk's `stack`.
    fn fill_batch(
        &mut self,
        batch: Vec<Covered>,
        looks: Vec<FirstRead>,
        read_at: Instant,
        report: bool,
        stack: &mut Vec<ToCover>,
    ) {
        let mut looks = looks.into_iter();
        for c in batch {
            let mut look = if c.batched { looks.next() } else { None };
            if let Some(l) = &mut look {
                // What is on disk, whatever became of the node.
                self.syncs.cookies_found(l.cookies.drain(..));
            }
            // The same node (not one made again at the path since: its
            // path is another allocation), not read since.
            if !self
                .index
                .get(c.id)
                .is_some_and(|n| Arc::ptr_eq(n.path(), &c.path))
            {
                continue; // removed as stale while others were watched
            }
            if !self.index.get(c.id).is_some_and(DirNode::complete) {
                let read = match look {
                    Some(look) => {
                        let listing = look.listing;
                        self.first_read(c.id, &c.path, &c.specs, listing, read_at, report, false)
                    }
                    None => self.read_new(c.id, &c.path, &c.specs, c.watched, report),
                };
                if !read {
                    continue; // gone: the parent's event removes it
                }
            }
            self.load_ignore_files(c.id, &c.specs);
            self.push_children(c.id, &c.path, &c.specs, stack);
        }
    }

    /// One directory of a walk: indexed, covered for `specs` and watched
    /// (unless already). `None` when its node went while watching.
    fn cover_dir(
        &mut self,
        path: PathBuf,
        specs: Vec<SpecId>,
        link: Option<DirIdent>,
        report: bool,
    ) -> Option<Covered> {
        let (mut id, mut created) = self.index.ensure(&path);
        if let Some(target) = link {
            if !created && self.links.target(id) != Some(&target) {
                // The path was followed to another directory before, or
                // held a directory that its events have not removed yet.
                self.remove_tree(id, report);
                (id, created) = self.index.ensure(&path);
            }
            self.links.insert(id, target);
        }
        for s in &specs {
            self.index.cover(id, *s);
        }
        let os = self.apply_mode(id);
        let needs_watch = os
            && if self.watches.per_directory() {
                self.watches.watch_of(id).is_none()
            } else {
                created || !self.index.get(id).is_some_and(DirNode::complete)
            };
        let mut watched = true;
        if needs_watch {
            // Path backends: every new directory gets its own watch
            // call, even below one just walked: a directory created
            // after that walk is only watched by the backend's own
            // recursion some time after its creation event, and reading
            // it before then could miss files.
            let mut at_limit = false;
            if !self.watches.per_directory()
                && report
                && !self.below_link(id)
                && self.watches.covers(&path)
            {
                match self.watches.watch_new_dir(&path) {
                    Ok(true) => {}
                    Ok(false) => {
                        // No directory of its own is at the path (gone, or
                        // reached through a link that replaced a directory
                        // above it, whose events are still queued): the node
                        // is stale. Drop it with its entry; those events say
                        // what is there now.
                        self.drop_stale(id, report);
                        return None;
                    }
                    Err(e) if e.at_limit() => {
                        // Covered by the watch above only in name: poll it.
                        self.poll_at_limit(id, &e);
                        at_limit = true;
                    }
                    Err(e) => {
                        self.record_error(&specs, &e.at, &format!("cannot watch: {}", e.error));
                    }
                }
            }
            watched = !at_limit && self.watch_node(id, false, &specs);
        }
        let node = self.index.get(id)?; // removed as stale while watching
        Some(Covered {
            id,
            path: node.path().clone(),
            // A polled directory's first picture is taken when it is
            // filled: its read must come just before, not a batch ago.
            batched: watched && !node.complete() && !self.polls.contains(id),
            specs,
            watched,
        })
    }

    /// The first full read of directory `id` (at `path`), just watched if
    /// `watched`. False when the directory was gone (or its node dropped):
    /// nothing below it is to be walked.
    fn read_new(
        &mut self,
        id: DirId,
        path: &Path,
        specs: &[SpecId],
        mut watched: bool,
        report: bool,
    ) -> bool {
        let mut read_at = self.clock.now();
        // A polled directory's first read is its first look: the picture
        // its next poll compares with is what was read, nothing between.
        let signed = self.polls.contains(id);
        let mut listing = if signed {
            self.first_look(id, path)
        } else {
            self.list_dir(path)
        };
        // The watch was refused because no directory was at the path
        // (gone: no retry is scheduled), yet one was read there just
        // after: it was replaced in between. Watch the one there now and
        // read it again, or it would have neither a watch nor polling, and
        // a polled parent would never notice.
        let mut tries = 0;
        while !watched && listing.is_ok() && tries < 3 && self.stranded(id) {
            tries += 1;
            watched = self.watch_node(id, false, specs);
            if watched {
                read_at = self.clock.now();
                listing = self.list_dir(path);
            }
        }
        if self.index.get(id).is_none() {
            return false;
        }
        if !watched && listing.is_ok() && self.stranded(id) {
            self.schedule_retry(id, specs);
        }
        self.first_read(
            id,
            path,
            specs,
            listing.map(Listing::of_read),
            read_at,
            report,
            signed,
        )
    }

    /// Applies the first full read of directory `id` (at `path`), begun at
    /// `read_at` after its watch: fills its node and, with `report`,
    /// reports its entries as created. A polled directory's first picture
    /// is taken now unless `signed` (the read was its first look). False
    /// when the directory was gone: nothing below it is to be walked.
    #[expect(clippy::too_many_arguments, reason = "one read's facts")]
    fn first_read(
        &mut self,
        id: DirId,
        path: &Path,
        specs: &[SpecId],
        listing: io::Result<Listing>,
        read_at: Instant,
        report: bool,
        signed: bool,
    ) -> bool {
        match listing {
            Ok(list) => {
                let n = list.len();
                let added = self.index.fill_listing(id, list, read_at, report);
                if !signed && self.polls.contains(id) {
                    self.sign(id);
                }
                if report {
                    for (name, ft) in added {
                        self.route(id, &name, ChangeKind::Created, ft, false, None);
                    }
                }
                self.problems.clear(specs, path);
                self.walked(n);
                true
            }
            Err(e) if fs::gone(&e) => {
                // Nothing is at the path any more: it went (or became a
                // file) after the event or listing that added it, and
                // perhaps after its watch call. An unread node keeping
                // that watch would never be read (`check.rs`: every
                // covered node was read, or waits for a retry), and what a
                // directory made there holds would never be reported.
                // Drop the node with its entry in the parent: the parent's
                // next event or listing adds whatever is there then.
                self.drop_stale(id, report);
                false
            }
            Err(e) => {
                self.schedule_retry(id, specs);
                self.record_error(specs, path, &format!("cannot read: {e}"));
                true
            }
        }
    }

    /// Queues the subdirectories of `id` (and, for specs that follow them,
    /// links to directories) that some of `specs` does not prune.
    fn push_children(&self, id: DirId, path: &Path, specs: &[SpecId], stack: &mut Vec<ToCover>) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        let follows = specs.iter().any(|s| self.specs.follows(*s));
        for (name, ft) in node.entries().iter() {
            let link = match ft {
                FileType::Dir => false,
                FileType::Symlink if follows => true,
                _ => continue,
            };
            let child = path.join(name);
            let cs: Vec<SpecId> = specs
                .iter()
                .copied()
                .filter(|s| (!link || self.specs.follows(*s)) && self.specs.needs(*s, &child))
                .collect();
            if cs.is_empty() {
                continue;
            }
            if !link {
                stack.push((child, cs, None));
            } else if let Some(target) = fs::link_target(&child) {
                stack.push((child, cs, Some(target)));
            }
        }
    }
}

/// A first walk's progress (`progress.rs` counts it) and the heap trim
/// after a big one.
impl Engine {
    /// A directory with `entries` entries was read during a walk: publish
    /// the progress if it is time.
    pub(super) fn walked(&mut self, entries: usize) {
        let clock = &self.clock;
        if let Some(sid) = self.progress.count(entries, || clock.now()) {
            self.out.touch(sid);
            self.publish();
        }
    }

    /// The first walk is over: its next status (at the end of the pass)
    /// says where it stands.
    pub(super) fn walk_ends(&mut self) {
        let (published, _dirs) = self.progress.end();
        if let Some(sid) = published {
            self.out.touch(sid);
        }
    }

    /// At the end of a pass: once nothing waits in the inbox after a big
    /// walk (whose events, on the portable backend, come after it), the
    /// memory freed meanwhile goes back to the OS.
    pub(super) fn trim_if_idle(&mut self) {
        let inbox = &self.inbox;
        if self.progress.take_trim(|| inbox.is_empty()) {
            crate::fs::trim_heap();
        }
    }
}
