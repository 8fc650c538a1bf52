//! A client of the Request Manager's API for the user-facing commands. It speaks only
//! `proto` types, and sorts failures into the few kinds the exit codes tell apart.

use std::time::Duration;

use proto::{
    CreateRequest, JobChain, JobLog, OutputPage, Request, RequestFilter, RequestSpec, RunningStatus,
};
use serde::de::DeserializeOwned;

/// How many times a create with an idempotency key is sent, at most.
const CREATE_TRIES: u32 = 4;

/// The wait before a create is sent again, doubled each time.
const CREATE_RETRY_WAIT: Duration = Duration::from_millis(500);

/// A new idempotency key for one create (`spindle start`, `rerun`).
pub(crate) fn idempotency_key() -> String {
    use rand::RngExt as _;
    format!("spindle-{:032x}", rand::rng().random::<u128>())
}

/// Why a call to the Request Manager failed.
#[derive(Debug)]
pub(crate) enum ClientError {
    NotFound(String),
    Unreachable { addr: String, detail: String },
    Timeout { addr: String, timeout: Duration },
    Api { status: u16, message: String },
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::NotFound(message) => write!(f, "{message}"),
            ClientError::Unreachable { addr, detail } => write!(
                f,
                "cannot reach the Request Manager at {addr} ({detail}); check --addr (or SPINDLE_ADDR) and that `spindle server` runs there"
            ),
            ClientError::Timeout { addr, timeout } => write!(
                f,
                "the Request Manager at {addr} did not answer within {}; try a longer --timeout",
                proto::duration::format(*timeout)
            ),
            ClientError::Api { status, message } => write!(f, "{message} (HTTP {status})"),
        }
    }
}

impl std::error::Error for ClientError {}

/// Who is calling, as a request's creator: `$USER`, else `$LOGNAME`, else the name of
/// the process's user (a cron job or container may set neither variable).
pub(crate) fn caller() -> String {
    ["USER", "LOGNAME"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|value| !value.is_empty()))
        .or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|user| user.name)
        })
        .unwrap_or_default()
}

#[derive(Debug, Clone)]
pub(crate) struct Client {
    pub(crate) addr: String,
    timeout: Duration,
    http: reqwest::Client,
}

impl Client {
    pub(crate) fn new(
        addr: &str,
        timeout: Duration,
        credentials: &crate::client::credentials::Credentials,
    ) -> anyhow::Result<Client> {
        let http = credentials
            .apply(reqwest::Client::builder().timeout(timeout))?
            .build()
            .map_err(|err| anyhow::anyhow!("building the HTTP client: {err}"))?;
        Ok(Client {
            addr: addr.trim_end_matches('/').to_owned(),
            timeout,
            http,
        })
    }

    fn error(&self, err: reqwest::Error) -> ClientError {
        if err.is_timeout() {
            ClientError::Timeout {
                addr: self.addr.clone(),
                timeout: self.timeout,
            }
        } else {
            ClientError::Unreachable {
                addr: self.addr.clone(),
                detail: err.to_string(),
            }
        }
    }

    async fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ClientError> {
        let user = caller();
        let response = request
            .header("x-spindle-user", user)
            .send()
            .await
            .map_err(|err| self.error(err))?;
        let status = response.status().as_u16();
        if response.status().is_success() {
            return Ok(response);
        }
        let body = response.text().await.unwrap_or_default();
        let message = proto::Error::message_of(&body);
        if status == 404 {
            return Err(ClientError::NotFound(message));
        }
        Err(ClientError::Api { status, message })
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let response = self
            .send(self.http.get(format!("{}{path}", self.addr)))
            .await?;
        response.json().await.map_err(|err| self.error(err))
    }

    pub(crate) async fn request_list(&self) -> Result<Vec<RequestSpec>, ClientError> {
        self.get("/api/v1/request-list").await
    }

