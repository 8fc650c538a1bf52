//! Issue #33: a trigger's delivery is stored with the request it creates, in one
//! transaction, so that a delivery sent again creates nothing, on every backend.

use std::sync::Arc;

use super::{Raw, request};
use crate::{Batcher, Delivery, Error, NewRequest, Store, WriteBatch};

fn new(id: &str, trigger: &str, delivery: &str) -> NewRequest {
    let (request, create_request) = request(id, "deploy", "hook", super::at(1, 0), "db1");
    NewRequest {
        request,
        create_request,
        created: None,
        locks: Vec::new(),
        priority: 0,
        locked: None,
        delivery: Some(Delivery {
            trigger: trigger.to_owned(),
            id: delivery.to_owned(),
        }),
        duplicate_of: None,
        secrets: Vec::new(),
        chain_json: None,
    }
}

pub(super) async fn a_delivery_sent_again_creates_nothing(store: Arc<dyn Store>, _raw: Raw) {
    // Twice in one batch: the second is the first's duplicate.
    let written = store
        .write_batch(&WriteBatch {
            creates: vec![new("t1", "deploys", "d-1"), new("t2", "deploys", "d-1")],
            ..WriteBatch::default()
        })
        .await
        .unwrap();
    assert_eq!(written.duplicates, [None, Some("t1".to_owned())]);
    assert!(matches!(
        store.get_request("t2", false).await,
        Err(Error::NotFound { .. })
    ));
    // Sent again later, through the group commit: the same answer, nothing stored.
    let batcher = Batcher::spawn(Arc::clone(&store), crate::BatchOptions::default());
    let again = batcher
        .create_request(new("t3", "deploys", "d-1"))
        .await
        .unwrap();
    assert_eq!(again.duplicate_of.as_deref(), Some("t1"));
    assert!(matches!(
        store.get_request("t3", false).await,
        Err(Error::NotFound { .. })
    ));
    // Another delivery id, or the same id at another trigger, is new.
    let other = batcher
        .create_request(new("t4", "deploys", "d-2"))
        .await
        .unwrap();
    assert_eq!(other.duplicate_of, None);
    let elsewhere = batcher
        .create_request(new("t5", "alerts", "d-1"))
        .await
        .unwrap();
    assert_eq!(elsewhere.duplicate_of, None);
    for id in ["t1", "t4", "t5"] {
        assert_eq!(store.get_request(id, false).await.unwrap().id, id);
    }
    // Concurrent deliveries of one id: one request.
    let (first, second) = (
        WriteBatch {
            creates: vec![new("t6", "deploys", "d-3")],
            ..WriteBatch::default()
        },
        WriteBatch {
            creates: vec![new("t7", "deploys", "d-3")],
            ..WriteBatch::default()
        },
    );
    let (a, b) = tokio::join!(store.write_batch(&first), store.write_batch(&second));
    let duplicates: Vec<Option<String>> = [a, b]
        .into_iter()
        .map(|written| written.unwrap().duplicates[0].clone())
        .collect();
    assert!(
        duplicates == [None, Some("t6".to_owned())] || duplicates == [Some("t7".to_owned()), None],
        "{duplicates:?}"
    );
    let listed = store.trigger_deliveries("deploys", 10).await.unwrap();
    let mut seen: Vec<(&str, &str)> = listed
        .iter()
        .map(|d| (d.delivery_id.as_str(), d.request_id.as_str()))
        .collect();
    seen.sort_unstable();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(&seen[..2], [("d-1", "t1"), ("d-2", "t4")]);
    assert_eq!(
        store.trigger_deliveries("deploys", 1).await.unwrap().len(),
        1
    );
    assert!(
        store
            .trigger_deliveries("nothing", 10)
            .await
            .unwrap()
            .is_empty()
    );
}
