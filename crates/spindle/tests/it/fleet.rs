//! Issue #50: work over a fleet. A fleet's list too big for one command-line argument
//! (Linux takes none past 128 KiB) is read from a file by `spindle run` and `spindle
//! start` (`hosts=@hosts.txt`: one host a line, or a JSON list).

use crate::{run, spindle};

const SPECS: &str = "sequences:
  restart:
    request: true
    args:
      required:
        - name: hosts
          desc: The hosts to restart
    nodes:
      each-host:
        category: sequence
        type: restart-one
        each: [hosts:host]
        parallel: 50
  restart-one:
    args:
      required:
        - name: host
          desc: One host
    nodes:
      restart:
        category: job
        type: noop
";

/// 2,000 hosts of long names: 150 KiB, past what one argument may hold.
fn hosts() -> Vec<String> {
    (0..2_000)
        .map(|n| format!("web-{n:05}.a-rather-long-datacenter-name.example.internal.fleet.test"))
        .collect()
}

#[test]
fn a_fleet_too_big_for_a_command_line_is_read_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("specs.yaml"), SPECS).unwrap();
    let hosts = hosts();
    let listed = hosts.join("\n") + "\n";
    assert!(listed.len() > 128 << 10, "{} bytes", listed.len());
    std::fs::write(dir.path().join("hosts.txt"), &listed).unwrap();
    // As one argument it cannot even be passed.
    let inline = spindle(dir.path())
        .args(["graph", "--specs", "specs.yaml", "restart"])
        .arg(format!("hosts={}", serde_json::json!(hosts)))
        .output();
    assert!(inline.is_err(), "the kernel refuses an argument this long");

    let (stdout, stderr, code) = run(spindle(dir.path()).args([
        "run",
        "--specs",
        "specs.yaml",
        "--database",
        "sqlite://run.db",
        "--output",
        "json",
        "restart",
        "hosts=@hosts.txt",
    ]));
    assert_eq!(code, 0, "{stderr}");
    let ran: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(ran["request"]["state"], 3, "COMPLETE");
    let args = ran["request"]["args"].to_string();
    assert!(args.contains(&hosts[0]) && args.contains(&hosts[1_999]));
    let restarts = ran["jobLog"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["name"] == "restart")
        .count();
    assert_eq!(restarts, hosts.len());

    // A file that is not there says which, and what a leading @ means.
    let (_, stderr, code) = run(spindle(dir.path()).args([
        "run",
        "--specs",
        "specs.yaml",
        "--database",
        "sqlite://run.db",
        "restart",
        "hosts=@missing.txt",
    ]));
    assert_ne!(code, 0);
    assert!(
        stderr.contains("request arg `hosts`: reading missing.txt")
            && stderr.contains("write @@ for a literal @"),
        "{stderr}"
    );
}

#[test]
fn spindle_start_reads_a_fleet_from_a_file_as_a_json_list() {
    let (dir, server) = crate::sqlite_server(SPECS);
    let hosts = hosts();
    std::fs::write(
        dir.path().join("hosts.json"),
        serde_json::to_string_pretty(&hosts).unwrap(),
    )
    .unwrap();
    let (stdout, stderr, code) = run(spindle(dir.path()).env("SPINDLE_ADDR", &server.url).args([
        "start",
        "--yes",
        "--watch",
        "restart",
        "hosts=@hosts.json",
    ]));
    assert_eq!(code, 0, "{stdout}{stderr}");
    let id = stdout
        .lines()
        .find_map(|line| line.strip_prefix("OK, started restart request "))
        .unwrap_or_else(|| panic!("no request id in {stdout:?}"))
        .trim()
        .to_owned();
    let (shown, stderr, code) = run(spindle(dir.path())
        .env("SPINDLE_ADDR", &server.url)
        .args(["info", &id, "--output", "json"]));
    assert_eq!(code, 0, "{stderr}");
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["state"], 3, "COMPLETE");
    let args = shown["args"].to_string();
    assert!(args.contains(&hosts[0]) && args.contains(&hosts[1_999]));
}
