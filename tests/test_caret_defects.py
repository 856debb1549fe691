"""Issue 37, item 5: what scoring real traces against CARET and tracetools_analysis found, each
defect checked on the real CARET traces of ../shared/traces/caret-galactic (recorded by CARET's
authors, never copied here) or, for ping/pong, on a scenario recorded with real LTTng.

The expectations come from the traces' own events, read with babeltrace2's Python bindings by
tests/ros2ref/tracefacts.py (no code shared with ddscope), from tests/ros2ref/refjoin.py (the
reference join, same), from CARET's architecture files beside the traces (timer periods,
variable passings) and from the rate rule of docs/events.md#rates, re-implemented here:

1. in time / late of samples joined trace to trace: against the topic's publication period in the
   trace (the timer every publish was made in, else its one publisher's steady interval), never
   every sample late for want of a period (JSON, the HTML report);
2. a chain's last hop reached through a node's latest input only when that node does not relay the
   input inside its callback: `--path /pong,/ping` counts the /ping published in the /pong
   callback, not ping's timer publishes (refjoin and the generator's truth);
3. a chain's inputs dropped along the path counted and shown (CARET's variable passing: an input
   overwritten before the reading callback ran is dropped);
4. no all-zero writer GUID on rows whose trace declared no DDS writer;
5. the intra-process joins counted in the join summary;
6. callback and publish rates only for steady streams of 5 runs or more;
7. takes whose publisher's process stops appearing in the trace explained as such.

Needs python3-bt2 (Debian's /usr/bin/python3); the ping/pong case also root, lttng-tools and the
lab build (tests/test_tracegen_ref.py); each skips with the reason otherwise.
"""
from __future__ import annotations

import collections
import functools
import json
import math
import subprocess

import pytest
import yaml

from conftest import REPO
from test_tracegen_ref import CARET, SYSTEM_PYTHON, needs_bt2, needs_recording, record, refjoin

TRACEFACTS = REPO / "tests" / "ros2ref" / "tracefacts.py"
CARET_TRACES = ["talker_listener", "multi_talker_listener", "end_to_end_sample/cyclonedds",
                "end_to_end_sample/fastrtps", "cyclic_pipeline_intra_process"]
E2E_ARCH = "end_to_end_sample/architecture_modified.yaml"


def caret(name):
    p = CARET / name
    if not p.exists():
        pytest.skip(f"the public CARET traces are not at {CARET} (set DDSCOPE_SHARED_TRACES)")
    return p


@functools.lru_cache(maxsize=None)
def _facts(path: str) -> str:
    cp = subprocess.run([SYSTEM_PYTHON, str(TRACEFACTS), "facts", path], capture_output=True, text=True, timeout=600)
    assert cp.returncode == 0, f"tracefacts.py facts {path} exited {cp.returncode}:\n{cp.stderr}"
    return cp.stdout


def facts(trace) -> dict:
    return json.loads(_facts(str(trace)))


def doc_of(ddscope, *args):
    cp = ddscope("latency", *args, "--format", "json")
    return json.loads(cp.stdout), cp.stderr


def report_doc(html):
    text = html.read_text()
    return json.loads(text.split("window.DDSCOPE_REPORT = ", 1)[1].split(";</script>", 1)[0].replace("<\\/", "</"))


# --- the rate rule of docs/events.md#rates, from the samples' times --------------------------

def rate_rule(times, observed_until):
    """(rate_hz or None, kind) as docs/events.md "Rates" defines them."""
    times = sorted(times)
    n = len(times)
    if n == 0:
        return None, "no_samples"
    if n < 5:
        return None, "few"
    span = times[-1] - times[0]
    if span <= 0:
        return None, "bursty"
    k = n - 1
    mean = span / 1e9 / k
    sq = sum(((b - a) / 1e9) ** 2 for a, b in zip(times, times[1:]))
    cv = math.sqrt(max(sq / k - mean * mean, 0.0)) / mean
    if cv > 1.0:
        return None, "bursty"
    if span < 0.1 * (observed_until - times[0]):
        return None, "bursty"
    return k / (span / 1e9), "steady"


def kind_text(cb):
    if cb["kind"] == "sub":
        return f"subscription {cb['what']}"
    if cb["kind"] == "timer":
        ms = cb["what"] / 1e6
        return f"timer {int(ms) if ms == int(ms) else ms} ms"
    return f"service {cb['what']}"


