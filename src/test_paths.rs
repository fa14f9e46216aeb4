//! Absolute paths for unit tests, written the Unix way: `abs("/a/b")` is
//! `/a/b` on Unix and `C:\a\b` on Windows, where `/a/b` has no drive and
//! so is relative (a spec refuses it). Tests that never ask whether a path
//! is absolute keep plain `/a/b`.

use std::path::PathBuf;

/// `unix` (which starts with `/`) as an absolute path of this platform.
pub(crate) fn abs(unix: &str) -> PathBuf {
    debug_assert!(unix.starts_with('/'), "{unix} is not absolute on Unix");
    if cfg!(windows) {
        PathBuf::from(format!("C:{}", unix.replace('/', "\\")))
    } else {
        PathBuf::from(unix)
    }
}
