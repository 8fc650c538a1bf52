//! What tests of the Request Manager (this crate's, and the web UI's) run it with: a
//! Job Runner client that records what it is asked and answers as told, and a runner's
//! report of a chain's end.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU16, Ordering};

use proto::{JobChain, JobStatus, RequestId, State, SuspendedJobChain};

use crate::{ClientError, HandedOver, JrClient, Manager};

/// A Job Runner client that records what it is asked and answers as told.
#[derive(Debug, Default)]
pub struct FakeJr {
    pub chains: Mutex<Vec<JobChain>>,
    /// Where each chain (new or resumed) was sent, with its epoch.
    pub sent_to: Mutex<Vec<(String, u64)>>,
    /// The instance that answers at a URL (registered by the test); otherwise
    /// `instance-of-URL`.
    pub instances: Mutex<std::collections::HashMap<String, String>>,
    pub resumed: Mutex<Vec<SuspendedJobChain>>,
    pub stopped: Mutex<Vec<String>>,
    /// Each answer to an approval job the runner was told of: (request, job, approved).
    pub answers: Mutex<Vec<(String, String, bool)>>,
    /// Each pause (true) and unpause (false) the runner was told of.
    pub pauses: Mutex<Vec<(String, bool)>>,
    /// Whether each hand-over (new or resumed) said the request is paused.
    pub paused_at_hand_over: Mutex<Vec<bool>>,
    /// 0: accept; 503: unavailable; other: refuse with that status.
    pub answer: AtomicU16,
    /// Runner URLs that never answer (cut off): unavailable, whatever `answer` says.
    pub silent: Mutex<std::collections::HashSet<String>>,
    /// When set, a new chain finishes (COMPLETE) before `new_chain` returns, as a very
    /// fast chain on a real Job Runner does.
    pub finish_at_once: Mutex<Option<std::sync::Weak<Manager>>>,
    /// What `running` answers, when set; otherwise a sleeping job for each chain taken.
    pub statuses: Mutex<Option<Vec<JobStatus>>>,
}

impl FakeJr {
    pub fn instance(&self, jr_url: &str) -> String {
        self.instances
            .lock()
            .unwrap()
            .get(jr_url)
            .cloned()
            .unwrap_or_else(|| format!("instance-of-{jr_url}"))
    }

    /// Records a hand-over to `jr_url` and, when it is accepted, what `accept` keeps of it.
    fn hand_over(
        &self,
        jr_url: &str,
        hand_over: &crate::HandOver,
        accept: impl FnOnce(),
    ) -> Result<HandedOver, ClientError> {
        self.paused_at_hand_over
            .lock()
            .unwrap()
            .push(hand_over.paused);
        let res = self.result(jr_url);
        if res.is_ok() {
            accept();
            self.sent_to
                .lock()
                .unwrap()
                .push((jr_url.to_owned(), hand_over.epoch));
        }
        res
    }

    pub fn result(&self, jr_url: &str) -> Result<HandedOver, ClientError> {
        if self.silent.lock().unwrap().contains(jr_url) {
            return Err(ClientError::Unavailable(format!(
                "no answer in time: {jr_url} is cut off"
            )));
        }
        match self.answer.load(Ordering::SeqCst) {
            0 => Ok(HandedOver {
                url: jr_url.to_owned(),
                instance: self.instance(jr_url),
            }),
            503 => Err(ClientError::Unavailable("connection refused".to_owned())),
            409 => Err(ClientError::AlreadyRunning("req".to_owned())),
            401 => Err(ClientError::Unauthorized(
                "HTTP 401: no credentials: send a bearer token".to_owned(),
            )),
            422 => Err(ClientError::MissingJobTypes(
                "HTTP 422: this job runner has no job type `go-provision`".to_owned(),
            )),
            // 422 for a job's bytes its type cannot read there (issue #47).
            4221 => Err(ClientError::MissingJobTypes(format!(
                "HTTP 422: {} of job deploy (ID abcd, type go-provision): cannot read the job's stored bytes: invalid type: integer 6000000000, expected a string",
                job::UNREADABLE_BYTES
            ))),
            500 => Err(ClientError::Faulted(
                "HTTP 500: invalid job state for existing job chain: RUNNING (2), job a (ID a); all job states must be PENDING, COMPLETE, or STOPPED".to_owned(),
            )),
            _ => Err(ClientError::Invalid("invalid chain".to_owned())),
        }
    }
}

