//! The traverser: one task that owns a chain's state and reacts to events — a job's
//! tries ended, a sequence-retry wait ended, a command arrived — until nothing can run.
//!
//! Every task it spawns (job runners, retry timers) is observed: it runs under
//! `catch_unwind` and its end, whether its output or a panic, is sent to the traverser as
//! an event, so a runner that panics outside the job's own code is a failed try, never a
//! chain that waits forever. (A `JoinSet` would do the same at a higher cost per task:
//! the one measurement is in BENCHMARKS.md, "re-measured after the code-health changes
//! (issue #10)".)

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures_util::FutureExt as _;
use job::Factory;
use proto::{FinishRequest, JobArgs, JobLog, JobStatus, State};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::{AbortHandle, JoinHandle};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::output::Hub;
use crate::reporter::{self, Report, Reporter};
use crate::runner::{self, Dispatch, JobDone, Live};
use crate::state::{Chain, JobIdx, Seq};
use crate::{Command, Final, Handle, Options, StopError};

/// How a task of the traverser ended. Each task sends exactly one, so the event channel
/// never holds more than there are tasks (at most one per job of the chain, and one per
/// sequence waiting to retry).
#[derive(Debug)]
pub(crate) enum Event {
    Done(JobDone),
    /// A sequence's retry wait ended: start its first job again.
    RetryWaitOver(Seq),
    /// A job's runner panicked outside the job's own calls (its message).
    RunnerPanicked(JobIdx, String),
    /// A sequence's run (the try given) reached its `sequenceTimeout`.
    SequenceTimedOut(Seq, u32),
}

/// Reports queued for the delivery task at most. Runners wait when it is full (so a slow
/// Request Manager slows a chain's jobs instead of growing memory); the traverser never
/// waits inside its loop: a progress count it cannot queue is dropped, since a later
/// count or the final state carries it. Room for a whole call's entries
/// (`reporter::MAX_BATCH`) and a few turns more, so that the next call is ready when one
/// returns.
pub(crate) const REPORT_QUEUE: usize = 5120;

/// Jobs the traverser starts in one turn of its loop at most; the rest of a large
/// fan-out's runnable jobs wait in `deferred` and start in the next turns, between which
/// the loop takes the ends of those that ran (so that a 100,000-job fan-out of short
/// jobs holds a few thousand tasks at a time, not 100,000). It also starts none while
/// the report queue has less room than this: a job's end is at least one report, and a
/// runner that waits for room holds its task.
pub(crate) const START_CHUNK: usize = 256;

/// What woke the event loop.
enum Wake {
    Event(Option<Event>),
    Command(Option<Command>),
    Deadline,
    Abandoned,
    /// The report queue has room for the backlog (false: the delivery task is gone).
    Room(bool),
    /// Jobs wait in `deferred` and may start now.
    Deferred,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Running,
    Stopping,
    Suspending,
    /// This runner no longer owns the request: stop the jobs, report nothing.
    Abandoning,
}

/// A job being run.
struct Active {
    live: Live,
    /// When its runner was created (Unix ns); spans all its tries.
    started_at: i64,
    task: AbortHandle,
}

