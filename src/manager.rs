//! The manager: the user's side. It keeps the last applied spec per name and
//! sends the engine what changed; it never writes status.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use parking_lot::Mutex;

use crate::batch::event::Event;
use crate::batch::fanout::Subscriber;
use crate::engine::{Handle, Msg, trace};
use crate::error::{Error, Result};
use crate::ids::Generation;
use crate::ignore::Matcher;
use crate::reconcile::{ReconcileSummary, plan};
use crate::spec::WatchSpec;
use crate::spec::choice::Backend;
use crate::state::{self, Saver};
use crate::stats::Stats;
use crate::status::{Phase, WatchStatus};
#[cfg(feature = "stream")]
use crate::stream::EventStream;

mod builder;
mod files;
mod hold;

pub use builder::ManagerBuilder;
pub use hold::HoldGuard;

/// What [`Manager::apply`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Applied {
    /// The name was new; watching starts at this generation (1).
    Created(Generation),
    /// The spec differed from the last applied one; this is the new
    /// generation. The spec's status is reset.
    Updated(Generation),
    /// The spec equalled the last applied one (after normalisation): no OS
    /// work was done and the status was not touched.
    Unchanged(Generation),
}

impl Applied {
    /// `created`, `updated` or `unchanged`, for events.
    #[cfg(feature = "tracing")]
    fn outcome(self) -> &'static str {
        match self {
            Applied::Created(_) => "created",
            Applied::Updated(_) => "updated",
            Applied::Unchanged(_) => "unchanged",
        }
    }

    /// The generation now applied.
    #[must_use]
    pub fn generation(self) -> Generation {
        match self {
            Applied::Created(g) | Applied::Updated(g) | Applied::Unchanged(g) => g,
        }
    }
}

#[derive(Debug)]
struct AppliedSpec {
    spec: WatchSpec,
    generation: Generation,
}

/// Keeps a set of named watches running.
///
/// The manager stores the last applied (normalised) spec per name; the
/// engine thread it owns does the watching and writes every status. All
/// methods take `&self` and may be called from many threads at once; calls
/// that change specs are applied to the engine in the order they return.
///
/// Dropping the manager stops the engine, joins its threads and closes the
/// inotify descriptor.
pub struct Manager {
    pub(crate) engine: Arc<Handle>,
    /// Keeps specs' state files current.
    saver: Saver,
    capacity: usize,
    specs: Mutex<HashMap<String, AppliedSpec>>,
    /// Each stream's link to its subscriber, for `live_streams`.
    #[cfg(all(feature = "stream", feature = "test-hooks"))]
    streams: Mutex<Vec<std::sync::Weak<crate::batch::fanout::Wake>>>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("specs", &self.specs.lock().len())
            .finish_non_exhaustive()
    }
}

impl Manager {
    /// A manager in front of the engine `engine` (see
    /// [`ManagerBuilder::build`]).
    fn with_engine(engine: Handle, capacity: usize) -> Manager {
        let engine = Arc::new(engine);
        Manager {
            saver: Saver::new(engine.clone()),
            engine,
            capacity,
            specs: Mutex::new(HashMap::new()),
            #[cfg(all(feature = "stream", feature = "test-hooks"))]
            streams: Mutex::new(Vec::new()),
        }
    }

    /// A manager with the default options ([`Backend::Auto`]).
    ///
    /// # Errors
    ///
    /// As [`ManagerBuilder::build`].
    pub fn new() -> Result<Manager> {
        ManagerBuilder::default().build()
    }

    /// A builder, to choose options.
    #[must_use]
    pub fn builder() -> ManagerBuilder {
        ManagerBuilder::default()
    }

    fn check_alive(&self) -> Result<()> {
        match self.engine.shared.dead() {
            Some(reason) => Err(Error::Engine {
                message: reason,
                source: None,
            }),
            None => Ok(()),
        }
    }

    /// Refuses a spec that names the event backend this manager does not
    /// run.
    fn check_backend(&self, name: &str, spec: &WatchSpec) -> Result<()> {
        match spec.options.backend {
            Some(b @ (Backend::Native | Backend::Portable)) if b != self.engine.running => {
                Err(Error::BackendUnavailable {
                    spec: name.to_owned(),
                    wanted: b,
                    running: self.engine.running,
                })
            }
            _ => Ok(()),
        }
    }

