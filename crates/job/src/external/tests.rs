//! The job protocol against real processes: small `sh` programs that answer (or fail to
//! answer) as a kit would. The Go and Python kits are tried end to end in the binary's
//! tests.

use std::path::{Path, PathBuf};
use std::time::Duration;

use proto::{JobArgs, State};
use serde_json::{Value, json};

use super::*;
use crate::Factory as _;
use crate::tests::{args, ctx};

/// A job program: `script` run by `sh`, in its own temporary directory.
struct Script {
    dir: tempfile::TempDir,
    path: PathBuf,
}

fn script(body: &str) -> Script {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.sh");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    Script { dir, path }
}

fn config(path: &Path, types: Option<&[&str]>) -> ProgramConfig {
    ProgramConfig {
        program: path.to_path_buf(),
        types: types.map(|t| t.iter().map(|s| (*s).to_owned()).collect()),
        stop_grace: Some("2s".to_owned()),
        ..ProgramConfig::default()
    }
}

fn id(job_type: &str) -> JobId {
    JobId {
        job_type: job_type.to_owned(),
        name: "step".to_owned(),
        id: "j1ab".to_owned(),
        request_id: "req1".to_owned(),
    }
}

/// A registry with the built-ins and `body`'s program serving `types`.
fn registry_with(body: &str, types: &[&str]) -> (Registry, Script) {
    let program = script(body);
    let mut registry = Registry::builtin();
    registry
        .add_program(&config(&program.path, Some(types)))
        .unwrap();
    (registry, program)
}

/// One try of a job of `job_type` made from `bytes` and `job_args`, with `data`.
async fn try_once(
    registry: &Registry,
    job_type: &str,
    data: &mut JobArgs,
    ctx: RunContext,
) -> Outcome {
    let mut job = registry.make(&id(job_type)).unwrap();
    job.deserialize(b"stored").unwrap();
    job.set_args(&args(json!({"cluster": "db-7"})));
    job.run(data, ctx).await
}

#[test]
fn describe_gives_the_types_and_their_required_args_to_the_linter() {
    let program = script(
        r#"[ "$SPINDLE_JOB_CALL" = describe ] || exit 9
echo '{"protocol":1,"types":[{"type":"provision","required":["cluster"]},{"type":"drain"}]}' >&3"#,
    );
    let mut registry = Registry::builtin();
    let types = registry.add_program(&config(&program.path, None)).unwrap();
    assert_eq!(types, ["provision", "drain"]);
    assert!(registry.knows("provision") && registry.knows("drain"));
    assert_eq!(registry.required_args("provision"), ["cluster"]);
    // Served once: a second program with the same type is refused.
    let err = registry
        .add_program(&config(&program.path, Some(&["drain"])))
        .unwrap_err()
        .to_string();
    assert!(err.contains("served by"), "{err}");
}

/// Issue #47: a program whose `types:` names a built-in serves it in the built-in's place
/// (a Spin Cycle team's factory keeps its names); only described, `approval`, or served
/// by two programs, it is refused, saying what to do.
#[test]
fn a_program_named_for_a_builtin_type_takes_its_place() {
    let program = script(r#"echo '{"protocol":1,"types":[{"type":"sleep"}]}' >&3"#);
    let mut registry = Registry::builtin();
    let err = registry
        .add_program(&config(&program.path, None))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("job type `sleep`") && err.contains("built in") && err.contains("`types:`"),
        "{err}"
    );
    registry
        .add_program(&config(
            &program.path,
            Some(&["noop", "sleep", "shell-command"]),
        ))
        .unwrap();
    assert_eq!(
        registry.replaced_builtins().collect::<Vec<_>>(),
        ["noop", "shell-command", "sleep"]
    );
    // The program's job, not the built-in: its bytes are whatever the program keeps.
    let mut job = registry.make(&id("sleep")).unwrap();
    job.deserialize(b"not the built-in's JSON").unwrap();
    assert_eq!(registry.required_args("sleep"), [] as [&str; 0]);
    // A chain's wrapper jobs stay the built-in noop.
    let wrapper = JobId {
        name: "request_test_begin".to_owned(),
        ..id("noop")
    };
    assert_eq!(registry.make(&wrapper).unwrap().serialize().unwrap(), b"");
    let err = registry
        .add_program(&config(&program.path, Some(&["sleep"])))
        .unwrap_err()
        .to_string();
    assert!(err.contains("served by"), "{err}");
    let err = Registry::builtin()
        .add_program(&config(&program.path, Some(&["approval"])))
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot be replaced"), "{err}");
    let err = Registry::builtin()
        .add_program(&config(&program.path, Some(&[])))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`types: []`") && !err.contains("(describe):"),
        "{err}"
    );
}

