//! `spindle lint` against Spindle's own fixtures and (when they are there) Spin Cycle's
//! (the verdicts of their EXPECTED.md), its output formats and exit codes.

use std::path::Path;

use serde_json::Value;

use crate::{fixtures, run, spincycle_fixtures, spindle};

/// (severity, code, line) of every diagnostic, from the JSON output.
fn verdict(dir: &Path, file: &str) -> (Vec<(String, String, u64)>, i32) {
    // The fixtures use job types of other binaries: the spec checks alone.
    let (stdout, _, code) =
        run(spindle(dir).args(["lint", "--any-job-type", "--format", "json", file]));
    let diagnostics: Vec<Value> = serde_json::from_str(&stdout).expect("JSON output");
    let found = diagnostics
        .iter()
        .map(|d| {
            (
                d["severity"].as_str().unwrap().to_owned(),
                d["code"].as_str().unwrap().to_owned(),
                d["line"].as_u64().unwrap(),
            )
        })
        .collect();
    (found, code)
}

fn owned(expected: &[(&str, &str, u64)]) -> Vec<(String, String, u64)> {
    expected
        .iter()
        .map(|(s, c, l)| ((*s).to_owned(), (*c).to_owned(), *l))
        .collect()
}

/// (severity, code, line) of one expected diagnostic.
type Expected = (&'static str, &'static str, u64);

#[test]
fn expected_verdicts_of_spindle_fixtures() {
    let cases: &[(&str, &[Expected], i32)] = &[
        ("pipeline.yaml", &[], 0),
        ("optional.yaml", &[], 0),
        ("fanout.yaml", &[], 0),
        (
            "rollout.yaml",
            &[
                ("warning", "NW3", 28),
                ("warning", "NW5", 31),
                ("warning", "NW3", 37),
                ("warning", "NW5", 40),
            ],
            0,
        ),
        (
            "conditional.yaml",
            &[("error", "N3", 16), ("warning", "NW5", 21)],
            1,
        ),
        ("bad-retry.yaml", &[("error", "type", 12)], 1),
        ("duplicate-key.yaml", &[("warning", "duplicate-key", 10)], 0),
        (
            "bad-args.yaml",
            &[
                ("error", "S1", 6),
                ("error", "S10", 6),
                ("warning", "unknown-field", 11),
            ],
            1,
        ),
        ("dir", &[], 0),
    ];
    for (file, expected, expected_code) in cases {
        let (found, code) = verdict(&fixtures(), file);
        assert_eq!(found, owned(expected), "{file}");
        assert_eq!(code, *expected_code, "{file}");
    }
}

#[test]
fn expected_verdicts_of_spin_cycle_fixtures() {
    let Some(spincycle) = spincycle_fixtures("expected_verdicts_of_spin_cycle_fixtures") else {
        return;
    };
    let cases: &[(&str, &[Expected], i32)] = &[
        ("a-b-c.yaml", &[], 0),
        ("opt-args.yaml", &[], 0),
        ("dev-test.yaml", &[], 0),
        (
            "decomm.yaml",
            &[
                ("warning", "NW3", 40),
                ("warning", "NW5", 45),
                ("warning", "NW3", 53),
                ("warning", "NW5", 56),
            ],
            0,
        ),
        (
            "bad-each.yaml",
            &[("warning", "NW3", 19), ("warning", "NW5", 22)],
            0,
        ),
        (
            "cond-args.yaml",
            &[("error", "N3", 17), ("warning", "NW5", 22)],
            1,
        ),
        ("fail-parse-spec.yaml", &[("error", "type", 14)], 1),
        (
            "warn-parse-spec.yaml",
            &[("warning", "duplicate-key", 10)],
            0,
        ),
        (
            "unexpected-field.yaml",
            &[
                ("error", "S1", 7),
                ("error", "S10", 7),
                ("warning", "unknown-field", 13),
            ],
            1,
        ),
    ];
    for (file, expected, expected_code) in cases {
        let (found, code) = verdict(&spincycle, file);
        assert_eq!(found, owned(expected), "{file}");
        assert_eq!(code, *expected_code, "{file}");
    }
}

