//! Failure budgets of `each:` nodes (issue #50): elements failing within a budget, the
//! first failure past it, `on_budget_exceeded: stop`, waves sharing one budget, elements
//! that are sequences, and budgets across a suspend and resume.

use super::*;

/// j1 → j2 (fan-out) → elements j3..j7 → j8 (where they meet) → j9, each element named
/// `web-<n>`, with a budget of `max_failures` kept on j2.
fn fleet(max_failures: Option<u32>, stop: bool) -> JobChain {
    let mut c = chain("1>2 2>3,4,5,6,7 3>8 4>8 5>8 6>8 7>8 8>9");
    for n in 3..=7 {
        job(&mut c, &n.to_string())
            .each
            .insert("host".to_owned(), json!(format!("web-{n}")));
    }
    job(&mut c, "2").elements = Some(Box::new(proto::Elements {
        node: "hosts".to_owned(),
        end: "j8".to_owned(),
        budget: "j2".to_owned(),
        max_failures,
        count: 5,
        stop,
        wave: 0,
        waves: 0,
    }));
    c
}

fn error_of(recorder: &Recorder) -> String {
    recorder.finishes.lock().unwrap()[0].error.clone()
}

#[tokio::test(start_paused = true)]
async fn failures_within_the_budget_let_the_node_complete() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j3", vec![Step::Fail])
        .script("j5", vec![sleep(2_000, Step::Fail)])
        .script("j6", vec![sleep(5_000, Step::Complete)]);
    let end = start(fleet(Some(2), false), &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(recorder.finishes(), [State::Complete]);
    assert_eq!(error_of(&recorder), "");
    // What follows the node ran once every element had ended.
    assert_eq!(recorder.tries_of("j8"), [(1, State::Complete)]);
    assert_eq!(recorder.tries_of("j9"), [(1, State::Complete)]);
    assert_eq!(recorder.tries_of("j3"), [(1, State::Fail)]);
    assert_eq!(recorder.tries_of("j5"), [(1, State::Fail)]);
}

#[tokio::test(start_paused = true)]
async fn without_a_budget_a_failed_element_fails_the_node_as_spin_cycle_does() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j3", vec![Step::Fail]);
    let end = start(fleet(None, false), &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    // The other elements ran to their ends; nothing after the node did.
    for id in ["j4", "j5", "j6", "j7"] {
        assert_eq!(recorder.tries_of(id), [(1, State::Complete)], "{id}");
    }
    assert!(recorder.tries_of("j8").is_empty());
    assert_eq!(error_of(&recorder), "");
}

#[tokio::test(start_paused = true)]
async fn the_first_failure_past_the_budget_starts_no_more_elements() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    // Two at a time: web-3 fails at once, web-4 after 1 s (past a budget of 1) while
    // web-5 runs; web-6 and web-7 never start, web-5 finishes.
    let mut c = fleet(Some(1), false);
    job(&mut c, "2").parallel = 2;
    fakes
        .script("j3", vec![Step::Fail])
        .script("j4", vec![sleep(1_000, Step::Fail)])
        .script("j5", vec![sleep(3_000, Step::Complete)]);
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    assert_eq!(recorder.tries_of("j5"), [(1, State::Complete)]);
    assert!(
        recorder.tries_of("j6").is_empty(),
        "no new element past the budget"
    );
    assert!(recorder.tries_of("j7").is_empty());
    assert!(
        recorder.tries_of("j8").is_empty(),
        "the node did not complete"
    );
    assert_eq!(
        error_of(&recorder),
        "node hosts: 2 of 5 elements failed, past its budget of 1: web-3, web-4"
    );
}

#[tokio::test(start_paused = true)]
async fn past_the_budget_with_stop_the_running_elements_are_stopped() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j3", vec![Step::Fail])
        .script("j4", vec![sleep(60_000, Step::Complete)])
        .script("j5", vec![sleep(60_000, Step::Complete)])
        .script("j6", vec![sleep(60_000, Step::Complete)])
        .script("j7", vec![sleep(60_000, Step::Complete)]);
    let started = Instant::now();
    let end = start(fleet(Some(0), true), &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "stopped, not waited for"
    );
    for id in ["j4", "j5", "j6", "j7"] {
        assert_eq!(recorder.tries_of(id), [(1, State::Stopped)], "{id}");
    }
    assert_eq!(
        error_of(&recorder),
        "node hosts: 1 of 5 elements failed, past its budget of 0: web-3"
    );
}

