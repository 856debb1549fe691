#!/usr/bin/env python3
"""Hostile RTPS traffic at scale, written as classic pcap files (nanosecond magic).

Every byte is packed here with `struct` (RTPS 2.5 section 9.4, IPv4 RFC 791,
UDP RFC 768), so the files do not depend on the decoder they attack. Each
scenario models what a forged sender on a monitored link can do:

  writers N       N distinct writer GUIDs, each publishing `--samples` DATA
                  (the per-writer state of `topics`, `latency`, `report`)
  topics N        N SEDP publications and N SEDP subscriptions, one topic each,
                  plus one DATA per writer (topic rows, discovery tables)
  destinations N  one DATA_FRAG sample (2^20 fragments announced) sent to N
                  destinations, and one DATA sample copied to N destinations
  fragflood N     N samples each announcing 2^20 fragments and sending only the
                  last one (fragment bitmaps, open samples)
  ipflood N       N IPv4 datagrams whose fragments arrive in order up to ~48 KB
                  but never the last one (IP reassembly memory)
  ipholes N       N IPv4 datagrams sent as 8-byte fragments with 8-byte holes,
                  `--holes` pieces each (range lists of IP reassembly)
  discfrag N      N SEDP samples as DATA_FRAG announcing 1 MiB, first fragment
                  only (discovery reassembly)
  longnames N     N SEDP publications, each of its own participant, with a
                  distinct ~59 KB topic name and a 4 KB type name (one UDP
                  datagram each, as on loopback), then one DATA per writer
                  (byte budgets of the name-holding tables)
  snjump N        N writers whose sequence numbers jump between the limits of
                  a signed 64-bit number, fragment numbers near 2^32, INFO_TS
                  at the limits of its fields
  inflight N      N fragmented samples delivered, then one the receiver's
                  capture (pc2, `--pair` required) ends in the middle of

With `--pair`, a second file (pc2) holds the same traffic 1 ms later, so that
`ddscope latency pc1 pc2` has a sender and a receiver for every sample.

Usage: hostile.py SCENARIO N OUT.pcap [--pair OUT2.pcap] [--samples K] [--holes H]
"""
from __future__ import annotations

import argparse
import struct

T0 = 1_700_000_000_000_000_000  # capture start, ns since the epoch
VENDOR = 0x0110  # Eclipse Cyclone DDS

# Entity ids (RTPS 2.5 table 9.2); an EntityId_t is an octet array (big-endian).
SPDP_W, SPDP_R = 0x000100C2, 0x000100C7
SEDP_PUB_W, SEDP_PUB_R = 0x000003C2, 0x000003C7
SEDP_SUB_W, SEDP_SUB_R = 0x000004C2, 0x000004C7
USER_W = 0x00000103  # user writer, no key

PID_SENTINEL, PID_TOPIC_NAME, PID_TYPE_NAME = 0x0001, 0x0005, 0x0007
PID_ENDPOINT_GUID, PID_PARTICIPANT_GUID, PID_VENDOR_ID = 0x005A, 0x0050, 0x0016


