//! Spin Cycle's v2 Job Runner API (api.md §5) over axum. Every 4xx and 5xx answer has
//! the Request Manager's error body (`proto::Error`: message and status).

use std::sync::Arc;

use axum::RequestExt;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};

use crate::{Error, Runner};

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = match self {
            Error::ShuttingDown | Error::NotRegistered => StatusCode::SERVICE_UNAVAILABLE,
            Error::Invalid(_) => StatusCode::BAD_REQUEST,
            // Valid, but of job types this runner lacks: the chain waits for one that has.
            Error::Refused(ref err) if err.waits_for_another_runner() => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            Error::Refused(ref err) if err.is_invalid_chain() => StatusCode::BAD_REQUEST,
            // Job states that do not fit: Spin Cycle's 500.
            Error::Refused(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Error::AlreadyRunning(_) => StatusCode::CONFLICT,
            Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::NotStopped(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        error_response(status, self.to_string())
    }
}

fn error_response(status: StatusCode, message: String) -> Response {
    (status, Json(proto::Error::new(status.as_u16(), message))).into_response()
}

fn decode<T: serde::de::DeserializeOwned>(body: &[u8], what: &str) -> Result<T, Error> {
    serde_json::from_slice(body).map_err(|err| Error::Invalid(format!("invalid {what}: {err}")))
}

/// With authentication on: only Request Managers (a service role) may hand chains over,
/// stop them and read the running status; `/metrics` and `/readyz` need a monitor (a
/// metrics role) or a caller allowed to read; health, version and the OpenAPI document need nothing. The connection's
/// [`auth::Peer`] comes from the server (TLS), else from axum's connection info.
pub fn with_auth(router: Router, auth: Arc<auth::Auth>) -> Router {
    router.layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let auth = auth.clone();
            async move {
                let path = request.uri().path();
                let access = match path {
                    "/healthz" | "/version" | "/api/v1/openapi.json" => None,
                    "/metrics" | "/readyz" => Some(auth::Access::Observe),
                    _ => Some(auth::Access::Service),
                };
                let Some(access) = access else {
                    return next.run(request).await;
                };
                let peer = auth::Peer::of(request.extensions());
                let checked = auth
                    .authenticate(request.headers(), &peer)
                    .and_then(|caller| auth.allow(&caller, access));
                match checked {
                    Ok(()) => next.run(request).await,
                    Err(denied) => error_response(
                        StatusCode::from_u16(denied.status()).unwrap_or(StatusCode::FORBIDDEN),
                        denied.to_string(),
                    ),
                }
            }
        },
    ))
}

/// Builds the router; every response carries `X-Spincycle-Version`.
pub fn router(runner: Arc<Runner>, version: &str) -> Router {
    let version = HeaderValue::from_str(version).expect("the version is a valid header value");
    let version_text = version.to_str().unwrap_or_default().to_owned();
    let router = Router::new()
        .route("/api/v1/job-chains", post(new_chain))
        .route("/api/v1/job-chains/resume", post(resume))
        .route("/api/v1/job-chains/{id}/stop", put(stop))
        .route("/api/v1/job-chains/{id}/pause", put(pause))
        .route("/api/v1/job-chains/{id}/unpause", put(unpause))
        .route("/api/v1/job-chains/{id}/jobs/{job}/answer", put(answer))
        .route("/api/v1/status/running", get(running))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .fallback(
            |method: axum::http::Method, uri: axum::http::Uri| async move {
                error_response(
                    StatusCode::NOT_FOUND,
                    format!("Not Found: no endpoint {method} {}", uri.path()),
                )
            },
        )
        .method_not_allowed_fallback(
            |method: axum::http::Method, uri: axum::http::Uri| async move {
                error_response(
                    StatusCode::METHOD_NOT_ALLOWED,
                    format!("Method Not Allowed: {} does not take {method}", uri.path()),
                )
            },
        );
    let router = telemetry::service::about_routes(router, proto::openapi::JOB_RUNNER, version_text);
    let metrics = runner.telemetry().metrics.clone();
    telemetry::service::outer_layers(router, version, metrics).with_state(runner)
}

/// The metrics in Prometheus' (OpenMetrics) text format; 404 when metrics are off.
async fn metrics(State(runner): Shared, headers: HeaderMap) -> Response {
    match &runner.telemetry().metrics {
        Some(metrics) => telemetry::metrics::response(metrics, headers.get(header::ACCEPT)),
        None => error_response(
            StatusCode::NOT_FOUND,
            "Not Found: metrics are off (metrics: false)".to_owned(),
        ),
    }
}

type Shared = State<Arc<Runner>>;

/// The epoch of a hand-over (`Spindle-Epoch`; 0 from a Request Manager that sends none,
/// such as Spin Cycle's).
fn epoch(headers: &HeaderMap) -> Result<u64, Error> {
    match headers.get(proto::EPOCH_HEADER) {
        None => Ok(0),
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "header {}: {value:?} is not an epoch; expected a whole number",
                    proto::EPOCH_HEADER
                ))
            }),
    }
}

/// The hand-over's span, from its W3C `traceparent` header; a header that is not one is
/// ignored (the chain is traced under its request's root span), as the W3C says.
/// Whether a hand-over is of a paused request.
fn paused(headers: &HeaderMap) -> bool {
    headers
        .get(proto::PAUSED_HEADER)
        .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"true"))
}

