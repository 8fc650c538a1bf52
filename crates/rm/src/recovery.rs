//! Rebuilding the chain of a request whose Job Runner was lost (or whose hand-over began
//! a chain but was never recorded), from what the store knows: the chain as created,
//! every job log entry, and the tries that started.
//!
//! A job whose latest try is COMPLETE stays complete. A try that started and never
//! reported was interrupted: it gets a job log entry saying so (STOPPED, with the lost
//! runner and when it was last heard from), it does not count against the job's retry
//! budget, and the job runs again as the next try. A job whose latest try ended otherwise
//! (failed, with tries left, or its sequence about to retry) runs again with its budget
//! as it was. Sequence try counts come from the tries' starts.

use std::collections::{BTreeMap, HashMap, HashSet};

use proto::{JobChain, JobLog, JobRunner, State, SuspendedJobChain};
use store::StartedTry;

/// The chain to resume, and the entries of its interrupted tries.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rebuilt {
    pub(crate) suspended: SuspendedJobChain,
    pub(crate) interrupted: Vec<JobLog>,
}

/// The error text of an interrupted try.
pub(crate) fn interrupted_error(lost: &JobRunner) -> String {
    format!(
        "interrupted: its job runner (instance {} at {}) was lost: no lease renewal since {}; the job runs again as its next try",
        lost.instance_id,
        lost.url,
        lost.renewed_at
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    )
}

/// The error text of an interrupted try of a request whose live runner said twice that it
/// no longer ran it (its chain ended or was dropped without its end being reported).
pub(crate) fn unheld_error(runner: &JobRunner) -> String {
    format!(
        "interrupted: its job runner (instance {} at {}) no longer ran the request, and what it ran was never reported; the job runs again as its next try",
        runner.instance_id, runner.url,
    )
}

/// The error text of an interrupted try of a request that was handed over, began, and
/// was never marked RUNNING: which runner ran it is not known.
pub(crate) fn unrecorded_error(epoch: u64) -> String {
    format!(
        "interrupted: the hand-over (epoch {epoch}) that began it was never recorded, so the request was taken back from whichever job runner had it; the job runs again as its next try"
    )
}

