//! Running status, stop (§9), suspend and resume (§10, §11), Spindle's pause.

use super::*;

// ---- running status ----

#[tokio::test(start_paused = true)]
async fn running_status_lists_running_jobs_with_try_and_status_line() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script(
            "j2",
            vec![Step::Status(
                "copying",
                Box::new(sleep(10_000, Step::Complete)),
            )],
        )
        .script(
            "j3",
            vec![
                Step::Status("checking", Box::new(Step::Fail)),
                sleep(10_000, Step::Complete),
            ],
        );
    let mut c = chain("1>2,3 2>4 3>4");
    job(&mut c, "3").retry = 1;
    job(&mut c, "3").retry_wait = "2s".to_owned();
    let handle = start(c, &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let running = handle.running().await;
    let summary: Vec<(String, u32, State, String)> = running
        .iter()
        .map(|s| (s.job_id.clone(), s.r#try, s.state, s.status.clone()))
        .collect();
    assert_eq!(summary.len(), 2, "{summary:?}");
    assert!(summary.contains(&("j2".to_owned(), 1, State::Running, "copying".to_owned())));
    assert!(summary.contains(&(
        "j3".to_owned(),
        1,
        State::Running,
        "(retry sleep) checking".to_owned()
    )));
    assert!(
        running
            .iter()
            .all(|s| s.started_at > 0 && s.request_id == "req")
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let running = handle.running().await;
    let j3 = running.iter().find(|s| s.job_id == "j3").unwrap();
    assert_eq!(j3.r#try, 2);
    assert_eq!(handle.wait().await.state, State::Complete);
    assert!(handle.running().await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn running_first_describes_only_the_oldest_and_counts_them_all() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    for id in ["j2", "j3", "j4", "j5"] {
        fakes.script(id, vec![sleep(10_000, Step::Complete)]);
    }
    let handle = start(chain("1>2,3,4,5 2>6 3>6 4>6 5>6"), &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let all = handle.running().await;
    assert_eq!(all.len(), 4, "{all:?}");
    let (first, count) = handle.running_first(2).await;
    assert_eq!(count, 4);
    assert_eq!(first, all[..2]);
    let (none, count) = handle.running_first(0).await;
    assert!(none.is_empty());
    assert_eq!(count, 4);
    let (every, _) = handle.running_first(10).await;
    assert_eq!(every, all);
    assert_eq!(handle.wait().await.state, State::Complete);
    assert_eq!(handle.running_first(2).await, (Vec::new(), 0));
}

// ---- §9 stop ----

#[tokio::test(start_paused = true)]
async fn stop_cancels_running_jobs_and_reports_stopped() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j2", vec![sleep(60_000, Step::Complete)])
        .script("j3", vec![sleep(60_000, Step::Complete)]);
    let handle = start(chain("1>2,3 2>4 3>4"), &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    let end = handle.stop().await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(end.state, State::Stopped);
    assert_eq!(recorder.tries_of("j2"), [(1, State::Stopped)]);
    assert_eq!(recorder.tries_of("j3"), [(1, State::Stopped)]);
    assert!(recorder.tries_of("j4").is_empty());
    assert_eq!(recorder.finishes(), [State::Stopped]);
    // Stopping again is a no-op.
    assert_eq!(handle.stop().await.unwrap().state, State::Stopped);
    assert_eq!(recorder.finishes(), [State::Stopped]);
}

#[tokio::test(start_paused = true)]
async fn stop_while_a_job_ignores_it_for_a_while() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::SlowToStop(3_000)]);
    let handle = start(chain("1>2 2>3"), &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    let end = handle.stop().await.unwrap();
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(3),
        "stop waits for the job"
    );
    assert_eq!(
        end.state,
        State::Stopped,
        "a FAIL after a stop counts as stopped"
    );
    assert_eq!(recorder.tries_of("j2"), [(1, State::Stopped)]);
}

#[tokio::test(start_paused = true)]
async fn stop_with_a_job_that_ignores_it_past_the_timeout_fails_the_chain() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j3", vec![Step::SlowToStop(3_600_000)])
        .script("j2", vec![sleep(60_000, Step::Complete)]);
    let handle = run(
        chain("1>2,3 2>4 3>4"),
        Arc::new(FakeFactory(Arc::clone(&fakes))),
        recorder.clone(),
        Options {
            stop_timeout: Duration::from_millis(100),
            ..options()
        },
    )
    .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    let end = handle.stop().await.unwrap();
    assert_eq!(started.elapsed(), Duration::from_millis(100));
    assert_eq!(end.state, State::Fail);
    assert_eq!(recorder.tries_of("j2"), [(1, State::Stopped)]);
    let j3 = recorder
        .logs
        .lock()
        .unwrap()
        .iter()
        .find(|l| l.job_id == "j3")
        .cloned()
        .unwrap();
    assert_eq!((j3.r#try, j3.state), (1, State::Fail));
    assert!(
        j3.error.contains("did not stop within 100ms"),
        "{}",
        j3.error
    );
    assert_eq!(recorder.finishes(), [State::Fail]);
}

#[tokio::test(start_paused = true)]
async fn stop_during_a_job_retry_wait() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::Fail]);
    let mut c = chain("1>2 2>3");
    job(&mut c, "2").retry = 3;
    job(&mut c, "2").retry_wait = "1m".to_owned();
    let handle = start(c, &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let end = handle.stop().await.unwrap();
    assert_eq!(end.state, State::Stopped);
    assert_eq!(
        recorder.tries_of("j2"),
        [(1, State::Fail)],
        "no entry for the try never run"
    );
    assert_eq!(recorder.finishes(), [State::Stopped]);
}

/// Spin Cycle lost the final state here: nothing runs during a sequence retry wait.
#[tokio::test(start_paused = true)]
async fn stop_during_a_sequence_retry_wait_reports_stopped() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::Fail]);
    let mut c = chain("1>2 2>3");
    job(&mut c, "1").sequence_retry = 1;
    job(&mut c, "1").sequence_retry_wait = "1h".to_owned();
    let handle = start(c, &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(handle.running().await.is_empty());
    let end = handle.stop().await.unwrap();
    assert_eq!(end.state, State::Stopped);
    assert_eq!(recorder.finishes(), [State::Stopped]);
}