    /// Creates a request. With an idempotency key, a create whose answer is lost (the
    /// server unreachable, or no answer in time) is sent again with the same key, a few
    /// times: the server answers the request the first one created, never a second one.
    /// An answer, a refusal too (503 for back-pressure says when to come back), is not
    /// sent again.
    pub(crate) async fn create(
        &self,
        create_request: &CreateRequest,
    ) -> Result<Request, ClientError> {
        let mut wait = CREATE_RETRY_WAIT;
        let mut tries = 1;
        loop {
            let mut post = self
                .http
                .post(format!("{}/api/v1/requests", self.addr))
                .json(create_request);
            if let Some(key) = &create_request.idempotency_key {
                post = post.header("Idempotency-Key", key);
            }
            let answer = match self.send(post).await {
                Ok(response) => response.json().await.map_err(|err| self.error(err)),
                Err(err) => Err(err),
            };
            let lost = matches!(
                answer,
                Err(ClientError::Unreachable { .. } | ClientError::Timeout { .. })
            );
            if !lost || create_request.idempotency_key.is_none() || tries == CREATE_TRIES {
                return answer;
            }
            tokio::time::sleep(wait).await;
            wait *= 2;
            tries += 1;
        }
    }

    pub(crate) async fn request(&self, id: &str) -> Result<Request, ClientError> {
        self.get(&format!("/api/v1/requests/{id}")).await
    }

    /// The request with its job chain (one read, not for polling: a big chain is big).
    pub(crate) async fn request_with_chain(&self, id: &str) -> Result<Request, ClientError> {
        self.get(&format!("/api/v1/requests/{id}?chain=true")).await
    }

    /// The request's audit trail (Spindle; a server without one answers 404).
    pub(crate) async fn audit(&self, id: &str) -> Result<Vec<proto::AuditEvent>, ClientError> {
        self.get(&format!("/api/v1/requests/{id}/audit")).await
    }

    /// The elements of a request's `each:` expansions (of `node`, in `state`, when given).
    pub(crate) async fn elements(
        &self,
        id: &str,
        node: Option<&str>,
        state: Option<&str>,
    ) -> Result<Vec<proto::ElementStatus>, ClientError> {
        let mut params = url::form_urlencoded::Serializer::new(String::new());
        for (name, value) in [("node", node), ("state", state)] {
            if let Some(value) = value {
                params.append_pair(name, value);
            }
        }
        let query = params.finish();
        let query = if query.is_empty() {
            query
        } else {
            format!("?{query}")
        };
        self.get(&format!("/api/v1/requests/{id}/elements{query}"))
            .await
    }

    pub(crate) async fn job_chain(&self, id: &str) -> Result<JobChain, ClientError> {
        self.get(&format!("/api/v1/requests/{id}/job-chain")).await
    }

    pub(crate) async fn job_log(&self, id: &str) -> Result<Vec<JobLog>, ClientError> {
        // The log of an unknown request is an empty list; ask for the request first.
        self.request(id).await?;
        self.get(&format!("/api/v1/requests/{id}/log")).await
    }

    /// A page of a request's live output after the cursor `after`.
    pub(crate) async fn output(&self, id: &str, after: i64) -> Result<OutputPage, ClientError> {
        self.get(&format!("/api/v1/requests/{id}/output?after={after}"))
            .await
    }

    pub(crate) async fn running(&self, id: Option<&str>) -> Result<RunningStatus, ClientError> {
        match id {
            Some(id) => {
                self.get(&format!("/api/v1/status/running?requestId={id}"))
                    .await
            }
            None => self.get("/api/v1/status/running").await,
        }
    }

    pub(crate) async fn find(&self, filter: &RequestFilter) -> Result<Vec<Request>, ClientError> {
        self.get(&format!("/api/v1/requests?{}", filter.to_query()))
            .await
    }

    /// A bulk action on every request `filter` finds; `dry_run`: only say what it would do.
    pub(crate) async fn bulk(
        &self,
        action: proto::BulkAction,
        filter: &RequestFilter,
        dry_run: bool,
    ) -> Result<proto::BulkReport, ClientError> {
        let url = format!(
            "{}/api/v1/bulk/{}?{}&dryRun={dry_run}",
            self.addr,
            action.name(),
            filter.to_query()
        );
        let response = self.send(self.http.post(url)).await?;
        response.json().await.map_err(|err| self.error(err))
    }

