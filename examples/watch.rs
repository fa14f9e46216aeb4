//! Watches directories and prints one line per change.
//!
//! ```text
//! cargo run --release --example watch -- [--ignore PATTERN]... [--debounce MS]
//!     [--backend auto|native|portable|poll] [--poll-interval MS]
//!     [--follow-symlinks] [--initial-scan] [--state FILE] PATH...
//! ```
//!
//! Output (the public contract): `READY` once watching is established, then
//! one line per change: `created`, `modified` or `removed`, a TAB, the
//! absolute path as the platform writes it, never a lossy rendering (on
//! Unix its raw bytes; on Windows its UTF-16 as WTF-8: UTF-8 for every
//! valid name, an unpaired surrogate as the three bytes of its code
//! point), a newline. Flushed after every line. Ctrl-C (SIGINT), SIGTERM
//! or SIGHUP (on Windows: Ctrl-C, Ctrl-Break, the console closing) exits
//! cleanly with status 0.
//! Patterns given with `--ignore` apply relative to each PATH.
//! `--follow-symlinks` sets [`WatchOptions::follow_symlinks`]: changes below
//! a link to a directory are printed under the link's path. `--backend poll`
//! looks for changes every `--poll-interval` milliseconds (default 1000)
//! instead of asking the OS (for network and FUSE mounts); giving
//! `--poll-interval` alone implies it. `--backend auto` (the default)
//! watches with the OS's events, except roots on network and FUSE file
//! systems, which it polls (every `--poll-interval` milliseconds when both
//! are given). Before `READY`, one line per root on stderr says which
//! backend it got and why (`watch: root: poll every 1s: fuse (0x65735546)
//! at /mnt/charts`); again whenever that changes. `--initial-scan` prints
//! every existing entry as `created` before the changes (see
//! [`WatchOptions::initial_scan`]). When stderr is a terminal, a line
//! `watch: indexing: N directories, M entries` is redrawn while a large
//! tree is first indexed; when it is not, nothing extra is printed.
//! `--state FILE` keeps the watch's state in FILE across runs (see
//! [`WatchOptions::state`]): the first lines after `READY` are then what
//! changed since the last run (the state is saved while running, at most
//! every 10 s, and on exit), and stderr says `watch: state: restored (N
//! changes since the last run)` or `watch: state: not used: REASON`
//! (every existing entry is then printed as `created` if
//! `--initial-scan` is given too, else nothing).
//!
//! [`WatchOptions::follow_symlinks`]: specwatch::WatchOptions::follow_symlinks
//! [`WatchOptions::initial_scan`]: specwatch::WatchOptions::initial_scan
//! [`WatchOptions::state`]: specwatch::WatchOptions::state

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, select};
use specwatch::{Backend, ChangeKind, Event, IgnoreRule, Manager, WatchSpec};

const USAGE: &str = "usage: watch [--ignore PATTERN]... [--debounce MS] \
     [--backend auto|native|portable|poll] [--poll-interval MS] [--follow-symlinks] [--initial-scan] [--state FILE] PATH...";

/// The poll interval when `--backend poll` gives none.
const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(1000);

