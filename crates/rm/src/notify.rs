//! Notifications (issue #33): when a request ends, an approval waits or a Job Runner is
//! lost, a JSON document is POSTed to each webhook of the config's `notify:` that asked
//! for that event (and that request type), signed with HMAC-SHA256 when the webhook has
//! a secret (`X-Spindle-Signature-256: sha256=HEX` of the body, GitHub's scheme).
//!
//! Delivery is at least once: the store's outbox holds every event from the transaction
//! that stored it, a Request Manager fans it out into one notification per webhook, and
//! each is sent until its receiver answers 2xx or its attempts run out, with backoff,
//! across restarts (`manager::notifications` sends them). A receiver drops a delivery it
//! has seen by its `X-Spindle-Delivery` id.

use std::collections::BTreeSet;
use std::time::Duration;

use hmac::{Hmac, Mac as _};
use proto::{NotificationPayload, NotifiedRequest, Request};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::secrets::Secret;
pub use crate::secrets::SecretSource;

/// The header that carries a notification's signature.
pub const SIGNATURE_HEADER: &str = "X-Spindle-Signature-256";
/// The header that carries a notification's delivery id (the same at every attempt).
pub const DELIVERY_HEADER: &str = "X-Spindle-Delivery";
/// The header that carries a notification's event.
pub const EVENT_HEADER: &str = "X-Spindle-Event";

/// The events a webhook may ask for; `finished` is the three ends.
pub const EVENTS: [&str; 6] = [
    "finished",
    "completed",
    "failed",
    "stopped",
    "approval",
    "runner_lost",
];

/// The longest any retry waits.
const MAX_BACKOFF: Duration = Duration::from_secs(15 * 60);

/// The config's `notify:` section.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// The web UI's address as people reach it (`https://spindle.example.com`): each
    /// notification about a request links to its page there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ui_url: Option<String>,
    #[serde(default)]
    pub webhooks: Vec<WebhookConfig>,
}

/// One webhook of `notify.webhooks`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// Its name, in `spindle notifications` and the metrics.
    pub name: String,
    /// Where the document is POSTed (http or https).
    pub url: String,
    /// What it is told of: `finished` (any end), `completed`, `failed`, `stopped`,
    /// `approval` (an approval waits), `runner_lost`.
    pub events: Vec<String>,
    /// Only requests of these types (default: every type). A runner's loss is about no
    /// request, and goes to every webhook that asks for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<String>,
    /// `json` (default: Spindle's document) or `slack` (a Slack incoming webhook's
    /// `{"text": ...}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// The shared secret the body is signed with (`X-Spindle-Signature-256`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretSource>,
    /// Attempts before it is given up on (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// The wait before the first retry, doubled at each one up to 15 minutes (default
    /// `1s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<String>,
}

/// What a webhook's document looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Template {
    Json,
    Slack,
}

/// A webhook ready to send to: its config checked, its secret read.
#[derive(Debug, Clone)]
pub struct Webhook {
    pub name: String,
    pub url: url::Url,
    events: BTreeSet<String>,
    requests: BTreeSet<String>,
    template: Template,
    secret: Option<Secret>,
    pub max_attempts: u32,
    backoff: Duration,
}

/// The webhooks of a Request Manager, checked.
#[derive(Debug, Clone, Default)]
pub struct Notify {
    pub ui_url: Option<String>,
    pub webhooks: Vec<Webhook>,
}

