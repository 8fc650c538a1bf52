//! Timeouts of jobs and sequences (issue 11).

use super::*;

// ---- timeouts ----

#[tokio::test(start_paused = true)]
async fn a_try_past_its_timeout_is_stopped_and_fails_and_retries_apply() {
    let fakes = Arc::new(Fakes::default());
    // Try 1 hangs until stopped; try 2 finishes in time.
    fakes.script(
        "j2",
        vec![sleep(60_000, Step::Complete), sleep(100, Step::Complete)],
    );
    let mut c = chain("1>2 2>3");
    job(&mut c, "2").retry = 1;
    job(&mut c, "2").timeout = "1s".to_owned();
    let recorder = Arc::new(Recorder::default());
    let started = Instant::now();
    let handle = start(c, &fakes, &recorder);
    assert_eq!(handle.wait().await.state, State::Complete);
    assert_eq!(
        recorder.tries_of("j2"),
        [(1, State::Fail), (2, State::Complete)]
    );
    let logs = recorder.logs.lock().unwrap().clone();
    let first = logs
        .iter()
        .find(|l| l.job_id == "j2" && l.r#try == 1)
        .unwrap();
    assert_eq!(first.error, "timed out after 1s and was stopped");
    assert_ne!(first.exit, 0);
    // Stopped at the timeout, not after the job's own minute.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_stop_during_a_timed_try_is_a_stop_not_a_timeout() {
    let fakes = Arc::new(Fakes::default());
    fakes.script("j2", vec![sleep(60_000, Step::Complete)]);
    let mut c = chain("1>2");
    job(&mut c, "2").timeout = "1m".to_owned();
    let recorder = Arc::new(Recorder::default());
    let handle = start(c, &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(handle.stop().await.unwrap().state, State::Stopped);
    assert_eq!(recorder.tries_of("j2"), [(1, State::Stopped)]);
}

#[test]
fn a_timeout_that_is_not_a_duration_refuses_the_chain() {
    let mut c = chain("1>2");
    job(&mut c, "2").timeout = "soon".to_owned();
    let c = crate::Incoming::from(c);
    let err = crate::validate::new_chain(&c)
        .and_then(|edges| {
            crate::state::Chain::new(
                c,
                edges,
                Default::default(),
                Default::default(),
                Default::default(),
            )
            .map(|_| ())
        })
        .unwrap_err();
    assert!(
        err.message.contains("timeout \"soon\" is not a duration"),
        "{err}"
    );
}

// ---- sequence timeouts (issue 11) ----

/// `"1>2 2>3 3>4"` with jobs 2 and 3 in their own sequence started by 2.
fn chain_with_inner_sequence() -> JobChain {
    let mut c = chain("1>2 2>3 3>4");
    job(&mut c, "2").sequence_id = "j2".to_owned();
    job(&mut c, "3").sequence_id = "j2".to_owned();
    c
}

#[tokio::test(start_paused = true)]
async fn a_sequence_past_its_timeout_stops_its_jobs_and_fails() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j3", vec![sleep(60_000, Step::Complete)]);
    let mut c = chain_with_inner_sequence();
    job(&mut c, "2").sequence_timeout = "5s".to_owned();
    job(&mut c, "3").retry = 3;
    let started = Instant::now();
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    // Stopped, failed with the reason, and not tried again for all its retries.
    let logs = recorder.logs.lock().unwrap().clone();
    let j3: Vec<&JobLog> = logs.iter().filter(|l| l.job_id == "j3").collect();
    assert_eq!(j3.len(), 1, "{j3:?}");
    assert_eq!(j3[0].state, State::Fail);
    assert_eq!(
        j3[0].error,
        "sequence job2 timed out after 5s; the job was stopped"
    );
    assert!(recorder.tries_of("j4").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_sequence_is_retried_and_its_timer_starts_again() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    // Too slow the first time, quick the second.
    fakes.script(
        "j3",
        vec![sleep(60_000, Step::Complete), sleep(3_000, Step::Complete)],
    );
    let mut c = chain_with_inner_sequence();
    job(&mut c, "2").sequence_timeout = "5s".to_owned();
    job(&mut c, "2").sequence_retry = 1;
    job(&mut c, "2").sequence_retry_wait = "1s".to_owned();
    let started = Instant::now();
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    // 5 s to the timeout, 1 s of retry wait, 3 s of the second run.
    assert_eq!(started.elapsed(), Duration::from_secs(9));
    assert_eq!(
        recorder.tries_of("j3"),
        [(1, State::Fail), (2, State::Complete)]
    );
    assert_eq!(
        recorder.tries_of("j2"),
        [(1, State::Complete), (2, State::Complete)]
    );
}

#[tokio::test(start_paused = true)]
async fn a_request_past_its_deadline_ends_fail_with_the_reason() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j2", vec![sleep(2_000, Step::Complete)])
        .script("j3", vec![sleep(60_000, Step::Complete)]);
    // j1 starts the request's own sequence (every job's sequenceId is j1).
    let mut c = chain("1>2 2>3 3>4");
    job(&mut c, "1").sequence_timeout = "10s".to_owned();
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    let logs = recorder.logs.lock().unwrap().clone();
    let j3 = logs.iter().find(|l| l.job_id == "j3").unwrap();
    assert_eq!(j3.state, State::Fail);
    assert_eq!(
        j3.error,
        "the request's deadline passed: it did not finish within 10s; the job was stopped"
    );
    assert_eq!(recorder.finishes(), [State::Fail]);
    assert_eq!(
        recorder.finishes.lock().unwrap()[0].error,
        "the request's deadline passed: it did not finish within 10s",
        "the reason is in the request's record"
    );
}

#[tokio::test(start_paused = true)]
async fn a_sequence_that_finishes_in_time_is_not_touched_by_its_timer() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j4", vec![sleep(30_000, Step::Complete)]);
    let mut c = chain_with_inner_sequence();
    job(&mut c, "2").sequence_timeout = "5s".to_owned();
    let started = Instant::now();
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(started.elapsed(), Duration::from_secs(30));
}

