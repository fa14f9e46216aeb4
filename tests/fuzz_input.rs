//! Bad input never panics: arbitrary specs and ignore patterns give a value
//! or a typed error, and matching arbitrary paths against whatever was
//! accepted never panics either; nor does reading a backend (and its
//! duration) from text, which reads back what it writes.

use std::path::PathBuf;
use std::time::Duration;

use proptest::prelude::*;
use specwatch::{Backend, Error, IgnoreRule, WatchSpec};

fn pattern() -> impl Strategy<Value = String> {
    prop_oneof![
        // Glob-ish soup.
        "[!/*?\\[\\]{}\\\\a-c#. ~-]{0,12}",
        // Anything at all.
        any::<String>(),
    ]
}

fn path() -> impl Strategy<Value = PathBuf> {
    "(/|\\.\\./|\\./)?([a-c.]{0,3}/){0,4}[a-c.]{0,3}".prop_map(PathBuf::from)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

    #[test]
    fn normalizing_any_spec_gives_a_value_or_a_typed_error(
        name in any::<String>(),
        paths in proptest::collection::vec(path(), 0..4),
        base in proptest::option::of(path()),
        rules in proptest::collection::vec((path(), proptest::collection::vec(pattern(), 0..5)), 0..3),
        quiet in 0u64..3000,
        max in 0u64..3000,
    ) {
        let mut spec = WatchSpec::new(paths)
            .quiet_window(Duration::from_millis(quiet))
            .max_delay(Duration::from_millis(max));
        if let Some(b) = base {
            spec = spec.base_dir(b);
        }
        for (b, pats) in rules {
            spec = spec.ignore(IgnoreRule::new(b, pats));
        }
        match spec.normalized(&name) {
            Ok(n) => {
                prop_assert!(n.paths.iter().all(|p| p.is_absolute()));
                prop_assert!(n.paths.windows(2).all(|w| w[0] < w[1]));
                // Normalising is idempotent.
                prop_assert_eq!(n.normalized(&name).unwrap(), n.clone());
            }
            Err(e) => {
                // Every error names its culprit in its message.
                let msg = e.to_string();
                match &e {
                    Error::EmptyName => prop_assert!(name.is_empty()),
                    Error::InvalidPattern { pattern, .. } => {
                        let quoted = format!("{:?}", pattern);
                        prop_assert!(msg.contains(&quoted));
                    }
                    Error::RelativePath { path, .. } => {
                        let quoted = format!("{:?}", path);
                        prop_assert!(msg.contains(&quoted));
                    }
                    Error::InertRule { spec, base, .. } => {
                        prop_assert_eq!(spec, &name);
                        let quoted = format!("{:?}", base);
                        prop_assert!(msg.contains(&quoted));
                    }
                    Error::NoPaths { spec } | Error::InvalidOption { spec, .. } => prop_assert_eq!(spec, &name),
                    other => prop_assert!(false, "unexpected error {other:?}"),
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

    /// Whatever patterns are accepted, applying the spec works and the
    /// engine survives (exercises the matcher and pruning on a real tree).
    #[test]
    fn accepted_patterns_never_break_the_engine(pats in proptest::collection::vec(pattern(), 0..6)) {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("a/b.c/#x")).unwrap();
        std::fs::write(d.path().join("a/b.c/f~"), "").unwrap();
        let m = specwatch::Manager::new().unwrap();
        let spec = WatchSpec::new([d.path()]).ignore(IgnoreRule::new(d.path(), pats));
        if m.apply("s", spec).is_ok() {
            m.wait_watching("s", Duration::from_secs(20)).unwrap();
            m.sync("s", Duration::from_secs(20)).unwrap();
        }
    }
}

/// Text that looks like a duration more often than not: digits (up to 40,
/// well past what a `Duration` holds), maybe a point, and a unit or junk.
fn duration_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{0,40}(\\.[0-9]{0,25})?(ns|us|µs|ms|s|m|min|h|x|)",
        "[0-9. a-zµ+-]{0,12}",
        any::<String>(),
    ]
}

/// Nanoseconds per unit, as the parser reads them.
const UNITS: [(&str, u128); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("min", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// `Duration` from nanoseconds; `None` past `Duration::MAX`.
fn from_nanos(ns: u128) -> Option<Duration> {
    let secs = u64::try_from(ns / 1_000_000_000).ok()?;
    Some(Duration::new(secs, (ns % 1_000_000_000) as u32))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

    /// Any text gives a backend or an error that quotes it; never a panic.
    #[test]
    fn a_backend_from_any_text_is_a_value_or_an_error_naming_it(d in duration_text()) {
        for text in [format!("poll:{d}"), format!("poll every {d}"), d.clone()] {
            if let Err(e) = text.parse::<Backend>() {
                let quoted = format!("{text:?}");
                prop_assert!(e.to_string().contains(&quoted), "{e}");
            }
        }
    }

    /// Whatever a poll interval is, what the backend writes reads back
    /// (Display, and `poll:` with the interval as `Debug` writes it, the
    /// serde feature's form), to the nanosecond, up to `Duration::MAX`.
    #[test]
    fn every_interval_reads_back_as_written(secs in any::<u64>(), nanos in 0u32..1_000_000_000) {
        let b = Backend::Poll { interval: Duration::new(secs, nanos) };
        prop_assert_eq!(b.to_string().parse::<Backend>(), Ok(b));
        prop_assert_eq!(format!("poll:{:?}", Duration::new(secs, nanos)).parse::<Backend>(), Ok(b));
    }

    /// A whole number of any unit is that many units exactly, or an error
    /// saying it is too long exactly when it is past `Duration::MAX`.
    #[test]
    fn whole_numbers_are_exact_or_too_long(n in any::<u64>(), unit in 0..UNITS.len(), big in any::<bool>()) {
        let (name, ns) = UNITS[unit];
        // Half the cases past u64, where most overflow.
        let n = if big { u128::from(n) * 1_000_000_000_000 } else { u128::from(n) };
        let text = format!("poll:{n}{name}");
        match (text.parse::<Backend>(), n.checked_mul(ns).and_then(from_nanos)) {
            (Ok(b), Some(want)) => prop_assert_eq!(b, Backend::Poll { interval: want }),
            (Err(e), None) => prop_assert!(e.to_string().contains("too long"), "{e}"),
            (got, want) => prop_assert!(false, "{text}: got {got:?}, want {want:?}"),
        }
    }
}
