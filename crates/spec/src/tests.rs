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

#[test]
fn n1_n2_categories() {
    use Severity::Error;
    case(
        "N1",
        Error,
        &spec("      a: #!\n        type: t"),
        &spec("      a:\n        category: job\n        type: t"),
    );
    case(
        "N2",
        Error,
        &spec("      a:\n        category: task #!\n        type: t"),
        &spec("      a:\n        category: job\n        type: t"),
    );
}

#[test]
fn n3_called_sequences_exist() {
    use Severity::Error;
    case(
        "N3",
        Error,
        &spec(
            "      a:\n        category: sequence\n        type: nope #!\n        args: [{expected: host}]",
        ),
        &spec(
            "      a:\n        category: sequence\n        type: sub\n        args: [{expected: host}]",
        ),
    );
    case(
        "N3",
        Error,
        &spec(
            "      a:\n        category: conditional\n        if: host\n        eq:\n          db1: nope #!\n          default: noop",
        ),
        &spec(
            "      a:\n        category: conditional\n        if: host\n        eq:\n          db1: sub\n          default: noop\n        args: [{expected: host}]",
        ),
    );
}

#[test]
fn n4_each_is_list_colon_element() {
    case(
        "N4",
        Severity::Error,
        &spec(
            "      a:\n        category: sequence\n        type: sub\n        each:\n          - hosts #!\n        args: [{expected: host}]",
        ),
        &spec(
            "      l:\n        category: job\n        type: t\n        sets: [{arg: hosts}]\n      a:\n        category: sequence\n        type: sub\n        each: [hosts:host]\n        deps: [l]",
        ),
    );
    // `a:b:c` has two colons.
    let found = lint(&spec(
        "      a:\n        category: sequence\n        type: sub\n        each: [\"a:b:c\"]",
    ));
    assert!(found.iter().any(|d| d.code == "N4"));
}

#[test]
fn n5_to_n8_args_and_sets_entries() {
    use Severity::Error;
    let good = spec(
        "      a:\n        category: job\n        type: t\n        args: [{expected: host}]\n        sets: [{arg: x}]",
    );
    case(
        "N5",
        Error,
        &spec("      a:\n        category: job\n        type: t\n        args:\n          - ~ #!"),
        &good,
    );
    case(
        "N6",
        Error,
        &spec(
            "      a:\n        category: job\n        type: t\n        args:\n          - given: host #!",
        ),
        &good,
    );
    case(
        "N7",
        Error,
        &spec("      a:\n        category: job\n        type: t\n        sets:\n          - #!"),
        &good,
    );
    case(
        "N8",
        Error,
        &spec(
            "      a:\n        category: job\n        type: t\n        sets:\n          - as: x #!",
        ),
        &good,
    );
}

const EXPANDED: &str =
    "      l:\n        category: job\n        type: t\n        sets: [{arg: hosts}]\n";

#[test]
fn n9_parallel_positive_and_n19_parallel_needs_each() {
    use Severity::Error;
    let good = spec(&format!(
        "{EXPANDED}      a:\n        category: sequence\n        type: sub\n        each: [hosts:host]\n        parallel: 2\n        deps: [l]"
    ));
    case(
        "N9",
        Error,
        &spec(&format!(
            "{EXPANDED}      a:\n        category: sequence\n        type: sub\n        each: [hosts:host]\n        parallel: 0 #!\n        deps: [l]"
        )),
        &good,
    );
    case(
        "N19",
        Error,
        &spec(
            "      a:\n        category: sequence\n        type: sub\n        args: [{expected: host}]\n        parallel: 2 #!",
        ),
        &good,
    );
}

const CONDITIONAL_GOOD: &str = "      a:\n        category: conditional\n        if: host\n        eq:\n          db1: sub\n          default: noop\n        args: [{expected: host}]";

#[test]
fn n10_n11_n20_conditionals() {
    use Severity::Error;
    case(
        "N10",
        Error,
        &spec("      a: #!\n        category: conditional\n        eq:\n          default: noop"),
        &spec(CONDITIONAL_GOOD),
    );
    case(
        "N11",
        Error,
        &spec("      a:\n        category: conditional\n        if: host\n        eq: {} #!"),
        &spec(CONDITIONAL_GOOD),
    );
    case(
        "N20",
        Error,
        &spec(
            "      a:\n        category: conditional\n        type: sub #!\n        if: host\n        eq:\n          default: noop",
        ),
        &spec(CONDITIONAL_GOOD),
    );
}

