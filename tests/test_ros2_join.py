"""ddscope's ROS 2 join, sample by sample, against oracles it does not share code with.

1. The real CARET traces in ../shared/traces/caret-galactic (recorded by CARET's authors on
   ROS 2 Galactic, never copied here): `ddscope latency --trace DIR` (traces alone) must join
   every take exactly as tests/ros2ref/refjoin.py does (Python + babeltrace2, written from the
   tracepoint definitions), and find the publishes the CARET authors' notebooks show.
2. ddslab-tracegen's realistic scenarios (rosout logging before every data publish, the rmw's
   discovery writer and reader, /parameter_events from every node, intra-process, services,
   several publishers on one topic, a killed process), Humble and Jazzy layouts, Fast DDS and
   Cyclone DDS flavours: ddscope equal to refjoin take by take, and every joined take equal to
   the generator's own record of which publish it took (its truth file) — the publisher's node
   and its N-th publish.
3. Chains: instances and end-to-end latency equal to refjoin's, `--path auto` listing the
   scenario's chains, CARET architecture files accepted as --path.
4. `ddscope report` with traces alone.

Needs python3-bt2 (Debian's /usr/bin/python3); the tracegen cases also root, lttng-tools and
the lab build (see tests/test_tracegen_ref.py); each skips with the reason otherwise.
"""
from __future__ import annotations

import json
import subprocess

import pytest

from conftest import ddscope_bin
from test_tracegen_ref import CARET, needs_bt2, needs_recording, record, refjoin


BIN = ddscope_bin()


def ddscope(*args, timeout=600):
    cp = subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True, timeout=timeout)
    assert cp.returncode == 0, f"ddscope {' '.join(map(str, args))} exited {cp.returncode}:\n{cp.stderr}"
    return cp


def rows_of(tmp_path, trace, *extra):
    out = tmp_path / "rows.jsonl"
    cp = ddscope("latency", "--trace", trace, *extra, "--format", "jsonl", "-o", out)
    return [json.loads(l) for l in out.read_text().splitlines() if l.strip()], cp.stderr


def doc_of(trace, *extra):
    return json.loads(ddscope("latency", "--trace", trace, *extra, "--format", "json").stdout)


def ref_publish(r):
    """The reference's publish of a joined take: (node, the instant rows call rclcpp_publish)."""
    p = r["publish"]
    if r["join"] == "intra":
        return p["node"], p["intra_publish"]
    return p["node"], p["rclcpp_publish"] or p["rcl_publish"] or p["rmw_publish"]


def compare(rows, ref):
    """Per take (receiver node, topic, callback_start or rmw_take): ddscope's publish vs refjoin's."""
    got = {}
    for r in rows:
        k = (r["receiver_node"], r["topic_name"], r["callback_start_ts_ns"] or r["rmw_take_ts_ns"])
        assert k not in got, f"two rows for one take: {k}"
        got[k] = (r["sender_node"], r["rclcpp_publish_ts_ns"] or r["rmw_publish_ts_ns"])
    wrong, missing, extra, joined = [], [], [], 0
    for r in ref:
        if "summary" in r or "topic" not in r or r.get("internal"):
            continue
        k = (r["node"], r["topic"], r["callback_start"] or r["rmw_take"])
        want = ref_publish(r) if r["join"] in ("exact", "window", "intra") else None
        have = got.pop(k, None)
        if want is None and have is not None:
            extra.append((k, have, r["join"], r.get("reason")))
        elif want is not None and have is None:
            missing.append((k, want))
        elif want is not None:
            joined += 1
            if have != want:
                wrong.append((k, have, want))
    extra.extend((k, v, "no such take in refjoin", None) for k, v in got.items())
    return joined, wrong, missing, extra


def assert_equal_to_ref(rows, ref, what):
    joined, wrong, missing, extra = compare(rows, ref)
    assert not wrong, f"{what}: {len(wrong)} takes joined to another publish than refjoin's: {wrong[:5]}"
    assert not missing, f"{what}: {len(missing)} takes refjoin joins and ddscope does not: {missing[:5]}"
    assert not extra, f"{what}: {len(extra)} takes ddscope joins and refjoin does not: {extra[:5]}"
    assert joined == len(rows) > 0
    return joined


