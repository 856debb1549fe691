#!/usr/bin/env python3
"""ddslab-zenoh: the lab's workload node on Zenoh, talking exactly as rmw_zenoh does.

The Zenoh counterpart of ddslab-cyclone / ddslab-fastdds (docs/lab.md, "Zenoh"): the same command
line (lab/common/nodecfg.h: --node, --host, --truth, --content, --domain, --pub/--sub/--relay SPEC,
--check), the same control protocol on stdin/stdout (READY, START <t0_ns> <tstop_ns>, STOP) and the
same ground truth (one JSON line per published or received sample, lab/common/nodecfg.c), with
real Zenoh (eclipse-zenoh from PyPI) underneath and rmw_zenoh's conventions reproduced
(ros2/rmw_zenoh docs/design.md; rmw_zenoh_cpp/src/detail/liveliness_utils.cpp,
attachment_helpers.cpp, qos.cpp; the same layouts ddscope's decoder reads, crates/zenoh/src/rmw.rs):

- one Zenoh session per context (per domain), a liveliness token for the node
  (`@ros2_lv/<domain>/<zid>/<nid>/<nid>/NN/%/%/<node>`) and one per publisher / subscription
  (`…/<nid>/<eid>/MP|MS/%/%/<node>/<topic>/<type>/<hash>/<qos>`, `/` in names written `%`);
- data on `<domain>/<topic without its leading />/<DDS type>/<type hash>`, the type hash being the
  RIHS01 hash (REP-2011) rmw_zenoh writes on Jazzy and later, computed from the type's description
  by type_hash.py (installed beside this program);
- every sample's attachment: int64 sequence number, int64 source timestamp, the 16-byte gid, by
  zenoh's own serializer; the gid is XXH3-128 of the entity's token key expression;
- publishers with congestion control DROP (rmw_zenoh's for every topic but transient local +
  keep all; the lab's topics are volatile) and the topic's reliability; subscriptions keep the
  last `depth` samples (a ring channel, the oldest dropped as rmw_zenoh's message queue does) and
  are taken one at a time by a thread of their own (rclcpp's executor);
- READY once every publisher sees as many subscription tokens of its topic as the scenario has
  readers and every subscription as many publisher tokens as it has writers (rmw_zenoh's graph
  cache, which counts matched endpoints from the tokens).

With --tracing jazzy the node fires the ros2_tracing tracepoints rmw_zenoh_cpp and rclcpp record (Ros2Trace below,
docs/zenoh.md "ROS 2 traces"), from this process through LTTng-UST, and its ground truth gets the C nodes' trace fields.

The payload is the CDR the C nodes put on the wire, built by the same code (lab/common/rosmsg.c,
loaded from libddslab-rosmsg.so next to this program or $DDSLAB_ROSMSG_LIB): exact sizes, the
publish time in the stamps, the sample counter in the first byte array.

--router runs the Zenoh router of a lab run instead (mode router, listening on --listen).
"""
import ctypes
import json
import os
import signal
import sys
import threading
import time

from type_hash import type_hash

PROG = "ddslab-zenoh"
MAX_SPECS = 64


class Stop(Exception):
    pass


def die(msg, code=2):
    print(f"error: {msg}", file=sys.stderr, flush=True)
    sys.exit(code)


# ---------------------------------------------------------------- the C message builder

class RosMsg(ctypes.Structure):
    _fields_ = [
        ("buf", ctypes.POINTER(ctypes.c_uint8)),
        ("size", ctypes.c_size_t),
        ("nstamps", ctypes.c_int),
        ("stamps", ctypes.c_size_t * 8),
        ("counter_off", ctypes.c_size_t),
        ("n", ctypes.c_uint),
        ("m", ctypes.c_uint),
    ]


def load_rosmsg():
    here = os.path.dirname(os.path.abspath(__file__))
    cands = [os.environ.get("DDSLAB_ROSMSG_LIB"), os.path.join(here, "libddslab-rosmsg.so")]
    for c in cands:
        if c and os.path.isfile(c):
            lib = ctypes.CDLL(c)
            break
    else:
        die(f"libddslab-rosmsg.so not found next to {os.path.abspath(__file__)} (build lab/: cmake -S lab -B lab/build && "
            "cmake --build lab/build) and DDSLAB_ROSMSG_LIB not set")
    vp = ctypes.c_void_p
    lib.rosmsg_find.restype = vp
    lib.rosmsg_find.argtypes = [ctypes.c_char_p]
    lib.rosmsg_ros_name.restype = ctypes.c_char_p
    lib.rosmsg_ros_name.argtypes = [vp]
    lib.rosmsg_dds_name.restype = ctypes.c_char_p
    lib.rosmsg_dds_name.argtypes = [vp]
    lib.rosmsg_solve.restype = ctypes.c_int
    lib.rosmsg_solve.argtypes = [vp, ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_uint),
                                 ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
    lib.rosmsg_build.restype = ctypes.c_int
    lib.rosmsg_build.argtypes = [vp, ctypes.c_uint, ctypes.c_uint, ctypes.c_int, ctypes.c_uint64, ctypes.POINTER(RosMsg)]
    lib.rosmsg_set_stamp.argtypes = [ctypes.POINTER(RosMsg), ctypes.c_int64]
    lib.rosmsg_set_counter.argtypes = [ctypes.POINTER(RosMsg), ctypes.c_uint64]
    lib.rosmsg_free.argtypes = [ctypes.POINTER(RosMsg)]
    lib.rosmsg_list.argtypes = [vp]
    return lib


