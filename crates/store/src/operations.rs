//! The store's operations, each written once here (its signature and what it does) and
//! once in SQL (`sql/`, an inherent method of [`SqlStore`] of the same name): one trait
//! per table family, and [`Store`], all of them, which is what a Request Manager holds.
//! Every method is one transaction.
//!
//! [`store_traits!`] writes each trait and its impls from the one list: [`SqlStore`]'s
//! (forwarding to its SQL, bounding the call's time and naming the operation in any error
//! it returns), [`crate::timed`]'s (timing each call) and, for other crates' tests,
//! [`crate::faulty`]'s (failing a call on demand).

use chrono::{DateTime, Utc};
use proto::{
    AuditEvent, CreateRequest, Fence, FinishRequest, JobChain, JobLog, JobRunner, OutputChunk,
    OutputQuery, Request, RequestFilter, RequestId, RunnerRegistration, SpecVersion, State,
    SuspendedJobChain, TryStart,
};

use crate::sql::{Backend, SqlStore};
use crate::{
    Attempt, BatchWritten, ClaimedNotification, Error, FannedOut, Finished, Holder,
    ImportedRequest, JobState, LockClaim, LockHolder, LockTake, LoggedTry, NotificationEvent,
    NotificationFilter, Owner, Recovery, RecoveryRead, Removed, StartedTry, WriteBatch,
};

