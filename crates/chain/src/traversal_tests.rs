//! Traversal (L), job retries (K), job data, sequence retries (§7), parallel windows.

use super::*;

// ---- L. traversal ----

#[tokio::test(start_paused = true)]
async fn diamond_completes_with_one_entry_per_job() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j2", vec![sleep(100, Step::Complete)])
        .script("j3", vec![sleep(100, Step::Complete)]);
    let handle = start(chain("1>2,3 2>4 3>4"), &fakes, &recorder);
    let end = handle.wait().await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(end.finished_jobs, 4);
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
    assert_eq!(recorder.finishes(), [State::Complete]);
    assert_eq!(recorder.finishes.lock().unwrap()[0].finished_jobs, 4);
    assert!(recorder.progress.lock().unwrap().iter().all(|n| *n <= 4));
    // Both branches ran at once.
    assert_eq!(fakes.max_running(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_failure_ends_the_chain_after_independent_branches_finish() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j3", vec![Step::Fail])
        .script("j2", vec![sleep(5_000, Step::Complete)]);
    let started = Instant::now();
    let end = start(chain("1>2,3 2>4 3>4"), &fakes, &recorder)
        .wait()
        .await;
    assert_eq!(end.state, State::Fail);
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(5),
        "job2 finished first"
    );
    assert_eq!(recorder.tries_of("j2"), [(1, State::Complete)]);
    assert_eq!(recorder.tries_of("j3"), [(1, State::Fail)]);
    assert!(recorder.tries_of("j4").is_empty(), "job4 never ran");
    assert_eq!(recorder.finishes(), [State::Fail]);
}

#[tokio::test(start_paused = true)]
async fn empty_chain_completes_at_once() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    let empty = JobChain {
        request_id: "req".to_owned(),
        ..JobChain::default()
    };
    let end = start(empty, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
}

// ---- K. job retries ----

#[tokio::test(start_paused = true)]
async fn job_retries_until_out_of_tries() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::Fail]);
    let mut c = chain("1>2 2>3");
    job(&mut c, "2").retry = 2;
    job(&mut c, "2").retry_wait = "30s".to_owned();
    let started = Instant::now();
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    assert_eq!(
        recorder.tries_of("j2"),
        [(1, State::Fail), (2, State::Fail), (3, State::Fail)]
    );
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(60),
        "two waits of 30s"
    );
}

/// What an observer was told.
#[derive(Debug, Default)]
struct Watcher {
    started: AtomicUsize,
    ended: AtomicUsize,
    /// (job, try, state, retry) per entry.
    tries: Mutex<Vec<(String, u32, State, bool)>>,
    backlogs: Mutex<Vec<usize>>,
    failures: Mutex<Vec<crate::ReportErrorKind>>,
}

