"""`ddscope lab sweep`: a grid of scenario variants run in the lab, one
directory, one comparison report, resumable.

Oracles:
- the per-run figures of the report's table are compared with `ddscope
  latency RUN --format json` run separately on every run directory (the same
  numbers, exactly);
- the ground-truth columns are recomputed here from the run's
  HOST.truth.jsonl files (publish/receive records of the nodes themselves);
- every cell's parameters are checked on the wire/run: the run.json of a
  Fast DDS cell shows the Fast DDS vendor id in the capture (`ddscope topics`
  inside `lab run`), the sample size is the cell's size;
- the aggregated rows are the median of the repeats (Python's statistics);
- the HTML report is rendered by Debian's headless Chromium
  (tests/browser/sweep.mjs, playwright-core): no console errors, no network
  requests, charts drawn, the table shows the cells.

Needs root (network namespaces); CI runs as root.
"""
from __future__ import annotations

import csv
import json
import pathlib
import re
import signal
import statistics
import subprocess
import time

from conftest import REPO, ddscope_bin, have_root, require_tool
from test_lab import lab_namespaces, lab_processes

BASE = REPO / "examples" / "lab" / "sweep-base.toml"


def mine(before: dict[int, str], tmp: pathlib.Path) -> dict[int, str]:
    """Lab processes started since `before` that belong to this test's runs
    (their command lines name its directory; other lab runs on the machine are not ours)."""
    return {pid: cmd for pid, cmd in lab_processes().items() if pid not in before and str(tmp) in cmd}


def run_ids(text: str) -> list[str]:
    return re.findall(r" run (\d+-[0-9a-f]{4}) ", text)


def need_root():
    assert have_root(), "the lab sweep tests need root (network namespaces); CI runs as root"


def write_sweep(tmp: pathlib.Path, body: str, name="t") -> pathlib.Path:
    p = tmp / f"{name}.toml"
    p.write_text(f'name = "{name}"\nscenario = "{BASE}"\n' + body)
    return p


def sweep(*args, timeout=900):
    return subprocess.run([ddscope_bin(), "lab", "sweep", *map(str, args)], capture_output=True, text=True, timeout=timeout)


def num(s):
    return None if s in ("", None) else float(s)


