//! The SQL the backends run, written once: [`SqlStore`] implements [`Store`] for any sqlx
//! database that is a [`Backend`]. Statements are [`Statement`]s in the SQL the three
//! databases share, with `$N` placeholders; each backend renders them (`statement.rs`),
//! and what differs (placeholders, skipping duplicate rows, updates from rows of values,
//! `UPDATE … RETURNING`, row locks, matching a long arg value through an index, the
//! retention's lock) is in its `Backend` impl next to its constructor (`sqlite.rs`,
//! `postgres.rs`, `mysql.rs`).
//!
//! One module a table or concern, each an ordinary `impl<DB: Backend> SqlStore<DB>`
//! block whose methods are the operations of [`crate::operations`]' traits (which forward
//! to them) and their helpers. Code here is generic over a [`Backend`] with no other
//! bound: running a statement and reading its rows go through `run.rs`.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use proto::{
    AuditEvent, CreateRequest, Fence, FinishRequest, JobChain, JobLog, JobRunner, OutputChunk,
    OutputQuery, Request, RequestFilter, RequestId, RunnerRegistration, RunnerState, SpecVersion,
    State, Stream, SuspendedJobChain, TryStart,
};
use serde_json::Value;
use sqlx::Pool;

pub use rows::{InsertRows, Values};
pub use run::{BoxFuture, Column, Columns};
pub(crate) use run::{run_on, runs_statements};
pub use statement::Statement;
pub(crate) use statement::{Rendered, ValuesUpdate, positional};

use crate::{
    BatchWritten, Error, Finished, Holder, ImportedRequest, JobState, LockClaim, LockHolder,
    LockTake, LoggedTry, Owner, Removed, StartRequest, StartedTry, WriteBatch,
};

/// Job log rows per INSERT statement (12 parameters each, under SQLite's limit).
pub(crate) const LOG_ROWS_PER_STATEMENT: usize = 1000;

/// Requests per multi-row statement of a group commit (at most 7 parameters each).
pub(crate) const REQUEST_ROWS_PER_STATEMENT: usize = 500;

/// Statements of one read of thousands of requests run at once (`spindle ps` of 50,000
/// running requests reads them in 100 statements, and their job states in 100 more).
pub(crate) const READS_AT_ONCE: usize = 4;

/// What differs between the databases Spindle stores in: how each renders what
/// [`Statement`]s say by intent, and the few behaviours the concern modules branch on.
/// A backend is this impl and its constructor, in a module of its own (`sqlite.rs`,
/// `postgres.rs`, `mysql.rs`).
pub trait Backend: sqlx::Database<Row: Columns> {
    /// Whether `UPDATE … RETURNING` is there; without it, an update that answers rows
    /// reads them in its transaction, locked first.
    const UPDATE_RETURNING: bool;

    /// Appended to a SELECT whose rows the transaction is about to change, to lock them
    /// (empty where one writer at a time is the rule already: SQLite). PostgreSQL's and
    /// MySQL's form by default.
    const LOCK_ROWS: &'static str = " FOR UPDATE";

    /// Appended to a SELECT that claims a row another transaction may be claiming: that
    /// row is skipped rather than waited for. PostgreSQL's and MySQL's (MariaDB 10.6+)
    /// form by default.
    const LOCK_ROWS_SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";

    /// Run first in a retention transaction: a query that answers a row when this
    /// transaction may delete (PostgreSQL: an advisory lock; MySQL: a lock row), so that
    /// one Request Manager of several removes at a time; `None` where one writer at a
    /// time is the rule already (SQLite).
    const RETENTION_LOCK_SQL: Option<&'static str>;

    /// How the request tables are partitioned by month of request id (PostgreSQL's
    /// migration 0105, MySQL's 0106; [`partitions`]): retention drops a month whole
    /// where it can.
    const MONTH_PARTITIONS: MonthPartitions = MonthPartitions::None;

    /// Put before a SELECT to have the database say its plan ([`crate::plans`]).
    const EXPLAIN: &'static str = "EXPLAIN ";

    /// A line of a plan from one row `EXPLAIN` answers, and the table that step reads
    /// whole, if it does.
    fn plan_line(row: &Self::Row) -> Result<(String, Option<String>), sqlx::Error>;

    /// `sql` with the database's placeholders, where they are not `$N`.
    fn render(_sql: &str) -> Option<Rendered> {
        None
    }

