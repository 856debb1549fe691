#!/usr/bin/env python3
"""Tracing overhead (tracker issue 11, point 8): the simple robotic application
(the thesis workload, examples/lab/simple-robotic.toml) with ros2_tracing's
tracepoints off and on — the lab's nodes emitting them through the replica
provider into one LTTng session per host, as `ros2 trace` records.

Usage: sudo bench/tracing_overhead.py [--duration 20s] [--repeat 3] [--configs off,humble,jazzy]

Configurations are run interleaved (off, humble, jazzy, off, ...), each
--repeat times; the lab's own tcpdump capture is off in every run, so tracing
is the only instrumentation. Per topic: the application latency of every
sample from the ground truth (publish -> receive, one clock: the same
CLOCK_REALTIME instants with tracing off and on), pooled over the repeats; the
chain /raw_image -> /actuator end to end (sensor_1's publish to actuator's
receive, through the relays' links); the CPU of the node processes (user +
system from wait4) and of the host session daemons (lttng-sessiond with its
consumer daemon). With tracing, also the cost of the tracepoints where they
run, from the ground truth's instants (the event times themselves): publish =
rclcpp_publish -> rmw_publish (the rcl_publish tracepoint and the two around
it, nothing else happens between them in the nodes), take = rmw_take ->
callback_start (rcl_take, rclcpp_take). Prints Markdown tables.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent
DDSCOPE = os.environ.get("DDSCOPE_BIN", str(REPO / "target" / "release" / "ddscope"))
TOPICS = ("/raw_image", "/image", "/actuator", "/drive")


def read_run(out):
    """Latencies (µs) per topic and of the chain, node and tracer CPU (s), samples and trace events."""
    pub, rcv = {}, {}
    receptions = 0
    for f in out.glob("*.truth.jsonl"):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            key = (r["writer_guid"], r["seq"])
            if r["event"] == "publish":
                pub[key] = r
            else:
                receptions += 1
                rcv.setdefault(key, r)
    lat = {t: [] for t in TOPICS}
    spans = {"publish": [], "take": []}
    for p in pub.values():
        if "rmw_publish_mono_ns" in p:
            spans["publish"].append((p["rmw_publish_mono_ns"] - p["rclcpp_publish_mono_ns"]) / 1e3)
    for r in rcv.values():
        if "callback_start_mono_ns" in r:
            spans["take"].append((r["callback_start_mono_ns"] - r["rmw_take_mono_ns"]) / 1e3)
    for k, p in pub.items():
        if k in rcv:
            lat[p["topic"]].append((rcv[k]["t_ns"] - p["t_ns"]) / 1e3)
    # the chain: follow each /actuator sample back through its relays to the /raw_image sample
    chain = []
    for k, p in pub.items():
        if p["topic"] != "/actuator" or k not in rcv:
            continue
        src = p
        while "src_writer_guid" in src:
            src = pub.get((src["src_writer_guid"], src["src_seq"]))
            if src is None:
                break
        if src is not None and src["topic"] == "/raw_image":
            chain.append((rcv[k]["t_ns"] - src["t_ns"]) / 1e3)
    run = json.loads((out / "run.json").read_text())
    procs = run["cpu"]["processes_s"]
    nodes_cpu = sum(s for k, s in procs.items() if k.startswith("node ") and s is not None)
    tracer_cpu = sum(s for k, s in procs.items() if k.startswith("lttng-sessiond") and s is not None)
    events = sum(h["events"] for h in run["tracing"]["hosts"]) if run["tracing"] else 0
    lost = sum((h["lost_events"] or 0) + h["discarded_events"] for h in run["tracing"]["hosts"]) if run["tracing"] else 0
    messages = len(pub) + receptions  # samples published and received by the nodes
    wall = (run["timing"]["tstop_ns"] - run["timing"]["t0_ns"]) / 1e9 + run["timing"]["linger_s"]
    return lat, chain, spans, nodes_cpu, tracer_cpu, events, lost, messages, wall


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(q / 100 * (len(v) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", default="20s")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--configs", default="off,humble,jazzy")
    ap.add_argument("--keep", action="store_true", help="keep the run directories")
    a = ap.parse_args()
    configs = a.configs.split(",")
    base = (REPO / "examples/lab/simple-robotic.toml").read_text()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="ddscope-tracing-overhead-"))
    scen = tmp / "s.toml"
    scen.write_text(base + "\n[capture]\nenabled = false\n")
    lat = {c: {t: [] for t in TOPICS + ("chain",)} for c in configs}
    cpu = {c: [] for c in configs}
    tracer = {c: [] for c in configs}
    per_msg = {c: [] for c in configs}
    ev_rate = {c: [] for c in configs}
    lost = {c: 0 for c in configs}
    spans = {c: {"publish": [], "take": []} for c in configs}
    for i in range(a.repeat):
        for c in configs:
            out = tmp / f"{c}-{i}"
            cmd = [DDSCOPE, "lab", "run", str(scen), "--duration", a.duration, "--tracing", c, "--out", str(out), "--quiet"]
            cp = subprocess.run(cmd, capture_output=True, text=True)
            if cp.returncode != 0:
                raise SystemExit(f"{c} run {i} failed: {cp.stderr[-1500:]}")
            l, chain, sp, ncpu, tcpu, events, nlost, messages, wall = read_run(out)
            for k, v in sp.items():
                spans[c][k] += v
            for t, v in l.items():
                lat[c][t] += v
            lat[c]["chain"] += chain
            cpu[c].append(ncpu / wall)
            tracer[c].append(tcpu / wall)
            per_msg[c].append(ncpu / messages * 1e6)
            ev_rate[c].append(events / wall)
            lost[c] += nlost
    print(f"Simple robotic application, {a.repeat} × {a.duration} per configuration, interleaved; lab capture off.\n")
    print("| topic | tracing | samples | mean µs | median µs | p99 µs | mean vs off | median vs off |")
    print("|---|---|---|---|---|---|---|---|")
    for t in TOPICS + ("chain",):
        name = "/raw_image → /actuator (chain)" if t == "chain" else t
        b = lat[configs[0]][t]
        for c in configs:
            v = lat[c][t]
            if not v:
                continue
            dm = statistics.mean(v) - statistics.mean(b)
            dmed = statistics.median(v) - statistics.median(b)
            print(f"| {name} | {c} | {len(v)} | {statistics.mean(v):.1f} | {statistics.median(v):.1f} | {pct(v, 99):.1f} | "
                  f"{dm:+.1f} µs | {dmed:+.1f} µs |")
    print()
    print("| tracing | node CPU (cores, median of runs) | node CPU per message (µs) | session daemons CPU (cores) | events/s | events lost |")
    print("|---|---|---|---|---|---|")
    for c in configs:
        print(f"| {c} | {statistics.median(cpu[c]):.3f} | {statistics.median(per_msg[c]):.1f} | {statistics.median(tracer[c]):.4f} | "
              f"{statistics.median(ev_rate[c]):.0f} | {lost[c]} |")
    print()
    print("| tracing | span | samples | median µs | p99 µs | max µs |")
    print("|---|---|---|---|---|---|")
    for c in configs:
        for k, name in (("publish", "rclcpp_publish → rmw_publish"), ("take", "rmw_take → callback_start")):
            v = spans[c][k]
            if v:
                print(f"| {c} | {name} | {len(v)} | {statistics.median(v):.2f} | {pct(v, 99):.2f} | {max(v):.2f} |")
    if not a.keep:
        subprocess.run(["rm", "-rf", str(tmp)])
    else:
        print(f"\nruns kept in {tmp}")


if __name__ == "__main__":
    main()
