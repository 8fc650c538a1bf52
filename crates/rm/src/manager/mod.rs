//! The Request Manager's logic, free of HTTP: one [`Manager`], whose methods are kept by
//! concern, each module an `impl Manager` block:
//!
//! - `specs`: loading and reloading the specs, their versions;
//! - `schedules`: the specs' schedules and the requests they start;
//! - `lifecycle`: create, start, stop, pause, retry, approvals' answers;
//! - `hand_over`: choosing a Job Runner and handing it a chain (epochs, fences);
//! - `reads`: get, find, job logs, output, what runs now; `wait`: waiting for an end;
//! - `elements`: a request's `each:` elements; `progress`: its own jobs complete and its
//!   elements' summary as people are shown them;
//! - `reports`: what Job Runners report (try starts, job logs, output, progress, the
//!   end, a suspension);
//! - `background`: the round that offers PENDING requests again, resumes suspended
//!   chains and applies the retention;
//! - `runners`: the Job Runner registry, leases and recovering a lost runner's requests;
//! - `metrics`: gauges, and what a request's end tells the metrics and traces;
//! - `notifications`: fanning the store's outbox out to the webhooks, and sending.
//!
//! This file holds the state they share and the helpers more than one uses.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use graph::Grapher;
use proto::{
    CreateRequest, Fence, FinishRequest, JobChain, JobLog, JobRunner, JobStatus, OutputChunk,
    OutputPage, OutputQuery, Request, RequestArg, RequestFilter, RequestId, RequestProgress,
    RequestSpec, RunnerRegistration, RunnerState, RunningStatus, SpecVersion, State,
    SuspendedJobChain, TryStart,
};
use store::{Batcher, Holder, Store};
use telemetry::{Span, Telemetry, traces};
use tokio_util::sync::CancellationToken;

use crate::{ClientError, Error, HandOver, HandedOver, JrClient, NewChain};
use wait::Waiting;

mod background;
mod backlog;
mod elements;
mod hand_over;
mod job_locks;
mod lifecycle;
pub(crate) use elements::element_state;
pub use elements::{Retry, RetryElements};
pub(crate) use lifecycle::state_refusal;
pub use progress::kept_for;
mod locks;
mod metrics;
mod notifications;
mod progress;
mod reads;
mod reports;
mod runners;
mod schedules;
mod secrets;
mod sign_ins;
mod specs;
mod triggers;
mod wait;

/// Knobs of the Request Manager.
#[derive(Debug, Clone)]
pub struct Options {
    /// How often PENDING requests are offered to a Job Runner again, and suspended chains
    /// resumed.
    pub interval: Duration,
    /// Suspended chains not resumed within this time fail their request.
    pub suspended_ttl: Duration,
    /// A claim on a suspended chain not renewed for this long is released (its Request
    /// Manager died while resuming it). Releasing a claim whose resume is merely slow is
    /// safe: a second resume hands the request over with a new epoch, and the first
    /// runner's reports are refused.
    pub stale_claim: Duration,
    /// This instance's name in claims.
    pub host: String,
    /// How long a Job Runner's registration holds without a renewal; past it (and once
    /// this Request Manager has reached its database for as long), the runner is lost
    /// and its requests are recovered.
    pub lease: Duration,
    /// Where new and resumed chains go: one Job Runner or a load balancer. `None`: a
    /// live registered Job Runner with the fewest running requests.
    pub jr_url: Option<String>,
    /// Job Runners named by URL that never register (Spin Cycle's, say), beside the
    /// registered ones (issue #47): a chain goes to one whose job types it has.
    pub fixed_runners: Vec<FixedRunner>,
    /// The metrics and traces this Request Manager reports to.
    pub telemetry: Telemetry,
    /// Who may do what; `None`: no authentication (anyone may do anything, and callers
    /// name themselves).
    pub auth: Option<Arc<auth::Auth>>,
    /// Finished requests older than this are removed, with their job logs, in small
    /// batches at each background round; `None`: kept forever.
    pub retention: Option<Duration>,
    /// Creates are refused (503, `Retry-After`) while this many requests wait to be
    /// handed to a Job Runner (PENDING); `None`: never.
    pub max_backlog: Option<u64>,
}

/// A Job Runner the config names by URL (`runners:`): it does not register, so it has no
/// lease and is not recovered when it dies (a Spin Cycle Job Runner suspends its chains
/// on SIGTERM as Spin Cycle's do).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedRunner {
    /// Its base URL.
    pub url: String,
    /// The job types it has (a Spin Cycle runner cannot say, nor refuse a chain of
    /// others: it fails the job); `None`: any (it refuses a chain it lacks types of, as a
    /// Spindle runner or its load balancer does).
    pub types: Option<BTreeSet<String>>,
}

