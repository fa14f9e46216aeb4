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

use std::ffi::OsString;
use std::os::windows::ffi::OsStringExt;

use windows_sys::Win32::Foundation::ERROR_NO_MORE_FILES;
use windows_sys::Win32::Storage::FileSystem::{
    BY_HANDLE_FILE_INFORMATION, FILE_ATTRIBUTE_DIRECTORY, FILE_ATTRIBUTE_REPARSE_POINT,
    FILE_ATTRIBUTE_TAG_INFO, FILE_BASIC_INFO, FILE_FLAG_BACKUP_SEMANTICS,
    FILE_FLAG_OPEN_REPARSE_POINT, FILE_ID_BOTH_DIR_INFO, FILE_LIST_DIRECTORY, FILE_READ_ATTRIBUTES,
    FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE, FileAttributeTagInfo, FileBasicInfo,
    FileIdBothDirectoryInfo, FileIdBothDirectoryRestartInfo, GetFileInformationByHandle,
    GetFileInformationByHandleEx, SYNCHRONIZE,
};

use crate::batch::change::FileType;

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
    let file = open(path, follow, FILE_READ_ATTRIBUTES)?;
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
    let write = high_low(
        info.ftLastWriteTime.dwHighDateTime,
        info.ftLastWriteTime.dwLowDateTime,
    ) as i64;
    Ok(Stat {
        kind,
        size: high_low(info.nFileSizeHigh, info.nFileSizeLow),
        mtime: unix_time(write),
        ctime: unix_time(change_time(basic.ChangeTime, write)),
        ident: identity(&info),
    })
}

/// Two 32-bit halves as one number.
fn high_low(high: u32, low: u32) -> u64 {
    (u64::from(high) << 32) | u64::from(low)
}

/// Volume serial number and file index.
fn identity(info: &BY_HANDLE_FILE_INFORMATION) -> (u64, u64) {
    (
        u64::from(info.dwVolumeSerialNumber),
        high_low(info.nFileIndexHigh, info.nFileIndexLow),
    )
}

/// The change time, or the last write where the file system keeps none
/// (FAT and exFAT report 0).
fn change_time(change: i64, write: i64) -> i64 {
    change.max(write)
}

/// Opens `path` for `access` with every sharing mode, so that no rename or
/// delete by anyone waits on it. Directories open only with backup
/// semantics; without `follow`, a link is opened itself rather than what
/// it points to.
fn open(path: &Path, follow: bool, access: u32) -> io::Result<std::fs::File> {
    let flags = FILE_FLAG_BACKUP_SEMANTICS
        | if follow {
            0
        } else {
            FILE_FLAG_OPEN_REPARSE_POINT
        };
    std::fs::OpenOptions::new()
        .access_mode(access)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
        .custom_flags(flags)
        .open(path)
}

/// A directory's entries, as [`list`] read them.
pub(super) struct Listing {
    pub entries: Vec<(OsString, Stat)>,
    /// The directory's volume serial number.
    pub volume: u64,
}

/// `IsReparseTagNameSurrogate` (winnt.h): a symlink's or a junction's tag.
const NAME_SURROGATE: u32 = 0x2000_0000;

