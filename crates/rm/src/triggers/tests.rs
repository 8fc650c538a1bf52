//! A trigger's config, its sender's proof and the event's reading.

use axum::http::{HeaderMap, HeaderValue};
use serde_json::json;

use super::*;

fn secret_file(text: &str) -> (tempfile::TempDir, SecretSource) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secret");
    std::fs::write(&path, text).unwrap();
    (
        dir,
        SecretSource {
            file: Some(path),
            env: None,
        },
    )
}

fn config(name: &str) -> TriggerConfig {
    TriggerConfig {
        name: name.to_owned(),
        request: "restart-fleet".to_owned(),
        args: [
            ("cluster".to_owned(), "/repository/name".to_owned()),
            ("reason".to_owned(), "=deploy".to_owned()),
        ]
        .into(),
        ..TriggerConfig::default()
    }
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(*name, HeaderValue::from_str(value).unwrap());
    }
    map
}

fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap();
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

#[test]
fn an_hmac_trigger_takes_its_senders_signature_only() {
    let (_dir, secret) = secret_file("s3cret\n");
    let trigger = Trigger::load(&TriggerConfig {
        hmac_secret: Some(secret),
        signature_header: Some("X-Hub-Signature-256".to_owned()),
        ..config("deploys")
    })
    .unwrap();
    let body = br#"{"repository": {"name": "orders"}}"#;
    let good = sign(b"s3cret", body);
    trigger
        .verify(&headers(&[("x-hub-signature-256", &good)]), body)
        .unwrap();
    for (given, expected) in [
        (None, "header X-Hub-Signature-256 is missing"),
        (Some("md5=abc".to_owned()), "is not sha256=HEX"),
        (Some(sign(b"other key", body)), "does not match the body"),
        (Some(sign(b"s3cret", b"{}")), "does not match the body"),
    ] {
        let headers = match &given {
            Some(value) => headers(&[("x-hub-signature-256", value)]),
            None => HeaderMap::new(),
        };
        let err = trigger.verify(&headers, body).unwrap_err();
        assert!(
            matches!(err, Error::Unauthorized(_)) && err.to_string().contains(expected),
            "{given:?}: {err}"
        );
        assert!(!err.to_string().contains("s3cret"), "{err}");
    }
    assert!(!format!("{trigger:?}").contains("s3cret"));
}

#[test]
fn a_token_trigger_takes_its_bearer_token_only() {
    let (_dir, token) = secret_file("tok-123");
    let trigger = Trigger::load(&TriggerConfig {
        token: Some(token),
        ..config("alerts")
    })
    .unwrap();
    trigger
        .verify(&headers(&[("authorization", "Bearer tok-123")]), b"{}")
        .unwrap();
    for given in [None, Some("Bearer tok-124"), Some("Basic dG9rLTEyMw==")] {
        let headers = match given {
            Some(value) => headers(&[("authorization", value)]),
            None => HeaderMap::new(),
        };
        let err = trigger.verify(&headers, b"{}").unwrap_err();
        assert!(matches!(err, Error::Unauthorized(_)), "{given:?}: {err}");
    }
}

#[test]
fn the_event_gives_the_args_and_the_delivery_id() {
    let (_dir, token) = secret_file("t");
    let by_header = Trigger::load(&TriggerConfig {
        token: Some(token.clone()),
        ..config("deploys")
    })
    .unwrap();
    let event = json!({"repository": {"name": "orders"}, "id": 42});
    assert_eq!(
        serde_json::Value::Object(by_header.args(&event).unwrap().into()),
        json!({"cluster": "orders", "reason": "deploy"})
    );
    let err = by_header.args(&json!({"repository": {}})).unwrap_err();
    assert_eq!(
        err.to_string(),
        "trigger deploys: the event has no /repository/name (for arg cluster)"
    );
    assert_eq!(
        by_header
            .delivery_id(&headers(&[("x-spindle-delivery", "abc-1")]), &event)
            .unwrap(),
        "abc-1"
    );
    let err = by_header
        .delivery_id(&HeaderMap::new(), &event)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("header X-Spindle-Delivery is missing"),
        "{err}"
    );
    let by_field = Trigger::load(&TriggerConfig {
        token: Some(token),
        delivery: Some("/id".to_owned()),
        ..config("deploys")
    })
    .unwrap();
    assert_eq!(
        by_field.delivery_id(&HeaderMap::new(), &event).unwrap(),
        "42"
    );
    let err = by_field
        .delivery_id(&HeaderMap::new(), &json!({}))
        .unwrap_err();
    assert!(err.to_string().contains("the event has no /id"), "{err}");
    let long = "x".repeat(256);
    let err = by_header
        .delivery_id(&headers(&[("x-spindle-delivery", &long)]), &event)
        .unwrap_err();
    assert!(err.to_string().contains("expected 1 to 255"), "{err}");
}

#[test]
fn a_bad_trigger_config_says_where_and_what_was_expected() {
    let (_dir, secret) = secret_file("s");
    let cases: Vec<(TriggerConfig, &str)> = vec![
        (
            TriggerConfig {
                token: Some(secret.clone()),
                ..config("bad name")
            },
            "name \"bad name\" is not a trigger name",
        ),
        (
            config("deploys"),
            "expected exactly one of `hmac_secret:` and `token:`",
        ),
        (
            TriggerConfig {
                token: Some(secret.clone()),
                hmac_secret: Some(secret.clone()),
                ..config("deploys")
            },
            "expected exactly one of",
        ),
        (
            TriggerConfig {
                token: Some(secret.clone()),
                args: [("cluster".to_owned(), "repository.name".to_owned())].into(),
                ..config("deploys")
            },
            "triggers: deploys: args: cluster: \"repository.name\" is not a JSON pointer",
        ),
        (
            TriggerConfig {
                token: Some(secret.clone()),
                delivery: Some("id".to_owned()),
                ..config("deploys")
            },
            "expected `header NAME` or a JSON pointer",
        ),
        (
            TriggerConfig {
                token: Some(SecretSource {
                    file: Some("/nonexistent/secret".into()),
                    env: None,
                }),
                ..config("deploys")
            },
            "triggers: deploys: token: cannot read /nonexistent/secret",
        ),
        (
            TriggerConfig {
                token: Some(SecretSource {
                    file: None,
                    env: Some("SPINDLE_TEST_TRIGGER_SECRET_UNSET".to_owned()),
                }),
                ..config("deploys")
            },
            "environment variable SPINDLE_TEST_TRIGGER_SECRET_UNSET is not set",
        ),
        (
            TriggerConfig {
                token: Some(secret),
                signature_header: Some("X-Sig".to_owned()),
                ..config("deploys")
            },
            "only an HMAC trigger",
        ),
    ];
    for (config, expected) in cases {
        let err = Trigger::load(&config).unwrap_err().to_string();
        assert!(err.contains(expected), "{config:?}: {err}");
    }
}
