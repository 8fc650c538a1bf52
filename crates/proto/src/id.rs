//! A request's id as its own type.

use serde::{Deserialize, Serialize};

/// A request's id. Functions that take one beside other text (a job id, a Job Runner's
/// URL, a host name) take it as this type, so that the two cannot be swapped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RequestId(String);

impl RequestId {
    pub fn new(id: impl Into<String>) -> RequestId {
        RequestId(id.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for RequestId {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for RequestId {
    fn from(id: &str) -> RequestId {
        RequestId(id.to_owned())
    }
}

impl From<String> for RequestId {
    fn from(id: String) -> RequestId {
        RequestId(id)
    }
}
