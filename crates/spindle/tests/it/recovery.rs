//! Issue #11, end to end with real processes: a `spindle server` killed with SIGKILL and
//! started again resumes what it ran at once; a Job Runner killed with SIGKILL has its
//! request recovered on another; the programs of shell jobs die with their runner. The
//! chaos test (two Request Managers, three Job Runners, a PostgreSQL server of its own
//! that it stops and starts) is in `chaos.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Service;

/// `work`: one `shell-command` job per item. Each execution appends `TAG ITEM PID` to
/// `MARKS/executions`, then waits until `MARKS/release` exists (at most `pause` seconds
/// if given: `0` waits for the release only).
pub(crate) const WORK: &str = r#"sequences:
  work:
    request: true
    args:
      required:
        - name: marks
          desc: the directory where every execution is recorded
        - name: tag
          desc: what an execution of this request writes first
      optional:
        - name: items
          desc: one job per item
          default: [a]
        - name: shell
          desc: the program
          default: sh
        - name: script
          desc: what each job runs
          default:
            - "-c"
            - 'echo "$SPINDLE_ARG_TAG $SPINDLE_ARG_ITEM $$" >> "$SPINDLE_ARG_MARKS/executions"; while [ ! -e "$SPINDLE_ARG_MARKS/release" ]; do sleep 0.05; done'
    nodes:
      each-item:
        category: sequence
        type: one-item
        each: [items:item]
        args: [{expected: marks}, {expected: tag}, {expected: shell}, {expected: script}]
  one-item:
    args:
      required:
        - name: marks
          desc: as in work
        - name: tag
          desc: as in work
        - name: shell
          desc: as in work
        - name: script
          desc: as in work
        - name: item
          desc: the item
    nodes:
      mark:
        category: job
        type: shell-command
        args:
          - {expected: cmd, given: shell}
          - {expected: args, given: script}
          - {expected: marks}
          - {expected: tag}
          - {expected: item}
"#;

pub(crate) fn work_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("specs")).unwrap();
    std::fs::create_dir(dir.path().join("marks")).unwrap();
    std::fs::write(dir.path().join("specs/work.yaml"), WORK).unwrap();
    dir
}

/// The recorded executions: (tag, item, pid).
pub(crate) fn executions(marks: &Path) -> Vec<(String, String, i32)> {
    std::fs::read_to_string(marks.join("executions"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            Some((
                words.next()?.to_owned(),
                words.next()?.to_owned(),
                words.next()?.parse().ok()?,
            ))
        })
        .collect()
}

/// Whether process `pid` still runs (a zombie does not).
pub(crate) fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().to_owned())
        })
        .is_some_and(|rest| !rest.starts_with('Z'))
}

/// A client of one Request Manager's API.
/// The id of the request a create answered with 201 (the test fails with the answer if not).
pub(crate) async fn created_id(response: reqwest::Response) -> String {
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 201, "{body}");
    body["id"].as_str().unwrap().to_owned()
}

pub(crate) struct Client {
    pub(crate) base: String,
    pub(crate) http: reqwest::Client,
}