# ---------------------------------------------------------------- ros2_tracing, as rmw_zenoh_cpp emits it

class Instant:
    """A tracepoint's instants (nodetrace.h): CLOCK_REALTIME read right before it, and the time stamp LTTng
    gave the event (the clock plugin's reading), or CLOCK_MONOTONIC right after it if nothing was recorded."""
    __slots__ = ("rt_ns", "mono_ns")

    def __init__(self):
        self.rt_ns = self.mono_ns = 0


class PubTrace:
    def __init__(self):
        self.rclcpp_publish, self.rmw_publish, self.tid = Instant(), Instant(), 0


class RecvTrace:
    def __init__(self):
        self.rmw_take, self.callback_start, self.callback_end, self.tid = Instant(), Instant(), Instant(), 0


class Ros2Trace:
    """ros2_tracing's tracepoints of an rclcpp process on rmw_zenoh_cpp (Jazzy), fired from this process
    through the lab's `ros2` provider replica (lab/common/ros2_tp.h, libddslab-ros2tp-jazzy.so) with
    the lab's clock plugin (libddslab-lttng-clock.so), both loaded here by ctypes: the events carry this
    process's vpid/vtid and LTTng's own clock, as the C nodes' do (lab/common/nodetrace.h).

    What rmw_zenoh_cpp records (docs/zenoh.md, "ROS 2 traces"): rmw_publisher_init(gid = the entity gid,
    the attachment's source_gid), rmw_publish(publisher, message, source_timestamp = the attachment's
    source_timestamp, taken right before it), rmw_subscription_init(gid all zeros: rmw_zenoh gives
    subscriptions none), rmw_take(subscription, message, source_timestamp = the attachment's, taken);
    no dds:* events. rclcpp and rcl record the rest (rcl_*_init, rclcpp_publish, rcl_publish, rcl_take,
    rclcpp_take, callback_start/end) as on any rmw."""

    GID_SIZE = 24  # ROS2TP_GID_SIZE

    def __init__(self, distro):
        here = os.path.dirname(os.path.abspath(__file__))
        d = os.environ.get("DDSLAB_ROS2TP_DIR") or here
        plugin = os.path.join(d, "libddslab-lttng-clock.so")
        provider = os.path.join(d, f"libddslab-ros2tp-{distro}.so")
        for f in (plugin, provider):
            if not os.path.isfile(f):
                die(f"--tracing {distro}: {f} not found (built with lab/ when lttng-ust is installed)")
        os.environ["LTTNG_UST_CLOCK_PLUGIN"] = plugin  # lttng-ust reads it when it loads, with the provider
        self.lib = ctypes.CDLL(provider)
        clock = ctypes.CDLL(plugin, mode=getattr(os, "RTLD_NOLOAD", 4) | ctypes.RTLD_GLOBAL)
        vp, u8p, i64 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64
        sig = {
            "rcl_init": [vp], "rcl_node_init": [vp, vp, u8p, u8p], "rmw_publisher_init": [vp, u8p],
            "rcl_publisher_init": [vp, vp, vp, u8p, ctypes.c_size_t], "rclcpp_publish": [vp, vp], "rcl_publish": [vp, vp],
            "rmw_publish": [vp, vp, i64], "rmw_subscription_init": [vp, u8p],
            "rcl_subscription_init": [vp, vp, vp, u8p, ctypes.c_size_t], "rclcpp_subscription_init": [vp, vp],
            "rclcpp_subscription_callback_added": [vp, vp], "rmw_take": [vp, vp, i64, ctypes.c_int], "rcl_take": [vp],
            "rclcpp_take": [vp], "rcl_timer_init": [vp, i64], "rclcpp_timer_callback_added": [vp, vp],
            "rclcpp_timer_link_node": [vp, vp], "rclcpp_callback_register": [vp, u8p], "callback_start": [vp, ctypes.c_int],
            "callback_end": [vp],
        }
        for name, args in sig.items():
            f = getattr(self.lib, "ros2tp_impl_" + name)
            f.argtypes, f.restype = args, None
            setattr(self, name, f)
        self.lib.ros2tp_impl_distro.restype = ctypes.c_char_p
        if self.lib.ros2tp_impl_distro().decode() != distro:
            die(f"--tracing {distro}: {provider} is not the {distro} provider")
        self.clock_last = clock.ddslab_lttng_clock_last
        self.clock_reads = clock.ddslab_lttng_clock_reads
        self.clock_last.restype = self.clock_reads.restype = ctypes.c_uint64
        clock.ddslab_lttng_clock_active.restype = ctypes.c_int
        if not clock.ddslab_lttng_clock_active():
            die(f"--tracing {distro}: lttng-ust did not take the clock plugin {plugin}")
        self.objects = []  # keeps every handle's memory alive
        self.context, self.node, self.rmw_node = self.obj(), self.obj(), self.obj()

    def obj(self):
        """An object whose address is a handle in the trace."""
        b = ctypes.create_string_buffer(16)
        self.objects.append(b)
        return ctypes.addressof(b)

    def mark(self, instant, fn, *args):
        """Fires fn(*args), recording its instants in `instant`."""
        m = self.clock_reads()
        instant.rt_ns = time.time_ns()
        fn(*args)
        instant.mono_ns = self.clock_last() if self.clock_reads() != m else time.monotonic_ns()

    def node_init(self, name, namespace="/"):
        self.rcl_init(self.context)
        self.rcl_node_init(self.node, self.rmw_node, name.encode(), namespace.encode())

    def gid24(self, gid16):
        return bytes(gid16) + bytes(self.GID_SIZE - len(gid16))


