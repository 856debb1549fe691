"""The README's "On your two hosts" runs on the bundled data as written (issue 38): every line of
the block marked `bundled-data` is run by bash, in a fresh folder beside the repository's
examples, with `ddscope` the built binary. A line that fails, or an output it names that is not
written, fails the test. Oracles: the bundled run's own ground truth and babeltrace2-checked
traces are tested elsewhere (test_lab_ros2); here, that the user's path works and says what it
should: the cross-host table has the ROS 2 layers from the traces, the report is written, flows
finds the iperf3 stream the run's iperf3 client reported."""
from __future__ import annotations

import json
import re
import subprocess

from conftest import REPO, ddscope_bin

README = REPO / "README.md"


def bundled_block() -> list[str]:
    text = README.read_text()
    marker = text.index("<!-- bundled-data:")
    block = text[marker:].split("```sh\n", 1)[1].split("```", 1)[0]
    return [l for l in block.splitlines() if l.strip() and not l.lstrip().startswith("#")]


def test_on_your_two_hosts_runs_on_the_bundled_data(tmp_path):
    lines = bundled_block()
    assert lines[0].startswith("E=examples/captures/") and len(lines) >= 5, lines
    (tmp_path / "examples").symlink_to(REPO / "examples")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "ddscope").symlink_to(ddscope_bin())
    outs = {}
    env_prefix = f'export PATH="{bindir}:$PATH"; set -e; {lines[0]}; '
    for k, line in enumerate(lines[1:]):
        cp = subprocess.run(["bash", "-c", env_prefix + line], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert cp.returncode == 0, f"README line failed ({cp.returncode}): {line}\n{cp.stderr[-2000:]}"
        outs[line.split("#")[0].strip()] = cp
        for written in re.findall(r"--html (\S+)", line):
            assert (tmp_path / written).stat().st_size > 10_000, written
    run = REPO / lines[0].split("=", 1)[1]
    # the cross-host table with the traces' ROS 2 layers beside the wire's
    lat = next(cp for l, cp in outs.items() if l.startswith("ddscope latency") and "--trace" in l)
    image = [l.split() for l in lat.stdout.splitlines() if l.startswith("/image ")]
    layers = {r[3] for r in image if r[1:3] == ["pc1", "pc2"]}
    assert {"ros_e2e", "ros_publish", "dds_send", "message", "dds_receive", "callback"} <= layers, layers
    # flows: the iperf3 stream the run's client sent, every datagram delivered. iperf3 opens a UDP
    # test with one datagram of its own (UDP_CONNECT_MSG, iperf_udp.c), which the server answers
    # (UDP_CONNECT_REPLY): the client's count of data packets plus that one, and the one back.
    client = json.loads((run / "logs" / "iperf3-0-client.json").read_text())
    sent = client["end"]["sum"]["packets"]
    fl = next(cp for l, cp in outs.items() if l.startswith("ddscope flows"))
    rows = [l.split() for l in fl.stdout.splitlines() if l.split() and ":5201" in l]
    iperf = [r for r in rows if r[1].endswith(":5201") and r[2:4] == ["pc1", "pc2"]]
    assert len(iperf) == 1 and int(iperf[0][4]) == int(iperf[0][5]) == sent + 1 and int(iperf[0][6]) == 0, (iperf, sent)
    back = [r for r in rows if r[0].endswith(":5201") and r[2:4] == ["pc2", "pc1"]]
    assert len(back) == 1 and int(back[0][4]) == 1, back
