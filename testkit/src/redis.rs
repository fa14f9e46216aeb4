//! A `redis-server` of the test's own: on a free loopback port, without
//! persistence (started again, it is empty), in a temporary directory;
//! never a service of the machine's. Stopped with SIGKILL when the test
//! says, and when dropped.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{WAIT, note};

/// A running (or stopped) `redis-server` of the test's.
pub struct Redis {
    pub port: u16,
    child: Option<Child>,
    dir: tempfile::TempDir,
}

/// A `redis-server` started for the test, if one can be run; when it
/// cannot, a failure if `SPECWATCH_REQUIRE_REDIS` is set (CI installs it
/// and sets it), else `None` after saying the test skips.
pub fn redis_or_skip() -> Option<Redis> {
    let there = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !there {
        if std::env::var_os("SPECWATCH_REQUIRE_REDIS").is_some() {
            panic!("redis-server is required here (SPECWATCH_REQUIRE_REDIS) and cannot be run");
        }
        note(
            "*** SKIPPED: no redis-server (Debian: redis-server; SPECWATCH_REQUIRE_REDIS=1 \
             makes this a failure)",
        );
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port();
    let mut r = Redis {
        port,
        child: None,
        dir: tempfile::tempdir().expect("a temporary directory"),
    };
    r.start_again();
    Some(r)
}

impl Redis {
    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Starts the server (again: empty), and returns once it answers
    /// `PING`.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "redis-server is running already");
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--protected-mode", "no", "--loglevel", "warning"])
            // Small stream nodes, so that `MAXLEN ~` trims in a test's
            // few dozen batches (it trims whole nodes only).
            .args(["--stream-node-max-entries", "4"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        let deadline = Instant::now() + WAIT;
        while !self.pong() {
            assert!(
                Instant::now() < deadline,
                "redis-server on port {} did not answer PING within {WAIT:?}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether it answers `PING` (an inline command: no client library).
    fn pong(&self) -> bool {
        let Ok(mut c) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = c.set_read_timeout(Some(Duration::from_secs(1)));
        let mut buf = [0u8; 7];
        c.write_all(b"PING\r\n").is_ok() && c.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }

    /// Stops it (SIGKILL: nothing saved) and waits for its end, then for
    /// its port to refuse connections.
    pub fn stop(&mut self) {
        let mut c = self.child.take().expect("redis-server is running");
        let _ = c.kill();
        let _ = c.wait();
        let deadline = Instant::now() + WAIT;
        while TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
            assert!(
                Instant::now() < deadline,
                "port {} still open {WAIT:?} after redis-server was killed",
                self.port
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
