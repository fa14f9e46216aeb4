//! Which ignore files a spec honours ([`WatchOptions::ignore_files`](crate::WatchOptions::ignore_files)).

use std::fmt;
use std::ops::{BitOr, BitOrAssign};

/// A set of ignore-file kinds, for
/// [`WatchOptions::ignore_files`](crate::WatchOptions::ignore_files):
/// combine them with `|`. `true` converts to [`GIT`](Self::GIT) and
/// `false` to [`NONE`](Self::NONE), so `.ignore_files(true)` reads as it
/// did.
///
/// ```
/// use specwatch::{IgnoreFiles, WatchSpec};
///
/// // A dev loop building an image from /src/app: git's rules and the
/// // build context's .dockerignore.
/// let spec = WatchSpec::new(["/src/app"]).ignore_files(IgnoreFiles::GIT | IgnoreFiles::DOCKER);
/// assert!(spec.options.ignore_files.contains(IgnoreFiles::DOCKER));
/// assert_eq!(spec.options.ignore_files.to_string(), "git,docker");
/// ```
///
/// With the `serde` feature it is written as a list of names
/// (`["git", "docker"]`); `true`, `false`, and one name alone are read
/// too.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct IgnoreFiles(u8);

impl IgnoreFiles {
    /// No ignore file (the default).
    pub const NONE: IgnoreFiles = IgnoreFiles(0);
    /// Git's rules: `.gitignore` and `.ignore` in any directory,
    /// `.git/info/exclude` at a repository's top, and git's global
    /// excludes file (`core.excludesFile`), with git's semantics.
    pub const GIT: IgnoreFiles = IgnoreFiles(1);
    /// The `.dockerignore` in each root of the spec (the root is the
    /// build context), with Docker's semantics.
    pub const DOCKER: IgnoreFiles = IgnoreFiles(2);
    /// The `.tiltignore` in each root of the spec or in a directory above
    /// it up to its repository's top (where the Tiltfile usually is),
    /// with Docker's semantics, as Tilt reads it.
    pub const TILT: IgnoreFiles = IgnoreFiles(4);

    const NAMES: [(IgnoreFiles, &'static str); 3] = [
        (IgnoreFiles::GIT, "git"),
        (IgnoreFiles::DOCKER, "docker"),
        (IgnoreFiles::TILT, "tilt"),
    ];

    /// Whether every kind of `other` is in this set.
    #[must_use]
    pub const fn contains(self, other: IgnoreFiles) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the set is empty (no ignore file is read).
    #[must_use]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The kinds of both sets.
    #[must_use]
    pub const fn union(self, other: IgnoreFiles) -> IgnoreFiles {
        IgnoreFiles(self.0 | other.0)
    }

    /// The kind named `name` (`git`, `docker`, `tilt`), if it is one.
    #[must_use]
    pub fn named(name: &str) -> Option<IgnoreFiles> {
        Self::NAMES
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(name.trim()))
            .map(|(k, _)| *k)
    }

    /// The names of the kinds in the set, in a fixed order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Self::NAMES
            .into_iter()
            .filter(move |(k, _)| self.contains(*k))
            .map(|(_, n)| n)
    }
}

impl BitOr for IgnoreFiles {
    type Output = IgnoreFiles;
    fn bitor(self, other: IgnoreFiles) -> IgnoreFiles {
        self.union(other)
    }
}

impl BitOrAssign for IgnoreFiles {
    fn bitor_assign(&mut self, other: IgnoreFiles) {
        *self = self.union(other);
    }
}

impl From<bool> for IgnoreFiles {
    /// `true`: [`GIT`](Self::GIT) (what the option meant when it was a
    /// `bool`); `false`: [`NONE`](Self::NONE).
    fn from(on: bool) -> IgnoreFiles {
        if on {
            IgnoreFiles::GIT
        } else {
            IgnoreFiles::NONE
        }
    }
}

impl fmt::Display for IgnoreFiles {
    /// The names joined by `,` (`git,docker`), or `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        f.write_str(&self.names().collect::<Vec<_>>().join(","))
    }
}

impl fmt::Debug for IgnoreFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IgnoreFiles({self})")
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for IgnoreFiles {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.names())
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for IgnoreFiles {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<IgnoreFiles, D::Error> {
        use serde::de::{Error, SeqAccess, Visitor};
        struct Kinds;
        fn one<E: Error>(name: &str) -> Result<IgnoreFiles, E> {
            IgnoreFiles::named(name).ok_or_else(|| {
                E::custom(format!(
                    "unknown ignore files {name:?}: expected git, docker or tilt"
                ))
            })
        }
        impl<'de> Visitor<'de> for Kinds {
            type Value = IgnoreFiles;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of ignore files (git, docker, tilt), or a bool")
            }
            fn visit_bool<E: Error>(self, on: bool) -> Result<IgnoreFiles, E> {
                Ok(on.into())
            }
            fn visit_str<E: Error>(self, name: &str) -> Result<IgnoreFiles, E> {
                one(name)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<IgnoreFiles, A::Error> {
                let mut set = IgnoreFiles::NONE;
                while let Some(name) = seq.next_element::<String>()? {
                    set |= one(&name)?;
                }
                Ok(set)
            }
        }
        d.deserialize_any(Kinds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_combine_and_print() {
        let s = IgnoreFiles::GIT | IgnoreFiles::TILT;
        assert!(s.contains(IgnoreFiles::GIT) && !s.contains(IgnoreFiles::DOCKER));
        assert!(s.contains(IgnoreFiles::NONE));
        assert_eq!(s.to_string(), "git,tilt");
        assert_eq!(IgnoreFiles::NONE.to_string(), "none");
        assert_eq!(IgnoreFiles::from(true), IgnoreFiles::GIT);
        assert!(IgnoreFiles::from(false).is_empty());
        assert_eq!(IgnoreFiles::named(" Docker"), Some(IgnoreFiles::DOCKER));
        assert_eq!(IgnoreFiles::named("svn"), None);
        let mut t = IgnoreFiles::NONE;
        t |= IgnoreFiles::DOCKER;
        assert_eq!(format!("{t:?}"), "IgnoreFiles(docker)");
    }
}