struct Args {
    ignores: Vec<String>,
    debounce: Option<Duration>,
    backend: Backend,
    poll: bool,
    poll_interval: Option<Duration>,
    follow_symlinks: bool,
    initial_scan: bool,
    state: Option<PathBuf>,
    /// `--backend` was given (`auto` with `--poll-interval` sets the
    /// interval of polling shared file systems, rather than polling all).
    backend_given: bool,
    paths: Vec<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        ignores: Vec::new(),
        debounce: None,
        backend: Backend::Auto,
        poll: false,
        poll_interval: None,
        follow_symlinks: false,
        initial_scan: false,
        state: None,
        backend_given: false,
        paths: Vec::new(),
    };
    let mut it = std::env::args_os().skip(1);
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("--ignore") => {
                let p = it.next().ok_or("--ignore needs a pattern")?;
                args.ignores.push(
                    p.into_string()
                        .map_err(|_| "--ignore: pattern is not UTF-8")?,
                );
            }
            Some("--debounce") => {
                let v = it.next().ok_or("--debounce needs milliseconds")?;
                let ms: u64 = v
                    .to_str()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| format!("--debounce: not a number of milliseconds: {v:?}"))?;
                args.debounce = Some(Duration::from_millis(ms));
            }
            Some("--backend") => {
                let v = it
                    .next()
                    .ok_or("--backend needs auto, native, portable or poll")?;
                args.poll = false;
                args.backend_given = true;
                args.backend = match v.to_str() {
                    Some("native") => Backend::Native,
                    Some("portable") => Backend::Portable,
                    Some("auto") => Backend::Auto,
                    Some("poll") => {
                        args.poll = true;
                        Backend::Auto
                    }
                    _ => return Err(format!("--backend: unknown backend {v:?}")),
                };
            }
            Some("--poll-interval") => {
                let v = it.next().ok_or("--poll-interval needs milliseconds")?;
                let ms: u64 = v
                    .to_str()
                    .and_then(|s| s.parse().ok())
                    .filter(|ms| *ms > 0)
                    .ok_or_else(|| {
                        format!("--poll-interval: not a positive number of milliseconds: {v:?}")
                    })?;
                args.poll_interval = Some(Duration::from_millis(ms));
            }
            Some("--follow-symlinks") => args.follow_symlinks = true,
            Some("--initial-scan") => args.initial_scan = true,
            Some("--state") => {
                args.state = Some(PathBuf::from(it.next().ok_or("--state needs a file")?));
            }
            Some("-h") | Some("--help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            Some("--") => args.paths.extend(it.by_ref().map(PathBuf::from)),
            Some(s) if s.starts_with("--") => return Err(format!("unknown flag {s}\n{USAGE}")),
            _ => args.paths.push(PathBuf::from(a)),
        }
    }
    if args.paths.is_empty() {
        return Err(USAGE.into());
    }
    let auto_interval = args.backend_given && args.backend == Backend::Auto;
    if args.poll || (args.poll_interval.is_some() && !auto_interval) {
        if !args.poll && args.backend != Backend::Auto {
            return Err("--poll-interval goes with --backend poll".into());
        }
        args.backend = Backend::Poll {
            interval: args.poll_interval.unwrap_or(DEFAULT_POLL_INTERVAL),
        };
    }
    Ok(args)
}

/// Ctrl-C and termination requests (SIGINT, SIGTERM, SIGHUP; on Windows
/// the console's Ctrl-C, Ctrl-Break and close), through `ctrlc`.
fn signals() -> Receiver<()> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    if let Err(e) = ctrlc::set_handler(move || {
        let _ = tx.try_send(());
    }) {
        eprintln!("watch: cannot take Ctrl-C: {e}");
    }
    rx
}

fn write_path(out: &mut impl Write, kind: &str, path: &std::path::Path) -> std::io::Result<()> {
    out.write_all(kind.as_bytes())?;
    out.write_all(b"\t")?;
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        out.write_all(path.as_os_str().as_bytes())?;
    }
    #[cfg(windows)]
    out.write_all(&wtf8(path.as_os_str()))?;
    #[cfg(not(any(unix, windows)))]
    out.write_all(path.to_string_lossy().as_bytes())?;
    out.write_all(b"\n")?;
    out.flush()
}

/// A Windows path's 16-bit units as WTF-8: UTF-8 for every valid name, and
/// an unpaired surrogate (which no UTF-8 can hold) as the three bytes UTF-8
/// would give its code point (`ED A0 80` for U+D800), so that nothing is
/// lost or replaced. <https://simonsapin.github.io/wtf-8/>
#[cfg(windows)]
fn wtf8(s: &std::ffi::OsStr) -> Vec<u8> {
    use std::os::windows::ffi::OsStrExt;
    let mut out = Vec::with_capacity(s.len());
    for unit in char::decode_utf16(s.encode_wide()) {
        match unit {
            Ok(c) => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
            Err(e) => {
                let u = e.unpaired_surrogate();
                out.extend_from_slice(&[
                    0xE0 | (u >> 12) as u8,
                    0x80 | ((u >> 6) & 0x3F) as u8,
                    0x80 | (u & 0x3F) as u8,
                ]);
            }
        }
    }
    out
}

/// What has been said on stderr about the watch, so that a line is
/// printed when something changes, not on every snapshot.
struct Shown {
    roots: Vec<specwatch::RootStatus>,
    phase: specwatch::Phase,
}

