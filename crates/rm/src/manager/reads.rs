//! Reading requests: one, a search, job logs, output, and what runs now.

use futures_util::StreamExt;

use super::*;

/// Requests whose own jobs and elements `running` reads at once.
const RUNNING_READS_AT_ONCE: usize = 16;

impl Manager {
    /// A request with its args, and its chain only when asked: a big request's chain is
    /// megabytes, and callers polling its state do not want it read back every time.
    pub async fn get(&self, request_id: &str, with_chain: bool) -> Result<Request, Error> {
        Ok(self.store.get_request(request_id, with_chain).await?)
    }

    pub(super) async fn with_chain(
        &self,
        request: Request,
        with_chain: bool,
    ) -> Result<Request, Error> {
        if !with_chain {
            return Ok(request);
        }
        let job_chain = Some(self.store.job_chain(&request.id).await?);
        Ok(Request {
            job_chain,
            ..request
        })
    }

    /// The latest state and try count of each job that has a job log entry.
    pub async fn job_states(&self, request_id: &str) -> Result<Vec<store::JobState>, Error> {
        Ok(self.store.job_states(request_id).await?)
    }

    /// The tries that started and have not ended, as runners recorded them.
    pub async fn try_starts(&self, request_id: &str) -> Result<Vec<store::StartedTry>, Error> {
        Ok(self.store.try_starts(request_id).await?)
    }

    /// How many requests are in each of `states`; with `at_most`, a count stops past it
    /// (`at_most + 1` means more).
    pub async fn count_requests(
        &self,
        states: &[State],
        at_most: Option<u64>,
    ) -> Result<Vec<(State, u64)>, Error> {
        Ok(self.store.count_requests(states, at_most).await?)
    }

    /// A request's audit trail (404 for an unknown request, not an empty trail).
    pub async fn audit(&self, request_id: &str) -> Result<Vec<proto::AuditEvent>, Error> {
        self.store.get_request(request_id, false).await?;
        Ok(self.store.audit(request_id).await?)
    }

    pub async fn job_chain(&self, request_id: &str) -> Result<JobChain, Error> {
        Ok(self.store.job_chain(request_id).await?)
    }

    /// The chain as created, its stored JSON: for a reader of part of a big chain.
    pub async fn job_chain_json(&self, request_id: &str) -> Result<String, Error> {
        Ok(self.store.job_chain_json(request_id).await?)
    }

    pub async fn find(&self, filter: &RequestFilter) -> Result<Vec<Request>, Error> {
        Ok(self.store.find_requests(filter).await?)
    }

    /// [`Self::count_own_finished`] of many requests, the job states of those that need
    /// them read together (a page of `find`, `spindle ps` of thousands).
    pub async fn count_own_finished_among(&self, requests: &mut [Request]) -> Result<(), Error> {
        let states = self.states_of_partly_finished(requests).await?;
        count_own_finished_from(requests, &states);
        Ok(())
    }

    /// Fills in how many of the request's own jobs (not the grapher's wrappers) are
    /// complete: none before any job finished, all once every job did, else counted from
    /// the job log (each job's latest try). What people are shown; `finishedJobs` stays
    /// Spin Cycle's count.
    pub async fn count_own_finished(&self, request: &mut Request) -> Result<(), Error> {
        request.own_finished_jobs = if request.own_jobs == 0
            || request.finished_jobs == 0
            || request.finished_jobs >= request.total_jobs
        {
            own_finished_without_states(request)
        } else {
            own_complete(&self.store.job_states(&request.id).await?)
        };
        Ok(())
    }