def trace_symbol_sub(node, ros_type, topic):
    return f"void ddslab::{node}::on_message(std::shared_ptr<{ros_type.replace('/', '::')} const>) [{topic}]"


def trace_symbol_timer(node, topic):
    return f"void ddslab::{node}::on_timer() [{topic}]"


CONTENT = {"pattern": 0, "zeros": 1, "random": 2}


class Message:
    """One topic's message at its exact serialised size, stamped and counted before each put."""

    def __init__(self, lib, ty, size, content, seed, topic):
        self.lib, self.size = lib, size
        self.msg = RosMsg()
        self.n = self.m = 0
        if size == 0:
            return  # an empty serialized payload: no encapsulation header, no stamp, no counter
        n, m, below, above = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_size_t(), ctypes.c_size_t()
        if lib.rosmsg_solve(ty, size, ctypes.byref(n), ctypes.byref(m), ctypes.byref(below), ctypes.byref(above)):
            die(f"topic {topic}: {lib.rosmsg_ros_name(ty).decode()} cannot be serialised to exactly {size} bytes; "
                f"nearest sizes: {below.value} and {above.value}")
        if lib.rosmsg_build(ty, n, m, CONTENT[content], seed, ctypes.byref(self.msg)):
            die(f"topic {topic}: out of memory building a {size}-byte sample")
        self.n, self.m = n.value, m.value

    def payload(self, t_ns, counter):
        if self.size == 0:
            return b""
        self.lib.rosmsg_set_stamp(ctypes.byref(self.msg), t_ns)
        self.lib.rosmsg_set_counter(ctypes.byref(self.msg), counter)
        return ctypes.string_at(self.msg.buf, self.msg.size)


# ---------------------------------------------------------------- command line (nodecfg.c)

def parse_spec(kind, text):
    sp = {"kind": kind, "topic": "", "type": "std_msgs/msg/UInt8MultiArray", "bytes": None, "rate": 0.0, "burst_every": 0,
          "burst_count": 0, "reliable": True, "depth": 10, "expect": 0, "input": "", "ratio": 1.0, "delay_ns": 0,
          "spin": False, "slow_every": 0, "slow_ns": 0, "domain": None}
    what = "--" + kind
    for kv in text.split(","):
        if "=" not in kv:
            die(f"{what} {text}: {kv} is not key=value")
        k, v = kv.split("=", 1)
        try:
            if k == "topic":
                sp["topic"] = v
            elif k == "type":
                sp["type"] = v
            elif k == "input" and kind == "relay":
                sp["input"] = v
            elif k == "bytes" and kind != "sub":
                sp["bytes"] = int(v)
            elif k == "rate" and kind == "pub" and float(v) > 0:
                sp["rate"] = float(v)
            elif k in ("burst_every", "burst_count") and kind == "pub":
                sp[k] = int(v)
            elif k == "reliability" and v in ("reliable", "best_effort"):
                sp["reliable"] = v == "reliable"
            elif k == "depth" and 1 <= int(v) <= 100000:
                sp["depth"] = int(v)
            elif k in ("readers", "writers") and 0 <= int(v) <= 100000:
                sp["expect"] = int(v)
            elif k == "ratio" and kind == "relay" and 0 < float(v) <= 1:
                sp["ratio"] = float(v)
            elif k in ("delay_ns", "slow_every", "slow_ns") and kind == "relay" and int(v) >= 0:
                sp[k] = int(v)
            elif k == "domain" and kind == "relay" and 0 <= int(v) <= 232:
                sp["domain"] = int(v)
            elif k == "compute" and kind == "relay" and v in ("sleep", "spin"):
                sp["spin"] = v == "spin"
            else:
                raise ValueError
        except ValueError:
            die(f"{what} {text}: bad or unknown key {k}={v}")
    if not sp["topic"].startswith("/"):
        die(f"{what} {text}: topic must start with '/'")
    if kind == "relay" and not sp["input"].startswith("/"):
        die(f"{what} {text}: input topic missing")
    if kind == "pub" and sp["rate"] <= 0:
        die(f"{what} {text}: rate missing")
    if sp["burst_every"] and not 2 <= sp["burst_count"] <= sp["burst_every"]:
        die(f"{what} {text}: burst_count must lie between 2 and burst_every")
    if kind != "sub" and sp["bytes"] is None:
        die(f"{what} {text}: bytes missing")
    return sp


