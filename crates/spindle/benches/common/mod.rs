//! Helpers the service benchmarks share: processes of the `spindle` binary, free ports,
//! fresh PostgreSQL databases, medians.

#![allow(dead_code, reason = "each benchmark uses some of these")]

pub(crate) mod cpu;

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
    /// Starts `spindle args` in `dir`, its log thrown away; with `SPINDLE_BENCH_LOG=FILE`
    /// (and `RUST_LOG` as wanted, `error` otherwise) appended to FILE instead.
    pub(crate) fn start(dir: &Path, args: &[&str]) -> Process {
        let log = std::env::var_os("SPINDLE_BENCH_LOG").map(|file| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(file)
                .unwrap()
        });
        Process(
            Command::new(env!("CARGO_BIN_EXE_spindle"))
                .args(args)
                .current_dir(dir)
                .env(
                    "RUST_LOG",
                    std::env::var("RUST_LOG")
                        .ok()
                        .filter(|_| log.is_some())
                        .unwrap_or_else(|| "error".to_owned()),
                )
                .stdout(Stdio::null())
                .stderr(log.map_or_else(Stdio::null, Stdio::from))
                .spawn()
                .unwrap(),
        )
    }

    /// Starts `spindle args` in `dir`, its log of `filter` (`RUST_LOG`) written to `log`.
    pub(crate) fn start_logged(dir: &Path, args: &[&str], log: &Path, filter: &str) -> Process {
        Process(
            Command::new(env!("CARGO_BIN_EXE_spindle"))
                .args(args)
                .current_dir(dir)
                .env("RUST_LOG", filter)
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(log).unwrap())
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

/// `GET url` answered with JSON.
pub(crate) async fn get_json(http: &reqwest::Client, url: &str) -> serde_json::Value {
    http.get(url).send().await.unwrap().json().await.unwrap()
}

/// A fresh MySQL (MariaDB) database on the bench's server (`SPINDLE_TEST_MYSQL_URL`,
/// default mysql://root@127.0.0.1:3306/test); returns its URL.
pub(crate) async fn fresh_mysql_database(name: &str) -> String {
    let admin_url = std::env::var("SPINDLE_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_owned());
    let database = format!("spindle_bench_{name}_{}", std::process::id());
    let admin = sqlx::MySqlPool::connect(&admin_url).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{database}`")))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let slash = admin_url.rfind('/').unwrap();
    format!("{}/{database}", &admin_url[..slash])
}

/// Drops a database [`fresh_mysql_database`] made.
pub(crate) async fn drop_mysql_database(url: &str) {
    let (server, name) = url.rsplit_once('/').unwrap();
    if let Ok(admin) = sqlx::MySqlPool::connect(&format!("{server}/test")).await {
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE `{name}`")))
            .execute(&admin)
            .await;
        admin.close().await;
    }
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

/// The whole machine's CPU time so far, from the first line of `/proc/stat`: busy and
/// all (busy plus idle and I/O wait) in its ticks, and the number of CPUs, so that
/// `busy delta / all delta × cpus` is how many cores were busy on average between two
/// readings, whoever used them (the database's processes too).
pub(crate) fn machine_cpu() -> (u64, u64, usize) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let mut lines = stat.lines();
    let ticks: Vec<u64> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|n| n.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is in user already)
    let at = |i: usize| ticks.get(i).copied().unwrap_or(0);
    let idle = at(3) + at(4);
    let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    let cpus = lines
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count();
    (busy, busy + idle, cpus.max(1))
}
