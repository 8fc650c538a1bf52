//! The `suspended_job_chains` table: suspending a chain, claiming it to resume (one Request
//! Manager of several), and its expiry.

use super::*;

/// What one resume of a group commit did ([`SqlStore::resumes_in`]).
pub(super) enum Resumed {
    /// Resumed; whether the request is paused.
    Now(bool),
    /// Its chain was not claimed by that host: nothing done.
    NotClaimed,
    /// Its chain deleted, the request no longer SUSPENDED.
    Moved,
}

/// The claim's choice: the oldest unclaimed suspended chain, ties by request id, one
/// seek in `suspended_unclaimed` (migration 0103; on MariaDB `suspended_by_claim`, 0101; tests read the plans).
pub(crate) const CLAIM: &str = "SELECT request_id, suspended_job_chain FROM suspended_job_chains \
     WHERE rm_host IS NULL ORDER BY suspended_at, request_id LIMIT $1";

/// Stores `suspended_json` as the unclaimed suspended chain of `request_id`, with the
/// request's epoch as it is now in the caller's transaction (a hand-over at a later one
/// went out unrecorded: `hand_over` then checks the tries).
pub(super) fn insert_suspended<'q>(
    request_id: &'q str,
    suspended_json: String,
    at: DateTime<Utc>,
) -> Statement<'q> {
    Statement::new(
        "INSERT INTO suspended_job_chains (request_id, suspended_job_chain, rm_host, updated_at, suspended_at, epoch) \
         VALUES ($1, $2, NULL, $3, $3, (SELECT epoch FROM requests WHERE request_id = $1))",
    )
    .bind(request_id)
    .bind(suspended_json)
    .bind(micros(at))
}

impl<DB: Backend> SqlStore<DB> {
    /// Deletes the suspended chain of `request_id` that `host` claimed (the first step of
    /// resuming it or failing it).
    pub(super) async fn delete_claimed(
        tx: &mut sqlx::Transaction<'_, DB>,
        request_id: &str,
        host: &str,
    ) -> Result<(), Error> {
        let deleted = Statement::new(
            "DELETE FROM suspended_job_chains WHERE request_id = $1 AND rm_host = $2",
        )
        .bind(request_id)
        .bind(host)
        .execute(&mut *tx)
        .await?;
        if DB::rows_affected(&deleted) == 0 {
            return Err(Error::Conflict(format!(
                "the suspended job chain of request {request_id} is not claimed by {host}"
            )));
        }
        Ok(())
    }

    pub(crate) async fn suspend_request(
        &self,
        suspended: &SuspendedJobChain,
        fence: Option<&Fence>,
        at: DateTime<Utc>,
    ) -> Result<(), Error> {
        let request_id = suspended.request_id.as_str();
        let suspended_json = to_json("suspended job chain", suspended)?;
        let mut tx = self.pool.begin().await?;
        let inserted = insert_suspended(request_id, suspended_json, at)
            .execute(&mut tx)
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
        let updated = Statement::new(
            "UPDATE requests SET state = $2, jr_url = NULL, jr_instance = NULL WHERE request_id = $1 AND state = $3 \
             AND ($4 < 0 OR (epoch = $4 AND (jr_instance IS NULL OR jr_instance = $5)))",
        )
        .bind(request_id)
        .bind(state_value(State::Suspended))
        .bind(state_value(State::Running))
        .bind(epoch_value(fence))
        .bind(instance_value(fence))
        .execute(&mut tx)
        .await?;
        if DB::rows_affected(&updated) == 0 {
            drop(tx);
            return Err(self.refusal(request_id, fence, State::Running).await);
        }
        tx.commit().await?;
        Ok(())
    }

