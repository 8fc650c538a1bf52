//! Tests of the registry and the built-in job types (real processes for the shell jobs).

use std::sync::Arc;
use std::time::Duration;

use proto::{JobArgs, State};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::builtin::arg_env_name;
use crate::*;

pub(crate) fn args(value: Value) -> JobArgs {
    match value {
        Value::Object(map) => map.into(),
        _ => panic!("args are an object"),
    }
}

fn id(job_type: &str) -> JobId {
    JobId {
        job_type: job_type.to_owned(),
        name: "n".to_owned(),
        id: "abcd".to_owned(),
        request_id: "r".to_owned(),
    }
}

pub(crate) fn ctx() -> RunContext {
    RunContext {
        cancel: CancellationToken::new(),
        status: Status::default(),
        output: Output::discard(),
        secrets: crate::Secrets::default(),
    }
}

/// Makes a built-in job, creates it from `job_args`, and round-trips it through its
/// bytes as the RM and the JR do.
fn made(job_type: &str, job_args: Value) -> Result<Box<dyn Job>, Error> {
    let registry = Registry::builtin();
    let mut job = registry.make(&id(job_type))?;
    let mut job_args = args(job_args);
    job.create(&mut job_args, &CreateContext::default())?;
    let bytes = job.serialize()?;
    let mut runner_side = registry.make(&id(job_type))?;
    runner_side.deserialize(&bytes)?;
    Ok(runner_side)
}

async fn run(job_type: &str, job_args: Value) -> Outcome {
    made(job_type, job_args)
        .expect("job is made")
        .run(&mut JobArgs::new(), ctx())
        .await
}

#[test]
fn registry_lists_known_types_for_an_unknown_one() {
    let registry = Registry::builtin();
    let types: Vec<&str> = registry.types().collect();
    assert_eq!(
        types,
        ["approval", "noop", "shell-args", "shell-command", "sleep"]
    );
    let err = registry.make(&id("nope")).err().expect("unknown type");
    assert_eq!(
        err.to_string(),
        "unknown job type `nope`; expected one of: approval, noop, shell-args, shell-command, sleep"
    );
    let mut custom = Registry::builtin();
    custom.register("mine", |_| Box::new(NoopJob));
    assert!(custom.make(&id("mine")).is_ok());
}

#[tokio::test]
async fn noop_completes() {
    assert_eq!(run("noop", json!({})).await.state, State::Complete);
}

