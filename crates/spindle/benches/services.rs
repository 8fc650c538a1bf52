//! End-to-end benchmark of the services: `cargo bench -p spindle --bench services`.
//!
//! Real `spindle` processes, no-op jobs:
//! - a 10,000-job fan-out with `spindle run` on SQLite (process start to exit);
//! - the same fan-out from POST to COMPLETE with `spindle rm` + `spindle jr` over HTTP on
//!   PostgreSQL (`SPINDLE_TEST_POSTGRES_URL`, default postgres://postgres@127.0.0.1:5432/test;
//!   a fresh database);
//! - creating a 10-job request (grapher.md §7's example), median of 200 POSTs;
//! - 100 concurrent requests of 100 jobs each, POST to all COMPLETE;
//!
//! It also reports the peak resident memory (VmHWM) of each process.
//!
//! `cargo bench -p spindle --bench services -- metrics` measures only the cost of
//! metrics: the same fan-out over HTTP on two `spindle rm` + `spindle jr` pairs, one with
//! metrics on (the default) and one with `--metrics false`, in alternating rounds
//! (`SPINDLE_BENCH_ROUNDS`, default 21), each pair's wall time and CPU time (both
//! processes, from /proc) per round: their medians, and the median of the rounds'
//! on/off ratios (each round runs both, so the machine's drift cancels).
//!
//! `cargo bench -p spindle --bench services -- big` measures only the big requests of
//! issue #17: `spindle run` (SQLite, process start to exit, and its peak resident memory
//! through `/usr/bin/time`) of one `each:` job node over a static list of 100,000 hosts
//! and of the 10,000-job fan-out, alternating, `SPINDLE_BENCH_ROUNDS` rounds (default
//! 3); then the runner's own memory per job: the 100,000-job request through `spindle
//! rm` (SQLite) + `spindle jr`, the rise of the runner's peak resident memory over what
//! it held idle, divided by the jobs.

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]

mod common;

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::{Process, free_port, fresh_database, get_json, median, rounds, runtime};

fn fanout_spec(name: &str, n: usize) -> String {
    let mut out = format!(
        "sequences:\n  {name}:\n    request: true\n    nodes:\n      start:\n        category: job\n        type: noop\n"
    );
    let mut ends = Vec::new();
    for i in 0..n {
        let _ = write!(
            out,
            "      j{i}:\n        category: job\n        type: noop\n        deps: [start]\n"
        );
        ends.push(format!("j{i}"));
    }
    let _ = write!(
        out,
        "      end:\n        category: job\n        type: noop\n        deps: [{}]\n",
        ends.join(", ")
    );
    out
}

const TEN_JOBS: &str = "sequences:
  ten:
    request: true
    nodes:
      a:
        category: job
        type: noop
      s:
        category: sequence
        type: sub
        deps: [a]
  sub:
    nodes:
      b:
        category: job
        type: noop
";