def pub_instant(p):
    """A publish's instant as ddscope orders it: the DDS write, else rcl, else rclcpp."""
    return p["write"] or p["rcl"] or p["rclcpp"]


def host_end(f):
    """The last traced callback or publish: what a burst is judged against."""
    ends = [r["end"] or r["start"] for r in f["runs"]] + [pub_instant(p) for p in f["publishes"]]
    return max(ends)


def topic_period(f, topic):
    """The publication period of `topic` in the trace: the timer every publish was made in, else the
    mean interval of its one publisher's steady stream, else None."""
    ps = [p for p in f["publishes"] if p["topic"] == topic]
    periods = set()
    for p in ps:
        cb = f["callbacks"].get(f["runs"][p["run"]]["callback"]) if p["run"] is not None else None
        periods.add(cb["what"] if cb and cb["kind"] == "timer" else None)
    if len(periods) == 1 and None not in periods:
        return periods.pop()
    publishers = {(p["pid"], p["handle"]) for p in ps}
    if len(publishers) != 1:
        return None
    hz, _ = rate_rule([pub_instant(p) for p in ps], host_end(f))
    return None if hz is None else round(1e9 / hz)


# --- 1. in time / late -------------------------------------------------------------------------

@needs_bt2
@pytest.mark.parametrize("name", ["talker_listener", "end_to_end_sample/cyclonedds", "end_to_end_sample/fastrtps"])
def test_trace_only_in_time_and_late(ddscope, tmp_path, name):
    """Before: every sample of a flow joined trace to trace was `late` (in_time 0: no wire period).
    Now, against the topic's publication period in the trace: the timer periods CARET's
    architecture file declares (/chatter 1 s; /topic1 50 ms, /drive and /topic4 100 ms), else the
    mean interval of the one publisher's steady stream (/topic2, /topic3), else neither counted
    (/parameter_events: several publishers, bursts). ros_e2e per sample from refjoin."""
    trace = caret(name)
    f = facts(trace)
    arch = yaml.safe_load((caret(E2E_ARCH) if name.startswith("end_to_end") else trace / "architecture.yaml").read_text())
    declared = {}  # CARET's figure: topic -> period of the timer callback publishing it
    for node in arch["nodes"]:
        timers = {c["callback_name"]: c.get("period_ns") for c in node.get("callbacks", []) if c["type"] == "timer_callback"}
        for pub in node.get("publishes", []) or []:
            if pub.get("callback_name") in timers:
                declared[pub["topic_name"]] = timers[pub["callback_name"]]
    ref = [r for r in refjoin(trace) if "summary" not in r and r.get("join") in ("exact", "window", "intra") and r["callback_start"]]
    e2e = collections.defaultdict(list)
    for r in ref:
        p = r["publish"]
        e2e[r["topic"]].append(r["callback_start"] - (p["intra_publish"] or p["rclcpp_publish"] or p["rcl_publish"] or p["rmw_publish"]))
    doc, _ = doc_of(ddscope, "--trace", trace)
    html = tmp_path / "r.html"
    ddscope("report", "--trace", trace, "--html", html)
    rep = {fl["summary"]["topic"]: fl["summary"] for t in report_doc(html)["topics"] for fls in t["runs"].values() for fl in fls}
    flows = {fl["topic"]: fl for fl in doc["flows"]}
    assert set(flows) == set(e2e), (set(flows), set(e2e))
    judged = 0
    for topic, fl in flows.items():
        period = topic_period(f, topic)
        if topic in declared:
            assert period == declared[topic], (topic, period, declared[topic])
        if period is None:
            want = (None, None)
            assert fl["period_ms"] is None, fl
        else:
            n_in = sum(1 for v in e2e[topic] if v <= period)
            want = (n_in, len(e2e[topic]) - n_in)
            assert fl["period_ms"] == pytest.approx(period / 1e6, rel=1e-9), (topic, fl["period_ms"], period)
            judged += 1
        assert (fl["in_time"], fl["late"]) == want, (topic, fl["in_time"], fl["late"], want)
        # the HTML report's flow table: the same numbers, empty cells where there is no period
        html_want = tuple("" if v is None else v for v in want)
        assert (rep[topic]["in_time"], rep[topic]["late"]) == html_want, (topic, rep[topic])
    assert judged >= 1 and any(fl["in_time"] for fl in flows.values())
    if name == "talker_listener":
        assert (flows["/chatter"]["in_time"], flows["/chatter"]["late"]) == (5, 0)


