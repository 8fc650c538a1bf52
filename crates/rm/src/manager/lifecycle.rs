//! A request's life as callers drive it: create, start, stop, pause, retry, and the
//! answers to approvals.

use super::*;

/// A stop's refusal of a request on its way to a Job Runner.
const BEING_HANDED: &str =
    "expected state RUNNING: it is being handed to a Job Runner; try again in a moment";

/// Why `action` is refused for a request in `state`, in the words the action answers
/// with (`from`: a retry from a job, which takes a COMPLETE request too); `None` when
/// the state takes it. A stop takes a PENDING request too (it withdraws it). The bulk
/// actions' dry run judges by it as the actions do.
pub(crate) fn state_refusal(
    action: proto::BulkAction,
    request_id: &str,
    state: State,
    from: bool,
) -> Option<String> {
    use proto::BulkAction;
    let finished = state.is_finished();
    let expected = match action {
        BulkAction::Stop => match state {
            State::Pending | State::Running => return None,
            State::Suspended => {
                "expected state RUNNING: it is suspended and will be resumed by another Job Runner; stop it then"
            }
            _ if finished => "expected state RUNNING: it has finished",
            _ => BEING_HANDED,
        },
        BulkAction::Pause if finished => {
            "expected state PENDING, RUNNING or SUSPENDED: it has finished; there is nothing to pause"
        }
        BulkAction::Resume if finished => {
            "expected state PENDING, RUNNING or SUSPENDED: it has finished; use retry to run it again"
        }
        BulkAction::Pause | BulkAction::Resume => return None,
        BulkAction::Retry => match state {
            State::Fail | State::Stopped => return None,
            State::Complete if from => return None,
            State::Complete => {
                "expected FAIL or STOPPED: it completed; retry --from JOB or --elements runs a part of it again"
            }
            _ => "expected FAIL or STOPPED: it has not finished",
        },
    };
    Some(format!("request {request_id} in state {state}, {expected}"))
}

/// The pseudo-trigger idempotency keys are stored under, beside triggers' deliveries (a
/// trigger's name cannot hold `:`).
const IDEMPOTENCY_KEYS: &str = "api:idempotency-key";

/// Whether `request` is what a create of `request_type` with `args` makes: the same type
/// and the same given args (a secret arg, stored as its placeholder, matches any value).
fn same_create(request: &Request, request_type: &str, args: &proto::JobArgs) -> bool {
    let given: Vec<&proto::RequestArg> = request.args.iter().filter(|arg| arg.given).collect();
    request.request_type == request_type
        && given.len() == args.len()
        && given.iter().all(|arg| match args.get(&arg.name) {
            None => false,
            Some(_) if arg.secret => true,
            Some(value) => {
                value == &arg.value
                    || arg.value.as_str() == Some(job::secret_placeholder(&arg.name).as_str())
            }
        })
}

/// What a create did.
pub(crate) enum Created {
    /// Stored (and handed over, unless it waits for a lock).
    New(Box<Request>),
    /// Its delivery was sent before: nothing was stored; the request the first created.
    Duplicate(String),
}

/// A new chain of at least this many jobs has its expansions found on a thread of its
/// own while its JSON is made: each is a walk of every job (at 100,000 jobs about 0.3 s
/// and 0.15 s), and a big request's create waits for both. A smaller one's are made one
/// after the other (a thread costs more than they do).
const SIDE_BY_SIDE_FROM: usize = 2_000;

/// `chain`'s expansions ([`graph::elements::fleets`]) and its JSON, side by side when it
/// is big. A panic of either is this thread's.
fn fleets_and_json(
    chain: &JobChain,
) -> (
    Vec<graph::elements::Fleet>,
    Result<String, serde_json::Error>,
) {
    if chain.jobs.len() < SIDE_BY_SIDE_FROM {
        return (graph::elements::fleets(chain), serde_json::to_string(chain));
    }
    std::thread::scope(|scope| {
        let side = std::thread::Builder::new()
            .name("spindle-fleets".to_owned())
            .spawn_scoped(scope, || graph::elements::fleets(chain));
        let json = serde_json::to_string(chain);
        let fleets = match side {
            Ok(side) => side
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            // No thread to be had: one after the other.
            Err(_) => graph::elements::fleets(chain),
        };
        (fleets, json)
    })
}

