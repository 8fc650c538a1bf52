// Spindle's pages. Everything shown is built with DOM calls and textContent: a value
// from the server or the viewer is never parsed as markup. Live pages poll the API
// while there is something to follow, and only while the tab is visible.
"use strict";

(() => {
  const STATES = ["UNKNOWN", "PENDING", "RUNNING", "COMPLETE", "FAIL", "RESERVED", "STOPPED", "SUSPENDED"];
  // Told apart without colour too: each state has its own mark.
  const MARK = { UNKNOWN: "?", PENDING: "○", RUNNING: "▶", COMPLETE: "✓", FAIL: "✗", RESERVED: "?", STOPPED: "■", SUSPENDED: "⏸" };
  const FINISHED = new Set(["COMPLETE", "FAIL", "STOPPED"]);
  const SVG = "http://www.w3.org/2000/svg";
  const body = document.body;
  const page = body.dataset.page;
  const subject = body.dataset.subject || "";
  const main = document.getElementById("main");

  const stateName = (s) => (typeof s === "number" ? STATES[s] || "UNKNOWN" : String(s));

  // ---- building DOM ----
  function h(tag, attrs, ...kids) {
    const node = document.createElement(tag);
    setAttrs(node, attrs);
    append(node, kids);
    return node;
  }
  function s(tag, attrs, ...kids) {
    const node = document.createElementNS(SVG, tag);
    setAttrs(node, attrs);
    append(node, kids);
    return node;
  }
  function setAttrs(node, attrs) {
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
  }
  function append(node, kids) {
    for (const kid of kids.flat()) {
      if (kid === undefined || kid === null || kid === false) continue;
      node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
  }
  function clear(node) {
    while (node.firstChild) node.firstChild.remove();
  }
  function badge(state, extra) {
    const name = stateName(state);
    return h("span", { class: `badge s-${name}`, "data-state": name }, `${MARK[name] || ""} ${name}${extra || ""}`);
  }
  // A time in the viewer's zone, UTC on hover.
  function time(value) {
    if (!value) return h("span", { class: "muted" }, "—");
    const date = new Date(value);
    if (Number.isNaN(date.getTime())) return h("span", {}, String(value));
    return h("time", { datetime: date.toISOString(), title: `UTC ${date.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z")}` },
      date.toLocaleString(undefined, { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" }));
  }
  function duration(ms) {
    if (ms === null || ms === undefined || ms < 0) return "—";
    if (ms < 1000) return `${Math.round(ms)} ms`;
    let secs = Math.round(ms / 100) / 10;
    if (secs < 60) return `${secs} s`;
    secs = Math.round(secs);
    const parts = [];
    const d = Math.floor(secs / 86400), hr = Math.floor((secs % 86400) / 3600), m = Math.floor((secs % 3600) / 60), sec = secs % 60;
    if (d) parts.push(`${d}d`);
    if (hr) parts.push(`${hr}h`);
    if (m) parts.push(`${m}m`);
    if (sec && !d) parts.push(`${sec}s`);
    return parts.join(" ");
  }
  function runtime(request) {
    if (!request.startedAt) return "—";
    const end = request.finishedAt ? new Date(request.finishedAt) : new Date();
    return duration(end - new Date(request.startedAt));
  }
  function valueText(value) {
    if (value === null || value === undefined) return "";
    return typeof value === "string" ? value : JSON.stringify(value);
  }
  function truncate(text, n) {
    return text.length > n ? `${text.slice(0, n - 1)}…` : text;
  }

  // ---- the API ----
  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }
  async function api(method, url, payload) {
    const init = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
    if (payload !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(payload);
    }
    let response;
    try {
      response = await fetch(url, init);
    } catch (err) {
      throw new ApiError(0, `the server did not answer (${err.message})`);
    }
    const text = await response.text();
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch (_) {
        data = text;
      }
    }
    if (!response.ok) {
      const message = data && typeof data === "object" && data.message ? data.message : `${response.status} ${response.statusText}`;
      // Not signed in (or no longer): to the sign-in page, then back here.
      if (response.status === 401 && page !== "sign-in") toSignIn();
      throw new ApiError(response.status, message);
    }
    return data;
  }
  function toSignIn() {
    location.assign(`/sign-in?next=${encodeURIComponent(location.pathname + location.search)}`);
  }

  // Who the viewer is (`auth: false`: the server does not authenticate).
  let me = { auth: false };
  async function whoAmI(requestType) {
    try {
      return await api("GET", `/ui/api/me${requestType ? `?type=${encodeURIComponent(requestType)}` : ""}`);
    } catch (_) {
      return { auth: false };
    }
  }
  function showWho() {
    const where = document.getElementById("who");
    if (!where || !me.auth) return;
    clear(where);
    if (me.signedIn) {
      const roles = me.roles && me.roles.length ? ` (${me.roles.join(", ")})` : "";
      where.append(h("span", { id: "signed-in-as" }, `${me.user}${roles}`));
      if (me.via === "token") {
        where.append(" ", h("button", { type: "button", id: "sign-out", onclick: async () => {
          try { await api("DELETE", "/ui/api/session"); } catch (_) { /* signed out anyway */ }
          location.assign("/sign-in");
        } }, "Sign out"));
      }
    } else if (page !== "sign-in") {
      where.append(h("a", { href: "/sign-in", id: "sign-in-link" }, "Sign in"));
    }
  }
  const enc = encodeURIComponent;

  // Runs `fn` now and every `ms` while the tab is visible, until it returns false.
  function poll(ms, fn) {
    let timer = null;
    let stopped = false;
    const tick = async () => {
      timer = null;
      if (stopped) return;
      if (document.hidden) {
        timer = setTimeout(tick, ms);
        return;
      }
      let again = true;
      try {
        again = (await fn()) !== false;
      } catch (err) {
        again = true;
      }
      if (again && !stopped) timer = setTimeout(tick, ms);
    };
    tick();
    return () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    };
  }
  function banner(where, message) {
    const node = h("div", { class: "banner", role: "alert" }, message);
    where.prepend(node);
    return node;
  }
  function setTitle(text) {
    document.getElementById("title").textContent = text;
    document.title = `${text} · Spindle`;
  }
  // A fault of the page itself is said on the page, not only in the console.
  const fault = (message) => {
    body.dataset.fault = message;
    banner(main, `This page hit an error: ${message}. Reloading may help; the API is unaffected.`);
  };
  window.addEventListener("error", (event) => fault(event.message));
  window.addEventListener("unhandledrejection", (event) => fault(String(event.reason && event.reason.message || event.reason)));
  for (const link of document.querySelectorAll("nav a[data-nav]")) {
    if (link.dataset.nav === page) link.setAttribute("aria-current", "page");
  }

  // ---- the request list ----
  function listPage() {
    const params = new URLSearchParams(location.search);
    const PAGE = 25;
    const counts = h("div", { class: "counts", "aria-label": "Requests by state" });
    const typeSelect = h("select", { id: "f-type", name: "type" }, h("option", { value: "" }, "any type"));
    const stateSelect = h("select", { id: "f-state", name: "state" }, h("option", { value: "" }, "any state"),
      STATES.filter((n) => n !== "RESERVED" && n !== "UNKNOWN").map((n) => h("option", { value: n }, n)));
    const user = h("input", { id: "f-user", name: "user", type: "text", size: 12 });
    const args = h("input", { id: "f-arg", name: "arg", type: "text", size: 22, placeholder: "name=value name=value" });
    const since = h("input", { id: "f-since", name: "since", type: "datetime-local", step: 1 });
    const until = h("input", { id: "f-until", name: "until", type: "datetime-local", step: 1 });
    const form = h("form", { class: "filters", role: "search", "aria-label": "Filter requests" },
      field("Type", typeSelect), field("State", stateSelect), field("User", user), field("Args", args),
      field("Created after", since), field("Created before", until),
      h("button", { type: "submit", class: "primary" }, "Filter"),
      h("button", { type: "button", onclick: () => { form.reset(); go(0); } }, "Clear"));
    function field(label, input) {
      return h("div", { class: "field" }, h("label", { for: input.id }, label), input);
    }
    const table = h("tbody", { id: "requests" });
    const status = h("p", { class: "muted", "aria-live": "polite" });
    const prev = h("button", { type: "button", onclick: () => go(Math.max(0, offset - PAGE)) }, "← Newer");
    const next = h("button", { type: "button", onclick: () => go(offset + PAGE) }, "Older →");
    const pageNo = h("span", { class: "muted" });
    // Several requests at once: the rows picked (kept across refreshes and pages) and
    // the actions on them, each asked of every request alone (its ACL, its audit entry).
    const picked = new Set();
    let shown = [];
    const pickPage = h("input", { type: "checkbox", id: "pick-page", "aria-label": "Pick every request on this page" });
    pickPage.addEventListener("change", () => {
      for (const id of shown) {
        if (pickPage.checked) picked.add(id);
        else picked.delete(id);
      }
      for (const box of table.querySelectorAll("input.pick")) box.checked = pickPage.checked;
      showPicked();
    });
    const pickedText = h("span", { id: "picked-count" });
    const bulkResult = h("p", { id: "bulk-result", "aria-live": "polite" });
    const bulkDialog = h("dialog", { id: "bulk-dialog", "aria-labelledby": "bulk-title" });
    body.append(bulkDialog);
    const ACTIONS = { stop: ["Stop", "stopped"], pause: ["Pause", "paused"], resume: ["Resume", "resumed"], retry: ["Retry", "retried"] };
    const bulkBar = h("div", { class: "actions bulk", id: "bulk", hidden: true }, pickedText,
      Object.entries(ACTIONS).map(([action, [label]]) =>
        h("button", { type: "button", class: action === "stop" ? "danger" : undefined, "data-action": action, onclick: () => confirmBulk(action) }, `${label}…`)),
      h("button", { type: "button", id: "pick-none", onclick: () => { picked.clear(); for (const box of table.querySelectorAll("input.pick")) box.checked = false; showPicked(); } }, "Pick none"));
    function showPicked() {
      bulkBar.hidden = picked.size === 0;
      pickedText.textContent = `${picked.size} picked`;
      pickPage.checked = shown.length > 0 && shown.every((id) => picked.has(id));
    }
    // What will be touched is shown first (the CLI's dry run); each is then asked alone.
    function confirmBulk(action) {
      const [label, done] = ACTIONS[action];
      const ids = [...picked];
      clear(bulkDialog);
      const go = h("button", { type: "button", class: action === "stop" ? "danger" : "primary", id: "bulk-confirm" }, `${label} ${ids.length}`);
      append(bulkDialog, [h("h2", { id: "bulk-title" }, `${label} ${ids.length} ${ids.length === 1 ? "request" : "requests"}?`),
        h("ul", { class: "mono" }, ids.map((id) => h("li", {}, id))),
        h("div", { class: "actions" }, h("button", { type: "button", onclick: () => bulkDialog.close() }, "Cancel"), go)]);
      go.addEventListener("click", async () => {
        go.disabled = true;
        const refused = [];
        for (const id of ids) {
          try {
            await api("PUT", `/api/v1/requests/${enc(id)}/${action}`);
            picked.delete(id);
          } catch (err) {
            refused.push(`${id}: ${err.message}`);
          }
        }
        bulkDialog.close();
        clear(bulkResult);
        append(bulkResult, [`${done[0].toUpperCase()}${done.slice(1)} ${ids.length - refused.length} of ${ids.length}.`,
          refused.length ? h("ul", { class: "refused" }, refused.map((r) => h("li", {}, `Refused ${r}`))) : null]);
        showPicked();
        refresh();
      });
      bulkDialog.showModal();
    }
    main.append(counts, form, bulkBar, bulkResult,
      h("div", { class: "table-wrap" }, h("table", {},
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, pickPage), ["Request", "Type", "State", "User", "Created", "Progress", "Runtime"].map((c, i) =>
          h("th", { scope: "col", class: i >= 5 ? "wide" : undefined }, c)))),
        table)),
      status, h("div", { class: "pager" }, prev, pageNo, next));

    let offset = Number(params.get("offset") || 0) || 0;
    const toLocal = (iso) => {
      const d = new Date(iso);
      if (Number.isNaN(d.getTime())) return "";
      const pad = (n) => String(n).padStart(2, "0");
      return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
    };
    stateSelect.value = params.get("state") || "";
    user.value = params.get("user") || "";
    args.value = params.getAll("arg").join(" ");
    if (params.get("since")) since.value = toLocal(params.get("since"));
    if (params.get("until")) until.value = toLocal(params.get("until"));
    const wantedType = params.get("type") || "";

    api("GET", "/api/v1/request-list").then((specs) => {
      for (const spec of specs || []) typeSelect.append(h("option", { value: spec.Name }, spec.Name));
      typeSelect.value = wantedType;
    }).catch(() => {});

    function query() {
      const q = new URLSearchParams();
      if (typeSelect.value || wantedType) q.set("type", typeSelect.value || (typeSelect.options.length > 1 ? "" : wantedType));
      if (!q.get("type")) q.delete("type");
      if (stateSelect.value) q.set("state", stateSelect.value);
      if (user.value.trim()) q.set("user", user.value.trim());
      for (const pair of args.value.split(/\s+/).filter(Boolean)) q.append("arg", pair);
      if (since.value) q.set("since", new Date(since.value).toISOString());
      if (until.value) q.set("until", new Date(until.value).toISOString());
      return q;
    }
    function go(to) {
      offset = to;
      const q = query();
      if (offset) q.set("offset", String(offset));
      history.replaceState(null, "", `/${q.toString() ? `?${q}` : ""}`);
      refresh();
    }
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      go(0);
    });
    let failing = null;
    async function refresh() {
      const q = query();
      q.set("limit", String(PAGE + 1));
      if (offset) q.set("offset", String(offset));
      let found;
      try {
        found = await api("GET", `/api/v1/requests?${q}`);
        if (failing) { failing.remove(); failing = null; }
      } catch (err) {
        if (!failing) failing = banner(main, err.message);
        else failing.textContent = err.message;
        return;
      }
      const rows = (found || []).slice(0, PAGE);
      clear(table);
      shown = rows.map((r) => r.id);
      for (const r of rows) {
        const pick = h("input", { type: "checkbox", class: "pick", "aria-label": `Pick ${r.id}` });
        pick.checked = picked.has(r.id);
        pick.addEventListener("change", () => {
          if (pick.checked) picked.add(r.id);
          else picked.delete(r.id);
          showPicked();
        });
        // The request's own jobs (ownJobs: not the grapher's wrappers) when known.
        const [done, all] = r.ownJobs ? [r.ownFinishedJobs || 0, r.ownJobs] : [r.finishedJobs, r.totalJobs];
        const progress = all ? `${done}/${all}` : "—";
        table.append(h("tr", { "data-id": r.id },
          h("td", {}, pick),
          h("td", { class: "mono" }, h("a", { href: `/requests/${enc(r.id)}` }, r.id)),
          h("td", {}, r.type),
          h("td", {}, badge(r.state, r.paused ? " ‖ paused" : "")),
          h("td", {}, r.user || h("span", { class: "muted" }, "—")),
          h("td", {}, time(r.createdAt)),
          h("td", { class: "wide" }, progress),
          h("td", { class: "wide" }, runtime(r))));
      }
      status.textContent = rows.length ? "" : "No requests match.";
      prev.disabled = offset === 0;
      next.disabled = (found || []).length <= PAGE;
      pageNo.textContent = rows.length ? `${offset + 1}–${offset + rows.length}` : "";
      showPicked();
      try {
        const byState = await api("GET", "/ui/api/counts");
        clear(counts);
        for (const [name, n] of Object.entries(byState)) {
          if (!n && name !== "RUNNING" && name !== "PENDING") continue;
          const link = h("a", { class: `badge s-${name}`, href: `/?state=${name}`, "data-count": name }, `${MARK[name]} ${name} ${n}`);
          link.addEventListener("click", (event) => {
            event.preventDefault();
            stateSelect.value = name;
            go(0);
          });
          counts.append(link);
        }
      } catch (_) { /* the list still shows */ }
    }
    poll(2000, refresh);
  }

  // ---- a request ----
  function requestPage() {
    const id = subject;
    setTitle(`Request ${id}`);
    const header = h("div", { class: "request-head" });
    const summary = h("dl", { class: "summary" });
    const actions = h("div", { class: "actions" });
    const argsBox = h("div", { class: "table-wrap" });
    const failedBox = h("div", { id: "failed" });
    const legend = h("div", { class: "legend", "aria-hidden": "true" },
      ["PENDING", "RUNNING", "COMPLETE", "FAIL", "STOPPED"].map((n) => badge(n)));
    const graphWrap = h("div", { class: "graph-wrap", id: "graph" });
    const panel = h("aside", { class: "panel", id: "job-panel", hidden: true, "aria-live": "polite", "aria-label": "Job" });
    const layout = h("div", { class: "layout" }, h("section", { "aria-label": "Job chain" }, h("h2", {}, "Job chain"), legend, graphWrap), panel);
    summary.classList.add("facts");
    const historyBox = h("div", { id: "history" });
    main.append(header, actions, summary, failedBox, layout, argsBox, historyBox);

    const toggles = { open: new Set(), closed: new Set() };
    let drawing = null;
    const jobNodes = new Map();
    const groupNodes = new Map();
    let request = null;
    let selected = null;
    let stopPoll = null;
    let statesInFlight = false;
    let statesAgain = false;
    // What the viewer may do with this request (everything without authentication).
    let may = { start: true, stop: true };
    let mayKnown = false;
    let lastState = null;
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
    let argsShown = false;
    let failing = null;

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
        refreshStates();
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
        refreshStates();
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
        if (stopPoll) stopPoll();
        stopPoll = poll(1000, refreshStates);
      } catch (err) {
        banner(main, `Retrying failed: ${err.message}`);
      } finally {
        retryButton.disabled = false;
      }
    } }, "Retry");
    const pauseButton = h("button", { type: "button", id: "pause", title: "Running jobs finish; nothing new starts until it is resumed", onclick: () => setPaused(true) }, "Pause");
    const resumeButton = h("button", { type: "button", id: "resume", onclick: () => setPaused(false) }, "Resume");

    // `counts`: the request's own jobs by state (not the grapher's wrappers, which the
    // request's totalJobs and finishedJobs count), when the page has them.
    function renderRequest(r, counts) {
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
          ? row("Waiting", h("span", { class: "waiting", id: "failure" }, r.error))
          : row("Failure", h("span", { class: "error", id: "failure" }, r.error))) : null,
        r.jrURL ? row("Job Runner", h("span", { class: "mono" }, r.jrURL)) : null,
        r.specVersion ? row("Specs", h("a", { class: "mono", id: "spec-version", href: `/api/v1/requests/${enc(r.id)}/spec`, title: "The spec files this request was built from" }, r.specVersion)) : null,
      ].filter(Boolean));
      clear(actions);
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
      if (!argsShown) {
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
    }

    function viewQuery() {
      const q = new URLSearchParams();
      if (toggles.open.size) q.set("open", [...toggles.open].join(","));
      if (toggles.closed.size) q.set("closed", [...toggles.closed].join(","));
      return q.toString();
    }
    // The room the drawing has, less a scroll bar and its margin: a fan-out taller than
    // the frame is wrapped into rows that fit it.
    function frameSize() {
      const width = graphWrap.clientWidth - 24;
      const height = Math.round(window.innerHeight * 0.75) - 24;
      return { width: Math.max(160, width), height: Math.max(160, height) };
    }
    let drawnFor = null;
    function toggle(groupId, isOpen) {
      if (isOpen) {
        toggles.open.delete(groupId);
        toggles.closed.add(groupId);
      } else {
        toggles.closed.delete(groupId);
        toggles.open.add(groupId);
      }
      loadGraph(groupId);
    }
    function activate(node, fn) {
      node.setAttribute("tabindex", "0");
      node.setAttribute("role", "button");
      node.addEventListener("click", fn);
      node.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          fn();
        }
      });
    }
    function countsText(counts) {
      const order = ["COMPLETE", "RUNNING", "FAIL", "STOPPED", "PENDING", "UNKNOWN", "SUSPENDED"];
      const parts = order.filter((n) => counts && counts[n]).map((n) => `${MARK[n]}${counts[n]}`);
      return parts.join("  ") || "…";
    }
    function countsLabel(counts) {
      return Object.entries(counts || {}).map(([n, c]) => `${c} ${n}`).join(", ");
    }

    async function loadGraph(focusGroup) {
      let data;
      try {
        const frame = frameSize();
        drawnFor = frame;
        data = await api("GET", `/ui/api/requests/${enc(id)}/graph?${viewQuery()}&width=${frame.width}&height=${frame.height}`);
      } catch (err) {
        clear(graphWrap);
        graphWrap.append(h("p", { class: "error" }, `The chain cannot be drawn: ${err.message}`));
        return;
      }
      drawing = data;
      drawGraph(focusGroup);
      await refreshStates();
    }

    function drawGraph(focusGroup) {
      jobNodes.clear();
      groupNodes.clear();
      const pad = 4;
      const svg = s("svg", { class: "chain", width: drawing.width + pad * 2, height: drawing.height + pad * 2, viewBox: `${-pad} ${-pad} ${drawing.width + pad * 2} ${drawing.height + pad * 2}`, role: "group", "aria-label": "The request's job chain" });
      svg.append(s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 8 8", refX: 8, refY: 4, markerWidth: 7, markerHeight: 7, orient: "auto" }, s("path", { d: "M0,0 L8,4 L0,8 z", class: "arrowhead" }))));
      const groupsLayer = s("g", {});
      const edgeLayer = s("g", { "aria-hidden": "true" });
      const nodeLayer = s("g", {});
      svg.append(groupsLayer, edgeLayer, nodeLayer);
      for (const [x1, y1, x2, y2] of drawing.edges) {
        const dx = Math.max(12, (x2 - x1) / 2);
        edgeLayer.append(s("path", { class: "edge", d: `M${x1},${y1} C${x1 + dx},${y1} ${x2 - dx},${y2} ${x2},${y2}`, "marker-end": "url(#arrow)" }));
      }
      for (const node of drawing.nodes) {
        if (node.kind === "group" && node.open) {
          const g = s("g", { class: `grp open ${node.group} d-${node.depth % 2 ? "odd" : "even"}`, "data-group": node.id },
            s("rect", { x: node.x, y: node.y, width: node.w, height: node.h, rx: 8 }));
          const head = s("g", { class: "head", "aria-expanded": "true", "aria-label": `${node.label}: ${node.jobs} ${node.jobs === 1 ? "job" : "jobs"}, open; press to close` },
            s("rect", { x: node.x, y: node.y, width: node.w, height: 24, rx: 8 }),
            s("text", { x: node.x + 10, y: node.y + 17 }, `▾ ${truncate(node.label, Math.max(8, Math.floor(node.w / 7.5) - 12))}`, s("tspan", { class: "muted", dx: 6 }, `${node.jobs} ${node.jobs === 1 ? "job" : "jobs"}`)));
          activate(head, () => toggle(node.id, true));
          g.append(head);
          groupsLayer.append(g);
          groupNodes.set(node.id, { node, g, head });
        } else if (node.kind === "group") {
          // A fan-out's iteration is a small tile; other groups have room for more.
          const tile = node.h < 50;
          const countsNode = s("text", { x: node.x + 10, y: node.y + (tile ? 29 : 42), class: "counts-text" }, "…");
          const titleNode = s("title", {}, node.label);
          const g = s("g", { class: `grp closed ${node.group}${tile ? " tile" : ""}`, "data-group": node.id, "aria-expanded": "false" }, titleNode,
            s("rect", { x: node.x, y: node.y, width: node.w, height: node.h, rx: tile ? 6 : 8 }),
            s("text", { x: node.x + 10, y: node.y + (tile ? 14 : 20) }, `▸ ${truncate(node.label, Math.floor((node.w - 24) / 7))}`),
            countsNode);
          activate(g, () => toggle(node.id, false));
          nodeLayer.append(g);
          groupNodes.set(node.id, { node, g, countsNode, titleNode });
        } else if (node.kind === "more") {
          const countsNode = s("text", { x: node.x + 10, y: node.y + 42, class: "counts-text" }, "…");
          const g = s("g", { class: "more", "data-group": node.id }, s("title", {}, `${node.items} more not drawn`),
            s("rect", { x: node.x, y: node.y, width: node.w, height: node.h, rx: 8 }),
            s("text", { x: node.x + 10, y: node.y + 20 }, `+${node.items} more`), countsNode);
          nodeLayer.append(g);
          groupNodes.set(node.id, { node, g, countsNode, titleNode: g.firstChild });
        } else if (node.wrapper) {
          const titleNode = s("title", {}, node.label);
          const g = s("g", { class: "job wrapper s-PENDING", "data-job": node.id }, titleNode,
            s("circle", { cx: node.x + node.w / 2, cy: node.y + node.h / 2, r: node.w / 2 }));
          activate(g, () => openJob(node.id));
          g.setAttribute("aria-label", node.label);
          nodeLayer.append(g);
          jobNodes.set(node.id, { node, g, titleNode });
        } else {
          const titleNode = s("title", {}, `${node.label} (${node.type})`);
          const mark = s("text", { x: node.x + 8, y: node.y + 17, class: "mark" }, MARK.PENDING);
          const g = s("g", { class: "job s-PENDING", "data-job": node.id }, titleNode,
            s("rect", { x: node.x, y: node.y, width: node.w, height: node.h, rx: 5 }),
            mark,
            s("text", { x: node.x + 24, y: node.y + 17 }, truncate(node.label, 20)),
            s("text", { x: node.x + 24, y: node.y + 32, class: "type" }, truncate(node.type, 24)));
          activate(g, () => openJob(node.id));
          nodeLayer.append(g);
          jobNodes.set(node.id, { node, g, mark, titleNode });
        }
      }
      clear(graphWrap);
      graphWrap.append(svg);
      if (!performance.getEntriesByName("spindle:graph-drawn").length) performance.mark("spindle:graph-drawn");
      if (selected && jobNodes.has(selected)) jobNodes.get(selected).g.classList.add("selected");
      if (focusGroup && groupNodes.has(focusGroup)) {
        const found = groupNodes.get(focusGroup);
        (found.head || found.g).focus();
      }
    }

    function applyStates(data) {
      for (const [jobId, now] of Object.entries(data.jobs || {})) {
        const found = jobNodes.get(jobId);
        if (!found) continue;
        const name = stateName(now.state);
        const cls = `s-${name}`;
        if (!found.g.classList.contains(cls)) {
          for (const c of [...found.g.classList]) if (c.startsWith("s-")) found.g.classList.remove(c);
          found.g.classList.add(cls);
        }
        found.g.dataset.state = name;
        const tries = now.tries > 1 ? `, try ${now.tries}` : "";
        const status = now.status ? ` — ${now.status}` : "";
        const label = found.node.wrapper ? `${found.node.label}: ${name}` : `${found.node.label} (${found.node.type}): ${name}${tries}${status}`;
        found.g.setAttribute("aria-label", label);
        found.titleNode.textContent = label;
        if (found.mark) found.mark.textContent = MARK[name] || "?";
      }
      for (const [groupId, counts] of Object.entries(data.groups || {})) {
        const found = groupNodes.get(groupId);
        if (!found) continue;
        // Coloured by the worst state inside, open or closed.
        const worst = ["FAIL", "RUNNING", "STOPPED", "PENDING", "COMPLETE"].find((n) => counts[n]);
        found.g.dataset.state = worst || "";
        if (!found.countsNode) continue;
        found.countsNode.textContent = countsText(counts);
        const label = `${found.node.label || `${found.node.items} more`}: ${countsLabel(counts)}${found.node.kind === "group" ? "; press to open" : ""}`;
        found.g.setAttribute("aria-label", label);
        found.titleNode.textContent = label;
      }
      clear(failedBox);
      if (data.failed && data.failed.length) {
        const more = data.failedTotal > data.failed.length ? ` (first ${data.failed.length} of ${data.failedTotal})` : "";
        failedBox.append(h("h2", {}, `Failed jobs${more}`), h("ul", { class: "failed-list" }, data.failed.map((f) =>
          h("li", {}, h("button", { type: "button", onclick: () => revealJob(f) }, f.each ? `${f.name} [${f.each}]` : f.name), ` after ${f.tries} ${f.tries === 1 ? "try" : "tries"}`))));
      }
    }

    // Opens the groups a job is in, then the job.
    function revealJob(failed) {
      let changed = false;
      for (const g of failed.groups || []) {
        if (!toggles.open.has(g)) {
          toggles.open.add(g);
          toggles.closed.delete(g);
          changed = true;
        }
      }
      // The panel first, so that the drawing is laid out for the room beside it.
      openJob(failed.id);
      const show = () => {
        // Into view, inside the drawing's scroll box and the page.
        const node = jobNodes.get(failed.id);
        if (node) node.g.scrollIntoView({ block: "center", inline: "center" });
      };
      if (changed) loadGraph().then(show);
      else show();
    }

    async function refreshStates() {
      // One call at a time; a call asked for meanwhile (a group opened) runs after it.
      if (statesInFlight) {
        statesAgain = true;
        return true;
      }
      statesInFlight = true;
      try {
        // The args once: they do not change, and a big request's are big.
        const data = await api("GET", `/ui/api/requests/${enc(id)}/states?${viewQuery()}${argsShown ? "&args=0" : ""}`);
        if (failing) { failing.remove(); failing = null; }
        request = data.request;
        if (!mayKnown && me.auth) {
          mayKnown = true;
          const mine = await whoAmI(request.type);
          if (mine.may) may = mine.may;
        }
        renderRequest(request, data.counts);
        if (drawing) applyStates(data);
        if (!performance.getEntriesByName("spindle:state-shown").length) performance.mark("spindle:state-shown");
        return !FINISHED.has(stateName(request.state));
      } catch (err) {
        if (err.status === 404) {
          clear(main);
          main.append(h("h1", {}, "Request not found"), h("p", { class: "error" }, err.message), h("p", {}, h("a", { href: "/" }, "All requests")));
          return false;
        }
        if (!failing) failing = banner(main, err.message);
        else failing.textContent = err.message;
        return true;
      } finally {
        statesInFlight = false;
        if (statesAgain) {
          statesAgain = false;
          refreshStates();
        }
      }
    }

    // ---- one job's tries and live output ----
    let jobPoll = null;
    async function openJob(jobId) {
      if (jobPoll) jobPoll();
      if (selected && jobNodes.has(selected)) jobNodes.get(selected).g.classList.remove("selected");
      selected = jobId;
      if (jobNodes.has(jobId)) jobNodes.get(jobId).g.classList.add("selected");
      layout.classList.add("with-panel");
      panel.hidden = false;
      clear(panel);
      panel.append(h("p", { class: "muted" }, "Loading…"));
      let following = null;
      jobPoll = poll(1500, async () => {
        let job;
        try {
          job = await api("GET", `/ui/api/requests/${enc(id)}/jobs/${enc(jobId)}`);
        } catch (err) {
          clear(panel);
          panel.append(h("p", { class: "error" }, err.message));
          return false;
        }
        if (selected !== jobId) return false;
        const runningTry = job.running ? job.running.try : null;
        if (following && following.try !== runningTry) {
          following.stop();
          following = null;
        }
        renderJob(job, following);
        if (runningTry && !following) following = follow(jobId, runningTry);
        return Boolean(runningTry) || stateName(job.state) === "RUNNING" || !FINISHED.has(stateName(request && request.state));
      });
    }
    function renderJob(job, following) {
      const keep = following ? following.node : null;
      clear(panel);
      const close = h("button", { type: "button", id: "close-job", onclick: () => { if (jobPoll) jobPoll(); panel.hidden = true; layout.classList.remove("with-panel"); if (selected && jobNodes.has(selected)) { jobNodes.get(selected).g.classList.remove("selected"); jobNodes.get(selected).g.focus(); } selected = null; } }, "Close");
      const each = Object.keys(job.each || {}).length ? Object.entries(job.each).map(([k, v]) => `${k}=${valueText(v)}`).join(", ") : "";
      panel.append(h("div", { class: "actions" }, h("h2", { id: "job-name" }, each ? `${job.name} [${each}]` : job.name), close),
        h("dl", { class: "summary" },
          h("dt", {}, "State"), h("dd", {}, badge(job.state)),
          h("dt", {}, "Type"), h("dd", {}, job.type),
          h("dt", {}, "Job id"), h("dd", { class: "mono" }, job.id),
          each ? [h("dt", {}, "Each"), h("dd", { class: "mono" }, each)] : null,
          h("dt", {}, "Retries"), h("dd", {}, `${job.retry}${job.retry ? `, wait ${job.retryWait || "0s"}` : ""}`)));
      if (job.running) {
        const started = job.running.startedAt ? new Date(job.running.startedAt / 1e6) : null;
        panel.append(h("div", { class: "try running-try", "data-try": job.running.try },
          h("h3", {}, `Try ${job.running.try} `, badge("RUNNING")),
          started ? h("p", {}, "Started ", time(started.toISOString())) : null,
          job.running.status ? h("p", {}, `Status: ${job.running.status}`) : null,
          h("p", { class: "muted" }, "Output, live:"),
          keep || h("pre", { class: "out live-output", id: "live-output" })));
      }
      // An approval that waits: answer it here (the API checks who may).
      if (job.type === "approval" && job.running && may.start) {
        const answerIt = (approved) => async (event) => {
          event.target.disabled = true;
          try {
            await api("PUT", `/api/v1/requests/${enc(id)}/${approved ? "approve" : "reject"}?job=${enc(job.id)}`);
          } catch (err) {
            banner(main, `${approved ? "Approving" : "Rejecting"} failed: ${err.message}`);
            event.target.disabled = false;
          }
        };
        panel.append(h("div", { class: "actions", id: "approval" },
          h("button", { type: "button", id: "approve", onclick: answerIt(true) }, "Approve"),
          h("button", { type: "button", class: "danger", id: "reject", onclick: answerIt(false) }, "Reject")));
      }
      if (!job.tries.length && !job.running) panel.append(h("p", { class: "muted" }, "No try yet."));
      for (const t of [...job.tries].reverse()) {
        panel.append(h("div", { class: "try", "data-try": t.try },
          h("h3", {}, `Try ${t.try} `, badge(t.state)),
          h("dl", { class: "summary" },
            h("dt", {}, "Exit"), h("dd", {}, String(t.exit)),
            t.error ? [h("dt", {}, "Error"), h("dd", { class: "error try-error" }, t.error)] : null,
            h("dt", {}, "Started"), h("dd", {}, time(t.startedAt ? new Date(t.startedAt / 1e6).toISOString() : null)),
            h("dt", {}, "Finished"), h("dd", {}, time(t.finishedAt ? new Date(t.finishedAt / 1e6).toISOString() : null)),
            h("dt", {}, "Took"), h("dd", {}, duration((t.finishedAt - t.startedAt) / 1e6))),
          h("p", { class: "muted" }, "stdout"), h("pre", { class: "out stdout" }, t.stdout || ""),
          h("p", { class: "muted" }, "stderr"), h("pre", { class: "out stderr" }, t.stderr || "")));
      }
    }
    // Follows one try's output from the output endpoint's cursor.
    function follow(jobId, tryNo) {
      const node = h("pre", { class: "out live-output", id: "live-output" });
      const live = panel.querySelector("#live-output");
      if (live) live.replaceWith(node);
      let after = 0;
      const stop = poll(500, async () => {
        const page = await api("GET", `/api/v1/requests/${enc(id)}/output?job=${enc(jobId)}&try=${tryNo}&after=${after}`);
        for (const chunk of page.chunks || []) {
          const line = chunk.stream === "stderr" ? h("span", { class: "stderr" }, chunk.data) : document.createTextNode(chunk.data);
          node.append(line);
        }
        if ((page.chunks || []).length) node.scrollTop = node.scrollHeight;
        after = page.next;
        return !(FINISHED.has(stateName(page.state)) && !(page.chunks || []).length);
      });
      return { try: tryNo, node, stop };
    }

    // The frame resized (the window, or the job panel opened or closed): the drawing is
    // laid out again when it no longer fits, or when a wrapped fan-out has more room.
    let resizing = null;
    const onResize = () => {
      clearTimeout(resizing);
      resizing = setTimeout(() => {
        if (!drawing || !drawnFor) return;
        const frame = frameSize();
        const overflows = drawing.width > frame.width + 1 && frame.width < drawnFor.width;
        const roomier = drawing.wrapped && (frame.width - drawnFor.width > 60 || Math.abs(frame.height - drawnFor.height) > 60);
        if (overflows || roomier) {
          loadGraph().then(() => {
            if (selected && jobNodes.has(selected)) jobNodes.get(selected).g.scrollIntoView({ block: "nearest", inline: "nearest" });
          });
        }
      }, 150);
    };
    const frameWatch = new ResizeObserver(onResize);
    frameWatch.observe(graphWrap);
    window.addEventListener("resize", onResize);
    loadGraph().then(() => {
      stopPoll = poll(1000, refreshStates);
    });
    return () => {
      window.removeEventListener("resize", onResize);
      frameWatch.disconnect();
      if (stopPoll) stopPoll();
    };
  }

  // ---- the start form ----
  async function startPage() {
    let specs;
    try {
      specs = await api("GET", "/api/v1/request-list");
    } catch (err) {
      banner(main, err.message);
      return;
    }
    if (!subject) {
      setTitle("Start a request");
      main.append(h("ul", { id: "request-types" }, (specs || []).map((spec) =>
        h("li", {}, h("a", { href: `/start/${enc(spec.Name)}` }, spec.Name), ` — ${(spec.Args || []).filter((a) => a.Type === "required").length} required args`))));
      return;
    }
    const spec = (specs || []).find((x) => x.Name === subject);
    setTitle(`Start ${subject}`);
    if (!spec) {
      main.append(h("p", { class: "error" }, `There is no request type ${subject}.`), h("p", {}, h("a", { href: "/start" }, "Request types")));
      return;
    }
    if (me.auth) {
      const mine = await whoAmI(subject);
      if (mine.may && !mine.may.start) {
        main.append(h("p", { class: "error", id: "not-allowed" }, `You (${mine.user}) may not start ${subject} requests.`));
        return;
      }
    }
    const params = new URLSearchParams(location.search);
    let prefill = {};
    if (params.get("args")) {
      try { prefill = JSON.parse(params.get("args")) || {}; } catch (_) { prefill = {}; }
    }
    for (const [key, value] of params) if (key !== "args" && !(key in prefill)) prefill[key] = value;

    const topError = h("div", { id: "form-error", role: "alert" });
    const fields = new Map();
    const form = h("form", { class: "form", id: "start-form", novalidate: true });
    const byType = (t) => (spec.Args || []).filter((a) => a.Type === t);
    const addField = (arg, required) => {
      const input = h("input", { type: "text", id: `arg-${arg.Name}`, name: arg.Name, required, autocomplete: "off",
        placeholder: required ? "" : (arg.Default === null || arg.Default === undefined ? "" : valueText(arg.Default)),
        "aria-describedby": `hint-${arg.Name} err-${arg.Name}` });
      if (arg.Name in prefill) input.value = valueText(prefill[arg.Name]);
      const error = h("div", { class: "field-error", id: `err-${arg.Name}`, "aria-live": "polite" });
      const desc = arg.Desc && !/[.!?]$/.test(arg.Desc) ? `${arg.Desc}.` : arg.Desc;
      const hint = [desc, required ? "Required." : (arg.Default !== null && arg.Default !== undefined ? `Default: ${valueText(arg.Default)}.` : "Optional."),
        "A list or an object is entered as JSON, such as [\"a\", \"b\"]."].filter(Boolean).join(" ");
      const wrap = h("div", { class: "field", "data-arg": arg.Name },
        h("label", { for: input.id }, arg.Name, required ? h("span", { class: "muted" }, " (required)") : null),
        input, h("div", { class: "hint", id: `hint-${arg.Name}` }, hint), error);
      fields.set(arg.Name, { input, error, wrap, required });
      form.append(wrap);
    };
    if (byType("required").length) form.append(h("h2", {}, "Required args"));
    byType("required").forEach((a) => addField(a, true));
    if (byType("optional").length) form.append(h("h2", {}, "Optional args"));
    byType("optional").forEach((a) => addField(a, false));
    const statics = byType("static");
    if (statics.length) {
      form.append(h("h2", {}, "Fixed by the spec"), h("ul", {}, statics.map((a) => h("li", {}, h("span", { class: "mono" }, a.Name), ` = ${valueText(a.Default)}`))));
    }
    const userInput = h("input", { type: "text", id: "start-user", autocomplete: "username", value: localStorage.getItem("spindle.user") || "" });
    // With authentication the server records who is signed in; the name is not asked.
    if (!me.auth) form.append(h("div", { class: "field" }, h("label", { for: "start-user" }, "Your name"), userInput, h("div", { class: "hint" }, "Recorded as the request's caller.")));
    const submit = h("button", { type: "submit", class: "primary", id: "start-submit" }, `Start ${subject}`);
    form.append(h("div", { class: "actions" }, submit));
    main.append(topError, form);

    function setError(name, message) {
      const f = fields.get(name);
      f.error.textContent = message;
      f.wrap.classList.toggle("invalid", Boolean(message));
      if (message) f.input.setAttribute("aria-invalid", "true");
      else f.input.removeAttribute("aria-invalid");
    }
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      clear(topError);
      const args = {};
      let bad = null;
      for (const [name, f] of fields) {
        setError(name, "");
        const text = f.input.value.trim();
        if (!text) {
          if (f.required) {
            setError(name, "Required: give a value.");
            bad = bad || f.input;
          }
          continue;
        }
        if (text.startsWith("[") || text.startsWith("{")) {
          try {
            args[name] = JSON.parse(text);
          } catch (err) {
            setError(name, `Not valid JSON: ${err.message}`);
            bad = bad || f.input;
            continue;
          }
        } else {
          args[name] = f.input.value;
        }
      }
      if (bad) {
        bad.focus();
        return;
      }
      localStorage.setItem("spindle.user", userInput.value.trim());
      submit.disabled = true;
      try {
        const created = await api("POST", "/api/v1/requests", { type: subject, args, user: userInput.value.trim() });
        location.assign(`/requests/${enc(created.id)}`);
      } catch (err) {
        submit.disabled = false;
        // The grapher names each arg it objects to in backquotes: show each beside it.
        const listed = err.message.match(/^invalid args for request `[^`]*`: (.*?)(; it takes: .*)?$/s);
        const problems = listed ? listed[1].split("; ") : [err.message];
        const rest = [];
        let first = null;
        for (const problem of problems) {
          // An arg named in backquotes, else the arg whose value the problem quotes.
          const named = [...problem.matchAll(/`([^`]+)`/g)].map((m) => m[1]).find((n) => fields.has(n))
            || [...fields.keys()].find((n) => {
              const given = fields.get(n).input.value.trim();
              return given.length >= 2 && problem.includes(given);
            });
          if (named) {
            setError(named, problem);
            first = first || fields.get(named).input;
          } else {
            rest.push(problem);
          }
        }
        if (rest.length || !first) topError.append(h("div", { class: "banner" }, first ? rest.join("; ") : err.message));
        (first || submit).focus();
      }
    });
    const firstInput = form.querySelector("input");
    if (firstInput) firstInput.focus();
  }

  // ---- Job Runners ----
  function runnersPage() {
    const table = h("tbody", { id: "runners" });
    const status = h("p", { class: "muted", "aria-live": "polite" });
    main.append(h("div", { class: "table-wrap" }, h("table", {},
      h("thead", {}, h("tr", {}, ["Instance", "State", "URL", "Host", "Started", "Renewed", "Running"].map((c) => h("th", { scope: "col" }, c)))),
      table)), status);
    let failing = null;
    poll(3000, async () => {
      let runners;
      try {
        runners = await api("GET", "/api/v1/job-runners");
        if (failing) { failing.remove(); failing = null; }
      } catch (err) {
        if (!failing) failing = banner(main, err.message);
        return true;
      }
      clear(table);
      for (const r of runners || []) {
        table.append(h("tr", {},
          h("td", { class: "mono" }, r.instanceId),
          h("td", {}, h("span", { class: `badge ${r.state === "live" ? "s-COMPLETE" : r.state === "lost" ? "s-FAIL" : "s-PENDING"}` }, r.state)),
          h("td", { class: "mono" }, r.url),
          h("td", {}, `${r.host || ""}${r.pid ? ` (pid ${r.pid})` : ""}`),
          h("td", {}, time(r.startedAt)),
          h("td", {}, time(r.renewedAt)),
          h("td", {}, String(r.runningRequests || 0))));
      }
      status.textContent = (runners || []).length ? "" : "No Job Runner has registered.";
      return true;
    });
  }

  // ---- schedules ----
  function schedulesPage() {
    const table = h("tbody", { id: "schedules" });
    const status = h("p", { class: "muted", "aria-live": "polite" });
    main.append(h("div", { class: "table-wrap" }, h("table", {},
      h("thead", {}, h("tr", {}, ["Name", "Cron", "Time zone", "Request", "Args", "Overlap", "Missed", "Next", "Last"].map((c) => h("th", { scope: "col" }, c)))),
      table)), status);
    let failing = null;
    poll(5000, async () => {
      let schedules;
      try {
        schedules = await api("GET", "/api/v1/schedules");
        if (failing) { failing.remove(); failing = null; }
      } catch (err) {
        if (!failing) failing = banner(main, err.message);
        return true;
      }
      clear(table);
      for (const s of schedules || []) {
        const last = s.last;
        const lastCell = !last ? h("span", { class: "muted" }, "never")
          : last.requestId ? h("span", {}, time(last.dueAt), " ", h("a", { class: "mono", href: `/requests/${enc(last.requestId)}` }, last.requestId))
          : h("span", {}, time(last.dueAt), last.skipped ? ` skipped: ${last.skipped}` : " starting");
        table.append(h("tr", { "data-name": s.name },
          h("td", { class: "mono" }, s.name),
          h("td", { class: "mono" }, s.cron),
          h("td", {}, s.timezone),
          h("td", {}, h("a", { href: `/start/${enc(s.request)}` }, s.request)),
          h("td", { class: "mono" }, Object.entries(s.args || {}).map(([k, v]) => `${k}=${valueText(v)}`).join(" ")),
          h("td", {}, s.overlap),
          h("td", {}, s.missed),
          h("td", {}, s.next ? time(s.next) : "never"),
          h("td", {}, lastCell)));
      }
      status.textContent = (schedules || []).length ? "" : "The specs have no schedules.";
      return true;
    });
  }

  // ---- signing in ----
  function signInPage() {
    if (!me.auth) {
      main.append(h("p", {}, "This server does not authenticate: there is nothing to sign in to. ", h("a", { href: "/" }, "Requests")));
      return;
    }
    const next = new URLSearchParams(location.search).get("next") || "/";
    const safeNext = next.startsWith("/") && !next.startsWith("//") ? next : "/";
    const error = h("div", { id: "sign-in-error", role: "alert" });
    const token = h("input", { type: "password", id: "token", autocomplete: "current-password", required: true, spellcheck: "false" });
    const form = h("form", { class: "form", id: "sign-in-form" },
      h("div", { class: "field" }, h("label", { for: "token" }, "API token"), token,
        h("div", { class: "hint" }, "A token made by `spindle token create`. It is kept in a cookie that scripts cannot read.")),
      h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "sign-in" }, "Sign in")));
    if (me.signedIn) main.append(h("p", {}, `You are signed in as ${me.user}.`));
    main.append(error, form);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      clear(error);
      try {
        await api("POST", "/ui/api/session", { token: token.value });
        location.assign(safeNext);
      } catch (err) {
        error.append(h("div", { class: "banner" }, err.message));
        token.focus();
      }
    });
    token.focus();
  }

  const pages = { list: listPage, request: requestPage, start: startPage, runners: runnersPage, schedules: schedulesPage, "sign-in": signInPage };
  whoAmI().then((found) => {
    me = found;
    showWho();
    if (me.auth && !me.signedIn && page !== "sign-in") {
      toSignIn();
      return;
    }
    if (pages[page]) pages[page]();
  });
})();
