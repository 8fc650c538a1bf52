//! The Request Manager's errors and their HTTP status.

/// What went wrong, and whose fault it is.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller's input cannot be used (400).
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
    /// The request is not in a state that allows this (409).
    #[error("{0}")]
    Conflict(String),
    /// A body that is not declared JSON (415).
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// Shutting down, or a dependency is down; try again later (503).
    #[error("{0}")]
    Unavailable(String),
    /// Anything else (500); the message is logged, not sent.
    #[error("{0}")]
    Internal(String),
}

impl Error {
    pub fn status(&self) -> u16 {
        match self {
            Error::BadRequest(_) => 400,
            Error::NotFound(_) => 404,
            Error::Conflict(_) => 409,
            Error::UnsupportedMediaType(_) => 415,
            Error::Unavailable(_) => 503,
            Error::Internal(_) => 500,
        }
    }
}

impl From<store::Error> for Error {
    fn from(err: store::Error) -> Error {
        match err {
            store::Error::NotFound { .. } => Error::NotFound(err.to_string()),
            store::Error::State { .. } | store::Error::Conflict(_) => {
                Error::Conflict(err.to_string())
            }
            store::Error::Invalid(_) => Error::BadRequest(err.to_string()),
            store::Error::Unavailable(_) => Error::Unavailable(err.to_string()),
            other => Error::Internal(other.to_string()),
        }
    }
}

impl From<graph::Error> for Error {
    fn from(err: graph::Error) -> Error {
        if err.is_input() {
            Error::BadRequest(err.to_string())
        } else {
            Error::Internal(err.to_string())
        }
    }
}
