//! Storage: what the Request Manager keeps (storage.md) — requests and their immutable
//! archive, the job log, suspended job chains, runners and their leases, locks,
//! schedules', triggers' and notifications' rows, and the history's retention — behind
//! one trait per table family ([`Requests`], [`Lifecycle`], [`JobLogs`],
//! [`SuspendedChains`], [`Runners`], [`Locks`], [`Events`], [`History`]; [`Store`] is
//! all of them), each operation written once in `operations.rs` and once in SQL.
//!
//! Three backends run the same SQL (`sql/`, generic over a [`Backend`]): SQLite (the
//! embedded default: one file, no server), PostgreSQL and MySQL/MariaDB (several Request
//! Managers sharing the work), each with its dialect in its own module, its versioned
//! migrations run at open (`migrations/README.md`: one number, one change on every backend)
//! and the same test suite. Every state change is a conditional update, so a finished
//! request never goes back to RUNNING (but for an explicit retry, from its final state
//! only: [`Holder::Finished`]) and a suspended chain is claimed by one Request Manager
//! only. Times are stored as Unix microseconds.

mod batch;
mod error;
mod locks;
mod migrations;
mod mysql;
mod notifications;
mod operations;
pub mod plans;
mod postgres;

mod sql;
mod sqlite;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use proto::{
    AuditEvent, CreateRequest, Fence, FinishRequest, JobLog, Request, State, SuspendedJobChain,
    TryStart,
};

pub use batch::{BatchOptions, Batcher};
pub use error::{Cause, Error};
pub use locks::{LockClaim, LockHolder, LockTake, LockWait};
pub use mysql::MysqlStore;
pub use notifications::{
    Attempt, ClaimedNotification, FannedOut, NewNotification, NotificationEvent, NotificationFilter,
};
pub use operations::{
    Events, History, JobLogs, Lifecycle, Locks, Requests, Runners, SignIns, Store, SuspendedChains,
};
pub use postgres::PostgresStore;
pub use sql::{Backend, SqlStore};
pub use sqlite::SqliteStore;

/// What `finish` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    /// The request was RUNNING and now has the final state.
    Now,
    /// The request had already finished in this state; nothing changed.
    Already(State),
}

/// A new request as [`Requests::create_request`] stores it, for [`Lifecycle::write_batch`].
#[derive(Debug, Clone)]
pub struct NewRequest {
    /// With its job chain.
    pub request: Request,
    pub create_request: CreateRequest,
    /// The audit trail's first event.
    pub created: Option<AuditEvent>,
    /// The locks its type declares, taken ([`Locks::take_locks`]) in the transaction
    /// that stores it, at this priority.
    pub locks: Vec<LockClaim>,
    pub priority: i32,
    /// Set by the [`Batcher`] once stored: what taking `locks` did (`None` without any).
    pub locked: Option<LockTake>,
    /// The trigger delivery that asks for it: stored in the same transaction, keyed by
    /// the trigger and the delivery's id, so that a delivery sent again creates nothing.
    pub delivery: Option<Delivery>,
    /// Set by the [`Batcher`] when `delivery` was already stored: the request that
    /// delivery created (this one was not stored).
    pub duplicate_of: Option<String>,
    /// Its secret args, each (name, value encrypted by the Request Manager): stored in
    /// the same transaction ([`Requests::request_secrets`]).
    pub secrets: Vec<(String, String)>,
    /// The JSON of `request.job_chain` when it was made already (the Request Manager
    /// makes a new chain's off the async runtime, and hands the same text to a Job
    /// Runner): stored as it is, not made again. `None`: the store makes it.
    pub chain_json: Option<Arc<str>>,
}

/// A trigger's delivery: the event another system sent (issue #33).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub trigger: String,
    /// The id its sender gave it (a header or a field of the event).
    pub id: String,
}

