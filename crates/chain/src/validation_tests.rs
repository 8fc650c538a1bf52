//! Chains that are not valid (Spin Cycle's J): refused before anything runs.

use super::*;

// ---- J. chain validation ----

#[test]
fn validation_of_new_and_resumed_chains() {
    assert!(crate::validate::new_chain(&chain("1>2,3 2>4 3>4").into()).is_ok());
    let mut bad = chain("1>2,3 2>4 3>4");
    bad.adjacency_list
        .get_mut("j3")
        .unwrap()
        .push("j7".to_owned());
    let err = crate::validate::new_chain(&bad.clone().into()).unwrap_err();
    assert!(
        err.is_invalid_chain() && err.message.starts_with("invalid adjacency list"),
        "{err}"
    );
    let err = crate::validate::new_chain(&chain("1>3 2>3").into()).unwrap_err();
    assert!(err.message.contains("2 start jobs"), "{err}");
    let err = crate::validate::new_chain(&chain("1>2,3").into()).unwrap_err();
    assert!(err.message.contains("2 end jobs"), "{err}");
    let mut cyclic = chain("1>2 2>3 3>4");
    cyclic
        .adjacency_list
        .get_mut("j3")
        .unwrap()
        .push("j2".to_owned());
    let err = crate::validate::new_chain(&cyclic.clone().into()).unwrap_err();
    assert_eq!(err.message, "chain is cyclic");
    // Jobs are found by their ids: one filed under another id is refused, not misread.
    let mut misfiled = chain("1>2 2>3");
    let job3 = misfiled.jobs.remove("j3").unwrap();
    misfiled.jobs.insert("j0".to_owned(), job3);
    let err = crate::validate::new_chain(&misfiled.clone().into()).unwrap_err();
    assert!(err.is_invalid_chain(), "{err}");
    assert_eq!(
        err.message,
        "invalid job chain: job j3 is filed under id \"j0\"; expected its own id"
    );
    let mut running = chain("1>2");
    job(&mut running, "2").state = State::Running;
    let err = crate::validate::new_chain(&running.clone().into()).unwrap_err();
    assert!(!err.is_invalid_chain());
    assert!(
        err.message
            .contains("invalid job state for new job chain: RUNNING (2), job job2 (ID j2)"),
        "{err}"
    );
    let mut resumed = chain("1>2");
    job(&mut resumed, "1").state = State::Complete;
    assert!(
        crate::validate::resumed_chain(&resumed.clone().into()).is_err(),
        "finishedJobs must match"
    );
    resumed.finished_jobs = 1;
    assert!(crate::validate::resumed_chain(&resumed.clone().into()).is_ok());
    job(&mut resumed, "2").state = State::Fail;
    assert!(
        crate::validate::resumed_chain(&resumed.clone().into())
            .unwrap_err()
            .message
            .contains("must be PENDING, COMPLETE, or STOPPED")
    );
}

/// A chain with every field of a job set somewhere: durations, args, data, `each`,
/// bytes, a `parallel` window, tries.
fn full_chain() -> JobChain {
    let mut c = chain("1>2,3 2>4 3>4");
    let j1 = job(&mut c, "1");
    j1.sequence_retry = 2;
    j1.sequence_retry_wait = "1s".to_owned();
    j1.sequence_timeout = "1m".to_owned();
    j1.parallel = 1;
    let j2 = job(&mut c, "2");
    j2.retry = 3;
    j2.retry_wait = "250ms".to_owned();
    j2.timeout = "5s".to_owned();
    j2.bytes = b"\x00serialized\xff".to_vec();
    j2.args.insert("host".to_owned(), json!("db1"));
    j2.each.insert("host".to_owned(), json!("db1"));
    j2.tries = 1;
    job(&mut c, "3")
        .data
        .insert("key".to_owned(), json!({"nested": [1, 2]}));
    c
}

