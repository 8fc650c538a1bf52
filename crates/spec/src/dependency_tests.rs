//! The linter's checks across a spec (Spin Cycle's G1–G8): what is set before it is
//! used, dependencies and cycles, callers of sequences with errors.

use super::*;

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
