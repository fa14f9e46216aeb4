//! The choice of backend: how a watch learns of changes ([`Backend`]),
//! named in text (`FromStr`, `Display`) and in configuration files (serde).

use std::time::Duration;

use crate::spec::duration::{BadDuration, parse_duration};

/// How a watch learns of changes: from the OS's events, or by looking.
///
/// A manager runs one event backend (its
/// [`ManagerBuilder::backend`](crate::ManagerBuilder::backend): `Native` or
/// `Portable`, or `Poll` for a manager that polls everything); each spec
/// may choose for itself with [`WatchOptions::backend`](crate::WatchOptions::backend) (the manager's
/// choice is the default for specs that do not say). A spec that chooses
/// `Poll` is polled at its own interval whatever the manager runs; one
/// that names the event backend the manager does not run is refused
/// ([`Error::BackendUnavailable`](crate::Error::BackendUnavailable)).
/// [`WatchStatus::roots`](crate::WatchStatus::roots) says what each root
/// got and why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// The manager's event backend (`Native` on Linux, `Portable`
    /// elsewhere), except for roots on a file system whose kernel does not
    /// see other machines' writes: NFS, SMB/CIFS, FUSE (sshfs, s3fs,
    /// gcsfuse, rclone, virtiofs, Docker Desktop shares), 9p, Ceph, AFS,
    /// Lustre, GPFS, OCFS2, GFS2 and the like, found with `statfs` when
    /// the root is attached (`statfs` on Linux, macOS and FreeBSD; on
    /// Windows, network drives and FUSE volumes). Those are polled every
    /// [`ManagerBuilder::poll_interval`](crate::ManagerBuilder::poll_interval).
    /// A root is judged by its own file system: a different mount further
    /// below it is not detected.
    #[default]
    Auto,
    /// Linux only: inotify driven directly, one watch per directory,
    /// pruned and shared across specs.
    Native,
    /// `notify`'s recommended watcher (inotify, FSEvents,
    /// ReadDirectoryChangesW, kqueue), one recursive watch per root. Ignored
    /// directories below a root are still watched by the OS (not pruned),
    /// though their events are dropped.
    Portable,
    /// No OS events: every watched directory is read, and its entries
    /// `stat`ed, once per `interval` (and at once for a
    /// [`Manager::sync`](crate::Manager::sync)); what changed since the
    /// previous look is reported exactly as the OS backends report it.
    /// For file systems where the kernel does not see other machines'
    /// writes (NFS, SMB, FUSE mounts such as sshfs or s3fs). Pruned by
    /// ignore rules like native watching; holds no OS watch. A change is
    /// seen up to `interval` late, and one undone within an interval (a
    /// file created and removed) is not seen at all.
    Poll {
        /// Time between two polls: the next is due this long after the
        /// previous one began (a directory whose look is still under way
        /// then, on a slow or hung file system, waits for the one after).
        interval: std::time::Duration,
    },
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Backend::Auto => f.write_str("auto"),
            Backend::Native => f.write_str("native"),
            Backend::Portable => f.write_str("portable"),
            Backend::Poll { interval } => write!(f, "poll every {interval:?}"),
        }
    }
}

/// A [`Backend`] named in text (a flag, a config file) was not one: an
/// unknown name, or a poll interval that is not a duration (or is longer
/// than a `Duration` holds). Its message quotes the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseBackendError {
    input: String,
    /// Set when the name was `poll:` and the interval was the trouble.
    interval: Option<BadDuration>,
}

impl std::fmt::Display for ParseBackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let input = &self.input;
        match self.interval {
            Some(BadDuration::TooLong) => write!(
                f,
                "backend {input:?}: the poll interval is too long (at most 2^64 seconds)"
            ),
            Some(BadDuration::Malformed) | None => write!(
                f,
                "unknown backend {input:?}: expected auto, native, portable, poll or poll:INTERVAL (such as poll:250ms)"
            ),
        }
    }
}

impl std::error::Error for ParseBackendError {}

impl std::str::FromStr for Backend {
    type Err = ParseBackendError;

    /// `auto`, `native`, `portable`, `poll` (every second) or
    /// `poll:INTERVAL` with a unit (`poll:250ms`, `poll:2s`); what
    /// [`Display`](std::fmt::Display) writes (`poll every 2s`) is read
    /// back too.
    ///
    /// ```
    /// use specwatch::Backend;
    /// use std::time::Duration;
    ///
    /// assert_eq!("native".parse(), Ok(Backend::Native));
    /// let b: Backend = "poll:250ms".parse().unwrap();
    /// assert_eq!(b, Backend::Poll { interval: Duration::from_millis(250) });
    /// assert_eq!(b.to_string().parse(), Ok(b));
    /// assert!("carrier-pigeon".parse::<Backend>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Backend, ParseBackendError> {
        let err = || ParseBackendError {
            input: s.to_owned(),
            interval: None,
        };
        let t = s.trim();
        match t {
            "auto" => return Ok(Backend::Auto),
            "native" => return Ok(Backend::Native),
            "portable" => return Ok(Backend::Portable),
            "poll" => {
                return Ok(Backend::Poll {
                    interval: Duration::from_secs(1),
                });
            }
            _ => {}
        }
        let interval = t
            .strip_prefix("poll:")
            .or_else(|| t.strip_prefix("poll every "))
            .ok_or_else(err)?;
        let interval = parse_duration(interval.trim()).map_err(|why| ParseBackendError {
            input: s.to_owned(),
            interval: Some(why),
        })?;
        Ok(Backend::Poll { interval })
    }
}

#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl serde::Serialize for Backend {
    /// `"auto"`, `"native"`, `"portable"` or `"poll:250ms"`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Backend::Poll { interval } => s.serialize_str(&format!("poll:{interval:?}")),
            other => s.serialize_str(&other.to_string()),
        }
    }
}

#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl<'de> serde::Deserialize<'de> for Backend {
    /// What [`FromStr`](std::str::FromStr) reads.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Backend, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Reads `WatchOptions::backend`, naming the field in errors.
#[cfg(feature = "serde")]
pub(crate) fn backend_field<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Backend>, D::Error> {
    use serde::Deserialize;
    Option::<Backend>::deserialize(d).map_err(|e| serde::de::Error::custom(format!("backend: {e}")))
}
