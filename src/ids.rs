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

impl Generation {
    /// The generation after this one.
    #[must_use]
    pub fn next(self) -> Generation {
        Generation(self.0 + 1)
    }
}

/// Sequence number of a [`ChangeBatch`](crate::ChangeBatch), and the
/// token to ask [`Manager::changes_since`](crate::Manager::changes_since)
/// from.
///
/// Two parts. The **number** strictly increases across all batches of one
/// [`Manager`](crate::Manager) (so also across the batches of one spec,
/// across its generations), by one per batch; gaps mean batches of other
/// specs, never lost batches. The **instance** names the history the
/// number belongs to: a random id drawn when the manager starts, or, for a
/// spec restored from a snapshot ([`WatchOptions::state`](crate::WatchOptions::state)),
/// the id of the snapshot's lineage (the manager that first saved it), so
/// that a seq saved with a snapshot is still understood by the manager that
/// restores it. A seq of another instance (an earlier run, another process)
/// is answered with [`ResyncReason::OtherInstance`](crate::ResyncReason::OtherInstance)
/// whatever the clocks did: numbers are never compared across instances.
///
/// Written as `INSTANCE:NUMBER` (the instance in 16 hex digits), which
/// [`str::parse`] reads back, for a consumer that keeps it in a file.
///
/// ```
/// use specwatch::Seq;
///
/// let seq = Seq::new(0x5eed, 42);
/// assert_eq!(seq.to_string(), "0000000000005eed:42");
/// assert_eq!("0000000000005eed:42".parse::<Seq>().unwrap(), seq);
/// assert_eq!((seq.instance(), seq.number()), (0x5eed, 42));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(into = "String", try_from = "String"))]
pub struct Seq {
    // Numbers first: within one instance, seqs order by number.
    number: u64,
    instance: u64,
}

impl Seq {
    /// The seq `number` of history `instance` (to feed a consumer's own
    /// tests, or read back one it kept).
    #[must_use]
    pub const fn new(instance: u64, number: u64) -> Seq {
        Seq { number, instance }
    }

    /// Its number: increasing within its instance.
    #[must_use]
    pub const fn number(self) -> u64 {
        self.number
    }

    /// The history it belongs to.
    #[must_use]
    pub const fn instance(self) -> u64 {
        self.instance
    }
}

impl std::fmt::Display for Seq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}:{}", self.instance, self.number)
    }
}

/// Why a text is not a [`Seq`] (`INSTANCE:NUMBER`, the instance in hex).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a seq (INSTANCE:NUMBER, the instance in hex): {text:?}")]
pub struct ParseSeqError {
    text: String,
}

impl From<Seq> for String {
    fn from(seq: Seq) -> String {
        seq.to_string()
    }
}

impl TryFrom<String> for Seq {
    type Error = ParseSeqError;

    fn try_from(s: String) -> Result<Seq, ParseSeqError> {
        s.parse()
    }
}

impl std::str::FromStr for Seq {
    type Err = ParseSeqError;

    fn from_str(s: &str) -> Result<Seq, ParseSeqError> {
        let err = || ParseSeqError { text: s.to_owned() };
        let (i, n) = s.split_once(':').ok_or_else(err)?;
        let instance = u64::from_str_radix(i, 16).map_err(|_| err())?;
        let number = n.parse().map_err(|_| err())?;
        Ok(Seq::new(instance, number))
    }
}

/// A fresh random instance id (see [`Seq`]): std's randomly keyed hasher
/// (its keys come from the OS's random source, once per thread, then
/// stepped), fed the wall clock and the process id, so two managers of
/// one process, or two processes started together, draw different ids.
pub(crate) fn random_instance() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    h.write_u128(now.as_nanos());
    h.write_u32(std::process::id());
    // Never 0: the instance of `Seq::default()`.
    h.finish().max(1)
}
