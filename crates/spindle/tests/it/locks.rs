//! Issue #34 from the command line: a request whose cluster is locked waits PENDING and
//! says why (`status`), `spindle locks` lists holder and queue, and the waiter starts
//! when the holder ends.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const SPECS: &str = "sequences:
  failover:
    request: true
    args:
      required:
        - name: cluster
          desc: The database cluster
      static:
        - name: wait
          default: 60s
    locks:
      - name: cluster-ops
        key: cluster
    nodes:
      # The holder sleeps long enough to be seen holding the lock.
      switch:
        category: job
        type: sleep
        args: [{expected: duration, given: wait}]
";

fn run(dir: &std::path::Path, addr: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(args)
        .env("SPINDLE_ADDR", addr)
        .env("NO_COLOR", "1")
        .env("USER", "ann")
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stdout(dir: &std::path::Path, addr: &str, args: &[&str]) -> String {
    let output = run(dir, addr, args);
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn a_locked_cluster_makes_the_next_request_wait_visibly_until_the_holder_ends() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("specs.yaml"), SPECS).unwrap();
    let service = crate::Service::start(
        dir.path(),
        &[
            "server",
            "--listen",
            "127.0.0.1:0",
            "--specs",
            "specs.yaml",
            "--database",
            "sqlite://s.db",
        ],
    );
    let (dir, addr) = (dir.path(), service.url.as_str());
    let start = |cluster: &str| -> String {
        let out = stdout(
            dir,
            addr,
            &["start", "failover", &format!("cluster={cluster}"), "--yes"],
        );
        out.split_whitespace().last().unwrap().to_owned()
    };
    let status = |id: &str| stdout(dir, addr, &["status", id]);
    let holder = start("db-7");
    // Started, and told at once that it waits, and for what.
    let started = run(dir, addr, &["start", "failover", "cluster=db-7", "--yes"]);
    let said = String::from_utf8_lossy(&started.stderr);
    assert!(
        said.contains("  PENDING: waiting for lock cluster-ops[cluster=db-7], held by request "),
        "{said}"
    );
    let waiter = String::from_utf8_lossy(&started.stdout)
        .split_whitespace()
        .last()
        .unwrap()
        .to_owned();
    // `find` says what a PENDING request waits for.
    let found = stdout(dir, addr, &["find", "states=PENDING"]);
    assert!(
        found
            .lines()
            .nth(1)
            .is_some_and(|line| line.starts_with(&waiter)
                && line.ends_with("  waiting for lock cluster-ops[cluster=db-7]")),
        "{found}"
    );
    let status_text = status(&waiter);
    assert!(status_text.contains("state: PENDING"), "{status_text}");
    assert!(
        status_text.contains(&format!(
            "waiting for lock cluster-ops[cluster=db-7], held by request {holder} of ann since "
        )) && status_text.contains(", 0 ahead in the queue"),
        "{status_text}"
    );
    // `spindle locks`: the lock, its holder and who is next.
    let locks = stdout(dir, addr, &["locks"]);
    let lines: Vec<&str> = locks.lines().collect();
    assert!(
        lines[0].starts_with("LOCK ") && lines[0].contains("LIMIT"),
        "{locks}"
    );
    assert!(
        lines[1].starts_with("cluster-ops[db-7]")
            && lines[1].contains(" holds ")
            && lines[1].contains(&holder),
        "{locks}"
    );
    assert!(
        lines[2].contains(" next ") && lines[2].contains(&waiter),
        "{locks}"
    );
    // The holder ends (stopped): the waiter starts without waiting for a round.
    stdout(dir, addr, &["stop", &holder]);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = status(&waiter);
        if text.contains("state: RUNNING") {
            assert!(!text.contains("waiting for lock"), "{text}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the waiter never started: {text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    stdout(dir, addr, &["stop", &waiter]);
    let output = run(dir, addr, &["locks"]);
    assert!(output.status.success());
    assert!(output.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim(),
        "no lock is held or waited for (a request type's `locks:` declares them)"
    );
}
