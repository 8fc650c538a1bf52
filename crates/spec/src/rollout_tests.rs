//! Spindle's rollout fields (issue #50): `max_failures`, `on_budget_exceeded`, `waves`,
//! `wave_wait` and `wave_approval`, each diagnostic at its line with what was expected.

use super::*;

/// A job node over the request's `host` list with `fields` (each line indented as a
/// node's field; the one to point at marked `#!`).
fn fleet(fields: &str) -> String {
    spec(&format!(
        "      a:\n        category: job\n        type: t\n        each: [host:h]\n{fields}"
    ))
}

/// The same fields on a node without `each:`.
fn single(fields: &str) -> String {
    spec(&format!(
        "      a:\n        category: job\n        type: t\n{fields}"
    ))
}

fn rollout_errors(yaml: &str) -> Vec<Diagnostic> {
    lint(yaml)
        .into_iter()
        .filter(|d| d.code == "rollout")
        .collect()
}

#[test]
fn budgets_and_waves_go_with_each() {
    for field in [
        "        max_failures: 2 #!\n",
        "        waves: [1, 100%] #!\n",
    ] {
        case("rollout", Severity::Error, &single(field), &fleet(field));
    }
}

#[test]
fn percentages_lie_within_0_and_100() {
    case(
        "rollout",
        Severity::Error,
        &fleet("        max_failures: 120% #!\n"),
        &fleet("        max_failures: 0.5%\n"),
    );
    case(
        "rollout",
        Severity::Error,
        &fleet("        waves: [1, 0%, 100%] #!\n"),
        &fleet("        waves: [1, 10%, 100%]\n"),
    );
    let found = lint(&fleet("        max_failures: lots #!\n"));
    let hit = found
        .iter()
        .find(|d| d.code == "type")
        .expect("a type error");
    assert_eq!(hit.field.as_deref(), Some("max_failures"));
    assert!(
        hit.message
            .contains("a count (such as 4) or a percentage of the elements (such as 10%)"),
        "{hit:#?}"
    );
}

#[test]
fn waves_grow() {
    case(
        "rollout",
        Severity::Error,
        &fleet("        waves: [1, 50%,\n          20%] #!\n"),
        &fleet("        waves: [1, 20%,\n          50%]\n"),
    );
    case(
        "rollout",
        Severity::Error,
        &fleet("        waves: [5,\n          5] #!\n"),
        &fleet("        waves: [5,\n          6]\n"),
    );
    let found = rollout_errors(&fleet("        waves: [5, 3]\n"));
    assert_eq!(
        found[0].message,
        "wave `3` follows `5`; expected each wave's cumulative size larger than the one before it (such as [1, 10%, 50%, 100%])"
    );
}

#[test]
fn on_budget_exceeded_is_stop_or_finish_with_a_budget() {
    case(
        "rollout",
        Severity::Error,
        &fleet("        max_failures: 1\n        on_budget_exceeded: halt #!\n"),
        &fleet("        max_failures: 1\n        on_budget_exceeded: stop\n"),
    );
    case(
        "rollout",
        Severity::Error,
        &fleet("        on_budget_exceeded: stop #!\n"),
        &fleet("        max_failures: 10%\n        on_budget_exceeded: finish\n"),
    );
}

#[test]
fn a_wave_wait_and_approval_go_with_waves() {
    case(
        "rollout",
        Severity::Error,
        &fleet("        wave_wait: 5m #!\n"),
        &fleet("        waves: [1, 100%]\n        wave_wait: 5m\n"),
    );
    case(
        "rollout",
        Severity::Error,
        &fleet("        waves: [1, 100%]\n        wave_wait: soon #!\n"),
        &fleet("        waves: [1, 100%]\n        wave_wait: 30s\n"),
    );
    case(
        "rollout",
        Severity::Error,
        &fleet("        wave_approval: true #!\n"),
        &fleet("        waves: [1, 100%]\n        wave_approval: [ops]\n"),
    );
}

#[test]
fn an_approval_between_waves_holding_locks_is_a_warning() {
    case(
        "rollout",
        Severity::Warning,
        &fleet(
            "        waves: [1, 100%]\n        wave_approval: true #!\n        locks:\n          - name: fleet\n            key: all\n",
        ),
        &fleet("        waves: [1, 100%]\n        wave_approval: true\n"),
    );
    let found = rollout_errors(&fleet(
        "        waves: [1, 100%]\n        wave_approval: true\n        locks:\n          - name: fleet\n            key: all\n",
    ));
    assert!(
        found[0]
            .message
            .starts_with("`wave_approval` waits for a person while `fleet` is held"),
        "{found:#?}"
    );
}
