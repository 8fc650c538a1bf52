//! The store suite, on every backend: suspended chains, runners and their leases,
//! hand-overs and fences, recovery of a lost runner's requests.

use super::*;

pub(super) async fn suspend_claim_and_resume(store: Arc<dyn Store>, _raw: Raw) {
    running(&*store, "r1").await;
    store
        .suspend_request(&sjc("r1"), None, at(2, 0))
        .await
        .unwrap();
    assert_eq!(
        store.get_request("r1", false).await.unwrap().state,
        State::Suspended
    );
    assert!(store.running_jr_urls().await.unwrap().is_empty());
    // Suspending again: the request is no longer RUNNING and the chain exists.
    assert!(
        store
            .suspend_request(&sjc("r1"), None, at(2, 1))
            .await
            .is_err()
    );
    create(&*store, "r2").await;
    let err = store
        .suspend_request(&sjc("r2"), None, at(2, 1))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "request r2 in state PENDING, expected state RUNNING"
    );
    assert!(matches!(
        store.suspend_request(&sjc("nope"), None, at(2, 1)).await,
        Err(Error::NotFound { .. })
    ));

    // Claimed once; the claim holds the chain exactly as suspended.
    let claimed = store
        .claim_suspended("rm-a", at(2, 5))
        .await
        .unwrap()
        .expect("r1's chain is claimable");
    assert_eq!(claimed, sjc("r1"));
    assert!(
        store
            .claim_suspended("rm-b", at(2, 5))
            .await
            .unwrap()
            .is_none()
    );
    // Someone else's unclaim does nothing; the owner's makes it claimable again.
    store.unclaim(&"r1".into(), "rm-b").await.unwrap();
    assert!(
        store
            .claim_suspended("rm-b", at(2, 6))
            .await
            .unwrap()
            .is_none()
    );
    store.unclaim(&"r1".into(), "rm-a").await.unwrap();
    assert!(
        store
            .claim_suspended("rm-b", at(2, 6))
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        store
            .resumed(&"r1".into(), "rm-a", "http://jr2:32307", None)
            .await
            .is_err(),
        "not rm-a's claim"
    );
    store
        .resumed(&"r1".into(), "rm-b", "http://jr2:32307", None)
        .await
        .unwrap();
    let resumed = store.get_request("r1", false).await.unwrap();
    assert_eq!(
        (resumed.state, resumed.jr_url.as_str()),
        (State::Running, "http://jr2:32307")
    );
    assert_eq!(store.running_jr_urls().await.unwrap(), ["http://jr2:32307"]);
    assert!(
        store
            .claim_suspended("rm-a", at(2, 7))
            .await
            .unwrap()
            .is_none(),
        "the chain is gone"
    );
}

/// A claimed chain whose request moved on is deleted, and the caller learns the state;
/// a claim not renewed is released, and an old unclaimed chain expires.
pub(super) async fn resuming_a_request_that_moved_on(store: Arc<dyn Store>, raw: Raw) {
    running(&*store, "r2").await;
    store
        .suspend_request(&sjc("r2"), None, at(2, 0))
        .await
        .unwrap();
    store
        .claim_suspended("rm-a", at(2, 1))
        .await
        .unwrap()
        .unwrap();
    raw.exec("UPDATE requests SET state = 3 WHERE request_id = 'r2'")
        .await;
    let err = store
        .resumed(&"r2".into(), "rm-a", "http://jr9", None)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "request r2 in state COMPLETE, expected state SUSPENDED"
    );
    assert!(
        store
            .claim_suspended("rm-a", at(2, 2))
            .await
            .unwrap()
            .is_none(),
        "the chain was deleted"
    );
    assert_eq!(
        store.get_request("r2", false).await.unwrap().state,
        State::Complete
    );

    running(&*store, "r1").await;
    store
        .suspend_request(&sjc("r1"), None, at(2, 0))
        .await
        .unwrap();
    store
        .claim_suspended("rm-a", at(2, 1))
        .await
        .unwrap()
        .unwrap();
    store.expire_suspended(at(3, 0), at(3, 0)).await.unwrap();
    // Claimed chains do not expire.
    assert_eq!(
        store.get_request("r1", false).await.unwrap().state,
        State::Suspended
    );
    let _ = store.release_stale_claims(at(2, 0)).await.unwrap();
    assert_eq!(
        store
            .release_stale_claims(Utc::now() + Duration::minutes(1))
            .await
            .unwrap(),
        1
    );
    let expired = store.expire_suspended(at(3, 0), at(3, 1)).await.unwrap();
    assert_eq!(expired, ["r1"]);
    let failed = store.get_request("r1", false).await.unwrap();
    assert_eq!(
        (failed.state, failed.finished_at),
        (State::Fail, Some(at(3, 1))),
        "a finish time, unlike Spin Cycle"
    );
    assert!(
        store
            .claim_suspended("rm-a", at(3, 2))
            .await
            .unwrap()
            .is_none()
    );
}

