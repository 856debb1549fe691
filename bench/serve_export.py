#!/usr/bin/env python3
"""CPU cost of what `ddscope serve` exports (issue 26): per exported sample and per span.

Workload: two agents' sightings posted straight to serve's ingest API (no
capture, no agents): W writers × S samples, each one DATA seen by pc1 at t
and by pc2 1 ms later, in batches of --batch items each ending with the agent's watermark (as an
agent sends them), then a watermark past the window, so serve correlates
W×S deliveries (one message-level row each) as they come.
The batches are built before serve starts; serve's CPU time (user + system
of all its threads, from wait4's rusage once it exited) is all that is
measured. Each run: start serve, post everything, wait until every sample is
judged (/api/state), read its export counters (/metrics), SIGINT (the push
sinks flush; the closing lines report what they delivered and dropped).

Configurations (interleaved per repeat, median of --repeat runs):
  bare       --no-metrics: correlation only, no registry
  metrics    the /metrics registry (serve's default)
  influx     + --export influx=… to a real InfluxDB 1.x (influxd on PATH)
  otlp-none  + --export otlp=… with --trace-sample none (the sink, no spans)
  otlp-all   + --export otlp=… with --trace-sample all (one trace per sample)
The OTLP receiver is a small HTTP server in this script answering 200 to
every POST (what a Collector costs is its own business, bench/scaleout.py).

Derived: registry per sample = (metrics − bare) / samples; InfluxDB per
exported sample = (influx − metrics) / samples; per span = (otlp-all −
otlp-none) / spans made (ddscope_trace_export_total{what="spans"}).

Usage: bench/serve_export.py [--bin target/release/ddscope] [--writers 20] [--samples 5000]
                             [--repeat 3] [--pace DELIVERIES_PER_S] [--configs bare,metrics,influx,otlp-none,otlp-all] [--json out.json]
"""
from __future__ import annotations

import argparse
import http.server
import json
import os
import pathlib
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

REPO = pathlib.Path(__file__).resolve().parent.parent
WINDOW_NS = 1_000_000_000


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sample(w, sn, t):
    return {"k": "sample", "w": w, "sn": sn, "topic": ["rt/bench", "std_msgs::msg::dds_::String_"], "tt": 1, "first": t, "first_ip": t,
            "last": t, "complete": True, "size": 100, "fexp": 1, "fseen": 1, "ipf": 1, "retx": 0, "retx_bytes": 0, "vendor": 0x0110}


def bodies(writers, samples, batch):
    """{agent: [batch bodies]}; pc2 sees each sample 1 ms after pc1."""
    ws = [f"0110aaaa0102030405{i:06x}00001203" for i in range(writers)]
    out = {}
    for agent, dt in (("pc1", 0), ("pc2", 1_000_000)):
        items = [sample(w, sn, 1_000_000_000 + sn * 1_000_000 + i * 1000 + dt) for sn in range(1, samples + 1) for i, w in enumerate(ws)]
        bs = []
        seq = 0
        for k in range(0, len(items), batch):
            seq += 1
            chunk = items[k:k + batch]
            # The agent's watermark with every batch: serve judges as the sightings come, not all at the end.
            chunk = chunk + [{"k": "watermark", "t": max(i["last"] for i in chunk)}]
            bs.append(json.dumps({"agent": agent, "seq": seq, "sent_ns": 0, "items": chunk, "dropped_items": 0, "system": [], "last": False}).encode())
        end = 1_000_000_000 + (samples + 10) * 1_000_000 + 2 * WINDOW_NS
        bs.append(json.dumps({"agent": agent, "seq": seq + 1, "sent_ns": 0, "items": [{"k": "watermark", "t": end}], "dropped_items": 0, "system": [], "last": False}).encode())
        out[agent] = bs
    return out


class Sink(http.server.BaseHTTPRequestHandler):
    """OTLP/HTTP receiver: reads the body, answers 200 with an empty protobuf."""
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        self.rfile.read(n)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


