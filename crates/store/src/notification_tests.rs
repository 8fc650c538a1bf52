//! Issue #33: the notifications' outbox. A request's end and a runner's loss are put in it
//! by the transactions that store them; each event is fanned out once, however many
//! Request Managers try at once; each notification is claimed by one sender at a time,
//! and its attempts are recorded, on every backend.

use std::sync::Arc;

use proto::{FinishRequest, State};

use super::recovery_tests::registration;
use super::{Raw, at, create, running};
use crate::{Attempt, FannedOut, NewNotification, NotificationFilter, Store};

fn notification(delivery: &str, webhook: &str, event: &str, request_id: &str) -> NewNotification {
    NewNotification {
        delivery_id: delivery.to_owned(),
        webhook: webhook.to_owned(),
        event: event.to_owned(),
        request_id: request_id.to_owned(),
        subject: String::new(),
        body: format!("{{\"event\":\"{event}\"}}"),
        at: at(2, 0),
    }
}

/// The notification `delivery_id` as listed now.
async fn by(store: &dyn Store, delivery_id: &str) -> proto::Notification {
    let all = NotificationFilter {
        limit: 100,
        ..NotificationFilter::default()
    };
    let listed = store.notifications(&all).await.unwrap();
    listed
        .into_iter()
        .find(|n| n.delivery_id == delivery_id)
        .unwrap()
}