def parse_args(argv):
    cfg = {"node": "node", "host": "host", "truth": None, "domain": 0, "content": "pattern", "check": False,
           "ready_timeout": 30.0, "tracing": None, "mode": "client", "connect": [], "listen": [], "router": False, "specs": []}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--help", "-h"):
            print(__doc__)
            sys.exit(0)
        if a == "--check":
            cfg["check"] = True
            i += 1
            continue
        if a == "--router":
            cfg["router"] = True
            i += 1
            continue
        if i + 1 >= len(argv):
            die(f"{a} needs a value")
        v = argv[i + 1]
        i += 2
        if a in ("--node", "--host", "--truth"):
            cfg[a[2:]] = v
        elif a == "--domain":
            if not v.isdigit() or int(v) > 232:
                die(f"--domain {v}: 0 to 232")
            cfg["domain"] = int(v)
        elif a == "--content":
            if v not in CONTENT:
                die(f"--content {v}: pattern, zeros or random")
            cfg["content"] = v
        elif a == "--ready-timeout":
            cfg["ready_timeout"] = float(v)
        elif a == "--run-id":
            pass  # only tags the command line so a run's processes can be found
        elif a == "--tracing":
            if v not in ("off", "jazzy"):
                die(f"--tracing {v}: off or jazzy (rmw_zenoh_cpp's tracepoints are Jazzy's layout)")
            cfg["tracing"] = None if v == "off" else v
        elif a == "--mode":
            if v not in ("client", "peer"):
                die(f"--mode {v}: client or peer")
            cfg["mode"] = v
        elif a in ("--connect", "--listen"):
            cfg[a[2:]].append(v)
        elif a in ("--pub", "--sub", "--relay"):
            if len(cfg["specs"]) >= MAX_SPECS:
                die(f"more than {MAX_SPECS} endpoints")
            cfg["specs"].append(parse_spec(a[2:], v))
        else:
            die(f"unknown option {a}")
    return cfg


# ---------------------------------------------------------------- rmw_zenoh's names

def mangle(s):
    return s.replace("/", "%")


def qos_key(reliable, depth):
    # rmw_zenoh's qos_to_keyexpr: values equal to its defaults (reliable, volatile, keep last 42) empty;
    # rmw enums: reliability 1 reliable / 2 best effort, durability 2 volatile, history 1 keep last
    rel = "" if reliable else "2"
    dep = "" if depth == 42 else str(depth)
    return f"{rel}::,{dep}:,:,:,,"


def gid_of(key):
    import xxhash
    h = xxhash.xxh3_128_intdigest(key.encode())
    return (h & ((1 << 64) - 1)).to_bytes(8, "little") + (h >> 64).to_bytes(8, "little")


# ---------------------------------------------------------------- ground truth (nodecfg.c's format)

class Truth:
    def __init__(self, path, host, node):
        self.f = open(path, "w", buffering=1 << 20)
        self.lock = threading.Lock()
        self.head = f',"host":{json.dumps(host)},"node":{json.dumps(node)},"topic":'

    @staticmethod
    def instants(tr, names):
        return "".join(f',"{n}_ns":{getattr(tr, n).rt_ns},"{n}_mono_ns":{getattr(tr, n).mono_ns}' for n in names) + f',"tid":{tr.tid}'

    def publish(self, t_ns, topic, guid, seq, size, src_guid=None, src_seq=None, tr=None):
        src = f',"src_writer_guid":"{src_guid}","src_seq":{src_seq}' if src_guid else ""
        if tr is not None:
            src += f',"source_ts_ns":{t_ns}' + self.instants(tr, ("rclcpp_publish", "rmw_publish"))
        line = f'{{"event":"publish","t_ns":{t_ns}{self.head}{json.dumps(topic)},"writer_guid":"{guid}","seq":{seq},"size":{size}{src}}}\n'
        with self.lock:
            self.f.write(line)

    def receive(self, t_ns, topic, guid, seq, size, source_ts, tr=None):
        extra = self.instants(tr, ("rmw_take", "callback_start", "callback_end")) if tr is not None else ""
        line = (f'{{"event":"receive","t_ns":{t_ns}{self.head}{json.dumps(topic)},"writer_guid":"{guid}","seq":{seq},'
                f'"size":{size},"source_ts_ns":{source_ts}{extra}}}\n')
        with self.lock:
            self.f.write(line)

    def close(self):
        with self.lock:
            self.f.flush()
            os.fsync(self.f.fileno())
            self.f.close()


