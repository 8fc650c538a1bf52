//! The `request_locks` and `lock_keys` tables (issue #34): a request's claims on the
//! locks its type declares, and a job's on its node's locks and its job pools, taken
//! together in one transaction or queued; a request's are released by the UPDATE that
//! ends it (the migrations' trigger), a job's at its end or with its request's.

use super::*;
use crate::LockWait;

impl<DB: Backend> SqlStore<DB> {
    // Long because it is one transaction's steps in order: the request locked and
    // checked, each lock's row locked, the claims recorded, each lock's holders and the
    // claims ahead counted, and all the claims granted or none.
    pub(crate) async fn take_locks(
        &self,
        request_id: &str,
        claims: &[LockClaim],
        priority: i32,
        now: DateTime<Utc>,
    ) -> Result<LockTake, Error> {
        if claims.is_empty() {
            return Ok(LockTake::Granted);
        }
        let mut tx = self.pool.begin().await?;
        let taken =
            Self::take_locks_in(&mut tx, request_id, "", claims, priority, now, None).await?;
        tx.commit().await?;
        Ok(taken)
    }

    pub(crate) async fn take_job_locks(
        &self,
        fence: Option<&Fence>,
        request_id: &str,
        job_id: &str,
        claims: &[LockClaim],
        now: DateTime<Utc>,
    ) -> Result<LockTake, Error> {
        if claims.is_empty() {
            return Ok(LockTake::Granted);
        }
        let mut tx = self.pool.begin().await?;
        Self::running_owner(&mut tx, fence, request_id).await?;
        // A job's place in a queue: its first ask (first come, first served).
        let taken =
            Self::take_locks_in(&mut tx, request_id, job_id, claims, 0, now, Some(now)).await?;
        tx.commit().await?;
        Ok(taken)
    }