#[tokio::test(start_paused = true)]
async fn stop_after_the_chain_completed() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    let handle = start(chain("1>2"), &fakes, &recorder);
    handle.wait().await;
    assert_eq!(handle.stop().await.unwrap().state, State::Complete);
    assert_eq!(recorder.finishes(), [State::Complete]);
}

// ---- §10 suspend, §11 resume ----

// ---- Spindle's pause ----

/// A pause lets the running job finish and starts nothing new; unpaused, the chain goes
/// on to COMPLETE with one try per job.
#[tokio::test(start_paused = true)]
async fn a_paused_chain_finishes_its_running_jobs_and_starts_nothing_until_unpaused() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j1", vec![sleep(1_000, Step::Complete)]);
    let handle = start(chain("1>2,3 2>4 3>4"), &fakes, &recorder);
    tokio::time::sleep(Duration::from_millis(100)).await;
    handle.set_paused(true);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(recorder.tries(), [t("1", 1, State::Complete)]);
    assert!(handle.result().is_none(), "a paused chain waits");
    assert!(handle.running().await.is_empty());
    handle.set_paused(false);
    let end = handle.wait().await;
    assert_eq!(end.state, State::Complete);
    let mut tries = recorder.tries();
    tries.sort();
    assert_eq!(
        tries,
        [
            t("1", 1, State::Complete),
            t("2", 1, State::Complete),
            t("3", 1, State::Complete),
            t("4", 1, State::Complete)
        ]
    );
}

/// A chain can start paused (a paused request handed over again); stopped or suspended
/// while paused, it ends at once with the waiting jobs PENDING.
#[tokio::test(start_paused = true)]
async fn a_chain_started_paused_can_be_stopped_or_suspended() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    let paused = Options {
        paused: true,
        ..options()
    };
    let factory = Arc::new(FakeFactory(Arc::clone(&fakes)));
    let handle = run(
        chain("1>2"),
        factory.clone(),
        recorder.clone(),
        paused.clone(),
    )
    .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(recorder.tries().is_empty());
    handle.suspend();
    assert_eq!(handle.wait().await.state, State::Suspended);
    let suspended = recorder.suspended.lock().unwrap()[0].clone();
    assert!(
        suspended
            .job_chain
            .jobs
            .values()
            .all(|job| job.state == State::Pending)
    );

    let handle = run(chain("1>2"), factory, recorder.clone(), paused).unwrap();
    assert_eq!(handle.stop().await.unwrap().state, State::Stopped);
    assert!(recorder.tries().is_empty());
}

