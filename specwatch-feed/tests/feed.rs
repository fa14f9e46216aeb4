//! The feed with a real `redis-server` (the test's own, on a free port)
//! and replicas on bindfs mounts of one storage: one watcher, followers
//! with exactly its batches, failover with nothing lost or doubled, Redis
//! stopped, emptied and restarted, read-your-writes, snapshots.
#![cfg(target_os = "linux")]

mod common;

use std::time::{Duration, Instant};

use common::*;
use specwatch::{ChangeKind, Seq};
use specwatch_feed::{Error, ResyncReason, Role};

const POLL: Duration = Duration::from_millis(100);

fn replicas(redis: &Redis, storage: &mut Storage, name: &str, n: usize) -> Vec<Consumer> {
    (0..n)
        .map(|_| Consumer::start(options(redis, name, &storage.mount(), POLL)))
        .collect()
}

/// The batches of `c` after its last resync, relative to its root: what
/// the feed published, as this replica delivered it.
fn published(c: &Consumer, since: Seq) -> Vec<(Seq, Vec<(std::path::PathBuf, ChangeKind)>)> {
    c.batches
        .iter()
        .filter(|(_, b)| b.seq.instance() == since.instance() && b.seq.number() > since.number())
        .map(|(_, b)| {
            (
                b.seq,
                b.changes
                    .iter()
                    .map(|x| (x.path.strip_prefix(&c.root).unwrap().to_path_buf(), x.kind))
                    .collect(),
            )
        })
        .collect()
}

/// Exactly one replica watches; every follower delivers exactly the
/// watcher's batches (same seqs, same changes below its own root), and
/// each tree ends equal to the disk's.
#[test]
fn followers_get_exactly_the_watchers_batches() {
    let Some(redis) = redis_or_skip() else { return };
    let mut storage = Storage::new();
    storage.write("t1/a-1.0.tgz", "a");
    let mut cs = replicas(&redis, &mut storage, "exact", 3);
    let w = one_watcher(&mut cs);
    wait_all_equal(&mut cs, &storage, "start");
    for c in &cs {
        let s = c.replica().wait_whole(WAIT).unwrap();
        assert!(s.whole && s.feed_up && s.last_error.is_none(), "{s:?}");
    }
    let start: Vec<Seq> = cs.iter().map(|c| c.last.unwrap()).collect();
    assert!(
        start.iter().all(|s| s.instance() == start[0].instance()),
        "{start:?}"
    );

    for i in 0..20 {
        storage.write(&format!("t{}/b-{i}.tgz", i % 3), &"x".repeat(i));
        if i % 5 == 4 {
            storage.remove(&format!("t{}/b-{}.tgz", i % 3, i - 3));
        }
    }
    storage.write("t1/a-1.0.tgz", "rewritten");
    wait_all_equal(&mut cs, &storage, "after writes");
    let since = start.iter().min().copied().unwrap();
    let theirs = published(&cs[w], since);
    assert!(!theirs.is_empty());
    for (i, c) in cs.iter().enumerate() {
        assert_eq!(
            published(c, since),
            theirs,
            "replica {i} delivered the watcher's batches"
        );
        assert_eq!(
            c.resyncs,
            vec![ResyncReason::Start],
            "replica {i}: one picture"
        );
    }
}

