"""End-to-end tests of `ddscope lab` (issue 3): real namespaces, real Cyclone DDS
and Fast DDS processes, real traffic, tcpdump, teardown.

Oracles, independent of the lab's own report (run.json):
  * tshark 4.0 on the captures: topic and type names from SEDP, vendor ids,
    (writer GUID, sequence number) of every DATA / DATA_FRAG, iperf3 datagrams;
  * `ddscope topics` (the core engine) for achieved rates and sample sizes;
  * the nodes' ground-truth files, cross-checked with the captures (same GUIDs
    and sequence numbers; publish <= first packet at the sender <= receive);
  * tcpdump's own "dropped by kernel" counter;
  * `ip netns list` and /proc for anything left behind.
Needs root (network namespaces); CI runs as root.
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import time

import pytest

from conftest import REPO, ddscope_bin, have_root, require_tool

SIMPLE = REPO / "examples" / "lab" / "simple-robotic.toml"
TOLERANCE = 0.02  # issue 3: achieved rates within 2 % of nominal


def need_root():
    assert have_root(), "the lab tests need root (network namespaces); CI runs as root"


# ---------------------------------------------------------------- helpers

def lab_processes() -> dict[int, str]:
    """pid -> command line of every process the lab may start."""
    out = {}
    for p in pathlib.Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if re.search(r"ddslab-(cyclone|fastdds|zenoh)|tcpdump|iperf3", cmd):
            out[int(p.name)] = cmd
    return out


def lab_namespaces(run_id: str | None = None) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    names = [line.split()[0] for line in out.splitlines() if line.startswith("ddsl-")]
    return [n for n in names if run_id is None or n.startswith(f"ddsl-{run_id}-")]


def assert_nothing_left(run_id: str, before: dict[int, str]):
    assert not lab_namespaces(run_id), f"namespaces left behind: {lab_namespaces(run_id)}"
    left = {pid: cmd for pid, cmd in lab_processes().items() if pid not in before}
    assert not left, f"processes left behind: {left}"


def run_id_of(stderr: str) -> str:
    m = re.search(r" run (\d+-[0-9a-f]{4}) ", stderr)
    assert m, f"no run id in:\n{stderr}"
    return m.group(1)


def lab_run(ddscope, out: pathlib.Path, scenario, *extra, expect_ok=True):
    need_root()
    before = lab_processes()
    t = time.monotonic()
    cp = ddscope("lab", "run", scenario, "--out", out, *extra, check=False, timeout=600)
    elapsed = time.monotonic() - t
    if expect_ok:
        assert cp.returncode == 0, f"lab run failed ({cp.returncode}):\n{cp.stdout}\n{cp.stderr}"
    rid = run_id_of(cp.stderr)
    assert_nothing_left(rid, before)
    return cp, rid, elapsed


def topics_json(ddscope, capture) -> dict[str, dict]:
    cp = ddscope("topics", capture, "--format", "json")
    return {t["topic_name"]: t for t in json.loads(cp.stdout)["topics"]}


def truth(run_dir: pathlib.Path):
    pub, rcv = {}, {}
    for f in sorted(run_dir.glob("*.truth.jsonl")):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            assert set(r) >= {"event", "t_ns", "host", "node", "topic", "writer_guid", "seq", "size"}, r
            assert re.fullmatch(r"[0-9a-f]{32}", r["writer_guid"]), r
            assert f.name == f"{r['host']}.truth.jsonl", (f.name, r)
            key = (r["writer_guid"], r["seq"])
            if r["event"] == "publish":
                assert key not in pub, f"published twice: {key}"
                pub[key] = r
            else:
                assert r["event"] == "receive", r
                rcv.setdefault((r["node"],) + key, []).append(r)
    return pub, rcv


# How many writer ids and sequence numbers tshark lists for each submessage kind
# (`-T fields` gives one flat list per packet; DATA_FRAG packets carry MBs of payload,
# too much for `-T json`). Kinds without an entry carry neither.
SM_FIELDS = {"0x15": (1, 1), "0x16": (1, 1), "0x07": (1, 2), "0x13": (1, 1), "0x06": (1, 1), "0x12": (1, 1)}
SM_NONE = {"0x01", "0x09", "0x0c", "0x0e", "0x80"}


def tshark_data(capture) -> dict[tuple[str, int], dict]:
    """(writer GUID hex, sn) -> {first_ns, last_ns, vendor} of every DATA / DATA_FRAG, from tshark."""
    tshark = require_tool("tshark")
    fields = ["frame.time_epoch", "rtps.guidPrefix.src", "rtps.vendorId", "rtps.sm.id", "rtps.sm.wrEntityId", "rtps.sm.seqNumber"]
    cmd = [tshark, "-r", str(capture), "-Y", "rtps.sm.id == 0x15 || rtps.sm.id == 0x16", "-T", "fields",
           "-E", "separator=\t", "-E", "aggregator=,"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    seen = {}
    for line in out.splitlines():
        ts, prefix, vendor, ids, writers, sns = (line.split("\t") + [""] * 6)[:6]
        t_ns = int(ts.replace(".", ""))  # 9 decimals: nanoseconds
        ids = ids.split(",")
        unknown = [i for i in ids if i not in SM_FIELDS and i not in SM_NONE]
        assert not unknown, f"{capture}: cannot map tshark's field lists for submessages {unknown} in: {line[:200]}"
        w_iter, s_iter = iter(writers.split(",")), iter(sns.split(","))
        for sm in ids:
            nw, ns = SM_FIELDS.get(sm, (0, 0))
            w = [next(w_iter) for _ in range(nw)]
            s = [next(s_iter) for _ in range(ns)]
            if sm in ("0x15", "0x16"):
                key = (prefix.replace(":", "") + w[0][2:].zfill(8), int(s[0]))
                e = seen.setdefault(key, {"first_ns": t_ns, "last_ns": t_ns, "vendor": vendor.split(",")[0]})
                e["last_ns"] = t_ns
        assert next(w_iter, None) is None and next(s_iter, None) is None, f"unmapped fields in: {line[:200]}"
    return seen


def sedp_topics(capture) -> set[tuple[str, str]]:
    tshark = require_tool("tshark")
    out = subprocess.run([tshark, "-r", str(capture), "-Y", "rtps.param.typeName", "-T", "fields", "-E", "aggregator=,",
                          "-e", "rtps.param.topicName", "-e", "rtps.param.typeName"], capture_output=True, text=True,
                         check=True).stdout
    pairs = set()
    for line in out.splitlines():
        topics, types = line.split("\t")
        pairs.update(zip(topics.split(","), types.split(",")))
    return pairs


# ---------------------------------------------------------------- the CI scenario

@pytest.fixture(scope="module")
def simple_run(ddscope, tmp_path_factory):
    out = tmp_path_factory.mktemp("lab") / "simple"
    cp, rid, elapsed = lab_run(ddscope, out, SIMPLE, "--duration", "5s")
    return out, cp, rid, elapsed


def test_simple_robotic_runs_end_to_end_and_cleans_up(simple_run):
    out, cp, rid, elapsed = simple_run
    assert elapsed < 20, f"the CI scenario took {elapsed:.1f} s"
    for f in ("pc1.pcapng", "pc2.pcapng", "pc1.truth.jsonl", "pc2.truth.jsonl", "scenario.toml", "run.json"):
        assert (out / f).is_file(), f
    assert not (out / ".tmp").exists()
    report = json.loads((out / "run.json").read_text())
    assert report["ok"] is True and report["failures"] == [], report["failures"]
    assert report["run_id"] == rid
    assert report["tools"]["cyclonedds"].startswith("cyclonedds 0.10")
    # the resolved scenario reads back
    cp2 = subprocess.run([ddscope_bin(), "lab", "check", str(out / "scenario.toml")], capture_output=True, text=True)
    assert cp2.returncode == 0, cp2.stderr


def test_capture_drops_read_from_tcpdump(simple_run):
    out, *_ = simple_run
    for host in ("pc1", "pc2"):
        log = (out / "logs" / f"tcpdump-{host}.log").read_text()
        m = re.search(r"(\d+) packets? dropped by kernel", log)
        assert m, log
        assert int(m.group(1)) == 0, f"{host}: tcpdump dropped packets:\n{log}"
        report = json.loads((out / "run.json").read_text())
        cap = next(c for c in report["captures"] if c["host"] == host)
        assert cap["tcpdump"]["dropped_by_kernel"] == int(m.group(1))


def test_capture_drops_fail_the_run_unless_allowed(ddscope, tmp_path):
    """A 1 KiB capture buffer drops packets at 2.76 MB x 10 Hz: oracle is tcpdump's own counter."""
    text = SIMPLE.read_text().replace("[network]", '[capture]\nbuffer = "1KiB"\n\n[network]', 1)
    strict, lenient = tmp_path / "strict.toml", tmp_path / "lenient.toml"
    strict.write_text(text)
    lenient.write_text(text.replace('buffer = "1KiB"', 'buffer = "1KiB"\nallow_drops = true'))
    cp, _, _ = lab_run(ddscope, tmp_path / "s", strict, "--duration", "2s", expect_ok=False)
    assert cp.returncode != 0 and "packets dropped by the kernel" in cp.stderr, cp.stderr
    report = json.loads((tmp_path / "s" / "run.json").read_text())
    drops = {c["host"]: c["tcpdump"]["dropped_by_kernel"] for c in report["captures"]}
    log = (tmp_path / "s" / "logs" / "tcpdump-pc1.log").read_text()
    assert drops["pc1"] == int(re.search(r"(\d+) packets dropped by kernel", log).group(1)) > 0
    assert report["ok"] is False
    cp, _, _ = lab_run(ddscope, tmp_path / "l", lenient, "--duration", "2s")
    report = json.loads((tmp_path / "l" / "run.json").read_text())
    assert report["ok"] is True and report["wire_checks_skipped"], report


