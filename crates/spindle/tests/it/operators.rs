//! Issue #36: what an operator meets first — the address a runner registers, listings and
//! messages.

use std::time::Duration;

use crate::recovery::Client;
use crate::{Service, jr_args, rm_args, run, spindle};

/// A Job Runner registers its advertised URL, not the address it listens on; one that
/// would advertise an address to listen on is refused at start, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_registers_its_advertised_url() {
    let dir = crate::recovery::work_dir();
    let rm = Service::start(dir.path(), &rm_args("sqlite://spindle.db", "2s", &[]));
    let advertised = "http://jr-1.example.com:4321";
    let _jr = Service::start_env(
        dir.path(),
        &jr_args(&rm.url, "2s", &[]),
        &[("SPINDLE_ADVERTISE_URL", advertised)],
    );
    let client = Client::new(&rm.url);
    crate::eventually(
        "the runner registered",
        Duration::from_secs(10),
        async || {
            let runners = client.get("/api/v1/job-runners").await;
            runners[0]["url"] == advertised
        },
    )
    .await;

    let (_, stderr, code) = run(spindle(dir.path()).args(jr_args(
        &rm.url,
        "2s",
        &["--advertise-url", "http://0.0.0.0:32307"],
    )));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("advertise_url: \"http://0.0.0.0:32307\" is an address to listen on"),
        "{stderr}"
    );
}

/// A misspelt spec field is not lost in silence: the linter asks "did you mean", and a
/// server that loads the spec (Spin Cycle ignored unknown fields, so it still starts)
/// logs the warning at start.
#[test]
fn a_misspelt_spec_field_is_named_with_its_near_miss_and_the_server_says_so() {
    // Beside the recovery tests' specs, which lint clean.
    let dir = crate::recovery::work_dir();
    std::fs::write(
        dir.path().join("specs/typo.yaml"),
        "sequences:
  typo:
    request: true
    nodes:
      flaky:
        category: job
        type: noop
        retrys: 2
",
    )
    .unwrap();
    let (stdout, stderr, code) = run(spindle(dir.path()).args(["lint", "specs"]));
    assert_eq!(code, 0, "a warning: {stdout}{stderr}");
    assert!(
        stdout.contains("unknown field `retrys` in a node (did you mean `retry`?)"),
        "{stdout}"
    );
    let server = Service::start(
        dir.path(),
        &crate::service_args("server", "sqlite://typo.db", &[]),
    );
    let logged = server.stderr();
    assert!(
        logged.contains("WARN") && logged.contains("(did you mean `retry`?)"),
        "{logged}"
    );
}

/// "listening on" means ready to serve: a service whose database cannot be opened says
/// so and nothing else.
#[test]
fn a_database_that_cannot_be_opened_is_refused_before_listening() {
    let dir = crate::recovery::work_dir();
    for command in ["server", "rm"] {
        let args = crate::service_args(command, "sqlite://no-such-dir/spindle.db", &[]);
        let (_, stderr, code) = run(spindle(dir.path()).args(args));
        assert_ne!(code, 0, "{stderr}");
        assert!(!stderr.contains("listening on"), "{command}: {stderr}");
        assert!(
            stderr.contains("no-such-dir/spindle.db") && stderr.contains("No such file"),
            "{command}: {stderr}"
        );
    }
}
