"""Scale-out (issue 15): agents → OpenTelemetry Collector → 3 `serve` shards → merged view.

One lab run of the simple robotic application with an agent on each host
sending its correlation feed twice: directly to one `ddscope serve` (the JSON
stream, today's path) and as OTLP to a real OpenTelemetry Collector (built
with the collector builder by deploy/build-collector.sh: OTLP receiver,
contrib load-balancing exporter routing by trace id to three shards over
OTLP/gRPC, and a logs pipeline broadcasting the agents' watermarks to every
shard over OTLP/HTTP; deploy/collector-shards.yaml). A front
(`serve --federate`) merges the shards.
Oracles:
  * the single `serve` fed directly: the merged view must give exactly the
    same per-topic delivered/lost counts and latency summaries;
  * `ddscope latency` on the run's captures (offline, from the pcapng files):
    the same delivered/lost counts and message-latency summaries;
  * the Collector's own metrics: nothing refused or dropped on the way, and
    the load-balancing exporter really spread the spans over three shards.
Needs root (network namespaces).
"""
import json
import os
import re
import subprocess
import time
import urllib.request

import pytest

from conftest import ddscope_bin, free_port

pytestmark = pytest.mark.usefixtures("needs_root")

TOKEN = "t0k3n-" + os.urandom(4).hex()


def get(url, token=None, timeout=5):
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


def get_json(url, token=None):
    return json.loads(get(url, token))


