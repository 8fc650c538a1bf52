//! A request's args: checked, recorded, listed; what jobs see set before them.

use super::*;

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
