//! The `job_runners` table: registrations, leases, lost runners and taking back their
//! requests.

use super::*;

impl<DB: Backend> SqlStore<DB> {
    pub(super) fn runner_from_row(row: &DB::Row, now: DateTime<Utc>) -> Result<JobRunner, Error> {
        let renewed_at: i64 = row.read("renewed_at")?;
        let lease_us: i64 = row.read("lease_us")?;
        let lost_at: Option<i64> = row.read("lost_at")?;
        let ended_at: Option<i64> = row.read("ended_at")?;
        let state = match (lost_at, ended_at) {
            (_, Some(_)) => RunnerState::Stopped,
            (Some(_), None) => RunnerState::Lost,
            (None, None) if renewed_at.saturating_add(lease_us) < micros(now) => RunnerState::Lost,
            (None, None) => RunnerState::Live,
        };
        Ok(JobRunner {
            instance_id: row.read("instance_id")?,
            url: row.read("url")?,
            host: row.read("host")?,
            pid: u32::try_from(row.read::<i64>("pid")?).unwrap_or(0),
            started_at: from_micros(row.read("started_at")?),
            renewed_at: from_micros(renewed_at),
            lease: proto::duration::format(std::time::Duration::from_micros(
                u64::try_from(lease_us).unwrap_or(0),
            )),
            running_requests: u64::try_from(row.read::<i64>("running").unwrap_or(0)).unwrap_or(0),
            state,
            ended_at: ended_at.or(lost_at).map(from_micros),
        })
    }

    pub(super) async fn runner(
        &self,
        instance: &str,
        now: DateTime<Utc>,
    ) -> Result<JobRunner, Error> {
        let row = Statement::new(concat!(runner_select!(), " WHERE r.instance_id = $2"))
            .bind(state_value(State::Running))
            .bind(instance)
            .fetch_optional(&self.readers)
            .await?
            .ok_or_else(|| Error::not_found("job runner instance", instance))?;
        Self::runner_from_row(&row, now)
    }

    pub(crate) async fn register_runner(
        &self,
        runner: &RunnerRegistration,
        at: DateTime<Utc>,
    ) -> Result<JobRunner, Error> {
        let lease = proto::duration::parse(&runner.lease).map_err(|err| {
            Error::Invalid(format!(
                "lease {:?} is not a duration ({err}); expected such as 10s",
                runner.lease
            ))
        })?;
        let lease_us = i64::try_from(lease.as_micros()).unwrap_or(i64::MAX);
        let inserted = Statement::new(
            "INSERT INTO job_runners (instance_id, url, host, pid, started_at, renewed_at, lease_us) \
             VALUES ($1, $2, $3, $4, $5, $5, $6)",
        )
        .bind(runner.instance_id.as_str())
        .bind(runner.url.as_str())
        .bind(runner.host.as_str())
        .bind(i64::from(runner.pid))
        .bind(micros(at))
        .bind(lease_us)
        .execute(&self.pool)
        .await;
        match inserted.map_err(Error::from) {
            Ok(_) => {}
            Err(Error::Duplicate(_)) => {
                return Err(Error::Conflict(format!(
                    "job runner instance {} is registered already; an instance id is new at every start",
                    runner.instance_id
                )));
            }
            Err(err) => return Err(err),
        }
        self.runner(&runner.instance_id, at).await
    }

    pub(crate) async fn renew_runner(
        &self,
        instance: &str,
        at: DateTime<Utc>,
    ) -> Result<JobRunner, Error> {
        let done = Statement::new(
            "UPDATE job_runners SET renewed_at = $2 WHERE instance_id = $1 AND lost_at IS NULL AND ended_at IS NULL",
        )
        .bind(instance)
        .bind(micros(at))
        .execute(&self.pool)
        .await?;
        let runner = self.runner(instance, at).await?;
        if DB::rows_affected(&done) == 0 {
            return Err(Error::RunnerEnded {
                instance: instance.to_owned(),
                state: runner.state,
            });
        }
        Ok(runner)
    }