CARET_TRACES = ["talker_listener", "multi_talker_listener", "end_to_end_sample/cyclonedds",
                "end_to_end_sample/fastrtps", "cyclic_pipeline_intra_process"]


@needs_bt2
@pytest.mark.parametrize("name", CARET_TRACES)
def test_caret_traces_equal_the_reference(tmp_path, name):
    trace = CARET / name
    if not trace.is_dir():
        pytest.skip(f"{trace}: the shared CARET traces are not here")
    rows, err = rows_of(tmp_path, trace)
    n = assert_equal_to_ref(rows, refjoin(trace), name)
    assert "layout galactic+caret" in err or "+caret" in err, err
    assert "ambiguous" not in err.split("not joined:")[-1].split(",")[0] or " 0 takes ambiguous" in err
    print(f"{name}: {n} takes joined, equal to refjoin")
    # nothing shown under a made-up topic
    assert all(r["topic_name"] and not r["topic_name"].startswith("writer ") for r in rows)


@needs_bt2
def test_caret_talker_listener_notebook(tmp_path):
    """The five /chatter publishes CARET's authors show in talker_listener.ipynb (their path
    dataframe's rclcpp_publish_timestamp column), each taken by the listener."""
    trace = CARET / "talker_listener"
    if not trace.is_dir():
        pytest.skip(f"{trace}: the shared CARET traces are not here")
    rows, _ = rows_of(tmp_path, trace)
    chatter = sorted(r["rclcpp_publish_ts_ns"] for r in rows if r["topic_name"] == "/chatter")
    assert chatter == [1631078990289280521, 1631078991288704199, 1631078992288808701, 1631078993288721394, 1631078994288800056]
    assert {r["receiver_node"] for r in rows if r["topic_name"] == "/chatter"} == {"/listener"}
    assert all(r["join"] == "source_ts" and r["status"] == "same_host" for r in rows if r["topic_name"] == "/chatter")


@needs_bt2
def test_caret_chains_and_architecture_file(tmp_path):
    pipe = CARET / "cyclic_pipeline_intra_process"
    e2e = CARET / "end_to_end_sample"
    if not pipe.is_dir() or not e2e.is_dir():
        pytest.skip("the shared CARET traces are not here")
    # intra-process chain: the same instances and end-to-end latencies as refjoin's
    path = ["/topic2", "/topic1"]
    ref = [c for c in refjoin(pipe, "--path", ",".join(path)) if "summary" not in c]
    out = tmp_path / "chain.jsonl"
    ddscope("latency", "--trace", pipe, "--path", ",".join(path), "--rows", out)
    hops = [json.loads(l) for l in out.read_text().splitlines()]
    ours = sorted({(h["instance"], h["chain_e2e_ns"]) for h in hops})
    assert len(ours) == len(ref) > 0
    assert sorted(h for _, h in ours) == sorted(c["e2e_ns"] for c in ref)
    # CARET's architecture file as --path: its path's topics, followed through the nodes' latest
    # input where a node publishes from another callback (CARET's variable passing)
    for rmw in ("cyclonedds", "fastrtps"):
        doc = doc_of(e2e / rmw, "--path", e2e / "architecture_modified.yaml")
        ch = doc["chains"]["chain"]
        assert ch["path"] == ["/topic1", "/topic2", "/topic3", "/topic4"]
        assert ch["instances"] > 20 and ch["incomplete"] == 0
        assert doc["chains"]["stats"]["instances_via_latest"] == ch["instances"]
        # the end-to-end is the sum of its hops and node times (here tens of ms of work per node)
        assert 50 < ch["e2e"]["mean_ms"] < 500
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: &x [1, 2]\nb: *x\n")
    cp = subprocess.run([str(BIN), "latency", "--trace", pipe, "--path", str(bad)], capture_output=True, text=True)
    assert cp.returncode != 0 and "line 2: YAML aliases are not accepted" in cp.stderr, cp.stderr


TG_CASES = [("all", "humble", "fastrtps"), ("all", "humble", "cyclonedds"),
            ("all", "jazzy", "fastrtps"), ("all", "jazzy", "cyclonedds")]


