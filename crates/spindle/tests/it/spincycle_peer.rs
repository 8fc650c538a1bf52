//! Against Spin Cycle 2.1.1's own binaries (issue #47), as a Spin Cycle team would move:
//! its own Request Manager and Job Runner write a MySQL database with requests in every
//! state it has, a suspended one among them, that `spindle import spincycle` copies into
//! each backend, where a Spindle server resumes it to COMPLETE (on the built-in job types,
//! and on a Go factory shaped like Spin Cycle's dev jobs, served under their names), while
//! Spin Cycle, started again, leaves it alone; and a Spindle Request Manager runs Spin
//! Cycle's `test` spec, a failing `shell-command`, a stopped request and a suspended and
//! resumed one on a Spin Cycle Job Runner, with the job log entries Spin Cycle's own
//! Request Manager records for the same, beside a Spindle Job Runner that takes what the
//! Spin Cycle one lacks.
//!
//! Needs `SPINDLE_SPINCYCLE_PEER` (the folder of Spin Cycle's binaries; `.ci/run` sets
//! it) and the test MariaDB, else skipped with a line that says so.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::import::MysqlDatabase;
use crate::recovery::Client;
use crate::{Service, eventually, mysql_url, run, spindle};

const RUNNING: u64 = 2;
const COMPLETE: u64 = 3;
const FAIL: u64 = 4;
const STOPPED: u64 = 6;
const SUSPENDED: u64 = 7;

/// A spec of the test's own that Spin Cycle's linter takes: one `shell-command` job.
const FAIL_SPEC: &str = r#"---
sequences:
  fail:
    request: true
    args:
      required:
        - name: cmd
      optional:
        - name: args
          default: ""
    nodes:
      run:
        category: job
        type: shell-command
        args:
          - expected: cmd
            given: cmd
          - expected: args
            given: args
        sets: []
        deps: []
"#;

/// A request only a Spindle Job Runner can run (Spin Cycle has no `approval`).
const ASK_SPEC: &str = r#"sequences:
  ask:
    request: true
    nodes:
      gate:
        category: job
        type: approval
"#;

/// A request type with a list default (Spindle's), for Spin Cycle's `spinc start`.
const RELEASE_SPEC: &str = r#"sequences:
  release:
    request: true
    args:
      required:
        - name: question
          desc: what is asked
      optional:
        - name: hosts
          desc: where it goes
          default: [db1, db2]
    nodes:
      done:
        category: job
        type: noop
"#;

/// Spin Cycle 2.1.1's folder (`bin/`, its schema, its dev `test` spec) when
/// `SPINDLE_SPINCYCLE_PEER` names it (`.ci/run` sets it to the shared peers' folder);
/// else the test is skipped, and one line says so.
fn peer(test: &str) -> Option<PathBuf> {
    crate::shared_folder(
        test,
        "SPINDLE_SPINCYCLE_PEER",
        "it runs Spin Cycle 2.1.1's own binaries (its peers/spincycle-2.1.1 folder)",
        &["bin/job-runner", "request_manager_schema.sql"],
    )
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Spin Cycle's `SPINCYCLE_MYSQL_DSN` of a `mysql://USER[:PASSWORD]@HOST:PORT/DATABASE`.
fn dsn(url: &str) -> String {
    let rest = url.trim_start_matches("mysql://");
    let (login, rest) = rest.split_once('@').unwrap();
    let (address, database) = rest.split_once('/').unwrap();
    let (user, password) = login.split_once(':').unwrap_or((login, ""));
    format!("{user}:{password}@tcp({address})/{database}")
}

/// A Spin Cycle database: a MySQL database of the test's own with Spin Cycle's schema.
async fn spincycle_database(server: &str, peer: &Path) -> MysqlDatabase {
    let db = MysqlDatabase::create(server, "sc").await;
    let pool = sqlx::mysql::MySqlPool::connect(&db.url).await.unwrap();
    let schema = std::fs::read_to_string(peer.join("request_manager_schema.sql")).unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(schema))
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    db
}

/// Spin Cycle's side of a test: its specs, its database and the ports of its services.
struct SpinCycle {
    peer: PathBuf,
    dir: tempfile::TempDir,
    dsn: String,
    rm_port: u16,
    jr_port: u16,
}

