//! Notifications (issue #33): the task that fans the store's outbox of events out into
//! one notification per webhook that asked for it, and sends each until its receiver
//! answers 2xx or its attempts run out (`crate::notify` says what is sent).

use std::time::Duration;

use store::{Attempt, ClaimedNotification, FannedOut, NewNotification, NotificationFilter};

use super::*;
use crate::notify::{DELIVERY_HEADER, EVENT_HEADER, Notify, SIGNATURE_HEADER};

/// Events fanned out per store transaction.
const FAN_OUT_BATCH: u32 = 500;
/// Notifications claimed per round.
const SEND_BATCH: u32 = 50;
/// How long a claim holds: past it, a notification whose sender died is sent by another.
const CLAIM: Duration = Duration::from_secs(60);
/// How often the outbox is read while webhooks are configured (ends this Request
/// Manager stores wake the task at once).
const POLL: Duration = Duration::from_secs(1);
/// How long the task waits after a wake, so that one round takes a burst of ends.
const WAKE_BATCH: Duration = Duration::from_millis(50);
/// The most of a failing receiver's answer kept as the attempt's error.
const ERROR_BODY: usize = 200;

/// The webhooks and the HTTP client that sends to them.
pub(super) struct Notifier {
    notify: Arc<Notify>,
    http: reqwest::Client,
}

impl Manager {
    /// The webhooks notifications go to (the config's `notify:`), and the client that
    /// sends them (no client certificate of the services': receivers are elsewhere).
    pub fn set_notify(&self, notify: Notify, http: reqwest::Client) {
        *self
            .notifier
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Arc::new(Notifier {
            notify: Arc::new(notify),
            http,
        }));
        self.notify_wake.notify_one();
    }

    fn notifier(&self) -> Option<Arc<Notifier>> {
        self.notifier
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Fans out and sends notifications until `cancel`: each second while webhooks are
    /// configured, and at once when this Request Manager stores an end; without any, the
    /// outbox is emptied at each background interval.
    pub async fn run_notifications(self: Arc<Self>, cancel: CancellationToken) {
        loop {
            let poll = if self
                .notifier()
                .is_some_and(|n| !n.notify.webhooks.is_empty())
            {
                POLL
            } else {
                self.options.interval
            };
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(poll) => {}
                () = self.notify_wake.notified() => {
                    // Ends come in bursts: one round for those of the next moment too.
                    tokio::time::sleep(WAKE_BATCH).await;
                }
            }
            self.notification_round().await;
        }
    }

    /// One round: every event fanned out, then every notification due sent once.
    pub async fn notification_round(&self) {
        let notifier = self.notifier();
        let notify = notifier
            .as_ref()
            .map(|n| Arc::clone(&n.notify))
            .unwrap_or_default();
        loop {
            match self.fan_out(&notify).await {
                Ok(n) if n >= u64::from(FAN_OUT_BATCH) => {}
                Ok(_) => break,
                Err(err) => {
                    tracing::warn!(error = %err, "notifications: fanning out events failed; trying again next round");
                    return;
                }
            }
        }
        if let Some(notifier) = notifier
            && !notifier.notify.webhooks.is_empty()
        {
            while let Ok(sent) = self.send_due(&notifier).await
                && sent >= SEND_BATCH as usize
            {}
        }
    }

    /// Fans out one batch of events; returns how many were read.
    async fn fan_out(&self, notify: &Notify) -> Result<u64, store::Error> {
        let events = self.store.notification_events(FAN_OUT_BATCH).await?;
        if events.is_empty() {
            return Ok(0);
        }
        let mut requests: HashMap<String, Option<Request>> = HashMap::new();
        let mut fanned = Vec::with_capacity(events.len());
        for event in &events {
            // Read only what a webhook may want (without webhooks, nothing).
            let wanted = notify
                .webhooks
                .iter()
                .any(|webhook| webhook.wants(&event.event, None));
            let request = if event.request_id.is_empty() || !wanted {
                None
            } else {
                if !requests.contains_key(&event.request_id) {
                    let read = match self.store.get_request(&event.request_id, false).await {
                        Ok(request) => Some(request),
                        Err(store::Error::NotFound { .. }) => None,
                        Err(err) => return Err(err),
                    };
                    requests.insert(event.request_id.clone(), read);
                }
                requests[&event.request_id].as_ref()
            };
            let request_type = if event.request_id.is_empty() {
                None
            } else {
                Some(request.map_or("", |r| r.request_type.as_str()))
            };
            let notifications = notify
                .webhooks
                .iter()
                .filter(|webhook| webhook.wants(&event.event, request_type))
                .map(|webhook| {
                    let delivery_id = new_delivery_id();
                    let payload = crate::notify::payload(
                        event,
                        &delivery_id,
                        request,
                        notify.ui_url.as_deref(),
                    );
                    NewNotification {
                        delivery_id,
                        webhook: webhook.name.clone(),
                        event: event.event.clone(),
                        request_id: event.request_id.clone(),
                        subject: event.subject.clone(),
                        body: webhook.body(&payload),
                        at: Utc::now(),
                    }
                })
                .collect();
            fanned.push(FannedOut {
                seq: event.seq,
                notifications,
            });
        }
        self.store.fan_out(&fanned).await?;
        if !notify.webhooks.is_empty() {
            // What was just fanned out is due now.
            self.notify_wake.notify_one();
        }
        Ok(events.len() as u64)
    }

    /// Claims the notifications due and sends each (at once, each in a task of its own);
    /// returns how many were claimed.
    async fn send_due(&self, notifier: &Arc<Notifier>) -> Result<usize, store::Error> {
        let now = Utc::now();
        let until = now + chrono::Duration::from_std(CLAIM).unwrap_or_default();
        let claimed = self
            .store
            .claim_notifications(&self.options.host, now, until, SEND_BATCH)
            .await
            .inspect_err(|err| {
                tracing::warn!(error = %err, "notifications: claiming those due failed; trying again next round");
            })?;
        let count = claimed.len();
        let mut sends = tokio::task::JoinSet::new();
        for notification in claimed {
            let notifier = Arc::clone(notifier);
            sends.spawn(async move {
                let attempt = send(&notifier, &notification).await;
                (notification, attempt)
            });
        }
        while let Some(done) = sends.join_next().await {
            match done {
                Ok((notification, attempt)) => self.record_attempt(&notification, attempt).await,
                // Its claim lapses and another attempt is made then.
                Err(err) => tracing::error!(error = %err, "notifications: a send task failed"),
            }
        }
        Ok(count)
    }

    async fn record_attempt(
        &self,
        notification: &ClaimedNotification,
        outcome: Result<(), String>,
    ) {
        let notifier = self.notifier();
        let webhook = notifier
            .as_ref()
            .and_then(|n| n.notify.webhook(&notification.webhook));
        let attempts = notification.attempts + 1;
        let (attempt, result) = match outcome {
            Ok(()) => (Attempt::Delivered, "delivered"),
            Err(error) => {
                let max = webhook.map_or(1, |w| w.max_attempts);
                let retry_at = (attempts < max).then(|| {
                    let wait = webhook.map_or(POLL, |w| w.retry_after(attempts));
                    Utc::now() + chrono::Duration::from_std(wait).unwrap_or_default()
                });
                if retry_at.is_some() {
                    tracing::warn!(
                        webhook = notification.webhook,
                        delivery_id = notification.delivery_id,
                        attempts,
                        error,
                        "notification not delivered; sending it again later"
                    );
                } else {
                    tracing::error!(
                        webhook = notification.webhook,
                        delivery_id = notification.delivery_id,
                        attempts,
                        error,
                        "notification not delivered; given up on"
                    );
                }
                let result = if retry_at.is_some() {
                    "failed"
                } else {
                    "given_up"
                };
                (Attempt::Failed { error, retry_at }, result)
            }
        };
        if let Some(metrics) = &self.options.telemetry.metrics {
            metrics.notification_attempt(&notification.webhook, result);
        }
        if let Err(err) = self
            .store
            .notification_attempted(notification.id, &self.options.host, &attempt, Utc::now())
            .await
        {
            // Its claim lapses and it is sent again: at least once.
            tracing::warn!(delivery_id = notification.delivery_id, error = %err, "notifications: recording an attempt failed");
        }
    }

    /// Notifications as `GET /api/v1/notifications` lists them, newest first.
    pub async fn notifications(
        &self,
        filter: NotificationFilter,
    ) -> Result<Vec<proto::Notification>, Error> {
        if let Some(status) = &filter.status
            && !matches!(status.as_str(), "pending" | "delivered" | "failed")
        {
            return Err(Error::BadRequest(format!(
                "status {status:?} is not a notification status; expected pending, delivered or failed"
            )));
        }
        Ok(self.store.notifications(&filter).await?)
    }

    /// An approval job of a request began to wait (its Job Runner says): an event for
    /// the webhooks that ask for `approval`.
    pub async fn approval_waiting(&self, request_id: &str, job_id: &str) -> Result<(), Error> {
        let request = self.store.get_request(request_id, false).await?;
        if request.state.is_finished() {
            return Ok(());
        }
        self.store
            .add_notification_event("approval", request_id, job_id, Utc::now())
            .await?;
        self.wake_notifications();
        Ok(())
    }

    /// Wakes the notifications' task (an end was stored here), when there are webhooks
    /// to tell: without any, the outbox is emptied at each interval, not at each end.
    pub(super) fn wake_notifications(&self) {
        let webhooks = self
            .notifier
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .as_ref()
            .is_some_and(|n| !n.notify.webhooks.is_empty());
        if webhooks {
            self.notify_wake.notify_one();
        }
    }
}

