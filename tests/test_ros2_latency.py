"""The ROS 2 layers and the end-to-end chain of `ddscope latency` on a fresh
traced lab run, checked per sample against the lab's ground truth (tracker
issue 11, "must be true").

Oracles:
  * the ground truth the workload nodes write themselves (HOST.truth.jsonl):
    per sample its writer GUID, sequence number, source timestamp, node, the
    input sample a relay computed it from, and the exact instants LTTng stamped
    its tracepoints with (`*_mono_ns`, CLOCK_MONOTONIC — the hosts share one
    kernel, so one clock across hosts);
  * babeltrace2 (python3-bt2, Debian's /usr/bin/python3) for the CLOCK_REALTIME
    offset each trace declares, which turns a monotonic instant into the
    capture's clock (checked against the truth's own realtime readings).
Wire instants (first packet at the sender, sample complete at the receiver)
come from ddscope's rows; the message layer itself is checked against tshark
in test_latency_lab.py. Layers of a wire row: ros_publish + dds_send + message
+ dds_receive + executor = ros_e2e; of a same-host row: ros_publish + dds_local
+ executor = ros_e2e. Chain end-to-end = the truth's rclcpp_publish of
/raw_image → callback_start of the /actuator sample computed from it.

Runs examples/lab/simple-robotic.toml for 3 s per case: Cyclone DDS nodes and
Fast DDS nodes, Jazzy layout (the join by source timestamp) and Humble (by
publish order; same-host deliveries by publish time). Needs root (network
namespaces); CI runs as root.
"""
from __future__ import annotations

import collections
import json
import re
import pathlib
import subprocess

import pytest

from conftest import REPO, have_root

SIMPLE = REPO / "examples" / "lab" / "simple-robotic.toml"
SYSTEM_PYTHON = "/usr/bin/python3"
HOSTS = ("pc1", "pc2")
CHAIN = ["/raw_image", "/image", "/actuator"]
TOL_NS = 1000  # 1 µs

BT2_OFFSET = r"""
import json, sys
import bt2
for msg in bt2.TraceCollectionMessageIterator(sys.argv[1]):
    if type(msg) is bt2._EventMessageConst:
        cs = msg.default_clock_snapshot
        print(json.dumps({"offset_ns": cs.ns_from_origin - cs.value * 10**9 // cs.clock_class.frequency,
                          "clock": cs.clock_class.name}))
        break
"""


