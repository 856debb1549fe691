#!/usr/bin/env python3
"""Scale-out throughput (issue 15): correlation throughput of one `serve` fed
directly, and of 1, 2, 3 `serve` shards behind the OpenTelemetry Collector
(deploy/collector-shards.yaml, load-balancing by trace id), side by side.

Workload: a capture forged by tests/hostile/hostile.py (`writers` scenario:
W writers × S samples, one DATA each, classic pcap) replayed by
tests/hostile/replay.py through an AF_PACKET socket as fast as the socket
takes it (many times real time: the capture's samples are 1 µs apart) out of
a veth pair joining namespaces A and B. Agent pc1 captures on A's end (the
frames it sends), agent pc2 on B's end (the frames it receives), both with
`--filter udp` so their own OTLP/HTTP traffic is not captured; so every
sample has two sightings (sender, receiver). Everything central (the direct
`serve`, the shards, the Collector) runs in namespace B; agents reach it at
B's veth address.

Measured per configuration: wall time from the replay's start until the
central counters reach the expected total (W×S samples judged, summed over
the shards) or stop growing for --settle seconds (then the last growth
counts, and the shortfall is shown); throughput = samples correlated
(delivered: sender's and receiver's sightings matched) and sightings (samples
judged + delivered) per second of that wall time, which includes the window. CPU seconds
(utime+stime from /proc) of every process over the run give the cost per
10^6 sightings of the agents, the Collector and the shards, which is what
extrapolates. Median of --repeat runs; configurations interleaved per repeat.

Usage: sudo bench/scaleout.py [--bin target/release/ddscope] [--writers 50] [--samples 2000]
                              [--repeat 3] [--configs direct,1,2,3] [--json out.json]
Needs root (namespaces, AF_PACKET) and the Collector built by deploy/build-collector.sh.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "hostile"))
import hostile  # noqa: E402

REPLAY = REPO / "tests" / "hostile" / "replay.py"
TICK = os.sysconf("SC_CLK_TCK")
B_IP = "10.79.0.2"
TOKEN = "bench-" + os.urandom(4).hex()


def sh(*args):
    subprocess.run(list(map(str, args)), check=True, capture_output=True)


class Link:
    """Namespaces A and B joined by a veth pair (unique names, deleted at the end)."""

    def __init__(self):
        tag = f"{os.getpid() % 100000:05d}{os.urandom(2).hex()}"
        self.a, self.b = f"ddscale-{tag}-a", f"ddscale-{tag}-b"
        self.ia, self.ib = f"xa{tag}"[:15], f"xb{tag}"[:15]

    def __enter__(self):
        sh("ip", "netns", "add", self.a)
        sh("ip", "netns", "add", self.b)
        sh("ip", "link", "add", self.ia, "netns", self.a, "type", "veth", "peer", "name", self.ib, "netns", self.b)
        for ns, i, ip in ((self.a, self.ia, "10.79.0.1/24"), (self.b, self.ib, B_IP + "/24")):
            sh("ip", "-n", ns, "addr", "add", ip, "dev", i)
            sh("ip", "-n", ns, "link", "set", i, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        return self

    def __exit__(self, *exc):
        for ns in (self.a, self.b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def run(self, ns, *cmd, **kw):
        return subprocess.Popen(["ip", "netns", "exec", ns, *map(str, cmd)], **kw)


def cpu_s(pid: int) -> float:
    """utime + stime of a process (`ip netns exec` execs the command: same pid)."""
    try:
        f = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(f[11]) + int(f[12])) / TICK


POLLER = (
    "import sys,urllib.request\n"
    "for line in sys.stdin:\n"
    "    r=urllib.request.Request(line.strip(),headers={'Authorization':'Bearer %s'})\n"
    "    try:\n"
    "        b=urllib.request.urlopen(r,timeout=10).read().decode().replace('\\n',' ')\n"
    "    except Exception as e:\n"
    "        b=''\n"
    "    print(b,flush=True)\n"
) % TOKEN


class Poller:
    """One long-lived process in namespace B fetching URLs (a process per poll would cost CPU during the run)."""

    def __init__(self, link: Link):
        self.p = link.run(link.b, sys.executable, "-c", POLLER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def text(self, url: str) -> str:
        self.p.stdin.write(url + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def json(self, url: str):
        t = self.text(url)
        try:
            return json.loads(t) if t else None
        except ValueError:
            return None

    def close(self):
        self.p.stdin.close()
        self.p.wait(10)


def wait_http(poller: Poller, url: str, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if poller.text(url):
            return
        time.sleep(0.3)
    raise SystemExit(f"scaleout: {url} did not answer within {timeout} s")


def collector_config(n: int, work: pathlib.Path) -> pathlib.Path:
    """deploy/collector-shards.yaml cut down to n shards (the resolver's hostnames and the logs exporters)."""
    text = (REPO / "deploy" / "collector-shards.yaml").read_text()
    for i in range(n + 1, 4):
        text = re.sub(rf"\n\s+- \$\{{env:DDSCOPE_SHARD{i}_GRPC[^\n]*", "", text)
        text = re.sub(rf"\n  otlphttp/shard{i}:\n(    [^\n]*\n)+", "\n", text)
    text = text.replace("exporters: [otlphttp/shard1, otlphttp/shard2, otlphttp/shard3]",
                        "exporters: [" + ", ".join(f"otlphttp/shard{i}" for i in range(1, n + 1)) + "]")
    path = work / f"collector-{n}.yaml"
    path.write_text(text)
    return path


def totals(states):
    """(samples judged, delivered): the correlator's counter and the flows' (all of them: --max-state-flows)."""
    samples = delivered = 0
    for s in states:
        samples += s.get("correlation", {}).get("samples_judged", 0)
        for f in s.get("flows", []):
            delivered += f["summary"]["delivered"]
    return samples, delivered


def one_run(a, config: str, cap: pathlib.Path, expected: int, work: pathlib.Path, otelcol: str) -> dict:
    procs: dict[str, subprocess.Popen] = {}
    logs = []
    with Link() as link:
        try:
            return measure(a, config, cap, expected, work, otelcol, link, procs, logs)
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
                    p.wait()
            for f in logs:
                f.close()


def measure(a, config, cap, expected, work, otelcol, link, procs, logs) -> dict:
    if True:
        poller = Poller(link)
        procs["_poller"] = poller.p

        def start(name, ns, *cmd, env=None):
            err = open(work / f"{config}-{name}.log", "w")
            logs.append(err)
            procs[name] = link.run(ns, *cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)

        serve_common = ["--window", a.window, "--idle", "30s", "--max-state-flows", "10000"]
        state_urls = []
        if config == "direct":
            start("serve", link.b, a.bin, "serve", "--listen", "0.0.0.0:18100", "--token", TOKEN, *serve_common)
            state_urls.append("http://127.0.0.1:18100/api/state")
            sink = ["--send-to", f"http://{B_IP}:18100", "--token", TOKEN]
        else:
            n = int(config)
            env = dict(os.environ, DDSCOPE_OTLP_IN=f"0.0.0.0:14318", DDSCOPE_COLLECTOR_METRICS_PORT="18888")
            for i in range(1, n + 1):
                start(f"shard{i}", link.b, a.bin, "serve", "--listen", f"127.0.0.1:1810{i}", "--otlp-grpc",
                      f"127.0.0.1:1441{i}", *serve_common)
                env[f"DDSCOPE_SHARD{i}_HTTP"] = f"127.0.0.1:1810{i}"
                env[f"DDSCOPE_SHARD{i}_GRPC"] = f"127.0.0.1:1441{i}"
                state_urls.append(f"http://127.0.0.1:1810{i}/api/state")
            for u in state_urls:
                wait_http(poller, u.replace("/api/state", "/healthz"))
            start("collector", link.b, otelcol, "--config", collector_config(n, work), env=env)
            wait_http(poller, "http://127.0.0.1:18888/metrics")
            sink = ["--send-otlp", f"http://{B_IP}:14318"]
        for u in state_urls:
            wait_http(poller, u.replace("/api/state", "/healthz"))
        # A queue holding the whole workload: the agents buffer what their link has not sent yet instead of
        # dropping it (at the default, 200000, the OTLP link drops most of a saturating replay: see BENCHMARKS.md).
        q = ["--max-queued-items", str(a.queue)]
        start("pc1", link.a, a.bin, "agent", "-i", link.ia, "--name", "pc1", "--filter", "udp", *q, *sink)
        start("pc2", link.b, a.bin, "agent", "-i", link.ib, "--name", "pc2", "--filter", "udp", *q, *sink)
        time.sleep(2.0)
        cpu0 = {k: cpu_s(p.pid) for k, p in procs.items() if not k.startswith("_")}
        t0 = time.perf_counter()
        rp = link.run(link.a, sys.executable, str(REPLAY), str(cap), link.ia, stdout=subprocess.PIPE, text=True)
        procs["_replay"] = rp
        last, t_last, replay_s, replay_line = (0, 0), t0, None, ""
        while True:
            time.sleep(a.poll)
            if replay_s is None and rp.poll() is not None:
                replay_s = time.perf_counter() - t0
                replay_line = rp.stdout.read().strip()
            now = time.perf_counter()
            states = [poller.json(u) for u in state_urls]
            cur = totals([s for s in states if s])
            if cur != last:
                last, t_last = cur, now
            if cur[0] >= expected and cur[1] >= expected:
                break
            if replay_s is not None and now - t_last > a.settle:
                break
            if now - t0 > a.timeout:
                break
        wall = t_last - t0 if last != (0, 0) else float("nan")
        cpu = {k: cpu_s(p.pid) - cpu0[k] for k, p in procs.items() if k in cpu0 and not k.startswith("_")}
        server = [s.get("server", {}) for s in states if s]
        if rp.poll() is None:
            rp.kill()
        poller.close()
        for k, p in procs.items():
            if not k.startswith("_"):
                p.send_signal(signal.SIGINT)
        for p in procs.values():
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in logs:
            f.close()
    samples, delivered = last
    agent_tail = {k: (work / f"{config}-{k}.log").read_text().strip().splitlines()[-1:] for k in ("pc1", "pc2")}
    return {"config": config, "expected": expected, "samples": samples, "delivered": delivered, "wall_s": wall,
            "replay_s": replay_s, "replay": replay_line, "samples_per_s": delivered / wall if wall > 0 else 0.0,
            "sightings_per_s": (samples + delivered) / wall if wall > 0 else 0.0, "cpu_s": cpu,
            "otlp_items": sum(s.get("otlp_items", 0) for s in server), "agent_tail": agent_tail}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "ddscope"))
    ap.add_argument("--collector", default=str(pathlib.Path.home() / ".cache/ddscope/otelcol-lb-0.150.0/ddscope-otelcol-lb"))
    ap.add_argument("--writers", type=int, default=50)
    ap.add_argument("--samples", type=int, default=2000, help="samples per writer")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--configs", default="direct,1,2,3")
    ap.add_argument("--window", default="1s", help="serve --window")
    ap.add_argument("--poll", type=float, default=0.5)
    ap.add_argument("--settle", type=float, default=6.0, help="stop when the totals did not grow for this long")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--queue", type=int, default=2_000_000, help="agents' --max-queued-items")
    ap.add_argument("--json")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("scaleout: needs root (network namespaces, AF_PACKET)", file=sys.stderr)
        return 2
    if not pathlib.Path(a.collector).exists():
        print(f"scaleout: no Collector at {a.collector} (deploy/build-collector.sh builds it)", file=sys.stderr)
        return 2
    work = pathlib.Path(tempfile.mkdtemp(prefix="ddscope-scaleout-"))
    cap = work / f"writers-{a.writers}x{a.samples}.pcap"
    hostile.generate("writers", a.writers, str(cap), samples=a.samples)
    expected = a.writers * a.samples
    configs = a.configs.split(",")
    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.platform()}; ddscope {a.bin}; "
          f"workload {a.writers} writers × {a.samples} samples = {expected:,} samples, 2 sightings each")
    runs: dict[str, list[dict]] = {c: [] for c in configs}
    for r in range(a.repeat):
        for c in configs:
            res = one_run(a, c, cap, expected, work, a.collector)
            runs[c].append(res)
            print(f"  repeat {r + 1} {c}: {res['samples']:,}/{expected:,} samples, {res['delivered']:,} delivered in "
                  f"{res['wall_s']:.2f} s (replay {res['replay_s']}: {res['replay']}); cpu "
                  + ", ".join(f"{k} {v:.2f}" for k, v in res["cpu_s"].items()) + "; " + " | ".join(sum(res["agent_tail"].values(), [])),
                  flush=True)
    print("\n| configuration | samples correlated (delivered) / judged / expected | wall s | correlated samples/s | sightings/s | "
          "CPU s per 10^6 sightings: agents / Collector / shards (sum) |")
    print("|---|---|---|---|---|---|")
    for c in configs:
        rs = runs[c]
        med = lambda key: statistics.median(x[key] for x in rs)  # noqa: E731

        def per_m(pred):
            vals = []
            for x in rs:
                s = x["samples"] + x["delivered"]
                vals.append(sum(v for k, v in x["cpu_s"].items() if pred(k)) / max(s, 1) * 1e6)
            return statistics.median(vals)
        agents = per_m(lambda k: k in ("pc1", "pc2"))
        col = per_m(lambda k: k == "collector")
        shards = per_m(lambda k: k.startswith("shard") or k == "serve")
        name = "one serve, direct" if c == "direct" else f"{c} shard(s) behind the Collector"
        print(f"| {name} | {med('delivered'):,.0f} / {med('samples'):,.0f} / {expected:,} | {med('wall_s'):.2f} | {med('samples_per_s'):,.0f} | "
              f"{med('sightings_per_s'):,.0f} | {agents:.2f} / {col if c != 'direct' else 0:.2f} / {shards:.2f} |")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(runs, indent=1))
    print(f"\nlogs in {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
