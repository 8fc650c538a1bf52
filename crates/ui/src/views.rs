//! The UI's view endpoints (`/ui/api`), beside Spin Cycle's API: what a request page
//! draws and polls. A chain never changes once stored, so its [`Structure`] is built once
//! and kept (the most recent [`CACHED`] requests); a poll reads only the jobs' latest
//! states from the store (or those kept from a poll shortly before: `kept.rs`) and
//! answers with what the viewer draws.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::{Path, Query, State as Extract};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use graph::structure::Outline;
use proto::{JobLog, JobStatus, Request, State};
use rm::{Error, Manager};
use serde::{Deserialize, Serialize};

use crate::kept::{KeptStates, Running, States};
use crate::layout::{Drawing, Frame, Item, Structure, Toggles};

/// Chains whose structure is kept in memory.
pub const CACHED: usize = 32;
/// Failed jobs a poll names (the first ones, in run order).
pub const FAILED_SHOWN: usize = 50;

/// The view endpoints' state: the manager and the structures of recent chains.
#[derive(Debug)]
pub struct Views {
    manager: Arc<Manager>,
    cache: Mutex<Cache>,
}

#[derive(Debug, Default)]
struct Cache {
    chains: HashMap<String, Arc<Structure>>,
    order: VecDeque<String>,
    /// Job states kept between polls (only of the chains kept).
    kept: KeptStates,
}

impl Views {
    pub fn new(manager: Arc<Manager>) -> Views {
        Views {
            manager,
            cache: Mutex::new(Cache::default()),
        }
    }

