#!/usr/bin/env python3
"""Writes grafana/dashboards/ddscope.json: the Grafana twin of ddscope's
built-in dashboard (thesis Figs. 4.10 and 4.11).

The InfluxQL panels reuse the documented queries of docs/queries/ (comment
lines dropped, the outer SELECT list narrowed to the plotted field), so the
dashboard and the documentation cannot drift apart. Run it after editing
either; crates/export/tests/grafana.rs checks the result against a real
Prometheus and a real InfluxDB.

    python3 grafana/make_dashboard.py [--out PATH]
"""
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROM = {"type": "prometheus", "uid": "ddscope-prometheus"}
INFLUX = {"type": "influxdb", "uid": "ddscope-influxdb"}


def documented(name, select=None):
    """A docs/queries file without its comments; `select` replaces the outer SELECT list."""
    text = (ROOT / "docs" / "queries" / name).read_text()
    q = " ".join(line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("--"))
    if select:
        # The outer SELECT list ends at the first FROM.
        q = re.sub(r"^SELECT .*? FROM", f"SELECT {select} FROM", q, count=1)
    return q


_next_id = [0]


def panel(title, kind, ds, targets, x, y, w=12, h=8, unit=None, description="", extra=None):
    _next_id[0] += 1
    p = {
        "id": _next_id[0],
        "type": kind,
        "title": title,
        "description": description,
        "datasource": ds,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "targets": [],
        "fieldConfig": {"defaults": {}, "overrides": []},
        "options": {},
    }
    for i, t in enumerate(targets):
        t = dict(t)
        t.setdefault("refId", chr(ord("A") + i))
        t["datasource"] = ds
        if ds is INFLUX:
            t["rawQuery"] = True
            t["resultFormat"] = t.get("resultFormat", "time_series")
        p["targets"].append(t)
    if unit:
        p["fieldConfig"]["defaults"]["unit"] = unit
    if kind == "timeseries":
        p["options"] = {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["mean", "max"]}, "tooltip": {"mode": "multi"}}
    if extra:
        p.update(extra)
    return p


def prom(expr, legend):
    return {"expr": expr, "legendFormat": legend, "range": True}


def influx(query, alias=""):
    return {"query": query, "alias": alias}