impl SpinCycle {
    fn new(peer: &Path, db: &MysqlDatabase) -> SpinCycle {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("specs")).unwrap();
        std::fs::copy(
            peer.join("dev-test.yaml"),
            dir.path().join("specs/dev-test.yaml"),
        )
        .unwrap();
        std::fs::write(dir.path().join("specs/fail.yaml"), FAIL_SPEC).unwrap();
        SpinCycle {
            peer: peer.to_owned(),
            dir,
            dsn: dsn(&db.url),
            rm_port: free_port(),
            jr_port: free_port(),
        }
    }

    /// A directory for Spindle's side, with the same specs in `specs/`.
    fn spindle_dir(&self) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("specs")).unwrap();
        for file in ["dev-test.yaml", "fail.yaml"] {
            std::fs::copy(
                self.dir.path().join("specs").join(file),
                dir.path().join("specs").join(file),
            )
            .unwrap();
        }
        dir
    }

    fn rm_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.rm_port)
    }

    fn jr_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.jr_port)
    }

    /// Spin Cycle's Request Manager, handing chains to this side's Job Runner.
    fn request_manager(&self) -> Peer {
        Peer::start(
            &self.peer.join("bin/request-manager"),
            &self.dir.path().join("rm"),
            &[
                ("SPINCYCLE_MYSQL_DSN", self.dsn.clone()),
                (
                    "SPINCYCLE_SPECS_DIR",
                    self.dir.path().join("specs").display().to_string(),
                ),
                ("SPINCYCLE_JR_CLIENT_URL", self.jr_url()),
                ("SPINCYCLE_RM_CLIENT_URL", self.rm_url()),
                (
                    "SPINCYCLE_SERVER_ADDR",
                    format!("127.0.0.1:{}", self.rm_port),
                ),
            ],
            self.rm_port,
        )
    }

    /// Spin Cycle's Job Runner on `port`, reporting to `rm_url`.
    fn job_runner(&self, port: u16, rm_url: &str) -> Peer {
        Peer::start(
            &self.peer.join("bin/job-runner"),
            &self.dir.path().join(format!("jr-{port}")),
            &[
                ("SPINCYCLE_RM_CLIENT_URL", rm_url.to_owned()),
                ("SPINCYCLE_SERVER_ADDR", format!("127.0.0.1:{port}")),
            ],
            port,
        )
    }
}

/// One of Spin Cycle's services, started in an empty directory of its own (it would read
/// a `config/` there) with its output in `out.log`. Killed when dropped.
struct Peer {
    child: Child,
    log: PathBuf,
}

impl Peer {
    fn start(program: &Path, dir: &Path, env: &[(&str, String)], port: u16) -> Peer {
        std::fs::create_dir_all(dir).unwrap();
        let log = dir.join("out.log");
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(program)
            .current_dir(dir)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|err| panic!("{} starts: {err}", program.display()));
        let mut peer = Peer { child, log };
        let until = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                peer.child.try_wait().unwrap().is_none() && Instant::now() < until,
                "{} did not listen on {port}: {}",
                program.display(),
                peer.output()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        peer
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([format!("-{signal}"), self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }

    /// SIGTERM, and its end (a Job Runner suspends its chains first).
    fn terminate(mut self) {
        self.signal("TERM");
        let until = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < until, "it did not end: {}", self.output());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A job log entry without what differs from run to run (ids, times): name, type,
/// try, state, exit, error, stdout, stderr.
type Entry = (String, String, u64, u64, i64, String, String, String);

async fn entries(api: &Client, id: &str) -> Vec<Entry> {
    let log = api.get(&format!("/api/v1/requests/{id}/log")).await;
    let text = |e: &Value, k: &str| e[k].as_str().unwrap_or_default().to_owned();
    let mut entries: Vec<Entry> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                text(e, "name"),
                text(e, "type"),
                e["try"].as_u64().unwrap(),
                e["state"].as_u64().unwrap(),
                e["exit"].as_i64().unwrap_or_default(),
                text(e, "error"),
                text(e, "stdout"),
                text(e, "stderr"),
            )
        })
        .collect();
    entries.sort();
    entries
}

