//! The Job Runner registry: registrations and their renewals (leases), lost runners,
//! and recovering the requests a lost runner held.

use super::*;

use futures_util::StreamExt as _;

/// How many requests of a lost runner one batch recovers: their reads are three
/// statements, their recoveries one transaction (each checked as if alone).
const RECOVERY_BATCH: usize = 64;

/// How many batches are recovered at once: a few, so that the pool keeps connections
/// for everything else (a runner's lease renewal). 4 rather than 2: 25,000 of a lost
/// runner recovered and resumed at 1,850 a second rather than 1,585 (BENCHMARKS.md,
/// session 32).
const RECOVERIES_AT_ONCE: usize = 4;

/// While a lost runner's requests are recovered, how long after a pass that resumed
/// those recovered so far the next one begins.
const RESUME_WHILE_RECOVERING: Duration = Duration::from_millis(100);

impl Manager {
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
        if !proto::api_versions_work_together(registration.api_version, proto::API_VERSION) {
            let refusal = format!(
                "job runner {} speaks API version {}; this Request Manager speaks version {} and works with runners of versions {} to {}: run a Job Runner of a release at most one version apart (docs/deploying.md, \"Upgrading\")",
                registration.url,
                registration.api_version,
                proto::API_VERSION,
                proto::API_VERSION.saturating_sub(1).max(1),
                proto::API_VERSION + 1
            );
            tracing::warn!(
                instance = registration.instance_id,
                url = registration.url,
                api_version = registration.api_version,
                "job runner registration refused: {refusal}"
            );
            return Err(Error::Unprocessable(refusal));
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
        self.runner_joined.notify_one();
        Ok(runner)
    }

