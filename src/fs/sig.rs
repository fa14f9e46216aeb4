//! Stat signatures: what a poll compares to tell that an entry changed
//! without an OS event, a directory scanned with every entry's signature,
//! and the content hashes of files whose timestamps could hide a rewrite.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::Path;
use std::time::SystemTime;

#[cfg(not(target_os = "linux"))]
use super::gone;
#[cfg(windows)]
use super::windows;
#[cfg(target_os = "linux")]
use super::{d_type_kind, each_entry, open_dir};
use super::{failing, file_type_of};
#[cfg(not(any(target_os = "linux", windows)))]
use super::{identity, read_listing};
use crate::batch::change::{FileType, Meta};
use crate::batch::content::ContentHash;

/// What a poll compares to tell that an entry changed without an OS event:
/// type, size, modification and change times to the nanosecond, inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sig {
    pub kind: FileType,
    pub size: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
    pub ino: u64,
}

impl Sig {
    /// The signature of an entry that could not be `stat`ed: unlike any
    /// real one, so that whatever is found there next counts as changed
    /// and replaced.
    pub(crate) const UNKNOWN: Sig = Sig {
        kind: FileType::Other,
        size: u64::MAX,
        mtime: (i64::MIN, 0),
        ctime: (i64::MIN, 0),
        ino: 0,
    };

    /// Whether this is the signature of an entry that could not be
    /// `stat`ed ([`UNKNOWN`](Self::UNKNOWN)'s, with the type its listing
    /// gave, if any).
    pub(crate) fn unread(&self) -> bool {
        self.size == Sig::UNKNOWN.size && self.mtime == Sig::UNKNOWN.mtime && self.ino == 0
    }

    /// Whether `self` (before) and `now` differ in what says an entry was
    /// written or replaced. For a directory only its type and inode count:
    /// its times move whenever an entry comes or goes, which its own poll
    /// reports.
    pub(crate) fn changed(&self, now: &Sig) -> bool {
        if self.kind == FileType::Dir && now.kind == FileType::Dir {
            self.ino != now.ino
        } else {
            self != now
        }
    }

    /// Whether the entry was replaced (another inode or type), rather than
    /// written in place.
    pub(crate) fn replaced(&self, now: &Sig) -> bool {
        self.ino != now.ino || self.kind != now.kind
    }

    /// What a change reports of the entry (as [`lstat`] does); `None` for
    /// one that could not be `stat`ed. No inode on Windows, whose file
    /// index `std` does not tell (an event's [`lstat`] could not give it).
    pub(crate) fn meta(&self) -> Option<Meta> {
        if self.mtime == Sig::UNKNOWN.mtime {
            return None;
        }
        let (secs, nanos) = self.mtime;
        let since = std::time::Duration::from_nanos(nanos.clamp(0, 999_999_999) as u64);
        let mtime = if secs >= 0 {
            SystemTime::UNIX_EPOCH.checked_add(std::time::Duration::from_secs(secs as u64))
        } else {
            SystemTime::UNIX_EPOCH.checked_sub(std::time::Duration::from_secs(secs.unsigned_abs()))
        }
        .and_then(|t| t.checked_add(since));
        Some(Meta::new(self.size, mtime, cfg!(unix).then_some(self.ino)))
    }
}

/// The type of the entry at `path` (not followed) and what a change
/// reports of it, from one `lstat`; `None` if it cannot be `stat`ed.
pub(crate) fn lstat(path: &Path) -> Option<(FileType, Meta)> {
    lstat_found(path).ok().flatten()
}

/// [`lstat`], telling what is not there (`None`) from what cannot be
/// `stat`ed though it may be there (an error of storage that fails,
/// [`failing`]: `EIO`, `ESTALE`: it tells nothing of the entry).
pub(crate) fn lstat_found(path: &Path) -> io::Result<Option<(FileType, Meta)>> {
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if failing(&e) => return Err(e),
        Err(_) => return Ok(None),
    };
    #[cfg(unix)]
    let inode = Some(std::os::unix::fs::MetadataExt::ino(&m));
    #[cfg(not(unix))]
    let inode = None;
    let meta = Meta::new(m.len(), m.modified().ok(), inode);
    Ok(Some((file_type_of(m.file_type()), meta)))
}

