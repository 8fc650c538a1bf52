//! Locks through the Request Manager's API (issue #34): a request whose lock is taken
//! waits PENDING with the reason and is handed over when the holder ends; `skip` fails
//! it; `cancel-in-progress` stops the holder; `GET /api/v1/locks` lists holders and
//! queues. (The store's suite checks the grants themselves on every backend.)

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::Options;
use crate::tests::{Env, call, env_specs, send_json};

/// Request types holding locks (`fixtures/specs/locks.yaml`).
const SPECS: &str = include_str!("../../../fixtures/specs/locks.yaml");

fn options() -> Options {
    Options {
        jr_url: Some("http://jr1:32307".to_owned()),
        telemetry: telemetry::Telemetry::with_metrics(),
        ..Options::default()
    }
}

/// Creates a request (`body` as the API takes it); its answer.
async fn create(env: &Env, body: Value) -> Value {
    send_json(
        env,
        Method::POST,
        "/api/v1/requests",
        &body,
        StatusCode::CREATED,
    )
    .await
}

async fn start(env: &Env, request_type: &str, cluster: &str) -> Value {
    create(
        env,
        json!({"type": request_type, "args": {"cluster": cluster}, "user": "ann"}),
    )
    .await
}

/// The request ids of the first lock's waiters, in the order they are served.
fn waiters(locks: &Value) -> Vec<String> {
    locks[0]["waiters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["requestId"].as_str().unwrap().to_owned())
        .collect()
}

/// The metrics as `/metrics` answers them.
async fn scrape(env: &Env) -> String {
    let (status, scrape, _) = call(&env.router, Method::GET, "/metrics", None).await;
    assert_eq!(status, StatusCode::OK);
    scrape.as_str().unwrap().to_owned()
}

/// One series' value in a scrape; it must be there.
fn sample(scrape: &str, series: &str) -> f64 {
    telemetry::metrics::sample(scrape, series).unwrap_or_else(|| panic!("no {series} in\n{scrape}"))
}

async fn get(env: &Env, path: &str) -> Value {
    let (status, body, _) = call(&env.router, Method::GET, path, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

async fn finish(env: &Env, id: &str) {
    let finish = json!({"state": 3, "finishedAt": chrono::Utc::now(), "finishedJobs": 3});
    let uri = format!("/api/v1/requests/{id}/finish");
    send_json(env, Method::PUT, &uri, &finish, StatusCode::OK).await;
}

fn handed(env: &Env) -> Vec<String> {
    env.jr
        .chains
        .lock()
        .unwrap()
        .iter()
        .map(|chain| chain.request_id.clone())
        .collect()
}

#[tokio::test]
async fn a_request_waits_for_its_lock_and_goes_when_the_holder_ends() {
    let env = env_specs(options(), SPECS).await;
    let first = start(&env, "failover", "db-7").await;
    let first = first["id"].as_str().unwrap().to_owned();
    let second = start(&env, "failover", "db-7").await;
    let second_id = second["id"].as_str().unwrap().to_owned();
    // The second waits, PENDING, and says for what and behind whom.
    assert_eq!(second["state"], 1, "{second}");
    let why = second["error"].as_str().unwrap_or_default();
    assert!(
        why.starts_with("waiting for lock cluster-ops[db-7], held by request ")
            && why.contains(&format!("{first} of ann since "))
            && why.ends_with(", 0 ahead in the queue"),
        "{why}"
    );
    // Another cluster is another lock.
    let other = start(&env, "failover", "db-8").await;
    let other = other["id"].as_str().unwrap().to_owned();
    assert_eq!(handed(&env), [first.clone(), other.clone()]);
    // The locks, their holders and queues.
    let locks = get(&env, "/api/v1/locks").await;
    let summary: Vec<(String, Vec<String>, Vec<String>)> = locks
        .as_array()
        .unwrap()
        .iter()
        .map(|lock| {
            let ids = |list: &Value| -> Vec<String> {
                list.as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c["requestId"].as_str().unwrap().to_owned())
                    .collect()
            };
            (
                lock["key"].as_str().unwrap().to_owned(),
                ids(&lock["holders"]),
                ids(&lock["waiters"]),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "db-7".to_owned(),
                vec![first.clone()],
                vec![second_id.clone()]
            ),
            ("db-8".to_owned(), vec![other.clone()], vec![]),
        ]
    );
    // The metrics: holders and waiters by lock name, and how long takers waited.
    let scrape = scrape(&env).await;
    let at = |series: &str| sample(&scrape, series);
    assert_eq!(at(r#"spindle_lock_holders{lock="cluster-ops"}"#), 2.0);
    assert_eq!(at(r#"spindle_lock_waiters{lock="cluster-ops"}"#), 1.0);
    assert_eq!(
        at(r#"spindle_lock_wait_seconds_count{lock="cluster-ops"}"#),
        2.0
    );
    // Offered again while the lock is held, it still waits.
    env.manager.offer_lock_waiters().await;
    assert_eq!(handed(&env).len(), 2);
    // The holder ends: its lock is released, and the waiter is handed over and runs,
    // its reason cleared.
    finish(&env, &first).await;
    env.manager.offer_lock_waiters().await;
    assert_eq!(handed(&env), [first, other, second_id.clone()]);
    let second = get(&env, &format!("/api/v1/requests/{second_id}")).await;
    assert_eq!(second["state"], 2, "{second}");
    assert!(second.get("error").is_none(), "{second}");
    let locks = get(&env, "/api/v1/locks").await;
    assert_eq!(locks[0]["holders"][0]["requestId"], second_id.as_str());
}

#[tokio::test]
async fn skip_fails_at_once_and_cancel_in_progress_stops_the_holder() {
    let env = env_specs(options(), SPECS).await;
    let holder = start(&env, "failover", "db-7").await;
    let holder = holder["id"].as_str().unwrap().to_owned();
    // `skip`: failed at once, naming the holder.
    let skipped = start(&env, "drain", "db-7").await;
    assert_eq!(skipped["state"], 4, "{skipped}");
    let why = skipped["error"].as_str().unwrap();
    assert!(
        why.starts_with("lock cluster-ops[db-7] is taken (held by request ")
            && why.contains(&holder)
            && why.ends_with("its type says `when_taken: skip`"),
        "{why}"
    );
    // `cancel-in-progress`: the holder is asked to stop, and this one waits for its end.
    let rebuild = start(&env, "rebuild", "db-7").await;
    assert_eq!(rebuild["state"], 1, "{rebuild}");
    assert!(
        rebuild["error"]
            .as_str()
            .unwrap()
            .ends_with("stopping the holders (`when_taken: cancel-in-progress`)"),
        "{rebuild}"
    );
    assert_eq!(
        *env.jr.stopped.lock().unwrap(),
        std::slice::from_ref(&holder)
    );
    finish(&env, &holder).await;
    env.manager.offer_lock_waiters().await;
    let rebuild_id = rebuild["id"].as_str().unwrap();
    assert_eq!(handed(&env), [holder, rebuild_id.to_owned()]);
}

#[tokio::test]
async fn a_key_that_cannot_name_a_lock_is_bad_input() {
    let env = env_specs(options(), SPECS).await;
    let refused = async |cluster: Value| -> String {
        let body = json!({"type": "failover", "args": {"cluster": cluster}});
        let answer = send_json(
            &env,
            Method::POST,
            "/api/v1/requests",
            &body,
            StatusCode::BAD_REQUEST,
        )
        .await;
        answer["message"].as_str().unwrap().to_owned()
    };
    let message = refused(json!(["a", "b"])).await;
    assert!(
        message.contains("lock `cluster-ops` is keyed by arg `cluster`, whose value is a list")
            && message.contains("expected a string, a number or true/false"),
        "{message}"
    );
    let message = refused(json!("x".repeat(501))).await;
    assert!(message.contains("expected at most 500"), "{message}");
    // Nothing was stored.
    assert_eq!(get(&env, "/api/v1/requests").await, json!([]));
}

/// A higher priority is served first: the creator's (`priority`), else the type's.
#[tokio::test]
async fn priorities_overtake_the_queue() {
    let env = env_specs(options(), SPECS).await;
    let holder = start(&env, "failover", "db-7").await;
    let holder = holder["id"].as_str().unwrap().to_owned();
    let first = start(&env, "failover", "db-7").await;
    let asked = create(
        &env,
        json!({"type": "failover", "args": {"cluster": "db-7"}, "priority": 5}),
    )
    .await;
    let urgent = start(&env, "urgent-failover", "db-7").await;
    // In the queue: the type's 10, then the caller's 5, then the first come.
    let locks = get(&env, "/api/v1/locks").await;
    assert_eq!(
        waiters(&locks),
        [
            urgent["id"].as_str().unwrap(),
            asked["id"].as_str().unwrap(),
            first["id"].as_str().unwrap()
        ]
    );
    assert_eq!(locks[0]["waiters"][0]["priority"], 10);
    assert!(
        first["error"]
            .as_str()
            .unwrap()
            .ends_with(", 0 ahead in the queue")
    );
    let first_now = get(
        &env,
        &format!("/api/v1/requests/{}", first["id"].as_str().unwrap()),
    )
    .await;
    assert_eq!(first_now["state"], 1);
    finish(&env, &holder).await;
    env.manager.offer_lock_waiters().await;
    assert_eq!(
        handed(&env),
        [holder, urgent["id"].as_str().unwrap().to_owned()]
    );
}

/// A fair lock serves its callers round robin: one caller's ten waiting requests do not
/// keep another's one waiting behind them.
#[tokio::test]
async fn a_fair_lock_lets_a_small_caller_through_a_big_ones_queue() {
    let env = env_specs(options(), SPECS).await;
    let create = async |user: &str| -> String {
        let body = create(&env, json!({"type": "api-call", "args": {}, "user": user})).await;
        body["id"].as_str().unwrap().to_owned()
    };
    let holder = create("ops").await;
    let mut big = Vec::new();
    for _ in 0..10 {
        big.push(create("big").await);
    }
    let small = create("small").await;
    // Served next: big's first, then small's one (queued last), then big's others.
    let locks = get(&env, "/api/v1/locks").await;
    let queue = waiters(&locks);
    assert_eq!(queue[..2], [big[0].clone(), small.clone()], "{queue:?}");
    finish(&env, &holder).await;
    env.manager.offer_lock_waiters().await;
    finish(&env, &big[0]).await;
    env.manager.offer_lock_waiters().await;
    assert_eq!(handed(&env), [holder, big[0].clone(), small]);
}

/// A stopped waiter leaves the queue (STOPPED at once, never run); a paused holder keeps
/// its lock; a failed holder retried takes it again.
#[tokio::test]
async fn a_stopped_waiter_leaves_the_queue_and_a_retry_takes_the_lock_again() {
    let env = env_specs(options(), SPECS).await;
    let holder = start(&env, "failover", "db-7").await;
    let holder = holder["id"].as_str().unwrap().to_owned();
    let waiter = start(&env, "failover", "db-7").await;
    let waiter = waiter["id"].as_str().unwrap().to_owned();
    let put = async |id: &str, action: &str| {
        let uri = format!("/api/v1/requests/{id}/{action}");
        send_json(&env, Method::PUT, &uri, &Value::Null, StatusCode::OK).await
    };
    put(&waiter, "stop").await;
    let stopped = get(&env, &format!("/api/v1/requests/{waiter}")).await;
    assert_eq!(stopped["state"], 6, "{stopped}");
    let locks = get(&env, "/api/v1/locks").await;
    assert!(waiters(&locks).is_empty(), "{locks}");
    // Paused, the holder keeps its lock.
    put(&holder, "pause").await;
    let locks = get(&env, "/api/v1/locks").await;
    assert_eq!(locks[0]["holders"][0]["requestId"], holder.as_str());
    // Failed, it lets go; retried, it takes the lock again.
    let fail = json!({"state": 4, "finishedAt": chrono::Utc::now(), "finishedJobs": 1});
    let uri = format!("/api/v1/requests/{holder}/finish");
    send_json(&env, Method::PUT, &uri, &fail, StatusCode::OK).await;
    assert_eq!(get(&env, "/api/v1/locks").await, json!([]));
    // Retried while another holds the lock, it waits (SUSPENDED, its chain kept) ...
    let other = start(&env, "failover", "db-7").await;
    let other = other["id"].as_str().unwrap().to_owned();
    put(&holder, "retry").await;
    let retried = get(&env, &format!("/api/v1/requests/{holder}")).await;
    assert_eq!(retried["state"], 7, "{retried}");
    let why = retried["error"].as_str().unwrap();
    assert!(
        why.starts_with(&format!(
            "waiting for lock cluster-ops[db-7], held by request {other}"
        )),
        "{why}"
    );
    // ... and resumes, holding it, once the other has ended.
    finish(&env, &other).await;
    env.manager.offer_lock_waiters().await;
    let locks = get(&env, "/api/v1/locks").await;
    assert_eq!(
        locks[0]["holders"][0]["requestId"],
        holder.as_str(),
        "{locks}"
    );
    // Its chain resumed (a retry runs the chain it had, from its failure).
    let resumed: Vec<String> = env
        .jr
        .resumed
        .lock()
        .unwrap()
        .iter()
        .map(|chain| chain.request_id.clone())
        .collect();
    assert_eq!(resumed, [holder]);
}

/// Issue #34, locks held by jobs: a Job Runner asks for a job's locks (its node's, its
/// pools) before its first try; the pool `shells` (2) grants two restarts and makes the
/// third wait with a reason naming a holder job; a release frees a place; bad asks are
/// refused saying what was expected; the wait is counted in the metrics.
#[tokio::test]
async fn a_runner_takes_and_releases_a_jobs_locks() {
    let env = env_specs(options(), SPECS).await;
    let created = create(
        &env,
        json!({"type": "restart-fleet", "args": {"hosts": ["web-1", "web-2", "web-3"]}, "user": "ann"}),
    )
    .await;
    let id = created["id"].as_str().unwrap().to_owned();
    let chain = get(&env, &format!("/api/v1/requests/{id}/job-chain")).await;
    let mut restarts: Vec<&Value> = chain["jobs"]
        .as_object()
        .unwrap()
        .values()
        .filter(|job| job["type"] == "shell-command")
        .collect();
    restarts.sort_by_key(|job| job["each"]["host"].as_str().unwrap().to_owned());
    assert_eq!(restarts.len(), 3);
    let uri = format!("/api/v1/requests/{id}/job-locks");
    let ask = |job: &Value| json!({"jobId": job["id"], "locks": job["locks"], "askedSince": 1});
    for job in &restarts[..2] {
        let taken = send_json(&env, Method::POST, &uri, &ask(job), StatusCode::OK).await;
        assert_eq!(taken, json!({"granted": true}));
    }
    let third = send_json(&env, Method::POST, &uri, &ask(restarts[2]), StatusCode::OK).await;
    assert_eq!(third["granted"], false);
    let why = third["waiting"].as_str().unwrap();
    assert!(
        why.starts_with("waiting for lock shells (2 of 2 held), held by job ")
            && why.ends_with(", 0 ahead in the queue"),
        "{why}"
    );
    let locks = get(&env, "/api/v1/locks").await;
    let shells = locks
        .as_array()
        .unwrap()
        .iter()
        .find(|lock| lock["name"] == "shells")
        .unwrap();
    assert_eq!(shells["holders"][0]["jobId"], restarts[0]["id"]);
    assert_eq!(shells["waiters"][0]["jobId"], restarts[2]["id"]);
    // A release frees the place the waiter takes.
    let release = format!(
        "/api/v1/requests/{id}/job-locks/{}",
        restarts[0]["id"].as_str().unwrap()
    );
    let (status, body, _) = call(&env.router, Method::DELETE, &release, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let third = send_json(&env, Method::POST, &uri, &ask(restarts[2]), StatusCode::OK).await;
    assert_eq!(third["granted"], true);
    // Bad asks: said what is wrong and what was expected; nothing taken.
    for (body, says) in [
        (
            json!({"jobId": "", "locks": restarts[0]["locks"]}),
            "expected the id of the job",
        ),
        (json!({"jobId": "x", "locks": []}), "expected 1 to 64"),
        (
            json!({"jobId": "x", "locks": [{"name": "shells", "limit": 0}]}),
            "expected a name and a limit of at least 1",
        ),
        (json!({"jobId": "x"}), "locks"),
    ] {
        let answer = send_json(&env, Method::POST, &uri, &body, StatusCode::BAD_REQUEST).await;
        assert!(
            answer["message"].as_str().unwrap().contains(says),
            "{answer}"
        );
    }
    let unknown = "/api/v1/requests/nope/job-locks";
    let ask0 = ask(restarts[0]);
    send_json(&env, Method::POST, unknown, &ask0, StatusCode::NOT_FOUND).await;
    let scrape = scrape(&env).await;
    let at = |series: &str| sample(&scrape, series);
    assert_eq!(at(r#"spindle_lock_wait_seconds_count{lock="shells"}"#), 3.0);
}
