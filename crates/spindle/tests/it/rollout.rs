//! Issue #50, end to end with real processes: a fleet's failure budget and waves through
//! the API and the CLI (the elements of a request, the failed ones named), and kept
//! across a `spindle server` killed mid-fleet and started again, on every backend.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::recovery::{Client, executions};
use crate::{Service, run, spindle};

/// `fleet`: one `shell-command` job per host, two waves (a canary, then the rest) and a
/// budget of one failed host. Each execution appends `fleet HOST PID` to
/// `MARKS/executions`;
/// a host listed in `fail` then fails, the others wait until `MARKS/release` exists.
const FLEET: &str = r#"sequences:
  fleet:
    request: true
    args:
      required:
        - name: marks
          desc: the directory where every execution is recorded
        - name: hosts
          desc: the hosts
      optional:
        - name: shell
          desc: the program
          default: sh
        - name: script
          desc: what each host runs
          default:
            - "-c"
            - 'echo "fleet $SPINDLE_ARG_HOST $$" >> "$SPINDLE_ARG_MARKS/executions"; if [ -e "$SPINDLE_ARG_MARKS/fail-$SPINDLE_ARG_HOST" ]; then exit 1; fi; while [ ! -e "$SPINDLE_ARG_MARKS/release" ]; do sleep 0.05; done'
    nodes:
      each-host:
        category: job
        type: shell-command
        each: [hosts:host]
        max_failures: 1
        waves: [1, 100%]
        args:
          - {expected: cmd, given: shell}
          - {expected: args, given: script}
          - {expected: marks}
"#;

const COMPLETE: u64 = 3;
const FAIL: u64 = 4;

fn hosts(n: usize) -> Vec<String> {
    (1..=n).map(|n| format!("web-{n}")).collect()
}

/// Starts a fleet of `hosts` of which those in `fail` fail (until their file is removed).
async fn start_fleet(client: &Client, marks: &Path, hosts: &[String], fail: &[&str]) -> String {
    for host in hosts {
        let file = marks.join(format!("fail-{host}"));
        if fail.contains(&host.as_str()) {
            std::fs::write(file, "").unwrap();
        } else {
            let _ = std::fs::remove_file(file);
        }
    }
    client
        .start(
            "fleet",
            json!({"marks": marks.to_str().unwrap(), "hosts": hosts}),
        )
        .await
}

/// How many times `host` ran.
fn ran(marks: &Path, host: &str) -> usize {
    executions(marks)
        .iter()
        .filter(|(_, item, _)| item == host)
        .count()
}

