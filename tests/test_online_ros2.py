"""The ROS 2 layer online through the real binaries (issue 11, item 6).

`ddscope agent -i lo --trace-live net://…` follows a real live LTTng session
(lttng-sessiond, lttng-relayd in live mode) while ddslab-tracegen (the lab's
ros2_tracing replica, Jazzy layout) is traced, and streams its trace items to
a real `ddscope serve`. tracegen publishes /raw_image and takes it in the same
process: serve joins each publish to its take trace to trace (same host) and
shows the ROS 2 layers, online.

Oracles:
  * babeltrace2's own reading (python3-bt2) of relayd's on-disk copy of the
    live session: the layers' counts and extremes are computed here from the
    raw events (ros_publish = rmw_publish - rclcpp_publish, dds_local =
    rmw_take - rmw_publish, executor = callback_start - rmw_take, callback);
  * tracegen's own count of the events it emitted (every one read live);
  * Debian's headless Chromium rendering the dashboard: the ROS 2 section with
    its stacked chart and the chain table;
  * a flood beyond `--trace-queue`: the agent's counters, /metrics and closing
    line count the drops, and publishes + takes = sent + dropped.
(The equality of serve's layers with the offline `ddscope latency --trace` on
the same captures and traces is crates/monitor/tests/ros2_online.rs.)
Needs root (LTTng root session daemon, packet capture).
"""
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from conftest import REPO, browser_inspect, ddscope_bin, free_port, require_tool

pytestmark = pytest.mark.usefixtures("needs_root")

TRACEGEN = REPO / "lab" / "build" / "ddslab-tracegen"
RECORD = REPO / "lab" / "tracegen" / "record.sh"
BT2 = REPO / "crates" / "trace" / "tests" / "support" / "bt2_jsonl.py"


def get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