pub(super) async fn ends_and_lost_runners_are_notified_once_each(store: Arc<dyn Store>, _raw: Raw) {
    // Ends, through two paths, and a loss, each put in the outbox by its own write.
    running(&*store, "n1").await;
    let finish = FinishRequest {
        request_id: "n1".to_owned(),
        state: State::Complete,
        finished_at: at(1, 5),
        finished_jobs: 3,
        error: String::new(),
        job_logs: Vec::new(),
    };
    store.finish_request(&finish, None).await.unwrap();
    // Finishing again changes nothing, and tells nothing again.
    store.finish_request(&finish, None).await.unwrap();
    create(&*store, "n2").await;
    store.fail_pending("n2", at(1, 6)).await.unwrap();
    store
        .register_runner(&registration("i1", "http://jr1:32307"), at(1, 0))
        .await
        .unwrap();
    assert!(store.mark_runner_lost("i1", at(1, 7)).await.unwrap());
    assert!(!store.mark_runner_lost("i1", at(1, 8)).await.unwrap());
    store
        .add_notification_event("approval", "n3", "job-7", at(1, 9))
        .await
        .unwrap();
    let events = store.notification_events(100).await.unwrap();
    let seen: Vec<(&str, &str, &str)> = events
        .iter()
        .map(|e| (e.event.as_str(), e.request_id.as_str(), e.subject.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("completed", "n1", ""),
            ("failed", "n2", ""),
            ("runner_lost", "", "i1"),
            ("approval", "n3", "job-7"),
        ]
    );
    assert_eq!(events[0].at, at(1, 5));
    assert_eq!(events[2].at, at(1, 7));
    assert_eq!(store.notification_events(2).await.unwrap().len(), 2);

    // Fanned out by two Request Managers at once: each event once.
    let fanned: Vec<FannedOut> = events
        .iter()
        .map(|event| FannedOut {
            seq: event.seq,
            notifications: match event.event.as_str() {
                // Two webhooks want an end; nobody wants a loss.
                "completed" | "failed" => vec![
                    notification(
                        &format!("{}-a", event.seq),
                        "chat",
                        &event.event,
                        &event.request_id,
                    ),
                    notification(
                        &format!("{}-b", event.seq),
                        "pager",
                        &event.event,
                        &event.request_id,
                    ),
                ],
                "approval" => vec![notification("ap", "chat", "approval", "n3")],
                _ => Vec::new(),
            },
        })
        .collect();
    let (a, b) = tokio::join!(store.fan_out(&fanned), store.fan_out(&fanned));
    assert_eq!(a.unwrap() + b.unwrap(), 4);
    assert!(store.notification_events(100).await.unwrap().is_empty());
    let all = NotificationFilter {
        limit: 100,
        ..NotificationFilter::default()
    };
    let listed = store.notifications(&all).await.unwrap();
    assert_eq!(listed.len(), 5, "{listed:?}");
    assert!(
        listed
            .iter()
            .all(|n| n.status == "pending" && n.attempts == 0)
    );
    let chat = store
        .notifications(&NotificationFilter {
            webhook: Some("chat".to_owned()),
            ..all.clone()
        })
        .await
        .unwrap();
    assert_eq!(chat.len(), 3);
    assert_eq!(chat[0].event, "approval", "newest first");

    // Claimed by one sender at a time, until the claim lapses.
    let now = at(2, 0);
    let until = at(2, 1);
    let claimed = store
        .claim_notifications("rm-a", now, until, 3)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 3);
    let rest = store
        .claim_notifications("rm-b", now, until, 100)
        .await
        .unwrap();
    assert_eq!(rest.len(), 2);
    assert!(
        store
            .claim_notifications("rm-b", now, until, 100)
            .await
            .unwrap()
            .is_empty()
    );
    // Not due yet: nothing (claims held, and none due before its time).
    assert!(
        store
            .claim_notifications("rm-c", at(1, 0), at(1, 1), 100)
            .await
            .unwrap()
            .is_empty()
    );

    // Attempts: only the claim's holder records one.
    let first = &claimed[0];
    let failed = Attempt::Failed {
        error: "HTTP 500".to_owned(),
        retry_at: Some(at(3, 0)),
    };
    assert!(
        !store
            .notification_attempted(first.id, "rm-b", &failed, at(2, 0))
            .await
            .unwrap()
    );
    assert!(
        store
            .notification_attempted(first.id, "rm-a", &failed, at(2, 0))
            .await
            .unwrap()
    );
    let delivered = &claimed[1];
    assert!(
        store
            .notification_attempted(delivered.id, "rm-a", &Attempt::Delivered, at(2, 0))
            .await
            .unwrap()
    );
    let given_up = &claimed[2];
    let last = Attempt::Failed {
        error: "connection refused".to_owned(),
        retry_at: None,
    };
    assert!(
        store
            .notification_attempted(given_up.id, "rm-a", &last, at(2, 0))
            .await
            .unwrap()
    );
    // A recorded attempt is not recorded twice.
    assert!(
        !store
            .notification_attempted(delivered.id, "rm-a", &Attempt::Delivered, at(2, 0))
            .await
            .unwrap()
    );

    let retried = by(&*store, &first.delivery_id).await;
    assert_eq!(
        (
            retried.status.as_str(),
            retried.attempts,
            retried.last_error.as_str(),
            retried.next_at
        ),
        ("pending", 1, "HTTP 500", Some(at(3, 0)))
    );
    let done = by(&*store, &delivered.delivery_id).await;
    assert_eq!(
        (done.status.as_str(), done.attempts, done.done_at),
        ("delivered", 1, Some(at(2, 0)))
    );
    let dead = by(&*store, &given_up.delivery_id).await;
    assert_eq!(
        (dead.status.as_str(), dead.last_error.as_str()),
        ("failed", "connection refused")
    );
    let failed_only = store
        .notifications(&NotificationFilter {
            status: Some("failed".to_owned()),
            ..all.clone()
        })
        .await
        .unwrap();
    assert_eq!(failed_only.len(), 1);
    // The retried one is due again at its time, its claim released; a lapsed claim
    // (rm-b's, its holder gone) is taken over.
    let later = store
        .claim_notifications("rm-c", at(3, 0), at(3, 1), 100)
        .await
        .unwrap();
    let mut ids: Vec<i64> = later.iter().map(|c| c.id).collect();
    ids.sort_unstable();
    let mut expected: Vec<i64> = rest.iter().map(|c| c.id).chain([first.id]).collect();
    expected.sort_unstable();
    assert_eq!(ids, expected);
    assert_eq!(later.iter().find(|c| c.id == first.id).unwrap().attempts, 1);
}
