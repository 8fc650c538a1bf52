//! Years of history (issue #51, point 1): `--history N` fills a database with N finished
//! requests of realistic shapes through the store (`Store::import_requests`, batches from
//! `--writers` concurrent writers), then starts `spindle server` on it and measures what
//! an operator meets there: the first page of find by type, state, user, arg and time
//! range, the next page by cursor, a page deep by offset, a request with its log, the
//! web UI's list and a request's page (p50 and p99 of `--samples` each), and prints the
//! database's plan of every query they run (`store::plans`), naming any table read whole.
//!
//! The database: `--database URL` (kept; with `--history 0`, measured as it is), else a
//! fresh one, SQLite in a temporary directory (`--setup server`) or on the PostgreSQL or
//! MySQL server (`--setup rm-jr --backend postgres|mysql`), dropped at the end. The free
//! disk is checked first against what N requests take (`BYTES_PER_REQUEST`, measured).
//!
//! The shapes, by request number i: 30 types (a few common, most rare), 200 users, args
//! `host` (one of 20,000), `cluster` (one of 40) and `version`; 15 jobs (most), 40 (every
//! 10th), 200 (every 100th) or 5,000 (every 20,000th); 90% COMPLETE, 7% FAIL (half their
//! jobs ran), 3% STOPPED (a third ran); one try in fifty tried twice; each try's output a
//! line or three; created evenly over the year before now, each running 1–600 s; each id
//! an xid of its creation second (PostgreSQL keeps it in its month's partitions).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use proto::{
    CreateRequest, Job, JobChain, JobLog, Request, RequestArg, RequestArgType, RequestFilter, State,
};
use serde_json::json;
use store::{ImportedRequest, Store};

use crate::common::{Process, free_port};

/// What one generated request takes on disk with its indexes, at most, as measured on
/// each backend (BENCHMARKS.md, 2026-12-05): PostgreSQL ≈ 5.5 KiB, MariaDB ≈ 9 KiB,
/// SQLite ≈ 6 KiB. The free space asked for is this times N, and 5 GiB more.
const BYTES_PER_REQUEST: u64 = 10 * 1024;

/// The year of history, in seconds.
const YEAR: i64 = 365 * 24 * 3600;

/// The request type of request i: type-0 a third of all, type-1 a sixth, …, the rest
/// spread over 28 rare ones.
fn request_type(i: usize) -> String {
    match i % 12 {
        0..=3 => "type-0".to_owned(),
        4 | 5 => "type-1".to_owned(),
        6 => "type-2".to_owned(),
        _ => format!("type-{}", 3 + (i / 12) % 27),
    }
}

fn jobs_of(i: usize) -> usize {
    if i % 20_000 == 7 {
        5_000
    } else if i % 100 == 3 {
        200
    } else if i % 10 == 1 {
        40
    } else {
        15
    }
}

fn state_of(i: usize) -> State {
    match i % 100 {
        0..=6 => State::Fail,
        7..=9 => State::Stopped,
        _ => State::Complete,
    }
}

fn arg(pos: u32, name: &str, value: serde_json::Value) -> RequestArg {
    RequestArg {
        pos,
        name: name.to_owned(),
        desc: String::new(),
        arg_type: RequestArgType::Required,
        given: true,
        default: serde_json::Value::Null,
        value,
        secret: false,
    }
}

/// When request i of `n` was created: evenly over the year before `now`.
fn created_at(i: usize, n: usize, now: DateTime<Utc>) -> DateTime<Utc> {
    now - chrono::Duration::seconds(YEAR)
        + chrono::Duration::milliseconds((i as i64) * (YEAR * 1000 / n.max(1) as i64))
}

/// The id of request i: an xid of its creation second, as Spindle and Spin Cycle make
/// them (so that on PostgreSQL it falls in its month's partitions), unique by `i`.
fn request_id(i: usize, created_at: DateTime<Utc>) -> String {
    let mut raw = [0u8; 12];
    let seconds = u32::try_from(created_at.timestamp()).unwrap_or_default();
    raw[..4].copy_from_slice(&seconds.to_be_bytes());
    raw[4..].copy_from_slice(&(i as u64).to_be_bytes());
    xid::Id(raw).to_string()
}

