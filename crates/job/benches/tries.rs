//! Per-try cost of a job served by a program (the job protocol) against a built-in one:
//! `cargo bench -p job --bench tries -- [--tries N] [--supervisor PATH/TO/spindle]`.
//!
//! Each kind runs N tries of a no-op job one after another (default 10,000; Python's
//! interpreter start makes its tries far slower, so it runs N/10): the built-in `noop`,
//! `shell-command` running `true`, an `sh` program answering the protocol, a Go program
//! built with the Go kit (when `go` is installed) and a Python one with the Python kit
//! (when `python3` is). With `--supervisor`, programs run under `spindle __supervise` as
//! a Job Runner runs them (so that they die with it); without, directly. The kits' rows
//! marked `supervised: false` run as a Job Runner runs a program so configured: directly,
//! told the runner's pid, the kit guarding itself against the runner's death; the row
//! marked `fork_server: true` has its tries forked by the program's fork server.

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use job::external::ProgramConfig;
use job::{CreateContext, Factory as _, JobId, Output, Registry, RunContext, Status};
use proto::{JobArgs, State};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

const GO_NOOP: &str = r#"package main

import (
	spindle "spindle/sdk/go"
	"spindle/sdk/go/job"
	"spindle/sdk/go/proto"
)

type noop struct{ id job.Id }

func (j *noop) Create(map[string]interface{}) error { return nil }
func (j *noop) Serialize() ([]byte, error)            { return nil, nil }
func (j *noop) Deserialize([]byte) error              { return nil }
func (j *noop) Stop() error                           { return nil }
func (j *noop) Status() string                        { return "" }
func (j *noop) Id() job.Id                            { return j.id }
func (j *noop) Run(map[string]interface{}) (job.Return, error) {
	return job.Return{State: proto.STATE_COMPLETE}, nil
}

type factory struct{}

func (factory) Make(id job.Id) (job.Job, error) { return &noop{id: id}, nil }

func main() { spindle.Serve(factory{}) }
"#;

/// The Go no-op program, built with the kit in `dir`; None without Go.
fn go_program(dir: &Path) -> Option<PathBuf> {
    let module = dir.join("go-noop");
    std::fs::create_dir_all(&module).unwrap();
    let sdk = repository().join("sdk/go").canonicalize().unwrap();
    std::fs::write(
        module.join("go.mod"),
        format!(
            "module go-noop\n\ngo 1.19\n\nrequire spindle/sdk/go v0.0.0\n\nreplace spindle/sdk/go => {}\n",
            sdk.display()
        ),
    )
    .unwrap();
    std::fs::write(module.join("main.go"), GO_NOOP).unwrap();
    let out = dir.join("go-noop-bin");
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(&module)
        .env("GOFLAGS", "-mod=mod")
        .env("GOTOOLCHAIN", "local")
        .output()
        .ok()?;
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    Some(out)
}

fn python_program(dir: &Path) -> Option<PathBuf> {
    Command::new("python3")
        .arg("--version")
        .output()
        .ok()?
        .status
        .success()
        .then_some(())?;
    let path = dir.join("noop.py");
    let sdk = repository().join("sdk/python").canonicalize().unwrap();
    executable(
        &path,
        &format!(
            "#!/usr/bin/env python3\nimport sys\nsys.path.insert(0, {:?})\nimport spindle_job\n\n@spindle_job.job(\"noop-python\")\ndef noop(ctx):\n    pass\n\n@spindle_job.job(\"noop-python-guarded\")\ndef guarded(ctx):\n    pass\n\n@spindle_job.job(\"noop-python-forked\")\ndef forked(ctx):\n    pass\n\nspindle_job.serve()\n",
            sdk.display().to_string()
        ),
    );
    Some(path)
}