    /// The INSERT `insert` skipping rows whose `key` exists.
    fn skip_duplicates(insert: &str, key: &str) -> String {
        format!("{insert} ON CONFLICT ({key}) DO NOTHING")
    }

    /// A table of the rows of placeholders `rows`, its columns named `column1`, … .
    fn values_table(rows: &[Vec<String>]) -> String {
        let rows: Vec<String> = rows
            .iter()
            .map(|row| format!("({})", row.join(", ")))
            .collect();
        format!("(VALUES {})", rows.join(", "))
    }

    /// The statement of an update of many rows from rows of values.
    fn update_from_values(update: &ValuesUpdate<'_>) -> String {
        format!(
            "UPDATE {} SET {} FROM {} AS v WHERE {} AND {}",
            update.table,
            update.set,
            Self::values_table(&update.rows),
            update.join,
            update.filter
        )
    }

    /// Appends the condition that `value` (an arg's value column) equals `text`, written
    /// so that the database can use its index on arg values.
    fn push_value_match(query: &mut Statement<'_>, text: String);

    fn rows_affected(result: &Self::QueryResult) -> u64;

    /// Runs `rows` on `conn`; the count of rows inserted. By default multi-row `VALUES`
    /// statements ([`InsertRows::statements`]); a database that binds arrays says it in
    /// one statement.
    fn insert_rows<'e, 'q: 'e>(
        conn: &'e mut Self::Connection,
        rows: InsertRows<'q>,
    ) -> BoxFuture<'e, Result<u64, sqlx::Error>> {
        Box::pin(async move {
            let mut inserted = 0;
            for statement in rows.statements::<Self>() {
                inserted += Self::rows_affected(&Self::execute(&mut *conn, statement).await?);
            }
            Ok(inserted)
        })
    }

    /// Every row `statement` answers on `conn` ([`runs_statements`] writes the three
    /// running methods: each backend meets sqlx's bounds with its concrete types, so
    /// that code generic over a `Backend` needs none).
    fn fetch_all<'e, 'q: 'e>(
        conn: &'e mut Self::Connection,
        statement: Statement<'q>,
    ) -> BoxFuture<'e, Result<Vec<Self::Row>, sqlx::Error>>;

    /// The first row `statement` answers on `conn`, if any.
    fn fetch_optional<'e, 'q: 'e>(
        conn: &'e mut Self::Connection,
        statement: Statement<'q>,
    ) -> BoxFuture<'e, Result<Option<Self::Row>, sqlx::Error>>;

    /// Runs `statement` on `conn` for what it changes.
    fn execute<'e, 'q: 'e>(
        conn: &'e mut Self::Connection,
        statement: Statement<'q>,
    ) -> BoxFuture<'e, Result<Self::QueryResult, sqlx::Error>>;
}

/// The store over a pool of `DB` connections; [`crate::SqliteStore`] and
/// [`crate::PostgresStore`] are its two kinds.
#[derive(Debug, Clone)]
pub struct SqlStore<DB: Backend> {
    /// Every write, and reads inside transactions.
    pub(crate) pool: Pool<DB>,
    /// Reads of what is committed: the same pool on PostgreSQL; on SQLite read-only
    /// connections of their own, so that reads neither wait behind nor delay the one
    /// writer (WAL readers see the last commit and never block it).
    pub(crate) readers: Pool<DB>,
    /// How long one operation may take before its caller hears [`Error::Unavailable`]
    /// (server backends): a pooler in front of a database that is down (PgBouncer) may
    /// hold a query in its queue for minutes rather than refuse it.
    pub(crate) call_timeout: Option<Duration>,
    /// The month partitions this store has seen made or left aside.
    pub(crate) months: std::sync::Arc<partitions::KnownMonths>,
}

/// A pool from `connect`, tried again every 200 ms while the server cannot be reached
/// (at start it may still be coming up) until `timeout` has passed.
pub(crate) async fn connect_within<DB, F, Fut>(
    timeout: std::time::Duration,
    mut connect: F,
) -> Result<Pool<DB>, Error>
where
    DB: sqlx::Database,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Pool<DB>, sqlx::Error>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match connect().await.map_err(Error::from) {
            Err(err) if err.is_transient() && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            res => return res,
        }
    }
}

pub(crate) fn micros(time: DateTime<Utc>) -> i64 {
    time.timestamp_micros()
}

