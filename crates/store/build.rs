//! Rebuilds the crate when a migration is added or changed: `sqlx::migrate!` embeds the
//! files at compile time and cannot tell Cargo (on stable Rust) to watch the directory.

#![allow(
    clippy::print_stdout,
    reason = "a build script speaks to Cargo on stdout"
)]

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
