"""Online monitoring keeps working when things go wrong (issue 6, item 8).

Real Cyclone DDS traffic (ddsperf) between two uniquely named network
namespaces; ddscope captures in one of them. Oracles: the kernel (the
interface really goes down and up), the server's own view of what arrived.
Needs root.
"""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import ddscope_bin, free_port, require_tool

pytestmark = pytest.mark.usefixtures("needs_root")


def sh(*args):
    subprocess.run(list(args), check=True, capture_output=True)


@pytest.fixture
def ddsperf_pair():
    """Namespaces A (publisher) and B (subscriber) joined by a veth pair, with ddsperf traffic."""
    require_tool("ddsperf")
    tag = f"{os.getpid() % 100000:05d}{os.urandom(2).hex()}"
    a, b = f"ddsrel-{tag}-a", f"ddsrel-{tag}-b"
    ia, ib = f"ra{tag}"[:15], f"rb{tag}"[:15]
    procs = []
    try:
        sh("ip", "netns", "add", a)
        sh("ip", "netns", "add", b)
        sh("ip", "link", "add", ia, "netns", a, "type", "veth", "peer", "name", ib, "netns", b)
        for ns, i, ip in ((a, ia, "10.77.0.1/24"), (b, ib, "10.77.0.2/24")):
            sh("ip", "-n", ns, "addr", "add", ip, "dev", i)
            sh("ip", "-n", ns, "link", "set", i, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "route", "add", "224.0.0.0/4", "dev", i)
        yield {"a": a, "b": b, "ia": ia, "ib": ib, "procs": procs}
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        subprocess.run(["ip", "netns", "del", a], capture_output=True)
        subprocess.run(["ip", "netns", "del", b], capture_output=True)


def start(pair, ns, *cmd, **kw):
    p = subprocess.Popen(["ip", "netns", "exec", pair[ns], *map(str, cmd)], **kw)
    pair["procs"].append(p)
    return p