impl Notify {
    /// Checks `config` and reads its secrets; an error names the webhook and the field.
    pub fn load(config: &NotifyConfig) -> Result<Notify, crate::ConfigError> {
        let mut webhooks: Vec<Webhook> = Vec::new();
        for webhook in &config.webhooks {
            let loaded = Webhook::load(webhook)?;
            if webhooks.iter().any(|w| w.name == loaded.name) {
                return Err(crate::ConfigError::Invalid(format!(
                    "notify.webhooks: {} is configured twice; expected each name once",
                    loaded.name
                )));
            }
            webhooks.push(loaded);
        }
        let ui_url = match &config.ui_url {
            Some(text) => {
                let url = url::Url::parse(text).map_err(|err| {
                    format!("notify.ui_url: {text:?} is not a URL ({err}); expected one such as https://spindle.example.com")
                })?;
                Some(url.as_str().trim_end_matches('/').to_owned())
            }
            None => None,
        };
        Ok(Notify { ui_url, webhooks })
    }

    pub fn webhook(&self, name: &str) -> Option<&Webhook> {
        self.webhooks.iter().find(|webhook| webhook.name == name)
    }
}

impl Webhook {
    fn load(config: &WebhookConfig) -> Result<Webhook, crate::ConfigError> {
        let name = &config.name;
        crate::ConfigError::check_name("notify.webhooks", "webhook", name)?;
        let what = |field: &str| format!("notify.webhooks: {name}: {field}");
        let url = url::Url::parse(&config.url)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https") && url.host().is_some())
            .ok_or_else(|| {
                format!(
                    "{}: {:?} is not an http(s) URL; expected one such as https://hooks.example.com/spindle",
                    what("url"),
                    config.url
                )
            })?;
        if config.events.is_empty() {
            return Err(crate::ConfigError::Invalid(format!(
                "{}: expected at least one of: {}",
                what("events"),
                EVENTS.join(", ")
            )));
        }
        if let Some(unknown) = config.events.iter().find(|e| !EVENTS.contains(&e.as_str())) {
            return Err(crate::ConfigError::Invalid(format!(
                "{}: {unknown:?} is not an event; expected one of: {}",
                what("events"),
                EVENTS.join(", ")
            )));
        }
        let template = match config.template.as_deref() {
            None | Some("json") => Template::Json,
            Some("slack") => Template::Slack,
            Some(other) => {
                return Err(crate::ConfigError::Invalid(format!(
                    "{}: {other:?} is not a template; expected json or slack",
                    what("template")
                )));
            }
        };
        let secret = config
            .secret
            .as_ref()
            .map(|source| crate::secrets::read(source, &what("secret")))
            .transpose()?;
        let max_attempts = config.max_attempts.unwrap_or(10);
        if max_attempts == 0 {
            return Err(crate::ConfigError::Invalid(format!(
                "{}: expected at least 1",
                what("max_attempts")
            )));
        }
        let backoff = match &config.backoff {
            Some(text) => {
                proto::duration::parse(text).map_err(|err| format!("{}: {err}", what("backoff")))?
            }
            None => Duration::from_secs(1),
        };
        Ok(Webhook {
            name: name.clone(),
            url,
            events: config.events.iter().cloned().collect(),
            requests: config.requests.iter().cloned().collect(),
            template,
            secret,
            max_attempts,
            backoff,
        })
    }

    /// Whether it asks for `event` about a request of `request_type` (`None`: about no
    /// request).
    pub fn wants(&self, event: &str, request_type: Option<&str>) -> bool {
        let asked = self.events.contains(event)
            || (matches!(event, "completed" | "failed" | "stopped")
                && self.events.contains("finished"));
        asked
            && match request_type {
                Some(request_type) => {
                    self.requests.is_empty() || self.requests.contains(request_type)
                }
                None => true,
            }
    }

    /// The wait before attempt `attempts + 1`, after `attempts` failed ones: the
    /// backoff doubled at each, at most 15 minutes.
    pub fn retry_after(&self, attempts: u32) -> Duration {
        let doublings = attempts.saturating_sub(1).min(20);
        self.backoff.saturating_mul(1 << doublings).min(MAX_BACKOFF)
    }

    /// The body of `payload` in this webhook's template.
    pub fn body(&self, payload: &NotificationPayload) -> String {
        match self.template {
            Template::Json => serde_json::to_string(payload).unwrap_or_default(),
            Template::Slack => serde_json::json!({ "text": slack_text(payload) }).to_string(),
        }
    }