impl crate::Observer for Watcher {
    fn job_started(&self) {
        self.started.fetch_add(1, Ordering::SeqCst);
    }
    fn job_ended(&self) {
        self.ended.fetch_add(1, Ordering::SeqCst);
    }
    fn try_logged(&self, entry: &JobLog, retry: bool) {
        self.tries
            .lock()
            .unwrap()
            .push((entry.job_id.clone(), entry.r#try, entry.state, retry));
    }
    fn backlog(&self, reports: usize) {
        self.backlogs.lock().unwrap().push(reports);
    }
    fn delivery_failed(&self, kind: crate::ReportErrorKind) {
        self.failures.lock().unwrap().push(kind);
    }
}

/// The observer hears of every job's start and end, each try once with whether it was
/// a retry, failed deliveries, and a backlog that ends at zero.
#[tokio::test(start_paused = true)]
async fn an_observer_hears_jobs_tries_and_deliveries() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    // Jobs that take longer than the delivery's linger, so that entries go on their own.
    fakes.script("j1", vec![sleep(50, Step::Complete)]);
    fakes.script("j2", vec![sleep(50, Step::Fail), sleep(50, Step::Complete)]);
    fakes.script("j3", vec![sleep(50, Step::Complete)]);
    recorder.fail_logs.store(2, Ordering::SeqCst);
    let mut c = chain("1>2 2>3");
    job(&mut c, "2").retry = 1;
    let watcher = Arc::new(Watcher::default());
    let end = run(
        c,
        Arc::new(FakeFactory(Arc::clone(&fakes))),
        recorder.clone(),
        Options {
            observer: Some(watcher.clone()),
            ..options()
        },
    )
    .unwrap()
    .wait()
    .await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(watcher.started.load(Ordering::SeqCst), 3);
    assert_eq!(watcher.ended.load(Ordering::SeqCst), 3);
    let tries = watcher.tries.lock().unwrap().clone();
    assert_eq!(
        tries,
        [
            ("j1".to_owned(), 1, State::Complete, false),
            ("j2".to_owned(), 1, State::Fail, false),
            ("j2".to_owned(), 2, State::Complete, true),
            ("j3".to_owned(), 1, State::Complete, false),
        ]
    );
    assert_eq!(
        *watcher.failures.lock().unwrap(),
        [crate::ReportErrorKind::Unavailable; 2],
        "the two failed job log deliveries"
    );
    let backlogs = watcher.backlogs.lock().unwrap().clone();
    assert!(backlogs.iter().any(|&n| n > 0), "{backlogs:?}");
    assert_eq!(backlogs.last(), Some(&0), "{backlogs:?}");
}

#[tokio::test(start_paused = true)]
async fn job_succeeds_on_its_fourth_try() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script(
        "j1",
        vec![Step::Fail, Step::Fail, Step::Unknown, Step::Complete],
    );
    let mut c = chain("1");
    job(&mut c, "1").retry = 4;
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(
        recorder.tries_of("j1"),
        [
            (1, State::Fail),
            (2, State::Fail),
            (3, State::Unknown),
            (4, State::Complete)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_panicking_job_is_a_failed_try() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j1", vec![Step::Panic]);
    let mut c = chain("1");
    job(&mut c, "1").retry = 1;
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    let logs = recorder.logs.lock().unwrap().clone();
    assert_eq!(logs.len(), 2);
    for (idx, log) in logs.iter().enumerate() {
        assert_eq!(log.r#try, idx as u32 + 1);
        assert_eq!((log.state, log.exit), (State::Fail, 1));
        assert_eq!(log.error, "panic from job.Run: forced job.Run panic");
        assert!(log.started_at > 0);
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_that_cannot_be_made_fails_with_a_log_entry() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.broken.lock().unwrap().push("j1".to_owned());
    let end = start(chain("1"), &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    let logs = recorder.logs.lock().unwrap().clone();
    assert_eq!(logs.len(), 1);
    assert_eq!((logs[0].r#try, logs[0].state), (1, State::Fail));
    assert!(
        logs[0]
            .error
            .starts_with("problem creating job runner: unknown job type `fake`"),
        "{}",
        logs[0].error
    );
}

#[tokio::test(start_paused = true)]
async fn unknown_is_handled_like_fail() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::Unknown, Step::Complete]);
    let mut c = chain("1>2 2>3");
    job(&mut c, "1").sequence_retry = 1;
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(
        end.state,
        State::Complete,
        "UNKNOWN triggered the sequence retry"
    );
    assert_eq!(
        recorder.tries_of("j2"),
        [(1, State::Unknown), (2, State::Complete)]
    );
    assert_eq!(
        recorder.tries_of("j1"),
        [(1, State::Complete), (2, State::Complete)]
    );
}

// ---- data ----

#[tokio::test(start_paused = true)]
async fn job_data_flows_from_parents_to_children() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j1", vec![Step::Data("k1", "v1", Box::new(Step::Complete))])
        .script("j2", vec![Step::Data("k2", "v2", Box::new(Step::Complete))])
        .script("j3", vec![Step::Data("k3", "v3", Box::new(Step::Fail))]);
    let end = start(chain("1>2,3 2>4 3>4 4>5"), &fakes, &recorder)
        .wait()
        .await;
    assert_eq!(end.state, State::Fail);
    let seen = fakes.seen_data.lock().unwrap();
    assert_eq!(
        seen["j2"],
        json!({"k1": "v1"}).as_object().unwrap().clone().into()
    );
    assert_eq!(
        seen["j3"],
        json!({"k1": "v1"}).as_object().unwrap().clone().into()
    );
    assert!(!seen.contains_key("j4"), "job4 waits on the failed job3");
}

// ---- §7 sequence retries ----

#[tokio::test(start_paused = true)]
async fn sequence_retry_counter_example_of_runner_md() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::Fail]);
    let mut c = chain("1>2 2>3");
    job(&mut c, "1").sequence_retry = 1;
    job(&mut c, "1").sequence_retry_wait = "2s".to_owned();
    job(&mut c, "2").retry = 2;
    let started = Instant::now();
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    assert_eq!(
        recorder.tries_of("j1"),
        [(1, State::Complete), (2, State::Complete)]
    );
    let b: Vec<u32> = recorder
        .tries_of("j2")
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        b,
        [1, 2, 3, 4, 5, 6],
        "try numbers continue across the sequence retry"
    );
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    assert_eq!(
        end.finished_jobs, 1,
        "job1 completed on the retry; job3 never ran"
    );
}

