// A request's page: its header, graph, jobs, log and output.

import { api, append, badge, banner, body, clear, duration, enc, FINISHED, h, main, MARK, me, page, poll, runtime, s, setTitle, stateName, subject, time, truncate, valueText, whoAmI } from "./common.js";

// ---- a request ----
export function requestPage() {
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
  function renderRequest(r, counts, failureLine) {
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
      renderRequest(request, data.counts, data.failure);
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
