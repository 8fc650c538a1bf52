//! Runs one dispatched job: makes it from the chain, then runs its tries (job-level
//! retries, runner.md §5), sending a job log entry per try. Its end is the task's
//! output, which reaches the traverser as its task's one event; a panic anywhere in here is a
//! failed try (caught around the job's own code, or seen by the traverser as a panicked
//! task), never a lost one.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::FutureExt as _;
use futures_util::future::Either;
use job::{Factory, Job, JobId, Outcome, RunContext, Status};
use proto::{JobArgs, JobLog, State, TryStart};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::incoming::RunJob;
use crate::output::Hub;
use crate::reporter::Report;
use crate::state::JobIdx;

/// Unix nanoseconds now.
pub(crate) fn now_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// The end of a dispatched job: its final state and how its counters moved.
#[derive(Debug)]
pub(crate) struct JobDone {
    pub(crate) idx: JobIdx,
    pub(crate) state: State,
    pub(crate) data: JobArgs,
    /// Added to the job's latest-run tries (includes a try stopped in its retry wait).
    pub(crate) latest_tries: u32,
    /// Added to the job's total tries: tries that ran and were logged.
    pub(crate) total_tries: u32,
}

/// What a job's runner shares with the traverser while it runs, for running status.
pub(crate) type Live = Arc<LiveState>;

#[derive(Debug, Default)]
pub(crate) struct LiveState {
    pub(crate) status: Status,
    /// The try running now (its job log number).
    pub(crate) try_no: AtomicU32,
    /// Waiting between tries.
    pub(crate) sleeping: AtomicBool,
    /// The last try whose job log entry was queued (0: none yet).
    pub(crate) logged: AtomicU32,
}

/// Everything a runner needs; built by the traverser when it dispatches a job.
pub(crate) struct Dispatch {
    pub(crate) idx: JobIdx,
    pub(crate) request_id: Arc<str>,
    pub(crate) job: Arc<RunJob>,
    pub(crate) data: JobArgs,
    pub(crate) prev_latest: u32,
    pub(crate) prev_total: u32,
    /// The try count of the job's sequence when it was dispatched.
    pub(crate) sequence_try: u32,
    /// The job's `retryWait`, checked when the chain was accepted.
    pub(crate) retry_wait: Duration,
    /// The job's `timeout`: the bound on each try.
    pub(crate) timeout: Option<Duration>,
    pub(crate) factory: Arc<dyn Factory>,
    pub(crate) cancel: CancellationToken,
    pub(crate) live: Live,
    pub(crate) reports: mpsc::Sender<Report>,
    pub(crate) output: Arc<Hub>,
    /// Why the traverser stopped a job when it was not a stop: a sequence's timeout. A
    /// try cancelled for such a reason fails with it, and the job is not tried again.
    pub(crate) stop_reasons: StopReasons,
}

/// Per job, why it was stopped when that was a failure (a sequence timed out).
pub(crate) type StopReasons = Arc<std::sync::Mutex<std::collections::HashMap<JobIdx, String>>>;

/// A try that ended while its job was cancelled: FAIL with the traverser's reason if it
/// gave one (returns true: the job is not tried again), else STOPPED unless it
/// completed. A plain function, so that nothing of it is part of every job's future.
fn settle_cancelled(
    mut outcome: Outcome,
    cancelled: bool,
    reasons: &StopReasons,
    idx: JobIdx,
) -> (Outcome, bool) {
    if !cancelled {
        return (outcome, false);
    }
    let reason = stop_reason(reasons, idx);
    let failed = reason.is_some();
    match reason {
        Some(reason) if outcome.state != State::Complete => {
            outcome.state = State::Fail;
            outcome.exit = if outcome.exit == 0 { 1 } else { outcome.exit };
            outcome.error = reason;
        }
        None if !matches!(outcome.state, State::Stopped | State::Complete) => {
            outcome.state = State::Stopped;
        }
        _ => {}
    }
    (outcome, failed)
}

