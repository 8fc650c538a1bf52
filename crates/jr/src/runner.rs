//! The Job Runner's chains: a map of request id to running chain, nothing else.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chain::{Handle, Reporter};
use job::Factory;
use proto::{Fence, JobStatus};
use telemetry::{SpanContext, Telemetry};

use crate::watch::{ChainTrace, ChainWatch};

/// Makes the reporter of one chain: its reports name the runner instance and the epoch
/// of the chain's hand-over, so that the Request Manager can refuse them once another
/// runner owns the request.
pub trait Reporters: Send + Sync + 'static {
    fn for_chain(&self, fence: Fence) -> Arc<dyn Reporter>;
}

/// A new instance id: one per start of a runner process, and one more each time it
/// registers again after its lease lapsed.
pub fn new_instance_id() -> String {
    xid::new().to_string()
}

/// Why the Job Runner did not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Job Runner is shutting down - no new job chains are being started")]
    ShuttingDown,
    /// The runner holds no lease now (it is registering, or registering again after
    /// its lease lapsed): a chain it took would belong to an instance no Request Manager
    /// knows, which none could recover.
    #[error(
        "this Job Runner holds no lease now (it is registering with the Request Managers); offer the chain to another"
    )]
    NotRegistered,
    /// What was sent cannot be read (not a chain).
    #[error("{0}")]
    Invalid(String),
    /// A chain that cannot run: a malformed graph, or job states that do not fit.
    #[error(transparent)]
    Refused(chain::ValidationError),
    #[error("request {0} is already running on this Job Runner")]
    AlreadyRunning(String),
    #[error("request {0} is not running on this Job Runner")]
    NotFound(String),
    /// A stop that came while the chain is being suspended.
    #[error(transparent)]
    NotStopped(#[from] chain::StopError),
}

