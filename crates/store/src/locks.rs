//! The types of locks (issue #34): what a request or a job claims, who holds or waits,
//! and what taking them did.

use chrono::{DateTime, Utc};

/// One lock a request claims (issue #34): the lock's name, the value of its key arg
/// (empty for a lock without a key), and how many requests may hold it at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockClaim {
    pub name: String,
    pub key: String,
    pub limit: u32,
    /// Its fairness key (the caller, or a team arg's value): a lock's waiters of one
    /// priority are served round robin over these. Empty when the lock is not fair.
    pub fair_key: String,
}

/// A request, or one job of a request, that holds or waits for a lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHolder {
    pub request_id: String,
    /// The job that claims it (a node's `locks:`, a job pool); empty for the request's
    /// own claim (its type's `locks:`).
    pub job_id: String,
    pub request_type: String,
    pub user: String,
    pub priority: i32,
    /// When it joined the queue: the request's creation (a job's: its first ask).
    pub queued_at: DateTime<Utc>,
    /// Its fairness key ([`LockClaim::fair_key`]).
    pub fair_key: String,
    /// Since when it holds the lock; `None` while it waits.
    pub held_since: Option<DateTime<Utc>>,
}

/// What [`Locks::take_locks`](crate::Locks::take_locks) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockTake {
    /// Every claim is held.
    Granted,
    /// None is held (the claims are queued): the first lock that is taken.
    Waiting(LockWait),
}

/// A lock a request waits for: who holds it and how many wait before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockWait {
    pub name: String,
    pub key: String,
    pub limit: u32,
    pub holders: Vec<LockHolder>,
    pub ahead: u32,
}
