//! The body of `POST /api/v1/requests`, read as Spin Cycle's decoder reads it (keys in
//! any case), with Spindle's additions (a priority, an idempotency key).

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::{JobArgs, json_kind};

/// The body of `POST /api/v1/requests`. Spin Cycle's clients send `Type`, `Args` and
/// `User` (capitalized); as in Spin Cycle, keys are matched case-insensitively on input.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct CreateRequest {
    #[serde(rename = "Type")]
    pub request_type: String,
    pub args: JobArgs,
    /// Ignored by the server, which uses the authenticated caller's name.
    pub user: String,
    /// Spindle's addition: the request's place in the queues of the locks its type
    /// declares (higher is served first; the type's `priority:` when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Spindle's addition, for clients that cannot set the `Idempotency-Key` header: a
    /// create sent again with the same key answers the request the first one created.
    #[serde(rename = "idempotencyKey", skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

impl<'de> Deserialize<'de> for CreateRequest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<CreateRequest, D::Error> {
        use serde::de::Error as _;
        let object = Option::<Map<String, Value>>::deserialize(deserializer)?.unwrap_or_default();
        let mut create_request = CreateRequest::default();
        // An exact-case key wins over a case-insensitive match, as in Go's decoder.
        let find = |name: &str| {
            object.get(name).or_else(|| {
                object
                    .iter()
                    .find(|(key, _)| key.eq_ignore_ascii_case(name))
                    .map(|(_, value)| value)
            })
        };
        match find("Type") {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => create_request.request_type = text.clone(),
            Some(other) => {
                return Err(D::Error::custom(format!(
                    "field Type: expected a string (the request type), got {}",
                    json_kind(other)
                )));
            }
        }
        match find("Args") {
            None | Some(Value::Null) => {}
            Some(Value::Object(args)) => create_request.args = args.clone().into(),
            Some(other) => {
                return Err(D::Error::custom(format!(
                    "field Args: expected an object of arg names to values, got {}",
                    json_kind(other)
                )));
            }
        }
        if let Some(Value::String(user)) = find("User") {
            create_request.user = user.clone();
        }
        match find("Priority") {
            None | Some(Value::Null) => {}
            Some(value) => {
                let priority = value.as_i64().and_then(|n| i32::try_from(n).ok());
                let Some(priority) = priority else {
                    return Err(D::Error::custom(format!(
                        "field Priority: expected a whole number from {} to {} (higher is served first in a lock's queue), got {}",
                        i32::MIN,
                        i32::MAX,
                        match value {
                            Value::Number(n) => format!("the number {n}"),
                            other => json_kind(other).to_owned(),
                        }
                    )));
                };
                create_request.priority = Some(priority);
            }
        }
        match find("idempotencyKey") {
            None | Some(Value::Null) => {}
            Some(Value::String(key)) => create_request.idempotency_key = Some(key.clone()),
            Some(other) => {
                return Err(D::Error::custom(format!(
                    "field idempotencyKey: expected a string (the same for a create sent again), got {}",
                    json_kind(other)
                )));
            }
        }
        Ok(create_request)
    }
}
