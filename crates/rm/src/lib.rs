//! The Request Manager (RM): loads the specs, creates requests (grapher + store), hands
//! their chains to a Job Runner, records what Job Runners report, answers status, and
//! resumes suspended chains. `api.rs` serves it over Spin Cycle's v2 HTTP API.
//!
//! It talks to Job Runners through [`JrClient`]: [`HttpJrClient`] for Job Runners
//! elsewhere, or an in-process one (the `spindle server` and `spindle run` commands).
//! Job Runners report to it over the API (`chain::Reporter` in `jr`'s HTTP client), or,
//! in the same process, by calling [`Manager`]'s report methods (the binary's
//! `chain::Reporter` for it).

mod api;
mod error;
mod jr_client;
mod manager;
pub mod notify;
mod recovery;
pub mod secrets;
pub mod triggers;

pub use api::{Needs, authenticate, cross_site, needs, peer_of, router, same_origin_changes};
pub use error::{ConfigError, Error};
pub use jr_client::{ClientError, HandOver, HandedOver, HttpJrClient, JrClient, NewChain};
pub use manager::{FixedRunner, Manager, Options, Retry, RetryElements, kept_for, spec_version};

#[cfg(test)]
mod backlog_tests;
#[cfg(test)]
mod idempotency_tests;
#[cfg(test)]
mod lock_tests;
#[cfg(test)]
mod notification_tests;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod trigger_tests;
