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

/// Why a secret cannot be read; each names the setting (`what`) and never holds the
/// secret.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The file's error is in the message (not a source: printed once).
    #[error("{what}: cannot read {}: {error}", path.display())]
    File {
        what: String,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{what}: environment variable {name} is not set; expected the secret")]
    Unset { what: String, name: String },
    #[error("{what}: expected exactly one of `file:` and `env:`")]
    Source { what: String },
    #[error("{what}: the secret is empty")]
    Empty { what: String },
}

impl SecretSource {
    /// The secret, its surrounding whitespace dropped.
    pub fn read(&self, what: &str) -> Result<String, SecretError> {
        let what = what.to_owned();
        let text = match (&self.file, &self.env) {
            (Some(path), None) => {
                std::fs::read_to_string(path).map_err(|error| SecretError::File {
                    what: what.clone(),
                    path: path.clone(),
                    error,
                })?
            }
            (None, Some(name)) => std::env::var(name).map_err(|_| SecretError::Unset {
                what: what.clone(),
                name: name.clone(),
            })?,
            _ => return Err(SecretError::Source { what }),
        };
        let text = text.trim();
        if text.is_empty() {
            return Err(SecretError::Empty { what });
        }
        Ok(text.to_owned())
    }
}
