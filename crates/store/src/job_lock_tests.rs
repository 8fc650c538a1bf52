//! Issue #34: the locks of jobs (a node's `locks:`, a job pool), on every backend: taken
//! by the runner that owns the request, queued first come first served beside nothing
//! else, never offered as a request's are, released by the job or by its request's end.

use std::sync::Arc;

use proto::{FinishRequest, State};

use super::{Raw, at, create};
use proto::Fence;

use crate::{Error, LockClaim, LockTake, Store};

/// Starts `id` as runner `instance`'s: its fence.
async fn running(store: &dyn Store, id: &str, instance: &str) -> Fence {
    create(store, id).await;
    let epoch = store
        .hand_over(&id.into(), State::Pending, &Default::default())
        .await
        .unwrap();
    let fence = Fence {
        instance: instance.to_owned(),
        epoch,
    };
    store
        .start_request(&id.into(), "http://jr", Some(&fence), at(1, 1))
        .await
        .unwrap();
    fence
}

pub(super) async fn jobs_take_locks_in_turn_and_their_request_end_releases_them(
    store: Arc<dyn Store>,
    _raw: Raw,
) {
    let pool = [LockClaim {
        name: "ssh".to_owned(),
        key: String::new(),
        limit: 2,
        fair_key: String::new(),
    }];
    let f1 = running(&*store, "r1", "i1").await;
    let f2 = running(&*store, "r2", "i2").await;
    let take = async |fence: &Fence, id: &str, job: &str, minute: u32| {
        store
            .take_job_locks(Some(fence), id, job, &pool, at(2, minute))
            .await
            .unwrap()
    };
    // (holders as request/job, ahead) of a wait.
    let waits = |taken: LockTake| -> (Vec<String>, u32) {
        match taken {
            LockTake::Waiting(wait) => (
                wait.holders
                    .iter()
                    .map(|h| format!("{}/{}", h.request_id, h.job_id))
                    .collect(),
                wait.ahead,
            ),
            LockTake::Granted => panic!("granted, expected to wait"),
        }
    };
    assert_eq!(take(&f1, "r1", "j1", 0).await, LockTake::Granted);
    assert_eq!(take(&f1, "r1", "j2", 1).await, LockTake::Granted);
    assert_eq!(
        take(&f1, "r1", "j2", 2).await,
        LockTake::Granted,
        "held already"
    );
    let full = vec!["r1/j1".to_owned(), "r1/j2".to_owned()];
    assert_eq!(waits(take(&f2, "r2", "k1", 3).await), (full.clone(), 0));
    assert_eq!(waits(take(&f1, "r1", "j3", 4).await), (full, 1));
    // Asking again keeps the place: k1 is still first.
    assert_eq!(waits(take(&f2, "r2", "k1", 5).await).1, 0);
    // Only the request's owner takes or releases its jobs' locks.
    let err = store
        .take_job_locks(Some(&f2), "r1", "j9", &pool, at(2, 6))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err}");
    let err = store
        .release_job_locks(Some(&f2), "r1", "j1")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err}");
    // Nor of a request that does not run.
    create(&*store, "r3").await;
    let err = store
        .take_job_locks(None, "r3", "x", &pool, at(2, 6))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::State { .. }), "{err}");
    // But of one handed over and not yet marked RUNNING, by the runner it was handed to:
    // its chain began before the Request Manager stored RUNNING (a race seen in CI).
    create(&*store, "r4").await;
    let epoch = store
        .hand_over(&"r4".into(), State::Pending, &Default::default())
        .await
        .unwrap();
    let f4 = Fence {
        instance: "i4".to_owned(),
        epoch,
    };
    let one = [LockClaim {
        name: "r4-only".to_owned(),
        key: String::new(),
        limit: 1,
        fair_key: String::new(),
    }];
    let taken = store
        .take_job_locks(Some(&f4), "r4", "x", &one, at(2, 6))
        .await
        .unwrap();
    assert_eq!(taken, LockTake::Granted);
    store.release_job_locks(Some(&f4), "r4", "x").await.unwrap();
    // A job's waiting claim is asked for again by its runner, never offered.
    assert!(store.lock_waiters(10).await.unwrap().is_empty());
    let listed: Vec<(String, bool)> = store
        .lock_claims()
        .await
        .unwrap()
        .into_iter()
        .map(|(_, h)| {
            (
                format!("{}/{}", h.request_id, h.job_id),
                h.held_since.is_some(),
            )
        })
        .collect();
    let row = |who: &str, held: bool| (who.to_owned(), held);
    assert_eq!(
        listed,
        [
            row("r1/j1", true),
            row("r1/j2", true),
            row("r2/k1", false),
            row("r1/j3", false)
        ]
    );
    // j1 ends: j3 still waits behind k1, which takes the free place.
    store
        .release_job_locks(Some(&f1), "r1", "j1")
        .await
        .unwrap();
    assert_eq!(waits(take(&f1, "r1", "j3", 7).await).1, 1);
    assert_eq!(take(&f2, "r2", "k1", 8).await, LockTake::Granted);
    // r1 ends: every claim of its jobs goes with it (j2 held, j3 waiting).
    let finish = FinishRequest {
        request_id: "r1".to_owned(),
        state: State::Fail,
        finished_at: at(3, 0),
        finished_jobs: 1,
        error: String::new(),
        job_logs: Vec::new(),
    };
    store.finish_request(&finish, Some(&f1)).await.unwrap();
    let left: Vec<String> = store
        .lock_claims()
        .await
        .unwrap()
        .into_iter()
        .map(|(_, h)| format!("{}/{}", h.request_id, h.job_id))
        .collect();
    assert_eq!(left, ["r2/k1"]);
}
