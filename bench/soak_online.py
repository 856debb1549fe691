#!/usr/bin/env python3
"""Online soak: forged traffic on a monitored link through a running `ddscope
agent` streaming to a running `ddscope serve` — peak RSS of both, /healthz
response times while the flood lasts, and what each says it evicted.

Two network namespaces joined by a veth pair (unique names, deleted at the
end). In B: `serve` on loopback and `agent -i <veth>` sending to it. In A:
tests/hostile/replay.py sends every frame of a capture forged by
tests/hostile/hostile.py (N distinct writers, or N topics announced over
SEDP) out of the veth as fast as the socket takes them. While it runs, a
prober in B asks serve's /healthz every 200 ms; peak RSS is each process's
VmHWM from /proc when the run ends.

Usage: bench/soak_online.py [--bin target/release/ddscope] [--scenario writers|topics]
                            [--n 1000000] [--repeat 1] [--agent-arg=--max-writers=1000 ...]
Prints a Markdown table row per scenario and the closing lines of both.
Needs root (namespaces, AF_PACKET).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "hostile"))
import hostile  # noqa: E402

REPLAY = REPO / "tests" / "hostile" / "replay.py"


def sh(*args):
    subprocess.run(list(map(str, args)), check=True, capture_output=True)


class Link:
    """Namespaces A and B joined by a veth pair."""

    def __init__(self):
        tag = f"{os.getpid() % 100000:05d}{os.urandom(2).hex()}"
        self.a, self.b = f"ddsoak-{tag}-a", f"ddsoak-{tag}-b"
        self.ia, self.ib = f"sa{tag}"[:15], f"sb{tag}"[:15]

    def __enter__(self):
        sh("ip", "netns", "add", self.a)
        sh("ip", "netns", "add", self.b)
        sh("ip", "link", "add", self.ia, "netns", self.a, "type", "veth", "peer", "name", self.ib, "netns", self.b)
        for ns, i, ip in ((self.a, self.ia, "10.78.0.1/24"), (self.b, self.ib, "10.78.0.2/24")):
            sh("ip", "-n", ns, "addr", "add", ip, "dev", i)
            sh("ip", "-n", ns, "link", "set", i, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        return self

    def __exit__(self, *exc):
        for ns in (self.a, self.b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def run(self, ns, *cmd, **kw):
        return subprocess.Popen(["ip", "netns", "exec", ns, *map(str, cmd)], **kw)


def vm_hwm_mb(pid: int) -> float:
    """Peak resident set size of a running process (VmHWM), MB."""
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child_pid(wrapper: subprocess.Popen) -> int:
    """`ip netns exec` execs the command: same pid."""
    return wrapper.pid


def probe_loop(link: Link, port: int, stop: threading.Event, out: list[float]):
    """/healthz round trips (ms) from inside namespace B, every 200 ms."""
    code = (
        "import sys,time,urllib.request\n"
        "while True:\n"
        "    t=time.perf_counter()\n"
        "    try:\n"
        f"        urllib.request.urlopen('http://127.0.0.1:{port}/healthz',timeout=10).read()\n"
        "        print(f'{(time.perf_counter()-t)*1000:.2f}',flush=True)\n"
        "    except Exception as e:\n"
        "        print('fail',flush=True)\n"
        "    time.sleep(0.2)\n"
    )
    p = link.run(link.b, sys.executable, "-c", code, stdout=subprocess.PIPE, text=True)
    try:
        while not stop.is_set():
            line = p.stdout.readline()
            if not line:
                break
            out.append(float("inf") if line.strip() == "fail" else float(line))
    finally:
        p.kill()
        p.wait()


def get_json(link: Link, url: str):
    cp = subprocess.run(["ip", "netns", "exec", link.b, sys.executable, "-c",
                         f"import urllib.request;print(urllib.request.urlopen({url!r},timeout=30).read().decode())"],
                        capture_output=True, text=True, timeout=60)
    return json.loads(cp.stdout) if cp.returncode == 0 else None


def soak(binary: str, scenario: str, n: int, agent_args: list[str], serve_args: list[str], work: pathlib.Path, repeat: int):
    cap = work / f"{scenario}-{n}.pcap"
    if not cap.exists():
        hostile.generate(scenario, n, str(cap))
    frames = (cap.stat().st_size - 24)  # refined below from the replay line
    port = 19000 + os.getpid() % 1000
    with Link() as link:
        serve_err = open(work / "serve.err", "w")
        agent_err = open(work / "agent.err", "w")
        serve = link.run(link.b, binary, "serve", "--listen", f"127.0.0.1:{port}", *serve_args,
                         stdout=subprocess.DEVNULL, stderr=serve_err)
        time.sleep(1.0)
        agent = link.run(link.b, binary, "agent", "-i", link.ib, "--name", "soak", "--send-to", f"http://127.0.0.1:{port}",
                         *agent_args, stdout=subprocess.DEVNULL, stderr=agent_err)
        time.sleep(2.0)
        stop = threading.Event()
        probes: list[float] = []
        prober = threading.Thread(target=probe_loop, args=(link, port, stop, probes), daemon=True)
        prober.start()
        replay_lines = []
        t0 = time.perf_counter()
        for _ in range(repeat):
            cp = subprocess.run(["ip", "netns", "exec", link.a, sys.executable, str(REPLAY), str(cap), link.ia],
                                capture_output=True, text=True, timeout=3600)
            replay_lines.append(cp.stdout.strip() or cp.stderr.strip())
        flood_s = time.perf_counter() - t0
        time.sleep(8.0)  # the agent's last batches and serve's window
        state = get_json(link, f"http://127.0.0.1:{port}/api/state")
        stop.set()
        agent_rss, serve_rss = vm_hwm_mb(child_pid(agent)), vm_hwm_mb(child_pid(serve))
        agent.send_signal(signal.SIGINT)
        agent.wait(60)
        serve.send_signal(signal.SIGINT)
        serve.wait(60)
        prober.join(5)
        serve_err.close()
        agent_err.close()
    sent = sum(int(l.split()[1]) for l in replay_lines if l.startswith("replay:"))
    ok = [p for p in probes if p != float("inf")]
    ok.sort()
    fails = len(probes) - len(ok)
    p50 = ok[len(ok) // 2] if ok else float("nan")
    worst = ok[-1] if ok else float("nan")
    limits = (state or {}).get("limits", {})
    agent_tail = (work / "agent.err").read_text().strip().splitlines()[-6:]
    serve_tail = (work / "serve.err").read_text().strip().splitlines()[-4:]
    return {
        "scenario": scenario, "n": n, "frames_sent": sent, "flood_s": flood_s, "agent_rss_mb": agent_rss,
        "serve_rss_mb": serve_rss, "healthz_p50_ms": p50, "healthz_max_ms": worst, "healthz_probes": len(probes),
        "healthz_failures": fails, "replay": replay_lines, "serve_limits": limits, "agent_tail": agent_tail,
        "serve_tail": serve_tail,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "ddscope"))
    ap.add_argument("--scenario", action="append", choices=["writers", "topics"])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=1, help="replay the capture this many times")
    ap.add_argument("--agent-arg", action="append", default=[], help="extra agent option (repeatable)")
    ap.add_argument("--serve-arg", action="append", default=[], help="extra serve option (repeatable)")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("soak_online: needs root (network namespaces, AF_PACKET)", file=sys.stderr)
        return 2
    work = pathlib.Path(tempfile.mkdtemp(prefix="ddscope-soak-online-"))
    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.platform()}; ddscope {a.bin}")
    print("| scenario | forged | frames sent | flood s | agent peak RSS MB | serve peak RSS MB | /healthz p50 / max ms (probes, failures) |")
    print("|---|---|---|---|---|---|---|")
    results = []
    for sc in a.scenario or ["writers"]:
        r = soak(a.bin, sc, a.n, a.agent_arg, a.serve_arg, work, a.repeat)
        results.append(r)
        print(f"| {sc} | {r['n']:,} | {r['frames_sent']:,} | {r['flood_s']:.1f} | {r['agent_rss_mb']:.0f} | {r['serve_rss_mb']:.0f} | "
              f"{r['healthz_p50_ms']:.1f} / {r['healthz_max_ms']:.1f} ({r['healthz_probes']}, {r['healthz_failures']}) |")
    for r in results:
        print(f"\n{r['scenario']}: replay: {'; '.join(r['replay'])}")
        print("agent closing lines:\n  " + "\n  ".join(r["agent_tail"]))
        print("serve closing lines:\n  " + "\n  ".join(r["serve_tail"]))
        print("serve /api/state limits: " + json.dumps(r["serve_limits"]))
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
