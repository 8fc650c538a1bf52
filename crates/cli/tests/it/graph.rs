//! `spindle graph`: chains printed for the fixtures, DOT, request args and errors.

use serde_json::Value;

use crate::{fixtures, run, spindle};

fn graph_json(args: &[&str]) -> Value {
    let (stdout, stderr, code) = run(spindle(&fixtures()).arg("graph").args(args));
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).expect("a JSON job chain")
}

#[test]
fn json_chain_of_a_fixture_in_spin_cycle_shape() {
    let chain = graph_json(&["--specs", "dev-test.yaml", "test", "sleepTime=250"]);
    assert_eq!(chain["requestId"].as_str().unwrap().len(), 20);
    assert_eq!(chain["state"], 1);
    assert_eq!(chain["finishedJobs"], 0);
    let jobs = chain["jobs"].as_object().unwrap();
    assert_eq!(jobs.len(), 15);
    let sleeps: Vec<&Value> = jobs.values().filter(|j| j["type"] == "sleep").collect();
    assert_eq!(sleeps.len(), 2);
    assert!(sleeps.iter().all(|j| j["args"]["duration"] == "250"));
    // Every job's successors are jobs of the chain; one job has none.
    let adjacency = chain["adjacencyList"].as_object().unwrap();
    assert_eq!(adjacency.len(), 14);
    for succs in adjacency.values() {
        for succ in succs.as_array().unwrap() {
            assert!(jobs.contains_key(succ.as_str().unwrap()));
        }
    }
}

#[test]
fn preview_shows_fixtures_whose_job_types_this_binary_does_not_know() {
    let (_, stderr, code) =
        run(spindle(&fixtures()).args(["graph", "--specs", "a-b-c.yaml", "three-nodes", "foo=1"]));
    assert_eq!(code, 1);
    assert!(stderr.contains("unknown job type `aJobType`"), "{stderr}");
    assert!(stderr.contains("--preview"), "{stderr}");

    let chain = graph_json(&["--specs", "a-b-c.yaml", "three-nodes", "foo=1", "--preview"]);
    let jobs = chain["jobs"].as_object().unwrap();
    let b = jobs.values().find(|j| j["name"] == "b").unwrap();
    assert_eq!(b["type"], "bJobType");
    assert_eq!(b["retry"], 3);
    assert!(
        b["args"]["aArg"][0]
            .as_str()
            .unwrap()
            .contains("set by a aJobType job")
    );

    // decomm.yaml expands over the list a job sets: once per placeholder element.
    let chain = graph_json(&[
        "--specs",
        "decomm.yaml",
        "decommission-cluster",
        "cluster=c1",
        "env=prod",
        "--preview",
    ]);
    let jobs = chain["jobs"].as_object().unwrap();
    assert_eq!(jobs.values().filter(|j| j["name"] == "check-ok").count(), 1);
}

#[test]
fn dot_has_a_cluster_per_sequence() {
    let (stdout, _, code) = run(spindle(&fixtures()).args([
        "graph",
        "--specs",
        "dev-test.yaml",
        "test",
        "--format",
        "dot",
    ]));
    assert_eq!(code, 0);
    assert!(stdout.starts_with("digraph \""));
    assert_eq!(stdout.matches("subgraph \"cluster_").count(), 3, "{stdout}");
    assert!(stdout.contains("label=\"sequence_wait-1\";"));
    assert!(stdout.contains("label=\"wait\\nsleep\"]"));
    assert_eq!(stdout.matches(" -> ").count(), 15);
    assert!(stdout.ends_with("}\n"));
}

#[test]
fn list_args_and_shell_args_expansion_from_yaml_alone() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("fleet.yaml"),
        r#"sequences:
  fleet:
    request: true
    args:
      required:
        - name: zone
      static:
        - name: lister
          default: sh
        - name: listArgs
          default: ["-c", "printf '{\"hosts\": [\"%s-1\", \"%s-2\"]}' \"$SPINDLE_ARG_ZONE\" \"$SPINDLE_ARG_ZONE\""]
    nodes:
      list:
        category: job
        type: shell-args
        args:
          - expected: cmd
            given: lister
          - expected: args
            given: listArgs
          - expected: zone
        sets: [{arg: hosts}]
      per-host:
        category: sequence
        type: one-host
        each: [hosts:host]
        parallel: 1
        deps: [list]
  one-host:
    args:
      required:
        - name: host
    nodes:
      wait:
        category: job
        type: sleep
        args:
          - expected: duration
            given: host