    /// `sha256=HEX`: the HMAC-SHA256 of `body` under the webhook's secret, if it has one.
    pub fn signature(&self, body: &[u8]) -> Option<String> {
        let secret = self.secret.as_ref()?;
        let mut mac = Hmac::<Sha256>::new_from_slice(&secret.0).ok()?;
        mac.update(body);
        Some(format!(
            "sha256={}",
            hex::encode(mac.finalize().into_bytes())
        ))
    }
}

/// The payload of `event` (with its request, when it is about one that is stored).
pub fn payload(
    event: &store::NotificationEvent,
    delivery_id: &str,
    request: Option<&Request>,
    ui_url: Option<&str>,
) -> NotificationPayload {
    let subject = (!event.subject.is_empty()).then(|| event.subject.clone());
    NotificationPayload {
        event: event.event.clone(),
        delivery_id: delivery_id.to_owned(),
        at: event.at,
        request_id: (!event.request_id.is_empty()).then(|| event.request_id.clone()),
        request: request.map(|request| NotifiedRequest {
            id: request.id.clone(),
            request_type: request.request_type.clone(),
            user: request.user.clone(),
            state: request.state.to_string(),
            error: request.error.clone(),
            created_at: request.created_at,
            finished_at: request.finished_at,
            total_jobs: request.total_jobs,
            finished_jobs: request.finished_jobs,
        }),
        job_id: if event.event == "approval" {
            subject.clone()
        } else {
            None
        },
        runner: if event.event == "runner_lost" {
            subject
        } else {
            None
        },
        url: match (ui_url, event.request_id.is_empty()) {
            (Some(base), false) => Some(format!("{base}/requests/{}", event.request_id)),
            (Some(base), true) => Some(format!("{base}/runners")),
            (None, _) => None,
        },
    }
}

/// Text for Slack's mrkdwn: `&`, `<` and `>` escaped, as Slack asks.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One line for a Slack channel.
fn slack_text(payload: &NotificationPayload) -> String {
    let link = |text: String| match &payload.url {
        Some(url) => format!("<{}|{text}>", slack_escape(url)),
        None => text,
    };
    let request = |request_id: &str| {
        let (what, user) = match &payload.request {
            Some(request) => (
                format!("{} {}", slack_escape(&request.request_type), request.id),
                if request.user.is_empty() {
                    String::new()
                } else {
                    format!(" by {}", slack_escape(&request.user))
                },
            ),
            None => (request_id.to_owned(), String::new()),
        };
        format!("{}{user}", link(format!("request {what}")))
    };
    let request_id = payload.request_id.as_deref().unwrap_or_default();
    match payload.event.as_str() {
        "completed" => format!(":white_check_mark: {} completed", request(request_id)),
        "failed" | "stopped" => {
            let error = payload
                .request
                .as_ref()
                .map(|r| r.error.as_str())
                .filter(|e| !e.is_empty())
                .map(|e| format!(": {}", slack_escape(e)))
                .unwrap_or_default();
            let icon = if payload.event == "failed" {
                ":x:"
            } else {
                ":octagonal_sign:"
            };
            format!("{icon} {} {}{error}", request(request_id), payload.event)
        }
        "approval" => format!(
            ":raised_hand: {} waits for approval (job {})",
            request(request_id),
            slack_escape(payload.job_id.as_deref().unwrap_or_default())
        ),
        "runner_lost" => format!(
            ":warning: {} lost; its requests are being recovered",
            link(format!(
                "Job Runner {}",
                slack_escape(payload.runner.as_deref().unwrap_or_default())
            ))
        ),
        other => format!("{}: {}", slack_escape(other), request(request_id)),
    }
}

#[cfg(test)]
#[path = "notify_tests.rs"]
mod tests;
