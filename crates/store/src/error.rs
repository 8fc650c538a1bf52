//! Storage errors, with the retry decision on the error. An error that comes from the
//! database carries its own words and the store operation that met it ([`Cause`]), and
//! says both when displayed, so that every log line of it has its cause; the Request
//! Manager answers callers with text of its own for these (never the database's).

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
    /// A report about a request from a Job Runner that no longer owns it (another epoch
    /// or another instance): refused, so that one runner at a time advances a request.
    #[error("{0}")]
    Fenced(String),
    /// A recovery or hand-over that would miss a try: it began (on a runner that had the
    /// request under a hand-over nobody recorded, or while the recovery was rebuilt)
    /// beyond what the chain being stored or handed over knows. Nothing was written; the
    /// request is taken back from what is stored.
    #[error(
        "request {request_id}: try {attempt} of job {job_id} began on a job runner beyond what the chain being recovered or handed over knows; it is rebuilt from what is stored"
    )]
    TryBegan {
        request_id: String,
        job_id: String,
        attempt: u32,
    },
    /// A Job Runner instance whose lease was declared lost, or that deregistered: it may
    /// not renew (it registers again as a new instance).
    #[error("job runner instance {instance} is {state}; register again as a new instance")]
    RunnerEnded {
        instance: String,
        state: proto::RunnerState,
    },
    /// A key that exists already, as the database said.
    #[error("a row with this key is stored already ({0})")]
    Duplicate(Cause),
    /// The database is down, busy or locked: trying again later may work.
    #[error("database unavailable ({0})")]
    Unavailable(Cause),
    /// The batch writer that group-commits writes has stopped (the process is ending).
    #[error("the batch writer has stopped")]
    Stopped,
    /// The shared transaction of a group commit failed with this (transient) error;
    /// every write in it gets it.
    #[error("{0}")]
    Batch(#[source] std::sync::Arc<Error>),
    /// A file that is not a Spindle database, or cannot be one.
    #[error("refusing to use {path} as Spindle's database: {reason}")]
    Refused { path: String, reason: String },
    /// Stored data that cannot be read back.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// A stored value that does not decode as its type.
    #[error("stored data is corrupt ({0})")]
    Decode(Cause),
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
    #[error("the schema cannot be brought up to date")]
    Migrate(#[source] sqlx::migrate::MigrateError),
    /// Any other failure of the database.
    #[error("database error ({0})")]
    Database(Cause),
}

/// What the database said, and the store operation (a [`crate::Store`] method's name)
/// that met it, once known: displayed as `in OPERATION: WORDS`.
#[derive(Debug)]
pub struct Cause {
    pub operation: Option<&'static str>,
    pub error: sqlx::Error,
}

impl Cause {
    /// The database's own words (its message, for an error it answered with).
    pub fn words(&self) -> String {
        match &self.error {
            sqlx::Error::Database(db) => db.message().to_owned(),
            other => other.to_string(),
        }
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.operation {
            Some(operation) => write!(f, "in {operation}: {}", self.words()),
            None => f.write_str(&self.words()),
        }
    }
}

impl Error {
    /// Whether the same call may succeed if tried again.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Unavailable(_) | Error::Stopped => true,
            Error::Batch(err) => err.is_transient(),
            _ => false,
        }
    }

    /// Whether the database undid the transaction to break a deadlock (or a
    /// serialization failure): nothing of it was written, and the same transaction tried
    /// again may pass (the other party, MySQL's table locks of a month's drop among
    /// them, has its locks by then).
    pub fn is_deadlock(&self) -> bool {
        match self {
            Error::Unavailable(cause) => match &cause.error {
                sqlx::Error::Database(db) => {
                    matches!(db.code().as_deref(), Some("40001" | "40P01"))
                        || db
                            .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                            .is_some_and(|mysql| mysql.number() == 1213)
                }
                _ => false,
            },
            Error::Batch(err) => err.is_deadlock(),
            _ => false,
        }
    }

    /// The database's own words, where the error came from it (for logs, never for
    /// answers to callers).
    pub fn database_text(&self) -> Option<String> {
        match self {
            Error::Duplicate(cause)
            | Error::Unavailable(cause)
            | Error::Decode(cause)
            | Error::Database(cause) => Some(cause.words()),
            Error::Migrate(err) => Some(err.to_string()),
            Error::Batch(err) => err.database_text(),
            _ => None,
        }
    }

    /// The error, naming `operation` as the one that met it (where the database's words
    /// are carried and no operation is named yet).
    pub fn during(mut self, operation: &'static str) -> Error {
        if let Error::Duplicate(cause)
        | Error::Unavailable(cause)
        | Error::Decode(cause)
        | Error::Database(cause) = &mut self
        {
            cause.operation.get_or_insert(operation);
        }
        self
    }

    /// An operation that took longer than `limit`: the database (or a pooler before it)
    /// did not answer in time; trying again later may work.
    pub(crate) fn timed_out(limit: std::time::Duration) -> Error {
        Error::io_unavailable(
            std::io::ErrorKind::TimedOut,
            format!(
                "the database did not answer within {} s",
                limit.as_secs_f64()
            ),
        )
    }

    /// The database could not be reached, for `why`.
    #[cfg(feature = "testing")]
    pub(crate) fn unreachable(why: &str) -> Error {
        Error::io_unavailable(std::io::ErrorKind::ConnectionRefused, why.to_owned())
    }

    /// Unavailable for an I/O failure of `kind` that `text` explains.
    fn io_unavailable(kind: std::io::ErrorKind, text: String) -> Error {
        Error::Unavailable(Cause {
            operation: None,
            error: sqlx::Error::Io(std::io::Error::new(kind, text)),
        })
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
        let cause = |error| Cause {
            operation: None,
            error,
        };
        match &err {
            sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_) => Error::Unavailable(cause(err)),
            sqlx::Error::Database(db) => {
                let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
                let transient = matches!(
                    code.as_str(),
                    // SQLite: busy, locked (and their extended codes).
                    "5" | "6" | "261" | "262" | "517" | "773"
                    // PostgreSQL (and MySQL's 40001): serialization failure, deadlock, shutting down, too many
                    // connections, connection exceptions.
                    | "40001" | "40P01" | "57P01" | "57P02" | "57P03" | "53300"
                ) || code.starts_with("08")
                    || db
                        .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                        .is_some_and(|mysql| {
                            // MySQL and MariaDB: lock wait timeout, deadlock, too many
                            // connections, shutting down, a statement or connection
                            // killed, a connection closed as idle, a prepared statement
                            // whose table changed meanwhile (a month partition made or
                            // dropped) beyond what the server prepares again itself.
                            matches!(
                                mysql.number(),
                                1205 | 1213 | 1040 | 1053 | 1317 | 1927 | 4031 | 1615
                            )
                        });
                if transient {
                    Error::Unavailable(cause(err))
                } else if db.is_unique_violation() {
                    Error::Duplicate(cause(err))
                } else {
                    Error::Database(cause(err))
                }
            }
            sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => Error::Decode(cause(err)),
            _ => Error::Database(cause(err)),
        }
    }
}
