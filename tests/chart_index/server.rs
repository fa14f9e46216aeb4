//! The server under test: a `chart_index` example process, killed on
//! drop, with its stderr kept line by line so that waits can wake on each
//! line it prints.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::charts::{Listing, parse_index};
use crate::client::{Body, Resp, http, index_path};

/// How long any wait may take before the test fails.
pub(crate) const WAIT: Duration = Duration::from_secs(20);
/// What a server prints on stderr before each of its roots' backend.
const ROOT_LINE: &str = "chart_index: root: ";

/// The example binary cargo built beside this test.
pub(crate) fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().unwrap().parent().unwrap();
    let bin = profile.join("examples").join("chart_index");
    assert!(
        bin.exists(),
        "the chart_index example is not built at {} (cargo test builds examples; \
         with --test chart_index alone, run cargo build --example chart_index first)",
        bin.display()
    );
    bin
}

// ---------------------------------------------------------------------------
// A running server

/// A server's stderr, every line kept, with a condition variable to wait
/// for the next one.
#[derive(Default)]
struct Log {
    state: Mutex<LogState>,
    grew: Condvar,
}

#[derive(Default)]
struct LogState {
    lines: Vec<String>,
    /// The server closed its stderr (it exited).
    closed: bool,
}

impl Log {
    fn push(&self, line: String) {
        self.state.lock().unwrap().lines.push(line);
        self.grew.notify_all();
    }

    fn close(&self) {
        self.state.lock().unwrap().closed = true;
        self.grew.notify_all();
    }

    fn len(&self) -> usize {
        self.state.lock().unwrap().lines.len()
    }

    /// Waits until there are more than `seen` lines, the stream closed or
    /// `deadline` passed; returns the lines from `seen` on and whether the
    /// stream is closed.
    fn wait_beyond(&self, seen: usize, deadline: Instant) -> (Vec<String>, bool) {
        let mut st = self.state.lock().unwrap();
        while st.lines.len() <= seen && !st.closed {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            st = self.grew.wait_timeout(st, deadline - now).unwrap().0;
        }
        (st.lines[seen.min(st.lines.len())..].to_vec(), st.closed)
    }
}

/// A `chart_index` process; killed when dropped, so a failing test leaves
/// no server behind.
pub(crate) struct Server {
    child: Child,
    pub(crate) label: String,
    /// `127.0.0.1:PORT`.
    pub(crate) addr: String,
    /// The server's stderr, line by line (also echoed to the test's).
    log: Arc<Log>,
    /// Lines before this one were matched (or passed over) by `wait_log`.
    cursor: AtomicUsize,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts a server over `storage` on a free port and waits for its
    /// `LISTENING` line.
    pub(crate) fn start(label: &str, storage: &Path, args: &[&str]) -> Server {
        let mut child = Command::new(example())
            .arg("--storage")
            .arg(storage)
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the chart_index example");
        let log = Arc::new(Log::default());
        let err = BufReader::new(child.stderr.take().unwrap());
        {
            let label = label.to_owned();
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for line in err.lines() {
                    let Ok(line) = line else { break };
                    eprintln!("[{label}] {line}");
                    log.push(line);
                }
                log.close();
            });
        }
        let (tx, first) = crossbeam_channel::bounded(1);
        let mut out = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = out.read_line(&mut line);
            let _ = tx.send(line);
            // Keep reading so the server never blocks on a full pipe.
            let _ = std::io::copy(&mut out, &mut std::io::sink());
        });
        let mut server = Server {
            child,
            label: label.to_owned(),
            addr: String::new(),
            log,
            cursor: AtomicUsize::new(0),
        };
        let line = first
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("{label}: no LISTENING line within {WAIT:?}"));
        let addr = line
            .trim_end()
            .strip_prefix("LISTENING http://")
            .unwrap_or_else(|| panic!("{label}: first stdout line is not LISTENING: {line:?}"));
        server.addr = addr.to_owned();
        server
    }

    pub(crate) fn get(&self, target: &str) -> Resp {
        http(&self.addr, "GET", target.as_bytes(), Body::None)
    }

    pub(crate) fn post(&self, target: &str, body: &[u8]) -> Resp {
        http(&self.addr, "POST", target.as_bytes(), Body::Length(body))
    }

    pub(crate) fn delete(&self, target: &str) -> Resp {
        http(&self.addr, "DELETE", target.as_bytes(), Body::None)
    }

    /// The index of `tenant` (`""` for the root) as it is now.
    pub(crate) fn index(&self, tenant: &str) -> (Resp, Result<Listing, String>) {
        let r = self.get(&index_path(tenant));
        let listing = if r.status == 200 {
            parse_index(&r.text())
        } else {
            Err(format!("status {}", r.status))
        };
        (r, listing)
    }

    /// Asks `GET target` until `done` accepts the answer: again after each
    /// line the server prints (it prints one after applying each batch,
    /// and its index changes at no other time). Panics at the deadline, or
    /// when the server exits, saying what was awaited and what it last
    /// answered.
    fn wait_until(&self, target: &str, what: &str, done: impl Fn(&Resp) -> bool) -> Resp {
        let deadline = Instant::now() + WAIT;
        loop {
            // Counted before asking: a line printed meanwhile wakes the wait.
            let seen = self.log.len();
            let r = self.get(target);
            if done(&r) {
                return r;
            }
            let (_, closed) = self.log.wait_beyond(seen, deadline);
            if closed || Instant::now() >= deadline {
                panic!(
                    "{}: {} for {what} (GET {target} on {}); last answer: {} {}",
                    self.label,
                    if closed {
                        "the server exited while waiting".to_owned()
                    } else {
                        format!("waited {WAIT:?}")
                    },
                    self.addr,
                    r.status,
                    r.text()
                );
            }
        }
    }

    /// Waits until `tenant`'s index satisfies `cond`, and returns it.
    pub(crate) fn wait_index(
        &self,
        tenant: &str,
        what: &str,
        cond: impl Fn(&Listing) -> bool,
    ) -> Listing {
        let r = self.wait_until(&index_path(tenant), what, |r| {
            r.status == 200 && parse_index(&r.text()).is_ok_and(|l| cond(&l))
        });
        parse_index(&r.text()).unwrap()
    }

    /// Waits until `GET target` answers `status`.
    pub(crate) fn wait_status(&self, target: &str, status: u16, what: &str) -> Resp {
        self.wait_until(target, what, |r| r.status == status)
    }

    /// Waits for a stderr line that `pred` accepts, after those matched
    /// by earlier calls.
    pub(crate) fn wait_log(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        let mut from = self.cursor.load(Ordering::SeqCst);
        let mut seen = Vec::new();
        loop {
            let (lines, closed) = self.log.wait_beyond(from, deadline);
            for (i, l) in lines.iter().enumerate() {
                if pred(l) {
                    self.cursor.store(from + i + 1, Ordering::SeqCst);
                    return l.clone();
                }
            }
            from += lines.len();
            seen.extend(lines);
            if closed || Instant::now() >= deadline {
                panic!(
                    "{}: {} for a log line {what}; saw {seen:#?}",
                    self.label,
                    if closed {
                        "the server exited while waiting".to_owned()
                    } else {
                        format!("waited {WAIT:?}")
                    },
                );
            }
        }
    }

    /// The line saying how the storage root is watched (`chart_index:
    /// root: ...`), without its prefix.
    pub(crate) fn root_line(&self) -> String {
        self.wait_log("saying how the root is watched", |l| {
            l.starts_with(ROOT_LINE)
        })[ROOT_LINE.len()..]
            .to_owned()
    }
}
