//! The store suite, on every backend: finding requests (filters, keyset pages, args
//! through their index, the ended among many) and counting them by state.

use super::*;

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
    // Their job states, read the same way (a page of `find`), as `job_states` reads them.
    store
        .insert_job_logs(&[
            log("e1", "a", 1, State::Fail),
            log("e1", "a", 2, State::Complete),
            log("e1", "b", 1, State::Running),
            log("e4", "a", 1, State::Complete),
        ])
        .await
        .unwrap();
    let among = store
        .job_states_among(
            &many
                .iter()
                .cloned()
                .chain(asked.clone())
                .collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    let mut ids: Vec<&String> = among.keys().collect();
    ids.sort();
    assert_eq!(ids, ["e1", "e4"], "requests without entries are left out");
    for id in ["e1", "e4"] {
        let sorted = |mut states: Vec<crate::JobState>| {
            states.sort_by(|a, b| a.job_id.cmp(&b.job_id));
            states
                .into_iter()
                .map(|s| (s.job_id, s.tries, s.state))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            sorted(among[id].clone()),
            sorted(store.job_states(id).await.unwrap()),
            "{id}"
        );
    }
    assert_eq!(
        among["e1"]
            .iter()
            .find(|s| s.job_id == "a")
            .map(|s| (s.tries, s.state)),
        Some((2, State::Complete))
    );
    // The requests themselves, read the same way (`spindle ps`), as `get_request` reads
    // them but for their args.
    let mut found = store.requests_among(&many).await.unwrap();
    assert_eq!(found.len(), 1);
    let e3 = found.pop().unwrap();
    let alone = store.get_request("e3", false).await.unwrap();
    assert_eq!(
        e3,
        proto::Request {
            args: Vec::new(),
            ..alone
        }
    );
    let mut states: Vec<(String, State)> = store
        .requests_among(&asked)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.id, r.state))
        .collect();
    states.sort();
    assert_eq!(
        states,
        [
            ("e1".to_owned(), State::Running),
            ("e2".to_owned(), State::Complete),
            ("e3".to_owned(), State::Fail),
            ("e4".to_owned(), State::Running)
        ]
    );
}
