//! Restart benchmark (issue #51, point 3): `cargo bench -p spindle --bench restart`.
//!
//! One `spindle server` (SQLite, or the database `SPINDLE_BENCH_DATABASE` names: a fresh
//! one for each run) with N requests RUNNING at once, each one `sleep` of ten minutes
//! (N: `SPINDLE_BENCH_REQUESTS`, default 5,000): how fast they are created,
//! the server's memory per running request, how long SIGTERM takes to suspend them all
//! and exit, and — the point — how long a new server takes, from its start, until every
//! chain is RUNNING again (none SUSPENDED or PENDING), and so at how many chains a
//! second it resumes them; and how long `spindle ps` takes while they all run.
//!
//! `SPINDLE_BENCH_SETUP=rm-jr`: the same on two `spindle jr` behind a `spindle rm`
//! (`restart/runners.rs`), each runner's memory per chain it holds, and after SIGTERM
//! the runners restarted; then one runner killed with SIGKILL and the rate at which the
//! other takes its requests over.

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]

mod common;
#[path = "restart/runners.rs"]
mod runners;

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use common::{Process, free_port, runtime};

const SPECS: &str = "sequences:
  nap:
    request: true
    args:
      static:
        - name: long
          default: 10m
    nodes:
      nap:
        category: job
        type: sleep
        args: [{expected: duration, given: long}]
";

