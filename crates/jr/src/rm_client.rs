//! Reaching Request Managers over HTTP: `chain::Reporter` on their API (one per chain,
//! naming the runner instance and the epoch of the chain's hand-over), and the runner's
//! registration and lease.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use chain::{ReportError, Reporter};
use proto::{
    Fence, FinishRequest, JobLocksTaken, JobLog, JobRunner, LeaseRenewal, OutputChunk,
    RequestProgress, RunnerRegistration, SuspendedJobChain, TakeJobLocks, TryStart,
};

use crate::lease::{Registry, RegistryError};
use crate::runner::Reporters;

/// Sends to the Request Managers at `urls`, using whichever answers: the one that answered
/// last, then the others in turn when it does not. A connection failure, a timeout and
/// HTTP 502, 503, 504 and 429 mean a Request Manager is unavailable (the next is tried,
/// and the report retried until one is back); any other 5xx is a fault (retried a few
/// times); a 4xx is a refusal (not retried), and a 409 that says `Spindle-Fenced` means
/// this runner no longer owns the request. See [`chain::RetryPolicy`].
#[derive(Debug, Clone)]
pub struct HttpRmClient {
    urls: Arc<Vec<String>>,
    current: Arc<AtomicUsize>,
    http: reqwest::Client,
    fence: Option<Fence>,
    /// Chains' reports in flight at once, all chains together (see [`REPORTS_IN_FLIGHT`]).
    reports: Arc<tokio::sync::Semaphore>,
}

/// How many of its chains' reports a runner has in flight at once. Its own calls (lease
/// renewals, registration) do not wait for one: when thousands of chains report together
/// (each suspends at a shutdown), the Request Manager has at most these before a
/// renewal, which otherwise queued behind them until the lease lapsed (50,000 chains
/// on two runners, issue #51). Asking for locks does not wait either (its answer may
/// wait on a release another report carries).
pub const REPORTS_IN_FLIGHT: usize = 128;

impl HttpRmClient {
    /// Reports to the Request Managers at `urls` through `http` (the binary's client, with
    /// its timeouts and TLS settings; one client keeps connections alive).
    pub fn new(urls: &[String], http: reqwest::Client) -> HttpRmClient {
        HttpRmClient {
            urls: Arc::new(
                urls.iter()
                    .map(|url| url.trim_end_matches('/').to_owned())
                    .collect(),
            ),
            current: Arc::new(AtomicUsize::new(0)),
            http,
            fence: None,
            reports: Arc::new(tokio::sync::Semaphore::new(REPORTS_IN_FLIGHT)),
        }
    }

    /// Sends `build(base URL)` to the Request Manager that answered last, then to each
    /// other one while they are unavailable; returns the answer of the first that
    /// answered, or the last failure.
    async fn call(
        &self,
        build: impl Fn(&str) -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ReportError> {
        let n = self.urls.len().max(1);
        let first = self.current.load(Ordering::Relaxed);
        let mut last = ReportError::unavailable("no Request Manager URL is configured");
        for i in 0..n {
            let index = (first + i) % n;
            let Some(url) = self.urls.get(index) else {
                break;
            };
            let mut request = build(url);
            if let Some(fence) = &self.fence {
                request = request
                    .header(proto::RUNNER_HEADER, fence.instance.as_str())
                    .header(proto::EPOCH_HEADER, fence.epoch.to_string());
            }
            match Self::answer(request.send().await).await {
                Err(err) if err.kind == chain::ReportErrorKind::Unavailable => last = err,
                res => {
                    self.current.store(index, Ordering::Relaxed);
                    return res;
                }
            }
        }
        Err(last)
    }

    async fn answer(
        sent: Result<reqwest::Response, reqwest::Error>,
    ) -> Result<reqwest::Response, ReportError> {
        let response = sent.map_err(|err| ReportError::unavailable(err.to_string()))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let fenced = response.headers().contains_key(proto::FENCED_HEADER);
        let body = response.text().await.unwrap_or_default();
        let message = format!(
            "request manager answered HTTP {}: {}",
            status.as_u16(),
            proto::Error::message_of(&body)
        );
        Err(match status.as_u16() {
            409 if fenced => ReportError::fenced(message),
            429 | 502 | 503 | 504 => ReportError::unavailable(message),
            500..=599 => ReportError::failed(message),
            _ => ReportError::rejected(message),
        })
    }

    /// Tells the Request Manager that approval job `job_id` of `request_id` waits for an
    /// answer (its notifications say so).
    pub async fn approval_waiting(
        &self,
        request_id: &str,
        job_id: &str,
    ) -> Result<(), ReportError> {
        self.send(|url| {
            self.http
                .post(format!(
                    "{url}/api/v1/requests/{request_id}/approval-waiting"
                ))
                .json(&serde_json::json!({ "jobId": job_id }))
        })
        .await
    }

    /// [`Self::call`], its answer's body dropped; a chain's report (a fenced call) waits
    /// for its turn among [`REPORTS_IN_FLIGHT`].
    async fn send(
        &self,
        build: impl Fn(&str) -> reqwest::RequestBuilder,
    ) -> Result<(), ReportError> {
        let _turn = match &self.fence {
            Some(_) => Some(self.reports.acquire().await),
            None => None,
        };
        self.call(build).await.map(drop)
    }

    async fn runner(
        &self,
        build: impl Fn(&str) -> reqwest::RequestBuilder,
    ) -> Result<JobRunner, RegistryError> {
        let response = self.call(build).await.map_err(registry_error)?;
        response
            .json()
            .await
            .map_err(|err| RegistryError::Unavailable(format!("reading the answer: {err}")))
    }
}

fn registry_error(err: ReportError) -> RegistryError {
    match err.kind {
        chain::ReportErrorKind::Rejected | chain::ReportErrorKind::Fenced => {
            RegistryError::Ended(err.message)
        }
        _ => RegistryError::Unavailable(err.message),
    }
}

impl Reporters for HttpRmClient {
    fn for_chain(&self, fence: Fence) -> Arc<dyn Reporter> {
        Arc::new(HttpRmClient {
            fence: Some(fence),
            ..self.clone()
        })
    }
}

#[async_trait::async_trait]
impl Registry for HttpRmClient {
    async fn register(
        &self,
        registration: &RunnerRegistration,
    ) -> Result<JobRunner, RegistryError> {
        let response = self
            .call(|url| {
                self.http
                    .post(format!("{url}/api/v1/job-runners"))
                    .json(registration)
            })
            .await
            .map_err(registry_error)?;
        // A Request Manager that does not name its API version is of version 1.
        let version = response
            .headers()
            .get(proto::API_VERSION_HEADER)
            .and_then(|value| value.to_str().ok())
            .map_or(Ok(1), str::parse::<u32>);
        match version {
            Ok(version) if proto::api_versions_work_together(version, proto::API_VERSION) => {}
            other => {
                let said = other.map_or_else(
                    |_| "an unreadable API version".to_owned(),
                    |v| format!("API version {v}"),
                );
                return Err(RegistryError::Incompatible(format!(
                    "the Request Manager at {} speaks {said}; this Job Runner speaks version {} and works with Request Managers of versions {} to {}: run releases at most one version apart (docs/deploying.md, \"Upgrading\")",
                    response.url().origin().ascii_serialization(),
                    proto::API_VERSION,
                    proto::API_VERSION.saturating_sub(1).max(1),
                    proto::API_VERSION + 1
                )));
            }
        }
        response
            .json()
            .await
            .map_err(|err| RegistryError::Unavailable(format!("reading the answer: {err}")))
    }

