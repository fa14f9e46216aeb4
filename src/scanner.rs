//! The scanner: the threads that look at the directories the engine
//! polls ([`fs::look`]: a listing, a `stat` of every entry, the comparison
//! with the previous picture): those of a spec's `Poll`, of `Auto` on a
//! shared file system, of the watch limit's fallback, and every directory
//! of a manager that polls everything, with an OS watch for another spec
//! or without; and at the directories a `rescan_every` rescans (which
//! hold OS watches).
//! It looks on threads of its own so that a slow or hung file system (a
//! network mount whose server stopped answering) never holds up the
//! engine: events, statuses, and the barriers of specs without polled
//! directories go on.
//!
//! **Lanes.** Each file system has a lane of its own: a thread (named
//! `specwatch-scan`), with its own queue and its own window of jobs under
//! way ([`WINDOW`]). A job names the file systems a look at its directory
//! touches, as the previous look found them (`Job::fs_key`: the
//! directory's device, on Linux mixed with the devices of mount points
//! among its entries, whose `stat` crosses into them; `None` for one never
//! looked at, whose looks share the lane of the unknown): the engine never
//! `stat`s for it. So a look that hangs holds up the looks of its own file
//! system only (and those of directories holding its mount point), and
//! every other file system's polls keep their pace. A key is bound to a
//! lane while it has looks under way, in the order handed over (so a
//! directory's looks, one at a time, come back in order); one with none
//! is free to take any lane. Threads start when first needed, are kept
//! for the next key that needs one (the one of lowest number first: a
//! manager polling one file system runs one thread), and end when the
//! engine lets go of the scanner; there are at most [`MAX_LANES`]. Once
//! that many keys have looks under way at once, a further one shares a
//! lane (by the key's hash) with those already on it.
//!
//! The engine keeps the schedule (with its clock) and the pictures; it
//! hands the scanner [`Job`]s and applies the [`Finding`]s that come back,
//! in order per lane, as any poll's. Pure I/O: no index, no engine state.
//!
//! **Files.** The lanes also read files for the engine, so that its
//! thread never waits on a file system: the content hash of a file
//! ([`FileJob`] with [`FileRead::Hash`]: a closing batch's files, and a
//! spec's files when it starts, for `skip_same_content`), and an ignore
//! file outside the watched tree ([`FileRead::Text`]: its signature, and
//! its text). A file job goes on the lane of its directory's file system
//! (the engine's key for it, as for a look) and comes back as a
//! [`FileFound`], in order with that lane's looks.
//! In the engine's own tests the scanner runs inline ([`Scanner::inline`]),
//! so that a manual clock drives polls deterministically.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::{Receiver, Sender, unbounded};

use crate::batch::content::ContentHash;
use crate::fs::{self, Look, Picture, Sig};

/// What a look is for: the engine's, handed back with the finding (each
/// kind of look has its own tokens).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// A poll of a polled directory (with an OS watch for another spec,
    /// or without).
    Poll,
    /// A `rescan_every` rescan of a directory with an OS watch.
    Rescan,
    /// A file's content hash for a spec's closing batch.
    Hash,
    /// A file's content hash when its spec starts.
    Start,
    /// An ignore file outside the watched tree.
    Outside,
}

/// One file to read.
#[derive(Debug)]
pub(crate) struct FileJob {
    pub purpose: Purpose,
    /// The engine's name for what it is read for (a spec, an ignore
    /// file), and for this read.
    pub owner: u64,
    pub token: u64,
    pub path: PathBuf,
    /// The lane (see [`Job::fs_key`]): its directory's file system.
    pub fs_key: Option<u64>,
    pub read: FileRead,
}

/// What to read of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FileRead {
    /// Its content hash (`fs::content_hash`).
    Hash,
    /// Its signature, and its text if it is at most `max` bytes.
    Text { max: u64 },
}

/// What was read of a file.
#[derive(Debug)]
pub(crate) enum FileResult {
    /// Its content hash (`None`: unreadable, gone, or too large).
    Hash(Option<ContentHash>),
    /// Its signature and text (`None`: not there, or unreadable).
    Text {
        sig: Option<Sig>,
        text: Option<String>,
    },
}

