//! The JSON objects of Spin Cycle's v2 API (api.md section 6), field for field.

use std::collections::BTreeMap;

use base64::Engine as _;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::State;

pub use crate::args::JobArgs;

/// A request: one run of a request type with its args.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    /// 20-character sortable unique id.
    pub id: String,
    #[serde(rename = "type")]
    pub request_type: String,
    pub state: State,
    /// The authenticated caller who created the request; always present, may be empty.
    #[serde(default, deserialize_with = "null_as_default")]
    pub user: String,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub args: Vec<RequestArg>,
    pub created_at: DateTime<Utc>,
    #[serde(default)]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub finished_at: Option<DateTime<Utc>>,
    /// Spin Cycle capitalizes this one key.
    #[serde(rename = "JobChain", default, skip_serializing_if = "Option::is_none")]
    pub job_chain: Option<JobChain>,
    #[serde(default)]
    pub total_jobs: u64,
    #[serde(default)]
    pub finished_jobs: u64,
    /// Spindle's addition: the request's own jobs, without the begin and end wrappers
    /// the grapher adds around every sequence (which `totalJobs` counts, as Spin Cycle's
    /// does); omitted when not known (a request stored before Spindle counted them).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub own_jobs: u64,
    /// Spindle's addition: how many of the request's own jobs are complete now (their
    /// latest try); omitted with `ownJobs`.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub own_finished_jobs: u64,
    /// Base URL of the Job Runner running the request; empty when none does.
    #[serde(rename = "jrURL", default, skip_serializing_if = "String::is_empty")]
    pub jr_url: String,
    /// Spindle's addition: why the request failed when no one job says it (its deadline
    /// passed, its chain could not be resumed), or why a PENDING one waits (its Job
    /// Runner refused the Request Manager's credentials); empty (omitted) otherwise.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub error: String,
    /// Spindle's addition: the request was paused (`spindle pause`): running jobs
    /// finish, nothing new starts until it is resumed. Omitted when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Spindle's addition: the version of the specs the request was built from (see
    /// [`SpecVersion`]); omitted when not recorded.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub spec_version: String,
    /// Spindle's addition (issue #50): each `each:` node's elements by state, with the
    /// failed ones named, when one request is read; omitted for a request without
    /// expansions and in lists.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub elements: Vec<crate::ElementsSummary>,
}

/// One run of a schedule that fell due: the request it started, or why it started none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleRun {
    pub schedule: String,
    pub due_at: DateTime<Utc>,
    /// The Request Manager that claimed it.
    pub rm_host: String,
    /// The request it started; empty while being started, or when it started none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub request_id: String,
    /// Why no request was started (the previous run still went, creating failed).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub skipped: String,
}

/// A schedule as `GET /api/v1/schedules` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleStatus {
    pub name: String,
    pub cron: String,
    pub timezone: String,
    pub request: String,
    pub args: JobArgs,
    /// skip or start.
    pub overlap: String,
    /// skip or start.
    pub missed: String,
    pub next: Option<DateTime<Utc>>,
    pub last: Option<ScheduleRun>,
}

/// Someone's answer to an `approval` job (Spindle's approval gates).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    pub approved: bool,
    /// Who answered.
    pub user: String,
    /// When (RFC 3339).
    pub at: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub comment: String,
}

/// One spec file as it was read: its path (as the Request Manager named it) and text.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SpecFile {
    pub path: String,
    pub text: String,
}

/// A set of spec files, stored once by its version: the first 16 hex digits of the
/// SHA-256 of the files' paths and texts. Every request records the version it was built
/// from (`GET /api/v1/requests/{id}/spec`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SpecVersion {
    pub version: String,
    pub files: Vec<SpecFile>,
}

/// How a request arg is declared in the request's spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestArgType {
    Required,
    Optional,
    Static,
}

impl RequestArgType {
    /// The word the spec files use: `required`, `optional`, `static`.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestArgType::Required => "required",
            RequestArgType::Optional => "optional",
            RequestArgType::Static => "static",
        }
    }
}

impl std::fmt::Display for RequestArgType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One request arg as recorded for a request, or as listed in a [`RequestSpec`].
/// Spin Cycle sends these with capitalized keys. Spin Cycle's clients read `Default` as a
/// string (its `spinc start` panics on anything else), so a default that is not one (a
/// list, say: Spindle's) is sent there as its JSON text, and as it is in Spindle's own
/// `DefaultValue`, which Spindle's clients read first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "RequestArgWire", from = "RequestArgWire")]
pub struct RequestArg {
    /// Index among the args of the same type.
    #[serde(default)]
    pub pos: u32,
    pub name: String,
    #[serde(default)]
    pub desc: String,
    #[serde(rename = "Type")]
    pub arg_type: RequestArgType,
    /// Whether the caller gave a value.
    #[serde(default)]
    pub given: bool,
    /// The spec's default (optional args); null when there is none.
    #[serde(default)]
    pub default: Value,
    /// The value used; null in a [`RequestSpec`].
    #[serde(default)]
    pub value: Value,
    /// (Spindle) `secret: true` in the spec: its value is never stored or shown (issue #33).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub secret: bool,
}

