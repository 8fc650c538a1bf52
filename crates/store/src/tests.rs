//! One backend-agnostic suite, run against SQLite (a temporary file per test) and the
//! real PostgreSQL server (a schema per test; `SPINDLE_TEST_POSTGRES_URL` overrides
//! `postgres://postgres@127.0.0.1:5432/test`), so tests run in parallel.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use proto::{
    AuditEvent, CreateRequest, Fence, FinishRequest, Job, JobChain, JobLog, OutputChunk,
    OutputQuery, Request, RequestArg, RequestArgType, RequestFilter, State, SuspendedJobChain,
};
use serde_json::json;

use crate::sql::Statement;

#[path = "job_lock_tests.rs"]
mod job_lock_tests;
#[path = "trigger_tests.rs"]
mod trigger_tests;
use crate::{Batcher, Error, Finished, Holder, Owner, StartedTry, Store};
use job_lock_tests::jobs_take_locks_in_turn_and_their_request_end_releases_them;
use trigger_tests::a_delivery_sent_again_creates_nothing;

fn at(hour: u32, minute: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 2, hour, minute, 0).unwrap()
}

fn chain(request_id: &str) -> JobChain {
    let jobs: BTreeMap<String, Job> = ["a", "b", "c"]
        .iter()
        .map(|id| {
            let job = Job {
                id: (*id).to_owned(),
                name: format!("job-{id}"),
                job_type: "noop".to_owned(),
                state: State::Pending,
                sequence_id: "a".to_owned(),
                ..Job::default()
            };
            ((*id).to_owned(), job)
        })
        .collect();
    JobChain {
        request_id: request_id.to_owned(),
        jobs,
        adjacency_list: BTreeMap::from([
            ("a".to_owned(), vec!["b".to_owned()]),
            ("b".to_owned(), vec!["c".to_owned()]),
        ]),
        state: State::Pending,
        finished_jobs: 0,
    }
}

/// A new PENDING request with args `host` and `count`.
fn request(
    id: &str,
    request_type: &str,
    user: &str,
    created_at: DateTime<Utc>,
    host: &str,
) -> (Request, CreateRequest) {
    let args = vec![
        RequestArg {
            pos: 0,
            name: "host".to_owned(),
            desc: String::new(),
            arg_type: RequestArgType::Required,
            given: true,
            default: serde_json::Value::Null,
            value: json!(host),
        },
        RequestArg {
            pos: 0,
            name: "count".to_owned(),
            desc: String::new(),
            arg_type: RequestArgType::Optional,
            given: false,
            default: json!("3"),
            value: json!(3),
        },
    ];
    let request = Request {
        id: id.to_owned(),
        request_type: request_type.to_owned(),
        state: State::Pending,
        user: user.to_owned(),
        args,
        created_at,
        started_at: None,
        finished_at: None,
        job_chain: Some(chain(id)),
        total_jobs: 3,
        finished_jobs: 0,
        own_jobs: 3,
        own_finished_jobs: 0,
        jr_url: String::new(),
        error: String::new(),
        paused: false,
        spec_version: String::new(),
    };
    let mut create_args = proto::JobArgs::new();
    create_args.insert("host".to_owned(), json!(host));
    let create = CreateRequest {
        request_type: request_type.to_owned(),
        args: create_args,
        user: user.to_owned(),
        priority: None,
    };
    (request, create)
}

/// A request and its create payload, for tests outside the suite.
pub(crate) fn sample_request(id: &str) -> (Request, CreateRequest) {
    request(id, "deploy", "ann", at(1, 0), "db1")
}

async fn create(store: &dyn Store, id: &str) -> Request {
    let (request, create_request) = request(id, "deploy", "ann", at(1, 0), "db1");
    store
        .create_request(&request, &create_request, None)
        .await
        .unwrap();
    request
}

fn log(request_id: &str, job_id: &str, try_no: u32, state: State) -> JobLog {
    JobLog {
        request_id: request_id.to_owned(),
        job_id: job_id.to_owned(),
        r#try: try_no,
        name: format!("job-{job_id}"),
        job_type: "noop".to_owned(),
        started_at: 1_000 + i64::from(try_no),
        finished_at: 2_000 + i64::from(try_no),
        state,
        exit: if state == State::Complete { 0 } else { -1 },
        error: if state == State::Complete {
            String::new()
        } else {
            "boom".to_owned()
        },
        stdout: "out ✓".to_owned(),
        stderr: String::new(),
    }
}

fn sjc(request_id: &str) -> SuspendedJobChain {
    let mut job_chain = chain(request_id);
    job_chain.jobs.get_mut("a").unwrap().state = State::Complete;
    job_chain.jobs.get_mut("b").unwrap().state = State::Stopped;
    job_chain.finished_jobs = 1;
    job_chain.state = State::Suspended;
    SuspendedJobChain {
        request_id: request_id.to_owned(),
        job_chain,
        total_job_tries: BTreeMap::from([("a".to_owned(), 1), ("b".to_owned(), 2)]),
        latest_run_job_tries: BTreeMap::from([("a".to_owned(), 1), ("b".to_owned(), 2)]),
        sequence_tries: BTreeMap::from([("a".to_owned(), 1)]),
    }
}

async fn running(store: &dyn Store, id: &str) {
    create(store, id).await;
    store
        .start_request(&id.into(), "http://jr1:32307", None, at(1, 1))
        .await
        .unwrap();
}

// ---- the suite ----

