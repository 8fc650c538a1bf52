//! Notifications (issue #33): the list of what was sent to the webhooks, and a Job
//! Runner's word that an approval waits.

use super::*;

/// Which notifications to list: `webhook`, `status`, `request` (an id), `limit`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NotificationsQuery {
    webhook: Option<String>,
    status: Option<String>,
    request: Option<String>,
    limit: Option<u32>,
}

/// Notifications, newest first (at most `limit`, default 100, at most 1,000).
pub(super) async fn notifications(
    State(manager): Shared,
    query: Result<Query<NotificationsQuery>, QueryRejection>,
) -> Result<Response, Error> {
    let Query(query) = query.map_err(|err| {
        Error::BadRequest(format!(
            "invalid query: {}; expected webhook=NAME, status=pending|delivered|failed, request=ID, limit=N",
            err.body_text()
        ))
    })?;
    let filter = store::NotificationFilter {
        webhook: query.webhook,
        status: query.status,
        request_id: query.request,
        limit: query.limit.unwrap_or(100).clamp(1, 1000),
    };
    Ok(Json(manager.notifications(filter).await?).into_response())
}

/// What a Job Runner sends when an approval job begins to wait.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ApprovalWaiting {
    job_id: String,
}

pub(super) async fn approval_waiting(
    State(manager): Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<StatusCode, Error> {
    let waiting: ApprovalWaiting =
        decode(&headers, &body, "approval that waits ({\"jobId\": ID})")?;
    manager.approval_waiting(&id, &waiting.job_id).await?;
    Ok(StatusCode::NO_CONTENT)
}
