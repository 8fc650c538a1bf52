//! Removing finished requests past the retention, in small batches, one Request Manager
//! at a time.

use super::*;

sql_impl! {
    pub(super) async fn remove_finished(&self, before: DateTime<Utc>, limit: u64) -> Result<Removed, Error> {
        let mut tx = self.pool.begin().await?;
        if let Some(lock) = DB::RETENTION_LOCK_SQL {
            let row = sqlx::query(lock).fetch_one(&mut *tx).await?;
            let got: i32 = row.try_get("got")?;
            if got == 0 {
                return Ok(Removed::default());
            }
        }
        let ids: Vec<String> = sqlx::query(
            "SELECT request_id FROM requests WHERE state IN ($1, $2, $3) AND finished_at < $4 \
             ORDER BY finished_at LIMIT $5",
        )
        .bind(state_value(State::Complete))
        .bind(state_value(State::Fail))
        .bind(state_value(State::Stopped))
        .bind(micros(before))
        .bind(i64::try_from(limit.max(1)).unwrap_or(i64::MAX))
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|row| row.try_get("request_id"))
        .collect::<Result<_, _>>()?;
        let mut removed = Removed::default();
        if !ids.is_empty() {
            let placeholders: Vec<String> = (1..=ids.len()).map(|n| format!("${n}")).collect();
            let list = placeholders.join(", ");
            // Children first: the archive and args refer to the request.
            for table in [
                "job_log",
                "job_output",
                "job_tries",
                "request_args",
                "request_archives",
                "request_audit",
                "approvals",
                "suspended_job_chains",
                "requests",
            ] {
                let sql = format!("DELETE FROM {table} WHERE request_id IN ({list})");
                let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
                for id in &ids {
                    query = query.bind(id.as_str());
                }
                let n = DB::rows_affected(&query.execute(&mut *tx).await?);
                match table {
                    "job_log" => removed.job_log_entries = n,
                    "requests" => removed.requests = n,
                    _ => {}
                }
            }
        }
        // Runners that ended or were lost before the cut-off, with nothing left to own.
        let runners = sqlx::query(
            "DELETE FROM job_runners WHERE COALESCE(ended_at, lost_at) < $1 \
             AND instance_id NOT IN (SELECT jr_instance FROM requests WHERE jr_instance IS NOT NULL AND state = $2)",
        )
        .bind(micros(before))
        .bind(state_value(State::Running))
        .execute(&mut *tx)
        .await?;
        removed.job_runners = DB::rows_affected(&runners);
        tx.commit().await?;
        Ok(removed)
    }
}
