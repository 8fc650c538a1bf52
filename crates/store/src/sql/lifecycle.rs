//! A request's state changes: hand-over (epochs), start, pause, finish, progress; each
//! guarded by the request's state and fence in the same statement.

use super::*;

/// What one hand-over of [`SqlStore::hand_overs_in`] did.
#[derive(Debug)]
pub(super) enum HandedOver {
    /// Handed over at this epoch.
    Epoch(u64),
    /// Not in the state expected: in this one, or unknown (`None`).
    Moved(Option<State>),
    /// A try beyond those the handed chain knows began (or was logged).
    TryBegan { job_id: String, attempt: u32 },
}

impl HandedOver {
    /// As [`crate::Lifecycle::hand_over`] answers it.
    pub(super) fn into_result(self, record: &crate::HandOverRecord) -> Result<u64, Error> {
        let request_id = record.request_id.clone();
        match self {
            HandedOver::Epoch(epoch) => Ok(epoch),
            HandedOver::Moved(None) => Err(Error::not_found("request", &request_id)),
            HandedOver::Moved(Some(actual)) => Err(Error::State {
                request_id,
                actual,
                expected: record.expected,
            }),
            HandedOver::TryBegan { job_id, attempt } => Err(Error::TryBegan {
                request_id,
                job_id,
                attempt,
            }),
        }
    }
}