/// A request from another system's history, as it ended there
/// ([`History::import_requests`]): `spindle import spincycle` copies Spin Cycle's requests so.
#[derive(Debug, Clone)]
pub struct ImportedRequest {
    /// In its state, with its times, counts, error, args and (archived) job chain.
    pub request: Request,
    pub create_request: CreateRequest,
    /// Every job log entry, with the request's id.
    pub job_logs: Vec<JobLog>,
    /// A SUSPENDED request's chain and when it was suspended.
    pub suspended: Option<(SuspendedJobChain, DateTime<Utc>)>,
}

/// PENDING → RUNNING as [`Lifecycle::start_request`] makes it, for [`Lifecycle::write_batch`].
#[derive(Debug, Clone)]
pub struct StartRequest {
    pub request_id: String,
    pub jr_url: String,
    pub owner: Option<Fence>,
    pub at: DateTime<Utc>,
}

/// A claimed chain resumed on a Job Runner, as [`SuspendedChains::resumed`] records it,
/// for [`Lifecycle::write_batch`].
#[derive(Debug, Clone)]
pub struct ResumeRecord {
    pub request_id: String,
    /// The Request Manager that claimed the chain.
    pub host: String,
    pub jr_url: String,
    pub owner: Option<Fence>,
}

/// A chain handed back by its runner, as [`SuspendedChains::suspend_request`] takes it,
/// for [`Lifecycle::write_batch`].
#[derive(Debug, Clone)]
pub struct SuspendRecord {
    pub suspended: SuspendedJobChain,
    pub fence: Option<Fence>,
    pub at: DateTime<Utc>,
}

/// A hand-over of a request, as [`Lifecycle::hand_over`] takes it, for
/// [`Lifecycle::write_batch`].
#[derive(Debug, Clone)]
pub struct HandOverRecord {
    pub request_id: String,
    /// PENDING or SUSPENDED.
    pub expected: State,
    /// The handed chain's count of each job's tries.
    pub known_tries: std::collections::BTreeMap<String, u32>,
}

/// Writes of many callers committed in one transaction ([`Lifecycle::write_batch`]).
#[derive(Debug, Clone, Default)]
pub struct WriteBatch {
    pub creates: Vec<NewRequest>,
    pub starts: Vec<StartRequest>,
    pub finishes: Vec<(FinishRequest, Option<Fence>)>,
    /// Job log entries (a stored (request, job, try) is skipped, as by
    /// [`JobLogs::insert_job_logs`]).
    pub logs: Vec<JobLog>,
    /// The runs of `logs` that a report sent under a fence: the entries in the range
    /// were reported under it (an entry in no run was reported without a fence).
    pub log_fences: Vec<(std::ops::Range<usize>, Fence)>,
    /// (request, completed jobs, the fence it was reported under), as
    /// [`Lifecycle::update_progress`].
    ///
    /// Fences are checked first, in the same transaction: a log entry or progress
    /// reported under a fence that the request's owner does not accept (or about a
    /// request that is unknown) is not written, and its (request, fence) pair is in
    /// [`BatchWritten::refused`]; a report of the same request under the fence its owner
    /// accepts is written all the same (an old runner's last report and the new owner's
    /// first may share a batch).
    pub progress: Vec<(String, u64, Option<Fence>)>,
    /// Claimed chains resumed ([`SuspendedChains::resumed`]), after everything else.
    pub resumes: Vec<ResumeRecord>,
    /// Hand-overs ([`Lifecycle::hand_over`]): each request's epoch grows by one, checked
    /// with its row locked, in the batch's transaction (thousands of suspended chains
    /// resumed after a restart share transactions).
    pub hand_overs: Vec<HandOverRecord>,
    /// Chains handed back by runners that shut down
    /// ([`SuspendedChains::suspend_request`]), each checked against its request's owner
    /// in the batch's transaction (tens of thousands on one SIGTERM).
    pub suspends: Vec<SuspendRecord>,
}