@needs_recording
@pytest.mark.parametrize("scenario,distro,rmw", TG_CASES, ids=["-".join(c) for c in TG_CASES])
def test_tracegen_equal_to_reference_and_truth(tmp_path_factory, tmp_path, scenario, distro, rmw):
    run = record(tmp_path_factory, scenario, distro, rmw)
    rows, err = rows_of(tmp_path, run.trace)
    n = assert_equal_to_ref(rows, run.ref, f"{scenario} {distro} {rmw}")
    # against the generator's own record: each joined DDS take is the N-th publish of its publisher
    truth = {(t["node"], t["topic"], t["source_ts"]): t for t in run.truth if t["kind"] == "take" and t["source_ts"]}
    checked = 0
    for r in rows:
        if r["join"] == "intra_process":
            continue
        t = truth.get((r["receiver_node"], r["topic_name"], r["source_ts_ns"]))
        assert t is not None, f"a row with no take in the truth: {r}"
        assert (r["sender_node"], r["sn"]) == (t["publisher_node"], t["order"]), (r, t)
        checked += 1
    assert checked > 0.9 * n
    # nothing joined to /rosout or the rmw's own writer, nothing under a made-up topic
    assert not any(r["topic_name"] in ("/rosout", "ros_discovery_info") or r["topic_name"].startswith("writer ") for r in rows)
    # the diagnosis names what really happened: logs and discovery, never a late trace
    assert "ros_discovery_info" in err and "started after" not in err, err
    assert ("rcl's /rosout logging" in err) == (distro == "humble"), err
    doc = doc_of(run.trace)
    j = doc["ros2_join"]
    contested = sum(1 for r in run.ref if r.get("join") == "ambiguous")
    assert j["takes_ambiguous"] == contested
    if distro == "jazzy":
        assert j["takes_ambiguous"] == 0 and j["takes_unjoined"] == 0
    print(f"{scenario} {distro} {rmw}: {n} takes joined as refjoin does, {checked} checked against the truth, {contested} ambiguous")


@needs_recording
@pytest.mark.parametrize("distro", ["humble", "jazzy"])
def test_tracegen_chains(tmp_path_factory, tmp_path, distro):
    run = record(tmp_path_factory, "all", distro, "fastrtps")
    doc = doc_of(run.trace, "--path", "auto")
    paths = {tuple(p["topics"]): p["count"] for p in doc["chains"]["paths"]}
    # the relay scenario's chain, deterministic and not cyclic
    relay = [p for p in paths if p == ("/topic_a", "/topic_b")]
    assert relay, paths
    for path in (["/topic_a", "/topic_b"], ["/ping", "/pong"]):
        ref = [c for c in refjoin(run.trace, "--path", ",".join(path)) if "summary" not in c]
        out = tmp_path / f"chain-{path[0][1:]}.jsonl"
        ddscope("latency", "--trace", run.trace, "--path", ",".join(path), "--rows", out)
        hops = [json.loads(l) for l in out.read_text().splitlines()]
        ours = sorted({(h["instance"], h["chain_e2e_ns"]) for h in hops})
        assert len(ours) == len(ref) > 0, (path, len(ours), len(ref))
        assert sorted(e for _, e in ours) == sorted(c["e2e_ns"] for c in ref), path
    # --path auto and --path A,B agree on the relay chain
    assert paths[("/topic_a", "/topic_b")] == len([c for c in refjoin(run.trace, "--path", "/topic_a,/topic_b") if "summary" not in c])


@needs_bt2
def test_report_with_traces_alone(tmp_path):
    trace = CARET / "end_to_end_sample" / "cyclonedds"
    if not trace.is_dir():
        pytest.skip(f"{trace}: the shared CARET traces are not here")
    html = tmp_path / "r.html"
    ddscope("report", "--trace", trace, "--path", CARET / "end_to_end_sample" / "architecture_modified.yaml", "--html", html)
    text = html.read_text()
    doc = json.loads(text.split("window.DDSCOPE_REPORT = ", 1)[1].split(";</script>", 1)[0].replace("<\\/", "</"))
    run = doc["runs"][0]
    assert {c["callback"] for c in run["callbacks"]} >= {"timer 50 ms", "subscription /topic1", "subscription /drive"}
    assert run["chains"]["measured"]["instances"] > 20
    topics = {t["topic"] for t in doc["topics"]}
    assert {"/topic1", "/topic2", "/topic3", "/topic4"} <= topics
