"""The lab with tracing on (tracker issue 11, point 7): the workload nodes emit
ros2_tracing's tracepoints and every host records its own LTTng trace,
`RUN/HOST.lttng`, next to its capture and its ground truth.

Oracles, independent of the lab's own report:
  * babeltrace2's Python bindings (python3-bt2, run with /usr/bin/python3) read
    every trace: events, fields, vpid / vtid / procname, the trace's hostname,
    discarded events;
  * the ground truth of the nodes (HOST.truth.jsonl): per sample its writer GUID,
    sequence number, source timestamp, thread and the CLOCK_MONOTONIC instants
    of the tracepoints it went through;
  * the captures, decoded by `ddscope topics --by writer --format json` (the
    SEDP endpoints: writer and reader GUIDs with their topics) and by
    `ddscope dissect` (the INFO_TS of every DATA / DATA_FRAG on the wire);
  * the run's process ids (run.json `nodes[].pid`, cross-checked against the
    traces' rcl_node_init) and /proc for anything left behind.
Runs the simple robotic application for 3 s per case: Cyclone DDS nodes and
Fast DDS nodes, Humble and Jazzy layouts. Needs root (namespaces); CI runs as root.
"""
from __future__ import annotations

import collections
import csv
import io
import json
import pathlib
import re
import signal
import subprocess
import time

import pytest

from conftest import REPO, ddscope_bin, have_root

SIMPLE = REPO / "examples" / "lab" / "simple-robotic.toml"
SYSTEM_PYTHON = "/usr/bin/python3"  # python3-bt2 is installed for Debian's interpreter
# Fast DDS on both sides of the link: it publishes /image and /drive and receives them on pc2
FASTDDS_NODES = ("filter", "sensor", "msg_driven", "monitor_node")
CASES = [("cyclone", "jazzy"), ("cyclone", "humble"), ("fastdds", "jazzy"), ("fastdds", "humble")]
HOSTS = ("pc1", "pc2")

# babeltrace2 (python3-bt2) prints every event of a trace as a JSON line, then one summary line.
BT2_ORACLE = r"""
import json, sys
import bt2
def value(f):
    if isinstance(f, bt2._StringFieldConst):
        return str(f)
    if isinstance(f, bt2._IntegerFieldConst):
        return int(f)
    if isinstance(f, bt2._ArrayFieldConst):
        return [value(e) for e in f]
    raise SystemExit("unexpected field type " + type(f).__name__)
discarded, hostnames, clocks = 0, set(), set()
for msg in bt2.TraceCollectionMessageIterator(sys.argv[1]):
    if type(msg) is bt2._DiscardedEventsMessageConst:
        discarded += msg.count if msg.count is not None else 1
        continue
    if type(msg) is not bt2._EventMessageConst:
        continue
    ev = msg.event
    trace = ev.stream.trace
    hostnames.add(str(trace.environment["hostname"]))
    cc = ev.common_context_field
    clocks.add(msg.default_clock_snapshot.clock_class.name)
    sys.stdout.write(json.dumps({
        "name": ev.name, "cycles": msg.default_clock_snapshot.value,
        "vpid": int(cc["vpid"]), "vtid": int(cc["vtid"]), "procname": str(cc["procname"]),
        "fields": {k: value(v) for k, v in ev.payload_field.items()}}) + "\n")
sys.stdout.write(json.dumps({"summary": {"discarded": discarded, "hostnames": sorted(hostnames), "clocks": sorted(clocks)}}) + "\n")
"""


def need_root():
    assert have_root(), "the lab tests need root (network namespaces); CI runs as root"


def lttng_processes(run_dir: pathlib.Path) -> dict[int, str]:
    """pid -> command line of the lab's node programs and LTTng daemons that belong to the run
    writing `run_dir` (its path is in their command line or, for the daemons, their LTTNG_HOME):
    runs of other tests or engineers on the same machine are not counted."""
    out = {}
    mark = str(run_dir).encode()
    for p in pathlib.Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            raw = (p / "cmdline").read_bytes()
            if not re.search(rb"ddslab-(cyclone|fastdds)|lttng-sessiond|lttng-consumerd", raw):
                continue
            env = (p / "environ").read_bytes()
        except OSError:
            continue
        if mark in raw or mark in env:
            out[int(p.name)] = raw.replace(b"\0", b" ").decode(errors="replace")
    return out


