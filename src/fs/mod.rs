//! Reading the disk: directory listings, entry types, stat signatures,
//! directory identities. The engine's only door to the file system's
//! contents (the backends only say *where* to look).
//!
//! Sync cookies (`.specwatch-cookie-*`) are recognised here, so no listing
//! ever hands one to the index.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::batch::change::FileType;

mod packed;
mod picture;
mod sig;
mod vcs;
#[cfg(windows)]
mod windows;
pub(crate) use picture::{Look, Picture, look};
pub(crate) use sig::{
    Sig, content_hash, lstat, lstat_found, racy, scan_dir, sig_found, sig_of, sigs_of,
};
pub(crate) use vcs::vcs_lock;

/// What tells two directories apart: device and inode (on Windows, volume
/// serial number and file index).
pub(crate) type DirIdent = (u64, u64);

/// The identity of the directory at `path`, following symlinks.
pub(crate) fn dir_ident(path: &Path) -> Option<DirIdent> {
    identity(path, true).ok()
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

/// Whether an error of a `stat` means that the storage fails (it tells
/// nothing of the entry, which may well be there): `EIO`, `ESTALE`,
/// `ENOTCONN`, `ETIMEDOUT` (a network or FUSE file system in trouble); on
/// Windows, a network drive's "unexpected network error" and "network name
/// no longer available". Any other error reads as "not there", as it did
/// before: an entry that cannot be `stat`ed for want of permission, or
/// (Windows) one whose deletion is pending while a handle is open, which
/// is as good as gone and gets no further event.
pub(crate) fn failing(e: &io::Error) -> bool {
    #[cfg(unix)]
    let codes = [libc::EIO, libc::ESTALE, libc::ENOTCONN, libc::ETIMEDOUT];
    // ERROR_UNEXP_NET_ERR, ERROR_NETNAME_DELETED.
    #[cfg(windows)]
    let codes = [59, 64];
    e.raw_os_error().is_some_and(|c| codes.contains(&c))
}

/// The type of `path` without following a final symlink; `None` if absent.
pub(crate) fn lstat_type(path: &Path) -> io::Result<Option<FileType>> {
    match std::fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(file_type_of(m.file_type()))),
        Err(e) if gone(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Linux: opens directory `dir` for reading its entries (`follow`: `dir`
/// may be a symlink to a directory).
#[cfg(target_os = "linux")]
fn open_dir(dir: &Path, follow: bool) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let raw = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC | nofollow,
        )
    };
    if raw < 0 {
        let e = io::Error::last_os_error();
        // A symlink where a directory was expected, or (`follow`) links
        // that lead to each other: no directory is there.
        if e.raw_os_error() == Some(libc::ELOOP) {
            return Err(io::Error::from(io::ErrorKind::NotADirectory));
        }
        return Err(e);
    }
    // SAFETY: `raw` was just opened here and is owned by nothing else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) })
}

/// Linux: calls `f` with each entry's name (its NUL-terminated bytes, the
/// NUL included) and `d_type`, `.` and `..` left out. `open` and
/// `getdents64` straight into a stack buffer: no allocation per entry.
#[cfg(target_os = "linux")]
fn each_entry(
    fd: &std::os::fd::OwnedFd,
    mut f: impl FnMut(&std::ffi::CStr, u8) -> io::Result<()>,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;

    #[repr(C, align(8))]
    struct Buf([u8; 16 * 1024]);

    let mut buf = Buf([0; 16 * 1024]);
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
            return Ok(());
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
            let name = std::ffi::CStr::from_bytes_until_nul(&rec[19..reclen])
                .map_err(|_| io::Error::other("getdents64 name without NUL"))?;
            let bytes = name.to_bytes();
            if bytes == b"." || bytes == b".." {
                continue;
            }
            f(name, rec[18])?;
        }
    }
}

/// Directories whose next read fails (see [`fail_next_read`]); tests use
/// paths of their own, so the list is shared by all threads (a walk's
/// reads may run on a reader thread).
#[cfg(test)]
static UNREADABLE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Test hook: the next read of `dir` fails as a directory without read
/// permission does (the tests run as root, whom permission bits do not
/// stop).
#[cfg(test)]
pub(crate) fn fail_next_read(dir: &Path) {
    UNREADABLE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(dir.to_path_buf());
}