/// Finished request number `i` of `n`, its history ending at `now`.
fn generate(i: usize, n: usize, now: DateTime<Utc>) -> ImportedRequest {
    let created_at = created_at(i, n, now);
    let id = request_id(i, created_at);
    let state = state_of(i);
    let took = chrono::Duration::seconds(1 + (i as i64 * 7919) % 600);
    let host = format!("host-{:05}", (i * 7) % 20_000);
    let args = vec![
        arg(0, "host", json!(host)),
        arg(1, "cluster", json!(format!("cluster-{}", i % 40))),
        arg(2, "version", json!(format!("2.{}.{}", i % 9, i % 31))),
    ];
    let total = jobs_of(i);
    let ran = match state {
        State::Fail => total / 2,
        State::Stopped => total / 3,
        _ => total,
    };
    let started_ns = created_at.timestamp_nanos_opt().unwrap_or_default();
    let step_ns = took.num_nanoseconds().unwrap_or_default() / total as i64;
    let mut jobs = BTreeMap::new();
    let mut adjacency_list: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut job_logs = Vec::with_capacity(ran + ran / 50);
    for j in 0..total {
        let job_id = format!("{j:04x}");
        let job_type = ["shell-command", "noop", "sleep", "http-check"][j % 4];
        let job_state = if j < ran {
            if j + 1 == ran && state != State::Complete {
                state
            } else {
                State::Complete
            }
        } else {
            State::Pending
        };
        let mut job_args = proto::JobArgs::new();
        job_args.insert("host".to_owned(), json!(host));
        jobs.insert(
            job_id.clone(),
            Job {
                id: job_id.clone(),
                name: format!("step-{j}"),
                job_type: job_type.to_owned(),
                state: job_state,
                args: job_args,
                retry: 1,
                sequence_id: "0000".to_owned(),
                ..Job::default()
            },
        );
        // A start, the jobs between in parallel, an end.
        if j > 0 && j + 1 < total {
            adjacency_list
                .entry("0000".to_owned())
                .or_default()
                .push(job_id.clone());
            adjacency_list
                .entry(job_id.clone())
                .or_default()
                .push(format!("{:04x}", total - 1));
        }
        if j >= ran {
            continue;
        }
        let tries = if (i + j).is_multiple_of(50) { 2 } else { 1 };
        for r#try in 1..=tries {
            let failed = job_state != State::Complete || r#try < tries;
            let at = started_ns + step_ns * j as i64;
            job_logs.push(JobLog {
                request_id: id.clone(),
                job_id: job_id.clone(),
                r#try,
                name: format!("step-{j}"),
                job_type: job_type.to_owned(),
                started_at: at,
                finished_at: at + step_ns,
                state: if failed { State::Fail } else { State::Complete },
                exit: i64::from(failed),
                error: if failed {
                    format!("{job_type} on {host}: exit status 1")
                } else {
                    String::new()
                },
                stdout: match j % 3 {
                    0 => format!("{host}: ok\n"),
                    1 => format!("{host}: checked 12 services\n{host}: all healthy\n"),
                    _ => format!(
                        "{host}: draining connections\n{host}: restarted in 4.2s\n{host}: serving\n"
                    ),
                },
                stderr: if failed {
                    format!("{host}: connection refused\n")
                } else {
                    String::new()
                },
            });
        }
    }
    let finished_jobs = ran as u64;
    let chain = JobChain {
        request_id: id.clone(),
        jobs,
        adjacency_list,
        state,
        finished_jobs,
    };
    let mut create_args = proto::JobArgs::new();
    for a in &args {
        create_args.insert(a.name.clone(), a.value.clone());
    }
    let request = Request {
        id: id.clone(),
        request_type: request_type(i),
        state,
        user: format!("user-{}", (i * 31) % 200),
        args,
        created_at,
        started_at: Some(created_at),
        finished_at: Some(created_at + took),
        job_chain: Some(chain),
        total_jobs: total as u64,
        finished_jobs,
        own_jobs: total as u64,
        own_finished_jobs: finished_jobs,
        jr_url: String::new(),
        error: if state == State::Fail {
            format!("job step-{} failed", ran.saturating_sub(1))
        } else {
            String::new()
        },
        paused: false,
        spec_version: String::new(),
        elements: Vec::new(),
    };
    ImportedRequest {
        create_request: CreateRequest {
            request_type: request.request_type.clone(),
            args: create_args,
            user: request.user.clone(),
            priority: None,
            idempotency_key: None,
        },
        request,
        job_logs,
        suspended: None,
    }
}

