//! How the Request Manager reaches Job Runners: the [`JrClient`] trait, and its HTTP
//! implementation over Spin Cycle's Job Runner API.

use std::sync::Arc;
use std::time::Duration;

use proto::{JobChain, JobStatus, RequestId, SuspendedJobChain};
use telemetry::SpanContext;

/// Why a Job Runner call failed, in the Request Manager's terms (however the Job Runner
/// was reached).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// No answer (connection refused, timeout), or a Job Runner that cannot take work now
    /// (shutting down, a fault on its side): try later, maybe another.
    #[error("job runner unavailable: {0}")]
    Unavailable(String),
    /// The Job Runner runs this chain already.
    #[error("job runner runs the chain already: {0}")]
    AlreadyRunning(String),
    /// The Job Runner does not run this request.
    #[error("job runner does not run the request: {0}")]
    NotFound(String),
    /// The Job Runner refused this Request Manager's credentials (HTTP 401 or 403): a
    /// misconfiguration (the runner has `auth:`, the manager no token or certificate it
    /// accepts), which no chain can be blamed for.
    #[error("job runner refused this Request Manager's credentials: {0}")]
    Unauthorized(String),
    /// The Job Runner cannot run the chain as it is (HTTP 422): it lacks job types of the
    /// chain, or its job types cannot read jobs' stored bytes. The chain is valid and
    /// waits for a runner that can.
    #[error("job runner cannot run the chain: {0}")]
    MissingJobTypes(String),
    /// The Job Runner refused what it was sent as invalid.
    #[error("job runner refused the chain: {0}")]
    Invalid(String),
    /// The Job Runner answered HTTP 500: the call failed on its side. Spin Cycle's Job
    /// Runner (and Spindle's) answer so a resumed chain whose job states do not fit;
    /// sent again, the same chain is refused again.
    #[error("job runner failed the call: {0}")]
    Faulted(String),
}

impl ClientError {
    /// Why a request waits, stored as its `error` (`spindle status`, the web UI), when a
    /// runner could not run its chain as it is ([`ClientError::MissingJobTypes`]).
    pub fn why_waiting(&self) -> String {
        match self {
            ClientError::MissingJobTypes(message) if message.contains(job::UNREADABLE_BYTES) => {
                format!("waits for a job runner that can read its jobs: {message}")
            }
            ClientError::MissingJobTypes(message) if message.contains(ONLY_SPINDLE_KEEPS) => {
                format!("waits for a Spindle job runner: {message}")
            }
            ClientError::MissingJobTypes(message) => {
                format!("waits for a job runner with its job types: {message}")
            }
            other => format!("waits for a job runner: {other}"),
        }
    }

    /// Whether the same call may succeed later.
    /// Whether the call may succeed if sent again: no answer, or a fault on the
    /// runner's side (Spin Cycle's Job Runner answers some calls 500 while a chain
    /// changes state).
    pub fn is_transient(&self) -> bool {
        matches!(self, ClientError::Unavailable(_) | ClientError::Faulted(_))
    }

    /// Whether the call got no answer within its time.
    pub fn timed_out(&self) -> bool {
        matches!(self, ClientError::Unavailable(message) if message.starts_with(NO_ANSWER))
    }
}

/// How long a hand-over waits for a Job Runner's answer: a runner takes a chain at once
/// (it validates and starts it), so a longer wait is a runner that is cut off or stuck,
/// and the request is offered to another.
pub const HAND_OVER_TIMEOUT: Duration = Duration::from_secs(10);

/// What a chain's refusal says when only a Spindle Job Runner can run it (a failure
/// budget, which Spin Cycle's runners do not keep).
pub(crate) const ONLY_SPINDLE_KEEPS: &str = "which only a Spindle Job Runner keeps";

/// How an unanswered call's error begins.
const NO_ANSWER: &str = "no answer in time";

/// Where a chain went: the Job Runner's base URL and its instance (empty when it did not
/// say, as Spin Cycle's Job Runners do not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandedOver {
    pub url: String,
    pub instance: String,
}

/// A new chain as it is handed to a Job Runner: the chain, and its JSON when that was
/// made already (a new request's, the text the store keeps): an HTTP runner is sent that
/// text, not the chain serialized again (a 100,000-job chain's is 22 MB).
#[derive(Debug, Clone)]
pub struct NewChain {
    pub chain: JobChain,
    /// The JSON of `chain`, exactly; `None` when it is to be made.
    pub json: Option<Arc<str>>,
}

impl From<JobChain> for NewChain {
    fn from(chain: JobChain) -> NewChain {
        NewChain { chain, json: None }
    }
}

/// A hand-over's terms: its epoch (which the runner reports with), the span it is
/// traced under (sent as a W3C `traceparent`, when traces are on), and whether the
/// request is paused (the chain then starts paused).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HandOver {
    pub epoch: u64,
    pub trace: Option<SpanContext>,
    pub paused: bool,
    /// The request's secret args, opened (issue #33): sent with the chain only.
    pub secrets: job::Secrets,
}

