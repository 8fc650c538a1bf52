//! The restart benchmark on two `spindle jr` behind one `spindle rm`
//! (`SPINDLE_BENCH_SETUP=rm-jr`): N requests RUNNING across the two runners, each
//! process's memory per running request, `spindle ps`, both runners stopped with SIGTERM
//! and started again (until every chain runs again), then one runner killed with SIGKILL
//! (until the other holds every chain: its lease lapses, the manager recovers its
//! requests and resumes them on the survivor).

use std::path::Path;
use std::time::{Duration, Instant};

use super::common::{Process, cpu, free_port};
use super::{all_running, analyze, answer_time, create, ps, rss_mib, terminate};

/// The runners' lease: short, so that a killed one is found lost soon (the recovery's
/// rate is measured from then on).
const LEASE: &str = "3s";

fn rm(dir: &Path, port: u16, database: &str) -> Process {
    Process::start(
        dir,
        &[
            "rm",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--specs",
            "specs",
            "--database",
            database,
            "--lease",
            LEASE,
        ],
    )
}

fn jr(dir: &Path, port: u16, rm_base: &str) -> Process {
    Process::start(
        dir,
        &[
            "jr",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--rm-url",
            rm_base,
            "--lease",
            LEASE,
        ],
    )
}

/// The runners the manager lists in `state` (live, lost, stopped; "ended": the lost
/// ones it declared so, which it then recovers), by URL, with the RUNNING requests each owns.
async fn listed(http: &reqwest::Client, rm_base: &str, state: &str) -> Vec<(String, u64)> {
    let Ok(response) = http
        .get(format!("{rm_base}/api/v1/job-runners"))
        .send()
        .await
    else {
        return Vec::new();
    };
    let runners: Vec<serde_json::Value> = response.json().await.unwrap_or_default();
    runners
        .iter()
        .filter(|runner| match state {
            "ended" => runner["state"] == "lost" && runner["endedAt"].is_string(),
            state => runner["state"] == state,
        })
        .map(|runner| {
            (
                runner["url"].as_str().unwrap_or_default().to_owned(),
                runner["runningRequests"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

async fn live_runners(http: &reqwest::Client, rm_base: &str) -> Vec<(String, u64)> {
    listed(http, rm_base, "live").await
}

/// Waits until exactly `urls` are live (and a little more, so that the manager's
/// one-second cache of its runners has seen them all).
async fn wait_live(http: &reqwest::Client, rm_base: &str, urls: &[String]) {
    loop {
        let live = live_runners(http, rm_base).await;
        if live.len() == urls.len() && urls.iter().all(|url| live.iter().any(|(u, _)| u == url)) {
            tokio::time::sleep(Duration::from_millis(1_200)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The chains a runner holds, from its metrics (`spindle_chains_running`): the
/// manager's list of runners counts each one's requests in the database, and polled
/// often it would load the database the recovery is measured on.
async fn chains_running(http: &reqwest::Client, jr_base: &str) -> u64 {
    let Ok(response) = http.get(format!("{jr_base}/metrics")).send().await else {
        return 0;
    };
    let text = response.text().await.unwrap_or_default();
    text.lines()
        .find_map(|line| line.strip_prefix("spindle_chains_running "))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .map_or(0, |value| value as u64)
}

/// How many requests ended (at most `n`).
async fn ended(http: &reqwest::Client, rm_base: &str, n: usize) -> usize {
    let mut ended = 0;
    for state in ["COMPLETE", "FAIL", "STOPPED"] {
        ended += super::count(http, rm_base, state, n).await;
    }
    ended
}

pub(crate) fn run(
    dir: &Path,
    rt: &tokio::runtime::Runtime,
    http: &reqwest::Client,
    database: &str,
    n: usize,
) {
    let rm_port = free_port();
    let rm_base = format!("http://127.0.0.1:{rm_port}");
    let jr_ports = [free_port(), free_port()];
    let jr_bases: Vec<String> = jr_ports
        .iter()
        .map(|port| format!("http://127.0.0.1:{port}"))
        .collect();
    let manager = rm(dir, rm_port, database);
    let mut runners: Vec<Process> = jr_ports
        .iter()
        .map(|port| jr(dir, *port, &rm_base))
        .collect();
    rt.block_on(wait_live(http, &rm_base, &jr_bases));
    let idle: Vec<f64> = runners.iter().map(|r| rss_mib(r.0.id())).collect();
    let rm_idle = rss_mib(manager.0.id());
    let started = Instant::now();
    rt.block_on(create(http, &rm_base, n));
    let created = started.elapsed();
    rt.block_on(all_running(http, &rm_base, started));
    analyze(rt, database);
    let held: Vec<f64> = runners.iter().map(|r| rss_mib(r.0.id())).collect();
    let shares = rt.block_on(live_runners(http, &rm_base));
    let per_runner: Vec<String> = runners
        .iter()
        .zip(&idle)
        .zip(&held)
        .zip(&jr_bases)
        .map(|(((_, idle), held), url)| {
            let chains = shares
                .iter()
                .find(|(u, _)| u == url)
                .map_or(0, |(_, count)| *count);
            format!(
                "{chains} chains, {:.1} KiB each",
                (held - idle) * 1024.0 / chains.max(1) as f64
            )
        })
        .collect();
    let rm_share = (rss_mib(manager.0.id()) - rm_idle) * 1024.0 / n as f64;
    let ps = ps(&rm_base);
    // What `spindle ps` waits for: the manager's answer, and within it the runners'.
    let running = "/api/v1/status/running";
    let rm_answer = rt.block_on(answer_time(http, &format!("{rm_base}{running}")));
    let jr_answers: Vec<String> = jr_bases
        .iter()
        .map(|base| {
            let (took, mb) = rt.block_on(answer_time(http, &format!("{base}{running}")));
            format!("{:.2} s ({mb:.1} MB)", took.as_secs_f64())
        })
        .collect();

    // SIGTERM to both runners (each suspends its chains and hands them back), then two
    // new ones: the time from their start until every chain runs again.
    let stopping = Instant::now();
    for runner in &mut runners {
        terminate(runner);
    }
    let suspended = stopping.elapsed();
    let since = Instant::now();
    runners = jr_ports
        .iter()
        .map(|port| jr(dir, *port, &rm_base))
        .collect();
    let restart_account = cpu::CpuAccount::start([
        ("spindle rm", manager.0.id()),
        ("spindle jr (the first)", runners[0].0.id()),
        ("spindle jr (the second)", runners[1].0.id()),
    ]);
    let resumed = rt.block_on(all_running(http, &rm_base, since));
    restart_account.print("request resumed after the restart", n);

    // SIGKILL to the first: its lease lapses, the manager recovers its requests and
    // resumes them on the second. From the kill, and from the moment the survivor
    // begins to take them, until it holds all N.
    rt.block_on(wait_live(http, &rm_base, &jr_bases));
    let survivor_had = rt.block_on(chains_running(http, &jr_bases[1]));
    // Dropping a process kills it with SIGKILL.
    let killed = runners.remove(0);
    let account = cpu::CpuAccount::start([
        ("spindle rm", manager.0.id()),
        ("spindle jr (the survivor)", runners[0].0.id()),
    ]);
    let killed_at = Instant::now();
    drop(killed);
    let (lost, began, held_all) = rt.block_on(async {
        let (mut lost, mut began) = (None, None);
        loop {
            if lost.is_none()
                && listed(http, &rm_base, "ended")
                    .await
                    .iter()
                    .any(|(url, _)| *url == jr_bases[0])
            {
                lost = Some(killed_at.elapsed());
            }
            let survivor = chains_running(http, &jr_bases[1]).await;
            if began.is_none() && survivor > survivor_had {
                began = Some(killed_at.elapsed());
            }
            // A request that ended meanwhile (none should: they sleep ten minutes) is
            // not waited for, and is reported.
            if survivor as usize >= n.saturating_sub(ended(http, &rm_base, n).await) {
                return (
                    lost.unwrap_or_default(),
                    began.unwrap_or_default(),
                    killed_at.elapsed(),
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let finished = rt.block_on(ended(http, &rm_base, n));
    let recovered = (n - finished) as u64 - survivor_had;
    let taking = held_all.saturating_sub(lost).max(Duration::from_millis(1));

    println!(
        "spindle rm + 2 spindle jr, {}:",
        database.split(':').next().unwrap_or_default()
    );
    println!(
        "| requests | created | runners' memory a running request | manager's | `spindle ps` | SIGTERM to exit | restart to all RUNNING | resumed a second | SIGKILL: declared lost | survivor begins | holds all | recovered a second (from lost) |"
    );
    println!("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {n} | {:.2} s ({:.0}/s) | {} | {rm_share:.1} KiB | {:.2} s ({} lines) | {:.2} s | {:.2} s | {:.0} | {:.2} s | {:.2} s | {:.2} s ({recovered} taken) | {:.0} |",
        created.as_secs_f64(),
        n as f64 / created.as_secs_f64(),
        per_runner.join("; "),
        ps.0.as_secs_f64(),
        ps.1,
        suspended.as_secs_f64(),
        resumed.as_secs_f64(),
        n as f64 / resumed.as_secs_f64(),
        lost.as_secs_f64(),
        began.as_secs_f64(),
        held_all.as_secs_f64(),
        recovered as f64 / taking.as_secs_f64(),
    );
    println!(
        "`spindle ps`: the manager answers `GET {running}` in {:.2} s ({:.1} MB); the runners theirs in {}",
        rm_answer.0.as_secs_f64(),
        rm_answer.1,
        jr_answers.join(" and ")
    );
    account.print("request recovered and resumed", recovered as usize);
    if finished > 0 {
        println!(
            "**{finished} requests ended during the run** (COMPLETE, FAIL or STOPPED): none should have"
        );
    }
    drop(runners);
    drop(manager);
}
