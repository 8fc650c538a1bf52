//! Spin Cycle's v2 Request Manager API over axum (api.md §3-§4), with Spindle's fixes:
//! bad input is 400 with a message, an unknown id 404, a state conflict 409, shutting
//! down 503, and empty lists are `[]`. Plus one addition: `POST /api/v1/job-logs` takes
//! a batch of entries (Spindle's Job Runners send those; Spin Cycle's send one at a time
//! to `POST .../log`, which works too), and a finish may carry the chain's last entries
//! (`jobLogs`). Spindle's own: Job Runner registration and leases
//! (`/api/v1/job-runners`), try starts (`POST /api/v1/job-tries`), and fencing: a report
//! that names its runner and epoch in headers is refused (409, `Spindle-Fenced: true`)
//! unless that runner owns the request.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use proto::{
    CreateRequest, Fence, FinishRequest, JobLog, OutputChunk, OutputQuery, RequestFilter,
    RequestId, RequestProgress, RunnerRegistration, SuspendedJobChain, TryStart,
};
use serde::de::DeserializeOwned;

use crate::{Error, Manager};

/// Who created a request: there is no authentication yet, so the caller may say.
const USER_HEADER: &str = "x-spindle-user";

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let message = match &self {
            Error::Internal { .. } => {
                tracing::error!(error = %self.chain(), "request failed");
                "internal error; the Request Manager's log has the details".to_owned()
            }
            Error::Unavailable { .. } => {
                tracing::warn!(error = %self.chain(), "request refused: unavailable");
                self.to_string()
            }
            other => other.to_string(),
        };
        let fenced = matches!(self, Error::Fenced(_));
        let mut response =
            (status, Json(proto::Error::new(status.as_u16(), message))).into_response();
        if fenced {
            response.headers_mut().insert(
                proto::FENCED_HEADER,
                axum::http::HeaderValue::from_static("true"),
            );
        }
        response
    }
}

/// Decodes a JSON body with a message that says what was wrong. As in Spin Cycle, a
/// body must be declared `application/json` (else 415).
fn decode<T: DeserializeOwned>(headers: &HeaderMap, body: &Bytes, what: &str) -> Result<T, Error> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !content_type.starts_with("application/json") {
        return Err(Error::UnsupportedMediaType(format!(
            "Unsupported Media Type: the body must be JSON with Content-Type: application/json, not {content_type:?}"
        )));
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::BadRequest(format!(
            "the request body is empty; expected {what} as JSON"
        )));
    }
    serde_json::from_slice(body).map_err(|err| Error::BadRequest(format!("invalid {what}: {err}")))
}

/// The fence a Job Runner's report names in its headers (`Spindle-Runner`,
/// `Spindle-Epoch`); none when it names none (Spin Cycle's Job Runners).
fn fence(headers: &HeaderMap) -> Result<Option<Fence>, Error> {
    let Some(epoch) = headers.get(proto::EPOCH_HEADER) else {
        return Ok(None);
    };
    let epoch = epoch
        .to_str()
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
        .ok_or_else(|| {
            Error::BadRequest(format!(
                "header {}: {epoch:?} is not an epoch; expected a whole number",
                proto::EPOCH_HEADER
            ))
        })?;
    let instance = headers
        .get(proto::RUNNER_HEADER)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    Ok(Some(Fence { instance, epoch }))
}

/// Reconciles the request id in a body with the one in the path, the same way for every
/// endpoint that has both: an empty body id is the path's; another one is a 400.
fn reconcile(path_id: &str, body_id: &mut String, what: &str) -> Result<(), Error> {
    if body_id.is_empty() {
        path_id.clone_into(body_id);
    } else if body_id != path_id {
        return Err(Error::BadRequest(format!(
            "invalid {what}: requestId {body_id:?} does not match the request id in the URL, {path_id:?}"
        )));
    }
    Ok(())
}

