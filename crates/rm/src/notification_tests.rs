//! Notifications (issue #33) from a Request Manager to real HTTP receivers: ends,
//! approvals that wait and lost runners reach the webhooks that asked for them, signed,
//! sent again after a failure with the same delivery id and body, given up on after
//! their attempts, and sent by another Request Manager after a restart.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, Method, StatusCode};
use hmac::{Hmac, Mac as _};
use proto::State;
use serde_json::Value;
use sha2::Sha256;

use crate::notify::{Notify, NotifyConfig, SecretSource, WebhookConfig};
use crate::testing::final_state;
use crate::tests::{Env, call, create, env_specs};
use crate::{Manager, Options};

const SPECS: &str = "sequences:
  deploy:
    request: true
    args:
      required:
        - name: host
    nodes:
      only:
        category: job
        type: noop
";

/// What a receiver got: (path, headers, body).
type Got = Arc<Mutex<Vec<(String, HeaderMap, String)>>>;

/// An HTTP server of the test's own on 127.0.0.1 that records every POST and answers
/// 500 to the first `failures` of them, 200 after.
struct Receiver {
    url: String,
    got: Got,
}

async fn receiver(failures: usize) -> Receiver {
    let got: Got = Arc::default();
    let left = Arc::new(AtomicUsize::new(failures));
    let record = {
        let got = Arc::clone(&got);
        move |uri: axum::http::Uri, headers: HeaderMap, body: String| {
            let got = Arc::clone(&got);
            let left = Arc::clone(&left);
            async move {
                got.lock()
                    .unwrap()
                    .push((uri.path().to_owned(), headers, body));
                if left
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok()
                {
                    (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "receiver down for a while",
                    )
                } else {
                    (StatusCode::OK, "ok")
                }
            }
        }
    };
    let app = axum::Router::new().fallback(axum::routing::post(record));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Receiver { url, got }
}

fn webhook(name: &str, url: String, events: &[&str]) -> WebhookConfig {
    WebhookConfig {
        name: name.to_owned(),
        url,
        events: events.iter().map(|e| (*e).to_owned()).collect(),
        backoff: Some("20ms".to_owned()),
        ..WebhookConfig::default()
    }
}

async fn notify_env(host: &str) -> Env {
    let _ = rustls::crypto::ring::default_provider().install_default();
    env_specs(
        Options {
            jr_url: Some("http://jr1:32307".to_owned()),
            host: host.to_owned(),
            telemetry: telemetry::Telemetry::with_metrics(),
            ..Options::default()
        },
        SPECS,
    )
    .await
}