#[test]
fn n12_n21_n22_non_conditionals() {
    use Severity::Error;
    let good = spec("      a:\n        category: job\n        type: t");
    case(
        "N12",
        Error,
        &spec("      a: #!\n        category: job"),
        &good,
    );
    case(
        "N21",
        Error,
        &spec("      a:\n        category: job\n        type: t\n        if: host #!"),
        &good,
    );
    case(
        "N22",
        Error,
        &spec("      a:\n        category: job\n        type: t\n        eq:\n          x: sub #!"),
        &good,
    );
}

#[test]
fn n13_retry_wait_is_a_duration_and_n23_needs_retry() {
    use Severity::Error;
    let good = spec(
        "      a:\n        category: job\n        type: t\n        retry: 2\n        retryWait: 1m30s",
    );
    case(
        "N13",
        Error,
        &spec(
            "      a:\n        category: job\n        type: t\n        retry: 2\n        retryWait: 5 seconds #!",
        ),
        &good,
    );
    case(
        "N23",
        Error,
        &spec("      a:\n        category: job\n        type: t\n        retryWait: 5s #!"),
        &good,
    );
}

#[test]
fn timeout_is_a_positive_duration_on_any_node_and_on_sequences() {
    use Severity::Error;
    let good = spec("      a:\n        category: job\n        type: t\n        timeout: 1m30s");
    assert!(lint(&good).is_empty(), "{:#?}", lint(&good));
    let on_a_sequence_node = spec(
        "      a:\n        category: sequence\n        type: sub\n        args:\n          - expected: host\n        timeout: 5m",
    );
    assert!(
        lint(&on_a_sequence_node).is_empty(),
        "{:#?}",
        lint(&on_a_sequence_node)
    );
    let on_a_sequence = good.replacen("  req:\n", "  req:\n    timeout: 1h\n", 1);
    assert!(
        lint(&on_a_sequence).is_empty(),
        "{:#?}",
        lint(&on_a_sequence)
    );
    let bad_on_a_sequence = good.replacen("  req:\n", "  req:\n    timeout: later #!\n", 1);
    case("timeout", Error, &bad_on_a_sequence, &good);
    for bad in [
        "      a:\n        category: job\n        type: t\n        timeout: soon #!",
        "      a:\n        category: job\n        type: t\n        timeout: 0s #!",
        "      a:\n        category: sequence\n        type: sub\n        args:\n          - expected: host\n        timeout: 5x #!",
    ] {
        case("timeout", Error, &spec(bad), &good);
    }
    let message = &lint(&spec(
        "      a:\n        category: job\n        type: t\n        timeout: soon",
    ))[0]
        .message;
    assert!(
        message.contains("expected a Go duration such as 30s"),
        "{message}"
    );
}

#[test]
fn n14_required_args_provided() {
    case(
        "N14",
        Severity::Error,
        &spec("      a:\n        category: sequence\n        type: sub\n        args: [] #!"),
        &spec(
            "      a:\n        category: sequence\n        type: sub\n        args: [{expected: host}]",
        ),
    );
    // An each element counts as passed.
    let found = lint(&spec(&format!(
        "{EXPANDED}      a:\n        category: sequence\n        type: sub\n        each: [hosts:host]\n        deps: [l]"
    )));
    assert!(!found.iter().any(|d| d.code == "N14"), "{found:#?}");
}

#[test]
fn n15_to_n18_duplicates_in_a_node() {
    use Severity::Error;
    let two_lists = "      l:\n        category: job\n        type: t\n        sets: [{arg: hosts}, {arg: ports}]\n";
    case(
        "N15",
        Error,
        &spec(&format!(
            "{two_lists}      a:\n        category: sequence\n        type: sub\n        each: [hosts:host, ports:host] #!\n        deps: [l]"
        )),
        &spec(&format!(
            "{two_lists}      a:\n        category: sequence\n        type: sub\n        each: [hosts:host, ports:opt]\n        deps: [l]"
        )),
    );
    case(
        "N16",
        Error,
        &spec(
            "      a:\n        category: job\n        type: t\n        args: [{expected: host}, {expected: host}] #!",
        ),
        &spec(
            "      a:\n        category: job\n        type: t\n        args: [{expected: host}, {expected: h2, given: host}]",
        ),
    );
    case(
        "N17",
        Error,
        &spec(&format!(
            "{EXPANDED}      a:\n        category: sequence\n        type: sub\n        each: [hosts:host] #!\n        args: [{{expected: host}}]\n        deps: [l]"
        )),
        &spec(&format!(
            "{EXPANDED}      a:\n        category: sequence\n        type: sub\n        each: [hosts:host]\n        deps: [l]"
        )),
    );
    case(
        "N18",
        Error,
        &spec(
            "      a:\n        category: job\n        type: t\n        sets: [{arg: x}, {arg: y, as: x}] #!",
        ),
        &spec(
            "      a:\n        category: job\n        type: t\n        sets: [{arg: x}, {arg: y}]",
        ),
    );
}