# --- 2. --path /pong,/ping ---------------------------------------------------------------------

@needs_recording
@pytest.mark.parametrize("distro,rmw", [("jazzy", "cyclonedds"), ("humble", "fastrtps")])
def test_pong_ping_path_ends_only_in_relayed_pings(ddscope, tmp_path_factory, tmp_path, distro, rmw):
    """ping publishes /ping from its timer and, every second /pong, from its /pong callback. Only
    the latter read a /pong: `--path /pong,/ping` has as many instances as the generator's truth
    shows /ping publishes on the thread that took /pong and pong took (before: the timer's
    publishes too, through ping's latest /pong: twice as many, end-to-end ~5 ms instead of µs),
    with refjoin's end-to-end values."""
    run = record(tmp_path_factory, "pingpong", distro, rmw)
    pong_tids = {(t["pid"], t["tid"]) for t in run.truth if t["kind"] == "take" and t["topic"] == "/pong"}
    taken = {(t["publisher_pid"], t["order"]) for t in run.truth if t["kind"] == "take" and t["topic"] == "/ping"}
    relayed = [p for p in run.truth if p["kind"] == "publish" and p["topic"] == "/ping"
               and (p["pid"], p["tid"]) in pong_tids and (p["pid"], p["order"]) in taken]
    timer = [p for p in run.truth if p["kind"] == "publish" and p["topic"] == "/ping" and (p["pid"], p["tid"]) not in pong_tids]
    assert relayed and len(timer) > len(relayed) / 2
    ref = run.chains(["/pong", "/ping"])
    out = tmp_path / "chain.jsonl"
    cp = ddscope("latency", "--trace", run.trace, "--path", "/pong,/ping", "--rows", out)
    hops = [json.loads(l) for l in out.read_text().splitlines()]
    ours = sorted({(h["instance"], h["chain_e2e_ns"]) for h in hops})
    assert len(ours) == len(ref) == len(relayed), (len(ours), len(ref), len(relayed))
    assert sorted(e for _, e in ours) == sorted(c["e2e_ns"] for c in ref)
    assert "through a node's latest input" not in cp.stdout.splitlines()[0]
    # what the path's inputs became: each /pong either relayed (and taken) or not published from
    doc, _ = doc_of(ddscope, "--trace", run.trace, "--path", "/pong,/ping")
    ch = doc["chains"]["chain"]
    n_pong = sum(1 for t in run.truth if t["kind"] == "take" and t["topic"] == "/pong" and t["callback"])
    assert ch["inputs"] == n_pong and ch["inputs_complete"] == len(relayed)
    assert ch["dropped"] + ch["unfinished"] == n_pong - len(relayed)


# --- 3. inputs dropped along a chain -----------------------------------------------------------

