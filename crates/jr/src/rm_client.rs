//! Reporting to a Request Manager over HTTP: `chain::Reporter` on its API.

use chain::{ReportError, Reporter};
use proto::{FinishRequest, JobLog, OutputChunk, RequestProgress, SuspendedJobChain};

/// Sends a chain's reports to the Request Manager at `url`. A connection failure, a
/// timeout and HTTP 502, 503, 504 and 429 mean the Request Manager is unavailable (retried
/// until it is back); any other 5xx is a fault (retried a few times); a 4xx is a refusal
/// (not retried). See [`chain::RetryPolicy`].
#[derive(Debug, Clone)]
pub struct HttpRmClient {
    url: String,
    http: reqwest::Client,
}

impl HttpRmClient {
    /// Reports to the Request Manager at `url` through `http` (the binary's client, with
    /// its timeouts and TLS settings; one client keeps connections alive).
    pub fn new(url: &str, http: reqwest::Client) -> HttpRmClient {
        HttpRmClient {
            url: url.trim_end_matches('/').to_owned(),
            http,
        }
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<(), ReportError> {
        let response = request
            .send()
            .await
            .map_err(|err| ReportError::unavailable(err.to_string()))?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let body = response.text().await.unwrap_or_default();
        let message = format!(
            "request manager answered HTTP {}: {}",
            status.as_u16(),
            proto::Error::message_of(&body)
        );
        Err(match status.as_u16() {
            429 | 502 | 503 | 504 => ReportError::unavailable(message),
            500..=599 => ReportError::failed(message),
            _ => ReportError::rejected(message),
        })
    }
}

#[async_trait::async_trait]
impl Reporter for HttpRmClient {
    async fn job_logs(&self, entries: &[JobLog]) -> Result<(), ReportError> {
        self.send(
            self.http
                .post(format!("{}/api/v1/job-logs", self.url))
                .json(entries),
        )
        .await
    }

    async fn output(&self, chunks: &[OutputChunk]) -> Result<(), ReportError> {
        self.send(
            self.http
                .post(format!("{}/api/v1/job-output", self.url))
                .json(chunks),
        )
        .await
    }

    async fn progress(&self, progress: &RequestProgress) -> Result<(), ReportError> {
        let url = format!(
            "{}/api/v1/requests/{}/progress",
            self.url, progress.request_id
        );
        self.send(self.http.put(url).json(progress)).await
    }

    async fn finish(&self, finish: &FinishRequest) -> Result<(), ReportError> {
        let url = format!("{}/api/v1/requests/{}/finish", self.url, finish.request_id);
        self.send(self.http.put(url).json(finish)).await
    }

    async fn suspend(&self, suspended: &SuspendedJobChain) -> Result<(), ReportError> {
        let url = format!(
            "{}/api/v1/requests/{}/suspend",
            self.url, suspended.request_id
        );
        self.send(self.http.put(url).json(suspended)).await
    }
}
