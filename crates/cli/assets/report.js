// Renders the report from the inlined DATA document (see `ddscope report`).
(function () {
  "use strict";
  const D = window.DDSCOPE_REPORT;
  const C = window.DDSCharts;
  const el = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    return e;
  };
  const num = (v, d) => (v === null || v === undefined || Number.isNaN(v) ? "" : (+v).toFixed(d === undefined ? 3 : d));
  const main = document.querySelector("main");
  const nodes = (sm) => (sm.sender_nodes.length || sm.receiver_nodes.length ? " (" + (sm.sender_nodes.join(", ") || "?") + " → " + (sm.receiver_nodes.join(", ") || "?") + ")" : "");
  const charts = [];
  const chart = (parent, fn, opt) => {
    const div = el("div", { class: "chart" });
    parent.append(div);
    charts.push(() => fn(div, opt));
  };


  // Stacked bars (thesis Fig. 4.4: end-to-end split into the ROS 2, DDS and wire
  // layers). rows: [{name, stack}], stack = {total_layer, total, parts, adds_up}.
  // Drawn with HTML elements (no canvas): widths are shares of the longest total.
  const LAYER_COLORS = { ros_publish: "#1f77b4", executor: "#6baed6", dds_send: "#ff7f0e", dds_local: "#fdae6b", dds_receive: "#e6550d", message: "#2ca02c", node: "#9467bd" };
  const stackChart = (parent, title, rows) => {
    const box = el("div", { class: "stack" }, el("h3", {}, title));
    const max = Math.max(...rows.map((r) => Math.max(r.stack.total.mean_ms, r.stack.parts.reduce((a, p) => a + p.mean_ms, 0))), 1e-9);
    for (const r of rows) {
      const bar = el("div", { class: "stack-bar", role: "img", "aria-label": r.name });
      for (const p of r.stack.parts) {
        const seg = el("span", { class: "seg seg-" + p.group, "data-layer": p.layer, title: (p.topic ? "hop " + p.hop + " " + p.topic + ": " : "") + p.layer + " " + num(p.mean_ms) + " ms (mean of " + p.count + ")" });
        seg.style.width = (100 * Math.max(p.mean_ms, 0) / max).toFixed(4) + "%";
        seg.style.background = LAYER_COLORS[p.layer] || "#999";
        bar.append(seg);
      }
      box.append(el("div", { class: "stack-row" }, el("span", { class: "stack-name" }, r.name), bar,
        el("span", { class: "stack-total" }, r.stack.total_layer + " " + num(r.stack.total.mean_ms) + " ms" + (r.stack.adds_up ? "" : " (parts from fewer samples)"))));
    }
    const seen = new Set();
    const legend = el("div", { class: "stack-legend" });
    for (const r of rows) for (const p of r.stack.parts) if (!seen.has(p.layer)) {
      seen.add(p.layer);
      const sw = el("span", { class: "swatch" });
      sw.style.background = LAYER_COLORS[p.layer] || "#999";
      legend.append(el("span", {}, sw, p.layer + " (" + p.group + ")"));
    }
    box.append(legend);
    const tab = el("table", {}, el("tr", {}, ...["", "hop", "topic", "layer", "group", "count", "mean (ms)"].map((h) => el("th", { class: "l" }, h))));
    for (const r of rows) {
      for (const p of r.stack.parts) tab.append(el("tr", {}, el("td", { class: "l" }, r.name), el("td", {}, p.hop === undefined ? "" : p.hop), el("td", { class: "l" }, p.topic || ""), el("td", { class: "l" }, p.layer), el("td", { class: "l" }, p.group), el("td", {}, p.count), el("td", {}, num(p.mean_ms))));
      tab.append(el("tr", { class: "total" }, el("td", { class: "l" }, r.name), el("td", {}, ""), el("td", {}, ""), el("td", { class: "l" }, r.stack.total_layer), el("td", { class: "l" }, "end-to-end"), el("td", {}, r.stack.total.count), el("td", {}, num(r.stack.total.mean_ms))));
    }
    box.append(tab);
    parent.append(box);
  };

  // Runs and capture points (a run of traces alone has none: said, not an empty table).
  const runs = el("section", { id: "runs" }, el("h2", {}, "Runs and capture points"));
  const withCaptures = D.runs.filter((r) => r.captures.length);
  if (withCaptures.length) {
    const t = el("table", {}, el("tr", {}, ...["run", "capture", "file", "frames", "RTPS messages", "offset (ms)", "skipped / malformed"].map((h) => el("th", { class: "l" }, h))));
    for (const r of withCaptures) for (const c of r.captures) {
      t.append(el("tr", {}, el("td", { class: "l" }, r.name), el("td", { class: "l" }, c.name), el("td", { class: "l" }, c.path), el("td", {}, c.frames), el("td", {}, c.rtps_messages), el("td", {}, num(c.offset_ns / 1e6)), el("td", { class: "l" }, c.skipped)));
    }
    runs.append(t);
  }
  for (const r of D.runs) if (!r.captures.length) runs.append(el("p", { class: "muted" }, r.name + ": traces alone, no capture: the wire layers and bandwidth need captures (docs/latency.md)."));
  for (const r of D.runs) for (const w of r.warnings) runs.append(el("div", { class: "warn" }, r.name + ": " + w));
  main.append(runs);

  // Wire bandwidth per capture point (runs with captures only).
  if (withCaptures.length) {
    const bw = el("section", { id: "bandwidth" }, el("h2", {}, "Bandwidth on the wire (all traffic, per capture point)"));
    const bwGrid = el("div", { class: "grid" });
    bw.append(bwGrid);
    for (const r of withCaptures) {
      chart(bwGrid, C.line, { title: r.name, xLabel: "time since start (s)", yLabel: "Mbit/s", yFromZero: true,
        series: r.bandwidth.map((b) => ({ name: b.capture, points: b.points })) });
    }
    main.append(bw);
  }

  // UDP flows other than RTPS (the lab's iperf3 interference) between capture points: Bosk et al. Eq. 9-10.
  if (D.runs.some((r) => r.udp_flows && r.udp_flows.flows.length)) {
    const u = el("section", { id: "udp-flows" }, el("h2", {}, "UDP flows between capture points (non-RTPS, e.g. iperf3 interference)"),
      el("p", { class: "muted" }, "Matched by 5-tuple, IP id and payload CRC-32. Delay d = t_R − t_S − t_o (Bosk et al. Eq. 9); jitter j = d(X) − d(X−1) for consecutive packets (Eq. 10), shown as |j|. µs."));
    const ut = el("table", {}, el("tr", {}, ...["run", "flow", "sender → receiver", "sent", "delivered", "lost", "loss %", "dups", "reordered", "Mbit/s", "delay mean", "p50", "p99", "max", "|jitter| mean", "p50", "p99", "max"].map((h, i) => el("th", { class: i < 3 ? "l" : "" }, h))));
    const grid = el("div", { class: "grid" });
    for (const r of D.runs) for (const f of (r.udp_flows ? r.udp_flows.flows : [])) {
      const s = f.summary, us = (v) => num(v * 1000, 1);
      ut.append(el("tr", { class: "udp-flow" }, el("td", { class: "l" }, r.name), el("td", { class: "l" }, s.src + " → " + s.dst), el("td", { class: "l" }, s.sender + " → " + s.receiver),
        el("td", {}, s.sent), el("td", {}, s.delivered), el("td", {}, s.lost), el("td", {}, num(f.loss_pct, 2)), el("td", {}, s.duplicates), el("td", {}, s.reordered), el("td", {}, num(f.payload_mbps, 2)),
        el("td", {}, us(s.delay.mean_ms)), el("td", {}, us(s.delay.p50_ms)), el("td", {}, us(s.delay.p99_ms)), el("td", {}, us(s.delay.max_ms)),
        el("td", {}, us(s.jitter_abs.mean_ms)), el("td", {}, us(s.jitter_abs.p50_ms)), el("td", {}, us(s.jitter_abs.p99_ms)), el("td", {}, us(s.jitter_abs.max_ms))));
      if (f.delay_series.length) chart(grid, C.line, { title: r.name + ": " + s.src + " → " + s.dst + " (" + s.sender + " → " + s.receiver + ")", xLabel: "time since start (s)", yLabel: "delay (ms)", yFromZero: true, series: [{ name: "delay", points: f.delay_series }] });
    }
    u.append(ut, grid);
    main.append(u);
  }

  // Per-process load of lab runs (load.csv, every 200 ms), on the same time axis as the latency charts.
  if (D.runs.some((r) => r.load)) {
    const ld = el("section", { id: "load" }, el("h2", {}, "Load (lab runs: CPU per host and per process, memory, context switches every 200 ms)"));
    const g = el("div", { class: "grid" });
    ld.append(g);
    for (const r of D.runs) {
      if (!r.load) continue;
      const ps = r.load.processes;
      if (r.load.hosts && r.load.hosts.length) {
        chart(g, C.line, { title: r.name + ": CPU per host (its processes, user + system)", xLabel: "time since start (s)", yLabel: "% of one core", yFromZero: true, series: r.load.hosts.map((h) => ({ name: h.name, points: h.cpu })) });
      }
      chart(g, C.line, { title: r.name + ": CPU (user + system)", xLabel: "time since start (s)", yLabel: "% of one core", yFromZero: true, series: ps.map((p) => ({ name: p.name, points: p.cpu })) });
      chart(g, C.line, { title: r.name + ": resident memory", xLabel: "time since start (s)", yLabel: "MiB", yFromZero: true, series: ps.map((p) => ({ name: p.name, points: p.rss })) });
      chart(g, C.line, { title: r.name + ": context switches", xLabel: "time since start (s)", yLabel: "switches/s", yFromZero: true, series: ps.map((p) => ({ name: p.name, points: p.ctx })) });
      if (r.load.not_drawn) ld.append(el("p", { class: "muted" }, r.name + ": " + r.load.not_drawn + " processes with less CPU time not drawn (all are in load.csv)"));
      if (r.load.bad_lines) ld.append(el("p", { class: "muted" }, r.name + ": " + r.load.bad_lines + " lines of load.csv could not be read and are not drawn"));
    }
    main.append(ld);
  }

  // Chains (ros2_tracing traces): the ones found and the measured one, stacked per hop.
  for (const r of D.runs) {
    const c = r.chains;
    if (!c) continue;
    const s = el("section", { class: "chains", id: "chains-" + r.name, "data-run": r.name }, el("h2", {}, "End-to-end chains — " + r.name));
    const pt = el("table", {}, el("tr", {}, ...["chain (topics through nodes that republish in their callbacks)", "instances", "e2e mean", "p50", "p99", "max"].map((h, i) => el("th", { class: i ? "" : "l" }, h))));
    for (const p of c.paths) pt.append(el("tr", {}, el("td", { class: "l" }, p.topics.join(" → ")), el("td", {}, p.count), el("td", {}, num(p.e2e.mean_ms)), el("td", {}, num(p.e2e.p50_ms)), el("td", {}, num(p.e2e.p99_ms)), el("td", {}, num(p.e2e.max_ms))));
    if (c.paths.length) s.append(el("p", { class: "muted" }, "End-to-end = first topic's rclcpp_publish → last topic's callback_start (ms)."), pt);
    else s.append(el("p", { class: "muted" }, "No chain found: no traced node here republishes in the callback that took a topic (a chain needs the traces of every host it crosses)."));
    const m = c.measured;
    if (m) {
      s.append(el("h3", {}, "Chain " + m.path.join(" → ") + ": " + m.instances + " instances (" + m.incomplete + " without an end-to-end value)"));
      stackChart(s, "Chain end-to-end, stacked per hop (mean ms)", [{ name: m.path.join(" → "), stack: m.stack }]);
      const grid = el("div", { class: "grid" });
      s.append(grid);
      chart(grid, C.box, { title: "Chain end-to-end and each hop's ros_e2e", yLabel: "latency (ms)", yFromZero: true,
        groups: [{ name: "chain", boxes: [Object.assign({ name: "chain_e2e" }, m.e2e_box)] }].concat(m.hops.map((h) => ({ name: h.hop + " " + h.topic, boxes: ["ros_e2e", "node"].filter((l) => h.boxes[l]).map((l) => Object.assign({ name: l }, h.boxes[l])) }))) });
    }
    main.append(s);
  }

  // Incidents (as `ddscope latency --explain`): per cause, the worst ones with their evidence, and when they happened.
  for (const r of D.runs) {
    const x = r.incidents;
    if (!x) continue;
    const s = el("section", { class: "incidents", id: "incidents-" + r.name, "data-run": r.name }, el("h2", {}, "Incidents — " + r.name));
    s.append(el("p", {}, x.summary));
    if (x.by_cause.length) {
      const t = el("table", {}, el("tr", {}, ...["cause", "incidents", "over budget", "lost", "excess (ms)", "share of excess", "layer"].map((h, i) => el("th", { class: i ? "" : "l" }, h))));
      for (const c of x.by_cause) t.append(el("tr", {}, el("td", { class: "l" }, c.cause), el("td", {}, c.incidents), el("td", {}, c.over_budget), el("td", {}, c.lost),
        el("td", {}, num(c.excess_ms)), el("td", {}, num(c.share_of_excess_pct, 1) + " %"), el("td", {}, c.layer || "")));
      s.append(el("p", { class: "muted" }, "An incident: over its topic's budget, lost, late against its period, an outlier of its flow, or with a negative layer. Layer: where the excess over the flow's typical (median) value was taken; cause: what the evidence supports (docs/latency.md, \"Why was it late\")."), t);
      const g = el("div", { class: "grid" });
      s.append(g);
      // one marker per incident (incidents are events: never joined by a line), every cause in the legend
      chart(g, C.line, { title: r.name + ": incidents over time, by cause", xLabel: "time since start (s)", yLabel: "latency above the flow's median (ms)", yFromZero: true, legend: true,
        series: x.timeline.map((t) => Object.assign({}, t, { mode: "events" })) });
      const w = el("table", {}, el("tr", {}, ...["t (s)", "topic", "sender → receiver", "sn", "what", "end to end (ms)", "median (ms)", "layer", "cause", "evidence"].map((h, i) => el("th", { class: i > 0 && i < 3 || i > 6 ? "l" : "" }, h))));
      for (const i of x.worst) w.append(el("tr", {}, el("td", {}, num(i.t_s, 3)), el("td", { class: "l" }, i.topic), el("td", { class: "l" }, i.sender + " → " + i.receiver), el("td", {}, i.sn),
        el("td", {}, i.kinds.join(", ")), el("td", {}, i.e2e_ms == null ? "" : num(i.e2e_ms) + " " + i.measure), el("td", {}, i.typical_ms == null ? "" : num(i.typical_ms)),
        el("td", { class: "l" }, i.layer || ""), el("td", { class: "l" }, i.cause), el("td", { class: "l" }, i.evidence)));
      s.append(el("h3", {}, "Worst incidents"), w);
    }
    main.append(s);
  }

  // Callbacks (traces): durations per callback, and what each callback published.
  for (const r of D.runs) {
    if (!r.callbacks || !r.callbacks.length) continue;
    const s = el("section", { class: "callbacks", id: "callbacks-" + r.name, "data-run": r.name }, el("h2", {}, "Callbacks — " + r.name));
    const t = el("table", {}, el("tr", {}, ...["host", "node", "callback", "runs", "rate Hz", "unfinished", "mean", "p50", "p99", "max"].map((h, i) => el("th", { class: i < 3 ? "l" : "" }, h))));
    for (const c of r.callbacks) t.append(el("tr", {}, el("td", { class: "l" }, c.host), el("td", { class: "l" }, c.node), el("td", { class: "l" }, c.callback),
      el("td", {}, c.runs), el("td", {}, c.rate_hz == null ? "" : num(c.rate_hz, 2)), el("td", {}, c.unfinished),
      el("td", {}, num(c.duration.mean_ms)), el("td", {}, num(c.duration.p50_ms)), el("td", {}, num(c.duration.p99_ms)), el("td", {}, num(c.duration.max_ms))));
    s.append(el("p", { class: "muted" }, "callback_start → callback_end (ms), per callback of every traced node; measured on every trace layout (Galactic and Foxy included)."), t);
    if (r.publishes_per_callback && r.publishes_per_callback.length) {
      const e = el("table", {}, el("tr", {}, ...["host", "node", "in callback", "publishes topic", "publishes", "rate Hz", "node time mean", "p99"].map((h, i) => el("th", { class: i < 4 ? "l" : "" }, h))));
      for (const c of r.publishes_per_callback) e.append(el("tr", {}, el("td", { class: "l" }, c.host), el("td", { class: "l" }, c.node), el("td", { class: "l" }, c.callback), el("td", { class: "l" }, c.topic),
        el("td", {}, c.publishes), el("td", {}, c.rate_hz == null ? "" : num(c.rate_hz, 2)), el("td", {}, c.node_time.count ? num(c.node_time.mean_ms) : ""), el("td", {}, c.node_time.count ? num(c.node_time.p99_ms) : "")));
      s.append(el("h3", {}, "Publishes per callback"), el("p", { class: "muted" }, "node time = callback_start → the publish (ms)."), e);
    }
    main.append(s);
  }

  // Thesis Fig. 4.4: end-to-end (traces: ros_e2e; ground truth: application), the stacks, the wire, the submessage.
  const layersShown = ["ros_e2e", "application", "sender_stack", "source_ts_to_wire", "message", "submessage", "receiver_stack"];
  const rosLayersShown = ["ros_publish", "dds_send", "dds_local", "dds_remote", "message", "dds_receive", "executor", "callback"];
  for (const topic of D.topics) {
    const s = el("section", { class: "topic", "data-topic": topic.topic }, el("h2", {}, topic.topic));
    const tab = el("table", {}, el("tr", {}, ...["run", "sender → receiver", "samples", "delivered", "lost", "repaired", "retx frags", "rate (Hz)", "message mean (ms)", "p50 (ms)", "p99 (ms)", "max (ms)", "submsg mean (ms)", "app mean (ms)", "ros_e2e mean (ms)", "ros_e2e p99 (ms)", "|jitter| mean (ms)", "period (ms)", "in time", "late"].map((h, i) => el("th", { class: i < 2 ? "l" : "" }, h))));
    for (const [rname, fl] of Object.entries(topic.runs)) for (const f of fl) {
      const L = Object.fromEntries(f.summary.layers);
      const m = L.message || {}, sm = L.submessage || {}, ap = L.application || {}, re = L.ros_e2e || {};
      tab.append(el("tr", {}, el("td", { class: "l" }, rname), el("td", { class: "l" }, f.summary.sender + " → " + f.summary.receiver + nodes(f.summary)),
        el("td", {}, f.summary.samples), el("td", {}, f.summary.delivered), el("td", {}, f.summary.lost), el("td", {}, f.summary.retransmitted_samples), el("td", {}, f.summary.retransmitted_frags),
        el("td", {}, f.rate && f.rate.hz !== null && f.rate.hz !== undefined ? num(f.rate.hz, 2) : (f.rate ? f.rate.kind : "")),
        el("td", {}, num(m.mean_ms)), el("td", {}, num(m.p50_ms)), el("td", {}, num(m.p99_ms)), el("td", {}, num(m.max_ms)),
        el("td", {}, num(sm.mean_ms)), el("td", {}, num(ap.mean_ms)), el("td", {}, num(re.mean_ms)), el("td", {}, num(re.p99_ms)), el("td", {}, f.summary.jitter_abs.count ? num(f.summary.jitter_abs.mean_ms) : ""),
        el("td", {}, num(f.summary.period_ms, 1)), el("td", {}, f.summary.in_time), el("td", {}, f.summary.late)));
    }
    s.append(el("p", { class: "muted" }, "Rate: samples per second at the sender as ros2 topic hz computes it, per writer (n − 1) / (last − first) of its samples, summed; bursty or few (under 5 samples) instead of a number that would mislead. Period: the median interval between consecutive samples (in time / late against it, Kouril et al., VEHITS 2024). Latencies in ms; nodes in parentheses (traces, or the sender's from ros_discovery_info on the wire). message = first DATA/DATA_FRAG at the sender → sample complete at the receiver; submessage = first IP fragment at the sender → last at the receiver; application = publish → receive (ground truth); ros_e2e = rclcpp_publish → callback_start (traces) = ros_publish + dds_send + message + dds_receive + executor (or ros_publish + dds_local + executor on one host)."), tab);
    const grid = el("div", { class: "grid" });
    s.append(grid);
    // Box plots: one group per run and flow, one box per layer (thesis Fig. 4.4).
    const groups = [];
    for (const [rname, fl] of Object.entries(topic.runs)) for (const f of fl) {
      groups.push({ name: Object.keys(topic.runs).length > 1 ? rname : f.summary.sender + "→" + f.summary.receiver,
        boxes: layersShown.filter((l) => f.boxes[l]).map((l) => Object.assign({ name: l }, f.boxes[l])) });
    }
    chart(grid, C.box, { title: "Latency per layer: end-to-end, wire, submessage", yLabel: "latency (ms)", yFromZero: true, groups });
    const rosGroups = [];
    for (const [rname, fl] of Object.entries(topic.runs)) for (const f of fl) {
      if (!f.boxes.ros_e2e) continue;
      const boxes = rosLayersShown.filter((l) => f.boxes[l]).map((l) => Object.assign({ name: l }, f.boxes[l]));
      rosGroups.push({ name: Object.keys(topic.runs).length > 1 ? rname : f.summary.sender + "→" + f.summary.receiver, boxes });
    }
    if (rosGroups.length) chart(grid, C.box, { title: "ROS 2 and DDS layers", yLabel: "latency (ms)", yFromZero: true, groups: rosGroups });
    const stacks = [];
    for (const [rname, fl] of Object.entries(topic.runs)) for (const f of fl) {
      if (f.stack) stacks.push({ name: (Object.keys(topic.runs).length > 1 ? rname + " " : "") + f.summary.sender + "→" + f.summary.receiver, stack: f.stack });
    }
    if (stacks.length) stackChart(s, "ros_e2e split into its layers (mean ms; ROS 2, DDS, wire)", stacks);
    const series = [], cdfs = [], sizes = [], pbw = [], ros = [];
    for (const [rname, fl] of Object.entries(topic.runs)) for (const f of fl) {
      const label = Object.keys(topic.runs).length > 1 ? rname : f.summary.sender + "→" + f.summary.receiver;
      series.push({ name: label, points: f.series, mode: "points" });
      if (f.ros_series && f.ros_series.length) ros.push({ name: label, points: f.ros_series, mode: "points" });
      cdfs.push({ name: label, points: f.cdf });
      sizes.push({ name: label, points: f.sizes, mode: "points" });
      pbw.push({ name: label, points: f.payload_bandwidth });
    }
    if (ros.length) chart(grid, C.line, { title: "ros_e2e over time (rclcpp_publish → callback_start)", xLabel: "time since start (s)", yLabel: "latency (ms)", series: ros, yFromZero: true });
    // Wire charts only where samples crossed the wire (same-host deliveries have none).
    if (series.some((x) => x.points.length)) {
      chart(grid, C.line, { title: "DDS message latency over time", xLabel: "time since start (s)", yLabel: "latency (ms)", series, yFromZero: true });
      chart(grid, C.cdf, { title: "CDF of DDS message latency", xLabel: "latency (ms)", series: cdfs });
      chart(grid, C.line, { title: "Payload size over time", xLabel: "time since start (s)", yLabel: "bytes", series: sizes, yFromZero: true });
      chart(grid, C.line, { title: "Payload bandwidth over time", xLabel: "time since start (s)", yLabel: "Mbit/s", series: pbw, yFromZero: true });
    } else {
      s.append(el("p", { class: "muted" }, "No sample of this topic was seen on the wire (same-host deliveries, or traces without captures): no wire charts."));
    }
    main.append(s);
  }
  const draw = () => charts.forEach((f) => f());
  draw();
  let pending = null;
  window.addEventListener("resize", () => { clearTimeout(pending); pending = setTimeout(draw, 150); });
  document.body.dataset.charts = String(charts.length);
})();
