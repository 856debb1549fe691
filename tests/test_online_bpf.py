"""The in-kernel capture filter (issue 12): equivalence and fallback.

Equivalence: ONE lab run of the simple robotic application captured twice at
once on each host: by the lab's own tcpdump (whole frames, the oracle) and by
`ddscope live --kernel-filter --write` (the eBPF socket filter leaves out the
IP fragments that carry nothing the analyses read; they are written as the
header-only frames rebuilt from what the kernel reported). The lab's
--agent hook starts the filtered capture on every host before the workload
(DDSCOPE_BIN points the hook at a wrapper that runs `live` instead of
`agent`). Oracle: `ddscope latency` and `ddscope topics` on tcpdump's files
(whole frames; those code paths are checked against tshark elsewhere) must
give exactly the rows they give on the filtered files. Two layouts: Cyclone
DDS (~10 DATA_FRAGs of 1344 B per 13.5 KB datagram, a header in almost every
IP fragment) and Fast DDS on the hop across the link (one 64 KB DATA_FRAG
per datagram, headers only in the first of 45 fragments), where the filter
must really leave fragments out.

While the captures run, the test holds a socket with SO_TIMESTAMPNS open:
the kernel then stamps every frame once (skb->tstamp, in dev_queue_xmit_nit
on transmit and netif_receive_skb on receive) and both packet sockets read
that one stamp; without it each socket takes the clock itself when the frame
reaches it and two captures of one frame differ by a few hundred ns.

Fallback: with DDSCOPE_KFILTER_FAIL set the filter cannot load; the capture
says so in one line and captures every frame.
Needs root (network namespaces, packet capture, eBPF).
"""
import csv
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

from conftest import ddscope_bin, require_tool

pytestmark = pytest.mark.usefixtures("needs_root")

# Columns that number frames in one capture file: a capture without the
# left-out fragments interleaves them differently (their count is compared).
FRAME_NUMBER_COLUMNS = {"first_frame", "last_frame", "frame"}


def wrapper(tmp_path, exe, mode="--kernel-filter"):
    """An executable the lab runs as `WRAPPER agent -i IFACE --name HOST`: a live capture with MODE."""
    # live drops root's privileges before it writes the file: a directory anyone can reach
    # (pytest's tmp_path is under 0700 directories).
    kf = pathlib.Path(tempfile.mkdtemp(prefix="ddscope-kf-"))
    kf.chmod(0o777)
    w = tmp_path / "kf-capture.sh"
    w.write_text(f"""#!/bin/sh
# $1=agent $2=-i $3=IFACE $4=--name $5=HOST; the lab's other uses of DDSCOPE_BIN go to ddscope itself
[ "$1" = agent ] || exec "{exe}" "$@"
log="{kf}/$5.log"
"{exe}" live -i "$3" {mode} --batched --write "{kf}/$5.pcapng" >"{kf}/$5.out" 2>"$log" &
pid=$!
trap 'kill -INT $pid' INT TERM
for i in $(seq 100); do grep -q "in-kernel" "$log" && break; sleep 0.1; done
echo "capturing on $3: $(head -1 "$log")" >&2
wait $pid
wait $pid
""")
    w.chmod(0o755)
    return kf


def latency_rows(ddscope, out, *captures):
    ddscope("latency", *captures, "--format", "csv", "-o", out)
    with open(out) as f:
        rows = list(csv.DictReader(f))
    return [{k: v for k, v in r.items() if k not in FRAME_NUMBER_COLUMNS} for r in rows]


def topic_rows(ddscope, capture):
    doc = json.loads(ddscope("topics", capture, "--format", "json", "--all").stdout)
    rows = doc["topics"] if isinstance(doc, dict) and "topics" in doc else doc
    return [{k: v for k, v in r.items() if k not in ("capture", "file")} for r in rows]


