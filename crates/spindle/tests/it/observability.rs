//! Issue #15, end to end with real processes: `/metrics` after a known workload (checked
//! by `promtool check metrics` when Prometheus' tools are installed), traces received by
//! an OTLP receiver inside the test with their parent links across the Request Manager
//! and the Job Runner, log lines that carry request and job ids, and `/readyz` turning
//! unready while the database is stopped and ready again when it is back.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;
use serde_json::{Value, json};

use crate::recovery::Client;
use crate::{Service, jr_args, rm_args};

/// `obs`: a no-op job, then a shell job that exits with the request's `code`, retried once.
const OBS: &str = r#"sequences:
  obs:
    request: true
    args:
      required:
        - name: code
          desc: the exit code of the second job's program
      static:
        - name: shell
          default: sh
        - name: script
          default: ["-c", 'exit "$SPINDLE_ARG_CODE"']
    nodes:
      first:
        category: job
        type: noop
      second:
        category: job
        type: shell-command
        deps: [first]
        retry: 1
        args:
          - {expected: code}
          - {expected: cmd, given: shell}
          - {expected: args, given: script}
"#;

fn obs_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("specs")).unwrap();
    std::fs::write(dir.path().join("specs/obs.yaml"), OBS).unwrap();
    dir
}

async fn create(client: &Client, code: u32) -> String {
    client.start("obs", json!({"code": code})).await
}

async fn wait_final(client: &Client, id: &str) -> u64 {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let state = client.request(id).await["state"].as_u64().unwrap();
        // COMPLETE 3, FAIL 4.
        if state == 3 || state == 4 {
            return state;
        }
        assert!(Instant::now() < until, "request {id} never ended");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A request's job log as sorted (job id, job type, try, state) rows.
async fn job_log(client: &Client, id: &str) -> Vec<(String, String, String, String)> {
    let log = client.get(&format!("/api/v1/requests/{id}/log")).await;
    let mut rows: Vec<(String, String, String, String)> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            let state = match entry["state"].as_u64() {
                Some(3) => "COMPLETE",
                Some(4) => "FAIL",
                Some(5) => "STOPPED",
                _ => "OTHER",
            };
            (
                entry["jobId"].as_str().unwrap().to_owned(),
                entry["type"].as_str().unwrap().to_owned(),
                entry["try"].to_string(),
                state.to_owned(),
            )
        })
        .collect();
    rows.sort();
    rows
}

async fn scrape(url: &str) -> String {
    tls();
    let response = reqwest::get(format!("{url}/metrics")).await.unwrap();
    assert_eq!(response.status(), 200);
    response.text().await.unwrap()
}

/// `promtool check metrics` on a scrape: required with `SPINDLE_TEST_PROMTOOL=required`
/// (CI), else skipped (with one line) when promtool is not installed.
fn promtool_check(test: &str, scrape: &str) {
    let required = std::env::var("SPINDLE_TEST_PROMTOOL").is_ok_and(|v| v == "required");
    let child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(err) => {
            assert!(
                !required,
                "{test}: promtool cannot run ({err}) and SPINDLE_TEST_PROMTOOL=required"
            );
            let line = format!(
                "{test}: promtool check skipped: promtool is not installed (Debian: prometheus); SPINDLE_TEST_PROMTOOL=required makes this a failure\n"
            );
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            return;
        }
    };
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), scrape.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}\n{scrape}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn at(scrape: &str, series: &str) -> f64 {
    telemetry::metrics::sample(scrape, series)
        .unwrap_or_else(|| panic!("no {series} in the scrape:\n{scrape}"))
}

/// The tests' lease: short, so that a runner renews (and counts it) soon.
const LEASE: &str = "2s";

/// HTTPS support for reqwest, before its first client (any test may come first).
fn tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

