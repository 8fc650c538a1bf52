//! Test support for the services' OpenAPI documents ([`proto::openapi`]): the routes a
//! router's source registers, and a check that a response fits the document. The
//! services' tests use both, so that a route or a response shape the document does not
//! describe fails a test.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;

/// The (METHOD, path) pairs that `source` (a file that builds an axum `Router`) registers
/// with `.route("PATH", get(..).post(..))`, sorted.
pub fn routes(source: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find(".route(") {
        rest = &rest[at + ".route(".len()..];
        let Some(open) = rest.find('"') else { break };
        let Some(len) = rest[open + 1..].find('"') else {
            break;
        };
        let path = &rest[open + 1..open + 1 + len];
        // The method router: up to the parenthesis that closes `.route(`.
        let mut depth = 1usize;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let methods = &rest[open + 1 + len..end];
        for method in ["get", "post", "put", "delete", "patch"] {
            let mut text = methods;
            while let Some(i) = text.find(&format!("{method}(")) {
                let before = text[..i].chars().next_back();
                if before.is_none_or(|c| !(c.is_alphanumeric() || c == '_')) {
                    found.push((
                        method.to_ascii_uppercase(),
                        path.replace("{job_id}", "{jobId}"),
                    ));
                    break;
                }
                text = &text[i + 1..];
            }
        }
        rest = &rest[end..];
    }
    found.sort();
    found.dedup();
    found
}

/// Checks that the routes `source` registers are exactly the operations of `document`
/// (the OpenAPI document as JSON text), naming what is missing on either side.
pub fn check_routes(source: &str, document: &str) -> Result<(), String> {
    let document: Value =
        serde_json::from_str(document).map_err(|err| format!("the document is not JSON: {err}"))?;
    let routed = routes(source);
    let documented = proto::openapi::operations(&document);
    let missing = |from: &[(String, String)], to: &[(String, String)]| -> Vec<String> {
        from.iter()
            .filter(|op| !to.contains(op))
            .map(|(method, path)| format!("{method} {path}"))
            .collect()
    };
    let undocumented = missing(&routed, &documented);
    let unrouted = missing(&documented, &routed);
    if undocumented.is_empty() && unrouted.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "routed but not documented: [{}]; documented but not routed: [{}]",
            undocumented.join(", "),
            unrouted.join(", ")
        ))
    }
}

/// A test's view of a response's body — JSON, a string for a text body, null for none —
/// after checking it against `document` ([`check_response`]); panics, with why, where it
/// does not fit.
pub fn checked_body(document: &str, method: &str, uri: &str, status: u16, bytes: &[u8]) -> Value {
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(bytes)
            .unwrap_or(Value::String(String::from_utf8_lossy(bytes).into_owned()))
    };
    let document: Value = serde_json::from_str(document).expect("the document is JSON");
    if let Err(err) = check_response(&document, method, uri, status, &body) {
        panic!("{err}");
    }
    body
}

/// Checks that a response (its status and its body as JSON, a string for a text body,
/// null for none) fits what `document` says of `method` on `path`. An undocumented
/// status is an error; a documented response without a body schema is not checked. A
/// path or method the document does not have must be answered as the routers'
/// fallbacks do: 404 or 405 with an `Error` body.
pub fn check_response(
    document: &Value,
    method: &str,
    path: &str,
    status: u16,
    body: &Value,
) -> Result<(), String> {
    let path = path.split('?').next().unwrap_or_default();
    let template = proto::openapi::path_template(document, path);
    let operation = template.map(|t| &document["paths"][t][method.to_ascii_lowercase()]);
    let (Some(template), Some(operation)) = (template, operation.filter(|op| !op.is_null())) else {
        let expected = if template.is_some() { 405 } else { 404 };
        if status != expected {
            return Err(format!(
                "{method} {path} is not in the document, yet was answered {status}, not {expected}"
            ));
        }
        let mut schema = serde_json::json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$ref": "#/components/schemas/Error",
        });
        schema["components"] = document["components"].clone();
        return validate(&schema, body).map_err(|errors| {
            format!("{method} {path} {status}: the fallback's body is not an Error: {errors}")
        });
    };
    // 404 and 405 for unknown paths and methods come from the fallbacks.
    if operation["responses"].get(status.to_string()).is_none() {
        return Err(format!(
            "{method} {template}: status {status} is not documented (documented: {})",
            operation["responses"]
                .as_object()
                .map(|r| r.keys().cloned().collect::<Vec<_>>().join(", "))
                .unwrap_or_default()
        ));
    }
    let Some(schema) = proto::openapi::response_schema(document, method, path, status) else {
        return Ok(());
    };
    validate(&schema, body).map_err(|errors| {
        format!("{method} {template} {status}: the body does not fit the document: {errors}\nbody: {body}")
    })
}

