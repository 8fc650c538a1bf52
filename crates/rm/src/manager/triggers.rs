//! Triggers (issue #33): an event from another system starts a request, once per
//! delivery.

use super::*;
use crate::triggers::Trigger;

/// Deliveries `GET /api/v1/triggers` shows of each trigger.
const LISTED_DELIVERIES: u32 = 10;

impl Manager {
    /// The triggers `POST /api/v1/triggers/{name}` serves (the config's `triggers:`).
    pub fn set_triggers(&self, triggers: Vec<Trigger>) {
        *self
            .triggers
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(
            triggers
                .into_iter()
                .map(|trigger| (trigger.name.clone(), trigger))
                .collect(),
        );
    }

    fn triggers_now(&self) -> Arc<BTreeMap<String, Trigger>> {
        self.triggers
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Starts trigger `name`'s request for the event in `body`, once per delivery id:
    /// the sender proven first (401), then the event read (400 naming what is missing).
    pub async fn trigger(
        &self,
        name: &str,
        headers: &axum::http::HeaderMap,
        body: &[u8],
        address: &str,
    ) -> Result<(proto::TriggerAccepted, bool), Error> {
        let triggers = self.triggers_now();
        let trigger = triggers.get(name).ok_or_else(|| {
            Error::NotFound(format!(
                "no trigger named {name:?}; configured: {}",
                if triggers.is_empty() {
                    "none".to_owned()
                } else {
                    triggers.keys().cloned().collect::<Vec<_>>().join(", ")
                }
            ))
        })?;
        trigger.verify(headers, body)?;
        let event: serde_json::Value = serde_json::from_slice(body).map_err(|err| {
            Error::BadRequest(format!(
                "trigger {name}: the event is not JSON: {err}; expected a JSON document"
            ))
        })?;
        let delivery_id = trigger.delivery_id(headers, &event)?;
        let accepted = |id: String, duplicate: bool| proto::TriggerAccepted {
            id,
            trigger: name.to_owned(),
            delivery_id: delivery_id.clone(),
            duplicate,
        };
        // A delivery sent again is answered from what the first stored, before any job's
        // create runs again; two sent at once are told apart when stored.
        if let Some(first) = self.store.delivered_request(name, &delivery_id).await? {
            return Ok((accepted(first, true), false));
        }
        let create = CreateRequest {
            request_type: trigger.request.clone(),
            args: trigger.args(&event)?,
            user: trigger.user().to_owned(),
            priority: None,
            idempotency_key: None,
        };
        let delivery = store::Delivery {
            trigger: name.to_owned(),
            id: delivery_id.clone(),
        };
        match self
            .create_from(create, trigger.user(), address, Some(delivery))
            .await?
        {
            lifecycle::Created::New(request) => {
                tracing::info!(trigger = name, delivery = %delivery_id, request_id = %request.id, "trigger started a request");
                Ok((accepted(request.id, false), true))
            }
            lifecycle::Created::Duplicate(first) => Ok((accepted(first, true), false)),
        }
    }

    /// The triggers with their latest deliveries.
    pub async fn triggers(&self) -> Result<Vec<proto::TriggerStatus>, Error> {
        let mut statuses = Vec::new();
        for trigger in self.triggers_now().values() {
            let deliveries = self
                .store
                .trigger_deliveries(&trigger.name, LISTED_DELIVERIES)
                .await?;
            statuses.push(trigger.status(deliveries));
        }
        Ok(statuses)
    }
}
