//! Locks (issue #34): what a request's type declares it holds while it runs, taken in
//! the store before its chain is handed to a Job Runner (all or none, in queue order),
//! released by the store when the request ends; a request whose lock is taken waits
//! PENDING with the reason, is failed (`skip`), or has the holders stopped
//! (`cancel-in-progress`), and is offered again when a lock is released.

use super::*;
use serde_json::Value;
use spec::WhenTaken;
use store::{LockClaim, LockTake, LockWait};

pub use spec::LOCK_KEY_MAX;
/// The characters of a fairness key (a caller's name, a team) a lock's queue tells apart.
pub const FAIR_KEY_MAX: usize = 64;

/// A lock a request claims, with how its type declared it.
#[derive(Debug, Clone)]
pub(super) struct Claim {
    pub(super) claim: LockClaim,
    pub(super) when_taken: WhenTaken,
}

impl Claim {
    /// `cluster-ops[db-7]`, or the bare name without a key: as `spindle locks` and the
    /// web UI name it.
    pub(super) fn label(&self) -> String {
        proto::lock_label(&self.claim.name, &self.claim.key)
    }
}

/// Whether a hand-over takes the request's locks first.
#[derive(Debug, Clone, Copy)]
pub(super) enum LockStep {
    /// Takes them (at the creator's priority, else its type's).
    Take(Option<i32>),
    /// Its create's transaction took them already.
    Held,
}

/// What taking a request's locks came to.
pub(super) enum Locked {
    /// Every lock is held (or it declares none): hand it over.
    Held,
    /// It waits PENDING (its reason stored), or was failed (`skip`).
    NotYet,
    /// It is no longer PENDING (started or ended meanwhile).
    Moved,
}

impl Manager {
    /// Whether the specs loaded now declare any lock.
    pub(super) fn locks_declared(&self) -> bool {
        self.read_loaded().locks
    }

    /// The locks a request of `request_type` with `args` claims by the specs loaded now;
    /// a key arg whose value cannot name a lock is bad input.
    pub(super) fn lock_claims(
        &self,
        request_type: &str,
        args: &[RequestArg],
        user: &str,
    ) -> Result<Vec<Claim>, Error> {
        let loaded = self.loaded();
        let Some(sequence) = loaded.grapher.specs().get(request_type) else {
            return Ok(Vec::new());
        };
        let mut claims = Vec::new();
        for lock in &sequence.locks {
            let Some(name) = &lock.name else { continue };
            let key = match &lock.key {
                None => String::new(),
                Some(key_arg) => {
                    let value = args.iter().find(|arg| arg.name == key_arg.value);
                    spec::lock_key(&name.value, &key_arg.value, value.map(|arg| &arg.value))
                        .map_err(|err| Error::BadRequest(err.to_string()))?
                }
            };
            // Round robin over the caller, or over an arg's values (a team).
            let fair_key: String = match lock.fair_by.as_ref().map(|f| f.value.as_str()) {
                None => String::new(),
                Some("user") => user.to_owned(),
                Some(arg_name) => match args.iter().find(|arg| arg.name == arg_name) {
                    Some(RequestArg {
                        value: Value::String(text),
                        ..
                    }) => text.clone(),
                    Some(arg) => arg.value.to_string(),
                    None => String::new(),
                },
            };
            claims.push(Claim {
                claim: LockClaim {
                    name: name.value.clone(),
                    key,
                    limit: lock.limit(),
                    // What the databases index: the first characters of a long one.
                    fair_key: fair_key.chars().take(FAIR_KEY_MAX).collect(),
                },
                when_taken: lock.when_taken(),
            });
        }
        Ok(claims)
    }

    /// Takes a PENDING request's locks before its hand-over (`request` as stored; its
    /// args are read when it lacks them and its type has locks). `priority` is its
    /// creator's (else its type's `priority:`, else 0); it counts when the request first
    /// joins its locks' queues, and then keeps its place.
    pub(super) async fn take_locks(
        &self,
        request: &Request,
        priority: Option<i32>,
    ) -> Result<Locked, Error> {
        if !self.locks_declared() {
            return Ok(Locked::Held);
        }
        let mut claims = self.lock_claims(&request.request_type, &request.args, &request.user)?;
        if claims.is_empty() {
            return Ok(Locked::Held);
        }
        if request.args.is_empty() {
            let stored = self.store.get_request(&request.id, false).await?;
            claims = self.lock_claims(&stored.request_type, &stored.args, &stored.user)?;
        }
        let wanted: Vec<LockClaim> = claims.iter().map(|c| c.claim.clone()).collect();
        let priority = priority.unwrap_or_else(|| self.type_priority(&request.request_type));
        let taken = match self
            .store
            .take_locks(&request.id, &wanted, priority, Utc::now())
            .await
        {
            Ok(taken) => taken,
            Err(store::Error::State { .. }) => return Ok(Locked::Moved),
            Err(err) => return Err(err.into()),
        };
        self.locks_taken(request, &claims, taken).await
    }