struct Traverser {
    request_id: Arc<str>,
    chain: Chain,
    factory: Arc<dyn Factory>,
    options: Options,
    mode: Mode,
    /// The jobs running now (every job of a wide chain at once: a fast hash of indices).
    running: HashMap<JobIdx, Active, foldhash::fast::RandomState>,
    /// Sequence start jobs waiting out their `sequenceRetryWait`.
    retry_waits: HashMap<Seq, AbortHandle>,
    /// Where observed tasks send their end.
    events_tx: mpsc::UnboundedSender<Event>,
    /// Sequences to reset for a retry once none of their jobs runs any more.
    retrying: HashSet<Seq>,
    /// Cancels every job (stop, suspend).
    cancel_all: CancellationToken,
    /// Per sequence (by start job), a child of its enclosing sequence's token: cancelling
    /// it stops the jobs of that sequence and of the sequences inside it. One token per
    /// sequence rather than per job keeps a fan-out of thousands of jobs light.
    sequence_cancel: HashMap<Seq, CancellationToken>,
    reports: mpsc::Sender<Report>,
    /// Live output of the running tries.
    output: Arc<Hub>,
    /// Job log entries of the traverser's own (abandoned or panicked tries) waiting for
    /// room in the report queue; at most one per job the traverser gave up on.
    backlog: std::collections::VecDeque<Report>,
    stop_waiters: Vec<oneshot::Sender<Result<(), StopError>>>,
    deadline: Option<tokio::time::Instant>,
    /// Cancelled when the chain is abandoned (by its handle, or by the delivery task when
    /// a report was refused as fenced).
    abandoned: CancellationToken,
    /// The timers of running sequences that have a `sequenceTimeout`.
    sequence_timers: HashMap<Seq, AbortHandle>,
    /// Sequences past their timeout, with why, until they are reset for a retry: nothing
    /// in them starts, and their jobs' ends count toward their own retry.
    timed_out: HashMap<Seq, String>,
    /// Shared with runners: the jobs stopped because their sequence timed out, and why.
    stop_reasons: runner::StopReasons,
    /// Paused: nothing new starts; the jobs that became runnable wait in `held`.
    paused: bool,
    held: std::collections::BTreeSet<JobIdx>,
    /// Runnable jobs not started yet, in order: past `START_CHUNK` in one turn, or while
    /// the report queue is nearly full (see [`START_CHUNK`]). They are PENDING; a stop or
    /// suspend leaves them so.
    deferred: std::collections::VecDeque<JobIdx>,
    /// Jobs started in this turn of the loop.
    started_this_turn: usize,
    /// The chain's span, which its job tasks run in.
    span: tracing::Span,
    /// Per running element that is one job of a node that stops its elements past its
    /// budget: the job's own cancel token.
    element_cancel: HashMap<JobIdx, CancellationToken>,
}

pub(crate) fn spawn(
    chain: Chain,
    factory: Arc<dyn Factory>,
    reporter: Arc<dyn Reporter>,
    options: Options,
) -> Handle {
    let (commands_tx, commands_rx) = mpsc::unbounded_channel();
    let (reports_tx, reports_rx) = mpsc::channel(REPORT_QUEUE);
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let (done_tx, done_rx) = watch::channel(None);
    let request_id: Arc<str> = Arc::from(chain.request_id.as_str());
    let output = Arc::new(Hub::new(chain.jobs.clone(), options.secrets.clone()));
    let abandoned = CancellationToken::new();
    // The chain's span: every line its tasks log (the traverser's, the delivery's, each
    // job's) carries its request.
    let span = tracing::info_span!("chain", request_id = %chain.request_id);
    let delivery = tokio::spawn(
        reporter::deliver(
            reporter,
            options.retry.clone(),
            options.observer.clone(),
            chain.request_id.clone(),
            Arc::clone(&output),
            reports_rx,
            abandoned.clone(),
        )
        .instrument(span.clone()),
    );
    let paused = options.paused;
    let traverser = Box::new(Traverser {
        request_id: Arc::clone(&request_id),
        chain,
        factory,
        options,
        mode: Mode::Running,
        running: HashMap::default(),
        retry_waits: HashMap::new(),
        events_tx,
        retrying: HashSet::new(),
        cancel_all: CancellationToken::new(),
        sequence_cancel: HashMap::new(),
        reports: reports_tx,
        output,
        backlog: Default::default(),
        stop_waiters: Vec::new(),
        deadline: None,
        abandoned: abandoned.clone(),
        sequence_timers: HashMap::new(),
        timed_out: HashMap::new(),
        stop_reasons: Default::default(),
        paused,
        held: Default::default(),
        deferred: Default::default(),
        started_this_turn: 0,
        span: span.clone(),
        element_cancel: HashMap::new(),
    });
    // Boxed, so that the task's future holds the traverser once (an async fn's future
    // keeps its argument and the body's binding of it apart: 3.4 KiB a chain by value,
    // 0.7 KiB and the traverser's 1.4 KiB boxed).
    tokio::spawn(
        traverser
            .run(events_rx, commands_rx, delivery, done_tx)
            .instrument(span),
    );
    Handle {
        request_id,
        commands: commands_tx,
        done: done_rx,
        abandoned,
    }
}

mod budgets;
mod events;
mod sequences;

