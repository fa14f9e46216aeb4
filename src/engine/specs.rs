//! The applied specs, as the engine knows them: one [`SpecState`] per
//! generation (a new id for every update), the name index, each spec's
//! compiled ignore rules and its open batch. The only writer of all that.
//! The steps that create, update and delete specs are `applying.rs`'s;
//! those that route changes into batches and close them, `batching.rs`'s.
//! Whether a due batch closes is not decided here: every hold on a batch
//! (a version-control lock, files being written) is `holds.rs`'s.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::holds::Batch;
use super::trace;
use crate::batch::change::{Change, ChangeKind, FileType, Meta};
use crate::batch::coalesce::Coalescer;
use crate::ids::Generation;
use crate::ignore::Matcher;
use crate::ignore::files::{IgnoreFile, Set};
use crate::ignore::kinds::IgnoreFiles;
use crate::index::{DirNode, SpecId};
use crate::spec::{Backend, WatchSpec};
use crate::status::RootStatus;

/// One applied spec generation.
pub(super) struct SpecState {
    name: String,
    generation: Generation,
    spec: WatchSpec,
    matcher: Matcher,
    coalescer: Coalescer,
    /// How each root is watched, once attached (see `modes.rs`).
    modes: Vec<RootMode>,
    /// Set by an apply until its cookies come back (see [`Guard`]).
    guard: Option<Guard>,
    /// The device each root was found on when attached (for a spec that
    /// compares contents: the lane its files are read on).
    devices: Vec<(PathBuf, u64)>,
}

/// How one root is watched (decided in `modes.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct RootMode {
    pub status: RootStatus,
    /// `Some`: the engine polls what is below the root at this interval
    /// (no OS watch). `None`: the running backend watches it.
    pub poll: Option<Duration>,
}

/// What an apply holds back: the OS hints queued before it describe writes
/// made before it, and a `Modified` among them for a path the previous
/// generation did not show (or any path, for a new spec) is not reported.
/// The apply's own batch says what is there (`Created` for what it adds),
/// and the consumer reads the contents after it. `Created` and `Removed`
/// are not held back: they come from the index diff, which is exact.
///
/// It lasts until the cookies the engine created after the apply's reads,
/// and before its report, have all come back as events (the OS queues
/// events in order), or until an overflow or [`GUARD_DEADLINE`].
pub(super) struct Guard {
    /// The previous generation's roots and rules.
    before: Option<(Vec<PathBuf>, Matcher)>,
    cookies: Vec<PathBuf>,
    until: Instant,
}

/// The longest a [`Guard`] holds (its cookies' events should take
/// milliseconds).
pub(super) const GUARD_DEADLINE: Duration = Duration::from_secs(5);

impl Guard {
    /// Whether a `Modified` of `path` goes through.
    fn passes(&self, now: Instant, path: &Path, dir: bool) -> bool {
        now >= self.until
            || self.before.as_ref().is_some_and(|(roots, m)| {
                roots.iter().any(|r| path.starts_with(r)) && !m.is_ignored(path, dir)
            })
    }
}

impl SpecState {
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    pub(super) fn generation(&self) -> Generation {
        self.generation
    }

    /// Its options.
    pub(super) fn options(&self) -> &crate::spec::options::WatchOptions {
        &self.spec.options
    }

    /// Its roots (normalised: absolute, clean, sorted).
    pub(super) fn roots(&self) -> &[PathBuf] {
        &self.spec.paths
    }

    /// The backend the spec asks for (`None`: the manager's default).
    pub(super) fn backend(&self) -> Option<Backend> {
        self.spec.options.backend
    }

    /// How each attached root is watched, in the order of its roots.
    pub(super) fn root_statuses(&self) -> Vec<RootStatus> {
        let mut out: Vec<RootStatus> = self.modes.iter().map(|m| m.status.clone()).collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }

    /// How root `root` is watched, once attached.
    #[cfg(feature = "tracing")]
    pub(super) fn root_status(&self, root: &Path) -> Option<&RootStatus> {
        self.modes
            .iter()
            .map(|m| &m.status)
            .find(|s| s.path == root)
    }

    fn polled_roots(&self) -> usize {
        self.modes.iter().filter(|m| m.poll.is_some()).count()
    }

