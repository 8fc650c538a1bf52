//! The routes of callers: create, find, get, the state changes, approvals, audit,
//! output, what runs, readiness.

use super::*;

/// The metrics in Prometheus' (OpenMetrics) text format, the gauges read from the
/// database first; 404 when metrics are off.
pub(super) async fn metrics(State(manager): Shared, headers: HeaderMap) -> Result<Response, Error> {
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

/// The header that makes a create idempotent.
const IDEMPOTENCY_KEY: &str = "idempotency-key";

pub(super) async fn create(
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
    // A key (the header's, else the body's) makes the create idempotent (issue #48).
    let key = headers
        .get(IDEMPOTENCY_KEY)
        .map(|value| {
            value.to_str().map(str::to_owned).map_err(|_| {
                Error::BadRequest("header Idempotency-Key: expected printable text".to_owned())
            })
        })
        .transpose()?
        .or_else(|| create_request.idempotency_key.clone());
    let address = address_of(peer.as_deref());
    let (request, new) = match key {
        Some(key) => {
            manager
                .create_once(create_request, &user, &address, &key)
                .await?
        }
        None => (manager.create(create_request, &user, &address).await?, true),
    };
    let location = format!("/api/v1/requests/{}", request.id);
    Ok((
        if new {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        },
        [(header::LOCATION, location)],
        Json(request),
    )
        .into_response())
}

pub(super) async fn find(
    State(manager): Shared,
    RawQuery(query): RawQuery,
) -> Result<Response, Error> {
    let query = query.unwrap_or_default();
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    let filter = RequestFilter::from_query(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(|err| Error::BadRequest(err.to_string()))?;
    let mut found = manager.find(&filter).await?;
    manager.count_own_finished_among(&mut found).await?;
    // A full page names the next one (keyset: it starts after this page's last request,
    // however deep; `offset` makes the database walk past every request it skips).
    let next = found
        .last()
        .filter(|_| filter.limit > 0 && found.len() as u64 == filter.limit)
        .map(|last| {
            let cursor = proto::Cursor {
                created_at: last.created_at,
                request_id: last.id.clone(),
            };
            let query = RequestFilter {
                after: Some(cursor.clone()),
                offset: 0,
                ..filter.clone()
            }
            .to_query();
            (
                cursor.token(),
                format!("</api/v1/requests?{query}>; rel=\"next\""),
            )
        });
    let mut response = Json(found).into_response();
    if let Some((token, link)) = next {
        let headers = response.headers_mut();
        for (name, value) in [(NEXT_HEADER, token), ("link", link)] {
            if let Ok(value) = header::HeaderValue::from_str(&value) {
                headers.insert(name, value);
            }
        }
    }
    Ok(response)
}

/// The header of a full page of found requests that names the next page's cursor (its
/// `after=`); absent on the last page.
pub const NEXT_HEADER: &str = "spindle-next";

/// `?chain=true` asks for the job chain too (Spin Cycle always sent it; Spindle only
/// when asked: `GET .../job-chain` is the chain alone). `?wait=DURATION` (a Spindle
/// extension) answers once the request has ended, or after the duration (at most a
/// minute) as it is then: one call instead of polling.
#[derive(Debug, serde::Deserialize)]
pub(super) struct GetQuery {
    #[serde(default)]
    chain: bool,
    #[serde(default)]
    wait: Option<String>,
}

pub(super) async fn get_request(
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
    let mut request = match &query.wait {
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
    manager.fill_progress(&mut request).await?;
    Ok(Json(request).into_response())
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ElementsQuery {
    #[serde(default)]
    node: Option<String>,
    #[serde(default)]
    state: Option<String>,
}

/// Each element of a request's `each:` expansions (Spindle, issue #50).
pub(super) async fn elements(
    State(manager): Shared,
    Path(id): Path<String>,
    query: Result<Query<ElementsQuery>, QueryRejection>,
) -> Result<Response, Error> {
    let Query(query) = query.map_err(|err| {
        Error::BadRequest(format!(
            "invalid query: {}; expected node=NAME (an each: node) and state=STATE (pending, running, complete, failed or stopped), both optional",
            err.body_text()
        ))
    })?;
    let state = query
        .state
        .as_deref()
        .map(crate::manager::element_state)
        .transpose()
        .map_err(Error::BadRequest)?;
    let elements = manager.elements(&id, query.node.as_deref(), state).await?;
    Ok(Json(elements).into_response())
}

/// Who asks for a change of a request's course, and from where: the authenticated
/// caller (when authentication is on), the connection's peer, and the user name the
/// audit trail records. Read the same way by every handler that changes a request.
#[derive(Clone)]
pub(super) struct Acting {
    caller: Option<auth::Caller>,
    peer: Option<auth::Peer>,
    user: String,
}

impl Acting {
    pub(super) fn caller(&self) -> Option<&auth::Caller> {
        self.caller.as_ref()
    }
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

pub(super) async fn start(
    State(manager): Shared,
    acting: Acting,
    Path(id): Path<RequestId>,
) -> Result<StatusCode, Error> {
    // Unlike Spin Cycle, starting a PENDING request is authorized as a start.
    change(&manager, acting, &id, Op::Start).await
}

pub(super) async fn stop(
    State(manager): Shared,
    acting: Acting,
    Path(id): Path<RequestId>,
) -> Result<StatusCode, Error> {
    change(&manager, acting, &id, Op::Stop).await
}

/// Spindle's pause: running jobs finish, nothing new starts until `resume`.
pub(super) async fn pause(
    State(manager): Shared,
    acting: Acting,
    Path(id): Path<RequestId>,
) -> Result<StatusCode, Error> {
    change(&manager, acting, &id, Op::Pause).await
}

pub(super) async fn resume(
    State(manager): Shared,
    acting: Acting,
    Path(id): Path<RequestId>,
) -> Result<StatusCode, Error> {
    change(&manager, acting, &id, Op::Resume).await
}

/// `PUT .../retry[?from=JOB]`: runs a FAIL or STOPPED request again as the same request.
#[derive(Debug, serde::Deserialize)]
pub(super) struct RetryQuery {
    from: Option<String>,
    /// `true`: the failed elements run again (issue #50).
    #[serde(default, rename = "failedElements")]
    failed_elements: bool,
    /// Elements (by name, separated by commas) that run again.
    elements: Option<String>,
}

pub(super) async fn retry(
    State(manager): Shared,
    acting: Acting,
    Path(id): Path<RequestId>,
    query: Result<Query<RetryQuery>, QueryRejection>,
) -> Result<StatusCode, Error> {
    let Query(query) = query.map_err(|err| {
        Error::BadRequest(format!(
            "invalid query: {}; expected from=JOB (a job id or name), failedElements=true or elements=NAME,NAME, or nothing",
            err.body_text()
        ))
    })?;
    let elements = match (query.failed_elements, query.elements) {
        (true, Some(_)) => {
            return Err(Error::BadRequest(
                "failedElements=true and elements= both given; expected one of them".to_owned(),
            ));
        }
        (true, None) => Some(crate::RetryElements::Failed),
        (false, Some(names)) => {
            let names: Vec<String> = names
                .split(',')
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .map(str::to_owned)
                .collect();
            if names.is_empty() {
                return Err(Error::BadRequest(
                    "elements= names no element; expected element names separated by commas"
                        .to_owned(),
                ));
            }
            Some(crate::RetryElements::Named(names))
        }
        (false, None) => None,
    };
    let what = crate::Retry {
        from: query.from,
        elements,
    };
    change(&manager, acting, &id, Op::Retry(what)).await
}

/// `PUT .../approve` and `.../reject`: `job` names the approval job (its id or name;
/// without it, the one that waits), `comment` is kept with the answer.
#[derive(Debug, serde::Deserialize)]
pub(super) struct AnswerQuery {
    job: Option<String>,
    #[serde(default)]
    comment: String,
}

pub(super) async fn approve(
    State(manager): Shared,
    acting: Acting,
    Path(id): Path<RequestId>,
    query: Result<Query<AnswerQuery>, QueryRejection>,
) -> Result<StatusCode, Error> {
    answer(&manager, acting, &id, query, true).await
}

pub(super) async fn reject(
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
pub(super) async fn answer(
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
            let request = manager.get(id.as_str(), false).await?;
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
#[derive(Debug, Clone)]
pub(super) enum Op {
    Start,
    Stop,
    Pause,
    Resume,
    /// What runs again besides the jobs that did not complete.
    Retry(crate::Retry),
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
    pub(super) fn acl_op(&self) -> &'static str {
        match self {
            Op::Start | Op::Retry(_) => "start",
            Op::Stop | Op::Pause | Op::Resume => "stop",
        }
    }
}

/// Changes a request's course (`op`), authorized by its type's ACL when authentication
/// is on (an unknown id is 404 first), and records it in the audit trail.
pub(super) async fn change(
    manager: &Manager,
    acting: Acting,
    id: &RequestId,
    op: Op,
) -> Result<StatusCode, Error> {
    let request_type = match manager.auth() {
        Some(_) => Some(manager.get(id.as_str(), false).await?.request_type),
        None => None,
    };
    change_of(manager, acting, id, request_type.as_deref(), op).await
}

/// [`change`] of a request whose type is known (read already, as a bulk action's
/// find did): authorized by it when given and authentication is on.
pub(super) async fn change_of(
    manager: &Manager,
    acting: Acting,
    id: &RequestId,
    request_type: Option<&str>,
    op: Op,
) -> Result<StatusCode, Error> {
    if let Some(request_type) = request_type {
        authorize(manager, acting.caller.as_ref(), op.acl_op(), request_type)?;
    }
    match &op {
        Op::Start => manager.start(id).await?,
        Op::Stop => manager.stop(id).await?,
        Op::Pause => manager.pause(id, true).await?,
        Op::Resume => manager.pause(id, false).await?,
        Op::Retry(what) => manager.retry(id, what).await?,
    }
    record(manager, id.as_str(), op.action(), acting).await;
    Ok(StatusCode::OK)
}

/// Who a call is from: the authenticated caller, else the name the caller gave.
pub(super) fn who(caller: Option<&auth::Caller>, headers: &HeaderMap) -> String {
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
pub(super) fn address_of(peer: Option<&auth::Peer>) -> String {
    peer.and_then(|p| p.addr)
        .map(|addr| addr.ip().to_string())
        .unwrap_or_default()
}

/// Adds to the request's audit trail. The action is done by now: a trail that cannot
/// be written is logged, not turned into a failure of what was done.
pub(super) async fn record(manager: &Manager, request_id: &str, action: &str, acting: Acting) {
    let event = proto::AuditEvent {
        at: chrono::Utc::now(),
        action: action.to_owned(),
        user: acting.user,
        address: address_of(acting.peer.as_ref()),
    };
    if let Err(err) = manager.add_audit(request_id, &event).await {
        tracing::error!(request_id, action, error = %err, "the audit trail could not be written");
    }
}

pub(super) async fn audit(
    State(manager): Shared,
    Path(id): Path<String>,
) -> Result<Response, Error> {
    Ok(Json(manager.audit(&id).await?).into_response())
}

/// The specs' schedules with their next and last runs (Spindle).
pub(super) async fn schedules(State(manager): Shared) -> Result<Response, Error> {
    Ok(Json(manager.schedules().await?).into_response())
}

/// The triggers and their latest deliveries (Spindle, issue #33).
pub(super) async fn triggers(State(manager): Shared) -> Result<Response, Error> {
    Ok(Json(manager.triggers().await?).into_response())
}

/// An event that starts trigger `name`'s request: 201 with the request's id, or 200 when
/// the delivery was sent before (`duplicate`: nothing new started). The trigger proves its
/// sender itself (its signature or token), not Spindle's authentication.
pub(super) async fn trigger(
    State(manager): Shared,
    Path(name): Path<String>,
    peer: Option<axum::Extension<auth::Peer>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Error> {
    let (accepted, created) = manager
        .trigger(&name, &headers, &body, &address_of(peer.as_deref()))
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(accepted)).into_response())
}

/// Every lock held or waited for, with its holders and its queue (Spindle, issue #34).
pub(super) async fn locks(State(manager): Shared) -> Result<Response, Error> {
    Ok(Json(manager.locks().await?).into_response())
}

/// The spec files the request was built from (Spindle's spec history).
pub(super) async fn request_spec(
    State(manager): Shared,
    Path(id): Path<String>,
) -> Result<Response, Error> {
    Ok(Json(manager.request_spec(&id).await?).into_response())
}

pub(super) async fn job_chain(
    State(manager): Shared,
    Path(id): Path<String>,
) -> Result<Response, Error> {
    Ok(Json(manager.job_chain(&id).await?).into_response())
}

pub(super) async fn output(
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

pub(super) async fn readyz(State(manager): Shared) -> Result<Response, Error> {
    manager.ready().await?;
    Ok(Json(serde_json::json!({"status": "ready"})).into_response())
}

pub(super) async fn request_list(State(manager): Shared) -> Response {
    Json(manager.request_specs()).into_response()
}

#[derive(Debug)]
pub(super) struct RunningQuery {
    request_id: Option<String>,
}

pub(super) async fn running(
    State(manager): Shared,
    RawQuery(query): RawQuery,
) -> Result<Response, Error> {
    let query: RunningQuery = running_query(query.as_deref().unwrap_or_default());
    let request_id = query
        .request_id
        .filter(|id| !id.is_empty())
        .map(RequestId::new);
    Ok(Json(manager.running(request_id.as_ref()).await?).into_response())
}

/// Reads `requestId` from a query string (other parameters, such as `orderBy`, are
/// accepted and ignored).
pub(super) fn running_query(query: &str) -> RunningQuery {
    let request_id = url::form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == "requestId")
        .map(|(_, value)| value.into_owned());
    RunningQuery { request_id }
}
