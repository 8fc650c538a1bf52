//! The store suite, on every backend: requests — create, read, state changes, args,
//! spec versions, approvals, schedules, imports (finding and counting: search_tests.rs).

use super::*;

pub(super) async fn create_and_read(store: Arc<dyn Store>, _raw: Raw) {
    let made = create(&*store, "r1").await;
    let read = store.get_request("r1", false).await.unwrap();
    assert_eq!(
        read,
        Request {
            job_chain: None,
            ..made.clone()
        }
    );
    let with_chain = store.get_request("r1", true).await.unwrap();
    assert_eq!(with_chain.job_chain, made.job_chain);
    let chain = made.job_chain.clone().unwrap();
    assert_eq!(store.job_chain("r1").await.unwrap(), chain);
    // The stored JSON reads back as the same chain.
    let json = store.job_chain_json("r1").await.unwrap();
    assert_eq!(
        serde_json::from_str::<proto::JobChain>(&json).unwrap(),
        chain
    );
    assert!(matches!(
        store.job_chain_json("nope").await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.get_request("nope", false).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.job_chain("nope").await,
        Err(Error::NotFound { .. })
    ));
    // A request id is stored once.
    let (again, create_request) = request("r1", "deploy", "ann", at(2, 0), "db2");
    assert!(
        store
            .create_request(&again, &create_request, None)
            .await
            .is_err()
    );
    assert_eq!(
        store.get_request("r1", false).await.unwrap().args[0].value,
        json!("db1")
    );
}

pub(super) async fn state_changes_are_conditional(store: Arc<dyn Store>, _raw: Raw) {
    create(&*store, "r1").await;
    store
        .start_request(&"r1".into(), "http://jr1:32307", None, at(1, 1))
        .await
        .unwrap();
    let started = store.get_request("r1", false).await.unwrap();
    assert_eq!(
        (started.state, started.jr_url.as_str(), started.started_at),
        (State::Running, "http://jr1:32307", Some(at(1, 1)))
    );
    let err = store
        .start_request(&"r1".into(), "http://jr2", None, at(1, 2))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "request r1 in state RUNNING, expected state PENDING"
    );
    assert!(matches!(
        store.fail_pending("r1", at(1, 2)).await,
        Err(Error::State { .. })
    ));
    assert!(matches!(
        store
            .start_request(&"nope".into(), "x", None, at(1, 2))
            .await,
        Err(Error::NotFound { .. })
    ));

    store.update_progress("r1", 2).await.unwrap();
    assert_eq!(
        store.get_request("r1", false).await.unwrap().finished_jobs,
        2
    );
    let finish = FinishRequest {
        request_id: "r1".to_owned(),
        state: State::Complete,
        finished_at: at(1, 5),
        finished_jobs: 3,
        error: String::new(),
        job_logs: Vec::new(),
    };
    assert_eq!(
        store.finish_request(&finish, None).await.unwrap(),
        Finished::Now
    );
    // A second finish changes nothing and says so, even with another state.
    let again = FinishRequest {
        state: State::Fail,
        ..finish.clone()
    };
    assert_eq!(
        store.finish_request(&again, None).await.unwrap(),
        Finished::Already(State::Complete)
    );
    let done = store.get_request("r1", false).await.unwrap();
    assert_eq!(
        (
            done.state,
            done.finished_at,
            done.finished_jobs,
            done.jr_url.as_str()
        ),
        (State::Complete, Some(at(1, 5)), 3, "")
    );
    // Never back to RUNNING, and progress of a finished request is ignored.
    assert!(
        store
            .start_request(&"r1".into(), "x", None, at(1, 6))
            .await
            .is_err()
    );
    store.update_progress("r1", 1).await.unwrap();
    assert_eq!(
        store.get_request("r1", false).await.unwrap().finished_jobs,
        3
    );

    create(&*store, "r2").await;
    let err = store
        .finish_request(
            &FinishRequest {
                request_id: "r2".to_owned(),
                ..finish.clone()
            },
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "request r2 in state PENDING, expected state RUNNING"
    );
    let err = store
        .finish_request(
            &FinishRequest {
                state: State::Running,
                ..finish
            },
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err}");
    store.fail_pending("r2", at(1, 3)).await.unwrap();
    let failed = store.get_request("r2", false).await.unwrap();
    assert_eq!(
        (failed.state, failed.finished_at),
        (State::Fail, Some(at(1, 3)))
    );
}