    /// Renews a runner's lease; a runner declared lost must register again. `held`, when
    /// the runner says, names the requests whose chains it holds: a request it owns as
    /// RUNNING that this renewal and the one before it that named its chains both leave out is recovered
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
    pub(super) async fn recover_unheld(&self, runner: &JobRunner, held: &[String]) {
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
    ///
    /// A runner no Request Manager could call (not at an `http(s)://` URL: the one in a
    /// `spindle run` process) is left out once it stopped cleanly: it ran its own request
    /// and left nothing behind. Lost, it is listed, as its requests are recovered.
    pub async fn job_runners(&self) -> Result<Vec<JobRunner>, Error> {
        let now = Utc::now();
        let mut runners = self
            .store
            .job_runners(now, now - ENDED_RUNNERS_LISTED)
            .await?;
        runners.retain(|runner| {
            runner.state != proto::RunnerState::Stopped
                || runner.url.starts_with("http://")
                || runner.url.starts_with("https://")
        });
        Ok(runners)
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
    pub(super) fn trusted_for_a_lease(&self, healthy: bool) -> bool {
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
    /// In batches of [`RECOVERY_BATCH`] (their reads a few statements, their recoveries
    /// one transaction), [`RECOVERIES_AT_ONCE`] batches at a time.
    pub(super) async fn recover_requests_of(&self, runner: &JobRunner) {
        let requests = match self.store.owned_requests(&runner.instance_id).await {
            Ok(requests) => requests,
            Err(err) => {
                tracing::warn!(instance = runner.instance_id, error = %err, "reading a lost job runner's requests failed");
                return;
            }
        };
        // The recovered ones are resumed as they are stored, not after the last batch
        // (25,000 of a lost runner took 17 s to recover before the first resumed).
        let recovering = AtomicBool::new(true);
        let recover = async {
            futures_util::stream::iter(requests.chunks(RECOVERY_BATCH))
                .for_each_concurrent(RECOVERIES_AT_ONCE, |batch| {
                    self.recover_batch_of(runner, batch)
                })
                .await;
            recovering.store(false, Ordering::SeqCst);
        };
        let resume = async {
            // Claims and resumes only: the round releases stale claims and expires.
            while recovering.load(Ordering::SeqCst) {
                self.resume_claimable().await;
                tokio::time::sleep(RESUME_WHILE_RECOVERING).await;
            }
        };
        tokio::join!(recover, resume);
    }

    /// Recovers `batch`, requests of lost `runner` (see [`Self::recover_requests_of`]).
    async fn recover_batch_of(&self, runner: &JobRunner, batch: &[String]) {
        let mut reads = match self.store.recovery_reads_among(batch).await {
            Ok(reads) => reads,
            Err(err) => {
                tracing::warn!(instance = runner.instance_id, error = %Error::from(err).chain(), "reading a lost job runner's requests failed; trying again later");
                return;
            }
        };
        let error = crate::recovery::interrupted_error(runner);
        let now_nanos = Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX);
        let recoveries: Vec<store::Recovery> = batch
            .iter()
            .filter_map(|request_id| reads.remove(request_id))
            .map(|read| {
                let rebuilt = crate::recovery::rebuild(
                    read.job_chain,
                    &read.job_log,
                    &read.try_starts,
                    error.clone(),
                    now_nanos,
                );
                store::Recovery {
                    interrupted: rebuilt.interrupted,
                    suspended: rebuilt.suspended,
                }
            })
            .collect();
        let answers = match self
            .store
            .recover_lost_many(&runner.instance_id, &recoveries, Utc::now())
            .await
        {
            Ok(answers) => answers,
            Err(err) => {
                tracing::warn!(instance = runner.instance_id, error = %Error::from(err).chain(), "recovering a lost job runner's requests failed; trying again later");
                return;
            }
        };
        for (recovery, answer) in recoveries.iter().zip(answers) {
            let request_id = recovery.suspended.request_id.as_str();
            match answer {
                Ok(()) => {
                    for entry in &recovery.interrupted {
                        tracing::warn!(
                            request_id,
                            job_id = entry.job_id,
                            r#try = entry.r#try,
                            instance = runner.instance_id,
                            "job try interrupted: its job runner was lost"
                        );
                    }
                    tracing::warn!(
                        request_id,
                        instance = runner.instance_id,
                        interrupted = recovery.interrupted.len(),
                        "request recovered from a lost job runner; it is resumed on a live one"
                    );
                    if let Some(metrics) = &self.options.telemetry.metrics {
                        metrics
                            .tries_interrupted
                            .inc_by(recovery.interrupted.len() as u64);
                    }
                }
                // Another Request Manager recovered it, it finished meanwhile (recovered
                // by nobody), or a try began while it was rebuilt (recovered again at the
                // next round).
                Err(
                    err @ (store::Error::Fenced(_)
                    | store::Error::Conflict(_)
                    | store::Error::State { .. }),
                ) => {
                    tracing::debug!(request_id, error = %err, "request not recovered now");
                }
                Err(err @ store::Error::TryBegan { .. }) => {
                    tracing::info!(request_id, why = %err, "request not recovered now: a try began while it was rebuilt; it is recovered again at the next round");
                }
                Err(err) => {
                    tracing::warn!(request_id, error = %Error::from(err).chain(), "recovering a request failed; trying again later")
                }
            }
        }
    }

    /// Takes a request back from `holder`: its chain is rebuilt from the store (tries
    /// that started and never reported logged as interrupted, with `error`) and stored as
    /// a suspended chain, which the loop that resumes them hands to a live runner.
    /// Returns how many tries were interrupted.
    pub(super) async fn take_back(
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
        let recovered = self
            .store
            .recover_request(holder, &rebuilt.interrupted, &rebuilt.suspended, Utc::now())
            .await;
        if let Err(err @ store::Error::TryBegan { .. }) = &recovered {
            tracing::info!(request_id, from = ?holder, why = %err, "request not recovered now: a try began while it was rebuilt; it is recovered again at the next round");
        }
        recovered?;
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
    pub(super) async fn took_back_begun(
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
        self.take_back_unrecorded(request_id, State::Pending)
            .await?;
        Ok(true)
    }

    /// Takes back a request in state `expected` (PENDING or SUSPENDED) that began on a
    /// Job Runner under a hand-over or resume that was never recorded (its answer or its
    /// record was lost): rebuilt from the store, stored as its suspended chain, at a new
    /// epoch that fences off whichever runner had it. Left as it is if it moved on.
    pub(super) async fn take_back_unrecorded(
        &self,
        request_id: &RequestId,
        expected: State,
    ) -> Result<(), Error> {
        let owner = self.store.owner(request_id).await?;
        if owner.state != expected {
            return Ok(());
        }
        let error = crate::recovery::unrecorded_error(owner.epoch);
        let holder = if expected == State::Pending {
            Holder::Unstarted(owner.epoch)
        } else {
            Holder::Unresumed(owner.epoch)
        };
        match self.take_back(request_id, holder, error).await {
            Ok(interrupted) => {
                tracing::warn!(
                    %request_id,
                    epoch = owner.epoch,
                    interrupted,
                    state = %expected,
                    "request had begun on a job runner under a hand-over that was never recorded; taken back, it is resumed on a live one"
                );
                Ok(())
            }
            // Handed over again or started meanwhile (another Request Manager).
            Err(Error::Fenced(_) | Error::Conflict(_)) => Ok(()),
            Err(err) => Err(err),
        }
    }
}
