#!/usr/bin/env python3
"""A publisher or subscriber that talks on Zenoh exactly as rmw_zenoh does, and logs its ground truth.

Real Zenoh (the eclipse-zenoh package), rmw_zenoh's conventions reproduced (ros2/rmw_zenoh
docs/design.md and rmw_zenoh_cpp/src/detail/{liveliness_utils,attachment_helpers}.cpp):

- the data key expression `<domain>/<topic without leading slash>/<DDS type>/<type hash>`;
- a liveliness token per node and per publisher/subscription,
  `@ros2_lv/<domain>/<zid>/<nid>/<eid>/<NN|MP|MS>/<enclave>/<namespace>/<node>[/<topic>/<type>/<hash>/<qos>]`
  with `/` in names written `%`;
- each sample's attachment serialized by zenoh's own serializer as rmw_zenoh's AttachmentData
  does: int64 sequence number, int64 source timestamp, the 16-byte gid as a sequence;
- the gid: XXH3-128 of the entity's liveliness key expression, low 64 bits then high, little-endian.

The QoS field of a publisher's or subscription's token is `--qos`, written exactly as rmw_zenoh's
`qos_to_keyexpr` writes it (liveliness_utils.cpp): `<reliability>:<durability>:<history>,<depth>:
<deadline s>,<deadline ns>:<lifespan s>,<lifespan ns>:<liveliness>,<lease s>,<lease ns>`, rmw's enum
numbers (rmw/types.h), each field empty when it is rmw_zenoh's default (qos.cpp: reliable, volatile,
keep last 42, infinite deadline and lifespan, automatic liveliness with an infinite lease); e.g.
`2:1:,5:0,100000000:,:,,` is best effort, transient local, keep last 5, deadline 100 ms. Only the
token says it: the Zenoh entities are the same (rmw_zenoh would add a publication cache for
transient local, which changes nothing on the wire checked here).

Ground truth, one JSON line per sample: the publisher logs its sequence number, gid and the
time just before `put` (which is also the source timestamp it sends); the subscriber logs
every sample it receives with the time its callback ran and what the attachment said.
"""
import argparse
import json
import os
import sys
import threading
import time

import xxhash
import zenoh
from zenoh.ext import Int64, z_deserialize, z_serialize

from type_hash import type_hash

TYPE_RAW = "std_msgs::msg::dds_::String_"
TYPE_HASH = type_hash(TYPE_RAW)  # RIHS01_df668c74…, as rmw_zenoh's docs/design.md shows it
# rmw_zenoh's default QoS (reliable, volatile, keep last 42) is written as empty fields.
QOS_DEFAULT = "::,:,:,:,,"


def mangle(s: str) -> str:
    return s.replace("/", "%")


def data_key(domain: int, topic: str) -> str:
    return f"{domain}/{topic.strip('/')}/{TYPE_RAW}/{TYPE_HASH}"


def token_key(domain, zid, nid, eid, kind, node, topic=None, qos=QOS_DEFAULT):
    k = f"@ros2_lv/{domain}/{zid}/{nid}/{eid}/{kind}/%/%/{mangle(node)}"
    if topic is not None:
        k += f"/{mangle(topic)}/{mangle(TYPE_RAW)}/{mangle(TYPE_HASH)}/{qos}"
    return k


def gid_of(key: str) -> bytes:
    h = xxhash.xxh3_128_intdigest(key.encode())
    return (h & ((1 << 64) - 1)).to_bytes(8, "little") + (h >> 64).to_bytes(8, "little")


def config(args) -> zenoh.Config:
    c = zenoh.Config()
    c.insert_json5("mode", json.dumps(args.mode))
    c.insert_json5("scouting/multicast/enabled", "false")
    c.insert_json5("scouting/gossip/enabled", "false")
    c.insert_json5("listen/endpoints", json.dumps(args.listen))
    c.insert_json5("connect/endpoints", json.dumps(args.connect))
    if args.no_shm:
        c.insert_json5("transport/shared_memory/enabled", "false")
    return c