/// A new delivery id: 32 random hex digits.
fn new_delivery_id() -> String {
    use rand::RngExt as _;
    let bytes: [u8; 16] = rand::rng().random();
    hex::encode(bytes)
}

/// One attempt to POST `notification`: `Err` says why it was not delivered.
async fn send(notifier: &Notifier, notification: &ClaimedNotification) -> Result<(), String> {
    let Some(webhook) = notifier.notify.webhook(&notification.webhook) else {
        return Err(format!(
            "webhook {:?} is not configured on this Request Manager",
            notification.webhook
        ));
    };
    let mut post = notifier
        .http
        .post(webhook.url.clone())
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(
            reqwest::header::USER_AGENT,
            format!("Spindle/{}", proto::version()),
        )
        .header(EVENT_HEADER, &notification.event)
        .header(DELIVERY_HEADER, &notification.delivery_id)
        .timeout(Duration::from_secs(10));
    if let Some(signature) = webhook.signature(notification.body.as_bytes()) {
        post = post.header(SIGNATURE_HEADER, signature);
    }
    let response = post
        .body(notification.body.clone())
        .send()
        .await
        .map_err(|err| format!("POST {}: {}", webhook.url, crate::error::error_chain(&err)))?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let text = response.text().await.unwrap_or_default();
    let text: String = text.chars().take(ERROR_BODY).collect();
    Err(format!(
        "POST {} answered {status}: {}",
        webhook.url,
        text.trim()
    ))
}
