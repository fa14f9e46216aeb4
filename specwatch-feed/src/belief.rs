//! The belief: what the feed has told its followers is on the storage
//! (relative path -> type and metadata, as published), and the one rule a
//! new watcher publishes by: the difference between the belief and the
//! disk. Pure: no I/O.

use std::collections::BTreeMap;

use specwatch::{ChangeKind, FileType};

use crate::codec::{Entry, RelChange};

/// Relative path (the feed's bytes) -> what is there.
pub(crate) type Belief = BTreeMap<Vec<u8>, Entry>;

/// `view` after `changes` (a batch's, in order). A removed directory takes
/// what was below it along (the engine reports those too; a view built
/// from merged batches may not hold them apart).
pub(crate) fn apply(view: &mut Belief, changes: &[RelChange]) {
    for c in changes {
        match c.entry() {
            Some(e) => {
                if e.file_type != FileType::Dir {
                    remove_below(view, &c.path);
                }
                view.insert(c.path.clone(), e);
            }
            None => {
                view.remove(&c.path);
                remove_below(view, &c.path);
            }
        }
    }
}

fn remove_below(view: &mut Belief, dir: &[u8]) {
    let mut prefix = dir.to_vec();
    prefix.push(b'/');
    let below: Vec<Vec<u8>> = view
        .range(prefix.clone()..)
        .map(|(k, _)| k)
        .take_while(|k| k.starts_with(&prefix))
        .cloned()
        .collect();
    for k in below {
        view.remove(&k);
    }
}

/// Whether the entry `then` and the one `now` at a path are the same
/// as far as the feed can tell: the same type, and for what is not a
/// directory the same metadata (size, mtime, inode), known on both sides.
/// A directory's own metadata moves with its entries, which have their
/// own changes: it is not compared.
fn same(then: &Entry, now: &Entry) -> bool {
    then.file_type == now.file_type
        && (then.file_type == FileType::Dir || (then.meta.is_some() && then.meta == now.meta))
}

/// The changes that take a follower holding `belief` to `disk`: `Created`
/// for what the belief lacks, `Removed` for what the disk lacks,
/// `Modified` where they differ (see `same`: unknown metadata counts as a
/// difference). Nothing for what is the same: a change already published
/// is not published again.
pub(crate) fn diff(belief: &Belief, disk: &Belief) -> Vec<RelChange> {
    let change = |path: &Vec<u8>, kind, e: &Entry| RelChange {
        path: path.clone(),
        kind,
        file_type: e.file_type,
        meta: if kind == ChangeKind::Removed {
            None
        } else {
            e.meta
        },
        from: None,
        hash: None,
    };
    let mut out = Vec::new();
    let (mut a, mut b) = (belief.iter().peekable(), disk.iter().peekable());
    loop {
        match (a.peek(), b.peek()) {
            (None, None) => break,
            (Some((p, e)), None) => {
                out.push(change(p, ChangeKind::Removed, e));
                a.next();
            }
            (None, Some((p, e))) => {
                out.push(change(p, ChangeKind::Created, e));
                b.next();
            }
            (Some((pa, ea)), Some((pb, eb))) => match pa.cmp(pb) {
                std::cmp::Ordering::Less => {
                    out.push(change(pa, ChangeKind::Removed, ea));
                    a.next();
                }
                std::cmp::Ordering::Greater => {
                    out.push(change(pb, ChangeKind::Created, eb));
                    b.next();
                }
                std::cmp::Ordering::Equal => {
                    if !same(ea, eb) {
                        out.push(change(pb, ChangeKind::Modified, eb));
                    }
                    a.next();
                    b.next();
                }
            },
        }
    }
    out
}

/// Every entry of `view` as `Created` (a picture after a resync).
pub(crate) fn picture(view: &Belief) -> Vec<RelChange> {
    diff(&Belief::new(), view)
}

#[cfg(test)]
mod tests {
    use super::*;
    use specwatch::Meta;
    use std::time::{Duration, UNIX_EPOCH};

    fn file(size: u64, mtime: u64) -> Entry {
        Entry {
            file_type: FileType::File,
            meta: Some(Meta::new(
                size,
                Some(UNIX_EPOCH + Duration::from_secs(mtime)),
                Some(7),
            )),
        }
    }

    fn dir(size: u64) -> Entry {
        Entry {
            file_type: FileType::Dir,
            meta: Some(Meta::new(size, None, None)),
        }
    }

    fn view(entries: &[(&str, Entry)]) -> Belief {
        entries
            .iter()
            .map(|(p, e)| (p.as_bytes().to_vec(), *e))
            .collect()
    }

    fn kinds(changes: &[RelChange]) -> Vec<(String, ChangeKind)> {
        changes
            .iter()
            .map(|c| (String::from_utf8_lossy(&c.path).into_owned(), c.kind))
            .collect()
    }

    /// Changes made while nobody watched are published once each, and what
    /// is the same is not published again.
    #[test]
    fn the_difference_is_exactly_what_changed() {
        let belief = view(&[
            ("t", dir(4096)),
            ("t/same.tgz", file(10, 100)),
            ("t/written.tgz", file(10, 100)),
            ("t/gone.tgz", file(1, 1)),
            ("t/now-a-dir", file(1, 1)),
            (
                "t/unknown",
                Entry {
                    file_type: FileType::File,
                    meta: None,
                },
            ),
        ]);
        let disk = view(&[
            ("t", dir(8192)),
            ("t/same.tgz", file(10, 100)),
            ("t/written.tgz", file(10, 101)),
            ("t/new.tgz", file(3, 5)),
            ("t/now-a-dir", dir(4096)),
            ("t/unknown", file(1, 1)),
        ]);
        let d = diff(&belief, &disk);
        assert_eq!(
            kinds(&d),
            vec![
                ("t/gone.tgz".into(), ChangeKind::Removed),
                ("t/new.tgz".into(), ChangeKind::Created),
                ("t/now-a-dir".into(), ChangeKind::Modified),
                ("t/unknown".into(), ChangeKind::Modified),
                ("t/written.tgz".into(), ChangeKind::Modified),
            ]
        );
        let mut after = belief.clone();
        apply(&mut after, &d);
        assert_eq!(
            after.keys().collect::<Vec<_>>(),
            disk.keys().collect::<Vec<_>>()
        );
        assert!(diff(&after, &disk).is_empty(), "nothing left to publish");
        assert!(diff(&disk, &disk).is_empty());
        assert_eq!(picture(&disk).len(), disk.len());
    }

    #[test]
    fn a_removed_directory_takes_what_was_below() {
        let mut v = view(&[
            ("a", dir(1)),
            ("a/x", file(1, 1)),
            ("a/y/z", file(1, 1)),
            ("a-b", file(1, 1)),
        ]);
        apply(
            &mut v,
            &[RelChange {
                path: b"a".to_vec(),
                kind: ChangeKind::Removed,
                file_type: FileType::Dir,
                meta: None,
                from: None,
                hash: None,
            }],
        );
        assert_eq!(v.keys().collect::<Vec<_>>(), vec![&b"a-b".to_vec()]);
    }
}
