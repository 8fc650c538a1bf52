//! The `approval_answers` table: answers to approval jobs.

use super::*;

impl<DB: Backend> SqlStore<DB> {
    pub(crate) async fn add_answer(
        &self,
        request_id: &str,
        job_id: &str,
        answer: &proto::Answer,
    ) -> Result<bool, Error> {
        let at = DateTime::parse_from_rfc3339(&answer.at)
            .map(|at| at.with_timezone(&Utc))
            .map_err(|err| Error::Invalid(format!("answer time {:?}: {err}", answer.at)))?;
        let done = Statement::new(
            "INSERT INTO approvals (request_id, job_id, approved, user_name, at, comment) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(request_id)
        .bind(job_id)
        .bind(i32::from(answer.approved))
        .bind(answer.user.as_str())
        .bind(micros(at))
        .bind(answer.comment.as_str())
        .skip_duplicates("request_id, job_id")
        .execute(&self.pool)
        .await?;
        Ok(DB::rows_affected(&done) == 1)
    }

    pub(crate) async fn answers(
        &self,
        request_id: &str,
    ) -> Result<Vec<(String, proto::Answer)>, Error> {
        let sql = "SELECT job_id, approved, user_name, at, comment FROM approvals WHERE request_id = $1 ORDER BY job_id";
        let rows = self.rows_of_request(sql, request_id).await?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.read("job_id")?,
                    proto::Answer {
                        approved: row.read::<i32>("approved")? != 0,
                        user: row.read("user_name")?,
                        at: from_micros(row.read("at")?)
                            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                        comment: row.read("comment")?,
                    },
                ))
            })
            .collect()
    }

    pub(crate) async fn remove_answers(
        &self,
        request_id: &str,
        job_ids: &[String],
    ) -> Result<(), Error> {
        for job_id in job_ids {
            Statement::new("DELETE FROM approvals WHERE request_id = $1 AND job_id = $2")
                .bind(request_id)
                .bind(job_id.as_str())
                .execute(&self.pool)
                .await?;
        }
        Ok(())
    }
}
