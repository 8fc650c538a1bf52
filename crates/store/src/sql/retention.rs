//! Removing finished requests past the retention, in small batches, one Request Manager
//! at a time.

use super::*;

impl<DB: Backend> SqlStore<DB> {
    pub(crate) async fn remove_finished(
        &self,
        before: DateTime<Utc>,
        limit: u64,
    ) -> Result<Removed, Error> {
        let mut tx = self.pool.begin().await?;
        if let Some(lock) = DB::RETENTION_LOCK_SQL
            && Statement::new(lock)
                .fetch_optional(&mut tx)
                .await?
                .is_none()
        {
            return Ok(Removed::default());
        }
        // A month wholly past the cut-off, its partitions dropped (PostgreSQL, MySQL).
        if let Some(removed) = self.drop_month(&mut tx, before).await? {
            tx.commit().await?;
            return Ok(removed);
        }
        let ids: Vec<String> = Statement::new(
            "SELECT request_id FROM requests WHERE state IN ($1, $2, $3) AND finished_at < $4 \
             ORDER BY finished_at LIMIT $5",
        )
        .bind(state_value(State::Complete))
        .bind(state_value(State::Fail))
        .bind(state_value(State::Stopped))
        .bind(micros(before))
        .bind(i64::try_from(limit.max(1)).unwrap_or(i64::MAX))
        .fetch_all(&mut tx)
        .await?
        .iter()
        .map(|row| row.read("request_id"))
        .collect::<Result<_, _>>()?;
        let mut removed = Removed::default();
        if !ids.is_empty() {
            for table in REQUEST_TABLES {
                let mut delete =
                    Statement::build(format!("DELETE FROM {table} WHERE request_id IN ("));
                delete.push_list(ids.iter().map(String::as_str)).push(")");
                let n = DB::rows_affected(&delete.execute(&mut tx).await?);
                match table {
                    "job_log" => removed.job_log_entries = n,
                    "requests" => removed.requests = n,
                    _ => {}
                }
            }
        }
        // Notifications about no request (a runner's loss), sent or given up on.
        Statement::new(
            "DELETE FROM notifications WHERE request_id = '' AND status <> $1 AND done_at < $2",
        )
        .bind("pending")
        .bind(micros(before))
        .execute(&mut tx)
        .await?;
        // Runners that ended or were lost before the cut-off, with nothing left to own.
        let runners = Statement::new(
            "DELETE FROM job_runners WHERE COALESCE(ended_at, lost_at) < $1 \
             AND instance_id NOT IN (SELECT jr_instance FROM requests WHERE jr_instance IS NOT NULL AND state = $2)",
        )
        .bind(micros(before))
        .bind(state_value(State::Running))
        .execute(&mut tx)
        .await?;
        removed.job_runners = DB::rows_affected(&runners);
        tx.commit().await?;
        Ok(removed)
    }
}
