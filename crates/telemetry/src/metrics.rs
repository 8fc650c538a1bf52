//! The Prometheus metrics of both services, in one [`Metrics`] (a process that runs a
//! Request Manager and a Job Runner, `spindle server`, has one of each metric).
//!
//! Names follow Prometheus' conventions: counters end in `_total`, durations are
//! histograms in seconds. Labels are bounded: request types and job types come from the
//! specs and the job registry, states from [`proto::State`], routes are the router's
//! path templates (`/api/v1/requests/{id}`), never a request or job id.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State as AxumState};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

/// Bounds of the duration histograms, in seconds: 1 ms to about 2.3 hours.
const DURATION_BUCKETS: [f64; 16] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0, 300.0, 1800.0,
    8100.0,
];

/// Bounds of the store's query latency, in seconds: 100 µs to 5 s.
const QUERY_BUCKETS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 5.0,
];

/// Bounds of HTTP request latency, in seconds: 500 µs to 30 s.
const HTTP_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0,
];

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabel {
    pub r#type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeStateLabels {
    pub r#type: String,
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobTypeLabel {
    pub job_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobTypeStateLabels {
    pub job_type: String,
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabel {
    pub state: String,
}

/// A lock's name (not its key: one series per lock name, whatever the values).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LockLabel {
    pub lock: String,
}

/// A webhook and what an attempt to notify it did.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookResultLabels {
    pub webhook: String,
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabel {
    pub operation: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub method: String,
    pub route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteStatusLabels {
    pub method: String,
    pub route: String,
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VersionLabel {
    pub version: String,
}

/// Every metric Spindle exports, registered once in its registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    // The Request Manager's.
    pub requests_created: Family<TypeLabel, Counter>,
    pub requests_finished: Family<TypeStateLabels, Counter>,
    pub request_duration: Histograms<TypeLabel>,
    /// Requests by state (PENDING, RUNNING, SUSPENDED), read from the store at a scrape.
    pub requests: Family<StateLabel, Gauge>,
    pub tries_interrupted: Counter,
    /// Registered Job Runners by state (live, lost), read from the store at a scrape.
    pub job_runners: Family<StateLabel, Gauge>,
    /// Requests holding, and waiting for, each lock (read from the database at a scrape).
    pub lock_holders: Family<LockLabel, Gauge>,
    pub lock_waiters: Family<LockLabel, Gauge>,
    /// From a request's creation to its taking a lock.
    pub lock_wait: Histograms<LockLabel>,
    /// Creates refused, by why (`backlog`: past `max_backlog`).
    pub requests_refused: Family<KindLabel, Counter>,
    /// Attempts to send a notification, by webhook and result.
    pub notifications: Family<WebhookResultLabels, Counter>,
    /// Requests created and not yet handed to a Job Runner, as the backlog limit counts
    /// them (sampled from the database, plus this manager's creates since).
    pub backlog: Gauge,
    pub store_query_duration: Histograms<OperationLabel>,
    pub store_query_errors: Family<OperationLabel, Counter>,
    // The Job Runner's.
    pub job_tries: Family<JobTypeStateLabels, Counter>,
    pub try_duration: Histograms<JobTypeLabel>,
    pub job_retries: Family<JobTypeLabel, Counter>,
    pub jobs_running: Gauge,
    pub chains_running: Gauge,
    pub lease_renewals: Family<ResultLabel, Counter>,
    pub report_backlog: Gauge,
    pub report_failures: Family<KindLabel, Counter>,
    // Both services'.
    pub http_requests: Family<RouteStatusLabels, Counter>,
    pub http_duration: Histograms<RouteLabels>,
}

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

fn query_histogram() -> Histogram {
    Histogram::new(QUERY_BUCKETS)
}

fn http_histogram() -> Histogram {
    Histogram::new(HTTP_BUCKETS)
}

fn histograms<L: Clone + std::hash::Hash + Eq>(make: fn() -> Histogram) -> Histograms<L> {
    Family::new_with_constructor(make)
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    // Long because it registers every metric family, each with its name and help text,
    // one after another: a list, not logic.
    pub fn new() -> Metrics {
        let mut m = Metrics {
            registry: Registry::with_prefix("spindle"),
            requests_created: Family::default(),
            requests_finished: Family::default(),
            request_duration: histograms(duration_histogram),
            requests: Family::default(),
            tries_interrupted: Counter::default(),
            job_runners: Family::default(),
            lock_holders: Family::default(),
            lock_waiters: Family::default(),
            lock_wait: histograms(duration_histogram),
            requests_refused: Family::default(),
            notifications: Family::default(),
            backlog: Gauge::default(),
            store_query_duration: histograms(query_histogram),
            store_query_errors: Family::default(),
            job_tries: Family::default(),
            try_duration: histograms(duration_histogram),
            job_retries: Family::default(),
            jobs_running: Gauge::default(),
            chains_running: Gauge::default(),
            lease_renewals: Family::default(),
            report_backlog: Gauge::default(),
            report_failures: Family::default(),
            http_requests: Family::default(),
            http_duration: histograms(http_histogram),
        };
        let build = Family::<VersionLabel, Gauge>::default();
        build
            .get_or_create(&VersionLabel {
                version: proto::version(),
            })
            .set(1);
        let r = &mut m.registry;
        r.register(
            "build_info",
            "The running Spindle's version (always 1)",
            build,
        );
        r.register(
            "requests_created",
            "Requests created, by request type",
            m.requests_created.clone(),
        );
        r.register(
            "requests_finished",
            "Requests that reached a final state, by request type and state",
            m.requests_finished.clone(),
        );
        r.register_with_unit(
            "request_duration",
            "Time from a request's creation to its final state, by request type",
            Unit::Seconds,
            m.request_duration.clone(),
        );
        r.register(
            "requests",
            "Requests not finished, by state (read from the database at each scrape)",
            m.requests.clone(),
        );
        r.register(
            "job_tries_interrupted",
            "Job tries recorded as interrupted because their job runner was lost",
            m.tries_interrupted.clone(),
        );
        r.register(
            "job_runners",
            "Registered job runners by state, live or lost (read from the database at each scrape)",
            m.job_runners.clone(),
        );
        r.register(
            "requests_refused",
            "Creates refused, by kind (backlog: more requests wait to be handed to a job runner than max_backlog allows)",
            m.requests_refused.clone(),
        );
        r.register(
            "notifications",
            "Attempts to send a notification to a webhook, by webhook and result (delivered; failed: sent again later; given_up: its last attempt failed)",
            m.notifications.clone(),
        );
        r.register(
            "backlog",
            "Requests created and not yet handed to a job runner, as the backlog limit counts them",
            m.backlog.clone(),
        );
        r.register(
            "lock_holders",
            "Requests holding each lock, by lock name (read from the database at each scrape)",
            m.lock_holders.clone(),
        );
        r.register(
            "lock_waiters",
            "Requests waiting for each lock, by lock name (read from the database at each scrape)",
            m.lock_waiters.clone(),
        );
        r.register_with_unit(
            "lock_wait",
            "From a request's creation to its taking a lock, by lock name",
            Unit::Seconds,
            m.lock_wait.clone(),
        );
        r.register_with_unit(
            "store_query_duration",
            "Latency of the store's operations, by operation",
            Unit::Seconds,
            m.store_query_duration.clone(),
        );
        r.register(
            "store_query_errors",
            "Store operations that failed, by operation",
            m.store_query_errors.clone(),
        );
        r.register(
            "job_tries",
            "Job tries that ended, by job type and state",
            m.job_tries.clone(),
        );
        r.register_with_unit(
            "job_try_duration",
            "Duration of job tries, by job type",
            Unit::Seconds,
            m.try_duration.clone(),
        );
        r.register(
            "job_retries",
            "Job tries that were a retry (not a job's first try in its run), by job type",
            m.job_retries.clone(),
        );
        r.register(
            "jobs_running",
            "Jobs this job runner runs now (in a try or waiting to retry)",
            m.jobs_running.clone(),
        );
        r.register(
            "chains_running",
            "Job chains (requests) this job runner runs now",
            m.chains_running.clone(),
        );
        r.register(
            "lease_renewals",
            "Lease renewals of this job runner, by result (ok, failed)",
            m.lease_renewals.clone(),
        );
        r.register(
            "report_backlog",
            "Reports (job log entries, try starts, progress) waiting to be delivered to a request manager",
            m.report_backlog.clone(),
        );
        r.register(
            "report_delivery_failures",
            "Report deliveries to a request manager that failed, by kind (unavailable, failed, rejected, fenced)",
            m.report_failures.clone(),
        );
        r.register(
            "http_requests",
            "HTTP requests served, by method, route and status",
            m.http_requests.clone(),
        );
        r.register_with_unit(
            "http_request_duration",
            "Latency of HTTP requests served, by method and route",
            Unit::Seconds,
            m.http_duration.clone(),
        );
        m
    }

    /// The metrics in the OpenMetrics text format (which Prometheus scrapes).
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(16 * 1024);
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String does not fail");
        out
    }

    pub fn request_created(&self, request_type: &str) {
        self.requests_created
            .get_or_create(&TypeLabel {
                r#type: request_type.to_owned(),
            })
            .inc();
    }

    /// A request reached its final state `state` after `duration` since its creation.
    pub fn request_finished(&self, request_type: &str, state: proto::State, duration: Duration) {
        self.requests_finished
            .get_or_create(&TypeStateLabels {
                r#type: request_type.to_owned(),
                state: state.to_string(),
            })
            .inc();
        self.request_duration
            .get_or_create(&TypeLabel {
                r#type: request_type.to_owned(),
            })
            .observe(duration.as_secs_f64());
    }

    /// A store operation took `elapsed` and succeeded or not.
    pub fn store_query(&self, operation: &'static str, elapsed: Duration, ok: bool) {
        let label = OperationLabel {
            operation: operation.to_owned(),
        };
        self.store_query_duration
            .get_or_create(&label)
            .observe(elapsed.as_secs_f64());
        if !ok {
            self.store_query_errors.get_or_create(&label).inc();
        }
    }

    pub fn lease_renewed(&self, ok: bool) {
        self.lease_renewals
            .get_or_create(&ResultLabel {
                result: if ok { "ok" } else { "failed" }.to_owned(),
            })
            .inc();
    }

    /// A create was refused (`kind`: why, such as `backlog`).
    pub fn request_refused(&self, kind: &str) {
        self.requests_refused
            .get_or_create(&KindLabel {
                kind: kind.to_owned(),
            })
            .inc();
    }

    pub fn notification_attempt(&self, webhook: &str, result: &str) {
        self.notifications
            .get_or_create(&WebhookResultLabels {
                webhook: webhook.to_owned(),
                result: result.to_owned(),
            })
            .inc();
    }

    pub fn report_failed(&self, kind: &str) {
        self.report_failures
            .get_or_create(&KindLabel {
                kind: kind.to_owned(),
            })
            .inc();
    }

    /// Sets the lock gauges to exactly these counts, `(lock name, holders, waiters)`: a
    /// lock no longer held or waited for shows no series.
    pub fn set_locks(&self, counts: &[(String, i64, i64)]) {
        self.lock_holders.clear();
        self.lock_waiters.clear();
        for (lock, holders, waiters) in counts {
            let label = LockLabel { lock: lock.clone() };
            self.lock_holders.get_or_create(&label).set(*holders);
            self.lock_waiters.get_or_create(&label).set(*waiters);
        }
    }

    /// A request took a lock `waited` after its creation.
    pub fn lock_taken(&self, lock: &str, waited: Duration) {
        self.lock_wait
            .get_or_create(&LockLabel {
                lock: lock.to_owned(),
            })
            .observe(waited.as_secs_f64());
    }

    /// Sets a gauge family to exactly these values: every state listed, zero for those
    /// not counted, so a state that emptied shows 0 rather than its last count.
    pub fn set_states(
        family: &Family<StateLabel, Gauge>,
        states: &[&str],
        counts: &[(String, i64)],
    ) {
        for state in states {
            let n = counts
                .iter()
                .find(|(name, _)| name == state)
                .map_or(0, |(_, n)| *n);
            family
                .get_or_create(&StateLabel {
                    state: (*state).to_owned(),
                })
                .set(n);
        }
    }
}

/// One job type and state's try metrics, kept so that a try's end costs no lookup and
/// no allocation.
#[derive(Debug, Clone)]
struct TryHandles {
    job_type: String,
    state: proto::State,
    tries: Counter,
    duration: Histogram,
    retries: Counter,
}

/// The try metrics of one chain (one delivery task, so the lock is not contended): a
/// try's end by its job type and state, its duration, and whether it was a retry (not
/// its job's first try in the job's run), through handles looked up once per job type
/// and state.
#[derive(Debug)]
pub struct TryMetrics {
    metrics: Arc<Metrics>,
    handles: std::sync::Mutex<Vec<TryHandles>>,
}

impl TryMetrics {
    pub fn new(metrics: Arc<Metrics>) -> TryMetrics {
        TryMetrics {
            metrics,
            handles: std::sync::Mutex::default(),
        }
    }

    pub fn try_ended(&self, entry: &proto::JobLog, retry: bool) {
        let mut handles = self
            .handles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = handles
            .iter()
            .position(|h| h.state == entry.state && h.job_type == entry.job_type);
        let handle = match at {
            Some(at) => &handles[at],
            None => {
                let m = &self.metrics;
                let job_type = JobTypeLabel {
                    job_type: entry.job_type.clone(),
                };
                handles.push(TryHandles {
                    job_type: entry.job_type.clone(),
                    state: entry.state,
                    tries: m
                        .job_tries
                        .get_or_create(&JobTypeStateLabels {
                            job_type: entry.job_type.clone(),
                            state: entry.state.to_string(),
                        })
                        .clone(),
                    duration: m.try_duration.get_or_create(&job_type).clone(),
                    retries: m.job_retries.get_or_create(&job_type).clone(),
                });
                handles.last().expect("pushed")
            }
        };
        handle.tries.inc();
        let nanos = entry.finished_at.saturating_sub(entry.started_at).max(0);
        handle.duration.observe(nanos as f64 / 1e9);
        if retry {
            handle.retries.inc();
        }
    }
}

/// The `/metrics` answer: OpenMetrics text to a scraper that asks for it in `accept`
/// (Prometheus does), else Prometheus' classic text format (version 0.0.4), which every
/// other tool reads (`promtool check metrics`, curl).
pub fn response(metrics: &Metrics, accept: Option<&HeaderValue>) -> Response {
    let openmetrics = accept
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.contains("application/openmetrics-text"));
    let text = metrics.encode();
    if openmetrics {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            )],
            text,
        )
            .into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            )],
            classic_text(&text),
        )
            .into_response()
    }
}

