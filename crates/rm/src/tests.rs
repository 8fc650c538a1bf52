//! The Request Manager's API, tested without sockets: a real SQLite store, a fake Job
//! Runner client.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Method, Request as HttpRequest, StatusCode};
use http_body_util::BodyExt as _;
use proto::{RequestId, State, SuspendedJobChain};
use serde_json::{Value, json};
use tower::ServiceExt as _;

use crate::testing::{FakeJr, final_state};
use crate::{Manager, Options};

const SPECS: &str = "sequences:
  deploy:
    request: true
    args:
      required:
        - name: host
          desc: Host to deploy to
      optional:
        - name: wait
          default: 10ms
    nodes:
      pause:
        category: job
        type: sleep
        args: [{expected: duration, given: wait}]
";

pub(crate) struct Env {
    pub(crate) manager: Arc<Manager>,
    pub(crate) jr: Arc<FakeJr>,
    pub(crate) router: axum::Router,
    _dir: tempfile::TempDir,
}

pub(crate) async fn env() -> Env {
    env_with(Options {
        jr_url: Some("http://jr1:32307".to_owned()),
        telemetry: telemetry::Telemetry::with_metrics(),
        ..Options::default()
    })
    .await
}

async fn env_with(options: Options) -> Env {
    env_specs(options, SPECS).await
}

pub(crate) async fn env_specs(options: Options, specs: &str) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        store::SqliteStore::open(&dir.path().join("rm.db"))
            .await
            .unwrap(),
    );
    let report = spec::lint_str(Path::new("specs.yaml"), specs);
    assert!(!report.has_errors(), "{:?}", report.diagnostics);
    let grapher = graph::Grapher::new(report.specs, Arc::new(job::Registry::builtin()));
    let jr = Arc::new(FakeJr::default());
    let manager = Arc::new(Manager::new(grapher, store, jr.clone(), options));
    let router = crate::router(manager.clone());
    Env {
        manager,
        jr,
        router,
        _dir: dir,
    }
}

/// Sends a request; returns status, the body as JSON (null when empty) and the headers.
pub(crate) async fn call(
    router: &axum::Router,
    method: Method,
    uri: &str,
    body: Option<&str>,
) -> (StatusCode, Value, axum::http::HeaderMap) {
    call_with(router, method, uri, body, &[]).await
}

/// Sends `body` as JSON with `method` to `uri`; asserts the answer's status is
/// `expected`; the answer's body.
pub(crate) async fn send_json(
    env: &Env,
    method: Method,
    uri: &str,
    body: &Value,
    expected: StatusCode,
) -> Value {
    let (status, answer, _) = call(&env.router, method.clone(), uri, Some(&body.to_string())).await;
    assert_eq!(status, expected, "{method} {uri}: {answer}");
    answer
}

/// [`call`] with request headers.
pub(crate) async fn call_with(
    router: &axum::Router,
    method: Method,
    uri: &str,
    body: Option<&str>,
    extra: &[(&str, &str)],
) -> (StatusCode, Value, axum::http::HeaderMap) {
    let method_name = method.as_str().to_owned();
    let method_name = method_name.as_str();
    let mut request = HttpRequest::builder().method(method).uri(uri);
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    let request = request
        .body(Body::from(body.unwrap_or_default().to_owned()))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    // Every response a test sees is what the OpenAPI document says.
    let body = openapi_check::checked_body(
        proto::openapi::REQUEST_MANAGER,
        method_name,
        uri,
        status.as_u16(),
        &bytes,
    );
    (status, body, headers)
}

#[test]
fn every_route_is_in_the_openapi_document_and_every_operation_is_routed() {
    // The routes every service answers about itself are telemetry's (`about_routes`).
    let source = concat!(
        include_str!("api/mod.rs"),
        include_str!("../../telemetry/src/service.rs")
    );
    openapi_check::check_routes(source, proto::openapi::REQUEST_MANAGER).unwrap();
}

#[tokio::test]
async fn the_openapi_document_is_served() {
    let env = env().await;
    let (status, body, headers) =
        call(&env.router, Method::GET, "/api/v1/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(body["openapi"], "3.1.0");
    assert_eq!(body["info"]["title"], "Spindle Request Manager API");
}

/// Asserts that an error body's message contains `text`.
#[track_caller]
fn says(body: &Value, text: &str) {
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.contains(text), "{body}");
}

