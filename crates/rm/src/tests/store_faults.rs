//! What callers are told when the store fails at one step of an operation that stored
//! something before it (`store::faulty`).

use super::*;

/// A create is stored, then the database goes away before its start is: the caller
/// hears 201 (told 503, it would send the create again and the work would run twice),
/// the request stays PENDING, and once the database is back an offer starts it.
#[tokio::test]
async fn a_create_stored_before_the_database_went_away_is_created_and_offered_later() {
    let mut faulty = None;
    let env = env_store(
        Options {
            jr_url: Some("http://jr1:32307".to_owned()),
            ..Options::default()
        },
        SPECS,
        |inner| {
            let store = store::faulty::Faulty::new(inner);
            faulty = Some(Arc::clone(&store));
            store
        },
    )
    .await;
    let faulty = faulty.unwrap();
    // The create's write succeeds; the start's (and every write after it) fails.
    faulty.fail("write_batch", 1);
    // Created (201), not 503.
    let id = create(&env).await;
    let (_, found, _) = call(&env.router, Method::GET, "/api/v1/requests", None).await;
    assert_eq!(found.as_array().map(Vec::len), Some(1), "{found}");
    assert_eq!(found[0]["state"], 1, "{found}");
    faulty.heal("write_batch");
    let (status, body, _) = call(
        &env.router,
        Method::PUT,
        &format!("/api/v1/requests/{id}/start"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, stored, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}"),
        None,
    )
    .await;
    assert_eq!(stored["state"], 2, "{stored}");
}