    /// Whether its first walk reports what it finds (`initial_scan`).
    pub(super) fn initial_scan(&self) -> bool {
        self.spec.options.initial_scan
    }

    /// How often it is rescanned, if it is (`rescan_every`).
    pub(super) fn rescan_every(&self) -> Option<Duration> {
        self.spec.options.rescan_every
    }

    /// Whether it honours ignore files.
    pub(super) fn honours_ignore_files(&self) -> bool {
        !self.spec.options.ignore_files.is_empty()
    }

    /// Whether it takes ignore file `which` found in `dir`: of a kind it
    /// chose, and where that kind counts (`.dockerignore` in a root,
    /// `.tiltignore` in a root or above one; git's anywhere).
    pub(super) fn takes_ignore_file(&self, which: IgnoreFile, dir: &Path) -> bool {
        self.spec.options.ignore_files.contains(which.kind())
            && match which {
                IgnoreFile::Docker => self.roots().iter().any(|r| r == dir),
                IgnoreFile::Tilt => self.roots().iter().any(|r| r.starts_with(dir)),
                _ => true,
            }
    }

    /// The ignore-file kinds it chose.
    pub(super) fn ignore_file_kinds(&self) -> IgnoreFiles {
        self.spec.options.ignore_files
    }

    /// Its compiled ignore rules.
    pub(super) fn matcher(&self) -> &Matcher {
        &self.matcher
    }

    /// Whether polls of its directories compare racy files' contents.
    pub(super) fn hashes(&self) -> bool {
        self.spec.options.content_hash
    }

    /// Whether it leaves out files whose content did not change.
    pub(super) fn skips_same_content(&self) -> bool {
        self.spec.options.skip_same_content
    }

    pub(super) fn follows_links(&self) -> bool {
        self.spec.options.follow_symlinks
    }

    /// Whether its changes carry metadata (`WatchOptions::metadata`).
    pub(super) fn wants_meta(&self) -> bool {
        self.spec.options.metadata
    }

    /// Whether the directory `dir` needs no watch and no reading for it.
    pub(super) fn prunes(&self, dir: &Path) -> bool {
        self.matcher.prunes(dir)
    }

    /// The device of the deepest root at or above `path`, as found when
    /// it was attached.
    pub(super) fn device_below(&self, path: &Path) -> Option<u64> {
        self.devices
            .iter()
            .filter(|(r, _)| path.starts_with(r))
            .max_by_key(|(r, _)| r.as_os_str().len())
            .map(|&(_, d)| d)
    }

    /// Its open batch, as the holds see it.
    pub(super) fn batch(&self) -> Batch {
        Batch {
            due: self.coalescer.deadline(),
            latest: self.coalescer.latest(),
        }
    }
}

/// Every applied spec generation.
#[derive(Default)]
pub(super) struct SpecTable {
    states: HashMap<SpecId, SpecState>,
    by_name: HashMap<String, SpecId>,
    /// Ids are never reused: facts keyed by a deleted spec's id cannot be
    /// mistaken for a new one's.
    next: SpecId,
    /// Roots polled by the engine, over every spec.
    polled_roots: usize,
    /// What directories need may have changed (a spec's roots' modes).
    modes_changed: bool,
    /// Specs that honour ignore files.
    ignore_files_specs: usize,
    /// Specs whose batch was opened since the engine last woke for them
    /// (`batching.rs`'s `take_due`), and those it keeps waking for: a
    /// superset of the open ones, a spec maybe named twice.
    open: Vec<SpecId>,
    /// Raw changes handed to open batches so far (for the events that
    /// say what a recovery found).
    #[cfg(feature = "tracing")]
    recorded: u64,
}

impl SpecTable {
    /// Adds a generation under `name`; returns its id and the id of the
    /// generation it replaces (still present: the caller retires it).
    pub(super) fn insert(
        &mut self,
        name: String,
        generation: Generation,
        spec: WatchSpec,
        matcher: Matcher,
    ) -> (SpecId, Option<SpecId>) {
        self.next += 1;
        let sid = self.next;
        let state = SpecState {
            coalescer: Coalescer::new(spec.options.quiet_window, spec.options.max_delay)
                .collapse_moves(spec.options.collapse_moves),
            name: name.clone(),
            generation,
            spec,
            matcher,
            modes: Vec::new(),
            guard: None,
            devices: Vec::new(),
        };
        let old = self.by_name.insert(name, sid);
        self.ignore_files_specs += usize::from(state.honours_ignore_files());
        self.states.insert(sid, state);
        (sid, old)
    }

