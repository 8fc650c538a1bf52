//! The job protocol's JSON Schema (`docs/job-protocol.schema.json`) and the Rust side
//! agree: every call Spindle writes fits it, and the lines Spindle's reader takes are the
//! lines the schema allows (the kits are held to the same schema by the binary's tests).

use serde_json::{Value, json};

use super::wire::{self, Call, JobRef, Line};

const SCHEMA: &str = include_str!("../../../../docs/job-protocol.schema.json");

fn fits(definition: &str, value: &Value) -> bool {
    openapi_check::check_definition(SCHEMA, definition, value).is_ok()
}

#[test]
fn every_call_spindle_writes_fits_the_schema() {
    let args: proto::JobArgs = json!({"cluster": "orders", "hosts": ["a", "b"]})
        .as_object()
        .unwrap()
        .clone()
        .into();
    let data: proto::JobArgs = json!({"lease": "l-1"}).as_object().unwrap().clone().into();
    let job = || JobRef {
        job_type: "lookup-primary",
        name: "lookup",
        id: "a1Bc",
        request_id: "d0k3",
    };
    let sets = ["primary".to_owned()];
    let calls = [
        (
            "describeCall",
            Call::Describe {
                protocol: wire::PROTOCOL,
            },
        ),
        (
            "createCall",
            Call::Create {
                protocol: wire::PROTOCOL,
                job: job(),
                args: &args,
                sets: &sets,
            },
        ),
        (
            "runCall",
            Call::Run {
                protocol: wire::PROTOCOL,
                job: job(),
                bytes: wire::encode(b"{\"primary\":\"orders-db1\"}"),
                args: &args,
                data: &data,
            },
        ),
    ];
    for (definition, call) in calls {
        let value = serde_json::to_value(&call).unwrap();
        openapi_check::check_definition(SCHEMA, definition, &value).unwrap();
        openapi_check::check_definition(SCHEMA, "call", &value).unwrap();
    }
    // The schema can fail: a call with a field Spindle does not write.
    assert!(!fits(
        "call",
        &json!({"call": "describe", "protocol": 1, "extra": true})
    ));
}

/// What Spindle's reader makes of a line a program wrote for `call`: whether it takes it
/// as a status line or as a good answer.
fn reader_takes(call: &str, text: &str) -> (bool, bool) {
    match wire::line(text) {
        Ok(Line::Status(_)) => (true, false),
        Ok(Line::Answer(answer)) => {
            let failed = wire::error_of(&answer).is_some();
            let good = match call {
                "describe" => failed || wire::types(&answer).is_ok(),
                "create" => failed || wire::created(&answer).is_ok(),
                _ => wire::ran(&answer).is_ok(),
            };
            (false, good)
        }
        Err(_) => (false, false),
    }
}

#[test]
fn the_lines_spindle_reads_are_the_lines_the_schema_allows() {
    let lines = [
        ("run", r#"{"status": "copying 3 of 7"}"#),
        ("run", r#"{"status": 7}"#),
        ("run", r#"{"status": "x", "also": 1}"#),
        ("run", r#"["not", "an", "object"]"#),
        (
            "describe",
            r#"{"protocol": 1, "types": [{"type": "a", "required": ["x"], "optional": []}]}"#,
        ),
        ("describe", r#"{"protocol": 1, "types": [{"type": "a"}]}"#),
        (
            "describe",
            r#"{"protocol": 1, "types": [{"type": "a", "requires": ["x"]}]}"#,
        ),
        ("describe", r#"{"protocol": 1, "types": "a"}"#),
        ("describe", r#"{"protocol": 1}"#),
        (
            "describe",
            r#"{"protocol": 1, "error": "cannot list them"}"#,
        ),
        ("describe", r#"{"protocol": 2, "types": []}"#),
        (
            "create",
            r#"{"protocol": 1, "args": {"primary": "db1"}, "bytes": "eyJhIjoxfQ=="}"#,
        ),
        ("create", r#"{"protocol": 1}"#),
        ("create", r#"{"protocol": 1, "args": null, "bytes": null}"#),
        ("create", r#"{"protocol": 1, "args": [1], "bytes": ""}"#),
        ("create", r#"{"protocol": 1, "bytes": 7}"#),
        (
            "create",
            r#"{"protocol": 1, "error": "cluster job arg is not set"}"#,
        ),
        (
            "run",
            r#"{"protocol": 1, "state": "COMPLETE", "exit": 0, "error": "", "data": {"a": 1}}"#,
        ),
        (
            "run",
            r#"{"protocol": 1, "state": "FAIL", "exit": 3, "error": "exit status 3"}"#,
        ),
        (
            "run",
            r#"{"protocol": 1, "state": "STOPPED", "data": null}"#,
        ),
        ("run", r#"{"protocol": 1, "state": "DONE"}"#),
        ("run", r#"{"protocol": 1, "state": 3}"#),
        ("run", r#"{"protocol": 1, "exit": 0}"#),
        (
            "run",
            r#"{"protocol": 1, "state": "COMPLETE", "exit": "0"}"#,
        ),
        (
            "run",
            r#"{"protocol": 1, "state": "COMPLETE", "data": [1]}"#,
        ),
    ];
    for (call, text) in lines {
        let value: Value = serde_json::from_str(text).unwrap();
        let schema = (
            fits("statusLine", &value),
            fits(&format!("{call}Answer"), &value),
        );
        assert_eq!(
            reader_takes(call, text),
            schema,
            "{call}: {text}: (status line, good answer) by Spindle's reader and by the schema"
        );
    }
}