    pub(crate) async fn release_job_locks(
        &self,
        fence: Option<&Fence>,
        request_id: &str,
        job_id: &str,
    ) -> Result<(), Error> {
        let mut tx = self.pool.begin().await?;
        Self::running_owner(&mut tx, fence, request_id).await?;
        Statement::new("DELETE FROM request_locks WHERE request_id = $1 AND job_id = $2")
            .bind(request_id)
            .bind(job_id)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Checks in `tx`, its row locked, that a request RUNNING is owned by `fence`'s runner.
    /// PENDING too when the fence is the hand-over's: a Job Runner begins the chain (and
    /// its first job asks for its locks) before the Request Manager that handed it over
    /// has stored RUNNING.
    async fn running_owner(
        tx: &mut sqlx::Transaction<'_, DB>,
        fence: Option<&Fence>,
        request_id: &str,
    ) -> Result<(), Error> {
        let owners = Self::owners_in(tx, &[request_id], DB::LOCK_ROWS).await?;
        let owner = owners
            .get(request_id)
            .ok_or_else(|| Error::not_found("request", request_id))?;
        if let Some(fence) = fence
            && !owner.accepts(fence)
        {
            return Err(owner.refusal(request_id, fence));
        }
        let handed_over = fence.is_some() && owner.state == State::Pending;
        if owner.state != State::Running && !handed_over {
            return Err(Error::State {
                request_id: request_id.to_owned(),
                actual: owner.state,
                expected: State::Running,
            });
        }
        Ok(())
    }

    /// [`Locks::take_locks`](crate::Locks::take_locks) in `tx` (a create's own batch, so that a new request's
    /// locks are taken in the transaction that stores it).
    /// `job_id`: the job whose claims these are (empty: the request's own).
    /// `created`: the request's creation when `tx` has just stored it (PENDING), so that
    /// its row need not be read; for a job's claims, the time of its ask.
    // Long because all of a request's claims are judged and stored in one transaction,
    // all or none: the lock rows read in one order (no deadlock), each claim found held,
    // free or taken (a fair lock's turn, a queue's order), then every claim stored held
    // or queued to keep its place; splitting it would pass the half-judged state around.
    pub(super) async fn take_locks_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        request_id: &str,
        job_id: &str,
        claims: &[LockClaim],
        priority: i32,
        now: DateTime<Utc>,
        created: Option<DateTime<Utc>>,
    ) -> Result<LockTake, Error> {
        if claims.is_empty() {
            return Ok(LockTake::Granted);
        }
        let mut claims: Vec<&LockClaim> = claims.iter().collect();
        // One order for every transaction: no two wait on each other's locks.
        claims.sort_by(|a, b| (&a.name, &a.key).cmp(&(&b.name, &b.key)));
        claims.dedup_by(|a, b| a.name == b.name && a.key == b.key);
        let queued_at: i64 = match created {
            Some(created) => micros(created),
            None => Self::lockable_request(tx, request_id).await?,
        };
        let lock_row = format!(
            "SELECT name FROM lock_keys WHERE name = $1 AND lock_key = $2{}",
            DB::LOCK_ROWS
        );
        // Where one writer at a time is the rule (SQLite), there is no row to lock.
        if !DB::LOCK_ROWS.is_empty() {
            for claim in &claims {
                Self::lock_the_lock(tx, &lock_row, claim).await?;
            }
        }
        // Each claim judged against its lock's rows: held already, free for it, or taken.
        // `stored`: whether the request has a row for it (queued by an earlier offer).
        let mut stored = Vec::with_capacity(claims.len());
        let mut taken: Option<LockWait> = None;
        for claim in &claims {
            let rows = Statement::new(
                "SELECT request_id, job_id, priority, queued_at, fair_key, held_since FROM request_locks \
                 WHERE name = $1 AND lock_key = $2",
            )
            .bind(claim.name.as_str())
            .bind(claim.key.as_str())
            .fetch_all(&mut *tx)
            .await?;
            let mut held = 0u32;
            let mut holds_it = false;
            let mut queue: Vec<Queued> = Vec::new();
            let me = who(request_id, job_id);
            for row in &rows {
                let id = who(
                    &row.read::<String>("request_id")?,
                    &row.read::<String>("job_id")?,
                );
                if row.read::<Option<i64>>("held_since")?.is_some() {
                    holds_it |= id == me;
                    held += 1;
                } else {
                    queue.push(Queued {
                        who: id,
                        priority: row.read("priority")?,
                        queued_at: row.read("queued_at")?,
                        fair_key: row.read("fair_key")?,
                    });
                }
            }
            let queued = queue.iter().any(|q| q.who == me);
            stored.push(holds_it || queued);
            if holds_it || taken.is_some() {
                continue;
            }
            if !queued {
                queue.push(Queued {
                    who: me.clone(),
                    priority,
                    queued_at,
                    fair_key: claim.fair_key.clone(),
                });
            }
            // Alone in the queue, it is first; else the queue's order (a fair lock's
            // turns read only then).
            let ahead = if queue.len() <= 1 {
                0
            } else {
                let turns = Self::turns_in(tx, &claim.name, &claim.key).await?;
                ahead_of(queue, &turns, &me)
            };
            if held.saturating_add(ahead) >= claim.limit {
                let holders = Self::holders_in(tx, &claim.name, &claim.key).await?;
                taken = Some(LockWait {
                    name: claim.name.clone(),
                    key: claim.key.clone(),
                    limit: claim.limit,
                    holders,
                    ahead,
                });
            }
        }
        // All held, or none: a new claim is stored held, or queued to keep its place in
        // every queue.
        let held_since = if taken.is_none() {
            Some(micros(now))
        } else {
            None
        };
        for (claim, stored) in claims.iter().zip(&stored) {
            if *stored {
                continue;
            }
            Statement::new(
                "INSERT INTO request_locks (request_id, name, lock_key, lock_limit, priority, queued_at, fair_key, held_since, job_id) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            )
            .bind(request_id)
            .bind(claim.name.as_str())
            .bind(claim.key.as_str())
            .bind(i32::try_from(claim.limit).unwrap_or(i32::MAX))
            .bind(priority)
            .bind(queued_at)
            .bind(claim.fair_key.as_str())
            .bind(held_since)
            .bind(job_id)
            .execute(&mut *tx)
            .await?;
        }
        if let Some(wait) = taken {
            return Ok(LockTake::Waiting(wait));
        }
        // A fair lock's turn: when this request's fairness key took it.
        for claim in claims.iter().filter(|claim| !claim.fair_key.is_empty()) {
            Statement::new("INSERT INTO lock_turns (name, lock_key, fair_key, served_at) VALUES ($1, $2, $3, $4)")
                .bind(claim.name.as_str())
                .bind(claim.key.as_str())
                .bind(claim.fair_key.as_str())
                .bind(micros(now))
                .skip_duplicates("name, lock_key, fair_key")
                .execute(&mut *tx)
                .await?;
            Statement::new("UPDATE lock_turns SET served_at = $4 WHERE name = $1 AND lock_key = $2 AND fair_key = $3")
                .bind(claim.name.as_str())
                .bind(claim.key.as_str())
                .bind(claim.fair_key.as_str())
                .bind(micros(now))
                .execute(&mut *tx)
                .await?;
        }
        // The claims queued by an earlier offer, held from now.
        if stored.iter().any(|stored| *stored) {
            Statement::new("UPDATE request_locks SET held_since = $2 WHERE request_id = $1 AND job_id = $3 AND held_since IS NULL")
                .bind(request_id)
                .bind(micros(now))
                .bind(job_id)
                .execute(&mut *tx)
                .await?;
        }
        Ok(LockTake::Granted)
    }

    /// The request's creation (its place in the queues), its row locked; it must be
    /// PENDING (before its first hand-over) or SUSPENDED (retried: its locks were
    /// released at its end; recovered: it holds them still).
    async fn lockable_request(
        tx: &mut sqlx::Transaction<'_, DB>,
        request_id: &str,
    ) -> Result<i64, Error> {
        let sql = format!(
            "SELECT state, created_at FROM requests WHERE request_id = $1{}",
            DB::LOCK_ROWS
        );
        let request = Statement::build(sql)
            .bind(request_id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or_else(|| Error::not_found("request", request_id))?;
        let state = state_of(request.read("state")?)?;
        if !matches!(state, State::Pending | State::Suspended) {
            return Err(Error::State {
                request_id: request_id.to_owned(),
                actual: state,
                expected: State::Pending,
            });
        }
        Ok(request.read("created_at")?)
    }

    /// Locks a lock's `lock_keys` row (made if new) until `tx` ends: one taker at a time.
    async fn lock_the_lock(
        tx: &mut sqlx::Transaction<'_, DB>,
        lock_row: &str,
        claim: &LockClaim,
    ) -> Result<(), Error> {
        let select = || {
            Statement::build(lock_row)
                .bind(claim.name.as_str())
                .bind(claim.key.as_str())
        };
        if select().fetch_optional(&mut *tx).await?.is_some() {
            return Ok(());
        }
        Statement::new("INSERT INTO lock_keys (name, lock_key) VALUES ($1, $2)")
            .bind(claim.name.as_str())
            .bind(claim.key.as_str())
            .skip_duplicates("name, lock_key")
            .execute(&mut *tx)
            .await?;
        select().fetch_one(&mut *tx).await?;
        Ok(())
    }

    /// When each fairness key last took a lock.
    async fn turns_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        name: &str,
        key: &str,
    ) -> Result<HashMap<String, i64>, Error> {
        let rows = Statement::new(
            "SELECT fair_key, served_at FROM lock_turns WHERE name = $1 AND lock_key = $2",
        )
        .bind(name)
        .bind(key)
        .fetch_all(&mut *tx)
        .await?;
        rows.iter()
            .map(|row| Ok((row.read("fair_key")?, row.read("served_at")?)))
            .collect()
    }

    /// The requests that hold a lock, first taken first.
    async fn holders_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        name: &str,
        key: &str,
    ) -> Result<Vec<LockHolder>, Error> {
        let rows = Statement::new(
            "SELECT l.request_id, l.job_id, r.type, r.user_name, l.priority, l.queued_at, l.fair_key, l.held_since \
             FROM request_locks l JOIN requests r ON r.request_id = l.request_id \
             WHERE l.name = $1 AND l.lock_key = $2 AND l.held_since IS NOT NULL \
             ORDER BY l.held_since, l.request_id, l.job_id",
        )
        .bind(name)
        .bind(key)
        .fetch_all(&mut *tx)
        .await?;
        rows.iter().map(Self::holder_of).collect()
    }

