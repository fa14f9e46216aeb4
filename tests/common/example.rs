//! The crate's example binaries, run by the tests that hold them to their
//! contracts (through `testkit::process`).

use std::path::PathBuf;
use std::process::Command;

#[allow(unused_imports, reason = "each test binary uses some of these")]
pub use testkit::process::*;

/// The example binary `name` that cargo built beside this test.
pub fn path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().unwrap().parent().unwrap();
    let bin = profile
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "the {name} example is not built at {} (a plain `cargo test` builds the \
         examples; with `--test NAME` alone, run `cargo build --examples` with the \
         same features first)",
        bin.display()
    );
    bin
}

/// A command running example `name`.
pub fn command(name: &str) -> Command {
    Command::new(path(name))
}
