//! Requests of another system's history stored as they ended there (`spindle import
//! spincycle`): the rows of `requests`, `request_archives`, `request_args`, `job_log` and
//! `suspended_job_chains` of a batch, in one transaction.

use super::*;

impl<DB: Backend> SqlStore<DB> {
    pub(crate) async fn import_requests(
        &self,
        imports: &[ImportedRequest],
    ) -> Result<Vec<String>, Error> {
        if imports.is_empty() {
            return Ok(Vec::new());
        }
        // Their months' partitions (PostgreSQL), where they can be made; else their
        // rows go to the default partitions.
        let ids = imports.iter().map(|import| import.request.id.as_str());
        if let Err(err) = self.make_months_of(ids).await {
            tracing::warn!(error = %err, "an import's month partitions could not be made");
        }
        let mut tx = self.pool.begin().await?;
        // Stored already (an earlier run): skipped whole. The rows are locked, so that
        // a request removed meanwhile is not imported half.
        let mut stored = std::collections::HashSet::new();
        for chunk in imports.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let ids = chunk.iter().map(|import| import.request.id.as_str());
            let rows = Self::requests_in("SELECT request_id FROM requests", ids, DB::LOCK_ROWS)
                .fetch_all(&mut tx)
                .await?;
            for row in rows {
                stored.insert(row.read::<String>("request_id")?);
            }
        }
        let mut seen = std::collections::HashSet::new();
        let new: Vec<&ImportedRequest> = imports
            .iter()
            .filter(|import| !stored.contains(&import.request.id))
            .filter(|import| seen.insert(import.request.id.as_str()))
            .collect();
        // None of them is stored (they were looked for, locked, in this transaction): in
        // bulk, without looking for each row's key again.
        let requests: Vec<&Request> = new.iter().map(|import| &import.request).collect();
        request_rows(&requests).by_copy().execute(&mut tx).await?;
        let archived: Vec<requests::Archived<'_>> = new
            .iter()
            .map(|import| (&import.request, &import.create_request, None))
            .collect();
        Self::archive_new_in(&mut tx, &archived).await?;
        Self::insert_new_logs_in(&mut tx, new.iter().flat_map(|import| &import.job_logs)).await?;
        let mut suspended = Vec::new();
        for import in &new {
            if let Some((chain, at)) = &import.suspended {
                suspended.push((
                    import.request.id.as_str(),
                    to_json("suspended job chain", chain)?,
                    micros(*at),
                ));
            }
        }
        for chunk in suspended.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let mut insert = Statement::build(
                "INSERT INTO suspended_job_chains (request_id, suspended_job_chain, rm_host, updated_at, suspended_at) VALUES ",
            );
            insert.push_rows(chunk, |(id, chain, at)| {
                vec![
                    (*id).into(),
                    chain.as_str().into(),
                    None::<&str>.into(),
                    (*at).into(),
                    (*at).into(),
                ]
            });
            insert.execute(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(new.iter().map(|import| import.request.id.clone()).collect())
    }
}

/// The rows of `requests` of requests stored as they ended elsewhere (epoch 1: no runner
/// of this Spindle has owned them).
fn request_rows<'q>(requests: &[&'q Request]) -> InsertRows<'q> {
    let text = |value: fn(&Request) -> &str| {
        Values::Text(requests.iter().map(|request| value(request)).collect())
    };
    let big = |value: fn(&Request) -> u64| {
        Values::Big(
            requests
                .iter()
                .map(|request| count(value(request)))
                .collect(),
        )
    };
    let time = |value: fn(&Request) -> Option<DateTime<Utc>>| {
        Values::MaybeBig(
            requests
                .iter()
                .map(|request| value(request).map(micros))
                .collect(),
        )
    };
    InsertRows::new(
        "requests",
        "request_id, type, state, user_name, created_at, started_at, finished_at, total_jobs, own_jobs, finished_jobs, epoch, error",
    )
    .column(text(|request| &request.id))
    .column(text(|request| &request.request_type))
    .column(Values::Small(
        requests.iter().map(|request| state_value(request.state)).collect(),
    ))
    .column(text(|request| &request.user))
    .column(Values::Big(
        requests.iter().map(|request| micros(request.created_at)).collect(),
    ))
    .column(time(|request| request.started_at))
    .column(time(|request| request.finished_at))
    .column(big(|request| request.total_jobs))
    .column(big(|request| request.own_jobs))
    .column(big(|request| request.finished_jobs))
    .column(Values::Big(vec![1; requests.len()]))
    .column(text(|request| &request.error))
}