/// Builds the router; every response carries `X-Spincycle-Version`.
pub fn router(manager: Arc<Manager>) -> Router {
    let version =
        HeaderValue::from_str(&proto::version()).expect("the version is a valid header value");
    let router = Router::new()
        .route("/api/v1/requests", post(create).get(find))
        .route("/api/v1/requests/{id}", get(get_request))
        .route("/api/v1/requests/{id}/start", put(start))
        .route("/api/v1/requests/{id}/stop", put(stop))
        .route("/api/v1/requests/{id}/pause", put(pause))
        .route("/api/v1/requests/{id}/resume", put(resume))
        .route("/api/v1/requests/{id}/retry", put(retry))
        .route("/api/v1/requests/{id}/approve", put(approve))
        .route("/api/v1/requests/{id}/reject", put(reject))
        .route("/api/v1/requests/{id}/job-chain", get(job_chain))
        .route("/api/v1/requests/{id}/audit", get(audit))
        .route("/api/v1/requests/{id}/spec", get(request_spec))
        .route("/api/v1/requests/{id}/log", get(job_log).post(add_log))
        .route("/api/v1/requests/{id}/log/{job_id}", get(latest_log))
        .route("/api/v1/requests/{id}/finish", put(finish))
        .route("/api/v1/requests/{id}/suspend", put(suspend))
        .route("/api/v1/requests/{id}/progress", put(progress))
        .route("/api/v1/requests/{id}/output", get(output))
        .route("/api/v1/job-logs", post(add_logs))
        .route("/api/v1/job-tries", post(add_try_starts))
        .route(
            "/api/v1/job-runners",
            post(register_runner).get(job_runners),
        )
        .route("/api/v1/job-runners/{instance}", delete(end_runner))
        .route("/api/v1/job-runners/{instance}/lease", put(renew_runner))
        .route("/api/v1/job-output", post(add_output))
        .route("/api/v1/request-list", get(request_list))
        .route("/api/v1/schedules", get(schedules))
        .route("/api/v1/status/running", get(running))
        .route(
            "/api/v1/openapi.json",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    proto::openapi::REQUEST_MANAGER,
                )
            }),
        )
        .route("/version", get(|| async { proto::version() }))
        .route(
            "/healthz",
            get(|| async { Json(serde_json::json!({"status": "ok"})) }),
        )
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .fallback(
            |method: axum::http::Method, uri: axum::http::Uri| async move {
                Error::NotFound(format!("Not Found: no endpoint {method} {}", uri.path()))
            },
        )
        .method_not_allowed_fallback(
            |method: axum::http::Method, uri: axum::http::Uri| async move {
                Error::MethodNotAllowed(format!(
                    "Method Not Allowed: {} does not take {method}",
                    uri.path()
                ))
            },
        )
        .layer(axum::middleware::from_fn_with_state(
            manager.clone(),
            authenticate,
        ))
        .layer(axum::middleware::from_fn(same_origin_changes))
        .layer(axum::middleware::map_response(
            move |mut response: Response| {
                let version = version.clone();
                async move {
                    response
                        .headers_mut()
                        .insert("x-spincycle-version", version);
                    response
                }
            },
        ));
    let router = match manager.telemetry().metrics.clone() {
        Some(metrics) => router.layer(axum::middleware::from_fn_with_state(
            metrics,
            telemetry::metrics::track_http,
        )),
        None => router,
    };
    router.with_state(manager)
}

type Shared = State<Arc<Manager>>;

/// What a route needs of its caller when authentication is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Nothing: health, version, the OpenAPI document, the web UI's pages and files.
    Nothing,
    /// An authenticated caller allowed to read.
    Read,
    /// An authenticated caller; the handler authorizes the op by the specs' ACLs.
    Caller,
    /// A Job Runner or a Request Manager (a service role).
    Service,
}