    async fn renew(
        &self,
        instance: &str,
        renewal: Option<&LeaseRenewal>,
    ) -> Result<JobRunner, RegistryError> {
        self.runner(|url| {
            let put = self
                .http
                .put(format!("{url}/api/v1/job-runners/{instance}/lease"));
            // Without a body the renewal names no chains (and none is judged unheld).
            match renewal {
                Some(renewal) => put.json(renewal),
                None => put,
            }
        })
        .await
    }

    async fn deregister(&self, instance: &str) -> Result<(), RegistryError> {
        self.send(|url| {
            self.http
                .delete(format!("{url}/api/v1/job-runners/{instance}"))
        })
        .await
        .map_err(registry_error)
    }
}

#[async_trait::async_trait]
impl Reporter for HttpRmClient {
    async fn try_starts(&self, starts: &[TryStart]) -> Result<(), ReportError> {
        self.send(|url| {
            self.http
                .post(format!("{url}/api/v1/job-tries"))
                .json(starts)
        })
        .await
    }

    async fn job_logs(&self, entries: &[JobLog]) -> Result<(), ReportError> {
        self.send(|url| {
            self.http
                .post(format!("{url}/api/v1/job-logs"))
                .json(entries)
        })
        .await
    }

    async fn output(&self, chunks: &[OutputChunk]) -> Result<(), ReportError> {
        self.send(|url| {
            self.http
                .post(format!("{url}/api/v1/job-output"))
                .json(chunks)
        })
        .await
    }

    async fn progress(&self, progress: &RequestProgress) -> Result<(), ReportError> {
        self.send(|url| {
            self.http
                .put(format!(
                    "{url}/api/v1/requests/{}/progress",
                    progress.request_id
                ))
                .json(progress)
        })
        .await
    }

    async fn finish(&self, finish: &FinishRequest) -> Result<(), ReportError> {
        self.send(|url| {
            self.http
                .put(format!(
                    "{url}/api/v1/requests/{}/finish",
                    finish.request_id
                ))
                .json(finish)
        })
        .await
    }

    async fn suspend(&self, suspended: &SuspendedJobChain) -> Result<(), ReportError> {
        self.send(|url| {
            self.http
                .put(format!(
                    "{url}/api/v1/requests/{}/suspend",
                    suspended.request_id
                ))
                .json(suspended)
        })
        .await
    }

    async fn take_job_locks(
        &self,
        request_id: &str,
        take: &TakeJobLocks,
    ) -> Result<JobLocksTaken, ReportError> {
        let response = self
            .call(|url| {
                self.http
                    .post(format!("{url}/api/v1/requests/{request_id}/job-locks"))
                    .json(take)
            })
            .await?;
        response
            .json()
            .await
            .map_err(|err| ReportError::unavailable(format!("reading the answer: {err}")))
    }

    async fn release_job_locks(&self, request_id: &str, job_id: &str) -> Result<(), ReportError> {
        self.send(|url| {
            self.http.delete(format!(
                "{url}/api/v1/requests/{request_id}/job-locks/{job_id}"
            ))
        })
        .await
    }
}
