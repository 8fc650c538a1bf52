//! Issue #33: a trigger configured on a real `spindle server` starts a request from an
//! event once per delivery id, `spindle triggers` lists what it received, and a trigger
//! that names no request type of the specs stops the server at start, saying so.

use std::process::Command;
use std::time::Duration;

use crate::Service;
use crate::recovery::Client;

const SPECS: &str = "sequences:
  greet:
    request: true
    args:
      required:
        - name: who
    nodes:
      hello:
        category: job
        type: noop
        args: [{expected: who}]
";

const CONFIG: &str = "triggers:
  - name: alerts
    request: greet
    args:
      who: /alert/owner
    delivery: /alert/id
    token:
      file: alerts.token
";

/// `spindle server` with the specs above and `spindle.yaml`.
const SERVER: &[&str] = &[
    "server",
    "--listen",
    "127.0.0.1:0",
    "--specs",
    "specs.yaml",
    "--database",
    "sqlite://s.db",
    "--config",
    "spindle.yaml",
];

/// Writes the specs, `config` and the trigger's token in `dir`; the server's command.
fn server_in(dir: &std::path::Path, config: &str) -> Command {
    std::fs::write(dir.join("specs.yaml"), SPECS).unwrap();
    std::fs::write(dir.join("spindle.yaml"), config).unwrap();
    std::fs::write(dir.join("alerts.token"), "alert-token-1\n").unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_spindle"));
    command.current_dir(dir).args(SERVER);
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_starts_one_request_per_delivery_and_is_listed() {
    let dir = tempfile::tempdir().unwrap();
    drop(server_in(dir.path(), CONFIG));
    let service = Service::start(dir.path(), SERVER);
    let client = Client::new(&service.url);
    let event = serde_json::json!({"alert": {"id": 9001, "owner": "oncall-db"}});
    let send = async |token: &str| {
        client
            .http
            .post(format!("{}/api/v1/triggers/alerts", service.url))
            .bearer_auth(token)
            .json(&event)
            .send()
            .await
            .unwrap()
    };
    let first = send("alert-token-1").await;
    assert_eq!(first.status(), 201);
    let first: serde_json::Value = first.json().await.unwrap();
    let id = first["id"].as_str().unwrap().to_owned();
    assert_eq!(first["deliveryId"], "9001");
    client.wait_state(&id, 3, Duration::from_secs(30)).await;
    let again = send("alert-token-1").await;
    assert_eq!(again.status(), 200);
    let again: serde_json::Value = again.json().await.unwrap();
    assert_eq!(
        (again["id"].as_str(), &again["duplicate"]),
        (Some(id.as_str()), &serde_json::json!(true))
    );
    let refused = send("alert-token-2").await;
    assert_eq!(refused.status(), 401);

    let listed = Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(["triggers"])
        .env("SPINDLE_ADDR", &service.url)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    assert!(
        stdout.contains(
            "alerts  starts greet (who<-/alert/owner), proven by token, delivery id from /alert/id"
        ),
        "{stdout}"
    );
    assert_eq!(stdout.matches(id.as_str()).count(), 1, "{stdout}");
    assert!(stdout.contains(" 9001"), "{stdout}");
    assert!(!stdout.contains("alert-token-1"), "{stdout}");
}

#[test]
fn a_trigger_of_an_unknown_request_type_stops_the_server_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let output = server_in(
        dir.path(),
        &CONFIG.replace("request: greet", "request: greeet"),
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("triggers: alerts: request \"greeet\" is not a request type of the specs; expected one of: greet"),
        "{stderr}"
    );
    let output = server_in(
        dir.path(),
        &CONFIG.replace("file: alerts.token", "env: SPINDLE_TEST_NO_SUCH_TOKEN"),
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "triggers: alerts: token: environment variable SPINDLE_TEST_NO_SUCH_TOKEN is not set"
        ),
        "{stderr}"
    );
}