    pub(crate) fn send(&self, msg: Msg) -> Result<()> {
        self.engine.send(msg)
    }

    /// Tells the engine, then records the spec as applied (under the specs
    /// lock, so the engine sees changes in the order they are recorded).
    /// `outcome` is `Created` or `Updated`, with the new generation.
    fn upsert(
        &self,
        specs: &mut HashMap<String, AppliedSpec>,
        name: String,
        outcome: Applied,
        spec: WatchSpec,
        matcher: Matcher,
    ) -> Result<()> {
        let generation = outcome.generation();
        // Read before the spec is created: its first batch compares with it.
        let state = match outcome {
            Applied::Created(_) => state::load(&spec),
            _ => None,
        };
        let restored = match &state {
            Some(Ok(snap)) => Some(snap.header.seq),
            _ => None,
        };
        self.send(Msg::Upsert {
            name: name.clone(),
            generation,
            spec: Box::new(spec.clone()),
            matcher: Box::new(matcher),
            state: state.map(Box::new),
        })?;
        self.saver.track(&name, &spec, restored);
        trace::event!(
            INFO,
            spec = %name,
            generation = generation.0,
            outcome = outcome.outcome(),
            paths = spec.paths.len(),
            "spec applied"
        );
        specs.insert(name, AppliedSpec { spec, generation });
        Ok(())
    }

    /// Creates or updates the named watch.
    ///
    /// The spec is validated and normalised first (see
    /// [`WatchSpec::normalized`]); an invalid spec changes nothing. Returns
    /// as soon as the engine has been told: use
    /// [`wait_watching`](Manager::wait_watching) to wait until the OS
    /// watches are in place.
    ///
    /// Applying a spec equal (once normalised) to the applied one is a
    /// no-op that returns [`Applied::Unchanged`]; any other change starts
    /// a new generation: its status starts afresh, and changes seen for the
    /// old generation but not yet delivered are delivered first, in a batch
    /// of the old generation. The new generation's first batch then holds
    /// the update's net effect: entries it shows that the old one did not
    /// are `Created`, entries no longer shown are `Removed`.
    ///
    /// An update does not report, for the paths it adds, the writes made
    /// before its `Created` of them: a modification the OS queued before
    /// the update's report, to a path the previous generation did not
    /// show, is left out (event backends; the engine tells the queue's old
    /// hints from new ones with a cookie it creates, and removes at once,
    /// in each root; after an overflow, a completed `sync` or 5 s it stops
    /// telling). A new spec reports every change from its
    /// `monitor_start_time` on. Every change made after
    /// [`wait_watching`](Manager::wait_watching) returns is reported.
    ///
    /// # Examples
    ///
    /// ```
    /// use specwatch::{Applied, Generation, Manager, WatchSpec};
    /// # fn main() -> Result<(), specwatch::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let m = Manager::new()?;
    /// let spec = WatchSpec::new([dir.path()]);
    /// assert_eq!(m.apply("src", spec.clone())?, Applied::Created(Generation(1)));
    /// assert_eq!(m.apply("src", spec.clone())?, Applied::Unchanged(Generation(1)));
    /// let wider = spec.editor_ignores(false);
    /// assert_eq!(m.apply("src", wider)?, Applied::Updated(Generation(2)));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The spec's own errors, naming it: [`Error::EmptyName`],
    /// [`Error::NoPaths`], [`Error::RelativePath`], [`Error::InvalidPattern`],
    /// [`Error::InertRule`], [`Error::InvalidOption`],
    /// [`Error::BackendUnavailable`]; [`Error::Engine`] if the engine has
    /// stopped.
    pub fn apply(&self, name: impl Into<String>, spec: WatchSpec) -> Result<Applied> {
        let name = name.into();
        let spec = spec.normalize_paths(&name)?;
        self.check_backend(&name, &spec)?;
        let mut specs = self.specs.lock();
        self.check_alive()?;
        let outcome = match specs.get(&name) {
            Some(a) if a.spec == spec => {
                // No work done: debug, so that a configuration reloaded
                // every few seconds does not fill an info log.
                trace::event!(
                    DEBUG,
                    spec = %name,
                    generation = a.generation.0,
                    outcome = "unchanged",
                    "spec applied"
                );
                return Ok(Applied::Unchanged(a.generation));
            }
            Some(a) => Applied::Updated(a.generation.next()),
            None => Applied::Created(Generation(1)),
        };
        let matcher = spec.matcher(&name)?;
        self.upsert(&mut specs, name, outcome, spec, matcher)?;
        Ok(outcome)
    }