/// Waits until the request's `noop` job has completed (its sleeps start then; a stop or
/// a SIGTERM meant to land while they run waits for them too: [`waits_run`]).
async fn noop_done(api: &Client, id: &str) {
    eventually(
        "the request's noop job completed",
        Duration::from_secs(30),
        async || {
            entries(api, id)
                .await
                .iter()
                .any(|e| e.0 == "noop" && e.3 == COMPLETE)
        },
    )
    .await;
}

/// Waits until both of the request's `wait` jobs run, so that a stop or a SIGTERM sent
/// next lands while they run, however loaded the machine (sent after the noop alone, a
/// busy CI machine saw one run catch them before they started and the other after).
async fn waits_run(api: &Client, id: &str) {
    eventually(
        "the request's two wait jobs run",
        Duration::from_secs(30),
        async || {
            let Ok(response) = api
                .http
                .get(format!("{}/api/v1/status/running", api.base))
                .send()
                .await
            else {
                return false;
            };
            let Ok(status) = response.json::<serde_json::Value>().await else {
                return false;
            };
            status["jobs"].as_array().is_some_and(|jobs| {
                jobs.iter()
                    .filter(|job| job["requestId"] == id && job["name"] == "wait")
                    .count()
                    >= 2
            })
        },
    )
    .await;
}

async fn stop(api: &Client, id: &str) {
    let response = api
        .http
        .put(format!("{}/api/v1/requests/{id}/stop", api.base))
        .send()
        .await
        .unwrap();
    assert!(
        response.status().is_success(),
        "stop: {}",
        response.status()
    );
}

/// The ids of the scenarios both Request Managers run on a Spin Cycle Job Runner.
struct Scenarios {
    complete: String,
    fail: String,
    stopped: String,
    resumed: String,
}

/// Runs `test`, a failing `fail`, a stopped `test` and a `test` whose Job Runner is
/// stopped with SIGTERM (it suspends the chain) and started again (the Request Manager
/// resumes it) through the Request Manager `api`, whose chains go to the Spin Cycle Job
/// Runner on `jr_port`.
async fn scenarios(sc: &SpinCycle, api: &Client, jr_port: u16, rm_url: &str) -> (Scenarios, Peer) {
    let jr = sc.job_runner(jr_port, rm_url);
    let complete = api.start("test", json!({"sleepTime": "100"})).await;
    api.wait_state(&complete, COMPLETE, Duration::from_secs(60))
        .await;
    let fail = api.start("fail", json!({"cmd": "false"})).await;
    api.wait_state(&fail, FAIL, Duration::from_secs(60)).await;
    let stopped = api.start("test", json!({"sleepTime": "60000"})).await;
    noop_done(api, &stopped).await;
    waits_run(api, &stopped).await;
    stop(api, &stopped).await;
    api.wait_state(&stopped, STOPPED, Duration::from_secs(60))
        .await;
    // Its sleeps long enough that the SIGTERM lands while they run, however loaded the
    // machine (at 5 s, a reference run on a busy CI machine saw them end first, and its
    // job log differed from ours for that alone).
    let resumed = api.start("test", json!({"sleepTime": "15000"})).await;
    noop_done(api, &resumed).await;
    waits_run(api, &resumed).await;
    jr.terminate();
    api.wait_state(&resumed, SUSPENDED, Duration::from_secs(30))
        .await;
    let jr = sc.job_runner(jr_port, rm_url);
    // Spin Cycle's resumer runs every 10 s.
    api.wait_state(&resumed, COMPLETE, Duration::from_secs(60))
        .await;
    (
        Scenarios {
            complete,
            fail,
            stopped,
            resumed,
        },
        jr,
    )
}

