//! Specs' state files ([`WatchOptions::state`](crate::WatchOptions::state)),
//! on the manager's side: a snapshot read and checked before its spec is
//! created (`load`), a save (`save`), and the thread that keeps the files
//! current (`Saver`).
//!
//! A save never blocks the engine for the `stat`s: the engine hands over
//! the entries the spec sees and the newest seq `t` (every batch up to it
//! is published); the saving thread `stat`s them; a sync barrier then
//! makes sure every change made meanwhile is published, and the journal
//! names each path changed after `t` (through `t2`). Those are saved as
//! *uncertain* (whether they exist at `t2`, not their signature: a
//! restore reports them again), the rest with the signature just read,
//! which is theirs at `t2` since nothing changed them. The snapshot
//! reflects `t2`.
//!
//! The folder is the saved state: this file (loading, saving and the
//! saving thread, the only I/O here), `snapshot` (the file format, pure)
//! and `restore` (what a restored batch says, and why a file is refused).

pub(crate) mod restore;
pub(crate) mod snapshot;

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use parking_lot::Mutex;

use crate::batch::change::FileType;
use crate::batch::journal::ChangesSince;
use crate::engine::{Handle, Msg};
use crate::error::{Error, Result};
use crate::fs::{self, Sig};
use crate::ids::Seq;
use crate::spec::WatchSpec;
use crate::state::restore::StateRefused;
use crate::state::snapshot::{Block, Header, Saved, Snapshot, Stamp};

/// How long a save waits for the engine, and again for its sync barrier.
const SAVE_TIMEOUT: Duration = Duration::from_secs(30);
/// The same for the last saves, as the manager is dropped: a drop does
/// not hang for long on an engine that is stuck (a hung mount).
const LAST_SAVE_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the saving thread looks for specs due.
const TICK: Duration = Duration::from_millis(250);

/// The state saved for the (normalised) `spec`, if it keeps one: the
/// snapshot, or why it cannot be used.
pub(crate) fn load(spec: &WatchSpec) -> Option<std::result::Result<Snapshot, StateRefused>> {
    let path = spec.options.state.as_deref()?;
    Some(read(spec, path))
}

fn read(spec: &WatchSpec, path: &Path) -> std::result::Result<Snapshot, StateRefused> {
    let bytes = match fs::read_whole(path) {
        Ok(Some(b)) => b,
        Ok(None) => return Err(StateRefused::Missing),
        Err(e) => {
            return Err(StateRefused::Unreadable {
                error: e.to_string(),
            });
        }
    };
    let snap = Snapshot::decode(bytes)?;
    if snap.header.fingerprint != snapshot::fingerprint(spec) {
        return Err(StateRefused::OtherSpec);
    }
    for (root, dev) in &snap.header.roots {
        let now = fs::device_of(root).unwrap_or(0);
        if *dev != 0 && now != 0 && *dev != now {
            return Err(StateRefused::OtherFileSystem { root: root.clone() });
        }
    }
    Ok(snap)
}

