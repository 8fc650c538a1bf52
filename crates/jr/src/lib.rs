//! The Job Runner (JR): accepts new and resumed chains, runs each with the `chain` crate,
//! reports to the Request Manager through a `chain::Reporter`, answers stop and
//! running-status calls, and on shutdown suspends every chain and hands it back.
//! `api.rs` serves it over Spin Cycle's v2 Job Runner API; [`HttpRmClient`] reports to a
//! Request Manager over HTTP; `lease.rs` holds the runner's registration and lease.

mod api;
pub mod lease;
mod rm_client;
mod runner;
mod watch;

pub use api::{router, with_auth};
pub use lease::{LeaseSettings, Registry, RegistryError};
pub use rm_client::HttpRmClient;
pub use runner::{Error, Reporters, Runner, new_instance_id};

#[cfg(test)]
mod rm_client_tests;
#[cfg(test)]
mod tests;
