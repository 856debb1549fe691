"""`network.tc_probe`: lab/bpf/tc_probe.c at clsact ingress and egress of every host's link.

Oracle: tshark's count of the frames in the lab's own captures (the packet socket sees a
frame sent after the tc egress hook and a frame received before the tc ingress hook, so
without drops both count the same frames, apart from the few sent while the host was set
up, before its capture started)."""
import json
import subprocess

from conftest import REPO, have_root, require_tool

SCENARIO = (REPO / "examples/lab/simple-robotic.toml").read_text()


def frames_from(capture, mac_field, mac):
    tshark = require_tool("tshark")
    out = subprocess.run([tshark, "-r", str(capture), "-Y", f"{mac_field} == {mac}", "-T", "fields", "-e", "frame.number"],
                         capture_output=True, text=True, check=True).stdout
    return len(out.split())


def test_tc_probe_counts_what_the_captures_hold(ddscope, tmp_path):
    assert have_root(), "the lab tests need root (network namespaces, tc eBPF); CI runs as root"
    assert "\n[network]\n" in SCENARIO
    sc = tmp_path / "probe.toml"
    sc.write_text(SCENARIO.replace("\n[network]\n", "\n[network]\ntc_probe = true\n", 1))
    out = tmp_path / "run"
    ddscope("lab", "run", sc, "--duration", "2s", "--out", out, "-q")
    run = json.loads((out / "run.json").read_text())
    probe = {(p["host"], p["hook"]): p for p in run["network"]["ebpf"]["probe"]}
    assert set(probe) == {("pc1", "egress"), ("pc1", "ingress"), ("pc2", "egress"), ("pc2", "ingress")}
    macs = {h["name"]: h["mac"] for h in run["network"]["hosts"]}
    assert not any(d["rx_dropped"] + d["tx_dropped"] + d["qdisc_dropped"] for d in run["network"]["kernel_drops"])
    for host, other in (("pc1", "pc2"), ("pc2", "pc1")):
        cap = out / f"{host}.pcapng"
        sent = frames_from(cap, "eth.src", macs[host])
        got = frames_from(cap, "eth.src", macs[other])
        assert sent > 50 and got > 50, (host, sent, got)
        assert 0 <= probe[(host, "egress")]["frames"] - sent <= 10, (host, probe[(host, "egress")], sent)
        # what arrived after the capture started; the other host's few early frames may precede it
        assert 0 <= probe[(host, "ingress")]["frames"] - got <= 10, (host, probe[(host, "ingress")], got)
    # /image crosses pc1 -> pc2 as IP fragments: the probe told first fragments from later ones
    assert probe[("pc1", "egress")]["ipv4_later_fragments"] > 1000
    assert probe[("pc1", "egress")]["bytes"] > 2_764_852 * 10