async fn listed(env: &Env, query: &str) -> Vec<Value> {
    let (status, body, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/notifications{query}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body.as_array().unwrap().clone()
}

/// Runs `manager`'s notification rounds until every notification is delivered or
/// given up on (at most 10 s).
async fn settle(manager: &Manager, env: &Env) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        manager.notification_round().await;
        let all = listed(env, "").await;
        if !all.is_empty() && all.iter().all(|n| n["status"] != "pending") {
            return all;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still pending: {all:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn signature(secret: &[u8], body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap();
    mac.update(body.as_bytes());
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

#[tokio::test]
async fn events_reach_the_webhooks_that_ask_signed_and_sent_again_until_delivered() {
    let env = notify_env("rm-a").await;
    let hooks = receiver(2).await;
    let chat = receiver(0).await;
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("hook.secret");
    std::fs::write(&secret, "s3cret-of-the-hook\n").unwrap();
    let notify = Notify::load(&NotifyConfig {
        ui_url: Some("https://spindle.example.com/".to_owned()),
        webhooks: vec![
            WebhookConfig {
                secret: Some(SecretSource {
                    file: Some(secret),
                    env: None,
                }),
                ..webhook(
                    "hooks",
                    format!("{}/json", hooks.url),
                    &["finished", "approval", "runner_lost"],
                )
            },
            WebhookConfig {
                template: Some("slack".to_owned()),
                requests: vec!["deploy".to_owned()],
                ..webhook("chat", format!("{}/slack", chat.url), &["failed"])
            },
            WebhookConfig {
                requests: vec!["restart".to_owned()],
                ..webhook("elsewhere", format!("{}/never", chat.url), &["finished"])
            },
        ],
    })
    .unwrap();
    env.manager.set_notify(notify, reqwest::Client::new());

    // A request fails; another's approval waits; a runner is lost.
    let failed = create(&env).await;
    let mut finish = final_state(&failed, State::Fail, 0);
    finish.error = "job <restart> failed & stopped".to_owned();
    env.manager.finish(&finish, None).await.unwrap();
    let waiting = create(&env).await;
    let (status, body, _) = call(
        &env.router,
        Method::POST,
        &format!("/api/v1/requests/{waiting}/approval-waiting"),
        Some(r#"{"jobId": "gate1"}"#),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    // Of a request that ended, nothing is told.
    let (status, _, _) = call(
        &env.router,
        Method::POST,
        &format!("/api/v1/requests/{failed}/approval-waiting"),
        Some(r#"{"jobId": "gate1"}"#),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body, _) = call(
        &env.router,
        Method::POST,
        &format!("/api/v1/requests/{waiting}/approval-waiting"),
        Some(r#"{"job": "gate1"}"#),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let store = env.manager.store();
    store
        .register_runner(
            &proto::RunnerRegistration {
                instance_id: "jr-9".to_owned(),
                url: "http://jr9:32307".to_owned(),
                host: "h".to_owned(),
                pid: 1,
                lease: "10s".to_owned(),
                ..Default::default()
            },
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    store
        .mark_runner_lost("jr-9", chrono::Utc::now())
        .await
        .unwrap();

    let all = settle(&env.manager, &env).await;
    assert!(all.iter().all(|n| n["status"] == "delivered"), "{all:?}");
    let events: Vec<(&str, &str)> = all
        .iter()
        .map(|n| (n["webhook"].as_str().unwrap(), n["event"].as_str().unwrap()))
        .collect();
    assert_eq!(
        events,
        [
            ("hooks", "runner_lost"),
            ("hooks", "approval"),
            ("chat", "failed"),
            ("hooks", "failed")
        ],
        "newest first; the webhook of another request type told nothing"
    );

    let got = hooks.got.lock().unwrap().clone();
    let json_posts: Vec<&(String, HeaderMap, String)> =
        got.iter().filter(|(path, ..)| path == "/json").collect();
    // Two posts were answered 500 and sent again: each delivery always with its id and
    // the same body.
    assert_eq!(json_posts.len(), 5, "{got:?}");
    let mut deliveries: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for (_, headers, body) in &json_posts {
        deliveries
            .entry(headers["x-spindle-delivery"].to_str().unwrap())
            .or_default()
            .push(body);
    }
    assert_eq!(deliveries.len(), 3, "{got:?}");
    assert!(
        deliveries
            .values()
            .all(|bodies| bodies.iter().all(|b| *b == bodies[0]))
    );
    let attempts: u64 = all
        .iter()
        .filter(|n| n["webhook"] == "hooks")
        .map(|n| n["attempts"].as_u64().unwrap())
        .sum();
    assert_eq!(attempts, 5);
    for (_, headers, body) in &json_posts {
        assert_eq!(
            headers["x-spindle-signature-256"].to_str().unwrap(),
            signature(b"s3cret-of-the-hook", body),
            "signed with the webhook's secret"
        );
        let payload: Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            headers["x-spindle-event"].to_str().unwrap(),
            payload["event"]
        );
        assert_eq!(
            headers["x-spindle-delivery"].to_str().unwrap(),
            payload["deliveryId"]
        );
        assert_eq!(headers["content-type"], "application/json");
    }
    let payload = |event: &str| -> Value {
        json_posts
            .iter()
            .map(|(_, _, body)| serde_json::from_str::<Value>(body).unwrap())
            .find(|p| p["event"] == event)
            .unwrap()
    };
    let ended = payload("failed");
    assert_eq!(ended["requestId"], failed.as_str());
    assert_eq!(ended["request"]["type"], "deploy");
    assert_eq!(ended["request"]["state"], State::Fail.to_string());
    assert_eq!(ended["request"]["error"], "job <restart> failed & stopped");
    assert!(
        ended["request"].get("args").is_none(),
        "no args: they may be secret"
    );
    assert_eq!(
        ended["url"],
        format!("https://spindle.example.com/requests/{failed}")
    );
    let approval = payload("approval");
    assert_eq!(
        (approval["requestId"].as_str(), approval["jobId"].as_str()),
        (Some(waiting.as_str()), Some("gate1"))
    );
    assert_eq!(payload("runner_lost")["runner"], "jr-9");

    // Slack's template: its text, the error escaped as Slack asks, and no signature
    // (the webhook has no secret).
    let chat_got = chat.got.lock().unwrap().clone();
    let slack: Vec<&(String, HeaderMap, String)> = chat_got
        .iter()
        .filter(|(path, ..)| path == "/slack")
        .collect();
    assert_eq!(slack.len(), 1);
    let text: Value = serde_json::from_str(&slack[0].2).unwrap();
    let text = text["text"].as_str().unwrap();
    assert!(
        text.starts_with(":x: <https://spindle.example.com/requests/"),
        "{text}"
    );
    assert!(
        text.contains("job &lt;restart&gt; failed &amp; stopped"),
        "{text}"
    );
    assert!(slack[0].1.get("x-spindle-signature-256").is_none());
    assert!(!chat_got.iter().any(|(path, ..)| path == "/never"));

    // Filters, and the metrics of attempts.
    assert_eq!(listed(&env, "?webhook=chat").await.len(), 1);
    assert_eq!(listed(&env, &format!("?request={waiting}")).await.len(), 1);
    assert!(listed(&env, "?status=failed").await.is_empty());
    let (status, body, _) = call(
        &env.router,
        Method::GET,
        "/api/v1/notifications?status=lost",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("pending, delivered or failed"),
        "{body}"
    );
    let metrics = env.manager.telemetry().metrics.as_ref().unwrap().encode();
    assert!(
        metrics.contains(r#"spindle_notifications_total{webhook="hooks",result="failed"} 2"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"spindle_notifications_total{webhook="hooks",result="delivered"} 3"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_notification_outlives_its_sender_and_is_given_up_on_after_its_attempts() {
    let env = notify_env("rm-a").await;
    let down = receiver(usize::MAX).await;
    let config = |url: &str, max_attempts| NotifyConfig {
        ui_url: None,
        webhooks: vec![WebhookConfig {
            max_attempts: Some(max_attempts),
            ..webhook("hooks", url.to_owned(), &["completed"])
        }],
    };
    env.manager.set_notify(
        Notify::load(&config(&down.url, 10)).unwrap(),
        reqwest::Client::new(),
    );
    let id = create(&env).await;
    env.manager
        .finish(&final_state(&id, State::Complete, 1), None)
        .await
        .unwrap();
    env.manager.notification_round().await;
    let first = listed(&env, "").await;
    assert_eq!(
        (first[0]["status"].as_str(), first[0]["attempts"].as_u64()),
        (Some("pending"), Some(1))
    );
    assert!(
        first[0]["lastError"].as_str().unwrap().contains("500"),
        "{first:?}"
    );

    // The Request Manager is gone; another, over the same database, delivers it once
    // its receiver is back.
    let up = receiver(0).await;
    let other = Arc::new(Manager::new(
        graph::Grapher::new(
            spec::lint_str(std::path::Path::new("specs.yaml"), SPECS).specs,
            Arc::new(job::Registry::builtin()),
        ),
        Arc::clone(env.manager.store()),
        env.jr.clone(),
        Options {
            host: "rm-b".to_owned(),
            ..Options::default()
        },
    ));
    other.set_notify(
        Notify::load(&config(&up.url, 10)).unwrap(),
        reqwest::Client::new(),
    );
    let all = settle(&other, &env).await;
    assert_eq!(
        (all[0]["status"].as_str(), all[0]["attempts"].as_u64()),
        (Some("delivered"), Some(2))
    );
    let got = up.got.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    let payload: Value = serde_json::from_str(&got[0].2).unwrap();
    assert_eq!(
        (payload["event"].as_str(), payload["requestId"].as_str()),
        (Some("completed"), Some(id.as_str()))
    );
    assert!(payload.get("url").is_none());

    // A receiver that never takes it: given up on after its attempts, with why.
    other.set_notify(
        Notify::load(&config(&down.url, 2)).unwrap(),
        reqwest::Client::new(),
    );
    let again = create(&env).await;
    env.manager
        .finish(&final_state(&again, State::Complete, 1), None)
        .await
        .unwrap();
    let all = settle(&other, &env).await;
    let dead = &all[0];
    assert_eq!(
        (
            dead["status"].as_str(),
            dead["attempts"].as_u64(),
            dead["requestId"].as_str()
        ),
        (Some("failed"), Some(2), Some(again.as_str()))
    );
    assert!(
        dead["lastError"]
            .as_str()
            .unwrap()
            .contains("answered 500 Internal Server Error: receiver down for a while"),
        "{dead}"
    );
}
