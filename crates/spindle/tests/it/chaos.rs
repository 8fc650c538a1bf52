//! Issue #11's chaos test, on each backend: two `spindle rm` and three `spindle jr` on a
//! PostgreSQL or MariaDB server of the test's own (`own_db.rs`: in a temporary directory,
//! run as a non-root user, on a free port) or on one SQLite file, many requests of shell
//! jobs that record every execution; meanwhile Job Runners are killed with SIGKILL (and
//! new ones started), a Request Manager is killed with SIGKILL and started again, the
//! database is stopped for a while, and (issue #48) the network between them is cut:
//! every call between processes goes through a link of the test's (`nemesis.rs`), and a
//! runner is cut from every Request Manager both ways for 3 leases, a runner is cut
//! from the managers' calls only (it reaches them, they do not reach it), a runner's
//! traffic is slowed both ways (300 ms a read) for a lease, and a Request Manager is cut
//! from the database but not from its clients (server backends). Then
//! every request is COMPLETE, each job's tries are numbered 1..n without a gap, every
//! execution has a logged try, and no job's program runs on.
//!
//! The server runs need the database's server programs; without them a run says it was
//! skipped, unless `SPINDLE_TEST_POSTGRES=required` or `SPINDLE_TEST_MYSQL=required`
//! (CI), which makes that a failure.
//! `SPINDLE_CHAOS_REQUESTS` and `SPINDLE_CHAOS_SECONDS` make a longer run (RELIABILITY.md).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::nemesis::{Link, Mode};
use crate::own_db::{OwnDatabase, OwnMariadb, OwnPostgres};
use crate::recovery::{Client, executions, items_of, running, work_dir};
use crate::{Service, jr_args, rm_args};

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// A tiny deterministic random number generator (the test's choices are printed with
/// its seed, so a failure can be replayed).
struct Dice(u64);

impl Dice {
    fn roll(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Longer than the database is down for: runners ride out the outage.
const LEASE: &str = "7s";

/// How long the database is down: longer than a call waits for a connection (3 s), so
/// that the Request Managers answer 503 meanwhile.
const DB_DOWN: Duration = Duration::from_secs(4);

/// A lease's length, as [`LEASE`] says it.
const LEASE_LENGTH: Duration = Duration::from_secs(7);

/// A partition the test made, until it heals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// Runner `n` cut from every Request Manager, both ways.
    Runner(usize),
    /// Runner `n` cannot be reached by the Request Managers; it reaches them.
    RunnerInbound(usize),
    /// Request Manager `n` cut from the database; its clients reach it.
    ManagerDatabase(usize),
    /// Runner `n`'s calls to the Request Managers and theirs to it slowed (every read
    /// held 300 ms).
    SlowRunner(usize),
}

/// Every call between the test's processes, through links it holds.
struct Network {
    /// Managers' calls to runner `n`.
    to_runner: Vec<Link>,
    /// Runner `n`'s calls to manager `k`.
    runner_to_manager: Vec<Vec<Link>>,
    /// Manager `k`'s connections to the database (none on SQLite).
    manager_to_database: Vec<Link>,
    /// Partitions in force, with when each heals.
    cuts: Vec<(Cut, Instant)>,
    /// How many of each kind were made.
    made: BTreeMap<&'static str, usize>,
}

impl Network {
    fn links(&self, cut: Cut) -> Vec<&Link> {
        match cut {
            Cut::Runner(n) => std::iter::once(&self.to_runner[n])
                .chain(&self.runner_to_manager[n])
                .collect(),
            Cut::RunnerInbound(n) => vec![&self.to_runner[n]],
            Cut::SlowRunner(n) => std::iter::once(&self.to_runner[n])
                .chain(&self.runner_to_manager[n])
                .collect(),
            Cut::ManagerDatabase(k) => vec![&self.manager_to_database[k]],
        }
    }

    fn cut(&mut self, cut: Cut, for_how_long: Duration) {
        for link in self.links(cut) {
            // A slowed link that is cut stays cut until that heals.
            if link.mode() != Mode::Cut {
                link.set(match cut {
                    Cut::SlowRunner(_) => Mode::Delay(300),
                    _ => Mode::Cut,
                });
            }
        }
        let kind = match cut {
            Cut::Runner(_) => "runner cut both ways",
            Cut::RunnerInbound(_) => "runner unreachable",
            Cut::ManagerDatabase(_) => "manager cut from the database",
            Cut::SlowRunner(_) => "runner slowed",
        };
        *self.made.entry(kind).or_default() += 1;
        self.cuts.push((cut, Instant::now() + for_how_long));
    }

