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
        for chunk in new.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let mut insert = Statement::build(
                "INSERT INTO requests (request_id, type, state, user_name, created_at, started_at, finished_at, total_jobs, own_jobs, finished_jobs, epoch, error) VALUES ",
            );
            insert.push_rows(chunk, |import| {
                let request = &import.request;
                let mut row = super::requests::request_row_head(request);
                row.extend([
                    request.started_at.map(micros).into(),
                    request.finished_at.map(micros).into(),
                    count(request.total_jobs).into(),
                    count(request.own_jobs).into(),
                    count(request.finished_jobs).into(),
                    1_i64.into(),
                    request.error.as_str().into(),
                ]);
                row
            });
            insert.execute(&mut tx).await?;
        }
        let archived: Vec<(&Request, &CreateRequest)> = new
            .iter()
            .map(|import| (&import.request, &import.create_request))
            .collect();
        Self::archive_in(&mut tx, &archived).await?;
        let logs: Vec<JobLog> = new
            .iter()
            .flat_map(|import| import.job_logs.iter().cloned())
            .collect();
        Self::insert_logs_in(&mut tx, &logs).await?;
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
