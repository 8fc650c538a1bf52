//! Chains for the fixtures and for small specs, the conventions of grapher.md §7, each
//! error of §10, and invariants over random specs.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::Arc;

use job::{CreateContext, Job, NoopJob, Outcome, Registry, RunContext};
use proto::{JobArgs, JobChain, RequestArgType, State};
use serde_json::{Value, json};

use crate::Grapher;

/// A test job type: sets each arg its node declares in `sets` to a two-element list.
#[derive(Debug)]
struct SettingJob;

#[async_trait::async_trait]
impl Job for SettingJob {
    fn create(&mut self, args: &mut JobArgs, ctx: &CreateContext) -> Result<(), job::Error> {
        for name in &ctx.sets {
            args.insert(
                name.clone(),
                json!([format!("{name}-1"), format!("{name}-2")]),
            );
        }
        Ok(())
    }
    job::no_state!();
    async fn run(&mut self, _data: &mut JobArgs, _ctx: RunContext) -> Outcome {
        Outcome::complete()
    }
}

/// The built-in job types, plus every other type as a [`SettingJob`].
struct TestFactory(Registry);

impl job::Factory for TestFactory {
    fn make(&self, id: &job::JobId) -> Result<Box<dyn Job>, job::Error> {
        if self.0.contains(&id.job_type) {
            return self.0.make(id);
        }
        Ok(Box::new(SettingJob))
    }
}

pub(crate) fn grapher(yaml: &str) -> Grapher {
    let report = spec::lint_str(Path::new("t.yaml"), yaml);
    assert!(
        !report.has_errors(),
        "spec lints clean: {:#?}",
        report.diagnostics
    );
    Grapher::new(report.specs, Arc::new(TestFactory(Registry::builtin())))
}

/// The text of one of Spindle's own spec fixtures (`fixtures/specs`).
fn fixture_text(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/specs")
        .join(name);
    std::fs::read_to_string(path).unwrap()
}

fn fixture(name: &str) -> Grapher {
    grapher(&fixture_text(name))
}

/// The text of one of Spin Cycle's own spec fixtures, when `SPINDLE_SPINCYCLE_FIXTURES`
/// names their folder (relative to the repository, or absolute); otherwise the test is
/// skipped and one line says so.
fn spincycle_fixture_text(test: &str, name: &str) -> Option<String> {
    let Some(folder) = std::env::var_os("SPINDLE_SPINCYCLE_FIXTURES") else {
        // Straight to stderr: the test harness captures `eprintln!`.
        let line = format!(
            "{test}: skipped: it reads Spin Cycle's spec fixtures; set SPINDLE_SPINCYCLE_FIXTURES to their folder to run it\n"
        );
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        return None;
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(folder)
        .join(name);
    Some(std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display())))
}

pub(crate) fn args(value: Value) -> JobArgs {
    match value {
        Value::Object(map) => map.into(),
        _ => panic!("args are an object"),
    }
}

/// Job names in topological order (ties broken by name), one line per job with its
/// successors, for snapshots.
fn render(chain: &JobChain) -> String {
    let name = |id: &str| chain.jobs[id].name.clone();
    let mut in_degree: HashMap<&str, usize> =
        chain.jobs.keys().map(|id| (id.as_str(), 0)).collect();
    for succs in chain.adjacency_list.values() {
        for succ in succs {
            *in_degree.get_mut(succ.as_str()).unwrap() += 1;
        }
    }
    let mut ready: Vec<&str> = in_degree
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(id, _)| *id)
        .collect();
    let mut out = String::new();
    while !ready.is_empty() {
        ready.sort_by_key(|id| std::cmp::Reverse(name(id)));
        let id = ready.pop().unwrap();
        let job = &chain.jobs[id];
        let mut succs: Vec<String> = chain
            .adjacency_list
            .get(id)
            .into_iter()
            .flatten()
            .map(|s| name(s))
            .collect();
        succs.sort();
        let mut line = format!("{} [{}]", job.name, job.job_type);
        if job.sequence_retry > 0 {
            line.push_str(&format!(
                " seq-retry={}/{}",
                job.sequence_retry, job.sequence_retry_wait
            ));
        }
        if job.retry > 0 {
            line.push_str(&format!(" retry={}/{}", job.retry, job.retry_wait));
        }
        if job.parallel > 0 {
            line.push_str(&format!(" parallel={}", job.parallel));
        }
        if !succs.is_empty() {
            line.push_str(&format!(" -> {}", succs.join(", ")));
        }
        out.push_str(&line);
        out.push('\n');
        for succ in chain.adjacency_list.get(id).into_iter().flatten() {
            let n = in_degree.get_mut(succ.as_str()).unwrap();
            *n -= 1;
            if *n == 0 {
                ready.push(succ);
            }
        }
    }
    out
}

