//! Job Runners as the Request Manager sees them: hand-overs that wait, refusals,
//! the choice of a runner, fencing, registration (resumes are in `resumes.rs`).

use super::*;

#[tokio::test]
async fn a_request_waits_pending_until_a_job_runner_answers() {
    let env = env().await;
    env.jr.answer.store(503, Ordering::SeqCst);
    let id = create(&env).await;
    let (_, stored, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}"),
        None,
    )
    .await;
    assert_eq!(stored["state"], 1);
    env.jr.answer.store(0, Ordering::SeqCst);
    let (status, _, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/start"),
        None,
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
    assert_eq!(stored["state"], 2);
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/start"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
}

/// Issue #35: a runner that refuses the Request Manager's credentials is a
/// misconfiguration: the request stays PENDING with the reason (shown by `status` and
/// the UI), `start` is not a 500, and once the runner accepts, the request runs.
#[tokio::test]
async fn a_runner_that_refuses_the_managers_credentials_leaves_the_request_pending_with_why() {
    let env = env().await;
    env.jr.answer.store(401, Ordering::SeqCst);
    let id = create(&env).await;
    for _ in 0..2 {
        let (status, body, _) = call(
            &env.router,
            Method::PUT,
            &format!("/api/v1/requests/{id}/start"),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        env.manager.start_pending().await;
    }
    let stored = env.manager.get(&id, false).await.unwrap();
    assert_eq!(stored.state, State::Pending);
    assert!(
        stored
            .error
            .contains("refused this Request Manager's credentials")
            && stored.error.contains("HTTP 401"),
        "{}",
        stored.error
    );
    env.jr.answer.store(0, Ordering::SeqCst);
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/start"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let started = env.manager.get(&id, false).await.unwrap();
    assert_eq!(started.state, State::Running);
    assert_eq!(started.error, "", "the start clears why it waited");
}

/// Issue #30: a runner without the request's job types (a team's jobs not deployed
/// yet) leaves it PENDING, saying which, and it runs once a runner has them.
#[tokio::test]
async fn a_runner_without_the_job_types_leaves_the_request_pending_with_why() {
    let env = env().await;
    env.jr.answer.store(422, Ordering::SeqCst);
    let id = create(&env).await;
    env.manager.start_pending().await;
    let stored = env.manager.get(&id, false).await.unwrap();
    assert_eq!(stored.state, State::Pending);
    assert!(
        stored
            .error
            .starts_with("waits for a job runner with its job types")
            && stored.error.contains("`go-provision`"),
        "{}",
        stored.error
    );
    runs_once_a_runner_takes_it(&env, &id).await;
}

/// Issue #47: a chain whose jobs' stored bytes the runner's job types cannot read (an
/// imported chain, a job program that changed) waits, PENDING, with that cause; `retry`
/// says the same rather than failing it again; it runs once a runner reads them.
#[tokio::test]
async fn a_runner_that_cannot_read_the_jobs_leaves_the_request_waiting_with_why() {
    let env = env().await;
    env.jr.answer.store(4221, Ordering::SeqCst);
    let id = create(&env).await;
    env.manager.start_pending().await;
    let stored = env.manager.get(&id, false).await.unwrap();
    assert_eq!(stored.state, State::Pending);
    assert!(
        stored
            .error
            .starts_with("waits for a job runner that can read its jobs: ")
            && stored.error.contains("cannot read the job's stored bytes")
            && stored
                .error
                .contains("job deploy (ID abcd, type go-provision)"),
        "{}",
        stored.error
    );
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/retry"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("expected FAIL or STOPPED")
            && message.contains("it waits for a job runner that can read its jobs"),
        "{message}"
    );
    assert_eq!(
        env.manager.get(&id, false).await.unwrap().state,
        State::Pending
    );
    runs_once_a_runner_takes_it(&env, &id).await;
}

