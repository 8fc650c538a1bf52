//! The store suite, on every backend: fences under races (issue #48) — a late job log
//! entry waits for a recovery and is refused; a request offered again after a try began
//! gets no new epoch; a suspended chain is checked only when a hand-over of it went
//! out unrecorded.

use super::recovery_tests::{registration, running_on_i1, try_start};
use super::*;

/// A job log entry from a runner that is losing its request, reported while a recovery
/// (or hand-over) of it is being written, waits for that to commit and is refused: it
/// never lands beside the new owner's tries (issue #48, point 2).
pub(super) async fn a_late_job_log_entry_waits_for_a_recovery_and_is_refused(
    store: Arc<dyn Store>,
    raw: Raw,
) {
    let owner = running_on_i1(&*store).await;
    let recovery = raw.hand_over_held("r1", "i2").await;
    let batch = crate::WriteBatch {
        logs: vec![log("r1", "a", 1, State::Complete)],
        log_fences: vec![(0..1, owner.clone())],
        ..crate::WriteBatch::default()
    };
    let writing = tokio::spawn({
        let store = Arc::clone(&store);
        async move { store.write_batch(&batch).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !writing.is_finished(),
        "the entry waits for the request's row: {:?}",
        writing.await
    );
    recovery.commit().await;
    let written = writing.await.unwrap().unwrap();
    assert_eq!(written.refused.len(), 1, "{:?}", written.refused);
    assert!(
        matches!(written.refused[0].2, Error::Fenced(_)),
        "{:?}",
        written.refused
    );
    assert!(store.job_log("r1").await.unwrap().is_empty());
}

/// A PENDING request offered again gets a new epoch only if no try of it began under
/// the old one (a hand-over whose answer was lost, its runner running it): such a try
/// would run again under its number on the next runner, its start stored once. With a
/// try begun, the offer is refused (`TryBegan`), and the request is taken back instead.
pub(super) async fn a_request_offered_again_after_a_try_began_is_not_handed_over_anew(
    store: Arc<dyn Store>,
    _raw: Raw,
) {
    store
        .register_runner(&registration("i1", "http://jr1"), at(1, 0))
        .await
        .unwrap();
    create(&*store, "r1").await;
    // Offered again (its first hand-over's answer was lost): a new epoch.
    let epoch = store
        .hand_over(&"r1".into(), State::Pending, &Default::default())
        .await
        .unwrap();
    let first = Fence {
        instance: "i1".to_owned(),
        epoch,
    };
    // The runner it went to begins a try before it is offered yet again.
    store
        .insert_try_starts(Some(&first), &[try_start("r1", "a", 1)])
        .await
        .unwrap();
    let err = store
        .hand_over(&"r1".into(), State::Pending, &Default::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TryBegan { .. }), "{err}");
    assert_eq!(
        store.owner("r1").await.unwrap().epoch,
        epoch,
        "no new epoch"
    );
    // Not PENDING: the state error, as before.
    assert!(matches!(
        store
            .hand_over(&"nope".into(), State::Pending, &Default::default())
            .await,
        Err(Error::NotFound { .. })
    ));
}

/// A suspended chain resumed on a runner whose answer (or whose record) was lost stays
/// SUSPENDED at the resume's epoch while that runner runs it. Offered again, it gets a
/// new epoch only if no try began beyond what the stored chain knows; else the offer is
/// refused (`TryBegan`) and the request is taken back from that resume (`Unresumed`):
/// the rebuilt chain replaces the stale one, and the new epoch fences the runner off.
pub(super) async fn a_suspended_chain_offered_again_after_a_try_began_is_taken_back(
    store: Arc<dyn Store>,
    _raw: Raw,
) {
    let (_, epoch) = begun_on_an_unheard_resume(&*store).await;
    let i2 = Fence {
        instance: "i2".to_owned(),
        epoch,
    };
    let again = store
        .claim_suspended("rm-a", at(1, 4))
        .await
        .unwrap()
        .unwrap();
    let err = store
        .hand_over(&"r1".into(), State::Suspended, &again.total_job_tries)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::TryBegan { job_id, attempt: 3, .. } if job_id == "b"),
        "{err}"
    );
    assert_eq!(
        store.owner("r1").await.unwrap().epoch,
        epoch,
        "no new epoch"
    );
    // Taken back from an older resume: refused as fenced, nothing changed.
    let mut rebuilt = sjc("r1");
    rebuilt.total_job_tries.insert("b".to_owned(), 3);
    let interrupted = JobLog {
        error: "interrupted".to_owned(),
        ..log("r1", "b", 3, State::Fail)
    };
    let err = store
        .recover_request(
            Holder::Unresumed(epoch - 1),
            std::slice::from_ref(&interrupted),
            &rebuilt,
            at(1, 5),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err}");
    store
        .recover_request(
            Holder::Unresumed(epoch),
            std::slice::from_ref(&interrupted),
            &rebuilt,
            at(1, 5),
        )
        .await
        .unwrap();
    let owner = store.owner("r1").await.unwrap();
    assert_eq!((owner.state, owner.epoch), (State::Suspended, epoch + 1));
    // The runner that had it is fenced off.
    let err = store
        .insert_try_starts(Some(&i2), &[try_start("r1", "b", 4)])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err}");
    // The rebuilt chain, unclaimed, is the one offered next, and it goes out.
    let next = store
        .claim_suspended("rm-b", at(1, 6))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next.total_job_tries.get("b"), Some(&3));
    let epoch = store
        .hand_over(&"r1".into(), State::Suspended, &next.total_job_tries)
        .await
        .unwrap();
    assert_eq!(epoch, owner.epoch + 1);
}

