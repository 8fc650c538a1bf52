//! The Request Manager's logic, free of HTTP: create, start, stop, read; what Job
//! Runners report; the background loops that start PENDING requests once a Job Runner
//! answers and resume suspended chains.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use graph::Grapher;
use proto::{
    CreateRequest, Fence, FinishRequest, JobChain, JobLog, JobRunner, JobStatus, OutputChunk,
    OutputPage, OutputQuery, Request, RequestFilter, RequestId, RequestProgress, RequestSpec,
    RunnerRegistration, RunnerState, RunningStatus, SpecVersion, State, SuspendedJobChain,
    TryStart,
};
use store::{Batcher, Holder, Store};
use telemetry::{Span, Telemetry, traces};
use tokio_util::sync::CancellationToken;

use crate::{ClientError, Error, HandOver, HandedOver, JrClient};

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
    /// The metrics and traces this Request Manager reports to.
    pub telemetry: Telemetry,
    /// Who may do what; `None`: no authentication (anyone may do anything, and callers
    /// name themselves).
    pub auth: Option<Arc<auth::Auth>>,
    /// Finished requests older than this are removed, with their job logs, in small
    /// batches at each background round; `None`: kept forever.
    pub retention: Option<Duration>,
}

/// Requests one retention transaction removes at most: small, so that no lock is held
/// long.
pub const RETENTION_BATCH: u64 = 200;
/// Batches one background round removes at most, so that a backlog (retention turned on
/// over a big database) is worked off across rounds instead of in one long one.
pub const RETENTION_BATCHES_PER_ROUND: u32 = 25;

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
            telemetry: Telemetry::default(),
            auth: None,
            retention: None,
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
    /// The live registered runners as last read, with the requests handed to each since
    /// (so that a burst of creates spreads), and when they were read.
    runners: Mutex<Option<(tokio::time::Instant, Vec<JobRunner>)>>,
    /// Since when the database has answered the background loop without a break: a
    /// runner's lease lapsed only if this Request Manager could have seen its renewals.
    healthy_since: Mutex<Option<tokio::time::Instant>>,
    /// Callers waiting for a request to end (`GET ...?wait=`), woken when this Request
    /// Manager stores its end or [`watch_ends`] reads that another stored it.
    waiting: Waiting,
    /// Whether a [`watch_ends`] task runs (it ends when nobody waits).
    watching: Arc<AtomicBool>,
    /// By runner instance: the requests it owns as RUNNING that its last renewal here
    /// left out (see [`Manager::renew_runner`]).
    unheld: Mutex<HashMap<String, HashSet<String>>>,
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
            runners: Mutex::new(None),
            healthy_since: Mutex::new(None),
            waiting: Waiting::default(),
            watching: Arc::new(AtomicBool::new(false)),
            unheld: Mutex::default(),
        }
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    pub fn store(&self) -> &Arc<dyn Store> {
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

    /// The version of the specs requests are built from now (empty when not kept).
    pub fn spec_version(&self) -> String {
        self.read_loaded().version.clone()
    }

    /// Stores the version of the specs the manager was made with (`specs`, their files),
    /// which requests record from now on.
    pub async fn record_specs(&self, specs: &SpecVersion) -> Result<(), Error> {
        self.store.add_spec_version(specs, Utc::now()).await?;
        self.specs
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .version
            .clone_from(&specs.version);
        Ok(())
    }

    /// Builds requests from now on from `grapher`'s specs, whose files are `specs`
    /// (stored first, so that every request names a version the store has), with
    /// `acls` (their ACLs) replacing the old ones when authentication is on. Requests
    /// created before keep the version they were built from.
    pub async fn load_specs(
        &self,
        grapher: Grapher,
        specs: &SpecVersion,
        acls: Option<auth::Acls>,
    ) -> Result<(), Error> {
        self.store.add_spec_version(specs, Utc::now()).await?;
        let mut loaded = self
            .specs
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let auth = match (&loaded.auth, acls) {
            (Some(auth), Some(acls)) => Some(Arc::new(auth::Auth {
                acls,
                ..auth::Auth::clone(auth)
            })),
            (auth, _) => auth.clone(),
        };
        let schedules = Arc::clone(&loaded.schedules);
        *loaded = Loaded {
            grapher: Arc::new(grapher),
            version: specs.version.clone(),
            auth,
            schedules,
        };
        Ok(())
    }

    /// Starts requests on these schedules from now on (the specs' `schedules:`, which
    /// the linter accepted).
    pub fn set_schedules(&self, schedules: Vec<spec::schedule::Fires>) {
        self.specs
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .schedules = Arc::new(schedules);
    }

    /// The schedules with their next and last runs.
    pub async fn schedules(&self) -> Result<Vec<proto::ScheduleStatus>, Error> {
        let now = Utc::now();
        let mut statuses = Vec::new();
        let schedules = Arc::clone(&self.read_loaded().schedules);
        for fires in schedules.iter() {
            let last = self.store.schedule_runs(&fires.name, 1).await?.pop();
            statuses.push(proto::ScheduleStatus {
                name: fires.name.clone(),
                cron: fires.cron.clone(),
                timezone: fires.timezone.name().to_owned(),
                request: fires.request.clone(),
                args: fires.args.clone(),
                overlap: policy_name(fires.overlap == spec::schedule::Overlap::Start),
                missed: policy_name(fires.missed == spec::schedule::Missed::Start),
                next: fires.next(now),
                last,
            });
        }
        Ok(statuses)
    }

    /// Starts the runs of every schedule that fell due since its last run (claimed in
    /// the store, so that of several Request Managers one starts each). A run missed by
    /// more than a round or two (no Request Manager ran) is skipped, or with `missed:
    /// start` started late, the latest one only. With `overlap: skip`, a run due while
    /// the previous one still goes starts nothing and says so.
    pub async fn run_schedules(&self) {
        let schedules = Arc::clone(&self.read_loaded().schedules);
        if schedules.is_empty() || self.shutting_down.load(Ordering::SeqCst) {
            return;
        }
        let now = Utc::now();
        let grace = chrono_duration(self.options.interval * 2).max(chrono::Duration::seconds(2));
        for fires in schedules.iter() {
            if let Err(err) = self.run_schedule(fires, now, grace).await {
                tracing::warn!(schedule = fires.name, error = %err.chain(), "running a schedule failed; trying again next round");
            }
        }
    }

    async fn run_schedule(
        &self,
        fires: &spec::schedule::Fires,
        now: chrono::DateTime<Utc>,
        grace: chrono::Duration,
    ) -> Result<(), Error> {
        let recent = self.store.schedule_runs(&fires.name, 20).await?;
        // A new schedule begins now; one that ran goes on from its last run.
        let after = recent.first().map_or(now - grace, |run| run.due_at);
        let mut due = fires.due(after, now);
        let late: Vec<_> = due.iter().copied().filter(|at| *at < now - grace).collect();
        if !late.is_empty() {
            due.retain(|at| *at >= now - grace);
            if fires.missed == spec::schedule::Missed::Start {
                due.insert(0, *late.last().expect("not empty"));
            }
            tracing::warn!(
                schedule = fires.name,
                missed = late.len(),
                started_late = fires.missed == spec::schedule::Missed::Start,
                "runs of a schedule were missed (no Request Manager ran)"
            );
        }
        for due_at in due {
            if !self
                .store
                .claim_schedule_run(&fires.name, due_at, &self.options.host)
                .await?
            {
                continue;
            }
            // Read again: this round may have started the run before.
            let recent = self.store.schedule_runs(&fires.name, 20).await?;
            let previous = recent
                .iter()
                .find(|run| run.due_at < due_at && run.skipped.is_empty());
            let still_going = match previous {
                Some(run) if run.request_id.is_empty() => true,
                Some(run) => !self
                    .store
                    .get_request(&run.request_id, false)
                    .await
                    .map(|r| r.state.is_finished())
                    .unwrap_or(true),
                None => false,
            };
            if still_going && fires.overlap == spec::schedule::Overlap::Skip {
                let why = format!(
                    "the previous run ({}) still goes, and overlap is skip",
                    previous
                        .map(|run| run.request_id.as_str())
                        .unwrap_or_default()
                );
                tracing::info!(schedule = fires.name, due = %due_at, "schedule run skipped: {why}");
                self.store
                    .schedule_run_done(&fires.name, due_at, "", &why)
                    .await?;
                continue;
            }
            let user = format!(
                "schedule:{}@{}",
                fires.name,
                due_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            );
            let create = CreateRequest {
                request_type: fires.request.clone(),
                args: fires.args.clone(),
                user: user.clone(),
            };
            match self.create(create, &user, "").await {
                Ok(request) => {
                    tracing::info!(schedule = fires.name, due = %due_at, request_id = request.id, "schedule started a request");
                    self.store
                        .schedule_run_done(&fires.name, due_at, &request.id, "")
                        .await?;
                }
                Err(err) => {
                    let why = format!("creating the request failed: {}", err.chain());
                    tracing::error!(schedule = fires.name, due = %due_at, "{why}");
                    self.store
                        .schedule_run_done(&fires.name, due_at, "", &why)
                        .await?;
                }
            }
        }
        Ok(())
    }

    /// The spec files request `request_id` was built from.
    pub async fn request_spec(&self, request_id: &str) -> Result<SpecVersion, Error> {
        let request = self.store.get_request(request_id, false).await?;
        if request.spec_version.is_empty() {
            return Err(Error::NotFound(format!(
                "request {request_id} has no spec version: it was created before Spindle kept them, or by a Request Manager that does not"
            )));
        }
        Ok(self.store.spec_version(&request.spec_version).await?)
    }

    pub fn telemetry(&self) -> &Telemetry {
        &self.options.telemetry
    }

    /// Sets the gauges read from the database (requests by state, job runners by
    /// state), for a scrape of `/metrics`.
    pub async fn refresh_gauges(&self) {
        let Some(metrics) = &self.options.telemetry.metrics else {
            return;
        };
        let states = [State::Pending, State::Running, State::Suspended];
        if let Ok(counts) = self.store.count_requests(&states).await {
            let counts: Vec<(String, i64)> = counts
                .into_iter()
                .map(|(state, n)| (state.to_string(), i64::try_from(n).unwrap_or(i64::MAX)))
                .collect();
            let names: Vec<String> = states.iter().map(ToString::to_string).collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            telemetry::Metrics::set_states(&metrics.requests, &names, &counts);
        }
        let now = Utc::now();
        if let Ok(runners) = self.store.job_runners(now, now).await {
            let count = |state: RunnerState| {
                runners
                    .iter()
                    .filter(|runner| runner.state == state)
                    .count() as i64
            };
            let counts = [
                ("live".to_owned(), count(RunnerState::Live)),
                ("lost".to_owned(), count(RunnerState::Lost)),
            ];
            telemetry::Metrics::set_states(&metrics.job_runners, &["live", "lost"], &counts);
        }
    }

    /// A request reached its final state: counted, and its trace's root span emitted
    /// (from its creation to now). Called once per request, by whoever stored the end.
    fn request_ended(&self, request: &Request) {
        let waiting = self
            .waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&request.id)
            .map(|waiter| Arc::clone(&waiter.notify));
        if let Some(waiting) = waiting {
            waiting.notify_waiters();
        }
        let telemetry = &self.options.telemetry;
        let finished = request.finished_at.unwrap_or_else(Utc::now);
        if let Some(metrics) = &telemetry.metrics {
            let took = (finished - request.created_at).to_std().unwrap_or_default();
            metrics.request_finished(&request.request_type, request.state, took);
        }
        telemetry.span(|| {
            let root = traces::request_root(&request.id);
            let mut span = Span::new("request", root, None)
                .times(request.created_at.into(), finished.into())
                .attr("spindle.request_id", request.id.clone())
                .attr("spindle.request_type", request.request_type.clone())
                .attr("spindle.state", request.state.to_string())
                .attr("spindle.user", request.user.clone())
                .attr("spindle.total_jobs", request.total_jobs as i64)
                .attr("spindle.finished_jobs", request.finished_jobs as i64);
            if request.state != State::Complete {
                span.error = Some(if request.error.is_empty() {
                    format!("the request ended {}", request.state)
                } else {
                    request.error.clone()
                });
            }
            span
        });
    }

    /// Reads a request that ended and counts it (the paths that fail a request).
    async fn ended(&self, request_id: &str) {
        if let Ok(request) = self.store.get_request(request_id, false).await
            && request.state.is_finished()
        {
            self.request_ended(&request);
        }
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

    /// Creates a request and hands it to a Job Runner. If no Job Runner answers, the
    /// request is kept PENDING and started by the background loop once one does.
    /// Returns the request as created (PENDING, without its chain), as Spin Cycle does.
    /// The audit trail's "create" event (by `user`, from `address`) is stored with it.
    pub async fn create(
        &self,
        create_request: CreateRequest,
        user: &str,
        address: &str,
    ) -> Result<Request, Error> {
        self.check_open()?;
        let began = std::time::SystemTime::now();
        // Building a chain is CPU work that grows with the request, and a job's `create`
        // may run a program (shell-args waits for it): never on the async runtime's
        // threads, which serve every other request meanwhile.
        let Loaded {
            grapher, version, ..
        } = self.loaded();
        let (request_type, args) = (
            create_request.request_type.clone(),
            create_request.args.clone(),
        );
        let created = tokio::task::spawn_blocking(move || grapher.create(&request_type, &args))
            .await
            .map_err(|err| Error::Internal {
                message: "building the job chain failed".to_owned(),
                source: Some(Box::new(err)),
            })??;
        let request = Request {
            id: created.request_id.clone(),
            request_type: create_request.request_type.clone(),
            state: State::Pending,
            user: user.to_owned(),
            args: created.args,
            created_at: Utc::now(),
            started_at: None,
            finished_at: None,
            total_jobs: created.job_chain.jobs.len() as u64,
            finished_jobs: 0,
            job_chain: Some(created.job_chain),
            jr_url: String::new(),
            error: String::new(),
            paused: false,
            spec_version: version,
        };
        let stored = CreateRequest {
            user: user.to_owned(),
            ..create_request
        };
        let created = proto::AuditEvent {
            at: request.created_at,
            action: "create".to_owned(),
            user: user.to_owned(),
            address: address.to_owned(),
        };
        // Group-committed with every other create, start, finish and report meanwhile:
        // durable once this returns, one commit for all of them.
        let request = {
            let new = store::NewRequest {
                request,
                create_request: stored,
                created: Some(created),
            };
            // Moved to the batcher and back, not copied.
            self.batcher.create_request(new).await?.request
        };
        let telemetry = &self.options.telemetry;
        if let Some(metrics) = &telemetry.metrics {
            metrics.request_created(&request.request_type);
        }
        telemetry.span(|| {
            let root = traces::request_root(&request.id);
            let mut span = Span::new("create request", root.child(), Some(root.span_id))
                .times(began, std::time::SystemTime::now())
                .attr("spindle.request_id", request.id.clone())
                .attr("spindle.request_type", request.request_type.clone())
                .attr("spindle.user", user.to_owned())
                .attr("spindle.total_jobs", request.total_jobs as i64);
            span.kind = traces::Kind::Server;
            span
        });
        tracing::info!(
            request_id = %request.id,
            request_type = %request.request_type,
            user,
            jobs = request.total_jobs,
            "request created"
        );
        let mut request = request;
        let job_chain = request.job_chain.take().expect("set above");
        self.send_to_jr(&RequestId::new(request.id.clone()), job_chain, true, false)
            .await?;
        Ok(request)
    }

    /// Where the next chain goes: the fixed URL, or the live registered runner with the
    /// fewest running requests (counting those handed to it since the list was read).
    async fn target(&self) -> Result<String, ClientError> {
        if let Some(url) = &self.options.jr_url {
            return Ok(url.clone());
        }
        let fresh = self
            .runners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|(read, _)| read.elapsed() < RUNNERS_CACHE);
        if !fresh {
            let now = Utc::now();
            let live: Vec<JobRunner> = self
                .store
                .job_runners(now, now)
                .await
                .map_err(|err| ClientError::Unavailable(format!("reading the job runners: {err}")))?
                .into_iter()
                .filter(|runner| runner.state == RunnerState::Live)
                .collect();
            *self.runners.lock().unwrap_or_else(|p| p.into_inner()) =
                Some((tokio::time::Instant::now(), live));
        }
        let mut cached = self.runners.lock().unwrap_or_else(|p| p.into_inner());
        let runner = cached
            .as_mut()
            .and_then(|(_, live)| live.iter_mut().min_by_key(|runner| runner.running_requests))
            .ok_or_else(|| {
                ClientError::Unavailable("no live job runner is registered".to_owned())
            })?;
        runner.running_requests += 1;
        Ok(runner.url.clone())
    }

    /// Forgets the list of live runners (one registered, ended or was lost).
    fn forget_runners(&self) {
        *self.runners.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Hands a PENDING request's chain to a Job Runner as a new hand-over (its epoch) and
    /// marks it RUNNING there. The first hand-over of a new request has the epoch it was
    /// stored with (1); later ones (offered again) take a new one.
    async fn hand_over(
        &self,
        request_id: &RequestId,
        mut job_chain: JobChain,
        first: bool,
        paused: bool,
    ) -> Result<Handed, Error> {
        if !first && self.took_back_begun(request_id, &job_chain).await? {
            return Ok(Handed::Done);
        }
        let url = match self.target().await {
            Ok(url) => url,
            Err(err) => return Ok(Handed::Later(err)),
        };
        let epoch = if first {
            1
        } else {
            match self.store.hand_over(request_id, State::Pending).await {
                Ok(epoch) => epoch,
                // Started or finished meanwhile (another loop, a fast chain).
                Err(store::Error::State { .. }) => return Ok(Handed::Done),
                Err(err) => return Err(err.into()),
            }
        };
        let span = self.hand_over_span(request_id);
        let began = std::time::SystemTime::now();
        let terms = HandOver {
            epoch,
            trace: span.as_ref().map(|s| s.context),
            paused,
        };
        // Approvals answered meanwhile (an earlier hand-over began the chain) are in it.
        if !first {
            self.with_answers(&mut job_chain).await?;
        }
        let handed = self.jr.new_chain(&url, job_chain, &terms).await;
        self.hand_over_ended(span, began, &url, epoch, &handed);
        match handed {
            Ok(HandedOver { url, instance }) => {
                tracing::info!(%request_id, jr_url = url, instance, epoch, "request handed to a job runner");
                let owner = Fence { instance, epoch };
                match self
                    .batcher
                    .start_request(request_id, &url, Some(&owner), Utc::now())
                    .await
                {
                    Ok(now_paused) => {
                        self.catch_up_pause(request_id, &url, paused, now_paused)
                            .await;
                        Ok(Handed::Done)
                    }
                    // The chain may have finished (or been started by another loop) already.
                    Err(store::Error::State { .. } | store::Error::Fenced(_)) => Ok(Handed::Done),
                    Err(err) => Err(err.into()),
                }
            }
            Err(err @ (ClientError::Unavailable(_) | ClientError::AlreadyRunning(_))) => {
                self.forget_runners();
                Ok(Handed::Later(err))
            }
            Err(err) => Ok(Handed::Refused(err)),
        }
    }

    /// A request paused (or resumed) while it was being handed over: its runner got the
    /// chain as it was before, and is told now.
    async fn catch_up_pause(&self, request_id: &RequestId, url: &str, sent: bool, now: bool) {
        if sent == now {
            return;
        }
        if let Err(err) = self.jr.pause(url, request_id, now).await {
            tracing::warn!(%request_id, jr_url = url, paused = now, error = %err, "telling the job runner of a pause during the hand-over failed");
        }
    }

    /// The span of a hand-over about to be made, when traces are on: a child of the
    /// request's root, sent to the runner as its chain span's parent.
    fn hand_over_span(&self, request_id: &str) -> Option<Span> {
        self.options.telemetry.traces.as_ref()?;
        let root = traces::request_root(request_id);
        let mut span = Span::new("hand over", root.child(), Some(root.span_id))
            .attr("spindle.request_id", request_id.to_owned());
        span.kind = traces::Kind::Client;
        Some(span)
    }

    fn hand_over_ended(
        &self,
        span: Option<Span>,
        began: std::time::SystemTime,
        url: &str,
        epoch: u64,
        handed: &Result<HandedOver, ClientError>,
    ) {
        let Some(span) = span else {
            return;
        };
        self.options.telemetry.span(|| {
            let mut span = span
                .times(began, std::time::SystemTime::now())
                .attr("spindle.jr_url", url.to_owned())
                .attr("spindle.epoch", i64::try_from(epoch).unwrap_or(i64::MAX));
            match handed {
                Ok(handed) => span = span.attr("spindle.instance", handed.instance.clone()),
                Err(err) => span.error = Some(err.to_string()),
            }
            span
        });
    }

    /// Sends a PENDING request's chain to a Job Runner and marks it RUNNING. A Job Runner
    /// that does not answer leaves it PENDING (not an error); one that refuses the chain
    /// fails the request.
    async fn send_to_jr(
        &self,
        request_id: &RequestId,
        job_chain: JobChain,
        first: bool,
        paused: bool,
    ) -> Result<(), Error> {
        match self.hand_over(request_id, job_chain, first, paused).await? {
            Handed::Done => Ok(()),
            Handed::Later(err) => {
                tracing::warn!(%request_id, error = %err, "no job runner took the request; it stays PENDING and is offered again");
                Ok(())
            }
            Handed::Refused(err) => {
                self.store.fail_pending(request_id, Utc::now()).await?;
                self.ended(request_id).await;
                tracing::warn!(%request_id, error = %err, "request failed: the job runner refused its chain");
                Err(Error::Internal {
                    message: format!("the job runner refused request {request_id}"),
                    source: Some(Box::new(err)),
                })
            }
        }
    }

    /// `PUT .../start`: offers a PENDING request to a Job Runner now.
    pub async fn start(&self, request_id: &RequestId) -> Result<(), Error> {
        self.check_open()?;
        let request = self.store.get_request(request_id, false).await?;
        if request.state != State::Pending {
            return Err(Error::Conflict(format!(
                "request {request_id} in state {}, expected state PENDING",
                request.state
            )));
        }
        let job_chain = self.store.job_chain(request_id).await?;
        self.send_to_jr(request_id, job_chain, false, request.paused)
            .await
    }

    /// Stops a RUNNING request; returns once its Job Runner stopped it.
    pub async fn stop(&self, request_id: &RequestId) -> Result<(), Error> {
        let request = self.store.get_request(request_id, false).await?;
        if request.state != State::Running {
            let why = match request.state {
                State::Complete | State::Fail | State::Stopped => "it has finished",
                State::Suspended => {
                    "it is suspended and will be resumed by another Job Runner; stop it then"
                }
                _ => "it has not started",
            };
            return Err(Error::Conflict(format!(
                "request {request_id} in state {}, expected state RUNNING: {why}",
                request.state
            )));
        }
        self.jr
            .stop(&request.jr_url, request_id)
            .await
            .map_err(|err| match err {
                ClientError::NotFound(_) => Error::Conflict(format!(
                    "request {request_id} is not running on its Job Runner {} any more",
                    request.jr_url
                )),
                ClientError::Unavailable(_) => Error::Unavailable {
                    message: format!(
                        "request {request_id}'s Job Runner {} does not answer; if it is lost, the request is recovered on another within the lease ({}); stop it then",
                        request.jr_url,
                        proto::duration::format(self.options.lease)
                    ),
                    source: Some(Box::new(err)),
                },
                err => Error::Internal {
                    message: format!("stopping request {request_id} on its Job Runner failed"),
                    source: Some(Box::new(err)),
                },
            })
    }

    /// Pauses a request that has not finished (`paused`), or resumes a paused one: the
    /// flag is stored first, so that every later hand-over (a restart, a recovery)
    /// starts the chain paused; a RUNNING request's runner is told at once.
    pub async fn pause(&self, request_id: &RequestId, paused: bool) -> Result<(), Error> {
        self.check_open()?;
        let request = match self.store.set_paused(request_id, paused).await {
            Ok(request) => request,
            Err(store::Error::State { actual, .. }) => {
                return Err(Error::Conflict(format!(
                    "request {request_id} in state {actual}, expected state PENDING, RUNNING or SUSPENDED: it has finished; {}",
                    if paused {
                        "there is nothing to pause"
                    } else {
                        "use retry to run it again"
                    }
                )));
            }
            Err(err) => return Err(err.into()),
        };
        if request.state != State::Running || request.jr_url.is_empty() {
            return Ok(());
        }
        match self.jr.pause(&request.jr_url, request_id, paused).await {
            Ok(()) => Ok(()),
            // Handed back or finished meanwhile: the stored flag is what counts.
            Err(ClientError::NotFound(_)) => Ok(()),
            Err(err) => Err(Error::Unavailable {
                message: format!(
                    "request {request_id} is {} in the store, but its Job Runner {} was not told; try again (if the runner is lost, the request is recovered {} within the lease)",
                    if paused { "paused" } else { "resumed" },
                    request.jr_url,
                    if paused { "paused" } else { "running" },
                ),
                source: Some(Box::new(err)),
            }),
        }
    }

    /// Runs a FAIL or STOPPED request again as the same request (`spindle retry`): its
    /// completed jobs stay complete, the others run again with their whole retry budgets,
    /// try numbers continue and the job log keeps every earlier try. With `from` (a job
    /// id, or the name of one job), that job and every job after it run again too, and
    /// a COMPLETE request may be retried. The chain is stored suspended and handed to a
    /// live runner at once (or by the background loop when none answers now).
    pub async fn retry(&self, request_id: &RequestId, from: Option<&str>) -> Result<(), Error> {
        self.check_open()?;
        let request = self.store.get_request(request_id, false).await?;
        let may = match request.state {
            State::Fail | State::Stopped => true,
            State::Complete => from.is_some(),
            _ => false,
        };
        if !may {
            let expected = if request.state == State::Complete {
                "expected FAIL or STOPPED: it completed; retry --from JOB runs a part of it again"
            } else {
                "expected FAIL or STOPPED: it has not finished"
            };
            return Err(Error::Conflict(format!(
                "request {request_id} in state {}, {expected}",
                request.state
            )));
        }
        let chain = self.store.job_chain(request_id).await?;
        let reset = match from {
            Some(job) => crate::recovery::from_job(&chain, job).map_err(Error::BadRequest)?,
            None => Default::default(),
        };
        let logs = self.store.job_log(request_id).await?;
        let suspended = crate::recovery::retry(chain, &logs, &reset);
        // Approvals that run again ask again.
        let asked_again: Vec<String> = suspended
            .job_chain
            .jobs
            .values()
            .filter(|j| j.job_type == job::APPROVAL && j.state != State::Complete)
            .map(|j| j.id.clone())
            .collect();
        self.store.remove_answers(request_id, &asked_again).await?;
        match self
            .store
            .recover_request(Holder::Finished(request.state), &[], &suspended, Utc::now())
            .await
        {
            Ok(()) => {}
            Err(store::Error::State { actual, .. }) => {
                return Err(Error::Conflict(format!(
                    "request {request_id} in state {actual}, expected {}: it changed meanwhile",
                    request.state
                )));
            }
            Err(err) => return Err(err.into()),
        }
        tracing::info!(%request_id, from, jobs_to_run = suspended.job_chain.jobs.len() as u64 - suspended.job_chain.finished_jobs, "request retried");
        self.resume_suspended().await;
        Ok(())
    }

    /// The approval job of a request that has not finished: the one `job` names (its id,
    /// or the name of one approval job), or, without `job`, the one approval job that has
    /// not finished.
    pub async fn approval_job(
        &self,
        request_id: &RequestId,
        job: Option<&str>,
    ) -> Result<proto::Job, Error> {
        let request = self.store.get_request(request_id, false).await?;
        if request.state.is_finished() {
            return Err(Error::Conflict(format!(
                "request {request_id} in state {}: it has finished, and nothing waits for an answer",
                request.state
            )));
        }
        let chain = self.store.job_chain(request_id).await?;
        let approvals: Vec<&proto::Job> = chain
            .jobs
            .values()
            .filter(|j| j.job_type == job::APPROVAL)
            .collect();
        let chosen: Vec<&proto::Job> = match job {
            Some(job) => approvals
                .iter()
                .copied()
                .filter(|j| j.id == job || j.name == job)
                .collect(),
            None => approvals
                .iter()
                .copied()
                .filter(|j| !matches!(j.state, State::Complete | State::Fail))
                .collect(),
        };
        match (chosen.as_slice(), job) {
            ([one], _) => Ok((*one).clone()),
            ([], Some(job)) => Err(Error::BadRequest(format!(
                "request {request_id} has no approval job {job:?}; expected the id or name of one of: {}",
                names(&approvals)
            ))),
            ([], None) => Err(Error::Conflict(format!(
                "request {request_id} has no approval job waiting for an answer{}",
                if approvals.is_empty() {
                    String::new()
                } else {
                    format!(" (its approvals: {})", names(&approvals))
                }
            ))),
            (many, _) => Err(Error::BadRequest(format!(
                "request {request_id} has {} approval jobs that {}: {}; name one",
                many.len(),
                if job.is_some() { "match" } else { "wait" },
                names(many)
            ))),
        }
    }

    /// Answers approval job `job` of a request (from [`Manager::approval_job`]): stored
    /// first (the first answer stands), then handed to the runner of a RUNNING request;
    /// any later hand-over carries it in the job's data.
    pub async fn answer(
        &self,
        request_id: &RequestId,
        job: &proto::Job,
        answer: proto::Answer,
    ) -> Result<(), Error> {
        self.check_open()?;
        if matches!(job.state, State::Complete | State::Fail) {
            return Err(Error::Conflict(format!(
                "approval job {} ({}) of request {request_id} is {} already",
                job.name, job.id, job.state
            )));
        }
        if !self.store.add_answer(request_id, &job.id, &answer).await? {
            let given = self
                .store
                .answers(request_id)
                .await?
                .into_iter()
                .find(|(id, _)| *id == job.id)
                .map(|(_, given)| given);
            return Err(Error::Conflict(match given {
                Some(given) => format!(
                    "approval job {} ({}) of request {request_id} was {} by {} at {}",
                    job.name,
                    job.id,
                    if given.approved {
                        "approved"
                    } else {
                        "rejected"
                    },
                    given.user,
                    given.at
                ),
                None => format!(
                    "approval job {} of request {request_id} has an answer",
                    job.id
                ),
            }));
        }
        let request = self.store.get_request(request_id, false).await?;
        if request.state == State::Running
            && !request.jr_url.is_empty()
            && let Err(err) = self
                .jr
                .answer(&request.jr_url, request_id, &job.id, &answer)
                .await
        {
            // Stored: the runner that runs it next (after a recovery) finds it.
            tracing::warn!(%request_id, job_id = job.id, error = %err, "the answer is stored, but telling the job runner failed");
        }
        tracing::info!(%request_id, job_id = job.id, approved = answer.approved, user = answer.user, "approval answered");
        Ok(())
    }

    /// Puts the stored answers of a request's approval jobs in their data, for a chain
    /// about to be handed over.
    async fn with_answers(&self, chain: &mut JobChain) -> Result<(), Error> {
        if !chain.jobs.values().any(|j| j.job_type == job::APPROVAL) {
            return Ok(());
        }
        for (job_id, answer) in self.store.answers(&chain.request_id).await? {
            if let (Some(job), Ok(value)) =
                (chain.jobs.get_mut(&job_id), serde_json::to_value(&answer))
            {
                job.data.insert(job::approval::data_key(&job_id), value);
            }
        }
        Ok(())
    }

    /// A request with its args, and its chain only when asked: a big request's chain is
    /// megabytes, and callers polling its state do not want it read back every time.
    pub async fn get(&self, request_id: &str, with_chain: bool) -> Result<Request, Error> {
        Ok(self.store.get_request(request_id, with_chain).await?)
    }

    /// [`Manager::get`] once the request has ended, or once `up_to` has passed (then as
    /// it is). Woken when this Request Manager stores the end, or when [`watch_ends`],
    /// whose one query reads the ends of all the waited-for requests due, finds it (an
    /// end stored by another Request Manager): a waiter reads its request when it begins
    /// and when it is woken, not at intervals of its own.
    pub async fn wait_for_end(
        &self,
        request_id: &str,
        with_chain: bool,
        up_to: Duration,
    ) -> Result<Request, Error> {
        let deadline = tokio::time::Instant::now() + up_to.min(MAX_WAIT);
        if up_to.is_zero() {
            let request = self.store.get_request(request_id, false).await?;
            return self.with_chain(request, with_chain).await;
        }
        let notify = Arc::clone(
            &self
                .waiting
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(request_id.to_owned())
                .or_insert_with(Waiter::new)
                .notify,
        );
        self.watch_ends();
        let request = loop {
            let woken = notify.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            // Read after enabling the wake-up: an end stored meanwhile is seen either way.
            let request = self.store.get_request(request_id, false).await;
            let now = tokio::time::Instant::now();
            match request {
                Ok(request) if !request.state.is_finished() && now < deadline => {}
                done => break done,
            }
            let _ = tokio::time::timeout(deadline - now, woken).await;
        };
        {
            let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
            // The map's and ours: nobody else waits for it.
            if Arc::strong_count(&notify) <= 2 {
                waiting.remove(request_id);
            }
        }
        self.with_chain(request?, with_chain).await
    }

    /// Starts the task that reads the ends of waited-for requests, unless it runs.
    fn watch_ends(&self) {
        if self.watching.swap(true, Ordering::AcqRel) {
            return;
        }
        let (store, waiting, watching) = (
            Arc::clone(&self.store),
            Arc::clone(&self.waiting),
            Arc::clone(&self.watching),
        );
        tokio::spawn(watch_ends(store, waiting, watching));
    }

    /// How many callers wait for `request_id` to end (for tests and diagnostics).
    pub fn waiting_for(&self, request_id: &str) -> usize {
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(request_id)
            .map_or(0, |waiter| Arc::strong_count(&waiter.notify) - 1)
    }

    async fn with_chain(&self, request: Request, with_chain: bool) -> Result<Request, Error> {
        if !with_chain {
            return Ok(request);
        }
        let job_chain = Some(self.store.job_chain(&request.id).await?);
        Ok(Request {
            job_chain,
            ..request
        })
    }

    pub async fn job_chain(&self, request_id: &str) -> Result<JobChain, Error> {
        Ok(self.store.job_chain(request_id).await?)
    }

    pub async fn find(&self, filter: &RequestFilter) -> Result<Vec<Request>, Error> {
        Ok(self.store.find_requests(filter).await?)
    }

    pub async fn job_log(&self, request_id: &str) -> Result<Vec<JobLog>, Error> {
        Ok(self.store.job_log(request_id).await?)
    }

    pub async fn latest_job_log(
        &self,
        request_id: &RequestId,
        job_id: &str,
    ) -> Result<JobLog, Error> {
        Ok(self.store.latest_job_log(request_id, job_id).await?)
    }

    pub fn request_specs(&self) -> Vec<RequestSpec> {
        self.read_loaded().grapher.request_specs()
    }

    /// Refuses a report about `request_ids` from a runner that does not own each of them
    /// (no fence: a Job Runner that does not say, such as Spin Cycle's, is believed).
    async fn check_fence<'a>(
        &self,
        request_ids: impl IntoIterator<Item = &'a str>,
        fence: Option<&Fence>,
    ) -> Result<(), Error> {
        let Some(fence) = fence else {
            return Ok(());
        };
        let ids: BTreeSet<&str> = request_ids.into_iter().collect();
        for request_id in ids {
            let owner = self.store.owner(request_id).await?;
            if !owner.accepts(fence) {
                return Err(owner.refusal(request_id, fence).into());
            }
        }
        Ok(())
    }

    /// Tries that began on a Job Runner; a re-sent one is stored once.
    pub async fn add_try_starts(
        &self,
        starts: Vec<TryStart>,
        fence: Option<&Fence>,
    ) -> Result<(), Error> {
        if let Some(start) = starts.iter().find(|start| {
            start.request_id.is_empty() || start.job_id.is_empty() || start.r#try == 0
        }) {
            return Err(Error::BadRequest(format!(
                "try start of job {:?} has no requestId, jobId or try; expected all three (try from 1)",
                start.job_id
            )));
        }
        self.check_fence(starts.iter().map(|start| start.request_id.as_str()), fence)
            .await?;
        let instance = fence.map_or("", |fence| fence.instance.as_str());
        Ok(self.store.insert_try_starts(instance, &starts).await?)
    }

    /// Job log entries from a Job Runner; a re-sent entry is stored once. Each failed
    /// try is logged (a re-sent one again: the store, not this, knows it is a repeat).
    pub async fn add_job_logs(
        &self,
        entries: Vec<JobLog>,
        fence: Option<&Fence>,
    ) -> Result<(), Error> {
        let failed = failed_tries(&entries);
        // The fence is checked in the batch's own transaction.
        self.batcher.insert_job_logs(entries, fence).await?;
        log_failed_tries(&failed);
        Ok(())
    }

    /// Live output chunks from a Job Runner; a re-sent chunk is stored once. Each chunk
    /// must name its request, job and try and hold at most the per-try cap of text.
    pub async fn add_output(
        &self,
        chunks: Vec<OutputChunk>,
        fence: Option<&Fence>,
    ) -> Result<(), Error> {
        if let Some(chunk) = chunks.iter().find(|chunk| {
            chunk.request_id.is_empty() || chunk.job_id.is_empty() || chunk.r#try == 0
        }) {
            return Err(Error::BadRequest(format!(
                "output chunk of job {:?} has no requestId, jobId or try; expected all three (try from 1)",
                chunk.job_id
            )));
        }
        let cap = proto::OUTPUT_HEAD_BYTES + proto::OUTPUT_TAIL_BYTES;
        if let Some(chunk) = chunks.iter().find(|chunk| chunk.data.len() as u64 > cap) {
            return Err(Error::BadRequest(format!(
                "output chunk of job {:?} holds {} bytes; expected at most {cap} (the per-try cap)",
                chunk.job_id,
                chunk.data.len()
            )));
        }
        self.check_fence(chunks.iter().map(|chunk| chunk.request_id.as_str()), fence)
            .await?;
        Ok(self.store.insert_output(&chunks).await?)
    }

    /// A request's live output from a cursor, with the request's state (so that a
    /// follower knows when the output has ended). An unknown request is an error.
    pub async fn output(&self, request_id: &str, query: &OutputQuery) -> Result<OutputPage, Error> {
        // The state first: output stored after it was read is still returned, so a final
        // state and an empty page mean there is no more.
        let state = self.store.get_request(request_id, false).await?.state;
        let chunks = self.store.output(request_id, query).await?;
        Ok(OutputPage {
            next: chunks.last().map_or(query.after, |chunk| chunk.seq),
            chunks,
            state,
        })
    }

    /// A running request's count of completed jobs.
    pub async fn progress(
        &self,
        progress: &RequestProgress,
        fence: Option<&Fence>,
    ) -> Result<(), Error> {
        Ok(self
            .batcher
            .update_progress(&progress.request_id, progress.finished_jobs, fence)
            .await?)
    }

    /// The final state from a Job Runner. A second report is a no-op. A chain that ended
    /// before the request was marked RUNNING (a very fast chain) is marked first, as
    /// started when it finished (the store keeps created ≤ started ≤ finished). A
    /// resumed chain that ended before its resume was recorded is told to try again.
    ///
    /// The entries it carries are stored first, through the same group commit (as a rule
    /// in the same transaction); a failure to store them is the answer even if the final
    /// state was stored, so that the runner sends both again (a second finish is a
    /// no-op, a stored entry is skipped).
    pub async fn finish(&self, finish: &FinishRequest, fence: Option<&Fence>) -> Result<(), Error> {
        let request_id = finish.request_id.as_str();
        let failed = failed_tries(&finish.job_logs);
        let logs = async {
            if finish.job_logs.is_empty() {
                return Ok(());
            }
            self.batcher
                .insert_job_logs(finish.job_logs.clone(), fence)
                .await
        };
        let bare = FinishRequest {
            request_id: finish.request_id.clone(),
            state: finish.state,
            finished_at: finish.finished_at,
            finished_jobs: finish.finished_jobs,
            error: finish.error.clone(),
            job_logs: Vec::new(),
        };
        let (logged, finished) = tokio::join!(logs, self.batcher.finish_request(&bare, fence));
        if logged.is_ok() {
            log_failed_tries(&failed);
        }
        let finished = match finished {
            Ok(finished) => finished,
            Err(err @ store::Error::State { .. }) if resume_in_flight(&err, fence) => {
                return Err(resume_not_recorded(request_id, err));
            }
            // The Request Manager that handed the chain over records its start when the
            // runner answers; a short chain's end can come first (to this or another
            // Request Manager). PENDING: started here, unless that record wins the race
            // meanwhile. RUNNING (with the owner the end names, or the store would have
            // said fenced): it was PENDING when the end was written and started since.
            // Either way the end is then stored as any other.
            Err(store::Error::State {
                actual: actual @ (State::Pending | State::Running),
                ..
            }) => {
                if actual == State::Pending {
                    let started_at = finish.finished_at.min(Utc::now());
                    match self
                        .store
                        .start_request(&RequestId::from(request_id), "", fence, started_at)
                        .await
                    {
                        Ok(_)
                        | Err(store::Error::State {
                            actual: State::Running,
                            ..
                        }) => {}
                        Err(err) => return Err(err.into()),
                    }
                }
                (self.store.finish_request(&bare, fence).await?, None)
            }
            Err(err) => return Err(err.into()),
        };
        // Logged once: a report sent again finds the request finished already.
        match finished {
            (store::Finished::Now, Some(request)) => self.log_finished(request_id, Ok(request)),
            (store::Finished::Now, None) => {
                let request = self.store.get_request(request_id, false).await;
                self.log_finished(request_id, request);
            }
            (store::Finished::Already(_), _) => {}
        }
        Ok(logged?)
    }

    fn log_finished(&self, request_id: &str, request: Result<Request, store::Error>) {
        match request {
            Ok(request) => {
                let runtime = match (request.started_at, request.finished_at) {
                    (Some(started), Some(finished)) => (finished - started)
                        .to_std()
                        .map(proto::duration::format)
                        .unwrap_or_default(),
                    _ => String::new(),
                };
                self.request_ended(&request);
                tracing::info!(
                    %request_id,
                    state = %request.state,
                    runtime,
                    finished_jobs = request.finished_jobs,
                    total_jobs = request.total_jobs,
                    "request finished"
                );
            }
            Err(err) => tracing::info!(%request_id, error = %err, "request finished"),
        }
    }

    /// A chain handed back by a Job Runner that is shutting down.
    pub async fn suspend(
        &self,
        suspended: &SuspendedJobChain,
        fence: Option<&Fence>,
    ) -> Result<(), Error> {
        let res = self.suspend_stored(suspended, fence).await;
        if res.is_ok() {
            tracing::info!(
                request_id = %suspended.request_id,
                "request suspended by its job runner; another one resumes it"
            );
        }
        res
    }

    async fn suspend_stored(
        &self,
        suspended: &SuspendedJobChain,
        fence: Option<&Fence>,
    ) -> Result<(), Error> {
        match self
            .store
            .suspend_request(suspended, fence, Utc::now())
            .await
        {
            Ok(()) => Ok(()),
            Err(err @ store::Error::State { .. }) if resume_in_flight(&err, fence) => {
                Err(resume_not_recorded(&suspended.request_id, err))
            }
            // The chain it was resumed from is still stored, claimed by the Request
            // Manager that resumes it.
            Err(err @ store::Error::Conflict(_)) if fence.is_some() => {
                let owner = self.store.owner(&suspended.request_id).await?;
                if owner.state == State::Suspended && fence.is_some_and(|f| owner.accepts(f)) {
                    Err(resume_not_recorded(&suspended.request_id, err))
                } else {
                    Err(err.into())
                }
            }
            Err(store::Error::State {
                actual: State::Pending,
                ..
            }) => {
                self.store
                    .start_request(
                        &RequestId::new(suspended.request_id.clone()),
                        "",
                        fence,
                        Utc::now(),
                    )
                    .await?;
                Ok(self
                    .store
                    .suspend_request(suspended, fence, Utc::now())
                    .await?)
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Running jobs across the Job Runners of RUNNING requests, oldest first, with their
    /// requests. A Job Runner that does not answer is left out.
    pub async fn running(&self, request_id: Option<&RequestId>) -> Result<RunningStatus, Error> {
        let mut jobs = Vec::new();
        for jr_url in self.store.running_jr_urls().await? {
            if jr_url.is_empty() {
                continue;
            }
            match self.jr.running(&jr_url, request_id).await {
                Ok(found) => jobs.extend(found),
                Err(err) => {
                    tracing::warn!(jr_url, error = %err, "job runner did not report its running jobs")
                }
            }
        }
        jobs.sort_by_key(|job| job.started_at);
        let mut requests = BTreeMap::new();
        for job in &jobs {
            if !requests.contains_key(&job.request_id)
                && let Ok(request) = self.store.get_request(&job.request_id, false).await
            {
                requests.insert(
                    job.request_id.clone(),
                    Request {
                        args: Vec::new(),
                        ..request
                    },
                );
            }
        }
        Ok(RunningStatus { jobs, requests })
    }

    /// The running jobs of one RUNNING request, from its own Job Runner only; empty when
    /// it has none or the runner does not answer (logged).
    pub async fn running_jobs(&self, request: &Request) -> Vec<JobStatus> {
        if request.state != State::Running || request.jr_url.is_empty() {
            return Vec::new();
        }
        let request_id = RequestId::from(request.id.as_str());
        match self.jr.running(&request.jr_url, Some(&request_id)).await {
            Ok(jobs) => jobs,
            Err(err) => {
                tracing::debug!(request_id = %request.id, jr_url = request.jr_url, error = %err, "job runner did not report the request's running jobs");
                Vec::new()
            }
        }
    }

    /// Offers PENDING requests (older than a few seconds, so not ones being created) to a
    /// Job Runner again; stops at the first that finds none.
    pub async fn start_pending(&self) {
        let filter = RequestFilter {
            states: vec![State::Pending],
            until: Some(Utc::now() - chrono::Duration::seconds(2)),
            limit: 100,
            ..RequestFilter::default()
        };
        let Ok(pending) = self.store.find_requests(&filter).await else {
            return;
        };
        for request in pending.into_iter().rev() {
            let request_id = RequestId::new(request.id.clone());
            let Ok(job_chain) = self.store.job_chain(&request.id).await else {
                continue;
            };
            match self
                .hand_over(&request_id, job_chain, false, request.paused)
                .await
            {
                Ok(Handed::Done) => {}
                Ok(Handed::Later(ClientError::AlreadyRunning(_))) => {}
                Ok(Handed::Later(_)) | Err(_) => return,
                Ok(Handed::Refused(err)) => {
                    tracing::error!(%request_id, error = %err, "job runner refused the request");
                    if self
                        .store
                        .fail_pending(&request.id, Utc::now())
                        .await
                        .is_ok()
                    {
                        self.ended(&request.id).await;
                    }
                }
            }
        }
    }

    /// Resumes suspended chains on a Job Runner, then releases abandoned claims and fails
    /// requests whose chains waited too long (storage.md §5).
    pub async fn resume_suspended(&self) {
        let host = &self.options.host;
        loop {
            if self.shutting_down.load(Ordering::SeqCst) {
                return;
            }
            let mut suspended = match self.store.claim_suspended(host, Utc::now()).await {
                Ok(Some(suspended)) => suspended,
                Ok(None) => break,
                Err(err) => {
                    tracing::warn!(error = %err, "claiming suspended chains failed");
                    break;
                }
            };
            let request_id = RequestId::new(suspended.request_id.clone());
            let request = self.store.get_request(&request_id, false).await;
            let paused = request.as_ref().is_ok_and(|r| r.paused);
            if !matches!(request.map(|r| r.state), Ok(State::Suspended)) {
                // Resumed already, or gone on: only the chain is left to delete.
                let _ = self.store.resumed(&request_id, host, "", None).await;
                continue;
            }
            let resumed = match self.target().await {
                Ok(url) => match self.store.hand_over(&request_id, State::Suspended).await {
                    Ok(epoch) => {
                        let span = self.hand_over_span(&request_id);
                        let began = std::time::SystemTime::now();
                        let terms = HandOver {
                            epoch,
                            trace: span.as_ref().map(|s| s.context),
                            paused,
                        };
                        if let Err(err) = self.with_answers(&mut suspended.job_chain).await {
                            tracing::warn!(%request_id, error = %err, "reading the request's approvals failed; resuming without them");
                        }
                        let handed = self.jr.resume(&url, &suspended, &terms).await;
                        self.hand_over_ended(span, began, &url, epoch, &handed);
                        handed.map(|handed| (handed, epoch))
                    }
                    Err(err) => Err(ClientError::Unavailable(err.to_string())),
                },
                Err(err) => Err(err),
            };
            match resumed {
                Ok((HandedOver { url, instance }, epoch)) => {
                    let owner = Fence { instance, epoch };
                    match self
                        .store
                        .resumed(&request_id, host, &url, Some(&owner))
                        .await
                    {
                        Err(err) => {
                            tracing::error!(%request_id, error = %err, "resumed, but recording it failed");
                        }
                        Ok(now_paused) => {
                            tracing::info!(%request_id, jr_url = url, instance = owner.instance, epoch, paused = now_paused, "resumed suspended chain");
                            self.catch_up_pause(&request_id, &url, paused, now_paused)
                                .await;
                        }
                    }
                }
                Err(err @ ClientError::Invalid(_)) => {
                    // It can never run: the request fails, with the reason in the log.
                    tracing::error!(%request_id, error = %err, "the suspended chain cannot be resumed; request failed");
                    let reason = format!("its chain could not be resumed: {err}");
                    if let Err(err) = self
                        .store
                        .fail_suspended(&request_id, host, &reason, Utc::now())
                        .await
                    {
                        tracing::warn!(%request_id, error = %err, "failing the request failed");
                    } else {
                        self.ended(&request_id).await;
                    }
                }
                Err(err) => {
                    self.forget_runners();
                    tracing::warn!(%request_id, error = %err, "no job runner resumed the chain; trying again later");
                    let _ = self.store.unclaim(&request_id, host).await;
                    break;
                }
            }
        }
        let now = Utc::now();
        if let Err(err) = self
            .store
            .release_stale_claims(now - chrono_duration(self.options.stale_claim))
            .await
        {
            tracing::warn!(error = %err, "releasing stale claims failed");
        }
        match self
            .store
            .expire_suspended(now - chrono_duration(self.options.suspended_ttl), now)
            .await
        {
            Ok(expired) => {
                for request_id in expired {
                    tracing::warn!(request_id, "suspended chain expired; request failed");
                    self.ended(&request_id).await;
                }
            }
            Err(err) => tracing::warn!(error = %err, "expiring suspended chains failed"),
        }
    }

    /// Runs the background loops until `cancel` fires: the first round at once (a
    /// restarted Request Manager resumes what waits without delay), then every
    /// `interval`.
    pub async fn run_background(self: Arc<Self>, cancel: CancellationToken) {
        let mut tick = tokio::time::interval(self.options.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = tick.tick() => self.background_round().await,
            }
        }
    }

    /// One round of the background loop.
    pub async fn background_round(&self) {
        self.recover_lost_runners().await;
        self.run_schedules().await;
        self.start_pending().await;
        self.resume_suspended().await;
        self.apply_retention().await;
    }

    /// Removes finished requests older than the retention, in batches; says what it
    /// removed. Returns the number of requests removed.
    pub async fn apply_retention(&self) -> u64 {
        let Some(retention) = self.options.retention else {
            return 0;
        };
        let Ok(retention) = chrono::Duration::from_std(retention) else {
            return 0;
        };
        let before = Utc::now() - retention;
        let mut total = store::Removed::default();
        for _ in 0..RETENTION_BATCHES_PER_ROUND {
            match self.store.remove_finished(before, RETENTION_BATCH).await {
                Ok(removed) => {
                    total.requests += removed.requests;
                    total.job_log_entries += removed.job_log_entries;
                    total.job_runners += removed.job_runners;
                    if removed.requests < RETENTION_BATCH {
                        break;
                    }
                }
                Err(err) => {
                    tracing::warn!(error = %err, "retention: removing old requests failed; trying again next round");
                    break;
                }
            }
        }
        if total.requests > 0 || total.job_runners > 0 {
            tracing::info!(
                requests = total.requests,
                job_log_entries = total.job_log_entries,
                job_runners = total.job_runners,
                finished_before = %before.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                "retention: removed finished requests and their job logs"
            );
        }
        total.requests
    }

    /// A Job Runner registers (a new instance at every start). Another live registration
    /// at the same URL is a process that is gone (one address holds one process): it is
    /// lost at once, and its requests are recovered.
    pub async fn register_runner(
        &self,
        registration: RunnerRegistration,
    ) -> Result<JobRunner, Error> {
        if registration.instance_id.is_empty() {
            return Err(Error::BadRequest(
                "job runner registration has no instanceId; expected a new id for each start"
                    .to_owned(),
            ));
        }
        if url::Url::parse(&registration.url)
            .ok()
            .is_none_or(|url| !matches!(url.scheme(), "http" | "https" | "in-process"))
        {
            return Err(Error::BadRequest(format!(
                "job runner registration: url {:?} is not a URL; expected http://HOST:PORT",
                registration.url
            )));
        }
        let now = Utc::now();
        let runner = self.store.register_runner(&registration, now).await?;
        for other in self.store.job_runners(now, now).await? {
            if other.url == runner.url
                && other.instance_id != runner.instance_id
                && other.state == RunnerState::Live
            {
                self.declare_lost(&other, "a new job runner registered at its address")
                    .await?;
            }
        }
        tracing::info!(
            instance = runner.instance_id,
            url = runner.url,
            lease = runner.lease,
            "job runner registered"
        );
        self.forget_runners();
        Ok(runner)
    }

    /// Renews a runner's lease; a runner declared lost must register again. `held`, when
    /// the runner says, names the requests whose chains it holds: a request it owns as
    /// RUNNING that this renewal and the one before it here both leave out is recovered
    /// as a lost runner's would be (its chain ended or was dropped, and its end never
    /// reached a Request Manager: reports refused by something that was not one, say),
    /// so that no request stays RUNNING on a runner that no longer runs it. Two in a row,
    /// because a renewal taken just before a hand-over may arrive after it was recorded.
    pub async fn renew_runner(
        &self,
        instance: &str,
        held: Option<&[String]>,
    ) -> Result<JobRunner, Error> {
        let runner = self.store.renew_runner(instance, Utc::now()).await?;
        if let Some(held) = held {
            self.recover_unheld(&runner, held).await;
        }
        Ok(runner)
    }

    /// Recovers the requests `runner` owns that neither this renewal (`held`) nor its
    /// last one here named, and remembers which this one left out.
    async fn recover_unheld(&self, runner: &JobRunner, held: &[String]) {
        let instance = runner.instance_id.as_str();
        let owned = match self.store.owned_requests(instance).await {
            Ok(owned) => owned,
            Err(err) => {
                tracing::warn!(instance, error = %err, "reading a job runner's requests failed; its renewal is checked next time");
                return;
            }
        };
        let held: HashSet<&str> = held.iter().map(String::as_str).collect();
        let unheld: HashSet<String> = owned
            .into_iter()
            .filter(|request_id| !held.contains(request_id.as_str()))
            .collect();
        let before = {
            let mut remembered = self.unheld.lock().unwrap_or_else(|p| p.into_inner());
            if unheld.is_empty() {
                remembered.remove(instance)
            } else {
                remembered.insert(instance.to_owned(), unheld.clone())
            }
        };
        let Some(before) = before else {
            return;
        };
        let error = crate::recovery::unheld_error(runner);
        for request_id in unheld.intersection(&before) {
            match self
                .take_back(request_id, Holder::Lost(instance), error.clone())
                .await
            {
                Ok(interrupted) => tracing::warn!(
                    request_id,
                    instance,
                    interrupted,
                    "request recovered: its job runner no longer runs it, and its end was never reported; it is resumed on a live one"
                ),
                // Finished or recovered meanwhile.
                Err(Error::Fenced(_) | Error::Conflict(_)) => {}
                Err(err) => {
                    tracing::warn!(request_id, error = %err.chain(), "recovering a request failed; trying again at the next renewal");
                }
            }
        }
    }

    /// A runner that shut down, its chains handed back.
    pub async fn end_runner(&self, instance: &str) -> Result<(), Error> {
        self.store.end_runner(instance, Utc::now()).await?;
        self.unheld
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(instance);
        tracing::info!(instance, "job runner deregistered");
        self.forget_runners();
        Ok(())
    }

    /// The registered runners: live, lost and recently ended.
    pub async fn job_runners(&self) -> Result<Vec<JobRunner>, Error> {
        let now = Utc::now();
        Ok(self
            .store
            .job_runners(now, now - ENDED_RUNNERS_LISTED)
            .await?)
    }

    /// Declares a runner lost now (its process is known to be gone) and recovers its
    /// requests.
    pub async fn declare_lost(&self, runner: &JobRunner, why: &str) -> Result<(), Error> {
        if self
            .store
            .mark_runner_lost(&runner.instance_id, Utc::now())
            .await?
        {
            tracing::warn!(
                instance = runner.instance_id,
                url = runner.url,
                why,
                "job runner lost"
            );
        }
        self.forget_runners();
        self.recover_requests_of(runner).await;
        Ok(())
    }

    /// Whether the database has answered for at least a lease without a break.
    fn trusted_for_a_lease(&self, healthy: bool) -> bool {
        let mut since = self.healthy_since.lock().unwrap_or_else(|p| p.into_inner());
        if !healthy {
            *since = None;
            return false;
        }
        let since = since.get_or_insert_with(tokio::time::Instant::now);
        since.elapsed() >= self.options.lease
    }

    /// Declares lost the runners whose lease lapsed (once this Request Manager has
    /// reached the database for a whole lease, so that it could have seen their
    /// renewals), then recovers the requests of every lost runner. Each request is
    /// recovered by one Request Manager: the store's recovery is conditional.
    pub async fn recover_lost_runners(&self) {
        let now = Utc::now();
        let runners = match self
            .store
            .job_runners(now, now - ENDED_RUNNERS_LISTED)
            .await
        {
            Ok(runners) => runners,
            Err(err) => {
                self.trusted_for_a_lease(false);
                tracing::warn!(error = %err, "reading the job runners failed");
                return;
            }
        };
        let trusted = self.trusted_for_a_lease(true);
        for runner in &runners {
            let lapsed = runner.state == RunnerState::Lost && runner.ended_at.is_none();
            if lapsed && trusted {
                match self.store.mark_runner_lost(&runner.instance_id, now).await {
                    Ok(true) => {
                        tracing::warn!(
                            instance = runner.instance_id,
                            url = runner.url,
                            renewed_at = %runner.renewed_at,
                            lease = runner.lease,
                            "job runner lost: its lease lapsed"
                        );
                        self.forget_runners();
                    }
                    Ok(false) => {}
                    Err(err) => tracing::warn!(error = %err, "declaring a job runner lost failed"),
                }
            }
            let gone = (runner.state == RunnerState::Lost
                && (runner.ended_at.is_some() || (lapsed && trusted)))
                || runner.state == RunnerState::Stopped;
            if gone && runner.running_requests > 0 {
                self.recover_requests_of(runner).await;
            }
        }
    }

    /// Recovers each RUNNING request of a lost runner: rebuilt from the store, stored as
    /// a suspended chain, and resumed on a live runner by the loop that resumes them.
    async fn recover_requests_of(&self, runner: &JobRunner) {
        let requests = match self.store.owned_requests(&runner.instance_id).await {
            Ok(requests) => requests,
            Err(err) => {
                tracing::warn!(instance = runner.instance_id, error = %err, "reading a lost job runner's requests failed");
                return;
            }
        };
        for request_id in requests {
            match self.recover_request(&request_id, runner).await {
                Ok(interrupted) => tracing::warn!(
                    request_id,
                    instance = runner.instance_id,
                    interrupted,
                    "request recovered from a lost job runner; it is resumed on a live one"
                ),
                // Another Request Manager recovered it, or it finished meanwhile.
                Err(Error::Fenced(_) | Error::Conflict(_)) => {}
                Err(err) => {
                    tracing::warn!(request_id, error = %err.chain(), "recovering a request failed; trying again later")
                }
            }
        }
    }

    /// Recovers one request of a lost runner; returns how many tries were interrupted.
    async fn recover_request(&self, request_id: &str, runner: &JobRunner) -> Result<usize, Error> {
        let error = crate::recovery::interrupted_error(runner);
        self.take_back(request_id, Holder::Lost(&runner.instance_id), error)
            .await
    }

    /// Takes a request back from `holder`: its chain is rebuilt from the store (tries
    /// that started and never reported logged as interrupted, with `error`) and stored as
    /// a suspended chain, which the loop that resumes them hands to a live runner.
    /// Returns how many tries were interrupted.
    async fn take_back(
        &self,
        request_id: &str,
        holder: Holder<'_>,
        error: String,
    ) -> Result<usize, Error> {
        let chain = self.store.job_chain(request_id).await?;
        let logs = self.store.job_log(request_id).await?;
        let started = self.store.try_starts(request_id).await?;
        let now_nanos = Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX);
        let rebuilt = crate::recovery::rebuild(chain, &logs, &started, error, now_nanos);
        for entry in &rebuilt.interrupted {
            tracing::warn!(
                request_id,
                job_id = entry.job_id,
                r#try = entry.r#try,
                from = ?holder,
                "job try interrupted: its job runner was lost or is not known"
            );
        }
        self.store
            .recover_request(holder, &rebuilt.interrupted, &rebuilt.suspended, Utc::now())
            .await?;
        if let Some(metrics) = &self.options.telemetry.metrics {
            metrics
                .tries_interrupted
                .inc_by(rebuilt.interrupted.len() as u64);
        }
        Ok(rebuilt.interrupted.len())
    }

    /// Whether a PENDING request offered again had begun on a Job Runner already (a
    /// hand-over reached a runner, which ran jobs, but the request was never marked
    /// RUNNING: the Request Manager that handed it over died first, or its write
    /// failed). Such a chain cannot go out as a new one (a runner refuses a new chain
    /// with jobs that ran), so it is taken back like a lost runner's request and resumed;
    /// the new epoch fences off whichever runner had it. True when the request is no
    /// longer to be offered as new.
    async fn took_back_begun(
        &self,
        request_id: &RequestId,
        job_chain: &JobChain,
    ) -> Result<bool, Error> {
        let ran = job_chain
            .jobs
            .values()
            .any(|job| job.state != State::Pending);
        if !ran && self.store.try_starts(request_id).await?.is_empty() {
            return Ok(false);
        }
        let owner = self.store.owner(request_id).await?;
        if owner.state != State::Pending {
            return Ok(true);
        }
        let error = crate::recovery::unrecorded_error(owner.epoch);
        match self
            .take_back(request_id, Holder::Unstarted(owner.epoch), error)
            .await
        {
            Ok(interrupted) => {
                tracing::warn!(
                    %request_id,
                    epoch = owner.epoch,
                    interrupted,
                    "PENDING request had begun on a job runner without being marked RUNNING; taken back, it is resumed on a live one"
                );
                Ok(true)
            }
            // Handed over again or started meanwhile (another Request Manager).
            Err(Error::Fenced(_) | Error::Conflict(_)) => Ok(true),
            Err(err) => Err(err),
        }
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
        tracing::warn!(
            request_id = %entry.request_id,
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

/// Callers waiting for requests to end, by request id.
type Waiting = Arc<Mutex<HashMap<String, Waiter>>>;

/// The callers waiting for one request to end, and when [`watch_ends`] reads it next:
/// every [`WAIT_POLL`] for [`WAIT_EAGER`], then at doubling intervals up to
/// [`WAIT_RECHECK`], so that a long wait costs one read a second in a query shared with
/// every other waiter's.
#[derive(Debug)]
struct Waiter {
    notify: Arc<tokio::sync::Notify>,
    since: tokio::time::Instant,
    next_read: tokio::time::Instant,
    every: Duration,
}

impl Waiter {
    fn new() -> Waiter {
        let now = tokio::time::Instant::now();
        Waiter {
            notify: Arc::default(),
            since: now,
            next_read: now + WAIT_POLL,
            every: WAIT_POLL,
        }
    }

    /// Whether its request is due for a read at `now`; if it is, when the next is.
    fn due(&mut self, now: tokio::time::Instant) -> bool {
        if self.next_read > now {
            return false;
        }
        if now.duration_since(self.since) >= WAIT_EAGER {
            self.every = (self.every * 2).min(WAIT_RECHECK);
        }
        self.next_read = now + self.every;
        true
    }
}

/// While anyone waits, every [`WAIT_POLL`], reads which of the waited-for requests due
/// for a read (see [`Waiter`]) have ended, in one query for all, and wakes their
/// waiters; ends when nobody waits. A failed
/// read is tried again at the next round (the waiters' own deadlines still hold).
async fn watch_ends(store: Arc<dyn Store>, waiting: Waiting, watching: Arc<AtomicBool>) {
    loop {
        tokio::time::sleep(WAIT_POLL).await;
        let ids: Vec<String> = {
            let mut waiting = waiting.lock().unwrap_or_else(|p| p.into_inner());
            if waiting.is_empty() {
                // Cleared under the lock: a waiter that registers after this starts a
                // new task.
                watching.store(false, Ordering::Release);
                return;
            }
            let now = tokio::time::Instant::now();
            waiting
                .iter_mut()
                .filter_map(|(id, waiter)| waiter.due(now).then(|| id.clone()))
                .collect()
        };
        if ids.is_empty() {
            continue;
        }
        let Ok(ended) = store.ended_among(&ids).await else {
            continue;
        };
        let waiting = waiting.lock().unwrap_or_else(|p| p.into_inner());
        for id in ended {
            if let Some(waiter) = waiting.get(&id) {
                waiter.notify.notify_waiters();
            }
        }
    }
}

#[cfg(test)]
mod waiter_tests {
    use super::{Duration, WAIT_EAGER, WAIT_POLL, WAIT_RECHECK, Waiter};

    /// Issue #17: a waited-for request is read at every round for its first second (an end
    /// another Request Manager stored is seen within a round), then at doubling intervals
    /// up to one a second.
    #[test]
    fn a_waited_for_request_is_read_every_round_for_a_second_then_ever_less_often() {
        let mut waiter = Waiter::new();
        let since = waiter.since;
        let mut reads = Vec::new();
        let mut at = since;
        while at < since + Duration::from_secs(5) {
            at += WAIT_POLL;
            if waiter.due(at) {
                reads.push((at - since).as_millis());
            }
        }
        let rounds = WAIT_EAGER.as_millis() / WAIT_POLL.as_millis();
        let mut expected: Vec<u128> = (1..=rounds).map(|n| n * WAIT_POLL.as_millis()).collect();
        let (mut last, mut every) = (WAIT_EAGER.as_millis(), WAIT_POLL.as_millis());
        while last < 5000 {
            every = (every * 2).min(WAIT_RECHECK.as_millis());
            last += every;
            if last <= 5000 {
                expected.push(last);
            }
        }
        assert_eq!(reads, expected);
        assert_eq!(
            &reads[rounds as usize..],
            &[1050, 1150, 1350, 1750, 2550, 3550, 4550]
        );
    }
}
