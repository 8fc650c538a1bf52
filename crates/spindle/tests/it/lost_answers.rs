//! Issue #48, point 1, end to end: `spindle start` whose create reached the Request
//! Manager but whose answer was lost on the way back sends the create again with the
//! same idempotency key, and hears of the request the first created: one request, not
//! two.

use std::process::{Command, Stdio};

use crate::nemesis::{Link, Mode};

const SPECS: &str = "sequences:
  hello:
    request: true
    args:
      required: [{name: host}]
    nodes:
      say:
        category: job
        type: noop
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_whose_answer_was_lost_is_sent_again_and_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("specs")).unwrap();
    std::fs::write(dir.path().join("specs/hello.yaml"), SPECS).unwrap();
    let args = crate::rm_args("sqlite://rm.db", "3s", &[]);
    let rm = crate::Service::start(dir.path(), &args);
    let link = Link::to(&rm.url).await;
    link.set(Mode::LoseAnswers("POST /api/v1/requests ", 1));
    let url = link.url();
    let output = tokio::task::spawn_blocking({
        let dir = dir.path().to_owned();
        move || {
            Command::new(env!("CARGO_BIN_EXE_spindle"))
                .args(["start", "hello", "host=web-7", "--yes"])
                .env("SPINDLE_ADDR", &url)
                .env("NO_COLOR", "1")
                .current_dir(dir)
                .stdin(Stdio::null())
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(link.mode(), Mode::Pass, "the first answer was lost");
    let id = said.split_whitespace().last().unwrap();
    let client = crate::recovery::Client::new(&rm.url);
    let stored = client.get("/api/v1/requests?limit=10").await;
    let stored = stored.as_array().unwrap();
    assert_eq!(stored.len(), 1, "one request, not two: {stored:?}");
    assert_eq!(stored[0]["id"], id, "{said}");
}