/// What `method path` needs, by the route it is.
pub fn needs(method: &axum::http::Method, path: &str) -> Needs {
    use axum::http::Method;
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    match (method.clone(), segments.as_slice()) {
        (_, ["healthz" | "readyz" | "version"])
        | (_, ["api", "v1", "openapi.json"])
        // Who the caller is, and signing in and out: they authenticate themselves.
        | (_, ["ui", "api", "me" | "session"]) => Needs::Nothing,
        (
            Method::POST,
            [
                "api",
                "v1",
                "job-logs" | "job-tries" | "job-output" | "job-runners",
            ],
        )
        | (Method::DELETE, ["api", "v1", "job-runners", _])
        | (Method::PUT, ["api", "v1", "job-runners", _, "lease"])
        | (
            Method::PUT,
            [
                "api",
                "v1",
                "requests",
                _,
                "finish" | "suspend" | "progress",
            ],
        )
        | (Method::POST, ["api", "v1", "requests", _, "log"]) => Needs::Service,
        (Method::POST, ["api", "v1", "requests"])
        | (
            Method::PUT,
            [
                "api",
                "v1",
                "requests",
                _,
                "start" | "stop" | "pause" | "resume" | "retry" | "approve" | "reject",
            ],
        ) => Needs::Caller,
        (_, ["api", ..] | ["ui", "api", ..] | ["metrics"]) => Needs::Read,
        // The web UI's pages and files: the pages ask the API, which checks.
        _ => Needs::Nothing,
    }
}

/// With authentication on: who the caller is (put in the request's extensions as an
/// [`auth::Caller`]), refused with 401 when unknown and 403 when the route needs what
/// its roles do not grant. The connection's [`auth::Peer`] comes from the server (TLS:
/// the client certificate), else from axum's connection info.
pub async fn authenticate(
    State(manager): Shared,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let Some(auth) = manager.auth() else {
        return next.run(request).await;
    };
    let needs = needs(request.method(), request.uri().path());
    if needs == Needs::Nothing {
        return next.run(request).await;
    }
    let peer = peer_of(&request);
    let caller = match auth.authenticate(request.headers(), &peer) {
        Ok(caller) => caller,
        Err(denied) => return Error::from(denied).into_response(),
    };
    let allowed = match needs {
        Needs::Read => auth.allow(&caller, auth::Access::Read),
        Needs::Service => auth.allow(&caller, auth::Access::Service),
        Needs::Caller | Needs::Nothing => Ok(()),
    };
    if let Err(denied) = allowed {
        return Error::from(denied).into_response();
    }
    request.extensions_mut().insert(caller);
    next.run(request).await
}

/// The connection a request came on.
pub fn peer_of(request: &axum::extract::Request) -> auth::Peer {
    auth::Peer::of(request.extensions())
}

/// Authorizes `op` on a request of `request_type` for the caller, when authentication
/// is on.
fn authorize(
    manager: &Manager,
    caller: Option<&auth::Caller>,
    op: &str,
    request_type: &str,
) -> Result<(), Error> {
    let Some(auth) = manager.auth() else {
        return Ok(());
    };
    let caller = caller.ok_or_else(|| Error::Unauthorized("authentication required".to_owned()))?;
    Ok(auth.authorize(caller, op, request_type)?)
}

/// Refuses a state change (any method but GET, HEAD and OPTIONS) that a browser sends
/// from a page of another origin (cross-site request forgery): the browser says so in
/// `Sec-Fetch-Site`, or its `Origin` names another host than the one asked. Clients that
/// are not browsers (the CLI, Job Runners, Spin Cycle's `spinc`) send neither header and
/// are not affected.
pub async fn same_origin_changes(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if let Some(refusal) = cross_site(request.method(), request.headers()) {
        return Error::Forbidden(refusal).into_response();
    }
    next.run(request).await
}