async fn create_and_read(store: Arc<dyn Store>, _raw: Raw) {
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

async fn state_changes_are_conditional(store: Arc<dyn Store>, _raw: Raw) {
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

async fn job_log_entries_are_stored_once_per_try(store: Arc<dyn Store>, _raw: Raw) {
    running(&*store, "r1").await;
    let entries = vec![
        log("r1", "a", 1, State::Complete),
        log("r1", "b", 1, State::Fail),
        log("r1", "b", 2, State::Complete),
    ];
    store.insert_job_logs(&entries).await.unwrap();
    // A re-sent batch (the sender retried after a lost answer) adds nothing.
    store.insert_job_logs(&entries[1..]).await.unwrap();
    let stored = store.job_log("r1").await.unwrap();
    assert_eq!(stored, entries);
    assert_eq!(
        store.latest_job_log(&"r1".into(), "b").await.unwrap(),
        entries[2]
    );
    let err = store.latest_job_log(&"r1".into(), "zz").await.unwrap_err();
    assert_eq!(err.to_string(), "job zz of request r1 not found");
    assert!(store.job_log("nope").await.unwrap().is_empty());
    // The chain read back carries each job's latest state and try.
    let chain = store.job_chain("r1").await.unwrap();
    let states: Vec<(State, u32)> = chain.jobs.values().map(|j| (j.state, j.tries)).collect();
    assert_eq!(
        states,
        [
            (State::Complete, 1),
            (State::Complete, 2),
            (State::Pending, 0)
        ]
    );
    // The audit trail, oldest first.
    let event = |at_s: u32, action: &str, user: &str| AuditEvent {
        at: at(3, at_s),
        action: action.to_owned(),
        user: user.to_owned(),
        address: "10.0.0.5".to_owned(),
    };
    store
        .add_audit("r1", &event(2, "stop", "bob"))
        .await
        .unwrap();
    store
        .add_audit("r1", &event(1, "create", "ann"))
        .await
        .unwrap();
    assert_eq!(
        store.audit("r1").await.unwrap(),
        [event(1, "create", "ann"), event(2, "stop", "bob")]
    );
    assert!(store.audit("r2").await.unwrap().is_empty());
    // One job's tries, and every logged job's latest try, for the web UI.
    assert_eq!(store.job_tries_log("r1", "b").await.unwrap(), entries[1..]);
    assert!(store.job_tries_log("r1", "zz").await.unwrap().is_empty());
    let mut latest = store.job_states("r1").await.unwrap();
    latest.sort_by(|x, y| x.job_id.cmp(&y.job_id));
    let latest: Vec<(&str, u32, State)> = latest
        .iter()
        .map(|s| (s.job_id.as_str(), s.tries, s.state))
        .collect();
    assert_eq!(
        latest,
        [("a", 1, State::Complete), ("b", 2, State::Complete)]
    );
    // A grapher's wrapper (a noop named `…_begin` or `…_end`) is told from the own jobs.
    let wrapper = JobLog {
        name: "sequence_deploy_begin".to_owned(),
        ..log("r1", "w", 1, State::Complete)
    };
    store.insert_job_logs(&[wrapper]).await.unwrap();
    let mut latest = store.job_states("r1").await.unwrap();
    latest.sort_by(|x, y| x.job_id.cmp(&y.job_id));
    let wrappers: Vec<(&str, bool)> = latest
        .iter()
        .map(|s| (s.job_id.as_str(), s.wrapper))
        .collect();
    assert_eq!(wrappers, [("a", false), ("b", false), ("w", true)]);
    // Large batches go in several statements of one transaction.
    let many: Vec<JobLog> = (1..=2500).map(|n| log("r1", "c", n, State::Fail)).collect();
    store.insert_job_logs(&many).await.unwrap();
    assert_eq!(
        store.latest_job_log(&"r1".into(), "c").await.unwrap().r#try,
        2500
    );
}

async fn retention_removes_old_finished_requests_in_batches(store: Arc<dyn Store>, _raw: Raw) {
    // r1 and r2 finished long ago (r1 first), r3 just now; r4 still runs.
    for (id, minute) in [("r1", 10), ("r2", 20), ("r3", 50)] {
        running(&*store, id).await;
        store
            .insert_job_logs(&[log(id, "a", 1, State::Complete)])
            .await
            .unwrap();
        store
            .add_audit(
                id,
                &AuditEvent {
                    at: at(1, 2),
                    action: "create".to_owned(),
                    user: "ann".to_owned(),
                    address: String::new(),
                },
            )
            .await
            .unwrap();
        let finish = FinishRequest {
            request_id: id.to_owned(),
            state: if id == "r2" {
                State::Fail
            } else {
                State::Complete
            },
            finished_at: at(2, minute),
            finished_jobs: 1,
            error: String::new(),
            job_logs: Vec::new(),
        };
        store.finish_request(&finish, None).await.unwrap();
    }
    running(&*store, "r4").await;
    let cutoff = at(2, 30);
    let first = store.remove_finished(cutoff, 1).await.unwrap();
    assert_eq!((first.requests, first.job_log_entries), (1, 1));
    assert!(matches!(
        store.get_request("r1", false).await,
        Err(Error::NotFound { .. })
    ));
    assert!(store.job_log("r1").await.unwrap().is_empty());
    assert!(store.audit("r1").await.unwrap().is_empty());
    assert!(
        store.get_request("r2", false).await.is_ok(),
        "one per batch"
    );
    let second = store.remove_finished(cutoff, 10).await.unwrap();
    assert_eq!(second.requests, 1);
    assert_eq!(store.remove_finished(cutoff, 10).await.unwrap().requests, 0);
    // What finished after the cut-off, and what runs, stays whole.
    assert_eq!(store.job_log("r3").await.unwrap().len(), 1);
    assert_eq!(store.audit("r3").await.unwrap().len(), 1);
    assert_eq!(
        store.get_request("r4", false).await.unwrap().state,
        State::Running
    );
    let found = store
        .find_requests(&RequestFilter::default())
        .await
        .unwrap();
    let ids: Vec<&str> = found.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
}

async fn suspend_claim_and_resume(store: Arc<dyn Store>, _raw: Raw) {
    running(&*store, "r1").await;
    store
        .suspend_request(&sjc("r1"), None, at(2, 0))
        .await
        .unwrap();
    assert_eq!(
        store.get_request("r1", false).await.unwrap().state,
        State::Suspended
    );
    assert!(store.running_jr_urls().await.unwrap().is_empty());
    // Suspending again: the request is no longer RUNNING and the chain exists.
    assert!(
        store
            .suspend_request(&sjc("r1"), None, at(2, 1))
            .await
            .is_err()
    );
    create(&*store, "r2").await;
    let err = store
        .suspend_request(&sjc("r2"), None, at(2, 1))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "request r2 in state PENDING, expected state RUNNING"
    );
    assert!(matches!(
        store.suspend_request(&sjc("nope"), None, at(2, 1)).await,
        Err(Error::NotFound { .. })
    ));

    // Claimed once; the claim holds the chain exactly as suspended.
    let claimed = store
        .claim_suspended("rm-a", at(2, 5))
        .await
        .unwrap()
        .expect("r1's chain is claimable");
    assert_eq!(claimed, sjc("r1"));
    assert!(
        store
            .claim_suspended("rm-b", at(2, 5))
            .await
            .unwrap()
            .is_none()
    );
    // Someone else's unclaim does nothing; the owner's makes it claimable again.
    store.unclaim(&"r1".into(), "rm-b").await.unwrap();
    assert!(
        store
            .claim_suspended("rm-b", at(2, 6))
            .await
            .unwrap()
            .is_none()
    );
    store.unclaim(&"r1".into(), "rm-a").await.unwrap();
    assert!(
        store
            .claim_suspended("rm-b", at(2, 6))
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        store
            .resumed(&"r1".into(), "rm-a", "http://jr2:32307", None)
            .await
            .is_err(),
        "not rm-a's claim"
    );
    store
        .resumed(&"r1".into(), "rm-b", "http://jr2:32307", None)
        .await
        .unwrap();
    let resumed = store.get_request("r1", false).await.unwrap();
    assert_eq!(
        (resumed.state, resumed.jr_url.as_str()),
        (State::Running, "http://jr2:32307")
    );
    assert_eq!(store.running_jr_urls().await.unwrap(), ["http://jr2:32307"]);
    assert!(
        store
            .claim_suspended("rm-a", at(2, 7))
            .await
            .unwrap()
            .is_none(),
        "the chain is gone"
    );
}

/// A claimed chain whose request moved on is deleted, and the caller learns the state;
/// a claim not renewed is released, and an old unclaimed chain expires.
async fn resuming_a_request_that_moved_on(store: Arc<dyn Store>, raw: Raw) {
    running(&*store, "r2").await;
    store
        .suspend_request(&sjc("r2"), None, at(2, 0))
        .await
        .unwrap();
    store
        .claim_suspended("rm-a", at(2, 1))
        .await
        .unwrap()
        .unwrap();
    raw.exec("UPDATE requests SET state = 3 WHERE request_id = 'r2'")
        .await;
    let err = store
        .resumed(&"r2".into(), "rm-a", "http://jr9", None)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "request r2 in state COMPLETE, expected state SUSPENDED"
    );
    assert!(
        store
            .claim_suspended("rm-a", at(2, 2))
            .await
            .unwrap()
            .is_none(),
        "the chain was deleted"
    );
    assert_eq!(
        store.get_request("r2", false).await.unwrap().state,
        State::Complete
    );

    running(&*store, "r1").await;
    store
        .suspend_request(&sjc("r1"), None, at(2, 0))
        .await
        .unwrap();
    store
        .claim_suspended("rm-a", at(2, 1))
        .await
        .unwrap()
        .unwrap();
    store.expire_suspended(at(3, 0), at(3, 0)).await.unwrap();
    // Claimed chains do not expire.
    assert_eq!(
        store.get_request("r1", false).await.unwrap().state,
        State::Suspended
    );
    let _ = store.release_stale_claims(at(2, 0)).await.unwrap();
    assert_eq!(
        store
            .release_stale_claims(Utc::now() + Duration::minutes(1))
            .await
            .unwrap(),
        1
    );
    let expired = store.expire_suspended(at(3, 0), at(3, 1)).await.unwrap();
    assert_eq!(expired, ["r1"]);
    let failed = store.get_request("r1", false).await.unwrap();
    assert_eq!(
        (failed.state, failed.finished_at),
        (State::Fail, Some(at(3, 1))),
        "a finish time, unlike Spin Cycle"
    );
    assert!(
        store
            .claim_suspended("rm-a", at(3, 2))
            .await
            .unwrap()
            .is_none()
    );
}

