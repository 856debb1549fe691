"""Scale-out (issue 15): a shard whose traces pipeline lags the broadcast watermarks.

The Collector runs deploy/collector-shards-lagged.yaml: each shard's traces
queue is flushed only every 6 s (exporterhelper's queue batching) while the
agents' batch records (watermarks, end) go straight through the logs
pipeline — a traces pipeline 0 to 6 s behind, deterministically, more than
the shards' 3 s window. The same data goes to two groups of two shards:
"hold" shards (serve's default --otlp-hold) and "nohold" shards
(--otlp-hold 0s, the hold off). Agents also send directly to one `serve`.
Oracles:
  * the single `serve` fed directly: the hold shards' merged view gives
    exactly the same per-topic samples/delivered/lost and latency summaries;
  * `ddscope latency` on the run's captures: the same delivered/lost;
  * the shards' own skew measurement shows the traces really were more
    than the window behind the records (else the test proves nothing);
  * without the hold, the same lag shows: sightings counted late and the
    merged counts differ from the direct `serve` (the test can fail);
  * the Collector's metrics: nothing failed or dropped on the way.
Needs root (network namespaces).
"""
import json
import os
import subprocess
import time

import pytest

from conftest import ddscope_bin, free_port
from test_scaleout import (TOKEN, collector_bin, collector_metric, flows_of, get, get_json, lab_run_with_agents, same_summary,
                           settled, wait_http)

pytestmark = pytest.mark.usefixtures("needs_root")

WINDOW_S = 3
LAG_S = 6
COUNTS = ("samples", "delivered", "lost", "incomplete", "retransmitted_samples", "retransmitted_frags")


