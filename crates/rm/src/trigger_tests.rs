//! Triggers (issue #33) through the API: an event signed by its sender starts a request
//! once per delivery id, whatever Spindle's own authentication asks of other callers; a
//! wrong signature, an unknown trigger or an event without a mapped field starts nothing
//! and says why; `GET /api/v1/triggers` lists the deliveries.

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use hmac::{Hmac, Mac as _};
use serde_json::json;
use sha2::Sha256;

use crate::Options;
use crate::tests::{Env, call_with, env_specs};
use crate::triggers::{SecretSource, Trigger, TriggerConfig};

const SPECS: &str = "sequences:
  deploy:
    request: true
    args:
      required:
        - name: host
      optional:
        - name: reason
          default: manual
    nodes:
      only:
        category: job
        type: noop
";

fn sign(body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(b"hook-secret").unwrap();
    mac.update(body.as_bytes());
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// A manager with authentication on (ann may read) and trigger `deploys`.
async fn trigger_env(dir: &std::path::Path) -> (Env, axum::Router) {
    let token = auth::TokenLine::of("spindle_test_ann", "ann", &["viewer".to_owned()]);
    let tokens = auth::Tokens::parse("tokens", &token.to_string()).unwrap();
    let auth = auth::Auth {
        authenticators: vec![Arc::new(tokens)],
        acls: auth::Acls::new(std::collections::HashMap::new()),
        admin_roles: Vec::new(),
        strict: false,
        read_roles: Some(vec!["viewer".to_owned()]),
        service_roles: vec!["spindle".to_owned()],
        metrics_roles: vec!["metrics".to_owned()],
    };
    let env = env_specs(
        Options {
            jr_url: Some("http://jr1:32307".to_owned()),
            auth: Some(Arc::new(auth)),
            ..Options::default()
        },
        SPECS,
    )
    .await;
    let secret = dir.join("hook.secret");
    std::fs::write(&secret, "hook-secret\n").unwrap();
    let trigger = Trigger::load(&TriggerConfig {
        name: "deploys".to_owned(),
        request: "deploy".to_owned(),
        args: [
            ("host".to_owned(), "/target/host".to_owned()),
            ("reason".to_owned(), "=deploy finished".to_owned()),
        ]
        .into(),
        delivery: Some("header X-GitHub-Delivery".to_owned()),
        hmac_secret: Some(SecretSource {
            file: Some(secret),
            env: None,
        }),
        signature_header: Some("X-Hub-Signature-256".to_owned()),
        ..TriggerConfig::default()
    })
    .unwrap();
    env.manager.set_triggers(vec![trigger]);
    let router = env
        .router
        .clone()
        .layer(axum::middleware::from_fn_with_state(
            env.manager.clone(),
            crate::authenticate,
        ));
    (env, router)
}

/// How many requests are stored.
async fn requests(env: &Env) -> usize {
    env.manager
        .store()
        .find_requests(&proto::RequestFilter::default())
        .await
        .unwrap()
        .len()
}

#[tokio::test]
async fn a_signed_delivery_starts_one_request_however_often_it_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let (env, router) = trigger_env(dir.path()).await;
    let event = json!({"target": {"host": "web-7"}, "status": "done"}).to_string();
    let signature = sign(&event);
    let send = async |delivery: &str, signature: &str, body: &str| {
        call_with(
            &router,
            Method::POST,
            "/api/v1/triggers/deploys",
            Some(body),
            &[
                ("X-GitHub-Delivery", delivery),
                ("X-Hub-Signature-256", signature),
            ],
        )
        .await
    };
    let (status, first, _) = send("d-1", &signature, &event).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_eq!(first["duplicate"], false);
    let id = first["id"].as_str().unwrap().to_owned();
    let request = env.manager.store().get_request(&id, false).await.unwrap();
    assert_eq!(request.request_type, "deploy");
    assert_eq!(request.user, "trigger:deploys");
    let args: Vec<(&str, &serde_json::Value, bool)> = request
        .args
        .iter()
        .map(|arg| (arg.name.as_str(), &arg.value, arg.given))
        .collect();
    assert_eq!(
        args,
        [
            ("host", &json!("web-7"), true),
            ("reason", &json!("deploy finished"), true)
        ]
    );
    // Sent again (a retry of the sender): the same request, nothing new.
    for _ in 0..2 {
        let (status, again, _) = send("d-1", &signature, &event).await;
        assert_eq!(status, StatusCode::OK, "{again}");
        assert_eq!(
            (again["id"].as_str(), &again["duplicate"]),
            (Some(id.as_str()), &json!(true))
        );
    }
    assert_eq!(requests(&env).await, 1);
    // What starts nothing, and says why.
    let wrong = sign("{}");
    let missing_field = json!({"target": {}}).to_string();
    let missing_signed = sign(&missing_field);
    for (delivery, signature, body, expected, says) in [
        (
            "d-2",
            wrong.as_str(),
            event.as_str(),
            StatusCode::UNAUTHORIZED,
            "does not match the body",
        ),
        (
            "d-2",
            "",
            event.as_str(),
            StatusCode::UNAUTHORIZED,
            "is not sha256=HEX",
        ),
        (
            "d-2",
            missing_signed.as_str(),
            missing_field.as_str(),
            StatusCode::BAD_REQUEST,
            "the event has no /target/host (for arg host)",
        ),
        (
            "",
            signature.as_str(),
            event.as_str(),
            StatusCode::BAD_REQUEST,
            "expected 1 to 255",
        ),
    ] {
        let (status, answer, _) = send(delivery, signature, body).await;
        assert_eq!(status, expected, "{answer}");
        assert!(
            answer["message"].as_str().unwrap().contains(says),
            "{answer}"
        );
    }
    let not_json = "not json";
    let (status, answer, _) = send("d-3", &sign(not_json), not_json).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("the event is not JSON"),
        "{answer}"
    );
    let (status, answer, _) = call_with(
        &router,
        Method::POST,
        "/api/v1/triggers/nope",
        Some(&event),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("configured: deploys"),
        "{answer}"
    );
    assert_eq!(requests(&env).await, 1);
    // The list follows Spindle's authentication; it shows the delivery, never the secret.
    let (status, _, _) = call_with(&router, Method::GET, "/api/v1/triggers", None, &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, listed, _) = call_with(
        &router,
        Method::GET,
        "/api/v1/triggers",
        None,
        &[("authorization", "Bearer spindle_test_ann")],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed[0]["name"], "deploys");
    assert_eq!(listed[0]["auth"], "hmac");
    assert_eq!(listed[0]["delivery"], "header X-GitHub-Delivery");
    assert_eq!(listed[0]["deliveries"][0]["deliveryId"], "d-1");
    assert_eq!(listed[0]["deliveries"][0]["requestId"], id.as_str());
    assert!(!listed.to_string().contains("hook-secret"), "{listed}");
    // The audit trail says the trigger created it.
    let audit = env.manager.store().audit(&id).await.unwrap();
    assert_eq!(audit[0].action, "create");
    assert_eq!(audit[0].user, "trigger:deploys");
}
