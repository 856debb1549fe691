"""The live dashboard's panels, by looking, on a real serve fed by two agents replaying the bundled
two-host run (`agent --read --speed 1`); Debian's headless Chromium draws the dashboard and
tests/browser/inspect.mjs reads each chart's x range, legend and the pixels inside its plot.

- A topic's panels share one time axis (issue 38: /image's submessage panel spread 3 s over its
  width beside a message panel of 40 s, because serve keeps a number of points per series). Oracle:
  /api/state's own series, whose whole span is the axis every panel of the topic must show.
- p50 and p99 per second of sample time and the run's CDF (issue 38: a p99 trend cannot be read from
  a scatter of 2 000 points). Oracle: the offline per-sample rows of the same captures (`latency
  --rows`, equal to tshark's elsewhere), grouped by second, nearest-rank percentiles."""
from __future__ import annotations

import csv
import json
import math
import subprocess
import time
import urllib.request

import pytest

from conftest import REPO, browser_inspect, ddscope_bin, free_port, wait_agent, wait_healthz

RUN = REPO / "examples" / "captures" / "ros2-two-hosts"


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """serve's URL and its settled /api/state after both hosts were replayed side by side."""
    tmp = tmp_path_factory.mktemp("replayed")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    procs = [subprocess.Popen([ddscope_bin(), "serve", "--listen", f"127.0.0.1:{port}", "--window", "1s", "--idle", "600s"],
                              stdout=subprocess.DEVNULL, stderr=open(tmp / "serve.log", "w"))]
    try:
        wait_healthz(url)
        # both hosts replayed side by side, at the pace they were captured (2 s)
        for host in ("pc1", "pc2"):
            procs.append(subprocess.Popen([ddscope_bin(), "agent", "--read", str(RUN / f"{host}.pcapng.gz"), "--speed", "1", "--name", host,
                                           "--window", "1s", "--send-to", url], stdout=subprocess.DEVNULL, stderr=open(tmp / f"agent-{host}.log", "w")))
            # the first agent serve hears from is the reference clock: pc1, as offline
            if host == "pc1":
                wait_agent(url, "pc1")
        for p in procs[1:]:
            assert p.wait(120) == 0, (tmp / "agent-pc1.log").read_text()[-1500:]
        image = None
        deadline = time.time() + 30
        while time.time() < deadline:
            state = json.loads(urllib.request.urlopen(url + "/api/state", timeout=5).read())
            image = [f for f in state["flows"] if f["summary"]["topic"] == "/image"]
            if image and state["pending"]["samples"] == 0 and image[0]["submessage"] and image[0]["message"]:
                break
            time.sleep(0.5)
        assert image, state["flows"]
        yield url, state
    finally:
        for p in procs:
            p.terminate()
            p.wait(10)


def test_a_topics_panels_share_one_time_window(replayed, artifacts):
    url, state = replayed
    image = [f for f in state["flows"] if f["summary"]["topic"] == "/image"]
    series = [s for f in image for s in (f["message"], f["submessage"], f["size"]) if s]
    want = [min(s[0][0] for s in series), max(s[-1][0] for s in series)]
    sub_start = min(f["submessage"][0][0] for f in image if f["submessage"])
    # serve's point cap makes the submessage series (206 per image) start later than the messages'
    assert sub_start > want[0], (want, sub_start)
    seen = browser_inspect(url + "/", artifacts / "dashboard-windows.png", 2500)
    assert not seen["errors"], seen["errors"]
    charts = {c["key"]: c for c in seen["charts"] if c["key"] in ("msg:/image", "sub:/image", "size:/image")}
    assert len(charts) == 3, [c["key"] for c in seen["charts"]]
    for c in charts.values():
        assert c["xrange"] == want, (c["key"], c["xrange"], want)
        assert c["points"] > 0 and c["plot_ink"] > 0, c
    # a 2 s run on a 24-hour clock: ticks every 0.5 s read 23:59:05.0, 23:59:05.5 (not 23:59:05 twice)
    for c in seen["charts"]:
        ticks = c["xticks"] or []
        assert len(set(ticks)) == len(ticks), (c["key"], ticks)
    assert any(len(c["xticks"] or []) > 3 for c in charts.values()), [c["xticks"] for c in charts.values()]


def nearest_rank(v, q):
    v = sorted(v)
    return v[min(len(v), max(1, math.ceil(q * len(v)))) - 1]


def test_p50_p99_per_second_and_the_cdf_equal_the_offline_rows(replayed, tmp_path, artifacts):
    url, _ = replayed
    rows_csv = tmp_path / "rows.csv"
    r = subprocess.run([ddscope_bin(), "latency", str(RUN / "pc1.pcapng.gz"), str(RUN / "pc2.pcapng.gz"), "--window", "1s", "--rows", str(rows_csv)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    offline = {}
    for row in csv.DictReader(rows_csv.open()):
        if row["level"] == "message" and row["latency_ns"]:
            key = (row["topic_name"], row["sender"], row["receiver"])
            offline.setdefault(key, {}).setdefault(int(row["sender_first_ts_ns"]) // 1_000_000_000, []).append(int(row["latency_ns"]))
    state = json.loads(urllib.request.urlopen(url + "/api/state", timeout=5).read())
    assert state["limits"]["percentile_rows_late"] == 0 and state["limits"]["percentile_rows_sampled"] == 0, state["limits"]
    checked = 0
    for f in state["flows"]:
        key = (f["summary"]["topic"], f["summary"]["sender"], f["summary"]["receiver"])
        if key not in offline:
            continue
        want = [[s, nearest_rank(v, 0.5) / 1e6, nearest_rank(v, 0.99) / 1e6, len(v)] for s, v in sorted(offline[key].items())]
        assert f["seconds"] == want, (key, f["seconds"], want)
        # the CDF's points: at each fraction q, the run's nearest-rank percentile (histogram: 0.1 %)
        every = sorted(x for v in offline[key].values() for x in v)
        for lat_ms, q in f["cdf"]:
            exact = nearest_rank(every, q) / 1e6 if q > 0 else every[0] / 1e6
            assert abs(lat_ms - exact) <= 0.002 * exact + 1e-6, (key, q, lat_ms, exact)
        checked += 1
    assert checked >= 3, (checked, list(offline))
    seen = browser_inspect(url + "/", artifacts / "dashboard-percentiles.png", 2500)
    assert not seen["errors"], seen["errors"]
    charts = {c["key"]: c for c in seen["charts"]}
    pct, cdf = charts.get("pct:/image"), charts.get("cdf:/image")
    assert pct and cdf, list(charts)
    assert pct["legend"] == ["pc1→pc2 p50", "pc1→pc2 p99"] and pct["plot_ink"] > 0, pct
    assert cdf["legend"] == ["pc1→pc2"] and cdf["plot_ink"] > 0 and cdf["axes"][0].endswith("ms"), cdf
