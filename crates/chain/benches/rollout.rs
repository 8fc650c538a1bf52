//! Fleet rollout benchmark (issue #50): `cargo bench -p chain --bench rollout`.
//!
//! The same fan-out of 10,000 `noop` elements, built by the grapher from a spec, run in
//! one process with a Reporter that only counts: plainly, and with `max_failures: 1%`
//! and four waves (`[1, 10%, 50%, 100%]`). Prints the median wall time of several runs
//! of each and their ratio (the bound: within 20%).

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::run_once;
use proto::{JobArgs, JobChain};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const N: usize = 10_000;
const RUNS: usize = 9;

/// A request `fleet` whose node `each-host` runs a `noop` per host, with `extra` fields.
fn spec(extra: &str) -> String {
    format!(
        "sequences:
  fleet:
    request: true
    args:
      required:
        - name: hosts
    nodes:
      each-host:
        category: job
        type: noop
        each: [hosts:host]
{extra}"
    )
}

fn chain(extra: &str) -> JobChain {
    let report = spec::lint_str(Path::new("bench.yaml"), &spec(extra));
    assert!(!report.has_errors(), "{:#?}", report.diagnostics);
    let grapher = graph::Grapher::new(report.specs, Arc::new(job::Registry::builtin()));
    let hosts: Vec<serde_json::Value> = (0..N).map(|i| format!("web-{i:05}").into()).collect();
    let mut args = JobArgs::new();
    args.insert("hosts".to_owned(), serde_json::Value::Array(hosts));
    grapher.create("fleet", &args).expect("built").job_chain
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let shapes = [
        ("10,000 elements, plain", ""),
        (
            "10,000 elements, max_failures: 1%, waves: [1, 10%, 50%, 100%]",
            "        max_failures: 1%\n        waves: [1, 10%, 50%, 100%]\n",
        ),
    ];
    println!("| fan-out | jobs | median of {RUNS} | per element |");
    println!("|---|---:|---:|---:|");
    let mut medians = Vec::new();
    for (label, extra) in shapes {
        let built = chain(extra);
        let jobs = built.jobs.len();
        let mut samples: Vec<Duration> = (0..RUNS)
            .map(|_| runtime.block_on(run_once(built.clone())))
            .collect();
        samples.sort();
        let median = samples[RUNS / 2];
        medians.push(median);
        println!(
            "| {label} | {jobs} | {:.1} ms | {:.2} µs |",
            median.as_secs_f64() * 1e3,
            median.as_secs_f64() * 1e6 / N as f64
        );
    }
    println!(
        "\nwith a budget and waves / plain: {:.2}",
        medians[1].as_secs_f64() / medians[0].as_secs_f64()
    );
}