/// Rebuilds `chain` (as created; job states are ignored) from `logs` and `started`;
/// each interrupted try gets `error`.
// Long because it is one pass over the chain's jobs with the three try counters and the
// interrupted entries it builds as it goes, from maps of the logs and starts made first.
pub(crate) fn rebuild(
    mut chain: JobChain,
    logs: &[JobLog],
    started: &[StartedTry],
    error: String,
    now_nanos: i64,
) -> Rebuilt {
    let mut logged: HashMap<&str, Vec<&JobLog>> = HashMap::new();
    for entry in logs {
        logged.entry(entry.job_id.as_str()).or_default().push(entry);
    }
    let mut starts: HashMap<&str, Vec<&StartedTry>> = HashMap::new();
    for start in started {
        starts
            .entry(start.start.job_id.as_str())
            .or_default()
            .push(start);
    }
    let mut interrupted = Vec::new();
    let (mut total, mut latest, mut sequence) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    let mut finished_jobs = 0;
    // Jobs of elements of nodes with a failure budget (issue #50): one that failed for
    // good stays failed (its element counted against the budget), not run again.
    let in_budgets: HashSet<String> = graph::elements::fleets(&chain)
        .into_iter()
        .filter(|fleet| fleet.max_failures.is_some())
        .flat_map(|fleet| fleet.elements)
        .flat_map(|element| element.jobs)
        .collect();
    let mut failed_in_elements = Vec::new();
    for (job_id, job) in &mut chain.jobs {
        let entries = logged.get(job_id.as_str()).map_or(&[][..], Vec::as_slice);
        let job_starts = starts.get(job_id.as_str()).map_or(&[][..], Vec::as_slice);
        let logged_tries: HashSet<u32> = entries.iter().map(|entry| entry.r#try).collect();
        for start in job_starts {
            if !logged_tries.contains(&start.start.r#try) {
                interrupted.push(JobLog {
                    request_id: chain.request_id.clone(),
                    job_id: job_id.clone(),
                    r#try: start.start.r#try,
                    name: job.name.clone(),
                    job_type: job.job_type.clone(),
                    started_at: start.start.started_at,
                    finished_at: now_nanos.max(start.start.started_at),
                    state: State::Stopped,
                    exit: -1,
                    error: error.clone(),
                    stdout: String::new(),
                    stderr: String::new(),
                });
            }
        }
        let last_logged = entries.iter().max_by_key(|entry| entry.r#try);
        let last_started = job_starts.iter().max_by_key(|start| start.start.r#try);
        let top = last_logged
            .map_or(0, |entry| entry.r#try)
            .max(last_started.map_or(0, |start| start.start.r#try));
        // The try within the current sequence run: as its start said, or (a start not
        // sent because its entry went with it) the count of logged tries.
        let run_try = last_started
            .filter(|start| start.start.r#try == top)
            .map_or(entries.len() as u32, |start| start.start.run_try);
        if let Some(start) = last_started
            && let Some(sequence_id) = Some(job.sequence_id.as_str()).filter(|id| !id.is_empty())
        {
            let count = sequence.entry(sequence_id.to_owned()).or_insert(0);
            *count = (*count).max(start.start.sequence_try);
        }
        if top == 0 {
            job.state = State::Pending;
            continue;
        }
        total.insert(job_id.clone(), top);
        let top_logged = last_logged.filter(|entry| entry.r#try == top);
        match top_logged {
            Some(entry) if entry.state == State::Complete => {
                job.state = State::Complete;
                finished_jobs += 1;
                latest.insert(job_id.clone(), run_try);
            }
            // Interrupted (no entry), or stopped (an interruption a recovery before logged,
            // or a suspend's stop): resuming gives back the try it was on. Counted as
            // ended otherwise, a job recovered twice lost a try of its budget each time
            // (issue #35's chaos: a job with no retries left failed its request at once).
            None
            | Some(JobLog {
                state: State::Stopped,
                ..
            }) => {
                job.state = State::Stopped;
                latest.insert(job_id.clone(), run_try);
            }
            // Ended otherwise: resuming gives back one try, so count one more.
            Some(entry) => {
                if in_budgets.contains(job_id) && entry.state != State::Complete {
                    failed_in_elements.push((job_id.clone(), run_try));
                }
                job.state = State::Stopped;
                latest.insert(job_id.clone(), run_try.saturating_add(1));
            }
        }
        job.tries = top;
    }
    // An element's job that failed with no try of its own or its sequence's left failed
    // for good, as the traverser decided.
    for (job_id, run_try) in failed_in_elements {
        let job = &chain.jobs[&job_id];
        let sequence_left = chain.jobs.get(&job.sequence_id).is_some_and(|start| {
            sequence.get(&job.sequence_id).copied().unwrap_or(1) <= start.sequence_retry
        });
        if run_try > job.retry && !sequence_left {
            latest.insert(job_id.clone(), run_try);
            if let Some(job) = chain.jobs.get_mut(&job_id) {
                job.state = State::Fail;
            }
        }
    }
    // A sequence with tries but no start that said its count ran once.
    for job in chain.jobs.values() {
        if !job.sequence_id.is_empty() && total.contains_key(&job.id) {
            sequence.entry(job.sequence_id.clone()).or_insert(1);
        }
    }
    chain.finished_jobs = finished_jobs;
    chain.state = State::Suspended;
    interrupted.sort_by(|a, b| (&a.job_id, a.r#try).cmp(&(&b.job_id, b.r#try)));
    Rebuilt {
        suspended: SuspendedJobChain {
            request_id: chain.request_id.clone(),
            job_chain: chain,
            total_job_tries: total,
            latest_run_job_tries: latest,
            sequence_tries: sequence,
        },
        interrupted,
    }
}

/// The chain of a finished request run again (`spindle retry`): completed jobs stay
/// complete unless they are in `reset` (a `--from` job and every job after it); every
/// other job runs again with its whole retry budget, and so does each sequence that did
/// not complete; try numbers continue from the job log, which keeps every earlier try.
pub(crate) fn retry(
    mut chain: JobChain,
    logs: &[JobLog],
    reset: &HashSet<String>,
) -> SuspendedJobChain {
    let mut latest_try: HashMap<&str, (u32, State)> = HashMap::new();
    for entry in logs {
        let top = latest_try
            .entry(entry.job_id.as_str())
            .or_insert((0, State::Pending));
        if entry.r#try >= top.0 {
            *top = (entry.r#try, entry.state);
        }
    }
    let (mut total, mut latest, mut sequence) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    let mut finished_jobs = 0;
    for (job_id, job) in &mut chain.jobs {
        let (tries, state) = latest_try
            .get(job_id.as_str())
            .copied()
            .unwrap_or((0, State::Pending));
        if tries > 0 {
            total.insert(job_id.clone(), tries);
        }
        job.tries = tries;
        if state == State::Complete && !reset.contains(job_id) {
            job.state = State::Complete;
            finished_jobs += 1;
            latest.insert(job_id.clone(), 1);
            // A sequence whose first job completed is in its first run again.
            if job.sequence_id == *job_id {
                sequence.insert(job_id.clone(), 1);
            }
        } else {
            job.state = State::Pending;
        }
    }
    chain.finished_jobs = finished_jobs;
    chain.state = State::Suspended;
    SuspendedJobChain {
        request_id: chain.request_id.clone(),
        job_chain: chain,
        total_job_tries: total,
        latest_run_job_tries: latest,
        sequence_tries: sequence,
    }
}

/// Job `from` (an id, or the name of exactly one job) and every job after it.
pub(crate) fn from_job(chain: &JobChain, from: &str) -> Result<HashSet<String>, String> {
    let start = if chain.jobs.contains_key(from) {
        from.to_owned()
    } else {
        let named: Vec<&str> = chain
            .jobs
            .values()
            .filter(|job| job.name == from)
            .map(|job| job.id.as_str())
            .collect();
        match named.as_slice() {
            [one] => (*one).to_owned(),
            [] => {
                return Err(format!(
                    "request {} has no job {from:?}; expected a job id or a job name",
                    chain.request_id
                ));
            }
            many => {
                return Err(format!(
                    "job name {from:?} names {} jobs of request {} ({}); give one job id",
                    many.len(),
                    chain.request_id,
                    many.join(", ")
                ));
            }
        }
    };
    let mut reset = HashSet::new();
    let mut next = vec![start];
    while let Some(job_id) = next.pop() {
        if let Some(after) = chain.adjacency_list.get(&job_id) {
            next.extend(after.iter().filter(|id| !reset.contains(*id)).cloned());
        }
        reset.insert(job_id);
    }
    Ok(reset)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proto::{JobChain, JobLog, JobRunner, State, TryStart};
    use store::StartedTry;

    use super::{interrupted_error, rebuild};

    fn lost() -> JobRunner {
        JobRunner {
            instance_id: "lost".to_owned(),
            url: "http://jr:1".to_owned(),
            ..JobRunner::default()
        }
    }

    /// Issue #35: a request recovered twice (its first resume's runner was lost too
    /// before the job ran again) keeps its jobs' budgets: the try the first recovery
    /// logged as interrupted is given back again, not counted as a failure.
    #[test]
    fn a_request_recovered_twice_keeps_its_jobs_budgets() {
        let job = proto::Job {
            id: "j".to_owned(),
            name: "mark".to_owned(),
            job_type: "shell-command".to_owned(),
            sequence_id: "j".to_owned(),
            ..proto::Job::default()
        };
        let chain = JobChain {
            request_id: "r".to_owned(),
            jobs: BTreeMap::from([("j".to_owned(), job)]),
            ..JobChain::default()
        };
        let start = StartedTry {
            start: TryStart {
                request_id: "r".to_owned(),
                job_id: "j".to_owned(),
                r#try: 1,
                run_try: 1,
                sequence_try: 1,
                started_at: 1,
            },
            instance: "lost".to_owned(),
        };
        let first = rebuild(
            chain.clone(),
            &[],
            std::slice::from_ref(&start),
            interrupted_error(&lost()),
            10,
        );
        assert_eq!(first.interrupted.len(), 1);
        assert_eq!(first.suspended.latest_run_job_tries["j"], 1);
        let logged: Vec<JobLog> = first.interrupted.clone();
        // Its start kept, or gone: either way the same budget.
        for started in [vec![start], Vec::new()] {
            let second = rebuild(
                chain.clone(),
                &logged,
                &started,
                interrupted_error(&lost()),
                20,
            );
            assert!(second.interrupted.is_empty(), "nothing new was interrupted");
            assert_eq!(second.suspended.job_chain.jobs["j"].state, State::Stopped);
            assert_eq!(second.suspended.total_job_tries["j"], 1);
            assert_eq!(
                second.suspended.latest_run_job_tries["j"], 1,
                "resuming gives the interrupted try back"
            );
        }
        // A try that failed still counts: the resume gives one back, so one more.
        let failed = JobLog {
            state: State::Fail,
            ..logged[0].clone()
        };
        let third = rebuild(chain, &[failed], &[], interrupted_error(&lost()), 30);
        assert_eq!(third.suspended.latest_run_job_tries["j"], 2);
    }

    /// Issue #50: rebuilt after its runner was lost, a chain keeps an element that failed
    /// for good failed (its budget counts it; it is not run again), while a failed job
    /// with a retry left, and an interrupted one, run again.
    #[test]
    fn a_rebuilt_chain_keeps_its_failed_elements_failed() {
        let job = |id: &str, retry: u32| {
            (
                id.to_owned(),
                proto::Job {
                    id: id.to_owned(),
                    name: id.to_owned(),
                    job_type: "t".to_owned(),
                    sequence_id: "s".to_owned(),
                    retry,
                    ..proto::Job::default()
                },
            )
        };
        let mut jobs = BTreeMap::from([
            job("s", 0),
            job("f", 0),
            job("a", 0),
            job("b", 0),
            job("c", 1),
            job("e", 0),
        ]);
        jobs.get_mut("f").unwrap().name = "repeat_hosts_begin".to_owned();
        jobs.get_mut("f").unwrap().elements = Some(Box::new(proto::Elements {
            node: "hosts".to_owned(),
            end: "e".to_owned(),
            budget: "f".to_owned(),
            max_failures: Some(2),
            count: 3,
            ..proto::Elements::default()
        }));
        let chain = JobChain {
            request_id: "r".to_owned(),
            jobs,
            adjacency_list: BTreeMap::from([
                ("s".to_owned(), vec!["f".to_owned()]),
                (
                    "f".to_owned(),
                    vec!["a".to_owned(), "b".to_owned(), "c".to_owned()],
                ),
                ("a".to_owned(), vec!["e".to_owned()]),
                ("b".to_owned(), vec!["e".to_owned()]),
                ("c".to_owned(), vec!["e".to_owned()]),
            ]),
            ..JobChain::default()
        };
        let entry = |job: &str, state: State| JobLog {
            request_id: "r".to_owned(),
            job_id: job.to_owned(),
            r#try: 1,
            state,
            ..JobLog::default()
        };
        let start = |job: &str| StartedTry {
            start: TryStart {
                request_id: "r".to_owned(),
                job_id: job.to_owned(),
                r#try: 1,
                run_try: 1,
                sequence_try: 1,
                started_at: 1,
            },
            instance: "lost".to_owned(),
        };
        let logs = [
            entry("s", State::Complete),
            entry("f", State::Complete),
            entry("a", State::Fail),
            entry("c", State::Fail),
        ];
        let started = [start("s"), start("f"), start("a"), start("b"), start("c")];
        let rebuilt = rebuild(
            chain.clone(),
            &logs,
            &started,
            interrupted_error(&lost()),
            10,
        );
        let states: BTreeMap<&str, State> = rebuilt
            .suspended
            .job_chain
            .jobs
            .iter()
            .map(|(id, job)| (id.as_str(), job.state))
            .collect();
        assert_eq!(states["a"], State::Fail, "failed for good, kept");
        assert_eq!(states["b"], State::Stopped, "interrupted, runs again");
        assert_eq!(states["c"], State::Stopped, "a retry left, runs again");
        assert_eq!(states["e"], State::Pending);
        assert_eq!(rebuilt.suspended.latest_run_job_tries["a"], 1);
        // Without a budget, a failed job is given its try back as before.
        let mut plain = chain;
        plain.jobs.get_mut("f").unwrap().elements = None;
        let rebuilt = rebuild(plain, &logs, &started, interrupted_error(&lost()), 10);
        assert_eq!(rebuilt.suspended.job_chain.jobs["a"].state, State::Stopped);
    }
}
