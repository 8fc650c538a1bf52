//! Import benchmark: `cargo bench -p spindle --bench import -- [OPTIONS]`.
//!
//! Builds a Spin Cycle 2.x database (`fixtures/spincycle-db/schema.sql`) in a fresh
//! database of the MySQL server at `SPINDLE_TEST_MYSQL_URL` (default
//! mysql://root@127.0.0.1:3306/test): `--requests` COMPLETE requests of `--logs` job log
//! rows each (a line of output apiece), then runs the release `spindle import spincycle`
//! into a fresh SQLite file, PostgreSQL database (`SPINDLE_TEST_POSTGRES_URL`) and MySQL
//! database, and prints each one's wall time and job log rows/s.

#![allow(clippy::print_stdout, reason = "a benchmark prints its report")]

mod common;

use std::time::Instant;

use clap::Parser;
use serde_json::json;

use common::{drop_mysql_database, fresh_database, fresh_mysql_database};

#[derive(Debug, Parser)]
#[command(about = "Time `spindle import spincycle` into each backend")]
struct Args {
    /// Spin Cycle requests to import
    #[arg(long, default_value_t = 2000)]
    requests: usize,
    /// Job log rows per request
    #[arg(long, default_value_t = 50)]
    logs: usize,
    /// Requests per batch of the import
    #[arg(long, default_value_t = 500)]
    batch: u32,
    /// Passed by `cargo bench`; ignored
    #[arg(long, hide = true)]
    bench: bool,
}

const SCHEMA: &str = include_str!("../../../fixtures/spincycle-db/schema.sql");

/// Fills Spin Cycle's tables in multi-row statements.
async fn fill(url: &str, requests: usize, logs: usize) {
    let pool = sqlx::MySqlPool::connect(url).await.unwrap();
    for table in SCHEMA.split(";\n").filter(|t| t.contains("CREATE")) {
        sqlx::query(sqlx::AssertSqlSafe(table))
            .execute(&pool)
            .await
            .unwrap();
    }
    let ids: Vec<String> = (0..requests).map(|n| format!("bench{n:015}")).collect();
    for chunk in ids.chunks(500) {
        let rows = vec!["(?, 'deploy', 3, 'bench', NOW(6), NOW(6), NOW(6), 3, 3)"; chunk.len()];
        let mut insert = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO requests (request_id, type, state, user, created_at, started_at, finished_at, total_jobs, finished_jobs) VALUES {}",
            rows.join(", ")
        )));
        for id in chunk {
            insert = insert.bind(id.as_bytes());
        }
        insert.execute(&pool).await.unwrap();
        let rows = vec!["(?, ?, ?, ?)"; chunk.len()];
        let mut insert = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO request_archives (request_id, create_request, args, job_chain) VALUES {}",
            rows.join(", ")
        )));
        for id in chunk {
            let chain = json!({"requestId": id, "jobs": {"aaaa": {"id": "aaaa", "name": "a", "type": "noop", "state": 1}}, "adjacencyList": {}, "state": 1});
            insert = insert
                .bind(id.as_bytes())
                .bind(br#"{"Type":"deploy","Args":{"host":"db1"},"User":"bench"}"#.to_vec())
                .bind(br#"[{"Pos":0,"Name":"host","Desc":"","Type":"required","Given":true,"Default":null,"Value":"db1"}]"#.to_vec())
                .bind(chain.to_string().into_bytes());
        }
        insert.execute(&pool).await.unwrap();
    }
    let entries: Vec<(&str, usize)> = ids
        .iter()
        .flat_map(|id| (1..=logs).map(move |n| (id.as_str(), n)))
        .collect();
    for chunk in entries.chunks(1000) {
        let rows = vec![
            "(?, 'aaaa', 'a', ?, 'noop', 3, 1714557601500000000, 1714557602750000000, '', 0, ?, '')";
            chunk.len()
        ];
        let mut insert = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO job_log (request_id, job_id, name, try, type, state, started_at, finished_at, error, `exit`, stdout, stderr) VALUES {}",
            rows.join(", ")
        )));
        for (id, n) in chunk {
            insert = insert
                .bind(id.as_bytes())
                .bind(*n as i64)
                .bind(format!("deployed db1, step {n} of the rollout: ok\n").into_bytes());
        }
        insert.execute(&pool).await.unwrap();
    }
    pool.close().await;
}

fn main() {
    let args = Args::parse();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let binary =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/spindle");
    assert!(
        binary.is_file(),
        "build the release binary first: cargo build --release -p spindle"
    );
    let source = runtime.block_on(fresh_mysql_database("import_source"));
    let began = Instant::now();
    runtime.block_on(fill(&source, args.requests, args.logs));
    println!(
        "Spin Cycle database: {} requests, {} job log rows, filled in {:.1} s",
        args.requests,
        args.requests * args.logs,
        began.elapsed().as_secs_f64()
    );
    let dir = tempfile::tempdir().unwrap();
    let (postgres, admin) = runtime.block_on(fresh_database("import"));
    let mysql = runtime.block_on(fresh_mysql_database("import_target"));
    let targets = [
        (
            "SQLite",
            format!("sqlite://{}", dir.path().join("import.db").display()),
        ),
        ("PostgreSQL", postgres.clone()),
        ("MySQL", mysql.clone()),
    ];
    println!("| target | wall time | job log rows/s |");
    println!("|---|---:|---:|");
    for (name, target) in &targets {
        let began = Instant::now();
        let out = std::process::Command::new(&binary)
            .args(["import", "spincycle", "--from", &source, "--to", target])
            .args(["--batch", &args.batch.to_string()])
            .output()
            .unwrap();
        let took = began.elapsed().as_secs_f64();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rows = (args.requests * args.logs) as f64;
        println!("| {name} | {took:.2} s | {:.0} |", rows / took);
    }
    runtime.block_on(async {
        let name = postgres.rsplit('/').next().unwrap().to_owned();
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE \"{name}\" WITH (FORCE)"
        )))
        .execute(&admin)
        .await;
        drop_mysql_database(&mysql).await;
        drop_mysql_database(&source).await;
    });
}
