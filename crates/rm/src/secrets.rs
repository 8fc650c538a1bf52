//! Secrets the Request Manager's config names (a trigger's, a webhook's): read at start
//! from a file or an environment variable, never written in the config itself, never
//! shown (`****`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use auth::SecretSource;

/// A secret's bytes; shown as `****`.
#[derive(Clone)]
pub(crate) struct Secret(pub(crate) Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("****")
    }
}

/// Reads `source` (see [`SecretSource::read`]) as a [`Secret`].
pub(crate) fn read(source: &SecretSource, what: &str) -> Result<Secret, auth::SecretError> {
    source.read(what).map(|text| Secret(text.into_bytes()))
}

/// The config's `secrets:` (issue #33): the keys secret args are encrypted with, and the
/// values a create may name instead of giving.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretsConfig {
    /// The first encrypts; every one decrypts (rotation: put a new key first, keep the
    /// old ones until the requests sealed with them are gone).
    #[serde(default)]
    pub keys: Vec<KeyConfig>,
    /// Values on the Request Manager a create may name (`{"secret": "NAME"}`) instead of
    /// giving the value.
    #[serde(default)]
    pub sources: std::collections::BTreeMap<String, SourceConfig>,
}

/// One key of `secrets.keys`: 32 bytes, base64 (`openssl rand -base64 32`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyConfig {
    /// Its name, kept with each value it seals.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
}

/// One source of `secrets.sources`: exactly one of an environment variable, a file or a
/// command's output (argv, no shell), read on the Request Manager at each create.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Only requests of these types may name it (default: any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<String>,
}

/// Secret args' keys and sources, checked.
#[derive(Clone, Default)]
pub struct SecretArgs {
    keys: Vec<(String, aes_gcm::Aes256Gcm)>,
    sources: std::collections::BTreeMap<String, SourceConfig>,
}

