"""The live dashboard's panels of one topic share one time axis (issue 38: /image's submessage
panel spread 3 s over its width beside a message panel of 40 s, because serve keeps a number of
points per series). A real serve fed by two agents replaying the bundled two-host run (`agent --read`);
Debian's headless Chromium draws the dashboard and tests/browser/inspect.mjs reads each chart's
x range and the pixels inside its plot. Oracle: /api/state's own series, whose whole span is
the axis every panel of the topic must show."""
from __future__ import annotations

import json
import subprocess
import time
import urllib.request

from conftest import REPO, browser_inspect, ddscope_bin, free_port, wait_agent, wait_healthz

RUN = REPO / "examples" / "captures" / "ros2-two-hosts"


def test_a_topics_panels_share_one_time_window(tmp_path, artifacts):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    procs = [subprocess.Popen([ddscope_bin(), "serve", "--listen", f"127.0.0.1:{port}", "--window", "1s", "--idle", "600s"],
                              stdout=subprocess.DEVNULL, stderr=open(tmp_path / "serve.log", "w"))]
    try:
        wait_healthz(url)
        # both hosts replayed side by side, at the pace they were captured (2 s)
        for host in ("pc1", "pc2"):
            procs.append(subprocess.Popen([ddscope_bin(), "agent", "--read", str(RUN / f"{host}.pcapng.gz"), "--speed", "1", "--name", host,
                                           "--send-to", url], stdout=subprocess.DEVNULL, stderr=open(tmp_path / f"agent-{host}.log", "w")))
            # the first agent serve hears from is the reference clock: pc1, as offline
            if host == "pc1":
                wait_agent(url, "pc1")
        for p in procs[1:]:
            assert p.wait(120) == 0, (tmp_path / "agent-pc1.log").read_text()[-1500:]
        image = None
        deadline = time.time() + 30
        while time.time() < deadline:
            state = json.loads(urllib.request.urlopen(url + "/api/state", timeout=5).read())
            image = [f for f in state["flows"] if f["summary"]["topic"] == "/image"]
            if image and state["pending"]["samples"] == 0 and image[0]["submessage"] and image[0]["message"]:
                break
            time.sleep(0.5)
        assert image, state["flows"]
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
    finally:
        for p in procs:
            p.terminate()
            p.wait(10)
