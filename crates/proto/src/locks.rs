//! Spindle's locks as its API shows them (`GET /api/v1/locks`, issue #34): each lock
//! (a name and the value of its key arg) with the requests that hold it and those that
//! wait for it, in the order they will be served.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One lock: its holders and its queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockStatus {
    pub name: String,
    /// The value of the key arg (empty for a lock without a key).
    #[serde(default)]
    pub key: String,
    /// How many requests may hold it at once.
    pub limit: u32,
    #[serde(default)]
    pub holders: Vec<LockClaimant>,
    /// First served first.
    #[serde(default)]
    pub waiters: Vec<LockClaimant>,
}

/// A request holding or waiting for a lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockClaimant {
    pub request_id: String,
    #[serde(rename = "type")]
    pub request_type: String,
    #[serde(default)]
    pub user: String,
    #[serde(default)]
    pub priority: i32,
    /// When it joined the queue (the request's creation).
    pub queued_at: DateTime<Utc>,
    /// Since when it holds the lock; absent while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_since: Option<DateTime<Utc>>,
}