#[test]
fn nw1_to_nw4_renames() {
    use Severity::Warning;
    case(
        "NW1",
        Warning,
        &spec(&format!(
            "{EXPANDED}      a:\n        category: sequence\n        type: sub\n        each: [hosts:host, hosts:opt] #!\n        deps: [l]"
        )),
        &spec(&format!(
            "{EXPANDED}      a:\n        category: sequence\n        type: sub\n        each: [hosts:host]\n        deps: [l]"
        )),
    );
    case(
        "NW2",
        Warning,
        &spec(
            "      a:\n        category: job\n        type: t\n        args: [{expected: h1, given: host}, {expected: h2, given: host}] #!",
        ),
        &spec(
            "      a:\n        category: job\n        type: t\n        args: [{expected: h1, given: host}]",
        ),
    );
    case(
        "NW3",
        Warning,
        &spec(&format!(
            "{EXPANDED}      a:\n        category: sequence\n        type: sub\n        each: [hosts:host] #!\n        args: [{{expected: opt, given: hosts}}]\n        deps: [l]"
        )),
        &spec(&format!(
            "{EXPANDED}      a:\n        category: sequence\n        type: sub\n        each: [hosts:host]\n        deps: [l]"
        )),
    );
    case(
        "NW4",
        Warning,
        &spec(
            "      a:\n        category: job\n        type: t\n        sets: [{arg: x, as: y}, {arg: x, as: z}] #!",
        ),
        &spec("      a:\n        category: job\n        type: t\n        sets: [{arg: x, as: y}]"),
    );
}

#[test]
fn nw5_no_extra_sequence_args() {
    case(
        "NW5",
        Severity::Warning,
        &spec(
            "      a:\n        category: sequence\n        type: sub\n        args:\n          - expected: host\n          - expected: color #!\n            given: host",
        ),
        &spec(
            "      a:\n        category: sequence\n        type: sub\n        args:\n          - expected: host\n          - expected: opt\n            given: host",
        ),
    );
}

#[test]
fn g1_conditional_if_arg_is_set() {
    case(
        "G1",
        Severity::Error,
        &spec(
            "      a:\n        category: conditional\n        if: mode #!\n        eq:\n          default: noop",
        ),
        &spec(
            "      a:\n        category: conditional\n        if: host\n        eq:\n          default: noop",
        ),
    );
}

#[test]
fn g3_args_set_by_an_ancestor() {
    let setter = "      s:\n        category: job\n        type: t\n        sets: [{arg: x}]\n";
    case(
        "G3",
        Severity::Error,
        &spec(&format!(
            "{setter}      a:\n        category: job\n        type: t\n        args:\n          - expected: x #!"
        )),
        &spec(&format!(
            "{setter}      a:\n        category: job\n        type: t\n        args:\n          - expected: x\n        deps: [s]"
        )),
    );
    // Set by a node in an independent branch: reported with the fix.
    let found = lint(&spec(&format!(
        "{setter}      a:\n        category: job\n        type: t\n        args: [{{expected: x}}]"
    )));
    let g3 = found.iter().find(|d| d.code == "G3").expect("G3");
    assert!(g3.message.contains("set by node `s`"), "{}", g3.message);
    assert!(g3.message.contains("add it to `deps`"), "{}", g3.message);
    // Each lists too.
    case(
        "G3",
        Severity::Error,
        &spec(
            "      a:\n        category: sequence\n        type: sub\n        each:\n          - hosts:host #!",
        ),
        &spec(&format!(
            "{EXPANDED}      a:\n        category: sequence\n        type: sub\n        each: [hosts:host]\n        deps: [l]"
        )),
    );
}

