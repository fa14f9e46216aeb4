//! The `tracing` feature: what the events say, through `tracing-subscriber`
//! installed as the global default (so that it sees the engine's thread
//! too): a JSON layer whose lines the tests read back, and the test writer
//! (libtest shows what a failing test traced). Tests run in parallel and
//! share it: each one names its specs (or its paths) uniquely and looks
//! only at its own records. Every wait has a deadline: `wait_watching` and
//! `sync` return only after the engine emitted what the steps before them
//! led to.
#![cfg(feature = "tracing")]

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;
use specwatch::{Applied, Backend, Event, Generation, Manager, WatchSpec};
use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt;
use tracing_subscriber::prelude::*;

const WAIT: Duration = Duration::from_secs(20);

/// A span's name and fields.
type SpanInfo = (String, BTreeMap<String, String>);

/// One event as the JSON layer wrote it.
#[derive(Clone, Debug)]
struct Record {
    level: Level,
    target: String,
    message: String,
    fields: BTreeMap<String, String>,
    /// The spans it happened in, outermost first: name and fields.
    spans: Vec<SpanInfo>,
}

impl Record {
    fn field(&self, name: &str) -> &str {
        self.fields.get(name).map_or("", String::as_str)
    }

    /// One line of the JSON layer.
    fn parse(line: &str) -> Record {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        // Strings as they are, numbers and booleans as written.
        let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
        let object = |v: &Value| -> BTreeMap<String, String> {
            v.as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), text(v)))
                .collect()
        };
        let mut fields = object(&v["fields"]);
        let spans = v["spans"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| {
                let mut f = object(s);
                (f.remove("name").unwrap_or_default(), f)
            })
            .collect();
        Record {
            level: text(&v["level"]).parse().expect("a level"),
            target: text(&v["target"]),
            message: fields.remove("message").unwrap_or_default(),
            fields,
            spans,
        }
    }
}

/// What the JSON layer wrote: one event a line.
static JSON: Mutex<Vec<u8>> = Mutex::new(Vec::new());

/// The JSON layer's writer: into [`JSON`], one event at a time.
struct IntoJson;

impl std::io::Write for IntoJson {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        JSON.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the subscriber (once, for every thread of this binary):
/// everything `specwatch` emits, to both layers.
fn install() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        tracing_subscriber::registry()
            .with(
                fmt::layer()
                    .json()
                    .with_span_list(true)
                    .with_current_span(false)
                    .without_time()
                    .with_writer(|| IntoJson),
            )
            .with(fmt::layer().with_test_writer())
            .with(Targets::new().with_target("specwatch", Level::TRACE))
            .try_init()
            .expect("no other global subscriber in this binary");
    });
}

/// The records so far for which `keep` holds.
fn records(keep: impl Fn(&Record) -> bool) -> Vec<Record> {
    let json = JSON.lock().unwrap();
    String::from_utf8_lossy(&json)
        .lines()
        .map(Record::parse)
        .filter(|r| keep(r))
        .collect()
}

/// The records of spec `spec` with message `message`.
fn of(spec: &str, message: &str) -> Vec<Record> {
    records(|r| r.field("spec") == spec && r.message == message)
}

/// The one record of spec `spec` with message `message`, else a panic that
/// shows what the spec's records are.
fn one(spec: &str, message: &str) -> Record {
    let found = of(spec, message);
    assert_eq!(
        found.len(),
        1,
        "one {message:?} event for {spec}; its records: {:#?}",
        records(|r| r.field("spec") == spec)
    );
    found.into_iter().next().unwrap()
}

fn spec(dir: &Path) -> WatchSpec {
    WatchSpec::new([dir]).quiet_window(Duration::from_millis(10))
}

