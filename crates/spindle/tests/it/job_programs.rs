//! Issue #31, end to end with real processes: the Go and Python examples (jobs written the
//! way Spin Cycle's are, served over the job protocol by the Go and Python kits) run a
//! request to COMPLETE, are stopped, and survive a runner killed with SIGKILL; a job
//! program that hangs is stopped at its node's timeout. The protocol's failure modes
//! (crash, garbage, another version) are tried against the `job` crate.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};

use crate::Service;
use crate::recovery::{Client, running};

const COMPLETE: u64 = 3;
const STOPPED: u64 = 6;
const RUNNING: u64 = 2;

pub(crate) fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether `program` runs here; without it the test is skipped (one line says so), unless
/// `var=required` (CI), which fails it.
pub(crate) fn have(test: &str, program: &str, version_flag: &str, var: &str) -> bool {
    let found = Command::new(program)
        .arg(version_flag)
        .output()
        .is_ok_and(|out| out.status.success());
    if !found {
        assert!(
            std::env::var(var).as_deref() != Ok("required"),
            "{test}: `{program}` is not installed and {var}=required"
        );
        let line =
            format!("{test}: skipped: it needs `{program}` (set {var}=required to fail instead)\n");
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    }
    found
}

/// `go ARGS` in `dir` (of the repository), with Go's build cache under the target
/// directory and no toolchain download.
pub(crate) fn go(dir: &Path, args: &[&str]) -> std::process::Output {
    go_with(dir, args, &[])
}

/// [`go`] with more environment variables.
pub(crate) fn go_with(dir: &Path, args: &[&str], env: &[(&str, &Path)]) -> std::process::Output {
    Command::new("go")
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        .env(
            "GOCACHE",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("go-build"),
        )
        .env("GOFLAGS", "-mod=mod")
        .env("GOTOOLCHAIN", "local")
        .output()
        .expect("go runs")
}

/// The Go example's program, built once a test process (Go's build cache under the
/// target directory keeps the later builds short).
fn go_program() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("go-jobs-{}", std::process::id()));
        let built = go(
            &repository().join("examples/go-jobs"),
            &["build", "-o", out.to_str().unwrap(), "."],
        );
        assert!(
            built.status.success(),
            "go build of examples/go-jobs: {}",
            String::from_utf8_lossy(&built.stderr)
        );
        out
    })
}

/// One language's example: its config (the program's absolute path), its specs, and its
/// request type.
struct Example {
    dir: tempfile::TempDir,
    request: &'static str,
    /// The program's path, as its processes' command lines show it.
    program: PathBuf,
    mode: Mode,
}

impl Example {
    /// How many processes of the program a running try has: its own, and with a fork
    /// server the server's.
    fn processes_a_try(&self) -> usize {
        if self.mode == Mode::Forked { 2 } else { 1 }
    }
}

/// How a Job Runner starts a program's tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Under the runner's supervisor (the default).
    Supervised,
    /// Directly; the kit guards itself against the runner's death (`supervised: false`).
    Guarded,
    /// Forked by the program's fork server (`fork_server: true`).
    Forked,
}

impl Mode {
    fn config(self) -> &'static str {
        match self {
            Mode::Supervised => "    supervised: true\n",
            Mode::Guarded => "    supervised: false\n",
            Mode::Forked => "    fork_server: true\n",
        }
    }
}

/// The example of `language` ("go" or "python") as the repository configures it: Go's
/// program guarding itself, Python's with a fork server.
fn example(language: &str) -> Example {
    example_in(
        language,
        if language == "go" {
            Mode::Guarded
        } else {
            Mode::Forked
        },
    )
}

