"""Hostile inputs of issue 35, each generated here: rmw_zenoh names from the
wire (long data keys, long liveliness tokens, a long QoS field), outputs in a
directory another user can write, deep YAML, special files and long fields
given as inputs, a long `--budget` topic.

Oracles: the generators' own construction (tests/hostile/zenoh_hostile.py
packs Zenoh 1.x and rmw_zenoh's layouts with `struct`, not with the decoder
it attacks: counts, name lengths), the kernel (peak RSS from /usr/bin/time's
wait4, file owners, modes and inodes from stat), and the exit status.
"""
from __future__ import annotations

import json
import os
import pathlib
import stat
import subprocess
import sys
import shutil
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import hostile  # noqa: E402
import zenoh_hostile  # noqa: E402
from conftest import ddscope_bin, needs_root  # noqa: E402,F401
from test_hostile import run_measured  # noqa: E402

CEILING_MB = 256  # the bound for 20 000 forged Zenoh keys or tokens
NAME_CAP = 256    # discovery.max_name_bytes
KEY_CAP = 2 * NAME_CAP


def run(args, timeout=120):
    return subprocess.run([ddscope_bin(), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def longest_line(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


# ---- 1. rmw_zenoh names from the wire get the SEDP budgets -------------------------------

def test_zenoh_long_data_keys_are_cut_and_bounded(tmp_path):
    """20 000 PUTs on distinct 60 KB data keys (two 8.7 MB .pcap.gz): `latency`
    took 7.7 GB and aborted; `topics` and `latency` now stay under 256 MB and
    every key is cut at twice the name cap with the marker giving its length."""
    n, size = 20_000, 60_000
    a, b = tmp_path / "k1.pcap.gz", tmp_path / "k2.pcap.gz"
    zenoh_hostile.generate("longkeys", n, a, b, size=size)
    out = tmp_path / "topics.json"
    code, stderr, rss = run_measured(["topics", a, "--format", "json", "-o", out])
    assert code == 0 and "panicked" not in stderr, stderr[-3000:]
    assert rss < CEILING_MB, f"topics: peak RSS {rss:.0f} MB over {CEILING_MB} MB"
    assert "Zenoh names cut at discovery.max_name_bytes" in stderr, stderr[-3000:]
    rows = json.loads(out.read_text())["topics"]
    assert len(rows) == n, len(rows)
    # The key: `0/<topic>/<type>/<hash>` with a `size`-byte topic.
    key_len = len(f"0/{'x' * size}/{zenoh_hostile.TYPE}/{zenoh_hostile.HASH}")
    for r in rows:
        assert r["topic_raw"].endswith(f"…[truncated, {key_len} bytes]"), r["topic_raw"][-60:]
        assert len(r["topic_raw"].encode()) <= KEY_CAP + 40, len(r["topic_raw"])
        assert r["topic_name"].endswith(f"…[truncated, {size + 1} bytes]"), r["topic_name"][-60:]
        assert len(r["topic_name"].encode()) <= NAME_CAP + 40
    # Distinct keys stay distinct topics (as far as their first bytes tell them apart).
    assert len({r["topic_name"][:12] for r in rows}) == n
    code, stderr, rss = run_measured(["latency", a, b])
    assert code == 0 and "panicked" not in stderr, stderr[-3000:]
    assert rss < CEILING_MB, f"latency: peak RSS {rss:.0f} MB over {CEILING_MB} MB"
    assert longest_line(stderr) < 2000, longest_line(stderr)


def test_zenoh_long_tokens_are_cut_budgeted_and_none_hidden(tmp_path):
    """20 000 publisher liveliness tokens with 20 KB namespace, node and topic:
    `topics` took 3.8 GB (2.4 GB with zenoh.max_tokens=1000). Every one is a
    user topic: a gid whose last byte reads as a builtin RTPS entity kind (one
    in four) once hid it from `topics` without --all."""
    n, size = 20_000, 20_000
    cap = tmp_path / "tokens.pcap.gz"
    zenoh_hostile.generate("longtokens", n, cap, size=size)
    out = tmp_path / "topics.json"
    code, stderr, rss = run_measured(["topics", cap, "--format", "json", "-o", out])
    assert code == 0 and "panicked" not in stderr, stderr[-3000:]
    assert rss < CEILING_MB, f"topics: peak RSS {rss:.0f} MB over {CEILING_MB} MB"
    doc = json.loads(out.read_text())
    rows = doc["topics"]
    assert len(rows) == n, f"{len(rows)} of {n} topics shown"
    assert all(r["traffic_type"] == "user" for r in rows)
    for r in rows[:50]:
        assert r["topic_name"].endswith("bytes]") and len(r["topic_name"].encode()) <= NAME_CAP + 40, r["topic_name"][-60:]
        for node in r["writer_nodes"]:
            assert len(node.encode()) <= 3 * (NAME_CAP + 40), len(node)
    z = doc["captures"][0]["decode"]["zenoh"]
    assert z["token_bytes"] <= 16 << 20, z
    assert z["names_truncated"] >= 3 * n, z
    # With a small token cap the oldest are forgotten and counted.
    code, stderr, rss = run_measured(["topics", cap, "--limit", "zenoh.max_tokens=1000"])
    assert code == 0, stderr[-3000:]
    assert rss < CEILING_MB, f"topics --limit zenoh.max_tokens=1000: peak RSS {rss:.0f} MB"
    assert f"{n - 1000} rmw_zenoh tokens (count or byte cap)" in stderr, stderr[-3000:]


def test_a_long_qos_field_is_quoted_once_and_short(tmp_path):
    cap = tmp_path / "qos.pcap"
    zenoh_hostile.generate("longtokens", 20, cap, size=50, qos_bytes=60_000)
    cp = run(["topics", cap])
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert "QoS field" in cp.stderr, cp.stderr[-3000:]
    assert longest_line(cp.stderr) < 1000, longest_line(cp.stderr)


def test_limits_lists_the_zenoh_caps():
    import tomllib
    cp = run(["limits"])
    assert cp.returncode == 0, cp.stderr
    doc = tomllib.loads(cp.stdout)
    assert doc["zenoh"]["max_tokens"] == 65536 and doc["zenoh"]["max_token_bytes"] == 16 << 20, doc["zenoh"]
    assert doc["discovery"]["max_name_bytes"] == NAME_CAP
    line = next(x for x in cp.stdout.splitlines() if x.startswith("max_name_bytes") and "Zenoh" in x)
    assert "twice" in line, line


# ---- 2. outputs nobody else can redirect --------------------------------------------------

def as_nobody(*cmd):
    subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *cmd], check=True)


def test_planted_symlinks_and_files_never_receive_the_output(needs_root, tmp_path):
    """In a world-writable directory (not sticky, as a group-writable one), `nobody` plants symlinks to a
    0600 root file at the temporary names of every PID the next runs can get
    (the old name was `.out.csv.ddscope-PID.tmp`), and a file of its own at
    others; root's `dissect -o` must leave the target untouched and write a
    regular file of its own, with the mode the umask gives."""
    cap = tmp_path / "c.pcap"
    hostile.generate("inflight", 3, cap, tmp_path / "c2.pcap")
    # (pytest's own directories are private: the shared one is a sibling in /tmp)
    shared = pathlib.Path(tempfile.mkdtemp(prefix="ddscope-shared-", dir="/tmp"))
    os.chmod(shared, 0o777)  # not sticky: the kernel's protected_symlinks does not apply
    try:
        plant_and_write(cap, shared, tmp_path)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def plant_and_write(cap, shared, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("secret\n")
    os.chmod(victim, 0o600)
    # One planting process (each process takes a PID): the next 3 000 PIDs covered.
    last = int(pathlib.Path("/proc/sys/kernel/ns_last_pid").read_text())
    plant = (
        "import os,sys\n"
        "d,v,last=sys.argv[1],sys.argv[2],int(sys.argv[3])\n"
        "os.umask(0)\n"
        "for pid in range(last+1,last+3000):\n"
        "    p=f'{d}/.out.csv.ddscope-{pid}.tmp'\n"
        "    if pid%2: os.symlink(v,p)\n"
        "    else: open(p,'w').close()\n"
    )
    as_nobody("python3", "-c", plant, str(shared), str(victim), str(last))
    # And one at the final name itself: replaced, never followed.
    as_nobody("ln", "-s", str(victim), str(shared / "out.csv"))
    old = os.umask(0o022)
    try:
        for _ in range(3):
            cp = run(["dissect", cap, "--format", "csv", "-o", shared / "out.csv"])
            assert cp.returncode == 0, cp.stderr
    finally:
        os.umask(old)
    assert victim.read_text() == "secret\n"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600
    st = os.lstat(shared / "out.csv")
    assert stat.S_ISREG(st.st_mode), "out.csv is not a regular file"
    assert st.st_uid == 0, f"out.csv owned by uid {st.st_uid}"
    assert stat.S_IMODE(st.st_mode) == 0o644, oct(st.st_mode)
    assert (shared / "out.csv").read_text().startswith("capture,")
    # Nothing of ours stays behind; what nobody planted is left as it was.
    ours = [p for p in shared.iterdir() if p.name.startswith(".out.csv.ddscope-") and os.lstat(p).st_uid == 0]
    assert ours == [], ours


# ---- 3. no input that can exhaust the stack -----------------------------------------------

def test_deep_yaml_is_a_clean_error_not_an_abort(tmp_path):
    """A 40 KB architecture.yaml of 20 000 nested block sequences aborted
    `latency`, `report` and `serve --path` with a stack overflow."""
    deep = tmp_path / "architecture.yaml"
    deep.write_text("- " * 20_000 + "x\n")
    for cmd in (["latency", tmp_path, "--path", deep], ["report", tmp_path, "--path", deep], ["serve", "--path", deep]):
        cp = run(cmd)
        assert cp.returncode > 0, f"{cmd[0]}: exit {cp.returncode}: {cp.stderr[-2000:]}"
        assert "nested more than 64 deep" in cp.stderr and "architecture.yaml" in cp.stderr, f"{cmd[0]}: {cp.stderr[-2000:]}"


# ---- 5. special files and long fields as inputs -------------------------------------------

def test_devices_and_fifos_as_inputs_are_refused_quickly(tmp_path):
    a, b = tmp_path / "pc1.pcap", tmp_path / "pc2.pcap"
    hostile.generate("inflight", 3, a, b)
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    cases = [
        (["latency", a, b, "--explain", "--load", "pc1=/dev/zero"], "character device"),
        (["latency", a, b, "--path", "/dev/zero.yaml"], "No such file"),
        (["latency", a, b, "--limits", "/dev/zero"], "character device"),
        (["latency", a, b, "--budget-file", "/dev/zero"], "character device"),
        (["lab", "check", "/dev/zero"], "character device"),
        # A FIFO nobody writes: an empty file, at once.
        (["latency", a, b, "--explain", "--load", f"pc1={fifo}"], "no column"),
    ]
    for args, expect in cases:
        t = time.monotonic()
        cp = run(args, timeout=30)
        took = time.monotonic() - t
        assert cp.returncode != 0 and expect in cp.stderr, f"{args}: exit {cp.returncode}: {cp.stderr[-1500:]}"
        assert took < 3, f"{args}: {took:.1f} s"
        assert longest_line(cp.stderr) < 1000
    # A FIFO whose writer never writes: given up on after its timeout, with one line.
    holder = os.open(fifo, os.O_RDWR)  # a writer that stays open
    try:
        cp = run(["latency", a, b, "--explain", "--load", f"pc1={fifo}"], timeout=60)
    finally:
        os.close(holder)
    assert cp.returncode != 0 and "FIFO or pipe" in cp.stderr, cp.stderr[-1500:]


def test_a_long_field_in_a_load_file_is_quoted_short(tmp_path):
    a, b = tmp_path / "pc1.pcap", tmp_path / "pc2.pcap"
    hostile.generate("inflight", 3, a, b)
    load = tmp_path / "load.csv"
    with open(load, "w") as f:
        f.write("t_ns,process,pid,cpu_user_s,cpu_system_s\n")
        f.write("1,p,1,0.1,0.1\n")
        f.write("2,p,1," + "9" * 20_000_000 + "x,0.1\n")
    code, stderr, _ = run_measured(["latency", a, b, "--explain", "--load", f"pc1={load}"])
    assert "panicked" not in stderr
    assert longest_line(stderr) < 1000, longest_line(stderr)


def test_a_long_budget_topic_is_quoted_once(tmp_path):
    a, b = tmp_path / "pc1.pcap", tmp_path / "pc2.pcap"
    hostile.generate("inflight", 3, a, b)
    topic = "/" + "t" * 100_000
    cp = run(["latency", a, b, "--budget", f"{topic}[=5ms"])
    assert cp.returncode != 0
    assert longest_line(cp.stderr) < 1000, longest_line(cp.stderr)