#[test]
fn applying_a_spec_says_what_it_did() {
    install();
    let dir = tempfile::tempdir().unwrap();
    let m = Manager::new().unwrap();
    let name = "trace-apply";

    assert_eq!(
        m.apply(name, spec(dir.path())).unwrap(),
        Applied::Created(Generation(1))
    );
    let r = one(name, "spec applied");
    assert_eq!((r.level, r.target.as_str()), (Level::INFO, "specwatch"));
    assert_eq!(r.field("generation"), "1");
    assert_eq!(r.field("outcome"), "created");
    m.wait_watching(name, WAIT).unwrap();
    let started = one(name, "watching started");
    assert_eq!(started.field("generation"), "1");

    // The same spec again: no work, said at debug.
    assert_eq!(
        m.apply(name, spec(dir.path())).unwrap(),
        Applied::Unchanged(Generation(1))
    );
    let again = of(name, "spec applied");
    assert_eq!(again.len(), 2);
    assert_eq!(
        (again[1].level, again[1].field("outcome")),
        (Level::DEBUG, "unchanged")
    );

    // Changed: a new generation, and watching starts again.
    let changed = spec(dir.path()).quiet_window(Duration::from_millis(20));
    assert_eq!(
        m.apply(name, changed).unwrap(),
        Applied::Updated(Generation(2))
    );
    let updated = of(name, "spec applied");
    assert_eq!(
        (updated[2].field("outcome"), updated[2].field("generation")),
        ("updated", "2")
    );
    m.wait_watching(name, WAIT).unwrap();
    let started = of(name, "watching started");
    assert_eq!(started.len(), 2);
    assert_eq!(started[1].field("generation"), "2");

    // Reconcile names each spec; deleting says so.
    let other = "trace-apply-reconciled";
    m.reconcile([(other, spec(dir.path()))]).unwrap();
    assert_eq!(one(other, "spec applied").field("outcome"), "created");
    assert_eq!(one(name, "spec deleted").level, Level::INFO);
    assert!(m.delete(other).unwrap());
    one(other, "spec deleted");
}

#[test]
fn the_backend_chosen_for_each_root_is_named() {
    install();
    let auto_dir = tempfile::tempdir().unwrap();
    let poll_dir = tempfile::tempdir().unwrap();
    let m = Manager::new().unwrap();
    let (auto, polled) = ("trace-backend-auto", "trace-backend-poll");
    m.apply(auto, spec(auto_dir.path())).unwrap();
    let every = Duration::from_millis(50);
    m.apply(
        polled,
        spec(poll_dir.path()).backend(Backend::Poll { interval: every }),
    )
    .unwrap();
    let auto_status = m.wait_watching(auto, WAIT).unwrap();
    let poll_status = m.wait_watching(polled, WAIT).unwrap();

    // Chosen by the spec: the words are known.
    let r = one(polled, "backend chosen for root");
    assert_eq!(r.level, Level::INFO);
    let root = poll_status.roots[0].path.display().to_string();
    assert_eq!(r.field("path"), root);
    assert_eq!(r.field("backend"), "poll every 50ms");
    assert_eq!(r.field("reason"), "chosen");
    assert_eq!(
        r.field("status"),
        format!("poll every 50ms: chosen at {root}")
    );

    // Auto: what statfs found, as the status tells it.
    let r = one(auto, "backend chosen for root");
    let st = &auto_status.roots[0];
    assert_eq!(r.field("path"), st.path.display().to_string());
    assert_eq!(r.field("backend"), st.backend.to_string());
    assert_eq!(r.field("status"), st.to_string());
    assert!(!r.field("reason").is_empty());
    // Decided while the engine applied the spec: inside its span.
    assert!(
        r.spans
            .iter()
            .any(|(n, f)| n == "apply" && f.get("spec").map(String::as_str) == Some(auto)),
        "in the apply span: {r:#?}"
    );
}

