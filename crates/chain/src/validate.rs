//! Checks of a chain before it runs (runner.md §2.1).

use std::collections::VecDeque;
use std::time::Duration;

use proto::State;

use crate::incoming::{Flaw, Incoming, RunJob};
use crate::state::JobIdx;

/// A chain that cannot run. [`ValidationError::is_invalid_chain`] separates a malformed
/// graph (HTTP 400) from job states that do not fit (HTTP 500 in Spin Cycle).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ValidationError {
    pub message: String,
    invalid_chain: bool,
    /// The chain's job types that this runner's factory does not know, sorted.
    missing_types: Vec<String>,
    /// Valid, but this runner cannot run it as it is (job types it lacks, or stored job
    /// bytes its job types cannot read): the chain must wait for a runner that can.
    waits: bool,
}

impl ValidationError {
    pub(crate) fn chain(message: impl Into<String>) -> ValidationError {
        ValidationError {
            message: message.into(),
            invalid_chain: true,
            missing_types: Vec::new(),
            waits: false,
        }
    }

    pub(crate) fn states(message: impl Into<String>) -> ValidationError {
        ValidationError {
            message: message.into(),
            invalid_chain: false,
            missing_types: Vec::new(),
            waits: false,
        }
    }

    /// A chain with jobs of `types` that the runner cannot make: valid, but it must wait
    /// for a runner that has them.
    pub(crate) fn missing_types(types: Vec<String>) -> ValidationError {
        ValidationError {
            message: format!(
                "this job runner has no job type {}; the chain waits for a runner that has",
                types
                    .iter()
                    .map(|t| format!("`{t}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            invalid_chain: false,
            missing_types: types,
            waits: true,
        }
    }

    /// A chain with a job whose stored bytes its type, on this runner, cannot read (a
    /// chain imported from Spin Cycle, or a job program that changed): valid, but it
    /// must wait for a runner whose code reads them rather than fail its first try.
    pub(crate) fn unreadable(job: &RunJob, err: &job::Error) -> ValidationError {
        ValidationError {
            message: format!(
                "{} of job {} (ID {}, type {}): {err}; the chain waits for a runner whose job type reads them",
                job::UNREADABLE_BYTES,
                job.name,
                job.id,
                job.job_type
            ),
            invalid_chain: false,
            missing_types: Vec::new(),
            waits: true,
        }
    }

    /// Whether the chain is valid but must wait for another runner (job types this one
    /// lacks, or job bytes it cannot read): HTTP 422, and the request waits.
    pub fn waits_for_another_runner(&self) -> bool {
        self.waits
    }

    /// The job types the runner lacks, when that is why it refused the chain.
    pub fn missing_job_types(&self) -> &[String] {
        &self.missing_types
    }

    /// Whether the graph itself is malformed (as opposed to its job states).
    pub fn is_invalid_chain(&self) -> bool {
        self.invalid_chain
    }
}

/// Refuses a chain with a job whose type `factory` does not know.
pub(crate) fn job_types(
    chain: &Incoming,
    factory: &dyn job::Factory,
) -> Result<(), ValidationError> {
    let mut missing: Vec<String> = chain
        .jobs
        .iter()
        .filter(|job| !factory.knows(&job.job_type))
        .map(|job| job.job_type.to_string())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    missing.sort();
    missing.dedup();
    Err(ValidationError::missing_types(missing))
}

/// Refuses a chain with a job whose stored bytes its type cannot read: each job is made
/// and given its bytes as it will be when it runs (a job of the same type and bytes as one
/// checked already is not made again: a fan-out of thousands costs a few).
pub(crate) fn job_bytes(
    chain: &Incoming,
    factory: &dyn job::Factory,
) -> Result<(), ValidationError> {
    let mut checked: std::collections::HashSet<(&str, &[u8])> = std::collections::HashSet::new();
    for job in &chain.jobs {
        if !checked.insert((&job.job_type, &job.bytes)) {
            continue;
        }
        let id = job::JobId {
            job_type: job.job_type.to_string(),
            name: job.name.to_string(),
            id: job.id.clone(),
            request_id: chain.request_id.clone(),
        };
        let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            factory.make(&id)?.deserialize(&job.bytes)
        }));
        match made {
            Ok(Ok(())) => {}
            // Deserialize is what this check is about; a factory that cannot make the
            // job (or panics) fails the job's first try, as it would have.
            Ok(Err(err @ job::Error::Deserialize(_))) => {
                return Err(ValidationError::unreadable(job, &err));
            }
            Ok(Err(_)) | Err(_) => {}
        }
    }
    Ok(())
}

/// A valid chain's edges by job index, both ways: jobs are numbered in the order of
/// their ids.
#[derive(Debug)]
pub(crate) struct Edges {
    pub(crate) succs: Adjacent,
    pub(crate) preds: Adjacent,
}

/// Each job's neighbours one way, all in one array (compressed sparse rows: 4 bytes a
/// job and 4 an edge, where a vector per job took 24 and a heap block).
#[derive(Debug, Clone)]
pub(crate) struct Adjacent {
    /// Job `i`'s neighbours are `targets[starts[i]..starts[i + 1]]`.
    starts: Vec<u32>,
    targets: Vec<JobIdx>,
}

