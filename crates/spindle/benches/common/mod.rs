//! Helpers the service benchmarks share: processes of the `spindle` binary, free ports,
//! fresh PostgreSQL databases, medians.

#![allow(dead_code, reason = "each benchmark uses some of these")]

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `spindle` process, killed when dropped.
pub(crate) struct Process(pub(crate) Child);

impl Process {
    pub(crate) fn start(dir: &Path, args: &[&str]) -> Process {
        Process(
            Command::new(env!("CARGO_BIN_EXE_spindle"))
                .args(args)
                .current_dir(dir)
                .env("RUST_LOG", "error")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }

    /// CPU time the process's threads have used, in seconds ([`cpu_seconds_of`]).
    pub(crate) fn cpu_seconds(&self) -> f64 {
        cpu_seconds_of(self.0.id())
    }

    /// Peak resident memory in MiB.
    pub(crate) fn peak_mib(&self) -> f64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.0.id())).unwrap_or_default();
        let kib: f64 = status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        kib / 1024.0
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A multi-threaded tokio runtime for a benchmark's HTTP clients, with rustls' ring
/// provider installed for reqwest.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The rounds to run: `SPINDLE_BENCH_ROUNDS`, else `default`.
pub(crate) fn rounds(default: usize) -> usize {
    std::env::var("SPINDLE_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub(crate) fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// A fresh PostgreSQL database on the bench's server; returns its URL and the admin pool.
pub(crate) async fn fresh_database(name: &str) -> (String, sqlx::PgPool) {
    let admin_url = std::env::var("SPINDLE_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let database = format!("spindle_bench_{name}_{}", std::process::id());
    let admin = sqlx::PgPool::connect(&admin_url).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE DATABASE \"{database}\""
    )))
    .execute(&admin)
    .await
    .unwrap();
    let slash = admin_url.rfind('/').unwrap();
    (format!("{}/{database}", &admin_url[..slash]), admin)
}

/// CPU time the threads of process `pid` have used, in seconds, to the nanosecond (the
/// sum of each thread's `schedstat`; /proc's tick counts are 10 ms coarse).
pub(crate) fn cpu_seconds_of(pid: u32) -> f64 {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"));
    let nanos: u64 = tasks
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    nanos as f64 / 1e9
}
