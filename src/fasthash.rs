//! The hash map of the engine's hot paths: `foldhash` (hashbrown's default
//! hasher), seeded randomly per process, where std's SipHash showed in the
//! profile of routing one event to many specs.

/// A `HashMap` with foldhash's fast, per-process-seeded hasher.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// A `HashSet` with the same hasher.
pub(crate) type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