#[test]
fn g4_unknown_deps_and_cycles() {
    use Severity::Error;
    let good = spec(
        "      a:\n        category: job\n        type: t\n      b:\n        category: job\n        type: t\n        deps: [a]",
    );
    case(
        "G4",
        Error,
        &spec("      a:\n        category: job\n        type: t\n        deps: [nothere] #!"),
        &good,
    );
    case(
        "G4",
        Error,
        &spec(
            "      a:\n        category: job\n        type: t\n        deps: [b] #!\n      b:\n        category: job\n        type: t\n        deps: [a]",
        ),
        &good,
    );
    let found = lint(&spec(
        "      a:\n        category: job\n        type: t\n        deps: [a]",
    ));
    assert!(
        found.iter().any(|d| d.code == "G4"),
        "self dependency: {found:#?}"
    );
    let found = lint(&spec(
        "      a:\n        category: job\n        type: t\n        deps: [c]\n      b:\n        category: job\n        type: t\n        deps: [a]\n      c:\n        category: job\n        type: t\n        deps: [b]",
    ));
    let g4 = found.iter().find(|d| d.code == "G4").expect("G4");
    assert!(
        g4.message.contains("a → b → c → a") || g4.message.contains("a → c → b → a"),
        "{}",
        g4.message
    );
}

#[test]
fn g6_callers_of_sequences_with_errors() {
    let bad_sub = "sequences:
  req:
    nodes:
      a:
        category: sequence
        type: sub #!
  sub:
    nodes:
      s:
        category: jobb
        type: t
";
    case(
        "G6",
        Severity::Error,
        bad_sub,
        &bad_sub.replace("jobb", "job"),
    );
}

#[test]
fn g7_sets_of_calls_are_set_by_the_callee() {
    case(
        "G7",
        Severity::Error,
        &spec(
            "      a:\n        category: sequence\n        type: sub\n        args: [{expected: host}]\n        sets:\n          - arg: nothere #!",
        ),
        &spec(
            "      a:\n        category: sequence\n        type: sub\n        args: [{expected: host}]\n        sets:\n          - arg: out",
        ),
    );
    // A conditional's sets must be set by every branch; noop sets nothing.
    let found = lint(&spec(
        "      a:\n        category: conditional\n        if: host\n        eq:\n          db1: sub\n          default: noop\n        args: [{expected: host}]\n        sets: [{arg: out}]",
    ));
    assert!(found.iter().any(|d| d.code == "G7"), "{found:#?}");
}

#[test]
fn g8_sequences_do_not_call_themselves() {
    let cycle = "sequences:
  req:
    nodes:
      a:
        category: sequence
        type: other #!
  other:
    nodes:
      b:
        category: sequence
        type: req
";
    case(
        "G8",
        Severity::Error,
        cycle,
        &cycle.replace("type: req", "type: noop"),
    );
}

#[test]
fn parse_problems() {
    // A type error is one error at the value, and the rest is still checked.
    let found = lint(
        "sequences:\n  s:\n    nodes:\n      a:\n        category: job\n        type: t\n        retry: lots\n      b:\n        category: jobb\n        type: t\n",
    );
    let codes: Vec<(&str, Option<u32>)> = found.iter().map(|d| (d.code, d.line)).collect();
    assert_eq!(codes, [("type", Some(7)), ("N2", Some(9))]);
    assert!(found[0].message.contains("non-negative integer"));
    // Unknown fields and duplicated keys are warnings.
    let found = lint(
        "sequences:\n  s:\n    nodes:\n      a:\n        category: job\n        category: job\n        type: t\n        colour: red\n",
    );
    let codes: Vec<(&str, Severity)> = found.iter().map(|d| (d.code, d.severity)).collect();
    assert_eq!(
        codes,
        [
            ("duplicate-key", Severity::Warning),
            ("unknown-field", Severity::Warning)
        ]
    );
    // Syntax errors have a line.
    let found = lint("sequences:\n  s: [\n");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].code, "yaml");
    assert!(found[0].line.is_some());
    // Lists where a string is expected, a map where a list is.
    let found = lint(
        "sequences:\n  s:\n    nodes:\n      a:\n        category: [job]\n        type: t\n        deps: {a: b}\n",
    );
    assert_eq!(
        found.iter().filter(|d| d.code == "type").count(),
        2,
        "{found:#?}"
    );
    // A second document.
    let found = lint("sequences: {}\n---\nsequences: {}\n");
    assert_eq!(found[0].line, Some(2));
}

