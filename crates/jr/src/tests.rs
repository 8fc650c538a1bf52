//! The Job Runner's API, tested without sockets, with real chains of built-in jobs.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request as HttpRequest, StatusCode};
use chain::Reporter;
use chain::testing::Kept;
use http_body_util::BodyExt as _;
use proto::{JobChain, State};
use serde_json::{Value, json};
use tower::ServiceExt as _;

use crate::Runner;

/// Every chain reports to the one `Kept`; each chain's fence is noted.
#[derive(Default)]
struct KeptReporters {
    kept: Arc<Kept>,
    fences: Fences,
}

impl crate::Reporters for KeptReporters {
    fn for_chain(&self, fence: proto::Fence) -> Arc<dyn Reporter> {
        self.fences.lock().unwrap().push(fence);
        self.kept.clone()
    }
}

/// start → a sleep of `sleep` → end.
fn chain(request_id: &str, sleep: &str) -> JobChain {
    let job = |id: &str, job_type: &str, bytes: &[u8]| proto::Job {
        id: id.to_owned(),
        name: id.to_owned(),
        job_type: job_type.to_owned(),
        bytes: bytes.to_vec(),
        state: State::Pending,
        sequence_id: "strt".to_owned(),
        ..proto::Job::default()
    };
    let sleep_bytes = json!({"duration": sleep}).to_string();
    JobChain {
        request_id: request_id.to_owned(),
        jobs: BTreeMap::from([
            ("strt".to_owned(), job("strt", "noop", b"")),
            (
                "slep".to_owned(),
                job("slep", "sleep", sleep_bytes.as_bytes()),
            ),
            ("endj".to_owned(), job("endj", "noop", b"")),
        ]),
        adjacency_list: BTreeMap::from([
            ("strt".to_owned(), vec!["slep".to_owned()]),
            ("slep".to_owned(), vec!["endj".to_owned()]),
        ]),
        state: State::Pending,
        finished_jobs: 0,
    }
}

/// Waits (with a deadline) until the runner has no chain left.
async fn wait_until_idle(runner: &Runner) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while runner.n_chains() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the chain never ended"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn setup() -> (Arc<Runner>, Arc<Kept>, axum::Router) {
    let (runner, kept, _, router) = setup_noting_fences();
    (runner, kept, router)
}

/// The fence of every chain's reporter, in order.
type Fences = Arc<Mutex<Vec<proto::Fence>>>;

/// [`setup`], with the fence of every chain's reporter.
fn setup_noting_fences() -> (Arc<Runner>, Arc<Kept>, Fences, axum::Router) {
    let reporters = KeptReporters::default();
    let (kept, fences) = (reporters.kept.clone(), reporters.fences.clone());
    let runner = Runner::new(
        Arc::new(job::Registry::builtin()),
        Arc::new(reporters),
        "http://10.0.0.5:32307",
        chain::Options::default(),
        telemetry::Telemetry::with_metrics(),
    );
    let router = crate::router(runner.clone(), "2.1.1+test");
    (runner, kept, fences, router)
}

async fn call(
    router: &axum::Router,
    method: Method,
    uri: &str,
    body: Option<String>,
) -> (StatusCode, Value, axum::http::HeaderMap) {
    let method_name = method.as_str().to_owned();
    let request = HttpRequest::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Body::from(body.unwrap_or_default()))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    // Every response a test sees is what the OpenAPI document says.
    let body = openapi_check::checked_body(
        proto::openapi::JOB_RUNNER,
        &method_name,
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
        include_str!("api.rs"),
        include_str!("../../telemetry/src/service.rs")
    );
    openapi_check::check_routes(source, proto::openapi::JOB_RUNNER).unwrap();
}

