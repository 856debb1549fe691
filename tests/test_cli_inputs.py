"""Bad input never panics: clear messages naming file, frame and field; the
readable part is still analysed; exit code 2 with one line for a file that
cannot be read. Oracle: the captures themselves (a truncated copy of a real
capture must give the same rows as the original up to the cut, which tshark
also shows)."""
import gzip
import json
import subprocess

import pytest


def plain_copy(repo, tmp_path):
    src = repo / "examples/captures/simple-robotic-cyclone/pc2.pcapng.gz"
    dst = tmp_path / "pc2.pcapng"
    dst.write_bytes(gzip.decompress(src.read_bytes()))
    return dst


def test_missing_file_exit_2_one_line(ddscope, tmp_path):
    for verb in ("dissect", "topics"):
        cp = ddscope(verb, tmp_path / "missing.pcapng", check=False)
        assert cp.returncode == 2, (verb, cp.stderr)
        lines = cp.stderr.strip().splitlines()
        assert len(lines) == 1 and "missing.pcapng" in lines[0], cp.stderr


def test_not_a_capture_exit_2(ddscope, tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("this is not a capture file\n" * 10)
    cp = ddscope("topics", f, check=False)
    assert cp.returncode == 2 and "not a pcap or pcapng file" in cp.stderr and "notes.txt" in cp.stderr, cp.stderr
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(b"")
    cp = ddscope("dissect", empty, check=False)
    assert cp.returncode == 2 and "empty" in cp.stderr, cp.stderr


def test_truncated_file_keeps_the_readable_part(ddscope, repo, tmp_path):
    full = plain_copy(repo, tmp_path)
    cut = tmp_path / "cut.pcapng"
    data = full.read_bytes()
    cut.write_bytes(data[: len(data) // 2 + 7])  # mid-block
    a = ddscope("dissect", full, "--format", "jsonl", "--name", "pc2")
    b = ddscope("dissect", cut, "--format", "jsonl", "--name", "pc2")
    assert b.returncode == 0
    rows_full = a.stdout.splitlines()
    rows_cut = b.stdout.splitlines()
    assert 0 < len(rows_cut) < len(rows_full)
    assert rows_full[: len(rows_cut) - 50] == rows_cut[: len(rows_cut) - 50], "rows before the cut must not change"
    assert "file is truncated" in b.stderr and "frame" in b.stderr, b.stderr
    # tshark agrees on how many frames are readable.
    tshark = subprocess.run(["tshark", "-r", str(cut), "-T", "fields", "-e", "frame.number"], capture_output=True, text=True)
    last = json.loads(rows_cut[-1])["frame"]
    assert int(tshark.stdout.split()[-1]) >= last
    t = json.loads(ddscope("topics", cut, "--format", "json").stdout)
    assert "truncated" in next(iter(t["skipped"].values()))["capture_error"]


def test_corrupt_block_is_reported_and_prefix_analysed(ddscope, repo, tmp_path):
    full = plain_copy(repo, tmp_path)
    data = bytearray(full.read_bytes())
    at = len(data) // 3
    # Find the next Enhanced Packet Block and give it an impossible length.
    i = data.index(b"\x06\x00\x00\x00", at)
    data[i + 4:i + 8] = (0x7ffffff0).to_bytes(4, "little")
    bad = tmp_path / "corrupt.pcapng"
    bad.write_bytes(bytes(data))
    cp = ddscope("topics", bad, check=False)
    assert cp.returncode == 0, cp.stderr
    assert "panicked" not in cp.stderr
    assert "after frame" in cp.stderr, cp.stderr
    assert "/image" in cp.stdout


def test_non_rtps_traffic_is_counted(ddscope, shared_captures):
    cp = ddscope("topics", shared_captures / "fastdds-vlan-pcp-ipfrag.pcapng", "--format", "json")
    doc = json.loads(cp.stdout)
    counters = next(iter(doc["skipped"].values()))["counters"]
    assert counters["non_ip_frames"] == 6 and counters["non_udp_packets"] == 2 and counters["non_rtps_datagrams"] == 33, counters
    assert "33 non-RTPS datagrams" in cp.stderr


def test_unknown_kind_and_topic_pattern_errors(ddscope, shared_captures):
    f = shared_captures / "cyclone-interop.pcapng"
    cp = ddscope("dissect", f, "--kind", "DATAX", check=False)
    assert cp.returncode == 64 and "--kind" in cp.stderr and "unknown kind \"DATAX\"" in cp.stderr
    cp = ddscope("dissect", f, "--topic", "[", check=False)
    assert cp.returncode == 64 and "bad --topic pattern" in cp.stderr
    cp = ddscope("dissect", f, "--format", "parquet", check=False)
    assert cp.returncode == 64 and "needs an output file" in cp.stderr


def test_a_folder_of_several_trace_sessions_is_named_not_babeltrace2s_words(ddscope, repo, tmp_path):
    """`--trace ~/.ros/tracing` (a folder of sessions) is refused with each session named and one
    to give, before babeltrace2 reads anything (it said "Multiple traces given, but UUIDs don't
    match: first-trace-uuid=…"). Real sessions: two of CARET's sample traces (../shared/traces),
    whose metadata carries different trace UUIDs (babeltrace2's ctf-metadata output is the oracle)."""
    import shutil
    import pytest
    caret = repo.parent / "shared" / "traces" / "caret-galactic"
    if not caret.is_dir():
        pytest.skip("the shared CARET traces are not here")
    tracing = tmp_path / "tracing"
    for name, session in (("talker_listener", "talker_listener/talker_listener"), ("end_to_end_sample", "end_to_end_sample/cyclonedds")):
        assert (caret / session / "ust").is_dir(), session
        shutil.copytree(caret / session, tracing / f"session-{name}")
    uuids = set()
    for meta in tracing.rglob("metadata"):
        text = subprocess.run(["babeltrace2", "--output-format=ctf-metadata", str(meta.parent)], capture_output=True, text=True, check=True).stdout
        uuids.add(text.split("uuid = \"", 1)[1].split("\"", 1)[0])
    assert len(uuids) == 2, uuids
    cp = ddscope("latency", "--trace", tracing, check=False)
    assert cp.returncode == 2, cp.stderr
    line = cp.stderr.strip().splitlines()[-1]
    assert line == f"ddscope: error: {tracing}: holds 2 trace sessions (session-end_to_end_sample, session-talker_listener): give one of them, e.g. {tracing}/session-end_to_end_sample", line
    # one of them reads
    ddscope("latency", "--trace", tracing / "session-talker_listener")


def test_an_output_that_cannot_be_written_fails_before_the_analysis(ddscope, repo, tmp_path):
    """`report --html` and `latency -o` (written at the end) check their path first: one line
    naming it, no analysis output before it (was: the whole analysis, then the error)."""
    run = repo / "examples/captures/simple-robotic-cyclone"
    for args, path in ((("report", run, "--html"), "/nonexistent-dir/r.html"), (("latency", run, "--format", "json", "-o"), "/nonexistent-dir/x.json")):
        cp = ddscope(*args, path, check=False)
        assert cp.returncode != 0 and not cp.stdout, (args, cp.stdout[:300])
        lines = cp.stderr.strip().splitlines()
        assert lines == [f"ddscope: error: cannot create {path}: No such file or directory (os error 2)"], (args, cp.stderr[-1500:])
    d = tmp_path / "a-dir"
    d.mkdir()
    cp = ddscope("report", run, "--html", d, check=False)
    assert cp.returncode == 64 and cp.stderr.strip().splitlines() == [f"ddscope: error: cannot write {d}: it is a directory"], cp.stderr


@pytest.mark.parametrize("verb", ["dissect CAP", "topics CAP", "latency CAP CAP", "report CAP --html r.html", "live -i lo", "agent -i lo --name pc1"])
def test_every_verb_refuses_a_domain_beyond_232(ddscope, repo, verb):
    """--domain is one argument of every verb, checked once (issue 39: `live --domain 999` was taken, `topics
    --domain 999` refused): DDS domain ids end at 232, where the RTPS port mapping leaves the UDP ports."""
    cap = repo / "examples" / "captures" / "ros2-two-hosts" / "pc1.pcapng.gz"
    args = [str(cap) if a == "CAP" else a for a in verb.split()]
    cp = ddscope(*args, "--domain", "999", check=False)
    assert cp.returncode == 64 and "not a DDS domain id" in cp.stderr and "0 to 232" in cp.stderr, cp.stderr
    cp = ddscope(*args, "--domain", "232", "--help", check=False)
    assert cp.returncode == 0, cp.stderr
