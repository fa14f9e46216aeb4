//! Runs a command once at start and again after every batch of changes, as
//! `watchexec` does: a build (or test) loop on top of one watch spec.
//!
//! ```text
//! cargo run --example build_loop -- [--on-busy queue|restart] [--debounce MS]
//!     [--state FILE] [--no-skip-same-content] [--no-vcs-settle]
//!     [--no-write-finished] [--no-renames] [--hold-during-run] [--watch PATH]...
//!     -- COMMAND [ARGS...]
//! ```
//!
//! `--watch` defaults to the current directory; relative paths are taken
//! from it. A batch of changes closes after `--debounce` milliseconds
//! without a change (default 50). What happens to a batch that arrives
//! while the command runs is `--on-busy`'s choice:
//!
//! - `queue` (the default): one more run after the current one, however many
//!   batches arrived during it;
//! - `restart`: the running command is stopped and started again. On Unix,
//!   stopping is SIGTERM to its whole process group, then SIGKILL to what
//!   is left of the group once the command exits (or two seconds later if
//!   it has not). On Windows, which has no SIGTERM, it is the end of the
//!   command's job object: every process it started, at once.
//!
//! The command runs in a process group of its own on Unix (so the
//! terminal's Ctrl-C reaches `build_loop`, which stops the group itself),
//! in a job object of its own on Windows. Lines on stderr:
//!
//! ```text
//! build_loop: run 2: created src/a.rs, modified src/b.rs, removed x.rs (+3 more)
//! build_loop: run 2 started (pid 4242)
//! build_loop: queued after run 2: modified src/a.rs
//! build_loop: run 2 exited with status 0
//! ```
//!
//! (`exited with signal 15` when it was killed, on Unix.) With `--state
//! FILE`, what was seen is kept in FILE across runs of `build_loop` (see
//! [`WatchOptions::state`]), and the first run is only made if something
//! changed since `build_loop` last ran: `run 1: modified src/a.rs` names
//! what; `build_loop: nothing changed since the last run` when nothing
//! did; `build_loop: state not used: REASON` and `run 1: start` when there
//! is no usable state (the first time, say). `.gitignore` and
//! `.ignore` files are honoured, nested ones too, and followed when they
//! change ([`WatchOptions::ignore_files`]); `.git/` and the other VCS
//! directories are ignored by the library. Ctrl-C (SIGINT), SIGTERM or
//! SIGHUP (on Windows: Ctrl-C, Ctrl-Break, the console closing) stops the
//! running command and exits with the status of the last run that ended by
//! itself (128 + N for signal N; 0 if none did); a second one kills the
//! command's group at once.
//!
//!
//! What a build tool wants is the default: a save that wrote the same
//! bytes, a `touch` or a `chmod` runs nothing
//! ([`WatchOptions::skip_same_content`]; every file watched is read once at
//! start for it). `--no-skip-same-content` runs for those too. And a `git
//! checkout` (or `hg update`) is one run, however long it takes: changes
//! are held while the repository's lock exists, for 10 s at most
//! ([`WatchOptions::vcs_settle`]); `--no-vcs-settle` runs as they come.
//! A rename (a file's, or a whole directory's) is named as one:
//! `run 3: renamed src/a.rs -> src/b.rs` ([`Change::from`], with
//! [`WatchOptions::collapse_moves`]); `--no-renames` names its two ends
//! (`removed src/a.rs, created src/b.rs`) and everything below a moved
//! directory.
//! A file being written (a large file copied in slowly) runs nothing until
//! its writer is done, then runs once for it, complete
//! ([`WatchOptions::write_finished`], with
//! [`DEFAULT_WRITE_FINISHED`](specwatch::DEFAULT_WRITE_FINISHED));
//! `--no-write-finished` runs as its writes come.
//!
//! With `--hold-during-run`, what is written into the watched tree while
//! the command runs starts no run: the watch is held for the run
//! ([`Manager::hold`], the spec dropping what a hold covers:
//! [`DuringHolds::Drop`]), so that a build whose outputs land in the tree
//! does not start itself again. The OS does not say who wrote a file:
//! what anyone else writes meanwhile starts no run either (the next change
//! after the run does). A change made before the run started still
//! queues the next one.
//!
//! [`WatchOptions::ignore_files`]: specwatch::WatchOptions::ignore_files
//! [`WatchOptions::state`]: specwatch::WatchOptions::state
//! [`WatchOptions::skip_same_content`]: specwatch::WatchOptions::skip_same_content
//! [`WatchOptions::vcs_settle`]: specwatch::WatchOptions::vcs_settle
//! [`WatchOptions::collapse_moves`]: specwatch::WatchOptions::collapse_moves
//! [`Change::from`]: specwatch::Change::from
//! [`WatchOptions::write_finished`]: specwatch::WatchOptions::write_finished
//! [`Manager::hold`]: specwatch::Manager::hold
//! [`DuringHolds::Drop`]: specwatch::DuringHolds::Drop