/// What a file job read.
#[derive(Debug)]
pub(crate) struct FileFound {
    pub purpose: Purpose,
    pub owner: u64,
    pub token: u64,
    pub path: PathBuf,
    pub found: FileResult,
    /// As [`Finding`]'s.
    via: Option<(usize, Option<u64>)>,
}

/// Reads file `j` (a read that panics reads nothing).
fn read_file(j: FileJob) -> FileFound {
    let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match j.read {
        FileRead::Hash => FileResult::Hash(fs::content_hash(&j.path)),
        FileRead::Text { max } => FileResult::Text {
            sig: fs::sig_of(&j.path),
            text: fs::read_small(&j.path, max),
        },
    }))
    .unwrap_or(match j.read {
        FileRead::Hash => FileResult::Hash(None),
        FileRead::Text { .. } => FileResult::Text {
            sig: None,
            text: None,
        },
    });
    FileFound {
        purpose: j.purpose,
        owner: j.owner,
        token: j.token,
        path: j.path,
        found,
        via: None,
    }
}

/// Reads every file of `jobs`, in order (the engine's tests).
#[cfg(test)]
pub(crate) fn read_files(jobs: Vec<FileJob>) -> Vec<FileFound> {
    jobs.into_iter().map(read_file).collect()
}

/// What a lane is handed: a look, or a file to read.
#[derive(Debug)]
pub(crate) enum Task {
    Look(Job),
    File(FileJob),
}

impl Task {
    fn key(&self) -> Option<u64> {
        match self {
            Task::Look(j) => j.fs_key,
            Task::File(j) => j.fs_key,
        }
    }
}

/// One directory to look at.
#[derive(Debug)]
pub(crate) struct Job {
    pub purpose: Purpose,
    /// The engine's name for the directory, and for this look of it.
    pub dir: usize,
    pub token: u64,
    pub path: PathBuf,
    /// The file systems the previous look at the directory touched (see
    /// [`Look::fs_key`]; `None`: never looked at): the lane it is looked
    /// at on.
    pub fs_key: Option<u64>,
    /// The picture to compare with (the engine's, shared).
    pub before: Arc<Picture>,
    /// Compare racy files' contents too.
    pub hash: bool,
    /// The wall clock when the job was made (what "racy" is judged
    /// against: a file written since is racy too).
    pub wall: SystemTime,
}

/// What a look found (the file systems it touched are the look's
/// `fs_key`).
#[derive(Debug)]
pub(crate) struct Finding {
    pub purpose: Purpose,
    pub dir: usize,
    pub token: u64,
    pub path: PathBuf,
    pub look: io::Result<Look>,
    /// The lane it was looked at on and the job's key (`None`: looked
    /// at inline).
    via: Option<(usize, Option<u64>)>,
}

impl Finding {
    /// What look `j` finds when it fails with `error` (for the engine's
    /// tests: storage that fails).
    #[cfg(test)]
    pub(crate) fn failed(j: Job, error: io::Error) -> Finding {
        Finding {
            purpose: j.purpose,
            dir: j.dir,
            token: j.token,
            path: j.path,
            look: Err(error),
            via: None,
        }
    }
}

/// Where findings go (false once nobody listens), from every lane: the
/// looks' and the files'.
type Deliver = Arc<dyn Fn(Vec<Finding>, Vec<FileFound>) -> bool + Send + Sync>;

/// Looks at directory `j`. A look that panics is an error of that look
/// (the directory is looked at again at its next poll), not the end of the
/// scanner.
fn look(j: Job) -> Finding {
    let look = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        fs::look(&j.path, true, Some(&j.before), j.hash, j.wall)
    }))
    .unwrap_or_else(|_| Err(io::Error::other("the look panicked")));
    Finding {
        look,
        purpose: j.purpose,
        dir: j.dir,
        token: j.token,
        path: j.path,
        via: None,
    }
}