async fn wait_up(http: &reqwest::Client, base: &str) {
    while http.get(format!("{base}/version")).send().await.is_err() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn create(http: &reqwest::Client, base: &str, request_type: &str) -> String {
    let response = http
        .post(format!("{base}/api/v1/requests"))
        .json(&json!({"type": request_type, "args": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.unwrap();
    body["id"].as_str().unwrap().to_owned()
}

async fn wait_complete(http: &reqwest::Client, base: &str, id: &str) {
    loop {
        let request = get_json(http, &format!("{base}/api/v1/requests/{id}")).await;
        match request["state"].as_u64() {
            Some(3) => return,
            Some(4 | 6) => panic!("request {id} ended in state {}", request["state"]),
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// One `each:` job node over `hosts` hosts, given as a static arg of the spec.
fn expansion_spec(name: &str, hosts: usize) -> String {
    let list: Vec<String> = (0..hosts).map(|i| format!("host{i:06}")).collect();
    format!(
        "sequences:\n  {name}:\n    request: true\n    args:\n      static:\n        - name: hosts\n          default: [{}]\n    nodes:\n      each-host:\n        category: job\n        type: noop\n        each:\n          - hosts:host\n",
        list.join(", ")
    )
}

/// `spindle run` of `request` from the specs in `specs`: wall time, process start to exit, and peak resident
/// memory in MiB (`/usr/bin/time -f %M`; none if it is not installed).
fn timed_run(dir: &Path, specs: &str, request: &str, database: &str) -> (Duration, Option<f64>) {
    let spindle = env!("CARGO_BIN_EXE_spindle");
    let args = ["run", "--specs", specs, "--database", database, request];
    let timer = Path::new("/usr/bin/time").exists();
    let mut command = if timer {
        let mut command = Command::new("/usr/bin/time");
        command.args(["-f", "%M", spindle]).args(args);
        command
    } else {
        let mut command = Command::new(spindle);
        command.args(args);
        command
    };
    let start = Instant::now();
    let output = command.current_dir(dir).output().unwrap();
    let elapsed = start.elapsed();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let peak = stderr
        .lines()
        .last()
        .and_then(|line| line.trim().parse::<f64>().ok())
        .filter(|_| timer)
        .map(|kib| kib / 1024.0);
    (elapsed, peak)
}

/// Issue #17's big requests (see the module's documentation).
fn big_requests(dir: &Path) {
    let rounds = rounds(3);
    // A directory of its own, so that the fan-out's runs do not read this spec.
    let specs = dir.join("specs-big");
    std::fs::create_dir(&specs).unwrap();
    std::fs::write(
        specs.join("each-100000.yaml"),
        expansion_spec("each-100000", 100_000),
    )
    .unwrap();
    std::fs::write(specs.join("ten.yaml"), TEN_JOBS).unwrap();
    let workloads = [
        (
            "one `each:` job node over 100,000 hosts (100,006 jobs)",
            "specs-big",
            "each-100000",
            "< 2 s",
        ),
        (
            "the 10,000-job fan-out (10,004 jobs)",
            "specs",
            "fanout-10000",
            "< 150 ms",
        ),
    ];
    let mut results: Vec<Vec<(Duration, Option<f64>)>> = vec![Vec::new(); workloads.len()];
    for round in 0..rounds {
        for (at, (_, specs, request, _)) in workloads.iter().enumerate() {
            let database = format!("sqlite://big-{round}-{at}.db");
            results[at].push(timed_run(dir, specs, request, &database));
        }
    }
    println!(
        "| `spindle run`, SQLite, {rounds} alternating rounds | process start to exit (each round) | peak memory (each round) | target |"
    );
    println!("|---|---:|---:|---:|");
    for ((label, _, _, target), runs) in workloads.iter().zip(&results) {
        let times: Vec<String> = runs
            .iter()
            .map(|(time, _)| format!("{:.2} s", time.as_secs_f64()))
            .collect();
        let peaks: Vec<String> = runs
            .iter()
            .map(|(_, peak)| peak.map_or("—".to_owned(), |mib| format!("{mib:.0} MiB")))
            .collect();
        println!(
            "| {label} | {} | {} | {target} |",
            times.join(", "),
            peaks.join(", ")
        );
    }

    let runtime = runtime();
    runtime.block_on(async {
        let (rm_port, jr_port) = (free_port(), free_port());
        let (rm_base, jr_base) = (format!("http://127.0.0.1:{rm_port}"), format!("http://127.0.0.1:{jr_port}"));
        let rm = Process::start(
            dir,
            &["rm", "--listen", &format!("127.0.0.1:{rm_port}"), "--specs", "specs-big", "--database", "sqlite://big-rm.db", "--jr-url", &jr_base],
        );
        let jr = Process::start(dir, &["jr", "--listen", &format!("127.0.0.1:{jr_port}"), "--rm-url", &rm_base]);
        let http = reqwest::Client::new();
        wait_up(&http, &rm_base).await;
        wait_up(&http, &jr_base).await;
        // A small request first, so that the idle figure includes a runner that has run.
        let id = create(&http, &rm_base, "ten").await;
        wait_complete(&http, &rm_base, &id).await;
        let idle = jr.peak_mib();
        let start = Instant::now();
        let id = create(&http, &rm_base, "each-100000").await;
        wait_complete(&http, &rm_base, &id).await;
        let elapsed = start.elapsed();
        let peak = jr.peak_mib();
        println!();
        println!("| runner memory, `spindle rm` (SQLite) + `spindle jr`, the 100,006-job request | POST to COMPLETE | runner peak / idle | per job (target < 1 KiB) |");
        println!("|---|---:|---:|---:|");
        println!(
            "| one `each:` job node over 100,000 hosts | {:.2} s | {peak:.0} / {idle:.0} MiB | {:.0} B |",
            elapsed.as_secs_f64(),
            (peak - idle) * 1024.0 * 1024.0 / 100_006.0
        );
        drop((rm, jr));
    });
}

/// The fan-out over HTTP with metrics on and off, alternating rounds.
fn metrics_overhead(dir: &Path) {
    let rounds = rounds(21);
    let runtime = runtime();
    runtime.block_on(async {
        let http = reqwest::Client::new();
        let mut pairs = Vec::new();
        for (label, metrics) in [("on", "true"), ("off", "false")] {
            let (url, admin) = fresh_database(label).await;
            let (rm_port, jr_port) = (free_port(), free_port());
            let (rm_base, jr_base) = (format!("http://127.0.0.1:{rm_port}"), format!("http://127.0.0.1:{jr_port}"));
            let rm = Process::start(dir, &["rm", "--listen", &format!("127.0.0.1:{rm_port}"), "--specs", "specs", "--database", &url, "--jr-url", &jr_base, "--metrics", metrics]);
            let jr = Process::start(dir, &["jr", "--listen", &format!("127.0.0.1:{jr_port}"), "--rm-url", &rm_base, "--metrics", metrics]);
            wait_up(&http, &rm_base).await;
            wait_up(&http, &jr_base).await;
            // A first run warms both up.
            let id = create(&http, &rm_base, "fanout-10000").await;
            wait_complete(&http, &rm_base, &id).await;
            pairs.push((label, rm, jr, rm_base, url, admin));
        }
        let mut wall: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
        let mut cpu: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
        for round in 0..rounds {
            let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for which in order {
                let (_, rm, jr, base, _, _) = &pairs[which];
                let cpu_before = rm.cpu_seconds() + jr.cpu_seconds();
                let start = Instant::now();
                let id = create(&http, base, "fanout-10000").await;
                wait_complete(&http, base, &id).await;
                wall[which].push(start.elapsed());
                cpu[which].push(Duration::from_secs_f64(rm.cpu_seconds() + jr.cpu_seconds() - cpu_before));
            }
        }
        println!("| 10,004-job fan-out over HTTP, PostgreSQL, {rounds} alternating rounds | metrics on (median) | metrics off (median) | on / off, median of the rounds' ratios |");
        println!("|---|---:|---:|---:|");
        let row = |what: &str, samples: &[Vec<Duration>; 2]| {
            let (on, off) = (median(samples[0].clone()), median(samples[1].clone()));
            let mut ratios: Vec<f64> = samples[0].iter().zip(&samples[1]).map(|(on, off)| on.as_secs_f64() / off.as_secs_f64()).collect();
            ratios.sort_by(f64::total_cmp);
            println!("| {what} | {:.1} ms | {:.1} ms | {:.3} |", on.as_secs_f64() * 1e3, off.as_secs_f64() * 1e3, ratios[ratios.len() / 2]);
        };
        row("POST to COMPLETE (wall)", &wall);
        row("CPU time of rm + jr", &cpu);
        for (_, rm, jr, _, url, admin) in pairs {
            drop((rm, jr));
            let database = url.rsplit('/').next().unwrap().to_owned();
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE \"{database}\" WITH (FORCE)"))).execute(&admin).await;
        }
    });
}

// Long because it is the benchmark's script in order: each measurement set up, run and
// printed in turn, as BENCHMARKS.md lists them.
fn main() {
    let dir = tempfile::tempdir().unwrap();
    let specs = dir.path().join("specs");
    std::fs::create_dir(&specs).unwrap();
    std::fs::write(
        specs.join("fanout-10000.yaml"),
        fanout_spec("fanout-10000", 10_000),
    )
    .unwrap();
    std::fs::write(specs.join("fanout-98.yaml"), fanout_spec("fanout-98", 98)).unwrap();
    std::fs::write(specs.join("ten.yaml"), TEN_JOBS).unwrap();
    if std::env::args().any(|arg| arg == "metrics") {
        metrics_overhead(dir.path());
        return;
    }
    if std::env::args().any(|arg| arg == "big") {
        big_requests(dir.path());
        return;
    }
    println!("| workload | result | peak memory |");
    println!("|---|---:|---:|");

    // spindle run, SQLite: process start to exit, median of 3.
    let mut samples = Vec::new();
    for round in 0..3 {
        let start = Instant::now();
        let output = Command::new(env!("CARGO_BIN_EXE_spindle"))
            .args([
                "run",
                "--specs",
                "specs",
                "--database",
                &format!("sqlite://run-{round}.db"),
                "fanout-10000",
            ])
            .current_dir(dir.path())
            .output()
            .unwrap();
        samples.push(start.elapsed());
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let peak = {
        let output = Command::new("/usr/bin/time")
            .args([
                "-f",
                "%M",
                env!("CARGO_BIN_EXE_spindle"),
                "run",
                "--specs",
                "specs",
                "--database",
                "sqlite://run-mem.db",
                "fanout-10000",
            ])
            .current_dir(dir.path())
            .output();
        output
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stderr)
                    .trim()
                    .lines()
                    .last()
                    .and_then(|l| l.parse::<f64>().ok())
            })
            .map_or("—".to_owned(), |kib| format!("{:.0} MiB", kib / 1024.0))
    };
    println!(
        "| `spindle run`, 10,004-job fan-out, SQLite (process start to exit, median of 3) | {:.0} ms | {peak} |",
        median(samples).as_secs_f64() * 1e3
    );

    let runtime = runtime();
    runtime.block_on(async {
        let (url, admin) = fresh_database("services").await;
        let database = url.rsplit('/').next().unwrap().to_owned();
        let (rm_port, jr_port) = (free_port(), free_port());
        let (rm_base, jr_base) = (format!("http://127.0.0.1:{rm_port}"), format!("http://127.0.0.1:{jr_port}"));
        let rm = Process::start(
            dir.path(),
            &["rm", "--listen", &format!("127.0.0.1:{rm_port}"), "--specs", "specs", "--database", &url, "--jr-url", &jr_base],
        );
        let jr = Process::start(dir.path(), &["jr", "--listen", &format!("127.0.0.1:{jr_port}"), "--rm-url", &rm_base]);
        let http = reqwest::Client::new();
        wait_up(&http, &rm_base).await;
        wait_up(&http, &jr_base).await;

        let mut samples = Vec::new();
        for _ in 0..3 {
            let start = Instant::now();
            let id = create(&http, &rm_base, "fanout-10000").await;
            wait_complete(&http, &rm_base, &id).await;
            samples.push(start.elapsed());
        }
        println!("| `spindle rm` + `spindle jr` over HTTP, PostgreSQL: 10,004-job fan-out, POST to COMPLETE (median of 3) | {:.0} ms | |", median(samples).as_secs_f64() * 1e3);

        let mut samples = Vec::new();
        for _ in 0..200 {
            let start = Instant::now();
            create(&http, &rm_base, "ten").await;
            samples.push(start.elapsed());
        }
        println!("| create a 10-job request (POST answered), median of 200 | {:.2} ms | |", median(samples).as_secs_f64() * 1e3);

        let start = Instant::now();
        let mut ids = Vec::new();
        let mut creating = tokio::task::JoinSet::new();
        for _ in 0..100 {
            let (http, base) = (http.clone(), rm_base.clone());
            creating.spawn(async move { create(&http, &base, "fanout-98").await });
        }
        while let Some(id) = creating.join_next().await {
            ids.push(id.unwrap());
        }
        for id in &ids {
            wait_complete(&http, &rm_base, id).await;
        }
        println!("| 100 concurrent requests of 100 jobs, POST to all COMPLETE | {:.0} ms | |", start.elapsed().as_secs_f64() * 1e3);
        println!("| peak memory: `spindle rm` / `spindle jr` after all of the above | | {:.0} MiB / {:.0} MiB |", rm.peak_mib(), jr.peak_mib());
        drop((rm, jr));
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE \"{database}\" WITH (FORCE)"))).execute(&admin).await;
    });
}
