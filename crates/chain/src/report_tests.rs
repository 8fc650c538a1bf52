//! Reporting to the Request Manager: batches, failures that keep failing (issue #10),
//! panics, live output.

use super::*;

// ---- reporting ----

#[tokio::test(start_paused = true)]
async fn transient_report_failures_are_retried_without_loss_or_duplicates() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    recorder.fail_logs.store(3, Ordering::SeqCst);
    let end = start(chain("1>2,3 2>4 3>4"), &fakes, &recorder)
        .wait()
        .await;
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
    assert_eq!(recorder.finishes(), [State::Complete]);
}

#[tokio::test(start_paused = true)]
async fn a_slow_reporter_does_not_slow_the_chain() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    recorder.delay_ms.store(1_000, Ordering::SeqCst);
    for id in ["j1", "j2", "j3", "j4", "j5"] {
        fakes.script(id, vec![sleep(100, Step::Complete)]);
    }
    let handle = start(chain("1>2 2>3 3>4 4>5"), &fakes, &recorder);
    // The jobs take 0.5 s; the reporter takes 1 s a call, but batches what queued meanwhile.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        fakes.tries.lock().unwrap().len(),
        5,
        "every job ran while the reporter was busy"
    );
    assert_eq!(handle.wait().await.state, State::Complete);
    assert_eq!(recorder.tries().len(), 5);
}

/// The entries queued with the final state go with it, in one call: a short chain whose
/// jobs all end while its first entry is being delivered costs two calls, not four (two
/// of entries, progress, the final state).
#[tokio::test(start_paused = true)]
async fn the_last_entries_go_with_the_final_state() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    recorder.delay_ms.store(1_000, Ordering::SeqCst);
    for id in ["j1", "j2", "j3"] {
        fakes.script(id, vec![sleep(100, Step::Complete)]);
    }
    let handle = start(chain("1>2 2>3"), &fakes, &recorder);
    assert_eq!(handle.wait().await.state, State::Complete);
    let finishes = recorder.finishes.lock().unwrap().clone();
    assert_eq!(finishes.len(), 1);
    let with_it: Vec<&str> = finishes[0]
        .job_logs
        .iter()
        .map(|entry| entry.job_id.as_str())
        .collect();
    assert_eq!(with_it, ["j2", "j3"], "j1's entry was on its way alone");
    assert_eq!(recorder.tries().len(), 3);
    assert_eq!(
        *recorder.progress.lock().unwrap(),
        [1],
        "the count went with j1's entry; the final state carries the last"
    );
}

/// A fan-out of `n` jobs between a start job `j1` and an end job: `"1>2,..,n+1"` and
/// each of those `>n+2`.
fn fan_out(n: usize) -> JobChain {
    let middle: Vec<String> = (2..n + 2).map(|i| i.to_string()).collect();
    let mut edges = format!("1>{}", middle.join(","));
    for i in &middle {
        edges.push_str(&format!(" {i}>{}", n + 2));
    }
    chain(&edges)
}

/// Runnable jobs start in turns of `START_CHUNK`, so a fan-out larger than a turn still
/// runs every job at once.
#[tokio::test(start_paused = true)]
async fn a_fan_out_larger_than_a_turn_runs_every_job_at_once() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    let n = 3 * crate::traverser::START_CHUNK + 10;
    for i in 2..n + 2 {
        fakes.script(&format!("j{i}"), vec![sleep(100, Step::Complete)]);
    }
    let handle = start(fan_out(n), &fakes, &recorder);
    assert_eq!(handle.wait().await.state, State::Complete);
    assert_eq!(fakes.max_running(), n, "all of the fan-out ran together");
    assert_eq!(recorder.tries().len(), n + 2);
}

/// While the report queue is (nearly) full, no job starts: a runner whose entry cannot
/// be queued would wait holding its task, and a 100,000-job fan-out of short jobs would
/// hold 100,000 of them. The chain still runs every job once the reports get through.
#[tokio::test(start_paused = true)]
async fn a_reporter_that_cannot_keep_up_holds_back_new_jobs() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    recorder.delay_ms.store(10_000, Ordering::SeqCst);
    // The queue, the batch the delivery took from it, and what started as it filled.
    let bound = crate::traverser::REPORT_QUEUE
        + crate::reporter::MAX_BATCH
        + 2 * crate::traverser::START_CHUNK;
    let n = 2 * bound;
    let handle = start(fan_out(n), &fakes, &recorder);
    // The first call (j1's entry) takes 10 s; meanwhile the queue fills.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let ran = fakes.tries.lock().unwrap().len();
    assert!(
        ran > 1 && ran <= bound,
        "{ran} jobs ran while the reporter was stuck (at most {bound} expected)"
    );
    assert_eq!(handle.wait().await.state, State::Complete);
    assert_eq!(recorder.tries().len(), n + 2);
}

