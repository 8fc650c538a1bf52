// Spindle's pages: native ES modules, served as they are (no build step). This one holds
// what every page shares: the DOM and API helpers, the viewer (`me`), and the page's own
// fault reporting; each page is a module of its own (list.js, request.js, start.js,
// admin.js), and main.js draws the one the shell names.
//
// Everything shown is built with DOM calls and textContent: a value from the server or
// the viewer is never parsed as markup. Live pages poll the API while there is
// something to follow, and only while the tab is visible.

export const STATES = ["UNKNOWN", "PENDING", "RUNNING", "COMPLETE", "FAIL", "RESERVED", "STOPPED", "SUSPENDED"];
// Told apart without colour too: each state has its own mark.
export const MARK = { UNKNOWN: "?", PENDING: "○", RUNNING: "▶", COMPLETE: "✓", FAIL: "✗", RESERVED: "?", STOPPED: "■", SUSPENDED: "⏸" };
export const FINISHED = new Set(["COMPLETE", "FAIL", "STOPPED"]);
export const SVG = "http://www.w3.org/2000/svg";
export const body = document.body;
export const page = body.dataset.page;
export const subject = body.dataset.subject || "";
export const main = document.getElementById("main");

export const stateName = (s) => (typeof s === "number" ? STATES[s] || "UNKNOWN" : String(s));

// ---- building DOM ----
export function h(tag, attrs, ...kids) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  append(node, kids);
  return node;
}
export function s(tag, attrs, ...kids) {
  const node = document.createElementNS(SVG, tag);
  setAttrs(node, attrs);
  append(node, kids);
  return node;
}
export function setAttrs(node, attrs) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
}
export function append(node, kids) {
  for (const kid of kids.flat()) {
    if (kid === undefined || kid === null || kid === false) continue;
    node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
}
export function clear(node) {
  while (node.firstChild) node.firstChild.remove();
}
export function badge(state, extra) {
  const name = stateName(state);
  return h("span", { class: `badge s-${name}`, "data-state": name }, `${MARK[name] || ""} ${name}${extra || ""}`);
}
// A time in the viewer's zone, UTC on hover.
export function time(value) {
  if (!value) return h("span", { class: "muted" }, "—");
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return h("span", {}, String(value));
  return h("time", { datetime: date.toISOString(), title: `UTC ${date.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z")}` },
    date.toLocaleString(undefined, { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" }));
}
export function duration(ms) {
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
export function runtime(request) {
  if (!request.startedAt) return "—";
  const end = request.finishedAt ? new Date(request.finishedAt) : new Date();
  return duration(end - new Date(request.startedAt));
}
export function valueText(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}
export function truncate(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

// ---- the API ----
class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}
export async function api(method, url, payload) {
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
export function toSignIn() {
  location.assign(`/sign-in?next=${encodeURIComponent(location.pathname + location.search)}`);
}

// Who the viewer is (`auth: false`: the server does not authenticate).
export let me = { auth: false };
// Who is viewing, once asked (main.js): modules read `me`, only this one assigns it.
export function setMe(found) {
  me = found;
}
export async function whoAmI(requestType) {
  try {
    return await api("GET", `/ui/api/me${requestType ? `?type=${encodeURIComponent(requestType)}` : ""}`);
  } catch (_) {
    return { auth: false };
  }
}
export function showWho() {
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
export const enc = encodeURIComponent;

// Runs `fn` now and every `ms` while the tab is visible, until it returns false.
export function poll(ms, fn) {
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
export function banner(where, message) {
  const node = h("div", { class: "banner", role: "alert" }, message);
  where.prepend(node);
  return node;
}
export function setTitle(text) {
  document.getElementById("title").textContent = text;
  document.title = `${text} · Spindle`;
}
// A fault of the page itself is said on the page, not only in the console.
export const fault = (message) => {
  body.dataset.fault = message;
  banner(main, `This page hit an error: ${message}. Reloading may help; the API is unaffected.`);
};
window.addEventListener("error", (event) => fault(event.message));
window.addEventListener("unhandledrejection", (event) => fault(String(event.reason && event.reason.message || event.reason)));
for (const link of document.querySelectorAll("nav a[data-nav]")) {
  if (link.dataset.nav === page) link.setAttribute("aria-current", "page");
}
