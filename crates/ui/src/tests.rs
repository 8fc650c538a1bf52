//! The layout on chains the grapher builds, and the pages and view endpoints without a
//! browser (axum `oneshot`); the browser tests are the binary's (`tests/it/ui.rs`).

use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request as HttpRequest, StatusCode};
use http_body_util::BodyExt as _;
use proto::{JobChain, JobLog, JobStatus, State};
use rm::testing::FakeJr;
use rm::{Manager, Options};
use serde_json::{Value, json};
use tower::ServiceExt as _;

use crate::layout::{GroupKind, ITEM_CAP, Item, Node, Structure, Toggles};

const SPECS: &str = "sequences:
  deploy:
    request: true
    args:
      required:
        - name: hosts
          desc: Hosts, a list
    nodes:
      prep:
        category: job
        type: noop
      each-host:
        category: sequence
        type: host
        each: [hosts:host]
        deps: [prep]
      done:
        category: job
        type: noop
        deps: [each-host]
  host:
    args:
      required:
        - name: host
    nodes:
      stop:
        category: job
        type: noop
      start:
        category: job
        type: noop
        deps: [stop]
      check:
        category: sequence
        type: check
        deps: [start]
        args: [{expected: host}]
        retry: 2
  check:
    args:
      required:
        - name: host
    nodes:
      ping:
        category: job
        type: noop
";

fn grapher() -> graph::Grapher {
    let report = spec::lint_str(Path::new("specs.yaml"), SPECS);
    assert!(!report.has_errors(), "{:?}", report.diagnostics);
    graph::Grapher::new(report.specs, Arc::new(job::Registry::builtin()))
}

fn chain(hosts: usize) -> JobChain {
    let hosts: Vec<String> = (0..hosts).map(|n| format!("db{n}")).collect();
    let args = proto::JobArgs::from_iter([("hosts".to_owned(), json!(hosts))]);
    grapher().create("deploy", &args).unwrap().job_chain
}

/// The id of the chain's (first) `each:` expansion group.
fn expansion_id(structure: &Structure) -> String {
    structure
        .groups
        .iter()
        .find(|g| g.kind == GroupKind::Expansion)
        .expect("an expansion")
        .id
        .clone()
}

fn named(structure: &Structure, kind: GroupKind) -> Vec<String> {
    structure
        .groups
        .iter()
        .filter(|g| g.kind == kind)
        .map(|g| g.label.clone())
        .collect()
}

#[test]
fn sequences_and_expansions_are_nested_groups() {
    let chain = chain(3);
    let s = Structure::of(&chain);
    assert_eq!(s.job_count(), chain.jobs.len());
    assert_eq!(named(&s, GroupKind::Expansion), ["each-host ×3"]);
    // The request, each iteration (named by its element) and each check inside one.
    let sequences = named(&s, GroupKind::Sequence);
    assert_eq!(sequences[0], "deploy");
    for host in ["db0", "db1", "db2"] {
        assert!(sequences.contains(&format!("host={host}")), "{sequences:?}");
    }
    assert_eq!(
        sequences.iter().filter(|l| *l == "check (retry 2)").count(),
        3
    );
    // Every job is an item of exactly one group, and every group of its parent.
    let mut seen = vec![0; chain.jobs.len()];
    for group in &s.groups {
        assert!(group.jobs as usize <= chain.jobs.len());
        for item in &group.items {
            match item {
                Item::Job(j) => seen[*j as usize] += 1,
                Item::Group(g) => assert_eq!(
                    s.groups[*g as usize].parent,
                    Some(
                        s.groups
                            .iter()
                            .position(|x| std::ptr::eq(x, group))
                            .unwrap() as u32
                    )
                ),
            }
        }
    }
    assert!(seen.iter().all(|n| *n == 1), "{seen:?}");
    // Each group's jobs count what is inside it, at any depth.
    let expansion = &s.groups[s.group_index[&s
        .groups
        .iter()
        .find(|g| g.kind == GroupKind::Expansion)
        .unwrap()
        .id] as usize];
    let per_iteration = s
        .groups
        .iter()
        .find(|g| g.label == "host=db0")
        .unwrap()
        .jobs;
    assert_eq!(expansion.jobs, 3 * per_iteration);
    // In the request's sequence the expansion is one item between prep and done.
    let request = &s.groups[1];
    let slot = |label: &str| {
        request
            .items
            .iter()
            .position(|item| match item {
                Item::Job(j) => s.label(*j) == label,
                Item::Group(g) => s.groups[*g as usize].label == label,
            })
            .unwrap() as u32
    };
    let (prep, each, done) = (slot("prep"), slot("each-host ×3"), slot("done"));
    assert!(prep < each && each < done);
    // prep → repeat begin → the expansion → repeat end → done: no edge skips it.
    assert!(!request.edges.contains(&(prep, done)));
    assert!(request.edges.iter().any(|(a, b)| *b == each && *a > prep));
    assert!(request.edges.iter().any(|(a, b)| *a == each && *b < done));
}