/// Entries wait a little (`LINGER`) for more before they are sent: the jobs of a short
/// chain that end within it report in one call, with the final state.
#[tokio::test(start_paused = true)]
async fn entries_that_end_close_together_go_in_one_call() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    for id in ["j1", "j2", "j3"] {
        fakes.script(id, vec![sleep(1, Step::Complete)]);
    }
    let handle = start(chain("1>2 2>3"), &fakes, &recorder);
    assert_eq!(handle.wait().await.state, State::Complete);
    assert_eq!(
        recorder.log_calls.load(Ordering::SeqCst),
        0,
        "no call of entries alone"
    );
    let finishes = recorder.finishes.lock().unwrap().clone();
    let with_it: Vec<&str> = finishes[0]
        .job_logs
        .iter()
        .map(|entry| entry.job_id.as_str())
        .collect();
    assert_eq!(with_it, ["j1", "j2", "j3"]);

    // Jobs further apart than that report as they end.
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    for id in ["j1", "j2", "j3"] {
        fakes.script(id, vec![sleep(50, Step::Complete)]);
    }
    let handle = start(chain("1>2 2>3"), &fakes, &recorder);
    tokio::time::sleep(Duration::from_millis(75)).await;
    assert_eq!(
        recorder.tries(),
        [t("1", 1, State::Complete)],
        "j1's entry went before j2 ended"
    );
    assert_eq!(handle.wait().await.state, State::Complete);
    assert_eq!(recorder.log_calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn progress_reports_completed_jobs() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    for id in ["j1", "j2", "j3"] {
        fakes.script(id, vec![sleep(50, Step::Complete)]);
    }
    start(chain("1>2 2>3"), &fakes, &recorder).wait().await;
    let progress = recorder.progress.lock().unwrap().clone();
    // Progress as jobs complete; the last count comes with the final state (progress
    // queued together with it is not sent).
    assert!(progress.last().is_some_and(|n| *n >= 2), "{progress:?}");
    assert!(progress.windows(2).all(|w| w[0] <= w[1]), "{progress:?}");
    assert_eq!(recorder.finishes.lock().unwrap()[0].finished_jobs, 3);
}

#[test]
fn report_errors_say_whether_to_retry() {
    assert!(ReportError::unavailable("x").is_transient());
    assert!(!ReportError::failed("x").is_transient());
    assert!(!ReportError::rejected("x").is_transient());
    let _: Value = json!(null);
}

/// Every running chain holds a block of 32 reports in its queue from its start (tokio's
/// channels allocate their first block at once): a report carries its big payloads
/// boxed, so that the block stays about a kilobyte (208-byte reports made it 6.8 KiB, a
/// quarter of a running chain's memory; issue #51).
#[test]
fn a_report_is_a_few_words() {
    assert!(
        std::mem::size_of::<crate::reporter::Report>() <= 32,
        "a report is {} bytes",
        std::mem::size_of::<crate::reporter::Report>()
    );
}

/// test-cases.md 89: a job that returns STOPPED on its own (no stop asked) blocks its
/// descendants, and the chain ends FAIL once nothing else can run.
#[tokio::test(start_paused = true)]
async fn a_job_stopping_by_itself_ends_the_chain_as_failed() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j2", vec![sleep(1_000, Step::Complete)])
        .script("j3", vec![Step::Stopped]);
    let end = start(chain("1>2,3 2>4 3>4"), &fakes, &recorder)
        .wait()
        .await;
    assert_eq!(end.state, State::Fail);
    assert_eq!(recorder.tries_of("j3"), [(1, State::Stopped)]);
    assert_eq!(
        recorder.tries_of("j2"),
        [(1, State::Complete)],
        "the other branch finished"
    );
    assert!(recorder.tries_of("j4").is_empty());
    assert_eq!(recorder.finishes(), [State::Fail]);
}