/// Findings not handed back yet: a lane hands them back together (one
/// message for the engine to wake up to, not one per directory), as soon
/// as it has nothing more to look at, or has held some for [`HOLD`], or
/// [`HOLD_MAX`] of them.
#[derive(Default)]
struct Held {
    findings: Vec<Finding>,
    files: Vec<FileFound>,
    since: Option<Instant>,
}

/// How long a finding may wait for others while more looks are queued (a
/// look that hangs holds back those of its lane made at most this long
/// before it).
const HOLD: Duration = Duration::from_millis(1);

/// How many findings go back at most in one message.
const HOLD_MAX: usize = 256;

impl Held {
    fn push(&mut self, f: Finding) {
        self.since.get_or_insert_with(Instant::now);
        self.findings.push(f);
    }

    fn push_file(&mut self, f: FileFound) {
        self.since.get_or_insert_with(Instant::now);
        self.files.push(f);
    }

    fn full(&self) -> bool {
        self.findings.len() + self.files.len() >= HOLD_MAX
            || self.since.is_some_and(|t| t.elapsed() >= HOLD)
    }

    fn take(&mut self) -> (Vec<Finding>, Vec<FileFound>) {
        self.since = None;
        (
            std::mem::take(&mut self.findings),
            std::mem::take(&mut self.files),
        )
    }
}

/// Looks at every directory of `jobs`, in order (the engine's tests).
#[cfg(test)]
pub(crate) fn run(jobs: Vec<Job>) -> Vec<Finding> {
    jobs.into_iter().map(look).collect()
}

/// The engine's handle on the scanner.
pub(crate) enum Scanner {
    /// Looks at once, on the caller's thread (the engine's tests).
    Inline,
    /// Keeps the jobs until the test takes them ([`Scanner::take_held`],
    /// [`Scanner::take_held_files`]): the looks and reads under way for
    /// as long as the test wants.
    #[cfg(test)]
    Held(Vec<Job>, Vec<FileJob>),
    /// Looks on lanes of its own, started when first needed; findings go
    /// to `deliver`.
    Lanes(Lanes),
}

/// The lanes (see the module's documentation).
pub(crate) struct Lanes {
    deliver: Deliver,
    lanes: Vec<Lane>,
    /// The keys (file systems) with looks under way: the lane each is
    /// bound to, and how many of its jobs are out.
    bound: HashMap<Option<u64>, (usize, usize)>,
    /// Set when the engine lets go: the jobs still queued are dropped.
    stop: Arc<AtomicBool>,
    /// A lane ran out of work after a round of more than [`WINDOW`] looks
    /// (see [`Scanner::big_round_over`]).
    big_round: bool,
}

/// One lane: its thread's queue.
struct Lane {
    jobs: Sender<Vec<Task>>,
    /// Jobs handed to it whose findings have not come back.
    out: usize,
    /// Findings come back since it last had nothing to do.
    round: usize,
}

/// How many jobs a lane holds at most (queued or under way): enough to
/// keep it busy while the engine applies what it handed back (at most
/// [`HOLD_MAX`] findings a message), few enough that a poll of a million
/// directories costs no more memory under way than one of a thousand.
/// The engine keeps the rest as tokens ([`Scanner::room`]).
pub(crate) const WINDOW: usize = 4 * HOLD_MAX;

/// How many lanes (threads) the scanner runs at most.
pub(crate) const MAX_LANES: usize = 16;

impl Drop for Scanner {
    fn drop(&mut self) {
        if let Scanner::Lanes(l) = self {
            l.stop.store(true, Ordering::Relaxed);
        }
    }
}

