//! Windows: `GetDriveTypeW` of the path's volume says whether it is a
//! network drive (`DRIVE_REMOTE`: an SMB share, mapped or by UNC path, a
//! WebDAV or NFS client's drive, WSL's `\\wsl$`, a virtual machine's shared
//! folder); ReadDirectoryChangesW on such a drive reports what the server
//! chooses to, and never another client's writes for NFS or WebDAV. Its
//! file system's name comes from `GetVolumeInformationW` (`NTFS`, `ReFS`,
//! `FAT32`; for a share, what the server says). Drive types:
//! <https://learn.microsoft.com/windows/win32/api/fileapi/nf-fileapi-getdrivetypew>.

use super::FileSystem;

/// `GetDriveTypeW`'s answers (`winbase.h`).
const DRIVE_UNKNOWN: u32 = 0;
const DRIVE_NO_ROOT_DIR: u32 = 1;
const DRIVE_REMOTE: u32 = 4;

/// What a drive of type `drive` with file system `name` is, or why that
/// is no answer. A FUSE file system (WinFsp's FUSE layer names its
/// volumes `FUSE-...`) is polled like a network drive whatever its type.
pub(crate) fn classify(drive: u32, name: Option<&str>) -> Result<FileSystem, String> {
    match drive {
        DRIVE_UNKNOWN => return Err("GetDriveTypeW: the drive type is unknown".into()),
        DRIVE_NO_ROOT_DIR => return Err("GetDriveTypeW: no such volume".into()),
        _ => {}
    }
    let fuse = name.is_some_and(|n| n.to_ascii_uppercase().starts_with("FUSE"));
    let remote = drive == DRIVE_REMOTE;
    let name = match (name, remote) {
        (Some(n), true) => Some(format!("{n} on a network drive")),
        (None, true) => Some("network drive".to_owned()),
        (n, false) => n.map(str::to_owned),
    };
    Ok(FileSystem {
        name,
        magic: None,
        remote: remote || fuse,
    })
}

/// The file system `path` is on.
#[cfg(windows)]
pub(super) fn file_system(path: &std::path::Path) -> std::io::Result<FileSystem> {
    use std::io;
    use std::os::windows::ffi::OsStrExt;
    use windows_sys::Win32::Storage::FileSystem::{
        GetDriveTypeW, GetVolumeInformationW, GetVolumePathNameW,
    };
    // The volume's root (`C:\`, `\\server\share\`) of where the path
    // leads (a link into a share is on the share): the path must exist.
    let real = std::fs::canonicalize(path)?;
    let wide: Vec<u16> = real.as_os_str().encode_wide().chain([0]).collect();
    let mut root = [0u16; 1024];
    // SAFETY: `wide` is NUL-terminated; `root` is written up to its length.
    if unsafe { GetVolumePathNameW(wide.as_ptr(), root.as_mut_ptr(), root.len() as u32) } == 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `root` is a NUL-terminated string written by the call above.
    let drive = unsafe { GetDriveTypeW(root.as_ptr()) };
    let mut fs_name = [0u16; 261];
    // SAFETY: the buffers are sized as passed; the null pointers are the
    // optional outputs not asked for.
    let named = unsafe {
        GetVolumeInformationW(
            root.as_ptr(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            fs_name.as_mut_ptr(),
            fs_name.len() as u32,
        )
    } != 0;
    let name = named.then(|| {
        let end = fs_name
            .iter()
            .position(|&c| c == 0)
            .unwrap_or(fs_name.len());
        String::from_utf16_lossy(&fs_name[..end])
    });
    classify(drive, name.as_deref().filter(|n| !n.is_empty())).map_err(io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRIVE_FIXED: u32 = 3;

    #[test]
    fn network_drives_and_fuse_volumes_are_polled() {
        let share = classify(DRIVE_REMOTE, Some("NTFS")).unwrap();
        assert!(share.remote);
        assert_eq!(share.name.as_deref(), Some("NTFS on a network drive"));
        let unnamed = classify(DRIVE_REMOTE, None).unwrap();
        assert_eq!(
            (unnamed.name.as_deref(), unnamed.remote),
            (Some("network drive"), true)
        );
        let fuse = classify(DRIVE_FIXED, Some("FUSE-SSHFS")).unwrap();
        assert_eq!(
            (fuse.name.as_deref(), fuse.remote),
            (Some("FUSE-SSHFS"), true)
        );
    }

    #[test]
    fn local_drives_are_watched_and_unknown_ones_are_no_answer() {
        let ntfs = classify(DRIVE_FIXED, Some("NTFS")).unwrap();
        assert_eq!(
            (ntfs.name.as_deref(), ntfs.remote, ntfs.magic),
            (Some("NTFS"), false, None)
        );
        assert!(classify(DRIVE_UNKNOWN, Some("NTFS")).is_err());
        assert!(classify(DRIVE_NO_ROOT_DIR, None).is_err());
    }
}
