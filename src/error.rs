//! The crate's one error type.

use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong when talking to a [`Manager`](crate::Manager).
///
/// Each variant names its culprit: the spec, the path or the pattern. Runtime
/// trouble that happens *while* watching (a directory that cannot be read, a
/// root that vanished) is not an `Error`: it is reported in
/// [`WatchStatus`](crate::WatchStatus), because nobody is waiting on a call
/// when it happens.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A spec's state file ([`WatchOptions::state`](crate::WatchOptions::state))
    /// could not be saved.
    #[error("watch spec {spec:?}: state file {path:?}: {message}")]
    State {
        /// The spec's name.
        spec: String,
        /// The state file.
        path: PathBuf,
        /// What went wrong.
        message: String,
        /// The I/O error, if one.
        #[source]
        source: Option<std::io::Error>,
    },

    /// A spec name was empty.
    #[error("a watch spec name must not be empty")]
    EmptyName,

    /// The same name appeared twice in one desired set.
    #[error("watch spec name {spec:?} appears more than once in the desired set")]
    DuplicateName {
        /// The repeated name.
        spec: String,
    },

    /// A spec listed no paths to watch.
    #[error("watch spec {spec:?} has no paths")]
    NoPaths {
        /// The spec's name.
        spec: String,
    },

    /// A path (to watch, or the base of an ignore rule) was relative and the
    /// spec has no absolute `base_dir` to resolve it against.
    #[error("watch spec {spec:?}: path {path:?} is relative and the spec has no absolute base_dir")]
    RelativePath {
        /// The spec's name.
        spec: String,
        /// The offending path, as given.
        path: PathBuf,
    },

    /// An ignore pattern could not be parsed.
    #[error(
        "watch spec {spec:?}: invalid ignore pattern {pattern:?} (rule {rule}, base {base:?}): {reason}"
    )]
    InvalidPattern {
        /// The spec's name.
        spec: String,
        /// The rule's position in the spec's `ignores` (from 0).
        rule: usize,
        /// The pattern, exactly as given.
        pattern: String,
        /// The base directory of the rule the pattern belongs to.
        base: PathBuf,
        /// What the pattern parser said.
        reason: String,
    },

    /// A pattern given to filter what a spec sees
    /// ([`Manager::files`](crate::Manager::files)) is not a valid glob.
    #[error("watch spec {spec:?}: invalid filter pattern {pattern:?}: {reason}")]
    InvalidFilter {
        /// The spec's name.
        spec: String,
        /// The pattern, exactly as given.
        pattern: String,
        /// What the glob parser said.
        reason: String,
    },

    /// An ignore rule's base lies neither above nor below any of the spec's
    /// roots: its patterns could never match anything.
    #[error(
        "watch spec {spec:?}: ignore rule {rule} (base {base:?}) is outside every path of the spec and would never match"
    )]
    InertRule {
        /// The spec's name.
        spec: String,
        /// The rule's index in the spec's `ignores`.
        rule: usize,
        /// The rule's base directory.
        base: PathBuf,
    },

    /// A spec option was out of range.
    #[error("watch spec {spec:?}: invalid option {option}: {reason}")]
    InvalidOption {
        /// The spec's name.
        spec: String,
        /// The option's name.
        option: &'static str,
        /// Why it was refused.
        reason: String,
    },

    /// The spec asks for an event backend that its manager does not run
    /// (a manager runs one: see [`Backend`](crate::Backend)).
    #[error("watch spec {spec:?}: backend {wanted} is not available: this manager runs {running}")]
    BackendUnavailable {
        /// The spec's name.
        spec: String,
        /// What the spec asked for.
        wanted: crate::Backend,
        /// What the manager runs.
        running: crate::Backend,
    },

    /// A wait (for example [`Manager::wait_watching`](crate::Manager::wait_watching))
    /// ran out of time.
    #[error("watch spec {spec:?}: timed out after {timeout:?} waiting for {waited_for}")]
    Timeout {
        /// The spec's name.
        spec: String,
        /// What was awaited.
        waited_for: &'static str,
        /// How long the call waited.
        timeout: Duration,
    },

    /// The engine did not answer a question within its time (for example
    /// [`Manager::stats`](crate::Manager::stats)): it is busy, say walking
    /// a huge new tree, or stuck on a hung network file system.
    #[error(
        "the watch engine did not answer within {timeout:?} (asked for {waited_for}): it is busy"
    )]
    EngineBusy {
        /// What was asked for.
        waited_for: &'static str,
        /// How long the call waited.
        timeout: Duration,
    },

    /// The named spec is not (or no longer) applied.
    #[error("no watch spec named {spec:?}")]
    NotFound {
        /// The name that was asked for.
        spec: String,
    },

    /// The spec is applied but its watch failed to start.
    #[error("watch spec {spec:?} failed: {message}")]
    Failed {
        /// The spec's name.
        spec: String,
        /// The failure, as reported in its status.
        message: String,
    },

    /// The manager's engine could not start (for example the inotify instance
    /// could not be created) or has stopped.
    #[error("the watch engine is not running: {message}")]
    Engine {
        /// What went wrong.
        message: String,
        /// The underlying I/O error, where there is one.
        #[source]
        source: Option<std::io::Error>,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