#[test]
fn sleep_durations() {
    for (value, expected) in [
        (json!(1500), Duration::from_millis(1500)),
        (json!("1000"), Duration::from_secs(1)),
        (json!("500ms"), Duration::from_millis(500)),
        (json!("1.5s"), Duration::from_millis(1500)),
        (json!("1h2m"), Duration::from_secs(3720)),
    ] {
        assert_eq!(parse_sleep_duration(&value), Ok(expected), "{value}");
    }
    for bad in [
        json!(-1),
        json!(1.5),
        json!("soon"),
        json!([1]),
        json!(null),
    ] {
        assert!(parse_sleep_duration(&bad).is_err(), "{bad}");
    }
    let err = made("sleep", json!({})).err().unwrap();
    assert!(err.to_string().contains("`duration` is missing"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn sleep_sleeps_and_stops_promptly() {
    let started = tokio::time::Instant::now();
    assert_eq!(
        run("sleep", json!({"duration": "2s"})).await.state,
        State::Complete
    );
    assert_eq!(started.elapsed(), Duration::from_secs(2));

    let mut job = made("sleep", json!({"duration": "1h"})).unwrap();
    let context = ctx();
    let cancel = context.cancel.clone();
    let status = context.status.clone();
    let handle = tokio::spawn(async move { job.run(&mut JobArgs::new(), context).await });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(status.get(), "sleeping 1h0m0s");
    cancel.cancel();
    let outcome = handle.await.unwrap();
    assert_eq!(outcome.state, State::Stopped);
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// The bytes a job of `job_type` stores when created from `job_args`.
fn bytes_of(job_type: &str, job_args: Value) -> String {
    let mut job = Registry::builtin().make(&id(job_type)).unwrap();
    job.create(&mut args(job_args), &CreateContext::default())
        .unwrap();
    String::from_utf8(job.serialize().unwrap()).unwrap()
}

/// A built-in job restored from stored `bytes`, or why it cannot be.
fn restored(job_type: &str, bytes: &str) -> Result<Box<dyn Job>, Error> {
    let mut job = Registry::builtin().make(&id(job_type))?;
    job.deserialize(bytes.as_bytes())?;
    Ok(job)
}

/// Issue #47: the built-ins write the bytes Spin Cycle 2.1.1's dev jobs write (compared
/// with what its Request Manager stored for the same args) and read them back.
#[tokio::test(start_paused = true)]
async fn builtins_write_and_read_spin_cycles_dev_job_bytes() {
    // Spin Cycle's sleep: {"duration": N}, N a Go time.Duration in nanoseconds.
    assert_eq!(
        bytes_of("sleep", json!({"duration": "100"})),
        r#"{"duration":100000000}"#
    );
    let started = tokio::time::Instant::now();
    let mut job = restored("sleep", r#"{"duration":6000000000}"#).unwrap();
    assert_eq!(
        job.run(&mut JobArgs::new(), ctx()).await.state,
        State::Complete
    );
    assert_eq!(started.elapsed(), Duration::from_secs(6));
    // The form Spindle wrote before (a Go duration string) still reads.
    let started = tokio::time::Instant::now();
    let mut job = restored("sleep", r#"{"duration":"1.5s"}"#).unwrap();
    job.run(&mut JobArgs::new(), ctx()).await;
    assert_eq!(started.elapsed(), Duration::from_millis(1500));
    let err = restored("sleep", r#"{"duration":-1}"#).err().unwrap();
    assert!(err.to_string().contains("nanoseconds"), "{err}");

    // Spin Cycle's shell-command: {"cmd": ..., "args": [...]}, args left out when empty.
    assert_eq!(
        bytes_of("shell-command", json!({"cmd": "false", "args": ""})),
        r#"{"cmd":"false"}"#
    );
    assert_eq!(
        bytes_of("shell-command", json!({"cmd": "echo", "args": "a  b"})),
        r#"{"cmd":"echo","args":["a","b"]}"#
    );
    let mut job = restored("shell-command", r#"{"cmd":"echo","args":["a","b"]}"#).unwrap();
    let outcome = job.run(&mut JobArgs::new(), ctx()).await;
    assert_eq!(
        (outcome.state, outcome.stdout.as_str()),
        (State::Complete, "a b\n")
    );
    let mut job = restored("shell-command", r#"{"cmd":"false"}"#).unwrap();
    assert_eq!(job.run(&mut JobArgs::new(), ctx()).await.state, State::Fail);

    // Spin Cycle's noop: no bytes at all.
    assert_eq!(bytes_of("noop", json!({})), "");
    assert!(restored("noop", "").is_ok());
}

#[test]
fn env_names_of_job_args() {
    assert_eq!(arg_env_name("host"), "SPINDLE_ARG_HOST");
    assert_eq!(arg_env_name("dst-addr.v2"), "SPINDLE_ARG_DST_ADDR_V2");
}

#[tokio::test]
async fn shell_command_runs_a_program_with_argv_and_env() {
    let outcome = run(
        "shell-command",
        json!({
            "cmd": "sh",
            "args": ["-c", "printf '%s|' \"$0\" \"$SPINDLE_ARG_HOST\" \"$SPINDLE_ARG_PORTS\" \"$GREETING\"", "$(touch /tmp/nope)"],
            "env": {"GREETING": "hi"},
            "host": "db1; rm -rf /",
            "ports": [1, 2]
        }),
    )
    .await;
    assert_eq!(outcome.state, State::Complete, "{outcome:?}");
    assert_eq!(outcome.exit, 0);
    // User values arrive as data, never as shell text.
    assert_eq!(outcome.stdout, "$(touch /tmp/nope)|db1; rm -rf /|[1,2]|hi|");
}

#[tokio::test]
async fn shell_command_args_string_is_split_on_white_space() {
    let outcome = run("shell-command", json!({"cmd": "echo", "args": "a  b\tc"})).await;
    assert_eq!(outcome.stdout, "a b c\n");
}

#[tokio::test]
async fn shell_command_failures() {
    let outcome = run(
        "shell-command",
        json!({"cmd": "sh", "args": ["-c", "echo oops >&2; exit 3"]}),
    )
    .await;
    assert_eq!(outcome.state, State::Fail);
    assert_eq!(outcome.exit, 3);
    assert_eq!(outcome.stderr, "oops\n");
    assert!(
        outcome.error.contains("exited with status 3"),
        "{}",
        outcome.error
    );

    let outcome = run("shell-command", json!({"cmd": "/no/such/program"})).await;
    assert_eq!(outcome.state, State::Fail);
    assert_eq!(outcome.exit, 127);
    assert!(
        outcome.error.contains("cannot start `/no/such/program`"),
        "{}",
        outcome.error
    );

    let outcome = run(
        "shell-command",
        json!({"cmd": "sleep", "args": ["30"], "timeout": "200ms"}),
    )
    .await;
    assert_eq!(outcome.state, State::Fail);
    assert!(
        outcome.error.contains("timed out after 200ms"),
        "{}",
        outcome.error
    );

    let err = made("shell-command", json!({"args": ["x"]})).err().unwrap();
    assert!(
        err.to_string().contains("job arg `cmd` is missing"),
        "{err}"
    );
    let err = made("shell-command", json!({"cmd": "echo", "args": {"a": 1}}))
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("expected a list of arguments"),
        "{err}"
    );
}

#[tokio::test]
async fn shell_command_dir() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = run(
        "shell-command",
        json!({"cmd": "pwd", "dir": dir.path().to_str().unwrap()}),
    )
    .await;
    let expected = dir.path().canonicalize().unwrap();
    assert_eq!(outcome.stdout.trim_end(), expected.to_str().unwrap());
}

#[tokio::test]
async fn shell_command_output_keeps_head_and_tail_with_a_marker() {
    // 400,000 numbered lines (2.7 MB): the first and last lines survive, the middle is cut.
    let outcome = run(
        "shell-command",
        json!({"cmd": "seq", "args": ["1", "400000"]}),
    )
    .await;
    assert_eq!(outcome.state, State::Complete);
    let total: usize = (1..=400_000).map(|n: u32| n.to_string().len() + 1).sum();
    assert!(outcome.stdout.starts_with("1\n2\n3\n"));
    assert!(outcome.stdout.ends_with("\n399999\n400000\n"));
    let cut = total - 1024 * 1024;
    let marker = format!(
        "\n[spindle: {cut} bytes of output cut here; the first 512 KiB and the last 512 KiB are kept]\n"
    );
    assert!(outcome.stdout.contains(&marker), "no marker {marker:?}");
    assert_eq!(outcome.stdout.len(), 1024 * 1024 + marker.len());
}

/// Keeps what a try writes to its live output.
#[derive(Default)]
struct Sink(std::sync::Mutex<Vec<(proto::Stream, Vec<u8>)>>);

impl OutputSink for Sink {
    fn write(&self, _tag: u64, stream: proto::Stream, bytes: &[u8]) {
        self.0.lock().unwrap().push((stream, bytes.to_vec()));
    }
}

#[tokio::test]
async fn shell_command_output_goes_to_the_live_output_while_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let sink = Arc::new(Sink::default());
    let mut job = made(
        "shell-command",
        json!({"cmd": "sh", "args": ["-c", "echo before; echo oops >&2; while [ ! -e \"$1\" ]; do sleep 0.02; done; echo after", "sh", go.to_str().unwrap()]}),
    )
    .unwrap();
    let ctx = RunContext {
        output: Output::new(sink.clone(), 7),
        ..ctx()
    };
    let running = tokio::spawn(async move { job.run(&mut JobArgs::new(), ctx).await });
    // Before the program ends, its first lines are in the live output.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let seen = |stream| {
        sink.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(s, _)| *s == stream)
            .flat_map(|(_, bytes)| bytes.clone())
            .collect::<Vec<u8>>()
    };
    while seen(proto::Stream::Stdout) != b"before\n" || seen(proto::Stream::Stderr) != b"oops\n" {
        assert!(tokio::time::Instant::now() < deadline, "no live output");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!running.is_finished());
    std::fs::write(&go, "").unwrap();
    let outcome = running.await.unwrap();
    assert_eq!(outcome.state, State::Complete);
    assert_eq!(seen(proto::Stream::Stdout), b"before\nafter\n");
    assert_eq!(outcome.stdout, "before\nafter\n");
}

/// Waits (with a deadline) until the program a test started has written `file`.
async fn wait_for_file(file: &std::path::Path) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !file.exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} never appeared",
            file.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

#[tokio::test]
async fn stopping_shell_command_ends_the_process_group() {
    // The shell starts a background child and prints its pid; stop must end both.
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let mut job = made(
        "shell-command",
        json!({"cmd": "sh", "args": ["-c", "sleep 30 & echo $!; touch \"$0\"; wait", ready]}),
    )
    .unwrap();
    let context = ctx();
    let cancel = context.cancel.clone();
    let handle = tokio::spawn(async move { job.run(&mut JobArgs::new(), context).await });
    wait_for_file(&ready).await;
    cancel.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(10), handle)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome.state, State::Stopped);
    let child: i32 = outcome
        .stdout
        .trim()
        .parse()
        .expect("the background child's pid");
    // SIGTERM reached the whole group.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while alive(child) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(child), "background child {child} survived the stop");
}

#[tokio::test]
async fn stopping_a_program_that_ignores_term_kills_it() {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let mut job = made(
        "shell-command",
        json!({"cmd": "sh", "args": ["-c", "trap '' TERM; echo ready; touch \"$0\"; while true; do sleep 0.05; done", ready]}),
    )
    .unwrap();
    let context = ctx();
    let cancel = context.cancel.clone();
    let handle = tokio::spawn(async move { job.run(&mut JobArgs::new(), context).await });
    wait_for_file(&ready).await;
    cancel.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(15), handle)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome.state, State::Stopped);
    assert_eq!(outcome.stdout, "ready\n");
}