/// The runner's form of a chain, validated, as a chain again.
fn round_trip(incoming: crate::Incoming) -> JobChain {
    let edges = crate::validate::new_chain(&incoming).expect("valid chain");
    crate::state::Chain::new(
        incoming,
        edges,
        BTreeMap::new(),
        BTreeMap::new(),
        BTreeMap::new(),
    )
    .expect("valid waits")
    .job_chain(State::Pending)
}

#[test]
fn a_chain_decoded_into_the_runners_form_is_the_chain_sent() {
    let sent = full_chain();
    let text = serde_json::to_string(&sent).unwrap();
    let decoded: crate::Incoming = serde_json::from_str(&text).unwrap();
    assert_eq!(decoded.request_id(), "req");
    assert_eq!(decoded.len(), 4);
    assert_eq!(round_trip(decoded), sent);
    // From a `proto::JobChain` too (the in-process hand-over).
    assert_eq!(round_trip(sent.clone().into()), sent);
}

#[test]
fn a_hand_over_in_any_field_order_decodes_alike() {
    let sent = full_chain();
    let value = serde_json::to_value(&sent).unwrap();
    // The adjacency list first, the jobs in reverse order, fields the runner does not
    // know: the same chain.
    let jobs: Vec<String> = sent
        .jobs
        .keys()
        .rev()
        .map(|id| {
            format!(
                "{}:{}",
                serde_json::to_string(id).unwrap(),
                value["jobs"][id]
            )
        })
        .collect();
    let text = format!(
        r#"{{"adjacencyList":{},"extra":[1,{{"a":2}}],"jobs":{{{}}},"requestId":"req","state":1,"finishedJobs":0}}"#,
        value["adjacencyList"],
        jobs.join(",")
    );
    let decoded: crate::Incoming = serde_json::from_str(&text).unwrap();
    assert_eq!(round_trip(decoded), sent);
    // Null jobs and adjacency list: an empty chain, as `proto::JobChain` reads them.
    let empty: crate::Incoming =
        serde_json::from_str(r#"{"requestId":"r","jobs":null,"adjacencyList":null}"#).unwrap();
    assert!(empty.is_empty());
}

#[test]
fn a_malformed_hand_over_is_refused_with_where_and_what() {
    let refuse = |text: &str| {
        serde_json::from_str::<crate::Incoming>(text)
            .unwrap_err()
            .to_string()
    };
    assert!(refuse(r#"{"jobs":{}}"#).contains("missing field `requestId`"));
    assert!(refuse(r#"{"requestId":"r","jobs":{},"jobs":{}}"#).contains("duplicate field `jobs`"));
    let err = refuse(r#"{"requestId":"r","jobs":{"j1":{"id":"j1","type":"t","retry":"x"}}}"#);
    assert!(
        err.contains("invalid type: string \"x\", expected u32"),
        "{err}"
    );
    assert!(err.contains("line 1 column"), "{err}");
    let err = refuse(r#"{"requestId":"r","jobs":[]}"#);
    assert!(err.contains("expected a map of job ids to jobs"), "{err}");
    let err = refuse(r#"{"requestId":"r","jobs":{},"adjacencyList":{"a":"b"}}"#);
    assert!(err.contains("expected a list of job ids"), "{err}");
    // A structure that decodes but cannot run is the validation's to refuse.
    let invalid = |text: &str| {
        let decoded: crate::Incoming = serde_json::from_str(text).unwrap();
        let err = crate::validate::new_chain(&decoded).unwrap_err();
        assert!(err.is_invalid_chain(), "{err}");
        err.message
    };
    // A chain of jobs filed as (key, id), with an adjacency list before or after them.
    let text = |jobs: &[(&str, &str)], list: &str, list_first: bool| {
        let jobs: Vec<String> = jobs
            .iter()
            .map(|(key, id)| format!(r#""{key}":{{"id":"{id}","type":"t","state":1}}"#))
            .collect();
        let (jobs, list) = (
            format!(r#""jobs":{{{}}}"#, jobs.join(",")),
            format!(r#""adjacencyList":{list}"#),
        );
        match list_first {
            true => format!(r#"{{{list},"requestId":"r",{jobs}}}"#),
            false => format!(r#"{{"requestId":"r",{jobs},{list}}}"#),
        }
    };
    let cases = [
        (
            &[("a", "a"), ("b", "a")][..],
            r#"{"a":["b"]}"#,
            false,
            "invalid job chain: job a is filed under id \"b\"; expected its own id",
        ),
        // A key given twice is two jobs with one id, not the last one silently.
        (
            &[("a", "a"), ("a", "a")][..],
            "{}",
            false,
            "invalid job chain: two jobs have id \"a\"; expected each id once",
        ),
        (
            &[("a", "a"), ("b", "b")][..],
            r#"{"a":["c"]}"#,
            false,
            "invalid adjacency list: some jobs exist in the adjacency list but not in the chain's jobs",
        ),
        // The adjacency list first: the unknown job is found when the jobs arrive.
        (
            &[("a", "a"), ("b", "b")][..],
            r#"{"c":["b"]}"#,
            true,
            "invalid adjacency list: some jobs exist in the adjacency list but not in the chain's jobs",
        ),
    ];
    for (jobs, list, list_first, expected) in cases {
        assert_eq!(
            invalid(&text(jobs, list, list_first)),
            expected,
            "{jobs:?} {list}"
        );
    }
}

#[test]
fn jobs_of_one_name_share_it_in_the_runners_form() {
    let mut c = chain("1>2,3 2>4 3>4");
    for id in ["2", "3"] {
        job(&mut c, id).name = "same".to_owned();
    }
    let decoded = crate::Incoming::from(c);
    let (j2, j3) = (&decoded.jobs[1], &decoded.jobs[2]);
    assert_eq!((&*j2.name, &*j3.name), ("same", "same"));
    assert!(Arc::ptr_eq(&j2.name, &j3.name));
    assert!(Arc::ptr_eq(&j2.job_type, &j3.job_type));
    assert!(Arc::ptr_eq(&j2.sequence_id, &decoded.jobs[0].sequence_id));
    // Jobs that set no duration carry none.
    assert!(decoded.jobs.iter().all(|job| job.durations.is_none()));
}

#[test]
fn runnable_and_sequence_helpers() {
    let mut c = chain("1>2,3 2>4,5 3>4");
    for (id, state) in [
        ("1", State::Complete),
        ("2", State::Complete),
        ("3", State::Stopped),
    ] {
        job(&mut c, id).state = state;
    }
    c.finished_jobs = 2;
    // Two end jobs: not a chain a runner accepts, but the helpers work on any graph.
    let c = crate::Incoming::from(c);
    let edges = crate::validate::edges(&c).expect("known ids");
    let state = crate::state::Chain::new(
        c,
        edges,
        BTreeMap::new(),
        BTreeMap::new(),
        BTreeMap::from([("j1".to_owned(), 3)]),
    )
    .expect("valid waits");
    let ids: Vec<&str> = state
        .indices()
        .filter(|&i| state.is_runnable(i))
        .map(|i| state.jobs[i].id.as_str())
        .collect();
    assert_eq!(ids, ["j5"]);
    let find = |id: &str| state.indices().find(|&i| state.jobs[i].id == id).unwrap();
    let (j1, j2) = (find("j1"), find("j2"));
    let sequence = state.sequence_started_by(j1).expect("j1 starts a sequence");
    assert_eq!(state.sequence_of[j2], Some(sequence));
    assert!(state.sequence_started_by(j2).is_none());
    assert!(state.in_sequence(j2, sequence));
    // sequenceRetry 0, 3 tries: cannot retry.
    assert!(!state.can_retry(Some(sequence)));
}