/// The jobs of a chain that is a single line, in order.
fn line(chain: &JobChain) -> Vec<&proto::Job> {
    let targets: HashSet<&String> = chain.adjacency_list.values().flatten().collect();
    let mut id = chain
        .jobs
        .keys()
        .find(|id| !targets.contains(id))
        .expect("a first job");
    let mut out = vec![&chain.jobs[id]];
    while let Some(next) = chain.adjacency_list.get(id) {
        assert_eq!(next.len(), 1, "a line");
        id = &next[0];
        out.push(&chain.jobs[id]);
    }
    out
}

#[test]
fn grapher_md_section_7_example() {
    let created = fixture("retried-sequence.yaml")
        .create("r", &JobArgs::new())
        .unwrap();
    let chain = &created.job_chain;
    let jobs = line(chain);
    let names: Vec<&str> = jobs.iter().map(|job| job.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "request_r_begin",
            "r_begin",
            "a",
            "sequence_s_begin",
            "sub_begin",
            "b",
            "sub_end",
            "sequence_s_end",
            "r_end",
            "request_r_end"
        ]
    );
    let request_begin = &jobs[0].id;
    let sequence_begin = &jobs[3].id;
    for (idx, job) in jobs.iter().enumerate() {
        let expected = if (3..=7).contains(&idx) {
            sequence_begin
        } else {
            request_begin
        };
        assert_eq!(&job.sequence_id, expected, "{}", job.name);
        assert_eq!(job.state, State::Pending);
        assert!(job.data.is_empty());
        assert_eq!(job.id.len(), 4);
        assert!(job.id.chars().all(|c| c.is_ascii_alphanumeric()));
    }
    assert_eq!(
        (jobs[0].sequence_retry, jobs[0].sequence_retry_wait.as_str()),
        (0, "0s")
    );
    assert_eq!(
        (jobs[3].sequence_retry, jobs[3].sequence_retry_wait.as_str()),
        (2, "10s")
    );
    assert!(
        jobs.iter()
            .filter(|j| j.name != "request_r_begin" && j.name != "sequence_s_begin")
            .all(|j| j.sequence_retry == 0)
    );
    assert_eq!(chain.jobs.len(), 10);
    assert_eq!(chain.request_id, created.request_id);
    assert_eq!(chain.state, State::Pending);
    // The last job has no entry in the adjacency list.
    assert!(!chain.adjacency_list.contains_key(&jobs[9].id));
}

#[test]
fn request_ids_are_unique_time_ordered_and_20_characters() {
    let grapher = fixture("retried-sequence.yaml");
    let ids: Vec<String> = (0..50)
        .map(|_| grapher.create("r", &JobArgs::new()).unwrap().request_id)
        .collect();
    assert!(ids.iter().all(|id| id.len() == 20));
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len());
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(
        sorted, ids,
        "ids made one after another sort in creation order"
    );
}

