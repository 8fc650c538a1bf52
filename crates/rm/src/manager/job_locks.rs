//! Locks taken by jobs (issue #34): a job or sequence node's `locks:` and the job pools
//! its type is in. The Job Runner asks before the job's first try and again while they
//! are taken; the job's end (or a stop while it waits) releases them, and its
//! request's end releases every one in any case.

use super::*;
use proto::{JobLocksTaken, TakeJobLocks};
use store::{LockClaim, LockTake};

/// The most locks one job may ask for at once.
const MAX_JOB_LOCKS: usize = 64;

impl Manager {
    /// Takes the locks of one job of a RUNNING request that `fence`'s runner owns: all
    /// held, or none and the job keeps its place in their queues (the answer says why it
    /// waits, as a request's reason does).
    pub async fn take_job_locks(
        &self,
        request_id: &str,
        take: &TakeJobLocks,
        fence: Option<&Fence>,
    ) -> Result<JobLocksTaken, Error> {
        let claims = job_claims(take)?;
        let taken = self
            .store
            .take_job_locks(fence, request_id, &take.job_id, &claims, Utc::now())
            .await?;
        Ok(match taken {
            LockTake::Granted => {
                if let Some(metrics) = &self.options.telemetry.metrics {
                    // How long it waited, by the runner's clock (none if it is ahead).
                    let now = Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX);
                    let waited = u64::try_from(now.saturating_sub(take.asked_since))
                        .ok()
                        .filter(|_| take.asked_since > 0)
                        .map_or(Duration::ZERO, Duration::from_nanos);
                    for lock in &take.locks {
                        metrics.lock_taken(&lock.name, waited);
                    }
                }
                tracing::debug!(request_id, job_id = take.job_id, "job's locks taken");
                JobLocksTaken {
                    granted: true,
                    waiting: String::new(),
                }
            }
            LockTake::Waiting(wait) => {
                let label = proto::lock_label(&wait.name, &wait.key);
                JobLocksTaken {
                    granted: false,
                    waiting: format!(
                        "waiting for lock {label} ({} of {} held), {}, {} ahead in the queue",
                        wait.holders.len(),
                        wait.limit,
                        locks::holders_text(&wait),
                        wait.ahead
                    ),
                }
            }
        })
    }

    /// Releases what one job holds or waits for.
    pub async fn release_job_locks(
        &self,
        request_id: &str,
        job_id: &str,
        fence: Option<&Fence>,
    ) -> Result<(), Error> {
        if job_id.is_empty() {
            return Err(Error::BadRequest(
                "no job id; expected the id of the job whose locks to release".to_owned(),
            ));
        }
        self.store
            .release_job_locks(fence, request_id, job_id)
            .await?;
        tracing::debug!(request_id, job_id, "job's locks released");
        Ok(())
    }
}

/// The claims a Job Runner asks for, checked: what the grapher makes, nothing else.
fn job_claims(take: &TakeJobLocks) -> Result<Vec<LockClaim>, Error> {
    let bad = |message: String| Err(Error::BadRequest(message));
    if take.job_id.is_empty() {
        return bad("no jobId; expected the id of the job that takes the locks".to_owned());
    }
    if take.locks.is_empty() || take.locks.len() > MAX_JOB_LOCKS {
        return bad(format!(
            "{} locks asked for by job {}; expected 1 to {MAX_JOB_LOCKS}",
            take.locks.len(),
            take.job_id
        ));
    }
    let mut claims = Vec::with_capacity(take.locks.len());
    for lock in &take.locks {
        if lock.name.trim().is_empty() || lock.limit < 1 {
            return bad(format!(
                "lock {:?} of job {} with limit {}; expected a name and a limit of at least 1",
                lock.name, take.job_id, lock.limit
            ));
        }
        if lock.key.chars().count() > locks::LOCK_KEY_MAX {
            return bad(format!(
                "lock {:?} of job {} has a key of {} characters; expected at most {}",
                lock.name,
                take.job_id,
                lock.key.chars().count(),
                locks::LOCK_KEY_MAX
            ));
        }
        claims.push(LockClaim {
            name: lock.name.clone(),
            key: lock.key.clone(),
            limit: lock.limit,
            fair_key: String::new(),
        });
    }
    Ok(claims)
}