/// The request's elements, as `GET /api/v1/requests/{id}/elements` lists them: (name,
/// wave, state) each.
async fn elements(client: &Client, id: &str, query: &str) -> Vec<(String, u64, u64)> {
    let listed = client
        .get(&format!("/api/v1/requests/{id}/elements{query}"))
        .await;
    listed
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_owned(),
                e["wave"].as_u64().unwrap_or(0),
                e["state"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_within_its_budget_completes_and_its_failed_hosts_are_named() {
    let (dir, server) = crate::sqlite_server(FLEET);
    let client = Client::new(&server.url);
    let marks = dir.path().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    std::fs::write(marks.join("release"), "").unwrap();

    // Within the budget: the canary fails, the second wave runs, the request completes.
    let id = start_fleet(&client, &marks, &hosts(4), &["web-1"]).await;
    client
        .wait_state(&id, COMPLETE, Duration::from_secs(30))
        .await;
    let request = client.request(&id).await;
    assert_eq!(
        request["elements"],
        json!([{"node": "each-host", "count": 4, "complete": 3, "failed": 1, "running": 0,
                "stopped": 0, "pending": 0, "maxFailures": 1, "waves": 2,
                "failedElements": ["web-1"]}])
    );
    assert_eq!(
        elements(&client, &id, "").await,
        [
            ("web-1".to_owned(), 1, FAIL),
            ("web-2".to_owned(), 2, COMPLETE),
            ("web-3".to_owned(), 2, COMPLETE),
            ("web-4".to_owned(), 2, COMPLETE)
        ]
    );
    let env = [("SPINDLE_ADDR", server.url.as_str())];
    let (stdout, stderr, code) = run(spindle(dir.path()).envs(env).args(["status", &id]));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("elements: each-host: 1 of 4 elements failed (budget 1): web-1"),
        "{stdout}"
    );
    let (stdout, stderr, code) = run(spindle(dir.path())
        .envs(env)
        .args(["elements", &id, "--state", "failed"]));
    assert_eq!(code, 0, "{stderr}");
    let rows: Vec<&str> = stdout.lines().collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    assert!(
        rows[1].starts_with("each-host web-1") && rows[1].contains("FAIL"),
        "{stdout}"
    );

    // The failed host runs again, alone, once it is mended; then a completed one, named.
    std::fs::remove_file(marks.join("fail-web-1")).unwrap();
    let (stdout, stderr, code) =
        run(spindle(dir.path())
            .envs(env)
            .args(["retry", &id, "--failed-elements"]));
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("its failed elements run again"), "{stdout}");
    client
        .wait_state(&id, COMPLETE, Duration::from_secs(30))
        .await;
    crate::eventually("the retry ends", Duration::from_secs(30), async || {
        elements(&client, &id, "?state=failed").await.is_empty()
    })
    .await;
    assert_eq!((ran(&marks, "web-1"), ran(&marks, "web-2")), (2, 1));
    // The request's summary is of its latest run, not the one kept from its first end.
    let request = client.request(&id).await;
    assert_eq!(request["elements"][0]["failed"], 0, "{request}");
    assert_eq!(request["elements"][0]["complete"], 4, "{request}");
    let (stdout, stderr, code) =
        run(spindle(dir.path())
            .envs(env)
            .args(["retry", &id, "--elements", "web-2,web-9"]));
    assert_ne!(code, 0, "{stdout}");
    assert!(
        stderr.contains("has no element web-9; expected names of its elements, such as web-1"),
        "{stderr}"
    );
    let (_, stderr, code) =
        run(spindle(dir.path())
            .envs(env)
            .args(["retry", &id, "--elements", "web-2"]));
    assert_eq!(code, 0, "{stderr}");
    crate::eventually("web-2 runs again", Duration::from_secs(30), async || {
        ran(&marks, "web-2") == 2
    })
    .await;
    client
        .wait_state(&id, COMPLETE, Duration::from_secs(30))
        .await;
    assert_eq!((ran(&marks, "web-1"), ran(&marks, "web-3")), (2, 1));

    // Past the budget: web-1 (the first wave) fails within it, web-3 in the second wave
    // past it (web-2 and web-4 had started with it and finish); the request fails,
    // saying why.
    let id = start_fleet(&client, &marks, &hosts(4), &["web-1", "web-3"]).await;
    client.wait_state(&id, FAIL, Duration::from_secs(30)).await;
    let request = client.request(&id).await;
    assert_eq!(
        request["error"],
        "node each-host: 2 of 4 elements failed, past its budget of 1: web-1, web-3"
    );
    assert_eq!(request["elements"][0]["failed"], 2);

    // A node that is not one, and a state that is not one, say what was expected.
    for (query, expected) in [
        ("node=nope", "expected one of: each-host"),
        (
            "state=gone",
            "expected pending, running, complete, failed or stopped",
        ),
    ] {
        let url = format!("{}/api/v1/requests/{id}/elements?{query}", server.url);
        let response = reqwest::get(url).await.unwrap();
        assert_eq!(response.status(), 400);
        let text = response.text().await.unwrap();
        assert!(text.contains(expected), "{text}");
    }
}

