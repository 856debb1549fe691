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
  const charts = [];
  const chart = (parent, fn, opt) => {
    const div = el("div", { class: "chart" });
    parent.append(div);
    charts.push(() => fn(div, opt));
  };

  // Runs and capture points.
  const runs = el("section", { id: "runs" }, el("h2", {}, "Runs and capture points"));
  const t = el("table", {}, el("tr", {}, ...["run", "capture", "file", "frames", "RTPS messages", "offset (ms)", "skipped / malformed"].map((h) => el("th", { class: "l" }, h))));
  for (const r of D.runs) for (const c of r.captures) {
    t.append(el("tr", {}, el("td", { class: "l" }, r.name), el("td", { class: "l" }, c.name), el("td", { class: "l" }, c.path), el("td", {}, c.frames), el("td", {}, c.rtps_messages), el("td", {}, num(c.offset_ns / 1e6)), el("td", { class: "l" }, c.skipped)));
  }
  runs.append(t);
  for (const r of D.runs) for (const w of r.warnings) runs.append(el("div", { class: "warn" }, r.name + ": " + w));
  main.append(runs);

  // Wire bandwidth per capture point.
  const bw = el("section", { id: "bandwidth" }, el("h2", {}, "Bandwidth on the wire (all traffic, per capture point)"));
  const bwGrid = el("div", { class: "grid" });
  bw.append(bwGrid);
  for (const r of D.runs) {
    chart(bwGrid, C.line, { title: r.name, xLabel: "time since start (s)", yLabel: "Mbit/s", yFromZero: true,
      series: r.bandwidth.map((b) => ({ name: b.capture, points: b.points })) });
  }
  main.append(bw);

  const layersShown = ["application", "message", "submessage", "sender_stack", "receiver_stack"];
  for (const topic of D.topics) {
    const s = el("section", { class: "topic", "data-topic": topic.topic }, el("h2", {}, topic.topic));
    const tab = el("table", {}, el("tr", {}, ...["run", "sender → receiver", "samples", "delivered", "lost", "repaired", "retx frags", "message mean", "p50", "p99", "max", "submsg mean", "app mean", "|jitter| mean", "period", "in time", "late"].map((h, i) => el("th", { class: i < 2 ? "l" : "" }, h))));
    for (const [rname, fl] of Object.entries(topic.runs)) for (const f of fl) {
      const L = Object.fromEntries(f.summary.layers);
      const m = L.message || {}, sm = L.submessage || {}, ap = L.application || {};
      tab.append(el("tr", {}, el("td", { class: "l" }, rname), el("td", { class: "l" }, f.summary.sender + " → " + f.summary.receiver),
        el("td", {}, f.summary.samples), el("td", {}, f.summary.delivered), el("td", {}, f.summary.lost), el("td", {}, f.summary.retransmitted_samples), el("td", {}, f.summary.retransmitted_frags),
        el("td", {}, num(m.mean_ms)), el("td", {}, num(m.p50_ms)), el("td", {}, num(m.p99_ms)), el("td", {}, num(m.max_ms)),
        el("td", {}, num(sm.mean_ms)), el("td", {}, num(ap.mean_ms)), el("td", {}, f.summary.jitter_abs.count ? num(f.summary.jitter_abs.mean_ms) : ""),
        el("td", {}, num(f.summary.period_ms, 1)), el("td", {}, f.summary.in_time), el("td", {}, f.summary.late)));
    }
    s.append(el("p", { class: "muted" }, "Latencies in ms. message = first DATA/DATA_FRAG at the sender → sample complete at the receiver; submessage = first IP fragment at the sender → last at the receiver; application = publish → receive (ground truth)."), tab);
    const grid = el("div", { class: "grid" });
    s.append(grid);
    // Box plots: one group per run and flow, one box per layer (thesis Fig. 4.4).
    const groups = [];
    for (const [rname, fl] of Object.entries(topic.runs)) for (const f of fl) {
      groups.push({ name: Object.keys(topic.runs).length > 1 ? rname : f.summary.sender + "→" + f.summary.receiver,
        boxes: layersShown.filter((l) => f.boxes[l]).map((l) => Object.assign({ name: l }, f.boxes[l])) });
    }
    chart(grid, C.box, { title: "Latency per layer", yLabel: "latency (ms)", yFromZero: true, groups });
    const series = [], cdfs = [], sizes = [], pbw = [];
    for (const [rname, fl] of Object.entries(topic.runs)) for (const f of fl) {
      const label = Object.keys(topic.runs).length > 1 ? rname : f.summary.sender + "→" + f.summary.receiver;
      series.push({ name: label, points: f.series, mode: "points" });
      cdfs.push({ name: label, points: f.cdf });
      sizes.push({ name: label, points: f.sizes, mode: "points" });
      pbw.push({ name: label, points: f.payload_bandwidth });
    }
    chart(grid, C.line, { title: "DDS message latency over time", xLabel: "time since start (s)", yLabel: "latency (ms)", series, yFromZero: true });
    chart(grid, C.cdf, { title: "CDF of DDS message latency", xLabel: "latency (ms)", series: cdfs });
    chart(grid, C.line, { title: "Payload size over time", xLabel: "time since start (s)", yLabel: "bytes", series: sizes, yFromZero: true });
    chart(grid, C.line, { title: "Payload bandwidth over time", xLabel: "time since start (s)", yLabel: "Mbit/s", series: pbw, yFromZero: true });
    main.append(s);
  }
  const draw = () => charts.forEach((f) => f());
  draw();
  let pending = null;
  window.addEventListener("resize", () => { clearTimeout(pending); pending = setTimeout(draw, 150); });
  document.body.dataset.charts = String(charts.length);
})();