/// What the Request Manager asks of Job Runners.
#[async_trait::async_trait]
pub trait JrClient: Send + Sync + 'static {
    /// Starts a new chain on the Job Runner (or load balancer) at `jr_url`. The chain is
    /// given, not lent: an in-process runner runs it without a copy (a 100,000-job
    /// chain is a few hundred MB).
    async fn new_chain(
        &self,
        jr_url: &str,
        job_chain: NewChain,
        hand_over: &HandOver,
    ) -> Result<HandedOver, ClientError>;
    /// Resumes a suspended chain on the Job Runner (or load balancer) at `jr_url`.
    async fn resume(
        &self,
        jr_url: &str,
        suspended: &SuspendedJobChain,
        hand_over: &HandOver,
    ) -> Result<HandedOver, ClientError>;
    /// Stops a chain on the Job Runner at `jr_url`; returns once it has stopped.
    async fn stop(&self, jr_url: &str, request_id: &RequestId) -> Result<(), ClientError>;
    /// Pauses (or unpauses) a chain on the Job Runner at `jr_url`.
    async fn pause(
        &self,
        jr_url: &str,
        request_id: &RequestId,
        paused: bool,
    ) -> Result<(), ClientError>;
    /// Hands the answer to an approval job of a chain on the Job Runner at `jr_url`.
    async fn answer(
        &self,
        jr_url: &str,
        request_id: &RequestId,
        job_id: &str,
        answer: &proto::Answer,
    ) -> Result<(), ClientError>;
    /// The running jobs on the Job Runner at `jr_url` (of one request, or all).
    async fn running(
        &self,
        jr_url: &str,
        request_id: Option<&RequestId>,
    ) -> Result<Vec<JobStatus>, ClientError>;
}

/// [`JrClient`] over HTTP: new and resumed chains go to the URL the Request Manager
/// chose (a registered Job Runner, or a load balancer in front of several); stop and
/// status go to the Job Runner that runs the request.
#[derive(Debug, Clone)]
pub struct HttpJrClient {
    http: reqwest::Client,
}

/// A chain's JSON text as the bytes of a body.
struct Text(Arc<str>);

