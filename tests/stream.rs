//! `Manager::stream` (feature `stream`) on a tokio multi-thread runtime:
//! batches and statuses arrive through `.next().await`, a slow consumer
//! loses nothing, dropping a stream unsubscribes and the manager's end
//! ends it. Every wait has a deadline and names what it waited for;
//! nothing sleeps and hopes.
#![cfg(feature = "stream")]

use std::collections::BTreeSet;
use std::fs;
use std::future::Future;
use std::path::PathBuf;
use std::task::Poll;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FusedStream;
use specwatch::{ChangeKind, Event, Manager, Phase, WatchSpec};

const WAIT: Duration = Duration::from_secs(20);

/// `fut`'s output, or a panic naming what was awaited. The deadline is
/// looked at first when it fires (unlike `tokio::time::timeout`, which polls
/// the future once more then), so that a stream the engine forgot to wake
/// fails the test instead of being rescued by the timer's wake.
async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::select! {
        biased;
        () = tokio::time::sleep(WAIT) => panic!("timed out after {WAIT:?} awaiting {what}"),
        out = fut => out,
    }
}

fn spec(dir: &std::path::Path) -> WatchSpec {
    WatchSpec::new([dir]).quiet_window(Duration::from_millis(10))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_and_statuses_arrive_through_next() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let manager = Manager::new().unwrap();
    let mut batches = manager.stream().changes();
    let mut statuses = manager.stream().statuses();
    manager.apply("s", spec(&root)).unwrap();

    // The status stream says when watching starts, no blocking wait needed.
    within("a Watching status of s", async {
        loop {
            let s = statuses.next().await.expect("status stream open");
            if s.name == "s" && s.phase == Phase::Watching {
                break;
            }
        }
    })
    .await;

    let files: Vec<PathBuf> = (0..5).map(|i| root.join(format!("f{i}"))).collect();
    for f in &files {
        fs::write(f, "x").unwrap();
    }
    let mut created = BTreeSet::new();
    within("a Created change of each of the 5 files", async {
        while created.len() < files.len() {
            let batch = batches.next().await.expect("batch stream open");
            assert_eq!(batch.name, "s");
            for c in &batch.changes {
                if c.kind == ChangeKind::Created {
                    created.insert(c.path.clone());
                }
            }
        }
    })
    .await;
    assert_eq!(created, files.iter().cloned().collect());

    // The manager's end ends the streams, waking a reader that waits: it
    // says when its stream is waiting, and only then is the manager dropped.
    let (waiting_tx, waiting) = specwatch::crossbeam_channel::bounded(1);
    let reader = tokio::spawn(async move {
        let mut told = false;
        std::future::poll_fn(|cx| {
            loop {
                match batches.poll_next_unpin(cx) {
                    Poll::Ready(Some(_)) => continue,
                    Poll::Ready(None) => return Poll::Ready(()),
                    Poll::Pending => {
                        if !told {
                            told = true;
                            waiting_tx.send(()).unwrap();
                        }
                        return Poll::Pending;
                    }
                }
            }
        })
        .await;
        batches
    });
    tokio::task::spawn_blocking(move || {
        waiting.recv_timeout(WAIT).expect("the reader to wait");
        drop(manager);
    })
    .await
    .unwrap();
    let batches = within("the end of the batch stream", reader).await.unwrap();
    assert!(batches.is_terminated());
    within("the end of the status stream", async {
        while statuses.next().await.is_some() {}
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_consumer_loses_nothing() {
    const FILES: usize = 300;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let manager = Manager::builder().subscriber_capacity(1).build().unwrap();
    let mut events = manager.stream();
    manager.apply("s", spec(&root)).unwrap();
    manager.wait_watching("s", WAIT).unwrap();

    // Many small batches while the consumer does not read: the channel
    // (one event) fills, the rest is merged per path in the backlog.
    let mut files = BTreeSet::new();
    for i in 0..FILES {
        let f = root.join(format!("f{i:03}"));
        fs::write(&f, "x").unwrap();
        files.insert(f);
        if i % 30 == 29 {
            manager.sync("s", WAIT).unwrap();
        }
    }
    // Every change is now with the subscriber, in its channel or backlog.
    manager.sync("s", WAIT).unwrap();
    assert!(
        manager.stats().unwrap().backlog_paths > 0,
        "the consumer is behind: its batches wait in the backlog"
    );

    // Reading makes room; the engine moves the backlog in and wakes us.
    let mut created = BTreeSet::new();
    let mut last_seq = None;
    within(
        &format!("a Created change of each of the {FILES} files"),
        async {
            while created.len() < FILES {
                match events.next().await.expect("stream open") {
                    Event::Changes(batch) => {
                        assert!(Some(batch.seq) > last_seq, "seq increases");
                        last_seq = Some(batch.seq);
                        for c in &batch.changes {
                            assert_ne!(c.kind, ChangeKind::Removed, "{c:?}");
                            if c.kind == ChangeKind::Created {
                                created.insert(c.path.clone());
                            }
                        }
                    }
                    Event::Status(_) | Event::Deleted(_) => {}
                    other => panic!("unexpected event {other:?}"),
                }
            }
        },
    )
    .await;
    assert_eq!(created, files);

    // And nothing else of s is pending: a new file comes next.
    let last = root.join("last");
    fs::write(&last, "x").unwrap();
    manager.sync("s", WAIT).unwrap();
    within("the change of the file written last", async {
        loop {
            if let Event::Changes(batch) = events.next().await.expect("stream open") {
                assert!(
                    batch
                        .changes
                        .iter()
                        .all(|c| c.path == last || c.kind == ChangeKind::Modified),
                    "only the new file, or late modifications: {batch:?}"
                );
                if batch.changes.iter().any(|c| c.path == last) {
                    break;
                }
            }
        }
    })
    .await;
    assert_eq!(
        manager.stats().unwrap().backlog_paths,
        0,
        "the backlog drained"
    );
}

#[cfg(feature = "test-hooks")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_stream_unsubscribes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let manager = Manager::builder().subscriber_capacity(1).build().unwrap();
    let mut kept = manager.stream().changes();
    let dropped = manager.stream();
    manager.apply("s", spec(&root)).unwrap();
    manager.wait_watching("s", WAIT).unwrap();
    assert_eq!(manager.live_streams(), 2);

    // Leave both behind, with full channels and backlogs.
    for i in 0..10 {
        fs::write(root.join(format!("f{i}")), "x").unwrap();
        manager.sync("s", WAIT).unwrap();
    }
    assert!(
        manager.stats().unwrap().backlog_paths > 0,
        "the streams are behind"
    );

    drop(dropped);
    // The engine lets go at its next event, or at its next look for room
    // for the backlog: a sync with a change is a barrier for both.
    fs::write(root.join("after"), "x").unwrap();
    manager.sync("s", WAIT).unwrap();
    assert_eq!(
        manager.live_streams(),
        1,
        "the engine let go of the dropped stream"
    );

    // The other is unaffected and loses nothing.
    let mut created = BTreeSet::new();
    within("a Created change of each of the 11 files", async {
        while created.len() < 11 {
            let batch = kept.next().await.expect("stream open");
            for c in &batch.changes {
                if c.kind == ChangeKind::Created {
                    created.insert(c.path.file_name().unwrap().to_owned());
                }
            }
        }
    })
    .await;
    drop(kept);
    fs::write(root.join("last"), "x").unwrap();
    manager.sync("s", WAIT).unwrap();
    assert_eq!(manager.live_streams(), 0);
    assert_eq!(manager.stats().unwrap().backlog_paths, 0);
}