/// Saves spec `name`'s state to its file now; the seq it reflects.
pub(crate) fn save(
    engine: &Handle,
    name: &str,
    spec: &WatchSpec,
    timeout: Duration,
) -> Result<Seq> {
    let path = spec
        .options
        .state
        .as_deref()
        .ok_or_else(|| Error::InvalidOption {
            spec: name.to_owned(),
            option: "state",
            reason: "the spec keeps no state file: set WatchOptions::state".into(),
        })?;
    let fail = |message: String, source: Option<std::io::Error>| Error::State {
        spec: name.to_owned(),
        path: path.to_path_buf(),
        message,
        source,
    };
    // A journal that cannot answer (it overflowed during the save, or
    // the spec was updated) makes it start again; a few times.
    for _ in 0..3 {
        let (reply, answer) = crossbeam_channel::bounded(1);
        engine.send(Msg::Export {
            name: name.to_owned(),
            reply,
        })?;
        let export = answer
            .recv_timeout(timeout)
            .map_err(|_| Error::EngineBusy {
                waited_for: "the entries to save",
                timeout,
            })?
            .ok_or_else(|| Error::NotFound {
                spec: name.to_owned(),
            })?;
        let t = Seq::new(export.instance, export.through);
        // What the spec sees, and the `stat`s, on a thread per core (each
        // with its own copy of the rules).
        let matchers = fs::workers(export.dirs.len(), || export.matcher.clone());
        // Encoded as they come: the file's bytes, not a tree of entries.
        let mut dirs: HashMap<PathBuf, Block> =
            fs::in_parallel(&export.dirs, matchers, |matcher, dir| {
                let entries = stamp_dir(&dir.path, dir.visible(matcher));
                (dir.path.clone(), Block::of(&entries))
            })
            .into_iter()
            .collect();
        drop(export);
        sync(engine, name, timeout)?;
        let (changes, t2) = match engine.shared.changes_since(name, t) {
            Some(ChangesSince::Changes { changes, through }) => (changes, through),
            Some(_) => continue,
            None => {
                return Err(Error::NotFound {
                    spec: name.to_owned(),
                });
            }
        };
        // What changed meanwhile, by directory: those blocks decoded,
        // changed, encoded again.
        let mut by_dir: HashMap<&Path, Vec<&crate::batch::change::Change>> = HashMap::new();
        for c in &changes {
            if let (Some(dir), Some(_)) = (c.path.parent(), c.path.file_name()) {
                by_dir.entry(dir).or_default().push(c);
            }
        }
        for (dir, changed) in by_dir {
            let block = dirs.entry(dir.to_path_buf()).or_default();
            let mut entries = block.entries();
            for c in changed {
                let entry = c.path.file_name().expect("grouped by name");
                let at = entries.binary_search_by(|(n, _)| n.as_os_str().cmp(entry));
                match (c.kind.exists_after(), at) {
                    (true, Ok(i)) => entries[i].1 = Saved::Uncertain(c.file_type),
                    (true, Err(i)) => {
                        entries.insert(i, (entry.to_os_string(), Saved::Uncertain(c.file_type)));
                    }
                    (false, Ok(i)) => {
                        entries.remove(i);
                    }
                    (false, Err(_)) => {}
                }
            }
            *block = Block::of(&entries);
        }
        let header = Header {
            fingerprint: snapshot::fingerprint(spec),
            seq: t2,
            roots: spec
                .paths
                .iter()
                .map(|r| (r.clone(), fs::device_of(r).unwrap_or(0)))
                .collect(),
        };
        let mut dirs: Vec<(PathBuf, Block)> = dirs.into_iter().collect();
        let bytes = snapshot::encode(&header, &mut dirs);
        drop(dirs);
        let written = fs::write_atomic(path, &bytes);
        drop(bytes);
        // What the save allocated, given back (glibc keeps it otherwise,
        // in the workers' arenas too).
        fs::trim_heap();
        written.map_err(|e| fail("cannot write it".into(), Some(e)))?;
        return Ok(t2);
    }
    Err(fail(
        "the spec changed faster than it could be saved (its journal could not answer)".into(),
        None,
    ))
}

/// The entries of `dir` the spec sees (`entries`, sorted), with their
/// signatures now; one that cannot be `stat`ed (gone since: its change is
/// on its way) is saved as uncertain.
fn stamp_dir(dir: &Path, entries: Vec<(OsString, FileType)>) -> Vec<(OsString, Saved)> {
    let sigs = fs::sigs_of(dir, &entries);
    entries
        .into_iter()
        .zip(sigs)
        .map(|((name, t), sig)| {
            let saved = match sig {
                Some(s) if s.size != Sig::UNKNOWN.size => Saved::Known(stamp_of(&s)),
                _ => Saved::Uncertain(t),
            };
            (name, saved)
        })
        .collect()
}

fn stamp_of(s: &Sig) -> Stamp {
    Stamp {
        kind: s.kind,
        size: s.size,
        mtime: s.mtime,
        ctime: s.ctime,
        ino: s.ino,
    }
}

/// A sync barrier of spec `name`: every change made before is published.
fn sync(engine: &Handle, name: &str, timeout: Duration) -> Result<()> {
    match engine.barrier(name, Instant::now() + timeout)? {
        Ok(true) => Ok(()),
        Ok(false) => Err(Error::NotFound {
            spec: name.to_owned(),
        }),
        Err(_) => Err(Error::Timeout {
            spec: name.to_owned(),
            waited_for: "the sync barrier of a save",
            timeout,
        }),
    }
}

/// A spec whose state is kept current.
#[derive(Debug)]
struct Tracked {
    spec: WatchSpec,
    /// The seq of the last save (or of the snapshot restored).
    saved: Option<Seq>,
    /// When it was last saved (or started being tracked).
    at: Instant,
}

/// Keeps specs' state files current: a thread that saves each spec at
/// most every `save_every` while it changed, and a last save when the
/// manager goes.
pub(crate) struct Saver {
    engine: Arc<Handle>,
    tracked: Arc<Mutex<HashMap<String, Tracked>>>,
    /// One save at a time (they share a temporary file name).
    saving: Arc<Mutex<()>>,
    thread: Mutex<Option<(Sender<()>, JoinHandle<()>)>>,
}

impl Saver {
    pub(crate) fn new(engine: Arc<Handle>) -> Saver {
        Saver {
            engine,
            tracked: Arc::default(),
            saving: Arc::default(),
            thread: Mutex::new(None),
        }
    }

