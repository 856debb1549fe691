#!/usr/bin/python3
"""Independent reference join of ros2_tracing traces: takes to publishes, and chains.

    /usr/bin/python3 tests/ros2ref/refjoin.py TRACE_DIR [--format jsonl|summary] [--path /a,/b]

Written from the tracepoint definitions only (tracetools' tp_call.h, Humble 4.1.x and
Jazzy 8.x; CARET's Galactic fork with its ros2_caret:* events), with babeltrace2's
Python bindings (python3-bt2: run it with Debian's /usr/bin/python3). It does not
share code or design with the product's Rust join; it is the oracle the Rust join is
compared against, sample by sample. Times are the events' clock snapshots,
`default_clock_snapshot.ns_from_origin` (ns since the Unix epoch).

Publishes (per thread, matched by message pointer):
  rclcpp_publish(message) -> rcl_publish(publisher_handle, message) -> rmw_publish(message
  [, rmw_publisher_handle, timestamp]); CARET: rcl_publish -> ros2_caret:dds_write(message)
  -> [dds_bind_addr_to_addr(addr_from, addr_to)] -> dds_bind_addr_to_stamp(addr,
  source_stamp); Jazzy intra-process: rclcpp_intra_publish(publisher_handle, message)
  [-> the inter-process chain of the same message].
  The topic comes from the rcl handle (rcl_publisher_init), else, for Jazzy, from the
  rmw handle of rmw_publish. An rmw_publish / dds_write with no rcl_publish before it is
  rmw-internal (ros_discovery_info). An rcl handle no rcl_publisher_init declared is
  unresolved (on Humble: rcl's /rosout copies): such a publish never claims a take of a
  resolved topic.
Takes: rmw_take(taken=1, source_timestamp != 0) -> the next callback_start on the thread
  whose callback belongs to that subscription (before the thread's next take or executor
  dispatch: otherwise taken without callback). CARET: dispatch_subscription_callback(
  message, callback, source_stamp) -> callback_start. rmw_take with source_timestamp 0
  or on an rmw-only reader is rmw-internal and counted apart.
Join of a take to its publish:
  exact   a publish of the same topic whose source timestamp is known (Jazzy
          rmw_publish.timestamp, CARET dds_bind_addr_to_stamp) equals the take's (+-2 ns);
  window  (Humble, the DDS write stamps the sample after the rmw_publish event) the
          publish of the same topic whose window [rmw_publish - 10 us, next event of the
          publishing thread + 10 us] (no next event: rmw_publish + 10 ms) contains the
          take's source timestamp, when exactly one publisher qualifies. Among one
          publisher's consecutive publishes: the one whose bare window [rmw_publish, next
          event] contains it if exactly one does, else the latest rmw_publish <= ts + 10 us;
  intra   Jazzy: rclcpp_ring_buffer_enqueue(buffer, index) after rclcpp_intra_publish ->
          rclcpp_ring_buffer_dequeue(buffer, index) -> callback_start(is_intra_process=1);
          CARET: dispatch_intra_process_subscription_callback(message, callback) -> the
          last rclcpp_intra_publish of that message in the process, same topic.
          Humble records no intra-process publish: such takes are "none".
  otherwise "ambiguous" (more than one publisher qualifies), "unresolved" (the take's
  subscription is not declared) or "none" (with the reason).
Chains: a publish made on a thread between callback_start and callback_end of a
  subscription callback is caused by that callback's take. --path /a,/b,... lists the
  chain instances; end-to-end = first topic's rclcpp_publish (else rcl_publish / intra
  publish) -> last topic's callback_start.
"""
from __future__ import annotations

import argparse
import bisect
import collections
import json
import os
import sys

try:
    import bt2
except ImportError:  # pragma: no cover
    sys.exit("refjoin.py: python3-bt2 is needed (Debian: apt install python3-bt2; run with /usr/bin/python3)")

MARGIN = 10_000  # 10 us
NO_NEXT = 10_000_000  # 10 ms
EXACT_TOL = 2  # ns


class MissingContext(Exception):
    pass