#[tokio::test(start_paused = true)]
async fn suspend_hands_back_the_chain_with_its_counters() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script(
            "j1",
            vec![Step::Data("data1", "1", Box::new(Step::Complete))],
        )
        .script(
            "j2",
            vec![
                Step::Data("data2", "2", Box::new(Step::SlowToStop(0))),
                Step::Complete,
            ],
        )
        .script(
            "j3",
            vec![Step::Fail, sleep(60_000, Step::Complete), Step::Complete],
        );
    let mut c = chain("1>2,3 2>4 3>5 4>6 5>6");
    job(&mut c, "1").sequence_retry = 1;
    job(&mut c, "3").retry = 2;
    let handle = start(c, &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(1)).await;
    handle.suspend();
    let end = handle.wait().await;
    assert_eq!(end.state, State::Suspended);
    assert!(recorder.finishes().is_empty());
    let sjc = recorder.suspended.lock().unwrap()[0].clone();
    let states: BTreeMap<&str, State> = sjc
        .job_chain
        .jobs
        .iter()
        .map(|(id, j)| (id.as_str(), j.state))
        .collect();
    assert_eq!(
        states,
        BTreeMap::from([
            ("j1", State::Complete),
            ("j2", State::Stopped),
            ("j3", State::Stopped),
            ("j4", State::Pending),
            ("j5", State::Pending),
            ("j6", State::Pending),
        ])
    );
    assert_eq!(sjc.job_chain.state, State::Suspended);
    assert_eq!(sjc.job_chain.finished_jobs, 1);
    assert_eq!(
        sjc.total_job_tries,
        BTreeMap::from([("j1".into(), 1), ("j2".into(), 1), ("j3".into(), 2)])
    );
    assert_eq!(
        sjc.latest_run_job_tries,
        BTreeMap::from([("j1".into(), 1), ("j2".into(), 1), ("j3".into(), 2)])
    );
    assert_eq!(sjc.sequence_tries, BTreeMap::from([("j1".into(), 1)]));
    assert_eq!(
        sjc.job_chain.jobs["j3"].data,
        json!({"data1": "1"}).as_object().unwrap().clone().into()
    );

    // Resume: job2 and job3 run again with the next try numbers; job3 keeps its budget.
    let recorder2 = Arc::new(Recorder::default());
    let handle = resume(
        sjc,
        Arc::new(FakeFactory(Arc::clone(&fakes))),
        recorder2.clone(),
        options(),
    )
    .unwrap();
    let end = handle.wait().await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(end.finished_jobs, 6);
    assert_eq!(recorder2.tries_of("j2"), [(2, State::Complete)]);
    assert_eq!(recorder2.tries_of("j3"), [(3, State::Complete)]);
    assert!(recorder2.tries_of("j1").is_empty());
    assert_eq!(recorder2.finishes(), [State::Complete]);
}

