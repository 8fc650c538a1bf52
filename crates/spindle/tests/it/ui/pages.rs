//! The other pages in Chromium: schedules, the list (found by an arg, paged by a cursor,
//! picked and stopped together), markup kept as text, keyboard and phone, signing in (with a
//! token, and with single sign-on).

use super::*;

/// Issue #16: the schedules page lists the specs' schedules with their next runs, values
/// as text.
#[tokio::test(flavor = "multi_thread")]
async fn the_schedules_page_lists_the_schedules() {
    let Some(ui) = ui("schedules_page").await else {
        return;
    };
    ui.goto("/schedules").await;
    let row = ui
        .until(
            "the schedule listed",
            "const r = document.querySelector('#schedules tr[data-name=\"new-year\"]'); return r && r.textContent",
            20,
        )
        .await;
    let row = row.as_str().unwrap();
    assert!(
        row.contains("0 0 1 1 *") && row.contains("Europe/Berlin"),
        "{row}"
    );
    assert!(row.contains("host=<b>db9</b>"), "markup stays text: {row}");
    assert!(row.contains("never"), "no run yet: {row}");
    assert_eq!(
        ui.js("return document.querySelector('#schedules b') === null")
            .await,
        true
    );
    ui.screenshot("schedules").await;
    ui.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_is_found_in_the_list_by_an_arg() {
    let Some(ui) = ui("found_by_an_arg").await else {
        return;
    };
    let mut ids = Vec::new();
    for host in ["db1", "db2", "db3"] {
        ids.push(ui.create("wide", json!({"hosts": [host]})).await);
    }
    let naps = ui.create("naps", json!({"host": "db2"})).await;
    ui.goto("/").await;
    ui.until(
        "every request listed",
        "return document.querySelectorAll('#requests tr').length === 4",
        20,
    )
    .await;
    // Newest first.
    let listed = ui
        .js("return [...document.querySelectorAll('#requests tr')].map(r => r.dataset.id)")
        .await;
    assert_eq!(listed, json!([naps, ids[2], ids[1], ids[0]]));
    ui.until(
        "counts by state",
        "const c = document.querySelector('[data-count=COMPLETE]'); return c && c.textContent.endsWith(' 3')",
        20,
    )
    .await;
    ui.type_into("#f-arg", "host=db2").await;
    ui.click(".filters button[type=submit]").await;
    ui.until(
        "only the request with host=db2",
        &format!(
            "const rows = [...document.querySelectorAll('#requests tr')]; return rows.length === 1 && rows[0].dataset.id === '{naps}'"
        ),
        20,
    )
    .await;
    assert!(
        ui.js("return location.search")
            .await
            .as_str()
            .unwrap()
            .contains("arg=host%3Ddb2"),
        "the filter is in the address, to share"
    );
    ui.screenshot("request-list").await;
    // By type, then following the row's link.
    ui.type_into("#f-arg", "").await;
    ui.client
        .find(Locator::Css("#f-type option[value=wide]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    ui.click(".filters button[type=submit]").await;
    ui.until(
        "the three wide requests",
        "return document.querySelectorAll('#requests tr').length === 3",
        20,
    )
    .await;
    ui.click(&format!("#requests tr[data-id='{}'] a", ids[0]))
        .await;
    ui.until(
        "the request's page",
        &format!("return location.pathname === '/requests/{}'", ids[0]),
        10,
    )
    .await;
    ui.close().await;
}

/// Issue #51: the list pages by the API's cursor (`after=`), not by offset: Older goes on
/// after the page's last row, Newer comes back, and the address names the page.
#[tokio::test(flavor = "multi_thread")]
async fn the_list_pages_by_a_cursor() {
    let Some(ui) = ui("list_pages_by_a_cursor").await else {
        return;
    };
    let mut ids = Vec::new();
    for n in 0..27 {
        ids.push(
            ui.create("wide", json!({"hosts": [format!("db{n}")]}))
                .await,
        );
    }
    ids.reverse();
    ui.goto("/").await;
    let rows = "return [...document.querySelectorAll('#requests tr')].map(r => r.dataset.id)";
    ui.until(
        "the first page",
        "return document.querySelectorAll('#requests tr').length === 25",
        20,
    )
    .await;
    assert_eq!(ui.js(rows).await, json!(ids[..25]));
    ui.click(".pager button:last-child").await;
    ui.until(
        "the second page",
        "return document.querySelectorAll('#requests tr').length === 2",
        20,
    )
    .await;
    assert_eq!(ui.js(rows).await, json!(ids[25..]));
    let search = ui.js("return location.search").await;
    let search = search.as_str().unwrap();
    assert!(
        search.contains("after=") && !search.contains("offset"),
        "{search}"
    );
    assert!(
        search.ends_with(ids[24].as_str()),
        "the cursor is the first page's last request: {search}"
    );
    assert_eq!(
        ui.js("return document.querySelector('.pager span').textContent")
            .await,
        json!("26–27")
    );
    assert_eq!(
        ui.js("return document.querySelector('.pager button:last-child').disabled")
            .await,
        json!(true)
    );
    ui.click(".pager button:first-child").await;
    ui.until(
        "the first page again",
        "return document.querySelectorAll('#requests tr').length === 25",
        20,
    )
    .await;
    assert_eq!(ui.js(rows).await, json!(ids[..25]));
    assert_eq!(ui.js("return location.search").await, json!(""));
    ui.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_arg_value_with_markup_stays_text() {
    let Some(ui) = ui("markup_stays_text").await else {
        return;
    };
    let hostile = "<img src=x onerror=\"window.pwned=1\"><b id=\"injected\">bold</b><script>window.pwned=2</script>";
    let id = ui.create("naps", json!({"host": hostile})).await;
    ui.goto(&format!("/requests/{id}")).await;
    let shown = ui
        .until(
            "the args",
            "const v = document.querySelector('#args .arg-value'); return v && v.textContent",
            20,
        )
        .await;
    assert_eq!(shown, hostile);
    ui.goto("/").await;
    ui.until(
        "the list",
        "return document.querySelectorAll('#requests tr').length === 1",
        20,
    )
    .await;
    ui.goto(&format!(
        "/start/naps?args={}",
        url_escape(&json!({"host": hostile}).to_string())
    ))
    .await;
    let value = ui
        .until(
            "the form filled in",
            "const f = document.getElementById('arg-host'); return f && f.value",
            10,
        )
        .await;
    assert_eq!(value, hostile);
    // A path with markup is a page that says the request is not found, as text.
    ui.goto("/requests/%3Cb%20id%3Dinjected%3Ex%3C%2Fb%3E")
        .await;
    ui.until(
        "not found",
        "return document.body.innerText.includes('Request not found')",
        10,
    )
    .await;
    assert_eq!(
        ui.js("return document.getElementById('injected')").await,
        Value::Null
    );
    assert_eq!(ui.js("return window.pwned ?? null").await, Value::Null);
    // The page's policy forbids inline scripts.
    let policy =
        ui.http.get(ui.url("/")).send().await.unwrap().headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_owned();
    assert!(
        policy.contains("script-src 'self'") && !policy.contains("unsafe-inline"),
        "{policy}"
    );
    ui.goto(&format!("/requests/{id}")).await;
    ui.until(
        "the args again",
        "return document.querySelector('#args .arg-value')",
        20,
    )
    .await;
    ui.screenshot("markup-stays-text").await;
    assert_eq!(ui.js("return window.pwned ?? null").await, Value::Null);
    ui.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_pages_work_by_keyboard_on_a_phone_and_in_the_dark() {
    let Some(ui) = ui_with(
        "keyboard_phone_dark",
        &[
            "--window-size=390,844",
            "--force-dark-mode",
            "--blink-settings=preferredColorScheme=0",
        ],
    )
    .await
    else {
        return;
    };
    let id = ui
        .create("deploy", json!({"hosts": ["db1", "db2"], "nap": "1ms"}))
        .await;
    ui.goto(&format!("/requests/{id}")).await;
    ui.until("COMPLETE", &format!("{STATE} === 'COMPLETE'"), 30)
        .await;
    // The viewer's colour scheme.
    assert_eq!(
        ui.js("return matchMedia('(prefers-color-scheme: dark)').matches")
            .await,
        true
    );
    assert_eq!(
        ui.js("return getComputedStyle(document.body).backgroundColor")
            .await,
        "rgb(21, 25, 30)"
    );
    // Readable on a phone: the page itself does not scroll sideways (the drawing
    // scrolls in its own frame).
    assert_eq!(
        ui.js("return document.documentElement.scrollWidth <= window.innerWidth")
            .await,
        true,
        "{}",
        ui.js("return [document.documentElement.scrollWidth, window.innerWidth]")
            .await
    );
    // Times in the viewer's zone, UTC on hover.
    let title = ui.js("return document.querySelector('time').title").await;
    assert!(title.as_str().unwrap().starts_with("UTC 20"), "{title}");
    // A job opens from the keyboard: focus it and press Enter.
    ui.press_enter(
        "svg.chain .job:not(.wrapper)",
        "the job's panel",
        "const n = document.getElementById('job-name'); return n && n.textContent",
    )
    .await;
    // So does a group: Enter on its header closes it.
    ui.press_enter(
        "svg.chain .grp.expansion .head",
        "the expansion closed",
        "return document.querySelector('svg.chain .grp.closed.expansion')",
    )
    .await;
    ui.screenshot("phone-dark").await;
    ui.goto("/runners").await;
    ui.until(
        "the server's own Job Runner, live",
        "const r = document.querySelector('#runners tr'); return r && r.textContent.includes('live')",
        10,
    )
    .await;
    ui.goto("/").await;
    ui.until(
        "the list",
        "return document.querySelectorAll('#requests tr').length === 1",
        10,
    )
    .await;
    assert_eq!(
        ui.js("return document.documentElement.scrollWidth <= window.innerWidth")
            .await,
        true,
        "the list fits a phone"
    );
    ui.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn signing_in_with_a_token_and_offering_only_what_the_viewer_may_do() {
    let tokens = std::sync::Mutex::new(Vec::new());
    let Some(ui) = ui_prepared("sign_in", &["--window-size=1280,1000"], |dir| {
        let (ann, ann_line) = crate::security::token(dir, "ann", &["deployer"]);
        let (bob, bob_line) = crate::security::token(dir, "bob", &["viewer"]);
        std::fs::write(dir.join("tokens"), format!("{ann_line}\n{bob_line}\n")).unwrap();
        std::fs::write(dir.join("server.yaml"), "auth:\n  tokens: tokens\n").unwrap();
        tokens.lock().unwrap().extend([ann, bob]);
        vec!["--config".to_owned(), "server.yaml".to_owned()]
    })
    .await
    else {
        return;
    };
    let (ann, bob) = {
        let tokens = tokens.lock().unwrap();
        (tokens[0].clone(), tokens[1].clone())
    };
    // Not signed in: every page sends the viewer to sign in, and back after.
    ui.goto("/runners").await;
    ui.until(
        "the sign-in page",
        "return location.pathname === '/sign-in' && document.getElementById('token')",
        10,
    )
    .await;
    ui.type_into("#token", "spindle_not_a_token").await;
    ui.click("#sign-in").await;
    let refused = ui
        .until(
            "the refusal",
            "return document.getElementById('sign-in-error').textContent",
            10,
        )
        .await;
    assert!(
        refused.as_str().unwrap().contains("the token is not valid"),
        "{refused}"
    );
    ui.type_into("#token", &bob).await;
    ui.screenshot("sign-in").await;
    ui.click("#sign-in").await;
    ui.until(
        "back where the viewer was, signed in",
        "return location.pathname === '/runners' && (document.getElementById('signed-in-as')?.textContent ?? '')",
        10,
    )
    .await;
    assert_eq!(
        ui.js("return document.getElementById('signed-in-as').textContent")
            .await,
        "bob (viewer)"
    );
    // The token is in a cookie no script can read.
    assert_eq!(ui.js("return document.cookie").await, "");
    // A request ann started: bob sees it, but is offered neither stop nor start again.
    let response = ui
        .http
        .post(ui.url("/api/v1/requests"))
        .bearer_auth(&ann)
        .json(&json!({"type": "naps", "args": {"host": "db1"}}))
        .send()
        .await
        .unwrap();
    let id = created_id(response).await;
    ui.goto(&format!("/requests/{id}")).await;
    ui.until("RUNNING", &format!("{STATE} === 'RUNNING'"), 20)
        .await;
    ui.until(
        "the history",
        "return document.querySelector('#history li[data-action=create]')?.textContent.includes('create by ann')",
        10,
    )
    .await;
    assert_eq!(
        ui.js("return document.getElementById('stop')?.isConnected ?? false")
            .await,
        false
    );
    assert_eq!(
        ui.js("return document.getElementById('start-again')?.isConnected ?? false")
            .await,
        false
    );
    ui.goto("/start/naps").await;
    let not_allowed = ui
        .until(
            "no form for bob",
            "return document.getElementById('not-allowed')?.textContent",
            10,
        )
        .await;
    assert_eq!(not_allowed, "You (bob) may not start naps requests.");
    // Sign out, then in as ann, who may stop it.
    ui.click("#sign-out").await;
    ui.until("signed out", "return location.pathname === '/sign-in'", 10)
        .await;
    ui.type_into("#token", &ann).await;
    ui.click("#sign-in").await;
    ui.until(
        "signed in as ann",
        "return (document.getElementById('signed-in-as')?.textContent ?? '') === 'ann (deployer)'",
        10,
    )
    .await;
    ui.goto(&format!("/requests/{id}")).await;
    ui.until(
        "the Stop button",
        "return document.getElementById('stop')?.isConnected",
        20,
    )
    .await;
    ui.click("#stop").await;
    ui.click("#stop-confirm").await;
    ui.until("STOPPED", &format!("{STATE} === 'STOPPED'"), 30)
        .await;
    ui.until(
        "the stop in the history",
        "return document.querySelector('#history li[data-action=stop]')?.textContent.includes('stop by ann from 127.0.0.1')",
        10,
    )
    .await;
    ui.screenshot("signed-in-history").await;
    ui.close().await;
}

/// Issue #33: requests picked in the list are acted on together, each asked alone: the
/// dialog names them first, the outcome says how many, and the one not picked runs on.
#[tokio::test(flavor = "multi_thread")]
async fn requests_picked_in_the_list_are_stopped_together() {
    let Some(ui) = ui("picked_together").await else {
        return;
    };
    let mut ids = Vec::new();
    for host in ["db1", "db2", "db3"] {
        ids.push(ui.create("naps", json!({ "host": host })).await);
    }
    ui.goto("/").await;
    ui.until(
        "every request listed",
        "return document.querySelectorAll('#requests tr').length === 3",
        20,
    )
    .await;
    assert_eq!(
        ui.js("return document.getElementById('bulk').checkVisibility()")
            .await,
        false,
        "no actions before anything is picked"
    );
    for id in &ids[..2] {
        ui.click(&format!("#requests tr[data-id='{id}'] input.pick"))
            .await;
    }
    ui.until(
        "two picked",
        "return document.getElementById('bulk').checkVisibility() && document.getElementById('picked-count').textContent",
        10,
    )
    .await;
    assert_eq!(
        ui.js("return document.getElementById('picked-count').textContent")
            .await,
        "2 picked"
    );
    ui.click("#bulk button[data-action=stop]").await;
    let named = ui
        .until(
            "the dialog names them",
            "const d = document.getElementById('bulk-dialog'); return d.open && [...d.querySelectorAll('li')].map(l => l.textContent)",
            10,
        )
        .await;
    assert_eq!(named, json!([ids[0], ids[1]]));
    ui.screenshot("picked-together").await;
    ui.click("#bulk-confirm").await;
    let outcome = ui
        .until(
            "the outcome",
            "return document.getElementById('bulk-result').textContent",
            20,
        )
        .await;
    assert_eq!(outcome, "Stopped 2 of 2.");
    for id in &ids[..2] {
        crate::eventually("STOPPED", Duration::from_secs(20), async || {
            ui.request(id).await["state"] == 6
        })
        .await;
    }
    let third = ui.request(&ids[2]).await["state"].as_u64();
    assert!(
        matches!(third, Some(1 | 2)),
        "not picked, not stopped: {third:?}"
    );
    ui.until(
        "nothing picked any more",
        "return !document.getElementById('bulk').checkVisibility()",
        10,
    )
    .await;
    ui.close().await;
}

/// Issue #33: "Sign in with single sign-on" takes the browser to the identity provider
/// (a test's own, `auth::testing`, which signs `ann` in at once) and back, through the
/// server's real routes: the session is in a cookie no script reads, and the page names
/// the user and the roles her groups gave.
#[tokio::test(flavor = "multi_thread")]
async fn signing_in_with_single_sign_on_from_the_sign_in_page() {
    let key = auth::testing::key("k1");
    let (issuer, _idp) = auth::testing::provider(&key).await;
    let port = crate::own_db::free_port();
    let Some(ui) = ui_prepared("sign_in_sso", &["--window-size=1280,1000"], |dir| {
        std::fs::write(dir.join("client.secret"), "client-secret-1").unwrap();
        std::fs::write(
            dir.join("server.yaml"),
            format!(
                "auth:\n  oidc:\n    issuer: {issuer}\n    client_id: spindle\n    client_secret:\n      file: client.secret\n    redirect_url: http://127.0.0.1:{port}/ui/oidc/callback\n"
            ),
        )
        .unwrap();
        vec![
            "--config".to_owned(),
            "server.yaml".to_owned(),
            "--listen".to_owned(),
            format!("127.0.0.1:{port}"),
        ]
    })
    .await
    else {
        return;
    };
    ui.goto("/runners").await;
    ui.until(
        "the sign-in page offering single sign-on",
        "return location.pathname === '/sign-in' && document.getElementById('sign-in-sso')",
        10,
    )
    .await;
    ui.screenshot("sign-in-sso").await;
    ui.click("#sign-in-sso").await;
    let signed_in = ui
        .until(
            "back where the viewer was, signed in",
            "return location.pathname === '/runners' && (document.getElementById('signed-in-as')?.textContent ?? '')",
            20,
        )
        .await;
    assert_eq!(signed_in, "ann (dba, oncall)");
    assert_eq!(ui.js("return document.cookie").await, "");
    ui.close().await;
}