#[test]
fn a_batch_names_the_file_that_caused_it() {
    install();
    let dir = tempfile::tempdir().unwrap();
    let m = Manager::new().unwrap();
    let events = m.subscribe();
    let name = "trace-batch";
    // A long window: the batch closes at the sync, with everything in it.
    let long = spec(dir.path())
        .quiet_window(Duration::from_secs(30))
        .max_delay(Duration::from_secs(30));
    m.apply(name, long).unwrap();
    m.wait_watching(name, WAIT).unwrap();

    fs::write(dir.path().join("caused-the-rebuild.rs"), "fn main() {}").unwrap();
    m.sync(name, WAIT).unwrap();
    let r = one(name, "batch published");
    assert_eq!(r.level, Level::DEBUG);
    assert_eq!(r.field("changes"), "1");
    assert_eq!(r.field("generation"), "1");
    assert!(
        r.field("paths").starts_with("created ")
            && r.field("paths").ends_with("caused-the-rebuild.rs"),
        "the file is named: {r:#?}"
    );
    // The event's seq is the delivered batch's.
    let deadline = Instant::now() + WAIT;
    let batch = loop {
        match events.recv_deadline(deadline).expect("the batch arrives") {
            Event::Changes(b) if b.name == name => break b,
            _ => continue,
        }
    };
    assert_eq!(r.field("seq"), batch.seq.to_string());
    assert!(batch.changes[0].path.ends_with("caused-the-rebuild.rs"));

    // Many files: the first five, and how many more.
    for i in 0..7 {
        fs::write(dir.path().join(format!("f{i}.txt")), "x").unwrap();
    }
    m.sync(name, WAIT).unwrap();
    let batches = of(name, "batch published");
    assert_eq!(batches.len(), 2, "{batches:#?}");
    let r = &batches[1];
    assert_eq!(r.field("changes"), "7");
    let paths = r.field("paths");
    assert_eq!(paths.matches("created ").count(), 5, "{paths}");
    assert!(paths.contains("f0.txt") && paths.contains("f4.txt"));
    assert!(!paths.contains("f5.txt"));
    assert!(paths.ends_with(" (+2 more)"), "{paths}");
}

#[cfg(feature = "test-hooks")]
#[test]
fn a_lost_queue_is_recovered_and_said_so() {
    install();
    let dir = tempfile::tempdir().unwrap();
    let m = Manager::new().unwrap();
    let _events = m.subscribe();
    let name = "trace-overflow";
    m.apply(name, spec(dir.path())).unwrap();
    m.wait_watching(name, WAIT).unwrap();
    // A read of the OS's events after the root's first read (the sync's
    // cookie): the recovery skips a directory first read after the last
    // complete read of events, as one that shows all that was lost.
    m.sync(name, WAIT).unwrap();

    // Pause the OS reader (native backend): it reads nothing from its
    // next read on until resumed.
    m.pause_os_reader(true);
    fs::write(dir.path().join("lost.rs"), "x").unwrap();
    m.inject_overflow().unwrap();
    m.pause_os_reader(false);
    m.sync(name, WAIT).unwrap();

    let lost = records(|r| {
        r.message.starts_with("OS events lost") && r.field("specs").split(", ").any(|s| s == name)
    });
    assert_eq!(lost.len(), 1, "{lost:#?}");
    assert_eq!(lost[0].level, Level::WARN);
    let done = records(|r| {
        r.message.starts_with("overflow recovered")
            && r.field("specs").split(", ").any(|s| s == name)
    });
    assert_eq!(done.len(), 1, "{done:#?}");
    assert_eq!(done[0].level, Level::INFO);
    let found: u64 = done[0].field("changes").parse().unwrap();
    if cfg!(target_os = "linux") {
        // The reader was paused: only the rescan can have found it.
        assert!(found >= 1, "the rescan found lost.rs: {done:#?}");
    }
    // And the batch it led to names the file.
    assert!(
        of(name, "batch published")
            .iter()
            .any(|r| r.field("paths").contains("lost.rs")),
        "{:#?}",
        of(name, "batch published")
    );
}

#[test]
fn the_watch_limit_is_a_warning_naming_the_directory() {
    install();
    let dir = tempfile::tempdir().unwrap();
    for d in ["a", "b", "c"] {
        fs::create_dir(dir.path().join(d)).unwrap();
    }
    // One watch: the root's parent (to see the root come and go) takes it.
    if !cfg!(target_os = "linux") {
        return; // the cap applies to the native backend only
    }
    let m = Manager::builder().max_os_watches(1).build().unwrap();
    let name = "trace-limit";
    m.apply(name, spec(dir.path())).unwrap();
    m.wait_watching(name, WAIT).unwrap();
    m.sync(name, WAIT).unwrap();
    let root = m.status(name).unwrap().roots[0].path.display().to_string();
    let warned = records(|r| r.field("path").starts_with(&root) && r.message.contains("limit"));
    assert!(!warned.is_empty(), "no limit event under {root}");
    let first = &warned[0];
    assert_eq!(first.level, Level::WARN, "{warned:#?}");
    assert!(!first.field("reason").is_empty());
    assert!(
        warned[1..].iter().all(|r| r.level == Level::DEBUG),
        "one warning per episode: {warned:#?}"
    );
}