/// Every node's box inside its open group's box, and siblings apart.
fn check_geometry(nodes: &[Node]) {
    let rect = |n: &Node| match n {
        Node::Job { x, y, w, h, .. }
        | Node::Group { x, y, w, h, .. }
        | Node::More { x, y, w, h, .. } => (*x, *y, *w, *h),
    };
    let rects: Vec<(f64, f64, f64, f64)> = nodes.iter().map(rect).collect();
    for (i, a) in rects.iter().enumerate() {
        for b in &rects[i + 1..] {
            let apart =
                a.0 + a.2 <= b.0 || b.0 + b.2 <= a.0 || a.1 + a.3 <= b.1 || b.1 + b.3 <= a.1;
            let nested = (a.0 <= b.0
                && a.1 <= b.1
                && b.0 + b.2 <= a.0 + a.2
                && b.1 + b.3 <= a.1 + a.3)
                || (b.0 <= a.0 && b.1 <= a.1 && a.0 + a.2 <= b.0 + b.2 && a.1 + a.3 <= b.1 + b.3);
            assert!(apart || nested, "{a:?} and {b:?} overlap");
        }
    }
}

#[test]
fn a_small_chain_is_drawn_whole_left_to_right() {
    let chain = chain(2);
    let s = Structure::of(&chain);
    let drawing = s.draw(&Toggles::default());
    assert_eq!(drawing.jobs.len(), chain.jobs.len(), "every job drawn");
    assert!(drawing.closed.is_empty() && drawing.more.is_empty());
    check_geometry(&drawing.nodes);
    // Edges run left to right.
    for [x1, _, x2, _] in &drawing.edges {
        assert!(x1 < x2, "{x1} → {x2}");
    }
    let x_of = |label: &str| {
        drawing
            .nodes
            .iter()
            .find_map(|n| match n {
                Node::Job { label: l, x, .. } if l == label => Some(*x),
                _ => None,
            })
            .unwrap()
    };
    assert!(x_of("prep") < x_of("stop") && x_of("stop") < x_of("start"));
    assert!(x_of("start") < x_of("ping") && x_of("ping") < x_of("done"));
    // Closing the expansion draws it as one node, and none of its jobs.
    let expansion = expansion_id(&s);
    let toggles = Toggles::parse("", &expansion);
    let closed = s.draw(&toggles);
    assert_eq!(closed.closed.len(), 1);
    assert!(closed.jobs.len() < 10, "{}", closed.jobs.len());
    check_geometry(&closed.nodes);
}

#[test]
fn large_expansions_start_closed_and_show_at_most_the_cap() {
    let chain = chain(ITEM_CAP + 50);
    let s = Structure::of(&chain);
    let drawing = s.draw(&Toggles::default());
    assert_eq!(drawing.closed.len(), 1, "the expansion, closed");
    assert!(drawing.jobs.len() < 10);
    let expansion = s.groups[drawing.closed[0] as usize].id.clone();
    assert!(expansion.starts_with("each:"));
    let open = s.draw(&Toggles::parse(&expansion, ""));
    // Its first ITEM_CAP iterations, closed (they do not fit the default budget), and
    // one node for the other 50.
    assert_eq!(open.closed.len(), ITEM_CAP);
    assert_eq!(open.more.len(), 1);
    assert_eq!(open.more[0].1.len(), 50);
    check_geometry(&open.nodes);
    // Opening one iteration draws its jobs.
    let first = s.groups[open.closed[0] as usize].id.clone();
    let one = s.draw(&Toggles::parse(&format!("{expansion},{first}"), ""));
    assert!(!one.closed.contains(&open.closed[0]));
    assert!(one.jobs.len() > open.jobs.len());
}