def start_influxd(tmp):
    exe = shutil.which("influxd")
    if not exe:
        sys.exit("influxd not on PATH (configuration influx)")
    rpc, port = free_port(), free_port()
    d = pathlib.Path(tmp) / "influxdb"
    d.mkdir(exist_ok=True)
    (d / "influxdb.conf").write_text(f"""reporting-enabled = false
bind-address = "127.0.0.1:{rpc}"
[meta]
  dir = "{d}/meta"
[data]
  dir = "{d}/data"
  wal-dir = "{d}/wal"
  query-log-enabled = false
[monitor]
  store-enabled = false
[http]
  bind-address = "127.0.0.1:{port}"
  log-enabled = false
""")
    p = subprocess.Popen([exe, "-config", str(d / "influxdb.conf")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=1).status == 204:
                return p, port
        except OSError:
            time.sleep(0.1)
    sys.exit("influxd did not start")


def post(port, agent, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/ingest", data=body,
                                 headers={"X-Ddscope-Agent": agent, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.status == 204, r.status


def metric(text, name, **labels):
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
    return None


def run_once(exe, config, data, total, influx_port, otlp_port, pace=0.0, batch=2000):
    port = free_port()
    args = [exe, "serve", "--listen", f"127.0.0.1:{port}", "--window", "1s", "--idle", "600s", "--agent-rate", "100000", "--max-body", "256MiB"]
    args += {
        "bare": ["--no-metrics"],
        "metrics": [],
        "influx": ["--export", f"influx=http://127.0.0.1:{influx_port}/bench"],
        "otlp-none": ["--export", f"otlp=http://127.0.0.1:{otlp_port}", "--trace-sample", "none"],
        "otlp-all": ["--export", f"otlp=http://127.0.0.1:{otlp_port}", "--trace-sample", "all"],
    }[config]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
            break
        except OSError:
            time.sleep(0.05)
    t0 = time.time()
    for k, (a, b) in enumerate(zip(data["pc1"], data["pc2"])):
        if pace:
            # At most `pace` deliveries per second (a sink's server that cannot take a burst drops it: counted).
            ahead = k * batch / pace - (time.time() - t0)
            if ahead > 0:
                time.sleep(ahead)
        post(port, "pc1", a)
        post(port, "pc2", b)
    while True:
        st = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/state", timeout=30).read())
        if st["correlation"]["samples_judged"] >= total:
            break
        if time.time() - t0 > 600:
            sys.exit(f"{config}: only {st['correlation']['samples_judged']} of {total} samples judged")
        time.sleep(0.2)
    wall = time.time() - t0
    spans = None
    if config != "bare":
        # A label set's first exposition shows zeros (so that rate() counts its first observations): read twice.
        for _ in range(2):
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
        spans = metric(text, "ddscope_trace_export_total", what="spans")
        delivered = metric(text, "ddscope_latency_samples_total", status="delivered")
        assert delivered == total, f"{config}: {delivered} delivered of {total}"
    p.send_signal(signal.SIGINT)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = status
    err = p.stderr.read()
    sinks = re.findall(r"serve: (\w+): (\d+) records accepted, (\d+) delivered, (\d+) dropped \(queue full\), (\d+) dropped batches, (\d+) rejected, (\d+) still queued", err)
    for s in sinks:
        if any(int(x) for x in s[3:]):
            print(f"  {config}: sink {s[0]} dropped or left records: {s}", file=sys.stderr)
    return {"cpu_s": ru.ru_utime + ru.ru_stime, "wall_s": wall, "spans": spans, "sinks": sinks}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("DDSCOPE_BIN", str(REPO / "target/release/ddscope")))
    ap.add_argument("--writers", type=int, default=20)
    ap.add_argument("--samples", type=int, default=5000)
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--configs", default="bare,metrics,influx,otlp-none,otlp-all")
    ap.add_argument("--pace", type=float, default=0.0, help="deliveries per second posted (0: as fast as serve takes them)")
    ap.add_argument("--json")
    a = ap.parse_args()
    configs = a.configs.split(",")
    total = a.writers * a.samples
    data = bodies(a.writers, a.samples, a.batch)
    with tempfile.TemporaryDirectory() as tmp:
        influx = (None, None)
        if "influx" in configs:
            influx = start_influxd(tmp)
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        results = {c: [] for c in configs}
        try:
            for r in range(a.repeat):
                for c in configs:
                    res = run_once(a.bin, c, data, total, influx[1], srv.server_address[1], a.pace, a.batch)
                    results[c].append(res)
                    print(f"repeat {r + 1} {c}: {res['cpu_s']:.2f} CPU s, {res['wall_s']:.2f} s wall, spans {res['spans']}, sinks {res['sinks']}", file=sys.stderr)
        finally:
            srv.shutdown()
            if influx[0]:
                influx[0].terminate()
                influx[0].wait(10)
    med = {c: statistics.median(x["cpu_s"] for x in v) for c, v in results.items()}
    pace = f", posted at {a.pace:.0f} deliveries/s" if a.pace else ", posted as fast as serve takes them"
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs; {a.writers} writers × {a.samples} samples = {total} deliveries{pace}, median of {a.repeat}")
    print("| configuration | serve CPU s (median) | µs per delivery |")
    print("|---|---|---|")
    for c in configs:
        print(f"| {c} | {med[c]:.2f} | {med[c] / total * 1e6:.2f} |")
    derived = {}
    if "bare" in med and "metrics" in med:
        derived["registry_us_per_sample"] = (med["metrics"] - med["bare"]) / total * 1e6
    if "influx" in med and "metrics" in med:
        derived["influx_us_per_sample"] = (med["influx"] - med["metrics"]) / total * 1e6
    if "otlp-all" in med and "otlp-none" in med:
        spans = statistics.median(x["spans"] for x in results["otlp-all"])
        derived["spans_per_sample"] = spans / total
        derived["otlp_us_per_span"] = (med["otlp-all"] - med["otlp-none"]) / spans * 1e6
        derived["otlp_us_per_traced_sample"] = (med["otlp-all"] - med["otlp-none"]) / total * 1e6
    for k, v in derived.items():
        print(f"{k}: {v:.3f}")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps({"results": results, "median_cpu_s": med, "derived": derived, "total": total}, indent=1))


if __name__ == "__main__":
    main()
