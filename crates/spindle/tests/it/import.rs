//! `spindle import spincycle` (issue #30): a Spin Cycle 2.x database, built here in a
//! fresh MySQL database from the tables of storage.md (as SQL of this test's own), copied
//! into each backend; imported again (nothing doubled); killed halfway and run again;
//! its suspended chains resumed by a Spindle that has their job types, or left waiting,
//! SUSPENDED, by one that has not. Needs the test MariaDB (`mysql_url`), else skipped.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use sqlx::mysql::MySqlPool;

use crate::{eventually, mysql_url, run, spindle};

/// Spin Cycle's tables as storage.md describes them (its fourth migration applied).
const SPIN_CYCLE_SCHEMA: &str = include_str!("../../../../fixtures/spincycle-db/schema.sql");

/// A database of the test's own on the test MySQL server, dropped by `remove`.
pub(crate) struct MysqlDatabase {
    admin: MySqlPool,
    name: String,
    pub(crate) url: String,
}

impl MysqlDatabase {
    pub(crate) async fn create(server: &str, what: &str) -> MysqlDatabase {
        let admin = MySqlPool::connect(server)
            .await
            .expect("the test MySQL server answers");
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!("spindle_{what}_{}_{nanos}", std::process::id());
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
            .execute(&admin)
            .await
            .unwrap();
        let url = match server.rfind('/') {
            Some(slash) if slash > "mysql://".len() => format!("{}/{name}", &server[..slash]),
            _ => format!("{server}/{name}"),
        };
        MysqlDatabase { admin, name, url }
    }

    pub(crate) async fn remove(self) {
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE `{}`",
            self.name
        )))
        .execute(&self.admin)
        .await;
        self.admin.close().await;
    }
}

/// A Spin Cycle request to write: its `requests` row and archive.
struct Row<'a> {
    id: &'a str,
    state: u8,
    args: Value,
    chain: Value,
    /// `create_request` as stored (bad JSON for a request that cannot be read).
    create: Option<&'a str>,
}

/// A 20-character request id.
fn id(n: usize) -> String {
    format!("imp{n:017}")
}

/// Spin Cycle's chain of three `noop` jobs in a row, `ty` the last one's type.
fn chain(request_id: &str, states: [u8; 3], ty: &str) -> Value {
    let job = |id: &str, name: &str, ty: &str, state: u8| {
        json!({"id": id, "name": name, "type": ty, "bytes": "e30=", "state": state,
               "args": {"host": "db1"}, "data": null, "retry": 0, "retryWait": "",
               "sequenceId": "aaaa", "sequenceRetry": 0, "sequenceRetryWait": ""})
    };
    json!({
        "requestId": request_id,
        "jobs": {
            "aaaa": job("aaaa", "first", "noop", states[0]),
            "bbbb": job("bbbb", "second", "noop", states[1]),
            "cccc": job("cccc", "third", ty, states[2]),
        },
        "adjacencyList": {"aaaa": ["bbbb"], "bbbb": ["cccc"]},
        "state": 1,
        "finishedJobs": states.iter().filter(|s| **s == 3).count()
    })
}

const HOSTS_LEN: usize = 4000;

/// A long arg value (longer than an index entry): what `find args=` must match whole.
fn hosts() -> String {
    (0..HOSTS_LEN / 8).map(|n| format!("db{n:05},")).collect()
}