#[test]
fn a_moderate_expansion_opens_all_its_iterations_or_none() {
    for hosts in [4, 20] {
        let s = Structure::of(&chain(hosts));
        let drawing = s.draw(&Toggles::default());
        let iterations = drawing
            .nodes
            .iter()
            .filter(|n| matches!(n, Node::Group { label, .. } if label.starts_with("host=")))
            .map(|n| matches!(n, Node::Group { open: true, .. }))
            .collect::<Vec<_>>();
        assert_eq!(iterations.len(), hosts);
        assert!(
            iterations.iter().all(|o| *o == iterations[0]),
            "{hosts} hosts: {iterations:?}"
        );
    }
}

/// Issue #36: a 50-host fan-out, opened, fits a laptop's drawing frame: its iterations
/// are tiles in rows as wide as the frame allows, the way in and out beside them; a
/// fan-out that fits stays one column, and a frame too narrow for rows changes nothing.
#[test]
fn a_tall_fan_out_is_wrapped_into_rows_that_fit_the_frame() {
    use crate::layout::Frame;
    let s = Structure::of(&chain(50));
    let expansion = expansion_id(&s);
    let toggles = Toggles::parse(&expansion, "");
    let tiles = |d: &crate::layout::Drawing| -> Vec<(f64, f64, f64, f64)> {
        d.nodes
            .iter()
            .filter_map(|n| match n {
                Node::Group {
                    label,
                    open: false,
                    x,
                    y,
                    w,
                    h,
                    ..
                } if label.starts_with("host=") => Some((*x, *y, *w, *h)),
                _ => None,
            })
            .collect()
    };
    // A 1280×1000 window's frame (75% of its height).
    let frame = Frame {
        width: 1240.0,
        height: 750.0,
    };
    let wrapped = s.draw_in(&toggles, Some(frame));
    check_geometry(&wrapped.nodes);
    let placed = tiles(&wrapped);
    assert_eq!(placed.len(), 50);
    assert!(wrapped.width <= frame.width, "{} wide", wrapped.width);
    assert!(wrapped.height <= frame.height, "{} high", wrapped.height);
    let rows: std::collections::BTreeSet<u64> = placed.iter().map(|t| t.1 as u64).collect();
    assert!(rows.len() > 1 && rows.len() < 50, "{} rows", rows.len());
    // In order, left to right then down: db0 is first, db1 beside it.
    assert!(placed[0].0 < placed[1].0 && placed[0].1 == placed[1].1);
    // The way in and out (the fan-out's begin and end wrappers) are beside the rows.
    let wrappers: Vec<(f64, f64)> = wrapped
        .nodes
        .iter()
        .filter_map(|n| match n {
            Node::Job {
                wrapper: true,
                x,
                y,
                ..
            } => Some((*x, *y)),
            _ => None,
        })
        .collect();
    assert!(
        wrappers
            .iter()
            .all(|(x, y)| *x < wrapped.width && *y < wrapped.height)
    );
    // Without a frame (or in a frame already full) it is one column, as tall as 50 tiles.
    for column in [
        s.draw(&toggles),
        s.draw_in(
            &toggles,
            Some(Frame {
                width: 900.0,
                height: 700.0,
            }),
        ),
    ] {
        let placed = tiles(&column);
        assert!(placed.iter().all(|t| t.0 == placed[0].0), "one column");
        assert!(column.height > 50.0 * 36.0);
    }
    // A fan-out that fits the frame's height stays a column.
    let small = Structure::of(&chain(4));
    let iterations: Vec<String> = small
        .groups
        .iter()
        .filter(|g| {
            g.parent
                .is_some_and(|p| small.groups[p as usize].kind == GroupKind::Expansion)
        })
        .map(|g| g.id.clone())
        .collect();
    let toggles = Toggles::parse("", &iterations.join(","));
    let drawn = small.draw_in(&toggles, Some(frame));
    let placed = tiles(&drawn);
    assert_eq!(placed.len(), 4);
    assert!(placed.iter().all(|t| t.0 == placed[0].0), "{placed:?}");
}