pub(super) async fn claims_race_and_each_chain_is_claimed_once(store: Arc<dyn Store>, _raw: Raw) {
    let n = 40;
    for i in 0..n {
        let id = format!("r{i:03}");
        running(&*store, &id).await;
        store
            .suspend_request(&sjc(&id), None, at(2, 0) + Duration::seconds(i))
            .await
            .unwrap();
    }
    let mut tasks = tokio::task::JoinSet::new();
    for host in 0..8 {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            let mut mine = Vec::new();
            loop {
                match store.claim_suspended(&format!("rm-{host}"), at(3, 0)).await {
                    Ok(Some(claimed)) => mine.push(claimed.request_id),
                    Ok(None) => return mine,
                    Err(err) if err.is_transient() => tokio::task::yield_now().await,
                    Err(err) => panic!("claim failed: {err}"),
                }
            }
        });
    }
    let mut all = Vec::new();
    while let Some(mine) = tasks.join_next().await {
        all.extend(mine.unwrap());
    }
    let unique: HashSet<&String> = all.iter().collect();
    assert_eq!(all.len(), n as usize, "every chain claimed");
    assert_eq!(unique.len(), all.len(), "no chain claimed twice");
}

pub(super) fn registration(instance: &str, url: &str) -> proto::RunnerRegistration {
    proto::RunnerRegistration {
        instance_id: instance.to_owned(),
        url: url.to_owned(),
        host: "host1".to_owned(),
        pid: 4242,
        lease: "10s".to_owned(),
        ..Default::default()
    }
}

pub(super) async fn runners_register_renew_lapse_and_end(store: Arc<dyn Store>, _raw: Raw) {
    let t0 = at(3, 0);
    let jr1 = store
        .register_runner(&registration("i1", "http://jr1:32307"), t0)
        .await
        .unwrap();
    assert_eq!(
        (jr1.state, jr1.lease.as_str(), jr1.pid, jr1.running_requests),
        (proto::RunnerState::Live, "10s", 4242, 0)
    );
    let again = store
        .register_runner(&registration("i1", "http://jr1:32307"), t0)
        .await
        .unwrap_err();
    assert!(matches!(again, Error::Conflict(_)), "{again}");
    let bad = store
        .register_runner(
            &proto::RunnerRegistration {
                lease: "soon".to_owned(),
                ..registration("i9", "http://x")
            },
            t0,
        )
        .await
        .unwrap_err();
    assert!(bad.to_string().contains("expected such as 10s"), "{bad}");
    store
        .register_runner(&registration("i2", "http://jr2:32307"), t0)
        .await
        .unwrap();

    // Renewed within its lease it stays live; past it, it shows lost.
    let renewed = store
        .renew_runner("i1", t0 + Duration::seconds(5))
        .await
        .unwrap();
    assert_eq!(renewed.renewed_at, t0 + Duration::seconds(5));
    let now = t0 + Duration::seconds(12);
    let states: Vec<(String, proto::RunnerState)> = store
        .job_runners(now, now)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.instance_id, r.state))
        .collect();
    assert_eq!(
        states,
        [
            ("i1".to_owned(), proto::RunnerState::Live),
            ("i2".to_owned(), proto::RunnerState::Lost)
        ]
    );

    // Declaring it lost is a claim: once.
    assert!(store.mark_runner_lost("i2", now).await.unwrap());
    assert!(!store.mark_runner_lost("i2", now).await.unwrap());
    let err = store.renew_runner("i2", now).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::RunnerEnded {
                state: proto::RunnerState::Lost,
                ..
            }
        ),
        "{err}"
    );
    assert!(matches!(
        store.renew_runner("nope", now).await.unwrap_err(),
        Error::NotFound { .. }
    ));

    // A runner that shut down is stopped, and listed only while recent.
    store.end_runner("i1", now).await.unwrap();
    assert!(!store.mark_runner_lost("i1", now).await.unwrap());
    let listed = store.job_runners(now, now).await.unwrap();
    assert_eq!(listed.len(), 2);
    let i1 = listed.iter().find(|r| r.instance_id == "i1").unwrap();
    assert_eq!(
        (i1.state, i1.ended_at),
        (proto::RunnerState::Stopped, Some(now))
    );
    assert!(
        store
            .job_runners(now, now + Duration::seconds(1))
            .await
            .unwrap()
            .is_empty()
    );
}

