//! The `watch` example's flags and output lines are a public contract:
//! `READY`, then `created|modified|removed<TAB>path` (raw bytes on Unix,
//! WTF-8 on Windows), exit 0 on SIGTERM, 2 on a bad flag. Run against the
//! built example binary.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use crossbeam_channel::Receiver;

use common::WAIT;

/// The example binary cargo built beside this test.
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().unwrap().parent().unwrap();
    let bin = profile
        .join("examples")
        .join(format!("watch{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "the watch example is not built at {} (cargo test builds examples)",
        bin.display()
    );
    bin
}

struct Running {
    child: Child,
    lines: Receiver<Vec<u8>>,
}

impl Running {
    fn start(args: &[&str], dir: &Path) -> Running {
        let mut child = Command::new(example())
            .args(args)
            .arg(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the watch example");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = crossbeam_channel::unbounded();
        std::thread::spawn(move || {
            loop {
                let mut line = Vec::new();
                match out.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        line.pop();
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let r = Running { child, lines };
        r.expect(b"READY");
        r
    }

    /// Waits for the line `want`, skipping others; panics naming it at the
    /// deadline.
    fn expect(&self, want: &[u8]) {
        let deadline = Instant::now() + WAIT;
        let mut seen = Vec::new();
        loop {
            match self.lines.recv_deadline(deadline) {
                Ok(l) if l == want => return,
                Ok(l) => seen.push(String::from_utf8_lossy(&l).into_owned()),
                Err(_) => panic!(
                    "no line {:?} from the watch example within {WAIT:?}; saw {seen:?}",
                    String::from_utf8_lossy(want)
                ),
            }
        }
    }

    /// SIGTERM; the example must exit 0. (On Windows, where no console
    /// event can be sent to one child alone, it is ended, and its status
    /// says nothing.)
    fn stop(self) {
        #[cfg(windows)]
        {
            let mut child = self.child;
            let _ = child.kill();
            let _ = child.wait();
        }
        #[cfg(unix)]
        {
            // SAFETY: kill on our own child's pid.
            unsafe {
                libc::kill(self.child.id() as i32, libc::SIGTERM);
            }
            self.wait_for_a_clean_exit();
        }
    }

    #[cfg(unix)]
    fn wait_for_a_clean_exit(mut self) {
        let (tx, rx) = crossbeam_channel::bounded(1);
        std::thread::spawn(move || {
            let _ = tx.send(self.child.wait());
        });
        let status = rx
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("no exit within {WAIT:?} of SIGTERM"))
            .unwrap();
        assert!(status.success(), "exit status {status:?} after SIGTERM");
    }
}

/// The line the example prints for a change: on Unix the path's raw
/// bytes, on Windows its UTF-8 (the tests' names are valid UTF-16, whose
/// WTF-8 is UTF-8).
fn line(kind: &str, p: &Path) -> Vec<u8> {
    let mut l = kind.as_bytes().to_vec();
    l.push(b'\t');
    #[cfg(unix)]
    l.extend_from_slice(std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str()));
    #[cfg(windows)]
    l.extend_from_slice(p.to_str().expect("a valid UTF-16 name").as_bytes());
    l
}

/// The directory as the example will print it: resolved on Unix (macOS's
/// `/tmp` is a link); as it is on Windows (resolving gives a `\\?\` path).
fn real(dir: &Path) -> PathBuf {
    if cfg!(windows) {
        dir.to_path_buf()
    } else {
        dir.canonicalize().unwrap()
    }
}

fn changes_are_printed(args: &[&str]) {
    let d = tempfile::tempdir().unwrap();
    let dir = real(d.path());
    let w = Running::start(args, &dir);
    let f = dir.join("f.txt");
    std::fs::write(&f, "1").unwrap();
    w.expect(&line("created", &f));
    std::fs::write(&f, "22").unwrap();
    w.expect(&line("modified", &f));
    // A name that is not UTF-8 comes out as its raw bytes (not on macOS,
    // whose file systems refuse it).
    #[cfg(all(unix, not(target_os = "macos")))]
    {
        let odd =
            dir.join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"odd\xff.txt"));
        std::fs::write(&odd, "x").unwrap();
        w.expect(&line("created", &odd));
    }
    // Beyond ASCII, as UTF-8.
    let accents = dir.join("café-ü.txt");
    std::fs::write(&accents, "x").unwrap();
    w.expect(&line("created", &accents));
    std::fs::remove_file(&f).unwrap();
    w.expect(&line("removed", &f));
    w.stop();
}

