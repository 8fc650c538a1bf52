//! `spindle notifications`: what was sent to the config's webhooks, newest first, and
//! how each delivery went.

use super::*;
use crate::client::api::NotificationQuery;

pub(crate) async fn notifications(
    args: &ClientArgs,
    query: &NotificationQuery,
) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let notifications = text_of!(args, client.notifications(query).await);
    if notifications.is_empty() {
        super::eprintln_line(
            "no notifications (the Request Manager's config `notify:` adds webhooks)",
        )?;
        return Ok(Exit::Success);
    }
    out!(
        "CREATED                 WEBHOOK          EVENT        ABOUT                 STATUS     TRIES  DELIVERY"
    );
    for notification in &notifications {
        let about = if notification.request_id.is_empty() {
            notification.subject.as_str()
        } else {
            notification.request_id.as_str()
        };
        let status = match (notification.status.as_str(), notification.next_at) {
            ("pending", Some(next)) if notification.attempts > 0 => {
                format!("pending (again at {})", time(Some(next)))
            }
            (status, _) => status.to_owned(),
        };
        out!(
            "{:<23} {:<16} {:<12} {:<21} {:<10} {:>5}  {}",
            time(Some(notification.created_at)),
            squeeze(&notification.webhook, 16),
            notification.event,
            squeeze(about, 21),
            status,
            notification.attempts,
            notification.delivery_id
        );
        if !notification.last_error.is_empty() {
            out!("    last error: {}", squeeze(&notification.last_error, 200));
        }
    }
    Ok(Exit::Success)
}
