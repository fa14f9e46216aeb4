//! Tests of `spec/mod.rs`: normalising, validating and the builders.

use super::*;
use crate::test_paths::abs;

#[test]
fn normalizes_paths() {
    let s = WatchSpec::new([
        abs("/b/./c/"),
        abs("/a/x/../y"),
        abs("/b/c"),
        PathBuf::from("rel"),
    ])
    .base_dir(abs("/base"));
    let n = s.normalized("s").unwrap();
    assert_eq!(n.paths, vec![abs("/a/y"), abs("/b/c"), abs("/base/rel")]);
    assert_eq!(n.base_dir, None);
    // Same intent, other spelling: equal.
    let s2 = WatchSpec::new([abs("/base/rel"), abs("/b/c"), abs("/a/y")]);
    assert_eq!(s2.normalized("s").unwrap(), n);
}

#[test]
fn backends_parse_as_they_print() {
    for b in [
        Backend::Auto,
        Backend::Native,
        Backend::Portable,
        Backend::Poll {
            interval: Duration::from_millis(1500),
        },
        Backend::Poll {
            interval: Duration::from_micros(20),
        },
    ] {
        assert_eq!(b.to_string().parse::<Backend>(), Ok(b), "{b}");
    }
    let e = "inotify".parse::<Backend>().unwrap_err();
    assert!(e.to_string().contains("\"inotify\""), "{e}");
    // Too long for a `Duration`: an error naming the input, no panic.
    let e = "poll:99999999999999999999999h"
        .parse::<Backend>()
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"poll:99999999999999999999999h\""), "{e}");
    assert!(e.contains("too long"), "{e}");
}

#[test]
fn clean_never_goes_above_root() {
    assert_eq!(clean(Path::new("/../../a")), PathBuf::from("/a"));
    assert_eq!(clean(Path::new("/")), PathBuf::from("/"));
}

#[test]
fn errors_name_the_culprit() {
    assert!(matches!(
        WatchSpec::new([abs("/a")]).normalized(""),
        Err(Error::EmptyName)
    ));
    match WatchSpec::new(Vec::<PathBuf>::new()).normalized("web") {
        Err(Error::NoPaths { spec }) => assert_eq!(spec, "web"),
        other => panic!("expected NoPaths, got {other:?}"),
    }
    match WatchSpec::new(["src"]).normalized("web") {
        Err(Error::RelativePath { spec, path }) => {
            assert_eq!(spec, "web");
            assert_eq!(path, PathBuf::from("src"));
        }
        other => panic!("expected RelativePath, got {other:?}"),
    }
    match WatchSpec::new([abs("/a")])
        .base_dir("rel")
        .normalized("web")
    {
        Err(Error::InvalidOption { option, reason, .. }) => {
            assert_eq!(option, "base_dir");
            assert!(reason.contains("\"rel\""), "{reason}");
        }
        other => panic!("expected InvalidOption base_dir, got {other:?}"),
    }
    match WatchSpec::new([abs("/a")])
        .ignore(IgnoreRule::new(abs("/elsewhere"), ["x"]))
        .normalized("web")
    {
        Err(Error::InertRule { spec, rule, base }) => {
            assert_eq!((spec.as_str(), rule), ("web", 0));
            assert_eq!(base, abs("/elsewhere"));
        }
        other => panic!("expected InertRule, got {other:?}"),
    }
    match WatchSpec::new([abs("/a")])
        .ignore(IgnoreRule::new(abs("/a"), ["ok", "../x"]))
        .normalized("web")
    {
        Err(Error::InvalidPattern {
            pattern, reason, ..
        }) => {
            assert_eq!(pattern, "../x");
            assert!(reason.contains("climbs out"), "{reason}");
        }
        other => panic!("expected InvalidPattern, got {other:?}"),
    }
    match WatchSpec::new([abs("/a")])
        .max_delay(Duration::from_millis(20))
        .quiet_window(Duration::from_millis(50))
        .normalized("web")
    {
        Err(Error::InvalidOption { option, .. }) => assert_eq!(option, "max_delay"),
        other => panic!("expected InvalidOption max_delay, got {other:?}"),
    }
    match WatchSpec::new([abs("/a")])
        .ignore(IgnoreRule::new(abs("/a"), ["ok", "bad[z-a", "fine"]))
        .normalized("web")
    {
        Err(Error::InvalidPattern { spec, pattern, .. }) => {
            assert_eq!(spec, "web");
            assert_eq!(pattern, "bad[z-a");
        }
        other => panic!("expected InvalidPattern, got {other:?}"),
    }
    match WatchSpec::new([abs("/a")])
        .quiet_window(Duration::from_secs(2))
        .normalized("web")
    {
        Err(Error::InvalidOption { option, reason, .. }) => {
            assert_eq!(option, "quiet_window", "the one the user set");
            assert!(reason.contains("the default"), "{reason}");
        }
        other => panic!("expected InvalidOption, got {other:?}"),
    }
    for (option, spec) in [
        (
            "vcs_settle",
            WatchSpec::new([abs("/a")]).vcs_settle(Duration::ZERO),
        ),
        (
            "write_finished",
            WatchSpec::new([abs("/a")]).write_finished(Duration::ZERO),
        ),
        (
            "hold_bound",
            WatchSpec::new([abs("/a")]).hold_bound(Duration::ZERO),
        ),
    ] {
        match spec.normalized("web") {
            Err(Error::InvalidOption { option: o, .. }) => assert_eq!(o, option),
            other => panic!("expected InvalidOption {option}, got {other:?}"),
        }
    }
    match WatchSpec::new([""]).normalized("web") {
        Err(Error::RelativePath { .. }) => {}
        other => panic!("expected RelativePath for an empty path, got {other:?}"),
    }
}