impl Adjacent {
    /// The neighbours of `n` jobs from (job, neighbour) pairs; a job's neighbours keep
    /// the pairs' order.
    fn new(n: usize, pairs: impl Iterator<Item = (JobIdx, JobIdx)> + Clone) -> Adjacent {
        let mut starts = vec![0u32; n + 1];
        for (from, _) in pairs.clone() {
            starts[from.get() + 1] += 1;
        }
        for at in 0..n {
            starts[at + 1] += starts[at];
        }
        let mut next = starts.clone();
        let mut targets = vec![JobIdx::default(); starts[n] as usize];
        for (from, to) in pairs {
            let slot = &mut next[from.get()];
            targets[*slot as usize] = to;
            *slot += 1;
        }
        Adjacent { starts, targets }
    }

    /// Every job with its neighbours, in index order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (JobIdx, &[JobIdx])> {
        (0..self.starts.len() - 1).map(|at| (JobIdx::new(at), &self[JobIdx::new(at)]))
    }
}

impl std::ops::Index<JobIdx> for Adjacent {
    type Output = [JobIdx];

    fn index(&self, idx: JobIdx) -> &[JobIdx] {
        let at = idx.get();
        &self.targets[self.starts[at] as usize..self.starts[at + 1] as usize]
    }
}

/// The index of job `id` among the chain's ids (sorted, as the map keeps them), for a
/// few lookups (a map is cheaper for many).
pub(crate) fn index_of(ids: &[&str], id: &str) -> Option<JobIdx> {
    ids.binary_search(&id).ok().map(JobIdx::new)
}

/// One start job, one end job, no cycle, every id of the adjacency list a job of the chain
/// filed under its own id.
fn structure(chain: &Incoming) -> Result<Edges, ValidationError> {
    let edges = edges(chain)?;
    let Edges { succs, preds } = &edges;
    let n_starts = preds.iter().filter(|(_, p)| p.is_empty()).count();
    if n_starts > 1 {
        return Err(ValidationError::chain(format!(
            "job chain has {n_starts} start jobs (jobs without predecessors); expected one"
        )));
    }
    let n_ends = succs.iter().filter(|(_, s)| s.is_empty()).count();
    if n_ends > 1 {
        return Err(ValidationError::chain(format!(
            "job chain has {n_ends} end jobs (jobs without successors); expected one"
        )));
    }
    let sorted = proto::topo::sort::<VecDeque<usize>, _>(
        preds.iter().map(|(_, p)| p.len()).collect(),
        |at| succs[JobIdx::new(at)].iter().map(|succ| succ.get()),
    );
    if !sorted.is_complete() {
        return Err(ValidationError::chain("chain is cyclic"));
    }
    Ok(edges)
}

/// The chain's edges both ways, by index; refuses a job filed under another id, two jobs
/// with one id, and an adjacency list that names a job the chain does not have.
pub(crate) fn edges(chain: &Incoming) -> Result<Edges, ValidationError> {
    match &chain.flaw {
        Some(Flaw::Misfiled { key, id }) => {
            return Err(ValidationError::chain(format!(
                "invalid job chain: job {id} is filed under id {key:?}; expected its own id"
            )));
        }
        Some(Flaw::Duplicate(id)) => {
            return Err(ValidationError::chain(format!(
                "invalid job chain: two jobs have id {id:?}; expected each id once"
            )));
        }
        Some(Flaw::UnknownJob) => {
            return Err(ValidationError::chain(
                "invalid adjacency list: some jobs exist in the adjacency list but not in the chain's jobs",
            ));
        }
        None => {}
    }
    let n = chain.jobs.len();
    Ok(Edges {
        succs: Adjacent::new(n, chain.edges.iter().copied()),
        preds: Adjacent::new(n, chain.edges.iter().map(|&(from, to)| (to, from))),
    })
}

pub(crate) fn new_chain(chain: &Incoming) -> Result<Edges, ValidationError> {
    let edges = structure(chain)?;
    if let Some(job) = chain.jobs.iter().find(|job| job.state != State::Pending) {
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

pub(crate) fn resumed_chain(chain: &Incoming) -> Result<Edges, ValidationError> {
    let edges = structure(chain)?;
    let allowed = [State::Pending, State::Complete, State::Stopped];
    // A failed element within its node's budget stays failed in a suspended chain (the
    // chain checks, once it knows its elements, that every failed job is in one).
    let budgets = chain.jobs.iter().any(|job| job.elements.is_some());
    let allowed = |state: State| {
        allowed.contains(&state) || (budgets && matches!(state, State::Fail | State::Unknown))
    };
    if let Some(job) = chain.jobs.iter().find(|job| !allowed(job.state)) {
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
        .iter()
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
pub(crate) fn sequence_timeout(job: &RunJob) -> Result<Option<Duration>, ValidationError> {
    let text = &job.durations().sequence_timeout;
    if text.is_empty() {
        return Ok(None);
    }
    match proto::duration::parse(text) {
        Ok(timeout) => Ok(Some(timeout).filter(|timeout| !timeout.is_zero())),
        Err(err) => Err(ValidationError::chain(format!(
            "job {} (ID {}): sequenceTimeout {:?} is not a duration ({err}); expected a Go duration such as 5m",
            job.name, job.id, text
        ))),
    }
}

/// Reads a job's `retryWait`, `sequenceRetryWait` and `timeout` (Go durations; empty
/// means none).
pub(crate) fn waits(job: &RunJob) -> Result<Waits, ValidationError> {
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
    let durations = job.durations();
    Ok(Waits {
        retry_wait: parse("retryWait", &durations.retry_wait)?,
        sequence_retry_wait: parse("sequenceRetryWait", &durations.sequence_retry_wait)?,
        timeout: Some(parse("timeout", &durations.timeout)?).filter(|timeout| !timeout.is_zero()),
    })
}
