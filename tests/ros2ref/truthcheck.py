#!/usr/bin/env python3
"""Compares refjoin.py's output on a ddslab-tracegen trace with the generator's truth.

    truthcheck.py TRUTH.jsonl REFJOIN.jsonl [TRACEGEN_STDOUT]

Prints a JSON report; exits 1 if a check fails. Used by tests/test_tracegen_ref.py.

The checks:
  * every take of the truth is in refjoin's output and conversely (DDS takes matched by
    pid, tid, node, topic and source timestamp; intra-process takes by their rank on the thread);
  * every take refjoin joins is joined to the right publish (publisher pid, node, topic,
    and its order: the publisher's N-th publish);
  * a take refjoin calls ambiguous is genuinely contested: the truth shows another
    publisher's publish of the topic whose window (the CLOCK_REALTIME instants read just
    before its rmw_publish and just after the next event of its thread, widened by the
    join's 10 us margins) contains the take's source timestamp;
  * every take that is not contested is joined (no "none" but Humble's intra-process
    takes, whose publish is not traced);
  * no take is joined to a /rosout or an rmw-internal publish;
  * taken-without-callback, publishes by class and rmw-internal takes agree in number.
"""
from __future__ import annotations

import bisect
import collections
import json
import sys

MARGIN = 10_000
NO_NEXT = 10_000_000
SLACK = 2_000  # trace clock vs CLOCK_REALTIME (measured below 1 us on one host)


def load_jsonl(path_or_lines):
    if isinstance(path_or_lines, (list, tuple)):
        lines = path_or_lines
    else:
        with open(path_or_lines) as f:
            lines = f.read().splitlines()
    return [json.loads(l) for l in lines if l.strip()]