def caret_inputs(f, path, arch):
    """What became of each input of `path` under CARET's semantics (its architecture file): a
    take goes on by a publish of the next topic inside its callback run, or through a variable
    passing (write callback -> read callback) by the first run of the read callback starting
    after the write run ended, unless another write run ended before that (overwritten:
    dropped). Returns {"complete": n, "dropped": {hop: n}, "cut": n} where cut = the trace ended
    before the next step could happen."""
    cbs = f["callbacks"]
    by_cb = collections.defaultdict(list)
    for r in f["runs"]:
        if r["end"] is not None:
            by_cb[r["callback"]].append(r)
    key = {cid: (cb["node"], cb["kind"], cb["what"]) for cid, cb in cbs.items()}
    name_of = {}  # (node, callback_name) -> callback id, from the architecture's callbacks
    for node in arch["nodes"]:
        for c in node.get("callbacks", []):
            want = (node["node_name"], "sub" if c["type"] == "subscription_callback" else "timer",
                    c.get("topic_name") if c["type"] == "subscription_callback" else c.get("period_ns"))
            ids = [cid for cid, k in key.items() if k == want]
            assert len(ids) == 1, (want, ids)
            name_of[(node["node_name"], c["callback_name"])] = ids[0]
    passings = collections.defaultdict(list)  # write callback id -> read callback ids
    for node in arch["nodes"]:
        for v in node.get("variable_passings", []) or []:
            passings[name_of[(node["node_name"], v["callback_name_write"])]].append(name_of[(node["node_name"], v["callback_name_read"])])
    pubs_of_run = collections.defaultdict(list)
    for p in f["publishes"]:
        if p["run"] is not None:
            pubs_of_run[p["run"]].append(p)
    index = {id(r): i for i, r in enumerate(f["runs"])}
    takes = collections.defaultdict(list)  # (topic, stamp) -> runs
    for r in f["runs"]:
        cb = cbs.get(r["callback"])
        if cb and cb["kind"] == "sub" and r["stamp"] is not None:
            takes[(cb["what"], r["stamp"])].append(r)
    out = {"complete": 0, "dropped": collections.Counter(), "cut": 0}
    end = f["end"]
    first = [r for r in f["runs"] if r["stamp"] is not None and cbs.get(r["callback"], {}).get("kind") == "sub"
             and cbs[r["callback"]]["what"] == path[0] and r["callback"] in {name_of[k] for k in name_of}]
    for r0 in first:
        cur, fate = [r0], "complete"
        for i in range(1, len(path)):
            nxt, why = [], "dropped"
            for r in cur:
                ps = [p for p in pubs_of_run[index[id(r)]] if p["topic"] == path[i]]
                for read in passings.get(r["callback"], []) if not ps else []:
                    nr = next((x for x in by_cb[read] if x["start"] >= r["end"]), None)
                    if nr is None:
                        why = "cut"
                        continue
                    if any(r["end"] < w["end"] <= nr["start"] for w in by_cb[r["callback"]] if w is not r):
                        continue  # overwritten before the read
                    ps += [p for p in pubs_of_run[index[id(nr)]] if p["topic"] == path[i]]
                for p in ps:
                    tk = takes.get((path[i], p["stamp"]), [])
                    if not tk and end - pub_instant(p) < 100_000_000:
                        why = "cut"
                    nxt += tk
            if not nxt:
                fate = (why, i)
                break
            cur = nxt
        if fate == "complete":
            out["complete"] += 1
        elif fate[0] == "cut":
            out["cut"] += 1
        else:
            out["dropped"][fate[1]] += 1
    out["inputs"] = len(first)
    return out


@needs_bt2
@pytest.mark.parametrize("rmw", ["cyclonedds", "fastrtps"])
def test_chain_counts_and_shows_dropped_inputs(ddscope, tmp_path, rmw):
    """CARET's end-to-end sample through its architecture file: /topic1 (50 ms) -> filter ->
    /topic2 -> message_driven (keeps the latest /topic2, publishes /topic3 from the /drive
    callback, 100 ms) -> /topic3 -> timer_driven (keeps the latest, publishes /topic4 from its
    100 ms timer) -> /topic4. About half the /topic2 inputs are overwritten before /drive reads
    them: CARET lists them as incomplete (dropped) path records. Before: "N instances (0 without
    an end-to-end value)" and nothing else; now the inputs, how many reached /topic4, how many
    were dropped and before which topic, and how many the trace's end cut — equal to the events
    walked with CARET's variable passings."""
    trace = caret(f"end_to_end_sample/{rmw}")
    arch_file = caret(E2E_ARCH)
    arch = yaml.safe_load(arch_file.read_text())
    path = ["/topic1", "/topic2", "/topic3", "/topic4"]
    want = caret_inputs(facts(trace), path, arch)
    assert sum(want["dropped"].values()) > 10 and want["complete"] > 20
    doc, _ = doc_of(ddscope, "--trace", trace, "--path", arch_file)
    ch = doc["chains"]["chain"]
    assert ch["path"] == path
    assert ch["inputs"] == want["inputs"]
    assert ch["inputs_complete"] == want["complete"]
    assert ch["dropped"] == sum(want["dropped"].values())
    assert {d["hop"]: d["inputs"] for d in ch["dropped_at"]} == dict(want["dropped"])
    assert all(d["topic"] == path[d["hop"]] for d in ch["dropped_at"])
    assert ch["unfinished"] == want["cut"]
    # shown in the text output and among the HTML report's notes
    text = ddscope("latency", "--trace", trace, "--path", arch_file).stdout.splitlines()[0]
    drop = ", ".join(f"{n} before {path[h]}" for h, n in sorted(want["dropped"].items()))
    assert (f"of {want['inputs']} inputs on /topic1: {want['complete']} reached /topic4, "
            f"{sum(want['dropped'].values())} dropped along the path ({drop}") in text, text
    html = tmp_path / "r.html"
    ddscope("report", "--trace", trace, "--path", arch_file, "--html", html)
    run = report_doc(html)["runs"][0]
    assert run["chains"]["measured"]["dropped"] == ch["dropped"]
    assert any(f"{ch['dropped']} dropped along the path" in w for w in run["warnings"]), run["warnings"]