def test_captures_are_nanosecond_pcapng(simple_run):
    out, *_ = simple_run
    cap = out / "pc1.pcapng"
    assert cap.read_bytes()[:4] == b"\x0a\x0d\x0d\x0a"  # pcapng section header
    tshark = require_tool("tshark")
    ts = subprocess.run([tshark, "-r", str(cap), "-c", "200", "-T", "fields", "-e", "frame.time_epoch"],
                        capture_output=True, text=True, check=True).stdout.split()
    assert all(len(t.split(".")[1]) == 9 for t in ts)
    assert any(not t.endswith("000") for t in ts), "timestamps look microsecond"
    ifname = subprocess.run([tshark, "-r", str(cap), "-c", "1", "-T", "fields", "-e", "frame.interface_name"],
                            capture_output=True, text=True, check=True).stdout.strip()
    assert ifname == "pc1/eth0"


def test_ros2_names_and_types_on_the_wire(simple_run):
    """tshark reads the SEDP announcements: ROS 2 topic and type names."""
    out, *_ = simple_run
    pairs = sedp_topics(out / "pc1.pcapng")
    assert ("rt/image", "sensor_msgs::msg::dds_::Image_") in pairs
    assert ("rt/drive", "autoware_auto_vehicle_msgs::msg::dds_::VelocityReport_") in pairs
    # host-local topics are announced (SEDP goes to every participant) but their data stays off the link
    data = tshark_data(out / "pc1.pcapng")
    pub, _ = truth(out)
    local = {k for k, r in pub.items() if r["topic"] in ("/raw_image", "/actuator")}
    assert not (local & set(data)), "samples of host-local topics crossed the link"