#[test]
fn default_backend_prints_changes() {
    changes_are_printed(&["--debounce", "10"]);
}

#[test]
fn poll_backend_prints_changes() {
    changes_are_printed(&[
        "--debounce",
        "10",
        "--backend",
        "poll",
        "--poll-interval",
        "20",
    ]);
}

#[test]
fn poll_interval_alone_means_polling() {
    changes_are_printed(&["--poll-interval", "20"]);
}

#[test]
fn help_goes_to_stdout_and_exits_0() {
    for flag in ["--help", "-h"] {
        let out = Command::new(example()).arg(flag).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{flag}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with("usage: watch"), "{flag}: {text:?}");
        assert!(out.stderr.is_empty(), "{flag}");
    }
}

#[test]
fn bad_flags_exit_2_with_usage() {
    let d = tempfile::tempdir().unwrap();
    for args in [
        vec!["--backend", "carrier-pigeon"],
        vec!["--poll-interval", "0"],
        vec!["--poll-interval", "soon"],
        vec!["--backend", "native", "--poll-interval", "20"],
        vec!["--no-such-flag"],
    ] {
        let out = Command::new(example())
            .args(&args)
            .arg(d.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty(), "{args:?}: says why on stderr");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    }
}

#[test]
fn initial_scan_prints_what_exists_as_created() {
    let d = tempfile::tempdir().unwrap();
    let dir = real(d.path());
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/old.txt"), "x").unwrap();
    let w = Running::start(&["--debounce", "10", "--initial-scan"], &dir);
    w.expect(&line("created", &dir.join("sub").join("old.txt")));
    let f = dir.join("new.txt");
    std::fs::write(&f, "1").unwrap();
    w.expect(&line("created", &f));
    w.stop();
}

#[test]
fn stderr_says_which_backend_each_root_got() {
    let d = tempfile::tempdir().unwrap();
    let dir = real(d.path());
    for (args, want) in [
        (
            vec![],
            if cfg!(target_os = "linux") {
                "watch: root: native: "
            } else {
                "watch: root: portable: "
            },
        ),
        (
            vec!["--backend", "poll", "--poll-interval", "20"],
            "watch: root: poll every 20ms: chosen at ",
        ),
    ] {
        let mut child = Command::new(example())
            .args(&args)
            .arg(&dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = BufReader::new(child.stderr.take().unwrap());
        let (tx, rx) = crossbeam_channel::unbounded();
        std::thread::spawn(move || {
            for l in err.lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    return;
                }
            }
        });
        let deadline = Instant::now() + WAIT;
        let mut seen = Vec::new();
        let found = loop {
            match rx.recv_deadline(deadline) {
                Ok(l) if l.starts_with(want) => break l,
                Ok(l) => seen.push(l),
                Err(_) => panic!("{args:?}: no stderr line {want:?} within {WAIT:?}; saw {seen:?}"),
            }
        };
        assert!(
            found.ends_with(&format!(" at {}", dir.display())),
            "{found}"
        );
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// On a terminal (a pty from `script`), indexing a large tree draws a
/// progress line on stderr before `READY`; the other tests run without a
/// terminal and see no such line. (Unix: `script` makes the pty.)
#[cfg(unix)]
#[test]
fn a_terminal_gets_a_progress_line_while_indexing() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("\n*** SKIPPED: no `script` (util-linux) to give the example a terminal\n");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let dir = real(d.path());
    // Large enough that the first walk takes well over the 100 ms between
    // progress lines (about a second in a debug build).
    for i in 0..200 {
        for j in 0..100 {
            let sub = dir.join(format!("d{i}/e{j}"));
            std::fs::create_dir_all(&sub).unwrap();
        }
    }
    let cmd = format!("{} {}", example().display(), dir.display());
    let mut child = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        loop {
            match std::io::Read::read(&mut out, &mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if tx.send(buf[..n].to_vec()).is_err() {
                        return;
                    }
                }
            }
        }
    });
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("READY") {
        match rx.recv_deadline(deadline) {
            Ok(chunk) => seen.extend(chunk),
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let text = String::from_utf8_lossy(&seen);
    let ready = text
        .find("READY")
        .unwrap_or_else(|| panic!("no READY within {WAIT:?}; saw {text:?}"));
    let progress = text
        .find("watch: indexing: ")
        .unwrap_or_else(|| panic!("no progress line on the terminal; saw {text:?}"));
    assert!(progress < ready, "progress comes before READY: {text:?}");
}
