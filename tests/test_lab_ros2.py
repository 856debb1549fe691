"""Real ROS 2 in the lab (issue 37): the thesis's simple robotic application as real rclcpp nodes
(lab/ros2/ddslab_ros2, Jazzy built from ../shared/ros2 by lab/ros2/build.sh) on real
rmw_cyclonedds_cpp, rmw_fastrtps_cpp and rmw_zenoh_cpp, two hosts, real ros2_tracing (tracetools'
own tracepoints in LTTng sessions), checked against oracles nobody here wrote:

  * babeltrace2 (python3-bt2 under Debian's /usr/bin/python3) reading the hosts' LTTng traces: the
    instants of rclcpp_publish, rmw_publish, rmw_take, callback_start and callback_end of every
    sample, found the way ros2_tracing's own analyses do (an rmw_publish is preceded on its thread
    by the rclcpp_publish that made it, a take's callback starts next on the taking thread, a
    publish and a take are one sample when rmw_publish.timestamp = rmw_take.source_timestamp);
  * the nodes' ground truth (every sample published and received, its writer, sequence number and
    source timestamp as the rmw reported them, and the input a relay computed it from);
  * the rmw itself: the node names on the wire come from the real rmw's ros_discovery_info.

Needs root (network namespaces) and the real ROS 2 build (scripts/setup.sh builds it; the tests
skip, saying so, where ../shared/ros2 is absent).
"""
from __future__ import annotations

import collections
import json
import pathlib
import subprocess

import pytest

from conftest import REPO, have_root

SCENARIO = REPO / "examples" / "lab" / "ros2-simple-robotic.toml"
NODE = REPO / "lab" / "ros2" / "install" / "lib" / "ddslab_ros2" / "ddslab-ros2"
SYSTEM_PYTHON = "/usr/bin/python3"
HOSTS = ("pc1", "pc2")
CROSS = ("/image", "/drive")  # pc1 -> pc2
CHAIN = ["/raw_image", "/image", "/actuator"]

BT2_EVENTS = r"""
import json, sys
import bt2
KEEP = {"ros2:rclcpp_publish", "ros2:rcl_publish", "ros2:rmw_publish", "ros2:rmw_take", "ros2:callback_start",
        "ros2:callback_end", "ros2:rcl_publisher_init", "ros2:rcl_subscription_init", "ros2:rcl_node_init"}
for msg in bt2.TraceCollectionMessageIterator(sys.argv[1]):
    if type(msg) is not bt2._EventMessageConst:
        continue
    e = msg.event
    if e.name not in KEEP:
        continue
    d = {"name": e.name[5:], "t": msg.default_clock_snapshot.ns_from_origin,
         "vtid": int(e.common_context_field["vtid"]), "vpid": int(e.common_context_field["vpid"])}
    for k in ("timestamp", "source_timestamp", "taken", "rmw_publisher_handle", "rmw_subscription_handle",
              "publisher_handle", "callback", "topic_name", "node_name"):
        if k in e.payload_field:
            v = e.payload_field[k]
            d[k] = str(v) if k in ("topic_name", "node_name") else int(v)
    print(json.dumps(d))
"""