#[test]
fn html_is_escaped() {
    assert_eq!(
        crate::escape("<a href=\"x\">&'</a>"),
        "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
    );
}

struct Env {
    manager: Arc<Manager>,
    runner: Arc<FakeJr>,
    router: axum::Router,
    _dir: tempfile::TempDir,
}

async fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        store::SqliteStore::open(&dir.path().join("ui.db"))
            .await
            .unwrap(),
    );
    // Takes every chain; reports as running what a test sets.
    let runner = Arc::new(FakeJr::default());
    *runner.statuses.lock().unwrap() = Some(Vec::new());
    let manager = Arc::new(Manager::new(
        grapher(),
        store,
        runner.clone(),
        Options {
            jr_url: Some("http://jr:32307".to_owned()),
            ..Options::default()
        },
    ));
    let router = crate::router(manager.clone());
    Env {
        manager,
        runner,
        router,
        _dir: dir,
    }
}

/// GETs `uri`; returns status, headers and body text.
async fn get(router: &axum::Router, uri: &str) -> (StatusCode, axum::http::HeaderMap, String) {
    let response = router
        .clone()
        .oneshot(HttpRequest::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, String::from_utf8(bytes.to_vec()).unwrap())
}

async fn get_json(router: &axum::Router, uri: &str) -> (StatusCode, Value) {
    let (status, headers, text) = get(router, uri).await;
    assert_eq!(headers["content-type"], "application/json", "{uri}");
    (status, serde_json::from_str(&text).unwrap())
}

#[tokio::test]
async fn pages_are_shells_without_inline_script_or_style() {
    let env = env().await;
    for (uri, page) in [
        ("/", "list"),
        ("/requests/dc7f73ajueqqoi7q8mig", "request"),
        ("/start", "start"),
        ("/start/deploy", "start"),
        ("/runners", "runners"),
        ("/schedules", "schedules"),
    ] {
        let (status, headers, html) = get(&env.router, uri).await;
        assert_eq!(status, StatusCode::OK, "{uri}");
        assert_eq!(headers["content-type"], "text/html; charset=utf-8");
        assert_eq!(
            headers["content-security-policy"],
            crate::CONTENT_SECURITY_POLICY
        );
        assert_eq!(headers["x-frame-options"], "DENY");
        assert!(
            html.contains(&format!("data-page=\"{page}\"")),
            "{uri}: {html}"
        );
        assert!(html.contains("<script type=\"module\" src=\"/ui/js/main.js\"></script>"));
        // The one script tag loads the entry module; no inline script, no style attribute.
        assert_eq!(html.matches("<script").count(), 1, "{uri}");
        assert!(!html.contains("style="), "{uri}");
        assert!(
            !html.contains("http://") && !html.contains("https://"),
            "nothing from elsewhere: {uri}"
        );
    }
    // A subject with markup is text.
    let (status, _, html) = get(&env.router, "/requests/%3Cscript%3Ealert(1)%3C%2Fscript%3E").await;
    assert_eq!(status, StatusCode::OK);
    assert!(!html.contains("<script>alert"), "{html}");
    assert!(
        html.contains("Request &lt;script&gt;alert(1)&lt;/script&gt;"),
        "{html}"
    );
    assert!(html.contains("data-subject=\"&lt;script&gt;alert(1)&lt;/script&gt;\""));
    for (uri, kind) in [
        ("/ui/js/main.js", "text/javascript; charset=utf-8"),
        ("/ui/js/common.js", "text/javascript; charset=utf-8"),
        ("/ui/js/request.js", "text/javascript; charset=utf-8"),
        ("/ui/app.css", "text/css; charset=utf-8"),
        ("/ui/favicon.svg", "image/svg+xml"),
    ] {
        let (status, headers, body) = get(&env.router, uri).await;
        assert_eq!(
            (status, &headers["content-type"]),
            (StatusCode::OK, &kind.parse().unwrap())
        );
        assert!(body.len() > 100, "{uri}");
    }
    let (status, _, said) = get(&env.router, "/ui/js/nope.js").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{said}");
    // The script never writes markup from text, and every module it imports is served.
    for (file, script) in crate::pages::SCRIPTS {
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!script.contains(sink), "{file} uses {sink}");
        }
        for line in script.lines().filter(|l| l.starts_with("import ")) {
            let module = line
                .rsplit("from \"./")
                .next()
                .unwrap()
                .trim_end_matches("\";");
            assert!(
                crate::pages::SCRIPTS
                    .iter()
                    .any(|(name, _)| *name == module),
                "{file} imports {module}, which is not served"
            );
        }
    }
}

