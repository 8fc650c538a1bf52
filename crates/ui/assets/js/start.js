// The start form: a request type's args, checked as typed.

import { api, banner, clear, enc, h, main, me, s, setTitle, subject, valueText, whoAmI } from "./common.js";

// ---- the start form ----
export async function startPage() {
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
  // A default that is not a string is in DefaultValue (Default holds its JSON text for
  // Spin Cycle's clients).
  const dflt = (arg) => (arg.DefaultValue !== undefined ? arg.DefaultValue : arg.Default);
  const addField = (arg, required) => {
    // A secret arg (issue #33) is typed unseen, and never prefilled.
    const input = h("input", { type: arg.Secret ? "password" : "text", id: `arg-${arg.Name}`, name: arg.Name, required, autocomplete: arg.Secret ? "new-password" : "off",
      placeholder: required ? "" : (dflt(arg) === null || dflt(arg) === undefined ? "" : valueText(dflt(arg))),
      "aria-describedby": `hint-${arg.Name} err-${arg.Name}` });
    if (arg.Name in prefill && !arg.Secret) input.value = valueText(prefill[arg.Name]);
    const error = h("div", { class: "field-error", id: `err-${arg.Name}`, "aria-live": "polite" });
    const desc = arg.Desc && !/[.!?]$/.test(arg.Desc) ? `${arg.Desc}.` : arg.Desc;
    const hint = [desc, required ? "Required." : (dflt(arg) !== null && dflt(arg) !== undefined ? `Default: ${valueText(dflt(arg))}.` : "Optional."),
      "A list or an object is entered as JSON, such as [\"a\", \"b\"]."].filter(Boolean).join(" ");
    // A fleet's list, pasted (one value a line) or loaded from a file (lines or JSON):
    // too long for the one-line field (issue #50).
    const list = arg.Secret ? null : h("textarea", { id: `list-${arg.Name}`, rows: 6, spellcheck: "false",
      "aria-describedby": `err-${arg.Name}` });
    const file = arg.Secret ? null : h("input", { type: "file", id: `file-${arg.Name}`, accept: ".txt,.json,.csv,text/plain,application/json" });
    const listBox = arg.Secret ? null : h("details", { class: "list-arg" },
      h("summary", {}, "Or a list: one value a line, pasted or from a file"),
      h("label", { for: `list-${arg.Name}` }, `${arg.Name}, one value a line`), list,
      h("label", { for: `file-${arg.Name}` }, "Load a file (one value a line, or a JSON list)"), file);
    if (file) {
      file.addEventListener("change", async () => {
        const picked = file.files && file.files[0];
        if (!picked) return;
        list.value = await picked.text();
        listBox.open = true;
      });
    }
    const wrap = h("div", { class: "field", "data-arg": arg.Name },
      h("label", { for: input.id }, arg.Name, required ? h("span", { class: "muted" }, " (required)") : null),
      input, h("div", { class: "hint", id: `hint-${arg.Name}` }, hint), listBox, error);
    fields.set(arg.Name, { input, list, error, wrap, required });
    form.append(wrap);
  };
  if (byType("required").length) form.append(h("h2", {}, "Required args"));
  byType("required").forEach((a) => addField(a, true));
  if (byType("optional").length) form.append(h("h2", {}, "Optional args"));
  byType("optional").forEach((a) => addField(a, false));
  const statics = byType("static");
  if (statics.length) {
    form.append(h("h2", {}, "Fixed by the spec"), h("ul", {}, statics.map((a) => h("li", {}, h("span", { class: "mono" }, a.Name), ` = ${valueText(dflt(a))}`))));
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
      const listed = f.list ? f.list.value.trim() : "";
      if (listed) {
        if (f.input.value.trim()) {
          setError(name, "Give the value or the list, not both.");
          bad = bad || f.input;
          continue;
        }
        if (listed.startsWith("[") || listed.startsWith("{")) {
          try {
            args[name] = JSON.parse(listed);
          } catch (err) {
            setError(name, `The list is not valid JSON: ${err.message}`);
            bad = bad || f.list;
          }
        } else {
          args[name] = listed.split(/\r?\n/).map((line) => line.trim()).filter(Boolean);
        }
        continue;
      }
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
