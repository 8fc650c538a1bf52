//! Runs a job chain (runner.md): every runnable job at once, job retries, sequence
//! retries, `parallel` windows, stop, suspend and resume.
//!
//! The crate knows nothing of HTTP or SQL. It takes a chain in the runner's own form
//! ([`Incoming`], from a [`proto::JobChain`] or decoded straight from a hand-over's JSON;
//! [`Resumed`] to resume, from a [`proto::SuspendedJobChain`] or its JSON), a
//! [`job::Factory`] to make jobs and a
//! [`Reporter`] to send job log entries, progress, the final state and suspended chains.
//! One task owns a chain's state (the traverser in `traverser/`) and reacts to events
//! from a channel: a job's tries ended, a sequence-retry timer fired, a command (stop,
//! suspend, running status) arrived. Jobs run as their own tasks (`runner.rs`); reports
//! go through a delivery task (`reporter.rs`) that batches and retries them, so the event
//! loop never waits on the Reporter.
//!
//! Differences from Spin Cycle's traverser, all deliberate:
//! - a sequence retry first stops the sequence's jobs still running and waits for them,
//!   then resets the whole sequence (nested sequences' retry budgets included);
//! - a stop or suspend that arrives while no job runs (between jobs, in a retry wait)
//!   still reports the final state or the suspended chain;
//! - try numbers never skip or repeat, also for a job whose creation fails;
//! - `parallel` (on an expansion's begin job) is a sliding window;
//! - a job that panics is a failed try;
//! - a chain can be paused: nothing new starts until it is unpaused (Spindle's
//!   `spindle pause`).

mod budgets;
mod incoming;
mod output;
mod reporter;
mod runner;
mod state;
mod traverser;
mod validate;

use std::sync::Arc;
use std::time::Duration;

use job::Factory;
use proto::{JobStatus, State};
use tokio::sync::{mpsc, oneshot, watch};

pub use incoming::{Incoming, Resumed};
pub use reporter::{Observer, ReportError, ReportErrorKind, Reporter, RetryPolicy};
pub use validate::ValidationError;

/// Knobs of a chain run.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long stopped (or suspended) jobs have to return before they are abandoned and
    /// counted as failed.
    pub stop_timeout: Duration,
    /// How reports are retried when the Reporter fails transiently.
    pub retry: RetryPolicy,
    /// Told of jobs starting and ending, tries logged and deliveries (metrics, traces).
    pub observer: Option<Arc<dyn Observer>>,
    /// The chain starts paused: nothing runs until [`Handle::set_paused`] says otherwise.
    pub paused: bool,
    /// The request's secret args (issue #33), given to its jobs and masked in what
    /// they print.
    pub secrets: job::Secrets,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            stop_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            observer: None,
            paused: false,
            secrets: job::Secrets::default(),
        }
    }
}

/// How a chain run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Final {
    /// COMPLETE, FAIL or STOPPED; SUSPENDED when the chain was handed back; UNKNOWN
    /// when it was abandoned (another runner owns the request).
    pub state: State,
    pub finished_jobs: u64,
}

/// Why a stop was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StopError {
    #[error(
        "chain not stopped because the job runner is shutting down (the chain is being suspended)"
    )]
    ShuttingDown,
    #[error("chain not stopped here: this job runner no longer owns the request")]
    Abandoned,
}

pub(crate) enum Command {
    Stop(oneshot::Sender<Result<(), StopError>>),
    Suspend,
    /// The oldest running jobs, at most `limit` of them (all if `None`), and how many
    /// run in all.
    Running {
        limit: Option<usize>,
        reply: oneshot::Sender<(Vec<JobStatus>, usize)>,
    },
    Pause(bool),
}

/// A running chain. Cheap to clone; every clone talks to the same traverser.
#[derive(Debug, Clone)]
pub struct Handle {
    request_id: Arc<str>,
    commands: mpsc::UnboundedSender<Command>,
    done: watch::Receiver<Option<Final>>,
    abandoned: tokio_util::sync::CancellationToken,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Command::Stop(_) => "Stop",
            Command::Suspend => "Suspend",
            Command::Running { .. } => "Running",
            Command::Pause(true) => "Pause",
            Command::Pause(false) => "Unpause",
        })
    }
}

