// Live dashboard: polls /api/state every second and redraws.
(function () {
  "use strict";
  const C = window.DDSCharts;
  const q = new URLSearchParams(location.search);
  const token = q.get("token");
  const api = "api/state" + (token ? "?token=" + encodeURIComponent(token) : "");
  const $ = (id) => document.getElementById(id);
  const esc = (s) => String(s === undefined || s === null ? "" : s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
  const f = (v, d) => (v === null || v === undefined || Number.isNaN(v) ? "" : (+v).toFixed(d === undefined ? 2 : d));
  const table = (head, rows, left) => "<table><tr>" + head.map((h, i) => `<th class="${i < left ? "l" : ""}">${esc(h)}</th>`).join("") + "</tr>" +
    rows.map((r) => "<tr>" + r.map((c, i) => `<td class="${i < left ? "l" : ""}">${c}</td>`).join("") + "</tr>").join("") + "</table>";
  const holders = {};
  const holder = (parent, key) => {
    if (!holders[key]) {
      const d = document.createElement("div");
      d.className = "chart";
      d.dataset.key = key;
      parent.appendChild(d);
      holders[key] = d;
    }
    return holders[key];
  };
  function bw(b) { return b >= 1e9 ? f(b / 1e9) + " Gb/s" : b >= 1e6 ? f(b / 1e6) + " Mb/s" : b >= 1e3 ? f(b / 1e3, 1) + " kb/s" : f(b, 0) + " b/s"; }

  function draw(s) {
    const running = s.agents.filter((a) => a.running).length;
    $("status").textContent = `${s.agents.length} agents (${running} running), ${s.flows.length} flows, ${s.correlation.samples_judged} samples judged, window ${s.window_s} s — updated ${new Date().toLocaleTimeString()}`;
    $("agent-table").innerHTML = table(["agent", "state", "last batch (s ago)", "batches", "items", "lost batches", "dropped items", "frames", "kernel dropped", "if_dropped", "skipped / malformed"],
      s.agents.map((a) => {
        const c = a.counters || {};
        const k = c.kernel || {};
        return [esc(a.name), a.running ? "running" : "stopped", f(a.last_seen_s, 1), a.batches, a.items,
          a.lost_batches ? `<span class="bad">${a.lost_batches}</span>` : 0, a.dropped_items ? `<span class="bad">${a.dropped_items}</span>` : 0,
          c.frames ?? "", k.dropped ? `<span class="bad">${k.dropped}</span>` : (k.dropped ?? ""), k.if_dropped ?? "", esc(c.skipped || "")];
      }), 2);
    const trows = [];
    for (const a of s.agents) for (const t of (a.topics || [])) {
      trows.push([esc(a.name), esc(t.topic_name), esc(t.type_name), f(t.rate_now_hz), bw(t.bandwidth_now_bps), f(t.mean_sample_size, 0), t.max_sample_size,
        f(t.rtps_frags_per_sample, 1), f(t.ip_frags_per_sample, 1), t.samples, t.incomplete_samples, t.retransmitted_fragments, t.sn_gaps, t.heartbeats, t.acknacks, t.nack_frags]);
    }
    $("topic-table").innerHTML = trows.length ? table(["agent", "topic", "type", "Hz", "bandwidth", "mean B", "max B", "frags", "IP frags", "samples", "incomplete", "retx frags", "sn gaps", "HB", "ACKNACK", "NACK_FRAG"], trows, 3) : "no DDS user traffic yet";
    $("flow-table").innerHTML = table(["topic", "sender → receiver", "samples", "delivered", "lost", "repaired", "retx frags", "message mean ms", "p99 ms", "max ms", "submsg mean ms", "|jitter| mean ms", "in time", "late"],
      s.flows.map((fl) => {
        const x = fl.summary, L = Object.fromEntries(x.layers), m = L.message || {}, sm = L.submessage || {};
        return [esc(x.topic), esc(x.sender + " → " + x.receiver), x.samples, x.delivered, x.lost ? `<span class="bad">${x.lost}</span>` : 0, x.retransmitted_samples, x.retransmitted_frags,
          f(m.mean_ms, 3), f(m.p99_ms, 3), f(m.max_ms, 3), f(sm.mean_ms, 3), x.jitter_abs.count ? f(x.jitter_abs.mean_ms, 3) : "", x.in_time, x.late];
      }), 2);
    $("warnings").innerHTML = s.warnings.map((w) => `<div class="warn">${esc(w)}</div>`).join("");
    const fc = $("flow-charts");
    const topics = [...new Set(s.flows.map((x) => x.summary.topic))];
    for (const t of topics) {
      const fls = s.flows.filter((x) => x.summary.topic === t);
      const name = (x) => x.summary.sender + "→" + x.summary.receiver;
      C.line(holder(fc, "msg:" + t), { title: t + ": DDS message latency", xTime: true, yLabel: "ms", yFromZero: true, legend: true,
        series: fls.map((x) => ({ name: name(x), points: x.message, mode: "points" })) });
      if (fls.some((x) => x.submessage.length)) {
        C.line(holder(fc, "sub:" + t), { title: t + ": DDS submessage latency", xTime: true, yLabel: "ms", yFromZero: true, legend: true,
          series: fls.map((x) => ({ name: name(x), points: x.submessage, mode: "points" })) });
      }
      C.line(holder(fc, "size:" + t), { title: t + ": payload size", xTime: true, yLabel: "bytes", yFromZero: true, legend: true,
        series: fls.map((x) => ({ name: name(x), points: x.size, mode: "points" })) });
    }
    const sc = $("system-charts");
    C.line(holder(sc, "cpu"), { title: "CPU utilisation", xTime: true, yLabel: "%", yRange: [0, 100], legend: true,
      series: s.agents.map((a) => ({ name: a.name, points: a.cpu })) });
    const net = [];
    for (const a of s.agents) for (const n of a.network) {
      if (n.device === "lo") continue;
      net.push({ name: a.name + " " + n.device + " rx", points: n.rx }, { name: a.name + " " + n.device + " tx", points: n.tx });
    }
    C.line(holder(sc, "net"), { title: "Bandwidth per interface", xTime: true, yLabel: "Mbit/s", yFromZero: true, legend: true, series: net });
    document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
  }

  async function poll() {
    try {
      const r = await fetch(api, { cache: "no-store" });
      if (!r.ok) throw new Error(r.status + " " + (await r.text()));
      draw(await r.json());
    } catch (e) {
      $("status").textContent = "cannot reach ddscope serve: " + e;
    }
    setTimeout(poll, 1000);
  }
  poll();
})();
