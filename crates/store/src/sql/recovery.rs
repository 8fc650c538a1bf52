//! Recovering a lost runner's requests in batches: what each recovery reads, a few
//! statements for hundreds of requests, and their recoveries in one transaction, each
//! checked as [`SqlStore::recover_request`] checks one.

use std::collections::{HashMap, HashSet};

use super::*;

use crate::{Recovery, RecoveryRead};

impl<DB: Backend> SqlStore<DB> {
    pub(crate) async fn recovery_reads_among(
        &self,
        request_ids: &[String],
    ) -> Result<HashMap<String, RecoveryRead>, Error> {
        let mut reads: HashMap<String, RecoveryRead> = HashMap::with_capacity(request_ids.len());
        for chunk in request_ids.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let ids = || chunk.iter().map(String::as_str);
            let chains = Self::requests_in(
                "SELECT request_id, job_chain FROM request_archives",
                ids(),
                "",
            );
            for row in chains.fetch_all(&self.readers).await? {
                let text: String = row.read("job_chain")?;
                reads.insert(
                    row.read("request_id")?,
                    RecoveryRead {
                        job_chain: from_json("stored job chain", &text)?,
                        ..RecoveryRead::default()
                    },
                );
            }
            // The log, and from its rows each job's latest try and state (what
            // `job_chain` reads apart).
            let logs = Self::requests_in(
                "SELECT * FROM job_log",
                ids(),
                " ORDER BY request_id, job_id, try",
            );
            let mut rows_of: HashMap<String, Vec<DB::Row>> = HashMap::new();
            for row in logs.fetch_all(&self.readers).await? {
                let entry = Self::job_log_from_row(&row)?;
                if let Some(read) = reads.get_mut(&entry.request_id) {
                    rows_of
                        .entry(entry.request_id.clone())
                        .or_default()
                        .push(row);
                    read.job_log.push(entry);
                }
            }
            for (request_id, rows) in rows_of {
                let Some(read) = reads.get_mut(&request_id) else {
                    continue;
                };
                for latest in Self::latest_of(rows)? {
                    if let Some(job) = read.job_chain.jobs.get_mut(&latest.job_id) {
                        job.tries = latest.tries;
                        job.state = latest.state;
                    }
                }
            }
            let starts = Self::requests_in(
                "SELECT request_id, job_id, try, run_try, sequence_try, started_at, jr_instance FROM job_tries",
                ids(),
                " ORDER BY request_id, job_id, try",
            );
            for row in starts.fetch_all(&self.readers).await? {
                let started = Self::started_try_from_row(&row)?;
                if let Some(read) = reads.get_mut(&started.start.request_id) {
                    read.try_starts.push(started);
                }
            }
        }
        Ok(reads)
    }

    // Long because each recovery is judged as `recover_request` judges one (its row
    // locked: still RUNNING on the lost runner, no try begun that it does not log, none
    // beyond its chain's count), from reads made once for the batch, before any write.
    pub(crate) async fn recover_lost_many(
        &self,
        instance: &str,
        recoveries: &[Recovery],
        at: DateTime<Utc>,
    ) -> Result<Vec<Result<(), Error>>, Error> {
        let mut ids: Vec<&str> = recoveries
            .iter()
            .map(|r| r.suspended.request_id.as_str())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let mut tx = self.pool.begin().await?;
        let owners = Self::owners_in(&mut tx, &ids, DB::LOCK_ROWS).await?;
        let held: Vec<&str> = ids
            .iter()
            .copied()
            .filter(|id| {
                owners
                    .get(*id)
                    .is_some_and(|o| o.state == State::Running && o.instance == instance)
            })
            .collect();
        // Tries begun and never logged, and the highest try of each job started or
        // logged, of the requests still held.
        let mut unlogged: HashMap<String, Vec<(String, u32)>> = HashMap::new();
        let mut highest: HashMap<String, Vec<(String, u32)>> = HashMap::new();
        for chunk in held.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let mut select = Statement::build(
                "SELECT t.request_id, t.job_id, t.try FROM job_tries t LEFT JOIN job_log l \
                 ON l.request_id = t.request_id AND l.job_id = t.job_id AND l.try = t.try \
                 WHERE t.request_id IN (",
            );
            select
                .push_list(chunk.iter().copied())
                .push(") AND l.request_id IS NULL");
            for row in select.fetch_all(&mut tx).await? {
                unlogged.entry(row.read("request_id")?).or_default().push((
                    row.read("job_id")?,
                    u32::try_from(row.read::<i32>("try")?).unwrap_or(0),
                ));
            }
            for table in ["job_tries", "job_log"] {
                let select = Self::requests_in(
                    &format!("SELECT request_id, job_id, MAX(try) AS try FROM {table}"),
                    chunk.iter().copied(),
                    " GROUP BY request_id, job_id",
                );
                for row in select.fetch_all(&mut tx).await? {
                    highest.entry(row.read("request_id")?).or_default().push((
                        row.read("job_id")?,
                        u32::try_from(row.read::<i32>("try")?).unwrap_or(0),
                    ));
                }
            }
        }
        let mut done = Vec::with_capacity(recoveries.len());
        let mut recovered: Vec<&Recovery> = Vec::with_capacity(recoveries.len());
        let mut seen: HashSet<&str> = HashSet::with_capacity(recoveries.len());
        for recovery in recoveries {
            let request_id = recovery.suspended.request_id.as_str();
            let Some(owner) = owners.get(request_id) else {
                done.push(Err(Error::not_found("request", request_id)));
                continue;
            };
            if !seen.insert(request_id) {
                done.push(Err(Error::Conflict(format!(
                    "request {request_id} is recovered once; it was twice in one batch"
                ))));
                continue;
            }
            let fence = Fence {
                instance: instance.to_owned(),
                epoch: owner.epoch,
            };
            if !owner.accepts(&fence) {
                done.push(Err(owner.refusal(request_id, &fence)));
                continue;
            }
            if owner.state != State::Running || owner.instance != instance {
                done.push(Err(Error::State {
                    request_id: request_id.to_owned(),
                    actual: owner.state,
                    expected: State::Running,
                }));
                continue;
            }
            let not_logged =
                unlogged
                    .get(request_id)
                    .into_iter()
                    .flatten()
                    .find(|(job_id, r#try)| {
                        !recovery
                            .interrupted
                            .iter()
                            .any(|entry| entry.job_id == *job_id && entry.r#try == *r#try)
                    });
            let beyond = highest
                .get(request_id)
                .into_iter()
                .flatten()
                .find(|(job_id, r#try)| {
                    *r#try
                        > recovery
                            .suspended
                            .total_job_tries
                            .get(job_id)
                            .copied()
                            .unwrap_or(0)
                });
            if let Some((job_id, r#try)) = not_logged.or(beyond) {
                done.push(Err(Error::TryBegan {
                    request_id: request_id.to_owned(),
                    job_id: job_id.clone(),
                    attempt: *r#try,
                }));
                continue;
            }
            recovered.push(recovery);
            done.push(Ok(()));
        }
        for chunk in recovered.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let mut update = Statement::build("UPDATE requests SET state = ");
            update
                .push_param(state_value(State::Suspended))
                .push(
                    ", jr_url = NULL, jr_instance = NULL, epoch = epoch + 1 WHERE request_id IN (",
                )
                .push_list(chunk.iter().map(|r| r.suspended.request_id.as_str()))
                .push(")");
            update.execute(&mut tx).await?;
        }
        let interrupted: Vec<JobLog> = recovered
            .iter()
            .flat_map(|r| r.interrupted.iter().cloned())
            .collect();
        Self::insert_logs_in(&mut tx, &interrupted).await?;
        for recovery in &recovered {
            let suspended_json = to_json("suspended job chain", &recovery.suspended)?;
            super::suspended::insert_suspended(&recovery.suspended.request_id, suspended_json, at)
                .execute(&mut tx)
                .await?;
        }
        tx.commit().await?;
        Ok(done)
    }
}
