//! Where a chain's reports go, and the delivery task that sends them: in order, job log
//! entries in batches, progress coalesced to the latest count, transient failures
//! retried with backoff, so that the traverser's event loop never waits on the Reporter.

use std::sync::Arc;
use std::time::Duration;

use proto::{FinishRequest, JobLog, RequestProgress, State, SuspendedJobChain};
use tokio::sync::mpsc;

/// A report that could not be delivered. Transient errors (a server down, a timeout, a
/// locked database) are retried; permanent ones (a rejected report) are logged and
/// dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ReportError {
    pub message: String,
    transient: bool,
}

impl ReportError {
    pub fn transient(message: impl Into<String>) -> ReportError {
        ReportError {
            message: message.into(),
            transient: true,
        }
    }

    pub fn permanent(message: impl Into<String>) -> ReportError {
        ReportError {
            message: message.into(),
            transient: false,
        }
    }

    pub fn is_transient(&self) -> bool {
        self.transient
    }
}

/// Receives what a running chain reports: the Request Manager, in Spindle.
#[async_trait::async_trait]
pub trait Reporter: Send + Sync + 'static {
    /// Job log entries, one per try, oldest first. Entries are keyed by (request, job,
    /// try); a retried call may repeat entries that were stored before it failed.
    async fn job_logs(&self, entries: &[JobLog]) -> Result<(), ReportError>;
    /// The number of jobs completed so far.
    async fn progress(&self, progress: &RequestProgress) -> Result<(), ReportError>;
    /// The chain's final state: COMPLETE, FAIL or STOPPED.
    async fn finish(&self, finish: &FinishRequest) -> Result<(), ReportError>;
    /// The chain, handed back because the runner is shutting down.
    async fn suspend(&self, suspended: &SuspendedJobChain) -> Result<(), ReportError>;
}

/// How transient report failures are retried: exponential backoff from `initial`, capped
/// at `max_delay`; `max_attempts` of `None` retries until the report is delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    pub initial: Duration,
    pub max_delay: Duration,
    pub max_attempts: Option<u32>,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            initial: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            max_attempts: None,
        }
    }
}

/// What the traverser hands the delivery task.
#[derive(Debug)]
pub(crate) enum Report {
    Log(JobLog),
    Progress(u64),
    Finish(FinishRequest),
    Suspend(Box<SuspendedJobChain>),
}

/// Entries sent in one `job_logs` call at most.
const MAX_BATCH: usize = 1000;

/// Calls `send` until it succeeds, fails permanently, or runs out of attempts.
async fn with_retries<F, Fut>(
    policy: &RetryPolicy,
    what: &str,
    request_id: &str,
    mut send: F,
) -> Result<(), ReportError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), ReportError>>,
{
    let mut delay = policy.initial;
    let mut attempt = 1;
    loop {
        match send().await {
            Ok(()) => return Ok(()),
            Err(err)
                if err.is_transient() && policy.max_attempts.is_none_or(|max| attempt < max) =>
            {
                tracing::warn!(request_id, attempt, error = %err, "sending {what} failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(policy.max_delay);
                attempt += 1;
            }
            Err(err) => {
                tracing::error!(request_id, attempt, error = %err, "sending {what} failed; giving up");
                return Err(err);
            }
        }
    }
}

/// Delivers reports until the channel closes. Returns whether a suspended chain could
/// not be delivered (the chain then was reported as FAIL instead).
pub(crate) async fn deliver(
    reporter: Arc<dyn Reporter>,
    policy: RetryPolicy,
    request_id: String,
    mut reports: mpsc::UnboundedReceiver<Report>,
) -> bool {
    let mut suspend_failed = false;
    let mut logs: Vec<JobLog> = Vec::new();
    let mut progress: Option<u64> = None;
    let mut last: Option<Report> = None;
    while let Some(first) = reports.recv().await {
        // Take what is queued (up to a batch of logs), keeping only the newest progress.
        let mut next = Some(first);
        while logs.len() < MAX_BATCH
            && let Some(report) = next.take().or_else(|| reports.try_recv().ok())
        {
            match report {
                Report::Log(entry) => logs.push(entry),
                Report::Progress(n) => progress = Some(n),
                other => {
                    last = Some(other);
                    break;
                }
            }
        }
        if !logs.is_empty() {
            let _ = with_retries(&policy, "job log entries", &request_id, || {
                reporter.job_logs(&logs)
            })
            .await;
            logs.clear();
        }
        if let Some(finished_jobs) = progress.take() {
            let body = RequestProgress {
                request_id: request_id.clone(),
                finished_jobs,
            };
            // Progress is advisory: a failure is not retried beyond the policy.
            let _ = with_retries(&policy, "progress", &request_id, || {
                reporter.progress(&body)
            })
            .await;
        }
        match last.take() {
            Some(Report::Finish(finish)) => {
                let _ = with_retries(&policy, "final state", &request_id, || {
                    reporter.finish(&finish)
                })
                .await;
            }
            Some(Report::Suspend(suspended)) => {
                let res = with_retries(&policy, "suspended chain", &request_id, || {
                    reporter.suspend(&suspended)
                })
                .await;
                if res.is_err() {
                    suspend_failed = true;
                    let finish = FinishRequest {
                        request_id: request_id.clone(),
                        state: State::Fail,
                        finished_at: chrono::Utc::now(),
                        finished_jobs: suspended.job_chain.finished_jobs,
                    };
                    let _ = with_retries(&policy, "final state", &request_id, || {
                        reporter.finish(&finish)
                    })
                    .await;
                }
            }
            _ => {}
        }
    }
    suspend_failed
}