/// A lane's thread: looks at the jobs queued, in order, until the engine
/// drops its handle (or stops listening). A look that hangs holds up the
/// looks queued behind it on this lane only.
fn serve(lane: usize, recv: &Receiver<Vec<Task>>, stop: &AtomicBool, deliver: &Deliver) {
    let mut held = Held::default();
    for batch in recv.iter() {
        let n = batch.len();
        for (i, task) in batch.into_iter().enumerate() {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let key = task.key();
            match task {
                Task::Look(job) => {
                    let mut f = look(job);
                    f.via = Some((lane, key));
                    held.push(f);
                }
                Task::File(job) => {
                    let mut f = read_file(job);
                    f.via = Some((lane, key));
                    held.push_file(f);
                }
            }
            let idle = i + 1 == n && recv.is_empty();
            if idle || held.full() {
                let (looks, files) = held.take();
                if !deliver(looks, files) {
                    return;
                }
            }
        }
    }
}

impl Lanes {
    /// The lane the jobs of key `key` go to now: the one it is
    /// bound to, a free one, or (`None`) a new one; past [`MAX_LANES`], a
    /// shared one.
    fn choose(&self, key: Option<u64>) -> Option<usize> {
        if let Some((lane, _)) = self.bound.get(&key) {
            return Some(*lane);
        }
        if let Some(free) = self.lanes.iter().position(|l| l.out == 0) {
            return Some(free);
        }
        if self.lanes.len() < MAX_LANES {
            return None;
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut h);
        Some((h.finish() % self.lanes.len() as u64) as usize)
    }

    /// A new lane, its thread started (`None`: the OS refused it).
    fn start(&mut self) -> Option<usize> {
        let (send, recv) = unbounded::<Vec<Task>>();
        let (stop, deliver) = (self.stop.clone(), self.deliver.clone());
        let lane = self.lanes.len();
        std::thread::Builder::new()
            .name("specwatch-scan".into())
            .spawn(move || serve(lane, &recv, &stop, &deliver))
            .ok()?;
        self.lanes.push(Lane {
            jobs: send,
            out: 0,
            round: 0,
        });
        Some(lane)
    }

    /// Hands `jobs` (all of key `key`) to its lane; handed
    /// back if no lane takes them.
    fn send(&mut self, key: Option<u64>, jobs: Vec<Task>) -> Result<(), Vec<Task>> {
        let lane = match self.choose(key) {
            Some(lane) => lane,
            None => match self.start() {
                Some(lane) => lane,
                None => return Err(jobs),
            },
        };
        let n = jobs.len();
        let Some(l) = self.lanes.get_mut(lane) else {
            return Err(jobs);
        };
        l.jobs.send(jobs).map_err(|e| e.into_inner())?;
        l.out += n;
        self.bound.entry(key).or_insert((lane, 0)).1 += n;
        Ok(())
    }

    /// The findings (looks' or files') that came back through `via`.
    fn returned(&mut self, via: impl Iterator<Item = (usize, Option<u64>)>) {
        for (lane, key) in via {
            if let Some(b) = self.bound.get_mut(&key) {
                b.1 = b.1.saturating_sub(1);
                if b.1 == 0 {
                    self.bound.remove(&key);
                }
            }
            if let Some(l) = self.lanes.get_mut(lane) {
                l.out = l.out.saturating_sub(1);
                l.round += 1;
                if l.out == 0 && std::mem::take(&mut l.round) > WINDOW {
                    self.big_round = true;
                }
            }
        }
    }
}

impl Scanner {
    /// A scanner that looks on the caller's thread.
    pub(crate) fn inline() -> Scanner {
        Scanner::Inline
    }

    /// A scanner that keeps its jobs for the test to run.
    #[cfg(test)]
    pub(crate) fn held() -> Scanner {
        Scanner::Held(Vec::new(), Vec::new())
    }

    /// The looks a held scanner kept (none for the others).
    #[cfg(test)]
    pub(crate) fn take_held(&mut self) -> Vec<Job> {
        match self {
            Scanner::Held(jobs, _) => std::mem::take(jobs),
            _ => Vec::new(),
        }
    }

    /// The file reads a held scanner kept (none for the others).
    #[cfg(test)]
    pub(crate) fn take_held_files(&mut self) -> Vec<FileJob> {
        match self {
            Scanner::Held(_, files) => std::mem::take(files),
            _ => Vec::new(),
        }
    }

