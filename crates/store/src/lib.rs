//! Storage: one [`Store`] trait over what the Request Manager keeps (storage.md) —
//! requests, their immutable archive, job log entries, suspended job chains and the
//! request search — with an SQLite implementation (the embedded default: one file, no
//! server) and a PostgreSQL one (several Request Managers sharing the work).
//!
//! Both run the same SQL (`sql/`, generic over sqlx's database), their own
//! versioned migrations at open, and the same test suite. Every state change is a conditional update, so a
//! finished request never goes back to RUNNING (but for an explicit retry, from its final
//! state only: [`Holder::Finished`]) and a suspended chain is claimed by one
//! Request Manager only. Times are stored as Unix microseconds.

/// Calls macro `$then` with every operation of [`Store`] as `fn name(&self, args) ->
/// T;` (each returns `Result<T, Error>`): the one list the implementations that only
/// wrap or forward are written from (`timed.rs`, `sql/`). The compiler checks that it is
/// whole and right, as each is a `Store` impl.
macro_rules! store_operations {
    ($then:ident) => {
        $then! {
            fn create_request(&self, request: &Request, create_request: &CreateRequest, created: Option<&AuditEvent>) -> ();
            fn get_request(&self, request_id: &str, with_chain: bool) -> Request;
            fn job_chain(&self, request_id: &str) -> JobChain;
            fn ended_among(&self, request_ids: &[String]) -> Vec<String>;
            fn hand_over(&self, request_id: &RequestId, expected: State) -> u64;
            fn start_request(&self, request_id: &RequestId, jr_url: &str, owner: Option<&Fence>, at: DateTime<Utc>) -> bool;
            fn set_paused(&self, request_id: &str, paused: bool) -> Request;
            fn claim_schedule_run(&self, schedule: &str, due_at: DateTime<Utc>, host: &str) -> bool;
            fn schedule_run_done(&self, schedule: &str, due_at: DateTime<Utc>, request_id: &str, skipped: &str) -> ();
            fn schedule_runs(&self, schedule: &str, limit: u32) -> Vec<proto::ScheduleRun>;
            fn trigger_deliveries(&self, trigger: &str, limit: u32) -> Vec<proto::TriggerDelivery>;
            fn delivered_request(&self, trigger: &str, delivery_id: &str) -> Option<String>;
            fn add_answer(&self, request_id: &str, job_id: &str, answer: &proto::Answer) -> bool;
            fn answers(&self, request_id: &str) -> Vec<(String, proto::Answer)>;
            fn remove_answers(&self, request_id: &str, job_ids: &[String]) -> ();
            fn add_spec_version(&self, specs: &SpecVersion, at: DateTime<Utc>) -> ();
            fn spec_version(&self, version: &str) -> SpecVersion;
            fn owner(&self, request_id: &str) -> Owner;
            fn fail_pending(&self, request_id: &str, at: DateTime<Utc>) -> ();
            fn stop_pending(&self, request_id: &str, at: DateTime<Utc>) -> ();
            fn set_waiting(&self, request_id: &str, why: &str) -> ();
            fn finish_request(&self, finish: &FinishRequest, fence: Option<&Fence>) -> Finished;
            fn write_batch(&self, batch: &WriteBatch) -> BatchWritten;
            fn update_progress(&self, request_id: &str, finished_jobs: u64) -> ();
            fn update_progress_many(&self, updates: &[(String, u64)]) -> ();
            fn insert_job_logs(&self, entries: &[JobLog]) -> ();
            fn insert_output(&self, chunks: &[OutputChunk]) -> ();
            fn output(&self, request_id: &str, query: &OutputQuery) -> Vec<OutputChunk>;
            fn job_log(&self, request_id: &str) -> Vec<JobLog>;
            fn latest_job_log(&self, request_id: &RequestId, job_id: &str) -> JobLog;
            fn job_tries_log(&self, request_id: &str, job_id: &str) -> Vec<JobLog>;
            fn add_audit(&self, request_id: &str, event: &AuditEvent) -> ();
            fn remove_finished(&self, before: DateTime<Utc>, limit: u64) -> Removed;
            fn audit(&self, request_id: &str) -> Vec<AuditEvent>;
            fn job_states(&self, request_id: &str) -> Vec<JobState>;
            fn suspend_request(&self, suspended: &SuspendedJobChain, fence: Option<&Fence>, at: DateTime<Utc>) -> ();
            fn claim_suspended(&self, host: &str, at: DateTime<Utc>) -> Option<SuspendedJobChain>;
            fn resumed(&self, request_id: &RequestId, host: &str, jr_url: &str, owner: Option<&Fence>) -> bool;
            fn fail_suspended(&self, request_id: &RequestId, host: &str, reason: &str, at: DateTime<Utc>) -> ();
            fn unclaim(&self, request_id: &RequestId, host: &str) -> ();
            fn release_stale_claims(&self, before: DateTime<Utc>) -> u64;
            fn expire_suspended(&self, before: DateTime<Utc>, now: DateTime<Utc>) -> Vec<String>;
            fn find_requests(&self, filter: &RequestFilter) -> Vec<Request>;
            fn running_jr_urls(&self) -> Vec<String>;
            fn ping(&self) -> ();
            fn register_runner(&self, runner: &RunnerRegistration, at: DateTime<Utc>) -> JobRunner;
            fn renew_runner(&self, instance: &str, at: DateTime<Utc>) -> JobRunner;
            fn end_runner(&self, instance: &str, at: DateTime<Utc>) -> ();
            fn job_runners(&self, now: DateTime<Utc>, ended_since: DateTime<Utc>) -> Vec<JobRunner>;
            fn mark_runner_lost(&self, instance: &str, at: DateTime<Utc>) -> bool;
            fn owned_requests(&self, instance: &str) -> Vec<String>;
            fn recover_request(&self, holder: Holder<'_>, interrupted: &[JobLog], suspended: &SuspendedJobChain, at: DateTime<Utc>) -> ();
            fn insert_try_starts(&self, fence: Option<&Fence>, starts: &[TryStart]) -> ();
            fn try_starts(&self, request_id: &str) -> Vec<StartedTry>;
            fn count_requests(&self, states: &[State]) -> Vec<(State, u64)>;
            fn import_requests(&self, requests: &[ImportedRequest]) -> Vec<String>;
            fn take_locks(&self, request_id: &str, claims: &[LockClaim], priority: i32, now: DateTime<Utc>) -> LockTake;
            fn lock_claims(&self) -> Vec<(LockClaim, LockHolder)>;
            fn lock_waiters(&self, limit: u32) -> Vec<String>;
            fn take_job_locks(&self, fence: Option<&Fence>, request_id: &str, job_id: &str, claims: &[LockClaim], now: DateTime<Utc>) -> LockTake;
            fn release_job_locks(&self, fence: Option<&Fence>, request_id: &str, job_id: &str) -> ();
            fn add_notification_event(&self, event: &str, request_id: &str, subject: &str, at: DateTime<Utc>) -> ();
            fn notification_events(&self, limit: u32) -> Vec<crate::NotificationEvent>;
            fn fan_out(&self, fanned: &[crate::FannedOut]) -> u64;
            fn claim_notifications(&self, host: &str, now: DateTime<Utc>, until: DateTime<Utc>, limit: u32) -> Vec<crate::ClaimedNotification>;
            fn notification_attempted(&self, id: i64, host: &str, attempt: &crate::Attempt, at: DateTime<Utc>) -> bool;
            fn notifications(&self, filter: &crate::NotificationFilter) -> Vec<proto::Notification>;
            fn request_secrets(&self, request_id: &str) -> Vec<(String, String)>;
        }
    };
}

mod batch;
mod error;
mod locks;
mod mysql;
mod notifications;
mod postgres;

mod sql;
mod sqlite;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use proto::{
    AuditEvent, CreateRequest, Fence, FinishRequest, JobChain, JobLog, JobRunner, OutputChunk,
    OutputQuery, Request, RequestFilter, RequestId, RunnerRegistration, SpecVersion, State,
    SuspendedJobChain, TryStart,
};

pub use batch::{BatchOptions, Batcher};
pub use error::{Cause, Error};
pub use locks::{LockClaim, LockHolder, LockTake, LockWait};
pub use mysql::MysqlStore;
pub use notifications::{
    Attempt, ClaimedNotification, FannedOut, NewNotification, NotificationEvent, NotificationFilter,
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

/// A new request as [`Store::create_request`] stores it, for [`Store::write_batch`].
#[derive(Debug, Clone)]
pub struct NewRequest {
    /// With its job chain.
    pub request: Request,
    pub create_request: CreateRequest,
    /// The audit trail's first event.
    pub created: Option<AuditEvent>,
    /// The locks its type declares, taken ([`Store::take_locks`]) in the transaction
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
    /// the same transaction ([`Store::request_secrets`]).
    pub secrets: Vec<(String, String)>,
}

/// A trigger's delivery: the event another system sent (issue #33).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub trigger: String,
    /// The id its sender gave it (a header or a field of the event).
    pub id: String,
}

/// A request from another system's history, as it ended there
/// ([`Store::import_requests`]): `spindle import spincycle` copies Spin Cycle's requests so.
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

/// PENDING → RUNNING as [`Store::start_request`] makes it, for [`Store::write_batch`].
#[derive(Debug, Clone)]
pub struct StartRequest {
    pub request_id: String,
    pub jr_url: String,
    pub owner: Option<Fence>,
    pub at: DateTime<Utc>,
}

/// Writes of many callers committed in one transaction ([`Store::write_batch`]).
#[derive(Debug, Clone, Default)]
pub struct WriteBatch {
    pub creates: Vec<NewRequest>,
    pub starts: Vec<StartRequest>,
    pub finishes: Vec<(FinishRequest, Option<Fence>)>,
    /// Job log entries (a stored (request, job, try) is skipped, as by
    /// [`Store::insert_job_logs`]).
    pub logs: Vec<JobLog>,
    /// The runs of `logs` that a report sent under a fence: the entries in the range
    /// were reported under it (an entry in no run was reported without a fence).
    pub log_fences: Vec<(std::ops::Range<usize>, Fence)>,
    /// (request, completed jobs, the fence it was reported under), as
    /// [`Store::update_progress`].
    ///
    /// Fences are checked first, in the same transaction: a log entry or progress
    /// reported under a fence that the request's owner does not accept (or about a
    /// request that is unknown) is not written, and its (request, fence) pair is in
    /// [`BatchWritten::refused`]; a report of the same request under the fence its owner
    /// accepts is written all the same (an old runner's last report and the new owner's
    /// first may share a batch).
    pub progress: Vec<(String, u64, Option<Fence>)>,
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

/// What [`Store::write_batch`] did.
#[derive(Debug, Default)]
pub struct BatchWritten {
    /// One per start, in order: whether the request is paused, if it started; `None` if
    /// it did not (not PENDING, another epoch, unknown: [`Store::start_request`] says why).
    pub started: Vec<Option<bool>>,
    /// One per finish, in order: the request as it is now (without its args), if this
    /// finish ended it; `None` if not ([`Store::finish_request`] says why).
    pub finished: Vec<Option<Request>>,
    /// The (request, fence) pairs that were refused, with why.
    pub refused: Vec<(String, Fence, Error)>,
    /// One per create, in order: what taking its locks did (`None` without any).
    pub locked: Vec<Option<LockTake>>,
    /// One per create, in order: the request its delivery created before, when it was a
    /// delivery sent again (it was not stored).
    pub duplicates: Vec<Option<String>>,
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

/// Whose hand-over a recovered request ends ([`Store::recover_request`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder<'a> {
    /// RUNNING and owned by this instance, which was lost.
    Lost(&'a str),
    /// PENDING at this epoch, yet begun on a Job Runner: handed over, but never marked
    /// RUNNING (the Request Manager that handed it over died, or its write failed).
    Unstarted(u64),
    /// Finished in this state, and run again (`spindle retry`): its finish time and
    /// reason are cleared, its finished jobs are the suspended chain's.
    Finished(State),
}

/// What one retention round removed ([`Store::remove_finished`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Removed {
    pub requests: u64,
    pub job_log_entries: u64,
    pub job_runners: u64,
}

/// A job's latest logged try and that try's state ([`Store::job_states`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobState {
    pub job_id: String,
    pub tries: u32,
    pub state: State,
    /// One of the grapher's begin and end wrappers ([`proto::is_wrapper`]), not one of
    /// the request's own jobs.
    pub wrapper: bool,
}

/// A try that started, with the runner instance that started it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartedTry {
    pub start: TryStart,
    pub instance: String,
}

