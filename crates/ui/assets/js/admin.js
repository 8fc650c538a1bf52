// Job Runners, schedules and signing in.

import { api, badge, banner, clear, enc, h, main, me, poll, s, time, valueText } from "./common.js";

// ---- Job Runners ----
export function runnersPage() {
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
export function schedulesPage() {
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
export function signInPage() {
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
  // Single sign-on: off to the identity provider, and back to `next`.
  if (me.oidc) {
    main.append(h("p", { class: "actions" }, h("a", { class: "button primary", id: "sign-in-sso",
      href: `/ui/oidc/login?next=${encodeURIComponent(safeNext)}` }, "Sign in with single sign-on")));
  }
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
