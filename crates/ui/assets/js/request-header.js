// The request page's header view: the request's state and facts, its actions (stop,
// pause, resume, retry, start again), its args and its history.

import { api, append, badge, banner, body, clear, enc, h, main, runtime, stateName, time, valueText } from "./common.js";

// `page`: the request page's shared state (its id, what the viewer may do) and its
// refresh and polling, which the actions call.
export function headerView(page) {
  const { id } = page;
  const header = h("div", { class: "request-head" });
  const summary = h("dl", { class: "summary facts" });
  const actions = h("div", { class: "actions" });
  const argsBox = h("div", { class: "table-wrap" });
  const historyBox = h("div", { id: "history" });
  let lastState = null;
  let argsShown = false;

  async function loadHistory() {
    let trail;
    try {
      trail = await api("GET", `/api/v1/requests/${enc(id)}/audit`);
    } catch (_) {
      return;
    }
    clear(historyBox);
    if (!trail || !trail.length) return;
    historyBox.append(h("h2", {}, "History"), h("ul", { class: "history" }, trail.map((e) =>
      h("li", { "data-action": e.action }, time(e.at), ` ${e.action} by ${e.user || "(unnamed)"}`, e.address ? ` from ${e.address}` : ""))));
  }

  const dialog = h("dialog", { id: "stop-dialog", "aria-labelledby": "stop-title" });
  const confirmStop = h("button", { type: "button", class: "danger", id: "stop-confirm" }, "Stop it");
  append(dialog, [h("h2", { id: "stop-title" }, "Stop this request?"),
    h("p", {}, "Running jobs are stopped and nothing more of it runs. This cannot be undone."),
    h("div", { class: "actions" }, h("button", { type: "button", onclick: () => dialog.close() }, "Cancel"), confirmStop)]);
  body.append(dialog);
  const stopButton = h("button", { type: "button", class: "danger", id: "stop", onclick: () => dialog.showModal() }, "Stop…");
  confirmStop.addEventListener("click", async () => {
    confirmStop.disabled = true;
    try {
      await api("PUT", `/api/v1/requests/${enc(id)}/stop`);
      dialog.close();
      page.refresh();
    } catch (err) {
      dialog.close();
      banner(main, `Stopping failed: ${err.message}`);
    } finally {
      confirmStop.disabled = false;
    }
  });
  const again = h("a", { class: "button", id: "start-again" }, "Start again with these args");
  // Pause lets running jobs finish and starts nothing new; resume goes on.
  async function setPaused(paused) {
    const button = paused ? pauseButton : resumeButton;
    button.disabled = true;
    try {
      await api("PUT", `/api/v1/requests/${enc(id)}/${paused ? "pause" : "resume"}`);
      page.refresh();
    } catch (err) {
      banner(main, `${paused ? "Pausing" : "Resuming"} failed: ${err.message}`);
    } finally {
      button.disabled = false;
    }
  }
  // Retry runs a FAIL or STOPPED request again as the same request; the page follows it.
  const retryButton = h("button", { type: "button", id: "retry", title: "Run it again: completed jobs stay complete, the others run again", onclick: async () => {
    retryButton.disabled = true;
    try {
      await api("PUT", `/api/v1/requests/${enc(id)}/retry`);
      page.follow();
    } catch (err) {
      banner(main, `Retrying failed: ${err.message}`);
    } finally {
      retryButton.disabled = false;
    }
  } }, "Retry");
  const pauseButton = h("button", { type: "button", id: "pause", title: "Running jobs finish; nothing new starts until it is resumed", onclick: () => setPaused(true) }, "Pause");
  const resumeButton = h("button", { type: "button", id: "resume", onclick: () => setPaused(false) }, "Resume");

  function renderArgs(r) {
    argsShown = true;
    const given = {};
    for (const arg of r.args || []) if (arg.Type !== "static" && arg.Given !== false) given[arg.Name] = arg.Value;
    again.setAttribute("href", `/start/${enc(r.type)}?args=${enc(JSON.stringify(given))}`);
    const rows = (r.args || []).map((arg) => h("tr", {},
      h("td", { class: "mono" }, arg.Name), h("td", {}, arg.Type || ""), h("td", { class: "mono arg-value" }, valueText(arg.Value))));
    clear(argsBox);
    if (rows.length) {
      argsBox.append(h("h2", {}, "Args"), h("table", { id: "args" }, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Name"), h("th", { scope: "col" }, "Kind"), h("th", { scope: "col" }, "Value"))), h("tbody", {}, rows)));
    }
  }

  // `counts`: the request's own jobs by state (not the grapher's wrappers, which the
  // request's totalJobs and finishedJobs count), when the page has them.
  function render(r, counts, failureLine) {
    const state = stateName(r.state);
    const total = counts ? Object.values(counts).reduce((a, b) => a + b, 0) : r.ownJobs || r.totalJobs || 0;
    const done = counts ? counts.COMPLETE || 0 : r.ownJobs ? r.ownFinishedJobs || 0 : r.finishedJobs || 0;
    clear(header);
    header.append(badge(state));
    if (r.paused) header.append(" ", h("span", { class: "badge paused", id: "paused" }, "‖ paused"));
    header.dataset.state = state;
    header.dataset.paused = r.paused ? "true" : "false";
    const pct = total ? Math.round((100 * done) / total) : 0;
    const bar = h("span", { class: "progress", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": total, "aria-valuenow": done }, h("span", {}));
    bar.firstChild.style.width = `${pct}%`;
    clear(summary);
    const row = (label, ...value) => h("div", {}, h("dt", {}, label), h("dd", {}, ...value));
    // A reason spans the whole row rather than wrap in one narrow column.
    const wide = (div) => { div.classList.add("wide"); return div; };
    append(summary, [
      row("Type", r.type),
      row("State", h("span", { id: "state" }, state), r.paused ? " (paused: nothing new starts until it is resumed)" : ""),
      row("Progress", bar, ` ${done} of ${total} ${total === 1 ? "job" : "jobs"} (${pct}%)`),
      row("Caller", r.user || h("span", { class: "muted" }, "—")),
      row("Created", time(r.createdAt)),
      row("Started", time(r.startedAt)),
      row("Finished", time(r.finishedAt)),
      row("Runtime", runtime(r)),
      // Why it waits (a lock, a runner) is not an error; why it failed is.
      r.error ? (state === "PENDING" || state === "SUSPENDED"
        ? wide(row("Waiting", h("span", { class: "waiting", id: "failure" }, r.error)))
        : wide(row("Failure", h("span", { class: "error", id: "failure" }, r.error))))
        // A failed job's reason, when the request's own error has none.
        : state === "FAIL" && failureLine ? wide(row("Failure", h("span", { class: "error", id: "failure" }, failureLine))) : null,
      r.jrURL ? row("Job Runner", h("span", { class: "mono" }, r.jrURL)) : null,
      r.specVersion ? row("Specs", h("a", { class: "mono", id: "spec-version", href: `/api/v1/requests/${enc(r.id)}/spec`, title: "The spec files this request was built from" }, r.specVersion)) : null,
    ].filter(Boolean));
    clear(actions);
    const { may } = page;
    if ((state === "RUNNING" || state === "PENDING" || state === "SUSPENDED") && may.stop) {
      actions.append(r.paused ? resumeButton : pauseButton, stopButton);
    }
    if ((state === "FAIL" || state === "STOPPED") && may.start) actions.append(retryButton);
    if (may.start) actions.append(again);
    // The history changes with the state, and with a pause or resume.
    const course = `${state}${r.paused ? " paused" : ""}`;
    if (lastState !== course) {
      lastState = course;
      loadHistory();
    }
    if (!argsShown) renderArgs(r);
  }

  return {
    top: [header, actions, summary],
    bottom: [argsBox, historyBox],
    render,
    // Whether the args are shown (they do not change: the page asks for them once).
    hasArgs: () => argsShown,
  };
}