pub(super) async fn hand_overs_are_fenced(store: Arc<dyn Store>, _raw: Raw) {
    create(&*store, "r1").await;
    let epoch = store
        .hand_over(&"r1".into(), State::Pending, &Default::default())
        .await
        .unwrap();
    // A new request is stored as epoch 1 (its first hand-over); this is the next.
    assert_eq!(epoch, 2);
    let owner = Fence {
        instance: "i1".to_owned(),
        epoch,
    };
    // A hand-over of an older epoch cannot start it.
    let stale = Fence {
        instance: "i0".to_owned(),
        epoch: 0,
    };
    let err = store
        .start_request(&"r1".into(), "http://jr1", Some(&stale), at(1, 1))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err}");
    store
        .start_request(&"r1".into(), "http://jr1", Some(&owner), at(1, 1))
        .await
        .unwrap();
    assert_eq!(
        store.owner("r1").await.unwrap(),
        Owner {
            state: State::Running,
            instance: "i1".to_owned(),
            epoch: 2
        }
    );
    assert!(
        store
            .hand_over(&"r1".into(), State::Pending, &Default::default())
            .await
            .is_err()
    );

    // Another instance, or the same at another epoch, cannot finish it.
    let finish = FinishRequest {
        request_id: "r1".to_owned(),
        state: State::Complete,
        finished_at: at(1, 5),
        finished_jobs: 2,
        error: String::new(),
        job_logs: Vec::new(),
    };
    for fence in [
        Fence {
            instance: "i2".to_owned(),
            epoch: 1,
        },
        Fence {
            instance: "i1".to_owned(),
            epoch: epoch + 1,
        },
    ] {
        let err = store
            .finish_request(&finish, Some(&fence))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Fenced(_)), "{err}");
        assert!(
            err.to_string()
                .contains("is owned by job runner instance i1 at epoch 2"),
            "{err}"
        );
        let err = store
            .suspend_request(&sjc("r1"), Some(&fence), at(1, 5))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Fenced(_)), "{err}");
    }
    assert_eq!(store.owner("r1").await.unwrap().state, State::Running);
    // Nothing was left behind by the refused suspend: the owner may suspend.
    store
        .suspend_request(&sjc("r1"), Some(&owner), at(1, 5))
        .await
        .unwrap();
    let epoch = store
        .hand_over(&"r1".into(), State::Suspended, &sjc("r1").total_job_tries)
        .await
        .unwrap();
    let claimed = store.claim_suspended("rm-a", at(1, 6)).await.unwrap();
    assert!(claimed.is_some());
    let resumed_by = Fence {
        instance: "i3".to_owned(),
        epoch,
    };
    store
        .resumed(&"r1".into(), "rm-a", "http://jr3", Some(&resumed_by))
        .await
        .unwrap();
    let err = store
        .finish_request(&finish, Some(&owner))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err}");
    assert_eq!(
        store
            .finish_request(&finish, Some(&resumed_by))
            .await
            .unwrap(),
        Finished::Now
    );
    // A finished request answers a re-sent finish from its owner as done already.
    assert_eq!(
        store
            .finish_request(&finish, Some(&resumed_by))
            .await
            .unwrap(),
        Finished::Already(State::Complete)
    );
}

pub(super) fn try_start(request_id: &str, job_id: &str, try_no: u32) -> proto::TryStart {
    proto::TryStart {
        request_id: request_id.to_owned(),
        job_id: job_id.to_owned(),
        r#try: try_no,
        run_try: try_no,
        sequence_try: 1,
        started_at: 5_000 + i64::from(try_no),
    }
}

/// Request r1, RUNNING on runner instance i1 (registered at 1:00, started at 1:01): the
/// owner's fence.
pub(super) async fn running_on_i1(store: &dyn Store) -> Fence {
    store
        .register_runner(&registration("i1", "http://jr1"), at(1, 0))
        .await
        .unwrap();
    create(store, "r1").await;
    let epoch = store
        .hand_over(&"r1".into(), State::Pending, &Default::default())
        .await
        .unwrap();
    let owner = Fence {
        instance: "i1".to_owned(),
        epoch,
    };
    store
        .start_request(&"r1".into(), "http://jr1", Some(&owner), at(1, 1))
        .await
        .unwrap();
    owner
}

