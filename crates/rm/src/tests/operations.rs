//! Operations on requests beyond create: pause, retry, approvals, schedules,
//! retention.

use super::*;

/// Issue #16: a pause is stored with the request, told to its runner, carried by every
/// later hand-over (a suspended chain resumed starts paused), recorded in the audit
/// trail, and refused for a finished request.
#[tokio::test]
async fn a_pause_is_stored_told_to_the_runner_and_kept_across_hand_overs() {
    let env = env().await;
    let id = create(&env).await;
    let put = |action: &'static str| {
        let (router, uri) = (
            env.router.clone(),
            format!("/api/v1/requests/{id}/{action}"),
        );
        async move {
            let (status, body, _) = call_with(
                &router,
                Method::PUT,
                &uri,
                None,
                &[("x-spindle-user", "ann")],
            )
            .await;
            (status, body)
        }
    };
    let paused = || async {
        let (_, stored, _) = call(
            &env.router,
            Method::GET,
            &format!("/api/v1/requests/{id}"),
            None,
        )
        .await;
        stored["paused"].clone()
    };
    assert_eq!(paused().await, Value::Null, "omitted while not paused");
    assert_eq!(put("pause").await.0, StatusCode::OK);
    assert_eq!(paused().await, json!(true));
    assert_eq!(*env.jr.pauses.lock().unwrap(), [(id.clone(), true)]);

    // Handed back (the runner shut down) and resumed: the chain starts paused.
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
    env.manager.resume_suspended().await;
    assert_eq!(env.jr.resumed.lock().unwrap().len(), 1);
    assert_eq!(*env.jr.paused_at_hand_over.lock().unwrap(), [false, true]);
    assert_eq!(paused().await, json!(true));

    assert_eq!(put("resume").await.0, StatusCode::OK);
    assert_eq!(paused().await, Value::Null);
    assert_eq!(
        env.jr.pauses.lock().unwrap().last(),
        Some(&(id.clone(), false))
    );
    let (status, _, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}/audit"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let trail = env.manager.store().audit(&id).await.unwrap();
    let actions: Vec<(&str, &str)> = trail
        .iter()
        .map(|event| (event.action.as_str(), event.user.as_str()))
        .collect();
    assert_eq!(
        actions,
        [("create", ""), ("pause", "ann"), ("resume", "ann")]
    );

    // Finished: nothing to pause; an unknown request is 404.
    let finish = final_state(&id, State::Complete, 1);
    env.manager.finish(&finish, None).await.unwrap();
    let (status, body) = put("pause").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    says(
        &body,
        "in state COMPLETE, expected state PENDING, RUNNING or SUSPENDED",
    );
    let (status, _, _) = call(
        &env.router,
        Method::PUT,
        "/api/v1/requests/bbbbbbbbbbbbbbbbbbbb/pause",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

const THREE_STEPS: &str = "sequences:
  steps:
    request: true
    args:
      optional:
        - name: wait
          default: 10ms
    nodes:
      a:
        category: job
        type: sleep
        args: [{expected: duration, given: wait}]
      b:
        category: job
        type: sleep
        deps: [a]
        args: [{expected: duration, given: wait}]
      c:
        category: job
        type: sleep
        deps: [b]
        args: [{expected: duration, given: wait}]
";

/// Issue #16: a FAIL request retried runs again as the same request: completed jobs
/// stay complete, the failed and unrun ones run again, try numbers continue; `from`
/// runs a job and everything after it again, also of a COMPLETE request.
#[tokio::test]
async fn a_retried_request_runs_its_failed_and_unrun_jobs_again_as_the_same_request() {
    let env = env_specs(
        Options {
            jr_url: Some("http://jr1:32307".to_owned()),
            ..Options::default()
        },
        THREE_STEPS,
    )
    .await;
    let (status, body, _) = call(
        &env.router,
        Method::POST,
        "/api/v1/requests",
        Some(r#"{"type": "steps", "args": {}}"#),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["id"].as_str().unwrap().to_owned();
    let chain = env.jr.chains.lock().unwrap()[0].clone();
    let job_id = |name: &str| {
        chain
            .jobs
            .values()
            .find(|job| job.name == name)
            .unwrap()
            .id
            .clone()
    };
    let (a, b, c) = (job_id("a"), job_id("b"), job_id("c"));
    let entry = |job: &str, try_no: u32, state: State| proto::JobLog {
        request_id: id.clone(),
        job_id: job.to_owned(),
        r#try: try_no,
        state,
        ..proto::JobLog::default()
    };
    let finish = |state: State, finished_jobs: u64| final_state(&id, state, finished_jobs);
    env.manager
        .add_job_logs(
            vec![
                entry(&a, 1, State::Complete),
                entry(&b, 1, State::Fail),
                entry(&b, 2, State::Fail),
            ],
            None,
        )
        .await
        .unwrap();
    env.manager
        .finish(&finish(State::Fail, 1), None)
        .await
        .unwrap();
    let retry = |query: &'static str| {
        let (router, uri) = (
            env.router.clone(),
            format!("/api/v1/requests/{id}/retry{query}"),
        );
        async move {
            let (status, body, _) = call_with(
                &router,
                Method::PUT,
                &uri,
                None,
                &[("x-spindle-user", "bo")],
            )
            .await;
            (status, body)
        }
    };
    let (status, body) = retry("").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let resumed = env.jr.resumed.lock().unwrap().clone();
    assert_eq!(resumed.len(), 1, "handed to a runner at once");
    let jobs = &resumed[0].job_chain.jobs;
    assert_eq!(
        (jobs[&a].state, jobs[&b].state, jobs[&c].state),
        (State::Complete, State::Pending, State::Pending)
    );
    assert_eq!(resumed[0].job_chain.finished_jobs, 1);
    assert_eq!(
        resumed[0].total_job_tries.get(&b),
        Some(&2),
        "try numbers go on"
    );
    assert_eq!(resumed[0].total_job_tries.get(&c), None);
    let request = env.manager.get(&id, false).await.unwrap();
    assert_eq!(
        (request.state, request.finished_at, request.finished_jobs),
        (State::Running, None, 1)
    );
    assert_eq!(
        env.manager.job_log(&id).await.unwrap().len(),
        3,
        "earlier tries kept"
    );
    let (status, body) = retry("").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");

    // It completes; a retry from b runs b and c again, not a.
    let epoch = env.jr.sent_to.lock().unwrap().last().unwrap().1;
    let fence = proto::Fence {
        instance: "instance-of-http://jr1:32307".to_owned(),
        epoch,
    };
    env.manager
        .add_job_logs(
            vec![entry(&b, 3, State::Complete), entry(&c, 1, State::Complete)],
            Some(&fence),
        )
        .await
        .unwrap();
    env.manager
        .finish(&finish(State::Complete, 3), Some(&fence))
        .await
        .unwrap();
    let (status, body) = retry("").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    says(&body, "retry --from JOB");
    let (status, body) = retry("?from=nope").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    says(&body, "has no job \"nope\"");
    let (status, body) = retry("?from=b").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let resumed = env.jr.resumed.lock().unwrap().clone();
    let jobs = &resumed[1].job_chain.jobs;
    assert_eq!(
        (jobs[&a].state, jobs[&b].state, jobs[&c].state),
        (State::Complete, State::Pending, State::Pending)
    );
    assert_eq!(resumed[1].total_job_tries.get(&b), Some(&3));
    assert_eq!(resumed[1].total_job_tries.get(&c), Some(&1));
    // The old runner's hand-over is fenced off.
    let err = env
        .manager
        .finish(&finish(State::Complete, 3), Some(&fence))
        .await
        .unwrap_err();
    assert!(matches!(err, crate::Error::Fenced(_)), "{err}");
    let actions: Vec<String> = env
        .manager
        .store()
        .audit(&id)
        .await
        .unwrap()
        .into_iter()
        .map(|event| format!("{} {}", event.action, event.user))
        .collect();
    assert_eq!(actions, ["create ", "retry bo", "retry bo"]);
}

const GATE_SPECS: &str = "sequences:
  ship:
    request: true
    args:
      static:
        - name: approvers
          default: [release]
    nodes:
      sign-off:
        category: job
        type: approval
        args: [{expected: roles, given: approvers}]
";

/// Issue #16: an approval's answer is authorized by the job's roles, stored once, told
/// to the runner, carried by a later hand-over in the job's data, and audited.
#[tokio::test]
async fn an_approval_is_answered_by_its_roles_once_and_handed_over_with_the_chain() {
    let token = |name: &str| format!("spindle_test_{name}");
    let line = |name: &str, roles: &[&str]| {
        auth::TokenLine::of(
            &token(name),
            name,
            &roles.iter().map(|r| (*r).to_owned()).collect::<Vec<_>>(),
        )
        .to_string()
    };
    let tokens = auth::Tokens::parse(
        "tokens",
        &[line("ann", &["release"]), line("bob", &["dev"])].join("\n"),
    )
    .unwrap();
    let mut acls = std::collections::HashMap::new();
    acls.insert("ship".to_owned(), Vec::new());
    let auth = auth::Auth {
        authenticators: vec![Arc::new(tokens)],
        acls: auth::Acls::new(acls),
        admin_roles: Vec::new(),
        strict: false,
        read_roles: None,
        service_roles: vec!["spindle".to_owned()],
        metrics_roles: vec!["metrics".to_owned()],
    };
    let env = env_specs(
        Options {
            jr_url: Some("http://jr1:32307".to_owned()),
            auth: Some(Arc::new(auth)),
            ..Options::default()
        },
        GATE_SPECS,
    )
    .await;
    let router = env
        .router
        .clone()
        .layer(axum::middleware::from_fn_with_state(
            env.manager.clone(),
            crate::authenticate,
        ));
    let bearer = |name: &str| format!("Bearer {}", token(name));
    let (status, body, _) = call_with(
        &router,
        Method::POST,
        "/api/v1/requests",
        Some(r#"{"type": "ship", "args": {}}"#),
        &[("authorization", &bearer("bob"))],
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["id"].as_str().unwrap().to_owned();
    let put = |who: &str, path: &str| {
        let (router, uri, auth) = (
            router.clone(),
            format!("/api/v1/requests/{id}/{path}"),
            bearer(who),
        );
        async move {
            let (status, body, _) = call_with(
                &router,
                Method::PUT,
                &uri,
                None,
                &[("authorization", &auth)],
            )
            .await;
            (status, body)
        }
    };
    let (status, body) = put("bob", "approve").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    says(&body, "takes one of the roles release");
    let (status, body) = put("ann", "approve?job=nope").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = put("ann", "approve?comment=fine").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let told = env.jr.answers.lock().unwrap().clone();
    assert_eq!(told.len(), 1);
    assert_eq!((told[0].0.as_str(), told[0].2), (id.as_str(), true));
    let (status, body) = put("ann", "reject?job=sign-off").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    says(&body, "was approved by ann");

    // Handed over again (suspended, then resumed): the answer is in the job's data.
    let mut job_chain = env.jr.chains.lock().unwrap()[0].clone();
    job_chain.state = State::Suspended;
    let gate = job_chain
        .jobs
        .values()
        .find(|job| job.job_type == "approval")
        .unwrap()
        .id
        .clone();
    let suspended = SuspendedJobChain {
        request_id: id.clone(),
        job_chain,
        ..SuspendedJobChain::default()
    };
    env.manager.suspend(&suspended, None).await.unwrap();
    env.manager.resume_suspended().await;
    let resumed = env.jr.resumed.lock().unwrap()[0].clone();
    let stored = &resumed.job_chain.jobs[&gate].data[&job::approval::data_key(&gate)];
    assert_eq!(
        (
            stored["approved"].clone(),
            stored["user"].clone(),
            stored["comment"].clone()
        ),
        (json!(true), json!("ann"), json!("fine"))
    );
    let trail = env.manager.store().audit(&id).await.unwrap();
    let actions: Vec<(&str, &str)> = trail
        .iter()
        .map(|e| (e.action.as_str(), e.user.as_str()))
        .collect();
    assert_eq!(actions, [("create", "bob"), ("approve", "ann")]);
}

/// A manager (its background round every `interval`) with the request type `tick` (one
/// noop) and `schedules`, the entries of a `schedules:` section, loaded.
async fn schedule_env(schedules: &str, interval: std::time::Duration) -> Env {
    let specs = format!(
        "sequences:
  tick:
    request: true
    nodes:
      beat:
        category: job
        type: noop
schedules:
{schedules}"
    );
    let options = Options {
        jr_url: Some("http://jr1:32307".to_owned()),
        interval,
        ..Options::default()
    };
    let env = env_specs(options, &specs).await;
    let report = spec::lint_str(std::path::Path::new("specs.yaml"), &specs);
    let fires = report.specs.schedules().iter();
    env.manager
        .set_schedules(fires.map(|schedule| schedule.fires().unwrap()).collect());
    env
}

/// Issue #16: runs missed while no Request Manager ran are skipped, or (`missed:
/// start`) the latest is started late, once; a run is started once, whoever claims it.
#[tokio::test]
async fn missed_schedule_runs_are_skipped_or_the_latest_started_late() {
    let created = chrono::Utc::now();
    // Two rounds, at least 2 s: runs older than that were missed.
    let env = schedule_env(
        "  skipping:
    cron: \"* * * * * *\"
    request: tick
    overlap: start
  catching-up:
    cron: \"* * * * * *\"
    request: tick
    overlap: start
    missed: start
  new-catching-up:
    cron: \"* * * * * *\"
    request: tick
    overlap: start
    missed: start
",
        std::time::Duration::from_millis(500),
    )
    .await;
    let store = env.manager.store();
    // Both last ran a minute ago; nothing ran since.
    let long_ago = chrono::Utc::now() - chrono::Duration::seconds(60);
    let long_ago =
        long_ago - chrono::Duration::nanoseconds(long_ago.timestamp_subsec_nanos().into());
    for name in ["skipping", "catching-up"] {
        assert!(
            store
                .claim_schedule_run(name, long_ago, "rm-old")
                .await
                .unwrap()
        );
        store
            .schedule_run_done(name, long_ago, "r-old", "")
            .await
            .unwrap();
    }
    // Runs fall due after the manager started (every second).
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    env.manager.run_schedules().await;
    let started = |name: &'static str| {
        let store = Arc::clone(store);
        async move {
            let runs = store.schedule_runs(name, 100).await.unwrap();
            runs.into_iter()
                .filter(|run| !run.request_id.is_empty() && run.request_id != "r-old")
                .map(|run| run.due_at)
                .collect::<Vec<_>>()
        }
    };
    let skipping = started("skipping").await;
    assert!(!skipping.is_empty() && skipping.len() <= 3, "{skipping:?}");
    // Issue #36: `missed: skip` at start: nothing due before the manager started.
    assert!(
        skipping.iter().all(|at| *at >= created),
        "only runs due since the manager started ({created}): {skipping:?}"
    );
    let catching_up = started("catching-up").await;
    assert_eq!(
        catching_up.len(),
        skipping.len() + 1,
        "the same recent runs, and the latest missed one: {catching_up:?} {skipping:?}"
    );
    assert!(
        catching_up.iter().min() < skipping.iter().min(),
        "{catching_up:?}"
    );
    // Issue #47: a schedule that never ran begins when the manager first serves it:
    // nothing before that was missed, so `missed: start` starts nothing late.
    let new = started("new-catching-up").await;
    assert!(
        !new.is_empty() && new.iter().all(|at| *at >= created),
        "only runs due since the manager started ({created}): {new:?}"
    );
    // Another round (another Request Manager) starts nothing twice.
    let before = store
        .find_requests(&proto::RequestFilter {
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .len();
    env.manager.run_schedules().await;
    let requests = store
        .find_requests(&proto::RequestFilter {
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut users: Vec<&str> = requests.iter().map(|r| r.user.as_str()).collect();
    users.sort();
    let n = users.len();
    users.dedup();
    assert_eq!(users.len(), n, "one request per run");
    assert!(n >= before, "{n} {before}");
}

/// Issue #36: a scheduled run starts when it falls due, not at the next background
/// round (here a minute apart).
#[tokio::test]
async fn scheduled_runs_start_on_time_whatever_the_interval() {
    let env = schedule_env(
        "  every-second:
    cron: \"* * * * * *\"
    request: tick
    overlap: start
",
        std::time::Duration::from_secs(60),
    )
    .await;
    let stop = tokio_util::sync::CancellationToken::new();
    let background = tokio::spawn(env.manager.clone().run_background(stop.clone()));
    tokio::time::sleep(std::time::Duration::from_millis(3500)).await;
    stop.cancel();
    background.await.unwrap();
    let store = env.manager.store();
    let runs = store.schedule_runs("every-second", 100).await.unwrap();
    let started: Vec<_> = runs
        .iter()
        .filter(|run| !run.request_id.is_empty())
        .collect();
    assert!(
        started.len() >= 2,
        "a run each second, not one a minute: {runs:?}"
    );
    for run in started {
        let request = store.get_request(&run.request_id, false).await.unwrap();
        let late = request.created_at - run.due_at;
        // Generous for a loaded machine; a round a minute apart would be up to 60 s late.
        assert!(
            late < chrono::Duration::seconds(2),
            "run due at {} started {late} late",
            run.due_at
        );
    }
}

/// Issue #17: with a retention, the background round removes what finished before it,
/// and nothing else.
#[tokio::test]
async fn the_background_round_removes_requests_past_the_retention() {
    let env = env_with(Options {
        jr_url: Some("http://jr1:32307".to_owned()),
        retention: Some(std::time::Duration::from_secs(2)),
        ..Options::default()
    })
    .await;
    let finish = |id: &str| final_state(id, State::Complete, 1);
    let old = create(&env).await;
    let recent = create(&env).await;
    let running = create(&env).await;
    // A request's times never precede its start, so "long ago" is waited for.
    env.manager.finish(&finish(&old), None).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    env.manager.finish(&finish(&recent), None).await.unwrap();
    assert_eq!(env.manager.apply_retention().await, 1);
    let (status, _, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{old}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    for id in [&recent, &running] {
        let (status, _, _) = call(
            &env.router,
            Method::GET,
            &format!("/api/v1/requests/{id}"),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }
    assert_eq!(
        env.manager.apply_retention().await,
        0,
        "nothing more to remove yet"
    );
}

/// A bulk action's dry run judges each request's state as the action would: one it
/// would refuse is listed refused, with the action's own words (and 409).
#[tokio::test]
async fn a_bulk_dry_run_says_which_states_the_action_would_refuse() {
    let env = env().await;
    let running = create(&env).await;
    let done = create(&env).await;
    finish_complete(&env, &done).await;
    let dry_run = async |action: &str| {
        let (status, body, _) = call(
            &env.router,
            Method::POST,
            &format!("/api/v1/bulk/{action}?type=deploy"),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let mut outcomes: Vec<(String, String, String, String)> = body["requests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["id"].as_str().unwrap().to_owned(),
                    r["outcome"].as_str().unwrap().to_owned(),
                    r["message"].as_str().unwrap_or_default().to_owned(),
                    r["httpStatus"].to_string(),
                )
            })
            .collect();
        outcomes.sort();
        outcomes
    };
    let expect = |id: &str, outcome: &str, message: &str, status: &str| {
        (
            id.to_owned(),
            outcome.to_owned(),
            message.to_owned(),
            status.to_owned(),
        )
    };
    let mut stop = vec![
        expect(&running, "would", "", "null"),
        expect(
            &done,
            "refused",
            &format!("request {done} in state COMPLETE, expected state RUNNING: it has finished"),
            "409",
        ),
    ];
    stop.sort();
    assert_eq!(dry_run("stop").await, stop);
    let mut retry = vec![
        expect(
            &running,
            "refused",
            &format!(
                "request {running} in state RUNNING, expected FAIL or STOPPED: it has not finished"
            ),
            "409",
        ),
        expect(
            &done,
            "refused",
            &format!(
                "request {done} in state COMPLETE, expected FAIL or STOPPED: it completed; retry --from JOB or --elements runs a part of it again"
            ),
            "409",
        ),
    ];
    retry.sort();
    assert_eq!(dry_run("retry").await, retry);
    // The action itself refuses the finished one in the same words.
    let (_, acted, _) = call(
        &env.router,
        Method::POST,
        "/api/v1/bulk/stop?type=deploy&state=COMPLETE&dryRun=false",
        None,
    )
    .await;
    assert_eq!(
        acted["requests"][0]["message"],
        stop.iter().find(|s| s.0 == done).unwrap().2.as_str(),
        "{acted}"
    );
}
