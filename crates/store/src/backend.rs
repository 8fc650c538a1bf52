//! The SQL both backends share, as one macro that implements [`crate::Store`] for a
//! store type with a `pool` field. The statements are written once, with `$N`
//! placeholders, which SQLite and PostgreSQL both read; what differs (claiming a suspended
//! chain) comes from the store type's `CLAIM_SQL`.

use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;

/// Job log rows per INSERT statement (12 parameters each, under SQLite's limit).
pub(crate) const LOG_ROWS_PER_STATEMENT: usize = 1000;

pub(crate) fn micros(time: DateTime<Utc>) -> i64 {
    time.timestamp_micros()
}

pub(crate) fn from_micros(micros: i64) -> DateTime<Utc> {
    Utc.timestamp_micros(micros).single().unwrap_or_default()
}

/// A request arg's value as the search compares it: strings as they are, others as JSON.
pub(crate) fn arg_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

pub(crate) fn state_of(value: i16) -> Result<proto::State, crate::Error> {
    u8::try_from(value)
        .ok()
        .and_then(|v| proto::State::from_value(v).ok())
        .ok_or_else(|| crate::Error::Corrupt(format!("stored state {value} is not a state")))
}

macro_rules! impl_store {
    ($store:ty, $db:ty) => {
        impl $store {
            /// Why a conditional update of `request_id` matched no row.
            async fn state_error(&self, request_id: &str, expected: proto::State) -> crate::Error {
                let row = sqlx::query("SELECT state FROM requests WHERE request_id = $1")
                    .bind(request_id)
                    .fetch_optional(&self.pool)
                    .await;
                match row {
                    Ok(None) => crate::Error::not_found("request", request_id),
                    Ok(Some(row)) => match sqlx::Row::try_get::<i16, _>(&row, "state").map_err(crate::Error::from).and_then(crate::backend::state_of) {
                        Ok(actual) => crate::Error::State {
                            request_id: request_id.to_owned(),
                            actual,
                            expected,
                        },
                        Err(err) => err,
                    },
                    Err(err) => err.into(),
                }
            }

            fn request_from_row(row: &<$db as sqlx::Database>::Row) -> Result<proto::Request, crate::Error> {
                use sqlx::Row as _;
                let micros = |name: &str| -> Result<Option<chrono::DateTime<chrono::Utc>>, crate::Error> {
                    Ok(row.try_get::<Option<i64>, _>(name)?.map(crate::backend::from_micros))
                };
                Ok(proto::Request {
                    id: row.try_get("request_id")?,
                    request_type: row.try_get("type")?,
                    state: crate::backend::state_of(row.try_get("state")?)?,
                    user: row.try_get("user_name")?,
                    args: Vec::new(),
                    created_at: micros("created_at")?.unwrap_or_default(),
                    started_at: micros("started_at")?,
                    finished_at: micros("finished_at")?,
                    job_chain: None,
                    total_jobs: u64::try_from(row.try_get::<i64, _>("total_jobs")?).unwrap_or(0),
                    finished_jobs: u64::try_from(row.try_get::<i64, _>("finished_jobs")?).unwrap_or(0),
                    jr_url: row.try_get::<Option<String>, _>("jr_url")?.unwrap_or_default(),
                })
            }

            fn job_log_from_row(row: &<$db as sqlx::Database>::Row) -> Result<proto::JobLog, crate::Error> {
                use sqlx::Row as _;
                Ok(proto::JobLog {
                    request_id: row.try_get("request_id")?,
                    job_id: row.try_get("job_id")?,
                    r#try: u32::try_from(row.try_get::<i32, _>("try")?).unwrap_or(0),
                    name: row.try_get("name")?,
                    job_type: row.try_get("type")?,
                    started_at: row.try_get("started_at")?,
                    finished_at: row.try_get("finished_at")?,
                    state: crate::backend::state_of(row.try_get("state")?)?,
                    exit: row.try_get("exit")?,
                    error: row.try_get("error")?,
                    stdout: row.try_get("stdout")?,
                    stderr: row.try_get("stderr")?,
                })
            }

            /// Sets each job of `chain` to its latest logged state and try.
            async fn live_states(&self, chain: &mut proto::JobChain) -> Result<(), crate::Error> {
                use sqlx::Row as _;
                let rows = sqlx::query("SELECT job_id, try, state FROM job_log WHERE request_id = $1")
                    .bind(&chain.request_id)
                    .fetch_all(&self.pool)
                    .await?;
                for row in rows {
                    let job_id: String = row.try_get("job_id")?;
                    let try_no = u32::try_from(row.try_get::<i32, _>("try")?).unwrap_or(0);
                    if let Some(job) = chain.jobs.get_mut(&job_id) {
                        if try_no >= job.tries {
                            job.tries = try_no;
                            job.state = crate::backend::state_of(row.try_get("state")?)?;
                        }
                    }
                }
                Ok(())
            }

            async fn archived_chain(&self, request_id: &str) -> Result<proto::JobChain, crate::Error> {
                use sqlx::Row as _;
                let row = sqlx::query("SELECT job_chain FROM request_archives WHERE request_id = $1")
                    .bind(request_id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or_else(|| crate::Error::not_found("job chain of request", request_id))?;
                let text: String = row.try_get("job_chain")?;
                Ok(serde_json::from_str(&text)?)
            }
        }

        #[async_trait::async_trait]
        impl crate::Store for $store {
            async fn create_request(&self, request: &proto::Request, create_request: &proto::CreateRequest) -> Result<(), crate::Error> {
                let Some(chain) = &request.job_chain else {
                    return Err(crate::Error::Invalid("a new request needs its job chain".to_owned()));
                };
                let mut tx = self.pool.begin().await?;
                sqlx::query(
                    "INSERT INTO requests (request_id, type, state, user_name, created_at, total_jobs, finished_jobs) \
                     VALUES ($1, $2, $3, $4, $5, $6, 0)",
                )
                .bind(&request.id)
                .bind(&request.request_type)
                .bind(i16::from(request.state.value()))
                .bind(&request.user)
                .bind(crate::backend::micros(request.created_at))
                .bind(i64::try_from(request.total_jobs).unwrap_or(i64::MAX))
                .execute(&mut *tx)
                .await?;
                sqlx::query("INSERT INTO request_archives (request_id, create_request, args, job_chain) VALUES ($1, $2, $3, $4)")
                    .bind(&request.id)
                    .bind(serde_json::to_string(create_request)?)
                    .bind(serde_json::to_string(&request.args)?)
                    .bind(serde_json::to_string(chain)?)
                    .execute(&mut *tx)
                    .await?;
                if !request.args.is_empty() {
                    let mut insert = sqlx::QueryBuilder::<$db>::new("INSERT INTO request_args (request_id, name, value) ");
                    insert.push_values(&request.args, |mut row, arg| {
                        row.push_bind(&request.id)
                            .push_bind(&arg.name)
                            .push_bind(crate::backend::arg_text(&arg.value));
                    });
                    insert.build().execute(&mut *tx).await?;
                }
                tx.commit().await?;
                Ok(())
            }

            async fn get_request(&self, request_id: &str, with_chain: bool) -> Result<proto::Request, crate::Error> {
                use sqlx::Row as _;
                let row = sqlx::query(
                    "SELECT r.request_id, r.type, r.state, r.user_name, r.created_at, r.started_at, r.finished_at, \
                     r.total_jobs, r.finished_jobs, r.jr_url, a.args \
                     FROM requests r LEFT JOIN request_archives a ON a.request_id = r.request_id \
                     WHERE r.request_id = $1",
                )
                .bind(request_id)
                .fetch_optional(&self.pool)
                .await?
                .ok_or_else(|| crate::Error::not_found("request", request_id))?;
                let mut request = Self::request_from_row(&row)?;
                if let Some(args) = row.try_get::<Option<String>, _>("args")?.filter(|a| !a.is_empty()) {
                    request.args = serde_json::from_str(&args)?;
                }
                if with_chain {
                    let mut chain = self.archived_chain(request_id).await?;
                    self.live_states(&mut chain).await?;
                    request.job_chain = Some(chain);
                }
                Ok(request)
            }

            async fn job_chain(&self, request_id: &str) -> Result<proto::JobChain, crate::Error> {
                let mut chain = self.archived_chain(request_id).await?;
                self.live_states(&mut chain).await?;
                Ok(chain)
            }

            async fn start_request(&self, request_id: &str, jr_url: &str, at: chrono::DateTime<chrono::Utc>) -> Result<(), crate::Error> {
                let done = sqlx::query("UPDATE requests SET state = 2, started_at = $2, jr_url = $3 WHERE request_id = $1 AND state = 1")
                    .bind(request_id)
                    .bind(crate::backend::micros(at))
                    .bind(jr_url)
                    .execute(&self.pool)
                    .await?;
                if done.rows_affected() == 0 {
                    return Err(self.state_error(request_id, proto::State::Pending).await);
                }
                Ok(())
            }

            async fn fail_pending(&self, request_id: &str, at: chrono::DateTime<chrono::Utc>) -> Result<(), crate::Error> {
                let done = sqlx::query("UPDATE requests SET state = 4, finished_at = $2, jr_url = NULL WHERE request_id = $1 AND state = 1")
                    .bind(request_id)
                    .bind(crate::backend::micros(at))
                    .execute(&self.pool)
                    .await?;
                if done.rows_affected() == 0 {
                    return Err(self.state_error(request_id, proto::State::Pending).await);
                }
                Ok(())
            }

            async fn finish_request(&self, finish: &proto::FinishRequest) -> Result<crate::Finished, crate::Error> {
                if !finish.state.is_finished() {
                    return Err(crate::Error::Invalid(format!(
                        "final state {} is not a final state; expected COMPLETE, FAIL or STOPPED",
                        finish.state
                    )));
                }
                let done = sqlx::query(
                    "UPDATE requests SET state = $2, finished_at = $3, finished_jobs = $4, jr_url = NULL \
                     WHERE request_id = $1 AND state = 2",
                )
                .bind(&finish.request_id)
                .bind(i16::from(finish.state.value()))
                .bind(crate::backend::micros(finish.finished_at))
                .bind(i64::try_from(finish.finished_jobs).unwrap_or(i64::MAX))
                .execute(&self.pool)
                .await?;
                if done.rows_affected() == 1 {
                    return Ok(crate::Finished::Now);
                }
                match self.state_error(&finish.request_id, proto::State::Running).await {
                    crate::Error::State { actual, .. } if actual.is_finished() => Ok(crate::Finished::Already(actual)),
                    err => Err(err),
                }
            }

            async fn update_progress(&self, request_id: &str, finished_jobs: u64) -> Result<(), crate::Error> {
                sqlx::query("UPDATE requests SET finished_jobs = $2 WHERE request_id = $1 AND state = 2")
                    .bind(request_id)
                    .bind(i64::try_from(finished_jobs).unwrap_or(i64::MAX))
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn update_progress_many(&self, updates: &[(String, u64)]) -> Result<(), crate::Error> {
                let mut tx = self.pool.begin().await?;
                for (request_id, finished_jobs) in updates {
                    sqlx::query("UPDATE requests SET finished_jobs = $2 WHERE request_id = $1 AND state = 2")
                        .bind(request_id)
                        .bind(i64::try_from(*finished_jobs).unwrap_or(i64::MAX))
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(())
            }

            async fn insert_job_logs(&self, entries: &[proto::JobLog]) -> Result<(), crate::Error> {
                if entries.is_empty() {
                    return Ok(());
                }
                let mut tx = self.pool.begin().await?;
                for chunk in entries.chunks(crate::backend::LOG_ROWS_PER_STATEMENT) {
                    let mut insert = sqlx::QueryBuilder::<$db>::new(
                        "INSERT INTO job_log (request_id, job_id, try, name, type, state, started_at, finished_at, exit, error, stdout, stderr) ",
                    );
                    insert.push_values(chunk, |mut row, entry| {
                        row.push_bind(&entry.request_id)
                            .push_bind(&entry.job_id)
                            .push_bind(i32::try_from(entry.r#try).unwrap_or(i32::MAX))
                            .push_bind(&entry.name)
                            .push_bind(&entry.job_type)
                            .push_bind(i16::from(entry.state.value()))
                            .push_bind(entry.started_at)
                            .push_bind(entry.finished_at)
                            .push_bind(entry.exit)
                            .push_bind(&entry.error)
                            .push_bind(&entry.stdout)
                            .push_bind(&entry.stderr);
                    });
                    insert.push(" ON CONFLICT (request_id, job_id, try) DO NOTHING");
                    insert.build().execute(&mut *tx).await?;
                }
                tx.commit().await?;
                Ok(())
            }

            async fn job_log(&self, request_id: &str) -> Result<Vec<proto::JobLog>, crate::Error> {
                let rows = sqlx::query("SELECT * FROM job_log WHERE request_id = $1 ORDER BY job_id, try")
                    .bind(request_id)
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::job_log_from_row).collect()
            }

            async fn latest_job_log(&self, request_id: &str, job_id: &str) -> Result<proto::JobLog, crate::Error> {
                let row = sqlx::query("SELECT * FROM job_log WHERE request_id = $1 AND job_id = $2 ORDER BY try DESC LIMIT 1")
                    .bind(request_id)
                    .bind(job_id)
                    .fetch_optional(&self.pool)
                    .await?
                    .ok_or_else(|| crate::Error::NotFound {
                        what: "job",
                        id: format!("{job_id} of request {request_id}"),
                    })?;
                Self::job_log_from_row(&row)
            }

            async fn suspend_request(&self, suspended: &proto::SuspendedJobChain, at: chrono::DateTime<chrono::Utc>) -> Result<(), crate::Error> {
                let request_id = &suspended.request_id;
                let mut tx = self.pool.begin().await?;
                let inserted = sqlx::query(
                    "INSERT INTO suspended_job_chains (request_id, suspended_job_chain, rm_host, updated_at, suspended_at) \
                     VALUES ($1, $2, NULL, $3, $3)",
                )
                .bind(request_id)
                .bind(serde_json::to_string(suspended)?)
                .bind(crate::backend::micros(at))
                .execute(&mut *tx)
                .await;
                match inserted.map_err(crate::Error::from) {
                    Ok(_) => {}
                    Err(crate::Error::Conflict(_)) => {
                        return Err(crate::Error::Conflict(format!("request {request_id} already has a suspended job chain")));
                    }
                    // A chain for a request that does not exist breaks the foreign key.
                    Err(crate::Error::Database(_)) => {
                        drop(tx);
                        return Err(self.state_error(request_id, proto::State::Running).await);
                    }
                    Err(err) => return Err(err),
                }
                let updated = sqlx::query("UPDATE requests SET state = 7, jr_url = NULL WHERE request_id = $1 AND state = 2")
                    .bind(request_id)
                    .execute(&mut *tx)
                    .await?;
                if updated.rows_affected() == 0 {
                    drop(tx);
                    return Err(self.state_error(request_id, proto::State::Running).await);
                }
                tx.commit().await?;
                Ok(())
            }

            async fn claim_suspended(&self, host: &str, at: chrono::DateTime<chrono::Utc>) -> Result<Option<proto::SuspendedJobChain>, crate::Error> {
                use sqlx::Row as _;
                let row = sqlx::query(<$store>::CLAIM_SQL)
                    .bind(host)
                    .bind(crate::backend::micros(at))
                    .fetch_optional(&self.pool)
                    .await?;
                match row {
                    None => Ok(None),
                    Some(row) => {
                        let text: String = row.try_get("suspended_job_chain")?;
                        Ok(Some(serde_json::from_str(&text)?))
                    }
                }
            }

            async fn resumed(&self, request_id: &str, host: &str, jr_url: &str) -> Result<(), crate::Error> {
                let mut tx = self.pool.begin().await?;
                let deleted = sqlx::query("DELETE FROM suspended_job_chains WHERE request_id = $1 AND rm_host = $2")
                    .bind(request_id)
                    .bind(host)
                    .execute(&mut *tx)
                    .await?;
                if deleted.rows_affected() == 0 {
                    return Err(crate::Error::Conflict(format!(
                        "the suspended job chain of request {request_id} is not claimed by {host}"
                    )));
                }
                let updated = sqlx::query("UPDATE requests SET state = 2, jr_url = $2 WHERE request_id = $1 AND state = 7")
                    .bind(request_id)
                    .bind(jr_url)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                if updated.rows_affected() == 0 {
                    return Err(self.state_error(request_id, proto::State::Suspended).await);
                }
                Ok(())
            }

            async fn unclaim(&self, request_id: &str, host: &str) -> Result<(), crate::Error> {
                sqlx::query("UPDATE suspended_job_chains SET rm_host = NULL, updated_at = $3 WHERE request_id = $1 AND rm_host = $2")
                    .bind(request_id)
                    .bind(host)
                    .bind(crate::backend::micros(chrono::Utc::now()))
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn release_stale_claims(&self, before: chrono::DateTime<chrono::Utc>) -> Result<u64, crate::Error> {
                let done = sqlx::query(
                    "UPDATE suspended_job_chains SET rm_host = NULL, updated_at = $2 WHERE rm_host IS NOT NULL AND updated_at < $1",
                )
                .bind(crate::backend::micros(before))
                .bind(crate::backend::micros(chrono::Utc::now()))
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected())
            }

            async fn expire_suspended(&self, before: chrono::DateTime<chrono::Utc>, now: chrono::DateTime<chrono::Utc>) -> Result<Vec<String>, crate::Error> {
                use sqlx::Row as _;
                let rows = sqlx::query("SELECT request_id FROM suspended_job_chains WHERE rm_host IS NULL AND suspended_at < $1")
                    .bind(crate::backend::micros(before))
                    .fetch_all(&self.pool)
                    .await?;
                let mut expired = Vec::new();
                for row in rows {
                    let request_id: String = row.try_get("request_id")?;
                    let mut tx = self.pool.begin().await?;
                    // Deleting only an unclaimed chain is the claim: a resumer that got it
                    // first wins.
                    let deleted = sqlx::query("DELETE FROM suspended_job_chains WHERE request_id = $1 AND rm_host IS NULL")
                        .bind(&request_id)
                        .execute(&mut *tx)
                        .await?;
                    if deleted.rows_affected() == 0 {
                        continue;
                    }
                    sqlx::query("UPDATE requests SET state = 4, finished_at = $2, jr_url = NULL WHERE request_id = $1 AND state = 7")
                        .bind(&request_id)
                        .bind(crate::backend::micros(now))
                        .execute(&mut *tx)
                        .await?;
                    tx.commit().await?;
                    expired.push(request_id);
                }
                Ok(expired)
            }

            async fn find_requests(&self, filter: &proto::RequestFilter) -> Result<Vec<proto::Request>, crate::Error> {
                let mut query = sqlx::QueryBuilder::<$db>::new(
                    "SELECT request_id, type, state, user_name, created_at, started_at, finished_at, total_jobs, finished_jobs, jr_url \
                     FROM requests WHERE 1 = 1",
                );
                if let Some(request_type) = &filter.request_type {
                    query.push(" AND type = ").push_bind(request_type.clone());
                }
                if let Some(user) = &filter.user {
                    query.push(" AND user_name = ").push_bind(user.clone());
                }
                if !filter.states.is_empty() {
                    query.push(" AND state IN (");
                    let mut states = query.separated(", ");
                    for state in &filter.states {
                        states.push_bind(i16::from(state.value()));
                    }
                    query.push(")");
                }
                // `IN` lets the database start from the (name, value) index and sort the
                // few matches, instead of probing the args of every request by age.
                for (name, value) in &filter.args {
                    query
                        .push(" AND request_id IN (SELECT request_id FROM request_args WHERE name = ")
                        .push_bind(name.clone())
                        .push(" AND value = ")
                        .push_bind(value.clone())
                        .push(")");
                }
                if let Some(since) = filter.since {
                    query
                        .push(" AND (finished_at > ")
                        .push_bind(crate::backend::micros(since))
                        .push(" OR finished_at IS NULL)");
                }
                if let Some(until) = filter.until {
                    query.push(" AND created_at < ").push_bind(crate::backend::micros(until));
                }
                query.push(" ORDER BY created_at DESC, request_id ASC");
                if filter.limit > 0 {
                    query.push(" LIMIT ").push_bind(i64::try_from(filter.limit).unwrap_or(i64::MAX));
                    query.push(" OFFSET ").push_bind(i64::try_from(filter.offset).unwrap_or(i64::MAX));
                }
                let rows = query.build().fetch_all(&self.pool).await?;
                rows.iter().map(Self::request_from_row).collect()
            }

            async fn running_jr_urls(&self) -> Result<Vec<String>, crate::Error> {
                use sqlx::Row as _;
                let rows = sqlx::query("SELECT DISTINCT jr_url FROM requests WHERE state = 2 AND jr_url IS NOT NULL ORDER BY jr_url")
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(|row| Ok(row.try_get("jr_url")?)).collect()
            }
        }
    };
}

pub(crate) use impl_store;