fn main() -> std::process::ExitCode {
    run::main()
}

/// The command's process group (Unix) or job object (Windows): what is
/// stopped, as a whole, when a run is stopped.
#[cfg(unix)]
mod group {
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command};

    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;

    pub struct Group(Pid);

    /// Starts `command` as the leader of a process group of its own.
    pub fn spawn(command: &mut Command) -> std::io::Result<(Child, Group)> {
        let child = command.process_group(0).spawn()?;
        let pgid = Pid::from_raw(child.id() as i32);
        Ok((child, Group(pgid)))
    }

    impl Group {
        /// Asks every process of the group to stop (SIGTERM).
        pub fn stop(&self) {
            let _ = killpg(self.0, Signal::SIGTERM);
        }

        /// Kills what is left of the group (SIGKILL).
        pub fn kill(&self) {
            let _ = killpg(self.0, Signal::SIGKILL);
        }
    }
}

#[cfg(windows)]
mod group {
    use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
    use std::process::{Child, Command};

    use windows_sys::Win32::System::JobObjects::{
        AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
        JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JobObjectExtendedLimitInformation,
        SetInformationJobObject, TerminateJobObject,
    };

    /// A job object holding the command and every process it starts (they
    /// inherit the job); closing it ends them all, so a run's processes
    /// left in the background end with the run (on Unix they stay unless
    /// the run is stopped), and with `build_loop` itself.
    pub struct Group(OwnedHandle);

    /// Starts `command` in a job object of its own. (A process the command
    /// starts before it is assigned to the job, in its first instant, is
    /// not in it: std cannot start a process suspended.)
    pub fn spawn(command: &mut Command) -> std::io::Result<(Child, Group)> {
        // SAFETY: no security attributes, no name; the handle is checked
        // and then owned.
        let job = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
        if job.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a job handle just created, owned by nothing else.
        let job = unsafe { OwnedHandle::from_raw_handle(job) };
        // SAFETY: zeroed is a valid JOBOBJECT_EXTENDED_LIMIT_INFORMATION.
        let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
        limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        // SAFETY: a valid job handle and a struct of the size passed.
        let set = unsafe {
            SetInformationJobObject(
                job.as_raw_handle(),
                JobObjectExtendedLimitInformation,
                (&raw const limits).cast(),
                size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
            )
        };
        if set == 0 {
            return Err(std::io::Error::last_os_error());
        }
        // A process group of its own: the console's Ctrl-C reaches
        // build_loop, which stops the job, and not the command directly
        // (which would then end "by itself", with 0xC000013A).
        const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;
        use std::os::windows::process::CommandExt;
        let child = command.creation_flags(CREATE_NEW_PROCESS_GROUP).spawn()?;
        // SAFETY: valid job and process handles.
        if unsafe { AssignProcessToJobObject(job.as_raw_handle(), child.as_raw_handle()) } == 0 {
            let e = std::io::Error::last_os_error();
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        Ok((child, Group(job)))
    }

    impl Group {
        /// Windows has no SIGTERM: the job's processes end at once.
        pub fn stop(&self) {
            self.kill();
        }

        /// Ends every process of the job.
        pub fn kill(&self) {
            // SAFETY: a valid job handle.
            unsafe { TerminateJobObject(self.0.as_raw_handle(), 1) };
        }
    }
}

mod run {
    /// One whole line on stderr in one write: the command shares stderr,
    /// and `eprintln!` may write a line in pieces that its output splits.
    macro_rules! say {
        ($($arg:tt)*) => {{
            use std::io::Write as _;
            let line = format!("{}\n", format_args!($($arg)*));
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }};
    }

    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};
    use std::process::{Command, ExitCode, ExitStatus};
    use std::time::{Duration, Instant};

    use specwatch::crossbeam_channel::{self as channel, Receiver, Sender, select};
    use specwatch::{
        Change, ChangeKind, DuringHolds, Event, HoldGuard, Manager, Phase, Restore, WatchSpec,
    };

    use crate::group::Group;

