//! The `serde` feature: specs, rules and options from configuration files
//! (JSON and TOML), errors that name the spec and the field, and events
//! and statuses that survive a round trip.
#![cfg(feature = "serde")]

mod common;

use std::fs;
use std::time::Duration;

use common::*;
use specwatch::{
    Backend, ChangeBatch, ChangeKind, DuringHolds, HoldReason, IgnoreFiles, IgnoreRule, Manager,
    WatchSpec, WatchSpecs, WatchStatus,
};

fn full_spec() -> WatchSpec {
    WatchSpec::new(["/srv/app", "/srv/lib"])
        .ignore(IgnoreRule::new("/srv/app", ["target/", "!target/keep"]))
        .quiet_window(Duration::from_millis(20))
        .max_delay(Duration::from_millis(1500))
        .editor_ignores(false)
        .follow_symlinks(true)
        .backend(Backend::Poll {
            interval: Duration::from_millis(250),
        })
        .initial_scan(true)
        .rescan_every(Duration::from_secs(60))
        .content_hash(true)
        .ignore_patterns(["*.log"])
        .ignore_files(IgnoreFiles::GIT | IgnoreFiles::TILT)
        .during_holds(DuringHolds::Drop)
        .hold_bound(Duration::from_secs(3))
}

#[test]
fn a_spec_survives_json_and_toml_with_durations_as_words() {
    let spec = full_spec();
    let json = serde_json::to_string(&spec).unwrap();
    assert!(json.contains(r#""quiet_window":"20ms""#), "{json}");
    assert!(json.contains(r#""max_delay":"1.5s""#), "{json}");
    assert!(json.contains(r#""backend":"poll:250ms""#), "{json}");
    assert_eq!(serde_json::from_str::<WatchSpec>(&json).unwrap(), spec);
    assert!(json.contains(r#""ignore_patterns":["*.log"]"#), "{json}");
    assert!(json.contains(r#""ignore_files":["git","tilt"]"#), "{json}");
    assert!(json.contains(r#""during_holds":"drop""#), "{json}");
    assert!(json.contains(r#""hold_bound":"3s""#), "{json}");
    let toml_text = toml::to_string(&spec).unwrap();
    assert_eq!(toml::from_str::<WatchSpec>(&toml_text).unwrap(), spec);
}

#[test]
fn ignore_files_read_as_a_list_a_name_or_a_bool() {
    let read = |v: &str| -> Result<IgnoreFiles, String> {
        serde_json::from_str::<WatchSpec>(&format!(
            r#"{{"paths": ["/a"], "options": {{"ignore_files": {v}}}}}"#
        ))
        .map(|s| s.options.ignore_files)
        .map_err(|e| e.to_string())
    };
    assert_eq!(
        read(r#"["docker", "git"]"#),
        Ok(IgnoreFiles::GIT | IgnoreFiles::DOCKER)
    );
    assert_eq!(read(r#""tilt""#), Ok(IgnoreFiles::TILT));
    assert_eq!(
        read("true"),
        Ok(IgnoreFiles::GIT),
        "what a bool meant before"
    );
    assert_eq!(read("false"), Ok(IgnoreFiles::NONE));
    let err = read(r#"["svn"]"#).unwrap_err();
    assert!(err.contains(r#"unknown ignore files "svn""#), "{err}");
}

#[test]
fn ignore_patterns_are_read_under_their_old_key_too() {
    let new: WatchSpec =
        serde_json::from_str(r#"{"paths": ["/a"], "ignore_patterns": ["*.log"]}"#).unwrap();
    let old: WatchSpec =
        serde_json::from_str(r#"{"paths": ["/a"], "root_patterns": ["*.log"]}"#).unwrap();
    assert_eq!(new, WatchSpec::new(["/a"]).ignore_patterns(["*.log"]));
    assert_eq!(old, new);
}

#[test]
fn named_specs_load_from_toml_with_defaults_and_numbers_of_milliseconds() {
    let text = r#"
        [web]
        paths = ["/srv/web"]
        ignores = [{ base = "/srv/web", patterns = ["node_modules/", "*.log"] }]
        options = { quiet_window = 20, backend = "auto" }

        [charts]
        paths = ["/mnt/charts"]
        options = { backend = "poll:1s", initial_scan = true }
    "#;
    let specs: WatchSpecs = toml::from_str(text).unwrap();
    let web = &specs.0["web"];
    assert_eq!(web.options.quiet_window, Duration::from_millis(20));
    assert_eq!(
        web.options.max_delay,
        specwatch::DEFAULT_MAX_DELAY,
        "a default"
    );
    assert_eq!(web.options.backend, Some(Backend::Auto));
    assert_eq!(web.ignores[0].patterns, ["node_modules/", "*.log"]);
    let charts = &specs.0["charts"];
    assert_eq!(
        charts.options.backend,
        Some(Backend::Poll {
            interval: Duration::from_secs(1)
        })
    );
    assert!(charts.options.initial_scan);
    assert!(charts.ignores.is_empty() && charts.base_dir.is_none());
}

#[test]
fn errors_name_the_spec_and_the_field() {
    let cases = [
        (
            r#"{"web": {"paths": ["/a"], "options": {"quiet_windw": "20ms"}}}"#,
            ["\"web\"", "quiet_windw"],
        ),
        (
            r#"{"ok": {"paths": ["/a"]}, "web": {"paths": ["/a"], "options": {"quiet_window": "fast"}}}"#,
            ["\"web\"", "quiet_window"],
        ),
        (
            r#"{"web": {"paths": ["/a"], "options": {"backend": "inotify"}}}"#,
            ["\"web\"", "backend"],
        ),
        (
            r#"{"web": {"paths": ["/a"], "options": {"max_delay": -5}}}"#,
            ["\"web\"", "max_delay"],
        ),
        (r#"{"web": {"pathz": ["/a"]}}"#, ["\"web\"", "pathz"]),
        (r#"{"web": {"ignores": []}}"#, ["\"web\"", "paths"]),
    ];
    for (text, words) in cases {
        let e = serde_json::from_str::<WatchSpecs>(text)
            .unwrap_err()
            .to_string();
        for w in words {
            assert!(e.contains(w), "{text}: the error {e:?} does not say {w}");
        }
    }
}

/// A duration too long for a `Duration` is an error naming the field and
/// the text, not a panic.
#[test]
fn too_long_durations_are_errors_naming_field_and_text() {
    let long = "99999999999999999999999h";
    for (field, value) in [
        ("rescan_every", long.to_owned()),
        ("quiet_window", long.to_owned()),
        ("backend", format!("poll:{long}")),
    ] {
        let text =
            format!(r#"{{"web": {{"paths": ["/a"], "options": {{"{field}": "{value}"}}}}}}"#);
        let e = serde_json::from_str::<WatchSpecs>(&text)
            .unwrap_err()
            .to_string();
        for w in ["\"web\"", field, long, "too long"] {
            assert!(e.contains(w), "{text}: the error {e:?} does not say {w}");
        }
    }
}

#[test]
fn loaded_specs_reconcile_a_manager() {
    let d = tmp();
    let root = d.path().canonicalize().unwrap();
    let text = format!(
        r#"{{"s": {{"paths": [{root:?}], "options": {{"quiet_window": "10ms"}}}}}}"#,
        root = root.display().to_string()
    );
    let specs: WatchSpecs = serde_json::from_str(&text).unwrap();
    let m = Manager::new().unwrap();
    let summary = m.reconcile(specs).unwrap();
    assert_eq!(summary.created, ["s"]);
}

#[test]
fn batches_and_statuses_survive_a_round_trip() {
    let d = tmp();
    let root = d.path();
    let m = Manager::new().unwrap();
    let mut c = Collector::new(m.subscribe());
    start(&m, "s", spec(&[root]));
    let f = root.join("a");
    fs::write(&f, "x").unwrap();
    c.wait("a created", |c| c.has("s", &f, ChangeKind::Created));
    let batch = c.batches["s"][0].clone();
    let json = serde_json::to_string(&*batch).unwrap();
    assert!(json.contains(r#""kind":"created""#), "{json}");
    assert_eq!(serde_json::from_str::<ChangeBatch>(&json).unwrap(), *batch);
    let event = specwatch::Event::Changes(batch.clone());
    let json = serde_json::to_string(&event).unwrap();
    assert!(json.starts_with(r#"{"changes":"#), "{json}");
    match serde_json::from_str::<specwatch::Event>(&json).unwrap() {
        specwatch::Event::Changes(b) => assert_eq!(*b, *batch),
        other => panic!("{other:?}"),
    }
    // A sync answers after the pass's status is published.
    let _held = m.hold("s", "round trip").unwrap();
    m.sync("s", WAIT).unwrap();
    let status = m.status("s").unwrap();
    assert!(!status.recent_batches.is_empty() && !status.roots.is_empty());
    assert!(
        matches!(&status.holds[..], [h] if h.reason == HoldReason::Declared { label: "round trip".into() }),
        "{:?}",
        status.holds
    );
    let json = serde_json::to_string(&status).unwrap();
    assert_eq!(serde_json::from_str::<WatchStatus>(&json).unwrap(), status);
}