SEL_USER = 'capture=~"$capture",topic=~"$topic"'
panels = []
y = 0
panels.append({"id": 100, "type": "row", "title": "DDS latency between capture points", "collapsed": False, "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []})
y += 1
panels.append(panel(
    "DDS message latency per topic (p50, p99)", "timeseries", PROM, [
        prom('histogram_quantile(0.5, sum by (le, topic, sender, receiver) (rate(ddscope_latency_seconds_bucket{layer="message",topic=~"$topic"}[$__rate_interval])))', "p50 {{topic}} {{sender}}→{{receiver}}"),
        prom('histogram_quantile(0.99, sum by (le, topic, sender, receiver) (rate(ddscope_latency_seconds_bucket{layer="message",topic=~"$topic"}[$__rate_interval])))', "p99 {{topic}} {{sender}}→{{receiver}}"),
    ], 0, y, unit="s",
    description="First DATA/DATA_FRAG of a sample at the sender to the sample complete at the receiver (thesis 3.2.5), from the correlation of `ddscope serve` (Fig. 4.11, top)."))
panels.append(panel(
    "DDS submessage latency per topic (p50, p99)", "timeseries", PROM, [
        prom('histogram_quantile(0.5, sum by (le, topic, sender, receiver) (rate(ddscope_latency_seconds_bucket{layer="submessage",topic=~"$topic"}[$__rate_interval])))', "p50 {{topic}} {{sender}}→{{receiver}}"),
        prom('histogram_quantile(0.99, sum by (le, topic, sender, receiver) (rate(ddscope_latency_seconds_bucket{layer="submessage",topic=~"$topic"}[$__rate_interval])))', "p99 {{topic}} {{sender}}→{{receiver}}"),
    ], 12, y, unit="s",
    description="Per DATA_FRAG: first IP fragment at the sender to the last IP fragment at the receiver."))
y += 8
panels.append(panel(
    "DDS message latency per sample (computed in InfluxDB)", "timeseries", INFLUX, [
        influx(documented("message_latency.influxql", 'max("rx") - min("tx") AS "latency_ns"'), "$tag_topic_name"),
    ], 0, y, unit="ns",
    description="docs/queries/message_latency.influxql: the thesis's database query, grouped by writer and sample (time = the writer's source timestamp). $sender and $receiver pick the capture points.",
    extra={"fieldConfig": {"defaults": {"unit": "ns", "custom": {"drawStyle": "points", "pointSize": 4}}, "overrides": []}}))
panels.append(panel(
    "DDS submessage latency per fragment (computed in InfluxDB)", "timeseries", INFLUX, [
        influx(documented("submessage_latency.influxql", 'max("rx") - min("tx") AS "latency_ns"'), "$tag_topic_name frag $tag_frag"),
    ], 12, y, unit="ns",
    description="docs/queries/submessage_latency.influxql: grouped by writer, sample and fragment_starting_num.",
    extra={"fieldConfig": {"defaults": {"unit": "ns", "custom": {"drawStyle": "points", "pointSize": 3}}, "overrides": []}}))
y += 8
panels.append(panel(
    "In time, late and over budget", "timeseries", PROM, [
        prom('sum by (topic, sender, receiver, timing) (rate(ddscope_latency_timing_total{topic=~"$topic"}[$__rate_interval]))', "{{timing}} {{topic}} {{sender}}→{{receiver}}"),
        prom('sum by (topic, sender, receiver, layer) (rate(ddscope_latency_over_budget_total{topic=~"$topic"}[$__rate_interval]))', "over budget ({{layer}}) {{topic}} {{sender}}→{{receiver}}"),
    ], 0, y, unit="ops",
    description="Samples received within their publication period or late (seed 003; serve needs the period: INFO_TS spacing or --period), and samples whose layer went over its `serve --budget`."))
panels.append(panel(
    "Latency jitter and clock offsets", "timeseries", PROM, [
        prom('histogram_quantile(0.99, sum by (le, topic, sender, receiver) (rate(ddscope_latency_jitter_seconds_bucket{topic=~"$topic"}[$__rate_interval])))', "jitter p99 {{topic}} {{sender}}→{{receiver}}"),
        prom('max by (capture) (ddscope_clock_offset_seconds)', "clock offset {{capture}}"),
    ], 12, y, unit="s",
    description="Jitter: the change of a sample's message latency from the previous sample's of the same writer. Clock offsets: what serve adds to each capture point's times (--offset, or estimated)."))
y += 8
panels.append({"id": 103, "type": "row", "title": "ROS 2 layers and chains (agents with --trace-live)", "collapsed": False, "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []})
y += 1
ROS_LAYERS = "ros_publish|dds_send|dds_local|dds_remote|message|dds_receive|executor|callback"
panels.append(panel(
    "Where a message's time goes: p50 per layer", "timeseries", PROM, [
        prom(f'histogram_quantile(0.5, sum by (le, topic, sender, receiver, layer) (rate(ddscope_latency_seconds_bucket{{layer=~"{ROS_LAYERS}",topic=~"$topic"}}[$__rate_interval])))', "{{layer}} {{topic}} {{sender}}→{{receiver}}"),
    ], 0, y, unit="s",
    description="From the publishing node to the end of the subscriber's callback, layer by layer (docs/latency.md): ros_publish (rclcpp_publish → rmw_publish), dds_send (rmw_publish → first on the wire), message (wire, between the capture points), dds_receive (complete at the receiver → rmw_take), executor (rmw_take → callback_start), callback; same-host deliveries have dds_local instead of the wire layers. Stacked medians: each layer's own p50, so the stack approximates, not equals, the end-to-end p50.",
    extra={"fieldConfig": {"defaults": {"unit": "s", "custom": {"stacking": {"mode": "normal", "group": "A"}, "fillOpacity": 40}}, "overrides": []}}))
panels.append(panel(
    "ROS 2 end to end per topic (p50, p99)", "timeseries", PROM, [
        prom('histogram_quantile(0.5, sum by (le, topic, sender, receiver) (rate(ddscope_latency_seconds_bucket{layer="ros_e2e",topic=~"$topic"}[$__rate_interval])))', "p50 {{topic}} {{sender}}→{{receiver}}"),
        prom('histogram_quantile(0.99, sum by (le, topic, sender, receiver) (rate(ddscope_latency_seconds_bucket{layer="ros_e2e",topic=~"$topic"}[$__rate_interval])))', "p99 {{topic}} {{sender}}→{{receiver}}"),
    ], 12, y, unit="s",
    description="rclcpp_publish at the sender to callback_start at the receiver, per topic and pair of hosts, from the agents' live ros2_tracing sessions joined by serve."))
y += 8
panels.append(panel(
    "Chain end to end (p50, p99)", "timeseries", PROM, [
        prom('histogram_quantile(0.5, sum by (le, chain) (rate(ddscope_chain_latency_seconds_bucket{layer="chain_e2e"}[$__rate_interval])))', "p50 {{chain}}"),
        prom('histogram_quantile(0.99, sum by (le, chain) (rate(ddscope_chain_latency_seconds_bucket{layer="chain_e2e"}[$__rate_interval])))', "p99 {{chain}}"),
        prom('sum by (chain, status) (rate(ddscope_chain_instances_total[$__rate_interval]))', "instances {{status}} {{chain}}"),
    ], 0, y, unit="s",
    description="`serve --path /a,/b,/c`: the first topic's rclcpp_publish to the last topic's callback_start, across hosts; instances without an end-to-end value (an instant missing) are counted as incomplete.",
    extra={"fieldConfig": {"defaults": {"unit": "s"}, "overrides": [{"matcher": {"id": "byRegexp", "options": "instances.*"}, "properties": [{"id": "unit", "value": "ops"}, {"id": "custom.axisPlacement", "value": "right"}]}]}}))
panels.append(panel(
    "Chain hops: p50 per hop and layer", "timeseries", PROM, [
        prom('histogram_quantile(0.5, sum by (le, chain, hop, topic, layer) (rate(ddscope_chain_latency_seconds_bucket{hop!="e2e",layer=~"ros_publish|dds_send|dds_local|message|dds_receive|executor|node"}[$__rate_interval])))', "hop {{hop}} {{topic}} {{layer}}"),
    ], 12, y, unit="s",
    description="Each hop of the chain, layer by layer; `node` is the relay's own time (callback_start of its input to its publish of the next topic).",
    extra={"fieldConfig": {"defaults": {"unit": "s", "custom": {"stacking": {"mode": "normal", "group": "A"}, "fillOpacity": 40}}, "overrides": []}}))
y += 8
panels.append({"id": 101, "type": "row", "title": "Traffic per topic", "collapsed": False, "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []})
y += 1
panels.append(panel(
    "Payload size over time (Fig. 4.10)", "timeseries", INFLUX, [
        influx(documented("payload_size.influxql"), "$tag_capture $tag_topic_name"),
    ], 0, y, unit="bytes",
    description="Serialized size of every DDS sample (docs/queries/payload_size.influxql).",
    extra={"fieldConfig": {"defaults": {"unit": "bytes", "custom": {"drawStyle": "points", "pointSize": 3}}, "overrides": []}}))
panels.append(panel(
    "Mean sample size and sample rate", "timeseries", PROM, [
        prom(f'sum by (capture, topic) (rate(ddscope_sample_bytes_total{{{SEL_USER}}}[$__rate_interval])) / sum by (capture, topic) (rate(ddscope_samples_total{{{SEL_USER}}}[$__rate_interval]))', "size {{capture}} {{topic}}"),
    ], 12, y, unit="bytes"))
y += 8
panels.append(panel(
    "DDS bandwidth per topic", "timeseries", PROM, [
        prom(f'sum by (capture, topic) (rate(ddscope_payload_bytes_total{{{SEL_USER}}}[$__rate_interval])) * 8', "{{capture}} {{topic}}"),
    ], 0, y, unit="bps",
    description="Serialized payload of DATA and DATA_FRAG on the wire, retransmissions included."))
panels.append(panel(
    "DDS bandwidth per topic (InfluxDB)", "timeseries", INFLUX, [
        influx(documented("bandwidth_topic.influxql"), "$tag_capture $tag_topic_name"),
    ], 12, y, unit="bps", description="docs/queries/bandwidth_topic.influxql"))
y += 8
panels.append(panel(
    "Loss and retransmissions", "timeseries", PROM, [
        prom('sum by (topic, sender, receiver) (rate(ddscope_latency_samples_total{status!="delivered",topic=~"$topic"}[$__rate_interval]))', "lost/incomplete {{topic}} {{sender}}→{{receiver}}"),
        prom(f'sum by (capture, topic) (rate(ddscope_retransmitted_fragments_total{{{SEL_USER}}}[$__rate_interval]))', "retransmitted fragments {{capture}} {{topic}}"),
        prom(f'sum by (capture, topic) (rate(ddscope_nack_frags_total{{{SEL_USER}}}[$__rate_interval]) + rate(ddscope_acknacks_total{{{SEL_USER}}}[$__rate_interval]))', "ACKNACK+NACK_FRAG {{capture}} {{topic}}"),
    ], 0, y, unit="ops"))
panels.append(panel(
    "Capture and export health", "timeseries", PROM, [
        prom('sum by (capture) (rate(ddscope_capture_kernel_dropped_total[$__rate_interval]) + rate(ddscope_capture_interface_dropped_total[$__rate_interval]))', "kernel/interface drops {{capture}}"),
        prom('sum by (capture, reason) (rate(ddscope_decode_skipped_total[$__rate_interval]))', "skipped {{capture}} {{reason}}"),
        prom('sum by (sink, outcome) (rate(ddscope_export_records_total{outcome=~"dropped_queue_full|rejected|dropped_at_shutdown"}[$__rate_interval]))', "export {{sink}} {{outcome}}"),
        prom('sum by (kind) (rate(ddscope_export_dropped_updates_total[$__rate_interval]))', "series cap {{kind}}"),
    ], 12, y, unit="ops"))
y += 8
table_exprs = [
    ("samples/s", f'sum by (capture, topic, type) (rate(ddscope_samples_total{{{SEL_USER}}}[$__rate_interval]))'),
    ("bit/s", f'sum by (capture, topic, type) (rate(ddscope_payload_bytes_total{{{SEL_USER}}}[$__rate_interval])) * 8'),
    ("mean size", f'max by (capture, topic, type) (ddscope_sample_bytes_total{{{SEL_USER}}} / ddscope_samples_total{{{SEL_USER}}})'),
    ("IP frags/s", f'sum by (capture, topic, type) (rate(ddscope_ip_fragments_total{{{SEL_USER}}}[$__rate_interval]))'),
    ("retransmitted frags", f'sum by (capture, topic, type) (ddscope_retransmitted_fragments_total{{{SEL_USER}}})'),
    ("incomplete", f'sum by (capture, topic, type) (ddscope_incomplete_samples_total{{{SEL_USER}}})'),
    ("HEARTBEAT/s", f'sum by (capture, topic, type) (rate(ddscope_heartbeats_total{{{SEL_USER}}}[$__rate_interval]))'),
    ("ACKNACK/s", f'sum by (capture, topic, type) (rate(ddscope_acknacks_total{{{SEL_USER}}}[$__rate_interval]))'),
]
table = panel("Topics", "table", PROM, [
    {"expr": e, "legendFormat": name, "format": "table", "instant": True, "range": False} for name, e in table_exprs
], 0, y, w=24, h=8, description="One row per capture point and topic (like `ddscope topics`).")
table["transformations"] = [
    {"id": "merge", "options": {}},
    {"id": "organize", "options": {"excludeByName": {"Time": True}, "renameByName": {f"Value #{chr(ord('A') + i)}": name for i, (name, _) in enumerate(table_exprs)}}},
]
panels.append(table)
y += 8
panels.append({"id": 102, "type": "row", "title": "System (node_exporter metrics)", "collapsed": False, "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []})
y += 1
panels.append(panel(
    "Network bandwidth per interface (Fig. 4.11)", "timeseries", PROM, [
        prom('rate(node_network_receive_bytes_total{device!="lo"}[$__rate_interval]) * 8', "rx {{instance}} {{device}}"),
        prom('-rate(node_network_transmit_bytes_total{device!="lo"}[$__rate_interval]) * 8', "tx {{instance}} {{device}}"),
    ], 0, y, unit="bps", description="Received up, transmitted down (node_exporter names; ddscope agent or node_exporter)."))
panels.append(panel(
    "CPU per core", "timeseries", PROM, [
        prom('1 - sum by (instance, cpu) (rate(node_cpu_seconds_total{mode="idle"}[$__rate_interval])) / sum by (instance, cpu) (rate(node_cpu_seconds_total[$__rate_interval]))', "{{instance}} cpu{{cpu}}"),
    ], 12, y, unit="percentunit"))
y += 8
panels.append(panel(
    "Network drops and errors", "timeseries", PROM, [
        prom('rate(node_network_receive_drop_total[$__rate_interval]) + rate(node_network_transmit_drop_total[$__rate_interval])', "drops {{instance}} {{device}}"),
        prom('rate(node_network_receive_errs_total[$__rate_interval]) + rate(node_network_transmit_errs_total[$__rate_interval])', "errors {{instance}} {{device}}"),
    ], 0, y, unit="pps"))
panels.append(panel(
    "Memory in use", "timeseries", PROM, [
        prom("node_memory_MemTotal_bytes - node_memory_MemAvailable_bytes", "{{instance}}"),
        prom("process_resident_memory_bytes", "ddscope {{instance}}"),
    ], 12, y, unit="bytes"))
y += 8
panels.append(panel(
    "Network bandwidth per interface (InfluxDB)", "timeseries", INFLUX, [
        influx(documented("bandwidth_interface.influxql"), "$m $tag_host $tag_device"),
    ], 0, y, w=24, unit="bps", description="docs/queries/bandwidth_interface.influxql"))

dashboard = {
    "uid": "ddscope-overview",
    "title": "ddscope: DDS online monitoring",
    "description": "Per-topic DDS latency, traffic, loss and retransmissions next to CPU and network load (ddscope agents; thesis Figs. 4.10, 4.11).",
    "tags": ["ddscope", "dds", "ros2"],
    "schemaVersion": 39,
    "version": 1,
    "editable": True,
    "graphTooltip": 1,
    "refresh": "5s",
    "time": {"from": "now-15m", "to": "now"},
    "timepicker": {},
    "annotations": {"list": []},
    "links": [],
    "templating": {"list": [
        {"name": "capture", "label": "capture point", "type": "query", "datasource": PROM,
         "query": {"query": "label_values(ddscope_submessages_total, capture)", "refId": "capture"},
         "definition": "label_values(ddscope_submessages_total, capture)",
         "multi": True, "includeAll": True, "allValue": ".*", "refresh": 2, "current": {}},
        {"name": "topic", "label": "topic", "type": "query", "datasource": PROM,
         "query": {"query": 'label_values(ddscope_samples_total{capture=~"$capture"}, topic)', "refId": "topic"},
         "definition": 'label_values(ddscope_samples_total{capture=~"$capture"}, topic)',
         "multi": True, "includeAll": True, "allValue": ".*", "refresh": 2, "current": {}},
        {"name": "sender", "label": "sender (InfluxDB)", "type": "query", "datasource": INFLUX,
         "query": 'SHOW TAG VALUES FROM "ddscope_data" WITH KEY = "capture"',
         "definition": 'SHOW TAG VALUES FROM "ddscope_data" WITH KEY = "capture"',
         "multi": False, "includeAll": False, "refresh": 2, "current": {}},
        {"name": "receiver", "label": "receiver (InfluxDB)", "type": "query", "datasource": INFLUX,
         "query": 'SHOW TAG VALUES FROM "ddscope_data" WITH KEY = "capture"',
         "definition": 'SHOW TAG VALUES FROM "ddscope_data" WITH KEY = "capture"',
         "multi": False, "includeAll": False, "refresh": 2, "current": {}},
    ]},
    "panels": panels,
}

out = ROOT / "grafana" / "dashboards" / "ddscope.json"
if len(sys.argv) == 3 and sys.argv[1] == "--out":
    out = pathlib.Path(sys.argv[2])
elif len(sys.argv) != 1:
    sys.exit("usage: make_dashboard.py [--out PATH]")
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps(dashboard, indent=2, ensure_ascii=False) + "\n")
print(f"wrote {out} ({len(panels)} panels)")