class Pub:
    """One publisher (an rcl_publisher_init)."""
    __slots__ = ("host", "pid", "handle", "rmw", "topic", "node_handle", "count", "uid")

    def __init__(self, host, pid, handle, rmw, topic, node_handle, uid):
        self.host, self.pid, self.handle, self.rmw = host, pid, handle, rmw
        self.topic, self.node_handle, self.count, self.uid = topic, node_handle, 0, uid


class Sub:
    __slots__ = ("host", "pid", "handle", "rmw", "topic", "node_handle")

    def __init__(self, host, pid, handle, rmw, topic, node_handle):
        self.host, self.pid, self.handle, self.rmw = host, pid, handle, rmw
        self.topic, self.node_handle = topic, node_handle


class Publish:
    __slots__ = ("host", "pid", "tid", "pub", "topic", "node", "cls", "order", "msg", "rclcpp",
                 "rcl", "rmw", "intra", "source_ts", "next", "caused_by", "takes", "alias", "idx")

    def __init__(self, host, pid, tid):
        self.host, self.pid, self.tid = host, pid, tid
        self.pub = self.topic = self.node = self.order = self.msg = None
        self.rclcpp = self.rcl = self.rmw = self.intra = self.source_ts = self.next = None
        self.cls = "data"
        self.caused_by = None
        self.takes = []
        self.alias = None
        self.idx = None

    def start_time(self):
        for t in (self.rclcpp, self.intra, self.rcl, self.rmw):
            if t is not None:
                return t
        return None

    def ident(self):
        return {"pid": self.pid, "tid": self.tid, "node": self.node, "topic": self.topic,
                "order": self.order, "rclcpp_publish": self.rclcpp, "rcl_publish": self.rcl,
                "rmw_publish": self.rmw, "intra_publish": self.intra, "source_ts": self.source_ts}


class Take:
    __slots__ = ("host", "pid", "tid", "sub", "topic", "node", "source_ts", "rmw_take", "dispatch",
                 "cb_start", "cb_end", "intra", "internal", "join", "reason", "publish",
                 "candidates", "closed")

    def __init__(self, host, pid, tid):
        self.host, self.pid, self.tid = host, pid, tid
        self.sub = self.topic = self.node = self.source_ts = self.rmw_take = self.dispatch = None
        self.cb_start = self.cb_end = None
        self.intra = self.internal = False
        self.join = self.reason = self.publish = None
        self.candidates = []
        self.closed = False

    def line(self):
        d = {"pid": self.pid, "tid": self.tid, "node": self.node, "topic": self.topic,
             "source_ts": self.source_ts, "rmw_take": self.rmw_take, "callback_start": self.cb_start,
             "callback_end": self.cb_end, "callback": self.cb_start is not None, "intra": self.intra,
             "internal": self.internal, "join": self.join, "reason": self.reason,
             "publish": self.publish.ident() if self.publish else None}
        if self.dispatch is not None:
            d["dispatch"] = self.dispatch
        if self.candidates:
            d["candidates"] = [{"pid": c.pid, "node": c.node, "topic": c.topic, "order": c.order,
                                "rmw_publish": c.rmw} for c in self.candidates]
        return d


class Thread:
    __slots__ = ("rclcpp", "rcl", "intra", "pending", "open_take", "open_intra", "stack", "caret")

    def __init__(self):
        self.rclcpp = self.rcl = self.intra = self.pending = None
        self.open_take = self.open_intra = None
        self.stack = []  # [callback, take or None]
        self.caret = None  # the publish whose dds_write awaits its stamp


