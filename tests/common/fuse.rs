//! A FUSE bind mount (`bindfs`) for the shared-storage tests, shared by
//! `tests/backends.rs` and `tests/chart_index/` (included by `#[path]`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A FUSE bind mount of a directory (`bindfs`): writes to the directory
/// itself are what another host's writes look like through a shared
/// mount (no event on the mount). Unmounted on drop.
pub struct BindMount {
    mnt: PathBuf,
}

impl BindMount {
    fn mount(src: &Path, mnt: &Path) -> Result<BindMount, String> {
        let out = Command::new("bindfs")
            .arg(src)
            .arg(mnt)
            .output()
            .map_err(|e| format!("cannot run bindfs ({e}); install it (Debian: bindfs)"))?;
        if !out.status.success() {
            return Err(format!(
                "bindfs {} {} failed: {}",
                src.display(),
                mnt.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(BindMount {
            mnt: mnt.to_path_buf(),
        })
    }
}

impl Drop for BindMount {
    fn drop(&mut self) {
        let _ = Command::new("fusermount")
            .args(["-u", "-z"])
            .arg(&self.mnt)
            .status();
    }
}

/// Mounts `src` on `mnt`, or says loudly why not: a failure when
/// `SPECWATCH_REQUIRE_FUSE` is set (CI installs bindfs and sets it), else
/// a skip.
pub fn bind_mount(src: &Path, mnt: &Path) -> Option<BindMount> {
    if !cfg!(target_os = "linux") {
        eprintln!("\n*** SKIPPED: the FUSE tests mount with bindfs, on Linux only\n");
        return None;
    }
    match BindMount::mount(src, mnt) {
        Ok(m) => Some(m),
        Err(why) if std::env::var_os("SPECWATCH_REQUIRE_FUSE").is_some() => {
            panic!("FUSE is required here (SPECWATCH_REQUIRE_FUSE) and cannot be mounted: {why}")
        }
        Err(why) => {
            eprintln!(
                "\n*** SKIPPED: the FUSE test cannot mount: {why}\n\
                 *** (set SPECWATCH_REQUIRE_FUSE=1 to make this a failure)\n"
            );
            None
        }
    }
}