/// What the Request Manager keeps. Every method is one transaction.
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// Stores a new PENDING request with its archive (create payload, recorded args,
    /// chain) and its searchable args, in one transaction. `request.job_chain` must be set.
    /// Its epoch is 1: the first hand-over's, so that handing a new request over takes no
    /// write of its own ([`Store::hand_over`] is for the ones after).
    /// With `created`, the audit trail's first event is stored in the same transaction
    /// (one commit, and never a request without it).
    async fn create_request(
        &self,
        request: &Request,
        create_request: &CreateRequest,
        created: Option<&AuditEvent>,
    ) -> Result<(), Error>;

    /// A request with its args; with `with_chain`, also its chain, each job carrying its
    /// latest state and try count from the job log.
    async fn get_request(&self, request_id: &str, with_chain: bool) -> Result<Request, Error>;

    /// The chain as created, with each job's latest state and try count.
    async fn job_chain(&self, request_id: &str) -> Result<JobChain, Error>;

    /// Of `request_ids`, those whose request has reached a final state (unknown ids are
    /// left out): one read for every request a Request Manager's callers wait for.
    async fn ended_among(&self, request_ids: &[String]) -> Result<Vec<String>, Error>;

    /// Begins a hand-over of a request in state `expected` (PENDING or SUSPENDED): the
    /// epoch grows by one and is returned; the Job Runner it is handed to reports with it.
    async fn hand_over(&self, request_id: &RequestId, expected: State) -> Result<u64, Error>;

    /// PENDING → RUNNING, on the Job Runner at `jr_url`. With `owner`, only for that
    /// hand-over's epoch, and the instance is recorded as the request's owner. Returns
    /// whether the request is paused (it may have been paused during the hand-over).
    async fn start_request(
        &self,
        request_id: &RequestId,
        jr_url: &str,
        owner: Option<&Fence>,
        at: DateTime<Utc>,
    ) -> Result<bool, Error>;

    /// Claims the run of `schedule` due at `due_at` for Request Manager `host`: true if
    /// this call inserted it (start it), false if another did.
    async fn claim_schedule_run(
        &self,
        schedule: &str,
        due_at: DateTime<Utc>,
        host: &str,
    ) -> Result<bool, Error>;

    /// Records what a claimed run did: the request it started, or why none (`skipped`).
    async fn schedule_run_done(
        &self,
        schedule: &str,
        due_at: DateTime<Utc>,
        request_id: &str,
        skipped: &str,
    ) -> Result<(), Error>;

    /// The latest runs of `schedule`, newest first, at most `limit`.
    async fn schedule_runs(
        &self,
        schedule: &str,
        limit: u32,
    ) -> Result<Vec<proto::ScheduleRun>, Error>;

    /// The latest deliveries `trigger` accepted, newest first, at most `limit`.
    async fn trigger_deliveries(
        &self,
        trigger: &str,
        limit: u32,
    ) -> Result<Vec<proto::TriggerDelivery>, Error>;

    /// The request delivery `delivery_id` of `trigger` created, if it was stored.
    async fn delivered_request(
        &self,
        trigger: &str,
        delivery_id: &str,
    ) -> Result<Option<String>, Error>;

    /// Stores the answer to approval job `job_id` (the first answer only): true if this
    /// one was stored, false if the job had one already.
    async fn add_answer(
        &self,
        request_id: &str,
        job_id: &str,
        answer: &proto::Answer,
    ) -> Result<bool, Error>;

    /// The answers given to the request's approval jobs, by job id.
    async fn answers(&self, request_id: &str) -> Result<Vec<(String, proto::Answer)>, Error>;

    /// Forgets the answers of these jobs (they run again: a retry asks again).
    async fn remove_answers(&self, request_id: &str, job_ids: &[String]) -> Result<(), Error>;

    /// Stores a set of spec files by its version (once: a version stored already is left
    /// as it is).
    async fn add_spec_version(&self, specs: &SpecVersion, at: DateTime<Utc>) -> Result<(), Error>;

    /// The spec files of a version.
    async fn spec_version(&self, version: &str) -> Result<SpecVersion, Error>;

    /// Pauses a request that has not finished (PENDING, RUNNING or SUSPENDED), or
    /// resumes it (`paused` false); returns the request as it is now.
    async fn set_paused(&self, request_id: &str, paused: bool) -> Result<Request, Error>;

    /// Who owns a request now.
    async fn owner(&self, request_id: &str) -> Result<Owner, Error>;

    /// PENDING → FAIL (starting it failed).
    async fn fail_pending(&self, request_id: &str, at: DateTime<Utc>) -> Result<(), Error>;

    /// Marks a PENDING request STOPPED (withdrawn before it started: one waiting for a
    /// lock), which releases its locks; [`Error::State`] when it is not PENDING.
    async fn stop_pending(&self, request_id: &str, at: DateTime<Utc>) -> Result<(), Error>;

    /// Why a PENDING or SUSPENDED request waits (kept in its `error`, which its start or
    /// resume clears); a suspended chain that waits so never expires. A request in
    /// another state is left as it is, without an error.
    async fn set_waiting(&self, request_id: &str, why: &str) -> Result<(), Error>;

    /// RUNNING → the final state. A request that already finished is left as it is.
    /// With `fence`, only from the request's owner ([`Error::Fenced`] otherwise). The
    /// request's started tries are forgotten.
    async fn finish_request(
        &self,
        finish: &FinishRequest,
        fence: Option<&Fence>,
    ) -> Result<Finished, Error>;

    /// Many callers' creates, starts, finishes, job log entries and progress in one
    /// transaction, each as its own method would write it (fences checked first). A
    /// start or finish that does not apply is left out and reported, not an error; an
    /// error is the whole batch's, and nothing of it is stored.
    async fn write_batch(&self, batch: &WriteBatch) -> Result<BatchWritten, Error>;

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

    /// Retention: removes at most `limit` finished requests (COMPLETE, FAIL, STOPPED)
    /// that finished before `before`, oldest first, with everything kept of them (job
    /// log, output, args, archive, audit trail), and the runners that ended or were lost
    /// before it; one transaction. Where several Request Managers share the database,
    /// one removes at a time (the others' rounds remove nothing).
    async fn remove_finished(&self, before: DateTime<Utc>, limit: u64) -> Result<Removed, Error>;

    /// Adds an entry to a request's audit trail.
    async fn add_audit(&self, request_id: &str, event: &AuditEvent) -> Result<(), Error>;

    /// A request's audit trail, oldest first (empty when it has none).
    async fn audit(&self, request_id: &str) -> Result<Vec<AuditEvent>, Error>;

    /// Every entry of one job of a request, by try (empty when it has none).
    async fn job_tries_log(&self, request_id: &str, job_id: &str) -> Result<Vec<JobLog>, Error>;

    /// Takes a PENDING (or SUSPENDED) request's `claims` in one transaction (each lock's `lock_keys` row
    /// locked, in one order): recorded as queued if not yet (by `priority`, then the
    /// request's creation), then all held if every lock has room for it after the
    /// claims queued before it, else none ([`LockTake::Waiting`] names the first lock
    /// that is taken). Claims are released by the UPDATE that ends the request.
    /// [`Error::State`] when the request is neither PENDING nor SUSPENDED.
    async fn take_locks(
        &self,
        request_id: &str,
        claims: &[LockClaim],
        priority: i32,
        now: DateTime<Utc>,
    ) -> Result<LockTake, Error>;

    /// Every claim of every lock, by lock (name, key), holders first, then in queue order.
    async fn lock_claims(&self) -> Result<Vec<(LockClaim, LockHolder)>, Error>;

    /// Up to `limit` PENDING requests whose claims are at the head of a lock's queue
    /// (within its free places), first served first.
    async fn lock_waiters(&self, limit: u32) -> Result<Vec<String>, Error>;

    /// Takes the `claims` of one job of a RUNNING request (a node's `locks:`, its job
    /// pools) as [`Store::take_locks`] takes a request's: queued at the first ask (first
    /// come, first served), all held or none. The fence is checked in the same
    /// transaction, the request's row locked ([`Error::Fenced`]: the caller no longer
    /// owns it; [`Error::State`]: it is not RUNNING). Asking again once held is granted
    /// at once; asking again while queued keeps the place.
    async fn take_job_locks(
        &self,
        fence: Option<&Fence>,
        request_id: &str,
        job_id: &str,
        claims: &[LockClaim],
        now: DateTime<Utc>,
    ) -> Result<LockTake, Error>;

    /// Releases what one job of a request holds or waits for (its end, or a stop while
    /// it waits); the request's end releases every claim of its jobs in any case.
    async fn release_job_locks(
        &self,
        fence: Option<&Fence>,
        request_id: &str,
        job_id: &str,
    ) -> Result<(), Error>;

    /// Adds an event to the notifications' outbox (a request's end and a runner's loss
    /// are added by the schema's triggers in the transactions that store them).
    async fn add_notification_event(
        &self,
        event: &str,
        request_id: &str,
        subject: &str,
        at: DateTime<Utc>,
    ) -> Result<(), Error>;

    /// The oldest events not yet fanned out, at most `limit`.
    async fn notification_events(&self, limit: u32) -> Result<Vec<NotificationEvent>, Error>;

    /// Deletes each event and inserts its notifications, in one transaction; an event
    /// already fanned out (by another Request Manager) adds nothing. Returns the number
    /// of events this call fanned out.
    async fn fan_out(&self, fanned: &[FannedOut]) -> Result<u64, Error>;

    /// Claims for `host`, until `until`, pending notifications due by `now` (at most
    /// `limit`): no other caller gets one of them before `until` or its attempt's record.
    async fn claim_notifications(
        &self,
        host: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<ClaimedNotification>, Error>;

    /// Records an attempt to send notification `id` and releases `host`'s claim; false
    /// (nothing written) when `host` no longer holds it.
    async fn notification_attempted(
        &self,
        id: i64,
        host: &str,
        attempt: &Attempt,
        at: DateTime<Utc>,
    ) -> Result<bool, Error>;

    /// A request's secret args, each (name, value as the Request Manager encrypted it).
    async fn request_secrets(&self, request_id: &str) -> Result<Vec<(String, String)>, Error>;

    /// Notifications, newest first.
    async fn notifications(
        &self,
        filter: &NotificationFilter,
    ) -> Result<Vec<proto::Notification>, Error>;

    /// Each logged job's latest try and its state, without the entries' texts: what a
    /// view of a running request polls. Jobs without an entry are left out.
    async fn job_states(&self, request_id: &str) -> Result<Vec<JobState>, Error>;

    /// Stores a suspended chain and sets its RUNNING request SUSPENDED, in one transaction.
    /// With `fence`, only from the request's owner ([`Error::Fenced`] otherwise).
    async fn suspend_request(
        &self,
        suspended: &SuspendedJobChain,
        fence: Option<&Fence>,
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
    /// the chain is deleted and the request's state is returned in the error. With
    /// `owner`, the runner instance is recorded for the hand-over's epoch. Returns
    /// whether the request is paused.
    async fn resumed(
        &self,
        request_id: &RequestId,
        host: &str,
        jr_url: &str,
        owner: Option<&Fence>,
    ) -> Result<bool, Error>;

    /// Fails a request whose claimed chain can never be resumed (a Job Runner refused it
    /// as invalid): the chain deleted and SUSPENDED → FAIL with `reason`, in one
    /// transaction.
    async fn fail_suspended(
        &self,
        request_id: &RequestId,
        host: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), Error>;

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

    /// Whether the database answers (a trivial query), for readiness checks.
    async fn ping(&self) -> Result<(), Error>;

    /// Registers a new Job Runner instance, its lease starting `at`.
    async fn register_runner(
        &self,
        runner: &RunnerRegistration,
        at: DateTime<Utc>,
    ) -> Result<JobRunner, Error>;

    /// Renews a live instance's lease. One declared lost, or deregistered, is
    /// [`Error::RunnerEnded`]; an unknown one is [`Error::NotFound`].
    async fn renew_runner(&self, instance: &str, at: DateTime<Utc>) -> Result<JobRunner, Error>;

    /// Deregisters an instance that shut down (its chains handed back).
    async fn end_runner(&self, instance: &str, at: DateTime<Utc>) -> Result<(), Error>;

    /// Every registered instance, newest first, its state as of `now`, with its count
    /// of RUNNING requests. Instances that ended before `ended_since` are left out.
    async fn job_runners(
        &self,
        now: DateTime<Utc>,
        ended_since: DateTime<Utc>,
    ) -> Result<Vec<JobRunner>, Error>;

    /// Declares an instance lost: true for the one caller that did it (the claim of its
    /// recovery), false if it was lost or ended already.
    async fn mark_runner_lost(&self, instance: &str, at: DateTime<Utc>) -> Result<bool, Error>;

    /// RUNNING requests owned by `instance`.
    async fn owned_requests(&self, instance: &str) -> Result<Vec<String>, Error>;

    /// Recovers a request from `holder`, in one transaction: stores `interrupted` (job
    /// log entries of the tries that never reported), stores `suspended` and sets the
    /// request SUSPENDED with a new epoch and no owner, so that it is resumed like a
    /// chain handed back, and nothing more from the runner that had it is accepted. Only
    /// if the request is still as `holder` says (otherwise [`Error::Fenced`] or
    /// [`Error::State`]), and (from a runner) only if no try started that `interrupted`
    /// does not log: a start stored after the caller read them is [`Error::Fenced`], and
    /// the caller recovers the request again from what is stored now.
    async fn recover_request(
        &self,
        holder: Holder<'_>,
        interrupted: &[JobLog],
        suspended: &SuspendedJobChain,
        at: DateTime<Utc>,
    ) -> Result<(), Error>;

    /// Stores that tries started (a re-sent one is skipped). With `fence`, only from the
    /// requests' owner ([`Error::Fenced`] otherwise), checked with their rows locked in
    /// the same transaction: a start is stored before a recovery takes the request back
    /// (which then sees it) or refused after, never both stored and missed.
    async fn insert_try_starts(
        &self,
        fence: Option<&Fence>,
        starts: &[TryStart],
    ) -> Result<(), Error>;

    /// The started tries of a request that has not finished.
    async fn try_starts(&self, request_id: &str) -> Result<Vec<StartedTry>, Error>;

    /// How many requests are in each of `states` (a state with none is left out); reads
    /// the state index only.
    async fn count_requests(&self, states: &[State]) -> Result<Vec<(State, u64)>, Error>;

    /// Stores requests of another system's history as they are (state, times, job log,
    /// a SUSPENDED one's chain, to resume), all or none, in one transaction. A request
    /// whose id is stored already is skipped whole, so importing again copies nothing
    /// twice. Returns the ids stored now.
    async fn import_requests(&self, requests: &[ImportedRequest]) -> Result<Vec<String>, Error>;
}

/// Opens the store a URL names: `sqlite://PATH` (created if missing), `postgres://...`
/// or `mysql://...` (MySQL or MariaDB), and runs its migrations.
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
    if url.starts_with("mysql://") || url.starts_with("mariadb://") {
        let url = url.replacen("mariadb://", "mysql://", 1);
        return Ok(Arc::new(MysqlStore::connect(&url).await?));
    }
    Err(Error::Config(format!(
        "unsupported database URL {:?}; expected sqlite://PATH, postgres://USER@HOST:PORT/DATABASE or mysql://USER:PASSWORD@HOST:PORT/DATABASE",
        redacted(url)
    )))
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
mod tests;