    /// Heals the partitions that are due (all, with `all`).
    fn heal(&mut self, all: bool) {
        let now = Instant::now();
        let (due, kept): (Vec<_>, Vec<_>) = self
            .cuts
            .iter()
            .partition(|(_, until)| all || *until <= now);
        self.cuts = kept;
        for (cut, _) in due {
            // A link still in another partition stays cut.
            let still: Vec<*const Link> = self
                .cuts
                .iter()
                .flat_map(|(other, _)| self.links(*other))
                .map(std::ptr::from_ref)
                .collect();
            for link in self.links(cut) {
                if !still.contains(&std::ptr::from_ref(link)) {
                    link.set(Mode::Pass);
                }
            }
        }
    }

    fn is_cut(&self, cut: Cut) -> bool {
        self.cuts.iter().any(|(c, _)| *c == cut)
    }
}

/// `url` with its host and port replaced by `addr` (a database URL through a link).
fn through(url: &str, addr: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let (user, host) = match rest.split_once('@') {
        Some((user, host)) => (format!("{user}@"), host),
        None => (String::new(), rest),
    };
    let path = host.find(['/', '?']).map_or("", |at| &host[at..]);
    format!("{scheme}://{user}{addr}{path}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_on_postgres_every_request_completes_and_every_execution_is_logged() {
    let test = "chaos_on_postgres_every_request_completes_and_every_execution_is_logged";
    let Some(postgres) = OwnPostgres::start(test) else {
        return;
    };
    let database = postgres.url();
    chaos(test, Some(OwnDatabase::Postgres(postgres)), database).await;
}

/// Issue #32, point 4: the same with the Request Managers reaching PostgreSQL through a
/// PgBouncer of the test's own (session pooling, at most 40 server connections for two
/// managers' pools of 16 and a restarted one's), its server stopped and started again
/// under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_through_pgbouncer_every_request_completes_and_every_execution_is_logged() {
    let test = "chaos_through_pgbouncer_every_request_completes_and_every_execution_is_logged";
    let Some(postgres) = OwnPostgres::start(test) else {
        return;
    };
    let Some(bouncer) = crate::pgbouncer::OwnPgbouncer::start(test, postgres.port(), "session", 40)
    else {
        return;
    };
    let database = bouncer.url();
    chaos(test, Some(OwnDatabase::Postgres(postgres)), database).await;
    drop(bouncer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_on_mysql_every_request_completes_and_every_execution_is_logged() {
    let test = "chaos_on_mysql_every_request_completes_and_every_execution_is_logged";
    let Some(mariadb) = OwnMariadb::start(test) else {
        return;
    };
    let database = mariadb.url();
    chaos(test, Some(OwnDatabase::Mariadb(mariadb)), database).await;
}

/// On SQLite the two Request Managers share one file (one writer at a time, as on one
/// machine); an embedded database cannot be stopped apart from its users, so this run
/// has no database stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_on_sqlite_every_request_completes_and_every_execution_is_logged() {
    let test = "chaos_on_sqlite_every_request_completes_and_every_execution_is_logged";
    let dir = work_dir();
    let database = format!("sqlite://{}", dir.path().join("spindle.db").display());
    chaos(test, None, database).await;
}

/// The chaos run on `database`; `own` is its server, stopped once for [`DB_DOWN`].
// Long: one scenario (start, chaos, wait for every end, check every job and execution)
// whose steps share the services, the client and the counts.
async fn chaos(test: &str, mut own: Option<OwnDatabase>, database: String) {
    let started = Instant::now();
    let n_requests = setting("SPINDLE_CHAOS_REQUESTS", 40) as usize;
    let chaos_for = Duration::from_secs(setting("SPINDLE_CHAOS_SECONDS", 15));
    let seed = setting(
        "SPINDLE_CHAOS_SEED",
        u64::from(std::process::id()) * 2_654_435_761 + 1,
    );
    let mut dice = Dice(seed);
    // The network nemesis (issue #48); `SPINDLE_CHAOS_PARTITIONS=0` leaves it out.
    let partitions = setting("SPINDLE_CHAOS_PARTITIONS", 1) == 1;
    let dir = work_dir();
    let marks: PathBuf = dir.path().join("marks");
    // Each job takes a moment, so that kills land while jobs run.
    let script = serde_json::json!([
        "-c",
        "echo \"$SPINDLE_ARG_TAG $SPINDLE_ARG_ITEM $$\" >> \"$SPINDLE_ARG_MARKS/executions\"; exec sleep 0.4"
    ]);
    // The database's links (a server's; SQLite is a file).
    let mut manager_to_database = Vec::new();
    let mut databases = Vec::new();
    for _ in 0..2 {
        if own.is_some() {
            let link = Link::to(&database).await;
            databases.push(through(&database, &link.addr));
            manager_to_database.push(link);
        } else {
            databases.push(database.clone());
        }
    }
    let mut rms = vec![
        Service::start(dir.path(), &rm_args(&databases[0], LEASE, &[])),
        Service::start(dir.path(), &rm_args(&databases[1], LEASE, &[])),
    ];
    let mut network = Network {
        to_runner: Vec::new(),
        runner_to_manager: Vec::new(),
        manager_to_database,
        cuts: Vec::new(),
        made: BTreeMap::new(),
    };
    let mut runner_args: Vec<(String, String)> = Vec::new();
    for _ in 0..3 {
        let to_runner = Link::to("127.0.0.1:9").await;
        let mut out = Vec::new();
        for rm in &rms {
            out.push(Link::to(&rm.url).await);
        }
        let rm_urls = out.iter().map(Link::url).collect::<Vec<_>>().join(",");
        runner_args.push((rm_urls, to_runner.url()));
        network.to_runner.push(to_runner);
        network.runner_to_manager.push(out);
    }
    let start_runner = |n: usize, network: &Network| {
        let (rm_urls, advertised) = &runner_args[n];
        let args = jr_args(rm_urls, LEASE, &["--advertise-url", advertised]);
        let runner = Service::start(dir.path(), &args);
        network.to_runner[n].retarget(&runner.url);
        runner
    };
    let mut jrs: Vec<Service> = (0..3).map(|n| start_runner(n, &network)).collect();
    // Requests go to the Request Manager that is never killed.
    let client = Client::new(&rms[1].url);
    let mut created: BTreeMap<String, String> = BTreeMap::new();
    let items = ["a", "b", "c"];
    let mut kills = 0;
    let mut rm_restarts = 0;
    let mut db_stops = 0;
    let chaos_started = Instant::now();
    let mut next_event = Instant::now() + Duration::from_millis(700);
    let mut event = 0;
    while created.len() < n_requests
        || chaos_started.elapsed() < chaos_for
        || !network.cuts.is_empty()
    {
        network.heal(false);
        // No service ends but by the test's hand.
        for service in rms.iter_mut().chain(jrs.iter_mut()) {
            if let Some(status) = service.exited() {
                panic!(
                    "seed {seed}: {} exited ({status}) by itself:\n{}",
                    service.url,
                    service.stderr()
                );
            }
        }
        if created.len() < n_requests {
            let tag = format!("r{}", created.len());
            let id = client
                .create_with(
                    &marks,
                    &tag,
                    &items[..1 + dice.roll(items.len())],
                    Some(&script),
                )
                .await;
            created.insert(tag, id);
        }
        if Instant::now() >= next_event {
            event += 1;
            // Partitions begin only in the chaos's time: past it, while the last creates
            // go on, a cut would make each of them wait out a hand-over's timeout, and
            // the run would grow without end.
            let partitions = partitions && chaos_started.elapsed() < chaos_for;
            match event % 6 {
                // A runner cut from every Request Manager, both ways, for 3 leases: its
                // requests are recovered elsewhere meanwhile, and healed, it is fenced.
                1 if partitions
                    && !network
                        .cuts
                        .iter()
                        .any(|(c, _)| matches!(c, Cut::Runner(_))) =>
                {
                    network.cut(Cut::Runner(dice.roll(jrs.len())), LEASE_LENGTH * 3);
                }
                // A runner the Request Managers cannot reach, that reaches them.
                2 if partitions => {
                    let victim = dice.roll(jrs.len());
                    if !network.is_cut(Cut::RunnerInbound(victim)) {
                        network.cut(Cut::RunnerInbound(victim), LEASE_LENGTH * 2);
                    }
                }
                // A Request Manager cut from the database, not from its clients.
                4 if partitions
                    && !network.manager_to_database.is_empty()
                    && !network.is_cut(Cut::ManagerDatabase(0)) =>
                {
                    network.cut(Cut::ManagerDatabase(0), DB_DOWN);
                }
                // A Request Manager dies and comes back.
                3 => {
                    rms[0].kill();
                    // A Request Manager that cannot reach its database at start says
                    // so and exits (through PgBouncer, logins fail for a while after
                    // the server came back): started again until it serves.
                    let args = rm_args(&databases[0], LEASE, &[]);
                    let mut tries = 0;
                    rms[0] = loop {
                        match Service::try_start(dir.path(), &args) {
                            Ok(rm) => break rm,
                            Err(_) if tries < 30 => {
                                tries += 1;
                                tokio::time::sleep(Duration::from_secs(1)).await;
                            }
                            Err(err) => panic!(
                                "seed {seed}: the request manager did not start again: {err}"
                            ),
                        }
                    };
                    for out in &network.runner_to_manager {
                        out[0].retarget(&rms[0].url);
                    }
                    rm_restarts += 1;
                }
                // The database goes away for a while.
                5 if db_stops == 0 && own.is_some() => {
                    let own = own.as_mut().unwrap();
                    own.stop();
                    let down = Instant::now();
                    // Through PgBouncer the first query after the stop waits in its
                    // queue (PgBouncer retries the server every 15 s): the Request
                    // Manager gives it up after the store's call timeout.
                    let probe = client
                        .http
                        .get(format!(
                            "{}/api/v1/requests/{}",
                            client.base,
                            created.values().next().unwrap()
                        ))
                        .timeout(Duration::from_secs(60))
                        .send()
                        .await
                        .map(|response| response.status().as_u16());
                    assert!(
                        matches!(probe, Ok(503)),
                        "a Request Manager whose database is down answers 503, not {probe:?}"
                    );
                    tokio::time::sleep(DB_DOWN.saturating_sub(down.elapsed())).await;
                    own.start();
                    db_stops += 1;
                }
                // A runner's traffic slowed both ways for a lease.
                0 if partitions && dice.roll(2) == 0 => {
                    let victim = dice.roll(jrs.len());
                    if !network.is_cut(Cut::SlowRunner(victim)) {
                        network.cut(Cut::SlowRunner(victim), LEASE_LENGTH);
                    }
                }
                // A Job Runner dies; a new one starts.
                _ => {
                    let victim = dice.roll(jrs.len());
                    jrs[victim].kill();
                    jrs[victim] = start_runner(victim, &network);
                    kills += 1;
                }
            }
            next_event = Instant::now() + Duration::from_millis(700 + dice.roll(800) as u64);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    network.heal(true);
    let recover_started = Instant::now();
    for id in created.values() {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let request = client.try_get(&format!("/api/v1/requests/{id}")).await;
            if request.as_ref().is_some_and(|r| r["state"] == 3) {
                break;
            }
            // A request must not fail because of the chaos around it: an end other than
            // COMPLETE fails the test at once, with why.
            let ended = request
                .as_ref()
                .and_then(|r| r["state"].as_u64())
                .and_then(|state| u8::try_from(state).ok())
                .and_then(|state| proto::State::from_value(state).ok())
                .is_some_and(proto::State::is_finished);
            if ended || Instant::now() > until {
                // Everything that says why, before failing.
                let log = client.try_get(&format!("/api/v1/requests/{id}/log")).await;
                let runners = client.try_get("/api/v1/job-runners").await;
                let services: Vec<String> = rms
                    .iter()
                    .chain(jrs.iter())
                    .map(|service| format!("{}:\n{}", service.url, service.stderr()))
                    .collect();
                // First what each service said of this request (the whole output, which
                // follows, may be cut where CI shows it).
                let about: Vec<String> = services
                    .iter()
                    .flat_map(|text| {
                        let url = text.lines().next().unwrap_or_default().to_owned();
                        text.lines()
                            .filter(|line| line.contains(id.as_str()))
                            .map(move |line| format!("{url} {line}"))
                            .collect::<Vec<_>>()
                    })
                    .collect();
                panic!(
                    "seed {seed}: request {id} did not complete: {request:?}\nits tries that did not succeed:\n{}\nwhat the services said of it:\n{}\nlog: {log:?}\nrunners: {runners:?}\n{}",
                    failed_tries(log.as_ref()).join("\n"),
                    about.join("\n"),
                    services.join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let recovered_in = recover_started.elapsed();

    // Every job's tries are 1..n without a gap; every execution has a logged try.
    let recorded = executions(&marks);
    let mut interrupted = 0;
    let mut jobs = 0;
    for (tag, id) in &created {
        let item_of = items_of(&client, id).await;
        // A create whose answer was lost (its Request Manager killed, its database
        // stopped, its call given up after it committed) is sent again: the first may
        // be stored too, and its twin runs the same tag's programs, each logged there.
        let mut twin_tries: BTreeMap<String, usize> = BTreeMap::new();
        let same_tag = client
            .get(&format!("/api/v1/requests?arg=tag%3D{tag}&limit=10"))
            .await;
        let same_tag = same_tag.as_array().unwrap();
        assert!(
            same_tag.iter().any(|found| found["id"] == id.as_str()),
            "{tag} is found by its arg: {same_tag:?}"
        );
        for twin in same_tag {
            let twin = twin["id"].as_str().unwrap();
            if twin == id {
                continue;
            }
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                format!("{test}: {tag} stored twice (a create sent again): {id} and {twin}\n")
                    .as_bytes(),
            );
            let twin_items = items_of(&client, twin).await;
            for (job_id, tries) in client.tries(twin).await {
                if let Some(item) = twin_items.get(&job_id) {
                    *twin_tries.entry(item.clone()).or_default() += tries.len();
                }
            }
        }
        for (job_id, tries) in client.tries(id).await {
            jobs += 1;
            let numbers: Vec<u64> = tries.iter().map(|t| t.0).collect();
            let expected: Vec<u64> = (1..=tries.len() as u64).collect();
            assert_eq!(
                numbers, expected,
                "seed {seed}: request {id} job {job_id}: {tries:?}"
            );
            assert_eq!(
                tries.last().unwrap().1,
                3,
                "seed {seed}: request {id} job {job_id}: {tries:?}"
            );
            interrupted += tries
                .iter()
                .filter(|t| t.2.starts_with("interrupted:"))
                .count();
            if let Some(item) = item_of.get(&job_id) {
                let runs = recorded
                    .iter()
                    .filter(|(t, i, _)| t == tag && i == item)
                    .count();
                let twins = twin_tries.get(item).copied().unwrap_or_default();
                assert!(
                    runs >= 1 && runs <= tries.len() + twins,
                    "seed {seed}: request {id} job {job_id} ({tag} {item}): {runs} executions, tries {tries:?} (and {twins} of a twin)"
                );
            }
        }
    }
    // Nothing runs on: every recorded program has ended.
    for (tag, item, pid) in &recorded {
        crate::eventually(
            &format!("{tag} {item}'s program (pid {pid}) has ended"),
            Duration::from_secs(10),
            async || !running(*pid),
        )
        .await;
    }
    let found = client
        .get("/api/v1/requests?state=RUNNING&state=PENDING&state=SUSPENDED&limit=10")
        .await;
    assert_eq!(
        found.as_array().map(Vec::len),
        Some(0),
        "seed {seed}: {found}"
    );
    // Why any try failed (an interrupted try is the chaos's; any other is a lead).
    let mut failed = Vec::new();
    for id in created.values() {
        let log = client.try_get(&format!("/api/v1/requests/{id}/log")).await;
        failed.extend(
            failed_tries(log.as_ref())
                .into_iter()
                .filter(|line| !line.contains("interrupted:"))
                .map(|line| format!("  request {id}: {line}")),
        );
    }
    if !failed.is_empty() {
        let text = format!(
            "{test}: seed {seed}: tries that failed:\n{}\n",
            failed.join("\n")
        );
        let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
    }
    let partitions = network
        .made
        .iter()
        .map(|(kind, n)| format!("{n} {kind}"))
        .collect::<Vec<_>>()
        .join(", ");
    let line = format!(
        "{test}: seed {seed}: {} requests, {jobs} jobs, {} executions, {kills} job runners killed, {rm_restarts} request manager restarts, {db_stops} database stops, partitions: {partitions}, {interrupted} interrupted tries, every request complete {} ms after the chaos ended, {} s in all\n",
        created.len(),
        recorded.len(),
        recovered_in.as_millis(),
        started.elapsed().as_secs()
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    drop(jrs);
    drop(rms);
    drop(own);
}

/// Each job log entry whose try did not succeed: job, try, state, exit and error.
fn failed_tries(log: Option<&serde_json::Value>) -> Vec<String> {
    log.and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter(|entry| entry["state"] != 3)
        .map(|entry| {
            format!(
                "job {} ({}) try {}: state {} exit {}: {} stderr: {}",
                entry["jobId"],
                entry["name"],
                entry["try"],
                entry["state"],
                entry["exit"],
                entry["error"],
                entry["stderr"]
            )
        })
        .collect()
}
