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

pub(crate) async fn env_with(options: Options) -> Env {
    env_specs(options, SPECS).await
}

pub(crate) async fn env_specs(options: Options, specs: &str) -> Env {
    env_store(options, specs, |store| store).await
}

/// An [`Env`] on `specs` whose store fails or deadlocks on demand, and that store.
pub(crate) async fn env_faulty(options: Options, specs: &str) -> (Env, Arc<store::faulty::Faulty>) {
    let mut faulty = None;
    let env = env_store(options, specs, |inner| {
        let store = store::faulty::Faulty::new(inner);
        faulty = Some(Arc::clone(&store));
        store
    })
    .await;
    (env, faulty.expect("the store was wrapped"))
}

/// [`env_specs`], the Manager's store being `wrap` of the SQLite one.
pub(crate) async fn env_store(
    options: Options,
    specs: &str,
    wrap: impl FnOnce(Arc<dyn store::Store>) -> Arc<dyn store::Store>,
) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let store = wrap(Arc::new(
        store::SqliteStore::open(&dir.path().join("rm.db"))
            .await
            .unwrap(),
    ));
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
        include_str!("../api/mod.rs"),
        include_str!("../../../telemetry/src/service.rs")
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

pub(crate) async fn create(env: &Env) -> String {
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

/// Find's pages by cursor (issue #51): a full page names the next (`Spindle-Next`, and
/// a `Link` to it); following them visits every request once, newest first, the filter
/// kept; a cursor that is not one is a 400 that says what was expected.
#[tokio::test]
async fn found_requests_are_paged_by_a_cursor() {
    let env = env().await;
    for _ in 0..5 {
        create(&env).await;
    }
    let (_, all, _) = call(&env.router, Method::GET, "/api/v1/requests", None).await;
    let all: Vec<String> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(all.len(), 5);
    let mut seen = Vec::new();
    let mut uri = "/api/v1/requests?type=deploy&limit=2".to_owned();
    loop {
        let (status, page, headers) = call(&env.router, Method::GET, &uri, None).await;
        assert_eq!(status, StatusCode::OK, "{uri}: {page}");
        let page = page.as_array().unwrap().clone();
        seen.extend(page.iter().map(|r| r["id"].as_str().unwrap().to_owned()));
        let Some(token) = headers.get("spindle-next") else {
            assert!(page.len() < 2, "a full page names the next");
            break;
        };
        let token = token.to_str().unwrap();
        assert!(token.ends_with(page[1]["id"].as_str().unwrap()), "{token}");
        let link = headers["link"].to_str().unwrap();
        assert!(link.ends_with(">; rel=\"next\""), "{link}");
        assert!(
            link.contains("type=deploy") && link.contains("limit=2"),
            "{link}"
        );
        uri = link
            .trim_start_matches('<')
            .split_once('>')
            .unwrap()
            .0
            .to_owned();
    }
    assert_eq!(seen, all, "every request once, in order");
    let (status, answer, _) = call(
        &env.router,
        Method::GET,
        "/api/v1/requests?limit=2&after=yesterday",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("expected the Spindle-Next token of the page before"),
        "{answer}"
    );
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

mod acl;
mod operations;
mod recovery;
mod reports;
mod resumes;
mod runners;
mod store_faults;

/// What this thread logs (every level, no colours) while the guard lives: a test's
/// tasks on its current-thread runtime log through it.
pub(crate) fn capture_logs() -> (tracing::subscriber::DefaultGuard, Arc<Mutex<Vec<u8>>>) {
    #[derive(Clone)]
    struct Captured(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let logs = Arc::new(Mutex::new(Vec::new()));
    let writer = Captured(Arc::clone(&logs));
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    (tracing::subscriber::set_default(subscriber), logs)
}