    /// What follows taking a request's locks (`taken`, the store's answer): metrics and
    /// its waiting reason cleared when it holds them; its type's `when_taken` when not.
    pub(super) async fn locks_taken(
        &self,
        request: &Request,
        claims: &[Claim],
        taken: LockTake,
    ) -> Result<Locked, Error> {
        let wait = match taken {
            LockTake::Granted => {
                if let Some(metrics) = &self.options.telemetry.metrics {
                    let waited = (Utc::now() - request.created_at)
                        .to_std()
                        .unwrap_or_default();
                    for claim in claims {
                        metrics.lock_taken(&claim.claim.name, waited);
                    }
                }
                if request.error.starts_with("waiting for lock") {
                    self.store.set_waiting(&request.id, "").await?;
                }
                tracing::debug!(request_id = %request.id, "locks taken");
                return Ok(Locked::Held);
            }
            LockTake::Waiting(wait) => wait,
        };
        let Some(claim) = claims
            .iter()
            .find(|c| c.claim.name == wait.name && c.claim.key == wait.key)
        else {
            return Ok(Locked::NotYet);
        };
        let why = waiting_reason(claim, &wait);
        match claim.when_taken {
            WhenTaken::Queue => {
                self.store.set_waiting(&request.id, &why).await?;
            }
            WhenTaken::Skip => {
                let why = format!(
                    "lock {} is taken ({}); its type says `when_taken: skip`",
                    claim.label(),
                    holders_text(&wait)
                );
                if request.state == State::Suspended {
                    // A retried one, its chain claimed by this manager to resume.
                    let host = &self.options.host;
                    self.store
                        .fail_suspended(&RequestId::new(request.id.clone()), host, &why, Utc::now())
                        .await?;
                } else {
                    self.store.set_waiting(&request.id, &why).await?;
                    self.store.fail_pending(&request.id, Utc::now()).await?;
                }
                tracing::info!(request_id = %request.id, reason = why, "request failed: its lock is taken");
                self.ended(&request.id).await;
            }
            WhenTaken::CancelInProgress => {
                self.store
                    .set_waiting(
                        &request.id,
                        &format!("{why}; stopping the holders (`when_taken: cancel-in-progress`)"),
                    )
                    .await?;
                for holder in &wait.holders {
                    let holder_id = RequestId::new(holder.request_id.clone());
                    tracing::info!(request_id = %request.id, holder = %holder_id, lock = claim.label(), "stopping the holder of a lock (cancel-in-progress)");
                    if let Err(err) = self.stop(&holder_id).await {
                        tracing::warn!(request_id = %request.id, holder = %holder_id, error = %err, "stopping the holder of a lock failed");
                    }
                }
            }
        }
        Ok(Locked::NotYet)
    }

    /// A request type's `priority:` (0 when it has none).
    pub(super) fn type_priority(&self, request_type: &str) -> i32 {
        self.read_loaded()
            .grapher
            .specs()
            .get(request_type)
            .and_then(|sequence| sequence.priority.as_ref())
            .map_or(0, |priority| priority.value)
    }

    /// Offers the requests waiting for locks (first served first) to a Job Runner
    /// again: one of them may take a lock released since.
    pub async fn offer_lock_waiters(&self) {
        let waiters = match self.store.lock_waiters(100).await {
            Ok(waiters) => waiters,
            Err(err) => {
                tracing::warn!(error = %err, "reading the requests waiting for locks failed");
                return;
            }
        };
        let mut suspended = false;
        for request_id in waiters {
            let request = match self.store.get_request(&request_id, false).await {
                Ok(request) if request.state == State::Pending => request,
                // A retried request resumes its chain: through the suspended chains.
                Ok(request) if request.state == State::Suspended => {
                    suspended = true;
                    continue;
                }
                _ => continue,
            };
            let Ok(job_chain) = self.store.job_chain(&request_id).await else {
                continue;
            };
            let id = RequestId::new(request_id);
            if let Err(err) = self
                .send_to_jr(&id, &request, job_chain.into(), false, LockStep::Take(None))
                .await
            {
                tracing::warn!(request_id = %id, error = %err, "offering a request waiting for a lock failed");
            }
        }
        if suspended {
            self.resume_suspended().await;
        }
    }

    /// Every lock held or waited for, with its holders and its queue.
    pub async fn locks(&self) -> Result<Vec<proto::LockStatus>, Error> {
        let mut locks: Vec<proto::LockStatus> = Vec::new();
        for (claim, holder) in self.store.lock_claims().await? {
            let claimant = proto::LockClaimant {
                request_id: holder.request_id,
                job_id: holder.job_id,
                request_type: holder.request_type,
                user: holder.user,
                priority: holder.priority,
                queued_at: holder.queued_at,
                held_since: holder.held_since,
            };
            let same = locks
                .last()
                .is_some_and(|last| last.name == claim.name && last.key == claim.key);
            if !same {
                locks.push(proto::LockStatus {
                    name: claim.name,
                    key: claim.key,
                    limit: claim.limit,
                    holders: Vec::new(),
                    waiters: Vec::new(),
                });
            }
            let lock = locks.last_mut().expect("pushed above");
            if claimant.held_since.is_some() {
                lock.holders.push(claimant);
            } else {
                lock.waiters.push(claimant);
            }
        }
        Ok(locks)
    }
}

/// `request dc7… of ann since 2026-12-04 05:00:01 UTC` (`job x1Yz of request …` for a
/// job's claim; and how many more), or `no holder` when the claims ahead take it first.
pub(super) fn holders_text(wait: &LockWait) -> String {
    match wait.holders.first() {
        None => "no holder yet".to_owned(),
        Some(first) => {
            let more = match wait.holders.len() {
                1 => String::new(),
                n => format!(" and {} more", n - 1),
            };
            let since = first
                .held_since
                .map(|t| t.format(" since %Y-%m-%d %H:%M:%S UTC").to_string())
                .unwrap_or_default();
            let job = if first.job_id.is_empty() {
                String::new()
            } else {
                format!("job {} of ", first.job_id)
            };
            format!(
                "held by {job}request {} of {}{since}{more}",
                first.request_id, first.user
            )
        }
    }
}

/// Why a request waits: `waiting for lock cluster-ops[db-7], held by request …
/// of ann since …, 3 ahead in the queue`.
fn waiting_reason(claim: &Claim, wait: &LockWait) -> String {
    format!(
        "waiting for lock {}, {}, {} ahead in the queue",
        claim.label(),
        holders_text(wait),
        wait.ahead
    )
}