#[test]
fn a_program_that_cannot_describe_itself_says_how_to_list_its_types() {
    let program = script("echo 'not json' >&3");
    let err = Registry::builtin()
        .add_program(&config(&program.path, None))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("(describe)") && err.contains("\"not json") && err.contains("`types:`"),
        "{err}"
    );
    let err = Registry::builtin()
        .add_program(&config(Path::new("/nonexistent/jobs"), None))
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot start it"), "{err}");
}

#[test]
fn create_sends_the_args_and_keeps_the_changed_args_and_the_bytes() {
    // The program records its call, sets `version` and answers bytes "hi".
    let (registry, program) = registry_with(
        r#"cat > "$(dirname "$0")/call.json"
echo 'debug print on stdout is harmless'
echo '{"protocol":1,"args":{"cluster":"db-7","version":"8.0"},"bytes":"aGk="}' >&3"#,
        &["provision"],
    );
    let mut job = registry.make(&id("provision")).unwrap();
    let mut job_args = args(json!({"cluster": "db-7"}));
    job.create(
        &mut job_args,
        &CreateContext {
            sets: vec!["version".to_owned()],
        },
    )
    .unwrap();
    assert_eq!(job_args["version"], json!("8.0"));
    assert_eq!(job.serialize().unwrap(), b"hi");
    let call: Value =
        serde_json::from_slice(&std::fs::read(program.dir.path().join("call.json")).unwrap())
            .unwrap();
    assert_eq!(
        call,
        json!({"call": "create", "protocol": 1,
               "job": {"type": "provision", "name": "step", "id": "j1ab", "request_id": "req1"},
               "args": {"cluster": "db-7"}, "sets": ["version"]})
    );
}

#[test]
fn a_create_error_is_the_programs_own_words() {
    let (registry, _program) = registry_with(
        r#"echo '{"protocol":1,"error":"cluster job arg is not set"}' >&3"#,
        &["provision"],
    );
    let mut job = registry.make(&id("provision")).unwrap();
    let err = job
        .create(&mut JobArgs::new(), &CreateContext::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("(create of provision `step`)") && err.ends_with("cluster job arg is not set"),
        "{err}"
    );
}

