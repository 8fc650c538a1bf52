//! Issue #32, back-pressure: a Request Manager with no Job Runner and `--max-backlog 5`
//! takes five requests and refuses the sixth, `spindle start` saying why and when to
//! retry; once a runner comes, every accepted request completes and creates are taken
//! again.

use std::process::{Command, Stdio};
use std::time::Duration;

const SPECS: &str = "sequences:
  hello:
    request: true
    args: {}
    nodes:
      say:
        category: job
        type: noop
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_backlog_refuses_creates_until_it_drains() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("specs")).unwrap();
    std::fs::write(dir.path().join("specs/hello.yaml"), SPECS).unwrap();
    let args = crate::rm_args("sqlite://rm.db", "3s", &["--max-backlog", "5"]);
    let rm = crate::Service::start(dir.path(), &args);
    let start = || {
        Command::new(env!("CARGO_BIN_EXE_spindle"))
            .args(["start", "hello", "--yes"])
            .env("SPINDLE_ADDR", &rm.url)
            .env("NO_COLOR", "1")
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let mut accepted = Vec::new();
    for _ in 0..5 {
        let output = start();
        let said = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{said}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        accepted.push(said.split_whitespace().last().unwrap().to_owned());
    }
    let refused = start();
    assert_eq!(refused.status.code(), Some(1));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains(
            "too many requests wait to start: 5 are created and not yet handed to a Job Runner"
        ) && said.contains("below 5 (max_backlog)")
            && said.contains("retry in 1 s")
            && said.contains("HTTP 503"),
        "{said}"
    );
    let client = crate::recovery::Client::new(&rm.url);
    let metrics = reqwest::get(format!("{}/metrics", rm.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("spindle_requests_refused_total{kind=\"backlog\"} 1"),
        "{metrics}"
    );
    let found = client.get("/api/v1/requests?limit=0").await;
    assert_eq!(
        found.as_array().unwrap().len(),
        5,
        "nothing of the refused one stored"
    );
    // A runner comes: everything accepted completes, and the backlog drains.
    let _jr = crate::Service::start(dir.path(), &crate::jr_args(&rm.url, "3s", &[]));
    for id in &accepted {
        client.wait_state(id, 3, Duration::from_secs(30)).await;
    }
    crate::eventually(
        "a create is taken again",
        Duration::from_secs(10),
        async || start().status.success(),
    )
    .await;
}
