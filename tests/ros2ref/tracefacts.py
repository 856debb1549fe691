#!/usr/bin/python3
"""What a ros2_tracing trace shows, straight from its events (babeltrace2's Python bindings), for
the tests that score ddscope against it (tests/test_caret_defects.py). Shares no code with ddscope.

    /usr/bin/python3 tests/ros2ref/tracefacts.py facts TRACE_DIR          # one JSON document
    /usr/bin/python3 tests/ros2ref/tracefacts.py cut TRACE_DIR OUT PID NS  # a copy without PID's events after NS

`facts` reads CARET's Galactic layout (tracetools 2.3 + ros2_caret:*; the traces of
../shared/traces/caret-galactic) and Jazzy/Humble's (rmw_* events):
  processes  pid -> procname, first and last event (ns from origin)
  callbacks  callback handle -> node, kind (subscription TOPIC | timer PERIOD_NS | service NAME), symbol
  runs       callback_start .. callback_end per thread, with the source stamp the dispatch or the
             rmw_take before it carried (CARET: dispatch_subscription_callback / dispatch_intra_process_
             subscription_callback; Jazzy/Humble: rmw_take(taken=1)) and whether it was intra-process
  publishes  per rclcpp_publish / rcl_publish of a publisher rcl_publisher_init declared: node, topic,
             the instants of rclcpp_publish (or rclcpp_intra_publish: `intra`), rcl_publish and the DDS
             write (CARET dds_write, else rmw_publish), the source stamp (CARET dds_bind_addr_to_stamp, Jazzy rmw_publish.timestamp)
             and the run it was made in (index into runs; null outside any callback)
  gids       rcl publisher handle -> the DDS gid's 16 first bytes (rmw_publisher_init), where declared
  events     count per event name, and `end`: the trace's last event

`cut` writes a CTF copy of the trace without process PID's events after NS (ns from origin): a
process whose last events are missing, as a killed process leaves them.
"""
from __future__ import annotations

import glob
import json
import os
import sys

try:
    import bt2
except ImportError:  # pragma: no cover
    sys.exit("tracefacts.py: python3-bt2 is needed (Debian: apt install python3-bt2; run with /usr/bin/python3)")


def _events(path):
    for m in bt2.TraceCollectionMessageIterator(str(path)):
        if type(m) is bt2._EventMessageConst:
            yield m.event, m.default_clock_snapshot.ns_from_origin