/// Asserts that try `r#try` of job `job` of request `id` is logged as interrupted
/// (STOPPED, with an error that begins with `why`).
async fn assert_interrupted(env: &Env, id: &str, job: &str, r#try: u32, why: &str) {
    let logs = env.manager.job_log(id).await.unwrap();
    let entry = logs
        .iter()
        .find(|l| l.job_id == job && l.r#try == r#try)
        .unwrap_or_else(|| panic!("no try {try} of {job}: {logs:?}"));
    assert_eq!(entry.state, State::Stopped);
    assert!(entry.error.starts_with(why), "{}", entry.error);
}

/// A try start of `job` of request `id`, in its sequence's first run.
fn try_start(id: &str, job: &str, r#try: u32, started_at: i64) -> proto::TryStart {
    proto::TryStart {
        request_id: id.to_owned(),
        job_id: job.to_owned(),
        r#try,
        run_try: r#try,
        sequence_try: 1,
        started_at,
    }
}

async fn create(env: &Env) -> String {
    let (status, body, headers) = call(
        &env.router,
        Method::POST,
        "/api/v1/requests",
        Some(r#"{"type": "deploy", "args": {"host": "db1"}}"#),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["id"].as_str().unwrap().to_owned();
    assert_eq!(
        headers["location"],
        format!("/api/v1/requests/{id}").as_str()
    );
    id
}

#[tokio::test]
async fn create_hands_the_chain_to_a_job_runner() {
    let env = env().await;
    let (status, body, headers) = call(
        &env.router,
        Method::POST,
        "/api/v1/requests",
        Some(r#"{"Type": "deploy", "Args": {"host": "db1"}, "User": "eve"}"#),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(
        headers["x-spincycle-version"]
            .to_str()
            .unwrap()
            .starts_with("2.1.1")
    );
    assert_eq!(
        body["state"], 1,
        "the request as created, as Spin Cycle answers"
    );
    assert_eq!(body["type"], "deploy");
    assert_eq!(body["user"], "eve");
    assert!(body.get("JobChain").is_none());
    let id = body["id"].as_str().unwrap();
    assert_eq!(env.jr.chains.lock().unwrap()[0].request_id, id);
    let (status, stored, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(stored["state"], 2);
    assert_eq!(stored["jrURL"], "http://jr1:32307");
    assert_eq!(stored["totalJobs"], 5);
    // The chain only when asked (issue #17: a poll does not read it back).
    assert!(stored.get("JobChain").is_none(), "{stored}");
    let (_, with_chain, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}?chain=true"),
        None,
    )
    .await;
    assert_eq!(with_chain["JobChain"]["jobs"].as_object().unwrap().len(), 5);
    let (status, body, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}?chain=yes"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let args: Vec<&str> = stored["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["Name"].as_str().unwrap())
        .collect();
    assert_eq!(args, ["host", "wait"]);
}

#[tokio::test]
async fn bad_input_is_400_with_a_message() {
    let env = env().await;
    for (body, expected) in [
        ("{not json", "invalid create request"),
        ("", "the request body is empty"),
        (r#"{"args": {}}"#, "Type is empty, must be a request name"),
        (
            r#"{"type": "deplo"}"#,
            "unknown request type `deplo` (did you mean `deploy`?); expected one of: deploy",
        ),
        (
            r#"{"type": "deploy", "args": {"hots": "x"}}"#,
            "missing required arg `host`",
        ),
        (r#"{"type": 7}"#, "field Type: expected a string"),
    ] {
        let (status, answer, _) =
            call(&env.router, Method::POST, "/api/v1/requests", Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(
            answer["message"].as_str().unwrap().contains(expected),
            "{body}: {answer}"
        );
        assert_eq!(answer["httpStatus"], 400);
    }
    let (status, answer, _) = call(
        &env.router,
        Method::GET,
        "/api/v1/requests?state=BOGUS",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        answer["message"],
        "invalid 'state' parameter: \"BOGUS\" is not a valid state name"
    );
    assert!(env.jr.chains.lock().unwrap().is_empty());
}

#[tokio::test]
async fn unknown_ids_are_404_and_empty_lists_are_empty() {
    let env = env().await;
    for uri in [
        "/api/v1/requests/nope",
        "/api/v1/requests/nope/job-chain",
        "/api/v1/requests/nope/log/abcd",
        "/no/such/route",
    ] {
        let (status, body, headers) = call(&env.router, Method::GET, uri, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{uri}");
        assert!(body["message"].is_string(), "{uri}: {body}");
        assert!(headers.contains_key("x-spincycle-version"));
    }
    let (status, body, _) = call(&env.router, Method::GET, "/api/v1/requests", None).await;
    assert_eq!((status, body), (StatusCode::OK, json!([])));
    let (_, body, _) = call(&env.router, Method::GET, "/api/v1/requests/nope/log", None).await;
    assert_eq!(body, json!([]));
    let (_, body, _) = call(&env.router, Method::GET, "/api/v1/status/running", None).await;
    assert_eq!(body, json!({"jobs": [], "requests": {}}));
    let (status, body, _) =
        call(&env.router, Method::PUT, "/api/v1/requests/nope/stop", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}

/// Reports request `id` COMPLETE with one finished job, as its Job Runner would.
async fn finish_complete(env: &Env, id: &str) {
    let finish =
        json!({"requestId": id, "state": 3, "finishedAt": chrono::Utc::now(), "finishedJobs": 1});
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/finish"),
        Some(&finish.to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// Issue #17: `GET ...?wait=` answers once the request has ended (woken by the finish
/// this Request Manager stores), or after the wait as it is; a bad wait is a 400.
#[tokio::test]
async fn a_get_can_wait_for_the_request_to_end() {
    let env = env().await;
    let id = create(&env).await;
    let uri = format!("/api/v1/requests/{id}?wait=20ms");
    let (status, body, _) = call(&env.router, Method::GET, &uri, None).await;
    assert_eq!(
        (status, body["state"].as_u64()),
        (StatusCode::OK, Some(2)),
        "{body}"
    );
    let (status, body, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}?wait=soon"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    says(&body, "invalid wait \"soon\"");
    let waiting = {
        let router = env.router.clone();
        let uri = format!("/api/v1/requests/{id}?wait=50s");
        tokio::spawn(async move { call(&router, Method::GET, &uri, None).await })
    };
    // The waiter is registered before the finish is stored (or reads the end itself).
    while env.manager.waiting_for(&id) == 0 && !waiting.is_finished() {
        tokio::task::yield_now().await;
    }
    finish_complete(&env, &id).await;
    let (status, body, _) = waiting.await.unwrap();
    assert_eq!(
        (status, body["state"].as_u64()),
        (StatusCode::OK, Some(3)),
        "{body}"
    );
    assert_eq!(env.manager.waiting_for(&id), 0, "the waiter is forgotten");
}

/// Issue #17: an end stored by another Request Manager (here: straight into the store,
/// which wakes nobody) reaches a waiting `GET` through the one query that reads the ends
/// of every waited-for request; that task ends when nobody waits.
#[tokio::test]
async fn a_waiting_get_learns_of_an_end_another_manager_stored() {
    let env = env().await;
    let ids = [create(&env).await, create(&env).await];
    let waiters: Vec<_> = ids
        .iter()
        .map(|id| {
            let router = env.router.clone();
            let uri = format!("/api/v1/requests/{id}?wait=50s");
            tokio::spawn(async move { call(&router, Method::GET, &uri, None).await })
        })
        .collect();
    while ids.iter().any(|id| env.manager.waiting_for(id) == 0) {
        tokio::task::yield_now().await;
    }
    for id in &ids {
        let finish = final_state(id, State::Fail, 0);
        env.manager
            .store()
            .finish_request(&finish, None)
            .await
            .unwrap();
    }
    for waiter in waiters {
        // Within the wait: a waiter nothing woke would answer at 50 s, still running.
        let (status, body, _) = tokio::time::timeout(std::time::Duration::from_secs(20), waiter)
            .await
            .expect("woken before its wait ran out")
            .unwrap();
        assert_eq!(
            (status, body["state"].as_u64()),
            (StatusCode::OK, Some(4)),
            "{body}"
        );
    }
    assert!(ids.iter().all(|id| env.manager.waiting_for(id) == 0));
}

/// After a known workload the Request Manager's metrics count it: requests created and
/// finished by type and state, the unfinished by state, store operations, HTTP calls.
#[tokio::test]
async fn metrics_count_requests_store_operations_and_calls() {
    use telemetry::metrics::sample;
    let env = env().await;
    let done = create(&env).await;
    let _running = create(&env).await;
    finish_complete(&env, &done).await;
    let (status, scrape, headers) = call(&env.router, Method::GET, "/metrics", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let scrape = scrape.as_str().unwrap().to_owned();
    let at = |series: &str| {
        sample(&scrape, series).unwrap_or_else(|| panic!("no {series} in\n{scrape}"))
    };
    let kind = "deploy";
    assert_eq!(
        at(&format!(
            r#"spindle_requests_created_total{{type="{kind}"}}"#
        )),
        2.0
    );
    assert_eq!(
        at(&format!(
            r#"spindle_requests_finished_total{{type="{kind}",state="COMPLETE"}}"#
        )),
        1.0
    );
    assert_eq!(
        at(&format!(
            r#"spindle_request_duration_seconds_count{{type="{kind}"}}"#
        )),
        1.0
    );
    assert_eq!(at(r#"spindle_requests{state="RUNNING"}"#), 1.0);
    assert_eq!(at(r#"spindle_requests{state="PENDING"}"#), 0.0);
    // Each create is acknowledged after its own commit (the two were made one after the
    // other), group-committed through write_batch.
    assert!(at(r#"spindle_store_query_duration_seconds_count{operation="write_batch"}"#) >= 2.0);
    assert_eq!(
        at(r#"spindle_http_requests_total{method="POST",route="/api/v1/requests",status="201"}"#),
        2.0
    );
    assert_eq!(
        at(
            r#"spindle_http_requests_total{method="PUT",route="/api/v1/requests/{id}/finish",status="200"}"#
        ),
        1.0
    );
    // OpenMetrics to a scraper that asks for it, as Prometheus does.
    let (_, scrape, headers) = call_with(
        &env.router,
        Method::GET,
        "/metrics",
        None,
        &[(
            "accept",
            "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
        )],
    )
    .await;
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    assert!(scrape.as_str().unwrap().ends_with("# EOF\n"));
}

#[tokio::test]
async fn a_request_waits_pending_until_a_job_runner_answers() {
    let env = env().await;
    env.jr.answer.store(503, Ordering::SeqCst);
    let id = create(&env).await;
    let (_, stored, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}"),
        None,
    )
    .await;
    assert_eq!(stored["state"], 1);
    env.jr.answer.store(0, Ordering::SeqCst);
    let (status, _, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/start"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, stored, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}"),
        None,
    )
    .await;
    assert_eq!(stored["state"], 2);
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/start"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
}

/// Issue #35: a runner that refuses the Request Manager's credentials is a
/// misconfiguration: the request stays PENDING with the reason (shown by `status` and
/// the UI), `start` is not a 500, and once the runner accepts, the request runs.
#[tokio::test]
async fn a_runner_that_refuses_the_managers_credentials_leaves_the_request_pending_with_why() {
    let env = env().await;
    env.jr.answer.store(401, Ordering::SeqCst);
    let id = create(&env).await;
    for _ in 0..2 {
        let (status, body, _) = call(
            &env.router,
            Method::PUT,
            &format!("/api/v1/requests/{id}/start"),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        env.manager.start_pending().await;
    }
    let stored = env.manager.get(&id, false).await.unwrap();
    assert_eq!(stored.state, State::Pending);
    assert!(
        stored
            .error
            .contains("refused this Request Manager's credentials")
            && stored.error.contains("HTTP 401"),
        "{}",
        stored.error
    );
    env.jr.answer.store(0, Ordering::SeqCst);
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/start"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let started = env.manager.get(&id, false).await.unwrap();
    assert_eq!(started.state, State::Running);
    assert_eq!(started.error, "", "the start clears why it waited");
}

/// Issue #30: a runner without the request's job types (a team's jobs not deployed
/// yet) leaves it PENDING, saying which, and it runs once a runner has them.
#[tokio::test]
async fn a_runner_without_the_job_types_leaves_the_request_pending_with_why() {
    let env = env().await;
    env.jr.answer.store(422, Ordering::SeqCst);
    let id = create(&env).await;
    env.manager.start_pending().await;
    let stored = env.manager.get(&id, false).await.unwrap();
    assert_eq!(stored.state, State::Pending);
    assert!(
        stored
            .error
            .starts_with("waits for a job runner with its job types")
            && stored.error.contains("`go-provision`"),
        "{}",
        stored.error
    );
    env.jr.answer.store(0, Ordering::SeqCst);
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/start"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let started = env.manager.get(&id, false).await.unwrap();
    assert_eq!(
        (started.state, started.error.as_str()),
        (State::Running, "")
    );
}

#[tokio::test]
async fn a_chain_the_job_runner_refuses_fails_the_request() {
    let env = env().await;
    env.jr.answer.store(400, Ordering::SeqCst);
    let (status, body, _) = call(
        &env.router,
        Method::POST,
        "/api/v1/requests",
        Some(r#"{"type": "deploy", "args": {"host": "db1"}}"#),
    )
    .await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(!body["message"].as_str().unwrap().contains("SQL"));
    let failed = env
        .manager
        .find(&proto::RequestFilter::default())
        .await
        .unwrap();
    assert_eq!(failed[0].state, State::Fail);
}

#[tokio::test]
async fn job_runner_reports_log_progress_and_finish() {
    let env = env().await;
    let id = create(&env).await;
    let entry = json!({"jobId": "abcd", "try": 1, "name": "pause", "type": "sleep", "startedAt": 1, "finishedAt": 2, "state": 3, "exit": 0, "error": "", "stdout": "", "stderr": ""});
    let (status, body, _) = call(
        &env.router,
        Method::POST,
        &format!("/api/v1/requests/{id}/log"),
        Some(&entry.to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(body["requestId"], id.as_str());
    let batch = json!([{"requestId": id, "jobId": "efgh", "try": 1, "name": "x", "type": "noop", "state": 3}]);
    let (status, _, _) = call(
        &env.router,
        Method::POST,
        "/api/v1/job-logs",
        Some(&batch.to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, log, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}/log"),
        None,
    )
    .await;
    assert_eq!(log.as_array().unwrap().len(), 2);
    let (status, latest, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}/log/abcd"),
        None,
    )
    .await;
    assert_eq!((status, latest["try"].clone()), (StatusCode::OK, json!(1)));

    // Issue #10: a body's request id is reconciled with the path's the same way
    // everywhere: empty is the path's, another one is a 400.
    let other = "someone-else";
    for (method, path, body) in [
        (
            Method::PUT,
            "progress",
            json!({"requestId": other, "finishedJobs": 2}),
        ),
        (
            Method::PUT,
            "finish",
            json!({"requestId": other, "state": 3, "finishedAt": "2026-01-01T00:00:00Z"}),
        ),
        (
            Method::PUT,
            "suspend",
            json!({"requestId": other, "jobChain": {"requestId": other, "jobs": {}, "adjacencyList": {}, "state": 7}}),
        ),
        (
            Method::POST,
            "log",
            json!({"requestId": other, "jobId": "j", "try": 1}),
        ),
    ] {
        let (status, body, _) = call(
            &env.router,
            method,
            &format!("/api/v1/requests/{id}/{path}"),
            Some(&body.to_string()),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains("requestId \"someone-else\" does not match the request id in the URL"),
            "{path}: {body}"
        );
    }
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/progress"),
        Some(r#"{"finishedJobs": 2}"#),
    )
    .await;
    assert_eq!((status, body), (StatusCode::OK, Value::Null));
    let progress = json!({"requestId": id, "finishedJobs": 2}).to_string();
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/progress"),
        Some(&progress),
    )
    .await;
    assert_eq!((status, body), (StatusCode::OK, Value::Null));
    let finish = json!({"requestId": id, "state": 3, "finishedAt": "2026-01-01T00:00:00Z", "finishedJobs": 5}).to_string();
    let (status, _, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/finish"),
        Some(&finish),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // A repeated finish (a retried send) is accepted and changes nothing.
    let (status, _, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/finish"),
        Some(&finish),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, stored, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}"),
        None,
    )
    .await;
    assert_eq!(
        (stored["state"].clone(), stored["finishedJobs"].clone()),
        (json!(3), json!(5))
    );
    // The chain shows each job's latest state from the log.
    assert_eq!(stored["JobChain"]["jobs"]["abcd"], Value::Null);
    // Stopping a finished request is a conflict.
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/stop"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("it has finished")
    );
}

/// Issue #36: people are shown the request's own jobs: `ownJobs` leaves out the
/// grapher's begin and end wrappers (which Spin Cycle's `totalJobs` counts), and
/// `ownFinishedJobs` counts the own jobs whose latest try completed, in a get and a find.
#[tokio::test]
async fn a_request_counts_its_own_jobs_apart_from_the_wrappers() {
    let env = env().await;
    let id = create(&env).await;
    let (_, chain, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}/job-chain"),
        None,
    )
    .await;
    let job_id = |name: &str| -> String {
        let jobs = chain["jobs"].as_object().unwrap();
        jobs.iter()
            .find(|(_, job)| job["name"] == name)
            .map(|(id, _)| id.clone())
            .unwrap_or_else(|| panic!("no job {name} in {chain}"))
    };
    let entry = |job: &str, name: &str, job_type: &str| json!({"requestId": id, "jobId": job_id(job), "try": 1, "name": name, "type": job_type, "state": 3});
    let counts = async || {
        let (_, got, _) = call(
            &env.router,
            Method::GET,
            &format!("/api/v1/requests/{id}"),
            None,
        )
        .await;
        let (_, found, _) = call(&env.router, Method::GET, "/api/v1/requests?limit=5", None).await;
        let listed = found
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id.as_str())
            .cloned()
            .unwrap();
        let of = |r: &Value| {
            [
                &r["totalJobs"],
                &r["finishedJobs"],
                &r["ownJobs"],
                &r["ownFinishedJobs"],
            ]
            .map(Value::clone)
        };
        assert_eq!(of(&got), of(&listed), "a get and a find agree");
        of(&got)
    };
    assert_eq!(counts().await, [json!(5), json!(0), json!(1), Value::Null]);
    // The begin wrapper completed (none of the own job), then the own job.
    for (entries, finished) in [
        (
            json!([entry(
                "request_deploy_begin",
                "request_deploy_begin",
                "noop"
            )]),
            1,
        ),
        (json!([entry("pause", "pause", "sleep")]), 2),
    ] {
        let (status, _, _) = call(
            &env.router,
            Method::POST,
            "/api/v1/job-logs",
            Some(&entries.to_string()),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED);
        let progress = json!({"finishedJobs": finished}).to_string();
        let (status, _, _) = call(
            &env.router,
            Method::PUT,
            &format!("/api/v1/requests/{id}/progress"),
            Some(&progress),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }
    assert_eq!(counts().await, [json!(5), json!(2), json!(1), json!(1)]);
}

#[tokio::test]
async fn stop_asks_the_job_runner_that_runs_the_request() {
    let env = env().await;
    let id = create(&env).await;
    let (status, _, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/stop"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        env.jr.stopped.lock().unwrap().as_slice(),
        std::slice::from_ref(&id)
    );
    let (status, body, _) = call(&env.router, Method::GET, "/api/v1/status/running", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["jobs"][0]["requestId"], id.as_str());
    assert_eq!(body["requests"][id.as_str()]["type"], "deploy");
}

#[tokio::test]
async fn suspended_chains_are_stored_and_resumed() {
    let env = env().await;
    let id = create(&env).await;
    let mut job_chain = env.jr.chains.lock().unwrap()[0].clone();
    job_chain.state = State::Suspended;
    let suspended = SuspendedJobChain {
        request_id: id.clone(),
        job_chain,
        ..SuspendedJobChain::default()
    };
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/suspend"),
        Some(&serde_json::to_string(&suspended).unwrap()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, stored, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}"),
        None,
    )
    .await;
    assert_eq!(stored["state"], 7);
    // A suspended request cannot be stopped; it is resumed by the background loop.
    let (status, _, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/stop"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    env.manager.resume_suspended().await;
    assert_eq!(env.jr.resumed.lock().unwrap()[0], suspended);
    let (_, stored, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}"),
        None,
    )
    .await;
    assert_eq!(
        (stored["state"].clone(), stored["jrURL"].clone()),
        (json!(2), json!("http://jr1:32307"))
    );
}

#[tokio::test]
async fn request_list_and_version() {
    let env = env().await;
    let (status, body, _) = call(&env.router, Method::GET, "/api/v1/request-list", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body[0]["Name"], "deploy");
    assert_eq!(body[0]["Args"][1]["Default"], "10ms");
    let (status, body, _) = call(&env.router, Method::GET, "/version", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, Value::String(proto::version()));
    env.manager.shut_down();
    let (status, body, _) = call(
        &env.router,
        Method::POST,
        "/api/v1/requests",
        Some(r#"{"type": "deploy", "args": {"host": "db1"}}"#),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body["message"].as_str().unwrap().contains("shutting down"));
}

#[tokio::test]
async fn a_body_that_is_not_declared_json_is_415() {
    let env = env().await;
    let request = HttpRequest::builder()
        .method(Method::POST)
        .uri("/api/v1/requests")
        .header("content-type", "text/plain")
        .body(Body::from(r#"{"type": "deploy", "args": {"host": "db1"}}"#))
        .unwrap();
    let response = env.router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("Unsupported Media Type")
    );
    assert!(env.jr.chains.lock().unwrap().is_empty());
}

/// Issue #10: a chain that finishes before the Request Manager marked its request RUNNING
/// still leaves the request's times in order (created ≤ started ≤ finished).
#[tokio::test]
async fn a_chain_that_finishes_before_it_is_marked_running_keeps_its_times_in_order() {
    let env = env().await;
    *env.jr.finish_at_once.lock().unwrap() = Some(Arc::downgrade(&env.manager));
    for _ in 0..5 {
        let id = create(&env).await;
        let request = env.manager.get(&id, false).await.unwrap();
        assert_eq!(request.state, State::Complete);
        let started = request.started_at.expect("started");
        let finished = request.finished_at.expect("finished");
        assert!(
            request.created_at <= started && started <= finished,
            "created {} started {started} finished {finished}",
            request.created_at
        );
    }
}

/// Issue #10: a shell-args job runs its program when the request is created; that must not
/// hold the async runtime (here: its only thread), which serves every other call.
#[tokio::test(flavor = "current_thread")]
async fn creating_a_request_does_not_block_the_runtime() {
    const COMPUTED: &str = r#"sequences:
  computed:
    request: true
    args:
      required:
        - name: handshake
          desc: the directory of the handshake files
      static:
        - name: prog
          default: sh
        - name: script
          default: ["-c", "touch \"$SPINDLE_ARG_HANDSHAKE/started\"; for i in $(seq 1 200); do if [ -e \"$SPINDLE_ARG_HANDSHAKE/go\" ]; then echo '{\"hosts\": [\"a\"]}'; exit 0; fi; sleep 0.05; done; echo 'nobody answered' >&2; exit 1"]
    nodes:
      find:
        category: job
        type: shell-args
        args: [{expected: cmd, given: prog}, {expected: args, given: script}, {expected: handshake}]
        sets: [{arg: hosts}]
      use:
        category: job
        type: noop
        args: [{expected: hosts}]
        deps: [find]
"#;
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        store::SqliteStore::open(&dir.path().join("rm.db"))
            .await
            .unwrap(),
    );
    let report = spec::lint_str(Path::new("specs.yaml"), COMPUTED);
    assert!(!report.has_errors(), "{:#?}", report.diagnostics);
    let grapher = graph::Grapher::new(report.specs, Arc::new(job::Registry::builtin()));
    let manager = Arc::new(Manager::new(
        grapher,
        store,
        Arc::new(FakeJr::default()),
        Options::default(),
    ));
    let handshake = dir.path().to_str().unwrap().to_owned();
    let create = tokio::spawn({
        let manager = Arc::clone(&manager);
        let handshake = handshake.clone();
        async move {
            let create_request = proto::CreateRequest {
                request_type: "computed".to_owned(),
                args: [("handshake".to_owned(), json!(handshake))]
                    .into_iter()
                    .collect(),
                ..proto::CreateRequest::default()
            };
            manager.create(create_request, "ann", "").await
        }
    });
    // The program waits for this task to answer; this task runs only if creating the
    // request left the runtime's one thread free.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !dir.path().join("started").exists() {
        if create.is_finished() {
            panic!("created before the handshake: {:?}", create.await);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the program never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    std::fs::write(dir.path().join("go"), "").unwrap();
    let request = create.await.unwrap().expect("created");
    assert_eq!(request.request_type, "computed");
}

/// Issue #10: every 4xx and 5xx answer has the one error body, unknown routes and
/// methods included, and a conflict never carries the database's words.
#[tokio::test]
async fn every_error_has_the_error_body() {
    let env = env().await;
    for (method, uri, status) in [
        (Method::GET, "/api/v1/nothing-here", StatusCode::NOT_FOUND),
        (
            Method::DELETE,
            "/api/v1/requests",
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (Method::GET, "/api/v1/requests/nope", StatusCode::NOT_FOUND),
    ] {
        let (got, body, _) = call(&env.router, method.clone(), uri, None).await;
        assert_eq!(got, status, "{method} {uri}: {body}");
        assert_eq!(
            body["httpStatus"],
            status.as_u16(),
            "{method} {uri}: {body}"
        );
        assert!(
            !body["message"].as_str().unwrap().is_empty(),
            "{method} {uri}: {body}"
        );
    }
    let id = create(&env).await;
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/start"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["httpStatus"], 409);
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("expected state PENDING"), "{message}");
    for database_word in ["constraint", "SQLITE", "violat", "sqlx"] {
        assert!(!message.contains(database_word), "{message}");
    }
}

#[tokio::test]
async fn job_output_is_stored_and_served_from_a_cursor() {
    let env = env().await;
    let id = create(&env).await;
    let batch = json!([
        {"requestId": id, "jobId": "abcd", "try": 1, "stream": "stdout", "offset": 0, "data": "one\n"},
        {"requestId": id, "jobId": "abcd", "try": 1, "stream": "stderr", "offset": 0, "data": "<b>warn</b>\n"},
    ]);
    let (status, body, _) = call(
        &env.router,
        Method::POST,
        "/api/v1/job-output",
        Some(&batch.to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let url = format!("/api/v1/requests/{id}/output");
    let (status, page, _) = call(&env.router, Method::GET, &url, None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["state"], 2, "a RUNNING request: {page}");
    let chunks = page["chunks"].as_array().unwrap();
    assert_eq!(chunks.len(), 2);
    assert_eq!(chunks[1]["stream"], "stderr");
    assert_eq!(chunks[1]["data"], "<b>warn</b>\n");
    let next = page["next"].as_i64().unwrap();
    assert_eq!(chunks[1]["seq"].as_i64(), Some(next));
    // Nothing new after the cursor: an empty page that keeps the cursor.
    let (_, page, _) = call(
        &env.router,
        Method::GET,
        &format!("{url}?after={next}"),
        None,
    )
    .await;
    assert_eq!(page["chunks"], json!([]));
    assert_eq!(page["next"].as_i64(), Some(next));
    let more = json!([{"requestId": id, "jobId": "abcd", "try": 1, "stream": "stdout", "offset": 4, "data": "two\n"}]);
    call(
        &env.router,
        Method::POST,
        "/api/v1/job-output",
        Some(&more.to_string()),
    )
    .await;
    let (_, page, _) = call(
        &env.router,
        Method::GET,
        &format!("{url}?after={next}&job=abcd&try=1"),
        None,
    )
    .await;
    assert_eq!(page["chunks"][0]["data"], "two\n");
    assert_eq!(page["chunks"][0]["offset"], 4);

    // Bad input is a 400 that says what was expected; an unknown request is a 404.
    for (query, expected) in [
        ("?after=soon", "expected after=CURSOR"),
        ("?try=1", "try= without job="),
        ("?limit=0", "expected 1..1000"),
        ("?colour=red", "unknown field `colour`"),
    ] {
        let (status, body, _) =
            call(&env.router, Method::GET, &format!("{url}{query}"), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(expected), "{query}: {message}");
    }
    let (status, _, _) = call(
        &env.router,
        Method::GET,
        "/api/v1/requests/nope/output",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let nameless = json!([{"requestId": id, "jobId": "", "try": 1, "stream": "stdout", "offset": 0, "data": "x"}]);
    let (status, body, _) = call(
        &env.router,
        Method::POST,
        "/api/v1/job-output",
        Some(&nameless.to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("expected all three")
    );
}

// ---- runners, fencing, recovery (issue 11) ----

async fn register(env: &Env, instance: &str, url: &str) -> Value {
    env.jr
        .instances
        .lock()
        .unwrap()
        .insert(url.to_owned(), instance.to_owned());
    let body = serde_json::json!({"instanceId": instance, "url": url, "lease": "10s", "host": "h", "pid": 7});
    send_json(
        env,
        Method::POST,
        "/api/v1/job-runners",
        &body,
        StatusCode::CREATED,
    )
    .await
}

#[tokio::test]
async fn chains_go_to_the_live_runner_with_the_fewest_requests() {
    let env = env_with(Options::default()).await;
    // No runner yet: the request waits.
    let waiting = create(&env).await;
    assert_eq!(
        env.manager.get(&waiting, false).await.unwrap().state,
        State::Pending
    );
    let (status, body, _) = call(
        &env.router,
        Method::POST,
        "/api/v1/job-runners",
        Some(r#"{"instanceId": "", "url": "http://a", "lease": "10s"}"#),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["message"].as_str().unwrap().contains("no instanceId"),
        "{body}"
    );
    let a = register(&env, "ia", "http://jr-a:1").await;
    assert_eq!(
        (a["state"].as_str(), a["runningRequests"].as_u64()),
        (Some("live"), Some(0))
    );
    register(&env, "ib", "http://jr-b:1").await;
    for _ in 0..4 {
        create(&env).await;
    }
    let sent: Vec<String> = env
        .jr
        .sent_to
        .lock()
        .unwrap()
        .iter()
        .map(|(url, _)| url.clone())
        .collect();
    let to_a = sent.iter().filter(|url| *url == "http://jr-a:1").count();
    assert_eq!((sent.len(), to_a), (4, 2), "{sent:?}");
    let (status, listed, _) = call(&env.router, Method::GET, "/api/v1/job-runners", None).await;
    assert_eq!(status, StatusCode::OK);
    let counts: Vec<u64> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["runningRequests"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [2, 2]);

    // A runner that renews keeps its lease; one that deregistered is stopped and gets
    // nothing more.
    let (status, renewed, _) = call(
        &env.router,
        Method::PUT,
        "/api/v1/job-runners/ia/lease",
        None,
    )
    .await;
    assert_eq!(
        (status, renewed["state"].as_str()),
        (StatusCode::OK, Some("live"))
    );
    let (status, _, _) = call(&env.router, Method::DELETE, "/api/v1/job-runners/ib", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        "/api/v1/job-runners/ib/lease",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(
        body["message"].as_str().unwrap().contains("register again"),
        "{body}"
    );
    create(&env).await;
    assert_eq!(
        env.jr.sent_to.lock().unwrap().last().unwrap().0,
        "http://jr-a:1"
    );
    // A new registration at a runner's address means that process is gone.
    register(&env, "ia2", "http://jr-a:1").await;
    let (_, listed, _) = call(&env.router, Method::GET, "/api/v1/job-runners", None).await;
    let ia = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["instanceId"] == "ia")
        .unwrap()
        .clone();
    assert_eq!(ia["state"], "lost");
}

#[tokio::test]
async fn a_report_from_a_runner_that_no_longer_owns_the_request_is_refused_as_fenced() {
    let env = env().await;
    let id = create(&env).await;
    let (_, epoch) = env.jr.sent_to.lock().unwrap()[0].clone();
    assert_eq!(epoch, 1);
    let owner = "instance-of-http://jr1:32307";
    let entry =
        serde_json::json!([{"requestId": id, "jobId": "j", "try": 1, "state": 3}]).to_string();
    let (status, body, headers) = call_with(
        &env.router,
        Method::POST,
        "/api/v1/job-logs",
        Some(&entry),
        &[("spindle-runner", "someone-else"), ("spindle-epoch", "1")],
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(headers["spindle-fenced"], "true");
    says(
        &body,
        &format!("owned by job runner instance {owner} at epoch 1"),
    );
    let (status, _, headers) = call_with(
        &env.router,
        Method::POST,
        "/api/v1/job-logs",
        Some(&entry),
        &[("spindle-runner", owner), ("spindle-epoch", "1")],
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(headers.get("spindle-fenced").is_none());
    let (status, body, _) = call_with(
        &env.router,
        Method::POST,
        "/api/v1/job-logs",
        Some(&entry),
        &[("spindle-epoch", "one")],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    says(&body, "expected a whole number");
    let finish =
        serde_json::json!({"state": 3, "finishedAt": "2026-01-01T00:00:00Z", "finishedJobs": 1})
            .to_string();
    let (status, _, headers) = call_with(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/finish"),
        Some(&finish),
        &[("spindle-runner", owner), ("spindle-epoch", "0")],
    )
    .await;
    assert_eq!(
        (status, headers.get("spindle-fenced").is_some()),
        (StatusCode::CONFLICT, true)
    );
    assert_eq!(
        env.manager.get(&id, false).await.unwrap().state,
        State::Running
    );
    let (status, _, _) = call_with(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/finish"),
        Some(&finish),
        &[("spindle-runner", owner), ("spindle-epoch", "1")],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        env.manager.get(&id, false).await.unwrap().state,
        State::Complete
    );
}

/// A final state carries the chain's last job log entries (one call, not two): they are
/// stored with it, judged by the same fence (a stale runner's are not), and each must be
/// about the request the URL names.
#[tokio::test]
async fn a_final_state_stores_the_entries_it_carries() {
    let env = env().await;
    let id = create(&env).await;
    let owner = "instance-of-http://jr1:32307";
    let finish = |request: &str| {
        serde_json::json!({
            "state": 3,
            "finishedAt": "2026-01-01T00:00:00Z",
            "finishedJobs": 2,
            "jobLogs": [
                {"requestId": request, "jobId": "a", "try": 1, "state": 3},
                {"jobId": "b", "try": 1, "state": 4, "error": "exit 1"}
            ]
        })
        .to_string()
    };
    let put = |body: String, epoch: &'static str| {
        let (router, uri) = (env.router.clone(), format!("/api/v1/requests/{id}/finish"));
        async move {
            call_with(
                &router,
                Method::PUT,
                &uri,
                Some(&body),
                &[("spindle-runner", owner), ("spindle-epoch", epoch)],
            )
            .await
        }
    };
    let logged = || async {
        let mut ids: Vec<String> = env
            .manager
            .job_log(&id)
            .await
            .unwrap()
            .into_iter()
            .map(|entry| entry.job_id)
            .collect();
        ids.sort();
        ids
    };
    // About another request: refused, nothing stored.
    let (status, body, _) = put(finish("someone-elses"), "1").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    says(&body, "does not match the request id in the URL");
    // From an older hand-over: fenced, nothing stored.
    let (status, _, headers) = put(finish(&id), "0").await;
    assert_eq!(
        (status, headers.get("spindle-fenced").is_some()),
        (StatusCode::CONFLICT, true)
    );
    assert!(logged().await.is_empty());
    assert_eq!(
        env.manager.get(&id, false).await.unwrap().state,
        State::Running
    );
    // From the owner: the entries (an empty requestId is the URL's) and the end.
    let (status, body, _) = put(finish(&id), "1").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(logged().await, ["a", "b"]);
    let request = env.manager.get(&id, false).await.unwrap();
    assert_eq!((request.state, request.finished_jobs), (State::Complete, 2));
    // Sent again (its answer was lost): a no-op.
    let (status, _, _) = put(finish(&id), "1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(logged().await, ["a", "b"]);
}

#[tokio::test]
async fn a_lost_runners_request_is_rebuilt_and_resumed_on_a_live_one() {
    let lease = std::time::Duration::from_millis(200);
    let env = env_with(Options {
        lease,
        ..Options::default()
    })
    .await;
    register(&env, "lost", "http://jr-lost:1").await;
    let id = create(&env).await;
    let (url, epoch) = env.jr.sent_to.lock().unwrap()[0].clone();
    assert_eq!(url, "http://jr-lost:1");
    let fence = proto::Fence {
        instance: "lost".to_owned(),
        epoch,
    };
    let chain = env.manager.job_chain(&id).await.unwrap();
    let mut ids: Vec<String> = chain.jobs.keys().cloned().collect();
    ids.sort();
    let (done, cut) = (&ids[0], &ids[1]);
    // One job completed; another had started its second try when the runner went.
    let start = |job: &str, try_no: u32| proto::TryStart {
        request_id: id.clone(),
        job_id: job.to_owned(),
        r#try: try_no,
        run_try: try_no,
        sequence_try: 1,
        started_at: 1_000,
    };
    env.manager
        .add_try_starts(
            vec![start(done, 1), start(cut, 1), start(cut, 2)],
            Some(&fence),
        )
        .await
        .unwrap();
    let log = |job: &str, try_no: u32, state: State| proto::JobLog {
        request_id: id.clone(),
        job_id: job.to_owned(),
        r#try: try_no,
        state,
        ..proto::JobLog::default()
    };
    env.manager
        .add_job_logs(
            vec![log(done, 1, State::Complete), log(cut, 1, State::Fail)],
            Some(&fence),
        )
        .await
        .unwrap();
    // Its lease lapsed a minute ago; another runner is live.
    register(&env, "live", "http://jr-live:1").await;
    env.manager
        .store()
        .renew_runner("lost", chrono::Utc::now() - chrono::Duration::minutes(1))
        .await
        .unwrap();
    // Not before this Request Manager has seen the database for a whole lease.
    env.manager.background_round().await;
    assert_eq!(
        env.manager.get(&id, false).await.unwrap().state,
        State::Running
    );
    // The lease is what must pass: a wait for time itself, not for a condition.
    tokio::time::sleep(lease).await;
    env.manager.renew_runner("live", None).await.unwrap();
    env.manager.background_round().await;

    let resumed = env.jr.resumed.lock().unwrap().clone();
    assert_eq!(resumed.len(), 1, "resumed once");
    let suspended = &resumed[0];
    assert_eq!(
        env.jr.sent_to.lock().unwrap()[1],
        ("http://jr-live:1".to_owned(), epoch + 2)
    );
    assert_eq!(suspended.job_chain.jobs[done].state, State::Complete);
    assert_eq!(suspended.job_chain.jobs[cut].state, State::Stopped);
    assert_eq!(suspended.total_job_tries[cut], 2);
    // Try 2 was interrupted: resuming gives it back, so one try counts.
    assert_eq!(suspended.latest_run_job_tries[cut], 2);
    assert_interrupted(
        &env,
        &id,
        cut,
        2,
        "interrupted: its job runner (instance lost at http://jr-lost:1) was lost",
    )
    .await;
    let request = env.manager.get(&id, false).await.unwrap();
    assert_eq!(
        (request.state, request.jr_url.as_str()),
        (State::Running, "http://jr-live:1")
    );
    // The lost runner, back from a pause, is refused.
    let late = final_state(&id, State::Complete, 2);
    let err = env.manager.finish(&late, Some(&fence)).await.unwrap_err();
    assert!(matches!(err, crate::Error::Fenced(_)), "{err}");
    // Another round recovers nothing more.
    env.manager.background_round().await;
    assert_eq!(env.jr.resumed.lock().unwrap().len(), 1);
}

/// A live runner whose renewals leave out a request it owns as RUNNING (its chain ended
/// and its reports never reached a Request Manager) gets it taken back after the second
/// such renewal, not the first; the request is resumed on a live runner, its started try
/// logged as interrupted with the reason. A renewal without a body changes nothing.
#[tokio::test]
async fn a_request_its_live_runner_no_longer_holds_is_recovered_after_two_renewals() {
    let env = env_with(Options::default()).await;
    register(&env, "ia", "http://jr-a:1").await;
    let id = create(&env).await;
    let (_, epoch) = env.jr.sent_to.lock().unwrap()[0].clone();
    let fence = proto::Fence {
        instance: "ia".to_owned(),
        epoch,
    };
    let chain = env.manager.job_chain(&id).await.unwrap();
    let job = chain.jobs.keys().next().unwrap().clone();
    env.manager
        .add_try_starts(vec![try_start(&id, &job, 1, 1_000)], Some(&fence))
        .await
        .unwrap();
    let renew = |body: Option<String>| {
        let router = env.router.clone();
        async move {
            let headers: &[(&str, &str)] = if body.is_some() {
                &[("content-type", "application/json")]
            } else {
                &[]
            };
            let (status, body, _) = call_with(
                &router,
                Method::PUT,
                "/api/v1/job-runners/ia/lease",
                body.as_deref(),
                headers,
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{body}");
        }
    };
    let state = || async { env.manager.get(&id, false).await.unwrap().state };
    let held = |ids: &[&str]| Some(serde_json::json!({ "running": ids }).to_string());
    // Left out once, then held, then left out once more: nothing happens.
    renew(held(&[])).await;
    renew(held(&[&id])).await;
    renew(held(&[])).await;
    renew(None).await;
    assert_eq!(state().await, State::Running);
    // A body that is not a renewal is refused, and says what was expected.
    let (status, body, _) = call_with(
        &env.router,
        Method::PUT,
        "/api/v1/job-runners/ia/lease",
        Some(r#"{"running": "abc"}"#),
        &[("content-type", "application/json")],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    says(&body, "invalid lease renewal");
    assert_eq!(state().await, State::Running);
    // The second in a row takes it back; it is resumed on a live runner.
    renew(held(&[])).await;
    assert_eq!(state().await, State::Suspended);
    env.manager.background_round().await;
    let resumed = env.jr.resumed.lock().unwrap().clone();
    assert_eq!(resumed.len(), 1, "resumed once");
    assert_eq!(
        env.jr.sent_to.lock().unwrap()[1],
        ("http://jr-a:1".to_owned(), epoch + 2)
    );
    assert_eq!(state().await, State::Running);
    assert_interrupted(
        &env,
        &id,
        &job,
        1,
        "interrupted: its job runner (instance ia at http://jr-a:1) no longer ran the request",
    )
    .await;
    // The old hand-over's reports are refused now; the new one's renewals keep it.
    let err = env
        .manager
        .add_try_starts(vec![try_start(&id, &job, 2, 2_000)], Some(&fence))
        .await
        .unwrap_err();
    assert!(matches!(err, crate::Error::Fenced(_)), "{err}");
    renew(held(&[&id])).await;
    renew(held(&[&id])).await;
    assert_eq!(state().await, State::Running);
}

/// A resumed chain that ends, or is handed back, before the Request Manager that resumed
/// it recorded the resume (a chain whose every job was done ends at once) is told to
/// try again (503), not refused for good: refused, its runner would give its end up and
/// the request would stay RUNNING there. Once the resume is recorded, the end is stored.
#[tokio::test]
async fn a_resumed_chains_end_before_its_resume_is_recorded_is_taken_when_it_is() {
    let env = env_with(Options::default()).await;
    register(&env, "ia", "http://jr-a:1").await;
    let id = create(&env).await;
    for _ in 0..2 {
        env.manager.renew_runner("ia", Some(&[])).await.unwrap();
    }
    let request_id = RequestId::new(id.clone());
    let state = || async { env.manager.get(&id, false).await.unwrap().state };
    assert_eq!(state().await, State::Suspended);
    // Another Request Manager claims the chain and hands it to a runner, which ends it
    // (or shuts down and hands it back) before that Request Manager records the resume.
    let store = env.manager.store();
    let suspended = store
        .claim_suspended("rm-b", chrono::Utc::now())
        .await
        .unwrap()
        .unwrap();
    let epoch = store
        .hand_over(&request_id, State::Suspended)
        .await
        .unwrap();
    let fence = proto::Fence {
        instance: "ib".to_owned(),
        epoch,
    };
    let finish = final_state(&id, State::Complete, 3);
    let err = env.manager.finish(&finish, Some(&fence)).await.unwrap_err();
    assert!(matches!(err, crate::Error::Unavailable { .. }), "{err}");
    assert!(err.to_string().contains("is being resumed"), "{err}");
    let err = env
        .manager
        .suspend(&suspended, Some(&fence))
        .await
        .unwrap_err();
    assert!(matches!(err, crate::Error::Unavailable { .. }), "{err}");
    // An older hand-over's end is still refused as fenced.
    let old = proto::Fence {
        instance: "ia".to_owned(),
        epoch: epoch - 1,
    };
    let err = env.manager.finish(&finish, Some(&old)).await.unwrap_err();
    assert!(matches!(err, crate::Error::Fenced(_)), "{err}");
    assert_eq!(state().await, State::Suspended);
    // Recorded: the end sent again is stored.
    store
        .resumed(&request_id, "rm-b", "http://jr-b:1", Some(&fence))
        .await
        .unwrap();
    env.manager.finish(&finish, Some(&fence)).await.unwrap();
    assert_eq!(state().await, State::Complete);
}

/// Issue #16: a pause is stored with the request, told to its runner, carried by every
/// later hand-over (a suspended chain resumed starts paused), recorded in the audit
/// trail, and refused for a finished request.
#[tokio::test]
async fn a_pause_is_stored_told_to_the_runner_and_kept_across_hand_overs() {
    let env = env().await;
    let id = create(&env).await;
    let put = |action: &'static str| {
        let (router, uri) = (
            env.router.clone(),
            format!("/api/v1/requests/{id}/{action}"),
        );
        async move {
            let (status, body, _) = call_with(
                &router,
                Method::PUT,
                &uri,
                None,
                &[("x-spindle-user", "ann")],
            )
            .await;
            (status, body)
        }
    };
    let paused = || async {
        let (_, stored, _) = call(
            &env.router,
            Method::GET,
            &format!("/api/v1/requests/{id}"),
            None,
        )
        .await;
        stored["paused"].clone()
    };
    assert_eq!(paused().await, Value::Null, "omitted while not paused");
    assert_eq!(put("pause").await.0, StatusCode::OK);
    assert_eq!(paused().await, json!(true));
    assert_eq!(*env.jr.pauses.lock().unwrap(), [(id.clone(), true)]);

    // Handed back (the runner shut down) and resumed: the chain starts paused.
    let mut job_chain = env.jr.chains.lock().unwrap()[0].clone();
    job_chain.state = State::Suspended;
    let suspended = SuspendedJobChain {
        request_id: id.clone(),
        job_chain,
        ..SuspendedJobChain::default()
    };
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/suspend"),
        Some(&serde_json::to_string(&suspended).unwrap()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    env.manager.resume_suspended().await;
    assert_eq!(env.jr.resumed.lock().unwrap().len(), 1);
    assert_eq!(*env.jr.paused_at_hand_over.lock().unwrap(), [false, true]);
    assert_eq!(paused().await, json!(true));

    assert_eq!(put("resume").await.0, StatusCode::OK);
    assert_eq!(paused().await, Value::Null);
    assert_eq!(
        env.jr.pauses.lock().unwrap().last(),
        Some(&(id.clone(), false))
    );
    let (status, _, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}/audit"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let trail = env.manager.store().audit(&id).await.unwrap();
    let actions: Vec<(&str, &str)> = trail
        .iter()
        .map(|event| (event.action.as_str(), event.user.as_str()))
        .collect();
    assert_eq!(
        actions,
        [("create", ""), ("pause", "ann"), ("resume", "ann")]
    );

    // Finished: nothing to pause; an unknown request is 404.
    let finish = final_state(&id, State::Complete, 1);
    env.manager.finish(&finish, None).await.unwrap();
    let (status, body) = put("pause").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    says(
        &body,
        "in state COMPLETE, expected state PENDING, RUNNING or SUSPENDED",
    );
    let (status, _, _) = call(
        &env.router,
        Method::PUT,
        "/api/v1/requests/bbbbbbbbbbbbbbbbbbbb/pause",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

const THREE_STEPS: &str = "sequences:
  steps:
    request: true
    args:
      optional:
        - name: wait
          default: 10ms
    nodes:
      a:
        category: job
        type: sleep
        args: [{expected: duration, given: wait}]
      b:
        category: job
        type: sleep
        deps: [a]
        args: [{expected: duration, given: wait}]
      c:
        category: job
        type: sleep
        deps: [b]
        args: [{expected: duration, given: wait}]
";

/// Issue #16: a FAIL request retried runs again as the same request: completed jobs
/// stay complete, the failed and unrun ones run again, try numbers continue; `from`
/// runs a job and everything after it again, also of a COMPLETE request.
#[tokio::test]
async fn a_retried_request_runs_its_failed_and_unrun_jobs_again_as_the_same_request() {
    let env = env_specs(
        Options {
            jr_url: Some("http://jr1:32307".to_owned()),
            ..Options::default()
        },
        THREE_STEPS,
    )
    .await;
    let (status, body, _) = call(
        &env.router,
        Method::POST,
        "/api/v1/requests",
        Some(r#"{"type": "steps", "args": {}}"#),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["id"].as_str().unwrap().to_owned();
    let chain = env.jr.chains.lock().unwrap()[0].clone();
    let job_id = |name: &str| {
        chain
            .jobs
            .values()
            .find(|job| job.name == name)
            .unwrap()
            .id
            .clone()
    };
    let (a, b, c) = (job_id("a"), job_id("b"), job_id("c"));
    let entry = |job: &str, try_no: u32, state: State| proto::JobLog {
        request_id: id.clone(),
        job_id: job.to_owned(),
        r#try: try_no,
        state,
        ..proto::JobLog::default()
    };
    let finish = |state: State, finished_jobs: u64| final_state(&id, state, finished_jobs);
    env.manager
        .add_job_logs(
            vec![
                entry(&a, 1, State::Complete),
                entry(&b, 1, State::Fail),
                entry(&b, 2, State::Fail),
            ],
            None,
        )
        .await
        .unwrap();
    env.manager
        .finish(&finish(State::Fail, 1), None)
        .await
        .unwrap();
    let retry = |query: &'static str| {
        let (router, uri) = (
            env.router.clone(),
            format!("/api/v1/requests/{id}/retry{query}"),
        );
        async move {
            let (status, body, _) = call_with(
                &router,
                Method::PUT,
                &uri,
                None,
                &[("x-spindle-user", "bo")],
            )
            .await;
            (status, body)
        }
    };
    let (status, body) = retry("").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let resumed = env.jr.resumed.lock().unwrap().clone();
    assert_eq!(resumed.len(), 1, "handed to a runner at once");
    let jobs = &resumed[0].job_chain.jobs;
    assert_eq!(
        (jobs[&a].state, jobs[&b].state, jobs[&c].state),
        (State::Complete, State::Pending, State::Pending)
    );
    assert_eq!(resumed[0].job_chain.finished_jobs, 1);
    assert_eq!(
        resumed[0].total_job_tries.get(&b),
        Some(&2),
        "try numbers go on"
    );
    assert_eq!(resumed[0].total_job_tries.get(&c), None);
    let request = env.manager.get(&id, false).await.unwrap();
    assert_eq!(
        (request.state, request.finished_at, request.finished_jobs),
        (State::Running, None, 1)
    );
    assert_eq!(
        env.manager.job_log(&id).await.unwrap().len(),
        3,
        "earlier tries kept"
    );
    let (status, body) = retry("").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");

    // It completes; a retry from b runs b and c again, not a.
    let epoch = env.jr.sent_to.lock().unwrap().last().unwrap().1;
    let fence = proto::Fence {
        instance: "instance-of-http://jr1:32307".to_owned(),
        epoch,
    };
    env.manager
        .add_job_logs(
            vec![entry(&b, 3, State::Complete), entry(&c, 1, State::Complete)],
            Some(&fence),
        )
        .await
        .unwrap();
    env.manager
        .finish(&finish(State::Complete, 3), Some(&fence))
        .await
        .unwrap();
    let (status, body) = retry("").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    says(&body, "retry --from JOB");
    let (status, body) = retry("?from=nope").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    says(&body, "has no job \"nope\"");
    let (status, body) = retry("?from=b").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let resumed = env.jr.resumed.lock().unwrap().clone();
    let jobs = &resumed[1].job_chain.jobs;
    assert_eq!(
        (jobs[&a].state, jobs[&b].state, jobs[&c].state),
        (State::Complete, State::Pending, State::Pending)
    );
    assert_eq!(resumed[1].total_job_tries.get(&b), Some(&3));
    assert_eq!(resumed[1].total_job_tries.get(&c), Some(&1));
    // The old runner's hand-over is fenced off.
    let err = env
        .manager
        .finish(&finish(State::Complete, 3), Some(&fence))
        .await
        .unwrap_err();
    assert!(matches!(err, crate::Error::Fenced(_)), "{err}");
    let actions: Vec<String> = env
        .manager
        .store()
        .audit(&id)
        .await
        .unwrap()
        .into_iter()
        .map(|event| format!("{} {}", event.action, event.user))
        .collect();
    assert_eq!(actions, ["create ", "retry bo", "retry bo"]);
}

const GATE_SPECS: &str = "sequences:
  ship:
    request: true
    args:
      static:
        - name: approvers
          default: [release]
    nodes:
      sign-off:
        category: job
        type: approval
        args: [{expected: roles, given: approvers}]
";

/// Issue #16: an approval's answer is authorized by the job's roles, stored once, told
/// to the runner, carried by a later hand-over in the job's data, and audited.
#[tokio::test]
async fn an_approval_is_answered_by_its_roles_once_and_handed_over_with_the_chain() {
    let token = |name: &str| format!("spindle_test_{name}");
    let line = |name: &str, roles: &[&str]| {
        auth::TokenLine::of(
            &token(name),
            name,
            &roles.iter().map(|r| (*r).to_owned()).collect::<Vec<_>>(),
        )
        .to_string()
    };
    let tokens = auth::Tokens::parse(
        "tokens",
        &[line("ann", &["release"]), line("bob", &["dev"])].join("\n"),
    )
    .unwrap();
    let mut acls = std::collections::HashMap::new();
    acls.insert("ship".to_owned(), Vec::new());
    let auth = auth::Auth {
        authenticators: vec![Arc::new(tokens)],
        acls: auth::Acls::new(acls),
        admin_roles: Vec::new(),
        strict: false,
        read_roles: None,
        service_roles: vec!["spindle".to_owned()],
        metrics_roles: vec!["metrics".to_owned()],
    };
    let env = env_specs(
        Options {
            jr_url: Some("http://jr1:32307".to_owned()),
            auth: Some(Arc::new(auth)),
            ..Options::default()
        },
        GATE_SPECS,
    )
    .await;
    let router = env
        .router
        .clone()
        .layer(axum::middleware::from_fn_with_state(
            env.manager.clone(),
            crate::authenticate,
        ));
    let bearer = |name: &str| format!("Bearer {}", token(name));
    let (status, body, _) = call_with(
        &router,
        Method::POST,
        "/api/v1/requests",
        Some(r#"{"type": "ship", "args": {}}"#),
        &[("authorization", &bearer("bob"))],
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["id"].as_str().unwrap().to_owned();
    let put = |who: &str, path: &str| {
        let (router, uri, auth) = (
            router.clone(),
            format!("/api/v1/requests/{id}/{path}"),
            bearer(who),
        );
        async move {
            let (status, body, _) = call_with(
                &router,
                Method::PUT,
                &uri,
                None,
                &[("authorization", &auth)],
            )
            .await;
            (status, body)
        }
    };
    let (status, body) = put("bob", "approve").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    says(&body, "takes one of the roles release");
    let (status, body) = put("ann", "approve?job=nope").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = put("ann", "approve?comment=fine").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let told = env.jr.answers.lock().unwrap().clone();
    assert_eq!(told.len(), 1);
    assert_eq!((told[0].0.as_str(), told[0].2), (id.as_str(), true));
    let (status, body) = put("ann", "reject?job=sign-off").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    says(&body, "was approved by ann");

    // Handed over again (suspended, then resumed): the answer is in the job's data.
    let mut job_chain = env.jr.chains.lock().unwrap()[0].clone();
    job_chain.state = State::Suspended;
    let gate = job_chain
        .jobs
        .values()
        .find(|job| job.job_type == "approval")
        .unwrap()
        .id
        .clone();
    let suspended = SuspendedJobChain {
        request_id: id.clone(),
        job_chain,
        ..SuspendedJobChain::default()
    };
    env.manager.suspend(&suspended, None).await.unwrap();
    env.manager.resume_suspended().await;
    let resumed = env.jr.resumed.lock().unwrap()[0].clone();
    let stored = &resumed.job_chain.jobs[&gate].data[&job::approval::data_key(&gate)];
    assert_eq!(
        (
            stored["approved"].clone(),
            stored["user"].clone(),
            stored["comment"].clone()
        ),
        (json!(true), json!("ann"), json!("fine"))
    );
    let trail = env.manager.store().audit(&id).await.unwrap();
    let actions: Vec<(&str, &str)> = trail
        .iter()
        .map(|e| (e.action.as_str(), e.user.as_str()))
        .collect();
    assert_eq!(actions, [("create", "bob"), ("approve", "ann")]);
}

/// A manager (its background round every `interval`) with the request type `tick` (one
/// noop) and `schedules`, the entries of a `schedules:` section, loaded.
async fn schedule_env(schedules: &str, interval: std::time::Duration) -> Env {
    let specs = format!(
        "sequences:
  tick:
    request: true
    nodes:
      beat:
        category: job
        type: noop
schedules:
{schedules}"
    );
    let options = Options {
        jr_url: Some("http://jr1:32307".to_owned()),
        interval,
        ..Options::default()
    };
    let env = env_specs(options, &specs).await;
    let report = spec::lint_str(std::path::Path::new("specs.yaml"), &specs);
    let fires = report.specs.schedules().iter();
    env.manager
        .set_schedules(fires.map(|schedule| schedule.fires().unwrap()).collect());
    env
}

/// Issue #16: runs missed while no Request Manager ran are skipped, or (`missed:
/// start`) the latest is started late, once; a run is started once, whoever claims it.
#[tokio::test]
async fn missed_schedule_runs_are_skipped_or_the_latest_started_late() {
    let created = chrono::Utc::now();
    // Two rounds, at least 2 s: runs older than that were missed.
    let env = schedule_env(
        "  skipping:
    cron: \"* * * * * *\"
    request: tick
    overlap: start
  catching-up:
    cron: \"* * * * * *\"
    request: tick
    overlap: start
    missed: start
",
        std::time::Duration::from_millis(500),
    )
    .await;
    let store = env.manager.store();
    // Both last ran a minute ago; nothing ran since.
    let long_ago = chrono::Utc::now() - chrono::Duration::seconds(60);
    let long_ago =
        long_ago - chrono::Duration::nanoseconds(long_ago.timestamp_subsec_nanos().into());
    for name in ["skipping", "catching-up"] {
        assert!(
            store
                .claim_schedule_run(name, long_ago, "rm-old")
                .await
                .unwrap()
        );
        store
            .schedule_run_done(name, long_ago, "r-old", "")
            .await
            .unwrap();
    }
    // Runs fall due after the manager started (every second).
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    env.manager.run_schedules().await;
    let started = |name: &'static str| {
        let store = Arc::clone(store);
        async move {
            let runs = store.schedule_runs(name, 100).await.unwrap();
            runs.into_iter()
                .filter(|run| !run.request_id.is_empty() && run.request_id != "r-old")
                .map(|run| run.due_at)
                .collect::<Vec<_>>()
        }
    };
    let skipping = started("skipping").await;
    assert!(!skipping.is_empty() && skipping.len() <= 3, "{skipping:?}");
    // Issue #36: `missed: skip` at start: nothing due before the manager started.
    assert!(
        skipping.iter().all(|at| *at >= created),
        "only runs due since the manager started ({created}): {skipping:?}"
    );
    let catching_up = started("catching-up").await;
    assert_eq!(
        catching_up.len(),
        skipping.len() + 1,
        "the same recent runs, and the latest missed one: {catching_up:?} {skipping:?}"
    );
    assert!(
        catching_up.iter().min() < skipping.iter().min(),
        "{catching_up:?}"
    );
    // Another round (another Request Manager) starts nothing twice.
    let before = store
        .find_requests(&proto::RequestFilter {
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .len();
    env.manager.run_schedules().await;
    let requests = store
        .find_requests(&proto::RequestFilter {
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut users: Vec<&str> = requests.iter().map(|r| r.user.as_str()).collect();
    users.sort();
    let n = users.len();
    users.dedup();
    assert_eq!(users.len(), n, "one request per run");
    assert!(n >= before, "{n} {before}");
}

/// Issue #36: a scheduled run starts when it falls due, not at the next background
/// round (here a minute apart).
#[tokio::test]
async fn scheduled_runs_start_on_time_whatever_the_interval() {
    let env = schedule_env(
        "  every-second:
    cron: \"* * * * * *\"
    request: tick
    overlap: start
",
        std::time::Duration::from_secs(60),
    )
    .await;
    let stop = tokio_util::sync::CancellationToken::new();
    let background = tokio::spawn(env.manager.clone().run_background(stop.clone()));
    tokio::time::sleep(std::time::Duration::from_millis(3500)).await;
    stop.cancel();
    background.await.unwrap();
    let store = env.manager.store();
    let runs = store.schedule_runs("every-second", 100).await.unwrap();
    let started: Vec<_> = runs
        .iter()
        .filter(|run| !run.request_id.is_empty())
        .collect();
    assert!(
        started.len() >= 2,
        "a run each second, not one a minute: {runs:?}"
    );
    for run in started {
        let request = store.get_request(&run.request_id, false).await.unwrap();
        let late = request.created_at - run.due_at;
        // Generous for a loaded machine; a round a minute apart would be up to 60 s late.
        assert!(
            late < chrono::Duration::seconds(2),
            "run due at {} started {late} late",
            run.due_at
        );
    }
}

/// A hand-over that reached a runner, which ran jobs, but was never recorded (the
/// Request Manager died between the two, as in the chaos test): offered again, the
/// request is not sent as a new chain (a runner refuses one with jobs that ran, and it
/// stayed PENDING for ever) but taken back like a lost runner's request and resumed,
/// and whichever runner had it is fenced off.
#[tokio::test]
async fn a_pending_request_that_began_on_a_runner_is_taken_back_and_resumed() {
    let env = env().await;
    env.jr.answer.store(503, Ordering::SeqCst);
    let id = create(&env).await;
    let request_id = RequestId::from(id.as_str());
    // The hand-over that nobody recorded: epoch 2, to a runner that began the chain.
    let epoch = env
        .manager
        .store()
        .hand_over(&request_id, State::Pending)
        .await
        .unwrap();
    let ghost = proto::Fence {
        instance: "ghost".to_owned(),
        epoch,
    };
    let chain = env.manager.job_chain(&id).await.unwrap();
    let job = chain.jobs.keys().next().unwrap().clone();
    let start = try_start(&id, &job, 1, 1_000);
    env.manager
        .add_try_starts(vec![start], Some(&ghost))
        .await
        .unwrap();
    assert_eq!(
        env.manager.get(&id, false).await.unwrap().state,
        State::Pending
    );

    env.jr.answer.store(0, Ordering::SeqCst);
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/start"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        env.jr.chains.lock().unwrap().is_empty(),
        "not sent as a new chain"
    );
    assert_eq!(
        env.manager.get(&id, false).await.unwrap().state,
        State::Suspended
    );
    env.manager.background_round().await;
    let resumed = env.jr.resumed.lock().unwrap().clone();
    assert_eq!(resumed.len(), 1, "resumed once");
    assert_eq!(resumed[0].job_chain.jobs[&job].state, State::Stopped);
    assert_eq!(resumed[0].total_job_tries[&job], 1);
    let request = env.manager.get(&id, false).await.unwrap();
    assert_eq!(request.state, State::Running);
    let logs = env.manager.job_log(&id).await.unwrap();
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert_eq!((logs[0].r#try, logs[0].state), (1, State::Stopped));
    assert!(
        logs[0]
            .error
            .starts_with(&format!("interrupted: the hand-over (epoch {epoch})")),
        "{}",
        logs[0].error
    );
    // The runner that had it hears that it no longer does.
    let entry = proto::JobLog {
        request_id: id.clone(),
        job_id: job.clone(),
        r#try: 1,
        state: State::Complete,
        ..proto::JobLog::default()
    };
    let err = env
        .manager
        .add_job_logs(vec![entry], Some(&ghost))
        .await
        .unwrap_err();
    assert!(matches!(err, crate::Error::Fenced(_)), "{err}");
}

/// Issue #15: `/healthz` answers while the process runs; `/readyz` while it can serve
/// (the database answers, not shutting down).
#[tokio::test]
async fn health_and_readiness() {
    let env = env().await;
    let (status, body, _) = call(&env.router, Method::GET, "/healthz", None).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (StatusCode::OK, Some("ok"))
    );
    let (status, body, _) = call(&env.router, Method::GET, "/readyz", None).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (StatusCode::OK, Some("ready"))
    );
    env.manager.shut_down();
    let (status, body, _) = call(&env.router, Method::GET, "/readyz", None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let (status, _, _) = call(&env.router, Method::GET, "/healthz", None).await;
    assert_eq!(status, StatusCode::OK);
}

/// Issue #13: a state change sent by a page of another site is refused before it is
/// read; the same call from Spindle's own pages, or without a browser, goes through.
#[tokio::test]
async fn state_changes_from_another_site_are_refused() {
    let env = env().await;
    let body = Some(r#"{"type": "deploy", "args": {"host": "db1"}}"#);
    for headers in [
        &[("sec-fetch-site", "cross-site")][..],
        &[("sec-fetch-site", "same-site")],
        &[
            ("origin", "http://evil.example"),
            ("host", "127.0.0.1:32308"),
        ],
        &[("origin", "null"), ("host", "127.0.0.1:32308")],
    ] {
        let (status, body, _) =
            call_with(&env.router, Method::POST, "/api/v1/requests", body, headers).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{headers:?}: {body}");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .starts_with("Forbidden: POST"),
            "{body}"
        );
    }
    let (status, _, _) = call_with(
        &env.router,
        Method::PUT,
        "/api/v1/requests/b0gus00000000000000a/stop",
        None,
        &[("sec-fetch-site", "cross-site")],
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        env.jr.chains.lock().unwrap().is_empty(),
        "nothing was created"
    );
    // Reads from anywhere, and changes from the same origin, are served.
    let (status, _, _) = call_with(
        &env.router,
        Method::GET,
        "/api/v1/requests",
        None,
        &[("sec-fetch-site", "cross-site")],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body, _) = call_with(
        &env.router,
        Method::POST,
        "/api/v1/requests",
        body,
        &[
            ("sec-fetch-site", "same-origin"),
            ("origin", "http://127.0.0.1:32308"),
            ("host", "127.0.0.1:32308"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

const ACL_SPECS: &str = "sequences:
  deploy:
    request: true
    args:
      required:
        - name: host
    acl:
      - role: deployer
        ops: [start, stop]
      - role: lead
        admin: true
    nodes:
      pause:
        category: job
        type: noop
  open:
    request: true
    nodes:
      pause:
        category: job
        type: noop
";

/// Issue #14: callers × operations → 200/401/403, with Spin Cycle's messages, and no
/// request stored for a denied start.
#[tokio::test]
async fn who_may_create_start_stop_and_read() {
    let token = |name: &str| format!("spindle_test_{name}");
    let line = |name: &str, roles: &[&str]| {
        auth::TokenLine::of(
            &token(name),
            name,
            &roles.iter().map(|r| (*r).to_owned()).collect::<Vec<_>>(),
        )
        .to_string()
    };
    let tokens = auth::Tokens::parse(
        "tokens",
        &[
            line("ann", &["deployer"]),
            line("bob", &["viewer"]),
            line("root", &["ops-admin"]),
            line("nobody", &[]),
            line("jr", &["spindle"]),
            line("prom", &["metrics"]),
        ]
        .join("\n"),
    )
    .unwrap();
    let mut acls = std::collections::HashMap::new();
    acls.insert(
        "deploy".to_owned(),
        vec![
            auth::AclEntry {
                role: "deployer".to_owned(),
                admin: false,
                ops: vec!["start".to_owned(), "stop".to_owned()],
            },
            auth::AclEntry {
                role: "lead".to_owned(),
                admin: true,
                ops: Vec::new(),
            },
        ],
    );
    acls.insert("open".to_owned(), Vec::new());
    let auth = auth::Auth {
        authenticators: vec![
            Arc::new(tokens),
            Arc::new(auth::Proxy {
                user_header: "x-forwarded-user".to_owned(),
                groups_header: "x-forwarded-groups".to_owned(),
                trusted: vec!["10.0.0.0/8".parse().unwrap()],
            }),
        ],
        acls: auth::Acls::new(acls),
        admin_roles: vec!["ops-admin".to_owned()],
        strict: true,
        read_roles: Some(vec!["viewer".to_owned(), "deployer".to_owned()]),
        service_roles: vec!["spindle".to_owned()],
        metrics_roles: vec!["metrics".to_owned()],
    };
    let env = env_specs(
        Options {
            jr_url: Some("http://jr1:32307".to_owned()),
            auth: Some(Arc::new(auth)),
            ..Options::default()
        },
        ACL_SPECS,
    )
    .await;
    let bearer = |name: &str| format!("Bearer {}", token(name));
    let create = r#"{"type": "deploy", "args": {"host": "db1"}, "user": "mallory"}"#;
    // Creating (a start).
    let cases: Vec<(Option<String>, u16, &str)> = vec![
        (
            None,
            401,
            "authentication required: send a token (Authorization: Bearer ...) or a client certificate",
        ),
        (
            Some("Bearer spindle_wrong".to_owned()),
            401,
            "the token is not valid (unknown or revoked)",
        ),
        (
            Some(bearer("bob")),
            403,
            "denied: no caller role matches deploy ACL: caller has [viewer], deploy requires one of [deployer lead]",
        ),
        (
            Some(bearer("nobody")),
            403,
            "denied: no caller role matches deploy ACL: caller has [], deploy requires one of [deployer lead]",
        ),
        (
            Some(bearer("jr")),
            403,
            "denied: no caller role matches deploy ACL: caller has [spindle], deploy requires one of [deployer lead]",
        ),
        (Some(bearer("ann")), 201, ""),
        (Some(bearer("root")), 201, ""),
    ];
    let mut created = Vec::new();
    for (authorization, want, message) in &cases {
        let headers: Vec<(&str, &str)> = authorization
            .iter()
            .map(|a| ("authorization", a.as_str()))
            .collect();
        let (status, body, _) = call_with(
            &env.router,
            Method::POST,
            "/api/v1/requests",
            Some(create),
            &headers,
        )
        .await;
        assert_eq!(status.as_u16(), *want, "{authorization:?}: {body}");
        if *want == 201 {
            created.push(body["id"].as_str().unwrap().to_owned());
        } else {
            assert_eq!(body["message"], *message, "{authorization:?}");
        }
    }
    // The caller is the user, whatever the body says.
    let (_, first, _) = call_with(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{}", created[0]),
        None,
        &[("authorization", &bearer("ann"))],
    )
    .await;
    assert_eq!(first["user"], "ann");
    // Nothing was stored for the denied starts.
    let (_, all, _) = call_with(
        &env.router,
        Method::GET,
        "/api/v1/requests",
        None,
        &[("authorization", &bearer("root"))],
    )
    .await;
    assert_eq!(all.as_array().unwrap().len(), 2, "{all}");
    // Strict: a type without ACLs only for admins.
    let open = r#"{"type": "open", "args": {}}"#;
    let (status, body, _) = call_with(
        &env.router,
        Method::POST,
        "/api/v1/requests",
        Some(open),
        &[("authorization", &bearer("ann"))],
    )
    .await;
    assert_eq!(
        (status.as_u16(), body["message"].as_str().unwrap()),
        (
            403,
            "denied: request open has no ACLs and strict auth is enabled"
        )
    );
    // Reading: viewer and deployer roles, admins and services; others 403.
    for (who, want) in [
        ("bob", 200),
        ("ann", 200),
        ("root", 200),
        ("jr", 200),
        ("nobody", 403),
    ] {
        let (status, body, _) = call_with(
            &env.router,
            Method::GET,
            &format!("/api/v1/requests/{}", created[0]),
            None,
            &[("authorization", &bearer(who))],
        )
        .await;
        assert_eq!(status.as_u16(), want, "{who}: {body}");
    }
    let (status, _, _) = call_with(&env.router, Method::GET, "/api/v1/requests", None, &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // Issue #33: metrics and readiness follow auth: a monitor's token (a metrics role)
    // and readers get them, nobody else; the monitor reads nothing more. Liveness is open.
    let (status, _, _) = call_with(&env.router, Method::GET, "/healthz", None, &[]).await;
    assert_eq!(status, StatusCode::OK);
    for path in ["/metrics", "/readyz"] {
        let (status, _, _) = call_with(&env.router, Method::GET, path, None, &[]).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
        for (who, allowed) in [
            ("prom", true),
            ("bob", true),
            ("jr", true),
            ("nobody", false),
        ] {
            let (status, body, _) = call_with(
                &env.router,
                Method::GET,
                path,
                None,
                &[("authorization", &bearer(who))],
            )
            .await;
            if allowed {
                // Let in: this manager keeps no metrics, which it may say.
                let off = body["message"] == "Not Found: metrics are off (metrics: false)";
                assert!(status.is_success() || off, "{who} {path}: {status} {body}");
            } else {
                assert_eq!(
                    (status.as_u16(), body["message"].as_str().unwrap()),
                    (
                        403,
                        "denied: metrics and readiness require one of the roles [metrics] or a reader's; caller nobody has []"
                    ),
                    "{path}"
                );
            }
        }
    }
    let (status, _, _) = call_with(
        &env.router,
        Method::GET,
        "/api/v1/requests",
        None,
        &[("authorization", &bearer("prom"))],
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a monitor reads no requests");
    // Issue #33: a bulk action is authorized per request; its dry run lists only to
    // readers and changes nothing.
    let bulk = |who: &'static str, query: &'static str| {
        let router = env.router.clone();
        let authorization = bearer(who);
        async move {
            call_with(
                &router,
                Method::POST,
                &format!("/api/v1/bulk/stop?{query}"),
                None,
                &[("authorization", &authorization)],
            )
            .await
        }
    };
    let (status, body, _) = bulk("nobody", "type=deploy").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, body, _) = bulk("bob", "type=deploy").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["dryRun"], true);
    let outcomes: Vec<(&str, &str)> = body["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["outcome"].as_str().unwrap(),
                r["message"].as_str().unwrap(),
            )
        })
        .collect();
    let denied = "denied: no caller role matches deploy ACL: caller has [viewer], deploy requires one of [deployer lead]";
    assert_eq!(outcomes, [("refused", denied), ("refused", denied)]);
    let (_, body, _) = bulk("ann", "type=deploy").await;
    let outcomes: Vec<&str> = body["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["would", "would"], "{body}");
    let (status, body, _) = bulk("ann", "").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("needs a filter"),
        "{body}"
    );
    // A job's locks are taken and released by services only (a Job Runner), not readers.
    let job_locks = format!("/api/v1/requests/{}/job-locks", created[0]);
    let take = r#"{"jobId": "abcd", "locks": [{"name": "pool", "limit": 1}]}"#;
    let release = format!("{job_locks}/abcd");
    for (who, want_take, want_release) in [("bob", 403, 403), ("ann", 403, 403), ("jr", 200, 204)] {
        let headers = [("authorization", bearer(who))];
        let headers: Vec<(&str, &str)> = headers.iter().map(|(h, v)| (*h, v.as_str())).collect();
        let (status, body, _) =
            call_with(&env.router, Method::POST, &job_locks, Some(take), &headers).await;
        assert_eq!(status.as_u16(), want_take, "{who}: {body}");
        let (status, body, _) =
            call_with(&env.router, Method::DELETE, &release, None, &headers).await;
        assert_eq!(status.as_u16(), want_release, "{who}: {body}");
    }
    // Stopping and starting are authorized by the ACL (start: the request is RUNNING).
    let stop = format!("/api/v1/requests/{}/stop", created[0]);
    let start = format!("/api/v1/requests/{}/start", created[0]);
    let (status, body, _) = call_with(
        &env.router,
        Method::PUT,
        &stop,
        None,
        &[("authorization", &bearer("bob"))],
    )
    .await;
    assert_eq!(
        (status.as_u16(), body["message"].as_str().unwrap()),
        (
            403,
            "denied: no caller role matches deploy ACL: caller has [viewer], deploy requires one of [deployer lead]"
        )
    );
    let (status, body, _) = call_with(
        &env.router,
        Method::PUT,
        &start,
        None,
        &[("authorization", &bearer("bob"))],
    )
    .await;
    assert_eq!(status.as_u16(), 403, "{body}");
    let (status, _, _) = call_with(
        &env.router,
        Method::PUT,
        &start,
        None,
        &[("authorization", &bearer("ann"))],
    )
    .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "allowed, but the request is not PENDING"
    );
    let (status, body, _) = call_with(
        &env.router,
        Method::PUT,
        &stop,
        None,
        &[("authorization", &bearer("ann"))],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The audit trail: who created and stopped it.
    let (status, trail, _) = call_with(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{}/audit", created[0]),
        None,
        &[("authorization", &bearer("bob"))],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let actions: Vec<(&str, &str)> = trail
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["action"].as_str().unwrap(), e["user"].as_str().unwrap()))
        .collect();
    assert_eq!(actions, [("create", "ann"), ("stop", "ann")], "{trail}");
    let (status, _, _) = call_with(
        &env.router,
        Method::PUT,
        "/api/v1/requests/b0gus00000000000000a/stop",
        None,
        &[("authorization", &bearer("bob"))],
    )
    .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "an unknown id is 404 before authorization"
    );
    // What Job Runners do needs a service role.
    let runner = r#"{"instanceId": "jr9-1", "url": "http://jr9:32307", "host": "jr9", "pid": 9, "lease": "10s"}"#;
    let (status, body, _) = call_with(
        &env.router,
        Method::POST,
        "/api/v1/job-runners",
        Some(runner),
        &[("authorization", &bearer("root"))],
    )
    .await;
    assert_eq!(status.as_u16(), 403, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("denied: only Job Runners and Request Managers"),
        "{body}"
    );
    let (status, _, _) = call_with(
        &env.router,
        Method::POST,
        "/api/v1/job-runners",
        Some(runner),
        &[],
    )
    .await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "a runner without credentials cannot register"
    );
    let (status, body, _) = call_with(
        &env.router,
        Method::POST,
        "/api/v1/job-runners",
        Some(runner),
        &[("authorization", &bearer("jr"))],
    )
    .await;
    assert!(status.is_success(), "{status}: {body}");
    // Health needs nothing.
    let (status, _, _) = call(&env.router, Method::GET, "/healthz", None).await;
    assert_eq!(status, StatusCode::OK);
    // The proxy's headers: from its network they name the caller, from elsewhere 401.
    for (addr, want) in [("10.1.2.3:4000", 201), ("192.0.2.9:4000", 401)] {
        let mut request = HttpRequest::builder()
            .method(Method::POST)
            .uri("/api/v1/requests")
            .header("content-type", "application/json")
            .header("x-forwarded-user", "carol")
            .header("x-forwarded-groups", "deployer")
            .body(Body::from(create))
            .unwrap();
        request.extensions_mut().insert(auth::Peer {
            addr: Some(addr.parse().unwrap()),
            certificate: None,
        });
        let response = env.router.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(status, want, "{addr}: {}", String::from_utf8_lossy(&bytes));
        if want == 201 {
            let body: Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(body["user"], "carol");
        }
    }
}

/// Issue #17: with a retention, the background round removes what finished before it,
/// and nothing else.
#[tokio::test]
async fn the_background_round_removes_requests_past_the_retention() {
    let env = env_with(Options {
        jr_url: Some("http://jr1:32307".to_owned()),
        retention: Some(std::time::Duration::from_secs(2)),
        ..Options::default()
    })
    .await;
    let finish = |id: &str| final_state(id, State::Complete, 1);
    let old = create(&env).await;
    let recent = create(&env).await;
    let running = create(&env).await;
    // A request's times never precede its start, so "long ago" is waited for.
    env.manager.finish(&finish(&old), None).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    env.manager.finish(&finish(&recent), None).await.unwrap();
    assert_eq!(env.manager.apply_retention().await, 1);
    let (status, _, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{old}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    for id in [&recent, &running] {
        let (status, _, _) = call(
            &env.router,
            Method::GET,
            &format!("/api/v1/requests/{id}"),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }
    assert_eq!(
        env.manager.apply_retention().await,
        0,
        "nothing more to remove yet"
    );
}

/// Records a request's start through a store of its own, as another Request Manager
/// would, right after the next `finish_request` of the store it watches (the group
/// commit writes an end that finds its request PENDING that way, alone).
struct StartsAfterNextBatch {
    path: std::path::PathBuf,
    armed: Mutex<Option<(String, proto::Fence)>>,
}

impl store::QueryObserver for StartsAfterNextBatch {
    fn query(&self, operation: &'static str, _elapsed: std::time::Duration, _ok: bool) {
        if operation != "finish_request" {
            return;
        }
        let Some((request_id, fence)) = self.armed.lock().unwrap().take() else {
            return;
        };
        let path = self.path.clone();
        // A runtime and a store of its own: the other Request Manager.
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async {
                    let other = store::SqliteStore::open(&path).await.unwrap();
                    store::Store::start_request(
                        &other,
                        &RequestId::from(request_id.as_str()),
                        "http://jr1:32307",
                        Some(&fence),
                        chrono::Utc::now(),
                    )
                    .await
                    .unwrap();
                });
        })
        .join()
        .unwrap();
    }
}

/// A short chain's end can reach a Request Manager before the start of its request is
/// recorded: it then starts the request itself. When another Request Manager records
/// the start between the two (after the end's write found the request PENDING), the
/// end is stored all the same, not refused.
#[tokio::test]
async fn an_end_that_races_the_start_record_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rm.db");
    let hook = Arc::new(StartsAfterNextBatch {
        path: path.clone(),
        armed: Mutex::new(None),
    });
    let store = store::timed(
        Arc::new(store::SqliteStore::open(&path).await.unwrap()),
        hook.clone(),
    );
    let report = spec::lint_str(Path::new("specs.yaml"), SPECS);
    let grapher = graph::Grapher::new(report.specs, Arc::new(job::Registry::builtin()));
    let jr = Arc::new(FakeJr::default());
    // The runner takes the chain, but its answer is lost: the request stays PENDING,
    // handed over under epoch 1.
    jr.answer.store(503, Ordering::SeqCst);
    let options = Options {
        jr_url: Some("http://jr1:32307".to_owned()),
        ..Options::default()
    };
    let manager = Arc::new(Manager::new(grapher, store, jr.clone(), options));
    let env = Env {
        router: crate::router(manager.clone()),
        manager: manager.clone(),
        jr,
        _dir: dir,
    };
    let id = create(&env).await;
    let owner = manager.store().owner(&id).await.unwrap();
    assert_eq!(owner.state, State::Pending);
    let fence = proto::Fence {
        instance: "instance-of-http://jr1:32307".to_owned(),
        epoch: owner.epoch,
    };
    *hook.armed.lock().unwrap() = Some((id.clone(), fence.clone()));
    let finish = final_state(&id, State::Complete, 2);
    manager.finish(&finish, Some(&fence)).await.unwrap();
    assert!(
        hook.armed.lock().unwrap().is_none(),
        "the start was recorded in between"
    );
    let request = manager.store().get_request(&id, false).await.unwrap();
    assert_eq!(request.state, State::Complete);
}

/// Issue #36: a `spindle run` process's runner (no URL anyone could call) is not listed
/// once it stopped; a server's runner that stopped is, for a while.
#[tokio::test]
async fn a_stopped_in_process_runner_is_not_listed() {
    let env = env().await;
    let register = |instance: &str, url: &str| {
        env.manager.register_runner(proto::RunnerRegistration {
            instance_id: instance.to_owned(),
            url: url.to_owned(),
            lease: "10s".to_owned(),
            ..Default::default()
        })
    };
    register("run-1", "in-process://spindle-run").await.unwrap();
    register("jr-1", "http://jr-1:32307").await.unwrap();
    let listed = |runners: Vec<proto::JobRunner>| {
        let mut ids: Vec<String> = runners.into_iter().map(|r| r.instance_id).collect();
        ids.sort();
        ids
    };
    assert_eq!(
        listed(env.manager.job_runners().await.unwrap()),
        ["jr-1", "run-1"],
        "live, both"
    );
    for instance in ["run-1", "jr-1"] {
        env.manager.end_runner(instance).await.unwrap();
    }
    assert_eq!(listed(env.manager.job_runners().await.unwrap()), ["jr-1"]);
}
