//! The HTTP APIs as OpenAPI 3.1 documents, served at `/api/v1/openapi.json` by the
//! Request Manager ([`REQUEST_MANAGER`]) and the Job Runner ([`JOB_RUNNER`]). The
//! documents are the reference for clients; the services' tests keep them true (every
//! route a router serves is in its document, and every response the tests see validates
//! against the document's schema for it).

use serde_json::Value;

/// The Request Manager's API.
pub const REQUEST_MANAGER: &str = include_str!("../openapi/rm.json");

/// The Job Runner's API.
pub const JOB_RUNNER: &str = include_str!("../openapi/jr.json");

/// The path template of `document` that a concrete path matches (`/api/v1/requests/abc`
/// matches `/api/v1/requests/{id}`); a literal segment wins over a parameter.
pub fn path_template<'d>(document: &'d Value, path: &str) -> Option<&'d str> {
    let segments: Vec<&str> = path.split('/').collect();
    let mut best: Option<(&str, usize)> = None;
    for template in document["paths"].as_object()?.keys() {
        let parts: Vec<&str> = template.split('/').collect();
        if parts.len() != segments.len() {
            continue;
        }
        let mut literal = 0;
        let matches = parts.iter().zip(&segments).all(|(part, segment)| {
            if part.starts_with('{') && part.ends_with('}') {
                !segment.is_empty()
            } else {
                literal += 1;
                part == segment
            }
        });
        if matches && best.is_none_or(|(_, most)| literal > most) {
            best = Some((template, literal));
        }
    }
    best.map(|(template, _)| template)
}

/// The schema of the response `status` of `method` on the path `path` (a concrete path),
/// as a JSON Schema document of its own: the schema, with the document's `components`
/// beside it so that its `$ref`s resolve. `None` when the document has no such
/// operation or response, or the response has no body.
pub fn response_schema(document: &Value, method: &str, path: &str, status: u16) -> Option<Value> {
    let template = path_template(document, path)?;
    let operation = &document["paths"][template][method.to_ascii_lowercase()];
    let mut response = operation["responses"].get(status.to_string())?;
    if let Some(pointer) = response.get("$ref").and_then(Value::as_str) {
        response = document.pointer(pointer.strip_prefix('#')?)?;
    }
    let content = response.get("content")?.as_object()?;
    let (_, media) = content.iter().next()?;
    let mut schema = media.get("schema")?.clone();
    let object = schema.as_object_mut()?;
    object.insert(
        "$schema".to_owned(),
        Value::String("https://json-schema.org/draft/2020-12/schema".to_owned()),
    );
    object.insert("components".to_owned(), document["components"].clone());
    Some(schema)
}