    /// Deletes the named watch: its OS watches are released (those no other
    /// spec needs), its pending changes dropped, its status removed, and
    /// subscribers get [`Event::Deleted`]. Returns whether it existed.
    ///
    /// # Errors
    ///
    /// [`Error::Engine`] if the engine has stopped.
    pub fn delete(&self, name: &str) -> Result<bool> {
        let mut specs = self.specs.lock();
        self.check_alive()?;
        if specs.remove(name).is_none() {
            return Ok(false);
        }
        self.saver.untrack(name);
        self.send(Msg::Delete {
            name: name.to_owned(),
        })?;
        trace::event!(INFO, spec = name, "spec deleted");
        Ok(true)
    }

    /// Makes the applied set equal `desired`: creates, updates and deletes
    /// as needed, and leaves equal specs alone. Every spec is validated
    /// first; if any is invalid (or a name appears twice) nothing changes.
    /// Level-triggered: hand it the whole desired set each time (from a
    /// configuration file, say); it works out the difference.
    ///
    /// # Examples
    ///
    /// ```
    /// use specwatch::{Manager, WatchSpec};
    /// # fn main() -> Result<(), specwatch::Error> {
    /// # let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    /// let m = Manager::new()?;
    /// m.reconcile([("a", WatchSpec::new([a.path()])), ("b", WatchSpec::new([b.path()]))])?;
    /// let summary = m.reconcile([("b", WatchSpec::new([b.path()]))])?;
    /// assert_eq!(summary.deleted, ["a"]);
    /// assert_eq!(summary.unchanged, ["b"]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// Any spec's error as for [`apply`](Manager::apply), naming it, or
    /// [`Error::DuplicateName`]; then nothing was changed.
    pub fn reconcile<I, N>(&self, desired: I) -> Result<ReconcileSummary>
    where
        I: IntoIterator<Item = (N, WatchSpec)>,
        N: Into<String>,
    {
        let mut want: BTreeMap<String, WatchSpec> = BTreeMap::new();
        for (name, spec) in desired {
            let name = name.into();
            let spec = spec.normalize_paths(&name)?;
            self.check_backend(&name, &spec)?;
            if want.contains_key(&name) {
                return Err(Error::DuplicateName { spec: name });
            }
            want.insert(name, spec);
        }
        let mut specs = self.specs.lock();
        self.check_alive()?;
        let current: HashMap<String, &WatchSpec> =
            specs.iter().map(|(n, a)| (n.clone(), &a.spec)).collect();
        let want_refs: BTreeMap<String, &WatchSpec> =
            want.iter().map(|(n, s)| (n.clone(), s)).collect();
        let summary = plan(&current, &want_refs);
        drop(current);
        // Compile everything before sending anything (an unchanged spec
        // equals one that compiled before).
        let mut upserts = Vec::new();
        for name in summary.created.iter().chain(&summary.updated) {
            let spec = want.remove(name).expect("planned from want");
            let matcher = spec.matcher(name)?;
            let outcome = match specs.get(name) {
                Some(a) => Applied::Updated(a.generation.next()),
                None => Applied::Created(Generation(1)),
            };
            upserts.push((name.clone(), outcome, spec, matcher));
        }
        for name in &summary.deleted {
            specs.remove(name);
            self.saver.untrack(name);
            self.send(Msg::Delete { name: name.clone() })?;
            trace::event!(INFO, spec = %name, "spec deleted");
        }
        for (name, outcome, spec, matcher) in upserts {
            self.upsert(&mut specs, name, outcome, spec, matcher)?;
        }
        trace::traced! {
            for name in &summary.unchanged {
                trace::event!(
                    DEBUG,
                    spec = %name,
                    generation = specs.get(name).map_or(0, |a| a.generation.0),
                    outcome = "unchanged",
                    "spec applied"
                );
            }
        }
        Ok(summary)
    }