#[tokio::test(start_paused = true)]
async fn resume_example_of_runner_md() {
    let mut c = chain("1>2,3 2>4,5 3>4 4>6 5>6");
    job(&mut c, "1").sequence_retry = 1;
    job(&mut c, "3").retry = 2;
    for (id, state) in [
        ("1", State::Complete),
        ("2", State::Complete),
        ("3", State::Stopped),
    ] {
        job(&mut c, id).state = state;
    }
    c.finished_jobs = 2;
    c.state = State::Suspended;
    let ids = |pairs: &[(&str, u32)]| {
        pairs
            .iter()
            .map(|(id, n)| ((*id).to_owned(), *n))
            .collect::<BTreeMap<_, _>>()
    };
    let sjc = SuspendedJobChain {
        request_id: "req".to_owned(),
        job_chain: c,
        total_job_tries: ids(&[("j1", 2), ("j2", 2), ("j3", 3), ("j4", 1)]),
        latest_run_job_tries: ids(&[("j1", 1), ("j2", 1), ("j3", 1), ("j4", 1)]),
        sequence_tries: ids(&[("j1", 2)]),
    };
    // As the in-process hand-over gives it, and decoded from its JSON as the Job
    // Runner's API does: the same run.
    let decoded: crate::Resumed =
        serde_json::from_str(&serde_json::to_string(&sjc).unwrap()).unwrap();
    assert_eq!(decoded.request_id(), "req");
    for resumed in [crate::Resumed::from(sjc), decoded] {
        let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
        let handle = resume(
            resumed,
            Arc::new(FakeFactory(Arc::clone(&fakes))),
            recorder.clone(),
            options(),
        )
        .unwrap();
        let end = handle.wait().await;
        assert_eq!(end.state, State::Complete, "{:?}", recorder.tries());
        let mut tries = recorder.tries();
        tries.sort();
        assert_eq!(
            tries,
            [
                t("3", 4, State::Complete),
                t("4", 2, State::Complete),
                t("5", 1, State::Complete),
                t("6", 1, State::Complete)
            ]
        );
    }
}

#[tokio::test(start_paused = true)]
async fn suspend_during_a_sequence_retry_and_resume() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::Fail, Step::Complete]);
    let mut c = chain("1>2 2>3");
    job(&mut c, "1").sequence_retry = 1;
    job(&mut c, "1").sequence_retry_wait = "30s".to_owned();
    let handle = start(c, &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(5)).await;
    handle.suspend();
    assert_eq!(handle.wait().await.state, State::Suspended);
    let sjc = recorder.suspended.lock().unwrap()[0].clone();
    assert!(
        sjc.job_chain
            .jobs
            .values()
            .all(|j| j.state == State::Pending),
        "the sequence was reset"
    );
    assert_eq!(sjc.job_chain.finished_jobs, 0);
    assert_eq!(sjc.sequence_tries["j1"], 1);
    assert_eq!(sjc.total_job_tries["j2"], 1);

    let recorder2 = Arc::new(Recorder::default());
    let started = Instant::now();
    let handle = resume(
        sjc,
        Arc::new(FakeFactory(Arc::clone(&fakes))),
        recorder2.clone(),
        options(),
    )
    .unwrap();
    assert_eq!(handle.wait().await.state, State::Complete);
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(30),
        "the resumed sequence waits its retry wait"
    );
    assert_eq!(recorder2.tries_of("j1"), [(2, State::Complete)]);
    assert_eq!(recorder2.tries_of("j2"), [(2, State::Complete)]);
}

#[tokio::test(start_paused = true)]
async fn suspend_while_nothing_runs_still_hands_back_the_chain() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::Fail]);
    let mut c = chain("1>2 2>3");
    job(&mut c, "2").retry = 1;
    job(&mut c, "2").retry_wait = "1h".to_owned();
    let handle = start(c, &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(5)).await;
    handle.suspend();
    assert_eq!(handle.wait().await.state, State::Suspended);
    let sjc = recorder.suspended.lock().unwrap()[0].clone();
    // Stopped in its retry wait: one try logged, and the pending try is given back on resume.
    assert_eq!(sjc.total_job_tries["j2"], 1);
    assert_eq!(sjc.latest_run_job_tries["j2"], 2);
    let recorder2 = Arc::new(Recorder::default());
    fakes.script("j2", vec![Step::Fail, Step::Complete]);
    let handle = resume(
        sjc,
        Arc::new(FakeFactory(Arc::clone(&fakes))),
        recorder2.clone(),
        options(),
    )
    .unwrap();
    assert_eq!(handle.wait().await.state, State::Complete);
    assert_eq!(
        recorder2.tries_of("j2"),
        [(2, State::Complete)],
        "try 2, its last retry"
    );
}

#[tokio::test(start_paused = true)]
async fn stop_while_suspending_is_refused() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::SlowToStop(2_000)]);
    let handle = start(chain("1>2 2>3"), &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(1)).await;
    handle.suspend();
    tokio::task::yield_now().await;
    assert_eq!(handle.stop().await, Err(StopError::ShuttingDown));
    assert_eq!(handle.wait().await.state, State::Suspended);
    assert!(recorder.finishes().is_empty());
}