    /// The structure of a request's chain, built on first use from its stored JSON's
    /// outline (on the blocking pool: a 100,000-job chain takes a few hundred
    /// milliseconds; its jobs' args are never read).
    pub async fn structure(&self, request_id: &str) -> Result<Arc<Structure>, Error> {
        if let Some(found) = self.lock().chains.get(request_id) {
            return Ok(found.clone());
        }
        let json = self.manager.job_chain_json(request_id).await?;
        let id = request_id.to_owned();
        let structure = tokio::task::spawn_blocking(move || {
            let outline = Outline::from_json(&json).map_err(|err| {
                Error::internal(format!(
                    "the stored chain of request {id} does not read: {err}"
                ))
            })?;
            drop(json);
            Ok::<_, Error>(Structure::of_outline(outline))
        })
        .await
        .map_err(|err| Error::internal(format!("laying out the chain failed: {err}")))??;
        let structure = Arc::new(structure);
        let mut cache = self.lock();
        if !cache.chains.contains_key(request_id) {
            cache
                .chains
                .insert(request_id.to_owned(), structure.clone());
            cache.order.push_back(request_id.to_owned());
            while cache.order.len() > CACHED {
                if let Some(old) = cache.order.pop_front() {
                    cache.chains.remove(&old);
                    cache.kept.forget(&old);
                }
            }
        }
        Ok(structure)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every job's state now: its latest logged try, RUNNING for a try that started (a
    /// durable start, or the runner says so) and has no entry yet, else PENDING.
    /// Those of a finished or a big running request may be kept from a poll before
    /// (`kept.rs`).
    pub async fn states(
        &self,
        request: &Request,
        structure: &Structure,
    ) -> Result<(States, Running), Error> {
        if let Some(kept) = self.lock().kept.get(request) {
            return Ok(kept);
        }
        let began = Instant::now();
        let mut states = vec![(State::Pending, 0u32); structure.job_count()];
        for latest in self.manager.job_states(&request.id).await? {
            if let Some(&j) = structure.index.get(&latest.job_id) {
                states[j as usize] = (latest.state, latest.tries);
            }
        }
        let mut running = Vec::new();
        if request.state == State::Running {
            for started in self.manager.try_starts(&request.id).await? {
                if let Some(&j) = structure.index.get(&started.start.job_id)
                    && started.start.r#try > states[j as usize].1
                {
                    states[j as usize] = (State::Running, started.start.r#try);
                }
            }
            running = self.manager.running_jobs(request).await;
            for job in &running {
                if let Some(&j) = structure.index.get(&job.job_id)
                    && job.r#try >= states[j as usize].1
                {
                    states[j as usize] = (State::Running, job.r#try.max(1));
                }
            }
        }
        let (states, running) = (Arc::new(states), Arc::new(running));
        let mut cache = self.lock();
        // Only the states of a chain still kept, so that they leave with it.
        if cache.chains.contains_key(&request.id) {
            let took = began.elapsed();
            let jobs = structure.job_count();
            cache.kept.keep(request, jobs, took, &states, &running);
        }
        Ok((states, running))
    }
}

#[derive(Debug, Default, Deserialize)]
struct ViewQuery {
    #[serde(default)]
    open: String,
    #[serde(default)]
    closed: String,
    /// `args=0`: leave the request's args out (a page has them from its first poll).
    #[serde(default)]
    args: Option<String>,
    /// The drawing frame's size in pixels, which a tall fan-out is wrapped to fit.
    width: Option<f64>,
    height: Option<f64>,
}

impl ViewQuery {
    /// The frame asked for, each side within reason ([`Frame::DEFAULT`]'s where unsaid).
    fn frame(&self) -> Frame {
        let side = |asked: Option<f64>, default: f64| {
            asked
                .filter(|v| v.is_finite())
                .map_or(default, |v| v.clamp(160.0, 20_000.0))
        };
        Frame {
            width: side(self.width, Frame::DEFAULT.width),
            height: side(self.height, Frame::DEFAULT.height),
        }
    }
}

type Shared = Extract<Arc<Views>>;

pub(crate) fn routes(views: Arc<Views>) -> Router {
    Router::new()
        .route("/ui/api/requests/{id}/graph", get(graph))
        .route("/ui/api/requests/{id}/states", get(states))
        .route("/ui/api/requests/{id}/jobs/{job_id}", get(job))
        .route("/ui/api/counts", get(counts))
        .with_state(views)
}

async fn graph(
    Extract(views): Shared,
    Path(id): Path<String>,
    Query(query): Query<ViewQuery>,
) -> Result<Json<Drawing>, Error> {
    let structure = views.structure(&id).await?;
    let toggles = Toggles::parse(&query.open, &query.closed);
    Ok(Json(structure.draw_in(&toggles, Some(query.frame()))))
}

/// A job's state as a poll names it.
#[derive(Debug, Serialize)]
struct JobNow {
    state: State,
    tries: u32,
    /// The running try's status line, when the runner gives one.
    #[serde(skip_serializing_if = "String::is_empty")]
    status: String,
}

/// A failed job, for the list beside the drawing.
#[derive(Debug, Serialize)]
struct Failed {
    id: String,
    name: String,
    tries: u32,
    /// The `each:` elements of the groups holding it (`host=web-2`), which tell a
    /// fan-out's iterations apart; empty outside any.
    #[serde(skip_serializing_if = "String::is_empty")]
    each: String,
    /// The groups holding it, outermost first, by id: what to open to see it.
    groups: Vec<String>,
}

/// What a request page polls.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Poll {
    request: Request,
    /// The drawn jobs' states, by id.
    jobs: BTreeMap<String, JobNow>,
    /// The drawn groups' (closed and open) and more nodes' counts, by id and state name.
    groups: BTreeMap<String, BTreeMap<&'static str, u32>>,
    /// The whole request's counts of its own jobs (not the wrappers), by state name.
    counts: BTreeMap<&'static str, u32>,
    failed: Vec<Failed>,
    /// Failed jobs in all.
    failed_total: u32,
    /// A FAIL request's reason in one line, when its `error` has none: the first failed
    /// job's and its last try's error (issue #47: the header says why without opening it).
    #[serde(skip_serializing_if = "String::is_empty")]
    failure: String,
}

/// `job NAME [EACH] failed (try N): ERROR`, the error's first line, cut to 200 characters.
fn failure_line(failed: &Failed, entry: &proto::JobLog) -> String {
    let each = if failed.each.is_empty() {
        String::new()
    } else {
        format!(" [{}]", failed.each)
    };
    let first = entry.error.lines().next().unwrap_or_default();
    let mut error: String = first.chars().take(200).collect();
    if error.len() < entry.error.len() {
        error.push('…');
    }
    if error.is_empty() {
        error = format!("exit {}", entry.exit);
    }
    format!(
        "job {}{each} failed (try {}): {error}",
        failed.name, entry.r#try
    )
}

fn state_name(state: State) -> &'static str {
    state.name()
}

// Long because it assembles one poll's answer from the same drawing and job states:
// counts by state for the request and each group, the failed jobs, each drawn job's
// state and status line, each closed group's and "more" node's counts.
async fn states(
    Extract(views): Shared,
    Path(id): Path<String>,
    Query(query): Query<ViewQuery>,
) -> Result<Json<Poll>, Error> {
    let mut request = views.manager.get(&id, false).await?;
    let structure = views.structure(&id).await?;
    let (states, running) = views.states(&request, &structure).await?;
    // Each expansion's elements by state, for the elements view's summary, from the
    // states just read.
    views
        .manager
        .summarize_elements_from(&mut request, |job_id| {
            let &j = structure.index.get(job_id)?;
            let (state, tries) = states[j as usize];
            (tries > 0 || state != State::Pending).then_some((state, tries))
        })
        .await?;
    if query.args.as_deref() == Some("0") {
        request.args.clear();
    }
    let toggles = Toggles::parse(&query.open, &query.closed);
    let drawing = structure.draw(&toggles);
    // Counts per group: each job adds to every group holding it.
    let mut per_group: Vec<[u32; 8]> = vec![[0; 8]; structure.groups.len()];
    let mut counts = [0u32; 8];
    let slot = |state: State| State::ALL.iter().position(|s| *s == state).unwrap_or(0);
    let mut failed = Vec::new();
    let mut failed_total = 0;
    for (j, (state, tries)) in states.iter().enumerate() {
        let s = slot(*state);
        // The request's and its groups' counts are of their own jobs, not the grapher's
        // begin and end wrappers.
        if !structure.is_wrapper(j as u32) {
            counts[s] += 1;
            for g in structure.ancestors(j as u32) {
                per_group[g as usize][s] += 1;
            }
        }
        if *state == State::Fail {
            failed_total += 1;
            if failed.len() < FAILED_SHOWN {
                let mut groups: Vec<String> = structure
                    .ancestors(j as u32)
                    .filter(|g| *g != 0)
                    .map(|g| structure.groups[g as usize].id.clone())
                    .collect();
                groups.reverse();
                let each: Vec<&str> = structure
                    .ancestors(j as u32)
                    .map(|g| structure.groups[g as usize].each.as_str())
                    .filter(|each| !each.is_empty())
                    .collect();
                failed.push(Failed {
                    id: structure.job_id(j as u32).to_owned(),
                    name: structure.label(j as u32).to_owned(),
                    tries: *tries,
                    each: each.into_iter().rev().collect::<Vec<_>>().join(", "),
                    groups,
                });
            }
        }
    }
    let named = |counts: &[u32; 8]| -> BTreeMap<&'static str, u32> {
        State::ALL
            .iter()
            .zip(counts)
            .filter(|(_, n)| **n > 0)
            .map(|(s, n)| (state_name(*s), *n))
            .collect()
    };
    let status: HashMap<&str, &str> = running
        .iter()
        .map(|job| (job.job_id.as_str(), job.status.as_str()))
        .collect();
    let jobs = drawing
        .jobs
        .iter()
        .map(|&j| {
            let id = structure.job_id(j).to_owned();
            let (state, tries) = states[j as usize];
            let status = status
                .get(id.as_str())
                .copied()
                .unwrap_or_default()
                .to_owned();
            (
                id,
                JobNow {
                    state,
                    tries,
                    status,
                },
            )
        })
        .collect();
    let mut groups: BTreeMap<String, BTreeMap<&'static str, u32>> = drawing
        .closed
        .iter()
        .chain(&drawing.opened)
        .map(|&g| {
            (
                structure.groups[g as usize].id.clone(),
                named(&per_group[g as usize]),
            )
        })
        .collect();
    for (more, items) in &drawing.more {
        let mut sum = [0u32; 8];
        for item in items {
            match *item {
                Item::Job(j) if structure.is_wrapper(j) => {}
                Item::Job(j) => sum[slot(states[j as usize].0)] += 1,
                Item::Group(g) => {
                    for (total, n) in sum.iter_mut().zip(per_group[g as usize]) {
                        *total += n;
                    }
                }
            }
        }
        groups.insert(more.clone(), named(&sum));
    }
    let failure = match failed.first() {
        Some(first) if request.state == State::Fail && request.error.is_empty() => views
            .manager
            .latest_job_log(&proto::RequestId::new(id.clone()), &first.id)
            .await
            .map(|entry| failure_line(first, &entry))
            .unwrap_or_default(),
        _ => String::new(),
    };
    Ok(Json(Poll {
        request,
        jobs,
        groups,
        counts: named(&counts),
        failed,
        failed_total,
        failure,
    }))
}