    /// The net changes of spec `name` after batch `seq`, from a bounded
    /// journal: for a consumer that was briefly away (a restarted
    /// connection, a cache reloaded from a snapshot taken at `seq`).
    ///
    /// Answers at once, without waiting on the engine, with what has been
    /// published so far (a batch still open is not included: it comes with
    /// a greater seq). Either the exact net changes since `seq` (each path
    /// once, relative to what was there at `seq`) through a newer seq to
    /// ask from next time, or [`ChangesSince::Resync`](crate::ChangesSince::Resync): `seq` is older
    /// than the journal holds, from another generation of the spec, of
    /// another instance (an earlier manager or run: see [`Seq`](crate::Seq)),
    /// or was never issued. Never a silently partial
    /// list. `seq` may be any seq this manager issued, for any spec (a
    /// consumer of several specs can keep one).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] if no spec has that name.
    pub fn changes_since(&self, name: &str, seq: crate::Seq) -> Result<crate::ChangesSince> {
        self.engine
            .shared
            .changes_since(name, seq)
            .ok_or_else(|| Error::NotFound {
                spec: name.to_owned(),
            })
    }

    /// Saves spec `name`'s state to its file
    /// ([`WatchOptions::state`](crate::WatchOptions::state)) now, and
    /// returns the seq it reflects: a later manager restored from the file
    /// reports what changed after it, and answers
    /// [`changes_since`](Manager::changes_since) from it. (@parcel/watcher's
    /// `writeSnapshot`; the state is also saved at most every
    /// [`save_every`](crate::WatchOptions::save_every) while it changes,
    /// and when the manager is dropped.)
    ///
    /// `stat`s every entry the spec sees, on the calling thread (the
    /// engine goes on meanwhile), then passes a sync barrier: a change made
    /// during the save is saved as uncertain, and reported again by a
    /// restore, never lost.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`]; [`Error::InvalidOption`] if the spec keeps no
    /// state file; [`Error::State`] if the file cannot be written (the
    /// previous one is then left whole) or the spec changes too fast to be
    /// saved; [`Error::Timeout`], [`Error::EngineBusy`], [`Error::Engine`]
    /// as for [`sync`](Manager::sync).
    pub fn save(&self, name: &str) -> Result<crate::Seq> {
        let spec = self
            .specs
            .lock()
            .get(name)
            .map(|a| a.spec.clone())
            .ok_or_else(|| Error::NotFound {
                spec: name.to_owned(),
            })?;
        self.check_alive()?;
        self.saver.save_now(name, &spec)
    }

    /// The applied (normalised) spec and its generation.
    #[must_use]
    pub fn spec(&self, name: &str) -> Option<(WatchSpec, Generation)> {
        self.specs
            .lock()
            .get(name)
            .map(|a| (a.spec.clone(), a.generation))
    }

