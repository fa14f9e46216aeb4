//! The scanner: the thread that looks at the directories the engine polls
//! without an OS watch ([`fs::look`]: a listing, a `stat` of every entry,
//! the comparison with the previous picture): those of a spec's `Poll`,
//! of `Auto` on a shared file system, of the watch limit's fallback, and
//! every directory of a manager that polls everything; and at the
//! directories a `rescan_every` rescans (which hold OS watches). It looks on a
//! thread of its own so that a slow or hung file system (a network mount
//! whose server stopped answering) never holds up the engine: events,
//! statuses, and the barriers of specs without polled directories go on.
//! One thread serves every polled directory: a look that hangs holds up
//! the looks queued behind it (of any spec) until it returns; a scanner
//! per file system is the next step (issue 22).
//!
//! The engine keeps the schedule (with its clock) and the pictures; it
//! hands the scanner [`Job`]s and applies the [`Finding`]s that come back,
//! in order, as any poll's. Pure I/O: no index, no engine state. In the
//! engine's own tests the scanner runs inline ([`Scanner::inline`]), so
//! that a manual clock drives polls deterministically.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::{Sender, unbounded};

use crate::fs::{self, Look, Picture};

/// What a look is for: the engine's, handed back with the finding (each
/// kind of look has its own tokens).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// A poll of a directory polled without an OS watch.
    Poll,
    /// A `rescan_every` rescan of a directory with an OS watch.
    Rescan,
}

/// One directory to look at.
#[derive(Debug)]
pub(crate) struct Job {
    pub purpose: Purpose,
    /// The engine's name for the directory, and for this look of it.
    pub dir: usize,
    pub token: u64,
    pub path: PathBuf,
    /// The picture to compare with (the engine's, shared).
    pub before: Arc<Picture>,
    /// Compare racy files' contents too.
    pub hash: bool,
    /// The wall clock when the job was made (what "racy" is judged
    /// against: a file written since is racy too).
    pub wall: SystemTime,
}

/// What a look found.
#[derive(Debug)]
pub(crate) struct Finding {
    pub purpose: Purpose,
    pub dir: usize,
    pub token: u64,
    pub path: PathBuf,
    pub look: io::Result<Look>,
}

/// Where findings go (false once nobody listens).
type Deliver = Box<dyn Fn(Vec<Finding>) -> bool + Send>;

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
    }
}

/// Findings not handed back yet: the scanner hands them back together
/// (one message for the engine to wake up to, not one per directory), as
/// soon as it has nothing more to look at, or has held some for [`HOLD`],
/// or [`HOLD_MAX`] of them.
#[derive(Default)]
struct Held {
    findings: Vec<Finding>,
    since: Option<Instant>,
}

/// How long a finding may wait for others while more looks are queued (a
/// look that hangs holds back those made at most this long before it).
const HOLD: Duration = Duration::from_millis(1);

/// How many findings go back at most in one message.
const HOLD_MAX: usize = 256;

impl Held {
    fn push(&mut self, f: Finding) {
        self.since.get_or_insert_with(Instant::now);
        self.findings.push(f);
    }

    fn full(&self) -> bool {
        self.findings.len() >= HOLD_MAX || self.since.is_some_and(|t| t.elapsed() >= HOLD)
    }

    fn take(&mut self) -> Vec<Finding> {
        self.since = None;
        std::mem::take(&mut self.findings)
    }
}

/// Looks at every directory of `jobs`, in order.
pub(crate) fn run(jobs: Vec<Job>) -> Vec<Finding> {
    jobs.into_iter().map(look).collect()
}

/// The engine's handle on the scanner.
pub(crate) enum Scanner {
    /// Looks at once, on the caller's thread (the engine's tests).
    Inline,
    /// Keeps the jobs until the test takes them ([`Scanner::take_held`]):
    /// the looks under way for as long as the test wants.
    #[cfg(test)]
    Held(Vec<Job>),
    /// Looks on a thread of its own, started at the first job; findings
    /// go to `deliver`.
    Thread {
        deliver: Option<Deliver>,
        jobs: Option<Sender<Vec<Job>>>,
        /// Set when the engine lets go: the jobs still queued are dropped.
        stop: Arc<AtomicBool>,
        /// Jobs handed to the thread whose findings have not come back.
        out: usize,
        /// Findings come back since the thread last had nothing to do.
        round: usize,
    },
}

/// How many jobs the thread holds at most (queued or under way): enough
/// to keep it busy while the engine applies what it handed back (at most
/// [`HOLD_MAX`] findings a message), few enough that a poll of a million
/// directories costs no more memory under way than one of a thousand.
/// The engine keeps the rest as tokens ([`Scanner::room`]).
pub(crate) const WINDOW: usize = 4 * HOLD_MAX;

