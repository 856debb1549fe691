#!/usr/bin/env python3
"""What `--explain` costs: `ddscope latency RUN` with and without
`--budget '/*=5ms' --explain`, side by side on the same run directory
(captures and ros2_tracing traces), and tshark reading one capture for scale.

Usage: bench/explain.py RUN_DIR
  (make one: sudo ddscope lab run bench/explain-bench.toml --tracing jazzy --out RUN_DIR)

Times: median of 5 runs (1 for tshark); peak RSS from /usr/bin/time.
"""
import os
import pathlib
import platform
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from latency import DDSCOPE, timed  # noqa: E402


def main():
    run = pathlib.Path(sys.argv[1])
    caps = sorted(run.glob("*.pcapng"))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    print(f"Machine: {platform.system()} {platform.release()}, {os.cpu_count()} cores ({cpu}).")
    print(f"Input: {run} ({', '.join(f'{c.name} {c.stat().st_size / 1e6:.0f} MB' for c in caps)}).\n")
    base = [DDSCOPE, "latency", str(run), "--format", "json", "-o", "/dev/null"]
    rows = [
        ("ddscope latency RUN", base, 5),
        ("ddscope latency RUN --budget '/*=5ms' --explain", base + ["--budget", "/*=5ms", "--explain"], 5),
        ("tshark -r pc1.pcapng -T fields -e frame.number (read one capture)", ["tshark", "-r", str(caps[0]), "-T", "fields", "-e", "frame.number"], 1),
    ]
    results = [(name, *timed(cmd, n)) for name, cmd, n in rows]
    ref = results[0][1]
    print("| command | wall s | CPU s | peak RSS MB | wall vs without --explain |")
    print("|---|---|---|---|---|")
    for name, wall, cpu_s, rss in results:
        ratio = "" if name.startswith("tshark") else f"{wall / ref:.2f}×"
        print(f"| {name} | {wall:.2f} | {cpu_s:.2f} | {rss / 1024:.0f} | {ratio} |")
    cp = subprocess.run(base[:3] + ["--budget", "/*=5ms"], capture_output=True, text=True)
    print("\n" + next((l for l in cp.stderr.splitlines() if "incidents:" in l), "(no incidents line)"))


if __name__ == "__main__":
    main()