#[test]
fn diagnostics_say_which_field_and_what_was_expected() {
    let (stdout, _, _) = run(spindle(&fixtures()).args([
        "lint",
        "--any-job-type",
        "--format",
        "json",
        "bad-retry.yaml",
    ]));
    let diagnostics: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    assert_eq!(diagnostics[0]["field"], "retry");
    assert!(
        diagnostics[0]["message"]
            .as_str()
            .unwrap()
            .contains("non-negative integer")
    );
    let (stdout, _, _) = run(spindle(&fixtures()).args([
        "lint",
        "--any-job-type",
        "--format",
        "json",
        "conditional.yaml",
    ]));
    let diagnostics: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    assert_eq!(diagnostics[0]["node"], "choose");
    assert_eq!(diagnostics[0]["field"], "eq");
    assert!(
        diagnostics[0]["message"]
            .as_str()
            .unwrap()
            .contains("`fastSeq`")
    );
    assert!(
        diagnostics[1]["message"]
            .as_str()
            .unwrap()
            .contains("`mode`")
    );
}

#[test]
fn spin_cycle_fixture_details_match_expected_md() {
    let Some(spincycle) = spincycle_fixtures("spin_cycle_fixture_details_match_expected_md") else {
        return;
    };
    let (stdout, _, _) = run(spindle(&spincycle).args([
        "lint",
        "--any-job-type",
        "--format",
        "json",
        "fail-parse-spec.yaml",
    ]));
    let diagnostics: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    assert_eq!(diagnostics[0]["field"], "retry");
    assert!(
        diagnostics[0]["message"]
            .as_str()
            .unwrap()
            .contains("non-negative integer")
    );

    let (stdout, _, _) = run(spindle(&spincycle).args([
        "lint",
        "--any-job-type",
        "--format",
        "json",
        "cond-args.yaml",
    ]));
    let diagnostics: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    assert_eq!(diagnostics[0]["node"], "job1name");
    assert_eq!(diagnostics[0]["field"], "eq");
    assert!(
        diagnostics[0]["message"]
            .as_str()
            .unwrap()
            .contains("`yesJob`")
    );
    assert!(
        diagnostics[1]["message"]
            .as_str()
            .unwrap()
            .contains("`foo`")
    );
}