async fn wait_ready(url: &str) {
    tls();
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(response) = reqwest::get(format!("{url}/readyz")).await
            && response.status() == 200
        {
            return;
        }
        assert!(Instant::now() < until, "{url} never became ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Three requests (two COMPLETE, one FAIL after its retry) through `spindle rm` and
/// `spindle jr`: each one's metrics count exactly that, and pass promtool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_a_known_workload_and_pass_promtool() {
    let dir = obs_dir();
    let rm = Service::start(dir.path(), &rm_args("sqlite://rm.db", LEASE, &[]));
    let jr = Service::start(dir.path(), &jr_args(&rm.url, LEASE, &[]));
    wait_ready(&jr.url).await;
    let client = Client::new(&rm.url);
    let mut ids = Vec::new();
    for code in [0, 0, 3] {
        ids.push(create(&client, code).await);
    }
    let mut states = Vec::new();
    for id in &ids {
        states.push(wait_final(&client, id).await);
    }
    assert_eq!(states, [3, 3, 4]);
    // Both count a request's end just after storing or reporting it: wait for that.
    for (url, series, value) in [
        (
            &rm.url,
            r#"spindle_request_duration_seconds_count{type="obs"}"#,
            3.0,
        ),
        (&jr.url, "spindle_chains_running", 0.0),
    ] {
        let until = Instant::now() + Duration::from_secs(10);
        while telemetry::metrics::sample(&scrape(url).await, series) != Some(value) {
            assert!(Instant::now() < until, "{series} never reached {value}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    let rm_scrape = scrape(&rm.url).await;
    assert_eq!(
        at(&rm_scrape, r#"spindle_requests_created_total{type="obs"}"#),
        3.0
    );
    assert_eq!(
        at(
            &rm_scrape,
            r#"spindle_requests_finished_total{type="obs",state="COMPLETE"}"#
        ),
        2.0
    );
    assert_eq!(
        at(
            &rm_scrape,
            r#"spindle_requests_finished_total{type="obs",state="FAIL"}"#
        ),
        1.0
    );
    assert_eq!(
        at(
            &rm_scrape,
            r#"spindle_request_duration_seconds_count{type="obs"}"#
        ),
        3.0
    );
    assert_eq!(at(&rm_scrape, r#"spindle_requests{state="RUNNING"}"#), 0.0);
    assert_eq!(at(&rm_scrape, r#"spindle_job_runners{state="live"}"#), 1.0);
    // Creates, starts, finishes and reports are group-committed (write_batch); the
    // three creates were made one after another, each acknowledged after its commit.
    assert!(
        at(
            &rm_scrape,
            r#"spindle_store_query_duration_seconds_count{operation="write_batch"}"#
        ) >= 3.0
    );
    assert_eq!(
        at(
            &rm_scrape,
            r#"spindle_http_requests_total{method="POST",route="/api/v1/requests",status="201"}"#
        ),
        3.0
    );
    promtool_check(
        "metrics_count_a_known_workload_and_pass_promtool (rm)",
        &rm_scrape,
    );

    let jr_scrape = scrape(&jr.url).await;
    // Every try in the job logs is counted by its job type and state.
    let mut logged: std::collections::BTreeMap<(String, String), f64> = Default::default();
    for id in &ids {
        for (_, kind, _, state) in job_log(&client, id).await {
            *logged.entry((kind, state)).or_default() += 1.0;
        }
    }
    assert_eq!(
        logged[&("shell-command".to_owned(), "FAIL".to_owned())],
        2.0
    );
    for ((kind, state), n) in &logged {
        assert_eq!(
            at(
                &jr_scrape,
                &format!(r#"spindle_job_tries_total{{job_type="{kind}",state="{state}"}}"#)
            ),
            *n,
            "{kind} {state}"
        );
    }
    assert_eq!(
        at(
            &jr_scrape,
            r#"spindle_job_retries_total{job_type="shell-command"}"#
        ),
        1.0
    );
    assert_eq!(
        at(
            &jr_scrape,
            r#"spindle_job_try_duration_seconds_count{job_type="shell-command"}"#
        ),
        4.0
    );
    assert_eq!(at(&jr_scrape, "spindle_jobs_running"), 0.0);
    assert_eq!(at(&jr_scrape, "spindle_chains_running"), 0.0);
    assert_eq!(at(&jr_scrape, "spindle_report_backlog"), 0.0);
    assert_eq!(
        at(
            &jr_scrape,
            r#"spindle_http_requests_total{method="POST",route="/api/v1/job-chains",status="200"}"#
        ),
        3.0
    );
    promtool_check(
        "metrics_count_a_known_workload_and_pass_promtool (jr)",
        &jr_scrape,
    );
    // The lease is renewed every third of it (2 s).
    let until = Instant::now() + Duration::from_secs(10);
    while telemetry::metrics::sample(
        &scrape(&jr.url).await,
        r#"spindle_lease_renewals_total{result="ok"}"#,
    )
    .is_none()
    {
        assert!(Instant::now() < until, "no lease renewal counted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Metrics off: no /metrics, the rest as before.
    let off = Service::start(
        dir.path(),
        &rm_args("sqlite://off.db", LEASE, &["--metrics", "false"]),
    );
    let response = reqwest::get(format!("{}/metrics", off.url)).await.unwrap();
    assert_eq!(response.status(), 404);
}

/// The spans an OTLP/HTTP receiver got, decoded: (name, trace id, span id, parent id,
/// service, attributes).
#[derive(Debug, Clone)]
struct Received {
    name: String,
    trace: Vec<u8>,
    span: Vec<u8>,
    parent: Vec<u8>,
    service: String,
    attributes: Vec<(String, String)>,
}

impl Received {
    fn attr(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

fn any_value(value: &opentelemetry_proto::tonic::common::v1::AnyValue) -> String {
    use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
    match &value.value {
        Some(V::StringValue(s)) => s.clone(),
        Some(V::IntValue(n)) => n.to_string(),
        Some(V::BoolValue(b)) => b.to_string(),
        Some(V::DoubleValue(d)) => d.to_string(),
        _ => String::new(),
    }
}

/// An OTLP/HTTP traces receiver on a free port; returns its base URL and what it got.
async fn otlp_receiver() -> (String, Arc<Mutex<Vec<Received>>>) {
    let received: Arc<Mutex<Vec<Received>>> = Arc::default();
    let kept = Arc::clone(&received);
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let kept = Arc::clone(&kept);
            async move {
                let request = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                let mut kept = kept.lock().unwrap();
                for resource in request.resource_spans {
                    let service = resource
                        .resource
                        .iter()
                        .flat_map(|r| &r.attributes)
                        .find(|kv| kv.key == "service.name")
                        .and_then(|kv| kv.value.as_ref())
                        .map(any_value)
                        .unwrap_or_default();
                    for scope in resource.scope_spans {
                        for span in scope.spans {
                            kept.push(Received {
                                name: span.name,
                                trace: span.trace_id,
                                span: span.span_id,
                                parent: span.parent_span_id,
                                service: service.clone(),
                                attributes: span
                                    .attributes
                                    .iter()
                                    .map(|kv| {
                                        (
                                            kv.key.clone(),
                                            kv.value.as_ref().map(any_value).unwrap_or_default(),
                                        )
                                    })
                                    .collect(),
                            });
                        }
                    }
                }
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

/// One trace per request, across processes: the Request Manager's root span (creation
/// to final state), its create and hand-over spans under it; the Job Runner's chain span
/// under the hand-over (its parent came in `traceparent`), and a span per try under that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_is_one_trace_across_the_request_manager_and_the_runner() {
    let (otlp, received) = otlp_receiver().await;
    let dir = obs_dir();
    let rm = Service::start(
        dir.path(),
        &rm_args("sqlite://rm.db", LEASE, &["--otlp-endpoint", &otlp]),
    );
    let jr = Service::start(
        dir.path(),
        &jr_args(&rm.url, LEASE, &["--otlp-endpoint", &otlp]),
    );
    wait_ready(&jr.url).await;
    let client = Client::new(&rm.url);
    let id = create(&client, 3).await;
    assert_eq!(wait_final(&client, &id).await, 4);
    let log = job_log(&client, &id).await;
    let spans_of = |id: &str| -> Vec<Received> {
        received
            .lock()
            .unwrap()
            .iter()
            .filter(|span| span.attr("spindle.request_id") == Some(id))
            .cloned()
            .collect()
    };
    // Spans are exported in batches every 500 ms.
    let until = Instant::now() + Duration::from_secs(20);
    let spans = loop {
        let spans = spans_of(&id);
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        if names.contains(&"request")
            && names.contains(&"run chain")
            && names.iter().filter(|n| **n == "job try").count() == log.len()
        {
            break spans;
        }
        if Instant::now() > until {
            let all: Vec<(String, String, Option<String>)> = received
                .lock()
                .unwrap()
                .iter()
                .map(|s| {
                    (
                        s.name.clone(),
                        s.service.clone(),
                        s.attr("spindle.request_id").map(str::to_owned),
                    )
                })
                .collect();
            panic!(
                "spans of {id} so far: {names:?}; all: {all:?}\nrm: {}",
                rm.stderr()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let one = |name: &str| -> Received {
        let found: Vec<&Received> = spans.iter().filter(|s| s.name == name).collect();
        assert_eq!(found.len(), 1, "{name}: {spans:#?}");
        found[0].clone()
    };
    let root = one("request");
    let create_span = one("create request");
    let hand_over = one("hand over");
    let chain = one("run chain");
    assert!(
        spans.iter().all(|s| s.trace == root.trace),
        "one trace: {spans:#?}"
    );
    assert!(root.parent.is_empty(), "the root has no parent");
    assert_eq!(
        (root.service.as_str(), root.attr("spindle.state")),
        ("spindle-rm", Some("FAIL"))
    );
    assert_eq!(create_span.parent, root.span);
    assert_eq!(hand_over.parent, root.span);
    assert_eq!(hand_over.service, "spindle-rm");
    assert_eq!(
        chain.parent, hand_over.span,
        "the runner's span is under the hand-over"
    );
    assert_eq!(chain.service, "spindle-jr");
    let tries: Vec<&Received> = spans.iter().filter(|s| s.name == "job try").collect();
    assert!(
        tries
            .iter()
            .all(|t| t.parent == chain.span && t.service == "spindle-jr")
    );
    let mut seen: Vec<(String, String, String, String)> = tries
        .iter()
        .map(|t| {
            let attr = |key: &str| t.attr(key).unwrap_or_default().to_owned();
            (
                attr("spindle.job_id"),
                attr("spindle.job_type"),
                attr("spindle.try"),
                attr("spindle.state"),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(seen, log, "a span per job log entry");
    assert!(
        seen.iter()
            .any(|(_, kind, try_no, state)| kind == "shell-command"
                && try_no == "2"
                && state == "FAIL")
    );
}

/// `--log-format json`: every line about a request names it; a job's tries name the job
/// and the try; `--log-level` filters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_lines_carry_request_and_job_ids() {
    let dir = obs_dir();
    let server = Service::start_env(
        dir.path(),
        &crate::service_args(
            "server",
            "sqlite://server.db",
            &[
                "--log-format",
                "json",
                "--log-level",
                "debug,sqlx=warn,hyper=warn,reqwest=warn",
            ],
        ),
        &[("RUST_LOG", "error")],
    );
    let client = Client::new(&server.url);
    let id = create(&client, 3).await;
    assert_eq!(wait_final(&client, &id).await, 4);
    // Log lines are written as things happen, some just after the request's end.
    let log = job_log(&client, &id).await;
    crate::eventually(
        "every line is logged",
        Duration::from_secs(10),
        async || {
            let text = server.stderr();
            let count = |message: &str| text.matches(&format!("\"message\":\"{message}")).count();
            count("request finished") == 1
                && count("job try ended") == log.len()
                && count("job try failed") == 2
        },
    )
    .await;
    let lines: Vec<Value> = server
        .stderr()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect();
    let with = |message: &str| -> Vec<&Value> {
        lines
            .iter()
            .filter(|line| {
                line["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with(message))
            })
            .collect()
    };
    for message in [
        "request created",
        "request handed to a job runner",
        "request finished",
    ] {
        let found = with(message);
        assert!(!found.is_empty(), "no {message:?} line in {lines:#?}");
        assert!(
            found.iter().all(|line| line["request_id"] == id.as_str()),
            "{found:?}"
        );
    }
    let tries = with("job try ended");
    assert_eq!(tries.len(), log.len(), "a debug line per try: {tries:#?}");
    for line in &tries {
        assert_eq!(line["request_id"], id.as_str());
        assert!(
            line["job_id"].as_str().is_some_and(|j| !j.is_empty()),
            "{line}"
        );
        assert!(line["try"].as_u64().is_some(), "{line}");
    }
    let failed = with("job try failed");
    assert_eq!(
        failed.len(),
        2,
        "each failed try is a warning with its error: {failed:#?}"
    );
    for line in &failed {
        assert_eq!(
            (line["level"].as_str(), line["request_id"].as_str()),
            (Some("WARN"), Some(id.as_str()))
        );
        assert!(
            line["job_id"].as_str().is_some() && line["try"].as_u64().is_some(),
            "{line}"
        );
        assert!(
            line["error"]
                .as_str()
                .is_some_and(|e| e.contains("status 3")),
            "{line}"
        );
    }

    // `--log-level warn`: nothing below.
    let quiet = Service::start(
        dir.path(),
        &crate::service_args("server", "sqlite://quiet.db", &["--log-level", "warn"]),
    );
    let client = Client::new(&quiet.url);
    let id = create(&client, 0).await;
    assert_eq!(wait_final(&client, &id).await, 3);
    assert!(
        !quiet.stderr().contains("request created"),
        "{}",
        quiet.stderr()
    );
    // A bad level is a clear error before anything starts.
    let (_, stderr, code) = crate::run(crate::spindle(dir.path()).args([
        "server",
        "--listen",
        "127.0.0.1:0",
        "--specs",
        "specs",
        "--log-level",
        "loud",
    ]));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("log_level: \"loud\" is not a level or filter"),
        "{stderr}"
    );
}

/// `/readyz` on a Request Manager whose PostgreSQL server (the test's own) stops: 503
/// while it is down, 200 again once it is back; `/healthz` answers throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_follows_the_database() {
    let test = "readyz_follows_the_database";
    let Some(postgres) = crate::own_db::OwnPostgres::start(test) else {
        return;
    };
    let dir = obs_dir();
    let database = postgres.url();
    let rm = Service::start(dir.path(), &rm_args(&database, LEASE, &[]));
    wait_ready(&rm.url).await;
    let status = |path: &'static str| {
        let url = format!("{}{path}", rm.url);
        async move {
            reqwest::get(url)
                .await
                .map(|response| response.status().as_u16())
                .unwrap_or(0)
        }
    };
    postgres.stop();
    let until = Instant::now() + Duration::from_secs(20);
    while status("/readyz").await != 503 {
        assert!(
            Instant::now() < until,
            "/readyz stayed ready with the database down"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status("/healthz").await, 200, "alive while not ready");
    postgres.pg_ctl_start();
    wait_ready(&rm.url).await;
    assert_eq!(status("/healthz").await, 200);
}
