//! The routes of Job Runners: job log entries, output, try starts, progress, a chain's
//! end and suspension, and their registry (leases).

use super::*;

pub(super) async fn job_log(
    State(manager): Shared,
    Path(id): Path<String>,
) -> Result<Response, Error> {
    Ok(Json(manager.job_log(&id).await?).into_response())
}

pub(super) async fn latest_log(
    State(manager): Shared,
    Path((id, job_id)): Path<(RequestId, String)>,
) -> Result<Response, Error> {
    Ok(Json(manager.latest_job_log(&id, &job_id).await?).into_response())
}

pub(super) async fn add_log(
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

pub(super) async fn add_logs(
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

pub(super) async fn add_output(
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

pub(super) async fn add_try_starts(
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

pub(super) async fn take_job_locks(
    State(manager): Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Error> {
    let take: proto::TakeJobLocks = decode(&headers, &body, "job's locks to take")?;
    let taken = manager
        .take_job_locks(&id, &take, fence(&headers)?.as_ref())
        .await?;
    Ok(Json(taken).into_response())
}

pub(super) async fn release_job_locks(
    State(manager): Shared,
    Path((id, job_id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<StatusCode, Error> {
    manager
        .release_job_locks(&id, &job_id, fence(&headers)?.as_ref())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn register_runner(
    State(manager): Shared,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Error> {
    let registration: RunnerRegistration = decode(
        &headers,
        &body,
        "job runner registration ({\"instanceId\": ..., \"url\": ..., \"lease\": ...})",
    )?;
    let version = [(proto::API_VERSION_HEADER, proto::API_VERSION.to_string())];
    match manager.register_runner(registration).await {
        Ok(runner) => Ok((StatusCode::CREATED, version, Json(runner)).into_response()),
        Err(err) => Ok((version, err).into_response()),
    }
}

pub(super) async fn job_runners(State(manager): Shared) -> Result<Response, Error> {
    Ok(Json(manager.job_runners().await?).into_response())
}

/// A renewal's body, when it has one, names the chains the runner holds.
pub(super) async fn renew_runner(
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

pub(super) async fn end_runner(
    State(manager): Shared,
    Path(instance): Path<String>,
) -> Result<StatusCode, Error> {
    manager.end_runner(&instance).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn finish(
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

pub(super) async fn suspend(
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

pub(super) async fn progress(
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
