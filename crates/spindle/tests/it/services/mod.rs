//! End-to-end: real `spindle` processes talking HTTP — a request runs to COMPLETE, a
//! stop, a Job Runner suspending on SIGTERM and another resuming, and two Request
//! Managers on one PostgreSQL database resuming each chain once. Servers listen on port
//! 0 and say which port they got.

use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Service;

/// gen_specs.py's `sleep-chain`: noop → sleep → noop → sleep → noop.
const SLEEP_CHAIN: &str = "sequences:
  sleep-chain:
    request: true
    args:
      optional:
        - name: sleepTime
          desc: milliseconds each sleep job sleeps
          default: \"60000\"
    nodes:
      first:
        category: job
        type: noop
      sleep-1:
        category: job
        type: sleep
        args: [{expected: duration, given: sleepTime}]
        deps: [first]
      middle:
        category: job
        type: noop
        deps: [sleep-1]
      sleep-2:
        category: job
        type: sleep
        args: [{expected: duration, given: sleepTime}]
        deps: [middle]
      last:
        category: job
        type: noop
        deps: [sleep-2]
";

/// What a Request Manager's `--jr-url` names in these tests: an address this test process
/// holds (bound on port 0, so nothing can take it) that forwards each connection to the
/// Job Runner of the moment, which itself listens on port 0. A new Job Runner takes over
/// by `point_at`; with none, connections are closed at once, as a Job Runner that is down
/// would answer.
struct JrAddress {
    url: String,
    target: std::sync::Arc<std::sync::Mutex<Option<String>>>,
}

impl JrAddress {
    async fn new() -> JrAddress {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let target = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
        let current = std::sync::Arc::clone(&target);
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let Some(to) = current.lock().unwrap().clone() else {
                    continue;
                };
                tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&to).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        JrAddress { url, target }
    }

    /// Forwards new connections to this Job Runner.
    fn point_at(&self, jr: &Service) {
        let address = jr.url.trim_start_matches("http://").to_owned();
        *self.target.lock().unwrap() = Some(address);
    }
}

/// A database name no other test run uses.
/// A database of a test's own on the test PostgreSQL server.
pub(crate) struct NewDatabase {
    admin: sqlx::PgPool,
    name: String,
    pub(crate) url: String,
}

impl NewDatabase {
    /// `None` when the PostgreSQL tests are skipped.
    pub(crate) async fn create(test: &str) -> Option<NewDatabase> {
        let admin_url = crate::postgres_url(test)?;
        let name = unique_database();
        let admin = sqlx::PgPool::connect(&admin_url)
            .await
            .expect("the test PostgreSQL server answers");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&admin)
            .await
            .unwrap();
        let url = url_with_database(&admin_url, &name);
        Some(NewDatabase { admin, name, url })
    }

    /// Drops it (its services stopped first).
    pub(crate) async fn remove(self) {
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE \"{}\" WITH (FORCE)",
            self.name
        )))
        .execute(&self.admin)
        .await;
        self.admin.close().await;
    }
}

fn unique_database() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("spindle_e2e_{}_{nanos}", std::process::id())
}

/// The shared API client (`recovery::Client`), with what these tests ask of it.
use crate::recovery::Client as Api;

/// How long a request may take to reach a state here.
const WAIT: Duration = Duration::from_secs(60);

impl Api {
    async fn create_sleep_chain(&self, args: Value) -> String {
        self.start("sleep-chain", args).await
    }

    async fn state(&self, id: &str) -> u64 {
        self.get(&format!("/api/v1/requests/{id}")).await["state"]
            .as_u64()
            .unwrap()
    }

    /// Waits until a job of the request runs on some Job Runner.
    async fn wait_running_job(&self, id: &str, job: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let running = self
                .get(&format!("/api/v1/status/running?requestId={id}"))
                .await;
            if running["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|j| j["name"] == job)
            {
                return;
            }
            assert!(Instant::now() < deadline, "{job} of {id} never ran");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// (job name, try, state) of every entry, sorted.
    async fn entries(&self, id: &str) -> Vec<(String, u64, u64)> {
        let log = self.get(&format!("/api/v1/requests/{id}/log")).await;
        let mut entries: Vec<(String, u64, u64)> = log
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap().to_owned(),
                    e["try"].as_u64().unwrap(),
                    e["state"].as_u64().unwrap(),
                )
            })
            .collect();
        entries.sort();
        entries
    }
}

fn specs_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("specs")).unwrap();
    std::fs::write(dir.path().join("specs/sleep-chain.yaml"), SLEEP_CHAIN).unwrap();
    dir
}

