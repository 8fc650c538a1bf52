//! Issue #33: a real `spindle server` told to notify a webhook POSTs to it when an
//! approval waits and when the request fails (its approval timed out), signed; `spindle
//! notifications` lists both delivered; a webhook of an unknown request type stops the
//! server at start, saying so.

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::HeaderMap;

use crate::Service;
use crate::recovery::Client;

const SPECS: &str = "sequences:
  gate:
    request: true
    nodes:
      ask:
        category: job
        type: approval
        timeout: 1s
";

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

fn config(url: &str, requests: &str) -> String {
    format!(
        "notify:
  ui_url: https://spindle.example.com
  webhooks:
    - name: oncall
      url: {url}/hook
      events: [failed, approval]
      requests: [{requests}]
      secret:
        file: hook.secret
"
    )
}

fn server_in(dir: &std::path::Path, config: &str) -> Command {
    std::fs::write(dir.join("specs.yaml"), SPECS).unwrap();
    std::fs::write(dir.join("spindle.yaml"), config).unwrap();
    std::fs::write(dir.join("hook.secret"), "hook-secret-1\n").unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_spindle"));
    command.current_dir(dir).args(SERVER);
    command
}

type Got = Arc<Mutex<Vec<(HeaderMap, String)>>>;

/// A webhook receiver of the test's own on 127.0.0.1; its URL and what it got.
async fn receiver() -> (String, Got) {
    let got: Got = Arc::default();
    let record = {
        let got = Arc::clone(&got);
        move |headers: HeaderMap, body: String| {
            got.lock().unwrap().push((headers, body));
            async { "ok" }
        }
    };
    let app = axum::Router::new().route("/hook", axum::routing::post(record));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_that_waits_and_a_failure_reach_the_webhook_and_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    let (url, got) = receiver().await;
    drop(server_in(dir.path(), &config(&url, "gate")));
    let service = Service::start(dir.path(), SERVER);
    let client = Client::new(&service.url);
    let id = client.start("gate", serde_json::json!({})).await;
    client.wait_state(&id, 4, Duration::from_secs(30)).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while got.lock().unwrap().len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            got.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let got = got.lock().unwrap().clone();
    let events: Vec<serde_json::Value> = got
        .iter()
        .map(|(headers, body)| {
            assert!(
                headers["x-spindle-signature-256"]
                    .to_str()
                    .unwrap()
                    .starts_with("sha256="),
                "{headers:?}"
            );
            serde_json::from_str(body).unwrap()
        })
        .collect();
    assert_eq!(events[0]["event"], "approval", "{events:?}");
    assert_eq!(events[0]["jobId"].as_str().map(str::is_empty), Some(false));
    assert_eq!(events[1]["event"], "failed", "{events:?}");
    assert_eq!(events[1]["requestId"], id.as_str());
    assert_eq!(
        events[1]["url"],
        format!("https://spindle.example.com/requests/{id}")
    );

    let listed = Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(["notifications", "--webhook", "oncall"])
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
    let lines: Vec<&str> = stdout.lines().skip(1).collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines[0].contains(" failed ") && lines[0].contains(&id),
        "{stdout}"
    );
    assert!(
        lines[1].contains(" approval ") && lines[1].contains(&id),
        "{stdout}"
    );
    assert!(
        lines.iter().all(|line| line.contains(" delivered ")),
        "{stdout}"
    );
    assert!(!stdout.contains("hook-secret-1"), "{stdout}");
    let bad = Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(["notifications", "--status", "gone"])
        .env("SPINDLE_ADDR", &service.url)
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("expected pending, delivered or failed"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

#[test]
fn a_webhook_of_an_unknown_request_type_stops_the_server_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let output = server_in(dir.path(), &config("http://127.0.0.1:9", "gates"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("notify.webhooks: oncall: requests: \"gates\" is not a request type of the specs; expected some of: gate"),
        "{stderr}"
    );
}

/// A separate Job Runner tells its Request Manager when an approval waits, over HTTP;
/// the Request Manager tells the webhook, and tells it when that runner is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runner_elsewhere_tells_of_its_approvals_and_its_loss_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let (url, got) = receiver().await;
    std::fs::create_dir(dir.path().join("specs")).unwrap();
    std::fs::write(dir.path().join("specs/gate.yaml"), SPECS).unwrap();
    std::fs::write(
        dir.path().join("spindle.yaml"),
        config(&url, "gate").replace("[failed, approval]", "[approval, runner_lost]"),
    )
    .unwrap();
    std::fs::write(dir.path().join("hook.secret"), "hook-secret-1\n").unwrap();
    let rm = Service::start(
        dir.path(),
        &crate::rm_args("sqlite://rm.db", "2s", &["--config", "spindle.yaml"]),
    );
    let mut jr = Service::start(dir.path(), &crate::jr_args(&rm.url, "2s", &[]));
    let client = Client::new(&rm.url);
    let id = client.start("gate", serde_json::json!({})).await;
    let events = |got: &Got| -> Vec<serde_json::Value> {
        got.lock()
            .unwrap()
            .iter()
            .map(|(_, body)| serde_json::from_str(body).unwrap())
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while events(&got).is_empty() {
        assert!(std::time::Instant::now() < deadline, "no approval told");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let approval = &events(&got)[0];
    assert_eq!(
        (approval["event"].as_str(), approval["requestId"].as_str()),
        (Some("approval"), Some(id.as_str()))
    );
    // The runner dies: once its lease lapses, its loss is told.
    jr.kill();
    while !events(&got).iter().any(|e| e["event"] == "runner_lost") {
        assert!(
            std::time::Instant::now() < deadline + Duration::from_secs(30),
            "no loss told: {:?}\n{}",
            events(&got),
            rm.stderr()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let lost = events(&got)
        .into_iter()
        .find(|e| e["event"] == "runner_lost")
        .unwrap();
    assert!(
        lost["runner"].as_str().is_some_and(|r| !r.is_empty()),
        "{lost}"
    );
    assert_eq!(lost["url"], "https://spindle.example.com/runners");
}
