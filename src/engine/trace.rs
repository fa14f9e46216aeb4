//! Tracing (cargo feature `tracing`): structured events and spans under the
//! target `specwatch`, so that `RUST_LOG=specwatch=debug` (with
//! tracing-subscriber's `EnvFilter`) tells which file caused a batch.
//!
//! The macros here are the only way the crate names `tracing`. Without the
//! feature each expands to nothing: its arguments are not evaluated, and no
//! `tracing` item is referenced. So a value computed for an event only is
//! computed inside the macro call (or bound with [`bind!`]), never in a
//! plain `let` that would be unused without the feature.
//!
//! Each event is emitted by the step that writes the fact it tells of
//! (ARCHITECTURE.md: one writer per fact), with the spec's name as the
//! field `spec` (not `name`, which tracing and its JSON formatter use for
//! the span or event itself).

/// `event!(LEVEL, field = value, ..., "message")`: a `tracing` event at
/// `tracing::Level::LEVEL`, target `specwatch`; nothing without the
/// feature.
macro_rules! event {
    ($level:ident, $($rest:tt)+) => {
        #[cfg(feature = "tracing")]
        {
            ::tracing::event!(target: "specwatch", ::tracing::Level::$level, $($rest)+);
        }
    };
}

/// `span!(LEVEL, "name", field = value, ...)`: enters a `tracing` span until
/// the end of the enclosing block; nothing without the feature.
macro_rules! span {
    ($level:ident, $($rest:tt)+) => {
        #[cfg(feature = "tracing")]
        let _entered =
            ::tracing::span!(target: "specwatch", ::tracing::Level::$level, $($rest)+).entered();
    };
}

/// `traced! { statements }`: code that only gathers what an event reports
/// (a loop over specs, a choice of level); nothing without the feature.
macro_rules! traced {
    ($($code:tt)*) => {
        #[cfg(feature = "tracing")]
        {
            $($code)*
        }
    };
}

/// `bind!(name = expr)`: a binding for a later [`event!`] or [`traced!`] in
/// the same block (a count before a step); nothing without the feature.
macro_rules! bind {
    ($name:ident = $value:expr) => {
        #[cfg(feature = "tracing")]
        let $name = $value;
    };
}

pub(crate) use {bind, event, span, traced};

#[cfg(feature = "tracing")]
pub(super) use fields::*;

/// Field values rendered only when a subscriber records them.
#[cfg(feature = "tracing")]
mod fields {
    use std::fmt;

    use crate::batch::change::Change;
    use crate::index::DirId;
    use crate::status::{BackendReason, FsName};

    /// How many paths a batch event names.
    pub(crate) const FIRST_PATHS: usize = 5;

    /// A batch's first paths with their kinds: `created /r/a.rs, modified
    /// /r/b.rs (+12 more)`.
    pub(crate) struct FirstPaths<'a>(pub &'a [Change]);

    impl fmt::Display for FirstPaths<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            for (i, c) in self.0.iter().take(FIRST_PATHS).enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{} {}", c.kind, c.path.display())?;
            }
            let more = self.0.len().saturating_sub(FIRST_PATHS);
            if more > 0 {
                write!(f, " (+{more} more)")?;
            }
            Ok(())
        }
    }

    /// Why a root got its backend: `chosen`, `local: ext4 (0xef53)`,
    /// `shared: fuse (0x65735546)`, `file system unknown (...)`.
    pub(crate) struct Reason<'a>(pub &'a BackendReason);

    impl fmt::Display for Reason<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self.0 {
                BackendReason::Chosen => f.write_str("chosen"),
                BackendReason::Local {
                    file_system: Some(n),
                    magic,
                } => write!(f, "local: {}", FsName(n, *magic)),
                BackendReason::Local {
                    file_system: None,
                    magic,
                } => FsName("local file system", *magic).fmt(f),
                BackendReason::Shared { file_system, magic } => {
                    write!(f, "shared: {}", FsName(file_system, *magic))
                }
                BackendReason::Unknown { error } => write!(f, "file system unknown ({error})"),
            }
        }
    }

    impl super::super::Engine {
        /// The path of directory `id`, or `?` for a node that is gone.
        pub(in crate::engine) fn dir_path(&self, id: DirId) -> String {
            self.index
                .get(id)
                .map_or_else(|| "?".to_owned(), |n| n.path().display().to_string())
        }
    }
}