/// Issue #47: fixed runners (`runners:`, Spin Cycle's) are given only chains of the job
/// types they list; a chain none of them has the types of, with no registered runner,
/// waits, PENDING, saying which types.
#[tokio::test]
async fn fixed_runners_get_only_chains_of_their_job_types() {
    let fixed = |url: &str, types: &[&str]| crate::FixedRunner {
        url: url.to_owned(),
        types: Some(types.iter().map(|t| (*t).to_owned()).collect()),
    };
    // The spec's `deploy` is noop wrappers around a sleep.
    let env = super::env_with(crate::Options {
        fixed_runners: vec![
            fixed("http://sc-jr-1:32307", &["noop", "shell-command"]),
            fixed("http://sc-jr-2:32307", &["noop", "sleep"]),
        ],
        ..crate::Options::default()
    })
    .await;
    let id = create(&env).await;
    let stored = env.manager.get(&id, false).await.unwrap();
    assert_eq!(
        (stored.state, stored.jr_url.as_str()),
        (State::Running, "http://sc-jr-2:32307")
    );
    let env = super::env_with(crate::Options {
        fixed_runners: vec![fixed("http://sc-jr-1:32307", &["noop", "shell-command"])],
        ..crate::Options::default()
    })
    .await;
    let id = create(&env).await;
    let stored = env.manager.get(&id, false).await.unwrap();
    assert_eq!(stored.state, State::Pending);
    assert!(
        stored
            .error
            .starts_with("waits for a job runner with its job types: ")
            && stored.error.contains("(noop, sleep)"),
        "{}",
        stored.error
    );
    assert!(
        env.jr.sent_to.lock().unwrap().is_empty(),
        "nothing was sent"
    );
}

