//! Load generator: `cargo bench -p spindle --bench load -- [OPTIONS]` (`--help` lists them).
//!
//! N concurrent clients each create a request, wait until it reaches a final state, and
//! create the next, for a number of requests (`--count`) or a time (`--seconds`); a
//! client waits for its request's end with `GET ...?wait=30s` (answered when it ends),
//! or with `--poll` polls it (`GET`, after 1 ms, doubling to at most 50 ms). It
//! reports requests/s, jobs/s, create latency (POST answered) p50/p99, create→COMPLETE
//! p50/p99, the CPU-seconds the server's processes used meanwhile (the sum of their
//! threads' `schedstat`), and the whole machine's busy CPU (`/proc/stat`) split into the
//! server, the generator itself and the rest (the database), to tell a server that
//! waits from a machine whose cores are all in use.
//!
//! Without `--url` it starts what it loads: `--setup server` (default: `spindle server`
//! on SQLite in a temporary directory) or `--setup rm-jr` (`spindle rm` + `spindle jr` on
//! a fresh database of the PostgreSQL server at `SPINDLE_TEST_POSTGRES_URL`, default
//! postgres://postgres@127.0.0.1:5432/test). The default request is `load15`: 15 no-op
//! jobs (a start, 13 in parallel, an end); `--specs DIR --type T --arg K=V` loads others,
//! such as Spin Cycle's `test` request (`--specs ../shared/fixtures/spincycle --type test
//! --arg sleepTime=0`). With `--url`, `--pid` names the server's processes for the CPU
//! figure. `--lock LIMIT:KEYS` makes `load15` hold a lock of that limit keyed by an arg
//! that takes KEYS values in turn (the cost of locks, issue #34). `--rate R` runs an open
//! loop instead (`load/open_loop.rs`): R requests offered a second for `--seconds`, with
//! the rate accepted and completed, the backlog by second and create→final p50/p99.
//! `--setup several --rms N --jrs M [--pool P] [--kill-runners K]` runs N Request
//! Managers and M Job Runners on one database (each manager's pool P connections), and
//! SIGKILLs K runners once half the requests are created: the report adds the database
//! connections at most and whether every request still completed. `--history N` fills a
//! database with N finished requests and measures reads on it (`load/history.rs`).

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a benchmark prints its report, and its progress to stderr"
)]

/// The allocator `spindle` runs on: the generator of history allocates a chain and a
/// job log for each of millions of requests.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod common;
#[path = "load/history.rs"]
mod history;
#[path = "load/open_loop.rs"]
mod open_loop;
#[path = "load/pgbouncer.rs"]
mod pgbouncer;
#[path = "load/retention.rs"]
mod retention;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::{Value, json};

