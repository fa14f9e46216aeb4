//! What a spec's first batch says about its saved state
//! ([`WatchOptions::state`](crate::WatchOptions::state)): restored, or
//! refused and why.

use std::path::PathBuf;

use crate::ids::Seq;

/// The state file format this version writes and reads.
pub(crate) const FORMAT: u32 = 1;

/// The mark of a spec's first batch when the spec keeps its state in a
/// file ([`ChangeBatch::restore`](crate::ChangeBatch::restore)).
///
/// How it maps to other watchers: @parcel/watcher's `writeSnapshot` is
/// [`Manager::save`](crate::Manager::save) (and the automatic saves), its
/// `getEventsSince(dir, snapshot)` the `Restored` batch; Watchman's
/// `since` query with a clock is [`Manager::changes_since`](crate::Manager::changes_since)
/// with a [`Seq`] (the seq saved with a snapshot is answered by the
/// restored manager), and its `is_fresh_instance` answer is `Refused`
/// (with the reason, and [`initial_scan`](crate::WatchOptions::initial_scan)'s
/// full list if asked for, as Watchman lists every file).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Restore {
    /// The batch holds exactly what changed between the saved state and
    /// the disk when watching started (each path once: `Created`,
    /// `Modified`, `Removed`), and is delivered even when empty. A change
    /// made while the state was being saved may be reported again.
    Restored {
        /// The seq the saved state reflects: `changes_since` from it
        /// answers with this batch's changes and what followed.
        from: Seq,
    },
    /// The saved state was not used: rebuild from scratch. The batch holds
    /// every entry as `Created` if the spec asked for
    /// [`initial_scan`](crate::WatchOptions::initial_scan), else nothing.
    Refused {
        /// Why.
        reason: StateRefused,
    },
}

/// Why a spec's saved state was not used (the consumer must rebuild from
/// scratch: see [`Restore::Refused`](crate::Restore::Refused)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum StateRefused {
    /// There is no state file yet (a first run).
    Missing,
    /// The file could not be read.
    Unreadable {
        /// The error.
        error: String,
    },
    /// Not a whole, intact state file: truncated, its checksum does not
    /// match, or not a specwatch state file at all.
    Corrupt {
        /// What is wrong.
        what: String,
    },
    /// Written in a format this version does not read (an older one).
    Format {
        /// The file's format.
        found: u32,
    },
    /// Written by a newer version of specwatch, in a newer format.
    Newer {
        /// The version that wrote it.
        writer: String,
    },
    /// Saved for another spec: other roots, ignore rules or options that
    /// change what is seen.
    OtherSpec,
    /// A root is on another file system (or machine) than when saved: its
    /// device differs, so inodes cannot be compared.
    OtherFileSystem {
        /// The root.
        root: PathBuf,
    },
}

impl std::fmt::Display for StateRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateRefused::Missing => f.write_str("no saved state"),
            StateRefused::Unreadable { error } => write!(f, "unreadable: {error}"),
            StateRefused::Corrupt { what } => write!(f, "corrupt: {what}"),
            StateRefused::Format { found } => {
                write!(f, "format {found}, this version reads {}", FORMAT)
            }
            StateRefused::Newer { writer } => write!(f, "written by a newer version ({writer})"),
            StateRefused::OtherSpec => f.write_str("saved for another spec"),
            StateRefused::OtherFileSystem { root } => {
                write!(f, "root {} is on another file system", root.display())
            }
        }
    }
}
