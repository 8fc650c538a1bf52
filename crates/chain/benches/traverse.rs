//! Traverser benchmark: `cargo bench -p chain --bench traverse`.
//!
//! Runs chains of no-op jobs in one process with a Reporter that only counts what it
//! receives: a fan-out (start job, 10,000 parallel jobs, end job) and a linear chain of
//! 10,000 jobs. Prints the median wall time of several runs and the peak resident memory
//! per job (VmHWM from /proc, measured in a fresh process per shape so runs do not mix).

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]

mod common;

use std::collections::BTreeMap;

use common::run_once;
use proto::{JobChain, State};

/// The allocator the `spindle` binary runs chains with (its `main.rs`), so that time and
/// memory are what a runner has.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const N: usize = 10_000;
const RUNS: usize = 7;

fn job(id: String) -> proto::Job {
    proto::Job {
        name: id.clone(),
        job_type: "noop".to_owned(),
        state: State::Pending,
        sequence_id: "start".to_owned(),
        id,
        ..proto::Job::default()
    }
}

fn fan_out(n: usize) -> JobChain {
    let mut jobs = BTreeMap::new();
    let mut adjacency_list = BTreeMap::new();
    let middle: Vec<String> = (0..n).map(|i| format!("j{i}")).collect();
    for id in middle
        .iter()
        .chain(["start".to_owned(), "end".to_owned()].iter())
    {
        jobs.insert(id.clone(), job(id.clone()));
    }
    adjacency_list.insert("start".to_owned(), middle.clone());
    for id in &middle {
        adjacency_list.insert(id.clone(), vec!["end".to_owned()]);
    }
    JobChain {
        request_id: "fan-out".to_owned(),
        jobs,
        adjacency_list,
        state: State::Pending,
        finished_jobs: 0,
    }
}

fn linear(n: usize) -> JobChain {
    let mut jobs = BTreeMap::new();
    let mut adjacency_list = BTreeMap::new();
    let ids: Vec<String> = std::iter::once("start".to_owned())
        .chain((1..n).map(|i| format!("j{i}")))
        .collect();
    for (i, id) in ids.iter().enumerate() {
        jobs.insert(id.clone(), job(id.clone()));
        if let Some(next) = ids.get(i + 1) {
            adjacency_list.insert(id.clone(), vec![next.clone()]);
        }
    }
    JobChain {
        request_id: "linear".to_owned(),
        jobs,
        adjacency_list,
        state: State::Pending,
        finished_jobs: 0,
    }
}

/// A `/proc/self/status` field in KiB: `VmHWM` (peak) or `VmRSS` (now).
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|line| line.starts_with(field))
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|kib| kib.parse().ok())
        .unwrap_or(0)
}

fn main() {
    // `--shape fan-out|linear` measures memory of one shape in this process.
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if let Some(pos) = args.iter().position(|a| a == "--shape") {
        let shape = args[pos + 1].clone();
        let before = status_kib("VmRSS:");
        let chain = if shape == "fan-out" {
            fan_out(N)
        } else {
            linear(N)
        };
        runtime.block_on(run_once(chain));
        let peak = status_kib("VmHWM:");
        println!("{}", (peak.saturating_sub(before)) * 1024 / (N as u64 + 2));
        return;
    }
    println!("| shape | jobs | median of {RUNS} | per job | peak memory per job |");
    println!("|---|---:|---:|---:|---:|");
    for (label, shape, target) in [
        ("fan-out: start, 10,000 parallel, end", "fan-out", 50),
        ("linear chain of 10,000", "linear", 100),
    ] {
        let mut samples = Vec::new();
        for _ in 0..RUNS {
            let chain = if shape == "fan-out" {
                fan_out(N)
            } else {
                linear(N)
            };
            samples.push(runtime.block_on(run_once(chain)));
        }
        samples.sort();
        let median = samples[RUNS / 2];
        let memory = std::process::Command::new(&args[0])
            .args(["--shape", shape])
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
            .unwrap_or_default();
        println!(
            "| {label} (target < {target} ms) | {} | {:.1} ms | {:.1} µs | {memory} bytes |",
            if shape == "fan-out" { N + 2 } else { N },
            median.as_secs_f64() * 1e3,
            median.as_secs_f64() * 1e6 / N as f64,
        );
    }
}
