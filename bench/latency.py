#!/usr/bin/env python3
"""Correlation speed and memory: `ddscope latency` on two captures of >= 1 GB
each (a lab run of the simple robotic application), in one run beside the time
tshark needs just to read one of them.

Usage: bench/latency.py RUN_DIR      (make one: sudo ddscope lab run examples/lab/simple-robotic.toml --duration 42s --out RUN_DIR)

Times: median of 3 runs (1 for tshark); peak RSS from /usr/bin/time. Not
pinned: ddscope decodes each capture on its own thread.
"""
import os
import pathlib
import platform
import re
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
DDSCOPE = os.environ.get("DDSCOPE_BIN", str(REPO / "target" / "release" / "ddscope"))


def timed(cmd, runs):
    res = []
    for _ in range(runs):
        t0 = time.perf_counter()
        cp = subprocess.run(["/usr/bin/time", "-f", "TIME %U %S %M", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t0
        if cp.returncode != 0:
            raise SystemExit(f"{cmd} failed: {cp.stderr[-2000:]}")
        _, user, sys_, rss = [l for l in cp.stderr.splitlines() if l.startswith("TIME ")][-1].split()
        res.append((wall, float(user) + float(sys_), int(rss)))
    res.sort()
    m = res[len(res) // 2]
    return m[0], m[1], max(r[2] for r in res)


def main():
    run = pathlib.Path(sys.argv[1])
    caps = sorted(run.glob("*.pcapng"))
    assert len(caps) == 2, caps
    sizes = [c.stat().st_size for c in caps]
    frames = [int(re.search(r"Number of packets:\s+(\d+)", subprocess.run(["capinfos", "-c", "-M", str(c)], capture_output=True, text=True).stdout).group(1)) for c in caps]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    print(f"Machine: {platform.system()} {platform.release()}, {os.cpu_count()} cores ({cpu}).")
    print(f"Input: {', '.join(f'{c.name} {s / 1e9:.2f} GB, {f} frames' for c, s, f in zip(caps, sizes, frames))}.\n")
    print("| command | wall s | CPU s | peak RSS MB | vs tshark reading one capture |")
    print("|---|---|---|---|---|")
    rows = [
        ("ddscope latency RUN (summary)", [DDSCOPE, "latency", str(run), "--format", "json", "-o", "/dev/null"], 3),
        ("ddscope latency RUN --level both --format parquet (every sample and submessage row)",
         [DDSCOPE, "latency", str(run), "--level", "both", "--format", "parquet", "-o", "/tmp/ddscope-bench-rows.parquet"], 3),
        ("tshark -r pc1.pcapng -T fields -e frame.number (read one capture)", ["tshark", "-r", str(caps[0]), "-T", "fields", "-e", "frame.number"], 1),
    ]
    results = [(name, *timed(cmd, n)) for name, cmd, n in rows]
    tshark_wall = results[-1][1]
    for name, wall, cpu_s, rss in results:
        ratio = "" if name.startswith("tshark") else f"{tshark_wall / wall:.1f}× faster"
        print(f"| {name} | {wall:.2f} | {cpu_s:.2f} | {rss / 1024:.0f} | {ratio} |")


if __name__ == "__main__":
    main()
