//! Programs run by the tests that hold them to their contracts (the
//! library's examples, the chart server): every line a program prints
//! (stdout and stderr, as they come), waits for a line with a deadline,
//! and a stop that asks first (SIGTERM) and always reaps.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdin, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::WAIT;

/// Runs `cmd` to its end (no stdin) and returns what it printed; panics
/// naming `label` if it has not ended within [`WAIT`] (and kills it).
pub fn output(label: &str, mut cmd: Command) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {label}: {e}"));
    let pid = child.id();
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(WAIT) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // Not reaped yet (the thread is still waiting): the pid is ours.
            kill(pid);
            panic!("{label} did not exit within {WAIT:?}");
        }
    }
}

/// Which output a line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One line a process printed, without its `\n`: its bytes as written
/// (the `watch` example writes paths' raw bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub stream: Stream,
    pub bytes: Vec<u8>,
}

impl Line {
    /// The line as text (lossily, for what is not UTF-8).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// Every line so far, with a condition variable to wait for the next.
#[derive(Default)]
struct Log {
    state: Mutex<LogState>,
    grew: Condvar,
}

#[derive(Default)]
struct LogState {
    lines: Vec<Line>,
    /// Outputs that reached their end (the process closed them: it exited).
    closed: usize,
}

impl Log {
    /// Reads `from` line by line into the log until its end; echoes
    /// stderr lines to the test's own, after `label`.
    fn read(self: Arc<Self>, stream: Stream, from: impl Read + Send + 'static, label: String) {
        std::thread::spawn(move || {
            let mut from = BufReader::new(from);
            loop {
                let mut bytes = Vec::new();
                match from.read_until(b'\n', &mut bytes) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if bytes.last() == Some(&b'\n') {
                            bytes.pop();
                        }
                        let line = Line { stream, bytes };
                        if stream == Stream::Stderr {
                            eprintln!("[{label}] {}", line.text());
                        }
                        self.state.lock().unwrap().lines.push(line);
                        self.grew.notify_all();
                    }
                }
            }
            self.state.lock().unwrap().closed += 1;
            self.grew.notify_all();
        });
    }
}

/// A running example (or any command): killed, if still running, when
/// dropped, so that a failing test leaves no process behind.
pub struct Process {
    label: String,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    log: Arc<Log>,
    /// `wait_for` looks from this line on: those before were matched or
    /// passed over.
    cursor: AtomicUsize,
}

impl Process {
    /// Starts `cmd` with its stdin, stdout and stderr piped; `label` names
    /// it in messages (and in front of the stderr lines it echoes).
    pub fn start(label: &str, mut cmd: Command) -> Process {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {label}: {e}"));
        let log = Arc::new(Log::default());
        let out = child.stdout.take().unwrap();
        let err = child.stderr.take().unwrap();
        Arc::clone(&log).read(Stream::Stdout, out, label.to_owned());
        Arc::clone(&log).read(Stream::Stderr, err, label.to_owned());
        Process {
            label: label.to_owned(),
            stdin: child.stdin.take(),
            child: Some(child),
            log,
            cursor: AtomicUsize::new(0),
        }
    }

    /// How many lines it has printed so far.
    pub fn len(&self) -> usize {
        self.log.state.lock().unwrap().lines.len()
    }