/// Issue #49: every module of the page script is valid JavaScript alone (`node --check`,
/// as an ES module); skipped with a line where Node.js is not installed, unless
/// `SPINDLE_TEST_NODE=required` (CI).
#[test]
fn every_script_module_passes_node_check_alone() {
    let found = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !found {
        assert!(
            std::env::var("SPINDLE_TEST_NODE").as_deref() != Ok("required"),
            "`node` is not installed and SPINDLE_TEST_NODE=required"
        );
        let line = "every_script_module_passes_node_check_alone: skipped: it needs `node` (set SPINDLE_TEST_NODE=required to fail instead)\n";
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        return;
    }
    // As `.mjs`, which every Node.js checks as a module (imports are not followed).
    let dir = tempfile::tempdir().unwrap();
    for (file, script) in crate::pages::SCRIPTS {
        let copy = dir.path().join(file.replace(".js", ".mjs"));
        std::fs::write(&copy, script).unwrap();
        let checked = std::process::Command::new("node")
            .arg("--check")
            .arg(&copy)
            .output()
            .unwrap();
        assert!(
            checked.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&checked.stderr)
        );
    }
}

fn entry(request_id: &str, job_id: &str, name: &str, r#try: u32, state: State) -> JobLog {
    JobLog {
        request_id: request_id.to_owned(),
        job_id: job_id.to_owned(),
        name: name.to_owned(),
        job_type: "noop".to_owned(),
        r#try,
        state,
        started_at: 1_000_000_000,
        finished_at: 2_000_000_000,
        exit: i64::from(state != State::Complete),
        error: if state == State::Fail {
            "it broke".to_owned()
        } else {
            String::new()
        },
        stdout: "out".to_owned(),
        stderr: String::new(),
    }
}