/// The failure [`fail_next_read`] staged for `dir`, used up.
#[cfg(test)]
fn staged_read_failure(dir: &Path) -> io::Result<()> {
    let mut u = UNREADABLE.lock().unwrap_or_else(|e| e.into_inner());
    match u.iter().position(|p| p == dir) {
        Some(i) => {
            u.remove(i);
            Err(io::Error::from(io::ErrorKind::PermissionDenied))
        }
        None => Ok(()),
    }
}

/// The type a directory entry's `d_type` gives; `None` for `DT_UNKNOWN`
/// (a file system that does not say: ask `lstat`).
#[cfg(target_os = "linux")]
pub(super) fn d_type_kind(d_type: u8) -> Option<FileType> {
    match d_type {
        libc::DT_UNKNOWN => None,
        libc::DT_DIR => Some(FileType::Dir),
        libc::DT_REG => Some(FileType::File),
        libc::DT_LNK => Some(FileType::Symlink),
        _ => Some(FileType::Other),
    }
}

/// Reads a directory's entries (types from `d_type` where the file system
/// gives them). Sync cookies are left out and their paths put in `cookies`.
///
/// Linux: `open` and `getdents64` into a stack buffer, one allocation per
/// entry (its name); `std::fs::read_dir` costs an `fstat` and a heap
/// buffer per directory and three allocations per entry, which showed in
/// start-up profiles.
#[cfg(target_os = "linux")]
pub(crate) fn read_listing(
    dir: &Path,
    cookies: &mut Vec<PathBuf>,
) -> io::Result<Vec<(OsString, FileType)>> {
    #[cfg(test)]
    staged_read_failure(dir)?;
    use std::os::unix::ffi::OsStrExt;
    let fd = open_dir(dir, true)?;
    let mut out = Vec::new();
    each_entry(&fd, |name, d_type| {
        let name = OsStr::from_bytes(name.to_bytes());
        if is_cookie(name) {
            cookies.push(dir.join(name));
            return Ok(());
        }
        let ft = match d_type_kind(d_type) {
            Some(t) => t,
            None => match lstat_type(&dir.join(name)) {
                Ok(Some(t)) => t,
                _ => return Ok(()),
            },
        };
        out.push((name.to_os_string(), ft));
        Ok(())
    })?;
    Ok(out)
}

/// Reads a directory's entries, with their types. Sync cookies are left out
/// and their paths put in `cookies`. Windows: one handle that never stands
/// in the way of a rename or delete (see `windows::list`).
#[cfg(windows)]
pub(crate) fn read_listing(
    dir: &Path,
    cookies: &mut Vec<PathBuf>,
) -> io::Result<Vec<(OsString, FileType)>> {
    #[cfg(test)]
    staged_read_failure(dir)?;
    let entries = windows::list(dir, true)?.entries;
    let mut out = Vec::with_capacity(entries.len());
    for (name, stat) in entries {
        if is_cookie(&name) {
            cookies.push(dir.join(name));
        } else {
            out.push((name, stat.kind));
        }
    }
    Ok(out)
}

/// Reads a directory's entries (types from `d_type` where the file system
/// gives them). Sync cookies are left out and their paths put in `cookies`.
#[cfg(not(any(target_os = "linux", windows)))]
pub(crate) fn read_listing(
    dir: &Path,
    cookies: &mut Vec<PathBuf>,
) -> io::Result<Vec<(OsString, FileType)>> {
    #[cfg(test)]
    staged_read_failure(dir)?;
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

/// Whether anything is at `path` (a symlink counts as itself).
pub(crate) fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// Whether nothing is at `path`, as far as an `lstat` can tell: one that
/// fails otherwise (`EIO`, `ESTALE`: storage that fails) says neither.
pub(crate) fn absent(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_err_and(|e| !failing(&e))
}

/// Where a sync cookie for `root` goes: `root` if it is a directory (not
/// a link to one), else its nearest existing ancestor directory (a file
/// root's directory, which the engine watches for it).
pub(crate) fn cookie_dir(root: &Path) -> PathBuf {
    if std::fs::symlink_metadata(root).is_ok_and(|m| m.is_dir()) {
        return root.to_path_buf();
    }
    let mut dir = root.parent().unwrap_or(root);
    while !dir.is_dir() {
        match dir.parent() {
            Some(p) => dir = p,
            None => break,
        }
    }
    dir.to_path_buf()
}

/// Creates the (empty) cookie file `path`; fails if anything is there.
pub(crate) fn create_cookie(path: &Path) -> io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map(drop)
}

