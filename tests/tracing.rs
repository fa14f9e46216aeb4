//! The `tracing` feature: what the events say, through a hand-written
//! subscriber (no tracing-subscriber) installed as the global default, so
//! that it sees the engine's thread too. Tests run in parallel and share
//! it: each one names its specs (or its paths) uniquely and looks only at
//! its own records. Every wait has a deadline: `wait_watching` and `sync`
//! return only after the engine emitted what the steps before them led to.
#![cfg(feature = "tracing")]

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use specwatch::{Applied, Backend, Event, Generation, Manager, WatchSpec};
use tracing::field::{Field, Visit};
use tracing::span;
use tracing::{Level, Metadata, Subscriber};

const WAIT: Duration = Duration::from_secs(20);

/// A span's name and fields.
type SpanInfo = (String, BTreeMap<String, String>);

/// One event as the subscriber saw it.
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
}

/// Collects fields as strings (`%x` and `?x` both arrive as `Debug`).
#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

struct Collect {
    next: AtomicU64,
    spans: Mutex<HashMap<u64, SpanInfo>>,
}

thread_local! {
    static ENTERED: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

static RECORDS: Mutex<Vec<Record>> = Mutex::new(Vec::new());

impl Subscriber for Collect {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target().starts_with("specwatch")
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::TRACE)
    }

    fn new_span(&self, attrs: &span::Attributes<'_>) -> span::Id {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let mut f = Fields::default();
        attrs.record(&mut f);
        self.spans
            .lock()
            .unwrap()
            .insert(id, (attrs.metadata().name().to_owned(), f.0));
        span::Id::from_u64(id)
    }

    fn record(&self, id: &span::Id, values: &span::Record<'_>) {
        let mut f = Fields::default();
        values.record(&mut f);
        if let Some(s) = self.spans.lock().unwrap().get_mut(&id.into_u64()) {
            s.1.extend(f.0);
        }
    }

    fn record_follows_from(&self, _span: &span::Id, _follows: &span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let mut f = Fields::default();
        event.record(&mut f);
        let message = f.0.remove("message").unwrap_or_default();
        let spans = {
            let known = self.spans.lock().unwrap();
            ENTERED.with(|e| {
                e.borrow()
                    .iter()
                    .filter_map(|id| known.get(id).cloned())
                    .collect()
            })
        };
        RECORDS.lock().unwrap().push(Record {
            level: *event.metadata().level(),
            target: event.metadata().target().to_owned(),
            message,
            fields: f.0,
            spans,
        });
    }

    fn enter(&self, id: &span::Id) {
        ENTERED.with(|e| e.borrow_mut().push(id.into_u64()));
    }

    fn exit(&self, id: &span::Id) {
        ENTERED.with(|e| {
            let mut e = e.borrow_mut();
            if let Some(i) = e.iter().rposition(|x| *x == id.into_u64()) {
                e.remove(i);
            }
        });
    }
}

/// Installs the subscriber (once, for every thread of this binary).
fn install() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        tracing::subscriber::set_global_default(Collect {
            next: AtomicU64::new(0),
            spans: Mutex::new(HashMap::new()),
        })
        .expect("no other global subscriber in this binary");
    });
}

/// The records so far for which `keep` holds.
fn records(keep: impl Fn(&Record) -> bool) -> Vec<Record> {
    RECORDS
        .lock()
        .unwrap()
        .iter()
        .filter(|r| keep(r))
        .cloned()
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

#[test]
fn a_lost_queue_is_recovered_and_said_so() {
    install();
    let dir = tempfile::tempdir().unwrap();
    let m = Manager::new().unwrap();
    let _events = m.subscribe();
    let name = "trace-overflow";
    m.apply(name, spec(dir.path())).unwrap();
    m.wait_watching(name, WAIT).unwrap();

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