fn shell_args(job_args: Value, sets: &[&str]) -> Result<JobArgs, Error> {
    let registry = Registry::builtin();
    let mut job = registry.make(&id("shell-args"))?;
    let mut job_args = args(job_args);
    let ctx = CreateContext {
        sets: sets.iter().map(|s| (*s).to_owned()).collect(),
    };
    job.create(&mut job_args, &ctx)?;
    Ok(job_args)
}

#[test]
fn shell_args_sets_declared_args_from_json_output() {
    let job_args = shell_args(
        json!({"cmd": "sh", "args": ["-c", "echo \"{\\\"hosts\\\": [\\\"a\\\", \\\"$SPINDLE_ARG_ZONE\\\"], \\\"n\\\": 2}\""], "zone": "z1"}),
        &["hosts"],
    )
    .unwrap();
    assert_eq!(job_args["hosts"], json!(["a", "z1"]));
    // Only the declared sets are set.
    assert!(!job_args.contains_key("n"));
}

#[test]
fn shell_args_errors_name_the_problem_and_quote_the_output() {
    let err = shell_args(json!({"cmd": "echo", "args": ["{\"a\": 1}"]}), &["hosts"]).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("has no key `hosts`")
            && text.contains("it has: a")
            && text.contains("{\\\"a\\\": 1}"),
        "{text}"
    );

    let err = shell_args(json!({"cmd": "echo", "args": ["not json"]}), &["hosts"]).unwrap_err();
    assert!(
        err.to_string().contains("is not JSON") && err.to_string().contains("not json"),
        "{err}"
    );

    let err = shell_args(json!({"cmd": "echo", "args": ["[1, 2]"]}), &["hosts"]).unwrap_err();
    assert!(
        err.to_string()
            .contains("printed a list, not a JSON object"),
        "{err}"
    );

    let err = shell_args(
        json!({"cmd": "sh", "args": ["-c", "echo bad >&2; exit 4"]}),
        &["hosts"],
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("exited with status 4") && err.to_string().contains("bad"),
        "{err}"
    );

    let err = shell_args(
        json!({"cmd": "sleep", "args": ["5"], "timeout": "100ms"}),
        &["hosts"],
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("did not finish within 100ms"),
        "{err}"
    );
}

