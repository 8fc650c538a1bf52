//! A request's `each:` elements (issue #50): each element's state, tries and times from
//! its jobs' log entries and the tries running now, summed up per node for a request and
//! listed one by one for `GET /api/v1/requests/{id}/elements`. The expansions are read
//! from the chain once per request and kept ([`FleetCache`]): a chain never changes.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use graph::elements::Fleet;
use proto::{ElementStatus, ElementsSummary, NAMED_FAILURES};

use super::*;

/// Requests kept at most (one without expansions, most of them, a few dozen bytes:
/// `spindle ps` of 50,000 running requests reads no chain); past it, or past
/// [`CACHED_ELEMENTS`], the cache starts again empty.
const CACHED_REQUESTS: usize = 100_000;

/// Elements of all the expansions kept at most (each a few hundred bytes).
const CACHED_ELEMENTS: usize = 200_000;

/// Requests' expansions by request id, and the summary of each finished one with when
/// it finished (a retry finishes it again later: that summary is not kept). Filled when
/// a request is created or resumed here (its chain at hand), else on first read.
#[derive(Default)]
pub(super) struct FleetCache(Mutex<Kept>);

#[derive(Default)]
struct Kept {
    requests: HashMap<String, Cached>,
    /// The elements of every kept request's expansions.
    elements: usize,
}

struct Cached {
    fleets: Arc<Vec<Fleet>>,
    summary: Option<(DateTime<Utc>, Vec<ElementsSummary>)>,
}

impl FleetCache {
    fn get(&self, request_id: &str) -> Option<Arc<Vec<Fleet>>> {
        self.lock()
            .requests
            .get(request_id)
            .map(|cached| Arc::clone(&cached.fleets))
    }

    /// Keeps the expansions of `chain` (a request created or resumed here).
    pub(super) fn keep(&self, chain: &JobChain) {
        self.put(&chain.request_id, Arc::new(graph::elements::fleets(chain)));
    }

    /// Keeps the expansions of `request_id` (found off the runtime when it was created).
    pub(super) fn put(&self, request_id: &str, fleets: Arc<Vec<Fleet>>) {
        let elements: usize = fleets.iter().map(|fleet| fleet.elements.len()).sum();
        let mut kept = self.lock();
        if kept.requests.len() >= CACHED_REQUESTS || kept.elements + elements > CACHED_ELEMENTS {
            *kept = Kept::default();
        }
        kept.elements += elements;
        let cached = Cached {
            fleets,
            summary: None,
        };
        if let Some(before) = kept.requests.insert(request_id.to_owned(), cached) {
            let before: usize = before.fleets.iter().map(|f| f.elements.len()).sum();
            kept.elements -= before;
        }
    }

    /// The summary kept of a request that finished at `ended`.
    fn summary(&self, request_id: &str, ended: DateTime<Utc>) -> Option<Vec<ElementsSummary>> {
        let kept = self.lock();
        let (at, summary) = kept.requests.get(request_id)?.summary.as_ref()?;
        (*at == ended).then(|| summary.clone())
    }

    fn keep_summary(&self, request_id: &str, ended: DateTime<Utc>, summary: Vec<ElementsSummary>) {
        if let Some(cached) = self.lock().requests.get_mut(request_id) {
            cached.summary = Some((ended, summary));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// What is known of one job: its latest logged try and whether a try of it runs now.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    state: Option<State>,
    tries: u32,
    started_at: i64,
    finished_at: i64,
    running: bool,
}

/// How to pick elements by state, read from `state=` (any case; `failed` for FAIL).
pub(crate) fn element_state(text: &str) -> Result<State, String> {
    match text.to_ascii_lowercase().as_str() {
        "pending" => Ok(State::Pending),
        "running" => Ok(State::Running),
        "complete" | "completed" => Ok(State::Complete),
        "fail" | "failed" => Ok(State::Fail),
        "stopped" => Ok(State::Stopped),
        _ => Err(format!(
            "invalid element state {text:?}; expected pending, running, complete, failed or stopped"
        )),
    }
}

/// What `retry` runs again (issue #50, `spindle retry`): every job that did not
/// complete, and with `from` a job and every job after it, and with `elements` the jobs of
/// those elements.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retry {
    pub from: Option<String>,
    pub elements: Option<RetryElements>,
}

/// The elements a retry runs again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetryElements {
    /// Every element that failed.
    Failed,
    /// These elements (by name), completed or not.
    Named(Vec<String>),
}

