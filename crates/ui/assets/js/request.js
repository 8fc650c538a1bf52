// A request's page, put together from its views: the header (request-header.js), the
// graph (request-graph.js), the job panel (request-job.js) and its live log
// (request-log.js), and the elements of its `each:` nodes (request-elements.js). This module holds what they share and the poll of the states.

import { api, banner, clear, FINISHED, h, main, me, poll, stateName, subject, setTitle, whoAmI, enc } from "./common.js";
import { graphView } from "./request-graph.js";
import { headerView } from "./request-header.js";
import { elementsView } from "./request-elements.js";
import { jobPanel } from "./request-job.js";

export function requestPage() {
  const id = subject;
  setTitle(`Request ${id}`);
  // What the views share: the request as last read, and what the viewer may do with it
  // (everything without authentication).
  const page = {
    id,
    request: null,
    may: { start: true, stop: true },
    refresh: () => refreshStates(),
    // Polls again from now (a retried request runs again).
    follow: () => {
      if (stopPoll) stopPoll();
      stopPoll = poll(1000, refreshStates);
    },
  };
  let mayKnown = false;
  let stopPoll = null;
  let statesInFlight = false;
  let statesAgain = false;
  let failing = null;

  const header = headerView(page);
  const graph = graphView(page, {
    onJob: (jobId) => {
      graph.select(jobId);
      job.open(jobId);
    },
    afterDraw: () => refreshStates(),
  });
  const layout = h("div", { class: "layout" }, graph.section);
  const job = jobPanel(page, layout, { onClose: () => graph.select(null, { focus: true }) });
  layout.append(job.panel);
  const elements = elementsView(page, {
    onJob: (jobId) => {
      graph.select(jobId, { page: false });
      job.open(jobId);
    },
  });
  main.append(...header.top, graph.failedBox, layout, elements.section, ...header.bottom);

  async function refreshStates() {
    // One call at a time; a call asked for meanwhile (a group opened) runs after it.
    if (statesInFlight) {
      statesAgain = true;
      return true;
    }
    statesInFlight = true;
    try {
      // The args once: they do not change, and a big request's are big.
      const data = await api("GET", `/ui/api/requests/${enc(id)}/states?${graph.viewQuery()}${header.hasArgs() ? "&args=0" : ""}`);
      if (failing) { failing.remove(); failing = null; }
      page.request = data.request;
      if (!mayKnown && me.auth) {
        mayKnown = true;
        const mine = await whoAmI(page.request.type);
        if (mine.may) page.may = mine.may;
      }
      header.render(page.request, data.counts, data.failure);
      graph.apply(data);
      elements.refresh(page.request);
      if (!performance.getEntriesByName("spindle:state-shown").length) performance.mark("spindle:state-shown");
      return !FINISHED.has(stateName(page.request.state));
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

  graph.load().then(() => {
    stopPoll = poll(1000, refreshStates);
  });
  return () => {
    graph.dispose();
    if (stopPoll) stopPoll();
  };
}
