//! Reading the YAML: parse problems, scalars, anchors, defaults, and a line for every
//! diagnostic (a property test).

use super::*;

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
