//! Reading the disk: directory listings, entry types, stat signatures,
//! directory identities. The engine's only door to the file system's
//! contents (the backends only say *where* to look).
//!
//! Sync cookies (`.specwatch-cookie-*`) are recognised here, so no listing
//! ever hands one to the index.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::change::FileType;

/// What tells two directories apart: device and inode.
#[cfg(unix)]
pub(crate) type DirIdent = (u64, u64);
/// What tells two directories apart: the canonical path.
#[cfg(not(unix))]
pub(crate) type DirIdent = PathBuf;

/// The identity of the directory at `path`, following symlinks.
pub(crate) fn dir_ident(path: &Path) -> Option<DirIdent> {
    let m = std::fs::metadata(path).ok()?;
    if !m.is_dir() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        std::fs::canonicalize(path).ok()
    }
}

/// Where the symlink at `path` leads, if it is to be followed: a directory
/// that is neither the link's own directory nor one of its ancestors (as
/// resolved now), which would make a loop. `None` for a link to anything
/// else, a dangling link, a chain of links that loops on itself (`ELOOP`),
/// and a loop.
///
/// Every directory on the way down from a root through followed links is
/// an ancestor of the next link's path, so along any such path each
/// directory is entered at most once: the walk ends.
pub(crate) fn link_target(path: &Path) -> Option<DirIdent> {
    let target = dir_ident(path)?;
    if path
        .ancestors()
        .skip(1)
        .any(|a| dir_ident(a).as_ref() == Some(&target))
    {
        return None;
    }
    Some(target)
}

/// Our type for a `std` file type.
pub(crate) fn file_type_of(ft: std::fs::FileType) -> FileType {
    if ft.is_dir() {
        FileType::Dir
    } else if ft.is_file() {
        FileType::File
    } else if ft.is_symlink() {
        FileType::Symlink
    } else {
        FileType::Other
    }
}