/// Fills Spin Cycle's tables: a request in every state, a long arg, two suspended chains
/// (one of `noop` jobs, one of a job type Spindle lacks), rows that cannot be read, and
/// `logs` job log rows on the COMPLETE request; then `extra` more COMPLETE requests of 5
/// job log rows each.
async fn fill(source: &str, logs: usize, extra: usize) {
    let pool = MySqlPool::connect(source).await.unwrap();
    for table in SPIN_CYCLE_SCHEMA
        .split(";\n")
        .filter(|t| t.contains("CREATE"))
    {
        sqlx::query(sqlx::AssertSqlSafe(table))
            .execute(&pool)
            .await
            .unwrap();
    }
    let arg = |name: &str, value: Value| {
        json!({"Pos": 0, "Name": name, "Desc": "", "Type": "required", "Given": true,
               "Default": null, "Value": value})
    };
    let hosts = hosts();
    let mut rows = vec![
        Row {
            id: &ID_COMPLETE,
            state: 3,
            args: json!([arg("hosts", json!(hosts)), arg("env", json!("prod"))]),
            chain: chain(&ID_COMPLETE, [1, 1, 1], "noop"),
            create: None,
        },
        Row {
            id: &ID_FAIL,
            state: 4,
            args: json!([arg("env", json!("stage"))]),
            chain: chain(&ID_FAIL, [1, 1, 1], "noop"),
            create: None,
        },
        Row {
            id: &ID_STOPPED,
            state: 6,
            args: json!(null),
            chain: chain(&ID_STOPPED, [1, 1, 1], "noop"),
            create: None,
        },
        Row {
            id: &ID_SUSPENDED,
            state: 7,
            args: json!([]),
            chain: chain(&ID_SUSPENDED, [1, 1, 1], "noop"),
            create: None,
        },
        Row {
            id: &ID_WAITS,
            state: 7,
            args: json!([]),
            chain: chain(&ID_WAITS, [1, 1, 1], "go-provision"),
            create: None,
        },
        Row {
            id: &ID_RUNNING,
            state: 2,
            args: json!([]),
            chain: chain(&ID_RUNNING, [1, 1, 1], "noop"),
            create: None,
        },
        Row {
            id: &ID_PENDING,
            state: 1,
            args: json!([]),
            chain: chain(&ID_PENDING, [1, 1, 1], "noop"),
            create: None,
        },
        Row {
            id: &ID_BAD_JSON,
            state: 3,
            args: json!([]),
            chain: chain(&ID_BAD_JSON, [1, 1, 1], "noop"),
            create: Some("{\"Type\": \"stop-host\", "),
        },
        Row {
            id: &ID_BAD_STATE,
            state: 9,
            args: json!([]),
            chain: chain(&ID_BAD_STATE, [1, 1, 1], "noop"),
            create: None,
        },
    ];
    let extra_ids: Vec<String> = (0..extra).map(|n| id(1000 + n)).collect();
    for extra_id in &extra_ids {
        rows.push(Row {
            id: extra_id,
            state: 3,
            args: json!([]),
            chain: chain(extra_id, [1, 1, 1], "noop"),
            create: None,
        });
    }
    for chunk in rows.chunks(200) {
        let mut requests = String::from(
            "INSERT INTO requests (request_id, type, state, user, created_at, started_at, finished_at, total_jobs, finished_jobs) VALUES ",
        );
        let mut archives = String::from(
            "INSERT INTO request_archives (request_id, create_request, args, job_chain) VALUES ",
        );
        for (at, row) in chunk.iter().enumerate() {
            let sep = if at == 0 { "" } else { ", " };
            let finished = if [3, 4, 6].contains(&row.state) {
                "'2024-05-01 10:00:09.250000'"
            } else {
                "NULL"
            };
            requests.push_str(&format!("{sep}(?, 'provision-db', {}, 'alice', '2024-05-01 10:00:00.125000', '2024-05-01 10:00:01.500000', {finished}, 3, 2)", row.state));
            archives.push_str(&format!("{sep}(?, ?, ?, ?)"));
        }
        let mut insert = sqlx::query(sqlx::AssertSqlSafe(requests));
        for row in chunk {
            insert = insert.bind(row.id.as_bytes());
        }
        insert.execute(&pool).await.unwrap();
        let mut insert = sqlx::query(sqlx::AssertSqlSafe(archives));
        for row in chunk {
            let create = match row.create {
                Some(text) => text.to_owned(),
                None => json!({"Type": "provision-db", "Args": {"env": "prod"}, "User": "alice"})
                    .to_string(),
            };
            insert = insert
                .bind(row.id.as_bytes())
                .bind(create.into_bytes())
                .bind(row.args.to_string().into_bytes())
                .bind(row.chain.to_string().into_bytes());
        }
        insert.execute(&pool).await.unwrap();
    }
    // The job log: `logs` tries of the COMPLETE request's jobs, 5 of each other.
    let mut entries: Vec<(String, String, usize, u8)> = (0..logs)
        .map(|n| {
            (
                ID_COMPLETE.clone(),
                ["aaaa", "bbbb", "cccc"][n % 3].to_owned(),
                n / 3 + 1,
                3,
            )
        })
        .collect();
    for extra_id in &extra_ids {
        entries.extend((0..5).map(|n| {
            (
                extra_id.clone(),
                ["aaaa", "bbbb", "cccc"][n % 3].to_owned(),
                n / 3 + 1,
                3,
            )
        }));
    }
    entries.push((ID_SUSPENDED.clone(), "aaaa".to_owned(), 1, 3));
    entries.push((ID_BAD_JSON.clone(), "aaaa".to_owned(), 1, 3));
    for chunk in entries.chunks(500) {
        let mut sql = String::from(
            "INSERT INTO job_log (request_id, job_id, name, try, type, state, started_at, finished_at, error, `exit`, stdout, stderr) VALUES ",
        );
        for at in 0..chunk.len() {
            sql.push_str(if at == 0 { "(?, ?, 'step', ?, 'noop', ?, 1714557601500000000, 1714557602750000000, 'e', 7, ?, NULL)" } else { ", (?, ?, 'step', ?, 'noop', ?, 1714557601500000000, 1714557602750000000, 'e', 7, ?, NULL)" });
        }
        let mut insert = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (request, job, attempt, state) in chunk {
            insert = insert
                .bind(request.as_bytes())
                .bind(job.as_bytes())
                .bind(*attempt as i64)
                .bind(*state)
                .bind(format!("out {attempt}\n").into_bytes());
        }
        insert.execute(&pool).await.unwrap();
    }
    for (request_id, ty) in [(&*ID_SUSPENDED, "noop"), (&*ID_WAITS, "go-provision")] {
        let suspended = json!({
            "requestId": request_id,
            "jobChain": chain(request_id, [3, 6, 1], ty),
            "totalJobTries": {"aaaa": 1, "bbbb": 1},
            "latestRunJobTries": {"aaaa": 1, "bbbb": 1},
            "sequenceTries": {"aaaa": 1}
        });
        sqlx::query("INSERT INTO suspended_job_chains (request_id, suspended_job_chain, suspended_at) VALUES (?, ?, '2024-05-01 10:00:05')")
            .bind(request_id.as_bytes())
            .bind(suspended.to_string().into_bytes())
            .execute(&pool)
            .await
            .unwrap();
    }
    pool.close().await;
}

