// Renders the sweep report from the inlined DDSCOPE_SWEEP document (see `ddscope lab sweep`).
(function () {
  "use strict";
  const D = window.DDSCOPE_SWEEP;
  const C = window.DDSCharts;
  const el = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    return e;
  };
  const num = (v, d) => (v === null || v === undefined || Number.isNaN(v) ? "" : (+v).toFixed(d === undefined ? 3 : d));
  const main = document.querySelector("main");
  const S = D.sweep;

  // The sweep and the machine.
  const head = el("section", { id: "sweep" }, el("h2", {}, "Sweep " + S.name));
  if (S.description) head.append(el("p", {}, S.description));
  const m = D.machine || {};
  head.append(el("p", { class: "muted" },
    S.cells + " cells x " + S.repeats + " repeats" + (S.excluded ? " (" + S.excluded + " excluded)" : "") +
    ", duration per run " + (S.duration || "from the scenario") + "; keys: " + S.keys.join(", ") +
    "; sessions: " + S.sessions + (S.finished ? "" : " (not finished: resume with the same command)")));
  head.append(el("p", { class: "muted", id: "machine" },
    "machine: " + (m.kernel || "?") + ", " + (m.cpus || "?") + " CPUs; ddscope " + (m.ddscope || "?") +
    ", Cyclone DDS " + (m.cyclonedds || "?") + ", Fast DDS " + (m.fastdds || "?")));
  main.append(head);

  // Charts (median of the repeats as lines, every repeat as dots in the same colour).
  const charts = el("section", { id: "charts" }, el("h2", {}, "Charts"));
  const grid = el("div", { class: "grid" });
  charts.append(grid);
  main.append(charts);
  const draws = [];
  for (const p of D.plots) {
    const div = el("div", { class: "chart", "data-plot": p.title });
    grid.append(div);
    const series = [];
    p.series.forEach((s, i) => {
      const color = C.palette[i % C.palette.length];
      series.push({ name: s.name, points: s.median, mode: "line", color });
      if (D.sweep.repeats > 1) series.push({ name: s.name + " (repeats)", points: s.repeats, mode: "points", color, noLegend: true });
    });
    draws.push(() => C.line(div, { title: p.title, xLabel: p.xLabel + (p.xLog ? " (log)" : ""), yLabel: p.yLabel + (p.yLog ? " (log)" : ""), series, xLog: p.xLog, yLog: p.yLog, legend: true, height: 320 }));
  }

  // The table: one row per cell and flow, median of the repeats (spread in the tooltip).
  const cols = ["cell"].concat(S.keys, ["topic", "sender", "receiver", "repeats"]);
  const metrics = D.metrics.map((x) => x.key);
  const table = el("section", { id: "table" }, el("h2", {}, "All cells (median of the repeats; hover a number for min-max)"));
  const tab = el("table", { class: "sweep-table" });
  const hr = el("tr", {});
  for (const c of cols) hr.append(el("th", { class: "l" }, c));
  for (const k of metrics) hr.append(el("th", { title: D.metrics.find((x) => x.key === k).meaning }, k));
  tab.append(hr);
  for (const r of D.table) {
    const tr = el("tr", {});
    for (const c of cols) tr.append(el("td", { class: "l" }, r[c] === undefined || r[c] === null ? "" : r[c]));
    for (const k of metrics) {
      const sp = r.spread[k];
      const td = el("td", sp ? { title: "min " + num(sp.min) + ", max " + num(sp.max) + " over " + sp.values.length } : {}, num(r[k], k.endsWith("_ms") ? 3 : k.endsWith("pct") || k.endsWith("mbps") ? 2 : 0));
      td.dataset.key = k;
      tr.append(td);
    }
    tab.append(tr);
  }
  const wrap = el("div", { style: "overflow-x: auto" }, tab);
  table.append(wrap);
  main.append(table);

  // Every run's status.
  const runs = el("section", { id: "runs" }, el("h2", {}, "Runs"));
  const rt = el("table", {}, el("tr", {}, ...["cell", "repeat", "parameters", "status", "flows", "note"].map((h) => el("th", { class: "l" }, h))));
  for (const r of D.runs) {
    const note = r.analysis_error ? "analysis: " + r.analysis_error : r.error || "";
    rt.append(el("tr", { class: "run-" + r.status }, el("td", { class: "l" }, r.cell), el("td", {}, r.repeat),
      el("td", { class: "l" }, Object.entries(r.params).map(([k, v]) => k + "=" + v).join(" ")), el("td", { class: "l" }, r.status),
      el("td", {}, r.flows), el("td", { class: "l" }, note)));
  }
  runs.append(rt);
  const legend = el("p", { class: "muted" }, "Columns: ");
  for (const x of D.metrics) legend.append(el("br", {}), x.key + " — " + x.meaning);
  runs.append(legend);
  main.append(runs);

  const drawAll = () => draws.forEach((f) => f());
  drawAll();
  let t = null;
  window.addEventListener("resize", () => { clearTimeout(t); t = setTimeout(drawAll, 150); });
})();
