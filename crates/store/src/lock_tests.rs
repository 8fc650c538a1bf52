//! The store suite, on every backend: a request type's locks, queued and fair.

use super::*;

/// Issue #34: a request's lock claims are taken together or queued (by priority, then
/// creation), are held up to each lock's limit, and are released by the request's end.
pub(super) async fn locks_are_taken_in_queue_order_and_released_at_the_end(
    store: Arc<dyn Store>,
    _raw: Raw,
) {
    use crate::{LockClaim, LockTake};
    let claim = |key: &str, limit: u32| LockClaim {
        name: "cluster-ops".to_owned(),
        key: key.to_owned(),
        limit,
        fair_key: String::new(),
    };
    for (n, id) in ["r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9"]
        .iter()
        .enumerate()
    {
        let (request, create) = request(id, "failover", "ann", at(1, n as u32), "db1");
        store.create_request(&request, &create, None).await.unwrap();
    }
    let take = async |id: &str, claims: &[LockClaim], priority: i32| {
        store
            .take_locks(id, claims, priority, at(2, 0))
            .await
            .unwrap()
    };
    let waits = |taken: LockTake| -> (Vec<String>, u32) {
        match taken {
            LockTake::Waiting(wait) => (
                wait.holders.into_iter().map(|h| h.request_id).collect(),
                wait.ahead,
            ),
            LockTake::Granted => panic!("granted, expected to wait"),
        }
    };
    let db7 = [claim("db-7", 1)];
    assert_eq!(take("r1", &db7, 0).await, LockTake::Granted);
    assert_eq!(
        take("r1", &db7, 0).await,
        LockTake::Granted,
        "taken again: held already"
    );
    assert_eq!(waits(take("r2", &db7, 0).await), (vec!["r1".to_owned()], 0));
    assert_eq!(waits(take("r3", &db7, 0).await), (vec!["r1".to_owned()], 1));
    // Another key is another lock.
    assert_eq!(take("r4", &[claim("db-8", 1)], 0).await, LockTake::Granted);
    // All or none: r5 could have db-9 but not db-7, so it holds neither, and keeps its
    // place in both queues: r6, queued after it, waits for db-9 too.
    let both = [claim("db-9", 1), claim("db-7", 1)];
    assert_eq!(
        waits(take("r5", &both, 0).await),
        (vec!["r1".to_owned()], 2)
    );
    assert_eq!(waits(take("r6", &[claim("db-9", 1)], 0).await), (vec![], 1));
    // The listing: each lock's holders, then its queue.
    let listed: Vec<(String, String, bool)> = store
        .lock_claims()
        .await
        .unwrap()
        .into_iter()
        .map(|(claim, holder)| (claim.key, holder.request_id, holder.held_since.is_some()))
        .collect();
    let row = |key: &str, id: &str, held: bool| (key.to_owned(), id.to_owned(), held);
    assert_eq!(
        listed,
        [
            row("db-7", "r1", true),
            row("db-7", "r2", false),
            row("db-7", "r3", false),
            row("db-7", "r5", false),
            row("db-8", "r4", true),
            row("db-9", "r5", false),
            row("db-9", "r6", false),
        ]
    );
    // What to offer: none while db-7 is full and r5 heads db-9's queue (r6 behind it).
    assert_eq!(store.lock_waiters(10).await.unwrap(), ["r5"]);
    // r1 ends: its lock is released by the same UPDATE; r2 is served before r3.
    store.fail_pending("r1", at(3, 0)).await.unwrap();
    assert_eq!(waits(take("r3", &db7, 0).await), (vec![], 1));
    assert_eq!(take("r2", &db7, 0).await, LockTake::Granted);
    assert!(matches!(
        store.take_locks("r1", &db7, 0, at(3, 1)).await,
        Err(Error::State { .. })
    ));
    // A limit of 2: two hold it, the third waits.
    for (id, granted) in [("r7", true), ("r8", true), ("r9", false)] {
        let api = [LockClaim {
            name: "api".to_owned(),
            key: String::new(),
            limit: 2,
            fair_key: String::new(),
        }];
        assert_eq!(
            take(id, &api, 0).await == LockTake::Granted,
            granted,
            "{id}"
        );
    }
    // A higher priority goes before the queue: r11 (priority 9, the last to come) is
    // served before r3, r5 and r10 when r2 ends.
    for id in ["r10", "r11"] {
        let (request, create) = request(id, "failover", "bob", at(5, 0), "db1");
        store.create_request(&request, &create, None).await.unwrap();
    }
    assert_eq!(
        waits(take("r10", &db7, 0).await),
        (vec!["r2".to_owned()], 2)
    );
    assert_eq!(
        waits(take("r11", &db7, 9).await),
        (vec!["r2".to_owned()], 0)
    );
    store.fail_pending("r2", at(5, 1)).await.unwrap();
    assert_eq!(waits(take("r3", &db7, 0).await), (vec![], 1));
    assert_eq!(take("r11", &db7, 9).await, LockTake::Granted);
}

/// Issue #34: a fair lock's waiters (one priority) are served round robin over their
/// fairness keys: one caller's many requests do not starve another's one.
pub(super) async fn a_fair_lock_serves_its_callers_round_robin(store: Arc<dyn Store>, _raw: Raw) {
    use crate::{LockClaim, LockTake};
    let claim = |caller: &str| {
        [LockClaim {
            name: "api".to_owned(),
            key: String::new(),
            limit: 1,
            fair_key: caller.to_owned(),
        }]
    };
    let ids = ["h", "big1", "big2", "big3", "small1", "big4"];
    for (n, id) in ids.iter().enumerate() {
        let (request, create) = request(id, "call", "ann", at(1, n as u32), "db1");
        store.create_request(&request, &create, None).await.unwrap();
    }
    let take = async |id: &str, caller: &str| {
        store
            .take_locks(id, &claim(caller), 0, at(2, 0))
            .await
            .unwrap()
    };
    assert_eq!(take("h", "ops").await, LockTake::Granted);
    for id in ["big1", "big2", "big3", "small1", "big4"] {
        let caller = if id.starts_with("big") {
            "big"
        } else {
            "small"
        };
        assert!(matches!(take(id, caller).await, LockTake::Waiting(_)));
    }
    // small1, queued fourth, is second: each caller's first, then each one's second, …
    let waiting: Vec<String> = store
        .lock_claims()
        .await
        .unwrap()
        .into_iter()
        .filter(|(_, h)| h.held_since.is_none())
        .map(|(_, h)| h.request_id)
        .collect();
    assert_eq!(waiting, ["big1", "small1", "big2", "big3", "big4"]);
    match take("small1", "small").await {
        LockTake::Waiting(wait) => assert_eq!(wait.ahead, 1),
        LockTake::Granted => panic!("granted while held"),
    }
    assert!(
        store.lock_waiters(10).await.unwrap().is_empty(),
        "no room while held"
    );
    store.fail_pending("h", at(3, 0)).await.unwrap();
    assert_eq!(store.lock_waiters(10).await.unwrap(), ["big1"]);
    assert_eq!(take("big1", "big").await, LockTake::Granted);
    store.fail_pending("big1", at(3, 1)).await.unwrap();
    assert!(matches!(take("big2", "big").await, LockTake::Waiting(_)));
    assert_eq!(store.lock_waiters(10).await.unwrap(), ["small1"]);
    assert_eq!(take("small1", "small").await, LockTake::Granted);
}
