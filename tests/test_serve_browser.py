"""The live dashboard shows what agents send as text, never as markup (issue 10, item 7).

Agents are only as trustworthy as the token (and on a loopback `serve`
without one, anyone local can post): names, topic rows, counters and topic
names on the wire all reach the page. Oracle: Debian's headless Chromium
(tests/browser/xss.mjs, playwright-core) loading the real server's
dashboard: no payload runs (no marker, no dialog, no injected element, the
title unchanged), every payload shows literally, and an inline event
handler added by hand afterwards is blocked by the server's
Content-Security-Policy.
"""
import json
import signal
import socket
import subprocess
import time
import urllib.request

from conftest import REPO, ddscope_bin, free_port, require_tool

SENDER = "<img src=x onerror=window.__pwned=1>"
PAYLOADS = {
    "topic": "rt/<img src=x onerror=window.__pwned=2>",
    "frames": "<img src=x onerror=window.__pwned=3>",
    "kernel_dropped": "<img src=x onerror=\"window.__pwned=4;alert(4)\">",
    "if_dropped": "<svg onload=window.__pwned=5>",
    "skipped": "<script>window.__pwned=6</script>",
    "topic_row": "<img src=x onerror=window.__pwned=7>",
    "type_row": "<iframe src=javascript:window.__pwned=8>",
    "size_row": "<img src=x onerror=window.__pwned=9>",
}


def post(port, agent, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/ingest", data=json.dumps(body).encode(),
                                 headers={"x-ddscope-agent": agent, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        assert r.status == 204


def sample(writer, t):
    return {"k": "sample", "w": writer, "sn": 1, "topic": [PAYLOADS["topic"], "<b>Type</b>"], "tt": 1, "first": t, "first_ip": t,
            "last": t, "complete": True, "size": 100, "fexp": 1, "fseen": 1, "ipf": 1, "retx": 0, "retx_bytes": 0, "vendor": 272}


def test_agent_values_show_as_text_and_nothing_runs(tmp_path, artifacts):
    node = require_tool("node")
    port = free_port()
    serve = subprocess.Popen([ddscope_bin(), "serve", "--listen", f"127.0.0.1:{port}", "--window", "1ms"],
                             stdout=subprocess.DEVNULL, stderr=open(tmp_path / "serve.err", "w"))
    try:
        deadline = time.time() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.time() < deadline, (tmp_path / "serve.err").read_text()
                time.sleep(0.05)
        writer = "0110aaaa010203040506070800001203"
        counters = {"frames": PAYLOADS["frames"], "skipped": PAYLOADS["skipped"],
                    "kernel": {"dropped": PAYLOADS["kernel_dropped"], "if_dropped": PAYLOADS["if_dropped"]}}
        topics = [{"topic_name": PAYLOADS["topic_row"], "type_name": PAYLOADS["type_row"], "max_sample_size": PAYLOADS["size_row"],
                   "rate_now_hz": 10, "bandwidth_now_bps": 1000, "samples": 5}]
        base = {"sent_ns": 0, "dropped_items": 0}
        # A flow from the sender (named with a payload) to pc2, judged at once (window 1 ms).
        post(port, SENDER, {**base, "agent": SENDER, "seq": 1, "items": [sample(writer, 1_000_000_000)], "counters": counters, "topics": topics})
        post(port, "pc2", {**base, "agent": "pc2", "seq": 1, "items": [sample(writer, 1_002_000_000)]})
        for seq, agent in ((2, SENDER), (2, "pc2")):
            post(port, agent, {**base, "agent": agent, "seq": seq, "items": [{"k": "watermark", "t": 5_000_000_000}]})
        time.sleep(0.5)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/state", timeout=5) as r:
            state = json.loads(r.read())
        assert state["flows"] and state["flows"][0]["summary"]["delivered"] == 1, state["flows"]

        shot = artifacts / "dashboard-hostile-values.png"
        cp = subprocess.run([node, str(REPO / "tests" / "browser" / "xss.mjs"), f"http://127.0.0.1:{port}/", str(shot), "2500"],
                            capture_output=True, text=True, timeout=180)
        assert cp.returncode == 0, cp.stderr[-3000:]
        seen = json.loads(cp.stdout.strip().splitlines()[-1])
    finally:
        serve.send_signal(signal.SIGINT)
        serve.wait(10)
    assert seen["updates"] >= 1, seen  # the dashboard drew the state
    assert seen["pwned"] is None, f"a payload ran: {seen['pwned']}"
    assert seen["dialogs"] == [], seen["dialogs"]
    assert seen["imgs"] == 0, "a payload became an element"
    assert seen["title"] == "ddscope — live"
    text = seen["text"]
    shown = {SENDER, "/<img src=x onerror=window.__pwned=2>", *[v for k, v in PAYLOADS.items() if k != "topic"]}
    missing = [p for p in shown if p not in text]
    assert not missing, f"not shown literally: {missing}"
    assert "script-src 'self'" in seen["csp"] and "unsafe-inline" not in seen["csp"], seen["csp"]
    assert seen["csp_bypassed"] is None, "an inline event handler ran despite the Content-Security-Policy"
    # The only errors are the CSP refusing the hand-added inline handler.
    assert all("Content Security Policy" in e for e in seen["errors"]), seen["errors"]
