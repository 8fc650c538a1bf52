//! Issue #50 in the browser: a request's elements in a table on its page — the summary
//! naming the failed ones, a filter by state, sorting by a column, a row opening its
//! element's job — and the button that runs the failed elements again.

use super::*;

/// The element names of the table's rows, in order.
const ROWS: &str =
    "return [...document.querySelectorAll('#elements tbody tr')].map(r => r.dataset.element)";
/// Where the retry button is on the screen (px from the viewport's top).
const RETRY_AT: &str = "return Math.round(document.getElementById('retry-failed-elements').getBoundingClientRect().top)";

#[tokio::test(flavor = "multi_thread")]
async fn a_fleets_elements_are_listed_filtered_sorted_opened_and_retried() {
    let Some(ui) = ui("fleet_elements").await else {
        return;
    };
    let id = ui
        .create(
            "rollout",
            json!({"hosts": ["web-1", "web-2", "web-3", "web-4"]}),
        )
        .await;
    ui.goto(&format!("/requests/{id}")).await;
    // web-2 fails within the budget of 1: the request completes.
    ui.until("COMPLETE", &format!("{STATE} === 'COMPLETE'"), 30)
        .await;
    ui.until(
        "the four elements listed",
        "return document.querySelectorAll('#elements tbody tr').length === 4 && !document.getElementById('elements').hidden",
        20,
    )
    .await;
    assert_eq!(
        ui.js(ROWS).await,
        json!(["web-1", "web-2", "web-3", "web-4"])
    );
    let summary = ui
        .until(
            "the summary",
            "return document.getElementById('elements-summary').textContent || false",
            20,
        )
        .await;
    assert_eq!(
        summary,
        "each-host: 1 of 4 elements failed (budget 1): web-2"
    );
    // Each row says its wave and state.
    let waves = ui
        .js("return [...document.querySelectorAll('#elements tbody tr')].map(r => [r.children[2].textContent, r.dataset.state])")
        .await;
    assert_eq!(
        waves,
        json!([
            ["1", "COMPLETE"],
            ["2", "FAIL"],
            ["2", "COMPLETE"],
            ["2", "COMPLETE"]
        ])
    );
    ui.js("document.getElementById('elements').scrollIntoView(); return true")
        .await;
    ui.screenshot("elements").await;

    // Filtered by state: the failed one.
    ui.js("const s = document.getElementById('elements-state'); s.value = 'failed'; s.dispatchEvent(new Event('change')); return true")
        .await;
    assert_eq!(ui.js(ROWS).await, json!(["web-2"]));
    // All again, sorted by name descending (a second click on the column).
    ui.js("const s = document.getElementById('elements-state'); s.value = ''; s.dispatchEvent(new Event('change')); return true")
        .await;
    ui.click("#elements th[data-column=name] button").await;
    ui.click("#elements th[data-column=name] button").await;
    assert_eq!(
        ui.js(ROWS).await,
        json!(["web-4", "web-3", "web-2", "web-1"])
    );
    assert_eq!(
        ui.js("return document.querySelector('#elements th[data-column=name]').getAttribute('aria-sort')")
            .await,
        "descending"
    );

    // A row's name opens its element's job, with its failed try.
    ui.js("window.drawnBefore = document.querySelector('#graph svg'); return true")
        .await;
    ui.click("#elements tr[data-element=web-2] button.link")
        .await;
    let retry_at = ui.js(RETRY_AT).await;
    ui.until(
        "the element's job in the panel",
        "const p = document.getElementById('job-panel'); return !p.hidden && p.textContent.includes('ping') && p.textContent.includes('FAIL')",
        20,
    )
    .await;
    // The panel narrows the drawing's frame: it is laid out again, its selected job
    // kept in sight inside its own box, and the page does not move under the viewer
    // (who is about to click the retry button below it).
    ui.until(
        "the drawing laid out again beside the panel",
        "return document.querySelector('#graph svg') !== window.drawnBefore",
        20,
    )
    .await;
    assert_eq!(
        ui.js(RETRY_AT).await,
        retry_at,
        "the retry button stayed where it was on the screen"
    );

    // The failed element runs again (and fails again, within the budget).
    ui.until(
        "the retry button",
        "return !document.getElementById('retry-failed-elements').hidden",
        20,
    )
    .await;
    ui.click("#retry-failed-elements").await;
    ui.until(
        "web-2 tried twice",
        "const r = document.querySelector('#elements tr[data-element=web-2]'); return r && r.children[4].textContent === '2'",
        30,
    )
    .await;
    let request = ui.request(&id).await;
    assert_eq!(request["state"], 3, "COMPLETE again: {request}");
    let log = ui.request_log(&id).await;
    let pings: Vec<&str> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["name"] == "ping")
        .map(|entry| entry["stdout"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(pings.len(), 5, "web-2 ran twice, the others once");
    ui.close().await;
}
