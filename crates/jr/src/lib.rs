//! The Job Runner (JR): accepts new and resumed chains, runs each with the `chain` crate,
//! reports to the Request Manager through a `chain::Reporter`, answers stop and
//! running-status calls, and on shutdown suspends every chain and hands it back.
//! `api.rs` serves it over Spin Cycle's v2 Job Runner API; [`HttpRmClient`] reports to a
//! Request Manager over HTTP.

mod api;
mod rm_client;
mod runner;

pub use api::router;
pub use rm_client::HttpRmClient;
pub use runner::{Error, Runner};

#[cfg(test)]
mod tests;