impl Manager {
    /// The jobs of the elements `picked` names: an error when there is none, or a name
    /// names no element.
    pub(super) async fn elements_to_retry(
        &self,
        request_id: &str,
        picked: &RetryElements,
    ) -> Result<Vec<String>, Error> {
        let elements = self.elements(request_id, None, None).await?;
        let chosen: Vec<&ElementStatus> = match picked {
            RetryElements::Failed => {
                let failed: Vec<&ElementStatus> =
                    elements.iter().filter(|e| e.state == State::Fail).collect();
                if failed.is_empty() {
                    return Err(Error::Conflict(format!(
                        "request {request_id} has no failed element to run again"
                    )));
                }
                failed
            }
            RetryElements::Named(names) => {
                let unknown: Vec<&str> = names
                    .iter()
                    .map(String::as_str)
                    .filter(|name| !elements.iter().any(|e| e.name == *name))
                    .collect();
                if !unknown.is_empty() {
                    let some: Vec<&str> =
                        elements.iter().take(5).map(|e| e.name.as_str()).collect();
                    return Err(Error::BadRequest(format!(
                        "request {request_id} has no element {}; expected names of its elements{}",
                        unknown.join(", "),
                        if some.is_empty() {
                            " (it has none: it expands no node)".to_owned()
                        } else {
                            format!(", such as {}", some.join(", "))
                        }
                    )));
                }
                elements
                    .iter()
                    .filter(|e| names.contains(&e.name))
                    .collect()
            }
        };
        Ok(chosen
            .into_iter()
            .flat_map(|e| e.jobs.iter().cloned())
            .collect())
    }

    /// The request's `each:` expansions, read from its chain the first time.
    async fn fleets(&self, request_id: &str) -> Result<Arc<Vec<Fleet>>, Error> {
        if let Some(fleets) = self.fleets.get(request_id) {
            return Ok(fleets);
        }
        let chain = self.store.job_chain(request_id).await?;
        let fleets = Arc::new(graph::elements::fleets(&chain));
        self.fleets.put(request_id, Arc::clone(&fleets));
        Ok(fleets)
    }

    /// Fills in `request.elements`: each expansion's elements by state (from each job's
    /// latest state and the tries running now). A request whose every job completed has
    /// every element complete, and a finished one's summary is kept: neither reads its
    /// job states again (a 100,000-host request has 100,000 of them).
    pub async fn summarize_elements(&self, request: &mut Request) -> Result<(), Error> {
        self.summarize_elements_with(request, None).await
    }

