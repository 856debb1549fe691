"""TSN on the wire (issue 14): 802.1Q-tagged topics in the lab (tc eBPF,
no 8021q module), emulated packet loss (tc eBPF, no netem), and
`ddscope tsn check` against a TSN configuration.

Oracles:
  * tshark 4.0 on the lab's captures: `vlan.priority` / `vlan.id` of every
    frame (each IP fragment on its own) of the datagrams carrying a topic's
    DATA / DATA_FRAG; the topic of a writer comes from the nodes' ground truth
    (writer GUID -> topic), not from ddscope;
  * the nodes' ground truth: every published sample received;
  * frame counts by tshark on the sender's and the receiver's capture for the
    loss rate (the frames dropped between the two capture points);
  * `tsn check` is judged against configurations built here to be violated
    (a wrong PCP, a gate control list the unshaped lab cannot follow, a clock
    offset that makes every sample late) and one that the tshark oracle above
    says the run meets.
Needs root (network namespaces, tc eBPF); CI runs as root.
"""
from __future__ import annotations

import json
import math
import pathlib
import re
import subprocess
from collections import defaultdict

import pytest

from conftest import REPO, have_root, require_tool
from test_lab import lab_run, truth

TAGGED = REPO / "examples" / "lab" / "tsn-tagged.toml"
TAGGED_TSN = REPO / "examples" / "tsn" / "lab-tagged.toml"
PCPS = {"/image": 5, "/drive": 3}