impl std::fmt::Debug for SecretArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretArgs")
            .field(
                "keys",
                &self.keys.iter().map(|(id, _)| id).collect::<Vec<_>>(),
            )
            .field("sources", &self.sources.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The version tag of a sealed value: `v1:KEY_ID:BASE64(nonce ‖ ciphertext ‖ tag)`.
const SEALED_V1: &str = "v1";

impl SecretArgs {
    /// Reads the keys and checks the sources; an error names the key or source.
    pub fn load(config: &SecretsConfig) -> Result<SecretArgs, crate::ConfigError> {
        use aes_gcm::KeyInit as _;
        use base64::Engine as _;
        let mut keys = Vec::new();
        for key in &config.keys {
            let what = format!("secrets.keys: {}", key.id);
            if key.id.is_empty() || key.id.contains(':') {
                return Err(crate::ConfigError::Invalid(format!(
                    "secrets.keys: id {:?}; expected a name without `:`",
                    key.id
                )));
            }
            if keys.iter().any(|(id, _)| id == &key.id) {
                return Err(crate::ConfigError::Invalid(format!(
                    "{what}: configured twice; expected each id once"
                )));
            }
            let text = SecretSource {
                file: key.file.clone(),
                env: key.env.clone(),
            }
            .read(&what)?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(&text)
                .ok()
                .filter(|bytes| bytes.len() == 32)
                .ok_or_else(|| {
                    format!("{what}: not 32 bytes in base64; expected a key such as `openssl rand -base64 32` prints")
                })?;
            let cipher = aes_gcm::Aes256Gcm::new_from_slice(&bytes)
                .map_err(|_| format!("{what}: not a 256-bit key"))?;
            keys.push((key.id.clone(), cipher));
        }
        for (name, source) in &config.sources {
            let given = [
                source.env.is_some(),
                source.file.is_some(),
                source.command.is_some(),
            ];
            if given.iter().filter(|given| **given).count() != 1 {
                return Err(crate::ConfigError::Invalid(format!(
                    "secrets.sources: {name}: expected exactly one of `env:`, `file:` and `command:`"
                )));
            }
            if source.command.as_ref().is_some_and(Vec::is_empty) {
                return Err(crate::ConfigError::Invalid(format!(
                    "secrets.sources: {name}: command: expected the program and its args, such as [vault, read, -field=password, secret/db]"
                )));
            }
        }
        Ok(SecretArgs {
            keys,
            sources: config.sources.clone(),
        })
    }

    pub fn can_seal(&self) -> bool {
        !self.keys.is_empty()
    }

    /// `value` encrypted under the first key, bound to its request and arg (so that a
    /// sealed value copied to another row does not open).
    pub fn seal(
        &self,
        request_id: &str,
        name: &str,
        value: &str,
    ) -> Result<String, crate::ConfigError> {
        use aes_gcm::aead::{Aead as _, Payload};
        use base64::Engine as _;
        use rand::RngExt as _;
        let (id, cipher) = self.keys.first().ok_or_else(|| {
            crate::ConfigError::Invalid("no secrets.keys to encrypt secret args with".to_owned())
        })?;
        let nonce: [u8; 12] = rand::rng().random();
        let aad = format!("{request_id}\0{name}");
        let sealed = cipher
            .encrypt(
                &aes_gcm::Nonce::from(nonce),
                Payload {
                    msg: value.as_bytes(),
                    aad: aad.as_bytes(),
                },
            )
            .map_err(|_| "encrypting a secret arg failed".to_owned())?;
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&sealed);
        Ok(format!(
            "{SEALED_V1}:{id}:{}",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        ))
    }

    /// The value `seal` sealed for this request and arg.
    pub fn open(
        &self,
        request_id: &str,
        name: &str,
        sealed: &str,
    ) -> Result<String, crate::ConfigError> {
        use aes_gcm::aead::{Aead as _, Payload};
        use base64::Engine as _;
        let mut parts = sealed.splitn(3, ':');
        let (Some(SEALED_V1), Some(id), Some(data)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(crate::ConfigError::Invalid(format!(
                "secret arg {name} of request {request_id} is not a sealed value"
            )));
        };
        let (_, cipher) = self.keys.iter().find(|(key, _)| key == id).ok_or_else(|| {
            format!(
                "secret arg {name} of request {request_id} was sealed with key {id:?}, which secrets.keys no longer has; expected it kept until such requests are gone"
            )
        })?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .ok()
            .filter(|bytes| bytes.len() > 12)
            .ok_or_else(|| {
                format!("secret arg {name} of request {request_id} is not a sealed value")
            })?;
        let aad = format!("{request_id}\0{name}");
        let nonce: [u8; 12] = bytes[..12]
            .try_into()
            .map_err(|_| "a short sealed value".to_owned())?;
        let value = cipher
            .decrypt(
                &aes_gcm::Nonce::from(nonce),
                Payload {
                    msg: &bytes[12..],
                    aad: aad.as_bytes(),
                },
            )
            .map_err(|_| {
                format!("secret arg {name} of request {request_id} does not open with key {id:?} (changed, or not this request's)")
            })?;
        String::from_utf8(value).map_err(|_| {
            crate::ConfigError::Invalid(format!(
                "secret arg {name} of request {request_id} is not text"
            ))
        })
    }

    /// The value of source `name` for a request of `request_type`, read now.
    pub async fn resolve(
        &self,
        name: &str,
        request_type: &str,
    ) -> Result<String, crate::ConfigError> {
        let source = self.sources.get(name).ok_or_else(|| {
            format!(
                "no secret source {name:?}; expected one of the Request Manager's secrets.sources: {}",
                if self.sources.is_empty() {
                    "none".to_owned()
                } else {
                    self.sources.keys().cloned().collect::<Vec<_>>().join(", ")
                }
            )
        })?;
        if !source.requests.is_empty() && !source.requests.iter().any(|r| r == request_type) {
            return Err(crate::ConfigError::Invalid(format!(
                "secret source {name:?} is not for requests of type {request_type}"
            )));
        }
        let what = format!("secret source {name}");
        if let Some(argv) = &source.command {
            let run = tokio::process::Command::new(&argv[0])
                .args(&argv[1..])
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true)
                .output();
            let output = tokio::time::timeout(std::time::Duration::from_secs(30), run)
                .await
                .map_err(|_| format!("{what}: `{}` did not finish within 30s", argv[0]))?
                .map_err(|err| format!("{what}: cannot run `{}`: {err}", argv[0]))?;
            if !output.status.success() {
                // Its stderr may hold the secret; only the status is said.
                return Err(crate::ConfigError::Invalid(format!(
                    "{what}: `{}` failed ({})",
                    argv[0], output.status
                )));
            }
            let text = String::from_utf8(output.stdout)
                .map_err(|_| format!("{what}: `{}` printed what is not text", argv[0]))?;
            let text = text.trim_end_matches(['\n', '\r']);
            if text.is_empty() {
                return Err(crate::ConfigError::Invalid(format!(
                    "{what}: `{}` printed nothing",
                    argv[0]
                )));
            }
            return Ok(text.to_owned());
        }
        Ok(SecretSource {
            file: source.file.clone(),
            env: source.env.clone(),
        }
        .read(&what)?)
    }
}

#[cfg(test)]
#[path = "secrets_tests.rs"]
mod tests;
