#!/usr/bin/env python3
"""Trace reading throughput: ddscope-trace vs babeltrace2 on the same LTTng trace.

Usage: bench/trace.py [--messages 770000] [--runs 3] [--trace DIR]

Records a ros2_tracing trace with the lab replica (lab/tracegen/record.sh around
ddslab-tracegen --distro jazzy --messages N: 13.1 events per message, so the
default is ~10.1 M events, lossless), unless --trace names one, then times, each
pinned to one CPU with taskset:
  - dump --format count DIR     (crates/trace/examples/dump: every ros2 event decoded
                                 into Ros2Event with time and context, then dropped)
  - dump --format text DIR      (the same, printed like babeltrace2, to /dev/null)
  - babeltrace2 DIR             (the CLI's text output, to /dev/null)
  - babeltrace2 -c sink.utils.dummy DIR   (babeltrace2 decoding into nothing)
Prints a Markdown table: median wall and CPU seconds, events/s (wall and CPU),
peak RSS (/usr/bin/time).
"""
import argparse
import json
import os
import pathlib
import platform
import re
import statistics
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "out"
DUMP = REPO / "target" / "release" / "examples" / "dump"
TRACEGEN = REPO / "lab" / "build" / "ddslab-tracegen"
RECORD = REPO / "lab" / "tracegen" / "record.sh"


def timed(cmd):
    full = ["/usr/bin/time", "-f", "TIME %e %U %S %M", "taskset", "-c", "1"] + cmd
    p = subprocess.run(full, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr[-2000:]}")
    m = re.search(r"TIME ([\d.]+) ([\d.]+) ([\d.]+) (\d+)", p.stderr)
    wall, user, sys_, rss = float(m.group(1)), float(m.group(2)), float(m.group(3)), int(m.group(4))
    return wall, user + sys_, rss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=770000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--trace")
    a = ap.parse_args()
    if not DUMP.exists():
        sys.exit("build first: cargo build --release -p ddscope-trace --example dump")
    if a.trace:
        trace = pathlib.Path(a.trace)
    else:
        if not TRACEGEN.exists():
            sys.exit("build the lab first: cmake -S lab -B lab/build && cmake --build lab/build")
        trace = OUT / f"trace-{a.messages}"
        if not (trace / "ust").exists():
            OUT.mkdir(parents=True, exist_ok=True)
            subprocess.run([str(RECORD), str(trace), "--", str(TRACEGEN), "--distro", "jazzy",
                            "--messages", str(a.messages)], check=True, stdout=subprocess.DEVNULL)
    count = subprocess.run([str(DUMP), "--format", "count", str(trace)], capture_output=True, text=True, check=True)
    events = int(count.stdout.strip())
    size = sum(f.stat().st_size for f in trace.rglob("*") if f.is_file())
    cases = [
        ("ddscope-trace `dump --format count`", [str(DUMP), "--format", "count", str(trace)]),
        ("ddscope-trace `dump` (text)", [str(DUMP), str(trace)]),
        ("`babeltrace2` (text)", ["babeltrace2", str(trace)]),
        ("`babeltrace2 -c sink.utils.dummy`", ["babeltrace2", "-c", "sink.utils.dummy", str(trace)]),
    ]
    print(f"Trace: {trace} ({size / 1e6:.0f} MB, {events} ros2 events); machine: {platform.platform()}, "
          f"{os.cpu_count()} CPUs; median of {a.runs} runs, each pinned to CPU 1\n")
    print("| reader | wall s | CPU s | events/s (wall) | events/s (CPU) | peak RSS |")
    print("|---|---|---|---|---|---|")
    results = {}
    for name, cmd in cases:
        runs = [timed(cmd) for _ in range(a.runs)]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        rss = max(r[2] for r in runs)
        results[name] = {"wall": wall, "cpu": cpu, "rss_kb": rss}
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {events / wall / 1e6:.2f} M | {events / cpu / 1e6:.2f} M | {rss / 1024:.0f} MB |")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "trace.json").write_text(json.dumps({"events": events, "bytes": size, "results": results}, indent=1))


if __name__ == "__main__":
    main()
