// The request list (/): requests by state, type and caller, polled while the tab is visible.

import { api, append, badge, banner, body, clear, enc, h, main, MARK, page, poll, runtime, s, STATES, time } from "./common.js";

// ---- the request list ----
export function listPage() {
  const params = new URLSearchParams(location.search);
  const PAGE = 25;
  // The server counts each state up to this (views.rs, COUNTED_UP_TO); one more is "more".
  const COUNTED_UP_TO = 10000;
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
    h("button", { type: "button", onclick: () => { form.reset(); go("", 0); } }, "Clear"));
  function field(label, input) {
    return h("div", { class: "field" }, h("label", { for: input.id }, label), input);
  }
  const table = h("tbody", { id: "requests" });
  const status = h("p", { class: "muted", "aria-live": "polite" });
  // Pages by cursor (the API's after=): Older goes on after the page's last row; Newer
  // goes back to the cursor the page before had (or, in a page opened from an address,
  // to the first page).
  const prev = h("button", { type: "button", onclick: () => {
    const back = trail.pop();
    go(back ? back.after : "", back ? back.offset : 0, false);
  } }, "← Newer");
  const next = h("button", { type: "button", onclick: () => {
    trail.push({ after, offset });
    go(nextAfter, offset === null ? null : offset + PAGE, false);
  } }, "Older →");
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

  // Where the page begins (the cursor of the page before's last row; "" for the first),
  // how many rows come before it when known, the pages before it, and the next's cursor.
  let after = params.get("after") || "";
  let offset = after ? null : 0;
  let trail = [];
  let nextAfter = "";
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
  // A page's cursor as the API names it: its created time in microseconds and its id.
  function cursorOf(r) {
    const m = /^(.*?)(?:\.(\d+))?Z$/.exec(r.createdAt || "");
    if (!m) return "";
    const micros = Date.parse(`${m[1]}Z`) * 1000 + Number(`${m[2] || ""}000000`.slice(0, 6));
    return `${micros}.${r.id}`;
  }
  function go(to, rowsBefore, fresh = true) {
    if (fresh) trail = [];
    after = to;
    offset = rowsBefore;
    const q = query();
    if (after) q.set("after", after);
    history.replaceState(null, "", `/${q.toString() ? `?${q}` : ""}`);
    refresh();
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    go("", 0);
  });
  let failing = null;
  async function refresh() {
    const q = query();
    q.set("limit", String(PAGE + 1));
    if (after) q.set("after", after);
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
    prev.disabled = !after;
    nextAfter = rows.length ? cursorOf(rows[rows.length - 1]) : "";
    next.disabled = (found || []).length <= PAGE || !nextAfter;
    pageNo.textContent = !rows.length ? "" : offset === null ? "older" : `${offset + 1}–${offset + rows.length}`;
    showPicked();
    try {
      const byState = await api("GET", "/ui/api/counts");
      clear(counts);
      for (const [name, n] of Object.entries(byState)) {
        if (!n && name !== "RUNNING" && name !== "PENDING") continue;
        const link = h("a", { class: `badge s-${name}`, href: `/?state=${name}`, "data-count": name }, `${MARK[name]} ${name} ${n > COUNTED_UP_TO ? `${COUNTED_UP_TO.toLocaleString("en")}+` : n}`);
        link.addEventListener("click", (event) => {
          event.preventDefault();
          stateSelect.value = name;
          go("", 0);
        });
        counts.append(link);
      }
    } catch (_) { /* the list still shows */ }
  }
  poll(2000, refresh);
}
