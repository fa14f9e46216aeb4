//! Linux: `statfs(2)`'s `f_type` names the file system by a magic
//! number; the table below lists those whose changes may not come as
//! events here.
//!
//! Magic numbers: Linux `include/uapi/linux/magic.h`
//! (<https://github.com/torvalds/linux/blob/master/include/uapi/linux/magic.h>)
//! and the `statfs(2)` manual page
//! (<https://man7.org/linux/man-pages/man2/statfs.2.html>); those not in
//! either are from the file system's own source, cited on the line.

use super::FileSystem;

/// File systems whose changes may not come as events here, by magic:
/// shared ones (another host writes) and pseudo ones (the kernel writes).
const REMOTE: &[(u64, &str)] = &[
    (0x6969, "nfs"),
    (0x517B, "smb"),
    (0xFF53_4D42, "cifs"),
    (0xFE53_4D42, "smb2"),
    // FUSE: sshfs, s3fs, gcsfuse, rclone, bindfs, virtiofs, GlusterFS's
    // client, Docker Desktop's shares, vmhgfs-fuse.
    (0x6573_5546, "fuse"),
    (0x0102_1997, "9p"),
    (0x00C3_6400, "ceph"),
    (0x5346_414F, "afs"),
    (0x6B41_4653, "kafs"),
    (0x7375_7245, "coda"),
    (0x564C, "ncp"),
    // Lustre: lustre/include/uapi/linux/lustre/lustre_user.h LL_SUPER_MAGIC.
    (0x0BD0_0BD0, "lustre"),
    // IBM Storage Scale (GPFS): its statfs reports "GPFS" in ASCII.
    (0x4750_4653, "gpfs"),
    // Shared-disk cluster file systems: other nodes' writes make no event.
    (0x7461_636F, "ocfs2"),
    (0x0116_1970, "gfs2"),
    (0x2003_0528, "orangefs"),
    // BeeGFS: client_module/source/filesystem/FhgfsOpsSuper.h BEEGFS_MAGIC.
    (0x1983_0326, "beegfs"),
    // VirtualBox shared folders (vboxsf) and Parallels (prl_fs).
    (0x786F_4256, "vboxsf"),
    (0x7C7C_6673, "prl_fs"),
    // Pseudo file systems: their contents change without any event.
    (0x9FA0, "proc"),
    (0x6265_6572, "sysfs"),
    (0x0027_E0EB, "cgroup"),
    (0x6367_7270, "cgroup2"),
    (0x6462_6720, "debugfs"),
    (0x7472_6163, "tracefs"),
];

/// Local file systems named in status (the rest show their magic only).
const LOCAL: &[(u64, &str)] = &[
    (0xEF53, "ext4"),
    (0x5846_5342, "xfs"),
    (0x9123_683E, "btrfs"),
    (0x0102_1994, "tmpfs"),
    (0x794C_7630, "overlayfs"),
    (0x2FC1_2FC1, "zfs"),
    (0xF2F5_2010, "f2fs"),
    (0x4D44, "vfat"),
    (0x5346_544E, "ntfs"),
    (0x2011_BAB0, "exfat"),
];

/// What the table says of magic `magic`.
pub(crate) fn classify(magic: u64) -> FileSystem {
    if let Some((_, name)) = REMOTE.iter().find(|(m, _)| *m == magic) {
        return FileSystem {
            name: Some((*name).to_owned()),
            magic: Some(magic),
            remote: true,
        };
    }
    FileSystem {
        name: LOCAL
            .iter()
            .find(|(m, _)| *m == magic)
            .map(|(_, n)| (*n).to_owned()),
        magic: Some(magic),
        remote: false,
    }
}

/// The file system `path` is on (following symlinks).
#[cfg(target_os = "linux")]
pub(super) fn file_system(path: &std::path::Path) -> std::io::Result<FileSystem> {
    let buf = super::statfs(path)?;
    // `f_type` is signed on some targets: the magic is its bit pattern.
    #[allow(
        clippy::unnecessary_cast,
        reason = "f_type is i64 on some targets, u32 or i32 on others"
    )]
    Ok(classify(buf.f_type as u32 as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_names_remote_and_local_file_systems() {
        let named = |magic| {
            let f = classify(magic);
            assert_eq!(f.magic, Some(magic));
            (f.name, f.remote)
        };
        assert_eq!(named(0x6573_5546), (Some("fuse".into()), true));
        assert_eq!(named(0x6969), (Some("nfs".into()), true));
        assert!(classify(0xFF53_4D42).remote, "cifs");
        assert_eq!(named(0x9FA0), (Some("proc".into()), true), "no events");
        assert_eq!(named(0xEF53), (Some("ext4".into()), false));
        assert_eq!(named(0x1234_5678), (None, false));
    }

    #[test]
    fn no_magic_is_listed_twice() {
        let mut all: Vec<u64> = REMOTE.iter().chain(LOCAL).map(|(m, _)| *m).collect();
        all.sort_unstable();
        let n = all.len();
        all.dedup();
        assert_eq!(all.len(), n);
    }
}