#[test]
fn json_diagnostics_carry_every_field() {
    let (stdout, _, code) = run(spindle(&fixtures()).args([
        "lint",
        "--any-job-type",
        "--format",
        "json",
        "bad-args.yaml",
    ]));
    assert_eq!(code, 1);
    // The raw output, so that the snapshot also shows the order of the fields.
    insta::assert_snapshot!(stdout, @r###"
    [
      {
        "severity": "error",
        "file": "bad-args.yaml",
        "line": 6,
        "column": 11,
        "sequence": "seq-a",
        "node": null,
        "field": "args.required.name",
        "message": "required arg has no `name`; expected `- name: <arg name>`",
        "code": "S1"
      },
      {
        "severity": "error",
        "file": "bad-args.yaml",
        "line": 6,
        "column": 20,
        "sequence": "seq-a",
        "node": null,
        "field": "args.required.default",
        "message": "required arg (unnamed) has a default (`7`); expected no default, since the caller must give a required arg (make it optional to give it a default)",
        "code": "S10"
      },
      {
        "severity": "warning",
        "file": "bad-args.yaml",
        "line": 11,
        "column": 9,
        "sequence": "seq-a",
        "node": "node-a",
        "field": "colour",
        "message": "unknown field `colour` in a node; expected one of: category, type, args, sets, deps, retry, retryWait, timeout, each, parallel, if, eq, locks, max_failures, on_budget_exceeded, waves, wave_wait, wave_approval",
        "code": "unknown-field"
      }
    ]
    "###);
}

#[test]
fn human_output_of_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("specs")).unwrap();
    for file in [
        "conditional.yaml",
        "rollout.yaml",
        "duplicate-key.yaml",
        "optional.yaml",
    ] {
        std::fs::copy(fixtures().join(file), dir.path().join("specs").join(file)).unwrap();
    }
    std::fs::copy(
        fixtures().join("dir/notes.txt"),
        dir.path().join("specs/notes.txt"),
    )
    .unwrap();
    let (stdout, stderr, code) = run(spindle(dir.path()).args(["lint", "--any-job-type", "specs"]));
    assert_eq!(code, 1);
    assert_eq!(stderr, "");
    // notes.txt is never read; each file's diagnostics are reported, in file order.
    insta::assert_snapshot!(stdout, @r###"
    specs/conditional.yaml:16:17: error: sequence `maybe`, node `choose`, field `eq`: sequence `fastSeq` in `eq` does not exist; expected names of sequences in the specs (or the built-in `noop`) [N3]
    specs/conditional.yaml:21:23: warning: sequence `maybe`, node `choose`, field `args`: `mode` passed to sequence `slowSeq`, which does not take it; expected only args that the called sequence requires or accepts (its required or optional args) [NW5]
    specs/duplicate-key.yaml:10:9: warning: sequence `seq-a`, node `node-a`, field `type`: field `type` is given twice in a node (first at line 9); the last one is used [duplicate-key]
    specs/rollout.yaml:28:9: warning: sequence `rollout`, node `check-each`, field `each`: list `nodes` is expanded by `each` and also passed whole in `args`; expected one or the other (each expansion gets one element) [NW3]
    specs/rollout.yaml:31:23: warning: sequence `rollout`, node `check-each`, field `args`: `nodes` passed to sequence `check-node`, which does not take it; expected only args that the called sequence requires or accepts (its required or optional args) [NW5]
    specs/rollout.yaml:37:9: warning: sequence `rollout`, node `upgrade-each`, field `each`: list `nodes` is expanded by `each` and also passed whole in `args`; expected one or the other (each expansion gets one element) [NW3]
    specs/rollout.yaml:40:23: warning: sequence `rollout`, node `upgrade-each`, field `args`: `nodes` passed to sequence `upgrade-node`, which does not take it; expected only args that the called sequence requires or accepts (its required or optional args) [NW5]
    failed: 4 files, 7 sequences: 1 error, 6 warnings
    "###);
}