/// Issue #50: Spin Cycle's runners (fixed, with their types listed) do not keep a failure
/// budget: a chain with one waits for a Spindle Job Runner, saying why, and goes to one
/// that registers; a chain without one still goes to Spin Cycle's.
#[tokio::test]
async fn a_budgeted_chain_goes_only_to_a_spindle_runner() {
    // The same `each:` node over the hosts, with a budget (`fleet`) and without (`plain`).
    let spec = |name: &str, budget: &str| {
        format!(
            "  {name}:
    request: true
    args:
      required:
        - name: hosts
          desc: the hosts
    nodes:
      each-host:
        category: job
        type: noop
        each: [hosts:host]
{budget}"
        )
    };
    let specs = format!(
        "sequences:\n{}{}",
        spec("fleet", "        max_failures: 1\n"),
        spec("plain", "")
    );
    let env = super::env_specs(
        crate::Options {
            fixed_runners: vec![crate::FixedRunner {
                url: "http://sc-jr-1:32307".to_owned(),
                types: Some(["noop".to_owned()].into()),
            }],
            ..crate::Options::default()
        },
        &specs,
    )
    .await;
    let create = |kind: &str| {
        let body = format!(r#"{{"type": "{kind}", "args": {{"hosts": ["web-1", "web-2"]}}}}"#);
        let router = env.router.clone();
        async move {
            let (status, body, _) =
                call(&router, Method::POST, "/api/v1/requests", Some(&body)).await;
            assert_eq!(status, StatusCode::CREATED, "{body}");
            body["id"].as_str().unwrap().to_owned()
        }
    };
    let plain = create("plain").await;
    let stored = env.manager.get(&plain, false).await.unwrap();
    assert_eq!(
        (stored.state, stored.jr_url.as_str()),
        (State::Running, "http://sc-jr-1:32307")
    );
    let fleet = create("fleet").await;
    let stored = env.manager.get(&fleet, false).await.unwrap();
    assert_eq!(stored.state, State::Pending);
    assert!(
        stored.error.starts_with("waits for a Spindle job runner: ")
            && stored.error.contains("each-host has a failure budget"),
        "{}",
        stored.error
    );
    assert_eq!(
        env.jr.sent_to.lock().unwrap().len(),
        1,
        "only the plain one was sent"
    );
    register(&env, "spindle-1", "http://jr-a:1").await;
    runs_once_a_runner_takes_it(&env, &fleet).await;
    assert_eq!(
        env.manager.get(&fleet, false).await.unwrap().jr_url,
        "http://jr-a:1"
    );
}

/// Issue #47: with no runner to take it (none registered, or none answering), a
/// request says so while it waits, PENDING.
#[tokio::test]
async fn a_request_no_runner_takes_says_so() {
    let env = env().await;
    env.jr.answer.store(503, Ordering::SeqCst);
    let id = create(&env).await;
    let stored = env.manager.get(&id, false).await.unwrap();
    assert_eq!(stored.state, State::Pending);
    assert!(
        stored.error.starts_with("waits for a job runner: ")
            && stored.error.contains("connection refused"),
        "{}",
        stored.error
    );
}

#[tokio::test]
async fn a_chain_the_job_runner_refuses_fails_the_request() {
    let env = env().await;
    env.jr.answer.store(400, Ordering::SeqCst);
    let (status, body, _) = call(
        &env.router,
        Method::POST,
        "/api/v1/requests",
        Some(r#"{"type": "deploy", "args": {"host": "db1"}}"#),
    )
    .await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(!body["message"].as_str().unwrap().contains("SQL"));
    let failed = env
        .manager
        .find(&proto::RequestFilter::default())
        .await
        .unwrap();
    assert_eq!(failed[0].state, State::Fail);
}

#[tokio::test]
async fn chains_go_to_the_live_runner_with_the_fewest_requests() {
    let env = env_with(Options::default()).await;
    // No runner yet: the request waits.
    let waiting = create(&env).await;
    assert_eq!(
        env.manager.get(&waiting, false).await.unwrap().state,
        State::Pending
    );
    let (status, body, _) = call(
        &env.router,
        Method::POST,
        "/api/v1/job-runners",
        Some(r#"{"instanceId": "", "url": "http://a", "lease": "10s"}"#),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["message"].as_str().unwrap().contains("no instanceId"),
        "{body}"
    );
    let a = register(&env, "ia", "http://jr-a:1").await;
    assert_eq!(
        (a["state"].as_str(), a["runningRequests"].as_u64()),
        (Some("live"), Some(0))
    );
    register(&env, "ib", "http://jr-b:1").await;
    for _ in 0..4 {
        create(&env).await;
    }
    let sent: Vec<String> = env
        .jr
        .sent_to
        .lock()
        .unwrap()
        .iter()
        .map(|(url, _)| url.clone())
        .collect();
    let to_a = sent.iter().filter(|url| *url == "http://jr-a:1").count();
    assert_eq!((sent.len(), to_a), (4, 2), "{sent:?}");
    let (status, listed, _) = call(&env.router, Method::GET, "/api/v1/job-runners", None).await;
    assert_eq!(status, StatusCode::OK);
    let counts: Vec<u64> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["runningRequests"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [2, 2]);

    // A runner that renews keeps its lease; one that deregistered is stopped and gets
    // nothing more.
    let (status, renewed, _) = call(
        &env.router,
        Method::PUT,
        "/api/v1/job-runners/ia/lease",
        None,
    )
    .await;
    assert_eq!(
        (status, renewed["state"].as_str()),
        (StatusCode::OK, Some("live"))
    );
    let (status, _, _) = call(&env.router, Method::DELETE, "/api/v1/job-runners/ib", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        "/api/v1/job-runners/ib/lease",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(
        body["message"].as_str().unwrap().contains("register again"),
        "{body}"
    );
    create(&env).await;
    assert_eq!(
        env.jr.sent_to.lock().unwrap().last().unwrap().0,
        "http://jr-a:1"
    );
    // A new registration at a runner's address means that process is gone.
    register(&env, "ia2", "http://jr-a:1").await;
    let (_, listed, _) = call(&env.router, Method::GET, "/api/v1/job-runners", None).await;
    let ia = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["instanceId"] == "ia")
        .unwrap()
        .clone();
    assert_eq!(ia["state"], "lost");
}

#[tokio::test]
async fn a_report_from_a_runner_that_no_longer_owns_the_request_is_refused_as_fenced() {
    let env = env().await;
    let id = create(&env).await;
    let (_, epoch) = env.jr.sent_to.lock().unwrap()[0].clone();
    assert_eq!(epoch, 1);
    let owner = "instance-of-http://jr1:32307";
    let entry =
        serde_json::json!([{"requestId": id, "jobId": "j", "try": 1, "state": 3}]).to_string();
    let (status, body, headers) = call_with(
        &env.router,
        Method::POST,
        "/api/v1/job-logs",
        Some(&entry),
        &[("spindle-runner", "someone-else"), ("spindle-epoch", "1")],
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(headers["spindle-fenced"], "true");
    says(
        &body,
        &format!("owned by job runner instance {owner} at epoch 1"),
    );
    let (status, _, headers) = call_with(
        &env.router,
        Method::POST,
        "/api/v1/job-logs",
        Some(&entry),
        &[("spindle-runner", owner), ("spindle-epoch", "1")],
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(headers.get("spindle-fenced").is_none());
    let (status, body, _) = call_with(
        &env.router,
        Method::POST,
        "/api/v1/job-logs",
        Some(&entry),
        &[("spindle-epoch", "one")],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    says(&body, "expected a whole number");
    let finish =
        serde_json::json!({"state": 3, "finishedAt": "2026-01-01T00:00:00Z", "finishedJobs": 1})
            .to_string();
    let (status, _, headers) = call_with(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/finish"),
        Some(&finish),
        &[("spindle-runner", owner), ("spindle-epoch", "0")],
    )
    .await;
    assert_eq!(
        (status, headers.get("spindle-fenced").is_some()),
        (StatusCode::CONFLICT, true)
    );
    assert_eq!(
        env.manager.get(&id, false).await.unwrap().state,
        State::Running
    );
    let (status, _, _) = call_with(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/finish"),
        Some(&finish),
        &[("spindle-runner", owner), ("spindle-epoch", "1")],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        env.manager.get(&id, false).await.unwrap().state,
        State::Complete
    );
}

/// A final state carries the chain's last job log entries (one call, not two): they are
/// stored with it, judged by the same fence (a stale runner's are not), and each must be
/// about the request the URL names.
#[tokio::test]
async fn a_final_state_stores_the_entries_it_carries() {
    let env = env().await;
    let id = create(&env).await;
    let owner = "instance-of-http://jr1:32307";
    let finish = |request: &str| {
        serde_json::json!({
            "state": 3,
            "finishedAt": "2026-01-01T00:00:00Z",
            "finishedJobs": 2,
            "jobLogs": [
                {"requestId": request, "jobId": "a", "try": 1, "state": 3},
                {"jobId": "b", "try": 1, "state": 4, "error": "exit 1"}
            ]
        })
        .to_string()
    };
    let put = |body: String, epoch: &'static str| {
        let (router, uri) = (env.router.clone(), format!("/api/v1/requests/{id}/finish"));
        async move {
            call_with(
                &router,
                Method::PUT,
                &uri,
                Some(&body),
                &[("spindle-runner", owner), ("spindle-epoch", epoch)],
            )
            .await
        }
    };
    let logged = || async {
        let mut ids: Vec<String> = env
            .manager
            .job_log(&id)
            .await
            .unwrap()
            .into_iter()
            .map(|entry| entry.job_id)
            .collect();
        ids.sort();
        ids
    };
    // About another request: refused, nothing stored.
    let (status, body, _) = put(finish("someone-elses"), "1").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    says(&body, "does not match the request id in the URL");
    // From an older hand-over: fenced, nothing stored.
    let (status, _, headers) = put(finish(&id), "0").await;
    assert_eq!(
        (status, headers.get("spindle-fenced").is_some()),
        (StatusCode::CONFLICT, true)
    );
    assert!(logged().await.is_empty());
    assert_eq!(
        env.manager.get(&id, false).await.unwrap().state,
        State::Running
    );
    // From the owner: the entries (an empty requestId is the URL's) and the end.
    let (status, body, _) = put(finish(&id), "1").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(logged().await, ["a", "b"]);
    let request = env.manager.get(&id, false).await.unwrap();
    assert_eq!((request.state, request.finished_jobs), (State::Complete, 2));
    // Sent again (its answer was lost): a no-op.
    let (status, _, _) = put(finish(&id), "1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(logged().await, ["a", "b"]);
}

/// Issue #36: a `spindle run` process's runner (no URL anyone could call) is not listed
/// once it stopped; a server's runner that stopped is, for a while.
#[tokio::test]
async fn a_stopped_in_process_runner_is_not_listed() {
    let env = env().await;
    let register = |instance: &str, url: &str| {
        env.manager.register_runner(proto::RunnerRegistration {
            instance_id: instance.to_owned(),
            url: url.to_owned(),
            lease: "10s".to_owned(),
            ..Default::default()
        })
    };
    register("run-1", "in-process://spindle-run").await.unwrap();
    register("jr-1", "http://jr-1:32307").await.unwrap();
    let listed = |runners: Vec<proto::JobRunner>| {
        let mut ids: Vec<String> = runners.into_iter().map(|r| r.instance_id).collect();
        ids.sort();
        ids
    };
    assert_eq!(
        listed(env.manager.job_runners().await.unwrap()),
        ["jr-1", "run-1"],
        "live, both"
    );
    for instance in ["run-1", "jr-1"] {
        env.manager.end_runner(instance).await.unwrap();
    }
    assert_eq!(listed(env.manager.job_runners().await.unwrap()), ["jr-1"]);
}

/// The runner takes chains again: a start of the waiting request `id` hands it over, and
/// it runs with nothing left of why it waited.
async fn runs_once_a_runner_takes_it(env: &super::Env, id: &str) {
    env.jr.answer.store(0, Ordering::SeqCst);
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/start"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let started = env.manager.get(id, false).await.unwrap();
    assert_eq!(
        (started.state, started.error.as_str()),
        (State::Running, "")
    );
}

/// Issue #48, point 4: a Job Runner of an API version more than one apart is refused at
/// registration (422, saying both versions), not by failing requests later; one that
/// names no version is of version 1; the answer names the manager's version.
#[tokio::test]
async fn a_runner_of_an_api_version_this_manager_cannot_work_with_is_refused_at_registration() {
    let env = env().await;
    let register = async |body: Value| {
        call_with(
            &env.router,
            Method::POST,
            "/api/v1/job-runners",
            Some(&body.to_string()),
            &[],
        )
        .await
    };
    let (status, body, headers) = register(json!({
        "instanceId": "jr-new", "url": "http://jr-9:32307", "lease": "10s", "apiVersion": 3
    }))
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let said = body["message"].as_str().unwrap();
    assert!(
        said.contains("speaks API version 3")
            && said.contains("this Request Manager speaks version 1")
            && said.contains("Upgrading"),
        "{said}"
    );
    assert_eq!(headers[proto::API_VERSION_HEADER], "1");
    let (_, runners, _) = call(&env.router, Method::GET, "/api/v1/job-runners", None).await;
    assert_eq!(runners.as_array().map(Vec::len), Some(0), "{runners}");
    for body in [
        json!({"instanceId": "jr-old", "url": "http://jr-1:32307", "lease": "10s"}),
        json!({"instanceId": "jr-next", "url": "http://jr-2:32307", "lease": "10s", "apiVersion": 2}),
    ] {
        let (status, answer, headers) = register(body).await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
        assert_eq!(headers[proto::API_VERSION_HEADER], "1");
    }
}

/// Issue #48, point 3: a runner that did not answer a hand-over (cut off from this
/// manager, though it renews its lease through another) is offered chains last, so
/// the creates after the first are not handed to it (and do not wait for it).
#[tokio::test]
async fn a_runner_that_did_not_answer_a_hand_over_is_offered_chains_last() {
    let env = env_with(Options::default()).await;
    for (instance, url) in [("jr-a", "http://jr-a:32307"), ("jr-b", "http://jr-b:32307")] {
        env.manager
            .register_runner(proto::RunnerRegistration {
                instance_id: instance.to_owned(),
                url: url.to_owned(),
                lease: "10s".to_owned(),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    env.jr
        .silent
        .lock()
        .unwrap()
        .insert("http://jr-a:32307".to_owned());
    let mut states = Vec::new();
    for _ in 0..6 {
        let id = create(&env).await;
        let stored = env.manager.store().get_request(&id, false).await.unwrap();
        states.push((stored.state, stored.jr_url));
    }
    let pending = states.iter().filter(|(s, _)| *s == State::Pending).count();
    assert!(
        pending <= 1,
        "one create at most met the silent runner: {states:?}"
    );
    assert!(
        states
            .iter()
            .filter(|(s, _)| *s == State::Running)
            .all(|(_, url)| url == "http://jr-b:32307"),
        "{states:?}"
    );
}
