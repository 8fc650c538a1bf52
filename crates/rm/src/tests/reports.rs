//! What Job Runners report: job logs, progress, finishes, suspended chains, output,
//! and the metrics they move.

use super::*;

/// After a known workload the Request Manager's metrics count it: requests created and
/// finished by type and state, the unfinished by state, store operations, HTTP calls.
#[tokio::test]
async fn metrics_count_requests_store_operations_and_calls() {
    use telemetry::metrics::sample;
    let env = env().await;
    let done = create(&env).await;
    let _running = create(&env).await;
    finish_complete(&env, &done).await;
    let (status, scrape, headers) = call(&env.router, Method::GET, "/metrics", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let scrape = scrape.as_str().unwrap().to_owned();
    let at = |series: &str| {
        sample(&scrape, series).unwrap_or_else(|| panic!("no {series} in\n{scrape}"))
    };
    let kind = "deploy";
    assert_eq!(
        at(&format!(
            r#"spindle_requests_created_total{{type="{kind}"}}"#
        )),
        2.0
    );
    assert_eq!(
        at(&format!(
            r#"spindle_requests_finished_total{{type="{kind}",state="COMPLETE"}}"#
        )),
        1.0
    );
    assert_eq!(
        at(&format!(
            r#"spindle_request_duration_seconds_count{{type="{kind}"}}"#
        )),
        1.0
    );
    assert_eq!(at(r#"spindle_requests{state="RUNNING"}"#), 1.0);
    assert_eq!(at(r#"spindle_requests{state="PENDING"}"#), 0.0);
    // Each create is acknowledged after its own commit (the two were made one after the
    // other), group-committed through write_batch.
    assert!(at(r#"spindle_store_query_duration_seconds_count{operation="write_batch"}"#) >= 2.0);
    assert_eq!(
        at(r#"spindle_http_requests_total{method="POST",route="/api/v1/requests",status="201"}"#),
        2.0
    );
    assert_eq!(
        at(
            r#"spindle_http_requests_total{method="PUT",route="/api/v1/requests/{id}/finish",status="200"}"#
        ),
        1.0
    );
    // OpenMetrics to a scraper that asks for it, as Prometheus does.
    let (_, scrape, headers) = call_with(
        &env.router,
        Method::GET,
        "/metrics",
        None,
        &[(
            "accept",
            "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
        )],
    )
    .await;
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    assert!(scrape.as_str().unwrap().ends_with("# EOF\n"));
}

#[tokio::test]
async fn job_runner_reports_log_progress_and_finish() {
    let env = env().await;
    let id = create(&env).await;
    let entry = json!({"jobId": "abcd", "try": 1, "name": "pause", "type": "sleep", "startedAt": 1, "finishedAt": 2, "state": 3, "exit": 0, "error": "", "stdout": "", "stderr": ""});
    let (status, body, _) = call(
        &env.router,
        Method::POST,
        &format!("/api/v1/requests/{id}/log"),
        Some(&entry.to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(body["requestId"], id.as_str());
    let batch = json!([{"requestId": id, "jobId": "efgh", "try": 1, "name": "x", "type": "noop", "state": 3}]);
    let (status, _, _) = call(
        &env.router,
        Method::POST,
        "/api/v1/job-logs",
        Some(&batch.to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, log, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}/log"),
        None,
    )
    .await;
    assert_eq!(log.as_array().unwrap().len(), 2);
    let (status, latest, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}/log/abcd"),
        None,
    )
    .await;
    assert_eq!((status, latest["try"].clone()), (StatusCode::OK, json!(1)));

    // Issue #10: a body's request id is reconciled with the path's the same way
    // everywhere: empty is the path's, another one is a 400.
    let other = "someone-else";
    for (method, path, body) in [
        (
            Method::PUT,
            "progress",
            json!({"requestId": other, "finishedJobs": 2}),
        ),
        (
            Method::PUT,
            "finish",
            json!({"requestId": other, "state": 3, "finishedAt": "2026-01-01T00:00:00Z"}),
        ),
        (
            Method::PUT,
            "suspend",
            json!({"requestId": other, "jobChain": {"requestId": other, "jobs": {}, "adjacencyList": {}, "state": 7}}),
        ),
        (
            Method::POST,
            "log",
            json!({"requestId": other, "jobId": "j", "try": 1}),
        ),
    ] {
        let (status, body, _) = call(
            &env.router,
            method,
            &format!("/api/v1/requests/{id}/{path}"),
            Some(&body.to_string()),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains("requestId \"someone-else\" does not match the request id in the URL"),
            "{path}: {body}"
        );
    }
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/progress"),
        Some(r#"{"finishedJobs": 2}"#),
    )
    .await;
    assert_eq!((status, body), (StatusCode::OK, Value::Null));
    let progress = json!({"requestId": id, "finishedJobs": 2}).to_string();
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/progress"),
        Some(&progress),
    )
    .await;
    assert_eq!((status, body), (StatusCode::OK, Value::Null));
    let finish = json!({"requestId": id, "state": 3, "finishedAt": "2026-01-01T00:00:00Z", "finishedJobs": 5}).to_string();
    let (status, _, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/finish"),
        Some(&finish),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // A repeated finish (a retried send) is accepted and changes nothing.
    let (status, _, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/finish"),
        Some(&finish),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, stored, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}"),
        None,
    )
    .await;
    assert_eq!(
        (stored["state"].clone(), stored["finishedJobs"].clone()),
        (json!(3), json!(5))
    );
    // The chain shows each job's latest state from the log.
    assert_eq!(stored["JobChain"]["jobs"]["abcd"], Value::Null);
    // Stopping a finished request is a conflict.
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/stop"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("it has finished")
    );
}

/// Issue #36: people are shown the request's own jobs: `ownJobs` leaves out the
/// grapher's begin and end wrappers (which Spin Cycle's `totalJobs` counts), and
/// `ownFinishedJobs` counts the own jobs whose latest try completed, in a get and a find.
#[tokio::test]
async fn a_request_counts_its_own_jobs_apart_from_the_wrappers() {
    let env = env().await;
    let id = create(&env).await;
    let (_, chain, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}/job-chain"),
        None,
    )
    .await;
    let job_id = |name: &str| -> String {
        let jobs = chain["jobs"].as_object().unwrap();
        jobs.iter()
            .find(|(_, job)| job["name"] == name)
            .map(|(id, _)| id.clone())
            .unwrap_or_else(|| panic!("no job {name} in {chain}"))
    };
    let entry = |job: &str, name: &str, job_type: &str| json!({"requestId": id, "jobId": job_id(job), "try": 1, "name": name, "type": job_type, "state": 3});
    let counts = async || {
        let (_, got, _) = call(
            &env.router,
            Method::GET,
            &format!("/api/v1/requests/{id}"),
            None,
        )
        .await;
        let (_, found, _) = call(&env.router, Method::GET, "/api/v1/requests?limit=5", None).await;
        let listed = found
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id.as_str())
            .cloned()
            .unwrap();
        let of = |r: &Value| {
            [
                &r["totalJobs"],
                &r["finishedJobs"],
                &r["ownJobs"],
                &r["ownFinishedJobs"],
            ]
            .map(Value::clone)
        };
        assert_eq!(of(&got), of(&listed), "a get and a find agree");
        of(&got)
    };
    assert_eq!(counts().await, [json!(5), json!(0), json!(1), Value::Null]);
    // The begin wrapper completed (none of the own job), then the own job.
    for (entries, finished) in [
        (
            json!([entry(
                "request_deploy_begin",
                "request_deploy_begin",
                "noop"
            )]),
            1,
        ),
        (json!([entry("pause", "pause", "sleep")]), 2),
    ] {
        let (status, _, _) = call(
            &env.router,
            Method::POST,
            "/api/v1/job-logs",
            Some(&entries.to_string()),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED);
        let progress = json!({"finishedJobs": finished}).to_string();
        let (status, _, _) = call(
            &env.router,
            Method::PUT,
            &format!("/api/v1/requests/{id}/progress"),
            Some(&progress),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }
    assert_eq!(counts().await, [json!(5), json!(2), json!(1), json!(1)]);
}

#[tokio::test]
async fn stop_asks_the_job_runner_that_runs_the_request() {
    let env = env().await;
    let id = create(&env).await;
    let (status, _, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/stop"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        env.jr.stopped.lock().unwrap().as_slice(),
        std::slice::from_ref(&id)
    );
    let (status, body, _) = call(&env.router, Method::GET, "/api/v1/status/running", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["jobs"][0]["requestId"], id.as_str());
    assert_eq!(body["requests"][id.as_str()]["type"], "deploy");
}

#[tokio::test]
async fn suspended_chains_are_stored_and_resumed() {
    let env = env().await;
    let id = create(&env).await;
    let mut job_chain = env.jr.chains.lock().unwrap()[0].clone();
    job_chain.state = State::Suspended;
    let suspended = SuspendedJobChain {
        request_id: id.clone(),
        job_chain,
        ..SuspendedJobChain::default()
    };
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/suspend"),
        Some(&serde_json::to_string(&suspended).unwrap()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, stored, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}"),
        None,
    )
    .await;
    assert_eq!(stored["state"], 7);
    // A suspended request cannot be stopped; it is resumed by the background loop.
    let (status, _, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/stop"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    env.manager.resume_suspended().await;
    assert_eq!(env.jr.resumed.lock().unwrap()[0], suspended);
    let (_, stored, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}"),
        None,
    )
    .await;
    assert_eq!(
        (stored["state"].clone(), stored["jrURL"].clone()),
        (json!(2), json!("http://jr1:32307"))
    );
}

/// Issue #10: a chain that finishes before the Request Manager marked its request RUNNING
/// still leaves the request's times in order (created ≤ started ≤ finished).
#[tokio::test]
async fn a_chain_that_finishes_before_it_is_marked_running_keeps_its_times_in_order() {
    let env = env().await;
    *env.jr.finish_at_once.lock().unwrap() = Some(Arc::downgrade(&env.manager));
    for _ in 0..5 {
        let id = create(&env).await;
        let request = env.manager.get(&id, false).await.unwrap();
        assert_eq!(request.state, State::Complete);
        let started = request.started_at.expect("started");
        let finished = request.finished_at.expect("finished");
        assert!(
            request.created_at <= started && started <= finished,
            "created {} started {started} finished {finished}",
            request.created_at
        );
    }
}

#[tokio::test]
async fn job_output_is_stored_and_served_from_a_cursor() {
    let env = env().await;
    let id = create(&env).await;
    let batch = json!([
        {"requestId": id, "jobId": "abcd", "try": 1, "stream": "stdout", "offset": 0, "data": "one\n"},
        {"requestId": id, "jobId": "abcd", "try": 1, "stream": "stderr", "offset": 0, "data": "<b>warn</b>\n"},
    ]);
    let (status, body, _) = call(
        &env.router,
        Method::POST,
        "/api/v1/job-output",
        Some(&batch.to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let url = format!("/api/v1/requests/{id}/output");
    let (status, page, _) = call(&env.router, Method::GET, &url, None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["state"], 2, "a RUNNING request: {page}");
    let chunks = page["chunks"].as_array().unwrap();
    assert_eq!(chunks.len(), 2);
    assert_eq!(chunks[1]["stream"], "stderr");
    assert_eq!(chunks[1]["data"], "<b>warn</b>\n");
    let next = page["next"].as_i64().unwrap();
    assert_eq!(chunks[1]["seq"].as_i64(), Some(next));
    // Nothing new after the cursor: an empty page that keeps the cursor.
    let (_, page, _) = call(
        &env.router,
        Method::GET,
        &format!("{url}?after={next}"),
        None,
    )
    .await;
    assert_eq!(page["chunks"], json!([]));
    assert_eq!(page["next"].as_i64(), Some(next));
    let more = json!([{"requestId": id, "jobId": "abcd", "try": 1, "stream": "stdout", "offset": 4, "data": "two\n"}]);
    call(
        &env.router,
        Method::POST,
        "/api/v1/job-output",
        Some(&more.to_string()),
    )
    .await;
    let (_, page, _) = call(
        &env.router,
        Method::GET,
        &format!("{url}?after={next}&job=abcd&try=1"),
        None,
    )
    .await;
    assert_eq!(page["chunks"][0]["data"], "two\n");
    assert_eq!(page["chunks"][0]["offset"], 4);

    // Bad input is a 400 that says what was expected; an unknown request is a 404.
    for (query, expected) in [
        ("?after=soon", "expected after=CURSOR"),
        ("?try=1", "try= without job="),
        ("?limit=0", "expected 1..1000"),
        ("?colour=red", "unknown field `colour`"),
    ] {
        let (status, body, _) =
            call(&env.router, Method::GET, &format!("{url}{query}"), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(expected), "{query}: {message}");
    }
    let (status, _, _) = call(
        &env.router,
        Method::GET,
        "/api/v1/requests/nope/output",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let nameless = json!([{"requestId": id, "jobId": "", "try": 1, "stream": "stdout", "offset": 0, "data": "x"}]);
    let (status, body, _) = call(
        &env.router,
        Method::POST,
        "/api/v1/job-output",
        Some(&nameless.to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("expected all three")
    );
}

// ---- runners, fencing, recovery (issue 11) ----

/// Records a request's start through a store of its own, as another Request Manager
/// would, right after the next `finish_request` of the store it watches (the group
/// commit writes an end that finds its request PENDING that way, alone).
struct StartsAfterNextBatch {
    path: std::path::PathBuf,
    armed: Mutex<Option<(String, proto::Fence)>>,
}

impl store::QueryObserver for StartsAfterNextBatch {
    fn query(&self, operation: &'static str, _elapsed: std::time::Duration, _ok: bool) {
        if operation != "finish_request" {
            return;
        }
        let Some((request_id, fence)) = self.armed.lock().unwrap().take() else {
            return;
        };
        let path = self.path.clone();
        // A runtime and a store of its own: the other Request Manager.
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async {
                    let other = store::SqliteStore::open(&path).await.unwrap();
                    store::Lifecycle::start_request(
                        &other,
                        &RequestId::from(request_id.as_str()),
                        "http://jr1:32307",
                        Some(&fence),
                        chrono::Utc::now(),
                    )
                    .await
                    .unwrap();
                });
        })
        .join()
        .unwrap();
    }
}

/// A short chain's end can reach a Request Manager before the start of its request is
/// recorded: it then starts the request itself. When another Request Manager records
/// the start between the two (after the end's write found the request PENDING), the
/// end is stored all the same, not refused.
#[tokio::test]
async fn an_end_that_races_the_start_record_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rm.db");
    let hook = Arc::new(StartsAfterNextBatch {
        path: path.clone(),
        armed: Mutex::new(None),
    });
    let store = store::timed(
        Arc::new(store::SqliteStore::open(&path).await.unwrap()),
        hook.clone(),
    );
    let report = spec::lint_str(Path::new("specs.yaml"), SPECS);
    let grapher = graph::Grapher::new(report.specs, Arc::new(job::Registry::builtin()));
    let jr = Arc::new(FakeJr::default());
    // The runner takes the chain, but its answer is lost: the request stays PENDING,
    // handed over under epoch 1.
    jr.answer.store(503, Ordering::SeqCst);
    let options = Options {
        jr_url: Some("http://jr1:32307".to_owned()),
        ..Options::default()
    };
    let manager = Arc::new(Manager::new(grapher, store, jr.clone(), options));
    let env = Env {
        router: crate::router(manager.clone()),
        manager: manager.clone(),
        jr,
        _dir: dir,
    };
    let id = create(&env).await;
    let owner = manager.store().owner(&id).await.unwrap();
    assert_eq!(owner.state, State::Pending);
    let fence = proto::Fence {
        instance: "instance-of-http://jr1:32307".to_owned(),
        epoch: owner.epoch,
    };
    *hook.armed.lock().unwrap() = Some((id.clone(), fence.clone()));
    let finish = final_state(&id, State::Complete, 2);
    manager.finish(&finish, Some(&fence)).await.unwrap();
    assert!(
        hook.armed.lock().unwrap().is_none(),
        "the start was recorded in between"
    );
    let request = manager.store().get_request(&id, false).await.unwrap();
    assert_eq!(request.state, State::Complete);
}
