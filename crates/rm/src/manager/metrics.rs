//! What the Request Manager tells its metrics and traces: gauges read from the
//! database, and each request's end (counted, its trace's root span, its waiters woken).

use super::*;

impl Manager {
    pub fn telemetry(&self) -> &Telemetry {
        &self.options.telemetry
    }

    /// Sets the gauges read from the database (requests by state, job runners by
    /// state), for a scrape of `/metrics`.
    pub async fn refresh_gauges(&self) {
        let Some(metrics) = &self.options.telemetry.metrics else {
            return;
        };
        let states = [State::Pending, State::Running, State::Suspended];
        if let Ok(counts) = self.store.count_requests(&states, None).await {
            let counts: Vec<(String, i64)> = counts
                .into_iter()
                .map(|(state, n)| (state.to_string(), i64::try_from(n).unwrap_or(i64::MAX)))
                .collect();
            let names: Vec<String> = states.iter().map(ToString::to_string).collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            telemetry::Metrics::set_states(&metrics.requests, &names, &counts);
        }
        let now = Utc::now();
        if let Ok(runners) = self.store.job_runners(now, now).await {
            let count = |state: RunnerState| {
                runners
                    .iter()
                    .filter(|runner| runner.state == state)
                    .count() as i64
            };
            let counts = [
                ("live".to_owned(), count(RunnerState::Live)),
                ("lost".to_owned(), count(RunnerState::Lost)),
            ];
            telemetry::Metrics::set_states(&metrics.job_runners, &["live", "lost"], &counts);
        }
        if let Ok(claims) = self.store.lock_claims().await {
            // By lock name: holders and waiters (a request counted once per key it claims).
            let mut counts: Vec<(String, i64, i64)> = Vec::new();
            for (claim, holder) in claims {
                if counts.last().is_none_or(|(name, _, _)| *name != claim.name) {
                    counts.push((claim.name.clone(), 0, 0));
                }
                let last = counts.last_mut().expect("pushed above");
                if holder.held_since.is_some() {
                    last.1 += 1;
                } else {
                    last.2 += 1;
                }
            }
            metrics.set_locks(&counts);
        }
    }

    /// A request reached its final state: counted, and its trace's root span emitted
    /// (from its creation to now). Called once per request, by whoever stored the end.
    pub(super) fn request_ended(&self, request: &Request) {
        // Its locks were released with its end: the next in their queues may go.
        if self.locks_declared() {
            self.lock_released.notify_one();
        }
        self.wake_notifications();
        let waiting = self
            .waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&request.id)
            .map(|waiter| Arc::clone(&waiter.notify));
        if let Some(waiting) = waiting {
            waiting.notify_waiters();
        }
        let telemetry = &self.options.telemetry;
        let finished = request.finished_at.unwrap_or_else(Utc::now);
        if let Some(metrics) = &telemetry.metrics {
            let took = (finished - request.created_at).to_std().unwrap_or_default();
            metrics.request_finished(&request.request_type, request.state, took);
        }
        telemetry.span(|| {
            let root = traces::request_root(&request.id);
            let mut span = Span::new("request", root, None)
                .times(request.created_at.into(), finished.into())
                .attr("spindle.request_id", request.id.clone())
                .attr("spindle.request_type", request.request_type.clone())
                .attr("spindle.state", request.state.to_string())
                .attr("spindle.user", request.user.clone())
                .attr("spindle.total_jobs", request.total_jobs as i64)
                .attr("spindle.finished_jobs", request.finished_jobs as i64);
            if request.state != State::Complete {
                span.error = Some(if request.error.is_empty() {
                    format!("the request ended {}", request.state)
                } else {
                    request.error.clone()
                });
            }
            span
        });
    }

    /// Reads a request that ended and counts it (the paths that fail a request).
    pub(super) async fn ended(&self, request_id: &str) {
        if let Ok(request) = self.store.get_request(request_id, false).await
            && request.state.is_finished()
        {
            self.request_ended(&request);
        }
    }
}
