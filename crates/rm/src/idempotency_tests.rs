//! Idempotent creates (issue #48): a create sent again with the key of one that was
//! stored answers the request the first created (200, the same id), nothing new stored;
//! the key with another request type or other args is refused (422) naming the first
//! request; the key in the body does what the header does.

use axum::http::{Method, StatusCode, header};
use serde_json::json;

use crate::Options;
use crate::tests::{call, call_with, env_specs};

const SPECS: &str = "sequences:
  hello:
    request: true
    args:
      required:
        - name: host
    nodes:
      only:
        category: job
        type: noop
";

#[tokio::test]
async fn a_create_sent_again_with_its_key_answers_the_request_the_first_created() {
    let env = env_specs(Options::default(), SPECS).await;
    let post = async |body: &serde_json::Value, key: Option<&str>| {
        let body = body.to_string();
        let headers: Vec<(&str, &str)> = key
            .map(|key| ("Idempotency-Key", key))
            .into_iter()
            .collect();
        call_with(
            &env.router,
            Method::POST,
            "/api/v1/requests",
            Some(&body),
            &headers,
        )
        .await
    };
    let body = json!({"type": "hello", "args": {"host": "db1"}, "user": "ann"});
    let (status, first, _) = post(&body, Some("k-1")).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let id = first["id"].as_str().unwrap().to_owned();
    let (status, again, headers) = post(&body, Some("k-1")).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["id"], id.as_str());
    assert_eq!(headers[header::LOCATION], format!("/api/v1/requests/{id}"));

    // The body's key, for clients that cannot set headers.
    let keyed = json!({"type": "hello", "args": {"host": "db1"}, "idempotencyKey": "k-2"});
    let (status, second, _) = post(&keyed, None).await;
    assert_eq!(status, StatusCode::CREATED, "{second}");
    assert_ne!(second["id"], id.as_str(), "another key, another request");
    let (status, second_again, _) = post(&keyed, None).await;
    assert_eq!(
        (status, &second_again["id"]),
        (StatusCode::OK, &second["id"])
    );

    // The key of the first with other args, or another request type: refused, naming it.
    let other = json!({"type": "hello", "args": {"host": "db2"}});
    let (status, refused, _) = post(&other, Some("k-1")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("was used by request {id}")) && message.contains("other args"),
        "{message}"
    );
    // A key that is no key.
    let (status, bad, _) = post(&body, Some(&"x".repeat(201))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");

    // Without a key, each create is a request of its own; two were stored with keys.
    let (status, unkeyed, _) = post(&body, None).await;
    assert_eq!(status, StatusCode::CREATED, "{unkeyed}");
    let (_, found, _) = call(
        &env.router,
        Method::GET,
        "/api/v1/requests?type=hello",
        None,
    )
    .await;
    assert_eq!(found.as_array().unwrap().len(), 3, "{found}");
}