def facts(path) -> dict:
    nodes, pubs, subs, sub_obj, cbs, timers, timer_node, symbols, gids = {}, {}, {}, {}, {}, {}, {}, {}, {}
    rmw_pub = {}  # rmw publisher handle -> gid
    srv = {}
    procs, counts = {}, {}
    runs, publishes = [], []
    open_run, pending_take, open_pub = {}, {}, {}
    end = None
    for e, t in _events(path):
        end = t
        name = e.name.split(":", 1)[1]
        counts[name] = counts.get(name, 0) + 1
        ctx, p = e.common_context_field, e.payload_field
        pid, tid = int(ctx["vpid"]), int(ctx["vtid"])
        pr = procs.setdefault(pid, {"procname": str(ctx["procname"]), "first": t, "last": t})
        pr["last"] = t
        key = (pid, tid)
        if name == "rcl_node_init":
            ns = str(p["namespace"])
            nodes[(pid, int(p["node_handle"]))] = (ns.rstrip("/") + "/" + str(p["node_name"]))
        elif name == "rmw_publisher_init":
            rmw_pub[(pid, int(p["rmw_publisher_handle"]))] = [int(b) for b in p["gid"]][:16]
        elif name == "rcl_publisher_init":
            h = int(p["publisher_handle"])
            pubs[(pid, h)] = (int(p["node_handle"]), str(p["topic_name"]))
            g = rmw_pub.get((pid, int(p["rmw_publisher_handle"])))
            if g is not None:
                gids[f"{pid}:{h}"] = g
        elif name == "rcl_subscription_init":
            subs[(pid, int(p["subscription_handle"]))] = (int(p["node_handle"]), str(p["topic_name"]))
        elif name == "rclcpp_subscription_init":
            sub_obj[(pid, int(p["subscription"]))] = int(p["subscription_handle"])
        elif name == "rclcpp_subscription_callback_added":
            cbs[(pid, int(p["callback"]))] = ("sub", int(p["subscription"]))
        elif name == "rcl_timer_init":
            timers[(pid, int(p["timer_handle"]))] = int(p["period"])
        elif name == "rclcpp_timer_callback_added":
            cbs[(pid, int(p["callback"]))] = ("timer", int(p["timer_handle"]))
        elif name == "rclcpp_timer_link_node":
            timer_node[(pid, int(p["timer_handle"]))] = int(p["node_handle"])
        elif name == "rcl_service_init":
            srv[(pid, int(p["service_handle"]))] = (int(p["node_handle"]), str(p["service_name"]))
        elif name == "rclcpp_service_callback_added":
            cbs[(pid, int(p["callback"]))] = ("service", int(p["service_handle"]))
        elif name == "rclcpp_callback_register":
            symbols[(pid, int(p["callback"]))] = str(p["symbol"])
        elif name == "dispatch_subscription_callback":
            pending_take[key] = (int(p["source_stamp"]), False)
        elif name == "dispatch_intra_process_subscription_callback":
            pending_take[key] = (None, True)
        elif name == "rmw_take":
            if int(p["taken"]):
                pending_take[key] = (int(p["source_timestamp"]) or None, False)
        elif name == "callback_start":
            stamp, _ = pending_take.pop(key, (None, False))
            r = {"pid": pid, "tid": tid, "callback": int(p["callback"]), "start": t, "end": None,
                 "stamp": stamp, "intra": bool(int(p["is_intra_process"]))}
            open_run[key] = len(runs)
            runs.append(r)
        elif name == "callback_end":
            i = open_run.pop(key, None)
            if i is not None:
                runs[i]["end"] = t
        elif name == "rclcpp_publish":
            open_pub[key] = {"pid": pid, "tid": tid, "handle": None, "rclcpp": t, "rcl": None, "write": None,
                             "stamp": None, "run": open_run.get(key), "message": int(p["message"])}
            publishes.append(open_pub[key])
        elif name == "rclcpp_intra_publish":
            publishes.append({"pid": pid, "tid": tid, "handle": int(p["publisher_handle"]), "rclcpp": t, "rcl": None,
                              "write": None, "stamp": None, "run": open_run.get(key), "message": int(p["message"]),
                              "intra": True})
        elif name == "rcl_publish":
            q = open_pub.get(key)
            if q is None or q["handle"] is not None or q["message"] != int(p["message"]):
                # rcl alone (rcl's /rosout logging), or a publish rclcpp did not trace
                q = {"pid": pid, "tid": tid, "handle": None, "rclcpp": None, "rcl": None, "write": None,
                     "stamp": None, "run": open_run.get(key), "message": int(p["message"])}
                publishes.append(q)
                open_pub[key] = q
            q["handle"], q["rcl"] = int(p["publisher_handle"]), t
        elif name in ("dds_write", "rmw_publish"):
            q = open_pub.get(key)
            if q is not None and q["write"] is None:
                q["write"] = t
                if name == "rmw_publish" and "timestamp" in p:
                    q["stamp"] = int(p["timestamp"])
                    open_pub.pop(key)
        elif name == "dds_bind_addr_to_stamp":
            q = open_pub.pop(key, None)
            if q is not None and q["stamp"] is None:
                q["stamp"] = int(p["source_stamp"])

    def node_name(pid, h):
        return nodes.get((pid, h))

    callbacks = {}
    for (pid, cb), (kind, h) in cbs.items():
        node, what = None, None
        if kind == "sub":
            sh = sub_obj.get((pid, h))
            nh, what = subs.get((pid, sh), (None, None))
            node = node_name(pid, nh)
        elif kind == "timer":
            what = timers.get((pid, h))
            node = node_name(pid, timer_node.get((pid, h)))
        else:
            nh, what = srv.get((pid, h), (None, None))
            node = node_name(pid, nh)
        callbacks[f"{pid}:{cb}"] = {"node": node, "kind": kind, "what": what, "symbol": symbols.get((pid, cb))}
    out_pubs = []
    for q in publishes:
        decl = pubs.get((q["pid"], q["handle"]))
        if decl is None:
            continue  # rmw-internal or an undeclared handle (rcl's /rosout copies)
        q = dict(q, node=node_name(q["pid"], decl[0]), topic=decl[1])
        del q["message"]
        out_pubs.append(q)
    for r in runs:
        r["callback"] = f"{r['pid']}:{r['callback']}"
    return {"processes": {str(k): v for k, v in procs.items()}, "callbacks": callbacks, "runs": runs,
            "publishes": out_pubs, "gids": gids, "events": counts, "end": end}


def cut(src, dst, pid, after):
    """Copies the trace without process `pid`'s events after `after`."""

    class Drop(bt2._UserMessageIterator):
        def __init__(self, config, port):
            self._up = self._create_message_iterator(self._component._input_ports["in"])

        def __next__(self):
            while True:
                m = next(self._up)
                if type(m) is bt2._EventMessageConst:
                    ctx = m.event.common_context_field
                    if int(ctx["vpid"]) == pid and m.default_clock_snapshot.ns_from_origin > after:
                        continue
                return m

    class Filter(bt2._UserFilterComponent, message_iterator_class=Drop):
        def __init__(self, config, params, obj):
            # no user data on the ports: a port naming its component keeps the graph (and the
            # CTF sink's trace, whose metadata is written when it is freed) alive
            self._add_input_port("in")
            self._add_output_port("out")

    g = bt2.Graph()
    ctf, utils = bt2.find_plugin("ctf"), bt2.find_plugin("utils")
    dirs = sorted({os.path.dirname(m) for m in glob.glob(os.path.join(src, "**", "metadata"), recursive=True)})
    mux = g.add_component(utils.filter_component_classes["muxer"], "mux")
    n = 0
    for i, d in enumerate(dirs):
        s = g.add_component(ctf.source_component_classes["fs"], f"src{i}", params={"inputs": [d]})
        for port in s.output_ports.values():
            g.connect_ports(port, mux.input_ports[f"in{n}"])
            n += 1
    f = g.add_component(Filter, "drop")
    k = g.add_component(ctf.sink_component_classes["fs"], "sink", params={"path": str(dst)})
    g.connect_ports(mux.output_ports["out"], f.input_ports["in"])
    g.connect_ports(f.output_ports["out"], k.input_ports["in"])
    g.run()


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "facts":
        json.dump(facts(sys.argv[2]), sys.stdout)
        sys.stdout.write("\n")
    elif len(sys.argv) == 6 and sys.argv[1] == "cut":
        cut(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        print(sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
