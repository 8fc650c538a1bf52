//! Handing a request's chain to a Job Runner: choosing one, sending it, recording the
//! hand-over (its epoch) and what to do when no runner takes it.

use super::*;

/// The job types of a chain's jobs.
pub(super) fn chain_types(chain: &JobChain) -> BTreeSet<&str> {
    chain
        .jobs
        .values()
        .map(|job| job.job_type.as_str())
        .collect()
}

/// The first `each:` node of a chain with a failure budget (`max_failures:`), which only
/// Spindle's traverser keeps: Spin Cycle's runners ignore the jobs' `elements` and would
/// fail the request at its first failed element.
pub(super) fn budgeted_node(chain: &JobChain) -> Option<&str> {
    chain
        .jobs
        .values()
        .filter_map(|job| job.elements.as_deref())
        .filter(|elements| elements.max_failures.is_some())
        .map(|elements| elements.node.as_str())
        .min()
}

impl Manager {
    /// Where a chain of these job types may go, best first: the fixed `jr_url`; else the
    /// config's fixed runners that have the types and the live registered runners, by the
    /// fewest running requests (counting those handed to each since the list was read;
    /// a fixed runner counts only those). A runner that refuses the chain for its job
    /// types (HTTP 422) is passed over for the next. A fixed runner that lists its types
    /// is Spin Cycle's: it is not given a chain with a failure budget.
    pub(super) async fn targets(&self, chain: &JobChain) -> Result<Vec<String>, ClientError> {
        let types = &chain_types(chain);
        let budgeted = budgeted_node(chain);
        if let Some(url) = &self.options.jr_url {
            return Ok(vec![url.clone()]);
        }
        if !self.runners_fresh() {
            let _reading = self.runners_read.lock().await;
            // Another hand-over may have read them while this one waited.
            if !self.runners_fresh() {
                self.read_runners().await?;
            }
        }
        let mut cached = self.runners.lock().unwrap_or_else(|p| p.into_inner());
        let Some((_, live)) = cached.as_mut() else {
            return Err(ClientError::Unavailable(
                "no live job runner is registered".to_owned(),
            ));
        };
        let fixed = &self.options.fixed_runners;
        let mut fit: Vec<&mut JobRunner> = live
            .iter_mut()
            .filter(|runner| {
                !runner.instance_id.is_empty()
                    || fixed.iter().any(|f| {
                        f.url == runner.url
                            && f.has(types)
                            && (budgeted.is_none() || f.types.is_none())
                    })
            })
            .collect();
        if fit.is_empty() {
            let spin_cycles_fit = fixed.iter().any(|f| f.has(types));
            return Err(if live.is_empty() {
                ClientError::Unavailable("no live job runner is registered".to_owned())
            } else if let Some(node) = budgeted.filter(|_| spin_cycles_fit) {
                ClientError::MissingJobTypes(format!(
                    "its node {node} has a failure budget (max_failures:), {}: the fixed runners (`runners:` in the config) are Spin Cycle's, and no Spindle Job Runner is registered",
                    crate::jr_client::ONLY_SPINDLE_KEEPS
                ))
            } else {
                ClientError::MissingJobTypes(format!(
                    "no live job runner has all of its job types ({}): the fixed runners (`runners:` in the config) do not list them, and no Spindle Job Runner is registered",
                    types.iter().copied().collect::<Vec<_>>().join(", ")
                ))
            });
        }
        // Those that did not answer lately go last.
        let now = tokio::time::Instant::now();
        let unanswered = {
            let mut marked = self.unanswered.lock().unwrap_or_else(|p| p.into_inner());
            marked.retain(|_, until| *until > now);
            marked.clone()
        };
        fit.sort_by_key(|runner| {
            (
                unanswered.contains_key(&runner.url),
                runner.running_requests,
            )
        });
        fit[0].running_requests += 1;
        Ok(fit.into_iter().map(|runner| runner.url.clone()).collect())
    }

