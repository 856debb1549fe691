"""The agent's token rule (issue 38, docs/export.md "Tokens"): `--token` / $DDSCOPE_TOKEN is the
central server's; the agent's /metrics needs it only where it listens beyond loopback, so that a
Prometheus on the robot scrapes a loopback /metrics as the agent's --help says. The agent replays
the bundled capture (`agent --read`); the oracle is the HTTP status a client gets."""
from __future__ import annotations

import os
import subprocess
import time
import urllib.error
import urllib.request

from conftest import REPO, ddscope_bin, free_port

CAPTURE = REPO / "examples" / "captures" / "simple-robotic-cyclone" / "pc1.pcapng.gz"
TOKEN = "t0ken-of-the-central-server"


def status(url, token=None):
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            body = r.read().decode()
            return r.status, body
    except urllib.error.HTTPError as e:
        return e.code, ""


def agent(listen: str, log):
    env = dict(os.environ, DDSCOPE_TOKEN=TOKEN)  # as the README's tour sets it
    return subprocess.Popen([ddscope_bin(), "agent", "--read", str(CAPTURE), "--speed", "0.2", "--name", "pc1",
                             "--export", f"prometheus={listen}"], env=env, stdout=subprocess.DEVNULL, stderr=log)


def wait_metrics(port, p, log_path, token=None):
    deadline = time.time() + 30
    while time.time() < deadline:
        assert p.poll() is None, log_path.read_text()
        try:
            return status(f"http://127.0.0.1:{port}/metrics", token)
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)
    raise AssertionError(f"no /metrics on port {port}: {log_path.read_text()}")


def test_loopback_metrics_open_and_beyond_loopback_guarded(tmp_path):
    port = free_port()
    log = tmp_path / "loopback.log"
    p = agent(f"127.0.0.1:{port}", open(log, "w"))
    try:
        code, body = wait_metrics(port, p, log)
        assert code == 200 and "ddscope_" in body, (code, body[:300])
    finally:
        p.terminate()
        p.wait(10)
    port = free_port()
    log = tmp_path / "any.log"
    p = agent(f"0.0.0.0:{port}", open(log, "w"))
    try:
        code, _ = wait_metrics(port, p, log)
        assert code == 401
        assert status(f"http://127.0.0.1:{port}/metrics", "wrong")[0] == 401
        code, body = status(f"http://127.0.0.1:{port}/metrics", TOKEN)
        assert code == 200 and "ddscope_" in body
    finally:
        p.terminate()
        p.wait(10)
