//! Checks of a chain before it runs (runner.md §2.1).

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use proto::{JobChain, State};

/// A chain that cannot run. [`ValidationError::is_invalid_chain`] separates a malformed
/// graph (HTTP 400) from job states that do not fit (HTTP 500 in Spin Cycle).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ValidationError {
    pub message: String,
    invalid_chain: bool,
}

impl ValidationError {
    fn chain(message: impl Into<String>) -> ValidationError {
        ValidationError {
            message: message.into(),
            invalid_chain: true,
        }
    }

    fn states(message: impl Into<String>) -> ValidationError {
        ValidationError {
            message: message.into(),
            invalid_chain: false,
        }
    }

    /// Whether the graph itself is malformed (as opposed to its job states).
    pub fn is_invalid_chain(&self) -> bool {
        self.invalid_chain
    }
}

fn structure(chain: &JobChain) -> Result<(), ValidationError> {
    for (from, succs) in &chain.adjacency_list {
        if !chain.jobs.contains_key(from) || succs.iter().any(|succ| !chain.jobs.contains_key(succ))
        {
            return Err(ValidationError::chain(
                "invalid adjacency list: some jobs exist in the adjacency list but not in the chain's jobs",
            ));
        }
    }
    let mut in_degree: HashMap<&str, usize> =
        chain.jobs.keys().map(|id| (id.as_str(), 0)).collect();
    for succ in chain.adjacency_list.values().flatten() {
        *in_degree.entry(succ.as_str()).or_default() += 1;
    }
    let n_starts = in_degree.values().filter(|n| **n == 0).count();
    if n_starts > 1 {
        return Err(ValidationError::chain(format!(
            "job chain has {n_starts} start jobs (jobs without predecessors); expected one"
        )));
    }
    let n_ends = chain
        .jobs
        .keys()
        .filter(|id| chain.adjacency_list.get(*id).is_none_or(Vec::is_empty))
        .count();
    if n_ends > 1 {
        return Err(ValidationError::chain(format!(
            "job chain has {n_ends} end jobs (jobs without successors); expected one"
        )));
    }
    let mut queue: VecDeque<&str> = in_degree
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(id, _)| *id)
        .collect();
    let mut removed = 0;
    while let Some(id) = queue.pop_front() {
        removed += 1;
        for succ in chain.adjacency_list.get(id).into_iter().flatten() {
            let n = in_degree.get_mut(succ.as_str()).expect("checked above");
            *n -= 1;
            if *n == 0 {
                queue.push_back(succ);
            }
        }
    }
    if removed < chain.jobs.len() {
        return Err(ValidationError::chain("chain is cyclic"));
    }
    Ok(())
}

pub(crate) fn new_chain(chain: &JobChain) -> Result<(), ValidationError> {
    structure(chain)?;
    if let Some(job) = chain.jobs.values().find(|job| job.state != State::Pending) {
        return Err(ValidationError::states(format!(
            "invalid job state for new job chain: {} ({}), job {} (ID {}); all job states must be PENDING",
            job.state,
            job.state.value(),
            job.name,
            job.id
        )));
    }
    if chain.finished_jobs != 0 {
        return Err(ValidationError::states(format!(
            "FinishedJobs = {}, expected 0 for new job chain",
            chain.finished_jobs
        )));
    }
    Ok(())
}

pub(crate) fn resumed_chain(chain: &JobChain) -> Result<(), ValidationError> {
    structure(chain)?;
    let allowed = [State::Pending, State::Complete, State::Stopped];
    if let Some(job) = chain
        .jobs
        .values()
        .find(|job| !allowed.contains(&job.state))
    {
        return Err(ValidationError::states(format!(
            "invalid job state for existing job chain: {} ({}), job {} (ID {}); all job states must be PENDING, COMPLETE, or STOPPED",
            job.state,
            job.state.value(),
            job.name,
            job.id
        )));
    }
    let n_complete = chain
        .jobs
        .values()
        .filter(|job| job.state == State::Complete)
        .count() as u64;
    if chain.finished_jobs != n_complete {
        return Err(ValidationError::states(format!(
            "FinishedJobs = {} but there are {n_complete} jobs with state = COMPLETE",
            chain.finished_jobs
        )));
    }
    Ok(())
}

/// A job's waits, read once when its chain is accepted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Waits {
    /// `retryWait`: between two tries of the job.
    pub(crate) retry_wait: Duration,
    /// `sequenceRetryWait` (on a sequence's start job): before the sequence runs again.
    pub(crate) sequence_retry_wait: Duration,
    /// `timeout`: the bound on each try of the job, if any.
    pub(crate) timeout: Option<Duration>,
}

/// Reads a sequence start job's `sequenceTimeout` (a Go duration; empty or 0: none).
pub(crate) fn sequence_timeout(job: &proto::Job) -> Result<Option<Duration>, ValidationError> {
    if job.sequence_timeout.is_empty() {
        return Ok(None);
    }
    match proto::duration::parse(&job.sequence_timeout) {
        Ok(timeout) => Ok(Some(timeout).filter(|timeout| !timeout.is_zero())),
        Err(err) => Err(ValidationError::chain(format!(
            "job {} (ID {}): sequenceTimeout {:?} is not a duration ({err}); expected a Go duration such as 5m",
            job.name, job.id, job.sequence_timeout
        ))),
    }
}

/// Reads a job's `retryWait`, `sequenceRetryWait` and `timeout` (Go durations; empty
/// means none).
pub(crate) fn waits(job: &proto::Job) -> Result<Waits, ValidationError> {
    let parse = |field: &str, text: &str| -> Result<Duration, ValidationError> {
        if text.is_empty() {
            return Ok(Duration::ZERO);
        }
        proto::duration::parse(text).map_err(|err| {
            ValidationError::chain(format!(
                "job {} (ID {}): {field} {text:?} is not a duration ({err}); expected a Go duration such as 500ms or 1m30s",
                job.name, job.id
            ))
        })
    };
    Ok(Waits {
        retry_wait: parse("retryWait", &job.retry_wait)?,
        sequence_retry_wait: parse("sequenceRetryWait", &job.sequence_retry_wait)?,
        timeout: Some(parse("timeout", &job.timeout)?).filter(|timeout| !timeout.is_zero()),
    })
}