    const USAGE: &str = "usage: build_loop [--on-busy queue|restart] [--debounce MS] \
         [--state FILE] [--no-skip-same-content] [--no-vcs-settle] [--no-write-finished] \
         [--no-renames] [--hold-during-run] [--watch PATH]... -- COMMAND [ARGS...]";
    /// How long a stopped command gets between SIGTERM and SIGKILL (Unix).
    const GRACE: Duration = Duration::from_secs(2);
    /// Changed paths named in a run's line; the rest are counted.
    const SHOWN: usize = 3;

    struct Args {
        restart: bool,
        debounce: Duration,
        paths: Vec<PathBuf>,
        state: Option<PathBuf>,
        /// Run for a write that changed no byte too.
        same_content: bool,
        /// Run while the repository's lock exists too.
        no_vcs_settle: bool,
        /// Name a rename's two ends, and what is below a moved directory.
        no_renames: bool,
        /// Run while a file is being written too.
        no_write_finished: bool,
        /// Hold the watch while the command runs: what is written then
        /// starts no run.
        hold_during_run: bool,
        command: Vec<String>,
    }

    fn parse_args() -> Result<Args, String> {
        let mut args = Args {
            restart: false,
            debounce: Duration::from_millis(50),
            paths: Vec::new(),
            state: None,
            same_content: false,
            no_vcs_settle: false,
            no_renames: false,
            no_write_finished: false,
            hold_during_run: false,
            command: Vec::new(),
        };
        let mut it = std::env::args().skip(1);
        while let Some(a) = it.next() {
            match a.as_str() {
                "--on-busy" => {
                    args.restart = match it.next().as_deref() {
                        Some("queue") => false,
                        Some("restart") => true,
                        _ => return Err("--on-busy needs queue or restart".into()),
                    }
                }
                "--debounce" => {
                    let ms = it.next().and_then(|v| v.parse().ok());
                    let ms = ms.ok_or("--debounce needs a number of milliseconds")?;
                    args.debounce = Duration::from_millis(ms);
                }
                "--state" => args.state = Some(it.next().ok_or("--state needs a file")?.into()),
                "--no-skip-same-content" => args.same_content = true,
                "--no-vcs-settle" => args.no_vcs_settle = true,
                "--no-renames" => args.no_renames = true,
                "--no-write-finished" => args.no_write_finished = true,
                "--hold-during-run" => args.hold_during_run = true,
                "--watch" => args
                    .paths
                    .push(it.next().ok_or("--watch needs a path")?.into()),
                "-h" | "--help" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                "--" => break,
                s if s.starts_with('-') => return Err(format!("unknown flag {s}\n{USAGE}")),
                _ => {
                    args.command.push(a);
                    break;
                }
            }
        }
        args.command.extend(it);
        if args.command.is_empty() {
            return Err(format!("no command given\n{USAGE}"));
        }
        if args.paths.is_empty() {
            args.paths.push(".".into());
        }
        Ok(args)
    }

    /// Ctrl-C and termination requests, through `ctrlc` (a handler thread
    /// of its own; on Windows, the console's control events).
    fn signals() -> Receiver<()> {
        let (tx, rx) = channel::unbounded();
        if let Err(e) = ctrlc::set_handler(move || {
            let _ = tx.send(());
        }) {
            say!("build_loop: cannot take Ctrl-C: {e}");
        }
        rx
    }

    struct Running {
        n: u64,
        group: Group,
        /// The watch held while it runs (`--hold-during-run`).
        hold: Option<HoldGuard>,
        /// Stopped by us (SIGTERM sent to its group).
        stopping: bool,
        /// When SIGKILL follows that SIGTERM.
        kill_at: Option<Instant>,
    }

    /// Starts run `n` in a process group of its own; a thread waits for it
    /// and reports its end on `exits`.
    fn start(
        n: u64,
        command: &[String],
        exits: &Sender<(u64, ExitStatus)>,
        hold: Option<HoldGuard>,
    ) -> std::io::Result<Running> {
        let (mut child, group) =
            crate::group::spawn(Command::new(&command[0]).args(&command[1..]))?;
        say!("build_loop: run {n} started (pid {})", child.id());
        let exits = exits.clone();
        std::thread::spawn(move || {
            let status = child.wait().expect("wait for our own child");
            let _ = exits.send((n, status));
        });
        Ok(Running {
            n,
            group,
            hold,
            stopping: false,
            kill_at: None,
        })
    }

    fn stop(run: &mut Running) {
        if !run.stopping {
            run.group.stop();
            run.stopping = true;
            run.kill_at = Some(Instant::now() + GRACE);
        }
    }

