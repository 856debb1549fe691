"""Builds small, exactly known RTPS captures for the oracle's own unit tests.

Real captures rarely contain INFO_SRC, GAP, NACK_FRAG, big-endian
submessages, vendor submessages or stacked VLAN tags, yet the tshark walker
must handle all of them. This module writes classic pcap files (nanosecond
magic) whose every byte is chosen here, so a test knows the expected value of
each field without trusting either dissector.

Only the Python standard library is used. Layouts follow the OMG RTPS 2.5
specification (section 9.4 "Mapping of the RTPS Messages").
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

# Submessage ids (RTPS 2.5 table 9.13).
PAD, ACKNACK, HEARTBEAT, GAP, INFO_TS = 0x01, 0x06, 0x07, 0x08, 0x09
INFO_SRC, INFO_REPLY_IP4, INFO_DST, INFO_REPLY = 0x0C, 0x0D, 0x0E, 0x0F
NACK_FRAG, HEARTBEAT_FRAG, DATA, DATA_FRAG = 0x12, 0x13, 0x15, 0x16

E = 0x01  # endianness flag: 1 = little endian


def _bo(le: bool) -> str:
    return "<" if le else ">"


def submessage(sm_id: int, flags: int, body: bytes, le: bool = True, octets_to_next: int | None = None) -> bytes:
    """Submessage header + body. The E flag is forced to match `le`."""
    flags = (flags | E) if le else (flags & ~E)
    n = len(body) if octets_to_next is None else octets_to_next
    return struct.pack(_bo(le) + "BBH", sm_id, flags & 0xFF, n) + body


def sn(value: int, le: bool) -> bytes:
    """SequenceNumber_t: high int32, low uint32."""
    return struct.pack(_bo(le) + "iI", value >> 32, value & 0xFFFFFFFF)


def sn_set(base: int, num_bits: int, le: bool, bits: int = 0) -> bytes:
    words = (num_bits + 31) // 32
    out = sn(base, le) + struct.pack(_bo(le) + "I", num_bits)
    for w in range(words):
        out += struct.pack(_bo(le) + "I", (bits >> (32 * w)) & 0xFFFFFFFF)
    return out


def frag_set(base: int, num_bits: int, le: bool) -> bytes:
    words = (num_bits + 31) // 32
    return struct.pack(_bo(le) + "II", base, num_bits) + b"\xff\xff\xff\xff" * words


def eid(value: int) -> bytes:
    """EntityId_t is an octet array: always big-endian on the wire."""
    return struct.pack(">I", value)


def rtps_header(prefix: bytes, vendor: int = 0x0110, version: tuple[int, int] = (2, 3)) -> bytes:
    assert len(prefix) == 12
    return b"RTPS" + bytes(version) + struct.pack(">H", vendor) + prefix


# ---- submessage bodies ------------------------------------------------------

def data(reader: int, writer: int, seq: int, payload: bytes, le: bool = True, inline_qos: bytes | None = None) -> bytes:
    flags = 0x04  # D
    body = struct.pack(_bo(le) + "HH", 0, 16) + eid(reader) + eid(writer) + sn(seq, le)
    if inline_qos is not None:
        flags |= 0x02
        body += inline_qos
    return submessage(DATA, flags, body + payload, le)


def data_frag(reader: int, writer: int, seq: int, start: int, count: int, frag_size: int, sample_size: int,
              payload: bytes, le: bool = True) -> bytes:
    body = (struct.pack(_bo(le) + "HH", 0, 28) + eid(reader) + eid(writer) + sn(seq, le)
            + struct.pack(_bo(le) + "IHHI", start, count, frag_size, sample_size))
    return submessage(DATA_FRAG, 0, body + payload, le)


def heartbeat(reader: int, writer: int, first: int, last: int, count: int, le: bool = True) -> bytes:
    body = eid(reader) + eid(writer) + sn(first, le) + sn(last, le) + struct.pack(_bo(le) + "i", count)
    return submessage(HEARTBEAT, 0, body, le)


def acknack(reader: int, writer: int, base: int, num_bits: int, count: int, le: bool = True, bits: int = 0) -> bytes:
    body = eid(reader) + eid(writer) + sn_set(base, num_bits, le, bits) + struct.pack(_bo(le) + "i", count)
    return submessage(ACKNACK, 0x02, body, le)


def gap(reader: int, writer: int, start: int, list_base: int, num_bits: int, le: bool = True) -> bytes:
    body = eid(reader) + eid(writer) + sn(start, le) + sn_set(list_base, num_bits, le, (1 << num_bits) - 1 if num_bits else 0)
    return submessage(GAP, 0, body, le)


def nack_frag(reader: int, writer: int, seq: int, base: int, num_bits: int, count: int, le: bool = True) -> bytes:
    body = eid(reader) + eid(writer) + sn(seq, le) + frag_set(base, num_bits, le) + struct.pack(_bo(le) + "i", count)
    return submessage(NACK_FRAG, 0, body, le)


def heartbeat_frag(reader: int, writer: int, seq: int, last_frag: int, count: int, le: bool = True) -> bytes:
    body = eid(reader) + eid(writer) + sn(seq, le) + struct.pack(_bo(le) + "Ii", last_frag, count)
    return submessage(HEARTBEAT_FRAG, 0, body, le)


def info_ts(sec: int, frac: int, le: bool = True) -> bytes:
    return submessage(INFO_TS, 0, struct.pack(_bo(le) + "iI", sec, frac), le)


def info_dst(prefix: bytes, le: bool = True) -> bytes:
    return submessage(INFO_DST, 0, prefix, le)


def info_src(prefix: bytes, vendor: int = 0x010F, le: bool = True) -> bytes:
    return submessage(INFO_SRC, 0, b"\0\0\0\0" + bytes((2, 3)) + struct.pack(">H", vendor) + prefix, le)


def info_reply_ip4(addr: str, port: int, le: bool = True) -> bytes:
    """LocatorUDPv4_t: address and port are unsigned longs in the submessage's byte order."""
    a = int.from_bytes(bytes(map(int, addr.split("."))), "big")
    return submessage(INFO_REPLY_IP4, 0, struct.pack(_bo(le) + "II", a, port), le)