/// The failure a cancelled job's try is, if the traverser gave a reason.
fn stop_reason(reasons: &StopReasons, idx: JobIdx) -> Option<String> {
    reasons
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .get(&idx)
        .cloned()
}

fn make(factory: &dyn Factory, request_id: &str, job: &RunJob) -> Result<Box<dyn Job>, job::Error> {
    let id = JobId {
        job_type: job.job_type.to_string(),
        name: job.name.to_string(),
        id: job.id.clone(),
        request_id: request_id.to_owned(),
    };
    // A factory or a job that panics here is a failed try like a panic in `run`.
    std::panic::catch_unwind(AssertUnwindSafe(|| {
        let mut made = factory.make(&id)?;
        made.deserialize(&job.bytes)?;
        made.set_args(&job.args);
        Ok(made)
    }))
    .unwrap_or_else(|payload| {
        Err(job::Error::Create(format!(
            "panic while making the job: {}",
            panic_text(&*payload)
        )))
    })
}

/// Sends a report, waiting while the delivery queue is full. Boxed, so that what the send
/// holds while it waits is not part of every job's future (a fan-out has thousands).
fn send(
    reports: &mpsc::Sender<Report>,
    report: Report,
) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>> {
    Box::pin(async move {
        let _ = reports.send(report).await;
    })
}

/// How a job's wait for its locks ended.
enum LocksWait {
    /// Every lock is held (or the job has none).
    Held,
    /// The job was stopped while it waited (it left the queues).
    Stopped,
    /// The job fails without running: a lock taken with `when_taken: skip`, or the
    /// Request Manager could not be asked. Its one failed try, `try_no`, was logged.
    Failed,
}

/// The longest wait between two asks for a job's locks.
const LOCKS_ASK_MAX: Duration = Duration::from_secs(2);

/// Takes the job's locks before its first try (issue #34), asking again while they are
/// taken (from 100 ms, doubling to [`LOCKS_ASK_MAX`]), the reason in its status line:
/// the job waits without running, and a stop ends the wait. Boxed like [`send`].
fn take_locks<'a>(
    reports: &'a mpsc::Sender<Report>,
    request_id: &'a str,
    job: &'a RunJob,
    live: &'a Live,
    cancel: &'a CancellationToken,
    try_no: u32,
) -> std::pin::Pin<Box<dyn Future<Output = LocksWait> + Send + 'a>> {
    Box::pin(async move {
        let failed = |error: String| async move {
            // One failed try that says why, not tried again.
            let now = now_nanos();
            live.try_no.store(try_no, Ordering::Relaxed);
            let entry = JobLog {
                request_id: request_id.to_owned(),
                job_id: job.id.clone(),
                r#try: try_no,
                name: job.name.to_string(),
                job_type: job.job_type.to_string(),
                started_at: now,
                finished_at: now,
                state: State::Fail,
                exit: 1,
                error,
                stdout: String::new(),
                stderr: String::new(),
            };
            let _ = reports.send(Report::Log(Box::new(entry), false)).await;
            live.logged.store(try_no, Ordering::Relaxed);
            LocksWait::Failed
        };
        let Some(locks) = job.locks.as_deref().filter(|l| !l.take.is_empty()) else {
            return LocksWait::Held;
        };
        let skip = locks.take.iter().any(|lock| lock.when_taken == "skip");
        let ask = proto::TakeJobLocks {
            job_id: job.id.clone(),
            locks: locks.take.clone(),
            asked_since: now_nanos(),
        };
        let mut wait = Duration::from_millis(100);
        loop {
            let (answer, taken) = oneshot::channel();
            if reports
                .send(Report::Take(Box::new(ask.clone()), answer))
                .await
                .is_err()
            {
                return LocksWait::Stopped;
            }
            let taken = tokio::select! {
                taken = taken => taken,
                () = cancel.cancelled() => return LocksWait::Stopped,
            };
            match taken {
                // The chain was abandoned: nothing more is asked.
                Err(_) => return LocksWait::Stopped,
                Ok(Err(err)) => return failed(format!("could not take its locks: {err}")).await,
                Ok(Ok(taken)) if taken.granted => {
                    live.status.set("");
                    return LocksWait::Held;
                }
                Ok(Ok(taken)) if skip => return failed(taken.waiting).await,
                Ok(Ok(taken)) => live.status.set(taken.waiting),
            }
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = cancel.cancelled() => return LocksWait::Stopped,
            }
            wait = (wait * 2).min(LOCKS_ASK_MAX);
        }
    })
}