    /// The suspends of a group commit, in its transaction: the requests' rows locked and
    /// their owners read in one statement, their stored chains in another; each chain
    /// stored and its request made SUSPENDED only if its owner accepts the fence, else
    /// refused as [`Self::suspend_request`] refuses it alone (judged in the
    /// transaction, before any of the batch's suspends changed the owner).
    pub(super) async fn suspends_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        suspends: &[crate::SuspendRecord],
    ) -> Result<Vec<Result<(), Error>>, Error> {
        let mut ids: Vec<&str> = suspends
            .iter()
            .map(|s| s.suspended.request_id.as_str())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let owners = Self::owners_in(tx, &ids, DB::LOCK_ROWS).await?;
        let mut stored: std::collections::HashSet<String> = std::collections::HashSet::new();
        for chunk in ids.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let select = Self::requests_in(
                "SELECT request_id FROM suspended_job_chains",
                chunk.iter().copied(),
                "",
            );
            for row in select.fetch_all(&mut *tx).await? {
                stored.insert(row.read("request_id")?);
            }
        }
        let mut done = Vec::with_capacity(suspends.len());
        for suspend in suspends {
            let request_id = suspend.suspended.request_id.as_str();
            let Some(owner) = owners.get(request_id) else {
                done.push(Err(Error::not_found("request", request_id)));
                continue;
            };
            // A runner that no longer owns the request hears that first.
            if let Some(fence) = suspend.fence.as_ref().filter(|f| !owner.accepts(f)) {
                done.push(Err(owner.refusal(request_id, fence)));
                continue;
            }
            if stored.contains(request_id) {
                done.push(Err(Error::Conflict(format!(
                    "request {request_id} already has a suspended job chain"
                ))));
                continue;
            }
            if owner.state != State::Running {
                done.push(Err(Error::State {
                    request_id: request_id.to_owned(),
                    actual: owner.state,
                    expected: State::Running,
                }));
                continue;
            }
            let suspended_json = to_json("suspended job chain", &suspend.suspended)?;
            insert_suspended(request_id, suspended_json, suspend.at)
                .execute(&mut *tx)
                .await?;
            Statement::new(
                "UPDATE requests SET state = $2, jr_url = NULL, jr_instance = NULL WHERE request_id = $1",
            )
            .bind(request_id)
            .bind(state_value(State::Suspended))
            .execute(&mut *tx)
            .await?;
            stored.insert(request_id.to_owned());
            done.push(Ok(()));
        }
        Ok(done)
    }

    pub(crate) async fn claim_suspended(
        &self,
        host: &str,
        at: DateTime<Utc>,
    ) -> Result<Option<SuspendedJobChain>, Error> {
        Ok(self.claim_suspended_many(host, at, 1).await?.pop())
    }

    pub(crate) async fn claim_suspended_many(
        &self,
        host: &str,
        at: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<SuspendedJobChain>, Error> {
        // The oldest unclaimed chains, locked (those another Request Manager is claiming
        // at the same moment are skipped, not waited for), then marked as ours.
        let mut tx = self.pool.begin().await?;
        let rows = Statement::build(format!("{CLAIM}{}", DB::LOCK_ROWS_SKIP_LOCKED))
            .bind(i64::from(limit.max(1)))
            .fetch_all(&mut tx)
            .await?;
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let mut claimed = Vec::with_capacity(rows.len());
        for chunk in rows.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let ids: Vec<String> = chunk
                .iter()
                .map(|row| row.read("request_id"))
                .collect::<Result<_, _>>()?;
            let mut update = Statement::build("UPDATE suspended_job_chains SET rm_host = ");
            update
                .push_param(host)
                .push(", updated_at = ")
                .push_param(micros(at))
                .push(" WHERE rm_host IS NULL AND request_id IN (")
                .push_list(ids.iter().map(String::as_str))
                .push(")");
            update.execute(&mut tx).await?;
            for row in chunk {
                let text: String = row.read("suspended_job_chain")?;
                claimed.push(from_json("stored suspended job chain", &text)?);
            }
        }
        tx.commit().await?;
        Ok(claimed)
    }

    pub(crate) async fn resumed(
        &self,
        request_id: &RequestId,
        host: &str,
        jr_url: &str,
        owner: Option<&Fence>,
    ) -> Result<bool, Error> {
        let request_id = request_id.as_str();
        let mut tx = self.pool.begin().await?;
        Self::delete_claimed(&mut tx, request_id, host).await?;
        let updated = Self::resumed_in(&mut tx, request_id, jr_url, owner).await?;
        tx.commit().await?;
        match updated {
            Some(paused) => Ok(paused),
            None => Err(self.state_error(request_id, State::Suspended).await),
        }
    }

    /// SUSPENDED → RUNNING on `jr_url` (its claimed chain deleted already): whether it
    /// is paused, or `None` if it is no longer SUSPENDED.
    pub(super) async fn resumed_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        request_id: &str,
        jr_url: &str,
        owner: Option<&Fence>,
    ) -> Result<Option<bool>, Error> {
        let update = Statement::new(
            "UPDATE requests SET state = $3, jr_url = $2, jr_instance = NULLIF($5, ''), error = '' \
             WHERE request_id = $1 AND state = $4 AND ($6 < 0 OR epoch = $6)",
        )
        .bind(request_id)
        .bind(jr_url)
        .bind(state_value(State::Running))
        .bind(state_value(State::Suspended))
        .bind(instance_value(owner))
        .bind(epoch_value(owner));
        match Self::update_request_in(tx, update, "paused", request_id).await? {
            Some(row) => Ok(Some(row.read::<i32>("paused")? != 0)),
            None => Ok(None),
        }
    }

    /// The resumes of a group commit, in its transaction: each as
    /// [`SqlStore::resumed`], a chain not claimed by its host left as it is.
    pub(super) async fn resumes_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        resumes: &[crate::ResumeRecord],
    ) -> Result<Vec<Resumed>, Error> {
        let mut done = Vec::with_capacity(resumes.len());
        for resume in resumes {
            let deleted = Statement::new(
                "DELETE FROM suspended_job_chains WHERE request_id = $1 AND rm_host = $2",
            )
            .bind(resume.request_id.as_str())
            .bind(resume.host.as_str())
            .execute(&mut *tx)
            .await?;
            if DB::rows_affected(&deleted) == 0 {
                done.push(Resumed::NotClaimed);
                continue;
            }
            done.push(
                match Self::resumed_in(
                    tx,
                    &resume.request_id,
                    &resume.jr_url,
                    resume.owner.as_ref(),
                )
                .await?
                {
                    Some(paused) => Resumed::Now(paused),
                    None => Resumed::Moved,
                },
            );
        }
        Ok(done)
    }

    pub(crate) async fn fail_suspended(
        &self,
        request_id: &RequestId,
        host: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), Error> {
        let request_id = request_id.as_str();
        let mut tx = self.pool.begin().await?;
        Self::delete_claimed(&mut tx, request_id, host).await?;
        Statement::new(
            "UPDATE requests SET state = $3, \
             finished_at = CASE WHEN $2 < started_at THEN started_at ELSE $2 END, \
             jr_url = NULL, error = $5 WHERE request_id = $1 AND state = $4",
        )
        .bind(request_id)
        .bind(micros(at))
        .bind(state_value(State::Fail))
        .bind(state_value(State::Suspended))
        .bind(reason)
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    pub(crate) async fn unclaim(&self, request_id: &RequestId, host: &str) -> Result<(), Error> {
        let request_id = request_id.as_str();
        Statement::new(
            "UPDATE suspended_job_chains SET rm_host = NULL, updated_at = $3 WHERE request_id = $1 AND rm_host = $2",
        )
        .bind(request_id)
        .bind(host)
        .bind(micros(Utc::now()))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub(crate) async fn release_stale_claims(&self, before: DateTime<Utc>) -> Result<u64, Error> {
        let done = Statement::new(
            "UPDATE suspended_job_chains SET rm_host = NULL, updated_at = $2 WHERE rm_host IS NOT NULL AND updated_at < $1",
        )
        .bind(micros(before))
        .bind(micros(Utc::now()))
        .execute(&self.pool)
        .await?;
        Ok(DB::rows_affected(&done))
    }

    pub(crate) async fn expire_suspended(
        &self,
        before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<String>, Error> {
        let rows = Statement::new(
            "SELECT request_id FROM suspended_job_chains WHERE rm_host IS NULL AND suspended_at < $1 \
             AND NOT EXISTS (SELECT 1 FROM requests r \
             WHERE r.request_id = suspended_job_chains.request_id AND r.error <> '')",
        )
        .bind(micros(before))
        .fetch_all(&self.pool)
        .await?;
        let mut expired = Vec::new();
        for row in rows {
            let request_id: String = row.read("request_id")?;
            let mut tx = self.pool.begin().await?;
            // Deleting only an unclaimed chain is the claim: a resumer that got it first
            // wins.
            let deleted = Statement::new(
                "DELETE FROM suspended_job_chains WHERE request_id = $1 AND rm_host IS NULL",
            )
            .bind(request_id.as_str())
            .execute(&mut tx)
            .await?;
            if DB::rows_affected(&deleted) == 0 {
                continue;
            }
            Statement::new(
                "UPDATE requests SET state = $3, \
                 finished_at = CASE WHEN $2 < started_at THEN started_at ELSE $2 END, \
                 jr_url = NULL, error = $5 WHERE request_id = $1 AND state = $4",
            )
            .bind(request_id.as_str())
            .bind(micros(now))
            .bind(state_value(State::Fail))
            .bind(state_value(State::Suspended))
            .bind("its suspended chain was not resumed before it expired")
            .execute(&mut tx)
            .await?;
            tx.commit().await?;
            expired.push(request_id);
        }
        Ok(expired)
    }
}