/// A try that starts while its request is being recovered (after the recovery read the
/// starts) is either refused (the recovery committed first) or makes the recovery fail,
/// to be done again: never stored and missed, which ran the job twice under one try
/// number (seen in the chaos test).
pub(super) async fn a_try_started_during_a_recovery_is_never_missed(
    store: Arc<dyn Store>,
    _raw: Raw,
) {
    let owner = running_on_i1(&*store).await;
    // The recovery read the starts: none. Then the runner's start of a arrives.
    assert!(store.try_starts("r1").await.unwrap().is_empty());
    store
        .insert_try_starts(Some(&owner), &[try_start("r1", "a", 1)])
        .await
        .unwrap();
    let err = store
        .recover_request(Holder::Lost("i1"), &[], &sjc("r1"), at(1, 2))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TryBegan { .. }), "{err}");
    assert_eq!(
        store.owner("r1").await.unwrap().state,
        State::Running,
        "nothing changed"
    );
    // Recovered again from what is stored: the start is logged interrupted.
    let interrupted = JobLog {
        error: "interrupted".to_owned(),
        ..log("r1", "a", 1, State::Stopped)
    };
    store
        .recover_request(Holder::Lost("i1"), &[interrupted], &sjc("r1"), at(1, 3))
        .await
        .unwrap();
    // After the recovery, the lost runner's starts are refused.
    let err = store
        .insert_try_starts(Some(&owner), &[try_start("r1", "b", 1)])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err}");
    assert_eq!(store.try_starts("r1").await.unwrap().len(), 1);
}

/// A try that starts and ends (its entry logged) while its request is being recovered,
/// after the recovery read the starts and the log, makes the recovery fail, to be done
/// again: counted as never run, it would run again under the same try number, whose
/// start and entry are kept once (the chaos test on MySQL: two runs, one entry).
pub(super) async fn a_try_started_and_ended_during_a_recovery_is_never_missed(
    store: Arc<dyn Store>,
    _raw: Raw,
) {
    let owner = running_on_i1(&*store).await;
    // The recovery read the starts and the log: none of c. Then the runner (lost, but
    // not yet told) starts c, runs it and logs it.
    assert!(store.try_starts("r1").await.unwrap().is_empty());
    store
        .insert_try_starts(Some(&owner), &[try_start("r1", "c", 1)])
        .await
        .unwrap();
    store
        .insert_job_logs(&[log("r1", "c", 1, State::Complete)])
        .await
        .unwrap();
    let err = store
        .recover_request(Holder::Lost("i1"), &[], &sjc("r1"), at(1, 2))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TryBegan { .. }), "{err}");
    assert!(err.to_string().contains("try 1 of job c"), "{err}");
    assert_eq!(store.owner("r1").await.unwrap().state, State::Running);
    // Recovered again from what is stored: c counted, nothing interrupted.
    let mut known = sjc("r1");
    known.total_job_tries.insert("c".to_owned(), 1);
    store
        .recover_request(Holder::Lost("i1"), &[], &known, at(1, 3))
        .await
        .unwrap();
    assert_eq!(store.owner("r1").await.unwrap().state, State::Suspended);
}

