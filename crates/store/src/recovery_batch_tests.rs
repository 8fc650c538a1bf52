//! Recovering a lost runner's requests in batches (issue #51): the reads of many at once
//! are those of each alone, and each recovery of a batch is judged as if alone.

use super::recovery_tests::{registration, try_start};
use super::*;

use crate::Recovery;

/// Request `id`, RUNNING on runner `instance` (registered by the caller): its fence.
async fn running_on(store: &dyn Store, id: &str, instance: &str, url: &str) -> Fence {
    create(store, id).await;
    let epoch = store
        .hand_over(&id.into(), State::Pending, &Default::default())
        .await
        .unwrap();
    let owner = Fence {
        instance: instance.to_owned(),
        epoch,
    };
    store
        .start_request(&id.into(), url, Some(&owner), at(1, 1))
        .await
        .unwrap();
    owner
}

fn recovery(id: &str, interrupted: Vec<JobLog>) -> Recovery {
    Recovery {
        interrupted,
        suspended: sjc(id),
    }
}

pub(super) async fn recoveries_in_one_batch_are_each_checked(store: Arc<dyn Store>, _raw: Raw) {
    for (instance, url) in [("i1", "http://jr1"), ("i2", "http://jr2")] {
        store
            .register_runner(&registration(instance, url), at(1, 0))
            .await
            .unwrap();
    }
    let mut fences = BTreeMap::new();
    for (id, instance, url) in [
        ("r1", "i1", "http://jr1"),
        ("r2", "i1", "http://jr1"),
        ("r3", "i1", "http://jr1"),
        ("r4", "i2", "http://jr2"),
    ] {
        fences.insert(id, running_on(&*store, id, instance, url).await);
    }
    // r1: a ran and was logged, b began and never reported. r3: c began, and its
    // recovery was rebuilt before (it does not log c).
    store
        .insert_try_starts(
            Some(&fences["r1"]),
            &[try_start("r1", "a", 1), try_start("r1", "b", 1)],
        )
        .await
        .unwrap();
    store
        .insert_job_logs(&[log("r1", "a", 1, State::Complete)])
        .await
        .unwrap();
    store
        .insert_try_starts(Some(&fences["r3"]), &[try_start("r3", "c", 1)])
        .await
        .unwrap();

    // The reads of many are those of each alone; an unknown request is left out.
    let ids: Vec<String> = ["r1", "r2", "r3", "r4", "nope"]
        .iter()
        .map(|id| (*id).to_owned())
        .collect();
    let reads = store.recovery_reads_among(&ids).await.unwrap();
    assert_eq!(reads.len(), 4, "{:?}", reads.keys());
    for id in ["r1", "r2", "r3", "r4"] {
        let read = &reads[id];
        assert_eq!(read.job_chain, store.job_chain(id).await.unwrap(), "{id}");
        assert_eq!(read.job_log, store.job_log(id).await.unwrap(), "{id}");
        assert_eq!(read.try_starts, store.try_starts(id).await.unwrap(), "{id}");
    }
    assert_eq!(reads["r1"].job_chain.jobs["a"].state, State::Complete);
    assert_eq!(reads["r1"].try_starts.len(), 2);

    let interrupted = JobLog {
        error: "interrupted".to_owned(),
        ..log("r1", "b", 1, State::Stopped)
    };
    let answers = store
        .recover_lost_many(
            "i1",
            &[
                recovery("r1", vec![interrupted]),
                recovery("r2", Vec::new()),
                recovery("r3", Vec::new()),
                recovery("r4", Vec::new()),
                recovery("r2", Vec::new()),
                recovery("nope", Vec::new()),
            ],
            at(1, 5),
        )
        .await
        .unwrap();
    assert_eq!(answers.len(), 6);
    assert!(answers[0].is_ok() && answers[1].is_ok(), "{answers:?}");
    assert!(
        matches!(&answers[2], Err(Error::TryBegan { job_id, .. }) if job_id == "c"),
        "{answers:?}"
    );
    assert!(matches!(answers[3], Err(Error::Fenced(_))), "{answers:?}");
    assert!(matches!(answers[4], Err(Error::Conflict(_))), "{answers:?}");
    assert!(
        matches!(answers[5], Err(Error::NotFound { .. })),
        "{answers:?}"
    );

    // The recovered: SUSPENDED, no owner, a new epoch, their chains stored unclaimed, the
    // interrupted try logged; the lost runner's reports refused.
    for id in ["r1", "r2"] {
        let owner = store.owner(id).await.unwrap();
        assert_eq!(
            (owner.state, owner.instance.as_str(), owner.epoch),
            (State::Suspended, "", fences[id].epoch + 1),
            "{id}"
        );
    }
    let entry = store.latest_job_log(&"r1".into(), "b").await.unwrap();
    assert_eq!((entry.r#try, entry.error.as_str()), (1, "interrupted"));
    let err = store
        .insert_try_starts(Some(&fences["r1"]), &[try_start("r1", "c", 1)])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err}");
    assert_eq!(
        claimed_now(&*store, "rm1", at(1, 6), 10).await,
        ["r1", "r2"]
    );
    // The refused: untouched.
    for (id, instance) in [("r3", "i1"), ("r4", "i2")] {
        let owner = store.owner(id).await.unwrap();
        assert_eq!(
            (owner.state, owner.instance.as_str(), owner.epoch),
            (State::Running, instance, fences[id].epoch),
            "{id}"
        );
    }
    assert!(store.job_log("r3").await.unwrap().is_empty());
}
