//! The public surface: what the types promise to the compiler.

use specwatch::{
    Applied, Change, ChangeBatch, ChangeKind, Error, Event, FileType, Manager, ManagerBuilder,
    Phase, ReconcileSummary, Stats, WatchSpec, WatchStatus,
};

fn send_sync<T: Send + Sync>() {}
fn send<T: Send>() {}

/// A manager is shared between threads (every method takes `&self`), and
/// everything it hands out can be moved to another thread.
#[test]
fn manager_is_send_and_sync_and_its_outputs_are_send() {
    send_sync::<Manager>();
    send_sync::<ManagerBuilder>();
    send::<Event>();
    send_sync::<ChangeBatch>();
    send_sync::<WatchStatus>();
    send_sync::<Stats>();
    send_sync::<WatchSpec>();
    send_sync::<Applied>();
    send_sync::<ReconcileSummary>();
    send_sync::<Phase>();
    send_sync::<Error>();
    send_sync::<specwatch::ChangesSince>();
    send_sync::<specwatch::RootStatus>();
    send::<crossbeam_channel::Receiver<Event>>();
}

/// Errors are `std` errors that cross threads, say which spec is to blame,
/// and keep the error they came from.
#[test]
fn errors_name_the_culprit_and_keep_their_source() {
    fn is_std_error<E: std::error::Error + Send + Sync + 'static>() {}
    is_std_error::<Error>();
    // An absolute path on every platform (`/srv` has no drive on Windows).
    let d = tempfile::tempdir().unwrap();
    let e = Manager::new()
        .unwrap()
        .apply(
            "web",
            WatchSpec::new([d.path()]).ignore(specwatch::IgnoreRule::new(d.path(), ["ok", "[z-a"])),
        )
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("\"web\"") && msg.contains("[z-a") && msg.contains("rule 0"),
        "{msg}"
    );
    let io = std::io::Error::other("inner");
    let e = Error::Engine {
        message: "outer".into(),
        source: Some(io),
    };
    let src = std::error::Error::source(&e).expect("the source is kept");
    assert_eq!(src.to_string(), "inner");
}

/// A change can be built by a consumer's own tests.
#[test]
fn changes_can_be_constructed() {
    let c = Change::new("/r/f", ChangeKind::Created, FileType::File);
    assert_eq!(
        (c.path.to_str(), c.kind, c.file_type),
        (Some("/r/f"), ChangeKind::Created, FileType::File)
    );
}