impl WriteBatch {
    /// The distinct (request, fence) pairs that the fenced log entries and progress
    /// name, in the order first named.
    pub fn fences(&self) -> Vec<(&str, &Fence)> {
        let mut seen = std::collections::HashSet::new();
        let runs = self.log_fences.iter().flat_map(|(run, fence)| {
            self.logs[run.clone()]
                .iter()
                .map(move |entry| (entry.request_id.as_str(), fence))
        });
        let progress = self
            .progress
            .iter()
            .filter_map(|(id, _, fence)| Some((id.as_str(), fence.as_ref()?)));
        runs.chain(progress)
            .filter(|pair| seen.insert(*pair))
            .collect()
    }
}

/// What [`Lifecycle::write_batch`] did.
#[derive(Debug, Default)]
pub struct BatchWritten {
    /// One per start, in order: whether the request is paused, if it started; `None` if
    /// it did not (not PENDING, another epoch, unknown: [`Lifecycle::start_request`] says why).
    pub started: Vec<Option<bool>>,
    /// One per finish, in order: the request as it is now (without its args), if this
    /// finish ended it; `None` if not ([`Lifecycle::finish_request`] says why).
    pub finished: Vec<Option<Request>>,
    /// The (request, fence) pairs that were refused, with why.
    pub refused: Vec<(String, Fence, Error)>,
    /// One per create, in order: what taking its locks did (`None` without any).
    pub locked: Vec<Option<LockTake>>,
    /// One per create, in order: the request its delivery created before, when it was a
    /// delivery sent again (it was not stored).
    pub duplicates: Vec<Option<String>>,
    /// One per resume, in order: whether the request is paused, or why it was not
    /// resumed (its chain not claimed by that host: nothing done; the request no longer
    /// SUSPENDED: only its chain deleted), as [`SuspendedChains::resumed`] answers.
    pub resumed: Vec<Result<bool, Error>>,
    /// One per hand-over, in order: the new epoch, or why there is none (the request not
    /// in the state expected, unknown, or a try of it began: [`Lifecycle::hand_over`]).
    pub handed: Vec<Result<u64, Error>>,
    /// One per suspend, in order: stored, or why not, as
    /// [`SuspendedChains::suspend_request`] answers.
    pub suspended: Vec<Result<(), Error>>,
}

/// Who owns a request now: its state, the runner instance it was handed to (empty
/// before the runner answered, and after a recovery) and the epoch of that hand-over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub state: State,
    pub instance: String,
    pub epoch: u64,
}

impl Owner {
    /// Whether a report that names `fence` comes from the owner: the same epoch, and the
    /// same instance once one is recorded.
    pub fn accepts(&self, fence: &Fence) -> bool {
        fence.epoch == self.epoch && (self.instance.is_empty() || self.instance == fence.instance)
    }

    /// The refusal of a report about `request_id` that names `fence` (one this owner does
    /// not accept), in the words every refusal uses.
    pub fn refusal(&self, request_id: &str, fence: &Fence) -> Error {
        let owner = if self.instance.is_empty() {
            "no job runner instance yet".to_owned()
        } else {
            format!("job runner instance {}", self.instance)
        };
        Error::Fenced(format!(
            "request {request_id} is owned by {owner} at epoch {}; a report from instance {} for epoch {} is refused",
            self.epoch, fence.instance, fence.epoch
        ))
    }
}

/// Whose hand-over a recovered request ends ([`Runners::recover_request`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder<'a> {
    /// RUNNING and owned by this instance, which was lost.
    Lost(&'a str),
    /// PENDING at this epoch, yet begun on a Job Runner: handed over, but never marked
    /// RUNNING (the Request Manager that handed it over died, or its write failed).
    Unstarted(u64),
    /// SUSPENDED at this epoch, yet begun on a Job Runner: resumed there, but the resume's
    /// answer or its record was lost, so the stored suspended chain does not know what
    /// ran. Its suspended chain is replaced by the rebuilt one.
    Unresumed(u64),
    /// Finished in this state, and run again (`spindle retry`): its finish time and
    /// reason are cleared, its finished jobs are the suspended chain's.
    Finished(State),
}

