"""Percentiles of signed values are the values of their ranks (issue 36, item 6).

Oracle: the nearest-rank percentile (rank ⌈q·n⌉ of the sorted values), computed here in Python from
the per-sample rows `ddscope latency` writes, against the summaries it prints for the same flows.
A jitter d(X) − d(X−1) is about half negative: the median used to be reported as the minimum.
The histogram has three significant digits, so a percentile may differ from its rank's value by
0.1 % (and 1 ns of rounding).
"""
import csv
import io
import json
import math

import subprocess

import pytest

from conftest import REPO, ddscope_bin

EXAMPLES = ["simple-robotic-cyclone", "simple-robotic-fastdds"]


def nearest_rank(values, q):
    s = sorted(values)
    k = min(max(math.ceil(q / 100 * len(s)), 1), len(s))
    return s[k - 1]


def run(*args):
    cp = subprocess.run([ddscope_bin(), *map(str, args)], capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout


@pytest.mark.parametrize("example", EXAMPLES)
def test_jitter_and_layer_percentiles_are_nearest_rank_values(example):
    d = REPO / "examples" / "captures" / example
    doc = json.loads(run("latency", d, "--format", "json"))
    rows = list(csv.DictReader(io.StringIO(run("latency", d, "--format", "csv"))))
    negative_medians = 0
    for f in doc["flows"]:
        key = (f["topic"], f["sender"], f["receiver"])
        mine = [r for r in rows if (r["topic_name"], r["sender"], r["receiver"]) == key and r["level"] == "message"]
        jitter = [int(r["jitter_ns"]) for r in mine if r["jitter_ns"]]
        message = [int(r["latency_ns"]) for r in mine if r["status"] == "delivered" and r["latency_ns"]]
        for name, summary, values in (("jitter", f["jitter"], jitter), ("message", dict(f["layers"])["message"], message)):
            assert summary["count"] == len(values), (key, name)
            if not values:
                continue
            assert summary["negative"] == sum(v < 0 for v in values), (key, name)
            for q in (50, 90, 99):
                want = nearest_rank(values, q)
                got = summary[f"p{q}_ms"] * 1e6
                assert abs(got - want) <= abs(want) * 0.001 + 1, f"{key} {name} p{q}: {got:.0f} ns, the rank's value {want} ns"
            if name == "jitter":
                negative_medians += nearest_rank(values, 50) < 0
    assert any(f["jitter"]["negative"] for f in doc["flows"]), "no negative jitter in the example: the test would prove nothing"
    print(f"{example}: {len(doc['flows'])} flows, {negative_medians} with a negative jitter median")