/// Free bytes of the file system holding `path` (`df`).
fn free_bytes(path: &str) -> Option<u64> {
    let out = std::process::Command::new("df")
        .args(["-Pk", path])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let kib: u64 = text
        .lines()
        .nth(1)?
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Fills `store` with requests `0..n` from `writers` concurrent writers, batches of
/// `batch`; prints the rate as it goes. Answers the job log rows written.
async fn fill(store: Arc<dyn Store>, n: usize, writers: usize, batch: usize) -> u64 {
    let now = Utc::now();
    let next = Arc::new(AtomicUsize::new(0));
    let rows = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..writers {
        let (store, next, rows) = (Arc::clone(&store), Arc::clone(&next), Arc::clone(&rows));
        tasks.spawn(async move {
            // This writer's time making its batches and having the store take them.
            let (mut generating, mut storing) = (Duration::ZERO, Duration::ZERO);
            loop {
                let first = next.fetch_add(batch, Ordering::Relaxed);
                if first >= n {
                    break (generating, storing);
                }
                let began = Instant::now();
                let imports: Vec<ImportedRequest> = (first..(first + batch).min(n))
                    .map(|i| generate(i, n, now))
                    .collect();
                generating += began.elapsed();
                let began = Instant::now();
                let logs: usize = imports.iter().map(|r| r.job_logs.len()).sum();
                // MariaDB may pick one of two writers' batches as a deadlock's victim
                // (gap locks of the ids looked up first): sent again, as an importer
                // would; what was stored is skipped.
                let mut tries = 0;
                while let Err(err) = store.import_requests(&imports).await {
                    tries += 1;
                    assert!(
                        err.is_transient() && tries < 10,
                        "the store takes the batch: {err}"
                    );
                }
                storing += began.elapsed();
                let done = rows.fetch_add(logs, Ordering::Relaxed) + logs;
                let last = (first + batch).min(n);
                if last % 100_000 < batch {
                    let secs = started.elapsed().as_secs_f64();
                    eprintln!(
                        "  {last} requests, {done} job log rows in {secs:.0} s ({:.0} requests/s)",
                        last as f64 / secs
                    );
                }
            }
        });
    }
    let (mut generating, mut storing) = (Duration::ZERO, Duration::ZERO);
    while let Some(done) = tasks.join_next().await {
        let (g, s) = done.expect("a writer ends");
        generating += g;
        storing += s;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "| the writers' time | {:.1} s making batches, {:.1} s in the store |",
        generating.as_secs_f64(),
        storing.as_secs_f64()
    );
    let rows = rows.load(Ordering::Relaxed) as u64;
    println!(
        "| generate {n} requests ({writers} writers, batches of {batch}) | {secs:.1} s: {:.0} requests/s, {:.0} job log rows/s ({rows} rows) |",
        n as f64 / secs,
        rows as f64 / secs
    );
    rows
}

/// p50 and p99 of `samples` GETs of the URLs `urls` gives in turn, in ms.
async fn timed_gets(
    http: &reqwest::Client,
    samples: usize,
    mut urls: impl FnMut(usize) -> String,
) -> (f64, f64) {
    let mut times = Vec::with_capacity(samples);
    for k in 0..samples {
        let url = urls(k);
        let started = Instant::now();
        let response = http.get(&url).send().await.expect("the server answers");
        let status = response.status();
        let body = response.bytes().await.expect("the body arrives");
        times.push(started.elapsed());
        assert!(
            status.is_success(),
            "GET {url}: {status} {}",
            String::from_utf8_lossy(&body)
        );
    }
    times.sort();
    let ms = |p: f64| crate::percentile(&times, p).as_secs_f64() * 1e3;
    (ms(0.5), ms(0.99))
}

/// The filters of the API's find measured, each as the query string of
/// `GET /api/v1/requests` and as the store's filter (for its plan).
fn finds(n: usize, now: DateTime<Utc>) -> Vec<(&'static str, String, RequestFilter)> {
    let page = |filter: RequestFilter| RequestFilter {
        limit: 20,
        ..filter
    };
    let month_ago = now - chrono::Duration::days(30);
    let two_months_ago = now - chrono::Duration::days(60);
    let rfc = |at: DateTime<Utc>| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    vec![
        (
            "newest",
            "limit=20".to_owned(),
            page(RequestFilter::default()),
        ),
        (
            "type (common)",
            "type=type-0&limit=20".to_owned(),
            page(RequestFilter {
                request_type: Some("type-0".into()),
                ..Default::default()
            }),
        ),
        (
            "type (rare)",
            "type=type-29&limit=20".to_owned(),
            page(RequestFilter {
                request_type: Some("type-29".into()),
                ..Default::default()
            }),
        ),
        (
            "state FAIL",
            "state=FAIL&limit=20".to_owned(),
            page(RequestFilter {
                states: vec![State::Fail],
                ..Default::default()
            }),
        ),
        (
            "state RUNNING (none)",
            "state=RUNNING&limit=20".to_owned(),
            page(RequestFilter {
                states: vec![State::Running],
                ..Default::default()
            }),
        ),
        (
            "user",
            "user=user-42&limit=20".to_owned(),
            page(RequestFilter {
                user: Some("user-42".into()),
                ..Default::default()
            }),
        ),
        (
            "arg host",
            "arg=host%3Dhost-04242&limit=20".to_owned(),
            page(RequestFilter {
                args: BTreeMap::from([("host".into(), "host-04242".into())]),
                ..Default::default()
            }),
        ),
        (
            "time range (a month, two months ago)",
            format!(
                "since={}&until={}&limit=20",
                rfc(two_months_ago),
                rfc(month_ago)
            ),
            page(RequestFilter {
                since: Some(two_months_ago),
                until: Some(month_ago),
                ..Default::default()
            }),
        ),
        (
            "type + state + user",
            "type=type-1&state=COMPLETE&user=user-7&limit=20".to_owned(),
            page(RequestFilter {
                request_type: Some("type-1".into()),
                states: vec![State::Complete],
                user: Some("user-7".into()),
                ..Default::default()
            }),
        ),
        (
            "page 501 by offset (10,000 deep)",
            "limit=20&offset=10000".to_owned(),
            RequestFilter {
                limit: 20,
                offset: 10_000.min(n as u64),
                ..Default::default()
            },
        ),
    ]
}

/// The history benchmark (`--history N`): the database filled, then measured.
// The script in the order it runs, as `run` of load.rs.
#[allow(clippy::too_many_lines)]
pub(crate) async fn run(args: &crate::Args, n: usize) {
    // SPINDLE_BENCH_KEEP=1 keeps the server's logs (and a SQLite database) for a look after.
    let dir = tempfile::Builder::new()
        .disable_cleanup(std::env::var_os("SPINDLE_BENCH_KEEP").is_some())
        .tempdir()
        .unwrap();
    eprintln!("the bench's files: {}", dir.path().display());
    let (url, fresh_server_db) = match &args.database {
        Some(url) => (url.clone(), None),
        None => match args.setup {
            crate::Setup::Server => (
                format!("sqlite://{}", dir.path().join("history.db").display()),
                None,
            ),
            _ => {
                let (url, admin) = crate::fresh(args.backend, "history").await;
                (url.clone(), Some((url, admin)))
            }
        },
    };
    let backend = url.split(':').next().unwrap_or_default().to_owned();
    println!(
        "| history benchmark on {backend} | {} |",
        Utc::now().format("%Y-%m-%d")
    );
    println!("|---|---|");
    let data_dir = match backend.as_str() {
        "postgres" | "postgresql" => "/var/lib/postgresql",
        "mysql" | "mariadb" => "/var/lib/mysql",
        _ => dir.path().to_str().unwrap(),
    };
    let needed = n as u64 * BYTES_PER_REQUEST + (5 << 30);
    if let Some(free) = free_bytes(data_dir) {
        assert!(
            free >= needed,
            "{n} requests need about {} GiB free at {data_dir} (5 GiB to spare); {} GiB are",
            needed >> 30,
            free >> 30
        );
        println!(
            "| disk free at {data_dir} before | {} GiB (needs about {} GiB) |",
            free >> 30,
            needed >> 30
        );
    }
    let store = store::open(&url).await.expect("the database opens");
    if n > 0 {
        let writers = args.writers;
        fill(Arc::clone(&store), n, writers, args.batch).await;
        if let Some(free_after) = free_bytes(data_dir) {
            println!("| disk free after | {} GiB |", free_after >> 30);
        }
    }
    // The planner's statistics, as a database's own maintenance keeps them.
    match backend.as_str() {
        "sqlite" => {
            let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
            sqlx::query("ANALYZE").execute(&pool).await.unwrap();
        }
        "postgres" | "postgresql" => {
            let pool = sqlx::PgPool::connect(&url).await.unwrap();
            sqlx::query("VACUUM ANALYZE").execute(&pool).await.unwrap();
        }
        _ => {
            let pool = sqlx::MySqlPool::connect(&url).await.unwrap();
            sqlx::query("ANALYZE TABLE requests, request_args, request_archives, job_log")
                .execute(&pool)
                .await
                .unwrap();
        }
    }
    let total = store
        .count_requests(&[State::Complete, State::Fail, State::Stopped], None)
        .await
        .unwrap();
    let count: u64 = total.iter().map(|(_, n)| n).sum();
    let n = usize::try_from(count).unwrap_or(usize::MAX);
    println!("| requests in the database | {count} |");

    // The plans, from the store itself.
    let now = Utc::now();
    // Requests of the history that are there (a retention may have removed the
    // oldest), all over the year: the newest thousand of the common type.
    let ids: Vec<String> = store
        .find_requests(&RequestFilter {
            request_type: Some("type-0".into()),
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|request| request.id)
        .collect();
    assert!(!ids.is_empty(), "the database holds no generated history");
    let id = ids[ids.len() / 2].clone();
    // A 5,000-job request, when one is there still: those are the requests of host-00049
    // (i ≡ 7 modulo 20,000).
    let big = store
        .find_requests(&RequestFilter {
            args: BTreeMap::from([("host".to_owned(), "host-00049".to_owned())]),
            limit: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .next()
        .map(|request| request.id);
    let mut reads: Vec<(String, Vec<store::plans::QueryPlan>)> = Vec::new();
    for (label, _, filter) in finds(n, now) {
        let (found, plans) = store::plans::explained(store.find_requests(&filter)).await;
        found.unwrap();
        reads.push((format!("find: {label}"), plans));
    }
    let (counted, plans) =
        store::plans::explained(store.count_requests(&State::ALL, Some(10_000))).await;
    counted.unwrap();
    reads.push(("the list's counts".to_owned(), plans));
    let (read, plans) = store::plans::explained(async {
        store.get_request(&id, true).await?;
        store.job_log(&id).await
    })
    .await;
    read.unwrap();
    reads.push(("a request with its chain and log".to_owned(), plans));
    for (label, plans) in &reads {
        for plan in plans {
            println!(
                "| plan: {label} | {} {} |",
                if plan.full_scans.is_empty() {
                    "index:".to_owned()
                } else {
                    format!("**reads whole: {:?}**", plan.full_scans)
                },
                plan.plan.join(" / ").replace('|', "¦")
            );
        }
    }
    drop(store);

    // The API and the UI through `spindle server`.
    let specs = dir.path().join("specs");
    std::fs::create_dir_all(&specs).unwrap();
    std::fs::write(specs.join("none.yaml"), "sequences: {}\n").unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let server = Process::start(
        dir.path(),
        &[
            "server",
            "--listen",
            &listen,
            "--specs",
            specs.to_str().unwrap(),
            "--database",
            &url,
        ],
    );
    let base = format!("http://{listen}");
    let http = reqwest::Client::new();
    crate::wait_up(&http, &base).await;
    let samples = args.samples;
    for (label, query, _) in finds(n, now) {
        let (p50, p99) = timed_gets(&http, samples, |_| {
            format!("{base}/api/v1/requests?{query}")
        })
        .await;
        println!("| API find: {label} | p50 {p50:.2} ms, p99 {p99:.2} ms |");
    }
    // The next page, by the cursor the first page named.
    let first = http
        .get(format!("{base}/api/v1/requests?limit=20"))
        .send()
        .await
        .unwrap();
    let next = first
        .headers()
        .get("Spindle-Next")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let (p50, p99) = timed_gets(&http, samples, |_| {
        format!("{base}/api/v1/requests?limit=20&after={next}")
    })
    .await;
    println!("| API find: the next page by cursor | p50 {p50:.2} ms, p99 {p99:.2} ms |");
    // Requests mostly of 15 jobs (a 200-job one every 100th).
    let some = |k: usize| ids[(k * 104_729 + 11) % ids.len()].clone();
    let (p50, p99) = timed_gets(&http, samples, |k| {
        format!("{base}/api/v1/requests/{}", some(k))
    })
    .await;
    println!("| API GET a request | p50 {p50:.2} ms, p99 {p99:.2} ms |");
    let (p50, p99) = timed_gets(&http, samples, |k| {
        format!("{base}/api/v1/requests/{}/log", some(k))
    })
    .await;
    println!("| API GET a request's log | p50 {p50:.2} ms, p99 {p99:.2} ms |");
    if let Some(big) = &big {
        let (p50, p99) = timed_gets(&http, samples.min(50), |_| {
            format!("{base}/api/v1/requests/{big}/log")
        })
        .await;
        println!("| API GET the log of a 5,000-job request | p50 {p50:.2} ms, p99 {p99:.2} ms |");
    }
    // The web UI: the list's page and its data (the API's first page and the counts),
    // a request's page and its views.
    let (p50, p99) = timed_gets(&http, samples, |_| format!("{base}/")).await;
    println!("| UI list page (HTML) | p50 {p50:.2} ms, p99 {p99:.2} ms |");
    let (p50, p99) = timed_gets(&http, samples, |_| format!("{base}/ui/api/counts")).await;
    println!("| UI list's counts | p50 {p50:.2} ms, p99 {p99:.2} ms |");
    let (p50, p99) = timed_gets(&http, samples, |k| format!("{base}/requests/{}", some(k))).await;
    println!("| UI request page (HTML) | p50 {p50:.2} ms, p99 {p99:.2} ms |");
    let (p50, p99) = timed_gets(&http, samples, |k| {
        format!("{base}/ui/api/requests/{}/graph", some(k))
    })
    .await;
    println!("| UI request page's graph | p50 {p50:.2} ms, p99 {p99:.2} ms |");
    let (p50, p99) = timed_gets(&http, samples, |k| {
        format!("{base}/ui/api/requests/{}/states", some(k))
    })
    .await;
    println!("| UI request page's states | p50 {p50:.2} ms, p99 {p99:.2} ms |");
    println!("| server peak memory | {:.0} MiB |", server.peak_mib());
    drop(server);
    if args.retention_seconds > 0.0 {
        crate::retention::retention_side_by_side(args, &url, dir.path(), &http).await;
    }
    if let Some((url, admin)) = fresh_server_db {
        crate::drop_fresh(&url, admin).await;
    }
}