    /// The names applied, sorted.
    #[must_use]
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.specs.lock().keys().cloned().collect();
        v.sort();
        v
    }

    /// The latest status the engine published for `name`. Never waits on
    /// the engine. Right after [`apply`](Manager::apply) this may still be
    /// the previous generation's status (or `None`): compare
    /// `observed_generation`.
    #[must_use]
    pub fn status(&self, name: &str) -> Option<WatchStatus> {
        self.engine
            .shared
            .status(name)
            .map(|s| WatchStatus::clone(&s))
    }

    /// All published statuses, sorted by name.
    #[must_use]
    pub fn statuses(&self) -> Vec<WatchStatus> {
        let mut v: Vec<WatchStatus> = self
            .engine
            .shared
            .statuses()
            .iter()
            .map(|s| WatchStatus::clone(s))
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// A new subscription to every event of every spec from now on: change
    /// batches, status snapshots and deletions, in the order the engine
    /// produced them.
    ///
    /// The engine never waits for a subscriber. The channel holds
    /// [`ManagerBuilder::subscriber_capacity`] events; while it is full, the
    /// subscriber's further batches of one spec generation are merged per
    /// path (net, as within a batch: created then removed is nothing) and
    /// only its latest status snapshot per spec is kept, so its backlog is
    /// bounded by the number of distinct changed paths. When it reads again
    /// it gets every changed path: a merged batch carries the newest seq and
    /// time of the batches in it (so seq numbers then skip). Drop the
    /// receiver to unsubscribe.
    #[must_use = "events are only delivered to a receiver that is kept"]
    pub fn subscribe(&self) -> Receiver<Event> {
        let (tx, rx) = crossbeam_channel::bounded(self.capacity);
        self.engine.subscribe(Subscriber::new(tx));
        rx
    }

    /// A new subscription as a [`Stream`](futures_core::Stream), for async
    /// programs: every event of every spec from now on, exactly as
    /// [`subscribe`](Manager::subscribe) delivers them, without a thread
    /// per subscriber. [`EventStream::changes`] keeps only the change
    /// batches, [`EventStream::statuses`] only the status snapshots.
    ///
    /// What is promised is what `subscribe` promises:
    ///
    /// - **Order**: events come in the order the engine produced them.
    /// - **The engine never waits for the stream.** It puts each event in
    ///   the stream's channel ([`ManagerBuilder::subscriber_capacity`]
    ///   events) and wakes the stream's task; the task is never polled by
    ///   a timer.
    /// - **A slow consumer loses nothing.** While its channel is full, its
    ///   further batches of one spec generation are merged per path (net:
    ///   created then removed is nothing; a merged batch carries the newest
    ///   seq and time of the batches in it) and only the latest status
    ///   snapshot per spec is kept; the engine moves them into the channel
    ///   (and wakes the task) as room appears. Every changed path arrives,
    ///   never dropped, and memory stays bounded by the number of distinct
    ///   changed paths.
    /// - **Dropping the stream unsubscribes**: the engine lets go of it at
    ///   its next event (within milliseconds if the stream was behind).
    /// - The stream ends (`None`) once the manager is dropped and every
    ///   event sent before has been read.
    ///
    /// The manager's other methods block (briefly, except [`wait_watching`]
    /// and [`sync`], which wait for the engine): from an async task, call
    /// those through the runtime's way of running blocking code.
    ///
    /// [`wait_watching`]: Manager::wait_watching
    /// [`sync`]: Manager::sync
    ///
    /// # Examples
    ///
    /// With tokio and `futures::StreamExt` (for `next`):
    ///
    /// ```no_run
    /// use futures_util::StreamExt;
    /// use specwatch::{Manager, WatchSpec};
    ///
    /// #[tokio::main]
    /// async fn main() -> Result<(), specwatch::Error> {
    ///     let manager = Manager::new()?;
    ///     // Subscribe before applying: no event of the spec is missed.
    ///     let mut batches = manager.stream().changes();
    ///     manager.apply("src", WatchSpec::new(["src"]))?;
    ///     while let Some(batch) = batches.next().await {
    ///         for change in &batch.changes {
    ///             println!("{} {} {}", batch.name, change.kind, change.path.display());
    ///         }
    ///     }
    ///     Ok(())
    /// }
    /// ```
    #[cfg(feature = "stream")]
    #[cfg_attr(docsrs, doc(cfg(feature = "stream")))]
    pub fn stream(&self) -> EventStream {
        let (tx, rx) = crossbeam_channel::bounded(self.capacity);
        let wake = std::sync::Arc::new(crate::batch::fanout::Wake::default());
        #[cfg(feature = "test-hooks")]
        {
            let mut streams = self.streams.lock();
            streams.retain(|w| w.strong_count() > 0);
            streams.push(std::sync::Arc::downgrade(&wake));
        }
        self.engine
            .subscribe(Subscriber::with_wake(tx, wake.clone()));
        EventStream::new(rx, wake)
    }

    /// Test hook: how many streams of this manager are still held, by the
    /// caller or by the engine. A dropped stream counts until the engine
    /// has let go of its subscriber.
    #[cfg(all(feature = "stream", feature = "test-hooks"))]
    #[must_use]
    pub fn live_streams(&self) -> usize {
        let mut streams = self.streams.lock();
        streams.retain(|w| w.strong_count() > 0);
        streams.len()
    }

    /// Waits until the current generation of `name` is being watched (phase
    /// `Watching` or `Degraded`), and returns that status.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] if the name is not applied, [`Error::Failed`] if
    /// its watch failed, [`Error::Timeout`] if `timeout` passed first.
    pub fn wait_watching(&self, name: &str, timeout: Duration) -> Result<WatchStatus> {
        let deadline = Instant::now() + timeout;
        let answer = self.engine.shared.wait_for(deadline, |statuses| {
            let want = self.specs.lock().get(name).map(|a| a.generation);
            let Some(want) = want else {
                return Some(Err(Error::NotFound {
                    spec: name.to_owned(),
                }));
            };
            if let Some(s) = statuses.get(name)
                && s.observed_generation >= want
            {
                match &s.phase {
                    Phase::Watching | Phase::Degraded { .. } => {
                        return Some(Ok(WatchStatus::clone(s)));
                    }
                    Phase::Failed { error } => {
                        return Some(Err(Error::Failed {
                            spec: name.to_owned(),
                            message: error.clone(),
                        }));
                    }
                    _ => {}
                }
            }
            self.check_alive().err().map(Err)
        });
        answer.unwrap_or_else(|| {
            Err(Error::Timeout {
                spec: name.to_owned(),
                waited_for: "the spec to be watched",
                timeout,
            })
        })
    }

    /// A barrier: returns once every change made to the spec's paths before
    /// the call has been delivered to subscribers.
    ///
    /// How: a uniquely named cookie file (`.specwatch-cookie-*`) is created
    /// in each root directory of the spec (for a file root, in its
    /// directory; a root that does not exist yet gets none: the name its
    /// nearest existing ancestor waits for is looked at instead, so nothing
    /// is ever written above a missing root). The
    /// OS reports events of one watcher in order, so once the engine has
    /// seen every cookie it has handled every earlier event; it then closes
    /// the spec's open batch and answers. Cookies are never indexed or
    /// reported, and are removed before `sync` returns (so do not name your
    /// own files `.specwatch-cookie-*`).
    ///
    /// Directories of the spec that are polled (no OS watch to be had) are
    /// polled once more before the answer.
    ///
    /// Where a cookie cannot be created (a read-only or permission-denied
    /// directory), the engine instead rescans that root and diffs it
    /// against its index, reporting files whose ctime is recent as modified;
    /// that is a weaker barrier (it cannot prove that the OS has handed over
    /// every event), but it loses no created or removed entry.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown name, [`Error::Timeout`] when the
    /// cookies were not all seen in time.
    pub fn sync(&self, name: &str, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        if !self.specs.lock().contains_key(name) {
            return Err(Error::NotFound {
                spec: name.to_owned(),
            });
        }
        self.check_alive()?;
        match self.engine.barrier(name, deadline)? {
            Ok(true) => Ok(()),
            // Deleted meanwhile.
            Ok(false) => Err(Error::NotFound {
                spec: name.to_owned(),
            }),
            Err(_) => {
                self.check_alive()?;
                Err(Error::Timeout {
                    spec: name.to_owned(),
                    waited_for: "the sync cookies to be seen",
                    timeout,
                })
            }
        }
    }

    /// Looks at `paths` of spec `name` now, and returns once what the look
    /// found has been delivered to subscribers: the seq returned is at
    /// least that of every batch holding it (and of every batch of the
    /// spec published before). For a program that wrote these paths (or
    /// was told that another host did: a change feed's read-your-writes)
    /// and cannot wait for the next poll; far cheaper than
    /// [`sync`](Manager::sync), which writes a cookie in every root and
    /// polls every polled directory of the spec.
    ///
    /// Each path is looked at as an OS event about it would make the
    /// engine look: an `lstat` of the name (a new directory on the way is
    /// read whole), diffed against the index, so created and removed
    /// entries are found at once. Where the directory holding a path is
    /// polled (a network or FUSE file system, [`Backend::Poll`]), that one
    /// directory is polled now instead (its listing read and its entries
    /// `stat`ed, on the scanner, as any poll), which finds a file written
    /// in place too; the rest of the spec's polled directories wait for
    /// their interval. Then the spec's open batch closes, whatever its
    /// quiet window says, as after a `sync`.
    ///
    /// Not a barrier for events: where the OS watches a directory (no
    /// polling), a file written in place is reported when its event is
    /// read, which is usually before the look, but not promised (use
    /// `sync` for that). Paths outside what the spec covers are passed
    /// over; the seq is then that of the newest batch published.
    ///
    /// ```no_run
    /// use specwatch::{Manager, WatchSpec};
    /// use std::time::Duration;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let m = Manager::new()?;
    /// m.apply("charts", WatchSpec::new(["/mnt/charts"]))?;
    /// std::fs::write("/mnt/charts/a/app-1.0.tgz", b"...")?;
    /// let seq = m.look("charts", ["/mnt/charts/a/app-1.0.tgz"], Duration::from_secs(5))?;
    /// // Every batch with a seq up to `seq` is in the subscribers' channels.
    /// # let _ = seq;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown name, [`Error::RelativePath`]
    /// for a path that is not absolute, [`Error::Timeout`] when the look
    /// was not done in time (a polled directory on a mount that hangs).
    pub fn look<I, P>(&self, name: &str, paths: I, timeout: Duration) -> Result<crate::Seq>
    where
        I: IntoIterator<Item = P>,
        P: Into<std::path::PathBuf>,
    {
        let deadline = Instant::now() + timeout;
        let not_found = || Error::NotFound {
            spec: name.to_owned(),
        };
        let paths: Vec<std::path::PathBuf> = paths.into_iter().map(Into::into).collect();
        if let Some(p) = paths.iter().find(|p| !p.is_absolute()) {
            return Err(Error::RelativePath {
                spec: name.to_owned(),
                path: p.clone(),
            });
        }
        if !self.specs.lock().contains_key(name) {
            return Err(not_found());
        }
        self.check_alive()?;
        match self.engine.look(name, paths, deadline)? {
            Ok(true) => self.engine.shared.newest_seq(name).ok_or_else(not_found),
            Ok(false) => Err(not_found()),
            Err(()) => {
                self.check_alive()?;
                Err(Error::Timeout {
                    spec: name.to_owned(),
                    waited_for: "the look at the paths",
                    timeout,
                })
            }
        }
    }

    /// Manager-wide counters. Asks the engine and waits for it: the answer
    /// reflects every call made before (apply, delete, ...), once the engine
    /// has handled them.
    ///
    /// # Errors
    ///
    /// Never blocks for long, and never passes off old or zero counters as
    /// an answer: [`Error::EngineBusy`] when the engine has not answered
    /// within 5 s (it is busy, say walking a huge new tree, or stuck on a
    /// hung network file system); [`Error::Engine`] once it has stopped.
    pub fn stats(&self) -> Result<Stats> {
        let (reply, rx) = crossbeam_channel::bounded(1);
        if let Err(e) = self.send(Msg::Stats { reply }) {
            // Why it stopped, where the engine said.
            self.check_alive()?;
            return Err(e);
        }
        match rx.recv_timeout(STATS_WAIT) {
            Ok(s) => Ok(s),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => Err(Error::EngineBusy {
                waited_for: "its counters",
                timeout: STATS_WAIT,
            }),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                self.check_alive()?;
                Err(Error::Engine {
                    message: "the engine thread stopped before answering".into(),
                    source: None,
                })
            }
        }
    }
}

/// How long [`Manager::stats`] waits for the engine at most.
const STATS_WAIT: Duration = Duration::from_secs(5);

impl Drop for Manager {
    fn drop(&mut self) {
        // The last saves need the engine.
        self.saver.finish();
        self.engine.stop();
    }
}
