//! The Job Runner's API, tested without sockets, with real chains of built-in jobs.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request as HttpRequest, StatusCode};
use chain::{ReportError, Reporter};
use http_body_util::BodyExt as _;
use proto::{FinishRequest, JobChain, JobLog, RequestProgress, State, SuspendedJobChain};
use serde_json::{Value, json};
use tower::ServiceExt as _;

use crate::Runner;

#[derive(Default)]
struct Kept {
    finishes: Mutex<Vec<FinishRequest>>,
    suspended: Mutex<Vec<SuspendedJobChain>>,
}

#[async_trait::async_trait]
impl Reporter for Kept {
    async fn job_logs(&self, _entries: &[JobLog]) -> Result<(), ReportError> {
        Ok(())
    }
    async fn progress(&self, _progress: &RequestProgress) -> Result<(), ReportError> {
        Ok(())
    }
    async fn finish(&self, finish: &FinishRequest) -> Result<(), ReportError> {
        self.finishes.lock().unwrap().push(finish.clone());
        Ok(())
    }
    async fn suspend(&self, suspended: &SuspendedJobChain) -> Result<(), ReportError> {
        self.suspended.lock().unwrap().push(suspended.clone());
        Ok(())
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

fn setup() -> (Arc<Runner>, Arc<Kept>, axum::Router) {
    let kept = Arc::new(Kept::default());
    let runner = Runner::new(
        Arc::new(job::Registry::builtin()),
        kept.clone(),
        "http://10.0.0.5:32307",
        chain::Options::default(),
    );
    let router = crate::router(runner.clone(), "2.1.1+test");
    (runner, kept, router)
}

async fn call(
    router: &axum::Router,
    method: Method,
    uri: &str,
    body: Option<String>,
) -> (StatusCode, Value, axum::http::HeaderMap) {
    let request = HttpRequest::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Body::from(body.unwrap_or_default()))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, body, headers)
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
    while runner.n_chains() > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(kept.finishes.lock().unwrap()[0].state, State::Complete);
}

#[tokio::test]
async fn bad_chains_are_refused() {
    let (_, _, router) = setup();
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
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (_, running, _) = call(
        &router,
        Method::GET,
        "/api/v1/status/running?requestId=req1",
        None,
    )
    .await;
    assert_eq!(running[0]["jobId"], "slep");
    assert_eq!(running[0]["status"], "sleeping 1h");
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
