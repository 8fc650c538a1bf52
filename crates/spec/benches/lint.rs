//! Linter benchmark: `cargo bench -p spec --bench lint`.
//!
//! Workloads: 1,000 generated spec files holding 100,000 nodes (half fan-outs, half
//! chains, in the format of ../shared/bench/gen_specs.py), and the linter workloads that
//! gen_specs.py writes, which ../shared/bench/BASELINES.md measured Spin Cycle on.
//! Prints the median of several runs of loading and checking each (what `spindle lint`
//! does, less printing).

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a benchmark prints its table"
)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const RUNS: usize = 7;

fn noop(out: &mut String, name: &str, deps: &[String]) {
    let _ = write!(
        out,
        "      {name}:\n        category: job\n        type: noop\n        args: []\n        sets: []\n        deps: [{}]\n",
        deps.join(", ")
    );
}

fn header(out: &mut String, name: &str) {
    let _ = write!(
        out,
        "---\nsequences:\n  {name}:\n    request: true\n    args:\n      required: []\n      optional: []\n    nodes:\n"
    );
}

/// start → n parallel jobs → end: n + 2 nodes.
fn fanout(name: &str, n: usize) -> String {
    let mut out = String::new();
    header(&mut out, name);
    noop(&mut out, "start", &[]);
    let jobs: Vec<String> = (1..=n).map(|i| format!("j{i}")).collect();
    for job in &jobs {
        noop(&mut out, job, &["start".to_owned()]);
    }
    noop(&mut out, "end", &jobs);
    out
}

/// n jobs in a line.
fn chain(name: &str, n: usize) -> String {
    let mut out = String::new();
    header(&mut out, name);
    for i in 1..=n {
        let deps = if i > 1 {
            vec![format!("j{}", i - 1)]
        } else {
            vec![]
        };
        noop(&mut out, &format!("j{i}"), &deps);
    }
    out
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn measure(paths: &[PathBuf]) -> (Duration, usize, usize) {
    let mut samples = Vec::with_capacity(RUNS);
    let mut counts = (0, 0);
    for _ in 0..RUNS {
        let start = Instant::now();
        let report = spec::lint(paths).expect("workload is readable");
        samples.push(start.elapsed());
        assert!(
            !report.has_errors(),
            "workload lints clean: {:?}",
            report.diagnostics.first()
        );
        let n_nodes = report.specs.sequences().iter().map(|s| s.nodes.len()).sum();
        counts = (report.n_files, n_nodes);
        std::hint::black_box(report);
    }
    (median(samples), counts.0, counts.1)
}

fn main() {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-lint");
    let _ = std::fs::remove_dir_all(&target);
    let many = target.join("many");
    std::fs::create_dir_all(&many).unwrap();
    for i in 0..1000 {
        let text = if i % 2 == 0 {
            fanout(&format!("fanout-{i}"), 98)
        } else {
            chain(&format!("chain-{i}"), 100)
        };
        std::fs::write(many.join(format!("spec-{i:04}.yaml")), text).unwrap();
    }
    let mut rows = vec![(
        "1,000 files, 100,000 nodes (half fan-out, half chain)".to_owned(),
        vec![many],
    )];

    let gen_specs =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/bench/gen_specs.py");
    let generated = target.join("gen");
    let status = std::process::Command::new("python3")
        .arg(&gen_specs)
        .arg(&generated)
        .status();
    if status.is_ok_and(|s| s.success()) {
        for (label, path) in [
            (
                "gen_specs fanout-1000 (1,002 nodes)",
                "specs/fanout-1000.yaml",
            ),
            (
                "gen_specs lint/fanout-5000 (5,002 nodes)",
                "lint/fanout-5000",
            ),
            ("gen_specs chain-1000", "specs/chain-1000.yaml"),
            ("gen_specs chain-5000", "specs/chain-5000.yaml"),
            (
                "gen_specs lint/big (200 sequences x 50 nodes, nested calls)",
                "lint/big",
            ),
            ("gen_specs specs/ (all RM specs)", "specs"),
        ] {
            rows.push((label.to_owned(), vec![generated.join(path)]));
        }
    } else {
        eprintln!(
            "python3 {} failed; only the generated 1,000-file workload runs",
            gen_specs.display()
        );
    }

    println!("| workload | files | nodes | median of {RUNS} |");
    println!("|---|---:|---:|---:|");
    for (label, paths) in rows {
        let (time, n_files, n_nodes) = measure(&paths);
        println!(
            "| {label} | {n_files} | {n_nodes} | {:.1} ms |",
            time.as_secs_f64() * 1e3
        );
    }
}