    /// Removes a generation (and its name, if it is the current one).
    pub(super) fn remove(&mut self, sid: SpecId) {
        let Some(st) = self.states.remove(&sid) else {
            return;
        };
        if self.by_name.get(&st.name) == Some(&sid) {
            self.by_name.remove(&st.name);
        }
        self.ignore_files_specs -= usize::from(st.honours_ignore_files());
        if self.polled_roots > 0 {
            // Directories it shared may need other watching now.
            self.modes_changed = true;
        }
        self.polled_roots -= st.polled_roots();
    }

    /// Records the device root `root` of `sid` was found on.
    pub(super) fn set_device(&mut self, sid: SpecId, root: &Path, device: u64) {
        if let Some(st) = self.states.get_mut(&sid) {
            st.devices.retain(|(r, _)| r != root);
            st.devices.push((root.to_path_buf(), device));
        }
    }

    /// Records how a root of `sid` is watched; whether that changed.
    pub(super) fn set_mode(&mut self, sid: SpecId, mode: RootMode) -> bool {
        let Some(st) = self.states.get_mut(&sid) else {
            return false;
        };
        let before = st.polled_roots();
        let changed = match st
            .modes
            .iter_mut()
            .find(|m| m.status.path == mode.status.path)
        {
            Some(m) if *m == mode => false,
            Some(m) => {
                // A root attached anew on another file system.
                self.modes_changed |= m.poll != mode.poll;
                *m = mode;
                true
            }
            None => {
                st.modes.push(mode);
                true
            }
        };
        self.polled_roots = self.polled_roots + st.polled_roots() - before;
        changed
    }

    /// Sets (or removes) ignore file `which` applying in `dir` in the
    /// matcher of `sid`: whether that changed it, and the lines skipped.
    pub(super) fn set_ignore_file(
        &mut self,
        sid: SpecId,
        dir: &Path,
        which: IgnoreFile,
        text: Option<&str>,
    ) -> Set {
        self.states
            .get_mut(&sid)
            .map(|st| st.matcher.set_file(dir, which, text))
            .unwrap_or_default()
    }

    /// Whether spec `sid` takes ignore file `which` found in `dir`.
    pub(super) fn takes_ignore_file(&self, sid: SpecId, which: IgnoreFile, dir: &Path) -> bool {
        self.get(sid)
            .is_some_and(|st| st.takes_ignore_file(which, dir))
    }

    /// Whether some spec honours ignore files.
    pub(super) fn any_ignore_files(&self) -> bool {
        self.ignore_files_specs > 0
    }

    /// Whether spec `sid` honours ignore files.
    pub(super) fn honours_ignore_files(&self, sid: SpecId) -> bool {
        self.get(sid).is_some_and(SpecState::honours_ignore_files)
    }

    /// Records a raw change for `sid` alone, ignored or not (what an
    /// ignore file's change makes appear or vanish).
    pub(super) fn record_unfiltered(
        &mut self,
        sid: SpecId,
        now: Instant,
        path: PathBuf,
        kind: ChangeKind,
        ft: FileType,
    ) {
        if let Some(st) = self.states.get_mut(&sid) {
            let opened = st.coalescer.push(now, path, kind, ft, None);
            if opened {
                self.open.push(sid);
            }
            trace::traced! {
                self.recorded += 1;
            }
        }
    }

    /// Whether any root of any spec is polled by the engine.
    pub(super) fn any_polled(&self) -> bool {
        self.polled_roots > 0
    }

    /// Whether roots' modes changed in a way directories must follow
    /// (cleared by the call).
    pub(super) fn take_modes_changed(&mut self) -> bool {
        std::mem::take(&mut self.modes_changed)
    }

    /// For a directory at `path` that `sid` covers: `None` if `sid` has no
    /// root above it; `Some(None)` if the running backend watches it;
    /// `Some(Some(every))` if it is polled.
    pub(super) fn poll_below(&self, sid: SpecId, path: &Path) -> Option<Option<Duration>> {
        let st = self.states.get(&sid)?;
        st.modes
            .iter()
            .filter(|m| path.starts_with(&m.status.path))
            .max_by_key(|m| m.status.path.as_os_str().len())
            .map(|m| m.poll)
            .or(Some(None))
    }

