//! One replica of a feed: run it on several hosts (or several mounts of
//! one storage), and every one prints the same changes, while only one
//! of them watches the storage.
//!
//! ```text
//! cargo run -p specwatch-feed --example feed -- --redis redis://127.0.0.1:6379/ \
//!     --name charts [--poll-interval MS] [--lease-ttl MS] [--ignore PATTERN]... \
//!     [--initial-scan] [--seqs] PATH
//! ```
//!
//! Output: `READY` once the replica has been handed the whole tree, then
//! the lines of the `watch` example: `created`, `modified` or `removed`,
//! a TAB, the path (below this replica's PATH; its raw bytes on Unix), a
//! newline, flushed after each line. `--initial-scan` prints the whole
//! tree as `created` lines before `READY` (and again after each resync).
//! `--seqs` adds, in order with them, a line per batch (`batch`, TAB, its
//! seq), per resync (`resync`, TAB, the reason, TAB, the picture's seq)
//! and per role (`role`, TAB, `watching`, `following` or `local`).
//! stderr says the role and each resync. `--poll-interval` is the
//! watcher's interval on shared storage (NFS, FUSE), 1000 ms by default;
//! `--lease-ttl` the lease's expiry (3000 ms). Ctrl-C or SIGTERM exits
//! with status 0, and a watcher lets go of the lease on its way out.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use specwatch::{ChangeBatch, Manager, WatchSpec};
use specwatch_feed::{FeedEvent, FeedOptions, Replica};

const USAGE: &str = "usage: feed --redis URL --name NAME [--poll-interval MS] [--lease-ttl MS] \
                     [--ignore PATTERN]... [--initial-scan] [--seqs] PATH";

struct Args {
    redis: String,
    name: String,
    poll: Duration,
    ttl: Option<Duration>,
    ignores: Vec<String>,
    initial_scan: bool,
    seqs: bool,
    path: PathBuf,
}

fn parse() -> Result<Args, String> {
    let mut it = std::env::args_os().skip(1);
    let (mut redis, mut name, mut path) = (None, None, None);
    let mut args = Args {
        redis: String::new(),
        name: String::new(),
        poll: Duration::from_millis(1000),
        ttl: None,
        ignores: Vec::new(),
        initial_scan: false,
        seqs: false,
        path: PathBuf::new(),
    };
    let ms = |v: Option<std::ffi::OsString>, what: &str| -> Result<Duration, String> {
        v.and_then(|v| v.to_str()?.parse().ok())
            .map(Duration::from_millis)
            .ok_or_else(|| format!("{what} takes a number of milliseconds"))
    };
    let text = |v: Option<std::ffi::OsString>, what: &str| -> Result<String, String> {
        v.and_then(|v| v.into_string().ok())
            .ok_or_else(|| format!("{what} takes a value"))
    };
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("--redis") => redis = Some(text(it.next(), "--redis")?),
            Some("--name") => name = Some(text(it.next(), "--name")?),
            Some("--poll-interval") => args.poll = ms(it.next(), "--poll-interval")?,
            Some("--lease-ttl") => args.ttl = Some(ms(it.next(), "--lease-ttl")?),
            Some("--ignore") => args.ignores.push(text(it.next(), "--ignore")?),
            Some("--initial-scan") => args.initial_scan = true,
            Some("--seqs") => args.seqs = true,
            Some(s) if s.starts_with("--") => return Err(format!("unknown option {s}")),
            _ if path.is_none() => path = Some(PathBuf::from(a)),
            _ => return Err("one PATH".into()),
        }
    }
    args.redis = redis.ok_or("--redis is required")?;
    args.name = name.ok_or("--name is required")?;
    args.path = path.ok_or("a PATH is required")?;
    Ok(args)
}

/// Writes the lines of `batch`'s changes (`created`, TAB, path).
fn print_changes(out: &mut impl Write, batch: &ChangeBatch) -> std::io::Result<()> {
    for c in &batch.changes {
        write!(out, "{}\t", c.kind)?;
        #[cfg(unix)]
        out.write_all(std::os::unix::ffi::OsStrExt::as_bytes(c.path.as_os_str()))?;
        #[cfg(not(unix))]
        out.write_all(c.path.to_string_lossy().as_bytes())?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::absolute(&args.path)?;
    let spec = WatchSpec::new([&root]).ignore_patterns(args.ignores.iter().map(String::as_str));
    let poll = args.poll;
    let mut opts = FeedOptions::new(&args.redis, &args.name, spec)?
        .manager(move || Manager::builder().poll_interval(poll).build());
    if let Some(ttl) = args.ttl {
        opts = opts.lease_ttl(ttl);
    }
    let (replica, events) = Replica::start(opts)?;
    let (stop_tx, stop) = specwatch::crossbeam_channel::bounded::<()>(1);
    ctrlc::set_handler(move || {
        let _ = stop_tx.try_send(());
    })?;
    let mut out = std::io::stdout().lock();
    let mut ready = false;
    loop {
        specwatch::crossbeam_channel::select! {
            recv(stop) -> _ => break,
            recv(events) -> ev => {
                let Ok(ev) = ev else { break };
                match ev {
                    FeedEvent::Resync { reason, picture } => {
                        eprintln!(
                            "feed: resync ({reason}): {} entries at {}",
                            picture.changes.len(),
                            picture.seq
                        );
                        if args.seqs {
                            writeln!(out, "resync\t{reason}\t{}", picture.seq)?;
                        }
                        if args.initial_scan {
                            print_changes(&mut out, &picture)?;
                        }
                    }
                    FeedEvent::Changes(batch) => {
                        if args.seqs {
                            writeln!(out, "batch\t{}", batch.seq)?;
                        }
                        print_changes(&mut out, &batch)?;
                    }
                    FeedEvent::Role(role) => {
                        eprintln!("feed: {role} ({})", replica.status().instance);
                        if args.seqs {
                            writeln!(out, "role\t{role}")?;
                        }
                        if !ready {
                            ready = true;
                            writeln!(out, "READY")?;
                        }
                    }
                    _ => {}
                }
                out.flush()?;
            }
        }
    }
    drop(replica);
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("feed: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("feed: {e}");
            ExitCode::FAILURE
        }
    }
}
