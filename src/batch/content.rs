//! Content hashes: what a file's bytes hash to, offered on changes when a
//! spec compares contents ([`WatchOptions::skip_same_content`]).
//!
//! [`WatchOptions::skip_same_content`]: crate::WatchOptions::skip_same_content

use std::fmt;
use std::str::FromStr;

/// The XXH3-128 hash of a file's content: equal hashes mean equal bytes,
/// but for a collision (a chance of about 2⁻¹²⁸ per pair of contents; not
/// a cryptographic hash: someone who writes both files can make two
/// contents collide).
///
/// Written and parsed as 32 lowercase hex digits (serde uses the same
/// string), so it can key a cache on disk.
///
/// ```
/// use specwatch::ContentHash;
///
/// let h: ContentHash = "0123456789abcdef0123456789abcdef".parse().unwrap();
/// assert_eq!(h.to_string(), "0123456789abcdef0123456789abcdef");
/// assert_eq!(ContentHash::of(b"same"), ContentHash::of(b"same"));
/// assert_ne!(ContentHash::of(b"a"), ContentHash::of(b"b"));
/// ```
///
/// Its 16 bytes are the 128-bit value, most significant first (bytes,
/// not a `u128`, so that a [`Change`](crate::Change) holding one stays 8-byte
/// aligned and small).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContentHash(pub [u8; 16]);

impl ContentHash {
    /// The hash of `bytes` (what a file holding them hashes to).
    #[must_use]
    pub fn of(bytes: &[u8]) -> ContentHash {
        ContentHash::from_u128(xxhash_rust::xxh3::xxh3_128(bytes))
    }

    /// The hash whose 128-bit value is `v`.
    #[must_use]
    pub fn from_u128(v: u128) -> ContentHash {
        ContentHash(v.to_be_bytes())
    }

    /// Its 128-bit value.
    #[must_use]
    pub fn to_u128(self) -> u128 {
        u128::from_be_bytes(self.0)
    }
}

impl fmt::Display for ContentHash {
    /// 32 lowercase hex digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.to_u128())
    }
}

/// A string that is not 32 hex digits.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a content hash (32 hex digits): {0:?}")]
pub struct ParseContentHashError(pub String);

impl FromStr for ContentHash {
    type Err = ParseContentHashError;

    fn from_str(s: &str) -> Result<ContentHash, ParseContentHashError> {
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ParseContentHashError(s.to_owned()));
        }
        u128::from_str_radix(s, 16)
            .map(ContentHash::from_u128)
            .map_err(|_| ParseContentHashError(s.to_owned()))
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for ContentHash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for ContentHash {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ContentHash, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_and_parsed_as_32_hex_digits() {
        let h = ContentHash::of(b"hello");
        let s = h.to_string();
        assert_eq!(s.len(), 32);
        assert_eq!(s.parse::<ContentHash>(), Ok(h));
        assert_eq!(ContentHash::from_u128(1).to_string(), format!("{:032x}", 1));
        assert_eq!(ContentHash::from_u128(7).to_u128(), 7);
        for bad in [
            "",
            "0",
            "g0123456789abcdef0123456789abcde",
            &format!("{s}0"),
        ] {
            assert!(bad.parse::<ContentHash>().is_err(), "{bad:?}");
        }
        assert_ne!(ContentHash::of(b"hello"), ContentHash::of(b"hellp"));
    }
}