def bt2_events(trace: pathlib.Path) -> list[dict]:
    cp = subprocess.run([SYSTEM_PYTHON, "-c", BT2_EVENTS, str(trace)], capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, f"babeltrace2 could not read {trace}:\n{cp.stderr[-2000:]}"
    return [json.loads(l) for l in cp.stdout.splitlines()]


class Instants:
    """Per sample (its source timestamp) the trace instants of one host, as babeltrace2 reads them."""

    def __init__(self, events: list[dict]):
        self.publish: dict[int, dict] = {}   # source ts -> {rclcpp_publish, rmw_publish, topic}
        self.take: dict[int, list[dict]] = collections.defaultdict(list)  # source ts -> takes
        rmw_topic = {e["rmw_publisher_handle"]: e["topic_name"] for e in events if e["name"] == "rcl_publisher_init"}
        sub_topic = {e["rmw_subscription_handle"]: e["topic_name"] for e in events if e["name"] == "rcl_subscription_init"}
        last_rclcpp: dict[int, int] = {}
        pending_take: dict[int, dict] = {}
        for e in events:
            th = e["vtid"]
            if e["name"] == "rclcpp_publish":
                last_rclcpp[th] = e["t"]
            elif e["name"] == "rmw_publish":
                self.publish[e["timestamp"]] = {"rclcpp_publish": last_rclcpp.pop(th, None), "rmw_publish": e["t"],
                                                "topic": rmw_topic.get(e["rmw_publisher_handle"])}
            elif e["name"] == "rmw_take" and e["taken"]:
                t = {"rmw_take": e["t"], "topic": sub_topic.get(e["rmw_subscription_handle"]), "vtid": th}
                self.take[e["source_timestamp"]].append(t)
                pending_take[th] = t
            elif e["name"] == "callback_start" and th in pending_take:
                t = pending_take[th]
                t["callback_start"], t["callback"] = e["t"], e["callback"]
            elif e["name"] == "callback_end" and th in pending_take and pending_take[th].get("callback") == e["callback"]:
                pending_take.pop(th)["callback_end"] = e["t"]


def need_real_ros2():
    if not have_root():
        pytest.fail("the lab tests need root (network namespaces); CI runs as root")
    if not NODE.is_file():
        bundle = [p for p in (REPO.parent / "shared" / "ros2" / "ros2-jazzy-src.tar.zst", pathlib.Path("/work/shared/ros2/ros2-jazzy-src.tar.zst")) if p.is_file()]
        if bundle:
            pytest.fail(f"the real ROS 2 node is not built although {bundle[0]} is here: run lab/ros2/build.sh (scripts/setup.sh does)")
        pytest.skip("no ../shared/ros2 bundle: the real ROS 2 stack cannot be built here")


RMWS = ["rmw_cyclonedds_cpp", "rmw_fastrtps_cpp"]


@pytest.fixture(scope="module", params=RMWS)
def run(request, ddscope, tmp_path_factory):
    need_real_ros2()
    rmw = request.param
    base = tmp_path_factory.mktemp(f"ros2-{rmw}")
    sc = base / "scenario.toml"
    sc.write_text(SCENARIO.read_text().replace('middleware = "rmw_cyclonedds_cpp"', f'middleware = "{rmw}"'))
    out = base / "run"
    ddscope("lab", "run", sc, "--tracing", "jazzy", "--duration", "8s", "--out", out, timeout=900)
    return rmw, out


def truth_of(run: pathlib.Path):
    pubs, rcvs = {}, collections.defaultdict(list)
    for h in HOSTS:
        for r in map(json.loads, (run / f"{h}.truth.jsonl").read_text().splitlines()):
            if r["event"] == "publish":
                pubs[(r["writer_guid"], r["seq"])] = r
            else:
                rcvs[(r["writer_guid"], r["seq"])].append(r)
    return pubs, rcvs


def test_every_sample_joins_its_publish_and_take_and_every_instant_is_the_traces(run, ddscope, tmp_path):
    rmw, out = run
    pubs, rcvs = truth_of(out)
    traces = {h: Instants(bt2_events(out / f"{h}.lttng")) for h in HOSTS}
    ddscope("latency", out, "--format", "json", "--rows", tmp_path / "rows.jsonl")
    rows = {}
    for r in map(json.loads, (tmp_path / "rows.jsonl").read_text().splitlines()):
        if r["level"] == "message":
            rows[(r["writer_id"], r["sn"], r["receiver"])] = r
    for topic in CROSS:
        sent = [(k, p) for k, p in pubs.items() if p["topic"] == topic]
        assert len(sent) > 20, (topic, len(sent))
        joined = 0
        for (w, sn), p in sent:
            got = [r for r in rcvs[(w, sn)] if r["host"] == "pc2"]
            assert got, f"{topic} {w}:{sn} was not received at pc2 (the nodes' truth)"
            sts = got[0]["source_ts_ns"]
            row = rows.get((w, sn, "pc2"))
            if row is None or row["join"] == "none":
                continue
            # the rmw's source timestamp, the publish's and the take's instants: babeltrace2's
            pub = traces["pc1"].publish[sts]
            takes = [t for t in traces["pc2"].take[sts] if t["topic"] == row["topic_name"]]
            assert pub["topic"] == row["topic_name"] and takes, (row, pub)
            want = {
                "source_ts_ns": sts,
                "rclcpp_publish_ts_ns": pub["rclcpp_publish"],
                "rmw_publish_ts_ns": pub["rmw_publish"],
                "rmw_take_ts_ns": takes[0]["rmw_take"],
                "callback_start_ts_ns": takes[0]["callback_start"],
                "callback_end_ts_ns": takes[0]["callback_end"],
            }
            for k, v in want.items():
                assert row[k] == v, (rmw, topic, sn, k, row[k], v)
            assert row["ros_e2e_ns"] == want["callback_start_ts_ns"] - want["rclcpp_publish_ts_ns"], row
            joined += 1
        assert joined >= 0.99 * len(sent), (rmw, topic, joined, len(sent))


def test_node_names_on_the_wire_are_the_real_nodes(run, ddscope):
    """ros_discovery_info as the real rmw sends it: every user topic's writer and reader nodes."""
    rmw, out = run
    doc = json.loads(ddscope("topics", out / "pc2.pcapng", "--format", "json").stdout)
    nodes = {}
    for t in doc["topics"]:
        if t.get("topic_name") in ("/image", "/drive"):
            nodes[t["topic_name"]] = (sorted(t.get("writer_nodes") or []), sorted(t.get("reader_nodes") or []))
    assert nodes.get("/image") == (["/filter"], ["/msg_driven"]), nodes
    assert nodes.get("/drive") == (["/sensor"], ["/monitor_node"]), nodes


def test_the_chain_walked_back_through_the_truth(run, ddscope, tmp_path):
    """Every /actuator sample the actuator took, walked back through the relays' inputs (the nodes'
    truth) to the /raw_image sample it came from: ddscope's chain instance of it has the first
    publish's rclcpp_publish and the last take's callback_start that babeltrace2 reads."""
    rmw, out = run
    pubs, rcvs = truth_of(out)
    traces = {h: Instants(bt2_events(out / f"{h}.lttng")) for h in HOSTS}
    cp = ddscope("latency", out, "--path", ",".join(CHAIN), "--format", "json", "--rows", tmp_path / "chains.jsonl", check=False)
    assert cp.returncode == 0, cp.stderr[-3000:]
    want = {}
    for (w, sn), rs in rcvs.items():
        for r in rs:
            if r["node"] != "actuator":
                continue
            p = pubs[(w, sn)]
            chain = [p]
            while p.get("src_writer_guid"):
                src = (p["src_writer_guid"], p["src_seq"])
                p = pubs[src]
                chain.append(p)
            assert [c["topic"] for c in reversed(chain)] == CHAIN, chain
            # the source timestamps: the relays' receive records of their inputs
            raw = chain[-1]
            raw_rcv = [x for x in rcvs[(raw["writer_guid"], raw["seq"])] if x["node"] == "filter"][0]
            first = traces["pc1"].publish[raw_rcv["source_ts_ns"]]["rclcpp_publish"]
            take = [t for t in traces["pc2"].take[r["source_ts_ns"]] if t["topic"] == "/actuator"][0]
            want[raw_rcv["source_ts_ns"]] = take["callback_start"] - first
    rows = [json.loads(l) for l in (tmp_path / "chains.jsonl").read_text().splitlines()]
    # one row per hop of every instance: the first hop's sample and the instance's end to end
    first = {(r["chain"], r["instance"]): r["source_ts_ns"] for r in rows if r["hop"] == 0}
    got = {first[(r["chain"], r["instance"])]: r["chain_e2e_ns"] for r in rows if r.get("chain_e2e_ns") is not None and (r["chain"], r["instance"]) in first}
    assert len(want) > 20, len(want)
    assert set(got) == set(want), (len(got), len(want), sorted(set(want) - set(got))[:5])
    for k, v in want.items():
        assert got[k] == v, (rmw, k, got[k], v)