/// What one poll of a directory sees: every entry with its signature,
/// sorted by name once [`sorted`](Scan::sorted); sync cookies included (a
/// poll must see them come). The names are kept back to back in one
/// buffer: a scan allocates a few times, not once per entry.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// The device of the directory itself (Windows: its volume's serial
    /// number), as the read found it: what tells that another file system
    /// is now mounted there, or none (`None`: not known).
    pub dev: Option<u64>,
    /// The file systems the scan touched, as one key (see
    /// [`Look::fs_key`](super::Look::fs_key)).
    pub fs_key: Option<u64>,
    names: Vec<u8>,
    /// Each entry's name (where it begins in `names`, its length) and
    /// signature.
    entries: Vec<(u32, u32, Sig)>,
}

impl Scan {
    fn push(&mut self, name: &[u8], sig: Sig) {
        let at = u32::try_from(self.names.len()).expect("at most 4 GiB of names");
        self.names.extend_from_slice(name);
        self.entries.push((at, name.len() as u32, sig));
    }

    fn name(&self, e: &(u32, u32, Sig)) -> &[u8] {
        &self.names[e.0 as usize..(e.0 + e.1) as usize]
    }

    /// Sorted by name (bytes).
    fn sorted(mut self) -> Scan {
        let mut entries = std::mem::take(&mut self.entries);
        entries.sort_unstable_by(|a, b| self.name(a).cmp(self.name(b)));
        self.entries = entries;
        self
    }

    /// How many entries.
    #[cfg(all(test, target_os = "linux"))]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every entry with its signature, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&OsStr, Sig)> + Clone {
        self.entries.iter().map(|e| {
            // SAFETY: each name was taken whole from an `OsStr` (or a
            // `CStr` on Unix, where any bytes are an `OsStr`).
            let name = unsafe { OsStr::from_encoded_bytes_unchecked(self.name(e)) };
            (name, e.2)
        })
    }
}

/// Reads directory `dir` and stats every entry (`follow`: `dir` may be a
/// symlink to a directory; entries are never followed). An entry that
/// vanishes between the read and its `stat` is left out; one that cannot
/// be `stat`ed for another reason (`EIO`, `ESTALE` on a network file
/// system, `EACCES` in a directory that can be listed but not searched)
/// is kept with the listing's type and [`Sig::UNKNOWN`]'s other fields: it
/// is not lost, and once it can be `stat`ed again it counts as written (a
/// spurious `Modified` at worst). An error reading the directory itself
/// fails the whole scan, so that the caller keeps what it saw before and
/// tries again.
///
/// Linux: `getdents64` and `fstatat` relative to the directory's
/// descriptor, as `find` does: no path is resolved twice.
#[cfg(target_os = "linux")]
pub(crate) fn scan_dir(dir: &Path, follow: bool) -> io::Result<Scan> {
    use std::os::fd::AsRawFd;
    let fd = open_dir(dir, follow)?;
    // SAFETY: a plain C struct, filled by each `fstatat` before it is read.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let mut scan = Scan::default();
    // SAFETY: a valid descriptor and a struct to fill.
    let own = (unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == 0).then_some(st.st_dev);
    scan.dev = own;
    // The devices of entries that are mount points of other file systems.
    let mut mounts: Vec<u64> = Vec::new();
    each_entry(&fd, |name, d_type| {
        // SAFETY: a valid descriptor, a NUL-terminated name, a struct to
        // fill.
        let rc = unsafe {
            libc::fstatat(
                fd.as_raw_fd(),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::NotFound {
                return Ok(()); // vanished since the read
            }
            // Listed but not `stat`able now (EIO, EACCES, ...): kept, with
            // the type the listing gave and a signature no entry has, so
            // that it is neither lost nor the whole directory unread, and
            // is compared afresh once it can be `stat`ed.
            let kind = d_type_kind(d_type).unwrap_or(FileType::Other);
            scan.push(
                name.to_bytes(),
                Sig {
                    kind,
                    ..Sig::UNKNOWN
                },
            );
            return Ok(());
        }
        if own.is_some_and(|d| d != st.st_dev) && !mounts.contains(&st.st_dev) {
            mounts.push(st.st_dev);
        }
        scan.push(name.to_bytes(), sig_of_stat(&st));
        Ok(())
    })?;
    scan.fs_key = own.map(|d| fs_key(d, mounts));
    Ok(scan.sorted())
}

/// The key of the file systems a scan of a directory on device `own`
/// touched, `mounts` the devices of its entries that are mount points of
/// other file systems: `own` alone when there are none (the usual case).
#[cfg(target_os = "linux")]
fn fs_key(own: u64, mut mounts: Vec<u64>) -> u64 {
    use std::hash::{Hash, Hasher};
    if mounts.is_empty() {
        return own;
    }
    mounts.sort_unstable();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (own, mounts).hash(&mut h);
    h.finish()
}

/// The signature in a `stat` buffer.
#[cfg(target_os = "linux")]
fn sig_of_stat(st: &libc::stat) -> Sig {
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Dir,
        libc::S_IFREG => FileType::File,
        libc::S_IFLNK => FileType::Symlink,
        _ => FileType::Other,
    };
    Sig {
        kind,
        size: st.st_size as u64,
        mtime: (st.st_mtime, st.st_mtime_nsec),
        ctime: (st.st_ctime, st.st_ctime_nsec),
        ino: st.st_ino,
    }
}

