//! The Grafana dashboard in `dashboards/spindle.json` asks only for series that Spindle
//! exports, and has the panels the operators' issue asks for.

use std::collections::BTreeSet;

/// Every series name a scrape can hold: gauges as named, counters with `_total`,
/// histograms' `_bucket`, `_sum` and `_count`.
fn exported() -> BTreeSet<String> {
    use telemetry::metrics::{RouteLabels, RouteStatusLabels};
    // A family shows in a scrape once it has a series: give each one.
    let metrics = std::sync::Arc::new(telemetry::Metrics::new());
    metrics.request_created("t");
    metrics.request_finished("t", proto::State::Fail, std::time::Duration::from_secs(1));
    telemetry::metrics::TryMetrics::new(metrics.clone()).try_ended(&proto::JobLog::default(), true);
    metrics.store_query("ping", std::time::Duration::from_millis(1), false);
    metrics.lease_renewed(false);
    metrics.report_failed("unavailable");
    telemetry::Metrics::set_states(&metrics.requests, &["RUNNING"], &[]);
    telemetry::Metrics::set_states(&metrics.job_runners, &["live"], &[]);
    let route = RouteLabels {
        method: "GET".to_owned(),
        route: "/".to_owned(),
    };
    metrics.http_duration.get_or_create(&route).observe(0.1);
    metrics
        .http_requests
        .get_or_create(&RouteStatusLabels {
            method: route.method,
            route: route.route,
            status: "200".to_owned(),
        })
        .inc();
    let text = telemetry::metrics::classic_text(&metrics.encode());
    let mut names = BTreeSet::new();
    for line in text.lines().filter_map(|line| line.strip_prefix("# TYPE ")) {
        let (name, kind) = line.split_once(' ').unwrap();
        if kind == "histogram" {
            for suffix in ["_bucket", "_sum", "_count"] {
                names.insert(format!("{name}{suffix}"));
            }
        } else {
            names.insert(name.to_owned());
        }
    }
    names
}

#[test]
fn the_dashboard_asks_only_for_exported_series() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dashboards/spindle.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(dashboard["uid"], "spindle");
    let exported = exported();
    let panels = dashboard["panels"].as_array().unwrap();
    let mut asked = BTreeSet::new();
    for panel in panels {
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{}", panel["title"]);
        for target in targets {
            let expr = target["expr"].as_str().unwrap();
            let mut rest = expr;
            while let Some(at) = rest.find("spindle_") {
                let name: String = rest[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                assert!(
                    exported.contains(&name),
                    "{}: {name} is not exported ({expr})",
                    panel["title"]
                );
                rest = &rest[at + name.len()..];
                asked.insert(name);
            }
        }
    }
    let titles: Vec<&str> = panels.iter().filter_map(|p| p["title"].as_str()).collect();
    for wanted in [
        "Requests by state",
        "Throughput",
        "Failure rate by request type",
        "Job try duration",
        "Job runner liveness",
    ] {
        assert!(
            titles.iter().any(|t| t.starts_with(wanted)),
            "no {wanted:?} panel in {titles:?}"
        );
    }
    assert!(
        asked.len() >= 15,
        "the dashboard uses most metrics: {asked:?}"
    );
}
