//! Triggers (issue #33): another system's event (a deploy finished, an alert fired)
//! starts a request through `POST /api/v1/triggers/{name}`. A trigger is configured
//! (`triggers:` in the Request Manager's config) with the request type it starts, where
//! each arg comes from in the event's JSON (a JSON pointer, or a fixed value), how its
//! sender proves itself (an HMAC-SHA256 signature of the body, GitHub's scheme, or a
//! bearer token) and where the delivery's id is (a header or a field): a delivery sent
//! again starts nothing and is answered with the request the first one started.

use std::collections::BTreeMap;

use axum::http::HeaderMap;
use hmac::{Hmac, Mac as _};
use proto::JobArgs;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Sha256;
use subtle::ConstantTimeEq as _;

use crate::Error;
use crate::secrets::Secret;
pub use crate::secrets::SecretSource;

/// The header a trigger reads the delivery id from unless configured otherwise.
pub const DEFAULT_DELIVERY_HEADER: &str = "X-Spindle-Delivery";
/// The header that carries an HMAC trigger's signature unless configured otherwise.
pub const DEFAULT_SIGNATURE_HEADER: &str = "X-Spindle-Signature-256";
/// The longest delivery id kept.
const MAX_DELIVERY_ID: usize = 255;

/// One entry of the config's `triggers:` list.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerConfig {
    /// Its name, the last segment of its URL.
    pub name: String,
    /// The request type it starts.
    pub request: String,
    /// Each arg of the request: a JSON pointer into the event (`/release/tag`), or
    /// `=VALUE` for a fixed value.
    #[serde(default)]
    pub args: BTreeMap<String, String>,
    /// Where the delivery id is: `header NAME` (default `header X-Spindle-Delivery`) or a
    /// JSON pointer into the event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<String>,
    /// The shared secret of an HMAC-SHA256 signature of the body (`sha256=HEX` in
    /// `signature_header`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hmac_secret: Option<SecretSource>,
    /// The signature's header (default `X-Spindle-Signature-256`; GitHub's is
    /// `X-Hub-Signature-256`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature_header: Option<String>,
    /// A bearer token the sender presents (`Authorization: Bearer TOKEN`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<SecretSource>,
    /// Who the requests it starts are by (default `trigger:NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// How a trigger's sender proves itself.
#[derive(Debug, Clone)]
enum Proof {
    Hmac { secret: Secret, header: String },
    Token(Secret),
}

/// Where a delivery's id is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum DeliveryFrom {
    Header(String),
    Pointer(String),
}

/// A trigger ready to accept deliveries: its config checked, its secret read.
#[derive(Debug, Clone)]
pub struct Trigger {
    pub name: String,
    pub request: String,
    args: BTreeMap<String, String>,
    delivery: DeliveryFrom,
    proof: Proof,
    user: String,
}

fn check_pointer(what: &str, pointer: &str) -> Result<(), String> {
    if pointer.starts_with('/') {
        Ok(())
    } else {
        Err(format!(
            "{what}: {pointer:?} is not a JSON pointer; expected one such as /release/tag (or =VALUE for a fixed value)"
        ))
    }
}

impl Trigger {
    /// Checks `config` and reads its secret; the error names the trigger and the field.
    pub fn load(config: &TriggerConfig) -> Result<Trigger, crate::ConfigError> {
        let name = &config.name;
        // It ends the trigger's URL.
        crate::ConfigError::check_name("triggers", "trigger", name)?;
        let what = |field: &str| format!("triggers: {name}: {field}");
        if config.request.is_empty() {
            return Err(crate::ConfigError::Invalid(format!(
                "{}: expected the request type it starts",
                what("request")
            )));
        }
        for (arg, from) in &config.args {
            if !from.starts_with('=') {
                check_pointer(&what(&format!("args: {arg}")), from)?;
            }
        }
        let delivery = match config.delivery.as_deref() {
            None => DeliveryFrom::Header(DEFAULT_DELIVERY_HEADER.to_owned()),
            Some(text) => match text.strip_prefix("header ") {
                Some(header) if axum::http::HeaderName::try_from(header.trim()).is_ok() => {
                    DeliveryFrom::Header(header.trim().to_owned())
                }
                Some(header) => {
                    return Err(crate::ConfigError::Invalid(format!(
                        "{}: {header:?} is not a header name",
                        what("delivery")
                    )));
                }
                None => {
                    check_pointer(&what("delivery"), text).map_err(|_| {
                        format!(
                            "{}: {text:?}; expected `header NAME` or a JSON pointer such as /id",
                            what("delivery")
                        )
                    })?;
                    DeliveryFrom::Pointer(text.to_owned())
                }
            },
        };
        let proof = match (&config.hmac_secret, &config.token) {
            (Some(source), None) => {
                let header = config
                    .signature_header
                    .clone()
                    .unwrap_or_else(|| DEFAULT_SIGNATURE_HEADER.to_owned());
                if axum::http::HeaderName::try_from(header.as_str()).is_err() {
                    return Err(crate::ConfigError::Invalid(format!(
                        "{}: {header:?} is not a header name",
                        what("signature_header")
                    )));
                }
                Proof::Hmac {
                    secret: crate::secrets::read(source, &what("hmac_secret"))?,
                    header,
                }
            }
            (None, Some(source)) => {
                if config.signature_header.is_some() {
                    return Err(crate::ConfigError::Invalid(format!(
                        "{}: only an HMAC trigger (hmac_secret) has a signature header",
                        what("signature_header")
                    )));
                }
                Proof::Token(crate::secrets::read(source, &what("token"))?)
            }
            _ => {
                return Err(crate::ConfigError::Invalid(format!(
                    "triggers: {name}: expected exactly one of `hmac_secret:` and `token:`, how its sender proves itself"
                )));
            }
        };
        Ok(Trigger {
            name: name.clone(),
            request: config.request.clone(),
            args: config.args.clone(),
            delivery,
            proof,
            user: config
                .user
                .clone()
                .unwrap_or_else(|| format!("trigger:{name}")),
        })
    }

