//! Paths inside the storage directory: plain names only, no symbolic link
//! on the way, and files written whole.
//!
//! Every read and write of the server goes through here. A path is built
//! from plain names ([`safe_name`]) below the root; each directory on the
//! way must be a real directory (a symbolic link is refused, also one that
//! stays inside the root); the path is canonicalized and compared before
//! use; files are opened without following a final link (and without
//! waiting on a FIFO), and on Linux what was opened is checked through
//! `/proc/self/fd`. New files are created exclusively and fsynced
//! ([`create_new`], [`fill`]), and their directory synced ([`sync_dir`]).
//! A file's [`Stamp`] tells one version of its content from another
//! without reading it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Temporary upload files: ignored by the watch, never indexed.
pub const UPLOAD_PREFIX: &str = ".upload-";

/// Whether `s` may be a path segment, a chart name or a version: letters,
/// digits, `.`, `_`, `-`, `+`; not empty, no leading `.`, no `..`.
pub fn safe_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 200
        && !s.starts_with('.')
        && !s.contains("..")
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'+'))
}

/// Why a path in the storage directory cannot be used.
#[derive(Debug)]
pub enum FsError {
    /// Not there.
    Missing,
    /// There, but not to be touched (a symbolic link, not a directory, a
    /// path that resolves elsewhere).
    Refused(String),
    /// Any other error of the file system.
    Io(io::Error),
}

impl std::fmt::Display for FsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FsError::Missing => f.write_str("no such file or directory"),
            FsError::Refused(why) => f.write_str(why),
            FsError::Io(e) => write!(f, "{e}"),
        }
    }
}

/// The directory `root/names...`, each name a real directory (no symbolic
/// link, even one that stays inside), created when `create` says so; its
/// canonical path must be exactly the path built.
pub fn resolve_dir(root: &Path, names: &[&str], create: bool) -> Result<PathBuf, FsError> {
    let mut p = root.to_path_buf();
    for name in names {
        if !safe_name(name) {
            return Err(FsError::Refused(format!("{name:?} is not a plain name")));
        }
        p.push(name);
        let mut tries = 0;
        loop {
            tries += 1;
            match fs::symlink_metadata(&p) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(FsError::Refused(format!(
                        "{} is a symbolic link",
                        rel(root, &p)
                    )));
                }
                Ok(m) if m.is_dir() => break,
                Ok(_) => {
                    return Err(FsError::Refused(format!(
                        "{} is not a directory",
                        rel(root, &p)
                    )));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound && create && tries < 4 => {
                    match fs::create_dir(&p) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                        Err(e) => return Err(FsError::Io(e)),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(FsError::Missing),
                Err(e) => return Err(FsError::Io(e)),
            }
        }
    }
    check_canonical(root, &p)?;
    Ok(p)
}

/// `p` (under `root`) must resolve to itself: no link on the way.
fn check_canonical(root: &Path, p: &Path) -> Result<(), FsError> {
    match p.canonicalize() {
        Ok(c) if c == p && c.starts_with(root) => Ok(()),
        Ok(_) => Err(FsError::Refused(format!(
            "{} resolves to another place",
            rel(root, p)
        ))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(FsError::Missing),
        Err(e) => Err(FsError::Io(e)),
    }
}

/// `p` relative to `root`, for messages: `/org/team`, `/` for the root.
pub fn rel(root: &Path, p: &Path) -> String {
    let r = p.strip_prefix(root).unwrap_or(p);
    if r.as_os_str().is_empty() {
        "/".into()
    } else {
        format!("/{}", r.display())
    }
}

/// Flags that make `open` refuse a final symbolic link (and not wait on a
/// FIFO put in a package's place).
fn no_follow(o: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    o
}

/// After opening: the file really is `expected` (Linux: what
/// `/proc/self/fd` says), so no link swapped in on the way since the checks.
fn check_opened(f: &File, expected: &Path) -> Result<(), FsError> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // Without /proc mounted there is nothing to compare.
        let real = fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd()));
        if let Ok(real) = real
            && real != expected
        {
            return Err(FsError::Refused(format!(
                "{} was opened as {}",
                expected.display(),
                real.display()
            )));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (f, expected);
    Ok(())
}