@pytest.fixture
def procs():
    ps = []
    yield ps
    for p in reversed(ps):
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def start_relayd(out, procs):
    ports = [free_port() for _ in range(3)]
    ctrl, data, live = ports
    p = subprocess.Popen(["lttng-relayd", f"--control-port=tcp://localhost:{ctrl}", f"--data-port=tcp://localhost:{data}",
                          f"--live-port=tcp://localhost:{live}", f"--output={out}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(p)
    end = time.time() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", live), timeout=1).close()
            break
        except OSError:
            assert time.time() < end, "lttng-relayd did not listen"
            time.sleep(0.05)
    return ctrl, data, live


def record_live(session, ctrl, data, messages, rate):
    cp = subprocess.run([str(RECORD), "unused", "--session", session, "--live", f"net://localhost:{ctrl}:{data}", "--",
                         "bash", "-c", f"sleep 1; exec {TRACEGEN} --distro jazzy --messages {messages} --rate {rate} --miss-every 5"],
                        capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr
    return sum(json.loads(line)["total"] for line in cp.stdout.splitlines() if line.startswith("{"))


def relayd_copy(out, session):
    host = out / socket.gethostname()
    d = next(p for p in host.iterdir() if p.name.startswith(session))
    return d / "ust" / "uid" / "0" / "64-bit"


def bt2_events(trace):
    cp = subprocess.run(["/usr/bin/python3", str(BT2), str(trace)], capture_output=True, text=True, check=True)
    return [json.loads(line) for line in cp.stdout.splitlines()]


def expected_layers(events):
    """Per message, from babeltrace2's events by their place on each tracegen thread (µs-exact ns)."""
    by = lambda suffix: [e for e in events if (e.get("procname") or "").endswith(suffix)]
    pubs, takes = [], []
    rclcpp = None
    for e in by("-timer"):
        if e["name"] == "ros2:rclcpp_publish":
            rclcpp = e["ns"]
        elif e["name"] == "ros2:rmw_publish":
            pubs.append((rclcpp, e["ns"]))
    take = cbs = None
    for e in by("-exec"):
        if e["name"] == "ros2:rmw_take" and e["fields"]["taken"] == 1:
            take = e["ns"]
        elif e["name"] == "ros2:callback_start":
            cbs = e["ns"]
        elif e["name"] == "ros2:callback_end" and take is not None:
            takes.append((take, cbs, e["ns"]))
            take = None
    assert len(pubs) == len(takes), (len(pubs), len(takes))
    return {
        "ros_publish": [r - c for c, r in pubs],
        "dds_local": [t[0] - p[1] for p, t in zip(pubs, takes)],
        "executor": [t[1] - t[0] for t in takes],
        "callback": [t[2] - t[1] for t in takes],
        "ros_e2e": [t[1] - p[0] for p, t in zip(pubs, takes)],
    }


def start_agent(procs, log, port, url, extra=()):
    p = subprocess.Popen([ddscope_bin(), "agent", "-i", "lo", "--name", "pc1", "--send-to", f"http://127.0.0.1:{port}",
                          "--trace-live", url, "--trace-lag", "1s", *extra], stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    procs.append(p)
    end = time.time() + 20
    while "following the live trace session" not in log.read_text():
        assert p.poll() is None, log.read_text()
        assert time.time() < end, log.read_text()
        time.sleep(0.1)
    return p


def stop(p, log):
    p.send_signal(signal.SIGINT)
    p.wait(30)
    return log.read_text()


def test_agent_follows_a_live_session_and_serve_shows_the_ros2_layers(tmp_path, artifacts, procs):
    assert TRACEGEN.is_file(), f"{TRACEGEN} missing: build the lab"
    N = 40
    port = free_port()
    serve = subprocess.Popen([ddscope_bin(), "serve", "--listen", f"127.0.0.1:{port}", "--window", "1s", "--idle", "30s",
                              "--path", "/raw_image,/image"], stdout=subprocess.DEVNULL, stderr=open(tmp_path / "serve.log", "w"))
    procs.append(serve)
    ctrl, data, live = start_relayd(tmp_path / "relayd", procs)
    session = f"ddscope-online-ros2-{os.getpid()}"
    url = f"net://localhost:{live}/host/{socket.gethostname()}/{session}"
    log = tmp_path / "agent.log"
    agent = start_agent(procs, log, port, url)
    total = record_live(session, ctrl, data, N, 500)

    state = None
    end = time.time() + 60
    while time.time() < end:
        state = json.loads(get(f"http://127.0.0.1:{port}/api/state"))
        a = next((x for x in state["agents"] if x["name"] == "pc1"), None)
        tc = ((a or {}).get("counters") or {}).get("trace") or {}
        flows = [f["summary"] for f in state["flows"] if f["summary"]["topic"] == "/raw_image"]
        if tc.get("events") == total and flows and dict(flows[0]["layers"]).get("ros_e2e", {}).get("count") == N:
            break
        time.sleep(0.5)
    a = next(x for x in state["agents"] if x["name"] == "pc1")
    tc = a["counters"]["trace"]
    assert tc["events"] == total, tc  # every event tracegen emitted was read live
    assert (tc["dropped_queue_full"], tc["discarded_events"]) == (0, 0), tc
    assert tc["layout"] == "jazzy"
    assert a["trace_items"] > 0

    exp = expected_layers(bt2_events(relayd_copy(tmp_path / "relayd", session)))
    assert len(exp["ros_publish"]) == N
    flow = next((f["summary"] for f in state["flows"] if f["summary"]["topic"] == "/raw_image"), None)
    assert flow, json.dumps([state["ros2"]["join"], state["correlation"], state["pending"], a["counters"]["trace"]])
    assert (flow["sender"], flow["receiver"]) == ("pc1", "pc1"), flow  # same-host deliveries, trace to trace
    layers = dict(flow["layers"])
    for name, vals in exp.items():
        got = layers[name]
        assert got["count"] == N, (name, got)
        assert abs(got["min_ms"] - min(vals) / 1e6) < 1e-9 and abs(got["max_ms"] - max(vals) / 1e6) < 1e-9, (name, got, min(vals), max(vals))
    assert state["ros2"]["join"]["takes_same_host"] == N, state["ros2"]["join"]
    assert state["ros2"]["chains"]["chain"]["path"] == ["/raw_image", "/image"]

    # serve's /metrics (issue 26): the same layers as histograms, count and sum equal babeltrace2's.
    # A label set's first exposition shows zeros (so that rate() counts it): read twice.
    text = ""
    for _ in range(2):
        text = get(f"http://127.0.0.1:{port}/metrics")
    def metric(name, **labels):
        for line in text.splitlines():
            if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
        return None
    for name, vals in exp.items():
        sel = dict(topic="/raw_image", sender="pc1", receiver="pc1", layer=name)
        assert metric("ddscope_latency_seconds_count", **sel) == N, (name, [l for l in text.splitlines() if "/raw_image" in l][:40])
        assert abs(metric("ddscope_latency_seconds_sum", **sel) - sum(vals) / 1e9) < 1e-6, name
    assert metric("ddscope_latency_samples_total", topic="/raw_image", sender="pc1", receiver="pc1", status="same_host") == N

    seen = browser_inspect(f"http://127.0.0.1:{port}/", artifacts / "online-ros2.png", 2500,
                           texts=["ROS 2 layers", "dds_local p50 ms", "/raw_image → /image", "pc1 → pc1"])
    assert all(seen["found"].values()), seen["found"]
    ros_charts = [c for c in seen["charts"] if c["section"] == "ros2"]
    assert ros_charts and all(c["points"] > 0 and c["ink"] > 0.001 for c in ros_charts), seen["charts"]
    assert not [e for e in seen["errors"] if "Content Security Policy" not in e], seen["errors"]

    err = stop(agent, log)
    m = re.search(r"trace net://\S+: (\d+) events \((\d+) ros2, (\d+) lost by LTTng\); (\d+) publishes and takes sent, (\d+) dropped \(queue full\)", err)
    assert m and int(m.group(1)) == total and int(m.group(5)) == 0, err


def test_a_trace_flood_beyond_the_queue_is_dropped_and_counted(tmp_path, procs):
    """--trace-queue 50 against tracegen as fast as it goes: drops are counted
    (counters JSON, /metrics, closing line) and publishes + takes = sent + dropped."""
    port = free_port()
    serve = subprocess.Popen([ddscope_bin(), "serve", "--listen", f"127.0.0.1:{port}", "--idle", "30s"],
                             stdout=subprocess.DEVNULL, stderr=open(tmp_path / "serve.log", "w"))
    procs.append(serve)
    ctrl, data, live = start_relayd(tmp_path / "relayd", procs)
    session = f"ddscope-online-flood-{os.getpid()}"
    url = f"net://localhost:{live}/host/{socket.gethostname()}/{session}"
    log = tmp_path / "agent.log"
    mport = free_port()
    agent = start_agent(procs, log, port, url, ["--trace-queue", "50", "--export", f"prometheus=127.0.0.1:{mport}"])
    total = record_live(session, ctrl, data, 20000, 0)
    end = time.time() + 120
    tc = {}
    while time.time() < end:
        state = json.loads(get(f"http://127.0.0.1:{port}/api/state"))
        a = next((x for x in state["agents"] if x["name"] == "pc1"), None)
        tc = ((a or {}).get("counters") or {}).get("trace") or {}
        if tc.get("events") == total:
            break
        time.sleep(0.5)
    assert tc.get("events") == total, tc
    assert tc["max_queued"] == 50 and tc["queued"] <= 50, tc
    assert tc["dropped_queue_full"] > 0, tc
    asm = tc["assemble"]
    assert asm["publishes"] + asm["takes"] == tc["items"] + tc["dropped_queue_full"] + tc["queued"], tc
    time.sleep(1.5)  # the exporters' health snapshot is refreshed every second
    metrics = get(f"http://127.0.0.1:{mport}/metrics")
    m = re.search(r'ddscope_trace_total\{capture="pc1",what="dropped_queue_full"\} (\d+)', metrics)
    assert m and int(m.group(1)) > 0, metrics[-3000:]
    err = stop(agent, log)
    m = re.search(r"(\d+) publishes and takes sent, (\d+) dropped \(queue full\)", err)
    assert m and int(m.group(2)) > 0, err
