//! The SQL both backends run, written once: [`SqlStore`] implements [`Store`] for any sqlx
//! database that is a [`Backend`]. SQLite and PostgreSQL both read `$N` placeholders;
//! what differs (claiming a suspended chain, matching a long arg value through an index)
//! is in their `Backend` impls next to their constructors (`sqlite.rs`, `postgres.rs`).

use std::collections::HashMap;

use chrono::{DateTime, TimeZone, Utc};
use proto::{
    AuditEvent, CreateRequest, Fence, FinishRequest, JobChain, JobLog, JobRunner, OutputChunk,
    OutputQuery, Request, RequestFilter, RequestId, RunnerRegistration, RunnerState, SpecVersion,
    State, Stream, SuspendedJobChain, TryStart,
};
use serde_json::Value;
use sqlx::{ColumnIndex, Decode, Encode, Executor, IntoArguments, Pool, QueryBuilder, Row, Type};

use crate::{
    BatchWritten, Error, Finished, Holder, JobState, Owner, Removed, StartRequest, StartedTry,
    Store, WriteBatch,
};

/// Job log rows per INSERT statement (12 parameters each, under SQLite's limit).
pub(crate) const LOG_ROWS_PER_STATEMENT: usize = 1000;

/// Requests per multi-row statement of a group commit (at most 7 parameters each).
pub(crate) const REQUEST_ROWS_PER_STATEMENT: usize = 500;

/// Output chunk rows per INSERT statement (7 parameters each).
pub(crate) const OUTPUT_ROWS_PER_STATEMENT: usize = 1000;

/// What differs between the databases Spindle stores in.
pub trait Backend: sqlx::Database<Arguments: IntoArguments<Self>> {
    /// Claims the oldest unclaimed suspended chain for `$1` at time `$2`, returning its
    /// `suspended_job_chain`.
    const CLAIM_SQL: &'static str;

    /// Appends the condition that `value` (an arg's value column) equals `text`, written
    /// so that the database can use its index on arg values.
    fn push_value_match(query: &mut QueryBuilder<Self>, text: String);

    fn rows_affected(result: &Self::QueryResult) -> u64;