class RefJoin:
    def __init__(self):
        self.nodes = {}  # (host, pid, node_handle) -> fq name
        self.rcl_pubs = {}  # (host, pid, rcl handle) -> Pub
        self.rmw_pubs = {}  # (host, pid, rmw handle) -> Pub (declared by an rcl_publisher_init)
        self.rmw_only_pubs = set()  # (host, pid, rmw handle) of rmw_publisher_init
        self.rcl_subs = {}
        self.rmw_subs = {}
        self.rmw_only_subs = set()
        self.rclcpp_subs = {}  # (host, pid, rclcpp subscription) -> rcl handle
        self.callbacks = {}  # (host, pid, callback) -> ("sub", rclcpp obj) | ("timer", h) | ("service", h)
        self.buf_to_ipb = {}
        self.ipb_to_sub = {}
        self.ring_slots = {}  # (host, pid, buffer, index) -> Publish
        self.intra_by_msg = {}  # (host, pid, message) -> last intra Publish (CARET)
        self.threads = collections.defaultdict(Thread)
        self.publishes = []
        self.takes = []
        self.events = 0
        self.names = collections.Counter()
        self.failed_takes = 0
        self.uid = 0

    # --- helpers ---------------------------------------------------------------
    def node_name(self, host, pid, handle):
        return self.nodes.get((host, pid, handle))

    def sub_of_callback(self, host, pid, cb):
        owner = self.callbacks.get((host, pid, cb))
        if not owner or owner[0] != "sub":
            return None
        rcl = self.rclcpp_subs.get((host, pid, owner[1]))
        if rcl is None:
            return None
        return self.rcl_subs.get((host, pid, rcl))

    def new_publish(self, host, pid, tid, th, t):
        p = Publish(host, pid, tid)
        if th.stack and th.stack[-1][1] is not None:
            p.caused_by = th.stack[-1][1]
        p.idx = len(self.publishes)
        self.publishes.append(p)
        return p

    def set_publisher(self, p, pub, host, pid, count=True):
        p.pub = pub
        if pub is None:
            p.cls = "unresolved"
            return
        p.topic = pub.topic
        p.node = self.node_name(host, pid, pub.node_handle)
        p.cls = "rosout" if pub.topic == "/rosout" else "data"
        if count:
            pub.count += 1
            p.order = pub.count

    def close_take(self, th):
        if th.open_take is not None:
            th.open_take.closed = True
            th.open_take = None

    # --- the scan ----------------------------------------------------------------
    def read(self, path):
        hosts = {}
        for msg in bt2.TraceCollectionMessageIterator(path):
            if type(msg) is not bt2._EventMessageConst:
                continue
            ev = msg.event
            name = ev.name
            if name.startswith("ros2:"):
                name = name[5:]
            elif name.startswith("ros2_caret:"):
                name = "caret:" + name[11:]
            else:
                continue
            self.events += 1
            self.names[name] += 1
            stream = ev.stream
            host = hosts.get(stream.addr)
            if host is None:
                env = stream.trace.environment
                host = str(env["hostname"]) if "hostname" in env else ""
                hosts[stream.addr] = host
            cc = ev.common_context_field
            if cc is None or "vpid" not in cc or "vtid" not in cc:
                raise MissingContext(ev.name)
            pid, tid = int(cc["vpid"]), int(cc["vtid"])
            t = msg.default_clock_snapshot.ns_from_origin
            self.event(host, pid, tid, t, name, ev.payload_field)

    def event(self, host, pid, tid, t, name, f):
        th = self.threads[(host, pid, tid)]
        if th.pending is not None:  # the next event of a publishing thread closes its window
            th.pending.next = t
            th.pending = None
        k = (host, pid)
        if name == "rcl_node_init":
            ns, nm = str(f["namespace"]), str(f["node_name"])
            self.nodes[k + (int(f["node_handle"]),)] = (ns.rstrip("/") + "/" + nm) if ns != "/" else "/" + nm
        elif name == "rmw_publisher_init":
            self.rmw_only_pubs.add(k + (int(f["rmw_publisher_handle"]),))
        elif name == "rcl_publisher_init":
            self.uid += 1
            rmw = int(f["rmw_publisher_handle"]) if "rmw_publisher_handle" in f else None
            pub = Pub(host, pid, int(f["publisher_handle"]), rmw, str(f["topic_name"]),
                      int(f["node_handle"]), self.uid)
            self.rcl_pubs[k + (pub.handle,)] = pub
            if rmw is not None:
                self.rmw_pubs[k + (rmw,)] = pub
                self.rmw_only_pubs.discard(k + (rmw,))
        elif name == "rmw_subscription_init":
            self.rmw_only_subs.add(k + (int(f["rmw_subscription_handle"]),))
        elif name == "rcl_subscription_init":
            rmw = int(f["rmw_subscription_handle"]) if "rmw_subscription_handle" in f else None
            sub = Sub(host, pid, int(f["subscription_handle"]), rmw, str(f["topic_name"]), int(f["node_handle"]))
            self.rcl_subs[k + (sub.handle,)] = sub
            if rmw is not None:
                self.rmw_subs[k + (rmw,)] = sub
                self.rmw_only_subs.discard(k + (rmw,))
        elif name == "rclcpp_subscription_init":
            self.rclcpp_subs[k + (int(f["subscription"]),)] = int(f["subscription_handle"])
        elif name == "rclcpp_subscription_callback_added":
            self.callbacks[k + (int(f["callback"]),)] = ("sub", int(f["subscription"]))
        elif name == "rclcpp_timer_callback_added":
            self.callbacks[k + (int(f["callback"]),)] = ("timer", int(f["timer_handle"]))
        elif name == "rclcpp_service_callback_added":
            self.callbacks[k + (int(f["callback"]),)] = ("service", int(f["service_handle"]))
        elif name == "rclcpp_buffer_to_ipb":
            self.buf_to_ipb[k + (int(f["buffer"]),)] = int(f["ipb"])
        elif name == "rclcpp_ipb_to_subscription":
            self.ipb_to_sub[k + (int(f["ipb"]),)] = int(f["subscription"])
        elif name == "rclcpp_publish":
            th.rclcpp = (int(f["message"]), t)
        elif name == "rcl_publish":
            th.rcl = (int(f["publisher_handle"]), int(f["message"]), t)
        elif name == "rclcpp_intra_publish":
            p = self.new_publish(host, pid, tid, th, t)
            p.intra, p.msg = t, int(f["message"])
            self.set_publisher(p, self.rcl_pubs.get(k + (int(f["publisher_handle"]),)), host, pid)
            th.intra = p
            self.intra_by_msg[k + (p.msg,)] = p
        elif name == "rclcpp_ring_buffer_enqueue":
            if th.intra is not None:
                self.ring_slots[k + (int(f["buffer"]), int(f["index"]))] = th.intra
        elif name == "rclcpp_ring_buffer_dequeue":
            self.close_take(th)
            th.open_intra = (self.ring_slots.get(k + (int(f["buffer"]), int(f["index"]))), int(f["buffer"]))
        elif name == "rmw_publish" or name == "caret:dds_write":
            self.publish_end(host, pid, tid, th, t, name, f)
        elif name == "caret:dds_bind_addr_to_addr":
            p = th.caret
            if p is not None and int(f["addr_from"]) in p.alias:
                p.alias.add(int(f["addr_to"]))
        elif name == "caret:dds_bind_addr_to_stamp":
            p = th.caret
            if p is not None and int(f["addr"]) in p.alias:
                p.source_ts = int(f["source_stamp"])
                th.caret = None
        elif name == "rmw_take":
            self.close_take(th)
            th.open_intra = None
            if int(f["taken"]) == 0:
                self.failed_takes += 1
                return
            tk = Take(host, pid, tid)
            tk.rmw_take = t
            tk.source_ts = int(f["source_timestamp"])
            rmw = k + (int(f["rmw_subscription_handle"]),)
            sub = self.rmw_subs.get(rmw)
            self.takes.append(tk)
            if tk.source_ts == 0 or (sub is None and rmw in self.rmw_only_subs):
                tk.internal, tk.join = True, "internal"
                tk.reason = "rmw-internal reader" if rmw in self.rmw_only_subs or sub is None else "no source timestamp"
                tk.closed = True
                return
            self.bind_sub(tk, sub, host, pid)
            th.open_take = tk
        elif name == "dispatch_subscription_callback":
            self.close_take(th)
            tk = Take(host, pid, tid)
            tk.dispatch, tk.source_ts = t, int(f["source_stamp"])
            self.bind_sub(tk, self.sub_of_callback(host, pid, int(f["callback"])), host, pid)
            self.takes.append(tk)
            th.open_take = tk
        elif name == "dispatch_intra_process_subscription_callback":
            self.close_take(th)
            tk = Take(host, pid, tid)
            tk.dispatch, tk.intra = t, True
            self.bind_sub(tk, self.sub_of_callback(host, pid, int(f["callback"])), host, pid)
            p = self.intra_by_msg.get(k + (int(f["message"]),))
            if p is not None and tk.topic is not None and p.topic == tk.topic:
                tk.join, tk.publish = "intra", p
            else:
                tk.join, tk.reason = "none", "no intra-process publish of this message and topic"
            self.takes.append(tk)
            th.open_take = tk
        elif name == "callback_start":
            self.callback_start(host, pid, tid, th, t, int(f["callback"]), int(f["is_intra_process"]))
        elif name == "callback_end":
            cb = int(f["callback"])
            for i in range(len(th.stack) - 1, -1, -1):
                if th.stack[i][0] == cb:
                    tk = th.stack[i][1]
                    if tk is not None:
                        tk.cb_end = t
                    del th.stack[i:]
                    break
        elif name == "rclcpp_executor_execute":
            self.close_take(th)

    def bind_sub(self, tk, sub, host, pid):
        tk.sub = sub
        if sub is None:
            tk.join, tk.reason = "unresolved", "subscription not declared in the trace"
        else:
            tk.topic = sub.topic
            tk.node = self.node_name(host, pid, sub.node_handle)

    def publish_end(self, host, pid, tid, th, t, name, f):
        k = (host, pid)
        msg = int(f["message"])
        rcl = th.rcl if th.rcl is not None and th.rcl[1] == msg else None
        th.rcl = None
        rclcpp = th.rclcpp if th.rclcpp is not None and th.rclcpp[0] == msg else None
        th.rclcpp = None
        rmw_handle = int(f["rmw_publisher_handle"]) if "rmw_publisher_handle" in f else None
        intra = th.intra
        th.intra = None
        if (intra is not None and rcl is not None and intra.msg == msg and intra.pub is not None
                and intra.pub.handle == rcl[0]):
            p = intra  # Jazzy: the inter-process part of an intra-process publish
        else:
            p = self.new_publish(host, pid, tid, th, t)
            p.msg = msg
            if rcl is not None:
                pub = self.rcl_pubs.get(k + (rcl[0],))
                if pub is None and rmw_handle is not None:
                    pub = self.rmw_pubs.get(k + (rmw_handle,))  # Jazzy: /rosout copies resolve by rmw handle
                self.set_publisher(p, pub, host, pid)
            else:
                pub = self.rmw_pubs.get(k + (rmw_handle,)) if rmw_handle is not None else None
                if pub is not None:
                    self.set_publisher(p, pub, host, pid)
                else:
                    p.cls = "internal"
        p.rcl = rcl[2] if rcl is not None else None
        p.rclcpp = rclcpp[1] if rclcpp is not None else None
        p.rmw = t
        if "timestamp" in f:
            p.source_ts = int(f["timestamp"])
        if name == "caret:dds_write":
            p.alias = {msg}
            th.caret = p
        th.pending = p

    def callback_start(self, host, pid, tid, th, t, cb, is_intra):
        tk = None
        if is_intra:
            if th.open_take is not None and th.open_take.intra:  # CARET dispatch_intra_...
                tk = th.open_take
                th.open_take = None
            elif th.open_intra is not None:  # Jazzy: dequeued from the subscription's ring buffer
                self.close_take(th)
                p, buf = th.open_intra
                th.open_intra = None
                tk = Take(host, pid, tid)
                tk.intra = True
                ipb = self.buf_to_ipb.get((host, pid, buf))
                obj = self.ipb_to_sub.get((host, pid, ipb)) if ipb is not None else None
                rcl = self.rclcpp_subs.get((host, pid, obj)) if obj is not None else None
                sub = self.rcl_subs.get((host, pid, rcl)) if rcl is not None else None
                if sub is None:
                    sub = self.sub_of_callback(host, pid, cb)
                self.bind_sub(tk, sub, host, pid)
                if p is not None and tk.topic is not None and p.topic == tk.topic:
                    tk.join, tk.publish = "intra", p
                elif tk.join is None:
                    tk.join, tk.reason = "none", "ring buffer slot without an intra-process publish"
                self.takes.append(tk)
            else:  # Humble: the intra-process publish is not traced
                self.close_take(th)
                tk = Take(host, pid, tid)
                tk.intra = True
                self.bind_sub(tk, self.sub_of_callback(host, pid, cb), host, pid)
                if tk.join is None:
                    tk.join, tk.reason = "none", "intra-process take: the publish is not traced (Humble)"
                self.takes.append(tk)
        else:
            ot = th.open_take
            if ot is not None:
                sub = self.sub_of_callback(host, pid, cb)
                if ot.sub is None or sub is ot.sub:
                    tk = ot
                    if ot.sub is None and sub is not None:
                        self.bind_sub(tk, sub, host, pid)
                        tk.join = tk.reason = None
                th.open_take = None
                if tk is None:
                    ot.closed = True
        if tk is not None:
            tk.cb_start = t
        th.stack.append([cb, tk])

    # --- the join ------------------------------------------------------------------
    def join(self):
        exact = collections.defaultdict(list)  # topic -> [(source_ts, Publish)]
        window = collections.defaultdict(list)  # topic -> [(start, end, Publish)]
        maxlen = collections.defaultdict(int)
        for p in self.publishes:
            if p.cls not in ("data", "rosout") or p.topic is None or p.rmw is None:
                continue
            if p.source_ts is not None:
                exact[p.topic].append((p.source_ts, p.idx, p))
            else:
                end = (p.next + MARGIN) if p.next is not None else p.rmw + NO_NEXT
                window[p.topic].append((p.rmw - MARGIN, p.idx, end, p))
                maxlen[p.topic] = max(maxlen[p.topic], end - (p.rmw - MARGIN))
        for lst in exact.values():
            lst.sort(key=lambda e: (e[0], e[1]))
        for lst in window.values():
            lst.sort(key=lambda e: (e[0], e[1]))
        exact_keys = {tp: [e[0] for e in lst] for tp, lst in exact.items()}
        window_keys = {tp: [e[0] for e in lst] for tp, lst in window.items()}
        for tk in self.takes:
            if tk.join is not None:
                if tk.join == "intra" and tk.publish is not None:
                    tk.publish.takes.append(tk)
                continue
            ts, tp = tk.source_ts, tk.topic
            cands = []
            if tp in exact:
                keys = exact_keys[tp]
                lo = bisect.bisect_left(keys, ts - EXACT_TOL)
                hi = bisect.bisect_right(keys, ts + EXACT_TOL)
                cands = [e[2] for e in exact[tp][lo:hi]]
                if len(cands) == 1:
                    tk.join, tk.publish = "exact", cands[0]
                    cands[0].takes.append(tk)
                    continue
                if len(cands) > 1:
                    tk.join, tk.candidates = "ambiguous", cands
                    tk.reason = "several publishes with this source timestamp"
                    continue
            if tp in window:
                keys = window_keys[tp]
                hi = bisect.bisect_right(keys, ts)
                lo = bisect.bisect_left(keys, ts - maxlen[tp])
                by_pub = collections.OrderedDict()
                for start, _, end, p in window[tp][lo:hi]:
                    if start <= ts <= end:
                        by_pub.setdefault(p.pub.uid, []).append(p)
                chosen = [self.pick(ps, ts) for ps in by_pub.values()]
                if len(chosen) == 1:
                    tk.join, tk.publish = "window", chosen[0]
                    chosen[0].takes.append(tk)
                    continue
                if len(chosen) > 1:
                    tk.join, tk.candidates = "ambiguous", chosen
                    tk.reason = f"{len(chosen)} publishers' windows contain the source timestamp"
                    continue
            tk.join = "none"
            if tp not in exact and tp not in window:
                tk.reason = "no publish of this topic in the trace"
            elif tp in exact and tp not in window:
                tk.reason = "no publish of this topic with this source timestamp"
            else:
                tk.reason = "no publish window of this topic contains the source timestamp"

    @staticmethod
    def pick(ps, ts):
        if len(ps) == 1:
            return ps[0]
        core = [p for p in ps if p.rmw <= ts and (p.next is None or ts <= p.next)]
        if len(core) == 1:
            return core[0]
        before = [p for p in ps if p.rmw <= ts + MARGIN]
        return max(before, key=lambda p: p.rmw) if before else min(ps, key=lambda p: p.rmw)

    # --- outputs ------------------------------------------------------------------
    def summary(self):
        pubs = collections.Counter(p.cls for p in self.publishes)
        pubs["intra"] = sum(1 for p in self.publishes if p.intra is not None)
        joins = collections.Counter(tk.join for tk in self.takes)
        reasons = collections.Counter(tk.reason for tk in self.takes if tk.join in ("none", "unresolved"))
        takes = [tk for tk in self.takes if not tk.internal]
        return {
            "events": self.events,
            "publishes": dict(sorted(pubs.items())),
            "takes": len(takes),
            "internal_takes": joins.get("internal", 0),
            "joined": sum(joins.get(j, 0) for j in ("exact", "window", "intra")),
            "by_join": dict(sorted(joins.items())),
            "without_callback": sum(1 for tk in takes if tk.cb_start is None),
            "failed_takes": self.failed_takes,
            "reasons": dict(sorted(reasons.items())),
            "events_by_name": dict(sorted(self.names.items())),
        }

    def chains(self, path):
        out = []
        first_cause = None

        def walk(p, i, hops):
            for tk in p.takes:
                if tk.topic != path[i] or tk.cb_start is None:
                    continue
                h = hops + [{"topic": path[i], "publish": p.ident(),
                             "take": {"pid": tk.pid, "tid": tk.tid, "node": tk.node, "join": tk.join,
                                      "source_ts": tk.source_ts, "callback_start": tk.cb_start,
                                      "callback_end": tk.cb_end}}]
                if i + 1 == len(path):
                    start = h[0]["publish"]
                    t0 = next(t for t in (start["rclcpp_publish"], start["intra_publish"],
                                          start["rcl_publish"], start["rmw_publish"]) if t is not None)
                    cause = first_cause
                    out.append({"path": path, "start": t0, "end": tk.cb_start, "e2e_ns": tk.cb_start - t0,
                                "hops": h, "caused_by": cause})
                    continue
                for q in caused.get(id(tk), ()):
                    if q.topic == path[i + 1]:
                        walk(q, i + 1, h)

        caused = collections.defaultdict(list)
        for p in self.publishes:
            if p.caused_by is not None:
                caused[id(p.caused_by)].append(p)
        for p in self.publishes:
            if p.topic == path[0] and p.cls == "data":
                c = p.caused_by
                first_cause = None if c is None else {
                    "pid": c.pid, "tid": c.tid, "node": c.node, "topic": c.topic,
                    "callback_start": c.cb_start, "callback_end": c.cb_end}
                walk(p, 0, [])
        out.sort(key=lambda c: c["start"])
        return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace", help="trace directory (an LTTng session or any directory holding CTF traces)")
    ap.add_argument("--format", choices=("jsonl", "summary"), default="jsonl",
                    help="jsonl: one line per take (or chain) then a summary line; summary: the summary only")
    ap.add_argument("--path", help="comma-separated topics: list the chain instances of that path")
    a = ap.parse_args(argv)
    rj = RefJoin()
    if not os.path.isdir(a.trace):
        sys.exit(f"refjoin.py: {a.trace}: no such directory")
    try:
        rj.read(a.trace)
    except MissingContext as e:
        sys.exit(f"refjoin.py: {a.trace}: event {e} has no vpid/vtid context "
                 "(record with: lttng add-context -u -t vpid -t vtid -t procname)")
    except Exception as e:  # bt2 errors: name the path, one line
        sys.exit(f"refjoin.py: cannot read {a.trace}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    rj.join()
    out = sys.stdout
    summ = rj.summary()
    if a.path:
        path = [t for t in a.path.split(",") if t]
        ch = rj.chains(path)
        summ["chains"] = len(ch)
        if a.format == "jsonl":
            for c in ch:
                out.write(json.dumps(c) + "\n")
    elif a.format == "jsonl":
        for tk in rj.takes:
            out.write(json.dumps(tk.line()) + "\n")
    out.write(json.dumps({"summary": summ}, indent=None if a.format == "jsonl" else 1) + "\n")


if __name__ == "__main__":
    main()
