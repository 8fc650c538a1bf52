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
        let retry_after = match &self {
            Error::Overloaded { retry_after, .. } => Some(*retry_after),
            _ => None,
        };
        let mut response =
            (status, Json(proto::Error::new(status.as_u16(), message))).into_response();
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
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
        .route("/api/v1/requests/{id}/elements", get(elements))
        .route("/api/v1/requests/{id}/spec", get(request_spec))
        .route("/api/v1/requests/{id}/log", get(job_log).post(add_log))
        .route("/api/v1/requests/{id}/log/{job_id}", get(latest_log))
        .route("/api/v1/requests/{id}/finish", put(finish))
        .route("/api/v1/requests/{id}/suspend", put(suspend))
        .route("/api/v1/requests/{id}/progress", put(progress))
        .route("/api/v1/requests/{id}/output", get(output))
        .route("/api/v1/requests/{id}/job-locks", post(take_job_locks))
        .route(
            "/api/v1/requests/{id}/job-locks/{job_id}",
            delete(release_job_locks),
        )
        .route("/api/v1/job-logs", post(add_logs))
        .route("/api/v1/job-tries", post(add_try_starts))
        .route(
            "/api/v1/job-runners",
            post(register_runner).get(job_runners),
        )
        .route("/api/v1/job-runners/{instance}", delete(end_runner))
        .route("/api/v1/job-runners/{instance}/lease", put(renew_runner))
        .route("/api/v1/job-output", post(add_output))
        .route("/api/v1/bulk/{action}", post(bulk))
        .route("/api/v1/request-list", get(request_list))
        .route("/api/v1/schedules", get(schedules))
        .route("/api/v1/triggers", get(triggers))
        .route("/api/v1/notifications", get(notifications))
        .route(
            "/api/v1/requests/{id}/approval-waiting",
            post(approval_waiting),
        )
        .route("/api/v1/triggers/{name}", post(trigger))
        .route("/api/v1/locks", get(locks))
        .route("/api/v1/status/running", get(running))
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
        .layer(axum::middleware::from_fn(same_origin_changes));
    let openapi = proto::openapi::REQUEST_MANAGER;
    let router = telemetry::service::about_routes(router, openapi, proto::version());
    let metrics = manager.telemetry().metrics.clone();
    telemetry::service::outer_layers(router, version, metrics).with_state(manager)
}

type Shared = State<Arc<Manager>>;

mod access;
mod bulk;
mod notifications;
mod reports;
mod requests;

use access::*;
pub use access::{Needs, authenticate, cross_site, needs, peer_of, same_origin_changes};
use bulk::*;
use notifications::*;
use reports::*;
use requests::*;