/// A Spindle Request Manager hands chains to a Spin Cycle Job Runner (named in its
/// `runners:` with its job types) and to a registered Spindle Job Runner at once; what
/// the Spin Cycle runner reports is taken as Spin Cycle's Request Manager takes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spindle_request_manager_drives_spin_cycles_job_runner_with_spin_cycles_job_log() {
    let test = "a_spindle_request_manager_drives_spin_cycles_job_runner_with_spin_cycles_job_log";
    let (Some(peer), Some(server)) = (peer(test), mysql_url(test)) else {
        return;
    };
    let db = spincycle_database(&server, &peer).await;
    let sc = SpinCycle::new(&peer, &db);

    // Spin Cycle's own pair: what its Request Manager records.
    let theirs_rm = sc.request_manager();
    let theirs = Client::new(&sc.rm_url());
    let (reference, theirs_jr) = scenarios(&sc, &theirs, sc.jr_port, &sc.rm_url()).await;
    drop(theirs_jr);

    // A Spindle Request Manager, a Spin Cycle Job Runner and a Spindle one.
    let dir = sc.spindle_dir();
    std::fs::write(dir.path().join("specs/ask.yaml"), ASK_SPEC).unwrap();
    std::fs::write(dir.path().join("specs/release.yaml"), RELEASE_SPEC).unwrap();
    let sc_jr_port = free_port();
    std::fs::write(
        dir.path().join("spindle.yaml"),
        format!(
            "runners:\n  - url: http://127.0.0.1:{sc_jr_port}\n    types: [noop, sleep, shell-command]\n"
        ),
    )
    .unwrap();
    let rm = Service::start(
        dir.path(),
        &crate::rm_args("sqlite://spindle.db", "2s", &["--config", "spindle.yaml"]),
    );
    let ours = Client::new(&rm.url);
    let (mine, sc_jr) = scenarios(&sc, &ours, sc_jr_port, &rm.url).await;
    for (what, theirs_id, ours_id) in [
        ("test", &reference.complete, &mine.complete),
        ("a failing shell-command", &reference.fail, &mine.fail),
        ("a stopped request", &reference.stopped, &mine.stopped),
        (
            "a suspended and resumed request",
            &reference.resumed,
            &mine.resumed,
        ),
    ] {
        assert_eq!(
            entries(&ours, ours_id).await,
            entries(&theirs, theirs_id).await,
            "{what}: the job log a Spindle Request Manager records is Spin Cycle's"
        );
    }
    let failed = entries(&ours, &mine.fail).await;
    assert!(
        failed
            .iter()
            .any(|e| e.0 == "run" && e.4 == 1 && e.5 == "exit status 1"),
        "{failed:?}"
    );

    // A Spindle Job Runner beside it: Spin Cycle's types go to either, what the Spin
    // Cycle runner lacks to the Spindle one only.
    let spindle_jr = Service::start(dir.path(), &crate::jr_args(&rm.url, "2s", &[]));
    let ask = ours.start("ask", json!({})).await;
    ours.wait_state(&ask, RUNNING, Duration::from_secs(30))
        .await;
    assert_eq!(ours.request(&ask).await["jrURL"], spindle_jr.url);
    stop(&ours, &ask).await;
    ours.wait_state(&ask, STOPPED, Duration::from_secs(30))
        .await;

    // Spin Cycle's own spinc and Spindle's command line read them like any other.
    let spinc = Command::new(peer.join("bin/spinc"))
        .args(["--addr", &rm.url, "status", &mine.fail])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&spinc.stdout);
    assert!(
        spinc.status.success() && said.contains("state: FAIL") && said.contains("request: fail"),
        "{said}{}",
        String::from_utf8_lossy(&spinc.stderr)
    );
    // A list default reaches spinc as text it can read; the request gets the list.
    let mut spinc = Command::new(peer.join("bin/spinc"))
        .args(["--addr", &rm.url, "start", "release", "question=x"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut spinc.stdin.take().unwrap(), b"ok\n").unwrap();
    let started = spinc.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&started.stdout);
    assert!(
        started.status.success() && said.contains("OK, started release request"),
        "{said}{}",
        String::from_utf8_lossy(&started.stderr)
    );
    let id = said
        .split("OK, started release request ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap();
    let released = ours.request(id).await;
    let args = &released["args"];
    assert!(
        args.as_array()
            .unwrap()
            .iter()
            .any(|a| a["Name"] == "hosts" && a["Value"] == json!(["db1", "db2"])),
        "{args}"
    );
    let (stdout, stderr, code) =
        run(spindle(dir.path()).args(["log", &mine.resumed, "--addr", &rm.url]));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("try:      2"), "{stdout}");
    drop((sc_jr, spindle_jr, rm, theirs_rm));
    db.remove().await;
}

/// The requests Spin Cycle's own pair leaves behind, by what became of them.
struct Left {
    complete: String,
    fail: String,
    stopped: String,
    running: String,
    suspended: String,
}