#[tokio::test(start_paused = true)]
async fn an_element_that_is_a_sequence_fails_once_its_sequence_has_no_retry_left() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    // j1 → j2 → two elements, each a sequence: j3 → j4 → j5 and j6 → j7 → j8; they meet
    // at j9. j4 fails twice: its sequence's retry runs it again, then the element fails.
    let mut c = chain("1>2 2>3,6 3>4 4>5 6>7 7>8 5>9 8>9 9>10");
    for (ids, start) in [(["3", "4", "5"], "j3"), (["6", "7", "8"], "j6")] {
        for id in ids {
            job(&mut c, id).sequence_id = start.to_owned();
        }
    }
    job(&mut c, "3").sequence_retry = 1;
    job(&mut c, "3")
        .each
        .insert("host".to_owned(), json!("db-1"));
    job(&mut c, "2").elements = Some(Box::new(proto::Elements {
        node: "hosts".to_owned(),
        end: "j9".to_owned(),
        budget: "j2".to_owned(),
        max_failures: Some(1),
        count: 2,
        ..proto::Elements::default()
    }));
    fakes.script("j4", vec![Step::Fail]);
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(
        recorder.tries_of("j4"),
        [(1, State::Fail), (2, State::Fail)]
    );
    assert!(recorder.tries_of("j5").is_empty());
    assert_eq!(recorder.tries_of("j10"), [(1, State::Complete)]);
}

/// j1 → j2 (wave 1 begin) → j3 → j4 (wave 1 end) → j5 (wave 2 begin) → j6, j7 → j8 (wave
/// 2 end) → j9; one budget, kept on j2, for both waves.
fn two_waves(max_failures: u32) -> JobChain {
    let mut c = chain("1>2 2>3 3>4 4>5 5>6,7 6>8 7>8 8>9");
    for (fan_out, end, wave) in [("2", "j4", 1), ("5", "j8", 2)] {
        job(&mut c, fan_out).elements = Some(Box::new(proto::Elements {
            node: "hosts".to_owned(),
            end: end.to_owned(),
            budget: "j2".to_owned(),
            max_failures: Some(max_failures),
            count: 3,
            stop: false,
            wave,
            waves: 2,
        }));
    }
    for n in [3, 6, 7] {
        job(&mut c, &n.to_string())
            .each
            .insert("host".to_owned(), json!(format!("web-{n}")));
    }
    c
}

