//! The client library: the commands that talk to a server (Spin Cycle's `spinc`'s and
//! Spindle's own), their output, the API client, and the chain drawn for people. It speaks
//! only `proto` types to the server and knows nothing of the services' wiring.

pub(crate) mod api;
pub(crate) mod credentials;
pub(crate) mod dot;
pub(crate) mod explain;
pub(crate) mod spinc;