def traffic(pair):
    start(pair, "b", "ddsperf", "-D30", "sub", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    start(pair, "a", "ddsperf", "-D30", "pub", "50", "size", "20000", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def frame_counts(text):
    return [int(x.split(" frames")[0].split()[-1]) for x in text.splitlines() if x.startswith("ddscope live —")]


def recreate_link(pair):
    """Deletes the veth pair and creates it again: same names, new ifindex."""
    sh("ip", "-n", pair["b"], "link", "del", pair["ib"])
    sh("ip", "link", "add", pair["ia"], "netns", pair["a"], "type", "veth", "peer", "name", pair["ib"], "netns", pair["b"])
    for ns, i, ip in ((pair["a"], pair["ia"], "10.77.0.1/24"), (pair["b"], pair["ib"], "10.77.0.2/24")):
        sh("ip", "-n", ns, "addr", "add", ip, "dev", i)
        sh("ip", "-n", ns, "link", "set", i, "up")
        sh("ip", "-n", ns, "route", "replace", "224.0.0.0/4", "dev", i)


def test_live_capture_survives_interface_down_up_and_recreation(ddsperf_pair, tmp_path):
    pair = ddsperf_pair
    log = tmp_path / "live.out"
    live = start(pair, "b", ddscope_bin(), "live", "-i", pair["ib"], "--duration", "20s", stdout=open(log, "w"), stderr=subprocess.STDOUT)
    time.sleep(1)
    traffic(pair)
    time.sleep(3)
    # 1. Down and up: the packet socket stays bound, capture goes on.
    sh("ip", "-n", pair["b"], "link", "set", pair["ib"], "down")
    time.sleep(2)
    sh("ip", "-n", pair["b"], "link", "set", pair["ib"], "up")
    sh("ip", "-n", pair["a"], "route", "replace", "224.0.0.0/4", "dev", pair["ia"])
    sh("ip", "-n", pair["b"], "route", "replace", "224.0.0.0/4", "dev", pair["ib"])
    time.sleep(4)
    after_up = frame_counts(log.read_text())[-1]
    # 2. The interface disappears and comes back with a new index: capture reopens.
    recreate_link(pair)
    assert live.wait(40) == 0
    text = log.read_text()
    counts = frame_counts(text)
    assert "stopped" in text and "reopened" in text, text[-3000:]
    assert counts[-1] > after_up + 50, (after_up, counts)
    assert "DDSPerfRDataKS" in text


def test_agent_keeps_capturing_until_the_server_comes(ddsperf_pair, tmp_path):
    pair = ddsperf_pair
    port = 18000 + os.getpid() % 1000
    agent = start(pair, "b", ddscope_bin(), "agent", "-i", pair["ib"], "--name", "pcb", "--send-to", f"http://127.0.0.1:{port}",
                  "--duration", "12s", stdout=subprocess.DEVNULL, stderr=open(tmp_path / "agent.err", "w"))
    time.sleep(1)
    traffic(pair)
    time.sleep(4)  # the server is down: the agent queues and backs off
    serve = start(pair, "b", ddscope_bin(), "serve", "--listen", f"127.0.0.1:{port}", stdout=subprocess.DEVNULL,
                  stderr=open(tmp_path / "serve.err", "w"))
    assert agent.wait(40) == 0, (tmp_path / "agent.err").read_text()
    err = (tmp_path / "agent.err").read_text()
    sent = int(err.split("sent ")[1].split(" items")[0])
    dropped = int(err.split("dropped ")[-1].split(",")[0])
    assert sent > 100 and dropped == 0, err
    q = subprocess.run(["ip", "netns", "exec", pair["b"], "python3", "-c",
                        f"import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:{port}/api/state').read().decode())"],
                       capture_output=True, text=True, check=True)
    state = json.loads(q.stdout)
    a = next(x for x in state["agents"] if x["name"] == "pcb")
    assert a["items"] == sent and a["lost_batches"] == 0, a
    assert any(t["topic_name"] == "DDSPerfRDataKS" and t["samples"] > 100 for t in a["topics"]), a["topics"]
    serve.send_signal(signal.SIGINT)


def test_agent_with_idle_scheduling_still_captures(ddsperf_pair, tmp_path):
    """`--sched idle`: every agent thread runs under SCHED_IDLE (oracle: the kernel's /proc/PID/task/*/sched),
    and the agent still decodes the traffic."""
    pair = ddsperf_pair
    agent = start(pair, "b", ddscope_bin(), "agent", "-i", pair["ib"], "--name", "pcb", "--sched", "idle",
                  "--export", "prometheus=127.0.0.1:0", "--duration", "6s",
                  stdout=subprocess.DEVNULL, stderr=open(tmp_path / "agent.err", "w"))
    time.sleep(1)
    traffic(pair)
    time.sleep(2)
    policies = {}
    for task in os.listdir(f"/proc/{agent.pid}/task"):
        with open(f"/proc/{agent.pid}/task/{task}/sched") as f:
            policies[task] = next(int(l.split(":")[1]) for l in f if l.startswith("policy"))
    assert len(policies) >= 2 and set(policies.values()) == {5}, policies  # 5 = SCHED_IDLE
    assert agent.wait(30) == 0, (tmp_path / "agent.err").read_text()
    err = (tmp_path / "agent.err").read_text()
    line = next(l for l in err.splitlines() if " frames; kernel: received " in l)
    frames = int(line.split(": ", 1)[1].split(" frames")[0])
    dropped = int(line.split("dropped ")[1].split(",")[0])
    assert frames > 200 and dropped == 0, line  # ddsperf sends 50 samples/s of 20 kB for 5 s


@pytest.mark.parametrize("thread", ["ddscope-system", "ddscope-metrics"])
def test_agent_stops_with_status_1_when_a_worker_thread_dies(needs_root, thread):
    """A worker thread that panics (the system sampler, or the Prometheus
    server; the panic injected with DDSCOPE_TEST_PANIC_THREAD) stops the agent
    instead of leaving it running without that part: within seconds, with a
    note and a closing line naming the thread and the panic, its capture's
    closing line still printed, and exit status 1. The same agent without the
    injection runs its --duration and exits 0 (the control)."""
    def agent(duration, **env):
        cmd = [ddscope_bin(), "agent", "-i", "lo", "--name", "w", "--export", f"prometheus=127.0.0.1:{free_port()}", "--duration", duration]
        base = {k: v for k, v in os.environ.items() if k != "DDSCOPE_TEST_PANIC_THREAD"}
        t0 = time.monotonic()
        cp = subprocess.run(cmd, env={**base, **env}, capture_output=True, text=True, timeout=60)
        return cp, time.monotonic() - t0
    cp, took = agent("20s", DDSCOPE_TEST_PANIC_THREAD=thread)
    assert cp.returncode == 70, cp.stderr  # anything else stopped the run (README: exit codes)
    assert took < 10, f"the agent ran {took:.1f} s after the {thread} thread died"
    assert f"the {thread} thread stopped (DDSCOPE_TEST_PANIC_THREAD={thread}: fault injected); the agent stops" in cp.stderr, cp.stderr
    assert f"agent w: stopped because a thread ended: {thread} (" in cp.stderr, cp.stderr
    assert "frames; kernel: received" in cp.stderr, cp.stderr
    cp, took = agent("2s")
    assert cp.returncode == 0 and "stopped because" not in cp.stderr and took >= 2, cp.stderr
