//! A request's page in Chromium: started from the form (a fleet pasted or from a file too)
//! and followed to its end, its output, a failed iteration, a lock's wait, an approval,
//! stop/retry/pause, 25,000 jobs.

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn start_from_the_form_and_watch_it_reach_complete_without_a_reload() {
    let Some(ui) = ui("start_from_the_form").await else {
        return;
    };
    ui.start_form("deploy").await;
    // A list value is JSON, checked before anything is sent.
    ui.type_into("#arg-hosts", "[\"db1\", ").await;
    ui.click("#start-submit").await;
    let error = ui
        .until(
            "the JSON error beside the field",
            "return document.getElementById('err-hosts').textContent",
            10,
        )
        .await;
    assert!(
        error.as_str().unwrap().starts_with("Not valid JSON"),
        "{error}"
    );
    // The API's error about an arg is shown beside that arg.
    ui.type_into("#arg-hosts", "[\"db1\", \"db2\"]").await;
    ui.type_into("#arg-nap", "soon").await;
    ui.click("#start-submit").await;
    let error = ui
        .until(
            "the API's error beside the field",
            "return document.getElementById('err-nap').textContent",
            10,
        )
        .await;
    assert!(
        error.as_str().unwrap().contains("invalid duration"),
        "{error}"
    );
    assert_eq!(
        ui.js("return document.getElementById('err-hosts').textContent")
            .await,
        ""
    );
    ui.type_into("#arg-nap", "400ms").await;
    ui.type_into("#start-user", "carol").await;
    let id = ui.start_from_the_form().await;
    // Marks this page: a reload would lose the mark.
    ui.js("window.spindleMark = 'kept'; return true").await;
    ui.until(
        "a job running",
        "return document.querySelector('svg.chain .job[data-state=RUNNING]')",
        20,
    )
    .await;
    ui.until("COMPLETE", &format!("{STATE} === 'COMPLETE'"), 60)
        .await;
    ui.until(
        "every job drawn COMPLETE",
        "const jobs = [...document.querySelectorAll('svg.chain .job')]; return jobs.length > 0 && jobs.every(j => j.dataset.state === 'COMPLETE')",
        10,
    )
    .await;
    assert_eq!(
        ui.js("return window.spindleMark").await,
        "kept",
        "the page was reloaded"
    );
    let request = ui.request(&id).await;
    assert_eq!(request["state"], 3);
    assert_eq!(request["user"], "carol");
    // The drawing: the expansion's two iterations, each a group of its own.
    let groups = ui
        .js("return [...document.querySelectorAll('svg.chain .grp')].map(g => g.textContent)")
        .await;
    let groups = groups.to_string();
    assert!(groups.contains("each-host ×2"), "{groups}");
    assert!(
        groups.contains("host=db1") && groups.contains("host=db2"),
        "{groups}"
    );
    ui.screenshot("request-page").await;
    // "Start again" opens the form filled in.
    ui.click("#start-again").await;
    ui.until(
        "the form filled in",
        "const f = document.getElementById('arg-hosts'); return f && f.value",
        10,
    )
    .await;
    assert_eq!(
        ui.js("return document.getElementById('arg-hosts').value")
            .await,
        "[\"db1\",\"db2\"]"
    );
    assert_eq!(
        ui.js("return document.getElementById('arg-nap').value")
            .await,
        "400ms"
    );
    ui.screenshot("start-form").await;
    ui.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_jobs_output_is_followed_while_it_runs() {
    let Some(ui) = ui("a_jobs_output").await else {
        return;
    };
    let go = ui.dir.path().join("go");
    let id = ui.create("talk", json!({"go": go.to_str().unwrap()})).await;
    ui.goto(&format!("/requests/{id}")).await;
    ui.until(
        "the job running",
        "return document.querySelector('svg.chain .job[data-state=RUNNING]')",
        20,
    )
    .await;
    ui.click("svg.chain .job[data-state=RUNNING]").await;
    let live = ui
        .until(
            "its live output",
            "const o = document.getElementById('live-output'); return o && o.textContent.includes('first line') && o.textContent",
            20,
        )
        .await;
    assert!(live.as_str().unwrap().contains("to stderr"), "{live}");
    ui.screenshot("job-output").await;
    std::fs::write(&go, "").unwrap();
    let stdout = ui
        .until(
            "the try's entry with all its output",
            "const t = document.querySelector('.try[data-try=\"1\"] pre.stdout'); return t && t.textContent.includes('last line') && t.textContent",
            30,
        )
        .await;
    assert_eq!(stdout, "first line\nlast line\n");
    ui.until("COMPLETE", &format!("{STATE} === 'COMPLETE'"), 30)
        .await;
    ui.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_25000_job_request_page_opens() {
    let Some(ui) = ui("a_25000_job_request").await else {
        return;
    };
    // 5,000 iterations of seven jobs (a, b, c and their wrappers), and the request's own.
    let hosts: Vec<String> = (0..5000).map(|n| format!("host{n:04}")).collect();
    let id = ui.create("wide", json!({ "hosts": hosts })).await;
    let request = ui.request(&id).await;
    assert!(
        request["totalJobs"].as_u64().unwrap() >= 25_000,
        "{}",
        request["totalJobs"]
    );
    let started = Instant::now();
    ui.goto(&format!("/requests/{id}")).await;
    ui.until("its state", &format!("{STATE} !== ''"), 30).await;
    let shown_after = started.elapsed();
    // The expansion is drawn closed, with its counts.
    let counts = ui
        .until(
            "the expansion's counts",
            "const g = document.querySelector('svg.chain .grp.closed.expansion .counts-text'); return g && g.textContent !== '…' && g.textContent",
            30,
        )
        .await;
    assert!(
        counts.as_str().unwrap().contains('✓') || counts.as_str().unwrap().contains('○'),
        "{counts}"
    );
    let jobs_drawn = ui
        .js("return document.querySelectorAll('svg.chain .job').length")
        .await;
    assert!(
        jobs_drawn.as_u64().unwrap() < 100,
        "{jobs_drawn} jobs drawn"
    );
    ui.until("COMPLETE", &format!("{STATE} === 'COMPLETE'"), 120)
        .await;
    ui.screenshot("big-request").await;
    // Opened, it draws at most its first iterations and one node for the rest.
    ui.click("svg.chain .grp.closed.expansion").await;
    let more = ui
        .until(
            "the rest as one node",
            "const m = document.querySelector('svg.chain .more'); return m && m.textContent",
            30,
        )
        .await;
    assert!(more.as_str().unwrap().contains("+4800 more"), "{more}");
    ui.until(
        "the counts of the iterations drawn",
        "const c = [...document.querySelectorAll('svg.chain .grp.closed .counts-text')]; return c.length === 200 && c.every(t => t.textContent === '✓3')",
        30,
    )
    .await;
    let first = ui
        .js("return document.querySelector('svg.chain .grp.closed').textContent")
        .await;
    assert!(first.as_str().unwrap().contains("host=host0000"), "{first}");
    ui.screenshot("big-request-open").await;
    let line = format!(
        "a_25000_job_request: state shown {} ms after the page was asked for\n",
        shown_after.as_millis()
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    ui.close().await;
}

/// Issue #50: a fleet's list is given in the start form pasted one value a line, or
/// loaded from a file (a JSON list here), instead of typed as JSON into one line; a value
/// and a list for one arg at once is refused beside it.
#[tokio::test(flavor = "multi_thread")]
async fn a_fleet_is_started_from_a_pasted_list_and_from_a_file() {
    let Some(ui) = ui("fleet_from_a_list").await else {
        return;
    };
    let hosts_of = async |id: &str| {
        let request = ui.request(id).await;
        request["args"]
            .as_array()
            .unwrap()
            .iter()
            .find(|arg| arg["Name"] == "hosts")
            .unwrap_or_else(|| panic!("no hosts arg: {request}"))["Value"]
            .clone()
    };
    ui.start_form("deploy").await;
    ui.click("[data-arg=hosts] summary").await;
    ui.type_into("#list-hosts", "db1\ndb2\n\n  db3  \n").await;
    ui.type_into("#arg-hosts", "[\"db9\"]").await;
    ui.click("#start-submit").await;
    let error = ui
        .until(
            "both given, refused beside the field",
            "return document.getElementById('err-hosts').textContent",
            10,
        )
        .await;
    assert_eq!(error, json!("Give the value or the list, not both."));
    ui.type_into("#arg-hosts", "").await;
    ui.type_into("#arg-nap", "1ms").await;
    let pasted = ui.start_from_the_form().await;
    assert_eq!(hosts_of(&pasted).await, json!(["db1", "db2", "db3"]));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hosts.json");
    std::fs::write(&file, "[\"web1\", \"web2\"]\n").unwrap();
    ui.start_form("deploy").await;
    ui.click("[data-arg=hosts] summary").await;
    ui.client
        .find(Locator::Css("#file-hosts"))
        .await
        .unwrap()
        .send_keys(file.to_str().unwrap())
        .await
        .unwrap();
    ui.until(
        "the file's text in the list",
        "return document.getElementById('list-hosts').value.includes('web2')",
        10,
    )
    .await;
    ui.type_into("#arg-nap", "1ms").await;
    let loaded = ui.start_from_the_form().await;
    assert_eq!(hosts_of(&loaded).await, json!(["web1", "web2"]));
    ui.close().await;
}