impl Client {
    pub(crate) fn new(base: &str) -> Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Client {
            base: base.to_owned(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(20))
                .build()
                .unwrap(),
        }
    }

    pub(crate) async fn create(&self, marks: &Path, tag: &str, items: &[&str]) -> String {
        self.create_with(marks, tag, items, None).await
    }

    /// A `work` request, with its own script if given. Retried while the Request Manager
    /// does not answer (it may be restarting, or its database down).
    pub(crate) async fn create_with(
        &self,
        marks: &Path,
        tag: &str,
        items: &[&str],
        script: Option<&Value>,
    ) -> String {
        let mut args = json!({"marks": marks, "tag": tag, "items": items});
        if let Some(script) = script {
            args["script"] = script.clone();
        }
        let until = Instant::now() + Duration::from_secs(30);
        let response = loop {
            let sent = self
                .http
                .post(format!("{}/api/v1/requests", self.base))
                .json(&json!({"type": "work", "args": args}))
                .send()
                .await;
            match sent {
                Ok(response) if response.status() != 503 => break response,
                other => {
                    assert!(Instant::now() < until, "creating a request: {other:?}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        created_id(response).await
    }

    /// Starts a request of `request_type` with `args`; its id.
    pub(crate) async fn start(&self, request_type: &str, args: Value) -> String {
        let response = self
            .http
            .post(format!("{}/api/v1/requests", self.base))
            .json(&json!({"type": request_type, "args": args}))
            .send()
            .await
            .unwrap();
        created_id(response).await
    }

    /// GET of a path; `None` while the Request Manager does not answer or answers 503.
    pub(crate) async fn try_get(&self, path: &str) -> Option<Value> {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .ok()?;
        if response.status() == 503 {
            return None;
        }
        assert!(
            response.status().is_success(),
            "GET {path}: {}",
            response.status()
        );
        response.json().await.ok()
    }

    pub(crate) async fn get(&self, path: &str) -> Value {
        self.try_get(path)
            .await
            .unwrap_or_else(|| panic!("GET {path}: no answer"))
    }

    pub(crate) async fn request(&self, id: &str) -> Value {
        self.get(&format!("/api/v1/requests/{id}")).await
    }

    pub(crate) async fn wait_state(&self, id: &str, state: u64, deadline: Duration) {
        let until = Instant::now() + deadline;
        loop {
            let now = self
                .try_get(&format!("/api/v1/requests/{id}"))
                .await
                .map(|r| r["state"].as_u64().unwrap());
            if now == Some(state) {
                return;
            }
            // Given up on: why it ended otherwise, from its tries that did not complete.
            if Instant::now() >= until {
                let log = self.try_get(&format!("/api/v1/requests/{id}/log")).await;
                let errors: Vec<String> = log
                    .iter()
                    .filter_map(|log| log.as_array())
                    .flatten()
                    .filter(|entry| entry["state"] != 3)
                    .map(|entry| format!("{}: {}", entry["name"], entry["error"]))
                    .collect();
                panic!(
                    "request {id} stayed in state {now:?}, expected {state}; tries that did not complete: {errors:?}"
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Per job name: (try, state, error) of each entry, by try.
    pub(crate) async fn tries(&self, id: &str) -> BTreeMap<String, Vec<(u64, u64, String)>> {
        let log = self.get(&format!("/api/v1/requests/{id}/log")).await;
        let mut tries: BTreeMap<String, Vec<(u64, u64, String)>> = BTreeMap::new();
        for entry in log.as_array().unwrap() {
            tries
                .entry(entry["jobId"].as_str().unwrap().to_owned())
                .or_default()
                .push((
                    entry["try"].as_u64().unwrap(),
                    entry["state"].as_u64().unwrap(),
                    entry["error"].as_str().unwrap_or_default().to_owned(),
                ));
        }
        for entries in tries.values_mut() {
            entries.sort();
        }
        tries
    }
}

const STOPPED: u64 = 6;
const COMPLETE: u64 = 3;
const RUNNING: u64 = 2;

fn server_args(lease: &str) -> Vec<String> {
    [
        "server",
        "--listen",
        "127.0.0.1:0",
        "--specs",
        "specs",
        "--database",
        "sqlite://spindle.db",
        "--interval",
        "200ms",
        "--lease",
        lease,
    ]
    .map(str::to_owned)
    .to_vec()
}

fn args(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// The job of `mark` in a request's chain (the one shell job).
async fn mark_jobs(client: &Client, id: &str) -> Vec<String> {
    items_of(client, id).await.into_keys().collect()
}

/// The item each program job of a request runs for, by job id.
pub(crate) async fn items_of(client: &Client, id: &str) -> BTreeMap<String, String> {
    let chain = client
        .get(&format!("/api/v1/requests/{id}/job-chain"))
        .await;
    chain["jobs"]
        .as_object()
        .unwrap()
        .values()
        .filter(|job| job["type"] == "shell-command")
        .map(|job| {
            (
                job["id"].as_str().unwrap().to_owned(),
                job["each"]["item"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_request_resumes_it_at_once_when_started_again() {
    let dir = work_dir();
    let marks: PathBuf = dir.path().join("marks");
    // A lease far longer than the test: only knowing that the old process is gone can
    // resume the request in time.
    let server_args = server_args("1h");
    let mut server = Service::start(dir.path(), &args(&server_args));
    let client = Client::new(&server.url);
    let id = client.create(&marks, "t1", &["a"]).await;
    crate::eventually("the job runs", Duration::from_secs(30), async || {
        executions(&marks).len() == 1
    })
    .await;
    let first_pid = executions(&marks)[0].2;
    server.kill();
    crate::eventually(
        "the job's program died with its server",
        Duration::from_secs(10),
        async || !running(first_pid),
    )
    .await;

    std::fs::write(marks.join("release"), "").unwrap();
    let server = Service::start(dir.path(), &args(&server_args));
    let client = Client::new(&server.url);
    client
        .wait_state(&id, COMPLETE, Duration::from_secs(30))
        .await;
    let job = &mark_jobs(&client, &id).await[0];
    let tries = client.tries(&id).await;
    let mark = &tries[job];
    assert_eq!(mark.len(), 2, "{mark:?}");
    assert_eq!((mark[0].0, mark[0].1), (1, STOPPED));
    assert!(
        mark[0].2.starts_with("interrupted: its job runner"),
        "{mark:?}"
    );
    assert_eq!((mark[1].0, mark[1].1), (2, COMPLETE));
    assert_eq!(executions(&marks).len(), 2);
    // Every other job ran once.
    assert!(
        tries
            .iter()
            .filter(|(id, _)| *id != job)
            .all(|(_, t)| t.len() == 1),
        "{tries:?}"
    );
    let runners = client.get("/api/v1/job-runners").await;
    let states: Vec<&str> = runners
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["live", "lost"], "{runners}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runner_killed_mid_request_is_replaced_by_a_live_one() {
    let dir = work_dir();
    let marks: PathBuf = dir.path().join("marks");
    let rm = Service::start(
        dir.path(),
        &crate::service_args(
            "rm",
            "sqlite://spindle.db",
            &["--interval", "100ms", "--lease", "1s"],
        ),
    );
    let client = Client::new(&rm.url);
    let jr = [
        "jr",
        "--listen",
        "127.0.0.1:0",
        "--rm-url",
        &rm.url,
        "--lease",
        "1s",
    ];
    let mut runners: BTreeMap<String, Service> = BTreeMap::new();
    for _ in 0..2 {
        let runner = Service::start(dir.path(), &jr);
        runners.insert(runner.url.clone(), runner);
    }
    crate::eventually(
        "both runners registered",
        Duration::from_secs(10),
        async || {
            let list = futures_block(client.get("/api/v1/job-runners"));
            list.as_array().unwrap().len() == 2
        },
    )
    .await;
    let id = client.create(&marks, "t1", &["a"]).await;
    crate::eventually("the job runs", Duration::from_secs(30), async || {
        executions(&marks).len() == 1
    })
    .await;
    let request = client.request(&id).await;
    assert_eq!(request["state"], RUNNING);
    let owner = request["jrURL"].as_str().unwrap().to_owned();
    let killed_at = Instant::now();
    runners.get_mut(&owner).unwrap().kill();
    let pid = executions(&marks)[0].2;
    crate::eventually(
        "the job's program died with its runner",
        Duration::from_secs(10),
        async || !running(pid),
    )
    .await;
    crate::eventually("the job runs again", Duration::from_secs(30), async || {
        executions(&marks).len() == 2
    })
    .await;
    let recovered_in = killed_at.elapsed();
    std::fs::write(marks.join("release"), "").unwrap();
    client
        .wait_state(&id, COMPLETE, Duration::from_secs(30))
        .await;
    let request = client.request(&id).await;
    assert_ne!(request["jrURL"].as_str(), Some(owner.as_str()));
    let job = &mark_jobs(&client, &id).await[0];
    let mark = &client.tries(&id).await[job];
    assert_eq!(
        mark.iter().map(|t| (t.0, t.1)).collect::<Vec<_>>(),
        [(1, STOPPED), (2, COMPLETE)],
        "{mark:?}"
    );
    assert!(mark[0].2.contains("was lost"), "{mark:?}");
    let list = client.get("/api/v1/job-runners").await;
    let records = list.as_array().unwrap();
    let at = |url: &str, state: &str| {
        records
            .iter()
            .any(|r| r["url"] == url && r["state"] == state)
    };
    assert!(at(&owner, "lost") && !at(&owner, "live"), "{list}");
    // The other runner is live; on a busy machine its 1 s lease may have lapsed once
    // (it then registered again: a lost record and a live one at its URL).
    for record in records.iter().filter(|r| r["url"] != owner.as_str()) {
        assert!(at(record["url"].as_str().unwrap(), "live"), "{list}");
    }
    let line = format!(
        "a_job_runner_killed_mid_request_is_replaced_by_a_live_one: SIGKILL to the job running again elsewhere in {} ms (lease 1s, interval 100ms)\n",
        recovered_in.as_millis()
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
}

/// Runs a future to its end from a synchronous closure (the waits above poll).
fn futures_block<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(future))
}

/// The chaos test's checks for `spindle server`: killed with SIGKILL again and again while
/// requests run, then started once more: every request completes, each job's tries are
/// 1..n, every execution has a logged try, and no program runs on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_again_and_again_finishes_every_request() {
    let dir = work_dir();
    let marks: PathBuf = dir.path().join("marks");
    let script = json!([
        "-c",
        "echo \"$SPINDLE_ARG_TAG $SPINDLE_ARG_ITEM $$\" >> \"$SPINDLE_ARG_MARKS/executions\"; exec sleep 1.5"
    ]);
    let server_args = server_args("1h");
    let mut created: Vec<(String, String)> = Vec::new();
    let mut kills = 0;
    for round in 0..3 {
        let mut server = Service::start(dir.path(), &args(&server_args));
        let client = Client::new(&server.url);
        for n in 0..4 {
            let tag = format!("r{round}x{n}");
            let id = client
                .create_with(&marks, &tag, &["a", "b"], Some(&script))
                .await;
            created.push((tag, id));
        }
        tokio::time::sleep(Duration::from_millis(600 + 200 * round)).await;
        server.kill();
        kills += 1;
    }
    let server = Service::start(dir.path(), &args(&server_args));
    let client = Client::new(&server.url);
    let mut interrupted = 0;
    for (tag, id) in &created {
        client
            .wait_state(id, COMPLETE, Duration::from_secs(60))
            .await;
        let chain = client
            .get(&format!("/api/v1/requests/{id}/job-chain"))
            .await;
        for (job_id, tries) in client.tries(id).await {
            let numbers: Vec<u64> = tries.iter().map(|t| t.0).collect();
            let expected: Vec<u64> = (1..=tries.len() as u64).collect();
            assert_eq!(numbers, expected, "{id} {job_id}: {tries:?}");
            assert_eq!(
                tries.last().unwrap().1,
                COMPLETE,
                "{id} {job_id}: {tries:?}"
            );
            interrupted += tries
                .iter()
                .filter(|t| t.2.starts_with("interrupted:"))
                .count();
            let job = &chain["jobs"][&job_id];
            if job["type"] == "shell-command" {
                let item = job["each"]["item"].as_str().unwrap();
                let runs = executions(&marks)
                    .iter()
                    .filter(|(t, i, _)| t == tag && i == item)
                    .count();
                assert!(
                    runs >= 1 && runs <= tries.len(),
                    "{id} {job_id}: {runs} executions, tries {tries:?}"
                );
            }
        }
    }
    for (tag, item, pid) in executions(&marks) {
        crate::eventually(
            &format!("{tag} {item}'s program (pid {pid}) has ended"),
            Duration::from_secs(10),
            async || !running(pid),
        )
        .await;
    }
    let line = format!(
        "a_server_killed_again_and_again_finishes_every_request: {} requests, {kills} kills, {} executions, {interrupted} interrupted tries\n",
        created.len(),
        executions(&marks).len()
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
}

/// A proxy in front of a Request Manager that forwards everything, but while told to,
/// refuses a Job Runner's final states for good (a 404, as something that is not a
/// Request Manager would answer).
struct RefusingProxy {
    url: String,
    state: std::sync::Arc<ProxyState>,
}

struct ProxyState {
    target: String,
    http: reqwest::Client,
    refusing: std::sync::atomic::AtomicBool,
    refused: std::sync::atomic::AtomicUsize,
}

impl RefusingProxy {
    async fn start(target: &str) -> RefusingProxy {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let state = std::sync::Arc::new(ProxyState {
            target: target.to_owned(),
            http: reqwest::Client::new(),
            refusing: std::sync::atomic::AtomicBool::new(false),
            refused: std::sync::atomic::AtomicUsize::new(0),
        });
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(std::sync::Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        RefusingProxy { url, state }
    }
}

async fn forward(
    axum::extract::State(proxy): axum::extract::State<std::sync::Arc<ProxyState>>,
    request: axum::extract::Request,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    use std::sync::atomic::Ordering;
    let (parts, body) = request.into_parts();
    if proxy.refusing.load(Ordering::SeqCst) && parts.uri.path().ends_with("/finish") {
        proxy.refused.fetch_add(1, Ordering::SeqCst);
        return (
            axum::http::StatusCode::NOT_FOUND,
            r#"{"message": "no such route here", "httpStatus": 404}"#,
        )
            .into_response();
    }
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut sent = proxy
        .http
        .request(parts.method, format!("{}{path}", proxy.target))
        .body(body);
    for (name, value) in &parts.headers {
        if name != axum::http::header::HOST {
            sent = sent.header(name, value);
        }
    }
    let Ok(answer) = sent.send().await else {
        return axum::http::StatusCode::BAD_GATEWAY.into_response();
    };
    let (status, headers) = (answer.status(), answer.headers().clone());
    let mut response = (status, answer.bytes().await.unwrap_or_default()).into_response();
    for (name, value) in &headers {
        if name != axum::http::header::CONTENT_LENGTH
            && name != axum::http::header::TRANSFER_ENCODING
        {
            response.headers_mut().insert(name, value.clone());
        }
    }
    response
}

/// A chain whose end never reaches a Request Manager (refused for good by something
/// between the runner and the Request Managers) does not leave its request RUNNING on
/// the live runner that forgot it: the runner's lease renewals stop naming it, the
/// Request Manager takes it back and resumes it. The entries that went with the lost
/// end went with it: a job whose entry was among them ran, its start stored, so it is
/// logged as interrupted and runs again (at least once, every execution logged).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_end_was_lost_is_taken_back_from_its_live_runner() {
    use std::sync::atomic::Ordering;
    let dir = work_dir();
    let marks: PathBuf = dir.path().join("marks");
    let lease = "2s";
    let rm = Service::start(
        dir.path(),
        &crate::rm_args("sqlite://spindle.db", lease, &[]),
    );
    let proxy = RefusingProxy::start(&rm.url).await;
    let _jr = Service::start(dir.path(), &crate::jr_args(&proxy.url, lease, &[]));
    let client = Client::new(&rm.url);
    proxy.state.refusing.store(true, Ordering::SeqCst);
    std::fs::write(marks.join("release"), "").unwrap();
    let id = client.create(&marks, "t1", &["a"]).await;
    crate::eventually(
        "the runner's final state was refused",
        Duration::from_secs(30),
        async || proxy.state.refused.load(Ordering::SeqCst) > 0,
    )
    .await;
    proxy.state.refusing.store(false, Ordering::SeqCst);
    client
        .wait_state(&id, COMPLETE, Duration::from_secs(30))
        .await;
    assert!(
        rm.stderr().contains("its job runner no longer runs it"),
        "{}",
        rm.stderr()
    );
    // Every job complete on its last try, tries 1..n; the shell job ran once, or twice if
    // its entry was lost with the end (then its first try is logged interrupted).
    let tries = client.tries(&id).await;
    for (job, t) in &tries {
        let numbers: Vec<u64> = t.iter().map(|t| t.0).collect();
        assert_eq!(
            numbers,
            (1..=t.len() as u64).collect::<Vec<_>>(),
            "{job}: {t:?}"
        );
        assert_eq!(t.last().unwrap().1, COMPLETE, "{job}: {t:?}");
    }
    let job = &mark_jobs(&client, &id).await[0];
    let mark = &tries[job];
    let runs = executions(&marks).len();
    assert!(
        runs >= 1 && runs <= mark.len(),
        "{runs} executions: {mark:?}"
    );
    if mark.len() == 2 {
        assert_eq!(mark[0].1, STOPPED, "{mark:?}");
        assert!(mark[0].2.contains("no longer ran the request"), "{mark:?}");
    }
}