impl Traverser {
    async fn run(
        mut self: Box<Self>,
        mut events: mpsc::UnboundedReceiver<Event>,
        mut commands: mpsc::UnboundedReceiver<Command>,
        delivery: JoinHandle<bool>,
        done: watch::Sender<Option<Final>>,
    ) {
        for idx in self.chain.indices() {
            if self.chain.is_runnable(idx) {
                self.dispatch(idx);
            }
        }
        let mut commands_open = true;
        while !self.is_done() {
            self.started_this_turn = 0;
            let deadline = self.deadline;
            let abandoning = self.mode == Mode::Abandoning;
            let abandoned = self.abandoned.clone();
            let deferred = !self.deferred.is_empty();
            let room = self.has_room();
            let wake = tokio::select! {
                () = abandoned.cancelled(), if !abandoning => Wake::Abandoned,
                event = events.recv() => Wake::Event(event),
                command = commands.recv(), if commands_open => Wake::Command(command),
                () = sleep_until(deadline), if deadline.is_some() => Wake::Deadline,
                permit = self.reports.reserve(), if !self.backlog.is_empty() => Wake::Room(permit.is_ok()),
                // Room for a turn's starts, not one report (which would wake the loop
                // for each report delivered).
                permits = self.reports.reserve_many(START_CHUNK), if self.backlog.is_empty() && deferred && !room => Wake::Room(permits.is_ok()),
                () = std::future::ready(()), if deferred && room => Wake::Deferred,
            };
            match wake {
                Wake::Deferred => {
                    while self.started_this_turn < START_CHUNK
                        && self.has_room()
                        && let Some(idx) = self.deferred.pop_front()
                    {
                        self.dispatch_now(idx);
                    }
                    // The jobs just started get to run (and fill the report queue)
                    // before the next turn decides whether more may start.
                    tokio::task::yield_now().await;
                }
                Wake::Event(Some(event)) => self.on_event(event),
                // The traverser holds a sender, so the channel never closes under it.
                Wake::Event(None) => {}
                Wake::Command(Some(command)) => self.on_command(command),
                Wake::Command(None) => commands_open = false,
                Wake::Deadline => self.abandon_running(),
                Wake::Abandoned => self.wind_down(Mode::Abandoning),
                // The permit was given back; nobody else sends while the loop runs, except
                // runners, so the room may be taken again: then it waits once more.
                Wake::Room(true) => {
                    while let Some(report) = self.backlog.pop_front() {
                        if let Err(err) = self.reports.try_send(report) {
                            match err {
                                mpsc::error::TrySendError::Full(report) => {
                                    self.backlog.push_front(report);
                                }
                                mpsc::error::TrySendError::Closed(_) => self.backlog.clear(),
                            }
                            break;
                        }
                    }
                }
                // The delivery task is gone: nothing more can be reported, so nothing more
                // starts (the chain ends with what ran).
                Wake::Room(false) => {
                    self.backlog.clear();
                    self.deferred.clear();
                }
            }
        }
        let final_state = self.finalize().await;
        let Traverser {
            reports,
            stop_waiters,
            ..
        } = *self;
        // Closing the channel lets the delivery task finish once everything is sent.
        drop(reports);
        let suspend_failed = delivery.await.unwrap_or(false);
        let final_state = if suspend_failed {
            Final {
                state: State::Fail,
                ..final_state
            }
        } else {
            final_state
        };
        let _ = done.send(Some(final_state));
        for waiter in stop_waiters {
            let _ = waiter.send(Ok(()));
        }
        // Commands that arrive from now on find the channel closed.
        drop(commands);
    }

    fn is_done(&self) -> bool {
        self.running.is_empty()
            && self.retry_waits.is_empty()
            && self.retrying.is_empty()
            && self.held.is_empty()
            && self.deferred.is_empty()
    }

    /// Whether the report queue has room for a turn's starts (see [`START_CHUNK`]).
    fn has_room(&self) -> bool {
        self.reports.capacity() >= START_CHUNK
    }

    fn on_command(&mut self, command: Command) {
        match command {
            Command::Running { limit, reply } => {
                let _ = reply.send((self.running_status(limit), self.running.len()));
            }
            Command::Stop(reply) => match self.mode {
                Mode::Suspending => {
                    let _ = reply.send(Err(StopError::ShuttingDown));
                }
                Mode::Abandoning => {
                    let _ = reply.send(Err(StopError::Abandoned));
                }
                Mode::Stopping => self.stop_waiters.push(reply),
                Mode::Running => {
                    self.stop_waiters.push(reply);
                    self.wind_down(Mode::Stopping);
                }
            },
            Command::Suspend => {
                if self.mode == Mode::Running {
                    self.wind_down(Mode::Suspending);
                }
            }
            Command::Pause(paused) => {
                self.paused = paused;
                if !paused {
                    for idx in std::mem::take(&mut self.held) {
                        self.dispatch(idx);
                    }
                }
            }
        }
    }

