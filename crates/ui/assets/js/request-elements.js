// The request page's elements view (issue #50): every element of the request's `each:`
// nodes in a table — its node, name, wave, state, tries and runtime — sortable by each
// column, filtered by state; a row's name opens its job (with its tries and output) in
// the job panel. A finished request with failed elements has a button that runs them
// again. Hidden for a request that expands no node.

import { api, badge, banner, clear, duration, enc, FINISHED, h, main, stateName } from "./common.js";

// Rows drawn at most (a fleet of 100,000 hosts is filtered or sorted, not scrolled).
const SHOWN = 500;
// The elements are read again at most this often while the request runs (ms).
const EVERY = 3000;

const COLUMNS = [
  ["node", "Node"],
  ["name", "Element"],
  ["wave", "Wave"],
  ["state", "State"],
  ["tries", "Tries"],
  ["runtime", "Runtime"],
];

function ran(e) {
  if (!e.startedAt) return -1;
  const end = e.finishedAt || Date.now() * 1e6;
  return (end - e.startedAt) / 1e6;
}

function key(e, column) {
  switch (column) {
    case "state": return stateName(e.state);
    case "runtime": return ran(e);
    case "wave": return e.wave || 0;
    case "tries": return e.tries || 0;
    default: return e[column] || "";
  }
}

// `page`: the request page's shared state; `onJob(jobId)`: a row's job to open.
export function elementsView(page, { onJob }) {
  const { id } = page;
  const section = h("section", { id: "elements", hidden: true, "aria-labelledby": "elements-title" });
  const summary = h("p", { id: "elements-summary" });
  const filter = h("select", { id: "elements-state", "aria-label": "Show elements in state" },
    [["", "All states"], ["failed", "Failed"], ["running", "Running"], ["complete", "Complete"], ["pending", "Pending"], ["stopped", "Stopped"]]
      .map(([value, label]) => h("option", { value }, label)));
  const retry = h("button", { type: "button", id: "retry-failed-elements", hidden: true, title: "Run the failed elements again; the completed ones stay completed" }, "Retry failed elements");
  const rows = h("tbody", {});
  const heads = COLUMNS.map(([column, label]) => {
    const button = h("button", { type: "button", class: "sort", "data-column": column }, label);
    return h("th", { scope: "col", "data-column": column }, button);
  });
  const more = h("p", { class: "muted", id: "elements-more", hidden: true });
  section.append(
    h("h2", { id: "elements-title" }, "Elements"),
    summary,
    h("div", { class: "actions" }, filter, retry),
    h("div", { class: "table-wrap" }, h("table", { class: "elements" }, h("thead", {}, h("tr", {}, heads)), rows)),
    more,
  );
  let elements = [];
  let sortBy = "node";
  let ascending = true;
  let readAt = 0;
  let known = false;
  // The finish (state and time) the elements were last read after: a request that
  // finishes again (its failed elements retried) is read again, however soon.
  let readAfter = null;
  // Reads are numbered: one that answers after a later read was asked for is dropped.
  let asked = 0;

  for (const th of heads) {
    th.querySelector("button").addEventListener("click", () => {
      const column = th.dataset.column;
      if (sortBy === column) ascending = !ascending;
      else { sortBy = column; ascending = true; }
      draw();
    });
  }
  filter.addEventListener("change", draw);
  retry.addEventListener("click", async () => {
    retry.disabled = true;
    try {
      await api("PUT", `/api/v1/requests/${enc(id)}/retry?failedElements=true`);
      readAt = 0;
      readAfter = null;
      page.follow();
    } catch (err) {
      banner(main, `Retrying the failed elements failed: ${err.message}`);
    } finally {
      retry.disabled = false;
    }
  });

  function draw() {
    const wanted = filter.value;
    const shownState = { failed: "FAIL", running: "RUNNING", complete: "COMPLETE", pending: "PENDING", stopped: "STOPPED" }[wanted];
    const picked = elements.filter((e) => !shownState || stateName(e.state) === shownState);
    // Stable: the server's order (node, wave, as listed) breaks ties.
    const order = picked.map((e, i) => [e, i]);
    order.sort(([a, i], [b, j]) => {
      const x = key(a, sortBy), y = key(b, sortBy);
      const c = x < y ? -1 : x > y ? 1 : i - j;
      return ascending ? c : -c;
    });
    for (const th of heads) {
      th.setAttribute("aria-sort", th.dataset.column === sortBy ? (ascending ? "ascending" : "descending") : "none");
    }
    clear(rows);
    for (const [e] of order.slice(0, SHOWN)) {
      rows.append(h("tr", { "data-element": e.name, "data-state": stateName(e.state) },
        h("td", {}, e.node),
        h("th", { scope: "row" }, h("button", { type: "button", class: "link", onclick: () => onJob(e.job) }, e.name)),
        h("td", {}, e.wave ? String(e.wave) : ""),
        h("td", {}, badge(e.state)),
        h("td", {}, String(e.tries || 0)),
        h("td", {}, duration(ran(e) < 0 ? null : ran(e)))));
    }
    more.hidden = order.length <= SHOWN;
    more.textContent = `Showing ${SHOWN} of ${order.length}: filter by state or sort to see others.`;
  }

  // Reads the elements again (at most every few seconds while the request runs).
  async function refresh(request) {
    const finished = FINISHED.has(stateName(request.state));
    const finish = finished ? `${request.state}@${request.finishedAt}` : null;
    if (known && elements.length === 0) return;
    if (finished ? finish === readAfter : Date.now() - readAt < EVERY) return;
    readAt = Date.now();
    const read = ++asked;
    let answer;
    try {
      answer = await api("GET", `/api/v1/requests/${enc(id)}/elements`);
    } catch (_) {
      return;
    }
    if (read !== asked) return;
    elements = answer;
    readAfter = finish;
    known = true;
    section.hidden = elements.length === 0;
    const lines = (request.elements || []).map((s) => describe(s));
    summary.textContent = lines.join(" · ");
    const failed = elements.some((e) => stateName(e.state) === "FAIL");
    retry.hidden = !(finished && failed && page.may.start);
    draw();
  }

  return { section, refresh };
}

// As `spindle status` says it: "each-host: 2 of 40 elements failed (budget 4): web-07, web-31".
function describe(s) {
  const budget = s.maxFailures !== undefined ? ` (budget ${s.maxFailures})` : "";
  if (!s.failed) {
    return `${s.node}: ${s.complete || 0} of ${s.count} elements complete${s.running ? `, ${s.running} running` : ""}${budget}`;
  }
  const named = s.failedElements || [];
  const more = s.failed > named.length ? ` and ${s.failed - named.length} more` : "";
  return `${s.node}: ${s.failed} of ${s.count} elements failed${budget}: ${named.join(", ")}${more}`;
}
