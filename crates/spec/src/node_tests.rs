//! The linter's node checks (Spin Cycle's N1–N23, NW1–NW5) and node timeouts.

use super::*;

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
