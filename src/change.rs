//! Changes: what happened to a path, and the batches that carry them.

use std::path::PathBuf;
use std::time::SystemTime;

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
}

impl Change {
    /// A change of `path` (to feed a consumer's own tests, say).
    #[must_use]
    pub fn new(path: impl Into<PathBuf>, kind: ChangeKind, file_type: FileType) -> Change {
        Change {
            path: path.into(),
            kind,
            file_type,
        }
    }
}

/// The changes seen for one spec, closed after its quiet window.
///
/// Promises: at most one [`Change`] per path, sorted by path (bytewise, so a
/// directory comes before what is inside it); the net difference between the
/// engine's index before and after the batch (a file created and removed
/// within one batch does not appear). Batches of one spec are delivered in
/// `seq` order. Not promised: that a `Modified` file's content differs (a
/// write of the same bytes is a modification).
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
    ///     Seq(7),
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
        }
    }
}