/// Requests of another system's history (`spindle import spincycle`): stored as they
/// ended, once; a suspended one that waits for job types never expires, and its resume
/// clears why it waited.
async fn imported_requests_and_chains_that_wait(store: Arc<dyn Store>, _raw: Raw) {
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

/// storage.md's reference scenario for cleanup (TTL 1 h, claims stale after 5 min).
async fn cleanup_reference_scenario(store: Arc<dyn Store>, raw: Raw) {
    let now = Utc::now();
    // Claims go oldest first: order the chains so that the ones to leave claimed come first.
    let chains = [
        ("old-claimed-s", now - Duration::hours(3)),
        ("stale-s", now - Duration::minutes(50)),
        ("stale-r", now - Duration::minutes(49)),
        ("old-r", now - Duration::hours(2)),
        ("old-s", now - Duration::hours(2)),
        ("fresh", now),
    ];
    for (id, suspended_at) in chains {
        running(&*store, id).await;
        store
            .suspend_request(&sjc(id), None, suspended_at)
            .await
            .unwrap();
    }
    // A Request Manager that went away claimed three of them half an hour ago.
    for _ in 0..3 {
        store
            .claim_suspended("gone", now - Duration::minutes(30))
            .await
            .unwrap()
            .unwrap();
    }
    // Two requests went back to RUNNING while their chains stayed (resumed elsewhere, the
    // chain not yet deleted).
    raw.exec("UPDATE requests SET state = 2 WHERE request_id IN ('stale-r', 'old-r')")
        .await;
    let released = store
        .release_stale_claims(now - Duration::minutes(5))
        .await
        .unwrap();
    assert_eq!(released, 3);
    let mut expired = store
        .expire_suspended(now - Duration::hours(1), now)
        .await
        .unwrap();
    expired.sort();
    assert_eq!(expired, ["old-claimed-s", "old-r", "old-s"]);
    for (id, state) in [
        ("old-s", State::Fail),
        ("old-claimed-s", State::Fail),
        ("old-r", State::Running),
        ("fresh", State::Suspended),
        ("stale-s", State::Suspended),
        ("stale-r", State::Running),
    ] {
        assert_eq!(
            store.get_request(id, false).await.unwrap().state,
            state,
            "{id}"
        );
    }
    let mut left = Vec::new();
    while let Some(claimed) = store.claim_suspended("me", now).await.unwrap() {
        left.push(claimed.request_id);
    }
    left.sort();
    assert_eq!(left, ["fresh", "stale-r", "stale-s"]);
    // A second cleanup changes nothing.
    for id in &left {
        store.unclaim(&id.as_str().into(), "me").await.unwrap();
    }
    assert_eq!(
        store
            .release_stale_claims(now - Duration::minutes(5))
            .await
            .unwrap(),
        0
    );
    assert!(
        store
            .expire_suspended(now - Duration::hours(1), now)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn claims_race_and_each_chain_is_claimed_once(store: Arc<dyn Store>, _raw: Raw) {
    let n = 40;
    for i in 0..n {
        let id = format!("r{i:03}");
        running(&*store, &id).await;
        store
            .suspend_request(&sjc(&id), None, at(2, 0) + Duration::seconds(i))
            .await
            .unwrap();
    }
    let mut tasks = tokio::task::JoinSet::new();
    for host in 0..8 {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            let mut mine = Vec::new();
            loop {
                match store.claim_suspended(&format!("rm-{host}"), at(3, 0)).await {
                    Ok(Some(claimed)) => mine.push(claimed.request_id),
                    Ok(None) => return mine,
                    Err(err) if err.is_transient() => tokio::task::yield_now().await,
                    Err(err) => panic!("claim failed: {err}"),
                }
            }
        });
    }
    let mut all = Vec::new();
    while let Some(mine) = tasks.join_next().await {
        all.extend(mine.unwrap());
    }
    let unique: HashSet<&String> = all.iter().collect();
    assert_eq!(all.len(), n as usize, "every chain claimed");
    assert_eq!(unique.len(), all.len(), "no chain claimed twice");
}

async fn search(store: Arc<dyn Store>, _raw: Raw) {
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
    assert!(
        find(RequestFilter {
            user: Some("nobody".into()),
            ..Default::default()
        })
        .await
        .is_empty()
    );
}

async fn batched_writes_from_many_callers(store: Arc<dyn Store>, _raw: Raw) {
    running(&*store, "r1").await;
    let batcher = Batcher::spawn(Arc::clone(&store), crate::BatchOptions::default());
    let mut tasks = tokio::task::JoinSet::new();
    for job in 0..50 {
        let batcher = batcher.clone();
        tasks.spawn(async move {
            for try_no in 1..=4 {
                let entry = log("r1", &format!("j{job:02}"), try_no, State::Fail);
                batcher.insert_job_logs(vec![entry], None).await.unwrap();
                batcher
                    .update_progress("r1", u64::from(try_no), None)
                    .await
                    .unwrap();
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    // Acknowledged means committed: everything is readable now.
    assert_eq!(store.job_log("r1").await.unwrap().len(), 200);
    assert!((1..=4).contains(&store.get_request("r1", false).await.unwrap().finished_jobs));
    batcher.update_progress("r1", 7, None).await.unwrap();
    assert_eq!(
        store.get_request("r1", false).await.unwrap().finished_jobs,
        7
    );
}

/// Issue #17: one transaction holds many callers' creates, starts, finishes, job log
/// entries and progress, each written as its own method would; what does not apply is
/// left out and said, a refused fence keeps its reports out — and only its own: the
/// owner's reports of the same request in the same batch are written.
async fn a_write_batch_does_what_each_write_would(store: Arc<dyn Store>, _raw: Raw) {
    use crate::{NewRequest, StartRequest, WriteBatch};
    running(&*store, "run1").await;
    running(&*store, "run2").await;
    store
        .insert_try_starts(None, &[try_start("run1", "a", 1)])
        .await
        .unwrap();
    create(&*store, "pend1").await;
    let owner = Fence {
        instance: "i1".to_owned(),
        epoch: 1,
    };
    let stale = Fence {
        instance: "i0".to_owned(),
        epoch: 7,
    };
    let new = |id: &str| {
        let (request, create_request) = request(id, "deploy", "ann", at(1, 0), "db9");
        NewRequest {
            request,
            create_request,
            created: Some(AuditEvent {
                at: at(1, 0),
                action: "create".to_owned(),
                user: "ann".to_owned(),
                address: "127.0.0.1".to_owned(),
            }),
            locks: Vec::new(),
            priority: 0,
            locked: None,
            delivery: None,
            duplicate_of: None,
        }
    };
    let start = |id: &str, fence: Option<&Fence>| StartRequest {
        request_id: id.to_owned(),
        jr_url: "http://jr2".to_owned(),
        owner: fence.cloned(),
        at: at(1, 2),
    };
    let finish = |id: &str, state: State| FinishRequest {
        request_id: id.to_owned(),
        state,
        finished_at: at(1, 6),
        finished_jobs: 3,
        error: String::new(),
        job_logs: Vec::new(),
    };
    let batch = WriteBatch {
        creates: vec![new("new1"), new("new2")],
        starts: vec![start("pend1", Some(&owner)), start("run1", None)],
        finishes: vec![
            (finish("run1", State::Complete), None),
            (finish("pend1", State::Fail), None),
        ],
        logs: vec![
            log("run1", "a", 1, State::Complete),
            log("pend1", "a", 1, State::Complete),
            // run2: an old runner's entry and its owner's, in one batch.
            log("run2", "a", 1, State::Fail),
            log("run2", "b", 1, State::Complete),
        ],
        log_fences: vec![
            (1..2, stale.clone()),
            (2..3, stale.clone()),
            (3..4, owner.clone()),
        ],
        progress: vec![
            ("run1".to_owned(), 2, None),
            ("pend1".to_owned(), 1, Some(stale.clone())),
            ("run2".to_owned(), 5, Some(stale.clone())),
            ("run2".to_owned(), 4, Some(owner.clone())),
            ("nobody".to_owned(), 1, Some(owner.clone())),
        ],
    };
    let written = store.write_batch(&batch).await.unwrap();
    // Both creates stored whole: the request, its args (searchable), its audit event.
    let new1 = store.get_request("new1", true).await.unwrap();
    assert_eq!(new1.state, State::Pending);
    assert_eq!(new1.job_chain.unwrap().jobs.len(), 3);
    assert_eq!(
        store
            .find_requests(&RequestFilter {
                args: BTreeMap::from([("host".to_owned(), "db9".to_owned())]),
                ..Default::default()
            })
            .await
            .unwrap()
            .len(),
        2
    );
    assert_eq!(store.audit("new2").await.unwrap()[0].action, "create");
    // pend1 started at the hand-over's epoch; run1 was not PENDING.
    assert_eq!(written.started, vec![Some(false), None]);
    assert_eq!(store.owner("pend1").await.unwrap().instance, "i1");
    let pend1 = store.get_request("pend1", false).await.unwrap();
    assert_eq!(pend1.started_at, Some(at(1, 2)));
    // Both finished (starts are written before finishes, so pend1 was RUNNING by then);
    // each comes back as it is now.
    let ended: Vec<Option<State>> = written
        .finished
        .iter()
        .map(|r| r.as_ref().map(|r| r.state))
        .collect();
    assert_eq!(ended, vec![Some(State::Complete), Some(State::Fail)]);
    let run1 = written.finished[0].as_ref().unwrap();
    assert_eq!((run1.finished_jobs, run1.finished_at), (3, Some(at(1, 6))));
    // Its started tries went with it.
    assert!(store.try_starts("run1").await.unwrap().is_empty());
    // The stale fence kept pend1's entry and progress out; the unknown request is said.
    assert_eq!(store.job_log("run1").await.unwrap().len(), 1);
    assert!(store.job_log("pend1").await.unwrap().is_empty());
    let refused: Vec<(&str, &str)> = written
        .refused
        .iter()
        .map(|(id, fence, _)| (id.as_str(), fence.instance.as_str()))
        .collect();
    assert_eq!(refused, [("pend1", "i0"), ("run2", "i0"), ("nobody", "i1")]);
    assert!(
        matches!(written.refused[0].2, Error::Fenced(_)),
        "{}",
        written.refused[0].2
    );
    assert!(matches!(written.refused[2].2, Error::NotFound { .. }));
    // The owner of run2 was heard; the old runner was not.
    let run2: Vec<(String, State)> = store
        .job_log("run2")
        .await
        .unwrap()
        .into_iter()
        .map(|entry| (entry.job_id, entry.state))
        .collect();
    assert_eq!(run2, [("b".to_owned(), State::Complete)]);
    assert_eq!(
        store
            .get_request("run2", false)
            .await
            .unwrap()
            .finished_jobs,
        4
    );
    // A batch that fails stores nothing of itself.
    let bad = WriteBatch {
        creates: vec![new("new3"), new("new1")],
        ..WriteBatch::default()
    };
    assert!(store.write_batch(&bad).await.is_err());
    assert!(matches!(
        store.get_request("new3", false).await,
        Err(Error::NotFound { .. })
    ));
}

/// The batcher answers each caller with its own outcome: a refused fence, a start that
/// does not apply, a finish sent twice, and a create whose batch failed (written alone,
/// so only the bad one fails).
async fn the_batcher_answers_each_write_on_its_own(store: Arc<dyn Store>, _raw: Raw) {
    use crate::NewRequest;
    running(&*store, "r1").await;
    let batcher = Batcher::spawn(Arc::clone(&store), crate::BatchOptions::default());
    let stale = Fence {
        instance: "i0".to_owned(),
        epoch: 9,
    };
    let err = batcher
        .insert_job_logs(vec![log("r1", "a", 1, State::Complete)], Some(&stale))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err}");
    let err = batcher
        .update_progress("r1", 2, Some(&stale))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err}");
    assert!(store.job_log("r1").await.unwrap().is_empty());
    // An old runner's report and the owner's, queued together (one batch, as a rule):
    // each is judged by its own fence, so the owner is heard.
    let owner = Fence {
        instance: "i1".to_owned(),
        epoch: 1,
    };
    let (old, own, old_progress, own_progress) = tokio::join!(
        batcher.insert_job_logs(vec![log("r1", "a", 1, State::Fail)], Some(&stale)),
        batcher.insert_job_logs(vec![log("r1", "b", 1, State::Complete)], Some(&owner)),
        batcher.update_progress("r1", 9, Some(&stale)),
        batcher.update_progress("r1", 1, Some(&owner)),
    );
    assert!(matches!(old, Err(Error::Fenced(_))), "{old:?}");
    assert!(
        matches!(old_progress, Err(Error::Fenced(_))),
        "{old_progress:?}"
    );
    own.unwrap();
    own_progress.unwrap();
    let logged: Vec<String> = store
        .job_log("r1")
        .await
        .unwrap()
        .into_iter()
        .map(|entry| entry.job_id)
        .collect();
    assert_eq!(logged, ["b"]);
    assert_eq!(
        store.get_request("r1", false).await.unwrap().finished_jobs,
        1
    );
    let err = batcher
        .start_request(&"r1".into(), "http://jr", None, at(1, 2))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::State {
                actual: State::Running,
                ..
            }
        ),
        "{err}"
    );
    let finish = FinishRequest {
        request_id: "r1".to_owned(),
        state: State::Complete,
        finished_at: at(1, 5),
        finished_jobs: 3,
        error: String::new(),
        job_logs: Vec::new(),
    };
    let (first, now) = batcher.finish_request(&finish, None).await.unwrap();
    assert_eq!(first, Finished::Now);
    assert_eq!(now.unwrap().state, State::Complete);
    let (again, _) = batcher.finish_request(&finish, None).await.unwrap();
    assert_eq!(again, Finished::Already(State::Complete));
    // Two creates queued together, one with the id of a stored request.
    let new = |id: &str| {
        let (request, create_request) = request(id, "deploy", "ann", at(1, 0), "db1");
        NewRequest {
            request,
            create_request,
            created: None,
            locks: Vec::new(),
            priority: 0,
            locked: None,
            delivery: None,
            duplicate_of: None,
        }
    };
    let (good, taken) = tokio::join!(
        batcher.create_request(new("r2")),
        batcher.create_request(new("r1"))
    );
    assert_eq!(good.unwrap().request.id, "r2");
    assert!(matches!(taken, Err(Error::Duplicate(_))), "{taken:?}");
    assert_eq!(
        store.get_request("r2", false).await.unwrap().state,
        State::Pending
    );
}

/// Issue #10: an arg value of any size the API accepts is stored on both backends (a
/// 100 KB list of hosts broke PostgreSQL's B-tree index), and the exact `arg=value`
/// search still finds it through an index.
async fn a_long_arg_value_is_stored_and_found_through_an_index(store: Arc<dyn Store>, raw: Raw) {
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
async fn request_times_stay_in_order(store: Arc<dyn Store>, _raw: Raw) {
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

fn chunk(job_id: &str, try_no: u32, stream: proto::Stream, offset: u64, data: &str) -> OutputChunk {
    OutputChunk {
        seq: 0,
        request_id: "out".to_owned(),
        job_id: job_id.to_owned(),
        r#try: try_no,
        stream,
        offset,
        data: data.to_owned(),
    }
}

async fn output_is_stored_once_read_from_a_cursor_and_cut_past_the_cap(
    store: Arc<dyn Store>,
    _raw: Raw,
) {
    use proto::Stream::{Stderr, Stdout};
    create(&*store, "out").await;
    store
        .insert_output(&[
            chunk("a", 1, Stdout, 0, "héllo "),
            chunk("a", 1, Stderr, 0, "warn\n"),
        ])
        .await
        .unwrap();
    // A re-sent batch is not stored twice.
    store
        .insert_output(&[
            chunk("a", 1, Stdout, 0, "héllo "),
            chunk("a", 1, Stdout, 7, "world\n"),
        ])
        .await
        .unwrap();
    store
        .insert_output(&[chunk("b", 2, Stdout, 0, "b's\n")])
        .await
        .unwrap();
    let all = store.output("out", &OutputQuery::default()).await.unwrap();
    let seen: Vec<(&str, proto::Stream, u64, &str)> = all
        .iter()
        .map(|c| (c.job_id.as_str(), c.stream, c.offset, c.data.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("a", Stdout, 0, "héllo "),
            ("a", Stderr, 0, "warn\n"),
            ("a", Stdout, 7, "world\n"),
            ("b", Stdout, 0, "b's\n"),
        ]
    );
    assert!(all.windows(2).all(|w| w[0].seq < w[1].seq));
    // From a cursor, for one job, a page at a time.
    let after = OutputQuery {
        after: all[0].seq,
        job: Some("a".to_owned()),
        limit: 1,
        ..OutputQuery::default()
    };
    let page = store.output("out", &after).await.unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0].data, "warn\n");
    let none = OutputQuery {
        job: Some("a".to_owned()),
        r#try: Some(2),
        ..OutputQuery::default()
    };
    assert!(store.output("out", &none).await.unwrap().is_empty());
    assert!(
        store
            .output("other", &OutputQuery::default())
            .await
            .unwrap()
            .is_empty()
    );

    // 3 MiB in 64 KiB chunks: the first 512 KiB and the last 512 KiB stay.
    let piece = "x".repeat(64 * 1024);
    let chunks: Vec<OutputChunk> = (0..48u64)
        .map(|n| chunk("big", 1, Stdout, n * 64 * 1024, &piece))
        .collect();
    for batch in chunks.chunks(5) {
        store.insert_output(batch).await.unwrap();
    }
    let big = OutputQuery {
        job: Some("big".to_owned()),
        ..OutputQuery::default()
    };
    let kept: Vec<u64> = store
        .output("out", &big)
        .await
        .unwrap()
        .iter()
        .map(|c| c.offset / (64 * 1024))
        .collect();
    let expected: Vec<u64> = (0..8).chain(40..48).collect();
    assert_eq!(kept, expected);
}

fn registration(instance: &str, url: &str) -> proto::RunnerRegistration {
    proto::RunnerRegistration {
        instance_id: instance.to_owned(),
        url: url.to_owned(),
        host: "host1".to_owned(),
        pid: 4242,
        lease: "10s".to_owned(),
    }
}

async fn runners_register_renew_lapse_and_end(store: Arc<dyn Store>, _raw: Raw) {
    let t0 = at(3, 0);
    let jr1 = store
        .register_runner(&registration("i1", "http://jr1:32307"), t0)
        .await
        .unwrap();
    assert_eq!(
        (jr1.state, jr1.lease.as_str(), jr1.pid, jr1.running_requests),
        (proto::RunnerState::Live, "10s", 4242, 0)
    );
    let again = store
        .register_runner(&registration("i1", "http://jr1:32307"), t0)
        .await
        .unwrap_err();
    assert!(matches!(again, Error::Conflict(_)), "{again}");
    let bad = store
        .register_runner(
            &proto::RunnerRegistration {
                lease: "soon".to_owned(),
                ..registration("i9", "http://x")
            },
            t0,
        )
        .await
        .unwrap_err();
    assert!(bad.to_string().contains("expected such as 10s"), "{bad}");
    store
        .register_runner(&registration("i2", "http://jr2:32307"), t0)
        .await
        .unwrap();

    // Renewed within its lease it stays live; past it, it shows lost.
    let renewed = store
        .renew_runner("i1", t0 + Duration::seconds(5))
        .await
        .unwrap();
    assert_eq!(renewed.renewed_at, t0 + Duration::seconds(5));
    let now = t0 + Duration::seconds(12);
    let states: Vec<(String, proto::RunnerState)> = store
        .job_runners(now, now)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.instance_id, r.state))
        .collect();
    assert_eq!(
        states,
        [
            ("i1".to_owned(), proto::RunnerState::Live),
            ("i2".to_owned(), proto::RunnerState::Lost)
        ]
    );

    // Declaring it lost is a claim: once.
    assert!(store.mark_runner_lost("i2", now).await.unwrap());
    assert!(!store.mark_runner_lost("i2", now).await.unwrap());
    let err = store.renew_runner("i2", now).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::RunnerEnded {
                state: proto::RunnerState::Lost,
                ..
            }
        ),
        "{err}"
    );
    assert!(matches!(
        store.renew_runner("nope", now).await.unwrap_err(),
        Error::NotFound { .. }
    ));

    // A runner that shut down is stopped, and listed only while recent.
    store.end_runner("i1", now).await.unwrap();
    assert!(!store.mark_runner_lost("i1", now).await.unwrap());
    let listed = store.job_runners(now, now).await.unwrap();
    assert_eq!(listed.len(), 2);
    let i1 = listed.iter().find(|r| r.instance_id == "i1").unwrap();
    assert_eq!(
        (i1.state, i1.ended_at),
        (proto::RunnerState::Stopped, Some(now))
    );
    assert!(
        store
            .job_runners(now, now + Duration::seconds(1))
            .await
            .unwrap()
            .is_empty()
    );
}

