//! Issue #34, locks held by jobs: `restart-fleet` (Spindle's fixture `locks.yaml`)
//! restarts each host in a sequence holding `host-ops[host]`, and every restart is a
//! `shell-command` job that joins the pool `shells` (at most 2 at once, fleet-wide). Two requests
//! over overlapping hosts never restart one host twice at once, never run more than two
//! restarts at once, reach two, and wait visibly; every lock is released at the end. On
//! `spindle server` (SQLite), and on two Request Managers and three Job Runners sharing
//! PostgreSQL, then MySQL.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::locks::{most_at_once, specs};
use crate::recovery::Client;

/// Each restart's host, start and end (nanoseconds), from the chain and the job log.
async fn restarts(client: &Client, id: &str) -> Vec<(String, i64, i64)> {
    let chain = client
        .get(&format!("/api/v1/requests/{id}/job-chain"))
        .await;
    let hosts: BTreeMap<&str, &str> = chain["jobs"]
        .as_object()
        .unwrap()
        .values()
        .filter(|job| job["type"] == "shell-command")
        .map(|job| {
            (
                job["id"].as_str().unwrap(),
                job["each"]["host"].as_str().unwrap(),
            )
        })
        .collect();
    let log = client.get(&format!("/api/v1/requests/{id}/log")).await;
    log.as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["type"] == "shell-command")
        .map(|entry| {
            assert_eq!(entry["state"], 3, "{entry}");
            (
                hosts[entry["jobId"].as_str().unwrap()].to_owned(),
                entry["startedAt"].as_i64().unwrap(),
                entry["finishedAt"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// Starts the two requests through `clients` (in turn), watches them wait visibly, and
/// checks what they did once both completed.
async fn two_fleets(clients: &[Client]) {
    let fleets = [
        ["web-1", "web-2", "web-3", "web-4"],
        ["web-3", "web-4", "web-5", "web-6"],
    ];
    let mut ids = Vec::new();
    for (n, hosts) in fleets.iter().enumerate() {
        let args = serde_json::json!({"hosts": hosts, "seconds": "0.4"});
        ids.push(
            clients[n % clients.len()]
                .start("restart-fleet", args)
                .await,
        );
    }
    // Seen while they run: the pool full, held by jobs, with jobs waiting in its queue,
    // and a waiting job's status line saying so.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut pool_seen, mut status_seen) = (false, false);
    while !(pool_seen && status_seen) {
        assert!(
            Instant::now() < deadline,
            "never seen waiting (pool: {pool_seen}, status: {status_seen})"
        );
        let locks = clients[0].get("/api/v1/locks").await;
        pool_seen |= locks.as_array().unwrap().iter().any(|lock| {
            lock["name"] == "shells"
                && lock["holders"].as_array().unwrap().len() == 2
                && lock["holders"][0]["jobId"].is_string()
                && !lock["waiters"].as_array().unwrap().is_empty()
        });
        let running = clients[0].get("/api/v1/status/running").await;
        let text = running.to_string();
        status_seen |= text.contains("waiting for lock shells (2 of 2 held), held by job ");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut all = Vec::new();
    for id in &ids {
        clients[0].wait_state(id, 3, Duration::from_secs(60)).await;
        all.extend(restarts(&clients[0], id).await);
    }
    assert_eq!(all.len(), 8, "{all:?}");
    let times: Vec<(i64, i64)> = all.iter().map(|(_, s, e)| (*s, *e)).collect();
    assert_eq!(most_at_once(times), 2, "the pool's limit, reached: {all:?}");
    for host in ["web-3", "web-4"] {
        let times: Vec<(i64, i64)> = all
            .iter()
            .filter(|(h, ..)| h == host)
            .map(|(_, s, e)| (*s, *e))
            .collect();
        assert_eq!(most_at_once(times), 1, "{host}: {all:?}");
    }
    assert_eq!(clients[0].get("/api/v1/locks").await, serde_json::json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_pool_and_a_sequences_lock_hold_on_one_server() {
    let (_dir, service) = crate::sqlite_server(&specs());
    two_fleets(&[Client::new(&service.url)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_pool_holds_across_managers_and_runners_on_postgres() {
    let test = "a_job_pool_holds_across_managers_and_runners_on_postgres";
    let Some(database) = crate::services::NewDatabase::create(test).await else {
        return;
    };
    across_managers(&database.url).await;
    database.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_pool_holds_across_managers_and_runners_on_mysql() {
    let test = "a_job_pool_holds_across_managers_and_runners_on_mysql";
    let Some(server) = crate::mysql_url(test) else {
        return;
    };
    let database = crate::import::MysqlDatabase::create(&server, "job_locks").await;
    across_managers(&database.url).await;
    database.remove().await;
}

async fn across_managers(url: &str) {
    let cluster = crate::locks::Cluster::start(url).await;
    two_fleets(&cluster.clients).await;
}