impl Manager {
    /// Adds an event to a request's audit trail.
    pub async fn add_audit(
        &self,
        request_id: &str,
        event: &proto::AuditEvent,
    ) -> Result<(), Error> {
        Ok(self.store.add_audit(request_id, event).await?)
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
        match self
            .create_from(create_request, user, address, None)
            .await?
        {
            Created::New(request) => Ok(*request),
            Created::Duplicate(id) => Err(Error::Internal {
                message: format!("a create without a delivery was taken for one of request {id}"),
                source: None,
            }),
        }
    }

    /// [`Manager::create`], once per idempotency `key` (issue #48): the key is stored in
    /// the create's transaction, as a trigger's delivery is, so that a create sent again
    /// with it (its answer lost) answers the request the first created, `false` (not new);
    /// the same key with another request type or other args is refused (422), naming
    /// the first request. A key is kept as long as its request.
    pub async fn create_once(
        &self,
        create_request: CreateRequest,
        user: &str,
        address: &str,
        key: &str,
    ) -> Result<(Request, bool), Error> {
        if key.is_empty() || key.len() > 200 || key.chars().any(char::is_control) {
            return Err(Error::BadRequest(format!(
                "idempotency key {key:?}: expected 1 to 200 printable characters, the same for a create sent again"
            )));
        }
        let asked = (
            create_request.request_type.clone(),
            create_request.args.clone(),
        );
        let delivery = store::Delivery {
            trigger: IDEMPOTENCY_KEYS.to_owned(),
            id: key.to_owned(),
        };
        match self
            .create_from(create_request, user, address, Some(delivery))
            .await?
        {
            Created::New(request) => Ok((*request, true)),
            Created::Duplicate(first) => {
                let request = self.store.get_request(&first, false).await?;
                if same_create(&request, &asked.0, &asked.1) {
                    Ok((request, false))
                } else {
                    Err(Error::Unprocessable(format!(
                        "idempotency key {key:?} was used by request {first} (type {}) with other args; expected the same request type and args, or a new key",
                        request.request_type
                    )))
                }
            }
        }
    }

