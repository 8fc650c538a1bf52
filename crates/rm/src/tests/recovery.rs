//! Recovery as the Request Manager does it: a lost runner's request rebuilt and resumed
//! on a live one, a request its runner no longer holds taken back, a resumed chain's end
//! before its resume is recorded, a PENDING request that began on a runner taken back,
//! and a suspended one whose resume's answer was lost.

use super::*;

#[tokio::test]
async fn a_lost_runners_request_is_rebuilt_and_resumed_on_a_live_one() {
    let lease = std::time::Duration::from_millis(200);
    let env = env_with(Options {
        lease,
        ..Options::default()
    })
    .await;
    register(&env, "lost", "http://jr-lost:1").await;
    let id = create(&env).await;
    let (url, epoch) = env.jr.sent_to.lock().unwrap()[0].clone();
    assert_eq!(url, "http://jr-lost:1");
    let fence = proto::Fence {
        instance: "lost".to_owned(),
        epoch,
    };
    let chain = env.manager.job_chain(&id).await.unwrap();
    let mut ids: Vec<String> = chain.jobs.keys().cloned().collect();
    ids.sort();
    let (done, cut) = (&ids[0], &ids[1]);
    // One job completed; another had started its second try when the runner went.
    let start = |job: &str, try_no: u32| proto::TryStart {
        request_id: id.clone(),
        job_id: job.to_owned(),
        r#try: try_no,
        run_try: try_no,
        sequence_try: 1,
        started_at: 1_000,
    };
    env.manager
        .add_try_starts(
            vec![start(done, 1), start(cut, 1), start(cut, 2)],
            Some(&fence),
        )
        .await
        .unwrap();
    let log = |job: &str, try_no: u32, state: State| proto::JobLog {
        request_id: id.clone(),
        job_id: job.to_owned(),
        r#try: try_no,
        state,
        ..proto::JobLog::default()
    };
    env.manager
        .add_job_logs(
            vec![log(done, 1, State::Complete), log(cut, 1, State::Fail)],
            Some(&fence),
        )
        .await
        .unwrap();
    // Its lease lapsed a minute ago; another runner is live.
    register(&env, "live", "http://jr-live:1").await;
    env.manager
        .store()
        .renew_runner("lost", chrono::Utc::now() - chrono::Duration::minutes(1))
        .await
        .unwrap();
    // Not before this Request Manager has seen the database for a whole lease.
    env.manager.background_round().await;
    assert_eq!(
        env.manager.get(&id, false).await.unwrap().state,
        State::Running
    );
    // The lease is what must pass: a wait for time itself, not for a condition.
    tokio::time::sleep(lease).await;
    env.manager.renew_runner("live", None).await.unwrap();
    env.manager.background_round().await;

    let resumed = env.jr.resumed.lock().unwrap().clone();
    assert_eq!(resumed.len(), 1, "resumed once");
    let suspended = &resumed[0];
    assert_eq!(
        env.jr.sent_to.lock().unwrap()[1],
        ("http://jr-live:1".to_owned(), epoch + 2)
    );
    assert_eq!(suspended.job_chain.jobs[done].state, State::Complete);
    assert_eq!(suspended.job_chain.jobs[cut].state, State::Stopped);
    assert_eq!(suspended.total_job_tries[cut], 2);
    // Try 2 was interrupted: resuming gives it back, so one try counts.
    assert_eq!(suspended.latest_run_job_tries[cut], 2);
    assert_interrupted(
        &env,
        &id,
        cut,
        2,
        "interrupted: its job runner (instance lost at http://jr-lost:1) was lost",
    )
    .await;
    let request = env.manager.get(&id, false).await.unwrap();
    assert_eq!(
        (request.state, request.jr_url.as_str()),
        (State::Running, "http://jr-live:1")
    );
    // The lost runner, back from a pause, is refused.
    let late = final_state(&id, State::Complete, 2);
    let err = env.manager.finish(&late, Some(&fence)).await.unwrap_err();
    assert!(matches!(err, crate::Error::Fenced(_)), "{err}");
    // Another round recovers nothing more.
    env.manager.background_round().await;
    assert_eq!(env.jr.resumed.lock().unwrap().len(), 1);
}