const EXPANSION: &str = "sequences:
  r:
    request: true
    args:
      required:
        - name: hosts
      optional:
        - name: zone
          default: z1
    nodes:
      x:
        category: sequence
        type: y
        each: [hosts:host]
        parallel: 2
        args: [{expected: zone}]
        retry: 1
  y:
    args:
      required:
        - name: host
      optional:
        - name: zone
          default: none
    nodes:
      use-host:
        category: job
        type: t
        args: [{expected: host}, {expected: zone}]
";

#[test]
fn expansion_with_parallel_is_a_sliding_window() {
    let created = grapher(EXPANSION)
        .create("r", &args(json!({"hosts": ["a", "b", "c"]})))
        .unwrap();
    insta::assert_snapshot!(render(&created.job_chain), @r"
    request_r_begin [noop] -> r_begin
    r_begin [noop] -> repeat_x_begin
    repeat_x_begin [noop] parallel=2 -> sequence_x_begin, sequence_x_begin, sequence_x_begin
    sequence_x_begin [noop] seq-retry=1/0s -> y_begin
    sequence_x_begin [noop] seq-retry=1/0s -> y_begin
    sequence_x_begin [noop] seq-retry=1/0s -> y_begin
    y_begin [noop] -> use-host
    use-host [t] -> y_end
    y_begin [noop] -> use-host
    use-host [t] -> y_end
    y_begin [noop] -> use-host
    use-host [t] -> y_end
    y_end [noop] -> sequence_x_end
    sequence_x_end [noop] -> repeat_x_end
    y_end [noop] -> sequence_x_end
    sequence_x_end [noop] -> repeat_x_end
    y_end [noop] -> sequence_x_end
    sequence_x_end [noop] -> repeat_x_end
    repeat_x_end [noop] -> r_end
    r_end [noop] -> request_r_end
    request_r_end [noop]
    ");
    let chain = &created.job_chain;
    // Every expansion is its own sequence; the repeat wrappers belong to the request's.
    let begins: Vec<&proto::Job> = chain
        .jobs
        .values()
        .filter(|j| j.name == "sequence_x_begin")
        .collect();
    let seq_ids: HashSet<&String> = begins.iter().map(|j| &j.sequence_id).collect();
    assert_eq!(seq_ids.len(), 3);
    assert!(begins.iter().all(|j| j.sequence_id == j.id));
    let request_begin = chain
        .jobs
        .values()
        .find(|j| j.name == "request_r_begin")
        .unwrap();
    let repeat = chain
        .jobs
        .values()
        .find(|j| j.name == "repeat_x_begin")
        .unwrap();
    assert_eq!(repeat.sequence_id, request_begin.id);
    // Each expansion's job saw its element and the passed optional arg.
    let mut hosts: Vec<&Value> = chain
        .jobs
        .values()
        .filter(|j| j.name == "use-host")
        .map(|j| &j.args["host"])
        .collect();
    hosts.sort_by_key(|v| v.to_string());
    assert_eq!(hosts, [&json!("a"), &json!("b"), &json!("c")]);
    assert!(
        chain
            .jobs
            .values()
            .filter(|j| j.name == "use-host")
            .all(|j| j.args["zone"] == json!("z1"))
    );
    // Every job of an expansion records its element; the wrappers around them do not.
    for job in chain.jobs.values() {
        match job.name.as_str() {
            "sequence_x_begin" | "y_begin" | "use-host" | "y_end" | "sequence_x_end" => {
                assert_eq!(job.each.len(), 1, "{job:?}");
                assert!(job.each["host"].is_string());
            }
            _ => assert!(job.each.is_empty(), "{job:?}"),
        }
    }
    for job in chain.jobs.values().filter(|j| j.name == "use-host") {
        assert_eq!(job.each["host"], job.args["host"]);
    }
    // No limit is recorded when every expansion fits in it.
    let two = grapher(EXPANSION)
        .create("r", &args(json!({"hosts": ["a", "b"]})))
        .unwrap();
    assert!(two.job_chain.jobs.values().all(|j| j.parallel == 0));
}

#[test]
fn expansion_over_an_empty_list_and_over_one_element() {
    let created = grapher(EXPANSION)
        .create("r", &args(json!({"hosts": []})))
        .unwrap();
    insta::assert_snapshot!(render(&created.job_chain), @r"
    request_r_begin [noop] -> r_begin
    r_begin [noop] -> noop_x_begin
    noop_x_begin [noop] -> noop_x_end
    noop_x_end [noop] -> r_end
    r_end [noop] -> request_r_end
    request_r_end [noop]
    ");
    let created = grapher(EXPANSION)
        .create("r", &args(json!({"hosts": ["only"]})))
        .unwrap();
    assert!(!render(&created.job_chain).contains("repeat_"));
}

#[test]
fn each_errors() {
    let grapher = grapher(EXPANSION);
    // Issue #36: a list typed as `a,b` (a command line's, a form's) is the list [a, b].
    let typed = grapher
        .create("r", &args(json!({"hosts": "a, b"})))
        .unwrap()
        .job_chain;
    let listed = grapher
        .create("r", &args(json!({"hosts": ["a", "b"]})))
        .unwrap()
        .job_chain;
    assert_eq!(render(&typed), render(&listed));
    let err = grapher.create("r", &args(json!({"hosts": 7}))).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"in sequence `r`, node `x`: `each: hosts:host`: arg `hosts` is a number; expected a list: JSON such as ["a","b"], or items separated by commas such as a,b"#
    );
    assert!(err.is_input());
    let err = grapher
        .create("r", &args(json!({"hosts": " "})))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("arg `hosts` is a string; expected a list: JSON"),
        "{err}"
    );
    let two_lists = EXPANSION
        .replace("        - name: hosts\n", "        - name: hosts\n        - name: ports\n")
        .replace("each: [hosts:host]", "each: [hosts:host, ports:port]")
        .replace("        - name: host\n", "        - name: host\n      optional:\n        - name: port\n          default: \"1\"\n")
        .replace("      optional:\n        - name: zone\n          default: none\n", "        - name: zone\n          default: none\n");
    let err = super::tests::grapher(&two_lists)
        .create("r", &args(json!({"hosts": ["a", "b"], "ports": [1]})))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("lists have different lengths: `hosts` has 2 elements, `ports` has 1"),
        "{err}"
    );
}