/// Releases, after the job's entries, what it holds (or waits for), and, at a
/// sequence's last job's completion, the sequence's locks. Boxed like [`send`].
fn release_locks<'a>(
    reports: &'a mpsc::Sender<Report>,
    job: &'a RunJob,
    state: State,
) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
    Box::pin(async move {
        let Some(locks) = job.locks.as_deref() else {
            return;
        };
        if !locks.take.is_empty() && locks.take.iter().all(|lock| lock.until.is_empty()) {
            let _ = reports.send(Report::Release(job.id.clone())).await;
        }
        if !locks.releases_of.is_empty() && state == State::Complete {
            let _ = reports
                .send(Report::Release(locks.releases_of.clone()))
                .await;
        }
    })
}

/// Reports that a try begins and waits until the start was delivered. False if the chain
/// was abandoned meanwhile (the try must not run). Boxed like [`send`].
fn report_start(
    reports: &mpsc::Sender<Report>,
    start: TryStart,
) -> std::pin::Pin<Box<dyn Future<Output = StartStored> + Send + '_>> {
    Box::pin(async move {
        let (ack, stored) = oneshot::channel();
        if reports
            .send(Report::Start(Box::new(start), ack))
            .await
            .is_err()
        {
            return StartStored::Abandoned;
        }
        match stored.await {
            Ok(Ok(())) => StartStored::Yes,
            Ok(Err(err)) => StartStored::Failed(err),
            Err(_) => StartStored::Abandoned,
        }
    })
}

/// Whether a try's start was stored before it runs.
enum StartStored {
    Yes,
    /// The chain was abandoned (its runner no longer owns it) before.
    Abandoned,
    /// The Request Manager did not take it (the error): the try does not run.
    Failed(String),
}

pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "non-text panic payload".to_owned()
    }
}

/// One try bounded by `timeout`: past it, the try's own token is cancelled (as a stop
/// is), the job's end is awaited, and the try is FAIL with an error that says it timed
/// out after how long (unless the chain was stopped meanwhile: then it is the stop's).
async fn run_timed(
    job: &mut dyn Job,
    data: &mut JobArgs,
    mut ctx: RunContext,
    timeout: Duration,
) -> std::thread::Result<Outcome> {
    let chain_cancel = ctx.cancel.clone();
    let try_cancel = chain_cancel.child_token();
    ctx.cancel = try_cancel.clone();
    let run = AssertUnwindSafe(job.run(data, ctx)).catch_unwind();
    tokio::pin!(run);
    tokio::select! {
        ended = &mut run => ended,
        () = tokio::time::sleep(timeout) => {
            try_cancel.cancel();
            let outcome = run.await?;
            if chain_cancel.is_cancelled() {
                return Ok(outcome);
            }
            Ok(Outcome {
                state: State::Fail,
                exit: if outcome.exit == 0 { 1 } else { outcome.exit },
                error: timed_out_error(timeout, &outcome.error),
                ..outcome
            })
        }
    }
}

/// The error of a try stopped at its timeout, with what the job said as it stopped.
fn timed_out_error(timeout: Duration, said: &str) -> String {
    let mut error = format!(
        "timed out after {} and was stopped",
        proto::duration::format(timeout)
    );
    if !said.is_empty() && said != "stopped" {
        error.push_str(": ");
        error.push_str(said);
    }
    error
}