/// Why a request is a cross-site state change, if it is one.
pub fn cross_site(method: &axum::http::Method, headers: &HeaderMap) -> Option<String> {
    use axum::http::Method;
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return None;
    }
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = text("sec-fetch-site")
        && !matches!(site, "same-origin" | "none")
    {
        return Some(format!(
            "Forbidden: {method} from a page of another site (Sec-Fetch-Site: {site}) is refused; \
             use Spindle's own pages, the CLI or the API without a browser"
        ));
    }
    if let Some(origin) = text("origin") {
        let origin_host = origin
            .split_once("://")
            .map(|(_, rest)| rest)
            .unwrap_or_default();
        let host = text("host").unwrap_or_default();
        if origin_host.is_empty() || !origin_host.eq_ignore_ascii_case(host) {
            return Some(format!(
                "Forbidden: {method} from a page of origin {origin:?} is refused; this server is {host:?}"
            ));
        }
    }
    None
}

/// The metrics in Prometheus' (OpenMetrics) text format, the gauges read from the
/// database first; 404 when metrics are off.
async fn metrics(State(manager): Shared, headers: HeaderMap) -> Result<Response, Error> {
    let Some(metrics) = manager.telemetry().metrics.clone() else {
        return Err(Error::NotFound(
            "Not Found: metrics are off (metrics: false)".to_owned(),
        ));
    };
    manager.refresh_gauges().await;
    Ok(telemetry::metrics::response(
        &metrics,
        headers.get(header::ACCEPT),
    ))
}

