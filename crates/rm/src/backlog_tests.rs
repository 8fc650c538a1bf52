//! Back-pressure (issue #32): past `max_backlog` requests waiting to be handed to a Job
//! Runner, a create is refused with 503, `Retry-After` and a message naming the limit;
//! nothing of it is stored; the refusal is counted; below the limit again, creates are
//! taken.

use axum::http::{Method, StatusCode, header};
use serde_json::json;

use crate::Options;
use crate::tests::{call, env_specs};

const SPECS: &str = "sequences:
  noop-request:
    request: true
    args: {}
    nodes:
      only:
        category: job
        type: noop
";

#[tokio::test]
async fn creates_past_the_backlog_are_refused_with_a_time_to_retry() {
    // No Job Runner: every request created stays PENDING, in the backlog.
    let env = env_specs(
        Options {
            max_backlog: Some(3),
            telemetry: telemetry::Telemetry::with_metrics(),
            ..Options::default()
        },
        SPECS,
    )
    .await;
    let body = json!({"type": "noop-request", "args": {}, "user": "ann"}).to_string();
    let create = async || call(&env.router, Method::POST, "/api/v1/requests", Some(&body)).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (status, answer, _) = create().await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
        ids.push(answer["id"].as_str().unwrap().to_owned());
    }
    let (status, answer, headers) = create().await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{answer}");
    assert_eq!(headers[header::RETRY_AFTER], "1");
    let message = answer["message"].as_str().unwrap();
    assert!(
        message.contains("3 are created and not yet handed to a Job Runner")
            && message.contains("below 3 (max_backlog)")
            && message.ends_with("nothing was stored: retry in 1 s"),
        "{message}"
    );
    // Nothing of it was stored.
    let (_, found, _) = call(&env.router, Method::GET, "/api/v1/requests", None).await;
    assert_eq!(found.as_array().unwrap().len(), 3, "{found}");
    let (_, scrape, _) = call(&env.router, Method::GET, "/metrics", None).await;
    let scrape = scrape.as_str().unwrap();
    let refused =
        telemetry::metrics::sample(scrape, r#"spindle_requests_refused_total{kind="backlog"}"#);
    assert_eq!(refused, Some(1.0), "{scrape}");
    assert_eq!(
        telemetry::metrics::sample(scrape, "spindle_backlog"),
        Some(3.0)
    );
    // One leaves the backlog (stopped while it waits); once counted again, a create is
    // taken.
    let stop = format!("/api/v1/requests/{}/stop", ids[0]);
    let (status, answer, _) = call(&env.router, Method::PUT, &stop, None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (status, answer, _) = create().await;
        if status == StatusCode::CREATED {
            break;
        }
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{answer}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "still refused once the stopped request left the backlog: {answer}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
