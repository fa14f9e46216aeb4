//! A FUSE file system whose operations fail on demand (`faultfs.py`
//! beside this file: a passthrough of a source directory, in Python with
//! Debian's FUSE bindings, `python3-fusepy`), for the storage-error tests
//! (`tests/storage_errors.rs`). Linux only.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The script, in the source tree.
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/faultfs.py");

/// How long mounting, switching and unmounting may take.
const DEADLINE: Duration = Duration::from_secs(10);

/// What the operations on a path below the mount do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Errno {
    /// `EIO`: the storage failed.
    Eio,
    /// `ESTALE`: a handle the server no longer knows (NFS's classic).
    Estale,
}

impl Errno {
    fn name(self) -> &'static str {
        match self {
            Errno::Eio => "EIO",
            Errno::Estale => "ESTALE",
        }
    }

    /// What a failed operation says (`strerror`, as `io::Error` shows it).
    pub fn says(self) -> &'static str {
        match self {
            Errno::Eio => "Input/output error",
            Errno::Estale => "Stale file handle",
        }
    }
}

/// A mount of `faultfs.py` in a temporary directory of its own: `src()`
/// (the source: writes there are another host's writes, as with
/// `BindMount`), `mnt()` (the mount), and the control directory beside
/// them. Unmounted on drop (`fusermount -u -z`), its server waited for.
pub struct FaultFs {
    child: Child,
    src: PathBuf,
    mnt: PathBuf,
    ctl: PathBuf,
    seq: u64,
    /// Dropped last: after the unmount.
    _dir: tempfile::TempDir,
}

impl FaultFs {
    /// The source directory (writes here are not seen through events on
    /// the mount).
    pub fn src(&self) -> &Path {
        &self.src
    }

    /// The mount point.
    pub fn mnt(&self) -> &Path {
        &self.mnt
    }

    /// Every operation on `below` (a path inside the mount, `/` for all of
    /// it, `/sub` for `sub` and what is below it) fails with `errno` from
    /// now on, until [`heal`](Self::heal). Returns once the file system
    /// acknowledged it: an operation that begins afterwards fails.
    pub fn fail(&mut self, errno: Errno, below: &str) {
        self.switch(&format!("{} {below}", errno.name()));
    }

    /// Every operation passes through again (acknowledged, as for
    /// [`fail`](Self::fail)).
    pub fn heal(&mut self) {
        self.switch("ok");
    }

