"""DDS domains as a dimension (issue 13) and the rate of bursty topics.

Oracles:
- tshark's rtps/udp fields: the domain of every participant from the RTPS port
  mapping (port = 7400 + 250 * domain + d) applied to the destination ports of
  its SPDP datagrams, and which GUID prefixes publish which topic;
- real Cyclone DDS processes (ddsperf in domains 0 and 5; the lab's relay
  bridging domain 0 to domain 5) and the lab's ground truth (what each node
  published and received, and which input sample each bridged sample came from);
- for rates: the samples' capture times from tshark, counted independently.
"""
import csv
import io
import json
import os
import pathlib
import re
import subprocess
import time
import uuid

import pytest

from conftest import ddscope_bin, free_port
from test_lab import lab_namespaces, lab_processes, need_root, run_id_of, truth

REPO = pathlib.Path(__file__).resolve().parent.parent
SPDP_WRITER = "0x000100c2"
PB, DG = 7400, 250


def tshark_fields(capture, display_filter, *fields):
    cmd = ["tshark", "-r", str(capture), "-Y", display_filter, "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=|"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=300).stdout
    return [line.split("\t") for line in out.splitlines() if line.strip()]


def domains_by_prefix(capture) -> dict[str, int]:
    """GUID prefix -> domain, from the destination port of each participant's SPDP datagrams (tshark)."""
    out: dict[str, set[int]] = {}
    for prefix, dport, dst in tshark_fields(capture, f"rtps.sm.wrEntityId == {SPDP_WRITER} && ip.dst == 239.255.0.1", "rtps.guidPrefix.src", "udp.dstport", "ip.dst"):
        prefix = prefix.split("|")[0].replace(":", "").lower()
        off = int(dport) - PB
        assert off >= 0 and off % DG == 0, (prefix, dport)
        out.setdefault(prefix, set()).add(off // DG)
    for p, ds in out.items():
        assert len(ds) == 1, (p, ds)
    return {p: ds.pop() for p, ds in out.items()}


def lab_run(ddscope, out, scenario, *extra):
    """`ddscope lab run`; checks that nothing of this run (its id) is left behind. Other runs on a
    shared machine may come and go meanwhile, so processes are matched by run id."""
    need_root()
    cp = ddscope("lab", "run", scenario, "--out", out, *extra, check=False, timeout=600)
    assert cp.returncode == 0, f"lab run failed ({cp.returncode}):\n{cp.stdout}\n{cp.stderr}"
    rid = run_id_of(cp.stderr)
    assert not lab_namespaces(rid), lab_namespaces(rid)
    left = {pid: cmd for pid, cmd in lab_processes().items() if f"--run-id {rid} " in cmd}
    assert not left, left
    return cp


def rows_csv(ddscope, *args):
    cp = ddscope(*args, "--format", "csv")
    return list(csv.DictReader(io.StringIO(cp.stdout)))


@pytest.fixture(scope="module")
def two_domain_capture(tmp_path_factory):
    """ddsperf pub + sub in domain 0 and in domain 5 (same topics, same types) in a private network namespace, captured on lo."""
    need_root()
    ns = f"ddsdom-{uuid.uuid4().hex[:8]}"
    out = tmp_path_factory.mktemp("domains") / "two.pcap"
    env = dict(os.environ, CYCLONEDDS_URI='<CycloneDDS><Domain id="any"><General><Interfaces><NetworkInterface name="lo" multicast="true"/>'
               "</Interfaces><AllowMulticast>spdp</AllowMulticast></General></Domain></CycloneDDS>")
    subprocess.run(["ip", "netns", "add", ns], check=True)
    procs = []
    try:
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True)
        dump = subprocess.Popen(["ip", "netns", "exec", ns, "tcpdump", "-i", "lo", "-U", "-w", str(out), "udp"], stderr=subprocess.PIPE)
        time.sleep(1.0)
        for d in ("0", "5"):
            for role in (["pub", "20Hz", "size", "64"], ["sub"]):
                procs.append(subprocess.Popen(["ip", "netns", "exec", ns, "ddsperf", "-D", "4", "-i", d, *role], env=env,
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for p in procs:
            p.wait(timeout=30)
        time.sleep(0.5)
        dump.terminate()
        dump.wait(timeout=10)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        subprocess.run(["ip", "netns", "del", ns], check=False)
    assert out.stat().st_size > 10_000
    return out


def test_two_ddsperf_domains_stay_apart(ddscope, two_domain_capture):
    cap = two_domain_capture
    oracle = domains_by_prefix(cap)
    assert sorted(set(oracle.values())) == [0, 5], oracle
    # which participants (GUID prefixes) write the data topic, per tshark
    rows = rows_csv(ddscope, "topics", cap, "--by", "writer")
    data = [r for r in rows if r["topic_name"] == "DDSPerfRDataKS"]
    assert len(data) == 2, [(r["topic_name"], r["domain"]) for r in rows]
    for r in data:
        prefix = r["writer_id"][:24]
        assert int(r["domain"]) == oracle[prefix], (r["writer_id"], r["domain"], oracle)
    # per topic: one row per domain, each with its own writer, samples and readers
    by_topic = [r for r in rows_csv(ddscope, "topics", cap) if r["topic_name"] == "DDSPerfRDataKS"]
    assert sorted(int(r["domain"]) for r in by_topic) == [0, 5]
    for r in by_topic:
        assert r["writers"] == "1" and int(r["samples"]) > 20, r
        assert int(r["readers"]) >= 1, r
    # the same samples as tshark counts per domain (DATA to the data topic's writer, by GUID prefix)
    writers = {r["writer_id"] for r in data}
    sn_by_writer: dict[str, set[int]] = {w: set() for w in writers}
    for prefix, wr, sn in tshark_fields(cap, "rtps.sm.id == 0x15", "rtps.guidPrefix.src", "rtps.sm.wrEntityId", "rtps.sm.seqNumber"):
        pre = prefix.split("|")[0].replace(":", "").lower()
        for w, s in zip(wr.split("|"), sn.split("|")):
            g = pre + format(int(w, 16), "08x")
            if g in sn_by_writer:
                sn_by_writer[g].add(int(s))
    for r in by_topic:
        w = next(x for x in data if x["domain"] == r["domain"])["writer_id"]
        assert int(r["samples"]) == len(sn_by_writer[w]), (r["domain"], r["samples"], len(sn_by_writer[w]))
    # --domain keeps one domain, in topics and dissect
    only5 = rows_csv(ddscope, "topics", cap, "--domain", "5")
    assert only5 and all(r["domain"] == "5" for r in only5)
    ev = rows_csv(ddscope, "dissect", cap, "--domain", "0", "--kind", "DATA", "--topic", "DDSPerfRDataKS")
    assert ev and all(r["domain"] == "0" for r in ev)
    assert len({r["writer_id"] for r in ev}) == 1
    # participants in JSON carry the inferred domain and where it came from
    doc = json.loads(ddscope("topics", cap, "--format", "json").stdout)
    parts = {p["guid_prefix"].replace(":", "").lower(): p for p in doc["captures"][0]["participants"]}
    for prefix, d in oracle.items():
        assert parts[prefix]["domain"] == d, parts[prefix]
        assert parts[prefix]["domain_from"] in ("multicast_locator", "spdp_destination", "pid_domain_id")


def test_relay_bridges_two_domains(ddscope, tmp_path):
    """The lab's relay reads /scan in domain 0 on pc2 and republishes /scan_bridged in domain 5 to pc3."""
    out = tmp_path / "out"
    lab_run(ddscope, out, REPO / "examples" / "lab" / "two-domains-relay.toml", "--duration", "3s")
    # tshark: the bridge host's capture has SPDP of both domains, and the bridge's two participants
    on_pc2 = domains_by_prefix(out / "pc2.pcapng")
    assert set(on_pc2.values()) == {0, 5}, on_pc2
    rows = rows_csv(ddscope, "topics", out / "pc2.pcapng", "--by", "writer")
    dom = {r["topic_name"]: int(r["domain"]) for r in rows}
    assert dom["/scan"] == 0 and dom["/scan_bridged"] == 5, dom  # /odom goes pc1 -> pc3, not through pc2
    for r in rows:
        assert int(r["domain"]) == on_pc2[r["writer_id"][:24]], r
    # latency: both hops, apart by domain, every published sample delivered
    doc = json.loads(ddscope("latency", out, "--format", "json").stdout)
    flows = {(f["topic"], f["sender"], f["receiver"]): f for f in doc["flows"]}
    assert flows[("/scan", "pc1", "pc2")]["domain"] == 0
    assert flows[("/scan_bridged", "pc2", "pc3")]["domain"] == 5
    assert flows[("/odom", "pc1", "pc3")]["domain"] == 5
    pub, rcv = truth(out)
    n_scan = sum(1 for r in pub.values() if r["topic"] == "/scan")
    n_bridged = sum(1 for r in pub.values() if r["topic"] == "/scan_bridged")
    assert n_scan > 30 and n_bridged == n_scan
    assert flows[("/scan", "pc1", "pc2")]["delivered"] == n_scan
    assert flows[("/scan_bridged", "pc2", "pc3")]["delivered"] == n_bridged
    for f in flows.values():
        assert f["lost"] == 0, f
    # the relay hop is attributed: each bridged sample names the /scan sample it came from (ground truth),
    # and the bridge's time (receive of /scan -> publish of /scan_bridged) is at least its 1 ms compute
    recv_scan = {}
    for (node, guid, seq), rs in rcv.items():
        if node == "bridge" and rs[0]["topic"] == "/scan":
            recv_scan[(guid, seq)] = min(r["t_ns"] for r in rs)
    bridged = [r for r in pub.values() if r["topic"] == "/scan_bridged"]
    for r in bridged:
        src = (r["src_writer_guid"], r["src_seq"])
        assert src in recv_scan, r
        assert r["t_ns"] - recv_scan[src] >= 1_000_000, (r, recv_scan[src])
    # --domain 5 keeps the domain-5 hop only
    only5 = json.loads(ddscope("latency", out, "--format", "json", "--domain", "5").stdout)
    assert {f["topic"] for f in only5["flows"]} == {"/scan_bridged", "/odom"}
    # a reader in another domain than its topic's writers is refused with one line
    bad = tmp_path / "bad.toml"
    text = (REPO / "examples" / "lab" / "two-domains-relay.toml").read_text()
    bad.write_text(text.replace('host = "pc1"\ndomain = 0', 'host = "pc1"\ndomain = 5', 1))
    assert bad.read_text() != text
    cp = ddscope("lab", "run", bad, "--out", tmp_path / "bad-out", check=False)
    assert cp.returncode != 0 and "readers must be in the writers' domain" in cp.stderr, cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1, cp.stderr


def test_report_bins_start_at_zero(ddscope, tmp_path):
    """Payload and wire bandwidth bins of a short run start at t >= 0 and are drawn as steps (no ramp)."""
    # a short run (2 s): before the fix, 1 s bins started before the first frame and drew two points
    out = tmp_path / "out"
    lab_run(ddscope, out, REPO / "examples" / "lab" / "two-domains-relay.toml", "--duration", "2s")
    html = tmp_path / "r.html"
    ddscope("report", out, "--html", html)
    text = html.read_text()
    start = text.index("window.DDSCOPE_REPORT = ") + len("window.DDSCOPE_REPORT = ")
    doc = json.loads(text[start:text.index(";</script>", start)])
    seen = 0
    for t in doc["topics"]:
        for flows in t["runs"].values():
            for f in flows:
                pts = f["payload_bandwidth"]
                if not pts:
                    continue
                seen += 1
                assert all(p[0] >= 0 for p in pts), pts[:4]
                assert len(pts) >= 20, len(pts)  # ~100 bins over 2-3 s, not 2 one-second points
                # steps: pairs of points with the same value
                for a, b in zip(pts[0::2], pts[1::2]):
                    assert a[1] == b[1] and b[0] > a[0]
    assert seen >= 2
    for bw in doc["runs"][0]["bandwidth"]:
        assert bw["points"] and all(p[0] >= 0 for p in bw["points"])


def test_live_and_agent_keep_to_one_domain(ddscope, tmp_path):
    """`live --domain 5` and `agent --domain 5` on a link where ddsperf runs in domains 0 and 5
    (oracle: the domain each ddsperf was started in, -i); `live` without the option shows both."""
    need_root()
    ns = f"ddsdoml-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, CYCLONEDDS_URI='<CycloneDDS><Domain id="any"><General><Interfaces><NetworkInterface name="lo" multicast="true"/>'
               "</Interfaces><AllowMulticast>spdp</AllowMulticast></General></Domain></CycloneDDS>")
    exe = ddscope_bin()
    port = free_port()
    subprocess.run(["ip", "netns", "add", ns], check=True)
    procs = []
    try:
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True)
        inns = ["ip", "netns", "exec", ns]
        live5 = subprocess.Popen(inns + [exe, "live", "-i", "lo", "--domain", "5", "--duration", "7s"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        live_all = subprocess.Popen(inns + [exe, "live", "-i", "lo", "--duration", "7s"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        agent_log = open(tmp_path / "agent.log", "w")
        agent = subprocess.Popen(inns + [exe, "agent", "-i", "lo", "--name", "h", "--domain", "5", "--export", f"prometheus=127.0.0.1:{port}", "--duration", "7s"],
                                 stdout=subprocess.DEVNULL, stderr=agent_log)
        procs += [live5, live_all, agent]
        time.sleep(1.5)
        for d in ("0", "5"):
            for role in (["pub", "20Hz", "size", "64"], ["sub"]):
                procs.append(subprocess.Popen(inns + ["ddsperf", "-D", "4", "-i", d, *role], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(4)
        metrics = subprocess.run(inns + ["curl", "-s", f"http://127.0.0.1:{port}/metrics"], capture_output=True, text=True, timeout=30).stdout
        outs = {}
        for name, p in (("live5", live5), ("live_all", live_all)):
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
            outs[name] = (out, err)
        assert agent.wait(timeout=60) == 0, (tmp_path / "agent.log").read_text()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        subprocess.run(["ip", "netns", "del", ns], check=False)

    def final_rows(out):
        """topic -> domains of the final table (the last one printed)."""
        table = out.split("ddscope live — ")[-1].splitlines()
        head = next(i for i, l in enumerate(table) if l.startswith("topic "))
        rows = {}
        for line in table[head + 1 :]:
            if not line.strip():
                break
            f = line.split()
            rows.setdefault(f[0], set()).add(f[1])
        return rows

    everything = final_rows(outs["live_all"][0])
    assert everything.get("DDSPerfRDataKS") == {"0", "5"}, outs["live_all"][0]
    only5 = final_rows(outs["live5"][0])
    assert only5.get("DDSPerfRDataKS") == {"5"}, outs["live5"][0]
    assert all(ds == {"5"} for ds in only5.values()), only5
    left = re.search(r"--domain 5: left out (\d+) submessages and (\d+) samples", outs["live5"][1])
    assert left and int(left.group(1)) > 0 and int(left.group(2)) > 0, outs["live5"][1]
    # the agent's exporter: samples of domain 5 only
    doms = set(re.findall(r'ddscope_samples_total\{[^}]*domain="(\d+)"', metrics))
    assert doms == {"5"}, metrics[:3000]
    log = (tmp_path / "agent.log").read_text()
    left = re.search(r"--domain 5: left out (\d+) submessages and (\d+) samples", log)
    assert left and int(left.group(1)) > 0 and int(left.group(2)) > 0, log
