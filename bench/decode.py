#!/usr/bin/env python3
"""Decode throughput: ddscope vs tshark on the same files, one core each.

Usage: bench/decode.py [--sizes 100M,1G] [--skip-tshark-over BYTES]

Generates synthetic captures with crates/testkit/examples/synth_capture.rs
(`small`: 36-byte samples with HEARTBEAT/ACKNACK, ~120-byte frames;
`mixed`: that plus 2.76 MB images as 64 KB DATA_FRAGs fragmented at 1500),
then times, pinned to one CPU with taskset:
  - ddscope topics FILE --format json        (decode + discovery + samples + per-topic stats)
  - ddscope dissect FILE --format csv         (decode + one CSV row per submessage)
  - tshark -r FILE -T fields -e frame.number -e rtps.sm.id -e rtps.sm.wrEntityId
           -e rtps.sm.seqNumber -e rtps.sm.fragmentStartingNum
Prints a Markdown table: median wall and CPU seconds of 3 runs (1 run for files
over 500 MB), packets/s, MB/s, peak RSS (/usr/bin/time).
"""
import argparse
import os
import pathlib
import platform
import re
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "out"
DDSCOPE = os.environ.get("DDSCOPE_BIN", str(REPO / "target" / "release" / "ddscope"))
SYNTH = REPO / "target" / "release" / "examples" / "synth_capture"
SHARED = [pathlib.Path(p) for p in ("/work/shared/captures/cyclone-datafrag.pcapng", str(REPO.parent / "shared/captures/cyclone-datafrag.pcapng"))]

TSHARK_FIELDS = ["frame.number", "rtps.sm.id", "rtps.sm.wrEntityId", "rtps.sm.seqNumber", "rtps.data_frag.number"]


def parse_size(s):
    m = re.fullmatch(r"(\d+)([KMG]?)", s)
    return int(m.group(1)) * {"": 1, "K": 10**3, "M": 10**6, "G": 10**9}[m.group(2)]


def timed_once(cmd):
    full = ["/usr/bin/time", "-f", "TIME %e %U %S %M", "taskset", "-c", "1", *cmd]
    t0 = time.perf_counter()
    cp = subprocess.run(full, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if cp.returncode != 0:
        raise SystemExit(f"{cmd} failed: {cp.stderr[-2000:]}")
    line = [l for l in cp.stderr.splitlines() if l.startswith("TIME ")][-1]
    _, _, user, sys_, rss = line.split()
    return wall, float(user) + float(sys_), int(rss)


def timed(cmd, runs):
    """Median wall and CPU time over `runs` runs, largest peak RSS."""
    res = [timed_once(cmd) for _ in range(runs)]
    res.sort()
    mid = res[len(res) // 2]
    return mid[0], mid[1], max(r[2] for r in res)


def packets(path):
    out = subprocess.run(["capinfos", "-c", "-M", str(path)], capture_output=True, text=True).stdout
    return int(re.search(r"Number of packets:\s+(\d+)", out).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100M,1G")
    ap.add_argument("--mixes", default="small,mixed")
    ap.add_argument("--skip-tshark-over", default="2G")
    a = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "ddscope", "-p", "ddscope-testkit", "--example", "synth_capture"], cwd=REPO, check=True)
    files = [p for p in SHARED if p.exists()][:1]
    for mix in a.mixes.split(","):
        for size in a.sizes.split(","):
            f = OUT / f"synth-{mix}-{size}.pcapng"
            if not f.exists():
                subprocess.run([str(SYNTH), "bench", str(f), str(parse_size(size)), mix], check=True)
            files.append(f)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    print(f"Machine: {platform.system()} {platform.release()}, {os.cpu_count()} cores ({cpu}); every command pinned to CPU 1.\n")
    print("| file | size | packets | tool | wall s | CPU s | packets/s | MB/s | peak RSS MB | speed-up vs tshark |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    skip = parse_size(a.skip_tshark_over)
    for f in files:
        size = f.stat().st_size
        n = packets(f)
        rows = []
        runs = 3 if size < 500e6 else 1
        w, c, rss = timed([DDSCOPE, "topics", str(f), "--format", "json", "-o", "/dev/null"], runs)
        rows.append(("ddscope topics", w, c, rss))
        w, c, rss = timed([DDSCOPE, "dissect", str(f), "--format", "csv", "-o", "/dev/null"], runs)
        rows.append(("ddscope dissect --format csv", w, c, rss))
        tshark = None
        if size <= skip:
            cmd = ["tshark", "-r", str(f), "-T", "fields"]
            for fld in TSHARK_FIELDS:
                cmd += ["-e", fld]
            w, c, rss = timed(cmd, runs)
            tshark = w
            rows.append(("tshark -T fields (5 RTPS fields)", w, c, rss))
        for tool, w, c, rss in rows:
            speed = f"{tshark / w:.1f}×" if tshark and not tool.startswith("tshark") else ""
            print(f"| {f.name} | {size / 1e6:.0f} MB | {n} | {tool} | {w:.2f} | {c:.2f} | {n / w / 1e6:.2f} M | {size / w / 1e6:.0f} | {rss / 1024:.0f} | {speed} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