pub(crate) fn from_micros(micros: i64) -> DateTime<Utc> {
    Utc.timestamp_micros(micros).single().unwrap_or_default()
}

/// Registered runners with their count of RUNNING requests (`$1` RUNNING); a macro, so
/// that the queries built on it are literals.
macro_rules! runner_select {
    () => {
        "SELECT r.instance_id, r.url, r.host, r.pid, r.started_at, r.renewed_at, r.lease_us, \
     r.lost_at, r.ended_at, \
     (SELECT COUNT(*) FROM requests q WHERE q.jr_instance = r.instance_id AND q.state = $1) AS running \
     FROM job_runners r"
    };
}

/// Progress of a RUNNING request (`$1` id, `$2` count, `$3` RUNNING); others are left.
const UPDATE_PROGRESS: &str =
    "UPDATE requests SET finished_jobs = $2 WHERE request_id = $1 AND state = $3";

/// A count as the databases store it (BIGINT).
fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A request arg's value as the search compares it: strings as they are, others as JSON.
pub(crate) fn arg_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

pub(crate) fn state_of(value: i16) -> Result<State, Error> {
    u8::try_from(value)
        .ok()
        .and_then(|v| State::from_value(v).ok())
        .ok_or_else(|| Error::Corrupt(format!("stored state {value} is not a state")))
}

/// A stream as the databases store it (SMALLINT).
fn stream_value(stream: Stream) -> i16 {
    match stream {
        Stream::Stdout => 0,
        Stream::Stderr => 1,
    }
}

fn stream_of(value: i16) -> Result<Stream, Error> {
    match value {
        0 => Ok(Stream::Stdout),
        1 => Ok(Stream::Stderr),
        other => Err(Error::Corrupt(format!(
            "stored output stream {other} is not 0 (stdout) or 1 (stderr)"
        ))),
    }
}

/// An epoch as the databases store it; -1 stands for "no fence given".
fn epoch_value(fence: Option<&Fence>) -> i64 {
    fence.map_or(-1, |fence| count(fence.epoch))
}

/// A fence's instance as bound (empty without a fence; stored as NULL).
fn instance_value(fence: Option<&Fence>) -> &str {
    fence.map_or("", |fence| fence.instance.as_str())
}

