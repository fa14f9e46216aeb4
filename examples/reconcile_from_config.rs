//! Keeps a manager's watches equal to a configuration file's named specs,
//! level-triggered: reads the file, hands the whole set to
//! `Manager::reconcile`, and does it again whenever the file changes.
//!
//! ```text
//! cargo run --example reconcile_from_config --features serde -- CONFIG
//! ```
//!
//! CONFIG is JSON (`.json`) or TOML (`.toml`): a map from spec name to
//! spec (`specwatch::WatchSpecs`), for example
//!
//! ```text
//! { "web": { "paths": ["web"], "ignores": [{ "base": "web", "patterns": ["node_modules/"] }],
//!            "options": { "quiet_window": "20ms" } } }
//! ```
//!
//! Relative paths are taken from CONFIG's directory. Output on stdout: a
//! summary per reconcile (`created [web] updated [] deleted [] unchanged
//! []`), a line whenever a spec's phase changes (`web: watching`) or it is
//! deleted (`web: deleted`), and one line per change (`web: created
//! /srv/web/index.html`). A file that cannot be read, parsed or applied is
//! reported on stderr (`reconcile_from_config: CONFIG: ERROR; keeping the
//! last good set`) and changes nothing: `reconcile` validates every spec
//! before it touches any. Runs until interrupted.

#[cfg(not(feature = "serde"))]
fn main() {
    eprintln!(
        "build with --features serde: \
         cargo run --example reconcile_from_config --features serde -- CONFIG"
    );
    std::process::exit(2)
}

#[cfg(feature = "serde")]
fn main() -> std::process::ExitCode {
    use std::collections::HashMap;
    use std::time::Duration;

    use specwatch::crossbeam_channel::select;
    use specwatch::{Event, Manager, WatchSpec};

    let args: Vec<std::path::PathBuf> = std::env::args_os().skip(1).map(Into::into).collect();
    let ext = args
        .first()
        .and_then(|c| c.extension())
        .and_then(|e| e.to_str());
    let ([config], Some("json" | "toml")) = (&args[..], ext) else {
        eprintln!("usage: reconcile_from_config CONFIG.json|CONFIG.toml");
        return std::process::ExitCode::from(2);
    };
    let config = std::path::absolute(config).expect("an absolute path to CONFIG");

    // The config file is watched by a manager of its own: `reconcile` makes
    // the *whole* applied set equal the file's, so a spec for the file in
    // the same manager would be deleted by the first reconcile.
    let watches = Manager::new().expect("start the watch manager");
    let events = watches.subscribe();
    let config_watch = Manager::new().expect("start the config manager");
    let config_events = config_watch.subscribe();
    config_watch
        .apply("config", WatchSpec::new([&config]))
        .expect("a spec on CONFIG");
    // Watching before the first read: an edit made after it is never missed.
    config_watch
        .wait_watching("config", Duration::from_secs(60))
        .expect("CONFIG watched");

    reconcile(&watches, &config);
    let mut shown = HashMap::new(); // name -> (generation, phase) last printed
    loop {
        select! {
            recv(config_events) -> ev => match ev {
                Ok(Event::Changes(_)) => reconcile(&watches, &config),
                Ok(_) => {}
                Err(_) => break,
            },
            recv(events) -> ev => match ev {
                Ok(Event::Changes(batch)) => {
                    for c in &batch.changes {
                        println!("{}: {} {}", batch.name, c.kind, c.path.display());
                    }
                }
                Ok(Event::Status(s)) => {
                    let now = (s.observed_generation, s.phase.clone());
                    if shown.get(&s.name) != Some(&now) {
                        println!("{}: {}", s.name, s.phase);
                        shown.insert(s.name.clone(), now);
                    }
                }
                Ok(Event::Deleted(name)) => {
                    println!("{name}: deleted");
                    shown.remove(&name);
                }
                Ok(_) => {}
                Err(_) => break,
            },
        }
    }
    std::process::ExitCode::SUCCESS
}

/// Reads CONFIG and makes `manager`'s specs equal its; on any error, says
/// so and leaves the applied set as it was.
#[cfg(feature = "serde")]
fn reconcile(manager: &specwatch::Manager, config: &std::path::Path) {
    let outcome =
        load(config).and_then(|specs| manager.reconcile(specs).map_err(|e| e.to_string()));
    match outcome {
        Ok(s) => println!(
            "created [{}] updated [{}] deleted [{}] unchanged [{}]",
            s.created.join(", "),
            s.updated.join(", "),
            s.deleted.join(", "),
            s.unchanged.join(", ")
        ),
        Err(e) => eprintln!(
            "reconcile_from_config: {}: {e}; keeping the last good set",
            config.display()
        ),
    }
}

#[cfg(feature = "serde")]
fn load(config: &std::path::Path) -> Result<specwatch::WatchSpecs, String> {
    let text = std::fs::read_to_string(config).map_err(|e| e.to_string())?;
    let mut specs: specwatch::WatchSpecs = match config.extension().and_then(|e| e.to_str()) {
        Some("json") => serde_json::from_str(&text).map_err(|e| e.to_string())?,
        Some("toml") => toml::from_str(&text).map_err(|e| e.to_string())?,
        _ => unreachable!("checked in main"),
    };
    let dir = config.parent().expect("an absolute file path has a parent");
    for spec in specs.0.values_mut() {
        spec.base_dir.get_or_insert_with(|| dir.to_path_buf());
    }
    Ok(specs)
}
