//! Where a chain's reports go, and the delivery task that sends them: in order, job log
//! entries in batches, progress coalesced to the latest count, failures retried with
//! backoff as [`RetryPolicy`] says, so that the traverser's event loop never waits on the
//! Reporter and a chain always ends.

use std::sync::Arc;
use std::time::Duration;

use proto::{
    FinishRequest, JobLocksTaken, JobLog, OutputChunk, RequestProgress, State, SuspendedJobChain,
    TakeJobLocks, TryStart,
};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::output::{self, Hub};

/// A report that could not be delivered, and so whether to send it again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ReportError {
    pub message: String,
    pub kind: ReportErrorKind,
}

/// What a failed delivery says about the next attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportErrorKind {
    /// The Request Manager could not be reached or said it is unavailable (a network
    /// error, a timeout, HTTP 503, a locked database): it will take the report once it is
    /// back, so it is retried for as long as the policy allows (by default, until it is).
    Unavailable,
    /// The Request Manager answered with a fault (HTTP 500): it may be passing, or it may
    /// fail the same way every time, so it is retried a few times only.
    Failed,
    /// The Request Manager refused the report (HTTP 4xx): sending it again cannot help.
    Rejected,
    /// The Request Manager refused the report because this runner no longer owns the
    /// request (another runner was given it): the chain's jobs are stopped and nothing
    /// more is reported for it.
    Fenced,
}

impl ReportError {
    pub fn unavailable(message: impl Into<String>) -> ReportError {
        ReportError {
            message: message.into(),
            kind: ReportErrorKind::Unavailable,
        }
    }

    pub fn failed(message: impl Into<String>) -> ReportError {
        ReportError {
            message: message.into(),
            kind: ReportErrorKind::Failed,
        }
    }

    pub fn rejected(message: impl Into<String>) -> ReportError {
        ReportError {
            message: message.into(),
            kind: ReportErrorKind::Rejected,
        }
    }

    pub fn fenced(message: impl Into<String>) -> ReportError {
        ReportError {
            message: message.into(),
            kind: ReportErrorKind::Fenced,
        }
    }

    /// Whether the same report may be delivered by trying again later.
    pub fn is_transient(&self) -> bool {
        self.kind == ReportErrorKind::Unavailable
    }
}

/// Receives what a running chain reports: the Request Manager, in Spindle.
#[async_trait::async_trait]
pub trait Reporter: Send + Sync + 'static {
    /// Tries of jobs with a durable start that began, oldest first, keyed by (request,
    /// job, try) like job log entries; each such try waits until its start is delivered.
    async fn try_starts(&self, starts: &[TryStart]) -> Result<(), ReportError>;
    /// Job log entries, one per try, oldest first. Entries are keyed by (request, job,
    /// try); a retried call may repeat entries that were stored before it failed.
    async fn job_logs(&self, entries: &[JobLog]) -> Result<(), ReportError>;
    /// Live output of running tries, in chunks (see [`proto::OutputChunk`]). A chunk is
    /// keyed by (request, job, try, stream, offset); a retried call may repeat chunks.
    async fn output(&self, chunks: &[OutputChunk]) -> Result<(), ReportError>;
    /// The number of jobs completed so far.
    async fn progress(&self, progress: &RequestProgress) -> Result<(), ReportError>;
    /// The chain's final state: COMPLETE, FAIL or STOPPED, with the job log entries that
    /// were queued with it (`FinishRequest::job_logs`, oldest first; they are to be
    /// stored as [`Reporter::job_logs`] would, before the final state).
    async fn finish(&self, finish: &FinishRequest) -> Result<(), ReportError>;
    /// The chain, handed back because the runner is shutting down.
    async fn suspend(&self, suspended: &SuspendedJobChain) -> Result<(), ReportError>;
    /// Takes a job's locks before its first try (issue #34): all held, or none and the
    /// job keeps its place in their queues (it asks again). By default refused: a
    /// reporter that cannot take locks cannot run a job that declares them.
    async fn take_job_locks(
        &self,
        request_id: &str,
        take: &TakeJobLocks,
    ) -> Result<JobLocksTaken, ReportError> {
        let _ = take;
        Err(ReportError::rejected(format!(
            "request {request_id}: this runner's reporter cannot take locks"
        )))
    }
    /// Releases what a job holds or waits for (its end; a stop while it waits).
    async fn release_job_locks(&self, request_id: &str, job_id: &str) -> Result<(), ReportError> {
        let _ = job_id;
        Err(ReportError::rejected(format!(
            "request {request_id}: this runner's reporter cannot release locks"
        )))
    }
}