/// [`RequestArg`] as it crosses the wire: `Default` always what Spin Cycle's clients
/// read (a string or null), `DefaultValue` the default itself when it is not.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RequestArgWire {
    #[serde(default)]
    pos: u32,
    name: String,
    #[serde(default)]
    desc: String,
    #[serde(rename = "Type")]
    arg_type: RequestArgType,
    #[serde(default)]
    given: bool,
    #[serde(default)]
    default: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    default_value: Option<Value>,
    #[serde(default)]
    value: Value,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    secret: bool,
}

impl From<RequestArg> for RequestArgWire {
    fn from(arg: RequestArg) -> RequestArgWire {
        let (default, default_value) = match arg.default {
            plain @ (Value::String(_) | Value::Null) => (plain, None),
            other => (Value::String(other.to_string()), Some(other)),
        };
        RequestArgWire {
            pos: arg.pos,
            name: arg.name,
            desc: arg.desc,
            arg_type: arg.arg_type,
            given: arg.given,
            default,
            default_value,
            value: arg.value,
            secret: arg.secret,
        }
    }
}

impl From<RequestArgWire> for RequestArg {
    fn from(wire: RequestArgWire) -> RequestArg {
        RequestArg {
            pos: wire.pos,
            name: wire.name,
            desc: wire.desc,
            arg_type: wire.arg_type,
            given: wire.given,
            default: wire.default_value.unwrap_or(wire.default),
            value: wire.value,
            secret: wire.secret,
        }
    }
}

/// A request type that callers can start, with its args (`GET /api/v1/request-list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RequestSpec {
    pub name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub args: Vec<RequestArg>,
}

/// Whether a job is one of the begin or end wrappers the grapher adds around every
/// sequence (a noop that only joins), not one of the request's own jobs.
pub fn is_wrapper(name: &str, job_type: &str) -> bool {
    job_type == "noop" && (name.ends_with("_begin") || name.ends_with("_end"))
}

impl JobChain {
    /// The request's own jobs: those that are not [wrappers](is_wrapper).
    pub fn own_jobs(&self) -> u64 {
        self.jobs
            .values()
            .filter(|job| !is_wrapper(&job.name, &job.job_type))
            .count() as u64
    }
}

/// A request's immutable DAG of jobs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobChain {
    pub request_id: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub jobs: BTreeMap<String, Job>,
    /// Job id to the ids of the jobs that run after it. Jobs without successors may be absent.
    #[serde(default, deserialize_with = "null_as_default")]
    pub adjacency_list: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub state: State,
    #[serde(default)]
    pub finished_jobs: u64,
}

/// One job of a chain.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    /// 4 alphanumeric characters, unique within the request.
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(rename = "type")]
    pub job_type: String,
    /// The job's own serialized form, made on the RM side and read back on the JR side;
    /// base64 in JSON.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "base64_encode",
        deserialize_with = "base64_decode"
    )]
    pub bytes: Vec<u8>,
    #[serde(default)]
    pub state: State,
    /// The job's input snapshot, taken before the job's create step.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "JobArgs::is_empty"
    )]
    pub args: JobArgs,
    /// Run-time job data.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "JobArgs::is_empty"
    )]
    pub data: JobArgs,
    /// Tries after the first failed one.
    #[serde(default)]
    pub retry: u32,
    /// Go duration string, such as `5s`.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub retry_wait: String,
    /// Id of the first (begin) job of the innermost sequence this job belongs to.
    #[serde(default, deserialize_with = "null_as_default")]
    pub sequence_id: String,
    /// Sequence retries; set on a sequence's begin job only.
    #[serde(default)]
    pub sequence_retry: u32,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub sequence_retry_wait: String,
    /// Spindle's addition, absent from Spin Cycle's chains: on the begin wrapper of an
    /// `each:` expansion (`repeat_<node>_begin`), at most this many of its successors'
    /// sub-graphs (the expansions) run at any moment, a new one starting as soon as one
    /// ends. 0 (omitted) means no limit.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub parallel: u32,
    /// Spindle's addition: in a stored request's chain, how many tries the job has had
    /// (its latest try number). 0 (omitted) in chains sent to a Job Runner.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tries: u32,
    /// Spindle's addition: a Go duration bounding each try of the job (the node's
    /// `timeout:`); empty (omitted) for none. A try past it is stopped and fails.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub timeout: String,
    /// Spindle's addition: on a sequence's first job (its `sequenceId`), a Go duration
    /// bounding each run of the sequence: past it, the sequence's running jobs are stopped
    /// and the sequence fails (its `sequenceRetry` applies). Empty for none.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub sequence_timeout: String,
    /// Spindle's addition: for a job made in an iteration of an `each:` expansion (or
    /// inside a sequence so expanded), each element's name and its value in that
    /// iteration, such as `{"host": "db2"}`, so that expansions can be told apart.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "JobArgs::is_empty"
    )]
    pub each: JobArgs,
    /// Spindle's addition (issue #34): the locks the job takes before its first try (a
    /// node's `locks:`, its job pools), waiting in their queues; empty (omitted) for none.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub locks: Vec<crate::JobLock>,
    /// Spindle's addition: on a sequence's last job, the sequence's first job, whose
    /// locks (the sequence node's `locks:`) this job's completion releases.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub releases_locks_of: String,
    /// Spindle's addition (issue #50): on a job whose successors are an `each:` node's
    /// elements (its `repeat_<node>_begin`, or one wave's begin), what the traverser
    /// needs to keep the node's failure budget. Absent (omitted) for other jobs and for
    /// nodes without `max_failures:` or `waves:`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elements: Option<Box<Elements>>,
}