#[tokio::test]
async fn shell_args_job_completes_at_run_time_with_its_output() {
    let registry = Registry::builtin();
    let mut job = registry.make(&id("shell-args")).unwrap();
    let mut job_args = args(json!({"cmd": "echo", "args": ["{\"x\": 1}"]}));
    job.create(
        &mut job_args,
        &CreateContext {
            sets: vec!["x".to_owned()],
        },
    )
    .unwrap();
    let bytes = job.serialize().unwrap();
    let mut runner_side = registry.make(&id("shell-args")).unwrap();
    runner_side.deserialize(&bytes).unwrap();
    let outcome = runner_side.run(&mut JobArgs::new(), ctx()).await;
    assert_eq!(outcome.state, State::Complete);
    assert_eq!(outcome.stdout, "{\"x\": 1}\n");
}

#[test]
fn bad_bytes_are_a_deserialize_error() {
    let registry = Registry::builtin();
    for job_type in ["sleep", "shell-command", "shell-args"] {
        let mut job = registry.make(&id(job_type)).unwrap();
        assert!(
            matches!(job.deserialize(b"{not json"), Err(Error::Deserialize(_))),
            "{job_type}"
        );
    }
}

/// Issue #12: job types declare the job args they require, for the linter.
#[test]
fn built_in_types_declare_their_required_job_args() {
    let registry = Registry::builtin();
    assert_eq!(registry.required_args("sleep"), ["duration"]);
    assert_eq!(registry.required_args("shell-command"), ["cmd"]);
    assert_eq!(registry.required_args("shell-args"), ["cmd"]);
    assert!(registry.required_args("noop").is_empty());
    assert!(registry.required_args("nope").is_empty());
    let mut custom = Registry::builtin();
    custom
        .register("mine", |_| Box::new(NoopJob))
        .require_args("mine", &["host", "port"]);
    assert_eq!(custom.required_args("mine"), ["host", "port"]);
}

