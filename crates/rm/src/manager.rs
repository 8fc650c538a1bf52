//! The Request Manager's logic, free of HTTP: create, start, stop, read; what Job
//! Runners report; the background loops that start PENDING requests once a Job Runner
//! answers and resume suspended chains.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::Utc;
use graph::Grapher;
use proto::{
    CreateRequest, FinishRequest, JobChain, JobLog, OutputChunk, OutputPage, OutputQuery, Request,
    RequestFilter, RequestId, RequestProgress, RequestSpec, RunningStatus, State,
    SuspendedJobChain,
};
use store::{Batcher, Store};
use tokio_util::sync::CancellationToken;

use crate::{ClientError, Error, JrClient};

/// Knobs of the Request Manager.
#[derive(Debug, Clone)]
pub struct Options {
    /// How often PENDING requests are offered to a Job Runner again, and suspended chains
    /// resumed.
    pub interval: Duration,
    /// Suspended chains not resumed within this time fail their request.
    pub suspended_ttl: Duration,
    /// A claim on a suspended chain not renewed for this long is released.
    pub stale_claim: Duration,
    /// This instance's name in claims.
    pub host: String,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            interval: Duration::from_secs(10),
            suspended_ttl: Duration::from_secs(3600),
            stale_claim: Duration::from_secs(300),
            host: "localhost".to_owned(),
        }
    }
}