/// Each trait of `$trait`s (every method an `async fn` answering `Result<$ret, Error>`),
/// its impls, and [`Store`].
macro_rules! store_traits {
    ($(
        $(#[$trait_meta:meta])*
        pub trait $trait:ident {
            $(
                $(#[$meta:meta])*
                fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) -> $ret:ty;
            )*
        }
    )*) => {
        $(
            $(#[$trait_meta])*
            #[async_trait::async_trait]
            pub trait $trait: Send + Sync + 'static {
                $(
                    $(#[$meta])*
                    async fn $name(&self $(, $arg: $ty)*) -> Result<$ret, Error>;
                )*
            }

            #[async_trait::async_trait]
            impl<DB: Backend> $trait for SqlStore<DB> {
                $(
                    async fn $name(&self $(, $arg: $ty)*) -> Result<$ret, Error> {
                        self.call(stringify!($name), Self::$name(self $(, $arg)*)).await
                    }
                )*
            }

            #[async_trait::async_trait]
            impl $trait for crate::timed::Timed {
                $(
                    async fn $name(&self $(, $arg: $ty)*) -> Result<$ret, Error> {
                        let started = std::time::Instant::now();
                        let res = self.inner.$name($($arg),*).await;
                        self.observer.query(stringify!($name), started.elapsed(), res.is_ok());
                        res
                    }
                )*
            }

            #[cfg(feature = "testing")]
            #[async_trait::async_trait]
            impl $trait for crate::faulty::Faulty {
                $(
                    async fn $name(&self $(, $arg: $ty)*) -> Result<$ret, Error> {
                        self.check(stringify!($name))?;
                        self.inner.$name($($arg),*).await
                    }
                )*
            }
        )*

        /// What the Request Manager keeps: every operation of every table family.
        pub trait Store: $($trait +)* Send + Sync + 'static {}

        impl<T: $($trait +)* Send + Sync + 'static> Store for T {}
    };
}

store_traits! {
    /// Requests as they are read: the request, its archive (job chain, spec versions), its audit trail, answers and secrets, and the search.
    pub trait Requests {
        /// Stores a new PENDING request with its archive (create payload, recorded args,
        /// chain) and its searchable args, in one transaction. `request.job_chain` must be set.
        /// Its epoch is 1: the first hand-over's, so that handing a new request over takes no
        /// write of its own ([`Lifecycle::hand_over`] is for the ones after).
        /// With `created`, the audit trail's first event is stored in the same transaction
        /// (one commit, and never a request without it).
        fn create_request(&self, request: &Request, create_request: &CreateRequest, created: Option<&AuditEvent>) -> ();

        /// A request with its args; with `with_chain`, also its chain, each job carrying its
        /// latest state and try count from the job log.
        fn get_request(&self, request_id: &str, with_chain: bool) -> Request;

        /// The chain as created, with each job's latest state and try count.
        fn job_chain(&self, request_id: &str) -> JobChain;

        /// The chain as created, its stored JSON (Spin Cycle's `JobChain` shape; each job's
        /// state as created): for a reader that wants only part of a big chain, such as
        /// the web UI's outline of it.
        fn job_chain_json(&self, request_id: &str) -> String;

        /// Of `request_ids`, those whose request has reached a final state (unknown ids are
        /// left out): one read for every request a Request Manager's callers wait for.
        fn ended_among(&self, request_ids: &[String]) -> Vec<String>;

        /// The requests of `request_ids` (unknown ids are left out), without args or
        /// chain, in no order: one read per few hundred (`spindle ps` of thousands of
        /// running requests).
        fn requests_among(&self, request_ids: &[String]) -> Vec<Request>;

        /// Requests matching `filter`, newest first, without args or chain.
        fn find_requests(&self, filter: &RequestFilter) -> Vec<Request>;

        /// How many requests are in each of `states` (a state with none is left out); reads
        /// the state index only. With `at_most`, a count stops past it (`at_most + 1`
        /// means more): a finished state of a large history is not counted through.
        fn count_requests(&self, states: &[State], at_most: Option<u64>) -> Vec<(State, u64)>;

        /// Who owns a request now.
        fn owner(&self, request_id: &str) -> Owner;

        /// Pauses a request that has not finished (PENDING, RUNNING or SUSPENDED), or
        /// resumes it (`paused` false); returns the request as it is now.
        fn set_paused(&self, request_id: &str, paused: bool) -> Request;

        /// Stores a set of spec files by its version (once: a version stored already is left
        /// as it is).
        fn add_spec_version(&self, specs: &SpecVersion, at: DateTime<Utc>) -> ();

        /// The spec files of a version.
        fn spec_version(&self, version: &str) -> SpecVersion;

        /// Adds an entry to a request's audit trail.
        fn add_audit(&self, request_id: &str, event: &AuditEvent) -> ();

        /// A request's audit trail, oldest first (empty when it has none).
        fn audit(&self, request_id: &str) -> Vec<AuditEvent>;

        /// A request's secret args, each (name, value as the Request Manager encrypted it).
        fn request_secrets(&self, request_id: &str) -> Vec<(String, String)>;

        /// Stores the answer to approval job `job_id` (the first answer only): true if this
        /// one was stored, false if the job had one already.
        fn add_answer(&self, request_id: &str, job_id: &str, answer: &proto::Answer) -> bool;

        /// The answers given to the request's approval jobs, by job id.
        fn answers(&self, request_id: &str) -> Vec<(String, proto::Answer)>;

        /// Forgets the answers of these jobs (they run again: a retry asks again).
        fn remove_answers(&self, request_id: &str, job_ids: &[String]) -> ();

        /// Whether the database answers (a trivial query), for readiness checks.
        fn ping(&self) -> ();
    }

    /// A request's state changes: hand-over, start, finish, progress, and the group commit of many callers' writes.
    pub trait Lifecycle {
        /// Begins a hand-over of a request in state `expected` (PENDING or SUSPENDED): the
        /// epoch grows by one and is returned; the Job Runner it is handed to reports with it.
        /// `known_tries` is the handed chain's count of each job's tries (none for a new
        /// chain): a try beyond it that began or was logged under the current epoch (a
        /// hand-over whose answer or record was lost, its runner running it) refuses the
        /// hand-over with [`Error::TryBegan`], checked with the request's row locked, for
        /// the next runner would run that try again under its number.
        fn hand_over(&self, request_id: &RequestId, expected: State, known_tries: &std::collections::BTreeMap<String, u32>) -> u64;

        /// PENDING → RUNNING, on the Job Runner at `jr_url`. With `owner`, only for that
        /// hand-over's epoch, and the instance is recorded as the request's owner. Returns
        /// whether the request is paused (it may have been paused during the hand-over).
        fn start_request(&self, request_id: &RequestId, jr_url: &str, owner: Option<&Fence>, at: DateTime<Utc>) -> bool;

        /// PENDING → FAIL (starting it failed).
        fn fail_pending(&self, request_id: &str, at: DateTime<Utc>) -> ();

        /// Marks a PENDING request STOPPED (withdrawn before it started: one waiting for a
        /// lock), which releases its locks; [`Error::State`] when it is not PENDING.
        fn stop_pending(&self, request_id: &str, at: DateTime<Utc>) -> ();

        /// Why a PENDING or SUSPENDED request waits (kept in its `error`, which its start or
        /// resume clears); a suspended chain that waits so never expires. A request in
        /// another state is left as it is, without an error.
        fn set_waiting(&self, request_id: &str, why: &str) -> ();

        /// RUNNING → the final state. A request that already finished is left as it is.
        /// With `fence`, only from the request's owner ([`Error::Fenced`] otherwise). The
        /// request's started tries are forgotten.
        fn finish_request(&self, finish: &FinishRequest, fence: Option<&Fence>) -> Finished;

        /// Many callers' creates, starts, finishes, job log entries, progress and resumes in one
        /// transaction, each as its own method would write it (fences checked first). A
        /// start or finish that does not apply is left out and reported, not an error; an
        /// error is the whole batch's, and nothing of it is stored.
        fn write_batch(&self, batch: &WriteBatch) -> BatchWritten;

        /// Sets the count of completed jobs of a RUNNING request (otherwise does nothing).
        fn update_progress(&self, request_id: &str, finished_jobs: u64) -> ();

        /// [`Lifecycle::update_progress`] for many requests in one transaction.
        fn update_progress_many(&self, updates: &[(String, u64)]) -> ();
    }

    /// The job log, tries that started, and jobs' output.
    pub trait JobLogs {
        /// Stores job log entries in one transaction; an entry whose (request, job, try) is
        /// stored already is skipped, so a re-sent entry is never duplicated.
        fn insert_job_logs(&self, entries: &[JobLog]) -> ();

        /// Stores live output chunks in one transaction; a chunk whose (request, job, try,
        /// stream, offset) is stored already is skipped. Then, per try and stream, deletes the
        /// chunks lying wholly between the first [`proto::OUTPUT_HEAD_BYTES`] and the last
        /// [`proto::OUTPUT_TAIL_BYTES`] of what has arrived, so a try keeps head and tail.
        fn insert_output(&self, chunks: &[OutputChunk]) -> ();

        /// A request's stored output chunks that `query` selects, in the order they were
        /// stored (by `seq`).
        fn output(&self, request_id: &str, query: &OutputQuery) -> Vec<OutputChunk>;

        /// Every job log entry of a request, by job then try.
        fn job_log(&self, request_id: &str) -> Vec<JobLog>;

        /// Every job log entry of a request without its texts (no output, error, name or
        /// type), in no particular order: what a request's elements are worked out from.
        fn logged_tries(&self, request_id: &str) -> Vec<LoggedTry>;

        /// The entry with the highest try of one job.
        fn latest_job_log(&self, request_id: &RequestId, job_id: &str) -> JobLog;

        /// Every entry of one job of a request, by try (empty when it has none).
        fn job_tries_log(&self, request_id: &str, job_id: &str) -> Vec<JobLog>;

        /// Each logged job's latest try and its state, without the entries' texts: what a
        /// view of a running request polls. Jobs without an entry are left out.
        fn job_states(&self, request_id: &str) -> Vec<JobState>;

        /// [`JobLogs::job_states`] of each of `request_ids` (a request without entries is
        /// left out): one read per few hundred requests (a page of `find`, `spindle ps`).
        fn job_states_among(&self, request_ids: &[String]) -> std::collections::HashMap<String, Vec<JobState>>;

        /// Stores that tries started (a re-sent one is skipped). With `fence`, only from the
        /// requests' owner ([`Error::Fenced`] otherwise), checked with their rows locked in
        /// the same transaction: a start is stored before a recovery takes the request back
        /// (which then sees it) or refused after, never both stored and missed.
        fn insert_try_starts(&self, fence: Option<&Fence>, starts: &[TryStart]) -> ();

        /// The started tries of a request that has not finished.
        fn try_starts(&self, request_id: &str) -> Vec<StartedTry>;
    }

    /// Suspended job chains: suspending, claiming one to resume, and giving claims back.
    pub trait SuspendedChains {
        /// Stores a suspended chain and sets its RUNNING request SUSPENDED, in one transaction.
        /// With `fence`, only from the request's owner ([`Error::Fenced`] otherwise).
        fn suspend_request(&self, suspended: &SuspendedJobChain, fence: Option<&Fence>, at: DateTime<Utc>) -> ();

        /// Claims one unclaimed suspended chain for `host` (oldest first). Several Request
        /// Managers may call this at once: each chain is claimed by exactly one.
        fn claim_suspended(&self, host: &str, at: DateTime<Utc>) -> Option<SuspendedJobChain>;

        /// Claims at most `limit` unclaimed suspended chains for `host` (oldest first) in
        /// one transaction, as [`SuspendedChains::claim_suspended`] claims one.
        fn claim_suspended_many(&self, host: &str, at: DateTime<Utc>, limit: u32) -> Vec<SuspendedJobChain>;

        /// The claimed chain was resumed on the Job Runner at `jr_url`: SUSPENDED → RUNNING and
        /// the chain deleted, in one transaction. If the request is no longer SUSPENDED, only
        /// the chain is deleted and the request's state is returned in the error. With
        /// `owner`, the runner instance is recorded for the hand-over's epoch. Returns
        /// whether the request is paused.
        fn resumed(&self, request_id: &RequestId, host: &str, jr_url: &str, owner: Option<&Fence>) -> bool;

        /// Fails a request whose claimed chain can never be resumed (a Job Runner refused it
        /// as invalid): the chain deleted and SUSPENDED → FAIL with `reason`, in one
        /// transaction.
        fn fail_suspended(&self, request_id: &RequestId, host: &str, reason: &str, at: DateTime<Utc>) -> ();

        /// Gives up a claim (resuming failed); only `host`'s own claim.
        fn unclaim(&self, request_id: &RequestId, host: &str) -> ();

        /// Releases claims not renewed since `before` (their Request Manager went away).
        fn release_stale_claims(&self, before: DateTime<Utc>) -> u64;

        /// Fails the requests of unclaimed chains suspended before `before` (with finish time
        /// `now`) and deletes those chains. Returns the request ids.
        fn expire_suspended(&self, before: DateTime<Utc>, now: DateTime<Utc>) -> Vec<String>;
    }

    /// Registered Job Runners, their leases, and taking back a lost runner's requests.
    pub trait Runners {
        /// Registers a new Job Runner instance, its lease starting `at`.
        fn register_runner(&self, runner: &RunnerRegistration, at: DateTime<Utc>) -> JobRunner;

        /// Renews a live instance's lease. One declared lost, or deregistered, is
        /// [`Error::RunnerEnded`]; an unknown one is [`Error::NotFound`].
        fn renew_runner(&self, instance: &str, at: DateTime<Utc>) -> JobRunner;

        /// Deregisters an instance that shut down (its chains handed back).
        fn end_runner(&self, instance: &str, at: DateTime<Utc>) -> ();

        /// Every registered instance, newest first, its state as of `now`, with its count
        /// of RUNNING requests. Instances that ended before `ended_since` are left out.
        fn job_runners(&self, now: DateTime<Utc>, ended_since: DateTime<Utc>) -> Vec<JobRunner>;

        /// Declares an instance lost: true for the one caller that did it (the claim of its
        /// recovery), false if it was lost or ended already.
        fn mark_runner_lost(&self, instance: &str, at: DateTime<Utc>) -> bool;

        /// RUNNING requests owned by `instance`.
        fn owned_requests(&self, instance: &str) -> Vec<String>;

        /// Recovers a request from `holder`, in one transaction: stores `interrupted` (job
        /// log entries of the tries that never reported), stores `suspended` and sets the
        /// request SUSPENDED with a new epoch and no owner, so that it is resumed like a
        /// chain handed back, and nothing more from the runner that had it is accepted. Only
        /// if the request is still as `holder` says (otherwise [`Error::Fenced`] or
        /// [`Error::State`]), and (from a runner) only if no try started that `interrupted`
        /// does not log: a start stored after the caller read them is [`Error::Fenced`], and
        /// the caller recovers the request again from what is stored now.
        fn recover_request(&self, holder: Holder<'_>, interrupted: &[JobLog], suspended: &SuspendedJobChain, at: DateTime<Utc>) -> ();

        /// What recovering each of `request_ids` reads, in a few statements for a few
        /// hundred of them (a request not found is left out): a lost runner's thousands
        /// are recovered in batches, not three reads each.
        fn recovery_reads_among(&self, request_ids: &[String]) -> std::collections::HashMap<String, RecoveryRead>;

        /// [`Runners::recover_request`] from lost runner `instance` of each of
        /// `recoveries`, in one transaction, each checked as if alone (its row locked):
        /// the answers in the order given. One refused (moved on, a try begun that it
        /// does not log) changes nothing of its request and holds up none of the others.
        fn recover_lost_many(&self, instance: &str, recoveries: &[Recovery], at: DateTime<Utc>) -> Vec<Result<(), Error>>;

        /// The Job Runners of RUNNING requests.
        fn running_jr_urls(&self) -> Vec<String>;
    }

    /// Request and job locks, taken in the transaction of the change they guard.
    pub trait Locks {
        /// Takes a PENDING (or SUSPENDED) request's `claims` in one transaction (each lock's `lock_keys` row
        /// locked, in one order): recorded as queued if not yet (by `priority`, then the
        /// request's creation), then all held if every lock has room for it after the
        /// claims queued before it, else none ([`LockTake::Waiting`] names the first lock
        /// that is taken). Claims are released by the UPDATE that ends the request.
        /// [`Error::State`] when the request is neither PENDING nor SUSPENDED.
        fn take_locks(&self, request_id: &str, claims: &[LockClaim], priority: i32, now: DateTime<Utc>) -> LockTake;

        /// Every claim of every lock, by lock (name, key), holders first, then in queue order.
        fn lock_claims(&self) -> Vec<(LockClaim, LockHolder)>;

        /// Up to `limit` PENDING requests whose claims are at the head of a lock's queue
        /// (within its free places), first served first.
        fn lock_waiters(&self, limit: u32) -> Vec<String>;

        /// Takes the `claims` of one job of a RUNNING request (a node's `locks:`, its job
        /// pools) as [`Locks::take_locks`] takes a request's: queued at the first ask (first
        /// come, first served), all held or none. The fence is checked in the same
        /// transaction, the request's row locked ([`Error::Fenced`]: the caller no longer
        /// owns it; [`Error::State`]: it is not RUNNING). Asking again once held is granted
        /// at once; asking again while queued keeps the place.
        fn take_job_locks(&self, fence: Option<&Fence>, request_id: &str, job_id: &str, claims: &[LockClaim], now: DateTime<Utc>) -> LockTake;

        /// Releases what one job of a request holds or waits for (its end, or a stop while
        /// it waits); the request's end releases every claim of its jobs in any case.
        fn release_job_locks(&self, fence: Option<&Fence>, request_id: &str, job_id: &str) -> ();
    }

    /// Schedules' runs, triggers' deliveries and notifications.
    pub trait Events {
        /// Claims the run of `schedule` due at `due_at` for Request Manager `host`: true if
        /// this call inserted it (start it), false if another did.
        fn claim_schedule_run(&self, schedule: &str, due_at: DateTime<Utc>, host: &str) -> bool;

        /// Records what a claimed run did: the request it started, or why none (`skipped`).
        fn schedule_run_done(&self, schedule: &str, due_at: DateTime<Utc>, request_id: &str, skipped: &str) -> ();

        /// The latest runs of `schedule`, newest first, at most `limit`.
        fn schedule_runs(&self, schedule: &str, limit: u32) -> Vec<proto::ScheduleRun>;

        /// The latest deliveries `trigger` accepted, newest first, at most `limit`.
        fn trigger_deliveries(&self, trigger: &str, limit: u32) -> Vec<proto::TriggerDelivery>;

        /// The request delivery `delivery_id` of `trigger` created, if it was stored.
        fn delivered_request(&self, trigger: &str, delivery_id: &str) -> Option<String>;

        /// Adds an event to the notifications' outbox (a request's end and a runner's loss
        /// are added by the schema's triggers in the transactions that store them).
        fn add_notification_event(&self, event: &str, request_id: &str, subject: &str, at: DateTime<Utc>) -> ();

        /// The oldest events not yet fanned out, at most `limit`.
        fn notification_events(&self, limit: u32) -> Vec<NotificationEvent>;

        /// Deletes each event and inserts its notifications, in one transaction; an event
        /// already fanned out (by another Request Manager) adds nothing. Returns the number
        /// of events this call fanned out.
        fn fan_out(&self, fanned: &[FannedOut]) -> u64;

        /// Claims for `host`, until `until`, pending notifications due by `now` (at most
        /// `limit`): no other caller gets one of them before `until` or its attempt's record.
        fn claim_notifications(&self, host: &str, now: DateTime<Utc>, until: DateTime<Utc>, limit: u32) -> Vec<ClaimedNotification>;

        /// Records an attempt to send notification `id` and releases `host`'s claim; false
        /// (nothing written) when `host` no longer holds it.
        fn notification_attempted(&self, id: i64, host: &str, attempt: &Attempt, at: DateTime<Utc>) -> bool;

        /// Notifications, newest first.
        fn notifications(&self, filter: &NotificationFilter) -> Vec<proto::Notification>;
    }

    /// What ends the history: retention, and requests imported from another system.
    pub trait History {
        /// Retention: removes at most `limit` finished requests (COMPLETE, FAIL, STOPPED)
        /// that finished before `before`, oldest first, with everything kept of them (job
        /// log, output, args, archive, audit trail), and the runners that ended or were lost
        /// before it; one transaction. Where several Request Managers share the database,
        /// one removes at a time (the others' rounds remove nothing). PostgreSQL and MySQL:
        /// where a month of request ids ended before `before` and all its requests
        /// finished before it, the call drops that month's partitions instead (however
        /// many requests it holds) and removes nothing else (MySQL: in DDL of its own,
        /// not in the transaction).
        fn remove_finished(&self, before: DateTime<Utc>, limit: u64) -> Removed;

        /// PostgreSQL and MySQL: makes the month partitions of the request tables for
        /// `now`'s month and the next two where they are not made yet (once a month does
        /// it write); the number of months made. SQLite: nothing, 0.
        fn prepare_partitions(&self, now: DateTime<Utc>) -> u32;

        /// Stores requests of another system's history as they are (state, times, job log,
        /// a SUSPENDED one's chain, to resume), all or none, in one transaction. A request
        /// whose id is stored already is skipped whole, so importing again copies nothing
        /// twice; the others' rows go in bulk (PostgreSQL: `COPY`), of two job log entries
        /// of one try the first, and a job log row stored already without its request
        /// fails the batch. Returns the ids stored now.
        fn import_requests(&self, requests: &[ImportedRequest]) -> Vec<String>;
    }

    /// Single sign-on's sign-ins in flight: each begun on one Request Manager and
    /// finished on any (the payload is the sign-in's, opaque here).
    pub trait SignIns {
        /// Keeps the sign-in `state` names, begun at `at`; removes those begun before
        /// `expired_before`.
        fn keep_sign_in(
            &self,
            state: &str,
            payload: &str,
            at: DateTime<Utc>,
            expired_before: DateTime<Utc>,
        ) -> ();

        /// Takes the sign-in `state` names, once: its payload if it was kept and began at
        /// or after `not_before`. Taken or expired, it is removed.
        fn take_sign_in(&self, state: &str, not_before: DateTime<Utc>) -> Option<String>;
    }
}
