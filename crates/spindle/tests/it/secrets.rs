//! Issue #33: secret args. A request with an arg its type declares `secret: true` and
//! one that names a secret source of the Request Manager (an environment variable
//! there) runs on a real `spindle server`; its job gets both values in its environment
//! and prints them. Neither value is then anywhere in the database's files, the
//! server's log, any API answer (the request, its chain, job log, output, audit, the
//! search) or `spindle info`: each is stored encrypted, and shown as `****`.

use std::process::Command;
use std::time::Duration;

use base64::Engine as _;

use crate::Service;
use crate::recovery::Client;

const PASSWORD: &str = "pw-Sx7-secret-1";
const TOKEN: &str = "tok-Qm4-secret-2";

fn specs(marks: &std::path::Path) -> String {
    format!(
        r#"sequences:
  rotate:
    request: true
    args:
      required:
        - name: host
        - name: password
          secret: true
      optional:
        - name: token
          default: none
      static:
        - name: shell
          default: sh
        - name: script
          default: ["-c", 'printf "%s %s" "$SPINDLE_ARG_PASSWORD" "$SPINDLE_ARG_TOKEN" > "{marks}/got"; echo "rotating $SPINDLE_ARG_HOST with $SPINDLE_ARG_PASSWORD"; echo "token $SPINDLE_ARG_TOKEN" >&2']
    nodes:
      rotate:
        category: job
        type: shell-command
        args: [{{expected: cmd, given: shell}}, {{expected: args, given: script}}, {{expected: host}}, {{expected: password}}, {{expected: token}}]
"#,
        marks = marks.display()
    )
}

const CONFIG: &str = "secrets:
  keys:
    - id: k1
      file: secret.key
  sources:
    db-token:
      env: SPINDLE_TEST_DB_TOKEN
";

fn prepare(dir: &std::path::Path, marks: &std::path::Path, specs_at: &str) {
    let specs_path = dir.join(specs_at);
    std::fs::create_dir_all(specs_path.parent().unwrap()).unwrap();
    std::fs::write(specs_path, specs(marks)).unwrap();
    std::fs::write(dir.join("spindle.yaml"), CONFIG).unwrap();
    std::fs::write(
        dir.join("secret.key"),
        base64::engine::general_purpose::STANDARD.encode([7u8; 32]),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_arg_reaches_its_job_and_is_nowhere_else() {
    let dir = tempfile::tempdir().unwrap();
    let marks = tempfile::tempdir().unwrap();
    prepare(dir.path(), marks.path(), "specs.yaml");
    let service = Service::start_env(
        dir.path(),
        &[
            "server",
            "--listen",
            "127.0.0.1:0",
            "--specs",
            "specs.yaml",
            "--database",
            "sqlite://s.db",
            "--config",
            "spindle.yaml",
        ],
        &[("SPINDLE_TEST_DB_TOKEN", TOKEN), ("RUST_LOG", "debug")],
    );
    secret_args_stay_secret(&service, &[&service], dir.path(), "s.db", marks.path()).await;
}

/// The same with a Request Manager and a Job Runner apart: the values cross to the
/// runner with the chain only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_arg_reaches_a_job_runner_elsewhere_and_is_nowhere_else() {
    let dir = tempfile::tempdir().unwrap();
    let marks = tempfile::tempdir().unwrap();
    prepare(dir.path(), marks.path(), "specs/rotate.yaml");
    let debug = [("SPINDLE_TEST_DB_TOKEN", TOKEN), ("RUST_LOG", "debug")];
    let rm = Service::start_env(
        dir.path(),
        &crate::rm_args("sqlite://rm.db", "5s", &["--config", "spindle.yaml"]),
        &debug,
    );
    let jr = Service::start_env(dir.path(), &crate::jr_args(&rm.url, "5s", &[]), &debug[1..]);
    secret_args_stay_secret(&rm, &[&rm, &jr], dir.path(), "rm.db", marks.path()).await;
}

/// The secret args' request on the Request Manager at `service` (which logs at debug),
/// checked as the module says; the database's files are `database*` in `dir`.
async fn secret_args_stay_secret(
    service: &Service,
    logs: &[&Service],
    dir: &std::path::Path,
    database: &str,
    marks: &std::path::Path,
) {
    let client = Client::new(&service.url);
    let id = client
        .start(
            "rotate",
            serde_json::json!({"host": "db1", "password": PASSWORD, "token": {"secret": "db-token"}}),
        )
        .await;
    client.wait_state(&id, 3, Duration::from_secs(30)).await;
    // The job got both, in its environment.
    assert_eq!(
        std::fs::read_to_string(marks.join("got")).unwrap(),
        format!("{PASSWORD} {TOKEN}")
    );

    // Every answer about it: the secrets' bytes in none, `****` where they were.
    let mut answers = Vec::new();
    for path in [
        format!("/api/v1/requests/{id}"),
        format!("/api/v1/requests/{id}?chain=true"),
        format!("/api/v1/requests/{id}/job-chain"),
        format!("/api/v1/requests/{id}/log"),
        format!("/api/v1/requests/{id}/audit"),
        format!("/api/v1/requests/{id}/output"),
        "/api/v1/requests?limit=10".to_owned(),
        "/api/v1/notifications".to_owned(),
    ] {
        let answer = client
            .http
            .get(format!("{}{path}", service.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        answers.push((path, answer));
    }
    let info = Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(["info", &id])
        .env("SPINDLE_ADDR", &service.url)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    answers.push((
        "spindle info".to_owned(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&info.stdout),
            String::from_utf8_lossy(&info.stderr)
        ),
    ));
    for (what, answer) in &answers {
        for secret in [PASSWORD, TOKEN] {
            assert!(!answer.contains(secret), "{what} shows a secret: {answer}");
        }
    }
    let log = &answers[3].1;
    assert!(log.contains("rotating db1 with ****"), "{log}");
    assert!(log.contains("token ****"), "{log}");
    assert!(
        answers[0].1.contains("**** (secret password)"),
        "{}",
        answers[0].1
    );

    // The database's files and the server's log.
    let files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(database)
        })
        .collect();
    assert!(!files.is_empty());
    for file in files {
        let bytes = std::fs::read(&file).unwrap();
        for secret in [PASSWORD, TOKEN] {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{} holds a secret",
                file.display()
            );
        }
    }
    let logged: String = logs.iter().map(|service| service.stderr()).collect();
    assert!(
        logged.contains("request created"),
        "the log is read: {logged}"
    );
    for secret in [PASSWORD, TOKEN] {
        assert!(!logged.contains(secret), "the log shows a secret: {logged}");
    }

    // Asked for again, a request copied from this one must be given its secret anew.
    let response = client
        .http
        .post(format!("{}/api/v1/requests", service.url))
        .json(&serde_json::json!({"type": "rotate", "args": {"host": "db1", "password": "**** (secret password)"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let refused = response.text().await.unwrap();
    assert!(refused.contains("give it again"), "{refused}");
}

#[test]
fn a_secret_arg_without_a_key_or_a_bad_key_stops_or_refuses_with_why() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("specs.yaml"), specs(dir.path())).unwrap();
    std::fs::write(dir.path().join("spindle.yaml"), CONFIG).unwrap();
    std::fs::write(dir.path().join("secret.key"), "c2hvcnQ=").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_spindle"))
        .current_dir(dir.path())
        .args([
            "server",
            "--listen",
            "127.0.0.1:0",
            "--specs",
            "specs.yaml",
            "--database",
            "sqlite://s.db",
            "--config",
            "spindle.yaml",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("secrets.keys: k1: not 32 bytes in base64"),
        "{stderr}"
    );
}
