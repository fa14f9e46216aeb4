//! Lifecycle: alone in its own test binary, so that counting this process's
//! threads and descriptors sees no other test's. Linux only: it counts them
//! in `/proc/self`.
#![cfg(target_os = "linux")]

mod common;

use std::fs;

use common::*;
use specwatch::Backend;

fn fds() -> usize {
    fs::read_dir("/proc/self/fd").unwrap().count()
}

fn our_threads() -> usize {
    fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|n| n.starts_with("specwatch"))
        .count()
}

#[test]
fn drop_joins_threads_and_closes_descriptors() {
    let d = tempfile::tempdir().unwrap();
    fs::create_dir_all(d.path().join("a/b")).unwrap();
    let before_fds = fds();
    assert_eq!(our_threads(), 0);
    for backend in [Backend::Native, Backend::Portable, Backend::Native] {
        let m = manager(backend);
        let mut c = Collector::new(m.subscribe());
        start(&m, "s", spec(&[d.path()]));
        c.barrier("s", d.path());
        assert!(our_threads() >= 1);
        assert!(
            fds() > before_fds,
            "an inotify descriptor is open while running"
        );
        drop(m);
        // The threads are joined by now, but the kernel may list a joined
        // thread in /proc/self/task a moment longer (its exit finishes
        // after the join is woken): allow it a deadline.
        let deadline = std::time::Instant::now() + WAIT;
        while our_threads() != 0 && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert_eq!(
            our_threads(),
            0,
            "engine or reader thread left running ({backend:?})"
        );
        // notify closes its inotify descriptor on its own thread after the
        // watcher is dropped, without being joined: allow it a deadline.
        let deadline = std::time::Instant::now() + WAIT;
        while fds() != before_fds && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert_eq!(fds(), before_fds, "descriptor leaked ({backend:?})");
    }
}
