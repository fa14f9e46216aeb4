//! Any bytes read as what the manager publishes (`WatchStatus`,
//! `ChangeBatch`, `Event`, `ChangesSince`) in JSON: never a panic; a
//! value that parses serializes and parses back equal (`Event` has no
//! `PartialEq`: it must write the same JSON again).
#![no_main]

use std::fmt::Debug;

use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;
use specwatch::{ChangeBatch, ChangesSince, Event, WatchStatus};

fn round_trip<T: Serialize + DeserializeOwned + Debug>(data: &[u8], eq: impl Fn(&T, &T) -> bool) {
    let Ok(value) = serde_json::from_slice::<T>(data) else {
        return;
    };
    let json = serde_json::to_vec(&value).expect("a parsed value serializes");
    let back: T = serde_json::from_slice(&json).unwrap_or_else(|e| {
        panic!(
            "{value:?} wrote {} which does not read back: {e}",
            String::from_utf8_lossy(&json)
        )
    });
    assert!(eq(&value, &back), "{value:?} read back as {back:?}");
    let again = serde_json::to_vec(&back).expect("serializes");
    assert_eq!(json, again, "the same value writes the same JSON");
}

fuzz_target!(|data: &[u8]| {
    round_trip::<WatchStatus>(data, |a, b| a == b);
    round_trip::<ChangeBatch>(data, |a, b| a == b);
    round_trip::<ChangesSince>(data, |a, b| a == b);
    round_trip::<Event>(data, |_, _| true);
});
