//! The `request_locks` and `lock_keys` tables (issue #34): a request's claims on the
//! locks its type declares, taken together in one transaction or queued, and released by
//! the UPDATE that ends the request (the migrations' trigger).

use super::*;
use crate::LockWait;

sql_impl! {
    // Long because it is one transaction's steps in order: the request locked and
    // checked, each lock's row locked, the claims recorded, each lock's holders and the
    // claims ahead counted, and all the claims granted or none.
    pub(super) async fn take_locks(
        &self,
        request_id: &str,
        claims: &[LockClaim],
        priority: i32,
        now: DateTime<Utc>,
    ) -> Result<LockTake, Error> {
        if claims.is_empty() {
            return Ok(LockTake::Granted);
        }
        let mut claims: Vec<&LockClaim> = claims.iter().collect();
        // One order for every transaction: no two wait on each other's locks.
        claims.sort_by(|a, b| (&a.name, &a.key).cmp(&(&b.name, &b.key)));
        claims.dedup_by(|a, b| a.name == b.name && a.key == b.key);
        let mut tx = self.pool.begin().await?;
        let sql = format!("SELECT state, created_at FROM requests WHERE request_id = $1{}", DB::LOCK_ROWS);
        let request = Statement::build(sql)
            .bind(request_id)
            .query::<DB>()
            .fetch_optional(&mut *tx)
            .await?
            .ok_or_else(|| Error::not_found("request", request_id))?;
        let state = state_of(request.try_get("state")?)?;
        if state != State::Pending {
            return Err(Error::State {
                request_id: request_id.to_owned(),
                actual: state,
                expected: State::Pending,
            });
        }
        let queued_at: i64 = request.try_get("created_at")?;
        let lock_row = format!("SELECT name FROM lock_keys WHERE name = $1 AND lock_key = $2{}", DB::LOCK_ROWS);
        for claim in &claims {
            Statement::new("INSERT INTO lock_keys (name, lock_key) VALUES ($1, $2)")
                .bind(claim.name.as_str())
                .bind(claim.key.as_str())
                .skip_duplicates("name, lock_key")
                .query::<DB>()
                .execute(&mut *tx)
                .await?;
            Statement::build(lock_row.as_str())
                .bind(claim.name.as_str())
                .bind(claim.key.as_str())
                .query::<DB>()
                .fetch_one(&mut *tx)
                .await?;
            Statement::new(
                "INSERT INTO request_locks (request_id, name, lock_key, lock_limit, priority, queued_at) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(request_id)
            .bind(claim.name.as_str())
            .bind(claim.key.as_str())
            .bind(i32::try_from(claim.limit).unwrap_or(i32::MAX))
            .bind(priority)
            .bind(queued_at)
            .skip_duplicates("request_id, name, lock_key")
            .query::<DB>()
            .execute(&mut *tx)
            .await?;
        }
        for claim in &claims {
            let mine = Statement::new(
                "SELECT priority, queued_at, held_since FROM request_locks \
                 WHERE request_id = $1 AND name = $2 AND lock_key = $3",
            )
            .bind(request_id)
            .bind(claim.name.as_str())
            .bind(claim.key.as_str())
            .query::<DB>()
            .fetch_one(&mut *tx)
            .await?;
            if mine.try_get::<Option<i64>, _>("held_since")?.is_some() {
                continue;
            }
            let (mine_priority, mine_queued): (i32, i64) = (mine.try_get("priority")?, mine.try_get("queued_at")?);
            let held: i64 = Statement::new(
                "SELECT COUNT(*) AS n FROM request_locks \
                 WHERE name = $1 AND lock_key = $2 AND held_since IS NOT NULL",
            )
            .bind(claim.name.as_str())
            .bind(claim.key.as_str())
            .query::<DB>()
            .fetch_one(&mut *tx)
            .await?
            .try_get("n")?;
            // Waiting claims served before this one: a higher priority, or the same one
            // and queued first (the request id breaks a tie).
            let ahead: i64 = Statement::new(
                "SELECT COUNT(*) AS n FROM request_locks \
                 WHERE name = $1 AND lock_key = $2 AND held_since IS NULL AND request_id <> $3 \
                 AND (priority > $4 OR (priority = $4 AND (queued_at < $5 OR (queued_at = $5 AND request_id < $3))))",
            )
            .bind(claim.name.as_str())
            .bind(claim.key.as_str())
            .bind(request_id)
            .bind(mine_priority)
            .bind(mine_queued)
            .query::<DB>()
            .fetch_one(&mut *tx)
            .await?
            .try_get("n")?;
            if held + ahead >= i64::from(claim.limit) {
                let holders = Self::holders_in(&mut tx, &claim.name, &claim.key).await?;
                tx.commit().await?;
                return Ok(LockTake::Waiting(LockWait {
                    name: claim.name.clone(),
                    key: claim.key.clone(),
                    limit: claim.limit,
                    holders,
                    ahead: u32::try_from(ahead).unwrap_or(u32::MAX),
                }));
            }
        }
        Statement::new("UPDATE request_locks SET held_since = $2 WHERE request_id = $1 AND held_since IS NULL")
            .bind(request_id)
            .bind(micros(now))
            .query::<DB>()
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(LockTake::Granted)
    }

    /// The requests that hold a lock, first taken first.
    async fn holders_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        name: &str,
        key: &str,
    ) -> Result<Vec<LockHolder>, Error> {
        let rows = Statement::new(
            "SELECT l.request_id, r.type, r.user_name, l.priority, l.queued_at, l.held_since \
             FROM request_locks l JOIN requests r ON r.request_id = l.request_id \
             WHERE l.name = $1 AND l.lock_key = $2 AND l.held_since IS NOT NULL \
             ORDER BY l.held_since, l.request_id",
        )
        .bind(name)
        .bind(key)
        .query::<DB>()
        .fetch_all(&mut **tx)
        .await?;
        rows.iter().map(Self::holder_of).collect()
    }

    /// Every claim of every lock, held or waiting, by lock and then in queue order (the
    /// holders first).
    pub(super) async fn lock_claims(&self) -> Result<Vec<(LockClaim, LockHolder)>, Error> {
        let rows = Statement::new(
            "SELECT l.name, l.lock_key, l.lock_limit, l.request_id, r.type, r.user_name, l.priority, l.queued_at, l.held_since \
             FROM request_locks l JOIN requests r ON r.request_id = l.request_id \
             ORDER BY l.name, l.lock_key, CASE WHEN l.held_since IS NULL THEN 1 ELSE 0 END, \
             l.priority DESC, l.queued_at, l.request_id",
        )
        .query::<DB>()
        .fetch_all(&self.readers)
        .await?;
        rows.iter()
            .map(|row| {
                let claim = LockClaim {
                    name: row.try_get("name")?,
                    key: row.try_get("lock_key")?,
                    limit: u32::try_from(row.try_get::<i32, _>("lock_limit")?).unwrap_or(1),
                };
                Ok((claim, Self::holder_of(row)?))
            })
            .collect()
    }

    /// The PENDING requests with a claim waiting, first queued first: what to offer a
    /// Job Runner again when a lock is released.
    pub(super) async fn lock_waiters(&self, limit: u32) -> Result<Vec<String>, Error> {
        let rows = Statement::new(
            "SELECT request_id, MAX(priority) AS priority, MIN(queued_at) AS queued_at FROM request_locks \
             WHERE held_since IS NULL GROUP BY request_id \
             ORDER BY MAX(priority) DESC, MIN(queued_at), request_id LIMIT $1",
        )
        .bind(i64::from(limit))
        .query::<DB>()
        .fetch_all(&self.readers)
        .await?;
        rows.iter()
            .map(|row| Ok(row.try_get("request_id")?))
            .collect()
    }

    fn holder_of(row: &DB::Row) -> Result<LockHolder, Error> {
        Ok(LockHolder {
            request_id: row.try_get("request_id")?,
            request_type: row.try_get("type")?,
            user: row.try_get("user_name")?,
            priority: row.try_get("priority")?,
            queued_at: from_micros(row.try_get("queued_at")?),
            held_since: row.try_get::<Option<i64>, _>("held_since")?.map(from_micros),
        })
    }
}