#[tokio::test]
async fn the_openapi_document_is_served() {
    let (_, _, router) = setup();
    let (status, body, _) = call(&router, Method::GET, "/api/v1/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["info"]["title"], "Spindle Job Runner API");
}

#[tokio::test]
async fn runs_chains_and_answers_with_its_location() {
    let (runner, kept, router) = setup();
    let body = serde_json::to_string(&chain("req1", "10ms")).unwrap();
    let (status, _, headers) = call(
        &router,
        Method::POST,
        "/api/v1/job-chains",
        Some(body.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers["location"],
        "http://10.0.0.5:32307/api/v1/job-chains/req1"
    );
    assert_eq!(headers["x-spincycle-version"], "2.1.1+test");
    // The same chain twice is a conflict while it runs.
    let (status, answer, _) = call(&router, Method::POST, "/api/v1/job-chains", Some(body)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{answer}");
    wait_until_idle(&runner).await;
    assert_eq!(kept.finishes.lock().unwrap()[0].state, State::Complete);
}

/// After a known workload the runner's metrics count it: tries by job type and state,
/// their durations, nothing left running, the HTTP calls by route.
#[tokio::test]
async fn metrics_count_the_tries_and_calls_of_a_known_workload() {
    use telemetry::metrics::sample;
    let (runner, _, router) = setup();
    for id in ["m1", "m2"] {
        let body = serde_json::to_string(&chain(id, "1ms")).unwrap();
        let (status, _, _) = call(&router, Method::POST, "/api/v1/job-chains", Some(body)).await;
        assert_eq!(status, StatusCode::OK);
    }
    wait_until_idle(&runner).await;
    // The chains' ends are counted just after they leave the map: scrape until they are.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let scrape = loop {
        let (status, scrape, _) = call(&router, Method::GET, "/metrics", None).await;
        assert_eq!(status, StatusCode::OK);
        let scrape = scrape.as_str().unwrap().to_owned();
        if sample(&scrape, "spindle_chains_running") == Some(0.0) {
            break scrape;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the chains' ends were never counted"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let at = |series: &str| {
        sample(&scrape, series).unwrap_or_else(|| panic!("no {series} in\n{scrape}"))
    };
    assert_eq!(
        at(r#"spindle_job_tries_total{job_type="noop",state="COMPLETE"}"#),
        4.0
    );
    assert_eq!(
        at(r#"spindle_job_tries_total{job_type="sleep",state="COMPLETE"}"#),
        2.0
    );
    assert_eq!(
        at(r#"spindle_job_try_duration_seconds_count{job_type="sleep"}"#),
        2.0
    );
    assert!(at(r#"spindle_job_try_duration_seconds_sum{job_type="sleep"}"#) >= 0.002);
    assert_eq!(at("spindle_jobs_running"), 0.0);
    assert_eq!(at("spindle_chains_running"), 0.0);
    assert_eq!(at("spindle_report_backlog"), 0.0);
    assert_eq!(
        at(r#"spindle_http_requests_total{method="POST",route="/api/v1/job-chains",status="200"}"#),
        2.0
    );
    assert!(
        !scrape.contains("# EOF"),
        "classic text unless OpenMetrics is asked for"
    );
    assert!(scrape.contains("# TYPE spindle_job_tries_total counter"));
}

#[tokio::test]
async fn bad_chains_are_refused() {
    let (_, kept, router) = setup();
    let (status, body, _) = call(
        &router,
        Method::POST,
        "/api/v1/job-chains",
        Some("{".to_owned()),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid job chain")
    );
    let mut cyclic = chain("req2", "1s");
    cyclic
        .adjacency_list
        .insert("endj".to_owned(), vec!["strt".to_owned()]);
    let (status, body, _) = call(
        &router,
        Method::POST,
        "/api/v1/job-chains",
        Some(serde_json::to_string(&cyclic).unwrap()),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // Valid, but of a job type this runner lacks: 422, naming it, and nothing runs.
    let mut unknown = chain("req3", "1s");
    for job in unknown.jobs.values_mut() {
        job.job_type = "go-provision".to_owned();
    }
    let (status, body, _) = call(
        &router,
        Method::POST,
        "/api/v1/job-chains",
        Some(serde_json::to_string(&unknown).unwrap()),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("`go-provision`"),
        "{body}"
    );
    // Valid, but a job's stored bytes cannot be read by its type here (issue #47): 422
    // too, naming the job and the cause, new or resumed, and nothing runs.
    let mut unreadable = chain("req4", "1s");
    unreadable.jobs.get_mut("slep").unwrap().bytes = br#"{"duration":true}"#.to_vec();
    let (status, body, _) = call(
        &router,
        Method::POST,
        "/api/v1/job-chains",
        Some(serde_json::to_string(&unreadable).unwrap()),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains(job::UNREADABLE_BYTES)
            && message.contains("job slep (ID slep, type sleep)")
            && message.contains("expected nanoseconds"),
        "{body}"
    );
    let suspended = proto::SuspendedJobChain {
        request_id: "req4".to_owned(),
        job_chain: unreadable,
        ..proto::SuspendedJobChain::default()
    };
    let (status, body, _) = call(
        &router,
        Method::POST,
        "/api/v1/job-chains/resume",
        Some(serde_json::to_string(&suspended).unwrap()),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        kept.logs
            .lock()
            .unwrap()
            .iter()
            .all(|entry| entry.request_id != "req4")
    );
    let (status, _, _) = call(&router, Method::PUT, "/api/v1/job-chains/nope/stop", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = call(
        &router,
        Method::GET,
        "/api/v1/status/running?requestId=nope",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body, _) = call(&router, Method::GET, "/api/v1/status/running", None).await;
    assert_eq!((status, body), (StatusCode::OK, json!([])));
}

#[tokio::test]
async fn stop_status_and_shutdown() {
    let (runner, kept, router) = setup();
    for id in ["req1", "req2"] {
        let body = serde_json::to_string(&chain(id, "1h")).unwrap();
        let (status, _, _) = call(&router, Method::POST, "/api/v1/job-chains", Some(body)).await;
        assert_eq!(status, StatusCode::OK);
    }
    // Wait (with a deadline) until the sleep job of req1 runs.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let running = loop {
        let (_, running, _) = call(
            &router,
            Method::GET,
            "/api/v1/status/running?requestId=req1",
            None,
        )
        .await;
        if running[0]["jobId"] == "slep" {
            break running;
        }
        assert!(tokio::time::Instant::now() < deadline, "{running}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert_eq!(running[0]["jobId"], "slep");
    assert_eq!(running[0]["status"], "sleeping 1h0m0s");
    let (status, _, _) = call(&router, Method::PUT, "/api/v1/job-chains/req1/stop", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(kept.finishes.lock().unwrap()[0].state, State::Stopped);
    // Shutting down suspends what runs and refuses new chains.
    runner.shut_down(Duration::from_secs(5)).await;
    assert_eq!(kept.suspended.lock().unwrap()[0].request_id, "req2");
    let body = serde_json::to_string(&chain("req3", "1s")).unwrap();
    let (status, body, _) = call(&router, Method::POST, "/api/v1/job-chains", Some(body)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
}

/// Issue #10: a chain with a wait that is not a duration is refused when it arrives, with
/// a message naming the job; the largest retry count is accepted and runs.
#[tokio::test]
async fn chains_with_bad_waits_are_refused_and_huge_retries_run() {
    let (runner, kept, router) = setup();
    let mut bad = chain("req1", "1ms");
    bad.jobs.get_mut("slep").unwrap().retry_wait = "a while".to_owned();
    let (status, body, _) = call(
        &router,
        Method::POST,
        "/api/v1/job-chains",
        Some(serde_json::to_string(&bad).unwrap()),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("job slep (ID slep): retryWait \"a while\" is not a duration"),
        "{body}"
    );
    let mut huge = chain("req2", "1ms");
    huge.jobs.get_mut("slep").unwrap().retry = u32::MAX;
    let (status, body, _) = call(
        &router,
        Method::POST,
        "/api/v1/job-chains",
        Some(serde_json::to_string(&huge).unwrap()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_until_idle(&runner).await;
    assert_eq!(kept.finishes.lock().unwrap()[0].state, State::Complete);
}

/// Issue #10: a Request Manager that answers 500 to every report does not keep a chain
/// from ending: the client calls that a fault (retried a few times, then given up), and a
/// 503 (unavailable) is retried until it passes.
#[tokio::test]
async fn a_request_manager_that_always_fails_does_not_hold_a_chain_forever() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let calls = Arc::new(AtomicUsize::new(0));
    let unavailable_for = Arc::new(AtomicUsize::new(0));
    let app = axum::Router::new().fallback({
        let calls = Arc::clone(&calls);
        let unavailable_for = Arc::clone(&unavailable_for);
        move || {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            let unavailable = n < unavailable_for.load(Ordering::SeqCst);
            async move {
                if unavailable {
                    (StatusCode::SERVICE_UNAVAILABLE, "starting")
                } else {
                    (StatusCode::INTERNAL_SERVER_ERROR, "boom")
                }
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let options = chain::Options {
        retry: chain::RetryPolicy {
            initial: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
            ..chain::RetryPolicy::default()
        },
        ..chain::Options::default()
    };
    for unavailable in [0, 20] {
        calls.store(0, Ordering::SeqCst);
        unavailable_for.store(unavailable, Ordering::SeqCst);
        let _ = rustls::crypto::ring::default_provider().install_default();
        let reporter = Arc::new(crate::HttpRmClient::new(
            std::slice::from_ref(&url),
            reqwest::Client::new(),
        ));
        let handle = chain::run(
            chain("req1", "1ms"),
            Arc::new(job::Registry::builtin()),
            reporter,
            options.clone(),
        )
        .unwrap();
        let end = tokio::time::timeout(Duration::from_secs(30), handle.wait())
            .await
            .expect("the chain ends");
        assert_eq!(end.state, State::Complete);
        let max_failed = chain::RetryPolicy::default().max_failed_attempts as usize;
        let n = calls.load(Ordering::SeqCst);
        // At most 3 batches of try starts, 3 of job logs, 3 progress counts and the final
        // state, each given up after its attempts at a fault; the 503s come on top.
        assert!(n >= unavailable + max_failed, "{n} calls");
        assert!(n <= unavailable + 10 * max_failed, "{n} calls");
    }
}

/// Issue #10: the Job Runner answers errors with the Request Manager's error body, unknown
/// routes and methods included.
#[tokio::test]
async fn every_error_has_the_error_body() {
    let (_, _, router) = setup();
    for (method, uri, status) in [
        (Method::GET, "/api/v1/nothing-here", StatusCode::NOT_FOUND),
        (
            Method::GET,
            "/api/v1/job-chains",
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (
            Method::PUT,
            "/api/v1/job-chains/nope/stop",
            StatusCode::NOT_FOUND,
        ),
        (Method::POST, "/api/v1/job-chains", StatusCode::BAD_REQUEST),
    ] {
        let (got, body, _) = call(&router, method.clone(), uri, None).await;
        assert_eq!(got, status, "{method} {uri}: {body}");
        let error: proto::Error = serde_json::from_value(body.clone()).unwrap();
        assert_eq!(error.http_status, status.as_u16(), "{method} {uri}: {body}");
        assert!(!error.message.is_empty(), "{method} {uri}: {body}");
    }
}

// ---- leases and fencing (issue 11) ----

/// A hand-over names its epoch; the answer names the instance, and the chain's reports
/// carry both.
#[tokio::test]
async fn a_hand_over_is_answered_with_the_instance_and_reported_with_its_epoch() {
    let (runner, _, fences, router) = setup_noting_fences();
    let request = HttpRequest::builder()
        .method(Method::POST)
        .uri("/api/v1/job-chains")
        .header("content-type", "application/json")
        .header("spindle-epoch", "7")
        .body(Body::from(
            serde_json::to_string(&chain("req7", "1ms")).unwrap(),
        ))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["spindle-runner"],
        runner.instance().as_str()
    );
    wait_until_idle(&runner).await;
    assert_eq!(
        fences.lock().unwrap().as_slice(),
        [proto::Fence {
            instance: runner.instance(),
            epoch: 7
        }]
    );
    let request = HttpRequest::builder()
        .method(Method::POST)
        .uri("/api/v1/job-chains")
        .header("content-type", "application/json")
        .header("spindle-epoch", "seven")
        .body(Body::from(
            serde_json::to_string(&chain("req8", "1ms")).unwrap(),
        ))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
}

/// A chain's body arrives in pieces (read into one buffer of its announced length);
/// one past the server's body limit is refused (413) before it is decoded.
#[tokio::test]
async fn a_hand_over_in_pieces_runs_and_one_past_the_limit_is_refused() {
    let (runner, kept, router) = setup();
    let text = serde_json::to_string(&chain("req9", "1ms")).unwrap();
    let pieces: Vec<Result<Vec<u8>, std::io::Error>> = text
        .as_bytes()
        .chunks(7)
        .map(|piece| Ok(piece.to_vec()))
        .collect();
    let request = HttpRequest::builder()
        .method(Method::POST)
        .uri("/api/v1/job-chains")
        .header("content-type", "application/json")
        .header("content-length", text.len())
        .body(Body::from_stream(futures_util::stream::iter(pieces)))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    wait_until_idle(&runner).await;
    assert_eq!(kept.finishes.lock().unwrap()[0].request_id, "req9");

    let limited = router.layer(axum::extract::DefaultBodyLimit::max(text.len() - 1));
    let request = HttpRequest::builder()
        .method(Method::POST)
        .uri("/api/v1/job-chains")
        .header("content-type", "application/json")
        .body(Body::from(text.replace("req9", "req10")))
        .unwrap();
    let response = limited.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let body: Value =
        serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("request body too large"),
        "{body}"
    );
    assert!(runner.chain("req10").is_none());
}

/// A registry whose renewals fail (unavailable) once told to, or end the instance.
#[derive(Default)]
struct FakeRegistry {
    registered: Mutex<Vec<String>>,
    renewals: std::sync::atomic::AtomicUsize,
    /// What the last renewal said the runner holds.
    last_held: Mutex<Vec<String>>,
    /// 0: renew; 1: unavailable; 2: the instance was declared lost.
    renew_answer: std::sync::atomic::AtomicU8,
    deregistered: Mutex<Vec<String>>,
}

fn record(instance: &str) -> proto::JobRunner {
    proto::JobRunner {
        instance_id: instance.to_owned(),
        ..proto::JobRunner::default()
    }
}

#[async_trait::async_trait]
impl crate::Registry for FakeRegistry {
    async fn register(
        &self,
        registration: &proto::RunnerRegistration,
    ) -> Result<proto::JobRunner, crate::RegistryError> {
        self.registered
            .lock()
            .unwrap()
            .push(registration.instance_id.clone());
        Ok(record(&registration.instance_id))
    }
    async fn renew(
        &self,
        instance: &str,
        renewal: Option<&proto::LeaseRenewal>,
    ) -> Result<proto::JobRunner, crate::RegistryError> {
        self.renewals
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(renewal) = renewal {
            *self.last_held.lock().unwrap() = renewal.running.clone();
        }
        match self.renew_answer.load(std::sync::atomic::Ordering::SeqCst) {
            0 => Ok(record(instance)),
            1 => Err(crate::RegistryError::Unavailable(
                "connection refused".to_owned(),
            )),
            _ => Err(crate::RegistryError::Ended("declared lost".to_owned())),
        }
    }
    async fn deregister(&self, instance: &str) -> Result<(), crate::RegistryError> {
        self.deregistered.lock().unwrap().push(instance.to_owned());
        Ok(())
    }
}

fn lease_settings() -> crate::LeaseSettings {
    crate::LeaseSettings {
        lease: Duration::from_secs(9),
        host: "h".to_owned(),
        pid: 1,
    }
}

/// With a paused clock: renewals every third of the lease; a runner that cannot renew
/// for a whole lease abandons its chains (nothing more is reported) and registers again
/// as a new instance.
#[tokio::test(start_paused = true)]
async fn a_runner_that_cannot_renew_for_a_lease_abandons_its_chains_and_registers_anew() {
    use std::sync::atomic::Ordering;
    let (runner, kept, _) = setup();
    let registry = Arc::new(FakeRegistry::default());
    let stop = tokio_util::sync::CancellationToken::new();
    let lease = tokio::spawn(crate::lease::hold(
        runner.clone(),
        registry.clone(),
        lease_settings(),
        stop.clone(),
    ));
    let first = runner.instance();
    runner
        .run_chain(chain("long", "1h"), 1, None, false, job::Secrets::default())
        .unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        registry.registered.lock().unwrap().as_slice(),
        std::slice::from_ref(&first)
    );
    assert_eq!(registry.renewals.load(Ordering::SeqCst), 3, "every 3 s");
    assert_eq!(
        registry.last_held.lock().unwrap().as_slice(),
        ["long"],
        "each renewal names the chains the runner holds"
    );
    // The Request Managers go away: after 9 s without a renewal the chain is abandoned.
    registry.renew_answer.store(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(runner.n_chains(), 1, "still within the lease");
    tokio::time::sleep(Duration::from_secs(4)).await;
    wait_until_idle(&runner).await;
    assert!(kept.finishes.lock().unwrap().is_empty(), "nothing reported");
    assert!(kept.suspended.lock().unwrap().is_empty());
    let registered = registry.registered.lock().unwrap().clone();
    assert_eq!(registered.len(), 2);
    assert_ne!(registered[1], first);
    assert_eq!(registered[1], runner.instance());
    // Told that its instance was declared lost, it does the same at once.
    registry.renew_answer.store(0, Ordering::SeqCst);
    runner
        .run_chain(
            chain("long2", "1h"),
            1,
            None,
            false,
            job::Secrets::default(),
        )
        .unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    registry.renew_answer.store(2, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(3)).await;
    wait_until_idle(&runner).await;
    assert_eq!(registry.registered.lock().unwrap().len(), 3);
    registry.renew_answer.store(0, Ordering::SeqCst);
    stop.cancel();
    lease.await.unwrap();
    assert_eq!(
        registry.deregistered.lock().unwrap().as_slice(),
        [runner.instance()]
    );
}

/// Issue #15: a runner is ready once it holds a lease.
#[tokio::test]
async fn a_runner_is_ready_once_registered() {
    let (runner, _, router) = setup();
    let (status, body, _) = call(&router, Method::GET, "/healthz", None).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (StatusCode::OK, Some("ok"))
    );
    let (status, body, _) = call(&router, Method::GET, "/readyz", None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("not registered"),
        "{body}"
    );
    runner.set_registered(true);
    let (status, body, _) = call(&router, Method::GET, "/readyz", None).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (StatusCode::OK, Some("ready"))
    );
}

/// Issue #48, point 3: a runner that holds leases takes no chain while it holds none
/// (registering at start, or again after its lease lapsed): the chain would belong to an
/// instance no Request Manager knows, and none could recover it (the chaos test with
/// partitions, seed 8717167039125, left such a request RUNNING for good).
#[tokio::test]
async fn a_runner_takes_no_chain_while_it_holds_no_lease() {
    let (runner, kept, router) = setup();
    runner.set_leased();
    let body = serde_json::to_string(&chain("req1", "10ms")).unwrap();
    let (status, answer, _) = call(
        &router,
        Method::POST,
        "/api/v1/job-chains",
        Some(body.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("holds no lease now"),
        "{answer}"
    );
    runner.set_registered(true);
    let (status, answer, _) = call(
        &router,
        Method::POST,
        "/api/v1/job-chains",
        Some(body.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    wait_until_idle(&runner).await;
    assert_eq!(kept.finishes.lock().unwrap()[0].state, State::Complete);
    // Its lease lapsed: a new instance, unregistered until it registers again.
    runner.renew_instance();
    let (status, _, _) = call(&router, Method::POST, "/api/v1/job-chains", Some(body)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
}

/// Issue #51: a renewal names the chains held while they are few; a runner of many
/// names them in one renewal of so many that each carries about a thousand, one in ten
/// at least (the Request Manager reads as many rows as it names).
#[test]
fn a_runner_of_many_chains_names_them_in_some_renewals() {
    let named = |chains: usize| {
        (0..20)
            .filter(|n| crate::lease::names_held(*n, chains))
            .collect::<Vec<_>>()
    };
    assert_eq!(named(0), (0..20).collect::<Vec<_>>());
    assert_eq!(named(1_000), (0..20).collect::<Vec<_>>());
    assert_eq!(named(1_001), (0..20).step_by(2).collect::<Vec<_>>());
    assert_eq!(named(5_000), [0, 5, 10, 15]);
    assert_eq!(named(50_000), [0, 10]);
}