impl FixedRunner {
    /// Whether it can be given a chain of these job types.
    pub(crate) fn has(&self, types: &BTreeSet<&str>) -> bool {
        self.types
            .as_ref()
            .is_none_or(|own| types.iter().all(|t| own.contains(*t)))
    }
}

/// Requests one retention transaction removes at most: small, so that no lock is held
/// long.
pub const RETENTION_BATCH: u64 = 200;

/// While requests are being created (one in the last second), the retention's
/// transactions take at most one part in this many of the time: it waits nine times as
/// long as each took before the next, so that removing a backlog of millions does not
/// hold the creates up (on SQLite, one writer, it took three quarters of their rate).
pub const RETENTION_SHARE_WHILE_BUSY: u32 = 10;

/// The longest a `GET ...?wait=` waits for a request to end.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// How often the task that reads the ends of the requests callers wait for here runs,
/// while anyone waits (one query for all the requests due), and how long after a wait
/// begins its request is first read there: an end stored by another Request Manager
/// wakes nobody here. Ends this Request Manager stores wake their waiters at once.
pub const WAIT_POLL: Duration = Duration::from_millis(25);

/// The longest a waited-for request goes unread by that task (its reads double from
/// [`WAIT_POLL`] up to this).
pub const WAIT_RECHECK: Duration = Duration::from_secs(1);

/// For this long after a wait begins, its request is read at every round of that task
/// (most requests end within it, often stored by another Request Manager: doubling from
/// the first read would add up to twice their run time to the wait); then the reads
/// double. Each round is one query for every request due, so this costs no more queries.
pub const WAIT_EAGER: Duration = Duration::from_secs(1);

impl Default for Options {
    fn default() -> Options {
        Options {
            interval: Duration::from_secs(10),
            suspended_ttl: Duration::from_secs(3600),
            stale_claim: Duration::from_secs(300),
            host: "localhost".to_owned(),
            lease: Duration::from_secs(10),
            jr_url: None,
            fixed_runners: Vec::new(),
            telemetry: Telemetry::default(),
            auth: None,
            retention: None,
            max_backlog: None,
        }
    }
}

/// The Request Manager. Cheap to share behind an `Arc`.
pub struct Manager {
    /// The specs requests are built from now: replaced whole by a reload.
    specs: std::sync::RwLock<Loaded>,
    store: Arc<dyn Store>,
    batcher: Batcher,
    jr: Arc<dyn JrClient>,
    options: Options,
    shutting_down: AtomicBool,
    /// When a request was last created here: the retention yields to creates
    /// ([`Manager::apply_retention`]).
    last_create: Mutex<Option<std::time::Instant>>,
    /// The live registered runners as last read, with the requests handed to each since
    /// (so that a burst of creates spreads), and when they were read.
    runners: Mutex<Option<(tokio::time::Instant, Vec<JobRunner>)>>,
    /// Taken to read the runners into `runners`: thousands of hand-overs at once (a
    /// restart's resumes) find the list stale together, and one of them reads it.
    runners_read: tokio::sync::Mutex<()>,
    /// How many times `runners` was forgotten: a list read across a forget is stale.
    runners_forgotten: AtomicU64,
    /// Since when the database has answered the background loop without a break: a
    /// runner's lease lapsed only if this Request Manager could have seen its renewals.
    healthy_since: Mutex<Option<tokio::time::Instant>>,
    /// Callers waiting for a request to end (`GET ...?wait=`), woken when this Request
    /// Manager stores its end or [`watch_ends`] reads that another stored it.
    waiting: Waiting,
    /// Whether a [`watch_ends`] task runs (it ends when nobody waits).
    watching: Arc<AtomicBool>,
    /// The last [`watch_ends`] task started: its handle kept, so that it is owned.
    watcher: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// By runner instance: the requests it owns as RUNNING that its last renewal here
    /// left out (see [`Manager::renew_runner`]).
    unheld: Mutex<HashMap<String, HashSet<String>>>,
    /// The Job Runners (by URL) that refused this Request Manager's credentials, logged
    /// once each until one takes a chain again.
    refused_by: Mutex<HashSet<String>>,
    /// Job Runners (by URL) that did not answer a hand-over, and until when they are
    /// offered chains last: one cut off from this manager is not waited for by every
    /// create.
    unanswered: Mutex<HashMap<String, tokio::time::Instant>>,
    /// Suspended chains whose resume a Job Runner failed (HTTP 500: job states that do
    /// not fit), by request: offered again after a growing wait, failed after a bound.
    resume_faults: Mutex<HashMap<String, background::ResumeFaults>>,
    /// Told when this Request Manager stores a request's end while the specs declare
    /// locks: the background loop offers the requests waiting for one at once.
    lock_released: tokio::sync::Notify,
    /// A Job Runner registered: the suspended chains waiting for one are resumed now,
    /// not at the next round (a deploy of the runners resumes at once).
    runner_joined: tokio::sync::Notify,
    /// When this Request Manager was made: a scheduled run due before it started was
    /// missed (by this one; another that ran then started it).
    started_at: chrono::DateTime<chrono::Utc>,
    /// The backlog as last counted, for `max_backlog`.
    backlog: backlog::Backlog,
    /// The config's `triggers:`, by name.
    triggers: std::sync::RwLock<Arc<BTreeMap<String, crate::triggers::Trigger>>>,
    /// The config's `notify:` webhooks and their client; `None`: none configured.
    notifier: std::sync::RwLock<Option<Arc<notifications::Notifier>>>,
    /// Wakes the notifications' task: an end stored here, an event fanned out.
    notify_wake: tokio::sync::Notify,
    /// The config's `secrets:`: keys for secret args, and sources a create may name.
    secret_args: std::sync::RwLock<Arc<crate::secrets::SecretArgs>>,
    /// Requests' `each:` expansions as read from their chains, which never change.
    fleets: elements::FleetCache,
    /// Running requests' progress that took long to work out, for a little while.
    progress: progress::ProgressCache,
}

