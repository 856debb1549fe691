"""Issue 24: a topic's rate is what `ros2 topic hz` computes, from the samples'
own times — per writer (n − 1) / (last − first) — so every capture point that
saw the same samples shows the same rate, however long its capture ran on after
the last sample. Writers whose intervals vary more than a random stream's
(standard deviation above the mean), or whose samples span less than a tenth
of the time from the first one to the capture point's last RTPS frame (a burst,
then silence), are `bursty`; fewer than 5 samples are `few`: neither gets a
rate (docs/events.md, "Rates").

Oracle: tshark's capture times of each sample's first DATA/DATA_FRAG (IP
reassembly on, as ddscope's frame times), read with tshark's fields output by
test_lab.tshark_data; the rate, the kind and the sums are computed here, from
those times alone, without ddscope's code.
"""
from __future__ import annotations

import json
import math
import pathlib
import subprocess

from conftest import REPO, require_tool
from test_lab import SIMPLE, lab_run, tshark_data

EXAMPLE = REPO / "examples" / "captures" / "simple-robotic-cyclone"
MIN_SAMPLES = 5
BURST_SHARE = 0.1


def frame_times_ns(capture: pathlib.Path, display_filter: str | None = None) -> list[int]:
    cmd = [require_tool("tshark"), "-r", str(capture), "-T", "fields", "-e", "frame.time_epoch"]
    if display_filter:
        cmd += ["-Y", display_filter]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()
    return [int(t.replace(".", "")) for t in out]  # 9 decimals: nanoseconds


def oracle(capture: pathlib.Path) -> dict[str, dict]:
    """Writer GUID -> samples, first/last (ns), kind and rate, from tshark's times."""
    observed_until = max(frame_times_ns(capture, "rtps"))
    per: dict[str, list[int]] = {}
    for (writer, _sn), e in tshark_data(capture).items():
        per.setdefault(writer, []).append(e["first_ns"])
    out = {}
    for w, ts in per.items():
        ts.sort()
        n, span = len(ts), ts[-1] - ts[0]
        gaps = [(b - a) / 1e9 for a, b in zip(ts, ts[1:])]
        if n < MIN_SAMPLES:
            kind = "few"
        elif span <= 0:
            kind = "bursty"
        else:
            mean = sum(gaps) / len(gaps)
            sd = math.sqrt(max(sum(g * g for g in gaps) / len(gaps) - mean * mean, 0.0))
            kind = "bursty" if sd > mean else "steady"
            if kind == "steady" and span < BURST_SHARE * (observed_until - ts[0]):
                kind = "bursty"  # a burst, then silence
        rate = (n - 1) / (span / 1e9) if kind == "steady" else None
        out[w] = {"samples": n, "first_ns": ts[0], "last_ns": ts[-1], "kind": kind, "rate_hz": rate}
    return out


def topics(ddscope, capture, *extra) -> list[dict]:
    return json.loads(ddscope("topics", capture, "--format", "json", *extra).stdout)["topics"]


def last_frame_ns(capture: pathlib.Path) -> int:
    return max(frame_times_ns(capture))


def check_capture(ddscope, capture) -> dict[str, dict]:
    """ddscope's per-writer rows equal the oracle; returns them by writer."""
    want = oracle(capture)
    got = {r["writer_id"]: r for r in topics(ddscope, capture, "--by", "writer") if r["samples"]}
    assert got, capture
    for w, r in got.items():
        o = want[w]
        assert r["samples"] == o["samples"], (capture.name, r["topic_name"], r["samples"], o)
        assert r["rate_kind"] == o["kind"], (capture.name, r["topic_name"], r["rate_kind"], o)
        assert r["first_ts_ns"] == o["first_ns"] and r["last_ts_ns"] == o["last_ns"], (capture.name, r["topic_name"])
        if o["rate_hz"] is None:
            assert r["rate_hz"] is None, (capture.name, r["topic_name"], r["rate_hz"])
        else:
            assert abs(r["rate_hz"] - o["rate_hz"]) <= 1e-9 * o["rate_hz"], (capture.name, r["topic_name"], r["rate_hz"], o)
        assert abs(r["span_s"] - (o["last_ns"] - o["first_ns"]) / 1e9) < 1e-9
    return got


