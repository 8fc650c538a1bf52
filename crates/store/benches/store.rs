//! Storage benchmark: `cargo bench -p store --bench store`.
//!
//! For SQLite (a file in a temporary directory) and PostgreSQL (a fresh schema in
//! `SPINDLE_TEST_POSTGRES_URL`, default `postgres://postgres@127.0.0.1:5432/test`):
//! - job log ingest: 100,000 entries written in batches of 1,000 (one transaction each),
//!   and the same through `Batcher` from 200 concurrent writers sending one entry at a
//!   time (group commit);
//! - request search over 1,000,000 requests (loaded in bulk with SQL), each query the
//!   median of 11 runs, among them one page half a million deep by offset and by cursor.

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proto::{JobLog, RequestFilter, State};
use store::{BatchOptions, Batcher, Store};

const N_LOGS: usize = 100_000;
const N_REQUESTS: i64 = 1_000_000;

fn entry(n: usize) -> JobLog {
    JobLog {
        request_id: format!("req{:017}", n / 1000),
        job_id: format!("j{:03}", n % 1000),
        r#try: 1,
        name: "job".to_owned(),
        job_type: "noop".to_owned(),
        started_at: 1,
        finished_at: 2,
        state: State::Complete,
        exit: 0,
        error: String::new(),
        stdout: "some output".to_owned(),
        stderr: String::new(),
    }
}

async fn ingest(store: &Arc<dyn Store>) -> (f64, f64) {
    let entries: Vec<JobLog> = (0..N_LOGS).map(entry).collect();
    let start = Instant::now();
    for batch in entries.chunks(1000) {
        store.insert_job_logs(batch).await.unwrap();
    }
    let batched = N_LOGS as f64 / start.elapsed().as_secs_f64();

    let batcher = Batcher::spawn(Arc::clone(store), BatchOptions::default());
    let mut writers = tokio::task::JoinSet::new();
    let start = Instant::now();
    for writer in 0..200 {
        let batcher = batcher.clone();
        writers.spawn(async move {
            for n in (writer..N_LOGS).step_by(200) {
                let mut one = entry(n);
                one.r#try = 2;
                batcher.insert_job_logs(vec![one], None).await.unwrap();
            }
        });
    }
    while let Some(done) = writers.join_next().await {
        done.unwrap();
    }
    let grouped = N_LOGS as f64 / start.elapsed().as_secs_f64();
    (batched, grouped)
}

async fn median_ms(store: &Arc<dyn Store>, filter: &RequestFilter) -> (f64, usize) {
    let mut samples = Vec::new();
    let mut n = 0;
    for _ in 0..11 {
        let start = Instant::now();
        n = store.find_requests(filter).await.unwrap().len();
        samples.push(start.elapsed());
    }
    samples.sort();
    (samples[5].as_secs_f64() * 1e3, n)
}

fn filters() -> Vec<(&'static str, RequestFilter)> {
    let page = |filter: RequestFilter| RequestFilter {
        limit: 20,
        ..filter
    };
    vec![
        ("newest 20, no filter", page(RequestFilter::default())),
        (
            "type = type-7",
            page(RequestFilter {
                request_type: Some("type-7".into()),
                ..Default::default()
            }),
        ),
        (
            "user = user-42",
            page(RequestFilter {
                user: Some("user-42".into()),
                ..Default::default()
            }),
        ),
        (
            "state = RUNNING",
            page(RequestFilter {
                states: vec![State::Running],
                ..Default::default()
            }),
        ),
        (
            "arg host = host-4242",
            page(RequestFilter {
                args: BTreeMap::from([("host".into(), "host-4242".into())]),
                ..Default::default()
            }),
        ),
        // The same page half a million requests deep, by offset and by cursor (the load
        // below makes request i at 1700000000 s + i, id r + i in 19 digits).
        (
            "page 25,001 by offset (offset 500,000)",
            RequestFilter {
                limit: 20,
                offset: 500_000,
                ..Default::default()
            },
        ),
        (
            "page 25,001 by cursor (after the 500,000th)",
            RequestFilter {
                limit: 20,
                after: Some(proto::Cursor {
                    created_at: chrono::DateTime::from_timestamp_micros(
                        1_700_000_000_000_000 + 500_000 * 1_000_000,
                    )
                    .unwrap(),
                    request_id: format!("r{:019}", 500_000),
                }),
                ..Default::default()
            },
        ),
        (
            "type + state + page 5",
            RequestFilter {
                request_type: Some("type-3".into()),
                states: vec![State::Complete],
                limit: 20,
                offset: 80,
                ..Default::default()
            },
        ),
    ]
}

