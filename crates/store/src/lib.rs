//! Storage: one [`Store`] trait over what the Request Manager keeps (storage.md) —
//! requests, their immutable archive, job log entries, suspended job chains and the
//! request search — with an SQLite implementation (the embedded default: one file, no
//! server) and a PostgreSQL one (several Request Managers sharing the work).
//!
//! Both run the same SQL (`backend.rs`, generic over sqlx's database), their own
//! versioned migrations at open, and the same test suite. Every state change is a conditional update, so a
//! finished request never goes back to RUNNING and a suspended chain is claimed by one
//! Request Manager only. Times are stored as Unix microseconds.

mod backend;
mod batch;
mod error;
mod postgres;
mod sqlite;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use proto::{
    CreateRequest, FinishRequest, JobChain, JobLog, OutputChunk, OutputQuery, Request,
    RequestFilter, RequestId, State, SuspendedJobChain,
};

pub use backend::{Backend, SqlStore};
pub use batch::{BatchOptions, Batcher};
pub use error::Error;
pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

/// What `finish` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    /// The request was RUNNING and now has the final state.
    Now,
    /// The request had already finished in this state; nothing changed.
    Already(State),
}

/// What the Request Manager keeps. Every method is one transaction.
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// Stores a new PENDING request with its archive (create payload, recorded args,
    /// chain) and its searchable args, in one transaction. `request.job_chain` must be set.
    async fn create_request(
        &self,
        request: &Request,
        create_request: &CreateRequest,
    ) -> Result<(), Error>;

    /// A request with its args; with `with_chain`, also its chain, each job carrying its
    /// latest state and try count from the job log.
    async fn get_request(&self, request_id: &str, with_chain: bool) -> Result<Request, Error>;

    /// The chain as created, with each job's latest state and try count.
    async fn job_chain(&self, request_id: &str) -> Result<JobChain, Error>;

    /// PENDING → RUNNING, on the Job Runner at `jr_url`.
    async fn start_request(
        &self,
        request_id: &RequestId,
        jr_url: &str,
        at: DateTime<Utc>,
    ) -> Result<(), Error>;

    /// PENDING → FAIL (starting it failed).
    async fn fail_pending(&self, request_id: &str, at: DateTime<Utc>) -> Result<(), Error>;

    /// RUNNING → the final state. A request that already finished is left as it is.
    async fn finish_request(&self, finish: &FinishRequest) -> Result<Finished, Error>;

    /// Sets the count of completed jobs of a RUNNING request (otherwise does nothing).
    async fn update_progress(&self, request_id: &str, finished_jobs: u64) -> Result<(), Error>;

    /// [`Store::update_progress`] for many requests in one transaction.
    async fn update_progress_many(&self, updates: &[(String, u64)]) -> Result<(), Error>;

    /// Stores job log entries in one transaction; an entry whose (request, job, try) is
    /// stored already is skipped, so a re-sent entry is never duplicated.
    async fn insert_job_logs(&self, entries: &[JobLog]) -> Result<(), Error>;

    /// Stores live output chunks in one transaction; a chunk whose (request, job, try,
    /// stream, offset) is stored already is skipped. Then, per try and stream, deletes the
    /// chunks lying wholly between the first [`proto::OUTPUT_HEAD_BYTES`] and the last
    /// [`proto::OUTPUT_TAIL_BYTES`] of what has arrived, so a try keeps head and tail.
    async fn insert_output(&self, chunks: &[OutputChunk]) -> Result<(), Error>;

    /// A request's stored output chunks that `query` selects, in the order they were
    /// stored (by `seq`).
    async fn output(
        &self,
        request_id: &str,
        query: &OutputQuery,
    ) -> Result<Vec<OutputChunk>, Error>;

    /// Every job log entry of a request, by job then try.
    async fn job_log(&self, request_id: &str) -> Result<Vec<JobLog>, Error>;

    /// The entry with the highest try of one job.
    async fn latest_job_log(&self, request_id: &RequestId, job_id: &str) -> Result<JobLog, Error>;

    /// Stores a suspended chain and sets its RUNNING request SUSPENDED, in one transaction.
    async fn suspend_request(
        &self,
        suspended: &SuspendedJobChain,
        at: DateTime<Utc>,
    ) -> Result<(), Error>;

    /// Claims one unclaimed suspended chain for `host` (oldest first). Several Request
    /// Managers may call this at once: each chain is claimed by exactly one.
    async fn claim_suspended(
        &self,
        host: &str,
        at: DateTime<Utc>,
    ) -> Result<Option<SuspendedJobChain>, Error>;

    /// The claimed chain was resumed on the Job Runner at `jr_url`: SUSPENDED → RUNNING and
    /// the chain deleted, in one transaction. If the request is no longer SUSPENDED, only
    /// the chain is deleted and the request's state is returned in the error.
    async fn resumed(&self, request_id: &RequestId, host: &str, jr_url: &str) -> Result<(), Error>;

    /// Gives up a claim (resuming failed); only `host`'s own claim.
    async fn unclaim(&self, request_id: &RequestId, host: &str) -> Result<(), Error>;

    /// Releases claims not renewed since `before` (their Request Manager went away).
    async fn release_stale_claims(&self, before: DateTime<Utc>) -> Result<u64, Error>;

    /// Fails the requests of unclaimed chains suspended before `before` (with finish time
    /// `now`) and deletes those chains. Returns the request ids.
    async fn expire_suspended(
        &self,
        before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<String>, Error>;

    /// Requests matching `filter`, newest first, without args or chain.
    async fn find_requests(&self, filter: &RequestFilter) -> Result<Vec<Request>, Error>;

    /// The Job Runners of RUNNING requests.
    async fn running_jr_urls(&self) -> Result<Vec<String>, Error>;
}

/// Opens the store a URL names: `sqlite://PATH` (created if missing) or
/// `postgres://...`, and runs its migrations.
pub async fn open(url: &str) -> Result<Arc<dyn Store>, Error> {
    if let Some(path) = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
    {
        return Ok(Arc::new(
            SqliteStore::open(std::path::Path::new(path)).await?,
        ));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(Arc::new(PostgresStore::connect(url, None).await?));
    }
    Err(Error::Config(format!(
        "unsupported database URL {url:?}; expected sqlite://PATH or postgres://USER@HOST:PORT/DATABASE"
    )))
}

#[cfg(test)]
mod tests;
