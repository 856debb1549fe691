"""Zenoh on the wire, checked against real Zenoh processes.

Oracle: real Zenoh (the eclipse-zenoh package from PyPI, which nobody here wrote) publishing and
subscribing with rmw_zenoh's key expressions, liveliness tokens and attachments
(lab/zenoh/rmw_node.py), in two network namespaces joined by a veth pair, captured with tcpdump
on each side. The processes log what they did: the publisher its (gid, sequence number), source
timestamp, size and the time just before `put`; the subscriber every sample its callback got,
when, and what the attachment said. ddscope reads only the two captures, and must find every
published sample with the same gid, sequence number, source timestamp, size and topic, name the
publisher's node from its liveliness token, and time each sample between the two capture points
inside what the processes saw: publish ≤ first byte on the sender's wire ≤ complete on the
receiver's wire ≤ the subscriber's callback (the namespaces share one kernel clock).

tshark 4.0 (Debian's) has no Zenoh dissector (`tshark -G protocols` lists none), so it cannot
serve as a second oracle for Zenoh; test_no_tshark_zenoh_dissector says so and fails the day one
arrives, so that this test can be extended to it.
"""
import csv
import io
import json
import os
import pathlib
import signal
import subprocess
import time

import pytest

from conftest import REPO, require_tool

NODE = REPO / "lab" / "zenoh" / "rmw_node.py"


def sh(*args, check=True):
    return subprocess.run(list(map(str, args)), capture_output=True, text=True, check=check)


class Namespaces:
    """Two namespaces `<tag>a`, `<tag>b` and a veth pair between them; deleted on exit."""

    def __init__(self, tag: str):
        self.a, self.b = f"{tag}a", f"{tag}b"
        self.va, self.vb = f"{tag}va", f"{tag}vb"
        self.ip_a, self.ip_b = "10.203.0.1", "10.203.0.2"

    def __enter__(self):
        for ns in (self.a, self.b):
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "link", "add", self.va, "netns", self.a, "type", "veth", "peer", "name", self.vb, "netns", self.b)
        for ns, dev, ip in ((self.a, self.va, self.ip_a), (self.b, self.vb, self.ip_b)):
            sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
        return self

    def __exit__(self, *exc):
        for ns in (self.a, self.b):
            sh("ip", "netns", "del", ns, check=False)