#[test]
fn a_sequence_timeout_that_is_not_a_duration_refuses_the_chain() {
    let mut c = chain_with_inner_sequence();
    job(&mut c, "2").sequence_timeout = "soon".to_owned();
    let err = run(
        c,
        Arc::new(FakeFactory(Arc::new(Fakes::default()))),
        Arc::new(Recorder::default()),
        options(),
    )
    .map(drop)
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("sequenceTimeout \"soon\" is not a duration"),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_sequence_run_after_the_first_reports_its_starts_with_its_try_count() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::Fail, Step::Complete]);
    let mut c = chain("1>2");
    job(&mut c, "1").sequence_retry = 1;
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    // No job is durable: only the second run's starts are reported, with its count.
    let starts: Vec<(String, u32, u32)> = recorder
        .starts
        .lock()
        .unwrap()
        .iter()
        .map(|s| (s.job_id.clone(), s.r#try, s.sequence_try))
        .collect();
    assert_eq!(starts, [("j1".to_owned(), 2, 2), ("j2".to_owned(), 2, 2)]);
}

/// Issue #17: a call carries at most `MAX_BATCH` entries and, whatever their number, about
/// `MAX_BATCH_TEXT` of output (so that it stays within a Request Manager's body limit);
/// every entry arrives, and the final state carries the last ones.
#[tokio::test(start_paused = true)]
async fn a_call_carries_at_most_a_batch_of_entries_and_of_output() {
    use crate::reporter::{MAX_BATCH, MAX_BATCH_TEXT, Report};
    let recorder = Arc::new(Recorder::default());
    let (reports, queue) = tokio::sync::mpsc::channel(crate::traverser::REPORT_QUEUE);
    let entry = |i: usize, stdout: String| JobLog {
        request_id: "r".to_owned(),
        job_id: format!("j{i}"),
        r#try: 1,
        state: State::Complete,
        stdout,
        ..JobLog::default()
    };
    let delivery = tokio::spawn(crate::reporter::deliver(
        recorder.clone(),
        crate::RetryPolicy::default(),
        None,
        "r".to_owned(),
        Arc::new(crate::output::Hub::default()),
        queue,
        tokio_util::sync::CancellationToken::new(),
    ));
    // Small entries past one batch, then ten with 3 MiB of output each.
    let small = MAX_BATCH + 10;
    let big = 10;
    for i in 0..small {
        reports
            .send(Report::Log(Box::new(entry(i, String::new())), false))
            .await
            .unwrap();
    }
    for i in small..small + big {
        reports
            .send(Report::Log(Box::new(entry(i, "x".repeat(3 << 20))), false))
            .await
            .unwrap();
    }
    reports
        .send(Report::Finish(Box::new(FinishRequest {
            request_id: "r".to_owned(),
            state: State::Complete,
            finished_at: chrono::Utc::now(),
            finished_jobs: (small + big) as u64,
            error: String::new(),
            job_logs: Vec::new(),
        })))
        .await
        .unwrap();
    drop(reports);
    delivery.await.unwrap();
    let sizes = recorder.log_call_sizes.lock().unwrap().clone();
    for &(entries, text) in &sizes {
        assert!(
            entries <= MAX_BATCH,
            "a call of {entries} entries: {sizes:?}"
        );
        // The entry that reached the limit is the last one taken.
        assert!(
            text < MAX_BATCH_TEXT + (3 << 20),
            "a call of {text} bytes: {sizes:?}"
        );
    }
    assert_eq!(
        sizes[0].0, MAX_BATCH,
        "a full batch goes at once: {sizes:?}"
    );
    let finishes = recorder.finishes.lock().unwrap().clone();
    let carried: usize = finishes.iter().map(|f| f.job_logs.len()).sum();
    let sent: usize = sizes.iter().map(|(n, _)| n).sum();
    assert_eq!(sent + carried, small + big, "every entry is delivered once");
    assert!(
        sizes.len() >= 2 && carried > 0,
        "{sizes:?}, {carried} with the end"
    );
}
