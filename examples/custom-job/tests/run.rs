//! Builds a chain from the example spec with the `greet` job type and runs it.

use std::path::Path;
use std::sync::Arc;

use chain::testing::Kept;
use proto::{JobArgs, State};
use serde_json::json;

#[tokio::test]
async fn a_chain_with_a_custom_job_runs_to_complete() {
    let specs = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs");
    let report = spec::lint(&[specs]).unwrap();
    assert!(report.diagnostics.is_empty(), "{:#?}", report.diagnostics);
    let registry = Arc::new(custom_job::registry());
    let grapher = graph::Grapher::new(report.specs, registry.clone());
    let mut args = JobArgs::new();
    args.insert("people".to_owned(), json!(["ann", "bob", "cy"]));
    let created = grapher.create("greet-all", &args).unwrap();

    let kept = Arc::new(Kept::default());
    let handle = chain::run(
        created.job_chain,
        registry,
        kept.clone(),
        chain::Options::default(),
    )
    .unwrap();
    let end = handle.wait().await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(kept.finish().unwrap().state, State::Complete);

    let logs = kept.logs.lock().unwrap();
    let mut greetings: Vec<&str> = logs
        .iter()
        .filter(|l| l.name == "greet")
        .map(|l| l.stdout.as_str())
        .collect();
    greetings.sort_unstable();
    assert_eq!(greetings, ["hello, ann\n", "hello, bob\n", "hello, cy\n"]);
    // The shell-command job printed the greeting the custom job set at create time.
    let mut echoed: Vec<&str> = logs
        .iter()
        .filter(|l| l.name == "echo")
        .map(|l| l.stdout.as_str())
        .collect();
    echoed.sort_unstable();
    assert_eq!(echoed, ["hello, ann\n", "hello, bob\n", "hello, cy\n"]);
    assert!(
        logs.iter()
            .all(|l| l.r#try == 1 && l.state == State::Complete)
    );
}

#[test]
fn the_custom_binary_knows_the_custom_type() {
    let registry = custom_job::registry();
    let types: Vec<&str> = registry.types().collect();
    assert_eq!(
        types,
        [
            "approval",
            "greet",
            "noop",
            "shell-args",
            "shell-command",
            "sleep"
        ]
    );
    assert_eq!(registry.required_args("greet"), ["name"]);
}

/// The example's specs lint clean, job types included, with its own binary (which knows
/// `greet`).
#[test]
fn the_example_specs_lint_with_the_custom_binary_only() {
    let specs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("specs");
    let lint = |binary: &str| {
        std::process::Command::new(binary)
            .arg("lint")
            .arg(&specs)
            .output()
            .unwrap()
    };
    let custom = lint(env!("CARGO_BIN_EXE_my-spindle"));
    assert!(
        custom.status.success(),
        "{}",
        String::from_utf8_lossy(&custom.stdout)
    );
}
