//! Durations written as people write them: `"200ms"`, `"1.5s"`, `"2m"`
//! (as `Debug` of a `Duration` prints them). Parsing, and (with the `serde`
//! feature) how option fields are written and read: that string, or a bare
//! number of milliseconds. Pure.

use std::time::Duration;

/// Why a text is not a [`Duration`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BadDuration {
    /// Not a number with a unit.
    Malformed,
    /// A duration, but longer than a `Duration` holds (2^64 seconds).
    TooLong,
}

impl BadDuration {
    #[cfg(any(test, feature = "serde"))]
    /// What is wrong with `input`, in words (the caller names where it
    /// was read).
    pub(crate) fn describe(self, input: &str) -> String {
        match self {
            BadDuration::Malformed => format!(
                "not a duration: {input:?} (write it with a unit: \"200ms\", \"2s\", \"1m\")"
            ),
            BadDuration::TooLong => format!(
                "duration {input:?} is too long (at most 2^64 seconds, about 584 billion years)"
            ),
        }
    }
}

/// `250ms`, `2s`, `1.5s`, `3m`, `500us`, `10ns`: a decimal number and a
/// unit, read exactly (no floating point) to the nanosecond, a fraction
/// of a nanosecond dropped. Reads back whatever `Debug` of a `Duration`
/// writes. Never panics: a value past `Duration::MAX` is
/// [`BadDuration::TooLong`].
pub(crate) fn parse_duration(s: &str) -> Result<Duration, BadDuration> {
    use BadDuration::{Malformed, TooLong};
    const NS_PER_S: u128 = 1_000_000_000;
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or(Malformed)?;
    let (num, unit) = s.split_at(split);
    let unit_ns: u128 = match unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => NS_PER_S,
        "m" | "min" => 60 * NS_PER_S,
        "h" => 3600 * NS_PER_S,
        _ => return Err(Malformed),
    };
    let (whole, fraction) = num.split_once('.').unwrap_or((num, ""));
    if fraction.contains('.') || (whole.is_empty() && fraction.is_empty()) {
        return Err(Malformed);
    }
    let mut ns: u128 = 0;
    for d in whole.bytes() {
        ns = ns
            .checked_mul(10)
            .and_then(|n| n.checked_add(u128::from(d - b'0')))
            .ok_or(TooLong)?;
    }
    ns = ns.checked_mul(unit_ns).ok_or(TooLong)?;
    // The fraction's first 20 digits (at most 10^20, times a unit of at
    // most 3.6 * 10^12 ns: far below u128::MAX); the digits after them
    // are worth less than a nanosecond.
    let digits = &fraction[..fraction.len().min(20)];
    let mut numerator: u128 = 0;
    for d in digits.bytes() {
        numerator = numerator * 10 + u128::from(d - b'0');
    }
    let denominator = 10u128.pow(digits.len() as u32);
    ns = ns
        .checked_add(numerator * unit_ns / denominator)
        .ok_or(TooLong)?;
    let secs = u64::try_from(ns / NS_PER_S).map_err(|_| TooLong)?;
    // Below 10^9: fits.
    let nanos = (ns % NS_PER_S) as u32;
    Ok(Duration::new(secs, nanos))
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

        pub(crate) fn save_every<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
            named("save_every", duration::deserialize(d))
        }

        pub(crate) fn rescan_every<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<Duration>, D::Error> {
            named("rescan_every", opt_duration::deserialize(d))
        }

        pub(crate) fn vcs_settle<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<Duration>, D::Error> {
            named("vcs_settle", opt_duration::deserialize(d))
        }

        pub(crate) fn hold_bound<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
            named("hold_bound", duration::deserialize(d))
        }

        pub(crate) fn write_finished<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<Duration>, D::Error> {
            named("write_finished", opt_duration::deserialize(d))
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
            parse_duration(s.trim()).map_err(|why| E::custom(why.describe(s)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_fractions_are_read_exactly() {
        let ok = |s: &str| parse_duration(s).unwrap_or_else(|e| panic!("{s}: {e:?}"));
        assert_eq!(ok("250ms"), Duration::from_millis(250));
        assert_eq!(ok("1.5s"), Duration::from_millis(1500));
        assert_eq!(ok("2m"), Duration::from_secs(120));
        assert_eq!(ok("2min"), Duration::from_secs(120));
        assert_eq!(ok("1.5h"), Duration::from_secs(5400));
        assert_eq!(ok("10ns"), Duration::from_nanos(10));
        assert_eq!(ok("1.5µs"), Duration::from_nanos(1500));
        assert_eq!(ok("500us"), Duration::from_micros(500));
        assert_eq!(ok(".5s"), Duration::from_millis(500));
        assert_eq!(ok("5.s"), Duration::from_secs(5));
        assert_eq!(ok("1.000000001s"), Duration::new(1, 1));
        assert_eq!(ok("0.1ns"), Duration::ZERO, "below a nanosecond: dropped");
        // The largest `Duration`, as `Debug` writes it; what lies beyond
        // it by less than a nanosecond is dropped.
        assert_eq!(ok(&format!("{:?}", Duration::MAX)), Duration::MAX);
        assert_eq!(ok("18446744073709551615.9999999999s"), Duration::MAX);
    }

    #[test]
    fn malformed_and_too_long_texts_are_errors() {
        for bad in [
            "", "ms", "5", "5 ms", "5sec", "-5ms", "+5ms", "1.2.3s", ".s", "1e3ms", "inf s",
        ] {
            assert_eq!(parse_duration(bad), Err(BadDuration::Malformed), "{bad:?}");
        }
        for long in [
            "99999999999999999999999h",
            "18446744073709551616s",
            "18446744073709551616000ms",
            "5124095576030432h",
            "307445734561825861m",
            &format!("{}s", "9".repeat(60)),
        ] {
            assert_eq!(parse_duration(long), Err(BadDuration::TooLong), "{long:?}");
        }
        // Just below the limit in another unit.
        assert_eq!(
            parse_duration("5124095576030431h"),
            Ok(Duration::from_secs(5_124_095_576_030_431 * 3600))
        );
        let said = BadDuration::TooLong.describe("99h");
        assert!(
            said.contains("\"99h\"") && said.contains("too long"),
            "{said}"
        );
    }
}
