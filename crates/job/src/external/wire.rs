//! The job protocol's messages (docs/job-protocol.md): what Spindle writes on a job
//! program's stdin, and how the lines the program writes on its protocol descriptor are
//! read.

use base64::Engine as _;
use proto::{JobArgs, State};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The version of the job protocol this Spindle speaks.
pub const PROTOCOL: u32 = 1;

/// The descriptor a job program writes its messages on (`SPINDLE_JOB_FD`).
pub(crate) const PROTOCOL_FD: i32 = 3;

/// Which job a call is about, as Spin Cycle's `job.Id` holds it.
#[derive(Debug, Serialize)]
pub(crate) struct JobRef<'a> {
    #[serde(rename = "type")]
    pub(crate) job_type: &'a str,
    pub(crate) name: &'a str,
    pub(crate) id: &'a str,
    pub(crate) request_id: &'a str,
}

/// The one document on a program's stdin.
#[derive(Debug, Serialize)]
#[serde(tag = "call", rename_all = "lowercase")]
pub(crate) enum Call<'a> {
    Describe {
        protocol: u32,
    },
    Create {
        protocol: u32,
        job: JobRef<'a>,
        args: &'a JobArgs,
        sets: &'a [String],
    },
    Run {
        protocol: u32,
        job: JobRef<'a>,
        /// The job's serialized bytes, base64.
        bytes: String,
        args: &'a JobArgs,
        data: &'a JobArgs,
    },
}

impl Call<'_> {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Call::Describe { .. } => "describe",
            Call::Create { .. } => "create",
            Call::Run { .. } => "run",
        }
    }
}

/// A job type as a program describes it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TypeInfo {
    #[serde(rename = "type")]
    pub job_type: String,
    /// Job args a node of this type must pass (the linter checks them).
    #[serde(default)]
    pub required: Vec<String>,
    /// Job args it also reads (documentation only).
    #[serde(default)]
    pub optional: Vec<String>,
}

/// One line a program wrote on its protocol descriptor.
#[derive(Debug, PartialEq)]
pub(crate) enum Line {
    /// `{"status": "..."}`: the job's status line now.
    Status(String),
    /// The last line: `{"protocol": 1, ...}`, the call's answer.
    Answer(serde_json::Map<String, Value>),
}

/// Characters of a bad line quoted in an error.
const QUOTED: usize = 200;

fn quoted(line: &str) -> String {
    let mut text: String = line.chars().take(QUOTED).collect();
    if text.len() < line.len() {
        text.push('…');
    }
    format!("{text:?}")
}

/// Reads one line; the error says what was wrong and what protocol 1 expects.
pub(crate) fn line(text: &str) -> Result<Line, String> {
    let object = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(object)) => object,
        Ok(_) | Err(_) => {
            return Err(format!(
                "wrote {} on its protocol descriptor; expected one JSON object a line ({{\"status\": ...}} or the answer with \"protocol\": {PROTOCOL})",
                quoted(text)
            ));
        }
    };
    if let Some(version) = object.get("protocol") {
        return match version.as_u64() {
            Some(v) if v == u64::from(PROTOCOL) => Ok(Line::Answer(object)),
            _ => Err(format!(
                "speaks job protocol {version}; this Spindle speaks protocol {PROTOCOL}{}",
                match object.get("error").and_then(Value::as_str) {
                    Some(said) => format!(" (it said: {said})"),
                    None => String::new(),
                }
            )),
        };
    }
    match (object.len(), object.get("status")) {
        (1, Some(Value::String(status))) => Ok(Line::Status(status.clone())),
        _ => Err(format!(
            "wrote {}; expected {{\"status\": \"TEXT\"}} or the answer with \"protocol\": {PROTOCOL}",
            quoted(text)
        )),
    }
}

/// The `error` an answer carries, if any (the call failed in the program).
pub(crate) fn error_of(answer: &serde_json::Map<String, Value>) -> Option<String> {
    match answer.get("error") {
        Some(Value::String(error)) if !error.is_empty() => Some(error.clone()),
        _ => None,
    }
}

fn field_error(call: &str, field: &str, expected: &str, found: &Value) -> String {
    format!("its {call} answer has \"{field}\": {found}; expected {expected}")
}

/// A describe answer's types.
pub(crate) fn types(answer: &serde_json::Map<String, Value>) -> Result<Vec<TypeInfo>, String> {
    let Some(types) = answer.get("types") else {
        return Err("its describe answer has no \"types\"; expected a list of {\"type\": NAME, \"required\": [ARG, ...]}".to_owned());
    };
    serde_json::from_value(types.clone()).map_err(|err| {
        format!("its describe answer's \"types\" is not a list of {{\"type\": NAME, \"required\": [ARG, ...]}}: {err}")
    })
}

/// A create answer: the job's args after its create step (absent: unchanged) and its
/// serialized bytes.
pub(crate) fn created(
    answer: &serde_json::Map<String, Value>,
) -> Result<(Option<JobArgs>, Vec<u8>), String> {
    let args = match answer.get("args") {
        None | Some(Value::Null) => None,
        Some(Value::Object(args)) => Some(
            args.iter()
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect(),
        ),
        Some(other) => return Err(field_error("create", "args", "an object", other)),
    };
    let bytes = bytes_of("create", answer.get("bytes"))?;
    Ok((args, bytes))
}

fn bytes_of(call: &str, value: Option<&Value>) -> Result<Vec<u8>, String> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(text)) => base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|err| format!("its {call} answer's \"bytes\" is not base64: {err}")),
        Some(other) => Err(field_error(call, "bytes", "a base64 string", other)),
    }
}

pub(crate) fn encode(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A run answer: the try's end and the job data after it (absent: unchanged).
#[derive(Debug, PartialEq)]
pub(crate) struct Ran {
    pub(crate) state: State,
    pub(crate) exit: i64,
    pub(crate) error: String,
    pub(crate) data: Option<JobArgs>,
}

pub(crate) fn ran(answer: &serde_json::Map<String, Value>) -> Result<Ran, String> {
    let expected_state = "a state name such as \"COMPLETE\", \"FAIL\" or \"STOPPED\"";
    // As Spin Cycle's runner takes it: any state but COMPLETE and STOPPED is a failed try.
    let state = match answer.get("state") {
        Some(Value::String(name)) => name.parse::<State>().map_err(|_| {
            format!("its run answer has \"state\": {name:?}; expected {expected_state}")
        })?,
        Some(other) => return Err(field_error("run", "state", expected_state, other)),
        None => {
            return Err(format!(
                "its run answer has no \"state\"; expected {expected_state}"
            ));
        }
    };
    let exit = match answer.get("exit") {
        None | Some(Value::Null) => 0,
        Some(value) => value
            .as_i64()
            .ok_or_else(|| field_error("run", "exit", "a whole number", value))?,
    };
    let data = match answer.get("data") {
        None | Some(Value::Null) => None,
        Some(Value::Object(data)) => Some(
            data.iter()
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect(),
        ),
        Some(other) => return Err(field_error("run", "data", "an object", other)),
    };
    Ok(Ran {
        state,
        exit,
        error: error_of(answer).unwrap_or_default(),
        data,
    })
}