/// A chain its runner suspended itself goes out again without a check of its tries: no
/// hand-over of it went out since (the epoch it was stored at is the request's), and
/// the try a Spin Cycle runner stopped for the suspension is logged but given back to
/// the chain (its count one less), to run again under its number, as Spin Cycle does.
pub(super) async fn a_chain_its_runner_suspended_goes_out_with_its_stopped_try_given_back(
    store: Arc<dyn Store>,
    _raw: Raw,
) {
    let owner = running_on_i1(&*store).await;
    let batch = crate::WriteBatch {
        logs: vec![log("r1", "b", 3, State::Stopped)],
        log_fences: vec![(0..1, owner.clone())],
        ..crate::WriteBatch::default()
    };
    assert!(store.write_batch(&batch).await.unwrap().refused.is_empty());
    // Suspended knowing two tries of b: the third, stopped, runs again as the third.
    store
        .suspend_request(&sjc("r1"), Some(&owner), at(1, 3))
        .await
        .unwrap();
    let stored = store
        .claim_suspended("rm-a", at(1, 4))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.total_job_tries.get("b"), Some(&2));
    let epoch = store
        .hand_over(&"r1".into(), State::Suspended, &stored.total_job_tries)
        .await
        .unwrap();
    assert_eq!(epoch, owner.epoch + 1);
}

/// Hand-overs group-committed in one write batch (issue #51: thousands of suspended
/// chains resumed after a restart) are each what a hand-over alone would be: a new epoch
/// for each request in the state expected (one handed over twice in the batch, twice),
/// the request's state or absence said for the others, and a suspended chain whose
/// unrecorded resume began a try refused (`TryBegan`), its epoch unchanged. The batcher
/// answers each caller with its own.
pub(super) async fn hand_overs_in_one_batch_are_each_checked(store: Arc<dyn Store>, _raw: Raw) {
    use crate::{HandOverRecord, WriteBatch};
    // r1: resumed on i2 whose answer was lost, i2 began b's third try.
    let (stored, r1_epoch) = begun_on_an_unheard_resume(&*store).await;
    // s1, s2: suspended by their runner; p1 PENDING; run9 RUNNING.
    for id in ["s1", "s2", "run9"] {
        running(&*store, id).await;
    }
    for id in ["s1", "s2"] {
        store
            .suspend_request(&sjc(id), None, at(1, 4))
            .await
            .unwrap();
    }
    create(&*store, "p1").await;
    let epoch = |id: &'static str| {
        let store = Arc::clone(&store);
        async move { store.owner(id).await.unwrap().epoch }
    };
    let (s1, s2, p1) = (epoch("s1").await, epoch("s2").await, epoch("p1").await);
    let record = |id: &str, expected: State, known: &BTreeMap<String, u32>| HandOverRecord {
        request_id: id.to_owned(),
        expected,
        known_tries: known.clone(),
    };
    let known = sjc("s1").total_job_tries;
    let none = BTreeMap::new();
    let batch = WriteBatch {
        hand_overs: vec![
            record("s2", State::Suspended, &known),
            record("r1", State::Suspended, &stored.total_job_tries),
            record("s1", State::Suspended, &known),
            record("p1", State::Pending, &none),
            record("run9", State::Suspended, &known),
            record("nope", State::Pending, &none),
            record("s2", State::Suspended, &known),
        ],
        ..WriteBatch::default()
    };
    let written = store.write_batch(&batch).await.unwrap();
    let handed = &written.handed;
    assert_eq!(handed.len(), 7);
    assert_eq!(handed[0].as_ref().ok(), Some(&(s2 + 1)));
    assert!(
        matches!(&handed[1], Err(Error::TryBegan { job_id, attempt: 3, .. }) if job_id == "b"),
        "{:?}",
        handed[1]
    );
    assert_eq!(handed[2].as_ref().ok(), Some(&(s1 + 1)));
    assert_eq!(handed[3].as_ref().ok(), Some(&(p1 + 1)));
    assert!(
        matches!(
            &handed[4],
            Err(Error::State {
                actual: State::Running,
                expected: State::Suspended,
                ..
            })
        ),
        "{:?}",
        handed[4]
    );
    assert!(
        matches!(&handed[5], Err(Error::NotFound { .. })),
        "{:?}",
        handed[5]
    );
    assert_eq!(
        handed[6].as_ref().ok(),
        Some(&(s2 + 2)),
        "handed over again in the same batch: the next epoch"
    );
    assert_eq!(
        (
            epoch("s1").await,
            epoch("s2").await,
            epoch("p1").await,
            epoch("r1").await
        ),
        (s1 + 1, s2 + 2, p1 + 1, r1_epoch),
        "the epochs stored are those answered; r1's is unchanged"
    );
    // Through the batcher, concurrent callers each get their own answer.
    create(&*store, "p2").await;
    let batcher = crate::Batcher::spawn(Arc::clone(&store), crate::BatchOptions::default());
    let (p2_id, nope_id) = (proto::RequestId::from("p2"), proto::RequestId::from("nope"));
    let (p2, nope) = tokio::join!(
        batcher.hand_over(&p2_id, State::Pending, &none),
        batcher.hand_over(&nope_id, State::Pending, &none),
    );
    assert_eq!(p2.unwrap(), epoch("p2").await);
    assert!(matches!(nope, Err(Error::NotFound { .. })), "{nope:?}");
}