    /// Every try of one job, oldest first.
    pub async fn job_tries_log(
        &self,
        request_id: &str,
        job_id: &str,
    ) -> Result<Vec<JobLog>, Error> {
        Ok(self.store.job_tries_log(request_id, job_id).await?)
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

    /// Running jobs across the Job Runners of RUNNING requests, oldest first, with their
    /// requests. A Job Runner that does not answer is left out.
    pub async fn running(&self, request_id: Option<&RequestId>) -> Result<RunningStatus, Error> {
        let began = std::time::Instant::now();
        let urls = self.store.running_jr_urls().await?;
        // Every runner at once (each lists thousands), and meanwhile, unless one request
        // is asked for, the RUNNING requests (one statement) with their job states: the
        // requests of nearly all the jobs the runners list.
        let listing = futures_util::future::join_all(
            urls.iter()
                .filter(|jr_url| !jr_url.is_empty())
                .map(|jr_url| async move { (jr_url, self.jr.running(jr_url, request_id).await) }),
        );
        let reading = async {
            if request_id.is_some() {
                return Ok((Vec::new(), HashMap::new()));
            }
            let filter = RequestFilter {
                states: vec![State::Running],
                ..RequestFilter::default()
            };
            let found = self.store.find_requests(&filter).await?;
            let states = uncounted_if_unread(self.states_of_partly_finished(&found).await);
            Ok::<_, Error>((found, states))
        };
        let (answers, read) = tokio::join!(listing, reading);
        let (mut found, mut states) = read?;
        let mut jobs = Vec::new();
        for (jr_url, answer) in answers {
            match answer {
                Ok(found) => jobs.extend(found),
                Err(err) => {
                    tracing::warn!(jr_url, error = %err, "job runner did not report its running jobs")
                }
            }
        }
        jobs.sort_by_key(|job| job.started_at);
        let listed = began.elapsed();
        // The jobs' requests: those read, and any other (not RUNNING when read, or the
        // one asked for) read now, a few hundred a statement.
        let ids: BTreeSet<&str> = jobs.iter().map(|job| job.request_id.as_str()).collect();
        found.retain(|request| ids.contains(request.id.as_str()));
        let others: Vec<String> = {
            let read: HashSet<&str> = found.iter().map(|request| request.id.as_str()).collect();
            ids.iter()
                .filter(|id| !read.contains(*id))
                .map(|id| (*id).to_owned())
                .collect()
        };
        if !others.is_empty() {
            let more = self.store.requests_among(&others).await?;
            states.extend(uncounted_if_unread(
                self.states_of_partly_finished(&more).await,
            ));
            found.extend(more);
        }
        count_own_finished_from(&mut found, &states);
        let filled = found.into_iter().map(|mut request| {
            // The job states read for the count sum up its elements too.
            let read = states.remove(&request.id);
            async move {
                if let Err(err) = self.summarize_elements_with(&mut request, read).await {
                    tracing::warn!(request_id = %request.id, error = %err, "elements not summed up");
                }
                (request.id.clone(), request)
            }
        });
        let requests = futures_util::stream::iter(filled)
            .buffer_unordered(RUNNING_READS_AT_ONCE)
            .collect()
            .await;
        tracing::debug!(
            jobs = jobs.len(),
            listed_and_read_ms = listed.as_millis(),
            others_read = others.len(),
            rest_ms = (began.elapsed() - listed).as_millis(),
            "running jobs listed"
        );
        Ok(RunningStatus { jobs, requests })
    }

    /// The job states of those of `requests` whose own finished jobs are counted from
    /// them.
    async fn states_of_partly_finished(
        &self,
        requests: &[Request],
    ) -> Result<HashMap<String, Vec<store::JobState>>, Error> {
        let ids: Vec<String> = requests
            .iter()
            .filter(|r| partly_finished(r))
            .map(|r| r.id.clone())
            .collect();
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        Ok(self.store.job_states_among(&ids).await?)
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
}

/// Job states read for `spindle ps`, or none (logged): its requests are listed anyway,
/// their own finished jobs not counted.
fn uncounted_if_unread(
    read: Result<HashMap<String, Vec<store::JobState>>, Error>,
) -> HashMap<String, Vec<store::JobState>> {
    read.unwrap_or_else(|err| {
        tracing::warn!(error = %err, "own jobs of running requests not counted");
        HashMap::new()
    })
}

/// Whether a request's own finished jobs are counted from its job states: some of its
/// jobs finished, not all.
pub(super) fn partly_finished(request: &Request) -> bool {
    request.own_jobs > 0 && request.finished_jobs > 0 && request.finished_jobs < request.total_jobs
}

/// Fills in each request's own finished jobs, from `states` (job states by request id)
/// for those [`partly_finished`] (none found: none counted).
fn count_own_finished_from(
    requests: &mut [Request],
    states: &HashMap<String, Vec<store::JobState>>,
) {
    for request in requests {
        request.own_finished_jobs = if partly_finished(request) {
            states
                .get(&request.id)
                .map_or(0, |states| own_complete(states))
        } else {
            own_finished_without_states(request)
        };
    }
}

/// A request's own finished jobs when its job states are not needed: none before any
/// finished, all once every one did.
pub(super) fn own_finished_without_states(request: &Request) -> u64 {
    if request.own_jobs > 0
        && request.finished_jobs > 0
        && request.finished_jobs >= request.total_jobs
    {
        request.own_jobs
    } else {
        0
    }
}

/// The completed jobs among `states` that are not the grapher's wrappers.
pub(super) fn own_complete(states: &[store::JobState]) -> u64 {
    states
        .iter()
        .filter(|job| !job.wrapper && job.state == State::Complete)
        .count() as u64
}