/// test-cases.md 115: a sequence retry puts every job of the sequence back, including a
/// completed job in another branch, and restarts from the sequence's first job.
#[tokio::test(start_paused = true)]
async fn a_sequence_retry_resets_completed_jobs_of_every_branch() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![sleep(1_000, Step::Fail), Step::Complete]);
    let mut c = chain("1>2,4 2>3 4>3");
    job(&mut c, "1").sequence_retry = 1;
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(
        recorder.tries_of("j4"),
        [(1, State::Complete), (2, State::Complete)],
        "job4 ran again"
    );
    assert_eq!(
        recorder.tries_of("j1"),
        [(1, State::Complete), (2, State::Complete)]
    );
    assert_eq!(end.finished_jobs, 4);
}

// ---- issue #10: panics, huge retries, bad durations, reports that keep failing ----

/// Issue #10: a factory or a `deserialize` that panics is a failed try with a log entry,
/// not a chain that stays RUNNING.
#[tokio::test(start_paused = true)]
async fn a_panicking_factory_or_deserialize_is_a_failed_try() {
    for (which, message) in [
        ("make", "forced factory panic"),
        ("deserialize", "forced deserialize panic"),
    ] {
        let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
        let list = match which {
            "make" => &fakes.panic_make,
            _ => &fakes.panic_deserialize,
        };
        list.lock().unwrap().push("j2".to_owned());
        let handle = start(chain("1>2 2>3"), &fakes, &recorder);
        let end = tokio::time::timeout(Duration::from_secs(60), handle.wait())
            .await
            .unwrap_or_else(|_| panic!("a panicking {which} hung the chain"));
        assert_eq!(end.state, State::Fail, "{which}");
        let logs = recorder.logs.lock().unwrap().clone();
        let j2: Vec<&JobLog> = logs.iter().filter(|l| l.job_id == "j2").collect();
        assert_eq!(j2.len(), 1, "{which}: {logs:?}");
        assert_eq!((j2[0].r#try, j2[0].state), (1, State::Fail));
        assert!(j2[0].error.contains(message), "{which}: {}", j2[0].error);
        assert_eq!(recorder.finishes(), [State::Fail]);
    }
}

/// Issue #10: a runner task that panics outside the job's calls (here: dropping the job)
/// is seen by the traverser: the try fails and the chain ends.
#[tokio::test(start_paused = true)]
async fn a_runner_task_that_panics_is_a_failed_try_not_a_hang() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.panic_drop.lock().unwrap().push("j2".to_owned());
    let handle = start(chain("1>2 2>3"), &fakes, &recorder);
    let end = tokio::time::timeout(Duration::from_secs(60), handle.wait())
        .await
        .expect("the chain ends");
    assert_eq!(end.state, State::Fail);
    assert_eq!(recorder.finishes(), [State::Fail]);
    // j2's try ran and was logged; the panic after it is logged as the next try.
    assert_eq!(
        recorder.tries_of("j2"),
        [(1, State::Complete), (2, State::Fail)]
    );
    let logs = recorder.logs.lock().unwrap().clone();
    assert_eq!(
        logs.last().unwrap().error,
        "the job's runner panicked: forced drop panic"
    );
    assert!(recorder.tries_of("j3").is_empty());
}

/// Issue #10: `retry = u32::MAX` (as posted to the JR API) no longer overflows.
#[tokio::test(start_paused = true)]
async fn the_largest_retry_count_does_not_overflow() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j1", vec![Step::Fail, Step::Fail, Step::Complete]);
    let mut c = chain("1");
    job(&mut c, "1").retry = u32::MAX;
    let end = tokio::time::timeout(Duration::from_secs(60), start(c, &fakes, &recorder).wait())
        .await
        .expect("the chain ends");
    assert_eq!(end.state, State::Complete);
    assert_eq!(
        recorder.tries_of("j1"),
        [(1, State::Fail), (2, State::Fail), (3, State::Complete)]
    );
}

/// Issue #10: wait durations are checked when a chain is accepted, and a bad one is
/// refused with a message that names the job and the field.
#[tokio::test(start_paused = true)]
async fn bad_wait_durations_are_refused_when_the_chain_is_accepted() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    let factory = || -> Arc<dyn Factory> { Arc::new(FakeFactory(Arc::clone(&fakes))) };
    let mut c = chain("1>2");
    job(&mut c, "2").retry_wait = "soon".to_owned();
    let err = run(c, factory(), recorder.clone(), options()).unwrap_err();
    assert!(err.is_invalid_chain());
    assert!(
        err.message
            .starts_with("job job2 (ID j2): retryWait \"soon\" is not a duration"),
        "{err}"
    );
    let mut c = chain("1>2");
    job(&mut c, "1").sequence_retry_wait = "-1s".to_owned();
    let err = run(c, factory(), recorder.clone(), options()).unwrap_err();
    assert!(err.message.contains("sequenceRetryWait \"-1s\""), "{err}");
    let mut c = chain("1>2");
    job(&mut c, "2").retry_wait = "1x".to_owned();
    let err = resume(
        SuspendedJobChain {
            request_id: "req".to_owned(),
            job_chain: c,
            total_job_tries: BTreeMap::new(),
            latest_run_job_tries: BTreeMap::new(),
            sequence_tries: BTreeMap::new(),
        },
        factory(),
        recorder.clone(),
        options(),
    )
    .unwrap_err();
    assert!(err.message.contains("retryWait \"1x\""), "{err}");
    // Empty means none, as Spin Cycle's zero value.
    let mut c = chain("1");
    job(&mut c, "1").retry_wait = String::new();
    assert!(run(c, factory(), recorder.clone(), options()).is_ok());
}