# --- 4. writer GUID ----------------------------------------------------------------------------

@needs_bt2
@pytest.mark.parametrize("name", CARET_TRACES)
def test_no_all_zero_writer_guid(ddscope, tmp_path, name):
    """CARET's Galactic traces declare no DDS writer (no rmw_publisher_init, no gid anywhere): a
    row joined trace to trace has no GUID to name. Before: every row carried
    00000000000000000000000000000000 (GUID_UNKNOWN, as if all were one writer)."""
    trace = caret(name)
    f = facts(trace)
    assert not f["gids"] and "rmw_publisher_init" not in f["events"]
    out = tmp_path / "rows.jsonl"
    ddscope("latency", "--trace", trace, "--format", "jsonl", "-o", out)
    rows = [json.loads(l) for l in out.read_text().splitlines() if l.strip()]
    assert rows and all(r["writer_id"] is None for r in rows), {r["writer_id"] for r in rows}
    csv = tmp_path / "rows.csv"
    ddscope("latency", "--trace", trace, "--format", "csv", "-o", csv)
    assert "0" * 32 not in csv.read_text()
    exp = ddscope("latency", "--trace", trace, "--explain").stdout
    assert "writer 000000" not in exp


# --- 5. intra-process joins counted ------------------------------------------------------------

@needs_bt2
@pytest.mark.parametrize("name", CARET_TRACES)
def test_intra_process_joins_counted(ddscope, tmp_path, name):
    """Every CARET intra-process callback (dispatch_intra_process_subscription_callback, 23 in
    cyclic_pipeline_intra_process) is a take joined intra-process: the rows say
    join=intra_process and the join summary counts them (before: "0 intra-process", and the
    joined total without them)."""
    trace = caret(name)
    f = facts(trace)
    n_intra = f["events"].get("dispatch_intra_process_subscription_callback", 0)
    n_dds = f["events"].get("dispatch_subscription_callback", 0)
    out = tmp_path / "rows.jsonl"
    ddscope("latency", "--trace", trace, "--format", "jsonl", "-o", out)
    rows = [json.loads(l) for l in out.read_text().splitlines() if l.strip()]
    assert sum(1 for r in rows if r["join"] == "intra_process") == n_intra
    doc, err = doc_of(ddscope, "--trace", trace)
    j = doc["ros2_join"]
    assert j["takes_intra"] == n_intra
    assert j["takes_same_host"] == len(rows) == n_intra + n_dds
    assert f"({n_dds} by source timestamp, 0 by publish window, {n_intra} intra-process)" in err, err
    if name == "cyclic_pipeline_intra_process":
        assert n_intra == 23


# --- 6. rates ----------------------------------------------------------------------------------