    /// Who the requests it starts are by.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// Checks that the delivery comes from the trigger's sender: its signature of `body`,
    /// or its token (401 otherwise, saying what was expected; never the secret).
    pub fn verify(&self, headers: &HeaderMap, body: &[u8]) -> Result<(), Error> {
        let name = &self.name;
        match &self.proof {
            Proof::Hmac { secret, header } => {
                let given = headers
                    .get(header.as_str())
                    .and_then(|value| value.to_str().ok())
                    .ok_or_else(|| {
                        Error::Unauthorized(format!(
                            "trigger {name}: header {header} is missing; expected sha256=HEX, the HMAC-SHA256 of the body with the trigger's secret"
                        ))
                    })?;
                let signature = given
                    .strip_prefix("sha256=")
                    .and_then(|hex| hex::decode(hex.trim()).ok())
                    .ok_or_else(|| {
                        Error::Unauthorized(format!(
                            "trigger {name}: header {header} is not sha256=HEX"
                        ))
                    })?;
                let mut mac =
                    Hmac::<Sha256>::new_from_slice(&secret.0).map_err(|err| Error::Internal {
                        message: format!("trigger {name}: its secret cannot key an HMAC"),
                        source: Some(Box::new(err)),
                    })?;
                mac.update(body);
                mac.verify_slice(&signature).map_err(|_| {
                    Error::Unauthorized(format!(
                        "trigger {name}: the signature in {header} does not match the body; expected the HMAC-SHA256 of the body with the trigger's secret"
                    ))
                })
            }
            Proof::Token(token) => {
                let given = headers
                    .get(axum::http::header::AUTHORIZATION)
                    .and_then(|value| value.to_str().ok())
                    .and_then(|value| value.strip_prefix("Bearer "))
                    .ok_or_else(|| {
                        Error::Unauthorized(format!(
                            "trigger {name}: expected its token as Authorization: Bearer TOKEN"
                        ))
                    })?;
                if bool::from(given.trim().as_bytes().ct_eq(&token.0)) {
                    Ok(())
                } else {
                    Err(Error::Unauthorized(format!(
                        "trigger {name}: the token is not the trigger's"
                    )))
                }
            }
        }
    }

    /// The delivery's id (400 when it has none).
    pub fn delivery_id(&self, headers: &HeaderMap, event: &Value) -> Result<String, Error> {
        let name = &self.name;
        let id = match &self.delivery {
            DeliveryFrom::Header(header) => headers
                .get(header.as_str())
                .and_then(|value| value.to_str().ok())
                .map(|id| id.trim().to_owned())
                .ok_or_else(|| {
                    Error::BadRequest(format!(
                        "trigger {name}: header {header} is missing; expected the delivery's id, so that a delivery sent again starts nothing"
                    ))
                })?,
            DeliveryFrom::Pointer(pointer) => match event.pointer(pointer) {
                Some(Value::String(id)) => id.clone(),
                Some(Value::Number(id)) => id.to_string(),
                _ => {
                    return Err(Error::BadRequest(format!(
                        "trigger {name}: the event has no {pointer}; expected the delivery's id there (a string or a number)"
                    )));
                }
            },
        };
        if id.is_empty() || id.len() > MAX_DELIVERY_ID {
            return Err(Error::BadRequest(format!(
                "trigger {name}: the delivery id is {} characters; expected 1 to {MAX_DELIVERY_ID}",
                id.len()
            )));
        }
        Ok(id)
    }

    /// The request's args from the event (400 naming the first arg whose field is not
    /// there).
    pub fn args(&self, event: &Value) -> Result<JobArgs, Error> {
        let mut args = serde_json::Map::new();
        for (arg, from) in &self.args {
            let value = match from.strip_prefix('=') {
                Some(fixed) => Value::String(fixed.to_owned()),
                None => match event.pointer(from) {
                    Some(Value::Null) | None => {
                        return Err(Error::BadRequest(format!(
                            "trigger {}: the event has no {from} (for arg {arg})",
                            self.name
                        )));
                    }
                    Some(value) => value.clone(),
                },
            };
            args.insert(arg.clone(), value);
        }
        Ok(args.into())
    }

    /// How `GET /api/v1/triggers` shows it.
    pub fn status(&self, deliveries: Vec<proto::TriggerDelivery>) -> proto::TriggerStatus {
        proto::TriggerStatus {
            name: self.name.clone(),
            request: self.request.clone(),
            args: self.args.clone(),
            auth: match self.proof {
                Proof::Hmac { .. } => "hmac".to_owned(),
                Proof::Token(_) => "token".to_owned(),
            },
            delivery: match &self.delivery {
                DeliveryFrom::Header(header) => format!("header {header}"),
                DeliveryFrom::Pointer(pointer) => pointer.clone(),
            },
            deliveries,
        }
    }
}

#[cfg(test)]
mod tests;
