//! Many threads changing specs while files change: no deadlock, and the
//! engine ends up watching exactly the last desired set. Shutdown while busy
//! returns promptly.

mod common;

use std::fs;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use specwatch::{Backend, ChangeKind, IgnoreRule, Manager, WatchSpec};

fn concurrent_specs(backend: Backend) {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().to_path_buf();
    for i in 0..8 {
        fs::create_dir_all(root.join(format!("t{i}/sub"))).unwrap();
    }
    let m = Arc::new(manager(backend));
    let stop = Arc::new(AtomicBool::new(false));
    // A writer keeps the engine busy meanwhile.
    let writer = {
        let root = root.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let _ = fs::write(root.join(format!("t{}/sub/f{}", n % 8, n % 50)), "x");
                n += 1;
            }
        })
    };
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let m = m.clone();
            let root = root.clone();
            std::thread::spawn(move || {
                for round in 0..40 {
                    let name = format!("s{}", (t + round) % 6);
                    let path = root.join(format!("t{}", (t * 3 + round) % 8));
                    let spec = WatchSpec::new([&path])
                        .ignore(IgnoreRule::new(&path, [format!("f{round}")]));
                    match round % 4 {
                        0 | 1 => {
                            m.apply(name, spec).unwrap();
                        }
                        2 => {
                            m.delete(&name).unwrap();
                        }
                        _ => {
                            // Level-triggered: reconcile what is applied now
                            // (other threads change it meanwhile).
                            m.reconcile(
                                m.names()
                                    .into_iter()
                                    .filter_map(|n| m.spec(&n).map(|(s, _)| (n, s))),
                            )
                            .unwrap();
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a spec thread panicked");
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    // The final desired set, once more through reconcile.
    let desired: Vec<(String, WatchSpec)> = (0..3)
        .map(|i| {
            (
                format!("final{i}"),
                WatchSpec::new([root.join(format!("t{i}"))])
                    .quiet_window(Duration::from_millis(10)),
            )
        })
        .collect();
    let r = m.reconcile(desired.clone()).unwrap();
    assert_eq!(r.created.len(), 3);
    assert_eq!(m.names(), vec!["final0", "final1", "final2"]);
    let mut c = Collector::new(m.subscribe());
    for (n, _) in &desired {
        m.wait_watching(n, WAIT).unwrap();
    }
    // Exactly the final set is watched: each final root's tree and parent,
    // nothing left over from deleted specs.
    for (n, _) in &desired {
        m.sync(n, WAIT).unwrap();
    }
    c.drain();
    let statuses = m.statuses();
    assert_eq!(
        statuses.iter().map(|s| s.name.clone()).collect::<Vec<_>>(),
        vec!["final0", "final1", "final2"]
    );
    if backend == Backend::Native {
        // Shared parent, t0..t2 and their sub directories.
        assert_eq!(
            m.stats().unwrap().os_watches,
            1 + 3 * 2,
            "{:?}",
            m.stats().unwrap()
        );
    }
    let f = root.join("t1/sub/after");
    fs::write(&f, "y").unwrap();
    c.wait("final1 sees t1/sub/after", |c| {
        c.has("final1", &f, ChangeKind::Created)
    });
    assert!(!c.has("final0", &f, ChangeKind::Created));
}

#[cfg(target_os = "linux")]
#[test]
fn eight_threads_native() {
    concurrent_specs(Backend::Native);
}

#[test]
fn eight_threads_portable() {
    concurrent_specs(Backend::Portable);
}

#[test]
fn shutdown_while_busy_is_prompt() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().to_path_buf();
    for i in 0..200 {
        fs::create_dir_all(root.join(format!("d{i}"))).unwrap();
    }
    let m = Manager::builder().backend(EVENTS).build().unwrap();
    let _rx = m.subscribe(); // never read
    start(&m, "s", spec(&[&root]));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let root = root.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let _ = fs::write(root.join(format!("d{}/f", n % 200)), "x");
                n += 1;
            }
        })
    };
    // Busy: a burst is being handled while the manager is dropped.
    let t0 = Instant::now();
    drop(m);
    let took = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(took < Duration::from_secs(5), "shutdown took {took:?}");
}