/// The specs of a Request Manager, as loaded (at start, or by a reload).
#[derive(Clone)]
struct Loaded {
    /// Shared with the blocking threads that build chains.
    grapher: Arc<Grapher>,
    /// Their version (stored), which each request records; empty when not kept.
    version: String,
    /// Authentication and authorization, with the specs' ACLs; `None`: off.
    auth: Option<Arc<auth::Auth>>,
    /// The specs' `schedules:`.
    schedules: Arc<Vec<spec::schedule::Fires>>,
    /// Whether any request type declares locks (read once per load: a hand-over and a
    /// request's end ask).
    locks: bool,
}

/// Whether any of a grapher's request types declares locks.
fn declares_locks(grapher: &Grapher) -> bool {
    grapher
        .specs()
        .sequences()
        .iter()
        .any(|sequence| !sequence.locks.is_empty())
}

/// A set of spec files with its version: the first 16 hex digits of the SHA-256 of
/// every file's path and text, each preceded by its length (so that no two sets share
/// one by moving bytes between files).
pub fn spec_version(files: Vec<proto::SpecFile>) -> SpecVersion {
    use sha2::Digest as _;
    let mut hash = sha2::Sha256::new();
    for file in &files {
        for part in [&file.path, &file.text] {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part.as_bytes());
        }
    }
    let digest = hash.finalize();
    let version = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    SpecVersion { version, files }
}

/// How long the list of live runners is used before it is read again.
const RUNNERS_CACHE: Duration = Duration::from_secs(1);

/// How long ended runners are still listed.
const ENDED_RUNNERS_LISTED: chrono::Duration = chrono::Duration::hours(1);