def test_rates_and_sizes_from_ddscope_topics(ddscope, simple_run):
    out, *_ = simple_run
    topics = topics_json(ddscope, out / "pc1.pcapng")
    expect = {"/image": (10.0, 2764852, "sensor_msgs::msg::dds_::Image_"),
              "/drive": (29.0, 40, "autoware_auto_vehicle_msgs::msg::dds_::VelocityReport_")}
    for name, (rate, size, type_raw) in expect.items():
        t = topics[name]
        assert abs(t["rate_hz"] - rate) / rate <= TOLERANCE, (name, t["rate_hz"])
        assert t["min_sample_size"] == t["max_sample_size"] == size, (name, t["min_sample_size"], t["max_sample_size"])
        assert t["type_raw"] == type_raw
        assert t["reliability"] == "reliable" and t["durability"] == "volatile" and t["history"] == "keep_last(10)"
        assert t["vendors"] == ["0x0110"]


def test_ground_truth_accounts_for_every_sample(simple_run):
    out, *_ = simple_run
    pub, rcv = truth(out)
    readers = {"/raw_image": ["filter"], "/image": ["msg_driven"], "/actuator": ["actuator"], "/drive": ["monitor_node"]}
    rates = {"/raw_image": 10, "/image": 10, "/actuator": 10, "/drive": 29}
    for topic, nodes in readers.items():
        keys = sorted(k for k, r in pub.items() if r["topic"] == topic)
        assert keys, topic
        # sequence numbers 1..n per writer
        assert [s for _, s in keys] == list(range(1, len(keys) + 1)), topic
        # 5 s at the nominal rate (the first sample at t0, none at t0 + 5 s)
        assert len(keys) == 5 * rates[topic], (topic, len(keys))
        for node in nodes:
            received = [k for k in keys if (node,) + k in rcv]
            lost = [k for k in keys if (node,) + k not in rcv]
            assert len(received) + len(lost) == len(keys)
            assert not lost, f"{topic}: {node} lost {lost[:5]} (reliable, no interference)"
            for k in received:
                assert rcv[(node,) + k][0]["t_ns"] >= pub[k]["t_ns"]
                assert rcv[(node,) + k][0]["source_ts_ns"] == pub[k]["t_ns"]  # INFO_TS carries the publish time
    # relays name their source sample, which they received before republishing
    for k, r in pub.items():
        if r["topic"] in ("/image", "/actuator"):
            src = (r["node"], r["src_writer_guid"], r["src_seq"])
            assert src in rcv and rcv[src][0]["t_ns"] <= r["t_ns"], r
    # msg_driven computes 10 ms between receiving /image and publishing /actuator
    for k, r in pub.items():
        if r["topic"] == "/actuator":
            got = rcv[(r["node"], r["src_writer_guid"], r["src_seq"])][0]["t_ns"]
            assert r["t_ns"] - got >= 10_000_000


