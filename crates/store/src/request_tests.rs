//! The store suite, on every backend: requests — create, read, state changes, search,
//! args, spec versions, approvals, schedules, imports, counts.

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
    assert_eq!(
        store.job_chain("r1").await.unwrap(),
        made.job_chain.unwrap()
    );
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

pub(super) async fn search(store: Arc<dyn Store>, _raw: Raw) {
    // storage.md's example: created 00:00 (pending), 01:00 (running), 02:00 (finished at
    // 04:00) and 03:00.
    let rows = [
        ("p", 0, "deploy", "ann", "db1"),
        ("r", 1, "deploy", "bob", "db2"),
        ("f", 2, "stop", "ann", "db1"),
        ("x", 3, "deploy", "ann", "db3"),
        ("y", 3, "stop", "cy", "db1"),
    ];
    for (id, hour, request_type, user, host) in rows {
        let (request, create_request) = request(id, request_type, user, at(hour, 0), host);
        store
            .create_request(&request, &create_request, None)
            .await
            .unwrap();
    }
    store
        .start_request(&"r".into(), "http://jr1", None, at(1, 1))
        .await
        .unwrap();
    store
        .start_request(&"f".into(), "http://jr1", None, at(2, 1))
        .await
        .unwrap();
    let finish = FinishRequest {
        request_id: "f".to_owned(),
        state: State::Complete,
        finished_at: at(4, 0),
        finished_jobs: 3,
        error: String::new(),
        job_logs: Vec::new(),
    };
    store.finish_request(&finish, None).await.unwrap();
    let ids = |found: Vec<Request>| found.into_iter().map(|r| r.id).collect::<Vec<_>>();
    let find = |filter: RequestFilter| {
        let store = Arc::clone(&store);
        async move { ids(store.find_requests(&filter).await.unwrap()) }
    };
    // Newest first; equal times by id.
    assert_eq!(
        find(RequestFilter::default()).await,
        ["x", "y", "f", "r", "p"]
    );
    let found = store
        .find_requests(&RequestFilter::default())
        .await
        .unwrap();
    assert!(
        found
            .iter()
            .all(|r| r.args.is_empty() && r.job_chain.is_none())
    );
    assert_eq!(
        find(RequestFilter {
            since: Some(at(2, 15)),
            until: Some(at(2, 45)),
            ..Default::default()
        })
        .await,
        ["f", "r", "p"]
    );
    assert_eq!(
        find(RequestFilter {
            request_type: Some("stop".into()),
            ..Default::default()
        })
        .await,
        ["y", "f"]
    );
    assert_eq!(
        find(RequestFilter {
            user: Some("ann".into()),
            ..Default::default()
        })
        .await,
        ["x", "f", "p"]
    );
    assert_eq!(
        find(RequestFilter {
            states: vec![State::Pending, State::Complete],
            ..Default::default()
        })
        .await,
        ["x", "y", "f", "p"]
    );
    let args = BTreeMap::from([("host".to_owned(), "db1".to_owned())]);
    assert_eq!(
        find(RequestFilter {
            args: args.clone(),
            ..Default::default()
        })
        .await,
        ["y", "f", "p"]
    );
    // Non-string values compare as their JSON text; every pair must match.
    let both = BTreeMap::from([
        ("host".to_owned(), "db1".to_owned()),
        ("count".to_owned(), "3".to_owned()),
    ]);
    assert_eq!(
        find(RequestFilter {
            args: both,
            ..Default::default()
        })
        .await,
        ["y", "f", "p"]
    );
    let no_match = BTreeMap::from([("host".to_owned(), "db%".to_owned())]);
    assert!(
        find(RequestFilter {
            args: no_match,
            ..Default::default()
        })
        .await
        .is_empty(),
        "no wildcards"
    );
    assert_eq!(
        find(RequestFilter {
            limit: 2,
            offset: 2,
            ..Default::default()
        })
        .await,
        ["f", "r"]
    );
    assert_eq!(
        find(RequestFilter {
            limit: 2,
            ..Default::default()
        })
        .await,
        ["x", "y"]
    );
    // Keyset pages: each after the last of the one before, ties on the creation time
    // (x and y, both 3:00) broken by id, every request once, a filter kept throughout.
    let cursor = |id: &str, hour: u32| {
        Some(proto::Cursor {
            created_at: at(hour, 0),
            request_id: id.to_owned(),
        })
    };
    let page = |after, request_type: Option<&str>, limit| RequestFilter {
        after,
        request_type: request_type.map(str::to_owned),
        limit,
        ..Default::default()
    };
    assert_eq!(find(page(cursor("y", 3), None, 2)).await, ["f", "r"]);
    assert_eq!(find(page(cursor("r", 1), None, 2)).await, ["p"]);
    assert_eq!(
        find(page(cursor("x", 3), None, 0)).await,
        ["y", "f", "r", "p"]
    );
    assert_eq!(find(page(cursor("x", 3), Some("deploy"), 1)).await, ["r"]);
    assert_eq!(find(page(cursor("r", 1), Some("deploy"), 1)).await, ["p"]);
    assert!(find(page(cursor("p", 0), None, 2)).await.is_empty());
    assert!(
        find(RequestFilter {
            user: Some("nobody".into()),
            ..Default::default()
        })
        .await
        .is_empty()
    );
}