def wait_http(url, token=None, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            get(url, token, timeout=1)
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{url} did not answer")


def collector_bin(repo):
    out = subprocess.run([repo / "deploy/build-collector.sh"], capture_output=True, text=True, timeout=3600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


def flows_of(state):
    return {(f["summary"]["topic"], f["summary"]["sender"], f["summary"]["receiver"]): f["summary"] for f in state["flows"]}


EXACT = ("count", "min_ms", "max_ms", "p50_ms", "p90_ms", "p99_ms", "negative")


def same_summary(a, b, what):
    for k in EXACT:
        assert a[k] == b[k], f"{what}: {k} {a[k]} != {b[k]}"
    for k in ("mean_ms", "std_ms"):
        # Welford moments merged with Chan's formula: floating point, not bit-exact.
        assert abs(a[k] - b[k]) <= 1e-9 * max(abs(b[k]), 1e-6), f"{what}: {k} {a[k]} != {b[k]}"


def collector_metric(text, name, **labels):
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        m = re.match(r"^(\w+)(\{[^}]*\})?\s+(\S+)", line)
        if not m or m.group(1) != name:
            continue
        lab = m.group(2) or ""
        if all(f'{k}="{v}"' in lab for k, v in labels.items()):
            total += float(m.group(3))
    return total


def settled(states):
    """Every agent ended, nothing held, nothing pending on each shard."""
    return all(s["otlp_hold"]["held_now"] == 0 and s["pending"]["samples"] == 0 and s["agents"]
               and not any(a["running"] for a in s["agents"]) for s in states)


def lab_run_with_agents(exe, repo, out, logs, direct, otlp_in):
    """The simple robotic workload for 15 s with an agent per host sending both to the direct
    `serve` and to the Collector; the run must be clean."""
    agent_args = f"--send-to http://{{gateway}}:{direct} --token {TOKEN} --send-otlp http://{{gateway}}:{otlp_in}"
    lab = subprocess.run([exe, "lab", "run", repo / "examples/lab/simple-robotic.toml", "--duration", "15s", "--out", out,
                          "--quiet", "--agent", agent_args], stdout=open(logs / "lab.out", "w"), stderr=open(logs / "lab.err", "w"),
                         timeout=300)
    assert lab.returncode == 0, (logs / "lab.err").read_text()[-3000:]
    run = json.loads((out / "run.json").read_text())
    assert run["ok"], run["failures"]
    assert [a["exit_code"] for a in run["agents"]] == [0, 0], run["agents"]
    return run


def test_sharded_correlation_behind_the_collector_equals_one_serve_and_offline(repo, tmp_path, processes):
    exe = ddscope_bin()
    otelcol = collector_bin(repo)
    logs = tmp_path

    def start(name, args, env=None):
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(logs / f"{name}.log", "w"), env=env)
        processes.append(p)
        return p

    # One serve fed directly (the reference), reachable from the lab namespaces.
    direct = free_port()
    start("direct", [exe, "serve", "--listen", f"0.0.0.0:{direct}", "--token", TOKEN, "--window", "3s", "--idle", "5s"])
    # Three shards: OTLP/HTTP on --listen (the broadcast watermarks), OTLP/gRPC for the load-balancing exporter.
    shards = []
    for i in range(3):
        http, grpc = free_port(), free_port()
        start(f"shard{i + 1}", [exe, "serve", "--listen", f"127.0.0.1:{http}", "--otlp-grpc", f"127.0.0.1:{grpc}",
                                "--window", "3s", "--idle", "5s"])
        shards.append((http, grpc))
    front = free_port()
    start("front", [exe, "serve", "--listen", f"127.0.0.1:{front}", "--federate",
                    *[f"http://127.0.0.1:{h}" for h, _ in shards]])
    otlp_in, col_metrics = free_port(), free_port()
    env = dict(os.environ, DDSCOPE_OTLP_IN=f"0.0.0.0:{otlp_in}", DDSCOPE_COLLECTOR_METRICS_PORT=str(col_metrics))
    for i, (h, g) in enumerate(shards):
        env[f"DDSCOPE_SHARD{i + 1}_HTTP"] = f"127.0.0.1:{h}"
        env[f"DDSCOPE_SHARD{i + 1}_GRPC"] = f"127.0.0.1:{g}"
    start("collector", [otelcol, "--config", str(repo / "deploy/collector-shards.yaml")], env=env)
    for h, _ in shards:
        wait_http(f"http://127.0.0.1:{h}/healthz")
    wait_http(f"http://127.0.0.1:{front}/healthz")
    wait_http(f"http://127.0.0.1:{col_metrics}/metrics", timeout=60)

    out = tmp_path / "run"
    run = lab_run_with_agents(exe, repo, out, logs, direct, otlp_in)

    # Judged a window after the last sample; a shard lets an agent's last batch records go once a later
    # sighting came or after --otlp-hold (10 s), and ends the agent 2 s after its OTLP end: wait until every
    # shard has let everything go and judged it.
    deadline = time.time() + 60
    while True:
        per_shard = [get_json(f"http://127.0.0.1:{h}/api/state") for h, _ in shards]
        done = settled(per_shard)
        if done or time.time() > deadline:
            break
        time.sleep(1)
    assert done, [(s["otlp_hold"], s["pending"]) for s in per_shard]
    time.sleep(2.5)  # the front polls every second
    ref = get_json(f"http://127.0.0.1:{direct}/api/state", TOKEN)
    merged = get_json(f"http://127.0.0.1:{front}/api/state")
    fed = merged["federation"]
    assert all(s["ok"] for s in fed["shards"]) and len(fed["shards"]) == 3, fed["shards"]
    assert fed["bad_documents"] == 0 and fed["bad_distributions"] == 0, fed
    # A healthy Collector: no sighting came after its time was judged.
    assert merged["otlp_hold"]["totals"]["late_sightings"] == 0, merged["otlp_hold"]
    # Every shard knows both agents (the broadcast batch records), none refused anything.
    for s in [ref, *per_shard]:
        assert s["correlation"]["submessages_held_dropped"] == 0, s["correlation"]
    for s in per_shard:
        assert {a["name"] for a in s["agents"]} == {"pc1", "pc2"}, s["agents"]
        assert s["server"]["otlp_refused_items"] == 0 and s["server"]["otlp_bad_requests"] == 0, s["server"]
        assert all(a["lost_batches"] == 0 for a in s["agents"]), s["agents"]
    # The load-balancing exporter spread the samples: every shard correlated a share.
    shares = [sum(f["summary"]["samples"] for f in s["flows"]) for s in per_shard]
    assert all(n > 0 for n in shares), shares

    rf, mf = flows_of(ref), flows_of(merged)
    assert set(rf) == set(mf), (sorted(rf), sorted(mf))
    for key in rf:
        a, b = mf[key], rf[key]
        for k in ("samples", "delivered", "lost", "incomplete", "retransmitted_samples", "retransmitted_frags"):
            assert a[k] == b[k], f"{key}: {k} merged {a[k]} vs one serve {b[k]} (shards {shares})"
        la, lb = dict(a["layers"]), dict(b["layers"])
        assert set(la) == set(lb), (key, sorted(la), sorted(lb))
        for layer in lb:
            # The submessage layer too: DATA_FRAGs due before their writer's sender is known are held, then
            # judged (docs/scale-out.md), so each shard measures every fragment one serve does.
            same_summary(la[layer], lb[layer], f"{key} {layer}")
    published = {t["topic"]: t for t in run["topics"]}
    for topic in ("/image", "/drive"):
        f = mf[(topic, "pc1", "pc2")]
        assert f["lost"] == 0, f
        truth = published[topic].get("truth")
        if isinstance(truth, dict):
            assert f["delivered"] == truth["published"], (topic, f["delivered"], truth)

    # Exported: the shards' /metrics add up to one serve's (docs/export.md, "Shards"): every latency
    # histogram bucket, count and sample counter summed over the shards equals the direct serve's.
    # (A label set's first rendering shows zeros, so Prometheus sees a counter start at 0: read twice.)
    def families(text):
        out = {}
        for m in re.finditer(r'^(ddscope_latency_seconds_(?:bucket|count|sum)|ddscope_latency_samples_total)\{([^}]*)\} (\S+)$', text, re.M):
            v = float(m.group(3))
            if v:
                out[(m.group(1), m.group(2))] = v
        return out
    for _ in range(2):
        one = families(get(f"http://127.0.0.1:{direct}/metrics", TOKEN).decode())
        summed = {}
        for h, _ in shards:
            for k, v in families(get(f"http://127.0.0.1:{h}/metrics").decode()).items():
                summed[k] = summed.get(k, 0.0) + v
    assert one and set(summed) == set(one), (sorted(set(one) ^ set(summed)))[:10]
    for k, v in one.items():
        if k[0].endswith("_sum"):
            assert abs(summed[k] - v) <= 1e-9 * max(1.0, one.get(("ddscope_latency_seconds_count", k[1]), 1.0)), (k, summed[k], v)
        else:
            assert summed[k] == v, f"{k}: shards sum to {summed[k]}, one serve {v}"
    print(f"/metrics: {len(one)} latency series, the shards' sums equal one serve's")

    # Offline on the run's captures.
    cp = subprocess.run([exe, "latency", out, "--format", "json"], capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr
    off = {(f["topic"], f["sender"], f["receiver"]): f for f in json.loads(cp.stdout)["flows"]}
    for topic in ("/image", "/drive"):
        key = (topic, "pc1", "pc2")
        for k in ("delivered", "lost"):
            assert mf[key][k] == off[key][k], f"{key}: {k} merged {mf[key][k]} vs ddscope latency {off[key][k]}"
        same_summary(dict(mf[key]["layers"])["message"], dict(off[key]["layers"])["message"], f"{key} message vs offline")
        print(f"{topic}: message latency merged {dict(mf[key]['layers'])['message']} / offline {dict(off[key]['layers'])['message']}")

    # The Collector: every span and log record went out, none failed or was dropped.
    m = get(f"http://127.0.0.1:{col_metrics}/metrics").decode()
    assert collector_metric(m, "otelcol_receiver_accepted_spans_total") > 0, m[:2000]
    assert collector_metric(m, "otelcol_receiver_refused_spans_total") == 0
    for sig in ("spans", "log_records"):
        assert collector_metric(m, f"otelcol_exporter_send_failed_{sig}_total") == 0, sig
        assert collector_metric(m, f"otelcol_exporter_enqueue_failed_{sig}_total") == 0, sig
    print(f"shards' shares of samples: {shares}")