async fn hand_overs_are_fenced(store: Arc<dyn Store>, _raw: Raw) {
    create(&*store, "r1").await;
    let epoch = store.hand_over(&"r1".into(), State::Pending).await.unwrap();
    // A new request is stored as epoch 1 (its first hand-over); this is the next.
    assert_eq!(epoch, 2);
    let owner = Fence {
        instance: "i1".to_owned(),
        epoch,
    };
    // A hand-over of an older epoch cannot start it.
    let stale = Fence {
        instance: "i0".to_owned(),
        epoch: 0,
    };
    let err = store
        .start_request(&"r1".into(), "http://jr1", Some(&stale), at(1, 1))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err}");
    store
        .start_request(&"r1".into(), "http://jr1", Some(&owner), at(1, 1))
        .await
        .unwrap();
    assert_eq!(
        store.owner("r1").await.unwrap(),
        Owner {
            state: State::Running,
            instance: "i1".to_owned(),
            epoch: 2
        }
    );
    assert!(store.hand_over(&"r1".into(), State::Pending).await.is_err());

    // Another instance, or the same at another epoch, cannot finish it.
    let finish = FinishRequest {
        request_id: "r1".to_owned(),
        state: State::Complete,
        finished_at: at(1, 5),
        finished_jobs: 2,
        error: String::new(),
        job_logs: Vec::new(),
    };
    for fence in [
        Fence {
            instance: "i2".to_owned(),
            epoch: 1,
        },
        Fence {
            instance: "i1".to_owned(),
            epoch: epoch + 1,
        },
    ] {
        let err = store
            .finish_request(&finish, Some(&fence))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Fenced(_)), "{err}");
        assert!(
            err.to_string()
                .contains("is owned by job runner instance i1 at epoch 2"),
            "{err}"
        );
        let err = store
            .suspend_request(&sjc("r1"), Some(&fence), at(1, 5))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Fenced(_)), "{err}");
    }
    assert_eq!(store.owner("r1").await.unwrap().state, State::Running);
    // Nothing was left behind by the refused suspend: the owner may suspend.
    store
        .suspend_request(&sjc("r1"), Some(&owner), at(1, 5))
        .await
        .unwrap();
    let epoch = store
        .hand_over(&"r1".into(), State::Suspended)
        .await
        .unwrap();
    let claimed = store.claim_suspended("rm-a", at(1, 6)).await.unwrap();
    assert!(claimed.is_some());
    let resumed_by = Fence {
        instance: "i3".to_owned(),
        epoch,
    };
    store
        .resumed(&"r1".into(), "rm-a", "http://jr3", Some(&resumed_by))
        .await
        .unwrap();
    let err = store
        .finish_request(&finish, Some(&owner))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err}");
    assert_eq!(
        store
            .finish_request(&finish, Some(&resumed_by))
            .await
            .unwrap(),
        Finished::Now
    );
    // A finished request answers a re-sent finish from its owner as done already.
    assert_eq!(
        store
            .finish_request(&finish, Some(&resumed_by))
            .await
            .unwrap(),
        Finished::Already(State::Complete)
    );
}