/// Requests of another system's history (`spindle import spincycle`): stored as they
/// ended, once; a suspended one that waits for job types never expires, and its resume
/// clears why it waited.
pub(super) async fn imported_requests_and_chains_that_wait(store: Arc<dyn Store>, _raw: Raw) {
    let imported = |id: &str, state: State| {
        let (mut request, create_request) = request(id, "deploy", "ann", at(1, 0), "db1");
        request.state = state;
        request.started_at = Some(at(1, 1));
        request.finished_at = (state == State::Complete).then(|| at(1, 2));
        request.finished_jobs = 2;
        crate::ImportedRequest {
            request,
            create_request,
            job_logs: vec![
                log(id, "a", 1, State::Complete),
                log(id, "b", 1, State::Fail),
            ],
            suspended: (state == State::Suspended).then(|| (sjc(id), at(1, 3))),
        }
    };
    let batch = [
        imported("i1", State::Complete),
        imported("i2", State::Suspended),
    ];
    let stored = store.import_requests(&batch).await.unwrap();
    assert_eq!(stored, ["i1", "i2"]);
    let done = store.get_request("i1", true).await.unwrap();
    assert_eq!(
        (
            done.state,
            done.started_at,
            done.finished_at,
            done.finished_jobs
        ),
        (State::Complete, Some(at(1, 1)), Some(at(1, 2)), 2)
    );
    let chain = done.job_chain.unwrap();
    assert_eq!(chain.adjacency_list, sjc("i1").job_chain.adjacency_list);
    assert_eq!(
        (
            chain.jobs["a"].state,
            chain.jobs["b"].state,
            chain.jobs["c"].state
        ),
        (State::Complete, State::Fail, State::Pending),
        "each job as its log says"
    );
    assert_eq!(store.job_log("i1").await.unwrap(), batch[0].job_logs);
    let by_host = RequestFilter {
        args: [("host".to_owned(), "db1".to_owned())].into(),
        ..RequestFilter::default()
    };
    assert_eq!(store.find_requests(&by_host).await.unwrap().len(), 2);
    // Again, with one new: only the new one is stored.
    let again = [imported("i1", State::Complete), imported("i3", State::Fail)];
    assert_eq!(store.import_requests(&again).await.unwrap(), ["i3"]);
    assert_eq!(store.job_log("i1").await.unwrap().len(), 2);

    let claimed = store
        .claim_suspended("rm-a", at(2, 0))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed, sjc("i2"));
    store
        .set_waiting(
            "i2",
            "waits for a job runner with its job types: `go-provision`",
        )
        .await
        .unwrap();
    assert_eq!(
        store
            .release_stale_claims(Utc::now() + Duration::minutes(1))
            .await
            .unwrap(),
        1
    );
    let expired = store.expire_suspended(at(9, 0), at(9, 0)).await.unwrap();
    assert!(
        expired.is_empty(),
        "a chain that waits for its job types does not expire"
    );
    let waiting = store.get_request("i2", false).await.unwrap();
    assert_eq!(waiting.state, State::Suspended);
    assert!(waiting.error.contains("`go-provision`"));
    store
        .claim_suspended("rm-a", at(9, 1))
        .await
        .unwrap()
        .unwrap();
    store
        .resumed(&"i2".into(), "rm-a", "http://jr1:32307", None)
        .await
        .unwrap();
    let resumed = store.get_request("i2", false).await.unwrap();
    assert_eq!(
        (resumed.state, resumed.error.as_str()),
        (State::Running, "")
    );
}

