//! The spec table's unit tests (`engine/specs.rs`), without a file
//! system. (Its batches closed by their holds: `holds.rs`'s tests.)

use super::*;
use std::time::Duration;

/// A spec of `paths` with a quiet window of `quiet_ms`, and its matcher.
pub(crate) fn state(paths: &[&str], quiet_ms: u64) -> (WatchSpec, Matcher) {
    let spec = WatchSpec::new(paths.iter().map(|p| crate::test_paths::abs(p)))
        .quiet_window(Duration::from_millis(quiet_ms))
        .normalized("t")
        .unwrap();
    let m = spec.matcher("t").unwrap();
    (spec, m)
}

#[test]
fn ids_are_never_reused_and_names_follow_the_newest_generation() {
    let mut t = SpecTable::default();
    let (s, m) = state(&["/a"], 50);
    let (a1, old) = t.insert("a".into(), Generation(1), s, m);
    assert_eq!(old, None);
    let (s, m) = state(&["/b"], 50);
    let (a2, old) = t.insert("a".into(), Generation(2), s, m);
    assert_eq!(old, Some(a1));
    assert_ne!(a1, a2);
    assert_eq!(t.id_of("a"), Some(a2));
    t.remove(a1); // the old generation: the name stays with a2
    assert_eq!(t.id_of("a"), Some(a2));
    t.remove(a2);
    assert_eq!(t.id_of("a"), None);
    let (s, m) = state(&["/a"], 50);
    let (a3, _) = t.insert("a".into(), Generation(1), s, m);
    assert!(a3 > a2, "a fresh id");
}