fn try_start(request_id: &str, job_id: &str, try_no: u32) -> proto::TryStart {
    proto::TryStart {
        request_id: request_id.to_owned(),
        job_id: job_id.to_owned(),
        r#try: try_no,
        run_try: try_no,
        sequence_try: 1,
        started_at: 5_000 + i64::from(try_no),
    }
}

/// A try that starts while its request is being recovered (after the recovery read the
/// starts) is either refused (the recovery committed first) or makes the recovery fail,
/// to be done again: never stored and missed, which ran the job twice under one try
/// number (seen in the chaos test).
async fn a_try_started_during_a_recovery_is_never_missed(store: Arc<dyn Store>, _raw: Raw) {
    store
        .register_runner(&registration("i1", "http://jr1"), at(1, 0))
        .await
        .unwrap();
    create(&*store, "r1").await;
    let epoch = store.hand_over(&"r1".into(), State::Pending).await.unwrap();
    let owner = Fence {
        instance: "i1".to_owned(),
        epoch,
    };
    store
        .start_request(&"r1".into(), "http://jr1", Some(&owner), at(1, 1))
        .await
        .unwrap();
    // The recovery read the starts: none. Then the runner's start of a arrives.
    assert!(store.try_starts("r1").await.unwrap().is_empty());
    store
        .insert_try_starts(Some(&owner), &[try_start("r1", "a", 1)])
        .await
        .unwrap();
    let err = store
        .recover_request(Holder::Lost("i1"), &[], &sjc("r1"), at(1, 2))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err}");
    assert_eq!(
        store.owner("r1").await.unwrap().state,
        State::Running,
        "nothing changed"
    );
    // Recovered again from what is stored: the start is logged interrupted.
    let interrupted = JobLog {
        error: "interrupted".to_owned(),
        ..log("r1", "a", 1, State::Stopped)
    };
    store
        .recover_request(Holder::Lost("i1"), &[interrupted], &sjc("r1"), at(1, 3))
        .await
        .unwrap();
    // After the recovery, the lost runner's starts are refused.
    let err = store
        .insert_try_starts(Some(&owner), &[try_start("r1", "b", 1)])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err}");
    assert_eq!(store.try_starts("r1").await.unwrap().len(), 1);
}