/// The signatures of the entries `names` (sorted) of directory `dir` (a
/// symlink to a directory is followed; the entries are not), in their
/// order: `None` for one that cannot be `stat`ed (gone since, or `EIO`).
/// For a directory whose entries are known already (a spec's, from the
/// index): no listing is read.
///
/// Linux: one descriptor for the directory and an `fstatat` per name.
#[cfg(target_os = "linux")]
pub(crate) fn sigs_of(dir: &Path, names: &[(OsString, FileType)]) -> Vec<Option<Sig>> {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let Ok(fd) = open_dir(dir, true) else {
        return vec![None; names.len()];
    };
    // SAFETY: a plain C struct, filled by each `fstatat` before it is read.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    names
        .iter()
        .map(|(name, _)| {
            let c = std::ffi::CString::new(name.as_bytes()).ok()?;
            // SAFETY: a valid descriptor, a NUL-terminated name, a struct
            // to fill.
            let rc = unsafe {
                libc::fstatat(
                    fd.as_raw_fd(),
                    c.as_ptr(),
                    &mut st,
                    libc::AT_SYMLINK_NOFOLLOW,
                )
            };
            (rc == 0).then(|| sig_of_stat(&st))
        })
        .collect()
}

/// The signatures of the entries `names` (sorted) of directory `dir` (see
/// the Linux version): Windows' listing of the directory, whose files'
/// signatures come from their own handles.
#[cfg(windows)]
pub(crate) fn sigs_of(dir: &Path, names: &[(OsString, FileType)]) -> Vec<Option<Sig>> {
    let Ok(scan) = scan_dir(dir, true) else {
        return vec![None; names.len()];
    };
    let scan: Vec<(&OsStr, Sig)> = scan.iter().collect();
    names
        .iter()
        .map(|(name, _)| {
            let i = scan
                .binary_search_by(|(n, _)| n.as_encoded_bytes().cmp(name.as_encoded_bytes()))
                .ok()?;
            Some(scan[i].1).filter(|s| s.size != Sig::UNKNOWN.size)
        })
        .collect()
}

/// The signatures of the entries `names` of directory `dir` (see the
/// Linux version): a `stat` of each path.
#[cfg(not(any(target_os = "linux", windows)))]
pub(crate) fn sigs_of(dir: &Path, names: &[(OsString, FileType)]) -> Vec<Option<Sig>> {
    names
        .iter()
        .map(|(name, _)| sig_of(&dir.join(name)))
        .collect()
}

/// Reads directory `dir` with every entry's signature (see the Linux
/// version). Windows' listing carries them, but NTFS brings a directory
/// entry's size and times up to date lazily (when a handle closes): a
/// file's signature comes from its own handle, so that a log written
/// through a handle kept open is seen. One that vanished since the
/// listing is left out. A sync cookie is not opened: a file deleted while
/// a handle is open on it stays listed until that handle closes (Wine,
/// and Windows without POSIX delete semantics), so a look under way when
/// a barrier removes its cookie would leave the cookie in sight of the
/// barrier's caller.
#[cfg(windows)]
pub(crate) fn scan_dir(dir: &Path, follow: bool) -> io::Result<Scan> {
    let listing = windows::list(dir, follow)?;
    let mut scan = Scan {
        dev: Some(listing.volume),
        fs_key: Some(listing.volume),
        ..Scan::default()
    };
    for (name, listed) in listing.entries {
        let s = if listed.kind == FileType::File && !super::is_cookie(&name) {
            match windows::stat(&dir.join(&name), false) {
                Ok(s) => s,
                Err(e) if gone(&e) => continue,
                Err(_) => listed,
            }
        } else {
            listed
        };
        let sig = Sig {
            kind: s.kind,
            size: s.size,
            mtime: s.mtime,
            ctime: s.ctime,
            ino: s.ident.1,
        };
        scan.push(name.as_encoded_bytes(), sig);
    }
    Ok(scan.sorted())
}