impl Shown {
    /// Prints one event: its changes on stdout, status changes on stderr.
    fn show(&mut self, ev: Event, out: &mut impl Write) -> std::io::Result<()> {
        match ev {
            Event::Changes(batch) => {
                match &batch.restore {
                    Some(specwatch::Restore::Restored { .. }) => eprintln!(
                        "watch: state: restored ({} changes since the last run)",
                        batch.changes.len()
                    ),
                    Some(specwatch::Restore::Refused { reason }) => {
                        eprintln!("watch: state: not used: {reason}");
                    }
                    _ => {}
                }
                for c in &batch.changes {
                    let kind = match c.kind {
                        ChangeKind::Created => "created",
                        ChangeKind::Modified => "modified",
                        ChangeKind::Removed => "removed",
                    };
                    write_path(out, kind, &c.path)?;
                }
            }
            Event::Status(s) => {
                if s.roots != self.roots && !s.roots.is_empty() {
                    print_roots(&s.roots);
                    self.roots = s.roots.clone();
                }
                if s.phase != self.phase {
                    match &s.phase {
                        specwatch::Phase::Degraded { reason }
                        | specwatch::Phase::Failed { error: reason } => {
                            eprintln!("watch: {reason}");
                        }
                        specwatch::Phase::Watching if self.phase != specwatch::Phase::Starting => {
                            eprintln!("watch: watching in full again");
                        }
                        _ => {}
                    }
                    self.phase = s.phase.clone();
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// Draws `watch: indexing: N directories, M entries` on stderr (one line,
/// redrawn) while the first walk reports progress, until watching starts
/// or `deadline`; returns every event received meanwhile.
fn show_progress(events: &Receiver<Event>, deadline: Instant) -> Vec<Event> {
    let mut kept = Vec::new();
    let mut drawn = false;
    while let Ok(ev) = events.recv_deadline(deadline) {
        let done = match &ev {
            Event::Status(s) if s.name == "watch" => match (&s.phase, s.progress) {
                (specwatch::Phase::Starting, Some(p)) => {
                    eprint!(
                        "\rwatch: indexing: {} directories, {} entries",
                        p.dirs, p.entries
                    );
                    drawn = true;
                    false
                }
                (specwatch::Phase::Starting, None) => false,
                _ => true,
            },
            _ => false,
        };
        kept.push(ev);
        if done {
            break;
        }
    }
    if drawn {
        eprintln!();
    }
    kept
}

/// One stderr line per root: which backend watches it, and why.
fn print_roots(roots: &[specwatch::RootStatus]) {
    for r in roots {
        eprintln!("watch: root: {r}");
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let stop = signals();
    let cwd = match std::env::current_dir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("watch: cannot read the current directory: {e}");
            return ExitCode::from(1);
        }
    };
    let mut spec = WatchSpec::new(args.paths.iter().cloned())
        .base_dir(&cwd)
        .follow_symlinks(args.follow_symlinks)
        .initial_scan(args.initial_scan);
    if let Some(state) = &args.state {
        spec = spec.state(state);
    }
    for p in &args.paths {
        if !args.ignores.is_empty() {
            spec = spec.ignore(IgnoreRule::new(p.clone(), args.ignores.iter().cloned()));
        }
    }
    if let Some(d) = args.debounce {
        spec = spec
            .quiet_window(d)
            .max_delay(d.max(specwatch::DEFAULT_MAX_DELAY));
    }
    let mut builder = Manager::builder().backend(args.backend);
    if let Some(every) = args.poll_interval {
        builder = builder.poll_interval(every);
    }
    let manager = match builder.build() {
        Ok(m) => m,
        Err(e) => {
            eprintln!("watch: {e}");
            return ExitCode::from(1);
        }
    };
    let events = manager.subscribe();
    if let Err(e) = manager.apply("watch", spec) {
        eprintln!("watch: {e}");
        return ExitCode::from(2);
    }
    let roots: Vec<specwatch::RootStatus>;
    let phase: specwatch::Phase;
    // On a terminal, a progress line while a large tree is indexed (what
    // arrives meanwhile is kept for after READY); elsewhere nothing extra.
    let early = if std::io::stderr().is_terminal() {
        show_progress(&events, Instant::now() + Duration::from_secs(120))
    } else {
        Vec::new()
    };
    match manager.wait_watching("watch", Duration::from_secs(120)) {
        Ok(status) => {
            print_roots(&status.roots);
            phase = status.phase.clone();
            if let specwatch::Phase::Degraded { reason } = &status.phase {
                eprintln!("watch: degraded: {reason}");
            }
            roots = status.roots.clone();
        }
        Err(e) => {
            eprintln!("watch: {e}");
            return ExitCode::from(1);
        }
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if writeln!(out, "READY").and_then(|_| out.flush()).is_err() {
        return ExitCode::SUCCESS;
    }
    let mut shown = Shown { roots, phase };
    for ev in early {
        if shown.show(ev, &mut out).is_err() {
            return ExitCode::SUCCESS; // stdout closed
        }
    }
    loop {
        select! {
            recv(events) -> ev => {
                let Ok(ev) = ev else { break };
                if shown.show(ev, &mut out).is_err() {
                    return ExitCode::SUCCESS; // stdout closed
                }
            }
            recv(stop) -> _ => break,
        }
    }
    drop(manager);
    ExitCode::SUCCESS
}
