//! What the process holds: open file descriptors, threads, resident
//! memory. Read from `/proc/self` on Linux; `None` elsewhere (printed as
//! "n/a"). With glibc, also the heap's bytes in use (`mallinfo2`): what
//! is allocated and not freed, which resident memory is not (the
//! allocator keeps freed pages, and fragments). Used by `tests/leaks.rs` and the soak (`benches/soak.rs`).

use std::fmt;
use std::time::{Duration, Instant};

/// One reading of the process's resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Open file descriptors (`/proc/self/fd`, less the one reading it).
    pub fds: Option<usize>,
    /// Threads (`Threads:` of `/proc/self/status`).
    pub threads: Option<usize>,
    /// Resident set size in KiB (`VmRSS:` of `/proc/self/status`).
    pub rss_kib: Option<u64>,
    /// Heap in use in KiB (glibc's `mallinfo2`: `uordblks + hblkhd`, the
    /// allocated chunks of every arena and the ones mapped alone).
    pub heap_kib: Option<u64>,
}

impl Usage {
    /// Reads them now.
    pub fn now() -> Usage {
        Usage {
            fds: fds(),
            threads: status_field("Threads:").map(|n| n as usize),
            rss_kib: status_field("VmRSS:"),
            heap_kib: heap_kib(),
        }
    }
}

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn or_na<T: fmt::Display>(v: Option<T>) -> String {
            v.map_or_else(|| "n/a".to_owned(), |v| v.to_string())
        }
        write!(
            f,
            "fds {} threads {} rss {} KiB heap {} KiB",
            or_na(self.fds),
            or_na(self.threads),
            or_na(self.rss_kib),
            or_na(self.heap_kib)
        )
    }
}

#[cfg(target_os = "linux")]
fn fds() -> Option<usize> {
    // The directory's own descriptor is listed too.
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count() - 1)
}

#[cfg(not(target_os = "linux"))]
fn fds() -> Option<usize> {
    None
}

#[cfg(target_os = "linux")]
fn status_field(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].split_whitespace().next()?.parse().ok()
}

#[cfg(not(target_os = "linux"))]
fn status_field(_field: &str) -> Option<u64> {
    None
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn heap_kib() -> Option<u64> {
    // SAFETY: no arguments; it only reads the allocator's own counters
    // (taking each arena's lock).
    let m = unsafe { libc::mallinfo2() };
    Some(((m.uordblks + m.hblkhd) / 1024) as u64)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn heap_kib() -> Option<u64> {
    None
}

/// The names of the process's threads (Linux; empty elsewhere).
pub fn thread_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|n| n.trim_end().to_owned())
        .collect();
    names.sort();
    names
}

/// Waits until `done` holds for the reading, for `limit` at most, reading
/// every millisecond; panics naming `what` with the last reading. (A
/// thread that was joined can linger in `/proc` for a moment: counts are
/// awaited, never read once.)
pub fn wait_for(what: &str, limit: Duration, mut done: impl FnMut(&Usage) -> bool) -> Usage {
    let deadline = Instant::now() + limit;
    loop {
        let u = Usage::now();
        if done(&u) {
            return u;
        }
        assert!(
            Instant::now() < deadline,
            "waited {limit:?} for {what}; last reading: {u}; threads: {:?}",
            thread_names()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}
