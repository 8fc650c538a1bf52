//! The webhooks' config, what each asks for, its backoff, signature and templates.

use super::*;

fn config(events: &[&str]) -> WebhookConfig {
    WebhookConfig {
        name: "chat".to_owned(),
        url: "https://hooks.example.com/spindle".to_owned(),
        events: events.iter().map(|e| (*e).to_owned()).collect(),
        ..WebhookConfig::default()
    }
}

fn load(webhooks: Vec<WebhookConfig>) -> Result<Notify, crate::ConfigError> {
    Notify::load(&NotifyConfig {
        ui_url: None,
        webhooks,
    })
}

#[test]
fn a_misconfigured_webhook_says_which_and_what_was_expected() {
    let cases: Vec<(WebhookConfig, &str)> = vec![
        (
            WebhookConfig {
                name: "chat room".to_owned(),
                ..config(&["failed"])
            },
            "name \"chat room\" is not a webhook name",
        ),
        (
            WebhookConfig {
                url: "ftp://hooks.example.com".to_owned(),
                ..config(&["failed"])
            },
            "notify.webhooks: chat: url: \"ftp://hooks.example.com\" is not an http(s) URL",
        ),
        (
            config(&[]),
            "notify.webhooks: chat: events: expected at least one of: finished",
        ),
        (
            config(&["failure"]),
            "events: \"failure\" is not an event; expected one of: finished, completed, failed, stopped, approval, runner_lost",
        ),
        (
            WebhookConfig {
                template: Some("teams".to_owned()),
                ..config(&["failed"])
            },
            "template: \"teams\" is not a template; expected json or slack",
        ),
        (
            WebhookConfig {
                secret: Some(SecretSource {
                    file: None,
                    env: Some("SPINDLE_TEST_NO_SUCH_SECRET".to_owned()),
                }),
                ..config(&["failed"])
            },
            "notify.webhooks: chat: secret: environment variable SPINDLE_TEST_NO_SUCH_SECRET is not set",
        ),
        (
            WebhookConfig {
                backoff: Some("soon".to_owned()),
                ..config(&["failed"])
            },
            "notify.webhooks: chat: backoff:",
        ),
        (
            WebhookConfig {
                max_attempts: Some(0),
                ..config(&["failed"])
            },
            "max_attempts: expected at least 1",
        ),
    ];
    for (webhook, expected) in cases {
        let err = load(vec![webhook]).unwrap_err().to_string();
        assert!(err.contains(expected), "{err}\nexpected: {expected}");
    }
    let twice = load(vec![config(&["failed"]), config(&["completed"])])
        .unwrap_err()
        .to_string();
    assert!(twice.contains("chat is configured twice"), "{twice}");
    let bad_ui = Notify::load(&NotifyConfig {
        ui_url: Some("spindle".to_owned()),
        webhooks: Vec::new(),
    })
    .unwrap_err()
    .to_string();
    assert!(
        bad_ui.starts_with("notify.ui_url: \"spindle\" is not a URL"),
        "{bad_ui}"
    );
}

#[test]
fn a_webhook_gets_the_events_and_request_types_it_asks_for() {
    let finished = Webhook::load(&WebhookConfig {
        requests: vec!["deploy".to_owned()],
        ..config(&["finished", "runner_lost"])
    })
    .unwrap();
    for event in ["completed", "failed", "stopped"] {
        assert!(finished.wants(event, Some("deploy")), "{event}");
        assert!(!finished.wants(event, Some("restart")), "{event}");
    }
    assert!(!finished.wants("approval", Some("deploy")));
    assert!(
        finished.wants("runner_lost", None),
        "a loss is about no request"
    );
    let failed = Webhook::load(&config(&["failed"])).unwrap();
    assert!(failed.wants("failed", Some("anything")));
    assert!(!failed.wants("completed", Some("anything")));
}

#[test]
fn retries_back_off_doubling_up_to_a_ceiling() {
    let webhook = Webhook::load(&WebhookConfig {
        backoff: Some("2s".to_owned()),
        ..config(&["failed"])
    })
    .unwrap();
    let waits: Vec<u64> = (1..=5).map(|n| webhook.retry_after(n).as_secs()).collect();
    assert_eq!(waits, [2, 4, 8, 16, 32]);
    assert_eq!(webhook.retry_after(40), MAX_BACKOFF);
    assert_eq!(webhook.max_attempts, 10);
}

#[test]
fn the_signature_is_githubs_scheme_and_the_secret_is_never_shown() {
    // RFC 4231's test case 2: key "Jefe", data "what do ya want for nothing?".
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("secret");
    std::fs::write(&file, "Jefe\n").unwrap();
    let webhook = Webhook::load(&WebhookConfig {
        secret: Some(SecretSource {
            file: Some(file),
            env: None,
        }),
        ..config(&["failed"])
    })
    .unwrap();
    assert_eq!(
        webhook.signature(b"what do ya want for nothing?").unwrap(),
        "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
    assert!(!format!("{webhook:?}").contains("Jefe"));
    let unsigned = Webhook::load(&config(&["failed"])).unwrap();
    assert_eq!(unsigned.signature(b"x"), None);
}

#[test]
fn slack_text_escapes_what_users_wrote() {
    let event = store::NotificationEvent {
        seq: 1,
        event: "approval".to_owned(),
        request_id: "r1".to_owned(),
        subject: "gate<1>".to_owned(),
        at: chrono::Utc::now(),
    };
    let mut payload = payload(&event, "d1", None, Some("https://s.example.com"));
    payload.request = Some(proto::NotifiedRequest {
        id: "r1".to_owned(),
        request_type: "deploy".to_owned(),
        user: "<!channel>".to_owned(),
        state: "RUNNING".to_owned(),
        error: String::new(),
        created_at: chrono::Utc::now(),
        finished_at: None,
        total_jobs: 2,
        finished_jobs: 0,
    });
    let webhook = Webhook::load(&WebhookConfig {
        template: Some("slack".to_owned()),
        ..config(&["approval"])
    })
    .unwrap();
    let body: serde_json::Value = serde_json::from_str(&webhook.body(&payload)).unwrap();
    assert_eq!(
        body["text"],
        ":raised_hand: <https://s.example.com/requests/r1|request deploy r1> by &lt;!channel&gt; waits for approval (job gate&lt;1&gt;)"
    );
}