def truth_flow(run: pathlib.Path, topic: str, sender: str, receiver: str):
    """Ground truth of one flow from the nodes' own records."""
    pubs, recv = {}, {}
    for f in run.glob("*.truth.jsonl"):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            if r["topic"] != topic:
                continue
            if r["event"] == "publish" and r["host"] == sender:
                pubs[(r["writer_guid"], r["seq"])] = r["t_ns"]
            elif r["event"] == "receive" and r["host"] == receiver:
                recv.setdefault((r["node"], r["writer_guid"], r["seq"]), r)
    lat = sorted((r["t_ns"] - pubs[(g, s)]) / 1e6 for (n, g, s), r in recv.items() if (g, s) in pubs)
    got = [r for (n, g, s), r in recv.items() if (g, s) in pubs]
    return {
        "truth_published": len(pubs),
        "truth_received": len(got),
        "truth_lost": len(pubs) - len(got),  # one reader on the receiver in these sweeps
        "payload_bytes": sum(r["size"] for r in got) / len(got),
        "truth_mean_ms": sum(lat) / len(lat),
        "truth_max_ms": lat[-1],
        "truth_p50_ms": lat[max(1, -(-len(lat) * 50 // 100)) - 1],
    }


def test_small_sweep_runs_reports_and_equals_latency(tmp_path, artifacts):
    """2 vendors x 2 sizes, 2 repeats of 1 s: every run done, the table's ddscope
    columns equal `ddscope latency` on each run, the truth columns equal the
    ground-truth files, medians of the repeats, and the report renders in Chromium."""
    need_root()
    before = lab_processes()
    sw = write_sweep(tmp_path, 'repeats = 2\nduration = "1s"\n[matrix]\n'
                     '"generate[0].vendor" = ["cyclone", "fastdds"]\n"generate[0].sizes" = ["1KiB", "64KiB"]\n')
    out = tmp_path / "out"
    t = time.monotonic()
    cp = sweep(sw, "--out", out, "-q")
    elapsed = time.monotonic() - t
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert "8 of 8 runs analysed, 4 table rows" in cp.stdout, cp.stdout[-500:]
    m = json.loads((out / "sweep.json").read_text())
    assert m["format"] == "ddscope-lab-sweep/1" and m["finished"] and m["sessions"] == 1
    assert [c["params"] for c in m["cells"]] == [
        {"generate[0].vendor": '"cyclone"', "generate[0].sizes": '"1KiB"'},
        {"generate[0].vendor": '"cyclone"', "generate[0].sizes": '"64KiB"'},
        {"generate[0].vendor": '"fastdds"', "generate[0].sizes": '"1KiB"'},
        {"generate[0].vendor": '"fastdds"', "generate[0].sizes": '"64KiB"'},
    ]
    not_clean = [(r["dir"], r["status"], r["attempts"], r.get("error")) for c in m["cells"] for r in c["runs"]
                 if r["status"] != "done" or r["attempts"] != 1]
    assert not not_clean, not_clean
    for run in (out / "runs").iterdir():
        assert not lab_namespaces(json.loads((run / "run.json").read_text())["run_id"])
    assert not mine(before, tmp_path)

    rows = list(csv.DictReader((out / "sweep-runs.csv").open()))
    assert len(rows) == 8, rows
    for row in rows:
        run = out / "runs" / f"{row['cell']}-r{row['repeat']}"
        rj = json.loads((run / "run.json").read_text())
        # the cell's values reached the wire
        size = {"1KiB": 1024, "64KiB": 65536}[row["generate[0].sizes"]]
        vendor = {"cyclone": "0x0110", "fastdds": "0x010f"}[row["generate[0].vendor"]]
        (topic_report,) = rj["topics"]
        assert topic_report["sample_bytes"] == size
        assert any(vendor in w["vendors"] for w in topic_report["wire"]), topic_report["wire"]
        # ddscope latency on the same run directory, separately
        lat = subprocess.run([ddscope_bin(), "latency", str(run), "--format", "json"], capture_output=True, text=True, timeout=300)
        assert lat.returncode == 0, lat.stderr
        flows = [f for f in json.loads(lat.stdout)["flows"] if f["topic"] == row["topic"] and f["sender"] == row["sender"] and f["receiver"] == row["receiver"]]
        assert len(flows) == 1, flows
        f = flows[0]
        msg = dict(f["layers"])["message"]
        app = dict(f["layers"])["application"]
        assert (num(row["samples"]), num(row["delivered"]), num(row["lost"])) == (f["samples"], f["delivered"], f["lost"])
        assert num(row["msg_mean_ms"]) == msg["mean_ms"] and num(row["msg_p50_ms"]) == msg["p50_ms"]
        assert num(row["msg_p99_ms"]) == msg["p99_ms"] and num(row["msg_max_ms"]) == msg["max_ms"]
        assert num(row["app_mean_ms"]) == app["mean_ms"] and num(row["app_p99_ms"]) == app["p99_ms"]
        assert f["delivered"] >= 9, f  # 10 samples in 1 s, best effort over an idle veth
        # ground truth from the nodes' records
        gt = truth_flow(run, row["topic"], row["sender"], row["receiver"])
        for k, v in gt.items():
            assert abs(num(row[k]) - v) < 1e-9, (k, row[k], v)
        assert abs(num(row["truth_throughput_mbps"]) - gt["truth_received"] * size * 8 / 1e6 / rj["timing"]["duration_s"]) < 1e-9

    # aggregated table: median of the two repeats
    agg = list(csv.DictReader((out / "sweep-table.csv").open()))
    assert [a["cell"] for a in agg] == ["c001", "c002", "c003", "c004"]
    for a in agg:
        reps = [r for r in rows if r["cell"] == a["cell"]]
        assert a["repeats"] == "2" and len(reps) == 2
        for k in ("msg_mean_ms", "msg_p99_ms", "truth_mean_ms", "truth_lost", "throughput_mbps"):
            assert abs(num(a[k]) - statistics.median(num(r[k]) for r in reps)) < 1e-9, (k, a, reps)
        assert num(a["msg_mean_ms_min"]) == min(num(r["msg_mean_ms"]) for r in reps)
        assert num(a["msg_mean_ms_max"]) == max(num(r["msg_mean_ms"]) for r in reps)
    doc = json.loads((out / "sweep-table.json").read_text())
    assert len(doc["table"]) == 4 and len(doc["run_rows"]) == 8

    # the report in Chromium
    node = require_tool("node")
    shot = artifacts / "lab-sweep-report.png"
    cp = subprocess.run([node, str(REPO / "tests" / "browser" / "sweep.mjs"), (out / "report.html").as_uri(), str(shot), "800"],
                        capture_output=True, text=True, timeout=180)
    assert cp.returncode == 0, cp.stderr[-2000:]
    page = json.loads(cp.stdout.strip().splitlines()[-1])
    assert page["errors"] == [] and page["requests"] == [], page
    assert len(page["charts"]) >= 3 and all(c["points"] >= 4 and c["ink"] > 0.01 for c in page["charts"]), page["charts"]
    head, *body = page["table"]
    assert head[:4] == ["cell", "generate[0].vendor", "generate[0].sizes", "topic"]
    assert [r[:3] for r in body] == [["c001", "cyclone", "1KiB"], ["c002", "cyclone", "64KiB"], ["c003", "fastdds", "1KiB"], ["c004", "fastdds", "64KiB"]]
    col = head.index("msg_mean_ms")
    for r, a in zip(body, agg):
        assert r[col] == f"{num(a['msg_mean_ms']):.3f}"
    assert len(page["runs"]) == 8 and all(r[3] == "done" for r in page["runs"])
    assert "CPUs" in page["machine"]
    print(f"small sweep: 8 runs in {elapsed:.1f} s")


def test_sweep_resumes_after_kill(tmp_path):
    """SIGTERM during the second cell: the first cell's run is kept, the
    second is redone, the third run; a different sweep in the same directory is refused."""
    need_root()
    before = lab_processes()
    sw = write_sweep(tmp_path, 'duration = "5s"\n[matrix]\n"generate[0].sizes" = ["1KiB", "4KiB", "16KiB"]\n')
    out = tmp_path / "out"
    p = subprocess.Popen([ddscope_bin(), "lab", "sweep", str(sw), "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    manifest = out / "sweep.json"
    deadline = time.monotonic() + 120
    state = None
    while time.monotonic() < deadline:
        if manifest.exists():
            try:
                state = [c["runs"][0]["status"] for c in json.loads(manifest.read_text())["cells"]]
            except json.JSONDecodeError:
                state = None  # never: the manifest is replaced atomically
                raise
            if state[:2] == ["done", "running"]:
                break
        time.sleep(0.05)
    assert state[:2] == ["done", "running"], state
    time.sleep(2.5)  # inside c002's 5 s of publication
    assert p.poll() is None
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    assert p.returncode != 0 and "interrupted by SIGTERM" in err, err[-2000:]
    m = json.loads(manifest.read_text())
    assert [c["runs"][0]["status"] for c in m["cells"]] == ["done", "interrupted", "pending"], m
    assert not (out / "runs" / "c002-r1" / "run.json").exists()
    assert not (out / "runs" / "c003-r1").exists()
    first = json.loads((out / "runs" / "c001-r1" / "run.json").read_text())["run_id"]
    first_mtime = (out / "runs" / "c001-r1" / "run.json").stat().st_mtime_ns
    assert len(run_ids(err)) == 2 and not any(lab_namespaces(r) for r in run_ids(err)), err
    assert not mine(before, tmp_path)

    cp = sweep(sw, "--out", out)
    assert cp.returncode == 0, cp.stderr[-3000:]
    m = json.loads(manifest.read_text())
    assert m["sessions"] == 2 and m["finished"]
    assert [(c["runs"][0]["status"], c["runs"][0]["attempts"]) for c in m["cells"]] == [("done", 1), ("done", 2), ("done", 1)]
    assert json.loads((out / "runs" / "c001-r1" / "run.json").read_text())["run_id"] == first
    assert (out / "runs" / "c001-r1" / "run.json").stat().st_mtime_ns == first_mtime
    resumed = cp.stderr
    assert "] c001 repeat 1:" not in cp.stderr and "[2/3] c002 repeat 1:" in cp.stderr and "[3/3] c003 repeat 1:" in cp.stderr, cp.stderr
    rows = list(csv.DictReader((out / "sweep-table.csv").open()))
    assert [r["generate[0].sizes"] for r in rows] == ["1KiB", "4KiB", "16KiB"]
    assert [num(r["payload_bytes"]) for r in rows] == [1024, 4096, 16384]
    # the same directory with another sweep
    other = write_sweep(tmp_path, 'duration = "5s"\n[matrix]\n"generate[0].sizes" = ["1KiB", "8KiB"]\n', name="t")
    cp = sweep(other, "--out", out)
    assert cp.returncode != 0 and "holds a different sweep" in cp.stderr and cp.stderr.count("\n") == 1, cp.stderr
    assert len(run_ids(resumed)) == 2 and not any(lab_namespaces(r) for r in run_ids(resumed)), resumed
    assert not mine(before, tmp_path)


def test_bad_sweep_files_give_one_line_naming_the_key(tmp_path):
    """Checked before anything runs (with --list, no root needed)."""
    cases = [
        ('[matrix]\n"generate[0].sizez" = ["1KiB"]\n', ["generate[0].sizez"]),
        ('[matrix]\n"dds.vendor" = ["cyclone"]\n', ["dds.vendor", "vendor"]),
        ('[matrix]\n"interference[0].loadx" = ["40%"]\n', ["interference[0].loadx", "no such key"]),
        ('[matrix]\n"generate[0].subscribers" = ["many"]\n', ["generate[0].subscribers = many", "invalid"]),
        ('[matrix]\n"generate[0].rates_hz" = [true]\n', ["generate[0].rates_hz"]),
        ('[matrix]\n', ["matrix is empty"]),
        ('', ["matrix is empty"]),
        ('[matrix]\n"network.rate" = []\n', ["network.rate", "empty"]),
        ('[matrix]\n"network.rate" = "1G"\n', ["network.rate", "list of values"]),
        ('[matrix]\n"generate[2].sizes" = ["1KiB"]\n', ["generate[2]", "1 entries"]),
        ('[matrix]\n"generate[0].vendor" = ["cyclone", "rti"]\n', ["generate[0].vendor = rti", "rti"]),
        ('[matrix]\n"generate[0].vendor" = ["cyclone"]\n[[plot]]\nx = "payload_bytes"\ny = "latency"\n', ["plot[0].y", "latency"]),
        ('[matrix]\n"generate[0].vendor" = ["cyclone"]\n[[exclude]]\n"nodes[0].vendor" = "cyclone"\n', ["exclude[0]", "nodes[0].vendor"]),
        ('repeats = 0\n[matrix]\n"generate[0].vendor" = ["cyclone"]\n', ["repeats"]),
        ('[matrix]\n"generate[0].vendor" = ["cyclone"]\nunknown_option = 1\n', ["unknown_option"]),
    ]
    for body, needles in cases:
        sw = write_sweep(tmp_path, body)
        cp = sweep(sw, "--list")
        assert cp.returncode != 0, (body, cp.stdout)
        assert cp.stderr.count("\n") == 1 and "panicked" not in cp.stderr, (body, cp.stderr)
        assert "t.toml" in cp.stderr, cp.stderr
        for n in needles:
            assert n in cp.stderr, (body, n, cp.stderr)
    cp = sweep(tmp_path / "missing.toml", "--list")
    assert cp.returncode != 0 and "missing.toml" in cp.stderr and cp.stderr.count("\n") == 1
    # a good one lists its cells without root
    sw = write_sweep(tmp_path, '[matrix]\n"generate[0].vendor" = ["cyclone", "fastdds"]\n"interference[0].load" = ["0%", "40%"]\n'
                     '[[exclude]]\n"generate[0].vendor" = "fastdds"\n"interference[0].load" = "40%"\n')
    cp = sweep(sw, "--list")
    assert cp.returncode == 0, cp.stderr
    assert "3 cells x 1 repeats (1 excluded)" in cp.stdout
    assert "c003  generate[0].vendor=fastdds interference[0].load=0%" in cp.stdout
