//! What callers are told when the store fails at one step of an operation that stored
//! something before it (`store::faulty`).

use super::*;

/// A create is stored, then the database goes away before its start is: the caller
/// hears 201 (told 503, it would send the create again and the work would run twice),
/// the request stays PENDING, and once the database is back an offer starts it.
#[tokio::test]
async fn a_create_stored_before_the_database_went_away_is_created_and_offered_later() {
    let (env, faulty) = env_faulty(
        Options {
            jr_url: Some("http://jr1:32307".to_owned()),
            ..Options::default()
        },
        SPECS,
    )
    .await;
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

/// A group commit the database undid as a deadlock's victim (MySQL's table locks of a
/// month's drop, another transaction) is tried again: twice, and the create is stored;
/// a third time, and its caller hears 503.
#[tokio::test]
async fn a_group_commit_undone_by_a_deadlock_is_tried_again() {
    let (env, faulty) = env_faulty(Options::default(), SPECS).await;
    faulty.deadlock("write_batch", 2);
    let id = create(&env).await;
    assert_eq!(faulty.calls("write_batch"), 3);
    let (status, _, _) = call(
        &env.router,
        Method::GET,
        &format!("/api/v1/requests/{id}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    faulty.deadlock("write_batch", 3);
    let (status, answer, _) = call(
        &env.router,
        Method::POST,
        "/api/v1/requests",
        Some(r#"{"type": "deploy", "args": {"host": "db2"}}"#),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{answer}");
    assert_eq!(faulty.calls("write_batch"), 6);
}

/// A create stored waiting for a lock another request holds, then the database goes
/// away at its locks' step (saying why it waits, reading its state again): the caller
/// hears 201 with the request PENDING, and the request stays queued for the lock.
#[tokio::test]
async fn a_create_stored_waiting_for_a_lock_is_created_when_the_database_goes_away() {
    let (env, faulty) = env_faulty(
        Options {
            jr_url: Some("http://jr1:32307".to_owned()),
            ..Options::default()
        },
        include_str!("../../../../fixtures/specs/locks.yaml"),
    )
    .await;
    let body = json!({"type": "failover", "args": {"cluster": "db-7"}, "user": "ann"});
    // The first holds the lock.
    send_json(
        &env,
        Method::POST,
        "/api/v1/requests",
        &body,
        StatusCode::CREATED,
    )
    .await;
    faulty.fail("set_waiting", 0);
    faulty.fail("get_request", 0);
    let waiter = send_json(
        &env,
        Method::POST,
        "/api/v1/requests",
        &body,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(waiter["state"], 1, "{waiter}");
    faulty.heal("set_waiting");
    faulty.heal("get_request");
    let (status, locks, _) = call(&env.router, Method::GET, "/api/v1/locks", None).await;
    assert_eq!(status, StatusCode::OK, "{locks}");
    let waiting: Vec<&Value> = locks
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|lock| lock["waiters"].as_array().unwrap())
        .map(|w| &w["requestId"])
        .collect();
    assert_eq!(waiting, [&waiter["id"]], "{locks}");
}