/// A hand-over's secret args (`Spindle-Secrets`: base64 of `[[placeholder, value], ...]`).
fn secrets(headers: &HeaderMap) -> Result<job::Secrets, Error> {
    use base64::Engine as _;
    let Some(value) = headers.get(proto::SECRETS_HEADER) else {
        return Ok(job::Secrets::default());
    };
    let invalid = || {
        Error::Invalid(format!(
            "header {}: not base64 of a JSON list of [placeholder, value] pairs",
            proto::SECRETS_HEADER
        ))
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(value.as_bytes())
        .map_err(|_| invalid())?;
    let pairs: Vec<(String, String)> = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    Ok(job::Secrets::new(pairs))
}

fn trace(headers: &HeaderMap) -> Option<telemetry::SpanContext> {
    headers
        .get("traceparent")
        .and_then(|value| value.to_str().ok())
        .and_then(telemetry::SpanContext::from_traceparent)
}

/// The answer to a hand-over: where the chain lives and which instance runs it.
fn accepted(location: String, instance: String) -> Response {
    (
        StatusCode::OK,
        [
            (header::LOCATION.as_str(), location),
            (proto::RUNNER_HEADER, instance),
        ],
    )
        .into_response()
}

/// A request's body in one buffer of its announced length, within the server's body
/// limit: joining a large chain's chunks afterwards would hold the body twice.
async fn read_body(request: Request) -> Result<Vec<u8>, Response> {
    use http_body_util::BodyExt;
    // A hostile length costs address space, not memory, until bytes arrive.
    const MOST_RESERVED: usize = 64 << 20;
    let announced = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = request.with_limited_body().into_body();
    let mut buffer = Vec::with_capacity(announced.min(MOST_RESERVED));
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|err| {
            let err = err.into_inner();
            let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&*err);
            while let Some(at) = source {
                if at.is::<http_body_util::LengthLimitError>() {
                    return error_response(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        format!("request body too large: {at}"),
                    );
                }
                source = at.source();
            }
            error_response(
                StatusCode::BAD_REQUEST,
                format!("reading the request body: {err}"),
            )
        })?;
        if let Some(data) = frame.data_ref() {
            buffer.extend_from_slice(data);
        }
    }
    Ok(buffer)
}

/// A hand-over's epoch and chain, decoded from its body (dropped here: a large chain's
/// body is not kept while its chain is built and runs).
async fn hand_over<T: serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    request: Request,
    what: &str,
) -> Result<(u64, T), Response> {
    let epoch = epoch(headers).map_err(Error::into_response)?;
    let body = read_body(request).await?;
    let chain = decode(&body, what).map_err(Error::into_response)?;
    Ok((epoch, chain))
}

async fn new_chain(
    State(runner): Shared,
    headers: HeaderMap,
    request: Request,
) -> Result<Response, Response> {
    // Straight into the runner's form (no `proto::JobChain` in between).
    let (epoch, job_chain): (u64, chain::Incoming) =
        hand_over(&headers, request, "job chain").await?;
    let location = runner.location(job_chain.request_id());
    let instance = runner
        .run_chain(
            job_chain,
            epoch,
            trace(&headers),
            paused(&headers),
            secrets(&headers).map_err(Error::into_response)?,
        )
        .map_err(Error::into_response)?;
    Ok(accepted(location, instance))
}

async fn resume(
    State(runner): Shared,
    headers: HeaderMap,
    request: Request,
) -> Result<Response, Response> {
    let (epoch, suspended): (u64, chain::Resumed) =
        hand_over(&headers, request, "suspended job chain").await?;
    let location = runner.location(suspended.request_id());
    let instance = runner
        .resume(
            suspended,
            epoch,
            trace(&headers),
            paused(&headers),
            secrets(&headers).map_err(Error::into_response)?,
        )
        .map_err(Error::into_response)?;
    Ok(accepted(location, instance))
}

async fn stop(State(runner): Shared, Path(id): Path<String>) -> Result<StatusCode, Error> {
    runner.stop(&id).await?;
    Ok(StatusCode::OK)
}

async fn pause(State(runner): Shared, Path(id): Path<String>) -> Result<StatusCode, Error> {
    runner.set_paused(&id, true)?;
    Ok(StatusCode::OK)
}

async fn unpause(State(runner): Shared, Path(id): Path<String>) -> Result<StatusCode, Error> {
    runner.set_paused(&id, false)?;
    Ok(StatusCode::OK)
}

/// The answer to an approval job: handed to it if it waits here, else kept for when it
/// begins (the Request Manager has it stored, and hands it over again with the chain).
async fn answer(
    State(runner): Shared,
    Path((id, job)): Path<(String, String)>,
    body: Bytes,
) -> Result<StatusCode, Error> {
    let answer: proto::Answer = decode(&body, "answer")?;
    runner.answer(&id, &job, answer);
    Ok(StatusCode::OK)
}

/// Ready once registered with a Request Manager (it holds its lease).
async fn readyz(State(runner): Shared) -> Response {
    if runner.is_registered() {
        Json(serde_json::json!({"status": "ready"})).into_response()
    } else {
        error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: not registered with a Request Manager".to_owned(),
        )
    }
}

async fn running(State(runner): Shared, RawQuery(query): RawQuery) -> Result<Response, Error> {
    let query = query.unwrap_or_default();
    let request_id = url::form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == "requestId")
        .map(|(_, value)| value.into_owned())
        .filter(|id| !id.is_empty());
    Ok(Json(runner.running(request_id.as_deref()).await?).into_response())
}
