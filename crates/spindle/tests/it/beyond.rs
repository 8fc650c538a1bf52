//! Issue #16, end to end with real processes: what Spindle does beyond Spin Cycle.
//! A pause survives a restart of `spindle server` and a resume runs the request to
//! COMPLETE; a retry runs only the failed and unrun jobs, a retry from a job that job
//! and what follows, a rerun a new request with the same args; requests created before
//! and after a spec reload (SIGHUP, `--watch-specs`) keep their own spec versions; an
//! approval survives a SIGKILL of its runner and completes once approved; a schedule
//! every second starts exactly one request per tick across two Request Managers, and its
//! skip policy holds.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::Service;
use crate::recovery::{Client, executions};

/// `steps`: two shell jobs, `first` then `second`. Each execution appends `JOB - PID` to
/// `MARKS/executions`; `first` then waits until `MARKS/release` exists.
const STEPS: &str = r#"sequences:
  steps:
    request: true
    args:
      required:
        - name: marks
          desc: the directory where every execution is recorded
      optional:
        - name: shell
          desc: the program
          default: sh
        - name: first_script
          desc: what the first job runs
          default:
            - "-c"
            - 'echo "first - $$" >> "$SPINDLE_ARG_MARKS/executions"; while [ ! -e "$SPINDLE_ARG_MARKS/release" ]; do sleep 0.05; done'
        - name: second_script
          desc: what the second job runs
          default:
            - "-c"
            - 'echo "second - $$" >> "$SPINDLE_ARG_MARKS/executions"'
    nodes:
      first:
        category: job
        type: shell-command
        args:
          - {expected: cmd, given: shell}
          - {expected: args, given: first_script}
          - {expected: marks}
      second:
        category: job
        type: shell-command
        deps: [first]
        args:
          - {expected: cmd, given: shell}
          - {expected: args, given: second_script}
          - {expected: marks}
"#;

/// `flaky`: `a`, then `b`, which fails until `MARKS/fixed` exists, then `c`. Each
/// execution appends `JOB - PID` to `MARKS/executions`.
const FLAKY: &str = r#"sequences:
  flaky:
    request: true
    args:
      required:
        - name: marks
          desc: the directory where every execution is recorded
      optional:
        - name: shell
          desc: the program
          default: sh
        - name: a_script
          desc: what a runs
          default: ["-c", 'echo "a - $$" >> "$SPINDLE_ARG_MARKS/executions"']
        - name: b_script
          desc: what b runs
          default: ["-c", 'echo "b - $$" >> "$SPINDLE_ARG_MARKS/executions"; test -e "$SPINDLE_ARG_MARKS/fixed"']
        - name: c_script
          desc: what c runs
          default: ["-c", 'echo "c - $$" >> "$SPINDLE_ARG_MARKS/executions"']
    nodes:
      a:
        category: job
        type: shell-command
        args: [{expected: cmd, given: shell}, {expected: args, given: a_script}, {expected: marks}]
      b:
        category: job
        type: shell-command
        deps: [a]
        args: [{expected: cmd, given: shell}, {expected: args, given: b_script}, {expected: marks}]
      c:
        category: job
        type: shell-command
        deps: [b]
        args: [{expected: cmd, given: shell}, {expected: args, given: c_script}, {expected: marks}]
"#;

/// `gated`: an approval, then a job that records that it ran. `gated-briefly`: an
/// approval that nobody answers within its node's timeout.
const GATED: &str = r#"sequences:
  gated:
    request: true
    args:
      required:
        - name: marks
          desc: the directory where every execution is recorded
      optional:
        - name: shell
          desc: the program
          default: sh
        - name: after_script
          desc: what runs once approved
          default: ["-c", 'echo "after - $$" >> "$SPINDLE_ARG_MARKS/executions"']
        - name: question
          desc: what the approver is asked
          default: ship it?
    nodes:
      gate:
        category: job
        type: approval
        args: [{expected: message, given: question}]
      after:
        category: job
        type: shell-command
        deps: [gate]
        args: [{expected: cmd, given: shell}, {expected: args, given: after_script}, {expected: marks}]
  gated-briefly:
    request: true
    nodes:
      gate:
        category: job
        type: approval
        timeout: 1s
