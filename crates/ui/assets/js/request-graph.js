// The request page's graph view: the job chain drawn (sequences as groups that open and
// close), each job's and group's state laid over it, and the list of failed jobs.

import { api, badge, clear, enc, h, MARK, s, stateName, truncate } from "./common.js";

// `page.id`: the request; `onJob(jobId)`: a job was chosen; `afterDraw()`: a drawing was
// loaded (the page then fetches the states to lay over it).
export function graphView(page, { onJob, afterDraw }) {
  const { id } = page;
  const toggles = { open: new Set(), closed: new Set() };
  const jobNodes = new Map();
  const groupNodes = new Map();
  let drawing = null;
  let drawnFor = null;
  let selected = null;
  // Whether the page follows the selected job when the drawing is laid out again.
  let pageFollows = true;

  const failedBox = h("div", { id: "failed" });
  const legend = h("div", { class: "legend", "aria-hidden": "true" },
    ["PENDING", "RUNNING", "COMPLETE", "FAIL", "STOPPED"].map((n) => badge(n)));
  const graphWrap = h("div", { class: "graph-wrap", id: "graph" });
  const section = h("section", { "aria-label": "Job chain" }, h("h2", {}, "Job chain"), legend, graphWrap);

  // What the server draws: the groups opened and closed by hand.
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
  function toggle(groupId, isOpen) {
    if (isOpen) {
      toggles.open.delete(groupId);
      toggles.closed.add(groupId);
    } else {
      toggles.closed.delete(groupId);
      toggles.open.add(groupId);
    }
    load(groupId);
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

  async function load(focusGroup) {
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
    draw(focusGroup);
    await afterDraw();
  }

  function drawGroup(node, groupsLayer, nodeLayer) {
    if (node.open) {
      const g = s("g", { class: `grp open ${node.group} d-${node.depth % 2 ? "odd" : "even"}`, "data-group": node.id },
        s("rect", { x: node.x, y: node.y, width: node.w, height: node.h, rx: 8 }));
      const head = s("g", { class: "head", "aria-expanded": "true", "aria-label": `${node.label}: ${node.jobs} ${node.jobs === 1 ? "job" : "jobs"}, open; press to close` },
        s("rect", { x: node.x, y: node.y, width: node.w, height: 24, rx: 8 }),
        s("text", { x: node.x + 10, y: node.y + 17 }, `▾ ${truncate(node.label, Math.max(8, Math.floor(node.w / 7.5) - 12))}`, s("tspan", { class: "muted", dx: 6 }, `${node.jobs} ${node.jobs === 1 ? "job" : "jobs"}`)));
      activate(head, () => toggle(node.id, true));
      g.append(head);
      groupsLayer.append(g);
      groupNodes.set(node.id, { node, g, head });
      return;
    }
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
  }

  function drawJob(node, nodeLayer) {
    if (node.wrapper) {
      const titleNode = s("title", {}, node.label);
      const g = s("g", { class: "job wrapper s-PENDING", "data-job": node.id }, titleNode,
        s("circle", { cx: node.x + node.w / 2, cy: node.y + node.h / 2, r: node.w / 2 }));
      activate(g, () => onJob(node.id));
      g.setAttribute("aria-label", node.label);
      nodeLayer.append(g);
      jobNodes.set(node.id, { node, g, titleNode });
      return;
    }
    const titleNode = s("title", {}, `${node.label} (${node.type})`);
    const mark = s("text", { x: node.x + 8, y: node.y + 17, class: "mark" }, MARK.PENDING);
    const g = s("g", { class: "job s-PENDING", "data-job": node.id }, titleNode,
      s("rect", { x: node.x, y: node.y, width: node.w, height: node.h, rx: 5 }),
      mark,
      s("text", { x: node.x + 24, y: node.y + 17 }, truncate(node.label, 20)),
      s("text", { x: node.x + 24, y: node.y + 32, class: "type" }, truncate(node.type, 24)));
    activate(g, () => onJob(node.id));
    nodeLayer.append(g);
    jobNodes.set(node.id, { node, g, mark, titleNode });
  }

  function draw(focusGroup) {
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
      if (node.kind === "group") {
        drawGroup(node, groupsLayer, nodeLayer);
      } else if (node.kind === "more") {
        const countsNode = s("text", { x: node.x + 10, y: node.y + 42, class: "counts-text" }, "…");
        const g = s("g", { class: "more", "data-group": node.id }, s("title", {}, `${node.items} more not drawn`),
          s("rect", { x: node.x, y: node.y, width: node.w, height: node.h, rx: 8 }),
          s("text", { x: node.x + 10, y: node.y + 20 }, `+${node.items} more`), countsNode);
        nodeLayer.append(g);
        groupNodes.set(node.id, { node, g, countsNode, titleNode: g.firstChild });
      } else {
        drawJob(node, nodeLayer);
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

  // The states of `data` (the page's poll) laid over the drawing.
  function apply(data) {
    if (!drawing) return;
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
        h("li", {}, h("button", { type: "button", onclick: () => reveal(f) }, f.each ? `${f.name} [${f.each}]` : f.name), ` after ${f.tries} ${f.tries === 1 ? "try" : "tries"}`))));
    }
  }

  // Opens the groups a failed job is in, then the job.
  function reveal(failed) {
    let changed = false;
    for (const g of failed.groups || []) {
      if (!toggles.open.has(g)) {
        toggles.open.add(g);
        toggles.closed.delete(g);
        changed = true;
      }
    }
    // The panel first, so that the drawing is laid out for the room beside it.
    onJob(failed.id);
    const show = () => {
      // Into view, inside the drawing's scroll box and the page.
      const node = jobNodes.get(failed.id);
      if (node) node.g.scrollIntoView({ block: "center", inline: "center" });
    };
    if (changed) load().then(show);
    else show();
  }

  // The job shown in the panel is marked (`null`: none); `focus` gives it the focus back.
  // `page: false`: the job was picked from outside the drawing (the elements table
  // below it), and a drawing laid out again does not scroll the page back up to it.
  function select(jobId, { focus = false, page = true } = {}) {
    if (selected && jobNodes.has(selected)) jobNodes.get(selected).g.classList.remove("selected");
    if (!jobId && focus && selected && jobNodes.has(selected)) jobNodes.get(selected).g.focus();
    selected = jobId;
    pageFollows = page;
    if (jobId && jobNodes.has(jobId)) jobNodes.get(jobId).g.classList.add("selected");
  }

  // Scrolls the drawing's own box, never the page, the least that brings `g` into it:
  // a drawing laid out again keeps its selected job in sight without moving the page
  // under a viewer who picked it from below (and may be about to click something there).
  function revealInBox(g) {
    const box = graphWrap.getBoundingClientRect();
    const r = g.getBoundingClientRect();
    if (r.left < box.left) graphWrap.scrollLeft -= box.left - r.left;
    else if (r.right > box.right) graphWrap.scrollLeft += Math.min(r.right - box.right, r.left - box.left);
    if (r.top < box.top) graphWrap.scrollTop -= box.top - r.top;
    else if (r.bottom > box.bottom) graphWrap.scrollTop += Math.min(r.bottom - box.bottom, r.top - box.top);
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
        load().then(() => {
          if (!selected || !jobNodes.has(selected)) return;
          const g = jobNodes.get(selected).g;
          if (pageFollows) g.scrollIntoView({ block: "nearest", inline: "nearest" });
          else revealInBox(g);
        });
      }
    }, 150);
  };
  const frameWatch = new ResizeObserver(onResize);
  frameWatch.observe(graphWrap);
  window.addEventListener("resize", onResize);

  return {
    failedBox,
    section,
    load,
    apply,
    select,
    // The query of the groups opened and closed, for the states' poll.
    viewQuery,
    dispose() {
      window.removeEventListener("resize", onResize);
      frameWatch.disconnect();
    },
  };
}