def test_sequence_numbers_and_times_match_the_wire(simple_run):
    """seq in the ground truth is the RTPS writer sn; publish <= first packet at PC1 <= last packet at PC2 <= receive."""
    out, *_ = simple_run
    pub, rcv = truth(out)
    sender, receiver = tshark_data(out / "pc1.pcapng"), tshark_data(out / "pc2.pcapng")
    crossing = {k: r for k, r in pub.items() if r["topic"] in ("/image", "/drive")}
    assert set(crossing) <= set(sender), f"published but not on the wire: {sorted(set(crossing) - set(sender))[:5]}"
    on_wire = {k for k in sender if k[0] in {g for g, _ in crossing}}
    assert on_wire == set(crossing), f"on the wire but not in the ground truth: {sorted(on_wire - set(crossing))[:5]}"
    node = {"/image": "msg_driven", "/drive": "monitor_node"}
    for k, r in crossing.items():
        got = rcv[(node[r["topic"]],) + k][0]["t_ns"]
        assert r["t_ns"] <= sender[k]["first_ns"] <= receiver[k]["last_ns"] <= got, (r["topic"], k)


# ---------------------------------------------------------------- other vendors, topologies, interference

def test_fastdds_publishes_image_and_drive(ddscope, tmp_path):
    out = tmp_path / "fastdds"
    lab_run(ddscope, out, SIMPLE, "--duration", "3s", "--vendor", "filter=fastdds", "--vendor", "sensor=fastdds")
    data = tshark_data(out / "pc1.pcapng")
    pub, rcv = truth(out)
    for topic in ("/image", "/drive"):
        keys = [k for k, r in pub.items() if r["topic"] == topic]
        assert {data[k]["vendor"] for k in keys} == {"0x010f"}, topic  # Fast DDS on the wire
        node = "msg_driven" if topic == "/image" else "monitor_node"
        assert all((node,) + k in rcv for k in keys), f"{topic}: Cyclone reader missed Fast DDS samples"
    topics = topics_json(ddscope, out / "pc1.pcapng")
    assert topics["/image"]["min_sample_size"] == topics["/image"]["max_sample_size"] == 2764852
    assert abs(topics["/drive"]["rate_hz"] - 29) / 29 <= TOLERANCE