def test_the_hold_keeps_a_lagging_traces_pipeline_from_causing_false_losses(repo, tmp_path, processes):
    exe = ddscope_bin()
    otelcol = collector_bin(repo)
    logs = tmp_path

    def start(name, args, env=None):
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(logs / f"{name}.log", "w"), env=env)
        processes.append(p)
        return p

    common = ["--window", f"{WINDOW_S}s", "--idle", "5s"]
    direct = free_port()
    start("direct", [exe, "serve", "--listen", f"0.0.0.0:{direct}", "--token", TOKEN, *common])
    env = dict(os.environ, DDSCOPE_TRACES_LAG=f"{LAG_S}s")
    groups = {}
    for group, extra in (("hold", []), ("nohold", ["--otlp-hold", "0s"])):
        shards = []
        for i in (1, 2):
            http, grpc = free_port(), free_port()
            start(f"{group}{i}", [exe, "serve", "--listen", f"127.0.0.1:{http}", "--otlp-grpc", f"127.0.0.1:{grpc}",
                                  *common, *extra])
            env[f"DDSCOPE_{group.upper()}{i}_HTTP"] = f"127.0.0.1:{http}"
            env[f"DDSCOPE_{group.upper()}{i}_GRPC"] = f"127.0.0.1:{grpc}"
            shards.append(http)
        front = free_port()
        start(f"front-{group}", [exe, "serve", "--listen", f"127.0.0.1:{front}", "--federate",
                                 *[f"http://127.0.0.1:{h}" for h in shards]])
        groups[group] = (shards, front)
    otlp_in, col_metrics = free_port(), free_port()
    env.update(DDSCOPE_OTLP_IN=f"0.0.0.0:{otlp_in}", DDSCOPE_COLLECTOR_METRICS_PORT=str(col_metrics))
    start("collector", [otelcol, "--config", str(repo / "deploy/collector-shards-lagged.yaml")], env=env)
    for shards, front in groups.values():
        for h in shards:
            wait_http(f"http://127.0.0.1:{h}/healthz")
        wait_http(f"http://127.0.0.1:{front}/healthz")
    wait_http(f"http://127.0.0.1:{col_metrics}/metrics", timeout=60)

    out = tmp_path / "run"
    lab_run_with_agents(exe, repo, out, logs, direct, otlp_in)

    # The last traces flush comes up to LAG_S after the run; the records held after it go after the hold
    # (10 s) and the end's grace (2 s). Wait until every shard has let everything go and judged.
    deadline = time.time() + 90
    while True:
        per = {g: [get_json(f"http://127.0.0.1:{h}/api/state") for h in shards] for g, (shards, _) in groups.items()}
        if settled(per["hold"] + per["nohold"]) or time.time() > deadline:
            break
        time.sleep(1)
    assert settled(per["hold"] + per["nohold"]), [(s["otlp_hold"], s["pending"], [a["running"] for a in s["agents"]])
                                                  for s in per["hold"] + per["nohold"]]
    time.sleep(2.5)  # the fronts poll every second
    ref = get_json(f"http://127.0.0.1:{direct}/api/state", TOKEN)
    assert not any(a["running"] for a in ref["agents"]), ref["agents"]
    merged = {g: get_json(f"http://127.0.0.1:{front}/api/state") for g, (_, front) in groups.items()}
    for g, m in merged.items():
        assert all(s["ok"] for s in m["federation"]["shards"]), (g, m["federation"]["shards"])

    # The lag was real: the shards measured sightings more than the window behind their batch records.
    hold = merged["hold"]["otlp_hold"]["totals"]
    nohold = merged["nohold"]["otlp_hold"]["totals"]
    print(f"hold shards: {hold}\nno-hold shards: {nohold}")
    for t in (hold, nohold):
        assert t["skew"]["max_ms"] > WINDOW_S * 1000 and t["skew"]["over_window"] > 0, t
    assert hold["released_by_spans"] > 0, hold
    assert hold["evicted"] == 0, hold

    # With the hold: nothing late, and the merged view equals the directly fed serve exactly.
    assert hold["late_sightings"] == 0, hold
    rf, mf = flows_of(ref), flows_of(merged["hold"])
    assert set(rf) == set(mf), (sorted(rf), sorted(mf))
    for key in rf:
        for k in COUNTS:
            assert mf[key][k] == rf[key][k], f"{key}: {k} hold shards {mf[key][k]} vs one serve {rf[key][k]}"
        la, lb = dict(mf[key]["layers"]), dict(rf[key]["layers"])
        assert set(la) == set(lb), (key, sorted(la), sorted(lb))
        for layer in lb:
            same_summary(la[layer], lb[layer], f"{key} {layer}")
    cp = subprocess.run([exe, "latency", out, "--format", "json"], capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr
    off = {(f["topic"], f["sender"], f["receiver"]): f for f in json.loads(cp.stdout)["flows"]}
    for topic in ("/image", "/drive"):
        key = (topic, "pc1", "pc2")
        assert mf[key]["lost"] == 0, mf[key]
        for k in ("delivered", "lost"):
            assert mf[key][k] == off[key][k], f"{key}: {k} hold shards {mf[key][k]} vs ddscope latency {off[key][k]}"

    # Without the hold the same lag shows: late sightings counted, and the counts are not one serve's.
    nf = flows_of(merged["nohold"])
    diffs = {key: {k: (nf.get(key, {}).get(k), rf[key][k]) for k in ("samples", "delivered", "lost")
                   if nf.get(key, {}).get(k) != rf[key][k]} for key in rf}
    diffs = {k: v for k, v in diffs.items() if v}
    false_lost = sum(nf[k]["lost"] - rf[k]["lost"] for k in rf if k in nf)
    print(f"no-hold shards: {nohold['late_sightings']} late sightings, {false_lost} more lost than one serve; differences {diffs}")
    assert nohold["late_sightings"] > 0, nohold
    assert diffs, "without the hold the lagging traces pipeline should have changed the counts"

    # The Collector: every span and log record went out, none failed or was dropped.
    m = get(f"http://127.0.0.1:{col_metrics}/metrics").decode()
    assert collector_metric(m, "otelcol_receiver_accepted_spans_total") > 0, m[:2000]
    assert collector_metric(m, "otelcol_receiver_refused_spans_total") == 0
    for sig in ("spans", "log_records"):
        assert collector_metric(m, f"otelcol_exporter_send_failed_{sig}_total") == 0, sig
        assert collector_metric(m, f"otelcol_exporter_enqueue_failed_{sig}_total") == 0, sig