fn example_in(language: &str, mode: Mode) -> Example {
    let dir = tempfile::tempdir().unwrap();
    // Each test its own copy of the program, so that its processes are told apart from
    // those of the tests running beside it.
    let (config, specs, request, program) = match language {
        "go" => {
            let program = dir.path().join("go-jobs");
            std::fs::copy(go_program(), &program).unwrap();
            (
                format!(
                    "jobs:\n  - program: {}\n    types: [lookup-primary, use-lease, wait-until-stopped]\n    stop_grace: 5s\n{}",
                    program.display(),
                    mode.config()
                ),
                "examples/go-jobs/specs",
                "promote",
                program,
            )
        }
        _ => {
            // Laid out as in the repository: the program finds the kit at ../../sdk/python.
            for (from, to) in [
                (
                    "examples/python-jobs/jobs.py",
                    "examples/python-jobs/jobs.py",
                ),
                ("sdk/python/spindle_job.py", "sdk/python/spindle_job.py"),
            ] {
                let to = dir.path().join(to);
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::copy(repository().join(from), &to).unwrap();
            }
            let program = dir.path().join("examples/python-jobs/jobs.py");
            (
                format!(
                    "jobs:\n  - program: {}\n    stop_grace: 5s\n{}",
                    program.display(),
                    mode.config()
                ),
                "examples/python-jobs/specs",
                "promote-py",
                program,
            )
        }
    };
    std::fs::write(dir.path().join("spindle.yaml"), config).unwrap();
    std::fs::create_dir(dir.path().join("specs")).unwrap();
    for entry in std::fs::read_dir(repository().join(specs)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(
            entry.path(),
            dir.path().join("specs").join(entry.file_name()),
        )
        .unwrap();
    }
    Example {
        dir,
        request,
        program,
        mode,
    }
}

async fn create(client: &Client, request: &str, hold: &str) -> String {
    client
        .start(request, json!({"cluster": "orders", "hold": hold}))
        .await
}

/// The request's job log entries of the job named `name`: (try, state, error, stdout).
async fn entries(client: &Client, id: &str, name: &str) -> Vec<(u64, u64, String, String)> {
    let log = client.get(&format!("/api/v1/requests/{id}/log")).await;
    let mut found: Vec<_> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["name"] == name)
        .map(|entry| {
            (
                entry["try"].as_u64().unwrap(),
                entry["state"].as_u64().unwrap(),
                entry["error"].as_str().unwrap_or_default().to_owned(),
                entry["stdout"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    found.sort();
    found
}

/// The running jobs' status lines of request `id`.
async fn status_lines(client: &Client, id: &str) -> String {
    client
        .try_get(&format!("/api/v1/status/running?requestId={id}"))
        .await
        .map(|v| v.to_string())
        .unwrap_or_default()
}

/// Processes of `program` (its supervisor, which names it as an argument, is not one).
fn processes_of(program: &Path) -> Vec<i32> {
    let wanted = program.to_string_lossy().into_owned();
    let name = program.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|line| {
                // A Python program's first word is its interpreter.
                let line = String::from_utf8_lossy(&line).into_owned();
                let words: Vec<&str> = line.split('\0').collect();
                words[0] == wanted
                    || (words[0].contains("python") || words[0].ends_with(&name))
                        && words.get(1) == Some(&wanted.as_str())
            })
        })
        .filter(|pid| running(*pid))
        .collect()
}

