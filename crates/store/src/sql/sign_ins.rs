//! Single sign-on's sign-ins in flight (`sign_ins`, migration 0100).

use super::*;

impl<DB: Backend> SqlStore<DB> {
    pub(crate) async fn keep_sign_in(
        &self,
        state: &str,
        payload: &str,
        at: DateTime<Utc>,
        expired_before: DateTime<Utc>,
    ) -> Result<(), Error> {
        let mut tx = self.pool.begin().await?;
        Statement::new("DELETE FROM sign_ins WHERE began_at < $1")
            .bind(micros(expired_before))
            .execute(&mut tx)
            .await?;
        Statement::new("INSERT INTO sign_ins (state, payload, began_at) VALUES ($1, $2, $3)")
            .bind(state)
            .bind(payload)
            .bind(micros(at))
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    pub(crate) async fn take_sign_in(
        &self,
        state: &str,
        not_before: DateTime<Utc>,
    ) -> Result<Option<String>, Error> {
        let mut tx = self.pool.begin().await?;
        let row = Statement::build(format!(
            "SELECT payload, began_at FROM sign_ins WHERE state = $1{}",
            DB::LOCK_ROWS
        ))
        .bind(state)
        .fetch_optional(&mut tx)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        // Whoever deletes it takes it: two callbacks with one state, one sign-in.
        let deleted = Statement::new("DELETE FROM sign_ins WHERE state = $1")
            .bind(state)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        let began_at: i64 = row.read("began_at")?;
        if DB::rows_affected(&deleted) != 1 || began_at < micros(not_before) {
            return Ok(None);
        }
        Ok(Some(row.read("payload")?))
    }
}
