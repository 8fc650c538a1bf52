//! The web UI in a real browser (issue #13): Debian's headless Chromium driven over
//! WebDriver (chromedriver) through fantoccini, against a real `spindle server`. Without
//! Chromium and ChromeDriver each test says it was skipped, unless
//! `SPINDLE_TEST_BROWSER=required` (CI), which makes it fail. Each test saves a
//! screenshot under `target/ui-screenshots/`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::recovery::created_id;

const SPECS: &str = concat!(
    "sequences:
  deploy:
    request: true
    args:
      required:
        - name: hosts
          desc: The hosts to deploy to, a JSON list
      optional:
        - name: nap
          desc: How long each step takes
          default: 300ms
    nodes:
      prep:
        category: job
        type: sleep
        args: [{expected: duration, given: nap}]
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
      optional:
        - name: nap
          default: 300ms
    nodes:
      stop:
        category: job
        type: sleep
        args: [{expected: duration, given: nap}]
      start:
        category: job
        type: sleep
        args: [{expected: duration, given: nap}]
        deps: [stop]
  naps:
    request: true
    acl:
      - role: deployer
        ops: [start, stop]
    args:
      required:
        - name: host
          desc: Where to nap
      static:
        - name: long
          default: 60s
    nodes:
      nap:
        category: job
        type: sleep
        args: [{expected: duration, given: long}]
",
    include_str!("../specs/talk.yaml"),
    include_str!("../specs/fleet.yaml"),
    include_str!("../specs/rollout.yaml"),
    "  gate:
    request: true
    nodes:
      sign-off:
        category: job
        type: approval
        args: [{expected: message, given: question}]
    args:
      static:
        - name: question
          default: ship it?
schedules:
  new-year:
    cron: \"0 0 1 1 *\"
    timezone: Europe/Berlin
    request: naps
    args: {host: <b>db9</b>}
"
);

/// Chromium and its driver, from the environment or Debian's paths.
fn browser_programs(test: &str) -> Option<(PathBuf, PathBuf)> {
    let find = |var: &str, names: &[&str]| -> Option<PathBuf> {
        if let Some(path) = std::env::var_os(var) {
            return Some(PathBuf::from(path));
        }
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
            .find(|candidate| candidate.is_file())
    };
    let chromium = find(
        "SPINDLE_TEST_CHROMIUM",
        &["chromium", "chromium-browser", "google-chrome"],
    );
    let driver = find("SPINDLE_TEST_CHROMEDRIVER", &["chromedriver"]);
    match (chromium, driver) {
        (Some(chromium), Some(driver)) => Some((chromium, driver)),
        _ => {
            assert!(
                std::env::var("SPINDLE_TEST_BROWSER").as_deref() != Ok("required"),
                "{test}: SPINDLE_TEST_BROWSER=required, but chromium and chromedriver are not both on PATH (Debian: apt-get install chromium chromium-driver)"
            );
            let line = format!(
                "{test}: skipped: it drives a headless Chromium; install chromium and chromium-driver (or set SPINDLE_TEST_BROWSER=required to fail instead)\n"
            );
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            None
        }
    }
}

/// A `spindle server` on SQLite with [`SPECS`], and a browser session on it.
struct Ui {
    server: crate::Service,
    dir: tempfile::TempDir,
    client: Client,
    driver: Child,
    http: reqwest::Client,
    test: &'static str,
}

async fn ui(test: &'static str) -> Option<Ui> {
    ui_with(test, &["--window-size=1280,1000"]).await
}

/// [`ui`] with Chromium's window and flags as given.
async fn ui_with(test: &'static str, flags: &[&str]) -> Option<Ui> {
    ui_prepared(test, flags, |_| Vec::new()).await
}

