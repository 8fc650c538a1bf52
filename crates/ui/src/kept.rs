//! A request page's job states kept between its polls (each open page asks every
//! second; a 100,000-job request's states take a few hundred milliseconds to read). A
//! finished request's are kept until it changes (a retry) or for [`FINAL_STATES_KEPT`];
//! a big running request's for as long as a request's progress is ([`rm::kept_for`]: ten
//! times what the read took, 3 s at most), so that however many pages watch it, the
//! server reads its states for a tenth of the time at most.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proto::{JobStatus, Request, State};

/// How long a finished request's job states answer without being read again (an entry
/// logged after its end, which a runner's late report may bring, shows after this).
pub const FINAL_STATES_KEPT: Duration = Duration::from_secs(60);

/// A running request's states are kept only when its chain has at least this many jobs:
/// a smaller one's read takes a few milliseconds, and its page shows every change at the
/// next poll.
pub const RUNNING_KEPT_FROM_JOBS: usize = 1_000;

/// Each job's state and tries, by job index.
pub type States = Arc<Vec<(State, u32)>>;

/// The runner's report of the jobs running now (empty unless the request runs).
pub type Running = Arc<Vec<JobStatus>>;

/// Kept states by request id.
#[derive(Debug, Default)]
pub(crate) struct KeptStates(HashMap<String, Kept>);

#[derive(Debug)]
struct Kept {
    /// The request when its states were read: its state, end (Unix nanoseconds) and
    /// finished jobs.
    state: State,
    finished_at: Option<i64>,
    finished_jobs: u64,
    until: Instant,
    states: States,
    running: Running,
}

fn ended_at(request: &Request) -> Option<i64> {
    request.finished_at.and_then(|at| at.timestamp_nanos_opt())
}

impl KeptStates {
    /// The states kept for `request` if they still answer for it: it is in the state it
    /// was read in, a finished request ended when it did then, a running one has not
    /// fewer finished jobs (a retry began again), and they have not lapsed.
    pub(crate) fn get(&mut self, request: &Request) -> Option<(States, Running)> {
        let kept = self.0.get(&request.id)?;
        let same = if request.state.is_finished() {
            kept.finished_at == ended_at(request) && kept.finished_jobs == request.finished_jobs
        } else {
            request.finished_jobs >= kept.finished_jobs
        };
        if !same || kept.state != request.state || kept.until <= Instant::now() {
            self.0.remove(&request.id);
            return None;
        }
        Some((kept.states.clone(), kept.running.clone()))
    }

    /// Keeps what was read of `request` (whose chain has `jobs` jobs) in `took`, where
    /// it is to be kept.
    pub(crate) fn keep(
        &mut self,
        request: &Request,
        jobs: usize,
        took: Duration,
        states: &States,
        running: &Running,
    ) {
        let kept_for = if request.state.is_finished() {
            Some(FINAL_STATES_KEPT)
        } else if jobs >= RUNNING_KEPT_FROM_JOBS {
            rm::kept_for(took)
        } else {
            None
        };
        let Some(kept_for) = kept_for else {
            return;
        };
        let kept = Kept {
            state: request.state,
            finished_at: ended_at(request),
            finished_jobs: request.finished_jobs,
            until: Instant::now() + kept_for,
            states: states.clone(),
            running: running.clone(),
        };
        self.0.insert(request.id.clone(), kept);
    }

    pub(crate) fn forget(&mut self, request_id: &str) {
        self.0.remove(request_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(state: State, finished_jobs: u64, finished_at: Option<&str>) -> Request {
        serde_json::from_value(serde_json::json!({
            "id": "r1",
            "type": "deploy",
            "state": state,
            "user": "ann",
            "createdAt": "2026-12-06T10:00:00Z",
            "finishedAt": finished_at,
            "totalJobs": 100,
            "finishedJobs": finished_jobs,
        }))
        .unwrap()
    }

    fn request(state: State, finished_jobs: u64) -> Request {
        let end = state.is_finished().then_some("2026-12-06T10:05:00Z");
        ended(state, finished_jobs, end)
    }

    fn read(n: u32) -> (States, Running) {
        (
            Arc::new(vec![(State::Complete, n)]),
            Arc::new(vec![JobStatus::default()]),
        )
    }

    #[test]
    fn a_finished_request_s_states_answer_until_it_changes() {
        let mut kept = KeptStates::default();
        let done = request(State::Fail, 5);
        let (states, running) = read(1);
        kept.keep(&done, 10, Duration::ZERO, &states, &running);
        let (again, _) = kept.get(&done).expect("kept, however quick the read");
        assert!(Arc::ptr_eq(&again, &states));
        // Retried: running again, read anew (and no longer kept).
        assert!(kept.get(&request(State::Running, 5)).is_none());
        assert!(kept.get(&done).is_none());
        // Ended again later: another end.
        kept.keep(&done, 10, Duration::ZERO, &states, &running);
        let later = ended(State::Fail, 5, Some("2026-12-06T10:09:00Z"));
        assert!(kept.get(&later).is_none());
        kept.keep(&done, 10, Duration::ZERO, &states, &running);
        kept.forget("r1");
        assert!(kept.get(&done).is_none(), "forgotten");
    }

    #[test]
    fn a_big_running_request_s_states_answer_a_while_a_small_one_s_never() {
        let mut kept = KeptStates::default();
        let running_request = request(State::Running, 40);
        let (states, running) = read(2);
        let slow = Duration::from_millis(100);
        kept.keep(&running_request, 999, slow, &states, &running);
        assert!(kept.get(&running_request).is_none(), "a small chain");
        kept.keep(
            &running_request,
            100_000,
            Duration::from_millis(5),
            &states,
            &running,
        );
        assert!(kept.get(&running_request).is_none(), "a quick read");
        kept.keep(&running_request, 100_000, slow, &states, &running);
        let (_, again) = kept
            .get(&request(State::Running, 41))
            .expect("kept ten times the read");
        assert!(Arc::ptr_eq(&again, &running));
        assert!(
            kept.get(&request(State::Running, 3)).is_none(),
            "fewer finished jobs: began again"
        );
        kept.keep(&running_request, 100_000, slow, &states, &running);
        assert!(
            kept.get(&request(State::Complete, 40)).is_none(),
            "it ended"
        );
    }
}
