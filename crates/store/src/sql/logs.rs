//! The `job_log`, `job_output` and `job_try_starts` tables: what each try of each job did.

use super::*;

/// `entries` in key order (equal keys as they came): a big request's thousands of
/// entries then go into neighbouring pages of the job log's index, one after the other,
/// not all over an index larger than the database's cache.
fn in_key_order<'a>(entries: impl IntoIterator<Item = &'a JobLog>) -> Vec<&'a JobLog> {
    let mut entries: Vec<&JobLog> = entries.into_iter().collect();
    entries.sort_by(|a, b| {
        (a.request_id.as_str(), a.job_id.as_str(), a.r#try).cmp(&(
            b.request_id.as_str(),
            b.job_id.as_str(),
            b.r#try,
        ))
    });
    entries
}

/// The job log's rows of `entries`.
fn log_rows<'q>(entries: &[&'q JobLog]) -> InsertRows<'q> {
    let column =
        |text: fn(&JobLog) -> &str| Values::Text(entries.iter().map(|entry| text(entry)).collect());
    InsertRows::new(
        "job_log",
        "request_id, job_id, try, name, type, state, started_at, finished_at, \"exit\", error, stdout, stderr",
    )
    .column(column(|entry| &entry.request_id))
    .column(column(|entry| &entry.job_id))
    .column(Values::Int(entries.iter().map(|entry| try_value(entry.r#try)).collect()))
    .column(column(|entry| &entry.name))
    .column(column(|entry| &entry.job_type))
    .column(Values::Small(entries.iter().map(|entry| state_value(entry.state)).collect()))
    .column(Values::Big(entries.iter().map(|entry| entry.started_at).collect()))
    .column(Values::Big(entries.iter().map(|entry| entry.finished_at).collect()))
    .column(Values::Big(entries.iter().map(|entry| entry.exit).collect()))
    .column(column(|entry| &entry.error))
    .column(column(|entry| &entry.stdout))
    .column(column(|entry| &entry.stderr))
}

impl<DB: Backend> SqlStore<DB> {
    pub(super) async fn insert_logs_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        entries: &[JobLog],
    ) -> Result<(), Error> {
        let entries = in_key_order(entries);
        log_rows(&entries)
            .skip_duplicates("request_id, job_id, try")
            .execute(&mut *tx)
            .await?;
        Ok(())
    }

    /// The job log `entries` of requests this transaction stores now (none of theirs can
    /// be stored yet): of two entries of one try, the first.
    pub(super) async fn insert_new_logs_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        entries: impl IntoIterator<Item = &JobLog>,
    ) -> Result<(), Error> {
        let mut entries = in_key_order(entries);
        entries.dedup_by(|b, a| {
            (a.request_id.as_str(), a.job_id.as_str(), a.r#try)
                == (b.request_id.as_str(), b.job_id.as_str(), b.r#try)
        });
        log_rows(&entries).by_copy().execute(&mut *tx).await?;
        Ok(())
    }

    pub(super) fn job_log_from_row(row: &DB::Row) -> Result<JobLog, Error> {
        Ok(JobLog {
            request_id: row.read("request_id")?,
            job_id: row.read("job_id")?,
            r#try: u32::try_from(row.read::<i32>("try")?).unwrap_or(0),
            name: row.read("name")?,
            job_type: row.read("type")?,
            started_at: row.read("started_at")?,
            finished_at: row.read("finished_at")?,
            state: state_of(row.read("state")?)?,
            exit: row.read("exit")?,
            error: row.read("error")?,
            stdout: row.read("stdout")?,
            stderr: row.read("stderr")?,
        })
    }

    pub(crate) async fn insert_job_logs(&self, entries: &[JobLog]) -> Result<(), Error> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await?;
        Self::insert_logs_in(&mut tx, entries).await?;
        tx.commit().await?;
        Ok(())
    }

    pub(crate) async fn insert_output(&self, chunks: &[OutputChunk]) -> Result<(), Error> {
        if chunks.is_empty() {
            return Ok(());
        }
        // Per try and stream, how far the output has come.
        let mut ends: std::collections::BTreeMap<(&str, &str, u32, Stream), u64> =
            Default::default();
        for chunk in chunks {
            let end = ends
                .entry((&chunk.request_id, &chunk.job_id, chunk.r#try, chunk.stream))
                .or_default();
            *end = (*end).max(chunk.end());
        }
        let mut tx = self.pool.begin().await?;
        let column =
            |text: fn(&OutputChunk) -> &str| Values::Text(chunks.iter().map(text).collect());
        InsertRows::new(
            "job_output",
            "request_id, job_id, try, stream, byte_offset, byte_len, data",
        )
        .column(column(|chunk| &chunk.request_id))
        .column(column(|chunk| &chunk.job_id))
        .column(Values::Int(
            chunks.iter().map(|chunk| try_value(chunk.r#try)).collect(),
        ))
        .column(Values::Small(
            chunks
                .iter()
                .map(|chunk| stream_value(chunk.stream))
                .collect(),
        ))
        .column(Values::Big(
            chunks.iter().map(|chunk| count(chunk.offset)).collect(),
        ))
        .column(Values::Big(
            chunks
                .iter()
                .map(|chunk| count(chunk.data.len() as u64))
                .collect(),
        ))
        .column(column(|chunk| &chunk.data))
        .skip_duplicates("request_id, job_id, try, stream, byte_offset")
        // Chunks of output text: a thousand a statement, as they always went.
        .rows_per_statement(1000)
        .execute(&mut tx)
        .await?;
        for ((request_id, job_id, try_no, stream), end) in ends {
            let Some(tail_start) = end.checked_sub(proto::OUTPUT_TAIL_BYTES) else {
                continue;
            };
            if tail_start <= proto::OUTPUT_HEAD_BYTES {
                continue;
            }
            Statement::new(
                "DELETE FROM job_output WHERE request_id = $1 AND job_id = $2 AND try = $3 \
                 AND stream = $4 AND byte_offset >= $5 AND byte_offset + byte_len <= $6",
            )
            .bind(request_id)
            .bind(job_id)
            .bind(i32::try_from(try_no).unwrap_or(i32::MAX))
            .bind(stream_value(stream))
            .bind(count(proto::OUTPUT_HEAD_BYTES))
            .bind(count(tail_start))
            .execute(&mut tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub(crate) async fn output(
        &self,
        request_id: &str,
        query: &OutputQuery,
    ) -> Result<Vec<OutputChunk>, Error> {
        let mut select = Statement::build(
            "SELECT seq, request_id, job_id, try, stream, byte_offset, data FROM job_output WHERE request_id = ",
        );
        select.push_param(request_id);
        select.push(" AND seq > ").push_param(query.after);
        if let Some(job_id) = &query.job {
            select.push(" AND job_id = ").push_param(job_id.as_str());
        }
        if let Some(try_no) = query.r#try {
            select
                .push(" AND try = ")
                .push_param(i32::try_from(try_no).unwrap_or(i32::MAX));
        }
        select
            .push(" ORDER BY seq LIMIT ")
            .push_param(i64::from(query.limit.clamp(1, OutputQuery::MAX_LIMIT)));
        let rows = select.fetch_all(&self.readers).await?;
        rows.iter()
            .map(|row| {
                Ok(OutputChunk {
                    seq: row.read("seq")?,
                    request_id: row.read("request_id")?,
                    job_id: row.read("job_id")?,
                    r#try: u32::try_from(row.read::<i32>("try")?).unwrap_or(0),
                    stream: stream_of(row.read("stream")?)?,
                    offset: u64::try_from(row.read::<i64>("byte_offset")?).unwrap_or(0),
                    data: row.read("data")?,
                })
            })
            .collect()
    }

    pub(crate) async fn job_log(&self, request_id: &str) -> Result<Vec<JobLog>, Error> {
        let sql = "SELECT * FROM job_log WHERE request_id = $1 ORDER BY job_id, try";
        let rows = self.rows_of_request(sql, request_id).await?;
        rows.iter().map(Self::job_log_from_row).collect()
    }

    pub(crate) async fn logged_tries(&self, request_id: &str) -> Result<Vec<LoggedTry>, Error> {
        let sql =
            "SELECT job_id, try, state, started_at, finished_at FROM job_log WHERE request_id = $1";
        let rows = self.rows_of_request(sql, request_id).await?;
        rows.iter()
            .map(|row| {
                Ok(LoggedTry {
                    job_id: row.read("job_id")?,
                    r#try: u32::try_from(row.read::<i32>("try")?).unwrap_or(0),
                    state: state_of(row.read("state")?)?,
                    started_at: row.read("started_at")?,
                    finished_at: row.read("finished_at")?,
                })
            })
            .collect()
    }

    pub(crate) async fn latest_job_log(
        &self,
        request_id: &RequestId,
        job_id: &str,
    ) -> Result<JobLog, Error> {
        let row = Statement::new(
            "SELECT * FROM job_log WHERE request_id = $1 AND job_id = $2 ORDER BY try DESC LIMIT 1",
        )
        .bind(request_id.as_str())
        .bind(job_id)
        .fetch_optional(&self.readers)
        .await?
        .ok_or_else(|| Error::NotFound {
            what: "job",
            id: format!("{job_id} of request {request_id}"),
        })?;
        Self::job_log_from_row(&row)
    }

    pub(crate) async fn job_tries_log(
        &self,
        request_id: &str,
        job_id: &str,
    ) -> Result<Vec<JobLog>, Error> {
        let rows = Statement::new(
            "SELECT * FROM job_log WHERE request_id = $1 AND job_id = $2 ORDER BY try",
        )
        .bind(request_id)
        .bind(job_id)
        .fetch_all(&self.readers)
        .await?;
        rows.iter().map(Self::job_log_from_row).collect()
    }

    pub(crate) async fn job_states(&self, request_id: &str) -> Result<Vec<JobState>, Error> {
        self.latest_states(request_id).await
    }

    pub(crate) async fn insert_try_starts(
        &self,
        fence: Option<&Fence>,
        starts: &[TryStart],
    ) -> Result<(), Error> {
        if starts.is_empty() {
            return Ok(());
        }
        let instance = instance_value(fence);
        let mut tx = self.pool.begin().await?;
        if let Some(fence) = fence {
            // The owners' rows locked: a recovery of one of them waits for this, or this
            // sees its new owner and stores nothing.
            let mut ids: Vec<&str> = starts
                .iter()
                .map(|start| start.request_id.as_str())
                .collect();
            ids.sort_unstable();
            ids.dedup();
            let owners = Self::owners_in(&mut tx, &ids, DB::LOCK_ROWS).await?;
            for id in ids {
                match owners.get(id) {
                    None => return Err(Error::not_found("request", id)),
                    Some(owner) if !owner.accepts(fence) => return Err(owner.refusal(id, fence)),
                    Some(_) => {}
                }
            }
        }
        let column = |text: fn(&TryStart) -> &str| Values::Text(starts.iter().map(text).collect());
        let number = |number: fn(&TryStart) -> u32| {
            Values::Int(
                starts
                    .iter()
                    .map(|start| try_value(number(start)))
                    .collect(),
            )
        };
        InsertRows::new(
            "job_tries",
            "request_id, job_id, try, run_try, sequence_try, started_at, jr_instance",
        )
        .column(column(|start| &start.request_id))
        .column(column(|start| &start.job_id))
        .column(number(|start| start.r#try))
        .column(number(|start| start.run_try))
        .column(number(|start| start.sequence_try))
        .column(Values::Big(
            starts.iter().map(|start| start.started_at).collect(),
        ))
        .column(Values::Text(vec![instance; starts.len()]))
        .skip_duplicates("request_id, job_id, try")
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    pub(crate) async fn try_starts(&self, request_id: &str) -> Result<Vec<StartedTry>, Error> {
        let rows = Statement::new(
            "SELECT request_id, job_id, try, run_try, sequence_try, started_at, jr_instance FROM job_tries \
             WHERE request_id = $1 ORDER BY job_id, try",
        )
        .bind(request_id)
        .fetch_all(&self.readers)
        .await?;
        rows.iter().map(Self::started_try_from_row).collect()
    }

    /// A row of `job_tries` (request_id, job_id, try, run_try, sequence_try, started_at,
    /// jr_instance).
    pub(super) fn started_try_from_row(row: &DB::Row) -> Result<StartedTry, Error> {
        let number = |name: &str| -> Result<u32, Error> {
            Ok(u32::try_from(row.read::<i32>(name)?).unwrap_or(0))
        };
        Ok(StartedTry {
            start: TryStart {
                request_id: row.read("request_id")?,
                job_id: row.read("job_id")?,
                r#try: number("try")?,
                run_try: number("run_try")?,
                sequence_try: number("sequence_try")?,
                started_at: row.read("started_at")?,
            },
            instance: row.read("jr_instance")?,
        })
    }
}