async fn a_lost_runners_request_is_recovered_once(store: Arc<dyn Store>, _raw: Raw) {
    store
        .register_runner(&registration("i1", "http://jr1"), at(1, 0))
        .await
        .unwrap();
    create(&*store, "r1").await;
    let epoch = store.hand_over(&"r1".into(), State::Pending).await.unwrap();
    let owner = Fence {
        instance: "i1".to_owned(),
        epoch,
    };
    store
        .start_request(&"r1".into(), "http://jr1", Some(&owner), at(1, 1))
        .await
        .unwrap();
    store
        .insert_try_starts(
            Some(&owner),
            &[try_start("r1", "a", 1), try_start("r1", "b", 1)],
        )
        .await
        .unwrap();
    // Sent again: stored once.
    store
        .insert_try_starts(Some(&owner), &[try_start("r1", "b", 1)])
        .await
        .unwrap();
    store
        .insert_job_logs(&[log("r1", "a", 1, State::Complete)])
        .await
        .unwrap();
    let started = store.try_starts("r1").await.unwrap();
    assert_eq!(
        started,
        [
            StartedTry {
                start: try_start("r1", "a", 1),
                instance: "i1".to_owned()
            },
            StartedTry {
                start: try_start("r1", "b", 1),
                instance: "i1".to_owned()
            }
        ]
    );
    assert_eq!(store.owned_requests("i1").await.unwrap(), ["r1"]);
    assert_eq!(
        store.job_runners(at(1, 0), at(1, 0)).await.unwrap()[0].running_requests,
        1
    );

    let interrupted = JobLog {
        error: "interrupted".to_owned(),
        ..log("r1", "b", 1, State::Stopped)
    };
    store
        .recover_request(
            Holder::Lost("i1"),
            std::slice::from_ref(&interrupted),
            &sjc("r1"),
            at(1, 2),
        )
        .await
        .unwrap();
    // A second recovery (another Request Manager) finds it moved on.
    let err = store
        .recover_request(Holder::Lost("i1"), &[interrupted], &sjc("r1"), at(1, 2))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Fenced(_) | Error::State { .. }),
        "{err}"
    );
    let now = store.owner("r1").await.unwrap();
    assert_eq!(
        (now.state, now.instance.as_str(), now.epoch),
        (State::Suspended, "", epoch + 1)
    );
    // The lost instance can report nothing more.
    let err = store
        .suspend_request(&sjc("r1"), Some(&owner), at(1, 3))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err}");
    let logs = store.job_log("r1").await.unwrap();
    assert_eq!(
        logs.iter()
            .map(|l| (l.job_id.as_str(), l.r#try, l.state))
            .collect::<Vec<_>>(),
        [("a", 1, State::Complete), ("b", 1, State::Stopped)]
    );
    assert!(
        store
            .claim_suspended("rm-a", at(1, 4))
            .await
            .unwrap()
            .is_some()
    );

    // Once finished, its started tries are forgotten.
    let epoch = store
        .hand_over(&"r1".into(), State::Suspended)
        .await
        .unwrap();
    let next = Fence {
        instance: "i2".to_owned(),
        epoch,
    };
    store
        .resumed(&"r1".into(), "rm-a", "http://jr2", Some(&next))
        .await
        .unwrap();
    store
        .finish_request(
            &FinishRequest {
                request_id: "r1".to_owned(),
                state: State::Complete,
                finished_at: at(1, 5),
                finished_jobs: 2,
                error: String::new(),
                job_logs: Vec::new(),
            },
            Some(&next),
        )
        .await
        .unwrap();
    assert!(store.try_starts("r1").await.unwrap().is_empty());
}

/// Counts by state, and the timing decorator: every operation it passes on is timed
/// under its name, failures included.
async fn requests_are_counted_by_state_and_operations_timed(store: Arc<dyn Store>, _raw: Raw) {
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
    assert_eq!(store.count_requests(&all).await.unwrap(), []);
    create(&*store, "r1").await;
    create(&*store, "r2").await;
    running(&*store, "r3").await;
    assert_eq!(
        store.count_requests(&all).await.unwrap(),
        [(State::Pending, 2), (State::Running, 1)]
    );
    assert!(store.get_request("nope", false).await.is_err());
    let seen = seen.0.lock().unwrap().clone();
    assert_eq!(seen.first(), Some(&("count_requests", true)));
    assert_eq!(
        seen.iter()
            .filter(|(op, _)| *op == "create_request")
            .count(),
        3
    );
    assert_eq!(seen.last(), Some(&("get_request", false)));
}

/// A PENDING request handed over (epoch 2) to a runner that began it, never marked
/// RUNNING: taken back only at that epoch, once.
async fn an_unstarted_hand_over_is_taken_back_at_its_epoch(store: Arc<dyn Store>, _raw: Raw) {
    create(&*store, "r1").await;
    let epoch = store.hand_over(&"r1".into(), State::Pending).await.unwrap();
    let interrupted = JobLog {
        error: "interrupted".to_owned(),
        ..log("r1", "a", 1, State::Stopped)
    };
    // Handed over again since (another Request Manager): refused as fenced.
    let err = store
        .recover_request(
            Holder::Unstarted(epoch - 1),
            std::slice::from_ref(&interrupted),
            &sjc("r1"),
            at(1, 2),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err}");
    assert_eq!(store.owner("r1").await.unwrap().state, State::Pending);
    store
        .recover_request(
            Holder::Unstarted(epoch),
            std::slice::from_ref(&interrupted),
            &sjc("r1"),
            at(1, 2),
        )
        .await
        .unwrap();
    let now = store.owner("r1").await.unwrap();
    assert_eq!((now.state, now.epoch), (State::Suspended, epoch + 1));
    assert_eq!(store.job_log("r1").await.unwrap().len(), 1);
    // Once moved on, a second take-back finds it so.
    let err = store
        .recover_request(Holder::Unstarted(epoch + 1), &[], &sjc("r1"), at(1, 3))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::State { .. }), "{err}");
    assert!(
        store
            .claim_suspended("rm-a", at(1, 4))
            .await
            .unwrap()
            .is_some()
    );
}

/// `spindle retry`: a finished request goes back to SUSPENDED only from the state it
/// finished in, with its finish time and reason cleared and a new epoch.
async fn a_finished_request_is_retried_from_its_final_state_only(store: Arc<dyn Store>, _raw: Raw) {
    running(&*store, "r1").await;
    let failed = FinishRequest {
        request_id: "r1".to_owned(),
        state: State::Fail,
        finished_at: at(1, 5),
        finished_jobs: 2,
        error: "its deadline passed".to_owned(),
        job_logs: Vec::new(),
    };
    store.finish_request(&failed, None).await.unwrap();
    let before = store.owner("r1").await.unwrap().epoch;
    let err = store
        .recover_request(Holder::Finished(State::Stopped), &[], &sjc("r1"), at(1, 6))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::State { .. }), "{err}");
    store
        .recover_request(Holder::Finished(State::Fail), &[], &sjc("r1"), at(1, 6))
        .await
        .unwrap();
    let request = store.get_request("r1", false).await.unwrap();
    assert_eq!(
        (
            request.state,
            request.finished_at,
            request.error.as_str(),
            request.finished_jobs
        ),
        (State::Suspended, None, "", 1)
    );
    assert_eq!(store.owner("r1").await.unwrap().epoch, before + 1);
    let claimed = store.claim_suspended("rm-a", at(1, 7)).await.unwrap();
    assert_eq!(claimed, Some(sjc("r1")));
}

