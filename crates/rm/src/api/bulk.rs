//! `POST /api/v1/bulk/{action}?FILTER[&dryRun=false]` (Spindle's): stop, retry, pause or
//! resume every request that `find`'s filter (the same query parameters) finds. Each is
//! authorized by its type's ACL and audited as if asked of it alone; one refused is
//! reported and does not stop the others. A dry run (the default) changes nothing and
//! says which the caller may act on: those its ACLs allow, in a state the action takes.

use super::*;
use proto::{BulkAction, BulkItem, BulkOutcome, BulkReport};

/// At most this many requests in one bulk action, so that a filter too wide is a clear
/// refusal rather than a long, half-done call.
pub const MAX_BULK: u64 = 1000;

pub(super) async fn bulk(
    State(manager): Shared,
    acting: Acting,
    Path(action): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, Error> {
    let action = BulkAction::parse(&action).map_err(|err| Error::BadRequest(err.to_string()))?;
    let query = query.unwrap_or_default();
    let mut dry_run = true;
    let mut words = Vec::new();
    for (key, value) in url::form_urlencoded::parse(query.as_bytes()).into_owned() {
        if key == "dryRun" {
            dry_run = match value.as_str() {
                "true" => true,
                "false" => false,
                other => {
                    return Err(Error::BadRequest(format!(
                        "invalid 'dryRun' parameter: {other:?}; expected true (the default: nothing changes) or false"
                    )));
                }
            };
        } else {
            words.push((key, value));
        }
    }
    if words.is_empty() {
        return Err(Error::BadRequest(format!(
            "a bulk {} needs a filter (find's parameters: type, state, user, arg, since, until, limit); to act on every request, say so with a filter such as since=",
            action.name()
        )));
    }
    let mut filter = RequestFilter::from_query(words.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(|err| Error::BadRequest(err.to_string()))?;
    // Who may not read the list may not learn it from a dry run either.
    if let (Some(auth), Some(caller)) = (manager.auth(), acting.caller()) {
        auth.allow(caller, auth::Access::Read)?;
    }
    if filter.limit == 0 || filter.limit > MAX_BULK {
        filter.limit = MAX_BULK + 1;
    }
    let found = manager.find(&filter).await?;
    if found.len() as u64 > MAX_BULK {
        return Err(Error::BadRequest(format!(
            "more than {MAX_BULK} requests match; narrow the filter, or act on them {MAX_BULK} at a time with limit= and offset="
        )));
    }
    let op = match action {
        BulkAction::Stop => Op::Stop,
        BulkAction::Retry => Op::Retry(crate::Retry::default()),
        BulkAction::Pause => Op::Pause,
        BulkAction::Resume => Op::Resume,
    };
    let mut requests = Vec::with_capacity(found.len());
    for request in found {
        let id = RequestId::new(request.id.clone());
        let result = if dry_run {
            authorize(
                &manager,
                acting.caller(),
                op.acl_op(),
                &request.request_type,
            )
            .and_then(|()| {
                match crate::manager::state_refusal(action, &request.id, request.state, false) {
                    Some(refusal) => Err(Error::Conflict(refusal)),
                    None => Ok(BulkOutcome::Would),
                }
            })
        } else {
            // The type found: not read again per request.
            let request_type = Some(request.request_type.as_str());
            change_of(&manager, acting.clone(), &id, request_type, op.clone())
                .await
                .map(|_| BulkOutcome::Done)
        };
        let (outcome, message, http_status) = match result {
            Ok(outcome) => (outcome, String::new(), None),
            Err(err) => (BulkOutcome::Refused, err.to_string(), Some(err.status())),
        };
        requests.push(BulkItem {
            id: request.id,
            request_type: request.request_type,
            state: request.state,
            user: request.user,
            outcome,
            message,
            http_status,
        });
    }
    Ok(Json(BulkReport {
        action,
        dry_run,
        requests,
    })
    .into_response())
}