#[test]
fn scalars_keep_their_text() {
    let report = lint_str(
        Path::new("t.yaml"),
        "sequences:\n  s:\n    request: yes\n    args:\n      optional:\n        - name: 1\n          default: yes\n        - name: on\n          default: 1.50\n    nodes:\n      a:\n        category: conditional\n        if: on\n        eq:\n          yes: noop\n          no: noop\n        args: [{expected: on}]\n",
    );
    let seq = report.specs.get("s").unwrap();
    assert!(seq.request);
    let names: Vec<&str> = seq.arg_names().collect();
    assert_eq!(names, ["1", "on"]);
    assert_eq!(seq.args.optional[0].default.as_ref().unwrap().value, "yes");
    assert_eq!(seq.args.optional[1].default.as_ref().unwrap().value, "1.50");
    let keys: Vec<&str> = seq.nodes[0]
        .eq
        .iter()
        .map(|(k, _)| k.value.as_str())
        .collect();
    assert_eq!(keys, ["yes", "no"]);
}

#[test]
fn anchors_aliases_and_merge_keys() {
    let report = lint_str(
        Path::new("t.yaml"),
        "defaults: &job\n  category: job\n  type: t\nsequences:\n  s:\n    nodes:\n      a:\n        <<: *job\n      b:\n        <<: *job\n        type: u\n        deps: [a]\n",
    );
    // `defaults` is an unknown top-level key (a warning); the rest is clean.
    let codes: Vec<&str> = report.diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["unknown-field"]);
    let seq = report.specs.get("s").unwrap();
    assert_eq!(seq.nodes[0].node_type(), Some("t"));
    assert_eq!(seq.nodes[1].node_type(), Some("u"));
}

#[test]
fn defaults_may_be_any_yaml_value() {
    let report = lint_str(
        Path::new("t.yaml"),
        "sequences:\n  s:\n    request: true\n    args:\n      static:\n        - name: argv\n          default: [\"-c\", \"echo hi\"]\n        - name: env\n          default: {A: 1}\n    nodes:\n      a:\n        category: job\n        type: t\n        args: [{expected: argv}, {expected: env}]\n",
    );
    assert!(report.diagnostics.is_empty(), "{:#?}", report.diagnostics);
    let seq = report.specs.get("s").unwrap();
    assert_eq!(
        seq.args.statics[0].default.as_ref().unwrap().value,
        serde_json::json!(["-c", "echo hi"])
    );
    assert_eq!(
        seq.args.statics[1].default.as_ref().unwrap().value,
        serde_json::json!({"A": "1"})
    );
}