/// Spec history: a set of spec files is stored once by its version, and a request keeps
/// the version it was built from.
async fn spec_versions_are_stored_once_and_requests_keep_theirs(store: Arc<dyn Store>, _raw: Raw) {
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
async fn approval_answers_are_kept_once_per_job(store: Arc<dyn Store>, _raw: Raw) {
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
async fn schedule_runs_are_claimed_once(store: Arc<dyn Store>, _raw: Raw) {
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

async fn the_ended_among_many_are_found_in_one_read(store: Arc<dyn Store>, _raw: Raw) {
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
async fn a_pending_request_says_why_it_waits_and_database_errors_their_cause(
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

/// Issue #34: a request's lock claims are taken together or queued (by priority, then
/// creation), are held up to each lock's limit, and are released by the request's end.
async fn locks_are_taken_in_queue_order_and_released_at_the_end(store: Arc<dyn Store>, _raw: Raw) {
    use crate::{LockClaim, LockTake};
    let claim = |key: &str, limit: u32| LockClaim {
        name: "cluster-ops".to_owned(),
        key: key.to_owned(),
        limit,
        fair_key: String::new(),
    };
    for (n, id) in ["r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9"]
        .iter()
        .enumerate()
    {
        let (request, create) = request(id, "failover", "ann", at(1, n as u32), "db1");
        store.create_request(&request, &create, None).await.unwrap();
    }
    let take = async |id: &str, claims: &[LockClaim], priority: i32| {
        store
            .take_locks(id, claims, priority, at(2, 0))
            .await
            .unwrap()
    };
    let waits = |taken: LockTake| -> (Vec<String>, u32) {
        match taken {
            LockTake::Waiting(wait) => (
                wait.holders.into_iter().map(|h| h.request_id).collect(),
                wait.ahead,
            ),
            LockTake::Granted => panic!("granted, expected to wait"),
        }
    };
    let db7 = [claim("db-7", 1)];
    assert_eq!(take("r1", &db7, 0).await, LockTake::Granted);
    assert_eq!(
        take("r1", &db7, 0).await,
        LockTake::Granted,
        "taken again: held already"
    );
    assert_eq!(waits(take("r2", &db7, 0).await), (vec!["r1".to_owned()], 0));
    assert_eq!(waits(take("r3", &db7, 0).await), (vec!["r1".to_owned()], 1));
    // Another key is another lock.
    assert_eq!(take("r4", &[claim("db-8", 1)], 0).await, LockTake::Granted);
    // All or none: r5 could have db-9 but not db-7, so it holds neither, and keeps its
    // place in both queues: r6, queued after it, waits for db-9 too.
    let both = [claim("db-9", 1), claim("db-7", 1)];
    assert_eq!(
        waits(take("r5", &both, 0).await),
        (vec!["r1".to_owned()], 2)
    );
    assert_eq!(waits(take("r6", &[claim("db-9", 1)], 0).await), (vec![], 1));
    // The listing: each lock's holders, then its queue.
    let listed: Vec<(String, String, bool)> = store
        .lock_claims()
        .await
        .unwrap()
        .into_iter()
        .map(|(claim, holder)| (claim.key, holder.request_id, holder.held_since.is_some()))
        .collect();
    let row = |key: &str, id: &str, held: bool| (key.to_owned(), id.to_owned(), held);
    assert_eq!(
        listed,
        [
            row("db-7", "r1", true),
            row("db-7", "r2", false),
            row("db-7", "r3", false),
            row("db-7", "r5", false),
            row("db-8", "r4", true),
            row("db-9", "r5", false),
            row("db-9", "r6", false),
        ]
    );
    // What to offer: none while db-7 is full and r5 heads db-9's queue (r6 behind it).
    assert_eq!(store.lock_waiters(10).await.unwrap(), ["r5"]);
    // r1 ends: its lock is released by the same UPDATE; r2 is served before r3.
    store.fail_pending("r1", at(3, 0)).await.unwrap();
    assert_eq!(waits(take("r3", &db7, 0).await), (vec![], 1));
    assert_eq!(take("r2", &db7, 0).await, LockTake::Granted);
    assert!(matches!(
        store.take_locks("r1", &db7, 0, at(3, 1)).await,
        Err(Error::State { .. })
    ));
    // A limit of 2: two hold it, the third waits.
    for (id, granted) in [("r7", true), ("r8", true), ("r9", false)] {
        let api = [LockClaim {
            name: "api".to_owned(),
            key: String::new(),
            limit: 2,
            fair_key: String::new(),
        }];
        assert_eq!(
            take(id, &api, 0).await == LockTake::Granted,
            granted,
            "{id}"
        );
    }
    // A higher priority goes before the queue: r11 (priority 9, the last to come) is
    // served before r3, r5 and r10 when r2 ends.
    for id in ["r10", "r11"] {
        let (request, create) = request(id, "failover", "bob", at(5, 0), "db1");
        store.create_request(&request, &create, None).await.unwrap();
    }
    assert_eq!(
        waits(take("r10", &db7, 0).await),
        (vec!["r2".to_owned()], 2)
    );
    assert_eq!(
        waits(take("r11", &db7, 9).await),
        (vec!["r2".to_owned()], 0)
    );
    store.fail_pending("r2", at(5, 1)).await.unwrap();
    assert_eq!(waits(take("r3", &db7, 0).await), (vec![], 1));
    assert_eq!(take("r11", &db7, 9).await, LockTake::Granted);
}

/// Issue #34: a fair lock's waiters (one priority) are served round robin over their
/// fairness keys: one caller's many requests do not starve another's one.
async fn a_fair_lock_serves_its_callers_round_robin(store: Arc<dyn Store>, _raw: Raw) {
    use crate::{LockClaim, LockTake};
    let claim = |caller: &str| {
        [LockClaim {
            name: "api".to_owned(),
            key: String::new(),
            limit: 1,
            fair_key: caller.to_owned(),
        }]
    };
    let ids = ["h", "big1", "big2", "big3", "small1", "big4"];
    for (n, id) in ids.iter().enumerate() {
        let (request, create) = request(id, "call", "ann", at(1, n as u32), "db1");
        store.create_request(&request, &create, None).await.unwrap();
    }
    let take = async |id: &str, caller: &str| {
        store
            .take_locks(id, &claim(caller), 0, at(2, 0))
            .await
            .unwrap()
    };
    assert_eq!(take("h", "ops").await, LockTake::Granted);
    for id in ["big1", "big2", "big3", "small1", "big4"] {
        let caller = if id.starts_with("big") {
            "big"
        } else {
            "small"
        };
        assert!(matches!(take(id, caller).await, LockTake::Waiting(_)));
    }
    // small1, queued fourth, is second: each caller's first, then each one's second, …
    let waiting: Vec<String> = store
        .lock_claims()
        .await
        .unwrap()
        .into_iter()
        .filter(|(_, h)| h.held_since.is_none())
        .map(|(_, h)| h.request_id)
        .collect();
    assert_eq!(waiting, ["big1", "small1", "big2", "big3", "big4"]);
    match take("small1", "small").await {
        LockTake::Waiting(wait) => assert_eq!(wait.ahead, 1),
        LockTake::Granted => panic!("granted while held"),
    }
    assert!(
        store.lock_waiters(10).await.unwrap().is_empty(),
        "no room while held"
    );
    store.fail_pending("h", at(3, 0)).await.unwrap();
    assert_eq!(store.lock_waiters(10).await.unwrap(), ["big1"]);
    assert_eq!(take("big1", "big").await, LockTake::Granted);
    store.fail_pending("big1", at(3, 1)).await.unwrap();
    assert!(matches!(take("big2", "big").await, LockTake::Waiting(_)));
    assert_eq!(store.lock_waiters(10).await.unwrap(), ["small1"]);
    assert_eq!(take("small1", "small").await, LockTake::Granted);
}

macro_rules! suite {
    ($($test:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $test() {
                    let dir = tempfile::tempdir().unwrap();
                    let store = crate::SqliteStore::open(&dir.path().join("spindle.db")).await.unwrap();
                    let raw = super::Raw::Sqlite(store.pool.clone());
                    super::$test(std::sync::Arc::new(store), raw).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    let Some((store, schema)) = super::postgres_store().await else {
                        return;
                    };
                    let raw = super::Raw::Postgres(store.pool.clone());
                    super::$test(std::sync::Arc::new(store), raw).await;
                    super::drop_schema(&schema).await;
                }
            )*
        }
        mod mysql {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    let Some((store, database)) = super::mysql_store().await else {
                        return;
                    };
                    let raw = super::Raw::Mysql(store.pool.clone());
                    super::$test(std::sync::Arc::new(store), raw).await;
                    super::drop_mysql_database(&database).await;
                }
            )*
        }
    };
}

suite!(
    create_and_read,
    a_pending_request_says_why_it_waits_and_database_errors_their_cause,
    state_changes_are_conditional,
    job_log_entries_are_stored_once_per_try,
    retention_removes_old_finished_requests_in_batches,
    suspend_claim_and_resume,
    resuming_a_request_that_moved_on,
    cleanup_reference_scenario,
    imported_requests_and_chains_that_wait,
    claims_race_and_each_chain_is_claimed_once,
    search,
    batched_writes_from_many_callers,
    a_write_batch_does_what_each_write_would,
    the_batcher_answers_each_write_on_its_own,
    a_long_arg_value_is_stored_and_found_through_an_index,
    request_times_stay_in_order,
    output_is_stored_once_read_from_a_cursor_and_cut_past_the_cap,
    runners_register_renew_lapse_and_end,
    hand_overs_are_fenced,
    a_lost_runners_request_is_recovered_once,
    a_try_started_during_a_recovery_is_never_missed,
    an_unstarted_hand_over_is_taken_back_at_its_epoch,
    a_finished_request_is_retried_from_its_final_state_only,
    spec_versions_are_stored_once_and_requests_keep_theirs,
    approval_answers_are_kept_once_per_job,
    schedule_runs_are_claimed_once,
    requests_are_counted_by_state_and_operations_timed,
    the_ended_among_many_are_found_in_one_read,
    locks_are_taken_in_queue_order_and_released_at_the_end,
    a_fair_lock_serves_its_callers_round_robin,
    jobs_take_locks_in_turn_and_their_request_end_releases_them,
    a_delivery_sent_again_creates_nothing,
);

fn postgres_url() -> String {
    std::env::var("SPINDLE_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// Whether the PostgreSQL tests run: when `SPINDLE_TEST_POSTGRES_URL` is set or the
/// default server answers. `SPINDLE_TEST_POSTGRES=required` (CI) makes a missing server
/// a failure; otherwise the tests skip, and one line says so.
fn postgres_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        let required = std::env::var("SPINDLE_TEST_POSTGRES").is_ok_and(|v| v == "required");
        if std::env::var_os("SPINDLE_TEST_POSTGRES_URL").is_some() || required {
            return true;
        }
        let answers = std::net::TcpStream::connect_timeout(
            &std::net::SocketAddr::from(([127, 0, 0, 1], 5432)),
            std::time::Duration::from_secs(2),
        )
        .is_ok();
        if !answers {
            // Straight to stderr: the test harness captures `eprintln!`.
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                b"store: PostgreSQL tests skipped: no server at 127.0.0.1:5432 (set SPINDLE_TEST_POSTGRES_URL, or SPINDLE_TEST_POSTGRES=required to fail instead)\n",
            );
        }
        answers
    })
}

/// A store in a new schema of the test database, or `None` when the PostgreSQL tests
/// are skipped.
async fn postgres_store() -> Option<(crate::PostgresStore, String)> {
    if !postgres_available() {
        return None;
    }
    let schema = format!("spindle_test_{}", unique_suffix());
    let admin = sqlx::PgPool::connect(&postgres_url())
        .await
        .expect("the test PostgreSQL server answers");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA \"{schema}\"")))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let store = crate::PostgresStore::connect(&postgres_url(), Some(&schema))
        .await
        .unwrap();
    Some((store, schema))
}

