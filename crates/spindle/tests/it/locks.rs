//! Issue #34 from the command line: a request whose cluster is locked waits PENDING and
//! says why (`status`), `spindle locks` lists holder and queue, and the waiter starts
//! when the holder ends.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Request types holding locks (Spindle's fixture `locks.yaml`).
pub(crate) fn specs() -> String {
    std::fs::read_to_string(crate::fixtures().join("locks.yaml")).unwrap()
}

fn run(dir: &std::path::Path, addr: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(args)
        .env("SPINDLE_ADDR", addr)
        .env("NO_COLOR", "1")
        .env("USER", "ann")
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stdout(dir: &std::path::Path, addr: &str, args: &[&str]) -> String {
    let output = run(dir, addr, args);
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn a_locked_cluster_makes_the_next_request_wait_visibly_until_the_holder_ends() {
    let (dir, service) = crate::sqlite_server(&specs());
    let (dir, addr) = (dir.path(), service.url.as_str());
    let status = |id: &str| stdout(dir, addr, &["status", id]);
    // The holder switches over for a minute: long enough to be seen holding the lock.
    let holder = {
        let out = stdout(
            dir,
            addr,
            &["start", "failover", "cluster=db-7", "wait=60s", "--yes"],
        );
        out.split_whitespace().last().unwrap().to_owned()
    };
    // Started, and told at once that it waits, and for what.
    let started = run(
        dir,
        addr,
        &["start", "failover", "cluster=db-7", "wait=60s", "--yes"],
    );
    let said = String::from_utf8_lossy(&started.stderr);
    assert!(
        said.contains("  PENDING: waiting for lock cluster-ops[db-7], held by request "),
        "{said}"
    );
    let waiter = String::from_utf8_lossy(&started.stdout)
        .split_whitespace()
        .last()
        .unwrap()
        .to_owned();
    // `find` says what a PENDING request waits for.
    let found = stdout(dir, addr, &["find", "states=PENDING"]);
    assert!(
        found
            .lines()
            .nth(1)
            .is_some_and(|line| line.starts_with(&waiter)
                && line.ends_with("  waiting for lock cluster-ops[db-7]")),
        "{found}"
    );
    let status_text = status(&waiter);
    assert!(status_text.contains("state: PENDING"), "{status_text}");
    assert!(
        status_text.contains(&format!(
            "waiting for lock cluster-ops[db-7], held by request {holder} of ann since "
        )) && status_text.contains(", 0 ahead in the queue"),
        "{status_text}"
    );
    // `spindle locks`: the lock, its holder and who is next.
    let locks = stdout(dir, addr, &["locks"]);
    let lines: Vec<&str> = locks.lines().collect();
    assert!(
        lines[0].starts_with("LOCK ") && lines[0].contains("LIMIT"),
        "{locks}"
    );
    assert!(
        lines[1].starts_with("cluster-ops[db-7]")
            && lines[1].contains(" holds ")
            && lines[1].contains(&holder),
        "{locks}"
    );
    assert!(
        lines[2].contains(" next ") && lines[2].contains(&waiter),
        "{locks}"
    );
    // The holder ends (stopped): the waiter starts without waiting for a round.
    stdout(dir, addr, &["stop", &holder]);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = status(&waiter);
        if text.contains("state: RUNNING") {
            assert!(!text.contains("waiting for lock"), "{text}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the waiter never started: {text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    stdout(dir, addr, &["stop", &waiter]);
    let output = run(dir, addr, &["locks"]);
    assert!(output.status.success());
    assert!(output.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim(),
        "no lock is held or waited for (`locks:` of a request type or a node, and `pools:`, declare them)"
    );
}

/// A request's sleep job's first start and last end (over its tries) in nanoseconds,
/// from the job log.
async fn job_times(client: &crate::recovery::Client, id: &str) -> (i64, i64) {
    let log = client.get(&format!("/api/v1/requests/{id}/log")).await;
    let tries: Vec<&serde_json::Value> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "sleep")
        .collect();
    assert!(!tries.is_empty(), "no sleep job logged for {id}: {log}");
    let start = tries.iter().map(|e| e["startedAt"].as_i64().unwrap()).min();
    let end = tries
        .iter()
        .map(|e| e["finishedAt"].as_i64().unwrap())
        .max();
    (start.unwrap(), end.unwrap())
}

/// The most intervals that overlap at one instant.
pub(crate) fn most_at_once(mut times: Vec<(i64, i64)>) -> usize {
    let mut events: Vec<(i64, i32)> = Vec::new();
    for (start, end) in times.drain(..) {
        events.push((start, 1));
        events.push((end, -1));
    }
    // An end before a start at the same instant: touching is not overlapping.
    events.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in events {
        now += step;
        most = most.max(now);
    }
    usize::try_from(most).unwrap()
}

/// Issue #34: two Request Managers and three Job Runners on one PostgreSQL: 50 requests
/// on 5 clusters (a mutex each) never overlap on a cluster and all complete; 12 on a lock
/// of limit 3 reach 3 at once and never 4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_managers_never_grant_a_lock_twice() {
    let test = "two_managers_never_grant_a_lock_twice";
    let Some(database) = crate::services::NewDatabase::create(test).await else {
        return;
    };
    two_managers_on(&database.url).await;
    database.remove().await;
}

/// The same on MySQL (MariaDB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_managers_on_mysql_never_grant_a_lock_twice() {
    let Some(server) = crate::mysql_url("two_managers_on_mysql_never_grant_a_lock_twice") else {
        return;
    };
    let database = crate::import::MysqlDatabase::create(&server, "locks").await;
    two_managers_on(&database.url).await;
    database.remove().await;
}

/// Two Request Managers on one database with the lock specs, and three Job Runners
/// reporting to both, registered; killed when dropped.
pub(crate) struct Cluster {
    pub(crate) clients: [crate::recovery::Client; 2],
    _services: Vec<crate::Service>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    pub(crate) async fn start(url: &str) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("specs")).unwrap();
        std::fs::write(dir.path().join("specs/locks.yaml"), specs()).unwrap();
        let rm_args = crate::rm_args(url, "3s", &[]);
        let rm1 = crate::Service::start(dir.path(), &rm_args);
        let rm2 = crate::Service::start(dir.path(), &rm_args);
        let rm_urls = format!("{},{}", rm1.url, rm2.url);
        let clients = [
            crate::recovery::Client::new(&rm1.url),
            crate::recovery::Client::new(&rm2.url),
        ];
        let mut services = vec![rm1, rm2];
        for _ in 0..3 {
            let args = crate::jr_args(&rm_urls, "3s", &[]);
            services.push(crate::Service::start(dir.path(), &args));
        }
        crate::eventually(
            "three runners registered",
            Duration::from_secs(10),
            async || {
                let list = clients[0].get("/api/v1/job-runners").await;
                list.as_array().unwrap().len() == 3
            },
        )
        .await;
        Cluster {
            clients,
            _services: services,
            _dir: dir,
        }
    }
}

