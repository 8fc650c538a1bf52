//! The history benchmark's retention phases (`--history N --retention-seconds S`): 50
//! clients create alone, then beside a retention whose cut-off is an hour into the
//! month nine months ago, then a retention alone cut six months ago, then the creates
//! alone again; the retention's own time and each month's drop read from the server's
//! log.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

use chrono::Utc;
use proto::State;
use serde_json::json;

use crate::common::{Process, free_port};

/// Finished requests in the database at `url`.
async fn finished(url: &str) -> u64 {
    let store = store::open(url).await.expect("the database opens");
    let counts = store
        .count_requests(&[State::Complete, State::Fail, State::Stopped], None)
        .await
        .unwrap();
    counts.iter().map(|(_, n)| n).sum()
}

/// Requests completed by 50 clients creating `load15` for `seconds` on a `spindle
/// server` with `extra` arguments; the server's peak memory.
async fn creates(
    url: &str,
    dir: &std::path::Path,
    http: &reqwest::Client,
    (clients, seconds): (usize, f64),
    extra: &[&str],
) -> usize {
    let specs = dir.join("load-specs");
    std::fs::create_dir_all(&specs).unwrap();
    std::fs::write(specs.join("load15.yaml"), crate::load15(None)).unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let mut argv = vec![
        "server",
        "--listen",
        &listen,
        "--specs",
        specs.to_str().unwrap(),
        "--database",
        url,
        "--interval",
        "1s",
    ];
    argv.extend_from_slice(extra);
    // The retention's own account of each pass (how many it removed, how long it took)
    // and of each month it dropped (how long it held the tables).
    let server = Process::start_logged(
        dir,
        &argv,
        &dir.join("server.log"),
        "warn,rm::manager::background=info,store::sql::partitions=info",
    );
    let base = format!("http://{listen}");
    crate::wait_up(http, &base).await;
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let body = json!({"type": "load15", "args": {}});
    if clients == 0 {
        tokio::time::sleep_until(deadline.into()).await;
    }
    let n = clients;
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..n {
        clients.spawn(crate::client(
            http.clone(),
            base.clone(),
            body.clone(),
            Arc::new(AtomicUsize::new(0)),
            Some(deadline),
            false,
            None,
        ));
    }
    let (mut ended, mut completed) = (0, 0);
    while let Some(done) = clients.join_next().await {
        let samples = done.expect("a client ends");
        ended += samples.len();
        // COMPLETE is 3.
        completed += samples.iter().filter(|s| s.state == 3).count();
    }
    drop(server);
    assert_eq!(completed, ended, "every request created completed");
    completed
}

/// Issue #51, point 2: creates for `--retention-seconds` without retention; then as
/// long with a retention that puts the first hour of the month nine months ago past it
/// (the oldest quarter of the history) beside them; then as long with one of the month
/// six months ago (the next quarter) alone; then creates alone again. The rate of
/// creates each time, and of the removal: what the retention removed in the server's
/// time, and in its own (its log's passes, which end when nothing is left). A cut-off an hour into a month leaves the
/// months before it wholly past (PostgreSQL drops them whole) and an hour of requests
/// to remove row by row.
pub(crate) async fn retention_side_by_side(
    args: &crate::Args,
    url: &str,
    dir: &std::path::Path,
    http: &reqwest::Client,
) {
    let seconds = args.retention_seconds;
    let alone = creates(url, dir, http, (50, seconds), &[]).await;
    println!(
        "| creates alone (50 clients), {seconds:.0} s | {:.0} completed/s |",
        alone as f64 / seconds
    );
    for (clients, months_ago) in [(50, 9), (0, 6)] {
        let retention = retention_past_month(months_ago);
        let retention = retention.as_str();
        let before = finished(url).await;
        let started = Instant::now();
        let created = creates(
            url,
            dir,
            http,
            (clients, seconds),
            &["--retention", retention],
        )
        .await;
        let took = started.elapsed().as_secs_f64();
        let removed = (before + created as u64).saturating_sub(finished(url).await);
        let (passes, own) = retention_passes(&dir.join("server.log"));
        if clients > 0 {
            println!(
                "| creates beside the retention (50 clients), {seconds:.0} s | {:.0} completed/s ({:+.1}%) |",
                created as f64 / seconds,
                (created as f64 / alone.max(1) as f64 - 1.0) * 100.0
            );
        }
        println!(
            "| removed by the retention of {retention} {} | {removed} requests in {took:.1} s (server up to down): {:.0} requests/s; {passes} in {own:.2} s of its own: {:.0} requests/s |",
            if clients == 0 { "alone" } else { "beside them" },
            removed as f64 / took,
            passes as f64 / own.max(1e-3),
        );
        let drops = month_drops(&dir.join("server.log"));
        if let Some(longest) = drops.iter().map(|drop| drop.1).max() {
            println!(
                "| months dropped | {}: their tables' locks waited for {} ms and held {} ms in all (the longest {longest} ms) |",
                drops.len(),
                drops.iter().map(|drop| drop.0).sum::<u64>(),
                drops.iter().map(|drop| drop.1).sum::<u64>(),
            );
        }
    }
    // Again, so that the machine's drift over the phases shows beside the difference.
    let again = creates(url, dir, http, (50, seconds), &[]).await;
    println!(
        "| creates alone again (50 clients), {seconds:.0} s | {:.0} completed/s ({:+.1}% on the first) |",
        again as f64 / seconds,
        (again as f64 / alone.max(1) as f64 - 1.0) * 100.0
    );
}

/// A retention (`--retention`, in seconds) whose cut-off is an hour into the month
/// `months_ago` months before this one.
fn retention_past_month(months_ago: i32) -> String {
    use chrono::{Datelike, TimeZone};
    let now = Utc::now();
    let month = now.year() * 12 + now.month0() as i32 - months_ago;
    let cut_off = Utc
        .with_ymd_and_hms(
            month.div_euclid(12),
            month.rem_euclid(12) as u32 + 1,
            1,
            1,
            0,
            0,
        )
        .unwrap();
    format!("{}s", (now - cut_off).num_seconds())
}

/// Each month the retention dropped, by the server's log at `log`: how long its tables'
/// locks took to get and how long they were held, in ms (`waited_ms=`, `held_ms=`).
fn month_drops(log: &std::path::Path) -> Vec<(u64, u64)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let field = |line: &str, name: &str| -> u64 {
        line.split_once(&format!(" {name}="))
            .and_then(|(_, rest)| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    text.lines()
        .filter(|line| line.contains("retention: dropped a month"))
        .map(|line| (field(line, "waited_ms"), field(line, "held_ms")))
        .collect()
}

/// The requests the retention's passes in the server's log at `log` removed, and the
/// seconds they took (`retention: removed …` lines, `requests=` and `seconds=`).
fn retention_passes(log: &std::path::Path) -> (u64, f64) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let field = |line: &str, name: &str| -> Option<f64> {
        let (_, rest) = line.split_once(&format!(" {name}="))?;
        rest.split_whitespace().next()?.parse().ok()
    };
    text.lines()
        .filter(|line| line.contains("retention: removed"))
        .fold((0, 0.0), |(n, took), line| {
            (
                n + field(line, "requests").unwrap_or(0.0) as u64,
                took + field(line, "seconds").unwrap_or(0.0),
            )
        })
}
