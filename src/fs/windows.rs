//! Windows: what `lstat` gives on Unix, from the file's own handle.
//!
//! `std::fs::Metadata` has no stable way to a file's identity (volume
//! serial number and file index: the device and inode of Windows) nor its
//! change time (NTFS's `ChangeTime`, moved by every write, rename and
//! attribute change, and which user code cannot set back, unlike the
//! modification time). Without them a directory replaced by another at the
//! same path, or a file rewritten with its size and modification time
//! kept, would look unchanged to a poll. `std` itself opens a handle per
//! `metadata` call on Windows, so asking the handle here costs the same.

use std::io;
use std::os::windows::fs::OpenOptionsExt;
use std::os::windows::io::AsRawHandle;
use std::path::Path;

use windows_sys::Win32::Storage::FileSystem::{
    BY_HANDLE_FILE_INFORMATION, FILE_ATTRIBUTE_DIRECTORY, FILE_ATTRIBUTE_REPARSE_POINT,
    FILE_ATTRIBUTE_TAG_INFO, FILE_BASIC_INFO, FILE_FLAG_BACKUP_SEMANTICS,
    FILE_FLAG_OPEN_REPARSE_POINT, FILE_READ_ATTRIBUTES, FILE_SHARE_DELETE, FILE_SHARE_READ,
    FILE_SHARE_WRITE, FileAttributeTagInfo, FileBasicInfo, GetFileInformationByHandle,
    GetFileInformationByHandleEx,
};

use crate::change::FileType;

/// What [`stat`] says of an entry.
#[derive(Clone, Copy, Debug)]
pub(super) struct Stat {
    pub kind: FileType,
    pub size: u64,
    /// Last write, as (seconds, nanoseconds) since the Unix epoch.
    pub mtime: (i64, i64),
    /// Last change (content, name or attributes), the same way.
    pub ctime: (i64, i64),
    /// Volume serial number and file index.
    pub ident: (u64, u64),
}

/// The entry at `path` (`follow`: through a final symlink or junction).
pub(super) fn stat(path: &Path, follow: bool) -> io::Result<Stat> {
    // Directories open only with backup semantics; without following, a
    // link is opened itself rather than what it points to.
    let flags = FILE_FLAG_BACKUP_SEMANTICS
        | if follow {
            0
        } else {
            FILE_FLAG_OPEN_REPARSE_POINT
        };
    let file = std::fs::OpenOptions::new()
        .access_mode(FILE_READ_ATTRIBUTES)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
        .custom_flags(flags)
        .open(path)?;
    let handle = file.as_raw_handle();
    // SAFETY: a valid handle, and structs of the sizes passed, written by
    // the calls only.
    let (info, basic) = unsafe {
        let mut info: BY_HANDLE_FILE_INFORMATION = std::mem::zeroed();
        if GetFileInformationByHandle(handle, &mut info) == 0 {
            return Err(io::Error::last_os_error());
        }
        let mut basic: FILE_BASIC_INFO = std::mem::zeroed();
        if GetFileInformationByHandleEx(
            handle,
            FileBasicInfo,
            (&raw mut basic).cast(),
            size_of::<FILE_BASIC_INFO>() as u32,
        ) == 0
        {
            return Err(io::Error::last_os_error());
        }
        (info, basic)
    };
    let attrs = info.dwFileAttributes;
    let kind = if !follow && attrs & FILE_ATTRIBUTE_REPARSE_POINT != 0 && is_link(handle)? {
        FileType::Symlink
    } else if attrs & FILE_ATTRIBUTE_DIRECTORY != 0 {
        FileType::Dir
    } else {
        FileType::File
    };
    let high_low = |h: u32, l: u32| (u64::from(h) << 32) | u64::from(l);
    let write = high_low(
        info.ftLastWriteTime.dwHighDateTime,
        info.ftLastWriteTime.dwLowDateTime,
    );
    Ok(Stat {
        kind,
        size: high_low(info.nFileSizeHigh, info.nFileSizeLow),
        mtime: unix_time(write as i64),
        ctime: unix_time(basic.ChangeTime),
        ident: (
            u64::from(info.dwVolumeSerialNumber),
            high_low(info.nFileIndexHigh, info.nFileIndexLow),
        ),
    })
}

/// Whether the reparse point open as `handle` is a link (a symlink or a
/// junction: its tag is a "name surrogate", as `std` decides too) rather
/// than, say, a cloud file's placeholder.
fn is_link(handle: std::os::windows::io::RawHandle) -> io::Result<bool> {
    /// `IsReparseTagNameSurrogate` (winnt.h).
    const NAME_SURROGATE: u32 = 0x2000_0000;
    // SAFETY: a valid handle and a struct of the size passed.
    unsafe {
        let mut tag: FILE_ATTRIBUTE_TAG_INFO = std::mem::zeroed();
        if GetFileInformationByHandleEx(
            handle,
            FileAttributeTagInfo,
            (&raw mut tag).cast(),
            size_of::<FILE_ATTRIBUTE_TAG_INFO>() as u32,
        ) == 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(tag.ReparseTag & NAME_SURROGATE != 0)
    }
}

/// A Windows time (100 ns units since 1601) as (seconds, nanoseconds) since
/// the Unix epoch.
fn unix_time(t: i64) -> (i64, i64) {
    /// 1601-01-01 to 1970-01-01, in 100 ns units.
    const EPOCH: i64 = 116_444_736_000_000_000;
    let t = t - EPOCH;
    (t.div_euclid(10_000_000), t.rem_euclid(10_000_000) * 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_times_become_unix_times() {
        assert_eq!(unix_time(116_444_736_000_000_000), (0, 0));
        assert_eq!(unix_time(116_444_736_000_000_000 + 15), (0, 1_500));
        assert_eq!(unix_time(116_444_736_000_000_000 - 1), (-1, 999_999_900));
    }

    #[test]
    fn two_directories_differ_and_one_keeps_its_identity() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let (sa, sb) = (stat(&a, false).unwrap(), stat(&b, false).unwrap());
        assert_eq!((sa.kind, sb.kind), (FileType::Dir, FileType::Dir));
        assert_ne!(sa.ident, sb.ident);
        assert_eq!(stat(&a, true).unwrap().ident, sa.ident);
        let f = a.join("f");
        std::fs::write(&f, "four").unwrap();
        let sf = stat(&f, false).unwrap();
        assert_eq!((sf.kind, sf.size), (FileType::File, 4));
        assert!(sf.ctime.0 > 1_600_000_000, "a change time of today: {sf:?}");
        assert!(stat(&d.path().join("missing"), false).is_err());
    }
}
