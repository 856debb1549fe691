"""`ddscope latency` on bad input: clear one-line reasons, no panics.
Oracle: the public captures (independent Cyclone and Fast DDS systems)."""
import shutil


def test_single_capture_is_refused(ddscope, shared_captures):
    cp = ddscope("latency", shared_captures / "cyclone-interop.pcapng", check=False)
    assert cp.returncode == 64  # usage (README: exit codes)
    assert "two or more capture points" in cp.stderr
    assert "panicked" not in cp.stderr


def test_same_file_twice_is_refused(ddscope, shared_captures):
    f = shared_captures / "cyclone-interop.pcapng"
    cp = ddscope("latency", f, f, check=False)
    assert cp.returncode == 64 and "same file" in cp.stderr, cp.stderr


def test_copies_of_one_capture_point_are_detected(ddscope, shared_captures, tmp_path):
    a, b = tmp_path / "a.pcapng", tmp_path / "b.pcapng"
    shutil.copy(shared_captures / "cyclone-datafrag.pcapng", a)
    shutil.copy(shared_captures / "cyclone-datafrag.pcapng", b)
    cp = ddscope("latency", a, b, check=False)
    assert cp.returncode == 2, cp.stdout  # inputs that cannot be used
    assert "copies of one capture point" in cp.stderr, cp.stderr


def test_captures_without_common_writers(ddscope, shared_captures):
    cp = ddscope("latency", shared_captures / "cyclone-interop.pcapng", shared_captures / "fastdds-vlan-pcp-ipfrag.pcapng", check=False)
    assert cp.returncode == 2  # inputs that do not correlate
    assert "no writer's samples were seen at two capture points" in cp.stderr, cp.stderr
    assert "panicked" not in cp.stderr


def test_missing_file_exits_2(ddscope, tmp_path):
    cp = ddscope("latency", tmp_path / "nope.pcapng", tmp_path / "nope2.pcapng", check=False)
    assert cp.returncode == 2 and len(cp.stderr.strip().splitlines()) == 1, cp.stderr


def test_bad_offset_is_explained(ddscope, shared_captures, tmp_path):
    a = tmp_path / "a.pcapng"
    shutil.copy(shared_captures / "cyclone-datafrag.pcapng", a)
    cp = ddscope("latency", a, shared_captures / "cyclone-interop.pcapng", "--offset", "pc9=+1s", check=False)
    assert cp.returncode == 64 and "no capture point named" in cp.stderr, cp.stderr


def test_header_only_captures_give_the_same_latencies(ddscope, repo, tmp_path):
    """Header-only mode: the lab's example captures cut to 192 bytes per frame
    (editcap -s, Wireshark's tool: the oracle for what a snap length keeps)
    give exactly the same per-sample DDS message latencies as the full ones."""
    import csv
    import subprocess

    from conftest import require_tool

    editcap = require_tool("editcap")
    run = repo / "examples" / "captures" / "simple-robotic-cyclone"
    for host in ("pc1", "pc2"):
        subprocess.run([editcap, "-s", "192", str(run / f"{host}.pcapng.gz"), str(tmp_path / f"{host}.pcapng")], check=True)
    full, cut = tmp_path / "full.csv", tmp_path / "cut.csv"
    ddscope("latency", run, "--format", "csv", "-o", full)
    cp = ddscope("latency", tmp_path / "pc1.pcapng", tmp_path / "pc2.pcapng", "--format", "csv", "-o", cut)
    assert "datagrams cut by the snap length" in cp.stderr
    rows = lambda p: {(r["writer_id"], r["sn"]): r for r in csv.DictReader(open(p))}
    a, b = rows(full), rows(cut)
    assert len(a) >= 30 and a.keys() == b.keys()
    for k in a:
        for col in ("latency_ns", "first_first_ns", "last_last_ns", "sample_size", "frags_expected", "status"):
            assert a[k][col] == b[k][col], f"{k} {col}: full {a[k][col]}, header-only {b[k][col]}"


def test_estimated_offset_recovers_a_37_second_shift(ddscope, repo, tmp_path):
    """pc2's capture shifted by +37 s (TAI vs UTC) with editcap -t (Wireshark's tool).
    Oracle: the shift we applied, and the latencies of the unshifted captures."""
    import json
    import subprocess

    from conftest import require_tool

    editcap = require_tool("editcap")
    run = repo / "examples" / "captures" / "simple-robotic-cyclone"
    pc1, pc2 = tmp_path / "pc1.pcapng", tmp_path / "pc2.pcapng"
    subprocess.run([editcap, str(run / "pc1.pcapng.gz"), str(pc1)], check=True)
    subprocess.run([editcap, "-t", "37", str(run / "pc2.pcapng.gz"), str(pc2)], check=True)
    ref = json.loads(ddscope("latency", run, "--format", "json").stdout)
    # Without any correction the two captures do not even overlap in time
    # (37 s apart, the window is 5 s): the warning names the shift and the cure.
    raw = json.loads(ddscope("latency", pc1, pc2, "--no-estimate", "--format", "json").stdout)
    assert any("hardly overlap" in w and "+37" in w and "--no-estimate" in w for w in raw["warnings"]), raw["warnings"]
    msg = lambda doc, t: dict(next(f for f in doc["flows"] if f["topic"] == t)["layers"])["message"]
    # ...the estimate recovers the shift within its stated uncertainty...
    est = json.loads(ddscope("latency", pc1, pc2, "--format", "json").stdout)
    e = est["offset_estimates"][0]["estimate"]
    assert abs(e["offset_ns"] - 37_000_000_000) <= e["uncertainty_ns"] + 1_000_000, e
    assert e["uncertainty_ns"] < 5_000_000, e
    # ...and --offset pc2=+37s gives exactly the reference latencies.
    fixed = json.loads(ddscope("latency", pc1, pc2, "--offset", "pc2=+37s", "--format", "json").stdout)
    for t in ("/image", "/drive"):
        a, b = msg(ref, t), msg(fixed, t)
        assert abs(a["mean_ms"] - b["mean_ms"]) < 1e-6 and a["count"] == b["count"], (t, a, b)