impl Drop for Scanner {
    fn drop(&mut self) {
        if let Scanner::Thread { stop, .. } = self {
            stop.store(true, Ordering::Relaxed);
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
        Scanner::Held(Vec::new())
    }

    /// The jobs a held scanner kept (none for the others).
    #[cfg(test)]
    pub(crate) fn take_held(&mut self) -> Vec<Job> {
        match self {
            Scanner::Held(jobs) => std::mem::take(jobs),
            _ => Vec::new(),
        }
    }

    /// A scanner with a thread of its own (started when first needed),
    /// whose findings go to `deliver` (which must not block).
    pub(crate) fn threaded(deliver: impl Fn(Vec<Finding>) -> bool + Send + 'static) -> Scanner {
        Scanner::Thread {
            deliver: Some(Box::new(deliver)),
            jobs: None,
            stop: Arc::new(AtomicBool::new(false)),
            out: 0,
            round: 0,
        }
    }

    /// How many more jobs to hand over now ([`WINDOW`] at most under way
    /// on the thread; without limit inline or held).
    pub(crate) fn room(&self) -> usize {
        match self {
            Scanner::Thread { out, .. } => WINDOW.saturating_sub(*out),
            _ => usize::MAX,
        }
    }

    /// `n` findings of the thread's came back.
    pub(crate) fn returned(&mut self, n: usize) {
        if let Scanner::Thread { out, round, .. } = self {
            *out = out.saturating_sub(n);
            *round += n;
        }
    }

    /// Whether the thread has nothing to do after a round of more than
    /// [`WINDOW`] looks (the memory the round's bookkeeping freed is then
    /// worth giving back); the count of the round starts again whenever
    /// it has nothing to do.
    pub(crate) fn big_round_over(&mut self) -> bool {
        match self {
            Scanner::Thread { out: 0, round, .. } => std::mem::take(round) > WINDOW,
            _ => false,
        }
    }

    /// Looks at `jobs`: inline, the findings are returned; on the thread,
    /// they are delivered later (in order), and `None` is returned. A
    /// thread the OS refuses leaves the scanner inline.
    pub(crate) fn submit(&mut self, jobs: Vec<Job>) -> Option<Vec<Finding>> {
        if jobs.is_empty() {
            return Some(Vec::new());
        }
        #[cfg(test)]
        if let Scanner::Held(held) = self {
            held.extend(jobs);
            return None;
        }
        let Scanner::Thread {
            deliver,
            jobs: tx,
            stop,
            out,
            ..
        } = self
        else {
            return Some(run(jobs));
        };
        if tx.is_none()
            && let Some(d) = deliver.take()
        {
            let (send, recv) = unbounded::<Vec<Job>>();
            let stop = stop.clone();
            let started = std::thread::Builder::new()
                .name("specwatch-scan".into())
                .spawn(move || {
                    // Ends when the engine drops its handle (or stops
                    // listening). A look that hangs holds up the looks
                    // queued behind it on this thread.
                    let mut held = Held::default();
                    for batch in recv.iter() {
                        let n = batch.len();
                        for (i, job) in batch.into_iter().enumerate() {
                            if stop.load(Ordering::Relaxed) {
                                return;
                            }
                            held.push(look(job));
                            let idle = i + 1 == n && recv.is_empty();
                            if (idle || held.full()) && !d(held.take()) {
                                return;
                            }
                        }
                    }
                });
            if started.is_ok() {
                *tx = Some(send);
            }
        }
        let n = jobs.len();
        match tx {
            Some(t) => match t.send(jobs) {
                Ok(()) => {
                    *out += n;
                    None
                }
                Err(e) => Some(run(e.into_inner())),
            },
            None => Some(run(jobs)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(dir: &std::path::Path, token: u64) -> Job {
        Job {
            purpose: Purpose::Poll,
            dir: 7,
            token,
            path: dir.to_path_buf(),
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
        let names = found[0].look.as_ref().unwrap().picture.listing();
        assert_eq!(names.len(), 1, "{names:?}");

        let (tx, rx) = unbounded();
        let mut s = Scanner::threaded(move |f| tx.send(f).is_ok());
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
        assert_eq!(Scanner::inline().room(), usize::MAX, "inline: no window");
        let (tx, rx) = unbounded();
        let mut s = Scanner::threaded(move |f| tx.send(f).is_ok());
        assert_eq!(s.room(), WINDOW);
        let jobs: Vec<Job> = (0..WINDOW as u64).map(|t| job(d.path(), t)).collect();
        assert!(s.submit(jobs).is_none());
        assert_eq!(s.room(), 0, "the window is full");
        let mut back = 0;
        while back < WINDOW {
            let batch = rx
                .recv_timeout(Duration::from_secs(10))
                .expect("the scanner's findings within 10 s");
            back += batch.len();
            s.returned(batch.len());
            if back < WINDOW {
                assert!(!s.big_round_over(), "jobs still out after {back}");
            }
        }
        assert_eq!(s.room(), WINDOW, "all came back");
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
            s.returned(batch.len());
        }
        assert!(s.big_round_over(), "a round bigger than the window is over");
        assert!(!s.big_round_over(), "told once");
    }
}