    /// Adds a batch's changes to `pending`, one kind per path (created, then
    /// modified, is still created).
    /// What a run is for: each changed path's kind, and where a renamed
    /// entry came from.
    type Pending = BTreeMap<PathBuf, (ChangeKind, Option<PathBuf>)>;

    fn add(pending: &mut Pending, changes: &[Change]) {
        for c in changes {
            let (kind, from) = pending.entry(c.path.clone()).or_insert((c.kind, None));
            let written = c.kind == ChangeKind::Modified && c.from.is_none();
            if !(*kind == ChangeKind::Created && written) {
                *kind = c.kind;
            }
            if !written {
                *from = c.from.as_deref().map(Path::to_path_buf);
            }
        }
    }

    /// Reports the end of `run`; returns the exit status for `build_loop`
    /// (128 + N for signal N), unless we stopped the run ourselves: then
    /// what is left of its group is killed, and its status says nothing
    /// about the command.
    fn ended(run: &mut Running, status: ExitStatus) -> Option<u8> {
        let n = run.n;
        if let Some(hold) = run.hold.take() {
            // What it wrote is dropped before its end is told: a change
            // made after that line starts the next run.
            if let Err(e) = hold.release() {
                say!("build_loop: run {n}: the watch's hold did not end cleanly: {e}");
            }
        }
        match (status.code(), signal(status)) {
            (Some(code), _) => say!("build_loop: run {n} exited with status {code}"),
            (None, Some(sig)) => say!("build_loop: run {n} exited with signal {sig}"),
            _ => say!("build_loop: run {n} exited with {status}"),
        }
        if run.stopping {
            run.group.kill();
            return None;
        }
        let code = status.code().or(signal(status).map(|s| 128 + s));
        // A Windows status out of 0..=255 (an NTSTATUS such as
        // 0xC0000005) is a failure, not 0 or 255 by chance.
        Some(code.map_or(1, |c| u8::try_from(c).unwrap_or(1)))
    }

    /// The signal that ended a process (Unix; Windows has none).
    fn signal(status: ExitStatus) -> Option<i32> {
        #[cfg(unix)]
        return std::os::unix::process::ExitStatusExt::signal(&status);
        #[cfg(not(unix))]
        {
            let _ = status;
            None
        }
    }

    /// `created a.rs, renamed b.rs -> c.rs (+3 more)`, paths relative to
    /// `cwd`. A rename's source, removed, is not named again.
    fn describe(changes: &Pending, cwd: &Path) -> String {
        let rel = |p: &Path| p.strip_prefix(cwd).unwrap_or(p).display().to_string();
        let sources: std::collections::BTreeSet<&Path> =
            changes.values().filter_map(|(_, f)| f.as_deref()).collect();
        let items: Vec<String> = changes
            .iter()
            .filter(|(p, (k, _))| !(*k == ChangeKind::Removed && sources.contains(p.as_path())))
            .map(|(p, (k, from))| match from {
                Some(f) => format!("renamed {} -> {}", rel(f), rel(p)),
                None => format!("{k} {}", rel(p)),
            })
            .collect();
        let mut shown: Vec<String> = items.iter().take(SHOWN).cloned().collect();
        if items.len() > SHOWN {
            let last = shown.pop().unwrap_or_default();
            shown.push(format!("{last} (+{} more)", items.len() - SHOWN));
        }
        shown.join(", ")
    }