/// A try number as the databases store it (INTEGER).
fn try_value(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// A state as the databases store it (SMALLINT).
fn state_value(state: State) -> i16 {
    i16::from(state.value())
}

/// The tables that hold a request's rows, children first (the archive and args refer
/// to the request).
const REQUEST_TABLES: [&str; 12] = [
    "job_log",
    "job_output",
    "job_tries",
    "request_args",
    "request_archives",
    "request_audit",
    "approvals",
    "suspended_job_chains",
    "trigger_deliveries",
    "notifications",
    "request_secrets",
    "requests",
];

/// JSON text of a value to store.
fn to_json<T: serde::Serialize + ?Sized>(what: &str, value: &T) -> Result<String, Error> {
    serde_json::to_string(value).map_err(|source| Error::Encode {
        what: what.to_owned(),
        source,
    })
}

/// A stored JSON text read back; one that does not parse is corrupt.
fn from_json<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> Result<T, Error> {
    serde_json::from_str(text).map_err(|err| Error::Corrupt(format!("{what}: {err}")))
}

impl<DB: Backend> SqlStore<DB> {
    /// The rows `sql` reads (from a reader) of one request: its one param, `$1`, is
    /// `request_id`.
    async fn rows_of_request(
        &self,
        sql: &'static str,
        request_id: &str,
    ) -> Result<Vec<DB::Row>, Error> {
        let rows = Statement::new(sql)
            .bind(request_id)
            .fetch_all(&self.readers)
            .await?;
        Ok(rows)
    }
}

impl<DB: Backend> SqlStore<DB> {
    /// An operation's `work`, given at most the store's call timeout, a database error
    /// it returns naming `operation`: what each trait impl of [`crate::operations`] runs.
    pub(crate) async fn call<T>(
        &self,
        operation: &'static str,
        work: impl std::future::Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        let res = match self.call_timeout {
            Some(limit) => tokio::time::timeout(limit, work)
                .await
                .unwrap_or_else(|_| Err(Error::timed_out(limit))),
            None => work.await,
        };
        res.map_err(|err| err.during(operation))
    }
}

mod answers;
mod history;
mod import;
mod lifecycle;
mod locks;
mod logs;
mod notifications;
mod partitions;
mod recovery;
mod requests;
mod retention;
mod rows;
mod run;
mod runners;
mod schedules;
mod secrets;
mod sign_ins;
mod statement;
mod suspended;
#[cfg(test)]
pub(crate) use partitions::Month;
pub use partitions::MonthPartitions;
pub(crate) use partitions::partitioned_table;
#[cfg(test)]
pub(crate) use suspended::CLAIM;
mod triggers;
mod write_batch;

/// Connections a Request Manager's pool opens at most, unless its database URL says
/// (`?max_connections=N`).
pub(crate) const DEFAULT_POOL: u32 = 16;

/// How long one store operation may take on a database server, unless its URL says
/// (`?call_timeout=SECONDS`): longer than MySQL's row-lock wait (10 s), shorter than a
/// client's patience.
pub(crate) const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// What a server database's URL asks of Spindle's pool, and the URL without those
/// parameters, as the driver reads it.
#[derive(Debug, PartialEq)]
pub(crate) struct PoolSettings {
    pub(crate) url: String,
    /// `max_connections=N`, 1 to 1000.
    pub(crate) max_connections: u32,
    /// `call_timeout=SECONDS`, 1 to 3600, or 0 for none.
    pub(crate) call_timeout: Option<Duration>,
}

/// The [`PoolSettings`] of a database URL.
pub(crate) fn pool_settings(url: &str) -> Result<PoolSettings, Error> {
    let mut settings = PoolSettings {
        url: url.to_owned(),
        max_connections: DEFAULT_POOL,
        call_timeout: Some(DEFAULT_CALL_TIMEOUT),
    };
    let Some((base, query)) = url.split_once('?') else {
        return Ok(settings);
    };
    let number = |name: &str, value: &str, range: std::ops::RangeInclusive<u32>, what: &str| {
        value
            .parse::<u32>()
            .ok()
            .filter(|n| range.contains(n))
            .ok_or_else(|| {
                Error::Config(format!(
                    "database URL: {name}={value:?}; expected {what}, {} to {}",
                    range.start(),
                    range.end()
                ))
            })
    };
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        if let Some(value) = pair.strip_prefix("max_connections=") {
            settings.max_connections =
                number("max_connections", value, 1..=1000, "the pool's size")?;
        } else if let Some(value) = pair.strip_prefix("call_timeout=") {
            let seconds = number(
                "call_timeout",
                value,
                0..=3600,
                "the seconds an operation may take (0: no limit)",
            )?;
            settings.call_timeout = (seconds > 0).then(|| Duration::from_secs(seconds.into()));
        } else {
            kept.push(pair);
        }
    }
    settings.url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok(settings)
}

#[cfg(test)]
mod pool_tests {
    use std::time::Duration;

    use super::{DEFAULT_CALL_TIMEOUT, PoolSettings, pool_settings};

    fn settings(url: &str, max_connections: u32, call_timeout: Option<u64>) -> PoolSettings {
        PoolSettings {
            url: url.to_owned(),
            max_connections,
            call_timeout: call_timeout.map(Duration::from_secs),
        }
    }

    #[test]
    fn a_database_url_may_size_its_pool_and_bound_its_calls() {
        let url = "postgres://u@h:5432/db";
        let default = Some(DEFAULT_CALL_TIMEOUT.as_secs());
        assert_eq!(pool_settings(url).unwrap(), settings(url, 16, default));
        assert_eq!(
            pool_settings("postgres://u@h/db?max_connections=4").unwrap(),
            settings("postgres://u@h/db", 4, default)
        );
        assert_eq!(
            pool_settings("mysql://u:p@h/db?ssl-mode=disabled&max_connections=8&call_timeout=5")
                .unwrap(),
            settings("mysql://u:p@h/db?ssl-mode=disabled", 8, Some(5))
        );
        assert_eq!(
            pool_settings("postgres://h/db?call_timeout=0").unwrap(),
            settings("postgres://h/db", 16, None)
        );
        for bad in ["0", "1001", "many"] {
            let err = pool_settings(&format!("postgres://h/db?max_connections={bad}"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("expected the pool's size, 1 to 1000"), "{err}");
        }
        for bad in ["-1", "3601", "5s"] {
            let err = pool_settings(&format!("postgres://h/db?call_timeout={bad}"))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("call_timeout") && err.contains("0 to 3600"),
                "{err}"
            );
        }
    }
}
