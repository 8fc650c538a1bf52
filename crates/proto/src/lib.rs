//! Spindle's wire types: the JSON shapes of Spin Cycle's v2 HTTP API.
//!
//! Every type here serializes with exactly Spin Cycle's field names (including its odd
//! capitalized ones such as `JobChain` and `RequestArg`'s `Name`), so that Spin Cycle's
//! clients and Job Runners can talk to Spindle. States keep their numeric values. This
//! crate knows nothing of HTTP, SQL or YAML.

pub mod args;
mod bulk;
mod create;
pub mod duration;
mod elements;
mod filter;
mod id;
mod locks;
mod notifications;
pub mod openapi;
mod runners;
mod state;
pub mod topo;
mod triggers;
mod types;

pub use bulk::{BulkAction, BulkItem, BulkOutcome, BulkReport};
pub use create::CreateRequest;
pub use elements::{ElementStatus, ElementsSummary, NAMED_FAILURES};
pub use filter::{Cursor, FilterError, RequestFilter};
pub use id::RequestId;
pub use locks::{JobLock, JobLocksTaken, LockClaimant, LockStatus, TakeJobLocks, lock_label};
pub use notifications::{Notification, NotificationPayload, NotifiedRequest};
pub use runners::{
    API_VERSION, API_VERSION_HEADER, AuditEvent, EPOCH_HEADER, FENCED_HEADER, Fence, JobRunner,
    LeaseRenewal, PAUSED_HEADER, RUNNER_HEADER, RunnerRegistration, RunnerState, SECRETS_HEADER,
    TryStart, api_versions_work_together,
};
pub use state::{State, UnknownState};
pub use triggers::{TriggerAccepted, TriggerDelivery, TriggerStatus};
pub use types::{
    Answer, Elements, Error, FinishRequest, Job, JobArgs, JobChain, JobLog, JobStatus,
    OUTPUT_HEAD_BYTES, OUTPUT_TAIL_BYTES, OutputChunk, OutputPage, OutputQuery, Request,
    RequestArg, RequestArgType, RequestProgress, RequestSpec, RunningStatus, ScheduleRun,
    ScheduleStatus, SpecFile, SpecVersion, Stream, SuspendedJobChain, is_wrapper, json_kind,
    null_as_default,
};

/// The API version Spindle speaks, sent in the `X-Spincycle-Version` header.
pub const SPIN_CYCLE_API_VERSION: &str = "2.1.1";

/// Spindle's version as its servers send it in `X-Spincycle-Version` and answer on
/// `/version`: the Spin Cycle API version it speaks, then its own.
pub fn version() -> String {
    format!(
        "{SPIN_CYCLE_API_VERSION}+spindle.{}",
        env!("CARGO_PKG_VERSION")
    )
}

#[cfg(test)]
mod tests;