/// Runs a dispatched job. The dispatch is boxed so that each job's task stays small
/// (a fan-out starts thousands of them at once).
// Long on purpose: this future is the task of every job of a chain (a fan-out starts
// thousands at once). A try's steps share its locals across awaits; async helpers would
// each be a future nested in every job's task, which the `size` test below keeps small.
pub(crate) async fn run(mut dispatch: Box<Dispatch>) -> JobDone {
    let Dispatch {
        idx,
        ref request_id,
        ref job,
        ref mut data,
        prev_latest,
        prev_total,
        sequence_try,
        retry_wait,
        timeout,
        ref factory,
        ref cancel,
        ref live,
        ref reports,
        ref output,
        ref stop_reasons,
    } = *dispatch;
    let log = |try_no: u32, started_at: i64, finished_at: i64, outcome: Outcome| JobLog {
        request_id: request_id.to_string(),
        job_id: job.id.clone(),
        r#try: try_no,
        name: job.name.to_string(),
        job_type: job.job_type.to_string(),
        started_at,
        finished_at,
        state: outcome.state,
        exit: outcome.exit,
        // What a try printed never shows a secret arg's value (issue #33).
        error: output.mask(outcome.error),
        stdout: output.mask(outcome.stdout),
        stderr: output.mask(outcome.stderr),
    };
    let max_tries = job.retry.saturating_add(1);
    let mut latest = prev_latest;
    let mut total = prev_total;
    let mut made: Option<Box<dyn Job>> = None;
    let mut state = State::Fail;
    let mut stopped_in_wait = false;
    let runs = match take_locks(reports, request_id, job, live, cancel, total + 1).await {
        LocksWait::Held => true,
        LocksWait::Stopped => {
            state = State::Stopped;
            false
        }
        LocksWait::Failed => {
            latest += 1;
            total += 1;
            false
        }
    };
    while runs && latest < max_tries {
        if cancel.is_cancelled() {
            state = if stop_reason(stop_reasons, idx).is_some() {
                State::Fail
            } else {
                State::Stopped
            };
            break;
        }
        let try_no = total.saturating_add(1);
        live.try_no.store(try_no, Ordering::Relaxed);
        let started_at = now_nanos();
        if made.is_none() {
            match make(&**factory, request_id, job) {
                Ok(job) => made = Some(job),
                Err(err) => {
                    // A try that could not even start: logged, so the numbers stay whole.
                    latest += 1;
                    total += 1;
                    let outcome = Outcome::failed(format!("problem creating job runner: {err}"));
                    let entry = log(try_no, started_at, now_nanos(), outcome);
                    send(reports, Report::Log(Box::new(entry), latest > 1)).await;
                    live.logged.store(try_no, Ordering::Relaxed);
                    state = State::Fail;
                    break;
                }
            }
        }
        let job_to_run = made.as_mut().expect("made above");
        // A job in a sequence's second run or later reports its start too (rarely: only
        // after a failure), so that a recovered chain knows the sequence's try count.
        let stored = if job_to_run.durable_start() || sequence_try > 1 {
            report_start(
                reports,
                TryStart {
                    request_id: request_id.to_string(),
                    job_id: job.id.clone(),
                    r#try: try_no,
                    run_try: latest.saturating_add(1),
                    sequence_try,
                    started_at,
                },
            )
            .await
        } else {
            StartStored::Yes
        };
        let outcome = match stored {
            StartStored::Abandoned => {
                // Abandoned before the start was stored: the try does not run.
                state = State::Stopped;
                break;
            }
            // Not run: a try whose start is not stored would run again unseen if this
            // runner were lost. It fails (the job's retries apply) saying why.
            StartStored::Failed(err) => Outcome::failed(format!(
                "not run: its start could not be stored ({err}); a try runs only once its start is"
            )),
            StartStored::Yes => {
                let ctx = RunContext {
                    cancel: cancel.clone(),
                    status: live.status.clone(),
                    output: output.output(idx, try_no),
                    secrets: output.secrets(),
                };
                // A timed try is boxed: only jobs with a timeout carry its timer.
                let try_run = match timeout {
                    None => {
                        Either::Left(AssertUnwindSafe(job_to_run.run(data, ctx)).catch_unwind())
                    }
                    Some(timeout) => {
                        Either::Right(Box::pin(run_timed(&mut **job_to_run, data, ctx, timeout)))
                    }
                };
                // The try's span: what the job logs carries its job and try (and, through
                // the chain's span, its request).
                let span = tracing::info_span!("try", job_id = %job.id, r#try = try_no);
                let outcome = match try_run.instrument(span).await {
                    Ok(outcome) => outcome,
                    Err(payload) => {
                        // The job may be half-changed: the next try makes it anew.
                        made = None;
                        Outcome::failed(format!("panic from job.Run: {}", panic_text(&*payload)))
                    }
                };
                output.close(idx, try_no);
                outcome
            }
        };
        latest += 1;
        total += 1;
        // By value: a borrowed outcome would be kept apart in every job's future.
        let (outcome, failed_for) =
            settle_cancelled(outcome, cancel.is_cancelled(), stop_reasons, idx);
        state = outcome.state;
        let entry = log(try_no, started_at, now_nanos(), outcome);
        send(reports, Report::Log(Box::new(entry), latest > 1)).await;
        live.logged.store(try_no, Ordering::Relaxed);
        if matches!(state, State::Complete | State::Stopped) || latest >= max_tries || failed_for {
            break;
        }
        live.sleeping.store(true, Ordering::Relaxed);
        // Boxed: the wait is rare, and keeping it out of this future keeps every job's
        // task small.
        let stopped = Box::pin(async {
            tokio::select! {
                () = tokio::time::sleep(retry_wait) => false,
                () = cancel.cancelled() => true,
            }
        })
        .await;
        live.sleeping.store(false, Ordering::Relaxed);
        if stopped {
            if stop_reason(stop_reasons, idx).is_some() {
                state = State::Fail;
            } else {
                state = State::Stopped;
                stopped_in_wait = true;
            }
            break;
        }
    }
    // What the job holds (or waits for) is released with its end, after its entries; a
    // sequence's locks with its last job's completion.
    if job.locks.is_some() {
        release_locks(reports, job, state).await;
    }
    // A try stopped in its wait counts toward the latest run, so that resuming (which
    // gives back the try a job was stopped on) restores the budget exactly.
    let latest_tries = latest - prev_latest + u32::from(stopped_in_wait);
    let data = std::mem::take(data);
    JobDone {
        idx,
        state,
        data,
        latest_tries,
        total_tries: total - prev_total,
    }
}

#[cfg(test)]
mod size {
    /// A fan-out starts thousands of runner tasks at once: their futures must stay small
    /// (BENCHMARKS.md's memory per job depends on it).
    #[test]
    fn a_runner_future_stays_small() {
        let (reports, _) = tokio::sync::mpsc::channel(1);
        let dispatch = super::Dispatch {
            idx: crate::state::JobIdx::default(),
            request_id: std::sync::Arc::from(""),
            job: std::sync::Arc::default(),
            data: Default::default(),
            prev_latest: 0,
            prev_total: 0,
            sequence_try: 0,
            retry_wait: std::time::Duration::ZERO,
            timeout: None,
            factory: std::sync::Arc::new(job::Registry::builtin()),
            cancel: Default::default(),
            live: Default::default(),
            reports,
            output: Default::default(),
            stop_reasons: Default::default(),
        };
        let future = super::run(Box::new(dispatch));
        let size = std::mem::size_of_val(&future);
        // 320 until a try whose start the Request Manager would not take stopped running
        // anyway (the refusal's text is held beside the try): 24 bytes a job; 344 until
        // a try's context held its request's secret args (issue #33): 8 bytes a job; 352
        // until each try ran in a span of its own (issue #49): 8 bytes a job.
        assert!(size <= 360, "runner future grew to {size} bytes");
    }
}
