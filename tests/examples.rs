//! The `build_loop` and `reconcile_from_config` examples, run as the built
//! example binaries: every wait is for a line they print, with a deadline.
//! The commands build_loop runs are `sh` scripts on Unix, `cmd` and the
//! `watch` example on Windows.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use specwatch::crossbeam_channel::{self as channel, Receiver};

const WAIT: Duration = Duration::from_secs(20);

/// An example binary cargo built beside this test.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().unwrap().parent().unwrap();
    let bin = profile
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "the {name} example is not built at {} (a plain `cargo test` builds the \
         examples; with `--test examples`, run `cargo build --examples` with the \
         same features first)",
        bin.display()
    );
    bin
}

fn tmp() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().canonicalize().unwrap();
    (d, p)
}

/// A running example: its stdout and stderr lines, read by two threads
/// into one channel, and its stdin.
struct Proc {
    name: &'static str,
    child: Option<Child>,
    #[cfg_attr(
        not(unix),
        expect(dead_code, reason = "only the Unix tests' commands read stdin")
    )]
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Proc {
    fn start(name: &'static str, mut cmd: Command) -> Proc {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start the {name} example: {e}"));
        let (tx, lines) = channel::unbounded();
        let out: Box<dyn std::io::Read + Send> = Box::new(child.stdout.take().unwrap());
        let err: Box<dyn std::io::Read + Send> = Box::new(child.stderr.take().unwrap());
        for stream in [out, err] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for l in BufReader::new(stream).lines().map_while(Result::ok) {
                    if tx.send(l).is_err() {
                        return;
                    }
                }
            });
        }
        Proc {
            name,
            stdin: child.stdin.take(),
            child: Some(child),
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a line that `want` accepts, skipping others, and returns
    /// it; panics at the deadline naming `what` and every line seen.
    fn wait_for(&mut self, what: &str, want: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            match self.lines.recv_deadline(deadline) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if want(&l) {
                        return l;
                    }
                }
                Err(_) => panic!(
                    "{}: no line {what} within {WAIT:?}; saw:\n  {}",
                    self.name,
                    self.seen.join("\n  ")
                ),
            }
        }
    }

    fn expect(&mut self, line: &str) {
        self.wait_for(&format!("{line:?}"), |l| l == line);
    }

    /// As `expect`, but also accepts the line among those already seen
    /// (for output of the example's child, which may come before the
    /// example's own line about it).
    #[cfg(target_os = "linux")]
    fn expect_any_order(&mut self, line: &str) {
        if !self.seen.iter().any(|l| l == line) {
            self.expect(line);
        }
    }

    fn expect_prefix(&mut self, prefix: &str) -> String {
        self.wait_for(&format!("starting {prefix:?}"), |l| l.starts_with(prefix))
    }

    /// One line on the example's stdin (the `build_loop` tests' commands
    /// read one per run: the test decides when a run ends).
    #[cfg(unix)]
    fn release(&mut self) {
        let stdin = self.stdin.as_mut().unwrap();
        std::io::Write::write_all(stdin, b"go\n").unwrap();
        std::io::Write::flush(stdin).unwrap();
    }

    /// Asks it to stop (see [`ask_to_stop`]), then the exit status (within
    /// the deadline).
    fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("still running");
        ask_to_stop(&mut child);
        let (tx, rx) = channel::bounded(1);
        std::thread::spawn(move || {
            let _ = tx.send(child.wait());
            child
        });
        rx.recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("{}: no exit within {WAIT:?} of SIGTERM", self.name))
            .unwrap()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // A failed test: stop it (SIGTERM first, so that build_loop
            // stops its command's group), without waiting long.
            ask_to_stop(&mut child);
            let (tx, rx) = channel::bounded(1);
            std::thread::spawn(move || {
                let _ = child.wait();
                let _ = tx.send(());
            });
            let _ = rx.recv_timeout(Duration::from_secs(5));
        }
    }
}

/// SIGTERM on Unix. On Windows, where no console event can be sent to one
/// child alone, the process is ended (build_loop's job object ends its
/// command with it: the job closes with the last handle).
fn ask_to_stop(child: &mut Child) {
    #[cfg(unix)]
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    #[cfg(windows)]
    let _ = child.kill();
}

/// `build_loop FLAGS -- COMMAND`, in `dir`.
fn build_loop(dir: &Path, flags: &[&str], command: &[&str]) -> Proc {
    let mut cmd = Command::new(example("build_loop"));
    cmd.current_dir(dir).args(flags).arg("--").args(command);
    Proc::start("build_loop", cmd)
}