async fn two_managers_on(url: &str) {
    let cluster = Cluster::start(url).await;
    let clients = &cluster.clients;
    let mut by_cluster: Vec<Vec<String>> = vec![Vec::new(); 5];
    for n in 0..50 {
        let cluster = n % 5;
        let id = clients[n % 2]
            .start(
                "failover",
                serde_json::json!({"cluster": format!("db-{cluster}")}),
            )
            .await;
        by_cluster[cluster].push(id);
    }
    let mut migrations = Vec::new();
    for n in 0..12 {
        migrations.push(clients[n % 2].start("migrate", serde_json::json!({})).await);
    }
    let every = by_cluster.iter().flatten().chain(&migrations);
    for id in every {
        clients[0].wait_state(id, 3, Duration::from_secs(120)).await;
    }
    for (cluster, ids) in by_cluster.iter().enumerate() {
        let mut times = Vec::new();
        for id in ids {
            times.push(job_times(&clients[1], id).await);
        }
        assert_eq!(most_at_once(times.clone()), 1, "db-{cluster}: {times:?}");
    }
    let mut times = Vec::new();
    for id in &migrations {
        times.push(job_times(&clients[0], id).await);
    }
    assert_eq!(most_at_once(times.clone()), 3, "schema-changes: {times:?}");
    // Every lock released with its holder's end.
    assert_eq!(clients[1].get("/api/v1/locks").await, serde_json::json!([]));
}

/// Issue #34: SIGKILL of the Job Runner whose request holds a lock neither leaks the lock
/// nor grants it twice: the holder is recovered on the other runner still holding it,
/// and the waiter starts only once the holder has ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holders_lock_is_kept_through_its_recovery() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("specs")).unwrap();
    std::fs::write(dir.path().join("specs/locks.yaml"), specs()).unwrap();
    let rm = crate::Service::start(
        dir.path(),
        &crate::service_args(
            "rm",
            "sqlite://spindle.db",
            &["--interval", "100ms", "--lease", "1s"],
        ),
    );
    let client = crate::recovery::Client::new(&rm.url);
    let mut runners: Vec<crate::Service> = (0..2)
        .map(|_| crate::Service::start(dir.path(), &crate::jr_args(&rm.url, "1s", &[])))
        .collect();
    crate::eventually(
        "both runners registered",
        Duration::from_secs(10),
        async || {
            let list = client.get("/api/v1/job-runners").await;
            list.as_array().unwrap().len() == 2
        },
    )
    .await;
    let holder = client
        .start(
            "failover",
            serde_json::json!({"cluster": "db-7", "wait": "4s"}),
        )
        .await;
    client.wait_state(&holder, 2, Duration::from_secs(20)).await;
    let waiter = client
        .start(
            "failover",
            serde_json::json!({"cluster": "db-7", "wait": "10ms"}),
        )
        .await;
    let owner = client.request(&holder).await["jrURL"]
        .as_str()
        .unwrap()
        .to_owned();
    runners.iter_mut().find(|r| r.url == owner).unwrap().kill();
    // Until the holder ends: it keeps the lock (recovered on the other runner), and the
    // waiter never starts.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut recovered = false;
    loop {
        // Read in this order: the holder last, so that a holder still running at the
        // last read was running (and holding) at the two reads before it.
        let waiting = client.request(&waiter).await;
        let locks = client.get("/api/v1/locks").await;
        let now = client.request(&holder).await;
        if now["state"] == 3 {
            break;
        }
        assert_eq!(
            waiting["state"], 1,
            "the waiter started while the holder ran: {waiting}"
        );
        assert_eq!(
            locks[0]["holders"][0]["requestId"],
            holder.as_str(),
            "{locks}"
        );
        recovered |= now["state"] == 2 && now["jrURL"].as_str() != Some(owner.as_str());
        assert!(Instant::now() < deadline, "the holder never ended: {now}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(recovered, "the holder was never seen on the other runner");
    client.wait_state(&waiter, 3, Duration::from_secs(30)).await;
    // The waiter's job ran after the holder's last try ended.
    let (_, holder_end) = job_times(&client, &holder).await;
    let (waiter_start, _) = job_times(&client, &waiter).await;
    assert!(waiter_start >= holder_end, "{waiter_start} < {holder_end}");
    assert_eq!(client.get("/api/v1/locks").await, serde_json::json!([]));
}
