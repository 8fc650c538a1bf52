//! Notifications (issue #33): what Spindle POSTs to the configured webhooks when a
//! request ends, an approval waits or a Job Runner is lost, and how each delivery went
//! (`GET /api/v1/notifications`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One notification: an event for one webhook, and how sending it went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Notification {
    /// Sent as `X-Spindle-Delivery`: the same at every attempt.
    pub delivery_id: String,
    pub webhook: String,
    /// `completed`, `failed`, `stopped`, `approval` or `runner_lost`.
    pub event: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub request_id: String,
    /// The approval job that waits, or the runner instance lost.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subject: String,
    /// `pending` (sent at `nextAt`), `delivered` or `failed` (given up on).
    pub status: String,
    pub attempts: u32,
    pub created_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_at: Option<DateTime<Utc>>,
    /// When it was delivered or given up on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done_at: Option<DateTime<Utc>>,
    /// Why the last attempt failed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_error: String,
}

/// The JSON document a webhook receives (the `json` template).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotificationPayload {
    /// `completed`, `failed`, `stopped`, `approval` or `runner_lost`.
    pub event: String,
    pub delivery_id: String,
    /// When it happened.
    pub at: DateTime<Utc>,
    /// The request it is about (none for a runner lost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// That request as it is when the event is fanned out (none when it was removed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<NotifiedRequest>,
    /// The approval job that waits (`approval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// The runner instance lost (`runner_lost`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    /// A page of Spindle's web UI about it, when the Request Manager knows its own URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// A request as a notification tells of it: no args (they may be secret) and no chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotifiedRequest {
    pub id: String,
    #[serde(rename = "type")]
    pub request_type: String,
    pub user: String,
    /// Its state now (`COMPLETE`, `FAILED`, …).
    pub state: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
    pub created_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    pub total_jobs: u64,
    pub finished_jobs: u64,
}
