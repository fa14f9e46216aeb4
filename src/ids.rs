//! Numbers that must not mix, as newtypes.

/// Generation of a spec: 1 when a name is created, +1 on every update that
/// changes the (normalised) spec. A name deleted and applied again starts
/// again at 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
pub struct Generation(pub u64);

impl std::fmt::Display for Generation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::fmt::Display for Seq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Generation {
    /// The generation after this one.
    #[must_use]
    pub fn next(self) -> Generation {
        Generation(self.0 + 1)
    }
}

/// Sequence number of a [`ChangeBatch`](crate::ChangeBatch).
///
/// Strictly increasing across all batches of one [`Manager`](crate::Manager)
/// (so also across the batches of one spec, across its generations), by one
/// per batch. The first is the wall-clock time the manager started, in
/// microseconds since the Unix epoch, so that a seq kept from an earlier
/// manager (an earlier run) is smaller than this one's (unless the clock
/// was set back) and [`Manager::changes_since`](crate::Manager::changes_since)
/// answers it with a resync. Gaps mean batches of other specs, never lost
/// batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
pub struct Seq(pub u64);
