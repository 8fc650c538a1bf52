// The request page's log view: one running try's output, live, from the output
// endpoint's cursor.

import { api, enc, FINISHED, h, poll, stateName } from "./common.js";

// Follows try `tryNo` of job `jobId` of request `id` into a new `<pre>`, which takes the
// place of `#live-output` in `panel`; `stop()` ends it.
export function followOutput(id, panel, jobId, tryNo) {
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