/// What a chain run tells whoever watches it, such as metrics and traces. Called from
/// the chain's tasks, so every method must return at once; each does nothing unless
/// implemented.
pub trait Observer: std::fmt::Debug + Send + Sync + 'static {
    /// A job was dispatched: it runs (in a try or waiting to retry) until [`Observer::job_ended`].
    fn job_started(&self) {}
    /// A dispatched job ended, or was abandoned.
    fn job_ended(&self) {}
    /// A try ended and its entry is being delivered (once per entry); `retry` when it
    /// was not its job's first try in the job's current run.
    fn try_logged(&self, _entry: &JobLog, _retry: bool) {}
    /// How many reports wait to be delivered now (0 once the chain's last is sent).
    fn backlog(&self, _reports: usize) {}
    /// One attempt at a delivery failed (it may be retried).
    fn delivery_failed(&self, _kind: ReportErrorKind) {}
}

/// How failed reports are sent again: exponential backoff from `initial`, capped at
/// `max_delay`. A Request Manager that is unavailable gets `max_attempts` in all (`None`:
/// until it takes the report); one that answers with a fault gets `max_failed_attempts`,
/// so that a fault that repeats cannot hold a chain's end forever; a rejected report is
/// not sent again. A report given up on is logged as an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    pub initial: Duration,
    pub max_delay: Duration,
    pub max_attempts: Option<u32>,
    pub max_failed_attempts: u32,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            initial: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            max_attempts: None,
            max_failed_attempts: 5,
        }
    }
}

impl RetryPolicy {
    /// Whether attempt number `attempt` (from 1), which failed with `err` and was the
    /// `faults`th to fail with a fault, is followed by another.
    fn again(&self, err: &ReportError, attempt: u32, faults: u32) -> bool {
        let attempts_left = self.max_attempts.is_none_or(|max| attempt < max);
        match err.kind {
            ReportErrorKind::Unavailable => attempts_left,
            ReportErrorKind::Failed => attempts_left && faults < self.max_failed_attempts,
            ReportErrorKind::Rejected | ReportErrorKind::Fenced => false,
        }
    }
}

/// What the traverser hands the delivery task. Its big payloads are boxed: every chain's
/// queue holds a block of 32 reports from its start, so a report's size is paid 32
/// times over for every running chain (208 bytes unboxed, 6.8 KiB a chain).
#[derive(Debug)]
pub(crate) enum Report {
    /// A try of a job with a durable start began; its runner waits on the sender, which
    /// is answered once the start was delivered, or with why it was given up on (the
    /// try then does not run).
    Start(Box<TryStart>, oneshot::Sender<Result<(), String>>),
    /// A try's entry, and whether the try was a retry.
    Log(Box<JobLog>, bool),
    Progress(u64),
    Finish(Box<FinishRequest>),
    Suspend(Box<SuspendedJobChain>),
    /// A job asks for its locks; its runner waits on the sender for the answer (an
    /// error's text when it could not be asked).
    Take(
        Box<TakeJobLocks>,
        oneshot::Sender<Result<JobLocksTaken, String>>,
    ),
    /// A job's end releases what this job (its own id, or a sequence's first job's)
    /// holds; sent after the entries queued before it.
    Release(String),
}

/// The lock reports of one round.
#[derive(Default)]
struct LockReports {
    takes: Vec<(TakeJobLocks, oneshot::Sender<Result<JobLocksTaken, String>>)>,
    releases: Vec<String>,
}

/// Entries sent in one `job_logs` call at most: as many as the Request Manager's group
/// commit writes in one transaction (`store::BatchOptions::max_entries`), so that a
/// large chain's entries go in few commits. Each commit writes every page its rows
/// touched; job ids are random, so a commit of 1,000 entries of a 100,000-job chain
/// rewrote about as many index pages as one of 5,000, and five times as often.
pub(crate) const MAX_BATCH: usize = 5000;

/// The text (output and error) of the entries of one call at most, whatever their
/// number, so that the call stays well within a Request Manager's body limit (64 MiB by
/// default, JSON escaping included): a try keeps up to 1 MiB of each stream.
pub(crate) const MAX_BATCH_TEXT: usize = 8 << 20;

/// The text an entry adds to a call's body, for [`MAX_BATCH_TEXT`].
fn text_of(entry: &JobLog) -> usize {
    entry.stdout.len() + entry.stderr.len() + entry.error.len()
}

