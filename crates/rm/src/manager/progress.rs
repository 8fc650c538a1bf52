//! A request's progress as people are shown it (`GET /api/v1/requests/{id}`, `spindle
//! status`): its own jobs complete and its `each:` elements by state. Both come from the
//! job states of a partly done request, read once for the two. A running request whose
//! progress took long to work out (100,000 job states take a few hundred milliseconds to
//! read) is answered from the progress last worked out for a while after, so that a
//! client polling it does not spend the server's time re-reading the same rows: see
//! [`KEPT_PAST`] and [`KEPT_FOR_TIMES`].

use std::collections::HashMap;
use std::time::Instant;

use proto::ElementsSummary;

use super::reads::{own_complete, own_finished_without_states, partly_finished};
use super::*;

/// A running request's progress that took at least this long to work out is kept;
/// a quicker one is worked out at every read (most requests: a few milliseconds).
const KEPT_PAST: Duration = Duration::from_millis(50);

/// A kept progress answers for this many times what it took to work out (so re-reading
/// costs at most about a tenth of the time a client polls it), and never longer than
/// [`KEPT_AT_MOST`].
const KEPT_FOR_TIMES: u32 = 10;

/// The longest a running request's progress may lag behind its job log.
const KEPT_AT_MOST: Duration = Duration::from_secs(3);

/// How long something read of a running request in `took` may answer for it after: not at
/// all under [`KEPT_PAST`], else [`KEPT_FOR_TIMES`] what it took, [`KEPT_AT_MOST`] at
/// most. A request's progress keeps to it, and so do the web UI's polls of a big running
/// request's job states.
pub fn kept_for(took: Duration) -> Option<Duration> {
    (took >= KEPT_PAST).then(|| (took * KEPT_FOR_TIMES).min(KEPT_AT_MOST))
}

/// Requests whose progress is kept at most; past it, the kept ones are dropped.
const KEPT_REQUESTS: usize = 256;

/// The kept progress of running requests, by request id.
#[derive(Default)]
pub(super) struct ProgressCache(Mutex<HashMap<String, Kept>>);

struct Kept {
    until: Instant,
    /// The request's `finished_jobs` when it was worked out: fewer now (a retry began
    /// again) and it is worked out again.
    finished_jobs: u64,
    own_finished_jobs: u64,
    elements: Vec<ElementsSummary>,
}

impl ProgressCache {
    /// Fills in `request`'s kept progress if it still answers for it.
    fn fill(&self, request: &mut Request) -> bool {
        let mut kept = self.lock();
        let Some(progress) = kept.get(&request.id) else {
            return false;
        };
        if progress.until <= Instant::now() || request.finished_jobs < progress.finished_jobs {
            kept.remove(&request.id);
            return false;
        }
        request.own_finished_jobs = progress.own_finished_jobs;
        request.elements = progress.elements.clone();
        true
    }

    fn keep(&self, request: &Request, took: Duration) {
        let mut kept = self.lock();
        if kept.len() >= KEPT_REQUESTS {
            kept.clear();
        }
        kept.insert(
            request.id.clone(),
            Kept {
                until: Instant::now() + kept_for(took).unwrap_or_default(),
                finished_jobs: request.finished_jobs,
                own_finished_jobs: request.own_finished_jobs,
                elements: request.elements.clone(),
            },
        );
    }

    /// Forgets a request's kept progress (it was retried or stopped here).
    pub(super) fn forget(&self, request_id: &str) {
        self.lock().remove(request_id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Kept>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Manager {
    /// Fills in the request's own finished jobs ([`Manager::count_own_finished`]) and its
    /// elements' summary ([`Manager::summarize_elements`]), its job states read at most
    /// once for both. A running request's progress may be one worked out shortly before
    /// (a big request's only; see the module's comment).
    pub async fn fill_progress(&self, request: &mut Request) -> Result<(), Error> {
        let running = request.state == State::Running;
        if running && self.progress.fill(request) {
            return Ok(());
        }
        let began = Instant::now();
        let states = if partly_finished(request) {
            let states = self.store.job_states(&request.id).await?;
            request.own_finished_jobs = own_complete(&states);
            Some(states)
        } else {
            request.own_finished_jobs = own_finished_without_states(request);
            None
        };
        self.summarize_elements_with(request, states).await?;
        let took = began.elapsed();
        if running && kept_for(took).is_some() {
            self.progress.keep(request, took);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(finished_jobs: u64) -> Request {
        Request {
            id: "r1".to_owned(),
            request_type: "deploy".to_owned(),
            state: State::Running,
            user: "ann".to_owned(),
            args: Vec::new(),
            created_at: chrono::Utc::now(),
            started_at: None,
            finished_at: None,
            total_jobs: 100,
            finished_jobs,
            own_jobs: 90,
            own_finished_jobs: 0,
            job_chain: None,
            jr_url: String::new(),
            error: String::new(),
            paused: false,
            spec_version: String::new(),
            elements: Vec::new(),
        }
    }

    #[test]
    fn kept_progress_answers_until_it_lapses_or_the_request_began_again() {
        let cache = ProgressCache::default();
        let mut worked_out = request(10);
        worked_out.own_finished_jobs = 7;
        worked_out.elements = vec![ElementsSummary {
            node: "hosts".to_owned(),
            count: 3,
            ..ElementsSummary::default()
        }];
        cache.keep(&worked_out, Duration::from_millis(100));

        let mut later = request(12);
        assert!(cache.fill(&mut later), "kept for ten times what it took");
        assert_eq!(later.own_finished_jobs, 7);
        assert_eq!(later.elements, worked_out.elements);

        let mut retried = request(2);
        assert!(
            !cache.fill(&mut retried),
            "fewer finished jobs: worked out again"
        );
        assert_eq!(retried.own_finished_jobs, 0);
        assert!(!cache.fill(&mut later), "and no longer kept");

        cache.keep(&worked_out, Duration::ZERO);
        assert!(!cache.fill(&mut later), "lapsed at once");
        assert_eq!(
            kept_for(Duration::from_millis(49)),
            None,
            "quick: read again"
        );
        assert_eq!(
            kept_for(Duration::from_millis(50)),
            Some(Duration::from_millis(500))
        );

        cache.keep(&worked_out, Duration::from_secs(60));
        let until = cache.lock().get("r1").map(|kept| kept.until).unwrap();
        assert!(
            until <= Instant::now() + KEPT_AT_MOST,
            "never longer than the cap"
        );
        cache.forget("r1");
        assert!(!cache.fill(&mut later), "forgotten");
    }
}
