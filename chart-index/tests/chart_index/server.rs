//! The server under test: a `chart-index` process
//! (`testkit::process`), stopped on drop, every line it prints kept so that
//! waits can wake on each.
//!
//! Its log lines are human-readable by default, `TIME LEVEL [request: ]
//! MESSAGE FIELDS` (see the `logging` module): the waits and `output`
//! read each stderr line's [`message`] (what follows the level and the
//! request span's name), so that a test matches what the server says,
//! not when.

use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::Instant;

use crate::charts::{Listing, parse_index};
use crate::client::{Body, Field, Resp, form, http, http_with, index_path};
use testkit::WAIT;
use testkit::process::{Process, Stream};

/// A command running the server's binary, as cargo built it for these
/// tests, with none of the environment variables it reads (the test's
/// own environment must not configure it).
pub(crate) fn command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_chart-index"));
    for var in chart_index::config::env_vars() {
        cmd.env_remove(var);
    }
    cmd
}

/// What a server prints on stderr before each of its roots' backend.
const ROOT_LINE: &str = "chart_index: root: ";

/// The message of a log line (`2026-12-07T10:00:00.123456Z  INFO request:
/// served status=200 ...` is `served status=200 ...`): what follows the
/// time, the level and the span's name; a line not in that form as it is.
pub(crate) fn message(line: &str) -> &str {
    let Some((time, rest)) = line.split_once(' ') else {
        return line;
    };
    let Some((level, rest)) = rest.trim_start().split_once(' ') else {
        return line;
    };
    let is_time = time.ends_with('Z') && time.starts_with(|c: char| c.is_ascii_digit());
    if !is_time || !matches!(level, "TRACE" | "DEBUG" | "INFO" | "WARN" | "ERROR") {
        return line;
    }
    rest.strip_prefix("request: ").unwrap_or(rest)
}

/// Whether a message is an access line (one per request answered).
pub(crate) fn is_access(message: &str) -> bool {
    message.starts_with("served ")
}

/// A `chart_index` process (stopped when dropped, so a failing test
/// leaves no server behind), and its address.
pub(crate) struct Server {
    process: Process,
    pub(crate) label: String,
    /// `127.0.0.1:PORT`.
    pub(crate) addr: String,
    /// `http` or `https` (with `--tls-cert`).
    pub(crate) scheme: String,
}

impl Server {
    /// Starts a server over `storage` on a free port, its writes open to
    /// anyone (`--allow-anonymous-write`), and waits for its `LISTENING`
    /// line.
    pub(crate) fn start(label: &str, storage: &Path, args: &[&str]) -> Server {
        let mut all = vec!["--allow-anonymous-write"];
        all.extend_from_slice(args);
        Server::start_with(label, storage, &all, &[])
    }

    /// Starts a server over `storage` on a free port with `args` alone and
    /// the environment variables `env` (and no `BASIC_AUTH_USER` or
    /// `BASIC_AUTH_PASS` but those), and waits for its `LISTENING` line.
    pub(crate) fn start_with(
        label: &str,
        storage: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let mut cmd = command();
        cmd.arg("--storage")
            .arg(storage)
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied());
        Server::from_process(label, Process::start(label, cmd))
    }

    /// The server `process` runs (the binary, or a container of its
    /// image), once it has said `LISTENING`: its address is the one said.
    pub(crate) fn from_process(label: &str, process: Process) -> Server {
        // Its first stdout line (looked for without passing over the
        // stderr lines before it, which `wait_log` looks at).
        let (_, first) = process.find(0, "on stdout (LISTENING)", |l| l.stream == Stream::Stdout);
        let line = first.text();
        let (scheme, addr) = line
            .trim_end()
            .strip_prefix("LISTENING ")
            .and_then(|url| url.split_once("://"))
            .filter(|(scheme, _)| matches!(*scheme, "http" | "https"))
            .unwrap_or_else(|| panic!("{label}: first stdout line is not LISTENING: {line:?}"));
        Server {
            label: label.to_owned(),
            addr: addr.to_owned(),
            scheme: scheme.to_owned(),
            process,
        }
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

    /// `method target` with the header lines `headers` and `body` (sent
    /// with its length unless empty).
    pub(crate) fn send(&self, method: &str, target: &str, headers: &[&str], body: &[u8]) -> Resp {
        let body = if body.is_empty() {
            Body::None
        } else {
            Body::Length(body)
        };
        http_with(&self.addr, method, target.as_bytes(), headers, body)
    }

    /// Every line it has printed so far, stdout's and stderr's (the
    /// messages of its log lines).
    pub(crate) fn output(&self) -> Vec<String> {
        self.process
            .lines()
            .iter()
            .map(|l| message(&l.text()).to_owned())
            .collect()
    }

    /// Every line it has printed so far, as printed.
    pub(crate) fn raw_output(&self) -> Vec<String> {
        self.process.lines().iter().map(|l| l.text()).collect()
    }

    /// Uploads `fields` (name, file name, bytes) as helm-push does: a
    /// multipart form.
    pub(crate) fn post_form(&self, target: &str, fields: &[Field<'_>]) -> Resp {
        let (body, content_type) = form(fields);
        http_with(
            &self.addr,
            "POST",
            target.as_bytes(),
            &[&format!("Content-Type: {content_type}")],
            Body::Length(&body),
        )
    }

    /// Sends it SIGTERM, without waiting.
    pub(crate) fn ask_stop(&mut self) {
        self.process.ask_stop();
    }

    /// Waits for it to exit, and returns how.
    pub(crate) fn wait_exit(&mut self) -> ExitStatus {
        self.process.wait_exit()
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
    /// line the server prints but access lines (it prints one after
    /// applying each batch, and its index changes at no other time; its
    /// watch says so when its phase changes). Panics at the deadline, or
    /// when the server exits, saying what was awaited and what it last
    /// answered.
    pub(crate) fn wait_until(
        &self,
        target: &str,
        what: &str,
        done: impl Fn(&Resp) -> bool,
    ) -> Resp {
        let deadline = Instant::now() + WAIT;
        loop {
            // Counted before asking: a line printed meanwhile wakes the wait.
            let seen = self.process.len();
            let r = self.get(target);
            if done(&r) {
                return r;
            }
            let closed = self.wait_news(seen, deadline);
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

    /// Waits for a line beyond the first `seen` that is not an access
    /// line (or the deadline, or the process's exit: then true).
    fn wait_news(&self, mut seen: usize, deadline: Instant) -> bool {
        loop {
            let closed = self.process.wait_beyond(seen, deadline);
            let lines = self.process.lines();
            let news = lines
                .iter()
                .skip(seen)
                .any(|l| l.stream == Stream::Stdout || !is_access(message(&l.text())));
            if news || closed || Instant::now() >= deadline {
                return closed;
            }
            seen = lines.len();
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

    /// Waits for a stderr line whose message `pred` accepts, after those
    /// matched by earlier calls; returns the message.
    pub(crate) fn wait_log(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        message(
            &self
                .process
                .wait_for(what, |l| {
                    l.stream == Stream::Stderr && pred(message(&l.text()))
                })
                .text(),
        )
        .to_owned()
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