/// [`ui_with`], with `prepare` writing files into the server's folder first and
/// returning more arguments for `spindle server`.
async fn ui_prepared(
    test: &'static str,
    flags: &[&str],
    prepare: impl FnOnce(&Path) -> Vec<String>,
) -> Option<Ui> {
    let (chromium, driver_program) = browser_programs(test)?;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("specs")).unwrap();
    std::fs::write(dir.path().join("specs/ui.yaml"), SPECS).unwrap();
    for fixture in ["wide.yaml", "locks.yaml"] {
        std::fs::copy(
            crate::fixtures().join(fixture),
            dir.path().join("specs").join(fixture),
        )
        .unwrap();
    }
    let extra = prepare(dir.path());
    let mut args = vec!["server", "--specs", "specs", "--database", "sqlite://ui.db"];
    // On a port of its own, unless `prepare` chose one (a redirect URL names it).
    if !extra.iter().any(|arg| arg == "--listen") {
        args.extend(["--listen", "127.0.0.1:0"]);
    }
    args.extend(extra.iter().map(String::as_str));
    let server = crate::Service::start(dir.path(), &args);
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let driver = Command::new(driver_program)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let driver_url = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(response) = http.get(format!("{driver_url}/status")).send().await
            && response.status().is_success()
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{test}: chromedriver did not answer"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut capabilities = serde_json::Map::new();
    capabilities.insert("browserName".into(), json!("chrome"));
    let mut args = vec![
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--lang=en-US",
    ];
    args.extend_from_slice(flags);
    capabilities.insert(
        "goog:chromeOptions".into(),
        json!({"binary": chromium, "args": args}),
    );
    let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(capabilities)
        .connect(&driver_url)
        .await
        .unwrap_or_else(|err| panic!("{test}: no browser session: {err}"));
    Some(Ui {
        server,
        dir,
        client,
        driver,
        http,
        test,
    })
}