/// Issue #10: a Request Manager that answers 500 every time does not hold the chain's end
/// forever; a refused report is sent once.
#[tokio::test(start_paused = true)]
async fn a_report_that_keeps_failing_is_given_up_and_the_chain_ends() {
    for (err, calls) in [
        (ReportError::failed("HTTP 500: boom"), 5),
        (ReportError::rejected("HTTP 409: not yours"), 1),
    ] {
        let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
        *recorder.finish_error.lock().unwrap() = Some(err.clone());
        let handle = start(chain("1>2"), &fakes, &recorder);
        let end = tokio::time::timeout(Duration::from_secs(3600), handle.wait())
            .await
            .unwrap_or_else(|_| panic!("{err}: the chain never ended"));
        assert_eq!(end.state, State::Complete);
        assert_eq!(recorder.finish_calls.load(Ordering::SeqCst), calls, "{err}");
    }
}

/// Issue #10: the report queue is bounded; a reporter far slower than the jobs makes the
/// jobs wait instead of piling up reports, and nothing is lost.
#[tokio::test(start_paused = true)]
async fn a_slow_reporter_holds_back_a_flood_of_tries_without_losing_any() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    recorder.delay_ms.store(10, Ordering::SeqCst);
    fakes.script("j1", vec![Step::Fail]);
    let mut c = chain("1");
    let tries = 3 * crate::traverser::REPORT_QUEUE as u32;
    job(&mut c, "1").retry = tries - 1;
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    let logged = recorder.tries_of("j1");
    assert_eq!(logged.len(), tries as usize);
    assert!(
        logged
            .iter()
            .enumerate()
            .all(|(i, (t, _))| *t == i as u32 + 1)
    );
}

// ---- live output ----

fn print(stream: proto::Stream, text: &'static str, then: Step) -> Step {
    Step::Print(stream, text, Box::new(then))
}

#[tokio::test(start_paused = true)]
async fn live_output_is_sent_while_a_job_runs_and_all_of_it_before_the_final_state() {
    use proto::Stream::{Stderr, Stdout};
    let fakes = Arc::new(Fakes::default());
    fakes.script(
        "j2",
        vec![
            print(
                Stdout,
                "one\n",
                print(Stderr, "warn\n", sleep(5_000, Step::Fail)),
            ),
            print(Stdout, "again\n", Step::Complete),
        ],
    );
    let mut c = chain("1>2 2>3");
    job(&mut c, "2").retry = 1;
    let recorder = Arc::new(Recorder::default());
    recorder.fail_output.store(2, Ordering::SeqCst);
    let handle = start(c, &fakes, &recorder);
    // The first try is still sleeping: its output has arrived all the same (after two
    // failed deliveries).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen: Vec<(String, u32, proto::Stream, u64, String)> = recorder
        .output
        .lock()
        .unwrap()
        .iter()
        .map(|(c, _)| {
            (
                c.job_id.clone(),
                c.r#try,
                c.stream,
                c.offset,
                c.data.clone(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("j2".to_owned(), 1, Stdout, 0, "one\n".to_owned()),
            ("j2".to_owned(), 1, Stderr, 0, "warn\n".to_owned()),
        ]
    );
    assert_eq!(handle.wait().await.state, State::Complete);
    let output = recorder.output.lock().unwrap().clone();
    assert_eq!(output.len(), 3, "{output:?}");
    let last = &output[2].0;
    assert_eq!(
        (last.r#try, last.offset, last.data.as_str()),
        (2, 0, "again\n")
    );
    // None arrived after the final state.
    assert!(
        output
            .iter()
            .all(|(chunk, after)| !after && chunk.request_id == "req")
    );
}
