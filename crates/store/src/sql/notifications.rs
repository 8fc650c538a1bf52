//! The notifications' outbox (issue #33): `notification_events`, filled by the schema's
//! triggers in the transactions that end requests and lose runners, fanned out into
//! `notifications`, one row per webhook, each sent until delivered or given up on.

use super::*;
use crate::notifications::{
    Attempt, ClaimedNotification, FannedOut, NotificationEvent, NotificationFilter,
};

const PENDING: &str = "pending";
const DELIVERED: &str = "delivered";
const FAILED: &str = "failed";

impl<DB: Backend> SqlStore<DB> {
    pub(crate) async fn add_notification_event(
        &self,
        event: &str,
        request_id: &str,
        subject: &str,
        at: DateTime<Utc>,
    ) -> Result<(), Error> {
        Statement::new(
            "INSERT INTO notification_events (event, request_id, subject, at) VALUES ($1, $2, $3, $4)",
        )
        .bind(event)
        .bind(request_id)
        .bind(subject)
        .bind(micros(at))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub(crate) async fn notification_events(
        &self,
        limit: u32,
    ) -> Result<Vec<NotificationEvent>, Error> {
        let rows = Statement::new(
            "SELECT seq, event, request_id, subject, at FROM notification_events ORDER BY seq LIMIT $1",
        )
        .bind(i64::from(limit.max(1)))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(NotificationEvent {
                    seq: row.read("seq")?,
                    event: row.read("event")?,
                    request_id: row.read("request_id")?,
                    subject: row.read("subject")?,
                    at: from_micros(row.read("at")?),
                })
            })
            .collect()
    }

    /// Each event deleted and, if this transaction deleted it (another Request Manager
    /// fanning out the same event at once deletes nothing), its notifications inserted.
    pub(crate) async fn fan_out(&self, fanned: &[FannedOut]) -> Result<u64, Error> {
        let mut tx = self.pool.begin().await?;
        let mut done = 0;
        // Events nobody asked for (all of them, without webhooks): deleted at once.
        let unwanted: Vec<i64> = fanned
            .iter()
            .filter(|event| event.notifications.is_empty())
            .map(|event| event.seq)
            .collect();
        for chunk in unwanted.chunks(500) {
            let mut delete = Statement::build("DELETE FROM notification_events WHERE seq IN (");
            delete.push_list(chunk.iter().copied()).push(")");
            let deleted = delete.execute(&mut tx).await?;
            done += DB::rows_affected(&deleted);
        }
        for event in fanned
            .iter()
            .filter(|event| !event.notifications.is_empty())
        {
            let deleted = Statement::new("DELETE FROM notification_events WHERE seq = $1")
                .bind(event.seq)
                .execute(&mut tx)
                .await?;
            if DB::rows_affected(&deleted) != 1 {
                continue;
            }
            done += 1;
            for notification in &event.notifications {
                let at = micros(notification.at);
                Statement::new(
                    "INSERT INTO notifications (delivery_id, webhook, event, request_id, subject, body, \
                     status, attempts, created_at, next_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8, $8)",
                )
                .bind(notification.delivery_id.as_str())
                .bind(notification.webhook.as_str())
                .bind(notification.event.as_str())
                .bind(notification.request_id.as_str())
                .bind(notification.subject.as_str())
                .bind(notification.body.as_str())
                .bind(PENDING)
                .bind(at)
                .execute(&mut tx)
                .await?;
            }
        }
        tx.commit().await?;
        Ok(done)
    }

    /// Pending notifications due by `now`, claimed for `host` until `until`: each by a
    /// conditional update, so that of two Request Managers claiming one, one gets it; a
    /// claim whose holder died lapses at its `until`.
    pub(crate) async fn claim_notifications(
        &self,
        host: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<ClaimedNotification>, Error> {
        let rows = Statement::new(
            "SELECT id, delivery_id, webhook, event, body, attempts FROM notifications \
             WHERE status = $1 AND next_at <= $2 AND (claimed_until IS NULL OR claimed_until < $2) \
             ORDER BY next_at, id LIMIT $3",
        )
        .bind(PENDING)
        .bind(micros(now))
        .bind(i64::from(limit.max(1)))
        .fetch_all(&self.pool)
        .await?;
        let mut claimed = Vec::with_capacity(rows.len());
        for row in &rows {
            let id: i64 = row.read("id")?;
            let taken = Statement::new(
                "UPDATE notifications SET claimed_by = $2, claimed_until = $3 \
                 WHERE id = $1 AND status = $4 AND (claimed_until IS NULL OR claimed_until < $5)",
            )
            .bind(id)
            .bind(host)
            .bind(micros(until))
            .bind(PENDING)
            .bind(micros(now))
            .execute(&self.pool)
            .await?;
            if DB::rows_affected(&taken) != 1 {
                continue;
            }
            let attempts: i32 = row.read("attempts")?;
            claimed.push(ClaimedNotification {
                id,
                delivery_id: row.read("delivery_id")?,
                webhook: row.read("webhook")?,
                event: row.read("event")?,
                body: row.read("body")?,
                attempts: u32::try_from(attempts).unwrap_or(0),
            });
        }
        Ok(claimed)
    }

    /// Records an attempt of notification `id`, if `host` holds its claim still.
    pub(crate) async fn notification_attempted(
        &self,
        id: i64,
        host: &str,
        attempt: &Attempt,
        at: DateTime<Utc>,
    ) -> Result<bool, Error> {
        let (status, error, next_at, done_at) = match attempt {
            Attempt::Delivered => (DELIVERED, "", micros(at), Some(micros(at))),
            Attempt::Failed {
                error,
                retry_at: Some(retry_at),
            } => (PENDING, error.as_str(), micros(*retry_at), None),
            Attempt::Failed {
                error,
                retry_at: None,
            } => (FAILED, error.as_str(), micros(at), Some(micros(at))),
        };
        let done = Statement::new(
            "UPDATE notifications SET status = $3, attempts = attempts + 1, last_error = $4, \
             next_at = $5, done_at = $6, claimed_by = NULL, claimed_until = NULL \
             WHERE id = $1 AND claimed_by = $2 AND status = $7",
        )
        .bind(id)
        .bind(host)
        .bind(status)
        .bind(error)
        .bind(next_at)
        .bind(done_at)
        .bind(PENDING)
        .execute(&self.pool)
        .await?;
        Ok(DB::rows_affected(&done) == 1)
    }

    pub(crate) async fn notifications(
        &self,
        filter: &NotificationFilter,
    ) -> Result<Vec<proto::Notification>, Error> {
        let mut query = Statement::build(
            "SELECT delivery_id, webhook, event, request_id, subject, status, attempts, created_at, \
             next_at, done_at, last_error FROM notifications WHERE 1 = 1",
        );
        for (column, value) in [
            ("webhook", &filter.webhook),
            ("status", &filter.status),
            ("request_id", &filter.request_id),
        ] {
            if let Some(value) = value {
                query
                    .push(&format!(" AND {column} = "))
                    .push_param(value.as_str());
            }
        }
        query
            .push(" ORDER BY id DESC LIMIT ")
            .push_param(i64::from(filter.limit.max(1)));
        let rows = query.fetch_all(&self.readers).await?;
        rows.iter()
            .map(|row| {
                let status: String = row.read("status")?;
                let attempts: i32 = row.read("attempts")?;
                let next_at: i64 = row.read("next_at")?;
                Ok(proto::Notification {
                    delivery_id: row.read("delivery_id")?,
                    webhook: row.read("webhook")?,
                    event: row.read("event")?,
                    request_id: row.read("request_id")?,
                    subject: row.read("subject")?,
                    next_at: (status == PENDING).then(|| from_micros(next_at)),
                    status,
                    attempts: u32::try_from(attempts).unwrap_or(0),
                    created_at: from_micros(row.read("created_at")?),
                    done_at: row.read::<Option<i64>>("done_at")?.map(from_micros),
                    last_error: row.read("last_error")?,
                })
            })
            .collect()
    }
}
