//! The background round: offering PENDING requests to a Job Runner again, resuming
//! suspended chains, and removing finished requests past the retention.

use super::*;

/// How many times Job Runners may fail one suspended chain's resume (HTTP 500) before its
/// request fails with their answer.
pub(crate) const RESUME_FAULTS: u32 = 5;

/// Suspended chains claimed in one transaction and resumed at once (issue #51: after a
/// restart thousands wait; one at a time, each waited for the steps of the one before
/// it, and each claim and record was a transaction of its own).
const RESUME_BATCH: u32 = 64;

/// Batches of suspended chains resumed at once: while one batch waits on the network (a
/// claim, its reads, the runner, its group commit), the others go on.
const RESUME_WORKERS: usize = 4;

/// What a worker of [`Manager::resume_suspended`] does after one chain.
enum Resume {
    /// Claim the next.
    Next,
    /// This one waits (a lock, a backoff, taken back): released at the round's end.
    Wait(RequestId),
    /// No runner takes chains now: this worker stops for the round.
    Stop,
}

/// The resume faults of one suspended chain: how many, and when it is offered again.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResumeFaults {
    count: u32,
    not_before: std::time::Instant,
}

impl Manager {
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
                .hand_over(
                    &request_id,
                    &request,
                    job_chain.into(),
                    false,
                    locks::LockStep::Take(None),
                )
                .await
            {
                Ok(Handed::Done | Handed::Waiting) => {}
                // Another may run (or the same may later have) what this one lacks.
                Ok(Handed::Later(
                    ClientError::AlreadyRunning(_) | ClientError::MissingJobTypes(_),
                )) => {}
                Ok(Handed::Later(err)) => {
                    // The oldest says why it (and the rest) wait, once.
                    let why = err.why_waiting();
                    if request.error != why {
                        let _ = self.store.set_waiting(&request_id, &why).await;
                    }
                    return;
                }
                Err(_) => return,
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

    /// Resumes suspended chains on Job Runners ([`Self::resume_claimable`]), then
    /// releases abandoned claims and fails requests whose chains waited too long
    /// (storage.md §5).
    pub async fn resume_suspended(&self) {
        self.resume_claimable().await;
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

    /// Resumes the unclaimed suspended chains, [`RESUME_BATCH`] claimed at a time and
    /// resumed at once (their hand-overs and records group-committed), by
    /// [`RESUME_WORKERS`] workers that take turns to claim, until none is left or no
    /// runner takes one.
    pub(super) async fn resume_claimable(&self) {
        let host = &self.options.host;
        // Claimed here and waiting (for a lock, a backoff): released once every other is
        // tried.
        let waiting: Mutex<Vec<RequestId>> = Mutex::new(Vec::new());
        let stop = AtomicBool::new(false);
        // One claim at a time: a claim that finds none means none is left now (two of
        // one manager at once could each see the other's rows locked, and stop early).
        let claim_turn = tokio::sync::Mutex::new(());
        let worker = || async {
            while !self.shutting_down.load(Ordering::SeqCst) && !stop.load(Ordering::SeqCst) {
                let claimed = {
                    let _turn = claim_turn.lock().await;
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    self.store
                        .claim_suspended_many(host, Utc::now(), RESUME_BATCH)
                        .await
                };
                let claimed = match claimed {
                    // None left now; a worker still resuming claims again after its
                    // batch (a chain taken back in it is stored unclaimed).
                    Ok(claimed) if claimed.is_empty() => break,
                    Ok(claimed) => claimed,
                    Err(err) => {
                        tracing::warn!(error = %err, "claiming suspended chains failed");
                        stop.store(true, Ordering::SeqCst);
                        break;
                    }
                };
                // Their requests in one read, not one each; without their args, which
                // name their locks: where locks are declared, each is read alone.
                let ids: Vec<String> = claimed.iter().map(|c| c.request_id.clone()).collect();
                let read = if self.locks_declared() {
                    Ok(Vec::new())
                } else {
                    self.store.requests_among(&ids).await
                };
                let mut requests: HashMap<String, Request> = match read {
                    Ok(found) => found.into_iter().map(|r| (r.id.clone(), r)).collect(),
                    Err(err) => {
                        tracing::warn!(error = %err, "reading the claimed chains' requests failed; each is read alone");
                        HashMap::new()
                    }
                };
                let resumes = claimed.into_iter().map(|chain| {
                    let request = requests.remove(&chain.request_id);
                    self.resume_one(chain, request)
                });
                for resumed in futures_util::future::join_all(resumes).await {
                    match resumed {
                        Resume::Next => {}
                        Resume::Wait(request_id) => waiting
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(request_id),
                        Resume::Stop => stop.store(true, Ordering::SeqCst),
                    }
                }
            }
        };
        futures_util::future::join_all((0..RESUME_WORKERS).map(|_| worker())).await;
        let waiting = waiting.into_inner().unwrap_or_else(|p| p.into_inner());
        for request_id in waiting {
            let _ = self.store.unclaim(&request_id, host).await;
        }
    }

    /// Resumes one claimed chain.
    // Long because the chain goes through its hand-over's steps in order (read the
    // request, its locks, choose a runner, new epoch, send, record), and each step's
    // failure is answered there: release the claim, fail the request, or try later.
    async fn resume_one(
        &self,
        mut suspended: proto::SuspendedJobChain,
        request: Option<Request>,
    ) -> Resume {
        let host = &self.options.host;
        let request_id = RequestId::new(suspended.request_id.clone());
        let request = match request {
            Some(request) => Ok(request),
            None => self.store.get_request(&request_id, false).await,
        };
        let paused = request.as_ref().is_ok_and(|r| r.paused);
        let request = match request {
            Ok(request) if request.state == State::Suspended => request,
            _ => {
                // Resumed already, or gone on: only the chain is left to delete.
                let _ = self.store.resumed(&request_id, host, "", None).await;
                return Resume::Next;
            }
        };
        // A chain a runner failed waits out its backoff (claimed again next round).
        if self.resume_backs_off(&request_id) {
            return Resume::Wait(request_id);
        }
        // Its locks (a retried request's, released at its end; a recovered one
        // holds them still).
        match self.take_locks(&request, None).await {
            Ok(locks::Locked::Held) => {}
            Ok(locks::Locked::NotYet) => {
                return Resume::Wait(request_id);
            }
            Ok(locks::Locked::Moved) => return Resume::Next,
            Err(err) => {
                tracing::warn!(%request_id, error = %err, "taking the locks of a suspended chain failed; trying again later");
                return Resume::Wait(request_id);
            }
        }
        let target = self.targets(&suspended.job_chain).await;
        let mut tried = target.as_ref().ok().and_then(|urls| urls.first().cloned());
        let resumed = match target {
            // Group-committed: the chains of a batch take their epochs together.
            Ok(urls) => match self
                .batcher
                .hand_over(&request_id, State::Suspended, &suspended.total_job_tries)
                .await
            {
                // An earlier resume of it reached a runner that began it, its answer
                // or record lost: the stored chain does not know those tries. Taken
                // back (rebuilt, at a new epoch) and resumed as rebuilt.
                Err(err @ store::Error::TryBegan { .. }) => {
                    tracing::info!(%request_id, why = %err, "a suspended chain offered again had begun on a job runner; it is taken back");
                    if let Err(err) = self
                        .take_back_unrecorded(&request_id, State::Suspended)
                        .await
                    {
                        tracing::warn!(%request_id, error = %err.chain(), "taking back a suspended chain that had begun failed; trying again later");
                    }
                    // Released if not taken back (a rebuilt chain is stored unclaimed).
                    return Resume::Wait(request_id);
                }
                Ok(epoch) => {
                    let span = self.hand_over_span(&request_id);
                    let began = std::time::SystemTime::now();
                    let secrets = match self.chain_secrets(&request_id, &suspended.job_chain).await
                    {
                        Ok(secrets) => secrets,
                        Err(err) => {
                            tracing::error!(%request_id, error = %err, "opening the request's secret args failed; resuming without them");
                            job::Secrets::default()
                        }
                    };
                    let terms = HandOver {
                        epoch,
                        trace: span.as_ref().map(|s| s.context),
                        paused,
                        secrets,
                    };
                    self.fleets.keep(&suspended.job_chain);
                    if let Err(err) = self.with_answers(&mut suspended.job_chain).await {
                        tracing::warn!(%request_id, error = %err, "reading the request's approvals failed; resuming without them");
                    }
                    // The first that takes it; one that lacks its job types is
                    // passed over.
                    let mut handed = Err(ClientError::Unavailable("no job runner".to_owned()));
                    for url in &urls {
                        tried = Some(url.clone());
                        handed = self.jr.resume(url, &suspended, &terms).await;
                        if !matches!(handed, Err(ClientError::MissingJobTypes(_))) {
                            break;
                        }
                    }
                    let url = tried.clone().unwrap_or_default();
                    self.hand_over_ended(span, began, &url, epoch, &handed);
                    handed.map(|handed| (handed, epoch))
                }
                Err(err) => Err(ClientError::Unavailable(err.to_string())),
            },
            Err(err) => Err(err),
        };
        match resumed {
            Ok((HandedOver { url, instance }, epoch)) => {
                self.credentials_accepted(tried.as_deref().unwrap_or_default());
                self.resume_faults().remove(request_id.as_str());
                let owner = Fence { instance, epoch };
                match self
                    .batcher
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
            Err(err @ ClientError::Faulted(_)) => {
                // Sent again as it is, it fails again: offered a few more times,
                // each after a longer wait, then the request fails with the cause.
                let (faults, wait) = self.resume_faulted(&request_id);
                if faults >= RESUME_FAULTS {
                    self.resume_faults().remove(request_id.as_str());
                    tracing::error!(%request_id, error = %err, faults, "job runners failed the suspended chain's resume every time; request failed");
                    let reason = format!(
                        "its chain could not be resumed: job runners failed it {faults} times, the last: {err}"
                    );
                    match self
                        .store
                        .fail_suspended(&request_id, host, &reason, Utc::now())
                        .await
                    {
                        Ok(_) => self.ended(&request_id).await,
                        Err(err) => {
                            tracing::warn!(%request_id, error = %err, "failing the request failed");
                        }
                    }
                } else {
                    tracing::warn!(%request_id, error = %err, faults, retry_in = ?wait, "a job runner failed the suspended chain's resume; offered again later");
                    return Resume::Wait(request_id);
                }
            }
            Err(err @ ClientError::MissingJobTypes(_)) => {
                // Its job types are not deployed yet (a chain imported from Spin
                // Cycle, say): it stays SUSPENDED, never expires, and says why; the
                // claim is kept, so it is offered again once the claim is stale.
                tracing::warn!(%request_id, error = %err, "the suspended chain waits for a job runner with its job types");
                let why = err.why_waiting();
                if let Err(err) = self.store.set_waiting(&request_id, &why).await {
                    tracing::warn!(%request_id, error = %err, "recording why the chain waits failed");
                }
            }
            Err(err @ ClientError::Unauthorized(_)) => {
                // Logged once per runner; the chain waits, claimed again next round.
                self.log_refusal(tried.as_deref().unwrap_or_default(), &err);
                let _ = self.store.unclaim(&request_id, host).await;
                return Resume::Stop;
            }
            Err(err) => {
                if let Some(url) = &tried {
                    self.not_answered(url, &err);
                }
                self.forget_runners();
                tracing::warn!(%request_id, error = %err, "no job runner resumed the chain; trying again later");
                let _ = self.store.unclaim(&request_id, host).await;
                return Resume::Stop;
            }
        }
        Resume::Next
    }

    fn resume_faults(&self) -> std::sync::MutexGuard<'_, HashMap<String, ResumeFaults>> {
        self.resume_faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether a chain whose resume failed waits out its backoff still.
    fn resume_backs_off(&self, request_id: &RequestId) -> bool {
        self.resume_faults()
            .get(request_id.as_str())
            .is_some_and(|faults| std::time::Instant::now() < faults.not_before)
    }

    /// Counts a failed resume of a chain; how many so far, and how long it now waits:
    /// the round's interval, doubled at each fault.
    fn resume_faulted(&self, request_id: &RequestId) -> (u32, std::time::Duration) {
        let mut all = self.resume_faults();
        let faults = all.entry(request_id.to_string()).or_insert(ResumeFaults {
            count: 0,
            not_before: std::time::Instant::now(),
        });
        faults.count += 1;
        let wait = self.options.interval * 2u32.saturating_pow(faults.count.min(10));
        faults.not_before = std::time::Instant::now() + wait;
        (faults.count, wait)
    }

    /// Runs the background loops until `cancel` fires: the first round at once (a
    /// restarted Request Manager resumes what waits without delay), then every
    /// `interval`; and the schedules' runs when they fall due, not at the next round
    /// (the wait is at most an interval, so that reloaded specs' schedules are seen).
    /// The retention runs beside them, in a loop of its own ([`Manager::run_retention`]).
    pub async fn run_background(self: Arc<Self>, cancel: CancellationToken) {
        tokio::join!(
            Arc::clone(&self).run_rounds(cancel.clone()),
            self.run_retention(cancel)
        );
    }

    async fn run_rounds(self: Arc<Self>, cancel: CancellationToken) {
        let mut tick = tokio::time::interval(self.options.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // Without schedules, nothing to wake for but the round.
            let next_run = self.until_next_schedule();
            let schedule_due = async {
                match next_run {
                    Some(wait) => tokio::time::sleep(wait.min(self.options.interval)).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = tick.tick() => self.background_round().await,
                () = schedule_due => self.run_schedules().await,
                () = self.lock_released.notified() => self.offer_lock_waiters().await,
                () = self.runner_joined.notified() => self.resume_suspended().await,
            }
        }
    }

    /// One round of the background loop.
    pub async fn background_round(&self) {
        // Next months' partitions of the request tables (PostgreSQL, MySQL; nothing once known).
        if let Err(err) = self.store.prepare_partitions(Utc::now()).await {
            tracing::warn!(error = %err, "the request tables' month partitions could not be made");
        }
        self.recover_lost_runners().await;
        self.run_schedules().await;
        self.start_pending().await;
        // The heads of the locks' queues, whoever stored the ends that freed them.
        self.offer_lock_waiters().await;
        self.resume_suspended().await;
    }

    /// Whether a request was created here in the last second.
    fn creating(&self) -> bool {
        self.last_create
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some_and(|at| at.elapsed() < std::time::Duration::from_secs(1))
    }

    /// Retention rounds until `cancel` fires: at once, then every `interval`, each
    /// removing all that is past the retention ([`Manager::apply_retention`]). Apart from
    /// the background round, so that working off a backlog of millions (retention turned
    /// on over years of history) delays no resume, start or recovery (issue #51).
    pub async fn run_retention(self: Arc<Self>, cancel: CancellationToken) {
        if self.options.retention.is_none() {
            return;
        }
        let mut tick = tokio::time::interval(self.options.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = self.apply_retention() => {}
            }
        }
    }

    /// Removes finished requests older than the retention, a batch of
    /// [`RETENTION_BATCH`] a transaction, until none is left (or the Request Manager
    /// shuts down); says what it removed. Returns the number of requests removed.
    pub async fn apply_retention(&self) -> u64 {
        let Some(retention) = self.options.retention else {
            return 0;
        };
        let Ok(retention) = chrono::Duration::from_std(retention) else {
            return 0;
        };
        let before = Utc::now() - retention;
        let mut total = store::Removed::default();
        let started = std::time::Instant::now();
        while !self.shutting_down.load(Ordering::SeqCst) {
            let began = std::time::Instant::now();
            match self.store.remove_finished(before, RETENTION_BATCH).await {
                Ok(removed) => {
                    total.requests += removed.requests;
                    total.job_log_entries += removed.job_log_entries;
                    total.job_runners += removed.job_runners;
                    total.months += removed.months;
                    // A month dropped whole (PostgreSQL) may hold any number of requests.
                    if removed.requests < RETENTION_BATCH && removed.months == 0 {
                        break;
                    }
                    if self.creating() {
                        let took = began.elapsed();
                        tokio::time::sleep(took * (RETENTION_SHARE_WHILE_BUSY - 1)).await;
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
                months_dropped = total.months,
                finished_before = %before.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                seconds = started.elapsed().as_secs_f64(),
                "retention: removed finished requests and their job logs"
            );
        }
        total.requests
    }
}