/// Why a hand-over did not happen.
enum Handed {
    /// The chain runs (or the request moved on meanwhile).
    Done,
    /// No Job Runner took it: try later.
    Later(ClientError),
    /// The Job Runner refused the chain as invalid.
    Refused(ClientError),
    /// It waits for a lock (or was failed for one): not handed over.
    Waiting,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

fn chrono_duration(duration: Duration) -> chrono::Duration {
    chrono::Duration::from_std(duration).unwrap_or(chrono::Duration::MAX)
}

impl Manager {
    /// A manager over specs that passed the linter. Must be made inside a tokio runtime.
    pub fn new(
        grapher: Grapher,
        store: Arc<dyn Store>,
        jr: Arc<dyn JrClient>,
        options: Options,
    ) -> Manager {
        // Every store operation timed, when metrics are on.
        let store = match &options.telemetry.metrics {
            Some(metrics) => store::timed(store, Arc::new(StoreMetrics(Arc::clone(metrics)))),
            None => store,
        };
        let batcher = Batcher::spawn(Arc::clone(&store), store::BatchOptions::default());
        let loaded = Loaded {
            locks: declares_locks(&grapher),
            grapher: Arc::new(grapher),
            version: String::new(),
            auth: options.auth.clone(),
            schedules: Arc::default(),
        };
        Manager {
            specs: std::sync::RwLock::new(loaded),
            store,
            batcher,
            jr,
            options,
            shutting_down: AtomicBool::new(false),
            last_create: Mutex::new(None),
            runners: Mutex::new(None),
            runners_read: tokio::sync::Mutex::new(()),
            runners_forgotten: AtomicU64::new(0),
            healthy_since: Mutex::new(None),
            waiting: Waiting::default(),
            watching: Arc::new(AtomicBool::new(false)),
            watcher: Mutex::new(None),
            unheld: Mutex::default(),
            refused_by: Mutex::default(),
            unanswered: Mutex::default(),
            resume_faults: Mutex::default(),
            started_at: chrono::Utc::now(),
            lock_released: tokio::sync::Notify::new(),
            runner_joined: tokio::sync::Notify::new(),
            backlog: backlog::Backlog::default(),
            triggers: std::sync::RwLock::default(),
            notifier: std::sync::RwLock::default(),
            notify_wake: tokio::sync::Notify::new(),
            secret_args: std::sync::RwLock::default(),
            fleets: elements::FleetCache::default(),
            progress: progress::ProgressCache::default(),
        }
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The store, for this crate's tests: every other reader goes through the methods
    /// here (the API and the web UI too).
    #[cfg(test)]
    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Who may do what; `None` when authentication is off.
    pub fn auth(&self) -> Option<Arc<auth::Auth>> {
        self.read_loaded().auth.clone()
    }

    /// The specs as loaded now (a copy: a reload meanwhile does not change it).
    fn loaded(&self) -> Loaded {
        self.read_loaded().clone()
    }

    fn read_loaded(&self) -> std::sync::RwLockReadGuard<'_, Loaded> {
        self.specs
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Ready for traffic: not shutting down, and the database answers (the specs were
    /// loaded before the manager was made).
    pub async fn ready(&self) -> Result<(), Error> {
        self.check_open()?;
        self.store.ping().await.map_err(|err| Error::Unavailable {
            message: "not ready: the database does not answer".to_owned(),
            source: Some(Box::new(err)),
        })
    }

    /// Refuses new requests from now on (HTTP 503).
    pub fn shut_down(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }

    fn check_open(&self) -> Result<(), Error> {
        if self.shutting_down.load(Ordering::SeqCst) {
            return Err(Error::unavailable(
                "Request Manager is shutting down - no new requests are being started",
            ));
        }
        Ok(())
    }
}

/// The entries of tries that did not succeed (each is logged once stored).
fn failed_tries(entries: &[JobLog]) -> Vec<JobLog> {
    entries
        .iter()
        .filter(|entry| !matches!(entry.state, State::Complete | State::Stopped))
        .cloned()
        .collect()
}

fn log_failed_tries(failed: &[JobLog]) {
    for entry in failed {
        let _request = tracing::info_span!("request", request_id = %entry.request_id).entered();
        tracing::warn!(
            job_id = %entry.job_id,
            job = entry.name,
            r#try = entry.r#try,
            state = %entry.state,
            exit = entry.exit,
            error = entry.error,
            "job try failed"
        );
    }
}

/// Whether a report refused with `err` (the state was not the one expected) came from
/// the runner a suspended chain is being resumed on: the store answers with the state
/// only when the owner accepts the report's fence, and a SUSPENDED request accepts the
/// epoch of the hand-over that resumes it before the Request Manager that made it
/// records it. A chain that ends at once (every job done before it was suspended) can
/// report its end in that moment.
fn resume_in_flight(err: &store::Error, fence: Option<&Fence>) -> bool {
    fence.is_some()
        && matches!(
            err,
            store::Error::State {
                actual: State::Suspended,
                ..
            }
        )
}

/// The answer to such a report: try again (HTTP 503), once the resume is recorded (or,
/// if the Request Manager that resumed it died, the request was handed over again and
/// the report is refused as fenced).
fn resume_not_recorded(request_id: &str, err: store::Error) -> Error {
    Error::Unavailable {
        message: format!(
            "request {request_id} is being resumed on this job runner and the hand-over is not recorded yet; try again"
        ),
        source: Some(Box::new(err)),
    }
}

fn policy_name(start: bool) -> String {
    if start { "start" } else { "skip" }.to_owned()
}

/// Job names and ids, for messages.
fn names(jobs: &[&proto::Job]) -> String {
    jobs.iter()
        .map(|j| format!("{} ({})", j.name, j.id))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The store's latencies, for the metrics.
struct StoreMetrics(Arc<telemetry::Metrics>);

impl store::QueryObserver for StoreMetrics {
    fn query(&self, operation: &'static str, elapsed: Duration, ok: bool) {
        self.0.store_query(operation, elapsed, ok);
    }
}
