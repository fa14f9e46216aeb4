//! Any bytes read as a spec (`WatchSpec`, `WatchSpecs`) in JSON: never a
//! panic; a value that parses serializes, parses back equal, and can be
//! normalised and compiled (or refused with a typed error) without a
//! panic.
#![no_main]

use std::fmt::Debug;

use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;
use specwatch::bench_api::Matcher;
use specwatch::{WatchSpec, WatchSpecs};

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(data: &[u8]) -> Option<T> {
    let value: T = serde_json::from_slice(data).ok()?;
    let json = serde_json::to_vec(&value).expect("a parsed value serializes");
    let back: T = serde_json::from_slice(&json).unwrap_or_else(|e| {
        panic!(
            "{value:?} wrote {} which does not read back: {e}",
            String::from_utf8_lossy(&json)
        )
    });
    assert_eq!(value, back, "{}", String::from_utf8_lossy(&json));
    Some(value)
}

fn check(spec: &WatchSpec) {
    if let Ok(n) = spec.normalized("fuzz") {
        let _ = Matcher::new(&n);
    }
}

fuzz_target!(|data: &[u8]| {
    if let Some(spec) = round_trip::<WatchSpec>(data) {
        check(&spec);
    }
    if let Some(specs) = round_trip::<WatchSpecs>(data) {
        for spec in specs.0.values() {
            check(spec);
        }
    }
});
