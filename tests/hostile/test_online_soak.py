"""A running `agent` and `serve` under forged traffic on the monitored link
(CI-sized version of bench/soak_online.py): memory stays under a ceiling,
`serve` keeps answering /healthz while the flood lasts, and the agent names
what it evicted.

Oracles: peak RSS from the kernel (VmHWM of each process), /healthz answered
over real HTTP, and the generator's own count of forged writers (with the
agent's writer cap set far below it, it must report evictions).
"""
from __future__ import annotations

import os
import pathlib
import shutil
import sys
import tempfile

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

import soak_online  # noqa: E402
from conftest import ddscope_bin  # noqa: E402

AGENT_CEILING_MB = 400
SERVE_CEILING_MB = 300


def need_root():
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.fail("this test needs root and iproute2 (network namespaces); CI runs as root")


@pytest.mark.parametrize("scenario,n", [("writers", 60_000), ("topics", 20_000)])
def test_agent_and_serve_stay_bounded_and_responsive(scenario, n):
    need_root()
    work = pathlib.Path(tempfile.mkdtemp(prefix="ddscope-online-soak-"))
    try:
        r = soak_online.soak(ddscope_bin(), scenario, n, ["--max-writers", "2000", "--limit", "discovery.max_endpoints=5000"], [],
                             work, 1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert r["frames_sent"] >= n, r["replay"]
    assert r["agent_rss_mb"] < AGENT_CEILING_MB, r
    assert r["serve_rss_mb"] < SERVE_CEILING_MB, r
    assert r["healthz_probes"] >= 5 and r["healthz_failures"] == 0, r
    assert r["healthz_max_ms"] < 2000, r
    tail = "\n".join(r["agent_tail"])
    assert "panicked" not in tail, tail
    # Far more writers (or endpoints) than the caps: the agent says what it forgot.
    assert "evicted (caps):" in tail, tail