def pad(le: bool = True) -> bytes:
    return submessage(PAD, 0, b"", le)


def vendor(sm_id: int, body: bytes, le: bool = True) -> bytes:
    return submessage(sm_id, 0, body, le)


def sedp_publication(writer_entity: int, topic: str, type_name: str, prefix: bytes, le: bool = True) -> bytes:
    """An SEDP publication DATA (writer 0x000003c2) announcing topic and type (PL_CDR)."""
    bo = _bo(le)

    def string_param(pid: int, s: str) -> bytes:
        raw = s.encode() + b"\0"
        v = struct.pack(bo + "I", len(raw)) + raw
        v += b"\0" * (-len(v) % 4)
        return struct.pack(bo + "HH", pid, len(v)) + v

    params = (string_param(0x0005, topic) + string_param(0x0007, type_name)
              + struct.pack(bo + "HH", 0x005A, 16) + prefix + eid(writer_entity)
              + struct.pack(bo + "HH", 0x0001, 0))
    encap = b"\x00\x03\x00\x00" if le else b"\x00\x02\x00\x00"  # PL_CDR_LE / PL_CDR_BE
    return data(0x000003C7, 0x000003C2, 1, encap + params, le)


# ---- link, network and transport layers -------------------------------------

def _csum(data_: bytes) -> int:
    if len(data_) % 2:
        data_ += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data_) // 2), data_))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def udp(sport: int, dport: int, payload: bytes) -> bytes:
    # Checksum 0 = "not computed", valid for UDP over IPv4.
    return struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload


def ipv4_fragments(src: str, dst: str, l4: bytes, ident: int, mtu_payload: int | None = None, proto: int = 17) -> list[bytes]:
    """IPv4 packets carrying `l4`, split at `mtu_payload` (multiple of 8) bytes if given."""
    chunks = [l4] if mtu_payload is None else [l4[i:i + mtu_payload] for i in range(0, len(l4), mtu_payload)]
    out, off = [], 0
    for i, chunk in enumerate(chunks):
        more = i < len(chunks) - 1
        flags_off = (0x2000 if more else 0) | (off // 8)
        hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(chunk), ident, flags_off, 32, proto, 0,
                          bytes(map(int, src.split("."))), bytes(map(int, dst.split("."))))
        hdr = hdr[:10] + struct.pack("!H", _csum(hdr)) + hdr[12:]
        out.append(hdr + chunk)
        off += len(chunk)
    return out


def ipv6(src16: bytes, dst16: bytes, l4: bytes, next_header: int = 17) -> bytes:
    return struct.pack("!IHBB", 0x60000000, len(l4), next_header, 64) + src16 + dst16 + l4


def ethernet(payload: bytes, ethertype: int, tags: list[tuple[int, int, int]] = ()) -> bytes:
    """Ethernet II frame; `tags` = [(tpid, pcp, vid), …] outermost first."""
    out = b"\x01\x00\x5e\x7f\x00\x01" + b"\x02\x00\x00\x00\x00\x01"
    for tpid, pcp, vid in tags:
        out += struct.pack("!HH", tpid, (pcp << 13) | vid)
    return out + struct.pack("!H", ethertype) + payload


@dataclass
class Pcap:
    """A classic pcap file with nanosecond timestamps (magic a1b23c4d)."""
    linktype: int = 1  # LINKTYPE_ETHERNET
    frames: list[tuple[int, bytes]] = field(default_factory=list)

    def add(self, frame: bytes, ts_ns: int | None = None) -> int:
        if ts_ns is None:
            ts_ns = 1_700_000_000_000_000_000 + 1_000_000 * len(self.frames)
        self.frames.append((ts_ns, frame))
        return len(self.frames)  # 1-based frame number

    def write(self, path) -> None:
        with open(path, "wb") as f:
            f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, self.linktype))
            for ts, fr in self.frames:
                f.write(struct.pack("<IIII", ts // 1_000_000_000, ts % 1_000_000_000, len(fr), len(fr)) + fr)
