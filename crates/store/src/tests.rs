//! One backend-agnostic suite, run against SQLite (a temporary file per test), the real
//! PostgreSQL server (a schema per test) and the real MySQL/MariaDB server (a database
//! per test), so tests run in parallel; the servers and their helpers are in
//! `test_databases.rs`.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use proto::{
    AuditEvent, CreateRequest, Fence, FinishRequest, Job, JobChain, JobLog, OutputChunk,
    OutputQuery, Request, RequestArg, RequestArgType, RequestFilter, State, SuspendedJobChain,
};
use serde_json::json;

#[path = "test_databases.rs"]
mod databases;
#[path = "fence_tests.rs"]
mod fence_tests;
#[path = "job_lock_tests.rs"]
mod job_lock_tests;
#[path = "lock_tests.rs"]
mod lock_tests;
#[path = "notification_tests.rs"]
mod notification_tests;
#[path = "partition_tests.rs"]
mod partition_tests;
#[path = "plan_tests.rs"]
mod plan_tests;
#[path = "recovery_batch_tests.rs"]
mod recovery_batch_tests;
#[path = "recovery_tests.rs"]
mod recovery_tests;
#[path = "request_tests.rs"]
mod request_tests;
#[path = "search_tests.rs"]
mod search_tests;
#[path = "sign_in_tests.rs"]
mod sign_in_tests;
#[path = "trigger_tests.rs"]
mod trigger_tests;
#[path = "write_tests.rs"]
mod write_tests;
use crate::{Batcher, Error, Finished, Holder, Owner, StartedTry, Store};
pub(crate) use databases::*;
use fence_tests::{
    a_chain_its_runner_suspended_goes_out_with_its_stopped_try_given_back,
    a_late_job_log_entry_waits_for_a_recovery_and_is_refused,
    a_request_offered_again_after_a_try_began_is_not_handed_over_anew,
    a_suspended_chain_offered_again_after_a_try_began_is_taken_back,
    hand_overs_in_one_batch_are_each_checked, suspends_in_one_batch_are_each_checked,
};
use job_lock_tests::jobs_take_locks_in_turn_and_their_request_end_releases_them;
use lock_tests::{
    a_fair_lock_serves_its_callers_round_robin,
    locks_are_taken_in_queue_order_and_released_at_the_end,
};
use notification_tests::ends_and_lost_runners_are_notified_once_each;
use plan_tests::every_read_of_the_api_is_served_by_an_index;
use recovery_batch_tests::recoveries_in_one_batch_are_each_checked;
use recovery_tests::{
    a_finished_request_is_retried_from_its_final_state_only,
    a_lost_runners_request_is_recovered_once,
    a_try_started_and_ended_during_a_recovery_is_never_missed,
    a_try_started_during_a_recovery_is_never_missed,
    an_unstarted_hand_over_is_taken_back_at_its_epoch, claims_race_and_each_chain_is_claimed_once,
    hand_overs_are_fenced, resuming_a_request_that_moved_on, runners_register_renew_lapse_and_end,
    suspend_claim_and_resume,
};
use request_tests::{
    a_pending_request_says_why_it_waits_and_database_errors_their_cause,
    approval_answers_are_kept_once_per_job, create_and_read,
    imported_requests_and_chains_that_wait, imports_go_in_bulk_all_or_nothing,
    request_times_stay_in_order, schedule_runs_are_claimed_once,
    spec_versions_are_stored_once_and_requests_keep_theirs, state_changes_are_conditional,
};
use search_tests::{
    a_long_arg_value_is_stored_and_found_through_an_index,
    requests_are_counted_by_state_and_operations_timed, search,
    the_ended_among_many_are_found_in_one_read,
};
use sign_in_tests::sign_ins_are_taken_once_and_expire;
use trigger_tests::a_delivery_sent_again_creates_nothing;
use write_tests::{
    a_write_batch_does_what_each_write_would, batched_writes_from_many_callers,
    cleanup_reference_scenario, job_log_entries_are_stored_once_per_try,
    output_is_stored_once_read_from_a_cursor_and_cut_past_the_cap,
    retention_removes_old_finished_requests_in_batches, the_batcher_answers_each_write_on_its_own,
    thousands_of_rows_in_one_call_are_each_stored_once,
};

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
            secret: false,
        },
        RequestArg {
            pos: 0,
            name: "count".to_owned(),
            desc: String::new(),
            arg_type: RequestArgType::Optional,
            given: false,
            default: json!("3"),
            value: json!(3),
            secret: false,
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
        elements: Vec::new(),
    };
    let mut create_args = proto::JobArgs::new();
    create_args.insert("host".to_owned(), json!(host));
    let create = CreateRequest {
        request_type: request_type.to_owned(),
        args: create_args,
        user: user.to_owned(),
        priority: None,
        idempotency_key: None,
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

/// The requests whose suspended chains `host` claims now (at most `limit`), sorted.
async fn claimed_now(store: &dyn Store, host: &str, at: DateTime<Utc>, limit: u32) -> Vec<String> {
    let mut claimed: Vec<String> = store
        .claim_suspended_many(host, at, limit)
        .await
        .unwrap()
        .into_iter()
        .map(|chain| chain.request_id)
        .collect();
    claimed.sort();
    claimed
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
    thousands_of_rows_in_one_call_are_each_stored_once,
    retention_removes_old_finished_requests_in_batches,
    suspend_claim_and_resume,
    resuming_a_request_that_moved_on,
    cleanup_reference_scenario,
    imported_requests_and_chains_that_wait,
    imports_go_in_bulk_all_or_nothing,
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
    recoveries_in_one_batch_are_each_checked,
    a_try_started_during_a_recovery_is_never_missed,
    a_try_started_and_ended_during_a_recovery_is_never_missed,
    a_late_job_log_entry_waits_for_a_recovery_and_is_refused,
    a_request_offered_again_after_a_try_began_is_not_handed_over_anew,
    a_suspended_chain_offered_again_after_a_try_began_is_taken_back,
    hand_overs_in_one_batch_are_each_checked,
    suspends_in_one_batch_are_each_checked,
    a_chain_its_runner_suspended_goes_out_with_its_stopped_try_given_back,
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
    ends_and_lost_runners_are_notified_once_each,
    sign_ins_are_taken_once_and_expire,
    every_read_of_the_api_is_served_by_an_index,
);

#[tokio::test]
async fn postgres_migrates_an_empty_schema_once() {
    let Some((store, schema)) = postgres_store().await else {
        return;
    };
    let migrations = crate::postgres::migrator().iter().count() as i64;
    assert_eq!(migrations, 23);
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations")
        .fetch_one(&store.pool)
        .await
        .unwrap();
    assert_eq!(n, migrations);
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables t WHERE table_schema = current_schema() \
         AND NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.relname = t.table_name AND c.relispartition \
         AND c.relnamespace = current_schema()::regnamespace) ORDER BY table_name",
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
            "notification_events",
            "notifications",
            "request_archives",
            "request_args",
            "request_audit",
            "request_locks",
            "request_secrets",
            "requests",
            "schedule_runs",
            "sign_ins",
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

/// A call the database does not answer (here: a table another session locked; in the
/// field, PgBouncer queueing queries for a server that is down) is given up after the
/// URL's `call_timeout` as unavailable (HTTP 503), naming the operation; the store works
/// again once the database answers.
#[tokio::test]
async fn a_call_without_an_answer_is_unavailable_after_the_call_timeout() {
    let Some((mut store, schema)) = postgres_store().await else {
        return;
    };
    store.call_timeout = Some(std::time::Duration::from_secs(1));
    let mut locker = store.pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE requests IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *locker)
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let err = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        crate::Requests::get_request(&store, "r1", false),
    )
    .await
    .expect("given up by the store's call timeout, not waiting for the lock")
    .unwrap_err();
    assert!(
        matches!(err, Error::Unavailable(_)),
        "unavailable, not {err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("in get_request") && text.contains("did not answer within 1 s"),
        "{text}"
    );
    assert!(started.elapsed() >= std::time::Duration::from_secs(1));
    locker.rollback().await.unwrap();
    let err = crate::Requests::get_request(&store, "r1", false)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
    drop_schema(&schema).await;
}
