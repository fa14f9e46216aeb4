//! Holds a program declares ([`Manager::hold`](crate::Manager::hold)):
//! which specs a hold is on ([`HoldScope`]) and what a spec does with the
//! changes made while one lives ([`DuringHolds`]). The guard is the
//! manager's (`manager/hold.rs`); the engine's side is `engine/holds.rs`.
//!
//! The folder holds the pure rules of every hold on a batch: this file
//! (a program's holds), `settle` (held for a version-control lock,
//! `vcs_settle`) and `write` (held while a file is being written,
//! `write_finished`). Which holds are on a spec's batch now, and the one
//! question a due batch asks, are `engine/holds.rs`'s.

pub(crate) mod settle;
pub(crate) mod write;

use std::fmt;

/// Which specs a hold ([`Manager::hold`](crate::Manager::hold)) is on:
/// one spec, by name, or every spec.
///
/// A name is a name, not a spec generation: the hold is on whatever spec
/// has that name while it lives (one applied, updated or created after
/// the hold began included; none, while no spec has it). `&str` and
/// `String` convert into [`HoldScope::Spec`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HoldScope {
    /// The spec of this name.
    Spec(String),
    /// Every spec of the manager, those applied while the hold lives too.
    All,
}

impl HoldScope {
    /// Whether the hold is on the spec named `name`.
    pub(crate) fn covers(&self, name: &str) -> bool {
        match self {
            HoldScope::Spec(n) => n == name,
            HoldScope::All => true,
        }
    }
}

impl From<&str> for HoldScope {
    fn from(name: &str) -> HoldScope {
        HoldScope::Spec(name.to_owned())
    }
}

impl From<String> for HoldScope {
    fn from(name: String) -> HoldScope {
        HoldScope::Spec(name)
    }
}

impl fmt::Display for HoldScope {
    /// The spec's name, or `*` for every spec.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HoldScope::Spec(n) => f.write_str(n),
            HoldScope::All => f.write_str("*"),
        }
    }
}

/// What a spec does with its changes while a hold a program declared
/// ([`Manager::hold`](crate::Manager::hold)) is on it: its option
/// [`WatchOptions::during_holds`](crate::WatchOptions::during_holds).
///
/// Either way the changes are found and netted as always, and
/// [`Manager::changes_since`](crate::Manager::changes_since), the journal
/// and the state file go on describing the disk; only the batches
/// differ. The OS does not say who wrote a file: a hold covers every
/// change made while it lives, the holding program's and anyone else's.
///
/// With the `serde` feature it is written `"defer"` or `"drop"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum DuringHolds {
    /// The batch stays open while the hold lives (netting per path), and
    /// is delivered once it ends: one batch with everything changed
    /// meanwhile (Watchman's `defer`). The default.
    #[default]
    Defer,
    /// The changes made while the hold lives are delivered to no
    /// subscriber: what the hold covers is in no batch (Watchman's
    /// `drop`). They still advance the spec's seq and its
    /// [`changes_since`](crate::Manager::changes_since) answers, and
    /// [`WatchStatus::dropped_by_holds`](crate::WatchStatus::dropped_by_holds)
    /// counts them. For a program that must not react to its own writes
    /// (a build whose outputs land in the watched tree), knowing that
    /// anything else written meanwhile is not reported either.
    Drop,
}
