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

/// A lock as people name it: `name[key]`, or `name` for a lock without a key (a pool).
pub fn lock_label(name: &str, key: &str) -> String {
    if key.is_empty() {
        name.to_owned()
    } else {
        format!("{name}[{key}]")
    }
}

/// A request, or a job of one, holding or waiting for a lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockClaimant {
    pub request_id: String,
    /// The job that claims it (a node's `locks:`, a job pool); absent for a request's own
    /// claim (its type's `locks:`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub job_id: String,
    #[serde(rename = "type")]
    pub request_type: String,
    #[serde(default)]
    pub user: String,
    #[serde(default)]
    pub priority: i32,
    /// When it joined the queue (the request's creation; a job's first ask).
    pub queued_at: DateTime<Utc>,
    /// Since when it holds the lock; absent while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_since: Option<DateTime<Utc>>,
}

/// A lock a job takes before it runs (issue #34): a job or sequence node's `locks:`
/// entry with its key's value, or a job pool (a lock without a key).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobLock {
    pub name: String,
    /// The value of the key arg (empty for a lock without a key, such as a pool).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// How many jobs may hold it at once.
    pub limit: u32,
    /// `queue` (wait for it, the default) or `skip` (the job fails at once).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub when_taken: String,
    /// The job whose completion releases it (a sequence node's lock, taken by the
    /// sequence's first job and released by its last); absent: the job's own end.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub until: String,
}

/// What a Job Runner asks before a job's first try (`POST
/// /api/v1/requests/{id}/job-locks`): take the job's locks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TakeJobLocks {
    pub job_id: String,
    pub locks: Vec<JobLock>,
    /// When the job first asked (Unix nanoseconds, the runner's clock; 0: now), so that
    /// the Request Manager can count how long it waited once granted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub asked_since: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// The answer: every lock held, or none (the job keeps its place in the queues and asks
/// again).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobLocksTaken {
    pub granted: bool,
    /// Why not: the lock taken, its holders, how many wait before the job.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub waiting: String,
}
