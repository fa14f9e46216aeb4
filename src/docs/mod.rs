//! The guide: how specwatch works and how to use it, one topic per module.
//!
//! Start with [`specs`] (what a spec is and how a [`Manager`] applies it)
//! and [`batches`] (what a subscriber receives); the others are for when
//! their subject comes up.
//!
//! | topic | read it for |
//! |---|---|
//! | [`specs`] | specs, `apply` and `reconcile`, generations, roots that do not exist yet, symbolic links, subscribing, specs from a configuration file |
//! | [`batches`] | what a batch is, netting, quiet window and maximum delay, renames (`from`), `skip_same_content`, `metadata`, `initial_scan`, slow subscribers |
//! | [`ignores`] | ignore rules, ignore files (git's, Docker's, Tilt's), built-in ignores, pruning |
//! | [`backends`] | native, portable, poll and `Auto`; polling's cost and sizing; storage that fails, hangs or is unmounted; replicas over shared storage; `changes_since`, `rescan_every` |
//! | [`holds`] | batches held open: a VCS operation (`vcs_settle`), a file being written (`write_finished`) |
//! | [`state`] | changes since the last run: state files, [`Restore`], seqs and their instances |
//! | [`sync_and_status`] | the `sync` barrier, [`WatchStatus`], and how no change is lost (overflows, watch limits, failing directories, a backend that dies) |
//! | [`platforms`] | what is and is not tested on Linux, Windows, macOS and FreeBSD |
//! | [`performance`] | what things cost, the threads a manager runs, the OS's limits, and where the measurements are |
//!
//! The crate root lists the [known problems](crate#known-problems) and the
//! Cargo features. Every Rust example in this guide is compiled as a doc
//! test. Measurements, each with the command that produced it, are in
//! `benches/RESULTS.md` in the repository; `ARCHITECTURE.md` there is for
//! contributors (modules, owners, one change from the kernel to a
//! subscriber).
//!
//! [`Manager`]: crate::Manager
//! [`Restore`]: crate::Restore
//! [`WatchStatus`]: crate::WatchStatus

// Each topic is a Markdown file beside this one, included as the module's
// documentation: it reads as Markdown where the repository is browsed (and
// edits without a `//!` on every line), rustdoc renders it with its links
// checked, and its Rust blocks are doc tests like any doc comment's. The
// modules hold nothing else.

#[doc = include_str!("specs.md")]
pub mod specs {}

#[doc = include_str!("batches.md")]
pub mod batches {}

#[doc = include_str!("ignores.md")]
pub mod ignores {}

#[doc = include_str!("backends.md")]
pub mod backends {}

#[doc = include_str!("holds.md")]
pub mod holds {}

#[doc = include_str!("state.md")]
pub mod state {}

#[doc = include_str!("sync_and_status.md")]
pub mod sync_and_status {}

#[doc = include_str!("platforms.md")]
pub mod platforms {}

#[doc = include_str!("performance.md")]
pub mod performance {}