    /// [`Manager::summarize_elements`] with the request's job states when a caller has
    /// read them already (`None`: read here when needed).
    pub(super) async fn summarize_elements_with(
        &self,
        request: &mut Request,
        states: Option<Vec<store::JobState>>,
    ) -> Result<(), Error> {
        let fleets = self.fleets(&request.id).await?;
        if fleets.is_empty() {
            return Ok(());
        }
        if request.total_jobs > 0 && request.finished_jobs >= request.total_jobs {
            request.elements = fleets.iter().map(all_complete).collect();
            return Ok(());
        }
        let ended = request.finished_at.filter(|_| request.state.is_finished());
        if let Some(ended) = ended
            && let Some(kept) = self.fleets.summary(&request.id, ended)
        {
            request.elements = kept;
            return Ok(());
        }
        let states = match states {
            Some(states) => states,
            None => self.store.job_states(&request.id).await?,
        };
        let mut seen: HashMap<String, Seen> = HashMap::with_capacity(states.len());
        for job in states {
            seen.insert(
                job.job_id,
                Seen {
                    state: Some(job.state),
                    tries: job.tries,
                    ..Seen::default()
                },
            );
        }
        self.mark_running(&request.id, &mut seen).await?;
        let running = request.state == State::Running;
        let lookup = |id: &str| seen.get(id).copied().unwrap_or_default();
        request.elements = fleets
            .iter()
            .map(|fleet| summary(fleet, &lookup, running))
            .collect();
        if let Some(ended) = ended {
            self.fleets
                .keep_summary(&request.id, ended, request.elements.clone());
        }
        Ok(())
    }

    /// [`Manager::summarize_elements`] from job states a caller has read already (the web
    /// UI's poll): `state(job_id)` is a job's state and tries (RUNNING for a try under
    /// way), `None` before it began.
    pub async fn summarize_elements_from(
        &self,
        request: &mut Request,
        state: impl Fn(&str) -> Option<(State, u32)>,
    ) -> Result<(), Error> {
        let fleets = self.fleets(&request.id).await?;
        if fleets.is_empty() {
            return Ok(());
        }
        let lookup = |id: &str| match state(id) {
            Some((State::Running, tries)) => Seen {
                running: true,
                tries,
                ..Seen::default()
            },
            Some((state, tries)) => Seen {
                state: Some(state),
                tries,
                ..Seen::default()
            },
            None => Seen::default(),
        };
        let running = request.state == State::Running;
        request.elements = fleets
            .iter()
            .map(|fleet| summary(fleet, &lookup, running))
            .collect();
        Ok(())
    }

    /// Every element of the request's expansions (of `node` only, when given; in
    /// `state` only, when given), with its state, tries and times.
    pub async fn elements(
        &self,
        request_id: &str,
        node: Option<&str>,
        state: Option<State>,
    ) -> Result<Vec<ElementStatus>, Error> {
        let request = self.store.get_request(request_id, false).await?;
        let fleets = self.fleets(request_id).await?;
        if let Some(node) = node
            && !fleets.iter().any(|fleet| fleet.node == node)
        {
            let known: Vec<&str> = fleets.iter().map(|fleet| fleet.node.as_str()).collect();
            return Err(Error::BadRequest(format!(
                "request {request_id} has no each: node {node:?}; expected one of: {}",
                if known.is_empty() {
                    "(none: it expands no node)".to_owned()
                } else {
                    known.join(", ")
                }
            )));
        }
        let mut seen: HashMap<String, Seen> = HashMap::new();
        for entry in self.store.logged_tries(request_id).await? {
            let job = seen.entry(entry.job_id).or_default();
            if job.started_at == 0 || entry.started_at < job.started_at {
                job.started_at = entry.started_at;
            }
            job.finished_at = job.finished_at.max(entry.finished_at);
            if entry.r#try >= job.tries {
                job.tries = entry.r#try;
                job.state = Some(entry.state);
            }
        }
        self.mark_running(request_id, &mut seen).await?;
        let running = request.state == State::Running;
        Ok(fleets
            .iter()
            .filter(|fleet| node.is_none_or(|node| fleet.node == node))
            .flat_map(|fleet| {
                statuses(
                    fleet,
                    &|id: &str| seen.get(id).copied().unwrap_or_default(),
                    running,
                )
            })
            .filter(|element| state.is_none_or(|state| element.state == state))
            .collect())
    }

    /// Marks the jobs with a try running now (started, not ended).
    async fn mark_running(
        &self,
        request_id: &str,
        seen: &mut HashMap<String, Seen>,
    ) -> Result<(), Error> {
        for started in self.store.try_starts(request_id).await? {
            let job = seen.entry(started.start.job_id).or_default();
            if started.start.r#try > job.tries || job.state.is_none() {
                job.running = true;
                job.tries = job.tries.max(started.start.r#try);
                if job.started_at == 0 {
                    job.started_at = started.start.started_at;
                }
            }
        }
        Ok(())
    }
}

