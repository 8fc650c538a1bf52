//! Suspended chains as the Request Manager resumes them on Job Runners: a resume the
//! runners fail backs off and ends, a runner that registers is given the waiting chains
//! at once, and the resumes of a restart read the runners once between them.

use super::*;

/// A suspended chain that Job Runners fail to resume (HTTP 500: its job states do not
/// fit) is not offered every round for ever (issue #48, point 2): it waits longer after
/// each fault, and after the bound its request fails with the runners' answer.
#[tokio::test]
async fn a_resume_a_runner_fails_backs_off_and_fails_the_request_after_a_bound() {
    let env = env_with(Options {
        jr_url: Some("http://jr1:32307".to_owned()),
        interval: std::time::Duration::from_millis(20),
        ..Options::default()
    })
    .await;
    let id = create(&env).await;
    suspend_the_first_chain(&env, &id).await;
    env.jr.answer.store(500, Ordering::SeqCst);
    let offers = || env.jr.paused_at_hand_over.lock().unwrap().len();
    let handed_before = offers();
    // Offered once, then not again in the next rounds: it waits 40 ms, then 80 ms.
    env.manager.resume_suspended().await;
    env.manager.resume_suspended().await;
    assert_eq!(offers() - handed_before, 1, "backed off after a fault");
    let stored = env.manager.store().get_request(&id, false).await.unwrap();
    assert_eq!(stored.state, State::Suspended);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        env.manager.resume_suspended().await;
        let stored = env.manager.store().get_request(&id, false).await.unwrap();
        if stored.state == State::Fail {
            assert!(
                stored.error.contains("job runners failed it 5 times")
                    && stored
                        .error
                        .contains("invalid job state for existing job chain"),
                "{}",
                stored.error
            );
            break;
        }
        assert!(std::time::Instant::now() < until, "{stored:?}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(offers() - handed_before, 5, "offered the bound's times");
}

/// The runner's report of the first chain it was handed (request `id`'s), suspended.
async fn suspend_the_first_chain(env: &super::Env, id: &str) {
    let job_chain = env.jr.chains.lock().unwrap()[0].clone();
    suspend_chain(env, id, job_chain).await;
}

/// The runner's report of `job_chain` (request `id`'s), suspended.
async fn suspend_chain(env: &super::Env, id: &str, job_chain: proto::JobChain) {
    let suspended = SuspendedJobChain {
        request_id: id.to_owned(),
        job_chain: proto::JobChain {
            state: State::Suspended,
            ..job_chain
        },
        ..SuspendedJobChain::default()
    };
    env.manager.suspend(&suspended, None).await.unwrap();
}

/// Issue #51: a runner's registration wakes the resume of the suspended chains that
/// wait for one (a deploy of the runners, the old ones having handed their chains
/// back), rather than leaving them to the next round (here an hour away).
#[tokio::test]
async fn a_runner_that_registers_gets_the_waiting_chains_without_waiting_for_the_round() {
    let env = env_with(Options {
        interval: std::time::Duration::from_secs(3600),
        ..Options::default()
    })
    .await;
    register(&env, "ia", "http://jr-a:1").await;
    let id = create(&env).await;
    suspend_the_first_chain(&env, &id).await;
    let (status, _, _) = call(&env.router, Method::DELETE, "/api/v1/job-runners/ia", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let stop = tokio_util::sync::CancellationToken::new();
    let background = tokio::spawn(env.manager.clone().run_background(stop.clone()));
    // The first round finds no runner for it: it stays suspended.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(env.jr.resumed.lock().unwrap().is_empty());
    assert_eq!(
        env.manager.get(&id, false).await.unwrap().state,
        State::Suspended
    );
    register(&env, "ib", "http://jr-b:1").await;
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while env.jr.resumed.lock().unwrap().is_empty() {
        assert!(
            std::time::Instant::now() < until,
            "not resumed on the new runner before the round"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        env.jr.sent_to.lock().unwrap().last().unwrap().0,
        "http://jr-b:1"
    );
    assert_eq!(
        env.manager.get(&id, false).await.unwrap().state,
        State::Running
    );
    stop.cancel();
    background.await.unwrap();
}

/// Issue #51: the resumes of a restart (thousands at once) read the runners once
/// between them, not once each: at 50,000 running requests a read of them counts every
/// runner's requests, and a restart's resumes each reading it took 92% of the
/// database's time.
#[tokio::test]
async fn resumes_at_once_read_the_runners_once() {
    let (env, faulty) = env_faulty(Options::default(), SPECS).await;
    register(&env, "ia", "http://jr-a:1").await;
    let mut ids = Vec::new();
    for _ in 0..16 {
        ids.push(create(&env).await);
    }
    // Each handed back suspended (the runner shut down), and two runners to take them.
    let chains = env.jr.chains.lock().unwrap().clone();
    for (id, job_chain) in ids.iter().zip(chains) {
        suspend_chain(&env, id, job_chain).await;
    }
    let (status, _, _) = call(&env.router, Method::DELETE, "/api/v1/job-runners/ia", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    register(&env, "ib", "http://jr-b:1").await;
    register(&env, "ic", "http://jr-c:1").await;
    env.jr.sent_to.lock().unwrap().clear();
    let before = faulty.calls("job_runners");
    env.manager.resume_suspended().await;
    assert_eq!(faulty.calls("job_runners") - before, 1);
    // And the list read once still spreads them.
    let sent = env.jr.sent_to.lock().unwrap().clone();
    let to_b = sent
        .iter()
        .filter(|(url, _)| url == "http://jr-b:1")
        .count();
    assert_eq!((sent.len(), to_b), (16, 8), "{sent:?}");
    for id in &ids {
        assert_eq!(
            env.manager.get(id, false).await.unwrap().state,
            State::Running
        );
    }
}