def tshark_frames(capture):
    """Every frame: (number, vlan priority or None, vlan id or None, (ip.src, ip.dst, ip.id) when it is an
    IP fragment else None, [writer GUIDs of its DATA / DATA_FRAG], ip.dst is multicast)."""
    tshark = require_tool("tshark")
    cmd = [tshark, "-r", str(capture), "-T", "fields", "-E", "separator=\t", "-E", "aggregator=,",
           "-e", "frame.number", "-e", "vlan.priority", "-e", "vlan.id", "-e", "ip.src", "-e", "ip.dst", "-e", "ip.id",
           "-e", "ip.flags.mf", "-e", "ip.frag_offset",
           "-e", "rtps.guidPrefix.src", "-e", "rtps.sm.id", "-e", "rtps.sm.wrEntityId"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    frames = []
    for line in out.splitlines():
        num, prio, vid, src, dst, ipid, mf, off, prefix, ids, writers = (line.split("\t") + [""] * 11)[:11]
        writers_of_data = []
        if prefix:
            # wrEntityId is listed for DATA (0x15), DATA_FRAG (0x16), HEARTBEAT (0x07), GAP (0x08) ...;
            # only DATA/DATA_FRAG writers are taken, in order
            w_iter = iter(writers.split(","))
            for sm in ids.split(","):
                if sm in ("0x15", "0x16", "0x07", "0x08", "0x13", "0x06", "0x12"):
                    w = next(w_iter, "")
                    if sm in ("0x15", "0x16") and w:
                        writers_of_data.append(prefix.split(",")[0].replace(":", "") + w[2:].zfill(8))
        mf, off = mf.split(",")[0], off.split(",")[0]
        frag = mf in ("1", "True") or (off not in ("", "0"))
        dgram = (src.split(",")[0], dst.split(",")[0], ipid.split(",")[0]) if frag else None
        multicast = 224 <= int((dst.split(",")[0] or "0").split(".")[0]) <= 239
        frames.append((int(num), int(prio) if prio else None, int(vid) if vid else None, dgram, writers_of_data, multicast))
    return frames


def pcp_per_topic(capture, writer_topic):
    """topic -> {(vlan priority, vlan id, to a multicast address): frames} over every frame (all IP
    fragments) of the datagrams carrying that topic's DATA / DATA_FRAG."""
    frames = tshark_frames(capture)
    by_dgram = defaultdict(list)
    for f in frames:
        if f[3]:
            by_dgram[f[3]].append(f)
    out = defaultdict(lambda: defaultdict(int))
    for f in frames:
        topics = {writer_topic[w] for w in f[4] if w in writer_topic}
        if not topics:
            continue
        assert len(topics) == 1, f"{capture}: frame {f[0]} carries several topics {topics}"
        topic = topics.pop()
        group = by_dgram[f[3]] if f[3] else [f]
        for g in group:
            out[topic][(g[1], g[2], g[5])] += 1
    return out


_ORACLE = {}


def untagged_oracle(run, writer_topic=None):
    """(host -> topic -> untagged frames, host -> pcp_per_topic) by tshark, computed once per run."""
    if run not in _ORACLE:
        if writer_topic is None:
            pub, _ = truth(run)
            writer_topic = {g: r["topic"] for (g, _), r in pub.items()}
        seen = {h: pcp_per_topic(run / f"{h}.pcapng", writer_topic) for h in ("pc1", "pc2")}
        untagged = {h: {t: sum(n for k, n in seen[h][t].items() if k[0] is None) for t in PCPS} for h in seen}
        _ORACLE[run] = (untagged, seen)
    return _ORACLE[run]


def expect_pcp_lines(stdout, run):
    """Every pcp line as tshark says it must read: PASS when every frame of the topic carries its PCP,
    otherwise FAIL naming exactly tshark's number of untagged frames, all to unicast addresses.
    Returns True when every line passes."""
    untagged, _ = untagged_oracle(run)
    lines = stdout.splitlines()
    for host in ("pc1", "pc2"):
        for topic, pcp in PCPS.items():
            u = untagged[host][topic]
            if u == 0:
                want = rf"pcp {host} {topic}: PCP {pcp}: \d+ of \d+ frames: PASS$"
            else:
                want = rf"pcp {host} {topic}: PCP {pcp}: \d+ of \d+ frames; {u} untagged, all to unicast addresses \(frames [\d, ]+\): FAIL$"
            assert any(re.match(want, l) for l in lines), f"want {want!r} in\n{stdout}"
    return all(n == 0 for h in untagged.values() for n in h.values())


@pytest.fixture(scope="module")
def tagged_run(ddscope, tmp_path_factory):
    assert have_root(), "the lab tests need root (network namespaces, tc eBPF); CI runs as root"
    out = tmp_path_factory.mktemp("tsnwire") / "tagged"
    lab_run(ddscope, out, TAGGED, "--duration", "5s")
    return out


def test_tagged_run_carries_the_configured_pcp(ddscope, tagged_run):
    run = json.loads((tagged_run / "run.json").read_text())
    # the workload still delivers every sample (oracle: ground truth of publishers and subscribers)
    pub, rcv = truth(tagged_run)
    assert pub, "nothing published"
    for (guid, seq), r in pub.items():
        assert any(k[1:] == (guid, seq) for k in rcv), f"{r['topic']} seq {seq} never received"
    writer_topic = {g: r["topic"] for (g, _), r in pub.items()}
    assert set(writer_topic.values()) == set(PCPS)
    # oracle: tshark's vlan.priority on every frame, sender and receiver capture alike. The lab maps a
    # topic to its PCP by its network partition's multicast address (what `tsn config --emit dds`
    # generates), so every frame sent there is tagged; a writer's repair to the one reader that asked
    # for it goes to that reader's unicast address and leaves untagged, as on a real host with the
    # same mapping (under load the receiver drops a fragment now and then: CI saw 10 of 102 860).
    for host, seen in untagged_oracle(tagged_run, writer_topic)[1].items():
        for topic, pcp in PCPS.items():
            multicast = {k[:2]: n for k, n in seen[topic].items() if k[2]}
            unicast = {k[:2]: n for k, n in seen[topic].items() if not k[2]}
            assert multicast, f"{host}: no frames of {topic} to its partition's address"
            assert set(multicast) == {(pcp, 10)}, f"{host}: {topic}: (PCP, VID) -> frames {multicast}, want only ({pcp}, 10)"
            assert set(unicast) <= {(None, None), (pcp, 10)}, f"{host}: {topic}: unicast frames {unicast}"
        # /image is IP-fragmented: its frames are many more than its samples
        assert sum(seen["/image"].values()) > 1000
    # the programs' own counters (run.json) agree that tags were pushed and popped
    hosts = {h["host"]: h for h in run["network"]["ebpf"]["vlan"]["hosts"]}
    assert hosts["pc1"]["tagged"] > 1000 and hosts["pc2"]["popped"] > 1000 and hosts["pc1"]["errors"] == 0
    # ddscope topics shows the PCP of each topic from the lab's own capture
    cp = ddscope("topics", tagged_run / "pc2.pcapng", "--format", "json")
    rows = {t["topic_name"]: t for t in json.loads(cp.stdout)["topics"]}
    for topic, pcp in PCPS.items():
        assert rows[topic]["pcp"] == [pcp], rows[topic]


def test_tsn_check_passes_a_run_that_meets_its_configuration(ddscope, tagged_run):
    cp = ddscope("tsn", "check", TAGGED_TSN, tagged_run, "--judge", "p99", check=False)
    all_tagged = expect_pcp_lines(cp.stdout, tagged_run)
    assert cp.returncode == (0 if all_tagged else 1), cp.stdout + cp.stderr
    lines = cp.stdout.splitlines()
    cls = [l for l in lines if l.startswith("class A")]
    assert len(cls) == 1 and cls[0].endswith("PASS") and " 0 lost" in cls[0], cp.stdout


def test_tsn_check_names_repairs_that_leave_untagged(ddscope, tmp_path):
    # the same workload with 0.3 % of the frames dropped before pc2 (tc eBPF): the reader asks for
    # the lost fragments again and the writer repairs them to the reader's unicast address, which the
    # partition mapping does not tag. tshark is the oracle for which frames went out untagged.
    text = TAGGED.read_text().replace('vlan_id = 10\n', 'vlan_id = 10\n[network.loss]\nprobability = 0.003\nhosts = ["pc2"]\n')
    assert "[network.loss]" in text
    scenario = write_config(tmp_path, "tagged-loss.toml", text)
    run = tmp_path / "run"
    lab_run(ddscope, run, scenario, "--duration", "3s")
    untagged, seen = untagged_oracle(run)
    assert untagged["pc1"]["/image"] > 0, f"no repair left untagged at the sender: {dict(seen['pc1']['/image'])}"
    for host in ("pc1", "pc2"):
        for topic, pcp in PCPS.items():
            assert not any(k[2] and k[:2] != (pcp, 10) for k in seen[host][topic]), f"{host} {topic}: {dict(seen[host][topic])}"
    cp = ddscope("tsn", "check", TAGGED_TSN, run, "--judge", "p99", check=False)
    assert not expect_pcp_lines(cp.stdout, run)
    assert cp.returncode == 1 and cp.stdout.strip().endswith("tsn check: FAIL"), cp.stdout + cp.stderr


def write_config(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_tsn_check_flags_a_wrong_pcp(ddscope, tagged_run, tmp_path):
    # the configuration says /drive is on PCP 2; the run tagged it with 3 (tshark says so above)
    text = TAGGED_TSN.read_text().replace('rate_hz = 29\npcp = 3', 'rate_hz = 29\npcp = 2')
    assert text != TAGGED_TSN.read_text()
    cfg = write_config(tmp_path, "wrong-pcp.toml", text)
    cp = ddscope("tsn", "check", cfg, tagged_run, "--judge", "p99", check=False)
    assert cp.returncode == 1, cp.stdout + cp.stderr
    bad = [l for l in cp.stdout.splitlines() if l.startswith("pcp pc1 /drive")]
    assert bad and "with PCP 3" in bad[0] and bad[0].endswith("FAIL"), cp.stdout
    assert cp.stdout.strip().endswith("tsn check: FAIL")


def test_tsn_check_flags_frames_outside_their_window(ddscope, tagged_run, tmp_path):
    # a gate control list the lab never applied: TC 2 (PCP 3, /drive) open 100 us of every 1 ms;
    # the unshaped sender sends whenever it publishes, so most /drive frames leave outside the window
    gcl = '\n[port.gcl]\nbase_time = 0\nentries = [\n  { gates = [2], duration = "100us" },\n  { gates = [0, 1], duration = "900us" },\n]\n'
    text = TAGGED_TSN.read_text().replace('pcp_to_tc = [0, 0, 0, 2, 0, 1, 0, 0]\n', 'pcp_to_tc = [0, 0, 0, 2, 0, 1, 0, 0]\n' + gcl)
    cfg = write_config(tmp_path, "gated.toml", text)
    cp = ddscope("tsn", "check", cfg, tagged_run, "--judge", "p99", check=False)
    assert cp.returncode == 1, cp.stdout + cp.stderr
    gate = [l for l in cp.stdout.splitlines() if l.startswith("gate pc1 (port pc1) /drive")]
    assert gate and gate[0].endswith("FAIL"), cp.stdout
    m = re.search(r"(\d+) of (\d+) frames outside TC 2", gate[0])
    outside, frames = int(m.group(1)), int(m.group(2))
    # publication is not aligned to the schedule: about 90 % of the frames fall outside a 10 % window
    assert frames >= 100 and outside > frames // 2, gate[0]
    # a window that is always open for TC 2 passes the same frames
    always = text.replace('{ gates = [2], duration = "100us" },\n  { gates = [0, 1], duration = "900us" }', '{ gates = [0, 1, 2], duration = "1ms" }')
    cp = ddscope("tsn", "check", write_config(tmp_path, "open.toml", always), tagged_run, "--judge", "p99", check=False)
    all_tagged = expect_pcp_lines(cp.stdout, tagged_run)
    assert cp.returncode == (0 if all_tagged else 1), cp.stdout + cp.stderr
    gates = [l for l in cp.stdout.splitlines() if l.startswith("gate pc1 (port pc1)")]
    assert len(gates) == 2 and all(l.endswith("PASS") for l in gates), cp.stdout


def test_tsn_check_flags_late_samples(ddscope, tagged_run):
    # pc2's clock said to run 3 ms behind: every /drive sample is 3 ms later than class A's 2 ms
    cp = ddscope("tsn", "check", TAGGED_TSN, tagged_run, "--offset", "pc2=-3ms", check=False)
    assert cp.returncode == 1, cp.stdout + cp.stderr
    cls = [l for l in cp.stdout.splitlines() if l.startswith("class A")]
    assert cls and cls[0].endswith("FAIL"), cp.stdout
    ms = float(re.search(r"max latency ([0-9.]+) ms", cls[0]).group(1))
    assert ms > 3.0, cls[0]


# ---------------------------------------------------------------- loss

LOSS_SCENARIO = """
name = "loss-1pct"
duration = "{duration}"
[network]
mtu = 1500
[network.loss]
probability = 0.01
hosts = ["pc2"]
[fidelity]
enforce = false
[[hosts]]
name = "pc1"
[[hosts]]
name = "pc2"
[[nodes]]
name = "talker"
host = "pc1"
[[nodes.publish]]
topic = "/chatter"
type_name = "std_msgs/msg/UInt8MultiArray"
sample_bytes = 64
rate_hz = {rate}
reliability = "best_effort"
[[nodes]]
name = "listener"
host = "pc2"
[[nodes.subscribe]]
topic = "/chatter"
"""


def ipv4_frames_from(capture, src):
    tshark = require_tool("tshark")
    out = subprocess.run([tshark, "-r", str(capture), "-Y", f"ip.src == {src}", "-T", "fields", "-e", "frame.number"],
                         capture_output=True, text=True, check=True).stdout
    return len(out.split())


def test_loss_one_percent(ddscope, tmp_path):
    assert have_root(), "the lab tests need root (network namespaces, tc eBPF); CI runs as root"
    p, rate, seconds = 0.01, 2500, 20
    n = rate * seconds
    sigma = math.sqrt(p * (1 - p) / n)
    assert 0.003 > 4 * sigma  # the tolerance of the issue is more than 4 sigma at this frame count (6 here)
    sc = tmp_path / "loss.toml"
    sc.write_text(LOSS_SCENARIO.format(duration=f"{seconds}s", rate=rate))
    out = tmp_path / "run"
    lab_run(ddscope, out, sc)
    run = json.loads((out / "run.json").read_text())
    assert run["network"]["topology"] == "bridge"
    # oracle: tshark counts the frames pc1 sent at the sender's capture and at the receiver's
    sent = ipv4_frames_from(out / "pc1.pcapng", "10.77.0.1")
    got = ipv4_frames_from(out / "pc2.pcapng", "10.77.0.1")
    assert sent >= 0.95 * n, (sent, n)
    loss = 1 - got / sent
    assert abs(loss - p) <= 0.003, f"lost {sent - got} of {sent} frames: {100 * loss:.3f} %"
    port = run["network"]["ebpf"]["loss"]["ports"]
    assert [x["towards"] for x in port] == ["pc2"]
    # a second count of the program's drops, kept by the kernel (the clsact hook's drop counter)
    drops = {(d["owner"], d["device"]): d for d in run["network"]["kernel_drops"]}
    assert drops[("switch", "p1")]["clsact_dropped"] == port[0]["dropped"], (drops, port)
    # every frame missing between the two captures is counted: by the program, or by the kernel
    # on the way (a device's drop counters, the receiver's capture ring) -- never silently lost
    unasked = sum(d["rx_dropped"] + d["tx_dropped"] + d["rx_over_errors"] + d["qdisc_dropped"] for d in drops.values())
    # a capture's drops, and the frames its ring held unread when tcpdump stopped (received - captured - dropped)
    capture_drops = sum(max(c["tcpdump"]["received_by_filter"] - c["tcpdump"]["captured"], 0)
                        + (c["tcpdump"].get("dropped_by_interface") or 0)
                        for c in run["captures"] if c["host"] == "pc2")
    # (the program also saw the few frames pc1's capture does not hold -- sent before it started or
    # unread in its ring at the stop -- and may have dropped some of those: frames - sent bounds them)
    unseen_by_pc1 = port[0]["frames"] - sent
    assert port[0]["dropped"] - unseen_by_pc1 <= sent - got <= port[0]["dropped"] + unasked + capture_drops, \
        (port, sent, got, drops, run["captures"])
    # the program's own loss rate is the emulated one, whatever else the kernel dropped
    assert abs(port[0]["dropped"] / port[0]["frames"] - p) <= 0.003, port
    # it saw every frame pc1's capture holds, plus the few pc1 sent before its capture started
    # (IGMP membership reports while the lab sets the host up)
    assert 0 <= port[0]["frames"] - sent <= 10, (port, sent)