/// How long job log entries and progress wait for more before they are sent, when
/// nothing else is queued: a short chain's jobs then usually all end within it, and its
/// entries go in one call with its final state (one call and one write a request fewer
/// than when the first entry went alone). Try starts and the final state never wait.
const LINGER: Duration = Duration::from_millis(10);

/// Calls `send` until it succeeds or the policy gives up.
pub(crate) async fn with_retries<F, Fut>(
    policy: &RetryPolicy,
    observer: Option<&dyn Observer>,
    what: &str,
    mut send: F,
) -> Result<(), ReportError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), ReportError>>,
{
    let mut delay = policy.initial;
    let mut attempt = 1;
    let mut faults = 0;
    loop {
        let res = send().await;
        if let Err(err) = &res
            && err.kind == ReportErrorKind::Failed
        {
            faults += 1;
        }
        if let (Err(err), Some(observer)) = (&res, observer) {
            observer.delivery_failed(err.kind);
        }
        match res {
            Ok(()) => return Ok(()),
            Err(err) if policy.again(&err, attempt, faults) => {
                tracing::warn!(attempt, error = %err, "sending {what} failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(policy.max_delay);
                attempt += 1;
            }
            Err(err) => {
                tracing::error!(attempt, error = %err, "sending {what} failed; giving up");
                return Err(err);
            }
        }
    }
}

/// The task that sends a chain's live output, until the chain's last report.
struct Flusher {
    done: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Flusher {
    /// Sends what output is left and waits for it, so that a chain's output is delivered
    /// before its final state.
    async fn finish(&mut self) {
        self.done.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

/// Delivers reports until the channel closes, and the live output gathered in `hub`.
/// Returns whether a suspended chain could not be delivered (the chain then was reported
/// as FAIL instead).
///
/// A report refused as fenced (this runner no longer owns the request) cancels
/// `abandoned`; once it is cancelled, from there or by [`crate::Handle::abandon`], nothing
/// more is sent: the task ends at once, dropping what is queued (runners waiting for a
/// start to be stored then do not run their try).
pub(crate) async fn deliver(
    reporter: Arc<dyn Reporter>,
    policy: RetryPolicy,
    observer: Option<Arc<dyn Observer>>,
    request_id: String,
    hub: Arc<Hub>,
    reports: mpsc::Receiver<Report>,
    abandoned: CancellationToken,
) -> bool {
    let flush_done = CancellationToken::new();
    let flusher = tokio::spawn(
        output::flush(
            hub,
            Arc::clone(&reporter),
            policy.clone(),
            observer.clone(),
            request_id.clone(),
            flush_done.clone(),
        )
        .instrument(tracing::Span::current()),
    );
    let mut flusher = Flusher {
        done: flush_done,
        task: Some(flusher),
    };
    let delivered = tokio::select! {
        suspend_failed = deliver_all(&reporter, &policy, observer.as_deref(), &request_id, &mut flusher, reports, &abandoned) => suspend_failed,
        () = abandoned.cancelled() => false,
    };
    if let Some(observer) = &observer {
        observer.backlog(0);
    }
    if abandoned.is_cancelled() {
        if let Some(task) = flusher.task.take() {
            task.abort();
        }
    } else {
        flusher.finish().await;
    }
    delivered
}

/// A debug line per try (the Request Manager logs each failed one as a warning, with its
/// error, when it stores it).
fn log_try(entry: &JobLog) {
    tracing::debug!(job_id = entry.job_id, r#try = entry.r#try, job_type = entry.job_type, state = %entry.state, exit = entry.exit, "job try ended");
}

/// Whether a failed delivery was a refusal of this runner as not the owner: then the
/// chain is abandoned.
fn fenced<T>(res: &Result<T, ReportError>, abandoned: &CancellationToken) {
    if let Err(err) = res
        && err.kind == ReportErrorKind::Fenced
    {
        tracing::warn!(error = %err, "this job runner no longer owns the request; its chain is abandoned");
        abandoned.cancel();
    }
}

/// Adds a report to what the next round sends; returns it if it ends the round (the
/// final state or the suspended chain).
fn gather(
    report: Report,
    starts: &mut Vec<(TryStart, oneshot::Sender<Result<(), String>>)>,
    logs: &mut Vec<JobLog>,
    progress: &mut Option<u64>,
    locks: &mut LockReports,
    observer: Option<&dyn Observer>,
) -> Option<Report> {
    match report {
        Report::Start(start, ack) => starts.push((*start, ack)),
        Report::Take(take, answer) => locks.takes.push((*take, answer)),
        Report::Release(job_id) => locks.releases.push(job_id),
        Report::Log(entry, retry) => {
            log_try(&entry);
            if let Some(observer) = observer {
                observer.try_logged(&entry, retry);
            }
            logs.push(*entry);
        }
        Report::Progress(n) => *progress = Some(n),
        last @ (Report::Finish(_) | Report::Suspend(_)) => return Some(last),
    }
    None
}

// Long because it is the delivery task's loop: what it gathered (try starts, entries and
// their text, the latest progress, the end) is held across the awaits of gathering and
// sending; the end is `send_end`'s, each call `with_retries`'.
// Its rounds' sends are boxed: a chain's delivery task waits for reports through all
// of its life, and its future is as big as its biggest step (1.5 KiB unboxed, for every
// running chain; boxed, a round pays an allocation beside its HTTP call).
async fn deliver_all(
    reporter: &Arc<dyn Reporter>,
    policy: &RetryPolicy,
    observer: Option<&dyn Observer>,
    request_id: &str,
    flusher: &mut Flusher,
    mut reports: mpsc::Receiver<Report>,
    abandoned: &CancellationToken,
) -> bool {
    let mut suspend_failed = false;
    let mut starts: Vec<(TryStart, oneshot::Sender<Result<(), String>>)> = Vec::new();
    let mut logs: Vec<JobLog> = Vec::new();
    let mut progress: Option<u64> = None;
    let mut locks = LockReports::default();
    let mut last: Option<Report> = None;
    // The text of the entries in `logs` (see MAX_BATCH_TEXT).
    let mut text = 0;
    while let Some(first) = reports.recv().await {
        // Take what is queued (up to a batch of logs), keeping only the newest progress;
        // entries and progress alone wait up to `LINGER` for more.
        let mut next = Some(first);
        let mut linger: Option<tokio::time::Instant> = None;
        loop {
            while last.is_none()
                && logs.len() + starts.len() < MAX_BATCH
                && text < MAX_BATCH_TEXT
                && let Some(report) = next.take().or_else(|| reports.try_recv().ok())
            {
                if let Report::Log(entry, _) = &report {
                    text += text_of(entry);
                }
                last = gather(
                    report,
                    &mut starts,
                    &mut logs,
                    &mut progress,
                    &mut locks,
                    observer,
                );
            }
            let full = logs.len() >= MAX_BATCH || text >= MAX_BATCH_TEXT;
            // A try waits on its start (a job on its locks), and the end goes at once.
            if last.is_some() || !starts.is_empty() || !locks.takes.is_empty() || full {
                break;
            }
            let deadline = *linger.get_or_insert_with(|| tokio::time::Instant::now() + LINGER);
            match tokio::time::timeout_at(deadline, reports.recv()).await {
                Ok(Some(report)) => next = Some(report),
                // Closed (what was taken is sent, then the loop ends) or waited enough.
                Ok(None) | Err(_) => break,
            }
        }
        if let Some(observer) = observer {
            observer.backlog(starts.len() + logs.len() + reports.len());
        }
        if !starts.is_empty() {
            let to_send: Vec<TryStart> = starts.iter().map(|(start, _)| start.clone()).collect();
            let res = Box::pin(with_retries(policy, observer, "try starts", || {
                reporter.try_starts(&to_send)
            }))
            .await;
            fenced(&res, abandoned);
            if abandoned.is_cancelled() {
                return false;
            }
            // Given up on: the tries do not run (one run unstored would run again,
            // unseen, if this runner were lost).
            let answer = res.map_err(|err| err.to_string());
            for (_, ack) in starts.drain(..) {
                let _ = ack.send(answer.clone());
            }
        }
        // The final state carries the last entries: one call, not two.
        if let Some(Report::Finish(finish)) = &mut last {
            finish.job_logs = std::mem::take(&mut logs);
        }
        // The final state carries the count of completed jobs: progress queued with it
        // would be a write of no use.
        let progress_body = progress
            .take()
            .filter(|_| !matches!(last, Some(Report::Finish(_))))
            .map(|finished_jobs| RequestProgress {
                request_id: request_id.to_owned(),
                finished_jobs,
            });
        // Entries and progress go at once, so that the Request Manager's group commit
        // takes them in one write (one after the other, a large chain's every round of
        // entries cost two commits).
        let send_logs = async {
            if logs.is_empty() {
                return Ok(());
            }
            with_retries(policy, observer, "job log entries", || {
                reporter.job_logs(&logs)
            })
            .await
        };
        let send_progress = async {
            let Some(body) = &progress_body else {
                return Ok(());
            };
            // Progress is advisory: a failure is not retried beyond the policy.
            with_retries(policy, observer, "progress", || reporter.progress(body)).await
        };
        let (logs_sent, progress_sent) =
            Box::pin(async { tokio::join!(send_logs, send_progress) }).await;
        fenced(&logs_sent, abandoned);
        fenced(&progress_sent, abandoned);
        if abandoned.is_cancelled() {
            return false;
        }
        logs.clear();
        text = 0;
        if matches!(last, Some(Report::Finish(_))) {
            // The final state releases every lock of the request (its entries go with
            // it, so a release sent now would come before them).
            locks.releases.clear();
        }
        Box::pin(send_locks(
            reporter, policy, observer, request_id, abandoned, &mut locks,
        ))
        .await;
        if abandoned.is_cancelled() {
            return false;
        }
        if matches!(last, Some(Report::Finish(_) | Report::Suspend(_))) {
            Box::pin(flusher.finish()).await;
        }
        match Box::pin(send_end(
            reporter,
            policy,
            observer,
            request_id,
            abandoned,
            last.take(),
        ))
        .await
        {
            End::Abandoned => return false,
            End::SuspendFailed => suspend_failed = true,
            End::Sent => {}
        }
    }
    suspend_failed
}

/// Sends a round's lock reports: the releases (after the round's entries, which were
/// sent), then the asks, each answered to the job that waits on it.
async fn send_locks(
    reporter: &Arc<dyn Reporter>,
    policy: &RetryPolicy,
    observer: Option<&dyn Observer>,
    request_id: &str,
    abandoned: &CancellationToken,
    locks: &mut LockReports,
) {
    for job_id in locks.releases.drain(..) {
        let res = with_retries(policy, observer, "a job's lock release", || {
            reporter.release_job_locks(request_id, &job_id)
        })
        .await;
        fenced(&res, abandoned);
        if abandoned.is_cancelled() {
            return;
        }
    }
    for (take, answer) in locks.takes.drain(..) {
        let taken = std::sync::Mutex::new(None);
        let res = with_retries(policy, observer, "a job's locks", || async {
            let answer = reporter.take_job_locks(request_id, &take).await?;
            *taken.lock().unwrap_or_else(|p| p.into_inner()) = Some(answer);
            Ok(())
        })
        .await;
        let taken = taken.into_inner().unwrap_or_else(|p| p.into_inner());
        fenced(&res, abandoned);
        if abandoned.is_cancelled() {
            return;
        }
        let _ = answer.send(match (res, taken) {
            (Ok(()), Some(taken)) => Ok(taken),
            (Err(err), _) => Err(err.message),
            (Ok(()), None) => Err("no answer".to_owned()),
        });
    }
}

/// How sending a chain's end went.
enum End {
    Sent,
    /// The runner was fenced out meanwhile.
    Abandoned,
    /// The suspended chain could not be handed back: the request was failed instead.
    SuspendFailed,
}

/// Sends a chain's end, if `last` is one: its final state, or its suspended chain (and,
/// when that cannot be handed back, a final state that fails the request).
async fn send_end(
    reporter: &Arc<dyn Reporter>,
    policy: &RetryPolicy,
    observer: Option<&dyn Observer>,
    request_id: &str,
    abandoned: &CancellationToken,
    last: Option<Report>,
) -> End {
    match last {
        Some(Report::Finish(finish)) => {
            let res =
                with_retries(policy, observer, "final state", || reporter.finish(&finish)).await;
            fenced(&res, abandoned);
        }
        Some(Report::Suspend(suspended)) => {
            let res = with_retries(policy, observer, "suspended chain", || {
                reporter.suspend(&suspended)
            })
            .await;
            fenced(&res, abandoned);
            if abandoned.is_cancelled() {
                return End::Abandoned;
            }
            if res.is_err() {
                let finish = FinishRequest {
                    request_id: request_id.to_owned(),
                    state: State::Fail,
                    finished_at: chrono::Utc::now(),
                    finished_jobs: suspended.job_chain.finished_jobs,
                    error: format!(
                        "the job runner shut down and could not hand the chain back: {}",
                        res.as_ref().err().map_or("", |err| err.message.as_str())
                    ),
                    job_logs: Vec::new(),
                };
                let res =
                    with_retries(policy, observer, "final state", || reporter.finish(&finish))
                        .await;
                fenced(&res, abandoned);
                return End::SuspendFailed;
            }
        }
        _ => {}
    }
    End::Sent
}
