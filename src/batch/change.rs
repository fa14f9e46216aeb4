//! Changes: what happened to a path, and the batches that carry them.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::batch::content::ContentHash;
use crate::ids::{Generation, Seq};

/// What happened to a path, net over one batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum ChangeKind {
    /// The path did not exist before the batch and exists after it.
    Created,
    /// The path existed before and after the batch, and was written, had its
    /// metadata changed, or was replaced (an atomic save renames a new file
    /// over it; a file can even be replaced by a directory: compare
    /// [`Change::file_type`]).
    Modified,
    /// The path existed before the batch and does not exist after it.
    Removed,
}

impl std::fmt::Display for ChangeKind {
    /// `created`, `modified` or `removed` (as the `watch` example prints).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ChangeKind::Created => "created",
            ChangeKind::Modified => "modified",
            ChangeKind::Removed => "removed",
        })
    }
}

impl ChangeKind {
    /// The netting rule, the one place it is written: a path that existed
    /// before (`existed`) and exists now (`exists`) changed by this kind;
    /// `None` when it neither existed nor exists (created, then removed).
    /// A path that existed and exists is `Modified`, whatever happened in
    /// between (removed and created again included).
    pub(crate) fn between(existed: bool, exists: bool) -> Option<ChangeKind> {
        match (existed, exists) {
            (false, false) => None,
            (false, true) => Some(ChangeKind::Created),
            (true, true) => Some(ChangeKind::Modified),
            (true, false) => Some(ChangeKind::Removed),
        }
    }

    /// Whether a change of this kind says its path existed before it.
    pub(crate) fn existed_before(self) -> bool {
        self != ChangeKind::Created
    }

    /// Whether a change of this kind says its path exists after it.
    pub(crate) fn exists_after(self) -> bool {
        self != ChangeKind::Removed
    }
}

/// The net change of a path that was `before` and is `now` (its type, or
/// `None` for absent), by [`ChangeKind::between`]: the type is the one it
/// has now, or for `Removed` the one it had.
pub(crate) fn net(
    before: Option<FileType>,
    now: Option<FileType>,
) -> Option<(ChangeKind, FileType)> {
    let kind = ChangeKind::between(before.is_some(), now.is_some())?;
    Some((kind, now.or(before)?))
}

/// What a change of `kind` to an entry of type `ft` says the path was
/// before it and is after it (the inverse of [`net`]).
pub(crate) fn ends(kind: ChangeKind, ft: FileType) -> (Option<FileType>, Option<FileType>) {
    (
        kind.existed_before().then_some(ft),
        kind.exists_after().then_some(ft),
    )
}

/// The type of a changed entry (for `Removed`: the type it had).
///
/// Symbolic links are not followed: a link is reported as `Symlink`, and a
/// change to its target is not a change to the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum FileType {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (not followed).
    Symlink,
    /// Anything else: a socket, a FIFO, a device.
    Other,
}

impl std::fmt::Display for FileType {
    /// `file`, `dir`, `symlink` or `other`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FileType::File => "file",
            FileType::Dir => "dir",
            FileType::Symlink => "symlink",
            FileType::Other => "other",
        })
    }
}

/// What a changed entry is after its change, as `lstat` told the engine:
/// [`Change::meta`], for specs that ask for it
/// ([`WatchOptions::metadata`](crate::WatchOptions::metadata)).
///
/// The entry itself, never what a symbolic link points to (a link's size
/// is the length of its target's path); a directory's size is what its
/// file system says (ext4: a multiple of 4,096).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Meta {
    /// Size in bytes.
    pub size: u64,
    /// Last modification (`st_mtime`, to the nanosecond where the file
    /// system keeps it); `None` where the platform does not tell.
    #[cfg_attr(feature = "serde", serde(default))]
    pub mtime: Option<SystemTime>,
    /// The inode number on Unix (with the file system's device, which
    /// specwatch does not report, it names the file: a file written in
    /// place keeps it, one replaced by a rename gets another). `None` on
    /// Windows.
    #[cfg_attr(feature = "serde", serde(default))]
    pub inode: Option<u64>,
}

impl Meta {
    /// Metadata of `size` bytes, modified at `mtime`, inode `inode` (to
    /// feed a consumer's own tests).
    #[must_use]
    pub fn new(size: u64, mtime: Option<SystemTime>, inode: Option<u64>) -> Meta {
        Meta { size, mtime, inode }
    }
}