/// Spin Cycle's own Request Manager and Job Runner leave a request in each state: a
/// RUNNING one whose runner was killed, a SUSPENDED one whose runner was stopped (SIGTERM)
/// while it slept. Both are stopped at the end.
async fn leave_every_state(sc: &SpinCycle) -> Left {
    let rm = sc.request_manager();
    let api = Client::new(&sc.rm_url());
    let jr = sc.job_runner(sc.jr_port, &sc.rm_url());
    let complete = api.start("test", json!({"sleepTime": "100"})).await;
    api.wait_state(&complete, COMPLETE, Duration::from_secs(60))
        .await;
    let fail = api.start("fail", json!({"cmd": "false"})).await;
    api.wait_state(&fail, FAIL, Duration::from_secs(60)).await;
    let stopped = api.start("test", json!({"sleepTime": "60000"})).await;
    noop_done(&api, &stopped).await;
    stop(&api, &stopped).await;
    api.wait_state(&stopped, STOPPED, Duration::from_secs(60))
        .await;
    // Killed: Spin Cycle never learns how it ended.
    let running = api.start("test", json!({"sleepTime": "600000"})).await;
    noop_done(&api, &running).await;
    jr.signal("KILL");
    drop(jr);
    let jr = sc.job_runner(sc.jr_port, &sc.rm_url());
    // As in `scenarios`: the SIGTERM sent once both sleeps run, and they sleep long
    // enough that it lands while they do (sent after the noop alone, a loaded CI run saw
    // it land before they started: no stopped tries to import).
    let suspended = api.start("test", json!({"sleepTime": "15000"})).await;
    noop_done(&api, &suspended).await;
    waits_run(&api, &suspended).await;
    jr.terminate();
    api.wait_state(&suspended, SUSPENDED, Duration::from_secs(30))
        .await;
    drop(rm);
    Left {
        complete,
        fail,
        stopped,
        running,
        suspended,
    }
}

/// `spindle import spincycle --from DSN --to TARGET` in `dir`.
fn import(dir: &Path, from: &str, target: &str) -> (String, String, i32) {
    run(spindle(dir).args(["import", "spincycle", "--from", from, "--to", target]))
}

/// The Go factory shaped like Spin Cycle's dev jobs, built, when Go is here.
fn dev_jobs(test: &str) -> Option<PathBuf> {
    if !crate::job_programs::have(test, "go", "version", "SPINDLE_TEST_GO") {
        return None;
    }
    let out =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("dev-jobs-{}", std::process::id()));
    let built = crate::job_programs::go(
        &crate::job_programs::repository().join("examples/spincycle-dev-jobs"),
        &["build", "-o", out.to_str().unwrap(), "."],
    );
    assert!(
        built.status.success(),
        "go build of examples/spincycle-dev-jobs: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    Some(out)
}

