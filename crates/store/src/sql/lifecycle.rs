//! A request's state changes: hand-over (epochs), start, pause, finish, progress; each
//! guarded by the request's state and fence in the same statement.

use super::*;

sql_impl! {
    pub(super) async fn owners_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        request_ids: &[&str],
    ) -> Result<HashMap<String, Owner>, Error> {
        let mut owners = HashMap::new();
        for chunk in request_ids.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let mut select = Self::requests_in(
                "SELECT request_id, state, jr_instance, epoch FROM requests",
                chunk.iter().copied(),
            );
            for row in select.build().fetch_all(&mut **tx).await? {
                owners.insert(
                    row.try_get("request_id")?,
                    Owner {
                        state: state_of(row.try_get("state")?)?,
                        instance: row
                            .try_get::<Option<String>, _>("jr_instance")?
                            .unwrap_or_default(),
                        epoch: u64::try_from(row.try_get::<i64, _>("epoch")?).unwrap_or(0),
                    },
                );
            }
        }
        Ok(owners)
    }

    /// PENDING → RUNNING for many requests in one statement per chunk; returns, per
    /// start, whether it is paused if it started.
    pub(super) async fn start_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        starts: &[StartRequest],
    ) -> Result<Vec<Option<bool>>, Error> {
        let mut started = HashMap::new();
        for chunk in starts.chunks(REQUEST_ROWS_PER_STATEMENT) {
            // As start_request: never before it was created; only at the hand-over's epoch.
            let mut update = QueryBuilder::<DB>::new("UPDATE requests SET state = ");
            update
                .push_bind(state_value(State::Running))
                .push(
                    ", started_at = CASE WHEN v.column2 < created_at THEN created_at ELSE v.column2 END, \
                     jr_url = v.column3, jr_instance = NULLIF(v.column4, ''), error = '' FROM (",
                )
                .push_values(chunk, |mut row, start| {
                    row.push_bind(start.request_id.as_str())
                        .push_bind(micros(start.at))
                        .push_bind(start.jr_url.as_str())
                        .push_bind(instance_value(start.owner.as_ref()))
                        .push_bind(epoch_value(start.owner.as_ref()));
                })
                .push(") AS v WHERE request_id = v.column1 AND state = ")
                .push_bind(state_value(State::Pending))
                .push(" AND (v.column5 < 0 OR epoch = v.column5) RETURNING request_id, paused");
            for row in update.build().fetch_all(&mut **tx).await? {
                started.insert(
                    row.try_get::<String, _>("request_id")?,
                    row.try_get::<i32, _>("paused")? != 0,
                );
            }
        }
        Ok(starts
            .iter()
            .map(|start| started.remove(&start.request_id))
            .collect())
    }

    /// RUNNING → a final state for many requests in one statement per chunk (their
    /// started tries forgotten by a trigger); returns, per finish, the request if this
    /// finish ended it.
    pub(super) async fn finish_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        finishes: &[(FinishRequest, Option<Fence>)],
    ) -> Result<Vec<Option<Request>>, Error> {
        let mut finished: HashMap<String, Request> = HashMap::new();
        for chunk in finishes.chunks(REQUEST_ROWS_PER_STATEMENT) {
            // As finish_request: never before it started; only from the owner.
            let mut update = QueryBuilder::<DB>::new(
                "UPDATE requests SET state = v.column2, \
                 finished_at = CASE WHEN v.column3 < started_at THEN started_at ELSE v.column3 END, \
                 finished_jobs = v.column4, jr_url = NULL, error = v.column5 FROM (",
            );
            update
                .push_values(chunk, |mut row, (finish, fence)| {
                    row.push_bind(finish.request_id.as_str())
                        .push_bind(state_value(finish.state))
                        .push_bind(micros(finish.finished_at))
                        .push_bind(count(finish.finished_jobs))
                        .push_bind(finish.error.as_str())
                        .push_bind(epoch_value(fence.as_ref()))
                        .push_bind(instance_value(fence.as_ref()));
                })
                .push(") AS v WHERE request_id = v.column1 AND state = ")
                .push_bind(state_value(State::Running))
                .push(
                    " AND (v.column6 < 0 OR (epoch = v.column6 AND (jr_instance IS NULL OR jr_instance = v.column7))) \
                     RETURNING request_id, type, state, user_name, created_at, started_at, finished_at, \
                     total_jobs, finished_jobs, jr_url, error, paused, spec_version",
                );
            for row in update.build().fetch_all(&mut **tx).await? {
                let request = Self::request_from_row(&row)?;
                finished.insert(request.id.clone(), request);
            }
        }
        // Their started tries went with the UPDATE (a trigger: migrations 0009/0010).
        Ok(finishes
            .iter()
            .map(|(finish, _)| finished.remove(&finish.request_id))
            .collect())
    }

    /// Progress of many RUNNING requests, one statement per chunk.
    pub(super) async fn progress_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        updates: &[(&str, u64)],
    ) -> Result<(), Error> {
        for chunk in updates.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let mut update =
                QueryBuilder::<DB>::new("UPDATE requests SET finished_jobs = v.column2 FROM (");
            update
                .push_values(chunk, |mut row, (request_id, finished_jobs)| {
                    row.push_bind(*request_id).push_bind(count(*finished_jobs));
                })
                .push(") AS v WHERE request_id = v.column1 AND state = ")
                .push_bind(state_value(State::Running));
            update.build().execute(&mut **tx).await?;
        }
        Ok(())
    }

    /// Runs a conditional update of one request; no row means the request was not in the
    /// state expected (or does not exist), which the error says.
    pub(super) async fn update_request(
        &self,
        query: sqlx::query::Query<'_, DB, DB::Arguments>,
        request_id: &str,
        expected: State,
    ) -> Result<(), Error> {
        let done = query.execute(&self.pool).await?;
        if DB::rows_affected(&done) == 0 {
            return Err(self.state_error(request_id, expected).await);
        }
        Ok(())
    }

    pub(super) async fn hand_over(&self, request_id: &RequestId, expected: State) -> Result<u64, Error> {
        let row = sqlx::query(
            "UPDATE requests SET epoch = epoch + 1 WHERE request_id = $1 AND state = $2 RETURNING epoch",
        )
        .bind(request_id.as_str())
        .bind(state_value(expected))
        .fetch_optional(&self.pool)
        .await?;
        match row {
            Some(row) => Ok(u64::try_from(row.try_get::<i64, _>("epoch")?).unwrap_or(0)),
            None => Err(self.state_error(request_id, expected).await),
        }
    }

    pub(super) async fn start_request(
        &self,
        request_id: &RequestId,
        jr_url: &str,
        owner: Option<&Fence>,
        at: DateTime<Utc>,
    ) -> Result<bool, Error> {
        // Never before it was created: times stay in order whatever the clocks say.
        let query = sqlx::query(
            "UPDATE requests SET state = $4, started_at = CASE WHEN $2 < created_at THEN created_at ELSE $2 END, \
             jr_url = $3, jr_instance = NULLIF($6, ''), error = '' WHERE request_id = $1 AND state = $5 AND ($7 < 0 OR epoch = $7) \
             RETURNING paused",
        )
        .bind(request_id.as_str())
        .bind(micros(at))
        .bind(jr_url)
        .bind(state_value(State::Running))
        .bind(state_value(State::Pending))
        .bind(instance_value(owner))
        .bind(epoch_value(owner));
        match query.fetch_optional(&self.pool).await? {
            Some(row) => Ok(row.try_get::<i32, _>("paused")? != 0),
            None => Err(self.refusal(request_id, owner, State::Pending).await),
        }
    }

    pub(super) async fn set_paused(&self, request_id: &str, paused: bool) -> Result<Request, Error> {
        let updated = sqlx::query(
            "UPDATE requests SET paused = $2 WHERE request_id = $1 AND state IN ($3, $4, $5)",
        )
        .bind(request_id)
        .bind(i32::from(paused))
        .bind(state_value(State::Pending))
        .bind(state_value(State::Running))
        .bind(state_value(State::Suspended))
        .execute(&self.pool)
        .await?;
        if DB::rows_affected(&updated) == 0 {
            return Err(self.state_error(request_id, State::Running).await);
        }
        self.get_request(request_id, false).await
    }

    pub(super) async fn owner(&self, request_id: &str) -> Result<Owner, Error> {
        let row =
            sqlx::query("SELECT state, jr_instance, epoch FROM requests WHERE request_id = $1")
                .bind(request_id)
                .fetch_optional(&self.readers)
                .await?
                .ok_or_else(|| Error::not_found("request", request_id))?;
        Ok(Owner {
            state: state_of(row.try_get("state")?)?,
            instance: row
                .try_get::<Option<String>, _>("jr_instance")?
                .unwrap_or_default(),
            epoch: u64::try_from(row.try_get::<i64, _>("epoch")?).unwrap_or(0),
        })
    }

    pub(super) async fn fail_pending(&self, request_id: &str, at: DateTime<Utc>) -> Result<(), Error> {
        let query = sqlx::query(
            "UPDATE requests SET state = $3, finished_at = CASE WHEN $2 < created_at THEN created_at ELSE $2 END, \
             jr_url = NULL WHERE request_id = $1 AND state = $4",
        )
        .bind(request_id)
        .bind(micros(at))
        .bind(state_value(State::Fail))
        .bind(state_value(State::Pending));
        self.update_request(query, request_id, State::Pending).await
    }

    pub(super) async fn set_waiting(&self, request_id: &str, why: &str) -> Result<(), Error> {
        sqlx::query("UPDATE requests SET error = $2 WHERE request_id = $1 AND state = $3")
            .bind(request_id)
            .bind(why)
            .bind(state_value(State::Pending))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub(super) async fn finish_request(
        &self,
        finish: &FinishRequest,
        fence: Option<&Fence>,
    ) -> Result<Finished, Error> {
        if !finish.state.is_finished() {
            return Err(Error::Invalid(format!(
                "final state {} is not a final state; expected COMPLETE, FAIL or STOPPED",
                finish.state
            )));
        }
        // Never before it started (a Job Runner's clock may be behind).
        let done = sqlx::query(
            "UPDATE requests SET state = $2, \
             finished_at = CASE WHEN $3 < started_at THEN started_at ELSE $3 END, \
             finished_jobs = $4, jr_url = NULL, error = $8 WHERE request_id = $1 AND state = $5 \
             AND ($6 < 0 OR (epoch = $6 AND (jr_instance IS NULL OR jr_instance = $7)))",
        )
        .bind(finish.request_id.as_str())
        .bind(state_value(finish.state))
        .bind(micros(finish.finished_at))
        .bind(count(finish.finished_jobs))
        .bind(state_value(State::Running))
        .bind(epoch_value(fence))
        .bind(instance_value(fence))
        .bind(finish.error.as_str())
        .execute(&self.pool)
        .await?;
        // Its started tries go with the same statement (a trigger: migrations 0009/0010).
        if DB::rows_affected(&done) == 1 {
            return Ok(Finished::Now);
        }
        match self
            .refusal(&finish.request_id, fence, State::Running)
            .await
        {
            Error::State { actual, .. } if actual.is_finished() => Ok(Finished::Already(actual)),
            err => Err(err),
        }
    }

    pub(super) async fn update_progress(&self, request_id: &str, finished_jobs: u64) -> Result<(), Error> {
        sqlx::query(UPDATE_PROGRESS)
            .bind(request_id)
            .bind(count(finished_jobs))
            .bind(state_value(State::Running))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub(super) async fn update_progress_many(&self, updates: &[(String, u64)]) -> Result<(), Error> {
        let mut tx = self.pool.begin().await?;
        for (request_id, finished_jobs) in updates {
            sqlx::query(UPDATE_PROGRESS)
                .bind(request_id.as_str())
                .bind(count(*finished_jobs))
                .bind(state_value(State::Running))
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}
