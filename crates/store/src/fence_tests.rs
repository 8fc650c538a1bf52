//! The store suite, on every backend: fences under races (issue #48) — a late job log
//! entry waits for a recovery and is refused; a request offered again after a try began
//! gets no new epoch.

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
    let epoch = store.hand_over(&"r1".into(), State::Pending).await.unwrap();
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
        .hand_over(&"r1".into(), State::Pending)
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
        store.hand_over(&"nope".into(), State::Pending).await,
        Err(Error::NotFound { .. })
    ));
}
