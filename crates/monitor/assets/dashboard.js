// Live dashboard: polls /api/state every second and redraws.
//
// Everything in the state document can come from an agent (names, topic
// rows, counters), and agents are only as trustworthy as the token: every
// value reaches the page as text (textContent, canvas fillText), never as
// HTML. The server's Content-Security-Policy forbids inline script as a
// second line of defence.
(function () {
  "use strict";
  const C = window.DDSCharts;
  const q = new URLSearchParams(location.search);
  const token = q.get("token");
  const api = "api/state" + (token ? "?token=" + encodeURIComponent(token) : "");
  const $ = (id) => document.getElementById(id);
  const text = (v) => (v === undefined || v === null ? "" : typeof v === "object" ? JSON.stringify(v) : String(v));
  const el = (tag, cls, content) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (content !== undefined) e.textContent = text(content);
    return e;
  };
  const f = (v, d) => (v === null || v === undefined || Number.isNaN(+v) ? "" : (+v).toFixed(d === undefined ? 2 : d));
  // A cell is a value (shown as text) or {bad: value} (shown as text, highlighted).
  const bad = (v) => (v ? { bad: v } : 0);
  function table(head, rows, left) {
    const t = el("table");
    const hr = el("tr");
    head.forEach((h, i) => hr.appendChild(el("th", i < left ? "l" : "", h)));
    t.appendChild(hr);
    for (const r of rows) {
      const tr = el("tr");
      r.forEach((c, i) => {
        const td = el("td", i < left ? "l" : "");
        if (c !== null && typeof c === "object" && "bad" in c) td.appendChild(el("span", "bad", c.bad));
        else td.textContent = text(c);
        tr.appendChild(td);
      });
      t.appendChild(tr);
    }
    return t;
  }
  const put = (id, node) => $(id).replaceChildren(node);
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
  const arr = (v) => (Array.isArray(v) ? v : []);
  function bw(b) { return b >= 1e9 ? f(b / 1e9) + " Gb/s" : b >= 1e6 ? f(b / 1e6) + " Mb/s" : b >= 1e3 ? f(b / 1e3, 1) + " kb/s" : f(b, 0) + " b/s"; }

  function draw(s) {
    const agents = arr(s.agents);
    const flows = arr(s.flows);
    const lim = s.limits || {};
    const running = agents.filter((a) => a.running).length;
    $("status").textContent = `${agents.length} agents (${running} running), ${lim.flows_total ?? flows.length} flows, ${s.correlation.samples_judged} samples judged, window ${s.window_s} s — updated ${new Date().toLocaleTimeString("en-GB", { hour12: false })}`;
    put("agent-table", table(["agent", "state", "last batch (s ago)", "batches", "items", "lost batches", "dropped items", "rate-limited", "frames", "kernel dropped", "if_dropped", "skipped / malformed", "evicted (caps)"],
      agents.map((a) => {
        const c = (a.counters && typeof a.counters === "object") ? a.counters : {};
        const k = (c.kernel && typeof c.kernel === "object") ? c.kernel : {};
        return [a.name, a.running ? "running" : "stopped", f(a.last_seen_s, 1), a.batches, a.items,
          bad(a.lost_batches), bad(a.dropped_items), bad(a.rate_limited), c.frames, k.dropped ? bad(k.dropped) : k.dropped, k.if_dropped, c.skipped, c.evicted ? bad(c.evicted) : ""];
      }), 2));
    const sv = s.server || {};
    $("server-line").textContent = `server: ${sv.connections_open ?? 0} connections open; refused ${sv.connections_refused ?? 0} over the limit, ` +
      `${sv.unauthorized ?? 0} unauthorized, ${sv.rate_limited ?? 0} rate-limited, ${sv.too_large ?? 0} too large, ${sv.bad_batches ?? 0} bad batches, ` +
      `${(sv.header_timeouts ?? 0) + (sv.body_timeouts ?? 0) + (sv.idle_closed ?? 0)} timed out; ` +
      `latency series evicted ${lim.series_evicted ?? 0}, topic rows not shown ${lim.topic_rows_truncated ?? 0}` +
      (s.correlation_evicted ? `; correlation: ${s.correlation_evicted}` : "");
    const trows = [];
    for (const a of agents) for (const t of arr(a.topics)) {
      if (!t || typeof t !== "object") continue;
      const nodes = (v) => arr(v).map(text).join(", ");
      trows.push([a.name, t.topic_name, t.domain ?? "", t.type_name, nodes(t.writer_nodes), nodes(t.reader_nodes), (t.rate_now_hz === null || t.rate_now_hz === undefined ? text(t.rate_now_kind ?? "") : f(t.rate_now_hz)), bw(t.bandwidth_now_bps), f(t.mean_sample_size, 0), t.max_sample_size,
        f(t.rtps_frags_per_sample, 1), f(t.ip_frags_per_sample, 1), t.samples, t.incomplete_samples, t.retransmitted_fragments, t.sn_gaps, t.heartbeats, t.acknacks, t.nack_frags]);
    }
    if (trows.length) {
      put("topic-table", table(["agent", "topic", "domain", "type", "writer nodes", "reader nodes", "Hz", "bandwidth", "mean B", "max B", "frags", "IP frags", "samples", "incomplete", "retx frags", "sn gaps", "HB", "ACKNACK", "NACK_FRAG"], trows, 6));
    } else {
      $("topic-table").textContent = "no DDS user traffic yet";
    }
    put("flow-table", table(["topic", "sender → receiver", "samples", "delivered", "lost", "repaired", "retx frags", "message mean ms", "p99 ms", "max ms", "submsg mean ms", "|jitter| mean ms", "in time", "late"],
      flows.map((fl) => {
        const x = fl.summary, L = Object.fromEntries(arr(x.layers)), m = L.message || {}, sm = L.submessage || {};
        return [x.topic, x.sender + " → " + x.receiver, x.samples, x.delivered, bad(x.lost), x.retransmitted_samples, x.retransmitted_frags,
          f(m.mean_ms, 3), f(m.p99_ms, 3), f(m.max_ms, 3), f(sm.mean_ms, 3), x.jitter_abs && x.jitter_abs.count ? f(x.jitter_abs.mean_ms, 3) : "", x.in_time, x.late];
      }), 2));
    $("flow-note").textContent = (lim.flows_total || 0) > flows.length
      ? `the ${flows.length} flows with the most samples of ${lim.flows_total} are shown (/api/state caps its size)` : "";
    $("warnings").replaceChildren(...arr(s.warnings).map((w) => el("div", "warn", w)));
    const fc = $("flow-charts");
    const topics = [...new Set(flows.map((x) => x.summary.topic))];
    for (const t of topics) {
      const fls = flows.filter((x) => x.summary.topic === t);
      const name = (x) => x.summary.sender + "→" + x.summary.receiver;
      // One time axis for the topic's panels: serve keeps a number of points per series, so a
      // fragmented topic's submessages reach back seconds where its messages reach back a minute.
      // Every panel spans the time any of them covers (a panel whose series starts later shows
      // it starting later, not stretched over the whole width).
      const all = fls.flatMap((x) => [x.message, x.submessage, x.size]).filter((p) => p.length);
      const win = all.length ? [Math.min(...all.map((p) => p[0][0])), Math.max(...all.map((p) => p[p.length - 1][0]))] : null;
      const xRange = win && win[1] > win[0] ? win : undefined;
      C.line(holder(fc, "msg:" + t), { title: t + ": DDS message latency", xTime: true, xRange, yLabel: "ms", yFromZero: true, legend: true,
        series: fls.map((x) => ({ name: name(x), points: x.message, mode: "points" })) });
      // p50 and p99 of each second of sample time (serve computes them from every sample, not the
      // thinned points above), and the CDF of the whole run so far
      const secs = fls.filter((x) => arr(x.seconds).length);
      if (secs.length) {
        C.line(holder(fc, "pct:" + t), { title: t + ": DDS message latency, p50 and p99 per second", xTime: true, xRange, yLabel: "ms", yFromZero: true, legend: true,
          series: secs.flatMap((x) => [
            { name: name(x) + " p50", points: arr(x.seconds).map((q) => [q[0] + 0.5, q[1]]) },
            { name: name(x) + " p99", points: arr(x.seconds).map((q) => [q[0] + 0.5, q[2]]) },
          ]) });
      }
      const cdfs = fls.filter((x) => arr(x.cdf).length);
      if (cdfs.length) {
        C.cdf(holder(fc, "cdf:" + t), { title: t + ": DDS message latency, CDF of the run", xLabel: "ms", legend: true,
          series: cdfs.map((x) => ({ name: name(x), points: arr(x.cdf) })) });
      }
      if (fls.some((x) => x.submessage.length)) {
        C.line(holder(fc, "sub:" + t), { title: t + ": DDS submessage latency", xTime: true, xRange, yLabel: "ms", yFromZero: true, legend: true,
          series: fls.map((x) => ({ name: name(x), points: x.submessage, mode: "points" })) });
      }
      C.line(holder(fc, "size:" + t), { title: t + ": payload size", xTime: true, xRange, yLabel: "bytes", yFromZero: true, legend: true,
        series: fls.map((x) => ({ name: name(x), points: x.size, mode: "points" })) });
    }
    drawRos(s, flows);
    drawIncidents(s.incidents);
    const sc = $("system-charts");
    C.line(holder(sc, "cpu"), { title: "CPU utilisation", xTime: true, yLabel: "%", yRange: [0, 100], legend: true,
      series: agents.map((a) => ({ name: text(a.name), points: arr(a.cpu) })) });
    const net = [];
    for (const a of agents) for (const n of arr(a.network)) {
      // idle interfaces (no traffic in the window shown) add legend entries and no line
      if (n.device === "lo" || ![...arr(n.rx), ...arr(n.tx)].some((p) => p[1] > 0)) continue;
      net.push({ name: text(a.name) + " " + text(n.device) + " rx", points: arr(n.rx) }, { name: text(a.name) + " " + text(n.device) + " tx", points: arr(n.tx) });
    }
    C.line(holder(sc, "net"), { title: "Bandwidth per interface", xTime: true, yLabel: "Mbit/s", yFromZero: true, legend: true, series: net });
    document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
  }

  // The live incident feed (serve judges each window of sample time as `latency --explain` does).
  function drawIncidents(x) {
    if (!x) {
      $("incident-causes").textContent = "";
      return;
    }
    const st = x.stats || {};
    const causes = arr(x.by_cause);
    if (causes.length) {
      put("incident-causes", table(["cause", "incidents", "over budget", "lost", "excess ms"], causes.map((c) => [text(c.cause), c.incidents, c.over_budget, bad(c.lost), f(c.excess_ms, 1)]), 1));
    } else {
      $("incident-causes").textContent = (st.windows_judged ? "no incident in " + st.samples + " samples judged" : "no window judged yet") + " (windows of " + x.window_s + " s of sample time)";
    }
    $("incident-note").textContent = "windows judged " + (st.windows_judged || 0) + ", open " + (x.open_windows || 0) + ", samples " + (st.samples || 0) +
      (st.late_rows ? ", rows after their window was judged " + st.late_rows : "") + (st.samples_not_kept ? ", samples not judged (caps) " + st.samples_not_kept : "") +
      (arr(x.budgets).length ? "; budgets " + arr(x.budgets).map((b) => text(b.topic) + "=" + text(b.limit) + " (" + text(b.measure || "e2e") + ")").join(", ") : "");
    const rows = arr(x.recent).map((i) => [text(i.topic), i.sender + " → " + i.receiver, i.sn, arr(i.kinds).join(", "), text(i.cause), text(i.layer || ""),
      i.e2e_ns === null || i.e2e_ns === undefined ? "" : f(i.e2e_ns / 1e6, 3), text(i.evidence)]);
    if (rows.length) put("incident-table", table(["topic", "sender → receiver", "sn", "kinds", "cause", "layer", "e2e ms", "evidence"], rows, 4));
    else $("incident-table").textContent = "";
  }

  // The ROS 2 layers in the order they add up (wire: ros_publish + dds_send + message +
  // dds_receive + executor = ros_e2e; same host: ros_publish + dds_local + executor).
  const ROS_LAYERS = ["ros_publish", "dds_send", "message", "dds_receive", "dds_local", "executor"];
  function drawRos(s, flows) {
    const ros = flows.filter((fl) => arr(fl.summary.layers).some((l) => l[0] === "ros_e2e" || l[0] === "ros_publish"));
    const rows = ros.map((fl) => {
      const x = fl.summary, L = Object.fromEntries(arr(x.layers));
      const med = (n) => (L[n] && L[n].count ? f(L[n].p50_ms, 3) : "");
      return [x.topic, x.sender + " → " + x.receiver, (L.ros_e2e || {}).count || 0, ...ROS_LAYERS.map(med), med("ros_e2e"), med("callback")];
    });
    if (rows.length) {
      put("ros-table", table(["topic", "sender → receiver", "joined", ...ROS_LAYERS.map((n) => n + " p50 ms"), "ros_e2e p50 ms", "callback p50 ms"], rows, 2));
    } else {
      $("ros-table").textContent = "no ros2_tracing items yet (agent --trace-live)";
    }
    const j = (s.ros2 && s.ros2.join) || null;
    $("ros-note").textContent = j ? "join: " + Object.entries(j).filter((e) => typeof e[1] === "number" && e[1]).map((e) => e[0] + " " + e[1]).join(", ") : "";
    const rc = $("ros-charts");
    const topics = [...new Set(ros.map((x) => x.summary.topic))];
    for (const t of topics) {
      const fls = ros.filter((x) => x.summary.topic === t);
      C.stacked(holder(rc, "ros:" + t), { title: t + ": median per layer (stacked)", unit: "ms",
        rows: fls.map((x) => {
          const L = Object.fromEntries(arr(x.summary.layers));
          return { name: x.summary.sender + "→" + x.summary.receiver,
            parts: ROS_LAYERS.filter((n) => L[n] && L[n].count).map((n) => ({ name: n, value: +L[n].p50_ms })) };
        }) });
    }
    const ch = (s.ros2 && s.ros2.chains) || null;
    const crows = [];
    if (ch && ch.chain) {
      const c = ch.chain;
      crows.push([arr(c.path).join(" → "), "end to end", c.instances, f(c.e2e.p50_ms, 3), f(c.e2e.p99_ms, 3), f(c.e2e.max_ms, 3)]);
      for (const h of arr(c.hops)) for (const l of arr(h.layers)) crows.push(["  hop " + h.hop + " " + text(h.topic), l[0], l[1].count, f(l[1].p50_ms, 3), f(l[1].p99_ms, 3), f(l[1].max_ms, 3)]);
    }
    if (ch) for (const p of arr(ch.paths)) crows.push([arr(p.topics).join(" → "), "found (e2e)", p.count, f(p.e2e.p50_ms, 3), f(p.e2e.p99_ms, 3), f(p.e2e.max_ms, 3)]);
    if (crows.length) put("chain-table", table(["chain", "layer", "count", "p50 ms", "p99 ms", "max ms"], crows, 2));
    else $("chain-table").textContent = "no chain yet (a publish made inside a traced subscription callback)";
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
