//! One test per check of specs.md: a small spec that trips it (the line marked `#!` is
//! where the diagnostic must point) and one that does not.

use std::path::Path;

use crate::{Diagnostic, Severity, lint_str};

pub(crate) fn lint(yaml: &str) -> Vec<Diagnostic> {
    lint_str(Path::new("t.yaml"), yaml).diagnostics
}

/// The line marked with `#!`.
fn marked_line(yaml: &str) -> u32 {
    let idx = yaml
        .lines()
        .position(|line| line.contains("#!"))
        .expect("the bad spec marks its line with #!");
    u32::try_from(idx + 1).unwrap()
}

/// `bad` gives a diagnostic `code` of `severity` on its marked line; `good` gives no `code`.
#[track_caller]
pub(crate) fn case(code: &str, severity: Severity, bad: &str, good: &str) {
    let found = lint(bad);
    let line = marked_line(bad);
    let hit = found.iter().find(|d| d.code == code);
    let Some(hit) = hit else {
        panic!("{code} not reported for:\n{bad}\ngot: {found:#?}");
    };
    assert_eq!(hit.severity, severity, "{hit:#?}");
    assert_eq!(hit.line, Some(line), "{code} on the wrong line: {hit:#?}");
    assert!(hit.column.is_some_and(|c| c >= 1));
    assert_eq!(hit.file.as_deref(), Some(Path::new("t.yaml")));
    assert!(hit.sequence.is_some(), "{hit:#?}");
    assert!(
        hit.message.contains("expected"),
        "message says what was expected: {hit:#?}"
    );
    let found = lint(good);
    assert!(
        !found.iter().any(|d| d.code == code),
        "{code} reported for the good spec:\n{good}\ngot: {found:#?}"
    );
}

/// A request sequence `req` (required arg `host`) whose nodes are `nodes`, plus a
/// sub-sequence `sub` (required `host`, optional `opt`; its node sets `out`).
fn spec(nodes: &str) -> String {
    format!(
        "sequences:
  req:
    args:
      required:
        - name: host
    nodes:
{nodes}
  sub:
    args:
      required:
        - name: host
      optional:
        - name: opt
          default: x
    nodes:
      s1:
        category: job
        type: t
        args:
          - expected: host
        sets:
          - arg: out
"
    )
}

/// A sequence `req` with the given `args:` body and `acl:` body, and one job node.
fn seq_spec(args: &str, acl: &str) -> String {
    format!(
        "sequences:
  req:
    args:
{args}
    acl:
{acl}
    nodes:
      a:
        category: job
        type: t
"
    )
}

/// A job node `l` that sets `hosts`, for nodes that expand over it.
const EXPANDED: &str =
    "      l:\n        category: job\n        type: t\n        sets: [{arg: hosts}]\n";

const REQUIRED_HOST: &str = "      required:\n        - name: host";

#[test]
fn s1_s2_s3_args_are_named() {
    use Severity::Error;
    case(
        "S1",
        Error,
        &seq_spec("      required:\n        - desc: no name #!", ""),
        &seq_spec(REQUIRED_HOST, ""),
    );
    case(
        "S2",
        Error,
        &seq_spec("      optional:\n        - default: x #!", ""),
        &seq_spec(
            "      optional:\n        - name: o\n          default: x",
            "",
        ),
    );
    case(
        "S3",
        Error,
        &seq_spec("      static:\n        - default: x #!", ""),
        &seq_spec("      static:\n        - name: s\n          default: x", ""),
    );
}

#[test]
fn s4_s5_optional_and_static_args_have_defaults() {
    use Severity::Error;
    case(
        "S4",
        Error,
        &seq_spec("      optional:\n        - name: o #!", ""),
        &seq_spec(
            "      optional:\n        - name: o\n          default: \"\"",
            "",
        ),
    );
    case(
        "S5",
        Error,
        &seq_spec("      static:\n        - name: s #!", ""),
        &seq_spec(
            "      static:\n        - name: s\n          default: [a, b]",
            "",
        ),
    );
}

#[test]
fn s6_s7_s8_acls() {
    use Severity::Error;
    case(
        "S6",
        Error,
        &seq_spec(
            REQUIRED_HOST,
            "      - role: sre\n        admin: true #!\n        ops: [start]",
        ),
        &seq_spec(
            REQUIRED_HOST,
            "      - role: sre\n        admin: true\n      - role: dev\n        ops: [start]",
        ),
    );
    case(
        "S7",
        Error,
        &seq_spec(REQUIRED_HOST, "      - admin: true #!"),
        &seq_spec(REQUIRED_HOST, "      - role: sre\n        admin: true"),
    );
    case(
        "S8",
        Error,
        &seq_spec(
            REQUIRED_HOST,
            "      - role: sre\n        admin: true\n      - role: sre #!\n        ops: [stop]",
        ),
        &seq_spec(
            REQUIRED_HOST,
            "      - role: sre\n        admin: true\n      - role: ops\n        ops: [stop]",
        ),
    );
}

#[test]
fn s9_s10_s11_args_unique_required_without_default_and_nodes() {
    use Severity::Error;
    case(
        "S9",
        Error,
        &seq_spec(
            "      required:\n        - name: host\n      optional:\n        - name: host #!\n          default: x",
            "",
        ),
        &seq_spec(
            "      required:\n        - name: host\n      optional:\n        - name: port\n          default: x",
            "",
        ),
    );
    case(
        "S10",
        Error,
        &seq_spec(
            "      required:\n        - name: host\n          default: db1 #!",
            "",
        ),
        &seq_spec(REQUIRED_HOST, ""),
    );
    case(
        "S11",
        Error,
        "sequences:\n  req:\n    nodes: {} #!\n",
        "sequences:\n  req:\n    nodes:\n      a:\n        category: job\n        type: t\n",
    );
}

#[test]
fn sw1_args_set_once() {
    case(
        "SW1",
        Severity::Warning,
        &spec(
            "      a:\n        category: job\n        type: t\n        sets: [{arg: x}] #!\n      b:\n        category: job\n        type: t\n        sets: [{arg: x}]",
        ),
        &spec(
            "      a:\n        category: job\n        type: t\n        sets: [{arg: x}]\n      b:\n        category: job\n        type: t\n        sets: [{arg: x, as: y}]",
        ),
    );
    // A node setting one of the sequence's own args.
    case(
        "SW1",
        Severity::Warning,
        &spec("      a:\n        category: job\n        type: t\n        sets: [{arg: host}] #!"),
        &spec("      a:\n        category: job\n        type: t\n        sets: [{arg: other}]"),
    );
}

#[path = "beyond_tests.rs"]
mod beyond_tests;
#[path = "dependency_tests.rs"]
mod dependency_tests;
#[path = "node_tests.rs"]
mod node_tests;
#[path = "parse_tests.rs"]
mod parse_tests;
#[path = "rollout_tests.rs"]
mod rollout_tests;
