//! Who may call what: the route's needs, authentication, authorization, and the
//! cross-site checks of state changes.

use super::*;

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
    /// A monitor (a metrics role) or a reader: `/metrics`, `/readyz`.
    Observe,
}

/// What `method path` needs, by the route it is.
pub fn needs(method: &axum::http::Method, path: &str) -> Needs {
    use axum::http::Method;
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    match (method.clone(), segments.as_slice()) {
        (_, ["healthz" | "version"])
        | (_, ["api", "v1", "openapi.json"])
        // Who the caller is, and signing in and out: they authenticate themselves.
        | (_, ["ui", "api", "me" | "session"])
        // A trigger's sender proves itself with the trigger's own signature or token.
        | (Method::POST, ["api", "v1", "triggers", _]) => Needs::Nothing,
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
        | (
            Method::POST,
            [
                "api",
                "v1",
                "requests",
                _,
                "log" | "job-locks" | "approval-waiting",
            ],
        )
        | (Method::DELETE, ["api", "v1", "requests", _, "job-locks", _]) => Needs::Service,
        (Method::POST, ["api", "v1", "requests"] | ["api", "v1", "bulk", _])
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
        (_, ["metrics" | "readyz"]) => Needs::Observe,
        (_, ["api", ..] | ["ui", "api", ..]) => Needs::Read,
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
    auth.prepare(request.headers()).await;
    let caller = match auth.authenticate(request.headers(), &peer) {
        Ok(caller) => caller,
        Err(denied) => return Error::from(denied).into_response(),
    };
    let allowed = match needs {
        Needs::Read => auth.allow(&caller, auth::Access::Read),
        Needs::Service => auth.allow(&caller, auth::Access::Service),
        Needs::Observe => auth.allow(&caller, auth::Access::Observe),
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
pub(super) fn authorize(
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
