"""Issue 13, topologies: Kouril et al.'s 1-N / N-1 / N-N in the lab up to 64 nodes
per side, 0-byte payloads, reader fairness and per-process load.

Oracles, independent of the lab's own report:
  * the nodes' ground-truth files (every reader node's receives);
  * tshark 4.0 on the captures: DATA frames per writer and UDP destination
    port, ACKNACK reader GUIDs, the rtps fields of 0-byte DATA submessages;
  * /proc/PID/stat and /proc/PID/status read by this test while the run is
    going (for the per-process series);
  * the Prometheus text the agent serves, against /proc read by the test.
Needs root (network namespaces); CI runs as root.
"""
from __future__ import annotations

import csv
import json
import os
import pathlib
import re
import signal
import statistics
import threading
import subprocess
import time
import urllib.request

import pytest

from conftest import REPO, ddscope_bin, free_port, have_root, require_tool

FAN_OUT = REPO / "examples" / "lab" / "topology-1-n-64.toml"
KOURIL_TOPOLOGIES = REPO / "examples" / "lab" / "topologies-kouril.toml"


def need_root():
    assert have_root(), "the lab tests need root (network namespaces); CI runs as root"


def truth_records(run: pathlib.Path):
    recs = []
    for f in sorted(run.glob("*.truth.jsonl")):
        recs += [json.loads(l) for l in f.read_text().splitlines() if l.strip()]
    return recs


def tshark_fields(capture, flt, *fields):
    tshark = require_tool("tshark")
    cmd = [tshark, "-r", str(capture), "-Y", flt, "-T", "fields", "-E", "separator=\t", "-E", "aggregator=,"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=600).stdout
    return [l.split("\t") for l in out.splitlines() if l.strip()]


