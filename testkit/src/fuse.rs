//! A FUSE bind mount (`bindfs`) for the shared-storage tests (the
//! library's and the chart server's).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A FUSE bind mount of a directory (`bindfs`): writes to the directory
/// itself are what another host's writes look like through a shared
/// mount (no event on the mount). Unmounted on drop.
pub struct BindMount {
    /// The directory mounted (kept to mount it again).
    src: PathBuf,
    mnt: PathBuf,
    /// Stopped with SIGSTOP (a server that stopped answering).
    paused: bool,
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
            src: src.to_path_buf(),
            mnt: mnt.to_path_buf(),
            paused: false,
        })
    }

    /// The bindfs process serving this mount (found by its command line).
    fn pid(&self) -> String {
        let want = self.mnt.as_os_str().as_encoded_bytes();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
                continue;
            };
            let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
            if args.first().is_some_and(|a| a.ends_with(b"bindfs")) && args.contains(&want) {
                return e.file_name().to_string_lossy().into_owned();
            }
        }
        panic!("no bindfs process serves {}", self.mnt.display())
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.pid()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {sig} bindfs for {}", self.mnt.display());
    }

    /// Stops the mount's server (SIGSTOP): every look below the mount
    /// hangs until [`resume`](Self::resume), or for at most `at_most`: a
    /// detached watchdog lets it go on then, so that a test process killed
    /// meanwhile (a timeout, SIGKILL: no drop runs) does not leave a
    /// stopped server behind, which would hang whatever looks at the
    /// machine's mounts (Wine's mount manager does, at every volume query).
    pub fn pause(&mut self, at_most: std::time::Duration) {
        let pid = self.pid();
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "sleep {}; kill -CONT {pid}",
                at_most.as_secs().max(1)
            ))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        assert!(
            watchdog.is_ok(),
            "cannot start the watchdog that resumes bindfs"
        );
        self.signal("-STOP");
        self.paused = true;
    }

    /// Lets a paused server go on (SIGCONT).
    pub fn resume(&mut self) {
        if std::mem::take(&mut self.paused) {
            self.signal("-CONT");
        }
    }
}

/// The device of what is at `path`.
fn device(path: &Path) -> u64 {
    let m = std::fs::metadata(path).unwrap_or_else(|e| panic!("stat {}: {e}", path.display()));
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        m.dev()
    }
    // (No bind mount is made elsewhere: `bind_mount` skips.)
    #[cfg(not(unix))]
    {
        let _ = m;
        0
    }
}

impl BindMount {
    /// Whether the mount is there: its mount point is on another device
    /// than the directory holding it.
    pub fn mounted(&self) -> bool {
        device(&self.mnt) != device(self.mnt.parent().unwrap())
    }

    /// Unmounts it (as an administrator would, with `fusermount -u`):
    /// returns once the mount point shows the directory below it.
    /// A mount in use at that instant (a poll's look holds a directory
    /// open for a moment, as `ls` would) refuses with "busy": tried again
    /// then, for up to 10 s.
    pub fn unmount(&mut self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let out = Command::new("fusermount")
                .arg("-u")
                .arg(&self.mnt)
                .output()
                .expect("cannot run fusermount");
            if out.status.success() {
                break;
            }
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("busy") && std::time::Instant::now() < deadline,
                "fusermount -u {}: {}",
                self.mnt.display(),
                err.trim()
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!self.mounted(), "{} still mounted", self.mnt.display());
    }

    /// Mounts it again (after [`unmount`](Self::unmount)).
    pub fn mount_again(&mut self) {
        let again = BindMount::mount(&self.src, &self.mnt)
            .unwrap_or_else(|e| panic!("mounting again: {e}"));
        std::mem::forget(again); // (this handle unmounts it on drop)
        assert!(self.mounted(), "{} not mounted again", self.mnt.display());
    }
}

impl Drop for BindMount {
    fn drop(&mut self) {
        self.resume();
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

/// A storage directory shared by replicas, each with a view of its own:
/// a bindfs mount per replica (writes to [`SharedStorage::src`] reach no
/// replica as an event, as another host's writes on NFS), or, where FUSE
/// cannot mount, `src` itself for all. The mounts go before the directory.
pub struct SharedStorage {
    /// Unmounted (dropped) before their directory is removed.
    mounts: Vec<BindMount>,
    dir: tempfile::TempDir,
    /// The storage itself.
    pub src: PathBuf,
    fuse: bool,
}

impl SharedStorage {
    /// An empty storage directory in a temporary directory.
    #[allow(clippy::new_without_default)]
    pub fn new() -> SharedStorage {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("storage");
        std::fs::create_dir(&src).unwrap();
        SharedStorage {
            mounts: Vec::new(),
            dir,
            src,
            fuse: true,
        }
    }

    /// A new view of the storage for one replica: a mount of its own, or
    /// `src` itself once FUSE has failed to mount.
    pub fn mount(&mut self) -> PathBuf {
        let mnt = self.dir.path().join(format!("mnt{}", self.mounts.len()));
        std::fs::create_dir(&mnt).unwrap();
        if self.fuse {
            match bind_mount(&self.src, &mnt) {
                Some(m) => {
                    self.mounts.push(m);
                    return mnt;
                }
                None => self.fuse = false,
            }
        }
        self.src.clone()
    }
}