/// One job: what the chain says of it, its tries, and the try running now.
#[derive(Debug, Serialize)]
struct JobView {
    id: String,
    name: String,
    #[serde(rename = "type")]
    job_type: String,
    retry: u32,
    #[serde(rename = "retryWait")]
    retry_wait: String,
    each: proto::JobArgs,
    state: State,
    tries: Vec<JobLog>,
    /// The try running now and its start (Unix nanoseconds), if one is.
    running: Option<JobStatus>,
}

async fn job(
    Extract(views): Shared,
    Path((id, job_id)): Path<(String, String)>,
) -> Result<Response, Error> {
    let request = views.manager.get(&id, false).await?;
    let structure = views.structure(&id).await?;
    let Some(&j) = structure.index.get(&job_id) else {
        return Err(Error::NotFound(format!(
            "job {job_id} of request {id} not found"
        )));
    };
    let tries = views.manager.job_tries_log(&id, &job_id).await?;
    let (states, running) = views.states(&request, &structure).await?;
    let job = structure.job(j);
    let mut running = running
        .iter()
        .find(|status| status.job_id == job_id)
        .cloned();
    if running.is_none() && states[j as usize].0 == State::Running {
        running = Some(JobStatus {
            request_id: id.clone(),
            job_id: job_id.clone(),
            job_type: job.job_type.clone(),
            name: job.name.clone(),
            state: State::Running,
            r#try: states[j as usize].1,
            ..JobStatus::default()
        });
    }
    Ok(Json(JobView {
        id: job_id,
        name: job.name.clone(),
        job_type: job.job_type.clone(),
        retry: job.retry,
        retry_wait: job.retry_wait.clone(),
        each: job.each.to_args(),
        state: states[j as usize].0,
        tries,
        running,
    })
    .into_response())
}

/// The list's counts by state stop here (the page says "10,000+").
pub const COUNTED_UP_TO: u64 = 10_000;

/// Requests by state name, every state present (0 when none); a count past
/// [`COUNTED_UP_TO`] is that plus one ("more"), so that a history of millions of finished
/// requests is not counted through at every refresh of the list.
async fn counts(Extract(views): Shared) -> Result<Json<BTreeMap<&'static str, u64>>, Error> {
    let found = views
        .manager
        .count_requests(&State::ALL, Some(COUNTED_UP_TO))
        .await?;
    let mut counts: BTreeMap<&'static str, u64> =
        State::ALL.iter().map(|s| (state_name(*s), 0)).collect();
    for (state, n) in found {
        counts.insert(state_name(state), n);
    }
    Ok(Json(counts))
}