/// The watcher killed (its lease not let go of): another replica takes the
/// lease within its expiry, and publishes once the changes made while
/// nobody watched, and nothing that was published already.
#[test]
fn a_killed_watcher_is_replaced_and_nothing_is_lost_or_doubled() {
    let Some(redis) = redis_or_skip() else { return };
    let mut storage = Storage::new();
    for i in 0..10 {
        storage.write(&format!("t/c-{i}.tgz"), "c");
    }
    let mut cs = replicas(&redis, &mut storage, "failover", 3);
    let w = one_watcher(&mut cs);
    wait_all_equal(&mut cs, &storage, "start");
    let dead = cs.remove(w);
    let before: Vec<usize> = cs.iter().map(|c| c.batches.len()).collect();
    let killed = Instant::now();
    dead.replica.unwrap().abandon();
    // While nobody watches.
    storage.write("t/new.tgz", "n");
    storage.write("t/c-0.tgz", "written while nobody watched");
    storage.remove("t/c-1.tgz");
    let w2 = one_watcher(&mut cs);
    wait_all_equal(&mut cs, &storage, "after the failover");
    let first = cs[w2].batches[before[w2]..]
        .first()
        .map(|(t, _)| *t)
        .expect("the new watcher published");
    note(&format!(
        "failover: {:?} from the kill to the new watcher's first batch (lease ttl 1 s)",
        first - killed
    ));
    // Its first batch is the difference: the three paths, once each.
    for (i, c) in cs.iter().enumerate() {
        let new: Vec<_> = c.batches[before[i]..]
            .iter()
            .flat_map(|(_, b)| b.changes.iter())
            .map(|x| (x.path.strip_prefix(&c.root).unwrap().to_path_buf(), x.kind))
            .collect();
        assert_eq!(
            new,
            vec![
                ("t/c-0.tgz".into(), ChangeKind::Modified),
                ("t/c-1.tgz".into(), ChangeKind::Removed),
                ("t/new.tgz".into(), ChangeKind::Created),
            ],
            "replica {i}"
        );
        assert_eq!(c.resyncs.len(), 1, "replica {i}: no resync at the failover");
    }
    // The lease's expiry (1 s), a follower's attempt (a third of it),
    // the new watcher's scan.
    assert!(
        first - killed < Duration::from_secs(3),
        "failover took {:?}",
        first - killed
    );
}

/// Redis stopped: every replica watches the storage itself (a resync with
/// what it scanned), and stays equal to the disk; Redis started again,
/// empty: every replica resyncs once more and follows the new history,
/// under one watcher.
#[test]
fn redis_stopped_then_back_empty() {
    let Some(mut redis) = redis_or_skip() else {
        return;
    };
    let mut storage = Storage::new();
    storage.write("t/a.tgz", "a");
    let mut cs = replicas(&redis, &mut storage, "down", 3);
    one_watcher(&mut cs);
    wait_all_equal(&mut cs, &storage, "start");
    let epoch = cs[0].last.unwrap().instance();

    redis.stop();
    for c in cs.iter_mut() {
        c.wait("local", |c| c.roles.last() == Some(&Role::Local));
        assert!(!c.replica().status().feed_up);
    }
    storage.write("t/b.tgz", "written while redis was down");
    storage.remove("t/a.tgz");
    wait_all_equal(&mut cs, &storage, "redis down");

    redis.start_again();
    one_watcher(&mut cs);
    storage.write("t/c.tgz", "after");
    wait_all_equal(&mut cs, &storage, "redis back");
    for (i, c) in cs.iter().enumerate() {
        assert_eq!(c.resyncs.len(), 3, "replica {i}: {:?}", c.resyncs);
        assert!(
            matches!(c.resyncs[1], ResyncReason::FeedDown { .. }),
            "{:?}",
            c.resyncs
        );
        assert_eq!(c.resyncs[2], ResyncReason::FeedBack, "replica {i}");
        assert_ne!(c.last.unwrap().instance(), epoch, "a new history");
        assert!(c.replica().status().feed_up);
    }
}

/// Redis emptied under the replicas (FLUSHALL: a restart without its
/// data, seen without a broken connection), or holding another history:
/// each replica resyncs once, and follows the new one.
#[test]
fn another_history_is_resynced_once() {
    let Some(redis) = redis_or_skip() else { return };
    let mut storage = Storage::new();
    storage.write("t/a.tgz", "a");
    let mut cs = replicas(&redis, &mut storage, "flushed", 3);
    one_watcher(&mut cs);
    wait_all_equal(&mut cs, &storage, "start");
    let epoch = cs[0].last.unwrap().instance();
    let _: () = redis::cmd("FLUSHALL").query(&mut redis.con()).unwrap();
    storage.write("t/b.tgz", "b");
    for c in cs.iter_mut() {
        c.wait("a resync to the new history", |c| {
            c.last.is_some_and(|s| s.instance() != epoch)
        });
    }
    one_watcher(&mut cs);
    wait_all_equal(&mut cs, &storage, "after flushall");
    for (i, c) in cs.iter().enumerate() {
        assert_eq!(c.resyncs.len(), 2, "replica {i}: {:?}", c.resyncs);
        assert_eq!(c.resyncs[1], ResyncReason::OtherEpoch, "replica {i}");
    }
}