const CONDITIONAL: &str = "sequences:
  r:
    request: true
    args:
      optional:
        - name: mode
          default: fast
    nodes:
      c:
        category: conditional
        if: mode
        eq:
          fast: quick
          yes: quick
          default: noop
        retry: 3
        retryWait: 1s
  quick:
    nodes:
      go:
        category: job
        type: t
";

#[test]
fn conditionals_pick_their_branch() {
    let grapher = grapher(CONDITIONAL);
    let chain = grapher.create("r", &JobArgs::new()).unwrap().job_chain;
    let names: Vec<&str> = line(&chain).iter().map(|j| j.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "request_r_begin",
            "r_begin",
            "conditional_c_begin",
            "quick_begin",
            "go",
            "quick_end",
            "conditional_c_end",
            "r_end",
            "request_r_end"
        ]
    );
    let begin = chain
        .jobs
        .values()
        .find(|j| j.name == "conditional_c_begin")
        .unwrap();
    assert_eq!(
        (begin.sequence_retry, begin.sequence_retry_wait.as_str()),
        (3, "1s")
    );
    // `yes` is the text "yes"; other values fall to `default: noop`, the built-in sequence.
    let chain = grapher
        .create("r", &args(json!({"mode": "yes"})))
        .unwrap()
        .job_chain;
    assert!(chain.jobs.values().any(|j| j.name == "go"));
    let chain = grapher
        .create("r", &args(json!({"mode": "slow"})))
        .unwrap()
        .job_chain;
    let names: Vec<&str> = line(&chain).iter().map(|j| j.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "request_r_begin",
            "r_begin",
            "conditional_c_begin",
            "noop_begin",
            "noop_end",
            "conditional_c_end",
            "r_end",
            "request_r_end"
        ]
    );
}