    /// Stop or suspend: cancel every running job, start nothing new.
    fn wind_down(&mut self, mode: Mode) {
        self.mode = mode;
        // Jobs held by a pause or deferred never started: they stay PENDING.
        self.held.clear();
        self.deferred.clear();
        self.deadline = Some(tokio::time::Instant::now() + self.options.stop_timeout);
        self.cancel_all.cancel();
        // A sequence waiting to restart stays PENDING with its tries as they were.
        for (_, wait) in self.retry_waits.drain() {
            wait.abort();
        }
        for (_, timer) in self.sequence_timers.drain() {
            timer.abort();
        }
        if mode == Mode::Stopping || mode == Mode::Abandoning {
            self.retrying.clear();
        } else {
            // Sequences being reset for a retry are reset now if nothing of theirs runs,
            // so that a resumed chain restarts them.
            let retrying: Vec<Seq> = self.retrying.iter().copied().collect();
            for sequence in retrying {
                self.reset_if_idle(sequence);
            }
        }
    }

    /// Jobs that did not return within the stop timeout are abandoned as failed.
    fn abandon_running(&mut self) {
        self.deadline = None;
        let now = runner::now_nanos();
        let error = format!(
            "job did not stop within {} of being asked to; abandoned",
            proto::duration::format(self.options.stop_timeout)
        );
        let running: Vec<(JobIdx, Active)> = self.running.drain().collect();
        for (idx, active) in running {
            active.task.abort();
            self.observe_job_end();
            if self.mode != Mode::Abandoning {
                self.fail_lost_try(idx, &active, now, &error);
            }
        }
        self.retrying.clear();
    }

    /// Records the try a job's runner was on as failed (the runner was abandoned or
    /// panicked, so it will not log it) and fails the job. A runner that had logged its
    /// try already gets the next try number, so that the failure is in the log too.
    fn fail_lost_try(&mut self, idx: JobIdx, active: &Active, now: i64, error: &str) {
        let mut try_no = active.live.try_no.load(Ordering::Relaxed).max(1);
        if active.live.logged.load(Ordering::Relaxed) >= try_no {
            try_no += 1;
        }
        let job = &self.chain.jobs[idx];
        self.queue_report(Report::Log(
            Box::new(JobLog {
                request_id: self.chain.request_id.clone(),
                job_id: job.id.clone(),
                r#try: try_no,
                name: job.name.to_string(),
                job_type: job.job_type.to_string(),
                started_at: active.started_at,
                finished_at: now,
                state: State::Fail,
                exit: 1,
                error: error.to_owned(),
                stdout: String::new(),
                stderr: String::new(),
            }),
            false,
        ));
        self.chain.total_tries[idx] = self.chain.total_tries[idx].max(try_no);
        self.chain.set_state(idx, State::Fail);
    }

    /// Queues a report from inside the event loop without waiting. The queue is only
    /// full while the Request Manager is slow; then a progress count is dropped (a later
    /// one, or the final state, carries it) and a job log entry waits in `backlog`, which
    /// the loop feeds to the queue in order as room frees up.
    fn observe_job_end(&self) {
        if let Some(observer) = &self.options.observer {
            observer.job_ended();
        }
    }