async fn report(
    name: &str,
    store: Arc<dyn Store>,
    load: impl std::future::Future<Output = Duration>,
) {
    let (batched, grouped) = ingest(&store).await;
    println!("| {name} | job log ingest, batches of 1,000 | {batched:.0} entries/s |");
    println!(
        "| {name} | job log ingest, 200 writers of single entries (group commit) | {grouped:.0} entries/s |"
    );
    let loaded = load.await;
    println!(
        "| {name} | bulk load of 1,000,000 requests (SQL, for the search) | {:.1} s |",
        loaded.as_secs_f64()
    );
    for (label, filter) in filters() {
        let (ms, n) = median_ms(&store, &filter).await;
        println!("| {name} | search: {label} ({n} rows) | {ms:.2} ms |");
    }
}

const SQLITE_LOAD: [&str; 2] = [
    "INSERT INTO requests (request_id, type, state, user_name, created_at, total_jobs, finished_jobs) \
     WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 999999) \
     SELECT printf('r%019d', i), 'type-' || (i % 50), (i % 7) + 1, 'user-' || (i % 200), 1700000000000000 + i * 1000000, 10, 0 FROM n",
    "INSERT INTO request_args (request_id, name, value) SELECT request_id, 'host', 'host-' || (CAST(substr(request_id, 2) AS INTEGER) % 10000) FROM requests",
];

const POSTGRES_LOAD: [&str; 3] = [
    "INSERT INTO requests (request_id, type, state, user_name, created_at, total_jobs, finished_jobs) \
     SELECT 'r' || lpad(i::text, 19, '0'), 'type-' || (i % 50), (i % 7) + 1, 'user-' || (i % 200), 1700000000000000 + i::bigint * 1000000, 10, 0 \
     FROM generate_series(0, 999999) AS i",
    "INSERT INTO request_args (request_id, name, value) SELECT request_id, 'host', 'host-' || (substr(request_id, 2)::bigint % 10000) FROM requests",
    "ANALYZE",
];

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        assert_eq!(
            N_REQUESTS, 1_000_000,
            "the load statements make a million rows"
        );
        println!("| backend | workload | result |");
        println!("|---|---|---:|");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bench.db");
        let sqlite: Arc<dyn Store> = Arc::new(store::SqliteStore::open(&path).await.unwrap());
        let load = async {
            let pool = sqlx::SqlitePool::connect_with(
                sqlx::sqlite::SqliteConnectOptions::new().filename(&path),
            )
            .await
            .unwrap();
            let start = Instant::now();
            for sql in SQLITE_LOAD {
                sqlx::query(sql).execute(&pool).await.unwrap();
            }
            sqlx::query("ANALYZE").execute(&pool).await.unwrap();
            pool.close().await;
            start.elapsed()
        };
        report("SQLite", sqlite, load).await;

        let url = std::env::var("SPINDLE_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        let schema = format!("spindle_bench_{}", std::process::id());
        let admin = sqlx::PgPool::connect(&url).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA \"{schema}\"")))
            .execute(&admin)
            .await
            .unwrap();
        let postgres: Arc<dyn Store> = Arc::new(
            store::PostgresStore::connect(&url, Some(&schema))
                .await
                .unwrap(),
        );
        let load = async {
            let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
            let pool =
                sqlx::PgPool::connect_with(options.options([("search_path", schema.as_str())]))
                    .await
                    .unwrap();
            let start = Instant::now();
            for sql in POSTGRES_LOAD {
                sqlx::query(sql).execute(&pool).await.unwrap();
            }
            pool.close().await;
            start.elapsed()
        };
        report("PostgreSQL", postgres, load).await;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA \"{schema}\" CASCADE"
        )))
        .execute(&admin)
        .await
        .unwrap();
    });
}