#[tokio::test]
async fn a_failure_names_the_command_with_long_arguments_cut() {
    let script = format!("exit 3\n# {}\n", "x".repeat(200));
    let outcome = run(
        "shell-command",
        json!({"cmd": "sh", "args": ["-c", script]}),
    )
    .await;
    assert_eq!(outcome.state, State::Fail);
    assert_eq!(outcome.error, "`sh -c exit 3…` exited with status 3");
}

/// The `approval` job waits until it is answered, through its registry's
/// [`crate::approval::Approvals`], or finds its stored answer in its data at once; a
/// rejection fails the try; a stop stops it; a wait is told; another registry's (another
/// runner's) approvals are apart.
#[tokio::test]
async fn an_approval_waits_for_its_answer() {
    use crate::approval::{Answer, data_key};
    let registry = Registry::builtin();
    let approvals = std::sync::Arc::clone(registry.approvals());
    let other = Registry::builtin();
    let answer = |request: &str, job: &str, said: Answer| approvals.answer(request, job, said);
    let mut waits = approvals.waits();
    let make = |job: &str| {
        let id = JobId {
            job_type: "approval".to_owned(),
            name: "gate".to_owned(),
            id: job.to_owned(),
            request_id: "req1".to_owned(),
        };
        let mut made = registry.make(&id).unwrap();
        let mut args: JobArgs = json!({"message": "ship it?", "roles": ["release"]})
            .as_object()
            .unwrap()
            .clone()
            .into();
        made.create(&mut args, &CreateContext::default()).unwrap();
        let bytes = made.serialize().unwrap();
        let mut made = registry.make(&id).unwrap();
        made.deserialize(&bytes).unwrap();
        made
    };
    let said = |approved: bool| Answer {
        approved,
        user: "ann".to_owned(),
        at: "2026-12-01T10:00:00Z".to_owned(),
        comment: "looks fine".to_owned(),
    };
    // Answered before it begins to wait: it finds the answer when it begins.
    assert!(!answer("req1", "gat0", said(true)), "nobody waits yet");
    assert!(
        !other.approvals().answer("req1", "gat1", said(false)),
        "another runner's"
    );
    assert_eq!(
        make("gat0").run(&mut JobArgs::new(), ctx()).await.state,
        State::Complete
    );
    let mut job = make("gat1");
    let status = Status::default();
    let context = RunContext {
        status: status.clone(),
        ..ctx()
    };
    let waiting = tokio::spawn(async move { job.run(&mut JobArgs::new(), context).await });
    while status.get().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(status.get(), "waiting for approval: ship it?");
    assert_eq!(
        waits.try_recv().unwrap(),
        ("req1".to_owned(), "gat1".to_owned()),
        "its wait is told (gat0's was not: its answer was there)"
    );
    assert!(answer("req1", "gat1", said(true)));
    let outcome = waiting.await.unwrap();
    assert_eq!(outcome.state, State::Complete);
    assert_eq!(
        outcome.stdout,
        "approved by ann at 2026-12-01T10:00:00Z: looks fine\n"
    );

    // The stored answer, handed over in the job's data (a rejection).
    let mut data = JobArgs::new();
    data.insert(data_key("gat2"), serde_json::to_value(said(false)).unwrap());
    let outcome = make("gat2").run(&mut data, ctx()).await;
    assert_eq!(outcome.state, State::Fail);
    assert_eq!(
        outcome.error,
        "rejected by ann at 2026-12-01T10:00:00Z: looks fine"
    );
    // Another approval's answer is not this one's.
    let context = ctx();
    context.cancel.cancel();
    assert_eq!(
        make("gat3").run(&mut data, context).await.state,
        State::Stopped
    );

    let mut bad = json!({"roles": 7}).as_object().unwrap().clone().into();
    let err = make("gat4")
        .create(&mut bad, &CreateContext::default())
        .unwrap_err();
    assert!(err.to_string().contains("job arg `roles`"), "{err}");
}

