//! Where a secret of the config is read (a client secret, a webhook's, a trigger's, a
//! key): a file or an environment variable, never the config itself.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Exactly one of `file:` and `env:`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretSource {
    /// A file that holds it (surrounding whitespace is dropped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    /// An environment variable that holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
}

impl SecretSource {
    /// The secret, its surrounding whitespace dropped; an error starts with `what` and
    /// never holds the secret.
    pub fn read(&self, what: &str) -> Result<String, String> {
        let text = match (&self.file, &self.env) {
            (Some(path), None) => std::fs::read_to_string(path)
                .map_err(|err| format!("{what}: cannot read {}: {err}", path.display()))?,
            (None, Some(name)) => std::env::var(name).map_err(|_| {
                format!("{what}: environment variable {name} is not set; expected the secret")
            })?,
            _ => {
                return Err(format!(
                    "{what}: expected exactly one of `file:` and `env:`"
                ));
            }
        };
        let text = text.trim();
        if text.is_empty() {
            return Err(format!("{what}: the secret is empty"));
        }
        Ok(text.to_owned())
    }
}