async fn create(
    State(manager): Shared,
    caller: Option<axum::Extension<auth::Caller>>,
    peer: Option<axum::Extension<auth::Peer>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Error> {
    let create_request: CreateRequest = decode(
        &headers,
        &body,
        "create request ({\"type\": ..., \"args\": {...}})",
    )?;
    if create_request.request_type.is_empty() {
        return Err(Error::BadRequest(
            "Type is empty, must be a request name".to_owned(),
        ));
    }
    // Checked before anything is stored: a denied start leaves nothing behind.
    let caller = caller.map(|axum::Extension(caller)| caller);
    authorize(
        &manager,
        caller.as_ref(),
        "start",
        &create_request.request_type,
    )?;
    let user = match &caller {
        // Authenticated: the caller is the user, whatever the request says.
        Some(caller) => caller.name.clone(),
        None => headers
            .get(USER_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
            .unwrap_or_else(|| create_request.user.clone()),
    };
    let request = manager
        .create(create_request, &user, &address_of(peer.as_deref()))
        .await?;
    let location = format!("/api/v1/requests/{}", request.id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(request),
    )
        .into_response())
}

async fn find(State(manager): Shared, RawQuery(query): RawQuery) -> Result<Response, Error> {
    let query = query.unwrap_or_default();
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    let filter = RequestFilter::from_query(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(|err| Error::BadRequest(err.to_string()))?;
    Ok(Json(manager.find(&filter).await?).into_response())
}

/// `?chain=true` asks for the job chain too (Spin Cycle always sent it; Spindle only
/// when asked: `GET .../job-chain` is the chain alone). `?wait=DURATION` (a Spindle
/// extension) answers once the request has ended, or after the duration (at most a
/// minute) as it is then: one call instead of polling.
#[derive(Debug, serde::Deserialize)]
struct GetQuery {
    #[serde(default)]
    chain: bool,
    #[serde(default)]
    wait: Option<String>,
}

async fn get_request(
    State(manager): Shared,
    Path(id): Path<String>,
    query: Result<Query<GetQuery>, QueryRejection>,
) -> Result<Response, Error> {
    let Query(query) = query.map_err(|err| {
        Error::BadRequest(format!(
            "invalid query: {}; expected chain=true or chain=false, wait=DURATION",
            err.body_text()
        ))
    })?;
    let request = match &query.wait {
        None => manager.get(&id, query.chain).await?,
        Some(wait) => {
            let wait = proto::duration::parse(wait).map_err(|err| {
                Error::BadRequest(format!(
                    "invalid wait {wait:?}: {err}; expected a duration such as 30s (at most 1m)"
                ))
            })?;
            manager.wait_for_end(&id, query.chain, wait).await?
        }
    };
    Ok(Json(request).into_response())
}

/// Who asks for a change of a request's course, and from where: the authenticated
/// caller (when authentication is on), the connection's peer, and the user name the
/// audit trail records. Read the same way by every handler that changes a request.
struct Acting {
    caller: Option<auth::Caller>,
    peer: Option<auth::Peer>,
    user: String,
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Acting {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Acting, Self::Rejection> {
        let caller = parts.extensions.get::<auth::Caller>().cloned();
        let peer = parts.extensions.get::<auth::Peer>().cloned();
        let user = who(caller.as_ref(), &parts.headers);
        Ok(Acting { caller, peer, user })
    }
}

async fn start(
    State(manager): Shared,
    acting: Acting,
    Path(id): Path<RequestId>,
) -> Result<StatusCode, Error> {
    // Unlike Spin Cycle, starting a PENDING request is authorized as a start.
    change(&manager, acting, &id, Op::Start).await
}

async fn stop(
    State(manager): Shared,
    acting: Acting,
    Path(id): Path<RequestId>,
) -> Result<StatusCode, Error> {
    change(&manager, acting, &id, Op::Stop).await
}

/// Spindle's pause: running jobs finish, nothing new starts until `resume`.
async fn pause(
    State(manager): Shared,
    acting: Acting,
    Path(id): Path<RequestId>,
) -> Result<StatusCode, Error> {
    change(&manager, acting, &id, Op::Pause).await
}

async fn resume(
    State(manager): Shared,
    acting: Acting,
    Path(id): Path<RequestId>,
) -> Result<StatusCode, Error> {
    change(&manager, acting, &id, Op::Resume).await
}

/// `PUT .../retry[?from=JOB]`: runs a FAIL or STOPPED request again as the same request.
#[derive(Debug, serde::Deserialize)]
struct RetryQuery {
    from: Option<String>,
}

async fn retry(
    State(manager): Shared,
    acting: Acting,
    Path(id): Path<RequestId>,
    query: Result<Query<RetryQuery>, QueryRejection>,
) -> Result<StatusCode, Error> {
    let Query(query) = query.map_err(|err| {
        Error::BadRequest(format!(
            "invalid query: {}; expected from=JOB (a job id or name) or nothing",
            err.body_text()
        ))
    })?;
    change(&manager, acting, &id, Op::Retry(query.from)).await
}

/// `PUT .../approve` and `.../reject`: `job` names the approval job (its id or name;
/// without it, the one that waits), `comment` is kept with the answer.
#[derive(Debug, serde::Deserialize)]
struct AnswerQuery {
    job: Option<String>,
    #[serde(default)]
    comment: String,
}

async fn approve(
    State(manager): Shared,
    acting: Acting,
    Path(id): Path<RequestId>,
    query: Result<Query<AnswerQuery>, QueryRejection>,
) -> Result<StatusCode, Error> {
    answer(&manager, acting, &id, query, true).await
}

async fn reject(
    State(manager): Shared,
    acting: Acting,
    Path(id): Path<RequestId>,
    query: Result<Query<AnswerQuery>, QueryRejection>,
) -> Result<StatusCode, Error> {
    answer(&manager, acting, &id, query, false).await
}

/// Answers an approval job. With authentication on, the caller needs one of the job's
/// `roles` (or an admin role); a job without roles is answered by whoever may start the
/// request. Recorded in the audit trail.
async fn answer(
    manager: &Manager,
    acting: Acting,
    id: &RequestId,
    query: Result<Query<AnswerQuery>, QueryRejection>,
    approved: bool,
) -> Result<StatusCode, Error> {
    let Query(query) = query.map_err(|err| {
        Error::BadRequest(format!(
            "invalid query: {}; expected job=JOB (an approval job's id or name) and comment=TEXT, both optional",
            err.body_text()
        ))
    })?;
    let job = manager.approval_job(id, query.job.as_deref()).await?;
    if let Some(auth) = manager.auth() {
        let caller = acting
            .caller
            .as_ref()
            .ok_or_else(|| Error::Unauthorized("authentication required".to_owned()))?;
        let roles = job::approval::roles(&job.args).unwrap_or_default();
        if roles.is_empty() {
            let request = manager.store().get_request(id.as_str(), false).await?;
            authorize(manager, Some(caller), "start", &request.request_type)?;
        } else if !auth.is_admin(caller) && !caller.roles.iter().any(|r| roles.contains(r)) {
            return Err(Error::Forbidden(format!(
                "{} may not answer approval job {} of request {id}: it takes one of the roles {}; the caller has {}",
                caller.name,
                job.name,
                roles.join(", "),
                if caller.roles.is_empty() {
                    "none".to_owned()
                } else {
                    caller.roles.join(", ")
                }
            )));
        }
    }
    let given = proto::Answer {
        approved,
        user: acting.user.clone(),
        at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        comment: query.comment,
    };
    manager.answer(id, &job, given).await?;
    let action = if approved { "approve" } else { "reject" };
    record(manager, id.as_str(), action, acting).await;
    Ok(StatusCode::OK)
}

/// A change of a request's course, as the API's callers ask for it.
#[derive(Debug)]
enum Op {
    Start,
    Stop,
    Pause,
    Resume,
    /// From this job (and every job after it), when given.
    Retry(Option<String>),
}

impl Op {
    /// Its name in the audit trail.
    fn action(&self) -> &'static str {
        match self {
            Op::Start => "start",
            Op::Stop => "stop",
            Op::Pause => "pause",
            Op::Resume => "resume",
            Op::Retry(_) => "retry",
        }
    }

    /// The ACL operation (config-auth.md §6) it is authorized as: what runs a request
    /// is a start, what interrupts one a stop.
    fn acl_op(&self) -> &'static str {
        match self {
            Op::Start | Op::Retry(_) => "start",
            Op::Stop | Op::Pause | Op::Resume => "stop",
        }
    }
}

/// Changes a request's course (`op`), authorized by its type's ACL when authentication
/// is on (an unknown id is 404 first), and records it in the audit trail.
async fn change(
    manager: &Manager,
    acting: Acting,
    id: &RequestId,
    op: Op,
) -> Result<StatusCode, Error> {
    if manager.auth().is_some() {
        let request = manager.store().get_request(id.as_str(), false).await?;
        authorize(
            manager,
            acting.caller.as_ref(),
            op.acl_op(),
            &request.request_type,
        )?;
    }
    match &op {
        Op::Start => manager.start(id).await?,
        Op::Stop => manager.stop(id).await?,
        Op::Pause => manager.pause(id, true).await?,
        Op::Resume => manager.pause(id, false).await?,
        Op::Retry(from) => manager.retry(id, from.as_deref()).await?,
    }
    record(manager, id.as_str(), op.action(), acting).await;
    Ok(StatusCode::OK)
}

/// Who a call is from: the authenticated caller, else the name the caller gave.
fn who(caller: Option<&auth::Caller>, headers: &HeaderMap) -> String {
    match caller {
        Some(caller) => caller.name.clone(),
        None => headers
            .get(USER_HEADER)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned(),
    }
}

/// The caller's address as the audit trail keeps it (empty when not known).
fn address_of(peer: Option<&auth::Peer>) -> String {
    peer.and_then(|p| p.addr)
        .map(|addr| addr.ip().to_string())
        .unwrap_or_default()
}

/// Adds to the request's audit trail. The action is done by now: a trail that cannot
/// be written is logged, not turned into a failure of what was done.
async fn record(manager: &Manager, request_id: &str, action: &str, acting: Acting) {
    let event = proto::AuditEvent {
        at: chrono::Utc::now(),
        action: action.to_owned(),
        user: acting.user,
        address: address_of(acting.peer.as_ref()),
    };
    if let Err(err) = manager.store().add_audit(request_id, &event).await {
        tracing::error!(request_id, action, error = %err, "the audit trail could not be written");
    }
}

async fn audit(State(manager): Shared, Path(id): Path<String>) -> Result<Response, Error> {
    // 404 for an unknown request, not an empty trail.
    manager.store().get_request(&id, false).await?;
    Ok(Json(manager.store().audit(&id).await?).into_response())
}

/// The specs' schedules with their next and last runs (Spindle).
async fn schedules(State(manager): Shared) -> Result<Response, Error> {
    Ok(Json(manager.schedules().await?).into_response())
}

/// The spec files the request was built from (Spindle's spec history).
async fn request_spec(State(manager): Shared, Path(id): Path<String>) -> Result<Response, Error> {
    Ok(Json(manager.request_spec(&id).await?).into_response())
}

async fn job_chain(State(manager): Shared, Path(id): Path<String>) -> Result<Response, Error> {
    Ok(Json(manager.job_chain(&id).await?).into_response())
}

async fn job_log(State(manager): Shared, Path(id): Path<String>) -> Result<Response, Error> {
    Ok(Json(manager.job_log(&id).await?).into_response())
}

async fn latest_log(
    State(manager): Shared,
    Path((id, job_id)): Path<(RequestId, String)>,
) -> Result<Response, Error> {
    Ok(Json(manager.latest_job_log(&id, &job_id).await?).into_response())
}

async fn add_log(
    State(manager): Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Error> {
    let mut entry: JobLog = decode(&headers, &body, "job log entry")?;
    reconcile(&id, &mut entry.request_id, "job log entry")?;
    manager
        .add_job_logs(vec![entry.clone()], fence(&headers)?.as_ref())
        .await?;
    Ok((StatusCode::CREATED, Json(entry)).into_response())
}

async fn add_logs(
    State(manager): Shared,
    headers: HeaderMap,
    body: Bytes,
) -> Result<StatusCode, Error> {
    let entries: Vec<JobLog> = decode(&headers, &body, "list of job log entries")?;
    if let Some(entry) = entries
        .iter()
        .find(|entry| entry.request_id.is_empty() || entry.job_id.is_empty())
    {
        return Err(Error::BadRequest(format!(
            "job log entry of job {:?} has no requestId or jobId; expected both",
            entry.job_id
        )));
    }
    manager
        .add_job_logs(entries, fence(&headers)?.as_ref())
        .await?;
    Ok(StatusCode::CREATED)
}

async fn add_output(
    State(manager): Shared,
    headers: HeaderMap,
    body: Bytes,
) -> Result<StatusCode, Error> {
    let chunks: Vec<OutputChunk> = decode(&headers, &body, "list of output chunks")?;
    manager
        .add_output(chunks, fence(&headers)?.as_ref())
        .await?;
    Ok(StatusCode::CREATED)
}

async fn add_try_starts(
    State(manager): Shared,
    headers: HeaderMap,
    body: Bytes,
) -> Result<StatusCode, Error> {
    let starts: Vec<TryStart> = decode(&headers, &body, "list of try starts")?;
    manager
        .add_try_starts(starts, fence(&headers)?.as_ref())
        .await?;
    Ok(StatusCode::CREATED)
}

async fn register_runner(
    State(manager): Shared,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Error> {
    let registration: RunnerRegistration = decode(
        &headers,
        &body,
        "job runner registration ({\"instanceId\": ..., \"url\": ..., \"lease\": ...})",
    )?;
    let runner = manager.register_runner(registration).await?;
    Ok((StatusCode::CREATED, Json(runner)).into_response())
}

async fn job_runners(State(manager): Shared) -> Result<Response, Error> {
    Ok(Json(manager.job_runners().await?).into_response())
}

/// A renewal's body, when it has one, names the chains the runner holds.
async fn renew_runner(
    State(manager): Shared,
    Path(instance): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Error> {
    let renewal: Option<proto::LeaseRenewal> = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        Some(decode(
            &headers,
            &body,
            "lease renewal ({\"running\": [request ids]})",
        )?)
    };
    let held = renewal.as_ref().map(|renewal| renewal.running.as_slice());
    Ok(Json(manager.renew_runner(&instance, held).await?).into_response())
}

async fn end_runner(
    State(manager): Shared,
    Path(instance): Path<String>,
) -> Result<StatusCode, Error> {
    manager.end_runner(&instance).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn output(
    State(manager): Shared,
    Path(id): Path<String>,
    query: Result<Query<OutputQuery>, QueryRejection>,
) -> Result<Response, Error> {
    let Query(query) = query.map_err(|err| {
        Error::BadRequest(format!(
            "{}; expected after=CURSOR, job=JOB_ID, try=N, limit=1..{}",
            err.body_text(),
            OutputQuery::MAX_LIMIT
        ))
    })?;
    if query.r#try.is_some() && query.job.is_none() {
        return Err(Error::BadRequest(
            "try= without job=; expected job=JOB_ID with it".to_owned(),
        ));
    }
    if !(1..=OutputQuery::MAX_LIMIT).contains(&query.limit) {
        return Err(Error::BadRequest(format!(
            "limit={} is out of range; expected 1..{}",
            query.limit,
            OutputQuery::MAX_LIMIT
        )));
    }
    Ok(Json(manager.output(&id, &query).await?).into_response())
}

async fn finish(
    State(manager): Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<StatusCode, Error> {
    let mut finish: FinishRequest = decode(
        &headers,
        &body,
        "finish request ({\"state\": ..., \"finishedAt\": ...})",
    )?;
    reconcile(&id, &mut finish.request_id, "finish request")?;
    for entry in &mut finish.job_logs {
        reconcile(&id, &mut entry.request_id, "finish request's job log entry")?;
        if entry.job_id.is_empty() {
            return Err(Error::BadRequest(
                "finish request: a job log entry has no jobId; expected one in each".to_owned(),
            ));
        }
    }
    manager.finish(&finish, fence(&headers)?.as_ref()).await?;
    Ok(StatusCode::OK)
}

async fn suspend(
    State(manager): Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<StatusCode, Error> {
    let mut suspended: SuspendedJobChain = decode(&headers, &body, "suspended job chain")?;
    reconcile(&id, &mut suspended.request_id, "suspended job chain")?;
    manager
        .suspend(&suspended, fence(&headers)?.as_ref())
        .await?;
    Ok(StatusCode::OK)
}

async fn progress(
    State(manager): Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Error> {
    let mut progress: RequestProgress = decode(
        &headers,
        &body,
        "progress ({\"requestId\": ..., \"finishedJobs\": ...})",
    )?;
    reconcile(&id, &mut progress.request_id, "progress")?;
    manager
        .progress(&progress, fence(&headers)?.as_ref())
        .await?;
    Ok(Json(serde_json::Value::Null).into_response())
}

async fn readyz(State(manager): Shared) -> Result<Response, Error> {
    manager.ready().await?;
    Ok(Json(serde_json::json!({"status": "ready"})).into_response())
}

async fn request_list(State(manager): Shared) -> Response {
    Json(manager.request_specs()).into_response()
}

#[derive(Debug)]
struct RunningQuery {
    request_id: Option<String>,
}

async fn running(State(manager): Shared, RawQuery(query): RawQuery) -> Result<Response, Error> {
    let query: RunningQuery = running_query(query.as_deref().unwrap_or_default());
    let request_id = query
        .request_id
        .filter(|id| !id.is_empty())
        .map(RequestId::new);
    Ok(Json(manager.running(request_id.as_ref()).await?).into_response())
}

/// Reads `requestId` from a query string (other parameters, such as `orderBy`, are
/// accepted and ignored).
fn running_query(query: &str) -> RunningQuery {
    let request_id = url::form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == "requestId")
        .map(|(_, value)| value.into_owned());
    RunningQuery { request_id }
}