use common::{
    Process, drop_mysql_database, free_port, fresh_database, fresh_mysql_database, get_json,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Setup {
    /// `spindle server` on SQLite.
    Server,
    /// `spindle rm` + `spindle jr` on PostgreSQL.
    RmJr,
    /// `--rms` × `spindle rm` and `--jrs` × `spindle jr` (default 2 and 3) on one
    /// database; clients take the Request Managers in turn, and the report says how many
    /// job tries each runner ran (from its `/metrics`), the database connections at most
    /// (PostgreSQL), and what `--kill-runners` did.
    Several,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Backend {
    Postgres,
    Mysql,
}

#[derive(Debug, Parser)]
#[command(about = "Load a Spindle Request Manager with concurrent clients")]
struct Args {
    /// The Request Manager to load; without it the generator starts its own (--setup)
    #[arg(long)]
    url: Option<String>,
    /// What to start when no --url is given
    #[arg(long, value_enum, default_value_t = Setup::Server)]
    setup: Setup,
    /// The database of --setup rm-jr and several: a fresh database on the PostgreSQL
    /// server (`SPINDLE_TEST_POSTGRES_URL`) or the MySQL one (`SPINDLE_TEST_MYSQL_URL`)
    #[arg(long, value_enum, default_value_t = Backend::Postgres)]
    backend: Backend,
    /// Specs for the server it starts, relative to the repository (default: a directory
    /// holding the `load15` request)
    #[arg(long)]
    specs: Option<PathBuf>,
    /// The request type to create
    #[arg(long = "type", default_value = "load15")]
    request_type: String,
    /// A request arg, NAME=VALUE (VALUE read as JSON, else as text); repeatable
    #[arg(long = "arg")]
    args: Vec<String>,
    /// Concurrent clients
    #[arg(long, default_value_t = 50)]
    clients: usize,
    /// Requests to create in all (default 1000 unless --seconds is given)
    #[arg(long)]
    count: Option<usize>,
    /// Create requests for this long instead of a count
    #[arg(long)]
    seconds: Option<f64>,
    /// Poll each request (GET after 1 ms, doubling to 50 ms) instead of one waiting GET
    #[arg(long)]
    poll: bool,
    /// Open loop: offer this many requests a second for --seconds (default 10),
    /// whatever the server does, instead of the closed loop of --clients
    #[arg(long)]
    rate: Option<f64>,
    /// LIMIT:KEYS: `load15` holds a lock of this limit keyed by an arg that takes KEYS
    /// values in turn (issue #34's cost of locks; with the generated specs only)
    #[arg(long, value_parser = parse_lock)]
    lock: Option<(u32, usize)>,
    /// The server's process ids, for the CPU figure (with --url)
    #[arg(long)]
    pid: Vec<u32>,
    /// Request Managers of --setup several
    #[arg(long, default_value_t = 2)]
    rms: usize,
    /// Job Runners of --setup several
    #[arg(long, default_value_t = 3)]
    jrs: usize,
    /// Each Request Manager's database pool (`?max_connections=N`; default the store's, 16)
    #[arg(long)]
    pool: Option<u32>,
    /// --setup several on PostgreSQL: the Request Managers go through a PgBouncer of the
    /// generator's own (session pooling), its server pool this size
    #[arg(long)]
    pgbouncer: Option<usize>,
    /// --setup several: SIGKILL this many Job Runners once half the requests are
    /// created; their requests must complete elsewhere
    #[arg(long, default_value_t = 0)]
    kill_runners: usize,
    /// Years of history (`load/history.rs`): fill a database with this many finished
    /// requests through the store, then measure find, a request with its log and the web
    /// UI on it (0 with --database: measure it as it is)
    #[arg(long)]
    history: Option<usize>,
    /// --history: the database to fill and measure (kept), instead of a fresh one
    #[arg(long)]
    database: Option<String>,
    /// --history: concurrent writers (on SQLite, one writes while the others generate)
    #[arg(long, default_value_t = 4)]
    writers: usize,
    /// --history: requests a writer stores in one transaction
    #[arg(long, default_value_t = 200)]
    batch: usize,
    /// --history: then creates for this long without retention, as long beside a
    /// retention that removes the oldest quarter of the history, and as long with one
    /// that removes the next quarter alone (0: not measured)
    #[arg(long, default_value_t = 0.0)]
    retention_seconds: f64,
    /// --history: GETs of each query timed
    #[arg(long, default_value_t = 200)]
    samples: usize,
    /// Passed by `cargo bench`; ignored
    #[arg(long, hide = true)]
    bench: bool,
}

fn parse_lock(text: &str) -> Result<(u32, usize), String> {
    let parsed = text
        .split_once(':')
        .and_then(|(limit, keys)| Some((limit.parse().ok()?, keys.parse().ok()?)));
    match parsed {
        Some((limit, keys)) if limit >= 1 && keys >= 1 => Ok((limit, keys)),
        _ => Err(format!(
            "{text:?}: expected LIMIT:KEYS, two whole numbers of at least 1, such as 50:100"
        )),
    }
}

/// `load15`: a start, 13 no-op jobs in parallel, an end; with `lock`, holding a lock of
/// that limit keyed by its `key` arg.
fn load15(lock: Option<(u32, usize)>) -> String {
    let mut out = String::from("sequences:\n  load15:\n    request: true\n");
    if let Some((limit, _)) = lock {
        let _ = write!(
            out,
            "    args:\n      required:\n        - name: key\n    locks:\n      - name: load\n        key: key\n        limit: {limit}\n"
        );
    }
    out.push_str("    nodes:\n      start:\n        category: job\n        type: noop\n");
    let middle: Vec<String> = (0..13).map(|i| format!("j{i}")).collect();
    for name in &middle {
        let _ = write!(
            out,
            "      {name}:\n        category: job\n        type: noop\n        deps: [start]\n"
        );
    }
    let _ = write!(
        out,
        "      end:\n        category: job\n        type: noop\n        deps: [{}]\n",
        middle.join(", ")
    );
    out
}

fn request_args(args: &[String]) -> serde_json::Map<String, Value> {
    args.iter()
        .map(|arg| {
            let (name, value) = arg
                .split_once('=')
                .unwrap_or_else(|| panic!("--arg {arg:?}: expected NAME=VALUE"));
            let value = serde_json::from_str(value).unwrap_or_else(|_| json!(value));
            (name.to_owned(), value)
        })
        .collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

/// What one client saw of one request.
struct Sample {
    create: Duration,
    complete: Duration,
    jobs: u64,
    state: u64,
    /// GETs of the request until it ended.
    polls: u32,
}

/// Creates requests until the shared budget or the deadline runs out.
async fn client(
    http: reqwest::Client,
    base: String,
    mut body: Value,
    budget: Arc<AtomicUsize>,
    deadline: Option<Instant>,
    poll: bool,
    keys: Option<(usize, Arc<AtomicUsize>)>,
) -> Vec<Sample> {
    let until_end = if poll { "" } else { "?wait=30s" };
    let mut samples = Vec::new();
    loop {
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            break;
        }
        if deadline.is_none()
            && budget
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_err()
        {
            break;
        }
        // The lock's key: the next of its values, in turn across the clients.
        if let Some((keys, next)) = &keys {
            let key = next.fetch_add(1, Ordering::Relaxed) % keys;
            body["args"]["key"] = json!(format!("k{key}"));
        }
        let started = Instant::now();
        let response = http
            .post(format!("{base}/api/v1/requests"))
            .json(&body)
            .send()
            .await
            .expect("the Request Manager answers");
        let create = started.elapsed();
        let status = response.status();
        let created: Value = response.json().await.unwrap_or_default();
        assert_eq!(status, 201, "creating a request: {created}");
        let id = created["id"].as_str().unwrap_or_default().to_owned();
        let jobs = created["totalJobs"].as_u64().unwrap_or(0);
        let mut wait = Duration::from_millis(1);
        let mut polls = 0;
        let state = loop {
            polls += 1;
            let request: Value = http
                .get(format!("{base}/api/v1/requests/{id}{until_end}"))
                .send()
                .await
                .expect("the Request Manager answers")
                .json()
                .await
                .unwrap_or_default();
            match request["state"].as_u64() {
                Some(state @ (3..=6)) => break state,
                _ => {
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_millis(50));
                }
            }
        };
        samples.push(Sample {
            create,
            complete: started.elapsed(),
            jobs,
            state,
            polls,
        });
    }
    samples
}

/// Waits until the Request Manager at `base` is ready: Spindle's `/readyz`, or for
/// Spin Cycle's (which has none) its request list.
async fn wait_up(http: &reqwest::Client, base: &str) {
    let until = Instant::now() + Duration::from_secs(30);
    let answers = async |path: &str| {
        http.get(format!("{base}{path}"))
            .send()
            .await
            .is_ok_and(|r| r.status().as_u16() == 200)
    };
    while !(answers("/readyz").await || answers("/api/v1/request-list").await) {
        assert!(Instant::now() < until, "{base} never became ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn cpu_seconds(pids: &[u32]) -> f64 {
    pids.iter().map(|&pid| common::cpu_seconds_of(pid)).sum()
}

fn main() {
    let args = Args::parse();
    common::runtime().block_on(run(args));
}

// Long because it is the benchmark's script in the order it runs: the services started,
// the load offered, what was measured gathered and printed; split, each step would take
// most of the others' state as arguments.
async fn run(args: Args) {
    if let Some(n) = args.history {
        history::run(&args, n).await;
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let specs = match &args.specs {
        // cargo runs a bench in its package's directory: a relative path is the
        // repository's.
        Some(specs) => std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(specs)
            .canonicalize()
            .unwrap_or_else(|err| panic!("--specs {}: {err}", specs.display())),
        None => {
            let specs = dir.path().join("specs");
            std::fs::create_dir(&specs).unwrap();
            std::fs::write(specs.join("load15.yaml"), load15(args.lock)).unwrap();
            specs
        }
    };
    let specs = specs.to_str().unwrap().to_owned();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(args.clients)
        .build()
        .unwrap();
    let mut processes: Vec<Process> = Vec::new();
    let mut database = None;
    let mut bouncer_kept: Option<pgbouncer::Pgbouncer> = None;
    // The runners whose share of the jobs is reported (several), by base URL.
    let mut runners: Vec<String> = Vec::new();
    let mut more_bases: Vec<String> = Vec::new();
    let (base, pids, what) = match &args.url {
        Some(url) => (
            url.trim_end_matches('/').to_owned(),
            args.pid.clone(),
            format!("{url} (given)"),
        ),
        None => {
            match args.setup {
                Setup::Server => {
                    let port = free_port();
                    let listen = format!("127.0.0.1:{port}");
                    processes.push(Process::start(
                        dir.path(),
                        &[
                            "server",
                            "--listen",
                            &listen,
                            "--specs",
                            &specs,
                            "--database",
                            "sqlite://load.db",
                        ],
                    ));
                    (
                        format!("http://{listen}"),
                        vec![processes[0].0.id()],
                        "spindle server, SQLite".to_owned(),
                    )
                }
                Setup::RmJr => {
                    let (url, admin) = fresh(args.backend, "load").await;
                    let (rm_port, jr_port) = (free_port(), free_port());
                    let (rm_base, jr_base) = (
                        format!("http://127.0.0.1:{rm_port}"),
                        format!("http://127.0.0.1:{jr_port}"),
                    );
                    processes.push(Process::start(
                        dir.path(),
                        &[
                            "rm",
                            "--listen",
                            &format!("127.0.0.1:{rm_port}"),
                            "--specs",
                            &specs,
                            "--database",
                            &url,
                        ],
                    ));
                    processes.push(Process::start(
                        dir.path(),
                        &[
                            "jr",
                            "--listen",
                            &format!("127.0.0.1:{jr_port}"),
                            "--rm-url",
                            &rm_base,
                        ],
                    ));
                    wait_up(&http, &jr_base).await;
                    database = Some((url, admin));
                    let pids = processes.iter().map(|p| p.0.id()).collect();
                    (
                        rm_base,
                        pids,
                        format!("spindle rm + spindle jr, {:?}", args.backend),
                    )
                }
                Setup::Several => {
                    let (url, admin) = fresh(args.backend, "several").await;
                    // The managers' URL: through PgBouncer, when asked (the admin pool and
                    // the connection count still go to the server itself).
                    let managers_url = match args.pgbouncer {
                        Some(pool) => {
                            let parsed = url::Url::parse(&url).unwrap();
                            let name = parsed.path().trim_start_matches('/').to_owned();
                            let bouncer = pgbouncer::Pgbouncer::start(
                                parsed.host_str().unwrap(),
                                parsed.port().unwrap_or(5432),
                                &name,
                                pool,
                            );
                            let through = format!(
                                "postgres://{}@127.0.0.1:{}/{name}",
                                parsed.username(),
                                bouncer.port
                            );
                            bouncer_kept = Some(bouncer);
                            through
                        }
                        None => url.clone(),
                    };
                    let rm_url = match args.pool {
                        Some(pool) => format!("{managers_url}?max_connections={pool}"),
                        None => managers_url,
                    };
                    let rm_bases: Vec<String> = (0..args.rms)
                        .map(|_| format!("http://127.0.0.1:{}", free_port()))
                        .collect();
                    for rm_base in &rm_bases {
                        processes.push(Process::start(
                            dir.path(),
                            &[
                                "rm",
                                "--listen",
                                rm_base.trim_start_matches("http://"),
                                "--specs",
                                &specs,
                                "--database",
                                &rm_url,
                            ],
                        ));
                    }
                    for rm_base in &rm_bases {
                        wait_up(&http, rm_base).await;
                    }
                    let rm_urls = rm_bases.join(",");
                    for _ in 0..args.jrs {
                        let jr_base = format!("http://127.0.0.1:{}", free_port());
                        processes.push(Process::start(
                            dir.path(),
                            &[
                                "jr",
                                "--listen",
                                jr_base.trim_start_matches("http://"),
                                "--rm-url",
                                &rm_urls,
                            ],
                        ));
                        wait_up(&http, &jr_base).await;
                        runners.push(jr_base);
                    }
                    // Every runner registered before the load starts.
                    let deadline = Instant::now() + Duration::from_secs(30);
                    loop {
                        let listed =
                            get_json(&http, &format!("{}/api/v1/job-runners", rm_bases[0])).await;
                        if listed.as_array().is_some_and(|r| r.len() == args.jrs) {
                            break;
                        }
                        assert!(Instant::now() < deadline, "the runners did not register");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    database = Some((url, admin));
                    more_bases = rm_bases[1..].to_vec();
                    let pids = processes.iter().map(|p| p.0.id()).collect();
                    (
                    rm_bases[0].clone(),
                    pids,
                    format!(
                        "{} × spindle rm + {} × spindle jr, {:?}{}",
                        args.rms,
                        args.jrs,
                        args.backend,
                        args.pool
                            .map(|pool| format!(", pools of {pool}"))
                            .unwrap_or_default()
                    ) + &args
                        .pgbouncer
                        .map(|pool| format!(", through PgBouncer (session pooling, {pool} server connections)"))
                        .unwrap_or_default(),
                )
                }
            }
        }
    };
    wait_up(&http, &base).await;
    let body = json!({"type": args.request_type, "args": request_args(&args.args)});
    let count = args
        .count
        .unwrap_or(if args.seconds.is_some() { 0 } else { 1000 });
    let budget = Arc::new(AtomicUsize::new(count));
    let deadline = args
        .seconds
        .map(|s| Instant::now() + Duration::from_secs_f64(s));
    let cpu_before = cpu_seconds(&pids);
    let own_before = common::cpu_seconds_of(std::process::id());
    let machine_before = common::machine_cpu();
    let poll = args.poll;
    let started = Instant::now();
    if let Some(rate) = args.rate {
        let seconds = args.seconds.unwrap_or(10.0);
        let keys = args.lock.map(|(_, keys)| keys);
        // Where each accepted request's CPU goes, process by process (issue #51, point
        // 5): the Spindle processes, the database server's, the generator's, the rest.
        let names = match args.setup {
            Setup::Server => vec!["spindle server"],
            Setup::RmJr => vec!["spindle rm", "spindle jr"],
            Setup::Several => vec!["spindle rm / jr"; pids.len()],
        };
        let account = common::cpu::CpuAccount::start(names.into_iter().zip(pids.iter().copied()));
        let report = open_loop::run(http.clone(), base.clone(), body, rate, seconds, keys).await;
        let cpu = cpu_seconds(&pids) - cpu_before;
        report.print(
            &format!("{what}: `{}` at {rate}/s", args.request_type),
            percentile,
        );
        println!(
            "| server CPU-seconds (per 1,000 accepted) | {cpu:.2} s ({:.2} s) |",
            cpu * 1000.0 / report.accepted.max(1) as f64
        );
        account.print("accepted request", report.accepted);
        return;
    }
    // --setup several: the database's connections, sampled while the load runs, and the
    // runners killed once half the requests are created.
    let peak_connections = Arc::new(AtomicUsize::new(0));
    let sampler = database.as_ref().and_then(|(url, admin)| {
        let admin = admin.clone()?;
        let name = url.rsplit('/').next()?.split('?').next()?.to_owned();
        let peak = Arc::clone(&peak_connections);
        Some(tokio::spawn(async move {
            loop {
                let count: i64 =
                    sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = $1")
                        .bind(&name)
                        .fetch_one(&admin)
                        .await
                        .unwrap_or(0);
                peak.fetch_max(usize::try_from(count).unwrap_or(0), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }))
    });
    let killer = (args.kill_runners > 0 && args.setup == Setup::Several).then(|| {
        let ours: Vec<u32> = processes[args.rms..].iter().map(|p| p.0.id()).collect();
        let (budget, http, base, victims) = (
            Arc::clone(&budget),
            http.clone(),
            base.clone(),
            args.kill_runners,
        );
        tokio::spawn(async move {
            let half =
                Instant::now() + (deadline.map_or(Duration::ZERO, |d| d - Instant::now()) / 2);
            loop {
                let created = count.saturating_sub(budget.load(Ordering::Relaxed));
                if (count > 0 && created >= count / 2) || (count == 0 && Instant::now() >= half) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            // The runners that hold the most requests now, so that some must be resumed.
            let listed = get_json(&http, &format!("{base}/api/v1/job-runners")).await;
            let mut busy: Vec<(u64, u32)> = listed
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| {
                    let pid = u32::try_from(r["pid"].as_u64()?).ok()?;
                    ours.contains(&pid)
                        .then(|| (r["runningRequests"].as_u64().unwrap_or(0), pid))
                })
                .collect();
            busy.sort_unstable_by(|a, b| b.cmp(a));
            let held: u64 = busy.iter().take(victims).map(|(n, _)| n).sum();
            for (_, pid) in busy.iter().take(victims) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(i32::try_from(*pid).unwrap_or(i32::MAX)),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            (Instant::now(), victims.min(busy.len()), held)
        })
    });
    let mut clients = tokio::task::JoinSet::new();
    let bases: Vec<String> = std::iter::once(base.clone()).chain(more_bases).collect();
    let next_key = Arc::new(AtomicUsize::new(0));
    for i in 0..args.clients {
        clients.spawn(client(
            http.clone(),
            bases[i % bases.len()].clone(),
            body.clone(),
            Arc::clone(&budget),
            deadline,
            poll,
            args.lock.map(|(_, keys)| (keys, Arc::clone(&next_key))),
        ));
    }
    let mut samples = Vec::new();
    while let Some(done) = clients.join_next().await {
        samples.extend(done.expect("a client panicked"));
    }
    let elapsed = started.elapsed();
    if let Some(sampler) = sampler {
        sampler.abort();
    }
    let killed = match killer {
        Some(killer) => Some(killer.await.expect("the killer task")),
        None => None,
    };
    let cpu = cpu_seconds(&pids) - cpu_before;
    let own = common::cpu_seconds_of(std::process::id()) - own_before;
    let machine_after = common::machine_cpu();
    let n = samples.len();
    let jobs: u64 = samples.iter().map(|s| s.jobs).sum();
    let not_complete = samples.iter().filter(|s| s.state != 3).count();
    let mut creates: Vec<Duration> = samples.iter().map(|s| s.create).collect();
    let mut completes: Vec<Duration> = samples.iter().map(|s| s.complete).collect();
    creates.sort();
    completes.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "| load | {what}: {} × `{}`, {} clients |",
        n, args.request_type, args.clients
    );
    println!("|---|---:|");
    println!("| requests/s | {:.0} |", n as f64 / elapsed.as_secs_f64());
    println!("| jobs/s | {:.0} |", jobs as f64 / elapsed.as_secs_f64());
    println!(
        "| create latency p50 / p99 | {:.1} ms / {:.1} ms |",
        ms(percentile(&creates, 0.5)),
        ms(percentile(&creates, 0.99))
    );
    println!(
        "| create → final state p50 / p99 | {:.1} ms / {:.1} ms |",
        ms(percentile(&completes, 0.5)),
        ms(percentile(&completes, 0.99))
    );
    println!(
        "| server CPU-seconds (per 1,000 requests) | {cpu:.2} s ({:.2} s) |",
        cpu * 1000.0 / n.max(1) as f64
    );
    println!("| wall time | {:.2} s |", elapsed.as_secs_f64());
    // Whether the machine, not the server, is the bound: its busy cores on average, and
    // who used them (the rest is the database, the kernel's own work and anything else).
    let (busy, all, cpus) = (
        machine_after.0.saturating_sub(machine_before.0),
        machine_after.1.saturating_sub(machine_before.1),
        machine_after.2,
    );
    let cores = busy as f64 / all.max(1) as f64 * cpus as f64;
    let machine = cores * elapsed.as_secs_f64();
    println!(
        "| machine CPU-seconds: all / server / load generator / rest (busy cores of {cpus}) | {machine:.2} / {cpu:.2} / {own:.2} / {:.2} s ({cores:.2}) |",
        (machine - cpu - own).max(0.0)
    );
    let polls: u32 = samples.iter().map(|s| s.polls).sum();
    println!(
        "| GETs of a request until it ended (mean; {}) | {:.1} |",
        if poll { "polled" } else { "?wait=30s" },
        f64::from(polls) / n.max(1) as f64
    );
    if not_complete > 0 {
        println!("| requests not COMPLETE | {not_complete} |");
    }
    if let Some((at, n, held)) = killed {
        println!(
            "| Job Runners killed (SIGKILL) {:.1} s into the run, the busiest; the requests they held (as listed just before); requests not COMPLETE | {n}; {held}; {not_complete} |",
            (at - started).as_secs_f64()
        );
        println!(
            "| create → final state, the slowest (a killed runner's request: its lease, then resumed) | {:.1} s |",
            completes.last().map_or(0.0, Duration::as_secs_f64)
        );
    }
    let peak = peak_connections.load(Ordering::Relaxed);
    if peak > 0 {
        println!(
            "| PostgreSQL connections to the database, at most (sampled every 200 ms) | {peak} |"
        );
    }
    if !runners.is_empty() {
        let mut tries = Vec::new();
        for runner in &runners {
            // A runner killed (--kill-runners) says nothing more.
            let Ok(answer) = http.get(format!("{runner}/metrics")).send().await else {
                continue;
            };
            let text = answer.text().await.unwrap();
            let n: f64 = text
                .lines()
                .filter(|l| l.starts_with("spindle_job_tries_total{"))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum();
            tries.push(n);
        }
        let total: f64 = tries.iter().sum();
        let fair = total / tries.len() as f64;
        let shares: Vec<String> = tries
            .iter()
            .map(|n| format!("{n:.0} ({:+.1}%)", (n - fair) / fair.max(1.0) * 100.0))
            .collect();
        if runners.len() <= 10 {
            println!(
                "| job tries per live runner (against an even share) | {} |",
                shares.join(", ")
            );
        } else {
            let (least, most) = tries
                .iter()
                .fold((f64::MAX, 0.0f64), |(lo, hi), n| (lo.min(*n), hi.max(*n)));
            println!(
                "| job tries per live runner: least / even share / most | {least:.0} / {fair:.0} / {most:.0} |"
            );
        }
    }
    drop(processes);
    drop(bouncer_kept);
    if let Some((url, admin)) = database {
        drop_fresh(&url, admin).await;
    }
}

/// Drops a database [`fresh`] made.
async fn drop_fresh(url: &str, admin: Option<sqlx::PgPool>) {
    let Some(admin) = admin else {
        drop_mysql_database(url).await;
        return;
    };
    let name = url.rsplit('/').next().unwrap().to_owned();
    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE \"{name}\" WITH (FORCE)"
    )))
    .execute(&admin)
    .await;
}

/// A fresh database of `backend`: its URL, and PostgreSQL's admin pool.
async fn fresh(backend: Backend, name: &str) -> (String, Option<sqlx::PgPool>) {
    match backend {
        Backend::Postgres => {
            let (url, admin) = fresh_database(name).await;
            (url, Some(admin))
        }
        Backend::Mysql => (fresh_mysql_database(name).await, None),
    }
}