/// Spin Cycle's own requests, imported into each backend: the SUSPENDED one resumes to
/// COMPLETE there (on a Go factory of Spin Cycle's dev jobs served under their own
/// names, where Go is here, else on the built-ins), and a Spin Cycle started again does
/// not resume it too; once someone gives its claim back and Spin Cycle runs it, the next
/// import says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_cycles_own_requests_import_into_every_backend_and_resume_there_alone() {
    let test = "spin_cycles_own_requests_import_into_every_backend_and_resume_there_alone";
    let (Some(peer), Some(server)) = (peer(test), mysql_url(test)) else {
        return;
    };
    let db = spincycle_database(&server, &peer).await;
    let sc = SpinCycle::new(&peer, &db);
    let left = leave_every_state(&sc).await;
    let dev_jobs = dev_jobs(test);

    let dir = sc.spindle_dir();
    let postgres = crate::services::NewDatabase::create(test).await;
    let mysql = MysqlDatabase::create(&server, "target").await;
    let mut targets = vec![("sqlite", "sqlite://spindle.db".to_owned())];
    if let Some(postgres) = &postgres {
        targets.push(("postgres", postgres.url.clone()));
    }
    targets.push(("mysql", mysql.url.clone()));
    for (at, (backend, target)) in targets.iter().enumerate() {
        // Spin Cycle's own DSN, as the team has it.
        let (stdout, stderr, code) = import(dir.path(), &sc.dsn, target);
        assert_eq!(
            code, 1,
            "{backend}: the RUNNING request is left out\n{stdout}{stderr}"
        );
        assert!(
            stderr.contains(&format!(
                "left out: request {} is RUNNING in Spin Cycle",
                left.running
            )),
            "{backend}: {stderr}"
        );
        assert!(
            stdout.contains("copied requests by state: COMPLETE 1, FAIL 1, STOPPED 1, SUSPENDED 1"),
            "{backend}: {stdout}"
        );
        // The first import claimed the suspended chain; later ones find it theirs.
        let mut args =
            crate::service_args("server", target, &["--interval", "200ms", "--lease", "2s"]);
        let config;
        if let (Some(program), 0) = (&dev_jobs, at) {
            config = dir.path().join("dev-jobs.yaml");
            std::fs::write(
                &config,
                format!(
                    "jobs:\n  - program: {}\n    types: [noop, sleep, shell-command]\n    supervised: false\n",
                    program.display()
                ),
            )
            .unwrap();
            args.extend(["--config", config.to_str().unwrap()]);
        }
        let server = Service::start_env(dir.path(), &args, &[("RUST_LOG", "warn,spindle=info")]);
        let api = Client::new(&server.url);
        api.wait_state(&left.suspended, COMPLETE, Duration::from_secs(60))
            .await;
        let resumed = entries(&api, &left.suspended).await;
        let sleeps: Vec<(u64, u64)> = resumed
            .iter()
            .filter(|e| e.1 == "sleep")
            .map(|e| (e.2, e.3))
            .collect();
        assert_eq!(
            sleeps,
            [(1, STOPPED), (1, STOPPED), (2, COMPLETE), (2, COMPLETE)],
            "{backend}: Spin Cycle's stopped tries, then Spindle's"
        );
        for (id, state) in [
            (&left.complete, COMPLETE),
            (&left.fail, FAIL),
            (&left.stopped, STOPPED),
        ] {
            assert_eq!(api.request(id).await["state"], state, "{backend}: {id}");
        }
        if at == 0 && dev_jobs.is_some() {
            // Spin Cycle's dev `test` and a failing shell-command on the Go factory.
            assert!(
                server.stderr().contains("noop, shell-command, sleep"),
                "{}",
                server.stderr()
            );
            let fresh = api.start("test", json!({"sleepTime": "100"})).await;
            api.wait_state(&fresh, COMPLETE, Duration::from_secs(60))
                .await;
            let failing = api.start("fail", json!({"cmd": "false"})).await;
            api.wait_state(&failing, FAIL, Duration::from_secs(60))
                .await;
            let failed = entries(&api, &failing).await;
            assert!(
                failed
                    .iter()
                    .any(|e| e.0 == "run" && e.4 == 1 && e.5 == "exit status 1"),
                "{failed:?}"
            );
        }
        drop(server);
    }

    // Spin Cycle started again leaves the request Spindle owns alone: its chain is held.
    let rm = sc.request_manager();
    let jr = sc.job_runner(sc.jr_port, &sc.rm_url());
    let api = Client::new(&sc.rm_url());
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(
        api.request(&left.suspended).await["state"],
        SUSPENDED,
        "{}",
        rm.output()
    );
    let pool = sqlx::mysql::MySqlPool::connect(&db.url).await.unwrap();
    let holder: (Option<String>,) =
        sqlx::query_as("SELECT rm_host FROM suspended_job_chains WHERE request_id = ?")
            .bind(left.suspended.as_bytes())
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(holder.0.as_deref(), Some("spindle-import"));
    // Someone gives the claim back: Spin Cycle resumes it; the next import says so.
    sqlx::query("UPDATE suspended_job_chains SET rm_host = NULL WHERE request_id = ?")
        .bind(left.suspended.as_bytes())
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    api.wait_state(&left.suspended, COMPLETE, Duration::from_secs(60))
        .await;
    let (stdout, stderr, code) = import(dir.path(), &db.url, "sqlite://spindle.db");
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!(
            "conflict: request {}: Spin Cycle ran it after it was imported",
            left.suspended
        )),
        "{stderr}"
    );
    drop((jr, rm));
    if let Some(postgres) = postgres {
        postgres.remove().await;
    }
    mysql.remove().await;
    db.remove().await;
}