#[tokio::test]
async fn the_views_follow_the_job_log_and_the_runner() {
    let env = env().await;
    let args = proto::JobArgs::from_iter([("hosts".to_owned(), json!(["db1", "db2"]))]);
    let request = env
        .manager
        .create(
            proto::CreateRequest {
                request_type: "deploy".to_owned(),
                args,
                ..proto::CreateRequest::default()
            },
            "ann",
            "",
        )
        .await
        .unwrap();
    let id = request.id.clone();
    let (status, graph) = get_json(&env.router, &format!("/ui/api/requests/{id}/graph")).await;
    assert_eq!(status, StatusCode::OK);
    let job = |label: &str| -> String {
        graph["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["kind"] == "job" && n["label"] == label)
            .unwrap_or_else(|| panic!("no {label} in {graph}"))["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let prep = job("prep");
    let stops: Vec<String> = graph["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["label"] == "stop")
        .map(|n| n["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(stops.len(), 2);
    // prep completed after a failed try, one stop failed, another runs.
    env.manager
        .add_job_logs(
            vec![
                entry(&id, &prep, "prep", 1, State::Fail),
                entry(&id, &prep, "prep", 2, State::Complete),
                entry(&id, &stops[0], "stop", 1, State::Fail),
            ],
            None,
        )
        .await
        .unwrap();
    env.runner
        .statuses
        .lock()
        .unwrap()
        .get_or_insert_default()
        .push(JobStatus {
            request_id: id.clone(),
            job_id: stops[1].clone(),
            name: "stop".to_owned(),
            state: State::Running,
            r#try: 1,
            status: "stopping db2".to_owned(),
            ..JobStatus::default()
        });
    let (status, poll) = get_json(&env.router, &format!("/ui/api/requests/{id}/states")).await;
    assert_eq!(status, StatusCode::OK, "{poll}");
    assert_eq!(poll["request"]["state"], 2);
    assert_eq!(poll["request"]["args"][0]["Name"], "hosts");
    assert_eq!(poll["jobs"][&prep], json!({"state": 3, "tries": 2}));
    assert_eq!(poll["jobs"][&stops[0]], json!({"state": 4, "tries": 1}));
    assert_eq!(
        poll["jobs"][&stops[1]],
        json!({"state": 2, "tries": 1, "status": "stopping db2"})
    );
    assert_eq!(poll["counts"]["COMPLETE"], 1);
    assert_eq!(poll["counts"]["FAIL"], 1);
    assert_eq!(poll["counts"]["RUNNING"], 1);
    assert_eq!(poll["failedTotal"], 1);
    let failed = &poll["failed"][0];
    assert_eq!(failed["id"], stops[0].as_str());
    // The groups to open to see it: the request, the expansion, the iteration.
    assert_eq!(failed["groups"].as_array().unwrap().len(), 3, "{failed}");
    assert!(failed["groups"][1].as_str().unwrap().starts_with("each:"));
    // Closed, the expansion is counted instead.
    let expansion = failed["groups"][1].as_str().unwrap();
    let (_, poll) = get_json(
        &env.router,
        &format!("/ui/api/requests/{id}/states?closed={expansion}&args=0"),
    )
    .await;
    assert!(poll["jobs"].get(&stops[0]).is_none());
    // Two iterations of three jobs (stop, start, ping): the grapher's wrappers are not
    // counted (issue #36).
    assert_eq!(
        poll["groups"][expansion],
        json!({"FAIL": 1, "PENDING": 4, "RUNNING": 1})
    );
    assert!(
        poll["request"].get("args").is_none(),
        "args=0 leaves them out"
    );
    assert!(poll.get("failure").is_none(), "running: no reason yet");
    // One job: its tries, the running try.
    let (status, view) = get_json(&env.router, &format!("/ui/api/requests/{id}/jobs/{prep}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(view["tries"].as_array().unwrap().len(), 2);
    assert_eq!(view["tries"][0]["error"], "it broke");
    assert_eq!(view["state"], 3);
    assert!(view["running"].is_null());
    let (_, view) = get_json(
        &env.router,
        &format!("/ui/api/requests/{id}/jobs/{}", stops[1]),
    )
    .await;
    assert_eq!(view["running"]["status"], "stopping db2");
    assert_eq!(view["each"], json!({"host": "db2"}));
    // Failed, the header's reason is its failed job's (issue #47).
    env.manager
        .finish(&rm::testing::final_state(&id, State::Fail, 1), None)
        .await
        .unwrap();
    let (_, failed_poll) =
        get_json(&env.router, &format!("/ui/api/requests/{id}/states?args=0")).await;
    assert_eq!(
        failed_poll["failure"], "job stop [host=db1] failed (try 1): it broke",
        "{failed_poll}"
    );
    // Unknown ids are 404 with a message.
    let (status, body) = get_json(&env.router, &format!("/ui/api/requests/{id}/jobs/nope")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body["message"],
        format!("job nope of request {id} not found")
    );
    let (status, body) =
        get_json(&env.router, "/ui/api/requests/b0gus00000000000000a/states").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("b0gus00000000000000a"),
        "{body}"
    );
    // Requests by state, every state named.
    let (_, counts) = get_json(&env.router, "/ui/api/counts").await;
    assert_eq!(counts["FAIL"], 1);
    assert_eq!(counts["COMPLETE"], 0);
    assert_eq!(counts.as_object().unwrap().len(), State::ALL.len());
    // A finished request's states are kept: an entry logged after its end is read once
    // the request changes (here, retried), not at every poll.
    env.manager
        .add_job_logs(
            vec![entry(&id, &stops[1], "stop", 1, State::Complete)],
            None,
        )
        .await
        .unwrap();
    let (_, kept) = get_json(&env.router, &format!("/ui/api/requests/{id}/states?args=0")).await;
    assert_eq!(kept["jobs"], failed_poll["jobs"]);
    assert_ne!(kept["jobs"][&stops[1]]["state"], 3, "{kept}");
    *env.runner.statuses.lock().unwrap() = Some(Vec::new());
    env.manager
        .retry(&proto::RequestId::new(id.clone()), &rm::Retry::default())
        .await
        .unwrap();
    let (_, retried) = get_json(&env.router, &format!("/ui/api/requests/{id}/states?args=0")).await;
    assert_ne!(retried["request"]["state"], 4, "{retried}");
    assert_eq!(retried["jobs"][&stops[1]]["state"], 3, "{retried}");
}