def check_same_rate_at_both_points(ddscope, pc1, pc2, tail_at_least_s=0.0):
    a, b = check_capture(ddscope, pc1), check_capture(ddscope, pc2)
    both = set(a) & set(b)
    assert both, "no writer seen at both capture points"
    lines = []
    for w in sorted(both, key=lambda w: a[w]["topic_name"]):
        ra, rb = a[w]["rate_hz"], b[w]["rate_hz"]
        assert ra is not None and rb is not None, (a[w]["topic_name"], a[w]["rate_kind"], b[w]["rate_kind"])
        assert abs(ra - rb) <= 0.01 * min(ra, rb), (a[w]["topic_name"], ra, rb)
        lines.append(f"{a[w]['topic_name']} {w}: {ra:.4f} Hz at {pc1.name}, {rb:.4f} Hz at {pc2.name}")
    # per topic: the sum of its writers, the same at both points
    ta = {r["topic_name"]: r for r in topics(ddscope, pc1)}
    tb = {r["topic_name"]: r for r in topics(ddscope, pc2)}
    for name in {a[w]["topic_name"] for w in both}:
        assert abs(ta[name]["rate_hz"] - tb[name]["rate_hz"]) <= 0.01 * tb[name]["rate_hz"], (name, ta[name]["rate_hz"], tb[name]["rate_hz"])
        writers = [r for r in a.values() if r["topic_name"] == name]
        assert abs(ta[name]["rate_hz"] - sum(r["rate_hz"] for r in writers)) < 1e-9 * ta[name]["rate_hz"]
    tails = [(last_frame_ns(c) - max(r["last_ts_ns"] for r in rows.values())) / 1e9 for c, rows in ((pc1, a), (pc2, b))]
    assert min(tails) >= tail_at_least_s, tails
    print(f"capture tails after the last sample: {tails[0]:.3f} s ({pc1.name}), {tails[1]:.3f} s ({pc2.name})")
    print("\n".join(lines))


def test_example_captures_agree_with_each_other_and_with_tshark(ddscope):
    """The demo's two captures: pc1 runs on ~1 s after the last sample, pc2 does not."""
    check_same_rate_at_both_points(ddscope, EXAMPLE / "pc1.pcapng.gz", EXAMPLE / "pc2.pcapng.gz")


def test_bursty_and_steady_topics_on_talker_listener(ddscope, shared_captures):
    """/parameter_events (startup bursts) gets no Hz, /chatter (1 Hz) gets its rate."""
    cap = shared_captures / "cyclone-talker-listener-loopback.pcapng"
    want = oracle(cap)
    rows = {r["topic_name"]: r for r in topics(ddscope, cap, "--all")}
    pe = rows["/parameter_events"]
    assert pe["rate_hz"] is None and pe["rate_kind"] in ("bursty", "few"), pe
    pe_writers = [r for r in topics(ddscope, cap, "--all", "--by", "writer") if r["topic_name"] == "/parameter_events" and r["samples"]]
    assert pe_writers and all(want[r["writer_id"]]["kind"] in ("bursty", "few") for r in pe_writers)
    ch = rows["/chatter"]
    assert ch["rate_kind"] == "steady" and abs(ch["rate_hz"] - 1.0) < 0.05, ch
    # ros_discovery_info: graph updates at the nodes' start, regular but over 80 ms of 7 s
    rdi = [r for r in topics(ddscope, cap, "--all", "--by", "writer") if r["topic_name"] == "ros_discovery_info" and r["samples"]]
    assert rdi and all(r["rate_kind"] in ("bursty", "few") and r["rate_hz"] is None for r in rdi), rdi
    check_capture(ddscope, cap)


def test_lab_run_with_a_long_capture_tail(ddscope, tmp_path):
    """Captures that run on 5 s after the workload stopped: the rate is still the publishers'."""
    sc = tmp_path / "tail.toml"
    text = SIMPLE.read_text()
    assert 'duration = "10s"' in text
    sc.write_text(text.replace('duration = "10s"', 'duration = "10s"\nlinger = "5s"', 1))
    out = tmp_path / "tail"
    lab_run(ddscope, out, sc, "--duration", "3s")
    check_same_rate_at_both_points(ddscope, out / "pc1.pcapng", out / "pc2.pcapng", tail_at_least_s=4.0)
    # and the publishers' nominal rates (examples/lab/simple-robotic.toml)
    t = {r["topic_name"]: r for r in topics(ddscope, out / "pc1.pcapng")}
    for name, nominal in (("/image", 10.0), ("/drive", 29.0)):
        assert abs(t[name]["rate_hz"] - nominal) / nominal < 0.02, (name, t[name]["rate_hz"])