/// The pid in `build_loop: run N started (pid P)`: the run's process group.
#[cfg(target_os = "linux")]
fn pid_in(line: &str) -> i32 {
    let p = line.rsplit("(pid ").next().unwrap().trim_end_matches(')');
    p.parse().unwrap_or_else(|_| panic!("no pid in {line:?}"))
}

/// Creates `dir/name` in one step (written beside, in `aux`, then renamed
/// in), so that it is one `created` even if the batch closed mid-write.
fn put(aux: &Path, dir: &Path, name: &str) {
    let tmp = aux.join(format!("put-{name}"));
    std::fs::write(&tmp, name).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

fn runs_logged(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .count()
}

#[cfg(unix)]
#[test]
fn build_loop_queues_one_run_for_all_changes_during_a_run() {
    let (_w, watched) = tmp();
    let (_a, aux) = tmp();
    let log = aux.join("log");
    let log_s = log.to_str().unwrap();
    // Each run logs itself, then waits for a line on stdin: the test says
    // when it ends.
    let command = ["sh", "-c", r#"echo run >> "$1"; read x"#, "sh", log_s];
    let mut b = build_loop(&watched, &["--debounce", "20", "--watch", "."], &command);
    b.expect("build_loop: run 1: start");
    b.expect_prefix("build_loop: run 1 started (pid ");
    b.release();
    b.expect("build_loop: run 1 exited with status 0");

    put(&aux, &watched, "a.txt");
    b.expect("build_loop: run 2: created a.txt");
    b.expect_prefix("build_loop: run 2 started (pid ");
    // Four batches while run 2 is going (each seen queued before the next).
    for f in ["b.txt", "c.txt", "d.txt", "e.txt"] {
        put(&aux, &watched, f);
        b.expect(&format!("build_loop: queued after run 2: created {f}"));
    }
    b.release();
    b.expect("build_loop: run 2 exited with status 0");
    b.expect("build_loop: run 3: created b.txt, created c.txt, created d.txt (+1 more)");
    b.expect_prefix("build_loop: run 3 started (pid ");
    b.release();
    b.expect("build_loop: run 3 exited with status 0");

    // Nothing else is queued: the next run is for the marker alone.
    put(&aux, &watched, "marker");
    let next = b.expect_prefix("build_loop: run 4:");
    assert_eq!(next, "build_loop: run 4: created marker");
    b.release();
    b.expect("build_loop: run 4 exited with status 0");
    assert_eq!(runs_logged(&log), 4);
    let status = b.terminate();
    assert_eq!(status.code(), Some(0), "the last run's status");
}

#[cfg(unix)]
#[test]
fn build_loop_honours_gitignore_and_vcs_dirs() {
    let (_w, watched) = tmp();
    let (_a, aux) = tmp();
    std::fs::write(watched.join(".gitignore"), "# build output\nignored/\n").unwrap();
    let log = aux.join("log");
    let command = [
        "sh",
        "-c",
        r#"echo run >> "$1""#,
        "sh",
        log.to_str().unwrap(),
    ];
    let mut b = build_loop(&watched, &["--debounce", "20"], &command);
    b.expect("build_loop: run 1 exited with status 0");

    std::fs::create_dir(watched.join("ignored")).unwrap();
    std::fs::write(watched.join("ignored/x"), "x").unwrap();
    std::fs::create_dir(watched.join(".git")).unwrap();
    std::fs::write(watched.join(".git/HEAD"), "ref").unwrap();
    // Written after them: had they made a run, it would come first or name
    // them too.
    put(&aux, &watched, "marker");
    let next = b.expect_prefix("build_loop: run 2:");
    assert_eq!(next, "build_loop: run 2: created marker");
    b.expect("build_loop: run 2 exited with status 0");
    assert_eq!(runs_logged(&log), 2);
    assert_eq!(b.terminate().code(), Some(0));
}

/// Makes this test process the reaper of orphans below it, so that a
/// killed command's children (orphaned when their shell dies) can be
/// reaped here: this machine's init may never reap them, and a zombie
/// still counts as a member of its process group.
#[cfg(target_os = "linux")]
fn reap_orphans_here() {
    // SAFETY: prctl with integer arguments.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    assert_eq!(rc, 0, "prctl: {}", std::io::Error::last_os_error());
}

/// Asserts that process group `pgid` is gone: reaps its members that were
/// orphaned to this process (waiting for them, up to the deadline: a live
/// one is a failure), then `kill(-pgid, 0)` must say ESRCH.
#[cfg(target_os = "linux")]
fn assert_group_gone(pgid: i32) {
    let (tx, rx) = channel::bounded(1);
    std::thread::spawn(move || {
        loop {
            // SAFETY: waitpid on our own process group's orphans.
            let r = unsafe { libc::waitpid(-pgid, std::ptr::null_mut(), 0) };
            if r == -1 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break; // ECHILD: none (left) of ours in that group
            }
        }
        let _ = tx.send(());
    });
    rx.recv_timeout(WAIT)
        .unwrap_or_else(|_| panic!("process group {pgid} still has a live member after {WAIT:?}"));
    // SAFETY: signal 0 only checks for existence.
    let rc = unsafe { libc::kill(-pgid, 0) };
    let err = std::io::Error::last_os_error();
    assert!(
        rc == -1 && err.raw_os_error() == Some(libc::ESRCH),
        "process group {pgid} still exists (kill -0: {rc}, {err})"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn build_loop_restart_kills_the_whole_group_and_starts_again() {
    reap_orphans_here();
    let (_w, watched) = tmp();
    let (_a, aux) = tmp();
    let log = aux.join("log");
    // The shell stays (`; true`): its `sleep` is a child in its group, which
    // killing the shell alone would leave behind.
    let script = r#"echo started >> "$1"; echo "cmd: started $$" >&2; sleep 30; true"#;
    let command = ["sh", "-c", script, "sh", log.to_str().unwrap()];
    let mut b = build_loop(
        &watched,
        &["--on-busy", "restart", "--debounce", "20"],
        &command,
    );
    b.expect("build_loop: run 1: start");
    let first = pid_in(&b.expect_prefix("build_loop: run 1 started (pid "));
    b.expect_any_order(&format!("cmd: started {first}"));

    put(&aux, &watched, "a.txt");
    b.expect("build_loop: run 1 exited with signal 15");
    assert_group_gone(first);
    b.expect("build_loop: run 2: created a.txt");
    let second = pid_in(&b.expect_prefix("build_loop: run 2 started (pid "));
    assert_ne!(first, second);
    b.expect_any_order(&format!("cmd: started {second}"));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "started\nstarted\n");

    let status = b.terminate();
    // Signal 15: it stopped at SIGTERM, before the grace period's SIGKILL.
    b.expect("build_loop: run 2 exited with signal 15");
    assert_eq!(
        status.code(),
        Some(0),
        "no run ended by itself: exit 0 ({status:?})"
    );
    assert_group_gone(second);
}

/// Windows: a command (`cmd`) runs at start and again after a change.
#[cfg(windows)]
#[test]
fn build_loop_runs_its_command_again_after_a_change_on_windows() {
    let (_w, watched) = tmp();
    let (_a, aux) = tmp();
    let log = aux.join("log");
    let echo = format!("echo run>>{}", log.display());
    let mut b = build_loop(&watched, &["--debounce", "20"], &["cmd", "/C", &echo]);
    b.expect("build_loop: run 1: start");
    b.expect("build_loop: run 1 exited with status 0");
    put(&aux, &watched, "a.txt");
    b.expect("build_loop: run 2: created a.txt");
    b.expect("build_loop: run 2 exited with status 0");
    assert_eq!(runs_logged(&log), 2);
    b.terminate();
}

/// Windows: `--on-busy restart` ends the running command's job (here the
/// `watch` example, which runs until stopped) and starts it again.
#[cfg(windows)]
#[test]
fn build_loop_restart_ends_the_job_and_starts_again_on_windows() {
    let (_w, watched) = tmp();
    let (_o, other) = tmp();
    let (_a, aux) = tmp();
    let watch = example("watch");
    let command = [watch.to_str().unwrap(), other.to_str().unwrap()];
    let mut b = build_loop(
        &watched,
        &["--on-busy", "restart", "--debounce", "20"],
        &command,
    );
    b.expect("build_loop: run 1: start");
    b.expect_prefix("build_loop: run 1 started (pid ");
    b.expect("READY");
    put(&aux, &watched, "a.txt");
    b.expect("build_loop: stopping run 1 to restart");
    b.expect("build_loop: run 1 exited with status 1");
    b.expect("build_loop: run 2: created a.txt");
    b.expect_prefix("build_loop: run 2 started (pid ");
    b.expect("READY");
    b.terminate();
}

#[test]
fn build_loop_without_a_command_exits_2() {
    let out = Command::new(example("build_loop"))
        .args(["--watch", "."])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage: build_loop"));
}

/// Replaces `path` at once (a temporary file renamed over it), so that the
/// example never reads it half written.
#[cfg(feature = "serde")]
fn write_atomic(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[cfg(feature = "serde")]
#[test]
fn reconcile_from_config_follows_the_file_and_keeps_the_last_good_set() {
    let (_c, cfg_dir) = tmp();
    let (_a, a) = tmp();
    let (_b, b) = tmp();
    let config = cfg_dir.join("watches.json");
    let spec = |dir: &Path| {
        format!(r#"{{ "paths": [{dir:?}], "options": {{ "quiet_window": "20ms" }} }}"#)
    };
    write_atomic(&config, &format!(r#"{{ "a": {} }}"#, spec(&a)));
    let mut cmd = Command::new(example("reconcile_from_config"));
    cmd.arg(&config);
    let mut r = Proc::start("reconcile_from_config", cmd);
    r.expect("created [a] updated [] deleted [] unchanged []");
    r.expect("a: watching");

    write_atomic(
        &config,
        &format!(r#"{{ "a": {}, "b": {} }}"#, spec(&a), spec(&b)),
    );
    r.expect("created [b] updated [] deleted [] unchanged [a]");
    r.expect("b: watching");
    std::fs::write(b.join("one"), "1").unwrap();
    r.expect(&format!("b: created {}", b.join("one").display()));

    // Broken (not JSON; then an invalid spec): reported, nothing changes.
    let keeping = |r: &mut Proc, why: &str| {
        let prefix = format!("reconcile_from_config: {}: ", config.display());
        let line = r.wait_for("keeping the last good set", |l| {
            l.starts_with(&prefix) && l.ends_with("; keeping the last good set")
        });
        assert!(line.contains(why), "{line:?} should say {why:?}");
    };
    write_atomic(&config, r#"{ "a": "#);
    keeping(&mut r, "EOF while parsing");
    std::fs::write(b.join("two"), "2").unwrap();
    r.expect(&format!("b: created {}", b.join("two").display()));
    write_atomic(&config, r#"{ "b": { "paths": [] } }"#);
    keeping(&mut r, "has no paths");
    std::fs::write(b.join("three"), "3").unwrap();
    r.expect(&format!("b: created {}", b.join("three").display()));

    // Fixed: reconciled again (a goes, b stays as it was).
    write_atomic(&config, &format!(r#"{{ "b": {} }}"#, spec(&b)));
    r.expect("created [] updated [] deleted [a] unchanged [b]");
    r.expect("a: deleted");
}

#[cfg(feature = "serde")]
#[test]
fn reconcile_from_config_reads_toml_with_paths_relative_to_it() {
    let (_c, cfg_dir) = tmp();
    std::fs::create_dir(cfg_dir.join("src")).unwrap();
    let config = cfg_dir.join("watches.toml");
    write_atomic(
        &config,
        "[src]\npaths = [\"src\"]\noptions = { quiet_window = 20 }\n",
    );
    let mut cmd = Command::new(example("reconcile_from_config"));
    cmd.arg(&config);
    let mut r = Proc::start("reconcile_from_config", cmd);
    r.expect("created [src] updated [] deleted [] unchanged []");
    r.expect("src: watching");
    std::fs::write(cfg_dir.join("src/main.rs"), "fn main() {}").unwrap();
    r.expect(&format!(
        "src: created {}",
        cfg_dir.join("src/main.rs").display()
    ));
}

#[cfg(not(feature = "serde"))]
#[test]
fn reconcile_from_config_without_serde_says_how_to_build_it() {
    // Never waits without a deadline: a binary built with `serde` (by a
    // build with other features into the same target) would run on.
    let child = Command::new(example("reconcile_from_config"))
        .arg("x.json")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = channel::bounded(1);
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(std::time::Duration::from_secs(20)) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: kill on our own child's pid.
            #[cfg(unix)]
            unsafe {
                libc::kill(pid as i32, libc::SIGKILL);
            }
            // (On Windows the run's end takes it: .ci/windows ends Wine.)
            #[cfg(not(unix))]
            let _ = pid;
            panic!(
                "reconcile_from_config did not exit within 20 s: was it built with \
                 --features serde? (build the examples with the test's features)"
            );
        }
    };
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("build with --features serde"));
}