/// Whether `value` fits the definition `definition` (`$defs/NAME`) of the JSON Schema
/// `document` (such as `docs/job-protocol.schema.json`); the error lists where it does not.
pub fn check_definition(document: &str, definition: &str, value: &Value) -> Result<(), String> {
    let mut schema: Value =
        serde_json::from_str(document).map_err(|err| format!("the schema is not JSON: {err}"))?;
    if schema.pointer(&format!("/$defs/{definition}")).is_none() {
        return Err(format!("the schema has no definition {definition:?}"));
    }
    schema["$ref"] = Value::String(format!("#/$defs/{definition}"));
    validate(&schema, value).map_err(|errors| format!("{value} is no {definition}: {errors}"))
}

fn validate(schema: &Value, body: &Value) -> Result<(), String> {
    let validator = validator(schema)?;
    let errors: Vec<String> = validator
        .iter_errors(body)
        .map(|err| format!("{err} at {}", err.instance_path()))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// Validators by schema text, built once per test binary.
fn validator(schema: &Value) -> Result<std::sync::Arc<jsonschema::Validator>, String> {
    static CACHE: Mutex<Option<HashMap<String, std::sync::Arc<jsonschema::Validator>>>> =
        Mutex::new(None);
    let key = schema.to_string();
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    if let Some(validator) = cache.get(&key) {
        return Ok(validator.clone());
    }
    let validator = std::sync::Arc::new(
        jsonschema::draft202012::new(schema).map_err(|err| format!("invalid schema: {err}"))?,
    );
    cache.insert(key, validator.clone());
    Ok(validator)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_read_from_router_source() {
        let source = r#"
        Router::new()
            .route("/a", post(create).get(find))
            .route(
                "/b/{id}/log/{job_id}",
                get(|| async { (header::CONTENT_TYPE, "x") }),
            )
            .route("/c", put(stop))
        "#;
        assert_eq!(
            routes(source),
            [
                ("GET".to_owned(), "/a".to_owned()),
                ("GET".to_owned(), "/b/{id}/log/{jobId}".to_owned()),
                ("POST".to_owned(), "/a".to_owned()),
                ("PUT".to_owned(), "/c".to_owned()),
            ]
        );
    }

    #[test]
    fn routes_and_documents_must_agree() {
        let source = r#".route("/version", get(version)) .route("/extra", put(x))"#;
        let err = check_routes(source, proto::openapi::JOB_RUNNER).unwrap_err();
        assert!(
            err.contains("routed but not documented: [PUT /extra]"),
            "{err}"
        );
        assert!(err.contains("POST /api/v1/job-chains"), "{err}");
    }

    #[test]
    fn a_response_that_does_not_fit_is_an_error() {
        let document: Value = serde_json::from_str(proto::openapi::REQUEST_MANAGER).unwrap();
        let error = serde_json::json!({"message": "no", "httpStatus": 404});
        assert!(check_response(&document, "GET", "/api/v1/requests/x", 404, &error).is_ok());
        let err = check_response(
            &document,
            "GET",
            "/api/v1/requests/x",
            404,
            &serde_json::json!({}),
        )
        .unwrap_err();
        assert!(err.contains("does not fit"), "{err}");
        let err = check_response(&document, "GET", "/api/v1/requests/x", 418, &error).unwrap_err();
        assert!(err.contains("status 418 is not documented"), "{err}");
        let err = check_response(&document, "GET", "/nowhere", 200, &error).unwrap_err();
        assert!(err.contains("is not in the document"), "{err}");
        assert!(check_response(&document, "GET", "/nowhere", 404, &error).is_ok());
        assert!(check_response(&document, "DELETE", "/api/v1/requests/x", 405, &error).is_ok());
        assert!(
            check_response(&document, "DELETE", "/api/v1/requests/x", 405, &Value::Null).is_err()
        );
    }
}