# ---------------------------------------------------------------- the node

class Context:
    """An rmw_zenoh context: one session in one domain, its node token and entity counter."""

    def __init__(self, zenoh, cfg, domain, graph):
        self.zenoh, self.domain = zenoh, domain
        c = zenoh.Config()
        c.insert_json5("mode", json.dumps(cfg["mode"]))
        c.insert_json5("scouting/multicast/enabled", "false")
        c.insert_json5("connect/endpoints", json.dumps(cfg["connect"]))
        c.insert_json5("listen/endpoints", json.dumps(cfg["listen"]))
        c.insert_json5("transport/shared_memory/enabled", "false")
        self.session = zenoh.open(c)
        self.zid = str(self.session.info.zid())
        self.nid = 0
        self.next_eid = 1
        self.node = cfg["node"]
        self.tokens = [self.session.liveliness().declare_token(
            f"@ros2_lv/{domain}/{self.zid}/{self.nid}/{self.nid}/NN/%/%/{mangle(self.node)}")]
        # rmw_zenoh's graph cache: every token of the domain, with history
        self.graph = self.session.liveliness().declare_subscriber(f"@ros2_lv/{domain}/**", graph.on_token, history=True)

    def entity(self, kind, topic, ty, reliable, depth):
        eid = self.next_eid
        self.next_eid += 1
        key = (f"@ros2_lv/{self.domain}/{self.zid}/{self.nid}/{eid}/{kind}/%/%/{mangle(self.node)}/{mangle(topic)}/"
               f"{mangle(ty)}/{type_hash(ty)}/{qos_key(reliable, depth)}")
        return key

    def data_key(self, topic, ty):
        return f"{self.domain}/{topic.strip('/')}/{ty}/{type_hash(ty)}"