def read_trace(trace_dir: pathlib.Path):
    assert trace_dir.is_dir(), f"no trace at {trace_dir}"
    cp = subprocess.run([SYSTEM_PYTHON, "-c", BT2_ORACLE, str(trace_dir)], capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, f"babeltrace2 could not read {trace_dir}:\n{cp.stderr[-2000:]}"
    lines = [json.loads(line) for line in cp.stdout.splitlines()]
    summary = lines.pop()["summary"]
    for e in lines:
        assert e["name"].startswith("ros2:"), e
        e["name"] = e["name"][len("ros2:"):]
    return lines, summary


def truth_records(run: pathlib.Path, host: str):
    return [json.loads(line) for line in (run / f"{host}.truth.jsonl").read_text().splitlines()]


def wire_endpoints(ddscope, capture) -> dict[str, dict]:
    """GUID -> SEDP endpoint (kind, topic) of every endpoint `ddscope topics` saw announced."""
    doc = json.loads(ddscope("topics", capture, "--by", "writer", "--format", "json").stdout)
    return {e["guid"]: e for c in doc["captures"] for e in c["endpoints"]}


def wire_source_timestamps(ddscope, capture) -> dict[tuple[str, int], int]:
    """(writer GUID, sn) -> INFO_TS (ns) of every user sample on the wire, from `ddscope dissect`
    (a sample's later datagrams and repairs may carry DATA_FRAGs without an INFO_TS)."""
    cp = ddscope("dissect", capture, "--traffic", "user", "--kind", "DATA,DATA_FRAG", "--format", "csv")
    out = {}
    for row in csv.DictReader(io.StringIO(cp.stdout)):
        if not row["source_ts_ns"]:
            continue
        key = (row["writer_id"], int(row["sn"]))
        ts = int(row["source_ts_ns"])
        assert out.setdefault(key, ts) == ts, f"two INFO_TS for {key}"
    return out


@pytest.fixture(scope="module", params=CASES, ids=[f"{v}-{d}" for v, d in CASES])
def traced_run(request, ddscope, tmp_path_factory):
    need_root()
    vendor, distro = request.param
    out = tmp_path_factory.mktemp("traced") / f"{vendor}-{distro}"
    extra = []
    if vendor == "fastdds":
        for n in FASTDDS_NODES:
            extra += ["--vendor", f"{n}=fastdds"]
    before = lttng_processes(out)
    cp = ddscope("lab", "run", SIMPLE, "--duration", "3s", "--tracing", distro, "--out", out, *extra, check=False, timeout=600)
    assert cp.returncode == 0, f"traced lab run failed ({cp.returncode}):\n{cp.stdout}\n{cp.stderr}"
    left = {pid: c for pid, c in lttng_processes(out).items() if pid not in before}
    assert not left, f"processes left behind: {left}"
    report = json.loads((out / "run.json").read_text())
    traces = {h: read_trace(out / f"{h}.lttng") for h in HOSTS}
    return out, vendor, distro, report, traces


def test_one_trace_per_host_next_to_its_capture(traced_run):
    out, vendor, distro, report, traces = traced_run
    assert report["ok"], report["failures"]
    for h in HOSTS:
        assert (out / f"{h}.lttng").is_dir() and (out / f"{h}.pcapng").is_file() and (out / f"{h}.truth.jsonl").is_file()
        events, summary = traces[h]
        assert events, f"{h}: empty trace"
        assert summary["discarded"] == 0, summary
        # each host's session daemon runs in its own UTS namespace, named after the host
        assert summary["hostnames"] == [h], summary
        assert summary["clocks"] == ["monotonic"], summary
        version = next(e["fields"]["version"] for e in events if e["name"] == "rcl_init")
        assert version == {"humble": "4.1.1", "jazzy": "8.2.4"}[distro]
        # Humble's rmw_publish records only the message; Jazzy's the handle and the timestamp too
        fields = set(next(e["fields"] for e in events if e["name"] == "rmw_publish"))
        assert fields == ({"message"} if distro == "humble" else {"rmw_publisher_handle", "message", "timestamp"}), fields
    # run.json: per host the trace, its events and its losses, as babeltrace2 counts them
    tr = report["tracing"]
    assert tr["distros"] == [distro] and tr["channel"]["events"] == "ros2:*" and tr["channel"]["mode"] == "discard"
    assert set(tr["channel"]["contexts"]) == {"vpid", "vtid", "procname"}
    for hr in tr["hosts"]:
        events, _ = traces[hr["host"]]
        assert hr["dir"] == f"{hr['host']}.lttng" and hr["distros"] == [distro]
        assert hr["events"] == len(events) and hr["lost_events"] == 0 and hr["discarded_events"] == 0, hr
        assert hr["by_name"] == dict(collections.Counter(e["name"] for e in events))
        assert hr["started_ns"] < report["timing"]["t0_ns"] < report["timing"]["tstop_ns"] < hr["stopped_ns"]
        assert all(n["ok"] for n in hr["nodes"]), hr["nodes"]


def test_only_the_hosts_own_processes(traced_run):
    out, vendor, distro, report, traces = traced_run
    nodes = {n["name"]: n for n in report["nodes"]}
    for h in HOSTS:
        events, _ = traces[h]
        mine = {n["pid"]: name for name, n in nodes.items() if n["host"] == h}
        assert set(mine) == {n["pid"] for n in nodes.values() if n["host"] == h} and None not in mine
        vpids = {e["vpid"] for e in events}
        assert vpids == set(mine), f"{h}: trace holds processes {vpids}, the host's nodes are {mine}"
        for e in events:
            if e["name"] == "rcl_node_init":
                assert mine[e["vpid"]] == e["fields"]["node_name"] and e["fields"]["namespace"] == "/"
        procnames = {e["procname"] for e in events}
        expect = {"ddslab-fastdds" if vendor == "fastdds" and name in FASTDDS_NODES else "ddslab-cyclone" for name in mine.values()}
        assert procnames <= expect | {n[:15] for n in expect}, procnames


def test_counts_equal_the_ground_truth(traced_run):
    out, vendor, distro, report, traces = traced_run
    for h in HOSTS:
        events, _ = traces[h]
        truth = truth_records(out, h)
        pubs = [r for r in truth if r["event"] == "publish"]
        recvs = [r for r in truth if r["event"] == "receive"]
        n = collections.Counter(e["name"] for e in events)
        taken = [e for e in events if e["name"] == "rmw_take" and e["fields"]["taken"] == 1]
        empty = [e for e in events if e["name"] == "rmw_take" and e["fields"]["taken"] == 0]
        assert n["rclcpp_publish"] == n["rcl_publish"] == n["rmw_publish"] == len(pubs), (h, n, len(pubs))
        assert len(taken) == len(recvs), (h, len(taken), len(recvs))
        # an empty take records rmw_take (taken = 0), rcl_take and rclcpp_take, and no callback
        assert n["rcl_take"] == n["rclcpp_take"] == len(taken) + len(empty), (h, n)
        # callbacks: one per received sample, one per timer tick of the periodic publishers
        periodic = sum(1 for r in pubs if "src_writer_guid" not in r)
        assert n["callback_start"] == n["callback_end"] == len(recvs) + periodic, (h, n, len(recvs), periodic)
        # one rcl_init and rcl_node_init per node, one *_init per endpoint
        nodes = [nd for nd in report["nodes"] if nd["host"] == h]
        assert n["rcl_init"] == n["rcl_node_init"] == len(nodes)
        sc_writers = len({r["writer_guid"] for r in pubs})
        assert n["rmw_publisher_init"] == n["rcl_publisher_init"] == sc_writers
        assert n["rmw_subscription_init"] == n["rcl_subscription_init"] == n["rclcpp_subscription_init"] \
            == n["rclcpp_subscription_callback_added"] == len({(r["node"], r["topic"]) for r in recvs})
        assert n["rcl_timer_init"] == n["rclcpp_timer_callback_added"] == n["rclcpp_timer_link_node"] \
            == len({r["writer_guid"] for r in pubs if "src_writer_guid" not in r})


def test_gids_are_the_guids_on_the_wire(ddscope, traced_run):
    """rmw_publisher_init / rmw_subscription_init gids: the writer / reader GUIDs that SEDP
    announces on the capture (`ddscope topics --by writer`), for the topic rcl_*_init names."""
    out, vendor, distro, report, traces = traced_run
    for h in HOSTS:
        events, _ = traces[h]
        endpoints = wire_endpoints(ddscope, out / f"{h}.pcapng")
        by_rmw = {}
        for e in events:
            if e["name"] in ("rmw_publisher_init", "rmw_subscription_init"):
                gid = e["fields"]["gid"]
                assert len(gid) == 24 and gid[16:] == [0] * 8, gid
                handle = e["fields"]["rmw_publisher_handle" if "publisher" in e["name"] else "rmw_subscription_handle"]
                by_rmw[(e["vpid"], handle)] = bytes(gid[:16]).hex()
        for e in events:
            if e["name"] not in ("rcl_publisher_init", "rcl_subscription_init"):
                continue
            kind = "writer" if e["name"] == "rcl_publisher_init" else "reader"
            handle = e["fields"]["rmw_publisher_handle" if kind == "writer" else "rmw_subscription_handle"]
            guid = by_rmw[(e["vpid"], handle)]
            ep = endpoints.get(guid)
            assert ep is not None, f"{h}: {kind} {guid} of {e['fields']['topic_name']} not announced on the wire"
            assert ep["kind"] == kind and ep["topic_name"] == e["fields"]["topic_name"], (ep, e)
            if ep["history"] is not None:  # Cyclone DDS announces it; Fast DDS does not
                assert ep["history"] == {"keep_last": e["fields"]["queue_depth"]}, (ep, e)
        # and the writer GUIDs are the ground truth's
        truth_writers = {r["writer_guid"] for r in truth_records(out, h) if r["event"] == "publish"}
        trace_writers = {g for (vpid, handle), g in by_rmw.items() if endpoints[g]["kind"] == "writer"}
        assert trace_writers == truth_writers


def test_samples_through_the_layers(ddscope, traced_run):
    """Every sample of the ground truth is in its host's trace, where the truth's
    CLOCK_MONOTONIC instants say, within 1 us, on the thread the truth names:
    rclcpp_publish -> rcl_publish -> rmw_publish (Jazzy: timestamp = the INFO_TS on
    the wire), and rmw_take (source timestamp) -> rcl_take -> rclcpp_take ->
    callback_start ... callback_end; a relay publishes inside that callback."""
    out, vendor, distro, report, traces = traced_run
    wire = {}
    for h in HOSTS:
        wire.update(wire_source_timestamps(ddscope, out / f"{h}.pcapng"))
    on_wire = 0
    crossing = 0
    for h in HOSTS:
        events, _ = traces[h]
        truth = truth_records(out, h)
        gid = {}
        for e in events:
            if e["name"] == "rmw_publisher_init":
                gid[(e["vpid"], e["fields"]["rmw_publisher_handle"])] = bytes(e["fields"]["gid"][:16]).hex()
            if e["name"] == "rmw_subscription_init":
                gid[(e["vpid"], e["fields"]["rmw_subscription_handle"])] = bytes(e["fields"]["gid"][:16]).hex()
        rcl_pub = {(e["vpid"], e["fields"]["publisher_handle"]): gid[(e["vpid"], e["fields"]["rmw_publisher_handle"])]
                   for e in events if e["name"] == "rcl_publisher_init"}
        sub_topic = {(e["vpid"], e["fields"]["rmw_subscription_handle"]): e["fields"]["topic_name"]
                     for e in events if e["name"] == "rcl_subscription_init"}
        # per thread, the events in order
        threads = collections.defaultdict(list)
        for e in events:
            threads[e["vtid"]].append(e)
        index = {}
        for tid, evs in threads.items():
            for i, e in enumerate(evs):
                index[(tid, e["name"], e["cycles"])] = i

        used = set()

        def at(tid, name, mono):
            """The event `name` of thread `tid` at the truth's instant `mono` (within 1 us), once."""
            cands = [e for e in threads[tid] if e["name"] == name and abs(e["cycles"] - mono) <= 1000]
            assert len(cands) == 1, f"{h}: {len(cands)} {name} events of thread {tid} within 1 us of {mono}"
            key = (tid, name, cands[0]["cycles"])
            assert key not in used, f"{h}: two samples claim the same {name} event"
            used.add(key)
            return index[key], cands[0]

        callbacks = {}  # (tid, callback_start index) -> callback_end index, for the relay check
        crossing += sum(1 for r in truth if r["event"] == "publish" and r["topic"] in ("/image", "/drive"))
        for r in truth:
            tid = r["tid"]
            if r["event"] == "publish":
                i, e = at(tid, "rclcpp_publish", r["rclcpp_publish_mono_ns"])
                seq = threads[tid][i:i + 3]
                assert [x["name"] for x in seq] == ["rclcpp_publish", "rcl_publish", "rmw_publish"], seq
                assert seq[1]["fields"]["publisher_handle"] is not None
                assert rcl_pub[(e["vpid"], seq[1]["fields"]["publisher_handle"])] == r["writer_guid"]
                j, rmw = at(tid, "rmw_publish", r["rmw_publish_mono_ns"])
                assert j == i + 2
                assert r["source_ts_ns"] == r["t_ns"] == r["rmw_publish_ns"]
                if distro == "jazzy":
                    assert gid[(e["vpid"], rmw["fields"]["rmw_publisher_handle"])] == r["writer_guid"]
                    assert rmw["fields"]["timestamp"] == r["t_ns"]
                    key = (r["writer_guid"], r["seq"])
                    if r["topic"] in ("/image", "/drive"):  # crossed the link: the INFO_TS on the wire
                        assert key in wire, f"{key} ({r['topic']}) has no INFO_TS on the wire"
                        assert rmw["fields"]["timestamp"] == wire[key], (key, rmw["fields"]["timestamp"], wire[key])
                        on_wire += 1
                assert seq[0]["fields"]["message"] == seq[1]["fields"]["message"] == seq[2]["fields"]["message"]
            else:
                i, take = at(tid, "rmw_take", r["rmw_take_mono_ns"])
                assert take["fields"]["taken"] == 1 and take["fields"]["source_timestamp"] == r["source_ts_ns"]
                assert sub_topic[(take["vpid"], take["fields"]["rmw_subscription_handle"])] == r["topic"]
                seq = threads[tid][i:i + 4]
                assert [x["name"] for x in seq] == ["rmw_take", "rcl_take", "rclcpp_take", "callback_start"], seq
                assert len({x["fields"]["message"] for x in seq[:3]}) == 1
                s, _ = at(tid, "callback_start", r["callback_start_mono_ns"])
                t, end = at(tid, "callback_end", r["callback_end_mono_ns"])
                assert s == i + 3 and t > s and end["fields"]["callback"] == seq[3]["fields"]["callback"]
                assert r["rmw_take_ns"] == r["t_ns"]
                callbacks[(r["node"], r["writer_guid"], r["seq"])] = (tid, s, t)
        # causality: a relay publishes its output inside the callback of its input, on that thread
        relays = [r for r in truth if r["event"] == "publish" and "src_writer_guid" in r]
        assert relays, f"{h}: no relay publications (filter on pc1, msg_driven on pc2)"
        for r in relays:
            tid, s, t = callbacks[(r["node"], r["src_writer_guid"], r["src_seq"])]
            assert r["tid"] == tid
            i = next(k for k, e in enumerate(threads[tid]) if e["name"] == "rclcpp_publish" and e["cycles"] == r["rclcpp_publish_mono_ns"])
            assert s < i < t, f"{h}: relay publish of {r['topic']} #{r['seq']} outside its input's callback"
    assert crossing == 30 + 87, crossing  # 3 s of /image (10 Hz) and /drive (29 Hz) cross the link
    if distro == "jazzy":
        assert on_wire == crossing, f"{on_wire} of {crossing} samples that crossed the link matched to their INFO_TS"


def test_tracing_off_records_no_trace(ddscope, tmp_path):
    """Default scenario: no trace sessions, no .lttng directory, run.json tracing null, truth without trace fields."""
    need_root()
    out = tmp_path / "plain"
    sc = tmp_path / "drive.toml"
    sc.write_text(SIMPLE.read_text().split("[[nodes]]")[0] + """
[[nodes]]
name = "sensor"
host = "pc1"
[[nodes.publish]]
topic = "/drive"
type_name = "autoware_auto_vehicle_msgs/msg/VelocityReport"
sample_bytes = 40
rate_hz = 29
[[nodes]]
name = "monitor_node"
host = "pc2"
tracing = "humble"
[[nodes.subscribe]]
topic = "/drive"
""")
    # a node's own setting: only pc2 is traced, only monitor_node emits
    ddscope("lab", "run", sc, "--duration", "1s", "--out", out)
    report = json.loads((out / "run.json").read_text())
    assert not (out / "pc1.lttng").exists() and (out / "pc2.lttng").is_dir()
    assert [h["host"] for h in report["tracing"]["hosts"]] == ["pc2"]
    events, _ = read_trace(out / "pc2.lttng")
    assert {e["vpid"] for e in events} == {n["pid"] for n in report["nodes"] if n["name"] == "monitor_node"}
    assert [n["tracing"] for n in report["nodes"]] == ["off", "humble"]
    pc1 = truth_records(out, "pc1")
    assert pc1 and all("rmw_publish_mono_ns" not in r and "tid" not in r for r in pc1)
    # and --tracing off switches every node off
    out2 = tmp_path / "off"
    ddscope("lab", "run", sc, "--duration", "1s", "--tracing", "off", "--out", out2)
    report = json.loads((out2 / "run.json").read_text())
    assert report["tracing"] is None and not list(out2.glob("*.lttng"))


def test_interrupt_removes_the_sessions(tmp_path):
    """Ctrl-C in the middle of a traced run: no session daemon, consumer daemon, node or namespace is left."""
    need_root()
    before = lttng_processes(tmp_path / "o")
    p = subprocess.Popen([ddscope_bin(), "lab", "run", str(SIMPLE), "--duration", "60s", "--tracing", "jazzy",
                          "--out", str(tmp_path / "o")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = ""
    deadline = time.monotonic() + 60
    while "running for" not in err and time.monotonic() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        err += line
    assert "running for" in err and "tracing pc1" in err and "tracing pc2" in err, err
    rid = re.search(r" run (\d+-[0-9a-f]{4}) ", err).group(1)
    during = {pid: c for pid, c in lttng_processes(tmp_path / "o").items() if pid not in before}
    assert sum("lttng-sessiond" in c for c in during.values()) >= 2, during
    p.send_signal(signal.SIGINT)
    rest = p.communicate(timeout=60)[1]
    assert p.returncode != 0 and "interrupted by SIGINT" in rest, rest
    left = {pid: c for pid, c in lttng_processes(tmp_path / "o").items() if pid not in before}
    assert not left, f"processes left behind: {left}"
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert f"ddsl-{rid}-" not in names


def test_bad_tracing_values_fail_with_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('tracing = "rolling"\n' + SIMPLE.read_text())
    cp = subprocess.run([ddscope_bin(), "lab", "check", str(bad)], capture_output=True, text=True)
    assert cp.returncode != 0 and cp.stderr.count("\n") == 1 and "bad.toml" in cp.stderr and "rolling" in cp.stderr, cp.stderr
    cp = subprocess.run([ddscope_bin(), "lab", "run", str(SIMPLE), "--tracing", "iron"], capture_output=True, text=True)
    assert cp.returncode != 0 and "iron" in cp.stderr and "panicked" not in cp.stderr, cp.stderr
    good = tmp_path / "good.toml"
    good.write_text('tracing = "jazzy"\n' + SIMPLE.read_text())
    cp = subprocess.run([ddscope_bin(), "lab", "check", str(good)], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    assert "tracing pc1: jazzy (sensor_1, filter, sensor) -> pc1.lttng" in cp.stdout, cp.stdout
