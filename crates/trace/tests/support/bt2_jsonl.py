#!/usr/bin/python3
"""The oracle: babeltrace2's own Python bindings (python3-bt2) read a trace and
print every event as one JSON line, in the format `examples/dump.rs --format
jsonl` prints: name, raw clock value, ns from origin, cpu_id, vpid, vtid,
procname and every payload field (integers as numbers, arrays as lists).

usage: bt2_jsonl.py TRACE_INPUT... (directories or one net:// URL)
"""
import json
import sys

import bt2


def value(f):
    if isinstance(f, bt2._StringFieldConst):
        return str(f)
    if isinstance(f, bt2._IntegerFieldConst):
        return int(f)
    if isinstance(f, bt2._ArrayFieldConst):
        return [value(e) for e in f]
    raise SystemExit(f"bt2_jsonl.py: unexpected field type {type(f).__name__}")


def main():
    inputs = sys.argv[1:]
    if not inputs:
        raise SystemExit(__doc__)
    if inputs[0].startswith("net://"):
        spec = bt2.ComponentSpec.from_named_plugin_and_component_class(
            "ctf", "lttng-live", {"inputs": inputs, "session-not-found-action": "end"})
        it = bt2.TraceCollectionMessageIterator(spec)
    else:
        it = bt2.TraceCollectionMessageIterator(inputs)
    out = sys.stdout
    discarded = 0
    for msg in it:
        if type(msg) is bt2._DiscardedEventsMessageConst:
            discarded += msg.count if msg.count is not None else 1
            continue
        if type(msg) is not bt2._EventMessageConst:
            continue
        ev = msg.event
        cs = msg.default_clock_snapshot
        rec = {"name": ev.name, "cycles": cs.value, "ns": cs.ns_from_origin}
        pc = ev.packet.context_field if ev.packet is not None else None
        rec["cpu_id"] = int(pc["cpu_id"]) if pc is not None and "cpu_id" in pc else None
        cc = ev.common_context_field
        for k in ("vpid", "vtid", "procname"):
            rec[k] = value(cc[k]) if cc is not None and k in cc else None
        rec["fields"] = {k: value(v) for k, v in ev.payload_field.items()}
        out.write(json.dumps(rec, separators=(",", ":")) + "\n")
    if discarded:
        sys.stderr.write(f"discarded_events={discarded}\n")


if __name__ == "__main__":
    main()
