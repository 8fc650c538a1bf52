//! What Job Runners report: try starts, job log entries, output, progress, a chain's
//! end and its suspension, each checked against the request's fence.

use super::*;

impl Manager {
    /// Refuses a report about `request_ids` from a runner that does not own each of them
    /// (no fence: a Job Runner that does not say, such as Spin Cycle's, is believed).
    pub(super) async fn check_fence<'a>(
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
        // The fence is checked in the insert's own transaction, the owners' rows locked.
        Ok(self.store.insert_try_starts(fence, &starts).await?)
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

    pub(super) fn log_finished(&self, request_id: &str, request: Result<Request, store::Error>) {
        let _request = tracing::info_span!("request", request_id).entered();
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
                    state = %request.state,
                    runtime,
                    finished_jobs = request.finished_jobs,
                    total_jobs = request.total_jobs,
                    "request finished"
                );
            }
            Err(err) => tracing::info!(error = %err, "request finished"),
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

    pub(super) async fn suspend_stored(
        &self,
        suspended: &SuspendedJobChain,
        fence: Option<&Fence>,
    ) -> Result<(), Error> {
        // Group-committed: a runner shutting down hands back every chain at once.
        match self
            .batcher
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
}