impl Handle {
    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    /// Stops the chain: running jobs are cancelled, nothing new starts. Returns once the
    /// final state has been handed to the Reporter. Stopping a finished chain is a no-op.
    pub async fn stop(&self) -> Result<Final, StopError> {
        let (reply, answer) = oneshot::channel();
        if self.commands.send(Command::Stop(reply)).is_ok() {
            // A closed reply means the chain ended first, which is fine.
            if let Ok(Err(err)) = answer.await {
                return Err(err);
            }
        }
        Ok(self.wait().await)
    }

    /// Suspends the chain (the job runner is shutting down): running jobs are stopped and
    /// the chain with its try counters goes to [`Reporter::suspend`]. Returns at once;
    /// [`Handle::wait`] tells when it is done.
    pub fn suspend(&self) {
        let _ = self.commands.send(Command::Suspend);
    }

    /// Pauses the chain (`true`): jobs that run go on (with their own retries), nothing
    /// new starts; the jobs that became runnable meanwhile wait, PENDING, and start
    /// once the chain is unpaused (`false`). A stop or suspend of a paused chain ends it
    /// as usual, the waiting jobs left PENDING. Returns at once.
    pub fn set_paused(&self, paused: bool) {
        let _ = self.commands.send(Command::Pause(paused));
    }

    /// Abandons the chain (this runner lost its lease, or was told that it no longer owns
    /// the request): running jobs are stopped and nothing more is reported, not even a
    /// final state; [`Handle::wait`] then answers UNKNOWN. Returns at once.
    pub fn abandon(&self) {
        self.abandoned.cancel();
    }

    /// The jobs running now, oldest first.
    pub async fn running(&self) -> Vec<JobStatus> {
        self.running_status(None).await.0
    }

    /// The `limit` oldest of the jobs running now, oldest first, and how many run in all:
    /// what a progress line shows, without describing each of a large fan-out's jobs.
    pub async fn running_first(&self, limit: usize) -> (Vec<JobStatus>, usize) {
        self.running_status(Some(limit)).await
    }

    async fn running_status(&self, limit: Option<usize>) -> (Vec<JobStatus>, usize) {
        let (reply, answer) = oneshot::channel();
        if self
            .commands
            .send(Command::Running { limit, reply })
            .is_err()
        {
            return (Vec::new(), 0);
        }
        answer.await.unwrap_or_default()
    }

    /// Waits until the chain has ended and its last report was delivered.
    pub async fn wait(&self) -> Final {
        let mut done = self.done.clone();
        match done.wait_for(Option::is_some).await {
            Ok(value) => value.clone().expect("wait_for saw Some"),
            // The traverser always publishes before it drops the sender.
            Err(_) => Final {
                state: State::Fail,
                finished_jobs: 0,
            },
        }
    }

    /// The final state, if the chain has ended.
    pub fn result(&self) -> Option<Final> {
        self.done.borrow().clone()
    }
}

/// Validates a new chain (runner.md §2.1) and starts running it on the current tokio
/// runtime.
pub fn run(
    job_chain: impl Into<Incoming>,
    factory: Arc<dyn Factory>,
    reporter: Arc<dyn Reporter>,
    options: Options,
) -> Result<Handle, ValidationError> {
    let job_chain = job_chain.into();
    let edges = validate::new_chain(&job_chain)?;
    validate::job_types(&job_chain, &*factory)?;
    validate::job_bytes(&job_chain, &*factory)?;
    let chain = state::Chain::new(
        job_chain,
        edges,
        Default::default(),
        Default::default(),
        Default::default(),
    )?;
    Ok(traverser::spawn(chain, factory, reporter, options))
}

/// Validates a suspended chain (its job types too) and resumes it where it left off: STOPPED jobs run again,
/// keeping their retry budget, and try numbers continue.
pub fn resume(
    suspended: impl Into<Resumed>,
    factory: Arc<dyn Factory>,
    reporter: Arc<dyn Reporter>,
    options: Options,
) -> Result<Handle, ValidationError> {
    let Resumed {
        job_chain,
        total_job_tries,
        latest_run_job_tries,
        sequence_tries,
        ..
    } = suspended.into();
    let edges = validate::resumed_chain(&job_chain)?;
    validate::job_types(&job_chain, &*factory)?;
    validate::job_bytes(&job_chain, &*factory)?;
    let mut chain = state::Chain::new(
        job_chain,
        edges,
        total_job_tries,
        latest_run_job_tries,
        sequence_tries,
    )?;
    chain.prepare_resume();
    Ok(traverser::spawn(chain, factory, reporter, options))
}

#[cfg(test)]
mod lock_tests;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;
