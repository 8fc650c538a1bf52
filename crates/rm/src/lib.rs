//! The Request Manager (RM): loads the specs, creates requests (grapher + store), hands
//! their chains to a Job Runner, records what Job Runners report, answers status, and
//! resumes suspended chains. `api.rs` serves it over Spin Cycle's v2 HTTP API.
//!
//! It talks to Job Runners through [`JrClient`]: [`HttpJrClient`] for Job Runners
//! elsewhere, or an in-process one (the `spindle server` and `spindle run` commands).
//! Job Runners talk to it through `chain::Reporter`, which [`Manager`] implements for
//! the in-process case and the API serves for the HTTP one.

mod api;
mod client;
mod error;
mod manager;

pub use api::router;
pub use client::{ClientError, HttpJrClient, JrClient};
pub use error::Error;
pub use manager::{Manager, Options};

/// The version sent in `X-Spincycle-Version` and answered by `/version`.
pub fn version() -> String {
    format!(
        "{}+spindle.{}",
        proto::SPIN_CYCLE_API_VERSION,
        env!("CARGO_PKG_VERSION")
    )
}

#[cfg(test)]
mod tests;
