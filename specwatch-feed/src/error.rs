//! The feed's one error type.

use std::path::PathBuf;
use std::time::Duration;

/// What went wrong, naming the culprit.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An option that cannot be used.
    #[error("feed option {option}: {reason}")]
    InvalidOption {
        /// The option's name.
        option: &'static str,
        /// Why.
        reason: String,
    },
    /// Redis could not be reached or refused a command.
    #[error("redis at {at}: {message}")]
    Redis {
        /// Where (the URL's host and port, without credentials).
        at: String,
        /// What it said.
        message: String,
    },
    /// The watch the replica runs failed.
    #[error(transparent)]
    Watch(#[from] specwatch::Error),
    /// A path outside the replica's root.
    #[error("{path} is not below the feed's root {root}")]
    OutsideRoot {
        /// The path given.
        path: PathBuf,
        /// The replica's root.
        root: PathBuf,
    },
    /// Only the watcher can do this (publish a snapshot).
    #[error("this replica is not the watcher ({role})")]
    NotWatching {
        /// What it is instead.
        role: crate::Role,
    },
    /// The deadline passed.
    #[error("timed out after {timeout:?} waiting for {waited_for}")]
    Timeout {
        /// What was awaited.
        waited_for: &'static str,
        /// How long.
        timeout: Duration,
    },
    /// The replica's thread stopped.
    #[error("the replica stopped: {reason}")]
    Stopped {
        /// Why.
        reason: String,
    },
}

/// `Result` with the feed's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