    /// A scanner with lanes of its own (started when first needed), whose
    /// findings go to `deliver` (which must not block): the looks', and
    /// the files'.
    pub(crate) fn threaded(
        deliver: impl Fn(Vec<Finding>, Vec<FileFound>) -> bool + Send + Sync + 'static,
    ) -> Scanner {
        Scanner::Lanes(Lanes {
            deliver: Arc::new(deliver),
            lanes: Vec::new(),
            bound: HashMap::new(),
            stop: Arc::new(AtomicBool::new(false)),
            big_round: false,
        })
    }

    /// How many more jobs of key `key` (see [`Job::fs_key`]) to hand over now
    /// ([`WINDOW`] at most under way on its lane; without limit inline or
    /// held).
    pub(crate) fn room(&self, key: Option<u64>) -> usize {
        match self {
            Scanner::Lanes(l) => match l.choose(key) {
                Some(lane) => l
                    .lanes
                    .get(lane)
                    .map_or(WINDOW, |l| WINDOW.saturating_sub(l.out)),
                None => WINDOW,
            },
            _ => usize::MAX,
        }
    }

    /// The findings `found` came back (each lane's count of jobs out goes
    /// down).
    pub(crate) fn returned(&mut self, found: &[Finding]) {
        if let Scanner::Lanes(l) = self {
            l.returned(found.iter().filter_map(|f| f.via));
        }
    }

    /// The file reads `found` came back.
    pub(crate) fn returned_files(&mut self, found: &[FileFound]) {
        if let Scanner::Lanes(l) = self {
            l.returned(found.iter().filter_map(|f| f.via));
        }
    }

    /// Whether a lane has nothing to do after a round of more than
    /// [`WINDOW`] looks since it last had nothing to do (the memory the
    /// round's bookkeeping freed is then worth giving back); told once.
    pub(crate) fn big_round_over(&mut self) -> bool {
        match self {
            Scanner::Lanes(l) => std::mem::take(&mut l.big_round),
            _ => false,
        }
    }

    /// How many lanes have a thread (the scanner's tests).
    #[cfg(test)]
    fn threads(&self) -> usize {
        match self {
            Scanner::Lanes(l) => l.lanes.len(),
            _ => 0,
        }
    }

    /// Looks at `jobs` (or reads files): inline, the findings are
    /// returned; on the lanes, they are delivered later (in order per file
    /// system), and `None` is returned. Jobs no lane takes (the OS refused
    /// a thread) are done inline, and their findings returned.
    pub(crate) fn submit<W: Work>(&mut self, jobs: Vec<W>) -> Option<Vec<W::Found>> {
        if jobs.is_empty() {
            return Some(Vec::new());
        }
        #[cfg(test)]
        if let Some(held) = W::held(self) {
            held.extend(jobs);
            return None;
        }
        let Scanner::Lanes(lanes) = self else {
            return Some(jobs.into_iter().map(W::run).collect());
        };
        let inline = lanes.send_all(jobs.into_iter().map(W::task).collect());
        let found: Vec<W::Found> = inline
            .into_iter()
            .filter_map(W::of_task)
            .map(W::run)
            .collect();
        (!found.is_empty()).then_some(found)
    }
}

/// What a lane does: a look at a directory ([`Job`]) or a file read
/// ([`FileJob`]), and what it finds.
pub(crate) trait Work: Sized {
    /// What it finds.
    type Found;
    /// Does it, here.
    fn run(self) -> Self::Found;
    /// As a lane's task.
    fn task(self) -> Task;
    /// Back from a lane's task.
    fn of_task(t: Task) -> Option<Self>;
    /// Where a held scanner keeps it.
    #[cfg(test)]
    fn held(s: &mut Scanner) -> Option<&mut Vec<Self>>;
}

impl Work for Job {
    type Found = Finding;

    fn run(self) -> Finding {
        look(self)
    }

    fn task(self) -> Task {
        Task::Look(self)
    }

    fn of_task(t: Task) -> Option<Job> {
        match t {
            Task::Look(j) => Some(j),
            Task::File(_) => None,
        }
    }

