// ddscope charts: small canvas charts for the HTML report and the live
// dashboard (time series, box plots, CDFs). No dependencies, works offline.
// Every chart canvas carries data-points = number of marks drawn, so tests
// can check that a chart is not empty.
(function () {
  "use strict";
  const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];
  const FONT = "12px system-ui, sans-serif";

  function niceStep(span, target) {
    const raw = span / Math.max(1, target);
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const r = raw / mag;
    return (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag;
  }

  function ticks(lo, hi, target) {
    if (!isFinite(lo) || !isFinite(hi)) return [];
    if (hi === lo) { hi = lo + 1; }
    const step = niceStep(hi - lo, target);
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
    return out;
  }

  function fmt(v) {
    const a = Math.abs(v);
    if (a === 0) return "0";
    if (a >= 1e9) return (v / 1e9).toPrecision(3) + "G";
    if (a >= 1e6) return (v / 1e6).toPrecision(3) + "M";
    if (a >= 1e4) return (v / 1e3).toPrecision(3) + "k";
    if (a >= 100) return v.toFixed(0);
    if (a >= 1) return +v.toPrecision(3) + "";
    return +v.toPrecision(2) + "";
  }

  // A time of day on a 24-hour clock; `decimals` digits of the second where ticks are closer than 1 s
  // (so two ticks never read the same).
  function clock(sec, decimals) {
    const d = new Date(sec * 1000);
    const p = (n) => String(n).padStart(2, "0");
    const frac = decimals ? "." + String(Math.round((sec - Math.floor(sec)) * Math.pow(10, decimals))).padStart(decimals, "0") : "";
    return p(d.getHours()) + ":" + p(d.getMinutes()) + ":" + p(d.getSeconds()) + frac;
  }

  function setup(container, height) {
    let canvas = container.querySelector("canvas.ddscope-chart");
    if (!canvas) {
      canvas = document.createElement("canvas");
      canvas.className = "ddscope-chart";
      container.appendChild(canvas);
    }
    const w = Math.max(320, container.clientWidth || 640);
    const h = height || 280;
    const dpr = window.devicePixelRatio || 1;
    canvas.width = w * dpr;
    canvas.height = h * dpr;
    canvas.style.width = w + "px";
    canvas.style.height = h + "px";
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    ctx.font = FONT;
    return { canvas, ctx, w, h };
  }

  // Units that switch with the range, read from the axis label: "ms" / "… (ms)" shows µs below
  // 0.1 ms and s from 10 000 ms; "bytes" shows KiB and MiB. Returns the factor the values are
  // multiplied by for their tick labels and the label with its unit.
  function axisUnit(label, r) {
    const m = Math.max(Math.abs(r[0]), Math.abs(r[1]));
    if (label && (label === "ms" || /\(ms\)$/.test(label))) {
      const [k, u] = m < 0.1 ? [1000, "µs"] : m >= 10000 ? [0.001, "s"] : [1, "ms"];
      return { k, label: label === "ms" ? u : label.replace(/\(ms\)$/, "(" + u + ")") };
    }
    if (label === "bytes") {
      const [k, u] = m >= 1048576 ? [1 / 1048576, "MiB"] : m >= 1024 ? [1 / 1024, "KiB"] : [1, "bytes"];
      return { k, label: u };
    }
    return { k: 1, label };
  }

  function frame(ctx, w, h, opt, xr, yr, xIsTime, categories, legendH) {
    const m = { l: 62, r: 12, t: (opt.title ? 26 : 10) + (legendH || 0), b: 44 };
    const pw = w - m.l - m.r, ph = h - m.t - m.b;
    const X = (v) => m.l + (v - xr[0]) / (xr[1] - xr[0] || 1) * pw;
    const Y = (v) => m.t + ph - (v - yr[0]) / (yr[1] - yr[0] || 1) * ph;
    ctx.fillStyle = "#222";
    if (opt.title) { ctx.textAlign = "left"; ctx.textBaseline = "alphabetic"; ctx.font = "bold 13px system-ui, sans-serif"; ctx.fillText(opt.title, m.l, 16); ctx.font = FONT; }
    ctx.strokeStyle = "#ddd"; ctx.lineWidth = 1;
    ctx.textAlign = "right"; ctx.textBaseline = "middle";
    const yu = opt.yLog ? { k: 1, label: opt.yLabel } : axisUnit(opt.yLabel, yr);
    const xu = opt.xLog || xIsTime || categories ? { k: 1, label: opt.xLabel } : axisUnit(opt.xLabel, xr);
    for (const t of logTicks(yr, opt.yLog) || ticks(yr[0] * yu.k, yr[1] * yu.k, 5).map((v) => v / yu.k)) {
      const y = Y(t);
      ctx.beginPath(); ctx.moveTo(m.l, y); ctx.lineTo(m.l + pw, y); ctx.stroke();
      ctx.fillText(fmt(opt.yLog ? Math.pow(10, t) : t * yu.k), m.l - 6, y);
    }
    ctx.textAlign = "center"; ctx.textBaseline = "top";
    if (categories) {
      categories.forEach((c, i) => ctx.fillText(String(c), X(i + 0.5), m.t + ph + 6));
    } else {
      const xt = logTicks(xr, opt.xLog) || ticks(xr[0] * xu.k, xr[1] * xu.k, Math.max(3, Math.floor(pw / 90))).map((v) => v / xu.k);
      const step = xt.length > 1 ? xt[1] - xt[0] : 1;
      const decimals = xIsTime && step < 1 ? Math.min(3, Math.ceil(-Math.log10(step) - 1e-9)) : 0;
      const labels = [];
      for (const t of xt) {
        const x = X(t);
        ctx.beginPath(); ctx.moveTo(x, m.t); ctx.lineTo(x, m.t + ph); ctx.stroke();
        const label = xIsTime ? clock(t, decimals) : fmt(opt.xLog ? Math.pow(10, t) : t * xu.k);
        labels.push(label);
        ctx.fillText(label, x, m.t + ph + 6);
      }
      ctx.canvas.dataset.xticks = JSON.stringify(labels);
    }
    ctx.strokeStyle = "#888";
    ctx.strokeRect(m.l, m.t, pw, ph);
    ctx.fillStyle = "#444";
    if (xu.label) ctx.fillText(xu.label, m.l + pw / 2, h - 16);
    if (yu.label) {
      ctx.save(); ctx.translate(12, m.t + ph / 2); ctx.rotate(-Math.PI / 2);
      ctx.textBaseline = "middle"; ctx.fillText(yu.label, 0, 0); ctx.restore();
    }
    return { m, pw, ph, X, Y, yLabel: yu.label, xLabel: xu.label };
  }

  // Log axes (opt.xLog / opt.yLog): values are drawn at log10(v); ticks at whole decades.
  function logTicks(r, on) {
    if (!on) return null;
    const out = [];
    for (let d = Math.ceil(r[0] - 1e-9); d <= r[1] + 1e-9; d++) out.push(d);
    return out.length >= 2 ? out : null;
  }

  // Rows a legend of `names` takes in `maxw` pixels (legends sit above the plot, never on the data).
  function legendRows(ctx, names, maxw) {
    if (!names.length) return 0;
    let x = 0, rows = 1;
    for (const n of names) {
      const tw = ctx.measureText(n).width + 26;
      if (x > 0 && x + tw > maxw) { x = 0; rows++; }
      x += tw;
    }
    return rows;
  }

  function legend(ctx, names, x0, y0, maxw, colors) {
    let x = x0, y = y0;
    ctx.textAlign = "left"; ctx.textBaseline = "middle";
    names.forEach((n, i) => {
      const tw = ctx.measureText(n).width + 26;
      if (x > x0 && x + tw > x0 + maxw) { x = x0; y += 16; }
      ctx.fillStyle = (colors && colors[i]) || PALETTE[i % PALETTE.length];
      ctx.fillRect(x, y - 5, 12, 10);
      ctx.fillStyle = "#222";
      ctx.fillText(n, x + 16, y);
      x += tw;
    });
  }

  function range(vals, pad) {
    let lo = Infinity, hi = -Infinity;
    for (const v of vals) { if (isFinite(v)) { if (v < lo) lo = v; if (v > hi) hi = v; } }
    if (!isFinite(lo)) return [0, 1];
    if (lo === hi) { lo -= 0.5; hi += 0.5; }
    const p = (hi - lo) * (pad || 0.05);
    return [lo - p, hi + p];
  }

  // What a test can check of a drawn chart: the plot area (CSS px) and the legend's entries.
  function plotted(canvas, f, legendNames) {
    canvas.dataset.plot = JSON.stringify([f.m.l, f.m.t, f.pw, f.ph]);
    canvas.dataset.legend = JSON.stringify(legendNames);
    canvas.dataset.axes = JSON.stringify([f.xLabel || "", f.yLabel || ""]);
  }

  // A range from zero (or below, for negative values) to 5 % above the highest value: a constant
  // series is drawn inside the plot, not on its frame.
  function fromZero(vals) {
    let lo = 0, hi = -Infinity;
    for (const v of vals) if (isFinite(v)) { if (v < lo) lo = v; if (v > hi) hi = v; }
    if (!isFinite(hi)) return [0, 1];
    hi = Math.max(hi, 0);
    const span = hi - lo;
    return span > 0 ? [lo - (lo < 0 ? span * 0.05 : 0), hi + span * 0.05] : [0, 1];
  }

  // Time series / XY chart. opt.series = [{name, points: [[x, y], ...], mode: "line"|"points"}]
  function line(container, opt) {
    if (opt.xLog || opt.yLog) {
      const lx = (v) => (opt.xLog ? (v > 0 ? Math.log10(v) : NaN) : v), ly = (v) => (opt.yLog ? (v > 0 ? Math.log10(v) : NaN) : v);
      opt = Object.assign({}, opt, { series: opt.series.map((s) => Object.assign({}, s, { points: s.points.map((p) => [lx(p[0]), ly(p[1])]).filter((p) => isFinite(p[0]) && isFinite(p[1])) })) });
    }
    const { canvas, ctx, w, h } = setup(container, opt.height);
    const xs = [], ys = [];
    for (const s of opt.series) for (const p of s.points) { xs.push(p[0]); ys.push(p[1]); }
    // one point alone gets a span around it (a range of zero width would put it on the frame)
    const xr = opt.xRange || (xs.length && Math.min(...xs) === Math.max(...xs) ? range(xs) : range(xs, 0));
    const yr = opt.yRange || (opt.yFromZero ? fromZero(ys) : range(ys));
    // a series with noLegend (e.g. the dots of a line drawn in its colour) gets no legend entry
    const named = opt.series.map((s, i) => [s, i]).filter(([s]) => !s.noLegend);
    const showLegend = named.length > 0 && (opt.series.length > 1 || opt.legend);
    const legendH = showLegend ? 16 * legendRows(ctx, named.map(([s]) => s.name), w - 62 - 12 - 16) + 4 : 0;
    const f = frame(ctx, w, h, opt, xr, yr, opt.xTime, null, legendH);
    let marks = 0;
    ctx.save();
    ctx.beginPath(); ctx.rect(f.m.l, f.m.t, f.pw, f.ph); ctx.clip();
    opt.series.forEach((s, i) => {
      const color = s.color || PALETTE[i % PALETTE.length];
      ctx.strokeStyle = color; ctx.fillStyle = color; ctx.lineWidth = 1.5;
      if ((s.mode || "line") === "line") {
        ctx.beginPath();
        s.points.forEach((p, k) => { const x = f.X(p[0]), y = f.Y(p[1]); if (k === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y); });
        ctx.stroke();
        // a line of one point draws nothing: its point is marked
        if (s.points.length === 1) { ctx.beginPath(); ctx.arc(f.X(s.points[0][0]), f.Y(s.points[0][1]), 3, 0, 7); ctx.fill(); }
      } else if (s.mode === "events") {
        // events (incidents): a marker each, never joined by lines
        for (const p of s.points) { ctx.beginPath(); ctx.arc(f.X(p[0]), f.Y(p[1]), 4, 0, 7); ctx.fill(); }
      } else {
        for (const p of s.points) ctx.fillRect(f.X(p[0]) - 1.5, f.Y(p[1]) - 1.5, 3, 3);
      }
      marks += s.points.length;
    });
    ctx.restore();
    if (showLegend) legend(ctx, named.map(([s]) => s.name), f.m.l + 8, f.m.t - legendH + 6, f.pw - 16, named.map(([s, i]) => s.color || PALETTE[i % PALETTE.length]));
    if (marks === 0) { ctx.fillStyle = "#999"; ctx.textAlign = "center"; ctx.fillText("no data", f.m.l + f.pw / 2, f.m.t + f.ph / 2); }
    canvas.dataset.points = marks;
    plotted(canvas, f, showLegend ? named.map(([s]) => s.name) : []);
    canvas.dataset.xrange = JSON.stringify(xr);
    return canvas;
  }

  // Grouped box plots. opt.groups = [{name, boxes: [{name, count, min, p1, p25, p50, p75, p99, max, mean}]}]
  // Whiskers span p1..p99; dots mark min and max; the diamond is the mean.
  function box(container, opt) {
    const { canvas, ctx, w, h } = setup(container, opt.height);
    const vals = [];
    for (const g of opt.groups) for (const b of g.boxes) if (b && b.count) vals.push(b.min, b.max);
    const yr = opt.yRange || range(vals.concat(opt.yFromZero ? [0] : []));
    const names = [];
    for (const g of opt.groups) for (const b of g.boxes) if (b && !names.includes(b.name)) names.push(b.name);
    const legendH = names.length ? 16 * legendRows(ctx, names, w - 62 - 12 - 16) + 4 : 0;
    const f = frame(ctx, w, h, opt, [0, opt.groups.length], yr, false, opt.groups.map((g) => g.name), legendH);
    let marks = 0;
    opt.groups.forEach((g, gi) => {
      const slot = f.pw / opt.groups.length;
      const bw = Math.min(48, slot * 0.8 / Math.max(1, names.length));
      g.boxes.forEach((b) => {
        if (!b || !b.count) return;
        const si = names.indexOf(b.name);
        const cx = f.m.l + gi * slot + slot / 2 + (si - (names.length - 1) / 2) * bw;
        const color = PALETTE[si % PALETTE.length];
        ctx.strokeStyle = color; ctx.fillStyle = color + "55"; ctx.lineWidth = 1.5;
        ctx.beginPath(); ctx.moveTo(cx, f.Y(b.p1)); ctx.lineTo(cx, f.Y(b.p25)); ctx.moveTo(cx, f.Y(b.p75)); ctx.lineTo(cx, f.Y(b.p99)); ctx.stroke();
        ctx.beginPath(); ctx.moveTo(cx - bw * 0.25, f.Y(b.p1)); ctx.lineTo(cx + bw * 0.25, f.Y(b.p1)); ctx.moveTo(cx - bw * 0.25, f.Y(b.p99)); ctx.lineTo(cx + bw * 0.25, f.Y(b.p99)); ctx.stroke();
        const top = f.Y(b.p75), bot = f.Y(b.p25);
        ctx.fillRect(cx - bw * 0.4, top, bw * 0.8, Math.max(1, bot - top));
        ctx.strokeRect(cx - bw * 0.4, top, bw * 0.8, Math.max(1, bot - top));
        ctx.beginPath(); ctx.moveTo(cx - bw * 0.4, f.Y(b.p50)); ctx.lineTo(cx + bw * 0.4, f.Y(b.p50)); ctx.lineWidth = 2.5; ctx.stroke();
        ctx.fillStyle = color;
        for (const v of [b.min, b.max]) { ctx.beginPath(); ctx.arc(cx, f.Y(v), 2, 0, 7); ctx.fill(); }
        const my = f.Y(b.mean);
        ctx.beginPath(); ctx.moveTo(cx, my - 4); ctx.lineTo(cx + 4, my); ctx.lineTo(cx, my + 4); ctx.lineTo(cx - 4, my); ctx.closePath(); ctx.fill();
        marks += 1;
      });
    });
    if (names.length) legend(ctx, names, f.m.l + 8, f.m.t - legendH + 6, f.pw - 16);
    if (marks === 0) { ctx.fillStyle = "#999"; ctx.textAlign = "center"; ctx.fillText("no data", f.m.l + f.pw / 2, f.m.t + f.ph / 2); }
    canvas.dataset.points = marks;
    plotted(canvas, f, names);
    return canvas;
  }

  // CDF: opt.series = [{name, points: [[latency, fraction], ...]}]
  function cdf(container, opt) {
    return line(container, Object.assign({ yRange: [0, 1.02], yLabel: "fraction of samples" }, opt));
  }

  // Horizontal stacked bars: opt.rows = [{name, parts: [{name, value}]}], one bar per row,
  // one colour per part name (legend on top). Labels are drawn as canvas text.
  function stacked(container, opt) {
    const rows = opt.rows || [];
    const { canvas, ctx, w } = setup(container, Math.max(90, 46 + rows.length * 26 + (opt.title ? 16 : 0)));
    const names = [];
    for (const r of rows) for (const p of r.parts) if (!names.includes(p.name)) names.push(p.name);
    const total = Math.max(1e-12, ...rows.map((r) => r.parts.reduce((a, p) => a + Math.max(0, p.value), 0)));
    const left = Math.min(260, Math.max(120, w * 0.3)), right = 70, top = (opt.title ? 22 : 4) + 22;
    ctx.fillStyle = "#222";
    if (opt.title) ctx.fillText(opt.title, 8, 14);
    let lx = left;
    names.forEach((n, i) => {
      ctx.fillStyle = PALETTE[i % PALETTE.length];
      ctx.fillRect(lx, top - 18, 10, 10);
      ctx.fillStyle = "#222";
      ctx.fillText(n, lx + 14, top - 9);
      lx += 24 + ctx.measureText(n).width;
    });
    let marks = 0;
    const pw = w - left - right;
    rows.forEach((r, ri) => {
      const y = top + ri * 26;
      ctx.fillStyle = "#222";
      ctx.fillText(String(r.name).slice(0, 40), 6, y + 14);
      let x = left, sum = 0;
      for (const p of r.parts) {
        const v = Math.max(0, p.value);
        const bw = (v / total) * pw;
        ctx.fillStyle = PALETTE[names.indexOf(p.name) % PALETTE.length];
        ctx.fillRect(x, y + 2, Math.max(bw, v > 0 ? 1 : 0), 18);
        x += bw; sum += v; marks += 1;
      }
      ctx.fillStyle = "#222";
      ctx.fillText(fmt(sum) + (opt.unit ? " " + opt.unit : ""), x + 4, y + 15);
    });
    canvas.dataset.points = String(marks);
    return canvas;
  }

  window.DDSCharts = { line, box, cdf, stacked, palette: PALETTE, fmt };
})();