/// The Job Runner.
pub struct Runner {
    factory: Arc<dyn Factory>,
    reporters: Arc<dyn Reporters>,
    /// This runner's instance now.
    instance: Mutex<String>,
    /// Whether that instance holds a lease with a Request Manager.
    registered: tokio::sync::watch::Sender<bool>,
    /// Whether this runner holds leases at all ([`crate::hold`] runs for it): then it
    /// takes chains only while registered.
    leased: AtomicBool,
    /// This Job Runner's base URL, as the Request Manager reaches it.
    base_url: String,
    options: chain::Options,
    chains: Mutex<HashMap<String, Handle>>,
    shutting_down: AtomicBool,
    telemetry: Telemetry,
    /// The tasks that see each chain to its end (forget it, count it): owned, and
    /// awaited at shutdown.
    ends: tokio_util::task::TaskTracker,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl Runner {
    pub fn new(
        factory: Arc<dyn Factory>,
        reporters: Arc<dyn Reporters>,
        base_url: &str,
        options: chain::Options,
        telemetry: Telemetry,
    ) -> Arc<Runner> {
        Arc::new(Runner {
            factory,
            reporters,
            instance: Mutex::new(new_instance_id()),
            registered: tokio::sync::watch::Sender::new(false),
            leased: AtomicBool::new(false),
            base_url: base_url.trim_end_matches('/').to_owned(),
            options,
            chains: Mutex::new(HashMap::new()),
            shutting_down: AtomicBool::new(false),
            telemetry,
            ends: tokio_util::task::TaskTracker::new(),
        })
    }

    /// The metrics and traces this runner reports to.
    pub fn telemetry(&self) -> &Telemetry {
        &self.telemetry
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// This runner's instance id now.
    pub fn instance(&self) -> String {
        self.instance
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Whether this runner's instance holds a lease now.
    pub fn is_registered(&self) -> bool {
        *self.registered.borrow()
    }

    /// Waits until this runner's instance holds a lease.
    pub async fn registered(&self) {
        let mut registered = self.registered.subscribe();
        let _ = registered.wait_for(|registered| *registered).await;
    }

    pub(crate) fn set_registered(&self, registered: bool) {
        self.registered.send_replace(registered);
    }

    /// This runner holds leases: from now on it takes chains only while registered.
    pub(crate) fn set_leased(&self) {
        self.leased.store(true, Ordering::SeqCst);
    }

    /// Becomes a new instance after the old one's lease lapsed: every chain is abandoned
    /// first (its requests belong to whichever runner recovers them). Returns the new id.
    pub fn renew_instance(&self) -> String {
        self.set_registered(false);
        self.abandon_all();
        let id = new_instance_id();
        *self
            .instance
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = id.clone();
        id
    }

    /// Stops every chain's jobs and reports nothing more for them (the lease lapsed).
    pub fn abandon_all(&self) {
        let handles: Vec<Handle> = self.chains().values().cloned().collect();
        if !handles.is_empty() {
            tracing::warn!(
                n_chains = handles.len(),
                "abandoning every chain: this job runner's lease lapsed"
            );
        }
        for handle in handles {
            handle.abandon();
        }
    }

    /// Where a chain's resource lives, for the `Location` header.
    pub fn location(&self, request_id: &str) -> String {
        format!("{}/api/v1/job-chains/{request_id}", self.base_url)
    }

    fn chains(&self) -> std::sync::MutexGuard<'_, HashMap<String, Handle>> {
        self.chains
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts a chain with `run`, which is given the chain's options (its observer set
    /// when metrics or traces are on).
    fn start(
        self: &Arc<Self>,
        request_id: &str,
        trace: Option<SpanContext>,
        resumed: bool,
        paused: bool,
        secrets: job::Secrets,
        run: impl FnOnce(chain::Options) -> Result<Handle, chain::ValidationError>,
    ) -> Result<(), Error> {
        if self.leased.load(Ordering::SeqCst) && !self.is_registered() {
            return Err(Error::NotRegistered);
        }
        let mut chains = self.chains();
        // Under the lock the shutdown takes its chains with: a chain taken here is among
        // those it suspends, or refused (one started between a check without the lock
        // and the shutdown's list was stopped with the process and ended FAIL: 30
        // requests of 50,000 across a rolling restart, issue #51).
        if self.shutting_down.load(Ordering::SeqCst) {
            return Err(Error::ShuttingDown);
        }
        if chains.contains_key(request_id) {
            return Err(Error::AlreadyRunning(request_id.to_owned()));
        }
        let mut options = self.options.clone();
        options.paused = paused;
        options.secrets = secrets;
        let watch = (self.telemetry.metrics.is_some() || self.telemetry.traces.is_some())
            .then(|| ChainWatch::new(self.telemetry.clone(), ChainTrace::new(request_id, trace)));
        if let Some(watch) = &watch {
            options.observer = Some(watch.clone());
        }
        let started = std::time::SystemTime::now();
        let handle = run(options).map_err(Error::Refused)?;
        chains.insert(request_id.to_owned(), handle.clone());
        drop(chains);
        if let Some(metrics) = &self.telemetry.metrics {
            metrics.chains_running.inc();
        }
        // Forget the chain once it ended and reported.
        let runner = Arc::clone(self);
        let request_id = request_id.to_owned();
        self.ends.spawn(async move {
            let end = handle.wait().await;
            // The Request Manager logs the request's end; this is the runner's view.
            tracing::debug!(request_id, state = %end.state, "chain ended");
            runner.chains().remove(&request_id);
            if let Some(approvals) = runner.factory.approvals() {
                approvals.forget(&request_id);
            }
            if let Some(metrics) = &runner.telemetry.metrics {
                metrics.chains_running.dec();
            }
            if let Some(watch) = watch {
                watch.chain_ended(&request_id, started, end.state, resumed);
            }
        });
        Ok(())
    }

    /// Hands `answer` to approval job `job_id` of `request_id`: at once if it waits
    /// here, else kept for when it begins (the Request Manager has it stored, and hands it
    /// over again with the chain).
    pub fn answer(&self, request_id: &str, job_id: &str, answer: proto::Answer) {
        if let Some(approvals) = self.factory.approvals() {
            approvals.answer(request_id, job_id, answer);
        }
    }

    /// The approval jobs of this runner that begin to wait, as (request, job), from now
    /// on (none when its factory has no approvals).
    pub fn approval_waits(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<(String, String)>> {
        self.factory.approvals().map(|approvals| approvals.waits())
    }

    /// The reporter of a chain handed over as `epoch`, and the instance it names.
    fn reporter(&self, epoch: u64) -> (Arc<dyn Reporter>, String) {
        let instance = self.instance();
        let reporter = self.reporters.for_chain(Fence {
            instance: instance.clone(),
            epoch,
        });
        (reporter, instance)
    }

    /// Runs a new chain, given as hand-over `epoch` (traced under `trace`, the hand-over's
    /// span, when given; started paused when `paused`; its request's secret args given to
    /// its jobs); returns the instance that runs it.
    pub fn run_chain(
        self: &Arc<Self>,
        job_chain: impl Into<chain::Incoming>,
        epoch: u64,
        trace: Option<SpanContext>,
        paused: bool,
        secrets: job::Secrets,
    ) -> Result<String, Error> {
        let job_chain = job_chain.into();
        let request_id = job_chain.request_id().to_owned();
        let (factory, (reporter, instance)) = (Arc::clone(&self.factory), self.reporter(epoch));
        self.start(&request_id, trace, false, paused, secrets, move |options| {
            chain::run(job_chain, factory, reporter, options)
        })?;
        Ok(instance)
    }

    /// Resumes a suspended chain, given as hand-over `epoch`; returns the instance that
    /// runs it.
    pub fn resume(
        self: &Arc<Self>,
        suspended: impl Into<chain::Resumed>,
        epoch: u64,
        trace: Option<SpanContext>,
        paused: bool,
        secrets: job::Secrets,
    ) -> Result<String, Error> {
        let suspended = suspended.into();
        let request_id = suspended.request_id().to_owned();
        let (factory, (reporter, instance)) = (Arc::clone(&self.factory), self.reporter(epoch));
        self.start(&request_id, trace, true, paused, secrets, move |options| {
            chain::resume(suspended, factory, reporter, options)
        })?;
        Ok(instance)
    }

    /// Stops a chain; returns once its final state was reported.
    pub async fn stop(&self, request_id: &str) -> Result<(), Error> {
        let handle = self.chains().get(request_id).cloned();
        let Some(handle) = handle else {
            return Err(Error::NotFound(request_id.to_owned()));
        };
        handle.stop().await?;
        self.chains().remove(request_id);
        Ok(())
    }

    /// The running chain of a request, if this runner runs it (its `wait` tells when it
    /// ended and its last report was delivered).
    pub fn chain(&self, request_id: &str) -> Option<Handle> {
        self.chains().get(request_id).cloned()
    }

    /// Pauses (or unpauses) a chain: see [`chain::Handle::set_paused`].
    pub fn set_paused(&self, request_id: &str, paused: bool) -> Result<(), Error> {
        let handle = self.chains().get(request_id).cloned();
        let Some(handle) = handle else {
            return Err(Error::NotFound(request_id.to_owned()));
        };
        handle.set_paused(paused);
        Ok(())
    }

    /// Running jobs, of one request or of all.
    pub async fn running(&self, request_id: Option<&str>) -> Result<Vec<JobStatus>, Error> {
        let handles: Vec<Handle> = match request_id {
            Some(id) => vec![
                self.chains()
                    .get(id)
                    .cloned()
                    .ok_or_else(|| Error::NotFound(id.to_owned()))?,
            ],
            None => self.chains().values().cloned().collect(),
        };
        // Asked of every chain at once: each chain's task answers for itself, and one
        // after another 50,000 of them took seconds of wake-ups.
        let asked = handles.iter().map(Handle::running);
        let mut jobs: Vec<JobStatus> = futures_util::future::join_all(asked)
            .await
            .into_iter()
            .flatten()
            .collect();
        jobs.sort_by_key(|job| job.started_at);
        Ok(jobs)
    }

    /// The `limit` oldest running jobs of one request and how many of its jobs run (for a
    /// progress line).
    pub async fn running_first(
        &self,
        request_id: &str,
        limit: usize,
    ) -> Result<(Vec<JobStatus>, usize), Error> {
        let handle = self
            .chains()
            .get(request_id)
            .cloned()
            .ok_or_else(|| Error::NotFound(request_id.to_owned()))?;
        Ok(handle.running_first(limit).await)
    }

    /// The requests whose chains this runner holds now: running, or ended and still
    /// delivering their last reports.
    pub fn held_requests(&self) -> Vec<String> {
        self.chains().keys().cloned().collect()
    }

    /// How many chains run now.
    pub fn n_chains(&self) -> usize {
        self.chains().len()
    }

    /// Refuses new chains, suspends every running one and waits (at most `timeout`) until
    /// each was handed back.
    pub async fn shut_down(&self, timeout: Duration) {
        // Set under the chains' lock: a chain started is in this list or refused.
        let handles: Vec<Handle> = {
            let chains = self.chains();
            self.shutting_down.store(true, Ordering::SeqCst);
            chains.values().cloned().collect()
        };
        for handle in &handles {
            handle.suspend();
        }
        self.ends.close();
        let all = async {
            for handle in &handles {
                handle.wait().await;
            }
            // Each chain's end seen to (forgotten, counted, its span ended).
            self.ends.wait().await;
        };
        if tokio::time::timeout(timeout, all).await.is_err() {
            tracing::error!(
                n_chains = handles.len(),
                "not every chain was handed back before the shutdown timeout"
            );
        }
    }
}