/// An element's state from its jobs': RUNNING while one of them runs (or, in a running
/// request, while it is part way); FAIL once one failed; COMPLETE once all completed;
/// STOPPED when one was stopped or it ended part way; PENDING before any began.
fn state_of_element(jobs: &[Seen], request_running: bool) -> State {
    let any = |wanted: &[State]| {
        jobs.iter()
            .any(|job| job.state.is_some_and(|state| wanted.contains(&state)))
    };
    let begun = jobs.iter().any(|job| job.running || job.state.is_some());
    if jobs.iter().any(|job| job.running) {
        State::Running
    } else if any(&[State::Fail, State::Unknown]) {
        State::Fail
    } else if jobs.iter().all(|job| job.state == Some(State::Complete)) {
        State::Complete
    } else if !begun {
        State::Pending
    } else if request_running && !any(&[State::Stopped]) {
        State::Running
    } else {
        State::Stopped
    }
}

/// Each element of `fleet` as its jobs say ([`state_of_element`]), with its tries and times.
fn statuses(
    fleet: &Fleet,
    seen: &dyn Fn(&str) -> Seen,
    request_running: bool,
) -> Vec<ElementStatus> {
    fleet
        .elements
        .iter()
        .map(|element| {
            let jobs: Vec<Seen> = element.jobs.iter().map(|id| seen(id)).collect();
            let state = state_of_element(&jobs, request_running);
            let ended = matches!(state, State::Complete | State::Fail | State::Stopped);
            ElementStatus {
                node: fleet.node.clone(),
                name: element.name.clone(),
                wave: element.wave,
                state,
                tries: jobs.iter().map(|job| job.tries).max().unwrap_or(0),
                started_at: jobs
                    .iter()
                    .map(|job| job.started_at)
                    .filter(|&at| at > 0)
                    .min()
                    .unwrap_or(0),
                finished_at: if ended {
                    jobs.iter().map(|job| job.finished_at).max().unwrap_or(0)
                } else {
                    0
                },
                jobs: element.jobs.clone(),
                job: element.shown.clone(),
            }
        })
        .collect()
}

/// One expansion whose every element completed.
fn all_complete(fleet: &Fleet) -> ElementsSummary {
    let count = fleet.elements.len() as u32;
    ElementsSummary {
        node: fleet.node.clone(),
        count,
        complete: count,
        max_failures: fleet.max_failures,
        waves: fleet.waves,
        ..ElementsSummary::default()
    }
}

/// One expansion's elements by state, the first failed ones named: each element's state
/// alone, nothing of it copied (100,000 elements are summed up at a request's every read).
fn summary(fleet: &Fleet, seen: &dyn Fn(&str) -> Seen, request_running: bool) -> ElementsSummary {
    let mut summary = ElementsSummary {
        node: fleet.node.clone(),
        count: fleet.elements.len() as u32,
        max_failures: fleet.max_failures,
        waves: fleet.waves,
        ..ElementsSummary::default()
    };
    let mut jobs: Vec<Seen> = Vec::new();
    for element in &fleet.elements {
        jobs.clear();
        jobs.extend(element.jobs.iter().map(|id| seen(id)));
        match state_of_element(&jobs, request_running) {
            State::Complete => summary.complete += 1,
            State::Fail => {
                summary.failed += 1;
                if summary.failed_elements.len() < NAMED_FAILURES {
                    summary.failed_elements.push(element.name.clone());
                }
            }
            State::Running => summary.running += 1,
            State::Stopped => summary.stopped += 1,
            _ => summary.pending += 1,
        }
    }
    summary
}