/// The entries of directory `dir` (`follow`: `dir` may be a link to one),
/// each as [`stat`] would say; `.` and `..` left
/// out. One handle, opened with every sharing mode (never in the way of a
/// rename or delete of the directory or its entries, as `FindFirstFile`'s
/// is under Wine), read with `FileIdBothDirectoryInfo`: names, types,
/// sizes, times and file ids come with the listing, with no handle per
/// entry.
pub(super) fn list(dir: &Path, follow: bool) -> io::Result<Listing> {
    let file = open(
        dir,
        follow,
        FILE_LIST_DIRECTORY | FILE_READ_ATTRIBUTES | SYNCHRONIZE,
    )?;
    let handle = file.as_raw_handle();
    // SAFETY: a valid handle and a struct written by the call only.
    let info = unsafe {
        let mut info: BY_HANDLE_FILE_INFORMATION = std::mem::zeroed();
        if GetFileInformationByHandle(handle, &mut info) == 0 {
            return Err(io::Error::last_os_error());
        }
        info
    };
    // Without `follow`, a link (symlink, junction) is no directory; another
    // reparse point (a cloud file's placeholder, a deduplicated directory)
    // is one.
    if info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY == 0
        || (!follow
            && info.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT != 0
            && is_link(handle)?)
    {
        return Err(io::Error::from(io::ErrorKind::NotADirectory));
    }
    let volume = u64::from(info.dwVolumeSerialNumber);
    // 64 KiB, 8-byte aligned as the records are.
    let mut buf = vec![0u64; 8 * 1024];
    let mut class = FileIdBothDirectoryRestartInfo;
    let mut out = Vec::new();
    loop {
        // SAFETY: a valid directory handle and a buffer of the size passed.
        let ok = unsafe {
            GetFileInformationByHandleEx(
                handle,
                class,
                buf.as_mut_ptr().cast(),
                (buf.len() * 8) as u32,
            )
        };
        if ok == 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(ERROR_NO_MORE_FILES as i32) {
                return Ok(Listing {
                    entries: out,
                    volume,
                });
            }
            return Err(e);
        }
        class = FileIdBothDirectoryInfo;
        let bytes: &[u8] = bytemuck_bytes(&buf);
        let mut at = 0usize;
        loop {
            let header = std::mem::offset_of!(FILE_ID_BOTH_DIR_INFO, FileName);
            if at + header > bytes.len() {
                return Err(io::Error::other("truncated directory record"));
            }
            // The record's fixed part, copied out (the last record may end
            // before the struct's padding would); unaligned, as Wine packs
            // records.
            let mut rec = FILE_ID_BOTH_DIR_INFO::default();
            let take = (bytes.len() - at).min(size_of::<FILE_ID_BOTH_DIR_INFO>());
            // SAFETY: `take` bytes from `at` are within `bytes`, and at most
            // the size of `rec`, a plain struct of integers.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    bytes[at..].as_ptr(),
                    (&raw mut rec).cast::<u8>(),
                    take,
                );
            }
            let len = rec.FileNameLength as usize;
            let name_at = at + header;
            let next = rec.NextEntryOffset as usize;
            if name_at + len > bytes.len()
                || !len.is_multiple_of(2)
                || (next != 0 && next < header + len)
            {
                return Err(io::Error::other("malformed directory record"));
            }
            let units: Vec<u16> = bytes[name_at..name_at + len]
                .chunks_exact(2)
                .map(|c| u16::from_ne_bytes([c[0], c[1]]))
                .collect();
            let dots = units == [u16::from(b'.')] || units == [u16::from(b'.'); 2];
            if !dots {
                let attrs = rec.FileAttributes;
                // For a reparse point, EaSize holds its tag.
                let kind = if attrs & FILE_ATTRIBUTE_REPARSE_POINT != 0
                    && rec.EaSize & NAME_SURROGATE != 0
                {
                    FileType::Symlink
                } else if attrs & FILE_ATTRIBUTE_DIRECTORY != 0 {
                    FileType::Dir
                } else {
                    FileType::File
                };
                out.push((
                    OsString::from_wide(&units),
                    Stat {
                        kind,
                        size: rec.EndOfFile.max(0) as u64,
                        mtime: unix_time(rec.LastWriteTime),
                        ctime: unix_time(change_time(rec.ChangeTime, rec.LastWriteTime)),
                        ident: (volume, rec.FileId as u64),
                    },
                ));
            }
            if rec.NextEntryOffset == 0 {
                break;
            }
            at += rec.NextEntryOffset as usize;
        }
    }
}

/// The buffer's bytes.
fn bytemuck_bytes(buf: &[u64]) -> &[u8] {
    // SAFETY: any u64 slice is a valid byte slice of eight times its length.
    unsafe { std::slice::from_raw_parts(buf.as_ptr().cast(), buf.len() * 8) }
}

/// Whether the reparse point open as `handle` is a link (a symlink or a
/// junction: its tag is a "name surrogate", as `std` decides too) rather
/// than, say, a cloud file's placeholder.
fn is_link(handle: std::os::windows::io::RawHandle) -> io::Result<bool> {
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

    #[test]
    fn a_listing_says_what_stat_says_of_each_entry() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("f"), "five!").unwrap();
        let Listing { mut entries, .. } = list(d.path(), false).unwrap();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let names: Vec<_> = entries.iter().map(|(n, _)| n.to_str().unwrap()).collect();
        assert_eq!(names, ["f", "sub"]);
        for (name, listed) in &entries {
            let s = stat(&d.path().join(name), false).unwrap();
            assert_eq!(
                (
                    listed.kind,
                    listed.size,
                    listed.mtime,
                    listed.ctime,
                    listed.ident
                ),
                (s.kind, s.size, s.mtime, s.ctime, s.ident),
                "{name:?}"
            );
        }
        let f = d.path().join("f");
        assert!(list(&f, false).is_err(), "a file is no directory");
        assert!(list(&d.path().join("missing"), false).is_err());
    }
}