/// Suspends group-committed in one write batch (issue #51: a runner shutting down hands
/// back tens of thousands of chains at once) are each what a suspend alone would be: a
/// stale runner's refused as fenced, the owner's stored, one of a request not RUNNING
/// refused with its state, a second of one request a conflict, an unknown one not found.
pub(super) async fn suspends_in_one_batch_are_each_checked(store: Arc<dyn Store>, _raw: Raw) {
    use crate::{SuspendRecord, WriteBatch};
    let owner = running_on_i1(&*store).await;
    running(&*store, "run1").await;
    create(&*store, "p1").await;
    let stale = Fence {
        instance: "i0".to_owned(),
        epoch: owner.epoch,
    };
    let record = |id: &str, fence: Option<&Fence>| SuspendRecord {
        suspended: sjc(id),
        fence: fence.cloned(),
        at: at(1, 5),
    };
    let batch = WriteBatch {
        suspends: vec![
            record("r1", Some(&stale)),
            record("r1", Some(&owner)),
            record("run1", None),
            record("p1", None),
            record("run1", None),
            record("nope", None),
        ],
        ..WriteBatch::default()
    };
    let written = store.write_batch(&batch).await.unwrap();
    let done = &written.suspended;
    assert_eq!(done.len(), 6);
    assert!(matches!(&done[0], Err(Error::Fenced(_))), "{:?}", done[0]);
    assert!(done[1].is_ok(), "{:?}", done[1]);
    assert!(done[2].is_ok(), "{:?}", done[2]);
    assert!(
        matches!(
            &done[3],
            Err(Error::State {
                actual: State::Pending,
                expected: State::Running,
                ..
            })
        ),
        "{:?}",
        done[3]
    );
    assert!(
        matches!(&done[4], Err(Error::Conflict(text)) if text.contains("already has a suspended job chain")),
        "{:?}",
        done[4]
    );
    assert!(
        matches!(&done[5], Err(Error::NotFound { .. })),
        "{:?}",
        done[5]
    );
    for (id, state) in [
        ("r1", State::Suspended),
        ("run1", State::Suspended),
        ("p1", State::Pending),
    ] {
        assert_eq!(
            store.get_request(id, false).await.unwrap().state,
            state,
            "{id}"
        );
    }
    let r1 = store.owner("r1").await.unwrap();
    assert!(r1.instance.is_empty(), "no runner holds it: {r1:?}");
    assert_eq!(
        claimed_now(&*store, "rm-a", at(1, 6), 10).await,
        ["r1", "run1"]
    );
    // Through the batcher, each caller hears its own.
    running(&*store, "run2").await;
    let batcher = crate::Batcher::spawn(Arc::clone(&store), crate::BatchOptions::default());
    let (run2, p1) = (sjc("run2"), sjc("p1"));
    let (run2, p1) = tokio::join!(
        batcher.suspend_request(&run2, None, at(1, 7)),
        batcher.suspend_request(&p1, None, at(1, 7)),
    );
    assert!(run2.is_ok(), "{run2:?}");
    assert!(matches!(p1, Err(Error::State { .. })), "{p1:?}");
}

/// r1, recovered from its lost runner i1 and resumed on i2, whose answer was lost:
/// released, SUSPENDED at that resume's epoch, while i2 began b's third try (the stored
/// chain knows two). The chain as it was claimed, and i2's epoch.
async fn begun_on_an_unheard_resume(store: &dyn Store) -> (SuspendedJobChain, u64) {
    running_on_i1(store).await;
    store
        .recover_request(Holder::Lost("i1"), &[], &sjc("r1"), at(1, 2))
        .await
        .unwrap();
    let stored = store
        .claim_suspended("rm-a", at(1, 3))
        .await
        .unwrap()
        .unwrap();
    let epoch = store
        .hand_over(&"r1".into(), State::Suspended, &stored.total_job_tries)
        .await
        .unwrap();
    store.unclaim(&"r1".into(), "rm-a").await.unwrap();
    let i2 = Fence {
        instance: "i2".to_owned(),
        epoch,
    };
    store
        .insert_try_starts(Some(&i2), &[try_start("r1", "b", 3)])
        .await
        .unwrap();
    (stored, epoch)
}
