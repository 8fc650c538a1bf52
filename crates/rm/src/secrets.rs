//! Secrets the Request Manager's config names (a trigger's, a webhook's): read at start
//! from a file or an environment variable, never written in the config itself, never
//! shown (`****`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Where a secret is read at start: never written in the config itself.
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

/// A secret's bytes; shown as `****`.
#[derive(Clone)]
pub(crate) struct Secret(pub(crate) Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("****")
    }
}

impl SecretSource {
    pub(crate) fn read(&self, what: &str) -> Result<Secret, String> {
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
        Ok(Secret(text.as_bytes().to_vec()))
    }
}