/// How many requests in `state` (at most `limit`; 1 answers whether there is any).
pub(crate) async fn count(http: &reqwest::Client, base: &str, state: &str, limit: usize) -> usize {
    let url = format!("{base}/api/v1/requests?state={state}&limit={limit}");
    loop {
        if let Ok(response) = http.get(&url).send().await
            && let Ok(list) = response.json::<Vec<serde_json::Value>>().await
        {
            return list.len();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until nothing is PENDING or SUSPENDED; how long it took.
pub(crate) async fn all_running(http: &reqwest::Client, base: &str, since: Instant) -> Duration {
    loop {
        if count(http, base, "SUSPENDED", 1).await == 0
            && count(http, base, "PENDING", 1).await == 0
        {
            return since.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Creates `n` requests of `nap`, 32 at a time.
pub(crate) async fn create(http: &reqwest::Client, base: &str, n: usize) {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let (http, base, next) = (http.clone(), base.to_owned(), Arc::clone(&next));
        tasks.push(tokio::spawn(async move {
            while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < n {
                let response = http
                    .post(format!("{base}/api/v1/requests"))
                    .json(&json!({"type": "nap", "args": {}}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status(), 201);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

/// `spindle ps` against `base`: the time until its table is printed, and its lines.
pub(crate) fn ps(base: &str) -> (Duration, usize) {
    let since = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(["ps", "--addr", base, "--timeout", "60s"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        since.elapsed(),
        out.stdout.iter().filter(|b| **b == b'\n').count(),
    )
}

/// How long `url` takes to answer in full, and the size of its answer (MB).
pub(crate) async fn answer_time(http: &reqwest::Client, url: &str) -> (Duration, f64) {
    let since = Instant::now();
    let body = http.get(url).send().await.unwrap().bytes().await.unwrap();
    (since.elapsed(), body.len() as f64 / 1e6)
}

fn server(dir: &std::path::Path, port: u16, database: &str) -> Process {
    let listen = format!("127.0.0.1:{port}");
    Process::start(
        dir,
        &[
            "server",
            "--listen",
            &listen,
            "--specs",
            "specs",
            "--database",
            database,
        ],
    )
}

/// Sends `process` SIGTERM and waits for it to exit.
pub(crate) fn terminate(process: &mut common::Process) {
    Command::new("kill")
        .args(["-TERM", &process.0.id().to_string()])
        .status()
        .unwrap();
    process.0.wait().unwrap();
}

pub(crate) fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

fn main() {
    let n: usize = std::env::var("SPINDLE_BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000);
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("specs")).unwrap();
    std::fs::write(dir.path().join("specs/nap.yaml"), SPECS).unwrap();
    let rt = runtime();
    let http = reqwest::Client::new();
    let database = match std::env::var("SPINDLE_BENCH_DATABASE") {
        Ok(url) if url.starts_with("postgres") => rt.block_on(common::fresh_database("restart")).0,
        Ok(url) if url.starts_with("mysql") => rt.block_on(common::fresh_mysql_database("restart")),
        _ => "sqlite://s.db".to_owned(),
    };
    if std::env::var("SPINDLE_BENCH_SETUP").is_ok_and(|setup| setup == "rm-jr") {
        runners::run(dir.path(), &rt, &http, &database, n);
    } else {
        one_server(dir.path(), &rt, &http, &database, n);
    }
    drop_database(&rt, &database);
}

/// One `spindle server` holding them all.
fn one_server(
    dir: &std::path::Path,
    rt: &tokio::runtime::Runtime,
    http: &reqwest::Client,
    database: &str,
    n: usize,
) {
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut first = server(dir, port, database);
    rt.block_on(async {
        while http.get(format!("{base}/readyz")).send().await.is_err() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let idle = rss_mib(first.0.id());
    let started = Instant::now();
    rt.block_on(create(http, &base, n));
    let created = started.elapsed();
    let running = rt.block_on(all_running(http, &base, started));
    analyze(rt, database);
    let held = rss_mib(first.0.id());
    // `spindle ps` while they all run: the time until its table is printed.
    let ps = ps(&base);
    let stopping = Instant::now();
    terminate(&mut first);
    let suspended = stopping.elapsed();
    let suspended_count = rt.block_on(async {
        let second = server(dir, port, database);
        let since = Instant::now();
        // Counted once the new server answers (it resumes from its first round).
        let count_now = count(http, &base, "SUSPENDED", n).await;
        let resumed = all_running(http, &base, since).await;
        let running_now = count(http, &base, "RUNNING", n).await;
        drop(second);
        (count_now, resumed, running_now)
    });
    let (waiting, resumed, running_now) = suspended_count;
    let backend = database.split(':').next().unwrap_or_default();
    println!("{backend}:");
    println!(
        "| requests | created | all RUNNING | memory a running request | `spindle ps` | SIGTERM to exit | restart to all RUNNING again | resumed a second |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {n} | {:.2} s ({:.0}/s) | {:.2} s | {:.1} KiB | {:.2} s ({} lines) | {:.2} s | {:.2} s ({} suspended seen, {} RUNNING after) | {:.0} |",
        created.as_secs_f64(),
        n as f64 / created.as_secs_f64(),
        running.as_secs_f64(),
        (held - idle) * 1024.0 / n as f64,
        ps.0.as_secs_f64(),
        ps.1,
        suspended.as_secs_f64(),
        resumed.as_secs_f64(),
        waiting,
        running_now,
        n as f64 / resumed.as_secs_f64(),
    );
}

/// The fresh database of a server backend is dropped (SQLite's goes with the temporary
/// directory).
/// Gives the planner the statistics a database that has run for a while has: this
/// machine's PostgreSQL runs without autovacuum, and on tables never analyzed it reads
/// the job log of 64 requests by a scan of all of it (23 ms, not 0.5). Says so.
pub(crate) fn analyze(rt: &tokio::runtime::Runtime, database: &str) {
    if !database.starts_with("postgres") {
        return;
    }
    rt.block_on(async {
        let pool = sqlx::PgPool::connect(database).await.unwrap();
        let autovacuum: String = sqlx::query_scalar("SHOW autovacuum")
            .fetch_one(&pool)
            .await
            .unwrap();
        sqlx::query("ANALYZE").execute(&pool).await.unwrap();
        println!(
            "(PostgreSQL's autovacuum is {autovacuum} on this server: the tables were analyzed once every request ran)"
        );
        pool.close().await;
    });
}

fn drop_database(rt: &tokio::runtime::Runtime, database: &str) {
    if database.starts_with("mysql") {
        rt.block_on(common::drop_mysql_database(database));
    } else if let Some((server, name)) = database
        .rsplit_once('/')
        .filter(|_| database.starts_with("postgres"))
    {
        rt.block_on(async {
            if let Ok(admin) = sqlx::PgPool::connect(&format!("{server}/test")).await {
                let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE \"{name}\" WITH (FORCE)"
                )))
                .execute(&admin)
                .await;
            }
        });
    }
}