#[test]
fn human_output_of_spin_cycles_specs_directory() {
    let Some(spincycle) = spincycle_fixtures("human_output_of_spin_cycles_specs_directory") else {
        return;
    };
    let (stdout, stderr, code) =
        run(spindle(&spincycle).args(["lint", "--any-job-type", "parse-specs-dir"]));
    assert_eq!(code, 1);
    assert_eq!(stderr, "");
    // non-yaml.txt is never read; each file's diagnostics are reported.
    insta::assert_snapshot!(stdout, @r###"
    parse-specs-dir/cond-args.yaml:17:16: error: sequence `request-name`, node `job1name`, field `eq`: sequence `yesJob` in `eq` does not exist; expected names of sequences in the specs (or the built-in `noop`) [N3]
    parse-specs-dir/cond-args.yaml:22:23: warning: sequence `request-name`, node `job1name`, field `args`: `foo` passed to sequence `defaultSeq`, which does not take it; expected only args that the called sequence requires or accepts (its required or optional args) [NW5]
    parse-specs-dir/decomm.yaml:40:9: warning: sequence `decommission-cluster`, node `pre-flight-checks`, field `each`: list `instances` is expanded by `each` and also passed whole in `args`; expected one or the other (each expansion gets one element) [NW3]
    parse-specs-dir/decomm.yaml:45:23: warning: sequence `decommission-cluster`, node `pre-flight-checks`, field `args`: `instances` passed to sequence `check-instance-is-ok`, which does not take it; expected only args that the called sequence requires or accepts (its required or optional args) [NW5]
    parse-specs-dir/decomm.yaml:53:9: warning: sequence `decommission-cluster`, node `decommission-instances`, field `each`: list `instances` is expanded by `each` and also passed whole in `args`; expected one or the other (each expansion gets one element) [NW3]
    parse-specs-dir/decomm.yaml:56:23: warning: sequence `decommission-cluster`, node `decommission-instances`, field `args`: `instances` passed to sequence `decommission-instance`, which does not take it; expected only args that the called sequence requires or accepts (its required or optional args) [NW5]
    parse-specs-dir/warn-parse-spec.yaml:10:9: warning: sequence `seq-a`, node `node-a`, field `category`: field `category` is given twice in a node (first at line 9); the last one is used [duplicate-key]
    failed: 5 files, 9 sequences: 1 error, 6 warnings
    "###);
}

#[test]
fn clean_and_warning_summaries() {
    let (stdout, _, code) =
        run(spindle(&fixtures()).args(["lint", "--any-job-type", "pipeline.yaml", "fanout.yaml"]));
    assert_eq!(code, 0);
    insta::assert_snapshot!(stdout, @"ok: 2 files, 4 sequences: no errors or warnings");
    let (stdout, _, code) =
        run(spindle(&fixtures()).args(["lint", "--any-job-type", "duplicate-key.yaml"]));
    assert_eq!(code, 0);
    assert!(
        stdout.ends_with("ok: 1 file, 1 sequence: 1 warning\n"),
        "{stdout}"
    );
}

#[test]
fn strict_makes_warnings_errors() {
    let (stdout, _, code) =
        run(spindle(&fixtures()).args(["lint", "--any-job-type", "--strict", "rollout.yaml"]));
    assert_eq!(code, 1);
    assert!(stdout.contains("rollout.yaml:28:9: error:"), "{stdout}");
    assert!(
        stdout.ends_with("failed: 1 file, 3 sequences: 4 errors\n"),
        "{stdout}"
    );
}

#[test]
fn sequences_defined_twice_name_both_files() {
    let (stdout, _, code) = run(spindle(&fixtures()).args([
        "lint",
        "--any-job-type",
        "optional.yaml",
        "dir/optional.yaml",
    ]));
    assert_eq!(code, 1);
    assert!(
        stdout.contains("dir/optional.yaml:2:3: error: sequence `greet`: sequence `greet` is already defined in optional.yaml at line 2"),
        "{stdout}"
    );
}

#[test]
fn usage_errors_and_unreadable_paths_exit_2() {
    let (_, stderr, code) = run(spindle(&fixtures()).args(["lint", "no-such-dir"]));
    assert_eq!(code, 2);
    // Issue #36: the cause once, not again as its own source.
    assert_eq!(
        stderr,
        "error: cannot read no-such-dir: No such file or directory (os error 2)\n"
    );
    let (_, _, code) = run(spindle(&fixtures()).args(["lint", "--format", "xml"]));
    assert_eq!(code, 2);
    let (_, _, code) = run(spindle(&fixtures()).args(["lint", "--bogus"]));
    assert_eq!(code, 2);
}

#[test]
fn default_path_is_the_current_directory_and_yml_counts() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("nested")).unwrap();
    std::fs::write(
        dir.path().join("nested/one.YML"),
        "sequences:\n  s:\n    nodes:\n      a:\n        category: job\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not: [yaml").unwrap();
    std::fs::write(dir.path().join("broken.yaml"), [0xff, 0xfe, 0x00]).unwrap();
    let (stdout, _, code) = run(spindle(dir.path()).arg("lint"));
    assert_eq!(code, 1);
    insta::assert_snapshot!(stdout, @r###"
    broken.yaml: error: cannot read spec file: not UTF-8 text (invalid byte at offset 0); expected a YAML file [io]
    nested/one.YML:4:7: error: sequence `s`, node `a`, field `type`: job node has no `type`; expected the job type to run [N12]
    failed: 2 files, 1 sequence: 2 errors
    "###);
}

#[test]
fn shipped_example_specs_are_clean() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let (stdout, _, code) = run(spindle(&root).args(["lint", "--strict", "examples/specs"]));
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.starts_with("ok: "), "{stdout}");
}

