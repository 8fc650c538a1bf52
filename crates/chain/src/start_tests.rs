//! A try runs only once its start is stored: one the Request Manager would not take
//! (the delivery given up on) does not run; it fails saying why, and the job's retries
//! apply, so nothing runs unseen by a recovery.

use super::*;

// ---- try starts and abandonment (issue 11) ----

#[tokio::test(start_paused = true)]
async fn tries_report_their_start_and_a_durable_one_waits_until_it_is_stored() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    *fakes.recorder.lock().unwrap() = Some(Arc::clone(&recorder));
    fakes.durable.lock().unwrap().push("j2".to_owned());
    fakes.script("j2", vec![Step::Fail, sleep(1_000, Step::Complete)]);
    // Slow deliveries: a job that did not wait would begin before its start is stored.
    recorder.delay_ms.store(50, Ordering::SeqCst);
    let mut c = chain("1>2");
    job(&mut c, "2").retry = 1;
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(fakes.start_stored.lock().unwrap()["j2"], [true, true]);
    let starts = recorder.starts.lock().unwrap().clone();
    let j2: Vec<(u32, u32, u32)> = starts
        .iter()
        .filter(|s| s.job_id == "j2")
        .map(|s| (s.r#try, s.run_try, s.sequence_try))
        .collect();
    assert_eq!(j2, [(1, 1, 1), (2, 2, 1)]);
    assert!(
        starts
            .iter()
            .all(|s| s.request_id == "req" && s.started_at > 0)
    );
}

#[tokio::test(start_paused = true)]
async fn a_fenced_report_abandons_the_chain_without_another_word() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j1", vec![Step::Complete])
        .script("j2", vec![sleep(60_000, Step::Complete)])
        .script("j3", vec![sleep(1_000, Step::Complete)]);
    let handle = start(chain("1>2,3 2>4 3>4"), &fakes, &recorder);
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Another runner was given the request: j3's entry is refused.
    recorder.fenced.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let end = handle.wait().await;
    assert_eq!(end.state, State::Unknown);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "j2 was stopped, not awaited"
    );
    assert_eq!(recorder.tries_of("j1"), [(1, State::Complete)]);
    assert!(recorder.tries_of("j2").is_empty());
    assert!(recorder.finishes().is_empty());
    // j3's entry and the progress that went with it (sent together, both refused);
    // nothing after.
    assert_eq!(
        recorder.fenced_calls.load(Ordering::SeqCst),
        2,
        "nothing more was sent after the refusal"
    );
    assert_eq!(fakes.running.load(Ordering::SeqCst), 0);
    assert_eq!(handle.stop().await.unwrap().state, State::Unknown);
}

#[tokio::test(start_paused = true)]
async fn an_abandoned_chain_stops_its_jobs_and_reports_nothing_more() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![sleep(60_000, Step::Complete)]);
    let handle = start(chain("1>2 2>3"), &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(recorder.tries_of("j1"), [(1, State::Complete)]);
    handle.abandon();
    let end = handle.wait().await;
    assert_eq!(end.state, State::Unknown);
    assert_eq!(fakes.running.load(Ordering::SeqCst), 0);
    assert!(
        recorder.tries_of("j2").is_empty(),
        "its stopped try is not reported"
    );
    assert!(recorder.tries_of("j3").is_empty());
    assert!(recorder.finishes().is_empty());
    assert!(recorder.suspended.lock().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_try_whose_start_is_not_stored_does_not_run() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    *fakes.recorder.lock().unwrap() = Some(Arc::clone(&recorder));
    fakes.durable.lock().unwrap().push("j2".to_owned());
    fakes.script("j2", vec![Step::Complete, Step::Complete]);
    *recorder.start_error.lock().unwrap() = Some(ReportError::failed(
        "500 Internal Server Error: storing failed",
    ));
    let mut c = chain("1>2");
    job(&mut c, "2").retry = 1;
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    // Neither try ran.
    assert!(
        !fakes.start_stored.lock().unwrap().contains_key("j2"),
        "j2 ran without its start stored"
    );
    assert_eq!(
        recorder.tries_of("j2"),
        [(1, State::Fail), (2, State::Fail)]
    );
    let errors: Vec<String> = recorder
        .logs
        .lock()
        .unwrap()
        .iter()
        .filter(|entry| entry.job_id == "j2")
        .map(|entry| entry.error.clone())
        .collect();
    for error in &errors {
        assert!(
            error.starts_with("not run: its start could not be stored (")
                && error.contains("storing failed"),
            "{errors:?}"
        );
    }
    assert_eq!(recorder.tries_of("j1"), [(1, State::Complete)]);
}