/// Issue #10: an arg value of any size the API accepts is stored on both backends (a
/// 100 KB list of hosts broke PostgreSQL's B-tree index), and the exact `arg=value`
/// search still finds it through an index.
pub(super) async fn a_long_arg_value_is_stored_and_found_through_an_index(
    store: Arc<dyn Store>,
    raw: Raw,
) {
    let hosts: Vec<String> = (0..6000).map(|i| format!("host-{i:05}.example")).collect();
    let value = json!(hosts);
    let text = value.to_string();
    assert!(text.len() > 100_000, "{}", text.len());
    let (mut request, create_request) = request("big", "deploy", "ann", at(1, 0), "db1");
    request.args[0].name = "hosts".to_owned();
    request.args[0].value = value.clone();
    store
        .create_request(&request, &create_request, None)
        .await
        .expect("a 100 KB arg is stored");
    let read = store.get_request("big", false).await.unwrap();
    assert_eq!(read.args[0].value, value);
    create(&*store, "small").await;
    let found = store
        .find_requests(&RequestFilter {
            args: BTreeMap::from([("hosts".to_owned(), text.clone())]),
            ..RequestFilter::default()
        })
        .await
        .unwrap();
    let ids: Vec<&str> = found.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["big"]);
    let almost = format!("{}x", &text[..text.len() - 1]);
    let found = store
        .find_requests(&RequestFilter {
            args: BTreeMap::from([("hosts".to_owned(), almost)]),
            ..RequestFilter::default()
        })
        .await
        .unwrap();
    assert!(found.is_empty());
    let plan = raw.arg_search_plan(&text).await;
    assert!(
        plan.contains("request_args_by_value"),
        "the arg search uses the index on values: {plan}"
    );
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

/// Counts by state, and the timing decorator: every operation it passes on is timed
/// under its name, failures included.
pub(super) async fn requests_are_counted_by_state_and_operations_timed(
    store: Arc<dyn Store>,
    _raw: Raw,
) {
    #[derive(Default)]
    struct Seen(std::sync::Mutex<Vec<(&'static str, bool)>>);
    impl crate::QueryObserver for Seen {
        fn query(&self, operation: &'static str, _elapsed: std::time::Duration, ok: bool) {
            self.0.lock().unwrap().push((operation, ok));
        }
    }
    let seen = Arc::new(Seen::default());
    let store = crate::timed(store, seen.clone());
    let all = [State::Pending, State::Running, State::Suspended];
    assert_eq!(store.count_requests(&all, None).await.unwrap(), []);
    create(&*store, "r1").await;
    create(&*store, "r2").await;
    running(&*store, "r3").await;
    assert_eq!(
        store.count_requests(&all, None).await.unwrap(),
        [(State::Pending, 2), (State::Running, 1)]
    );
    // Bounded: a count stops one past the bound.
    assert_eq!(
        store.count_requests(&all, Some(1)).await.unwrap(),
        [(State::Pending, 2), (State::Running, 1)]
    );
    assert_eq!(
        store.count_requests(&all, Some(5)).await.unwrap(),
        [(State::Pending, 2), (State::Running, 1)]
    );
    create(&*store, "r4").await;
    assert_eq!(
        store
            .count_requests(&[State::Pending], Some(1))
            .await
            .unwrap(),
        [(State::Pending, 2)],
        "3 PENDING, counted up to 1 and one more"
    );
    assert!(store.get_request("nope", false).await.is_err());
    let seen = seen.0.lock().unwrap().clone();
    assert_eq!(seen.first(), Some(&("count_requests", true)));
    assert_eq!(
        seen.iter()
            .filter(|(op, _)| *op == "create_request")
            .count(),
        4
    );
    assert_eq!(seen.last(), Some(&("get_request", false)));
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

pub(super) async fn the_ended_among_many_are_found_in_one_read(store: Arc<dyn Store>, _raw: Raw) {
    assert!(store.ended_among(&[]).await.unwrap().is_empty());
    for id in ["e1", "e2", "e3", "e4"] {
        running(&*store, id).await;
    }
    for (id, state) in [("e2", State::Complete), ("e3", State::Fail)] {
        let finish = FinishRequest {
            request_id: id.to_owned(),
            state,
            finished_at: at(1, 5),
            finished_jobs: 1,
            error: String::new(),
            job_logs: Vec::new(),
        };
        store.finish_request(&finish, None).await.unwrap();
    }
    let asked: Vec<String> = ["e1", "e2", "e3", "e4", "unknown"]
        .iter()
        .map(|id| (*id).to_owned())
        .collect();
    let mut ended = store.ended_among(&asked).await.unwrap();
    ended.sort();
    assert_eq!(ended, ["e2", "e3"]);
    // More ids than one statement takes.
    let many: Vec<String> = (0..1_200)
        .map(|n| format!("x{n}"))
        .chain(["e3".to_owned()])
        .collect();
    assert_eq!(store.ended_among(&many).await.unwrap(), ["e3"]);
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