/// Removes cookie file `path`, if it is still there.
pub(crate) fn remove_cookie(path: &Path) {
    let _ = std::fs::remove_file(path);
}

/// Gives the heap memory freed (by a big walk) back to the OS: glibc keeps
/// it otherwise. A few milliseconds; nothing elsewhere.
pub(crate) fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only releases free memory; any thread may call
    // it at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Whether the inode at `path` changed (content or metadata) at or after
/// `since`, by its ctime, which user code cannot set back.
pub(crate) fn changed_since(path: &Path, since: SystemTime) -> bool {
    #[cfg(unix)]
    let ctime = std::fs::symlink_metadata(path).map(|m| ctime_of(&m));
    #[cfg(windows)]
    let ctime = windows::stat(path, false).map(|s| ctime_from(s.ctime.0, s.ctime.1));
    ctime.is_ok_and(|c| c >= since)
}

/// Those of `names` (entries of directory `dir`) whose inode changed at or
/// after `since`, as [`changed_since`] says. On Linux one descriptor of
/// `dir` serves every `fstatat`: no walk of `dir`'s path and no allocation
/// per name (an overflow's rescan asks this of every file in the tree).
pub(crate) fn changed_among<'a>(
    dir: &Path,
    names: impl IntoIterator<Item = &'a OsStr>,
    since: SystemTime,
) -> Vec<OsString> {
    #[cfg(target_os = "linux")]
    if let Ok(d) = std::fs::File::open(dir) {
        use std::os::fd::AsRawFd;
        let mut c_name = Vec::with_capacity(256);
        return names
            .into_iter()
            .filter(|n| {
                let bytes = n.as_encoded_bytes();
                if bytes.contains(&0) {
                    return false;
                }
                c_name.clear();
                c_name.extend_from_slice(bytes);
                c_name.push(0);
                let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
                // SAFETY: `c_name` is NUL-terminated; `st` is written in
                // full when the call succeeds, and read only then.
                let st = unsafe {
                    if libc::fstatat(
                        d.as_raw_fd(),
                        c_name.as_ptr().cast(),
                        st.as_mut_ptr(),
                        libc::AT_SYMLINK_NOFOLLOW,
                    ) != 0
                    {
                        return false;
                    }
                    st.assume_init()
                };
                ctime_from(st.st_ctime, st.st_ctime_nsec) >= since
            })
            .map(OsStr::to_os_string)
            .collect();
    }
    names
        .into_iter()
        .filter(|n| changed_since(&dir.join(n), since))
        .map(OsStr::to_os_string)
        .collect()
}

#[cfg(unix)]
fn ctime_of(m: &std::fs::Metadata) -> SystemTime {
    use std::os::unix::fs::MetadataExt;
    ctime_from(m.ctime(), m.ctime_nsec())
}

fn ctime_from(secs: i64, nanos: i64) -> SystemTime {
    let nanos = nanos.clamp(0, 999_999_999) as u32;
    if secs >= 0 {
        SystemTime::UNIX_EPOCH + std::time::Duration::new(secs as u64, nanos)
    } else {
        SystemTime::UNIX_EPOCH
    }
}

/// The identity (device, inode) of the directory at `dir` (`follow`: `dir`
/// may be a symlink to one); "not a directory" for anything else.
pub(crate) fn identity(dir: &Path, follow: bool) -> io::Result<DirIdent> {
    #[cfg(unix)]
    let (is_dir, ident) = {
        use std::os::unix::fs::MetadataExt;
        let m = if follow {
            std::fs::metadata(dir)?
        } else {
            std::fs::symlink_metadata(dir)?
        };
        (m.is_dir(), (m.dev(), m.ino()))
    };
    #[cfg(windows)]
    let (is_dir, ident) = {
        let s = windows::stat(dir, follow)?;
        (s.kind == FileType::Dir, s.ident)
    };
    if !is_dir {
        return Err(io::Error::from(io::ErrorKind::NotADirectory));
    }
    Ok(ident)
}

