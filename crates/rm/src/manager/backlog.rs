//! Back-pressure (issue #32): past `max_backlog` requests created and not yet handed to
//! a Job Runner, creates are refused with 503 and `Retry-After`, so that a flood (a
//! schedule, a script over 2,000 hosts, a retry storm) is told to wait instead of
//! growing a queue nobody sees. The backlog is every PENDING request in the database
//! (lock waiters included: they wait to be handed over too), counted at most every
//! [`SAMPLE`] by one caller at a time, plus this Request Manager's creates since, so
//! that a burst here is counted at once and the count costs one indexed query a sample,
//! not one a create.

use std::sync::atomic::{AtomicU64, Ordering};

use super::*;

/// How old a count of the backlog may be before a create counts again.
const SAMPLE: Duration = Duration::from_millis(250);

/// The longest `Retry-After` a refusal gives, in seconds.
const MOST_RETRY_AFTER: u64 = 30;

#[derive(Debug, Default)]
pub(super) struct Backlog {
    /// PENDING requests at the last count.
    counted: AtomicU64,
    /// This Request Manager's creates since then.
    since: AtomicU64,
    /// When it was counted (`None`: never); held while one caller counts.
    at: tokio::sync::Mutex<Option<tokio::time::Instant>>,
}

impl Manager {
    /// Refuses a create while the backlog is at `max_backlog` or more.
    pub(super) async fn check_backlog(&self) -> Result<(), Error> {
        let Some(limit) = self.options.max_backlog else {
            return Ok(());
        };
        let backlog = self.backlog_now().await;
        if backlog < limit {
            return Ok(());
        }
        // Longer the further past the limit: 1 s just past it, 30 s at twice it or more.
        let over = backlog - limit;
        let retry_after =
            (1 + over.saturating_mul(MOST_RETRY_AFTER) / limit.max(1)).min(MOST_RETRY_AFTER);
        if let Some(metrics) = &self.options.telemetry.metrics {
            metrics.request_refused("backlog");
        }
        tracing::debug!(
            backlog,
            limit,
            retry_after,
            "create refused: the backlog is full"
        );
        Err(Error::Overloaded {
            message: format!(
                "too many requests wait to start: {backlog} are created and not yet handed to a Job Runner, and this Request Manager takes new ones below {limit} (max_backlog); nothing was stored: retry in {retry_after} s"
            ),
            retry_after,
        })
    }

    /// A create was stored: it counts until the next count.
    pub(super) fn created_one(&self) {
        *self
            .last_create
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(std::time::Instant::now());
        if self.options.max_backlog.is_some() {
            self.backlog.since.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The backlog: counted again if the count is older than [`SAMPLE`] and nobody
    /// counts now (else the last count, plus the creates here since).
    async fn backlog_now(&self) -> u64 {
        if let Ok(mut at) = self.backlog.at.try_lock()
            && at.is_none_or(|at| at.elapsed() >= SAMPLE)
        {
            match self.store.count_requests(&[State::Pending], None).await {
                Ok(counts) => {
                    let pending = counts.iter().map(|(_, n)| n).sum();
                    self.backlog.counted.store(pending, Ordering::Relaxed);
                    self.backlog.since.store(0, Ordering::Relaxed);
                    *at = Some(tokio::time::Instant::now());
                }
                Err(err) => {
                    tracing::warn!(error = %err, "counting the backlog failed; the last count stands");
                }
            }
        }
        let backlog = self.backlog.counted.load(Ordering::Relaxed)
            + self.backlog.since.load(Ordering::Relaxed);
        if let Some(metrics) = &self.options.telemetry.metrics {
            metrics
                .backlog
                .set(i64::try_from(backlog).unwrap_or(i64::MAX));
        }
        backlog
    }
}
