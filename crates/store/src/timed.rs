//! A [`Store`] that times every operation of another and tells a [`QueryObserver`]
//! (the metrics): one decorator, so neither backend carries timing code.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use proto::{
    AuditEvent, CreateRequest, Fence, FinishRequest, JobChain, JobLog, JobRunner, OutputChunk,
    OutputQuery, Request, RequestFilter, RequestId, RunnerRegistration, SpecVersion, State,
    SuspendedJobChain, TryStart,
};

use crate::{
    BatchWritten, Error, Finished, Holder, JobState, Owner, Removed, StartedTry, Store, WriteBatch,
};

/// Told how long each store operation took, by the operation's name (the [`Store`]
/// method's), and whether it succeeded.
pub trait QueryObserver: Send + Sync + 'static {
    fn query(&self, operation: &'static str, elapsed: Duration, ok: bool);
}

/// `inner`, with every operation timed for `observer`.
pub fn timed(inner: Arc<dyn Store>, observer: Arc<dyn QueryObserver>) -> Arc<dyn Store> {
    Arc::new(Timed { inner, observer })
}

struct Timed {
    inner: Arc<dyn Store>,
    observer: Arc<dyn QueryObserver>,
}

/// Implements every method of [`Store`] as the inner store's, timed. The signatures
/// are the trait's: the compiler checks that the list is whole and right.
macro_rules! timed_store {
    ($( fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) -> $ret:ty; )*) => {
        #[async_trait::async_trait]
        impl Store for Timed {
            $(
                async fn $name(&self $(, $arg: $ty)*) -> Result<$ret, Error> {
                    let started = Instant::now();
                    let res = self.inner.$name($($arg),*).await;
                    self.observer.query(stringify!($name), started.elapsed(), res.is_ok());
                    res
                }
            )*
        }
    };
}

timed_store! {
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
    fn add_answer(&self, request_id: &str, job_id: &str, answer: &proto::Answer) -> bool;
    fn answers(&self, request_id: &str) -> Vec<(String, proto::Answer)>;
    fn remove_answers(&self, request_id: &str, job_ids: &[String]) -> ();
    fn add_spec_version(&self, specs: &SpecVersion, at: DateTime<Utc>) -> ();
    fn spec_version(&self, version: &str) -> SpecVersion;
    fn owner(&self, request_id: &str) -> Owner;
    fn fail_pending(&self, request_id: &str, at: DateTime<Utc>) -> ();
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
    fn insert_try_starts(&self, instance: &str, starts: &[TryStart]) -> ();
    fn try_starts(&self, request_id: &str) -> Vec<StartedTry>;
    fn count_requests(&self, states: &[State]) -> Vec<(State, u64)>;
}