@pytest.mark.parametrize("mode", ["--kernel-filter", "--kernel-records"])
@pytest.mark.parametrize("layout", ["cyclone", "fastdds"])
def test_filtered_capture_gives_the_same_rows_as_full_frames(ddscope, repo, tmp_path, layout, mode):
    """Both in-kernel modes; records mode: the capture socket receives only
    discovery and non-RTPS frames, every other frame is rebuilt from the
    kernel's record of it (time, length, the bytes the analyses read)."""
    exe = ddscope_bin()
    kf = wrapper(tmp_path, exe, mode)
    try:
        check_equivalence(ddscope, repo, tmp_path, layout, exe, kf, mode)
    finally:
        shutil.rmtree(kf, ignore_errors=True)


def check_equivalence(ddscope, repo, tmp_path, layout, exe, kf, mode):
    run = tmp_path / "run"
    extra = ["--vendor", "filter=fastdds"] if layout == "fastdds" else []
    env = dict(os.environ, DDSCOPE_BIN=str(tmp_path / "kf-capture.sh"))
    # One stamp per frame for every packet socket (see the module's docstring).
    stamp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    stamp.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_TIMESTAMPNS", 35), 1)  # 35: Linux (asm-generic)
    try:
        cp = subprocess.run([exe, "lab", "run", str(repo / "examples/lab/simple-robotic.toml"), "--duration", "4s",
                             "--out", str(run), "--quiet", "--agent", "", *extra],
                            capture_output=True, text=True, env=env, timeout=600)
    finally:
        stamp.close()
    if cp.returncode != 0:
        # On a loaded machine the workload may miss its nominal rates, which the lab reports as a
        # failed run; the captures are still one run's, which is all this test compares.
        m = re.search(r"run failed: (.*) \(all in", cp.stderr)
        items = m.group(1).split("; ") if m else []
        assert items and all(re.search(r"published at|on the wire|received|lost", i) for i in items), \
            f"lab run failed:\n{cp.stdout}\n{cp.stderr}"
    logs = {h: (kf / f"{h}.log").read_text() for h in ("pc1", "pc2")}
    for h, log in logs.items():
        assert ("in-kernel records attached" if mode == "--kernel-records" else "in-kernel filter attached") in log, log
        assert "dropped 0" in log, log  # nothing lost to ring overflow in either capture

    # Latency rows: both hosts, every sample, every column but frame numbers
    # (the captures alone, in directories of their own, without the lab's ground truth).
    full_dir = tmp_path / "full"
    full_dir.mkdir()
    for h in ("pc1", "pc2"):
        (full_dir / f"{h}.pcapng").symlink_to(run / f"{h}.pcapng")
    full = latency_rows(ddscope, tmp_path / "full.csv", full_dir / "pc1.pcapng", full_dir / "pc2.pcapng")
    filt = latency_rows(ddscope, tmp_path / "kf.csv", kf / "pc1.pcapng", kf / "pc2.pcapng")
    assert len(full) >= 30, f"only {len(full)} latency rows"
    assert any(r["topic_name"] == "/image" and r["status"] == "delivered" for r in full)
    key = lambda r: json.dumps(r, sort_keys=True)
    full.sort(key=key)
    filt.sort(key=key)
    assert len(full) == len(filt)
    for a, b in zip(full, filt):
        assert a == b, f"full frames {a}\nfiltered    {b}"

    # Topic tables of each host, over the span both captures cover: the lab stops its
    # tcpdump before its agents, which then still see the participants leave
    # (unregistering discovery samples). editcap (Wireshark's) cuts the filtered
    # capture at the last frame of tcpdump's.
    for h in ("pc1", "pc2"):
        last = subprocess.run([require_tool("tshark"), "-r", str(run / f"{h}.pcapng"), "-T", "fields", "-e", "frame.time_epoch"],
                              capture_output=True, text=True, check=True).stdout.split()[-1]
        sec, frac = last.split(".")
        ns = int(frac.ljust(9, "0")[:9]) + 1
        sec = int(sec) + ns // 1_000_000_000
        stop = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)) + f".{ns % 1_000_000_000:09d}Z"
        cut = tmp_path / f"{h}-kf-cut.pcapng"
        subprocess.run([require_tool("editcap"), "-B", stop, str(kf / f"{h}.pcapng"), str(cut)], check=True)
        a, b = topic_rows(ddscope, run / f"{h}.pcapng"), topic_rows(ddscope, cut)
        diff = [{k: (x.get(k), y.get(k)) for k in x.keys() | y.keys() if x.get(k) != y.get(k)} | {"writer_id": x.get("writer_id")}
                for x, y in zip(a, b) if x != y]
        assert a and len(a) == len(b) and not diff, f"{h}: (full frames, filtered) {diff}"

    if mode == "--kernel-records":
        for h, log in logs.items():
            c = records_counts(log)
            received = int(re.search(r"kernel: received (\d+)", log).group(1))
            # Every user-data frame came as a record, with its kernel timestamp; the socket
            # received only discovery and the like (and the frames before the program was attached).
            assert c["records"] > 2000 and c["no_tstamp"] == 0, log
            assert received <= c["passed"] + 50 and received * 5 < c["records"], log
            assert "0 bad records" in log and "0 for a full record ring" in log, log
        return
    left = {h: int(re.search(r"(\d+) fragments left out", log).group(1)) for h, log in logs.items()}
    # Neither layout leaves anything out (see docs/online.md): Cyclone has a header in
    # almost every IP fragment, Fast DDS ends each 64 KB datagram with a vendor-specific
    # submessage, and user space reads a datagram's headers from contiguous bytes.
    # The filter must have followed these datagrams to their end all the same.
    done = {h: int(re.search(r"(\d+) datagrams followed to the end", log).group(1)) for h, log in logs.items()}
    assert min(done.values()) > 100, done
    assert left == {"pc1": 0, "pc2": 0}, left