/// Reads directory `dir` and stats every entry (see the Linux version).
#[cfg(not(any(target_os = "linux", windows)))]
pub(crate) fn scan_dir(dir: &Path, follow: bool) -> io::Result<Scan> {
    // A directory (through a link only if `follow`), or an error.
    let (dev, _) = identity(dir, follow)?;
    let mut cookies = Vec::new();
    let listing = read_listing(dir, &mut cookies)?;
    let names = listing.into_iter().map(|(n, _)| n).chain(
        cookies
            .iter()
            .filter_map(|c| c.file_name().map(OsStr::to_os_string)),
    );
    let mut scan = Scan {
        dev: Some(dev),
        fs_key: Some(dev),
        ..Scan::default()
    };
    for name in names {
        // One that vanished since the read is left out; one that cannot be
        // `stat`ed now is kept with a signature no entry has (see the
        // Linux version).
        match std::fs::symlink_metadata(dir.join(&name)) {
            Ok(_) => {
                if let Some(sig) = sig_of(&dir.join(&name)) {
                    scan.push(name.as_encoded_bytes(), sig);
                }
            }
            Err(e) if gone(&e) => {}
            Err(_) => scan.push(name.as_encoded_bytes(), Sig::UNKNOWN),
        }
    }
    Ok(scan.sorted())
}

/// The hash of the content of file `path` (`None`: unreadable, or larger
/// than [`MAX_HASHED`]).
pub(crate) fn content_hash(path: &Path) -> Option<ContentHash> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = match f.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        };
        if n == 0 {
            return Some(ContentHash::from_u128(h.digest128()));
        }
        total += n as u64;
        if total > MAX_HASHED {
            return None;
        }
        h.update(&buf[..n]);
    }
}

/// Files larger than this are never hashed (their signature alone counts).
pub(crate) const MAX_HASHED: u64 = 64 * 1024 * 1024;

/// How coarse a file system's timestamps may be: an entry written less
/// than this before a look may be written again without its mtime moving
/// (FAT counts in 2 s steps; ext3 and many NFS servers in seconds).
pub(crate) const COARSE_TIME: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether a file with `mtime` may change, after a look at `looked`,
/// without its timestamps showing it ("racily clean", as git says): its
/// mtime is within [`COARSE_TIME`] of the look.
pub(crate) fn racy(mtime: (i64, i64), looked: SystemTime) -> bool {
    let Ok(l) = looked.duration_since(SystemTime::UNIX_EPOCH) else {
        return true;
    };
    let l = l.saturating_sub(COARSE_TIME);
    (mtime.0, mtime.1) >= (l.as_secs() as i64, i64::from(l.subsec_nanos()))
}

/// The stat signature of the entry at `path` (not followed); `None` if it
/// cannot be `stat`ed.
pub(crate) fn sig_of(path: &Path) -> Option<Sig> {
    sig_found(path).ok().flatten()
}

/// [`sig_of`], telling what is not there (`None`) from what cannot be
/// `stat`ed though it may be there (an error, as for [`lstat_found`]).
pub(crate) fn sig_found(path: &Path) -> io::Result<Option<Sig>> {
    let found = |r: io::Result<Sig>| match r {
        Ok(s) => Ok(Some(s)),
        Err(e) if failing(&e) => Err(e),
        Err(_) => Ok(None),
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        found(std::fs::symlink_metadata(path).map(|m| Sig {
            kind: file_type_of(m.file_type()),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            ino: m.ino(),
        }))
    }
    #[cfg(windows)]
    {
        found(windows::stat(path, false).map(|s| Sig {
            kind: s.kind,
            size: s.size,
            mtime: s.mtime,
            ctime: s.ctime,
            ino: s.ident.1,
        }))
    }
}
