//! The `schedule_runs` table: which Request Manager starts a schedule's firing.

use super::*;

impl<DB: Backend> SqlStore<DB> {
    pub(crate) async fn claim_schedule_run(
        &self,
        schedule: &str,
        due_at: DateTime<Utc>,
        host: &str,
    ) -> Result<bool, Error> {
        let done = Statement::new(
            "INSERT INTO schedule_runs (schedule, due_at, rm_host) VALUES ($1, $2, $3)",
        )
        .bind(schedule)
        .bind(micros(due_at))
        .bind(host)
        .skip_duplicates("schedule, due_at")
        .execute(&self.pool)
        .await?;
        Ok(DB::rows_affected(&done) == 1)
    }

    pub(crate) async fn schedule_run_done(
        &self,
        schedule: &str,
        due_at: DateTime<Utc>,
        request_id: &str,
        skipped: &str,
    ) -> Result<(), Error> {
        Statement::new(
            "UPDATE schedule_runs SET request_id = NULLIF($3, ''), skipped = $4 \
             WHERE schedule = $1 AND due_at = $2",
        )
        .bind(schedule)
        .bind(micros(due_at))
        .bind(request_id)
        .bind(skipped)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub(crate) async fn schedule_runs(
        &self,
        schedule: &str,
        limit: u32,
    ) -> Result<Vec<proto::ScheduleRun>, Error> {
        let rows = Statement::new(
            "SELECT due_at, rm_host, request_id, skipped FROM schedule_runs \
             WHERE schedule = $1 ORDER BY due_at DESC LIMIT $2",
        )
        .bind(schedule)
        .bind(i64::from(limit))
        .fetch_all(&self.readers)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(proto::ScheduleRun {
                    schedule: schedule.to_owned(),
                    due_at: from_micros(row.read("due_at")?),
                    rm_host: row.read("rm_host")?,
                    request_id: row
                        .read::<Option<String>>("request_id")?
                        .unwrap_or_default(),
                    skipped: row.read("skipped")?,
                })
            })
            .collect()
    }
}