    /// Spec `name` is now `spec` (normalised): tracked if it keeps a
    /// state, else not. `restored`: the seq of the snapshot it was
    /// restored from, if it is new and was.
    pub(crate) fn track(&self, name: &str, spec: &WatchSpec, restored: Option<Seq>) {
        let mut tracked = self.tracked.lock();
        if spec.options.state.is_none() {
            tracked.remove(name);
            return;
        }
        let saved = match tracked.remove(name) {
            // An update that keeps the same file and what it sees goes on
            // from the last save.
            Some(t)
                if t.spec.options.state == spec.options.state
                    && snapshot::fingerprint(&t.spec) == snapshot::fingerprint(spec) =>
            {
                t.saved
            }
            _ => restored,
        };
        tracked.insert(
            name.to_owned(),
            Tracked {
                spec: spec.clone(),
                saved,
                at: Instant::now(),
            },
        );
        drop(tracked);
        self.start();
    }

    /// Spec `name` was deleted.
    pub(crate) fn untrack(&self, name: &str) {
        self.tracked.lock().remove(name);
    }

    /// Saves spec `name` now (see [`Manager::save`](crate::Manager::save)).
    pub(crate) fn save_now(&self, name: &str, spec: &WatchSpec) -> Result<Seq> {
        save_tracked(
            &self.engine,
            &self.tracked,
            &self.saving,
            name,
            spec,
            SAVE_TIMEOUT,
        )
    }

    fn start(&self) {
        let mut thread = self.thread.lock();
        if thread.is_some() {
            return;
        }
        let (stop, stopped) = crossbeam_channel::bounded(1);
        let (engine, tracked, saving) = (
            self.engine.clone(),
            self.tracked.clone(),
            self.saving.clone(),
        );
        let spawned = std::thread::Builder::new()
            .name("specwatch-save".into())
            .spawn(move || run(&engine, &tracked, &saving, &stopped));
        // Without the thread, the states are still saved at the end and
        // by `Manager::save`.
        if let Ok(h) = spawned {
            *thread = Some((stop, h));
        }
    }

    /// The last saves, of every spec that changed since its last one:
    /// before the engine stops.
    pub(crate) fn finish(&self) {
        if let Some((stop, h)) = self.thread.lock().take() {
            let _ = stop.send(());
            let _ = h.join();
        }
        for (name, spec) in due(&self.engine, &self.tracked, None) {
            let _ = save_tracked(
                &self.engine,
                &self.tracked,
                &self.saving,
                &name,
                &spec,
                LAST_SAVE_TIMEOUT,
            );
        }
    }
}

/// Saves `name` and notes it.
fn save_tracked(
    engine: &Handle,
    tracked: &Mutex<HashMap<String, Tracked>>,
    saving: &Mutex<()>,
    name: &str,
    spec: &WatchSpec,
    timeout: Duration,
) -> Result<Seq> {
    let _one = saving.lock();
    let result = save(engine, name, spec, timeout);
    // For the spec's status (`last_error`).
    let _ = engine.send(Msg::StateSaved {
        name: name.to_owned(),
        error: result
            .as_ref()
            .err()
            .map(|e| format!("state not saved: {e}")),
    });
    if let Some(t) = tracked.lock().get_mut(name) {
        t.at = Instant::now();
        if let Ok(seq) = &result {
            t.saved = Some(*seq);
        }
    }
    result
}

/// The specs that changed since their last save (all of them never
/// saved), and whose last save is at least `save_every` old (`now`; `None`:
/// whatever its age).
fn due(
    engine: &Handle,
    tracked: &Mutex<HashMap<String, Tracked>>,
    now: Option<Instant>,
) -> Vec<(String, WatchSpec)> {
    let tracked = tracked.lock();
    tracked
        .iter()
        .filter(|(_, t)| {
            now.is_none_or(|now| now.duration_since(t.at) >= t.spec.options.save_every)
        })
        .filter(|(name, t)| match t.saved {
            None => true,
            Some(seq) => !matches!(
                engine.shared.changes_since(name, seq),
                Some(ChangesSince::Changes { ref changes, .. }) if changes.is_empty()
            ),
        })
        .map(|(name, t)| (name.clone(), t.spec.clone()))
        .collect()
}

fn run(
    engine: &Handle,
    tracked: &Mutex<HashMap<String, Tracked>>,
    saving: &Mutex<()>,
    stop: &Receiver<()>,
) {
    loop {
        match stop.recv_timeout(TICK) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => return,
        }
        if engine.shared.dead().is_some() {
            return;
        }
        for (name, spec) in due(engine, tracked, Some(Instant::now())) {
            let _ = save_tracked(engine, tracked, saving, &name, &spec, SAVE_TIMEOUT);
        }
    }
}
