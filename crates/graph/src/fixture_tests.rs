//! Chains of the fixtures and Spin Cycle's, invariants of random specs (a property
//! test), JSON round trips and timeouts.

use super::expansion_tests::EXPANSION;
use super::*;

#[test]
fn fixture_chains() {
    let chain = fixture("pipeline.yaml")
        .create("retry-pipeline", &args(json!({"release": "r1"})))
        .unwrap()
        .job_chain;
    insta::assert_snapshot!(render(&chain), @r"
    request_retry-pipeline_begin [noop] -> retry-pipeline_begin
    retry-pipeline_begin [noop] -> sequence_stage_begin
    sequence_stage_begin [noop] seq-retry=10/500ms -> pipeline_begin
    pipeline_begin [noop] -> build
    build [compileJob] retry=1/500ms -> ship
    ship [shipJob] retry=3/0s -> announce
    announce [announceJob] -> pipeline_end
    pipeline_end [noop] -> sequence_stage_end
    sequence_stage_end [noop] -> retry-pipeline_end
    retry-pipeline_end [noop] -> request_retry-pipeline_end
    request_retry-pipeline_end [noop]
    ");
    let chain = fixture("rollout.yaml")
        .create("rollout", &args(json!({"cluster": "c1", "env": "prod"})))
        .unwrap()
        .job_chain;
    check_expansions(
        &chain,
        ["ping", "upgrade"],
        ("notify", "team", "team-storage"),
    );
    check_fifteen_built_in_jobs(&fixture_text("fanout.yaml"), "fanout");
}

#[test]
fn chains_of_spin_cycles_fixtures() {
    let test = "chains_of_spin_cycles_fixtures";
    let Some(a_b_c) = spincycle_fixture_text(test, "a-b-c.yaml") else {
        return;
    };
    let decomm = spincycle_fixture_text(test, "decomm.yaml").expect("beside a-b-c.yaml");
    let dev_test = spincycle_fixture_text(test, "dev-test.yaml").expect("beside a-b-c.yaml");
    let chain = grapher(&a_b_c)
        .create("retry-three-nodes", &args(json!({"foo": "f"})))
        .unwrap()
        .job_chain;
    insta::assert_snapshot!(render(&chain), @r"
    request_retry-three-nodes_begin [noop] -> retry-three-nodes_begin
    retry-three-nodes_begin [noop] -> sequence_node_begin
    sequence_node_begin [noop] seq-retry=10/500ms -> three-nodes_begin
    three-nodes_begin [noop] -> a
    a [aJobType] retry=1/500ms -> b
    b [bJobType] retry=3/0s -> c
    c [cJobType] -> three-nodes_end
    three-nodes_end [noop] -> sequence_node_end
    sequence_node_end [noop] -> retry-three-nodes_end
    retry-three-nodes_end [noop] -> request_retry-three-nodes_end
    request_retry-three-nodes_end [noop]
    ");
    let chain = grapher(&decomm)
        .create(
            "decommission-cluster",
            &args(json!({"cluster": "c1", "env": "prod"})),
        )
        .unwrap()
        .job_chain;
    check_expansions(
        &chain,
        ["check-ok", "decom-3"],
        ("third-cleanup-job", "cluster", "test-cluster-001"),
    );
    check_fifteen_built_in_jobs(&dev_test, "test");
}

/// Two sequences expanded over the list a test job sets (two elements), so each of their
/// jobs runs twice; `static_arg` is a job given a static arg: (job, arg, value).
fn check_expansions(chain: &JobChain, expanded: [&str; 2], static_arg: (&str, &str, &str)) {
    for name in expanded {
        assert_eq!(
            chain.jobs.values().filter(|j| j.name == name).count(),
            2,
            "{name}"
        );
    }
    let (name, arg, value) = static_arg;
    let job = chain.jobs.values().find(|j| j.name == name).unwrap();
    assert_eq!(job.args[arg], json!(value), "given: a static arg");
    check_invariants(chain);
}

/// Spin Cycle's dev `test` request and Spindle's `fanout` use only built-in job types: 15
/// jobs, two of them sleeps of the default duration.
fn check_fifteen_built_in_jobs(text: &str, request_type: &str) {
    let report = spec::lint_str(Path::new("specs.yaml"), text);
    let grapher = Grapher::new(report.specs, Arc::new(Registry::builtin()));
    let chain = grapher
        .create(request_type, &JobArgs::new())
        .unwrap()
        .job_chain;
    assert_eq!(chain.jobs.len(), 15, "the 15-job `{request_type}` request");
    let waits: Vec<&proto::Job> = chain
        .jobs
        .values()
        .filter(|j| j.job_type == "sleep")
        .collect();
    assert_eq!(waits.len(), 2);
    assert!(waits.iter().all(|j| j.args["duration"] == json!("1000")));
    check_invariants(&chain);
}

#[test]
fn shell_args_computes_the_list_a_sequence_expands_over() {
    let chain = fixture("fleet-by-zone.yaml")
        .create("fleet", &args(json!({"zone": "eu"})))
        .unwrap()
        .job_chain;
    let mut hosts: Vec<&Value> = chain
        .jobs
        .values()
        .filter(|j| j.name == "wait")
        .map(|j| &j.args["host"])
        .collect();
    hosts.sort_by_key(|v| v.to_string());
    assert_eq!(hosts, [&json!("eu-1"), &json!("eu-2")]);
    check_invariants(&chain);
}

/// Acyclic, one source, one sink, every job reachable from the source, every id known.
fn check_invariants(chain: &JobChain) {
    let ids: HashSet<&String> = chain.jobs.keys().collect();
    let mut in_degree: HashMap<&String, usize> = ids.iter().map(|id| (*id, 0)).collect();
    for (from, succs) in &chain.adjacency_list {
        assert!(ids.contains(from), "unknown job {from}");
        for succ in succs {
            assert!(ids.contains(succ), "unknown job {succ}");
            *in_degree.get_mut(succ).unwrap() += 1;
        }
    }
    let sources: Vec<&&String> = in_degree
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(id, _)| id)
        .collect();
    assert_eq!(sources.len(), 1, "one source");
    let sinks: Vec<&&String> = ids
        .iter()
        .filter(|id| chain.adjacency_list.get(**id).is_none_or(Vec::is_empty))
        .collect();
    assert_eq!(sinks.len(), 1, "one sink");
    let mut queue: VecDeque<&String> = VecDeque::from([*sources[0]]);
    let mut seen = 0;
    let mut remaining = in_degree.clone();
    while let Some(id) = queue.pop_front() {
        seen += 1;
        for succ in chain.adjacency_list.get(id).into_iter().flatten() {
            let n = remaining.get_mut(succ).unwrap();
            *n -= 1;
            if *n == 0 {
                queue.push_back(succ);
            }
        }
    }
    assert_eq!(seen, ids.len(), "acyclic and every job reachable");
    for job in chain.jobs.values() {
        assert!(
            ids.contains(&job.sequence_id),
            "{} has a sequence id of the chain",
            job.name
        );
    }
}

/// Random valid specs: sequence 0 is the request; sequence i calls only sequences after it.
fn random_spec() -> impl proptest::strategy::Strategy<Value = (String, usize)> {
    use proptest::prelude::*;
    let node = (
        0u8..4,
        proptest::collection::vec(any::<prop::sample::Index>(), 0..3),
        any::<prop::sample::Index>(),
        0u32..3,
        any::<bool>(),
    );
    let sequence = proptest::collection::vec(node, 1..6);
    (proptest::collection::vec(sequence, 1..4), 0usize..4).prop_map(|(sequences, n_hosts)| {
        let n_seqs = sequences.len();
        let mut yaml = String::from("sequences:\n");
        for (seq_idx, nodes) in sequences.iter().enumerate() {
            yaml.push_str(&format!("  s{seq_idx}:\n"));
            if seq_idx == 0 {
                yaml.push_str("    request: true\n    args:\n      required:\n        - name: hosts\n      optional:\n        - name: mode\n          default: a\n");
            } else {
                yaml.push_str("    args:\n      required:\n        - name: host\n      optional:\n        - name: mode\n          default: b\n");
            }
            yaml.push_str("    nodes:\n");
            for (node_idx, (kind, deps, callee, retry, parallel)) in nodes.iter().enumerate() {
                yaml.push_str(&format!("      n{node_idx}:\n"));
                let mut deps: Vec<String> = if node_idx == 0 { Vec::new() } else { deps.iter().map(|d| format!("n{}", d.index(node_idx))).collect() };
                deps.sort();
                deps.dedup();
                let later = seq_idx + 1..n_seqs;
                let callee = if later.is_empty() { None } else { Some(seq_idx + 1 + callee.index(n_seqs - seq_idx - 1)) };
                let host_source = if seq_idx == 0 { "each: [hosts:host]" } else { "args: [{expected: host}]" };
                match (kind, callee) {
                    (1, Some(callee)) => {
                        yaml.push_str(&format!("        category: sequence\n        type: s{callee}\n        {host_source}\n"));
                        if seq_idx == 0 && *parallel {
                            yaml.push_str("        parallel: 2\n");
                        }
                    }
                    (2, Some(callee)) => {
                        yaml.push_str(&format!("        category: conditional\n        if: mode\n        eq:\n          a: s{callee}\n          default: noop\n        {host_source}\n"));
                    }
                    _ => {
                        let args = if seq_idx == 0 { "[]" } else { "[{expected: host}]" };
                        yaml.push_str(&format!("        category: job\n        type: use-host\n        args: {args}\n"));
                    }
                }
                if *retry > 0 {
                    yaml.push_str(&format!("        retry: {retry}\n"));
                }
                yaml.push_str(&format!("        deps: [{}]\n", deps.join(", ")));
            }
        }
        (yaml, n_hosts)
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    #[test]
    fn random_specs_build_valid_chains((yaml, n_hosts) in random_spec()) {
        let report = spec::lint_str(Path::new("t.yaml"), &yaml);
        proptest::prop_assert!(!report.has_errors(), "{yaml}\n{:#?}", report.diagnostics);
        let grapher = Grapher::new(report.specs, Arc::new(TestFactory(Registry::builtin())));
        let hosts: Vec<String> = (0..n_hosts).map(|i| format!("h{i}")).collect();
        let created = grapher.create("s0", &args(json!({"hosts": hosts}))).map_err(|e| proptest::test_runner::TestCaseError::fail(format!("{e}\n{yaml}")))?;
        check_invariants(&created.job_chain);
        let ids: HashSet<&String> = created.job_chain.jobs.keys().collect();
        proptest::prop_assert_eq!(ids.len(), created.job_chain.jobs.len());
        for job in created.job_chain.jobs.values().filter(|j| j.job_type == "use-host" && j.args.contains_key("host")) {
            proptest::prop_assert!(job.args["host"].is_string());
        }
        // Sub-sequence jobs always get their host: every use-host job outside s0 has it.
        let expected_hosts = created.job_chain.jobs.values().filter(|j| j.job_type == "use-host").all(|j| {
            j.args.get("host").is_none_or(|h| h.as_str().is_some_and(|h| h.starts_with('h')))
        });
        proptest::prop_assert!(expected_hosts);
    }
}

#[test]
fn chains_round_trip_through_json() {
    let created = grapher(EXPANSION)
        .create("r", &args(json!({"hosts": ["a", "b", "c"]})))
        .unwrap();
    let text = serde_json::to_string(&created.job_chain).unwrap();
    let back: JobChain = serde_json::from_str(&text).unwrap();
    assert_eq!(back, created.job_chain);
    let _: BTreeMap<String, Value> = serde_json::from_str(&text).unwrap();
}

#[test]
fn sequence_timeouts_are_recorded_on_each_sequence_run_start() {
    let created = grapher(
        "sequences:
  r:
    request: true
    timeout: 1h
    args:
      optional:
        - name: hosts
          desc: hosts
          default: [a, b]
    nodes:
      each-host:
        category: sequence
        type: sub
        each: [hosts:host]
        timeout: 10m
  sub:
    timeout: 2m
    args:
      required:
        - name: host
          desc: host
    nodes:
      work:
        category: job
        type: t
",
    )
    .create("r", &JobArgs::new())
    .unwrap();
    let jobs = &created.job_chain.jobs;
    let mut timeouts: Vec<(String, String)> = jobs
        .values()
        .filter(|job| !job.sequence_timeout.is_empty())
        .map(|job| (job.name.clone(), job.sequence_timeout.clone()))
        .collect();
    timeouts.sort();
    // Each run of `sub` (one per host) is bounded by the shorter of the node's and its
    // own; the request by its sequence's.
    assert_eq!(
        timeouts,
        [
            ("request_r_begin".to_owned(), "1h0m0s".to_owned()),
            ("sequence_each-host_begin".to_owned(), "2m0s".to_owned()),
            ("sequence_each-host_begin".to_owned(), "2m0s".to_owned()),
        ]
    );
    for job in jobs.values().filter(|job| !job.sequence_timeout.is_empty()) {
        assert_eq!(job.sequence_id, job.id, "on the start job of its sequence");
    }
}

#[test]
fn a_job_nodes_timeout_is_recorded_on_its_job() {
    let created = grapher(
        "sequences:
  r:
    request: true
    nodes:
      slow:
        category: job
        type: t
        timeout: 90s
      quick:
        category: job
        type: t
        deps: [slow]
",
    )
    .create("r", &JobArgs::new())
    .unwrap();
    for job in created.job_chain.jobs.values() {
        let expected = if job.name == "slow" { "90s" } else { "" };
        assert_eq!(job.timeout, expected, "{}", job.name);
    }
}