/// Opens the regular file `root/tenant.../file` for reading.
pub fn open_in_storage(
    root: &Path,
    tenant: &[&str],
    file: &str,
) -> Result<(File, fs::Metadata), FsError> {
    if !safe_name(file) {
        return Err(FsError::Refused(format!("{file:?} is not a plain name")));
    }
    let dir = resolve_dir(root, tenant, false)?;
    let path = dir.join(file);
    match fs::symlink_metadata(&path) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(FsError::Refused(format!(
                "{} is a symbolic link",
                rel(root, &path)
            )));
        }
        Ok(m) if !m.is_file() => {
            return Err(FsError::Refused(format!(
                "{} is not a regular file",
                rel(root, &path)
            )));
        }
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(FsError::Missing),
        Err(e) => return Err(FsError::Io(e)),
    }
    let f = no_follow(OpenOptions::new().read(true))
        .open(&path)
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => FsError::Missing,
            _ => FsError::Io(e),
        })?;
    check_opened(&f, &path)?;
    let meta = f.metadata().map_err(FsError::Io)?;
    if !meta.is_file() {
        return Err(FsError::Refused(format!(
            "{} is not a regular file",
            rel(root, &path)
        )));
    }
    Ok((f, meta))
}

/// Makes a directory's entries durable (after a link, rename or unlink).
pub fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Creates `path`, which must not exist, for writing (and reading back).
pub fn create_new(path: &Path) -> io::Result<File> {
    let f = no_follow(OpenOptions::new().read(true).write(true).create_new(true)).open(path)?;
    match check_opened(&f, path) {
        Ok(()) => Ok(f),
        Err(e) => {
            let _ = fs::remove_file(path);
            Err(io::Error::other(e.to_string()))
        }
    }
}

/// Writes `bytes` and makes them durable.
pub fn fill(mut f: File, bytes: &[u8]) -> io::Result<()> {
    f.write_all(bytes)?;
    f.sync_all()
}

/// A point in time as seconds since the Unix epoch (negative before it)
/// and nanoseconds: `[secs, nanos]` in JSON.
pub type Time = (i64, u32);

/// `t` as a [`Time`].
pub fn to_time(t: SystemTime) -> Time {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            d.subsec_nanos(),
        ),
        Err(e) => {
            // Before the epoch: whole seconds down, nanoseconds up.
            let d = e.duration();
            let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            match d.subsec_nanos() {
                0 => (-secs, 0),
                n => (-secs - 1, 1_000_000_000 - n),
            }
        }
    }
}

/// `t` as a [`SystemTime`] (the epoch when it cannot be one).
pub fn from_time((secs, nanos): Time) -> SystemTime {
    let t = if secs >= 0 {
        UNIX_EPOCH.checked_add(Duration::new(secs.unsigned_abs(), nanos))
    } else {
        UNIX_EPOCH
            .checked_sub(Duration::from_secs(secs.unsigned_abs()))
            .and_then(|t| t.checked_add(Duration::from_nanos(u64::from(nanos))))
    };
    t.unwrap_or(UNIX_EPOCH)
}

/// What tells one version of a file's content from another without
/// reading it: size, modification time, and on Unix its inode and status
/// change time (ctime, which every write, rename, link and chmod sets to
/// the clock and which no user can set back), all to the nanosecond, as
/// `stat` gives them. Elsewhere what the standard library offers: on
/// Windows `ctime` is the creation time and there is no inode, so a
/// rewrite in place that keeps the size and puts the modification time
/// back goes unnoticed there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub size: u64,
    pub mtime: Time,
    pub ctime: Option<Time>,
    pub ino: Option<u64>,
}

impl Stamp {
    pub fn of(m: &fs::Metadata) -> Stamp {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let nanos = |n: i64| u32::try_from(n).unwrap_or(0);
            Stamp {
                size: m.len(),
                mtime: (m.mtime(), nanos(m.mtime_nsec())),
                ctime: Some((m.ctime(), nanos(m.ctime_nsec()))),
                ino: Some(m.ino()),
            }
        }
        #[cfg(not(unix))]
        Stamp {
            size: m.len(),
            mtime: m.modified().map(to_time).unwrap_or((0, 0)),
            ctime: m.created().ok().map(to_time),
            ino: None,
        }
    }

    /// The latest of its times: a change made later than this (by more
    /// than the file system's timestamp granularity) gives another stamp.
    pub fn newest(&self) -> Time {
        self.ctime.map_or(self.mtime, |c| c.max(self.mtime))
    }
}

/// The stamp of the regular file `root/tenant.../file`, found as
/// [`open_in_storage`] would find it (no link on the way, none at the
/// end), without opening it; `dir` is the tenant's directory as
/// [`resolve_dir`] gave it.
pub fn stamp_in(dir: &Path, file: &str) -> Option<Stamp> {
    if !safe_name(file) {
        return None;
    }
    fs::symlink_metadata(dir.join(file))
        .ok()
        .filter(fs::Metadata::is_file)
        .map(|m| Stamp::of(&m))
}