/// Milliseconds a try, over `tries` tries of `job_type` made from `args`.
async fn per_try(
    registry: &Registry,
    job_type: &str,
    args: serde_json::Value,
    tries: usize,
) -> f64 {
    let id = JobId {
        job_type: job_type.to_owned(),
        name: "bench".to_owned(),
        id: "abcd".to_owned(),
        request_id: "bench".to_owned(),
    };
    let mut job = registry.make(&id).unwrap();
    let mut job_args: JobArgs = match args {
        serde_json::Value::Object(map) => map.into(),
        _ => JobArgs::new(),
    };
    job.create(&mut job_args, &CreateContext::default())
        .unwrap();
    let bytes = job.serialize().unwrap();
    let started = Instant::now();
    for _ in 0..tries {
        let mut job = registry.make(&id).unwrap();
        job.deserialize(&bytes).unwrap();
        let outcome = job
            .run(
                &mut JobArgs::new(),
                RunContext {
                    cancel: CancellationToken::new(),
                    status: Status::default(),
                    output: Output::discard(),
                    secrets: job::Secrets::default(),
                },
            )
            .await;
        assert_eq!(outcome.state, State::Complete, "{outcome:?}");
    }
    started.elapsed().as_secs_f64() * 1000.0 / tries as f64
}

#[tokio::main]
async fn main() {
    let mut tries = 10_000;
    let mut words = std::env::args().skip(1);
    while let Some(word) = words.next() {
        match word.as_str() {
            "--tries" => {
                tries = words
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("--tries N");
            }
            "--supervisor" => job::set_supervisor(
                PathBuf::from(words.next().expect("--supervisor PATH")),
                "__supervise",
            ),
            _ => {}
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let mut registry = Registry::builtin();
    let sh = dir.path().join("noop.sh");
    executable(
        &sh,
        "#!/bin/sh\necho '{\"protocol\":1,\"state\":\"COMPLETE\"}' >&3\n",
    );
    // `-guarded` types: the program guards itself against the runner's death
    // (`supervised: false`) rather than run under the supervisor; `-forked`: its tries
    // are forked by the program's fork server (`fork_server: true`).
    let mut add = |program: &Path, job_type: &str| {
        let forked = job_type.ends_with("-forked");
        registry
            .add_program(&ProgramConfig {
                program: program.to_path_buf(),
                types: Some(vec![job_type.to_owned()]),
                supervised: (!forked).then_some(!job_type.ends_with("-guarded")),
                fork_server: forked.then_some(true),
                ..ProgramConfig::default()
            })
            .unwrap();
    };
    add(&sh, "noop-sh");
    let go = go_program(dir.path());
    if let Some(go) = &go {
        add(go, "noop-go");
        add(go, "noop-go-guarded");
    }
    let python = python_program(dir.path());
    if let Some(python) = &python {
        add(python, "noop-python");
        add(python, "noop-python-guarded");
        add(python, "noop-python-forked");
    }
    println!("| job | tries | ms a try |");
    println!("|---|---:|---:|");
    let rows: [(&str, &str, serde_json::Value, usize, bool); 8] = [
        ("built-in noop", "noop", json!({}), tries, true),
        (
            "shell-command `true`",
            "shell-command",
            json!({"cmd": "true"}),
            tries,
            true,
        ),
        (
            "job protocol: sh program",
            "noop-sh",
            json!({}),
            tries,
            true,
        ),
        (
            "job protocol: Go kit",
            "noop-go",
            json!({}),
            tries,
            go.is_some(),
        ),
        (
            "job protocol: Go kit, `supervised: false`",
            "noop-go-guarded",
            json!({}),
            tries,
            go.is_some(),
        ),
        (
            "job protocol: Python kit",
            "noop-python",
            json!({}),
            (tries / 10).max(1),
            python.is_some(),
        ),
        (
            "job protocol: Python kit, `supervised: false`",
            "noop-python-guarded",
            json!({}),
            (tries / 10).max(1),
            python.is_some(),
        ),
        (
            "job protocol: Python kit, `fork_server: true`",
            "noop-python-forked",
            json!({}),
            tries,
            python.is_some(),
        ),
    ];
    for (name, job_type, args, n, present) in rows {
        if present {
            let ms = per_try(&registry, job_type, args, n).await;
            println!("| {name} | {n} | {ms:.3} |");
        } else {
            println!("| {name} | skipped: its language is not installed | |");
        }
    }
}