impl<DB: Backend> SqlStore<DB> {
    /// The owners of `request_ids`, read in `tx`; with `lock` (`DB::LOCK_ROWS`) their
    /// rows stay locked until it ends.
    pub(super) async fn owners_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        request_ids: &[&str],
        lock: &'static str,
    ) -> Result<HashMap<String, Owner>, Error> {
        let mut owners = HashMap::new();
        for chunk in request_ids.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let select = Self::requests_in(
                "SELECT request_id, state, jr_instance, epoch FROM requests",
                chunk.iter().copied(),
                lock,
            );
            for row in select.fetch_all(&mut *tx).await? {
                owners.insert(
                    row.read("request_id")?,
                    Owner {
                        state: state_of(row.read("state")?)?,
                        instance: row
                            .read::<Option<String>>("jr_instance")?
                            .unwrap_or_default(),
                        epoch: u64::try_from(row.read::<i64>("epoch")?).unwrap_or(0),
                    },
                );
            }
        }
        Ok(owners)
    }

    /// Runs `update` of many requests and answers `columns` of each row it changed, as
    /// changed: with `RETURNING` where the database has it; else the rows are locked
    /// and named first, then updated, then read, all in `tx`.
    pub(super) async fn update_requests(
        tx: &mut sqlx::Transaction<'_, DB>,
        update: ValuesUpdate<'_>,
        columns: &str,
    ) -> Result<Vec<DB::Row>, Error> {
        if DB::UPDATE_RETURNING {
            let mut statement = update.statement::<DB>();
            statement.push(" RETURNING ").push(columns);
            return Ok(statement.fetch_all(&mut *tx).await?);
        }
        let locked = update
            .select_for_update::<DB>("requests.request_id")
            .fetch_all(&mut *tx)
            .await?;
        let ids = locked
            .iter()
            .map(|row| row.read::<String>("request_id"))
            .collect::<Result<Vec<_>, _>>()?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        update.statement::<DB>().execute(&mut *tx).await?;
        let select = Self::requests_in(
            &format!("SELECT {columns} FROM requests"),
            ids.iter().map(String::as_str),
            "",
        );
        Ok(select.fetch_all(&mut *tx).await?)
    }

    /// Runs `update` of the one request `request_id` and answers `columns` of its row as
    /// changed, or `None` when it matched no row; as [`SqlStore::update_requests`].
    pub(super) async fn update_request_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        mut update: Statement<'_>,
        columns: &str,
        request_id: &str,
    ) -> Result<Option<DB::Row>, Error> {
        if DB::UPDATE_RETURNING {
            update.push(" RETURNING ").push(columns);
            return Ok(update.fetch_optional(&mut *tx).await?);
        }
        let done = update.execute(&mut *tx).await?;
        if DB::rows_affected(&done) == 0 {
            return Ok(None);
        }
        let read = Statement::build(format!(
            "SELECT {columns} FROM requests WHERE request_id = $1"
        ))
        .bind(request_id);
        Ok(Some(read.fetch_one(&mut *tx).await?))
    }

    /// [`SqlStore::update_request_in`] on its own: one statement where the database
    /// has `RETURNING`, else a transaction of its own.
    pub(super) async fn update_request_returning(
        &self,
        mut update: Statement<'_>,
        columns: &str,
        request_id: &str,
    ) -> Result<Option<DB::Row>, Error> {
        if !DB::UPDATE_RETURNING {
            let mut tx = self.pool.begin().await?;
            let row = Self::update_request_in(&mut tx, update, columns, request_id).await?;
            tx.commit().await?;
            return Ok(row);
        }
        update.push(" RETURNING ").push(columns);
        Ok(update.fetch_optional(&self.pool).await?)
    }

    /// PENDING → RUNNING for many requests in one statement per chunk; returns, per
    /// start, whether it is paused if it started.
    pub(super) async fn start_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        starts: &[StartRequest],
    ) -> Result<Vec<Option<bool>>, Error> {
        let mut started = HashMap::new();
        for chunk in starts.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let mut update =
                ValuesUpdate::new("requests", "request_id = v.column1", chunk, |start| {
                    vec![
                        start.request_id.as_str().into(),
                        micros(start.at).into(),
                        start.jr_url.as_str().into(),
                        instance_value(start.owner.as_ref()).into(),
                        epoch_value(start.owner.as_ref()).into(),
                    ]
                });
            // As start_request: never before it was created; only at the hand-over's epoch.
            let running = update.param(state_value(State::Running));
            let pending = update.param(state_value(State::Pending));
            update.set = format!(
                "state = {running}, started_at = CASE WHEN v.column2 < created_at THEN created_at ELSE v.column2 END, \
                 jr_url = v.column3, jr_instance = NULLIF(v.column4, ''), error = ''"
            );
            update.filter = format!("state = {pending} AND (v.column5 < 0 OR epoch = v.column5)");
            for row in Self::update_requests(tx, update, "request_id, paused").await? {
                started.insert(
                    row.read::<String>("request_id")?,
                    row.read::<i32>("paused")? != 0,
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
            let mut update = ValuesUpdate::new(
                "requests",
                "request_id = v.column1",
                chunk,
                |(finish, fence)| {
                    vec![
                        finish.request_id.as_str().into(),
                        state_value(finish.state).into(),
                        micros(finish.finished_at).into(),
                        count(finish.finished_jobs).into(),
                        finish.error.as_str().into(),
                        epoch_value(fence.as_ref()).into(),
                        instance_value(fence.as_ref()).into(),
                    ]
                },
            );
            // As finish_request: never before it started; only from the owner.
            let running = update.param(state_value(State::Running));
            update.set = "state = v.column2, \
                 finished_at = CASE WHEN v.column3 < started_at THEN started_at ELSE v.column3 END, \
                 finished_jobs = v.column4, jr_url = NULL, error = v.column5"
                .to_owned();
            update.filter = format!(
                "state = {running} \
                 AND (v.column6 < 0 OR (epoch = v.column6 AND (jr_instance IS NULL OR jr_instance = v.column7)))"
            );
            let rows = Self::update_requests(
                tx,
                update,
                "request_id, type, state, user_name, created_at, started_at, finished_at, \
                 total_jobs, own_jobs, finished_jobs, jr_url, error, paused, spec_version",
            )
            .await?;
            for row in rows {
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
            let mut update = ValuesUpdate::new(
                "requests",
                "request_id = v.column1",
                chunk,
                |(request_id, finished_jobs)| {
                    vec![(*request_id).into(), count(*finished_jobs).into()]
                },
            );
            let running = update.param(state_value(State::Running));
            update.set = "finished_jobs = v.column2".to_owned();
            update.filter = format!("state = {running}");
            update.statement::<DB>().execute(&mut *tx).await?;
        }
        Ok(())
    }

    /// Runs a conditional update of one request; no row means the request was not in the
    /// state expected (or does not exist), which the error says.
    pub(super) async fn update_request(
        &self,
        query: Statement<'_>,
        request_id: &str,
        expected: State,
    ) -> Result<(), Error> {
        let done = query.execute(&self.pool).await?;
        if DB::rows_affected(&done) == 0 {
            return Err(self.state_error(request_id, expected).await);
        }
        Ok(())
    }

    /// A hand-over of a PENDING or SUSPENDED request: its new epoch fences off whichever
    /// runner had it, but only if no try of it began under the old one beyond what the
    /// handed chain knows (`known_tries`). Checked with the row locked (a try start and a
    /// job log entry lock it too): a try that began would be run again under its number
    /// by the next runner, its start stored once (the chaos test with partitions: a
    /// hand-over or a resume whose answer was lost, the request offered again).
    pub(crate) async fn hand_over(
        &self,
        request_id: &RequestId,
        expected: State,
        known_tries: &BTreeMap<String, u32>,
    ) -> Result<u64, Error> {
        let record = crate::HandOverRecord {
            request_id: request_id.to_string(),
            expected,
            known_tries: known_tries.clone(),
        };
        let mut tx = self.pool.begin().await?;
        let done = Self::hand_overs_in(&mut tx, std::slice::from_ref(&record)).await?;
        let done = done.into_iter().next().expect("one hand-over, one answer");
        if matches!(done, HandedOver::Epoch(_)) {
            tx.commit().await?;
        } else {
            drop(tx);
        }
        done.into_result(&record)
    }

    /// Hand-overs of many requests in `tx` (a group commit's, or one alone), each as
    /// [`Self::hand_over`], their rows locked together: one statement reads (and locks)
    /// them all, one reads the epochs their suspended chains were stored at, one raises
    /// the epochs of those handed over.
    pub(super) async fn hand_overs_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        records: &[crate::HandOverRecord],
    ) -> Result<Vec<HandedOver>, Error> {
        // Locked in one order, as the batch's fences lock theirs.
        let mut ids: Vec<&str> = records.iter().map(|r| r.request_id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        let owners = Self::owners_in(tx, &ids, DB::LOCK_ROWS).await?;
        let suspended: Vec<&str> = records
            .iter()
            .filter(|r| r.expected == State::Suspended)
            .filter(|r| {
                owners
                    .get(&r.request_id)
                    .is_some_and(|o| o.state == r.expected)
            })
            .map(|r| r.request_id.as_str())
            .collect();
        // A suspended chain stored at this epoch was handed out by nobody since: no
        // runner holds the epoch but one that suspended it (stopped, its tries in the
        // chain or, Spin Cycle's runners, a stopped try given back to run again under
        // its number), so there is nothing to check.
        let mut stored_at: HashMap<String, i64> = HashMap::new();
        for chunk in suspended.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let select = Self::requests_in(
                "SELECT request_id, epoch FROM suspended_job_chains",
                chunk.iter().copied(),
                "",
            );
            for row in select.fetch_all(&mut *tx).await? {
                stored_at.insert(row.read("request_id")?, row.read("epoch")?);
            }
        }
        let mut done = Vec::with_capacity(records.len());
        // The epochs raised so far in `tx` (a request handed over twice in one batch is
        // handed over at the next epoch again, as one transaction after the other).
        let mut raised: HashMap<&str, u64> = HashMap::new();
        let (mut raise, mut again) = (Vec::new(), Vec::new());
        for record in records {
            let id = record.request_id.as_str();
            let owner = match owners.get(id) {
                Some(owner) if owner.state == record.expected => owner,
                other => {
                    done.push(HandedOver::Moved(other.map(|o| o.state)));
                    continue;
                }
            };
            let epoch = raised.get(id).copied().unwrap_or(owner.epoch);
            let unrecorded = stored_at
                .get(id)
                .is_none_or(|stored| u64::try_from(*stored).ok() != Some(epoch));
            let began = if unrecorded {
                Self::try_beyond(tx, id, &record.known_tries).await?
            } else {
                None
            };
            match began {
                Some((job_id, attempt)) => done.push(HandedOver::TryBegan { job_id, attempt }),
                None => {
                    // Its row is locked: the epoch read is the one raised.
                    if raised.insert(id, epoch + 1).is_none() {
                        raise.push(id);
                    } else {
                        again.push(id);
                    }
                    done.push(HandedOver::Epoch(epoch + 1));
                }
            }
        }
        for chunk in raise.chunks(REQUEST_ROWS_PER_STATEMENT) {
            Self::requests_in(
                "UPDATE requests SET epoch = epoch + 1",
                chunk.iter().copied(),
                "",
            )
            .execute(&mut *tx)
            .await?;
        }
        for id in again {
            Statement::new("UPDATE requests SET epoch = epoch + 1 WHERE request_id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        Ok(done)
    }

    /// The first try of `request_id` that began or was logged beyond `known_tries`, with
    /// its job (read in `tx`, the request's row locked).
    async fn try_beyond(
        tx: &mut sqlx::Transaction<'_, DB>,
        request_id: &str,
        known_tries: &BTreeMap<String, u32>,
    ) -> Result<Option<(String, u32)>, Error> {
        for sql in [
            "SELECT job_id, MAX(try) AS try FROM job_tries WHERE request_id = $1 GROUP BY job_id",
            "SELECT job_id, MAX(try) AS try FROM job_log WHERE request_id = $1 GROUP BY job_id",
        ] {
            let rows = Statement::new(sql)
                .bind(request_id)
                .fetch_all(&mut *tx)
                .await?;
            for row in &rows {
                let job_id: String = row.read("job_id")?;
                let attempt = u32::try_from(row.read::<i32>("try")?).unwrap_or(0);
                if attempt > known_tries.get(&job_id).copied().unwrap_or(0) {
                    return Ok(Some((job_id, attempt)));
                }
            }
        }
        Ok(None)
    }

    pub(crate) async fn start_request(
        &self,
        request_id: &RequestId,
        jr_url: &str,
        owner: Option<&Fence>,
        at: DateTime<Utc>,
    ) -> Result<bool, Error> {
        // Never before it was created: times stay in order whatever the clocks say.
        let update = Statement::new(
            "UPDATE requests SET state = $4, started_at = CASE WHEN $2 < created_at THEN created_at ELSE $2 END, \
             jr_url = $3, jr_instance = NULLIF($6, ''), error = '' WHERE request_id = $1 AND state = $5 AND ($7 < 0 OR epoch = $7)",
        )
        .bind(request_id.as_str())
        .bind(micros(at))
        .bind(jr_url)
        .bind(state_value(State::Running))
        .bind(state_value(State::Pending))
        .bind(instance_value(owner))
        .bind(epoch_value(owner));
        match self
            .update_request_returning(update, "paused", request_id)
            .await?
        {
            Some(row) => Ok(row.read::<i32>("paused")? != 0),
            None => Err(self.refusal(request_id, owner, State::Pending).await),
        }
    }

    pub(crate) async fn set_paused(
        &self,
        request_id: &str,
        paused: bool,
    ) -> Result<Request, Error> {
        let updated = Statement::new(
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

    pub(crate) async fn owner(&self, request_id: &str) -> Result<Owner, Error> {
        let row =
            Statement::new("SELECT state, jr_instance, epoch FROM requests WHERE request_id = $1")
                .bind(request_id)
                .fetch_optional(&self.readers)
                .await?
                .ok_or_else(|| Error::not_found("request", request_id))?;
        Ok(Owner {
            state: state_of(row.read("state")?)?,
            instance: row
                .read::<Option<String>>("jr_instance")?
                .unwrap_or_default(),
            epoch: u64::try_from(row.read::<i64>("epoch")?).unwrap_or(0),
        })
    }

    pub(crate) async fn fail_pending(
        &self,
        request_id: &str,
        at: DateTime<Utc>,
    ) -> Result<(), Error> {
        self.end_pending(request_id, State::Fail, at).await
    }

    pub(crate) async fn stop_pending(
        &self,
        request_id: &str,
        at: DateTime<Utc>,
    ) -> Result<(), Error> {
        self.end_pending(request_id, State::Stopped, at).await
    }

    /// Ends a PENDING request in `state` (FAIL or STOPPED), which releases its locks.
    async fn end_pending(
        &self,
        request_id: &str,
        state: State,
        at: DateTime<Utc>,
    ) -> Result<(), Error> {
        let query = Statement::new(
            "UPDATE requests SET state = $3, finished_at = CASE WHEN $2 < created_at THEN created_at ELSE $2 END, \
             jr_url = NULL WHERE request_id = $1 AND state = $4",
        )
        .bind(request_id)
        .bind(micros(at))
        .bind(state_value(state))
        .bind(state_value(State::Pending));
        self.update_request(query, request_id, State::Pending).await
    }

    pub(crate) async fn set_waiting(&self, request_id: &str, why: &str) -> Result<(), Error> {
        Statement::new(
            "UPDATE requests SET error = $2 WHERE request_id = $1 AND state IN ($3, $4)",
        )
        .bind(request_id)
        .bind(why)
        .bind(state_value(State::Pending))
        .bind(state_value(State::Suspended))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub(crate) async fn finish_request(
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
        let done = Statement::new(
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

    pub(crate) async fn update_progress(
        &self,
        request_id: &str,
        finished_jobs: u64,
    ) -> Result<(), Error> {
        Statement::new(UPDATE_PROGRESS)
            .bind(request_id)
            .bind(count(finished_jobs))
            .bind(state_value(State::Running))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub(crate) async fn update_progress_many(
        &self,
        updates: &[(String, u64)],
    ) -> Result<(), Error> {
        let mut tx = self.pool.begin().await?;
        for (request_id, finished_jobs) in updates {
            Statement::new(UPDATE_PROGRESS)
                .bind(request_id.as_str())
                .bind(count(*finished_jobs))
                .bind(state_value(State::Running))
                .execute(&mut tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}
