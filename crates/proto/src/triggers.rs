//! Triggers (issue #33): another system's event starts a request
//! (`POST /api/v1/triggers/{name}`); `GET /api/v1/triggers` lists them with their latest
//! deliveries.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A delivery a trigger accepted: the id its sender gave it and the request it created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TriggerDelivery {
    pub trigger: String,
    pub delivery_id: String,
    pub request_id: String,
    pub received_at: DateTime<Utc>,
}

/// What a trigger answers: the request the delivery created, or created before when it
/// was sent again (`duplicate`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TriggerAccepted {
    pub id: String,
    pub trigger: String,
    pub delivery_id: String,
    /// True when this delivery id was seen before: nothing new was started.
    pub duplicate: bool,
}

/// A trigger as `GET /api/v1/triggers` lists it (its secret never).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TriggerStatus {
    pub name: String,
    /// The request type it starts.
    pub request: String,
    /// Each arg and where it comes from: a JSON pointer into the event (`/repo/name`), or
    /// `=VALUE` for a fixed value.
    pub args: std::collections::BTreeMap<String, String>,
    /// `hmac` (a signature of the body) or `token` (a bearer token).
    pub auth: String,
    /// Where the delivery id is read: `header NAME` or a JSON pointer.
    pub delivery: String,
    /// The newest deliveries first.
    pub deliveries: Vec<TriggerDelivery>,
}