impl AsRef<[u8]> for Text {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// A body of `value` as JSON.
fn json_body(value: &impl serde::Serialize) -> Result<reqwest::Body, ClientError> {
    serde_json::to_vec(value)
        .map(reqwest::Body::from)
        .map_err(|err| ClientError::Invalid(format!("the chain cannot be sent as JSON: {err}")))
}

impl HttpJrClient {
    /// Reaches Job Runners through `http` (the binary's client, with its timeouts and TLS
    /// settings; one client keeps connections alive).
    pub fn new(http: reqwest::Client) -> HttpJrClient {
        HttpJrClient { http }
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
                // A call that got no answer in time is not sent again at once: the
                // runner may be cut off, and the caller (a create) would wait again.
                Err(err) if err.is_transient() && !err.timed_out() && attempt < 3 => {
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
        let response = request.send().await.map_err(|err| {
            if err.is_timeout() {
                ClientError::Unavailable(format!("{NO_ANSWER}: {err}"))
            } else {
                ClientError::Unavailable(err.to_string())
            }
        })?;
        let status = response.status().as_u16();
        if response.status().is_success() {
            return Ok(response);
        }
        let body = response.text().await.unwrap_or_default();
        let message = format!("HTTP {status}: {}", proto::Error::message_of(&body));
        Err(match status {
            404 => ClientError::NotFound(message),
            409 => ClientError::AlreadyRunning(message),
            401 | 403 => ClientError::Unauthorized(message),
            422 => ClientError::MissingJobTypes(message),
            400..=499 => ClientError::Invalid(message),
            500 => ClientError::Faulted(message),
            _ => ClientError::Unavailable(message),
        })
    }

    /// Posts a chain (new or resumed) to `path` at `jr_url`; returns the base URL of the
    /// Job Runner that runs it, from the `Location` of its answer, and its instance.
    async fn post_chain(
        &self,
        jr_url: &str,
        path: &str,
        chain: reqwest::Body,
        hand_over: &HandOver,
    ) -> Result<HandedOver, ClientError> {
        let mut request = self
            .http
            .post(format!("{}{path}", jr_url.trim_end_matches('/')))
            .timeout(HAND_OVER_TIMEOUT)
            .header(proto::EPOCH_HEADER, hand_over.epoch.to_string())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(chain);
        if let Some(trace) = hand_over.trace {
            request = request.header("traceparent", trace.traceparent());
        }
        if hand_over.paused {
            request = request.header(proto::PAUSED_HEADER, "true");
        }
        if !hand_over.secrets.is_empty() {
            use base64::Engine as _;
            let pairs = serde_json::to_vec(hand_over.secrets.pairs()).unwrap_or_default();
            request = request.header(
                proto::SECRETS_HEADER,
                base64::engine::general_purpose::STANDARD.encode(pairs),
            );
        }
        let response = self.send(request).await?;
        let instance = response
            .headers()
            .get(proto::RUNNER_HEADER)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        Ok(HandedOver {
            url: Self::base_url(&response)?,
            instance,
        })
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
    async fn new_chain(
        &self,
        jr_url: &str,
        job_chain: NewChain,
        hand_over: &HandOver,
    ) -> Result<HandedOver, ClientError> {
        let body = match job_chain.json {
            // The text shared with the store, sent without a copy.
            Some(json) => reqwest::Body::from(bytes::Bytes::from_owner(Text(json))),
            None => json_body(&job_chain.chain)?,
        };
        self.post_chain(jr_url, "/api/v1/job-chains", body, hand_over)
            .await
    }

    async fn resume(
        &self,
        jr_url: &str,
        suspended: &SuspendedJobChain,
        hand_over: &HandOver,
    ) -> Result<HandedOver, ClientError> {
        self.post_chain(
            jr_url,
            "/api/v1/job-chains/resume",
            json_body(suspended)?,
            hand_over,
        )
        .await
    }

    async fn pause(
        &self,
        jr_url: &str,
        request_id: &RequestId,
        paused: bool,
    ) -> Result<(), ClientError> {
        let action = if paused { "pause" } else { "unpause" };
        let url = format!(
            "{}/api/v1/job-chains/{request_id}/{action}",
            jr_url.trim_end_matches('/')
        );
        self.send(self.http.put(url)).await?;
        Ok(())
    }

    async fn stop(&self, jr_url: &str, request_id: &RequestId) -> Result<(), ClientError> {
        let url = format!(
            "{}/api/v1/job-chains/{request_id}/stop",
            jr_url.trim_end_matches('/')
        );
        self.send(self.http.put(url)).await?;
        Ok(())
    }

    async fn answer(
        &self,
        jr_url: &str,
        request_id: &RequestId,
        job_id: &str,
        answer: &proto::Answer,
    ) -> Result<(), ClientError> {
        let url = format!(
            "{}/api/v1/job-chains/{request_id}/jobs/{job_id}/answer",
            jr_url.trim_end_matches('/')
        );
        self.send(self.http.put(url).json(answer)).await?;
        Ok(())
    }

    async fn running(
        &self,
        jr_url: &str,
        request_id: Option<&RequestId>,
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use axum::http::{HeaderMap, StatusCode, header};

    use super::*;

    /// What a runner at a local address was sent: each new chain's content type and
    /// body.
    type Sent = Arc<Mutex<Vec<(String, String)>>>;

    async fn runner() -> (String, Sent) {
        let sent: Sent = Arc::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let location = format!("{base}/api/v1/job-chains/r1");
        let keep = Arc::clone(&sent);
        let app = axum::Router::new().route(
            "/api/v1/job-chains",
            axum::routing::post(move |headers: HeaderMap, body: String| async move {
                let kind = headers[header::CONTENT_TYPE].to_str().unwrap().to_owned();
                keep.lock().unwrap().push((kind, body));
                (StatusCode::CREATED, [(header::LOCATION, location)])
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        (base, sent)
    }

    fn chain() -> JobChain {
        let job = proto::Job {
            id: "a1b2".to_owned(),
            name: "deploy".to_owned(),
            job_type: "noop".to_owned(),
            ..proto::Job::default()
        };
        JobChain {
            request_id: "r1".to_owned(),
            jobs: [(job.id.clone(), job)].into(),
            ..JobChain::default()
        }
    }

    /// A new chain's JSON made already (the text the store keeps) is sent as it is; one
    /// without is sent as the chain's JSON.
    #[tokio::test]
    async fn a_new_chain_is_sent_as_its_json_made_already() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (base, sent) = runner().await;
        let client = HttpJrClient::new(reqwest::Client::new());
        let made: Arc<str> = serde_json::to_string_pretty(&chain()).unwrap().into();
        let new = NewChain {
            chain: chain(),
            json: Some(Arc::clone(&made)),
        };
        let handed = client
            .new_chain(&base, new, &HandOver::default())
            .await
            .unwrap();
        assert_eq!(handed.url, base);
        client
            .new_chain(&base, chain().into(), &HandOver::default())
            .await
            .unwrap();
        let sent = sent.lock().unwrap().clone();
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[0], ("application/json".to_owned(), made.to_string()));
        assert_eq!(sent[1].0, "application/json");
        assert_eq!(sent[1].1, serde_json::to_string(&chain()).unwrap());
        assert_ne!(sent[0].1, sent[1].1);
    }
}
