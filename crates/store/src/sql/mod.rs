//! The SQL the backends run, written once: [`SqlStore`] implements [`Store`] for any sqlx
//! database that is a [`Backend`]. SQLite and PostgreSQL both read `$N` placeholders;
//! what differs (claiming a suspended chain, matching a long arg value through an index,
//! the retention's lock) is in their `Backend` impls next to their constructors
//! (`sqlite.rs`, `postgres.rs`).
//!
//! One module a table or concern, each an `impl SqlStore` through [`sql_impl!`]; the
//! [`Store`] impl at the end of this file forwards each operation to the inherent method
//! of the same name there (an inherent method is chosen before a trait's), naming the
//! operation in any database error it returns.

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
// connections. Rust has no way to name a list of bounds once, so the concern modules'
// impl blocks take them from this macro (rustfmt does not format a macro's body: keep
// those modules formatted by hand), and the `Store` impl below writes them again.
macro_rules! sql_impl {
    ($($body:tt)*) => {
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
            $($body)*
        }
    };
}

mod answers;
mod history;
mod lifecycle;
mod logs;
mod requests;
mod retention;
mod runners;
mod schedules;
mod suspended;
mod write_batch;

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
        self.create_request(request, create_request, created)
            .await
            .map_err(|err| err.during("create_request"))
    }

    async fn write_batch(&self, batch: &WriteBatch) -> Result<BatchWritten, Error> {
        self.write_batch(batch)
            .await
            .map_err(|err| err.during("write_batch"))
    }

    async fn get_request(&self, request_id: &str, with_chain: bool) -> Result<Request, Error> {
        self.get_request(request_id, with_chain)
            .await
            .map_err(|err| err.during("get_request"))
    }

    async fn ended_among(&self, request_ids: &[String]) -> Result<Vec<String>, Error> {
        self.ended_among(request_ids)
            .await
            .map_err(|err| err.during("ended_among"))
    }

    async fn job_chain(&self, request_id: &str) -> Result<JobChain, Error> {
        self.job_chain(request_id)
            .await
            .map_err(|err| err.during("job_chain"))
    }

    async fn hand_over(&self, request_id: &RequestId, expected: State) -> Result<u64, Error> {
        self.hand_over(request_id, expected)
            .await
            .map_err(|err| err.during("hand_over"))
    }

    async fn start_request(
        &self,
        request_id: &RequestId,
        jr_url: &str,
        owner: Option<&Fence>,
        at: DateTime<Utc>,
    ) -> Result<bool, Error> {
        self.start_request(request_id, jr_url, owner, at)
            .await
            .map_err(|err| err.during("start_request"))
    }

    async fn claim_schedule_run(
        &self,
        schedule: &str,
        due_at: DateTime<Utc>,
        host: &str,
    ) -> Result<bool, Error> {
        self.claim_schedule_run(schedule, due_at, host)
            .await
            .map_err(|err| err.during("claim_schedule_run"))
    }

    async fn schedule_run_done(
        &self,
        schedule: &str,
        due_at: DateTime<Utc>,
        request_id: &str,
        skipped: &str,
    ) -> Result<(), Error> {
        self.schedule_run_done(schedule, due_at, request_id, skipped)
            .await
            .map_err(|err| err.during("schedule_run_done"))
    }

    async fn schedule_runs(
        &self,
        schedule: &str,
        limit: u32,
    ) -> Result<Vec<proto::ScheduleRun>, Error> {
        self.schedule_runs(schedule, limit)
            .await
            .map_err(|err| err.during("schedule_runs"))
    }

    async fn add_answer(
        &self,
        request_id: &str,
        job_id: &str,
        answer: &proto::Answer,
    ) -> Result<bool, Error> {
        self.add_answer(request_id, job_id, answer)
            .await
            .map_err(|err| err.during("add_answer"))
    }

    async fn answers(&self, request_id: &str) -> Result<Vec<(String, proto::Answer)>, Error> {
        self.answers(request_id)
            .await
            .map_err(|err| err.during("answers"))
    }

    async fn remove_answers(&self, request_id: &str, job_ids: &[String]) -> Result<(), Error> {
        self.remove_answers(request_id, job_ids)
            .await
            .map_err(|err| err.during("remove_answers"))
    }

    async fn add_spec_version(&self, specs: &SpecVersion, at: DateTime<Utc>) -> Result<(), Error> {
        self.add_spec_version(specs, at)
            .await
            .map_err(|err| err.during("add_spec_version"))
    }

    async fn spec_version(&self, version: &str) -> Result<SpecVersion, Error> {
        self.spec_version(version)
            .await
            .map_err(|err| err.during("spec_version"))
    }

    async fn set_paused(&self, request_id: &str, paused: bool) -> Result<Request, Error> {
        self.set_paused(request_id, paused)
            .await
            .map_err(|err| err.during("set_paused"))
    }

    async fn owner(&self, request_id: &str) -> Result<Owner, Error> {
        self.owner(request_id)
            .await
            .map_err(|err| err.during("owner"))
    }

    async fn fail_pending(&self, request_id: &str, at: DateTime<Utc>) -> Result<(), Error> {
        self.fail_pending(request_id, at)
            .await
            .map_err(|err| err.during("fail_pending"))
    }

    async fn set_waiting(&self, request_id: &str, why: &str) -> Result<(), Error> {
        self.set_waiting(request_id, why)
            .await
            .map_err(|err| err.during("set_waiting"))
    }

    async fn finish_request(
        &self,
        finish: &FinishRequest,
        fence: Option<&Fence>,
    ) -> Result<Finished, Error> {
        self.finish_request(finish, fence)
            .await
            .map_err(|err| err.during("finish_request"))
    }

    async fn update_progress(&self, request_id: &str, finished_jobs: u64) -> Result<(), Error> {
        self.update_progress(request_id, finished_jobs)
            .await
            .map_err(|err| err.during("update_progress"))
    }

    async fn update_progress_many(&self, updates: &[(String, u64)]) -> Result<(), Error> {
        self.update_progress_many(updates)
            .await
            .map_err(|err| err.during("update_progress_many"))
    }

    async fn insert_job_logs(&self, entries: &[JobLog]) -> Result<(), Error> {
        self.insert_job_logs(entries)
            .await
            .map_err(|err| err.during("insert_job_logs"))
    }

    async fn insert_output(&self, chunks: &[OutputChunk]) -> Result<(), Error> {
        self.insert_output(chunks)
            .await
            .map_err(|err| err.during("insert_output"))
    }

    async fn output(
        &self,
        request_id: &str,
        query: &OutputQuery,
    ) -> Result<Vec<OutputChunk>, Error> {
        self.output(request_id, query)
            .await
            .map_err(|err| err.during("output"))
    }

    async fn job_log(&self, request_id: &str) -> Result<Vec<JobLog>, Error> {
        self.job_log(request_id)
            .await
            .map_err(|err| err.during("job_log"))
    }

    async fn latest_job_log(&self, request_id: &RequestId, job_id: &str) -> Result<JobLog, Error> {
        self.latest_job_log(request_id, job_id)
            .await
            .map_err(|err| err.during("latest_job_log"))
    }

    async fn add_audit(&self, request_id: &str, event: &AuditEvent) -> Result<(), Error> {
        self.add_audit(request_id, event)
            .await
            .map_err(|err| err.during("add_audit"))
    }

    async fn audit(&self, request_id: &str) -> Result<Vec<AuditEvent>, Error> {
        self.audit(request_id)
            .await
            .map_err(|err| err.during("audit"))
    }

    async fn remove_finished(&self, before: DateTime<Utc>, limit: u64) -> Result<Removed, Error> {
        self.remove_finished(before, limit)
            .await
            .map_err(|err| err.during("remove_finished"))
    }

    async fn job_tries_log(&self, request_id: &str, job_id: &str) -> Result<Vec<JobLog>, Error> {
        self.job_tries_log(request_id, job_id)
            .await
            .map_err(|err| err.during("job_tries_log"))
    }

    async fn job_states(&self, request_id: &str) -> Result<Vec<JobState>, Error> {
        self.job_states(request_id)
            .await
            .map_err(|err| err.during("job_states"))
    }

    async fn suspend_request(
        &self,
        suspended: &SuspendedJobChain,
        fence: Option<&Fence>,
        at: DateTime<Utc>,
    ) -> Result<(), Error> {
        self.suspend_request(suspended, fence, at)
            .await
            .map_err(|err| err.during("suspend_request"))
    }

    async fn claim_suspended(
        &self,
        host: &str,
        at: DateTime<Utc>,
    ) -> Result<Option<SuspendedJobChain>, Error> {
        self.claim_suspended(host, at)
            .await
            .map_err(|err| err.during("claim_suspended"))
    }

    async fn resumed(
        &self,
        request_id: &RequestId,
        host: &str,
        jr_url: &str,
        owner: Option<&Fence>,
    ) -> Result<bool, Error> {
        self.resumed(request_id, host, jr_url, owner)
            .await
            .map_err(|err| err.during("resumed"))
    }

    async fn fail_suspended(
        &self,
        request_id: &RequestId,
        host: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), Error> {
        self.fail_suspended(request_id, host, reason, at)
            .await
            .map_err(|err| err.during("fail_suspended"))
    }

    async fn unclaim(&self, request_id: &RequestId, host: &str) -> Result<(), Error> {
        self.unclaim(request_id, host)
            .await
            .map_err(|err| err.during("unclaim"))
    }

    async fn release_stale_claims(&self, before: DateTime<Utc>) -> Result<u64, Error> {
        self.release_stale_claims(before)
            .await
            .map_err(|err| err.during("release_stale_claims"))
    }

    async fn expire_suspended(
        &self,
        before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<String>, Error> {
        self.expire_suspended(before, now)
            .await
            .map_err(|err| err.during("expire_suspended"))
    }

    async fn find_requests(&self, filter: &RequestFilter) -> Result<Vec<Request>, Error> {
        self.find_requests(filter)
            .await
            .map_err(|err| err.during("find_requests"))
    }

    async fn running_jr_urls(&self) -> Result<Vec<String>, Error> {
        self.running_jr_urls()
            .await
            .map_err(|err| err.during("running_jr_urls"))
    }

    async fn count_requests(&self, states: &[State]) -> Result<Vec<(State, u64)>, Error> {
        self.count_requests(states)
            .await
            .map_err(|err| err.during("count_requests"))
    }

    async fn ping(&self) -> Result<(), Error> {
        self.ping().await.map_err(|err| err.during("ping"))
    }

    async fn register_runner(
        &self,
        runner: &RunnerRegistration,
        at: DateTime<Utc>,
    ) -> Result<JobRunner, Error> {
        self.register_runner(runner, at)
            .await
            .map_err(|err| err.during("register_runner"))
    }

    async fn renew_runner(&self, instance: &str, at: DateTime<Utc>) -> Result<JobRunner, Error> {
        self.renew_runner(instance, at)
            .await
            .map_err(|err| err.during("renew_runner"))
    }

    async fn end_runner(&self, instance: &str, at: DateTime<Utc>) -> Result<(), Error> {
        self.end_runner(instance, at)
            .await
            .map_err(|err| err.during("end_runner"))
    }

    async fn job_runners(
        &self,
        now: DateTime<Utc>,
        ended_since: DateTime<Utc>,
    ) -> Result<Vec<JobRunner>, Error> {
        self.job_runners(now, ended_since)
            .await
            .map_err(|err| err.during("job_runners"))
    }

    async fn mark_runner_lost(&self, instance: &str, at: DateTime<Utc>) -> Result<bool, Error> {
        self.mark_runner_lost(instance, at)
            .await
            .map_err(|err| err.during("mark_runner_lost"))
    }

    async fn owned_requests(&self, instance: &str) -> Result<Vec<String>, Error> {
        self.owned_requests(instance)
            .await
            .map_err(|err| err.during("owned_requests"))
    }

    async fn recover_request(
        &self,
        holder: Holder<'_>,
        interrupted: &[JobLog],
        suspended: &SuspendedJobChain,
        at: DateTime<Utc>,
    ) -> Result<(), Error> {
        self.recover_request(holder, interrupted, suspended, at)
            .await
            .map_err(|err| err.during("recover_request"))
    }

    async fn insert_try_starts(&self, instance: &str, starts: &[TryStart]) -> Result<(), Error> {
        self.insert_try_starts(instance, starts)
            .await
            .map_err(|err| err.during("insert_try_starts"))
    }

    async fn try_starts(&self, request_id: &str) -> Result<Vec<StartedTry>, Error> {
        self.try_starts(request_id)
            .await
            .map_err(|err| err.during("try_starts"))
    }
}
