//! Durations written as people write them: `"200ms"`, `"1.5s"`, `"2m"`
//! (as `Debug` of a `Duration` prints them). Parsing, and (with the `serde`
//! feature) how option fields are written and read: that string, or a bare
//! number of milliseconds. Pure.

use std::time::Duration;

/// `250ms`, `2s`, `1.5s`, `3m`, `500us`, `10ns`; `None` for anything else.
pub(crate) fn parse_duration(s: &str) -> Option<Duration> {
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (num, unit) = s.split_at(split);
    let value: f64 = num.parse().ok()?;
    let secs = match unit {
        "ns" => value / 1e9,
        "us" | "µs" => value / 1e6,
        "ms" => value / 1e3,
        "s" => value,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        _ => return None,
    };
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

#[cfg(feature = "serde")]
pub(crate) use with_serde::*;

#[cfg(feature = "serde")]
mod with_serde {
    use std::fmt;
    use std::time::Duration;

    use serde::de::{self, Deserializer, Visitor};
    use serde::ser::Serializer;

    use super::parse_duration;

    /// `Duration` as `"200ms"`; reads that or a number of milliseconds.
    pub(crate) mod duration {
        use super::*;

        pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_str(&format!("{d:?}"))
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
            d.deserialize_any(DurationVisitor)
        }
    }

    /// `Option<Duration>` the same way (`null` or absent: `None`).
    pub(crate) mod opt_duration {
        use super::*;

        pub(crate) fn serialize<S: Serializer>(
            d: &Option<Duration>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => s.serialize_some(&format!("{d:?}")),
                None => s.serialize_none(),
            }
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<Duration>, D::Error> {
            struct Opt;
            impl<'de> Visitor<'de> for Opt {
                type Value = Option<Duration>;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a duration such as \"200ms\" or \"2s\", a number of milliseconds, or nothing")
                }
                fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                    Ok(None)
                }
                fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                    Ok(None)
                }
                fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                    d.deserialize_any(DurationVisitor).map(Some)
                }
            }
            d.deserialize_option(Opt)
        }
    }

    /// Per-field readers whose errors name the field (serde's own name it
    /// only for unknown or missing fields).
    pub(crate) mod field {
        use super::*;

        fn named<T, E: de::Error>(field: &str, r: Result<T, E>) -> Result<T, E> {
            r.map_err(|e| E::custom(format!("{field}: {e}")))
        }

        pub(crate) fn quiet_window<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
            named("quiet_window", duration::deserialize(d))
        }

        pub(crate) fn max_delay<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
            named("max_delay", duration::deserialize(d))
        }

        pub(crate) fn rescan_every<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<Duration>, D::Error> {
            named("rescan_every", opt_duration::deserialize(d))
        }
    }

    struct DurationVisitor;

    impl Visitor<'_> for DurationVisitor {
        type Value = Duration;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a duration such as \"200ms\" or \"2s\", or a number of milliseconds")
        }

        fn visit_u64<E: de::Error>(self, ms: u64) -> Result<Duration, E> {
            Ok(Duration::from_millis(ms))
        }

        fn visit_i64<E: de::Error>(self, ms: i64) -> Result<Duration, E> {
            u64::try_from(ms)
                .map(Duration::from_millis)
                .map_err(|_| E::custom(format!("a duration cannot be negative: {ms}")))
        }

        fn visit_str<E: de::Error>(self, s: &str) -> Result<Duration, E> {
            parse_duration(s.trim()).ok_or_else(|| {
                E::custom(format!(
                    "not a duration: {s:?} (write it with a unit: \"200ms\", \"2s\", \"1m\")"
                ))
            })
        }
    }
}