    /// How root `root` of `sid` is watched (for the directories above it
    /// that watch for it).
    pub(super) fn poll_of_root(&self, sid: SpecId, root: &Path) -> Option<Option<Duration>> {
        let st = self.states.get(&sid)?;
        Some(
            st.modes
                .iter()
                .find(|m| m.status.path == root)
                .and_then(|m| m.poll),
        )
    }

    pub(super) fn id_of(&self, name: &str) -> Option<SpecId> {
        self.by_name.get(name).copied()
    }

    pub(super) fn get(&self, sid: SpecId) -> Option<&SpecState> {
        self.states.get(&sid)
    }

    pub(super) fn contains(&self, sid: SpecId) -> bool {
        self.states.contains_key(&sid)
    }

    pub(super) fn ids(&self) -> Vec<SpecId> {
        self.states.keys().copied().collect()
    }

    /// The name of `sid` (`?` once it is gone), for events.
    #[cfg(feature = "tracing")]
    pub(super) fn name_of(&self, sid: SpecId) -> &str {
        self.get(sid).map_or("?", SpecState::name)
    }

    /// The names of `sids` that are applied, sorted and joined with `, `,
    /// for events.
    #[cfg(feature = "tracing")]
    pub(super) fn names_of(&self, sids: &[SpecId]) -> String {
        let mut names: Vec<&str> = sids
            .iter()
            .filter_map(|s| self.get(*s).map(SpecState::name))
            .collect();
        names.sort_unstable();
        names.dedup();
        names.join(", ")
    }

    /// Raw changes handed to open batches so far.
    #[cfg(feature = "tracing")]
    pub(super) fn recorded(&self) -> u64 {
        self.recorded
    }

    /// Whether spec `sid` follows symlinks.
    pub(super) fn follows(&self, sid: SpecId) -> bool {
        self.get(sid).is_some_and(SpecState::follows_links)
    }

    /// Whether spec `sid` exists and does not prune `dir`: it needs it.
    pub(super) fn needs(&self, sid: SpecId, dir: &Path) -> bool {
        self.get(sid).is_some_and(|st| !st.prunes(dir))
    }

    /// Records a raw change of a spec's own root (never ignored).
    pub(super) fn record_root(
        &mut self,
        sid: SpecId,
        now: Instant,
        root: &Path,
        kind: ChangeKind,
        ft: FileType,
    ) {
        self.record_unfiltered(sid, now, root.to_path_buf(), kind, ft);
    }

    /// Records a raw change for spec `sid` alone, unless it ignores it.
    pub(super) fn record_for(
        &mut self,
        sid: SpecId,
        now: Instant,
        path: PathBuf,
        kind: ChangeKind,
        ft: FileType,
    ) {
        let ignored = self
            .states
            .get(&sid)
            .is_none_or(|st| st.matcher.is_ignored(&path, ft == FileType::Dir));
        if !ignored {
            self.record_unfiltered(sid, now, path, kind, ft);
        }
    }

    /// Hands a raw change at `node/name` to every spec it concerns that
    /// does not ignore it.
    /// `hinted`: a `Modified` the OS hinted at (not one a read found),
    /// which an apply's [`Guard`] may hold back. `meta`: what the look
    /// that found it `stat`ed, for the specs that want it.
    #[expect(clippy::too_many_arguments, reason = "one raw change's facts")]
    pub(super) fn route(
        &mut self,
        now: Instant,
        node: &DirNode,
        name: &OsStr,
        kind: ChangeKind,
        ft: FileType,
        hinted: bool,
        meta: Option<&Meta>,
    ) {
        let mut targets = node.concerned(name).peekable();
        if targets.peek().is_none() {
            return;
        }
        let path = node.path().join(name);
        let dir = ft == FileType::Dir;
        let entry = crate::ignore::Entry::new(&path, node.path(), name);
        for s in targets {
            if let Some(st) = self.states.get_mut(&s)
                && !st.matcher.is_entry_ignored(&entry, dir)
                && (!hinted || st.guard.as_ref().is_none_or(|g| g.passes(now, &path, dir)))
            {
                let meta = meta.filter(|_| st.wants_meta()).map(|m| Box::new(*m));
                let opened = st.coalescer.push(now, path.clone(), kind, ft, meta);
                if opened {
                    self.open.push(s);
                }
                trace::traced! {
                    self.recorded += 1;
                }
            }
        }
    }