#[tokio::test(start_paused = true)]
async fn sequence_retry_without_wait_is_immediate_and_can_succeed() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::Fail, Step::Complete]);
    let mut c = chain("1>2 2>3");
    job(&mut c, "1").sequence_retry = 1;
    job(&mut c, "1").sequence_retry_wait = "0s".to_owned();
    let started = Instant::now();
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(end.finished_jobs, 3);
}

/// Spin Cycle reset a sibling that was still running; Spindle stops it first.
#[tokio::test(start_paused = true)]
async fn a_job_failing_while_a_sibling_in_its_sequence_runs() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j2", vec![sleep(100, Step::Fail), Step::Complete])
        .script(
            "j3",
            vec![sleep(60_000, Step::Complete), sleep(1_000, Step::Complete)],
        );
    let mut c = chain("1>2,3 2>4 3>4");
    job(&mut c, "1").sequence_retry = 1;
    job(&mut c, "1").sequence_retry_wait = "1s".to_owned();
    let started = Instant::now();
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(
        recorder.tries_of("j3"),
        [(1, State::Stopped), (2, State::Complete)]
    );
    assert_eq!(
        recorder.tries_of("j2"),
        [(1, State::Fail), (2, State::Complete)]
    );
    assert_eq!(recorder.tries_of("j4"), [(1, State::Complete)]);
    // 0.1s to the failure, 1s wait, 1s for job3's second run.
    assert_eq!(started.elapsed(), Duration::from_millis(2_100));
    assert_eq!(end.finished_jobs, 4);
}

/// Outer sequence j1 (retry 1) holds inner sequence j3 (retry 1, jobs j3 → j4 → j5) and
/// job j6 after it. The inner budget is spent once, then the outer sequence restarts
/// (j6 fails once) and the inner budget is whole again.
#[tokio::test(start_paused = true)]
async fn nested_sequence_budgets_reset_when_the_outer_sequence_restarts() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script(
            "j4",
            vec![Step::Fail, Step::Complete, Step::Fail, Step::Complete],
        )
        .script("j6", vec![Step::Fail, Step::Complete]);
    let mut c = chain("1>2 2>3 3>4 4>5 5>6 6>7");
    job(&mut c, "1").sequence_retry = 1;
    for id in ["3", "4", "5"] {
        job(&mut c, id).sequence_id = "j3".to_owned();
    }
    job(&mut c, "3").sequence_retry = 1;
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    let j4: Vec<(u32, State)> = recorder.tries_of("j4");
    assert_eq!(
        j4,
        [
            (1, State::Fail),
            (2, State::Complete),
            (3, State::Fail),
            (4, State::Complete)
        ]
    );
    assert_eq!(
        recorder.tries_of("j6"),
        [(1, State::Fail), (2, State::Complete)]
    );
}

// ---- parallel windows ----

#[tokio::test(start_paused = true)]
async fn parallel_is_a_sliding_window() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    // j1 → j2 (repeat begin, parallel 2) → pieces j3..j7 → j8 (repeat end) → j9
    let mut c = chain("1>2 2>3,4,5,6,7 3>8 4>8 5>8 6>8 7>8 8>9");
    job(&mut c, "2").parallel = 2;
    fakes.script("j3", vec![sleep(3_000, Step::Complete)]);
    for id in ["j4", "j5", "j6", "j7"] {
        fakes.script(id, vec![sleep(1_000, Step::Complete)]);
    }
    let started = Instant::now();
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(fakes.max_running(), 2);
    // Batches of 2 would take 3 + 1 + 1 = 5 s; a sliding window runs the four 1 s
    // pieces one after another beside the 3 s one.
    assert_eq!(started.elapsed(), Duration::from_secs(4));
}