/// Every (method, path template) pair of `document`, methods upper-case, sorted.
pub fn operations(document: &Value) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = document["paths"]
        .as_object()
        .into_iter()
        .flatten()
        .flat_map(|(path, item)| {
            item.as_object()
                .into_iter()
                .flatten()
                .map(move |(method, _)| (method.to_ascii_uppercase(), path.clone()))
        })
        .collect();
    all.sort();
    all
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::{Value, json};

    use super::*;
    use crate::*;

    fn documents() -> [(&'static str, Value); 2] {
        [
            (
                "rm",
                serde_json::from_str(REQUEST_MANAGER).expect("rm.json is JSON"),
            ),
            (
                "jr",
                serde_json::from_str(JOB_RUNNER).expect("jr.json is JSON"),
            ),
        ]
    }

    /// Every `$ref` in `value`.
    fn refs<'v>(value: &'v Value, found: &mut Vec<&'v str>) {
        match value {
            Value::Object(map) => {
                for (key, inner) in map {
                    match (key.as_str(), inner) {
                        ("$ref", Value::String(target)) => found.push(target),
                        _ => refs(inner, found),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| refs(item, found)),
            _ => {}
        }
    }

    #[test]
    fn the_documents_are_openapi_3_1_and_every_reference_resolves() {
        for (name, document) in documents() {
            assert_eq!(document["openapi"], "3.1.0", "{name}");
            let mut found = Vec::new();
            refs(&document, &mut found);
            assert!(!found.is_empty());
            for target in found {
                let pointer = target.strip_prefix('#').expect("local references only");
                assert!(
                    document.pointer(pointer).is_some(),
                    "{name}: {target} resolves"
                );
            }
            for (method, path) in operations(&document) {
                let operation = &document["paths"][&path][method.to_ascii_lowercase()];
                assert!(operation["summary"].is_string(), "{name}: {method} {path}");
                assert!(
                    operation["operationId"].is_string(),
                    "{name}: {method} {path}"
                );
                // Every path parameter is declared.
                for part in path.split('/').filter(|p| p.starts_with('{')) {
                    let param = part.trim_matches(|c| c == '{' || c == '}');
                    assert!(
                        operation["parameters"].as_array().is_some_and(|ps| ps
                            .iter()
                            .any(|p| p["name"] == param && p["in"] == "path")),
                        "{name}: {method} {path} declares {param}"
                    );
                }
            }
            // Each schema is a valid JSON Schema (2020-12).
            for (schema_name, schema) in document["components"]["schemas"].as_object().unwrap() {
                let mut own = schema.clone();
                own["components"] = document["components"].clone();
                jsonschema::draft202012::new(&own)
                    .unwrap_or_else(|err| panic!("{name}: schema {schema_name}: {err}"));
            }
        }
    }

    fn check(schema_name: &str, value: &impl serde::Serialize) {
        let document: Value = serde_json::from_str(REQUEST_MANAGER).unwrap();
        let mut schema = document["components"]["schemas"][schema_name].clone();
        schema["components"] = document["components"].clone();
        let validator = jsonschema::draft202012::new(&schema).unwrap();
        let instance = serde_json::to_value(value).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&instance)
            .map(|err| format!("{} at {}", err, err.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{schema_name}: {errors:#?}\n{instance:#}"
        );
    }

    /// What the types serialize to is what the schemas say, with every optional part
    /// present and absent.
    #[test]
    fn the_wire_types_validate_against_their_schemas() {
        let job = Job {
            id: "abcd".to_owned(),
            name: "restart".to_owned(),
            job_type: "shell-command".to_owned(),
            bytes: b"{}".to_vec(),
            state: State::Complete,
            args: json!({"host": "db1"}).as_object().unwrap().clone().into(),
            data: JobArgs::new(),
            retry: 2,
            retry_wait: "1s".to_owned(),
            sequence_id: "abcd".to_owned(),
            sequence_retry: 1,
            sequence_retry_wait: "5s".to_owned(),
            parallel: 2,
            tries: 3,
            timeout: "5m".to_owned(),
            sequence_timeout: "1h".to_owned(),
            each: json!({"host": "db1"}).as_object().unwrap().clone().into(),
            locks: vec![crate::JobLock {
                name: "cluster-ops".to_owned(),
                key: "db1".to_owned(),
                limit: 1,
                when_taken: "queue".to_owned(),
                until: "efgh".to_owned(),
            }],
            releases_locks_of: "abcd".to_owned(),
            elements: Some(Box::new(crate::Elements {
                node: "restart".to_owned(),
                end: "efgh".to_owned(),
                budget: "abcd".to_owned(),
                max_failures: Some(4),
                count: 40,
                stop: true,
                wave: 2,
                waves: 4,
            })),
        };
        let chain = JobChain {
            request_id: "r".repeat(20),
            jobs: BTreeMap::from([
                ("abcd".to_owned(), job.clone()),
                ("efgh".to_owned(), Job::default()),
            ]),
            adjacency_list: BTreeMap::from([("abcd".to_owned(), vec!["efgh".to_owned()])]),
            state: State::Running,
            finished_jobs: 1,
        };
        check("Job", &job);
        check("Job", &Job::default());
        check("JobChain", &chain);
        let arg = RequestArg {
            pos: 0,
            name: "hosts".to_owned(),
            desc: "Hosts".to_owned(),
            arg_type: RequestArgType::Optional,
            given: true,
            default: json!(["a"]),
            value: json!(["a", "b"]),
            secret: true,
        };
        let request = Request {
            id: "r".repeat(20),
            request_type: "deploy".to_owned(),
            state: State::Running,
            user: "ann".to_owned(),
            args: vec![arg.clone()],
            created_at: chrono::Utc::now(),
            started_at: Some(chrono::Utc::now()),
            finished_at: None,
            job_chain: Some(chain.clone()),
            total_jobs: 2,
            finished_jobs: 1,
            own_jobs: 1,
            own_finished_jobs: 1,
            jr_url: "http://127.0.0.1:32307".to_owned(),
            error: "the request's deadline passed".to_owned(),
            paused: true,
            spec_version: "0123456789abcdef".to_owned(),
            elements: vec![crate::ElementsSummary {
                node: "restart".to_owned(),
                count: 40,
                complete: 36,
                failed: 2,
                running: 2,
                stopped: 0,
                pending: 0,
                max_failures: Some(4),
                waves: 4,
                failed_elements: vec!["web-07".to_owned(), "web-31".to_owned()],
            }],
        };
        check("Request", &request);
        check(
            "ElementStatus",
            &crate::ElementStatus {
                node: "restart".to_owned(),
                name: "web-07".to_owned(),
                wave: 2,
                state: State::Fail,
                tries: 3,
                started_at: 1,
                finished_at: 2,
                jobs: vec!["abcd".to_owned()],
                job: "abcd".to_owned(),
            },
        );
        check(
            "Request",
            &Request {
                args: Vec::new(),
                job_chain: None,
                jr_url: String::new(),
                started_at: None,
                ..request.clone()
            },
        );
        check(
            "RequestSpec",
            &RequestSpec {
                name: "deploy".to_owned(),
                args: vec![arg],
            },
        );
        let log = JobLog {
            request_id: "r".repeat(20),
            job_id: "abcd".to_owned(),
            r#try: 1,
            state: State::Fail,
            exit: -1,
            ..JobLog::default()
        };
        check("JobLog", &log);
        let status = JobStatus {
            request_id: "r".repeat(20),
            job_id: "abcd".to_owned(),
            status: "sleeping".to_owned(),
            each: job.each.clone(),
            ..JobStatus::default()
        };
        check("JobStatus", &status);
        check("JobStatus", &JobStatus::default());
        check(
            "RunningStatus",
            &RunningStatus {
                jobs: vec![status],
                requests: BTreeMap::from([("r".repeat(20), request)]),
            },
        );
        check(
            "SuspendedJobChain",
            &SuspendedJobChain {
                request_id: "r".repeat(20),
                job_chain: chain,
                total_job_tries: BTreeMap::from([("abcd".to_owned(), 2)]),
                latest_run_job_tries: BTreeMap::new(),
                sequence_tries: BTreeMap::new(),
            },
        );
        check(
            "FinishRequest",
            &FinishRequest {
                request_id: String::new(),
                state: State::Complete,
                finished_at: chrono::Utc::now(),
                finished_jobs: 2,
                error: String::new(),
                job_logs: Vec::new(),
            },
        );
        check("RequestProgress", &RequestProgress::default());
        let chunk = OutputChunk {
            seq: 0,
            request_id: "r".repeat(20),
            job_id: "abcd".to_owned(),
            r#try: 1,
            stream: Stream::Stderr,
            offset: 7,
            data: "oops\n".to_owned(),
        };
        check("OutputChunk", &chunk);
        check(
            "OutputPage",
            &OutputPage {
                chunks: vec![OutputChunk { seq: 4, ..chunk }],
                next: 4,
                state: State::Running,
            },
        );
        check("Error", &Error::new(404, "no request"));
        let take = crate::TakeJobLocks {
            job_id: "abcd".to_owned(),
            locks: job.locks.clone(),
            asked_since: 1_796_371_582_791_608_571,
        };
        check("TakeJobLocks", &take);
        check("JobLocksTaken", &crate::JobLocksTaken::default());
        let waiting = crate::JobLocksTaken {
            granted: false,
            waiting: "waiting for lock ssh (20 of 20 held)".to_owned(),
        };
        check("JobLocksTaken", &waiting);
        let item = |outcome, message: &str, http_status| crate::BulkItem {
            id: "r".repeat(20),
            request_type: "deploy".to_owned(),
            state: State::Running,
            user: "ann".to_owned(),
            outcome,
            message: message.to_owned(),
            http_status,
        };
        check(
            "BulkReport",
            &crate::BulkReport {
                action: crate::BulkAction::Stop,
                dry_run: false,
                requests: vec![
                    item(crate::BulkOutcome::Done, "", None),
                    item(crate::BulkOutcome::Refused, "denied", Some(403)),
                ],
            },
        );
        let delivery = crate::TriggerDelivery {
            trigger: "deploys".to_owned(),
            delivery_id: "72d3162e".to_owned(),
            request_id: "r".repeat(20),
            received_at: chrono::Utc::now(),
        };
        check("TriggerDelivery", &delivery);
        check(
            "TriggerStatus",
            &crate::TriggerStatus {
                name: "deploys".to_owned(),
                request: "restart-fleet".to_owned(),
                args: [("cluster".to_owned(), "/repository/name".to_owned())].into(),
                auth: "hmac".to_owned(),
                delivery: "header X-GitHub-Delivery".to_owned(),
                deliveries: vec![delivery],
            },
        );
        check(
            "TriggerAccepted",
            &crate::TriggerAccepted {
                id: "r".repeat(20),
                trigger: "deploys".to_owned(),
                delivery_id: "72d3162e".to_owned(),
                duplicate: true,
            },
        );
        let notified = crate::NotifiedRequest {
            id: "r".repeat(20),
            request_type: "deploy".to_owned(),
            user: "ann".to_owned(),
            state: State::Fail.to_string(),
            error: "job restart failed".to_owned(),
            created_at: chrono::Utc::now(),
            finished_at: Some(chrono::Utc::now()),
            total_jobs: 3,
            finished_jobs: 1,
        };
        check("NotifiedRequest", &notified);
        check(
            "NotificationPayload",
            &crate::NotificationPayload {
                event: "failed".to_owned(),
                delivery_id: "0123abcd".to_owned(),
                at: chrono::Utc::now(),
                request_id: Some("r".repeat(20)),
                request: Some(notified),
                job_id: None,
                runner: None,
                url: Some("https://spindle.example.com/requests/r".to_owned()),
            },
        );
        check(
            "Notification",
            &crate::Notification {
                delivery_id: "0123abcd".to_owned(),
                webhook: "chat".to_owned(),
                event: "failed".to_owned(),
                request_id: "r".repeat(20),
                subject: String::new(),
                status: "pending".to_owned(),
                attempts: 2,
                created_at: chrono::Utc::now(),
                next_at: Some(chrono::Utc::now()),
                done_at: None,
                last_error: "POST https://hooks.example.com/ answered 500".to_owned(),
            },
        );
        let claimant = crate::LockClaimant {
            request_id: "r".repeat(20),
            job_id: "abcd".to_owned(),
            request_type: "deploy".to_owned(),
            user: "ann".to_owned(),
            priority: 0,
            queued_at: chrono::Utc::now(),
            held_since: Some(chrono::Utc::now()),
        };
        check("LockClaimant", &claimant);
        check(
            "AuditEvent",
            &AuditEvent {
                at: chrono::Utc::now(),
                action: "stop".to_owned(),
                user: "ann".to_owned(),
                address: "10.0.0.5".to_owned(),
            },
        );
    }

    #[test]
    fn a_schema_that_does_not_fit_fails() {
        // The check above can fail: a state that is not a state, a missing key.
        let document: Value = serde_json::from_str(REQUEST_MANAGER).unwrap();
        let mut schema = document["components"]["schemas"]["JobLog"].clone();
        schema["components"] = document["components"].clone();
        let validator = jsonschema::draft202012::new(&schema).unwrap();
        let mut log = serde_json::to_value(JobLog::default()).unwrap();
        assert!(validator.is_valid(&log));
        log["state"] = json!(9);
        assert!(!validator.is_valid(&log));
        log.as_object_mut().unwrap().remove("stdout");
        log["state"] = json!(3);
        assert!(!validator.is_valid(&log));
    }

    #[test]
    fn paths_match_their_templates_and_responses_have_schemas() {
        let document: Value = serde_json::from_str(REQUEST_MANAGER).unwrap();
        assert_eq!(
            path_template(&document, "/api/v1/requests/abc"),
            Some("/api/v1/requests/{id}")
        );
        assert_eq!(
            path_template(&document, "/api/v1/requests/abc/log/abcd"),
            Some("/api/v1/requests/{id}/log/{jobId}")
        );
        assert_eq!(
            path_template(&document, "/api/v1/request-list"),
            Some("/api/v1/request-list")
        );
        assert_eq!(path_template(&document, "/nope"), None);
        let schema = response_schema(&document, "GET", "/api/v1/requests/x", 404).unwrap();
        assert_eq!(schema["$ref"], "#/components/schemas/Error");
        assert!(response_schema(&document, "PUT", "/api/v1/requests/x/stop", 200).is_none());
    }
}