/// Waves with a wait and an approval between them: the second wave waits for
/// `spindle approve`, which answers the one approval that can wait now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wave_waits_its_wait_and_its_approval() {
    let gated = FLEET.replace(
        "        waves: [1, 100%]\n",
        "        waves: [1, 2, 100%]\n        wave_wait: 100ms\n        wave_approval: true\n",
    );
    let (dir, server) = crate::sqlite_server(&gated);
    let client = Client::new(&server.url);
    let marks = dir.path().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    std::fs::write(marks.join("release"), "").unwrap();
    let id = start_fleet(&client, &marks, &hosts(4), &[]).await;
    let env = [("SPINDLE_ADDR", server.url.as_str())];
    for (wave, ran_before) in [(2, 1), (3, 2)] {
        crate::eventually(
            &format!("the approval of wave {wave} waits"),
            Duration::from_secs(30),
            async || {
                let (stdout, _, _) = run(spindle(dir.path()).envs(env).args(["ps", &id]));
                stdout.contains(&format!("waiting for approval: wave {wave} of 3"))
            },
        )
        .await;
        assert_eq!(executions(&marks).len(), ran_before, "wave {wave} waits");
        let (stdout, stderr, code) = run(spindle(dir.path()).envs(env).args(["approve", &id]));
        assert_eq!(code, 0, "{stdout}{stderr}");
    }
    client
        .wait_state(&id, COMPLETE, Duration::from_secs(30))
        .await;
    assert_eq!(executions(&marks).len(), 4);
    let log = client.get(&format!("/api/v1/requests/{id}/log")).await;
    let ended: Vec<(&str, u64)> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| {
            entry["name"]
                .as_str()
                .unwrap()
                .starts_with("each-host_wave_")
        })
        .map(|entry| {
            (
                entry["name"].as_str().unwrap(),
                entry["state"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut ended = ended;
    ended.sort_unstable();
    assert_eq!(
        ended,
        [
            ("each-host_wave_2_approval", COMPLETE),
            ("each-host_wave_2_wait", COMPLETE),
            ("each-host_wave_3_approval", COMPLETE),
            ("each-host_wave_3_wait", COMPLETE)
        ]
    );
}

/// A server killed while the second wave runs (the canary failed within the budget),
/// started again: the canary is not run again and still counts, the second wave's hosts
/// run again and the request completes.
async fn a_fleet_survives_its_server_killed(database: &str) {
    let dir = crate::recovery::work_dir();
    std::fs::write(dir.path().join("specs/specs.yaml"), FLEET).unwrap();
    let marks = dir.path().join("marks");
    let args = crate::service_args(
        "server",
        database,
        &["--interval", "200ms", "--lease", "1h"],
    );
    let mut server = Service::start(dir.path(), &args);
    let client = Client::new(&server.url);
    let id = start_fleet(&client, &marks, &hosts(3), &["web-1"]).await;
    crate::eventually(
        "the second wave runs",
        Duration::from_secs(30),
        async || executions(&marks).len() == 3,
    )
    .await;
    assert_eq!(
        elements(&client, &id, "?state=failed").await,
        [("web-1".to_owned(), 1, FAIL)]
    );
    server.kill();
    std::fs::write(marks.join("release"), "").unwrap();
    let server = Service::start(dir.path(), &args);
    let client = Client::new(&server.url);
    client
        .wait_state(&id, COMPLETE, Duration::from_secs(60))
        .await;
    let ran: Vec<String> = executions(&marks)
        .into_iter()
        .map(|(_, host, _)| host)
        .collect();
    let count = |host: &str| ran.iter().filter(|h| *h == host).count();
    assert_eq!(
        count("web-1"),
        1,
        "the failed canary did not run again: {ran:?}"
    );
    assert_eq!((count("web-2"), count("web-3")), (2, 2), "{ran:?}");
    let request: Value = client.request(&id).await;
    assert_eq!(request["elements"][0]["failed"], 1);
    assert_eq!(request["elements"][0]["complete"], 2);
    assert_eq!(request["elements"][0]["failedElements"], json!(["web-1"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_keeps_its_budget_and_waves_across_a_killed_server_on_sqlite() {
    a_fleet_survives_its_server_killed("sqlite://spindle.db").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_keeps_its_budget_and_waves_across_a_killed_server_on_postgres() {
    let test = "a_fleet_keeps_its_budget_and_waves_across_a_killed_server_on_postgres";
    let Some(database) = crate::services::NewDatabase::create(test).await else {
        return;
    };
    a_fleet_survives_its_server_killed(&database.url).await;
    database.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_keeps_its_budget_and_waves_across_a_killed_server_on_mysql() {
    let test = "a_fleet_keeps_its_budget_and_waves_across_a_killed_server_on_mysql";
    let Some(server) = crate::mysql_url(test) else {
        return;
    };
    let database = crate::import::MysqlDatabase::create(&server, "rollout").await;
    a_fleet_survives_its_server_killed(&database.url).await;
    database.remove().await;
}