def check_qos(q: str) -> str:
    """The shape rmw_zenoh's keyexpr_to_qos accepts: 6 ':'-parts; 2, 2, 2 and 3 ','-values in the last four."""
    parts = q.split(":")
    if len(parts) != 6 or [len(p.split(",")) for p in parts[2:]] != [2, 2, 2, 3] or "," in parts[0] + parts[1]:
        raise argparse.ArgumentTypeError(f"{q!r} is not rmw_zenoh's QoS field (e.g. {QOS_DEFAULT!r})")
    return q


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("role", choices=["pub", "sub", "router"])
    p.add_argument("--mode", default="peer", choices=["peer", "client", "router"])
    p.add_argument("--listen", action="append", default=[])
    p.add_argument("--connect", action="append", default=[])
    p.add_argument("--domain", type=int, default=0)
    p.add_argument("--topic", default="/chatter")
    p.add_argument("--node", default="talker")
    p.add_argument("--qos", type=check_qos, default=QOS_DEFAULT,
                   help="the QoS field of the publisher's/subscription's token, in rmw_zenoh's format (default: all defaults)")
    p.add_argument("--count", type=int, default=50)
    p.add_argument("--period", type=float, default=0.02, help="seconds between publishes")
    p.add_argument("--size", type=int, action="append", default=[], help="payload sizes, cycled")
    p.add_argument("--no-shm", action="store_true",
                   help="no shared memory: large samples travel on the wire (zenoh uses it between processes of one host)")
    p.add_argument("--truth", help="JSONL ground truth written here")
    p.add_argument("--ready", help="file created once the session is up and declared")
    p.add_argument("--wait", type=float, default=1.0, help="seconds to wait for the subscriber before publishing")
    p.add_argument("--duration", type=float, default=30.0, help="sub/router: seconds to run at most")
    args = p.parse_args()

    zenoh.init_log_from_env_or("error")
    session = zenoh.open(config(args))
    zid = str(session.info.zid())
    out = open(args.truth, "w") if args.truth else None
    lock = threading.Lock()

    def log(rec):
        if out:
            with lock:
                out.write(json.dumps(rec) + "\n")
                out.flush()

    # rmw_zenoh's graph cache subscribes to every liveliness token of its domain (with history),
    # so routers forward every entity's token to every context.
    graph = None
    if args.role != "router":
        graph = session.liveliness().declare_subscriber(f"@ros2_lv/{args.domain}/**", lambda s: None, history=True)
    node_tok = session.liveliness().declare_token(token_key(args.domain, zid, 0, 0, "NN", args.node))
    key = data_key(args.domain, args.topic)
    if args.role == "pub":
        tkey = token_key(args.domain, zid, 0, 10, "MP", args.node, args.topic, args.qos)
        gid = gid_of(tkey)
        tok = session.liveliness().declare_token(tkey)
        pub = session.declare_publisher(key)
        log({"event": "declare", "role": "pub", "zid": zid, "key": key, "token": tkey, "gid": gid.hex(), "node": "/" + args.node, "qos": args.qos})
        if args.ready:
            open(args.ready, "w").close()
        time.sleep(args.wait)
        sizes = args.size or [64]
        for i in range(args.count):
            sn = i + 1
            size = sizes[i % len(sizes)]
            payload = bytes([sn % 251]) * size
            t = time.time_ns()
            att = z_serialize((Int64(sn), Int64(t), gid))
            pub.put(payload, attachment=att)
            log({"event": "publish", "sn": sn, "gid": gid.hex(), "publish_ns": t, "size": size, "key": key})
            time.sleep(args.period)
        time.sleep(0.5)
        tok.undeclare()
    elif args.role == "sub":
        tkey = token_key(args.domain, zid, 0, 11, "MS", args.node, args.topic, args.qos)
        tok = session.liveliness().declare_token(tkey)
        done = threading.Event()
        got = [0]

        def on_sample(s):
            t = time.time_ns()
            sn, src_ts, g = z_deserialize(tuple[Int64, Int64, bytes], s.attachment)
            log({"event": "receive", "sn": int(sn), "gid": bytes(g).hex(), "source_ts_ns": int(src_ts), "receive_ns": t,
                 "size": len(s.payload.to_bytes()), "key": str(s.key_expr),
                 "attachment": s.attachment.to_bytes().hex()})
            got[0] += 1
            if args.count and got[0] >= args.count:
                done.set()

        sub = session.declare_subscriber(key, on_sample)
        log({"event": "declare", "role": "sub", "zid": zid, "key": key, "token": tkey, "node": "/" + args.node, "qos": args.qos})
        if args.ready:
            open(args.ready, "w").close()
        done.wait(args.duration)
        time.sleep(0.2)
        sub.undeclare()
        tok.undeclare()
    else:
        if args.ready:
            open(args.ready, "w").close()
        time.sleep(args.duration)
    node_tok.undeclare()
    if graph is not None:
        graph.undeclare()
    session.close()
    if out:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