def check(truth: list[dict], ref: list[dict], tracegen_out: list[dict] | None = None) -> dict:
    errors: list[str] = []
    summary = next((r["summary"] for r in ref if "summary" in r), None)
    rtakes = [r for r in ref if "summary" not in r]
    t_pubs = [r for r in truth if r["kind"] == "publish"]
    t_takes = [r for r in truth if r["kind"] == "take"]
    procs = {r["pid"]: r for r in truth if r["kind"] == "process"}

    # --- the truth's publishes, by publisher and by topic (their windows) ---
    by_key = {}
    windows = collections.defaultdict(list)  # topic -> [(lo, hi, (pid, node))]
    for p in t_pubs:
        by_key[(p["pid"], p["node"], p["topic"], p["order"])] = p
        if p["internal"] or p["source_ts"] is None:
            continue
        lo, hi = p["window"]
        if hi == 0:
            hi = lo + NO_NEXT
        windows[p["topic"]].append((lo - MARGIN - SLACK, hi + MARGIN + SLACK, (p["pid"], p["node"])))
    maxw = {tp: max(h - l for l, h, _ in ws) for tp, ws in windows.items()}
    for ws in windows.values():
        ws.sort()
    wkeys = {tp: [w[0] for w in ws] for tp, ws in windows.items()}

    def contested(take):
        """another publisher's window (per the truth) contains the take's source timestamp"""
        tp, ts = take["topic"], take["source_ts"]
        if tp not in windows or ts is None:
            return False
        keys = wkeys[tp]
        lo = bisect.bisect_left(keys, ts - maxw[tp])
        hi = bisect.bisect_right(keys, ts)
        mine = (take["publisher_pid"], take["publisher_node"])
        return any(l <= ts <= h and who != mine for l, h, who in windows[tp][lo:hi])

    # --- match refjoin's takes with the truth's ---
    t_dds = {}
    t_intra = collections.defaultdict(list)
    for t in t_takes:
        if t["internal"]:
            continue
        if t["intra"]:
            t_intra[(t["pid"], t["tid"], t["node"], t["topic"])].append(t)
        else:
            key = (t["pid"], t["tid"], t["node"], t["topic"], t["source_ts"])
            if key in t_dds:
                errors.append(f"truth: two takes with the same key {key}")
            t_dds[key] = t
    r_intra = collections.defaultdict(list)
    pairs = []
    unmatched_ref = 0
    for r in rtakes:
        if r["internal"]:
            continue
        if r["intra"]:
            r_intra[(r["pid"], r["tid"], r["node"], r["topic"])].append(r)
            continue
        t = t_dds.pop((r["pid"], r["tid"], r["node"], r["topic"], r["source_ts"]), None)
        if t is None:
            unmatched_ref += 1
            if len(errors) < 30:
                errors.append(f"refjoin take not in the truth: {r}")
        else:
            pairs.append((t, r))
    for key, lst in r_intra.items():
        tl = t_intra.pop(key, [])
        if len(tl) != len(lst):
            errors.append(f"intra-process takes on {key}: truth {len(tl)}, refjoin {len(lst)}")
        pairs.extend(zip(tl, lst))
    missing = len(t_dds) + sum(len(v) for v in t_intra.values())
    if missing:
        errors.append(f"{missing} truth takes are not in refjoin's output, e.g. "
                      f"{next(iter(t_dds.values()), None) or next(iter(t_intra.values()))[0]}")

    # --- judge every pair ---
    counts = collections.Counter()
    for t, r in pairs:
        counts["takes"] += 1
        j = r["join"]
        counts[j] += 1
        is_contested = contested(t)
        counts["contested"] += is_contested
        if r["callback"] != t["callback"]:
            errors.append(f"callback: truth {t['callback']}, refjoin {r['callback']}: {r}")
        if j in ("exact", "window", "intra"):
            p = r["publish"]
            want = (t["publisher_pid"], t["publisher_node"], t["topic"], t["order"])
            got = (p["pid"], p["node"], p["topic"], p["order"])
            if got != want:
                counts["wrong"] += 1
                if len(errors) < 30:
                    errors.append(f"wrong join ({j}): truth {want}, refjoin {got}; take {t}")
            tp = by_key.get(got)
            if tp is not None and (tp["rosout"] or tp["internal"]):
                errors.append(f"take joined to a /rosout or internal publish: {r}")
            if p["topic"] == "/rosout":
                errors.append(f"take joined to a /rosout publish: {r}")
        elif j == "ambiguous":
            if not is_contested:
                counts["ambiguous_uncontested"] += 1
                errors.append(f"ambiguous but the truth shows no other publisher's window: {t}")
            if not any((c["pid"], c["node"], c["order"]) == (t["publisher_pid"], t["publisher_node"], t["order"])
                       for c in r.get("candidates", [])):
                errors.append(f"ambiguous without the true publish among its candidates: {r}")
        elif j == "none" and t["intra"] and r["reason"] and "not traced" in r["reason"]:
            counts["intra_untraced"] += 1
        else:
            errors.append(f"take not joined ({j}, {r['reason']}): {t}")
        if j not in ("exact", "window", "intra") and not is_contested and not (j == "none" and t["intra"]):
            counts["uncontested_unjoined"] += 1

    # --- counts by class ---
    t_cnt = collections.Counter()
    for p in t_pubs:
        if not p["inter"] and not p["intra"]:
            continue
        t_cnt["internal" if p["internal"] else "rosout" if p["rosout"] else "data"] += 1
    t_internal_takes = sum(1 for t in t_takes if t["internal"])
    t_nocb = sum(1 for t in t_takes if not t["internal"] and not t["callback"])
    if summary is not None:
        sp = summary["publishes"]
        rosout_ref = sp.get("rosout", 0) + sp.get("unresolved", 0)
        if sp.get("data", 0) != t_cnt["data"]:
            errors.append(f"data publishes: truth {t_cnt['data']}, refjoin {sp.get('data', 0)}")
        if rosout_ref != t_cnt["rosout"]:
            errors.append(f"/rosout publishes: truth {t_cnt['rosout']}, refjoin {rosout_ref} (rosout + unresolved)")
        if sp.get("internal", 0) != t_cnt["internal"]:
            errors.append(f"internal publishes: truth {t_cnt['internal']}, refjoin {sp.get('internal', 0)}")
        if summary["internal_takes"] != t_internal_takes:
            errors.append(f"internal takes: truth {t_internal_takes}, refjoin {summary['internal_takes']}")
        if summary["without_callback"] != t_nocb:
            errors.append(f"takes without callback: truth {t_nocb}, refjoin {summary['without_callback']}")
        if tracegen_out is not None:
            want = collections.Counter()
            for line in tracegen_out:
                for k, v in line.get("events", {}).items():
                    want[k] += v
            got = summary["events_by_name"]
            if dict(want) != {k: v for k, v in got.items()}:
                errors.append(f"events in the trace differ from the generator's counts: "
                              f"{ {k: (want.get(k), got.get(k)) for k in set(want) | set(got) if want.get(k) != got.get(k)} }")
    report = {
        "truth": {"publishes": dict(t_cnt), "takes": len(t_takes) - t_internal_takes,
                  "internal_takes": t_internal_takes, "without_callback": t_nocb,
                  "killed": [p["procname"] for p in procs.values() if p["killed"]]},
        "refjoin": summary and {k: summary[k] for k in ("publishes", "takes", "internal_takes", "joined",
                                                          "by_join", "without_callback", "reasons")},
        "pairs": dict(counts),
        "errors": errors,
    }
    return report


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    truth = load_jsonl(argv[1])
    ref = load_jsonl(argv[2])
    tg = None
    if len(argv) > 3:  # tracegen's stdout (record.sh prints the trace directory first)
        with open(argv[3]) as f:
            tg = [json.loads(l) for l in f if l.startswith("{")]
        tg = [l for l in tg if "events" in l]
    rep = check(truth, ref, tg)
    json.dump(rep, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 1 if rep["errors"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