#[tokio::test(start_paused = true)]
async fn waves_share_one_budget() {
    // Within it: the canary fails, the next wave runs, and one failure more is past it.
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j3", vec![Step::Fail])
        .script("j6", vec![Step::Fail]);
    let end = start(two_waves(1), &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    assert_eq!(
        recorder.tries_of("j4"),
        [(1, State::Complete)],
        "wave 1 ended"
    );
    assert_eq!(
        recorder.tries_of("j7"),
        [(1, State::Complete)],
        "wave 2 ran"
    );
    assert!(recorder.tries_of("j8").is_empty());
    assert_eq!(
        error_of(&recorder),
        "node hosts: 2 of 3 elements failed, past its budget of 1: web-3, web-6"
    );

    // Past it in the first wave: no later wave starts.
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j3", vec![Step::Fail]);
    let end = start(two_waves(0), &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    assert!(recorder.tries_of("j4").is_empty());
    assert!(recorder.tries_of("j6").is_empty() && recorder.tries_of("j7").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_resumed_chain_keeps_its_failed_elements_and_starts_none_twice() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    let mut c = fleet(Some(1), false);
    job(&mut c, "2").parallel = 2;
    fakes
        .script("j3", vec![Step::Fail])
        .script("j4", vec![sleep(60_000, Step::Complete)])
        .script("j5", vec![sleep(60_000, Step::Complete)]);
    let handle = start(c, &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(1)).await;
    handle.suspend();
    let end = handle.wait().await;
    // A failure within the budget does not fail a suspend.
    assert_eq!(end.state, State::Suspended);
    let suspended = recorder.suspended.lock().unwrap()[0].clone();
    assert_eq!(suspended.job_chain.jobs["j3"].state, State::Fail);
    assert_eq!(suspended.job_chain.jobs["j4"].state, State::Stopped);
    assert_eq!(suspended.job_chain.jobs["j5"].state, State::Stopped);
    assert_eq!(suspended.job_chain.jobs["j6"].state, State::Pending);

    // Resumed: web-3 stays failed (and counted: one more failure is past the budget),
    // web-4 runs again, and web-5, run again, fails.
    fakes
        .script("j4", vec![Step::Complete])
        .script("j5", vec![Step::Fail]);
    let recorder2 = Arc::new(Recorder::default());
    let handle = resume(
        suspended,
        Arc::new(FakeFactory(Arc::clone(&fakes))),
        recorder2.clone(),
        options(),
    )
    .unwrap();
    let end = handle.wait().await;
    assert_eq!(end.state, State::Fail);
    assert!(
        recorder2.tries_of("j3").is_empty(),
        "a failed element is not run again"
    );
    assert_eq!(recorder2.tries_of("j4"), [(2, State::Complete)]);
    assert_eq!(recorder2.tries_of("j5"), [(2, State::Fail)]);
    assert_eq!(
        error_of(&recorder2),
        "node hosts: 2 of 5 elements failed, past its budget of 1: web-3, web-5"
    );
    assert!(recorder2.tries_of("j8").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_resumed_chain_within_its_budget_completes() {
    let mut c = fleet(Some(1), false);
    for (id, state) in [
        ("1", State::Complete),
        ("2", State::Complete),
        ("3", State::Fail),
        ("4", State::Complete),
    ] {
        job(&mut c, id).state = state;
    }
    c.finished_jobs = 3;
    let sjc = SuspendedJobChain {
        request_id: "req".to_owned(),
        job_chain: c,
        total_job_tries: BTreeMap::from([("j3".to_owned(), 1), ("j4".to_owned(), 1)]),
        latest_run_job_tries: BTreeMap::new(),
        sequence_tries: BTreeMap::from([("j1".to_owned(), 1)]),
    };
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    let handle = resume(
        sjc,
        Arc::new(FakeFactory(Arc::clone(&fakes))),
        recorder.clone(),
        options(),
    )
    .unwrap();
    let end = handle.wait().await;
    assert_eq!(end.state, State::Complete);
    assert!(recorder.tries_of("j3").is_empty() && recorder.tries_of("j4").is_empty());
    assert_eq!(recorder.tries_of("j8"), [(1, State::Complete)]);
}

#[tokio::test(start_paused = true)]
async fn elements_naming_a_job_the_chain_lacks_are_refused() {
    let mut c = fleet(Some(1), false);
    job(&mut c, "2").elements.as_mut().unwrap().end = "zzzz".to_owned();
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    let refused = run(
        c,
        Arc::new(FakeFactory(Arc::clone(&fakes))),
        recorder.clone(),
        options(),
    );
    let Err(err) = refused else {
        panic!("a chain naming a job it lacks was accepted");
    };
    assert!(err.is_invalid_chain(), "{err}");
    assert!(err.message.contains("end job zzzz"), "{err}");
}

/// A node with a budget inside each element of another: a failure past the inner budget
/// fails the inner node, which fails the outer element, which the outer budget forgives.
#[tokio::test(start_paused = true)]
async fn a_node_past_its_budget_fails_the_element_around_it() {
    // j1 → j2 (outer fan-out) → A: j3 (inner fan-out) → j4, j5 → j6 → j7
    //                         → B: j8 (inner fan-out) → j9, j10 → j11 → j12
    // A and B meet at j13 → j14.
    let mut c = chain("1>2 2>3,8 3>4,5 4>6 5>6 6>7 7>13 8>9,10 9>11 10>11 11>12 12>13 13>14");
    let elements = |node: &str, end: &str, budget: &str, max: u32, count: u32| {
        Some(Box::new(proto::Elements {
            node: node.to_owned(),
            end: end.to_owned(),
            budget: budget.to_owned(),
            max_failures: Some(max),
            count,
            ..proto::Elements::default()
        }))
    };
    job(&mut c, "2").elements = elements("datacenters", "j13", "j2", 1, 2);
    job(&mut c, "3").elements = elements("hosts", "j6", "j3", 0, 2);
    job(&mut c, "8").elements = elements("hosts", "j11", "j8", 0, 2);
    for (id, dc) in [("3", "dc-a"), ("8", "dc-b")] {
        job(&mut c, id).each.insert("dc".to_owned(), json!(dc));
    }
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j4", vec![Step::Fail])
        .script("j5", vec![sleep(1_000, Step::Complete)]);
    let end = start(c.clone(), &fakes, &recorder).wait().await;
    assert_eq!(
        end.state,
        State::Complete,
        "{:?}",
        recorder.finishes.lock().unwrap()
    );
    assert!(recorder.tries_of("j6").is_empty(), "the inner node failed");
    assert_eq!(recorder.tries_of("j12"), [(1, State::Complete)]);
    assert_eq!(recorder.tries_of("j14"), [(1, State::Complete)]);

    // Both inner nodes past their budgets: past the outer budget too.
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j4", vec![Step::Fail])
        .script("j9", vec![Step::Fail]);
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    assert!(recorder.tries_of("j13").is_empty());
    let error = error_of(&recorder);
    assert!(
        error
            .contains("node datacenters: 2 of 2 elements failed, past its budget of 1: dc-a, dc-b"),
        "{error}"
    );
}