/// An import's rows go in bulk (PostgreSQL: `COPY`): of two entries of one try the
/// first is kept; a batch larger than a piece of copied data arrives whole, every value
/// as it was (NULL times, text of any byte); and a job log row found stored after all
/// fails the batch with nothing of it stored.
pub(super) async fn imports_go_in_bulk_all_or_nothing(store: Arc<dyn Store>, _raw: Raw) {
    let imported = |id: &str, logs: Vec<JobLog>| {
        let (mut request, create_request) = request(id, "deploy", "ann", at(1, 0), "db1");
        request.state = State::Fail;
        request.started_at = None;
        request.finished_at = Some(at(1, 2));
        request.error = "tab\there, quote ' \" and \\ backslash".to_owned();
        crate::ImportedRequest {
            request,
            create_request,
            job_logs: logs,
            suspended: None,
        }
    };
    // 300 tries of 8 KiB of output each: 2.4 MB, more than one piece of COPY data.
    let big: Vec<JobLog> = (1..=300)
        .map(|n| JobLog {
            stdout: format!("line {n}\t✓\n\\N\r\n").repeat(800),
            ..log("b1", "a", n, State::Fail)
        })
        .collect();
    let mut twice = log("b2", "a", 1, State::Complete);
    twice.stdout = "the first".to_owned();
    let mut again = twice.clone();
    again.stdout = "the second".to_owned();
    let batch = [
        imported("b1", big.clone()),
        imported("b2", vec![twice.clone(), again]),
    ];
    assert_eq!(store.import_requests(&batch).await.unwrap(), ["b1", "b2"]);
    assert_eq!(store.job_log("b1").await.unwrap(), big);
    assert_eq!(store.job_log("b2").await.unwrap(), [twice]);
    let read = store.get_request("b1", false).await.unwrap();
    assert_eq!(
        (read.started_at, read.finished_at, read.error.as_str()),
        (None, Some(at(1, 2)), batch[0].request.error.as_str())
    );

    // A try of "b4" logged without its request: the batch of "b3" and "b4" fails, and
    // neither is stored.
    store
        .insert_job_logs(&[log("b4", "a", 1, State::Complete)])
        .await
        .unwrap();
    let batch = [
        imported("b3", vec![log("b3", "a", 1, State::Complete)]),
        imported("b4", vec![log("b4", "a", 1, State::Complete)]),
    ];
    store.import_requests(&batch).await.unwrap_err();
    for id in ["b3", "b4"] {
        let err = store.get_request(id, false).await.unwrap_err();
        assert!(matches!(err, Error::NotFound { .. }), "{id}: {err}");
    }
    assert!(store.job_log("b3").await.unwrap().is_empty());
    assert_eq!(store.job_log("b4").await.unwrap().len(), 1);
}

/// Issue #10: a request's times are ordered, created ≤ started ≤ finished, whatever
/// times the callers pass (a fast chain's finish can arrive before its start is recorded;
/// a Job Runner's clock can be behind).
pub(super) async fn request_times_stay_in_order(store: Arc<dyn Store>, _raw: Raw) {
    let times = |request: &Request| {
        (
            request.created_at,
            request.started_at.unwrap(),
            request.finished_at.unwrap(),
        )
    };
    // Created at 01:00; started "at" 00:30; finished "at" 00:10.
    create(&*store, "r1").await;
    store
        .start_request(&"r1".into(), "", None, at(0, 30))
        .await
        .unwrap();
    let finish = FinishRequest {
        request_id: "r1".to_owned(),
        state: State::Complete,
        finished_at: at(0, 10),
        finished_jobs: 3,
        error: String::new(),
        job_logs: Vec::new(),
    };
    store.finish_request(&finish, None).await.unwrap();
    let (created, started, finished) = times(&store.get_request("r1", false).await.unwrap());
    assert!(
        created <= started && started <= finished,
        "{created} {started} {finished}"
    );
    assert_eq!((started, finished), (at(1, 0), at(1, 0)));
    // In order already: kept as given.
    create(&*store, "r2").await;
    store
        .start_request(&"r2".into(), "", None, at(1, 5))
        .await
        .unwrap();
    store
        .finish_request(
            &FinishRequest {
                request_id: "r2".to_owned(),
                finished_at: at(1, 9),
                ..finish.clone()
            },
            None,
        )
        .await
        .unwrap();
    let r2 = store.get_request("r2", false).await.unwrap();
    assert_eq!(times(&r2), (at(1, 0), at(1, 5), at(1, 9)));
    // A failed start is never before the creation either.
    create(&*store, "r3").await;
    store.fail_pending("r3", at(0, 1)).await.unwrap();
    let r3 = store.get_request("r3", false).await.unwrap();
    assert_eq!(r3.finished_at, Some(at(1, 0)));
}

/// Spec history: a set of spec files is stored once by its version, and a request keeps
/// the version it was built from.
pub(super) async fn spec_versions_are_stored_once_and_requests_keep_theirs(
    store: Arc<dyn Store>,
    _raw: Raw,
) {
    let specs = |text: &str| proto::SpecVersion {
        version: format!("v-{}", text.len()),
        files: vec![proto::SpecFile {
            path: "specs/a.yaml".to_owned(),
            text: text.to_owned(),
        }],
    };
    let first = specs("sequences: {}\n");
    store.add_spec_version(&first, at(1, 0)).await.unwrap();
    // Again (another Request Manager, a reload of the same files): kept as it was.
    store.add_spec_version(&first, at(1, 1)).await.unwrap();
    assert_eq!(store.spec_version(&first.version).await.unwrap(), first);
    let err = store.spec_version("nope").await.unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");

    let (mut request, create_request) = sample_request("r1");
    request.spec_version = first.version.clone();
    store
        .create_request(&request, &create_request, None)
        .await
        .unwrap();
    create(&*store, "r2").await;
    assert_eq!(
        store.get_request("r1", false).await.unwrap().spec_version,
        first.version
    );
    assert_eq!(
        store.get_request("r2", false).await.unwrap().spec_version,
        ""
    );
    let found = store
        .find_requests(&RequestFilter::default())
        .await
        .unwrap();
    let versions: Vec<&str> = found.iter().map(|r| r.spec_version.as_str()).collect();
    assert!(versions.contains(&first.version.as_str()), "{versions:?}");
}