    /// Writes mode `line` to the control file (beside it, then renamed
    /// over: the file system reads it whole or not at all) and waits for
    /// the acknowledgment of its sequence number. The file system reads
    /// the control file at each operation, so the wait makes operations
    /// (a `stat` of the mount, whose answer does not matter) until one of
    /// them has read it.
    fn switch(&mut self, line: &str) {
        self.seq += 1;
        let seq = self.seq.to_string();
        let tmp = self.ctl.join("mode.tmp");
        fs::write(&tmp, format!("{seq} {line}\n")).expect("write faultfs's mode");
        fs::rename(&tmp, self.ctl.join("mode")).expect("rename faultfs's mode");
        let ack = self.ctl.join("ack");
        let began = Instant::now();
        loop {
            let _ = fs::symlink_metadata(&self.mnt);
            if fs::read_to_string(&ack).is_ok_and(|a| a.trim() == seq) {
                return;
            }
            assert!(
                began.elapsed() < DEADLINE,
                "faultfs never acknowledged mode {seq} ({line}) in {DEADLINE:?}: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The operations that failed so far, in order: (operation, path in
    /// the mount), as `faultfs.py` noted them.
    pub fn failures(&self) -> Vec<(String, String)> {
        fs::read_to_string(self.ctl.join("failed"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let mut w = l.splitn(3, ' ').skip(1);
                Some((w.next()?.to_owned(), w.next()?.to_owned()))
            })
            .collect()
    }

    /// How many operations on `path` (in the mount: `/`, `/sub`) failed
    /// after the first `since` failures (see [`failures`](Self::failures)).
    /// Two mean that a look at it began after the first of them, and
    /// failed.
    pub fn failed_since(&self, since: usize, path: &str) -> usize {
        let all = self.failures();
        all.iter().skip(since).filter(|(_, p)| p == path).count()
    }

    /// Waits until `n` operations on `path` failed after the first `since`
    /// failures ([`failed_since`](Self::failed_since)). Panics naming
    /// `what` at the deadline.
    pub fn wait_failed(&self, since: usize, path: &str, n: usize, what: &str) {
        let began = Instant::now();
        loop {
            let seen = self.failed_since(since, path);
            if seen >= n {
                return;
            }
            assert!(
                began.elapsed() < crate::WAIT,
                "timed out after {:?} waiting for {what} ({n} failed operations on {path} \
                 after the first {since}; {seen} so far; all: {:?})",
                crate::WAIT,
                self.failures()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// What the server said on stderr so far.
    fn stderr(&self) -> String {
        let said = fs::read_to_string(self.ctl.join("stderr")).unwrap_or_default();
        format!("faultfs's stderr: {:?}", said.trim())
    }

    fn mount() -> Result<FaultFs, String> {
        let python = python().ok_or_else(|| {
            "no Python with the FUSE bindings (Debian: apt-get install python3-fusepy; \
             or name one in SPECWATCH_FAULTFS_PYTHON)"
                .to_owned()
        })?;
        if !Path::new("/dev/fuse").exists() {
            return Err("no /dev/fuse".into());
        }
        let dir = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
        let (src, mnt, ctl) = (
            dir.path().join("src"),
            dir.path().join("mnt"),
            dir.path().join("ctl"),
        );
        for d in [&src, &mnt, &ctl] {
            fs::create_dir(d).map_err(|e| format!("mkdir {}: {e}", d.display()))?;
        }
        let stderr = fs::File::create(ctl.join("stderr")).map_err(|e| e.to_string())?;
        let child = Command::new(&python)
            .arg(SCRIPT)
            .args([&src, &mnt, &ctl])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
        let mut me = FaultFs {
            child,
            src,
            mnt,
            ctl,
            seq: 0,
            _dir: dir,
        };
        // Mounted once the mount point is on another device than its
        // parent.
        let dev = |p: &Path| {
            use std::os::unix::fs::MetadataExt;
            fs::metadata(p).map(|m| m.dev()).ok()
        };
        let began = Instant::now();
        loop {
            if let Ok(Some(status)) = me.child.try_wait() {
                return Err(format!(
                    "faultfs.py exited ({status}) before mounting: {}",
                    me.stderr()
                ));
            }
            let parent = dev(me.mnt.parent().expect("a parent"));
            if dev(&me.mnt).is_some_and(|d| Some(d) != parent) {
                return Ok(me);
            }
            if began.elapsed() > DEADLINE {
                return Err(format!("not mounted after {DEADLINE:?}: {}", me.stderr()));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// The first Python that has the FUSE bindings: `SPECWATCH_FAULTFS_PYTHON`,
/// Debian's own (`/usr/bin/python3`, where `python3-fusepy` installs; a
/// `python3` first on `PATH`, pyenv's say, does not see it), `python3`.
fn python() -> Option<PathBuf> {
    let named = std::env::var_os("SPECWATCH_FAULTFS_PYTHON").map(PathBuf::from);
    named
        .into_iter()
        .chain(["/usr/bin/python3", "python3"].map(PathBuf::from))
        .find(|py| {
            Command::new(py)
                .args([SCRIPT, "--check"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
}

impl Drop for FaultFs {
    fn drop(&mut self) {
        let unmounted = Command::new("fusermount")
            .args(["-u", "-z"])
            .arg(&self.mnt)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            // (No fusermount: as root, umount does it.)
            let _ = Command::new("umount")
                .arg("-l")
                .arg(&self.mnt)
                .stderr(Stdio::null())
                .status();
        }
        // The server exits once the mount is gone; one that does not is
        // killed.
        let began = Instant::now();
        while began.elapsed() < DEADLINE {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Mounts a fault file system, or says loudly why not: a failure when
/// `SPECWATCH_REQUIRE_FAULTFS` is set (CI installs `python3-fusepy` and
/// sets it), else a skip.
pub fn fault_mount() -> Option<FaultFs> {
    match FaultFs::mount() {
        Ok(m) => Some(m),
        Err(why) if std::env::var_os("SPECWATCH_REQUIRE_FAULTFS").is_some() => panic!(
            "the fault file system is required here (SPECWATCH_REQUIRE_FAULTFS) and cannot be \
             mounted: {why}"
        ),
        Err(why) => {
            crate::note(&format!(
                "\n*** SKIPPED: the storage-error test cannot mount its FUSE file system: {why}\n\
                 *** (set SPECWATCH_REQUIRE_FAULTFS=1 to make this a failure)\n"
            ));
            None
        }
    }
}
