//! The open loop (`--rate R --seconds S`, issue #32): requests offered at a fixed rate
//! for a fixed time, whatever the server does with them, so that the rate it keeps up
//! with shows: the rate accepted, the rate completed within the window, the backlog
//! (accepted and not yet ended) second by second, and create→final state p50/p99.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// What one open-loop run saw.
pub struct Report {
    pub offered: usize,
    pub accepted: usize,
    /// Refused creates, by HTTP status.
    pub refused: Vec<(u16, usize)>,
    /// Ended within the offering window.
    pub completed_in_window: usize,
    pub window: Duration,
    /// From the first offer until the last accepted request ended.
    pub drained: Duration,
    /// (second, accepted and not yet ended) at each second of the window and after.
    pub backlog: Vec<(u64, usize)>,
    /// Create → final state of each accepted request, sorted.
    pub latencies: Vec<Duration>,
}

/// Offers `rate` requests a second for `seconds`: each a POST of `body` (with the next
/// lock key, when `keys` is given), then one waiting GET until it ends.
pub async fn run(
    http: reqwest::Client,
    base: String,
    body: Value,
    rate: f64,
    seconds: f64,
    keys: Option<usize>,
) -> Report {
    let accepted = Arc::new(AtomicUsize::new(0));
    let ended = Arc::new(AtomicUsize::new(0));
    let refused: Arc<Mutex<Vec<(u16, usize)>>> = Arc::default();
    let latencies: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let started = Instant::now();
    let window = Duration::from_secs_f64(seconds);
    // The backlog, sampled each second until everything accepted has ended.
    let sampler = {
        let (accepted, ended) = (Arc::clone(&accepted), Arc::clone(&ended));
        tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            loop {
                tick.tick().await;
                let (a, e) = (
                    accepted.load(Ordering::SeqCst),
                    ended.load(Ordering::SeqCst),
                );
                samples.push((started.elapsed().as_secs(), a.saturating_sub(e)));
                if started.elapsed() >= window && a == e {
                    return samples;
                }
            }
        })
    };
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut requests = tokio::task::JoinSet::new();
    let mut offered = 0usize;
    while started.elapsed() < window {
        tick.tick().await;
        let mut body = body.clone();
        if let Some(keys) = keys {
            body["args"]["key"] = json!(format!("k{}", offered % keys));
        }
        offered += 1;
        let (http, base) = (http.clone(), base.clone());
        let (accepted, ended) = (Arc::clone(&accepted), Arc::clone(&ended));
        let (refused, latencies) = (Arc::clone(&refused), Arc::clone(&latencies));
        requests.spawn(async move {
            let at = Instant::now();
            let Ok(response) = http
                .post(format!("{base}/api/v1/requests"))
                .json(&body)
                .send()
                .await
            else {
                count(&refused, 0);
                return;
            };
            let status = response.status().as_u16();
            if status != 201 {
                count(&refused, status);
                return;
            }
            accepted.fetch_add(1, Ordering::SeqCst);
            let created: Value = response.json().await.unwrap_or_default();
            let id = created["id"].as_str().unwrap_or_default().to_owned();
            loop {
                let now: Value = match http
                    .get(format!("{base}/api/v1/requests/{id}?wait=30s"))
                    .send()
                    .await
                {
                    Ok(answer) => answer.json().await.unwrap_or_default(),
                    Err(_) => Value::Null,
                };
                if matches!(now["state"].as_u64(), Some(3..=6)) {
                    break;
                }
            }
            latencies.lock().unwrap().push(at.elapsed());
            ended.fetch_add(1, Ordering::SeqCst);
        });
    }
    let completed_in_window = ended.load(Ordering::SeqCst);
    while let Some(done) = requests.join_next().await {
        done.expect("an offered request's task panicked");
    }
    let drained = started.elapsed();
    let backlog = sampler.await.expect("the sampler panicked");
    let mut latencies = std::mem::take(&mut *latencies.lock().unwrap());
    latencies.sort();
    let refused = std::mem::take(&mut *refused.lock().unwrap());
    Report {
        offered,
        accepted: accepted.load(Ordering::SeqCst),
        refused,
        completed_in_window,
        window,
        drained,
        backlog,
        latencies,
    }
}

fn count(refused: &Mutex<Vec<(u16, usize)>>, status: u16) {
    let mut refused = refused.lock().unwrap();
    match refused.iter_mut().find(|(s, _)| *s == status) {
        Some((_, n)) => *n += 1,
        None => refused.push((status, 1)),
    }
}

impl Report {
    /// The report as a Markdown table (`what`: the setup and request).
    pub fn print(&self, what: &str, percentile: fn(&[Duration], f64) -> Duration) {
        let secs = self.window.as_secs_f64();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!("| open loop | {what} |");
        println!("|---|---:|");
        println!(
            "| offered | {} in {secs:.1} s ({:.0}/s) |",
            self.offered,
            self.offered as f64 / secs
        );
        println!(
            "| accepted | {} ({:.0}/s) |",
            self.accepted,
            self.accepted as f64 / secs
        );
        if !self.refused.is_empty() {
            let refused: Vec<String> = self
                .refused
                .iter()
                .map(|(status, n)| match status {
                    0 => format!("{n} unanswered"),
                    status => format!("{n} × HTTP {status}"),
                })
                .collect();
            println!("| refused | {} |", refused.join(", "));
        }
        println!(
            "| completed within the window | {} ({:.0}/s) |",
            self.completed_in_window,
            self.completed_in_window as f64 / secs
        );
        println!(
            "| all accepted ended after | {:.2} s |",
            self.drained.as_secs_f64()
        );
        println!(
            "| create → final state p50 / p99 | {:.1} ms / {:.1} ms |",
            ms(percentile(&self.latencies, 0.5)),
            ms(percentile(&self.latencies, 0.99))
        );
        let backlog: Vec<String> = self
            .backlog
            .iter()
            .map(|(second, n)| format!("{second}s: {n}"))
            .collect();
        println!(
            "| backlog (accepted, not ended) by second | {} |",
            backlog.join(", ")
        );
    }
}