    /// Every claim of every lock, held or waiting, by lock and then in queue order (the
    /// holders first).
    pub(crate) async fn lock_claims(&self) -> Result<Vec<(LockClaim, LockHolder)>, Error> {
        let rows = Statement::new(
            "SELECT l.name, l.lock_key, l.lock_limit, l.request_id, l.job_id, r.type, r.user_name, l.priority, l.queued_at, l.fair_key, l.held_since \
             FROM request_locks l JOIN requests r ON r.request_id = l.request_id \
             ORDER BY l.name, l.lock_key, CASE WHEN l.held_since IS NULL THEN 1 ELSE 0 END, \
             l.priority DESC, l.queued_at, l.request_id, l.job_id",
        )
        .fetch_all(&self.readers)
        .await?;
        let claims = rows
            .iter()
            .map(|row| {
                let claim = LockClaim {
                    name: row.read("name")?,
                    key: row.read("lock_key")?,
                    limit: u32::try_from(row.read::<i32>("lock_limit")?).unwrap_or(1),
                    fair_key: String::new(),
                };
                Ok((claim, Self::holder_of(row)?))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let turn_rows =
            Statement::new("SELECT name, lock_key, fair_key, served_at FROM lock_turns")
                .fetch_all(&self.readers)
                .await?;
        let mut turns: HashMap<(String, String), HashMap<String, i64>> = HashMap::new();
        for row in &turn_rows {
            turns
                .entry((row.read("name")?, row.read("lock_key")?))
                .or_default()
                .insert(row.read("fair_key")?, row.read("served_at")?);
        }
        Ok(in_served_order(claims, &turns))
    }

    /// Up to `limit` PENDING requests whose claims are at the head of a queue (within
    /// the lock's free places), first served first across locks: what to offer a Job
    /// Runner again when a lock may have been released.
    pub(crate) async fn lock_waiters(&self, limit: u32) -> Result<Vec<String>, Error> {
        // Nobody waits (the common case): one small read.
        // A job's claims are asked for again by its runner, not offered.
        let waiting = Statement::new(
            "SELECT request_id FROM request_locks WHERE held_since IS NULL AND job_id = '' LIMIT 1",
        )
        .fetch_optional(&self.readers)
        .await?;
        if waiting.is_none() {
            return Ok(Vec::new());
        }
        let claims = self.lock_claims().await?;
        let mut heads: Vec<(i32, DateTime<Utc>, String)> = Vec::new();
        let mut at = 0;
        while at < claims.len() {
            let (lock, _) = &claims[at];
            let end = claims[at..]
                .iter()
                .position(|(c, _)| c.name != lock.name || c.key != lock.key)
                .map_or(claims.len(), |n| at + n);
            let rows = &claims[at..end];
            let held = rows.iter().filter(|(_, h)| h.held_since.is_some()).count();
            let free = (lock.limit as usize).saturating_sub(held);
            let waiters = rows
                .iter()
                .filter(|(_, h)| h.held_since.is_none())
                .take(free);
            for (_, waiter) in waiters.filter(|(_, h)| h.job_id.is_empty()) {
                heads.push((waiter.priority, waiter.queued_at, waiter.request_id.clone()));
            }
            at = end;
        }
        heads.sort_by(|a, b| {
            (std::cmp::Reverse(a.0), a.1, &a.2).cmp(&(std::cmp::Reverse(b.0), b.1, &b.2))
        });
        let mut ids: Vec<String> = Vec::new();
        for (_, _, id) in heads {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        ids.truncate(limit as usize);
        Ok(ids)
    }

    fn holder_of(row: &DB::Row) -> Result<LockHolder, Error> {
        Ok(LockHolder {
            request_id: row.read("request_id")?,
            job_id: row.read("job_id")?,
            request_type: row.read("type")?,
            user: row.read("user_name")?,
            priority: row.read("priority")?,
            queued_at: from_micros(row.read("queued_at")?),
            fair_key: row.read("fair_key")?,
            held_since: row.read::<Option<i64>>("held_since")?.map(from_micros),
        })
    }
}

/// A waiting claim on one lock.
struct Queued {
    /// Whose: [`who`].
    who: String,
    priority: i32,
    queued_at: i64,
    fair_key: String,
}

/// The request ids of one lock's waiting claims in the order they are served: by
/// priority (higher first); within one, round robin over the fairness keys, the key
/// served longest ago (`turns`: when each last took the lock; never, first) going next
/// with its oldest waiter (one key for all when the lock is not fair: first created,
/// first served; the request id breaks a tie).
fn served_order<'a>(
    queue: impl IntoIterator<Item = (&'a str, i32, i64, &'a str)>,
    turns: &HashMap<String, i64>,
) -> Vec<&'a str> {
    use std::cmp::Reverse;
    use std::collections::{BTreeMap, VecDeque};
    // By priority (highest first), then by fairness key: its waiters, oldest first.
    // By fairness key: its waiters as (queued at, request id).
    type ByKey<'k> = BTreeMap<&'k str, Vec<(i64, &'k str)>>;
    let mut levels: BTreeMap<Reverse<i32>, ByKey<'a>> = BTreeMap::new();
    for (id, priority, queued_at, fair_key) in queue {
        levels
            .entry(Reverse(priority))
            .or_default()
            .entry(fair_key)
            .or_default()
            .push((queued_at, id));
    }
    // Turns given in this ordering come after every recorded one.
    let mut clock = turns.values().copied().max().unwrap_or(0);
    let mut last: HashMap<&str, Option<i64>> = HashMap::new();
    let mut order = Vec::new();
    for (_, keys) in levels {
        let mut keys: Vec<(&str, VecDeque<(i64, &str)>)> = keys
            .into_iter()
            .map(|(key, mut waiters)| {
                waiters.sort_unstable();
                (key, waiters.into())
            })
            .collect();
        loop {
            // The key served longest ago (never served first), then its oldest waiter.
            let next = keys
                .iter()
                .enumerate()
                .filter_map(|(n, (key, waiters))| {
                    let served = *last.entry(key).or_insert_with(|| turns.get(*key).copied());
                    waiters.front().map(|&front| (served, front, n))
                })
                .min();
            let Some((_, _, n)) = next else { break };
            let (key, waiters) = &mut keys[n];
            let (_, id) = waiters.pop_front().expect("it has a waiter");
            clock += 1;
            last.insert(key, Some(clock));
            order.push(id);
        }
    }
    order
}

/// Who claims: the request, or one of its jobs (an id with no space in it).
fn who(request_id: &str, job_id: &str) -> String {
    if job_id.is_empty() {
        request_id.to_owned()
    } else {
        format!("{request_id} {job_id}")
    }
}

/// How many waiting claims of one lock are served before `me`'s ([`who`]).
fn ahead_of(queue: Vec<Queued>, turns: &HashMap<String, i64>, me: &str) -> u32 {
    let order = served_order(
        queue
            .iter()
            .map(|q| (q.who.as_str(), q.priority, q.queued_at, q.fair_key.as_str())),
        turns,
    );
    let at = order.iter().position(|id| *id == me).unwrap_or(order.len());
    u32::try_from(at).unwrap_or(u32::MAX)
}

/// Every claim, each lock's holders first (first taken first), then its waiters in the
/// order they are served.
pub(super) fn in_served_order(
    claims: Vec<(LockClaim, LockHolder)>,
    turns: &HashMap<(String, String), HashMap<String, i64>>,
) -> Vec<(LockClaim, LockHolder)> {
    type Rows = Vec<(LockClaim, LockHolder)>;
    let mut by_lock: Vec<((String, String), Rows)> = Vec::new();
    for (claim, holder) in claims {
        let lock = (claim.name.clone(), claim.key.clone());
        match by_lock.last_mut() {
            Some((last, rows)) if *last == lock => rows.push((claim, holder)),
            _ => by_lock.push((lock, vec![(claim, holder)])),
        }
    }
    let mut out = Vec::new();
    let none = HashMap::new();
    for (lock, rows) in by_lock {
        let turns = turns.get(&lock).unwrap_or(&none);
        let (mut held, waiting): (Vec<_>, Vec<_>) =
            rows.into_iter().partition(|(_, h)| h.held_since.is_some());
        held.sort_by(|a, b| {
            (a.1.held_since, &a.1.request_id, &a.1.job_id).cmp(&(
                b.1.held_since,
                &b.1.request_id,
                &b.1.job_id,
            ))
        });
        let whos: Vec<String> = waiting
            .iter()
            .map(|(_, h)| who(&h.request_id, &h.job_id))
            .collect();
        let order: Vec<String> = served_order(
            waiting.iter().zip(&whos).map(|((_, h), who)| {
                (
                    who.as_str(),
                    h.priority,
                    h.queued_at.timestamp_micros(),
                    h.fair_key.as_str(),
                )
            }),
            turns,
        )
        .into_iter()
        .map(str::to_owned)
        .collect();
        let mut waiting: Vec<Option<(LockClaim, LockHolder)>> =
            waiting.into_iter().map(Some).collect();
        out.extend(held);
        for id in order {
            if let Some(slot) = waiting.iter_mut().find(|w| {
                w.as_ref()
                    .is_some_and(|(_, h)| who(&h.request_id, &h.job_id) == id)
            }) {
                out.extend(slot.take());
            }
        }
    }
    out
}