"#;

const FAIL: u64 = 4;
const RUNNING: u64 = 2;
const COMPLETE: u64 = 3;

fn steps_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("specs")).unwrap();
    std::fs::create_dir(dir.path().join("marks")).unwrap();
    std::fs::write(dir.path().join("specs/steps.yaml"), STEPS).unwrap();
    std::fs::write(dir.path().join("specs/flaky.yaml"), FLAKY).unwrap();
    std::fs::write(dir.path().join("specs/gated.yaml"), GATED).unwrap();
    dir
}

const SERVER: [&str; 8] = [
    "server",
    "--listen",
    "127.0.0.1:0",
    "--specs",
    "specs",
    "--database",
    "sqlite://spindle.db",
    "--interval=200ms",
];

/// `spindle ARGS` against the server at `addr`; its stdout, which must be a success.
fn cli(dir: &Path, addr: &str, args: &[&str]) -> String {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(args)
        .env("SPINDLE_ADDR", addr)
        .env("NO_COLOR", "1")
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "spindle {args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_request_stays_paused_across_a_restart_and_completes_once_resumed() {
    let dir = steps_dir();
    let marks = dir.path().join("marks");
    let mut server = Service::start(dir.path(), &SERVER);
    let client = Client::new(&server.url);
    let id = create(&client, "steps", json!({"marks": marks})).await;
    crate::eventually("the first job runs", Duration::from_secs(30), async || {
        executions(&marks).len() == 1
    })
    .await;

    let said = cli(dir.path(), &server.url, &["pause", &id]);
    assert!(said.starts_with(&format!("OK, paused {id}")), "{said}");
    assert_eq!(client.request(&id).await["paused"], true);
    // The running job finishes; the next one does not start.
    std::fs::write(marks.join("release"), "").unwrap();
    let first_done = || async {
        client
            .tries(&id)
            .await
            .values()
            .any(|tries| tries.iter().any(|t| t.1 == COMPLETE))
    };
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while !first_done().await {
        assert!(
            std::time::Instant::now() < until,
            "the first job never completed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Nothing is expected to happen: a wait for time itself.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(executions(&marks).len(), 1, "{:?}", executions(&marks));
    assert_eq!(client.request(&id).await["state"], RUNNING);

    // A restart (the runner hands the chain back, the new process resumes it): still
    // paused, and still nothing new runs.
    assert!(server.terminate().success());
    let server = Service::start(dir.path(), &SERVER);
    let client = Client::new(&server.url);
    client
        .wait_state(&id, RUNNING, Duration::from_secs(30))
        .await;
    let status = cli(dir.path(), &server.url, &["status", &id]);
    assert!(status.contains("state: RUNNING (paused)"), "{status}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(executions(&marks).len(), 1, "{:?}", executions(&marks));

    let said = cli(dir.path(), &server.url, &["resume", &id]);
    assert_eq!(said.trim(), format!("OK, resumed {id}"));
    client
        .wait_state(&id, COMPLETE, Duration::from_secs(30))
        .await;
    assert_eq!(client.request(&id).await.get("paused"), None);
    let jobs: Vec<String> = executions(&marks).into_iter().map(|e| e.0).collect();
    assert_eq!(jobs, ["first", "second"]);
    // One try each: the pause and the restart cost no try.
    let tries = client.tries(&id).await;
    assert!(
        tries
            .values()
            .all(|tries| tries.len() == 1 && tries[0].0 == 1),
        "{tries:?}"
    );
    let trail = client.get(&format!("/api/v1/requests/{id}/audit")).await;
    let actions: Vec<&str> = trail
        .as_array()
        .unwrap()
        .iter()
        .map(|event| event["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["create", "pause", "resume"]);
}

/// The job names of the recorded executions, in order.
fn jobs_run(marks: &Path) -> Vec<String> {
    executions(marks).into_iter().map(|e| e.0).collect()
}

/// Per job name, (try, state) of each of its entries.
async fn tries_by_name(
    client: &Client,
    id: &str,
) -> std::collections::BTreeMap<String, Vec<(u64, u64)>> {
    let log = client.get(&format!("/api/v1/requests/{id}/log")).await;
    let mut tries: std::collections::BTreeMap<String, Vec<(u64, u64)>> = Default::default();
    for entry in log.as_array().unwrap() {
        tries
            .entry(entry["name"].as_str().unwrap().to_owned())
            .or_default()
            .push((
                entry["try"].as_u64().unwrap(),
                entry["state"].as_u64().unwrap(),
            ));
    }
    for entries in tries.values_mut() {
        entries.sort();
    }
    tries
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_runs_only_the_failed_and_unrun_jobs_and_a_rerun_is_a_new_request() {
    let dir = steps_dir();
    let marks = dir.path().join("marks");
    let server = Service::start(dir.path(), &SERVER);
    let client = Client::new(&server.url);
    let id = create(&client, "flaky", json!({"marks": marks})).await;
    client.wait_state(&id, FAIL, Duration::from_secs(30)).await;
    assert_eq!(jobs_run(&marks), ["a", "b"]);

    // Fixed, and retried: b runs again as its second try, then c; a does not.
    std::fs::write(marks.join("fixed"), "").unwrap();
    let said = cli(dir.path(), &server.url, &["retry", &id]);
    assert!(said.starts_with(&format!("OK, retrying {id}")), "{said}");
    client
        .wait_state(&id, COMPLETE, Duration::from_secs(30))
        .await;
    assert_eq!(jobs_run(&marks), ["a", "b", "b", "c"]);
    let tries = tries_by_name(&client, &id).await;
    assert_eq!(tries["a"], [(1, COMPLETE)]);
    assert_eq!(tries["b"], [(1, FAIL), (2, COMPLETE)]);
    assert_eq!(tries["c"], [(1, COMPLETE)]);
    let request = client.request(&id).await;
    assert_eq!(request["finishedJobs"], request["totalJobs"], "{request}");

    // From b: b and c run again, a still not.
    cli(dir.path(), &server.url, &["retry", &id, "--from", "b"]);
    client
        .wait_state(&id, COMPLETE, Duration::from_secs(30))
        .await;
    assert_eq!(jobs_run(&marks), ["a", "b", "b", "c", "b", "c"]);
    let tries = tries_by_name(&client, &id).await;
    assert_eq!(tries["b"], [(1, FAIL), (2, COMPLETE), (3, COMPLETE)]);
    assert_eq!(tries["c"], [(1, COMPLETE), (2, COMPLETE)]);

    // A job the request does not have is a usage error that names it.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(["retry", &id, "--from", "zz"])
        .env("SPINDLE_ADDR", &server.url)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("has no job \"zz\""),
        "{output:?}"
    );

    // A rerun is a new request with the same type and args.
    let said = cli(dir.path(), &server.url, &["rerun", &id]);
    let new_id = said
        .strip_prefix("OK, started flaky request ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{said}"))
        .to_owned();
    assert_ne!(new_id, id);
    assert!(said.contains(&format!("(a rerun of {id})")), "{said}");
    client
        .wait_state(&new_id, COMPLETE, Duration::from_secs(30))
        .await;
    let rerun = client.request(&new_id).await;
    let marks_arg = rerun["args"]
        .as_array()
        .unwrap()
        .iter()
        .find(|arg| arg["Name"] == "marks")
        .unwrap()["Value"]
        .clone();
    assert_eq!(marks_arg, json!(marks));
    assert_eq!(jobs_run(&marks).len(), 9);

    let trail = client.get(&format!("/api/v1/requests/{id}/audit")).await;
    let actions: Vec<&str> = trail
        .as_array()
        .unwrap()
        .iter()
        .map(|event| event["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["create", "retry", "retry"]);
}

/// Creates a `flaky` request (which completes: `MARKS/fixed` exists) and waits for it;
/// returns its id and spec version.
async fn flaky_request(client: &Client, marks: &Path) -> (String, String) {
    let id = create(client, "flaky", json!({"marks": marks})).await;
    client
        .wait_state(&id, COMPLETE, Duration::from_secs(30))
        .await;
    let version = client.request(&id).await["specVersion"]
        .as_str()
        .unwrap_or_else(|| panic!("request {id} has no specVersion"))
        .to_owned();
    (id, version)
}

/// The text of `file` (a path ending so) in request `id`'s specs.
async fn spec_text(client: &Client, id: &str, file: &str) -> String {
    let spec = client.get(&format!("/api/v1/requests/{id}/spec")).await;
    spec["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with(file))
        .unwrap_or_else(|| panic!("no {file} in {spec}"))["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn wait_for_line(server: &Service, line: &str, nth: usize) {
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while server.stderr().matches(line).count() < nth {
        assert!(
            std::time::Instant::now() < until,
            "no {line:?} (#{nth}) in: {}",
            server.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_before_and_after_a_spec_reload_keep_their_spec_versions() {
    let dir = steps_dir();
    let marks = dir.path().join("marks");
    std::fs::write(marks.join("fixed"), "").unwrap();
    let flaky = dir.path().join("specs/flaky.yaml");
    let info = [("RUST_LOG", "info")];
    let server = Service::start_env(dir.path(), &SERVER, &info);
    let client = Client::new(&server.url);
    let (before, v1) = flaky_request(&client, &marks).await;
    assert_eq!(spec_text(&client, &before, "flaky.yaml").await, FLAKY);
    let said = cli(dir.path(), &server.url, &["info", &before]);
    assert!(said.contains(&format!("specs: {v1}")), "{said}");

    // Changed, and reloaded on SIGHUP.
    let changed = FLAKY.replace("what a runs", "what a runs (changed)");
    std::fs::write(&flaky, &changed).unwrap();
    server.hangup();
    wait_for_line(&server, "specs reloaded", 1).await;
    let (after, v2) = flaky_request(&client, &marks).await;
    assert_ne!(v1, v2);
    assert_eq!(spec_text(&client, &after, "flaky.yaml").await, changed);
    assert_eq!(spec_text(&client, &before, "flaky.yaml").await, FLAKY);

    // Broken: the loaded specs stay.
    std::fs::write(&flaky, "sequences:\n  flaky: [not, a, sequence\n").unwrap();
    server.hangup();
    wait_for_line(&server, "the new specs have errors", 1).await;
    let (_, still) = flaky_request(&client, &marks).await;
    assert_eq!(still, v2);
    drop(server);

    // With --watch-specs, a change is taken without a signal.
    std::fs::write(&flaky, &changed).unwrap();
    let mut watching = SERVER.to_vec();
    watching.push("--watch-specs");
    let server = Service::start_env(dir.path(), &watching, &info);
    let client = Client::new(&server.url);
    let (_, again) = flaky_request(&client, &marks).await;
    assert_eq!(again, v2, "the same files are the same version");
    let third = FLAKY.replace("what c runs", "what c runs (third)");
    std::fs::write(&flaky, &third).unwrap();
    wait_for_line(&server, "specs reloaded", 1).await;
    let (last, v3) = flaky_request(&client, &marks).await;
    assert!(v3 != v1 && v3 != v2, "{v1} {v2} {v3}");
    assert_eq!(spec_text(&client, &last, "flaky.yaml").await, third);
}

/// Creates a request of `request_type` with `args`; returns its id.
async fn create(client: &Client, request_type: &str, args: serde_json::Value) -> String {
    client.start(request_type, args).await
}

/// Waits until the request's approval job waits (its status line says so).
async fn until_waiting(client: &Client, id: &str) {
    let until = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let running = client
            .try_get(&format!("/api/v1/status/running?requestId={id}"))
            .await;
        let waiting = running.as_ref().is_some_and(|status| {
            status["jobs"].as_array().is_some_and(|jobs| {
                jobs.iter()
                    .any(|job| job["status"] == "waiting for approval: ship it?")
            })
        });
        if waiting {
            return;
        }
        assert!(
            std::time::Instant::now() < until,
            "request {id}'s approval never waited: {running:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_survives_a_sigkill_of_its_runner_and_completes_once_approved() {
    let dir = steps_dir();
    let marks = dir.path().join("marks");
    let mut server = Service::start(dir.path(), &SERVER);
    let client = Client::new(&server.url);
    let id = create(&client, "gated", json!({"marks": marks})).await;
    until_waiting(&client, &id).await;
    // Nothing answers for it yet; the runner (the whole server) dies.
    server.kill();
    let server = Service::start(dir.path(), &SERVER);
    let client = Client::new(&server.url);
    until_waiting(&client, &id).await;
    assert!(executions(&marks).is_empty());
    // Issue #36: `status` says what the request waits on.
    let status = cli(dir.path(), &server.url, &["status", &id]);
    assert!(
        status.contains(" running: gate: waiting for approval: ship it?"),
        "{status}"
    );

    let said = cli(
        dir.path(),
        &server.url,
        &["approve", &id, "--comment", "go"],
    );
    assert_eq!(said.trim(), format!("OK, approved {id}"));
    client
        .wait_state(&id, COMPLETE, Duration::from_secs(30))
        .await;
    assert_eq!(jobs_run(&marks), ["after"]);
    let log = client.get(&format!("/api/v1/requests/{id}/log")).await;
    let gate = log
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["name"] == "gate")
        .unwrap();
    assert_eq!(gate["state"], COMPLETE);
    let stdout = gate["stdout"].as_str().unwrap();
    assert!(
        stdout.starts_with("approved by ") && stdout.trim_end().ends_with(": go"),
        "{stdout}"
    );
    // Answered once: a second answer is refused.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(["reject", &id, "gate"])
        .env("SPINDLE_ADDR", &server.url)
        .output()
        .unwrap();
    assert!(!output.status.success(), "{output:?}");

    // A rejection fails the request, saying who rejected it.
    let rejected = create(&client, "gated", json!({"marks": marks})).await;
    until_waiting(&client, &rejected).await;
    cli(dir.path(), &server.url, &["reject", &rejected, "gate"]);
    client
        .wait_state(&rejected, FAIL, Duration::from_secs(30))
        .await;
    let status = cli(dir.path(), &server.url, &["status", &rejected]);
    assert!(status.contains("rejected by "), "{status}");
    assert_eq!(jobs_run(&marks), ["after"]);

    // Nobody answers within the node's timeout: the request fails.
    let briefly = create(&client, "gated-briefly", json!({})).await;
    client
        .wait_state(&briefly, FAIL, Duration::from_secs(30))
        .await;
    let log = client.get(&format!("/api/v1/requests/{briefly}/log")).await;
    let error = log
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "gate")
        .unwrap()["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(error.contains("timed out"), "{error}");
    let trail = client.get(&format!("/api/v1/requests/{id}/audit")).await;
    let actions: Vec<&str> = trail
        .as_array()
        .unwrap()
        .iter()
        .map(|event| event["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["create", "approve"]);
}

const SCHEDULED: &str = r#"sequences:
  tick:
    request: true
    nodes:
      beat:
        category: job
        type: noop
  slowly:
    request: true
    args:
      optional:
        - name: wait
          default: 2500ms
    nodes:
      nap:
        category: job
        type: sleep
        args: [{expected: duration, given: wait}]
schedules:
  ticks:
    cron: "* * * * * *"
    request: tick
    overlap: start
  slow:
    cron: "* * * * * *"
    timezone: Europe/Berlin
    request: slowly
    args: {wait: 2500ms}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_starts_one_request_per_tick_across_two_request_managers() {
    let test = "a_schedule_starts_one_request_per_tick_across_two_request_managers";
    let Some(database) = crate::services::NewDatabase::create(test).await else {
        return;
    };
    let url = database.url.clone();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("specs")).unwrap();
    std::fs::write(dir.path().join("specs/scheduled.yaml"), SCHEDULED).unwrap();
    let rm_args = crate::rm_args(&url, "3s", &[]);
    let rm1 = Service::start(dir.path(), &rm_args);
    let rm2 = Service::start(dir.path(), &rm_args);
    let rm_urls = format!("{},{}", rm1.url, rm2.url);
    let jr = Service::start(dir.path(), &crate::jr_args(&rm_urls, "3s", &[]));
    let client = Client::new(&rm1.url);
    // Ticks for a while: a wait for time itself.
    tokio::time::sleep(Duration::from_millis(5500)).await;
    let settled = chrono::Utc::now() - chrono::Duration::seconds(2);

    let requests = |request_type: &'static str| {
        let client = &client;
        async move {
            let found = client
                .get(&format!("/api/v1/requests?type={request_type}&limit=100"))
                .await;
            let mut found: Vec<serde_json::Value> = found.as_array().unwrap().clone();
            found.sort_by_key(|r| r["createdAt"].as_str().unwrap().to_owned());
            found
        }
    };
    // One request per tick: each names its run's due time, every second once, no gap.
    let ticks = requests("tick").await;
    let mut due: Vec<chrono::DateTime<chrono::Utc>> = ticks
        .iter()
        .map(|r| {
            let user = r["user"].as_str().unwrap();
            let at = user
                .strip_prefix("schedule:ticks@")
                .unwrap_or_else(|| panic!("{user}"));
            chrono::DateTime::parse_from_rfc3339(at).unwrap().to_utc()
        })
        .filter(|at| *at <= settled)
        .collect();
    due.sort();
    assert!(due.len() >= 3, "{ticks:#?}");
    for pair in due.windows(2) {
        assert_eq!(pair[1] - pair[0], chrono::Duration::seconds(1), "{due:?}");
    }
    // Both Request Managers took part (each claims what it sees first): not asserted,
    // as which one wins a claim is the race; that none ran twice is.

    // The slow one skips while its previous run goes: never two at once.
    let slow = requests("slowly").await;
    assert!(!slow.is_empty() && slow.len() < ticks.len(), "{slow:#?}");
    for pair in slow.windows(2) {
        let time = |value: &serde_json::Value| {
            value
                .as_str()
                .map(|text| chrono::DateTime::parse_from_rfc3339(text).unwrap())
        };
        let (finished, next_created) = (time(&pair[0]["finishedAt"]), time(&pair[1]["createdAt"]));
        assert!(
            finished.is_some_and(|finished| Some(finished) <= next_created),
            "runs overlap: {pair:#?}"
        );
    }
    let listed = cli(dir.path(), &rm2.url, &["schedules"]);
    assert!(
        listed.contains("ticks") && listed.contains("Europe/Berlin"),
        "{listed}"
    );
    let statuses = client.get("/api/v1/schedules").await;
    assert_eq!(statuses.as_array().unwrap().len(), 2, "{statuses}");
    assert_eq!(statuses[1]["overlap"], "skip");
    assert!(statuses[0]["next"].is_string(), "{statuses}");
    drop((rm1, rm2, jr));
    database.remove().await;
}
