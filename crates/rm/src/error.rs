//! The Request Manager's errors and their HTTP status. What a caller is told is
//! Spindle's own text: a fault's cause (the database's words, say) is kept as its source
//! and logged, never sent.

/// Why a section of the Request Manager's config (`notify:`, `triggers:`, `secrets:`),
/// or a secret it names, cannot be used (at start, or when a secret arg is sealed, opened
/// or resolved): each says the setting (or the arg and request) and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A setting is wrong: its place (such as `notify.webhooks: deploys: url`), what it
    /// is and what was expected.
    #[error("{0}")]
    Invalid(String),
    /// A secret it names cannot be read.
    #[error(transparent)]
    Secret(#[from] auth::SecretError),
}

impl ConfigError {
    /// `name` as a name of the config's (a webhook's, a trigger's): letters, digits, `-`,
    /// `_` and `.`; else the error says where (`place`) and what (`kind`) it is.
    pub(crate) fn check_name(place: &str, kind: &str, name: &str) -> Result<(), ConfigError> {
        let good = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if good {
            return Ok(());
        }
        Err(ConfigError::Invalid(format!(
            "{place}: name {name:?} is not a {kind} name; expected letters, digits, -, _ and ."
        )))
    }
}

impl From<String> for ConfigError {
    fn from(text: String) -> ConfigError {
        ConfigError::Invalid(text)
    }
}

/// What went wrong, and whose fault it is.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller's input cannot be used (400).
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
    /// No credentials, or credentials that are not valid (401).
    #[error("{0}")]
    Unauthorized(String),
    /// Not allowed (403): the caller's roles do not grant it, or a state change was
    /// sent by a page of another site.
    #[error("{0}")]
    Forbidden(String),
    /// The request is not in a state that allows this (409).
    #[error("{0}")]
    Conflict(String),
    /// Well-formed, but not what it may be (422): an idempotency key sent again with
    /// other args.
    #[error("{0}")]
    Unprocessable(String),
    /// A report from a Job Runner that no longer owns the request (409, with the
    /// `Spindle-Fenced` header, which tells the runner to abandon the chain).
    #[error("{0}")]
    Fenced(String),
    /// A body that is not declared JSON (415).
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// A path the API has, with a method it does not take (405).
    #[error("{0}")]
    MethodNotAllowed(String),
    /// Shutting down, or a dependency is down; try again later (503).
    #[error("{message}")]
    Unavailable {
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// Too much work waits already (503 with `Retry-After`, the seconds to wait): the
    /// caller is to try again then; nothing was stored.
    #[error("{message}")]
    Overloaded { message: String, retry_after: u64 },
    /// Anything else (500): the caller is told only that it failed.
    #[error("{message}")]
    Internal {
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

impl Error {
    pub fn status(&self) -> u16 {
        match self {
            Error::BadRequest(_) => 400,
            Error::Unauthorized(_) => 401,
            Error::Forbidden(_) => 403,
            Error::NotFound(_) => 404,
            Error::Conflict(_) | Error::Fenced(_) => 409,
            Error::Unprocessable(_) => 422,
            Error::UnsupportedMediaType(_) => 415,
            Error::MethodNotAllowed(_) => 405,
            Error::Unavailable { .. } | Error::Overloaded { .. } => 503,
            Error::Internal { .. } => 500,
        }
    }

    pub fn unavailable(message: impl Into<String>) -> Error {
        Error::Unavailable {
            message: message.into(),
            source: None,
        }
    }

    pub fn internal(message: impl Into<String>) -> Error {
        Error::Internal {
            message: message.into(),
            source: None,
        }
    }

    /// The error and its sources, `: `-separated, for logs.
    pub fn chain(&self) -> String {
        error_chain(self)
    }
}

/// Any error and its sources, `: `-separated.
pub(crate) fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

impl From<store::Error> for Error {
    fn from(err: store::Error) -> Error {
        match err {
            store::Error::NotFound { .. } => Error::NotFound(err.to_string()),
            store::Error::State { .. }
            | store::Error::Conflict(_)
            | store::Error::RunnerEnded { .. } => Error::Conflict(err.to_string()),
            store::Error::Fenced(_) | store::Error::TryBegan { .. } => {
                Error::Fenced(err.to_string())
            }
            store::Error::Duplicate(_) => {
                Error::Conflict("it is stored already (an id that is taken); try again".to_owned())
            }
            store::Error::Invalid(_) => Error::BadRequest(err.to_string()),
            err if err.is_transient() => Error::Unavailable {
                message: "the database is unavailable; try again later".to_owned(),
                source: Some(Box::new(err)),
            },
            other => Error::Internal {
                message: "storing failed".to_owned(),
                source: Some(Box::new(other)),
            },
        }
    }
}

impl From<graph::Error> for Error {
    fn from(err: graph::Error) -> Error {
        if err.is_input() {
            Error::BadRequest(err.to_string())
        } else {
            Error::Internal {
                message: "building the job chain failed".to_owned(),
                source: Some(Box::new(err)),
            }
        }
    }
}

impl From<auth::Denied> for Error {
    fn from(denied: auth::Denied) -> Error {
        match denied {
            auth::Denied::Unauthenticated(message) => Error::Unauthorized(message),
            auth::Denied::Forbidden(message) => Error::Forbidden(message),
        }
    }
}