    /// [`Manager::create`], for `delivery` when a trigger's event asks for the request:
    /// the delivery is stored in the transaction that stores the request, and one sent
    /// before gets the request it created (nothing is stored or started).
    #[tracing::instrument(
        name = "request",
        skip_all,
        fields(request_id = tracing::field::Empty, request_type = %create_request.request_type)
    )]
    // Long because a create is one sequence whose steps share what the earlier ones
    // made: the backlog check, the args (secret ones taken out), the chain built off the
    // runtime, the locks' keys checked, one group-committed transaction (request, chain,
    // secrets, locks, delivery), then the first hand-over; each step's refusal is
    // answered where it happens, before anything is stored or after.
    pub(crate) async fn create_from(
        &self,
        mut create_request: CreateRequest,
        user: &str,
        address: &str,
        delivery: Option<store::Delivery>,
    ) -> Result<Created, Error> {
        self.check_open()?;
        // Past the backlog limit, refused before any work (issue #32).
        self.check_backlog().await?;
        let began = std::time::SystemTime::now();
        let Loaded {
            grapher, version, ..
        } = self.loaded();
        // Secret args leave the args here: the chain holds placeholders (issue #33).
        let secret_args = self.take_secret_args(&grapher, &mut create_request).await?;
        // Building a chain is CPU work that grows with the request, and a job's `create`
        // may run a program (shell-args waits for it): never on the async runtime's
        // threads, which serve every other request meanwhile.
        let (request_type, args) = (
            create_request.request_type.clone(),
            create_request.args.clone(),
        );
        // Its expansions are found there too (a walk of every job; kept for `ps` and the
        // elements' summaries, so that no read of the chain is needed for them), and its
        // JSON made (what the store keeps and a Job Runner is sent).
        let (created, fleets, chain_json) = tokio::task::spawn_blocking(move || {
            grapher.create(&request_type, &args).map(|created| {
                let (fleets, json) = fleets_and_json(&created.job_chain);
                (created, fleets, json)
            })
        })
        .await
        .map_err(|err| Error::Internal {
            message: "building the job chain failed".to_owned(),
            source: Some(Box::new(err)),
        })??;
        let chain_json = chain_json.map_err(|err| Error::Internal {
            message: "writing the job chain as JSON failed".to_owned(),
            source: Some(Box::new(err)),
        })?;
        let sealed = self.seal_secret_args(&created.request_id, &secret_args)?;
        drop(secret_args);
        // A key arg whose value cannot name a lock is refused before anything is stored.
        let claims = self.lock_claims(&create_request.request_type, &created.args, user)?;
        let priority = create_request
            .priority
            .unwrap_or_else(|| self.type_priority(&create_request.request_type));
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
            own_jobs: created.job_chain.own_jobs(),
            own_finished_jobs: 0,
            job_chain: Some(created.job_chain),
            jr_url: String::new(),
            error: String::new(),
            paused: false,
            spec_version: version,
            elements: Vec::new(),
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
        // Its locks are taken in the same transaction (issue #34).
        let (request, locked, chain_json) = {
            let new = store::NewRequest {
                request,
                create_request: stored,
                created: Some(created),
                locks: claims.iter().map(|c| c.claim.clone()).collect(),
                priority,
                locked: None,
                delivery,
                duplicate_of: None,
                secrets: sealed,
                chain_json: Some(Arc::from(chain_json)),
            };
            // Moved to the batcher and back, not copied.
            let stored = self.batcher.create_request(new).await?;
            if let Some(first) = stored.duplicate_of {
                return Ok(Created::Duplicate(first));
            }
            (stored.request, stored.locked, stored.chain_json)
        };
        self.created_one();
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
        tracing::Span::current().record("request_id", tracing::field::display(&request.id));
        tracing::info!(user, jobs = request.total_jobs, "request created");
        let mut request = request;
        let job_chain = request.job_chain.take().expect("set above");
        self.fleets.put(&request.id, Arc::new(fleets));
        let request_id = RequestId::new(request.id.clone());
        // From here on the request is stored, so created: a database gone away now is
        // said in the log, not to the caller (told 503, it would send the create again
        // and the work would run twice); the request stays as stored, its locks queued,
        // and the background loop goes on from there.
        let held = match locked {
            None => locks::Locked::Held,
            Some(taken) => match self.locks_taken(&request, &claims, taken).await {
                Ok(held) => held,
                Err(err @ Error::Unavailable { .. }) => {
                    tracing::warn!(
                        request_id = %request.id,
                        error = %err.chain(),
                        "the request is stored but its locks' step did not end; it stays PENDING and is taken up again"
                    );
                    return Ok(Created::New(Box::new(request)));
                }
                Err(err) => return Err(err),
            },
        };
        if let locks::Locked::Held = held {
            let handed = self
                .send_to_jr(
                    &request_id,
                    &request,
                    NewChain {
                        chain: job_chain,
                        json: chain_json,
                    },
                    true,
                    locks::LockStep::Held,
                )
                .await;
            match handed {
                // Stored, so created: a caller told 503 would send the create again
                // and start the work twice. It stays PENDING, offered again by the
                // background loop, as when no Job Runner answers.
                Err(err @ Error::Unavailable { .. }) => tracing::warn!(
                    request_id = %request.id,
                    error = %err.chain(),
                    "the request is stored but was not handed to a job runner; it stays PENDING and is offered again"
                ),
                other => other?,
            }
        } else {
            // Waiting for a lock (or failed for one) says so in the answer, when the
            // database answers.
            match self.store.get_request(&request_id, false).await {
                Ok(stored) => {
                    request.state = stored.state;
                    request.error = stored.error;
                    request.finished_at = stored.finished_at;
                }
                Err(err) => tracing::warn!(
                    request_id = %request.id,
                    error = %Error::from(err).chain(),
                    "the request is stored, waiting for a lock; its state could not be read again for the answer"
                ),
            }
        }
        Ok(Created::New(Box::new(request)))
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
        self.send_to_jr(
            request_id,
            &request,
            job_chain.into(),
            false,
            locks::LockStep::Take(None),
        )
        .await
    }

    /// Stops a RUNNING request; returns once its Job Runner stopped it.
    pub async fn stop(&self, request_id: &RequestId) -> Result<(), Error> {
        self.progress.forget(request_id);
        let mut request = self.store.get_request(request_id, false).await?;
        // One that has not started (waiting for a lock, or for a runner) is withdrawn:
        // STOPPED at once, which leaves its locks' queues.
        if request.state == State::Pending {
            match self.store.stop_pending(request_id, Utc::now()).await {
                Ok(()) => {
                    tracing::info!(%request_id, "request stopped before it started");
                    self.ended(request_id).await;
                    return Ok(());
                }
                // Started meanwhile: stopped on its runner below.
                Err(store::Error::State { .. }) => {
                    request = self.store.get_request(request_id, false).await?;
                }
                Err(err) => return Err(err.into()),
            }
        }
        if request.state != State::Running {
            // Still PENDING after its withdrawal found it moved on: on its way to a runner.
            let refusal = state_refusal(proto::BulkAction::Stop, request_id, request.state, false)
                .unwrap_or_else(|| {
                    format!(
                        "request {request_id} in state {}, {BEING_HANDED}",
                        request.state
                    )
                });
            return Err(Error::Conflict(refusal));
        }
        self.jr
            .stop(&request.jr_url, request_id)
            .await
            .map_err(|err| match err {
                ClientError::NotFound(_) => Error::Conflict(format!(
                    "request {request_id} is not running on its Job Runner {} any more",
                    request.jr_url
                )),
                ClientError::Unavailable(_) | ClientError::Faulted(_) => Error::Unavailable {
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
                let action = if paused {
                    proto::BulkAction::Pause
                } else {
                    proto::BulkAction::Resume
                };
                // The store refuses only a finished request.
                let refusal = state_refusal(action, request_id, actual, false).unwrap_or_else(|| {
                    format!("request {request_id} in state {actual}, expected state PENDING, RUNNING or SUSPENDED")
                });
                return Err(Error::Conflict(refusal));
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
    pub async fn retry(&self, request_id: &RequestId, what: &Retry) -> Result<(), Error> {
        self.check_open()?;
        self.progress.forget(request_id);
        let request = self.store.get_request(request_id, false).await?;
        let from = what.from.as_deref();
        if let Some(refusal) = state_refusal(
            proto::BulkAction::Retry,
            request_id,
            request.state,
            from.is_some() || what.elements.is_some(),
        ) {
            // A request that waits (for a runner with its job types, or one that can read
            // its jobs' bytes) says why: retrying it would not change that.
            if !request.state.is_finished() && !request.error.is_empty() {
                return Err(Error::Conflict(format!("{refusal}; it {}", request.error)));
            }
            return Err(Error::Conflict(refusal));
        }
        let chain = self.store.job_chain(request_id).await?;
        let mut reset = match from {
            Some(job) => crate::recovery::from_job(&chain, job).map_err(Error::BadRequest)?,
            None => Default::default(),
        };
        if let Some(picked) = &what.elements {
            reset.extend(self.elements_to_retry(request_id, picked).await?);
        }
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
        tracing::info!(%request_id, from, elements = ?what.elements, jobs_to_run = suspended.job_chain.jobs.len() as u64 - suspended.job_chain.finished_jobs, "request retried");
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
            None => {
                let open: Vec<&proto::Job> = approvals
                    .iter()
                    .copied()
                    .filter(|j| !matches!(j.state, State::Complete | State::Fail))
                    .collect();
                // Of several (a rollout's approval before each wave), the ones that can
                // wait now: every job before them complete.
                let reached: Vec<&proto::Job> = open
                    .iter()
                    .copied()
                    .filter(|j| {
                        chain.adjacency_list.iter().all(|(from, to)| {
                            !to.contains(&j.id)
                                || chain
                                    .jobs
                                    .get(from)
                                    .is_some_and(|pred| pred.state == State::Complete)
                        })
                    })
                    .collect();
                // The job log of the job before an approval may not be written yet
                // when the approval already runs: the runner's own account of what
                // runs now is asked first.
                let running: Vec<String> = if open.len() > 1 {
                    self.running_jobs(&request)
                        .await
                        .into_iter()
                        .map(|status| status.job_id)
                        .collect()
                } else {
                    Vec::new()
                };
                let live: Vec<&proto::Job> = open
                    .iter()
                    .copied()
                    .filter(|j| running.contains(&j.id))
                    .collect();
                if open.len() > 1 && !live.is_empty() {
                    live
                } else if open.len() > 1 && !reached.is_empty() {
                    reached
                } else {
                    open
                }
            }
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
    pub(super) async fn with_answers(&self, chain: &mut JobChain) -> Result<(), Error> {
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
}