#[test]
fn every_diagnostic_from_a_file_place_has_a_line() {
    for yaml in [
        "sequences:\n  s: 3\n",
        "- a\n- b\n",
        "sequences:\n  s:\n    nodes:\n      a:\n        category: sequence\n",
        "sequences:\n  s:\n    nodes:\n      a: 1\n",
    ] {
        for diagnostic in lint(yaml) {
            assert!(diagnostic.line.is_some(), "{yaml}: {diagnostic:#?}");
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// Arbitrary text never panics the linter, and every line points into the text.
    #[test]
    fn never_panics_and_lines_are_valid(text in "(?s).{0,400}") {
        check_lines(&text);
    }

    /// Text shaped like specs (indented keys, lists, the spec's field names) reaches the
    /// checks rather than the YAML parser's errors.
    #[test]
    fn spec_shaped_input_never_panics(lines in proptest::collection::vec(spec_line(), 0..40)) {
        check_lines(&lines.join("\n"));
    }
}

fn check_lines(text: &str) {
    let n_lines = u32::try_from(text.lines().count().max(1)).unwrap();
    for diagnostic in lint(text) {
        if let Some(line) = diagnostic.line {
            assert!(
                (1..=n_lines).contains(&line),
                "line {line} of {n_lines}: {diagnostic:#?}"
            );
            assert!(diagnostic.column.is_some_and(|c| c >= 1));
        }
    }
}

fn spec_line() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let keys = prop::sample::select(vec![
        "sequences",
        "nodes",
        "args",
        "required",
        "optional",
        "static",
        "name",
        "default",
        "category",
        "type",
        "sets",
        "deps",
        "retry",
        "retryWait",
        "each",
        "parallel",
        "if",
        "eq",
        "expected",
        "given",
        "arg",
        "as",
        "acl",
        "role",
        "ops",
        "admin",
        "request",
        "s",
        "a",
    ]);
    let values = prop::sample::select(vec![
        "",
        " job",
        " sequence",
        " conditional",
        " noop",
        " [a]",
        " [a, b]",
        " 0",
        " 3",
        " -1",
        " 5s",
        " bogus",
        " a:b",
        " {}",
        " ~",
        " true",
        " [x:y, x:z]",
        " &x a",
        " *x",
    ]);
    (0usize..6, prop::bool::ANY, keys, values).prop_map(|(indent, dash, key, value)| {
        format!(
            "{}{}{key}:{value}",
            "  ".repeat(indent),
            if dash { "- " } else { "" }
        )
    })
}

// ---- issue #12: job types against the binary's ----

fn with_job_types(yaml: &str) -> Vec<Diagnostic> {
    let mut job_types = crate::JobTypes::new();
    job_types
        .add("noop", &[])
        .add("sleep", &["duration".to_owned()])
        .add("shell-command", &["cmd".to_owned()]);
    let mut report = lint_str(Path::new("t.yaml"), yaml);
    report.check_job_types(&job_types);
    report.diagnostics
}

#[test]
fn an_unknown_job_type_is_an_error_at_its_line_with_the_near_miss() {
    let bad = "sequences:\n  s:\n    args:\n      required:\n        - name: duration\n    nodes:\n      a:\n        category: job\n        type: slep #!\n        args: [{expected: duration}]\n";
    let found = with_job_types(bad);
    assert_eq!(found.len(), 1, "{found:#?}");
    let hit = &found[0];
    assert_eq!((hit.code, hit.severity), ("job-type", Severity::Error));
    assert_eq!(hit.line, Some(marked_line(bad)));
    assert_eq!(hit.field.as_deref(), Some("type"));
    assert_eq!(
        hit.message,
        "unknown job type `slep` (did you mean `sleep`?); expected one of the job types this binary runs: `noop`, `shell-command`, `sleep`, or one a job program serves (`jobs:` in the config: docs/job-protocol.md)"
    );
    // Far from every known type: no guess.
    let found = with_job_types(&bad.replace("slep", "provision-db"));
    assert!(!found[0].message.contains("did you mean"), "{found:#?}");
    // Known types, sequences and the linter without job types: nothing.
    assert!(with_job_types(&bad.replace("slep", "sleep")).is_empty());
    assert!(lint(bad).is_empty());
}

/// A pool naming a type nothing runs holds nothing: an error at the type, with the near
/// miss (noticed in issue #34's review).
#[test]
fn a_pools_unknown_job_type_is_an_error_with_the_near_miss() {
    let specs = "pools:\n  ssh:\n    limit: 2\n    types: [shell-command, shel-command] #!\nsequences:\n  s:\n    nodes:\n      a:\n        category: job\n        type: noop\n";
    let found = with_job_types(specs);
    assert_eq!(found.len(), 1, "{found:#?}");
    let hit = &found[0];
    assert_eq!((hit.code, hit.severity), ("job-type", Severity::Error));
    assert_eq!(hit.line, Some(marked_line(specs)));
    assert_eq!(hit.field.as_deref(), Some("pools.ssh.types"));
    assert!(
        hit.message
            .starts_with("unknown job type `shel-command` (did you mean `shell-command`?)"),
        "{}",
        hit.message
    );
    assert!(with_job_types(&specs.replace(", shel-command", "")).is_empty());
}

#[test]
fn a_job_node_must_pass_the_job_args_its_type_requires() {
    let bad = "sequences:\n  s:\n    args:\n      required:\n        - name: ms\n    nodes:\n      a:\n        category: job\n        type: sleep\n        args: #!\n          - expected: ms\n";
    let found = with_job_types(bad);
    assert_eq!(found.len(), 1, "{found:#?}");
    let hit = &found[0];
    assert_eq!((hit.code, hit.line), ("job-args", Some(marked_line(bad))));
    assert!(
        hit.message.starts_with("job type `sleep` requires job arg `duration`, which this node does not pass; expected `- expected: duration`"),
        "{}",
        hit.message
    );
    // Passed under its name (given another arg), or as an `each` element: fine.
    let good = bad.replace(
        "- expected: ms",
        "- expected: duration\n            given: ms",
    );
    assert!(
        with_job_types(&good).is_empty(),
        "{:#?}",
        with_job_types(&good)
    );
    let each = "sequences:\n  s:\n    args:\n      required:\n        - name: waits\n    nodes:\n      a:\n        category: job\n        type: sleep\n        each: [waits:duration]\n";
    assert!(
        with_job_types(each).is_empty(),
        "{:#?}",
        with_job_types(each)
    );
}

/// Issue #16: `schedules:` are read and linted: cron expression, time zone, policies,
/// the request type and its args.
#[test]
fn schedules_are_read_and_linted() {
    let text = r#"sequences:
  backup:
    request: true
    args:
      required:
        - name: host
          desc: what to back up
      optional:
        - name: level
          default: full
    nodes:
      run:
        category: job
        type: noop
schedules:
  nightly:
    cron: "0 2 * * *"
    timezone: Europe/Berlin
    request: backup
    args: {host: db1}
    overlap: start
  every-second:
    cron: "* * * * * *"
    request: backup
    args: {host: db2, level: incremental}
    missed: start
  broken-cron:
    cron: "0 25 * * *"
    request: backup
    args: {host: db1}
  bad-zone:
    cron: "0 2 * * *"
    timezone: Mars/Olympus
    request: backup
    args: {host: db1}
  no-such-request:
    cron: "0 2 * * *"
    request: restore
  missing-arg:
    cron: "0 2 * * *"
    request: backup
    args: {colour: blue, hots: db1}
  bad-policy:
    cron: "0 2 * * *"
    request: backup
    args: {host: db1}
    overlap: sometimes
"#;
    let report = crate::lint_str(Path::new("specs.yaml"), text);
    let errors: Vec<(String, String)> = report
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| (d.field.clone().unwrap_or_default(), d.message.clone()))
        .collect();
    let has = |field: &str, words: &str| {
        assert!(
            errors.iter().any(|(f, m)| f == field && m.contains(words)),
            "no {field}: {words} in {errors:#?}"
        );
    };
    has(
        "schedules.broken-cron.cron",
        "schedule `broken-cron`: `cron`:",
    );
    has(
        "schedules.bad-zone.timezone",
        "unknown time zone \"Mars/Olympus\"",
    );
    has(
        "schedules.no-such-request.request",
        "`restore` is not a request type; expected one of: `backup`",
    );
    has("schedules.missing-arg.args", "requires `host`");
    has("schedules.missing-arg.args", "has no arg `colour`");
    has(
        "schedules.missing-arg.args",
        "has no arg `hots` (did you mean `host`?)",
    );
    has(
        "schedules.bad-policy.overlap",
        "\"sometimes\"; expected skip or start",
    );
    assert_eq!(errors.len(), 7, "{errors:#?}");
    let schedules = report.specs.schedules();
    assert_eq!(schedules.len(), 7);
    let nightly = schedules[0].fires().unwrap();
    assert_eq!(
        (nightly.overlap, nightly.missed),
        (
            crate::schedule::Overlap::Start,
            crate::schedule::Missed::Skip
        )
    );
    // 02:00 in Berlin in winter is 01:00 UTC.
    let after = chrono::DateTime::parse_from_rfc3339("2026-12-01T12:00:00Z")
        .unwrap()
        .to_utc();
    assert_eq!(
        nightly.next(after).unwrap().to_rfc3339(),
        "2026-12-02T01:00:00+00:00"
    );
    let every = schedules[1].fires().unwrap();
    let until = after + chrono::Duration::seconds(3);
    assert_eq!(every.due(after, until).len(), 3);
    assert_eq!(every.args["level"], "incremental");
}

