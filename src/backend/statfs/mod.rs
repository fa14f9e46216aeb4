//! Which file system a path is on, and whether its kernel sees every
//! write: what [`Backend::Auto`](crate::Backend::Auto) polls.
//!
//! On a network or FUSE file system the local kernel reports (inotify,
//! FSEvents, kqueue, ReadDirectoryChangesW) only what this machine did
//! through it: another host writing to the NFS export or the SMB share, or
//! a FUSE daemon's backing store changing under it, makes no event here.
//! Each platform names the file system its own way, so each has a file:
//!
//! | platform | asked | file |
//! |---|---|---|
//! | Linux | `statfs(2)`'s `f_type` (a magic number) | `linux.rs` |
//! | macOS, FreeBSD | `statfs(2)`'s `f_fstypename` (a name) | `bsd.rs` |
//! | Windows | `GetDriveTypeW` of the path's volume (`DRIVE_REMOTE`), and the file system's name from `GetVolumeInformationW` | `windows.rs` |
//!
//! Each file holds a pure classification (the table, unit-tested on every
//! platform) and, for its own OS only, the call that feeds it.

use std::io;
use std::path::Path;

#[cfg(any(target_os = "macos", target_os = "freebsd", test))]
mod bsd;
#[cfg(any(target_os = "linux", test))]
mod linux;
#[cfg(any(windows, test))]
mod windows;

/// A file system as the platform names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileSystem {
    /// Its name, where known: from the table on Linux (`ext4`, `nfs`), as
    /// the OS reports it elsewhere (`apfs`, `smbfs`; `NTFS`).
    pub name: Option<String>,
    /// Linux's `statfs` `f_type`; `None` where the platform names file
    /// systems by name only.
    pub magic: Option<u64>,
    /// Whether the kernel here may miss writes (made elsewhere): poll it.
    pub remote: bool,
}

/// The file system `path` is on (following symlinks).
pub(crate) fn file_system(path: &Path) -> io::Result<FileSystem> {
    #[cfg(target_os = "linux")]
    return linux::file_system(path);
    #[cfg(any(target_os = "macos", target_os = "freebsd"))]
    return bsd::file_system(path);
    #[cfg(windows)]
    return windows::file_system(path);
    #[cfg(not(any(
        target_os = "linux",
        target_os = "macos",
        target_os = "freebsd",
        windows
    )))]
    {
        let _ = path;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "file system detection exists on Linux, macOS, FreeBSD and Windows only",
        ))
    }
}

/// `statfs(2)` of `path` (Linux, macOS, FreeBSD: each reads its own
/// fields of the answer).
#[cfg(any(target_os = "linux", target_os = "macos", target_os = "freebsd"))]
fn statfs(path: &Path) -> io::Result<libc::statfs> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"))?;
    // SAFETY: `c` is a valid C string; `buf` is written by statfs only.
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut buf) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On every platform the detection answers for a temporary directory
    /// (local) and fails for a missing path (nothing to ask about).
    #[cfg(any(
        target_os = "linux",
        target_os = "macos",
        target_os = "freebsd",
        windows
    ))]
    #[test]
    fn a_temporary_directory_is_local_and_a_missing_path_an_error() {
        let d = tempfile::tempdir().unwrap();
        let fs = file_system(d.path()).unwrap();
        assert!(!fs.remote, "{fs:?}");
        assert!(fs.name.is_some() || fs.magic.is_some(), "{fs:?}");
        assert!(file_system(&d.path().join("missing")).is_err());
    }
}