/// The Request Manager. Cheap to share behind an `Arc`.
pub struct Manager {
    /// Shared with the blocking threads that build chains.
    grapher: Arc<Grapher>,
    store: Arc<dyn Store>,
    batcher: Batcher,
    jr: Arc<dyn JrClient>,
    options: Options,
    shutting_down: AtomicBool,
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
        let batcher = Batcher::spawn(Arc::clone(&store), store::BatchOptions::default());
        Manager {
            grapher: Arc::new(grapher),
            store,
            batcher,
            jr,
            options,
            shutting_down: AtomicBool::new(false),
        }
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
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
    pub async fn create(
        &self,
        create_request: CreateRequest,
        user: &str,
    ) -> Result<Request, Error> {
        self.check_open()?;
        // Building a chain is CPU work that grows with the request, and a job's `create`
        // may run a program (shell-args waits for it): never on the async runtime's
        // threads, which serve every other request meanwhile.
        let grapher = Arc::clone(&self.grapher);
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
        };
        let stored = CreateRequest {
            user: user.to_owned(),
            ..create_request
        };
        self.store.create_request(&request, &stored).await?;
        tracing::info!(
            request_id = %request.id,
            request_type = %request.request_type,
            user,
            jobs = request.total_jobs,
            "request created"
        );
        let job_chain = request.job_chain.as_ref().expect("set above");
        self.send_to_jr(&RequestId::new(request.id.clone()), job_chain)
            .await?;
        Ok(Request {
            job_chain: None,
            ..request
        })
    }

    /// Sends a PENDING request's chain to a Job Runner and marks it RUNNING. A Job Runner
    /// that does not answer leaves it PENDING (not an error); one that refuses the chain
    /// fails the request.
    async fn send_to_jr(&self, request_id: &RequestId, job_chain: &JobChain) -> Result<(), Error> {
        match self.jr.new_chain(job_chain).await {
            Ok(jr_url) => {
                tracing::info!(%request_id, jr_url, "request handed to a job runner");
                match self
                    .store
                    .start_request(request_id, &jr_url, Utc::now())
                    .await
                {
                    // The chain may have finished (or been started by another loop) already.
                    Ok(()) | Err(store::Error::State { .. }) => Ok(()),
                    Err(err) => Err(err.into()),
                }
            }
            Err(err @ (ClientError::Unavailable(_) | ClientError::AlreadyRunning(_))) => {
                tracing::warn!(%request_id, error = %err, "no job runner took the request; it stays PENDING and is offered again");
                Ok(())
            }
            Err(err) => {
                self.store.fail_pending(request_id, Utc::now()).await?;
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
        self.send_to_jr(request_id, &job_chain).await
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
                err => Error::Internal {
                    message: format!("stopping request {request_id} on its Job Runner failed"),
                    source: Some(Box::new(err)),
                },
            })
    }

    pub async fn get(&self, request_id: &str) -> Result<Request, Error> {
        Ok(self.store.get_request(request_id, true).await?)
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
        self.grapher.request_specs()
    }

    /// Job log entries from a Job Runner; a re-sent entry is stored once. Each failed
    /// try is logged (a re-sent one again: the store, not this, knows it is a repeat).
    pub async fn add_job_logs(&self, entries: Vec<JobLog>) -> Result<(), Error> {
        let failed: Vec<JobLog> = entries
            .iter()
            .filter(|entry| !matches!(entry.state, State::Complete | State::Stopped))
            .cloned()
            .collect();
        self.batcher
            .insert_job_logs(entries)
            .await
            .map_err(|err| store_error(&err))?;
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
        Ok(())
    }

    /// Live output chunks from a Job Runner; a re-sent chunk is stored once. Each chunk
    /// must name its request, job and try and hold at most the per-try cap of text.
    pub async fn add_output(&self, chunks: Vec<OutputChunk>) -> Result<(), Error> {
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
    pub async fn progress(&self, progress: &RequestProgress) -> Result<(), Error> {
        self.batcher
            .update_progress(&progress.request_id, progress.finished_jobs)
            .await
            .map_err(|err| store_error(&err))
    }

    /// The final state from a Job Runner. A second report is a no-op. A chain that ended
    /// before the request was marked RUNNING (a very fast chain) is marked first, as
    /// started when it finished (the store keeps created ≤ started ≤ finished).
    pub async fn finish(&self, finish: &FinishRequest) -> Result<(), Error> {
        let request_id = finish.request_id.as_str();
        let finished = match self.store.finish_request(finish).await {
            Ok(finished) => finished,
            Err(store::Error::State {
                actual: State::Pending,
                ..
            }) => {
                let started_at = finish.finished_at.min(Utc::now());
                self.store
                    .start_request(&RequestId::from(request_id), "", started_at)
                    .await?;
                self.store.finish_request(finish).await?
            }
            Err(err) => return Err(err.into()),
        };
        // Logged once: a report sent again finds the request finished already.
        if finished == store::Finished::Now {
            self.log_finished(request_id).await;
        }
        Ok(())
    }

    async fn log_finished(&self, request_id: &str) {
        match self.store.get_request(request_id, false).await {
            Ok(request) => {
                let runtime = match (request.started_at, request.finished_at) {
                    (Some(started), Some(finished)) => (finished - started)
                        .to_std()
                        .map(proto::duration::format)
                        .unwrap_or_default(),
                    _ => String::new(),
                };
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
    pub async fn suspend(&self, suspended: &SuspendedJobChain) -> Result<(), Error> {
        let res = self.suspend_stored(suspended).await;
        if res.is_ok() {
            tracing::info!(
                request_id = %suspended.request_id,
                "request suspended by its job runner; another one resumes it"
            );
        }
        res
    }

    async fn suspend_stored(&self, suspended: &SuspendedJobChain) -> Result<(), Error> {
        match self.store.suspend_request(suspended, Utc::now()).await {
            Ok(()) => Ok(()),
            Err(store::Error::State {
                actual: State::Pending,
                ..
            }) => {
                self.store
                    .start_request(
                        &RequestId::new(suspended.request_id.clone()),
                        "",
                        Utc::now(),
                    )
                    .await?;
                Ok(self.store.suspend_request(suspended, Utc::now()).await?)
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
            let Ok(job_chain) = self.store.job_chain(&request.id).await else {
                continue;
            };
            match self.jr.new_chain(&job_chain).await {
                Ok(jr_url) => {
                    let _ = self
                        .store
                        .start_request(&RequestId::new(request.id.clone()), &jr_url, Utc::now())
                        .await;
                }
                Err(ClientError::Unavailable(_)) => return,
                Err(ClientError::AlreadyRunning(_)) => {}
                Err(err) => {
                    tracing::error!(request_id = %request.id, error = %err, "job runner refused the request");
                    let _ = self.store.fail_pending(&request.id, Utc::now()).await;
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
            let suspended = match self.store.claim_suspended(host, Utc::now()).await {
                Ok(Some(suspended)) => suspended,
                Ok(None) => break,
                Err(err) => {
                    tracing::warn!(error = %err, "claiming suspended chains failed");
                    break;
                }
            };
            let request_id = RequestId::new(suspended.request_id.clone());
            let state = self
                .store
                .get_request(&request_id, false)
                .await
                .map(|r| r.state);
            if !matches!(state, Ok(State::Suspended)) {
                // Resumed already, or gone on: only the chain is left to delete.
                let _ = self.store.resumed(&request_id, host, "").await;
                continue;
            }
            match self.jr.resume(&suspended).await {
                Ok(jr_url) => {
                    if let Err(err) = self.store.resumed(&request_id, host, &jr_url).await {
                        tracing::error!(%request_id, error = %err, "resumed, but recording it failed");
                    } else {
                        tracing::info!(%request_id, jr_url, "resumed suspended chain");
                    }
                }
                Err(err) => {
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
                }
            }
            Err(err) => tracing::warn!(error = %err, "expiring suspended chains failed"),
        }
    }

    /// Runs the background loops until `cancel` fires.
    pub async fn run_background(self: Arc<Self>, cancel: CancellationToken) {
        let mut tick = tokio::time::interval(self.options.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = tick.tick() => {
                    self.start_pending().await;
                    self.resume_suspended().await;
                }
            }
        }
    }
}

/// A group-committed write that failed, for every caller that waited on it.
fn store_error(err: &Arc<store::Error>) -> Error {
    let source: Box<dyn std::error::Error + Send + Sync> = Box::new(Arc::clone(err));
    if err.is_transient() {
        Error::Unavailable {
            message: "the database is unavailable; try again later".to_owned(),
            source: Some(source),
        }
    } else {
        Error::Internal {
            message: "storing failed".to_owned(),
            source: Some(source),
        }
    }
}