/// One changed path.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Change {
    /// The absolute path, as the file system spells it (bytes on Unix, never
    /// a lossy rendering).
    pub path: PathBuf,
    /// What happened, net over the batch.
    pub kind: ChangeKind,
    /// The entry's type (after the change; for `Removed`, before it).
    pub file_type: FileType,
    /// What the entry is after the change (size, modification time,
    /// inode), for a spec with
    /// [`WatchOptions::metadata`](crate::WatchOptions::metadata); always
    /// `None` for a spec without it, and for `Removed`.
    ///
    /// It comes from the engine's newest look at the entry within the
    /// batch: the `lstat` an OS event made it do, a poll's or a rescan's
    /// `stat`; for an entry no look `stat`ed (found by reading a directory:
    /// a new directory's contents, an overflow's re-read, an initial
    /// scan), from an `lstat` when the batch closes. `None` when that
    /// `lstat` finds nothing, or an entry of another type than
    /// [`file_type`](Change::file_type) (it changed again since: a later
    /// batch reports it), or fails; and for an entry of a directory that
    /// is polled without an OS watch that its polls have not `stat`ed
    /// (the engine does not `stat` on its own thread what may be a hung
    /// network mount).
    ///
    /// Boxed, so that a change without it costs 8 bytes more than before,
    /// not 40.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub meta: Option<Box<Meta>>,
    /// The hash of the file's content after the change, for a spec that
    /// compares contents ([`WatchOptions::skip_same_content`]): on a
    /// `Created` or `Modified` regular file that could be read whole (at
    /// most 64 MiB). `None` otherwise: other specs, `Removed`, directories
    /// and links, larger or unreadable files.
    ///
    /// [`WatchOptions::skip_same_content`]: crate::WatchOptions::skip_same_content
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub hash: Option<ContentHash>,
    /// Where the entry was before the batch, when it got to
    /// [`path`](Change::path) by a rename that the OS paired (inotify's
    /// cookie; `ReadDirectoryChangesW`'s old and new names; not FSEvents,
    /// kqueue or polling, which do not pair) and both ends of it fall in
    /// this batch of this spec. The change stays what the path nets to
    /// (`Created`, or `Modified` for a rename over an existing entry), and
    /// `from` has its own change in the same batch (`Removed`, or
    /// `Modified` when something else took its place). There is no
    /// `Renamed` kind: a consumer that ignores `from` sees exactly the
    /// changes it saw before, one per path, and one that uses it can move
    /// what it holds for `from` instead of reading `path` again.
    ///
    /// Entries below a moved directory carry the matching path below its
    /// old place; with [`WatchOptions::collapse_moves`] they are left out
    /// (both ends), implied by the directory's own change. `None` for a
    /// move in or out of what the spec sees (a root's edge, an ignored
    /// name), for a move whose ends fell in different batches, and for a
    /// path that changed again after its move within the batch (a write
    /// after a rename is reported as `Removed` + `Created`, as before).
    /// Merged batches (a subscriber that fell behind) keep it where the
    /// merge can tell where the entry was before the first of them;
    /// [`Manager::changes_since`](crate::Manager::changes_since) never
    /// has it.
    ///
    /// A consumer that rebuilds a tree applies a batch against the tree
    /// before it: each change with `from` takes what `from` held (with
    /// `collapse_moves`, the tree below it too), then the other changes
    /// apply as usual.
    ///
    /// [`WatchOptions::collapse_moves`]: crate::WatchOptions::collapse_moves
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub from: Option<Box<Path>>,
}

impl Change {
    /// A change of `path` (to feed a consumer's own tests, say), without
    /// metadata.
    #[must_use]
    pub fn new(path: impl Into<PathBuf>, kind: ChangeKind, file_type: FileType) -> Change {
        Change {
            path: path.into(),
            kind,
            file_type,
            meta: None,
            hash: None,
            from: None,
        }
    }

    /// The change, with `meta` as its [`meta`](Change::meta).
    ///
    /// ```
    /// use specwatch::{Change, ChangeKind, FileType, Meta};
    ///
    /// let c = Change::new("/srv/a.tgz", ChangeKind::Created, FileType::File)
    ///     .with_meta(Meta::new(1024, None, Some(42)));
    /// assert_eq!(c.meta.map(|m| m.size), Some(1024));
    /// ```
    #[must_use]
    pub fn with_meta(mut self, meta: Meta) -> Change {
        self.meta = Some(Box::new(meta));
        self
    }

    /// The change, with `from` as its [`from`](Change::from): the entry
    /// got to its path by a rename from `from`.
    ///
    /// ```
    /// use specwatch::{Change, ChangeKind, FileType};
    /// use std::path::Path;
    ///
    /// let c = Change::new("/src/b.rs", ChangeKind::Created, FileType::File).with_from("/src/a.rs");
    /// assert_eq!(c.from.as_deref(), Some(Path::new("/src/a.rs")));
    /// ```
    #[must_use]
    pub fn with_from(mut self, from: impl Into<PathBuf>) -> Change {
        self.from = Some(from.into().into_boxed_path());
        self
    }
}