/// Issue #33: a secret arg's placeholder becomes its value in a program's environment
/// only; in its command line the try fails; what is printed is masked by the runner.
#[tokio::test]
async fn a_secret_reaches_a_program_in_its_environment_only() {
    let placeholder = crate::secret_placeholder("password");
    let secrets = crate::Secrets::new(vec![(placeholder.clone(), "hunter2-x".to_owned())]);
    let ctx = || RunContext {
        secrets: secrets.clone(),
        ..ctx()
    };
    let mut job = made(
        "shell-command",
        json!({"cmd": "sh", "args": ["-c", "printf %s \"$SPINDLE_ARG_PASSWORD\""], "password": placeholder}),
    )
    .unwrap();
    let outcome = job.run(&mut JobArgs::new(), ctx()).await;
    assert_eq!(
        (outcome.state, outcome.stdout.as_str()),
        (State::Complete, "hunter2-x")
    );
    // Without the secrets (another runner's chain), the placeholder, never a value.
    let outcome = job.run(&mut JobArgs::new(), super::tests::ctx()).await;
    assert_eq!(outcome.stdout, placeholder);
    let mut job = made(
        "shell-command",
        json!({"cmd": "echo", "args": [placeholder]}),
    )
    .unwrap();
    let outcome = job.run(&mut JobArgs::new(), ctx()).await;
    assert_eq!(outcome.state, State::Fail);
    assert!(
        outcome.error.contains("is in the program's command line"),
        "{}",
        outcome.error
    );
    assert_eq!(
        secrets.mask("the password is hunter2-x, again hunter2-x"),
        "the password is ****, again ****"
    );
    assert_eq!(&*secrets.mask_bytes(b"a hunter2-x b"), b"a **** b");
    assert_eq!(&*secrets.mask_bytes(b"nothing"), b"nothing");
    assert!(!format!("{secrets:?}").contains("hunter2"));
}