#[async_trait::async_trait]
impl JrClient for FakeJr {
    async fn new_chain(
        &self,
        jr_url: &str,
        job_chain: crate::NewChain,
        hand_over: &crate::HandOver,
    ) -> Result<HandedOver, ClientError> {
        let job_chain = job_chain.chain;
        let epoch = hand_over.epoch;
        let (request_id, jobs) = (job_chain.request_id.clone(), job_chain.jobs.len() as u64);
        let res = self.hand_over(jr_url, hand_over, || {
            self.chains.lock().unwrap().push(job_chain)
        });
        let manager = self.finish_at_once.lock().unwrap().clone();
        if let Some(manager) = manager.and_then(|weak| weak.upgrade()) {
            let finish = final_state(&request_id, State::Complete, jobs);
            let fence = proto::Fence {
                instance: self.instance(jr_url),
                epoch,
            };
            manager.finish(&finish, Some(&fence)).await.unwrap();
        }
        res
    }
    async fn resume(
        &self,
        jr_url: &str,
        suspended: &SuspendedJobChain,
        hand_over: &crate::HandOver,
    ) -> Result<HandedOver, ClientError> {
        self.hand_over(jr_url, hand_over, || {
            self.resumed.lock().unwrap().push(suspended.clone())
        })
    }
    async fn stop(&self, _jr_url: &str, request_id: &RequestId) -> Result<(), ClientError> {
        self.stopped.lock().unwrap().push(request_id.to_string());
        Ok(())
    }
    async fn answer(
        &self,
        _jr_url: &str,
        request_id: &RequestId,
        job_id: &str,
        answer: &proto::Answer,
    ) -> Result<(), ClientError> {
        self.answers.lock().unwrap().push((
            request_id.to_string(),
            job_id.to_owned(),
            answer.approved,
        ));
        Ok(())
    }
    async fn pause(
        &self,
        _jr_url: &str,
        request_id: &RequestId,
        paused: bool,
    ) -> Result<(), ClientError> {
        self.pauses
            .lock()
            .unwrap()
            .push((request_id.to_string(), paused));
        Ok(())
    }
    async fn running(
        &self,
        _jr_url: &str,
        request_id: Option<&RequestId>,
    ) -> Result<Vec<JobStatus>, ClientError> {
        if let Some(statuses) = self.statuses.lock().unwrap().as_ref() {
            return Ok(statuses
                .iter()
                .filter(|s| request_id.is_none_or(|id| id.as_str() == s.request_id))
                .cloned()
                .collect());
        }
        let chains = self.chains.lock().unwrap();
        Ok(chains
            .iter()
            .filter(|c| request_id.is_none_or(|id| id.as_str() == c.request_id))
            .map(|c| JobStatus {
                request_id: c.request_id.clone(),
                job_id: "abcd".to_owned(),
                job_type: "sleep".to_owned(),
                name: "pause".to_owned(),
                started_at: 1,
                state: State::Running,
                status: "sleeping".to_owned(),
                r#try: 1,
                each: Default::default(),
            })
            .collect())
    }
}

/// A runner's report of a chain's end, now, with no entries.
pub fn final_state(request_id: &str, state: State, finished_jobs: u64) -> proto::FinishRequest {
    proto::FinishRequest {
        request_id: request_id.to_owned(),
        state,
        finished_at: chrono::Utc::now(),
        finished_jobs,
        error: String::new(),
        job_logs: Vec::new(),
    }
}