static ID_COMPLETE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| id(1));
static ID_FAIL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| id(2));
static ID_STOPPED: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| id(3));
static ID_SUSPENDED: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| id(4));
static ID_WAITS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| id(5));
static ID_RUNNING: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| id(6));
static ID_PENDING: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| id(7));
static ID_BAD_JSON: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| id(8));
static ID_BAD_STATE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| id(9));

/// `spindle import spincycle --from SOURCE --to TARGET EXTRA…` in `dir`.
fn import(dir: &Path, source: &str, target: &str, extra: &[&str]) -> (String, String, i32) {
    run(spindle(dir)
        .args(["import", "spincycle", "--from", source, "--to", target])
        .args(extra))
}

/// The line of `table` in the import's summary: in Spin Cycle, copied, already there,
/// left out.
fn counts(stdout: &str, table: &str) -> [u64; 4] {
    let line = stdout
        .lines()
        .find(|line| line.split_whitespace().next() == Some(table))
        .unwrap_or_else(|| panic!("no line for {table} in {stdout}"));
    let numbers: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|n| n.parse().unwrap())
        .collect();
    numbers.try_into().unwrap()
}

const LOGS: usize = 3000;

/// Imports into `target`, checks every field, imports again, then with
/// --include-running.
async fn imports_into(test: &str, target: &str) {
    let Some(server) = mysql_url(test) else {
        return;
    };
    let source = MysqlDatabase::create(&server, "spincycle").await;
    fill(&source.url, LOGS, 0).await;
    let dir = tempfile::tempdir().unwrap();

    let (stdout, stderr, code) = import(dir.path(), &source.url, target, &[]);
    assert_eq!(
        code, 1,
        "rows it could not read, and RUNNING ones left out: {stdout}{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "request {}: request_archives: create_request is not the JSON expected",
            *ID_BAD_JSON
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "request {}: requests: state 9 is not a state",
            *ID_BAD_STATE
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("left out: request {} is RUNNING", *ID_RUNNING)),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("left out: request {} is PENDING", *ID_PENDING)),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "4 request(s) were not imported (2 that could not be read, 2 PENDING or RUNNING)"
        ),
        "{stderr}"
    );
    assert_eq!(counts(&stdout, "requests"), [9, 5, 0, 4], "{stdout}");
    assert_eq!(
        counts(&stdout, "request_archives"),
        [9, 5, 0, 4],
        "{stdout}"
    );
    assert_eq!(
        counts(&stdout, "job_log"),
        [LOGS as u64 + 2, LOGS as u64 + 1, 0, 1],
        "{stdout}"
    );
    assert_eq!(
        counts(&stdout, "suspended_job_chains"),
        [2, 2, 0, 0],
        "{stdout}"
    );
    assert!(
        stdout.contains("copied requests by state: COMPLETE 1, FAIL 1, STOPPED 1, SUSPENDED 2"),
        "{stdout}"
    );

    let store = store::open(target).await.unwrap();
    let request = store.get_request(&ID_COMPLETE, true).await.unwrap();
    assert_eq!(request.request_type, "provision-db");
    assert_eq!(request.state, proto::State::Complete);
    assert_eq!(request.user, "alice");
    assert_eq!(
        request.created_at.to_rfc3339(),
        "2024-05-01T10:00:00.125+00:00"
    );
    assert_eq!(
        request.started_at.unwrap().to_rfc3339(),
        "2024-05-01T10:00:01.500+00:00"
    );
    assert_eq!(
        request.finished_at.unwrap().to_rfc3339(),
        "2024-05-01T10:00:09.250+00:00"
    );
    assert_eq!((request.total_jobs, request.finished_jobs), (3, 2));
    // Its own jobs counted from the chain (which has no grapher's wrappers here).
    assert_eq!(request.own_jobs, 3);
    assert_eq!(request.args.len(), 2);
    assert_eq!(request.args[0].value, json!(hosts()));
    let imported_chain = request.job_chain.unwrap();
    assert_eq!(imported_chain.jobs.len(), 3);
    assert_eq!(imported_chain.jobs["cccc"].bytes, b"{}");
    assert_eq!(imported_chain.adjacency_list["aaaa"], ["bbbb"]);
    let log = store.job_log(&ID_COMPLETE).await.unwrap();
    assert_eq!(log.len(), LOGS);
    let entry = log
        .iter()
        .find(|e| e.job_id == "bbbb" && e.r#try == 7)
        .unwrap();
    assert_eq!(
        (
            entry.name.as_str(),
            entry.job_type.as_str(),
            entry.state,
            entry.started_at,
            entry.finished_at,
            entry.exit,
            entry.error.as_str(),
            entry.stdout.as_str(),
            entry.stderr.as_str()
        ),
        (
            "step",
            "noop",
            proto::State::Complete,
            1_714_557_601_500_000_000,
            1_714_557_602_750_000_000,
            7,
            "e",
            "out 7\n",
            ""
        )
    );
    // Searchable: the long value whole, and not a prefix of it.
    let find = |args: Vec<(String, String)>| proto::RequestFilter {
        args: args.into_iter().collect(),
        ..proto::RequestFilter::default()
    };
    let found = store
        .find_requests(&find(vec![("hosts".into(), hosts())]))
        .await
        .unwrap();
    assert_eq!(
        found.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        [ID_COMPLETE.as_str()]
    );
    let prefix = hosts()[..HOSTS_LEN - 8].to_owned();
    assert!(
        store
            .find_requests(&find(vec![("hosts".into(), prefix)]))
            .await
            .unwrap()
            .is_empty()
    );
    let found = store
        .find_requests(&find(vec![("env".into(), "stage".into())]))
        .await
        .unwrap();
    assert_eq!(
        found.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        [ID_FAIL.as_str()]
    );
    assert!(matches!(
        store.get_request(&ID_RUNNING, false).await,
        Err(store::Error::NotFound { .. })
    ));
    assert!(matches!(
        store.get_request(&ID_BAD_JSON, false).await,
        Err(store::Error::NotFound { .. })
    ));
    assert_eq!(
        store.get_request(&ID_SUSPENDED, false).await.unwrap().state,
        proto::State::Suspended
    );

    // Again: nothing copied twice.
    let (stdout, stderr, code) = import(dir.path(), &source.url, target, &[]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert_eq!(counts(&stdout, "requests"), [9, 0, 5, 4], "{stdout}");
    assert_eq!(
        counts(&stdout, "job_log"),
        [LOGS as u64 + 2, 0, LOGS as u64 + 1, 1],
        "{stdout}"
    );
    assert!(
        stdout.contains("copied requests by state: none"),
        "{stdout}"
    );
    assert_eq!(store.job_log(&ID_COMPLETE).await.unwrap().len(), LOGS);

    // With --include-running: RUNNING and PENDING as FAIL, saying so.
    let (stdout, stderr, code) = import(dir.path(), &source.url, target, &["--include-running"]);
    assert_eq!(code, 1, "the two bad rows are still bad: {stdout}{stderr}");
    assert_eq!(counts(&stdout, "requests"), [9, 2, 5, 2], "{stdout}");
    assert!(
        stdout.contains("copied requests by state: FAIL 2"),
        "{stdout}"
    );
    let running = store.get_request(&ID_RUNNING, false).await.unwrap();
    assert_eq!(running.state, proto::State::Fail);
    assert!(running.finished_at.is_some());
    assert_eq!(
        running.error,
        "imported from Spin Cycle while it was RUNNING: how it ended there is not known"
    );
    drop(store);
    source.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_spincycle_into_sqlite_copies_every_field_once() {
    let dir = tempfile::tempdir().unwrap();
    let target = format!("sqlite://{}", dir.path().join("spindle.db").display());
    imports_into(
        "import_spincycle_into_sqlite_copies_every_field_once",
        &target,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_spincycle_into_postgres_copies_every_field_once() {
    let test = "import_spincycle_into_postgres_copies_every_field_once";
    let Some(target) = crate::services::NewDatabase::create(test).await else {
        return;
    };
    imports_into(test, &target.url).await;
    target.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_spincycle_into_mysql_copies_every_field_once() {
    let test = "import_spincycle_into_mysql_copies_every_field_once";
    let Some(server) = mysql_url(test) else {
        return;
    };
    let target = MysqlDatabase::create(&server, "target").await;
    imports_into(test, &target.url).await;
    target.remove().await;
}

/// Killed halfway, a second run finishes: every request once, every job log row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_spincycle_killed_halfway_finishes_when_run_again() {
    let test = "import_spincycle_killed_halfway_finishes_when_run_again";
    let Some(server) = mysql_url(test) else {
        return;
    };
    let source = MysqlDatabase::create(&server, "spincycle").await;
    const EXTRA: usize = 3000;
    fill(&source.url, 30, EXTRA).await;
    let dir = tempfile::tempdir().unwrap();
    let target = format!("sqlite://{}", dir.path().join("spindle.db").display());
    let mut child = spindle(dir.path())
        .args([
            "import",
            "spincycle",
            "--from",
            &source.url,
            "--to",
            &target,
            "--batch",
            "1",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let store = store::open(&target).await.unwrap();
    let states = [proto::State::Complete];
    eventually(
        "the import has copied some requests",
        Duration::from_secs(60),
        async || {
            store
                .count_requests(&states, None)
                .await
                .is_ok_and(|c| c.iter().any(|(_, n)| *n >= 100))
        },
    )
    .await;
    child.kill().unwrap();
    child.wait().unwrap();
    let copied: u64 = store
        .count_requests(&states, None)
        .await
        .unwrap()
        .iter()
        .map(|(_, n)| n)
        .sum();
    assert!(
        copied < EXTRA as u64,
        "killed before the end: {copied} copied"
    );

    let (stdout, stderr, _) = import(dir.path(), &source.url, &target, &[]);
    let requests = counts(&stdout, "requests");
    assert_eq!(requests[0], EXTRA as u64 + 9, "{stdout}{stderr}");
    assert_eq!(
        requests[1] + requests[2],
        EXTRA as u64 + 5,
        "every readable request stored once: {stdout}"
    );
    assert!(
        requests[2] >= copied,
        "what the first run stored is there already: {stdout}"
    );
    let logs = counts(&stdout, "job_log");
    assert_eq!(logs[1] + logs[2], (EXTRA * 5 + 30 + 1) as u64, "{stdout}");
    for n in [0, EXTRA / 2, EXTRA - 1] {
        assert_eq!(store.job_log(&id(1000 + n)).await.unwrap().len(), 5);
    }
    drop(store);
    source.remove().await;
}

/// A Spindle with the chain's job types resumes an imported SUSPENDED request to
/// COMPLETE; one whose chain has a type it lacks stays SUSPENDED, saying which.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_suspended_chains_resume_or_wait_for_their_job_types() {
    let test = "imported_suspended_chains_resume_or_wait_for_their_job_types";
    let Some(server) = mysql_url(test) else {
        return;
    };
    let source = MysqlDatabase::create(&server, "spincycle").await;
    fill(&source.url, 3, 0).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("specs")).unwrap();
    std::fs::write(
        dir.path().join("specs/provision.yaml"),
        "sequences:\n  provision-db:\n    request: true\n    nodes:\n      first:\n        category: job\n        type: noop\n",
    )
    .unwrap();
    let (stdout, stderr, _) = import(dir.path(), &source.url, "sqlite://spindle.db", &[]);
    assert_eq!(
        counts(&stdout, "suspended_job_chains")[1],
        2,
        "{stdout}{stderr}"
    );
    let server = crate::Service::start(
        dir.path(),
        &crate::service_args(
            "server",
            "sqlite://spindle.db",
            &["--interval", "100ms", "--lease", "2s"],
        ),
    );
    let api = crate::recovery::Client::new(&server.url);
    api.wait_state(&ID_SUSPENDED, 3, Duration::from_secs(60))
        .await;
    let log = api
        .get(&format!("/api/v1/requests/{}/log", *ID_SUSPENDED))
        .await;
    let tries: Vec<(String, u64, u64)> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["jobId"].as_str().unwrap().to_owned(),
                e["try"].as_u64().unwrap(),
                e["state"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        tries,
        [
            ("aaaa".to_owned(), 1, 3),
            ("bbbb".to_owned(), 2, 3),
            ("cccc".to_owned(), 1, 3)
        ],
        "the imported try, then the stopped job's next try and the last job"
    );
    eventually(
        "the other chain says what it waits for",
        Duration::from_secs(60),
        async || {
            let request = api.request(&ID_WAITS).await;
            request["state"] == 7
                && request["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("`go-provision`"))
        },
    )
    .await;
    let (stdout, stderr, code) =
        run(spindle(dir.path()).args(["status", &ID_WAITS, "--addr", &server.url]));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("SUSPENDED")
            && stdout.contains("waits for a job runner with its job types")
            && stdout.contains("`go-provision`"),
        "{stdout}"
    );
    drop(server);
    source.remove().await;
}

/// Issue #47: `--from` a database that is not Spin Cycle's says so, naming what it lacks,
/// before anything is read or written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_is_not_spin_cycles_is_named_as_such() {
    let test = "a_database_that_is_not_spin_cycles_is_named_as_such";
    let Some(server) = mysql_url(test) else {
        return;
    };
    let source = MysqlDatabase::create(&server, "notsc").await;
    let pool = MySqlPool::connect(&source.url).await.unwrap();
    sqlx::query("CREATE TABLE requests (request_id BINARY(20) PRIMARY KEY, type VARCHAR(10))")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let dir = tempfile::tempdir().unwrap();
    let (stdout, stderr, code) = import(dir.path(), &source.url, "sqlite://spindle.db", &[]);
    assert_ne!(code, 0, "{stdout}");
    assert!(
        stderr.contains("not a Spin Cycle 2.x database")
            && stderr.contains("its table requests must have the columns"),
        "{stderr}"
    );
    assert!(!dir.path().join("spindle.db").exists(), "nothing written");
    source.remove().await;
}
