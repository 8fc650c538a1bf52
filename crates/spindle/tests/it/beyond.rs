//! Issue #16, end to end with real processes: what Spindle does beyond Spin Cycle.
//! A pause survives a restart of `spindle server` and a resume runs the request to
//! COMPLETE.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::Service;
use crate::recovery::{Client, executions, wait_until};

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

const RUNNING: u64 = 2;
const COMPLETE: u64 = 3;

fn steps_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("specs")).unwrap();
    std::fs::create_dir(dir.path().join("marks")).unwrap();
    std::fs::write(dir.path().join("specs/steps.yaml"), STEPS).unwrap();
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
    let created = client
        .http
        .post(format!("{}/api/v1/requests", server.url))
        .json(&json!({"type": "steps", "args": {"marks": marks}}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let id = created.json::<serde_json::Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    wait_until("the first job runs", Duration::from_secs(30), || {
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
