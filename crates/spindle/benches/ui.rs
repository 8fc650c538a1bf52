//! The web UI on a big request: `cargo bench -p spindle --bench ui [-- ITERATIONS]`.
//!
//! Starts `spindle server` (SQLite, in a temporary directory), creates one request of
//! ITERATIONS (default 3,572) iterations of a seven-job sequence, 25,011 jobs in all, waits
//! until it is COMPLETE, then measures over HTTP: the first layout (the chain read from
//! the store and its structure built), a warm layout, a states poll (what the page asks
//! every second while a request runs) and the layout with the expansion opened; and, when
//! `chromedriver` and `chromium` are on PATH, in a headless Chromium: the time from
//! navigation to the state shown and to the chain drawn (the page's own performance
//! marks), first on a fresh server and then as medians of later loads.

#![allow(clippy::print_stdout, reason = "a benchmark prints its report")]

mod common;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::{Process, free_port, get_json, median};

const SPECS: &str = include_str!("../../../fixtures/specs/wide.yaml");

const ROUNDS: usize = 21;

async fn timed(http: &reqwest::Client, url: &str) -> (Duration, usize) {
    let started = Instant::now();
    let response = http.get(url).send().await.unwrap();
    assert!(
        response.status().is_success(),
        "{url}: {}",
        response.status()
    );
    let bytes = response.bytes().await.unwrap();
    (started.elapsed(), bytes.len())
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let iterations: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map_or(3572, |a| a.parse().expect("ITERATIONS is a number"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("specs.yaml"), SPECS).unwrap();
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let base = format!("http://{listen}");
    let _server = Process::start(
        dir.path(),
        &[
            "server",
            "--listen",
            &listen,
            "--specs",
            "specs.yaml",
            "--database",
            "sqlite://ui.db",
        ],
    );
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while http.get(format!("{base}/healthz")).send().await.is_err() {
        assert!(Instant::now() < deadline, "the server did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let hosts: Vec<String> = (0..iterations).map(|n| format!("host{n:05}")).collect();
    let created: Value = http
        .post(format!("{base}/api/v1/requests"))
        .json(&json!({"type": "wide", "args": {"hosts": hosts}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().expect("created").to_owned();
    let jobs = created["totalJobs"].as_u64().unwrap_or_default();
    loop {
        let request = get_json(&http, &format!("{base}/ui/api/requests/{id}/states")).await;
        if request["request"]["state"] == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The states poll above built the structure once; a second server would be cold.
    println!("request {id}: {jobs} jobs, COMPLETE");
    let graph = format!("{base}/ui/api/requests/{id}/graph");
    let states = format!("{base}/ui/api/requests/{id}/states?args=0");
    let (warm_graph, graph_bytes): (Vec<Duration>, Vec<usize>) =
        futures_unzip(&http, &graph, ROUNDS).await;
    let (poll, poll_bytes) = futures_unzip(&http, &states, ROUNDS).await;
    let structure: Value = http.get(&graph).send().await.unwrap().json().await.unwrap();
    let expansion = structure["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["group"] == "expansion")
        .map(|n| n["id"].as_str().unwrap().to_owned())
        .expect("an expansion");
    let (open_graph, open_bytes) =
        futures_unzip(&http, &format!("{graph}?open={expansion}"), ROUNDS).await;
    let (open_poll, open_poll_bytes) =
        futures_unzip(&http, &format!("{states}&open={expansion}"), ROUNDS).await;
    println!("over HTTP, medians of {ROUNDS}:");
    println!(
        "  layout (warm)            {:>10}  {:>7} B",
        ms(median(warm_graph)),
        graph_bytes[0]
    );
    println!(
        "  states poll              {:>10}  {:>7} B",
        ms(median(poll)),
        poll_bytes[0]
    );
    println!(
        "  layout, expansion open   {:>10}  {:>7} B",
        ms(median(open_graph)),
        open_bytes[0]
    );
    println!(
        "  states, expansion open   {:>10}  {:>7} B",
        ms(median(open_poll)),
        open_poll_bytes[0]
    );

    // A fresh server on the same database: the first layout reads and lays out the chain.
    drop(_server);
    let server = restart(&http, dir.path(), &listen, &base).await;
    let (cold, _) = timed(&http, &graph).await;
    println!("  layout (cold: chain read and laid out) {}", ms(cold));
    drop(server);
    let _server = restart(&http, dir.path(), &listen, &base).await;
    browser(&base, &id).await;
}

async fn restart(
    http: &reqwest::Client,
    dir: &std::path::Path,
    listen: &str,
    base: &str,
) -> Process {
    let server = Process::start(
        dir,
        &[
            "server",
            "--listen",
            listen,
            "--specs",
            "specs.yaml",
            "--database",
            "sqlite://ui.db",
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while http.get(format!("{base}/healthz")).send().await.is_err() {
        assert!(Instant::now() < deadline, "the server did not start again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server
}

async fn futures_unzip(
    http: &reqwest::Client,
    url: &str,
    rounds: usize,
) -> (Vec<Duration>, Vec<usize>) {
    let mut times = Vec::new();
    let mut sizes = Vec::new();
    for _ in 0..rounds {
        let (t, n) = timed(http, url).await;
        times.push(t);
        sizes.push(n);
    }
    (times, sizes)
}

/// Page loads in Chromium: the first on a fresh server, then warm ones.
async fn browser(base: &str, id: &str) {
    let on_path = |name: &str| {
        std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .find(|c| c.is_file())
        })
    };
    let (Some(chromium), Some(driver)) = (on_path("chromium"), on_path("chromedriver")) else {
        println!("in a browser: skipped (chromium and chromedriver are not on PATH)");
        return;
    };
    let port = free_port();
    let mut driver = std::process::Command::new(driver)
        .arg(format!("--port={port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let driver_url = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    while http
        .get(format!("{driver_url}/status"))
        .send()
        .await
        .is_err()
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".into(),
        json!({"binary": chromium, "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000"]}),
    );
    let client =
        fantoccini::ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&driver_url)
            .await
            .unwrap();
    let mut rounds = Vec::new();
    // The first load is on a server that has not laid this chain out yet.
    for _ in 0..8 {
        client.goto(&format!("{base}/requests/{id}")).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let marks = loop {
            let marks = client
                .execute(
                    "const m = n => (performance.getEntriesByName(n)[0] || {}).startTime; return [m('spindle:state-shown'), m('spindle:graph-drawn')]",
                    Vec::new(),
                )
                .await
                .unwrap();
            if marks[0].is_number() && marks[1].is_number() {
                break marks;
            }
            assert!(
                Instant::now() < deadline,
                "the page did not show the request"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        rounds.push((marks[0].as_f64().unwrap(), marks[1].as_f64().unwrap()));
    }
    let (first, rest) = rounds.split_first().unwrap();
    let mut shown: Vec<f64> = rest.iter().map(|r| r.0).collect();
    let mut drawn: Vec<f64> = rest.iter().map(|r| r.1).collect();
    shown.sort_by(f64::total_cmp);
    drawn.sort_by(f64::total_cmp);
    println!("in Chromium, from navigation:");
    println!(
        "  first load on the fresh server: state shown {:.0} ms, chain drawn {:.0} ms",
        first.0, first.1
    );
    println!(
        "  later loads (median of {}): state shown {:.0} ms, chain drawn {:.0} ms",
        rest.len(),
        shown[shown.len() / 2],
        drawn[drawn.len() / 2]
    );
    let _ = client.close().await;
    let _ = driver.kill();
    let _ = driver.wait();
}