async fn drop_schema(schema: &str) {
    if let Ok(admin) = sqlx::PgPool::connect(&postgres_url()).await {
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA \"{schema}\" CASCADE"
        )))
        .execute(&admin)
        .await;
        admin.close().await;
    }
}

fn mysql_url() -> String {
    std::env::var("SPINDLE_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_owned())
}

/// Whether the MySQL tests run: when `SPINDLE_TEST_MYSQL_URL` is set or the default
/// server answers. `SPINDLE_TEST_MYSQL=required` (CI) makes a missing server a failure;
/// otherwise the tests skip, and one line says so.
fn mysql_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        let required = std::env::var("SPINDLE_TEST_MYSQL").is_ok_and(|v| v == "required");
        if std::env::var_os("SPINDLE_TEST_MYSQL_URL").is_some() || required {
            return true;
        }
        let answers = std::net::TcpStream::connect_timeout(
            &std::net::SocketAddr::from(([127, 0, 0, 1], 3306)),
            std::time::Duration::from_secs(2),
        )
        .is_ok();
        if !answers {
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                b"store: MySQL tests skipped: no server at 127.0.0.1:3306 (set SPINDLE_TEST_MYSQL_URL, or SPINDLE_TEST_MYSQL=required to fail instead)\n",
            );
        }
        answers
    })
}

/// `url` (of the test server) naming `database` instead of its own.
fn mysql_url_of(database: &str) -> String {
    let url = mysql_url();
    let (server, _) = url.rsplit_once('/').expect("a MySQL URL names a database");
    format!("{server}/{database}")
}

/// A store in a new database of the test server, or `None` when the MySQL tests are
/// skipped.
async fn mysql_store() -> Option<(crate::MysqlStore, String)> {
    if !mysql_available() {
        return None;
    }
    let database = format!("spindle_test_{}", unique_suffix());
    let admin = sqlx::MySqlPool::connect(&mysql_url())
        .await
        .expect("the test MySQL server answers");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{database}`")))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let store = crate::MysqlStore::connect(&mysql_url_of(&database))
        .await
        .unwrap();
    Some((store, database))
}

async fn drop_mysql_database(database: &str) {
    if let Ok(admin) = sqlx::MySqlPool::connect(&mysql_url()).await {
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS `{database}`"
        )))
        .execute(&admin)
        .await;
        admin.close().await;
    }
}

/// Unique per process and call: pid, time and a counter.
fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{}_{}_{}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Direct SQL on a test's database, for states the Store API cannot produce.
#[derive(Clone)]
enum Raw {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
    Mysql(sqlx::MySqlPool),
}

impl Raw {
    /// The plan of the arg value search (as `find_requests` writes it), with sequential
    /// scans discouraged so that a small table shows whether an index can serve it.
    async fn arg_search_plan(&self, value: &str) -> String {
        use crate::Backend as _;
        const SELECT: &str = "SELECT request_id FROM request_args WHERE name = 'hosts' AND ";
        match self {
            Raw::Sqlite(pool) => {
                let mut query = Statement::build(format!("EXPLAIN QUERY PLAN {SELECT}"));
                sqlx::Sqlite::push_value_match(&mut query, value.to_owned());
                let rows = query.query::<sqlx::Sqlite>().fetch_all(pool).await.unwrap();
                rows.iter()
                    .map(|row| sqlx::Row::get::<String, _>(row, "detail"))
                    .collect::<Vec<_>>()
                    .join("; ")
            }
            Raw::Postgres(pool) => {
                let mut tx = pool.begin().await.unwrap();
                sqlx::query("SET LOCAL enable_seqscan = off")
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                let mut query = Statement::build(format!("EXPLAIN {SELECT}"));
                sqlx::Postgres::push_value_match(&mut query, value.to_owned());
                let rows = query
                    .query::<sqlx::Postgres>()
                    .fetch_all(&mut *tx)
                    .await
                    .unwrap();
                rows.iter()
                    .map(|row| sqlx::Row::get::<String, _>(row, 0))
                    .collect::<Vec<_>>()
                    .join("; ")
            }
            // The keys the optimizer could use (on a small table it may scan instead).
            Raw::Mysql(pool) => {
                let mut query = Statement::build(format!("EXPLAIN {SELECT}"));
                sqlx::MySql::push_value_match(&mut query, value.to_owned());
                let rows = query.query::<sqlx::MySql>().fetch_all(pool).await.unwrap();
                rows.iter()
                    .map(|row| {
                        sqlx::Row::get::<Option<String>, _>(row, "possible_keys")
                            .unwrap_or_default()
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            }
        }
    }

    async fn exec(&self, sql: &'static str) {
        match self {
            Raw::Sqlite(pool) => sqlx::query(sql).execute(pool).await.map(|_| ()),
            Raw::Postgres(pool) => sqlx::query(sql).execute(pool).await.map(|_| ()),
            Raw::Mysql(pool) => sqlx::query(sql).execute(pool).await.map(|_| ()),
        }
        .expect("test SQL runs");
    }
}

#[tokio::test]
async fn postgres_migrates_an_empty_schema_once() {
    let Some((store, schema)) = postgres_store().await else {
        return;
    };
    let migrations = crate::postgres::migrator().iter().count() as i64;
    assert_eq!(migrations, 14);
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations")
        .fetch_one(&store.pool)
        .await
        .unwrap();
    assert_eq!(n, migrations);
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name",
    )
    .fetch_all(&store.pool)
    .await
    .unwrap();
    assert_eq!(
        tables,
        [
            "_sqlx_migrations",
            "approvals",
            "job_log",
            "job_output",
            "job_runners",
            "job_tries",
            "lock_keys",
            "lock_turns",
            "request_archives",
            "request_args",
            "request_audit",
            "request_locks",
            "requests",
            "schedule_runs",
            "spec_versions",
            "suspended_job_chains",
            "trigger_deliveries"
        ]
    );
    let again = crate::PostgresStore::connect(&postgres_url(), Some(&schema))
        .await
        .unwrap();
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations")
        .fetch_one(&again.pool)
        .await
        .unwrap();
    assert_eq!(n, migrations);
    drop_schema(&schema).await;
}

#[tokio::test]
async fn a_database_that_is_down_is_a_retryable_error() {
    // Nothing listens on port 1.
    let err = crate::PostgresStore::connect_with_timeout(
        "postgres://postgres@127.0.0.1:1/test",
        None,
        std::time::Duration::from_millis(300),
    )
    .await
    .unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert!(err.to_string().starts_with("database unavailable"), "{err}");
    let err = crate::MysqlStore::connect_with_timeout(
        "mysql://root@127.0.0.1:1/test",
        std::time::Duration::from_millis(300),
    )
    .await
    .unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    let err = crate::open("oracle://scott:tiger@127.0.0.1/test")
        .await
        .err()
        .unwrap();
    let text = err.to_string();
    assert!(
        text.contains("expected sqlite://PATH, postgres://") && text.contains("mysql://"),
        "{text}"
    );
    assert!(
        text.contains("scott:****@") && !text.contains("tiger"),
        "{text}"
    );
}

/// MySQL runs DDL outside transactions: a migration cut off halfway (its Request Manager
/// killed during its first start) is run again by the next start, not left to refuse it.
#[tokio::test]
async fn mysql_migrates_once_and_runs_an_interrupted_migration_again() {
    let Some((store, database)) = mysql_store().await else {
        return;
    };
    let migrations = crate::mysql::migrator().iter().count() as i64;
    let count = async |pool: &sqlx::MySqlPool| -> i64 {
        sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations WHERE success = TRUE")
            .fetch_one(pool)
            .await
            .unwrap()
    };
    assert_eq!(count(&store.pool).await, migrations);
    // As a process killed after the first tables and before the mark of success.
    sqlx::query("UPDATE _sqlx_migrations SET success = FALSE")
        .execute(&store.pool)
        .await
        .unwrap();
    sqlx::query("DROP TABLE schedule_runs")
        .execute(&store.pool)
        .await
        .unwrap();
    let again = crate::MysqlStore::connect(&mysql_url_of(&database))
        .await
        .unwrap();
    assert_eq!(count(&again.pool).await, migrations);
    let due = at(3, 0);
    assert!(
        again
            .claim_schedule_run("nightly", due, "rm-1")
            .await
            .unwrap()
    );
    assert!(
        !again
            .claim_schedule_run("nightly", due, "rm-2")
            .await
            .unwrap()
    );
    let third = crate::MysqlStore::connect(&mysql_url_of(&database))
        .await
        .unwrap();
    assert_eq!(count(&third.pool).await, migrations);
    drop_mysql_database(&database).await;
}