    pub fn main() -> ExitCode {
        let args = match parse_args() {
            Ok(a) => a,
            Err(e) => {
                say!("build_loop: {e}");
                return ExitCode::from(2);
            }
        };
        let stop_signals = signals();
        let cwd = std::env::current_dir().expect("the current directory");
        let roots: Vec<PathBuf> = args.paths.iter().map(|p| cwd.join(p)).collect();
        let spec = WatchSpec::new(roots.clone())
            .quiet_window(args.debounce)
            .max_delay(args.debounce.max(specwatch::DEFAULT_MAX_DELAY))
            .ignore_files(true)
            .skip_same_content(!args.same_content)
            .collapse_moves(!args.no_renames);
        let spec = if args.no_vcs_settle {
            spec
        } else {
            spec.vcs_settle(specwatch::DEFAULT_VCS_SETTLE)
        };
        let spec = if args.no_write_finished {
            spec
        } else {
            spec.write_finished(specwatch::DEFAULT_WRITE_FINISHED)
        };
        let spec = match &args.state {
            Some(state) => spec.state(cwd.join(state)),
            None => spec,
        };
        let spec = if args.hold_during_run {
            spec.during_holds(DuringHolds::Drop)
        } else {
            spec
        };
        let manager = Manager::new().expect("start the watch manager");
        let events = manager.subscribe();
        if let Err(e) = manager.apply("build", spec) {
            say!("build_loop: {e}");
            return ExitCode::from(2);
        }
        let mut phase = match manager.wait_watching("build", Duration::from_secs(60)) {
            Ok(status) => status.phase,
            Err(e) => {
                say!("build_loop: {e}");
                return ExitCode::from(1);
            }
        };
        if let Phase::Degraded { reason } = &phase {
            say!("build_loop: {reason}");
        }

        let (exit_tx, exits) = channel::unbounded();
        let mut runs = 0;
        let mut running: Option<Running> = None;
        let mut pending = Pending::new();
        let mut last_status = 0u8;
        let mut shutting_down = false;
        // With a state, the first batch says whether to run at start.
        let mut first = args.state.is_none();
        loop {
            // Start a run when idle with something to run for.
            if running.is_none() && !shutting_down && (first || !pending.is_empty()) {
                runs += 1;
                let why = if first {
                    "start".into()
                } else {
                    describe(&pending, &cwd)
                };
                say!("build_loop: run {runs}: {why}");
                (first, pending) = (false, Pending::new());
                let hold = match args.hold_during_run {
                    true => match manager.hold("build", format!("build_loop run {runs}")) {
                        Ok(g) => Some(g),
                        Err(e) => {
                            say!("build_loop: run {runs}: cannot hold the watch: {e}");
                            None
                        }
                    },
                    false => None,
                };
                match start(runs, &args.command, &exit_tx, hold) {
                    Ok(r) => running = Some(r),
                    Err(e) => {
                        say!(
                            "build_loop: run {runs}: cannot start {}: {e}",
                            args.command[0]
                        );
                        last_status = 127;
                    }
                }
            }
            if shutting_down && running.is_none() {
                break;
            }
            let kill_at = running.as_ref().and_then(|r| r.kill_at);
            let kill_timer = kill_at.map_or_else(channel::never, channel::at);
            select! {
                recv(events) -> ev => match ev {
                    Ok(Event::Changes(batch)) if !shutting_down => {
                        match &batch.restore {
                            Some(Restore::Restored { .. }) if batch.changes.is_empty() => {
                                say!("build_loop: nothing changed since the last run");
                            }
                            Some(Restore::Refused { reason }) => {
                                say!("build_loop: state not used: {reason}");
                                first = true;
                            }
                            _ => {}
                        }
                        let changes = if args.no_renames {
                            // Each change as if `from` were not there.
                            let plain = batch.changes.iter().map(|c| {
                                Change::new(c.path.clone(), c.kind, c.file_type)
                            });
                            plain.collect()
                        } else {
                            batch.changes.clone()
                        };
                        add(&mut pending, &changes);
                        match &mut running {
                            Some(run) if args.restart => {
                                say!("build_loop: stopping run {} to restart", run.n);
                                stop(run);
                            }
                            Some(run) => {
                                let mut this_batch = Pending::new();
                                add(&mut this_batch, &changes);
                                let why = describe(&this_batch, &cwd);
                                say!("build_loop: queued after run {}: {why}", run.n);
                            }
                            None => {}
                        }
                    }
                    Ok(Event::Status(s)) if s.phase != phase => {
                        phase = s.phase.clone();
                        if let Phase::Degraded { reason } | Phase::Failed { error: reason } = &phase {
                            say!("build_loop: {reason}");
                        }
                    }
                    Ok(_) => {}
                    Err(_) => break, // the manager is gone
                },
                recv(exits) -> ex => {
                    let (n, status) = ex.expect("a sender is kept here");
                    let mut run = running.take().expect("only a running run exits");
                    debug_assert_eq!(run.n, n);
                    if let Some(code) = ended(&mut run, status) {
                        last_status = code;
                    }
                }
                recv(stop_signals) -> _ => {
                    if let Some(run) = &mut running {
                        if shutting_down {
                            run.group.kill(); // asked twice
                        }
                        stop(run);
                    }
                    shutting_down = true;
                }
                recv(kill_timer) -> _ => {
                    if let Some(run) = &mut running {
                        run.group.kill();
                        run.kill_at = None;
                    }
                }
            }
        }
        ExitCode::from(last_status)
    }
}