    pub(crate) async fn end_runner(&self, instance: &str, at: DateTime<Utc>) -> Result<(), Error> {
        Statement::new(
            "UPDATE job_runners SET ended_at = $2 WHERE instance_id = $1 AND ended_at IS NULL",
        )
        .bind(instance)
        .bind(micros(at))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub(crate) async fn job_runners(
        &self,
        now: DateTime<Utc>,
        ended_since: DateTime<Utc>,
    ) -> Result<Vec<JobRunner>, Error> {
        let rows = Statement::new(concat!(
            runner_select!(),
            " WHERE (r.lost_at IS NULL AND r.ended_at IS NULL) \
             OR COALESCE(r.ended_at, r.lost_at) >= $2 \
             OR EXISTS (SELECT 1 FROM requests q WHERE q.jr_instance = r.instance_id AND q.state = $1) \
             ORDER BY r.started_at DESC, r.instance_id"
        ))
        .bind(state_value(State::Running))
        .bind(micros(ended_since))
        .fetch_all(&self.readers)
        .await?;
        rows.iter()
            .map(|row| Self::runner_from_row(row, now))
            .collect()
    }

    pub(crate) async fn mark_runner_lost(
        &self,
        instance: &str,
        at: DateTime<Utc>,
    ) -> Result<bool, Error> {
        let done = Statement::new(
            "UPDATE job_runners SET lost_at = $2 WHERE instance_id = $1 AND lost_at IS NULL AND ended_at IS NULL",
        )
        .bind(instance)
        .bind(micros(at))
        .execute(&self.pool)
        .await?;
        Ok(DB::rows_affected(&done) == 1)
    }

    pub(crate) async fn owned_requests(&self, instance: &str) -> Result<Vec<String>, Error> {
        let rows = Statement::new(
            "SELECT request_id FROM requests WHERE jr_instance = $1 AND state = $2 ORDER BY created_at",
        )
        .bind(instance)
        .bind(state_value(State::Running))
        .fetch_all(&self.readers)
        .await?;
        rows.iter().map(|row| Ok(row.read("request_id")?)).collect()
    }

    // Long because every check must be made in the one transaction that stores the
    // rebuilt chain, the request's row locked: the ownership (a request that moved on is
    // left), the tries that began after the caller read the store (fenced), then the
    // interrupted tries logged, the chain suspended and the epoch bumped.
    pub(crate) async fn recover_request(
        &self,
        holder: Holder<'_>,
        interrupted: &[JobLog],
        suspended: &SuspendedJobChain,
        at: DateTime<Utc>,
    ) -> Result<(), Error> {
        let request_id = suspended.request_id.as_str();
        let suspended_json = to_json("suspended job chain", suspended)?;
        let mut tx = self.pool.begin().await?;
        // The ownership first: a request that moved on is left as it is.
        let updated = match holder {
            Holder::Lost(instance) => Statement::new(
                "UPDATE requests SET state = $2, jr_url = NULL, jr_instance = NULL, epoch = epoch + 1 \
                 WHERE request_id = $1 AND state = $3 AND jr_instance = $4",
            )
            .bind(request_id)
            .bind(state_value(State::Suspended))
            .bind(state_value(State::Running))
            .bind(instance),
            Holder::Unstarted(epoch) => Statement::new(
                "UPDATE requests SET state = $2, jr_url = NULL, jr_instance = NULL, epoch = epoch + 1 \
                 WHERE request_id = $1 AND state = $3 AND epoch = $4",
            )
            .bind(request_id)
            .bind(state_value(State::Suspended))
            .bind(state_value(State::Pending))
            .bind(count(epoch)),
            Holder::Unresumed(epoch) => Statement::new(
                "UPDATE requests SET jr_url = NULL, jr_instance = NULL, epoch = epoch + 1 \
                 WHERE request_id = $1 AND state = $2 AND epoch = $3",
            )
            .bind(request_id)
            .bind(state_value(State::Suspended))
            .bind(count(epoch)),
            Holder::Finished(state) => Statement::new(
                "UPDATE requests SET state = $2, jr_url = NULL, jr_instance = NULL, epoch = epoch + 1, \
                 finished_at = NULL, error = '', finished_jobs = $4 WHERE request_id = $1 AND state = $3",
            )
            .bind(request_id)
            .bind(state_value(State::Suspended))
            .bind(state_value(state))
            .bind(count(suspended.job_chain.finished_jobs)),
        }
        .execute(&mut tx)
        .await?;
        if DB::rows_affected(&updated) == 0 {
            drop(tx);
            return Err(match holder {
                Holder::Lost(instance) => {
                    let fence = Fence {
                        instance: instance.to_owned(),
                        epoch: self.owner(request_id).await.map_or(0, |owner| owner.epoch),
                    };
                    self.refusal(request_id, Some(&fence), State::Running).await
                }
                Holder::Unstarted(epoch) | Holder::Unresumed(epoch) => {
                    let expected = if matches!(holder, Holder::Unstarted(_)) {
                        State::Pending
                    } else {
                        State::Suspended
                    };
                    let owner = self.owner(request_id).await?;
                    if owner.state == expected && owner.epoch != epoch {
                        Error::Fenced(format!(
                            "request {request_id} was handed over again (epoch {}, not {epoch})",
                            owner.epoch
                        ))
                    } else {
                        self.state_error(request_id, expected).await
                    }
                }
                Holder::Finished(state) => self.state_error(request_id, state).await,
            });
        }
        if matches!(
            holder,
            Holder::Lost(_) | Holder::Unstarted(_) | Holder::Unresumed(_)
        ) {
            // With the request's row locked: a try that started after the caller read
            // the starts (and so is not in `interrupted`) would be missed and run twice.
            let unlogged = Statement::new(
                "SELECT t.job_id, t.try FROM job_tries t LEFT JOIN job_log l \
                 ON l.request_id = t.request_id AND l.job_id = t.job_id AND l.try = t.try \
                 WHERE t.request_id = $1 AND l.request_id IS NULL",
            )
            .bind(request_id)
            .fetch_all(&mut tx)
            .await?;
            for row in &unlogged {
                let job_id: String = row.read("job_id")?;
                let r#try = u32::try_from(row.read::<i32>("try")?).unwrap_or(0);
                if !interrupted
                    .iter()
                    .any(|entry| entry.job_id == job_id && entry.r#try == r#try)
                {
                    return Err(Error::TryBegan {
                        request_id: request_id.to_owned(),
                        job_id,
                        attempt: r#try,
                    });
                }
            }
            // A try that started (or started and ended) after the caller read the starts
            // and the log, beyond the rebuilt chain's count of its job's tries: the chain
            // would run it again under the same try number, and the job would run twice
            // with one entry (the chaos test, a runner lost yet reporting).
            for sql in [
                "SELECT job_id, MAX(try) AS try FROM job_tries WHERE request_id = $1 GROUP BY job_id",
                "SELECT job_id, MAX(try) AS try FROM job_log WHERE request_id = $1 GROUP BY job_id",
            ] {
                let rows = Statement::new(sql)
                    .bind(request_id)
                    .fetch_all(&mut tx)
                    .await?;
                for row in &rows {
                    let job_id: String = row.read("job_id")?;
                    let r#try = u32::try_from(row.read::<i32>("try")?).unwrap_or(0);
                    let counted = suspended.total_job_tries.get(&job_id).copied().unwrap_or(0);
                    if r#try > counted {
                        return Err(Error::TryBegan {
                            request_id: request_id.to_owned(),
                            job_id,
                            attempt: r#try,
                        });
                    }
                }
            }
        }
        Self::insert_logs_in(&mut tx, interrupted).await?;
        if matches!(holder, Holder::Unresumed(_)) {
            // The stale chain (claimed or not) gives way to the rebuilt one, unclaimed.
            Statement::new("DELETE FROM suspended_job_chains WHERE request_id = $1")
                .bind(request_id)
                .execute(&mut tx)
                .await?;
        }
        super::suspended::insert_suspended(request_id, suspended_json, at)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