    #[cfg(test)]
    fn held(s: &mut Scanner) -> Option<&mut Vec<Job>> {
        match s {
            Scanner::Held(jobs, _) => Some(jobs),
            _ => None,
        }
    }
}

impl Work for FileJob {
    type Found = FileFound;

    fn run(self) -> FileFound {
        read_file(self)
    }

    fn task(self) -> Task {
        Task::File(self)
    }

    fn of_task(t: Task) -> Option<FileJob> {
        match t {
            Task::File(j) => Some(j),
            Task::Look(_) => None,
        }
    }

    #[cfg(test)]
    fn held(s: &mut Scanner) -> Option<&mut Vec<FileJob>> {
        match s {
            Scanner::Held(_, files) => Some(files),
            _ => None,
        }
    }
}

impl Lanes {
    /// Hands `tasks` to their lanes, per file system, in the order handed
    /// over; returns those no lane took (the OS refused a thread).
    fn send_all(&mut self, tasks: Vec<Task>) -> Vec<Task> {
        let mut groups: Vec<(Option<u64>, Vec<Task>)> = Vec::new();
        let mut at: HashMap<Option<u64>, usize> = HashMap::new();
        for t in tasks {
            let key = t.key();
            match at.get(&key).and_then(|&i| groups.get_mut(i)) {
                Some(g) => g.1.push(t),
                None => {
                    at.insert(key, groups.len());
                    groups.push((key, vec![t]));
                }
            }
        }
        let mut refused = Vec::new();
        for (key, tasks) in groups {
            if let Err(tasks) = self.send(key, tasks) {
                refused.extend(tasks);
            }
        }
        refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(dir: &std::path::Path, token: u64) -> Job {
        on(dir, token, None)
    }

    /// A job of directory `dir` (`token` for its engine name too) on file
    /// system `key`.
    fn on(dir: &std::path::Path, token: u64, key: Option<u64>) -> Job {
        Job {
            purpose: Purpose::Poll,
            dir: token as usize,
            token,
            path: dir.to_path_buf(),
            fs_key: key,
            before: Arc::default(),
            hash: false,
            wall: SystemTime::now(),
        }
    }

    #[test]
    fn inline_looks_at_once_and_a_thread_delivers_in_order() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("f"), "x").unwrap();
        let found = Scanner::inline().submit(vec![job(d.path(), 1)]).unwrap();
        assert_eq!(found.len(), 1);
        let look = found[0].look.as_ref().unwrap();
        let names = look.picture.listing();
        assert_eq!(names.len(), 1, "{names:?}");
        assert_eq!(
            look.fs_key,
            fs::device_of(d.path()), // (no mount point below it)
            "a look tells the file system it found the directory on"
        );

