//! `spindle graph`: chains printed for the fixtures, DOT, request args and errors.

use std::path::Path;

use serde_json::Value;

use crate::{fixtures, run, spincycle_fixtures, spindle};

fn graph_json(dir: &Path, args: &[&str]) -> Value {
    let (stdout, stderr, code) = run(spindle(dir).arg("graph").args(args));
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).expect("a JSON job chain")
}

#[test]
fn json_chain_of_a_fixture_in_spin_cycle_shape() {
    check_fifteen_job_chain(&graph_json(
        &fixtures(),
        &["--specs", "fanout.yaml", "fanout", "sleepTime=250"],
    ));
}

#[test]
fn json_chain_of_spin_cycles_dev_test_request() {
    let Some(spincycle) = spincycle_fixtures("json_chain_of_spin_cycles_dev_test_request") else {
        return;
    };
    check_fifteen_job_chain(&graph_json(
        &spincycle,
        &["--specs", "dev-test.yaml", "test", "sleepTime=250"],
    ));
}

/// Spin Cycle's dev `test` request and Spindle's `fanout`: a noop, then two sequences of
/// one sleep each, with the wrappers 15 jobs.
fn check_fifteen_job_chain(chain: &Value) {
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

/// The job types `spindle graph --preview` shows as placeholders, in two fixtures.
struct PreviewCase<'a> {
    dir: &'a Path,
    /// A file, request and arg of three jobs of unknown types, the first setting `set`
    /// for `second`.
    three: [&'a str; 3],
    first_type: &'a str,
    second: &'a str,
    second_type: &'a str,
    set: &'a str,
    /// A request expanding over a list a job sets, and a job of the expansion.
    expansion: [&'a str; 4],
    expanded_job: &'a str,
}

fn check_preview(case: &PreviewCase) {
    let [file, request, arg] = case.three;
    let (_, stderr, code) = run(spindle(case.dir).args(["graph", "--specs", file, request, arg]));
    assert_eq!(code, 1);
    let unknown = format!("unknown job type `{}`", case.first_type);
    assert!(stderr.contains(&unknown), "{stderr}");
    assert!(stderr.contains("--preview"), "{stderr}");
    let chain = graph_json(case.dir, &["--specs", file, request, arg, "--preview"]);
    let jobs = chain["jobs"].as_object().unwrap();
    let second = jobs.values().find(|j| j["name"] == case.second).unwrap();
    assert_eq!(second["type"], case.second_type);
    assert_eq!(second["retry"], 3);
    assert!(
        second["args"][case.set][0]
            .as_str()
            .unwrap()
            .contains(&format!("set by a {} job", case.first_type))
    );
    // An expansion over the list a job sets runs once per placeholder element.
    let [file, request, a, b] = case.expansion;
    let chain = graph_json(case.dir, &["--specs", file, request, a, b, "--preview"]);
    let jobs = chain["jobs"].as_object().unwrap();
    assert_eq!(
        jobs.values()
            .filter(|j| j["name"] == case.expanded_job)
            .count(),
        1
    );
}

#[test]
fn preview_shows_fixtures_whose_job_types_this_binary_does_not_know() {
    check_preview(&PreviewCase {
        dir: &fixtures(),
        three: ["pipeline.yaml", "pipeline", "release=1"],
        first_type: "compileJob",
        second: "ship",
        second_type: "shipJob",
        set: "artifacts",
        expansion: ["rollout.yaml", "rollout", "cluster=c1", "env=prod"],
        expanded_job: "ping",
    });
}

#[test]
fn preview_of_spin_cycles_fixtures() {
    let Some(spincycle) = spincycle_fixtures("preview_of_spin_cycles_fixtures") else {
        return;
    };
    check_preview(&PreviewCase {
        dir: &spincycle,
        three: ["a-b-c.yaml", "three-nodes", "foo=1"],
        first_type: "aJobType",
        second: "b",
        second_type: "bJobType",
        set: "aArg",
        expansion: [
            "decomm.yaml",
            "decommission-cluster",
            "cluster=c1",
            "env=prod",
        ],
        expanded_job: "check-ok",
    });
}

#[test]
fn dot_has_a_cluster_per_sequence() {
    let (stdout, _, code) = run(spindle(&fixtures()).args([
        "graph",
        "--specs",
        "fanout.yaml",
        "fanout",
        "--format",
        "dot",
    ]));
    assert_eq!(code, 0);
    assert!(stdout.starts_with("digraph \""));
    assert_eq!(stdout.matches("subgraph \"cluster_").count(), 3, "{stdout}");
    assert!(stdout.contains("label=\"sequence_nap-1\";"));
    assert!(stdout.contains("label=\"nap\\nsleep\", fillcolor=\"white\"]"));
    assert_eq!(stdout.matches(" -> ").count(), 15);
    assert!(stdout.ends_with("}\n"));
}

fn examples() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/specs")
}

/// `spindle graph restart-fleet service=web` of the examples, in `format`.
fn restart_fleet_graph(format: &str) -> String {
    let (stdout, stderr, code) = run(spindle(&examples()).args([
        "graph",
        "restart-fleet",
        "service=web",
        "--specs",
        ".",
        "--format",
        format,
    ]));
    assert_eq!(code, 0, "{stderr}");
    stdout
}

#[test]
fn tree_shows_sequences_expansions_and_states_in_run_order() {
    let stdout = restart_fleet_graph("tree");
    let mut settings = insta::Settings::clone_current();
    // Job ids are random.
    settings.add_filter(r", [A-Za-z0-9]{4,5}\)", ", ID)");
    let _guard = settings.bind_to_scope();
    insta::assert_snapshot!(stdout, @r"
    request_restart-fleet
      check (shell-command, ID)  PENDING
      repeat_restart-each: at most 2 at once
      sequence_restart-each [host=host-a] (retry 1, wait 1s)
        drain (sleep, ID)  PENDING
        restart (shell-command, ID)  PENDING
      sequence_restart-each [host=host-b] (retry 1, wait 1s)
        drain (sleep, ID)  PENDING
        restart (shell-command, ID)  PENDING
      sequence_restart-each [host=host-c] (retry 1, wait 1s)
        drain (sleep, ID)  PENDING
        restart (shell-command, ID)  PENDING
      conditional_maybe-notify
    ");
}

#[test]
fn dot_labels_expansions_with_their_element_and_fills_jobs_by_state() {
    let stdout = restart_fleet_graph("dot");
    for host in ["host-a", "host-b", "host-c"] {
        assert!(
            stdout.contains(&format!(
                "label=\"sequence_restart-each [host={host}] (retry 1, wait 1s)\";"
            )),
            "{stdout}"
        );
    }
    // Nothing has run: every job is filled white (PENDING).
    assert_eq!(
        stdout.matches("fillcolor=\"white\"];").count(),
        stdout.matches(" [label=").count(),
        "{stdout}"
    );
}

#[test]
fn list_args_and_shell_args_expansion_from_yaml_alone() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = std::fs::read_to_string(fixtures().join("fleet-by-zone.yaml")).unwrap();
    let as_sleep = fleet.replace("type: noop", "type: sleep").replace(
        "- expected: host",
        "- expected: duration\n            given: host",
    );
    std::fs::write(dir.path().join("fleet.yaml"), as_sleep).unwrap();
    // The sleep job refuses a host name as its duration: an input error naming the node.
    let graph = [
        "graph",
        "--specs",
        ".",
        "fleet",
        "zone=eu",
        "--run-shell-args",
    ];
    let (_, stderr, code) = run(spindle(dir.path()).args(graph));
    assert_eq!(code, 1);
    assert!(
        stderr.contains("node `wait`: cannot build job `wait` of type `sleep`"),
        "{stderr}"
    );

    std::fs::write(dir.path().join("fleet.yaml"), &fleet).unwrap();
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
    assert!(
        !dir.path().join("ran").exists(),
        "the shell-args program ran"
    );
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
        run(spindle(&fixtures()).args(["graph", "--specs", "fanout.yaml", "nope"]));
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        "error: unknown request type `nope`; expected one of: fanout\n"
    );
    let (_, stderr, code) =
        run(spindle(&fixtures()).args(["graph", "--specs", "fanout.yaml", "fanout", "colour=red"]));
    assert_eq!(code, 1);
    assert!(stderr.contains("`colour` is not an arg of request `fanout`; it takes: sleepTime (optional, default \"1000\")"), "{stderr}");
    let (_, stderr, code) =
        run(spindle(&fixtures()).args(["graph", "--specs", "conditional.yaml", "maybe"]));
    assert_eq!(code, 1);
    assert!(stderr.contains("have errors"), "{stderr}");
    let (_, _, code) =
        run(spindle(&fixtures()).args(["graph", "--specs", "fanout.yaml", "fanout", "novalue"]));
    assert_eq!(code, 2);
    let (_, _, code) =
        run(spindle(&fixtures()).args(["graph", "--specs", "missing-dir", "fanout"]));
    assert_eq!(code, 2);
    let (_, _, code) = run(spindle(&fixtures()).args(["graph"]));
    assert_eq!(code, 2);
}
