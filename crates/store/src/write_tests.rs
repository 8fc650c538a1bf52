//! The store suite, on every backend: what runners and the group commit write — job
//! log entries, output, batches — and what retention removes.

use super::recovery_tests::try_start;
use super::*;
use crate::LoggedTry;

pub(super) async fn job_log_entries_are_stored_once_per_try(store: Arc<dyn Store>, _raw: Raw) {
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
    // Every entry without its texts, for a request's elements.
    let mut tries = store.logged_tries("r1").await.unwrap();
    tries.sort_by(|x, y| (&x.job_id, x.r#try).cmp(&(&y.job_id, y.r#try)));
    let without_texts: Vec<LoggedTry> = entries
        .iter()
        .map(|entry| LoggedTry {
            job_id: entry.job_id.clone(),
            r#try: entry.r#try,
            state: entry.state,
            started_at: entry.started_at,
            finished_at: entry.finished_at,
        })
        .collect();
    assert_eq!(tries, without_texts);
    assert!(store.logged_tries("nope").await.unwrap().is_empty());
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

pub(super) async fn retention_removes_old_finished_requests_in_batches(
    store: Arc<dyn Store>,
    _raw: Raw,
) {
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

/// storage.md's reference scenario for cleanup (TTL 1 h, claims stale after 5 min).
pub(super) async fn cleanup_reference_scenario(store: Arc<dyn Store>, raw: Raw) {
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

pub(super) async fn batched_writes_from_many_callers(store: Arc<dyn Store>, _raw: Raw) {
    running(&*store, "r1").await;
    let batcher = Batcher::spawn(Arc::clone(&store), crate::BatchOptions::default());
    assert!(
        batcher.is_running(),
        "its writer runs while a clone is held"
    );
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
pub(super) async fn a_write_batch_does_what_each_write_would(store: Arc<dyn Store>, _raw: Raw) {
    use crate::{NewRequest, ResumeRecord, StartRequest, WriteBatch};
    running(&*store, "run1").await;
    running(&*store, "run2").await;
    // Three suspended chains, the two oldest claimed in one transaction.
    for (n, id) in ["sus1", "sus2", "sus3"].into_iter().enumerate() {
        running(&*store, id).await;
        store
            .suspend_request(&sjc(id), None, at(1, 3 + n as u32))
            .await
            .unwrap();
    }
    let claimed: Vec<String> = store
        .claim_suspended_many("rm1", at(1, 7), 2)
        .await
        .unwrap()
        .into_iter()
        .map(|chain| chain.request_id)
        .collect();
    assert_eq!(claimed, ["sus1", "sus2"]);
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
            secrets: Vec::new(),
            chain_json: None,
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
    // new2's chain comes with its JSON made already (as the Request Manager makes a new
    // chain's): that text is stored, not the chain written again.
    let mut new2 = new("new2");
    let made = serde_json::to_string_pretty(new2.request.job_chain.as_ref().unwrap()).unwrap();
    new2.chain_json = Some(made.as_str().into());
    let batch = WriteBatch {
        creates: vec![new("new1"), new2],
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
        // sus1 and sus2 resumed by the one that claimed them; sus3 is claimed by none.
        resumes: ["sus1", "sus3", "sus2"]
            .into_iter()
            .map(|id| ResumeRecord {
                request_id: id.to_owned(),
                host: "rm1".to_owned(),
                jr_url: "http://jr3".to_owned(),
                owner: Some(Fence {
                    instance: "i3".to_owned(),
                    epoch: 1,
                }),
            })
            .collect(),
        hand_overs: Vec::new(),
        suspends: Vec::new(),
    };
    let written = store.write_batch(&batch).await.unwrap();
    assert!(matches!(written.resumed[0], Ok(false)));
    assert!(
        matches!(&written.resumed[1], Err(Error::Conflict(text)) if text.contains("not claimed by rm1")),
        "{:?}",
        written.resumed[1]
    );
    assert!(matches!(written.resumed[2], Ok(false)));
    for (id, state) in [
        ("sus1", State::Running),
        ("sus2", State::Running),
        ("sus3", State::Suspended),
    ] {
        let request = store.get_request(id, false).await.unwrap();
        assert_eq!(request.state, state, "{id}");
    }
    assert_eq!(store.owner("sus2").await.unwrap().instance, "i3");
    let left = store.claim_suspended("rm2", at(1, 8)).await.unwrap();
    assert_eq!(left.map(|chain| chain.request_id).as_deref(), Some("sus3"));
    // Both creates stored whole: the request, its args (searchable), its audit event.
    let new1 = store.get_request("new1", true).await.unwrap();
    assert_eq!(new1.state, State::Pending);
    assert_eq!(new1.job_chain.unwrap().jobs.len(), 3);
    assert_eq!(store.job_chain_json("new2").await.unwrap(), made);
    assert_ne!(store.job_chain_json("new1").await.unwrap(), made);
    let new2 = store.get_request("new2", true).await.unwrap();
    assert_eq!(new2.job_chain.unwrap().jobs.len(), 3);
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
pub(super) async fn the_batcher_answers_each_write_on_its_own(store: Arc<dyn Store>, _raw: Raw) {
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
            secrets: Vec::new(),
            chain_json: None,
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

pub(super) fn chunk(
    job_id: &str,
    try_no: u32,
    stream: proto::Stream,
    offset: u64,
    data: &str,
) -> OutputChunk {
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

pub(super) async fn output_is_stored_once_read_from_a_cursor_and_cut_past_the_cap(
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

/// Thousands of job log entries, try starts and output chunks in one call each: more
/// rows than one multi-row statement holds (PostgreSQL inserts them from arrays, the
/// others in statements of up to 1,000 rows), each row's values kept, and a call sent
/// again with part of it stored already stores only the rest.
pub(super) async fn thousands_of_rows_in_one_call_are_each_stored_once(
    store: Arc<dyn Store>,
    _raw: Raw,
) {
    running(&*store, "r1").await;
    let n = 2_500_u32;
    let entries: Vec<JobLog> = (0..n)
        .map(|i| {
            let mut entry = log("r1", &format!("j{i:05}"), 1 + i % 3, State::Complete);
            entry.stdout = format!("host-{i} ✓ 'quoted' \\ {{}}");
            entry.exit = i64::from(i) - 7;
            entry
        })
        .collect();
    // The first 1,500 alone, then all of them: the second call stores the last 1,000.
    store.insert_job_logs(&entries[..1_500]).await.unwrap();
    store.insert_job_logs(&entries).await.unwrap();
    let mut stored = store.job_log("r1").await.unwrap();
    stored.sort_by(|a, b| a.job_id.cmp(&b.job_id));
    assert_eq!(stored.len(), entries.len());
    assert_eq!(stored, entries);

    let starts: Vec<proto::TryStart> = (0..n)
        .map(|i| try_start("r1", &format!("j{i:05}"), 1 + i % 3))
        .collect();
    store
        .insert_try_starts(None, &starts[1_000..])
        .await
        .unwrap();
    store.insert_try_starts(None, &starts).await.unwrap();
    let started = store.try_starts("r1").await.unwrap();
    assert_eq!(started.len(), starts.len());
    let mut read: Vec<proto::TryStart> = started.into_iter().map(|s| s.start).collect();
    read.sort_by(|a, b| a.job_id.cmp(&b.job_id));
    assert_eq!(read, starts);

    let chunks: Vec<OutputChunk> = (0..1_200_u32)
        .map(|i| OutputChunk {
            seq: 0,
            request_id: "r1".to_owned(),
            job_id: format!("j{:05}", i / 2),
            r#try: 1,
            stream: if i % 2 == 0 {
                proto::Stream::Stdout
            } else {
                proto::Stream::Stderr
            },
            offset: 0,
            data: format!("line {i}\n"),
        })
        .collect();
    store.insert_output(&chunks[..600]).await.unwrap();
    store.insert_output(&chunks).await.unwrap();
    let mut read = Vec::new();
    let mut query = OutputQuery {
        limit: OutputQuery::MAX_LIMIT,
        ..OutputQuery::default()
    };
    loop {
        let page = store.output("r1", &query).await.unwrap();
        let Some(last) = page.last() else { break };
        query.after = last.seq;
        read.extend(page);
    }
    assert_eq!(read.len(), chunks.len());
    let mut data: Vec<&str> = read.iter().map(|chunk| chunk.data.as_str()).collect();
    let mut expected: Vec<&str> = chunks.iter().map(|chunk| chunk.data.as_str()).collect();
    data.sort_unstable();
    expected.sort_unstable();
    assert_eq!(data, expected);
}
