#!/usr/bin/env python3
"""Monitoring overhead (thesis Table 4.5): application-level /image and /drive
latency of the simple robotic application (publish -> receive, from the
workload's ground truth) without monitoring and with a ddscope agent on both
hosts, plus the agents' CPU use.

Usage: sudo bench/overhead.py [--duration 30s] [--repeat 3] [--only CONFIG,...]

The lab's own tcpdump capture is switched off in every run, so the only
monitoring is the agents. Configurations, interleaved and repeated:
  none          no monitoring
  agent            ddscope agent (whole frames, packets in 100 ms blocks) + Prometheus exporter, on both hosts
  agent-idle       the same with --sched idle (the agent runs only on a core the workload leaves free)
  agent-header     the same in header-only mode (--snaplen 256)
  agent-immediate  the same with libpcap immediate mode (a wakeup per packet)
  agent-kfilter    the same with the in-kernel filter (--kernel-filter: an eBPF socket filter leaves out
                   the IP fragments that carry nothing the analyses read)
  agent-records    the same with in-kernel records (--kernel-records: the socket receives only discovery
                   and non-RTPS frames; every other frame is reported by the eBPF socket filter as one
                   record of its time, length and the bytes the analyses read, and rebuilt in user space)
  socket-only      an agent whose capture filter accepts nothing (--filter len<1): what the mere
                   existence of the packet socket costs (the kernel still clones every frame for it)
  tc-probe         no monitor; lab/bpf/tc_probe.c at clsact ingress and egress of both hosts' link (reads
                   each frame's first 64 bytes, counts): the floor cost of a capture from a tc hook
  tcpdump          no agents; the lab's tcpdump capture on both hosts instead (-B 64 MiB, whole frames)
Prints a Markdown table: mean, std, p99, max (ms) per topic and configuration
over all samples of all repeats, and the monitor's CPU (agent or tcpdump, user
+ system, busiest host) as a share of one core.
"""
import argparse
import json
import os
import re
import pathlib
import statistics
import subprocess
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent
DDSCOPE = os.environ.get("DDSCOPE_BIN", str(REPO / "target" / "release" / "ddscope"))
CONFIGS = {
    "none": None,
    "agent": "--export prometheus=127.0.0.1:9464",
    "agent-idle": "--sched idle --export prometheus=127.0.0.1:9464",
    "agent-header": "--snaplen 256 --export prometheus=127.0.0.1:9464",
    "agent-immediate": "--immediate --export prometheus=127.0.0.1:9464",
    "agent-kfilter": "--kernel-filter --export prometheus=127.0.0.1:9464",
    "agent-records": "--kernel-records --export prometheus=127.0.0.1:9464",
    "socket-only": "--filter len<1 --export prometheus=127.0.0.1:9464",
    "tc-probe": "tc-probe",
    "tcpdump": "tcpdump",
}


def latencies(run):
    pub, rcv = {}, {}
    for f in run.glob("*.truth.jsonl"):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            key = (r["writer_guid"], r["seq"])
            if r["event"] == "publish":
                pub[key] = r
            elif r["host"] == "pc2":
                rcv.setdefault(key, r["t_ns"])
    out = {"/image": [], "/drive": []}
    for k, p in pub.items():
        if p["topic"] in out and k in rcv:
            out[p["topic"]].append((rcv[k] - p["t_ns"]) / 1e6)
    return out


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(q / 100 * (len(v) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", default="30s")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", help="comma-separated configurations (default: all; none is always run)")
    a = ap.parse_args()
    if a.only:
        wanted = {"none", *a.only.split(",")}
        unknown = wanted - CONFIGS.keys()
        if unknown:
            raise SystemExit(f"unknown configuration(s) {sorted(unknown)}; known: {list(CONFIGS)}")
        for c in list(CONFIGS):
            if c not in wanted:
                del CONFIGS[c]
    base = (REPO / "examples/lab/simple-robotic.toml").read_text()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="ddscope-overhead-"))
    (tmp / "s.toml").write_text(base + "\n[capture]\nenabled = false\n")
    (tmp / "tcpdump.toml").write_text(base)
    assert "\n[network]\n" in base
    (tmp / "tc-probe.toml").write_text(base.replace("\n[network]\n", "\n[network]\ntc_probe = true\n", 1) + "\n[capture]\nenabled = false\n")
    lat = {c: {"/image": [], "/drive": []} for c in CONFIGS}
    cpu = {c: [] for c in CONFIGS}
    frames = {c: [] for c in CONFIGS}
    records = {c: [] for c in CONFIGS}
    dur_s = float(a.duration.rstrip("s"))
    for i in range(a.repeat):
        for c, args in CONFIGS.items():
            out = tmp / f"{c}-{i}"
            scen = tmp / ({"tcpdump": "tcpdump.toml", "tc-probe": "tc-probe.toml"}.get(args, "s.toml"))
            cmd = [DDSCOPE, "lab", "run", str(scen), "--duration", a.duration, "--out", str(out), "--quiet"]
            if args not in (None, "tcpdump", "tc-probe"):
                cmd += ["--agent", args]
            cp = subprocess.run(cmd, capture_output=True, text=True)
            if cp.returncode != 0:
                raise SystemExit(f"{c} run {i} failed: {cp.stderr[-1500:]}")
            for t, v in latencies(out).items():
                lat[c][t] += v
            run = json.loads((out / "run.json").read_text())
            agent_cpu = [s for k, s in run["cpu"]["processes_s"].items() if k.startswith(("agent", "tcpdump")) and s is not None]
            if agent_cpu:
                cpu[c].append(max(agent_cpu) / (dur_s + 2))
            # Frames the kernel handed to each agent (after any filter), from its closing line.
            got = [int(m.group(1)) for f in (out / "logs").glob("agent-*.log")
                   for m in [re.search(r"kernel: received (\d+)", f.read_text())] if m]
            if got:
                frames[c].append(max(got))
            # Records mode: frames reported as records instead (not through the socket).
            recs = [int(m.group(1)) for f in (out / "logs").glob("agent-*.log")
                    for m in [re.search(r"(\d+) rebuilt from records", f.read_text())] if m]
            if recs:
                records[c].append(max(recs))
    print(f"Simple robotic application, {a.repeat} × {a.duration} per configuration, interleaved; lab capture off.\n")
    print("| topic | configuration | samples | mean ms | std ms | p99 ms | max ms | p99 vs none | monitor CPU (busiest host, share of one core) | frames to the agent (busiest host, per run) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for t in ("/image", "/drive"):
        base_p99 = pct(lat["none"][t], 99)
        for c in CONFIGS:
            v = lat[c][t]
            p99 = pct(v, 99)
            cpu_s = f"{100 * statistics.median(cpu[c]):.1f} %" if cpu[c] else ""
            fr = f"{statistics.median(frames[c]):.0f}" if frames[c] else ""
            if records[c]:
                fr += f" (+ {statistics.median(records[c]):.0f} records)"
            print(f"| {t} | {c} | {len(v)} | {statistics.mean(v):.3f} | {statistics.stdev(v):.3f} | {p99:.3f} | {max(v):.3f} | "
                  f"{100 * (p99 / base_p99 - 1):+.1f} % | {cpu_s} | {fr} |")


if __name__ == "__main__":
    main()