@pytest.mark.parametrize("mode", ["--kernel-filter", "--kernel-records"])
def test_filter_that_cannot_load_falls_back_with_one_line(ddscope, tmp_path, mode):
    """Oracle: the number of datagrams this test sends; the capture without the
    filter writes every frame of them, and the notice is one line."""
    env = dict(os.environ, DDSCOPE_KFILTER_FAIL="1")
    ns = f"ddkf-{os.getpid()}"
    out = pathlib.Path(tempfile.mkdtemp(prefix="ddscope-kf-"))
    out.chmod(0o777)
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        live = subprocess.Popen(["ip", "netns", "exec", ns, ddscope_bin(), "live", "-i", "lo", mode, "--batched",
                                 "--write", str(out / "lo.pcapng")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        first = live.stderr.readline()
        time.sleep(0.3)
        subprocess.run(["ip", "netns", "exec", ns, "python3", "-c",
                        "import socket\nr=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\nr.bind(('127.0.0.1', 7411))\n"
                        "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
                        "for i in range(20): s.sendto(b'x'*100, ('127.0.0.1', 7411))"], check=True)
        time.sleep(0.3)
        live.send_signal(2)
        rest = live.communicate(timeout=30)[1]
        wrote = re.search(r"wrote (\d+) frames", rest)
        assert live.returncode == 0, first + rest
    finally:
        subprocess.run(["ip", "netns", "del", ns])
        shutil.rmtree(out, ignore_errors=True)
    what = "records" if mode == "--kernel-records" else "filter"
    assert first.strip() == f"live: in-kernel {what} not used (loading disabled by DDSCOPE_KFILTER_FAIL); capturing every frame"
    assert "in-kernel" not in rest, rest
    assert wrote and int(wrote.group(1)) == 20, rest


SENDER = r"""
import socket, struct, sys, time
n, size = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
prefix = bytes.fromhex("010f00000000000000000001")
for sn in range(1, n + 1):
    hdr = b"RTPS" + bytes([2, 3, 1, 15]) + prefix
    info_ts = struct.pack("<BBH", 0x09, 0x01, 8) + struct.pack("<II", int(time.time()), 0)
    fixed = struct.pack("<HH", 0, 28) + bytes.fromhex("00000104") + bytes.fromhex("00000103")
    fixed += struct.pack("<iI", 0, sn) + struct.pack("<IHHI", 1, 1, size, size)
    payload = b"\x00\x01\x00\x00" + bytes(size - 4)
    data_frag = struct.pack("<BBH", 0x16, 0x01, len(fixed) + len(payload)) + fixed + payload
    s.sendto(hdr + info_ts + data_frag, (sys.argv[3], 7411))
    time.sleep(0.02)
"""


def veth_capture(tmp_path, mode, count, size, tag):
    """Sends `count` RTPS datagrams of one `size`-byte DATA_FRAG (SENDER) over a
    veth pair, captured at once by tcpdump (whole frames) and by `live MODE`.
    Returns (tcpdump's file, live's file, live's stderr, the directory to remove)."""
    tcpdump = require_tool("tcpdump")
    a, b = f"ddkf-a-{tag}", f"ddkf-b-{tag}"
    kf = pathlib.Path(tempfile.mkdtemp(prefix="ddscope-kf-"))
    kf.chmod(0o777)
    procs = []
    stamp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    stamp.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_TIMESTAMPNS", 35), 1)
    try:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "add", ns], check=True)
        subprocess.run(["ip", "link", "add", "kfa", "netns", a, "type", "veth", "peer", "name", "kfb", "netns", b], check=True)
        for ns, dev, ip in ((a, "kfa", "10.213.7.1/24"), (b, "kfb", "10.213.7.2/24")):
            subprocess.run(["ip", "-n", ns, "addr", "add", ip, "dev", dev], check=True)
            subprocess.run(["ip", "-n", ns, "link", "set", dev, "up", "mtu", "1500"], check=True)
        full = tmp_path / "full.pcap"
        td = subprocess.Popen(["ip", "netns", "exec", a, tcpdump, "-i", "kfa", "-U", "--immediate-mode", "-B", "8192", "--time-stamp-precision=nano",
                               "-w", str(full)], stderr=subprocess.PIPE, text=True)
        procs.append(td)
        lv = subprocess.Popen(["ip", "netns", "exec", a, ddscope_bin(), "live", "-i", "kfa", mode, "--batched",
                               "--write", str(kf / "kf.pcapng")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        procs.append(lv)
        assert "listening on" in td.stderr.readline()
        first = lv.stderr.readline()
        assert re.search(r"in-kernel (filter|records) attached", first), first
        time.sleep(0.5)
        subprocess.run(["ip", "netns", "exec", a, "python3", "-c", SENDER, str(count), str(size), "10.213.7.2"], check=True, timeout=60)
        time.sleep(1.5)  # both have written everything before they are stopped
        for p in (lv, td):
            p.send_signal(2)
        lv_err = lv.communicate(timeout=30)[1]
        td.communicate(timeout=30)
        assert lv.returncode == 0, lv_err
    finally:
        stamp.close()
        for p in procs:
            if p.poll() is None:
                p.kill()
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)
    return full, kf / "kf.pcapng", lv_err, kf


def writer_rows(ddscope, cap):
    return [{k: v for k, v in r.items() if k != "capture"}
            for r in json.loads(ddscope("topics", cap, "--by", "writer", "--format", "json", "--all").stdout)["topics"]]


def test_left_out_fragments_keep_every_figure(ddscope, tmp_path):
    """RTPS datagrams whose only DATA_FRAG header sits in the first IP fragment
    (the layout the filter saves most on: 30 KB, 21 fragments, 19 of them
    payload only) sent over a veth pair, captured at once by tcpdump (whole
    frames, the oracle) and by `live --kernel-filter`: the per-writer tables
    (samples, bytes, IP fragments per sample, first/last times) are equal and
    the filter left fragments out."""
    full, filtered, lv_err, kf = veth_capture(tmp_path, "--kernel-filter", 40, 30000, f"{os.getpid() % 100000}")
    try:
        left = int(re.search(r"(\d+) fragments left out", lv_err).group(1))
        assert left >= 40 * 19, lv_err  # 19 payload-only fragments of each of the 40 datagrams
        x, y = writer_rows(ddscope, full), writer_rows(ddscope, filtered)
        assert x == y, f"tcpdump {x}\nfiltered {y}"
        mine = [r for r in x if r["samples"] == 40]
        assert mine and mine[0]["ip_frags_per_sample"] == 21 and mine[0]["mean_sample_size"] == 30000, x
    finally:
        shutil.rmtree(kf, ignore_errors=True)


def frame_list(cap):
    """Every IPv4 UDP frame's time (ns, as written), length on the wire and IP fragment offset, by tshark
    (the two captures start at different moments: other frames may be in one file only)."""
    out = subprocess.run([require_tool("tshark"), "-r", str(cap), "-Y", "ip.proto == 17", "-T", "fields", "-e", "frame.time_epoch",
                          "-e", "frame.len", "-e", "ip.frag_offset", "-o", "ip.defragment:FALSE"],
                         capture_output=True, text=True, check=True).stdout
    return sorted(tuple(line.split("\t")) for line in out.splitlines() if line)


def records_counts(err):
    m = re.search(r"in-kernel records: (\d+) frames examined, (\d+) rebuilt from records, (\d+) passed whole \((\d+) without a kernel timestamp", err)
    assert m, err
    return dict(zip(("frames", "records", "passed", "no_tstamp"), map(int, m.groups())))


@pytest.mark.parametrize("size", [30000, 600])
def test_records_give_every_frame_its_time_and_figures(ddscope, tmp_path, size):
    """Records mode on a veth pair: 40 RTPS datagrams (30 KB in 21 IP fragments,
    or 600 B unfragmented) captured at once by tcpdump (whole frames, the
    oracle) and by `live --kernel-records`, which receives none of these frames
    through its socket, only the kernel's records. tshark (the oracle for
    times) lists every frame of both files with the same time to the
    nanosecond, the same length and fragment offset; the per-writer tables are
    equal; the socket received only the few frames that must pass whole."""
    full, rec, lv_err, kf = veth_capture(tmp_path, "--kernel-records", 40, size, f"r{os.getpid() % 10000}{size % 7}")
    try:
        c = records_counts(lv_err)
        frags = 21 if size == 30000 else 1
        assert c["records"] >= 40 * frags and c["no_tstamp"] == 0, lv_err
        received = int(re.search(r"kernel: received (\d+)", lv_err).group(1))
        # The socket got only what passed whole (IPv6 neighbour discovery and the like; a few
        # frames before the program was attached), none of the 40 datagrams' frames.
        assert c["passed"] <= received <= c["passed"] + 5 and received < 30, lv_err
        x, y = frame_list(full), frame_list(rec)
        assert len(x) >= 40 * frags and x == y, f"tcpdump {len(x)} frames, records {len(y)}: {set(x) ^ set(y)}"
        rx, ry = writer_rows(ddscope, full), writer_rows(ddscope, rec)
        assert rx == ry, f"tcpdump {rx}\nrecords {ry}"
        mine = [r for r in rx if r["samples"] == 40]
        assert mine and mine[0]["ip_frags_per_sample"] == frags, rx
    finally:
        shutil.rmtree(kf, ignore_errors=True)


def test_program_run_time_is_reported_when_the_kernel_measures_it(ddscope, tmp_path):
    """With kernel.bpf_stats_enabled=1 the kernel times every run of the
    attached program (oracle: the kernel's own run_cnt / run_time_ns, read by
    ddscope from /proc/self/fdinfo): the closing line gives the mean time per
    frame over at least every frame tcpdump saw of the 40 datagrams (tshark's
    count), and says nothing of it while the kernel does not measure."""
    knob = pathlib.Path("/proc/sys/kernel/bpf_stats_enabled")
    before = knob.read_text().strip()
    for d in ("on", "off"):
        (tmp_path / d).mkdir()
    try:
        knob.write_text("1\n")
        full, rec, lv_err, kf = veth_capture(tmp_path / "on", "--kernel-records", 40, 30000, f"s{os.getpid() % 10000}")
        shutil.rmtree(kf, ignore_errors=True)
        m = re.search(r"program: (\d+) ns per frame over (\d+) frames \(kernel.bpf_stats_enabled\)", lv_err)
        assert m, lv_err
        ns, runs = int(m.group(1)), int(m.group(2))
        assert runs >= len(frame_list(full)) >= 40 * 21 and 0 < ns < 1_000_000, lv_err
        knob.write_text("0\n")
        _, _, lv_err, kf = veth_capture(tmp_path / "off", "--kernel-records", 4, 600, f"t{os.getpid() % 10000}")
        shutil.rmtree(kf, ignore_errors=True)
        assert "in-kernel records:" in lv_err and "program:" not in lv_err, lv_err
    finally:
        knob.write_text(before + "\n")