/// Read-your-writes: a follower that wrote a file through its own mount
/// (polled every minute: no poll finds it) asks for a look; when `look`
/// returns, the batch holding the file has been delivered to it, and the
/// other replicas get it too.
#[test]
fn a_follower_reads_its_writes_through_a_look() {
    let Some(redis) = redis_or_skip() else { return };
    let mut storage = Storage::new();
    let mut cs: Vec<Consumer> = (0..4)
        .map(|_| {
            Consumer::start(options(
                &redis,
                "looks",
                &storage.mount(),
                Duration::from_secs(60),
            ))
        })
        .collect();
    let w = one_watcher(&mut cs);
    wait_all_equal(&mut cs, &storage, "start");
    let mut took = Vec::new();
    for i in 0..100 {
        let who = (w + 1 + i % 3) % 4;
        let rel = format!("t{}/up-{i}.tgz", i % 4);
        let path = cs[who].root.join(&rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "uploaded").unwrap();
        let t0 = Instant::now();
        let seq = cs[who].replica().look([&path], WAIT).unwrap();
        took.push(t0.elapsed());
        cs[who].drain();
        assert!(
            cs[who].tree.contains_key(std::path::Path::new(&rel)),
            "{rel} delivered to the replica that looked by {seq}"
        );
    }
    wait_all_equal(&mut cs, &storage, "every upload everywhere");
    took.sort();
    note(&format!(
        "look at 4 replicas (idle): p50 {:?}, p99 {:?}, max {:?} over {} looks",
        took[took.len() / 2],
        took[took.len() * 99 / 100],
        took[took.len() - 1],
        took.len()
    ));
    // On the watcher itself: its own manager looks.
    let path = cs[w].root.join("t0/by-the-watcher.tgz");
    std::fs::write(&path, "w").unwrap();
    cs[w].replica().look([&path], WAIT).unwrap();
    cs[w].drain();
    assert!(
        cs[w]
            .tree
            .contains_key(std::path::Path::new("t0/by-the-watcher.tgz"))
    );
    assert!(matches!(
        cs[w].replica().look(["/elsewhere/x"], WAIT),
        Err(Error::OutsideRoot { .. })
    ));
}

/// The watcher keeps a consumer's snapshot; a replica started from its seq
/// is handed the batches after it, no picture; a seq of another history
/// is not resumed from.
#[test]
fn a_cold_replica_resumes_from_a_snapshot() {
    let Some(redis) = redis_or_skip() else { return };
    let mut storage = Storage::new();
    storage.write("t/a.tgz", "a");
    let mut cs = replicas(&redis, &mut storage, "snap", 2);
    let w = one_watcher(&mut cs);
    wait_all_equal(&mut cs, &storage, "start");
    let seq = cs[w].last.unwrap();
    let follower = 1 - w;
    assert!(matches!(
        cs[follower].replica().put_snapshot(seq, b"index"),
        Err(Error::NotWatching { .. })
    ));
    cs[w].replica().put_snapshot(seq, b"index at seq").unwrap();
    let opts = options(&redis, "snap", &storage.mount(), POLL);
    let (at, data) = opts.read_snapshot().unwrap().expect("a snapshot");
    assert_eq!((at, data.as_slice()), (seq, &b"index at seq"[..]));

    storage.write("t/b.tgz", "after the snapshot");
    wait_all_equal(&mut cs, &storage, "before the cold start");
    let mut cold = Consumer::start(opts.resume_from(at));
    // It holds the snapshot's tree: the test's consumer starts from it.
    cold.tree = cs[w].tree.clone();
    cold.tree.remove(std::path::Path::new("t/b.tgz"));
    cold.last = Some(at);
    cold.wait("following", |c| c.roles.contains(&Role::Following));
    cold.wait("equal to the disk", |c| c.tree == storage.tree());
    assert!(
        cold.resyncs.is_empty(),
        "resumed, no picture: {:?}",
        cold.resyncs
    );
    cold.no_violations();

    let mut stranger = Consumer::start(
        options(&redis, "snap", &storage.mount(), POLL).resume_from(Seq::new(0xdead, 5)),
    );
    stranger.wait("a picture", |c| !c.resyncs.is_empty());
    assert_eq!(stranger.resyncs, vec![ResyncReason::Start]);
    stranger.wait("equal to the disk", |c| c.tree == storage.tree());
}