/// The elements after a fan-out job (see [`Job::elements`]): where they meet and the
/// failure budget they count against. Every wave of one node names the same `budget`
/// job, which keeps the count for all of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Elements {
    /// The `each:` node, for messages.
    pub node: String,
    /// The job the elements meet at (the wave's end, or `repeat_<node>_end`).
    pub end: String,
    /// The job that keeps the node's count of failed elements: its
    /// `repeat_<node>_begin`.
    pub budget: String,
    /// How many elements may fail with the node still completing; `None`: any failure
    /// fails the node (Spin Cycle's way), the others running on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failures: Option<u32>,
    /// The node's elements in all its waves.
    pub count: u32,
    /// `on_budget_exceeded: stop`: once past the budget, the running elements are
    /// stopped too (else they run to their ends).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stop: bool,
    /// This fan-out's wave (1-based) and how many the node has; 0 without `waves:`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub wave: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub waves: u32,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

pub(crate) fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One try of one job. Every key is always present.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobLog {
    #[serde(default)]
    pub request_id: String,
    pub job_id: String,
    /// 1-based, monotonic per job across sequence retries and resumes.
    #[serde(default)]
    pub r#try: u32,
    #[serde(default)]
    pub name: String,
    #[serde(rename = "type", default)]
    pub job_type: String,
    /// Unix nanoseconds.
    #[serde(default)]
    pub started_at: i64,
    /// Unix nanoseconds.
    #[serde(default)]
    pub finished_at: i64,
    #[serde(default)]
    pub state: State,
    #[serde(default)]
    pub exit: i64,
    #[serde(default, deserialize_with = "null_as_default")]
    pub error: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub stdout: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub stderr: String,
}

/// A running job as a Job Runner reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    pub request_id: String,
    pub job_id: String,
    #[serde(rename = "type", default)]
    pub job_type: String,
    #[serde(default)]
    pub name: String,
    /// Unix nanoseconds.
    #[serde(default)]
    pub started_at: i64,
    #[serde(default)]
    pub state: State,
    /// The job's live status line.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub status: String,
    #[serde(default)]
    pub r#try: u32,
    /// Spindle's addition: the job's `each:` elements (see [`Job::each`]).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "JobArgs::is_empty"
    )]
    pub each: JobArgs,
}

/// Running jobs across Job Runners, with their requests.
/// Unlike Spin Cycle, Spindle sends `[]` and `{}` (never `null`) when nothing runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunningStatus {
    #[serde(default, deserialize_with = "null_as_default")]
    pub jobs: Vec<JobStatus>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub requests: BTreeMap<String, Request>,
}

/// A chain handed back by a Job Runner that shut down, with its try counters, so that
/// another Job Runner resumes it where it left off.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SuspendedJobChain {
    pub request_id: String,
    pub job_chain: JobChain,
    /// Per job: tries over all sequence tries and resumes (the job log's try number).
    #[serde(default, deserialize_with = "null_as_default")]
    pub total_job_tries: BTreeMap<String, u32>,
    /// Per job: tries in the current sequence try.
    #[serde(default, deserialize_with = "null_as_default")]
    pub latest_run_job_tries: BTreeMap<String, u32>,
    /// Per sequence begin job: tries of the sequence.
    #[serde(default, deserialize_with = "null_as_default")]
    pub sequence_tries: BTreeMap<String, u32>,
}

