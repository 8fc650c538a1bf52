//! Checks of a chain before it runs (runner.md §2.1).

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use proto::{JobChain, State};

use crate::state::JobIdx;

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

/// A valid chain's edges by job index: jobs are numbered in the order of the chain's
/// map, which is the order of their ids.
#[derive(Debug)]
pub(crate) struct Edges {
    pub(crate) succs: Vec<Vec<JobIdx>>,
    pub(crate) preds: Vec<Vec<JobIdx>>,
}

/// The index of job `id` among the chain's ids (sorted, as the map keeps them), for a
/// few lookups (a map is cheaper for many).
pub(crate) fn index_of(ids: &[&str], id: &str) -> Option<JobIdx> {
    ids.binary_search(&id).ok().map(JobIdx::new)
}

/// One start job, one end job, no cycle, every id of the adjacency list a job of the chain
/// filed under its own id. Works on indices: the ids are looked up once per edge.
fn structure(chain: &JobChain) -> Result<Edges, ValidationError> {
    let edges = edges(chain)?;
    let Edges { succs, preds } = &edges;
    let n = succs.len();
    let n_starts = preds.iter().filter(|p| p.is_empty()).count();
    if n_starts > 1 {
        return Err(ValidationError::chain(format!(
            "job chain has {n_starts} start jobs (jobs without predecessors); expected one"
        )));
    }
    let n_ends = succs.iter().filter(|s| s.is_empty()).count();
    if n_ends > 1 {
        return Err(ValidationError::chain(format!(
            "job chain has {n_ends} end jobs (jobs without successors); expected one"
        )));
    }
    let mut in_degree: Vec<usize> = preds.iter().map(Vec::len).collect();
    let mut queue: VecDeque<usize> = (0..n).filter(|&i| in_degree[i] == 0).collect();
    let mut removed = 0;
    while let Some(at) = queue.pop_front() {
        removed += 1;
        for succ in &succs[at] {
            let degree = &mut in_degree[succ.get()];
            *degree -= 1;
            if *degree == 0 {
                queue.push_back(succ.get());
            }
        }
    }
    if removed < n {
        return Err(ValidationError::chain("chain is cyclic"));
    }
    Ok(edges)
}

/// The chain's edges both ways, by index; refuses a job filed under another id and an
/// adjacency list that names a job the chain does not have.
pub(crate) fn edges(chain: &JobChain) -> Result<Edges, ValidationError> {
    if let Some((key, job)) = chain.jobs.iter().find(|(key, job)| **key != job.id) {
        return Err(ValidationError::chain(format!(
            "invalid job chain: job {} is filed under id {key:?}; expected its own id",
            job.id
        )));
    }
    let ids: Vec<&str> = chain.jobs.keys().map(String::as_str).collect();
    let n = ids.len();
    let mut succs: Vec<Vec<JobIdx>> = vec![Vec::new(); n];
    let mut preds: Vec<Vec<JobIdx>> = vec![Vec::new(); n];
    let unknown = || {
        ValidationError::chain(
            "invalid adjacency list: some jobs exist in the adjacency list but not in the chain's jobs",
        )
    };
    // Ids through one map (a binary search per edge costs ~17 string comparisons in
    // scattered memory on a 100,000-job chain).
    let index: HashMap<&str, JobIdx> = ids
        .iter()
        .enumerate()
        .map(|(at, id)| (*id, JobIdx::new(at)))
        .collect();
    for (from, tos) in &chain.adjacency_list {
        let from = *index.get(from.as_str()).ok_or_else(unknown)?;
        let mut out = Vec::with_capacity(tos.len());
        for to in tos {
            let to = *index.get(to.as_str()).ok_or_else(unknown)?;
            out.push(to);
            preds[to.get()].push(from);
        }
        succs[from.get()] = out;
    }
    Ok(Edges { succs, preds })
}

pub(crate) fn new_chain(chain: &JobChain) -> Result<Edges, ValidationError> {
    let edges = structure(chain)?;
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
    Ok(edges)
}

pub(crate) fn resumed_chain(chain: &JobChain) -> Result<Edges, ValidationError> {
    let edges = structure(chain)?;
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
    Ok(edges)
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