#[test]
fn conditional_errors_instead_of_crashes() {
    let no_default = super::tests::grapher(&CONDITIONAL.replace("          default: noop\n", ""));
    let err = no_default
        .create("r", &args(json!({"mode": "slow"})))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "in sequence `r`, node `c`: `if: mode`: value \"slow\" matches no branch and there is no `default`; expected one of: fast, yes"
    );
    assert!(err.is_input());
    let err = no_default
        .create("r", &args(json!({"mode": ["fast"]})))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("arg `mode` is a list; expected a string, one of: fast, yes"),
        "{err}"
    );
    let err = no_default
        .create("r", &args(json!({"mode": null})))
        .unwrap_err();
    assert!(err.to_string().contains("arg `mode` is not set"), "{err}");
}

const ARGS: &str = "sequences:
  stop-host:
    request: true
    args:
      required:
        - name: hostname
          desc: Host to stop
      optional:
        - name: force
          desc: Force stop
          default: no
      static:
        - name: argv
          default: [\"-c\", \"echo hi\"]
    nodes:
      run:
        category: job
        type: shell-command
        args:
          - expected: cmd
            given: force
          - expected: args
            given: argv
          - expected: host
            given: hostname
  helper:
    nodes:
      a:
        category: job
        type: t
";

#[test]
fn request_args_are_checked_and_recorded() {
    let grapher = grapher(ARGS);
    let created = grapher
        .create(
            "stop-host",
            &args(json!({"hostname": "db1", "force": "sh"})),
        )
        .unwrap();
    let recorded: Vec<(u32, &str, RequestArgType, bool, &Value, &Value)> = created
        .args
        .iter()
        .map(|a| {
            (
                a.pos,
                a.name.as_str(),
                a.arg_type,
                a.given,
                &a.default,
                &a.value,
            )
        })
        .collect();
    assert_eq!(
        recorded,
        [
            (
                0,
                "hostname",
                RequestArgType::Required,
                true,
                &Value::Null,
                &json!("db1")
            ),
            (
                0,
                "force",
                RequestArgType::Optional,
                true,
                &json!("no"),
                &json!("sh")
            ),
            (
                0,
                "argv",
                RequestArgType::Static,
                false,
                &Value::Null,
                &json!(["-c", "echo hi"])
            ),
        ]
    );
    assert_eq!(created.args[0].desc, "Host to stop");
    // A static list default reaches the job as a list.
    let run = created
        .job_chain
        .jobs
        .values()
        .find(|j| j.name == "run")
        .unwrap();
    assert_eq!(run.args["args"], json!(["-c", "echo hi"]));
    assert_eq!(run.args["host"], json!("db1"));
    // The job's stored bytes hold its command.
    let stored: Value = serde_json::from_slice(&run.bytes).unwrap();
    assert_eq!(stored["cmd"], "sh");
    assert_eq!(stored["env"]["SPINDLE_ARG_HOST"], "db1");
}

#[test]
fn bad_requests_are_input_errors_that_list_what_is_accepted() {
    let grapher = grapher(ARGS);
    let err = grapher.create("", &JobArgs::new()).unwrap_err();
    assert_eq!(err.to_string(), "Type is empty, must be a request name");
    let err = grapher.create("stop-hots", &JobArgs::new()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown request type `stop-hots` (did you mean `stop-host`?); expected one of: stop-host"
    );
    let err = grapher.create("helper", &JobArgs::new()).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("`helper` is a sequence but not a request"),
        "{err}"
    );
    let err = grapher
        .create(
            "stop-host",
            &args(json!({"force": "x", "colour": "red", "argv": [], "hostnme": "h"})),
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid args for request `stop-host`: missing required arg `hostname`; `argv` is a static arg, fixed by the spec; it cannot be given; `colour` is not an arg of request `stop-host`; `hostnme` is not an arg of request `stop-host` (did you mean `hostname`?); it takes: hostname (required): Host to stop; force (optional, default \"no\"): Force stop"
    );
    for err in [
        grapher.create("", &JobArgs::new()).unwrap_err(),
        grapher.create("nope", &JobArgs::new()).unwrap_err(),
        grapher.create("helper", &JobArgs::new()).unwrap_err(),
        err,
    ] {
        assert!(err.is_input(), "{err}");
    }
    // A job that refuses its args names the node and the job.
    let err = grapher
        .create("stop-host", &args(json!({"hostname": "db1", "force": ""})))
        .unwrap_err();
    assert!(
        err.to_string().starts_with(
            "in sequence `stop-host`, node `run`: cannot build job `run` of type `shell-command`"
        ),
        "{err}"
    );
    assert!(err.is_input());
}

#[test]
fn request_specs_list_required_then_optional_args() {
    let specs = grapher(ARGS).request_specs();
    assert_eq!(specs.len(), 1);
    let listed = serde_json::to_value(&specs).unwrap();
    assert_eq!(
        listed,
        json!([{"Name": "stop-host", "Args": [
            {"Pos": 0, "Name": "hostname", "Desc": "Host to stop", "Type": "required", "Given": false, "Default": null, "Value": null},
            {"Pos": 0, "Name": "force", "Desc": "Force stop", "Type": "optional", "Given": false, "Default": "no", "Value": null}
        ]}])
    );
}

/// A three-job sequence whose first job (`first`) sets `set` for the second (`second`):
/// the second sees it, and the retry settings are as the spec says.
fn check_three_jobs(chain: &JobChain, first: &str, second: &str, set: &str) {
    let b = chain.jobs.values().find(|j| j.name == second).unwrap();
    assert_eq!(b.args[set], json!([format!("{set}-1"), format!("{set}-2")]));
    let a = chain.jobs.values().find(|j| j.name == first).unwrap();
    assert_eq!((a.retry, a.retry_wait.as_str()), (1, "500ms"));
    assert_eq!(
        (b.retry, b.retry_wait.as_str()),
        (3, "0s"),
        "retry without retryWait waits 0s"
    );
}

#[test]
fn jobs_of_spin_cycles_a_b_c_see_args_set_before_them() {
    let test = "jobs_of_spin_cycles_a_b_c_see_args_set_before_them";
    let Some(text) = spincycle_fixture_text(test, "a-b-c.yaml") else {
        return;
    };
    let chain = grapher(&text)
        .create("three-nodes", &args(json!({"foo": "f"})))
        .unwrap()
        .job_chain;
    check_three_jobs(&chain, "a", "b", "aArg");
}

#[test]
fn jobs_see_args_set_before_them_and_missing_sets_are_errors() {
    let chain = fixture("pipeline.yaml")
        .create("pipeline", &args(json!({"release": "r1"})))
        .unwrap()
        .job_chain;
    check_three_jobs(&chain, "build", "ship", "artifacts");

    // A job that does not set what its node declares.
    let mut registry = Registry::builtin();
    registry.register("t", |_| Box::new(NoopJob));
    let report = spec::lint_str(
        Path::new("t.yaml"),
        "sequences:\n  r:\n    request: true\n    nodes:\n      a:\n        category: job\n        type: t\n        sets: [{arg: x}]\n",
    );
    let grapher = Grapher::new(report.specs, Arc::new(registry));
    let err = grapher.create("r", &JobArgs::new()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "in sequence `r`, node `a`: the job (type `t`) did not set `x`, which the node's `sets` declares"
    );
}

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
