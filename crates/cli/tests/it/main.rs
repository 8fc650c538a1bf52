//! Integration tests of the `spindle` binary: each test runs the real binary.

mod client;
mod graph;
mod lint;
mod services;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Spin Cycle's spec fixtures, shared with the project.
fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/spincycle")
}

/// The binary, run in `dir`, with colours off.
fn spindle(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_spindle"));
    command
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE");
    command
}

/// Runs the command; returns stdout, stderr and the exit code.
fn run(command: &mut Command) -> (String, String, i32) {
    let Output {
        status,
        stdout,
        stderr,
    } = command.output().expect("spindle runs");
    (
        String::from_utf8(stdout).expect("stdout is UTF-8"),
        String::from_utf8(stderr).expect("stderr is UTF-8"),
        status.code().expect("spindle exits with a code"),
    )
}
