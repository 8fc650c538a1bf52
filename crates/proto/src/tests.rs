//! Round trips against JSON documents written from api.md's shapes.

use chrono::{TimeZone, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::*;

/// Reads `doc` as `T`, writes it back, and checks that nothing was lost or renamed.
fn round_trip<T: Serialize + DeserializeOwned + std::fmt::Debug + PartialEq>(doc: Value) -> T {
    let value: T = serde_json::from_value(doc.clone()).expect("document decodes");
    let written = serde_json::to_value(&value).expect("value encodes");
    assert_eq!(written, doc, "round trip changed the document");
    let again: T = serde_json::from_value(written).expect("written document decodes");
    assert_eq!(again, value);
    value
}

#[test]
fn states_have_spin_cycle_values_and_names() {
    let expected = [
        (0, "UNKNOWN"),
        (1, "PENDING"),
        (2, "RUNNING"),
        (3, "COMPLETE"),
        (4, "FAIL"),
        (5, "RESERVED"),
        (6, "STOPPED"),
        (7, "SUSPENDED"),
    ];
    for (value, name) in expected {
        let state = State::from_value(value).unwrap();
        assert_eq!(state.name(), name);
        assert_eq!(name.parse::<State>().unwrap(), state);
        assert_eq!(serde_json::to_string(&state).unwrap(), value.to_string());
    }
    assert!(State::from_value(8).is_err());
    assert!(serde_json::from_str::<State>("9").is_err());
    assert!("running".parse::<State>().is_err());
}

#[test]
fn job_chain_and_suspended_job_chain() {
    let sjc: SuspendedJobChain = round_trip(json!({
        "requestId": "729ghskd329dhj3sbjnr",
        "jobChain": {
            "requestId": "729ghskd329dhj3sbjnr",
            "jobs": {
                "hw48": {"id": "hw48", "name": "", "type": "test", "state": 6, "retry": 5,
                         "retryWait": "1s", "sequenceId": "hw48", "sequenceRetry": 1}
            },
            "adjacencyList": {},
            "state": 7,
            "finishedJobs": 0
        },
        "totalJobTries": {"hw48": 5},
        "latestRunJobTries": {"hw48": 2},
        "sequenceTries": {"hw48": 1}
    }));
    assert_eq!(sjc.job_chain.jobs["hw48"].state, State::Stopped);
    assert_eq!(sjc.job_chain.state, State::Suspended);
    assert_eq!(sjc.total_job_tries["hw48"], 5);
}

#[test]
fn go_nulls_read_as_empty() {
    // What Spin Cycle's Job Runner sends: a nil adjacency list and nil maps.
    let sjc: SuspendedJobChain = serde_json::from_value(json!({
        "requestId": "r",
        "jobChain": {"requestId": "r", "jobs": null, "adjacencyList": null, "state": 7,
                     "finishedJobs": 0},
        "totalJobTries": null, "latestRunJobTries": null, "sequenceTries": null
    }))
    .unwrap();
    assert!(sjc.job_chain.jobs.is_empty());
    assert!(sjc.job_chain.adjacency_list.is_empty());
    let running: RunningStatus =
        serde_json::from_value(json!({"jobs": null, "requests": null})).unwrap();
    assert_eq!(
        serde_json::to_value(running).unwrap(),
        json!({"jobs": [], "requests": {}})
    );
}

#[test]
fn job_with_every_field() {
    let job: Job = round_trip(json!({
        "id": "a1B2", "name": "lookup", "type": "host/lookup",
        "bytes": "eyJob3N0IjoiZGIxIn0=",
        "state": 1,
        "args": {"host": "db1", "hosts": ["a", "b"]},
        "data": {"n": 1},
        "retry": 2, "retryWait": "5s",
        "sequenceId": "zz99", "sequenceRetry": 1, "sequenceRetryWait": "30s"
    }));
    assert_eq!(job.bytes, br#"{"host":"db1"}"#);
    assert_eq!(job.job_type, "host/lookup");
    assert!(serde_json::from_value::<Job>(json!({"id": "a", "type": "t", "bytes": "!!"})).is_err());
}

#[test]
fn request_with_chain_and_args() {
    let request: Request = round_trip(json!({
        "id": "bafebl1ddiob71ka5bag", "type": "stop-host", "state": 2, "user": "bob",
        "args": [
            {"Pos": 0, "Name": "hostname", "Desc": "", "Type": "required", "Given": true,
             "Default": null, "Value": "db1"},
            {"Pos": 0, "Name": "force", "Desc": "", "Type": "optional", "Given": false,
             "Default": "no", "Value": "no"}
        ],
        "createdAt": "2019-04-02T18:56:50.126312200Z",
        "startedAt": "2019-04-02T18:56:51Z",
        "finishedAt": null,
        "JobChain": {"requestId": "bafebl1ddiob71ka5bag", "jobs": {},
                     "adjacencyList": {"a": ["b"]}, "state": 2, "finishedJobs": 0},
        "totalJobs": 2, "finishedJobs": 0,
        "jrURL": "http://10.0.0.5:32307"
    }));
    assert_eq!(request.args[1].arg_type, RequestArgType::Optional);
    assert_eq!(request.created_at.timestamp_subsec_nanos(), 126_312_200);
    // Without a chain, args or Job Runner the keys are left out.
    let bare: Request = round_trip(json!({
        "id": "x", "type": "t", "state": 1, "user": "", "createdAt": "2020-01-01T00:00:00Z",
        "startedAt": null, "finishedAt": null, "totalJobs": 0, "finishedJobs": 0
    }));
    assert!(bare.job_chain.is_none());
}

#[test]
fn request_spec_list() {
    round_trip::<Vec<RequestSpec>>(json!([{"Name": "stop-host", "Args": [
        {"Pos": 0, "Name": "hostname", "Desc": "Host to stop", "Type": "required",
         "Given": false, "Default": null, "Value": null},
        {"Pos": 0, "Name": "force", "Desc": "Force stop", "Type": "optional",
         "Given": false, "Default": "no", "Value": null}]}]));
}

#[test]
fn running_status_job_log_and_small_bodies() {
    round_trip::<RunningStatus>(json!({
        "jobs": [{"requestId": "r", "jobId": "96i7", "type": "sleep", "name": "wait",
                  "startedAt": 1554231410126312200_i64, "state": 2, "status": "sleeping",
                  "try": 1}],
        "requests": {"r": {"id": "r", "type": "test", "state": 2, "user": "bob",
                           "createdAt": "2019-04-02T18:56:50Z", "startedAt": "2019-04-02T18:56:50Z",
                           "finishedAt": null, "totalJobs": 2, "finishedJobs": 0}}
    }));
    round_trip::<JobLog>(json!({
        "requestId": "r", "jobId": "96i7", "try": 2, "name": "wait", "type": "sleep",
        "startedAt": 1, "finishedAt": 2, "state": 4, "exit": -1,
        "error": "boom", "stdout": "", "stderr": "x"
    }));
    let finish: FinishRequest = round_trip(json!({
        "requestId": "r", "state": 3, "finishedAt": "2020-01-01T00:00:00Z", "finishedJobs": 3
    }));
    assert_eq!(
        finish.finished_at,
        Utc.with_ymd_and_hms(2020, 1, 1, 0, 0, 0).unwrap()
    );
    round_trip::<RequestProgress>(json!({"requestId": "r", "finishedJobs": 7}));
    round_trip::<Error>(json!({"message": "request x not found", "requestId": "",
                               "httpStatus": 404}));
    let framework: Error = serde_json::from_value(json!({"message": "Not Found"})).unwrap();
    assert_eq!(framework.http_status, 0);
}

#[test]
fn create_request_keys_match_case_insensitively() {
    let lower: CreateRequest =
        serde_json::from_value(json!({"type": "stop-host", "args": {"hostname": "db1"}})).unwrap();
    let upper: CreateRequest = serde_json::from_value(
        json!({"Type": "stop-host", "Args": {"hostname": "db1"}, "User": "eve"}),
    )
    .unwrap();
    assert_eq!(lower.request_type, "stop-host");
    assert_eq!(lower.args, upper.args);
    assert_eq!(
        serde_json::to_value(&lower).unwrap(),
        json!({"Type": "stop-host", "Args": {"hostname": "db1"}, "User": ""})
    );
    let empty: CreateRequest = serde_json::from_str("null").unwrap();
    assert_eq!(empty, CreateRequest::default());
    let err = serde_json::from_value::<CreateRequest>(json!({"type": 3})).unwrap_err();
    assert!(
        err.to_string().contains("field Type: expected a string"),
        "{err}"
    );
    let err = serde_json::from_value::<CreateRequest>(json!({"args": ["a"]})).unwrap_err();
    assert!(err.to_string().contains("field Args"), "{err}");
    // Spindle's priority: a whole number, sent only when given.
    let urgent: CreateRequest =
        serde_json::from_value(json!({"type": "failover", "priority": -3})).unwrap();
    assert_eq!(urgent.priority, Some(-3));
    assert_eq!(serde_json::to_value(&urgent).unwrap()["Priority"], -3);
    for bad in [json!(1.5), json!("high"), json!(4_000_000_000_i64)] {
        let err = serde_json::from_value::<CreateRequest>(json!({"priority": bad})).unwrap_err();
        assert!(
            err.to_string()
                .contains("field Priority: expected a whole number from"),
            "{err}"
        );
    }
}

/// The filter a query string reads as, as the API reads it.
fn read_query(query: &str) -> RequestFilter {
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    RequestFilter::from_query(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap()
}

#[test]
fn filter_query_matches_spin_cycle_client() {
    let filter = RequestFilter {
        request_type: Some("request-type".into()),
        user: Some("felixp".into()),
        states: vec![State::Pending, State::Running, State::Suspended],
        args: [
            ("arg1".into(), "val1".into()),
            ("arg2".into(), "val2".into()),
        ]
        .into(),
        since: Some("2020-01-01T12:34:56.789123Z".parse().unwrap()),
        until: Some("2020-01-02T12:34:56.789Z".parse().unwrap()),
        limit: 5,
        offset: 10,
        after: None,
    };
    let query = filter.to_query();
    assert_eq!(
        query,
        "arg=arg1%3Dval1&arg=arg2%3Dval2&limit=5&offset=10&since=2020-01-01T12%3A34%3A56.789123Z&state=PENDING&state=RUNNING&state=SUSPENDED&type=request-type&until=2020-01-02T12%3A34%3A56.789Z&user=felixp"
    );
    assert_eq!(read_query(&query), filter);
}

/// A page's cursor (Spindle's `after=`) goes through the query and back as it was.
#[test]
fn a_cursor_round_trips_and_a_bad_one_is_refused() {
    let cursor = crate::Cursor {
        created_at: "2026-12-05T16:10:00.123456Z".parse().unwrap(),
        request_id: "0a1b2c3d4e5f6g7h8i9j".to_owned(),
    };
    assert_eq!(cursor.token(), "1796487000123456.0a1b2c3d4e5f6g7h8i9j");
    assert_eq!(crate::Cursor::parse(&cursor.token()), Some(cursor.clone()));
    let filter = RequestFilter {
        after: Some(cursor),
        limit: 2,
        ..RequestFilter::default()
    };
    let query = filter.to_query();
    assert!(query.starts_with("after=1796487000123456.0a1b2c3d4e5f6g7h8i9j&limit=2"));
    assert_eq!(read_query(&query), filter);
    for bad in [
        "yesterday",
        "12.",
        ".abc",
        "x.abc",
        "12.a&b",
        "99999999999999999999.a",
    ] {
        let err = RequestFilter::from_query([("after", bad)]).unwrap_err();
        assert!(
            err.to_string().starts_with("invalid 'after' parameter"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn filter_errors_say_what_was_expected() {
    let err = |pairs: &[(&str, &str)]| {
        RequestFilter::from_query(pairs.iter().copied())
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        err(&[("state", "BOGUS")]),
        r#"invalid 'state' parameter: "BOGUS" is not a valid state name"#
    );
    assert_eq!(
        err(&[("arg", "novalue")]),
        "invalid 'arg' parameter: 'novalue' does not match expected format key=value"
    );
    assert!(err(&[("since", "yesterday")]).starts_with("invalid 'since' parameter: \"yesterday\""));
    assert!(
        err(&[("limit", "-1")])
            .starts_with("invalid 'limit' parameter: \"-1\" cannot be parsed to uint")
    );
    // The offset is not even read without a limit.
    assert_eq!(
        RequestFilter::from_query([("offset", "x")]).unwrap(),
        RequestFilter::default()
    );
    assert!(err(&[("limit", "2"), ("offset", "x")]).starts_with("invalid 'offset'"));
}

/// Issue #47: Spin Cycle's `spinc start` reads an arg's `Default` as a string; a list
/// default goes there as its JSON text and, as it is, in Spindle's `DefaultValue`.
#[test]
fn a_default_that_is_not_a_string_is_text_for_spin_cycles_clients() {
    let arg = RequestArg {
        pos: 0,
        name: "hosts".to_owned(),
        desc: String::new(),
        arg_type: RequestArgType::Optional,
        given: false,
        default: serde_json::json!(["db1", "db2"]),
        value: serde_json::Value::Null,
        secret: false,
    };
    let wire = serde_json::to_value(&arg).unwrap();
    assert_eq!(wire["Default"], r#"["db1","db2"]"#);
    assert_eq!(wire["DefaultValue"], serde_json::json!(["db1", "db2"]));
    assert_eq!(serde_json::from_value::<RequestArg>(wire).unwrap(), arg);
    let plain = RequestArg {
        default: serde_json::json!("10ms"),
        ..arg
    };
    let wire = serde_json::to_value(&plain).unwrap();
    assert_eq!(wire["Default"], "10ms");
    assert!(wire.get("DefaultValue").is_none());
    assert_eq!(serde_json::from_value::<RequestArg>(wire).unwrap(), plain);
}
