//! Request ids, `each:` expansions (parallel windows, empty lists, errors) and
//! conditionals.

use super::*;

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

pub(super) const EXPANSION: &str = "sequences:
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
    let err = super::grapher(&two_lists)
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
    let no_default = grapher(&CONDITIONAL.replace("          default: noop\n", ""));
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