/// A stream entry this version cannot read (another format, or junk): no
/// replica delivers anything wrong; each watches the storage itself
/// (trying the feed again later and later), and its tree stays the disk's.
#[test]
fn a_feed_that_cannot_be_read_sends_replicas_local() {
    let Some(redis) = redis_or_skip() else { return };
    let mut storage = Storage::new();
    storage.write("t/a.tgz", "a");
    let mut cs = replicas(&redis, &mut storage, "junk", 2);
    one_watcher(&mut cs);
    wait_all_equal(&mut cs, &storage, "start");
    let n = cs[0].last.unwrap().number();
    let epoch = format!("{:016x}", cs[0].last.unwrap().instance());
    let _: String = redis::cmd("XADD")
        .arg("specwatch-feed:{junk}:stream")
        .arg(format!("{}-1", n + 1))
        .arg("epoch")
        .arg(&epoch)
        .arg("changes")
        .arg(&b"\x07junk"[..])
        .query(&mut redis.con())
        .unwrap();
    // The watcher finds out at its next publish (refused: the junk holds
    // its number), the follower at its next read.
    storage.write("t/b.tgz", "b");
    for c in cs.iter_mut() {
        c.wait("local", |c| c.roles.last() == Some(&Role::Local));
    }
    storage.write("t/c.tgz", "c");
    wait_all_equal(&mut cs, &storage, "local, past the junk");
}

/// A replica resuming from a seq whose next batches were trimmed from the
/// stream is handed the whole tree (a resync), then follows.
#[test]
fn a_seq_trimmed_from_the_stream_is_resynced() {
    let Some(redis) = redis_or_skip() else { return };
    let mut storage = Storage::new();
    // Polled every minute: only the looks find the files, one batch each.
    let opts = |storage: &mut Storage| {
        options(&redis, "trim", &storage.mount(), Duration::from_secs(60)).max_len(10)
    };
    let mut w = Consumer::start(opts(&mut storage));
    w.wait("watching", |c| c.roles.contains(&Role::Watching));
    let first = w.last.unwrap();
    // Forty batches: a look closes each at once.
    for i in 0..40 {
        let p = w.root.join(format!("f{i}"));
        std::fs::write(&p, "x").unwrap();
        w.replica().look([&p], WAIT).unwrap();
    }
    w.wait("forty batches", |c| c.batches.len() >= 40);
    let len: usize = redis::cmd("XLEN")
        .arg("specwatch-feed:{trim}:stream")
        .query(&mut redis.con())
        .unwrap();
    assert!(len < 30, "trimmed to about 10: {len}");
    let mut late = Consumer::start(opts(&mut storage).resume_from(first));
    late.wait("a picture", |c| !c.resyncs.is_empty());
    assert_eq!(late.resyncs, vec![ResyncReason::Trimmed]);
    late.wait("equal to the disk", |c| c.tree == storage.tree());
    late.no_violations();
}

/// Redis restarted at once, empty (the replicas may or may not have found
/// it away in between): every replica resyncs (once or, through `Local`,
/// twice), follows the new history, and stays equal to the disk, its seqs
/// increasing.
#[test]
fn redis_restarted_at_once_empty() {
    let Some(mut redis) = redis_or_skip() else {
        return;
    };
    let mut storage = Storage::new();
    storage.write("t/a.tgz", "a");
    let mut cs = replicas(&redis, &mut storage, "restart", 3);
    one_watcher(&mut cs);
    wait_all_equal(&mut cs, &storage, "start");
    let epoch = cs[0].last.unwrap().instance();
    redis.stop();
    redis.start_again();
    storage.write("t/b.tgz", "b");
    for c in cs.iter_mut() {
        c.wait("the new history", |c| {
            c.last.is_some_and(|s| s.instance() != epoch) && c.roles.last() != Some(&Role::Local)
        });
    }
    one_watcher(&mut cs);
    wait_all_equal(&mut cs, &storage, "after the restart");
    for (i, c) in cs.iter().enumerate() {
        let n = c.resyncs.len() - 1;
        assert!((1..=2).contains(&n), "replica {i}: {:?}", c.resyncs);
    }
}
