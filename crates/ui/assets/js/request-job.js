// The request page's job panel: one job's facts and tries, its running try's output
// live (the log view), and an approval's answer.

import { api, badge, banner, clear, duration, enc, FINISHED, h, main, poll, stateName, time, valueText } from "./common.js";
import { followOutput } from "./request-log.js";

// `page`: the request page's shared state (its id, the request as last read, what the
// viewer may do); `layout`: what holds the drawing and the panel; `onClose()`: the panel
// was closed.
export function jobPanel(page, layout, { onClose }) {
  const { id } = page;
  const panel = h("aside", { class: "panel", id: "job-panel", hidden: true, "aria-live": "polite", "aria-label": "Job" });
  let jobPoll = null;
  let shown = null;

  function close() {
    if (jobPoll) jobPoll();
    panel.hidden = true;
    layout.classList.remove("with-panel");
    shown = null;
    onClose();
  }

  function open(jobId) {
    if (jobPoll) jobPoll();
    shown = jobId;
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
      if (shown !== jobId) return false;
      const runningTry = job.running ? job.running.try : null;
      if (following && following.try !== runningTry) {
        following.stop();
        following = null;
      }
      render(job, following);
      if (runningTry && !following) following = followOutput(id, panel, jobId, runningTry);
      return Boolean(runningTry) || stateName(job.state) === "RUNNING" || !FINISHED.has(stateName(page.request && page.request.state));
    });
  }

  function renderRunning(job, keep) {
    const started = job.running.startedAt ? new Date(job.running.startedAt / 1e6) : null;
    panel.append(h("div", { class: "try running-try", "data-try": job.running.try },
      h("h3", {}, `Try ${job.running.try} `, badge("RUNNING")),
      started ? h("p", {}, "Started ", time(started.toISOString())) : null,
      job.running.status ? h("p", {}, `Status: ${job.running.status}`) : null,
      h("p", { class: "muted" }, "Output, live:"),
      keep || h("pre", { class: "out live-output", id: "live-output" })));
  }

  // An approval that waits: answer it here (the API checks who may).
  function renderApproval(job) {
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

  function renderTry(t) {
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

  function render(job, following) {
    const keep = following ? following.node : null;
    clear(panel);
    const closeButton = h("button", { type: "button", id: "close-job", onclick: close }, "Close");
    const each = Object.keys(job.each || {}).length ? Object.entries(job.each).map(([k, v]) => `${k}=${valueText(v)}`).join(", ") : "";
    panel.append(h("div", { class: "actions" }, h("h2", { id: "job-name" }, each ? `${job.name} [${each}]` : job.name), closeButton),
      h("dl", { class: "summary" },
        h("dt", {}, "State"), h("dd", {}, badge(job.state)),
        h("dt", {}, "Type"), h("dd", {}, job.type),
        h("dt", {}, "Job id"), h("dd", { class: "mono" }, job.id),
        each ? [h("dt", {}, "Each"), h("dd", { class: "mono" }, each)] : null,
        h("dt", {}, "Retries"), h("dd", {}, `${job.retry}${job.retry ? `, wait ${job.retryWait || "0s"}` : ""}`)));
    if (job.running) renderRunning(job, keep);
    if (job.type === "approval" && job.running && page.may.start) renderApproval(job);
    if (!job.tries.length && !job.running) panel.append(h("p", { class: "muted" }, "No try yet."));
    for (const t of [...job.tries].reverse()) renderTry(t);
  }

  return { panel, open };
}