/// OpenMetrics text as Prometheus' classic text format: a counter's family is named with
/// its `_total` (as its samples are), and the `# UNIT` and `# EOF` lines go.
pub fn classic_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<&str> = None;
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest);
            continue;
        }
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            let suffix = if kind == "counter" && !name.ends_with("_total") {
                "_total"
            } else {
                ""
            };
            if let Some(help) = help.take() {
                let text = help.split_once(' ').map_or("", |(_, text)| text);
                out.push_str(&format!("# HELP {name}{suffix} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name}{suffix} {kind}\n"));
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Middleware counting every HTTP request by method, route template and status, and
/// observing its latency. Added with `Router::layer` (so the matched route is known);
/// requests no route matched count under the route `unmatched`.
pub async fn track_http(
    AxumState(metrics): AxumState<Arc<Metrics>>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let method = match request.method().as_str() {
        m @ ("GET" | "POST" | "PUT" | "DELETE" | "HEAD" | "PATCH" | "OPTIONS") => m.to_owned(),
        _ => "other".to_owned(),
    };
    let response = next.run(request).await;
    let status = response.status();
    observe_http(&metrics, method, route, status, started.elapsed());
    response
}

fn observe_http(
    metrics: &Metrics,
    method: String,
    route: String,
    status: StatusCode,
    elapsed: Duration,
) {
    let labels = RouteLabels { method, route };
    metrics
        .http_duration
        .get_or_create(&labels)
        .observe(elapsed.as_secs_f64());
    metrics
        .http_requests
        .get_or_create(&RouteStatusLabels {
            method: labels.method,
            route: labels.route,
            status: status.as_u16().to_string(),
        })
        .inc();
}

/// The value of one series in a scrape's text, such as
/// `spindle_job_tries_total{job_type="sleep",state="COMPLETE"}` (labels in the order
/// the metric declares them); `None` when the scrape does not have it.
pub fn sample(scrape: &str, series: &str) -> Option<f64> {
    scrape.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.split_whitespace().next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every family is registered under Prometheus' conventions, and a counter counts.
    #[test]
    fn names_follow_prometheus_conventions_and_samples_are_read() {
        let metrics = Metrics::new();
        metrics.request_created("deploy");
        metrics.request_created("deploy");
        metrics.request_finished(
            "deploy",
            proto::State::Complete,
            Duration::from_millis(1500),
        );
        metrics.store_query("get_request", Duration::from_micros(300), false);
        let text = metrics.encode();
        assert_eq!(
            sample(&text, r#"spindle_requests_created_total{type="deploy"}"#),
            Some(2.0)
        );
        assert_eq!(
            sample(
                &text,
                r#"spindle_requests_finished_total{type="deploy",state="COMPLETE"}"#
            ),
            Some(1.0)
        );
        assert_eq!(
            sample(
                &text,
                r#"spindle_request_duration_seconds_sum{type="deploy"}"#
            ),
            Some(1.5)
        );
        assert_eq!(
            sample(
                &text,
                r#"spindle_store_query_errors_total{operation="get_request"}"#
            ),
            Some(1.0)
        );
        assert_eq!(sample(&text, "spindle_nothing_total"), None);
        for line in text.lines().filter(|line| line.starts_with("# TYPE ")) {
            let mut words = line.split(' ').skip(2);
            let (name, kind) = (words.next().unwrap(), words.next().unwrap());
            assert!(name.starts_with("spindle_"), "{line}");
            assert!(
                !name.ends_with("duration"),
                "a duration without its unit: {line}"
            );
            if kind == "histogram" {
                assert!(name.ends_with("_seconds"), "{line}");
            }
        }
    }
}