def lab_run_watching(ddscope, scenario, out, watch=None):
    """Runs `lab run`; while it runs, `watch(run_id)` is called every 0.5 s (reads /proc)."""
    need_root()
    p = subprocess.Popen([ddscope_bin(), "lab", "run", str(scenario), "--out", str(out)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    err_lines: list[str] = []
    t = threading.Thread(target=lambda: err_lines.extend(iter(p.stderr.readline, "")), daemon=True)
    t.start()
    rid = None
    deadline = time.monotonic() + 600
    while p.poll() is None and time.monotonic() < deadline:
        if rid is None:
            m = re.search(r" run (\d+-[0-9a-f]{4}) ", "".join(err_lines))
            rid = m.group(1) if m else None
        if rid and watch:
            watch(rid)
        time.sleep(0.5)
    if p.poll() is None:
        p.send_signal(signal.SIGINT)
        p.wait(30)
    stdout = p.stdout.read()
    t.join(10)
    stderr = "".join(err_lines)
    assert p.returncode == 0, f"lab run failed ({p.returncode}):\n{stdout}\n{stderr}"
    return stdout, stderr


def node_pids(run_id: str) -> dict[int, str]:
    """pid -> node name of the run's workload nodes (their command line carries --run-id)."""
    out = {}
    for d in pathlib.Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not argv or not argv[0].endswith((b"ddslab-cyclone", b"ddslab-fastdds")):
            continue
        a = [x.decode(errors="replace") for x in argv]
        if "--run-id" in a and a[a.index("--run-id") + 1] == run_id and "--node" in a:
            out[int(d.name)] = a[a.index("--node") + 1]
    return out


def read_proc(pid: int):
    """(t_ns, cpu_s, rss_bytes) read straight from /proc (the oracle for load.csv)."""
    t = time.time_ns()
    stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    f = stat[stat.rindex(")") + 2:].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(f[11]) + int(f[12])) / ticks
    rss = next(int(l.split()[1]) * 1024 for l in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines()
               if l.startswith("VmRSS:"))
    return t, cpu, rss


@pytest.fixture(scope="module")
def fan_out(ddscope, tmp_path_factory):
    """The 64-subscriber run, with /proc readings of its nodes taken while it ran."""
    out = tmp_path_factory.mktemp("fan64")
    readings: dict[int, list] = {}
    names: dict[int, str] = {}

    def watch(rid):
        if not names:
            names.update(node_pids(rid))
        for pid in list(names)[:8]:
            try:
                readings.setdefault(pid, []).append(read_proc(pid))
            except (OSError, StopIteration):
                pass

    stdout, stderr = lab_run_watching(ddscope, FAN_OUT, out, watch)
    return out, stdout, stderr, readings, names


def test_64_subscribers_every_reader_counted(ddscope, fan_out):
    """1-N with N = 64: ground truth, ddscope and tshark agree for every one of the 64 readers."""
    run, stdout, _, _, _ = fan_out
    doc = json.loads((run / "run.json").read_text())
    assert doc["ok"], doc["failures"]
    subs = [n for n in doc["nodes"] if n["name"].startswith("gen0_sub")]
    assert len(subs) == 64 and all(n["host"] == "pc2" for n in subs)
    recs = truth_records(run)
    pub = [r for r in recs if r["event"] == "publish"]
    assert len({r["writer_guid"] for r in pub}) == 1
    published = {r["seq"] for r in pub}
    assert len(published) >= 45, len(published)  # 5 s at 10 Hz
    # oracle 1: every reader node received every sample exactly once (ground truth)
    per_node: dict[str, list[int]] = {}
    for r in recs:
        if r["event"] == "receive":
            per_node.setdefault(r["node"], []).append(r["seq"])
    assert sorted(per_node) == sorted(n["name"] for n in subs)
    for node, seqs in per_node.items():
        assert sorted(seqs) == sorted(published), f"{node}: {len(seqs)} of {len(published)}"
    # oracle 2: tshark on the receiver capture: one unicast DATA per sample and reader port,
    # and 64 distinct reader GUIDs acknowledging the writer
    writer = pub[0]["writer_guid"]
    rows = tshark_fields(run / "pc2.pcapng", "rtps.sm.id == 0x15 && rtps.sm.wrEntityId == 0x" + writer[24:],
                         "udp.dstport", "rtps.sm.seqNumber", "rtps.guidPrefix.src")
    by_port: dict[str, set[int]] = {}
    for port, sns, prefix in rows:
        if prefix.replace(":", "").replace(",", "")[:24] != writer[:24] and writer[:24] not in prefix.replace(":", ""):
            continue
        for sn in sns.split(","):
            by_port.setdefault(port, set()).add(int(sn))
    full = {p for p, s in by_port.items() if s >= published}
    assert len(full) == 64, f"{len(full)} reader ports got every sample: {sorted((p, len(s)) for p, s in by_port.items())}"
    # 64 distinct reader participants announced a reader of the topic in SEDP (DATA(r), the
    # subscriptions writer 0x000004c2), and every participant acknowledging the writer is one of them
    # (a reader that got every sample in order may never need to acknowledge a final heartbeat, so
    # the acknowledgers are not counted: CI once saw 63 of 64)
    topic = "fan_out/s64B_10hz_reliable"
    ann = tshark_fields(run / "pc2.pcapng", 'rtps.sm.wrEntityId == 0x000004c2 && rtps.param.topicName contains "s64B_10hz_reliable"',
                        "rtps.guidPrefix.src", "rtps.param.topicName")
    announced = {p.replace(":", "") for p, t in ann if any(x.endswith(topic) for x in t.split(","))} - {writer[:24]}
    assert len(announced) == 64, (len(announced), sorted(ann)[:5])
    acks = tshark_fields(run / "pc2.pcapng", "rtps.sm.id == 0x06 && rtps.sm.wrEntityId == 0x" + writer[24:],
                         "rtps.guidPrefix.src", "rtps.sm.rdEntityId")
    readers = {p.replace(":", "") for p, _ in acks} - {writer[:24]}
    assert readers and readers <= announced, sorted(readers - announced)
    # oracle 3: ddscope's per-reader table, on the wire (one row per reader locator) and from the truth
    cp = ddscope("latency", run, "--format", "json")
    rows = [r for r in json.loads(cp.stdout)["readers"] if r["topic"] == "/fan_out/s64B_10hz_reliable"]
    wire = [r for r in rows if r["source"] == "wire"]
    truth = [r for r in rows if r["source"] == "truth"]
    assert len(wire) == 64 and len(truth) == 64, (len(wire), len(truth))
    wire_ports = {r["reader"].rsplit(":", 1)[1] for r in wire}
    assert wire_ports == full
    for r in wire:
        port = r["reader"].rsplit(":", 1)[1]
        assert r["samples"] == len(by_port[port] & published), r
        assert r["latency"]["min_ms"] > 0 and r["behind_first"]["min_ms"] >= 0
    assert {r["reader"] for r in truth} == set(per_node)
    assert all(r["samples"] == len(published) for r in truth)
    # the table form
    cp = ddscope("latency", run, "--readers", "--topic", "/fan_out/*")
    assert cp.stdout.count("gen0_sub") == 64 and "behind_max" in cp.stdout


def test_load_series_every_200ms_and_matches_proc(fan_out):
    """load.csv: every node, 200 ms apart; values bracket /proc read by the test during the run."""
    run, _, _, readings, names = fan_out
    doc = json.loads((run / "run.json").read_text())
    assert doc["load"]["file"] == "load.csv" and doc["load"]["interval_ms"] == 200
    assert doc["load"]["not_sampled"] == 0 and doc["load"]["write_error"] is None
    rows = list(csv.DictReader((run / "load.csv").open()))
    series: dict[int, list[dict]] = {}
    for r in rows:
        series.setdefault(int(r["pid"]), []).append(r)
    nodes = {n["pid"]: n["name"] for n in doc["nodes"]}
    assert set(nodes) <= set(series), "every node process is sampled"
    assert any(r["process"].startswith("tcpdump") for r in rows)
    for pid, rs in series.items():
        ts = [int(r["t_ns"]) for r in rs]
        assert ts == sorted(ts)
        if len(ts) > 10:
            gaps = [(b - a) / 1e6 for a, b in zip(ts, ts[1:])]
            assert 180 <= statistics.median(gaps) <= 260, (pid, statistics.median(gaps))
        for a, b in zip(rs, rs[1:]):  # counters never go back
            for k in ("cpu_user_s", "cpu_system_s", "ctx_voluntary", "ctx_involuntary"):
                assert float(b[k]) >= float(a[k]), (pid, k)
    # the oracle: /proc read independently while the run went on
    checked = 0
    assert readings, "no /proc readings were taken during the run"
    for pid, obs in readings.items():
        rs = series.get(pid)
        assert rs, f"pid {pid} ({names.get(pid)}) not in load.csv"
        for t, cpu, rss in obs:
            before = [r for r in rs if int(r["t_ns"]) <= t]
            after = [r for r in rs if int(r["t_ns"]) >= t]
            if not before or not after:
                continue
            b, a = before[-1], after[0]
            lo = float(b["cpu_user_s"]) + float(b["cpu_system_s"])
            hi = float(a["cpu_user_s"]) + float(a["cpu_system_s"])
            assert lo - 0.011 <= cpu <= hi + 0.011, (pid, lo, cpu, hi)
            rlo, rhi = min(int(b["rss_bytes"]), int(a["rss_bytes"])), max(int(b["rss_bytes"]), int(a["rss_bytes"]))
            assert rlo - (1 << 20) <= rss <= rhi + (1 << 20), (pid, rlo, rss, rhi)
            checked += 1
    assert checked >= 5, checked


def test_report_draws_the_load(ddscope, fan_out, tmp_path):
    """`ddscope report` of the run carries the load series (CPU %, RSS, switches/s) of the busiest processes."""
    run = fan_out[0]
    html = tmp_path / "r.html"
    ddscope("report", run, "--html", html, "--topic", "/fan_out/*")
    text = html.read_text()
    doc = json.loads(re.search(r"window.DDSCOPE_REPORT = (.*?);</script>", text, re.S).group(1))
    load = doc["runs"][0]["load"]
    nprocs = len({r["pid"] for r in csv.DictReader((run / "load.csv").open())})
    assert len(load["processes"]) == 12 and load["not_drawn"] == nprocs - 12
    cpu_s = [p["cpu_s"] for p in load["processes"]]
    assert cpu_s == sorted(cpu_s, reverse=True)
    p = load["processes"][0]
    assert p["cpu"] and p["rss"] and p["ctx"] and all(v >= 0 for _, v in p["cpu"])
    assert 'id: "load"' in text or "Process load" in text


@pytest.fixture(scope="module")
def kouril_topologies(ddscope, tmp_path_factory):
    out = tmp_path_factory.mktemp("kouril_topologies")
    stdout, stderr = lab_run_watching(ddscope, KOURIL_TOPOLOGIES, out)
    return out, stdout, stderr


def test_n_to_1_is_one_node_with_n_topics(kouril_topologies):
    """N-1: one subscriber node subscribing to N topics, each published by its own node (ground truth, tshark SEDP)."""
    run, _, _ = kouril_topologies
    recs = truth_records(run)
    rcv = [r for r in recs if r["event"] == "receive" and r["topic"].startswith("/n_one/")]
    assert {r["node"] for r in rcv} == {"gen2_sub0"}
    assert {r["topic"] for r in rcv} == {f"/n_one/p{i}/s64B_20hz_reliable" for i in range(4)}
    pubs = {r["topic"]: r["node"] for r in recs if r["event"] == "publish" and r["topic"].startswith("/n_one/")}
    assert sorted(pubs.values()) == [f"gen2_pub{i}" for i in range(4)] and len(set(pubs)) == 4
    # N-N: reader i gets publisher i's topic only
    nn = [r for r in recs if r["event"] == "receive" and r["topic"].startswith("/nn/")]
    assert {(r["node"], r["topic"]) for r in nn} == {(f"gen0_sub{i}", f"/nn/p{i}/s64B_20hz_reliable") for i in range(4)}
    # 1-N: four reader nodes of one topic
    one_n = {r["node"] for r in recs if r["event"] == "receive" and r["topic"].startswith("/one_n/")}
    assert one_n == {f"gen1_sub{i}" for i in range(4)}
    # tshark: the subscriber's participant announces four subscriptions, one per /n_one topic
    subs = tshark_fields(run / "pc2.pcapng", 'rtps.param.topicName contains "n_one"', "rtps.guidPrefix.src", "rtps.param.topicName")
    prefixes = {p for p, t in subs if all(x.startswith("rt/n_one/") for x in t.split(","))}
    topics_by_prefix: dict[str, set] = {}
    for p, t in subs:
        topics_by_prefix.setdefault(p, set()).update(t.split(","))
    assert any(len(v) == 4 for v in topics_by_prefix.values()), topics_by_prefix
    assert prefixes


def test_zero_byte_samples_on_the_wire_and_decoded(ddscope, kouril_topologies):
    """0-byte samples: every published one is a DATA submessage of 20 bytes (its header, no payload)
    from the writer's participant in tshark's rtps fields, and ddscope counts each as a 0-byte sample."""
    run, stdout, stderr = kouril_topologies
    recs = truth_records(run)
    pubs = {}
    for topic in ("/zero/s0B_20hz_best_effort", "/zero/s0B_20hz_reliable", "/zero_fastdds"):
        pub = [r for r in recs if r["event"] == "publish" and r["topic"] == topic]
        assert len(pub) >= 50 and all(r["size"] == 0 for r in pub), (topic, len(pub))
        pubs[topic] = pub
    # tshark: per participant, DATA submessages whose octetsToNextHeader is 20 (tshark flags them as
    # shorter than a DATA with payload and stops there, so no writer id or sn: count per participant)
    rows = tshark_fields(run / "pc1.pcapng", "rtps.sm.id == 0x15", "rtps.guidPrefix.src", "rtps.sm.id", "rtps.sm.octetsToNextHeader")
    empty: dict[str, int] = {}
    for prefix, ids, octets in rows:
        for sm, o in zip(ids.split(","), octets.split(",")):
            if sm == "0x15" and o == "20":
                empty[prefix] = empty.get(prefix, 0) + 1
    fast = pubs["/zero_fastdds"][0]["writer_guid"][:24]
    cyc = pubs["/zero/s0B_20hz_best_effort"][0]["writer_guid"][:24]
    assert empty.get(fast) == len(pubs["/zero_fastdds"]), (empty, fast)
    # the Cyclone node writes both topics; its reliable writer resends (never acknowledged)
    assert empty.get(cyc, 0) >= len(pubs["/zero/s0B_20hz_best_effort"]) + len(pubs["/zero/s0B_20hz_reliable"]), (empty, cyc)
    assert set(empty) == {fast, cyc}, empty
    cp = ddscope("topics", run / "pc1.pcapng", "--format", "json")
    topics = {x["topic_name"]: x for x in json.loads(cp.stdout)["topics"]}
    for topic, pub in pubs.items():
        t = topics[topic]
        assert t["min_sample_size"] == 0 and t["max_sample_size"] == 0, t
        if topic.endswith("reliable"):
            assert t["samples"] >= len(pub)
        else:
            assert t["samples"] == len(pub), (topic, t["samples"], len(pub))
    doc = json.loads((run / "run.json").read_text())
    assert doc["ok"], doc["failures"]


def test_agent_exports_process_load(tmp_path):
    """`agent --process NAME`: Prometheus gauges/counters per process, equal to /proc read by the test."""
    need_root()
    sleeper = subprocess.Popen(["sleep", "60"])
    port = free_port()
    agent = subprocess.Popen([ddscope_bin(), "agent", "-i", "lo", "--name", "topo-agent", "--export",
                              f"prometheus=127.0.0.1:{port}", "--process", "sleep", "--max-processes", "1000"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        text = ""
        for _ in range(50):
            time.sleep(0.2)
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
            except OSError:
                continue
            if f'pid="{sleeper.pid}"' in text:
                break
        assert f'pid="{sleeper.pid}"' in text, text[-2000:]
        def metric(name, **labels):
            for line in text.splitlines():
                if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
                    return float(line.rsplit(" ", 1)[1])
            raise AssertionError(f"{name} {labels} not exported")
        _, cpu, rss = read_proc(sleeper.pid)
        assert metric("ddscope_process_resident_memory_bytes", process="sleep", pid=sleeper.pid) == rss
        user = metric("ddscope_process_cpu_seconds_total", process="sleep", pid=sleeper.pid, mode="user")
        system = metric("ddscope_process_cpu_seconds_total", process="sleep", pid=sleeper.pid, mode="system")
        assert abs(user + system - cpu) <= 0.011
        vol = metric("ddscope_process_context_switches_total", process="sleep", pid=sleeper.pid, kind="voluntary")
        status = pathlib.Path(f"/proc/{sleeper.pid}/status").read_text()
        want = int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))
        assert vol == want  # sleep has one thread
        assert metric("ddscope_process_matched", process="sleep") >= 1
        assert "# TYPE ddscope_process_cpu_seconds_total counter" in text
    finally:
        agent.send_signal(signal.SIGINT)
        try:
            agent.wait(15)
        except subprocess.TimeoutExpired:
            agent.kill()
        sleeper.kill()
        sleeper.wait()
