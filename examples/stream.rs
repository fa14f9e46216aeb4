//! Watches directories from an async (tokio) program and prints one line
//! per change: `Manager::stream`, read with `.next().await`, with no thread
//! per subscriber.
//!
//! ```text
//! cargo run --example stream --features stream -- DIR...
//! ```
//!
//! Output, as the `watch` example's: `READY` once watching is established,
//! then one line per change: `created`, `modified` or `removed`, a TAB, the
//! path, a newline. Status changes (a root polled, a directory that cannot
//! be read) go to stderr. Runs until interrupted.
//!
//! Two tasks read two streams of one manager: one the change batches, one
//! the status snapshots. Each is woken by the engine when it delivers; a
//! task that falls behind loses nothing (its batches are merged per path
//! until it reads again).

#[cfg(not(feature = "stream"))]
fn main() {
    eprintln!("build with --features stream: cargo run --example stream --features stream -- DIR");
    std::process::exit(2)
}

#[cfg(feature = "stream")]
fn main() -> std::process::ExitCode {
    use std::path::PathBuf;
    use std::process::ExitCode;

    let dirs: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if dirs.is_empty() || dirs.iter().any(|d| d == "--help" || d == "-h") {
        eprintln!("usage: stream DIR...");
        return ExitCode::from(2);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("tokio runtime");
    match runtime.block_on(run(dirs)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stream: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(feature = "stream")]
async fn run(dirs: Vec<std::path::PathBuf>) -> Result<(), specwatch::Error> {
    use std::io::Write;
    use std::sync::Arc;
    use std::time::Duration;

    use futures_util::StreamExt;
    use specwatch::{Manager, Phase, WatchSpec};

    let manager = Arc::new(Manager::new()?);
    // Subscribe before applying, so that no event of the spec is missed.
    let events = manager.stream();
    let mut statuses = manager.stream().statuses();
    manager.apply("dirs", WatchSpec::new(dirs))?;

    // `wait_watching` blocks: run it where blocking is allowed.
    let m = manager.clone();
    tokio::task::spawn_blocking(move || m.wait_watching("dirs", Duration::from_secs(30)))
        .await
        .expect("wait_watching does not panic")?;
    println!("READY");

    let status_task = tokio::spawn(async move {
        while let Some(status) = statuses.next().await {
            match &status.phase {
                Phase::Watching => {}
                phase => eprintln!("stream: {}: {phase}", status.name),
            }
        }
    });

    let mut batches = events.changes();
    while let Some(batch) = batches.next().await {
        let mut out = std::io::stdout().lock();
        for change in &batch.changes {
            let _ = writeln!(out, "{}\t{}", change.kind, change.path.display());
        }
        let _ = out.flush();
    }
    // The manager is still alive here, so the stream never ends; were it
    // dropped, both streams would end after their last event.
    status_task.abort();
    Ok(())
}
