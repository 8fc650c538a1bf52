//! Storage errors, with the retry decision on the error.

use proto::State;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what} {id} not found")]
    NotFound { what: &'static str, id: String },
    /// A conditional state change found the request in another state.
    #[error("request {request_id} in state {actual}, expected state {expected}")]
    State {
        request_id: String,
        actual: State,
        expected: State,
    },
    /// A row that may exist once exists already (a second suspended chain for a request).
    #[error("{0}")]
    Conflict(String),
    /// The database is down, busy or locked: trying again later may work.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// A file that is not a Spindle database, or cannot be one.
    #[error("refusing to use {path} as Spindle's database: {reason}")]
    Refused { path: String, reason: String },
    /// Stored data that cannot be read back.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// A value that cannot be written as JSON (a bug, not bad data).
    #[error("cannot encode the {what} as JSON")]
    Encode {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    /// A value the store cannot accept (the caller's mistake).
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Config(String),
    #[error("database error: {0}")]
    Database(String),
}

impl Error {
    /// Whether the same call may succeed if tried again.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Unavailable(_))
    }

    pub(crate) fn not_found(what: &'static str, id: &str) -> Error {
        Error::NotFound {
            what,
            id: id.to_owned(),
        }
    }
}

impl From<sqlx::Error> for Error {
    fn from(err: sqlx::Error) -> Error {
        match &err {
            sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_) => Error::Unavailable(err.to_string()),
            sqlx::Error::Database(db) => {
                let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
                let transient = matches!(
                    code.as_str(),
                    // SQLite: busy, locked (and their extended codes).
                    "5" | "6" | "261" | "262" | "517" | "773"
                    // PostgreSQL: serialization failure, deadlock, shutting down, too many
                    // connections, connection exceptions.
                    | "40001" | "40P01" | "57P01" | "57P02" | "57P03" | "53300"
                ) || code.starts_with("08");
                if transient {
                    Error::Unavailable(db.message().to_owned())
                } else if db.is_unique_violation() {
                    Error::Conflict(db.message().to_owned())
                } else {
                    Error::Database(db.message().to_owned())
                }
            }
            sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => {
                Error::Corrupt(err.to_string())
            }
            _ => Error::Database(err.to_string()),
        }
    }
}