def test_parameterised_topologies_and_bridge(ddscope, tmp_path):
    """1-N and N-1 over three hosts joined by a bridge; best effort loss is accounted, reliable is complete."""
    sc = tmp_path / "param.toml"
    sc.write_text("""
name = "param-test"
duration = "3s"
[network]
rate = "1G"
[[hosts]]
name = "a"
[[hosts]]
name = "b"
[[hosts]]
name = "c"
[[generate]]
prefix = "/fan_out"
sizes = ["64B", "16KiB"]
rates_hz = [20]
reliability = ["reliable", "best_effort"]
publishers = 1
subscribers = 2
publisher_hosts = ["a"]
subscriber_hosts = ["b", "c"]
[[generate]]
prefix = "/fan_in"
sizes = ["128B"]
rates_hz = [25]
publishers = 3
subscribers = 1
publisher_hosts = ["a", "b"]
subscriber_hosts = ["c"]
""")
    cp, rid, _ = lab_run(ddscope, tmp_path / "out", sc)
    report = json.loads((tmp_path / "out" / "run.json").read_text())
    assert report["network"]["topology"] == "bridge"
    pub, rcv = truth(tmp_path / "out")
    topics = {r["topic"] for r in pub.values()}
    assert topics == {"/fan_out/s64B_20hz_reliable", "/fan_out/s64B_20hz_best_effort", "/fan_out/s16384B_20hz_reliable",
                      "/fan_out/s16384B_20hz_best_effort", "/fan_in/s128B_25hz_reliable"}
    writers = {t: {r["writer_guid"] for r in pub.values() if r["topic"] == t} for t in topics}
    assert len(writers["/fan_in/s128B_25hz_reliable"]) == 3
    for t in topics:
        n_readers = 1 if t.startswith("/fan_in") else 2
        keys = [k for k, r in pub.items() if r["topic"] == t]
        got = sum(1 for key in rcv if key[1:] in set(keys))
        assert got <= n_readers * len(keys)
        if t.endswith("reliable"):
            assert got == n_readers * len(keys), t
    # the sender's capture: 1-N has one writer, two readers; N-1 three writers on a and b together
    on_a = topics_json(ddscope, tmp_path / "out" / "a.pcapng")
    assert on_a["/fan_out/s64B_20hz_reliable"]["writers"] == 1 and on_a["/fan_out/s64B_20hz_reliable"]["readers"] == 2
    on_c = topics_json(ddscope, tmp_path / "out" / "c.pcapng")
    assert on_c["/fan_in/s128B_25hz_reliable"]["writers"] == 3
    assert abs(on_c["/fan_in/s128B_25hz_reliable"]["rate_hz"] - 75) / 75 <= TOLERANCE