/// The text of a small file (an ignore file): `None` if it is missing,
/// unreadable, not UTF-8, or larger than `max` bytes.
pub(crate) fn read_small(path: &Path, max: u64) -> Option<String> {
    use std::io::Read;
    let f = std::fs::File::open(path).ok()?;
    let mut text = String::new();
    f.take(max + 1).read_to_string(&mut text).ok()?;
    (text.len() as u64 <= max).then_some(text)
}

/// Git's global excludes file (it may not exist): `core.excludesFile`
/// of git's global configuration, else its default, as the `ignore`
/// crate reads them (`$GIT_CONFIG_GLOBAL`, `~/.gitconfig`,
/// `$XDG_CONFIG_HOME/git/config`, `/etc/gitconfig`; else
/// `$XDG_CONFIG_HOME/git/ignore` or `~/.config/git/ignore`).
pub(crate) fn git_excludes_file() -> Option<PathBuf> {
    ::ignore::gitignore::gitconfig_excludes_path()
}

/// For a path that does not exist: its nearest existing ancestor, if that
/// is not a directory (so the path cannot come to exist while it stays).
pub(crate) fn blocked_by(path: &Path) -> Option<PathBuf> {
    let existing = path
        .ancestors()
        .skip(1)
        .find(|a| std::fs::symlink_metadata(a).is_ok())?;
    (!is_dir_following(existing)).then(|| existing.to_path_buf())
}

/// Whether `path` is a directory, following symlinks.
pub(crate) fn is_dir_following(path: &Path) -> bool {
    std::fs::metadata(path).map(|m| m.is_dir()).unwrap_or(false)
}

#[cfg(all(test, target_os = "linux"))]
mod tests;

/// The device (Windows: the volume serial number) of what is at `path`,
/// following symlinks; `None` if nothing is there.
pub(crate) fn device_of(path: &Path) -> Option<u64> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).ok().map(|m| m.dev())
    }
    #[cfg(windows)]
    {
        windows::stat(path, true).ok().map(|s| s.ident.0)
    }
}

/// The bytes of a whole file; `None` if it does not exist.
pub(crate) fn read_whole(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Replaces the file at `path` with `bytes` atomically: they are written
/// to a temporary file beside it, flushed to the disk, and renamed over
/// it (and, on Unix, the directory is flushed too, so the rename itself
/// survives a crash). A crash at any point leaves either the old file or
/// the new one, whole. The directory is created if needed.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let mut name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?
        .to_os_string();
    name.push(format!(".tmp-{}", std::process::id()));
    let tmp = dir.join(name);
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    #[cfg(unix)]
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// One `make()` per worker [`in_parallel`] will run over `items` items:
/// what each worker keeps for itself (made here, on the calling thread).
pub(crate) fn workers<S>(items: usize, make: impl FnMut() -> S) -> Vec<S> {
    let n = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
        .min(items.div_ceil(16).max(1));
    std::iter::repeat_with(make).take(n).collect()
}

/// `f` of every item, on one thread per state in `states` (see
/// [`workers`]; the calling thread is one of them), each thread with its
/// state, for work that is mostly waiting on the file system (a `stat` of
/// every entry of many directories). The results come in no particular
/// order.
pub(crate) fn in_parallel<T: Sync, S: Send, R: Send>(
    items: &[T],
    states: Vec<S>,
    f: impl Fn(&mut S, &T) -> R + Sync,
) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let work = |mut state: S| {
        let mut out = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(i) else {
                return out;
            };
            out.push(f(&mut state, item));
        }
    };
    let mut states = states.into_iter();
    let Some(first) = states.next() else {
        return Vec::new();
    };
    std::thread::scope(|s| {
        let helpers: Vec<_> = states
            .map(|state| std::thread::Builder::new().spawn_scoped(s, || work(state)))
            .collect();
        let mut all = work(first);
        // A thread that could not be started took no item (the others
        // took them); one that panicked passes its panic on (its items
        // are not lost quietly).
        for h in helpers.into_iter().flatten() {
            all.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        all
    })
}
