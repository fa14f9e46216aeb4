//! Test helpers shared by the workspace's packages: the library's tests
//! (`tests/common` re-exports these) and the chart server's. Nothing here
//! knows specwatch: programs run as processes ([`process`]), FUSE mounts
//! ([`fuse`]: bindfs; [`faultfs`]: a file system that fails on demand),
//! how a test says it skips ([`skip`], [`note`]) and Windows' quirks under
//! Wine ([`wine`], [`retry_while_handles_open`]).

use std::path::Path;
use std::time::Duration;

#[cfg(unix)]
pub mod faultfs;
pub mod fuse;
pub mod process;

/// How long a test waits for what it awaits before it fails, saying what.
pub const WAIT: Duration = Duration::from_secs(20);

/// Whether this Windows test runs under Wine (its `ntdll.dll` exports
/// `wine_get_version`), where a few of Windows' behaviours differ; a test
/// that skips there says so with [`skip_on_wine`].
#[cfg(windows)]
pub fn wine() -> bool {
    unsafe extern "system" {
        fn GetModuleHandleA(name: *const u8) -> *mut std::ffi::c_void;
        fn GetProcAddress(
            module: *mut std::ffi::c_void,
            name: *const u8,
        ) -> Option<unsafe extern "system" fn()>;
    }
    // SAFETY: NUL-terminated names; ntdll is loaded in every process.
    unsafe {
        let ntdll = GetModuleHandleA(c"ntdll.dll".as_ptr().cast());
        !ntdll.is_null() && GetProcAddress(ntdll, c"wine_get_version".as_ptr().cast()).is_some()
    }
}

#[cfg(not(windows))]
pub fn wine() -> bool {
    false
}

/// Under Wine: says `*** SKIPPED on Wine: why` (see [`note`]) and returns
/// true (the caller returns). Elsewhere false.
pub fn skip_on_wine(why: &str) -> bool {
    let skip = wine();
    if skip {
        note(&format!("*** SKIPPED on Wine: {why}"));
    }
    skip
}

/// Runs `op` until it succeeds, for 10 s at most. On Windows a file
/// system operation can fail while another handle is open on its path:
/// a delete completes only when the last handle closes (so the name still
/// exists: `AlreadyExists`), and a rename over a file being read is a
/// sharing violation (`PermissionDenied`). A watcher holds such handles
/// for a moment (a poller listing a directory, a hash reading a file);
/// editors and build tools on Windows retry the same way. Any other
/// error fails at once, naming `what`.
pub fn retry_while_handles_open(what: &str, mut op: impl FnMut() -> std::io::Result<()>) {
    use std::io::ErrorKind;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match op() {
            Ok(()) => return,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::PermissionDenied | ErrorKind::AlreadyExists
                ) && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Err(e) => panic!("{what} (tried for 10 s while other handles were open): {e}"),
        }
    }
}

/// Says `*** SKIPPED: why` (see [`note`]) and returns true (for a skip
/// decided by the caller, on a known problem that the docs name).
pub fn skip(why: &str) -> bool {
    note(&format!("*** SKIPPED: {why}"));
    true
}

/// Prints `line` on stderr, and, where `SPECWATCH_NOTES` names a file,
/// adds it there with the test's name: libtest hides a passing test's
/// output, and CI prints that file after the run, so that what was
/// skipped (and why) is seen.
pub fn note(line: &str) {
    eprintln!("{line}");
    if let Some(path) = std::env::var_os("SPECWATCH_NOTES") {
        let test = std::thread::current().name().unwrap_or("?").to_owned();
        let exe = std::env::current_exe().ok();
        let binary = exe
            .as_deref()
            .and_then(Path::file_stem)
            .and_then(|s| s.to_str())
            .and_then(|s| s.split('-').next())
            .unwrap_or("?")
            .to_owned();
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{binary}::{test}: {line}");
        }
    }
}