impl Ui {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.url)
    }

    async fn goto(&self, path: &str) {
        self.client.goto(&self.url(path)).await.unwrap();
    }

    /// Creates a request through the API; returns its id.
    async fn create(&self, request_type: &str, args: Value) -> String {
        let response = self
            .http
            .post(self.url("/api/v1/requests"))
            .json(&json!({"type": request_type, "args": args, "user": "ann"}))
            .send()
            .await
            .unwrap();
        created_id(response).await
    }

    /// Opens the start form of `request_type` and waits until its fields are there.
    async fn start_form(&self, request_type: &str) {
        self.goto(&format!("/start/{request_type}")).await;
        self.until(
            "the start form",
            "return document.querySelector('#start-form [data-arg]') !== null",
            10,
        )
        .await;
    }

    /// Submits the start form; the id of the request whose page it then shows.
    async fn start_from_the_form(&self) -> String {
        self.click("#start-submit").await;
        let url = self
            .until(
                "the new request's page",
                "return location.pathname.startsWith('/requests/') && location.pathname",
                10,
            )
            .await;
        url.as_str()
            .unwrap()
            .trim_start_matches("/requests/")
            .to_owned()
    }

    async fn request(&self, id: &str) -> Value {
        self.get_json(&format!("/api/v1/requests/{id}")).await
    }

    async fn request_log(&self, id: &str) -> Value {
        self.get_json(&format!("/api/v1/requests/{id}/log")).await
    }

    async fn get_json(&self, path: &str) -> Value {
        self.http
            .get(self.url(path))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Runs a script in the page; returns what it returns.
    async fn js(&self, script: &str) -> Value {
        self.client.execute(script, Vec::new()).await.unwrap()
    }

    /// Waits until `script` returns something truthy (at most `secs`); returns it.
    async fn until(&self, what: &str, script: &str, secs: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let value = self.js(script).await;
            let truthy = match &value {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::String(s) => !s.is_empty(),
                Value::Number(n) => n.as_f64() != Some(0.0),
                _ => true,
            };
            if truthy {
                return value;
            }
            if Instant::now() > deadline {
                self.screenshot(&format!("{}-failed", self.test)).await;
                let text = self.js("return document.body.innerText").await;
                panic!(
                    "{}: {what}: not within {secs} s; the page shows:\n{}\nserver:\n{}",
                    self.test,
                    text.as_str().unwrap_or_default(),
                    self.server.stderr()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Focuses the element `css` finds and presses Enter, until `script` returns
    /// something truthy: the page's periodic refresh may redraw the element between the
    /// focus and the key, which then goes nowhere; so it is tried again (at most 5 times).
    async fn press_enter(&self, css: &str, what: &str, script: &str) {
        use fantoccini::error::{CmdError, ErrorStatus};
        for attempt in 1..=5 {
            let focused = self
                .js(&format!(
                    "const e = document.querySelector({css:?}); if (!e) return false; e.focus(); return document.activeElement === e"
                ))
                .await;
            assert_eq!(focused, true, "{}: cannot focus {css}", self.test);
            let active = self.client.active_element().await.unwrap();
            match active
                .send_keys(&fantoccini::key::Key::Enter.to_string())
                .await
            {
                Ok(()) => {}
                // Redrawn between the focus and the key: the element is gone (stale, or
                // detached and so not interactable, as Chrome may say); again.
                Err(CmdError::Standard(err))
                    if matches!(
                        err.error,
                        ErrorStatus::StaleElementReference | ErrorStatus::ElementNotInteractable
                    ) && attempt < 5 =>
                {
                    continue;
                }
                Err(err) => panic!("{}: pressing Enter on {css}: {err}", self.test),
            }
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline {
                let value = self.js(script).await;
                if !matches!(&value, Value::Null | Value::Bool(false)) && value.as_str() != Some("")
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            if attempt == 5 {
                self.until(what, script, 1).await;
            }
        }
    }

    /// Clicks the element once it stays put on the screen ([`Ui::settled`]); if the page
    /// replaced it between finding and clicking (its periodic refresh re-renders),
    /// finds it again.
    async fn click(&self, css: &str) {
        use fantoccini::error::{CmdError, ErrorStatus};
        for attempt in 1.. {
            let element = self
                .client
                .find(Locator::Css(css))
                .await
                .unwrap_or_else(|err| panic!("{}: no {css}: {err}", self.test));
            let clicked = match self.settled(&element).await {
                Ok(()) => element.click().await.map(drop),
                Err(err) => Err(err),
            };
            match clicked {
                Ok(_) => return,
                Err(CmdError::Standard(err))
                    if err.error == ErrorStatus::StaleElementReference && attempt < 20 =>
                {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(err) => panic!("{}: clicking {css}: {err}", self.test),
            }
        }
    }

    /// Brings `element` into view and waits (at most 2 s) until it is where it was 100 ms
    /// and 200 ms before: WebDriver clicks where it measured the element, and a page still
    /// laying itself out (a drawing laid out again for the job panel's room) would move it
    /// from under the click.
    async fn settled(
        &self,
        element: &fantoccini::elements::Element,
    ) -> Result<(), fantoccini::error::CmdError> {
        const WHERE: &str = "const e = arguments[0]; e.scrollIntoView({ block: 'nearest', inline: 'nearest' }); \
             const r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]";
        let arg = serde_json::to_value(element).expect("an element is JSON");
        let mut seen = Vec::new();
        for _ in 0..20 {
            seen.push(self.client.execute(WHERE, vec![arg.clone()]).await?);
            if let [.., a, b, c] = seen.as_slice()
                && a == b
                && b == c
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    async fn type_into(&self, css: &str, text: &str) {
        let field = self.client.find(Locator::Css(css)).await.unwrap();
        field.clear().await.unwrap();
        field.send_keys(text).await.unwrap();
    }

    async fn screenshot(&self, name: &str) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/ui-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        if let Ok(png) = self.client.screenshot().await {
            std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
        }
    }

    async fn close(mut self) {
        // No page hit a script error on the way (common.js records one on the body).
        let fault = self.js("return document.body.dataset.fault ?? null").await;
        assert_eq!(fault, Value::Null, "{}: the page hit an error", self.test);
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// The page's request state as shown.
const STATE: &str = "return (document.getElementById('state')?.textContent ?? '')";

/// Starts a `fleet` request over `hosts` (the one named web-2 fails) and opens its page
/// once it has failed.
async fn failed_fleet(ui: &Ui, hosts: Value) {
    let id = ui.create("fleet", json!({ "hosts": hosts })).await;
    ui.goto(&format!("/requests/{id}")).await;
    ui.until("FAIL", &format!("{STATE} === 'FAIL'"), 30).await;
}

/// Issue #36: a group box is coloured by the worst state inside it: the iteration that
/// failed, and the fan-out around it, are red, open or closed; one that completed is not.
/// The failed-jobs list names the iteration, and its button brings the job into view.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_iteration_is_red_and_one_click_away() {
    let Some(ui) = ui("a_failed_iteration").await else {
        return;
    };
    failed_fleet(&ui, json!(["web-1", "web-2", "web-3"])).await;
    // The stroke of each group box, by its state.
    let strokes = ui
        .until(
            "the groups coloured",
            "const gs = [...document.querySelectorAll('svg.chain .grp[data-state]')].filter(g => g.dataset.state); \
             return gs.length >= 2 && gs.some(g => g.dataset.state === 'FAIL') && gs.some(g => g.dataset.state === 'COMPLETE') && \
             gs.map(g => [g.dataset.state, getComputedStyle(g.querySelector(':scope > rect')).stroke])",
            20,
        )
        .await;
    let fail_fg = ui
        .js("const b = document.createElement('span'); b.className = 's-FAIL'; document.body.append(b); const c = getComputedStyle(b).color; b.remove(); return c")
        .await;
    let strokes = strokes.as_array().unwrap();
    for pair in strokes {
        let (state, stroke) = (&pair[0], &pair[1]);
        if state == "FAIL" {
            assert_eq!(
                stroke, &fail_fg,
                "a group with a failed job is red: {strokes:?}"
            );
        } else {
            assert_ne!(stroke, &fail_fg, "only failed groups are red: {strokes:?}");
        }
    }
    // The progress is of the request's own jobs: two of the three pings completed.
    let summary = "return document.querySelector('.summary').textContent";
    let progress = ui.js(summary).await;
    let progress = progress.as_str().unwrap();
    assert!(progress.contains("2 of 3 jobs (67%)"), "{progress}");
    // An iteration of one job says so, its wrappers not counted.
    let header = ui
        .js("return [...document.querySelectorAll('svg.chain .grp.open .head')].map(h => h.textContent).find(t => t.includes('host=web-2'))")
        .await;
    assert_eq!(header, "▾ host=web-21 job");
    // The failed-jobs list names the iteration.
    let first_failed =
        "const b = document.querySelector('.failed-list button'); return b && b.textContent";
    let listed = ui.until("the failed job listed", first_failed, 10).await;
    assert_eq!(listed, "ping [host=web-2]");
    // Issue #47: the header says why in one line, without opening the job.
    let reason = ui
        .until(
            "the failure's reason",
            "const f = document.getElementById('failure'); return f && f.textContent",
            10,
        )
        .await;
    assert!(
        reason
            .as_str()
            .unwrap()
            .starts_with("job ping [host=web-2] failed (try 1): "),
        "{reason}"
    );
    ui.screenshot("failed-iteration").await;

    // In a 50-host fan-out (closed at first: a large expansion), the failed iteration is
    // one click away in the failed-jobs list: the click opens its groups and brings the
    // job into view, nothing to scroll sideways. The one that fails (web-2) comes last.
    let mut hosts: Vec<String> = (1..50).map(|n| format!("db-{n:02}")).collect();
    hosts.push("web-2".to_owned());
    failed_fleet(&ui, json!(hosts)).await;
    ui.until(
        "the failed job listed",
        "return document.querySelector('.failed-list button')",
        10,
    )
    .await;
    ui.click(".failed-list button").await;
    let seen = ui
        .until(
            "the failed job in view",
            "const j = document.querySelector('svg.chain .job.selected'); if (!j) return false; \
             const r = j.getBoundingClientRect(), w = document.querySelector('.graph-wrap').getBoundingClientRect(); \
             return r.top >= w.top && r.bottom <= w.bottom && r.left >= w.left && r.right <= w.right && r.top >= 0 && r.bottom <= innerHeight && j.dataset.state",
            20,
        )
        .await;
    assert_eq!(seen, "FAIL");
    let sideways = "const w = document.querySelector('.graph-wrap'); return [w.scrollWidth, w.clientWidth, w.scrollLeft]";
    let sizes = ui.js(sideways).await;
    let [scroll_width, client_width, scroll_left] = [0, 1, 2].map(|i| sizes[i].as_f64().unwrap());
    assert!(
        scroll_width <= client_width && scroll_left == 0.0,
        "the drawing scrolls sideways: {scroll_width} in {client_width}, at {scroll_left}"
    );
    // The job's panel is titled with its iteration's element.
    let title = ui
        .until(
            "the failed job's panel",
            "const n = document.getElementById('job-name'); return n && n.textContent",
            10,
        )
        .await;
    assert_eq!(title, "ping [host=web-2]");
    ui.screenshot("big-fan-out-failed").await;
    // With the job panel closed, the drawing is laid out again for the wider frame: all 50
    // iterations fit it at once, and so do the fan-out's way in and out (the wrappers).
    ui.click("#close-job").await;
    let outside = ui
        .until(
            "50 iterations in view",
            "const w = document.querySelector('.graph-wrap'); w.scrollTop = 0; const f = w.getBoundingClientRect(); \
             const inside = (e) => { const r = e.getBoundingClientRect(); return r.top >= f.top && r.bottom <= f.bottom && r.left >= f.left && r.right <= f.right; }; \
             const iterations = [...document.querySelectorAll('svg.chain .grp')].filter(g => (g.querySelector('title') || g.querySelector('.head text') || {}).textContent?.includes('host=')); \
             const wrappers = [...document.querySelectorAll('svg.chain .job.wrapper')]; \
             const counts = [iterations.length, iterations.filter(g => !inside(g)).length, wrappers.filter(g => !inside(g)).length]; \
             return counts[1] === 0 && counts[2] === 0 ? counts : false",
            20,
        )
        .await;
    ui.screenshot("big-fan-out").await;
    assert_eq!(
        outside,
        json!([50, 0, 0]),
        "[iterations, out of view, wrappers out of view]"
    );
    ui.close().await;
}

/// Issue #34: a request waiting for a lock says so on its page, and runs once the holder
/// has ended.
#[tokio::test(flavor = "multi_thread")]
async fn a_request_waiting_for_a_lock_says_for_which_and_behind_whom() {
    let Some(ui) = ui("waiting_for_a_lock").await else {
        return;
    };
    let holder = ui
        .create("failover", json!({"cluster": "db-7", "wait": "60s"}))
        .await;
    let waiter = ui
        .create("failover", json!({"cluster": "db-7", "wait": "60s"}))
        .await;
    ui.goto(&format!("/requests/{waiter}")).await;
    let said = ui
        .until(
            "the waiting reason",
            "const f = document.getElementById('failure'); return f && f.textContent",
            20,
        )
        .await;
    assert_eq!(
        said.as_str()
            .unwrap()
            .split(", ")
            .take(2)
            .collect::<Vec<_>>(),
        [
            "waiting for lock cluster-ops[db-7]".to_owned(),
            format!("held by request {holder} of ann since ")
                .as_str()
                .to_owned()
                + said
                    .as_str()
                    .unwrap()
                    .split(" since ")
                    .nth(1)
                    .unwrap()
                    .split(',')
                    .next()
                    .unwrap(),
        ]
    );
    let label = ui
        .js("return document.getElementById('failure').closest('div').querySelector('dt').textContent")
        .await;
    assert_eq!(label, "Waiting");
    // Issue #47: the reason spans the summary's width, not one narrow column.
    let widths = ui
        .js("const d = document.getElementById('failure').closest('div'); return [d.getBoundingClientRect().width, d.parentElement.getBoundingClientRect().width]")
        .await;
    let (row, summary) = (widths[0].as_f64().unwrap(), widths[1].as_f64().unwrap());
    assert!(
        row > summary * 0.9,
        "the Waiting row is {row} px of {summary}"
    );
    ui.screenshot("waiting-for-lock").await;
    // The holder stopped: the waiter runs, and its page says nothing more of waiting.
    let stopped = ui
        .http
        .put(ui.url(&format!("/api/v1/requests/{holder}/stop")))
        .send()
        .await
        .unwrap();
    assert!(stopped.status().is_success(), "{}", stopped.status());
    ui.until("RUNNING", &format!("{STATE} === 'RUNNING'"), 30)
        .await;
    ui.until(
        "no waiting reason",
        "return !document.getElementById('failure')",
        10,
    )
    .await;
    ui.close().await;
}

/// Issue #16: an approval that waits is answered from its job's panel.
#[tokio::test(flavor = "multi_thread")]
async fn an_approval_is_approved_from_the_page() {
    let Some(ui) = ui("approved_from_the_page").await else {
        return;
    };
    let id = ui.create("gate", json!({})).await;
    ui.goto(&format!("/requests/{id}")).await;
    ui.until(
        "the approval waiting",
        "return document.querySelector('svg.chain .job[data-state=RUNNING]')",
        20,
    )
    .await;
    ui.click("svg.chain .job[data-state=RUNNING]").await;
    ui.until(
        "the Approve button",
        "return document.getElementById('approve') !== null && document.querySelector('.running-try')?.textContent.includes('waiting for approval: ship it?')",
        20,
    )
    .await;
    ui.screenshot("approval").await;
    ui.click("#approve").await;
    ui.until("COMPLETE", &format!("{STATE} === 'COMPLETE'"), 30)
        .await;
    let log = ui.request_log(&id).await;
    let stdout = log
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["name"] == "sign-off")
        .unwrap()["stdout"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(stdout.starts_with("approved by "), "{stdout}");
    ui.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_request_is_stopped_retried_paused_and_resumed_from_its_page() {
    let Some(ui) = ui("stop_from_its_page").await else {
        return;
    };
    let id = ui.create("naps", json!({"host": "db1"})).await;
    ui.goto(&format!("/requests/{id}")).await;
    ui.until("RUNNING", &format!("{STATE} === 'RUNNING'"), 20)
        .await;
    ui.click("#stop").await;
    ui.until(
        "the confirmation",
        "return document.getElementById('stop-dialog').open",
        10,
    )
    .await;
    ui.screenshot("stop-confirmation").await;
    // Cancel first: the dialog closes and nothing happens (a stop is sent only on
    // confirming, so once the dialog is closed there is nothing more to wait for).
    ui.click("#stop-dialog button:not(#stop-confirm)").await;
    ui.until(
        "the confirmation closed",
        "return !document.getElementById('stop-dialog').open",
        10,
    )
    .await;
    assert_eq!(ui.request(&id).await["state"], 2, "still RUNNING");
    ui.click("#stop").await;
    ui.click("#stop-confirm").await;
    ui.until("STOPPED", &format!("{STATE} === 'STOPPED'"), 30)
        .await;
    assert_eq!(ui.request(&id).await["state"], 6);
    ui.until(
        "the job drawn STOPPED",
        "return document.querySelector('svg.chain .job[data-state=STOPPED]')",
        10,
    )
    .await;
    assert_eq!(
        ui.js("return document.getElementById('stop')?.isConnected ?? false")
            .await,
        false,
        "no Stop button on a finished request"
    );

    // Issue #16: Retry runs it again, and the page follows it; Pause and Resume.
    ui.click("#retry").await;
    ui.until("RUNNING again", &format!("{STATE} === 'RUNNING'"), 30)
        .await;
    ui.click("#pause").await;
    ui.until(
        "the paused badge",
        "return document.getElementById('paused') !== null",
        20,
    )
    .await;
    assert_eq!(ui.request(&id).await["paused"], true);
    ui.screenshot("paused").await;
    ui.click("#resume").await;
    ui.until(
        "the paused badge gone",
        "return document.getElementById('paused') === null && document.getElementById('pause') !== null",
        20,
    )
    .await;
    assert_eq!(ui.request(&id).await.get("paused"), None);
    ui.close().await;
}

fn url_escape(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

mod elements;
mod pages;
mod request_page;