/// Whether an error means "no directory is there (any more)".
pub(crate) fn gone(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// The type of `path` without following a final symlink; `None` if absent.
pub(crate) fn lstat_type(path: &Path) -> io::Result<Option<FileType>> {
    match std::fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(file_type_of(m.file_type()))),
        Err(e) if gone(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads a directory's entries (types from `d_type` where the file system
/// gives them). Sync cookies are left out and their paths put in `cookies`.
///
/// Linux: `open` and `getdents64` straight into a stack buffer, one
/// allocation per entry (its name); `std::fs::read_dir` costs an `fstat`
/// and a heap buffer per directory and three allocations per entry, which
/// showed in start-up profiles.
#[cfg(target_os = "linux")]
pub(crate) fn read_listing(
    dir: &Path,
    cookies: &mut Vec<PathBuf>,
) -> io::Result<Vec<(OsString, FileType)>> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;

    #[repr(C, align(8))]
    struct Buf([u8; 16 * 1024]);

    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let raw = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` was just opened here and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut buf = Buf([0; 16 * 1024]);
    let mut out = Vec::new();
    loop {
        // SAFETY: the buffer is valid for writes of its length, and the
        // kernel writes at most that many bytes.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                fd.as_raw_fd(),
                buf.0.as_mut_ptr(),
                buf.0.len(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            break;
        }
        let filled = &buf.0[..n as usize];
        let mut off = 0;
        // struct linux_dirent64: d_ino u64, d_off i64, d_reclen u16,
        // d_type u8, then the NUL-terminated name.
        while off < filled.len() {
            let rec = &filled[off..];
            if rec.len() < 20 {
                return Err(io::Error::other("truncated getdents64 record"));
            }
            let reclen = u16::from_ne_bytes([rec[16], rec[17]]) as usize;
            if reclen < 20 || reclen > rec.len() {
                return Err(io::Error::other("malformed getdents64 record"));
            }
            off += reclen;
            let d_type = rec[18];
            let name = &rec[19..reclen];
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            if name == b"." || name == b".." {
                continue;
            }
            let name = OsStr::from_bytes(name);
            if is_cookie(name) {
                cookies.push(dir.join(name));
                continue;
            }
            let ft = match d_type {
                libc::DT_DIR => FileType::Dir,
                libc::DT_REG => FileType::File,
                libc::DT_LNK => FileType::Symlink,
                libc::DT_UNKNOWN => match lstat_type(&dir.join(name)) {
                    Ok(Some(t)) => t,
                    _ => continue,
                },
                _ => FileType::Other,
            };
            out.push((name.to_os_string(), ft));
        }
    }
    Ok(out)
}

/// Reads a directory's entries (types from `d_type` where the file system
/// gives them). Sync cookies are left out and their paths put in `cookies`.
#[cfg(not(target_os = "linux"))]
pub(crate) fn read_listing(
    dir: &Path,
    cookies: &mut Vec<PathBuf>,
) -> io::Result<Vec<(OsString, FileType)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = match entry {
            Ok(e) => e,
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(e),
        };
        if is_cookie(&entry.file_name()) {
            cookies.push(entry.path());
            continue;
        }
        let ft = match entry.file_type() {
            Ok(t) => file_type_of(t),
            Err(_) => match lstat_type(&entry.path()) {
                Ok(Some(t)) => t,
                _ => continue,
            },
        };
        out.push((entry.file_name(), ft));
    }
    Ok(out)
}

/// Name prefix of sync cookies. Entries with it are never indexed or
/// reported.
pub(crate) const COOKIE_PREFIX: &str = ".specwatch-cookie-";

/// Whether `name` is a sync cookie's.
pub(crate) fn is_cookie(name: &OsStr) -> bool {
    name.as_encoded_bytes()
        .starts_with(COOKIE_PREFIX.as_bytes())
}

/// Whether the inode at `path` changed (content or metadata) at or after
/// `since`, by its ctime, which user code cannot set back.
pub(crate) fn changed_since(path: &Path, since: SystemTime) -> bool {
    match std::fs::symlink_metadata(path) {
        Ok(m) => ctime_of(&m) >= since,
        Err(_) => false,
    }
}

#[cfg(unix)]
fn ctime_of(m: &std::fs::Metadata) -> SystemTime {
    use std::os::unix::fs::MetadataExt;
    let secs = m.ctime();
    let nanos = m.ctime_nsec().clamp(0, 999_999_999) as u32;
    if secs >= 0 {
        SystemTime::UNIX_EPOCH + Duration::new(secs as u64, nanos)
    } else {
        SystemTime::UNIX_EPOCH
    }
}

#[cfg(not(unix))]
fn ctime_of(m: &std::fs::Metadata) -> SystemTime {
    m.modified().unwrap_or(SystemTime::UNIX_EPOCH)
}

/// What a poll compares to tell that an entry changed without an OS event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sig {
    pub size: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
    pub ino: u64,
}

/// The stat signature of an entry (polled directories only).
pub(crate) fn sig_of(path: &Path) -> Option<Sig> {
    let m = std::fs::symlink_metadata(path).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some(Sig {
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            ino: m.ino(),
        })
    }
    #[cfg(not(unix))]
    {
        let t = m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .unwrap_or_default();
        Some(Sig {
            size: m.len(),
            mtime: (t.as_secs() as i64, t.subsec_nanos() as i64),
            ctime: (0, 0),
            ino: 0,
        })
    }
}

/// Whether `path` is a directory, following symlinks.
pub(crate) fn is_dir_following(path: &Path) -> bool {
    std::fs::metadata(path).map(|m| m.is_dir()).unwrap_or(false)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    /// The raw `getdents64` reader sees exactly what `std::fs::read_dir`
    /// sees, across many buffer refills, with 255-byte and non-UTF-8 names,
    /// and leaves sync cookies out.
    #[test]
    fn read_listing_equals_std_read_dir() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        for i in 0..3000 {
            std::fs::write(root.join(format!("file-{i:05}")), "x").unwrap();
        }
        for i in 0..40 {
            let mut name = vec![b'n'; 250];
            name.extend_from_slice(format!("{i:05}").as_bytes());
            std::fs::create_dir(root.join(OsStr::from_bytes(&name))).unwrap();
        }
        std::fs::write(root.join(OsStr::from_bytes(b"odd\xff\xfe")), "x").unwrap();
        std::os::unix::fs::symlink("nowhere", root.join("link")).unwrap();
        std::fs::write(root.join(format!("{COOKIE_PREFIX}1")), "c").unwrap();
        let mut cookies = Vec::new();
        let mut got = read_listing(root, &mut cookies).unwrap();
        got.sort();
        let mut want: Vec<(OsString, FileType)> = std::fs::read_dir(root)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.file_name(), file_type_of(e.file_type().unwrap()))
            })
            .filter(|(n, _)| !is_cookie(n))
            .collect();
        want.sort();
        assert_eq!(got.len(), 3000 + 40 + 2);
        assert_eq!(got, want);
        assert_eq!(cookies, vec![root.join(format!("{COOKIE_PREFIX}1"))]);
        // Errors keep their kinds: the engine tells "gone" from the rest.
        let e = read_listing(&root.join("missing"), &mut cookies).unwrap_err();
        assert!(gone(&e), "{e:?}");
        let e = read_listing(&root.join("file-00001"), &mut cookies).unwrap_err();
        assert!(gone(&e), "{e:?}");
    }
}