pub(super) async fn a_lost_runners_request_is_recovered_once(store: Arc<dyn Store>, _raw: Raw) {
    let owner = running_on_i1(&*store).await;
    store
        .insert_try_starts(
            Some(&owner),
            &[try_start("r1", "a", 1), try_start("r1", "b", 1)],
        )
        .await
        .unwrap();
    // Sent again: stored once.
    store
        .insert_try_starts(Some(&owner), &[try_start("r1", "b", 1)])
        .await
        .unwrap();
    store
        .insert_job_logs(&[log("r1", "a", 1, State::Complete)])
        .await
        .unwrap();
    let started = store.try_starts("r1").await.unwrap();
    assert_eq!(
        started,
        [
            StartedTry {
                start: try_start("r1", "a", 1),
                instance: "i1".to_owned()
            },
            StartedTry {
                start: try_start("r1", "b", 1),
                instance: "i1".to_owned()
            }
        ]
    );
    assert_eq!(store.owned_requests("i1").await.unwrap(), ["r1"]);
    assert_eq!(
        store.job_runners(at(1, 0), at(1, 0)).await.unwrap()[0].running_requests,
        1
    );

    let interrupted = JobLog {
        error: "interrupted".to_owned(),
        ..log("r1", "b", 1, State::Stopped)
    };
    store
        .recover_request(
            Holder::Lost("i1"),
            std::slice::from_ref(&interrupted),
            &sjc("r1"),
            at(1, 2),
        )
        .await
        .unwrap();
    // A second recovery (another Request Manager) finds it moved on.
    let err = store
        .recover_request(Holder::Lost("i1"), &[interrupted], &sjc("r1"), at(1, 2))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Fenced(_) | Error::State { .. }),
        "{err}"
    );
    let now = store.owner("r1").await.unwrap();
    assert_eq!(
        (now.state, now.instance.as_str(), now.epoch),
        (State::Suspended, "", owner.epoch + 1)
    );
    // The lost instance can report nothing more.
    let err = store
        .suspend_request(&sjc("r1"), Some(&owner), at(1, 3))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err}");
    let logs = store.job_log("r1").await.unwrap();
    assert_eq!(
        logs.iter()
            .map(|l| (l.job_id.as_str(), l.r#try, l.state))
            .collect::<Vec<_>>(),
        [("a", 1, State::Complete), ("b", 1, State::Stopped)]
    );
    assert!(
        store
            .claim_suspended("rm-a", at(1, 4))
            .await
            .unwrap()
            .is_some()
    );

    // Once finished, its started tries are forgotten.
    let epoch = store
        .hand_over(&"r1".into(), State::Suspended, &sjc("r1").total_job_tries)
        .await
        .unwrap();
    let next = Fence {
        instance: "i2".to_owned(),
        epoch,
    };
    store
        .resumed(&"r1".into(), "rm-a", "http://jr2", Some(&next))
        .await
        .unwrap();
    store
        .finish_request(
            &FinishRequest {
                request_id: "r1".to_owned(),
                state: State::Complete,
                finished_at: at(1, 5),
                finished_jobs: 2,
                error: String::new(),
                job_logs: Vec::new(),
            },
            Some(&next),
        )
        .await
        .unwrap();
    assert!(store.try_starts("r1").await.unwrap().is_empty());
}

/// A PENDING request handed over (epoch 2) to a runner that began it, never marked
/// RUNNING: taken back only at that epoch, once.
pub(super) async fn an_unstarted_hand_over_is_taken_back_at_its_epoch(
    store: Arc<dyn Store>,
    _raw: Raw,
) {
    create(&*store, "r1").await;
    let epoch = store
        .hand_over(&"r1".into(), State::Pending, &Default::default())
        .await
        .unwrap();
    let interrupted = JobLog {
        error: "interrupted".to_owned(),
        ..log("r1", "a", 1, State::Stopped)
    };
    // Handed over again since (another Request Manager): refused as fenced.
    let err = store
        .recover_request(
            Holder::Unstarted(epoch - 1),
            std::slice::from_ref(&interrupted),
            &sjc("r1"),
            at(1, 2),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err}");
    assert_eq!(store.owner("r1").await.unwrap().state, State::Pending);
    store
        .recover_request(
            Holder::Unstarted(epoch),
            std::slice::from_ref(&interrupted),
            &sjc("r1"),
            at(1, 2),
        )
        .await
        .unwrap();
    let now = store.owner("r1").await.unwrap();
    assert_eq!((now.state, now.epoch), (State::Suspended, epoch + 1));
    assert_eq!(store.job_log("r1").await.unwrap().len(), 1);
    // Once moved on, a second take-back finds it so.
    let err = store
        .recover_request(Holder::Unstarted(epoch + 1), &[], &sjc("r1"), at(1, 3))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::State { .. }), "{err}");
    assert!(
        store
            .claim_suspended("rm-a", at(1, 4))
            .await
            .unwrap()
            .is_some()
    );
}

/// `spindle retry`: a finished request goes back to SUSPENDED only from the state it
/// finished in, with its finish time and reason cleared and a new epoch.
pub(super) async fn a_finished_request_is_retried_from_its_final_state_only(
    store: Arc<dyn Store>,
    _raw: Raw,
) {
    running(&*store, "r1").await;
    let failed = FinishRequest {
        request_id: "r1".to_owned(),
        state: State::Fail,
        finished_at: at(1, 5),
        finished_jobs: 2,
        error: "its deadline passed".to_owned(),
        job_logs: Vec::new(),
    };
    store.finish_request(&failed, None).await.unwrap();
    let before = store.owner("r1").await.unwrap().epoch;
    let err = store
        .recover_request(Holder::Finished(State::Stopped), &[], &sjc("r1"), at(1, 6))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::State { .. }), "{err}");
    store
        .recover_request(Holder::Finished(State::Fail), &[], &sjc("r1"), at(1, 6))
        .await
        .unwrap();
    let request = store.get_request("r1", false).await.unwrap();
    assert_eq!(
        (
            request.state,
            request.finished_at,
            request.error.as_str(),
            request.finished_jobs
        ),
        (State::Suspended, None, "", 1)
    );
    assert_eq!(store.owner("r1").await.unwrap().epoch, before + 1);
    let claimed = store.claim_suspended("rm-a", at(1, 7)).await.unwrap();
    assert_eq!(claimed, Some(sjc("r1")));
}
