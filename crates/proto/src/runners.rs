//! Job Runner registration, leases and fencing (Spindle extensions to Spin Cycle's API).
//!
//! A Job Runner process has an instance id, new at every start, and holds a lease with
//! the Request Managers that it renews every third of its length. A request handed to a
//! runner records the runner's instance and an epoch that grows at every hand-over; every
//! report about the request names both ([`Fence`], sent as the headers [`RUNNER_HEADER`]
//! and [`EPOCH_HEADER`]), and a report from a runner that no longer owns the request is
//! refused.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The header that names the runner instance sending a report, or answering a hand-over.
pub const RUNNER_HEADER: &str = "spindle-runner";
/// The header that carries the epoch of a hand-over, and of every report about it.
pub const EPOCH_HEADER: &str = "spindle-epoch";
/// Set (to `true`) on a 409 answer that refuses a report because its runner no longer
/// owns the request: the runner stops that chain and reports nothing more for it.
pub const FENCED_HEADER: &str = "spindle-fenced";
/// Set (to `true`) on a hand-over of a paused request: the chain starts paused.
pub const PAUSED_HEADER: &str = "spindle-paused";
/// A hand-over's secret args (issue #33): base64 of the JSON list of [placeholder, value]
/// pairs. Sent only with a chain, only to a Job Runner, which keeps them in memory.
pub const SECRETS_HEADER: &str = "spindle-secrets";

/// The version of the API between Request Managers and Job Runners (registration,
/// leases, hand-overs, reports). It grows when a release changes that API in a way a
/// peer must know of; a service works with a peer of its own version and of the one
/// before or after (docs/deploying.md, "Upgrading"), and says so at registration.
pub const API_VERSION: u32 = 1;
/// The header in which a Request Manager names its [`API_VERSION`] when it answers a
/// registration (one that does not is of version 1).
pub const API_VERSION_HEADER: &str = "spindle-api-version";

/// Whether services of API versions `a` and `b` work together: one version apart at most.
pub fn api_versions_work_together(a: u32, b: u32) -> bool {
    a.abs_diff(b) <= 1
}

fn first_api_version() -> u32 {
    1
}

/// Who sends a report: a runner instance and the epoch of the hand-over it was given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Fence {
    pub instance: String,
    pub epoch: u64,
}

/// A Job Runner registering itself (`POST /api/v1/job-runners`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunnerRegistration {
    /// New at every start of a runner process.
    pub instance_id: String,
    /// The runner's base URL, as Request Managers reach it.
    pub url: String,
    /// The machine it runs on, and its process id there: a runner started again on the
    /// same machine knows that a registration with a process that is gone is lost.
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub pid: u32,
    /// Go duration: the lease it renews every third of.
    pub lease: String,
    /// The runner's [`API_VERSION`] (a registration without one is of version 1).
    #[serde(default = "first_api_version")]
    pub api_version: u32,
}

impl Default for RunnerRegistration {
    fn default() -> RunnerRegistration {
        RunnerRegistration {
            instance_id: String::new(),
            url: String::new(),
            host: String::new(),
            pid: 0,
            lease: String::new(),
            api_version: API_VERSION,
        }
    }
}

/// The body of a lease renewal (`PUT /api/v1/job-runners/{instance}/lease`): the
/// requests whose chains the instance holds now. A Request Manager recovers a request
/// that it believes this instance runs and that two renewals with a body in a row leave out (its
/// chain ended or was dropped without its end reaching a Request Manager), as it would
/// a lost runner's. A renewal without a body says nothing of its chains (Spindle's runner
/// names them in one renewal of several when it holds more than a thousand).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseRenewal {
    /// Request ids, in no particular order.
    #[serde(default, deserialize_with = "crate::types::null_as_default")]
    pub running: Vec<String>,
}

/// Whether a registered runner holds its lease.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunnerState {
    /// Renewed within its lease.
    #[default]
    Live,
    /// Its lease lapsed (or its process is known to be gone); its requests are recovered.
    Lost,
    /// Shut down and deregistered after handing back its chains.
    Stopped,
}

impl std::fmt::Display for RunnerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RunnerState::Live => "live",
            RunnerState::Lost => "lost",
            RunnerState::Stopped => "stopped",
        })
    }
}

/// A registered Job Runner as `GET /api/v1/job-runners` lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobRunner {
    pub instance_id: String,
    pub url: String,
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub pid: u32,
    pub started_at: DateTime<Utc>,
    pub renewed_at: DateTime<Utc>,
    /// Go duration.
    pub lease: String,
    /// RUNNING requests it owns.
    #[serde(default)]
    pub running_requests: u64,
    pub state: RunnerState,
    /// When it was declared lost or deregistered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<DateTime<Utc>>,
}

/// A job try that has started (`POST /api/v1/job-tries`, in batches): the store knows
/// which tries began, so that a try whose runner was lost before it reported is logged
/// as interrupted and the job runs again as the next try.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TryStart {
    #[serde(default)]
    pub request_id: String,
    pub job_id: String,
    /// The job log's try number.
    pub r#try: u32,
    /// The try within the job's current sequence run (what its retry budget counts).
    #[serde(default)]
    pub run_try: u32,
    /// The try count of the job's sequence when the try began.
    #[serde(default)]
    pub sequence_try: u32,
    /// Unix nanoseconds.
    #[serde(default)]
    pub started_at: i64,
}

/// One entry of a request's audit trail (Spindle): who did what, when, from where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    pub at: DateTime<Utc>,
    /// `create`, `start` or `stop`.
    pub action: String,
    /// The authenticated caller; without authentication, the name the caller gave
    /// (possibly empty).
    pub user: String,
    /// The address the call came from (the proxy's, behind one); empty when unknown.
    pub address: String,
}