def capture(ns, dev, path, procs):
    p = subprocess.Popen(["ip", "netns", "exec", ns, "tcpdump", "-i", dev, "-w", str(path), "-U", "--immediate-mode", "-s", "0",
                          "--time-stamp-precision", "nano"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    procs.append(p)
    # tcpdump says "listening on" once its socket is bound.
    deadline = time.time() + 10
    line = ""
    while time.time() < deadline and "listening on" not in line:
        line = p.stderr.readline()
    assert "listening on" in line, f"tcpdump in {ns} did not start: {line}"
    return p


def read_jsonl(path):
    return [json.loads(l) for l in pathlib.Path(path).read_text().splitlines() if l.strip()]


# The publisher's QoS, in rmw_zenoh's token format (lab/zenoh/rmw_node.py --qos), and what it says in
# rmw/types.h's numbers, worked by hand: reliability 2 = best effort, durability 1 = transient local,
# history empty = keep last (rmw_zenoh's default) with depth 5, deadline 0 s + 100000000 ns, lifespan
# and liveliness empty = rmw_zenoh's defaults (infinite; automatic with an infinite lease).
PUB_QOS = "2:1:,5:0,100000000:,:,,"
PUB_QOS_COLUMNS = {"reliability": "best_effort", "durability": "transient_local", "history": "keep_last(5)",
                   "deadline": "0.1s", "lifespan": "infinite", "liveliness": "automatic"}


def run_scenario(tmp_path, proto, sizes, count, procs, shm=False, live=None):
    """`live`: a file for the output of `ddscope live` on the subscriber's interface, run beside its tcpdump."""
    require_tool("tcpdump")
    tag = f"zl{os.getpid() % 100000}{proto[0]}"
    with Namespaces(tag) as n:
        a_pcap, b_pcap = tmp_path / "pub.pcap", tmp_path / "sub.pcap"
        ca = capture(n.a, n.va, a_pcap, procs)
        cb = capture(n.b, n.vb, b_pcap, procs)
        lv = None
        if live is not None:
            from conftest import ddscope_bin
            # (its output to files: an unread pipe would fill up and stall the capture)
            lv = subprocess.Popen(["ip", "netns", "exec", n.b, ddscope_bin(), "live", "-i", n.vb, "--duration", "60s"],
                                  stdout=open(live, "w"), stderr=open(f"{live}.err", "w"))
            procs.append(lv)
            deadline = time.time() + 10
            while "running as" not in pathlib.Path(f"{live}.err").read_text() and time.time() < deadline:
                time.sleep(0.05)
            assert lv.poll() is None, pathlib.Path(f"{live}.err").read_text()
        ready = tmp_path / "sub.ready"
        endpoint = f"{proto}/{n.ip_b}:7447"
        sub = subprocess.Popen([str(x) for x in ["ip", "netns", "exec", n.b, "python3", NODE, "sub", "--node", "listener", "--listen", endpoint,
                                "--count", count, "--truth", tmp_path / "sub.jsonl", "--ready", ready, "--duration", "40",
                                *([] if shm else ["--no-shm"])]],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(sub)
        deadline = time.time() + 20
        while not ready.exists() and time.time() < deadline:
            time.sleep(0.05)
        assert ready.exists(), "the subscriber did not start"
        size_args = [x for s in sizes for x in ("--size", s)]
        pub = subprocess.run([str(x) for x in ["ip", "netns", "exec", n.a, "python3", NODE, "pub", "--node", "talker", "--connect", endpoint,
                              "--count", count, "--period", "0.01", *size_args, "--truth", tmp_path / "pub.jsonl", "--wait", "1.5",
                              "--qos", PUB_QOS,
                              *([] if shm else ["--no-shm"])]],
                             capture_output=True, text=True, timeout=120)
        assert pub.returncode == 0, pub.stdout + pub.stderr
        out, _ = sub.communicate(timeout=60)
        assert sub.returncode == 0, out
        time.sleep(0.3)
        for c in (ca, cb, *([lv] if lv else [])):
            c.send_signal(signal.SIGINT)
            c.wait(10)
        if lv:
            assert lv.returncode == 0, pathlib.Path(f"{live}.err").read_text()
    return a_pcap, b_pcap, read_jsonl(tmp_path / "pub.jsonl"), read_jsonl(tmp_path / "sub.jsonl")


# TCP: batches split over 1500-byte segments, and 150000-byte samples in fragments; UDP: one batch
# per datagram, 20000-byte samples in fragments; shm: zenoh's default between processes of one
# host, large samples in shared memory (only a descriptor and the attachment on the wire).
@pytest.mark.parametrize("proto,sizes,shm", [("tcp", [64, 3000, 20000, 150000], False), ("udp", [64, 3000, 20000], False),
                                             ("tcp", [64, 150000], True)], ids=["tcp", "udp", "tcp-shm"])
def test_zenoh_samples_and_latency_match_the_processes(ddscope, tmp_path, needs_root, processes, proto, sizes, shm):
    count = 24
    a_pcap, b_pcap, pub_log, sub_log = run_scenario(tmp_path, proto, sizes, count, processes, shm)
    decl = next(r for r in pub_log if r["event"] == "declare")
    published = {r["sn"]: r for r in pub_log if r["event"] == "publish"}
    received = {r["sn"]: r for r in sub_log if r["event"] == "receive"}
    assert len(published) == count and len(received) == count, (len(published), len(received))

    # dissect on the sender's capture: one DATA row per published sample, with the publisher's values.
    cp = ddscope("dissect", a_pcap, "--kind", "DATA", "--format", "jsonl")
    rows = [json.loads(l) for l in cp.stdout.splitlines() if l.strip()]
    assert [r["sn"] for r in rows] == sorted(published), cp.stderr
    for r in rows:
        p = published[r["sn"]]
        assert r["writer_id"].replace(".", "").replace(":", "") == decl["gid"], r
        assert r["source_ts_ns"] == p["publish_ns"], r
        if r["zenoh_msg"] == "PUT_SHM":
            # In shared memory: the size is not on the wire, and ddscope does not make one up.
            assert shm and r["sample_size"] is None, r
        else:
            assert r["zenoh_msg"] == "PUT" and r["sample_size"] == p["size"], r
        assert r["protocol"] == "zenoh" and r["key_expr"] == decl["key"], r
        assert r["topic_name"] == "/chatter" and r["type_name"] == "std_msgs/msg/String", r
        assert r["writer_node"] == "/talker", r
    if shm:
        assert any(r["zenoh_msg"] == "PUT_SHM" for r in rows if published[r["sn"]]["size"] == 150000), "no sample went by shared memory"
    assert "malformed" not in cp.stderr and "truncated" not in cp.stderr and "gaps" not in cp.stderr, cp.stderr

    # topics on the receiver's capture: the topic, its type, every sample.
    cp = ddscope("topics", b_pcap, "--format", "json")
    topics = json.loads(cp.stdout)
    t = [x for x in topics["topics"] if x["topic_name"] == "/chatter"]
    assert len(t) == 1 and t[0]["samples"] == count and t[0]["type_name"] == "std_msgs/msg/String", t
    assert t[0]["topic_raw"] == decl["key"] and t[0]["incomplete_samples"] == 0, t
    # ... and, from the liveliness tokens alone, the publisher's node and declared QoS in the DDS
    # columns, and the subscription as the topic's reader with its node.
    assert decl["qos"] == PUB_QOS
    assert {k: t[0][k] for k in PUB_QOS_COLUMNS} == PUB_QOS_COLUMNS, t
    assert t[0]["writer_nodes"] == ["/talker"] and t[0]["writers"] == 1, t
    assert t[0]["readers"] == 1 and t[0]["reader_nodes"] == ["/listener"], t
    assert "QoS field" not in cp.stderr, cp.stderr
    cp = ddscope("topics", b_pcap, "--format", "csv")
    csv_row = next(r for r in csv.DictReader(io.StringIO(cp.stdout)) if r["topic_name"] == "/chatter")
    assert {k: csv_row[k] for k in PUB_QOS_COLUMNS} == PUB_QOS_COLUMNS, csv_row

    # latency between the two capture points, per sample, inside the processes' own times.
    rows_path = tmp_path / "rows.jsonl"
    cp = ddscope("latency", a_pcap, b_pcap, "--rows", rows_path, "--format", "json")
    lat = [json.loads(l) for l in rows_path.read_text().splitlines() if l.strip()]
    lat = [r for r in lat if r["topic_name"] == "/chatter" and r["level"] == "message"]
    by_sn = {r["sn"]: r for r in lat}
    assert sorted(by_sn) == sorted(published), (sorted(by_sn), cp.stderr)
    wire = []
    for sn, r in by_sn.items():
        p, s = published[sn], received[sn]
        assert s["source_ts_ns"] == p["publish_ns"] and s["gid"] == decl["gid"]
        assert r["status"] == "delivered" and r["sender_node"] == "/talker", r
        assert r["source_ts_ns"] == p["publish_ns"] and r["writer_id"] == decl["gid"], r
        sent, done = r["sender_first_ts_ns"], r["receiver_last_ts_ns"]
        assert p["publish_ns"] <= sent <= done <= s["receive_ns"], (p, r, s)
        assert r["latency_ns"] == done - sent
        wire.append(done - sent)
    wire.sort()
    app = sorted(received[sn]["receive_ns"] - published[sn]["publish_ns"] for sn in published)
    print(f"{proto}: wire latency p50 {wire[len(wire) // 2] / 1e3:.1f} µs max {wire[-1] / 1e3:.1f} µs; "
          f"process publish→callback p50 {app[len(app) // 2] / 1e3:.1f} µs max {app[-1] / 1e3:.1f} µs")


def test_live_shows_the_zenoh_topic_as_topics_reads_it(ddscope, tmp_path, needs_root, processes):
    """`ddscope live` on the subscriber's interface while real Zenoh processes talk: its last table has the
    rmw_zenoh topic with every sample the publisher logged (oracle: the processes' own logs) and the size
    `ddscope topics` reads from the tcpdump capture of the same interface."""
    count = 24
    live = tmp_path / "live.txt"
    _, b_pcap, pub_log, _ = run_scenario(tmp_path, "tcp", [3000], count, processes, live=live)
    published = [r for r in pub_log if r["event"] == "publish"]
    assert len(published) == count
    text = live.read_text()
    last = text[text.rindex("ddscope live"):]
    header = next(l for l in last.splitlines() if l.startswith("topic "))
    row = next((l for l in last.splitlines() if l.startswith("/chatter ")), None)
    assert row is not None, last
    # the columns by the header's positions (right-aligned numbers end where their header ends)
    def col(name):
        end = header.index(name) + len(name)
        start = header.rindex("  ", 0, header.index(name)) if "  " in header[:header.index(name)] else 0
        return row[start:end].strip()
    t = next(x for x in json.loads(ddscope("topics", b_pcap, "--format", "json").stdout)["topics"] if x["topic_name"] == "/chatter")
    assert int(col("samples")) == count == t["samples"], (row, t["samples"])
    assert int(col("max B")) == t["max_sample_size"] == 3000, (row, t)
    assert "malformed" not in pathlib.Path(f"{live}.err").read_text()


def test_no_tshark_zenoh_dissector():
    tshark = require_tool("tshark")
    cp = subprocess.run([tshark, "-G", "protocols"], capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0
    names = [l.split("\t")[2].lower() for l in cp.stdout.splitlines() if l.count("\t") >= 2]
    assert "zenoh" not in names, "tshark now has a Zenoh dissector: compare ddscope against it in test_zenoh_lab.py"


class RouterNamespaces:
    """Three namespaces, publisher `<tag>a` — router `<tag>r` — subscriber `<tag>b`, two veth pairs; deleted on exit."""

    def __init__(self, tag: str):
        self.tag = tag
        self.ns = {k: f"{tag}{k}" for k in "arb"}
        # (namespace, device, address): the four ends, in the order a sample crosses them.
        self.ends = [("a", f"{tag}va", "10.204.1.1"), ("r", f"{tag}ra", "10.204.1.2"),
                     ("r", f"{tag}rb", "10.204.2.2"), ("b", f"{tag}vb", "10.204.2.1")]

    def __enter__(self):
        for ns in self.ns.values():
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        e = self.ends
        sh("ip", "link", "add", e[0][1], "netns", self.ns["a"], "type", "veth", "peer", "name", e[1][1], "netns", self.ns["r"])
        sh("ip", "link", "add", e[2][1], "netns", self.ns["r"], "type", "veth", "peer", "name", e[3][1], "netns", self.ns["b"])
        for k, dev, ip in e:
            sh("ip", "-n", self.ns[k], "addr", "add", f"{ip}/24", "dev", dev)
            sh("ip", "-n", self.ns[k], "link", "set", dev, "up")
        return self

    def __exit__(self, *exc):
        for ns in self.ns.values():
            sh("ip", "netns", "del", ns, check=False)


def test_zenoh_router_hop(ddscope, tmp_path, needs_root, processes):
    """Publisher and subscriber as clients of a Zenoh router in the middle (rmw_zenoh's default
    layout, with the router in its own namespace), captured on all four ends: the sample is found
    at each, in order, and the router hop (complete on the router's inbound link → first byte on
    its outbound link) is measured per sample. The router re-frames the message in another
    session with its own key-expression declarations; the sample is matched by rmw_zenoh's
    (gid, sequence number) all the same."""
    require_tool("tcpdump")
    count, sizes = 20, ["64", "20000"]
    with RouterNamespaces(f"zr{os.getpid() % 100000}") as n:
        pcaps = []
        for k, dev, _ in n.ends:
            pcaps.append(tmp_path / f"{dev[len(n.tag):]}.pcap")
            capture(n.ns[k], dev, pcaps[-1], processes)
        node = lambda k, *args: [str(x) for x in ["ip", "netns", "exec", n.ns[k], "python3", NODE, *args, "--no-shm"]]
        ready = tmp_path / "router.ready"
        processes.append(subprocess.Popen(node("r", "router", "--mode", "router", "--listen", "tcp/0.0.0.0:7447", "--ready", ready,
                                               "--duration", "30"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.time() + 20
        while not ready.exists() and time.time() < deadline:
            time.sleep(0.05)
        sready = tmp_path / "sub.ready"
        sub = subprocess.Popen(node("b", "sub", "--mode", "client", "--node", "listener", "--connect", "tcp/10.204.2.2:7447",
                                    "--count", count, "--truth", tmp_path / "sub.jsonl", "--ready", sready, "--duration", "30"),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        processes.append(sub)
        while not sready.exists() and time.time() < deadline:
            time.sleep(0.05)
        assert ready.exists() and sready.exists(), "the router or the subscriber did not start"
        pub = subprocess.run(node("a", "pub", "--mode", "client", "--node", "talker", "--connect", "tcp/10.204.1.2:7447",
                                  "--count", count, "--period", "0.01", "--size", sizes[0], "--size", sizes[1],
                                  "--truth", tmp_path / "pub.jsonl", "--wait", "1.5"), capture_output=True, text=True, timeout=120)
        assert pub.returncode == 0, pub.stdout + pub.stderr
        out, _ = sub.communicate(timeout=60)
        assert sub.returncode == 0, out
        time.sleep(0.3)
        for p in processes[:4]:
            p.send_signal(signal.SIGINT)
            p.wait(10)
    published = {r["sn"]: r for r in read_jsonl(tmp_path / "pub.jsonl") if r["event"] == "publish"}
    received = {r["sn"]: r for r in read_jsonl(tmp_path / "sub.jsonl") if r["event"] == "receive"}
    assert len(published) == count and len(received) == count

    rows_path = tmp_path / "rows.jsonl"
    cp = ddscope("latency", *pcaps, "--rows", rows_path, "--format", "json")
    rows = [json.loads(l) for l in rows_path.read_text().splitlines() if l.strip()]
    rows = [r for r in rows if r["level"] == "message" and r["topic_name"] == "/chatter"]
    names = [p.stem for p in pcaps]  # va, ra, rb, vb
    # The publisher's node, from its liveliness token, at every capture point (the router
    # forwards tokens to the subscriber's graph cache, as rmw_zenoh's routers do).
    for pc in pcaps:
        t = [x for x in json.loads(ddscope("topics", pc, "--format", "json").stdout)["topics"] if x["topic_name"] == "/chatter"]
        assert len(t) == 1 and t[0]["writer_nodes"] == ["/talker"] and t[0]["samples"] == count, (pc, t)
    per = {(r["receiver"], r["sn"]): r for r in rows if r["sender"] == names[0]}
    hops = []
    for sn, p in published.items():
        at = [per.get((name, sn)) for name in names[1:]]
        assert all(r is not None and r["status"] == "delivered" for r in at), (sn, at, cp.stderr)
        assert all(r["source_ts_ns"] == p["publish_ns"] for r in at)
        sent = at[0]["sender_first_ts_ns"]
        router_in_done, router_out_first, sub_done = at[0]["receiver_last_ts_ns"], at[1]["receiver_first_ts_ns"], at[2]["receiver_last_ts_ns"]
        assert p["publish_ns"] <= sent <= router_in_done <= router_out_first <= sub_done <= received[sn]["receive_ns"], (sn, at)
        hops.append(router_out_first - router_in_done)
    hops.sort()
    print(f"router hop (complete in → first byte out): p50 {hops[len(hops) // 2] / 1e3:.1f} µs, max {hops[-1] / 1e3:.1f} µs")

    # The router hop as its own row per sample (level `router`, ra → rb: the router's own two
    # capture points, found by the Zenoh ids of the sessions), checked against the frames of the
    # router's two captures read by tshark: its TCP reassembly gives each byte's segment and frame
    # time; the sample is found in the stream by its attachment (the bytes the publisher logged:
    # sequence number, source timestamp, gid); the Zenoh batch that holds it by the 16-bit lengths
    # that cut a Zenoh TCP stream. Completion in = the segment holding the batch's last byte on the
    # router's inbound link; first byte out = the segment holding the batch's first byte outbound.
    all_rows = [json.loads(l) for l in rows_path.read_text().splitlines() if l.strip()]
    router = {r["sn"]: r for r in all_rows if r["level"] == "router"}
    assert sorted(router) == sorted(published), (sorted(router), cp.stderr)
    decl = next(r for r in read_jsonl(tmp_path / "pub.jsonl") if r["event"] == "declare")
    inbound = tcp_batches(pcaps[1], lambda s, d: d == 7447)   # publisher → router, on the router's side
    outbound = tcp_batches(pcaps[2], lambda s, d: s == 7447)  # router → subscriber, on the router's side
    for sn, p in published.items():
        r = router[sn]
        assert (r["sender"], r["receiver"], r["status"]) == (names[1], names[2], "delivered"), r
        att = sn.to_bytes(8, "little", signed=True) + p["publish_ns"].to_bytes(8, "little", signed=True) + b"\x10" + bytes.fromhex(decl["gid"])
        in_first, in_last = inbound(att)
        out_first, out_last = outbound(att)
        assert (r["sender_last_ts_ns"], r["receiver_first_ts_ns"]) == (in_last, out_first), (sn, r, in_last, out_first)
        assert r["latency_ns"] == out_first - in_last > 0, r
        assert r["latency_ns"] == per[(names[2], sn)]["receiver_first_ts_ns"] - per[(names[1], sn)]["receiver_last_ts_ns"]
    # ... and in the summary tables: text and JSON.
    text = ddscope("latency", *pcaps).stdout
    assert any(l.split()[:4] == ["/chatter", names[1], names[2], "router"] for l in text.splitlines()), text
    doc = json.loads(ddscope("latency", *pcaps, "--format", "json").stdout)
    hop_flow = [f for f in doc["flows"] if (f["sender"], f["receiver"]) == (names[1], names[2])]
    assert len(hop_flow) == 1 and dict(hop_flow[0]["layers"])["router"]["count"] == count, hop_flow
    assert hop_flow[0]["delivered"] == count and hop_flow[0]["late"] == 0, hop_flow


def tcp_batches(pcap, direction):
    """One direction of the Zenoh TCP stream in `pcap` (tshark's fields, no Zenoh decoding but the
    batch lengths): a function from bytes in a batch to (time of the segment holding the batch's
    first byte, time of the segment holding its last byte), in ns."""
    tshark = require_tool("tshark")
    cp = subprocess.run([tshark, "-r", str(pcap), "-Y", "tcp.len > 0", "-o", "tcp.desegment_tcp_streams:FALSE", "-T", "fields",
                         "-e", "frame.time_epoch", "-e", "tcp.srcport", "-e", "tcp.dstport", "-e", "tcp.seq", "-e", "tcp.payload"],
                        capture_output=True, text=True, check=True, timeout=120)
    segs = {}
    for line in cp.stdout.splitlines():
        t, sport, dport, seq, payload = line.split("\t")
        if direction(int(sport), int(dport)):
            sec, frac = t.split(".")
            segs.setdefault(int(seq), (int(sec) * 10**9 + int(frac.ljust(9, "0")[:9]), bytes.fromhex(payload.replace(":", ""))))
    stream, marks = b"", []
    for seq in sorted(segs):
        t, b = segs[seq]
        assert seq - min(segs) == len(stream), "a segment missing from the capture"
        marks.append((len(stream), t))
        stream += b
    bounds, off = [], 0
    while off + 2 <= len(stream):
        n = int.from_bytes(stream[off:off + 2], "little")
        bounds.append((off, off + 2 + n))
        off += 2 + n
    at = lambda o: [t for m, t in marks if m <= o][-1]

    def find(needle):
        i = stream.find(needle)
        assert i >= 0 and stream.find(needle, i + 1) < 0, "the attachment is not in the stream exactly once"
        start, end = next(b for b in bounds if b[0] <= i < b[1])
        return at(start), at(end - 1)
    return find