def test_interference_bursts_every_15ms(ddscope, tmp_path):
    """iperf3 UDP PC1 -> PC2: 1400-byte payloads in bursts every 15 ms at the configured share of the link."""
    sc = tmp_path / "interf.toml"
    sc.write_text("""
name = "interference-test"
duration = "3s"
[network]
rate = "100M"
[[hosts]]
name = "pc1"
[[hosts]]
name = "pc2"
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
subscribe = [{ topic = "/drive" }]
[[interference]]
from = "pc1"
to = "pc2"
load = "0%"
""")
    out = tmp_path / "out"
    lab_run(ddscope, out, sc, "--load", "40%")
    tshark = require_tool("tshark")
    rows = subprocess.run([tshark, "-r", str(out / "pc1.pcapng"), "-Y", "udp.dstport == 5201 && ip.src == 10.77.0.1",
                           "-T", "fields", "-e", "frame.time_epoch", "-e", "udp.length"],
                          capture_output=True, text=True, check=True).stdout.split("\n")
    rows = [r.split("\t") for r in rows if r]
    data = [r for r in rows if r[1] == "1408"]  # 1400-byte payload + UDP header; iperf3 also sends a few tiny control datagrams
    assert len(data) > 1000 and len(data) >= 0.99 * len(rows), {length for _, length in rows}
    times = [int(t.replace(".", "")) for t, _ in data]
    starts = [times[0]] + [b for a, b in zip(times, times[1:]) if b - a > 5_000_000]
    gaps = sorted(b - a for a, b in zip(starts, starts[1:]))
    median = gaps[len(gaps) // 2]
    assert 12_000_000 <= median <= 18_000_000, f"bursts every {median / 1e6:.1f} ms"
    achieved = len(times) * 1428 * 8 / ((times[-1] - times[0]) / 1e9)  # bits per second incl. IP/UDP headers
    assert 0.35e8 <= achieved <= 0.47e8, f"{achieved / 1e6:.1f} Mbit/s for 40 % of 100M"
    report = json.loads((out / "run.json").read_text())
    assert report["interference"][0]["rate_bps"] == 40_000_000
    # the DDS topic still runs at its rate next to the interference
    assert abs(topics_json(ddscope, out / "pc1.pcapng")["/drive"]["rate_hz"] - 29) / 29 <= TOLERANCE


# ---------------------------------------------------------------- failure paths

@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_removes_everything(tmp_path, sig):
    """An interrupted run says everything it started was removed: the hosts,
    the processes, and its scratch directory OUT/.tmp with the raw captures
    (which once stayed behind, ~200 MB)."""
    need_root()
    before = lab_processes()
    out = tmp_path / "o"
    p = subprocess.Popen([ddscope_bin(), "lab", "run", str(SIMPLE), "--duration", "60s", "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = ""
    deadline = time.monotonic() + 60
    while "running for" not in err and time.monotonic() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        err += line
    assert "running for" in err, err
    rid = run_id_of(err)
    assert lab_namespaces(rid), "the run's namespaces should exist while it runs"
    # The captures are being written into the scratch directory.
    deadline = time.monotonic() + 20
    while not any(f.stat().st_size > 0 for f in (out / ".tmp").glob("*.pcap")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert any(f.stat().st_size > 0 for f in (out / ".tmp").glob("*.pcap")), list((out / ".tmp").iterdir())
    p.send_signal(sig)
    rest = p.communicate(timeout=60)[1]
    assert p.returncode != 0
    assert f"interrupted by {signal.Signals(sig).name}; everything the run started was removed" in rest, rest
    assert_nothing_left(rid, before)
    assert not (out / ".tmp").exists(), list((out / ".tmp").rglob("*"))


def test_bad_inputs_fail_with_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(SIMPLE.read_text().replace('rate_hz = 29', 'rate_hz = 29\nrate_hz_typo = 3', 1))
    cp = subprocess.run([ddscope_bin(), "lab", "run", str(bad)], capture_output=True, text=True)
    assert cp.returncode != 0 and cp.stderr.count("\n") == 1, cp.stderr
    assert "bad.toml" in cp.stderr and "rate_hz_typo" in cp.stderr and "panicked" not in cp.stderr

    size = tmp_path / "size.toml"
    size.write_text(SIMPLE.read_text().replace("sample_bytes = 40", "sample_bytes = 38"))
    cp = subprocess.run([ddscope_bin(), "lab", "check", str(size)], capture_output=True, text=True)
    assert cp.returncode != 0 and cp.stderr.count("\n") == 1, cp.stderr
    assert "node sensor" in cp.stderr and "/drive" in cp.stderr and "36 and 40" in cp.stderr

    cp = subprocess.run([ddscope_bin(), "lab", "run", str(tmp_path / "missing.toml")], capture_output=True, text=True)
    assert cp.returncode != 0 and "missing.toml" in cp.stderr and cp.stderr.count("\n") == 1

    env = dict(os.environ, DDSCOPE_LAB_NODES=str(tmp_path / "no-nodes-here"))
    cp = subprocess.run([ddscope_bin(), "lab", "check", str(SIMPLE)], capture_output=True, text=True, env=env)
    assert cp.returncode != 0 and "DDSCOPE_LAB_NODES" in cp.stderr and cp.stderr.count("\n") == 1, cp.stderr


def test_hostile_scenarios_fail_fast_in_one_short_line(tmp_path):
    """`lab check` bounds what it accepts (issue 23, 14): a link of 10^18 bit/s,
    1 000 nodes (once 9.8 s to check, growing faster than linearly), a 200 KB
    key or raw control bytes (once echoed back whole). Each is one short line
    naming the file and field, without an ESC byte, in well under a second."""
    def check(text):
        f = tmp_path / "hostile.toml"
        f.write_bytes(text.encode())
        t = time.monotonic()
        cp = subprocess.run([ddscope_bin(), "lab", "check", str(f)], capture_output=True, timeout=60)
        return cp, time.monotonic() - t

    assert 'rate = "2.5G"' in SIMPLE.read_text()
    cp, _ = check(SIMPLE.read_text().replace('rate = "2.5G"', 'rate = "1000000000000000000bit"', 1))
    assert cp.returncode != 0 and b"network.rate" in cp.stderr and b"400 Gbit/s" in cp.stderr, cp.stderr
    nodes = "".join(f'[[nodes]]\nname = "n{i}"\nhost = "pc1"\n[[nodes.publish]]\ntopic = "/t{i}"\ntype_name = "std_msgs/msg/String"\nsample_bytes = 64\nrate_hz = 10\n' for i in range(1000))
    cp, secs = check('name = "many"\nduration = "2s"\n[[hosts]]\nname = "pc1"\n[[hosts]]\nname = "pc2"\n' + nodes)
    assert cp.returncode != 0 and b"nodes: 1000 nodes; a lab runs at most 256" in cp.stderr and secs < 5, (cp.stderr, secs)
    for text in ('name = "x"\n' + "k" * 200_000 + " = 1\n", 'name = "x\x1b]0;pwned\x07' + "y" * 200_000 + '"\n',
                 SIMPLE.read_text().replace('name = "', 'name = "\x1b[2J', 1)):
        cp, secs = check(text)
        assert cp.returncode != 0 and len(cp.stderr) < 1000 and cp.stderr.count(b"\n") == 1, cp.stderr[:3000]
        assert b"\x1b" not in cp.stderr and b"\x07" not in cp.stderr and b"hostile.toml" in cp.stderr, cp.stderr[:3000]


def test_refuses_without_root(tmp_path):
    need_root()
    before = set(lab_namespaces())
    cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", ddscope_bin(), "lab", "run", str(SIMPLE),
           "--out", str(tmp_path / "o")]
    cp = subprocess.run(cmd, capture_output=True, text=True)
    assert cp.returncode != 0
    assert cp.stderr.strip().endswith("needs root to create network namespaces (run it with sudo)"), cp.stderr
    assert cp.stderr.count("\n") == 1
    assert set(lab_namespaces()) == before


def test_up_and_down(ddscope):
    need_root()
    cp = ddscope("lab", "up", SIMPLE)
    rid = re.search(r"lab (\d+-[0-9a-f]{4}) is up", cp.stdout).group(1)
    try:
        names = lab_namespaces(rid)
        assert sorted(names) == [f"ddsl-{rid}-pc1", f"ddsl-{rid}-pc2"]
        # the hosts reach each other over the link, with the scenario's MTU and rate limit
        ping = subprocess.run(["ip", "netns", "exec", names[0], "python3", "-c",
                               "import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('10.77.0.2', 9)); print('sent')"],
                              capture_output=True, text=True)
        assert ping.stdout.strip() == "sent", ping.stderr
        link = subprocess.run(["ip", "-n", names[0], "-d", "link", "show", "eth0"], capture_output=True, text=True).stdout
        assert "mtu 1500" in link and "veth" in link
        qdisc = subprocess.run(["tc", "-n", names[0], "qdisc", "show", "dev", "eth0"], capture_output=True, text=True).stdout
        assert "tbf" in qdisc and "2500Mbit" in qdisc.replace("2.5Gbit", "2500Mbit"), qdisc
        route = subprocess.run(["ip", "-n", names[0], "route"], capture_output=True, text=True).stdout
        assert "224.0.0.0/4 dev eth0" in route
    finally:
        ddscope("lab", "down", rid)
    assert not lab_namespaces(rid)