/// The changes seen for one spec, closed after its quiet window.
///
/// Promises: at most one [`Change`] per path, sorted by path (bytewise, so a
/// directory comes before what is inside it); the net difference between the
/// engine's index before and after the batch (a file created and removed
/// within one batch does not appear). Batches of one spec are delivered in
/// `seq` order. Not promised: that a `Modified` file's content differs (a
/// write of the same bytes is a modification), unless the spec compares
/// contents ([`WatchOptions::skip_same_content`](crate::WatchOptions::skip_same_content)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct ChangeBatch {
    /// The spec's name.
    pub name: String,
    /// The spec generation that was being watched.
    pub generation: Generation,
    /// The batch's sequence number.
    pub seq: Seq,
    /// When the batch closed (wall clock).
    pub time: SystemTime,
    /// The changes, sorted by path.
    pub changes: Vec<Change>,
    /// Set on the first batch of a spec that keeps its state in a file
    /// ([`WatchOptions::state`](crate::WatchOptions::state)): whether it
    /// holds the changes since the saved state, or why not. `None` on
    /// every other batch.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub restore: Option<crate::state::restore::Restore>,
}

impl ChangeBatch {
    /// A batch of `changes` (to feed a consumer's own tests: the engine
    /// makes the batches it delivers). The changes are sorted by path, as
    /// every batch's are; at most one change per path is the caller's to
    /// keep.
    ///
    /// ```
    /// use specwatch::{Change, ChangeBatch, ChangeKind, FileType, Generation, Seq};
    /// use std::time::SystemTime;
    ///
    /// /// The code under test: does this batch need a rebuild?
    /// fn needs_rebuild(batch: &ChangeBatch) -> bool {
    ///     batch.changes.iter().any(|c| c.path.extension().is_some_and(|e| e == "rs"))
    /// }
    ///
    /// let batch = ChangeBatch::new(
    ///     "src",
    ///     Generation(1),
    ///     Seq::new(1, 7),
    ///     SystemTime::UNIX_EPOCH,
    ///     [
    ///         Change::new("/app/src/main.rs", ChangeKind::Modified, FileType::File),
    ///         Change::new("/app/README.md", ChangeKind::Created, FileType::File),
    ///     ],
    /// );
    /// assert!(needs_rebuild(&batch));
    /// assert!(batch.changes[0].path.ends_with("README.md"), "sorted by path");
    /// ```
    #[must_use]
    pub fn new(
        name: impl Into<String>,
        generation: Generation,
        seq: Seq,
        time: SystemTime,
        changes: impl IntoIterator<Item = Change>,
    ) -> ChangeBatch {
        let mut changes: Vec<Change> = changes.into_iter().collect();
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        ChangeBatch {
            name: name.into(),
            generation,
            seq,
            time,
            changes,
            restore: None,
        }
    }

    /// The batch, marked as a spec's first after a restore (see
    /// [`restore`](ChangeBatch::restore)).
    #[must_use]
    pub fn with_restore(mut self, restore: crate::state::restore::Restore) -> ChangeBatch {
        self.restore = Some(restore);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::ChangeKind::{Created, Modified, Removed};
    use super::FileType::{Dir, File};
    use super::*;

    /// A change is its path and 32 bytes (56 on Linux, 64 on Windows,
    /// whose paths are 32): the metadata is boxed (one pointer), the
    /// content hash 17 bytes inline (bytes, not a `u128`, whose 16-byte
    /// alignment would make it 80 on Linux), the kind and the type a byte
    /// each.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_change_stays_small() {
        use std::mem::size_of;
        assert_eq!(size_of::<Change>(), size_of::<std::path::PathBuf>() + 48);
        assert!(size_of::<Meta>() <= 40, "{}", size_of::<Meta>());
    }

    /// The netting rule's whole table, and its inverse.
    #[test]
    fn netting_table() {
        type Row = (
            Option<FileType>,
            Option<FileType>,
            Option<(ChangeKind, FileType)>,
        );
        let rows: [Row; 7] = [
            (None, None, None),
            (None, Some(File), Some((Created, File))),
            (Some(Dir), None, Some((Removed, Dir))),
            (Some(File), Some(File), Some((Modified, File))),
            // Replaced by another type: modified, with the type it has now.
            (Some(Dir), Some(File), Some((Modified, File))),
            (Some(File), Some(Dir), Some((Modified, Dir))),
            (None, Some(Dir), Some((Created, Dir))),
        ];
        for (before, now, want) in rows {
            assert_eq!(net(before, now), want, "net({before:?}, {now:?})");
            if let Some((kind, ft)) = want {
                let (b, a) = ends(kind, ft);
                assert_eq!(
                    (b.is_some(), a.is_some()),
                    (before.is_some(), now.is_some()),
                    "ends({kind:?}) inverts net({before:?}, {now:?})"
                );
            }
        }
        assert_eq!(ends(Created, File), (None, Some(File)));
        assert_eq!(ends(Modified, File), (Some(File), Some(File)));
        assert_eq!(ends(Removed, Dir), (Some(Dir), None));
    }
}