        let (tx, rx) = unbounded();
        let mut s = Scanner::threaded(move |f, _| tx.send(f).is_ok());
        assert!(s.submit(vec![job(d.path(), 2)]).is_none(), "on the thread");
        assert!(s.submit(vec![job(d.path(), 3), job(d.path(), 4)]).is_none());
        let mut tokens = Vec::new();
        while tokens.len() < 3 {
            let batch = rx
                .recv_timeout(Duration::from_secs(10))
                .expect("the scanner's findings within 10 s");
            tokens.extend(batch.iter().map(|f| f.token));
        }
        assert_eq!(tokens, vec![2, 3, 4], "in the order submitted");
        drop(s);
        assert!(
            rx.recv_timeout(Duration::from_secs(10)).is_err(),
            "the thread ends with its handle"
        );
    }

    /// The thread holds at most [`WINDOW`] jobs; a round's end is told
    /// once, and only after a round bigger than the window.
    #[test]
    fn the_window_counts_jobs_out_and_tells_a_big_round_over() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(
            Scanner::inline().room(None),
            usize::MAX,
            "inline: no window"
        );
        let (tx, rx) = unbounded();
        let mut s = Scanner::threaded(move |f, _| tx.send(f).is_ok());
        assert_eq!(s.room(None), WINDOW);
        let jobs: Vec<Job> = (0..WINDOW as u64).map(|t| job(d.path(), t)).collect();
        assert!(s.submit(jobs).is_none());
        assert_eq!(s.room(None), 0, "the window is full");
        assert_eq!(
            s.room(Some(1)),
            WINDOW,
            "another file system: a lane of its own"
        );
        let mut back = 0;
        while back < WINDOW {
            let batch = rx
                .recv_timeout(Duration::from_secs(10))
                .expect("the scanner's findings within 10 s");
            back += batch.len();
            s.returned(&batch);
            if back < WINDOW {
                assert!(!s.big_round_over(), "jobs still out after {back}");
            }
        }
        assert_eq!(s.room(None), WINDOW, "all came back");
        assert!(
            !s.big_round_over(),
            "a round of the window's size is not big"
        );
        assert!(
            s.submit((0..=WINDOW as u64).map(|t| job(d.path(), t)).collect())
                .is_none()
        );
        let mut back = 0;
        while back <= WINDOW {
            let batch = rx
                .recv_timeout(Duration::from_secs(10))
                .expect("the scanner's findings within 10 s");
            back += batch.len();
            s.returned(&batch);
        }
        assert!(s.big_round_over(), "a round bigger than the window is over");
        assert!(!s.big_round_over(), "told once");
    }

    /// A lane held up (its thread stuck, as in a look at a hung mount)
    /// holds up the jobs of its own file system only; a file system with
    /// nothing under way takes a free lane (one thread for one file
    /// system at a time), and past [`MAX_LANES`] file systems share.
    #[test]
    fn a_lane_held_up_holds_up_only_its_own_file_system() {
        let d = tempfile::tempdir().unwrap();
        let (tx, rx) = unbounded();
        let (let_go, held) = unbounded::<()>();
        // Findings of directory 1 wait until the test lets go: lane 0's
        // thread is stuck in the meantime.
        let mut s = Scanner::threaded(move |f: Vec<Finding>, _| {
            if f.iter().any(|f| f.dir == 1) {
                let _ = held.recv();
            }
            tx.send(f).is_ok()
        });
        assert!(s.submit(vec![on(d.path(), 1, Some(10))]).is_none());
        assert!(s.submit(vec![on(d.path(), 2, Some(10))]).is_none());
        assert_eq!(s.room(Some(10)), WINDOW - 2, "its lane's window");
        assert_eq!(s.room(Some(20)), WINDOW, "a lane of its own");
        for t in 3..6 {
            assert!(s.submit(vec![on(d.path(), t, Some(20))]).is_none());
            let f = rx
                .recv_timeout(Duration::from_secs(10))
                .expect("file system 20 is served while 10's lane is stuck");
            assert_eq!(f.iter().map(|f| f.token).collect::<Vec<_>>(), vec![t]);
            s.returned(&f);
        }
        assert_eq!(s.threads(), 2, "one lane each, the free one reused");
        let_go.send(()).unwrap();
        let mut tokens = Vec::new();
        while tokens.len() < 2 {
            let f = rx.recv_timeout(Duration::from_secs(10)).unwrap();
            tokens.extend(f.iter().map(|f| f.token));
            s.returned(&f);
        }
        assert_eq!(tokens, vec![1, 2], "in order on its lane");
        assert_eq!(s.room(Some(10)), WINDOW);
        // Many file systems with looks under way at once: at most
        // `MAX_LANES` threads.
        let n = MAX_LANES as u64 + 4;
        let jobs = (0..n)
            .map(|t| on(d.path(), 100 + t, Some(100 + t)))
            .collect();
        assert!(s.submit(jobs).is_none());
        assert!(s.threads() <= MAX_LANES, "{} lanes", s.threads());
        let mut back = 0;
        while back < n as usize {
            let f = rx.recv_timeout(Duration::from_secs(10)).unwrap();
            back += f.len();
            s.returned(&f);
        }
        assert_eq!(s.room(Some(100)), WINDOW, "every lane free again");
    }
}
