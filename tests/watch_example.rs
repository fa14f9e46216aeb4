//! The `watch` example's flags and output lines are a public contract:
//! `READY`, then `created|modified|removed<TAB>path` (raw bytes on Unix,
//! WTF-8 on Windows), exit 0 on SIGTERM, 2 on a bad flag. Run against the
//! built example binary.

mod common;

use std::path::{Path, PathBuf};

use common::example::{self, Process, Stream};

/// The example watching `dir` with `args`, once it said `READY`.
fn start(args: &[&str], dir: &Path) -> Process {
    let mut cmd = example::command("watch");
    cmd.args(args).arg(dir);
    let w = Process::start("watch", cmd);
    expect(&w, b"READY");
    w
}

/// Waits for the stdout line `want`, skipping others.
fn expect(w: &Process, want: &[u8]) {
    w.wait_for(
        &format!("{:?} on stdout", String::from_utf8_lossy(want)),
        |l| l.stream == Stream::Stdout && l.bytes == want,
    );
}

/// SIGTERM; the example must exit 0. (On Windows, where no console
/// event can be sent to one child alone, it is ended, and its status
/// says nothing.)
fn stop(mut w: Process) {
    let status = w.terminate();
    if cfg!(unix) {
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
    let w = start(args, &dir);
    let f = dir.join("f.txt");
    std::fs::write(&f, "1").unwrap();
    expect(&w, &line("created", &f));
    std::fs::write(&f, "22").unwrap();
    expect(&w, &line("modified", &f));
    // A name that is not UTF-8 comes out as its raw bytes (not on macOS,
    // whose file systems refuse it).
    #[cfg(all(unix, not(target_os = "macos")))]
    {
        let odd =
            dir.join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"odd\xff.txt"));
        std::fs::write(&odd, "x").unwrap();
        expect(&w, &line("created", &odd));
    }
    // Beyond ASCII, as UTF-8.
    let accents = dir.join("café-ü.txt");
    std::fs::write(&accents, "x").unwrap();
    expect(&w, &line("created", &accents));
    std::fs::remove_file(&f).unwrap();
    expect(&w, &line("removed", &f));
    stop(w);
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
        let mut cmd = example::command("watch");
        cmd.arg(flag);
        let out = example::output("watch", cmd);
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
        let mut cmd = example::command("watch");
        cmd.args(&args).arg(d.path());
        let out = example::output("watch", cmd);
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
    let w = start(&["--debounce", "10", "--initial-scan"], &dir);
    expect(&w, &line("created", &dir.join("sub").join("old.txt")));
    let f = dir.join("new.txt");
    std::fs::write(&f, "1").unwrap();
    expect(&w, &line("created", &f));
    stop(w);
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
        let mut cmd = example::command("watch");
        cmd.args(&args).arg(&dir);
        let w = Process::start("watch", cmd);
        let found = w
            .wait_for(&format!("starting {want:?} on stderr"), |l| {
                l.stream == Stream::Stderr && l.text().starts_with(want)
            })
            .text();
        assert!(
            found.ends_with(&format!(" at {}", dir.display())),
            "{found}"
        );
    }
}

/// On a terminal (a pty from `script`), indexing a large tree draws a
/// progress line on stderr before `READY`; the other tests run without a
/// terminal and see no such line. (Unix: `script` makes the pty.)
#[cfg(unix)]
#[test]
fn a_terminal_gets_a_progress_line_while_indexing() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
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
    let mut cmd = std::process::Command::new("script");
    let run = format!("{} {}", example::path("watch").display(), dir.display());
    cmd.args(["-qec", &run, "/dev/null"]);
    let w = Process::start("watch on a terminal", cmd);
    // (The progress line may share a line with what follows it: it is
    // redrawn in place.)
    w.wait_for("with READY", |l| l.text().contains("READY"));
    let seen: Vec<u8> = w.lines().into_iter().flat_map(|l| l.bytes).collect();
    let text = String::from_utf8_lossy(&seen);
    let ready = text.find("READY").expect("waited for");
    let progress = text
        .find("watch: indexing: ")
        .unwrap_or_else(|| panic!("no progress line on the terminal; saw {text:?}"));
    assert!(progress < ready, "progress comes before READY: {text:?}");
}

/// `--state FILE`: the first lines after `READY` are what changed since
/// the last run; stderr says whether the state was used. Unix only: the
/// state is saved on a clean exit, and on Windows the test cannot ask
/// the child alone to exit cleanly (it is ended).
#[cfg(unix)]
#[test]
fn state_prints_what_changed_since_the_last_run() {
    let (d, st) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let dir = real(d.path());
    let state = st.path().join("watch.state");
    let state = state.to_str().unwrap();
    std::fs::write(dir.join("kept"), "k").unwrap();
    std::fs::write(dir.join("old"), "o").unwrap();
    let w = start(&["--debounce", "10", "--state", state], &dir);
    // Stderr and stdout are read apart: searched from the first line.
    w.find(0, "the state's refusal on stderr", |l| {
        l.stream == Stream::Stderr && l.text() == "watch: state: not used: no saved state"
    });
    stop(w);
    // While it is not running.
    std::fs::write(dir.join("new"), "n").unwrap();
    std::fs::remove_file(dir.join("old")).unwrap();
    let w = start(&["--debounce", "10", "--state", state], &dir);
    w.find(0, "the restore on stderr", |l| {
        l.stream == Stream::Stderr
            && l.text() == "watch: state: restored (2 changes since the last run)"
    });
    expect(&w, &line("created", &dir.join("new")));
    expect(&w, &line("removed", &dir.join("old")));
    let seen: Vec<Vec<u8>> = w
        .lines()
        .into_iter()
        .filter(|l| l.stream == Stream::Stdout)
        .map(|l| l.bytes)
        .collect();
    assert_eq!(
        seen,
        vec![
            b"READY".to_vec(),
            line("created", &dir.join("new")),
            line("removed", &dir.join("old"))
        ],
        "READY, then exactly what changed meanwhile"
    );
    stop(w);
}
