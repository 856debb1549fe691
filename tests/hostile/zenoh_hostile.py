#!/usr/bin/env python3
"""Hostile Zenoh (rmw_zenoh) traffic, written as classic pcap files.

Every byte is packed here with `struct` from the Zenoh 1.x wire layout
(zenoh-codec: a TCP batch is a 16-bit little-endian length and transport
messages; FRAME 0x05, PUSH 0x1d with a PUT 0x01 and its attachment extension,
DECLARE 0x1e of a TOKEN 0x06; variable-length integers of 7 bits per byte)
and rmw_zenoh's conventions (ros2/rmw_zenoh docs/design.md: data key
`<domain>/<topic>/<type>/<hash>`, the 33-byte attachment, liveliness tokens
`@ros2_lv/<domain>/<zid>/<nid>/<eid>/<kind>/<enclave>/<ns>/<node>[/<topic>/<type>/<hash>/<qos>]`),
so the files do not depend on the decoder they attack. Scenarios:

  longkeys N    N PUTs, each on its own data key of about `--bytes` bytes
                (default 60 000) named in the PUT itself, each with an
                rmw_zenoh attachment (its own gid, sequence number 1): N
                samples of N topics
  longtokens N  N publisher liveliness tokens whose namespace, node and
                topic are `--bytes` bytes each (default 20 000), with a
                `--qos-bytes` QoS field (default: a valid one)
  longkey1 N    N PUTs on one data key of `--bytes` bytes (the same topic)

One TCP connection from 10.0.0.1:40000 to 10.0.0.2:7447 (Zenoh's port,
followed from its SYN). With `--pair`, a second file holds the same segments
1 ms later (the receiver's capture).

Usage: zenoh_hostile.py SCENARIO N OUT.pcap[.gz] [--pair OUT2] [--bytes B]
"""
from __future__ import annotations

import argparse
import struct

from hostile import ETH, T0, Out, ip4

SRC_IP, DST_IP = 0x0A000001, 0x0A000002
SPORT, DPORT = 40000, 7447

FRAME, PUSH, DECLARE = 0x05, 0x1D, 0x1E
Z_PUT, D_TOKEN = 0x01, 0x06
TYPE = "std_msgs::msg::dds_::String_"
HASH = "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"
ZID = "8b20917502ee955ac4476e0266340d5c"


def vle(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def zslice(b: bytes) -> bytes:
    return vle(len(b)) + b


def attachment(sn: int, ts: int, gid: bytes) -> bytes:
    return struct.pack("<qqB", sn, ts, 16) + gid


def put(key: str, att: bytes | None, payload: bytes) -> bytes:
    b = bytes([PUSH | 0x20]) + vle(0) + zslice(key.encode())
    if att is None:
        return b + bytes([Z_PUT]) + zslice(payload)
    return b + bytes([Z_PUT | 0x80, 0x43]) + zslice(att) + zslice(payload)


def token(tid: int, key: str) -> bytes:
    return bytes([DECLARE, D_TOKEN | 0x20]) + vle(tid) + vle(0) + zslice(key.encode())


def frame_msg(sn: int, body: bytes) -> bytes:
    return bytes([FRAME | 0x20]) + vle(sn) + body


def batch(msgs: bytes) -> bytes:
    assert len(msgs) <= 0xFFFF, len(msgs)
    return struct.pack("<H", len(msgs)) + msgs


def tcp(seq: int, flags: int, payload: bytes) -> bytes:
    seg = struct.pack(">HHIIBBHHH", SPORT, DPORT, seq & 0xFFFFFFFF, 1, 5 << 4, flags, 65535, 0, 0) + payload
    ip = struct.pack(">BBHHHBBH", 0x45, 0, 20 + len(seg), 0, 0x4000, 64, 6, 0) + ip4(SRC_IP) + ip4(DST_IP)
    return ETH[:12] + b"\x08\x00" + ip + seg


class Stream:
    def __init__(self, out: Out):
        self.out, self.seq, self.t, self.sn = out, 1000, T0, 1
        out.add(self.t, tcp(self.seq, 0x02, b""))  # SYN
        self.seq += 1

    def send(self, body: bytes) -> None:
        b = batch(frame_msg(self.sn, body))
        self.sn += 1
        self.t += 10_000
        self.out.add(self.t, tcp(self.seq, 0x18, b))  # PSH, ACK
        self.seq += len(b)


def gid(i: int) -> bytes:
    return struct.pack("<QQ", i, 0x5A5A5A5A5A5A5A5A)


def longkeys(out: Out, n: int, size: int) -> None:
    s = Stream(out)
    for i in range(n):
        name = f"k{i}_".ljust(size, "a")
        s.send(put(f"0/{name}/{TYPE}/{HASH}", attachment(1, T0 + i, gid(i)), b"\x00\x01\x00\x00xxxx"))


def longkey1(out: Out, n: int, size: int) -> None:
    s = Stream(out)
    name = "one_".ljust(size, "a")
    for i in range(n):
        s.send(put(f"0/{name}/{TYPE}/{HASH}", attachment(i + 1, T0 + i, gid(7)), b"\x00\x01\x00\x00xxxx"))


def longtokens(out: Out, n: int, size: int, qos: str) -> None:
    s = Stream(out)
    for i in range(n):
        ns, node, topic = (f"{c}{i}_".ljust(size, c) for c in "nmt")
        key = f"@ros2_lv/0/{ZID}/{i}/{i + 1}/MP/%/%{ns}/{node}/%{topic}/{TYPE}/{HASH}/{qos}"
        s.send(token(i + 1, key))


def generate(scenario: str, n: int, path, pair=None, size: int | None = None, qos_bytes: int | None = None) -> None:
    out = Out(str(path), str(pair) if pair else None)
    try:
        if scenario == "longkeys":
            longkeys(out, n, size or 60_000)
        elif scenario == "longkey1":
            longkey1(out, n, size or 60_000)
        elif scenario == "longtokens":
            qos = "::,7:,:,:,," if qos_bytes is None else "1" * qos_bytes
            longtokens(out, n, size or 20_000, qos)
        else:
            raise SystemExit(f"unknown scenario {scenario}")
    finally:
        out.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario", choices=["longkeys", "longkey1", "longtokens"])
    ap.add_argument("n", type=int)
    ap.add_argument("out")
    ap.add_argument("--pair")
    ap.add_argument("--bytes", type=int)
    ap.add_argument("--qos-bytes", type=int, help="longtokens: a QoS field of this many bytes (not rmw_zenoh's format)")
    a = ap.parse_args()
    generate(a.scenario, a.n, a.out, a.pair, a.bytes, a.qos_bytes)


if __name__ == "__main__":
    main()
