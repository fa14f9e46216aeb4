//! Bad input never panics: arbitrary specs and ignore patterns give a value
//! or a typed error, and matching arbitrary paths against whatever was
//! accepted never panics either.

use std::path::PathBuf;
use std::time::Duration;

use proptest::prelude::*;
use specwatch::{Error, IgnoreRule, WatchSpec};

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