    /// Whether it has printed nothing yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<Line> {
        self.log.state.lock().unwrap().lines.clone()
    }

    /// The lines `wait_for` has matched or passed over.
    pub fn seen(&self) -> Vec<Line> {
        let lines = self.lines();
        lines[..self.cursor.load(Ordering::SeqCst).min(lines.len())].to_vec()
    }

    /// Waits until there are more than `seen` lines, the process closed
    /// its outputs (it exited) or `deadline` passed; true if it closed them.
    pub fn wait_beyond(&self, seen: usize, deadline: Instant) -> bool {
        let mut st = self.log.state.lock().unwrap();
        while st.lines.len() <= seen && st.closed < 2 {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            st = self.log.grew.wait_timeout(st, deadline - now).unwrap().0;
        }
        st.closed == 2
    }

    /// Waits for the first line from index `from` on that `want` accepts,
    /// and returns its index and the line. Panics when [`WAIT`] has passed
    /// or the process exited first, naming `what` and the lines it looked at.
    pub fn find(&self, from: usize, what: &str, want: impl Fn(&Line) -> bool) -> (usize, Line) {
        let deadline = Instant::now() + WAIT;
        let mut next = from;
        loop {
            let closed = self.wait_beyond(next, deadline);
            let lines = self.lines();
            for (i, l) in lines.iter().enumerate().skip(next) {
                if want(l) {
                    return (i, l.clone());
                }
            }
            next = lines.len();
            if closed || Instant::now() >= deadline {
                let looked: Vec<String> = lines[from.min(lines.len())..]
                    .iter()
                    .map(|l| format!("{:?}: {}", l.stream, l.text()))
                    .collect();
                panic!(
                    "{}: {} for a line {what}; saw:\n  {}",
                    self.label,
                    if closed {
                        "it exited while waiting".to_owned()
                    } else {
                        format!("waited {WAIT:?}")
                    },
                    looked.join("\n  ")
                );
            }
        }
    }

    /// As [`find`](Process::find), from the line after the last one this
    /// returned (lines in between are passed over).
    pub fn wait_for(&self, what: &str, want: impl Fn(&Line) -> bool) -> Line {
        let (i, line) = self.find(self.cursor.load(Ordering::SeqCst), what, want);
        self.cursor.store(i + 1, Ordering::SeqCst);
        line
    }

    /// Waits for the line `line`, on either output.
    pub fn expect(&self, line: &str) {
        self.wait_for(&format!("{line:?}"), |l| l.bytes == line.as_bytes());
    }

    /// Waits for a line starting with `prefix`, on either output, and
    /// returns it.
    pub fn expect_prefix(&self, prefix: &str) -> String {
        self.wait_for(&format!("starting {prefix:?}"), |l| {
            l.bytes.starts_with(prefix.as_bytes())
        })
        .text()
    }

    /// Its stdin (a pipe, open until the process is stopped).
    pub fn stdin(&mut self) -> &mut ChildStdin {
        self.stdin.as_mut().expect("stdin is open")
    }

    /// Asks it to stop (see [`ask_to_stop`]) and returns its exit status;
    /// panics if it has not exited within [`WAIT`].
    pub fn terminate(&mut self) -> ExitStatus {
        self.ask_stop();
        self.wait_exit()
    }

    /// Asks it to stop (see [`ask_to_stop`]), without waiting: for a test
    /// of what it does meanwhile; [`wait_exit`](Process::wait_exit) then
    /// waits for it.
    pub fn ask_stop(&mut self) {
        ask_to_stop(self.child.as_mut().expect("still running"));
    }

    /// Its process id (while it runs).
    pub fn id(&self) -> u32 {
        self.child.as_ref().expect("still running").id()
    }

    /// Kills it without a word (SIGKILL on Unix: no handler, no clean-up
    /// runs, as a crash or an OOM kill) and reaps it.
    pub fn kill(&mut self) {
        let mut child = self.child.take().expect("still running");
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Waits for it to exit and returns its exit status; panics if it has
    /// not exited within [`WAIT`].
    pub fn wait_exit(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("still running");
        let (tx, rx) = crossbeam_channel::bounded(1);
        std::thread::spawn(move || {
            let _ = tx.send(child.wait());
        });
        rx.recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("{}: no exit within {WAIT:?}", self.label))
            .unwrap()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // A failed test (or one done with it): SIGTERM first, so that
            // build_loop stops its command's group; killed if it is still
            // there 5 s later.
            ask_to_stop(&mut child);
            let pid = child.id();
            let (tx, rx) = crossbeam_channel::bounded(1);
            std::thread::spawn(move || {
                let _ = child.wait();
                let _ = tx.send(());
            });
            if rx.recv_timeout(Duration::from_secs(5)).is_err() {
                kill(pid);
            }
        }
    }
}

/// SIGTERM on Unix. On Windows, where no console event can be sent to one
/// child alone, the process is ended (build_loop's job object ends its
/// command with it: the job closes with the last handle).
pub fn ask_to_stop(child: &mut Child) {
    #[cfg(unix)]
    signal(child.id(), nix::sys::signal::Signal::SIGTERM);
    #[cfg(windows)]
    let _ = child.kill();
}

/// SIGKILL to `pid`, a child of ours not reaped yet. (On Windows nothing:
/// the end of the run takes it; `.ci/windows` ends Wine.)
fn kill(pid: u32) {
    #[cfg(unix)]
    signal(pid, nix::sys::signal::Signal::SIGKILL);
    #[cfg(not(unix))]
    let _ = pid;
}

#[cfg(unix)]
fn signal(pid: u32, signal: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).expect("a pid fits i32"));
    let _ = nix::sys::signal::kill(pid, signal);
}