fn entry(name: &str, try_no: u64, state: u64) -> (String, u64, u64) {
    (name.to_owned(), try_no, state)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_runs_a_request_to_complete_and_stops_another() {
    let dir = specs_dir();
    let server = Service::start(
        dir.path(),
        &crate::service_args("server", "sqlite://spindle.db", &[]),
    );
    let api = Api::new(&server.url);

    let id = api.create_sleep_chain(json!({"sleepTime": "20"})).await;
    api.wait_state(&id, 3, WAIT).await;
    let log = api.entries(&id).await;
    let names: Vec<&str> = log.iter().map(|(name, ..)| name.as_str()).collect();
    assert_eq!(log.len(), 9, "every job once, wrappers included: {names:?}");
    assert!(
        log.iter()
            .all(|(_, try_no, state)| *try_no == 1 && *state == 3),
        "{log:?}"
    );
    let request = api.get(&format!("/api/v1/requests/{id}?chain=true")).await;
    assert_eq!(request["finishedJobs"], 9);
    assert!(
        request["JobChain"]["jobs"]
            .as_object()
            .unwrap()
            .values()
            .all(|j| j["state"] == 3 && j["tries"] == 1)
    );

    let id = api.create_sleep_chain(json!({})).await;
    api.wait_running_job(&id, "sleep-1").await;
    let response = api
        .http
        .put(format!("{}/api/v1/requests/{id}/stop", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    api.wait_state(&id, 6, WAIT).await;
    let log = api.entries(&id).await;
    assert!(log.contains(&entry("sleep-1", 1, 6)), "{log:?}");
    assert!(!log.iter().any(|(name, ..)| name == "sleep-2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runner_stopped_with_sigterm_is_resumed_on_another() {
    let dir = specs_dir();
    let jr_address = JrAddress::new().await;
    let jr_url = jr_address.url.clone();
    let rm = Service::start(
        dir.path(),
        &crate::service_args(
            "rm",
            "sqlite://spindle.db",
            &["--jr-url", &jr_url, "--interval", "200ms"],
        ),
    );
    let rm_url = rm.url.clone();
    // `spindle rm` serves the web UI beside its API, and says where.
    let said = Instant::now();
    while !rm.stderr().contains(&format!("web UI at {rm_url}/")) {
        assert!(said.elapsed() < Duration::from_secs(10), "{}", rm.stderr());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let jr = ["jr", "--listen", "127.0.0.1:0", "--rm-url", &rm_url];
    let mut jr_a = Service::start(dir.path(), &jr);
    jr_address.point_at(&jr_a);
    let api = Api::new(&rm.url);
    let page = api.http.get(format!("{rm_url}/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("data-page=\"list\""));
    assert!(!jr_a.stderr().contains("web UI"), "a Job Runner has no UI");

    let id = api.create_sleep_chain(json!({"sleepTime": "3000"})).await;
    api.wait_running_job(&id, "sleep-1").await;
    let status = jr_a.terminate();
    assert!(status.success(), "the job runner exits cleanly: {status:?}");
    api.wait_state(&id, 7, WAIT).await;

    let jr_b = Service::start(dir.path(), &jr);
    jr_address.point_at(&jr_b);
    api.wait_state(&id, 3, WAIT).await;
    let log = api.entries(&id).await;
    // The interrupted sleep ran again as try 2; nothing else ran twice.
    assert!(log.contains(&entry("sleep-1", 1, 6)), "{log:?}");
    assert!(log.contains(&entry("sleep-1", 2, 3)), "{log:?}");
    assert_eq!(
        log.iter().filter(|(name, ..)| name == "sleep-2").count(),
        1,
        "{log:?}"
    );
    assert_eq!(
        log.iter().filter(|(name, ..)| name == "first").count(),
        1,
        "{log:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_request_managers_on_postgres_resume_each_chain_once() {
    let Some(database) =
        NewDatabase::create("two_request_managers_on_postgres_resume_each_chain_once").await
    else {
        return;
    };
    let url = database.url.clone();

    let dir = specs_dir();
    let jr_address = JrAddress::new().await;
    let jr_url = jr_address.url.clone();
    let rm_args = || -> Vec<String> {
        [
            "rm",
            "--listen",
            "127.0.0.1:0",
            "--specs",
            "specs",
            "--database",
            &url,
            "--jr-url",
            &jr_url,
            "--interval",
            "100ms",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
    };
    let args = rm_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let rm1 = Service::start(dir.path(), &args);
    let api = Api::new(&rm1.url);
    let rm2 = Service::start(dir.path(), &args);
    let rm1_url = rm1.url.clone();
    let jr = ["jr", "--listen", "127.0.0.1:0", "--rm-url", &rm1_url];
    let mut jr_a = Service::start(dir.path(), &jr);
    jr_address.point_at(&jr_a);

    let mut ids = Vec::new();
    for _ in 0..4 {
        ids.push(api.create_sleep_chain(json!({"sleepTime": "3000"})).await);
    }
    for id in &ids {
        api.wait_running_job(id, "sleep-1").await;
    }
    assert!(jr_a.terminate().success());
    for id in &ids {
        api.wait_state(id, 7, WAIT).await;
    }
    let jr_b = Service::start(dir.path(), &jr);
    jr_address.point_at(&jr_b);
    for id in &ids {
        api.wait_state(id, 3, WAIT).await;
        let log = api.entries(id).await;
        assert_eq!(
            log.iter()
                .filter(|(name, _, state)| name == "sleep-1" && *state == 3)
                .count(),
            1,
            "{log:?}"
        );
        assert_eq!(
            log.iter().filter(|(name, ..)| name == "sleep-2").count(),
            1,
            "{log:?}"
        );
    }
    drop((jr_b, rm1, rm2));
    database.remove().await;
}

/// The same server URL with another database.
fn url_with_database(url: &str, database: &str) -> String {
    match url.rfind('/') {
        Some(slash) if slash > "postgres://".len() => format!("{}/{database}", &url[..slash]),
        _ => format!("{url}/{database}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_created_while_no_job_runner_answers_waits_pending() {
    let dir = specs_dir();
    let jr_address = JrAddress::new().await;
    let jr_url = jr_address.url.clone();
    let rm = Service::start(
        dir.path(),
        &crate::service_args(
            "rm",
            "sqlite://spindle.db",
            &["--jr-url", &jr_url, "--interval", "100ms"],
        ),
    );
    let api = Api::new(&rm.url);
    let rm_url = rm.url.clone();
    let started = Instant::now();
    let id = api.create_sleep_chain(json!({"sleepTime": "10"})).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "accepted without waiting for a job runner"
    );
    assert_eq!(api.state(&id).await, 1);
    let jr = Service::start(
        dir.path(),
        &["jr", "--listen", "127.0.0.1:0", "--rm-url", &rm_url],
    );
    jr_address.point_at(&jr);
    api.wait_state(&id, 3, WAIT).await;
}

mod explained;
mod startup;