/// Issue #12: `spindle lint` checks job nodes against the job types of this binary: an
/// unknown type (with its near miss) and a missing required job arg are errors, unless
/// `--any-job-type`; a server refuses to start with them.
#[test]
fn job_types_are_checked_against_this_binary() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("typo.yaml"),
        "sequences:\n  nap:\n    request: true\n    args:\n      required:\n        - name: ms\n    nodes:\n      wait:\n        category: job\n        type: slep\n        args: [{expected: duration, given: ms}]\n      run:\n        category: job\n        type: shell-command\n        deps: [wait]\n",
    )
    .unwrap();
    let (stdout, _, code) = run(spindle(dir.path()).args(["lint", "typo.yaml"]));
    assert_eq!(code, 1);
    insta::assert_snapshot!(stdout, @r###"
    typo.yaml:10:15: error: sequence `nap`, node `wait`, field `type`: unknown job type `slep` (did you mean `sleep`?); expected one of the job types this binary runs: `approval`, `noop`, `shell-args`, `shell-command`, `sleep`, or one a job program serves (`jobs:` in the config: docs/job-protocol.md) [job-type]
    typo.yaml:14:15: error: sequence `nap`, node `run`, field `args`: job type `shell-command` requires job arg `cmd`, which this node does not pass; expected `- expected: cmd` in `args` (with `given:` to pass another arg under that name) [job-args]
    failed: 1 file, 1 sequence: 2 errors
    "###);
    let (_, _, code) = run(spindle(dir.path()).args(["lint", "--any-job-type", "typo.yaml"]));
    assert_eq!(code, 0);
    let (_, stderr, code) = run(spindle(dir.path()).args([
        "server",
        "--listen",
        "127.0.0.1:0",
        "--specs",
        "typo.yaml",
        "--database",
        "sqlite://s.db",
    ]));
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("unknown job type `slep`"), "{stderr}");
    assert!(
        stderr.contains("the specs have errors; not starting"),
        "{stderr}"
    );
    // Issue #36: `run` ends on the same specs as `server` does.
    let run_nap = [
        "run",
        "--specs",
        "typo.yaml",
        "--database",
        "sqlite://r.db",
        "nap",
    ];
    let (_, stderr, code) = run(spindle(dir.path()).args(run_nap));
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("have errors; fix them first"), "{stderr}");
    // `graph` says so, and points at --preview when only job types are wrong.
    let (_, stderr, code) =
        run(spindle(dir.path()).args(["graph", "--specs", "typo.yaml", "nap", "ms=1"]));
    assert_eq!(code, 1);
    assert!(stderr.contains("--preview"), "{stderr}");
}

/// Issue #47: a job program whose `types:` names a built-in serves it in the built-in's
/// place for `spindle lint --config` as for the servers: its node no longer needs the
/// built-in's required args; two programs serving one type stay an error, which lint and
/// a server both say.
#[test]
fn a_program_serving_a_builtin_type_is_what_lint_checks() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("nap.yaml"),
        "sequences:\n  nap:\n    request: true\n    nodes:\n      wait:\n        category: job\n        type: sleep\n",
    )
    .unwrap();
    let (stdout, _, code) = run(spindle(dir.path()).args(["lint", "nap.yaml"]));
    assert_eq!(code, 1, "the built-in sleep requires duration: {stdout}");
    assert!(stdout.contains("requires job arg `duration`"), "{stdout}");
    std::fs::write(
        dir.path().join("team.yaml"),
        "jobs:\n  - program: /bin/true\n    types: [noop, sleep, shell-command]\n",
    )
    .unwrap();
    let (stdout, stderr, code) =
        run(spindle(dir.path()).args(["lint", "--config", "team.yaml", "nap.yaml"]));
    assert_eq!(code, 0, "{stdout}{stderr}");
    std::fs::write(
        dir.path().join("twice.yaml"),
        "jobs:\n  - program: /bin/true\n    types: [sleep]\n  - program: /bin/false\n    types: [sleep]\n",
    )
    .unwrap();
    let (_, stderr, code) =
        run(spindle(dir.path()).args(["lint", "--config", "twice.yaml", "nap.yaml"]));
    assert_ne!(code, 0);
    assert!(
        stderr.contains("jobs[1]") && stderr.contains("served by `/bin/true`"),
        "{stderr}"
    );
    let (_, stderr, code) = run(spindle(dir.path()).args([
        "server",
        "--config",
        "twice.yaml",
        "--listen",
        "127.0.0.1:0",
        "--specs",
        "nap.yaml",
        "--database",
        "sqlite://s.db",
    ]));
    assert_ne!(code, 0);
    assert!(stderr.contains("served by `/bin/true`"), "{stderr}");
}
