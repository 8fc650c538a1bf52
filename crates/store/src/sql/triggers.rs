//! The `trigger_deliveries` table: which request each delivery of a trigger created
//! (issue #33), so that a delivery sent again creates nothing.

use super::*;
use crate::Delivery;

impl<DB: Backend> SqlStore<DB> {
    /// Records `delivery` as creating `request_id`, in the transaction that stores that
    /// request. `None` when it is new; else the request it created before (read with its
    /// row locked, so that a delivery committed meanwhile by another transaction is seen).
    pub(super) async fn claim_delivery_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        delivery: &Delivery,
        request_id: &str,
        at: DateTime<Utc>,
    ) -> Result<Option<String>, Error> {
        let inserted = Statement::new(
            "INSERT INTO trigger_deliveries (trigger_name, delivery_id, request_id, received_at) \
             VALUES ($1, $2, $3, $4)",
        )
        .bind(delivery.trigger.as_str())
        .bind(delivery.id.as_str())
        .bind(request_id)
        .bind(micros(at))
        .skip_duplicates("trigger_name, delivery_id")
        .execute(&mut *tx)
        .await?;
        if DB::rows_affected(&inserted) == 1 {
            return Ok(None);
        }
        let row = Statement::build(format!(
            "SELECT request_id FROM trigger_deliveries WHERE trigger_name = $1 AND delivery_id = $2{}",
            DB::LOCK_ROWS
        ))
        .bind(delivery.trigger.as_str())
        .bind(delivery.id.as_str())
        .fetch_one(&mut *tx)
        .await?;
        Ok(Some(row.read("request_id")?))
    }

    pub(crate) async fn trigger_deliveries(
        &self,
        trigger: &str,
        limit: u32,
    ) -> Result<Vec<proto::TriggerDelivery>, Error> {
        let rows = Statement::new(
            "SELECT delivery_id, request_id, received_at FROM trigger_deliveries \
             WHERE trigger_name = $1 ORDER BY received_at DESC, delivery_id LIMIT $2",
        )
        .bind(trigger)
        .bind(i64::from(limit))
        .fetch_all(&self.readers)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(proto::TriggerDelivery {
                    trigger: trigger.to_owned(),
                    delivery_id: row.read("delivery_id")?,
                    request_id: row.read("request_id")?,
                    received_at: from_micros(row.read("received_at")?),
                })
            })
            .collect()
    }

    pub(crate) async fn delivered_request(
        &self,
        trigger: &str,
        delivery_id: &str,
    ) -> Result<Option<String>, Error> {
        let row = Statement::new(
            "SELECT request_id FROM trigger_deliveries WHERE trigger_name = $1 AND delivery_id = $2",
        )
        .bind(trigger)
        .bind(delivery_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| row.read("request_id").map_err(Error::from))
            .transpose()
    }
}
