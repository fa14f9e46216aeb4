//! macOS and FreeBSD: `statfs(2)`'s `f_fstypename` names the file system
//! (`apfs`, `nfs`, `smbfs`, `fusefs.sshfs`); the table below lists those
//! whose changes may not come as events here (FSEvents and kqueue see
//! only what this machine does through them).
//!
//! Names: the `mount_*` helpers of each system (macOS `mount_nfs`,
//! `mount_smbfs`, `mount_afp`, `mount_webdav`, `mount_ftp`; FreeBSD
//! `mount_nfs(8)`, `mount_smbfs(8)`, `mount_fusefs(8)`, whose file systems
//! report `fusefs` or `fusefs.SUBTYPE`, and `p9fs(4)`), and macFUSE's
//! `macfuse` (`osxfuse` before version 4).

use super::FileSystem;

/// Names whose changes may not come as events here: shared ones (another
/// host writes) and pseudo ones (the kernel writes).
const REMOTE: &[&str] = &[
    "nfs",
    "smbfs",
    "afpfs",
    "webdav",
    "ftp",
    "cifs",
    "afs",
    "p9fs",
    "vboxsf",
    "procfs",
    "linprocfs",
    "linsysfs",
];

/// Prefixes of FUSE file systems' names: macFUSE (`macfuse`, `osxfuse`),
/// FUSE-T, FreeBSD's `fusefs` and `fusefs.SUBTYPE`.
const FUSE: &[&str] = &["fuse", "macfuse", "osxfuse"];

/// What the table says of the file system named `name`.
pub(crate) fn classify(name: &str) -> FileSystem {
    let remote = REMOTE.contains(&name) || FUSE.iter().any(|p| name.starts_with(p));
    FileSystem {
        name: Some(name.to_owned()),
        magic: None,
        remote,
    }
}

/// The file system `path` is on (following symlinks).
#[cfg(any(target_os = "macos", target_os = "freebsd"))]
pub(super) fn file_system(path: &std::path::Path) -> std::io::Result<FileSystem> {
    let buf = super::statfs(path)?;
    // A NUL-terminated name in a fixed array (MFSTYPENAMELEN, MFSNAMELEN).
    let bytes: Vec<u8> = buf
        .f_fstypename
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    Ok(classify(&String::from_utf8_lossy(&bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_names_remote_and_local_file_systems() {
        for remote in [
            "nfs",
            "smbfs",
            "afpfs",
            "webdav",
            "macfuse",
            "osxfuse",
            "fusefs",
            "fusefs.sshfs",
            "p9fs",
            "procfs",
        ] {
            let f = classify(remote);
            assert!(f.remote, "{remote} is polled: {f:?}");
            assert_eq!(f.name.as_deref(), Some(remote));
            assert_eq!(f.magic, None);
        }
        for local in [
            "apfs", "hfs", "ufs", "zfs", "msdos", "exfat", "tmpfs", "devfs",
        ] {
            assert!(!classify(local).remote, "{local} is watched");
        }
    }
}
