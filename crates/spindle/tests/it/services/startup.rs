//! Starting the services: a port that is taken, `spindle run`'s exit codes and JSON,
//! settings checked at start, plain-text logs, each service's own flags.

use super::*;

/// Issue #10: a server whose port is taken exits at once with exit 2 and says why,
/// instead of running on, listening nowhere.
#[test]
fn a_server_that_cannot_listen_exits_2_and_says_why() {
    let dir = specs_dir();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = taken.local_addr().unwrap().to_string();
    for args in [
        vec!["server", "--specs", "specs", "--database", "sqlite://s.db"],
        vec!["rm", "--specs", "specs", "--database", "sqlite://r.db"],
        vec!["jr"],
    ] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_spindle"));
        command
            .args(&args)
            .args(["--listen", &listen])
            .current_dir(dir.path())
            .stdin(std::process::Stdio::null());
        let child = command
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done_tx.send(child.wait_with_output());
        });
        let Ok(output) = done_rx.recv_timeout(Duration::from_secs(30)) else {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            panic!("{args:?} on a taken port kept running");
        };
        let output = output.unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("cannot listen on {listen}")) && stderr.contains("in use"),
            "{args:?}: {stderr}"
        );
    }
    drop(taken);
}

#[test]
fn spindle_run_exit_codes_and_json_output() {
    let dir = specs_dir();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_spindle"))
            .args(["run", "--specs", "specs", "--database", "sqlite://run.db"])
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let done = run(&["sleep-chain", "sleepTime=10"]);
    assert_eq!(done.status.code(), Some(0));
    let line = String::from_utf8(done.stdout).unwrap();
    assert!(line.trim_end().ends_with(" COMPLETE"), "{line}");
    let json = run(&["sleep-chain", "sleepTime=10", "--output", "json"]);
    assert_eq!(json.status.code(), Some(0));
    let document: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(document["request"]["state"], 3);
    assert_eq!(document["jobLog"].as_array().unwrap().len(), 9);
    let bad = run(&["sleep-chain", "colour=red"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr)
            .contains("`colour` is not an arg of request `sleep-chain`")
    );
    let failed = run(&["sleep-chain", "sleepTime=soon"]);
    assert_eq!(
        failed.status.code(),
        Some(2),
        "a sleep job refuses its duration when the request is created"
    );
}

#[test]
fn service_settings_are_checked_at_start() {
    let dir = specs_dir();
    std::fs::write(dir.path().join("bad.yaml"), "listen: [1, 2]\n").unwrap();
    std::fs::write(dir.path().join("typo.yaml"), "lisen: 127.0.0.1:1\n").unwrap();
    let start = |args: &[&str], env: &[(&str, &str)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_spindle"));
        command.args(args).current_dir(dir.path());
        for (key, value) in env {
            command.env(key, value);
        }
        command.output().unwrap()
    };
    let out = start(&["server", "--config", "bad.yaml"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("config file bad.yaml"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = start(&["server", "--config", "typo.yaml"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("lisen"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The environment overrides the file, and a flag overrides the environment.
    std::fs::write(
        dir.path().join("ok.yaml"),
        "listen: 127.0.0.1:1\ninterval: 5s\n",
    )
    .unwrap();
    let out = start(
        &["server", "--config", "ok.yaml"],
        &[("SPINDLE_LISTEN", "nonsense")],
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("listen: \"nonsense\" is not an address"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = start(
        &["server", "--config", "ok.yaml", "--interval", "often"],
        &[],
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("interval: \"often\" is not a duration"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = start(&["server", "--specs", "missing"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let out = start(&["rm", "--jr-url", "jr:32307"], &[]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("jr_url: \"jr:32307\" is not a URL"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Issue #12: a server's log is plain text when it is not a terminal, and specs without a
/// request type are a warning at start.
#[test]
fn a_server_logs_plain_text_and_warns_of_specs_without_request_types() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("helpers.yaml"),
        "sequences:\n  helper:\n    nodes:\n      a:\n        category: job\n        type: noop\n",
    )
    .unwrap();
    let server = Service::start(
        dir.path(),
        &[
            "server",
            "--listen",
            "127.0.0.1:0",
            "--specs",
            "helpers.yaml",
            "--database",
            "sqlite://s.db",
        ],
    );
    let stderr = server.stderr();
    assert!(
        stderr.contains("the specs have no request types"),
        "{stderr}"
    );
    assert!(!stderr.contains('\x1b'), "no colour codes: {stderr:?}");
}

/// Issue #12: each service takes only its own flags, and an exported `SPINDLE_SPECS`
/// (meant for the servers) does not turn `spindle graph <id>` into the spec form.
#[test]
fn each_service_takes_only_its_own_flags() {
    let dir = specs_dir();
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_spindle"));
        command.args(args).current_dir(dir.path());
        for (key, value) in env {
            command.env(key, value);
        }
        command.output().unwrap()
    };
    for (args, flag) in [
        (vec!["server", "--jr-url", "http://x:1"], "--jr-url"),
        (vec!["server", "--rm-url", "http://x:1"], "--rm-url"),
        (vec!["rm", "--rm-url", "http://x:1"], "--rm-url"),
        (vec!["jr", "--interval", "1s"], "--interval"),
        (vec!["jr", "--specs", "specs"], "--specs"),
        (vec!["jr", "--database", "sqlite://x.db"], "--database"),
    ] {
        let out = run(&args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("unexpected argument '{flag}'")),
            "{args:?}: {stderr}"
        );
    }
    let help = String::from_utf8(run(&["jr", "--help"], &[]).stdout).unwrap();
    assert!(
        help.contains("--rm-url") && !help.contains("--specs"),
        "{help}"
    );
    let help = String::from_utf8(run(&["server", "--help"], &[]).stdout).unwrap();
    assert!(
        help.contains("--specs") && !help.contains("--jr-url"),
        "{help}"
    );
    // The stored form: the server at --addr does not answer (5), not a spec error.
    let out = run(
        &["graph", "someid", "--addr", "http://127.0.0.1:1"],
        &[("SPINDLE_SPECS", "specs")],
    );
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