    /// A Job Runner that did not answer a hand-over (`err`): offered chains last for a
    /// lease's length, or until it is lost.
    pub(super) fn not_answered(&self, url: &str, err: &ClientError) {
        if matches!(err, ClientError::Unavailable(_)) {
            self.unanswered
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(
                    url.to_owned(),
                    tokio::time::Instant::now() + self.options.lease,
                );
        }
    }

    /// Whether the list of live runners was read within [`RUNNERS_CACHE`].
    fn runners_fresh(&self) -> bool {
        self.runners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|(read, _)| read.elapsed() < RUNNERS_CACHE)
    }

    /// Reads the live registered runners and the config's fixed ones into the list. One
    /// forgotten while it was read is kept as already stale (for this hand-over only).
    async fn read_runners(&self) -> Result<(), ClientError> {
        let forgotten = self.runners_forgotten.load(Ordering::SeqCst);
        let now = Utc::now();
        let mut live: Vec<JobRunner> = self
            .store
            .job_runners(now, now)
            .await
            .map_err(|err| ClientError::Unavailable(format!("reading the job runners: {err}")))?
            .into_iter()
            .filter(|runner| runner.state == RunnerState::Live)
            .collect();
        // The fixed ones by their URL (no instance: they never register).
        live.extend(self.options.fixed_runners.iter().map(|fixed| JobRunner {
            url: fixed.url.clone(),
            ..JobRunner::default()
        }));
        let read = tokio::time::Instant::now();
        let read = if self.runners_forgotten.load(Ordering::SeqCst) == forgotten {
            read
        } else {
            read.checked_sub(RUNNERS_CACHE).unwrap_or(read)
        };
        *self.runners.lock().unwrap_or_else(|p| p.into_inner()) = Some((read, live));
        Ok(())
    }

    /// Forgets the list of live runners (one registered, ended or was lost).
    pub(super) fn forget_runners(&self) {
        self.runners_forgotten.fetch_add(1, Ordering::SeqCst);
        *self.runners.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Hands a PENDING request's chain to a Job Runner as a new hand-over (its epoch) and
    /// marks it RUNNING there. The first hand-over of a new request has the epoch it was
    /// stored with (1); later ones (offered again) take a new one.
    // Long because a hand-over is one sequence of steps that each may end it: take back a
    // chain that began, take its locks, choose the runners, take a new epoch, send it
    // (passing over runners that lack its types), and answer each way the runner
    // answered (running, stopped meanwhile, later, credentials refused, types missing,
    // refused).
    #[tracing::instrument(name = "hand_over", skip_all, fields(request_id = %request_id))]
    pub(super) async fn hand_over(
        &self,
        request_id: &RequestId,
        request: &Request,
        new_chain: NewChain,
        first: bool,
        locks: locks::LockStep,
    ) -> Result<Handed, Error> {
        let NewChain {
            chain: mut job_chain,
            mut json,
        } = new_chain;
        let paused = request.paused;
        if !first && self.took_back_begun(request_id, &job_chain).await? {
            return Ok(Handed::Done);
        }
        // Its locks first (issue #34): nothing of it runs before it holds them all.
        if let locks::LockStep::Take(priority) = locks {
            match self.take_locks(request, priority).await? {
                locks::Locked::Held => {}
                locks::Locked::NotYet => return Ok(Handed::Waiting),
                locks::Locked::Moved => return Ok(Handed::Done),
            }
        }
        let urls = match self.targets(&job_chain).await {
            Ok(urls) => urls,
            Err(err) => {
                // No runner has its types: said, as a runner's refusal would be.
                if matches!(err, ClientError::MissingJobTypes(_))
                    && let Err(err) = self.store.set_waiting(request_id, &err.why_waiting()).await
                {
                    tracing::warn!(%request_id, error = %err, "storing why the request waits failed");
                }
                return Ok(Handed::Later(err));
            }
        };
        let epoch = if first {
            1
        } else {
            match self
                .store
                .hand_over(request_id, State::Pending, &BTreeMap::new())
                .await
            {
                Ok(epoch) => epoch,
                // Started or finished meanwhile (another loop, a fast chain).
                Err(store::Error::State { .. }) => return Ok(Handed::Done),
                // A runner it was handed to before began it meanwhile (that hand-over's
                // answer was lost): taken back and resumed, not sent out as new.
                Err(err @ store::Error::TryBegan { .. }) => {
                    tracing::info!(%request_id, why = %err, "a request offered again had begun on a job runner; it is taken back");
                    self.take_back_unrecorded(request_id, State::Pending)
                        .await?;
                    return Ok(Handed::Done);
                }
                Err(err) => return Err(err.into()),
            }
        };
        let span = self.hand_over_span(request_id);
        let began = std::time::SystemTime::now();
        let terms = HandOver {
            epoch,
            trace: span.as_ref().map(|s| s.context),
            paused,
            secrets: self.chain_secrets(request_id, &job_chain).await?,
        };
        // Approvals answered meanwhile (an earlier hand-over began the chain) are in it.
        if !first {
            self.with_answers(&mut job_chain).await?;
            // Changed: its JSON is made again.
            json = None;
        }
        let new_chain = NewChain {
            chain: job_chain,
            json,
        };
        let (url, handed) = self
            .send_new_chain(request_id, &urls, new_chain, first, &terms)
            .await?;
        self.hand_over_ended(span, began, &url, epoch, &handed);
        if handed.is_ok() {
            self.credentials_accepted(&url);
        }
        match handed {
            Ok(HandedOver { url, instance }) => {
                tracing::info!(
                    jr_url = url,
                    instance,
                    epoch,
                    "request handed to a job runner"
                );
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
                    // Stopped while it was being handed over (withdrawn from a lock's
                    // queue as its lock was granted): its runner stops the chain.
                    Err(store::Error::State {
                        actual: State::Stopped,
                        ..
                    }) => {
                        if let Err(err) = self.jr.stop(&url, request_id).await {
                            tracing::warn!(%request_id, jr_url = url, error = %err, "stopping a chain handed over as its request was stopped failed");
                        }
                        Ok(Handed::Done)
                    }
                    // The chain may have finished (or been started by another loop) already.
                    Err(store::Error::State { .. } | store::Error::Fenced(_)) => Ok(Handed::Done),
                    Err(err) => Err(err.into()),
                }
            }
            // A new chain a runner failed (HTTP 500) is offered again, as when none answers.
            Err(
                err @ (ClientError::Unavailable(_)
                | ClientError::AlreadyRunning(_)
                | ClientError::Faulted(_)),
            ) => {
                self.not_answered(&url, &err);
                self.forget_runners();
                Ok(Handed::Later(err))
            }
            Err(err @ ClientError::Unauthorized(_)) => {
                self.credentials_refused(request_id, &url, &err).await;
                Ok(Handed::Later(err))
            }
            Err(err @ ClientError::MissingJobTypes(_)) => {
                // Not the request's fault: its job types are not deployed on that
                // runner. It stays PENDING, says why, and is offered again each round.
                tracing::debug!(%request_id, jr_url = url, error = %err, "the job runner lacks job types of the request");
                let why = err.why_waiting();
                if let Err(err) = self.store.set_waiting(request_id, &why).await {
                    tracing::warn!(%request_id, error = %err, "storing why the request waits failed");
                }
                Ok(Handed::Later(err))
            }
            Err(err) => Ok(Handed::Refused(err)),
        }
    }

    /// Sends a new chain to the first of `urls` that takes it, and says which was asked
    /// last and what it answered. One that lacks the chain's job types (422) is passed
    /// over — nothing of the chain ran there — and the next is given the chain as stored
    /// (with the approvals answered meanwhile, unless `first`).
    async fn send_new_chain(
        &self,
        request_id: &RequestId,
        urls: &[String],
        new_chain: NewChain,
        first: bool,
        terms: &HandOver,
    ) -> Result<(String, Result<HandedOver, ClientError>), Error> {
        let mut handed = Err(ClientError::Unavailable("no job runner".to_owned()));
        let mut url = String::new();
        let mut chain = Some(new_chain);
        for candidate in urls {
            let job_chain = match chain.take() {
                Some(new_chain) => new_chain,
                None => {
                    let mut job_chain = self.store.job_chain(request_id).await?;
                    if !first {
                        self.with_answers(&mut job_chain).await?;
                    }
                    job_chain.into()
                }
            };
            url.clone_from(candidate);
            handed = self.jr.new_chain(&url, job_chain, terms).await;
            if !matches!(handed, Err(ClientError::MissingJobTypes(_))) {
                break;
            }
        }
        Ok((url, handed))
    }

    /// A Job Runner refused this Request Manager's credentials: a misconfiguration, not
    /// the request's fault. The request stays PENDING (offered again at every round) with
    /// the reason stored as why it waits; the refusal is logged once per runner.
    pub(super) async fn credentials_refused(
        &self,
        request_id: &RequestId,
        url: &str,
        err: &ClientError,
    ) {
        self.log_refusal(url, err);
        let why = format!(
            "waiting for a job runner: {url} refused this Request Manager's credentials ({err}); give the Request Manager a token or client certificate the runner accepts (`token:` or `client_cert:` in its config)"
        );
        if let Err(err) = self.store.set_waiting(request_id, &why).await {
            tracing::warn!(%request_id, error = %err, "storing why the request waits failed");
        }
    }

    /// Logs a runner's refusal of this Request Manager's credentials, once until the
    /// runner takes a chain again.
    pub(super) fn log_refusal(&self, url: &str, err: &ClientError) {
        let first = self
            .refused_by
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(url.to_owned());
        if first {
            tracing::error!(jr_url = url, error = %err, "a job runner refused this Request Manager's credentials; requests stay PENDING until it accepts them");
        }
    }

    /// A Job Runner took a chain: a refusal of its credentials is logged again.
    pub(super) fn credentials_accepted(&self, url: &str) {
        let mut refused = self.refused_by.lock().unwrap_or_else(|p| p.into_inner());
        if !refused.is_empty() {
            refused.remove(url);
        }
    }

    /// A request paused (or resumed) while it was being handed over: its runner got the
    /// chain as it was before, and is told now.
    pub(super) async fn catch_up_pause(
        &self,
        request_id: &RequestId,
        url: &str,
        sent: bool,
        now: bool,
    ) {
        if sent == now {
            return;
        }
        if let Err(err) = self.jr.pause(url, request_id, now).await {
            tracing::warn!(%request_id, jr_url = url, paused = now, error = %err, "telling the job runner of a pause during the hand-over failed");
        }
    }

    /// The span of a hand-over about to be made, when traces are on: a child of the
    /// request's root, sent to the runner as its chain span's parent.
    pub(super) fn hand_over_span(&self, request_id: &str) -> Option<Span> {
        self.options.telemetry.traces.as_ref()?;
        let root = traces::request_root(request_id);
        let mut span = Span::new("hand over", root.child(), Some(root.span_id))
            .attr("spindle.request_id", request_id.to_owned());
        span.kind = traces::Kind::Client;
        Some(span)
    }

    pub(super) fn hand_over_ended(
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
    pub(super) async fn send_to_jr(
        &self,
        request_id: &RequestId,
        request: &Request,
        job_chain: NewChain,
        first: bool,
        locks: locks::LockStep,
    ) -> Result<(), Error> {
        match self
            .hand_over(request_id, request, job_chain, first, locks)
            .await?
        {
            Handed::Done | Handed::Waiting => Ok(()),
            // Logged once per runner where it was refused.
            Handed::Later(ClientError::Unauthorized(_)) => Ok(()),
            Handed::Later(err @ ClientError::MissingJobTypes(_)) => {
                tracing::warn!(%request_id, error = %err, "the job runner lacks job types of the request; it stays PENDING and is offered again");
                Ok(())
            }
            Handed::Later(err) => {
                tracing::warn!(%request_id, error = %err, "no job runner took the request; it stays PENDING and is offered again");
                // Said by `status`, `info` and the UI (no runner registered at all, say).
                if let Err(err) = self.store.set_waiting(request_id, &err.why_waiting()).await {
                    tracing::warn!(%request_id, error = %err, "storing why the request waits failed");
                }
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
}