    /// The OS paired a rename of `from` to `to`, whose ends were just
    /// routed: every spec with an open batch records it (a spec keeps it
    /// if it saw both ends: `Coalescer::moved`).
    pub(super) fn moved(&mut self, from: &Path, to: &Path) {
        let mut open = self.open.clone();
        open.sort_unstable();
        open.dedup();
        for sid in open {
            if let Some(st) = self.states.get_mut(&sid) {
                st.coalescer.moved(from, to);
            }
        }
    }

    /// Holds back, for `sid`, what the OS queued before `cookies` (see
    /// [`Guard`]); `before` is the generation it replaces.
    pub(super) fn guard(
        &mut self,
        sid: SpecId,
        before: SpecId,
        cookies: Vec<PathBuf>,
        now: Instant,
    ) {
        if cookies.is_empty() {
            return;
        }
        let before = self
            .states
            .get(&before)
            .map(|b| (b.roots().to_vec(), b.matcher.clone()));
        if let Some(st) = self.states.get_mut(&sid) {
            st.guard = Some(Guard {
                before,
                cookies,
                until: now + GUARD_DEADLINE,
            });
        }
    }

    /// The OS reported cookie `path`: guards waiting only for it end.
    pub(super) fn cookie_seen(&mut self, path: &Path) {
        for st in self.states.values_mut() {
            if let Some(g) = &mut st.guard {
                g.cookies.retain(|c| c != path);
                if g.cookies.is_empty() {
                    st.guard = None;
                }
            }
        }
    }

    /// A barrier of `sid` passed: every hint queued before it, the guard's
    /// cookies' included, has been handled (one lost cannot hold it).
    pub(super) fn end_guard(&mut self, sid: SpecId) {
        if let Some(st) = self.states.get_mut(&sid) {
            st.guard = None;
        }
    }

    /// Events were lost: no guard can tell old hints from new any more.
    pub(super) fn end_guards(&mut self) {
        for st in self.states.values_mut() {
            st.guard = None;
        }
    }

    /// Closes the open batch of `sid`, due or not.
    pub(super) fn take(&mut self, sid: SpecId) -> Vec<Change> {
        self.states
            .get_mut(&sid)
            .map(|st| st.coalescer.take())
            .unwrap_or_default()
    }

    /// Puts `changes` back into the open batch of `sid` at `now` (those a
    /// hold keeps for the next batch: files still being written).
    pub(super) fn put_back(&mut self, sid: SpecId, now: Instant, changes: Vec<Change>) {
        if let Some(st) = self.states.get_mut(&sid) {
            for c in changes {
                st.coalescer.push(now, c.path, c.kind, c.file_type, c.meta);
            }
        }
    }

    /// The batch of `sid` as its holds see it (`None`: no such spec).
    pub(super) fn batch(&self, sid: SpecId) -> Option<Batch> {
        self.states.get(&sid).map(SpecState::batch)
    }

    /// The specs the engine wakes for (see `open`), taken: the caller
    /// hands back those it keeps waking for ([`keep_open`](Self::keep_open)).
    pub(super) fn take_open(&mut self) -> Vec<SpecId> {
        std::mem::take(&mut self.open)
    }

    /// The engine keeps waking for `sids` (before those opened since).
    pub(super) fn keep_open(&mut self, mut sids: Vec<SpecId>) {
        sids.append(&mut self.open);
        self.open = sids;
    }

    /// The specs the engine wakes for (an open batch, or a hold's look).
    pub(super) fn open_ids(&self) -> &[SpecId] {
        &self.open
    }

    /// Whether spec `sid` ignores `entry` (a directory if `dir`); a spec
    /// that is gone ignores everything.
    pub(super) fn ignores(&self, sid: SpecId, entry: &crate::ignore::Entry<'_>, dir: bool) -> bool {
        self.states
            .get(&sid)
            .is_none_or(|st| st.matcher.is_entry_ignored(entry, dir))
    }
}

#[cfg(test)]
#[path = "tests/specs_table.rs"]
pub(super) mod tests;