    fn queue_report(&mut self, report: Report) {
        if !self.backlog.is_empty() {
            if !matches!(report, Report::Progress(_)) {
                self.backlog.push_back(report);
            }
            return;
        }
        match self.reports.try_send(report) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
            Err(mpsc::error::TrySendError::Full(Report::Progress(_))) => {}
            Err(mpsc::error::TrySendError::Full(report)) => self.backlog.push_back(report),
        }
    }

    /// Spawns a task whose end, output or panic, comes back as an event.
    fn spawn_observed(
        &self,
        task: impl Future<Output = Event> + Send + 'static,
        on_panic: impl FnOnce(String) -> Event + Send + 'static,
    ) -> AbortHandle {
        let events = self.events_tx.clone();
        // Combinators rather than an `async` block, which would hold a second copy of
        // `task` (a fan-out keeps thousands of these alive at once).
        let observed = std::panic::AssertUnwindSafe(task)
            .catch_unwind()
            .map(move |ended| {
                let event = match ended {
                    Ok(event) => event,
                    Err(payload) => on_panic(runner::panic_text(&*payload)),
                };
                let _ = events.send(event);
            });
        tokio::spawn(observed.instrument(self.span.clone())).abort_handle()
    }

    /// A job's runner panicked outside the job's own calls: its try fails.
    fn on_runner_panic(&mut self, idx: JobIdx, panic: &str) {
        let Some(active) = self.running.remove(&idx) else {
            return;
        };
        self.observe_job_end();
        let error = format!("the job's runner panicked: {panic}");
        tracing::error!(job_id = %self.chain.jobs[idx].id, error, "job runner panicked");
        self.fail_lost_try(idx, &active, runner::now_nanos(), &error);
        // The job's data went with its runner.
        self.chain.data[idx] = JobArgs::new();
        self.after_job_end(idx, State::Fail);
    }

    /// The running jobs, oldest first (then by id), at most `limit` of them: only those
    /// are described (a fan-out may have 100,000 running).
    fn running_status(&self, limit: Option<usize>) -> Vec<JobStatus> {
        let mut order: Vec<(i64, &str, JobIdx)> = self
            .running
            .iter()
            .map(|(&idx, active)| (active.started_at, self.chain.jobs[idx].id.as_str(), idx))
            .collect();
        let limit = limit.unwrap_or(order.len()).min(order.len());
        if limit < order.len() {
            order.select_nth_unstable(limit);
            order.truncate(limit);
        }
        order.sort_unstable();
        order
            .into_iter()
            .map(|(started_at, _, idx)| {
                let job = &self.chain.jobs[idx];
                let live = &self.running[&idx].live;
                let mut status = live.status.get();
                if live.sleeping.load(Ordering::Relaxed) {
                    status = format!("(retry sleep) {status}");
                }
                JobStatus {
                    request_id: self.chain.request_id.clone(),
                    job_id: job.id.clone(),
                    job_type: job.job_type.to_string(),
                    name: job.name.to_string(),
                    started_at,
                    state: self.chain.state(idx),
                    status,
                    r#try: live.try_no.load(Ordering::Relaxed),
                    each: job.each.clone(),
                }
            })
            .collect()
    }

    /// Decides the chain's final state and hands it (or the suspended chain) to the
    /// delivery task.
    async fn finalize(&mut self) -> Final {
        for (_, timer) in self.sequence_timers.drain() {
            timer.abort();
        }
        let chain = &self.chain;
        if self.mode == Mode::Abandoning || self.abandoned.is_cancelled() {
            // Another runner owns the request now: nothing more is said about it.
            tracing::warn!("chain abandoned: this job runner no longer owns the request");
            self.backlog.clear();
            return Final {
                state: State::Unknown,
                finished_jobs: chain.finished_jobs,
            };
        }
        // Jobs of elements that failed within their node's budget neither complete nor
        // fail the chain.
        let budgets = &chain.budgets;
        let all_complete = chain.finished_jobs as usize == chain.len()
            || (!budgets.is_empty()
                && chain
                    .indices()
                    .all(|idx| chain.state(idx) == State::Complete || budgets.is_forgiven(idx)));
        let failed = |idx: JobIdx| {
            matches!(chain.state(idx), State::Fail | State::Unknown) && !budgets.is_forgiven(idx)
        };
        let failed_for_good = chain
            .indices()
            .any(|idx| failed(idx) && !chain.can_retry(chain.sequence_of[idx]));
        let any_failed = chain.indices().any(failed);
        let state = match self.mode {
            _ if all_complete => State::Complete,
            Mode::Running => State::Fail,
            Mode::Stopping if failed_for_good => State::Fail,
            Mode::Stopping => State::Stopped,
            Mode::Suspending if any_failed => State::Fail,
            Mode::Suspending => State::Suspended,
            Mode::Abandoning => unreachable!("returned above"),
        };
        let finished_jobs = chain.finished_jobs;
        let report = if state == State::Suspended {
            Report::Suspend(Box::new(chain.suspended()))
        } else {
            // A deadline that passed is the request's reason; the jobs' entries say theirs.
            let error = if state == State::Fail {
                self.timed_out
                    .iter()
                    .find(|(sequence, _)| chain.parent(**sequence).is_none())
                    .map(|(_, reason)| reason.trim_end_matches("; the job was stopped").to_owned())
                    .or_else(|| budgets.exceeded_error(|piece| chain.element_name(piece)))
                    .unwrap_or_default()
            } else {
                String::new()
            };
            Report::Finish(Box::new(FinishRequest {
                request_id: chain.request_id.clone(),
                state,
                finished_at: chrono::Utc::now(),
                finished_jobs,
                error,
                job_logs: Vec::new(),
            }))
        };
        // The loop is over: waiting for room in the queue blocks nothing.
        for earlier in std::mem::take(&mut self.backlog) {
            let _ = self.reports.send(earlier).await;
        }
        let _ = self.reports.send(report).await;
        tracing::debug!(state = %state, finished_jobs, "chain ended");
        Final {
            state,
            finished_jobs,
        }
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