#[test]
fn a_create_that_hangs_is_killed_at_its_timeout() {
    let program = script("sleep 30");
    let mut registry = Registry::builtin();
    registry
        .add_program(&ProgramConfig {
            create_timeout: Some("300ms".to_owned()),
            ..config(&program.path, Some(&["slow"]))
        })
        .unwrap();
    let mut job = registry.make(&id("slow")).unwrap();
    let started = std::time::Instant::now();
    let err = job
        .create(&mut JobArgs::new(), &CreateContext::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("did not answer within 300ms"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_try_gets_bytes_args_and_data_and_returns_its_end_status_and_data() {
    let (registry, program) = registry_with(
        r#"cat > "$(dirname "$0")/call.json"
echo '{"status":"halfway"}' >&3
echo "out line"
echo "err line" >&2
echo '{"protocol":1,"state":"COMPLETE","exit":0,"data":{"seen":true}}' >&3"#,
        &["provision"],
    );
    let mut data = args(json!({"from_before": 1}));
    let outcome = try_once(&registry, "provision", &mut data, ctx()).await;
    assert_eq!(outcome.state, State::Complete, "{outcome:?}");
    assert_eq!(
        (outcome.stdout.as_str(), outcome.stderr.as_str()),
        ("out line\n", "err line\n")
    );
    assert_eq!(data, args(json!({"seen": true})));
    let call: Value =
        serde_json::from_slice(&std::fs::read(program.dir.path().join("call.json")).unwrap())
            .unwrap();
    assert_eq!(
        call,
        json!({"call": "run", "protocol": 1,
               "job": {"type": "provision", "name": "step", "id": "j1ab", "request_id": "req1"},
               "bytes": "c3RvcmVk", "args": {"cluster": "db-7"}, "data": {"from_before": 1}})
    );
}

/// A program the config does not supervise is told which process it must not outlive
/// (its runner: this process); a supervised one is not (its parent is the supervisor).
#[tokio::test]
async fn an_unsupervised_program_is_told_its_runners_pid() {
    let body = r#"echo "parent=${SPINDLE_JOB_PARENT_PID:-none} ppid=$PPID"
echo '{"protocol":1,"state":"COMPLETE"}' >&3"#;
    for (supervised, expected) in [
        (
            Some(false),
            format!("parent={0} ppid={0}\n", std::process::id()),
        ),
        (None, format!("parent=none ppid={}\n", std::process::id())),
    ] {
        let program = script(body);
        let mut registry = Registry::builtin();
        registry
            .add_program(&ProgramConfig {
                supervised,
                ..config(&program.path, Some(&["provision"]))
            })
            .unwrap();
        let outcome = try_once(&registry, "provision", &mut JobArgs::new(), ctx()).await;
        assert_eq!(outcome.stdout, expected, "supervised: {supervised:?}");
    }
}

#[tokio::test]
async fn a_failed_try_keeps_the_jobs_exit_and_error() {
    let (registry, _program) = registry_with(
        r#"echo '{"protocol":1,"state":"FAIL","exit":3,"error":"disk full"}' >&3"#,
        &["provision"],
    );
    let mut data = JobArgs::new();
    let outcome = try_once(&registry, "provision", &mut data, ctx()).await;
    assert_eq!(
        (outcome.state, outcome.exit, outcome.error.as_str()),
        (State::Fail, 3, "disk full")
    );
}

/// Issue #31: every failure of the program is a failed try that says which.
#[tokio::test]
async fn a_program_that_crashes_prints_garbage_or_speaks_another_version_fails_its_try() {
    let cases = [
        (
            "echo 'panic: boom' >&2; exit 2",
            "exited with status 2 without its answer",
            "panic: boom",
        ),
        (
            "echo 'hello there' >&3",
            "wrote \"hello there",
            "one JSON object a line",
        ),
        (
            "echo '{\"statuz\":1}' >&3",
            "expected {\"status\"",
            "statuz",
        ),
        (
            "echo '{\"protocol\":2,\"error\":\"unsupported protocol 1\"}' >&3",
            "speaks job protocol 2; this Spindle speaks protocol 1",
            "unsupported protocol 1",
        ),
        (
            "echo '{\"protocol\":1,\"state\":\"DONE\"}' >&3",
            "\"state\": \"DONE\"",
            "expected a state name",
        ),
        ("kill -9 $$", "exited with status 137", "without its answer"),
    ];
    for (body, first, second) in cases {
        let (registry, _program) = registry_with(body, &["bad"]);
        let mut data = args(json!({"kept": 1}));
        let outcome = try_once(&registry, "bad", &mut data, ctx()).await;
        assert_eq!(outcome.state, State::Fail, "{body}: {outcome:?}");
        assert_ne!(outcome.exit, 0, "{body}");
        assert!(
            outcome.error.contains("job program `")
                && outcome.error.contains(first)
                && outcome.error.contains(second),
            "{body}: {}",
            outcome.error
        );
        assert_eq!(
            data,
            args(json!({"kept": 1})),
            "a failed program changes no data"
        );
    }
    let mut registry = Registry::builtin();
    registry
        .add_program(&config(Path::new("/nonexistent/jobs"), Some(&["gone"])))
        .unwrap();
    let outcome = try_once(&registry, "gone", &mut JobArgs::new(), ctx()).await;
    assert_eq!(
        (outcome.state, outcome.exit),
        (State::Fail, 127),
        "{outcome:?}"
    );
    assert!(outcome.error.contains("cannot start"), "{}", outcome.error);
}

/// A stop is SIGTERM to the program's group (a kit calls the job's Stop): the program
/// answers STOPPED; one that ignores it is killed after the grace period.
#[tokio::test]
async fn a_stop_signals_the_program_and_kills_it_after_the_grace_period() {
    let (registry, _program) = registry_with(
        r#"trap 'echo "{\"protocol\":1,\"state\":\"STOPPED\",\"error\":\"stopped by request\"}" >&3; exit 0' TERM
echo '{"status":"waiting for the stop"}' >&3
while :; do sleep 0.05; done"#,
        &["waits"],
    );
    let context = ctx();
    let (cancel, status) = (context.cancel.clone(), context.status.clone());
    let running =
        tokio::spawn(
            async move { try_once(&registry, "waits", &mut JobArgs::new(), context).await },
        );
    wait_for(|| status.get() == "waiting for the stop").await;
    cancel.cancel();
    let outcome = running.await.unwrap();
    assert_eq!(
        (outcome.state, outcome.error.as_str()),
        (State::Stopped, "stopped by request")
    );

    let (registry, _program) = registry_with(
        r#"trap '' TERM
echo '{"status":"deaf"}' >&3
while :; do sleep 0.05; done"#,
        &["deaf"],
    );
    let context = ctx();
    let (cancel, status) = (context.cancel.clone(), context.status.clone());
    let running =
        tokio::spawn(
            async move { try_once(&registry, "deaf", &mut JobArgs::new(), context).await },
        );
    wait_for(|| status.get() == "deaf").await;
    cancel.cancel();
    let outcome = running.await.unwrap();
    assert_eq!(outcome.state, State::Stopped, "{outcome:?}");
    assert_eq!(outcome.exit, 137, "killed after the grace period");
}

async fn wait_for(mut done: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting");
}

/// Whether `python3` runs; without it a test says it was skipped, unless
/// SPINDLE_TEST_PYTHON=required (as `.ci/run` sets), which makes its absence a failure.
fn have_python(test: &str) -> bool {
    let found = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !found {
        assert!(
            std::env::var("SPINDLE_TEST_PYTHON").as_deref() != Ok("required"),
            "{test}: python3 is required (SPINDLE_TEST_PYTHON=required) and missing"
        );
        #[allow(clippy::print_stderr, reason = "a skipped test says so")]
        {
            eprintln!("{test}: skipped: python3 is not installed");
        }
    }
    found
}

/// One try of the Python kit's function job `job_type` (its bytes are its args' JSON).
async fn py_try(
    registry: &Registry,
    job_type: &str,
    data: &mut JobArgs,
    ctx: RunContext,
) -> Outcome {
    let mut job = registry.make(&id(job_type)).unwrap();
    job.deserialize(b"{}").unwrap();
    job.run(data, ctx).await
}

/// A Python program with the repository's kit and a fork server: tries run in processes
/// it forks, with their own output, data, stop and exit; a server that dies fails the
/// try it had, and the next try starts a new server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_server_forks_each_try_and_is_started_again_after_it_dies() {
    if !have_python("a_fork_server_forks_each_try_and_is_started_again_after_it_dies") {
        return;
    }
    let kit = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../sdk/python")
        .canonicalize()
        .unwrap();
    let program = script("");
    std::fs::write(
        &program.path,
        format!(
            r#"#!/usr/bin/env python3
import os, signal, sys, time
sys.path.insert(0, {kit:?})
import spindle_job

@spindle_job.job("py-ok")
def ok(ctx):
    print("ok from", os.getpid())
    ctx.data["server"] = os.getppid()

@spindle_job.job("py-crash")
def crash(ctx):
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(30)

@spindle_job.job("py-wait")
def wait(ctx):
    ctx.stopping.wait(30)
    return spindle_job.Return(spindle_job.STOPPED)

spindle_job.serve()
"#,
            kit = kit.display().to_string()
        ),
    )
    .unwrap();
    let mut registry = Registry::builtin();
    let err = registry
        .add_program(&ProgramConfig {
            fork_server: Some(true),
            supervised: Some(true),
            ..config(&program.path, Some(&["py-ok"]))
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("drop `supervised`"), "{err}");
    registry
        .add_program(&ProgramConfig {
            fork_server: Some(true),
            ..config(&program.path, Some(&["py-ok", "py-crash", "py-wait"]))
        })
        .unwrap();
    let server_of = |data: &JobArgs| data.get("server").and_then(Value::as_i64).unwrap();
    let mut data = JobArgs::new();
    let outcome = py_try(&registry, "py-ok", &mut data, ctx()).await;
    assert_eq!(outcome.state, State::Complete, "{outcome:?}");
    assert!(outcome.stdout.starts_with("ok from "), "{outcome:?}");
    let first = server_of(&data);
    // Each try its own process, forked by the same server.
    let mut again = JobArgs::new();
    let outcome = py_try(&registry, "py-ok", &mut again, ctx()).await;
    assert_eq!(outcome.state, State::Complete, "{outcome:?}");
    assert_eq!(server_of(&again), first);
    // A stop reaches the try's process group: the job's stop is called.
    let stop = ctx();
    let cancel = stop.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        cancel.cancel();
    });
    let outcome = py_try(&registry, "py-wait", &mut JobArgs::new(), stop).await;
    assert_eq!(outcome.state, State::Stopped, "{outcome:?}");
    // The server dies during a try: the try fails saying so; the next gets a new server.
    let outcome = py_try(&registry, "py-crash", &mut JobArgs::new(), ctx()).await;
    assert_eq!(outcome.state, State::Fail, "{outcome:?}");
    assert!(
        outcome.error.contains("its fork server")
            && outcome.error.contains("exited")
            && outcome.error.contains("ended with it"),
        "{outcome:?}"
    );
    let mut after = JobArgs::new();
    let outcome = py_try(&registry, "py-ok", &mut after, ctx()).await;
    assert_eq!(outcome.state, State::Complete, "{outcome:?}");
    assert_ne!(server_of(&after), first);
}