/// A live runner whose renewals leave out a request it owns as RUNNING (its chain ended
/// and its reports never reached a Request Manager) gets it taken back after the second
/// such renewal, not the first; the request is resumed on a live runner, its started try
/// logged as interrupted with the reason. A renewal without a body changes nothing.
#[tokio::test]
async fn a_request_its_live_runner_no_longer_holds_is_recovered_after_two_renewals() {
    let env = env_with(Options::default()).await;
    register(&env, "ia", "http://jr-a:1").await;
    let id = create(&env).await;
    let (_, epoch) = env.jr.sent_to.lock().unwrap()[0].clone();
    let fence = proto::Fence {
        instance: "ia".to_owned(),
        epoch,
    };
    let chain = env.manager.job_chain(&id).await.unwrap();
    let job = chain.jobs.keys().next().unwrap().clone();
    env.manager
        .add_try_starts(vec![try_start(&id, &job, 1, 1_000)], Some(&fence))
        .await
        .unwrap();
    let renew = |body: Option<String>| {
        let router = env.router.clone();
        async move {
            let headers: &[(&str, &str)] = if body.is_some() {
                &[("content-type", "application/json")]
            } else {
                &[]
            };
            let (status, body, _) = call_with(
                &router,
                Method::PUT,
                "/api/v1/job-runners/ia/lease",
                body.as_deref(),
                headers,
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{body}");
        }
    };
    let state = || async { env.manager.get(&id, false).await.unwrap().state };
    let held = |ids: &[&str]| Some(serde_json::json!({ "running": ids }).to_string());
    // Left out once, then held, then left out once more: nothing happens.
    renew(held(&[])).await;
    renew(held(&[&id])).await;
    renew(held(&[])).await;
    renew(None).await;
    assert_eq!(state().await, State::Running);
    // A body that is not a renewal is refused, and says what was expected.
    let (status, body, _) = call_with(
        &env.router,
        Method::PUT,
        "/api/v1/job-runners/ia/lease",
        Some(r#"{"running": "abc"}"#),
        &[("content-type", "application/json")],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    says(&body, "invalid lease renewal");
    assert_eq!(state().await, State::Running);
    // The second in a row takes it back; it is resumed on a live runner.
    renew(held(&[])).await;
    assert_eq!(state().await, State::Suspended);
    env.manager.background_round().await;
    let resumed = env.jr.resumed.lock().unwrap().clone();
    assert_eq!(resumed.len(), 1, "resumed once");
    assert_eq!(
        env.jr.sent_to.lock().unwrap()[1],
        ("http://jr-a:1".to_owned(), epoch + 2)
    );
    assert_eq!(state().await, State::Running);
    assert_interrupted(
        &env,
        &id,
        &job,
        1,
        "interrupted: its job runner (instance ia at http://jr-a:1) no longer ran the request",
    )
    .await;
    // The old hand-over's reports are refused now; the new one's renewals keep it.
    let err = env
        .manager
        .add_try_starts(vec![try_start(&id, &job, 2, 2_000)], Some(&fence))
        .await
        .unwrap_err();
    assert!(matches!(err, crate::Error::Fenced(_)), "{err}");
    renew(held(&[&id])).await;
    renew(held(&[&id])).await;
    assert_eq!(state().await, State::Running);
}

/// A resumed chain that ends, or is handed back, before the Request Manager that resumed
/// it recorded the resume (a chain whose every job was done ends at once) is told to
/// try again (503), not refused for good: refused, its runner would give its end up and
/// the request would stay RUNNING there. Once the resume is recorded, the end is stored.
#[tokio::test]
async fn a_resumed_chains_end_before_its_resume_is_recorded_is_taken_when_it_is() {
    let env = env_with(Options::default()).await;
    register(&env, "ia", "http://jr-a:1").await;
    let id = create(&env).await;
    for _ in 0..2 {
        env.manager.renew_runner("ia", Some(&[])).await.unwrap();
    }
    let request_id = RequestId::new(id.clone());
    let state = || async { env.manager.get(&id, false).await.unwrap().state };
    assert_eq!(state().await, State::Suspended);
    // Another Request Manager claims the chain and hands it to a runner, which ends it
    // (or shuts down and hands it back) before that Request Manager records the resume.
    let store = env.manager.store();
    let suspended = store
        .claim_suspended("rm-b", chrono::Utc::now())
        .await
        .unwrap()
        .unwrap();
    let epoch = store
        .hand_over(&request_id, State::Suspended, &suspended.total_job_tries)
        .await
        .unwrap();
    let fence = proto::Fence {
        instance: "ib".to_owned(),
        epoch,
    };
    let finish = final_state(&id, State::Complete, 3);
    let err = env.manager.finish(&finish, Some(&fence)).await.unwrap_err();
    assert!(matches!(err, crate::Error::Unavailable { .. }), "{err}");
    assert!(err.to_string().contains("is being resumed"), "{err}");
    let err = env
        .manager
        .suspend(&suspended, Some(&fence))
        .await
        .unwrap_err();
    assert!(matches!(err, crate::Error::Unavailable { .. }), "{err}");
    // An older hand-over's end is still refused as fenced.
    let old = proto::Fence {
        instance: "ia".to_owned(),
        epoch: epoch - 1,
    };
    let err = env.manager.finish(&finish, Some(&old)).await.unwrap_err();
    assert!(matches!(err, crate::Error::Fenced(_)), "{err}");
    assert_eq!(state().await, State::Suspended);
    // Recorded: the end sent again is stored.
    store
        .resumed(&request_id, "rm-b", "http://jr-b:1", Some(&fence))
        .await
        .unwrap();
    env.manager.finish(&finish, Some(&fence)).await.unwrap();
    assert_eq!(state().await, State::Complete);
}

/// A hand-over that reached a runner, which ran jobs, but was never recorded (the
/// Request Manager died between the two, as in the chaos test): offered again, the
/// request is not sent as a new chain (a runner refuses one with jobs that ran, and it
/// stayed PENDING for ever) but taken back like a lost runner's request and resumed,
/// and whichever runner had it is fenced off.
#[tokio::test]
async fn a_pending_request_that_began_on_a_runner_is_taken_back_and_resumed() {
    let env = env().await;
    env.jr.answer.store(503, Ordering::SeqCst);
    let id = create(&env).await;
    let request_id = RequestId::from(id.as_str());
    // The hand-over that nobody recorded: epoch 2, to a runner that began the chain.
    let epoch = env
        .manager
        .store()
        .hand_over(&request_id, State::Pending, &Default::default())
        .await
        .unwrap();
    let ghost = proto::Fence {
        instance: "ghost".to_owned(),
        epoch,
    };
    let chain = env.manager.job_chain(&id).await.unwrap();
    let job = chain.jobs.keys().next().unwrap().clone();
    let start = try_start(&id, &job, 1, 1_000);
    env.manager
        .add_try_starts(vec![start], Some(&ghost))
        .await
        .unwrap();
    assert_eq!(
        env.manager.get(&id, false).await.unwrap().state,
        State::Pending
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
    assert!(
        env.jr.chains.lock().unwrap().is_empty(),
        "not sent as a new chain"
    );
    assert_eq!(
        env.manager.get(&id, false).await.unwrap().state,
        State::Suspended
    );
    env.manager.background_round().await;
    let resumed = env.jr.resumed.lock().unwrap().clone();
    assert_eq!(resumed.len(), 1, "resumed once");
    assert_eq!(resumed[0].job_chain.jobs[&job].state, State::Stopped);
    assert_eq!(resumed[0].total_job_tries[&job], 1);
    let request = env.manager.get(&id, false).await.unwrap();
    assert_eq!(request.state, State::Running);
    assert_taken_back_from(&env, &id, &job, epoch, &ghost).await;
}

/// Request `id` was taken back from a hand-over at `epoch` that was never recorded: its
/// one logged try is `job`'s first, interrupted, saying so, and the runner that had it
/// (`fence`) hears that it no longer does.
async fn assert_taken_back_from(env: &Env, id: &str, job: &str, epoch: u64, fence: &proto::Fence) {
    let logs = env.manager.job_log(id).await.unwrap();
    assert_eq!(logs.len(), 1, "{logs:?}");
    let why = format!("interrupted: the hand-over (epoch {epoch})");
    assert_interrupted(env, id, job, 1, &why).await;
    let entry = proto::JobLog {
        request_id: id.to_owned(),
        job_id: job.to_owned(),
        r#try: 1,
        state: State::Complete,
        ..proto::JobLog::default()
    };
    let err = env
        .manager
        .add_job_logs(vec![entry], Some(fence))
        .await
        .unwrap_err();
    assert!(matches!(err, crate::Error::Fenced(_)), "{err}");
}

/// A resume whose answer was lost (the runner took the chain and began a try; the
/// Request Manager heard nothing, as when the nemesis cuts a runner off mid-call) leaves
/// the request SUSPENDED at that resume's epoch while the runner runs it. Offered again,
/// the stored chain does not go out as it is (the next runner would run that try again
/// under its number, its start stored once: the chaos test's double execution): the
/// request is taken back, rebuilt with the try logged as interrupted, at a new epoch
/// that fences the first runner off, and resumed so.
#[tokio::test]
async fn a_resume_whose_answer_was_lost_is_taken_back_before_it_goes_out_again() {
    let env = env_with(Options::default()).await;
    register(&env, "ia", "http://jr-a:1").await;
    let id = create(&env).await;
    // Its runner says twice that it does not hold it: taken back, SUSPENDED.
    for _ in 0..2 {
        env.manager.renew_runner("ia", Some(&[])).await.unwrap();
    }
    let state = || async { env.manager.get(&id, false).await.unwrap().state };
    assert_eq!(state().await, State::Suspended);
    let store = env.manager.store();
    // Resumed on jr-a, which takes it, but its answer is lost.
    env.jr
        .silent
        .lock()
        .unwrap()
        .insert("http://jr-a:1".to_owned());
    env.manager.background_round().await;
    assert_eq!(state().await, State::Suspended);
    let epoch = store.owner(&id).await.unwrap().epoch;
    let unheard = proto::Fence {
        instance: "ia".to_owned(),
        epoch,
    };
    let chain = env.manager.job_chain(&id).await.unwrap();
    let job = chain.jobs.keys().next().unwrap().clone();
    env.manager
        .add_try_starts(vec![try_start(&id, &job, 1, 1_000)], Some(&unheard))
        .await
        .unwrap();

    env.jr.silent.lock().unwrap().clear();
    let (guard, logs) = capture_logs();
    env.manager.background_round().await;
    drop(guard);
    // Said at info, with why.
    let logs = String::from_utf8(logs.lock().unwrap().clone()).unwrap();
    let said = logs
        .lines()
        .find(|line| line.contains("a suspended chain offered again had begun on a job runner"))
        .unwrap_or_else(|| panic!("{logs}"));
    assert!(said.contains(" INFO "), "{said}");
    assert!(
        said.contains(&format!(
            "why=request {id}: try 1 of job {job} began on a job runner"
        )),
        "{said}"
    );
    let resumed = env.jr.resumed.lock().unwrap().clone();
    assert_eq!(resumed.len(), 1, "resumed once, as rebuilt");
    assert_eq!(resumed[0].total_job_tries.get(&job), Some(&1));
    assert_eq!(
        env.jr.sent_to.lock().unwrap().last().unwrap().1,
        epoch + 2,
        "a new epoch for the take-back, another for the resume"
    );
    assert_eq!(state().await, State::Running);
    assert_taken_back_from(&env, &id, &job, epoch, &unheard).await;
}