/// `--watch-specs` reads the files only when their fingerprint moves: it must move when a
/// spec file is changed, added or removed, and not otherwise.
#[test]
fn a_fingerprint_moves_with_the_spec_files_and_only_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let paths = [dir.path().to_path_buf()];
    let spec = dir.path().join("a.yaml");
    std::fs::write(&spec, "sequences: {}\n").unwrap();
    let first = crate::fingerprint(&paths).unwrap();
    assert_eq!(
        crate::fingerprint(&paths).unwrap(),
        first,
        "nothing changed"
    );
    std::fs::write(dir.path().join("notes.txt"), "not a spec").unwrap();
    assert_eq!(
        crate::fingerprint(&paths).unwrap(),
        first,
        "not a spec file"
    );
    std::fs::create_dir(dir.path().join("more")).unwrap();
    let added = dir.path().join("more").join("b.yml");
    std::fs::write(&added, "sequences: {}\n").unwrap();
    let with_added = crate::fingerprint(&paths).unwrap();
    assert_ne!(with_added, first, "a file added in a subdirectory");
    std::fs::remove_file(&added).unwrap();
    assert_eq!(crate::fingerprint(&paths).unwrap(), first, "and removed");
    std::fs::write(&spec, "sequences: {}\n# changed\n").unwrap();
    assert_ne!(crate::fingerprint(&paths).unwrap(), first, "a file changed");
    assert!(crate::fingerprint(&[dir.path().join("missing")]).is_err());
}

