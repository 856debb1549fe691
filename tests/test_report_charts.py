"""The offline report's charts and tables, checked by looking (issue 38): Debian's headless
Chromium renders the report of bundled runs and tests/browser/inspect.mjs reads back what is
drawn, the coloured pixels inside each chart's plot area (axes, grid and labels are grey; legends
sit above the plot), the legend's entries, the axis labels with their units, and whether a table
reaches past its card. The runs' own numbers are the oracle for what must be drawn: the incident
the report's JSON lists, the payload sizes in MB, the iperf3 delays in µs."""
from __future__ import annotations

import json
import re

from conftest import REPO, browser_inspect

EX = REPO / "examples" / "captures"


def report(ddscope, tmp_path, run, name):
    html = tmp_path / f"{name}.html"
    ddscope("report", EX / run, "--html", html)
    data = json.loads(re.search(r"window\.DDSCOPE_REPORT = (\{.*?\});</script>", html.read_text(), re.S)[1].replace("<\\/", "</"))
    return html, data


def test_one_incident_is_drawn_with_its_cause_and_tables_scroll_in_their_cards(ddscope, tmp_path, artifacts):
    html, data = report(ddscope, tmp_path, "simple-robotic-cyclone", "one-incident")
    timeline = data["runs"][0]["incidents"]["timeline"]
    assert sum(len(s["points"]) for s in timeline) == 1, timeline  # the bundled run has one incident
    cause = timeline[0]["name"]
    for width in (1400, 700):
        seen = browser_inspect(html.as_uri(), artifacts / f"report-one-incident-{width}.png", 1500, width=width)
        assert not seen["errors"], seen["errors"]
        inc = [c for c in seen["charts"] if c["section"].startswith("incidents-")]
        assert len(inc) == 1, seen["charts"]
        # a marker, not an empty plot (a line of one point drew nothing), and the cause named
        assert inc[0]["points"] == 1 and inc[0]["plot_ink"] >= 20 and inc[0]["legend"] == [cause], inc[0]
        # no table reaches past its card; the wide ones scroll inside it
        assert not [t for t in seen["tables"] if t["spills"]], seen["tables"]
        if width == 700:
            assert any(t["scrollable"] for t in seen["tables"]), seen["tables"]


def test_axes_carry_the_unit_of_their_range(ddscope, tmp_path, artifacts):
    """Payload sizes of 2.7 MB are labelled MiB (was `2.50M` on a bytes axis); the iperf3 stream's
    one-way delays of a few µs on a µs axis (was 0.002…0.014 on ms)."""
    html, data = report(ddscope, tmp_path, "ros2-two-hosts", "units")
    seen = browser_inspect(html.as_uri(), artifacts / "report-units.png", 1500)
    assert not seen["errors"], seen["errors"]
    axes = [tuple(c["axes"]) for c in seen["charts"] if c["axes"]]
    assert ("time since start (s)", "MiB") in axes, axes
    assert ("time since start (s)", "delay (µs)") in axes, axes
    # every chart with data has it drawn inside its plot, legends outside it
    for c in seen["charts"]:
        if c["points"] and c["plot_ink"] is not None:
            assert c["plot_ink"] > 0, c


def test_a_report_of_traces_alone_shows_no_empty_capture_sections(ddscope, tmp_path, artifacts):
    """A report of a ros2_tracing trace alone (the bundled run's pc2 trace) has no capture table
    and no bandwidth chart with nothing in it (was: an empty table and "Bandwidth on the wire: no
    data"); it says the wire needs captures, and its latency charts are drawn."""
    html = tmp_path / "traces.html"
    ddscope("report", "--trace", f"pc2={EX / 'ros2-two-hosts' / 'pc2.lttng'}", "--html", html)
    seen = browser_inspect(html.as_uri(), artifacts / "report-traces-alone.png", 1500, ["traces alone, no capture"])
    assert not seen["errors"], seen["errors"]
    assert all(seen["found"].values()), seen["found"]
    assert not [c for c in seen["charts"] if c["section"] == "bandwidth"], seen["charts"]
    drawn = [c for c in seen["charts"] if c["points"]]
    assert drawn and all(c["plot_ink"] > 0 for c in drawn if c["plot_ink"] is not None), seen["charts"]
    # every table the page built has rows under its header
    assert seen["tables"] and all(t["rows"] > 1 for t in seen["tables"]), seen["tables"]


def test_cpu_per_host_is_drawn_from_the_runs_load(ddscope, tmp_path, artifacts):
    """A lab run's load.csv (read from /proc every 200 ms by the lab) shown per host: each host's
    processes (its nodes by run.json, `NAME_on_HOST` for tcpdump and iperf3) summed. Oracle: the CPU
    seconds each process's counters advanced over the run, summed per host, against the chart's area."""
    import csv
    html, data = report(ddscope, tmp_path, "ros2-two-hosts", "load")
    hosts = {h["name"]: h["cpu"] for h in data["runs"][0]["load"]["hosts"]}
    assert {"pc1", "pc2"} <= set(hosts), hosts.keys()
    node_host = {n["name"]: n["host"] for n in json.loads((EX / "ros2-two-hosts" / "run.json").read_text())["nodes"]}
    first, last = {}, {}
    for r in csv.DictReader((EX / "ros2-two-hosts" / "load.csv").open()):
        k = (r["process"], r["pid"])
        cpu = float(r["cpu_user_s"]) + float(r["cpu_system_s"])
        first.setdefault(k, (int(r["t_ns"]), cpu))
        last[k] = (int(r["t_ns"]), cpu)
    want = {}
    for (proc, pid), (t1, c1) in last.items():
        host = node_host.get(proc) or (proc.rsplit("_on_", 1)[1] if "_on_" in proc else "other")
        want[host] = want.get(host, 0.0) + c1 - first[(proc, pid)][1]
    for host, pts in hosts.items():
        # the chart's area (CPU % × s between readings) is the CPU seconds of the host's processes
        area = sum(pts[i][1] / 100 * (pts[i][0] - pts[i - 1][0]) for i in range(1, len(pts)))
        area += pts[0][1] / 100 * (pts[1][0] - pts[0][0]) if len(pts) > 1 else 0
        assert abs(area - want[host]) <= 0.1 * want[host] + 0.02, (host, area, want[host])
    seen = browser_inspect(html.as_uri(), artifacts / "report-cpu-per-host.png", 1500)
    assert not seen["errors"], seen["errors"]
    per_host = [c for c in seen["charts"] if c["section"] == "load" and c["legend"] and set(c["legend"]) == set(hosts)]
    assert per_host and per_host[0]["plot_ink"] > 50, [c for c in seen["charts"] if c["section"] == "load"]