    /// Run first in a retention transaction: a query answering `got`, 1 when
    /// this transaction may delete (PostgreSQL: an advisory lock, so that one Request
    /// Manager of several removes at a time); `None` where one writer at a time is the
    /// rule already (SQLite).
    const RETENTION_LOCK_SQL: Option<&'static str>;
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

/// A state as the databases store it (SMALLINT).
fn state_value(state: State) -> i16 {
    i16::from(state.value())
}

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

// The bounds below say what the shared SQL needs of a database's types, rows and
// connections. They stand twice, word for word, on the two impl blocks (helpers, and
// `Store`): Rust has no way to name a list of bounds once.

impl<DB> SqlStore<DB>
where
    DB: Backend,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'a> &'a str: ColumnIndex<DB::Row> + Encode<'a, DB> + Type<DB>,
    String: for<'r> Decode<'r, DB> + for<'a> Encode<'a, DB> + Type<DB>,
    i16: for<'r> Decode<'r, DB> + for<'a> Encode<'a, DB> + Type<DB>,
    i32: for<'r> Decode<'r, DB> + for<'a> Encode<'a, DB> + Type<DB>,
    i64: for<'r> Decode<'r, DB> + for<'a> Encode<'a, DB> + Type<DB>,
    Option<String>: for<'r> Decode<'r, DB> + Type<DB>,
    Option<i64>: for<'r> Decode<'r, DB> + Type<DB>,
{
    /// Why a conditional update of `request_id` matched no row.
    async fn state_error(&self, request_id: &str, expected: State) -> Error {
        let row = sqlx::query("SELECT state FROM requests WHERE request_id = $1")
            .bind(request_id)
            .fetch_optional(&self.readers)
            .await;
        let actual = match row {
            Ok(None) => return Error::not_found("request", request_id),
            Ok(Some(row)) => row
                .try_get::<i16, _>("state")
                .map_err(Error::from)
                .and_then(state_of),
            Err(err) => return err.into(),
        };
        match actual {
            Ok(actual) => Error::State {
                request_id: request_id.to_owned(),
                actual,
                expected,
            },
            Err(err) => err,
        }
    }

    /// Why a report with `fence` about `request_id` matched no row: not from the owner
    /// ([`Error::Fenced`]), or the request was not in the state expected.
    async fn refusal(&self, request_id: &str, fence: Option<&Fence>, expected: State) -> Error {
        if let Some(fence) = fence {
            match self.owner(request_id).await {
                Ok(owner) if !owner.accepts(fence) => return owner.refusal(request_id, fence),
                Ok(_) => {}
                Err(err) => return err,
            }
        }
        self.state_error(request_id, expected).await
    }

    async fn insert_logs_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        entries: &[JobLog],
    ) -> Result<(), Error> {
        for chunk in entries.chunks(LOG_ROWS_PER_STATEMENT) {
            let mut insert = QueryBuilder::<DB>::new(
                "INSERT INTO job_log (request_id, job_id, try, name, type, state, started_at, finished_at, exit, error, stdout, stderr) ",
            );
            insert.push_values(chunk, |mut row, entry| {
                row.push_bind(entry.request_id.as_str())
                    .push_bind(entry.job_id.as_str())
                    .push_bind(i32::try_from(entry.r#try).unwrap_or(i32::MAX))
                    .push_bind(entry.name.as_str())
                    .push_bind(entry.job_type.as_str())
                    .push_bind(state_value(entry.state))
                    .push_bind(entry.started_at)
                    .push_bind(entry.finished_at)
                    .push_bind(entry.exit)
                    .push_bind(entry.error.as_str())
                    .push_bind(entry.stdout.as_str())
                    .push_bind(entry.stderr.as_str());
            });
            insert.push(" ON CONFLICT (request_id, job_id, try) DO NOTHING");
            insert.build().execute(&mut **tx).await?;
        }
        Ok(())
    }

    /// Inserts new requests (each with its chain) in multi-row statements: the rows of
    /// `requests`, `request_archives`, `request_args` and `request_audit`.
    async fn create_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        creates: &[(&Request, &CreateRequest, Option<&AuditEvent>)],
    ) -> Result<(), Error> {
        let mut archives = Vec::with_capacity(creates.len());
        for (request, create_request, _) in creates {
            let Some(chain) = &request.job_chain else {
                return Err(Error::Invalid(
                    "a new request needs its job chain".to_owned(),
                ));
            };
            archives.push((
                request.id.as_str(),
                to_json("create request", create_request)?,
                to_json("request args", &request.args)?,
                to_json("job chain", chain)?,
            ));
        }
        for chunk in creates.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let mut insert = QueryBuilder::<DB>::new(
                "INSERT INTO requests (request_id, type, state, user_name, created_at, total_jobs, finished_jobs, epoch, spec_version) ",
            );
            insert.push_values(chunk, |mut row, (request, _, _)| {
                row.push_bind(request.id.as_str())
                    .push_bind(request.request_type.as_str())
                    .push_bind(state_value(request.state))
                    .push_bind(request.user.as_str())
                    .push_bind(micros(request.created_at))
                    .push_bind(count(request.total_jobs))
                    .push("0, 1, NULLIF(")
                    .push_bind_unseparated(request.spec_version.as_str())
                    .push_unseparated(", '')");
            });
            insert.build().execute(&mut **tx).await?;
        }
        for chunk in archives.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let mut insert = QueryBuilder::<DB>::new(
                "INSERT INTO request_archives (request_id, create_request, args, job_chain) ",
            );
            insert.push_values(chunk, |mut row, (id, create, args, chain)| {
                row.push_bind(*id)
                    .push_bind(create.as_str())
                    .push_bind(args.as_str())
                    .push_bind(chain.as_str());
            });
            insert.build().execute(&mut **tx).await?;
        }
        let args: Vec<(&str, &str, String)> = creates
            .iter()
            .flat_map(|(request, _, _)| {
                request
                    .args
                    .iter()
                    .map(|arg| (request.id.as_str(), arg.name.as_str(), arg_text(&arg.value)))
            })
            .collect();
        for chunk in args.chunks(LOG_ROWS_PER_STATEMENT) {
            let mut insert =
                QueryBuilder::<DB>::new("INSERT INTO request_args (request_id, name, value) ");
            insert.push_values(chunk, |mut row, (id, name, value)| {
                row.push_bind(*id)
                    .push_bind(*name)
                    .push_bind(value.as_str());
            });
            insert.build().execute(&mut **tx).await?;
        }
        let events: Vec<(&str, &AuditEvent)> = creates
            .iter()
            .filter_map(|(request, _, event)| event.map(|event| (request.id.as_str(), event)))
            .collect();
        for chunk in events.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let mut insert = QueryBuilder::<DB>::new(
                "INSERT INTO request_audit (request_id, at, action, user_name, address) ",
            );
            insert.push_values(chunk, |mut row, (id, event)| {
                row.push_bind(*id)
                    .push_bind(micros(event.at))
                    .push_bind(event.action.as_str())
                    .push_bind(event.user.as_str())
                    .push_bind(event.address.as_str());
            });
            insert.build().execute(&mut **tx).await?;
        }
        Ok(())
    }

    /// The owners of `request_ids`, read in the transaction.
    /// `select` (a query of `requests`) for the requests `ids` (one statement's worth:
    /// callers chunk by [`REQUEST_ROWS_PER_STATEMENT`]).
    fn requests_in<'a>(select: &str, ids: impl Iterator<Item = &'a str>) -> QueryBuilder<DB> {
        let mut query = QueryBuilder::<DB>::new(select);
        query.push(" WHERE request_id IN (");
        let mut list = query.separated(", ");
        for id in ids {
            list.push_bind(id);
        }
        query.push(")");
        query
    }

    async fn owners_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        request_ids: &[&str],
    ) -> Result<HashMap<String, Owner>, Error> {
        let mut owners = HashMap::new();
        for chunk in request_ids.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let mut select = Self::requests_in(
                "SELECT request_id, state, jr_instance, epoch FROM requests",
                chunk.iter().copied(),
            );
            for row in select.build().fetch_all(&mut **tx).await? {
                owners.insert(
                    row.try_get("request_id")?,
                    Owner {
                        state: state_of(row.try_get("state")?)?,
                        instance: row
                            .try_get::<Option<String>, _>("jr_instance")?
                            .unwrap_or_default(),
                        epoch: u64::try_from(row.try_get::<i64, _>("epoch")?).unwrap_or(0),
                    },
                );
            }
        }
        Ok(owners)
    }

    /// PENDING → RUNNING for many requests in one statement per chunk; returns, per
    /// start, whether it is paused if it started.
    async fn start_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        starts: &[StartRequest],
    ) -> Result<Vec<Option<bool>>, Error> {
        let mut started = HashMap::new();
        for chunk in starts.chunks(REQUEST_ROWS_PER_STATEMENT) {
            // As start_request: never before it was created; only at the hand-over's epoch.
            let mut update = QueryBuilder::<DB>::new("UPDATE requests SET state = ");
            update
                .push_bind(state_value(State::Running))
                .push(
                    ", started_at = CASE WHEN v.column2 < created_at THEN created_at ELSE v.column2 END, \
                     jr_url = v.column3, jr_instance = NULLIF(v.column4, '') FROM (",
                )
                .push_values(chunk, |mut row, start| {
                    row.push_bind(start.request_id.as_str())
                        .push_bind(micros(start.at))
                        .push_bind(start.jr_url.as_str())
                        .push_bind(instance_value(start.owner.as_ref()))
                        .push_bind(epoch_value(start.owner.as_ref()));
                })
                .push(") AS v WHERE request_id = v.column1 AND state = ")
                .push_bind(state_value(State::Pending))
                .push(" AND (v.column5 < 0 OR epoch = v.column5) RETURNING request_id, paused");
            for row in update.build().fetch_all(&mut **tx).await? {
                started.insert(
                    row.try_get::<String, _>("request_id")?,
                    row.try_get::<i32, _>("paused")? != 0,
                );
            }
        }
        Ok(starts
            .iter()
            .map(|start| started.remove(&start.request_id))
            .collect())
    }

    /// RUNNING → a final state for many requests in one statement per chunk (their
    /// started tries forgotten by a trigger); returns, per finish, the request if this
    /// finish ended it.
    async fn finish_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        finishes: &[(FinishRequest, Option<Fence>)],
    ) -> Result<Vec<Option<Request>>, Error> {
        let mut finished: HashMap<String, Request> = HashMap::new();
        for chunk in finishes.chunks(REQUEST_ROWS_PER_STATEMENT) {
            // As finish_request: never before it started; only from the owner.
            let mut update = QueryBuilder::<DB>::new(
                "UPDATE requests SET state = v.column2, \
                 finished_at = CASE WHEN v.column3 < started_at THEN started_at ELSE v.column3 END, \
                 finished_jobs = v.column4, jr_url = NULL, error = v.column5 FROM (",
            );
            update
                .push_values(chunk, |mut row, (finish, fence)| {
                    row.push_bind(finish.request_id.as_str())
                        .push_bind(state_value(finish.state))
                        .push_bind(micros(finish.finished_at))
                        .push_bind(count(finish.finished_jobs))
                        .push_bind(finish.error.as_str())
                        .push_bind(epoch_value(fence.as_ref()))
                        .push_bind(instance_value(fence.as_ref()));
                })
                .push(") AS v WHERE request_id = v.column1 AND state = ")
                .push_bind(state_value(State::Running))
                .push(
                    " AND (v.column6 < 0 OR (epoch = v.column6 AND (jr_instance IS NULL OR jr_instance = v.column7))) \
                     RETURNING request_id, type, state, user_name, created_at, started_at, finished_at, \
                     total_jobs, finished_jobs, jr_url, error, paused, spec_version",
                );
            for row in update.build().fetch_all(&mut **tx).await? {
                let request = Self::request_from_row(&row)?;
                finished.insert(request.id.clone(), request);
            }
        }
        // Their started tries went with the UPDATE (a trigger: migrations 0009/0010).
        Ok(finishes
            .iter()
            .map(|(finish, _)| finished.remove(&finish.request_id))
            .collect())
    }

    /// Progress of many RUNNING requests, one statement per chunk.
    async fn progress_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        updates: &[(&str, u64)],
    ) -> Result<(), Error> {
        for chunk in updates.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let mut update =
                QueryBuilder::<DB>::new("UPDATE requests SET finished_jobs = v.column2 FROM (");
            update
                .push_values(chunk, |mut row, (request_id, finished_jobs)| {
                    row.push_bind(*request_id).push_bind(count(*finished_jobs));
                })
                .push(") AS v WHERE request_id = v.column1 AND state = ")
                .push_bind(state_value(State::Running));
            update.build().execute(&mut **tx).await?;
        }
        Ok(())
    }

    /// Deletes the suspended chain of `request_id` that `host` claimed (the first step of
    /// resuming it or failing it).
    async fn delete_claimed(
        tx: &mut sqlx::Transaction<'_, DB>,
        request_id: &str,
        host: &str,
    ) -> Result<(), Error> {
        let deleted =
            sqlx::query("DELETE FROM suspended_job_chains WHERE request_id = $1 AND rm_host = $2")
                .bind(request_id)
                .bind(host)
                .execute(&mut **tx)
                .await?;
        if DB::rows_affected(&deleted) == 0 {
            return Err(Error::Conflict(format!(
                "the suspended job chain of request {request_id} is not claimed by {host}"
            )));
        }
        Ok(())
    }

    fn runner_from_row(row: &DB::Row, now: DateTime<Utc>) -> Result<JobRunner, Error> {
        let renewed_at: i64 = row.try_get("renewed_at")?;
        let lease_us: i64 = row.try_get("lease_us")?;
        let lost_at: Option<i64> = row.try_get("lost_at")?;
        let ended_at: Option<i64> = row.try_get("ended_at")?;
        let state = match (lost_at, ended_at) {
            (_, Some(_)) => RunnerState::Stopped,
            (Some(_), None) => RunnerState::Lost,
            (None, None) if renewed_at.saturating_add(lease_us) < micros(now) => RunnerState::Lost,
            (None, None) => RunnerState::Live,
        };
        Ok(JobRunner {
            instance_id: row.try_get("instance_id")?,
            url: row.try_get("url")?,
            host: row.try_get("host")?,
            pid: u32::try_from(row.try_get::<i64, _>("pid")?).unwrap_or(0),
            started_at: from_micros(row.try_get("started_at")?),
            renewed_at: from_micros(renewed_at),
            lease: proto::duration::format(std::time::Duration::from_micros(
                u64::try_from(lease_us).unwrap_or(0),
            )),
            running_requests: u64::try_from(row.try_get::<i64, _>("running").unwrap_or(0))
                .unwrap_or(0),
            state,
            ended_at: ended_at.or(lost_at).map(from_micros),
        })
    }

    async fn runner(&self, instance: &str, now: DateTime<Utc>) -> Result<JobRunner, Error> {
        let row = sqlx::query(concat!(runner_select!(), " WHERE r.instance_id = $2"))
            .bind(state_value(State::Running))
            .bind(instance)
            .fetch_optional(&self.readers)
            .await?
            .ok_or_else(|| Error::not_found("job runner instance", instance))?;
        Self::runner_from_row(&row, now)
    }

    fn request_from_row(row: &DB::Row) -> Result<Request, Error> {
        let time = |name: &str| -> Result<Option<DateTime<Utc>>, Error> {
            Ok(row.try_get::<Option<i64>, _>(name)?.map(from_micros))
        };
        Ok(Request {
            id: row.try_get("request_id")?,
            request_type: row.try_get("type")?,
            state: state_of(row.try_get("state")?)?,
            user: row.try_get("user_name")?,
            args: Vec::new(),
            created_at: time("created_at")?.unwrap_or_default(),
            started_at: time("started_at")?,
            finished_at: time("finished_at")?,
            job_chain: None,
            total_jobs: u64::try_from(row.try_get::<i64, _>("total_jobs")?).unwrap_or(0),
            finished_jobs: u64::try_from(row.try_get::<i64, _>("finished_jobs")?).unwrap_or(0),
            jr_url: row
                .try_get::<Option<String>, _>("jr_url")?
                .unwrap_or_default(),
            error: row.try_get("error")?,
            paused: row.try_get::<i32, _>("paused")? != 0,
            spec_version: row
                .try_get::<Option<String>, _>("spec_version")?
                .unwrap_or_default(),
        })
    }

    fn job_log_from_row(row: &DB::Row) -> Result<JobLog, Error> {
        Ok(JobLog {
            request_id: row.try_get("request_id")?,
            job_id: row.try_get("job_id")?,
            r#try: u32::try_from(row.try_get::<i32, _>("try")?).unwrap_or(0),
            name: row.try_get("name")?,
            job_type: row.try_get("type")?,
            started_at: row.try_get("started_at")?,
            finished_at: row.try_get("finished_at")?,
            state: state_of(row.try_get("state")?)?,
            exit: row.try_get("exit")?,
            error: row.try_get("error")?,
            stdout: row.try_get("stdout")?,
            stderr: row.try_get("stderr")?,
        })
    }

    /// Sets each job of `chain` to its latest logged state and try.
    async fn live_states(&self, chain: &mut JobChain) -> Result<(), Error> {
        for latest in self.latest_states(chain.request_id.as_str()).await? {
            if let Some(job) = chain.jobs.get_mut(&latest.job_id) {
                job.tries = latest.tries;
                job.state = latest.state;
            }
        }
        Ok(())
    }

    /// Each logged job's highest try and its state.
    async fn latest_states(&self, request_id: &str) -> Result<Vec<JobState>, Error> {
        let rows = sqlx::query("SELECT job_id, try, state FROM job_log WHERE request_id = $1")
            .bind(request_id)
            .fetch_all(&self.readers)
            .await?;
        let mut latest: HashMap<String, JobState> = HashMap::with_capacity(rows.len());
        for row in rows {
            let job_id: String = row.try_get("job_id")?;
            let tries = u32::try_from(row.try_get::<i32, _>("try")?).unwrap_or(0);
            let state = state_of(row.try_get("state")?)?;
            match latest.get_mut(&job_id) {
                Some(known) if known.tries > tries => {}
                Some(known) => {
                    known.tries = tries;
                    known.state = state;
                }
                None => {
                    latest.insert(
                        job_id.clone(),
                        JobState {
                            job_id,
                            tries,
                            state,
                        },
                    );
                }
            }
        }
        Ok(latest.into_values().collect())
    }

    async fn archived_chain(&self, request_id: &str) -> Result<JobChain, Error> {
        let row = sqlx::query("SELECT job_chain FROM request_archives WHERE request_id = $1")
            .bind(request_id)
            .fetch_optional(&self.readers)
            .await?
            .ok_or_else(|| Error::not_found("job chain of request", request_id))?;
        let text: String = row.try_get("job_chain")?;
        from_json("stored job chain", &text)
    }

    /// Runs a conditional update of one request; no row means the request was not in the
    /// state expected (or does not exist), which the error says.
    async fn update_request(
        &self,
        query: sqlx::query::Query<'_, DB, DB::Arguments>,
        request_id: &str,
        expected: State,
    ) -> Result<(), Error> {
        let done = query.execute(&self.pool).await?;
        if DB::rows_affected(&done) == 0 {
            return Err(self.state_error(request_id, expected).await);
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl<DB> Store for SqlStore<DB>
where
    DB: Backend,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'a> &'a str: ColumnIndex<DB::Row> + Encode<'a, DB> + Type<DB>,
    String: for<'r> Decode<'r, DB> + for<'a> Encode<'a, DB> + Type<DB>,
    i16: for<'r> Decode<'r, DB> + for<'a> Encode<'a, DB> + Type<DB>,
    i32: for<'r> Decode<'r, DB> + for<'a> Encode<'a, DB> + Type<DB>,
    i64: for<'r> Decode<'r, DB> + for<'a> Encode<'a, DB> + Type<DB>,
    Option<String>: for<'r> Decode<'r, DB> + Type<DB>,
    Option<i64>: for<'r> Decode<'r, DB> + Type<DB>,
{
    async fn create_request(
        &self,
        request: &Request,
        create_request: &CreateRequest,
        created: Option<&AuditEvent>,
    ) -> Result<(), Error> {
        let mut tx = self.pool.begin().await?;
        Self::create_in(&mut tx, &[(request, create_request, created)]).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn write_batch(&self, batch: &WriteBatch) -> Result<BatchWritten, Error> {
        let mut tx = self.pool.begin().await?;
        let mut refused = Vec::new();
        // The refused (request, fence) pairs: each report is judged by its own fence.
        let mut barred: std::collections::HashSet<(&str, &Fence)> =
            std::collections::HashSet::new();
        let fences = batch.fences();
        if !fences.is_empty() {
            let mut ids: Vec<&str> = fences.iter().map(|(id, _)| *id).collect();
            ids.sort_unstable();
            ids.dedup();
            let owners = Self::owners_in(&mut tx, &ids).await?;
            for (request_id, fence) in fences {
                let refusal = match owners.get(request_id) {
                    None => Error::not_found("request", request_id),
                    Some(owner) if !owner.accepts(fence) => owner.refusal(request_id, fence),
                    Some(_) => continue,
                };
                barred.insert((request_id, fence));
                refused.push((request_id.to_owned(), fence.clone(), refusal));
            }
        }
        let creates: Vec<_> = batch
            .creates
            .iter()
            .map(|new| (&new.request, &new.create_request, new.created.as_ref()))
            .collect();
        if !creates.is_empty() {
            Self::create_in(&mut tx, &creates).await?;
        }
        let started = if batch.starts.is_empty() {
            Vec::new()
        } else {
            Self::start_in(&mut tx, &batch.starts).await?
        };
        let logs: std::borrow::Cow<'_, [JobLog]> = if barred.is_empty() {
            (&batch.logs[..]).into()
        } else {
            let mut kept = vec![true; batch.logs.len()];
            for (run, fence) in &batch.log_fences {
                for (at, entry) in batch.logs.iter().enumerate().take(run.end).skip(run.start) {
                    if barred.contains(&(entry.request_id.as_str(), fence)) {
                        kept[at] = false;
                    }
                }
            }
            batch
                .logs
                .iter()
                .zip(kept)
                .filter(|(_, kept)| *kept)
                .map(|(entry, _)| entry.clone())
                .collect::<Vec<_>>()
                .into()
        };
        if !logs.is_empty() {
            Self::insert_logs_in(&mut tx, &logs).await?;
        }
        let progress: Vec<(&str, u64)> = batch
            .progress
            .iter()
            .filter(|(id, _, fence)| {
                fence
                    .as_ref()
                    .is_none_or(|fence| !barred.contains(&(id.as_str(), fence)))
            })
            .map(|(id, n, _)| (id.as_str(), *n))
            .collect();
        if !progress.is_empty() {
            Self::progress_in(&mut tx, &progress).await?;
        }
        let finished = if batch.finishes.is_empty() {
            Vec::new()
        } else {
            Self::finish_in(&mut tx, &batch.finishes).await?
        };
        tx.commit().await?;
        Ok(BatchWritten {
            started,
            finished,
            refused,
        })
    }

    async fn get_request(&self, request_id: &str, with_chain: bool) -> Result<Request, Error> {
        let row = sqlx::query(
            "SELECT r.request_id, r.type, r.state, r.user_name, r.created_at, r.started_at, r.finished_at, \
             r.total_jobs, r.finished_jobs, r.jr_url, r.error, r.paused, r.spec_version, a.args \
             FROM requests r LEFT JOIN request_archives a ON a.request_id = r.request_id \
             WHERE r.request_id = $1",
        )
        .bind(request_id)
        .fetch_optional(&self.readers)
        .await?
        .ok_or_else(|| Error::not_found("request", request_id))?;
        let mut request = Self::request_from_row(&row)?;
        if let Some(args) = row
            .try_get::<Option<String>, _>("args")?
            .filter(|a| !a.is_empty())
        {
            request.args = from_json("stored request args", &args)?;
        }
        if with_chain {
            request.job_chain = Some(self.job_chain(request_id).await?);
        }
        Ok(request)
    }

    async fn ended_among(&self, request_ids: &[String]) -> Result<Vec<String>, Error> {
        let mut ended = Vec::new();
        for chunk in request_ids.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let mut select = Self::requests_in(
                "SELECT request_id, state FROM requests",
                chunk.iter().map(String::as_str),
            );
            for row in select.build().fetch_all(&self.readers).await? {
                if state_of(row.try_get("state")?)?.is_finished() {
                    ended.push(row.try_get("request_id")?);
                }
            }
        }
        Ok(ended)
    }

    async fn job_chain(&self, request_id: &str) -> Result<JobChain, Error> {
        let mut chain = self.archived_chain(request_id).await?;
        self.live_states(&mut chain).await?;
        Ok(chain)
    }

    async fn hand_over(&self, request_id: &RequestId, expected: State) -> Result<u64, Error> {
        let row = sqlx::query(
            "UPDATE requests SET epoch = epoch + 1 WHERE request_id = $1 AND state = $2 RETURNING epoch",
        )
        .bind(request_id.as_str())
        .bind(state_value(expected))
        .fetch_optional(&self.pool)
        .await?;
        match row {
            Some(row) => Ok(u64::try_from(row.try_get::<i64, _>("epoch")?).unwrap_or(0)),
            None => Err(self.state_error(request_id, expected).await),
        }
    }

    async fn start_request(
        &self,
        request_id: &RequestId,
        jr_url: &str,
        owner: Option<&Fence>,
        at: DateTime<Utc>,
    ) -> Result<bool, Error> {
        // Never before it was created: times stay in order whatever the clocks say.
        let query = sqlx::query(
            "UPDATE requests SET state = $4, started_at = CASE WHEN $2 < created_at THEN created_at ELSE $2 END, \
             jr_url = $3, jr_instance = NULLIF($6, '') WHERE request_id = $1 AND state = $5 AND ($7 < 0 OR epoch = $7) \
             RETURNING paused",
        )
        .bind(request_id.as_str())
        .bind(micros(at))
        .bind(jr_url)
        .bind(state_value(State::Running))
        .bind(state_value(State::Pending))
        .bind(instance_value(owner))
        .bind(epoch_value(owner));
        match query.fetch_optional(&self.pool).await? {
            Some(row) => Ok(row.try_get::<i32, _>("paused")? != 0),
            None => Err(self.refusal(request_id, owner, State::Pending).await),
        }
    }

    async fn claim_schedule_run(
        &self,
        schedule: &str,
        due_at: DateTime<Utc>,
        host: &str,
    ) -> Result<bool, Error> {
        let done = sqlx::query(
            "INSERT INTO schedule_runs (schedule, due_at, rm_host) VALUES ($1, $2, $3) \
             ON CONFLICT (schedule, due_at) DO NOTHING",
        )
        .bind(schedule)
        .bind(micros(due_at))
        .bind(host)
        .execute(&self.pool)
        .await?;
        Ok(DB::rows_affected(&done) == 1)
    }

    async fn schedule_run_done(
        &self,
        schedule: &str,
        due_at: DateTime<Utc>,
        request_id: &str,
        skipped: &str,
    ) -> Result<(), Error> {
        sqlx::query(
            "UPDATE schedule_runs SET request_id = NULLIF($3, ''), skipped = $4 \
             WHERE schedule = $1 AND due_at = $2",
        )
        .bind(schedule)
        .bind(micros(due_at))
        .bind(request_id)
        .bind(skipped)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn schedule_runs(
        &self,
        schedule: &str,
        limit: u32,
    ) -> Result<Vec<proto::ScheduleRun>, Error> {
        let rows = sqlx::query(
            "SELECT due_at, rm_host, request_id, skipped FROM schedule_runs \
             WHERE schedule = $1 ORDER BY due_at DESC LIMIT $2",
        )
        .bind(schedule)
        .bind(i64::from(limit))
        .fetch_all(&self.readers)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(proto::ScheduleRun {
                    schedule: schedule.to_owned(),
                    due_at: from_micros(row.try_get("due_at")?),
                    rm_host: row.try_get("rm_host")?,
                    request_id: row
                        .try_get::<Option<String>, _>("request_id")?
                        .unwrap_or_default(),
                    skipped: row.try_get("skipped")?,
                })
            })
            .collect()
    }

    async fn add_answer(
        &self,
        request_id: &str,
        job_id: &str,
        answer: &proto::Answer,
    ) -> Result<bool, Error> {
        let at = DateTime::parse_from_rfc3339(&answer.at)
            .map(|at| at.with_timezone(&Utc))
            .map_err(|err| Error::Invalid(format!("answer time {:?}: {err}", answer.at)))?;
        let done = sqlx::query(
            "INSERT INTO approvals (request_id, job_id, approved, user_name, at, comment) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (request_id, job_id) DO NOTHING",
        )
        .bind(request_id)
        .bind(job_id)
        .bind(i32::from(answer.approved))
        .bind(answer.user.as_str())
        .bind(micros(at))
        .bind(answer.comment.as_str())
        .execute(&self.pool)
        .await?;
        Ok(DB::rows_affected(&done) == 1)
    }

    async fn answers(&self, request_id: &str) -> Result<Vec<(String, proto::Answer)>, Error> {
        let rows = sqlx::query(
            "SELECT job_id, approved, user_name, at, comment FROM approvals WHERE request_id = $1 ORDER BY job_id",
        )
        .bind(request_id)
        .fetch_all(&self.readers)
        .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get("job_id")?,
                    proto::Answer {
                        approved: row.try_get::<i32, _>("approved")? != 0,
                        user: row.try_get("user_name")?,
                        at: from_micros(row.try_get("at")?)
                            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                        comment: row.try_get("comment")?,
                    },
                ))
            })
            .collect()
    }

    async fn remove_answers(&self, request_id: &str, job_ids: &[String]) -> Result<(), Error> {
        for job_id in job_ids {
            sqlx::query("DELETE FROM approvals WHERE request_id = $1 AND job_id = $2")
                .bind(request_id)
                .bind(job_id.as_str())
                .execute(&self.pool)
                .await?;
        }
        Ok(())
    }

    async fn add_spec_version(&self, specs: &SpecVersion, at: DateTime<Utc>) -> Result<(), Error> {
        let files = to_json("spec files", &specs.files)?;
        sqlx::query(
            "INSERT INTO spec_versions (version, files, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT (version) DO NOTHING",
        )
        .bind(specs.version.as_str())
        .bind(files)
        .bind(micros(at))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn spec_version(&self, version: &str) -> Result<SpecVersion, Error> {
        let row = sqlx::query("SELECT files FROM spec_versions WHERE version = $1")
            .bind(version)
            .fetch_optional(&self.readers)
            .await?
            .ok_or_else(|| Error::not_found("spec version", version))?;
        let files: String = row.try_get("files")?;
        Ok(SpecVersion {
            version: version.to_owned(),
            files: from_json("stored spec files", &files)?,
        })
    }

    async fn set_paused(&self, request_id: &str, paused: bool) -> Result<Request, Error> {
        let updated = sqlx::query(
            "UPDATE requests SET paused = $2 WHERE request_id = $1 AND state IN ($3, $4, $5)",
        )
        .bind(request_id)
        .bind(i32::from(paused))
        .bind(state_value(State::Pending))
        .bind(state_value(State::Running))
        .bind(state_value(State::Suspended))
        .execute(&self.pool)
        .await?;
        if DB::rows_affected(&updated) == 0 {
            return Err(self.state_error(request_id, State::Running).await);
        }
        self.get_request(request_id, false).await
    }

    async fn owner(&self, request_id: &str) -> Result<Owner, Error> {
        let row =
            sqlx::query("SELECT state, jr_instance, epoch FROM requests WHERE request_id = $1")
                .bind(request_id)
                .fetch_optional(&self.readers)
                .await?
                .ok_or_else(|| Error::not_found("request", request_id))?;
        Ok(Owner {
            state: state_of(row.try_get("state")?)?,
            instance: row
                .try_get::<Option<String>, _>("jr_instance")?
                .unwrap_or_default(),
            epoch: u64::try_from(row.try_get::<i64, _>("epoch")?).unwrap_or(0),
        })
    }

    async fn fail_pending(&self, request_id: &str, at: DateTime<Utc>) -> Result<(), Error> {
        let query = sqlx::query(
            "UPDATE requests SET state = $3, finished_at = CASE WHEN $2 < created_at THEN created_at ELSE $2 END, \
             jr_url = NULL WHERE request_id = $1 AND state = $4",
        )
        .bind(request_id)
        .bind(micros(at))
        .bind(state_value(State::Fail))
        .bind(state_value(State::Pending));
        self.update_request(query, request_id, State::Pending).await
    }

    async fn finish_request(
        &self,
        finish: &FinishRequest,
        fence: Option<&Fence>,
    ) -> Result<Finished, Error> {
        if !finish.state.is_finished() {
            return Err(Error::Invalid(format!(
                "final state {} is not a final state; expected COMPLETE, FAIL or STOPPED",
                finish.state
            )));
        }
        // Never before it started (a Job Runner's clock may be behind).
        let done = sqlx::query(
            "UPDATE requests SET state = $2, \
             finished_at = CASE WHEN $3 < started_at THEN started_at ELSE $3 END, \
             finished_jobs = $4, jr_url = NULL, error = $8 WHERE request_id = $1 AND state = $5 \
             AND ($6 < 0 OR (epoch = $6 AND (jr_instance IS NULL OR jr_instance = $7)))",
        )
        .bind(finish.request_id.as_str())
        .bind(state_value(finish.state))
        .bind(micros(finish.finished_at))
        .bind(count(finish.finished_jobs))
        .bind(state_value(State::Running))
        .bind(epoch_value(fence))
        .bind(instance_value(fence))
        .bind(finish.error.as_str())
        .execute(&self.pool)
        .await?;
        // Its started tries go with the same statement (a trigger: migrations 0009/0010).
        if DB::rows_affected(&done) == 1 {
            return Ok(Finished::Now);
        }
        match self
            .refusal(&finish.request_id, fence, State::Running)
            .await
        {
            Error::State { actual, .. } if actual.is_finished() => Ok(Finished::Already(actual)),
            err => Err(err),
        }
    }

    async fn update_progress(&self, request_id: &str, finished_jobs: u64) -> Result<(), Error> {
        sqlx::query(UPDATE_PROGRESS)
            .bind(request_id)
            .bind(count(finished_jobs))
            .bind(state_value(State::Running))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn update_progress_many(&self, updates: &[(String, u64)]) -> Result<(), Error> {
        let mut tx = self.pool.begin().await?;
        for (request_id, finished_jobs) in updates {
            sqlx::query(UPDATE_PROGRESS)
                .bind(request_id.as_str())
                .bind(count(*finished_jobs))
                .bind(state_value(State::Running))
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn insert_job_logs(&self, entries: &[JobLog]) -> Result<(), Error> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await?;
        Self::insert_logs_in(&mut tx, entries).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn insert_output(&self, chunks: &[OutputChunk]) -> Result<(), Error> {
        if chunks.is_empty() {
            return Ok(());
        }
        // Per try and stream, how far the output has come.
        let mut ends: std::collections::BTreeMap<(&str, &str, u32, Stream), u64> =
            Default::default();
        for chunk in chunks {
            let end = ends
                .entry((&chunk.request_id, &chunk.job_id, chunk.r#try, chunk.stream))
                .or_default();
            *end = (*end).max(chunk.end());
        }
        let mut tx = self.pool.begin().await?;
        for rows in chunks.chunks(OUTPUT_ROWS_PER_STATEMENT) {
            let mut insert = QueryBuilder::<DB>::new(
                "INSERT INTO job_output (request_id, job_id, try, stream, byte_offset, byte_len, data) ",
            );
            insert.push_values(rows, |mut row, chunk| {
                row.push_bind(chunk.request_id.as_str())
                    .push_bind(chunk.job_id.as_str())
                    .push_bind(i32::try_from(chunk.r#try).unwrap_or(i32::MAX))
                    .push_bind(stream_value(chunk.stream))
                    .push_bind(count(chunk.offset))
                    .push_bind(count(chunk.data.len() as u64))
                    .push_bind(chunk.data.as_str());
            });
            insert.push(" ON CONFLICT (request_id, job_id, try, stream, byte_offset) DO NOTHING");
            insert.build().execute(&mut *tx).await?;
        }
        for ((request_id, job_id, try_no, stream), end) in ends {
            let Some(tail_start) = end.checked_sub(proto::OUTPUT_TAIL_BYTES) else {
                continue;
            };
            if tail_start <= proto::OUTPUT_HEAD_BYTES {
                continue;
            }
            sqlx::query(
                "DELETE FROM job_output WHERE request_id = $1 AND job_id = $2 AND try = $3 \
                 AND stream = $4 AND byte_offset >= $5 AND byte_offset + byte_len <= $6",
            )
            .bind(request_id)
            .bind(job_id)
            .bind(i32::try_from(try_no).unwrap_or(i32::MAX))
            .bind(stream_value(stream))
            .bind(count(proto::OUTPUT_HEAD_BYTES))
            .bind(count(tail_start))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn output(
        &self,
        request_id: &str,
        query: &OutputQuery,
    ) -> Result<Vec<OutputChunk>, Error> {
        let mut select = QueryBuilder::<DB>::new(
            "SELECT seq, request_id, job_id, try, stream, byte_offset, data FROM job_output WHERE request_id = ",
        );
        select.push_bind(request_id.to_owned());
        select.push(" AND seq > ").push_bind(query.after);
        if let Some(job_id) = &query.job {
            select.push(" AND job_id = ").push_bind(job_id.clone());
        }
        if let Some(try_no) = query.r#try {
            select
                .push(" AND try = ")
                .push_bind(i32::try_from(try_no).unwrap_or(i32::MAX));
        }
        select
            .push(" ORDER BY seq LIMIT ")
            .push_bind(i64::from(query.limit.clamp(1, OutputQuery::MAX_LIMIT)));
        let rows = select.build().fetch_all(&self.readers).await?;
        rows.iter()
            .map(|row| {
                Ok(OutputChunk {
                    seq: row.try_get("seq")?,
                    request_id: row.try_get("request_id")?,
                    job_id: row.try_get("job_id")?,
                    r#try: u32::try_from(row.try_get::<i32, _>("try")?).unwrap_or(0),
                    stream: stream_of(row.try_get("stream")?)?,
                    offset: u64::try_from(row.try_get::<i64, _>("byte_offset")?).unwrap_or(0),
                    data: row.try_get("data")?,
                })
            })
            .collect()
    }

    async fn job_log(&self, request_id: &str) -> Result<Vec<JobLog>, Error> {
        let rows = sqlx::query("SELECT * FROM job_log WHERE request_id = $1 ORDER BY job_id, try")
            .bind(request_id)
            .fetch_all(&self.readers)
            .await?;
        rows.iter().map(Self::job_log_from_row).collect()
    }

    async fn latest_job_log(&self, request_id: &RequestId, job_id: &str) -> Result<JobLog, Error> {
        let row = sqlx::query(
            "SELECT * FROM job_log WHERE request_id = $1 AND job_id = $2 ORDER BY try DESC LIMIT 1",
        )
        .bind(request_id.as_str())
        .bind(job_id)
        .fetch_optional(&self.readers)
        .await?
        .ok_or_else(|| Error::NotFound {
            what: "job",
            id: format!("{job_id} of request {request_id}"),
        })?;
        Self::job_log_from_row(&row)
    }

    async fn add_audit(&self, request_id: &str, event: &AuditEvent) -> Result<(), Error> {
        sqlx::query(
            "INSERT INTO request_audit (request_id, at, action, user_name, address) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(request_id)
        .bind(micros(event.at))
        .bind(event.action.as_str())
        .bind(event.user.as_str())
        .bind(event.address.as_str())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn audit(&self, request_id: &str) -> Result<Vec<AuditEvent>, Error> {
        let rows = sqlx::query(
            "SELECT at, action, user_name, address FROM request_audit WHERE request_id = $1 ORDER BY at",
        )
        .bind(request_id)
        .fetch_all(&self.readers)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(AuditEvent {
                    at: from_micros(row.try_get("at")?),
                    action: row.try_get("action")?,
                    user: row.try_get("user_name")?,
                    address: row.try_get("address")?,
                })
            })
            .collect()
    }

    async fn remove_finished(&self, before: DateTime<Utc>, limit: u64) -> Result<Removed, Error> {
        let mut tx = self.pool.begin().await?;
        if let Some(lock) = DB::RETENTION_LOCK_SQL {
            let row = sqlx::query(lock).fetch_one(&mut *tx).await?;
            let got: i32 = row.try_get("got")?;
            if got == 0 {
                return Ok(Removed::default());
            }
        }
        let ids: Vec<String> = sqlx::query(
            "SELECT request_id FROM requests WHERE state IN ($1, $2, $3) AND finished_at < $4 \
             ORDER BY finished_at LIMIT $5",
        )
        .bind(state_value(State::Complete))
        .bind(state_value(State::Fail))
        .bind(state_value(State::Stopped))
        .bind(micros(before))
        .bind(i64::try_from(limit.max(1)).unwrap_or(i64::MAX))
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|row| row.try_get("request_id"))
        .collect::<Result<_, _>>()?;
        let mut removed = Removed::default();
        if !ids.is_empty() {
            let placeholders: Vec<String> = (1..=ids.len()).map(|n| format!("${n}")).collect();
            let list = placeholders.join(", ");
            // Children first: the archive and args refer to the request.
            for table in [
                "job_log",
                "job_output",
                "job_tries",
                "request_args",
                "request_archives",
                "request_audit",
                "approvals",
                "suspended_job_chains",
                "requests",
            ] {
                let sql = format!("DELETE FROM {table} WHERE request_id IN ({list})");
                let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
                for id in &ids {
                    query = query.bind(id.as_str());
                }
                let n = DB::rows_affected(&query.execute(&mut *tx).await?);
                match table {
                    "job_log" => removed.job_log_entries = n,
                    "requests" => removed.requests = n,
                    _ => {}
                }
            }
        }
        // Runners that ended or were lost before the cut-off, with nothing left to own.
        let runners = sqlx::query(
            "DELETE FROM job_runners WHERE COALESCE(ended_at, lost_at) < $1 \
             AND instance_id NOT IN (SELECT jr_instance FROM requests WHERE jr_instance IS NOT NULL AND state = $2)",
        )
        .bind(micros(before))
        .bind(state_value(State::Running))
        .execute(&mut *tx)
        .await?;
        removed.job_runners = DB::rows_affected(&runners);
        tx.commit().await?;
        Ok(removed)
    }

    async fn job_tries_log(&self, request_id: &str, job_id: &str) -> Result<Vec<JobLog>, Error> {
        let rows =
            sqlx::query("SELECT * FROM job_log WHERE request_id = $1 AND job_id = $2 ORDER BY try")
                .bind(request_id)
                .bind(job_id)
                .fetch_all(&self.readers)
                .await?;
        rows.iter().map(Self::job_log_from_row).collect()
    }

    async fn job_states(&self, request_id: &str) -> Result<Vec<JobState>, Error> {
        self.latest_states(request_id).await
    }

    async fn suspend_request(
        &self,
        suspended: &SuspendedJobChain,
        fence: Option<&Fence>,
        at: DateTime<Utc>,
    ) -> Result<(), Error> {
        let request_id = suspended.request_id.as_str();
        let suspended_json = to_json("suspended job chain", suspended)?;
        let mut tx = self.pool.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO suspended_job_chains (request_id, suspended_job_chain, rm_host, updated_at, suspended_at) \
             VALUES ($1, $2, NULL, $3, $3)",
        )
        .bind(request_id)
        .bind(suspended_json)
        .bind(micros(at))
        .execute(&mut *tx)
        .await;
        match inserted.map_err(Error::from) {
            Ok(_) => {}
            Err(Error::Duplicate(_)) => {
                drop(tx);
                // A runner that no longer owns the request hears that first.
                if let Some(fence) = fence {
                    let owner = self.owner(request_id).await?;
                    if !owner.accepts(fence) {
                        return Err(owner.refusal(request_id, fence));
                    }
                }
                return Err(Error::Conflict(format!(
                    "request {request_id} already has a suspended job chain"
                )));
            }
            // A chain for a request that does not exist breaks the foreign key.
            Err(Error::Database(_)) => {
                drop(tx);
                return Err(self.refusal(request_id, fence, State::Running).await);
            }
            Err(err) => return Err(err),
        }
        let updated = sqlx::query(
            "UPDATE requests SET state = $2, jr_url = NULL, jr_instance = NULL WHERE request_id = $1 AND state = $3 \
             AND ($4 < 0 OR (epoch = $4 AND (jr_instance IS NULL OR jr_instance = $5)))",
        )
        .bind(request_id)
        .bind(state_value(State::Suspended))
        .bind(state_value(State::Running))
        .bind(epoch_value(fence))
        .bind(instance_value(fence))
        .execute(&mut *tx)
        .await?;
        if DB::rows_affected(&updated) == 0 {
            drop(tx);
            return Err(self.refusal(request_id, fence, State::Running).await);
        }
        tx.commit().await?;
        Ok(())
    }

    async fn claim_suspended(
        &self,
        host: &str,
        at: DateTime<Utc>,
    ) -> Result<Option<SuspendedJobChain>, Error> {
        let row = sqlx::query(DB::CLAIM_SQL)
            .bind(host)
            .bind(micros(at))
            .fetch_optional(&self.pool)
            .await?;
        match row {
            None => Ok(None),
            Some(row) => {
                let text: String = row.try_get("suspended_job_chain")?;
                Ok(Some(from_json("stored suspended job chain", &text)?))
            }
        }
    }

    async fn resumed(
        &self,
        request_id: &RequestId,
        host: &str,
        jr_url: &str,
        owner: Option<&Fence>,
    ) -> Result<bool, Error> {
        let request_id = request_id.as_str();
        let mut tx = self.pool.begin().await?;
        Self::delete_claimed(&mut tx, request_id, host).await?;
        let updated = sqlx::query(
            "UPDATE requests SET state = $3, jr_url = $2, jr_instance = NULLIF($5, '') \
             WHERE request_id = $1 AND state = $4 AND ($6 < 0 OR epoch = $6) RETURNING paused",
        )
        .bind(request_id)
        .bind(jr_url)
        .bind(state_value(State::Running))
        .bind(state_value(State::Suspended))
        .bind(instance_value(owner))
        .bind(epoch_value(owner))
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        match updated {
            Some(row) => Ok(row.try_get::<i32, _>("paused")? != 0),
            None => Err(self.state_error(request_id, State::Suspended).await),
        }
    }

    async fn fail_suspended(
        &self,
        request_id: &RequestId,
        host: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), Error> {
        let request_id = request_id.as_str();
        let mut tx = self.pool.begin().await?;
        Self::delete_claimed(&mut tx, request_id, host).await?;
        sqlx::query(
            "UPDATE requests SET state = $3, \
             finished_at = CASE WHEN $2 < started_at THEN started_at ELSE $2 END, \
             jr_url = NULL, error = $5 WHERE request_id = $1 AND state = $4",
        )
        .bind(request_id)
        .bind(micros(at))
        .bind(state_value(State::Fail))
        .bind(state_value(State::Suspended))
        .bind(reason)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn unclaim(&self, request_id: &RequestId, host: &str) -> Result<(), Error> {
        let request_id = request_id.as_str();
        sqlx::query(
            "UPDATE suspended_job_chains SET rm_host = NULL, updated_at = $3 WHERE request_id = $1 AND rm_host = $2",
        )
        .bind(request_id)
        .bind(host)
        .bind(micros(Utc::now()))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn release_stale_claims(&self, before: DateTime<Utc>) -> Result<u64, Error> {
        let done = sqlx::query(
            "UPDATE suspended_job_chains SET rm_host = NULL, updated_at = $2 WHERE rm_host IS NOT NULL AND updated_at < $1",
        )
        .bind(micros(before))
        .bind(micros(Utc::now()))
        .execute(&self.pool)
        .await?;
        Ok(DB::rows_affected(&done))
    }

    async fn expire_suspended(
        &self,
        before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<String>, Error> {
        let rows = sqlx::query(
            "SELECT request_id FROM suspended_job_chains WHERE rm_host IS NULL AND suspended_at < $1",
        )
        .bind(micros(before))
        .fetch_all(&self.pool)
        .await?;
        let mut expired = Vec::new();
        for row in rows {
            let request_id: String = row.try_get("request_id")?;
            let mut tx = self.pool.begin().await?;
            // Deleting only an unclaimed chain is the claim: a resumer that got it first
            // wins.
            let deleted = sqlx::query(
                "DELETE FROM suspended_job_chains WHERE request_id = $1 AND rm_host IS NULL",
            )
            .bind(request_id.as_str())
            .execute(&mut *tx)
            .await?;
            if DB::rows_affected(&deleted) == 0 {
                continue;
            }
            sqlx::query(
                "UPDATE requests SET state = $3, \
                 finished_at = CASE WHEN $2 < started_at THEN started_at ELSE $2 END, \
                 jr_url = NULL, error = $5 WHERE request_id = $1 AND state = $4",
            )
            .bind(request_id.as_str())
            .bind(micros(now))
            .bind(state_value(State::Fail))
            .bind(state_value(State::Suspended))
            .bind("its suspended chain was not resumed before it expired")
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            expired.push(request_id);
        }
        Ok(expired)
    }

    async fn find_requests(&self, filter: &RequestFilter) -> Result<Vec<Request>, Error> {
        let mut query = QueryBuilder::<DB>::new(
            "SELECT request_id, type, state, user_name, created_at, started_at, finished_at, total_jobs, finished_jobs, jr_url, error, paused, spec_version \
             FROM requests WHERE 1 = 1",
        );
        if let Some(request_type) = &filter.request_type {
            query.push(" AND type = ").push_bind(request_type.clone());
        }
        if let Some(user) = &filter.user {
            query.push(" AND user_name = ").push_bind(user.clone());
        }
        if !filter.states.is_empty() {
            query.push(" AND state IN (");
            let mut states = query.separated(", ");
            for state in &filter.states {
                states.push_bind(state_value(*state));
            }
            query.push(")");
        }
        // `IN` lets the database start from the index on arg values and sort the few
        // matches, instead of probing the args of every request by age.
        for (name, value) in &filter.args {
            query
                .push(" AND request_id IN (SELECT request_id FROM request_args WHERE name = ")
                .push_bind(name.clone())
                .push(" AND ");
            DB::push_value_match(&mut query, value.clone());
            query.push(")");
        }
        if let Some(since) = filter.since {
            query
                .push(" AND (finished_at > ")
                .push_bind(micros(since))
                .push(" OR finished_at IS NULL)");
        }
        if let Some(until) = filter.until {
            query.push(" AND created_at < ").push_bind(micros(until));
        }
        query.push(" ORDER BY created_at DESC, request_id ASC");
        if filter.limit > 0 {
            query.push(" LIMIT ").push_bind(count(filter.limit));
            query.push(" OFFSET ").push_bind(count(filter.offset));
        }
        let rows = query.build().fetch_all(&self.readers).await?;
        rows.iter().map(Self::request_from_row).collect()
    }

    async fn running_jr_urls(&self) -> Result<Vec<String>, Error> {
        let rows = sqlx::query(
            "SELECT DISTINCT jr_url FROM requests WHERE state = $1 AND jr_url IS NOT NULL ORDER BY jr_url",
        )
        .bind(state_value(State::Running))
        .fetch_all(&self.readers)
        .await?;
        rows.iter().map(|row| Ok(row.try_get("jr_url")?)).collect()
    }

    async fn count_requests(&self, states: &[State]) -> Result<Vec<(State, u64)>, Error> {
        let mut counts = Vec::with_capacity(states.len());
        for &state in states {
            let row = sqlx::query("SELECT COUNT(*) AS n FROM requests WHERE state = $1")
                .bind(state_value(state))
                .fetch_one(&self.readers)
                .await?;
            let n: i64 = row.try_get("n")?;
            if n > 0 {
                counts.push((state, u64::try_from(n).unwrap_or(0)));
            }
        }
        Ok(counts)
    }

    async fn ping(&self) -> Result<(), Error> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn register_runner(
        &self,
        runner: &RunnerRegistration,
        at: DateTime<Utc>,
    ) -> Result<JobRunner, Error> {
        let lease = proto::duration::parse(&runner.lease).map_err(|err| {
            Error::Invalid(format!(
                "lease {:?} is not a duration ({err}); expected such as 10s",
                runner.lease
            ))
        })?;
        let lease_us = i64::try_from(lease.as_micros()).unwrap_or(i64::MAX);
        let inserted = sqlx::query(
            "INSERT INTO job_runners (instance_id, url, host, pid, started_at, renewed_at, lease_us) \
             VALUES ($1, $2, $3, $4, $5, $5, $6)",
        )
        .bind(runner.instance_id.as_str())
        .bind(runner.url.as_str())
        .bind(runner.host.as_str())
        .bind(i64::from(runner.pid))
        .bind(micros(at))
        .bind(lease_us)
        .execute(&self.pool)
        .await;
        match inserted.map_err(Error::from) {
            Ok(_) => {}
            Err(Error::Duplicate(_)) => {
                return Err(Error::Conflict(format!(
                    "job runner instance {} is registered already; an instance id is new at every start",
                    runner.instance_id
                )));
            }
            Err(err) => return Err(err),
        }
        self.runner(&runner.instance_id, at).await
    }

    async fn renew_runner(&self, instance: &str, at: DateTime<Utc>) -> Result<JobRunner, Error> {
        let done = sqlx::query(
            "UPDATE job_runners SET renewed_at = $2 WHERE instance_id = $1 AND lost_at IS NULL AND ended_at IS NULL",
        )
        .bind(instance)
        .bind(micros(at))
        .execute(&self.pool)
        .await?;
        let runner = self.runner(instance, at).await?;
        if DB::rows_affected(&done) == 0 {
            return Err(Error::RunnerEnded {
                instance: instance.to_owned(),
                state: runner.state,
            });
        }
        Ok(runner)
    }

    async fn end_runner(&self, instance: &str, at: DateTime<Utc>) -> Result<(), Error> {
        sqlx::query(
            "UPDATE job_runners SET ended_at = $2 WHERE instance_id = $1 AND ended_at IS NULL",
        )
        .bind(instance)
        .bind(micros(at))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn job_runners(
        &self,
        now: DateTime<Utc>,
        ended_since: DateTime<Utc>,
    ) -> Result<Vec<JobRunner>, Error> {
        let rows = sqlx::query(concat!(
            runner_select!(),
            " WHERE (r.lost_at IS NULL AND r.ended_at IS NULL) \
             OR COALESCE(r.ended_at, r.lost_at) >= $2 \
             OR EXISTS (SELECT 1 FROM requests q WHERE q.jr_instance = r.instance_id AND q.state = $1) \
             ORDER BY r.started_at DESC, r.instance_id"
        ))
        .bind(state_value(State::Running))
        .bind(micros(ended_since))
        .fetch_all(&self.readers)
        .await?;
        rows.iter()
            .map(|row| Self::runner_from_row(row, now))
            .collect()
    }

    async fn mark_runner_lost(&self, instance: &str, at: DateTime<Utc>) -> Result<bool, Error> {
        let done = sqlx::query(
            "UPDATE job_runners SET lost_at = $2 WHERE instance_id = $1 AND lost_at IS NULL AND ended_at IS NULL",
        )
        .bind(instance)
        .bind(micros(at))
        .execute(&self.pool)
        .await?;
        Ok(DB::rows_affected(&done) == 1)
    }

    async fn owned_requests(&self, instance: &str) -> Result<Vec<String>, Error> {
        let rows = sqlx::query(
            "SELECT request_id FROM requests WHERE jr_instance = $1 AND state = $2 ORDER BY created_at",
        )
        .bind(instance)
        .bind(state_value(State::Running))
        .fetch_all(&self.readers)
        .await?;
        rows.iter()
            .map(|row| Ok(row.try_get("request_id")?))
            .collect()
    }

    async fn recover_request(
        &self,
        holder: Holder<'_>,
        interrupted: &[JobLog],
        suspended: &SuspendedJobChain,
        at: DateTime<Utc>,
    ) -> Result<(), Error> {
        let request_id = suspended.request_id.as_str();
        let suspended_json = to_json("suspended job chain", suspended)?;
        let mut tx = self.pool.begin().await?;
        // The ownership first: a request that moved on is left as it is.
        let updated = match holder {
            Holder::Lost(instance) => sqlx::query(
                "UPDATE requests SET state = $2, jr_url = NULL, jr_instance = NULL, epoch = epoch + 1 \
                 WHERE request_id = $1 AND state = $3 AND jr_instance = $4",
            )
            .bind(request_id)
            .bind(state_value(State::Suspended))
            .bind(state_value(State::Running))
            .bind(instance),
            Holder::Unstarted(epoch) => sqlx::query(
                "UPDATE requests SET state = $2, jr_url = NULL, jr_instance = NULL, epoch = epoch + 1 \
                 WHERE request_id = $1 AND state = $3 AND epoch = $4",
            )
            .bind(request_id)
            .bind(state_value(State::Suspended))
            .bind(state_value(State::Pending))
            .bind(count(epoch)),
            Holder::Finished(state) => sqlx::query(
                "UPDATE requests SET state = $2, jr_url = NULL, jr_instance = NULL, epoch = epoch + 1, \
                 finished_at = NULL, error = '', finished_jobs = $4 WHERE request_id = $1 AND state = $3",
            )
            .bind(request_id)
            .bind(state_value(State::Suspended))
            .bind(state_value(state))
            .bind(count(suspended.job_chain.finished_jobs)),
        }
        .execute(&mut *tx)
        .await?;
        if DB::rows_affected(&updated) == 0 {
            drop(tx);
            return Err(match holder {
                Holder::Lost(instance) => {
                    let fence = Fence {
                        instance: instance.to_owned(),
                        epoch: self.owner(request_id).await.map_or(0, |owner| owner.epoch),
                    };
                    self.refusal(request_id, Some(&fence), State::Running).await
                }
                Holder::Unstarted(epoch) => {
                    let owner = self.owner(request_id).await?;
                    if owner.state == State::Pending && owner.epoch != epoch {
                        Error::Fenced(format!(
                            "request {request_id} was handed over again (epoch {}, not {epoch})",
                            owner.epoch
                        ))
                    } else {
                        self.state_error(request_id, State::Pending).await
                    }
                }
                Holder::Finished(state) => self.state_error(request_id, state).await,
            });
        }
        Self::insert_logs_in(&mut tx, interrupted).await?;
        sqlx::query(
            "INSERT INTO suspended_job_chains (request_id, suspended_job_chain, rm_host, updated_at, suspended_at) \
             VALUES ($1, $2, NULL, $3, $3)",
        )
        .bind(request_id)
        .bind(suspended_json)
        .bind(micros(at))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn insert_try_starts(&self, instance: &str, starts: &[TryStart]) -> Result<(), Error> {
        if starts.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await?;
        for chunk in starts.chunks(LOG_ROWS_PER_STATEMENT) {
            let mut insert = QueryBuilder::<DB>::new(
                "INSERT INTO job_tries (request_id, job_id, try, run_try, sequence_try, started_at, jr_instance) ",
            );
            insert.push_values(chunk, |mut row, start| {
                row.push_bind(start.request_id.as_str())
                    .push_bind(start.job_id.as_str())
                    .push_bind(i32::try_from(start.r#try).unwrap_or(i32::MAX))
                    .push_bind(i32::try_from(start.run_try).unwrap_or(i32::MAX))
                    .push_bind(i32::try_from(start.sequence_try).unwrap_or(i32::MAX))
                    .push_bind(start.started_at)
                    .push_bind(instance);
            });
            insert.push(" ON CONFLICT (request_id, job_id, try) DO NOTHING");
            insert.build().execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn try_starts(&self, request_id: &str) -> Result<Vec<StartedTry>, Error> {
        let rows = sqlx::query(
            "SELECT job_id, try, run_try, sequence_try, started_at, jr_instance FROM job_tries \
             WHERE request_id = $1 ORDER BY job_id, try",
        )
        .bind(request_id)
        .fetch_all(&self.readers)
        .await?;
        let number = |row: &DB::Row, name: &str| -> Result<u32, Error> {
            Ok(u32::try_from(row.try_get::<i32, _>(name)?).unwrap_or(0))
        };
        rows.iter()
            .map(|row| {
                Ok(StartedTry {
                    start: TryStart {
                        request_id: request_id.to_owned(),
                        job_id: row.try_get("job_id")?,
                        r#try: number(row, "try")?,
                        run_try: number(row, "run_try")?,
                        sequence_try: number(row, "sequence_try")?,
                        started_at: row.try_get("started_at")?,
                    },
                    instance: row.try_get("jr_instance")?,
                })
            })
            .collect()
    }
}