/// A request type `failover` (required `cluster`) with the given `locks:` body, and a
/// second request type `drain` with `other` as its locks.
fn lock_spec(locks: &str, other: &str) -> String {
    format!(
        "sequences:
  failover:
    request: true
    args:
      required:
        - name: cluster
    locks:
{locks}
    nodes:
      a:
        category: job
        type: t
  drain:
    request: true
    args:
      required:
        - name: cluster
    locks:
{other}
    nodes:
      a:
        category: job
        type: t
"
    )
}

const GOOD_LOCK: &str =
    "      - name: cluster-ops\n        key: cluster\n        limit: 1\n        when_taken: queue";

#[test]
fn l1_to_l8_locks() {
    use Severity::Error;
    case(
        "L1",
        Error,
        &lock_spec("      - key: cluster #!", GOOD_LOCK),
        &lock_spec(GOOD_LOCK, GOOD_LOCK),
    );
    case(
        "L2",
        Error,
        &lock_spec(
            "      - name: cluster-ops\n        key: clustr #!",
            GOOD_LOCK,
        ),
        &lock_spec(GOOD_LOCK, GOOD_LOCK),
    );
    case(
        "L3",
        Error,
        &lock_spec("      - name: cluster-ops\n        limit: 0 #!", GOOD_LOCK),
        &lock_spec(GOOD_LOCK, GOOD_LOCK),
    );
    case(
        "L4",
        Error,
        &lock_spec(
            "      - name: cluster-ops\n        when_taken: wait #!",
            GOOD_LOCK,
        ),
        &lock_spec(
            "      - name: cluster-ops\n        when_taken: cancel-in-progress",
            GOOD_LOCK,
        ),
    );
    case(
        "L6",
        Error,
        &lock_spec(
            GOOD_LOCK,
            "      - name: cluster-ops\n        key: cluster\n        limit: 3 #!",
        ),
        // Without a limit, a lock is a mutex: the same limit as GOOD_LOCK's.
        &lock_spec(GOOD_LOCK, "      - name: cluster-ops\n        key: cluster"),
    );
    case(
        "L7",
        Error,
        &lock_spec(
            &format!("{GOOD_LOCK}\n      - name: cluster-ops #!"),
            GOOD_LOCK,
        ),
        &lock_spec(
            &format!("{GOOD_LOCK}\n      - name: api-quota\n        limit: 5"),
            GOOD_LOCK,
        ),
    );
    case(
        "L8",
        Error,
        &lock_spec(
            "      - name: cluster-ops\n        fair_by: team #!",
            GOOD_LOCK,
        ),
        &lock_spec(
            "      - name: cluster-ops\n        fair_by: user",
            GOOD_LOCK,
        ),
    );
    // A "did you mean" for a mistyped key and policy.
    let found = lint(&lock_spec(
        "      - name: cluster-ops\n        key: clustr\n        when_taken: skipp",
        GOOD_LOCK,
    ));
    let text: Vec<&str> = found.iter().map(|d| d.message.as_str()).collect();
    assert!(
        text.iter().any(|m| m.contains("(did you mean `cluster`?)"))
            && text.iter().any(|m| m.contains("(did you mean `skip`?)")),
        "{text:#?}"
    );
    // Locks on a sequence that is not a request type.
    let found = lint(
        "sequences:
  helper:
    args: {}
    locks:
      - name: x
    nodes:
      a:
        category: job
        type: t
",
    );
    assert!(found.iter().any(|d| d.code == "L5"), "{found:#?}");
    // An unknown field of a lock.
    let found = lint(&lock_spec(
        "      - name: cluster-ops\n        limt: 2",
        GOOD_LOCK,
    ));
    assert!(
        found
            .iter()
            .any(|d| d.message.contains("limt") && d.message.contains("did you mean `limit`")),
        "{found:#?}"
    );
}