/// A request of the example's three jobs runs to COMPLETE: the arg one job set at create
/// time reaches the next, the job data one job set in its run reaches the next; then
/// another is stopped while its last job waits, saying its status line.
async fn runs_to_complete_and_is_stopped(language: &str) {
    let example = example(language);
    let server = Service::start(
        example.dir.path(),
        &crate::service_args(
            "server",
            "sqlite://spindle.db",
            &["--config", "spindle.yaml", "--interval", "200ms"],
        ),
    );
    let client = Client::new(&server.url);
    let id = create(&client, example.request, "1").await;
    client
        .wait_state(&id, COMPLETE, Duration::from_secs(60))
        .await;
    let lookup = entries(&client, &id, "lookup").await;
    assert_eq!(lookup.len(), 1, "{lookup:?}");
    assert_eq!(
        (lookup[0].1, lookup[0].3.as_str()),
        (COMPLETE, "primary of orders is orders-db1\n")
    );
    let promote = entries(&client, &id, "promote").await;
    assert_eq!(
        promote[0].3,
        format!("promoting orders-db1 with lease-orders-{id}\n"),
        "the arg set at create time and the job data set by the job before"
    );
    let hold = entries(&client, &id, "hold").await;
    assert_eq!(hold[0].1, COMPLETE, "{hold:?}");

    let id = create(&client, example.request, "0").await;
    crate::eventually(
        "the waiting job's status line shows",
        Duration::from_secs(60),
        async || status_lines(&client, &id).await.contains("waited "),
    )
    .await;
    assert_eq!(
        processes_of(&example.program).len(),
        example.processes_a_try()
    );
    let stopped = client
        .http
        .put(format!("{}/api/v1/requests/{id}/stop", client.base))
        .send()
        .await
        .unwrap();
    assert!(stopped.status().is_success(), "{}", stopped.status());
    client
        .wait_state(&id, STOPPED, Duration::from_secs(30))
        .await;
    let hold = entries(&client, &id, "hold").await;
    assert_eq!(hold.len(), 1, "{hold:?}");
    assert_eq!(hold[0].1, STOPPED, "{hold:?}");
    assert!(
        hold[0].2.starts_with("stopped after "),
        "the job's own words: {hold:?}"
    );
    // The try's process ended; a fork server stays for the next try.
    assert_eq!(
        processes_of(&example.program).len(),
        example.processes_a_try() - 1,
        "the program ended"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_jobs_run_a_request_to_complete_and_are_stopped() {
    if have(
        "go_jobs_run_a_request_to_complete_and_are_stopped",
        "go",
        "version",
        "SPINDLE_TEST_GO",
    ) {
        runs_to_complete_and_is_stopped("go").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_jobs_run_a_request_to_complete_and_are_stopped() {
    if have(
        "python_jobs_run_a_request_to_complete_and_are_stopped",
        "python3",
        "--version",
        "SPINDLE_TEST_PYTHON",
    ) {
        runs_to_complete_and_is_stopped("python").await;
    }
}

/// The command line of `pid`'s parent process, its words joined by spaces.
fn parent_command(pid: i32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let (_, rest) = stat.rsplit_once(')').unwrap();
    let parent = rest.split_whitespace().nth(1).unwrap();
    let line = std::fs::read(format!("/proc/{parent}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&line).replace('\0', " ")
}

/// A runner killed with SIGKILL while a job program runs: the program dies with it, its
/// try is logged as interrupted, and the request completes on another runner.
async fn survives_a_runner_killed(language: &str, mode: Mode) {
    let example = example_in(language, mode);
    let dir = example.dir.path();
    let rm = Service::start(
        dir,
        &crate::rm_args("sqlite://spindle.db", "1s", &["--config", "spindle.yaml"]),
    );
    let client = Client::new(&rm.url);
    let jr = crate::jr_args(&rm.url, "1s", &["--config", "spindle.yaml"]);
    let mut runners: Vec<Service> = (0..2).map(|_| Service::start(dir, &jr)).collect();
    crate::eventually(
        "both runners registered",
        Duration::from_secs(10),
        async || {
            client
                .try_get("/api/v1/job-runners")
                .await
                .is_some_and(|list| list.as_array().unwrap().len() == 2)
        },
    )
    .await;
    let id = create(&client, example.request, "3").await;
    crate::eventually(
        "the waiting job runs",
        Duration::from_secs(60),
        async || status_lines(&client, &id).await.contains("waited "),
    )
    .await;
    // The try's process; with a fork server, the server too (the try's parent).
    let pids = processes_of(&example.program);
    assert_eq!(pids.len(), example.processes_a_try(), "{pids:?}");
    // Started by the supervisor, or by the runner itself (the kit guards itself then).
    let parents: Vec<String> = pids.iter().map(|pid| parent_command(*pid)).collect();
    assert_eq!(
        parents.iter().any(|parent| parent.contains("__supervise")),
        mode == Mode::Supervised,
        "the program's parents: {parents:?}"
    );
    let request = client.request(&id).await;
    assert_eq!(request["state"], RUNNING);
    let owner = request["jrURL"].as_str().unwrap().to_owned();
    runners
        .iter_mut()
        .find(|runner| runner.url == owner)
        .unwrap()
        .kill();
    crate::eventually(
        "the job program died with its runner",
        Duration::from_secs(10),
        async || !pids.iter().any(|pid| running(*pid)),
    )
    .await;
    client
        .wait_state(&id, COMPLETE, Duration::from_secs(60))
        .await;
    let request = client.request(&id).await;
    assert_ne!(request["jrURL"].as_str(), Some(owner.as_str()));
    // Tries 1..n: each before the last interrupted (on a busy machine the other
    // runner's 1 s lease may lapse too, which interrupts one more), the last COMPLETE.
    let hold = entries(&client, &id, "hold").await;
    let (last, before) = hold.split_last().unwrap();
    assert!(!before.is_empty() && last.1 == COMPLETE, "{hold:?}");
    for (at, entry) in hold.iter().enumerate() {
        assert_eq!(entry.0, at as u64 + 1, "{hold:?}");
    }
    for entry in before {
        assert!(
            entry.1 == STOPPED && entry.2.contains("was lost"),
            "{hold:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_jobs_survive_a_runner_killed_with_sigkill() {
    if have(
        "go_jobs_survive_a_runner_killed_with_sigkill",
        "go",
        "version",
        "SPINDLE_TEST_GO",
    ) {
        survives_a_runner_killed("go", Mode::Guarded).await;
    }
}

/// The same under the runner's supervisor (`spindle __supervise`), as a program that
/// does not guard itself runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn supervised_go_jobs_survive_a_runner_killed_with_sigkill() {
    if have(
        "supervised_go_jobs_survive_a_runner_killed_with_sigkill",
        "go",
        "version",
        "SPINDLE_TEST_GO",
    ) {
        survives_a_runner_killed("go", Mode::Supervised).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_jobs_survive_a_runner_killed_with_sigkill() {
    if have(
        "python_jobs_survive_a_runner_killed_with_sigkill",
        "python3",
        "--version",
        "SPINDLE_TEST_PYTHON",
    ) {
        survives_a_runner_killed("python", Mode::Forked).await;
    }
}

/// A job program that never answers is stopped at its node's `timeout:` like any job, and
/// `spindle lint --config` knows the types a program describes and the args they need.
#[tokio::test]
async fn a_hanging_job_program_times_out_and_lint_knows_described_types() {
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("jobs.sh");
    std::fs::write(
        &program,
        "#!/bin/sh\nif [ \"$SPINDLE_JOB_CALL\" = describe ]; then\n  echo '{\"protocol\":1,\"types\":[{\"type\":\"hang\",\"required\":[\"host\"]}]}' >&3; exit 0\nfi\nif [ \"$SPINDLE_JOB_CALL\" = create ]; then\n  echo '{\"protocol\":1}' >&3; exit 0\nfi\nsleep 600\n",
    )
    .unwrap();
    std::fs::set_permissions(
        &program,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("spindle.yaml"),
        format!(
            "jobs:\n  - program: {}\n    stop_grace: 1s\n",
            program.display()
        ),
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("specs")).unwrap();
    let spec = |args: &str| {
        format!(
            "sequences:\n  hangs:\n    request: true\n    args:\n      required:\n        - name: host\n    nodes:\n      wait:\n        category: job\n        type: hang\n        timeout: 1s\n        args: [{args}]\n"
        )
    };
    std::fs::write(dir.path().join("specs/hangs.yaml"), spec("")).unwrap();
    let (stdout, _, code) =
        crate::run(crate::spindle(dir.path()).args(["lint", "--config", "spindle.yaml", "specs"]));
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("host"),
        "the described required arg: {stdout}"
    );
    std::fs::write(
        dir.path().join("specs/hangs.yaml"),
        spec("{expected: host}"),
    )
    .unwrap();
    let (stdout, stderr, code) = crate::run(crate::spindle(dir.path()).args([
        "run",
        "--config",
        "spindle.yaml",
        "--output",
        "json",
        "hangs",
        "host=db-7",
    ]));
    assert_ne!(code, 0, "{stderr}");
    let ran: Value = serde_json::from_str(&stdout).unwrap();
    let wait = ran["jobLog"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["name"] == "wait")
        .unwrap();
    assert_eq!(wait["state"], 4, "{wait}");
    assert!(
        wait["error"]
            .as_str()
            .unwrap()
            .starts_with("timed out after 1s"),
        "{wait}"
    );
}

/// The Go kit's own tests (`sdk/go`: describe, create, run, a panic, another protocol
/// version, status lines and a stop), every line they saw it write checked against the
/// job protocol's schema, and `go vet` over the kit and the examples.
#[test]
fn the_go_kit_passes_its_own_tests_and_vet() {
    if !have(
        "the_go_kit_passes_its_own_tests_and_vet",
        "go",
        "version",
        "SPINDLE_TEST_GO",
    ) {
        return;
    }
    let lines = tempfile::NamedTempFile::new().unwrap();
    for (dir, args) in [
        ("sdk/go", &["test", "-count=1", "./..."][..]),
        ("sdk/go", &["vet", "./..."][..]),
        ("examples/go-jobs", &["vet", "./..."][..]),
        ("examples/spincycle-dev-jobs", &["vet", "./..."][..]),
    ] {
        let out = go_with(
            &repository().join(dir),
            args,
            &[("SPINDLE_PROTOCOL_LINES", lines.path())],
        );
        assert!(
            out.status.success(),
            "go {args:?} in {dir}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    check_protocol_lines("go", lines.path());
}

/// Each line a kit's tests saw it write (`SPINDLE_PROTOCOL_LINES`: one `{"kit", "call",
/// "line"}` a line) fits the job protocol's schema (`docs/job-protocol.schema.json`), and
/// the tests saw every kind: describe, create and run answers, status lines, a stop, the
/// job's errors and another protocol's call.
fn check_protocol_lines(kit: &str, path: &Path) {
    let schema =
        std::fs::read_to_string(repository().join("docs/job-protocol.schema.json")).unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for record in text.lines() {
        let record: Value = serde_json::from_str(record).unwrap();
        assert_eq!(record["kit"], kit, "{record}");
        let line = &record["line"];
        let call = record["call"].as_str().unwrap();
        let definition = match call {
            _ if line.get("status").is_some() => "statusLine",
            "describe" => "describeAnswer",
            "create" => "createAnswer",
            "run" => "runAnswer",
            "another-protocol" => "failure",
            other => panic!("a line of an unknown call {other:?}: {record}"),
        };
        if let Err(err) = openapi_check::check_definition(&schema, definition, line) {
            panic!("the {kit} kit wrote, for a {call} call, a line the schema refuses: {err}");
        }
        seen.insert(definition.to_owned());
        if line["state"] == "STOPPED" {
            seen.insert("stopped run".to_owned());
        }
        if line["error"].as_str().is_some_and(|e| !e.is_empty()) && call == "create" {
            seen.insert("create's error".to_owned());
        }
        if line["state"] == "FAIL" {
            seen.insert("failed run".to_owned());
        }
    }
    let expected = [
        "create's error",
        "createAnswer",
        "describeAnswer",
        "failed run",
        "failure",
        "runAnswer",
        "statusLine",
        "stopped run",
    ];
    for kind in expected {
        assert!(
            seen.contains(kind),
            "the {kit} kit's tests wrote no {kind} line: {seen:?}"
        );
    }
}

/// The Python kit's own tests (`sdk/python/test_spindle_job.py`: describe, create, run,
/// status lines, a stop, errors and another protocol version, every line checked against
/// the job protocol's schema; and its guard against the runner's death, which kills the
/// program's children too, which the end-to-end test above cannot see: its program also
/// dies of its broken pipes).
#[test]
fn the_python_kit_passes_its_own_tests() {
    if !have(
        "the_python_kit_passes_its_own_tests",
        "python3",
        "--version",
        "SPINDLE_TEST_PYTHON",
    ) {
        return;
    }
    let lines = tempfile::NamedTempFile::new().unwrap();
    let out = Command::new("python3")
        .args(["-m", "unittest", "-v"])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("SPINDLE_PROTOCOL_LINES", lines.path())
        .current_dir(repository().join("sdk/python"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python3 -m unittest in sdk/python: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    check_protocol_lines("python", lines.path());
}