class Graph:
    """Publisher and subscription tokens seen, per (domain, kind, topic)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.live = {}

    def on_token(self, sample):
        parts = str(sample.key_expr).split("/")
        # @ros2_lv/<domain>/<zid>/<nid>/<eid>/<kind>/<enclave>/<namespace>/<node>/<topic>/<type>/<hash>/<qos>
        if len(parts) != 13 or parts[5] not in ("MP", "MS"):
            return
        k = (int(parts[1]), parts[5], parts[9].replace("%", "/"))
        with self.lock:
            s = self.live.setdefault(k, set())
            if str(sample.kind).endswith("PUT"):
                s.add(str(sample.key_expr))
            else:
                s.discard(str(sample.key_expr))

    def count(self, domain, kind, topic):
        with self.lock:
            return len(self.live.get((domain, kind, topic), ()))


class Outlet:
    def __init__(self, node, sp, ctx, msg, zenoh):
        self.sp, self.ctx, self.msg, self.node = sp, ctx, msg, node
        self.lock = threading.Lock()
        self.token_key = ctx.entity("MP", sp["topic"], node.dds_type(sp), sp["reliable"], sp["depth"])
        self.gid = gid_of(self.token_key)
        self.guid = self.gid.hex()
        self.key = ctx.data_key(sp["topic"], node.dds_type(sp))
        self.pub = ctx.session.declare_publisher(
            self.key, congestion_control=zenoh.CongestionControl.DROP,
            reliability=zenoh.Reliability.RELIABLE if sp["reliable"] else zenoh.Reliability.BEST_EFFORT)
        ctx.tokens.append(ctx.session.liveliness().declare_token(self.token_key))
        self.published = self.failed = 0
        self.credit = 0.0
        self.thread = None
        tr = node.trace
        if tr:
            # rcl_publisher_init creates the rmw publisher first (rmw_publisher_init with its gid), then records itself
            self.h_rcl, self.h_rmw = tr.obj(), tr.obj()
            self.h_msg = ctypes.addressof(msg.msg.buf.contents) if msg.size else tr.obj()
            tr.rmw_publisher_init(self.h_rmw, tr.gid24(self.gid))
            tr.rcl_publisher_init(self.h_rcl, tr.node, self.h_rmw, sp["topic"].encode(), sp["depth"])
            if sp["kind"] == "pub":
                self.h_timer, self.h_timer_cb = tr.obj(), tr.obj()
                tr.rcl_timer_init(self.h_timer, round(1e9 / sp["rate"]))
                tr.rclcpp_timer_callback_added(self.h_timer, self.h_timer_cb)
                tr.rclcpp_timer_link_node(self.h_timer, tr.node)
                tr.rclcpp_callback_register(self.h_timer_cb, trace_symbol_timer(node.name, sp["topic"]).encode())

    def publish_one(self, src_guid=None, src_seq=None):
        from zenoh.ext import Int64, z_serialize
        tr = self.node.trace
        with self.lock:
            sn = self.published + 1
            if tr:
                # the user fills the message, then rclcpp::Publisher::publish -> rcl_publish -> rmw_publish:
                # rmw_zenoh_cpp's PublisherData::publish takes source_timestamp = get_system_time_in_ns(), puts it
                # in the attachment, records rmw_publish with it and puts the sample
                rec = PubTrace()
                payload = self.msg.payload(time.time_ns(), sn)
                tr.mark(rec.rclcpp_publish, tr.rclcpp_publish, self.h_rcl, self.h_msg)
                tr.rcl_publish(self.h_rcl, self.h_msg)
                t = time.time_ns()
                att = z_serialize((Int64(sn), Int64(t), self.gid))
                m = tr.clock_reads()
                rec.rmw_publish.rt_ns = t
                tr.rmw_publish(self.h_rmw, self.h_msg, t)
                rec.rmw_publish.mono_ns = tr.clock_last() if tr.clock_reads() != m else time.monotonic_ns()
                rec.tid = threading.get_native_id()
            else:
                rec = None
                t = time.time_ns()  # rmw_publish's source timestamp, also the ground truth's publish time
                payload = self.msg.payload(t, sn)
                att = z_serialize((Int64(sn), Int64(t), self.gid))
            try:
                self.pub.put(payload, attachment=att)
            except Exception as e:  # noqa: BLE001 - a failed put is counted and reported, as the C nodes do
                self.failed += 1
                if self.failed <= 5:
                    print(f"{self.node.name}: put on {self.sp['topic']} failed: {e}", file=sys.stderr, flush=True)
                return
            self.published = sn
            self.node.truth.publish(t, self.sp["topic"], self.guid, sn, self.msg.size, src_guid, src_seq, rec)

    def run_periodic(self, t0, tstop, stop):
        period = 1e9 / self.sp["rate"]
        k = 0
        while not stop.is_set():
            due = t0 + round(k * period)
            if due >= tstop:
                break
            delay = (due - time.time_ns()) / 1e9
            if delay > 0 and stop.wait(delay):
                break
            # the timer callback of a ROS 2 publisher node
            tr = self.node.trace
            if tr:
                tr.callback_start(self.h_timer_cb, 0)
            self.publish_one()
            be, bc = self.sp["burst_every"], self.sp["burst_count"]
            if be and k % be == 0:
                for _ in range(1, bc):
                    if stop.is_set():
                        break
                    self.publish_one()
                    k += 1
            if tr:
                tr.callback_end(self.h_timer_cb)
            k += 1


def compute_for(d_ns, spin):
    if d_ns <= 0:
        return
    if spin:
        end = time.monotonic_ns() + d_ns
        while time.monotonic_ns() < end:
            pass
    else:
        time.sleep(d_ns / 1e9)


class Inlet:
    def __init__(self, node, sp, ctx, zenoh):
        from zenoh.handlers import RingChannel
        self.sp, self.ctx, self.node = sp, ctx, node
        self.token_key = ctx.entity("MS", sp["topic"], node.dds_type(sp), sp["reliable"], sp["depth"])
        self.key = ctx.data_key(sp["topic"], node.dds_type(sp))
        # keep last `depth`: the oldest sample is dropped when the queue is full
        self.sub = ctx.session.declare_subscriber(self.key, RingChannel(sp["depth"]))
        ctx.tokens.append(ctx.session.liveliness().declare_token(self.token_key))
        self.relays = []
        self.received = 0
        self.undecodable = 0
        tr = node.trace
        if tr:
            # rmw_zenoh_cpp gives subscriptions no gid: rmw_subscription_init records zeros
            self.h_rcl, self.h_rmw, self.h_rclcpp, self.h_cb, self.h_msg = (tr.obj() for _ in range(5))
            tr.rmw_subscription_init(self.h_rmw, bytes(tr.GID_SIZE))
            tr.rcl_subscription_init(self.h_rcl, tr.node, self.h_rmw, sp["topic"].encode(), sp["depth"])
            tr.rclcpp_subscription_init(self.h_rcl, self.h_rclcpp)
            tr.rclcpp_subscription_callback_added(self.h_rclcpp, self.h_cb)
            tr.rclcpp_callback_register(self.h_cb, trace_symbol_sub(node.name, sp["type"], sp["topic"]).encode())
        self.thread = threading.Thread(target=self.take_loop, daemon=True)

    def take_loop(self):
        from zenoh.ext import Int64, z_deserialize
        for s in self.sub:
            t = time.time_ns()  # rmw_take returned the sample
            try:
                sn, src_ts, gid = z_deserialize(tuple[Int64, Int64, bytes], s.attachment)
                sn, src_ts, guid = int(sn), int(src_ts), bytes(gid).hex()
            except Exception:  # noqa: BLE001 - not an rmw_zenoh sample: counted, reported at exit
                self.undecodable += 1
                continue
            size = len(s.payload)
            self.received += 1
            tr, rec = self.node.trace, None
            if tr:
                # rmw_take (source_timestamp: the attachment's) -> rcl_take -> rclcpp_take -> the callback
                rec = RecvTrace()
                tr.mark(rec.rmw_take, tr.rmw_take, self.h_rmw, self.h_msg, src_ts, 1)
                t = rec.rmw_take.rt_ns  # the take returned the sample
                tr.rcl_take(self.h_msg)
                tr.rclcpp_take(self.h_msg)
                tr.mark(rec.callback_start, tr.callback_start, self.h_cb, 0)
            for o in self.relays:
                o.credit += o.sp["ratio"]
                if o.credit >= 1.0 - 1e-9:
                    o.credit -= 1.0
                    d = o.sp["slow_ns"] if o.sp["slow_every"] and sn > 0 and sn % o.sp["slow_every"] == 0 else o.sp["delay_ns"]
                    compute_for(d, o.sp["spin"])
                    o.publish_one(guid, sn)
            if tr:
                tr.mark(rec.callback_end, tr.callback_end, self.h_cb)
                rec.tid = threading.get_native_id()
            self.node.truth.receive(t, self.sp["topic"], guid, sn, size, src_ts, rec)


class Node:
    def __init__(self, cfg, lib):
        self.cfg, self.lib, self.name = cfg, lib, cfg["node"]
        self.trace = None
        self.types = {}
        self.msgs = []
        for i, sp in enumerate(cfg["specs"]):
            ty = lib.rosmsg_find(sp["type"].encode())
            if not ty:
                die(f"--{sp['kind']} topic={sp['topic']}: unknown message type {sp['type']} (see ddslab-cyclone --list-types)")
            self.types[i] = ty
            sp["index"] = i
            if sp["kind"] != "sub":
                self.msgs.append(Message(lib, ty, sp["bytes"], cfg["content"], 0x1234567 + i, sp["topic"]))
            else:
                self.msgs.append(None)

    def dds_type(self, sp):
        return self.lib.rosmsg_dds_name(self.types[sp["index"]]).decode()

    def check(self):
        for sp, m in zip(self.cfg["specs"], self.msgs):
            if m is not None:
                print(f"ok {sp['topic']} {self.dds_type(sp)} {m.size} bytes (n={m.n} m={m.m})")

    def run(self, zenoh):
        cfg = self.cfg
        self.truth = Truth(cfg["truth"], cfg["host"], cfg["node"])
        self.graph = Graph()
        self.contexts = {}
        if cfg["tracing"]:
            self.trace = Ros2Trace(cfg["tracing"])
            self.trace.node_init(cfg["node"])

        def ctx(domain):
            if domain not in self.contexts:
                self.contexts[domain] = Context(zenoh, cfg, domain, self.graph)
            return self.contexts[domain]

        self.outlets, self.inlets = [], []
        # subscriptions first, then publishers: a publisher that sees a subscription token has its declaration
        for sp in cfg["specs"]:
            if sp["kind"] == "sub":
                self.inlets.append(Inlet(self, sp, ctx(cfg["domain"]), zenoh))
                print(f"{self.name}: subscription {sp['topic']} key {self.inlets[-1].key} token {self.inlets[-1].token_key}",
                      file=sys.stderr, flush=True)
        for sp, m in zip(cfg["specs"], self.msgs):
            if sp["kind"] == "sub":
                continue
            dom = sp["domain"] if sp["domain"] is not None else cfg["domain"]
            o = Outlet(self, sp, ctx(dom), m, zenoh)
            self.outlets.append(o)
            print(f"{self.name}: publisher {sp['topic']} key {o.key} {m.size} bytes gid {o.guid} token {o.token_key}",
                  file=sys.stderr, flush=True)
            if sp["kind"] == "relay":
                ins = [i for i in self.inlets if i.sp["topic"] == sp["input"]]
                if not ins:
                    die(f"relay {sp['topic']}: no subscription of its input {sp['input']} (--sub topic={sp['input']})")
                ins[0].relays.append(o)
        for i in self.inlets:
            i.thread.start()

        stop = threading.Event()

        def on_signal(signum, frame):
            stop.set()
            raise Stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        code = 0
        try:
            if not self.wait_matched(stop):
                code = 4
            else:
                print("READY", flush=True)
                self.control(stop)
        except Stop:
            pass
        stop.set()
        for o in self.outlets:
            if o.thread:
                o.thread.join()
        for i in self.inlets:
            i.sub.undeclare()
        for i in self.inlets:
            i.thread.join(5)
        failed = False
        for o in self.outlets:
            print(f"{self.name}: published {o.sp['topic']} {o.published} samples ({o.failed} failed writes)", file=sys.stderr)
            failed |= o.failed > 0
        for i in self.inlets:
            extra = f" ({i.undecodable} without rmw_zenoh's attachment)" if i.undecodable else ""
            print(f"{self.name}: received {i.sp['topic']} {i.received} samples{extra}", file=sys.stderr)
            failed |= i.undecodable > 0
        self.truth.close()
        for c in self.contexts.values():
            for t in c.tokens:
                t.undeclare()
            c.graph.undeclare()
            c.session.close()
        sys.stderr.flush()
        return code or (5 if failed else 0)

    def missing(self):
        out = []
        for o in self.outlets:
            n = self.graph.count(o.ctx.domain, "MS", o.sp["topic"])
            if n < o.sp["expect"]:
                out.append(f"publisher {o.sp['topic']} matched {n} of {o.sp['expect']} subscriptions")
        for i in self.inlets:
            n = self.graph.count(i.ctx.domain, "MP", i.sp["topic"])
            if n < i.sp["expect"]:
                out.append(f"subscription {i.sp['topic']} matched {n} of {i.sp['expect']} publishers")
        return out

    def wait_matched(self, stop):
        deadline = time.monotonic() + self.cfg["ready_timeout"]
        report = time.monotonic() + 3
        while True:
            miss = self.missing()
            if not miss:
                return True
            now = time.monotonic()
            if now > deadline:
                for m in miss:
                    print(f"{self.name}: {m}", file=sys.stderr)
                print(f"{self.name}: error: discovery did not complete within {self.cfg['ready_timeout']:.0f} s", file=sys.stderr,
                      flush=True)
                return False
            if now > report:
                for m in miss:
                    print(f"{self.name}: {m}", file=sys.stderr, flush=True)
                report = now + 3
            if stop.wait(0.01):
                return False

    def control(self, stop):
        started = False
        for line in sys.stdin:
            line = line.strip()
            if not started and line.startswith("START "):
                try:
                    _, a, b = line.split()
                    t0, tstop = int(a), int(b)
                except ValueError:
                    print(f"{self.name}: bad control line {line!r}", file=sys.stderr, flush=True)
                    continue
                started = True
                for o in self.outlets:
                    if o.sp["kind"] == "pub":
                        o.thread = threading.Thread(target=o.run_periodic, args=(t0, tstop, stop), daemon=True)
                        o.thread.start()
            elif line == "STOP":
                break


def zenoh_version():
    from importlib.metadata import version
    return version("eclipse-zenoh")


def run_router(cfg):
    import zenoh
    zenoh.init_log_from_env_or("error")
    c = zenoh.Config()
    c.insert_json5("mode", '"router"')
    c.insert_json5("scouting/multicast/enabled", "false")
    c.insert_json5("listen/endpoints", json.dumps(cfg["listen"]))
    c.insert_json5("transport/shared_memory/enabled", "false")
    session = zenoh.open(c)
    print(f"{PROG}: router {session.info.zid()} listening on {', '.join(cfg['listen'])} (zenoh {zenoh_version()})",
          file=sys.stderr, flush=True)
    print("READY", flush=True)
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()
        raise Stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        for line in sys.stdin:
            if line.strip() == "STOP":
                break
    except Stop:
        pass
    session.close()
    return 0


def main(argv):
    if argv == ["--version"]:
        print(f"{PROG} zenoh {zenoh_version()}")
        return 0
    if argv == ["--list-types"]:
        load_rosmsg().rosmsg_list(ctypes.c_void_p.in_dll(ctypes.CDLL(None), "stdout"))
        return 0
    cfg = parse_args(argv)
    if cfg["router"]:
        if not cfg["listen"]:
            die("--router needs --listen ENDPOINT")
        return run_router(cfg)
    lib = load_rosmsg()
    node = Node(cfg, lib)
    if cfg["check"]:
        node.check()
        return 0
    if not cfg["truth"]:
        die("--truth FILE missing")
    if cfg["mode"] == "client" and not cfg["connect"]:
        die("--mode client needs --connect (the router's endpoint)")
    import zenoh
    zenoh.init_log_from_env_or("error")
    return node.run(zenoh)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
