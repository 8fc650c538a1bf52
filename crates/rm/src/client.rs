//! How the Request Manager reaches Job Runners: the [`JrClient`] trait, and its HTTP
//! implementation over Spin Cycle's Job Runner API.

use std::time::Duration;

use proto::{JobChain, JobStatus, SuspendedJobChain};

/// A Job Runner call that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// No answer (connection refused, timeout) or a server-side failure: try later.
    #[error("job runner unavailable: {0}")]
    Unavailable(String),
    /// The Job Runner answered that it cannot take this.
    #[error("job runner refused (HTTP {status}): {message}")]
    Refused { status: u16, message: String },
}

impl ClientError {
    pub fn is_transient(&self) -> bool {
        matches!(self, ClientError::Unavailable(_))
    }

    /// The Job Runner runs this chain already.
    pub fn is_already_running(&self) -> bool {
        matches!(self, ClientError::Refused { status: 409, .. })
    }
}

/// What the Request Manager asks of Job Runners.
#[async_trait::async_trait]
pub trait JrClient: Send + Sync + 'static {
    /// Starts a new chain; returns the base URL of the Job Runner that runs it.
    async fn new_chain(&self, job_chain: &JobChain) -> Result<String, ClientError>;
    /// Resumes a suspended chain; returns the base URL of the Job Runner that runs it.
    async fn resume(&self, suspended: &SuspendedJobChain) -> Result<String, ClientError>;
    /// Stops a chain on the Job Runner at `jr_url`; returns once it has stopped.
    async fn stop(&self, jr_url: &str, request_id: &str) -> Result<(), ClientError>;
    /// The running jobs on the Job Runner at `jr_url`.
    async fn running(
        &self,
        jr_url: &str,
        request_id: Option<&str>,
    ) -> Result<Vec<JobStatus>, ClientError>;
}

/// [`JrClient`] over HTTP. New and resumed chains go to `url` (one Job Runner, or a load
/// balancer in front of several); stop and status go to the Job Runner that runs the
/// request.
#[derive(Debug, Clone)]
pub struct HttpJrClient {
    url: String,
    http: reqwest::Client,
}

impl HttpJrClient {
    pub fn new(url: &str) -> HttpJrClient {
        // HTTPS with rustls on ring; a provider installed by the binary is kept.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(30))
            .build()
            .expect("an HTTP client with the rustls provider builds");
        HttpJrClient {
            url: url.trim_end_matches('/').to_owned(),
            http,
        }
    }

    /// Sends, retrying transient failures twice with backoff (100 ms, then 400 ms).
    async fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ClientError> {
        let mut delay = Duration::from_millis(100);
        let mut attempt = 1;
        loop {
            let Some(this_try) = request.try_clone() else {
                return self.send_once(request).await;
            };
            match self.send_once(this_try).await {
                Err(err) if err.is_transient() && attempt < 3 => {
                    tracing::debug!(attempt, error = %err, "job runner call failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay *= 4;
                    attempt += 1;
                }
                res => return res,
            }
        }
    }

    async fn send_once(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ClientError> {
        let response = request
            .send()
            .await
            .map_err(|err| ClientError::Unavailable(err.to_string()))?;
        let status = response.status().as_u16();
        if response.status().is_success() {
            return Ok(response);
        }
        let body = response.text().await.unwrap_or_default();
        let message = serde_json::from_str::<proto::Error>(&body)
            .map(|e| e.message)
            .unwrap_or(body);
        if matches!(status, 500 | 502 | 503 | 504) {
            return Err(ClientError::Unavailable(format!(
                "HTTP {status}: {message}"
            )));
        }
        Err(ClientError::Refused { status, message })
    }

    /// The Job Runner's base URL from the `Location` of its answer.
    fn base_url(response: &reqwest::Response) -> Result<String, ClientError> {
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|value| value.to_str().ok())
            .ok_or_else(|| {
                ClientError::Unavailable(
                    "the job runner's answer has no Location header".to_owned(),
                )
            })?;
        let url = url::Url::parse(location).map_err(|err| {
            ClientError::Unavailable(format!(
                "the job runner's Location {location:?} is not a URL: {err}"
            ))
        })?;
        Ok(url.origin().ascii_serialization())
    }
}

#[async_trait::async_trait]
impl JrClient for HttpJrClient {
    async fn new_chain(&self, job_chain: &JobChain) -> Result<String, ClientError> {
        let response = self
            .send(
                self.http
                    .post(format!("{}/api/v1/job-chains", self.url))
                    .json(job_chain),
            )
            .await?;
        Self::base_url(&response)
    }

    async fn resume(&self, suspended: &SuspendedJobChain) -> Result<String, ClientError> {
        let response = self
            .send(
                self.http
                    .post(format!("{}/api/v1/job-chains/resume", self.url))
                    .json(suspended),
            )
            .await?;
        Self::base_url(&response)
    }

    async fn stop(&self, jr_url: &str, request_id: &str) -> Result<(), ClientError> {
        let url = format!(
            "{}/api/v1/job-chains/{request_id}/stop",
            jr_url.trim_end_matches('/')
        );
        self.send(self.http.put(url)).await?;
        Ok(())
    }

    async fn running(
        &self,
        jr_url: &str,
        request_id: Option<&str>,
    ) -> Result<Vec<JobStatus>, ClientError> {
        let mut url = format!("{}/api/v1/status/running", jr_url.trim_end_matches('/'));
        if let Some(request_id) = request_id {
            url.push_str(&format!("?requestId={request_id}"));
        }
        let response = self.send(self.http.get(url)).await?;
        response
            .json()
            .await
            .map_err(|err| ClientError::Unavailable(err.to_string()))
    }
}