/// Approval answers: the first answer to a job is kept; a retry forgets some.
pub(super) async fn approval_answers_are_kept_once_per_job(store: Arc<dyn Store>, _raw: Raw) {
    create(&*store, "r1").await;
    let answer = |approved: bool, user: &str| proto::Answer {
        approved,
        user: user.to_owned(),
        at: "2026-12-01T10:00:00.000Z".to_owned(),
        comment: String::new(),
    };
    assert!(
        store
            .add_answer("r1", "gate", &answer(true, "ann"))
            .await
            .unwrap()
    );
    assert!(
        !store
            .add_answer("r1", "gate", &answer(false, "bo"))
            .await
            .unwrap()
    );
    assert!(
        store
            .add_answer("r1", "late", &answer(false, "bo"))
            .await
            .unwrap()
    );
    assert_eq!(
        store.answers("r1").await.unwrap(),
        [
            ("gate".to_owned(), answer(true, "ann")),
            ("late".to_owned(), answer(false, "bo"))
        ]
    );
    store
        .remove_answers("r1", &["late".to_owned()])
        .await
        .unwrap();
    assert_eq!(store.answers("r1").await.unwrap().len(), 1);
    let err = store
        .add_answer(
            "r1",
            "x",
            &proto::Answer {
                at: "yesterday".to_owned(),
                ..answer(true, "ann")
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err}");
}

/// Schedules: a run is claimed once, whichever Request Manager asks first, and keeps
/// what it did.
pub(super) async fn schedule_runs_are_claimed_once(store: Arc<dyn Store>, _raw: Raw) {
    let due = at(1, 0);
    assert!(
        store
            .claim_schedule_run("nightly", due, "rm-a")
            .await
            .unwrap()
    );
    assert!(
        !store
            .claim_schedule_run("nightly", due, "rm-b")
            .await
            .unwrap()
    );
    assert!(
        store
            .claim_schedule_run("nightly", at(1, 1), "rm-b")
            .await
            .unwrap()
    );
    assert!(
        store
            .claim_schedule_run("other", due, "rm-b")
            .await
            .unwrap()
    );
    store
        .schedule_run_done("nightly", due, "r1", "")
        .await
        .unwrap();
    store
        .schedule_run_done("nightly", at(1, 1), "", "the previous run still goes")
        .await
        .unwrap();
    let runs = store.schedule_runs("nightly", 10).await.unwrap();
    let seen: Vec<(&str, &str, &str)> = runs
        .iter()
        .map(|r| {
            (
                r.rm_host.as_str(),
                r.request_id.as_str(),
                r.skipped.as_str(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("rm-b", "", "the previous run still goes"),
            ("rm-a", "r1", "")
        ]
    );
    assert_eq!(runs[1].due_at, due);
    assert_eq!(store.schedule_runs("nightly", 1).await.unwrap().len(), 1);
}

/// Issue #35: why a PENDING request waits is kept until its start clears it (a request
/// in another state is left as it is); a database error says the database's words and
/// the operation that met them.
pub(super) async fn a_pending_request_says_why_it_waits_and_database_errors_their_cause(
    store: Arc<dyn Store>,
    raw: Raw,
) {
    let (request, create_request) = request("w1", "deploy", "ann", at(1, 0), "db1");
    store
        .create_request(&request, &create_request, None)
        .await
        .unwrap();
    store
        .set_waiting("w1", "waiting for a job runner: refused")
        .await
        .unwrap();
    assert_eq!(
        store.get_request("w1", false).await.unwrap().error,
        "waiting for a job runner: refused"
    );
    store
        .start_request(&"w1".into(), "http://jr1:32307", None, at(1, 1))
        .await
        .unwrap();
    store.set_waiting("w1", "not PENDING").await.unwrap();
    let started = store.get_request("w1", false).await.unwrap();
    assert_eq!(
        (started.state, started.error.as_str()),
        (State::Running, "")
    );
    raw.exec("DROP TABLE request_audit").await;
    let err = store.audit("w1").await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("database error (in audit: ") && text.contains("request_audit"),
        "{text}"
    );
}