@needs_bt2
@pytest.mark.parametrize("name", CARET_TRACES)
def test_callback_and_publish_rates_follow_the_rate_rule(ddscope, name):
    """Callback runs and publishes per callback get a rate only where `topics` would give one
    (docs/events.md#rates): 5 runs or more, intervals no more irregular than a random stream's,
    not a burst then silence. Before: `/pipe2 subscription /parameter_events 4 runs` had a rate.
    Expected from the callback_start and publish instants babeltrace2 reads."""
    trace = caret(name)
    f = facts(trace)
    end = host_end(f)
    doc, _ = doc_of(ddscope, "--trace", trace)
    # callbacks, by (node, kind, symbol)
    runs = collections.defaultdict(list)
    for r in f["runs"]:
        cb = f["callbacks"].get(r["callback"])
        if cb and cb["node"]:
            runs[(cb["node"], kind_text(cb), cb["symbol"] or "")].append(r["start"])
    rows = {(r["node"], r["callback"], r["symbol"]): r for r in doc["callbacks"]}
    assert set(rows) == set(runs), (set(rows) ^ set(runs))
    for k, times in runs.items():
        hz, kind = rate_rule(times, end)
        r = rows[k]
        assert (r["runs"], r["rate_kind"]) == (len(times), kind), (k, r["runs"], r["rate_kind"], kind)
        assert (r["rate_hz"] is None) == (hz is None) and (hz is None or r["rate_hz"] == pytest.approx(hz, rel=1e-3)), (k, r["rate_hz"], hz)
        if len(times) < 5:
            assert r["rate_hz"] is None
    # publishes per callback, by (node, the callback they were made in, topic)
    pubs = collections.defaultdict(list)
    for p in f["publishes"]:
        cb = f["callbacks"].get(f["runs"][p["run"]]["callback"]) if p["run"] is not None else None
        pubs[(p["node"], kind_text(cb) if cb else "(no traced callback)", p["topic"])].append(pub_instant(p))
    edges = {(r["node"], r["callback"], r["topic"]): r for r in doc["publishes_per_callback"]}
    assert set(edges) == set(pubs), (set(edges) ^ set(pubs))
    for k, times in pubs.items():
        hz, kind = rate_rule(times, end)
        r = edges[k]
        assert (r["publishes"], r["rate_kind"]) == (len(times), kind), (k, r, kind)
        assert (r["rate_hz"] is None) == (hz is None) and (hz is None or r["rate_hz"] == pytest.approx(hz, rel=1e-3)), (k, r["rate_hz"], hz)
    if name == "cyclic_pipeline_intra_process":
        few = rows[next(k for k in rows if k[0] == "/pipe2" and k[1] == "subscription /parameter_events")]
        assert few["runs"] == 4 and few["rate_hz"] is None and few["rate_kind"] == "few"


# --- 7. a publisher whose trace stops early ----------------------------------------------------

@needs_bt2
def test_takes_after_the_publishers_trace_stopped(ddscope, tmp_path):
    """multi_talker_listener with one talker's events after its second /chatter publish removed
    (what a killed process leaves when its last sub-buffer is lost): its listener's later takes
    have no traced publish. They are explained by the publisher's process whose events stop
    (named by pid), not as "publisher not traced, or its trace started later"."""
    src = caret("multi_talker_listener")
    f0 = facts(src)
    talker_pids = sorted({p["pid"] for p in f0["publishes"] if p["topic"].endswith("/chatter")})
    pid = talker_pids[0]
    mine = sorted((p for p in f0["publishes"] if p["pid"] == pid and p["topic"].endswith("/chatter")), key=pub_instant)
    assert len(mine) >= 4
    topic, after = mine[1]["topic"], pub_instant(mine[1]) + 1_000_000
    cut = tmp_path / "cut"
    cp = subprocess.run([SYSTEM_PYTHON, str(TRACEFACTS), "cut", str(src), str(cut), str(pid), str(after)],
                        capture_output=True, text=True, timeout=600)
    assert cp.returncode == 0, cp.stderr
    f = facts(cut)
    assert f["processes"][str(pid)]["last"] <= after and f["end"] > after + 2_000_000_000
    stamps = {p["stamp"] for p in f["publishes"]}
    lost = [r for r in f["runs"] if r["stamp"] is not None and r["stamp"] not in stamps
            and f["callbacks"].get(r["callback"], {}).get("what") == topic]
    assert len(lost) >= 2
    # the uncut trace: every take joined, nothing to explain
    doc0, err0 = doc_of(ddscope, "--trace", src)
    assert doc0["ros2_join"]["takes_unjoined"] == 0 and "stopped" not in err0
    doc, err = doc_of(ddscope, "--trace", cut)
    j = doc["ros2_join"]
    assert j["takes_unjoined"] == j["takes_unjoined_publisher_ended"] == len(lost), (j, len(lost))
    assert j["unjoined_publisher_ended_topics"] == {topic: len(lost)}
    assert [p for _, p in j["ended_publishers"][topic]] == [pid]
    assert (f"{len(lost)} takes without a traced publish, of samples stamped after the last traced publish of "
            f"their topic's publisher in process {pid}") in err, err
    assert "publisher not traced, or its trace started later" not in err
    procname = f["processes"][str(pid)]["procname"]
    assert f"process {procname} (pid {pid}): its events stop" in err, err
