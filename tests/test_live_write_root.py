"""The documented `sudo ddscope live -i IF --write now.pcapng` writes
now.pcapng (issue 23, item 5): the capture file is created as root under a
hidden temporary name, `live` drops to `nobody`, and the rename into place
used to run after the drop and fail (exit 1, the capture left in a hidden
root-owned temporary file). A helper forked while still root renames it.

Run as root on a veth pair in a scratch network namespace of its own (a
unique name, deleted afterwards); frames are sent out of the peer through an
AF_PACKET socket. Oracles: the file system (the file at its name, owned by
root, nothing hidden left beside it), the pcapng's own blocks (walked here:
section header, interface, and one enhanced packet block per frame), and the
kernel's view of the capturing process (every thread's bounding set).
"""
import os
import re
import signal
import socket
import struct
import subprocess
import threading
import time

import pytest

from conftest import ddscope_bin


@pytest.fixture
def veth_ns(needs_root):
    name = f"ddlw-{os.getpid() % 100000}-{os.urandom(2).hex()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "add", "lwa", "type", "veth", "peer", "name", "lwb"], check=True)
        for dev in ("lwa", "lwb", "lo"):
            subprocess.run(["ip", "-n", name, "link", "set", dev, "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


SENDER = """
import socket, struct, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("lwb", 0))
eth = b"\\xff" * 6 + b"\\x02\\x00\\x00\\x00\\x00\\x02" + b"\\x08\\x00"
payload = b"RTPS" + b"\\x00" * 60
udp = struct.pack(">HHHH", 7410, 7411, 8 + len(payload), 0) + payload
ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0, bytes([10, 77, 0, 2]), bytes([10, 77, 0, 1]))
end = time.time() + float(sys.argv[1])
n = 0
while time.time() < end:
    s.send(eth + ip + udp)
    n += 1
    time.sleep(0.005)
print(n)
"""


def pcapng_packets(path):
    """Enhanced packet blocks in a pcapng file (little-endian, as ddscope writes it)."""
    data = open(path, "rb").read()
    assert data[:4] == b"\x0a\x0d\x0d\x0a", data[:16]
    off, n = 0, 0
    while off + 12 <= len(data):
        btype, blen = struct.unpack_from("<II", data, off)
        assert blen >= 12 and off + blen <= len(data), (off, btype, blen)
        n += btype == 6
        off += blen
    assert off == len(data), "a whole number of blocks"
    return n


def hidden(d):
    return [p for p in os.listdir(d) if p.startswith(".") and "ddscope" in p]


def start_live(ns, out, tmp_path, *extra):
    err = open(tmp_path / "live.err", "w")
    return subprocess.Popen(["ip", "netns", "exec", ns, ddscope_bin(), "live", "-i", "lwa", "--write", str(out), *extra],
                            stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)


def test_live_as_root_writes_its_file_at_its_name(veth_ns, tmp_path):
    out_dir = tmp_path / "out"
    out_dir.mkdir(mode=0o755)
    assert os.stat(out_dir).st_uid == 0  # a directory `nobody` may not write to
    out = out_dir / "now.pcapng"
    live = start_live(veth_ns, out, tmp_path, "--duration", "4s")
    time.sleep(1.0)
    # The capturing process's every thread has the cleared bounding set (item 13, for live too).
    pid = next(int(p) for p in os.listdir("/proc") if p.isdigit() and _cmd(p).startswith(f"{ddscope_bin()}\0live\0-i\0lwa"))
    for t in os.listdir(f"/proc/{pid}/task"):
        st = open(f"/proc/{pid}/task/{t}/status").read()
        assert int(re.search(r"^CapBnd:\t(\w+)$", st, re.M).group(1), 16) == (1 << 12) | (1 << 13), (t, st)
        assert re.search(r"^Uid:\t65534\t", st, re.M), "the capture runs as nobody"
    sent = subprocess.run(["ip", "netns", "exec", veth_ns, "python3", "-c", SENDER, "2"], capture_output=True, text=True, check=True)
    n_sent = int(sent.stdout.strip())
    assert live.wait(30) == 0, (tmp_path / "live.err").read_text()
    err = (tmp_path / "live.err").read_text()
    assert out.is_file(), f"{out} not written: {err}"
    st = os.stat(out)
    assert st.st_uid == 0, "created as root before the drop"
    frames = pcapng_packets(out)
    wrote = int(re.search(r"wrote (\d+) frames", err).group(1))
    print(f"sent {n_sent} frames; live wrote {wrote}; the file holds {frames} packets")
    assert frames == wrote and frames >= n_sent * 0.9, (frames, wrote, n_sent)
    assert hidden(out_dir) == [], hidden(out_dir)


def test_a_killed_live_leaves_no_hidden_file_and_no_partial_output(veth_ns, tmp_path):
    """SIGKILL mid-capture: the helper sees the pipe close unasked and removes the temporary file."""
    out_dir = tmp_path / "out"
    out_dir.mkdir(mode=0o755)
    out = out_dir / "now.pcapng"
    live = start_live(veth_ns, out, tmp_path)
    deadline = time.time() + 10
    while not hidden(out_dir):
        assert time.time() < deadline and live.poll() is None, (tmp_path / "live.err").read_text()
        time.sleep(0.1)
    time.sleep(0.5)
    # `ip netns exec` execs ddscope: the Popen pid is the capturing process.
    os.kill(live.pid, signal.SIGKILL)
    live.wait(10)
    deadline = time.time() + 5
    while hidden(out_dir) and time.time() < deadline:
        time.sleep(0.1)
    assert hidden(out_dir) == [] and not out.exists(), os.listdir(out_dir)


def _cmd(pid):
    try:
        return open(f"/proc/{pid}/cmdline").read()
    except OSError:
        return ""
