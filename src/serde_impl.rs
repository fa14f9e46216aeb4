//! The `serde` feature's set of named specs: [`WatchSpecs`], as a
//! configuration file holds them, naming the spec in every error.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use crate::spec::WatchSpec;

/// A set of named specs, as a configuration file holds them: a map from
/// name to [`WatchSpec`], read with any serde format (JSON, TOML, YAML...)
/// and handed to [`Manager::reconcile`](crate::Manager::reconcile).
///
/// An error names the spec it is in (and serde names the field):
/// `watch spec "web": unknown field `quiet_windw`, expected one of ...`.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let specs: specwatch::WatchSpecs = serde_json::from_str(r#"{
///     "web": {
///         "paths": ["/srv/web"],
///         "ignores": [{ "base": "/srv/web", "patterns": ["node_modules/"] }],
///         "options": { "quiet_window": "20ms", "backend": "poll:500ms" }
///     }
/// }"#)?;
/// assert_eq!(specs.0["web"].options.quiet_window, std::time::Duration::from_millis(20));
/// // manager.reconcile(specs)?;
/// # Ok(()) }
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchSpecs(pub BTreeMap<String, WatchSpec>);

impl IntoIterator for WatchSpecs {
    type Item = (String, WatchSpec);
    type IntoIter = std::collections::btree_map::IntoIter<String, WatchSpec>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl Serialize for WatchSpecs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for WatchSpecs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<WatchSpecs, D::Error> {
        struct Specs;
        impl<'de> Visitor<'de> for Specs {
            type Value = WatchSpecs;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map from spec names to watch specs")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WatchSpecs, A::Error> {
                let mut out = BTreeMap::new();
                while let Some(name) = map.next_key::<String>()? {
                    let spec = map
                        .next_value::<WatchSpec>()
                        .map_err(|e| de::Error::custom(format!("watch spec {name:?}: {e}")))?;
                    if out.insert(name.clone(), spec).is_some() {
                        return Err(de::Error::custom(format!(
                            "watch spec {name:?} appears more than once"
                        )));
                    }
                }
                Ok(WatchSpecs(out))
            }
        }
        d.deserialize_map(Specs)
    }
}
