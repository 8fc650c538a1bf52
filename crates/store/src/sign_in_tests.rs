//! The store suite, on every backend: single sign-on's sign-ins in flight, kept by the
//! Request Manager that began one and taken by whichever finishes it.

use super::*;

pub(super) async fn sign_ins_are_taken_once_and_expire(store: Arc<dyn Store>, _raw: Raw) {
    store
        .keep_sign_in("s1", r#"{"nonce":"n1"}"#, at(1, 0), at(0, 0))
        .await
        .unwrap();
    store
        .keep_sign_in("s2", r#"{"nonce":"n2"}"#, at(1, 1), at(0, 0))
        .await
        .unwrap();
    // Taken once, by whoever asks first.
    assert_eq!(
        store
            .take_sign_in("s1", at(0, 30))
            .await
            .unwrap()
            .as_deref(),
        Some(r#"{"nonce":"n1"}"#)
    );
    assert_eq!(store.take_sign_in("s1", at(0, 30)).await.unwrap(), None);
    assert_eq!(store.take_sign_in("nope", at(0, 30)).await.unwrap(), None);
    // Too old: not given, and gone.
    assert_eq!(store.take_sign_in("s2", at(2, 0)).await.unwrap(), None);
    // A sign-in kept later removes those begun before its cut-off.
    store
        .keep_sign_in("s3", "{}", at(1, 2), at(0, 0))
        .await
        .unwrap();
    store
        .keep_sign_in("s4", "{}", at(3, 0), at(2, 0))
        .await
        .unwrap();
    assert_eq!(store.take_sign_in("s3", at(0, 0)).await.unwrap(), None);
    assert!(store.take_sign_in("s4", at(0, 0)).await.unwrap().is_some());
    // A state that is kept already is refused, not overwritten.
    store
        .keep_sign_in("s5", "first", at(3, 0), at(0, 0))
        .await
        .unwrap();
    assert!(
        store
            .keep_sign_in("s5", "second", at(3, 0), at(0, 0))
            .await
            .is_err()
    );
    assert_eq!(
        store.take_sign_in("s5", at(0, 0)).await.unwrap().as_deref(),
        Some("first")
    );
}
