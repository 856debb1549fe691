#!/usr/bin/env python3
"""Soak benchmark: hostile traffic at full size through `ddscope topics` and
`ddscope latency` — peak RSS and wall time at two input sizes, to show memory
flat and time linear in the input.

Usage: bench/soak.py [--bin target/release/ddscope] [--scale 1.0] [--only writers,topics]
                     [--ceiling-mb 8000] [--timeout 900] [--out bench/out/soak]
       bench/soak.py --speed BEFORE_BIN [--bin AFTER_BIN] [--runs 11] FILE...

--speed: the regression check on ordinary captures instead: `topics FILE`
(pinned to one CPU with taskset) on every FILE and `latency A B` on every
pair of FILEs named *-pc1.* / *-pc2.*, the two binaries alternating run by
run; prints the median wall time of each and the change.

Inputs come from tests/hostile/hostile.py (every byte packed by hand, see
there). For each scenario the full size (10^6 writers, 10^5 topics, 10^5
destinations of one sample, a DATA_FRAG flood, an IP-fragment flood, 10^5
discovery DATA_FRAG sets, 20 000 SEDP announcements of 59 KB names through
`topics` and `dissect`) and a tenth of it are run once each, one after the
other. A run whose RSS passes --ceiling-mb or whose time passes --timeout is
killed and reported as such (for measuring builds without caps). Peak RSS is
the child's own (wait4 rusage; the watchdog polls /proc for the ceiling).
Prints a Markdown table: scenario, command, input, frames, wall s, peak RSS MB,
µs per frame, and the evictions the closing lines name.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import platform
import subprocess
import sys
import threading
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "hostile"))
import hostile  # noqa: E402

# scenario, full count, commands ("topics" or "latency"), generator options, note
SCENARIOS = [
    ("writers", 1_000_000, ["topics", "latency"], {}, "distinct writer GUIDs, one DATA each"),
    ("topics", 100_000, ["topics"], {}, "SEDP publications + subscriptions, one DATA per writer"),
    ("destinations", 100_000, ["topics"], {}, "one DATA_FRAG sample (2^20 fragments) and one DATA, each to N destinations"),
    ("fragflood", 1_000_000, ["topics"], {}, "samples announcing 2^20 fragments, last one sent"),
    ("ipholes", 1_100, ["topics"], {"holes": 4096}, "IPv4 datagrams as 4096 8-byte fragments with holes"),
    ("discfrag", 100_000, ["topics"], {}, "SEDP DATA_FRAG sets announcing 1 MiB, first fragment only"),
    ("longnames", 20_000, ["topics", "dissect"], {}, "SEDP publications with distinct 59 KB topic names (gzip'd pcap)"),
]

# Scenarios written gzip-compressed (their plain pcap would be gigabytes of repeated names).
GZIPPED = {"longnames"}


def measure(cmd: list[str], ceiling_mb: int, timeout: float):
    """Runs cmd; returns (exit code or 'killed: …', wall s, peak RSS MB, stderr)."""
    err_path = pathlib.Path(f"/tmp/ddscope-soak-{os.getpid()}.err")
    killed = []
    with open(err_path, "w") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)

        def watch():
            while p.returncode is None:
                try:
                    with open(f"/proc/{p.pid}/status") as f:
                        rss = next((int(l.split()[1]) for l in f if l.startswith("VmRSS:")), 0)
                except OSError:
                    return
                if rss > ceiling_mb * 1024:
                    killed.append(f"killed at > {ceiling_mb} MB")
                    p.kill()
                    return
                if time.perf_counter() - t0 > timeout:
                    killed.append(f"killed after {timeout:.0f} s")
                    p.kill()
                    return
                time.sleep(0.05)

        w = threading.Thread(target=watch, daemon=True)
        w.start()
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
    stderr = err_path.read_text()
    err_path.unlink()
    code = killed[0] if killed else p.returncode
    return code, wall, usage.ru_maxrss / 1024, stderr


EVICTION_WORDS = ("evicted", "forgotten", "dropped", "beyond the per-sample cap", "judged before", "closed early", "cut at")


def evictions(stderr: str) -> str:
    lines = [l.split(": ", 2)[-1] for l in stderr.splitlines() if any(w in l for w in EVICTION_WORDS)]
    return "; ".join(lines)[:400].replace("|", "/")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "ddscope"))
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every full size by this")
    ap.add_argument("--only", default="", help="comma-separated scenarios")
    ap.add_argument("--sizes", default="1,0.1", help="fractions of the full size to run")
    ap.add_argument("--ceiling-mb", type=int, default=8000)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--out", default=str(REPO / "bench" / "out" / "soak"))
    ap.add_argument("--speed", metavar="BEFORE_BIN", help="compare BEFORE_BIN with --bin on FILEs")
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    if a.speed:
        return speed(a.speed, a.bin, a.files, a.runs)
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    only = set(filter(None, a.only.split(",")))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    mem = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal")) / 1024 / 1024
    print(f"binary: {a.bin}; machine: {platform.platform()}, {os.cpu_count()} cores ({cpu}), {mem:.0f} GiB\n")
    print("| scenario | command | N | input MB | frames | wall s | µs/frame | peak RSS MB | exit | evictions named in the closing lines |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for scenario, full, commands, opts, _note in SCENARIOS:
        if only and scenario not in only:
            continue
        for frac in [float(x) for x in a.sizes.split(",")]:
            n = max(1, int(full * a.scale * frac))
            ext = ".pcap.gz" if scenario in GZIPPED else ".pcap"
            f1 = out / f"{scenario}-{n}-pc1{ext}"
            f2 = out / f"{scenario}-{n}-pc2{ext}"
            if not f1.exists() or ("latency" in commands and not f2.exists()):
                hostile.generate(scenario, n, f1, f2 if "latency" in commands else None, **opts)
            size = f1.stat().st_size
            frames = count_frames(f1)
            for c in commands:
                args = {
                    "topics": [a.bin, "topics", str(f1), "--all"],
                    "dissect": [a.bin, "dissect", str(f1), "--format", "csv", "-o", "/dev/null"],
                    "latency": [a.bin, "latency", str(f1), str(f2)],
                }[c]
                code, wall, rss, stderr = measure(args, a.ceiling_mb, a.timeout)
                if "panicked" in stderr:
                    code = f"{code} (panic)"
                files = 2 if c == "latency" else 1
                us = wall / (frames * files) * 1e6
                print(f"| {scenario} | {c} | {n} | {size * files / 1e6:.1f} | {frames * files} | {wall:.2f} | {us:.2f} | {rss:.0f} | {code} | {evictions(stderr)} |", flush=True)


def speed(before: str, after: str, files: list[str], runs: int) -> None:
    """Median wall and CPU time of each binary on ordinary captures, alternating runs."""
    jobs = [("topics", [f], ["taskset", "-c", "1", "{bin}", "topics", f]) for f in files]
    for f in files:
        if "-pc1." in f and f.replace("-pc1.", "-pc2.") in files:
            g = f.replace("-pc1.", "-pc2.")
            jobs.append(("latency", [f, g], ["{bin}", "latency", f, g]))
    print(f"before: {before}\nafter: {after}\n{runs} runs each, alternating; medians\n")
    print("| command | input | before wall s | after wall s | change | before CPU s | after CPU s | change |")
    print("|---|---|---|---|---|---|---|---|")
    for verb, inputs, cmd in jobs:
        t = {before: [], after: []}
        cpu = {before: [], after: []}
        for _ in range(runs):
            for b in (before, after):
                c = [x.replace("{bin}", b) for x in cmd]
                t0 = time.perf_counter()
                p = subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                _, status, ru = os.wait4(p.pid, 0)
                p.returncode = os.waitstatus_to_exitcode(status)
                t[b].append(time.perf_counter() - t0)
                cpu[b].append(ru.ru_utime + ru.ru_stime)
                if p.returncode != 0:
                    raise SystemExit(f"{c} exited {p.returncode}")
        med = lambda v: sorted(v)[runs // 2]  # noqa: E731
        wb, wa, cb, ca = med(t[before]), med(t[after]), med(cpu[before]), med(cpu[after])
        name = " ".join(pathlib.Path(i).name for i in inputs)
        print(f"| {verb} | {name} | {wb:.3f} | {wa:.3f} | {(wa / wb - 1) * 100:+.1f} % | {cb:.3f} | {ca:.3f} | {(ca / cb - 1) * 100:+.1f} % |", flush=True)


def count_frames(path: pathlib.Path) -> int:
    """Records in a classic pcap file (16-byte record headers), gzip'd or not."""
    import gzip
    n = 0
    with (gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")) as f:
        f.seek(24)
        while True:
            h = f.read(16)
            if len(h) < 16:
                return n
            incl = int.from_bytes(h[8:12], "little")
            f.seek(incl, 1)
            n += 1


if __name__ == "__main__":
    main()
