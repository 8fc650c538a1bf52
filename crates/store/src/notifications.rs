//! What the notifications' outbox holds (issue #33): the events that happened, as the
//! store's triggers (a request's end, a runner's loss) and the Request Manager (a wait
//! for an approval) insert them, and the notifications each is fanned out into, one per
//! webhook, until delivered or given up on.

use chrono::{DateTime, Utc};

/// One event not yet fanned out ([`crate::Events::notification_events`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationEvent {
    /// Its place in the outbox: events are fanned out in this order.
    pub seq: i64,
    /// `completed`, `failed`, `stopped`, `approval` or `runner_lost`.
    pub event: String,
    /// The request it is about (empty for a runner's loss).
    pub request_id: String,
    /// The runner instance lost, or the approval job that waits.
    pub subject: String,
    pub at: DateTime<Utc>,
}

/// A notification to send, made of an event for one webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewNotification {
    /// Unique: the receiver's key to drop a delivery it has seen (sent again after a
    /// timeout, say).
    pub delivery_id: String,
    pub webhook: String,
    pub event: String,
    pub request_id: String,
    pub subject: String,
    /// The document POSTed, made once so that every attempt sends (and signs) the same.
    pub body: String,
    pub at: DateTime<Utc>,
}

/// An event and what it fans out into ([`crate::Events::fan_out`]): none when no webhook
/// asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FannedOut {
    pub seq: i64,
    pub notifications: Vec<NewNotification>,
}

/// A pending notification this Request Manager claimed to send
/// ([`crate::Events::claim_notifications`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedNotification {
    pub id: i64,
    pub delivery_id: String,
    pub webhook: String,
    pub event: String,
    pub body: String,
    /// Attempts made before this one.
    pub attempts: u32,
}

/// What one attempt to send a notification did ([`crate::Events::notification_attempted`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    Delivered,
    /// It failed: sent again at `retry_at`, or given up on (`None`).
    Failed {
        error: String,
        retry_at: Option<DateTime<Utc>>,
    },
}

/// Which notifications [`crate::Events::notifications`] lists, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotificationFilter {
    pub webhook: Option<String>,
    /// `pending`, `delivered` or `failed`.
    pub status: Option<String>,
    pub request_id: Option<String>,
    pub limit: u32,
}
