//! The `build_loop` and `reconcile_from_config` examples, run as the built
//! example binaries: every wait is for a line they print, with a deadline.
//! The commands build_loop runs are `sh` scripts on Unix, `cmd` and the
//! `watch` example on Windows.

mod common;

use std::path::{Path, PathBuf};

#[cfg(target_os = "linux")]
use common::WAIT;
use common::example::{self, Process};
#[cfg(target_os = "linux")]
use specwatch::crossbeam_channel as channel;

fn tmp() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().canonicalize().unwrap();
    (d, p)
}

/// One line on the example's stdin (the `build_loop` tests' commands
/// read one per run: the test decides when a run ends).
#[cfg(unix)]
fn release(p: &mut Process) {
    let stdin = p.stdin();
    std::io::Write::write_all(stdin, b"go\n").unwrap();
    std::io::Write::flush(stdin).unwrap();
}

/// Waits for `line`, unless it was among the lines already passed over
/// (output of the example's child, which may come before the example's
/// own line about it).
#[cfg(target_os = "linux")]
fn expect_any_order(p: &Process, line: &str) {
    if !p.seen().iter().any(|l| l.bytes == line.as_bytes()) {
        p.expect(line);
    }
}

/// `build_loop FLAGS -- COMMAND`, in `dir`.
fn build_loop(dir: &Path, flags: &[&str], command: &[&str]) -> Process {
    let mut cmd = example::command("build_loop");
    cmd.current_dir(dir).args(flags).arg("--").args(command);
    // Git's global excludes file (which build_loop honours) is looked for
    // in a home that does not exist, never the user's.
    let nowhere = dir.join(".no-home");
    cmd.env("HOME", &nowhere)
        .env("XDG_CONFIG_HOME", &nowhere)
        .env_remove("GIT_CONFIG_GLOBAL")
        .env("GIT_CONFIG_SYSTEM", nowhere.join("gitconfig"));
    Process::start("build_loop", cmd)
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
    release(&mut b);
    b.expect("build_loop: run 1 exited with status 0");

    put(&aux, &watched, "a.txt");
    b.expect("build_loop: run 2: created a.txt");
    b.expect_prefix("build_loop: run 2 started (pid ");
    // Four batches while run 2 is going (each seen queued before the next).
    for f in ["b.txt", "c.txt", "d.txt", "e.txt"] {
        put(&aux, &watched, f);
        b.expect(&format!("build_loop: queued after run 2: created {f}"));
    }
    release(&mut b);
    b.expect("build_loop: run 2 exited with status 0");
    b.expect("build_loop: run 3: created b.txt, created c.txt, created d.txt (+1 more)");
    b.expect_prefix("build_loop: run 3 started (pid ");
    release(&mut b);
    b.expect("build_loop: run 3 exited with status 0");

    // Nothing else is queued: the next run is for the marker alone.
    put(&aux, &watched, "marker");
    let next = b.expect_prefix("build_loop: run 4:");
    assert_eq!(next, "build_loop: run 4: created marker");
    release(&mut b);
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

/// `--hold-during-run`: what the command writes into the watched tree (a
/// build's outputs, new bytes each run) starts no run, run after run; the
/// next run is for a change made after the run. The control: without the
/// flag, the same command's writes start the next run.
#[cfg(unix)]
#[test]
fn build_loop_with_hold_during_run_is_not_started_again_by_its_own_writes() {
    let (_a, aux) = tmp();
    let log = aux.join("log");
    let log_s = log.to_str().unwrap();
    // Each run logs itself, writes its outputs into the watched tree,
    // then waits for a line on stdin: the test says when it ends.
    let command = [
        "sh",
        "-c",
        r#"echo run >> "$1"; mkdir -p out; echo "$$" > out/built; read x"#,
        "sh",
        log_s,
    ];
    let (_w, watched) = tmp();
    let flags = ["--debounce", "20", "--hold-during-run"];
    let mut b = build_loop(&watched, &flags, &command);
    b.expect("build_loop: run 1: start");
    b.expect_prefix("build_loop: run 1 started (pid ");
    release(&mut b);
    b.expect("build_loop: run 1 exited with status 0");
    for run in 2..4 {
        let marker = format!("marker{run}");
        put(&aux, &watched, &marker);
        assert_eq!(
            b.expect_prefix(&format!("build_loop: run {run}:")),
            format!("build_loop: run {run}: created {marker}"),
            "the run's own outputs started nothing"
        );
        b.expect_prefix(&format!("build_loop: run {run} started (pid "));
        release(&mut b);
        b.expect(&format!("build_loop: run {run} exited with status 0"));
    }
    assert!(
        !b.seen()
            .iter()
            .any(|l| String::from_utf8_lossy(&l.bytes).contains("queued")),
        "nothing queued during a run"
    );
    assert_eq!(runs_logged(&log), 3);
    assert_eq!(b.terminate().code(), Some(0));

    // The control: without the flag, run 1's outputs start run 2.
    let (_w, watched) = tmp();
    let mut b = build_loop(&watched, &["--debounce", "20"], &command);
    b.expect("build_loop: run 1: start");
    b.expect_prefix("build_loop: run 1 started (pid ");
    release(&mut b);
    b.expect("build_loop: run 1 exited with status 0");
    let next = b.expect_prefix("build_loop: run 2:");
    assert!(next.contains("created out"), "{next}");
    b.terminate();
}

/// `--state FILE`: the first run is made only if something changed since
/// `build_loop` last ran, and says what. (Unix: the state is saved on a
/// clean exit, which the test can ask of the child alone there.)
#[cfg(unix)]
#[test]
fn build_loop_with_state_runs_at_start_only_for_changes_made_meanwhile() {
    let (_w, watched) = tmp();
    let (_a, aux) = tmp();
    let state = aux.join("build.state");
    let state = state.to_str().unwrap();
    std::fs::write(watched.join("a.rs"), "a").unwrap();
    let log = aux.join("log");
    let command = [
        "sh",
        "-c",
        r#"echo run >> "$1""#,
        "sh",
        log.to_str().unwrap(),
    ];
    let flags = ["--debounce", "20", "--state", state];
    // The first time: no state, so a run.
    let mut b = build_loop(&watched, &flags, &command);
    b.expect("build_loop: state not used: no saved state");
    b.expect("build_loop: run 1: start");
    b.expect("build_loop: run 1 exited with status 0");
    assert_eq!(b.terminate().code(), Some(0));
    // Nothing changed: no run.
    let mut b = build_loop(&watched, &flags, &command);
    b.expect("build_loop: nothing changed since the last run");
    // Then a change while running makes run 1.
    put(&aux, &watched, "marker");
    assert_eq!(
        b.expect_prefix("build_loop: run 1:"),
        "build_loop: run 1: created marker",
        "no run at start"
    );
    b.expect("build_loop: run 1 exited with status 0");
    assert_eq!(b.terminate().code(), Some(0));
    // Changed while not running: run 1 says what.
    std::fs::write(watched.join("a.rs"), "b").unwrap();
    std::fs::remove_file(watched.join("marker")).unwrap();
    let mut b = build_loop(&watched, &flags, &command);
    b.expect("build_loop: run 1: modified a.rs, removed marker");
    b.expect("build_loop: run 1 exited with status 0");
    assert_eq!(b.terminate().code(), Some(0));
    assert_eq!(
        runs_logged(&log),
        3,
        "runs: the first start, the marker, the restart"
    );
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
    expect_any_order(&b, &format!("cmd: started {first}"));

    put(&aux, &watched, "a.txt");
    b.expect("build_loop: run 1 exited with signal 15");
    assert_group_gone(first);
    b.expect("build_loop: run 2: created a.txt");
    let second = pid_in(&b.expect_prefix("build_loop: run 2 started (pid "));
    assert_ne!(first, second);
    expect_any_order(&b, &format!("cmd: started {second}"));
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

/// A command that logs each run to `log` and ends.
/// `build_loop --debounce 20 FLAGS` in `dir`, its command logging each
/// run in `log`, once its first run is over.
fn logging_loop(dir: &Path, flags: &[&str], log: &Path) -> Process {
    let command = log_run(log);
    let command: Vec<&str> = command.iter().map(String::as_str).collect();
    let mut all = vec!["--debounce", "20"];
    all.extend_from_slice(flags);
    let b = build_loop(dir, &all, &command);
    b.expect("build_loop: run 1: start");
    b.expect("build_loop: run 1 exited with status 0");
    b
}

fn log_run(log: &Path) -> Vec<String> {
    if cfg!(windows) {
        vec![
            "cmd".into(),
            "/C".into(),
            format!("echo run>>{}", log.display()),
        ]
    } else {
        let script = format!("echo run >> '{}'", log.display());
        vec!["sh".into(), "-c".into(), script]
    }
}

/// A build tool's default: a write of the same bytes (or a `touch`) runs
/// nothing; `--no-skip-same-content` runs for it.
#[test]
fn build_loop_runs_nothing_for_a_write_of_the_same_bytes() {
    for same_content in [false, true] {
        let (_w, watched) = tmp();
        let (_a, aux) = tmp();
        std::fs::write(watched.join("a.txt"), "a.txt").unwrap();
        let log = aux.join("log");
        let command = log_run(&log);
        let command: Vec<&str> = command.iter().map(String::as_str).collect();
        let mut flags = vec!["--debounce", "20"];
        if same_content {
            flags.push("--no-skip-same-content");
        }
        let mut b = build_loop(&watched, &flags, &command);
        b.expect("build_loop: run 1: start");
        b.expect("build_loop: run 1 exited with status 0");
        // The same bytes again, then a real change: the next run names
        // what the default counts as a change.
        // (Over the old bytes, not truncating first: the file never holds
        // anything else, even for an instant a batch could close on.)
        let mut f = std::fs::File::options()
            .write(true)
            .open(watched.join("a.txt"))
            .unwrap();
        std::io::Write::write_all(&mut f, b"a.txt").unwrap();
        drop(f);
        if same_content {
            b.expect("build_loop: run 2: modified a.txt");
            b.expect("build_loop: run 2 exited with status 0");
        } else {
            put(&aux, &watched, "b.txt");
            let next = b.expect_prefix("build_loop: run 2:");
            assert_eq!(
                next, "build_loop: run 2: created b.txt",
                "a.txt's same bytes ran nothing"
            );
            b.expect("build_loop: run 2 exited with status 0");
        }
        assert_eq!(runs_logged(&log), 2);
        b.terminate();
    }
}

/// A build tool's default: a rename is named as one, a moved directory
/// too; `--no-renames` names both ends (the control: the same renames,
/// told apart by the flag alone).
#[test]
fn build_loop_names_a_rename_as_one() {
    for no_renames in [false, true] {
        let (_w, watched) = tmp();
        let (_a, aux) = tmp();
        let log = aux.join("log");
        let command = log_run(&log);
        let command: Vec<&str> = command.iter().map(String::as_str).collect();
        let mut flags = vec!["--debounce", "100"];
        if no_renames {
            flags.push("--no-renames");
        }
        let mut b = build_loop(&watched, &flags, &command);
        b.expect("build_loop: run 1: start");
        b.expect("build_loop: run 1 exited with status 0");
        // Made after the watch started (Wine reports nothing in a
        // directory older than its watch).
        std::fs::create_dir(watched.join("d")).unwrap();
        put(&aux, &watched.join("d"), "x");
        let sep = std::path::MAIN_SEPARATOR;
        let two = b.expect_prefix("build_loop: run 2:");
        assert_eq!(
            two,
            format!("build_loop: run 2: created d, created d{sep}x")
        );
        b.expect("build_loop: run 2 exited with status 0");
        std::fs::rename(watched.join("d/x"), watched.join("d/y")).unwrap();
        let line = b.expect_prefix("build_loop: run 3:");
        if no_renames {
            assert_eq!(
                line,
                format!("build_loop: run 3: removed d{sep}x, created d{sep}y")
            );
        } else {
            assert_eq!(
                line,
                format!("build_loop: run 3: renamed d{sep}x -> d{sep}y")
            );
        }
        b.expect("build_loop: run 3 exited with status 0");
        std::fs::rename(watched.join("d"), watched.join("e")).unwrap();
        let line = b.expect_prefix("build_loop: run 4:");
        if no_renames {
            assert_eq!(
                line,
                format!("build_loop: run 4: removed d, removed d{sep}y, created e (+1 more)")
            );
        } else {
            assert_eq!(line, "build_loop: run 4: renamed d -> e");
        }
        b.expect("build_loop: run 4 exited with status 0");
        b.terminate();
    }
}

/// A build tool's default: while the repository's lock exists (a `git
/// checkout` under way) changes wait, and make one run once it is gone.
/// The control, a second `build_loop` with `--no-vcs-settle` on the same
/// tree, runs for each change as it comes: the held one saw them too.
#[test]
fn build_loop_makes_one_run_of_what_changed_while_the_repository_was_locked() {
    let (_w, watched) = tmp();
    let (_a, aux) = tmp();
    std::fs::create_dir(watched.join(".git")).unwrap();
    let lock = watched.join(".git/index.lock");
    let (log, control_log) = (aux.join("log"), aux.join("control-log"));
    let run = |flags: &[&str], log: &Path| logging_loop(&watched, flags, log);
    let mut held = run(&[], &log);
    let mut control = run(&["--no-vcs-settle"], &control_log);
    std::fs::write(&lock, "").unwrap();
    put(&aux, &watched, "a.txt");
    control.expect("build_loop: run 2: created a.txt");
    put(&aux, &watched, "b.txt");
    control.expect("build_loop: run 3: created b.txt");
    std::fs::remove_file(&lock).unwrap();
    let next = held.expect_prefix("build_loop: run 2:");
    assert_eq!(
        next, "build_loop: run 2: created a.txt, created b.txt",
        "one run for both, once the lock went"
    );
    held.expect("build_loop: run 2 exited with status 0");
    assert_eq!(runs_logged(&log), 2);
    held.terminate();
    control.terminate();
}

/// A build tool's default: a file written in chunks, with pauses longer
/// than the debounce, is one run once its writer is done (the next run is
/// another file's). The control, a second `build_loop` with
/// `--no-write-finished` on the same tree, runs while it is half-written
/// and again as it grows.
#[cfg(unix)]
#[test]
fn build_loop_runs_once_for_a_file_written_slowly() {
    let (_w, watched) = tmp();
    let (_a, aux) = tmp();
    let (log, control_log) = (aux.join("log"), aux.join("control-log"));
    let run = |flags: &[&str], log: &Path| logging_loop(&watched, flags, log);
    let mut held = run(&[], &log);
    let mut control = run(&["--no-write-finished"], &control_log);
    {
        use std::io::Write;
        let mut f = std::fs::File::create(watched.join("big.bin")).unwrap();
        for _ in 0..6 {
            f.write_all(&[b'x'; 4096]).unwrap();
            // A slow copy (the stimulus): longer than the debounce.
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    held.expect("build_loop: run 2: created big.bin");
    let third = control.expect_prefix("build_loop: run 3:");
    assert_eq!(
        third, "build_loop: run 3: modified big.bin",
        "without it, a run while half-written and one as it grew"
    );
    put(&aux, &watched, "z.txt");
    assert_eq!(
        held.expect_prefix("build_loop: run 3:"),
        "build_loop: run 3: created z.txt",
        "no run for big.bin but the one when it was complete"
    );
    held.terminate();
    control.terminate();
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
    let watch = example::path("watch");
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
    let mut cmd = example::command("build_loop");
    cmd.args(["--watch", "."]);
    let out = example::output("build_loop", cmd);
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
    let mut cmd = example::command("reconcile_from_config");
    cmd.arg(&config);
    let r = Process::start("reconcile_from_config", cmd);
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
    let keeping = |r: &Process, why: &str| {
        let prefix = format!("reconcile_from_config: {}: ", config.display());
        let line = r
            .wait_for("keeping the last good set", |l| {
                let l = l.text();
                l.starts_with(&prefix) && l.ends_with("; keeping the last good set")
            })
            .text();
        assert!(line.contains(why), "{line:?} should say {why:?}");
    };
    write_atomic(&config, r#"{ "a": "#);
    keeping(&r, "EOF while parsing");
    std::fs::write(b.join("two"), "2").unwrap();
    r.expect(&format!("b: created {}", b.join("two").display()));
    write_atomic(&config, r#"{ "b": { "paths": [] } }"#);
    keeping(&r, "has no paths");
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
    let mut cmd = example::command("reconcile_from_config");
    cmd.arg(&config);
    let r = Process::start("reconcile_from_config", cmd);
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
    let mut cmd = example::command("reconcile_from_config");
    cmd.arg("x.json");
    let out = example::output(
        "reconcile_from_config (built with --features serde? build the examples \
         with the test's features)",
        cmd,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("build with --features serde"));
}
