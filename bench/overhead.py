#!/usr/bin/env python3
"""Monitoring overhead (thesis Table 4.5): application-level /image and /drive
latency of the simple robotic application (publish -> receive, from the
workload's ground truth) without monitoring and with a ddscope agent on both
hosts, plus the agents' CPU use.

Usage: sudo bench/overhead.py [--duration 30s] [--repeat 3] [--only CONFIG,...]
                              [--compare-bin OLD_DDSCOPE [--compare CONFIG,...]] [--bpf-stats]

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
over all samples of all repeats, the p99 rise of each repeat against the
`none` run just before it (median and range: the p99 of 300 samples moves with
scheduling noise, so the spread says what a difference is worth), and the
monitor's CPU (agent or tcpdump, user + system, busiest host) as a share of
one core.

--compare-bin runs every agent configuration a second time with another
ddscope binary (e.g. one built from an earlier commit), labelled `…@base`,
interleaved with the rest: the side-by-side comparison of two versions.
--bpf-stats sets kernel.bpf_stats_enabled=1 for the run (restored after) and
adds the in-kernel program's mean run time per frame from the agents' closing
lines; the kernel's measurement adds two clock reads to every program run, so
latencies of such a run are not comparable with one without it.
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
    ap.add_argument("--compare-bin", help="another ddscope binary: agent configurations also run with it, as CONFIG@base")
    ap.add_argument("--compare", help="comma-separated agent configurations to run with --compare-bin (default: all in the run)")
    ap.add_argument("--bpf-stats", action="store_true", help="measure the in-kernel programs' run time (kernel.bpf_stats_enabled=1)")
    a = ap.parse_args()
    if a.only:
        wanted = {"none", *a.only.split(",")}
        unknown = wanted - CONFIGS.keys()
        if unknown:
            raise SystemExit(f"unknown configuration(s) {sorted(unknown)}; known: {list(CONFIGS)}")
        for c in list(CONFIGS):
            if c not in wanted:
                del CONFIGS[c]
    binary = {c: DDSCOPE for c in CONFIGS}
    if a.compare_bin:
        for c, args in list(CONFIGS.items()):
            if args not in (None, "tcpdump", "tc-probe") and (not a.compare or c in a.compare.split(",")):
                CONFIGS[f"{c}@base"] = args
                binary[f"{c}@base"] = a.compare_bin
    stats_path = pathlib.Path("/proc/sys/kernel/bpf_stats_enabled")
    stats_before = stats_path.read_text().strip() if a.bpf_stats else None
    if a.bpf_stats:
        stats_path.write_text("1\n")
    try:
        run_all(a, binary)
    finally:
        if stats_before is not None:
            stats_path.write_text(stats_before + "\n")


def run_all(a, binary):
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
    prog_ns = {c: [] for c in CONFIGS}
    rises = {c: {"/image": [], "/drive": []} for c in CONFIGS}
    dur_s = float(a.duration.rstrip("s"))
    base_now = {}
    for i in range(a.repeat):
        for c, args in CONFIGS.items():
            out = tmp / f"{c}-{i}"
            scen = tmp / ({"tcpdump": "tcpdump.toml", "tc-probe": "tc-probe.toml"}.get(args, "s.toml"))
            cmd = [binary.get(c, DDSCOPE), "lab", "run", str(scen), "--duration", a.duration, "--out", str(out), "--quiet"]
            if args not in (None, "tcpdump", "tc-probe"):
                cmd += ["--agent", args]
            cp = subprocess.run(cmd, capture_output=True, text=True)
            if cp.returncode != 0:
                raise SystemExit(f"{c} run {i} failed: {cp.stderr[-1500:]}")
            for t, v in latencies(out).items():
                lat[c][t] += v
                if c == "none":
                    base_now[t] = pct(v, 99) if v else None
                elif base_now.get(t) and v:
                    rises[c][t].append(100 * (pct(v, 99) / base_now[t] - 1))
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
            # --bpf-stats: the program's mean run time per frame, per agent.
            ns = [float(m.group(1)) for f in (out / "logs").glob("agent-*.log")
                  for m in [re.search(r"program: (\d+) ns per frame", f.read_text())] if m]
            prog_ns[c] += ns
    print(f"Simple robotic application, {a.repeat} × {a.duration} per configuration, interleaved; lab capture off.\n")
    extra = " in-kernel program, ns per frame (median of agents) |" if a.bpf_stats else ""
    print("| topic | configuration | samples | mean ms | std ms | p99 ms | max ms | p99 vs none | p99 vs the none run before, per repeat: median [min, max] "
          "| monitor CPU (busiest host, share of one core) | frames to the agent (busiest host, per run) |" + extra)
    print("|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if a.bpf_stats else ""))
    for t in ("/image", "/drive"):
        base_p99 = pct(lat["none"][t], 99)
        for c in CONFIGS:
            v = lat[c][t]
            p99 = pct(v, 99)
            cpu_s = f"{100 * statistics.median(cpu[c]):.1f} %" if cpu[c] else ""
            fr = f"{statistics.median(frames[c]):.0f}" if frames[c] else ""
            if records[c]:
                fr += f" (+ {statistics.median(records[c]):.0f} records)"
            r = rises[c][t]
            spread = f"{statistics.median(r):+.1f} % [{min(r):+.1f}, {max(r):+.1f}]" if r else ""
            ns = (f" {statistics.median(prog_ns[c]):.0f} |" if prog_ns[c] else " |") if a.bpf_stats else ""
            print(f"| {t} | {c} | {len(v)} | {statistics.mean(v):.3f} | {statistics.stdev(v):.3f} | {p99:.3f} | {max(v):.3f} | "
                  f"{100 * (p99 / base_p99 - 1):+.1f} % | {spread} | {cpu_s} | {fr} |" + ns)


if __name__ == "__main__":
    main()