class PcapWriter:
    """Streams frames into a classic pcap file (LINKTYPE_ETHERNET, ns
    timestamps), gzip-compressed (fast level) when the name ends in .gz."""

    def __init__(self, path: str):
        if str(path).endswith(".gz"):
            import gzip
            self.f = gzip.open(path, "wb", compresslevel=1)
        else:
            self.f = open(path, "wb", buffering=1 << 20)
        self.f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
        self.frames = 0

    def add(self, ts_ns: int, frame: bytes) -> None:
        self.f.write(struct.pack("<IIII", ts_ns // 1_000_000_000, ts_ns % 1_000_000_000, len(frame), len(frame)))
        self.f.write(frame)
        self.frames += 1

    def close(self) -> None:
        self.f.close()


class Out:
    """One or two capture points: pc2 sees every frame `delay_ns` later."""

    def __init__(self, path: str, pair: str | None, delay_ns: int = 1_000_000):
        self.w = [PcapWriter(path)] + ([PcapWriter(pair)] if pair else [])
        self.delay = delay_ns

    def add(self, ts_ns: int, frame: bytes, only: int | None = None) -> None:
        """Adds a frame to every capture point (or only to capture `only`)."""
        for i, w in enumerate(self.w):
            if only is None or only == i:
                w.add(ts_ns + i * self.delay, frame)

    def close(self) -> None:
        for w in self.w:
            w.close()


# ---- RTPS -------------------------------------------------------------------

def sn(v: int) -> bytes:
    """SequenceNumber_t (little endian): high int32, low uint32."""
    return struct.pack("<iI", v >> 32, v & 0xFFFFFFFF)


def sub(sm_id: int, flags: int, body: bytes) -> bytes:
    return struct.pack("<BBH", sm_id, flags | 0x01, len(body)) + body


def header(prefix: bytes) -> bytes:
    return b"RTPS\x02\x03" + struct.pack(">H", VENDOR) + prefix


def info_ts(sec: int, frac: int = 0) -> bytes:
    return sub(0x09, 0, struct.pack("<iI", sec, frac))


def data(reader: int, writer: int, seq: int, payload: bytes) -> bytes:
    return sub(0x15, 0x04, struct.pack("<HH", 0, 16) + struct.pack(">II", reader, writer) + sn(seq) + payload)


def data_frag(reader: int, writer: int, seq: int, start: int, count: int, frag_size: int, sample_size: int, payload: bytes) -> bytes:
    body = (struct.pack("<HH", 0, 28) + struct.pack(">II", reader, writer) + sn(seq)
            + struct.pack("<IHHI", start, count, frag_size, sample_size) + payload)
    return sub(0x16, 0, body)


def heartbeat(reader: int, writer: int, first: int, last: int, count: int) -> bytes:
    return sub(0x07, 0, struct.pack(">II", reader, writer) + sn(first) + sn(last) + struct.pack("<i", count))


def param(pid: int, value: bytes) -> bytes:
    value += b"\0" * (-len(value) % 4)
    return struct.pack("<HH", pid, len(value)) + value


def cdr_string(s: str) -> bytes:
    raw = s.encode() + b"\0"
    return struct.pack("<I", len(raw)) + raw


def sedp_payload(prefix: bytes, entity: int, topic: str, type_name: str) -> bytes:
    return (b"\x00\x03\x00\x00"  # PL_CDR_LE
            + param(PID_ENDPOINT_GUID, prefix + struct.pack(">I", entity))
            + param(PID_TOPIC_NAME, cdr_string(topic))
            + param(PID_TYPE_NAME, cdr_string(type_name))
            + param(PID_SENTINEL, b""))


def spdp_payload(prefix: bytes) -> bytes:
    return (b"\x00\x03\x00\x00" + param(PID_PARTICIPANT_GUID, prefix + b"\x00\x00\x01\xc1")
            + param(PID_VENDOR_ID, struct.pack(">H", VENDOR)) + param(PID_SENTINEL, b""))


# ---- UDP / IPv4 / Ethernet --------------------------------------------------

ETH = b"\x01\x00\x5e\x7f\x00\x01\x02\x00\x00\x00\x00\x01\x08\x00"


def ip4(a: int) -> bytes:
    return struct.pack(">I", a)


SRC_IP = 0x0A000001  # 10.0.0.1
DST_IP = 0xEFFF0001  # 239.255.0.1 (the SPDP multicast group)


def frame(payload: bytes, ident: int = 0, src: int = SRC_IP, dst: int = DST_IP, sport: int = 40000, dport: int = 7401,
          frag_off: int = 0, more: bool = False, udp_header: bool = True) -> bytes:
    """One Ethernet/IPv4 frame; with `udp_header` the payload gets a UDP header
    (datagram length from the payload), else it is a raw IP fragment body."""
    l4 = struct.pack(">HHHH", sport, dport, 8 + len(payload), 0) + payload if udp_header else payload
    ff = (0x2000 if more else 0) | (frag_off // 8)
    ip = struct.pack(">BBHHHBBH", 0x45, 0, 20 + len(l4), ident & 0xFFFF, ff, 64, 17, 0) + ip4(src) + ip4(dst)
    return ETH + ip + l4


def rtps_frame(prefix: bytes, subs: bytes, **kw) -> bytes:
    return frame(header(prefix) + subs, **kw)


# ---- scenarios --------------------------------------------------------------

def prefix_of(i: int, tag: int = 0xAA) -> bytes:
    return struct.pack(">BBHQ", 0x01, tag, 0, i)


def writers(out: Out, n: int, samples: int = 1) -> None:
    """n writers (one participant each), `samples` DATA per writer, 1 µs apart."""
    payload = b"\x00\x01\x00\x00" + b"x" * 12
    t = T0
    for k in range(1, samples + 1):
        for i in range(n):
            p = prefix_of(i)
            out.add(t, rtps_frame(p, info_ts((t // 1_000_000_000) & 0x7FFFFFFF) + data(0, USER_W, k, payload), dport=7411))
            t += 1_000


def topics(out: Out, n: int) -> None:
    """n topics: an SEDP publication and a subscription each, then one DATA per writer."""
    p = prefix_of(1, 0xBB)
    t = T0
    for i in range(n):
        ent_w = (i << 8) | 0x03
        ent_r = (i << 8) | 0x04
        topic = f"rt/hostile/topic_{i}"
        pub = data(SEDP_PUB_R, SEDP_PUB_W, i + 1, sedp_payload(p, ent_w, topic, "std_msgs::msg::dds_::String_"))
        subm = data(SEDP_SUB_R, SEDP_SUB_W, i + 1, sedp_payload(p, ent_r, topic, "std_msgs::msg::dds_::String_"))
        out.add(t, rtps_frame(p, pub))
        out.add(t + 100, rtps_frame(p, subm))
        t += 1_000
    payload = b"\x00\x01\x00\x00" + b"hello\0\0\0"
    for i in range(n):
        out.add(t, rtps_frame(p, data(0, (i << 8) | 0x03, 1, payload), dport=7411))
        t += 1_000


def destinations(out: Out, n: int) -> None:
    """One fragmented sample (2^20 fragments of 64 bytes announced) and one
    unfragmented sample, each sent to n destinations (distinct IP and port)."""
    p = prefix_of(7, 0xCC)
    t = T0
    frag = data_frag(0, USER_W, 1, 1, 1, 64, 64 << 20, b"\x00\x01\x00\x00" + b"f" * 60)
    one = data(0, USER_W, 2, b"\x00\x01\x00\x00" + b"d" * 12)
    for sm in (frag, one):
        for i in range(n):
            dst = 0x0A010000 + (i % 60000)
            out.add(t, rtps_frame(p, sm, dst=dst, dport=7411 + i // 60000))
            t += 1_000


def fragflood(out: Out, n: int) -> None:
    """n samples (distinct sn) each announcing 2^20 fragments of 64 bytes and
    sending only the last one."""
    p = prefix_of(9, 0xDD)
    t = T0
    last = 1 << 20
    for i in range(n):
        sm = data_frag(0, USER_W, i + 1, last, 1, 64, 64 << 20, b"z" * 64)
        out.add(t, rtps_frame(p, sm, dport=7411))
        t += 1_000


def ipflood(out: Out, n: int) -> None:
    """n IPv4 datagrams of 64 000 bytes whose fragments arrive in order up to
    ~48 KB; the rest never comes."""
    t = T0
    chunk = b"\0" * 1480
    for i in range(n):
        src = 0x0A020000 + (i >> 16)
        ident = i & 0xFFFF
        udp = struct.pack(">HHHH", 40000, 7411, 64_000, 0) + header(prefix_of(i, 0xEE))
        first = udp + b"\0" * (1480 - len(udp))
        out.add(t, frame(first, ident=ident, src=src, more=True, udp_header=False))
        for k in range(1, 33):
            out.add(t + k, frame(chunk, ident=ident, src=src, frag_off=k * 1480, more=True, udp_header=False))
        t += 1_000


def ipholes(out: Out, n: int, holes: int = 200) -> None:
    """n datagrams each sent as `holes` 8-byte fragments 16 bytes apart (never complete)."""
    t = T0
    piece = b"\0" * 8
    for i in range(n):
        src = 0x0A030000 + (i >> 16)
        ident = i & 0xFFFF
        for k in range(holes):
            out.add(t + k, frame(piece, ident=ident, src=src, frag_off=k * 16, more=True, udp_header=False))
        t += 1_000


def discfrag(out: Out, n: int) -> None:
    """n SEDP publications as DATA_FRAG announcing 1 MiB, first fragment only."""
    t = T0
    for i in range(n):
        p = prefix_of(i, 0xF0)
        sm = data_frag(SEDP_PUB_R, SEDP_PUB_W, 1, 1, 1, 1024, 1 << 20, b"\x00\x03\x00\x00" + b"\0" * 1020)
        out.add(t, rtps_frame(p, sm))
        t += 1_000


LONG_TOPIC_BYTES = 59_000
LONG_TYPE_BYTES = 4_000


def longnames(out: Out, n: int) -> None:
    """n SEDP publications with distinct names of LONG_TOPIC_BYTES (topic) and
    LONG_TYPE_BYTES (type), each from its own participant, then one DATA per
    writer. Each announcement is one ~63 KB UDP datagram in one frame."""
    t = T0
    filler_topic = "n" * (LONG_TOPIC_BYTES - 12)
    type_name = "T" * LONG_TYPE_BYTES
    for i in range(n):
        p = prefix_of(i, 0x1A)
        topic = f"rt/{i:09d}" + filler_topic  # 3 + 9 + filler = LONG_TOPIC_BYTES
        pub = data(SEDP_PUB_R, SEDP_PUB_W, 1, sedp_payload(p, USER_W, topic, type_name))
        out.add(t, rtps_frame(p, pub))
        t += 1_000
    payload = b"\x00\x01\x00\x00" + b"long\0\0\0\0"
    for i in range(n):
        out.add(t, rtps_frame(prefix_of(i, 0x1A), data(0, USER_W, 1, payload), dport=7411))
        t += 1_000


IMAX, IMIN = (1 << 63) - 1, -(1 << 63)
# DATA sequence numbers of each snjump writer, then its DATA_FRAG ones.
SNJUMP_DATA = [1, 2, IMAX, IMAX - 1, 5, IMIN, IMIN + 1, 0, -1, 1 << 62, -(1 << 62), 3, IMAX]
SNJUMP_FRAG = [IMAX, IMIN, 1]


def snjump_gaps() -> int:
    """The exact sn_gaps of one snjump writer: numbers skipped above the
    highest seen so far, summed without overflow, capped at 2^64 - 1. DATA
    and DATA_FRAG whose writerSN is not strictly positive are invalid (RTPS
    2.5 8.3.7.2.3, 8.3.7.3.3) and are no samples: they are left out."""
    top, gaps = None, 0
    for s in (s for s in SNJUMP_DATA + SNJUMP_FRAG if s > 0):
        if top is not None and s > top:
            gaps += s - top - 1
        top = s if top is None else max(top, s)
    return min(gaps, (1 << 64) - 1)


def inflight(out: Out, n: int) -> None:
    """n samples of 10 DATA_FRAG fragments seen whole at both capture
    points, then one whose last 5 fragments pc2 never captures (its capture
    ends): delivered n, incomplete 1, lost 0."""
    assert len(out.w) == 2, "inflight needs --pair"
    p = prefix_of(3, 0x1F)
    t = T0
    for s in range(1, n + 2):
        for k in range(10):
            sm = data_frag(0, USER_W, s, k + 1, 1, 100, 1000, b"i" * 100)
            out.add(t, rtps_frame(p, sm, dport=7411), only=None if s <= n or k < 5 else 0)
            t += 10_000
        t += 10_000_000


def snjump(out: Out, n: int) -> None:
    """A writer whose sequence numbers jump across the whole signed 64-bit
    range, HEARTBEATs and DATA_FRAGs with extreme numbers, INFO_TS at the
    limits; repeated n times (different writers)."""
    seqs = SNJUMP_DATA
    payload = b"\x00\x01\x00\x00" + b"j" * 12
    t = T0
    for r in range(n):
        p = prefix_of(r, 0x5A)
        for s in seqs:
            subs = info_ts(0x7FFFFFFF, 0xFFFFFFFF) + data(0, USER_W, s, payload)
            out.add(t, rtps_frame(p, subs, dport=7411))
            t += 1_000
        for s in SNJUMP_FRAG:
            subs = info_ts(-0x80000000, 0) + data_frag(0, USER_W, s, 0xFFFFFFFF, 0xFFFF, 0xFFFF, 0xFFFFFFFF, b"q" * 64)
            out.add(t, rtps_frame(p, subs, dport=7411))
            subs = heartbeat(0, USER_W, IMIN, IMAX, 0x7FFFFFFF) + heartbeat(0, USER_W, IMAX, IMIN, -1)
            out.add(t + 10, rtps_frame(p, subs, dport=7411))
            t += 1_000


SCENARIOS = {
    "writers": writers,
    "topics": topics,
    "destinations": destinations,
    "fragflood": fragflood,
    "ipflood": ipflood,
    "ipholes": ipholes,
    "discfrag": discfrag,
    "longnames": longnames,
    "snjump": snjump,
    "inflight": inflight,
}


def generate(scenario: str, n: int, path: str, pair: str | None = None, samples: int = 1, holes: int = 200) -> None:
    out = Out(str(path), str(pair) if pair else None)
    try:
        if scenario == "writers":
            writers(out, n, samples)
        elif scenario == "ipholes":
            ipholes(out, n, holes)
        else:
            SCENARIOS[scenario](out, n)
    finally:
        out.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    ap.add_argument("n", type=int)
    ap.add_argument("out")
    ap.add_argument("--pair", help="second capture point: the same traffic 1 ms later")
    ap.add_argument("--samples", type=int, default=1, help="writers: samples per writer")
    ap.add_argument("--holes", type=int, default=200, help="ipholes: fragments per datagram")
    a = ap.parse_args()
    generate(a.scenario, a.n, a.out, a.pair, a.samples, a.holes)


if __name__ == "__main__":
    main()