def trace_offset(trace_dir: pathlib.Path) -> int:
    cp = subprocess.run([SYSTEM_PYTHON, "-c", BT2_OFFSET, str(trace_dir)], capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, f"babeltrace2 could not read {trace_dir}:\n{cp.stderr[-2000:]}"
    doc = json.loads(cp.stdout)
    assert doc["clock"] == "monotonic", doc
    return doc["offset_ns"]


class Truth:
    """The ground truth of both hosts, indexed for the rows."""

    def __init__(self, run: pathlib.Path):
        self.publish: dict[tuple[str, int], dict] = {}
        self.publish_by_ts: dict[tuple[str, int], dict] = {}
        self.receive: dict[tuple[str, str, int], dict] = {}
        self.receive_by_ts: dict[tuple[str, str, int], dict] = {}
        self.records: list[dict] = []
        for h in HOSTS:
            for line in (run / f"{h}.truth.jsonl").read_text().splitlines():
                r = json.loads(line)
                self.records.append(r)
                if r["event"] == "publish":
                    self.publish[(r["writer_guid"], r["seq"])] = r
                    self.publish_by_ts[(r["writer_guid"], r["source_ts_ns"])] = r
                else:
                    self.receive[(r["host"], r["writer_guid"], r["seq"])] = r
                    self.receive_by_ts[(r["host"], r["writer_guid"], r["source_ts_ns"])] = r


def ros_layers(pub: dict, rcv: dict, off: dict, row: dict) -> dict[str, int]:
    """The layers the truth gives for one (publish, receive) pair; wire instants from the row."""
    t = {
        "ros_publish_ns": pub["rmw_publish_mono_ns"] - pub["rclcpp_publish_mono_ns"],
        "executor_ns": rcv["callback_start_mono_ns"] - rcv["rmw_take_mono_ns"],
        "callback_ns": rcv["callback_end_mono_ns"] - rcv["callback_start_mono_ns"],
        "ros_e2e_ns": rcv["callback_start_mono_ns"] - pub["rclcpp_publish_mono_ns"],
        "rclcpp_publish_ts_ns": pub["rclcpp_publish_mono_ns"] + off[pub["host"]],
        "rmw_publish_ts_ns": pub["rmw_publish_mono_ns"] + off[pub["host"]],
        "rmw_take_ts_ns": rcv["rmw_take_mono_ns"] + off[rcv["host"]],
        "callback_start_ts_ns": rcv["callback_start_mono_ns"] + off[rcv["host"]],
        "callback_end_ts_ns": rcv["callback_end_mono_ns"] + off[rcv["host"]],
    }
    if row["status"] == "same_host":
        t["dds_local_ns"] = rcv["rmw_take_mono_ns"] - pub["rmw_publish_mono_ns"]
    else:
        t["dds_send_ns"] = row["sender_first_ts_ns"] - (pub["rmw_publish_mono_ns"] + off[pub["host"]])
        t["dds_receive_ns"] = (rcv["rmw_take_mono_ns"] + off[rcv["host"]]) - row["receiver_last_ts_ns"]
    return t


def chain_truth(truth: Truth, rcv_actuator: dict) -> tuple[int, list[dict]]:
    """Walks an /actuator receive back through the relays' src links to the /raw_image publish."""
    pubs = []
    p = truth.publish[(rcv_actuator["writer_guid"], rcv_actuator["seq"])]
    pubs.append(p)
    while "src_writer_guid" in p:
        p = truth.publish[(p["src_writer_guid"], p["src_seq"])]
        pubs.append(p)
    pubs.reverse()
    assert [p["topic"] for p in pubs] == CHAIN, pubs
    return rcv_actuator["callback_start_mono_ns"] - pubs[0]["rclcpp_publish_mono_ns"], pubs


# Cyclone DDS nodes, and Fast DDS publishing /image and /drive across the link (as test_lab_tracing.py)
FASTDDS_NODES = ("filter", "sensor", "msg_driven", "monitor_node")
CASES = [("cyclone", "jazzy"), ("cyclone", "humble"), ("fastdds", "jazzy"), ("fastdds", "humble")]


@pytest.fixture(scope="module", params=CASES, ids=[f"{v}-{d}" for v, d in CASES])
def run(request, ddscope, tmp_path_factory):
    assert have_root(), "the lab tests need root (network namespaces); CI runs as root"
    vendor, distro = request.param
    out = tmp_path_factory.mktemp("ros2lat") / f"{vendor}-{distro}"
    extra = [a for n in FASTDDS_NODES for a in ("--vendor", f"{n}=fastdds")] if vendor == "fastdds" else []
    # The rates are not what this test judges (test_lab.py does): on a busy machine Fast DDS's 2.7 MB
    # /image leaves in bursts (seen in CI: "bursty" on the wire while published at 9.999 Hz), which the
    # lab rightly calls a fidelity failure. Reported, not enforced here; losses still fail the run.
    scenario = tmp_path_factory.mktemp("scenario") / "simple-robotic.toml"
    scenario.write_text(SIMPLE.read_text() + "\n[fidelity]\nenforce = false\n")
    cp = ddscope("lab", "run", scenario, "--duration", "3s", "--tracing", distro, "--out", out, *extra, check=False, timeout=600)
    assert cp.returncode == 0, f"traced lab run failed ({cp.returncode}):\n{cp.stdout}\n{cp.stderr}"
    off = {h: trace_offset(out / f"{h}.lttng") for h in HOSTS}
    truth = Truth(out)
    # The declared offset is CLOCK_REALTIME − CLOCK_MONOTONIC: the nodes read CLOCK_REALTIME right
    # before each tracepoint, so realtime − monotonic instant ≤ offset, and close to it. Humble's
    # rmw_publish is the exception: the sample is stamped by the write, after the tracepoint
    # (as rmw_fastrtps and rmw_cyclonedds of Humble do), so there realtime − monotonic ≥ offset.
    before = ("rclcpp_publish", "rmw_take", "callback_start") + (("rmw_publish",) if distro == "jazzy" else ())
    for h in HOSTS:
        gaps = [r[f"{k}_ns"] - r[f"{k}_mono_ns"] for r in truth.records if r["host"] == h
                for k in before if f"{k}_mono_ns" in r]
        assert gaps and max(gaps) <= off[h] < max(gaps) + 1_000_000, (h, off[h], max(gaps))
        if distro == "humble":
            after = [r["rmw_publish_ns"] - r["rmw_publish_mono_ns"] for r in truth.records if r["host"] == h and "rmw_publish_mono_ns" in r]
            assert after and min(after) >= off[h] - 1_000, (h, off[h], min(after))
    return distro, out, truth, off


def rows_of(ddscope, out, tmp_path, *args, name="rows.jsonl"):
    p = tmp_path / name
    ddscope("latency", out, *args, "--format", "jsonl", "-o", p)
    return [json.loads(line) for line in p.read_text().splitlines()]


def test_every_ros_layer_of_every_sample_equals_the_truth(run, ddscope, tmp_path):
    distro, out, truth, off = run
    rows = rows_of(ddscope, out, tmp_path)
    expected_join = {"jazzy": {"wire": "source_ts", "same_host": "source_ts"},
                     "humble": {"wire": "publish_time", "same_host": "publish_time"}}[distro]  # Humble: the INFO_TS lies in the publish window
    seen = set()
    worst = collections.defaultdict(int)
    for r in rows:
        assert r["status"] in ("delivered", "same_host"), r
        kind = "same_host" if r["status"] == "same_host" else "wire"
        assert r["join"] == expected_join[kind], r
        pub = truth.publish.get((r["writer_id"], r["sn"])) if kind == "wire" else truth.publish_by_ts.get((r["writer_id"], r["source_ts_ns"]))
        assert pub is not None, f"row without a published sample in the truth: {r}"
        assert r["sn"] == pub["seq"] and r["source_ts_ns"] == pub["source_ts_ns"], (r, pub)
        rcv = truth.receive.get((r["receiver"], r["writer_id"], pub["seq"]))
        assert rcv is not None and rcv["source_ts_ns"] == pub["source_ts_ns"], (r, rcv)
        assert r["sender_node"] == "/" + pub["node"] and r["receiver_node"] == "/" + rcv["node"], (r, pub, rcv)
        assert r["topic_name"] == pub["topic"]
        for k, v in ros_layers(pub, rcv, off, r).items():
            assert r[k] is not None, f"{k} missing on {r}"
            d = abs(r[k] - v)
            worst[k] = max(worst[k], d)
            assert d <= TOL_NS, f"{r['topic_name']} {r['writer_id']} sn {r['sn']} {k}: ddscope {r[k]} truth {v}"
        # the layers add up exactly
        if kind == "wire":
            assert r["latency_ns"] == r["receiver_last_ts_ns"] - r["sender_first_ts_ns"]
            parts = [r["ros_publish_ns"], r["dds_send_ns"], r["latency_ns"], r["dds_receive_ns"], r["executor_ns"]]
            assert r["dds_local_ns"] is None
        else:
            parts = [r["ros_publish_ns"], r["dds_local_ns"], r["executor_ns"]]
            assert r["dds_send_ns"] is None and r["dds_receive_ns"] is None
        assert sum(parts) == r["ros_e2e_ns"], r
        key = (r["receiver"], r["writer_id"], pub["seq"])
        assert key not in seen, f"two rows for {key}"
        seen.add(key)
    # every sample a node received has its row
    missing = [k for k in truth.receive if k not in seen]
    assert not missing, f"{len(missing)} received samples without a row, e.g. {missing[:3]}"
    assert len(seen) == len(truth.receive) > 100
    print(f"{distro}: {len(rows)} rows; max |layer − truth| ns:", dict(worst))


def test_chain_end_to_end_equals_the_truth_for_every_image(run, ddscope, tmp_path):
    distro, out, truth, off = run
    chain_rows = tmp_path / "chain.jsonl"
    summary = tmp_path / "summary.json"
    ddscope("latency", out, "--path", ",".join(CHAIN), "--rows", chain_rows, "--format", "json", "-o", summary)
    rows = [json.loads(line) for line in chain_rows.read_text().splitlines()]
    by_instance = collections.defaultdict(list)
    for r in rows:
        assert r["chain"] == ",".join(CHAIN)
        by_instance[r["instance"]].append(r)
    actuator = {k: v for k, v in truth.receive.items() if v["topic"] == "/actuator"}
    assert len(actuator) >= 20, "too few images went through the chain"
    assert len(by_instance) == len(actuator), (len(by_instance), len(actuator))
    worst = 0
    matched = set()
    for inst, hops in by_instance.items():
        hops.sort(key=lambda h: h["hop"])
        assert [h["topic_name"] for h in hops] == CHAIN, hops
        assert [h["delivery"] for h in hops] == ["same_host", "wire", "same_host"]
        assert [(h["sender"], h["receiver"]) for h in hops] == [("pc1", "pc1"), ("pc1", "pc2"), ("pc2", "pc2")]
        assert [(h["sender_node"], h["receiver_node"]) for h in hops] == [("/sensor_1", "/filter"), ("/filter", "/msg_driven"), ("/msg_driven", "/actuator")]
        last = hops[-1]
        rcv = actuator[("pc2", last["writer_id"], last["sn"])]
        e2e, pubs = chain_truth(truth, rcv)
        assert [h["writer_id"] for h in hops] == [p["writer_guid"] for p in pubs]
        assert [h["sn"] for h in hops] == [p["seq"] for p in pubs]
        d = abs(last["chain_e2e_ns"] - e2e)
        worst = max(worst, d)
        assert d <= TOL_NS, f"instance {inst}: chain_e2e {last['chain_e2e_ns']} truth {e2e}"
        assert all(h["chain_e2e_ns"] == last["chain_e2e_ns"] for h in hops)
        # Σ hop ros_e2e + Σ node = end-to-end; node = the relay's callback_start → its publish
        assert sum(h["ros_e2e_ns"] for h in hops) + sum(h["node_ns"] for h in hops[:-1]) == last["chain_e2e_ns"]
        assert hops[-1]["node_ns"] is None
        for h, nxt in zip(hops, pubs[1:]):
            rc = truth.receive[(h["receiver"], h["writer_id"], h["sn"])]
            assert abs(h["node_ns"] - (nxt["rclcpp_publish_mono_ns"] - rc["callback_start_mono_ns"])) <= TOL_NS
        matched.add(("pc2", last["writer_id"], last["sn"]))
    assert matched == set(actuator)
    doc = json.loads(summary.read_text())
    chain = doc["chains"]["chain"]
    assert chain["path"] == CHAIN and chain["instances"] == len(actuator) and chain["incomplete"] == 0
    assert chain["e2e"]["count"] == len(actuator)
    truth_e2e = [chain_truth(truth, r)[0] for r in actuator.values()]
    assert abs(chain["e2e"]["mean_ms"] - sum(truth_e2e) / len(truth_e2e) / 1e6) <= 1e-3
    assert abs(chain["e2e"]["max_ms"] - max(truth_e2e) / 1e6) <= 1e-3
    assert [h["topic"] for h in chain["hops"]] == CHAIN
    # every flow names the nodes that published and received it
    for f in doc["flows"]:
        pubs = {"/" + r["node"] for r in truth.records if r["event"] == "publish" and r["topic"] == f["topic"]}
        rcvs = {"/" + r["node"] for r in truth.records if r["event"] == "receive" and r["topic"] == f["topic"] and r["host"] == f["receiver"]}
        assert (set(f["sender_nodes"]), set(f["receiver_nodes"])) == (pubs, rcvs), f
    print(f"{distro}: {len(actuator)} chain instances; max |chain_e2e − truth| = {worst} ns")


def test_text_output_prints_the_chain_and_its_layers(run, ddscope):
    distro, out, truth, off = run
    cp = ddscope("latency", out, "--path", ",".join(CHAIN))
    lines = cp.stdout.splitlines()
    n = sum(1 for v in truth.receive.values() if v["topic"] == "/actuator")
    # every /raw_image input reached /actuator (the lab's nodes drop nothing on this run)
    assert lines[0] == f"chain c1 = /raw_image -> /image -> /actuator: {n} instances (0 without an end-to-end value); of {n} inputs on /raw_image: {n} reached /actuator", lines[0]
    # the table names the chain c1 (its full name is the line above): never cut
    table = [l.split() for l in lines[3:] if l.startswith("c1 ")]
    got = {(c[1], c[2], c[-9]) for c in table}
    assert ("e2e", "chain_e2e") in {(a, c) for a, _, c in got}
    for hop, topic, layers in [("0", "/raw_image", ["ros_publish", "dds_local", "executor", "callback", "ros_e2e", "node"]),
                               ("1", "/image", ["ros_publish", "dds_send", "message", "dds_receive", "executor", "callback", "ros_e2e", "node"]),
                               ("2", "/actuator", ["ros_publish", "dds_local", "executor", "callback", "ros_e2e"])]:
        for l in layers:
            assert (hop, topic, l) in got, (hop, topic, l, sorted(got))
    for c in table:
        assert int(c[-8]) == n, c  # every layer counted for every instance
    assert f"ros2 join:" in cp.stderr


def test_trace_caps_are_settable_and_their_evictions_reported(run, ddscope):
    """The ROS 2 layer's caps are `ddscope limits` keys (section `trace`): set tiny, the join and the
    assembler must report what they dropped; at the defaults this run drops nothing (oracle: the
    lab's ground truth, which the default run's rows equal in the tests above)."""
    distro, out, truth, off = run
    cp = ddscope("latency", out, "--path", ",".join(CHAIN))
    assert "dropped before their window ended" not in cp.stderr and "evicted (caps)" not in cp.stderr, cp.stderr
    cp = ddscope("latency", out, "--path", ",".join(CHAIN), "--limit", "trace.max_publishes=2", "--limit", "trace.max_takes=2",
                 "--limit", "trace.max_threads=1", "--limit", "trace.max_hops=2")
    m = re.search(r"ros2 join: .*?(\d+) publishes and (\d+) takes dropped before their window ended", cp.stderr)
    assert m and int(m.group(1)) > 0 and int(m.group(2)) > 0, cp.stderr
    m = re.search(r"trace \S+: .*?(\d+) threads, \d+ publisher counters and \d+ pointer links evicted \(caps\)", cp.stderr)
    assert m and int(m.group(1)) > 0, cp.stderr
    m = re.search(r"chains: (\d+) hops and \d+ paths evicted", cp.stderr)
    assert m and int(m.group(1)) > 0, cp.stderr
    cp = ddscope("latency", out, "--limit", "trace.max_takes=0", check=False)
    assert cp.returncode != 0 and "trace.max_takes" in cp.stderr, cp.stderr


def test_path_auto_lists_the_chain(run, ddscope):
    distro, out, truth, off = run
    cp = ddscope("latency", out, "--path", "auto", "--format", "json")
    doc = json.loads(cp.stdout)
    n = sum(1 for v in truth.receive.values() if v["topic"] == "/actuator")
    paths = {tuple(p["topics"]): p for p in doc["chains"]["paths"]}
    assert tuple(CHAIN) in paths, sorted(paths)
    assert paths[tuple(CHAIN)]["count"] == n
    cp = ddscope("latency", out, "--path", "auto")
    lines = cp.stdout.splitlines()
    name = next(l.split("=", 1)[0].strip() for l in lines if l.strip().endswith("= /raw_image -> /image -> /actuator"))
    assert any(l.startswith(name + " ") and "chain_e2e" in l and f"{n} instances" in l for l in lines), cp.stdout


def test_sender_node_from_the_wire_without_traces(ddscope, tmp_path):
    """No trace: the sender's ROS node comes from ros_discovery_info on the wire.
    Oracle: the shared capture is ROS 2's demo talker/listener (foxglove/rtps), whose
    /chatter writer belongs to the node /talker. The capture is given as two capture
    points (the second 1 ms later) so that every sample has a sender and a receiver."""
    from conftest import SHARED_CAPTURES
    src = SHARED_CAPTURES / "cyclone-talker-listener-loopback.pcapng"
    assert src.exists(), f"missing shared capture {src}"
    a, b = tmp_path / "a.pcapng", tmp_path / "b.pcapng"
    a.write_bytes(src.read_bytes())
    b.write_bytes(src.read_bytes())
    rows = [json.loads(l) for l in ddscope("latency", a, b, "--offset", "b=-1ms", "--topic", "/chatter", "--format", "jsonl").stdout.splitlines()]
    assert len(rows) >= 5
    for r in rows:
        assert r["topic_name"] == "/chatter" and r["sender"] == "a" and r["receiver"] == "b", r
        assert r["sender_node"] == "/talker" and r["join"] == "none" and r["ros_e2e_ns"] is None, r
    doc = json.loads(ddscope("latency", a, b, "--offset", "b=-1ms", "--topic", "/chatter", "--format", "json").stdout)
    assert [(f["topic"], f["sender_nodes"]) for f in doc["flows"]] == [("/chatter", ["/talker"])]
    text = ddscope("latency", a, b, "--offset", "b=-1ms", "--topic", "/chatter").stdout
    flow_lines = [l.split() for l in text.splitlines() if l.startswith("/chatter ")]
    # the flow table: topic, domain, sender, receiver, sender_nodes, ...
    assert flow_lines and flow_lines[-1][:5] == ["/chatter", "0", "a", "b", "/talker"], text


def report_data(html: pathlib.Path) -> dict:
    text = html.read_text()
    start = text.index("window.DDSCOPE_REPORT = ") + len("window.DDSCOPE_REPORT = ")
    end = text.index(";</script>", start)
    return json.loads(text[start:end])


def test_report_stacks_layers_per_topic_and_per_chain(run, ddscope, tmp_path):
    """The report of a traced run embeds, per flow, ros_e2e split into its layers and, for the
    chain, its end-to-end latency stacked per hop; the means add up and equal the truth's.
    Oracles: the ground truth (as above) and headless Chromium rendering the page without errors."""
    from conftest import browser_inspect

    distro, out, truth, off = run
    html = tmp_path / f"report-{distro}.html"
    ddscope("report", out, "--path", ",".join(CHAIN), "--html", html)
    doc = report_data(html)
    (rd,) = doc["runs"]
    flows = {t["topic"]: t["runs"][rd["name"]] for t in doc["topics"]}
    want = {"/raw_image": ["ros_publish", "dds_local", "executor"], "/actuator": ["ros_publish", "dds_local", "executor"],
            "/image": ["ros_publish", "dds_send", "message", "dds_receive", "executor"],
            "/drive": ["ros_publish", "dds_send", "message", "dds_receive", "executor"]}
    groups = {"ros_publish": "ros2", "executor": "ros2", "dds_send": "dds", "dds_receive": "dds", "dds_local": "dds", "message": "wire"}
    for topic, layers in want.items():
        (f,) = flows[topic]
        st = f["stack"]
        assert [p["layer"] for p in st["parts"]] == layers, (topic, st)
        assert all(p["group"] == groups[p["layer"]] for p in st["parts"])
        assert st["adds_up"] and st["total_layer"] == "ros_e2e"
        assert abs(sum(p["mean_ms"] for p in st["parts"]) - st["total"]["mean_ms"]) < 1e-6, st
        # the total is the truth's mean rclcpp_publish → callback_start over the flow's samples
        pairs = [(truth.publish[(r["writer_guid"], r["seq"])], r) for r in truth.records
                 if r["event"] == "receive" and r["topic"] == topic]
        t_mean = sum(r["callback_start_mono_ns"] - p["rclcpp_publish_mono_ns"] for p, r in pairs) / len(pairs) / 1e6
        assert st["total"]["count"] == len(pairs) and abs(st["total"]["mean_ms"] - t_mean) <= 1e-3, (topic, st["total"], t_mean)
        assert f["summary"]["sender_nodes"] == sorted({"/" + p["node"] for p, _ in pairs})
        assert f["summary"]["receiver_nodes"] == sorted({"/" + r["node"] for _, r in pairs})
        for l in layers + ["ros_e2e", "callback"]:
            assert f["boxes"][l]["count"] == len(pairs), (topic, l)
    ch = rd["chains"]
    assert [p["topics"] for p in ch["paths"]] == [CHAIN]
    m = ch["measured"]
    n = sum(1 for v in truth.receive.values() if v["topic"] == "/actuator")
    assert m["path"] == CHAIN and m["instances"] == n and m["incomplete"] == 0
    st = m["stack"]
    assert st["adds_up"] and st["total_layer"] == "chain_e2e"
    assert [(p["hop"], p["layer"]) for p in st["parts"]] == \
        [(0, l) for l in want["/raw_image"] + ["node"]] + [(1, l) for l in want["/image"] + ["node"]] + [(2, l) for l in want["/actuator"]]
    assert abs(sum(p["mean_ms"] for p in st["parts"]) - st["total"]["mean_ms"]) < 1e-6
    e2e = [chain_truth(truth, r)[0] for r in truth.receive.values() if r["topic"] == "/actuator"]
    assert abs(st["total"]["mean_ms"] - sum(e2e) / len(e2e) / 1e6) <= 1e-3
    assert m["e2e_box"]["count"] == n and [h["topic"] for h in m["hops"]] == CHAIN
    seen = browser_inspect(html.as_uri(), tmp_path / f"report-{distro}.png", 1500,
                           ["End-to-end chains", "Chain /raw_image → /image → /actuator", "ros_e2e split into its layers", "/sensor_1"])
    assert not seen["errors"], seen["errors"]
    assert all(seen["found"].values()), seen["found"]
    for c in seen["charts"]:
        assert c["points"] > 0 and c["ink"] > 0.005, [(c["section"], c["points"]) for c in seen["charts"]]