    /// Every lock held or waited for.
    pub(crate) async fn locks(&self) -> Result<Vec<proto::LockStatus>, ClientError> {
        self.get("/api/v1/locks").await
    }

    /// The server's schedules.
    pub(crate) async fn schedules(&self) -> Result<Vec<proto::ScheduleStatus>, ClientError> {
        self.get("/api/v1/schedules").await
    }

    /// The server's triggers with their latest deliveries.
    pub(crate) async fn triggers(&self) -> Result<Vec<proto::TriggerStatus>, ClientError> {
        self.get("/api/v1/triggers").await
    }

    /// Notifications, newest first, as `query` filters them.
    pub(crate) async fn notifications(
        &self,
        query: &NotificationQuery,
    ) -> Result<Vec<proto::Notification>, ClientError> {
        let mut params = url::form_urlencoded::Serializer::new(String::new());
        for (name, value) in [
            ("webhook", &query.webhook),
            ("status", &query.status),
            ("request", &query.request),
        ] {
            if let Some(value) = value {
                params.append_pair(name, value);
            }
        }
        params.append_pair("limit", &query.limit.to_string());
        self.get(&format!("/api/v1/notifications?{}", params.finish()))
            .await
    }

    /// Approves (or rejects) an approval job of a request.
    pub(crate) async fn answer(
        &self,
        id: &str,
        job: Option<&str>,
        comment: Option<&str>,
        approved: bool,
    ) -> Result<(), ClientError> {
        let action = if approved { "approve" } else { "reject" };
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        if let Some(job) = job {
            query.append_pair("job", job);
        }
        if let Some(comment) = comment {
            query.append_pair("comment", comment);
        }
        let query = query.finish();
        let mut path = format!("{}/api/v1/requests/{id}/{action}", self.addr);
        if !query.is_empty() {
            path.push('?');
            path.push_str(&query);
        }
        self.send(self.http.put(path)).await?;
        Ok(())
    }

    /// Runs a finished request again (from a job, when given).
    pub(crate) async fn retry(
        &self,
        id: &str,
        part: &crate::client::spinc::RetryArgs,
    ) -> Result<(), ClientError> {
        let mut params = url::form_urlencoded::Serializer::new(String::new());
        if let Some(job) = &part.from {
            params.append_pair("from", job);
        }
        if part.failed_elements {
            params.append_pair("failedElements", "true");
        }
        if let Some(names) = &part.elements {
            params.append_pair("elements", names);
        }
        let query = params.finish();
        let mut path = format!("{}/api/v1/requests/{id}/retry", self.addr);
        if !query.is_empty() {
            path.push('?');
            path.push_str(&query);
        }
        self.send(self.http.put(path)).await?;
        Ok(())
    }

    /// Pauses (`paused`) or resumes a request.
    pub(crate) async fn pause(&self, id: &str, paused: bool) -> Result<(), ClientError> {
        let action = if paused { "pause" } else { "resume" };
        self.send(
            self.http
                .put(format!("{}/api/v1/requests/{id}/{action}", self.addr)),
        )
        .await?;
        Ok(())
    }

    pub(crate) async fn stop(&self, id: &str) -> Result<(), ClientError> {
        self.send(
            self.http
                .put(format!("{}/api/v1/requests/{id}/stop", self.addr)),
        )
        .await?;
        Ok(())
    }
}

/// Which notifications to list.
#[derive(Debug, Clone, Default)]
pub(crate) struct NotificationQuery {
    pub(crate) webhook: Option<String>,
    pub(crate) status: Option<String>,
    pub(crate) request: Option<String>,
    pub(crate) limit: u32,
}

impl ClientError {
    /// How a command that met this failure of the Request Manager ends.
    pub(crate) fn exit(&self) -> crate::exit::Exit {
        match self {
            ClientError::NotFound(_) => crate::exit::Exit::NotFound,
            ClientError::Unreachable { .. } => crate::exit::Exit::Unreachable,
            ClientError::Timeout { .. } => crate::exit::Exit::Timeout,
            ClientError::Api { .. } => crate::exit::Exit::Failure,
        }
    }
}