/// The final state of a chain, sent by a Job Runner (`PUT .../finish`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FinishRequest {
    #[serde(default)]
    pub request_id: String,
    pub state: State,
    pub finished_at: DateTime<Utc>,
    #[serde(default)]
    pub finished_jobs: u64,
    /// Spindle's addition: why the request failed when no one job says it (its deadline
    /// passed); empty (omitted) otherwise.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub error: String,
    /// Spindle's addition: the chain's last job log entries, not sent before (a
    /// Spindle Job Runner sends what is left with the final state, in one call); stored
    /// before the final state, as `POST /api/v1/job-logs` would store them. Omitted when
    /// empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub job_logs: Vec<JobLog>,
}

/// The number of finished jobs of a running request (`PUT .../progress`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestProgress {
    #[serde(default)]
    pub request_id: String,
    #[serde(default)]
    pub finished_jobs: u64,
}

/// The API's error body. Spindle's servers send it for every 4xx and 5xx answer (Spin
/// Cycle's framework errors carried only `message`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Error {
    pub message: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub request_id: String,
    #[serde(default)]
    pub http_status: u16,
}

impl Error {
    pub fn new(http_status: u16, message: impl Into<String>) -> Error {
        Error {
            message: message.into(),
            request_id: String::new(),
            http_status,
        }
    }

    /// The message of an error answer's body: its `message` if it is this shape, else the
    /// body as it is (a proxy's page, say), or `no response body`.
    pub fn message_of(body: &str) -> String {
        match serde_json::from_str::<Error>(body) {
            Ok(error) => error.message,
            Err(_) if body.is_empty() => "no response body".to_owned(),
            Err(_) => body.to_owned(),
        }
    }
}

/// The JSON kind of a value, for error messages: "a list", "a string", ...
pub fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Go encodes empty maps, slices and strings as `null`; read those as the empty value
/// (for serde's `deserialize_with`).
pub fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

fn base64_encode<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
}

fn base64_decode<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
    let Some(text) = Option::<String>::deserialize(deserializer)? else {
        return Ok(Vec::new());
    };
    base64::engine::general_purpose::STANDARD
        .decode(text.as_bytes())
        .map_err(|err| serde::de::Error::custom(format!("field bytes: invalid base64: {err}")))
}

/// Which of a job's output streams a chunk is from.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    #[default]
    Stdout,
    Stderr,
}

impl Stream {
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

impl std::fmt::Display for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Per try and stream, the first this many bytes of a job's output are kept...
pub const OUTPUT_HEAD_BYTES: u64 = 512 * 1024;
/// ... and the last this many; what lies between is cut (a Spindle extension; Spin Cycle
/// keeps whatever the job returns).
pub const OUTPUT_TAIL_BYTES: u64 = 512 * 1024;

/// A piece of a running job's output (a Spindle extension). A Job Runner sends chunks
/// while the try runs (`POST /api/v1/job-output`); the Request Manager numbers them as it
/// stores them (`seq`, increasing per request) and serves them from a cursor
/// (`GET /api/v1/requests/{id}/output?after=SEQ`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputChunk {
    /// The Request Manager's number for the chunk; 0 in what a Job Runner sends.
    #[serde(default, skip_serializing_if = "is_zero_seq")]
    pub seq: i64,
    pub request_id: String,
    pub job_id: String,
    pub r#try: u32,
    pub stream: Stream,
    /// Where in the try's stream `data` starts, in bytes. A chunk that starts past the
    /// end of the one before it follows a cut (output past the cap, or dropped while the
    /// Request Manager could not be reached).
    pub offset: u64,
    pub data: String,
}

fn is_zero_seq(n: &i64) -> bool {
    *n == 0
}

impl OutputChunk {
    /// The stream offset just past this chunk.
    pub fn end(&self) -> u64 {
        self.offset + self.data.len() as u64
    }
}

/// An answer of `GET /api/v1/requests/{id}/output`: chunks after the cursor, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputPage {
    pub chunks: Vec<OutputChunk>,
    /// The cursor for the next call (`after=`): the last chunk's `seq`, or the cursor
    /// given when there is nothing new.
    pub next: i64,
    /// The request's state when the page was read: once it is final and a page comes back
    /// empty, there is no more output.
    pub state: State,
}

/// Which output chunks `GET /api/v1/requests/{id}/output` answers with (its query).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutputQuery {
    /// Only chunks stored after this cursor (an earlier page's `next`; 0: from the start).
    pub after: i64,
    /// Only this job's chunks.
    pub job: Option<String>,
    /// Only this try's chunks (with `job`).
    pub r#try: Option<u32>,
    /// At most this many chunks (1 to [`OutputQuery::MAX_LIMIT`]).
    pub limit: u32,
}

impl OutputQuery {
    pub const MAX_LIMIT: u32 = 1000;
}

impl Default for OutputQuery {
    fn default() -> OutputQuery {
        OutputQuery {
            after: 0,
            job: None,
            r#try: None,
            limit: OutputQuery::MAX_LIMIT,
        }
    }
}