/// What one retention round removed ([`History::remove_finished`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Removed {
    pub requests: u64,
    /// For a month dropped whole on MySQL, InnoDB's estimate of its job log rows
    /// (counting them would read the month's job log whole).
    pub job_log_entries: u64,
    pub job_runners: u64,
    /// Month partitions dropped whole (PostgreSQL, MySQL), the requests' among them.
    pub months: u64,
}

/// A job's latest logged try and that try's state ([`JobLogs::job_states`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobState {
    pub job_id: String,
    pub tries: u32,
    pub state: State,
    /// One of the grapher's begin and end wrappers ([`proto::is_wrapper`]), not one of
    /// the request's own jobs.
    pub wrapper: bool,
}

/// One job log entry without its texts ([`JobLogs::logged_tries`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedTry {
    pub job_id: String,
    pub r#try: u32,
    pub state: State,
    pub started_at: i64,
    pub finished_at: i64,
}

/// A try that started, with the runner instance that started it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartedTry {
    pub start: TryStart,
    pub instance: String,
}

/// What the recovery of a request reads ([`Runners::recovery_reads_among`]): its chain
/// with each job's latest try and state (as [`Requests::job_chain`]), its job log (as
/// [`Logs::job_log`]) and the starts of its tries (as [`Logs::try_starts`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecoveryRead {
    pub job_chain: proto::JobChain,
    pub job_log: Vec<JobLog>,
    pub try_starts: Vec<StartedTry>,
}

/// A lost runner's request rebuilt ([`Runners::recover_lost_many`]): the entries of its
/// tries that never reported, and its chain to store suspended.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recovery {
    pub interrupted: Vec<JobLog>,
    pub suspended: SuspendedJobChain,
}

/// A database URL, its scheme checked: the one place that says which URLs name a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    /// `sqlite://PATH` or `sqlite:PATH`: the file (created if missing).
    Sqlite(std::path::PathBuf),
    /// `postgres://…` or `postgresql://…`, as given.
    Postgres(String),
    /// `mysql://…`, or `mariadb://…` given as `mysql://`.
    Mysql(String),
}

impl DatabaseUrl {
    /// `url` read by its scheme; another scheme is an [`Error::Config`] that says which
    /// are taken (the password shown as `****`).
    pub fn parse(url: &str) -> Result<DatabaseUrl, Error> {
        if let Some(path) = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
        {
            return Ok(DatabaseUrl::Sqlite(path.into()));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(DatabaseUrl::Postgres(url.to_owned()));
        }
        if url.starts_with("mysql://") || url.starts_with("mariadb://") {
            return Ok(DatabaseUrl::Mysql(url.replacen(
                "mariadb://",
                "mysql://",
                1,
            )));
        }
        Err(Error::Config(format!(
            "unsupported database URL {:?}; expected sqlite://PATH, postgres://USER@HOST:PORT/DATABASE or mysql://USER:PASSWORD@HOST:PORT/DATABASE",
            redacted(url)
        )))
    }

    /// Opens the store it names, and runs its migrations.
    pub async fn open(&self) -> Result<Arc<dyn Store>, Error> {
        Ok(match self {
            DatabaseUrl::Sqlite(path) => Arc::new(SqliteStore::open(path).await?),
            DatabaseUrl::Postgres(url) => Arc::new(PostgresStore::connect(url, None).await?),
            DatabaseUrl::Mysql(url) => Arc::new(MysqlStore::connect(url).await?),
        })
    }
}

/// Opens the store a URL names ([`DatabaseUrl`]), and runs its migrations.
pub async fn open(url: &str) -> Result<Arc<dyn Store>, Error> {
    DatabaseUrl::parse(url)?.open().await
}

/// `url` with the password of its authority (`scheme://user:PASSWORD@host`) shown as
/// `****`, for messages and logs.
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:****@{host}{path}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

mod timed;

pub use timed::{QueryObserver, timed};

#[cfg(feature = "testing")]
pub mod faulty;

#[cfg(test)]
mod migration_tests;
#[cfg(test)]
mod tests;
