//! Where `sync` writes its cookies: only inside the spec's paths.
#![cfg(target_os = "linux")]

mod common;

use std::fs;

use common::*;
use specwatch::{Backend, ChangeKind};

both_backends!(sync_on_a_missing_root_writes_nothing_outside_it);

/// `sync` never writes into a missing root's ancestors (it used to put its
/// cookie there, even in `/`): the awaited name is looked at instead, which
/// still reports a root created before the call.
fn sync_on_a_missing_root_writes_nothing_outside_it(b: Backend) {
    let d = tmp();
    let root = d.path().join("a/b");
    let m = manager(b);
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[&root]));
    let before: Vec<_> = fs::read_dir(d.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    // Watch the ancestor for any file created in it during the syncs.
    let mut ino = inotify::Inotify::init().unwrap();
    ino.watches()
        .add(d.path(), inotify::WatchMask::CREATE)
        .unwrap();
    for _ in 0..5 {
        m.sync("s", WAIT).unwrap();
    }
    let mut buf = [0u8; 4096];
    let created: Vec<String> = match ino.read_events(&mut buf) {
        Ok(evs) => evs
            .filter_map(|e| e.name.map(|n| n.to_string_lossy().into_owned()))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Vec::new(),
        Err(e) => panic!("reading inotify: {e}"),
    };
    assert!(
        created.is_empty(),
        "sync wrote {created:?} outside the spec's paths"
    );
    assert_eq!(
        fs::read_dir(d.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect::<Vec<_>>(),
        before
    );
    // Still a barrier for the root itself: created before the call, reported
    // when it returns.
    fs::create_dir_all(&root).unwrap();
    m.sync("s", WAIT).unwrap();
    c.drain();
    assert!(
        c.has("s", &root, ChangeKind::Created),
        "{:?}",
        c.changes("s")
    );
}