"#,
    )
    .unwrap();
    // The sleep job refuses a host name as its duration: an input error naming the node.
    let graph = ["graph", "--specs", ".", "fleet", "zone=eu", "--run-shell-args"];
    let (_, stderr, code) = run(spindle(dir.path()).args(graph));
    assert_eq!(code, 1);
    assert!(
        stderr.contains("node `wait`: cannot build job `wait` of type `sleep`"),
        "{stderr}"
    );

    std::fs::write(
        dir.path().join("fleet.yaml"),
        std::fs::read_to_string(dir.path().join("fleet.yaml"))
            .unwrap()
            .replace("type: sleep", "type: noop")
            .replace("expected: duration", "expected: host"),
    )
    .unwrap();
    let (stdout, stderr, code) = run(spindle(dir.path()).args(graph));
    assert_eq!(code, 0, "{stderr}");
    let chain: Value = serde_json::from_str(&stdout).unwrap();
    let jobs = chain["jobs"].as_object().unwrap();
    let mut hosts: Vec<&str> = jobs
        .values()
        .filter(|j| j["name"] == "wait")
        .map(|j| j["args"]["host"].as_str().unwrap())
        .collect();
    hosts.sort_unstable();
    assert_eq!(hosts, ["eu-1", "eu-2"]);
    let repeat = jobs
        .values()
        .find(|j| j["name"] == "repeat_per-host_begin")
        .unwrap();
    assert_eq!(repeat["parallel"], 1);

    // Issue #10: without --run-shell-args the program does not run; what it would set is
    // shown as computed at create time.
    std::fs::write(
        dir.path().join("fleet.yaml"),
        std::fs::read_to_string(dir.path().join("fleet.yaml"))
            .unwrap()
            .replace("printf '", "touch ran; printf '"),
    )
    .unwrap();
    let (stdout, stderr, code) = run(spindle(dir.path()).args(&graph[..graph.len() - 1]));
    assert_eq!(code, 0, "{stderr}");
    assert!(!dir.path().join("ran").exists(), "the shell-args program ran");
    let chain: Value = serde_json::from_str(&stdout).unwrap();
    let hosts: Vec<&str> = chain["jobs"]
        .as_object()
        .unwrap()
        .values()
        .filter(|j| j["name"] == "wait")
        .map(|j| j["args"]["host"].as_str().unwrap())
        .collect();
    assert_eq!(
        hosts,
        ["<hosts: set by a shell-args job computed at create time>"]
    );
    run(spindle(dir.path()).args(graph));
    assert!(dir.path().join("ran").exists(), "--run-shell-args runs it");

    // A JSON list on the command line is passed as a list.
    std::fs::write(
        dir.path().join("fleet.yaml"),
        "sequences:\n  r:\n    request: true\n    args:\n      required:\n        - name: hosts\n    nodes:\n      each:\n        category: sequence\n        type: noop\n        each: [hosts:host]\n",
    )
    .unwrap();
    let (stdout, stderr, code) =
        run(spindle(dir.path()).args(["graph", "--specs", ".", "r", r#"hosts=["a","b","c"]"#]));
    assert_eq!(code, 0, "{stderr}");
    let chain: Value = serde_json::from_str(&stdout).unwrap();
    let count = chain["jobs"]
        .as_object()
        .unwrap()
        .values()
        .filter(|j| j["name"] == "sequence_each_begin")
        .count();
    assert_eq!(count, 3);
}

#[test]
fn graph_errors_exit_1_and_usage_errors_exit_2() {
    let (_, stderr, code) =
        run(spindle(&fixtures()).args(["graph", "--specs", "dev-test.yaml", "nope"]));
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        "error: unknown request type `nope`; expected one of: test\n"
    );
    let (_, stderr, code) =
        run(spindle(&fixtures()).args(["graph", "--specs", "dev-test.yaml", "test", "colour=red"]));
    assert_eq!(code, 1);
    assert!(stderr.contains("`colour` is not an arg of request `test`; it takes: sleepTime (optional, default \"1000\")"), "{stderr}");
    let (_, stderr, code) =
        run(spindle(&fixtures()).args(["graph", "--specs", "cond-args.yaml", "request-name"]));
    assert_eq!(code, 1);
    assert!(stderr.contains("have errors"), "{stderr}");
    let (_, _, code) =
        run(spindle(&fixtures()).args(["graph", "--specs", "dev-test.yaml", "test", "novalue"]));
    assert_eq!(code, 2);
    let (_, _, code) = run(spindle(&fixtures()).args(["graph", "--specs", "missing-dir", "test"]));
    assert_eq!(code, 2);
    let (_, _, code) = run(spindle(&fixtures()).args(["graph"]));
    assert_eq!(code, 2);
}
