//! Grapher benchmark: `cargo bench -p graph --bench grapher`.
//!
//! Builds chains with the built-in job factory and prints the median time of each
//! workload: the targets of the grapher issue, and the workloads Spin Cycle was measured on
//! in ../shared/bench/BASELINES.md (the `each-fanout` spec of gen_specs.py and the `test`
//! request of dev-test.yaml).

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use graph::Grapher;
use proto::JobArgs;
use serde_json::{Value, json};

const RUNS: usize = 7;

fn grapher(yaml: &str) -> Grapher {
    let report = spec::lint_str(Path::new("bench.yaml"), yaml);
    assert!(!report.has_errors(), "{:#?}", report.diagnostics);
    Grapher::new(report.specs, Arc::new(job::Registry::builtin()))
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Runs `work` RUNS times; returns the median and what the last run returned.
fn measure<T>(mut work: impl FnMut() -> T) -> (Duration, T) {
    let mut samples = Vec::new();
    let mut last = None;
    for _ in 0..RUNS {
        let start = Instant::now();
        let out = work();
        samples.push(start.elapsed());
        last = Some(out);
    }
    (median(samples), last.expect("RUNS > 0"))
}

const THREE_JOBS: &str = "sequences:
  expand:
    request: true
    args:
      required:
        - name: hosts
    nodes:
      per-host:
        category: sequence
        type: three
        each: [hosts:host]
  three:
    args:
      required:
        - name: host
    nodes:
      a:
        category: job
        type: noop
        args: [{expected: host}]
      b:
        category: job
        type: noop
        args: [{expected: host}]
        deps: [a]
      c:
        category: job
        type: noop
        args: [{expected: host}]
        deps: [b]
";

/// One `noop` per host (`crates/spindle/benches/scripts/big_request.py`'s spec too).
const BIG: &str = include_str!("../../../fixtures/specs/big.yaml");

/// grapher.md section 7's example.
const SECTION_7: &str = include_str!("../../../fixtures/specs/retried-sequence.yaml");

fn hosts(n: usize) -> JobArgs {
    let list: Vec<Value> = (0..n).map(|i| json!(format!("host-{i}"))).collect();
    let mut args = JobArgs::new();
    args.insert("hosts".to_owned(), Value::Array(list));
    args
}

fn row(label: &str, jobs: usize, time: Duration, spin_cycle: Option<f64>) {
    let ms = time.as_secs_f64() * 1e3;
    let ratio = spin_cycle.map_or("—".to_owned(), |sc| format!("{:.0}× faster", sc / ms));
    let baseline = spin_cycle.map_or("—".to_owned(), |sc| format!("{sc} ms"));
    println!("| {label} | {jobs} | {ms:.2} ms | {baseline} | {ratio} |");
}

fn main() {
    println!("| workload | jobs | median of {RUNS} | Spin Cycle | ratio |");
    println!("|---|---:|---:|---:|---:|");

    let expand = grapher(THREE_JOBS);
    let args = hosts(10_000);
    let (time, created) = measure(|| expand.create("expand", &args).unwrap());
    row(
        "3-job sequence expanded over 10,000 elements (target < 300 ms)",
        created.job_chain.jobs.len(),
        time,
        None,
    );

    // Issue #51's one request of N hosts (a `noop` each): what a create does with its
    // chain, step by step, at three sizes (each step's growth beside the size's).
    let big = grapher(BIG);
    for n in [10_000, 30_000, 100_000] {
        let args = hosts(n);
        let (time, created) = measure(|| big.create("big", &args).unwrap());
        let jobs = created.job_chain.jobs.len();
        row(
            &format!("{n} hosts, a `noop` each: the chain"),
            jobs,
            time,
            None,
        );
        let (time, fleets) = measure(|| graph::elements::fleets(&created.job_chain));
        assert_eq!(fleets[0].elements.len(), n);
        row(&format!("{n} hosts: its expansions"), jobs, time, None);
        let (time, _) = measure(|| serde_json::to_string(&created.job_chain).unwrap());
        row(&format!("{n} hosts: its JSON"), jobs, time, None);
    }

    let section_7 = grapher(SECTION_7);
    let empty = JobArgs::new();
    let (time, created) = measure(|| {
        let mut last = None;
        for _ in 0..1000 {
            last = Some(section_7.create("r", &empty).unwrap());
        }
        last.unwrap()
    });
    row(
        "1,000 sequential requests of grapher.md §7's 10-job example (target < 100 ms)",
        created.job_chain.jobs.len() * 1000,
        time,
        None,
    );

    let gen_specs =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/bench/gen_specs.py");
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-graph");
    let generated = std::process::Command::new("python3")
        .arg(&gen_specs)
        .arg(&out)
        .status();
    if generated.is_ok_and(|status| status.success()) {
        let text = std::fs::read_to_string(out.join("specs/each-fanout.yaml")).unwrap();
        let each = grapher(&text);
        for (n, spin_cycle_ms) in [(1000, 240.0), (5000, 6500.0)] {
            let args = hosts(n);
            let (time, created) = measure(|| each.create("each-fanout", &args).unwrap());
            row(
                &format!("gen_specs each-fanout, {n} hosts"),
                created.job_chain.jobs.len(),
                time,
                Some(spin_cycle_ms),
            );
        }
    }
    // Spin Cycle's dev `test` request where its files are (beside a checkout, as here),
    // else the project's own request of the same shape.
    let dev_test = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/spincycle/dev-test.yaml");
    let (text, request, what) = match std::fs::read_to_string(dev_test) {
        Ok(text) => (text, "test", "dev-test.yaml `test` request"),
        Err(_) => (
            std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/specs/fanout.yaml"),
            )
            .unwrap(),
            "fanout",
            "fixtures/specs/fanout.yaml `fanout` request (dev-test's shape)",
        ),
    };
    let test = grapher(&text);
    let (time, created) = measure(|| test.create(request, &empty).unwrap());
    row(what, created.job_chain.jobs.len(), time, Some(5.0));
}
